//! graidctl's errors and the exit status each one maps to (documented in `graidctl --help`).

use std::io;
use thiserror::Error;

/// Exit status of a command that failed for a reason not listed below.
pub const EXIT_FAILURE: u8 = 1;
/// Exit status of a usage error (clap's own convention).
pub const EXIT_USAGE: u8 = 2;
/// Exit status when the `raid_gpu` module is not loaded.
pub const EXIT_NO_MODULE: u8 = 3;
/// Exit status when the module speaks another ABI version than this graidctl.
pub const EXIT_ABI_MISMATCH: u8 = 4;
/// Exit status when the caller lacks the privilege the operation needs.
pub const EXIT_PERMISSION: u8 = 5;

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
}

impl CtlError {
    pub fn exit_code(&self) -> u8 {
        match self {
            CtlError::NoModule { .. } => EXIT_NO_MODULE,
            CtlError::Permission { .. } => EXIT_PERMISSION,
            CtlError::AbiMismatch { .. } => EXIT_ABI_MISMATCH,
            CtlError::Io { .. } => EXIT_FAILURE,
        }
    }
}
