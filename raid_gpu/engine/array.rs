// SPDX-License-Identifier: GPL-2.0

//! The array engine's I/O path: turns requests into member I/O, accounts for their completions,
//! and decides whether a request ends now, waits for the worker, or waits for a member failure
//! to reach the superblocks. What the worker does is in `worker.rs` and `metadata.rs`.
//!
//! It owns no memory and sends nothing itself: the [`Platform`] does that. The kernel module and
//! the host harness (`tools/graid-sim`) run this same code.
//!
//! # Rules
//!
//! - Nothing on this path waits or writes metadata: it may run inside the submitter's
//!   `submit_bio` (where a bio sent and waited for would never be issued) or in interrupt
//!   context. Member errors on a level with redundancy go to the worker.
//! - A member's health changes only in the worker (or while the array is not running), so two
//!   failures never race and the superblock writer is never concurrent with itself.
//! - A write or flush is acknowledged only once every member failure it may depend on
//!   (a member it skipped) is recorded in the superblocks: while a failure is pending, finished
//!   writes are parked and the worker ends them after the update (md's `MD_SB_CHANGE_PENDING`).

use super::admin::AddRequest;
use super::geometry::{Geometry, Piece};
use super::geometry_cell::GeometryCell;
use super::log_write::LogState;
use super::members::{MemberSet, MemberState};
use super::platform::{MemberIo, Op, PieceInfo, Platform, Source, Status, WorkList};
use super::ppl::LogArea;
use super::rebuild::RebuildState;
use super::replace::ReplaceState;
use super::request::{PassResult, Phase, RequestState};
use super::reshape_run::ReshapeRun;
use super::safe_mode::SafeMode;
use super::scrub::ScrubState;
use super::spares::Spares;
use super::stripe::{BufferWakes, LockTable, MAX_LOCK_SLOTS, MIN_LOCK_SLOTS};
use super::stripe_hold::Holds;
use super::superblock::Superblock;
use super::suspect::SuspectParity;
use core::ops::Deref;
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

/// Why an engine could not be set up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EngineError {
    /// The member list is shorter than the geometry's count.
    MemberCount { given: usize, expected: u32 },
    /// The stripe lock table is not a power of two of slots in
    /// `MIN_LOCK_SLOTS..=MAX_LOCK_SLOTS`, or the log's live table or the flush marks do not
    /// match it.
    LockTable {
        words: usize,
        live_words: usize,
        flush_marks: usize,
    },
}

/// The memory an engine works in that its platform allocates (the engine allocates nothing,
/// and stays small enough to build on a kernel stack): the members' states in role order, and
/// the tables sized by how many requests the array can have in flight
/// ([`super::stripe::lock_slots_for`]).
pub trait Store: Deref<Target = [MemberState]> {
    /// The stripe lock table (`stripe.rs`): one bit per lock slot.
    fn lock_words(&self) -> &[AtomicU64];
    /// The log's live slots (`log_write.rs`): one bit per lock slot for each of the two halves
    /// of the ring, half 0's first.
    fn live_words(&self) -> &[AtomicU64];
    /// Each lock slot's flush mark (`durable.rs`): one word per slot.
    fn flush_marks(&self) -> &[AtomicU64];
}

/// The [`Store`] of a platform with vectors of its own (`M` of [`MemberState`]s, `W` of
/// words).
#[derive(Debug)]
pub struct EngineStore<M, W> {
    pub members: M,
    pub locks: W,
    pub live: W,
    pub flush_marks: W,
}

impl<M, W: Deref<Target = [AtomicU64]>> EngineStore<M, W> {
    /// The store of `members`, with lock tables of `slots` slots made by `words(count)` (a
    /// vector of `count` zero words).
    pub fn new<E>(
        members: M,
        slots: u32,
        mut words: impl FnMut(usize) -> Result<W, E>,
    ) -> Result<Self, E> {
        let count = (slots / 64) as usize;
        Ok(Self {
            members,
            locks: words(count)?,
            live: words(2 * count)?,
            flush_marks: words(64 * count)?,
        })
    }
}

impl<M: Deref<Target = [MemberState]>, W> Deref for EngineStore<M, W> {
    type Target = [MemberState];

    fn deref(&self) -> &[MemberState] {
        &self.members
    }
}

impl<M: Deref<Target = [MemberState]>, W: Deref<Target = [AtomicU64]>> Store for EngineStore<M, W> {
    fn lock_words(&self) -> &[AtomicU64] {
        &self.locks
    }

    fn live_words(&self) -> &[AtomicU64] {
        &self.live
    }

    fn flush_marks(&self) -> &[AtomicU64] {
        &self.flush_marks
    }
}

/// How much of the array still works.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArrayState {
    Optimal,
    /// Some member failed, every sector still has a copy.
    Degraded,
    /// A member holding the last copy of some data failed a write (or no superblock could be
    /// written): it stays in the array, reads go on, writes fail (md's `MD_BROKEN`).
    Broken,
    /// Some data has no copy on a working member: every request fails.
    Failed,
}

/// The logic of one running array. `M` holds the members' state in role order and the tables
/// sized by the array's queue depth ([`Store`]).
#[derive(Debug)]
pub struct ArrayEngine<M> {
    /// The array-wide superblock fields; per-member fields are filled in when writing.
    pub(super) superblock: Superblock,
    pub(super) geometry: GeometryCell,
    /// Where each member's data area starts now (a reshape moves it: `reshape_run.rs`).
    pub(super) data_offset: AtomicU64,
    /// A reshape (`reshape_run.rs`).
    pub(super) reshape: ReshapeRun,
    /// Superblock event counter (of the last superblock written).
    pub(super) events: AtomicU64,
    pub(super) members: M,
    /// The copies are known to hold the same data. While they are not (an unclean shutdown, or
    /// a new array that was not created in sync), reads come from one fixed copy.
    pub(super) in_sync: AtomicBool,
    /// Members failing but not yet recorded in the superblocks; writes finishing meanwhile wait.
    pub(super) failing: AtomicU32,
    /// No more writes (see [`ArrayState::Broken`]).
    pub(super) broken: AtomicBool,
    /// Writes wait: a read error is being repaired (the repair must not race a write).
    pub(super) frozen: AtomicBool,
    /// Repairs in progress (the worker's own count).
    pub(super) repairs: AtomicU32,
    /// Bumped each time a RAID 5/6 stripe buffer is freed (so a request that failed to get
    /// one and a buffer freed meanwhile never miss each other).
    pub(super) buffers_freed: AtomicU64,
    /// Wake-ups owed to the requests waiting for a buffer, and whether one is being made.
    pub(super) buffer_wakes: BufferWakes,
    /// RAID 5/6 writes held for the writes that continue them (`stripe_hold.rs`).
    pub(super) holds: Holds,
    /// Members the administrator asked to fail, for the worker (`admin.rs`), and those it
    /// refused to (they hold the last copy of some data).
    pub(super) fail_requests: AtomicU32,
    pub(super) fail_refused: AtomicU32,
    /// A device the administrator added, for the worker (`admin.rs`).
    pub(super) add_request: AddRequest,
    /// Slot-table entries of devices that left the array (a device added in a member's place
    /// takes a new entry; the old one stays, faulty, so the old device is refused if it comes
    /// back), as bits.
    pub(super) retired_slots: AtomicU64,
    /// Devices waiting to take a failed member's place (`spares.rs`).
    pub(super) spares: Spares,
    /// The rebuild (`rebuild.rs`).
    pub(super) rebuild: RebuildState,
    /// A member's replacement (`replace.rs`).
    pub(super) replace: ReplaceState,
    /// Check, repair and resync (`scrub.rs`).
    pub(super) scrub: ScrubState,
    /// Dirty and clean (`safe_mode.rs`).
    pub(super) safe_mode: SafeMode,
    /// When the worker next clears idle write-intent bits (`write_intent.rs`), `now_ns`.
    pub(super) bitmap_clean_at: AtomicU64,
    /// How often it looks, milliseconds.
    pub(super) bitmap_clean_ms: AtomicU32,
    /// A write found the bit of one of its regions missing on disk since the worker last
    /// looked (`write_intent.rs`).
    pub(super) bits_wanted: AtomicBool,
    /// Events of the newest superblock written while every member was in sync (see
    /// `Superblock::bitmap_events`).
    pub(super) bitmap_events: AtomicU64,
    /// The partial parity log (`log_write.rs`).
    pub(super) log: LogState,
    /// Parity a helper computed that nobody checked (`suspect.rs`).
    pub(super) suspect: SuspectParity,
}

impl<M: Store> ArrayEngine<M> {
    /// An engine for an array described by `superblock` (array-wide fields) and `geometry`, with
    /// one fresh [`MemberState`] per member in role order. `in_sync`: the copies are known to be
    /// identical.
    pub fn new(
        superblock: Superblock,
        geometry: Geometry,
        members: M,
        in_sync: bool,
    ) -> Result<Self, EngineError> {
        Self::check(&geometry, &members)?;
        Ok(Self::fields(superblock, geometry, members, in_sync))
    }

    /// [`Self::new`] written straight into `slot` (the engine is over 2 KiB: a kernel stack
    /// frame holding it as a temporary, and a `Result` of it, would pass the kernel's limit).
    /// On `Err` nothing was written.
    pub fn init(
        slot: &mut core::mem::MaybeUninit<Self>,
        superblock: Superblock,
        geometry: Geometry,
        members: M,
        in_sync: bool,
    ) -> Result<&mut Self, EngineError> {
        Self::check(&geometry, &members)?;
        Ok(slot.write(Self::fields(superblock, geometry, members, in_sync)))
    }

    /// Whether `members` can run `geometry`.
    fn check(geometry: &Geometry, members: &M) -> Result<(), EngineError> {
        // Room for more members than the geometry has is kept for a change of a mirror's
        // copies (`raid_devices.rs`); fewer cannot run it.
        let given = members.len();
        if given < geometry.members() as usize {
            return Err(EngineError::MemberCount {
                given,
                expected: geometry.members(),
            });
        }
        let (words, live_words) = (members.lock_words().len(), members.live_words().len());
        let flush_marks = members.flush_marks().len();
        let slots = words.saturating_mul(64);
        if !slots.is_power_of_two()
            || !(MIN_LOCK_SLOTS as usize..=MAX_LOCK_SLOTS as usize).contains(&slots)
            || live_words != 2 * words
            || flush_marks != slots
        {
            return Err(EngineError::LockTable {
                words,
                live_words,
                flush_marks,
            });
        }
        Ok(())
    }

    /// The engine's fields, fresh. Inlined, so [`Self::init`] builds them in the slot.
    #[inline(always)]
    fn fields(superblock: Superblock, geometry: Geometry, members: M, in_sync: bool) -> Self {
        Self {
            events: AtomicU64::new(superblock.events),
            superblock,
            geometry: GeometryCell::new(geometry),
            data_offset: AtomicU64::new(superblock.data_offset),
            reshape: ReshapeRun::default(),
            members,
            in_sync: AtomicBool::new(in_sync),
            failing: AtomicU32::new(0),
            broken: AtomicBool::new(false),
            frozen: AtomicBool::new(false),
            repairs: AtomicU32::new(0),
            buffers_freed: AtomicU64::new(0),
            buffer_wakes: BufferWakes::default(),
            holds: Holds::new(),
            fail_requests: AtomicU32::new(0),
            fail_refused: AtomicU32::new(0),
            add_request: AddRequest::new(),
            retired_slots: AtomicU64::new(0),
            spares: Spares::new(),
            rebuild: RebuildState::new(),
            replace: ReplaceState::new(),
            scrub: ScrubState::new(),
            safe_mode: SafeMode::new(),
            bitmap_clean_at: AtomicU64::new(0),
            bitmap_clean_ms: AtomicU32::new(super::write_intent::DEFAULT_CLEAN_INTERVAL_MS),
            bits_wanted: AtomicBool::new(false),
            bitmap_events: AtomicU64::new(superblock.bitmap_events),
            log: LogState::new(
                superblock
                    .ppl
                    .then(|| LogArea::new(superblock.journal))
                    .flatten(),
                0,
            ),
            suspect: SuspectParity::new(geometry.resync_sectors()),
        }
    }

    /// The array's geometry now (its size changes with a resize: ask again rather than keep
    /// one across a wait).
    pub fn geometry(&self) -> Geometry {
        self.geometry.get()
    }

    /// Where each member's data area starts (member sectors).
    pub fn data_offset(&self) -> u64 {
        self.data_offset.load(Ordering::SeqCst)
    }

    /// The array-wide superblock fields the array was started with.
    pub fn superblock(&self) -> &Superblock {
        &self.superblock
    }

    /// The members, in role order: as many as the geometry has now.
    pub fn members(&self) -> &[MemberState] {
        let count = self.geometry().members() as usize;
        self.members.get(..count).unwrap_or(&self.members)
    }

    /// Every entry of the platform's store, past the members too.
    pub(super) fn members_store(&self) -> &[MemberState] {
        &self.members
    }

    /// How many members the platform's store has room for: the most a change of a mirror's
    /// copies may give it.
    pub fn member_capacity(&self) -> u32 {
        // At most MAX_MEMBERS counts: lossless where it matters.
        self.members
            .len()
            .min(super::geometry::MAX_MEMBERS as usize) as u32
    }

    /// Slots of the stripe lock table (a power of two).
    pub fn lock_slots(&self) -> u32 {
        // Checked by `new`: at most MAX_LOCK_SLOTS.
        (self.members.lock_words().len() * 64) as u32
    }

    /// The stripe lock table.
    pub(super) fn locks(&self) -> LockTable<'_> {
        LockTable::new(self.members.lock_words())
    }

    /// The spares.
    pub fn spares(&self) -> &Spares {
        &self.spares
    }

    /// Event count of the last superblock written.
    pub fn events(&self) -> u64 {
        self.events.load(Ordering::Acquire)
    }

    /// The copies are known to hold the same data.
    pub fn in_sync(&self) -> bool {
        self.in_sync.load(Ordering::Relaxed)
    }

    pub fn state(&self) -> ArrayState {
        if !self.has_all_data(None) {
            ArrayState::Failed
        } else if self.broken.load(Ordering::SeqCst) {
            ArrayState::Broken
        } else if self.members().iter().any(|m| !m.is_in_sync()) {
            ArrayState::Degraded
        } else {
            ArrayState::Optimal
        }
    }

    /// Starts request `rq`: `op` on `sectors` sectors at array sector `start`. Sends its member
    /// I/O through `platform`, which ends it once the engine says so. Any context that may send
    /// I/O; never waits.
    pub fn submit<P: Platform>(&self, p: &P, rq: P::Request, op: Op, start: u64, sectors: u64) {
        p.state(rq).begin(op, start, sectors);
        self.run_pass(p, rq, Phase::Normal);
    }

    /// Reports the completion of a member I/O the platform sent for `rq`. Any context.
    pub fn piece_done<P: Platform>(&self, p: &P, rq: P::Request, piece: PieceInfo, status: Status) {
        if let Some(member) = self.members().get(piece.member as usize) {
            member.account(p.cpu(), &piece, status);
        }
        let status = match status {
            Status::Ok => Status::Ok,
            // No redundancy: the error is the request's.
            _ if !self.redundant() => status,
            // A discard error neither fails the member nor the request (md does the same):
            // discarded data is undefined anyway.
            _ if piece.op == Op::Discard => Status::Ok,
            // The worker decides what an I/O error means: repair the read, fail the member, or
            // keep the last copy and fail the request.
            Status::IoError => {
                p.state(rq).note_error(piece.member);
                Status::Ok
            }
            Status::NotSupported => status,
        };
        self.put(p, rq, status);
    }

    /// The array keeps a copy or parity of its data.
    pub(super) fn redundant(&self) -> bool {
        self.geometry().copies() > 1 || self.geometry().level().has_parity()
    }

    /// Sends one pass of `rq`'s member I/O and drops the sender's reference.
    pub(super) fn run_pass<P: Platform>(&self, p: &P, rq: P::Request, phase: Phase) {
        let state = p.state(rq);
        state.begin_pass(phase);
        // Which geometry maps it, while a reshape runs (`reshape_run.rs`); it may wait.
        if phase == Phase::Normal && !self.route_request(p, rq) {
            return;
        }
        // A write waits until the superblocks say "not clean" (`safe_mode.rs`). SeqCst after
        // `begin_pass`: a worker marking the array clean either sees this request in flight,
        // or this load sees the array clean.
        // (Not RAID 5/6 discards, which are refused below without touching a member.)
        let changes_data = match state.op() {
            Op::Write => true,
            Op::Discard => !self.geometry().level().has_parity(),
            Op::Read | Op::Flush => false,
        };
        // And until every write-intent region it dirties has its bit on disk
        // (`write_intent.rs`).
        if phase == Phase::Normal
            && changes_data
            && (!self.write_may_go() || !self.regions_ready(p, state))
        {
            state.set_idle(Phase::Waiting);
            p.push(WorkList::Deferred, rq);
            p.kick_worker();
            return;
        }
        if phase == Phase::Normal && self.geometry().level().has_parity() {
            match state.op() {
                Op::Flush => {}
                Op::Read if self.direct_read_ok(state) => {}
                // Discards would have to keep the parity consistent; not offered.
                Op::Discard => {
                    state.set_idle(Phase::Normal);
                    self.end(p, rq, Status::NotSupported);
                    return;
                }
                // A write waits while the rebuild's window covers it (see `rebuild.rs`);
                // the Phase::Stripe it takes counts it in flight, as the rebuild sees it.
                Op::Write if self.rebuild.blocks(state.start(), state.sectors()) => {
                    state.set_idle(Phase::Waiting);
                    p.push(WorkList::Deferred, rq);
                    p.kick_worker();
                    return;
                }
                _ => {
                    self.submit_stripe(p, rq);
                    // Closed meanwhile: the rebuild sees the request in the stripe engine
                    // and waits for it (SeqCst on both sides).
                    return;
                }
            }
        }
        // SeqCst after `begin_pass`: a worker that froze writes either sees this request's
        // pending reference and waits for it, or this load sees the freeze.
        let held = |s: &RequestState| {
            self.frozen.load(Ordering::SeqCst) || self.rebuild.blocks(s.start(), s.sectors())
        };
        if phase == Phase::Normal && state.op().is_write() && held(state) {
            state.set_idle(Phase::Waiting);
            p.push(WorkList::Deferred, rq);
            p.kick_worker();
            return;
        }
        let sent = self.send_pass(p, rq, state, phase);
        self.put(p, rq, sent.err().unwrap_or(Status::Ok));
    }

    fn put<P: Platform>(&self, p: &P, rq: P::Request, status: Status) {
        let state = p.state(rq);
        if let Some(result) = state.put(status) {
            self.pass_done(p, rq, state, result);
        }
    }

    /// The last member I/O of a pass completed.
    fn pass_done<P: Platform>(
        &self,
        p: &P,
        rq: P::Request,
        state: &RequestState,
        result: PassResult,
    ) {
        if state.phase() == Phase::Stripe {
            // The stripe engine goes on in process context.
            p.queue_stripe_work(rq);
        } else if state.phase() == Phase::Normal && result.errors.is_empty() {
            self.complete(p, rq, result.status);
        } else {
            // Errors to handle, or a repair pass to follow up: the worker's job.
            p.push(WorkList::Deferred, rq);
            p.kick_worker();
        }
    }

    /// The request is done: ends it, unless it is a successful write while a member failure is
    /// not yet recorded (it may have skipped that member); then it is parked for the worker.
    pub(super) fn complete<P: Platform>(&self, p: &P, rq: P::Request, status: Status) {
        let state = p.state(rq);
        // SeqCst, with the member health loads that planned the request: a write that skipped a
        // failing member sees it counted here (the worker counts before it changes the health)
        // unless the superblocks already record it.
        // (Not discards: what they leave is undefined, whatever a member missed.)
        let gated = matches!(state.op(), Op::Write | Op::Flush);
        if status == Status::Ok && gated && self.failing.load(Ordering::SeqCst) > 0 {
            state.set_idle(Phase::Parked);
            p.push(WorkList::Parked, rq);
            // The update may have finished before the push: then nobody else will wake the
            // worker for this request.
            if self.parked_may_end() {
                p.kick_worker();
            }
            return;
        }
        self.end(p, rq, status);
    }

    /// Ends request `rq`, its write-intent regions released first.
    pub(super) fn end<P: Platform>(&self, p: &P, rq: P::Request, status: Status) {
        self.release_regions(p, p.state(rq));
        p.end_request(rq, status);
    }

    /// Parked requests may be ended now (with success, or with an error when the failure can
    /// never be recorded).
    pub(super) fn parked_may_end(&self) -> bool {
        self.failing.load(Ordering::SeqCst) == 0 || self.broken.load(Ordering::SeqCst)
    }

    fn send_pass<P: Platform>(
        &self,
        p: &P,
        rq: P::Request,
        state: &RequestState,
        phase: Phase,
    ) -> Result<(), Status> {
        let op = state.op();
        match phase {
            Phase::Normal if op.is_write() && self.broken.load(Ordering::SeqCst) => {
                Err(Status::IoError)
            }
            Phase::Normal if op == Op::Flush => self.send_flush(p, rq, state),
            Phase::Normal => {
                // Refuse before sending anything rather than leave a hole in the data.
                if !segments_cover(p, rq, state.start(), state.sectors()) {
                    return Err(Status::IoError);
                }
                if op == Op::Read {
                    self.send_read(p, rq, state, MemberSet::EMPTY)
                } else {
                    self.send_write(p, rq, state, op)
                }
            }
            Phase::Recover => self.send_read(p, rq, state, state.avoid()),
            Phase::RepairWrite => self.send_to(p, rq, state, Op::Write, state.repair_targets()),
            Phase::Verify => self.send_to(p, rq, state, Op::Read, state.repair_targets()),
            Phase::Waiting | Phase::Parked | Phase::Stripe => Err(Status::IoError),
        }
    }

    /// Sends one member I/O, counted before it can complete.
    fn send<P: Platform>(
        &self,
        p: &P,
        rq: P::Request,
        state: &RequestState,
        io: &MemberIo<P::Segment>,
    ) -> Result<(), Status> {
        state.add_piece();
        if p.submit(rq, io).is_err() {
            // Never the last reference: the sender holds one.
            let _ = state.put(Status::IoError);
            return Err(Status::IoError);
        }
        Ok(())
    }

    /// An empty flush to every working member; an error if there is none.
    fn send_flush<P: Platform>(
        &self,
        p: &P,
        rq: P::Request,
        state: &RequestState,
    ) -> Result<(), Status> {
        let mut sent = false;
        for (index, member) in (0u32..).zip(self.members()) {
            if !member.is_active() {
                continue;
            }
            let io = MemberIo {
                info: PieceInfo {
                    op: Op::Flush,
                    member: index,
                    sectors: 0,
                },
                member_sector: 0,
                source: Source::None,
                fua: false,
            };
            self.send(p, rq, state, &io)?;
            sent = true;
        }
        if sent && self.replica_live() {
            let io = MemberIo {
                info: PieceInfo {
                    op: Op::Flush,
                    member: self.replacement_index(),
                    sectors: 0,
                },
                member_sector: 0,
                source: Source::None,
                fua: false,
            };
            self.send(p, rq, state, &io)?;
        }
        if sent {
            Ok(())
        } else {
            Err(Status::IoError)
        }
    }

    /// Reads the request's range, one copy of each piece, from members not in `avoid`.
    fn send_read<P: Platform>(
        &self,
        p: &P,
        rq: P::Request,
        state: &RequestState,
        avoid: MemberSet,
    ) -> Result<(), Status> {
        let (start, sectors) = (state.start(), state.sectors());
        let (g, data_offset) = self.map_of(state);
        let pieces = g
            .map_read(start, sectors, self.read_copy(start, sectors))
            .map_err(|_| Status::IoError)?;
        let parity = g.level().has_parity();
        for piece in pieces {
            let piece = if self.usable(piece.member, avoid) {
                piece
            } else if parity {
                // The member failed after the read chose the direct path: count it as an
                // error, so the worker sends the read through the stripe engine (degraded).
                state.note_error(piece.member);
                continue;
            } else {
                self.healthy_copy(piece, avoid).ok_or(Status::IoError)?
            };
            self.send_piece(p, rq, state, Op::Read, &piece, data_offset)?;
        }
        Ok(())
    }

    /// Writes or discards the request's range on every copy whose member works.
    fn send_write<P: Platform>(
        &self,
        p: &P,
        rq: P::Request,
        state: &RequestState,
        op: Op,
    ) -> Result<(), Status> {
        let (g, data_offset) = self.map_of(state);
        let pieces = g
            .map_write(state.start(), state.sectors())
            .map_err(|_| Status::IoError)?;
        for piece in pieces {
            if self.writable(piece.member) {
                self.send_piece(p, rq, state, op, &piece, data_offset)?;
                if let Some(replica) = self.replica_of(piece.member) {
                    let piece = Piece {
                        member: replica,
                        ..piece
                    };
                    self.send_piece(p, rq, state, op, &piece, data_offset)?;
                }
            } else if self.healthy_copy(piece, MemberSet::EMPTY).is_none() {
                // No copy of this piece left: fail rather than lose the data silently.
                return Err(Status::IoError);
            }
        }
        Ok(())
    }

    /// `op` on the copies of the request's range held by working members in `targets` (the
    /// repair: writing recovered data back, reading it again to verify).
    fn send_to<P: Platform>(
        &self,
        p: &P,
        rq: P::Request,
        state: &RequestState,
        op: Op,
        targets: MemberSet,
    ) -> Result<(), Status> {
        let (g, data_offset) = self.map_of(state);
        let pieces = g
            .map_write(state.start(), state.sectors())
            .map_err(|_| Status::IoError)?;
        for piece in pieces {
            if targets.contains(piece.member) && self.usable(piece.member, MemberSet::EMPTY) {
                self.send_piece(p, rq, state, op, &piece, data_offset)?;
            }
        }
        Ok(())
    }

    /// Sends the part of `piece` that each request segment holds (its member sector counted
    /// from `data_offset`).
    fn send_piece<P: Platform>(
        &self,
        p: &P,
        rq: P::Request,
        state: &RequestState,
        op: Op,
        piece: &Piece,
        data_offset: u64,
    ) -> Result<(), Status> {
        let piece_end = piece
            .array_sector
            .checked_add(piece.sectors)
            .ok_or(Status::IoError)?;
        let member_start = data_offset
            .checked_add(piece.member_sector)
            .ok_or(Status::IoError)?;
        for (segment, segment_start, segment_sectors) in p.segments(rq) {
            let segment_end = segment_start
                .checked_add(segment_sectors)
                .ok_or(Status::IoError)?;
            let from = segment_start.max(piece.array_sector);
            let to = segment_end.min(piece_end);
            let Some(len) = to.checked_sub(from).filter(|&len| len > 0) else {
                continue;
            };
            // `from` lies in both the segment and the piece, so neither subtraction underflows.
            let io = MemberIo {
                info: PieceInfo {
                    op,
                    member: piece.member,
                    sectors: len,
                },
                member_sector: member_start.saturating_add(from - piece.array_sector),
                source: Source::Segment(segment, from - segment_start),
                fua: false,
            };
            self.send(p, rq, state, &io)?;
        }
        Ok(())
    }

    /// Which copy serves a read of `sectors` at `start`. Spread over the copies by position
    /// (no counter shared between CPUs on the read path); one fixed copy where the copies may
    /// differ (not yet resynced), so the same read always returns the same data, the copy the
    /// resync will keep.
    fn read_copy(&self, start: u64, sectors: u64) -> u32 {
        let copies = u64::from(self.geometry().copies());
        if copies <= 1 || !self.synced(start, sectors) {
            return 0;
        }
        // 64 KiB regions, mixed (splitmix64's finaliser) so strided patterns spread too.
        let mut x = start >> 7;
        x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        x ^= x >> 31;
        // Below `copies`, at most 32: lossless.
        (x % copies) as u32
    }

    /// The member works, is in sync, and the request may read from it.
    pub(super) fn usable(&self, index: u32, avoid: MemberSet) -> bool {
        !avoid.contains(index)
            && self
                .members()
                .get(index as usize)
                .is_some_and(MemberState::is_in_sync)
    }

    /// Writes go to the member: it works (in sync, or being rebuilt).
    pub(super) fn writable(&self, index: u32) -> bool {
        self.members()
            .get(index as usize)
            .is_some_and(MemberState::is_active)
    }

    /// The members writes go to ([`Self::writable`]).
    pub(super) fn writable_members(&self) -> MemberSet {
        (0..self.geometry().members())
            .filter(|&m| self.writable(m))
            .fold(MemberSet::EMPTY, MemberSet::with)
    }

    /// The same data as `piece` on a copy whose member is usable.
    pub(super) fn healthy_copy(&self, piece: Piece, avoid: MemberSet) -> Option<Piece> {
        (0..self.geometry().copies())
            .filter_map(|c| {
                self.geometry()
                    .map_read(piece.array_sector, piece.sectors, c)
                    .ok()?
                    .next()
            })
            .find(|p| self.usable(p.member, avoid))
    }

    /// Every piece of the range has a copy on a usable member.
    pub(super) fn readable(&self, start: u64, sectors: u64, avoid: MemberSet) -> bool {
        match self.geometry().map_read(start, sectors, 0) {
            Ok(mut pieces) => pieces.all(|piece| self.healthy_copy(piece, avoid).is_some()),
            Err(_) => false,
        }
    }

    /// True while every part of the data has a copy on a working member other than `without`.
    pub(super) fn has_all_data(&self, without: Option<u32>) -> bool {
        let avoid = without.map(MemberSet::of).unwrap_or_default();
        let lost = (0..self.geometry().members())
            .filter(|&m| !self.usable(m, avoid))
            .fold(MemberSet::EMPTY, MemberSet::with);
        self.geometry().has_all_data(lost)
    }
}

/// True if the request's segments follow each other without gap or overlap from `start` for
/// exactly `sectors` sectors.
fn segments_cover<P: Platform>(p: &P, rq: P::Request, start: u64, sectors: u64) -> bool {
    let Some(end) = start.checked_add(sectors) else {
        return false;
    };
    let mut next = start;
    for (_, segment_start, segment_sectors) in p.segments(rq) {
        match segment_start.checked_add(segment_sectors) {
            Some(segment_end) if segment_start == next && segment_sectors > 0 => next = segment_end,
            _ => return false,
        }
    }
    next == end
}
