// SPDX-License-Identifier: GPL-2.0

//! The kernel's RAID parity library (`lib/raid/`, `include/linux/raid/{xor,pq}.h` in 7.2):
//! XOR for RAID 5, P+Q syndromes and recovery for RAID 6 over GF(2^8) with polynomial 0x11d,
//! md's own math. Every function runs in task context only (the library may use the FPU) and
//! takes lengths that are non-zero multiples of 512 and pointers aligned to 64 bytes; the
//! recovery functions take page-aligned pointers and at most one page.

use crate::kernel_ext::shim;
use kernel::ffi::{c_int, c_uint, c_void};

extern "C" {
    fn xor_gen(dest: *mut c_void, srcs: *mut *mut c_void, src_cnt: c_uint, bytes: c_uint);
    fn raid6_gen_syndrome(disks: c_int, bytes: usize, ptrs: *mut *mut c_void);
    fn raid6_xor_syndrome(disks: c_int, start: c_int, stop: c_int, bytes: usize, ptrs: *mut *mut c_void);
    fn raid6_can_xor_syndrome() -> bool;
    fn raid6_recov_2data(disks: c_int, bytes: usize, faila: c_int, failb: c_int, ptrs: *mut *mut c_void);
    fn raid6_recov_datap(disks: c_int, bytes: usize, faila: c_int, ptrs: *mut *mut c_void);
}

/// Most vectors one call takes: 32 members, plus P and Q slots.
pub(crate) const MAX_VECTORS: usize = 34;

/// Pointers handed to the library, in the order it wants them.
pub(crate) type Vectors = [*mut u8; MAX_VECTORS];

/// The kernel's zero page, for data slots a syndrome update leaves out.
pub(crate) fn zero_page() -> *mut u8 {
    // SAFETY: always valid; the page is never written.
    unsafe { shim::graid_zero_page_address() }.cast()
}

fn cast(ptrs: &mut Vectors) -> *mut *mut c_void {
    ptrs.as_mut_ptr().cast()
}

/// `dest ^= srcs[0] ^ srcs[1] ^ ...` over `bytes` bytes.
///
/// # Safety
///
/// Every pointer is valid for `bytes` bytes, 64-byte aligned, and not written by anyone else
/// meanwhile; `bytes` is a non-zero multiple of 512; task context.
pub(crate) unsafe fn xor_into(dest: *mut u8, srcs: &mut Vectors, count: usize, bytes: usize) {
    // SAFETY: by the caller's contract; `count <= MAX_VECTORS` and the lengths fit a `c_uint`.
    unsafe {
        xor_gen(
            dest.cast(),
            cast(srcs),
            count.min(MAX_VECTORS) as c_uint,
            bytes as c_uint,
        )
    };
}

/// P and Q of `disks - 2` data vectors: `ptrs[0..disks-2]` data in syndrome order, then P, Q.
///
/// # Safety
///
/// As [`xor_into`], for the first `disks` pointers; `4 <= disks <= MAX_VECTORS`.
pub(crate) unsafe fn gen_syndrome(disks: usize, bytes: usize, ptrs: &mut Vectors) {
    // SAFETY: by the caller's contract.
    unsafe { raid6_gen_syndrome(disks as c_int, bytes, cast(ptrs)) };
}

/// Whether [`xor_syndrome`] is available (it is on every x86-64 kernel).
pub(crate) fn can_xor_syndrome() -> bool {
    // SAFETY: no arguments, no side effects.
    unsafe { raid6_can_xor_syndrome() }
}

/// Folds data slots `start..=stop` into P and Q (`ptrs[disks-2]`, `ptrs[disks-1]`) in place.
///
/// # Safety
///
/// As [`gen_syndrome`]; `start <= stop < disks - 2`; [`can_xor_syndrome`] is true.
pub(crate) unsafe fn xor_syndrome(disks: usize, start: usize, stop: usize, bytes: usize, ptrs: &mut Vectors) {
    // SAFETY: by the caller's contract.
    unsafe { raid6_xor_syndrome(disks as c_int, start as c_int, stop as c_int, bytes, cast(ptrs)) };
}

/// Rebuilds data slots `a < b` from the rest, P and Q.
///
/// # Safety
///
/// As [`gen_syndrome`], with page-aligned pointers and `bytes <= PAGE_SIZE`.
pub(crate) unsafe fn recov_2data(disks: usize, bytes: usize, a: usize, b: usize, ptrs: &mut Vectors) {
    // SAFETY: by the caller's contract.
    unsafe { raid6_recov_2data(disks as c_int, bytes, a as c_int, b as c_int, cast(ptrs)) };
}

/// Rebuilds data slot `a` and P from the rest and Q.
///
/// # Safety
///
/// As [`recov_2data`].
pub(crate) unsafe fn recov_datap(disks: usize, bytes: usize, a: usize, ptrs: &mut Vectors) {
    // SAFETY: by the caller's contract.
    unsafe { raid6_recov_datap(disks as c_int, bytes, a as c_int, cast(ptrs)) };
}
