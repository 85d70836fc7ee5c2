// SPDX-License-Identifier: GPL-2.0

//! The RAID 5/6 stripe engine: writes, and reads that cannot go straight to a data member.
//!
//! # A request's life
//!
//! The queue limits keep every request inside one *run* of adjacent stripes
//! (`Geometry::run_stripes`, about 1 MiB of data). Reads of an optimal array go straight to
//! the data members (the RAID 0 path in `array.rs`); everything else runs here, step by step,
//! in process context (the platform's work items, [`StripeBuffers::queue_stripe_work`]), driven by
//! member I/O and parity completions:
//!
//! 1. **Lock** the request's stripes: one lock bit per slot of a table hashed by stripe
//!    number ([`lock_slots_for`]: sixteen per request the array can have in flight), taken in
//!    descending slot order ([`Slots::nth`]), so requests over a common stripe run one after
//!    the other and all others in parallel on as many CPUs as the work queue has (no
//!    array-wide lock anywhere). A request that finds a slot taken waits on that slot's own
//!    list, keeping the ones it holds: every request takes slots in the same order, so no two
//!    wait for each other.
//! 2. **Plan** a *slice*: a window of *rows* (the same member offsets on every member; as long
//!    as [`WIDE_SLICE_SECTORS`] of buffer allow when memory is at hand, else at most
//!    [`SLICE_SECTORS`], so stripe memory is bounded) and how to update it: a *full* write
//!    (every data column written: no reads), a *read-modify-write* (read the old data being
//!    replaced and the parity), or a *reconstruct-write* (read the data not being replaced),
//!    whichever reads fewer sectors (md's `handle_stripe_dirtying`; reconstruct-write only
//!    while the parity is not known to be consistent, as md does above its resync point).
//!    With a member lost the slice is *degraded*: every surviving column is read and the lost
//!    ones rebuilt first. Full, degraded and read slices run across stripe boundaries, so
//!    adjacent stripes are *batched*: one I/O per member and one parity job for all of them
//!    (a job over a run, [`ParityJob::stripes`]); a partial write stays in its stripe.
//! 3. **Buffer**: the platform gives the request a stripe buffer for the slice; when memory is
//!    short the request waits for another to free one (order: lock, then buffer, so waiting
//!    never holds what others need beyond their own stripes).
//! 4. **Read** what the plan needs into the buffer; **recover** lost columns; copy the new
//!    data in; **compute** P/Q ([`ParityJob`]); **write** the new data and parity from the
//!    buffer (never from the request's pages, which may change under buffered writeback while
//!    the parity is computed from the copy).
//! 5. **End**: the next slice, or unlock, wake the waiters, and end the request through
//!    `ArrayEngine::complete` (parked while a member failure it skipped is not yet durable).
//!    A step whose member I/O all completed before its sender let go (an interrupt on the
//!    sender's CPU) goes on in a fresh work item, never inline: a long request would otherwise
//!    run every later slice one level deeper into one kernel stack.
//!
//! A member I/O error on any step goes to the worker while the stripe stays locked, so no
//! other request computes parity from the stale column or writes the rows meanwhile:
//!
//! - a **read error** is repaired, as md does (`R5_ReadError`, `R5_ReWrite`): the slice is
//!   read again a block ([`RETRY_SECTORS`], md's stripe page) at a time; a member that fails
//!   a block is *bad* for it: lost to the slice, which is planned again degraded, its column
//!   rebuilt from the others (the read is served from it; a write overlays its new data), then
//!   written back whole and read again. The member counts a corrected read error; only one
//!   whose rewrite or re-read fails is failed. Where the parity cannot rebuild the block (a
//!   degraded array), the request fails and nothing else: no member is failed, the array is
//!   not broken (md's last-copy rule);
//! - a **write error** fails the member (or refuses when that would lose data: then the
//!   request fails); the slice goes on (the parity written covers the member's data).

use super::array::{ArrayEngine, ArrayState, Store};
use super::geometry::{Geometry, MAX_MEMBERS};
use super::layout::{Recovery, Role, StripeMap};
use super::log_write::{LogNeed, LoggedSlice};
use super::members::MemberSet;
use super::parity::{Columns, ParityJob, ParityOp};
use super::platform::{MemberEvent, MemberIo, Op, PieceInfo, Platform, Source, Status, WorkList};
use super::ppl::MAX_LOGGED_SECTORS;
use super::request::{Phase, RequestState};
use super::stripe_hold::Gathered;
use super::wait_list::{park, wake_all, waker_fence};
use core::num::{NonZeroU32, NonZeroU64};
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering};

/// The fewest lock slots an array has. Stripe `s` uses slot `s % slots`: the stripes of a
/// run (at most a few hundred) never share one, and a collision only makes two unrelated
/// stripes take turns.
pub const MIN_LOCK_SLOTS: u32 = 4096;
/// The most: 8 KiB of lock bits, 16 KiB of the log's live bits, and the platform's two wait
/// lists per slot.
pub const MAX_LOCK_SLOTS: u32 = 1 << 16;

/// The lock slots of an array that can have `requests` in flight (every hardware queue's
/// depth): sixteen per request, as a power of two in `MIN_LOCK_SLOTS..=MAX_LOCK_SLOTS`, so
/// that a write finds a slot of an unrelated one taken at most once in sixteen times (with
/// 128 random writes in flight over 4096 slots, one in 32 did; 256 slots of whole runs made
/// that two in five).
pub fn lock_slots_for(requests: u32) -> u32 {
    requests
        .saturating_mul(16)
        .checked_next_power_of_two()
        .unwrap_or(MAX_LOCK_SLOTS)
        .clamp(MIN_LOCK_SLOTS, MAX_LOCK_SLOTS)
}

/// Wake-ups owed to requests waiting for a stripe buffer (see `wake_buffer_waiter`).
#[derive(Debug, Default)]
pub(super) struct BufferWakes {
    /// Takes owed: one per freed buffer (or waiter that saw one freed), until made.
    credits: AtomicU32,
    /// A waker is taking from the list.
    waking: AtomicBool,
}

/// The lock slots of a request's consecutive stripes: `count` of them from `first`, wrapping
/// at the end of the table of `n` slots.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Slots {
    pub(super) first: u32,
    pub(super) count: u32,
    n: NonZeroU32,
}

impl Slots {
    /// The slots of `count` stripes from the one in slot `first` (at most `n`) of a table of
    /// `n` (0 is taken as 1).
    fn new(first: u32, count: u32, n: u32) -> Self {
        let n = NonZeroU32::new(n).unwrap_or(NonZeroU32::MIN);
        Self {
            first: first % n,
            count: count.min(n.get()),
            n,
        }
    }

    /// The slots of `count` stripes from stripe `stripe`, in a table of `n`.
    pub(super) fn of(stripe: u64, count: u32, n: u32) -> Self {
        let n = NonZeroU32::new(n).unwrap_or(NonZeroU32::MIN);
        // Below `n`: lossless.
        Self::new((stripe % NonZeroU64::from(n)) as u32, count, n.get())
    }

    /// The slot of stripe `t` of the request.
    fn of_stripe(&self, t: u64) -> u32 {
        // Below `n`: lossless.
        ((u64::from(self.first) + t) % NonZeroU64::from(self.n)) as u32
    }

    /// The slots of stripes `[t, u]` of the request.
    pub(super) fn stripes(&self, t: u64, u: u64) -> Self {
        let count = u.saturating_sub(t).saturating_add(1);
        Self::new(
            self.of_stripe(t),
            u32::try_from(count).unwrap_or(u32::MAX),
            self.n.get(),
        )
    }

    pub(super) fn count(&self) -> u32 {
        self.count
    }

    /// The `i`-th slot to take: the slots in descending order (those wrapped to the table's
    /// start last). One order for every request: a request waits only for a slot below all
    /// it holds, so requests never wait for each other in a circle. Descending, so a write
    /// holds its last stripe first, and the writes that continue it wait there, where it can
    /// take them in (`stripe_hold.rs`), not at its first.
    pub(super) fn nth(&self, i: u32) -> u32 {
        let i = self.count.saturating_sub(1).saturating_sub(i);
        let wrapped = (self.first + self.count).saturating_sub(self.n.get());
        if i < wrapped {
            i
        } else {
            self.first + (i - wrapped)
        }
    }

    /// The slot of the request's last stripe.
    pub(super) fn last(&self) -> u32 {
        self.of_stripe(u64::from(self.count.saturating_sub(1)))
    }
}

/// The longest column window one step handles when memory is short: bounds a request's
/// stripe buffer to `2 * members * SLICE_SECTORS` sectors (4 MiB with 32 members). The
/// platform's reserve buffer is this size.
pub const SLICE_SECTORS: u64 = 64;

/// The block a slice whose read failed is read again by (4 KiB, md's stripe page), so that
/// only the blocks that fail are rebuilt and rewritten (see the module comment).
pub const RETRY_SECTORS: u64 = 8;

/// Buffer a request asks for first, all columns together (1 MiB): a wider window when the
/// slice needs few columns, so a large write takes fewer steps (each a round trip to the
/// members). Refused without consequence (the request then takes a [`SLICE_SECTORS`] one).
pub const WIDE_SLICE_SECTORS: u64 = 2048;

/// The members a slice cannot read: `all`, of which `missing` are failed or not yet rebuilt
/// there (the rest read with errors and are rewritten: `bad`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Lost {
    all: MemberSet,
    missing: MemberSet,
}

/// A slice's plan: its end, how it is updated, and the buffer columns it needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct SlicePlan {
    end: u64,
    mode: Mode,
    columns: Columns,
}

/// The array's stripe locks: one bit per slot, in words its platform allocated
/// ([`super::array::Store`]).
pub(super) struct LockTable<'a> {
    words: &'a [AtomicU64],
}

impl<'a> LockTable<'a> {
    pub(super) fn new(words: &'a [AtomicU64]) -> Self {
        Self { words }
    }

    /// The word and bit of `slot`.
    fn bit(&self, slot: u32) -> Option<(&AtomicU64, u64)> {
        let word = self.words.get((slot / 64) as usize)?;
        Some((word, 1u64 << (slot % 64)))
    }

    fn try_lock(&self, slot: u32) -> bool {
        self.bit(slot)
            .is_some_and(|(word, bit)| word.fetch_or(bit, Ordering::SeqCst) & bit == 0)
    }

    pub(super) fn is_locked(&self, slot: u32) -> bool {
        self.bit(slot)
            .is_some_and(|(word, bit)| word.load(Ordering::SeqCst) & bit != 0)
    }

    fn unlock(&self, slot: u32) {
        if let Some((word, bit)) = self.bit(slot) {
            word.fetch_and(!bit, Ordering::SeqCst);
        }
    }
}

code_enum! {
    /// Where a request is in its stripe life.
    pub(super) enum Step {
        /// Waiting for the stripe lock.
        Lock,
        /// Holding the lock: plan the current slice (again, after a failure or a buffer wait).
        Plan,
        /// Reads of the slice are out.
        Read,
        /// Lost columns are being rebuilt.
        Recover,
        /// P/Q are being computed.
        Compute,
        /// Writes of the slice are out.
        Write,
        /// Every member is being flushed before the slice logs: its partial parity would be
        /// built on data that may not be durable yet (`durable.rs`).
        Flush,
        /// The slice's partial parity (or barrier) is being logged (`log_write.rs`).
        Log,
        /// The slice waits for the log to wrap (no ring space).
        LogWait,
        /// The bad members' rewritten rows are read back.
        Verify,
        /// Holding its locks, waiting for a write that continues its last stripe
        /// (`stripe_hold.rs`).
        Held,
    }
}

/// How a stripe pass ended.
enum PassEnd {
    Ok,
    /// A member I/O could not be sent: the request fails.
    Failed,
    /// Member errors: the worker took the request over.
    ToWorker,
}

code_enum! {
    /// How a slice is updated.
    pub enum Mode {
        /// A read through the buffer (a member is lost, or a direct read failed).
        Read,
        /// Every data column is written: parity from the new data, no reads.
        Full,
        /// Read the old data being replaced and the parity, update the parity in place.
        ReadModifyWrite,
        /// Read the data not being replaced, generate the parity.
        ReconstructWrite,
        /// A member is lost: read every survivor, rebuild, overlay, generate.
        Degraded,
    }
}

/// A request's stripe progress, kept in its [`RequestState`].
#[derive(Debug, Default)]
pub struct StripeState {
    step: AtomicU8,
    mode: AtomicU8,
    /// The current slice: first and end column offsets within the chunk.
    slice_start: AtomicU64,
    slice_end: AtomicU64,
    /// Members treated as lost for the current slice.
    lost: AtomicU32,
    /// Members that failed to read a block of the current slice: lost to it, and their
    /// columns rewritten (see the module comment).
    bad: AtomicU32,
    /// Slices start below this row are [`RETRY_SECTORS`] long: a read failed there.
    retry_end: AtomicU64,
    /// The request's lock slots (the first, how many) and how many of them it holds, taken in
    /// [`Slots::nth`] order; whether it holds a stripe buffer.
    slot: AtomicU32,
    slot_count: AtomicU32,
    held: AtomicU32,
    buffer: AtomicBool,
    /// It waited for a buffer (`WorkList::BufferWait`) and has not had one since: if it ends
    /// so, the turn it was woken for passes on.
    buffer_waited: AtomicBool,
    /// The slice is counted among the log's writes in flight: its epoch + 1 (0: not).
    log_held: AtomicU64,
    /// The ticket of the flush it sent (`Step::Flush`), and the members flushed.
    flush_ticket: AtomicU64,
    flushing: AtomicU32,
    flushing_all: AtomicBool,
    /// The members the current slice sent writes to (`durable.rs` marks them).
    wrote: AtomicU32,
    /// Held partial stripes (`stripe_hold.rs`): this request's token as an adopter (0: none
    /// yet), the adopter's token that writes this one's head (0: none), the end of what it
    /// writes with the followers it took in (0: its own end), when it first held (0: never),
    /// and whether it continues a stream (starts where a recent write ended).
    pub(super) token: AtomicU64,
    pub(super) adopted_by: AtomicU64,
    pub(super) cover_end: AtomicU64,
    pub(super) hold_since: AtomicU64,
    pub(super) stream: AtomicBool,
}

impl StripeState {
    pub const fn new() -> Self {
        Self {
            step: AtomicU8::new(0),
            mode: AtomicU8::new(0),
            slice_start: AtomicU64::new(0),
            slice_end: AtomicU64::new(0),
            lost: AtomicU32::new(0),
            bad: AtomicU32::new(0),
            retry_end: AtomicU64::new(0),
            slot: AtomicU32::new(0),
            slot_count: AtomicU32::new(0),
            held: AtomicU32::new(0),
            buffer: AtomicBool::new(false),
            buffer_waited: AtomicBool::new(false),
            log_held: AtomicU64::new(0),
            flush_ticket: AtomicU64::new(0),
            flushing: AtomicU32::new(0),
            flushing_all: AtomicBool::new(false),
            wrote: AtomicU32::new(0),
            token: AtomicU64::new(0),
            adopted_by: AtomicU64::new(0),
            cover_end: AtomicU64::new(0),
            hold_since: AtomicU64::new(0),
            stream: AtomicBool::new(false),
        }
    }

    pub(super) fn step(&self) -> Step {
        Step::from_code(self.step.load(Ordering::Acquire))
    }

    pub(super) fn set_step(&self, step: Step) {
        self.step.store(step.code(), Ordering::Release);
    }

    fn mode(&self) -> Mode {
        Mode::from_code(self.mode.load(Ordering::Relaxed))
    }

    fn slice(&self) -> (u64, u64) {
        (
            self.slice_start.load(Ordering::Relaxed),
            self.slice_end.load(Ordering::Relaxed),
        )
    }

    /// Records that the slice is counted among epoch `epoch`'s writes in flight.
    pub(super) fn hold_log(&self, epoch: u64) {
        self.log_held
            .store(epoch.saturating_add(1), Ordering::Relaxed);
    }

    /// Uncounts it: the epoch it was counted in, if it was.
    pub(super) fn drop_log(&self) -> Option<u64> {
        self.log_held.swap(0, Ordering::Relaxed).checked_sub(1)
    }

    fn lost(&self) -> MemberSet {
        MemberSet::from_bits(self.lost.load(Ordering::Relaxed))
    }

    fn bad(&self) -> MemberSet {
        MemberSet::from_bits(self.bad.load(Ordering::Relaxed))
    }

    /// A new request: nothing held, first slice not chosen yet.
    pub(crate) fn reset(&self) {
        self.set_step(Step::Lock);
        self.slice_start.store(u64::MAX, Ordering::Relaxed);
        self.slice_end.store(0, Ordering::Relaxed);
        self.bad.store(0, Ordering::Relaxed);
        self.retry_end.store(0, Ordering::Relaxed);
        self.held.store(0, Ordering::Relaxed);
        self.buffer.store(false, Ordering::Relaxed);
        self.buffer_waited.store(false, Ordering::Relaxed);
        self.log_held.store(0, Ordering::Relaxed);
        self.flush_ticket.store(0, Ordering::Relaxed);
        self.flushing.store(0, Ordering::Relaxed);
        self.flushing_all.store(false, Ordering::Relaxed);
        self.wrote.store(0, Ordering::Relaxed);
        self.token.store(0, Ordering::Relaxed);
        self.adopted_by.store(0, Ordering::Relaxed);
        self.cover_end.store(0, Ordering::Relaxed);
        self.hold_since.store(0, Ordering::Relaxed);
        self.stream.store(false, Ordering::Relaxed);
    }

    /// Where its next slice starts (`u64::MAX`: none planned yet).
    pub(super) fn slice_start(&self) -> u64 {
        self.slice_start.load(Ordering::Relaxed)
    }

    /// Its next slice starts at row `row` (a follower whose head an adopter wrote).
    pub(super) fn resume_at(&self, row: u64) {
        self.slice_start.store(row, Ordering::Relaxed);
    }
}

/// One request's view of its run of stripes: which columns it touches.
///
/// Positions in the run are *rows*: row `r` is chunk offset `r % chunk` of the run's stripe
/// `r / chunk`, and sits at member sector `member_base + r` on every member, so a range of
/// rows is one contiguous I/O per member across stripes.
#[derive(Clone, Copy, Debug)]
pub(super) struct Span {
    /// The roles in the first stripe the request touches.
    map: StripeMap,
    /// Stripes the request touches (at least one).
    stripes: u64,
    /// The lock slots of its stripes.
    slots: Slots,
    /// Array sector of the first stripe's first data sector.
    row_start: u64,
    chunk: u64,
    /// The array range it writes: its own, and past its end what the followers it took in
    /// bring (`stripe_hold.rs`; always inside its last stripe).
    start: u64,
    pub(super) end: u64,
    /// The end of the request's own range.
    pub(super) own_end: u64,
    /// First member sector of the first stripe, data offset included.
    member_base: u64,
}

impl Span {
    /// The span of a request of `sectors` at `start` that writes up to `cover_end` (0, or
    /// below its own end: its own range only).
    fn new(
        g: &Geometry,
        data_offset: u64,
        lock_slots: u32,
        start: u64,
        sectors: u64,
        cover_end: u64,
    ) -> Option<Self> {
        let own_end = start.checked_add(sectors)?;
        let end = own_end.max(cover_end);
        if sectors == 0 || end > g.array_sectors() {
            return None;
        }
        let first = g.stripe_of(start);
        let last = g.stripe_of(end - 1);
        let run = g.run_stripes();
        // The queue limits keep a request inside one run; refuse anything else (and a cover
        // past the request's own last stripe, which the engine never makes).
        if first / run != last / run || last != g.stripe_of(own_end - 1) {
            return None;
        }
        Some(Self {
            map: g.stripe_map(first)?,
            stripes: last - first + 1,
            // At most a run of stripes: lossless.
            slots: Slots::of(first, u32::try_from(last - first + 1).ok()?, lock_slots),
            row_start: first.checked_mul(g.stripe_data_sectors())?,
            chunk: u64::from(g.chunk_sectors()),
            start,
            end,
            own_end,
            member_base: data_offset.checked_add(g.stripe_member_sector(first))?,
        })
    }

    /// The slot of its last stripe, where the writes that continue it wait.
    pub(super) fn last_slot(&self) -> u32 {
        self.slots.last()
    }

    /// The array sector after its last stripe.
    pub(super) fn last_stripe_end(&self) -> u64 {
        let data = u64::from(self.map.data());
        self.row_start
            .saturating_add(self.stripes.saturating_mul(data).saturating_mul(self.chunk))
    }

    /// The lowest row that array sectors `[from, to)` of its last stripe lie in: `from`'s,
    /// or the stripe's first row once they reach the next chunk.
    pub(super) fn lowest_row(&self, from: u64, to: u64) -> u64 {
        let chunk = self.chunk.max(1);
        let last = self.stripes.saturating_sub(1);
        let offset = from.saturating_sub(self.row_start) % chunk;
        if to <= from.saturating_sub(offset).saturating_add(chunk) {
            last.saturating_mul(chunk).saturating_add(offset)
        } else {
            last.saturating_mul(chunk)
        }
    }

    fn members(&self) -> u32 {
        self.map.members()
    }

    /// The roles in stripe `t` of the request (0 = the first).
    fn map_of(&self, t: u64) -> StripeMap {
        self.map.advanced(t)
    }

    /// The stripe row `row` lies in.
    fn stripe_at(&self, row: u64) -> u64 {
        row / self.chunk.max(1)
    }

    /// The first row after stripe `t`.
    fn stripe_end(&self, t: u64) -> u64 {
        t.saturating_add(1).saturating_mul(self.chunk)
    }

    /// The stripes that rows `[a, b)` cross: each one's index, roles, and rows within `[a, b)`.
    fn stripes_in(&self, a: u64, b: u64) -> StripesIn {
        StripesIn {
            span: *self,
            next: self.stripe_at(a),
            a,
            b,
        }
    }

    /// The rows data index `index` of stripe `t` has inside the request.
    fn written(&self, t: u64, index: u32) -> Option<(u64, u64)> {
        let data = u64::from(self.map.data());
        let chunks = t.checked_mul(data)?.checked_add(u64::from(index))?;
        let col_start = self
            .row_start
            .checked_add(chunks.checked_mul(self.chunk)?)?;
        let col_end = col_start.checked_add(self.chunk)?;
        let from = self.start.max(col_start);
        let to = self.end.min(col_end);
        let row = t.checked_mul(self.chunk)?;
        (from < to).then(|| (row + (from - col_start), row + (to - col_start)))
    }

    /// `written` clipped to rows `[a, b)`.
    fn written_in(&self, t: u64, index: u32, a: u64, b: u64) -> Option<(u64, u64)> {
        let (from, to) = self.written(t, index)?;
        let (from, to) = (from.max(a), to.min(b));
        (from < to).then_some((from, to))
    }

    /// The rows of stripe `t` every data column of which the request writes (maybe empty).
    fn all_written(&self, t: u64) -> (u64, u64) {
        (0..self.map.data()).fold((0, u64::MAX), |(lo, hi), i| {
            self.written(t, i)
                .map_or((0, 0), |(a, b)| (lo.max(a), hi.min(b)))
        })
    }

    /// The end of the rows from `a` on that the request writes in every data column (`a` if
    /// there are none at `a`): such rows need no reads, across stripes.
    fn full_until(&self, a: u64) -> u64 {
        let mut row = a;
        while self.stripe_at(row) < self.stripes {
            let t = self.stripe_at(row);
            let (lo, hi) = self.all_written(t);
            if !(lo <= row && row < hi) {
                break;
            }
            row = hi;
            if hi < self.stripe_end(t) {
                break;
            }
        }
        row
    }

    /// The smallest row window covering everything the request touches: from the first
    /// stripe's first touched row to the last stripe's last (the stripes between are whole).
    fn hull(&self) -> (u64, u64) {
        let last = self.stripes.saturating_sub(1);
        let data = self.map.data();
        let lo = (0..data)
            .filter_map(|i| self.written(0, i))
            .fold(u64::MAX, |lo, (a, _)| lo.min(a));
        let hi = (0..data)
            .filter_map(|i| self.written(last, i))
            .fold(0, |hi, (_, b)| hi.max(b));
        (lo, hi)
    }

    /// Array sector of row `row` of data index `index` in stripe `t`.
    fn array_sector(&self, t: u64, index: u32, row: u64) -> u64 {
        let data = u64::from(self.map.data());
        let chunks = t.saturating_mul(data).saturating_add(u64::from(index));
        self.row_start
            .saturating_add(chunks.saturating_mul(self.chunk))
            .saturating_add(row.saturating_sub(t.saturating_mul(self.chunk)))
    }

    /// A parity job over rows `[a, b)`.
    fn job(&self, op: ParityOp, a: u64, b: u64) -> ParityJob {
        let t = self.stripe_at(a);
        ParityJob {
            op,
            map: self.map_of(t),
            head: a - t.saturating_mul(self.chunk),
            chunk: self.chunk,
            sectors: b - a,
        }
    }
}

/// The iterator of [`Span::stripes_in`] (a named type: closures here made symbol names too
/// long for objtool).
struct StripesIn {
    span: Span,
    next: u64,
    a: u64,
    b: u64,
}

impl Iterator for StripesIn {
    type Item = (u64, StripeMap, u64, u64);

    fn next(&mut self) -> Option<Self::Item> {
        let t = self.next;
        let from = t.saturating_mul(self.span.chunk).max(self.a);
        if from >= self.b {
            return None;
        }
        self.next = t.saturating_add(1);
        let to = self.span.stripe_end(t).min(self.b);
        Some((t, self.span.map_of(t), from, to))
    }
}

/// Merges one member's consecutive ranges of one buffer column into one I/O.
#[derive(Default)]
struct Coalesce {
    pending: Option<(u32, u64, u64)>,
}

impl Coalesce {
    /// Adds rows `[from, to)` of `column`; returns a range to send now if it does not extend
    /// the pending one.
    fn add(&mut self, column: u32, from: u64, to: u64) -> Option<(u32, u64, u64)> {
        match self.pending {
            Some((c, f, t)) if c == column && t == from => {
                self.pending = Some((c, f, to));
                None
            }
            pending => {
                self.pending = Some((column, from, to));
                pending
            }
        }
    }
}

impl<M: Store> ArrayEngine<M> {
    /// The rows request `state` covers: its own, and its followers' (`stripe_hold.rs`).
    pub(super) fn span_of(&self, state: &RequestState) -> Option<Span> {
        let (g, data_offset) = self.map_of(state);
        Span::new(
            &g,
            data_offset,
            self.lock_slots(),
            state.start(),
            state.sectors(),
            state.stripe().cover_end.load(Ordering::Relaxed),
        )
    }

    /// Starts a RAID 5/6 request that does not go straight to the members: from the
    /// submitter's context, queues it for [`Self::stripe_work`].
    pub(super) fn submit_stripe<P: Platform>(&self, p: &P, rq: P::Request) {
        let state = p.state(rq);
        state.stripe().reset();
        self.stripe_entered(state);
        state.set_idle(Phase::Stripe);
        p.queue_stripe_work(rq);
    }

    /// The worker's part for a direct RAID 5/6 read that returned member errors: it goes again
    /// through the stripe engine, which locks its stripes, finds the blocks that fail, serves them
    /// from the parity and rewrites them (see the module comment).
    pub(super) fn direct_read_errors<P: Platform>(&self, p: &P, rq: P::Request) {
        // Its range moved in a reshape meanwhile: routed again and read anew.
        if self.routed_stale(p.state(rq)) {
            self.run_pass(p, rq, Phase::Normal);
            return;
        }
        self.submit_stripe(p, rq);
    }

    /// True if request `state`'s read can go straight to the data members.
    pub(super) fn direct_read_ok(&self, state: &RequestState) -> bool {
        let (start, sectors) = (state.start(), state.sectors());
        match self.map_of(state).0.map_read(start, sectors, 0) {
            Ok(mut pieces) => pieces.all(|piece| self.usable(piece.member, MemberSet::EMPTY)),
            Err(_) => false,
        }
    }

    /// The next step of RAID 5/6 request `rq`. Process context, once at a time per request
    /// (the platform's work item).
    pub fn stripe_work<P: Platform>(&self, p: &P, rq: P::Request) {
        // Writes held for their followers whose time is up go on (`stripe_hold.rs`).
        let _ = self.wake_due_holds(p, false);
        let state = p.state(rq);
        let stripe = state.stripe();
        let Some(span) = self.span_of(state) else {
            self.stripe_end(p, rq, Status::IoError);
            return;
        };
        match stripe.step() {
            Step::Lock => {
                if !self.stripe_lock(p, rq, &span) {
                    return;
                }
                stripe.set_step(Step::Plan);
                self.plan(p, rq, &span);
            }
            Step::Plan => self.plan(p, rq, &span),
            Step::Read => match self.pass_result(p, rq, state) {
                PassEnd::Ok => self.after_read(p, rq, &span),
                PassEnd::Failed => self.stripe_end(p, rq, Status::IoError),
                PassEnd::ToWorker => {}
            },
            Step::Write => match self.pass_result(p, rq, state) {
                PassEnd::Ok => self.after_write(p, rq, &span),
                PassEnd::Failed => self.stripe_end(p, rq, Status::IoError),
                PassEnd::ToWorker => {}
            },
            Step::Verify => match self.pass_result(p, rq, state) {
                PassEnd::Ok => self.repaired(p, rq, &span),
                PassEnd::Failed => self.stripe_end(p, rq, Status::IoError),
                PassEnd::ToWorker => {}
            },
            Step::Flush => match self.pass_result(p, rq, state) {
                PassEnd::Ok => {
                    self.flush_done(stripe);
                    self.after_compute(p, rq, &span);
                }
                PassEnd::Failed => self.stripe_end(p, rq, Status::IoError),
                PassEnd::ToWorker => {}
            },
            Step::Log => match self.pass_result(p, rq, state) {
                PassEnd::Ok => self.send_writes(p, rq, &span),
                PassEnd::Failed => self.stripe_end(p, rq, Status::IoError),
                PassEnd::ToWorker => {}
            },
            Step::LogWait => self.after_compute(p, rq, &span),
            // Parity completions arrive through `parity_done`; a held request is woken
            // with its step set back to Plan.
            Step::Recover | Step::Compute | Step::Held => {}
        }
    }

    /// What a pass that ended means. With member errors it hands the request to the worker,
    /// which may end it at once: the caller must not touch it again then.
    fn pass_result<P: Platform>(&self, p: &P, rq: P::Request, state: &RequestState) -> PassEnd {
        if state.status() != Status::Ok {
            return PassEnd::Failed;
        }
        if state.errors().is_empty() {
            return PassEnd::Ok;
        }
        p.push(WorkList::Deferred, rq);
        p.kick_worker();
        PassEnd::ToWorker
    }

    /// The worker's part: a stripe pass ended with member errors (the stripe stays locked
    /// meanwhile). Read errors are repaired (`slice_read_errors`); members that failed a write,
    /// rewrite or read back are failed, and the slice goes on (the parity written covers a
    /// failed member's data); a log write's failure plans the slice again without the member.
    pub(super) fn stripe_errors<P: Platform>(&self, p: &P, rq: P::Request) {
        let state = p.state(rq);
        let Some(span) = self.span_of(state) else {
            self.stripe_end(p, rq, Status::IoError);
            return;
        };
        let stripe = state.stripe();
        let errors = state.errors();
        if stripe.step() == Step::Read {
            self.slice_read_errors(p, rq, &span, errors);
            return;
        }
        let mut kept = false;
        for member in errors.iter() {
            kept |= !self.try_fail(p, member, MemberEvent::Failed);
        }
        // A failed member's rewrite is not read back.
        stripe.bad.fetch_and(!errors.bits(), Ordering::Relaxed);
        match stripe.step() {
            // A read's data went to the request already: only its repair failed.
            Step::Write | Step::Verify if kept && stripe.mode() != Mode::Read => {
                // Beyond redundancy: the data of this slice cannot be made consistent.
                self.stripe_end(p, rq, Status::IoError);
            }
            Step::Write => self.after_write(p, rq, &span),
            Step::Verify => self.repaired(p, rq, &span),
            _ if kept => self.stripe_end(p, rq, Status::IoError),
            _ => {
                // A log write failed: the slice is planned again without that member.
                self.plan_again(p, rq);
            }
        }
    }

    /// Read errors `errors` in the current slice: read it again a block at a time; in a block,
    /// the members that fail are bad: the slice is planned again with them lost (rebuilt,
    /// then rewritten). Where the parity cannot rebuild them, the request fails and nothing
    /// else (md's last-copy rule: the array goes on).
    fn slice_read_errors<P: Platform>(
        &self,
        p: &P,
        rq: P::Request,
        span: &Span,
        errors: MemberSet,
    ) {
        let stripe = p.state(rq).stripe();
        let (a, b) = stripe.slice();
        if b.saturating_sub(a) > RETRY_SECTORS && a >= stripe.retry_end.load(Ordering::Relaxed) {
            stripe.retry_end.store(b, Ordering::Relaxed);
            self.plan_again(p, rq);
            return;
        }
        let bad = stripe.bad().union(errors);
        let lost = self.unusable(span).union(bad);
        if span
            .stripes_in(a, b)
            .any(|(_, map, _, _)| map.recovery(lost) == Recovery::Lost)
        {
            self.stripe_end(p, rq, Status::IoError);
            return;
        }
        stripe.bad.store(bad.bits(), Ordering::Relaxed);
        self.plan_again(p, rq);
    }

    /// Plans the current slice again (after an error), from a fresh buffer.
    fn plan_again<P: Platform>(&self, p: &P, rq: P::Request) {
        self.release_log(p, rq);
        self.drop_buffer(p, rq);
        p.state(rq).stripe().set_step(Step::Plan);
        p.queue_stripe_work(rq);
    }

    /// The members not in use now (failed, or being rebuilt).
    fn unusable(&self, span: &Span) -> MemberSet {
        (0..span.members())
            .filter(|&m| !self.usable(m, MemberSet::EMPTY))
            .fold(MemberSet::EMPTY, MemberSet::with)
    }

    /// Takes the locks of the request's stripes, or queues `rq` behind the first one another
    /// holds (keeping those it took). True once it holds them all.
    fn stripe_lock<P: Platform>(&self, p: &P, rq: P::Request, span: &Span) -> bool {
        let locks = self.locks();
        let stripe = p.state(rq).stripe();
        let slots = span.slots;
        stripe.slot.store(slots.first, Ordering::Relaxed);
        stripe.slot_count.store(slots.count(), Ordering::Relaxed);
        loop {
            let i = stripe.held.load(Ordering::Relaxed);
            if i >= slots.count() {
                return true;
            }
            let slot = slots.nth(i);
            if locks.try_lock(slot) {
                stripe.held.store(i + 1, Ordering::Relaxed);
                continue;
            }
            let start = p.state(rq).start();
            let list = WorkList::StripeWait(slot);
            // The holder may unlock and drain the list before the push (`wait_list.rs`).
            let waiting = park(p, list, rq, || locks.is_locked(slot), || wake_all(p, list));
            if waiting {
                // The holder may be waiting for this very write (`stripe_hold.rs`).
                self.wake_hold_for(p, slot, start);
            }
            return false;
        }
    }

    /// Plans the current (or first) slice, gets the buffer and sends the reads.
    fn plan<P: Platform>(&self, p: &P, rq: P::Request, span: &Span) {
        let state = p.state(rq);
        let stripe = state.stripe();
        let op = state.op();
        if self.state() == ArrayState::Failed
            || (op.is_write() && self.broken.load(Ordering::SeqCst))
            || !matches!(op, Op::Read | Op::Write)
        {
            self.stripe_end(p, rq, Status::IoError);
            return;
        }
        let (lo, hi) = span.hull();
        let (mut a, _) = stripe.slice();
        if a == u64::MAX {
            a = lo;
        }
        if a >= hi {
            self.stripe_end(p, rq, Status::IoError);
            return;
        }
        let lost = self.unusable(span).union(stripe.bad());
        if span.map.recovery(lost) == Recovery::Lost {
            self.stripe_end(p, rq, Status::IoError);
            return;
        }
        // A block at a time where a read failed (see the module comment).
        let retry = a < stripe.retry_end.load(Ordering::Relaxed);
        // A write that leaves its last stripe partial takes in the writes that continue it,
        // or waits for them (`stripe_hold.rs`).
        let grown;
        let span = if op == Op::Write && !retry && stripe.bad().is_empty() {
            match self.gather(p, rq, span, a, lost) {
                Gathered::Held => return,
                Gathered::Same => span,
                Gathered::Grown => {
                    let Some(s) = self.span_of(state) else {
                        self.stripe_end(p, rq, Status::IoError);
                        return;
                    };
                    grown = s;
                    &grown
                }
            }
        } else {
            span
        };
        let (_, hi) = span.hull();
        let limit = if retry { RETRY_SECTORS } else { SLICE_SECTORS };
        // RAID 6 writes by read-modify-write only where the platform can update parity.
        let rmw = span.map.parity() == 1 || p.raid6_update();
        let lost = Lost {
            all: lost,
            missing: lost.minus(stripe.bad()),
        };
        let narrow = self.slice_plan(span, op, lost, a, limit, rmw);
        // As wide as WIDE_SLICE_SECTORS of buffer allow with the columns this plan needs, in
        // whole narrow slices.
        let wide_len = (WIDE_SLICE_SECTORS / u64::from(narrow.columns.count().max(1)))
            / SLICE_SECTORS
            * SLICE_SECTORS;
        let wide = (!retry && wide_len > SLICE_SECTORS && narrow.end < hi)
            .then(|| self.slice_plan(span, op, lost, a, wide_len, rmw))
            .filter(|w| {
                w.end > narrow.end
                    && u64::from(w.columns.count()).saturating_mul(w.end - a) <= WIDE_SLICE_SECTORS
            });
        let mut plan = narrow;
        if !stripe.buffer.load(Ordering::Relaxed) {
            let freed = self.buffers_freed.load(Ordering::SeqCst);
            let got = match wide {
                Some(w) if p.alloc_buffer(rq, w.columns, w.end - a) => {
                    plan = w;
                    true
                }
                _ => p.alloc_buffer(rq, narrow.columns, narrow.end - a),
            };
            if !got {
                stripe.buffer_waited.store(true, Ordering::Relaxed);
                // A buffer may be freed before the push (`wait_list.rs`): its waker's turn
                // then found nobody.
                park(
                    p,
                    WorkList::BufferWait,
                    rq,
                    || self.buffers_freed.load(Ordering::SeqCst) == freed,
                    || self.wake_buffer_waiter(p),
                );
                return;
            }
            stripe.buffer.store(true, Ordering::Relaxed);
            stripe.buffer_waited.store(false, Ordering::Relaxed);
        }
        stripe.slice_start.store(a, Ordering::Relaxed);
        stripe.slice_end.store(plan.end, Ordering::Relaxed);
        stripe.lost.store(lost.all.bits(), Ordering::Relaxed);
        stripe.mode.store(plan.mode.code(), Ordering::Relaxed);
        self.send_reads(p, rq, span, plan.mode, lost.all);
    }

    /// The plan for a slice from row `a`, at most `limit` rows long, with the members in
    /// `lost` lost. Reads, degraded writes and rows written in every data column (full) may
    /// run across stripes; a partial write stays in its stripe, and stops where full rows
    /// begin. `rmw`: read-modify-write may be chosen.
    fn slice_plan(
        &self,
        span: &Span,
        op: Op,
        lost: Lost,
        a: u64,
        limit: u64,
        rmw: bool,
    ) -> SlicePlan {
        let (_, hi) = span.hull();
        let until = |end: u64| a.saturating_add(limit).min(hi).min(end);
        let all = Columns::members(MemberSet::first(span.members()));
        let logged = self.has_log();
        // A partial write slice stays in its stripe and stops where rows written in full begin;
        // one that logs its partial parity also stays within MAX_LOGGED_SECTORS rows.
        let cap = if logged {
            a.saturating_add(MAX_LOGGED_SECTORS)
        } else {
            u64::MAX
        };
        let partial_end = |t: u64| {
            let (f, e) = span.all_written(t);
            let end = until(span.stripe_end(t)).min(cap);
            if a < f && f < e {
                end.min(f)
            } else {
                end
            }
        };
        let (mode, end) = if op == Op::Read {
            (Mode::Read, until(hi))
        } else if !lost.all.is_empty() && logged {
            // Full rows run across stripes only while no data column of theirs is missing: a
            // missing column's new data is then logged as partial parity (`after_compute`).
            let full = Self::keeps_data_until(span, a, span.full_until(a), lost.missing);
            if full > a {
                (Mode::Degraded, until(full))
            } else {
                (Mode::Degraded, partial_end(span.stripe_at(a)))
            }
        } else if !lost.all.is_empty() {
            (Mode::Degraded, until(hi))
        } else {
            let full = span.full_until(a);
            if full > a {
                (Mode::Full, until(full))
            } else {
                let t = span.stripe_at(a);
                let end = partial_end(t);
                (self.write_mode(span, t, a, end, rmw), end)
            }
        };
        let columns = match mode {
            Mode::ReadModifyWrite => {
                let t = span.stripe_at(a);
                let changed = self.changed(span, t, a, end);
                Columns::members(changed.union(span.map_of(t).parity_set()))
                    .union(Columns::new_data(changed, span.members()))
            }
            _ => all,
        };
        // A partial slice that logs builds its partial parity in the parity members'
        // new-data columns.
        let columns = if logged && op == Op::Write && mode != Mode::Full {
            let parity = span.map_of(span.stripe_at(a)).parity_set();
            columns.union(Columns::new_data(parity, span.members()))
        } else {
            columns
        };
        SlicePlan { end, mode, columns }
    }

    /// Data members the request writes in rows `[a, b)` of stripe `t`.
    fn changed(&self, span: &Span, t: u64, a: u64, b: u64) -> MemberSet {
        let map = span.map_of(t);
        (0..map.data())
            .filter(|&i| span.written_in(t, i, a, b).is_some())
            .fold(MemberSet::EMPTY, |set, i| set.with(map.data_member(i)))
    }

    /// Read-modify-write or reconstruct-write for rows `[a, b)` of stripe `t` of an optimal
    /// array, some data column not written: whichever reads fewer sectors (reconstruct on a
    /// tie, and always while the parity is not known to be consistent: a read-modify-write
    /// would carry an inconsistency forward, and where the platform cannot update the
    /// parity: `rmw` false).
    fn write_mode(&self, span: &Span, t: u64, a: u64, b: u64, rmw: bool) -> Mode {
        let map = span.map_of(t);
        let len = b - a;
        let mut rcw_reads = 0u64;
        let mut rmw_reads = u64::from(map.parity()).saturating_mul(len);
        for i in 0..map.data() {
            let written = span.written_in(t, i, a, b).map_or(0, |(f, t)| t - f);
            rcw_reads = rcw_reads.saturating_add(len - written);
            if written > 0 {
                rmw_reads = rmw_reads.saturating_add(len);
            }
        }
        if rcw_reads == 0 {
            Mode::Full
        } else if rmw && self.in_sync() && rmw_reads < rcw_reads {
            Mode::ReadModifyWrite
        } else {
            Mode::ReconstructWrite
        }
    }

    /// Sends the slice's reads into the buffer (or goes on at once if it needs none): per
    /// member, in row order, consecutive ranges merged into one I/O.
    fn send_reads<P: Platform>(
        &self,
        p: &P,
        rq: P::Request,
        span: &Span,
        mode: Mode,
        lost: MemberSet,
    ) {
        let state = p.state(rq);
        let (a, b) = state.stripe().slice();
        state.stripe().set_step(Step::Read);
        state.begin_pass(Phase::Stripe);
        let mut sent = Ok(());
        let mut ios = 0u32;
        let mut send = |m: u32, (c, f, e): (u32, u64, u64)| {
            ios += 1;
            sent = sent.and_then(|()| self.send_column(p, rq, span, Op::Read, m, c, (f, e)));
        };
        for m in 0..span.members() {
            if lost.contains(m) {
                continue;
            }
            let mut io = Coalesce::default();
            for (t, map, ta, tb) in span.stripes_in(a, b) {
                let written = match map.role(m) {
                    Role::Data(i) => span.written_in(t, i, ta, tb),
                    Role::P | Role::Q => None,
                };
                let is_parity = map.parity_set().contains(m);
                // The rows of column `m` to read.
                let ranges: [Option<(u64, u64)>; 2] = match mode {
                    Mode::Full => [None, None],
                    // Every survivor: a rebuild needs them all.
                    Mode::Read | Mode::Degraded => [Some((ta, tb)), None],
                    Mode::ReadModifyWrite if is_parity || written.is_some() => {
                        [Some((ta, tb)), None]
                    }
                    Mode::ReadModifyWrite => [None, None],
                    Mode::ReconstructWrite if is_parity => [None, None],
                    Mode::ReconstructWrite => match written {
                        None => [Some((ta, tb)), None],
                        Some((f, e)) => [(ta < f).then_some((ta, f)), (e < tb).then_some((e, tb))],
                    },
                };
                for (from, to) in ranges.into_iter().flatten() {
                    if let Some(range) = io.add(m, from, to) {
                        send(m, range);
                    }
                }
            }
            if let Some(range) = io.pending {
                send(m, range);
            }
        }
        let _ = sent;
        if let Some(result) = state.put(Status::Ok) {
            // Nothing was sent: go on here. Reads that all completed already (their interrupt
            // came on this CPU before the put) go on in a fresh work item: going on here would
            // take every later slice one level deeper into this stack.
            if ios == 0 && result.errors.is_empty() && result.status == Status::Ok {
                self.after_read(p, rq, span);
            } else {
                p.queue_stripe_work(rq);
            }
        }
    }

    /// Sends one member I/O between buffer column `column` and rows `[from, to)` of member
    /// `member` (the column's offset 0 is the slice's first row). Never FUA of its own: a FUA
    /// request's writes get it from the platform (`Platform::fua`).
    #[allow(clippy::too_many_arguments)]
    fn send_column<P: Platform>(
        &self,
        p: &P,
        rq: P::Request,
        span: &Span,
        op: Op,
        member: u32,
        column: u32,
        (from, to): (u64, u64),
    ) -> Result<(), Status> {
        let state = p.state(rq);
        let (a, _) = state.stripe().slice();
        let io = MemberIo {
            info: PieceInfo {
                op,
                member,
                sectors: to.saturating_sub(from),
            },
            member_sector: span.member_base.saturating_add(from),
            source: Source::Buffer {
                column,
                offset: from.saturating_sub(a),
            },
            fua: false,
        };
        state.add_piece();
        if p.submit(rq, &io).is_err() {
            // Never the last reference: the sender holds one.
            let _ = state.put(Status::IoError);
            return Err(Status::IoError);
        }
        Ok(())
    }

    /// The slice's reads are in: rebuild what is lost if the request needs it, else go on.
    fn after_read<P: Platform>(&self, p: &P, rq: P::Request, span: &Span) {
        let state = p.state(rq);
        let stripe = state.stripe();
        let (a, b) = stripe.slice();
        let lost = stripe.lost();
        let mode = stripe.mode();
        // Rebuild only when a lost data column holds something the request needs: a read
        // of it, or old data kept beside the new in a degraded write.
        let mut needed = false;
        for (t, map, ta, tb) in span.stripes_in(a, b) {
            for m in lost.iter() {
                if let Role::Data(i) = map.role(m) {
                    let written = span.written_in(t, i, ta, tb);
                    needed |= match mode {
                        Mode::Read => written.is_some(),
                        _ => written != Some((ta, tb)),
                    };
                }
            }
        }
        // A repair rewrites the bad members' columns whole: rebuild them.
        if needed || !stripe.bad().is_empty() {
            stripe.set_step(Step::Recover);
            p.compute_parity(rq, &span.job(ParityOp::Recover { lost }, a, b));
        } else {
            self.after_recover(p, rq, span);
        }
    }

    /// A parity job of `rq` ended. From process context, inline in
    /// [`StripeBuffers::compute_parity`] or later.
    pub fn parity_done<P: Platform>(&self, p: &P, rq: P::Request, ok: bool) {
        let state = p.state(rq);
        let Some(span) = self.span_of(state) else {
            self.stripe_end(p, rq, Status::IoError);
            return;
        };
        if !ok {
            self.stripe_end(p, rq, Status::IoError);
            return;
        }
        match state.stripe().step() {
            Step::Recover => self.after_recover(p, rq, &span),
            Step::Compute => self.after_compute(p, rq, &span),
            _ => {}
        }
    }

    /// Lost columns are rebuilt: a read copies its data out and moves on; a write copies its
    /// new data in and computes the parity.
    fn after_recover<P: Platform>(&self, p: &P, rq: P::Request, span: &Span) {
        let state = p.state(rq);
        let stripe = state.stripe();
        let (a, b) = stripe.slice();
        let mode = stripe.mode();
        let n = span.members();
        let mut changed = MemberSet::EMPTY;
        for (t, map, ta, tb) in span.stripes_in(a, b) {
            for i in 0..map.data() {
                let Some((from, to)) = span.written_in(t, i, ta, tb) else {
                    continue;
                };
                let m = map.data_member(i);
                if mode == Mode::Read {
                    self.copy_request(p, rq, span, (t, i), m, from, to, false);
                    continue;
                }
                changed = changed.with(m);
                let column = if mode == Mode::ReadModifyWrite {
                    let new = n + m;
                    if (from, to) != (ta, tb) {
                        // The new column must equal the old outside the written range, so
                        // the update sees no change there.
                        p.copy_column(rq, m, new, ta - a, tb - ta);
                    }
                    new
                } else {
                    m
                };
                self.copy_request(p, rq, span, (t, i), column, from, to, true);
            }
        }
        if mode == Mode::Read && stripe.bad().is_empty() {
            self.next_slice(p, rq, span, Status::Ok);
            return;
        }
        // (A read with bad members: their parity too, then the rewrite.)
        stripe.set_step(Step::Compute);
        let op = if mode == Mode::ReadModifyWrite {
            ParityOp::Update { changed }
        } else {
            ParityOp::Generate
        };
        p.compute_parity(rq, &span.job(op, a, b));
    }

    /// Copies the request's data for data index `index` of stripe `t`, rows `[from, to)`,
    /// into (`to_buffer`) or out of buffer column `column`.
    #[allow(clippy::too_many_arguments)]
    fn copy_request<P: Platform>(
        &self,
        p: &P,
        rq: P::Request,
        span: &Span,
        (t, index): (u64, u32),
        column: u32,
        from: u64,
        to: u64,
        to_buffer: bool,
    ) {
        let (a, _) = p.state(rq).stripe().slice();
        let first = span.array_sector(t, index, from);
        let last = span.array_sector(t, index, to);
        if to_buffer && last > span.own_end {
            // Past its own end, the data of the writes it took in (`stripe_hold.rs`).
            let x = first.max(span.own_end);
            self.copy_adopted(p, rq, span, (x, last), column, x - first + (from - a));
        }
        // `from` lies in the slice: no underflow.
        self.copy_segments(p, rq, rq, (first, last), column, from - a, to_buffer);
    }

    /// Copies array sectors `[first, last)` of request `source`'s data (`rq`'s own, or a write
    /// it took in) into (`to_buffer`) or out of `rq`'s buffer column `column`, sector `first`
    /// at `column_offset`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn copy_segments<P: Platform>(
        &self,
        p: &P,
        rq: P::Request,
        source: P::Request,
        (first, last): (u64, u64),
        column: u32,
        column_offset: u64,
        to_buffer: bool,
    ) {
        for (segment, seg_start, seg_sectors) in p.segments(source) {
            let seg_end = seg_start.saturating_add(seg_sectors);
            let (x, y) = (first.max(seg_start), last.min(seg_end));
            if x >= y {
                continue;
            }
            // `x` lies in the segment and in the range: no subtraction underflows.
            let offset = column_offset + (x - first);
            if to_buffer {
                p.copy_to_buffer(rq, segment, x - seg_start, column, offset, y - x);
            } else {
                p.copy_from_buffer(rq, column, offset, segment, x - seg_start, y - x);
            }
        }
    }

    /// Writes the slice's new data and parity to the working members: per member, in row
    /// order, consecutive ranges merged into one I/O (a full run of stripes is one write per
    /// member).
    fn send_writes<P: Platform>(&self, p: &P, rq: P::Request, span: &Span) {
        let state = p.state(rq);
        let stripe = state.stripe();
        let (a, b) = stripe.slice();
        let mode = stripe.mode();
        let bad = stripe.bad();
        let n = span.members();
        // No write here asks for FUA of its own (md's PPL neither; a FUA request's writes get it
        // from the platform, `Platform::fua`): a logged slice's entry covers its stripes
        // until the epoch retires, after a flush of every member, and a later partial write
        // that builds its partial parity on this data while a volatile cache may still lose
        // it flushes first (`after_write` marks the stripes, `durable.rs`).
        stripe.set_step(Step::Write);
        state.begin_pass(Phase::Stripe);
        let mut sent = Ok(());
        let mut wrote = MemberSet::EMPTY;
        let mut send = |m: u32, (c, f, e): (u32, u64, u64)| {
            let op = Op::Write;
            // A replica's writes count as its member's: a flush of the member flushes it too.
            wrote = wrote.with(m);
            sent = sent.and_then(|()| self.send_column(p, rq, span, op, m, c, (f, e)));
            // A replacement of the member gets the same (`replace.rs`).
            if let Some(replica) = self.replica_of(m) {
                sent = sent.and_then(|()| self.send_column(p, rq, span, op, replica, c, (f, e)));
            }
        };
        for m in 0..n {
            // Every member in use now, also one lost to this slice's reads: one being rebuilt
            // (or added, or rebuilt since the plan) takes its column, which the slice holds
            // whole (recovered, computed, or the new data of the rows written).
            // A read writes only the bad members' columns back.
            if !self.writable(m) || (mode == Mode::Read && !bad.contains(m)) {
                continue;
            }
            let mut io = Coalesce::default();
            for (t, map, ta, tb) in span.stripes_in(a, b) {
                let (column, range) = match map.role(m) {
                    Role::P | Role::Q => (m, Some((ta, tb))),
                    // Rebuilt whole (and overlaid with the new data): rewritten whole.
                    Role::Data(_) if bad.contains(m) => (m, Some((ta, tb))),
                    Role::Data(i) => {
                        let column = if mode == Mode::ReadModifyWrite {
                            n + m
                        } else {
                            m
                        };
                        (column, span.written_in(t, i, ta, tb))
                    }
                };
                if let Some((from, to)) = range {
                    if let Some(range) = io.add(column, from, to) {
                        send(m, range);
                    }
                }
            }
            if let Some(range) = io.pending {
                send(m, range);
            }
        }
        let _ = sent;
        stripe.wrote.store(wrote.bits(), Ordering::Relaxed);
        if state.put(Status::Ok).is_some() {
            // Every write completed already: the next slice starts in a fresh work item, not
            // one level deeper into this stack (see `send_reads`).
            p.queue_stripe_work(rq);
        }
    }

    /// An empty flush to each member of `members` (in use: the caller's; and a replacement,
    /// which the marks count as its member), before the slice logs (`Step::Flush`); the slice goes on
    /// when they completed.
    fn flush_members<P: Platform>(&self, p: &P, rq: P::Request, members: MemberSet) {
        let state = p.state(rq);
        let stripe = state.stripe();
        stripe.set_step(Step::Flush);
        state.begin_pass(Phase::Stripe);
        stripe.flushing.store(members.bits(), Ordering::Relaxed);
        let every = self.writable_members().minus(members).is_empty();
        stripe.flushing_all.store(every, Ordering::Relaxed);
        stripe
            .flush_ticket
            .store(self.log.flushes.begin(), Ordering::Relaxed);
        let flush = |member: u32| {
            let io = MemberIo {
                info: PieceInfo {
                    op: Op::Flush,
                    member,
                    sectors: 0,
                },
                member_sector: 0,
                source: Source::None,
                fua: false,
            };
            state.add_piece();
            if p.submit(rq, &io).is_err() {
                // Never the last reference: the sender holds one.
                let _ = state.put(Status::IoError);
            }
        };
        for m in members.iter() {
            flush(m);
        }
        if self.replica_live() {
            flush(self.replacement_index());
        }
        if state.put(Status::Ok).is_some() {
            // Not inline: see `send_reads`.
            p.queue_stripe_work(rq);
        }
    }

    /// The slice's flush (`flush_members`) completed on every member it went to: what those
    /// members completed before it began is durable, for every slot.
    fn flush_done(&self, stripe: &StripeState) {
        let ticket = stripe.flush_ticket.load(Ordering::Relaxed);
        let flushed = MemberSet::from_bits(stripe.flushing.load(Ordering::Relaxed));
        let every = stripe.flushing_all.load(Ordering::Relaxed);
        self.log.flushes.end(ticket, flushed, every);
    }

    /// The lock slots of the stripes of slice `[a, b)`.
    fn slice_slots(span: &Span, a: u64, b: u64) -> Slots {
        span.slots
            .stripes(span.stripe_at(a), span.stripe_at(b.saturating_sub(1)))
    }

    /// The slice `[a, b)` in `mode` writes every data column of its rows.
    fn slice_full(span: &Span, a: u64, b: u64, mode: Mode, missing: MemberSet) -> bool {
        mode == Mode::Full
            || (mode == Mode::Degraded
                && Self::keeps_data_until(span, a, span.full_until(a), missing) >= b)
    }

    /// The end of the rows from `a` (up to `end`) whose stripes have every data column:
    /// none of their data members is in `missing`.
    fn keeps_data_until(span: &Span, a: u64, end: u64, missing: MemberSet) -> u64 {
        let mut row = a;
        while row < end {
            let t = span.stripe_at(row);
            if !missing.minus(span.map_of(t).parity_set()).is_empty() {
                break;
            }
            row = span.stripe_end(t);
        }
        row.min(end)
    }

    /// The slice's parity is computed: log it if it must (`log_write.rs`), then write.
    fn after_compute<P: Platform>(&self, p: &P, rq: P::Request, span: &Span) {
        let stripe = p.state(rq).stripe();
        let (a, b) = stripe.slice();
        let mode = stripe.mode();
        if mode == Mode::Read {
            // A read's repair writes back what the data is: nothing to log.
            self.send_writes(p, rq, span);
            return;
        }
        let slots = Self::slice_slots(span, a, b);
        let missing = stripe.lost().minus(stripe.bad());
        let need = self.log_need(Self::slice_full(span, a, b, mode, missing), slots);
        if need == LogNeed::None {
            self.send_writes(p, rq, span);
            return;
        }
        if need == LogNeed::Partial {
            // A member out of use holds nothing a replay reads.
            let unflushed = self
                .log
                .flushes
                .unflushed(self.members.flush_marks(), slots);
            let unflushed = unflushed.intersect(self.writable_members());
            if !unflushed.is_empty() {
                self.flush_members(p, rq, unflushed);
                return;
            }
        }
        let t = span.stripe_at(a);
        let map = span.map_of(t);
        let mut written = [(0u32, 0u32); MAX_MEMBERS as usize];
        if need == LogNeed::Partial {
            // A partial slice stays in its stripe and within MAX_LOGGED_SECTORS (`slice_plan`).
            // A missing member's column counts as one the write leaves alone: its new data
            // then stays in the partial parity, and a replay makes the parity hold it, so it
            // reads back new, never torn (the replay cannot read it).
            for i in 0..map.data() {
                let m = map.data_member(i);
                if missing.contains(m) {
                    continue;
                }
                if let (Some((f, e)), Some(w)) =
                    (span.written_in(t, i, a, b), written.get_mut(m as usize))
                {
                    // Below MAX_LOGGED_SECTORS: lossless.
                    *w = ((f - a) as u32, (e - a) as u32);
                }
            }
        }
        let parity_members = span
            .stripes_in(a, b)
            .fold(MemberSet::EMPTY, |set, (_, m, _, _)| {
                set.union(m.parity_set())
            });
        let slice = LoggedSlice {
            need,
            slots,
            start: span.member_base - self.data_offset() + a,
            sectors: b - a,
            map,
            parity_members,
            written,
            rmw: mode == Mode::ReadModifyWrite,
        };
        if !self.send_log(p, rq, &slice) {
            self.send_writes(p, rq, span);
        }
    }

    /// The slice's writes are done: read the bad members' rewritten rows back, if any, else
    /// go on.
    fn after_write<P: Platform>(&self, p: &P, rq: P::Request, span: &Span) {
        let state = p.state(rq);
        let stripe = state.stripe();
        let bad = stripe.bad();
        let (a, b) = stripe.slice();
        if self.has_log() {
            // Its data may sit in volatile caches until the next flush of those members.
            let wrote = MemberSet::from_bits(stripe.wrote.load(Ordering::Relaxed));
            let slots = Self::slice_slots(span, a, b);
            self.log
                .flushes
                .written(self.members.flush_marks(), slots, wrote);
        }
        if bad.is_empty() {
            self.next_slice(p, rq, span, Status::Ok);
            return;
        }
        stripe.set_step(Step::Verify);
        state.begin_pass(Phase::Stripe);
        let mut sent = Ok(());
        for m in bad.iter().filter(|&m| self.usable(m, MemberSet::EMPTY)) {
            sent = sent.and_then(|()| self.send_column(p, rq, span, Op::Read, m, m, (a, b)));
        }
        let _ = sent;
        if state.put(Status::Ok).is_some() {
            // Not inline: see `send_reads`.
            p.queue_stripe_work(rq);
        }
    }

    /// The bad members' rewritten rows read back: each counts a corrected read error (one
    /// whose read back failed was failed instead); the slice is done.
    fn repaired<P: Platform>(&self, p: &P, rq: P::Request, span: &Span) {
        let bad = p.state(rq).stripe().bad();
        for m in bad.iter().filter(|&m| self.usable(m, MemberSet::EMPTY)) {
            self.read_error_repaired(p, m);
        }
        self.next_slice(p, rq, span, Status::Ok);
    }

    /// The slice is done: plan the next one, or end the request.
    fn next_slice<P: Platform>(&self, p: &P, rq: P::Request, span: &Span, status: Status) {
        self.release_log(p, rq);
        let stripe = p.state(rq).stripe();
        stripe.bad.store(0, Ordering::Relaxed);
        let (_, b) = stripe.slice();
        let (_, hi) = span.hull();
        self.drop_buffer(p, rq);
        if status == Status::Ok && b < hi {
            stripe.slice_start.store(b, Ordering::Relaxed);
            stripe.set_step(Step::Plan);
            self.plan(p, rq, span);
        } else {
            self.stripe_end(p, rq, status);
        }
    }

    /// Frees the request's buffer, if it holds one, and wakes a request waiting for memory.
    fn drop_buffer<P: Platform>(&self, p: &P, rq: P::Request) {
        if p.state(rq).stripe().buffer.swap(false, Ordering::Relaxed) {
            p.free_buffer(rq);
            self.buffers_freed.fetch_add(1, Ordering::SeqCst);
            self.wake_buffer_waiter(p);
        }
    }

    /// Wakes the request that has waited longest for buffer memory. One per freed buffer: the
    /// woken request either gets a buffer (and frees it later, waking the next) or ends
    /// (which wakes the next too); waking all of them made every free a stampede of retries.
    ///
    /// One waker at a time takes from the list: the kernel's is a lock-free stack taken whole
    /// and put back, so a second take meanwhile would find it empty and its wake-up would be
    /// lost (review 2, Q6). A waker that finds another at work leaves a credit instead, and the
    /// one at work makes a take for every credit, each after the credit was left, before it
    /// stops: a request that pushed itself and then left a credit is taken (or another in
    /// its place) even if the take before found the list empty.
    fn wake_buffer_waiter<P: Platform>(&self, p: &P) {
        let wakes = &self.buffer_wakes;
        wakes.credits.fetch_add(1, Ordering::SeqCst);
        // After the free that called it (`wait_list.rs`).
        waker_fence();
        loop {
            if wakes.waking.swap(true, Ordering::SeqCst) {
                // The waker at work sees the credit: it looks at them after it stops.
                return;
            }
            while wakes.credits.load(Ordering::SeqCst) > 0 {
                let taken = p.take_oldest(WorkList::BufferWait);
                wakes.credits.fetch_sub(1, Ordering::SeqCst);
                if let Some(w) = taken {
                    p.queue_stripe_work(w);
                }
            }
            wakes.waking.store(false, Ordering::SeqCst);
            if wakes.credits.load(Ordering::SeqCst) == 0 {
                return;
            }
            // A credit came after the last look: take for it, unless another waker does.
        }
    }

    /// Ends the request: frees its buffer and lock, wakes the waiters, and completes it.
    pub(super) fn stripe_end<P: Platform>(&self, p: &P, rq: P::Request, status: Status) {
        let state = p.state(rq);
        if state.stripe().buffer_waited.swap(false, Ordering::Relaxed) {
            // It was woken to take a buffer it no longer needs: pass the turn on (only then:
            // a wake pass is several shared atomics, review 3's N2).
            self.wake_buffer_waiter(p);
        }
        self.drop_buffer(p, rq);
        self.release_log(p, rq);
        let stripe = state.stripe();
        let held = stripe.held.swap(0, Ordering::Relaxed);
        let slots = Slots::new(
            stripe.slot.load(Ordering::Relaxed),
            stripe.slot_count.load(Ordering::Relaxed),
            self.lock_slots(),
        );
        for i in 0..held {
            let slot = slots.nth(i);
            if slot == slots.last() {
                // Before its lock goes: nobody else may wake the followers it took in.
                self.end_followers(p, rq, slot, status);
            }
            self.locks().unlock(slot);
            wake_all(p, WorkList::StripeWait(slot));
        }
        self.stripe_left(p);
        state.set_idle(Phase::Normal);
        self.complete(p, rq, status);
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::{lock_slots_for, Slots, MAX_LOCK_SLOTS, MIN_LOCK_SLOTS};
    use std::vec::Vec;

    /// The slots in the order a request takes them.
    fn order(slots: Slots) -> Vec<u32> {
        (0..slots.count()).map(|i| slots.nth(i)).collect()
    }

    #[test]
    fn slots_are_taken_in_descending_order_also_when_they_wrap() {
        for n in [MIN_LOCK_SLOTS, 2 * MIN_LOCK_SLOTS, MAX_LOCK_SLOTS] {
            descending_in(n);
        }
    }

    fn descending_in(n: u32) {
        assert_eq!(order(Slots::new(7, 3, n)), [9, 8, 7]);
        // Stripes n-2, n-1, n, n+1: slots n-2, n-1, 0, 1, taken n-1, n-2, 1, 0.
        assert_eq!(order(Slots::new(n - 2, 4, n)), [n - 1, n - 2, 1, 0]);
        assert_eq!(order(Slots::new(n - 1, 1, n)), [n - 1]);
        assert_eq!(order(Slots::new(0, 1, n)), [0]);
        assert_eq!(Slots::of(u64::from(n) * 3 + 5, 2, n), Slots::new(5, 2, n));
        // Every request's order is descending, over exactly its stripes' slots: one global
        // order, so no two requests wait for each other.
        for first in [0, 1, n / 2, n - 3, n - 1] {
            for count in [1, 2, 3, 64, 256] {
                let slots = Slots::new(first, count, n);
                let got = order(slots);
                assert!(
                    got.windows(2).all(|w| w[0] > w[1]),
                    "{first} {count}: {got:?}"
                );
                let mut want: Vec<u32> = (0..count).map(|i| (first + i) % n).collect();
                want.sort_unstable_by(|a, b| b.cmp(a));
                assert_eq!(got, want);
                // The last stripe's slot.
                assert_eq!(slots.last(), (first + count - 1) % n);
            }
        }
    }

    #[test]
    fn a_slices_slots_are_its_stripes_slots() {
        let n = MIN_LOCK_SLOTS;
        let request = Slots::new(n - 2, 5, n);
        assert_eq!(order(request.stripes(0, 0)), [n - 2]);
        assert_eq!(order(request.stripes(1, 2)), [n - 1, 0]);
        assert_eq!(order(request.stripes(2, 4)), [2, 1, 0]);
    }

    #[test]
    fn the_lock_table_grows_with_the_queue_depth_within_its_bounds() {
        assert_eq!(lock_slots_for(0), MIN_LOCK_SLOTS);
        assert_eq!(lock_slots_for(2 * 256), 8192);
        assert_eq!(lock_slots_for(3 * 256), 16384);
        assert_eq!(lock_slots_for(128 * 256), MAX_LOCK_SLOTS);
        assert_eq!(lock_slots_for(u32::MAX), MAX_LOCK_SLOTS);
        for r in [1, 255, 4097, 100_000] {
            assert!(lock_slots_for(r).is_power_of_two());
        }
    }
}
