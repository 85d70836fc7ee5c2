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
//! Every flush takes a ticket as it begins (of every member, or of some), and the newest ticket
//! whose flush ended on every member is kept. When a data write completes, its stripes' lock
//! slots record the tickets begun so far, plus one, and the members it wrote: a flush with at
//! least that ticket began after the write completed, so once one of every member ended, or
//! one of those members, the data is durable. A partial write over marked slots flushes only
//! the members they name (md's PPL flushes the disks an io_unit wrote, not all): for a RAID 5
//! read-modify-write that is the data member and P written before, two flushes, not one per
//! member. Slots are shared by many stripes (a hash), which costs at most a flush more, never
//! one less.
//!
//! A slot is one word: the ticket's low 32 bits and the members' bits. Tickets compare as
//! serial numbers (RFC 1982): right while within 2^31 of each other, and the log retires an
//! epoch (a flush of every member) at least once per half of its ring, each partial write
//! taking ring space, so the tickets in use stay far closer than that. A mark older than that
//! would read as newer, which costs a flush, never one too few.

use super::members::MemberSet;
use super::stripe::Slots;
use core::sync::atomic::{AtomicU64, Ordering};

/// The flushes of the members: begun and ended.
#[derive(Debug, Default)]
pub struct FlushTickets {
    /// Tickets given out: the last flush begun.
    begun: AtomicU64,
    /// The newest ticket whose flush ended on every member.
    ended: AtomicU64,
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
            ended: AtomicU64::new(0),
        }
    }

    /// A flush begins (before any of its flushes is sent): its ticket.
    pub fn begin(&self) -> u64 {
        // SeqCst, as every access here: a completion's look at `begun` either sees this
        // ticket (and does not count on its flush) or comes before it, and then so did the
        // write, before this flush was sent.
        self.begun.fetch_add(1, Ordering::SeqCst).wrapping_add(1)
    }

    /// The flush of `ticket` ended on every member.
    pub fn end(&self, ticket: u64) {
        self.ended.fetch_max(ticket, Ordering::SeqCst);
    }

    /// Data writes to the stripes of `slots` completed on `wrote` (each slot's mark in
    /// `marks`, one word per lock slot).
    pub(super) fn written(&self, marks: &[AtomicU64], slots: Slots, wrote: MemberSet) {
        let mark = self.begun.load(Ordering::SeqCst).wrapping_add(1);
        let ended = self.ended.load(Ordering::SeqCst);
        for i in 0..slots.count() {
            let Some(word) = marks.get(slots.nth(i) as usize) else {
                continue;
            };
            let _ = word.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |w| {
                let (t, members) = unpack(w);
                // Members of a mark a flush of every member covered since are durable.
                Some(if !members.is_empty() && after(t, ended) {
                    let newest = if after(t, mark) { u64::from(t) } else { mark };
                    pack(newest, members.union(wrote))
                } else {
                    pack(mark, wrote)
                })
            });
        }
    }

    /// The members that may still lose a data write to the stripes of `slots` (empty: none).
    pub(super) fn unflushed(&self, marks: &[AtomicU64], slots: Slots) -> MemberSet {
        let ended = self.ended.load(Ordering::SeqCst);
        (0..slots.count())
            .filter_map(|i| marks.get(slots.nth(i) as usize))
            .map(|word| unpack(word.load(Ordering::SeqCst)))
            .filter(|&(t, _)| after(t, ended))
            .fold(MemberSet::EMPTY, |set, (_, members)| set.union(members))
    }

    /// The flush of `ticket` ended on `members`: the marks of `slots` forget those members'
    /// writes that completed before it began (a write completed after took a newer mark,
    /// and its slot keeps every member).
    pub(super) fn flushed(
        &self,
        marks: &[AtomicU64],
        slots: Slots,
        ticket: u64,
        members: MemberSet,
    ) {
        for i in 0..slots.count() {
            let Some(word) = marks.get(slots.nth(i) as usize) else {
                continue;
            };
            let _ = word.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |w| {
                let (t, left) = unpack(w);
                (!after(t, ticket) && !left.is_empty())
                    .then(|| pack(u64::from(t), left.minus(members)))
            });
        }
    }

    /// Flushes begun and ended (for the tests and DETAIL).
    pub fn counts(&self) -> (u64, u64) {
        (
            self.begun.load(Ordering::Relaxed),
            self.ended.load(Ordering::Relaxed),
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
    fn a_partial_flush_forgets_only_what_it_covered() {
        let flushes = FlushTickets::new();
        let marks: [AtomicU64; 8] = core::array::from_fn(|_| AtomicU64::new(0));
        let slot = Slots::of(3, 1, 8);
        assert!(flushes.unflushed(&marks, slot).is_empty());
        // A read-modify-write wrote data member 1 and P on member 5.
        flushes.written(&marks, slot, set(&[1, 5]));
        assert_eq!(flushes.unflushed(&marks, slot), set(&[1, 5]));
        // A write to another stripe of the slot completes on member 2 before the flush.
        flushes.written(&marks, slot, set(&[2]));
        let ticket = flushes.begin();
        // ... and one on member 1 after it began: not covered.
        let flushed = set(&[1, 2, 5]);
        flushes.flushed(&marks, slot, ticket, flushed);
        assert_eq!(flushes.unflushed(&marks, slot), MemberSet::EMPTY);
        flushes.written(&marks, slot, set(&[3]));
        let ticket = flushes.begin();
        flushes.written(&marks, slot, set(&[4]));
        flushes.flushed(&marks, slot, ticket, set(&[3]));
        // The write on 4 completed after the flush began: the slot keeps everything.
        assert_eq!(flushes.unflushed(&marks, slot), set(&[3, 4]));
        // A flush of only some members never clears the others.
        let ticket = flushes.begin();
        flushes.flushed(&marks, slot, ticket, set(&[3]));
        assert_eq!(flushes.unflushed(&marks, slot), set(&[4]));
        // A flush of every member ends every mark before it.
        let ticket = flushes.begin();
        flushes.end(ticket);
        assert!(flushes.unflushed(&marks, slot).is_empty());
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
