// SPDX-License-Identifier: GPL-2.0

//! Dirty and clean (md's safe mode): the superblocks say "clean" only while no write can be
//! half done, so after a crash only an array that was writing needs a resync.
//!
//! - The first write after the array was clean waits in the worker's list while the worker
//!   writes every superblock "not clean" (`PREFLUSH | FUA`); then it goes, and so do all
//!   writes after it. The write path reads one flag: no counter shared between CPUs. No
//!   flush round goes before that mark where nothing a superblock holds moved since the last
//!   update ([`ArrayEngine::update_needs_flush`]).
//! - The worker notices quiet on a timer, from the members' per-CPU write counts: once they
//!   have not moved for a whole quiet period ([`SafeMode::delay_ms`], md's
//!   `safe_mode_delay`) and no write is in flight, it writes the superblocks "clean" again.
//! - The flag goes down before the worker looks for writes in flight (SeqCst on both sides,
//!   as for a freeze): a write either is seen in flight, and the array stays dirty, or sees
//!   the flag down and waits for the worker to mark the array dirty again.
//! - RAID 0 has nothing to resync: it is never marked dirty.

use super::array::{ArrayEngine, ArrayState, Store};
use super::platform::{Op, Platform};
use super::request::{Phase, RequestState};
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

/// The quiet period by default, milliseconds (md's default too).
pub const DEFAULT_SAFE_MODE_MS: u32 = 200;

/// The dirty/clean state.
#[derive(Debug)]
pub struct SafeMode {
    /// The superblocks say "not clean": writes may go.
    dirty: AtomicBool,
    /// The quiet period, milliseconds.
    delay_ms: AtomicU32,
    /// The members' write count when the worker last looked, and when it last moved.
    seen_writes: AtomicU64,
    moved_at_ns: AtomicU64,
    /// Times the array was marked dirty.
    marks: AtomicU64,
    /// The last superblock update was written while the array was settled
    /// ([`ArrayEngine::settled`]), as it still is if nothing it claims has moved since.
    settled_written: AtomicBool,
    /// Superblock updates sent without a flush round before them (dirty marks, mostly).
    updates_unflushed: AtomicU64,
}

impl SafeMode {
    pub const fn new() -> Self {
        Self {
            dirty: AtomicBool::new(false),
            delay_ms: AtomicU32::new(DEFAULT_SAFE_MODE_MS),
            seen_writes: AtomicU64::new(0),
            moved_at_ns: AtomicU64::new(0),
            marks: AtomicU64::new(0),
            settled_written: AtomicBool::new(false),
            updates_unflushed: AtomicU64::new(0),
        }
    }

    pub(super) fn dirty(&self) -> bool {
        self.dirty.load(Ordering::SeqCst)
    }
}

impl Default for SafeMode {
    fn default() -> Self {
        Self::new()
    }
}

/// A write of `r` that changes the data and has not been sent yet: it waits for "not clean".
fn waits_for_dirty(r: &RequestState) -> bool {
    r.phase() == Phase::Waiting && matches!(r.op(), Op::Write | Op::Discard)
}

/// A write of `r` that may still reach the members (as the rebuild's window sees it).
fn writing(r: &RequestState) -> bool {
    r.op().is_write() && (r.pending() > 0 || r.phase() == Phase::Stripe)
}

impl<M: Store> ArrayEngine<M> {
    /// The superblocks say "not clean", or need not (RAID 0, or a broken array whose writes
    /// fail anyway): a write may go.
    pub(super) fn write_may_go(&self) -> bool {
        !self.redundant() || self.safe_mode.dirty() || self.broken.load(Ordering::SeqCst)
    }

    /// The array is marked dirty (its superblocks say "not clean").
    pub fn is_dirty(&self) -> bool {
        self.safe_mode.dirty()
    }

    /// Sets the quiet period after which an idle array is marked clean, milliseconds (at
    /// least 1).
    pub fn set_safe_mode_delay(&self, ms: u32) {
        self.safe_mode.delay_ms.store(ms.max(1), Ordering::Relaxed);
    }

    /// Times the array was marked dirty since it started.
    pub fn dirty_marks(&self) -> u64 {
        self.safe_mode.marks.load(Ordering::Relaxed)
    }

    pub fn safe_mode_delay(&self) -> u32 {
        self.safe_mode.delay_ms.load(Ordering::Relaxed)
    }

    /// Superblock updates (dirty marks, mostly) that needed no flush round before them
    /// ([`Self::update_needs_flush`]).
    pub fn superblock_updates_unflushed(&self) -> u64 {
        self.safe_mode.updates_unflushed.load(Ordering::Relaxed)
    }

    /// Every member in sync, no resync, rebuild, replace or unrecorded failure: every position
    /// a superblock holds is at its end, and every member's slot says active.
    pub(super) fn settled(&self) -> bool {
        self.state() == ArrayState::Optimal
            && self.in_sync()
            && self.failing.load(Ordering::SeqCst) == 0
            && self.replacement().is_none()
    }

    /// Whether a superblock update must first flush every member (`flush_all`): it declares
    /// the writes before it durable when it says clean, or holds a position or a member's
    /// state that moved since the last update. A dirty mark of an array settled then and now
    /// claims nothing about earlier writes (nothing moved, and the update before it flushed),
    /// so its own `PREFLUSH | FUA` is all it needs, as md's `md_write_start` writes one
    /// superblock and nothing else.
    pub(super) fn update_needs_flush(&self, clean: bool) -> bool {
        let needed =
            clean || !self.safe_mode.settled_written.load(Ordering::SeqCst) || !self.settled();
        if !needed {
            self.safe_mode
                .updates_unflushed
                .fetch_add(1, Ordering::Relaxed);
        }
        needed
    }

    /// A superblock update was written (`settled`: the array was settled before it began, and
    /// `Ok`), or failed.
    pub(super) fn update_written(&self, settled: bool) {
        let settled = settled && self.settled();
        self.safe_mode
            .settled_written
            .store(settled, Ordering::SeqCst);
    }

    /// The members' writes so far (and their errors: a write that failed moved too).
    fn writes_done(&self) -> u64 {
        self.members().iter().fold(0u64, |n, m| {
            let s = m.stats();
            n.wrapping_add(s.writes).wrapping_add(s.errors)
        })
    }

    /// The worker: marks the array dirty if a write waits for it, before the waiting writes
    /// are sent again.
    pub(super) fn mark_dirty_for_writes<P: Platform>(&self, p: &P) {
        if self.write_may_go() || !p.any_request(waits_for_dirty) {
            return;
        }
        // On an error the array is broken: the writes then go, and fail.
        if self.write_superblocks_as(p, false).is_ok() {
            self.safe_mode.dirty.store(true, Ordering::SeqCst);
            self.safe_mode.marks.fetch_add(1, Ordering::Relaxed);
            self.safe_mode
                .seen_writes
                .store(self.writes_done(), Ordering::Relaxed);
            self.safe_mode
                .moved_at_ns
                .store(p.now_ns(), Ordering::Relaxed);
            p.kick_worker_after(self.safe_mode_delay());
        }
    }

    /// The worker: marks a dirty array clean once it has been quiet for the quiet period;
    /// else looks again later. Not while the background is held (a stop writes the last
    /// superblocks itself).
    pub(super) fn safe_mode_step<P: Platform>(&self, p: &P) {
        if !self.safe_mode.dirty() || self.background_held() {
            return;
        }
        let sm = &self.safe_mode;
        let delay = self.safe_mode_delay();
        let (writes, now) = (self.writes_done(), p.now_ns());
        if sm.seen_writes.swap(writes, Ordering::Relaxed) != writes {
            sm.moved_at_ns.store(now, Ordering::Relaxed);
            p.kick_worker_after(delay);
            return;
        }
        let quiet_ns = now.saturating_sub(sm.moved_at_ns.load(Ordering::Relaxed));
        let delay_ns = u64::from(delay) * 1_000_000;
        if quiet_ns < delay_ns {
            let left_ms = (delay_ns - quiet_ns).div_ceil(1_000_000);
            // At most `delay`: lossless.
            p.kick_worker_after(left_ms.min(u64::from(delay)) as u32);
            return;
        }
        sm.dirty.store(false, Ordering::SeqCst);
        if p.any_request(writing) {
            sm.dirty.store(true, Ordering::SeqCst);
            sm.moved_at_ns.store(now, Ordering::Relaxed);
            p.kick_worker_after(delay);
            return;
        }
        // Nothing logged needs replaying once the array is clean: the next dirty period
        // starts with empty rings.
        self.void_log_if_used(p);
        if self.write_superblocks_as(p, true).is_err() {
            // Broken: writes fail from now on, and nothing is clean.
            sm.dirty.store(true, Ordering::SeqCst);
        }
        // Writes that came meanwhile wait for the worker to mark the array dirty again.
        p.kick_worker();
    }

    /// The array is stopping with no request left: its last superblocks say "clean".
    pub fn mark_stopped(&self) {
        self.safe_mode.dirty.store(false, Ordering::SeqCst);
    }
}
