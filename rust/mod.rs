// SPDX-License-Identifier: GPL-2.0

//! Kernel support layer: safe wrappers graid needs that Linux 7.2's `kernel` crate lacks.
//!
//! Written in the style of upstream `rust/kernel/` so pieces can be proposed upstream. All FFI
//! with the C side of the kernel lives here (plus `shim.c` for what bindgen cannot export); the
//! driver above uses these interfaces.

pub(crate) mod bdev;
pub(crate) mod bio;
pub(crate) mod blk_mq;
pub(crate) mod capability;
pub(crate) mod compat;
pub(crate) mod cpu;
pub(crate) mod crc;
pub(crate) mod misc;
pub(crate) mod module_ref;
pub(crate) mod pin;
pub(crate) mod plug;
pub(crate) mod raid_math;
pub(crate) mod racy;
pub(crate) mod random;
mod shim;
pub(crate) mod sysfs;
pub(crate) mod work;
