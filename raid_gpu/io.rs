// SPDX-License-Identifier: GPL-2.0

//! The kernel home of an array's engine: blk-mq requests go into
//! [`ArrayEngine`](crate::engine::array::ArrayEngine), the member I/O it plans goes out as
//! clones of the request's own bios (no data copy), and the engine's worker runs on the array's
//! own workqueue. Everything that decides anything lives in the engine; this file only
//! translates between it and the block layer.

use crate::bitmap_io::Bitmap;
use crate::engine::bitmap::{RegionState, Regions, BLOCK_BYTES};
use crate::engine::array::{ArrayEngine, EngineStore};
use crate::engine::geometry::{Geometry, MAX_MEMBERS};
use crate::engine::members::{MemberSet, MemberState, NO_SLOT};
use crate::engine::parity::{Columns, ParityJob, ParityOp};
use crate::engine::platform::{
    Computed, Events, LogIo, MemberEvent, MemberIo, Metadata, Op, PieceInfo, RebuildBuffer, RebuildIo,
    RebuildIoError, Requests, Source, Status, StripeBuffers, SubmitError, WorkList, LOG_HEADERS,
};
use crate::engine::ppl::{LogArea, LogId, BLOCK_BYTES as PPL_BLOCK_BYTES};
use crate::engine::request::RequestState;
use crate::engine::rebuild::REBUILD_COLUMN_SECTORS;
use crate::engine::scrub::ScrubMode;
use crate::engine::stripe::{lock_slots_for, SLICE_SECTORS};
use crate::engine::superblock::{Superblock, UUID_LEN};
use crate::kernel_ext::{
    bio::{self, transfer_virt, transfer_virt_batch, CloneOp, CloneSet, VirtTransfer},
    blk_mq::{self, Disk, DiskOps, Request},
    compat::param,
    plug,
    work::{noio_scope, RequestWork, WorkHandler, WorkQueue, Worker},
};
use crate::buffer_cache::BufferCache;
use crate::log_batch::{LogBatcher, LogSlot, LogTarget, LogWrite};
use crate::member_devices::{Member, MemberDevices, SpareDevice};
use crate::helper_device;
use crate::rq_stack::{Link, RqStack};
pub(crate) use crate::rq_stack::RqRef;
use crate::stripe_io::{self, BufferStats, CarriedWrites, Reserve, StripeBuffer};
use crate::superblock_io::SuperblockWriter;
use core::ptr;
use core::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering};
use kernel::{
    alloc::KVVec,
    bindings, new_mutex,
    prelude::*,
    sync::Mutex,
    time::{Instant, Monotonic},
};

/// The driver data of every request: the engine's state, the link of the worker's lists, and
/// for RAID 5/6 the stripe work item, its array and request, and the stripe buffer.
#[derive(Default)]
pub(crate) struct Pdu {
    state: RequestState,
    next: AtomicPtr<bindings::request>,
    work: RequestWork,
    io: AtomicPtr<ArrayIo>,
    rq: AtomicPtr<bindings::request>,
    buffer: AtomicPtr<StripeBuffer>,
    /// Its partial parity log writes while they wait for or ride in a batch (`log_batch.rs`).
    log: [LogSlot; LOG_HEADERS as usize],
}

/// Context riding in front of every member bio.
pub(crate) struct PieceCtx {
    rq: RqRef,
    io: *const ArrayIo,
    piece: PieceInfo,
}

// SAFETY: the pointers are only dereferenced in the completion, while the request (and so the
// array: `del_gendisk` waits for every request to end before the array goes) is alive.
unsafe impl Send for PieceCtx {}

/// The link of the lists a request waits on (each request is on at most one at a time).
struct WaitLink;

impl Link for WaitLink {
    fn of<'a>(rq: RqRef) -> &'a AtomicPtr<bindings::request> {
        &pdu(rq).next
    }
}

/// A list of requests waiting for the worker, a lock, a buffer or the log.
type WaitList = RqStack<WaitLink>;

/// The PDU of a request in the engine's hands.
fn pdu<'a>(rq: RqRef) -> &'a Pdu {
    // SAFETY: an `RqRef` is a request of an array disk (whose PDU is a `Pdu`, made by
    // `init_request`); the PDU lives as long as the tag set, which outlives the engine's use.
    unsafe { blk_mq::request_data::<ArrayIo>(rq.0) }
}

/// What the array around a request handler does for it (`array.rs`, which gives them at
/// creation: this file need not know the array). Any context.
#[derive(Clone, Copy)]
pub(crate) struct ArrayHooks {
    /// Makes the array's takeover (spares, a replacement, uevents) run soon.
    pub(crate) kick_takeover: fn(&ArrayIo),
    /// Notes a member event for a uevent.
    pub(crate) note_event: fn(&ArrayIo, u32, MemberEvent),
    /// Notes a scrub's end for a uevent.
    pub(crate) note_scrub_end: fn(&ArrayIo, ScrubMode, bool),
    /// A reshape ended: the array takes its new size and queue limits.
    pub(crate) reshape_ended: fn(&ArrayIo),
}

/// An array's request handler: the engine, the member devices, the bio set for member I/O,
/// the superblock writer and the worker.
#[pin_data]
pub(crate) struct ArrayIo {
    /// First, so it is cancelled before anything it uses goes away.
    #[pin]
    worker: Worker<ArrayIo>,
    pub(crate) engine: Engine,
    /// Member devices, in role order.
    pub(crate) files: MemberDevices,
    /// The spares' devices (the engine's table says who they are). Locked by the worker
    /// while it writes their superblocks, and by the member operations that move them.
    #[pin]
    pub(crate) spares: Mutex<KVec<SpareDevice>>,
    #[pin]
    clones: CloneSet<PieceCtx>,
    #[pin]
    pub(crate) superblocks: SuperblockWriter,
    deferred: WaitList,
    parked: WaitList,
    /// RAID 5/6: the stripe steps' queue, the lock and buffer waiters, the reserve buffer.
    stripe_queue: WorkQueue,
    stripe_waits: KVVec<WaitList>,
    /// Per slot: the writes its lock's holder took in (`stripe_hold.rs`).
    adopted: KVVec<WaitList>,
    buffer_wait: WaitList,
    /// Requests waiting for the partial parity log to wrap.
    log_wait: WaitList,
    /// The log writes, batched per member. After the stripe queue, which runs its sender.
    #[pin]
    pub(crate) log_batch: LogBatcher<ArrayIo>,
    /// Stripe buffers kept for the next slices (`buffer_cache.rs`).
    #[pin]
    buffers: BufferCache,
    /// The buffer kept for when memory is short.
    reserve: Reserve,
    /// Where stripe buffers came from, and writes carried by another's (debugfs).
    pub(crate) buffer_stats: BufferStats,
    pub(crate) carried: CarriedWrites,
    /// The buffer the worker's rebuild goes through (`None` for RAID 0).
    #[pin]
    rebuild_buffer: Mutex<Option<KBox<StripeBuffer>>>,
    /// The origin of [`Events::now_ns`].
    epoch: Instant<Monotonic>,
    /// The write-intent bitmap, if the array has one.
    pub(crate) bitmap: Option<Bitmap>,
    hooks: ArrayHooks,
}

impl ArrayIo {
    /// `in_sync`: the copies are known to hold the same data.
    /// The superblock is borrowed, not moved: each initializer that moved it held a copy
    /// of its own, and with an older rustc (the distro's 1.85) the copies in the caller's
    /// frame passed the kernel's frame limit.
    pub(crate) fn new(
        superblock: &Superblock,
        geometry: Geometry,
        members: KVec<Option<Member>>,
        spares: KVec<SpareDevice>,
        in_sync: bool,
        bitmap: Option<Bitmap>,
        hooks: ArrayHooks,
    ) -> impl PinInit<Self, Error> + '_ {
        try_pin_init!(&this in Self {
            // SAFETY: the worker is a field of the value `this` points at.
            worker <- unsafe { Worker::new(this.as_ptr(), c"graid", kernel::static_lock_class!()) },
            engine <- engine_in_place(superblock, geometry, &members, &spares, in_sync),
            superblocks <- SuperblockWriter::new(members.len()),
            // A place for every role a mirror's grow may add (`engine/raid_devices.rs`) and one
            // past them for a replacement's device (`engine/replace.rs`).
            files: MemberDevices::new(
                members.into_iter().map(|m| m.map(|m| m.file)),
                MAX_MEMBERS as usize + 1,
            )?,
            spares <- new_mutex!(spares),
            clones <- CloneSet::new(64),
            deferred: WaitList::default(),
            parked: WaitList::default(),
            stripe_queue: WorkQueue::new(c"graid_stripe")?,
            stripe_waits: lock_wait_lists(&geometry)?,
            adopted: lock_wait_lists(&geometry)?,
            buffer_wait: WaitList::default(),
            log_wait: WaitList::default(),
            // Every role the array may come to have (a restripe adds members).
            log_batch <- LogBatcher::new(
                MAX_MEMBERS,
                geometry.level().has_parity() && superblock.ppl,
                log_send_fn,
                kernel::static_lock_class!(),
            ),
            buffers <- BufferCache::new(if geometry.level().has_parity() {
                crate::stripe_cache_bytes()
            } else {
                0
            }),
            reserve: if geometry.level().has_parity() {
                Reserve::new(geometry.members(), stripe_io_slice_bytes(), superblock.ppl)?
            } else {
                Reserve::none()
            },
            buffer_stats: stripe_io::buffer_stats(),
            carried: stripe_io::carried_writes(),
            rebuild_buffer <- new_mutex!(rebuild_buffer(&geometry)?),
            epoch: Instant::now(),
            bitmap,
            hooks,
        })
    }

    /// Waits until the worker and the stripe steps are idle (called once no request is left:
    /// what still runs then are the last steps' tails).
    /// Waits until the worker ran everything it was kicked for (an administrator's request).
    pub(crate) fn wait_worker(&self) {
        self.worker.flush();
    }

    pub(crate) fn flush_worker(&self) {
        self.stripe_queue.flush();
        self.worker.flush();
    }

    /// Waits until the worker is idle for good, with the rebuild held
    /// ([`ArrayEngine::hold_rebuild`]) and no request in flight: a run may kick the worker
    /// again as it ends (the rebuild step's end, a log switch, a timer), and a flush does not
    /// wait for that next run, so this flushes until nothing is queued, running or due. With
    /// the rebuild held and no request, each run queues fewer, and the loop ends.
    pub(crate) fn quiesce_worker(&self) {
        loop {
            self.worker.cancel_timer();
            self.flush_worker();
            if !self.worker.busy() {
                break;
            }
        }
    }

    /// A rebuild buffer with the columns `geometry` needs, for [`Self::swap_rebuild_buffer`]:
    /// made before a mirror's copies change or a restripe (a RAID 0's too), outside the freeze
    /// and without the buffer's lock (the worker holds it with member I/O in flight: no
    /// allocation that may reclaim there).
    pub(crate) fn new_rebuild_buffer(geometry: &Geometry) -> Result<SpareRebuildBuffer> {
        rebuild_buffer_for(geometry).map(|b| SpareRebuildBuffer(Some(b)))
    }

    /// A reserve stripe buffer for `geometry`'s member count (RAID 5/6; none otherwise), for
    /// [`Self::replace_reserve`]: made before a reshape onto more members, outside the freeze.
    pub(crate) fn new_reserve(&self, geometry: &Geometry) -> Result<Reserve> {
        if geometry.level().has_parity() {
            Reserve::new(geometry.members(), stripe_io_slice_bytes(), false)
        } else {
            Ok(Reserve::none())
        }
    }

    /// Puts `reserve` in the old one's place. With no request in flight.
    pub(crate) fn replace_reserve(&self, reserve: Reserve) {
        self.reserve.replace_with(reserve);
    }

    /// Puts `buffer` in the old one's place and returns the old one. With the worker idle (no
    /// rebuild or scrub step between the reads and the writes of its columns).
    pub(crate) fn swap_rebuild_buffer(&self, buffer: SpareRebuildBuffer) -> SpareRebuildBuffer {
        SpareRebuildBuffer(core::mem::replace(&mut *self.rebuild_buffer.lock(), buffer.0))
    }

    /// Runs `f` on the stripe buffer of `rq`, if it holds one.
    fn with_buffer<R>(&self, rq: RqRef, f: impl FnOnce(&mut StripeBuffer) -> R) -> Option<R> {
        let raw = pdu(rq).buffer.load(Ordering::Acquire);
        // SAFETY: a non-null pointer is the request's own buffer (`alloc_buffer`), freed only
        // by `free_buffer`; the engine runs one step of a request at a time, and no member
        // I/O of the buffer is in flight while a step copies or computes on it.
        (!raw.is_null()).then(|| f(unsafe { &mut *raw }))
    }

    /// Runs `f` on the rebuild buffer under its lock (the worker only); `None` for RAID 0.
    fn with_rebuild_buffer<R>(&self, f: impl FnOnce(&mut StripeBuffer) -> R) -> Option<R> {
        Option::as_deref_mut(&mut *self.rebuild_buffer.lock()).map(f)
    }

    /// Takes and starts one request.
    fn start(&self, rq: Request<Self>) {
        let op = match rq.op() {
            bindings::req_op_REQ_OP_READ => Op::Read,
            bindings::req_op_REQ_OP_WRITE => Op::Write,
            bindings::req_op_REQ_OP_FLUSH => Op::Flush,
            bindings::req_op_REQ_OP_DISCARD => Op::Discard,
            _ => return rq.end(blk_mq::status_notsupp()),
        };
        let (start, sectors) = (rq.pos(), u64::from(rq.bytes() >> 9));
        self.engine
            .submit(self, RqRef(rq.into_raw()), op, start, sectors);
    }
}

/// Whether this fresh stripe buffer allocation is to fail: every `fault_stripe_alloc`-th one
/// (a module parameter for tests; 0, the default, never).
fn injected_alloc_failure() -> bool {
    static ALLOCATIONS: AtomicU32 = AtomicU32::new(0);
    let every = param(&crate::module_parameters::fault_stripe_alloc);
    every != 0 && ALLOCATIONS.fetch_add(1, Ordering::Relaxed).wrapping_add(1) % every == 0
}

/// Sectors of the longest column window one stripe step handles, in bytes.
fn stripe_io_slice_bytes() -> usize {
    SLICE_SECTORS as usize * 512
}

/// `sectors` in bytes, if that fits a `usize`.
fn sectors_to_bytes(sectors: u64) -> Option<usize> {
    usize::try_from(sectors).ok()?.checked_mul(512)
}

/// A rebuild buffer made for a swap ([`ArrayIo::swap_rebuild_buffer`]).
pub(crate) struct SpareRebuildBuffer(Option<KBox<StripeBuffer>>);

/// The buffer of the rebuild and the scrub, allocated with the array (neither must stall for
/// memory).
fn rebuild_buffer(geometry: &Geometry) -> Result<Option<KBox<StripeBuffer>>> {
    if !geometry.level().has_parity() && !geometry.level().is_mirrored() {
        return Ok(None);
    }
    rebuild_buffer_for(geometry).map(Some)
}

/// A rebuild buffer for `geometry` whatever its level (a restripe of a RAID 0 moves its data
/// through one too).
fn rebuild_buffer_for(geometry: &Geometry) -> Result<KBox<StripeBuffer>> {
    // A column per member (copies, or members' contents), and two for a scrub's P and Q.
    let columns = (0..geometry.members() + 2).fold(Columns::EMPTY, Columns::with);
    let bytes = REBUILD_COLUMN_SECTORS as usize * 512;
    StripeBuffer::new(columns, bytes, false, GFP_KERNEL)
}

/// One wait list per stripe lock slot (none for RAID 0/1/10): up to 512 KiB, so not
/// necessarily contiguous.
fn lock_wait_lists(geometry: &Geometry) -> Result<KVVec<WaitList>> {
    let count = if geometry.level().has_parity() {
        lock_slots() as usize
    } else {
        0
    };
    let mut lists = KVVec::with_capacity(count, GFP_KERNEL)?;
    for _ in 0..count {
        lists.push(WaitList::default(), GFP_KERNEL)?;
    }
    Ok(lists)
}

/// Runs the next stripe step of the request whose PDU holds `work`.
///
/// # Safety
///
/// Called by the workqueue only, for the work item of a request's [`Pdu`] queued by
/// [`ArrayIo::queue_stripe_work`].
unsafe extern "C" fn stripe_work_fn(work: *mut bindings::work_struct) {
    // SAFETY: `work` is the `work` field of a live `Pdu` (only ever queued that way).
    let pdu = unsafe {
        &*kernel::container_of!(ptr::from_ref(RequestWork::from_raw(work)), Pdu, work)
    };
    let io = pdu.io.load(Ordering::Acquire);
    let rq = RqRef(pdu.rq.load(Ordering::Acquire));
    // SAFETY: `queue_stripe_work` stored the array before queueing; the array outlives its
    // requests and flushes this queue before it goes.
    let io = unsafe { &*io };
    // NOIO: the step finishes I/O; reclaim must not wait on it. No plug of its own: member
    // I/O to a device with an I/O scheduler is then dispatched by a kblockd work item, which
    // takes many steps' requests to a device at once (one doorbell); a plug per step sent each
    // step's two or three by themselves, and cost a third of 4 KiB write IOPS under QEMU.
    noio_scope(|| io.engine.stripe_work(io, rq));
}

/// The engine of an array, its memory in kernel vectors.
pub(crate) type Engine = ArrayEngine<Store>;

/// The engine's memory in kernel vectors (the members' states for [`MAX_MEMBERS`] roles, some
/// 18 KiB: not necessarily contiguous).
type Store = EngineStore<KVVec<MemberState>, KVec<AtomicU64>>;

/// The stripe lock slots of an array: sixteen per request its disk can have in flight.
fn lock_slots() -> u32 {
    lock_slots_for(blk_mq::max_requests())
}

/// The engine's memory: the members' states and the lock tables. Not inlined: its vectors'
/// temporaries stay out of the frame that builds the engine.
#[inline(never)]
fn engine_store(
    superblock: &Superblock,
    members: &[Option<Member>],
) -> Result<Store> {
    EngineStore::new(member_states(superblock, members)?, lock_slots(), zeroed_words)
}

/// `count` words of zeros.
fn zeroed_words(count: usize) -> Result<KVec<AtomicU64>> {
    let mut words = KVec::with_capacity(count, GFP_KERNEL)?;
    for _ in 0..count {
        words.push(AtomicU64::new(0), GFP_KERNEL)?;
    }
    Ok(words)
}

/// Builds the engine where it will live: in its own frame (not inlined), so the engine's
/// temporary never adds to the stack of `Array::start`, which builds the whole array.
fn engine_in_place<'a>(
    superblock: &'a Superblock,
    geometry: Geometry,
    members: &'a [Option<Member>],
    spares: &'a [SpareDevice],
    in_sync: bool,
) -> impl Init<Engine, Error> + 'a {
    #[inline(never)]
    fn write(
        slot: *mut Engine,
        superblock: &Superblock,
        geometry: Geometry,
        members: &[Option<Member>],
        spares: &[SpareDevice],
        in_sync: bool,
    ) -> Result {
        let store = engine_store(superblock, members)?;
        // Built straight into the slot: a temporary engine (over 2 KiB) would make this frame
        // pass the kernel's limit.
        // SAFETY: `slot` is valid for writes and aligned (the `Init` contract); a
        // `MaybeUninit<Engine>` has the engine's layout.
        let uninit = unsafe { &mut *slot.cast::<core::mem::MaybeUninit<Engine>>() };
        ArrayEngine::init(uninit, *superblock, geometry, store, in_sync).map_err(|_| EINVAL)?;
        // SAFETY: initialised just above.
        let engine = unsafe { &*slot };
        for spare in spares {
            if !engine.spares().insert(spare.slot, spare.uuid) {
                // SAFETY: initialised above and not handed out: dropped once, and the `Err`
                // leaves the slot as the `Init` contract wants it.
                unsafe { ptr::drop_in_place(slot) };
                return Err(EINVAL);
            }
        }
        Ok(())
    }
    // SAFETY: `write` initialises the slot completely on `Ok` and leaves it alone on `Err`.
    unsafe {
        pin_init::init_from_closure(move |slot| {
            write(slot, superblock, geometry, members, spares, in_sync)
        })
    }
}

/// One engine member state per role: a device's as it joined (in sync or recovering from its
/// offset), or missing; then unused ones up to [`MAX_MEMBERS`], for roles a mirror's grow adds
/// (`engine/raid_devices.rs`).
fn member_states(superblock: &Superblock, members: &[Option<Member>]) -> Result<KVVec<MemberState>> {
    let mut states = KVVec::with_capacity(MAX_MEMBERS as usize, GFP_KERNEL)?;
    for (role, member) in (0u32..).zip(members) {
        let state = match member {
            Some(member) => {
                MemberState::recovering(member.uuid, member.slot, member.recovery_offset)
            }
            None => MemberState::missing([0; UUID_LEN], superblock.missing_member_slot(role)),
        };
        states.push(state, GFP_KERNEL)?;
    }
    while states.len() < MAX_MEMBERS as usize {
        states.push(MemberState::missing([0; UUID_LEN], NO_SLOT), GFP_KERNEL)?;
    }
    Ok(states)
}

fn to_blk_status(status: Status) -> bindings::blk_status_t {
    match status {
        Status::Ok => blk_mq::status_ok(),
        Status::IoError => blk_mq::status_ioerr(),
        Status::NotSupported => blk_mq::status_notsupp(),
    }
}

fn from_blk_status(status: bindings::blk_status_t) -> Status {
    if status == blk_mq::status_ok() {
        Status::Ok
    } else if status == blk_mq::status_notsupp() {
        Status::NotSupported
    } else {
        Status::IoError
    }
}

impl Requests for ArrayIo {
    type Request = RqRef;
    type Segment = *mut bindings::bio;

    fn state(&self, rq: RqRef) -> &RequestState {
        &pdu(rq).state
    }

    fn carried(&self, _follower: RqRef, _adopter: RqRef) {
        self.carried.add(0, 1);
    }

    fn fua(&self, rq: RqRef) -> bool {
        // SAFETY: the engine only passes requests it was handed by `queue_rq` and that have
        // not ended.
        unsafe { blk_mq::is_fua(rq.0) }
    }

    fn segments(&self, rq: RqRef) -> impl Iterator<Item = (*mut bindings::bio, u64, u64)> {
        // SAFETY: the engine only passes requests it was handed by `queue_rq` and that have
        // not ended; their bio lists are stable while they are in the driver.
        unsafe { blk_mq::bios_of(rq.0) }
    }

    fn submit(&self, rq: RqRef, io: &MemberIo<*mut bindings::bio>) -> Result<(), SubmitError> {
        let member = self.files.get(io.info.member).ok_or(SubmitError)?;
        let ctx = PieceCtx {
            rq,
            io: self,
            piece: io.info,
        };
        let op = match io.info.op {
            Op::Read => CloneOp::Read,
            Op::Write => CloneOp::Write,
            Op::Discard => CloneOp::Discard,
            Op::Flush => CloneOp::Write,
        };
        let made = match io.source {
            // SAFETY: the member is open; `piece_end_io` releases the bio.
            Source::None => unsafe {
                self.clones.flush_bio(member.bdev(), Some(piece_end_io), ctx)
            },
            Source::Buffer { column, offset } => {
                let bytes = io.info.sectors.checked_mul(512).ok_or(SubmitError)?;
                let data = self
                    .with_buffer(rq, |b| b.at(column, (offset * 512) as usize, bytes as usize))
                    .flatten()
                    .ok_or(SubmitError)?;
                // SAFETY: the request's FUA flag; `rq` is live while the engine has it.
                let fua = io.fua || unsafe { blk_mq::is_fua(rq.0) };
                let op = if io.info.op == Op::Write {
                    CloneOp::Write
                } else {
                    CloneOp::Read
                };
                // SAFETY: a column of the request's stripe buffer (kmalloc memory), which the
                // engine neither frees nor touches until this piece completed; the member is
                // open; `piece_end_io` releases the bio.
                unsafe {
                    self.clones.buffer_bio(
                        data,
                        bytes as u32,
                        bio::Target {
                            bdev: member.bdev(),
                            sector: io.member_sector,
                            op,
                        },
                        fua,
                        Some(piece_end_io),
                        ctx,
                    )
                }
            }
            // SAFETY: `src` is a bio of the live request, which ends only after every clone
            // completed; the engine keeps `skip + sectors` within it; the member is open.
            Source::Segment(src, skip) => unsafe {
                self.clones.clone_bio(
                    src,
                    skip,
                    io.info.sectors,
                    bio::Target {
                        bdev: member.bdev(),
                        sector: io.member_sector,
                        op,
                    },
                    Some(piece_end_io),
                    ctx,
                )
            },
        };
        let bio = made.map_err(|_| SubmitError)?;
        // SAFETY: the bio is complete; its end_io releases it.
        unsafe { bio::submit(bio) };
        Ok(())
    }

    fn end_request(&self, rq: RqRef, status: Status) {
        // SAFETY: `rq` was given up by `start` and the engine ends each request once.
        unsafe { Request::<ArrayIo>::from_raw(rq.0) }.end(to_blk_status(status));
    }

    fn push(&self, list: WorkList, rq: RqRef) {
        match list {
            WorkList::Deferred => self.deferred.push(rq),
            WorkList::Parked => self.parked.push(rq),
            WorkList::StripeWait(slot) => match self.stripe_waits.get(slot as usize) {
                Some(list) => list.push(rq),
                // Never: the engine's slots are below `lock_slots()`, the lists' count.
                // Retried rather than lost.
                None => self.queue_stripe_work(rq),
            },
            WorkList::Adopted(slot) => match self.adopted.get(slot as usize) {
                Some(list) => list.push(rq),
                // Never (as above).
                None => self.queue_stripe_work(rq),
            },
            WorkList::BufferWait => self.buffer_wait.push(rq),
            WorkList::LogWait => self.log_wait.push(rq),
        }
    }

    fn take_all(&self, list: WorkList, f: impl FnMut(RqRef)) {
        match list {
            WorkList::Deferred => self.deferred.take_all(f),
            WorkList::Parked => self.parked.take_all(f),
            WorkList::StripeWait(slot) => {
                if let Some(list) = self.stripe_waits.get(slot as usize) {
                    list.take_all(f)
                }
            }
            WorkList::Adopted(slot) => {
                if let Some(list) = self.adopted.get(slot as usize) {
                    list.take_all(f)
                }
            }
            WorkList::BufferWait => self.buffer_wait.take_all(f),
            WorkList::LogWait => self.log_wait.take_all(f),
        }
    }

    fn take_oldest(&self, list: WorkList) -> Option<RqRef> {
        match list {
            WorkList::Deferred => self.deferred.take_oldest(),
            WorkList::Parked => self.parked.take_oldest(),
            WorkList::StripeWait(slot) => self.stripe_waits.get(slot as usize)?.take_oldest(),
            WorkList::Adopted(slot) => self.adopted.get(slot as usize)?.take_oldest(),
            WorkList::BufferWait => self.buffer_wait.take_oldest(),
            WorkList::LogWait => self.log_wait.take_oldest(),
        }
    }

    fn kick_worker(&self) {
        self.worker.kick();
    }

    fn kick_worker_after(&self, ms: u32) {
        self.worker.kick_after(ms);
    }

    fn any_request(&self, mut pred: impl FnMut(&RequestState) -> bool) -> bool {
        // SAFETY: every `ArrayIo` is the ops of an array's `Disk` (built in `Array::start`).
        let disk = unsafe { Disk::<ArrayIo>::of_ops(self) };
        disk.any_request(|pdu: &Pdu| pred(&pdu.state))
    }

    fn pause(&self) {
        // The worker, the only caller, may sleep.
        kernel::time::delay::fsleep(kernel::time::Delta::from_millis(1));
    }
}

impl Metadata for ArrayIo {
    fn flush_members(&self, targets: MemberSet) -> MemberSet {
        let devices = targets
            .iter()
            .filter_map(|m| self.files.get(m).map(|file| (m, file.bdev())));
        let failed = MemberSet::from_bits(bio::flush_devices(devices) as u32);
        // A target without a device was not flushed either.
        targets
            .iter()
            .filter(|&m| self.files.get(m).is_none())
            .fold(failed, MemberSet::with)
    }

    fn write_superblocks(&self, targets: MemberSet, copy: impl Fn(u32) -> Superblock) -> MemberSet {
        self.superblocks.write(&self.files, targets, copy)
    }

    fn bitmap(&self) -> Option<(Regions, &[RegionState])> {
        self.bitmap.as_ref().map(|b| (b.regions(), b.states()))
    }

    fn resize_bitmap(&self, regions: Regions) -> bool {
        self.bitmap.as_ref().is_some_and(|b| b.resize(regions))
    }

    fn write_bitmap_block(
        &self,
        targets: MemberSet,
        block: u64,
        preflush: bool,
        fill: &dyn Fn(&mut [u8; BLOCK_BYTES]),
    ) -> MemberSet {
        let Some(bitmap) = &self.bitmap else {
            return targets;
        };
        let sector = bitmap.block_sector(block);
        self.superblocks
            .write_block(&self.files, targets, sector, preflush, fill)
    }

    fn write_log_head(
        &self,
        targets: MemberSet,
        sector: u64,
        fill: &dyn Fn(&mut [u8; PPL_BLOCK_BYTES]),
    ) -> MemberSet {
        self.superblocks
            .write_block(&self.files, targets, sector, false, fill)
    }

    fn write_spare_superblock(&self, slot: u32, sb: &Superblock) -> bool {
        let spares = self.spares.lock();
        if let Some(spare) = spares.iter().find(|s| s.slot == slot) {
            return self.superblocks.write_one(spare.file.bdev(), sb);
        }
        drop(spares);
        // The replacement is a spare on disk, its device in the replacement's place.
        let replacing = self.engine.replacement().is_some_and(|r| r.slot == slot);
        let file = self.files.get(self.engine.replacement_index());
        match file {
            Some(file) if replacing => self.superblocks.write_one(file.bdev(), sb),
            _ => false,
        }
    }
}

impl Events for ArrayIo {
    fn takeover_wanted(&self) {
        (self.hooks.kick_takeover)(self);
    }

    fn reshape_ended(&self) {
        (self.hooks.reshape_ended)(self);
    }

    fn cpu(&self) -> u32 {
        crate::kernel_ext::cpu::current_cpu()
    }

    fn now_ns(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(0)
    }

    fn sleep_ms(&self, ms: u32) {
        // The worker, the only caller, may sleep.
        kernel::time::delay::fsleep(kernel::time::Delta::from_millis(i64::from(ms)));
    }

    fn helper_wrong(&self, helper: u64) {
        helper_device::caught_wrong(helper);
    }

    fn helper_catches(&self) -> u64 {
        helper_device::catches()
    }

    fn heal_started(&self, regions: u64) {
        pr_warn!(
            "graid: {}: a parity helper was caught lying: resyncing the {} regions whose parity it may have computed unchecked; no member may be failed until it ends\n",
            self.engine.superblock().array_name.as_str(),
            regions
        );
    }

    fn member_event(&self, member: u32, event: MemberEvent) {
        let name = self.engine.superblock().array_name;
        let name = name.as_str();
        match event {
            MemberEvent::Failed => {
                pr_err!("graid: {}: member {} failed, array degraded\n", name, member)
            }
            MemberEvent::KeptLastCopy => pr_err!(
                "graid: {}: member {} failed but holds the last copy of some data: kept, the array takes no more writes\n",
                name,
                member
            ),
            MemberEvent::SuperblockWriteFailed => {
                pr_err!("graid: {}: superblock write to member {} failed\n", name, member)
            }
            MemberEvent::ReadErrorRepaired => pr_warn!(
                "graid: {}: read error on member {} repaired from another copy\n",
                name,
                member
            ),
            MemberEvent::FailedOnRequest => {
                pr_warn!("graid: {}: member {} failed on request\n", name, member)
            }
            MemberEvent::Added => {
                pr_info!("graid: {}: device added as member {}, rebuilding\n", name, member)
            }
            MemberEvent::Rebuilt => pr_info!("graid: {}: member {} rebuilt, in sync\n", name, member),
            MemberEvent::RebuildStalled => pr_err!(
                "graid: {}: rebuild of member {} stopped: some data has no readable copy\n",
                name,
                member
            ),
            MemberEvent::ReplaceStarted => pr_info!(
                "graid: {}: replacing member {}: copying it to a spare\n",
                name,
                member
            ),
            MemberEvent::Replaced => pr_info!(
                "graid: {}: member {} replaced: the new device is in sync and in its place\n",
                name,
                member
            ),
            MemberEvent::ReplaceAbandoned => pr_warn!(
                "graid: {}: member {} failed while being replaced: its replacement is a spare again\n",
                name,
                member
            ),
            MemberEvent::ReplacementFailed => pr_err!(
                "graid: {}: the replacement of member {} failed: the replace stops, the member stays\n",
                name,
                member
            ),
            MemberEvent::FailureRecorded => (),
        }
        (self.hooks.note_event)(self, member, event);
    }

    fn scrub_ended(&self, mode: ScrubMode, stopped: bool) {
        let progress = self.engine.scrub_progress();
        pr_info!(
            "graid: {}: {} {}: {} mismatched sectors\n",
            self.engine.superblock().array_name.as_str(),
            scrub_name(mode),
            if stopped { "stopped before its end" } else { "finished" },
            progress.mismatches
        );
        (self.hooks.note_scrub_end)(self, mode, stopped);
    }
}

/// A scrub's name in the log and in uevents (md's `sync_action` words).
pub(crate) fn scrub_name(mode: ScrubMode) -> &'static str {
    match mode {
        ScrubMode::Check => "check",
        ScrubMode::Repair => "repair",
        ScrubMode::Resync => "resync",
    }
}

impl RebuildBuffer for ArrayIo {
    fn rebuild_io(
        &self,
        op: Op,
        member: u32,
        sector: u64,
        column: u32,
        offset: u64,
        sectors: u64,
    ) -> Result<(), RebuildIoError> {
        let file = self.files.get(member).ok_or(RebuildIoError)?;
        let (at, bytes) = (sectors_to_bytes(offset), sectors_to_bytes(sectors));
        let (at, bytes) = at.zip(bytes).ok_or(RebuildIoError)?;
        self.with_rebuild_buffer(|buffer| {
            let data = buffer.at(column, at, bytes).ok_or(RebuildIoError)?;
            // SAFETY: `data` is `bytes` bytes of the rebuild buffer's column (kmalloc memory),
            // held (the lock) until the synchronous transfer ends; the member is open.
            unsafe { transfer_virt(file.bdev(), sector, data, bytes, op == Op::Write) }
                .map_err(|_| RebuildIoError)
        })
        .unwrap_or(Err(RebuildIoError))
    }

    fn rebuild_batch(&self, op: Op, ios: &[RebuildIo]) -> u64 {
        let mut refused = 0u64;
        let failed = self.with_rebuild_buffer(|buffer| {
            let transfers = (0u32..).zip(ios).filter_map(|(index, io)| {
                let bytes = sectors_to_bytes(io.sectors);
                let data = bytes.and_then(|bytes| buffer.at(io.column, 0, bytes));
                match (self.files.get(io.member), data, bytes) {
                    (Some(file), Some(data), Some(bytes)) => Some(VirtTransfer {
                        index,
                        bdev: file.bdev(),
                        sector: io.sector,
                        data,
                        bytes,
                    }),
                    _ => {
                        refused |= 1u64.checked_shl(index).unwrap_or(0);
                        None
                    }
                }
            });
            // SAFETY: every `data` is its bytes of a rebuild buffer column (kmalloc memory),
            // held (the lock) until the batch ends, a column per transfer; the members are
            // open.
            unsafe { transfer_virt_batch(transfers, op == Op::Write) }
        });
        // No buffer (RAID 0): nothing sent.
        failed.map_or(u64::MAX, |failed| failed | refused)
    }

    fn rebuild_copy(&self, from: u32, to: u32, offset: u64, sectors: u64) {
        let (Some(at), Some(len)) = (sectors_to_bytes(offset), sectors_to_bytes(sectors)) else {
            return;
        };
        self.with_rebuild_buffer(|buffer| buffer.copy_column(from, to, at, len));
    }

    fn rebuild_accumulate(&self, from: u32, to: u32, coef: u8, offset: u64, sectors: u64) {
        let (Some(at), Some(len)) = (sectors_to_bytes(offset), sectors_to_bytes(sectors)) else {
            return;
        };
        self.with_rebuild_buffer(|buffer| buffer.accumulate(from, to, coef, at, len));
    }

    fn rebuild_differ(&self, a: u32, b: u32, offset: u64, sectors: u64) -> u64 {
        let (Some(at), Some(len)) = (sectors_to_bytes(offset), sectors_to_bytes(sectors)) else {
            return 0;
        };
        self.with_rebuild_buffer(|buffer| {
            let (Some(x), Some(y)) = (buffer.at(a, at, len), buffer.at(b, at, len)) else {
                return 0;
            };
            // SAFETY: `at` returned `len` bytes of each column, read-only here under the lock.
            let (x, y) = unsafe {
                (
                    core::slice::from_raw_parts(x.cast_const(), len),
                    core::slice::from_raw_parts(y.cast_const(), len),
                )
            };
            x.chunks(512).zip(y.chunks(512)).filter(|(s, t)| s != t).count() as u64
        })
        .unwrap_or(0)
    }

    /// To the helper when asked and the offload takes it (the worker waits), else here and
    /// now.
    fn rebuild_compute(&self, job: &ParityJob, offload: bool) -> Option<Computed> {
        self.with_rebuild_buffer(|buffer| {
            let sent = if offload {
                helper_device::offload_and_wait(buffer, job)
            } else {
                Err(helper_device::KernelJob { measure_bytes: None })
            };
            match sent {
                Ok(helper) => Some(Computed::Helper(helper)),
                Err(kernel) => self
                    .compute_timed(buffer, job, kernel.measure_bytes)
                    .then_some(Computed::Here),
            }
        })
        .flatten()
    }
}

impl helper_device::JobOwner for ArrayIo {
    fn with_stripe_buffer(&self, rq: RqRef, f: &mut dyn FnMut(&mut StripeBuffer)) -> bool {
        self.with_buffer(rq, f).is_some()
    }

    fn parity_by_helper(&self, rq: RqRef) {
        self.engine.parity_done(self, rq, true);
    }

    fn parity_unchecked(&self, rq: RqRef) {
        self.engine.parity_unchecked(self, rq);
    }

    fn parity_by_kernel(&self, rq: RqRef, job: &ParityJob) {
        self.compute_in_kernel(rq, job, None);
    }
}

impl StripeBuffers for ArrayIo {
    fn queue_stripe_work(&self, rq: RqRef) {
        let pdu = pdu(rq);
        pdu.io.store(ptr::from_ref(self).cast_mut(), Ordering::Release);
        pdu.rq.store(rq.0, Ordering::Release);
        self.stripe_queue.queue(&pdu.work);
    }

    fn alloc_buffer(&self, rq: RqRef, columns: Columns, sectors: u64) -> bool {
        let Some(bytes) = sectors.checked_mul(512).and_then(|b| usize::try_from(b).ok()) else {
            return false;
        };
        let stats = &self.buffer_stats;
        let log = self.engine.has_log();
        // Only memory at hand, no reclaim: the step runs NOIO (`stripe_work_fn`, the worker),
        // where reclaim can neither write back nor compact, and an order-3 column would retry
        // forever while the memory it waits for may be this array's dirty pages. No warning.
        let gfp = GFP_NOWAIT | __GFP_NOWARN;
        // An injected failure stands for memory being short: no kept buffer either.
        let short = injected_alloc_failure();
        // A wide slice's buffer is a bonus: never the reserve, which is sized for a narrow
        // slice.
        let wide = sectors > SLICE_SECTORS;
        if !short {
            // A kept buffer first, then a fresh one.
            if let Some(buffer) = self.buffers.take(columns, bytes, log, gfp) {
                stats.add(stripe_io::BUFFER_CACHED, 1);
                return self.hold_buffer(rq, buffer);
            }
            if let Ok(buffer) = StripeBuffer::new(columns, bytes, log, gfp) {
                stats.add(if wide { stripe_io::BUFFER_WIDE } else { stripe_io::BUFFER_FRESH }, 1);
                return self.hold_buffer(rq, buffer);
            }
        }
        if wide {
            return false;
        }
        // Then the reserve, then a wait for a buffer to be freed (`BufferWait`).
        let reserve = self.reserve.take().and_then(|mut reserve| {
            if reserve.fit(columns, bytes) {
                Some(reserve)
            } else {
                self.reserve.put(reserve);
                None
            }
        });
        match reserve {
            Some(buffer) => {
                stats.add(stripe_io::BUFFER_RESERVE, 1);
                self.hold_buffer(rq, buffer)
            }
            None => {
                stats.add(stripe_io::BUFFER_WAITS, 1);
                false
            }
        }
    }

    fn free_buffer(&self, rq: RqRef) {
        let raw = pdu(rq).buffer.swap(ptr::null_mut(), Ordering::AcqRel);
        if !raw.is_null() {
            // SAFETY: made by `KBox::into_raw` in `alloc_buffer`; the swap took ownership.
            self.release(unsafe { KBox::from_raw(raw) });
        }
    }

    fn copy_to_buffer(
        &self,
        rq: RqRef,
        segment: Self::Segment,
        offset: u64,
        column: u32,
        column_offset: u64,
        sectors: u64,
    ) {
        self.copy(rq, segment, offset, column, column_offset, sectors, true);
    }

    fn copy_from_buffer(
        &self,
        rq: RqRef,
        column: u32,
        column_offset: u64,
        segment: Self::Segment,
        offset: u64,
        sectors: u64,
    ) {
        self.copy(rq, segment, offset, column, column_offset, sectors, false);
    }

    fn copy_column(&self, rq: RqRef, from: u32, to: u32, offset: u64, sectors: u64) {
        let (at, len) = ((offset * 512) as usize, (sectors * 512) as usize);
        self.with_buffer(rq, |buffer| buffer.copy_column(from, to, at, len));
    }

    fn accumulate_column(&self, rq: RqRef, from: u32, to: u32, coef: u8, offset: u64, sectors: u64) {
        let (Some(at), Some(len)) = (sectors_to_bytes(offset), sectors_to_bytes(sectors)) else {
            return;
        };
        self.with_buffer(rq, |buffer| buffer.accumulate(from, to, coef, at, len));
    }

    fn column_crc(&self, rq: RqRef, column: u32, offset: u64, sectors: u64) -> u32 {
        let (Some(at), Some(len)) = (sectors_to_bytes(offset), sectors_to_bytes(sectors)) else {
            return 0;
        };
        self.with_buffer(rq, |buffer| buffer.crc(column, at, len)).unwrap_or(0)
    }

    fn set_log_header(&self, rq: RqRef, index: u32, fill: &dyn Fn(&mut [u8; PPL_BLOCK_BYTES])) {
        self.with_buffer(rq, |buffer| buffer.fill_header(index, fill));
    }

    fn submit_log(&self, rq: RqRef, io: &LogIo) -> Result<(), SubmitError> {
        let member = self.files.get(io.member).ok_or(SubmitError)?;
        let bytes = sectors_to_bytes(io.sectors).ok_or(SubmitError)?;
        let (header, payload) = self
            .with_buffer(rq, |buffer| {
                let payload = match bytes {
                    0 => Some(ptr::null_mut()),
                    _ => buffer.at(io.column, 0, bytes),
                };
                buffer.header(io.header).zip(payload)
            })
            .flatten()
            .ok_or(SubmitError)?;
        // An entry goes with its member's next batch; a barrier (a header for several
        // members at once) goes by itself.
        if let (Some(slot), true) = (pdu(rq).log.get(io.header as usize), bytes > 0) {
            let write = LogWrite {
                member: io.member,
                sector: io.sector,
                header,
                payload,
                bytes: u32::try_from(bytes).map_err(|_| SubmitError)?,
            };
            self.log_batch.queue(self, rq.0, slot, &write);
            return Ok(());
        }
        let ctx = PieceCtx {
            rq,
            io: self,
            piece: PieceInfo {
                op: Op::Write,
                member: io.member,
                sectors: io.sectors,
            },
        };
        let target = bio::Target {
            bdev: member.bdev(),
            sector: io.sector,
            op: CloneOp::Write,
        };
        // SAFETY: a header block and a column of the request's stripe buffer (kmalloc memory),
        // which the engine neither frees nor touches until this piece completed; the member is
        // open; `piece_end_io` releases the bio.
        let bio = unsafe {
            self.clones
                .log_bio(header, payload, bytes as u32, target, Some(piece_end_io), ctx)
        }
        .map_err(|_| SubmitError)?;
        // SAFETY: the bio is complete; its end_io releases it.
        unsafe { bio::submit(bio) };
        Ok(())
    }

    fn raid6_update(&self) -> bool {
        crate::kernel_ext::raid_math::can_xor_syndrome()
    }

    /// To the helper when the offload takes it (`helper_device.rs`), else here and now.
    fn compute_parity(&self, rq: RqRef, job: &ParityJob) {
        // Parity that may hold the only copy of some data is the kernel's: a lie there could
        // not be healed (`engine/suspect.rs`). Only generations may go to the helper at all.
        if job.op == ParityOp::Generate && self.engine.parity_must_be_checked() {
            self.compute_in_kernel(rq, job, None);
            return;
        }
        if let Err(kernel) = helper_device::offload(self, rq, job) {
            self.compute_in_kernel(rq, job, kernel.measure_bytes);
        }
    }
}

impl ArrayIo {
    /// Computes `job` of `rq` in the kernel and moves the request on; with `measure_bytes` (a
    /// job the helper could have taken, of that much data) the computation is timed for the
    /// offload policy.
    fn compute_in_kernel(&self, rq: RqRef, job: &ParityJob, measure_bytes: Option<u64>) {
        let ok = self
            .with_buffer(rq, |buffer| self.compute_timed(buffer, job, measure_bytes))
            .unwrap_or(false);
        self.engine.parity_done(self, rq, ok);
    }

    /// Computes `job` on `buffer`; with `measure_bytes` (a job the helper could have taken, of
    /// that much data) timed for the offload policy.
    fn compute_timed(&self, buffer: &mut StripeBuffer, job: &ParityJob, measure_bytes: Option<u64>) -> bool {
        let start = measure_bytes.map(|_| self.epoch.elapsed());
        let ok = stripe_io::compute(buffer, job);
        if let (Some(bytes), Some(start)) = (measure_bytes, start) {
            let ns = u64::try_from((self.epoch.elapsed() - start).as_nanos()).unwrap_or(0);
            helper_device::kernel_measured(bytes, ns);
        }
        ok
    }


    /// Makes `buffer` `rq`'s stripe buffer. True.
    fn hold_buffer(&self, rq: RqRef, buffer: KBox<StripeBuffer>) -> bool {
        let old = pdu(rq).buffer.swap(KBox::into_raw(buffer), Ordering::AcqRel);
        if !old.is_null() {
            // Never: the engine frees before it allocates again. Not leaked.
            // SAFETY: the request's own previous buffer, owned by nobody else.
            self.release(unsafe { KBox::from_raw(old) });
        }
        true
    }

    /// Keeps a stripe buffer for a later slice (or frees it), or hands the reserve back.
    fn release(&self, buffer: KBox<StripeBuffer>) {
        if buffer.reserve {
            self.reserve.put(buffer);
        } else {
            self.buffers.put(buffer);
        }
    }

    /// Copies between a request bio and a buffer column (`into_buffer`: from the bio).
    #[allow(clippy::too_many_arguments)]
    fn copy(
        &self,
        rq: RqRef,
        bio: *mut bindings::bio,
        offset: u64,
        column: u32,
        column_offset: u64,
        sectors: u64,
        into_buffer: bool,
    ) {
        let (skip, bytes) = ((offset * 512) as u32, (sectors * 512) as u32);
        let at = self
            .with_buffer(rq, |b| b.at(column, (column_offset * 512) as usize, bytes as usize))
            .flatten();
        let Some(at) = at else { return };
        // SAFETY: `bio` is a bio of the live request covering `offset + sectors` (the engine
        // derives both from the request's segments); `at` is valid for `bytes` bytes.
        unsafe { bio::copy_bio_data(bio, skip, at, bytes, into_buffer) };
    }
}

impl WorkHandler for ArrayIo {
    fn run(&self) {
        self.engine.work(self);
    }
}

/// Completion of a member bio; may run in interrupt context.
///
/// # Safety
///
/// Called by the block layer only, for a bio made by [`ArrayIo`]'s `CloneSet<PieceCtx>`.
unsafe extern "C" fn piece_end_io(bio: *mut bindings::bio) {
    // SAFETY: every bio with this end_io was made by an array's CloneSet<PieceCtx>.
    let (ctx, status) = unsafe { CloneSet::<PieceCtx>::finish(bio) };
    // SAFETY: the array outlives its requests, and the request is alive while this piece is
    // counted in its state.
    let io = unsafe { &*ctx.io };
    io.engine
        .piece_done(io, ctx.rq, ctx.piece, from_blk_status(status));
}

impl LogTarget for ArrayIo {
    fn log_device(&self, member: u32) -> Option<*mut bindings::block_device> {
        self.files.get(member).map(|m| m.bdev())
    }

    fn log_batcher(&self) -> &LogBatcher<Self> {
        &self.log_batch
    }

    fn log_id(&self) -> LogId {
        self.engine.log_id()
    }

    fn log_area(&self) -> Option<LogArea> {
        self.engine.log().area()
    }

    fn log_written(
        &self,
        rq: *mut bindings::request,
        member: u32,
        sectors: u64,
        status: bindings::blk_status_t,
    ) {
        let piece = PieceInfo {
            op: Op::Write,
            member,
            sectors,
        };
        self.engine
            .piece_done(self, RqRef(rq), piece, from_blk_status(status));
    }

    fn log_not_sent(&self, rq: *mut bindings::request) {
        // As a `submit_log` that failed: the pass ends with an error.
        let rq = RqRef(rq);
        if pdu(rq).state.put(Status::IoError).is_some() {
            self.queue_stripe_work(rq);
        }
    }

    fn kick_log_sender(&self) {
        self.stripe_queue.queue(&self.log_batch.sender);
    }
}

/// The log batcher's sender: sends what waited for a batch that completed.
///
/// # Safety
///
/// Called by the workqueue for the `sender` of an array's `log_batch`.
unsafe extern "C" fn log_send_fn(work: *mut bindings::work_struct) {
    // SAFETY: `work` is the sender of the `log_batch` field of an `ArrayIo` (only ever queued
    // by `kick_log_sender`), which flushes its stripe queue before it goes.
    let io = unsafe {
        &*kernel::container_of!(ptr::from_ref(RequestWork::from_raw(work)), ArrayIo, log_batch.sender)
    };
    noio_scope(|| io.log_batch.send_waiting(io));
}

impl DiskOps for ArrayIo {
    type RequestData = Pdu;

    fn init_request_data(data: &Pdu) {
        // SAFETY: the PDU stays where it is for the tag set's life and is not in use yet.
        unsafe { data.work.init(stripe_work_fn) };
    }

    fn queue_rq(&self, rq: Request<Self>) {
        // Not into the submitter's plug, which may be the one being flushed right now.
        plug::with_own_plug(|| self.start(rq));
    }

    fn queue_rqs(&self, rqs: &mut dyn Iterator<Item = Request<Self>>) {
        // One plug for the batch: the members see its I/O together.
        plug::with_own_plug(|| {
            for rq in rqs {
                self.start(rq);
            }
        });
    }
}
