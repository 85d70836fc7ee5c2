// SPDX-License-Identifier: GPL-2.0

//! blk-mq disks for stacking drivers (`include/linux/blk-mq.h`).
//!
//! Unlike `kernel::block::mq` in 7.2 this sets `fops.owner` (so an open disk pins the module;
//! the table is static in `shim.c`, where `THIS_MODULE` is a link-time constant),
//! takes full queue limits stacked from the member devices (write cache + FUA, chunk
//! boundaries, io_min/io_opt), uses `BLK_MQ_F_BLOCKING` so `queue_rq` runs in process context
//! and may allocate with `GFP_NOIO`, and lets the driver end a request with any status.

use crate::kernel_ext::shim;
use core::mem::size_of;
use kernel::{
    bindings,
    error::{from_err_ptr, to_result},
    ffi::c_void,
    prelude::*,
    types::Opaque,
};

/// What a disk does with its requests.
pub(crate) trait DiskOps: Send + Sync + Sized {
    /// Per-request driver data, kept in the request's PDU. Written by `queue_rq` before use.
    type RequestData: Send;

    /// Handles a started request, in process context. Returning an error status ends the
    /// request with it at once; returning OK means the driver ends it later with
    /// [`Request::end`], exactly once.
    fn queue_rq(&self, rq: Request<Self>) -> bindings::blk_status_t;
}

/// A started request handed to [`DiskOps::queue_rq`].
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

    /// The raw request, to end it later with [`Request::end`].
    pub(crate) fn raw(&self) -> *mut bindings::request {
        self.raw
    }

    /// The request's driver data.
    pub(crate) fn data(&self) -> *mut T::RequestData {
        // SAFETY: the tag set was created with `cmd_size = size_of::<T::RequestData>()`.
        unsafe { shim::graid_blk_mq_rq_to_pdu(self.raw) }.cast()
    }

    /// Ends a request handed out by `queue_rq`. Callable from interrupt context.
    ///
    /// # Safety
    ///
    /// `raw` must be a request this disk's `queue_rq` returned OK for, ended exactly once.
    pub(crate) unsafe fn end(raw: *mut bindings::request, status: bindings::blk_status_t) {
        // SAFETY: by the caller's contract.
        unsafe { bindings::blk_mq_end_request(raw, status) };
    }
}

/// The driver data of a request of a `Disk<T>`.
///
/// # Safety
///
/// `rq` must be a live request of a disk whose ops are `T`.
pub(crate) unsafe fn request_data<T: DiskOps>(rq: *mut bindings::request) -> *mut T::RequestData {
    // SAFETY: by the caller's contract the PDU holds a `T::RequestData`.
    unsafe { shim::graid_blk_mq_rq_to_pdu(rq) }.cast()
}

/// The bios of a raw request; see [`Request::bios`].
///
/// # Safety
///
/// `rq` must be a live request that stays in the driver while the iterator is used.
pub(crate) unsafe fn bios_of(rq: *mut bindings::request) -> BioIter {
    // SAFETY: by the caller's contract.
    BioIter { next: unsafe { (*rq).bio } }
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
    /// Member devices and the sector their data starts at, to stack their limits.
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
                set.nr_hw_queues = 1;
                set.nr_maps = 1;
                set.queue_depth = 128;
                set.cmd_size = cmd_size as u32;
                set.numa_node = bindings::NUMA_NO_NODE;
                set.flags = bindings::BLK_MQ_F_BLOCKING;
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

/// A live blk-mq disk whose requests go to `T`.
///
/// # Invariants
///
/// `disk` was added with `add_disk` and is deleted and put exactly once in `drop`, before the
/// tag set and `ops` go away.
#[pin_data(PinnedDrop)]
pub(crate) struct Disk<T: DiskOps> {
    #[pin]
    ops: T,
    #[pin]
    tagset: TagSet,
    disk: *mut bindings::gendisk,
}

// SAFETY: the gendisk is only touched at creation and in `drop`; `ops` is Send + Sync.
unsafe impl<T: DiskOps> Send for Disk<T> {}
// SAFETY: as above.
unsafe impl<T: DiskOps> Sync for Disk<T> {}

impl<T: DiskOps> Disk<T> {
    const MQ_OPS: bindings::blk_mq_ops = {
        let mut ops: bindings::blk_mq_ops = pin_init::zeroed();
        ops.queue_rq = Some(Self::queue_rq_callback);
        ops.init_hctx = Some(shim::graid_blk_mq_init_hctx);
        ops
    };

    /// Creates and adds the disk `/dev/graid<index>`; requests may arrive before this returns.
    pub(crate) fn new<'a>(
        config: &'a DiskConfig<'a>,
        ops: impl PinInit<T, Error> + 'a,
    ) -> impl PinInit<Self, Error> + 'a
    where
        T: 'a,
    {
        try_pin_init!(&this in Self {
            ops <- ops,
            tagset <- TagSet::new(&Self::MQ_OPS, size_of::<T::RequestData>()),
            // SAFETY: `ops` and `tagset` are initialised and pinned at this point.
            disk: unsafe { Self::add_disk(this.as_ptr(), config)? },
        })
    }

    /// # Safety
    ///
    /// `this` must point at a `Disk` whose `ops` and `tagset` are initialised and pinned.
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
        // Stacking left the smallest of the members' discard limits (0 if one has none). One
        // segment per request: a multi-range discard would not be one contiguous range.
        lim.max_hw_discard_sectors = lim.max_hw_discard_sectors.min(config.max_discard_sectors);
        lim.max_discard_segments = 1;
        // Not supported (yet): refuse them at the queue rather than failing requests.
        lim.max_write_zeroes_sectors = 0;
        lim.max_hw_wzeroes_unmap_sectors = 0;
        lim.max_hw_zone_append_sectors = 0;
        lim.atomic_write_hw_max = 0;

        // SAFETY: the fields are initialised and pinned (caller's contract); the queue data
        // points at `ops`, which outlives the disk.
        unsafe {
            let tagset = Opaque::cast_into(&raw const (*this).tagset.inner);
            let queuedata = (&raw const (*this).ops).cast_mut().cast::<c_void>();
            let disk = from_err_ptr(shim::graid_blk_mq_alloc_disk(tagset, &mut lim, queuedata))?;
            // A static table: the gendisk may outlive this `Disk` while someone holds it open.
            (*disk).fops = shim::graid_disk_fops_ptr();
            write_disk_name(&mut (*disk).disk_name, config.index);
            bindings::set_capacity(disk, config.capacity_sectors);
            let ret = shim::graid_add_disk(disk);
            if ret != 0 {
                bindings::put_disk(disk);
                return Err(Error::from_errno(ret));
            }
            Ok(disk)
        }
    }

    /// The driver's request handler.
    pub(crate) fn ops(&self) -> &T {
        &self.ops
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
        envp.push(core::ptr::null_mut(), GFP_KERNEL)?;
        // SAFETY: the disk is live (type invariant); `envp` is a NULL-terminated array of
        // NUL-terminated strings that outlives the call (the uevent copies them).
        let ret = unsafe {
            let kobj = &raw mut (*(*self.disk).part0).bd_device.kobj;
            bindings::kobject_uevent_env(kobj, bindings::kobject_action_KOBJ_CHANGE, envp.as_mut_ptr())
        };
        to_result(ret)
    }

    /// Number of current openers of the disk.
    pub(crate) fn open_count(&self) -> u32 {
        // SAFETY: the disk is live (type invariant); `part0` is its whole-disk device.
        unsafe { (*(*self.disk).part0).bd_openers.counter as u32 }
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
            ops.queue_rq(Request {
                raw: rq,
                _ops: PhantomData,
            })
        }
    }
}

#[pinned_drop]
impl<T: DiskOps> PinnedDrop for Disk<T> {
    fn drop(self: Pin<&mut Self>) {
        // SAFETY: added in `new` (type invariant). `del_gendisk` drains and stops all I/O, so no
        // request reaches `ops` afterwards.
        unsafe {
            bindings::del_gendisk(self.disk);
            bindings::put_disk(self.disk);
        }
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

use core::marker::PhantomData;
