// SPDX-License-Identifier: GPL-2.0

//! blk-mq disks for stacking drivers (`include/linux/blk-mq.h`).
//!
//! Unlike `kernel::block::mq` in 7.2 this sets `fops.owner` (so an open disk pins the module;
//! the table is static in `shim.c`, where `THIS_MODULE` is a link-time constant) and an `open`
//! that refuses while the disk is being removed, takes full queue limits stacked from the
//! member devices (write cache + FUA, chunk boundaries, io_min/io_opt), and lets the driver end
//! a request with any status.
//!
//! The queue is built for a stacking driver's fast path: one hardware queue per CPU (no tag
//! space shared between CPUs), no I/O scheduler by default, `queue_rqs` so a plugged batch
//! reaches the driver in one call, `BLK_MQ_F_BLOCKING` (`queue_rq` may sleep: it allocates
//! clones and sends them to members, which may wait for tags) and `BLK_MQ_F_STACKING`.

use crate::kernel_ext::shim;
use core::{
    marker::PhantomData,
    mem::{size_of, ManuallyDrop},
    ptr,
    sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, Ordering},
};
use kernel::{
    bindings,
    error::{from_err_ptr, to_result},
    ffi::{c_int, c_uint, c_void},
    prelude::*,
    types::Opaque,
};

/// Requests each hardware queue (one per CPU) holds.
const QUEUE_DEPTH: u32 = 256;

/// The most requests a disk can have in flight: every hardware queue's depth.
pub(crate) fn max_requests() -> u32 {
    // SAFETY: reads a variable set at boot.
    unsafe { bindings::nr_cpu_ids }.saturating_mul(QUEUE_DEPTH)
}

/// What a disk does with its requests.
pub(crate) trait DiskOps: Send + Sync + Sized {
    /// Per-request driver data, kept in the request's PDU, made once per tag.
    type RequestData: Default + Send + Sync;

    /// Finishes setting up a request's driver data in place, once, before first use. The data
    /// never moves afterwards (it lives in the PDU as long as the tag set).
    fn init_request_data(_data: &Self::RequestData) {}

    /// Takes a started request, in process context. The driver ends it with [`Request::end`]
    /// (now or later, from any context), exactly once: the handle is consumed by it.
    fn queue_rq(&self, rq: Request<Self>);

    /// Takes a batch of started requests (a flushed plug), in order. The driver's member I/O
    /// for the whole batch may go out together.
    fn queue_rqs(&self, rqs: &mut dyn Iterator<Item = Request<Self>>) {
        for rq in rqs {
            self.queue_rq(rq);
        }
    }
}

/// A started request of a disk whose ops are `T`, owned by the driver until it is ended.
pub(crate) struct Request<T: DiskOps> {
    raw: *mut bindings::request,
    _ops: PhantomData<T>,
}

impl<T: DiskOps> Request<T> {
    /// First sector.
    pub(crate) fn pos(&self) -> u64 {
        // SAFETY: `raw` is a live, started request while `self` exists.
        unsafe { shim::graid_blk_rq_pos(self.raw) }
    }

    /// Length in bytes.
    pub(crate) fn bytes(&self) -> u32 {
        // SAFETY: as above.
        unsafe { shim::graid_blk_rq_bytes(self.raw) }
    }

    /// The `REQ_OP_*` operation.
    pub(crate) fn op(&self) -> u32 {
        // SAFETY: as above.
        unsafe { shim::graid_req_op(self.raw) }
    }

    /// Gives up the handle: the request stays in the driver until [`Request::from_raw`] takes
    /// it back to end it.
    pub(crate) fn into_raw(self) -> *mut bindings::request {
        ManuallyDrop::new(self).raw
    }

    /// Takes back a request given up with [`Request::into_raw`].
    ///
    /// # Safety
    ///
    /// `raw` must come from `into_raw` of a `Request<T>` and be taken back once.
    pub(crate) unsafe fn from_raw(raw: *mut bindings::request) -> Self {
        Self {
            raw,
            _ops: PhantomData,
        }
    }

    /// Ends the request with `status`. Any context.
    pub(crate) fn end(self, status: bindings::blk_status_t) {
        let raw = self.into_raw();
        // SAFETY: the request was started and is ended once: the handle is consumed.
        unsafe { bindings::blk_mq_end_request(raw, status) };
    }
}

/// The driver data of request `rq` of a `Disk<T>`, valid while the tag set lives.
///
/// # Safety
///
/// `rq` must be a request of a disk whose ops are `T`.
pub(crate) unsafe fn request_data<'a, T: DiskOps>(rq: *mut bindings::request) -> &'a T::RequestData {
    // SAFETY: by the caller's contract the PDU holds a `T::RequestData` (`init_request`).
    unsafe { &*shim::graid_blk_mq_rq_to_pdu(rq).cast::<T::RequestData>() }
}

/// The bios of a raw request: `(bio, first sector, sectors)`.
///
/// # Safety
///
/// `rq` must be a live request that stays in the driver while the iterator is used.
pub(crate) unsafe fn bios_of(rq: *mut bindings::request) -> BioIter {
    // SAFETY: by the caller's contract.
    BioIter { next: unsafe { (*rq).bio } }
}

/// True if `rq` asks for its data to be durable on completion (`REQ_FUA`).
///
/// # Safety
///
/// `rq` must be a live request.
pub(crate) unsafe fn is_fua(rq: *mut bindings::request) -> bool {
    // SAFETY: by the caller's contract; a constant.
    unsafe { (*rq).cmd_flags & shim::graid_req_fua() != 0 }
}

/// `BLK_STS_OK`.
pub(crate) fn status_ok() -> bindings::blk_status_t {
    // SAFETY: constant.
    unsafe { shim::graid_blk_sts_ok() }
}

/// `BLK_STS_IOERR`.
pub(crate) fn status_ioerr() -> bindings::blk_status_t {
    // SAFETY: constant.
    unsafe { shim::graid_blk_sts_ioerr() }
}

/// `BLK_STS_NOTSUPP`.
pub(crate) fn status_notsupp() -> bindings::blk_status_t {
    // SAFETY: constant.
    unsafe { shim::graid_blk_sts_notsupp() }
}

/// Iterator over the bios of a request: `(bio, first sector, sectors)`.
pub(crate) struct BioIter {
    next: *mut bindings::bio,
}

impl Iterator for BioIter {
    type Item = (*mut bindings::bio, u64, u64);

    fn next(&mut self) -> Option<Self::Item> {
        let bio = self.next;
        if bio.is_null() {
            return None;
        }
        // SAFETY: `bio` is on the request's bio list, live while the request is.
        unsafe {
            self.next = (*bio).bi_next;
            let iter = (*bio).bi_iter;
            Some((bio, iter.bi_sector, u64::from(iter.bi_size >> 9)))
        }
    }
}

/// Shape and limits of a new disk.
pub(crate) struct DiskConfig<'a> {
    /// The disk is named `graid<index>`.
    pub(crate) index: u32,
    /// Size in 512-byte sectors.
    pub(crate) capacity_sectors: u64,
    /// Requests never cross a multiple of this many sectors (0: no boundary).
    pub(crate) chunk_sectors: u32,
    /// Preferred minimum and optimal I/O sizes in bytes (0: unset).
    pub(crate) io_min: u32,
    pub(crate) io_opt: u32,
    /// Largest discard the driver takes in one request, further limited by what every member
    /// takes (0: no discard).
    pub(crate) max_discard_sectors: u32,
    /// Raises the largest request to this many sectors where the members' limit is lower (0:
    /// the members' limit), and lifts the segment count limit: for a driver that copies the
    /// request's data and sends member I/O of its own, which the members split as they need.
    pub(crate) copy_max_sectors: u32,
    /// Member devices and the sector their data starts at, to stack their limits (and to be
    /// listed as the disk's slaves in sysfs).
    pub(crate) members: &'a [(*mut bindings::block_device, u64)],
}

/// A blk-mq tag set.
///
/// # Invariants
///
/// `inner` was set up by `blk_mq_alloc_tag_set` and is freed exactly once in `drop`.
#[pin_data(PinnedDrop)]
struct TagSet {
    #[pin]
    inner: Opaque<bindings::blk_mq_tag_set>,
}

impl TagSet {
    fn new(ops: &'static bindings::blk_mq_ops, cmd_size: usize) -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            inner <- Opaque::try_ffi_init(move |slot: *mut bindings::blk_mq_tag_set| {
                let mut set: bindings::blk_mq_tag_set = pin_init::zeroed();
                set.ops = ops;
                // SAFETY: reads a variable set at boot.
                set.nr_hw_queues = unsafe { bindings::nr_cpu_ids };
                set.nr_maps = 1;
                set.queue_depth = QUEUE_DEPTH;
                set.cmd_size = cmd_size as u32;
                set.numa_node = bindings::NUMA_NO_NODE;
                set.flags = bindings::BLK_MQ_F_BLOCKING
                    | bindings::BLK_MQ_F_STACKING
                    | bindings::BLK_MQ_F_NO_SCHED_BY_DEFAULT;
                // SAFETY: `slot` is valid for writes and pinned until `drop`.
                unsafe { slot.write(set) };
                // SAFETY: `slot` holds a filled-in tag set.
                to_result(unsafe { bindings::blk_mq_alloc_tag_set(slot) })
            }),
        })
    }
}

#[pinned_drop]
impl PinnedDrop for TagSet {
    fn drop(self: Pin<&mut Self>) {
        // SAFETY: allocated (type invariant); every disk using it was released before.
        unsafe { bindings::blk_mq_free_tag_set(self.inner.get()) };
    }
}

/// Most member devices a disk links as its slaves.
const MAX_HOLDERS: usize = 32;

/// A live blk-mq disk whose requests go to `T`.
///
/// # Invariants
///
/// `disk` was added with `add_disk`; it is removed (`del_gendisk`) once, by [`Disk::remove`]
/// or in `drop`, and put in `drop`, before the tag set and `ops` go away. `holders` lists the
/// member devices linked as the disk's slaves, unlinked before the removal.
#[pin_data(PinnedDrop)]
pub(crate) struct Disk<T: DiskOps> {
    #[pin]
    ops: T,
    #[pin]
    tagset: TagSet,
    disk: *mut bindings::gendisk,
    /// Opens are refused (the disk is being removed). Read by `graid_disk_open` through the
    /// gendisk's `private_data`.
    closing: AtomicBool,
    removed: AtomicBool,
    holders: [AtomicPtr<bindings::block_device>; MAX_HOLDERS],
}

// SAFETY: the gendisk is a kernel object usable from any thread; the fields that change after
// creation are atomics; `ops` is Send + Sync.
unsafe impl<T: DiskOps> Send for Disk<T> {}
// SAFETY: as above.
unsafe impl<T: DiskOps> Sync for Disk<T> {}

impl<T: DiskOps> Disk<T> {
    const MQ_OPS: bindings::blk_mq_ops = {
        let mut ops: bindings::blk_mq_ops = pin_init::zeroed();
        ops.queue_rq = Some(Self::queue_rq_callback);
        ops.queue_rqs = Some(Self::queue_rqs_callback);
        ops.init_request = Some(Self::init_request_callback);
        ops.init_hctx = Some(shim::graid_blk_mq_init_hctx);
        ops
    };

    /// Creates the disk `/dev/graid<index>`: sets up `ops`, runs `prepare` on them (the last
    /// moment no request can arrive yet), then adds the disk; requests may arrive before this
    /// returns.
    pub(crate) fn new<'a>(
        config: &'a DiskConfig<'a>,
        ops: impl PinInit<T, Error> + 'a,
        prepare: impl FnOnce(&T) -> Result + 'a,
    ) -> impl PinInit<Self, Error> + 'a
    where
        T: 'a,
    {
        try_pin_init!(&this in Self {
            ops <- ops,
            tagset <- TagSet::new(&Self::MQ_OPS, size_of::<T::RequestData>()),
            closing: AtomicBool::new(false),
            removed: AtomicBool::new(false),
            holders: [const { AtomicPtr::new(ptr::null_mut()) }; MAX_HOLDERS],
            // SAFETY: `ops`, `tagset` and `closing` are initialised and pinned at this point.
            disk: unsafe {
                prepare(&(*this.as_ptr()).ops)?;
                Self::add_disk(this.as_ptr(), config)?
            },
        })
    }

    /// # Safety
    ///
    /// `this` must point at a `Disk` whose `ops`, `tagset`, `closing` and `holders` are
    /// initialised and pinned.
    unsafe fn add_disk(this: *mut Self, config: &DiskConfig<'_>) -> Result<*mut bindings::gendisk> {
        let mut lim: bindings::queue_limits = pin_init::zeroed();
        // SAFETY: `lim` is a valid queue_limits; member devices are open (caller's config).
        unsafe {
            bindings::blk_set_stacking_limits(&mut lim);
            for &(bdev, offset) in config.members {
                bindings::queue_limits_stack_bdev(&mut lim, bdev, offset, c"graid".as_char_ptr());
            }
        }
        // SAFETY: constant.
        lim.features |= unsafe { shim::graid_blk_feat_write_cache_fua() };
        lim.chunk_sectors = config.chunk_sectors;
        if config.io_min != 0 {
            lim.io_min = config.io_min;
        }
        lim.io_opt = config.io_opt;
        if config.copy_max_sectors != 0 {
            lim.max_hw_sectors = lim.max_hw_sectors.max(config.copy_max_sectors);
            lim.max_segments = u16::MAX;
        }
        // Stacking left the smallest of the members' discard limits (0 if one has none). One
        // segment per request: a multi-range discard would not be one contiguous range.
        lim.max_hw_discard_sectors = lim.max_hw_discard_sectors.min(config.max_discard_sectors);
        lim.max_discard_segments = 1;
        // Not supported (yet), though stacking may have inherited them: refuse them at the
        // queue rather than failing requests.
        lim.max_write_zeroes_sectors = 0;
        lim.max_hw_wzeroes_unmap_sectors = 0;
        lim.max_hw_zone_append_sectors = 0;
        lim.max_secure_erase_sectors = 0;
        lim.atomic_write_hw_max = 0;

        // SAFETY: the fields are initialised and pinned (caller's contract); the queue data
        // points at `ops`, which outlives the disk.
        unsafe {
            let tagset = Opaque::cast_into(&raw const (*this).tagset.inner);
            let queuedata = (&raw const (*this).ops).cast_mut().cast::<c_void>();
            let disk = from_err_ptr(shim::graid_blk_mq_alloc_disk(tagset, &mut lim, queuedata))?;
            if let Err(e) = clear_nowait((*disk).queue) {
                bindings::put_disk(disk);
                return Err(e);
            }
            // A static table: the gendisk may outlive this `Disk` while someone holds it open.
            (*disk).fops = shim::graid_disk_fops_ptr();
            // Read by `graid_disk_open`, which only runs while the disk is live.
            (*disk).private_data = (&raw const (*this).closing).cast_mut().cast::<c_void>();
            write_disk_name(&mut (*disk).disk_name, config.index);
            bindings::set_capacity(disk, config.capacity_sectors);
            let ret = shim::graid_add_disk(disk);
            if ret != 0 {
                bindings::put_disk(disk);
                return Err(Error::from_errno(ret));
            }
            // lsblk and /sys/block/*/holders show the stack; a failure costs only that.
            let holders = &(*this).holders;
            for (&(bdev, _), slot) in config.members.iter().zip(holders.iter()) {
                if bindings::bd_link_disk_holder(bdev, disk) == 0 {
                    slot.store(bdev, Ordering::Release);
                }
            }
            Ok(disk)
        }
    }

    /// The driver's request handler.
    pub(crate) fn ops(&self) -> &T {
        &self.ops
    }

    /// The disk whose ops `ops` are.
    ///
    /// # Safety
    ///
    /// `ops` must be the `ops` field of a `Disk<T>` (every `T` the driver creates is built by
    /// [`Disk::new`]).
    pub(crate) unsafe fn of_ops(ops: &T) -> &Self {
        // SAFETY: by the caller's contract.
        unsafe { &*kernel::container_of!(ptr::from_ref(ops), Self, ops) }
    }

    /// True if some request in the driver satisfies `pred` (on its driver data).
    pub(crate) fn any_request(&self, mut pred: impl FnMut(&T::RequestData) -> bool) -> bool {
        struct Search<'a, D> {
            pred: &'a mut dyn FnMut(&D) -> bool,
            found: bool,
        }

        /// # Safety
        ///
        /// Called by `blk_mq_tagset_busy_iter` with the `Search` passed below, for a started
        /// request of this tag set (which holds a reference on it for the call).
        unsafe extern "C" fn visit<T: DiskOps>(rq: *mut bindings::request, data: *mut c_void) -> bool {
            // SAFETY: `data` is the search below; `rq` is a request of a `Disk<T>`.
            let (search, pdu) = unsafe {
                (&mut *data.cast::<Search<'_, T::RequestData>>(), request_data::<T>(rq))
            };
            search.found = (search.pred)(pdu);
            // Go on until found.
            !search.found
        }

        let mut search = Search::<T::RequestData> {
            pred: &mut pred,
            found: false,
        };
        // SAFETY: the tag set is live; the callback and its data outlive the call.
        unsafe {
            bindings::blk_mq_tagset_busy_iter(
                self.tagset.inner.get(),
                Some(visit::<T>),
                ptr::from_mut(&mut search).cast::<c_void>(),
            )
        };
        search.found
    }

    /// Sends a "change" uevent for the disk carrying `vars` (each `KEY=value`), so udev can name
    /// it. Block devices get no driver hook on their "add" uevent, hence the extra event.
    pub(crate) fn change_uevent(&self, vars: &[&[u8]]) -> Result {
        // Every variable NUL-terminated, back to back, then the pointer array.
        let mut strings = KVec::new();
        for var in vars {
            strings.extend_from_slice(var, GFP_KERNEL)?;
            strings.push(0, GFP_KERNEL)?;
        }
        let mut envp: KVec<*mut kernel::ffi::c_char> = KVec::with_capacity(vars.len() + 1, GFP_KERNEL)?;
        let mut offset = 0;
        for var in vars {
            let ptr = strings.as_mut_ptr().wrapping_add(offset).cast::<kernel::ffi::c_char>();
            envp.push(ptr, GFP_KERNEL)?;
            offset += var.len() + 1;
        }
        envp.push(ptr::null_mut(), GFP_KERNEL)?;
        // SAFETY: the disk is live (type invariant); `envp` is a NULL-terminated array of
        // NUL-terminated strings that outlives the call (the uevent copies them).
        let ret = unsafe {
            let kobj = &raw mut (*(*self.disk).part0).bd_device.kobj;
            bindings::kobject_uevent_env(kobj, bindings::kobject_action_KOBJ_CHANGE, envp.as_mut_ptr())
        };
        to_result(ret)
    }

    /// Number of current openers of the disk (partitions included).
    pub(crate) fn open_count(&self) -> u32 {
        // SAFETY: the disk is live (type invariant); `part0` is its whole-disk device, whose
        // `atomic_t` opener count is only changed atomically.
        let openers = unsafe { AtomicI32::from_ptr(&raw mut (*(*self.disk).part0).bd_openers.counter) };
        openers.load(Ordering::Relaxed).max(0) as u32
    }

    /// The disk's kobject (`/sys/block/graidN`), a parent for the driver's own directories,
    /// which must be removed before the disk is.
    pub(crate) fn kobject(&self) -> *mut bindings::kobject {
        // SAFETY: the disk is live (type invariant); `part0` is its whole-disk device.
        unsafe { &raw mut (*(*self.disk).part0).bd_device.kobj }
    }

    /// Starts removing the disk: fails with `EBUSY` if it is open, otherwise refuses every open
    /// from now on (md's pattern: checked and set under the disk's `open_mutex`, which every
    /// open holds around `fops->open`), so nobody opens it and then sees it vanish.
    pub(crate) fn begin_close(&self) -> Result {
        // SAFETY: the disk is live (type invariant).
        let open_mutex = unsafe { &raw mut (*self.disk).open_mutex };
        // SAFETY: a live mutex of the disk, unlocked below on every path.
        unsafe { bindings::mutex_lock(open_mutex) };
        let busy = self.open_count() > 0;
        if !busy {
            self.closing.store(true, Ordering::Release);
        }
        // SAFETY: locked above by this task.
        unsafe { bindings::mutex_unlock(open_mutex) };
        if busy {
            Err(EBUSY)
        } else {
            Ok(())
        }
    }

    /// Unlinks member device `bdev` from the disk's slaves (before the member is released
    /// while the disk stays). Not concurrent with [`Self::remove`] (the caller serialises).
    /// Shows `bdev`, a member added to the running array, as one of the disk's holders
    /// (`/sys/block/*/holders`, lsblk); a failure costs only that.
    pub(crate) fn link_member(&self, bdev: *mut bindings::block_device) {
        if self.removed.load(Ordering::Acquire) || bdev.is_null() {
            return;
        }
        let Some(slot) = self.holders.iter().find(|s| s.load(Ordering::Acquire).is_null()) else {
            return;
        };
        // SAFETY: the disk is live and not deleted; `bdev` is open (the caller's member).
        if unsafe { bindings::bd_link_disk_holder(bdev, self.disk) } == 0 {
            slot.store(bdev, Ordering::Release);
        }
    }

    pub(crate) fn unlink_member(&self, bdev: *mut bindings::block_device) {
        if self.removed.load(Ordering::Acquire) {
            return;
        }
        for slot in self.holders.iter() {
            if !bdev.is_null()
                && slot
                    .compare_exchange(bdev, ptr::null_mut(), Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
            {
                // SAFETY: the disk is live and not deleted; `bdev` was linked in `new` and
                // is open (the caller releases it after this).
                unsafe { bindings::bd_unlink_disk_holder(bdev, self.disk) };
            }
        }
    }

    /// Freezes the disk's queue: waits until no request is in flight and holds new ones back
    /// until the returned guard is dropped. `EBUSY` if requests are still in flight after
    /// `timeout_ms` (a member that stopped answering); nothing is held back then.
    pub(crate) fn freeze(&self, timeout_ms: u32) -> Result<FrozenQueue<'_, T>> {
        // SAFETY: the disk is live (type invariant); its queue lives as long.
        let queue = unsafe { (*self.disk).queue };
        // SAFETY: a live queue; every start is undone by the unfreeze below or in the guard.
        let frozen = unsafe {
            bindings::blk_freeze_queue_start(queue);
            let jiffies = kernel::time::msecs_to_jiffies(timeout_ms);
            bindings::blk_mq_freeze_queue_wait_timeout(queue, jiffies) > 0
        };
        if !frozen {
            // SAFETY: started above.
            unsafe { bindings::blk_mq_unfreeze_queue_nomemrestore(queue) };
            return Err(EBUSY);
        }
        Ok(FrozenQueue { disk: self, queue })
    }

    /// Begins an update of the disk's queue limits (its limits lock held until the update is
    /// committed or dropped). Before any freeze of the queue: the block layer takes the lock
    /// first (`queue_limits_commit_update_frozen`).
    pub(crate) fn begin_limits(&self) -> LimitsUpdate<'_, T> {
        // SAFETY: the disk is live (type invariant), its queue too; the update is committed
        // or cancelled by the guard.
        let lim = unsafe { shim::graid_queue_limits_start_update((*self.disk).queue) };
        LimitsUpdate {
            disk: self,
            lim,
            open: true,
        }
    }

    /// Gives the disk `sectors` of capacity and tells userspace (a `RESIZE=1` change uevent,
    /// so `lsblk` and the filesystem tools see it without a reopen).
    pub(crate) fn set_capacity(&self, sectors: u64) {
        // SAFETY: the disk is live (type invariant).
        let _ = unsafe { bindings::set_capacity_and_notify(self.disk, sectors) };
    }

    /// Removes the disk: unlinks the members, deletes the gendisk (waiting for every request
    /// in flight to end). Once; later calls do nothing.
    pub(crate) fn remove(&self) {
        if self.removed.swap(true, Ordering::AcqRel) {
            return;
        }
        self.closing.store(true, Ordering::Release);
        // SAFETY: the disk is live and not yet deleted; each holder was linked in `add_disk`
        // (slave links go before the disk's kobjects do).
        unsafe {
            for slot in self.holders.iter() {
                let bdev = slot.swap(ptr::null_mut(), Ordering::AcqRel);
                if !bdev.is_null() {
                    bindings::bd_unlink_disk_holder(bdev, self.disk);
                }
            }
            bindings::del_gendisk(self.disk);
        }
    }

    /// # Safety
    ///
    /// Called by blk-mq only, for a request of a disk made by [`Disk::new`].
    unsafe extern "C" fn queue_rq_callback(
        _hctx: *mut bindings::blk_mq_hw_ctx,
        bd: *const bindings::blk_mq_queue_data,
    ) -> bindings::blk_status_t {
        // SAFETY: blk-mq passes a valid request whose queue's queuedata is our `ops`.
        unsafe {
            let rq = (*bd).rq;
            let ops = &*(*(*rq).q).queuedata.cast::<T>();
            bindings::blk_mq_start_request(rq);
            ops.queue_rq(Request::from_raw(rq));
        }
        status_ok()
    }

    /// # Safety
    ///
    /// Called by blk-mq only, with a list of requests of one disk made by [`Disk::new`].
    unsafe extern "C" fn queue_rqs_callback(list: *mut bindings::rq_list) {
        // SAFETY: blk-mq passes a valid list; we take every request off it.
        let head = unsafe { ptr::replace(&raw mut (*list).head, ptr::null_mut()) };
        // SAFETY: as above.
        unsafe { (*list).tail = ptr::null_mut() };
        if head.is_null() {
            return;
        }
        // SAFETY: all requests of the list belong to one queue, whose queuedata is our `ops`.
        let ops = unsafe { &*(*(*head).q).queuedata.cast::<T>() };
        let mut requests = RqListIter { next: head, _ops: PhantomData::<T> };
        ops.queue_rqs(&mut requests);
        // Anything the driver did not take is started and handed over one by one.
        for rq in requests {
            ops.queue_rq(rq);
        }
    }

    /// # Safety
    ///
    /// Called by blk-mq only, once per request of the tag set, before it is used.
    unsafe extern "C" fn init_request_callback(
        _set: *mut bindings::blk_mq_tag_set,
        rq: *mut bindings::request,
        _hctx_idx: c_uint,
        _numa_node: c_int,
    ) -> c_int {
        // SAFETY: the PDU has room for a `T::RequestData` (`cmd_size`) and is not in use.
        let data = unsafe {
            let data = shim::graid_blk_mq_rq_to_pdu(rq).cast::<T::RequestData>();
            data.write(T::RequestData::default());
            &*data
        };
        T::init_request_data(data);
        0
    }
}

/// Takes the requests of a `queue_rqs` list one by one, starting each.
struct RqListIter<T: DiskOps> {
    next: *mut bindings::request,
    _ops: PhantomData<T>,
}

impl<T: DiskOps> Iterator for RqListIter<T> {
    type Item = Request<T>;

    fn next(&mut self) -> Option<Request<T>> {
        let rq = self.next;
        if rq.is_null() {
            return None;
        }
        // SAFETY: `rq` is on the list blk-mq handed over, which is ours now; it is started
        // before the driver sees it.
        unsafe {
            self.next = (*rq).__bindgen_anon_1.rq_next;
            (*rq).__bindgen_anon_1.rq_next = ptr::null_mut();
            bindings::blk_mq_start_request(rq);
            Some(Request::from_raw(rq))
        }
    }
}

/// An update of a disk's queue limits ([`Disk::begin_limits`]): committed, or cancelled when
/// dropped (nothing changes then).
pub(crate) struct LimitsUpdate<'a, T: DiskOps> {
    disk: &'a Disk<T>,
    lim: bindings::queue_limits,
    open: bool,
}

impl<T: DiskOps> LimitsUpdate<'_, T> {
    /// The I/O shape, as [`DiskConfig`]'s fields of the same names say (the largest request
    /// is only raised by `copy_max_sectors`).
    pub(crate) fn set_io_shape(&mut self, chunk_sectors: u32, io_min: u32, io_opt: u32, copy_max_sectors: u32) {
        self.lim.chunk_sectors = chunk_sectors;
        if io_min != 0 {
            self.lim.io_min = io_min;
        }
        self.lim.io_opt = io_opt;
        if copy_max_sectors != 0 {
            self.lim.max_hw_sectors = self.lim.max_hw_sectors.max(copy_max_sectors);
        }
    }

    /// Applies the update. The caller has frozen the queue: no request is split by the old
    /// limits and then mapped by what the new ones stand for.
    pub(crate) fn commit(mut self) -> Result {
        self.open = false;
        // SAFETY: started by `begin_limits` on this live disk's queue; the commit releases the
        // limits lock.
        to_result(unsafe { bindings::queue_limits_commit_update((*self.disk.disk).queue, &mut self.lim) })
    }
}

impl<T: DiskOps> Drop for LimitsUpdate<'_, T> {
    fn drop(&mut self) {
        if self.open {
            // SAFETY: started by `begin_limits` and neither committed nor cancelled yet.
            unsafe { shim::graid_queue_limits_cancel_update((*self.disk.disk).queue) };
        }
    }
}

/// Clears `BLK_FEAT_NOWAIT`, which `blk_mq_alloc_queue` sets for every queue: `queue_rq` may
/// sleep, so a `REQ_NOWAIT` submitter (io_uring) must go to its blocking path instead.
///
/// # Safety
///
/// `q` must be a live queue not yet used for I/O.
unsafe fn clear_nowait(q: *mut bindings::request_queue) -> Result {
    // SAFETY: `q` is live; the update is committed (and its lock released) below.
    let mut lim = unsafe { shim::graid_queue_limits_start_update(q) };
    // SAFETY: constant.
    lim.features &= !unsafe { shim::graid_blk_feat_nowait() };
    // SAFETY: started above.
    to_result(unsafe { bindings::queue_limits_commit_update(q, &mut lim) })
}

#[pinned_drop]
impl<T: DiskOps> PinnedDrop for Disk<T> {
    fn drop(self: Pin<&mut Self>) {
        self.remove();
        // SAFETY: added in `new` and removed above (type invariant); put once, here.
        unsafe { bindings::put_disk(self.disk) };
    }
}

/// `fops->open` of every graid disk (`shim.c`): refuses while the disk is being removed.
///
/// # Safety
///
/// Called by the block layer under `disk->open_mutex`, for a live graid disk, whose
/// `private_data` points at its `Disk`'s `closing` flag.
#[no_mangle]
unsafe extern "C" fn graid_disk_open(disk: *mut bindings::gendisk, _mode: bindings::blk_mode_t) -> c_int {
    // SAFETY: by the function's contract: the flag lives as long as the disk is live, and opens
    // reach us only while it is.
    let closing = unsafe { &*(*disk).private_data.cast::<AtomicBool>() };
    if closing.load(Ordering::Acquire) {
        -(bindings::ENODEV as c_int)
    } else {
        0
    }
}

/// Writes `graid<index>` NUL-terminated into a gendisk name buffer.
fn write_disk_name(buf: &mut [kernel::ffi::c_char], index: u32) {
    let mut digits = [0u8; 10];
    let mut n = index;
    let mut len = 0;
    loop {
        if let Some(d) = digits.get_mut(len) {
            *d = b'0' + (n % 10) as u8;
        }
        len += 1;
        n /= 10;
        if n == 0 || len == digits.len() {
            break;
        }
    }
    let name = Iterator::chain(b"graid".iter(), digits.iter().take(len).rev());
    let mut written = 0;
    for (dst, src) in buf.iter_mut().zip(name) {
        *dst = *src as kernel::ffi::c_char;
        written += 1;
    }
    if let Some(nul) = buf.get_mut(written.min(buf.len().saturating_sub(1))) {
        *nul = 0;
    }
}

/// A frozen queue (see [`Disk::freeze`]), thawed when dropped.
pub(crate) struct FrozenQueue<'a, T: DiskOps> {
    disk: &'a Disk<T>,
    queue: *mut bindings::request_queue,
}

impl<T: DiskOps> FrozenQueue<'_, T> {
    /// The frozen disk's driver.
    pub(crate) fn ops(&self) -> &T {
        self.disk.ops()
    }
}

impl<T: DiskOps> Drop for FrozenQueue<'_, T> {
    fn drop(&mut self) {
        // SAFETY: frozen by `Disk::freeze`, whose disk (and queue) outlives the guard.
        unsafe { bindings::blk_mq_unfreeze_queue_nomemrestore(self.queue) };
    }
}
