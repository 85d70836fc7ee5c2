//! ARRAY arguments: `/dev/graidN`, `graidN`, `N`, `/dev/graid/NAME`, `NAME`, or any path that
//! resolves to `/dev/graidN` (e.g. a `/dev/disk/by-id/graid-uuid-*` link), and finding the
//! running array they mean (LIST + DETAIL).

use crate::control::ControlDevice;
use crate::errno::{ioctl_error, Op};
use crate::error::CtlError;
use crate::member::System;
use crate::output::{array_device, name_str};
use graid_abi::{GraidDetail, GRAID_MAX_ARRAYS};

/// A parsed ARRAY argument.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ArrayRef {
    /// `/dev/graidN`: the index N, unambiguously.
    Device(u32),
    /// `graidN` or `N`: the index N, unless it is also the name of another array (then the
    /// argument is ambiguous and refused).
    Bare { index: u32, text: String },
    /// `/dev/graid/NAME` or a plain `NAME`.
    Name(String),
    /// Another path, resolved through its symlinks.
    Path(String),
}

fn parse_index(digits: &str) -> Option<u32> {
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Parses an ARRAY argument.
pub fn parse(text: &str) -> Result<ArrayRef, CtlError> {
    if text.is_empty() {
        return Err(CtlError::Usage("ARRAY must not be empty".to_owned()));
    }
    if let Some(name) = text.strip_prefix("/dev/graid/") {
        if name.is_empty() || name.contains('/') {
            return Err(CtlError::Usage(format!(
                "'{text}' is not an array: expected /dev/graid/NAME"
            )));
        }
        return Ok(ArrayRef::Name(name.to_owned()));
    }
    if let Some(index) = text.strip_prefix("/dev/graid").and_then(parse_index) {
        return Ok(ArrayRef::Device(index));
    }
    if text.starts_with('/') {
        return Ok(ArrayRef::Path(text.to_owned()));
    }
    let bare = text.strip_prefix("graid").unwrap_or(text);
    if let Some(index) = parse_index(bare) {
        return Ok(ArrayRef::Bare {
            index,
            text: text.to_owned(),
        });
    }
    Ok(ArrayRef::Name(text.to_owned()))
}

/// DETAIL of every running array, in LIST order. Arrays that stop between the two ioctls are
/// left out.
pub fn running_arrays(ctl: &dyn ControlDevice) -> Result<Vec<GraidDetail>, CtlError> {
    let list = ctl.list().map_err(|e| ioctl_error(Op::List, &e))?;
    let count = (list.count as usize).min(GRAID_MAX_ARRAYS);
    let mut arrays = Vec::with_capacity(count);
    for &index in &list.indices[..count] {
        match ctl.detail(index) {
            Ok(detail) => arrays.push(detail),
            Err(e) if e.raw_os_error() == Some(libc::ENODEV) => {}
            Err(e) => {
                let array = array_device(index);
                return Err(ioctl_error(Op::Detail { array: &array }, &e));
            }
        }
    }
    Ok(arrays)
}

fn detail_of(ctl: &dyn ControlDevice, index: u32) -> Result<GraidDetail, CtlError> {
    let array = array_device(index);
    ctl.detail(index).map_err(|e| match e.raw_os_error() {
        Some(libc::ENODEV) | Some(libc::ENXIO) => {
            CtlError::Failed(format!("no such array: {array} is not running"))
        }
        _ => ioctl_error(Op::Detail { array: &array }, &e),
    })
}

/// The running array `array` refers to.
pub fn resolve(
    ctl: &dyn ControlDevice,
    sys: &dyn System,
    array: &ArrayRef,
) -> Result<GraidDetail, CtlError> {
    match array {
        ArrayRef::Device(index) => detail_of(ctl, *index),
        ArrayRef::Bare { index, text } => {
            let arrays = running_arrays(ctl)?;
            let by_index = arrays.iter().find(|a| a.index == *index);
            let by_name = arrays.iter().find(|a| name_str(&a.name) == *text);
            match (by_index, by_name) {
                (Some(a), Some(b)) if a.index != b.index => Err(CtlError::Usage(format!(
                    "'{text}' is ambiguous: {} is array '{}', and the array named '{text}' is \
                     {}; write {} or /dev/graid/{text}",
                    array_device(a.index),
                    name_str(&a.name),
                    array_device(b.index),
                    array_device(a.index),
                ))),
                (Some(a), _) | (None, Some(a)) => Ok(*a),
                (None, None) => Err(CtlError::Failed(format!(
                    "no such array: {} is not running and no array is named '{text}'",
                    array_device(*index)
                ))),
            }
        }
        ArrayRef::Name(name) => running_arrays(ctl)?
            .into_iter()
            .find(|a| name_str(&a.name) == *name)
            .ok_or_else(|| CtlError::Failed(format!("no such array: none is named '{name}'"))),
        ArrayRef::Path(path) => {
            let target = sys
                .canonicalize(path)
                .map_err(|e| CtlError::io(format!("array {path}"), e))?;
            let target = target.to_string_lossy();
            match parse(&target)? {
                ArrayRef::Device(index) => detail_of(ctl, index),
                _ => Err(CtlError::Failed(format!(
                    "{path} is not a graid array (it is {target}; expected /dev/graidN)"
                ))),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::fake::{array, FakeControl};
    use crate::error::{EXIT_FAILURE, EXIT_USAGE};
    use crate::member::fake::FakeSystem;

    #[test]
    fn parses_every_form() {
        assert_eq!(parse("/dev/graid3").unwrap(), ArrayRef::Device(3));
        let bare = |index, text: &str| ArrayRef::Bare {
            index,
            text: text.to_owned(),
        };
        assert_eq!(parse("graid3").unwrap(), bare(3, "graid3"));
        assert_eq!(parse("3").unwrap(), bare(3, "3"));
        assert_eq!(
            parse("/dev/graid/data").unwrap(),
            ArrayRef::Name("data".into())
        );
        assert_eq!(parse("data").unwrap(), ArrayRef::Name("data".into()));
        assert_eq!(parse("graid").unwrap(), ArrayRef::Name("graid".into()));
        assert_eq!(parse("graid3x").unwrap(), ArrayRef::Name("graid3x".into()));
        assert_eq!(parse("-1").unwrap(), ArrayRef::Name("-1".into()));
        assert_eq!(
            parse("/dev/graid3p1").unwrap(),
            ArrayRef::Path("/dev/graid3p1".into())
        );
        assert_eq!(
            parse("/dev/disk/by-id/graid-uuid-x").unwrap(),
            ArrayRef::Path("/dev/disk/by-id/graid-uuid-x".into())
        );
        // Too big for an index: a name (which cannot exist, names are at most 31 bytes).
        assert_eq!(
            parse("99999999999").unwrap(),
            ArrayRef::Name("99999999999".into())
        );
    }

    #[test]
    fn refuses_malformed_forms() {
        for bad in ["", "/dev/graid/", "/dev/graid/a/b"] {
            assert_eq!(parse(bad).unwrap_err().exit_code(), EXIT_USAGE, "{bad}");
        }
    }

    fn fake() -> FakeControl {
        FakeControl::with(vec![
            array(0, "data", 10, &[(259, 0, 0), (259, 1, 0)]),
            array(3, "graid0", 1, &[(259, 2, 0), (259, 3, 0)]),
            array(5, "3", 1, &[(259, 4, 0), (259, 5, 0)]),
            array(7, "7", 1, &[(259, 6, 0), (259, 7, 0)]),
        ])
    }

    fn index_of(text: &str) -> Result<u32, CtlError> {
        let mut sys = FakeSystem::default();
        sys.links
            .push(("/dev/disk/by-id/graid-uuid-a".into(), "/dev/graid5".into()));
        sys.links.push(("/dev/sdz-link".into(), "/dev/sdz".into()));
        resolve(&fake(), &sys, &parse(text)?).map(|d| d.index)
    }

    #[test]
    fn resolves_indices_names_and_links() {
        assert_eq!(index_of("/dev/graid0").unwrap(), 0);
        assert_eq!(index_of("data").unwrap(), 0);
        assert_eq!(index_of("/dev/graid/data").unwrap(), 0);
        assert_eq!(index_of("/dev/graid/3").unwrap(), 5);
        assert_eq!(index_of("/dev/graid3").unwrap(), 3);
        assert_eq!(index_of("7").unwrap(), 7, "name and index agree");
        assert_eq!(index_of("graid5").unwrap(), 5);
        assert_eq!(index_of("/dev/disk/by-id/graid-uuid-a").unwrap(), 5);
    }

    #[test]
    fn ambiguous_bare_forms_are_refused() {
        let err = index_of("3").unwrap_err();
        assert_eq!(err.exit_code(), EXIT_USAGE);
        assert_eq!(
            err.to_string(),
            "'3' is ambiguous: /dev/graid3 is array 'graid0', and the array named '3' is \
             /dev/graid5; write /dev/graid3 or /dev/graid/3"
        );
        let err = index_of("graid0").unwrap_err();
        assert!(err.to_string().contains("ambiguous"), "{err}");
    }

    #[test]
    fn missing_arrays_are_named() {
        let err = index_of("/dev/graid9").unwrap_err();
        assert_eq!(err.exit_code(), EXIT_FAILURE);
        assert_eq!(err.to_string(), "no such array: /dev/graid9 is not running");
        let err = index_of("9").unwrap_err();
        assert_eq!(
            err.to_string(),
            "no such array: /dev/graid9 is not running and no array is named '9'"
        );
        let err = index_of("nope").unwrap_err();
        assert_eq!(err.to_string(), "no such array: none is named 'nope'");
        let err = index_of("/dev/sdz-link").unwrap_err();
        assert_eq!(
            err.to_string(),
            "/dev/sdz-link is not a graid array (it is /dev/sdz; expected /dev/graidN)"
        );
        let err = index_of("/dev/missing").unwrap_err();
        assert!(err.to_string().starts_with("array /dev/missing: "), "{err}");
    }
}
