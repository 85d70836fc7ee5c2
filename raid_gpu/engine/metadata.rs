// SPDX-License-Identifier: GPL-2.0

//! Member failures and the superblock updates that record them.
//!
//! One writer at a time: the worker while the array runs, the array's start and stop while it
//! does not. Each update bumps the event count, lists every member not in use as faulty and goes
//! to every member in use at once, durably (`PREFLUSH | FUA`). A member whose superblock write
//! fails is failed in turn (unless it holds the last copy of some data), and the update is
//! repeated until every failure is recorded on some working member.

use super::array::{ArrayEngine, ArrayState, Store};
use super::members::{Health, MemberSet, MemberState};
use super::platform::{MemberEvent, MetadataError, Platform};
use super::superblock::{Slot, Superblock};
use core::sync::atomic::Ordering;

impl<M: Store> ArrayEngine<M> {
    /// The array takes no more writes (md's "broken"): `member`, which holds the last copy of
    /// some data, failed a write. Said once, as the array breaks (for the log and a uevent):
    /// every later error would say it again.
    fn mark_broken<P: Platform>(&self, p: &P, member: u32) {
        if !self.broken.swap(true, Ordering::SeqCst) {
            p.member_event(member, MemberEvent::KeptLastCopy);
        }
    }

    /// Stops using member `member` after an error (`why`, for the log). Refused where it holds
    /// the last copy of some data: the array is then broken (no more writes) and this returns
    /// false. True if the member is out of use, now or before. The worker only.
    pub(super) fn try_fail<P: Platform>(&self, p: &P, member: u32, why: MemberEvent) -> bool {
        if member == self.replacement_index() {
            // It holds nothing anyone reads: only the replace ends.
            self.fail_replacement(p);
            return true;
        }
        let Some(state) = self.members().get(member as usize) else {
            return true;
        };
        if !state.is_active() {
            return true;
        }
        if !self.has_all_data(Some(member)) {
            self.mark_broken(p, member);
            return false;
        }
        // Counted before the health changes: a write that saw the member failing also sees the
        // count (see `ArrayEngine::complete`).
        self.failing.fetch_add(1, Ordering::SeqCst);
        if state.begin_failing() {
            p.member_event(member, why);
        } else {
            self.failing.fetch_sub(1, Ordering::SeqCst);
        }
        true
    }

    /// Makes every write the members in use (and a replacement) completed so far durable: an
    /// empty flush to each at once, waited for. Metadata that declares earlier writes done (a
    /// retired log epoch, clean, a cleared bitmap bit, a resync or rebuild position) is
    /// written only after it: each member's own `PREFLUSH` covers only that member, and a
    /// power cut between two members' writes would otherwise leave one saying "done" while
    /// another's volatile cache loses writes it relies on (md flushes every member before it
    /// reuses log space). A member whose flush fails is failed, as for a write error.
    pub(super) fn flush_all<P: Platform>(&self, p: &P) {
        let mut targets = self.writable_members();
        if self.replica_live() {
            targets = targets.with(self.replacement_index());
        }
        if targets.is_empty() {
            return;
        }
        let ticket = self.log().flushes.begin();
        let failed = p.flush_members(targets);
        self.log()
            .flushes
            .end(ticket, targets.minus(failed), failed.is_empty());
        for member in failed.iter() {
            self.try_fail(p, member, MemberEvent::Failed);
        }
    }

    /// Writes every working member's superblock with a new event count, "clean" unless the
    /// array is marked dirty (`safe_mode.rs`), the resync's position and every member not in
    /// use listed as faulty; failures are recorded once some member took the update. `Err` if
    /// no member could be written (the array is then broken). Call from a context that may
    /// sleep, as the only superblock writer (see the module comment).
    pub fn write_superblocks<P: Platform>(&self, p: &P) -> Result<(), MetadataError> {
        self.write_superblocks_as(p, !self.is_dirty())
    }

    /// [`Self::write_superblocks`], saying `clean` as given (the dirty/clean changes).
    pub(super) fn write_superblocks_as<P: Platform>(
        &self,
        p: &P,
        clean: bool,
    ) -> Result<(), MetadataError> {
        let settled = self.settled();
        let mut flush = self.update_needs_flush(clean);
        loop {
            // What the update says (clean, a position, a failure) holds for every write
            // completed before it.
            if flush {
                self.flush_all(p);
            }
            // A pass after a member's write failed says that it failed.
            flush = true;
            let mut failing = MemberSet::EMPTY;
            let mut targets = MemberSet::EMPTY;
            // A resize changes the size (`resize.rs`), a mirror's copies the count
            // (`raid_devices.rs`), a reshape the shape and offset (`reshape_run.rs`).
            let mut sb = self.superblock_now();
            if let Some((regions, _)) = p.bitmap() {
                sb.bitmap_region = regions.region_sectors();
            }
            let retired = self.retired_slots.load(Ordering::SeqCst);
            let spares = self.spares.slot_bits();
            for (i, slot) in sb.slots.iter_mut().enumerate() {
                let bit = 1u64.checked_shl(i as u32).unwrap_or(0);
                if retired & bit != 0 {
                    *slot = Slot::Faulty;
                } else if spares & bit != 0 {
                    *slot = Slot::Spare;
                }
            }
            for (index, member) in (0u32..).zip(self.members()) {
                let Some(slot) = sb.slots.get_mut(member.slot() as usize) else {
                    continue;
                };
                if member.is_active() {
                    targets = targets.with(index);
                    // Below 32: lossless.
                    *slot = Slot::Active { role: index as u8 };
                } else {
                    *slot = Slot::Faulty;
                    if member.health() == Health::Failing {
                        failing = failing.with(index);
                    }
                }
            }
            if targets.is_empty() {
                self.update_written(false);
                self.mark_broken(p, 0);
                return Err(MetadataError);
            }
            sb.events = self.events.load(Ordering::Acquire).saturating_add(1);
            sb.clean = clean;
            // Bits are cleared only while every member is in sync: a member that missed none
            // of those updates missed only what the bitmap keeps (`bitmap_covers`).
            if sb.bitmap_region != 0 && self.state() == ArrayState::Optimal {
                self.bitmap_events.store(sb.events, Ordering::SeqCst);
            }
            sb.bitmap_events = self.bitmap_events.load(Ordering::SeqCst);
            sb.resync_offset = self.resync_offset();
            let failed =
                p.write_superblocks(targets, |index| match self.members().get(index as usize) {
                    Some(m) => Superblock {
                        recovery_offset: m.recovery_offset(),
                        ..sb.for_member(m.slot(), m.uuid())
                    },
                    None => sb,
                });
            self.events.store(sb.events, Ordering::Release);
            // Spares hold no data: one that misses an update is only refused at the next
            // assembly (stale), which costs nothing.
            for (slot, uuid) in self.spares.iter() {
                let copy = Superblock {
                    recovery_offset: 0,
                    ..sb.for_member(slot, uuid)
                };
                let written = p.write_spare_superblock(slot, &copy);
                if !written && self.replacing_slot() == Some(slot) {
                    self.fail_replacement(p);
                }
            }
            self.update_written(settled && failed.is_empty());
            if targets.minus(failed).is_empty() {
                self.mark_broken(p, targets.iter().next().unwrap_or(0));
                return Err(MetadataError);
            }
            for index in failing.iter() {
                let recorded = self
                    .members()
                    .get(index as usize)
                    .is_some_and(MemberState::mark_recorded);
                if recorded {
                    self.failing.fetch_sub(1, Ordering::SeqCst);
                    p.member_event(index, MemberEvent::FailureRecorded);
                }
            }
            for index in failed.iter() {
                self.try_fail(p, index, MemberEvent::SuperblockWriteFailed);
            }
            // Members whose write failed are failing now (or kept as a last copy): record them
            // on the others. Each pass drops a member or ends.
            if self.failing.load(Ordering::SeqCst) == 0 {
                if !failing.is_empty() {
                    self.want_takeover(p);
                }
                return Ok(());
            }
        }
    }
}
