// SPDX-License-Identifier: GPL-2.0

//! Partial parity log writes, batched per member (md's io_unit, done as group commit).
//!
//! The engine reserves each entry's place in a member's ring and hands its write over
//! (`StripeBuffers::submit_log`). Each member has at most one batch of log writes in flight: an
//! entry that comes meanwhile waits, and when the batch completes every waiting entry goes
//! out, those that lie back to back in one half of the ring as one FUA write (a run, as
//! `ppl::LogRun` decides, for graid-sim too). Such a run shares one header
//! block (a group, `ppl::start_group`) with its payloads back to back after it: half the
//! bytes of a run of 4 KiB entries, and the run's last blocks, reserved for headers of their
//! own, stay unwritten (the replay scans every block). Under load one FUA write carries many
//! entries; on an idle member an entry goes at once, with a header of its own.
//!
//! No lock: the waiting entries are a lock-free stack per member; `busy` says a batch is in
//! flight (set by whoever takes the waiting entries, cleared as its last bio completes), and
//! the one that pushes and the batch that ends each look at the other's change after their own
//! (SeqCst), so no entry is left waiting with nothing in flight.

use crate::engine::ppl::{
    add_to_group, start_group, LogArea, LogId, LogRun, BLOCK_BYTES, MAX_GROUP_ENTRIES,
};
use crate::kernel_ext::bio::{self, CloneOp, CloneSet, Target};
use crate::kernel_ext::work::RequestWork;
use crate::write_stats::{self, Counters};
use core::ptr;
use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, Ordering};
use kernel::{bindings, prelude::*, sync::LockClassKey};

/// The most entries in one write: as many as a group block holds. Each takes at most three
/// segments (header, payload, padding), and the completion keeps one line per entry on its
/// stack.
const MAX_BATCH: usize = MAX_GROUP_ENTRIES;

/// Bytes of an entry's header block (`ppl::BLOCK_BYTES`).
const BLOCK: u32 = 4096;

/// What the batcher needs from its array.
pub(crate) trait LogTarget: Sync + Sized {
    /// The open device of member `member`.
    fn log_device(&self, member: u32) -> Option<*mut bindings::block_device>;
    /// The batcher of this array.
    fn log_batcher(&self) -> &LogBatcher<Self>;
    /// Whose entries the array writes (a group block carries it as each entry does).
    fn log_id(&self) -> LogId;
    /// Where each member's log lies (which entries may share a write: [`LogRun`]).
    fn log_area(&self) -> Option<LogArea>;
    /// The log write of request `rq` to `member` (`sectors` of payload) ended with `status`.
    /// Any context.
    fn log_written(
        &self,
        rq: *mut bindings::request,
        member: u32,
        sectors: u64,
        status: bindings::blk_status_t,
    );
    /// The log write of `rq` could not be sent (process context).
    fn log_not_sent(&self, rq: *mut bindings::request);
    /// Makes [`LogBatcher::send_waiting`] run soon, in process context. Any context.
    fn kick_log_sender(&self);
}

/// One entry waiting or in flight. A request's driver data has one per log header of its
/// stripe buffer (`LOG_HEADERS`: the P and the Q member's entries), each used again only
/// once its write completed.
#[derive(Default)]
pub(crate) struct LogSlot {
    next: AtomicPtr<LogSlot>,
    rq: AtomicPtr<bindings::request>,
    header: AtomicPtr<u8>,
    payload: AtomicPtr<u8>,
    bytes: AtomicU32,
    sector: AtomicU64,
}

impl LogSlot {
    fn payload_sectors(&self) -> u64 {
        u64::from(self.bytes.load(Ordering::Relaxed)) / 512
    }

    fn sector(&self) -> u64 {
        self.sector.load(Ordering::Relaxed)
    }
}

/// One entry's write as the engine gave it.
pub(crate) struct LogWrite {
    pub(crate) member: u32,
    pub(crate) sector: u64,
    /// The 4 KiB header block and `bytes` of payload, in the request's stripe buffer.
    pub(crate) header: *mut u8,
    pub(crate) payload: *mut u8,
    pub(crate) bytes: u32,
}

/// A member's waiting entries and its batch in flight.
#[derive(Default)]
struct MemberLog {
    /// The waiting entries, newest first (linked through `LogSlot::next`).
    waiting: AtomicPtr<LogSlot>,
    /// A batch is in flight.
    busy: AtomicBool,
    /// Bios of the batch in flight, plus one while its sender still adds bios.
    bios: AtomicU32,
}

/// What rides in front of a batch bio.
pub(crate) struct BatchCtx<T> {
    target: *const T,
    member: u32,
    first: *const LogSlot,
    count: u32,
}

// SAFETY: the pointers are used only by the completion, while the requests whose entries the
// bio carries (and so their array) are alive.
unsafe impl<T> Send for BatchCtx<T> {}

/// An array's log writes (`/sys/kernel/debug/graid/log_writes`): entries, the writes that
/// carried them, and those of them that carried a group.
pub(crate) type LogWriteStats = Counters<3>;
const LOG_ENTRIES: usize = 0;
const LOG_WRITES: usize = 1;
const LOG_GROUPS: usize = 2;
static LOG_WRITES_GONE: [AtomicU64; 3] = write_stats::gone();

/// Writes every array's log write counters for debugfs.
pub(crate) fn write_log_stats(_: &(), f: &mut kernel::fmt::Formatter<'_>) -> kernel::fmt::Result {
    let names = ["entries", "writes", "groups"];
    write_stats::write_totals(f, names, &LOG_WRITES_GONE, |io| &io.log_batch.stats)
}

/// An array's log writes, batched per member.
#[pin_data]
pub(crate) struct LogBatcher<T: LogTarget> {
    members: KVec<MemberLog>,
    /// Sends what waits when a batch completed (queued by [`LogTarget::kick_log_sender`]).
    #[pin]
    pub(crate) sender: RequestWork,
    /// The batches' bios; `None` for an array without a log (no bio slab of its own).
    bios: Option<Pin<KBox<CloneSet<BatchCtx<T>>>>>,
    /// Zeros, to fill an entry's last block when its payload ends inside it.
    zeros: KVec<u8>,
    /// What this array's log writes carried (debugfs).
    pub(crate) stats: LogWriteStats,
}

impl<T: LogTarget> LogBatcher<T> {
    /// A batcher for `members` members whose sender runs `send`; idle unless `log`.
    pub(crate) fn new(
        members: u32,
        log: bool,
        send: unsafe extern "C" fn(*mut bindings::work_struct),
        key: Pin<&'static LockClassKey>,
    ) -> impl PinInit<Self, Error> {
        let mut list = KVec::new();
        let made = (0..members).try_for_each(|_| list.push(MemberLog::default(), GFP_KERNEL));
        let zeros = KVec::from_elem(0u8, if log { BLOCK as usize } else { 0 }, GFP_KERNEL);
        // One bio per member in flight mostly; more only where entries are not adjacent.
        let bios = log
            .then(|| KBox::pin_init(CloneSet::new(4), GFP_KERNEL))
            .transpose();
        try_pin_init!(Self {
            members: { made?; list },
            sender <- RequestWork::new_in_place(send, c"graid_log", key),
            bios: bios?,
            zeros: zeros?,
            stats: Counters::new(&LOG_WRITES_GONE),
        })
    }

    /// Sends `write` (of request `rq`, through its `slot`): now if the member has no batch in
    /// flight, else with the next one. Process context.
    pub(crate) fn queue(
        &self,
        target: &T,
        rq: *mut bindings::request,
        slot: &LogSlot,
        write: &LogWrite,
    ) {
        let Some(member) = self.members.get(write.member as usize) else {
            target.log_not_sent(rq);
            return;
        };
        slot.rq.store(rq, Ordering::Relaxed);
        slot.header.store(write.header, Ordering::Relaxed);
        slot.payload.store(write.payload, Ordering::Relaxed);
        slot.bytes.store(write.bytes, Ordering::Relaxed);
        slot.sector.store(write.sector, Ordering::Relaxed);
        let this = ptr::from_ref(slot).cast_mut();
        let mut head = member.waiting.load(Ordering::SeqCst);
        loop {
            slot.next.store(head, Ordering::Relaxed);
            match member.waiting.compare_exchange_weak(
                head,
                this,
                Ordering::SeqCst,
                Ordering::SeqCst,
            ) {
                Ok(_) => break,
                Err(now) => head = now,
            }
        }
        self.send(target, write.member);
    }

    /// Sends what waits on every member that has no batch in flight (the sender work item).
    pub(crate) fn send_waiting(&self, target: &T) {
        for member in 0..self.members.len() as u32 {
            self.send(target, member);
        }
    }

    /// Sends the entries waiting for `member` as one batch, unless one is in flight.
    fn send(&self, target: &T, index: u32) {
        let Some(member) = self.members.get(index as usize) else {
            return;
        };
        loop {
            if member.waiting.load(Ordering::SeqCst).is_null()
                || member
                    .busy
                    .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
                    .is_err()
            {
                return;
            }
            // One count for this sender, so the batch's bios cannot end it while it adds more.
            member.bios.store(1, Ordering::SeqCst);
            let mut next = oldest_first(member.waiting.swap(ptr::null_mut(), Ordering::SeqCst));
            while !next.is_null() {
                next = self.send_run(target, index, next);
            }
            if !bio_done(member) {
                return;
            }
            // Every bio completed already: what came meanwhile goes now.
        }
    }

    /// Sends the entries from `first` that form a run ([`LogRun`]: back to back in one half
    /// of the ring, at most [`MAX_BATCH`]) as one write, several as a group; returns the
    /// entry after them.
    fn send_run(&self, target: &T, index: u32, first: *mut LogSlot) -> *mut LogSlot {
        // SAFETY: taken off the waiting stack by this sender: the slots and their requests
        // stay until their writes complete.
        let slot = |p: *mut LogSlot| unsafe { &*p };
        let mut run = target
            .log_area()
            .map(|area| LogRun::start(&area, slot(first).sector(), slot(first).payload_sectors()));
        let (mut vecs, mut last) = (1u16, first);
        let after = loop {
            // Payload, padding (and the header, for an entry alone).
            vecs += 2;
            let next = slot(last).next.load(Ordering::Relaxed);
            let joins = !next.is_null()
                && run
                    .as_mut()
                    .is_some_and(|r| r.join(slot(next).sector(), slot(next).payload_sectors()));
            if !joins {
                break next;
            }
            last = next;
        };
        // At most MAX_GROUP_ENTRIES (= MAX_BATCH): lossless.
        let count = run.map_or(1, |r| r.len()) as u32;
        let made = target
            .log_device(index)
            .zip(self.bios.as_ref())
            .ok_or(ENODEV)
            .and_then(|(bdev, bios)| {
                let ctx = BatchCtx {
                    target: ptr::from_ref(target),
                    member: index,
                    first,
                    count,
                };
                let at = Target {
                    bdev,
                    sector: slot(first).sector(),
                    op: CloneOp::Write,
                };
                // SAFETY: the member is open; `batch_end_io` releases the bio; `vecs` is at most
                // 3 × MAX_BATCH.
                unsafe { bios.fua_write_bio(vecs, &at, Some(batch_end_io::<T>), ctx) }
            });
        let bio = match made {
            Ok(bio) => bio,
            Err(_) => {
                let mut s = first;
                for _ in 0..count {
                    // Read before the request may go on.
                    let next = slot(s).next.load(Ordering::Relaxed);
                    target.log_not_sent(slot(s).rq.load(Ordering::Relaxed));
                    s = next;
                }
                return after;
            }
        };
        if count > 1 {
            Self::group(target, first, count);
            self.stats.add(LOG_GROUPS, 1);
        }
        let mut s = first;
        for i in 0..count {
            let entry = slot(s);
            let bytes = entry.bytes.load(Ordering::Relaxed);
            // SAFETY: the bio is being built with room for these segments; the header and
            // payload are the request's stripe buffer (kmalloc memory) and the zeros this
            // batcher's, none written or freed before the bio completed.
            unsafe {
                // One header: the entry's, or the group's in the first entry's.
                if i == 0 {
                    bio::add_virt(bio, entry.header.load(Ordering::Relaxed), BLOCK);
                }
                if bytes > 0 {
                    bio::add_virt(bio, entry.payload.load(Ordering::Relaxed), bytes);
                }
                // The next payload starts at the next block.
                let tail = bytes % BLOCK;
                if tail != 0 && i + 1 < count {
                    bio::add_virt(bio, self.zeros.as_ptr().cast_mut(), BLOCK - tail);
                }
            }
            s = entry.next.load(Ordering::Relaxed);
        }
        self.stats.add(LOG_ENTRIES, u64::from(count));
        self.stats.add(LOG_WRITES, 1);
        self.members
            .get(index as usize)
            .map(|m| m.bios.fetch_add(1, Ordering::SeqCst));
        // SAFETY: the bio is complete; its end_io releases it.
        unsafe { bio::submit(bio) };
        after
    }
}

impl<T: LogTarget> LogBatcher<T> {
    /// Turns the header of `first` into a group block of the `count` entries from it, whose
    /// payloads then follow it back to back. Only entries with a payload are batched, each
    /// with a header block of its own in its request's stripe buffer, which nothing reads
    /// but this write.
    fn group(target: &T, first: *mut LogSlot, count: u32) {
        let id = target.log_id();
        // SAFETY: as in `send_run`: slots taken off the waiting stack by this sender.
        let slot = |p: *mut LogSlot| unsafe { &*p };
        let header = |p: *mut LogSlot| {
            slot(p)
                .header
                .load(Ordering::Relaxed)
                .cast::<[u8; BLOCK_BYTES]>()
        };
        // SAFETY: the first entry's header is a 4 KiB block of its request's stripe buffer,
        // which nothing but this write touches while the request waits for it (parked in
        // `Step::Log`): it becomes the group block here.
        let group = unsafe { &mut *header(first) };
        start_group(&id, group);
        let mut s = slot(first).next.load(Ordering::Relaxed);
        for _ in 1..count {
            // SAFETY: as above, another request's header block, parked the same way; only
            // read, for its record.
            let record = unsafe { &*header(s) };
            // `count` is at most MAX_GROUP_ENTRIES: every entry fits.
            add_to_group(group, record);
            s = slot(s).next.load(Ordering::Relaxed);
        }
    }
}

/// One bio of `member`'s batch (or its sender's count) is done; true if it was the last: then
/// the member is free for the next batch.
fn bio_done(member: &MemberLog) -> bool {
    if member.bios.fetch_sub(1, Ordering::SeqCst) != 1 {
        return false;
    }
    member.busy.store(false, Ordering::SeqCst);
    true
}

/// Reverses a stack taken whole (newest first) into oldest first: the order of the entries'
/// places in the ring, mostly.
fn oldest_first(mut newest: *mut LogSlot) -> *mut LogSlot {
    let mut oldest = ptr::null_mut();
    while !newest.is_null() {
        // SAFETY: a slot taken off the stack, owned by the caller.
        let slot = unsafe { &*newest };
        let next = slot.next.load(Ordering::Relaxed);
        slot.next.store(oldest, Ordering::Relaxed);
        oldest = newest;
        newest = next;
    }
    oldest
}

/// Completion of a batch bio; may run in interrupt context.
///
/// # Safety
///
/// Called by the block layer only, for a bio made by a [`LogBatcher<T>`].
unsafe extern "C" fn batch_end_io<T: LogTarget>(bio: *mut bindings::bio) {
    // SAFETY: every bio with this end_io was made by the batcher's CloneSet<BatchCtx<T>>.
    let (ctx, status) = unsafe { CloneSet::<BatchCtx<T>>::finish(bio) };
    // SAFETY: the array outlives the requests whose entries this bio carried, which end only
    // after `log_written` below.
    let target = unsafe { &*ctx.target };
    // Each entry's request and length, read before any of them goes on (a request that goes
    // on may send its slot again, or end).
    let mut done = [(ptr::null_mut(), 0u64); MAX_BATCH];
    let mut s = ctx.first;
    for line in done.iter_mut().take(ctx.count as usize) {
        // SAFETY: the bio's entries, in flight until the calls below.
        let slot = unsafe { &*s };
        *line = (slot.rq.load(Ordering::Relaxed), slot.payload_sectors());
        s = slot.next.load(Ordering::Relaxed);
    }
    let batcher = target.log_batcher();
    if let Some(member) = batcher.members.get(ctx.member as usize) {
        if bio_done(member) && !member.waiting.load(Ordering::SeqCst).is_null() {
            target.kick_log_sender();
        }
    }
    for &(rq, sectors) in done.iter().take(ctx.count as usize) {
        target.log_written(rq, ctx.member, sectors, status);
    }
}
