// SPDX-License-Identifier: GPL-2.0

//! The running reshape (issue 46; the design and its proof are `on-disk-format.rst`,
//! "Reshape (design)"): a RAID 0, 5 or 6 array restriped onto another member count, chunk or
//! layout while it serves requests.
//!
//! - **Start** ([`ArrayEngine::start_reshape`], with the platform's queue frozen): the devices
//!   that join take their new roles in sync (the reshape writes everything they hold), the
//!   array's geometry becomes the new one (its member count is every role in use), and the
//!   superblocks record the reshape at its start before any request maps by it.
//! - **Requests** are routed when they start ([`ReshapeRoute`]): the old geometry at the old
//!   data offset, the new at the new, or they wait (the window in motion, or sectors moved but
//!   not recorded) on the worker's list until a record lets them go. The platform's queue
//!   limits keep every request inside one unit of the plan ([`ArrayEngine::io_boundary`]), so
//!   none straddles the position.
//! - **Steps** (the worker, [`ArrayEngine::reshape_step`]): the next window of the plan is
//!   closed (the front moves), the requests that mapped it old are waited for, and it is read
//!   in the old geometry and written in whole stripes of the new one through the rebuild
//!   buffer (`reshape_move.rs`). The superblocks record the position where the plan says
//!   they must before a window, every [`CHECKPOINT_NS`] (md's 10 s), and at once when a write
//!   waits for it, each after a flush of every member.
//! - **End**: the superblocks name the new geometry alone, then requests map by it directly,
//!   and the platform takes the new size and limits ([`Events::reshape_ended`]).
//! - **Bitmap and log**: a write-intent bitmap is kept in both geometries (a write's regions
//!   are its own side's rows, `write_intent.rs`); a partial parity log is voided at the start
//!   and takes no entry until the end ([`ArrayEngine::log_suspended`]), whose superblocks wait
//!   for the writes it did not log; where the data moves into the log's area, its ring gives
//!   up its end ([`ArrayEngine::shrink_log`]).
//! - **Degraded** (`reshape_move.rs`): a member lost in the middle, or a sector that cannot be
//!   read, and the window's old columns are recovered from the parity, as md's reshape does;
//!   members that cannot be written are left out, and a spare that took a lost member's
//!   place is rebuilt in the new geometry once the reshape ended (a rebuild walks one).
//!
//! Not yet: fewer members (the plan runs backwards, but the dropped members must leave at
//! the end).
//!
//! [`Events::reshape_ended`]: super::platform::Events::reshape_ended

use super::array::{ArrayEngine, ArrayState, Store};
use super::geometry::Geometry;
use super::members::MemberState;
use super::platform::{Op, Platform, WorkList};
use super::ppl::LogArea;
use super::request::{Phase, RequestState, Side};
use super::reshape::{Direction, PlanError, ReshapePlan, Side as PlanSide};
use super::reshape_route::{ReshapeRoute, Route};
use super::superblock::{Area, Reshape, Superblock};
use core::fmt;
use core::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};

/// The superblocks record the position at least this often while a reshape moves (md's
/// checkpoint), so a restart redoes little.
pub const CHECKPOINT_NS: u64 = 10_000_000_000;

/// The most a step moves by default, in array sectors (whole units of the plan, at least
/// one; [`ArrayEngine::set_reshape_window`]).
pub const WINDOW_SECTORS: u64 = 8192;

/// Times a step looks for the requests it waits for to end before it gives the window back
/// and lets the worker handle what they may wait for.
const DRAIN_PAUSES: u32 = 200;

code_enum! {
    /// Where the reshape is.
    pub enum Stage {
        /// None runs.
        Idle,
        /// It moves; the superblocks name it.
        Running,
        /// Every window moved: the superblocks being written name the new geometry alone.
        Ending,
    }
}

/// Why a reshape may not start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReshapeError {
    /// The plan is impossible (its reason).
    Plan(PlanError),
    /// A reshape, check, resync, rebuild or replace runs, or the copies are not known to be in
    /// sync: it must end first.
    Busy,
    /// A member is missing or failed (md refuses too).
    Degraded,
    /// The new data area would cover the write-intent bitmap or the partial parity log,
    /// which stay where they are.
    AreaInUse,
    /// The devices that join are not the array's spares, one per new role, or the new
    /// geometry has more members than the platform's store holds.
    Members,
    /// Fewer members: not yet (the dropped members' devices must leave the array at its end).
    Fewer,
    /// The new geometry holds less than the array (a chunk that does not divide the member
    /// size): its end would be lost (md refuses the same).
    Smaller { now: u64, new: u64 },
    /// The superblocks could not be written: nothing started.
    Broken,
}

impl fmt::Display for ReshapeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Plan(e) => write!(f, "{e}"),
            Self::Busy => write!(
                f,
                "a reshape, check, resync, rebuild or replace runs: wait for it to end"
            ),
            Self::Degraded => write!(f, "the array is degraded: rebuild it first"),
            Self::AreaInUse => write!(
                f,
                "the data cannot move over the write-intent bitmap or the partial parity log"
            ),
            Self::Members => write!(f, "one spare per new member is needed"),
            Self::Fewer => write!(f, "a restripe onto fewer members is not supported yet"),
            Self::Smaller { now, new } => write!(
                f,
                "the new shape holds {new} of the array's {now} sectors (the chunk does not \
                 divide the member size): resize the members to a multiple of it first"
            ),
            Self::Broken => write!(f, "the superblocks could not be written"),
        }
    }
}

/// The engine's state of a reshape.
#[derive(Debug, Default)]
pub struct ReshapeRun {
    /// A [`Stage`] code.
    stage: AtomicU8,
    route: ReshapeRoute,
    /// The position superblocks written from now on claim (the worker's, ahead of the
    /// route's recorded one while they are written).
    claim: AtomicU64,
    /// `now_ns` of the last record.
    recorded_at: AtomicU64,
    /// A request waits for a record.
    wanted: AtomicBool,
    counts: ReshapeCounts<AtomicU64>,
    /// The most a step moves (0: [`WINDOW_SECTORS`]).
    window: AtomicU64,
    /// The last step could not read the window, not even through the parity (too much
    /// lost). It is tried again every second and reported as standing still.
    pub(super) read_failed: AtomicBool,
    /// Ending: no write the reshape did not log is in flight any more, so the superblocks
    /// may name the new geometry alone (until then any written still record the reshape).
    closing: AtomicBool,
}

/// What reshapes did since the array started (for tests and DETAIL).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReshapeCounts<T = u64> {
    /// Windows moved.
    pub windows: T,
    /// Positions recorded in the superblocks (a start and an end not counted).
    pub records: T,
    /// Requests that waited for a window or a record.
    pub waits: T,
    /// Windows given back because requests in them did not end (the worker went on and
    /// came back).
    pub retries: T,
}

impl ReshapeRun {
    fn stage(&self) -> Stage {
        Stage::from_code(self.stage.load(Ordering::SeqCst))
    }
}

/// Where a reshape stands, for the platform (DETAIL, sysfs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReshapeProgress {
    pub plan: ReshapePlan,
    /// The position the superblocks hold.
    pub recorded: u64,
    /// The far edge of what was moved.
    pub front: u64,
    /// It stands still: the window cannot be read even through the parity (tried again), or
    /// the array lost data or broke. Degraded, it moves on.
    pub stalled: bool,
}

/// The bitmap's and log's reserved areas, ending by member sector `data` at the latest: a
/// reshape's data offset may move into their room (an array of members under 1 GiB has no
/// other). A bitmap in use is never lent, a log in use only its end (the engine shrinks its
/// ring: [`ArrayEngine::shrink_log`]); an area already ending before `data` stays as it is.
fn lend_areas(sb: &mut Superblock, data: u64) {
    if sb.bitmap_region == 0 {
        sb.bitmap = sb.bitmap.ending_by(data);
    }
    sb.journal = sb.journal.ending_by(data);
}

impl<M: Store> ArrayEngine<M> {
    /// A data area of `sectors` at member sector `offset` leaves the reserved areas the array
    /// uses where they are: it meets no bitmap in use, and a partial parity log it meets at its
    /// end keeps a ring that holds the largest entries ([`ppl::MIN_LOG_SECTORS`]; the reshape
    /// starts it anew, [`ArrayEngine::shrink_log`]).
    ///
    /// [`ppl::MIN_LOG_SECTORS`]: super::ppl::MIN_LOG_SECTORS
    fn areas_leave_room(&self, offset: u64, sectors: u64) -> bool {
        let sb = &self.superblock;
        let meets = |area: Area| {
            area.sectors != 0
                && area.offset < offset.saturating_add(sectors)
                && offset < area.offset.saturating_add(area.sectors)
        };
        let bitmap_free = sb.bitmap_region == 0 || !meets(sb.bitmap);
        let log_kept = !sb.ppl
            || !meets(sb.journal)
            || (sb.journal.offset < offset && LogArea::new(sb.journal.ending_by(offset)).is_some());
        bitmap_free && log_kept
    }
}

/// Whether a request's range meets `[lo, hi)`.
fn overlaps(r: &RequestState, lo: u64, hi: u64) -> bool {
    r.start() < hi && lo < r.start().saturating_add(r.sectors())
}

/// The request is in flight (member I/O out, or in the stripe engine), not waiting idle.
fn in_flight(r: &RequestState) -> bool {
    r.pending() > 0 || r.phase() == Phase::Stripe
}

impl<M: Store> ArrayEngine<M> {
    /// A reshape runs (any context).
    pub fn reshaping(&self) -> bool {
        self.reshape.stage() != Stage::Idle
    }

    /// The partial parity log takes no entry: the data moves, and an entry names rows of one
    /// geometry. From the reshape's end on (its last superblocks being written) writes log
    /// again; the end waits for the writes that did not ([`Self::finish_reshape`]).
    pub(super) fn log_suspended(&self) -> bool {
        self.reshape.stage() == Stage::Running
    }

    /// The reshape cannot move: some data has no copy left, or writes fail (the array is
    /// broken). Degraded, it moves on.
    fn reshape_blocked(&self) -> bool {
        matches!(self.state(), ArrayState::Broken | ArrayState::Failed)
    }

    /// Where the running reshape stands, if one runs.
    pub fn reshape_progress(&self) -> Option<ReshapeProgress> {
        if !self.reshaping() {
            return None;
        }
        Some(ReshapeProgress {
            plan: self.reshape.route.plan()?,
            recorded: self.reshape.route.recorded(),
            front: self.reshape.route.front(),
            stalled: self.reshape_blocked() || self.reshape.read_failed.load(Ordering::Relaxed),
        })
    }

    /// The array's size as requests see it: while a reshape runs, what it moves (the larger
    /// geometry's size is taken at its end).
    pub fn capacity_sectors(&self) -> u64 {
        match self.reshape_progress() {
            Some(r) => r.plan.content(),
            None => self.geometry().array_sectors(),
        }
    }

    /// The member sector every member's data ends before (while a reshape runs, the later of
    /// its two data areas'): what a device must hold to be a member or spare.
    pub fn data_end(&self) -> u64 {
        let len = self.geometry().member_data_sectors();
        let offset = match self.reshape_progress() {
            Some(r) => r
                .plan
                .geometry(PlanSide::Old)
                .1
                .max(r.plan.geometry(PlanSide::New).1),
            None => self.data_offset(),
        };
        offset.saturating_add(len)
    }

    /// What reshapes did since the array started.
    pub fn reshape_counts(&self) -> ReshapeCounts {
        let c = &self.reshape.counts;
        ReshapeCounts {
            windows: c.windows.load(Ordering::Relaxed),
            records: c.records.load(Ordering::Relaxed),
            waits: c.waits.load(Ordering::Relaxed),
            retries: c.retries.load(Ordering::Relaxed),
        }
    }

    /// The queue limit that keeps every request inside one stripe run (RAID 5/6) or chunk of
    /// the geometry, and while a reshape runs inside one of both geometries and one unit of
    /// its plan, so no request straddles the position ([`Geometry::boundary_sectors`]).
    pub fn io_boundary(&self) -> u32 {
        match self.reshape_progress() {
            Some(r) => r.plan.boundary_sectors(),
            None => self.geometry().boundary_sectors(),
        }
    }

    /// Makes steps move at most `sectors` array sectors (at least one unit of the plan; 0:
    /// the default, [`WINDOW_SECTORS`]): smaller windows hold fewer requests back at once.
    pub fn set_reshape_window(&self, sectors: u64) {
        self.reshape.window.store(sectors, Ordering::Relaxed);
    }

    /// The plan of a reshape to `new` with its data at `new_offset`, or why it may not start
    /// now (nothing changes either way).
    pub fn reshape_allowed(
        &self,
        new: Geometry,
        new_offset: u64,
    ) -> Result<ReshapePlan, ReshapeError> {
        let old = self.geometry();
        // Both geometries' data areas are the same size (a reshape moves no member's end).
        let new = new
            .resized(old.member_data_sectors())
            .map_err(|_| ReshapeError::Members)?;
        if !self.areas_leave_room(new_offset, new.member_data_sectors()) {
            return Err(ReshapeError::AreaInUse);
        }
        let plan = ReshapePlan::new(old, self.data_offset(), new, new_offset)
            .map_err(ReshapeError::Plan)?;
        if new.members() > self.member_capacity() {
            return Err(ReshapeError::Members);
        }
        if new.members() < old.members() {
            return Err(ReshapeError::Fewer);
        }
        if plan.content() < old.array_sectors() {
            return Err(ReshapeError::Smaller {
                now: old.array_sectors(),
                new: plan.content(),
            });
        }
        if self.state() != ArrayState::Optimal {
            return Err(ReshapeError::Degraded);
        }
        if self.reshaping()
            || !self.in_sync()
            || !self.scrub_idle()
            || self.rebuild_target().is_some()
            || self.replacement().is_some()
        {
            return Err(ReshapeError::Busy);
        }
        Ok(plan)
    }

    /// Starts reshape `plan` (from [`Self::reshape_allowed`]), the spares in slot-table
    /// entries `joining` taking the new roles in order (the platform has put their devices
    /// there). With the platform's queue frozen and the worker idle, as for
    /// [`Self::set_raid_devices`]; on `Ok` the superblocks record the reshape at its start,
    /// and the platform sets its queue limit to [`Self::io_boundary`] before it lets requests
    /// in. On `Err` nothing changed.
    ///
    /// [`Self::set_raid_devices`]: ArrayEngine::set_raid_devices
    pub fn start_reshape<P: Platform>(
        &self,
        p: &P,
        plan: &ReshapePlan,
        joining: &[u32],
    ) -> Result<(), ReshapeError> {
        let again = self.reshape_allowed(plan.new_geometry(), plan.geometry(PlanSide::New).1)?;
        if again != *plan {
            return Err(ReshapeError::Busy);
        }
        let (old, new) = (plan.old().members(), plan.new_geometry().members());
        let roles = old.max(new) - old;
        let spares_ok = joining.len() == roles as usize
            && joining.iter().all(|&slot| self.spares.holds(slot))
            && (joining.iter().enumerate())
                .all(|(i, slot)| !joining.iter().take(i).any(|other| other == slot));
        if !spares_ok {
            return Err(ReshapeError::Members);
        }
        let store = self.members_store();
        for (role, &slot) in (old..).zip(joining) {
            let uuid = self
                .spares
                .iter()
                .find(|&(s, _)| s == slot)
                .map(|(_, uuid)| uuid)
                .ok_or(ReshapeError::Members)?;
            if let Some(member) = store.get(role as usize) {
                member.take_from(&MemberState::new(uuid, slot));
            }
            self.spares.remove(slot);
        }
        // The log is kept in one geometry: its entries (of writes all done: the queue is
        // frozen) are voided, and while the data moves nothing is logged
        // ([`Self::log_suspended`]); a crash then resyncs, as it does anyway.
        self.void_log(p);
        self.shrink_log(
            plan.geometry(PlanSide::Old)
                .1
                .min(plan.geometry(PlanSide::New).1),
        );
        self.reshape.route.install(plan, plan.start_position());
        self.reshape
            .claim
            .store(plan.start_position(), Ordering::SeqCst);
        self.reshape.wanted.store(false, Ordering::SeqCst);
        self.reshape.closing.store(false, Ordering::SeqCst);
        self.reshape
            .stage
            .store(Stage::Running.code(), Ordering::SeqCst);
        self.geometry.reshape_to(&plan.new_geometry());
        if self.write_superblocks(p).is_err() {
            // Nothing was moved: back to the old geometry, the spares back too.
            self.geometry.reshape_to(&plan.old());
            self.reshape
                .stage
                .store(Stage::Idle.code(), Ordering::SeqCst);
            for (role, &slot) in (old..).zip(joining) {
                if let Some(member) = store.get(role as usize) {
                    self.spares.insert(slot, member.uuid());
                    member.reset_missing();
                }
            }
            return Err(ReshapeError::Broken);
        }
        self.reshape.recorded_at.store(p.now_ns(), Ordering::SeqCst);
        p.kick_worker();
        Ok(())
    }

    /// Takes up the reshape the superblocks record at `position` (assembly, before any
    /// request): requests route by `plan` and the worker continues it.
    pub fn resume_reshape(&self, plan: &ReshapePlan, position: u64) {
        self.reshape.route.install(plan, position);
        self.reshape.claim.store(position, Ordering::SeqCst);
        self.reshape.closing.store(false, Ordering::SeqCst);
        self.reshape
            .stage
            .store(Stage::Running.code(), Ordering::SeqCst);
        self.geometry.reshape_to(&plan.new_geometry());
    }

    /// The superblock fields the array's state gives now: its geometry and data offset, and
    /// while a reshape runs the old ones with the reshape's (md's `new_*` fields).
    pub(super) fn superblock_now(&self) -> Superblock {
        let mut sb = self.superblock;
        let now = self.geometry();
        sb.data_size = now.member_data_sectors();
        // Until the end's own superblocks, any written by the way (a member failed, the
        // array marked dirty) still record the reshape: one naming the new geometry alone
        // would make a degraded start trust the log while writes it did not take are in flight.
        let running = match self.reshape.stage() {
            Stage::Running => true,
            Stage::Ending => !self.reshape.closing.load(Ordering::SeqCst),
            Stage::Idle => false,
        };
        match self.reshape.route.plan().filter(|_| running) {
            Some(plan) => {
                let (old, old_offset) = plan.geometry(PlanSide::Old);
                let (new, new_offset) = plan.geometry(PlanSide::New);
                sb.level = old.level();
                sb.chunk_sectors = old.chunk_sectors();
                sb.members = old.members();
                sb.data_offset = old_offset;
                // The unused areas end before either data area (`lend_areas`).
                lend_areas(&mut sb, old_offset.min(new_offset));
                sb.reshape = Some(Reshape {
                    position: self.reshape.claim.load(Ordering::SeqCst),
                    new_level: new.level(),
                    new_chunk_sectors: new.chunk_sectors(),
                    new_members: new.members(),
                    new_data_offset: new_offset,
                    backwards: plan.direction() == Direction::Backwards,
                });
            }
            None => {
                sb.level = now.level();
                sb.chunk_sectors = now.chunk_sectors();
                sb.members = now.members();
                let data = self.data_offset();
                sb.data_offset = data;
                lend_areas(&mut sb, data);
                sb.reshape = None;
            }
        }
        sb
    }

    /// The geometry and data offset that map `state`'s request.
    pub fn map_of(&self, state: &RequestState) -> (Geometry, u64) {
        let side = match state.side() {
            Side::Old => PlanSide::Old,
            Side::New => PlanSide::New,
            Side::Current | Side::Routing => return (self.geometry(), self.data_offset()),
        };
        match self.reshape.route.plan() {
            Some(plan) => plan.geometry(side),
            None => (self.geometry(), self.data_offset()),
        }
    }

    /// Routes request `rq` as its first pass starts. False if it does not go on now: it waits
    /// for the reshape (on the worker's list) or ended (a range no side maps whole, which the
    /// queue limits never make).
    pub(super) fn route_request<P: Platform>(&self, p: &P, rq: P::Request) -> bool {
        let state = p.state(rq);
        // No reshape, or a flush (it maps no sector): the array's geometry. A reshape starts
        // only with no request in the engine (the platform's freeze), so one that saw none
        // ends before one can start: no ordering needed, and no SeqCst store on every
        // request's path.
        if !self.reshaping() || state.op() == Op::Flush {
            state.set_side_relaxed(Side::Current);
            return true;
        }
        // Marked first (SeqCst), then the positions read: a worker that moved the front and
        // then looks sees this request as maybe old.
        state.set_side(Side::Routing);
        match self.route_of(state) {
            Route::Old(_) => state.set_side(Side::Old),
            // Once the reshape ends, the array's geometry and offset are the new ones: such a
            // request is no longer one the end waits for.
            Route::New(_) if self.reshape.stage() == Stage::Ending => state.set_side(Side::Current),
            Route::New(_) => state.set_side(Side::New),
            Route::Wait => {
                state.set_side(Side::Current);
                state.set_idle(Phase::Waiting);
                p.push(WorkList::Deferred, rq);
                self.reshape.counts.waits.fetch_add(1, Ordering::Relaxed);
                self.reshape.wanted.store(true, Ordering::SeqCst);
                p.kick_worker();
                return false;
            }
            Route::Split(_) => {
                state.set_side(Side::Current);
                state.set_idle(Phase::Normal);
                self.end(p, rq, super::platform::Status::IoError);
                return false;
            }
        }
        true
    }

    /// Where the reshape sends `state`'s request now: a read while the data moves reads
    /// sectors moved but not recorded from the old geometry ([`ReshapeRoute::route_read`]);
    /// at the end (the old rows no longer kept for it) it waits as a write does.
    fn route_of(&self, state: &RequestState) -> Route {
        let route = &self.reshape.route;
        if state.op() == Op::Read && self.reshape.stage() == Stage::Running {
            route.route_read(state.start(), state.sectors())
        } else {
            route.route(state.start(), state.sectors())
        }
    }

    /// A request mapped old whose range the reshape moved since (or is moving): it must be
    /// routed again before it is sent again (a read sent on after an error).
    pub(super) fn routed_stale(&self, state: &RequestState) -> bool {
        state.side() == Side::Old && !matches!(self.route_of(state), Route::Old(_))
    }

    /// A waiting request the reshape still holds back (the worker puts it back without
    /// kicking itself: the next step does).
    pub(super) fn reshape_holds(&self, state: &RequestState) -> bool {
        self.reshaping() && state.op() != Op::Flush && self.route_of(state) == Route::Wait
    }

    /// One step of the running reshape, if one runs: a record the writes or the checkpoint
    /// want, the next window, or the end. The worker only.
    pub(super) fn reshape_step<P: Platform>(&self, p: &P) {
        let stage = self.reshape.stage();
        if stage == Stage::Idle {
            return;
        }
        // Held with the rebuild for a caller that needs the worker idle: once no request is
        // in flight. Before, requests waiting for the reshape would keep its freeze from
        // draining them.
        if self.background_held() && !p.any_request(|_| true) {
            return;
        }
        let Some(plan) = self.reshape.route.plan() else {
            return;
        };
        if stage == Stage::Ending {
            // The end waits for writes that were not logged.
            self.finish_reshape(p, &plan);
            return;
        }
        let route = &self.reshape.route;
        let position = route.front();
        if plan.done(position) {
            self.finish_reshape(p, &plan);
            return;
        }
        // Records first, standing still or not: requests wait on the sectors moved since the
        // last record until one says they are moved.
        let due = p
            .now_ns()
            .saturating_sub(self.reshape.recorded_at.load(Ordering::SeqCst))
            >= CHECKPOINT_NS;
        if (due || self.reshape.wanted.load(Ordering::SeqCst))
            && position != route.recorded()
            && !self.record_reshape(p, position)
        {
            return;
        }
        // Degraded it goes on (`reshape_move.rs`); with data lost, or writes refused, not.
        if self.reshape_blocked() {
            return;
        }
        let most = match self.reshape.window.load(Ordering::Relaxed) {
            0 => WINDOW_SECTORS,
            n => n,
        };
        // A step's pause ([`Self::keep_pace`]) lasts a second at most: at a slow pace a step
        // moves no more than a second of the floor allows (member rows, as for a rebuild), or
        // the limit would not hold.
        let data = u64::from(plan.new_geometry().data_members()).max(1);
        let floor_sectors = u64::from(self.rebuild_speed().0).saturating_mul(2);
        let most = most.min(floor_sectors.saturating_mul(data)).max(1);
        let Some(window) = plan.next_window(position, route.recorded(), most) else {
            return;
        };
        let started = p.now_ns();
        if window.record_first && !self.record_reshape(p, position) {
            return;
        }
        let front = match plan.direction() {
            Direction::Forwards => window.end,
            Direction::Backwards => window.start,
        };
        route.move_front(front);
        // Every write that may map the old geometry on the moved side of the new front (the
        // move reads what it wrote), and every request that may map it on the recorded side
        // (a read sent again after an error; a read of sectors moved but not recorded, routed
        // before the record), whose old rows this move may overwrite. Reads of the window
        // itself go on: no move writes over old rows from the recorded position on.
        let recorded = route.recorded();
        let (writes, reads) = match plan.direction() {
            Direction::Forwards => ((0, window.end), (0, recorded)),
            Direction::Backwards => ((window.start, u64::MAX), (recorded, u64::MAX)),
        };
        if !self.drain_window(p, writes, reads)
            || !self.move_window(p, &plan, window.start, window.end)
        {
            // Nothing the restart needs was overwritten (the plan's rule): the window maps old
            // again and is moved again later.
            route.retreat(position);
            self.reshape.counts.retries.fetch_add(1, Ordering::Relaxed);
            let again = if self.reshape.read_failed.load(Ordering::Relaxed) {
                1000
            } else {
                10
            };
            p.kick_worker_after(again);
            return;
        }
        self.reshape.read_failed.store(false, Ordering::Relaxed);
        // Moved whole: reads there map new.
        route.settle(front);
        self.reshape.counts.windows.fetch_add(1, Ordering::Relaxed);
        if plan.done(front) {
            self.finish_reshape(p, &plan);
        } else {
            // The rebuild's speed limits (`set-speed`) hold for the reshape too: every member
            // row it wrote counts.
            let rows = (window.end - window.start).div_ceil(data);
            self.keep_pace(p, started, rows);
        }
        // Requests waiting for the window go on (or ask for the record they need).
        p.kick_worker();
    }

    /// Waits until no write that mapped (or may map) the old geometry in `writes` is in
    /// flight, nor any such request in `reads`; false if some still are after a while (they
    /// may wait for the worker).
    fn drain_window<P: Platform>(&self, p: &P, writes: (u64, u64), reads: (u64, u64)) -> bool {
        self.drain_requests(p, |r: &RequestState| {
            let (lo, hi) = if r.op() == Op::Read { reads } else { writes };
            r.side() != Side::New && overlaps(r, lo, hi) && in_flight(r)
        })
    }

    /// Waits until no read that mapped (or may map) the old geometry in `[lo, hi)` is in
    /// flight; false if some still are after a while (they may wait for the worker).
    fn drain_old_reads<P: Platform>(&self, p: &P, lo: u64, hi: u64) -> bool {
        self.drain_requests(p, |r: &RequestState| {
            r.op() == Op::Read && r.side() != Side::New && overlaps(r, lo, hi) && in_flight(r)
        })
    }

    /// Waits until no write routed while the reshape ran (not logged) is in flight; false if
    /// some still are after a while (they may wait for the worker).
    fn drain_unlogged<P: Platform>(&self, p: &P) -> bool {
        self.drain_requests(p, |r: &RequestState| {
            r.op().is_write() && matches!(r.side(), Side::Old | Side::New) && in_flight(r)
        })
    }

    /// Waits until no request `waited_for` picks is left; false if some still are after
    /// [`DRAIN_PAUSES`] pauses (they may wait for the worker).
    fn drain_requests<P: Platform>(
        &self,
        p: &P,
        waited_for: impl Fn(&RequestState) -> bool,
    ) -> bool {
        let mut pauses = 0;
        while p.any_request(&waited_for) {
            if pauses == DRAIN_PAUSES {
                return false;
            }
            // A held write waits for the worker otherwise.
            self.release_holds(p, true);
            p.pause();
            pauses += 1;
        }
        true
    }

    /// Records `position` in the superblocks, everything written before durable first; false
    /// if no member took it.
    fn record_reshape<P: Platform>(&self, p: &P, position: u64) -> bool {
        // Writes let in by the record write new rows that may lie on the old rows of sectors
        // it covers: reads still reading those wait to end first. New reads there map new
        // (settled), so none comes after.
        let covered = match self.reshape.route.plan().map(|plan| plan.direction()) {
            Some(Direction::Backwards) => (position, u64::MAX),
            _ => (0, position),
        };
        if !self.drain_old_reads(p, covered.0, covered.1) {
            p.kick_worker_after(10);
            return false;
        }
        self.reshape.claim.store(position, Ordering::SeqCst);
        self.flush_all(p);
        if self.write_superblocks(p).is_err() {
            return false;
        }
        self.reshape.route.record(position);
        self.reshape.counts.records.fetch_add(1, Ordering::Relaxed);
        self.reshape.recorded_at.store(p.now_ns(), Ordering::SeqCst);
        self.reshape.wanted.store(false, Ordering::SeqCst);
        true
    }

    /// Every window moved: the superblocks name the new geometry alone (after a flush), then
    /// requests map by it directly and the platform takes the new size.
    fn finish_reshape<P: Platform>(&self, p: &P, plan: &ReshapePlan) {
        if self.reshape.stage() == Stage::Running {
            // The offset first: requests routed from the end on map by the array's own.
            self.data_offset
                .store(plan.geometry(PlanSide::New).1, Ordering::SeqCst);
            self.reshape
                .stage
                .store(Stage::Ending.code(), Ordering::SeqCst);
            // A grow's new room holds whatever the rows held: its parity is resynced (md's
            // resync past the old size), from the stripe the content ends in. After an
            // unclean start, everything the bitmap marks (or everything): writes during the
            // reshape may have left any stripe unsynced.
            let new = plan.new_geometry();
            let room = (new.array_sectors() > plan.content())
                .then(|| new.stripe_member_sector(new.stripe_of(plan.content())));
            let resync = if self.in_sync() { room } else { Some(0) };
            if let Some(from) = resync.filter(|_| self.redundant()) {
                // A bitmap's resync walks only regions marked: the new room's are, on disk
                // before the superblocks say a resync is pending (as for a resize's).
                if let Some(room) = room {
                    self.grown_bits_set(p, room, u64::MAX, true);
                }
                self.resync_from(from);
                self.arm_resync();
            }
        }
        // With a log, the superblocks that take up the log again wait for the writes the
        // reshape did not log (routed while it ran): a crash after them replays the log
        // alone where a member is missing, which would not cover those.
        if self.has_log() && !self.drain_unlogged(p) {
            p.kick_worker_after(10);
            return;
        }
        // Requests map by the new geometry alone from the end on: their writes may land on old
        // rows reads mapped old still read (reads wait meanwhile, as writes do).
        if !self.drain_old_reads(p, 0, u64::MAX) {
            p.kick_worker_after(10);
            return;
        }
        self.reshape.closing.store(true, Ordering::SeqCst);
        self.flush_all(p);
        if self.write_superblocks(p).is_err() {
            // Broken: nothing more is written; the requests still map by the plan.
            return;
        }
        self.reshape
            .stage
            .store(Stage::Idle.code(), Ordering::SeqCst);
        p.reshape_ended();
        p.kick_worker();
    }
}
