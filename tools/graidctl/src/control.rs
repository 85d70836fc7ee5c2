//! The control device `/dev/graid-control` and its ioctls.

use crate::error::CtlError;
use graid_abi::{GraidVersion, GRAID_CONTROL_NAME, GRAID_IOC_VERSION};
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;

/// An open handle on the module's control device.
pub struct Control {
    file: File,
    path: String,
}

impl Control {
    /// Opens the control device at its standard path.
    pub fn open() -> Result<Self, CtlError> {
        Self::open_path(&format!("/dev/{GRAID_CONTROL_NAME}"))
    }

    pub fn open_path(path: &str) -> Result<Self, CtlError> {
        let path = path.to_owned();
        match OpenOptions::new().read(true).write(true).open(&path) {
            Ok(file) => Ok(Self { file, path }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Err(CtlError::NoModule { path }),
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
                Err(CtlError::Permission { path })
            }
            Err(source) => Err(CtlError::Io {
                what: format!("opening {path}"),
                source,
            }),
        }
    }

    /// Asks the module for its ABI and module versions.
    pub fn version(&self) -> Result<GraidVersion, CtlError> {
        let mut version = GraidVersion::ZERO;
        // SAFETY: GRAID_IOC_VERSION is a read ioctl whose size field is size_of::<GraidVersion>(),
        // and `version` is a valid, writable GraidVersion for the duration of the call.
        let ret = unsafe {
            libc::ioctl(
                self.file.as_raw_fd(),
                GRAID_IOC_VERSION as libc::c_ulong,
                &mut version as *mut GraidVersion,
            )
        };
        if ret < 0 {
            return Err(CtlError::Io {
                what: format!("VERSION ioctl on {}", self.path),
                source: io::Error::last_os_error(),
            });
        }
        Ok(version)
    }
}
