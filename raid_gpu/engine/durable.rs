// SPDX-License-Identifier: GPL-2.0

//! Which stripes may hold data that a member's volatile cache can still lose.
//!
//! A logged partial write's partial parity is made from the columns it leaves alone as the
//! members return them, which may be from their volatile caches. Should a power cut then lose
//! one of those columns' writes, the replay would make the parity agree with data that is not
//! on disk, and a member missing after the cut would be computed from it: neither its old nor
//! its new data (review 3's R2). So a partial write over stripes whose data was written since
//! the last flush of every member flushes every member before it logs (md's PPL flushes the
//! disks an io_unit wrote before it sends the next io_unit; graid pays only where a write
//! builds on unflushed data).
//!
//! Every flush of every member takes a ticket as it begins, and the newest ticket whose flush
//! ended on every member is kept. When a data write completes, its stripes' lock slots record
//! the tickets begun so far, plus one: a flush with at least that ticket began after the write
//! completed, so once one ended the data is durable. Slots are shared by many stripes (a hash),
//! which costs at most a flush more, never one less.

use super::stripe::Slots;
use core::sync::atomic::{AtomicU64, Ordering};

/// The flushes of every member: begun and ended.
#[derive(Debug, Default)]
pub struct FlushTickets {
    /// Tickets given out: the last flush begun.
    begun: AtomicU64,
    /// The newest ticket whose flush ended on every member.
    ended: AtomicU64,
}

impl FlushTickets {
    pub const fn new() -> Self {
        Self {
            begun: AtomicU64::new(0),
            ended: AtomicU64::new(0),
        }
    }

    /// A flush of every member begins (before any of its flushes is sent): its ticket.
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

    /// Data writes to the stripes of `slots` completed (each slot's mark in `marks`, one word
    /// per lock slot).
    pub(super) fn written(&self, marks: &[AtomicU64], slots: Slots) {
        let mark = self.begun.load(Ordering::SeqCst).wrapping_add(1);
        for i in 0..slots.count() {
            if let Some(word) = marks.get(slots.nth(i) as usize) {
                word.fetch_max(mark, Ordering::SeqCst);
            }
        }
    }

    /// Whether a data write to the stripes of `slots` may not be durable yet.
    pub(super) fn unflushed(&self, marks: &[AtomicU64], slots: Slots) -> bool {
        let ended = self.ended.load(Ordering::SeqCst);
        (0..slots.count()).any(|i| {
            marks
                .get(slots.nth(i) as usize)
                .is_some_and(|word| word.load(Ordering::SeqCst) > ended)
        })
    }

    /// Flushes begun and ended (for the tests and DETAIL).
    pub fn counts(&self) -> (u64, u64) {
        (
            self.begun.load(Ordering::Relaxed),
            self.ended.load(Ordering::Relaxed),
        )
    }
}
