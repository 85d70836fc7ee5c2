// SPDX-License-Identifier: GPL-2.0

//! The write-intent bitmap on the I/O path and in the worker (the pure logic is `bitmap.rs`).
//!
//! - A write counts itself in every region it dirties before it is sent. If a region's bit is
//!   not on disk yet, the write waits in the worker's list (as for the dirty mark,
//!   `safe_mode.rs`) until the worker has written the bit's block to every member.
//! - It is uncounted when the request ends.
//! - The worker clears the bits of regions idle for two of its looks, one every
//!   [`DEFAULT_CLEAN_INTERVAL_MS`] (`set_bitmap_clean_interval`), while the array is optimal:
//!   a degraded array keeps its bits, so a member that comes back only needs what was written
//!   while it was away ([`ArrayEngine::bitmap_covers`]; its rebuild skips the rest,
//!   `rebuild_may_skip`).
//! - A device that takes a member's place gets every block first (`write_whole_bitmap`), as
//!   every member does when the array starts.
//!
//! The platform owns the region states and the on-disk blocks (`Metadata::bitmap`); without a
//! bitmap none of this runs.

use super::array::{ArrayEngine, ArrayState, Store};
use super::bitmap::{encode_block, RegionState, Regions, BITS_PER_BLOCK};
use super::members::MemberSet;
use super::platform::{MemberEvent, Op, Platform};
use super::request::RequestState;
use super::superblock::{Superblock, RECOVERY_COMPLETE};
use core::ops::Range;
use core::sync::atomic::Ordering;

/// How often the worker looks for idle regions to clear by default, milliseconds (md's
/// daemon_sleep).
pub const DEFAULT_CLEAN_INTERVAL_MS: u32 = 5000;

impl<M: Store> ArrayEngine<M> {
    /// The regions the request's write dirties (none for other requests), as the geometry
    /// that maps it lays them out (while a reshape runs, the old or the new one's rows).
    fn request_regions(&self, regions: &Regions, state: &RequestState) -> Range<u64> {
        match state.op() {
            Op::Write | Op::Discard => {
                regions.of_write(&self.map_of(state).0, state.start(), state.sectors())
            }
            Op::Read | Op::Flush => 0..0,
        }
    }

    /// The write path: counts the request in its regions (once) and says whether every one
    /// has its bit on disk, so the write may go; else it waits for the worker. True without a
    /// bitmap.
    pub(super) fn regions_ready<P: Platform>(&self, p: &P, state: &RequestState) -> bool {
        let Some((regions, states)) = p.bitmap() else {
            return true;
        };
        // A broken array's writes fail when they are sent; no bitmap write could take them.
        if self.broken.load(Ordering::SeqCst) {
            return true;
        }
        let range = self.request_regions(&regions, state);
        let span = || {
            states
                .get(range.start as usize..range.end as usize)
                .unwrap_or(&[])
        };
        // Counted once; again elsewhere if a reshape mapped it again while it waited (no
        // member I/O went yet, so nothing leans on the regions it leaves).
        let held = state.held_regions();
        if held != range {
            Self::uncount(states, state.release_regions());
            state.hold_regions(range.clone());
            for s in span() {
                s.start_write();
            }
        }
        if span().iter().all(|s| s.on_disk()) {
            return true;
        }
        // After the count (SeqCst): the worker's look either finds this write's region, or
        // comes after this store.
        self.bits_wanted.store(true, Ordering::SeqCst);
        false
    }

    /// The request ends: uncounted from its regions. Any context.
    pub(super) fn release_regions<P: Platform>(&self, p: &P, state: &RequestState) {
        let Some((_, states)) = p.bitmap() else {
            return;
        };
        Self::uncount(states, state.release_regions());
    }

    /// Drops a write's count from regions `range`.
    fn uncount(states: &[RegionState], range: Range<u64>) {
        for s in states
            .get(range.start as usize..range.end as usize)
            .unwrap_or(&[])
        {
            s.end_write();
        }
    }

    /// The worker: writes the blocks of regions whose writes wait for their bit, then lets
    /// those writes go (before the waiting writes are sent again).
    pub(super) fn write_wanted_bits<P: Platform>(&self, p: &P) {
        let Some((regions, states)) = p.bitmap() else {
            return;
        };
        // Only when a write found a bit missing since the last look: not a walk of every
        // region at every run of the worker.
        if !self.bits_wanted.swap(false, Ordering::SeqCst) {
            return;
        }
        for block in 0..regions.blocks() {
            let first = block.saturating_mul(BITS_PER_BLOCK);
            let range =
                first as usize..first.saturating_add(BITS_PER_BLOCK).min(regions.count()) as usize;
            let Some(part) = states.get(range) else {
                continue;
            };
            // Claimed before the block is built: a write that starts waiting later may miss
            // this block, so only the claimed ones go after it.
            let claimed = part.iter().fold(false, |any, s| s.claim_waiting() | any);
            if !claimed {
                continue;
            }
            // Bits only set: the block must land before their writes, nothing before it.
            let written =
                self.write_block(p, &regions, states, block, self.bitmap_targets(), false);
            for s in part {
                if written {
                    s.block_written();
                } else {
                    s.block_not_written();
                }
            }
            if !written {
                // Its writes still wait: the next look tries again.
                self.bits_wanted.store(true, Ordering::SeqCst);
            }
        }
    }

    /// How often the worker looks for idle regions to clear, milliseconds (at least 1).
    pub fn set_bitmap_clean_interval(&self, ms: u32) {
        self.bitmap_clean_ms.store(ms.max(1), Ordering::Relaxed);
        // The next look is due at once, not at the end of the old interval.
        self.bitmap_clean_at.store(0, Ordering::Relaxed);
    }

    /// The worker, every clean interval: clears the bits of regions idle since the
    /// last look and writes their blocks. Only on an optimal array that is not stopping.
    pub(super) fn clean_bits<P: Platform>(&self, p: &P) {
        let Some((regions, states)) = p.bitmap() else {
            return;
        };
        if self.background_held() {
            return;
        }
        if self.state() != ArrayState::Optimal {
            // Kept for the member that comes back. The rebuild that makes the array whole
            // runs in the worker, which then looks again.
            return;
        }
        let interval = self.bitmap_clean_ms.load(Ordering::Relaxed);
        let now = p.now_ns();
        let due = self.bitmap_clean_at.load(Ordering::Relaxed);
        if now < due {
            // Woken early (by I/O, or by the safe-mode timer, which takes the place of a
            // later one): the look stays due.
            let ms = (due - now).div_ceil(1_000_000).min(u64::from(interval));
            p.kick_worker_after(ms as u32);
            return;
        }
        self.bitmap_clean_at.store(
            now.saturating_add(u64::from(interval) * 1_000_000),
            Ordering::Relaxed,
        );
        for block in 0..regions.blocks() {
            let first = block.saturating_mul(BITS_PER_BLOCK);
            let range =
                first as usize..first.saturating_add(BITS_PER_BLOCK).min(regions.count()) as usize;
            let Some(part) = states.get(range) else {
                continue;
            };
            // Every region is looked at (marked idle or cleared), then the block written once.
            // No flush of every member first (as before a clean mark): each member's block
            // write flushes that member, and the bits are added up over the members at
            // assembly, so a member whose cache may still lose a write there keeps its bit
            // (graid-sim's power cuts between two members' block writes show it).
            let cleared = part.iter().fold(false, |any, s| s.try_clear() | any);
            if cleared {
                self.write_block(p, &regions, states, block, self.bitmap_targets(), true);
            }
        }
        // An idle array with every bit clear sleeps: the next bit set runs the worker.
        if states.iter().any(RegionState::bit) {
            p.kick_worker_after(interval);
        }
    }

    /// Writes every block of the bitmap, as the region states say now, to the members in
    /// `targets` that are in use: at start (after the bits were read, so damaged blocks are
    /// whole again), and to a device that takes a member's place. The worker, or the start.
    pub fn write_whole_bitmap<P: Platform>(&self, p: &P, targets: MemberSet) {
        let Some((regions, states)) = p.bitmap() else {
            return;
        };
        let targets = targets.intersect(self.bitmap_targets());
        if targets.is_empty() {
            return;
        }
        for block in 0..regions.blocks() {
            self.write_block(p, &regions, states, block, targets, true);
        }
    }

    /// The members in use, which keep the bitmap.
    pub(super) fn bitmap_targets(&self) -> MemberSet {
        (0u32..)
            .zip(self.members())
            .filter(|(_, m)| m.is_active())
            .fold(MemberSet::EMPTY, |set, (i, _)| set.with(i))
    }

    /// Whether a device whose own superblock is `device` may come back as member `role`
    /// rebuilding only the regions the bitmap marks (md's bitmap-based re-add): it was that
    /// member of this array, in sync, and last written no earlier than the newest update
    /// written while every member was in sync (bits are cleared only then, so none it
    /// needs has been cleared since), and no later than the array's own. Not across a
    /// reshape: the bits name the rows requests wrote, not the rows it moved, so the device
    /// must hold the geometry the array has now, and neither may be in the middle of one.
    pub fn bitmap_covers(&self, device: &Superblock, role: u32) -> bool {
        let sb = &self.superblock;
        let now = self.geometry();
        let same_shape = device.reshape.is_none()
            && !self.reshaping()
            && device.level == now.level()
            && device.members == now.members()
            && device.chunk_sectors == now.chunk_sectors()
            && device.data_offset == self.data_offset();
        same_shape
            && sb.bitmap_region != 0
            && device.array_uuid == sb.array_uuid
            && device.this_role().map(u32::from) == Some(role)
            && device.recovery_offset == RECOVERY_COMPLETE
            && device.events >= self.bitmap_events.load(Ordering::SeqCst)
            && device.events <= self.events()
    }

    /// The walk sectors (`Geometry::resync_sectors`) of member `target`'s sectors
    /// `offset..end`: the array range they hold on mirrors, the rows themselves on RAID 5/6.
    fn rebuild_walk(&self, target: u32, offset: u64, end: u64) -> Option<(u64, u64)> {
        if self.geometry().level().has_parity() {
            return Some((offset, end));
        }
        self.window_hull(target, offset, end)
    }

    /// A bitmap-guided rebuild (a re-added member) may skip member `target`'s sectors
    /// `offset..end`: no region they touch has its bit set, so nothing was written there while
    /// it was away.
    pub(super) fn rebuild_may_skip<P: Platform>(
        &self,
        p: &P,
        target: u32,
        offset: u64,
        end: u64,
    ) -> bool {
        if !self.rebuild_partial(target) {
            return false;
        }
        let Some((regions, states)) = p.bitmap() else {
            return false;
        };
        let Some((lo, hi)) = self.rebuild_walk(target, offset, end) else {
            return true;
        };
        let range = regions.of_walk(lo, hi);
        states
            .get(range.start as usize..range.end as usize)
            .is_some_and(|part| part.iter().all(|s| !s.bit()))
    }

    /// Writes bitmap block `block` as the region states say now to the members in `targets`
    /// (`preflush`: what each completed before is made durable first, as a block that clears
    /// bits needs); members whose write fails are failed (as for a superblock). True if some
    /// member took it.
    pub(super) fn write_block<P: Platform>(
        &self,
        p: &P,
        regions: &Regions,
        states: &[RegionState],
        block: u64,
        targets: MemberSet,
        preflush: bool,
    ) -> bool {
        let bit = |r: u64| states.get(r as usize).is_some_and(|s| s.bit());
        self.write_block_bits(p, block, regions.count(), &bit, targets, preflush)
    }

    /// Writes bitmap block `block` with `bit(r)` for its regions below `count` to the members
    /// in `targets` (see [`Self::write_block`]); a member whose write fails is failed. True if
    /// some member took it.
    pub(super) fn write_block_bits<P: Platform>(
        &self,
        p: &P,
        block: u64,
        count: u64,
        bit: &dyn Fn(u64) -> bool,
        targets: MemberSet,
        preflush: bool,
    ) -> bool {
        if targets.is_empty() {
            return false;
        }
        let failed = p.write_bitmap_block(targets, block, preflush, &|out| {
            encode_block(block, count, bit, out)
        });
        for member in failed.iter() {
            self.try_fail(p, member, MemberEvent::SuperblockWriteFailed);
        }
        !targets.minus(failed).is_empty()
    }
}
