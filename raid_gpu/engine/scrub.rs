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

use super::array::{ArrayEngine, ArrayState};
use super::members::{MemberSet, MemberState};
use super::parity::{ParityJob, ParityOp};
use super::platform::{Computed, Op, Platform, RebuildIo, MAX_REBUILD_BATCH};
use super::rebuild::REBUILD_COLUMN_SECTORS;
use super::superblock::RECOVERY_COMPLETE;
use core::ops::Deref;
use core::sync::atomic::{AtomicU64, AtomicU8, Ordering};

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
}

const IDLE: u8 = 0;
const CHECK: u8 = 1;
const REPAIR: u8 = 2;
const RESYNC: u8 = 3;

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
    /// Reads that failed during the running or last scrub (those places were not compared).
    read_errors: AtomicU64,
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
    /// Failed reads of the running or last scrub.
    pub read_errors: u64,
}

impl<M: Deref<Target = [MemberState]>> ArrayEngine<M> {
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
        let code = match mode {
            ScrubMode::Check => CHECK,
            ScrubMode::Repair | ScrubMode::Resync => REPAIR,
        };
        s.mode.store(code, Ordering::SeqCst);
        p.kick_worker();
        Ok(())
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
        if self.in_sync() || !self.redundant() {
            return;
        }
        self.scrub.mode.store(RESYNC, Ordering::SeqCst);
        p.kick_worker();
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

    /// Stops a running scrub where it is (its counts stay; a resync keeps its position).
    pub fn stop_scrub(&self) {
        self.rebuild.rate.stop();
        self.scrub.mode.store(IDLE, Ordering::SeqCst);
    }

    /// Sectors a scrub walks through: the array's (mirrors) or a member's (RAID 5/6).
    fn scrub_total(&self) -> u64 {
        self.geometry.resync_sectors()
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
                self.stop_scrub();
            }
            return;
        }
        let s = &self.scrub;
        let generation = s.generation.load(Ordering::SeqCst);
        let (at, total) = (s.done.load(Ordering::Relaxed), self.scrub_total());
        if at >= total {
            self.stop_scrub();
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
        let done = if self.geometry.level().has_parity() {
            let Some((lo, hi)) = self.window_hull(0, at, end) else {
                return;
            };
            self.in_window(p, lo, hi, || self.scrub_stripes(p, at, end, repair))
        } else {
            self.in_window(p, at, end, || self.scrub_mirror(p, at, end, repair))
        };
        if done.is_none() {
            return;
        }
        if s.generation.load(Ordering::SeqCst) != generation {
            // Started over meanwhile (its counts were reset after this window counted).
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

    /// The resync reached the end: the array is in sync, and its superblocks say so.
    fn finish_resync<P: Platform>(&self, p: &P) {
        self.stop_scrub();
        self.in_sync.store(true, Ordering::SeqCst);
        let _ = self.write_superblocks(p);
    }

    /// With a write-intent bitmap: no region the window `[a, b)` of the walk touches was
    /// dirty when the array started, so the resync has nothing to do there.
    fn resync_skips<P: Platform>(&self, p: &P, a: u64, b: u64) -> bool {
        let Some((regions, states)) = p.bitmap() else {
            return false;
        };
        let range = regions.of_walk(a, b);
        states
            .get(range.start as usize..range.end as usize)
            .is_some_and(|part| part.iter().all(|s| !s.needs_sync()))
    }

    /// The resync passed walk sectors `[a, b)`: the bitmap regions wholly below `b` may lose
    /// their bits from now on.
    fn resync_passed<P: Platform>(&self, p: &P, a: u64, b: u64) {
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

    /// Compares the copies of array sectors `[a, b)` piece by piece (each copy into its own
    /// buffer column, the first that reads being the reference), rewriting the others from it
    /// with `repair`.
    fn scrub_mirror<P: Platform>(&self, p: &P, a: u64, b: u64, repair: bool) {
        let g = &self.geometry;
        let base = self.superblock.data_offset;
        let Ok(pieces) = g.map_read(a, b - a, 0) else {
            return;
        };
        for piece in pieces {
            let copies: [Option<(u32, u64)>; 32] = core::array::from_fn(|c| {
                let c = u32::try_from(c).ok().filter(|&c| c < g.copies())?;
                let copy = g
                    .map_read(piece.array_sector, piece.sectors, c)
                    .ok()?
                    .next()?;
                Some((copy.member, base.saturating_add(copy.member_sector)))
            });
            let mut reference = None;
            let mut unread = MemberSet::EMPTY;
            for (c, &(member, sector)) in (0u32..).zip(copies.iter().flatten()) {
                if p.rebuild_io(Op::Read, member, sector, c, 0, piece.sectors)
                    .is_err()
                {
                    self.scrub.read_errors.fetch_add(1, Ordering::Relaxed);
                    unread = unread.with(c);
                } else if reference.is_none() {
                    reference = Some(c);
                }
            }
            let Some(r) = reference else {
                continue;
            };
            for (c, &(member, sector)) in (0u32..).zip(copies.iter().flatten()) {
                if c == r || unread.contains(c) {
                    continue;
                }
                let differ = p.rebuild_differ(r, c, 0, piece.sectors);
                self.scrub.mismatches.fetch_add(differ, Ordering::Relaxed);
                if repair && differ > 0 {
                    // A failed rewrite is the next read's to find (and the failure rules').
                    let _ = p.rebuild_io(Op::Write, member, sector, r, 0, piece.sectors);
                }
            }
        }
    }

    /// Compares the parity of member rows `[a, b)` (whole stripe rows, at most a buffer
    /// column) with the parity of their data: every member read into its column, each
    /// stripe's P and Q kept in the two spare columns, the parity generated, the two compared;
    /// with `repair` the generated parity is written where it differs.
    fn scrub_stripes<P: Platform>(&self, p: &P, a: u64, b: u64, repair: bool) {
        let g = &self.geometry;
        let n = g.members();
        let (sectors, at) = (b - a, self.superblock.data_offset.saturating_add(a));
        // Every member at once.
        let reads: [RebuildIo; MAX_REBUILD_BATCH] = core::array::from_fn(|m| RebuildIo {
            // Below MAX_REBUILD_BATCH: lossless.
            member: m as u32,
            sector: at,
            column: m as u32,
            sectors,
        });
        let reads = reads.get(..n as usize).unwrap_or(&reads);
        if p.rebuild_batch(Op::Read, reads) != 0 {
            // Not compared: a read error is the failure rules' business on the I/O path.
            self.scrub.read_errors.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let chunk = u64::from(g.chunk_sectors()).max(1);
        let stripe = a / chunk;
        let Some(map) = g.stripe_map(stripe) else {
            return;
        };
        let job = ParityJob {
            op: ParityOp::Generate,
            map,
            head: a - stripe * chunk,
            chunk,
            sectors,
        };
        let (saved_p, saved_q) = (n, n + 1);
        for (map, from, to) in job.stripes() {
            p.rebuild_copy(map.p(), saved_p, from, to - from);
            if let Some(q) = map.q() {
                p.rebuild_copy(q, saved_q, from, to - from);
            }
        }
        let Some(by) = p.rebuild_compute(&job, true) else {
            return;
        };
        let mut differ = Self::parity_differs(p, &job, n, |_, _, _, _| {});
        if let (Computed::Helper(helper), true) = (by, differ > 0) {
            // A helper's parity is never counted or written: where it differs from the
            // members', the kernel generates it again and only its own result counts (a scrub
            // job does not show the helper the members' parity to copy), and a helper that
            // disagrees is caught.
            if p.rebuild_compute(&job, false).is_none() {
                return;
            }
            let ours = Self::parity_differs(p, &job, n, |_, _, _, _| {});
            if ours != differ {
                p.helper_wrong(helper);
            }
            differ = ours;
        }
        self.scrub.mismatches.fetch_add(differ, Ordering::Relaxed);
        if repair && differ > 0 {
            Self::parity_differs(p, &job, n, |member, from, len, differ| {
                if differ > 0 {
                    let sector = at.saturating_add(from);
                    let _ = p.rebuild_io(Op::Write, member, sector, member, from, len);
                }
            });
        }
    }

    /// Sectors of `job`'s stripes whose P or Q (generated in their member's column of the
    /// rebuild buffer) differ from the members' (kept in the spare columns `n` and `n + 1`);
    /// `each(member, offset, sectors, differ)` for every stripe's P and Q.
    fn parity_differs<P: Platform>(
        p: &P,
        job: &ParityJob,
        n: u32,
        mut each: impl FnMut(u32, u64, u64, u64),
    ) -> u64 {
        let (saved_p, saved_q) = (n, n + 1);
        let mut total = 0u64;
        for (map, from, to) in job.stripes() {
            let len = to - from;
            let parity = [(map.p(), saved_p), (map.q().unwrap_or(n), saved_q)];
            for (member, saved) in parity.into_iter().filter(|&(m, _)| m < n) {
                let differ = p.rebuild_differ(member, saved, from, len);
                each(member, from, len, differ);
                total = total.saturating_add(differ);
            }
        }
        total
    }
}
