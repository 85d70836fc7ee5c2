// SPDX-License-Identifier: GPL-2.0

//! The rebuild of a member (RAID 1, 10, 5, 6): the worker writes the member's data, copied
//! from the other copies or recomputed from the other members and parity, one window at a
//! time, while the array serves I/O.
//!
//! # Why it is correct under writes
//!
//! - Writes go to the member being rebuilt everywhere, below and above its recovery offset
//!   (`ArrayEngine::writable`; the stripe engine writes its column too); reads never come from
//!   it until it is in sync (`usable`), and it never counts as a copy or as parity's input.
//! - A window's copy must not interleave with a write to the same data (the copy could read
//!   the old data and write it over the new). So the worker first closes the window's array
//!   range to new writes (they wait in the worker's list, as during a repair), then waits for
//!   the writes in flight there, then copies, then opens it again. Writes elsewhere go on.
//! - The recovery offset is checkpointed in the superblocks every [`CHECKPOINT_SECTORS`] and
//!   at the end; a superblock write is `PREFLUSH`, so the copied data is durable before the
//!   offset that claims it. A stop or crash resumes from the last checkpoint.

use super::array::{ArrayEngine, Store};
use super::geometry::Piece;
use super::layout::Role;
use super::members::{MemberSet, MemberState};
use super::parity::{ParityJob, ParityOp};
use super::platform::{Computed, MemberEvent, Op, Platform, RebuildIo, MAX_REBUILD_BATCH};
use super::rate::RateMeter;
use super::request::{Phase, RequestState};
use super::stripe::Step;
use super::superblock::RECOVERY_COMPLETE;
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

/// Sectors of each column of the rebuild buffer (128 KiB).
pub const REBUILD_COLUMN_SECTORS: u64 = 256;

/// Member sectors one mirror rebuild step copies (1 MiB), through column 0 a column at a
/// time: small enough that writes to the window wait briefly, large enough to stream. A parity
/// rebuild step covers one buffer column of every member.
pub const MIRROR_WINDOW_SECTORS: u64 = 2048;

/// Member sectors between recovery-offset checkpoints (64 MiB).
pub const CHECKPOINT_SECTORS: u64 = 64 * 2048;

/// Pauses the worker waits for the writes in a window to drain before it gives the step up
/// (and handles its own list, which such a write may be waiting on) and tries again.
const DRAIN_PAUSES: u32 = 200;

/// The rebuild's speed floor by default, KiB/s: what it keeps to while the array serves
/// other I/O (md's `speed_limit_min`, 1 MB/s there, is far too low for NVMe).
pub const DEFAULT_MIN_KIBS: u32 = 100 * 1024;

/// The rebuild's speed cap by default, KiB/s, while the array is otherwise idle; 0: none.
pub const DEFAULT_MAX_KIBS: u32 = 0;

/// The longest a step sleeps to keep to its speed (the worker has other duties).
const MAX_SLEEP_MS: u64 = 1000;

/// No window: `lo` above any sector, `hi` below.
const NO_LO: u64 = u64::MAX;

/// Which columns check a helper's recovery (`ArrayEngine::check_columns`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Check {
    /// The surviving P and Q.
    Parity,
    /// The lost data.
    Lost,
}

/// What `ArrayEngine::check_columns` does with each pair of a member's column and a spare.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pair {
    /// The member's column to the spare.
    Keep,
    /// The spare back to the member's column.
    Restore,
    /// Count the sectors that differ.
    Compare,
}

/// Why a window could not be rebuilt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum StepError {
    /// Some data has no readable copy (or source).
    Unreadable,
    /// Writing the member being rebuilt failed.
    TargetWrite,
}

/// Pieces a mirror rebuild or replace step reads, then writes, at once: a window's worth of
/// buffer columns (fewer where the buffer has fewer).
const MIRROR_BATCH: usize = (MIRROR_WINDOW_SECTORS / REBUILD_COLUMN_SECTORS) as usize;

/// The first `n` entries of a batch.
fn batch(ios: &[RebuildIo], n: usize) -> &[RebuildIo] {
    ios.get(..n).unwrap_or(ios)
}

/// Bit `i` of a [`RebuildBuffer::rebuild_batch`] result.
pub(super) fn bit(failed: u64, i: usize) -> bool {
    u32::try_from(i)
        .ok()
        .and_then(|i| 1u64.checked_shl(i))
        .is_some_and(|b| failed & b != 0)
}

/// The rebuild's shared state: the array range closed to writes, and progress.
#[derive(Debug)]
pub struct RebuildState {
    /// Array sectors `[lo, hi)` no new write may enter (`lo > hi`: none).
    window_lo: AtomicU64,
    window_hi: AtomicU64,
    /// Member sectors copied since the last checkpoint.
    since_checkpoint: AtomicU64,
    /// Member sectors copied since the array started (for the rate).
    copied: AtomicU64,
    /// Member sectors a bitmap-guided rebuild skipped since the array started.
    skipped: AtomicU64,
    /// The rebuild cannot go on: some data has no readable copy.
    stalled: AtomicBool,
    /// Members re-added with the bitmap's help: their rebuild skips windows whose regions
    /// have no bit set (`write_intent.rs`), as bits.
    partial: AtomicU64,
    /// Holds on the rebuild (see [`ArrayEngine::hold_rebuild`]): no step runs while any.
    holds: AtomicU32,
    /// Speed floor (under other I/O) and cap (idle; 0: none), KiB/s.
    min_kibs: AtomicU32,
    max_kibs: AtomicU32,
    /// The members' completed I/O count at the last step: other I/O since shows as a change.
    foreground: AtomicU64,
    /// Windows given up because the writes there did not drain in time, and those of them
    /// where one of those writes was waiting for log space.
    window_retries: AtomicU64,
    window_log_retries: AtomicU64,
    /// The speed of the rebuild or scrub running.
    pub(super) rate: RateMeter,
}

impl RebuildState {
    pub const fn new() -> Self {
        Self {
            window_lo: AtomicU64::new(NO_LO),
            window_hi: AtomicU64::new(0),
            since_checkpoint: AtomicU64::new(0),
            copied: AtomicU64::new(0),
            skipped: AtomicU64::new(0),
            stalled: AtomicBool::new(false),
            partial: AtomicU64::new(0),
            holds: AtomicU32::new(0),
            min_kibs: AtomicU32::new(DEFAULT_MIN_KIBS),
            max_kibs: AtomicU32::new(DEFAULT_MAX_KIBS),
            foreground: AtomicU64::new(0),
            window_retries: AtomicU64::new(0),
            window_log_retries: AtomicU64::new(0),
            rate: RateMeter::new(),
        }
    }

    /// A write to `sectors` sectors at array sector `start` must wait for the window.
    /// SeqCst, after the request counted itself as writing: either the worker sees the write
    /// in flight and waits for it, or this sees the window.
    pub(super) fn blocks(&self, start: u64, sectors: u64) -> bool {
        let lo = self.window_lo.load(Ordering::SeqCst);
        let hi = self.window_hi.load(Ordering::SeqCst);
        lo < hi && start < hi && lo < start.saturating_add(sectors)
    }

    fn close(&self, lo: u64, hi: u64) {
        // `hi` first: a reader between the stores sees no window, and is in flight already.
        self.window_hi.store(hi, Ordering::SeqCst);
        self.window_lo.store(lo, Ordering::SeqCst);
    }

    fn open(&self) {
        self.window_lo.store(NO_LO, Ordering::SeqCst);
        self.window_hi.store(0, Ordering::SeqCst);
    }
}

impl Default for RebuildState {
    fn default() -> Self {
        Self::new()
    }
}

/// A write of `r` that may still reach the members: a pass out, or (RAID 5/6) anywhere in
/// the stripe engine, where it holds data between passes.
fn writing(r: &RequestState) -> bool {
    r.op().is_write() && (r.pending() > 0 || r.phase() == Phase::Stripe)
}

impl<M: Store> ArrayEngine<M> {
    /// Stops rebuild (and scrub) steps from starting until [`Self::release_rebuild`]: for a caller that
    /// needs the worker idle (it flushes the worker after this), and for good when the array
    /// stops. Any context.
    pub fn hold_rebuild(&self) {
        self.rebuild.holds.fetch_add(1, Ordering::SeqCst);
    }

    /// Rebuild and scrub steps are held (see [`Self::hold_rebuild`]).
    pub(super) fn background_held(&self) -> bool {
        self.rebuild.holds.load(Ordering::SeqCst) > 0
    }

    /// Ends a [`Self::hold_rebuild`] and lets the rebuild go on.
    pub fn release_rebuild<P: Platform>(&self, p: &P) {
        let _ = self
            .rebuild
            .holds
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
        p.kick_worker();
    }

    /// A new device was added as member `member`: a rebuild stalled before may go on with
    /// it; `partial`: it only needs the regions the bitmap marks (a re-add).
    pub(super) fn restart_rebuild(&self, member: u32, partial: bool) {
        self.rebuild.stalled.store(false, Ordering::Relaxed);
        let bit = 1u64.checked_shl(member).unwrap_or(0);
        if partial {
            self.rebuild.partial.fetch_or(bit, Ordering::SeqCst);
        } else {
            self.rebuild.partial.fetch_and(!bit, Ordering::SeqCst);
        }
    }

    /// Member `member`'s rebuild is guided by the bitmap (see [`Self::restart_rebuild`]).
    pub(super) fn rebuild_partial(&self, member: u32) -> bool {
        let bit = 1u64.checked_shl(member).unwrap_or(0);
        self.rebuild.partial.load(Ordering::SeqCst) & bit != 0
    }

    /// Sets the rebuild's speed floor (kept to while the array serves other I/O; at least 1)
    /// and cap (while it is otherwise idle; 0: none), in KiB/s. `false` (nothing changed) for
    /// a floor of 0 or above the cap.
    pub fn set_rebuild_speed(&self, min_kibs: u32, max_kibs: u32) -> bool {
        if min_kibs == 0 || (max_kibs != 0 && min_kibs > max_kibs) {
            return false;
        }
        self.rebuild.min_kibs.store(min_kibs, Ordering::Relaxed);
        self.rebuild.max_kibs.store(max_kibs, Ordering::Relaxed);
        true
    }

    /// The rebuild's speed floor and cap, KiB/s (see [`Self::set_rebuild_speed`]).
    pub fn rebuild_speed(&self) -> (u32, u32) {
        (
            self.rebuild.min_kibs.load(Ordering::Relaxed),
            self.rebuild.max_kibs.load(Ordering::Relaxed),
        )
    }

    /// Kicks the worker if a member waits for its rebuild, or a reshape to go on (an array
    /// started with one).
    pub fn resume_rebuild<P: Platform>(&self, p: &P) {
        // A reshape taken up at assembly goes on the same way.
        if self.rebuild_target().is_some() || self.reshaping() {
            p.kick_worker();
        }
    }

    /// Member sectors rebuilt since the array started.
    pub fn rebuilt_sectors(&self) -> u64 {
        self.rebuild.copied.load(Ordering::Relaxed)
    }

    /// Rebuild, replace and scrub windows given up (and tried again) because the writes there
    /// did not drain in time.
    pub fn window_retries(&self) -> u64 {
        self.rebuild.window_retries.load(Ordering::Relaxed)
    }

    /// Of [`Self::window_retries`], those where a write waiting for log space was among the
    /// writes that did not drain.
    pub fn window_log_retries(&self) -> u64 {
        self.rebuild.window_log_retries.load(Ordering::Relaxed)
    }

    /// Member sectors re-added members did not need rebuilt (the bitmap showed no write
    /// there while they were away), since the array started.
    pub fn rebuild_skipped_sectors(&self) -> u64 {
        self.rebuild.skipped.load(Ordering::Relaxed)
    }

    /// The speed of the rebuild or check/repair running, KiB/s, over the last second or so
    /// (0: none runs, or it has not run a second yet).
    pub fn background_kibs(&self) -> u32 {
        self.rebuild.rate.kibs()
    }

    /// The rebuild stopped on data with no readable copy.
    pub fn rebuild_stalled(&self) -> bool {
        self.rebuild.stalled.load(Ordering::Relaxed)
    }

    /// The member being rebuilt (the first one not in sync), if any.
    pub fn rebuild_target(&self) -> Option<u32> {
        (0u32..)
            .zip(self.members())
            .find(|(_, m)| m.is_recovering())
            .map(|(i, _)| i)
    }

    /// Member sectors one step rebuilds.
    fn window_sectors(&self) -> u64 {
        if self.geometry().level().has_parity() {
            REBUILD_COLUMN_SECTORS
        } else {
            MIRROR_WINDOW_SECTORS
        }
    }

    /// One step of the rebuild, if one is due: rebuilds the next window of the member being
    /// rebuilt and moves its recovery offset. Kicks the worker again while there is more to
    /// do. The worker only (it waits for I/O).
    pub(super) fn rebuild_step<P: Platform>(&self, p: &P) {
        if self.background_held() || self.rebuild_stalled() || !self.redundant() {
            return;
        }
        let Some(target) = self.rebuild_target() else {
            self.replace_step(p);
            return;
        };
        let Some(state) = self.members().get(target as usize) else {
            return;
        };
        let offset = state.recovery_offset();
        let member_end = self.geometry().member_data_sectors();
        if offset >= member_end {
            self.finish_rebuild(p, target, state);
            return;
        }
        let end = offset.saturating_add(self.window_sectors()).min(member_end);
        if self.rebuild_may_skip(p, target, offset, end) {
            // A re-added member already holds what was not written while it was away.
            state.set_recovery_offset(end);
            self.rebuild
                .skipped
                .fetch_add(end - offset, Ordering::Relaxed);
            p.kick_worker();
            return;
        }
        let Some((lo, hi)) = self.window_hull(target, offset, end) else {
            // Nothing of the array's data there (the tail of an odd RAID 10).
            state.set_recovery_offset(end);
            p.kick_worker();
            return;
        };
        let started = p.now_ns();
        let Some(rebuilt) = self.in_window(p, lo, hi, || {
            if self.geometry().level().has_parity() {
                self.rebuild_stripes(p, target, target, offset, end)
            } else {
                self.copy_mirror(p, target, target, offset, end)
            }
        }) else {
            return;
        };
        match rebuilt {
            Ok(()) => {
                state.set_recovery_offset(end);
                let done = end - offset;
                self.rebuild.copied.fetch_add(done, Ordering::Relaxed);
                let since = self
                    .rebuild
                    .since_checkpoint
                    .fetch_add(done, Ordering::Relaxed)
                    + done;
                if end >= member_end {
                    self.finish_rebuild(p, target, state);
                } else {
                    if since >= CHECKPOINT_SECTORS {
                        self.rebuild.since_checkpoint.store(0, Ordering::Relaxed);
                        // On error the array is broken; the failure path reports it.
                        let _ = self.write_superblocks(p);
                    }
                    self.keep_pace(p, started, done);
                }
            }
            Err(StepError::TargetWrite) => {
                // The new member fails, nothing else: it held no data anyone reads.
                self.try_fail(p, target, MemberEvent::Failed);
                let _ = self.write_superblocks(p);
            }
            Err(StepError::Unreadable) => {
                self.rebuild.stalled.store(true, Ordering::Relaxed);
                p.member_event(target, MemberEvent::RebuildStalled);
            }
        }
        // Writes that waited for the window go now; the next step follows.
        p.kick_worker();
    }

    /// Runs `f` with the array range `[lo, hi)` closed to writes and none in flight there;
    /// `None` (with the worker kicked) if the writes there did not drain in time: one may be
    /// waiting for the worker itself, which runs its list before trying again.
    pub(super) fn in_window<P: Platform, R>(
        &self,
        p: &P,
        lo: u64,
        hi: u64,
        f: impl FnOnce() -> R,
    ) -> Option<R> {
        self.rebuild.close(lo, hi);
        let overlaps = |r: &RequestState| {
            writing(r) && r.start() < hi && lo < r.start().saturating_add(r.sectors())
        };
        let mut pauses = 0;
        while p.any_request(overlaps) {
            if pauses == DRAIN_PAUSES {
                self.rebuild.open();
                self.rebuild.window_retries.fetch_add(1, Ordering::Relaxed);
                if p.any_request(|r| overlaps(r) && r.stripe().step() == Step::LogWait) {
                    self.rebuild
                        .window_log_retries
                        .fetch_add(1, Ordering::Relaxed);
                }
                p.kick_worker();
                return None;
            }
            // A held write waits for the worker otherwise, and so does a write waiting for log
            // space (it takes part in the drain: once it has its entry it writes the window's
            // stripes): the log's epochs move on here too.
            self.release_holds(p, true);
            self.log_step(p);
            p.pause();
            pauses += 1;
        }
        let result = f();
        self.rebuild.open();
        Some(result)
    }

    /// Sleeps as long as the speed limit asks after a step that rebuilt `sectors` member
    /// sectors since `started`: the floor while the array served other I/O since the last
    /// step (foreground I/O keeps priority; the rebuild still moves), the cap otherwise.
    pub(super) fn keep_pace<P: Platform>(&self, p: &P, started: u64, sectors: u64) {
        self.rebuild.rate.add(started, p.now_ns(), sectors);
        let foreground = self.members().iter().fold(0u64, |n, m| {
            let s = m.stats();
            n.wrapping_add(s.reads).wrapping_add(s.writes)
        });
        let busy = self.rebuild.foreground.swap(foreground, Ordering::Relaxed) != foreground;
        let (min, max) = self.rebuild_speed();
        let kibs = u64::from(if busy { min } else { max });
        if kibs == 0 {
            return;
        }
        // sectors / 2 KiB at `kibs` KiB/s, in nanoseconds.
        let due = sectors.saturating_mul(500_000_000) / kibs;
        let spent = p.now_ns().saturating_sub(started);
        let ms = due
            .saturating_sub(spent)
            .div_ceil(1_000_000)
            .min(MAX_SLEEP_MS);
        if ms > 0 {
            // Below MAX_SLEEP_MS: lossless.
            p.sleep_ms(ms as u32);
        }
    }

    /// The array range `[lo, hi)` whose data member `target` holds (or protects, as parity)
    /// in its sectors `offset..end`.
    pub(super) fn window_hull(&self, target: u32, offset: u64, end: u64) -> Option<(u64, u64)> {
        let g = &self.geometry();
        if g.level().has_parity() {
            let chunk = u64::from(g.chunk_sectors()).max(1);
            let (first, last) = (offset / chunk, end.div_ceil(chunk));
            let data = g.stripe_data_sectors();
            let hi = last.saturating_mul(data).min(g.array_sectors());
            return Some((first.saturating_mul(data), hi));
        }
        let mut hull: Option<(u64, u64)> = None;
        let mut at = offset;
        while at < end {
            let Some(piece) = g.mirror_piece(target, at, end - at) else {
                break;
            };
            let piece_end = piece.array_sector.saturating_add(piece.sectors);
            hull = Some(match hull {
                Some((lo, hi)) => (lo.min(piece.array_sector), hi.max(piece_end)),
                None => (piece.array_sector, piece_end),
            });
            at = at.saturating_add(piece.sectors);
        }
        hull
    }

    /// Copies the data of mirror member `target`'s sectors `offset..end` from the other
    /// copies to member `dest` (`target` itself, or its replacement), a batch of buffer
    /// columns at a time: every piece's read at once (from whichever copies), then every write.
    fn copy_mirror<P: Platform>(
        &self,
        p: &P,
        target: u32,
        dest: u32,
        offset: u64,
        end: u64,
    ) -> Result<(), StepError> {
        let base = self.data_offset();
        let columns = self.batch_columns();
        let mut at = offset;
        while at < end {
            let mut pieces: [Option<Piece>; MIRROR_BATCH] = [None; MIRROR_BATCH];
            let mut reads = [RebuildIo::default(); MIRROR_BATCH];
            let mut writes = reads;
            let mut n = 0;
            while n < columns && at < end {
                let limit = (end - at).min(REBUILD_COLUMN_SECTORS);
                let Some(piece) = self.geometry().mirror_piece(target, at, limit) else {
                    // Nothing of the array's data from here on (the tail of an odd RAID 10).
                    at = end;
                    break;
                };
                let source = self
                    .healthy_copy(piece, MemberSet::of(target))
                    .ok_or(StepError::Unreadable)?;
                // Below MIRROR_BATCH: lossless.
                let column = n as u32;
                let (Some(slot), Some(read), Some(write)) =
                    (pieces.get_mut(n), reads.get_mut(n), writes.get_mut(n))
                else {
                    break;
                };
                *slot = Some(piece);
                *read = RebuildIo {
                    member: source.member,
                    sector: base.saturating_add(source.member_sector),
                    column,
                    sectors: piece.sectors,
                };
                *write = RebuildIo {
                    member: dest,
                    sector: base.saturating_add(piece.member_sector),
                    ..*read
                };
                n += 1;
                at = at.saturating_add(piece.sectors);
            }
            let (reads, writes) = (batch(&reads, n), batch(&writes, n));
            let failed = p.rebuild_batch(Op::Read, reads);
            for ((i, read), piece) in reads.iter().enumerate().zip(pieces) {
                if let (true, Some(piece)) = (bit(failed, i), piece) {
                    // Another copy may read; the source's own error is not acted on here.
                    self.read_other_copy(p, target, piece, read)?;
                }
            }
            if p.rebuild_batch(Op::Write, writes) != 0 {
                return Err(StepError::TargetWrite);
            }
        }
        Ok(())
    }

    /// Reads `piece` of mirror member `target` into `failed.column` from a copy on neither
    /// `target` nor the member `failed` read from.
    fn read_other_copy<P: Platform>(
        &self,
        p: &P,
        target: u32,
        piece: Piece,
        failed: &RebuildIo,
    ) -> Result<(), StepError> {
        let base = self.data_offset();
        let mut avoid = MemberSet::of(target).with(failed.member);
        loop {
            let source = self
                .healthy_copy(piece, avoid)
                .ok_or(StepError::Unreadable)?;
            let from = base.saturating_add(source.member_sector);
            if p.rebuild_io(
                Op::Read,
                source.member,
                from,
                failed.column,
                0,
                piece.sectors,
            )
            .is_ok()
            {
                return Ok(());
            }
            avoid = avoid.with(source.member);
        }
    }

    /// Buffer columns a batch of a mirror rebuild or replace uses.
    fn batch_columns(&self) -> usize {
        (self.geometry().members() as usize)
            .saturating_add(2)
            .min(MIRROR_BATCH)
    }

    /// Recomputes RAID 5/6 member `target`'s sectors `offset..end` (at most a buffer column)
    /// from the other members: each into its own column, the lost data recovered and the
    /// parity generated stripe by stripe, then the target's column written to member `dest`
    /// (`target` itself, or its replacement).
    fn rebuild_stripes<P: Platform>(
        &self,
        p: &P,
        target: u32,
        dest: u32,
        offset: u64,
        end: u64,
    ) -> Result<(), StepError> {
        let g = &self.geometry();
        let sectors = end - offset;
        let at = self.data_offset().saturating_add(offset);
        let mut lost = MemberSet::of(target);
        let mut reads = [RebuildIo::default(); MAX_REBUILD_BATCH];
        let mut n = 0;
        for m in 0..g.members() {
            if m == target || !self.usable(m, MemberSet::EMPTY) {
                lost = lost.with(m);
                continue;
            }
            if let Some(read) = reads.get_mut(n) {
                *read = RebuildIo {
                    member: m,
                    sector: at,
                    column: m,
                    sectors,
                };
                n += 1;
            }
        }
        // Every member at once; one that fails is rebuilt around, if the parity allows (its
        // error is not acted on here).
        let reads = batch(&reads, n);
        let failed = p.rebuild_batch(Op::Read, reads);
        for (i, read) in reads.iter().enumerate() {
            if bit(failed, i) {
                lost = lost.with(read.member);
            }
        }
        let chunk = u64::from(g.chunk_sectors()).max(1);
        let stripe = offset / chunk;
        let map = g.stripe_map(stripe).ok_or(StepError::Unreadable)?;
        let job = ParityJob {
            op: ParityOp::Recover { lost },
            map,
            head: offset - stripe * chunk,
            chunk,
            sectors,
        };
        let recoverable = job
            .stripes()
            .all(|(m, _, _)| m.recovery(lost) != super::layout::Recovery::Lost);
        // Recovery rebuilds the lost data (by the helper, if one takes it); P and Q are then
        // generated here from the whole data (the backends' recovery need not regenerate a
        // lost P or Q beside lost data), which also checks a helper's recovery.
        let generate = ParityJob {
            op: ParityOp::Generate,
            ..job
        };
        if !recoverable {
            return Err(StepError::Unreadable);
        }
        let helper = match p.rebuild_compute(&job, true).ok_or(StepError::Unreadable)? {
            Computed::Helper(helper) => Some(helper),
            Computed::Here => None,
        };
        if helper.is_some() {
            self.check_columns(p, &job, lost, Check::Parity, Pair::Keep);
        }
        p.rebuild_compute(&generate, false)
            .ok_or(StepError::Unreadable)?;
        if let Some(helper) = helper {
            self.check_recovery(p, &job, &generate, lost, helper)?;
        }
        p.rebuild_io(Op::Write, dest, at, target, 0, sectors)
            .map_err(|_| StepError::TargetWrite)
    }

    /// Checks a helper's recovery of `job` (the members in `lost` lost; P and Q since
    /// generated here, `generate`, over the data it recovered) before anything of it is
    /// written: every stripe's P and Q that survive must be what the members hold (kept in
    /// the spare columns before the generation). A liar cannot pass: the parity compared is
    /// computed here, never by the helper, and in each stripe at most as many columns are lost
    /// as there is parity, so the equations of the surviving P and Q have one solution for the
    /// lost data (one column: P or Q alone fixes it; two data columns: both survive, and
    /// `e_a ^ e_b = 0`, `g^a·e_a ^ g^b·e_b = 0` force both errors to zero). A recovery that
    /// passes is the one the kernel computes, byte for byte.
    ///
    /// One that fails is done again here from the members (the surviving parity put back),
    /// and the helper reported ([`Events::helper_wrong`]) if its lost data differs from
    /// ours: a stripe that was already inconsistent fails the check as well, but then the
    /// helper's answer is the kernel's and it is not accused.
    fn check_recovery<P: Platform>(
        &self,
        p: &P,
        job: &ParityJob,
        generate: &ParityJob,
        lost: MemberSet,
        helper: u64,
    ) -> Result<(), StepError> {
        if self.check_columns(p, job, lost, Check::Parity, Pair::Compare) == 0 {
            return Ok(());
        }
        self.check_columns(p, job, lost, Check::Parity, Pair::Restore);
        self.check_columns(p, job, lost, Check::Lost, Pair::Keep);
        p.rebuild_compute(job, false).ok_or(StepError::Unreadable)?;
        if self.check_columns(p, job, lost, Check::Lost, Pair::Compare) > 0 {
            p.helper_wrong(helper);
        }
        p.rebuild_compute(generate, false)
            .map(|_| ())
            .ok_or(StepError::Unreadable)
    }

    /// Does `op` on each pair of a member's column and a spare column (the rebuild buffer's
    /// last two) over `job`'s stripes, and returns the sectors that differ (`Pair::Compare`).
    /// The pairs: with `Check::Parity` each stripe's P and Q that survive `lost` (the first
    /// spare for P, the second for Q); with `Check::Lost` each stripe's data columns of the
    /// members in `lost` (at most two: the first lost member's with the first spare).
    fn check_columns<P: Platform>(
        &self,
        p: &P,
        job: &ParityJob,
        lost: MemberSet,
        check: Check,
        op: Pair,
    ) -> u64 {
        let spare = self.geometry().members();
        let mut differ = 0u64;
        for (map, from, to) in job.stripes() {
            let members = match check {
                Check::Parity => [Some(map.p()), map.q()].map(|m| m.filter(|&m| !lost.contains(m))),
                Check::Lost => {
                    let mut lost = lost.iter();
                    [lost.next(), lost.next()]
                        .map(|m| m.filter(|&m| matches!(map.role(m), Role::Data(_))))
                }
            };
            let len = to - from;
            for (s, m) in (spare..).zip(members) {
                let Some(m) = m else {
                    continue;
                };
                match op {
                    Pair::Keep => p.rebuild_copy(m, s, from, len),
                    Pair::Restore => p.rebuild_copy(s, m, from, len),
                    Pair::Compare => {
                        differ = differ.saturating_add(p.rebuild_differ(m, s, from, len));
                    }
                }
            }
        }
        differ
    }

    /// One step of a replace's copy (`replace.rs`), if one runs: copies the next window of the
    /// replaced member to the replacement, under the same window and pace as a rebuild.
    fn replace_step<P: Platform>(&self, p: &P) {
        let Some((role, offset)) = self.replace_copying() else {
            return;
        };
        let member_end = self.geometry().member_data_sectors();
        if offset >= member_end {
            self.replace_copied(p);
            return;
        }
        // A mirror's window on every level: the copy reads the member itself, not a stripe.
        let end = offset.saturating_add(MIRROR_WINDOW_SECTORS).min(member_end);
        let Some((lo, hi)) = self.window_hull(role, offset, end) else {
            self.replace.set_copied(end);
            p.kick_worker();
            return;
        };
        let started = p.now_ns();
        let Some(copied) = self.in_window(p, lo, hi, || self.copy_replica(p, role, offset, end))
        else {
            return;
        };
        match copied {
            Ok(()) => {
                self.replace.set_copied(end);
                self.rebuild
                    .copied
                    .fetch_add(end - offset, Ordering::Relaxed);
                if end >= member_end {
                    self.replace_copied(p);
                } else {
                    self.keep_pace(p, started, end - offset);
                }
            }
            // Nothing left to copy from, or the replacement's own write: the replace ends.
            Err(_) => self.fail_replacement(p),
        }
        p.kick_worker();
    }

    /// Copies member `role`'s sectors `offset..end` to its replacement, a batch of buffer
    /// columns at a time: read from the member itself (it is in sync), then written; a batch
    /// that does not all read is redone a column at a time, what fails to read recomputed from
    /// the other members as a rebuild does.
    fn copy_replica<P: Platform>(
        &self,
        p: &P,
        role: u32,
        offset: u64,
        end: u64,
    ) -> Result<(), StepError> {
        let dest = self.replacement_index();
        let base = self.data_offset();
        let columns = self.batch_columns();
        let mut at = offset;
        while at < end {
            let mut reads = [RebuildIo::default(); MIRROR_BATCH];
            let mut n = 0;
            while n < columns && at < end {
                let next = at.saturating_add(REBUILD_COLUMN_SECTORS).min(end);
                if let Some(read) = reads.get_mut(n) {
                    *read = RebuildIo {
                        member: role,
                        sector: base.saturating_add(at),
                        // Below MIRROR_BATCH: lossless.
                        column: n as u32,
                        sectors: next - at,
                    };
                }
                n += 1;
                at = next;
            }
            let reads = batch(&reads, n);
            if p.rebuild_batch(Op::Read, reads) == 0 {
                let writes: [RebuildIo; MIRROR_BATCH] = core::array::from_fn(|i| RebuildIo {
                    member: dest,
                    ..reads.get(i).copied().unwrap_or_default()
                });
                if p.rebuild_batch(Op::Write, batch(&writes, reads.len())) != 0 {
                    return Err(StepError::TargetWrite);
                }
                continue;
            }
            for read in reads {
                let from = read.sector.saturating_sub(base);
                let to = from.saturating_add(read.sectors);
                if p.rebuild_io(Op::Read, role, read.sector, 0, 0, read.sectors)
                    .is_ok()
                {
                    p.rebuild_io(Op::Write, dest, read.sector, 0, 0, read.sectors)
                        .map_err(|_| StepError::TargetWrite)?;
                } else if self.geometry().level().has_parity() {
                    self.rebuild_stripes(p, role, dest, from, to)?;
                } else {
                    self.copy_mirror(p, role, dest, from, to)?;
                }
            }
        }
        Ok(())
    }

    /// The member is in sync: reads may use it; recorded in the superblocks.
    fn finish_rebuild<P: Platform>(&self, p: &P, target: u32, state: &MemberState) {
        state.set_recovery_offset(RECOVERY_COMPLETE);
        let bit = 1u64.checked_shl(target).unwrap_or(0);
        self.rebuild.partial.fetch_and(!bit, Ordering::SeqCst);
        self.rebuild.rate.stop();
        self.rebuild.since_checkpoint.store(0, Ordering::Relaxed);
        let _ = self.write_superblocks(p);
        p.member_event(target, MemberEvent::Rebuilt);
        // A second member may wait for its rebuild.
        p.kick_worker();
    }
}
