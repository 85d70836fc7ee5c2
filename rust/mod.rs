// SPDX-License-Identifier: GPL-2.0

//! Kernel support layer: safe wrappers graid needs that Linux 7.2's `kernel` crate lacks.
//!
//! Written in the style of upstream `rust/kernel/` so pieces can be proposed upstream. All FFI
//! with the C side of the kernel lives here; the driver above uses only these safe interfaces.

pub(crate) mod capability;
pub(crate) mod misc;
