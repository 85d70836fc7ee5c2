// SPDX-License-Identifier: GPL-2.0

//! Scrub: `check` reads every copy (RAID 1/10) or every stripe's data and parity (RAID 5/6)
//! and counts where they disagree; `repair` also rewrites them: the other copies from the first
//! that reads (md's raid1), the parity from the data (md's raid5/6: data is never changed).
//!
//! The worker runs it one window at a time, as the rebuild (`rebuild.rs`): the window's array
//! range closed to writes and the writes in flight there drained first, so a copy or a parity
//! never differs only because a write is half done; at the rebuild's speed limits. Only an
//! optimal array is scrubbed (a rebuild first); a member failing stops it.
//!
//! The count (md's `mismatch_cnt`) is in 512-byte sectors: each sector of a copy, or of a P or
//! Q, that differs from what it should hold counts once (md counts in 4 KiB units, as 8).
//!
//! # Read errors
//!
//! A window whose reads fail is gone through again a block ([`RETRY_SECTORS`], md's stripe
//! page) at a time, every mode alike (md's `R5_ReadError`, raid1's `fix_sync_read_error`):
//! a member's block that does not read is recovered from the others (another copy; the other
//! members through the parity), written back and read again, and counts as a corrected read
//! error of the member; then the window is compared and repaired as usual. A member whose
//! rewrite, re-read or repair write fails is failed (the worker's rules: never the last copy)
//! and the scrub ends there (a resync holds, as on any degraded array). A block that no member
//! can give ends the scrub too ([`ScrubProgress::stalled`]). Either way the window is not
//! passed: the position stays before it, a resync's bitmap regions keep their bits and the
//! array does not become in sync.
//!
//! # Resync
//!
//! A resync is a repair the array runs by itself while its copies or parity are not known to
//! match: after a crash while it was writing, or when created without `--assume-clean` (md's
//! resync). It differs from a repair in that:
//! - it starts when the array does, from where the superblocks say it stopped (`resync_offset`
//!   in a clean superblock; from 0 after a crash, when writes may have been half done
//!   anywhere), and its position goes into every superblock written;
//! - a degraded array holds it (not ends it) until the rebuild is done;
//! - once it reaches the end the array is in sync: reads spread over the copies again and
//!   RAID 5/6 may update parity by read-modify-write;
//! - below its position the copies match, so reads there spread over them too (above it, one
//!   fixed copy, the one the resync keeps);
//! - a stop pauses it; `repair` goes on from its position; `check` waits for it.

use super::array::{ArrayEngine, ArrayState, Store};
use super::geometry::Piece;
use super::layout::Recovery;
use super::members::MemberSet;
use super::parity::{ParityJob, ParityOp};
use super::platform::{Computed, MemberEvent, Op, Platform, RebuildIo, MAX_REBUILD_BATCH};
use super::rebuild::REBUILD_COLUMN_SECTORS;
use super::superblock::RECOVERY_COMPLETE;
use core::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};

/// What a scrub does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScrubMode {
    /// Counts mismatches only.
    Check,
    /// Counts them and rewrites them.
    Repair,
    /// A repair the array runs by itself to bring its copies or parity in sync (see above).
    Resync,
}

/// Why a scrub could not start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScrubError {
    /// RAID 0: nothing to compare.
    NotRedundant,
    /// The array is not optimal (degraded, rebuilding, broken): rebuild it first.
    NotOptimal,
    /// A replace runs (its copy would miss what a repair rewrites).
    Replacing,
    /// The copies are not in sync yet: a check would count the resync's work.
    ResyncPending,
    /// A reshape runs: the scrub walks one geometry, after it.
    Reshaping,
}

const IDLE: u8 = 0;
const CHECK: u8 = 1;
const REPAIR: u8 = 2;
const RESYNC: u8 = 3;

/// The block a window whose reads failed is read, recovered and rewritten by (4 KiB, md's
/// stripe page): a bad sector costs its block, not the window, and recovering a torn
/// stripe's good sectors from its stale parity is avoided.
pub const RETRY_SECTORS: u64 = 8;

/// Why a scrub window could not be made consistent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Unpassed {
    /// A member failed its rewrite, re-read or repair write: it is failed (or, holding the
    /// last copy of some data, kept with the array broken).
    Failed,
    /// Some data has no readable copy (or its parity could not be computed).
    Unreadable,
}

/// Resync sectors between the superblock updates that record its position while the array is
/// clean (64 MiB of member data on RAID 5/6): a crash while idle goes on from there.
const RESYNC_CHECKPOINT_SECTORS: u64 = 64 * 2048;

/// The scrub's shared state.
#[derive(Debug)]
pub struct ScrubState {
    mode: AtomicU8,
    /// Where the next window starts: array sectors (mirrors) or member sectors (RAID 5/6).
    done: AtomicU64,
    /// Mismatched sectors found by the running or last scrub.
    mismatches: AtomicU64,
    /// Blocks that failed to read during the running or last scrub (each recovered and
    /// rewritten, or the scrub stopped there).
    read_errors: AtomicU64,
    /// The last scrub stopped before its end: a window could not be made consistent.
    stalled: AtomicBool,
    /// Bumped by each start: a step that began before a restart does not move the new one.
    generation: AtomicU64,
}

impl ScrubState {
    pub const fn new() -> Self {
        Self {
            mode: AtomicU8::new(IDLE),
            done: AtomicU64::new(0),
            mismatches: AtomicU64::new(0),
            read_errors: AtomicU64::new(0),
            stalled: AtomicBool::new(false),
            generation: AtomicU64::new(0),
        }
    }
}

impl Default for ScrubState {
    fn default() -> Self {
        Self::new()
    }
}

/// Where a scrub stands, for DETAIL.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScrubProgress {
    /// The scrub running, if one is.
    pub mode: Option<ScrubMode>,
    /// Sectors scrubbed of `total` (array sectors for mirrors, member sectors for RAID 5/6).
    pub done: u64,
    pub total: u64,
    /// Mismatched sectors found by the running or last scrub.
    pub mismatches: u64,
    /// Blocks of the running or last scrub that failed to read ([`RETRY_SECTORS`] each).
    pub read_errors: u64,
    /// The last scrub stopped at `done` before its end: a member failed its rewrite there,
    /// or some data has no readable copy. A resync is then not running (and the array not in
    /// sync) until asked again (`repair`, or the next assembly).
    pub stalled: bool,
}

impl<M: Store> ArrayEngine<M> {
    /// Starts a scrub from the start (a running one starts over in `mode`) and kicks the
    /// worker.
    /// While a resync is pending a check is refused and a repair goes on with the resync.
    pub fn start_scrub<P: Platform>(&self, p: &P, mode: ScrubMode) -> Result<(), ScrubError> {
        if !self.redundant() {
            return Err(ScrubError::NotRedundant);
        }
        if self.state() != ArrayState::Optimal {
            return Err(ScrubError::NotOptimal);
        }
        if self.replacement().is_some() {
            return Err(ScrubError::Replacing);
        }
        if self.reshaping() && mode != ScrubMode::Resync {
            return Err(ScrubError::Reshaping);
        }
        if !self.in_sync() {
            return match mode {
                ScrubMode::Check => Err(ScrubError::ResyncPending),
                ScrubMode::Repair | ScrubMode::Resync => {
                    self.start_resync(p);
                    Ok(())
                }
            };
        }
        if mode == ScrubMode::Resync {
            return Ok(());
        }
        let s = &self.scrub;
        s.generation.fetch_add(1, Ordering::SeqCst);
        s.done.store(0, Ordering::Relaxed);
        s.mismatches.store(0, Ordering::Relaxed);
        s.read_errors.store(0, Ordering::Relaxed);
        s.stalled.store(false, Ordering::Relaxed);
        let code = match mode {
            ScrubMode::Check => CHECK,
            ScrubMode::Repair | ScrubMode::Resync => REPAIR,
        };
        s.mode.store(code, Ordering::SeqCst);
        p.kick_worker();
        Ok(())
    }

    /// The copies are no longer known to agree (a heal, `suspect.rs`): a resync is due from
    /// the start; one pending or running starts over. The mismatches counted so far stay (a
    /// `repair --wait` that waited into the heal reports both). The worker, before
    /// [`Self::start_resync`], with no check or repair running.
    pub(super) fn resync_again(&self) {
        let s = &self.scrub;
        self.in_sync.store(false, Ordering::SeqCst);
        s.generation.fetch_add(1, Ordering::SeqCst);
        s.done.store(0, Ordering::SeqCst);
        s.stalled.store(false, Ordering::Relaxed);
    }

    /// No check, repair or resync runs or is held.
    pub(super) fn scrub_idle(&self) -> bool {
        self.scrub.mode.load(Ordering::SeqCst) == IDLE
    }

    /// The copies or parity are known to agree only below walk sector `sector` (a resize grew
    /// the walk): a resync is due from there. The worker, with no scrub running, before
    /// [`Self::start_resync`].
    pub(super) fn resync_from(&self, sector: u64) {
        let s = &self.scrub;
        self.in_sync.store(false, Ordering::SeqCst);
        s.generation.fetch_add(1, Ordering::SeqCst);
        s.done.store(sector, Ordering::SeqCst);
        s.stalled.store(false, Ordering::Relaxed);
    }

    /// A check or a repair runs (an administrator's: it ends before a heal begins).
    pub(super) fn checking(&self) -> bool {
        matches!(self.scrub.mode.load(Ordering::SeqCst), CHECK | REPAIR)
    }

    /// Where a resync starts (or goes on), for an array not in sync; before it runs.
    pub fn set_resync_start(&self, sector: u64) {
        self.scrub
            .done
            .store(sector.min(self.scrub_total()), Ordering::Relaxed);
    }

    /// Starts (or goes on with) the resync of an array not in sync, from its position; a
    /// degraded array holds it until the rebuild is done. Nothing if the array is in sync.
    pub fn start_resync<P: Platform>(&self, p: &P) {
        if self.arm_resync() {
            p.kick_worker();
        }
    }

    /// [`Self::start_resync`] without the kick: the worker's next run starts it. True if there
    /// is one to run.
    pub(super) fn arm_resync(&self) -> bool {
        if self.in_sync() || !self.redundant() {
            return false;
        }
        self.scrub.stalled.store(false, Ordering::Relaxed);
        self.scrub.mode.store(RESYNC, Ordering::SeqCst);
        true
    }

    /// Where a pending resync goes on, in its own sectors (see
    /// [`super::geometry::Geometry::resync_sectors`]);
    /// [`RECOVERY_COMPLETE`] when the array is in sync.
    pub fn resync_offset(&self) -> u64 {
        if self.in_sync() {
            RECOVERY_COMPLETE
        } else {
            self.scrub.done.load(Ordering::Relaxed)
        }
    }

    /// The copies of array sectors `[start, start + sectors)` are known to match (mirrors).
    pub(super) fn synced(&self, start: u64, sectors: u64) -> bool {
        self.in_sync() || start.saturating_add(sectors) <= self.scrub.done.load(Ordering::Acquire)
    }

    /// md's `idle` (`sync_action`, `graidctl check --stop`): stops a check or a repair where
    /// it is; a resync that runs goes on (md restarts a needed resync at once: an interrupted
    /// one would leave stripes inconsistent until someone asked for a repair). One held by
    /// `auto_resync=0` stays held.
    pub fn idle_scrub(&self) {
        if self.scrub.mode.load(Ordering::SeqCst) != RESYNC {
            self.stop_scrub();
        }
    }

    /// Stops a running scrub where it is (its counts stay; a resync keeps its position).
    pub fn stop_scrub(&self) {
        self.rebuild.rate.stop();
        self.scrub.mode.store(IDLE, Ordering::SeqCst);
    }

    /// Sectors a scrub walks through: the array's (mirrors) or a member's (RAID 5/6).
    fn scrub_total(&self) -> u64 {
        self.geometry().resync_sectors()
    }

    pub fn scrub_progress(&self) -> ScrubProgress {
        let s = &self.scrub;
        ScrubProgress {
            mode: match s.mode.load(Ordering::SeqCst) {
                CHECK => Some(ScrubMode::Check),
                REPAIR => Some(ScrubMode::Repair),
                // Held while the array is degraded: not running (`graidctl wait` would wait
                // for nothing); DETAIL's resync-pending flag still says it is due.
                RESYNC if self.state() == ArrayState::Optimal => Some(ScrubMode::Resync),
                _ => None,
            },
            done: s.done.load(Ordering::Relaxed),
            total: self.scrub_total(),
            mismatches: s.mismatches.load(Ordering::Relaxed),
            read_errors: s.read_errors.load(Ordering::Relaxed),
            stalled: s.stalled.load(Ordering::Relaxed),
        }
    }

    /// One window of the running scrub, if any: compares it, repairs it if asked, moves on;
    /// kicks the worker again while there is more. Stops when the array is not optimal. The
    /// worker only, after the rebuild (which goes first).
    pub(super) fn scrub_step<P: Platform>(&self, p: &P) {
        let mode = match self.scrub.mode.load(Ordering::SeqCst) {
            CHECK => ScrubMode::Check,
            REPAIR => ScrubMode::Repair,
            RESYNC => ScrubMode::Resync,
            _ => return,
        };
        if self.background_held() || self.rebuild_target().is_some() {
            return;
        }
        if self.replacement().is_some() {
            return;
        }
        if self.state() != ArrayState::Optimal {
            // A resync waits for the rebuild (which kicks the worker as it ends).
            if mode != ScrubMode::Resync {
                self.abort_scrub(p, mode);
            }
            return;
        }
        let s = &self.scrub;
        let generation = s.generation.load(Ordering::SeqCst);
        let (at, total) = (s.done.load(Ordering::Relaxed), self.scrub_total());
        if at >= total {
            self.stop_scrub();
            p.scrub_ended(mode, false);
            return;
        }
        let end = at.saturating_add(REBUILD_COLUMN_SECTORS).min(total);
        if mode == ScrubMode::Resync && self.resync_skips(p, at, end) {
            // A write-intent bitmap says nothing there can differ: on to the next window.
            s.done.store(end, Ordering::Release);
            if end >= total {
                self.finish_resync(p);
            }
            p.kick_worker();
            return;
        }
        let repair = mode != ScrubMode::Check;
        let started = p.now_ns();
        let done = if self.geometry().level().has_parity() {
            let Some((lo, hi)) = self.window_hull(0, at, end) else {
                return;
            };
            self.in_window(p, lo, hi, || self.scrub_stripes(p, at, end, repair))
        } else {
            self.in_window(p, at, end, || self.scrub_mirror(p, at, end, repair))
        };
        let Some(done) = done else {
            return;
        };
        if s.generation.load(Ordering::SeqCst) != generation {
            // Started over meanwhile (its counts were reset after this window counted).
            p.kick_worker();
            return;
        }
        if let Err(why) = done {
            // Not consistent: the position stays before the window.
            self.window_unpassed(p, mode, why);
            p.kick_worker();
            return;
        }
        // Release: a read that sees the new position sees the window's rewrites done.
        s.done.store(end, Ordering::Release);
        if mode == ScrubMode::Resync {
            self.resync_passed(p, at, end);
        }
        if end >= total {
            if mode == ScrubMode::Resync {
                self.finish_resync(p);
            } else {
                self.stop_scrub();
                p.scrub_ended(mode, false);
            }
        } else {
            let checkpoint = end / RESYNC_CHECKPOINT_SECTORS != at / RESYNC_CHECKPOINT_SECTORS;
            if mode == ScrubMode::Resync && checkpoint && !self.is_dirty() {
                let _ = self.write_superblocks(p);
            }
            self.keep_pace(p, started, end - at);
        }
        p.kick_worker();
    }

    /// Stops the running scrub before its end, and says so ([`ScrubProgress::stalled`]).
    fn abort_scrub<P: Platform>(&self, p: &P, mode: ScrubMode) {
        self.scrub.stalled.store(true, Ordering::Relaxed);
        self.stop_scrub();
        p.scrub_ended(mode, true);
    }

    /// A window could not be made consistent (`why`). A member it failed is recorded first;
    /// then the scrub stops, except a resync that lost a member: it holds while the array is
    /// degraded, as it always does, and goes on from this window after the rebuild.
    fn window_unpassed<P: Platform>(&self, p: &P, mode: ScrubMode, why: Unpassed) {
        if self.failing.load(Ordering::SeqCst) > 0 {
            // On error the array is broken; the failure path reports it.
            let _ = self.write_superblocks(p);
        }
        if mode != ScrubMode::Resync || why == Unpassed::Unreadable {
            self.abort_scrub(p, mode);
        }
    }

    /// The resync reached the end: the array is in sync, and its superblocks say so.
    fn finish_resync<P: Platform>(&self, p: &P) {
        self.stop_scrub();
        self.heal_done();
        self.in_sync.store(true, Ordering::SeqCst);
        let _ = self.write_superblocks(p);
        p.scrub_ended(ScrubMode::Resync, false);
    }

    /// With a write-intent bitmap: no region the window `[a, b)` of the walk touches was
    /// dirty when the array started (or marked by a heal), so the resync has nothing to do
    /// there. Without one, only a heal skips (`suspect.rs`).
    fn resync_skips<P: Platform>(&self, p: &P, a: u64, b: u64) -> bool {
        let Some((regions, states)) = p.bitmap() else {
            return self.heal_skips(a, b);
        };
        let range = regions.of_walk(a, b);
        states
            .get(range.start as usize..range.end as usize)
            .is_some_and(|part| part.iter().all(|s| !s.needs_sync()))
    }

    /// The resync passed walk sectors `[a, b)`: the bitmap regions wholly below `b` may lose
    /// their bits from now on.
    fn resync_passed<P: Platform>(&self, p: &P, a: u64, b: u64) {
        self.heal_passed(a, b);
        let Some((regions, states)) = p.bitmap() else {
            return;
        };
        let range = regions.of_walk(a, b);
        for r in range {
            if regions.span(r).end <= b {
                if let Some(s) = states.get(r as usize) {
                    s.synced();
                }
            }
        }
    }

    /// Compares the copies of array sectors `[a, b)` piece by piece, each copy read into its
    /// own buffer column, with copy 0 (the one a resync keeps): with `repair` it is written
    /// over the copies that differ. A copy's blocks that do not read are rewritten from
    /// another copy first.
    fn scrub_mirror<P: Platform>(
        &self,
        p: &P,
        a: u64,
        b: u64,
        repair: bool,
    ) -> Result<(), Unpassed> {
        let pieces = self
            .geometry()
            .map_read(a, b - a, 0)
            .map_err(|_| Unpassed::Unreadable)?;
        for piece in pieces {
            let copies = self.copies_of(piece);
            let mut unread = MemberSet::EMPTY;
            for (c, &(member, sector)) in (0u32..).zip(copies.iter().flatten()) {
                if p.rebuild_io(Op::Read, member, sector, c, 0, piece.sectors)
                    .is_err()
                {
                    unread = unread.with(c);
                }
            }
            if !unread.is_empty() {
                self.fix_copies(p, &copies, unread, piece.sectors)?;
            }
            self.compare_copies(p, &copies, piece.sectors, repair)?;
        }
        Ok(())
    }

    /// Each copy of `piece`: its member and first member sector (data offset included).
    fn copies_of(&self, piece: Piece) -> Copies {
        let g = &self.geometry();
        let base = self.data_offset();
        core::array::from_fn(|c| {
            let c = u32::try_from(c).ok().filter(|&c| c < g.copies())?;
            let copy = g
                .map_read(piece.array_sector, piece.sectors, c)
                .ok()?
                .next()?;
            Some((copy.member, base.saturating_add(copy.member_sector)))
        })
    }

    /// The copies in `unread` (their read of the piece failed) read again a block at a time;
    /// a block one does not read is written from a copy that read it and read back (raid1's
    /// `fix_sync_read_error`). Every copy's column then holds what its member holds.
    fn fix_copies<P: Platform>(
        &self,
        p: &P,
        copies: &Copies,
        unread: MemberSet,
        sectors: u64,
    ) -> Result<(), Unpassed> {
        let mut at = 0;
        while at < sectors {
            let len = RETRY_SECTORS.min(sectors - at);
            let mut bad = MemberSet::EMPTY;
            for (c, &(member, sector)) in (0u32..).zip(copies.iter().flatten()) {
                if unread.contains(c)
                    && p.rebuild_io(Op::Read, member, sector.saturating_add(at), c, at, len)
                        .is_err()
                {
                    bad = bad.with(c);
                }
            }
            if !bad.is_empty() {
                self.rewrite_copies(p, copies, bad, at, len)?;
            }
            at += len;
        }
        Ok(())
    }

    /// The block `[at, at + len)` of the piece on the copies in `bad`, which do not read it:
    /// written from the first copy that does, and read back.
    fn rewrite_copies<P: Platform>(
        &self,
        p: &P,
        copies: &Copies,
        bad: MemberSet,
        at: u64,
        len: u64,
    ) -> Result<(), Unpassed> {
        self.scrub
            .read_errors
            .fetch_add(u64::from(bad.len()), Ordering::Relaxed);
        let source = (0..self.geometry().copies())
            .find(|&c| !bad.contains(c))
            .ok_or(Unpassed::Unreadable)?;
        for (c, &(member, sector)) in (0u32..).zip(copies.iter().flatten()) {
            if bad.contains(c) {
                let to = sector.saturating_add(at);
                let fixed = p.rebuild_io(Op::Write, member, to, source, at, len).is_ok()
                    && p.rebuild_io(Op::Read, member, to, c, at, len).is_ok();
                self.block_rewritten(p, member, fixed)?;
            }
        }
        Ok(())
    }

    /// A member's unreadable block was written back (and read again, `fixed`): a corrected
    /// read error; or not: the member is failed.
    fn block_rewritten<P: Platform>(
        &self,
        p: &P,
        member: u32,
        fixed: bool,
    ) -> Result<(), Unpassed> {
        if fixed {
            self.read_error_repaired(p, member);
            Ok(())
        } else {
            self.try_fail(p, member, MemberEvent::Failed);
            Err(Unpassed::Failed)
        }
    }

    /// Counts the sectors in which each copy's column differs from copy 0's; with `repair`
    /// writes copy 0 over a copy that differs (a member whose write fails is failed).
    fn compare_copies<P: Platform>(
        &self,
        p: &P,
        copies: &Copies,
        sectors: u64,
        repair: bool,
    ) -> Result<(), Unpassed> {
        for (c, &(member, sector)) in (0u32..).zip(copies.iter().flatten()).skip(1) {
            let differ = p.rebuild_differ(0, c, 0, sectors);
            self.scrub.mismatches.fetch_add(differ, Ordering::Relaxed);
            if repair
                && differ > 0
                && p.rebuild_io(Op::Write, member, sector, 0, 0, sectors)
                    .is_err()
            {
                self.try_fail(p, member, MemberEvent::Failed);
                return Err(Unpassed::Failed);
            }
        }
        Ok(())
    }

    /// Compares the parity of member rows `[a, b)` (whole stripe rows, at most a buffer
    /// column) with the parity of their data (see [`Self::scrub_rows`]). If a read fails, the
    /// rows go again a block at a time, each block with the members whose read of it fails
    /// recovered from the others.
    fn scrub_stripes<P: Platform>(
        &self,
        p: &P,
        a: u64,
        b: u64,
        repair: bool,
    ) -> Result<(), Unpassed> {
        if self.read_rows(p, a, b).is_empty() {
            return self.scrub_rows(p, a, b, MemberSet::EMPTY, repair);
        }
        let mut x = a;
        while x < b {
            let y = x.saturating_add(RETRY_SECTORS).min(b);
            let lost = self.read_rows(p, x, y);
            self.scrub_rows(p, x, y, lost, repair)?;
            x = y;
        }
        Ok(())
    }

    /// Reads member rows `[a, b)` of every member into its buffer column, all at once; the
    /// members whose read failed.
    fn read_rows<P: Platform>(&self, p: &P, a: u64, b: u64) -> MemberSet {
        let n = self.geometry().members();
        let at = self.data_offset().saturating_add(a);
        let reads: [RebuildIo; MAX_REBUILD_BATCH] = core::array::from_fn(|m| RebuildIo {
            // Below MAX_REBUILD_BATCH: lossless.
            member: m as u32,
            sector: at,
            column: m as u32,
            sectors: b - a,
        });
        let reads = reads.get(..n as usize).unwrap_or(&reads);
        let failed = p.rebuild_batch(Op::Read, reads);
        (0..n)
            .filter(|&m| failed & 1u64.checked_shl(m).unwrap_or(0) != 0)
            .fold(MemberSet::EMPTY, MemberSet::with)
    }

    /// Rows `[a, b)` read into the buffer, the members in `lost` failing: those recovered from
    /// the others; each stripe's P and Q kept in the two spare columns and generated from the
    /// data; the lost members' columns written back and read again; the parity compared, and
    /// with `repair` written where it differs (md's raid5/6 repair: data is never changed).
    fn scrub_rows<P: Platform>(
        &self,
        p: &P,
        a: u64,
        b: u64,
        lost: MemberSet,
        repair: bool,
    ) -> Result<(), Unpassed> {
        let job = self.rows_job(a, b).ok_or(Unpassed::Unreadable)?;
        if !lost.is_empty() {
            self.recover_rows(p, &job, lost)?;
        }
        let n = self.geometry().members();
        for (map, from, to) in job.stripes() {
            p.rebuild_copy(map.p(), n, from, to - from);
            if let Some(q) = map.q() {
                p.rebuild_copy(q, n + 1, from, to - from);
            }
        }
        // Where a lost member's column is rewritten, nothing of it comes from the helper (a
        // lost P or Q is written back as generated here).
        let by = p
            .rebuild_compute(&job, lost.is_empty())
            .ok_or(Unpassed::Unreadable)?;
        let at = self.data_offset().saturating_add(a);
        for m in lost.iter() {
            let fixed = p.rebuild_io(Op::Write, m, at, m, 0, b - a).is_ok()
                && p.rebuild_io(Op::Read, m, at, m, 0, b - a).is_ok();
            self.block_rewritten(p, m, fixed)?;
        }
        self.compare_parity(p, &job, at, lost, repair, by)
    }

    /// A job generating the parity of member rows `[a, b)` in the rebuild buffer.
    fn rows_job(&self, a: u64, b: u64) -> Option<ParityJob> {
        let g = &self.geometry();
        let chunk = u64::from(g.chunk_sectors()).max(1);
        let stripe = a / chunk;
        Some(ParityJob {
            op: ParityOp::Generate,
            map: g.stripe_map(stripe)?,
            head: a - stripe * chunk,
            chunk,
            sectors: b - a,
        })
    }

    /// Recovers the columns of the members in `lost` over `job`'s rows from the others.
    fn recover_rows<P: Platform>(
        &self,
        p: &P,
        job: &ParityJob,
        lost: MemberSet,
    ) -> Result<(), Unpassed> {
        self.scrub
            .read_errors
            .fetch_add(u64::from(lost.len()), Ordering::Relaxed);
        let recoverable = job
            .stripes()
            .all(|(map, _, _)| map.recovery(lost) != Recovery::Lost);
        let recover = ParityJob {
            op: ParityOp::Recover { lost },
            ..*job
        };
        if recoverable && p.rebuild_compute(&recover, false).is_some() {
            Ok(())
        } else {
            Err(Unpassed::Unreadable)
        }
    }

    /// Compares each stripe's P and Q (but the lost members', rewritten already) kept in the
    /// spare columns with the generated ones, counting the sectors that differ; with `repair`
    /// writes the generated parity where it differs (a member whose write fails is failed).
    fn compare_parity<P: Platform>(
        &self,
        p: &P,
        job: &ParityJob,
        at: u64,
        lost: MemberSet,
        repair: bool,
        by: Computed,
    ) -> Result<(), Unpassed> {
        let n = self.geometry().members();
        let mut differ = Self::parity_differs(p, job, n, lost, |_, _, _, _| {});
        if let (Computed::Helper(helper), true) = (by, differ > 0) {
            // A helper's parity is never counted or written: where it differs from the
            // members', the kernel generates it again and only its own result counts (a scrub
            // job does not show the helper the members' parity to copy), and a helper that
            // disagrees is caught.
            if p.rebuild_compute(job, false).is_none() {
                return Err(Unpassed::Unreadable);
            }
            let ours = Self::parity_differs(p, job, n, lost, |_, _, _, _| {});
            if ours != differ {
                p.helper_wrong(helper);
            }
            differ = ours;
        }
        self.scrub.mismatches.fetch_add(differ, Ordering::Relaxed);
        if !repair || differ == 0 {
            return Ok(());
        }
        let mut failed = None;
        Self::parity_differs(p, job, n, lost, |member, from, len, differ| {
            if differ > 0
                && failed.is_none()
                && p.rebuild_io(
                    Op::Write,
                    member,
                    at.saturating_add(from),
                    member,
                    from,
                    len,
                )
                .is_err()
            {
                failed = Some(member);
            }
        });
        match failed {
            Some(member) => {
                self.try_fail(p, member, MemberEvent::Failed);
                Err(Unpassed::Failed)
            }
            None => Ok(()),
        }
    }

    /// Sectors of `job`'s stripes whose P or Q (generated in their member's column of the
    /// rebuild buffer) differ from the members' (kept in the spare columns `n` and `n + 1`),
    /// but the lost members' (rewritten already); `each(member, offset, sectors, differ)` for
    /// every stripe's P and Q.
    fn parity_differs<P: Platform>(
        p: &P,
        job: &ParityJob,
        n: u32,
        lost: MemberSet,
        mut each: impl FnMut(u32, u64, u64, u64),
    ) -> u64 {
        let mut total = 0u64;
        for (map, from, to) in job.stripes() {
            let len = to - from;
            let parity = [(map.p(), n), (map.q().unwrap_or(n), n + 1)];
            for (member, saved) in parity
                .into_iter()
                .filter(|&(m, _)| m < n && !lost.contains(m))
            {
                let differ = p.rebuild_differ(member, saved, from, len);
                each(member, from, len, differ);
                total = total.saturating_add(differ);
            }
        }
        total
    }
}

/// Each copy of a mirror piece: its member and first member sector (see
/// `ArrayEngine::copies_of`).
type Copies = [Option<(u32, u64)>; 32];
