// SPDX-License-Identifier: GPL-2.0

//! The kernel's CRC-32C (`lib/crc/`), which uses the CPU's CRC instruction where it has one.

use super::shim;

/// CRC-32C of `bytes`, the same value as the engine's `crc32c` (inverted start and end).
pub(crate) fn crc32c(bytes: &[u8]) -> u32 {
    // SAFETY: `bytes` is valid for reads of its length for the duration of the call; the
    // function only reads it.
    unsafe { shim::graid_crc32c(bytes.as_ptr().cast(), bytes.len()) }
}
