// SPDX-License-Identifier: GPL-2.0

//! Bios (`include/linux/bio.h`): synchronous page I/O for metadata and cloned bios for the
//! data path, with per-clone context kept in the bio set's front padding.

use crate::kernel_ext::shim;
use core::{marker::PhantomData, mem::size_of};
use kernel::{bindings, error::to_result, page::Page, prelude::*, types::Opaque};

/// Reads or writes one page at `sector` of `bdev` and waits for it. Writes are FUA: the data is
/// on stable media when this returns.
pub(crate) fn sync_page_io(
    bdev: *mut bindings::block_device,
    sector: u64,
    page: &Page,
    write: bool,
) -> Result {
    // SAFETY: constants.
    let (opf, gfp) = unsafe {
        let op = if write {
            shim::graid_req_op_write_fua_sync()
        } else {
            shim::graid_req_op_read()
        };
        (op, shim::graid_gfp_noio())
    };
    // SAFETY: `bdev` is an open block device (caller's contract); one vec is enough for a page.
    let bio = unsafe { shim::graid_bio_alloc(bdev, 1, opf, gfp) };
    if bio.is_null() {
        return Err(ENOMEM);
    }
    // SAFETY: `bio` was just allocated with room for one vec and is owned here; `page` outlives
    // the synchronous submission.
    let ret = unsafe {
        (*bio).bi_iter.bi_sector = sector;
        let added = bindings::bio_add_page(bio, page.as_ptr(), bindings::PAGE_SIZE as u32, 0);
        let ret = if added as usize == bindings::PAGE_SIZE {
            bindings::submit_bio_wait(bio)
        } else {
            -(bindings::EIO as i32)
        };
        bindings::bio_put(bio);
        ret
    };
    to_result(ret)
}

/// A bio set whose bios carry a `C` in front of them, for data-path clones.
///
/// # Invariants
///
/// `inner` is initialised by `bioset_init` with a front pad of `size_of::<C>()` bytes and exited
/// exactly once in `drop`.
#[pin_data(PinnedDrop)]
pub(crate) struct CloneSet<C> {
    #[pin]
    inner: Opaque<bindings::bio_set>,
    _ctx: PhantomData<C>,
}

// SAFETY: bio sets are used from any CPU; the mempools inside synchronise themselves.
unsafe impl<C: Send> Send for CloneSet<C> {}
// SAFETY: see above.
unsafe impl<C: Send> Sync for CloneSet<C> {}

/// Where a cloned bio goes: a block device and its first sector there.
pub(crate) struct Target {
    pub(crate) bdev: *mut bindings::block_device,
    pub(crate) sector: u64,
}

impl<C> CloneSet<C> {
    const FRONT_PAD: usize = size_of::<C>().next_multiple_of(8);

    /// A set with `pool` reserved bios, so clones can always make progress under memory pressure.
    pub(crate) fn new(pool: u32) -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            inner <- Opaque::try_ffi_init(move |slot: *mut bindings::bio_set| {
                // SAFETY: `slot` is valid for writes; a zeroed bio_set is what bioset_init expects.
                // (Written as bytes: with lockdep its spinlocks hold types that are not
                // `Zeroable`, though zero is their initial state as well.)
                unsafe { slot.write_bytes(0, 1) };
                // SAFETY: `slot` is pinned until `drop` calls `bioset_exit`.
                to_result(unsafe { bindings::bioset_init(slot, pool, Self::FRONT_PAD as u32, 0) })
            }),
            _ctx: PhantomData,
        })
    }

    /// Clones `src` for `target`, trimmed to `sectors` sectors starting `skip` sectors into
    /// `src`, with `ctx` attached and `end_io` called on completion. The clone shares `src`'s
    /// pages. Returns the clone, not yet submitted.
    ///
    /// # Safety
    ///
    /// `src` must be a live bio that outlives the clone, `target.bdev` an open block device, and
    /// `skip + sectors` within `src`. `end_io` must release the clone with [`Self::finish`].
    pub(crate) unsafe fn clone_bio(
        &self,
        src: *mut bindings::bio,
        skip: u64,
        sectors: u64,
        target: Target,
        end_io: bindings::bio_end_io_t,
        ctx: C,
    ) -> Result<*mut bindings::bio> {
        // SAFETY: by the caller's contract; GFP_NOIO never fails for bio sets with a pool.
        unsafe {
            let clone =
                bindings::bio_alloc_clone(target.bdev, src, shim::graid_gfp_noio(), self.inner.get());
            if clone.is_null() {
                return Err(ENOMEM);
            }
            bindings::bio_trim(clone, skip, sectors);
            // We may sleep and retry; a member's "would block" must not look like its failure.
            (*clone).bi_opf &= !shim::graid_req_nowait();
            (*clone).bi_iter.bi_sector = target.sector;
            (*clone).bi_end_io = end_io;
            Self::ctx_ptr(clone).write(ctx);
            Ok(clone)
        }
    }

    /// An empty flush (PREFLUSH write) for `bdev`, with `ctx` and `end_io` as for clones.
    ///
    /// # Safety
    ///
    /// `bdev` must be an open block device; `end_io` must release the bio with [`Self::finish`].
    pub(crate) unsafe fn flush_bio(
        &self,
        bdev: *mut bindings::block_device,
        end_io: bindings::bio_end_io_t,
        ctx: C,
    ) -> Result<*mut bindings::bio> {
        // SAFETY: by the caller's contract.
        unsafe {
            let bio = bindings::bio_alloc_bioset(
                bdev,
                0,
                shim::graid_req_op_flush(),
                shim::graid_gfp_noio(),
                self.inner.get(),
            );
            if bio.is_null() {
                return Err(ENOMEM);
            }
            (*bio).bi_end_io = end_io;
            Self::ctx_ptr(bio).write(ctx);
            Ok(bio)
        }
    }

    /// # Safety
    ///
    /// `bio` must come from this set.
    unsafe fn ctx_ptr(bio: *mut bindings::bio) -> *mut C {
        // SAFETY: the front pad of FRONT_PAD bytes precedes every bio of this set.
        unsafe { bio.cast::<u8>().sub(Self::FRONT_PAD).cast::<C>() }
    }

    /// Takes the context and status out of a completed bio of this set and frees the bio.
    ///
    /// # Safety
    ///
    /// `bio` must be a bio of this set made by `clone_bio` or `flush_bio`, completed, and not
    /// used afterwards.
    pub(crate) unsafe fn finish(bio: *mut bindings::bio) -> (C, bindings::blk_status_t) {
        // SAFETY: by the caller's contract the context was written at creation and is read once.
        unsafe {
            let ctx = Self::ctx_ptr(bio).read();
            let status = (*bio).bi_status;
            bindings::bio_put(bio);
            (ctx, status)
        }
    }
}

#[pinned_drop]
impl<C> PinnedDrop for CloneSet<C> {
    fn drop(self: Pin<&mut Self>) {
        // SAFETY: initialised by `new` (type invariant); all clones were freed before the set
        // is dropped, since their owners complete before the disk goes away.
        unsafe { bindings::bioset_exit(self.inner.get()) };
    }
}

/// Submits a bio made by [`CloneSet`].
///
/// # Safety
///
/// `bio` must be fully set up and not touched by the caller afterwards.
pub(crate) unsafe fn submit(bio: *mut bindings::bio) {
    // SAFETY: by the caller's contract.
    unsafe { bindings::submit_bio(bio) };
}
