//! graidctl's errors and the exit status each one maps to (documented in `graidctl --help`).

use std::io;
use thiserror::Error;

/// Exit status of a command that failed for a reason not listed below.
pub const EXIT_FAILURE: u8 = 1;
/// Exit status of a usage error (clap's own convention), including option values graidctl
/// refuses before doing anything (bad chunk size, name, member count, UUID, ARRAY form).
pub const EXIT_USAGE: u8 = 2;
/// Exit status when the `raid_gpu` module is not loaded.
pub const EXIT_NO_MODULE: u8 = 3;
/// Exit status when the module speaks another ABI version than this graidctl, or lacks an
/// ioctl this graidctl needs (`ENOTTY`).
pub const EXIT_ABI_MISMATCH: u8 = 4;
/// Exit status when the caller lacks the privilege the operation needs.
pub const EXIT_PERMISSION: u8 = 5;
/// Exit status of `monitor --oneshot` when an array is degraded (and none has failed).
pub const EXIT_DEGRADED: u8 = 6;
/// Exit status of `monitor --oneshot` when an array has failed (I/O fails on it).
pub const EXIT_ARRAY_FAILED: u8 = 7;
/// Exit status of `monitor --oneshot` when the `raid_gpu` module is not loaded and not
/// installed for the running kernel either (no array can start under it).
pub const EXIT_MODULE_MISSING: u8 = 8;

#[derive(Debug, Error)]
pub enum CtlError {
    #[error("{path} not found: is the raid_gpu module loaded? (try: modprobe raid_gpu)")]
    NoModule { path: String },
    #[error("permission denied opening {path}: graid's control device needs root (CAP_SYS_ADMIN)")]
    Permission { path: String },
    #[error(
        "ABI mismatch: graidctl speaks graid ABI {tool} but the loaded raid_gpu module \
         (version {module_version}) speaks ABI {module}; install matching graidctl and module"
    )]
    AbiMismatch {
        tool: u32,
        module: u32,
        module_version: String,
    },
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: io::Error,
    },
    /// The command line asks for something impossible; nothing was done.
    #[error("{0}")]
    Usage(String),
    /// The operation failed; the message names the device and the reason.
    #[error("{0}")]
    Failed(String),
    /// The operation needs a privilege the caller lacks.
    #[error("{0}")]
    Denied(String),
    /// The loaded module does not implement an ioctl graidctl needs.
    #[error("{0}")]
    Unsupported(String),
    /// Part of a multi-array operation failed: `stdout` is the report to print anyway.
    #[error("{message}")]
    Partial { stdout: String, message: String },
    /// A health check found arrays not optimal, or none can start: `stdout` is the report,
    /// `code` says how bad (`EXIT_DEGRADED`, `EXIT_ARRAY_FAILED`, `EXIT_MODULE_MISSING`).
    #[error("{message}")]
    Unhealthy {
        stdout: String,
        message: String,
        code: u8,
    },
}

impl CtlError {
    pub fn exit_code(&self) -> u8 {
        match self {
            CtlError::NoModule { .. } => EXIT_NO_MODULE,
            CtlError::Permission { .. } | CtlError::Denied(_) => EXIT_PERMISSION,
            CtlError::AbiMismatch { .. } | CtlError::Unsupported(_) => EXIT_ABI_MISMATCH,
            CtlError::Usage(_) => EXIT_USAGE,
            CtlError::Io { .. } | CtlError::Failed(_) | CtlError::Partial { .. } => EXIT_FAILURE,
            CtlError::Unhealthy { code, .. } => *code,
        }
    }

    /// An I/O error on a file or device graidctl opened itself (not the control device):
    /// `EACCES`/`EPERM` become exit status 5, everything else 1.
    pub fn io(what: impl Into<String>, source: io::Error) -> Self {
        let what = what.into();
        match source.raw_os_error() {
            Some(libc::EACCES) | Some(libc::EPERM) => {
                CtlError::Denied(format!("{what}: permission denied (run as root)"))
            }
            _ => CtlError::Io { what, source },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_permission_errors_exit_5() {
        let e = CtlError::io(
            "opening /dev/sdz",
            io::Error::from_raw_os_error(libc::EACCES),
        );
        assert_eq!(e.exit_code(), EXIT_PERMISSION);
        assert_eq!(
            e.to_string(),
            "opening /dev/sdz: permission denied (run as root)"
        );
        let e = CtlError::io("reading /dev/sdz", io::Error::from_raw_os_error(libc::EIO));
        assert_eq!(e.exit_code(), EXIT_FAILURE);
        assert!(e.to_string().starts_with("reading /dev/sdz: "), "{e}");
    }
}
