// SPDX-License-Identifier: GPL-2.0

//! Long-term pins of a process's anonymous memory (`include/linux/mm.h`: `pin_user_pages_fast`
//! with `FOLL_LONGTERM`), charged to its `locked_vm` as io_uring's registered buffers are.
//!
//! The pages stay valid for as long as the pin is held, whatever the process does with its
//! mapping (unmap, exit): the kernel reads and writes them through their own mappings, never
//! through the process's addresses.

use crate::kernel_ext::racy;
use core::ptr::NonNull;
use kernel::{
    alloc::flags::GFP_KERNEL,
    alloc::KVVec,
    bindings,
    mm::{virt::flags, Mm},
    page::{BorrowedPage, PAGE_SIZE},
    prelude::*,
    sync::aref::ARef,
};

/// Pinned pages of one process, in address order.
///
/// # Invariants
///
/// Every entry of `pages` is a page pinned by `pin_user_pages_fast` and unpinned once, in
/// `drop`; `mm` is the process's mm, charged `charged` pages of `locked_vm`.
pub(crate) struct PinnedPages {
    pages: KVVec<*mut bindings::page>,
    mm: ARef<Mm>,
    charged: usize,
}

// SAFETY: the pins are plain references to pages, usable and droppable from any thread.
unsafe impl Send for PinnedPages {}
// SAFETY: `&PinnedPages` hands out only reads of the page pointers.
unsafe impl Sync for PinnedPages {}

impl PinnedPages {
    /// Pins `bytes` (page multiples) of the current process's memory at `address` (page
    /// aligned). `EINVAL` unless the whole range is private anonymous memory (no file, no
    /// hugetlbfs, no device mapping: what a GPU driver can register), `ENOMEM` or the pin's own
    /// error otherwise; nothing stays pinned on failure.
    pub(crate) fn pin_anonymous(address: usize, bytes: usize) -> Result<Self> {
        if address % PAGE_SIZE != 0 || bytes == 0 || bytes % PAGE_SIZE != 0 {
            return Err(EINVAL);
        }
        let end = address.checked_add(bytes).ok_or(EINVAL)?;
        let task = kernel::current!();
        let mm = task.mm().ok_or(EINVAL)?;
        {
            let guard = mm.mmap_read_lock();
            let mut at = address;
            while at < end {
                let Some(vma) = guard.vma_lookup(at) else {
                    pr_warn!("graid: cannot pin {:#x}: not mapped\n", at);
                    return Err(EINVAL);
                };
                // Not `flags::MAYSHARE`: 7.2's bindings give it VM_MAYEXEC's value (bindgen
                // reads `INIT_VM_FLAG(MAYSHARE)` wrong). A mapping that may be shared but is
                // not has a file, refused below.
                let refused = flags::SHARED
                    | flags::HUGETLB
                    | flags::PFNMAP
                    | flags::IO
                    | flags::MIXEDMAP;
                // SAFETY: the vma is valid while the mmap lock is held.
                let file = unsafe { (*vma.as_ptr()).vm_file };
                if vma.flags() & refused != 0 || !file.is_null() {
                    pr_warn!(
                        "graid: cannot pin {:#x}: not private anonymous memory (flags {:#x}, file {})\n",
                        at,
                        vma.flags(),
                        !file.is_null()
                    );
                    return Err(EINVAL);
                }
                at = vma.end();
            }
        }
        let count = bytes / PAGE_SIZE;
        let mut pages: KVVec<*mut bindings::page> = KVVec::with_capacity(count, GFP_KERNEL)?;
        pages.extend_with(count, core::ptr::null_mut(), GFP_KERNEL)?;
        let mm_ref: ARef<Mm> = ARef::from(&**mm);
        let mut pinned = Self {
            pages: KVVec::new(),
            mm: mm_ref,
            charged: 0,
        };
        // SAFETY: `mm` is the current process's, alive (we run in it).
        let charged = unsafe { bindings::account_locked_vm(pinned.mm.as_raw(), count, true) };
        if charged != 0 {
            return Err(Error::from_errno(charged));
        }
        pinned.charged = count;
        let mut done = 0usize;
        let gup = bindings::FOLL_WRITE | bindings::FOLL_LONGTERM;
        while done < count {
            let want = i32::try_from(count - done).unwrap_or(i32::MAX);
            let slot = pages.as_mut_ptr().wrapping_add(done);
            // SAFETY: `slot` has room for `want` page pointers (the vector's tail); the range
            // is within the caller's process, checked above.
            let got = unsafe {
                bindings::pin_user_pages_fast(
                    address + done * PAGE_SIZE,
                    want,
                    gup,
                    slot,
                )
            };
            if got <= 0 {
                pr_warn!("graid: pinning {} pages at {:#x} failed: {}\n", count, address, got);
                // Unpin what was pinned, uncharge the whole range.
                pages.truncate(done);
                pinned.pages = pages;
                drop(pinned);
                return Err(if got < 0 { Error::from_errno(got) } else { EFAULT });
            }
            done += got as usize;
        }
        pinned.pages = pages;
        Ok(pinned)
    }

    /// Bytes pinned.
    pub(crate) fn bytes(&self) -> usize {
        self.pages.len() * PAGE_SIZE
    }

    fn page(&self, index: usize) -> Option<BorrowedPage<'_>> {
        let raw = NonNull::new(*self.pages.get(index)?)?;
        // SAFETY: a page pinned by this value, so valid while it is borrowed.
        Some(unsafe { BorrowedPage::from_raw(raw) })
    }

    /// Runs `f(page, offset in page, position in the range, len)` for every page piece of the
    /// `len` bytes at `offset`; `EINVAL` if they lie outside the pinned range.
    fn pieces(
        &self,
        offset: usize,
        len: usize,
        mut f: impl FnMut(&BorrowedPage<'_>, usize, usize, usize) -> Result,
    ) -> Result {
        let end = offset.checked_add(len).ok_or(EINVAL)?;
        if end > self.bytes() {
            return Err(EINVAL);
        }
        let mut at = offset;
        while at < end {
            let within = at % PAGE_SIZE;
            let piece = (PAGE_SIZE - within).min(end - at);
            let page = self.page(at / PAGE_SIZE).ok_or(EINVAL)?;
            f(&page, within, at - offset, piece)?;
            at += piece;
        }
        Ok(())
    }

    /// Copies `len` bytes from `src` to the pinned range at `offset` (the process may access
    /// them meanwhile: see `racy.rs`).
    ///
    /// # Safety
    ///
    /// `src` is valid for reads of `len` bytes, and not written meanwhile.
    pub(crate) unsafe fn write(&self, offset: usize, src: *const u8, len: usize) -> Result {
        self.pieces(offset, len, |page, within, done, piece| {
            // SAFETY: `src + done` has `piece` readable bytes (the caller's promise).
            unsafe { racy::write(page, within, src.wrapping_add(done), piece) }
        })
    }

    /// Copies `len` bytes at `offset` of the pinned range to `dst`: whatever the process left
    /// there, torn if it writes them meanwhile (`racy.rs`), so untrusted.
    ///
    /// # Safety
    ///
    /// `dst` is valid for writes of `len` bytes, which nothing else accesses meanwhile.
    pub(crate) unsafe fn read(&self, offset: usize, dst: *mut u8, len: usize) -> Result {
        self.pieces(offset, len, |page, within, done, piece| {
            // SAFETY: `dst + done` has `piece` writable bytes (the caller's promise).
            unsafe { racy::read(page, within, dst.wrapping_add(done), piece) }
        })
    }

    /// Whether the `len` bytes at `offset` of the pinned range equal those at `src` (a byte
    /// the process changes meanwhile may compare either way).
    ///
    /// # Safety
    ///
    /// `src` is valid for reads of `len` bytes, and not written meanwhile.
    pub(crate) unsafe fn same(&self, offset: usize, src: *const u8, len: usize) -> Result<bool> {
        let mut same = true;
        self.pieces(offset, len, |page, within, done, piece| {
            if same {
                // SAFETY: `src + done` has `piece` readable bytes (the caller's promise).
                same = unsafe { racy::same(page, within, src.wrapping_add(done), piece)? };
            }
            Ok(())
        })?;
        Ok(same)
    }

    /// Zeroes `len` bytes at `offset` of the pinned range.
    pub(crate) fn zero(&self, offset: usize, len: usize) -> Result {
        self.pieces(offset, len, |page, within, _, piece| racy::zero(page, within, piece))
    }
}

impl Drop for PinnedPages {
    fn drop(&mut self) {
        let count = self.pages.len();
        if count > 0 {
            // SAFETY: every entry is a page this value pinned (the invariant); the helper may
            // have written them, so they are marked dirty.
            unsafe { bindings::unpin_user_pages_dirty_lock(self.pages.as_mut_ptr(), count, true) };
        }
        if self.charged > 0 {
            // SAFETY: `mm` is held by `ARef` (mmgrab), so its struct stays valid; the charge
            // was taken in `pin_anonymous`.
            unsafe { bindings::account_locked_vm(self.mm.as_raw(), self.charged, false) };
        }
    }
}
