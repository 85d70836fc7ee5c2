// SPDX-License-Identifier: GPL-2.0

//! The RAID 5/6 stripe engine: writes, and reads that cannot go straight to a data member.
//!
//! # A request's life
//!
//! The queue limits keep every request inside one stripe (`Geometry::boundary_sectors`). Reads
//! of an optimal array go straight to the data members (the RAID 0 path in `array.rs`);
//! everything else runs here, step by step, in process context (the platform's work items,
//! [`Platform::queue_stripe_work`]), driven by member I/O and parity completions:
//!
//! 1. **Lock** the stripe: one lock bit per slot of a table hashed by stripe number, so
//!    overlapping requests run one after the other and different stripes in parallel on as
//!    many CPUs as the work queue has (no array-wide lock anywhere). Waiters wait on the
//!    slot's own list.
//! 2. **Plan** a *slice* of the stripe: the column window the request touches (the same
//!    offsets on every member; as long as [`WIDE_SLICE_SECTORS`] of buffer allow when memory
//!    is at hand, else at most [`SLICE_SECTORS`], so stripe memory is bounded) and how to
//!    update it: a *full* write (every data column written: no reads), a
//!    *read-modify-write* (read the old data being replaced and the parity), or a
//!    *reconstruct-write* (read the data not being replaced), whichever reads fewer sectors
//!    (md's `handle_stripe_dirtying`; reconstruct-write only while the parity is not known to
//!    be consistent, as md does above its resync point). With a member lost the slice is
//!    *degraded*: every surviving column is read and the lost ones rebuilt first.
//! 3. **Buffer**: the platform gives the request a stripe buffer for the slice; when memory is
//!    short the request waits for another to free one (order: lock, then buffer, so waiting
//!    never holds what others need beyond their own stripes).
//! 4. **Read** what the plan needs into the buffer; **recover** lost columns; copy the new
//!    data in; **compute** P/Q ([`ParityJob`]); **write** the new data and parity from the
//!    buffer (never from the request's pages, which may change under buffered writeback while
//!    the parity is computed from the copy).
//! 5. **End**: the next slice, or unlock, wake the waiters, and end the request through
//!    `ArrayEngine::complete` (parked while a member failure it skipped is not yet durable).
//!
//! A member I/O error on any step goes to the worker, which fails the member (or refuses when
//! that would lose data: then the request fails) while the stripe stays locked, so no other
//! request computes parity from the stale column; the slice is then planned again, degraded.

use super::array::{ArrayEngine, ArrayState};
use super::geometry::Geometry;
use super::layout::{Recovery, Role, StripeMap};
use super::members::{MemberSet, MemberState};
use super::parity::{Columns, ParityJob, ParityOp};
use super::platform::{MemberEvent, MemberIo, Op, PieceInfo, Platform, Source, Status, WorkList};
use super::request::{Phase, RequestState};
use core::ops::Deref;
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering};

/// Lock slots per array. Stripe `s` uses slot `s % LOCK_SLOTS`: neighbouring stripes never
/// share one, and a collision only makes two unrelated stripes take turns.
pub const LOCK_SLOTS: usize = 256;

/// The longest column window one step handles when memory is short: bounds a request's
/// stripe buffer to `2 * members * SLICE_SECTORS` sectors (4 MiB with 32 members). The
/// platform's reserve buffer is this size.
pub const SLICE_SECTORS: u64 = 64;

/// Buffer a request asks for first, all columns together (1 MiB): a wider window when the
/// slice needs few columns, so a large write takes fewer steps (each a round trip to the
/// members). Refused without consequence (the request then takes a [`SLICE_SECTORS`] one).
pub const WIDE_SLICE_SECTORS: u64 = 2048;

/// A slice's plan: its end, how it is updated, and the buffer columns it needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct SlicePlan {
    end: u64,
    mode: Mode,
    columns: Columns,
}

/// The array's stripe locks (one bit per slot: the engine stays small enough to be built on a
/// kernel stack) and buffer-wait generation.
#[derive(Debug)]
pub struct StripeLocks {
    bits: [AtomicU64; LOCK_SLOTS / 64],
    /// Bumped each time a buffer is freed (so a request that failed to get one and a buffer
    /// freed meanwhile never miss each other).
    freed: AtomicU64,
}

impl Default for StripeLocks {
    fn default() -> Self {
        Self::new()
    }
}

impl StripeLocks {
    pub const fn new() -> Self {
        Self {
            bits: [const { AtomicU64::new(0) }; LOCK_SLOTS / 64],
            freed: AtomicU64::new(0),
        }
    }

    /// The word and bit of `slot`.
    fn bit(&self, slot: u32) -> Option<(&AtomicU64, u64)> {
        let word = self.bits.get((slot / 64) as usize)?;
        Some((word, 1u64 << (slot % 64)))
    }

    fn try_lock(&self, slot: u32) -> bool {
        self.bit(slot)
            .is_some_and(|(word, bit)| word.fetch_or(bit, Ordering::SeqCst) & bit == 0)
    }

    fn is_locked(&self, slot: u32) -> bool {
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
    enum Step {
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
    /// The request holds the lock of this slot / a stripe buffer.
    locked: AtomicBool,
    slot: AtomicU32,
    buffer: AtomicBool,
}

impl StripeState {
    pub const fn new() -> Self {
        Self {
            step: AtomicU8::new(0),
            mode: AtomicU8::new(0),
            slice_start: AtomicU64::new(0),
            slice_end: AtomicU64::new(0),
            lost: AtomicU32::new(0),
            locked: AtomicBool::new(false),
            slot: AtomicU32::new(0),
            buffer: AtomicBool::new(false),
        }
    }

    fn step(&self) -> Step {
        Step::from_code(self.step.load(Ordering::Acquire))
    }

    fn set_step(&self, step: Step) {
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

    fn lost(&self) -> MemberSet {
        MemberSet::from_bits(self.lost.load(Ordering::Relaxed))
    }

    /// A new request: nothing held, first slice not chosen yet.
    pub(crate) fn reset(&self) {
        self.set_step(Step::Lock);
        self.slice_start.store(u64::MAX, Ordering::Relaxed);
        self.slice_end.store(0, Ordering::Relaxed);
        self.locked.store(false, Ordering::Relaxed);
        self.buffer.store(false, Ordering::Relaxed);
    }
}

/// One request's view of its stripe: which columns it touches.
#[derive(Clone, Copy, Debug)]
struct Span {
    map: StripeMap,
    /// The lock slot.
    slot: u32,
    /// Array sector of the stripe's first data sector.
    row_start: u64,
    chunk: u64,
    /// The request's array range.
    start: u64,
    end: u64,
    /// First member sector of the stripe, data offset included.
    member_base: u64,
}

impl Span {
    fn new(g: &Geometry, data_offset: u64, start: u64, sectors: u64) -> Option<Self> {
        let end = start.checked_add(sectors)?;
        if sectors == 0 || end > g.array_sectors() {
            return None;
        }
        let stripe = g.stripe_of(start);
        let row_start = stripe.checked_mul(g.stripe_data_sectors())?;
        // The queue limits keep a request inside one stripe; refuse anything else.
        if end > row_start.checked_add(g.stripe_data_sectors())? {
            return None;
        }
        Some(Self {
            map: g.stripe_map(stripe)?,
            // Below LOCK_SLOTS: lossless.
            slot: (stripe % LOCK_SLOTS as u64) as u32,
            row_start,
            chunk: u64::from(g.chunk_sectors()),
            start,
            end,
            member_base: data_offset.checked_add(g.stripe_member_sector(stripe))?,
        })
    }

    /// The column range data index `index` has inside the request, as offsets in the chunk.
    fn written(&self, index: u32) -> Option<(u64, u64)> {
        let col_start = self
            .row_start
            .checked_add(u64::from(index).checked_mul(self.chunk)?)?;
        let col_end = col_start.checked_add(self.chunk)?;
        let from = self.start.max(col_start);
        let to = self.end.min(col_end);
        (from < to).then(|| (from - col_start, to - col_start))
    }

    /// `written` clipped to the slice `[a, b)`.
    fn written_in(&self, index: u32, a: u64, b: u64) -> Option<(u64, u64)> {
        let (from, to) = self.written(index)?;
        let (from, to) = (from.max(a), to.min(b));
        (from < to).then_some((from, to))
    }

    /// The smallest column window covering everything the request touches.
    fn hull(&self) -> (u64, u64) {
        (0..self.map.data())
            .filter_map(|i| self.written(i))
            .fold((u64::MAX, 0), |(lo, hi), (a, b)| (lo.min(a), hi.max(b)))
    }

    /// Array sector of column offset `offset` of data index `index`.
    fn array_sector(&self, index: u32, offset: u64) -> u64 {
        self.row_start
            .saturating_add(u64::from(index).saturating_mul(self.chunk))
            .saturating_add(offset)
    }
}

impl<M: Deref<Target = [MemberState]>> ArrayEngine<M> {
    /// Starts a RAID 5/6 request that does not go straight to the members: from the
    /// submitter's context, queues it for [`Self::stripe_work`].
    pub(super) fn submit_stripe<P: Platform>(&self, p: &P, rq: P::Request) {
        let state = p.state(rq);
        state.stripe().reset();
        state.set_idle(Phase::Stripe);
        p.queue_stripe_work(rq);
    }

    /// The worker's part for a direct RAID 5/6 read that returned member errors: fails those
    /// members and reads again through the stripe engine (degraded), or fails the read when
    /// that would lose data. (md first rewrites the sector from parity; not yet here.)
    pub(super) fn direct_read_errors<P: Platform>(&self, p: &P, rq: P::Request) {
        let state = p.state(rq);
        let mut kept = false;
        for member in state.errors().iter() {
            kept |= !self.try_fail(p, member, MemberEvent::Failed);
        }
        if kept {
            self.complete(p, rq, Status::IoError);
        } else {
            self.submit_stripe(p, rq);
        }
    }

    /// True if a read of `[start, start + sectors)` can go straight to the data members.
    pub(super) fn direct_read_ok(&self, start: u64, sectors: u64) -> bool {
        match self.geometry.map_read(start, sectors, 0) {
            Ok(mut pieces) => pieces.all(|piece| self.usable(piece.member, MemberSet::EMPTY)),
            Err(_) => false,
        }
    }

    /// The next step of RAID 5/6 request `rq`. Process context, once at a time per request
    /// (the platform's work item).
    pub fn stripe_work<P: Platform>(&self, p: &P, rq: P::Request) {
        let state = p.state(rq);
        let stripe = state.stripe();
        let Some(span) = Span::new(
            &self.geometry,
            self.superblock.data_offset,
            state.start(),
            state.sectors(),
        ) else {
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
                PassEnd::Ok => self.next_slice(p, rq, &span, Status::Ok),
                PassEnd::Failed => self.stripe_end(p, rq, Status::IoError),
                PassEnd::ToWorker => {}
            },
            // Parity completions arrive through `parity_done`.
            Step::Recover | Step::Compute => {}
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

    /// The worker's part: a stripe pass ended with member errors. Fails those members (the
    /// stripe stays locked meanwhile), then plans the slice again degraded after a read, or
    /// moves on after a write (the parity written covers the failed member's data).
    pub(super) fn stripe_errors<P: Platform>(&self, p: &P, rq: P::Request) {
        let state = p.state(rq);
        let mut kept = false;
        for member in state.errors().iter() {
            kept |= !self.try_fail(p, member, MemberEvent::Failed);
        }
        let Some(span) = Span::new(
            &self.geometry,
            self.superblock.data_offset,
            state.start(),
            state.sectors(),
        ) else {
            self.stripe_end(p, rq, Status::IoError);
            return;
        };
        if kept {
            // Beyond redundancy: the data of this slice cannot be made consistent.
            self.stripe_end(p, rq, Status::IoError);
            return;
        }
        let stripe = state.stripe();
        match stripe.step() {
            Step::Write => self.next_slice(p, rq, &span, Status::Ok),
            _ => {
                self.drop_buffer(p, rq);
                stripe.set_step(Step::Plan);
                p.queue_stripe_work(rq);
            }
        }
    }

    /// Takes the stripe lock, or queues `rq` behind it. True if taken.
    fn stripe_lock<P: Platform>(&self, p: &P, rq: P::Request, span: &Span) -> bool {
        let locks = &self.stripe_locks;
        if locks.try_lock(span.slot) {
            let stripe = p.state(rq).stripe();
            stripe.slot.store(span.slot, Ordering::Relaxed);
            stripe.locked.store(true, Ordering::Relaxed);
            return true;
        }
        p.push(WorkList::StripeWait(span.slot), rq);
        // The holder may have unlocked and drained the list before the push: then nobody
        // else wakes the list (SeqCst: either the holder's drain sees the push or this load
        // sees the unlock).
        if !locks.is_locked(span.slot) {
            p.take_all(WorkList::StripeWait(span.slot), |w| p.queue_stripe_work(w));
        }
        false
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
        let b = a.saturating_add(SLICE_SECTORS).min(hi);
        if a >= b {
            self.stripe_end(p, rq, Status::IoError);
            return;
        }
        let n = span.map.members();
        let lost = (0..n)
            .filter(|&m| !self.usable(m, MemberSet::EMPTY))
            .fold(MemberSet::EMPTY, MemberSet::with);
        if span.map.recovery(lost) == Recovery::Lost {
            self.stripe_end(p, rq, Status::IoError);
            return;
        }
        let narrow = self.slice_plan(span, op, lost, a, b);
        // As wide as WIDE_SLICE_SECTORS of buffer allow with the columns this plan needs, in
        // whole narrow slices, within the chunk.
        let wide_len = (WIDE_SLICE_SECTORS / u64::from(narrow.columns.count().max(1)))
            / SLICE_SECTORS
            * SLICE_SECTORS;
        let wide = (wide_len > SLICE_SECTORS && narrow.end < hi)
            .then(|| self.slice_plan(span, op, lost, a, a.saturating_add(wide_len).min(hi)))
            .filter(|w| {
                u64::from(w.columns.count()).saturating_mul(w.end - a) <= WIDE_SLICE_SECTORS
            });
        let mut plan = narrow;
        if !stripe.buffer.load(Ordering::Relaxed) {
            let freed = self.stripe_locks.freed.load(Ordering::SeqCst);
            let got = match wide {
                Some(w) if p.alloc_buffer(rq, w.columns, w.end - a) => {
                    plan = w;
                    true
                }
                _ => p.alloc_buffer(rq, narrow.columns, narrow.end - a),
            };
            if !got {
                p.push(WorkList::BufferWait, rq);
                if self.stripe_locks.freed.load(Ordering::SeqCst) != freed {
                    p.take_all(WorkList::BufferWait, |w| p.queue_stripe_work(w));
                }
                return;
            }
            stripe.buffer.store(true, Ordering::Relaxed);
        }
        stripe.slice_start.store(a, Ordering::Relaxed);
        stripe.slice_end.store(plan.end, Ordering::Relaxed);
        stripe.lost.store(lost.bits(), Ordering::Relaxed);
        stripe.mode.store(plan.mode.code(), Ordering::Relaxed);
        self.send_reads(p, rq, span, plan.mode, lost);
    }

    /// The plan for slice `[a, b)` with the members in `lost` lost.
    fn slice_plan(&self, span: &Span, op: Op, lost: MemberSet, a: u64, b: u64) -> SlicePlan {
        let mode = if op == Op::Read {
            Mode::Read
        } else if !lost.is_empty() {
            Mode::Degraded
        } else {
            self.write_mode(span, a, b)
        };
        let all = Columns::members(MemberSet::first(span.map.members()));
        let columns = match mode {
            Mode::ReadModifyWrite => {
                let changed = self.changed(span, a, b);
                Columns::members(changed.union(span.map.parity_set()))
                    .union(Columns::new_data(changed, span.map.members()))
            }
            _ => all,
        };
        SlicePlan {
            end: b,
            mode,
            columns,
        }
    }

    /// Data members the request writes in slice `[a, b)`.
    fn changed(&self, span: &Span, a: u64, b: u64) -> MemberSet {
        (0..span.map.data())
            .filter(|&i| span.written_in(i, a, b).is_some())
            .fold(MemberSet::EMPTY, |set, i| set.with(span.map.data_member(i)))
    }

    /// Full, read-modify-write or reconstruct-write for slice `[a, b)` of an optimal array:
    /// whichever reads fewer sectors (reconstruct on a tie, and always while the parity is not
    /// known to be consistent: a read-modify-write would carry an inconsistency forward).
    fn write_mode(&self, span: &Span, a: u64, b: u64) -> Mode {
        let len = b - a;
        let mut rcw_reads = 0u64;
        let mut rmw_reads = u64::from(span.map.parity()).saturating_mul(len);
        for i in 0..span.map.data() {
            let written = span.written_in(i, a, b).map_or(0, |(f, t)| t - f);
            rcw_reads = rcw_reads.saturating_add(len - written);
            if written > 0 {
                rmw_reads = rmw_reads.saturating_add(len);
            }
        }
        if rcw_reads == 0 {
            Mode::Full
        } else if self.in_sync() && rmw_reads < rcw_reads {
            Mode::ReadModifyWrite
        } else {
            Mode::ReconstructWrite
        }
    }

    /// Sends the slice's reads into the buffer (or goes on at once if it needs none).
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
        for m in 0..span.map.members() {
            if lost.contains(m) {
                continue;
            }
            let written = match span.map.role(m) {
                Role::Data(i) => span.written_in(i, a, b),
                Role::P | Role::Q => None,
            };
            let is_parity = span.map.parity_set().contains(m);
            // The ranges of column `m` to read, as [from, to) offsets in the chunk.
            let ranges: [Option<(u64, u64)>; 2] = match mode {
                Mode::Full => [None, None],
                // Every survivor: a rebuild needs them all.
                Mode::Read | Mode::Degraded => [Some((a, b)), None],
                Mode::ReadModifyWrite if is_parity || written.is_some() => [Some((a, b)), None],
                Mode::ReadModifyWrite => [None, None],
                Mode::ReconstructWrite if is_parity => [None, None],
                Mode::ReconstructWrite => match written {
                    None => [Some((a, b)), None],
                    Some((f, t)) => [(a < f).then_some((a, f)), (t < b).then_some((t, b))],
                },
            };
            for (from, to) in ranges.into_iter().flatten() {
                sent = sent.and_then(|()| {
                    self.send_column(p, rq, span, Op::Read, m, m, from - a, from, to - from)
                });
            }
        }
        let _ = sent;
        if let Some(result) = state.put(Status::Ok) {
            // Nothing was sent, or it all completed already: go on here.
            if result.errors.is_empty() && result.status == Status::Ok {
                self.after_read(p, rq, span);
            } else {
                p.queue_stripe_work(rq);
            }
        }
    }

    /// Sends one member I/O between column `column` of the buffer (at `column_offset`) and
    /// member `member` at chunk offset `chunk_offset`.
    #[allow(clippy::too_many_arguments)]
    fn send_column<P: Platform>(
        &self,
        p: &P,
        rq: P::Request,
        span: &Span,
        op: Op,
        member: u32,
        column: u32,
        column_offset: u64,
        chunk_offset: u64,
        sectors: u64,
    ) -> Result<(), Status> {
        let state = p.state(rq);
        let io = MemberIo {
            info: PieceInfo {
                op,
                member,
                sectors,
            },
            member_sector: span.member_base.saturating_add(chunk_offset),
            source: Source::Buffer {
                column,
                offset: column_offset,
            },
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
        // Rebuild only when a lost data column holds something the request needs: a read
        // of it, or old data kept beside the new in a degraded write.
        let needed = lost.iter().any(|m| match span.map.role(m) {
            Role::Data(i) => match stripe.mode() {
                Mode::Read => span.written_in(i, a, b).is_some(),
                _ => span.written_in(i, a, b) != Some((a, b)),
            },
            Role::P | Role::Q => false,
        });
        if needed {
            stripe.set_step(Step::Recover);
            let job = ParityJob {
                op: ParityOp::Recover {
                    how: span.map.recovery(lost),
                },
                map: span.map,
                sectors: b - a,
            };
            p.compute_parity(rq, &job);
        } else {
            self.after_recover(p, rq, span);
        }
    }

    /// A parity job of `rq` ended. From process context, inline in
    /// [`Platform::compute_parity`] or later.
    pub fn parity_done<P: Platform>(&self, p: &P, rq: P::Request, ok: bool) {
        let state = p.state(rq);
        let Some(span) = Span::new(
            &self.geometry,
            self.superblock.data_offset,
            state.start(),
            state.sectors(),
        ) else {
            self.stripe_end(p, rq, Status::IoError);
            return;
        };
        if !ok {
            self.stripe_end(p, rq, Status::IoError);
            return;
        }
        match state.stripe().step() {
            Step::Recover => self.after_recover(p, rq, &span),
            Step::Compute => self.send_writes(p, rq, &span),
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
        let n = span.map.members();
        let mut changed = MemberSet::EMPTY;
        for i in 0..span.map.data() {
            let Some((from, to)) = span.written_in(i, a, b) else {
                continue;
            };
            let m = span.map.data_member(i);
            if mode == Mode::Read {
                self.copy_request(p, rq, span, i, m, from, to, a, false);
                continue;
            }
            changed = changed.with(m);
            let column = if mode == Mode::ReadModifyWrite {
                let new = n + m;
                if (from, to) != (a, b) {
                    // The new column must equal the old outside the written range, so the
                    // update sees no change there.
                    p.copy_column(rq, m, new, 0, b - a);
                }
                new
            } else {
                m
            };
            self.copy_request(p, rq, span, i, column, from, to, a, true);
        }
        if mode == Mode::Read {
            self.next_slice(p, rq, span, Status::Ok);
            return;
        }
        stripe.set_step(Step::Compute);
        let op = if mode == Mode::ReadModifyWrite {
            ParityOp::Update { changed }
        } else {
            ParityOp::Generate
        };
        let job = ParityJob {
            op,
            map: span.map,
            sectors: b - a,
        };
        p.compute_parity(rq, &job);
    }

    /// Copies the request's data for data index `index`, chunk offsets `[from, to)`, into
    /// (`to_buffer`) or out of buffer column `column` (whose offset 0 is chunk offset `a`).
    #[allow(clippy::too_many_arguments)]
    fn copy_request<P: Platform>(
        &self,
        p: &P,
        rq: P::Request,
        span: &Span,
        index: u32,
        column: u32,
        from: u64,
        to: u64,
        a: u64,
        to_buffer: bool,
    ) {
        let first = span.array_sector(index, from);
        let last = span.array_sector(index, to);
        for (segment, seg_start, seg_sectors) in p.segments(rq) {
            let seg_end = seg_start.saturating_add(seg_sectors);
            let (x, y) = (first.max(seg_start), last.min(seg_end));
            if x >= y {
                continue;
            }
            // `x` lies in the segment and in the range, so neither subtraction underflows.
            let column_offset = x - first + (from - a);
            if to_buffer {
                p.copy_to_buffer(rq, segment, x - seg_start, column, column_offset, y - x);
            } else {
                p.copy_from_buffer(rq, column, column_offset, segment, x - seg_start, y - x);
            }
        }
    }

    /// Writes the slice's new data and parity to the working members.
    fn send_writes<P: Platform>(&self, p: &P, rq: P::Request, span: &Span) {
        let state = p.state(rq);
        let stripe = state.stripe();
        let (a, b) = stripe.slice();
        let mode = stripe.mode();
        let lost = stripe.lost();
        let n = span.map.members();
        stripe.set_step(Step::Write);
        state.begin_pass(Phase::Stripe);
        let mut sent = Ok(());
        for m in 0..n {
            if lost.contains(m) || !self.usable(m, MemberSet::EMPTY) {
                continue;
            }
            let (column, range) = match span.map.role(m) {
                Role::P | Role::Q => (m, Some((a, b))),
                Role::Data(i) => {
                    let column = if mode == Mode::ReadModifyWrite {
                        n + m
                    } else {
                        m
                    };
                    (column, span.written_in(i, a, b))
                }
            };
            if let Some((from, to)) = range {
                sent = sent.and_then(|()| {
                    self.send_column(p, rq, span, Op::Write, m, column, from - a, from, to - from)
                });
            }
        }
        let _ = sent;
        if let Some(result) = state.put(Status::Ok) {
            if result.errors.is_empty() && result.status == Status::Ok {
                self.next_slice(p, rq, span, Status::Ok);
            } else {
                p.queue_stripe_work(rq);
            }
        }
    }

    /// The slice is done: plan the next one, or end the request.
    fn next_slice<P: Platform>(&self, p: &P, rq: P::Request, span: &Span, status: Status) {
        let stripe = p.state(rq).stripe();
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
            self.stripe_locks.freed.fetch_add(1, Ordering::SeqCst);
            p.take_all(WorkList::BufferWait, |w| p.queue_stripe_work(w));
        }
    }

    /// Ends the request: frees its buffer and lock, wakes the waiters, and completes it.
    fn stripe_end<P: Platform>(&self, p: &P, rq: P::Request, status: Status) {
        let state = p.state(rq);
        self.drop_buffer(p, rq);
        let stripe = state.stripe();
        if stripe.locked.swap(false, Ordering::Relaxed) {
            let slot = stripe.slot.load(Ordering::Relaxed);
            self.stripe_locks.unlock(slot);
            p.take_all(WorkList::StripeWait(slot), |w| p.queue_stripe_work(w));
        }
        state.set_idle(Phase::Normal);
        self.complete(p, rq, status);
    }
}
