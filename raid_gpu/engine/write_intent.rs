// SPDX-License-Identifier: GPL-2.0

//! The write-intent bitmap on the I/O path and in the worker (the pure logic is `bitmap.rs`).
//!
//! - A write counts itself in every region it dirties before it is sent. If a region's bit is
//!   not on disk yet, the write waits in the worker's list (as for the dirty mark,
//!   `safe_mode.rs`) until the worker has written the bit's block to every member.
//! - It is uncounted when the request ends.
//! - The worker clears the bits of regions idle for two of its looks, one every
//!   [`DEFAULT_CLEAN_INTERVAL_MS`] (`set_bitmap_clean_interval`), while the array is optimal: a degraded array keeps its bits, so a
//!   member that comes back only needs what was written while it was away.
//!
//! The platform owns the region states and the on-disk blocks (`Platform::bitmap`); without a
//! bitmap none of this runs.

use super::array::{ArrayEngine, ArrayState};
use super::bitmap::{encode_block, RegionState, Regions, BITS_PER_BLOCK};
use super::members::{MemberSet, MemberState};
use super::platform::{MemberEvent, Op, Platform};
use super::request::RequestState;
use core::ops::{Deref, Range};
use core::sync::atomic::Ordering;

/// How often the worker looks for idle regions to clear by default, milliseconds (md's
/// daemon_sleep).
pub const DEFAULT_CLEAN_INTERVAL_MS: u32 = 5000;

impl<M: Deref<Target = [MemberState]>> ArrayEngine<M> {
    /// The regions the request's write dirties (none for other requests).
    fn request_regions(&self, regions: &Regions, state: &RequestState) -> Range<u64> {
        match state.op() {
            Op::Write | Op::Discard => {
                regions.of_write(&self.geometry, state.start(), state.sectors())
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
        if state.hold_regions() {
            for s in span() {
                s.start_write();
            }
        }
        span().iter().all(|s| s.on_disk())
    }

    /// The request ends: uncounted from its regions. Any context.
    pub(super) fn release_regions<P: Platform>(&self, p: &P, state: &RequestState) {
        let Some((regions, states)) = p.bitmap() else {
            return;
        };
        if !state.release_regions() {
            return;
        }
        let range = self.request_regions(&regions, state);
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
            let written = self.write_block(p, &regions, states, block);
            for s in part {
                if written {
                    s.block_written();
                } else {
                    s.block_not_written();
                }
            }
        }
    }

    /// How often the worker looks for idle regions to clear, milliseconds (at least 1).
    pub fn set_bitmap_clean_interval(&self, ms: u32) {
        self.bitmap_clean_ms.store(ms.max(1), Ordering::Relaxed);
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
            // Kept for the member that comes back; looked at again later.
            p.kick_worker_after(self.bitmap_clean_ms.load(Ordering::Relaxed));
            return;
        }
        let interval = self.bitmap_clean_ms.load(Ordering::Relaxed);
        let now = p.now_ns();
        let due = self.bitmap_clean_at.load(Ordering::Relaxed);
        if now < due {
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
            let cleared = part.iter().fold(false, |any, s| s.try_clear() | any);
            if cleared {
                self.write_block(p, &regions, states, block);
            }
        }
        p.kick_worker_after(interval);
    }

    /// Writes bitmap block `block` as the region states say now to every working member;
    /// members whose write fails are failed (as for a superblock). True if some member took
    /// it.
    fn write_block<P: Platform>(
        &self,
        p: &P,
        regions: &Regions,
        states: &[RegionState],
        block: u64,
    ) -> bool {
        let targets = (0u32..)
            .zip(self.members())
            .filter(|(_, m)| m.is_active())
            .fold(MemberSet::EMPTY, |set, (i, _)| set.with(i));
        if targets.is_empty() {
            return false;
        }
        let count = regions.count();
        let failed = p.write_bitmap_block(targets, block, &|out| {
            encode_block(
                block,
                count,
                |r| states.get(r as usize).is_some_and(|s| s.bit()),
                out,
            )
        });
        for member in failed.iter() {
            self.try_fail(p, member, MemberEvent::SuperblockWriteFailed);
        }
        !targets.minus(failed).is_empty()
    }
}
