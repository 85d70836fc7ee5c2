// SPDX-License-Identifier: GPL-2.0

//! Partial stripes held for full ones: a RAID 5/6 write that leaves its last stripe partly
//! unwritten takes in the writes that continue it, and writes the stripe once.
//!
//! A sequential stream of writes smaller than a stripe (1 MiB writes into the 2.5 MiB stripes of
//! six members at 512 KiB chunks) would update each stripe once per write, each time reading old
//! data and parity and logging the partial parity. md gathers such writes in its stripe cache
//! and handles a stripe once they are all there. The same here, without a cache of stripes:
//!
//! 1. **Wait where they meet.** Stripe locks are taken in descending slot order
//!    ([`Slots::nth`](super::stripe::Slots::nth)): a write holds its last stripe first, so the
//!    writes that continue it wait for that stripe's lock, on its slot's wait list.
//! 2. **Adopt** ([`ArrayEngine::gather`]): at each slice it plans, the write holding the lock
//!    (the *adopter*) looks at that list and takes in the chain of writes that start where it
//!    ends (each a *follower*): it covers their rows of its last stripe as its own, copies
//!    their data into its buffer ([`ArrayEngine::copy_adopted`]) and plans with them: a stripe
//!    they fill is written whole, with no reads and no log entry. Only rows it has not passed
//!    yet are taken in; a follower that asks for FUA only by an adopter that does too.
//! 3. **Hold**: a write that still leaves its last stripe partial, continues a stream (it
//!    starts where a recent write ended) and is not alone in flight waits for its follower,
//!    its locks kept, in one of [`MAX_HOLDS`] entries, until [`HOLD_ENDS`] other requests ended
//!    without it coming, and at most [`HOLD_NS`] in all. The write
//!    that starts where it ends wakes it as it queues for the lock ([`ArrayEngine::wake_hold_for`]);
//!    the others are woken when their time is up by the next stripe step of any request or by
//!    the worker, and every one of them before the worker waits for writes to drain
//!    ([`ArrayEngine::release_holds`]).
//! 4. **End** ([`ArrayEngine::end_followers`]): before the adopter lets its last stripe's lock
//!    go, a follower that ends in that stripe ends with it (its data was written with the
//!    adopter's, its write-intent bits and dirty mark held meanwhile by its own place in
//!    flight); one that goes on resumes at its own next stripe. An adopter that fails fails
//!    its followers.
//!
//! Adopted followers leave the wait list for the slot's adopted list
//! ([`WorkList::Adopted`]), which only the slot's lock holder touches: a hold's waker may drain
//! the wait list at any time (to find the holder), and must never hide a follower whose data
//! the adopter is about to copy.

use super::array::{ArrayEngine, Store};
use super::members::MemberSet;
use super::platform::{Op, Platform, Status, WorkList};
use super::request::{Phase, RequestState, Side};
use super::stripe::{Span, Step, MAX_LOCK_SLOTS};
use super::wait_list::{park, recheck, wake_all, waker_fence};
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Writes that may hold at once: bounds the memory and locks that wait.
pub const MAX_HOLDS: usize = 8;

/// The longest a write holds for its followers, in all (a safety net: a hold usually ends
/// sooner, by its follower or by [`HOLD_ENDS`]).
pub const HOLD_NS: u64 = 20_000_000;

/// The worker's look at the holds, in milliseconds.
const HOLD_MS: u32 = 20;

/// A hold ends once this many other requests ended without its follower coming: a stream's
/// next write is sent as one of its earlier ones completes, so it comes within a completion
/// or two whatever the drives' speed (microseconds on NVMe, milliseconds under emulation).
pub const HOLD_ENDS: u64 = 4;

/// Recent write ends kept to tell a stream (md keeps none: its stripe cache is the memory).
const STREAM_ENDS: usize = 16;

/// Passes over a wait list for one chain of followers (each pass takes those it finds in
/// order; a stream's arrive in order, so one pass almost always takes the whole chain).
const CHAIN_PASSES: usize = 4;

/// A hold entry's key while it is being filled in.
const CLAIMING: u64 = u64::MAX;

/// What [`ArrayEngine::gather`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Gathered {
    /// Nothing changed.
    Same,
    /// The request covers more now (`StripeState::cover_end`): plan from its new span.
    Grown,
    /// It waits for a follower: it runs again when woken.
    Held,
}

/// What [`ArrayEngine::hold`] did.
enum Hold {
    Held,
    /// The write it would wait for is there already.
    Came,
    /// Every entry is taken.
    NoEntry,
}

/// One write waiting for its follower.
#[derive(Debug)]
struct HoldEntry {
    /// `token * MAX_LOCK_SLOTS + slot + 1` of the holder, 0 when free, [`CLAIMING`] while
    /// filled in.
    key: AtomicU64,
    /// The start of the write it waits for (its end, with its followers).
    want: AtomicU64,
    /// When it began to hold this time (`now_ns`), and how many requests had left the
    /// stripe engine then.
    since: AtomicU64,
    ended_at: AtomicU64,
}

impl HoldEntry {
    const fn new() -> Self {
        Self {
            key: AtomicU64::new(0),
            want: AtomicU64::new(0),
            since: AtomicU64::new(0),
            ended_at: AtomicU64::new(0),
        }
    }
}

fn key_of(token: u64, slot: u32) -> u64 {
    token
        .saturating_mul(u64::from(MAX_LOCK_SLOTS))
        .saturating_add(u64::from(slot) + 1)
}

/// The (token, slot) of a published key.
fn parts_of(key: u64) -> Option<(u64, u32)> {
    if key == 0 || key == CLAIMING {
        return None;
    }
    let k = key - 1;
    let n = u64::from(MAX_LOCK_SLOTS);
    Some((k / n, (k % n) as u32))
}

/// What the array counts of it (`/sys/kernel/debug/graid/held_stripes`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HoldCounts {
    /// Followers taken in.
    pub adopted: u64,
    /// Holds begun.
    pub held: u64,
    /// Holds that ran out of time.
    pub expired: u64,
}

/// The array's holds and what tells a stream.
#[derive(Debug)]
pub struct Holds {
    entries: [HoldEntry; MAX_HOLDS],
    /// Ends of recent writes (`u64::MAX`: none): a write that starts at one continues a stream.
    recent_ends: [AtomicU64; STREAM_ENDS],
    next_end: AtomicU32,
    next_token: AtomicU64,
    /// RAID 5/6 requests in the stripe engine (a write alone never holds), and those that left
    /// it since the array started.
    in_flight: AtomicU32,
    ended: AtomicU64,
    adopted: AtomicU64,
    held: AtomicU64,
    expired: AtomicU64,
}

impl Default for Holds {
    fn default() -> Self {
        Self::new()
    }
}

impl Holds {
    pub const fn new() -> Self {
        Self {
            entries: [const { HoldEntry::new() }; MAX_HOLDS],
            recent_ends: [const { AtomicU64::new(u64::MAX) }; STREAM_ENDS],
            next_end: AtomicU32::new(0),
            next_token: AtomicU64::new(1),
            in_flight: AtomicU32::new(0),
            ended: AtomicU64::new(0),
            adopted: AtomicU64::new(0),
            held: AtomicU64::new(0),
            expired: AtomicU64::new(0),
        }
    }

    pub fn counts(&self) -> HoldCounts {
        HoldCounts {
            adopted: self.adopted.load(Ordering::Relaxed),
            held: self.held.load(Ordering::Relaxed),
            expired: self.expired.load(Ordering::Relaxed),
        }
    }

    /// A free entry, marked as being filled in.
    fn claim(&self) -> Option<&HoldEntry> {
        self.entries.iter().find(|e| {
            e.key
                .compare_exchange(0, CLAIMING, Ordering::SeqCst, Ordering::Relaxed)
                .is_ok()
        })
    }
}

impl<M: Store> ArrayEngine<M> {
    /// Counts of adoptions and holds since the array started.
    pub fn hold_counts(&self) -> HoldCounts {
        self.holds.counts()
    }

    /// A request enters the stripe engine: counted in flight; a write notes whether it
    /// continues a stream, and where it ends, for the next.
    pub(super) fn stripe_entered(&self, state: &RequestState) {
        let holds = &self.holds;
        holds.in_flight.fetch_add(1, Ordering::Relaxed);
        if state.op() != Op::Write {
            return;
        }
        let start = state.start();
        let stream = holds
            .recent_ends
            .iter()
            .any(|e| e.load(Ordering::Relaxed) == start);
        state.stripe().stream.store(stream, Ordering::Relaxed);
        let i = holds.next_end.fetch_add(1, Ordering::Relaxed) as usize % STREAM_ENDS;
        if let Some(end) = holds.recent_ends.get(i) {
            end.store(start.saturating_add(state.sectors()), Ordering::Relaxed);
        }
    }

    /// A request leaves the stripe engine: holds that saw enough others end go on.
    pub(super) fn stripe_left<P: Platform>(&self, p: &P) {
        self.holds.in_flight.fetch_sub(1, Ordering::Relaxed);
        self.holds.ended.fetch_add(1, Ordering::SeqCst);
        let _ = self.wake_due_holds(p, false);
    }

    /// At the plan of a write's slice from row `a` (`lost`: the members lost to it): if its
    /// last stripe is partial, takes in the writes waiting there that continue it, and, if it
    /// is still partial, may hold for the next one (see the module comment).
    pub(super) fn gather<P: Platform>(
        &self,
        p: &P,
        rq: P::Request,
        span: &Span,
        a: u64,
        lost: MemberSet,
    ) -> Gathered {
        let stripe = p.state(rq).stripe();
        let stripe_end = span.last_stripe_end();
        if span.end >= stripe_end {
            return Gathered::Same;
        }
        let slot = span.last_slot();
        let fua = p.fua(rq);
        let side = p.state(rq).side();
        let mut token = stripe.token.load(Ordering::Relaxed);
        if token == 0 {
            token = self.holds.next_token.fetch_add(1, Ordering::Relaxed);
            stripe.token.store(token, Ordering::Relaxed);
        }
        let mut cover = span.end;
        // A second round when a follower came while it was about to hold.
        for _ in 0..2 {
            for _ in 0..CHAIN_PASSES {
                let before = cover;
                p.take_all(WorkList::StripeWait(slot), |w| {
                    if let Some(end) = self.follows(p, w, span, a, cover, (fua, side)) {
                        p.state(w)
                            .stripe()
                            .adopted_by
                            .store(token, Ordering::Relaxed);
                        self.holds.adopted.fetch_add(1, Ordering::Relaxed);
                        cover = end;
                        p.push(WorkList::Adopted(slot), w);
                    } else {
                        p.push(WorkList::StripeWait(slot), w);
                    }
                });
                if cover == before || cover >= stripe_end {
                    break;
                }
            }
            if cover > span.end {
                stripe.cover_end.store(cover, Ordering::Relaxed);
            }
            if cover >= stripe_end || !self.may_hold(p, rq, lost) {
                break;
            }
            match self.hold(p, rq, slot, token, cover) {
                Hold::Held => return Gathered::Held,
                Hold::Came => {}
                Hold::NoEntry => break,
            }
        }
        if cover > span.end {
            Gathered::Grown
        } else {
            Gathered::Same
        }
    }

    /// If waiting request `w` is a write an adopter covering its span up to `cover` may take
    /// in (its rows from `a` on not passed yet): where its part of the adopter's last stripe
    /// ends.
    fn follows<P: Platform>(
        &self,
        p: &P,
        w: P::Request,
        span: &Span,
        a: u64,
        cover: u64,
        (fua, side): (bool, Side),
    ) -> Option<u64> {
        let ws = p.state(w);
        let st = ws.stripe();
        let waiting = ws.op() == Op::Write
            && ws.phase() == Phase::Stripe
            && ws.status() == Status::Ok
            && st.step() == Step::Lock
            && st.slice_start() == u64::MAX
            && st.adopted_by.load(Ordering::Relaxed) == 0
            && st.cover_end.load(Ordering::Relaxed) == 0;
        // Mapped alike (a reshape's two sides never share a stripe).
        let alike = ws.side() == side;
        if !waiting || !alike || ws.start() != cover || (p.fua(w) && !fua) {
            return None;
        }
        let end = ws
            .start()
            .saturating_add(ws.sectors())
            .min(span.last_stripe_end());
        (end > cover && span.lowest_row(cover, end) >= a).then_some(end)
    }

    /// A write that is still partial may hold: it continues a stream, others are in flight
    /// (its follower may be among them), nothing waits on the array's writes, every member
    /// is in use, and its time is not up.
    fn may_hold<P: Platform>(&self, p: &P, rq: P::Request, lost: MemberSet) -> bool {
        let stripe = p.state(rq).stripe();
        if !stripe.stream.load(Ordering::Relaxed)
            || p.fua(rq)
            || self.holds.in_flight.load(Ordering::Relaxed) < 2
            || self.frozen.load(Ordering::SeqCst)
            || !lost.is_empty()
            || stripe.step() != Step::Plan
        {
            return false;
        }
        let since = stripe.hold_since.load(Ordering::Relaxed);
        since == 0 || p.now_ns().saturating_sub(since) < HOLD_NS
    }

    /// Holds `rq` (locks kept, on `slot`'s wait list) for a write starting at `want`, unless
    /// no entry is free or that write came meanwhile.
    fn hold<P: Platform>(&self, p: &P, rq: P::Request, slot: u32, token: u64, want: u64) -> Hold {
        let Some(entry) = self.holds.claim() else {
            return Hold::NoEntry;
        };
        let now = p.now_ns();
        let key = key_of(token, slot);
        entry.want.store(want, Ordering::Relaxed);
        entry.since.store(now, Ordering::Relaxed);
        entry
            .ended_at
            .store(self.holds.ended.load(Ordering::SeqCst), Ordering::Relaxed);
        entry.key.store(key, Ordering::SeqCst);
        // A follower that queued before the entry was published did not see it: look now
        // (`wait_list.rs`: it sees the entry after its push, or this sees it on the list).
        waker_fence();
        let mut came = false;
        p.take_all(WorkList::StripeWait(slot), |w| {
            let ws = p.state(w);
            came |= ws.start() == want && ws.op() == Op::Write;
            p.push(WorkList::StripeWait(slot), w);
        });
        if came {
            // Plan now. Had a waker taken the entry already, it finds nobody to wake.
            let _ = entry
                .key
                .compare_exchange(key, 0, Ordering::SeqCst, Ordering::Relaxed);
            return Hold::Came;
        }
        let stripe = p.state(rq).stripe();
        if stripe.hold_since.load(Ordering::Relaxed) == 0 {
            stripe.hold_since.store(now.max(1), Ordering::Relaxed);
        }
        self.holds.held.fetch_add(1, Ordering::Relaxed);
        stripe.set_step(Step::Held);
        // From the push on `rq` may run again elsewhere: only the entry is touched. A waker
        // may take the entry before `rq` is on the list to be found (`wait_list.rs`).
        park(
            p,
            WorkList::StripeWait(slot),
            rq,
            || entry.key.load(Ordering::SeqCst) == key,
            || self.wake_holder(p, slot, token),
        );
        p.kick_worker_after(HOLD_MS);
        Hold::Held
    }

    /// A write starting at `start` queued on `slot`'s list: wakes the holder waiting for it.
    /// After the write's push and `park`'s fence (`wait_list.rs`): a holder that published its
    /// entry after that fence finds the write on the list itself.
    pub(super) fn wake_hold_for<P: Platform>(&self, p: &P, slot: u32, start: u64) {
        for entry in &self.holds.entries {
            let key = entry.key.load(Ordering::SeqCst);
            let Some((token, s)) = parts_of(key) else {
                continue;
            };
            if s == slot
                && entry.want.load(Ordering::Relaxed) == start
                && entry
                    .key
                    .compare_exchange(key, 0, Ordering::SeqCst, Ordering::Relaxed)
                    .is_ok()
            {
                self.wake_holder(p, slot, token);
            }
        }
    }

    /// Runs the holder with `token` on `slot`'s list again (the one who freed its entry).
    fn wake_holder<P: Platform>(&self, p: &P, slot: u32, token: u64) {
        // After the entry was taken (`wait_list.rs`).
        waker_fence();
        p.take_all(WorkList::StripeWait(slot), |w| {
            let st = p.state(w).stripe();
            if st.token.load(Ordering::Relaxed) == token && st.step() == Step::Held {
                st.set_step(Step::Plan);
                p.queue_stripe_work(w);
            } else {
                p.push(WorkList::StripeWait(slot), w);
            }
        });
        // The holder (woken here or by another) may have ended and drained the list while
        // the others were off it: then nobody else wakes those pushed back.
        let list = WorkList::StripeWait(slot);
        recheck(|| self.locks().is_locked(slot), || wake_all(p, list));
    }

    /// Wakes the holds whose time is up, or all of them (`all`: before the worker waits for
    /// writes to drain). The worker; it looks again while any is left.
    pub(super) fn release_holds<P: Platform>(&self, p: &P, all: bool) {
        if self.wake_due_holds(p, all) {
            p.kick_worker_after(HOLD_MS);
        }
    }

    /// Wakes the holds whose time is up (or all). Every stripe step looks too, so a hold ends
    /// on time even while the worker is busy elsewhere (a superblock write under memory
    /// pressure, say). True if some are left.
    pub(super) fn wake_due_holds<P: Platform>(&self, p: &P, all: bool) -> bool {
        let now = p.now_ns();
        let mut left = false;
        for entry in &self.holds.entries {
            let key = entry.key.load(Ordering::SeqCst);
            let Some((token, slot)) = parts_of(key) else {
                continue;
            };
            let ended = self
                .holds
                .ended
                .load(Ordering::SeqCst)
                .saturating_sub(entry.ended_at.load(Ordering::Relaxed));
            let due = all
                || ended >= HOLD_ENDS
                || now.saturating_sub(entry.since.load(Ordering::Relaxed)) >= HOLD_NS;
            if !due {
                left = true;
            } else if entry
                .key
                .compare_exchange(key, 0, Ordering::SeqCst, Ordering::Relaxed)
                .is_ok()
            {
                self.holds.expired.fetch_add(1, Ordering::Relaxed);
                self.wake_holder(p, slot, token);
            }
        }
        left
    }

    /// Copies the followers' data for array sectors `[from, to)` (past `rq`'s own end, in its
    /// last stripe) into buffer column `column` at `column_offset`.
    pub(super) fn copy_adopted<P: Platform>(
        &self,
        p: &P,
        rq: P::Request,
        span: &Span,
        (from, to): (u64, u64),
        column: u32,
        column_offset: u64,
    ) {
        let token = p.state(rq).stripe().token.load(Ordering::Relaxed);
        let slot = span.last_slot();
        p.take_all(WorkList::Adopted(slot), |w| {
            if p.state(w).stripe().adopted_by.load(Ordering::Relaxed) == token {
                self.copy_segments(p, rq, w, (from, to), column, column_offset, true);
            }
            p.push(WorkList::Adopted(slot), w);
        });
    }

    /// `rq` ends with `status`, still holding its last stripe's lock (`slot`): its followers
    /// that end in that stripe end with it; the others go on from their next stripe (or fail
    /// with it).
    pub(super) fn end_followers<P: Platform>(
        &self,
        p: &P,
        rq: P::Request,
        slot: u32,
        status: Status,
    ) {
        let stripe = p.state(rq).stripe();
        let token = stripe.token.load(Ordering::Relaxed);
        let cover = stripe.cover_end.load(Ordering::Relaxed);
        if token == 0 {
            return;
        }
        // Rows count from a request's first stripe: its second starts a chunk in (of the
        // geometry that maps it and its followers alike: `follows`).
        let next_stripe = u64::from(self.map_of(p.state(rq)).0.chunk_sectors());
        p.take_all(WorkList::Adopted(slot), |w| {
            let ws = p.state(w);
            let st = ws.stripe();
            if st.adopted_by.load(Ordering::Relaxed) != token {
                // Never: only the slot's holder adopts. Let it wait for the lock again.
                p.push(WorkList::StripeWait(slot), w);
                return;
            }
            st.adopted_by.store(0, Ordering::Relaxed);
            if status == Status::Ok {
                p.carried(w, rq);
            }
            let ends_here = ws.start().saturating_add(ws.sectors()) <= cover;
            if status != Status::Ok {
                self.stripe_end(p, w, Status::IoError);
            } else if ends_here {
                self.stripe_end(p, w, Status::Ok);
            } else {
                // Its first stripe is written: it goes on from its second.
                st.resume_at(next_stripe);
                p.queue_stripe_work(w);
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::{key_of, parts_of, CLAIMING, MAX_LOCK_SLOTS};

    #[test]
    fn a_hold_key_names_its_token_and_slot() {
        for (token, slot) in [(1, 0), (1, MAX_LOCK_SLOTS - 1), (12345, 77)] {
            assert_eq!(parts_of(key_of(token, slot)), Some((token, slot)));
        }
        assert_eq!(parts_of(0), None);
        assert_eq!(parts_of(CLAIMING), None);
    }
}
