// SPDX-License-Identifier: GPL-2.0

//! `/dev/graid-control`: the ioctls graidctl uses to manage arrays.

use crate::kernel_ext::{capability::require_sys_admin, misc::MiscOps};
use crate::uapi::{self, GraidVersion};
use core::mem::size_of;
use kernel::{fs::File, prelude::*, transmute::AsBytes, uaccess::UserSlice};

// SAFETY: `GraidVersion` is `repr(C)` with integer fields only and no padding (checked by the
// ABI crate's host tests), so every byte of it is initialised.
unsafe impl AsBytes for GraidVersion {}

/// The control device. Stateless for now; arrays will hang off it.
pub(crate) struct Control;

impl MiscOps for Control {
    fn open(&self, _file: &File) -> Result {
        require_sys_admin()
    }

    fn ioctl(&self, _file: &File, cmd: u32, arg: usize) -> Result<isize> {
        // Checked again here: an opened descriptor may have been passed to another process.
        require_sys_admin()?;
        match cmd {
            uapi::GRAID_IOC_VERSION => version(arg),
            _ => Err(ENOTTY),
        }
    }
}

fn version(arg: usize) -> Result<isize> {
    let mut answer = GraidVersion {
        abi_version: uapi::GRAID_ABI_VERSION,
        struct_size: size_of::<GraidVersion>() as u32,
        module_version: [0; uapi::GRAID_VERSION_LEN],
    };
    let v = crate::MODULE_VERSION.as_bytes();
    let len = v.len().min(uapi::GRAID_VERSION_LEN - 1);
    answer.module_version[..len].copy_from_slice(&v[..len]);
    UserSlice::new(UserPtr::from_addr(arg), size_of::<GraidVersion>())
        .writer()
        .write(&answer)?;
    Ok(0)
}
