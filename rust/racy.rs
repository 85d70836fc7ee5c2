// SPDX-License-Identifier: GPL-2.0

//! Copies to and from pages that a process may write at the same moment: the parity helper's
//! pinned pool and the ring's shared pages.
//!
//! `Page::read_raw` and `write_raw` promise that nothing else touches the bytes meanwhile, which
//! a helper (hostile, or a GPU running late) does not keep. These go through `memcpy`,
//! `memset` and `memcmp` in `shim.c` instead: C accesses outside Rust's memory model, which a
//! racing writer can only tear. So what is read this way is untrusted bytes, checked or
//! recomputed before use, never a Rust value whose validity depends on them.

use crate::kernel_ext::shim;
use core::ffi::c_void;
use kernel::{bindings, page::Page, page::PAGE_SIZE, prelude::*};

/// Runs `f` on the address of byte `offset` of `page` (mapped for this task), if the `len`
/// bytes there lie in the page; `EINVAL` if not.
fn mapped<R>(page: &Page, offset: usize, len: usize, f: impl FnOnce(*mut u8) -> R) -> Result<R> {
    if offset.checked_add(len).is_none_or(|end| end > PAGE_SIZE) {
        return Err(EINVAL);
    }
    // SAFETY: `page` is a valid page (a `Page` owns or borrows one); unmapped below.
    let base = unsafe { bindings::kmap_local_page(page.as_ptr()) }.cast::<u8>();
    let result = f(base.wrapping_add(offset));
    // SAFETY: mapped above, on this task, and the last one mapped.
    unsafe { bindings::kunmap_local(base.cast()) };
    Ok(result)
}

/// Copies `len` bytes from `src` to `page` at `offset`.
///
/// # Safety
///
/// `src` is valid for reads of `len` bytes, and not written meanwhile.
pub(crate) unsafe fn write(page: &Page, offset: usize, src: *const u8, len: usize) -> Result {
    mapped(page, offset, len, |dst| {
        // SAFETY: `dst` has `len` bytes in the mapped page (checked); `src` has `len` readable
        // bytes (the caller's promise). Another mapping of the page may access `dst`
        // meanwhile: a C copy, torn at worst.
        unsafe { shim::graid_copy_racy(dst.cast(), src.cast(), len) }
    })
}

/// Copies `len` bytes of `page` at `offset` to `dst`: whatever they hold, torn if a writer
/// races.
///
/// # Safety
///
/// `dst` is valid for writes of `len` bytes, which nothing else accesses meanwhile.
pub(crate) unsafe fn read(page: &Page, offset: usize, dst: *mut u8, len: usize) -> Result {
    mapped(page, offset, len, |src| {
        // SAFETY: `src` has `len` bytes in the mapped page (checked), `dst` `len` writable bytes
        // (the caller's promise); a racing writer of `src` only tears the copy (see above).
        unsafe { shim::graid_copy_racy(dst.cast(), src.cast_const().cast(), len) }
    })
}

/// Zeroes `len` bytes of `page` at `offset`.
pub(crate) fn zero(page: &Page, offset: usize, len: usize) -> Result {
    mapped(page, offset, len, |dst| {
        // SAFETY: `dst` has `len` bytes in the mapped page (checked); a racing access of them
        // only sees some of the zeroes (see above).
        unsafe { shim::graid_zero_racy(dst.cast::<c_void>(), len) }
    })
}

/// Whether the `len` bytes of `page` at `offset` equal those at `src` (a torn read compares
/// unequal, or equal to what was there).
///
/// # Safety
///
/// `src` is valid for reads of `len` bytes, and not written meanwhile.
pub(crate) unsafe fn same(page: &Page, offset: usize, src: *const u8, len: usize) -> Result<bool> {
    mapped(page, offset, len, |theirs| {
        // SAFETY: `theirs` has `len` bytes in the mapped page (checked), `src` `len` readable
        // bytes (the caller's promise); a racing writer only changes the answer.
        unsafe { shim::graid_same_racy(theirs.cast_const().cast(), src.cast(), len) }
    })
}
