// SPDX-License-Identifier: GPL-2.0

//! Which stripes may hold data that a member's volatile cache can still lose.
//!
//! A logged partial write's partial parity is made from the columns it leaves alone as the
//! members return them, which may be from their volatile caches. Should a power cut then lose
//! one of those columns' writes, the replay would make the parity agree with data that is not
//! on disk, and a member missing after the cut would be computed from it: neither its old nor
//! its new data (review 3's R2). So a partial write over stripes whose data was written since
//! the members that hold it were last flushed flushes those members before it logs (md's PPL
//! flushes the disks an io_unit wrote before it sends the next io_unit; graid pays only where
//! a write builds on unflushed data).
//!
//! Every flush takes a ticket as it begins (of every member, or of some), and each member keeps
//! the newest ticket whose flush of it ended. When a data write completes, its stripes' lock
//! slots record the tickets begun so far, plus one, and the members it wrote: a flush with at
//! least that ticket began after the write completed, so once one of a member ended, what the
//! write put there is durable. A partial write over marked slots flushes only the members
//! they name that no such flush covered (md's PPL flushes the disks an io_unit wrote, not
//! all): for a RAID 5 read-modify-write after another, the data member and P written before,
//! two flushes, not one per member; and each flush counts for every slot, whoever sent it.
//! Slots are shared by many stripes (a hash), which costs at most a flush more, never one
//! less.
//!
//! Background writes mark no slot, and need none: a rebuild or a replace writes only to a
//! device that is not in sync past its last recorded position (a superblock update, after a
//! flush of every member): after a power cut it is rebuilt or copied again from there, and the
//! replay counts it missing, so nothing is computed from what its cache held. A resync and
//! a repair write parity, which the replay of a logged write recomputes from the columns on
//! disk, and the resync after the cut again; a RAID 6 repair of a data column that a power cut
//! loses leaves that column as wrong as before the repair, with no acknowledged write in it.
//!
//! A slot is one word: the ticket's low 32 bits and the members' bits. Tickets compare as
//! serial numbers (RFC 1982): right while within 2^31 of each other, and the log retires an
//! epoch (a flush of every member) at least once per half of its ring, each partial write
//! taking ring space, so the tickets in use stay far closer than that. A mark older than that
//! would read as newer, which costs a flush, never one too few.

use super::geometry::MAX_MEMBERS;
use super::members::MemberSet;
use super::stripe::Slots;
use core::sync::atomic::{AtomicU64, Ordering};

/// The flushes of the members: begun, and ended per member.
#[derive(Debug, Default)]
pub struct FlushTickets {
    /// Tickets given out: the last flush begun.
    begun: AtomicU64,
    /// Per member: the newest ticket whose flush of it ended.
    ended: [AtomicU64; MAX_MEMBERS as usize],
    /// The newest ticket whose flush ended on every member in use (for the tests).
    ended_all: AtomicU64,
}

/// A slot's word: `ticket`'s low 32 bits above the members' bits.
fn pack(ticket: u64, members: MemberSet) -> u64 {
    (ticket & u64::from(u32::MAX)) << 32 | u64::from(members.bits())
}

fn unpack(word: u64) -> (u32, MemberSet) {
    ((word >> 32) as u32, MemberSet::from_bits(word as u32))
}

/// Whether 32-bit ticket `t` came after ticket `than` (serial-number arithmetic).
fn after(t: u32, than: u64) -> bool {
    (t.wrapping_sub(than as u32) as i32) > 0
}

impl FlushTickets {
    pub const fn new() -> Self {
        Self {
            begun: AtomicU64::new(0),
            ended: [const { AtomicU64::new(0) }; MAX_MEMBERS as usize],
            ended_all: AtomicU64::new(0),
        }
    }

    /// A flush begins (before any of its flushes is sent): its ticket.
    pub fn begin(&self) -> u64 {
        // SeqCst, as every access here: a completion's look at `begun` either sees this
        // ticket (and does not count on its flush) or comes before it, and then so did the
        // write, before this flush was sent.
        self.begun.fetch_add(1, Ordering::SeqCst).wrapping_add(1)
    }

    /// The flush of `ticket` ended on `members` (`every`: those are every member in use).
    pub fn end(&self, ticket: u64, members: MemberSet, every: bool) {
        // A flush of every member in use stands for the members out of use too: what they
        // hold is rebuilt before anything builds on it, and their marks then stay within
        // 2^31 tickets of their own (see the module comment) however long they were gone.
        let members = if every {
            MemberSet::first(MAX_MEMBERS)
        } else {
            members
        };
        for m in members.iter() {
            if let Some(ended) = self.ended.get(m as usize) {
                ended.fetch_max(ticket, Ordering::SeqCst);
            }
        }
        if every {
            self.ended_all.fetch_max(ticket, Ordering::SeqCst);
        }
    }

    /// Of `members` marked with ticket `t`, those no flush covered since.
    fn not_covered(&self, t: u32, members: MemberSet) -> MemberSet {
        members
            .iter()
            .filter(|&m| {
                self.ended
                    .get(m as usize)
                    .is_none_or(|ended| after(t, ended.load(Ordering::SeqCst)))
            })
            .fold(MemberSet::EMPTY, MemberSet::with)
    }

    /// Data writes to the stripes of `slots` completed on `wrote` (each slot's mark in
    /// `marks`, one word per lock slot).
    pub(super) fn written(&self, marks: &[AtomicU64], slots: Slots, wrote: MemberSet) {
        let mark = self.begun.load(Ordering::SeqCst).wrapping_add(1);
        for i in 0..slots.count() {
            let Some(word) = marks.get(slots.nth(i) as usize) else {
                continue;
            };
            let _ = word.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |w| {
                let (t, members) = unpack(w);
                // Members whose writes a flush covered since are durable: dropped.
                let left = self.not_covered(t, members);
                Some(if left.is_empty() {
                    pack(mark, wrote)
                } else {
                    let newest = if after(t, mark) { u64::from(t) } else { mark };
                    pack(newest, left.union(wrote))
                })
            });
        }
    }

    /// The members that may still lose a data write to the stripes of `slots` (empty: none).
    pub(super) fn unflushed(&self, marks: &[AtomicU64], slots: Slots) -> MemberSet {
        (0..slots.count())
            .filter_map(|i| marks.get(slots.nth(i) as usize))
            .map(|word| unpack(word.load(Ordering::SeqCst)))
            .fold(MemberSet::EMPTY, |set, (t, members)| {
                set.union(self.not_covered(t, members))
            })
    }

    /// Flushes begun, and the newest that ended on every member (for the tests and DETAIL).
    pub fn counts(&self) -> (u64, u64) {
        (
            self.begun.load(Ordering::Relaxed),
            self.ended_all.load(Ordering::Relaxed),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(members: &[u32]) -> MemberSet {
        members.iter().fold(MemberSet::EMPTY, |s, &m| s.with(m))
    }

    #[test]
    fn a_flush_of_some_members_covers_only_them_and_only_earlier_writes() {
        let flushes = FlushTickets::new();
        let marks: [AtomicU64; 8] = core::array::from_fn(|_| AtomicU64::new(0));
        let slot = Slots::of(3, 1, 8);
        let other = Slots::of(5, 1, 8);
        assert!(flushes.unflushed(&marks, slot).is_empty());
        // A read-modify-write wrote data member 1 and P on member 5.
        flushes.written(&marks, slot, set(&[1, 5]));
        assert_eq!(flushes.unflushed(&marks, slot), set(&[1, 5]));
        // Another slot's write on member 2, before a flush of 1, 2 and 5.
        flushes.written(&marks, other, set(&[2]));
        let ticket = flushes.begin();
        flushes.end(ticket, set(&[1, 2, 5]), false);
        assert!(flushes.unflushed(&marks, slot).is_empty());
        assert!(flushes.unflushed(&marks, other).is_empty());
        // A write on 3, then a flush begins, then a write on 4: the flush of 3 and 4 covers
        // only the first.
        flushes.written(&marks, slot, set(&[3]));
        let ticket = flushes.begin();
        flushes.written(&marks, slot, set(&[4]));
        flushes.end(ticket, set(&[3, 4]), false);
        assert_eq!(flushes.unflushed(&marks, slot), set(&[3, 4]));
        // A flush of member 3 alone never covers 4.
        let ticket = flushes.begin();
        flushes.end(ticket, set(&[3]), false);
        assert_eq!(flushes.unflushed(&marks, slot), set(&[4]));
        // A flush of every member covers every mark before it, in every slot.
        flushes.written(&marks, other, set(&[6]));
        let ticket = flushes.begin();
        flushes.end(ticket, MemberSet::first(8), true);
        assert!(flushes.unflushed(&marks, slot).is_empty());
        assert!(flushes.unflushed(&marks, other).is_empty());
        assert_eq!(flushes.counts(), (ticket, ticket));
        // Marks after it start a new set.
        flushes.written(&marks, slot, set(&[0]));
        assert_eq!(flushes.unflushed(&marks, slot), set(&[0]));
    }

    #[test]
    fn tickets_compare_as_serial_numbers_across_the_wrap() {
        assert!(after(5, 4));
        assert!(!after(4, 4));
        assert!(!after(3, 4));
        assert!(after(2, u64::from(u32::MAX)));
        assert!(!after(u32::MAX, 1 << 32));
    }
}
