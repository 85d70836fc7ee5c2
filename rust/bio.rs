// SPDX-License-Identifier: GPL-2.0

//! Bios (`include/linux/bio.h`): synchronous page reads and durable page writes for metadata,
//! and cloned bios for the data path, with per-clone context kept in the bio set's front
//! padding.

use crate::kernel_ext::shim;
use core::{
    marker::PhantomData,
    mem::size_of,
    ptr,
    sync::atomic::{AtomicU32, Ordering},
};
use kernel::{
    bindings, error::to_result, page::Page, prelude::*, sync::Completion, types::Opaque,
};

/// Reads one page at `sector` of `bdev` and waits for it.
pub(crate) fn read_page(bdev: *mut bindings::block_device, sector: u64, page: &Page) -> Result {
    // SAFETY: constants.
    let (opf, gfp) = unsafe { (shim::graid_req_op_read(), shim::graid_gfp_noio()) };
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

/// Reads (or with `write`, writes) `bytes` bytes at `data` from (to) `sector` of `bdev` in one
/// bio and waits: a batch of one ([`transfer_virt_batch`]). A plain write: durability is the
/// caller's (a later flush). Process context.
///
/// # Safety
///
/// `bdev` is an open block device; `data` is physically contiguous (kmalloc) memory of at
/// least `bytes` bytes, a multiple of the sector size, that nothing else touches until this
/// returns.
pub(crate) unsafe fn transfer_virt(
    bdev: *mut bindings::block_device,
    sector: u64,
    data: *mut u8,
    bytes: usize,
    write: bool,
) -> Result {
    let one = VirtTransfer {
        index: 0,
        bdev,
        sector,
        data,
        bytes,
    };
    // SAFETY: the caller's contract is the batch's, for its one transfer.
    match unsafe { transfer_virt_batch(core::iter::once(one), write) } {
        0 => Ok(()),
        _ => Err(EIO),
    }
}

/// One page to write with [`write_pages_durably`]: `index` names it in the result.
pub(crate) struct PageWrite<'a> {
    pub(crate) index: u32,
    pub(crate) bdev: *mut bindings::block_device,
    pub(crate) sector: u64,
    pub(crate) page: &'a Page,
}

/// Sends an empty flush (`PREFLUSH`) to every device at once and waits for all: every write
/// each completed before is durable on return. `devices` pairs an index with an open block
/// device (the caller's contract); returns the indices (as bits) whose flush failed or was
/// not sent. Process context.
pub(crate) fn flush_devices(devices: impl IntoIterator<Item = (u32, *mut bindings::block_device)>) -> u64 {
    // SAFETY: constants.
    let (opf, gfp) = unsafe { (shim::graid_req_op_flush(), shim::graid_gfp_noio()) };
    submit_batch(devices, |bdev| {
        // SAFETY: `bdev` is an open block device (the caller's contract); a flush carries no
        // data, so no vec.
        let bio = unsafe { shim::graid_bio_alloc(bdev, 0, opf, gfp) };
        (!bio.is_null()).then_some(bio)
    })
}

/// Most bios [`submit_batch`] sends at once: a superblock per member, or a rebuild buffer
/// column per member and two more.
const MAX_BATCH: usize = crate::engine::platform::MAX_REBUILD_BATCH;

/// Writes every page at once, each `FUA` and with `preflush` also `PREFLUSH` (what its device
/// completed before is durable too), and waits for all. Returns the indices (as bits) whose
/// write failed or was not sent. Process context.
pub(crate) fn write_pages_durably<'a>(
    writes: impl IntoIterator<Item = PageWrite<'a>>,
    preflush: bool,
) -> u32 {
    // SAFETY: constants.
    let opf = unsafe {
        let durable = shim::graid_req_op_superblock_write();
        if preflush {
            durable
        } else {
            durable & !shim::graid_req_preflush()
        }
    };
    let failed = submit_batch(writes.into_iter().map(|w| (w.index, w)), |write| {
        // SAFETY: `write.bdev` is an open block device (caller's contract).
        let bio = unsafe { shim::graid_bio_alloc(write.bdev, 1, opf, shim::graid_gfp_noio()) };
        if bio.is_null() {
            return None;
        }
        // SAFETY: `bio` is ours, with room for one vec; the page outlives it (the batch waits).
        let added = unsafe {
            (*bio).bi_iter.bi_sector = write.sector;
            bindings::bio_add_page(bio, write.page.as_ptr(), bindings::PAGE_SIZE as u32, 0)
        };
        if added as usize != bindings::PAGE_SIZE {
            // SAFETY: never submitted.
            unsafe { bindings::bio_put(bio) };
            return None;
        }
        Some(bio)
    });
    // Indices name members, below 32: the low half holds them all.
    failed as u32
}

/// One transfer of [`transfer_virt_batch`]: `index` names it in the result.
pub(crate) struct VirtTransfer {
    pub(crate) index: u32,
    pub(crate) bdev: *mut bindings::block_device,
    pub(crate) sector: u64,
    pub(crate) data: *mut u8,
    pub(crate) bytes: usize,
}

/// Reads (or with `write`, writes) every transfer at once, each one bio, and waits for them
/// all, as [`transfer_virt`] does one. Returns the indices (as bits) of those that failed or
/// were not sent. Process context.
///
/// # Safety
///
/// As [`transfer_virt`], for every transfer.
pub(crate) unsafe fn transfer_virt_batch(
    transfers: impl IntoIterator<Item = VirtTransfer>,
    write: bool,
) -> u64 {
    // SAFETY: constants.
    let (opf, gfp) = unsafe {
        let op = if write {
            shim::graid_req_op_write()
        } else {
            shim::graid_req_op_read()
        };
        (op, shim::graid_gfp_noio())
    };
    submit_batch(transfers.into_iter().map(|t| (t.index, t)), |t| {
        let len = u32::try_from(t.bytes).ok()?;
        // SAFETY: `t.bdev` is an open block device (the caller's contract).
        let bio = unsafe { shim::graid_bio_alloc(t.bdev, 1, opf, gfp) };
        if bio.is_null() {
            return None;
        }
        // SAFETY: `bio` is ours, with room for one vec; `t.data` is contiguous and outlives
        // the batch, which waits for every bio (the caller's contract).
        unsafe {
            (*bio).bi_iter.bi_sector = t.sector;
            bindings::bio_add_virt_nofail(bio, t.data.cast(), len);
        }
        Some(bio)
    })
}

/// Sends the bio `make` builds for each item at once and waits for them all. `make` returns a
/// bio set up but for its completion (`None`: it could not, and the item counts as failed).
/// Returns the items' indices (as bits) whose bio failed or was not sent. Bios are allocated
/// one at a time, each sent before the next is allocated (`GFP_NOIO` from the shared pool,
/// which then always makes progress). Process context.
fn submit_batch<T>(
    items: impl IntoIterator<Item = (u32, T)>,
    mut make: impl FnMut(T) -> Option<*mut bindings::bio>,
) -> u64 {
    #[pin_data]
    struct Batch {
        #[pin]
        done: Completion,
        /// Bios in flight plus one held by the sender.
        pending: AtomicU32,
    }

    /// # Safety
    ///
    /// Called by the block layer for a bio sent below, whose `bi_private` is the live batch.
    unsafe extern "C" fn end_io(bio: *mut bindings::bio) {
        // SAFETY: the batch outlives every bio: the sender waits for the last one.
        let batch = unsafe { &*(*bio).bi_private.cast::<Batch>() };
        if batch.pending.fetch_sub(1, Ordering::AcqRel) == 1 {
            batch.done.complete_all();
        }
    }

    pin_init::stack_pin_init!(let batch = pin_init!(Batch {
        done <- Completion::new(),
        pending: AtomicU32::new(1),
    }));
    let mut sent: [(u32, *mut bindings::bio); MAX_BATCH] = [(0, ptr::null_mut()); MAX_BATCH];
    let mut failed = 0u64;
    let mut count = 0;
    for (index, item) in items {
        let bit = 1u64.checked_shl(index).unwrap_or(0);
        let Some(slot) = sent.get_mut(count) else {
            failed |= bit;
            continue;
        };
        let Some(bio) = make(item) else {
            failed |= bit;
            continue;
        };
        // SAFETY: `bio` is ours and not sent yet; the batch outlives it (we wait below); the
        // end_io only touches the batch.
        unsafe {
            (*bio).bi_private = ptr::from_ref::<Batch>(&batch).cast_mut().cast();
            (*bio).bi_end_io = Some(end_io);
        }
        batch.pending.fetch_add(1, Ordering::Relaxed);
        *slot = (index, bio);
        count += 1;
        // SAFETY: fully set up. The end_io does not free it: we read its status afterwards.
        unsafe { bindings::submit_bio(bio) };
    }
    if batch.pending.fetch_sub(1, Ordering::AcqRel) != 1 {
        batch.done.wait_for_completion();
    }
    for &(index, bio) in sent.iter().take(count) {
        // SAFETY: completed (the batch is done) and not freed by its end_io; freed here, once.
        let status = unsafe {
            let status = (*bio).bi_status;
            bindings::bio_put(bio);
            status
        };
        if status != 0 {
            failed |= 1u64.checked_shl(index).unwrap_or(0);
        }
    }
    failed
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

/// What a cloned bio does.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum CloneOp {
    Read,
    Write,
    Discard,
}

/// Where a cloned bio goes: a block device, its first sector there, and what to do.
pub(crate) struct Target {
    pub(crate) bdev: *mut bindings::block_device,
    pub(crate) sector: u64,
    pub(crate) op: CloneOp,
}

/// The operation and flags of a clone (allocated with flags `src`) doing `op`.
///
/// A clone doing what its source does keeps the source's flags (FUA, sync, priority hints)
/// except two: `REQ_PREFLUSH`, which the block layer already sent to the array as a flush of
/// its own and left in the bio (every member would be flushed twice), and `REQ_NOWAIT` (the
/// driver may sleep, and a member's "would block" must not look like its failure). A clone
/// doing something else (writing a read request's data back to repair a member) is a plain
/// synchronous I/O.
fn clone_opf(src: bindings::blk_opf_t, op: CloneOp) -> bindings::blk_opf_t {
    // SAFETY: constants.
    let (mask, preflush, nowait, sync) = unsafe {
        (
            shim::graid_req_op_mask(),
            shim::graid_req_preflush(),
            shim::graid_req_nowait(),
            shim::graid_req_sync(),
        )
    };
    // SAFETY: constants.
    let code = unsafe {
        match op {
            CloneOp::Read => shim::graid_req_op_read(),
            CloneOp::Write => shim::graid_req_op_write(),
            CloneOp::Discard => shim::graid_req_op_discard(),
        }
    };
    if src & mask == code {
        src & !(preflush | nowait)
    } else {
        code | sync
    }
}

impl<C> CloneSet<C> {
    const FRONT_PAD: usize = size_of::<C>().next_multiple_of(8);

    /// A set with `pool` reserved bios, so clones can always make progress under memory
    /// pressure. With a rescuer: a request that needs more clones than the pool holds, sent
    /// from inside another `submit_bio` (where its clones wait on `current->bio_list` until it
    /// returns), hands the waiting clones to the rescuer instead of waiting on itself.
    pub(crate) fn new(pool: u32) -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            inner <- Opaque::try_ffi_init(move |slot: *mut bindings::bio_set| {
                // SAFETY: `slot` is valid for writes; a zeroed bio_set is what bioset_init expects.
                // (Written as bytes: with lockdep its spinlocks hold types that are not
                // `Zeroable`, though zero is their initial state as well.)
                unsafe { slot.write_bytes(0, 1) };
                // SAFETY: `slot` is pinned until `drop` calls `bioset_exit`.
                to_result(unsafe {
                    bindings::bioset_init(
                        slot,
                        pool,
                        Self::FRONT_PAD as u32,
                        // Bvecs: stripe buffer bios carry their own pages.
                        (bindings::BIOSET_NEED_RESCUER | bindings::BIOSET_NEED_BVECS) as i32,
                    )
                })
            }),
            _ctx: PhantomData,
        })
    }

    /// Clones `src` for `target`, trimmed to `sectors` sectors starting `skip` sectors into
    /// `src`, as `target.op`, with `ctx` attached and `end_io` called on completion. The clone
    /// shares `src`'s pages. Returns the clone, not yet submitted.
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
            // From the clone's own flags: the allocation already dropped what does not apply
            // to this bio set (`REQ_ALLOC_CACHE`, which `bio_put` trusts).
            (*clone).bi_opf = clone_opf((*clone).bi_opf, target.op);
            (*clone).bi_iter.bi_sector = target.sector;
            (*clone).bi_end_io = end_io;
            Self::ctx_ptr(clone).write(ctx);
            Ok(clone)
        }
    }

    /// A bio for `target` whose data is `bytes` bytes of kernel memory at `data` (a stripe
    /// buffer), with `ctx` and `end_io` as for clones. A write carries `REQ_FUA` if `fua`.
    ///
    /// # Safety
    ///
    /// `data` must be physically contiguous memory from `kmalloc` that stays valid and is not
    /// written by the CPU until `end_io` runs; `target.bdev` an open block device; `end_io`
    /// must release the bio with [`Self::finish`].
    pub(crate) unsafe fn buffer_bio(
        &self,
        data: *mut u8,
        bytes: u32,
        target: Target,
        fua: bool,
        end_io: bindings::bio_end_io_t,
        ctx: C,
    ) -> Result<*mut bindings::bio> {
        // SAFETY: constants.
        let opf = unsafe {
            match target.op {
                CloneOp::Read => shim::graid_req_op_read(),
                CloneOp::Write if fua => {
                    shim::graid_req_op_write() | shim::graid_req_sync() | shim::graid_req_fua()
                }
                CloneOp::Write => shim::graid_req_op_write() | shim::graid_req_sync(),
                CloneOp::Discard => return Err(EINVAL),
            }
        };
        // SAFETY: by the caller's contract.
        unsafe { self.virt_bio(&[(data, bytes)], target, opf, end_io, ctx) }
    }

    /// A bio of `opf` for `target` over `segments` of kernel memory (at most two, empty ones
    /// left out), with `ctx` and `end_io` as for clones.
    ///
    /// # Safety
    ///
    /// As [`Self::buffer_bio`], for every segment.
    unsafe fn virt_bio(
        &self,
        segments: &[(*mut u8, u32)],
        target: Target,
        opf: bindings::blk_opf_t,
        end_io: bindings::bio_end_io_t,
        ctx: C,
    ) -> Result<*mut bindings::bio> {
        if segments.len() > 2 {
            return Err(EINVAL);
        }
        // SAFETY: by the caller's contract; two vecs fit a bio's inline ones.
        unsafe {
            let bio = self.empty_bio(segments.len() as u16, &target, opf, end_io, ctx)?;
            for &(data, bytes) in segments.iter().filter(|&&(_, bytes)| bytes > 0) {
                bindings::bio_add_virt_nofail(bio, data.cast(), bytes);
            }
            Ok(bio)
        }
    }

    /// A bio of `opf` for `target` with room for `vecs` segments and none added yet, with
    /// `ctx` and `end_io` as for clones.
    ///
    /// # Safety
    ///
    /// `target.bdev` must be an open block device; `end_io` must release the bio with
    /// [`Self::finish`]; `vecs` is at most `BIO_MAX_VECS`.
    unsafe fn empty_bio(
        &self,
        vecs: u16,
        target: &Target,
        opf: bindings::blk_opf_t,
        end_io: bindings::bio_end_io_t,
        ctx: C,
    ) -> Result<*mut bindings::bio> {
        // SAFETY: by the caller's contract; more vecs than a bio holds inline come from the
        // set's bvec pool (BIOSET_NEED_BVECS), so GFP_NOIO never fails.
        unsafe {
            let bio = bindings::bio_alloc_bioset(
                target.bdev,
                vecs,
                opf,
                shim::graid_gfp_noio(),
                self.inner.get(),
            );
            if bio.is_null() {
                return Err(ENOMEM);
            }
            (*bio).bi_iter.bi_sector = target.sector;
            (*bio).bi_end_io = end_io;
            Self::ctx_ptr(bio).write(ctx);
            Ok(bio)
        }
    }

    /// A partial parity log write (FUA): the 4 KiB `header`, then `bytes` of `payload` (none
    /// if 0), at `target`, with `ctx` and `end_io` as for clones.
    ///
    /// # Safety
    ///
    /// `header` must be valid for 4096 bytes and `payload` for `bytes`, both kmalloc memory
    /// that nobody writes or frees until `end_io` ran; `target.bdev` an open block device;
    /// `end_io` must release the bio with [`Self::finish`].
    pub(crate) unsafe fn log_bio(
        &self,
        header: *mut u8,
        payload: *mut u8,
        bytes: u32,
        target: Target,
        end_io: bindings::bio_end_io_t,
        ctx: C,
    ) -> Result<*mut bindings::bio> {
        // SAFETY: constants.
        let opf = unsafe {
            shim::graid_req_op_write() | shim::graid_req_sync() | shim::graid_req_fua()
        };
        // SAFETY: by the caller's contract.
        unsafe { self.virt_bio(&[(header, 4096), (payload, bytes)], target, opf, end_io, ctx) }
    }

    /// An empty FUA write for `target` with room for `vecs` segments, filled with
    /// [`add_virt`] and then submitted: several partial parity log entries written as one
    /// (`log_batch.rs`). `ctx` and `end_io` as for clones.
    ///
    /// # Safety
    ///
    /// `target.bdev` must be an open block device; `end_io` must release the bio with
    /// [`Self::finish`]; `vecs` is at most `BIO_MAX_VECS`.
    pub(crate) unsafe fn fua_write_bio(
        &self,
        vecs: u16,
        target: &Target,
        end_io: bindings::bio_end_io_t,
        ctx: C,
    ) -> Result<*mut bindings::bio> {
        // SAFETY: constants.
        let opf = unsafe {
            shim::graid_req_op_write() | shim::graid_req_sync() | shim::graid_req_fua()
        };
        // SAFETY: by the caller's contract.
        unsafe { self.empty_bio(vecs, target, opf, end_io, ctx) }
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

/// Submits a bio made by [`CloneSet`]. Not accounted to the task again: the array's own
/// request already was (`submit_bio_noacct`).
///
/// # Safety
///
/// `bio` must be fully set up and not touched by the caller afterwards.
pub(crate) unsafe fn submit(bio: *mut bindings::bio) {
    // SAFETY: by the caller's contract.
    unsafe { bindings::submit_bio_noacct(bio) };
}

/// Adds `bytes` bytes of kernel memory at `data` to `bio` as one segment.
///
/// # Safety
///
/// `bio` must be a bio being built (not submitted) with a free vec; `data` physically
/// contiguous `kmalloc` memory valid for `bytes` bytes that nobody writes or frees until the
/// bio completed.
pub(crate) unsafe fn add_virt(bio: *mut bindings::bio, data: *mut u8, bytes: u32) {
    // SAFETY: by the caller's contract.
    unsafe { bindings::bio_add_virt_nofail(bio, data.cast(), bytes) };
}

/// Copies `bytes` bytes between `buf` and the data of `bio`, starting `skip` bytes into the
/// bio: into `buf` if `from_bio`, else into the bio.
///
/// # Safety
///
/// `bio` must be a live bio whose data covers `skip + bytes` bytes and whose pages nobody
/// else writes meanwhile; `buf` must be valid for `bytes` bytes.
pub(crate) unsafe fn copy_bio_data(
    bio: *mut bindings::bio,
    skip: u32,
    buf: *mut u8,
    bytes: u32,
    from_bio: bool,
) {
    // SAFETY: by the caller's contract the bio is live; its iterator is copied, not moved.
    let mut iter = unsafe { (*bio).bi_iter };
    // SAFETY: `skip` lies within the bio's data.
    unsafe { shim::graid_bio_advance_iter(bio, &mut iter, skip) };
    let mut done = 0u32;
    while done < bytes {
        // SAFETY: `iter` still lies within the bio's data (`done < bytes`).
        let mut bvec = unsafe { shim::graid_bio_iter_iovec(bio, iter) };
        let len = bvec.bv_len.min(bytes - done);
        bvec.bv_len = len;
        // SAFETY: `buf + done` is valid for `len` bytes; the bvec is a single page segment.
        unsafe {
            let at = buf.add(done as usize).cast();
            if from_bio {
                shim::graid_memcpy_from_bvec(at, &mut bvec);
            } else {
                shim::graid_memcpy_to_bvec(&mut bvec, at);
            }
            shim::graid_bio_advance_iter(bio, &mut iter, len);
        }
        done += len;
    }
}
