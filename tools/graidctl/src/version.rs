//! `graidctl version`: tool and module versions, and whether their ABIs agree.

use crate::control::{Control, ControlDevice};
use crate::error::CtlError;
use graid_abi::{GraidVersion, GRAID_ABI_VERSION, GRAID_CONTROL_NAME};
use serde::Serialize;

#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct Component {
    pub version: String,
    pub abi: u32,
}

#[derive(Debug, Serialize)]
pub struct Versions {
    pub graidctl: Component,
    pub module: Component,
}

pub fn tool_component() -> Component {
    Component {
        version: env!("CARGO_PKG_VERSION").to_owned(),
        abi: GRAID_ABI_VERSION,
    }
}

/// Checks that the module's answer is one this graidctl understands.
pub fn check_module(answer: &GraidVersion) -> Result<Component, CtlError> {
    let module = Component {
        version: answer.module_version_str().to_owned(),
        abi: answer.abi_version,
    };
    let size_ok = answer.struct_size as usize == std::mem::size_of::<GraidVersion>();
    if module.abi != GRAID_ABI_VERSION || !size_ok {
        return Err(CtlError::AbiMismatch {
            tool: GRAID_ABI_VERSION,
            module: module.abi,
            module_version: module.version,
        });
    }
    Ok(module)
}

pub fn run(json: bool) -> Result<String, CtlError> {
    let control = Control::open()?;
    let answer = control.version().map_err(|source| CtlError::Io {
        what: format!("VERSION ioctl on /dev/{GRAID_CONTROL_NAME}"),
        source,
    })?;
    let versions = Versions {
        graidctl: tool_component(),
        module: check_module(&answer)?,
    };
    Ok(if json {
        crate::output::json(&versions)
    } else {
        format!(
            "graidctl {} (ABI {})\nraid_gpu {} (ABI {})\n",
            versions.graidctl.version,
            versions.graidctl.abi,
            versions.module.version,
            versions.module.abi
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(abi: u32, size: usize, version: &str) -> GraidVersion {
        let mut v = GraidVersion::ZERO;
        v.abi_version = abi;
        v.struct_size = size as u32;
        v.module_version[..version.len()].copy_from_slice(version.as_bytes());
        v
    }

    #[test]
    fn matching_module_is_accepted() {
        let size = std::mem::size_of::<GraidVersion>();
        let module = check_module(&answer(GRAID_ABI_VERSION, size, "0.1.0")).unwrap();
        assert_eq!(
            module,
            Component {
                version: "0.1.0".into(),
                abi: GRAID_ABI_VERSION
            }
        );
    }

    #[test]
    fn other_abi_version_is_refused_with_both_numbers() {
        let size = std::mem::size_of::<GraidVersion>();
        let err = check_module(&answer(GRAID_ABI_VERSION + 1, size, "9.9.9")).unwrap_err();
        assert_eq!(err.exit_code(), crate::error::EXIT_ABI_MISMATCH);
        let msg = err.to_string();
        assert!(
            msg.contains(&format!("ABI {}", GRAID_ABI_VERSION + 1)),
            "{msg}"
        );
        assert!(msg.contains("9.9.9"), "{msg}");
    }

    #[test]
    fn other_struct_layout_is_refused() {
        let err = check_module(&answer(GRAID_ABI_VERSION, 8, "0.1.0")).unwrap_err();
        assert_eq!(err.exit_code(), crate::error::EXIT_ABI_MISMATCH);
    }
}
