// SPDX-License-Identifier: GPL-2.0

//! Randomness and the wall clock (`include/linux/random.h`, `include/linux/timekeeping.h`).

use kernel::bindings;

/// Fills `buf` with random bytes from the kernel's CRNG.
pub(crate) fn random_bytes(buf: &mut [u8]) {
    // SAFETY: `buf` is valid for writes of its length.
    unsafe { bindings::get_random_bytes(buf.as_mut_ptr().cast(), buf.len()) };
}

/// Seconds since the Unix epoch, by the wall clock.
pub(crate) fn real_seconds() -> u64 {
    // SAFETY: reads the clock; no preconditions.
    let now = unsafe { bindings::ktime_get_real_seconds() };
    u64::try_from(now).unwrap_or(0)
}
