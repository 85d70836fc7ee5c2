// SPDX-License-Identifier: GPL-2.0

//! The partial parity log on the write path and in the worker (the pure part is `ppl.rs`).
//!
//! - A RAID 5/6 write slice that does not write every data column (a read-modify-write, a
//!   reconstruct-write, a degraded write) computes its parity as usual, then the partial
//!   parity of its rows from the buffer it already holds (the new P minus the new data of the
//!   columns it writes; for Q the same with each column's coefficient), and writes it with FUA
//!   to the log of each in-sync parity member before any data or parity write goes out. The
//!   log write overlaps nothing: the slice's parity is already computed.
//! - A full-stripe write logs nothing, unless one of its stripes may hold a replayable entry (one bit per
//!   stripe lock slot): then a header-only *barrier* voids the older entries of its rows.
//! - Space: each member's ring is two halves; epoch `e` appends to half `e % 2` with one atomic
//!   add. When a half is full the worker *switches* to epoch `e + 1` and the other half, at
//!   once if epoch `e − 1` is retired already. It retires an epoch in the background as soon
//!   as a newer one took over and the older one's logged writes are done: it rewrites every
//!   member's head with the oldest epoch still live (`FUA`, after an empty flush of every
//!   member: every completed write is durable first), which voids the older half's entries. So writes wait only if a half fills
//!   before the other is retired.
//! - The whole log is voided (the heads skip past every epoch written) when the array is marked
//!   clean (nothing to replay then), at the start, and when a device joins (its ring may hold
//!   entries of these epochs from an earlier life): then no logged write may be in flight, and
//!   new ones wait while the worker drains them.
//! - No lock on the path: a write counts itself in its epoch's flight count, then checks that
//!   the epoch is still current and no void is under way (SeqCst on both sides: either the
//!   worker sees the count or the write sees the change and tries again).

use super::array::{ArrayEngine, Store};
use super::durable::FlushTickets;
use super::geometry::MAX_MEMBERS;
use super::layout::StripeMap;
use super::members::MemberSet;
use super::platform::{LogIo, MemberEvent, Platform, Status, WorkList};
use super::ppl::BLOCK_BYTES;
use super::ppl::{
    encode_entry, encode_head, gf_pow2, Entry, EntryKind, LogArea, LogId, ParityKind,
};
use super::request::Phase;
use super::stripe::{Slots, Step};
use super::superblock::Area;
use super::wait_list::{park, wake_all};
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

/// The log's state in memory.
#[derive(Debug)]
pub struct LogState {
    /// Where every member's log lies; `None`: the array has no log.
    area: Option<LogArea>,
    /// Sectors of the ring in use: the area's, or fewer once a reshape moved the data into
    /// the end of the area ([`ArrayEngine::shrink_log`]).
    ring_sectors: AtomicU64,
    /// Next free offset of each member in each half of its ring (32 bits: the engine stays
    /// small enough to be built on a kernel stack).
    cursors: [[AtomicU32; MAX_MEMBERS as usize]; 2],
    /// The epoch entries are written in now (in half `epoch % 2`).
    epoch: AtomicU64,
    /// The oldest epoch whose entries are not void: what the heads on disk hold. `epoch` or
    /// `epoch - 1`.
    live_from: AtomicU64,
    /// The last sequence number given to a logged write.
    seq: AtomicU64,
    /// Logged writes whose member writes have not all completed, by epoch parity.
    in_flight: [AtomicU32; 2],
    /// The worker is voiding the whole log: no new entry until it is done.
    wrapping: AtomicBool,
    /// A void of the whole log is wanted (a device joined).
    wrap_wanted: AtomicBool,
    /// The current half is full on some member: a switch is wanted.
    switch_wanted: AtomicBool,
    /// Flushes of every member, begun and ended: what data may not be durable yet
    /// (`durable.rs`).
    pub(super) flushes: FlushTickets,
    /// Counters for DETAIL: entries, barriers, wraps.
    entries: AtomicU64,
    barriers: AtomicU64,
    wraps: AtomicU64,
}

impl LogState {
    pub fn new(area: Option<LogArea>, epoch: u64) -> Self {
        Self {
            area,
            ring_sectors: AtomicU64::new(area.map_or(0, |a| a.ring_sectors)),
            cursors: [const { [const { AtomicU32::new(0) }; MAX_MEMBERS as usize] }; 2],
            epoch: AtomicU64::new(epoch),
            live_from: AtomicU64::new(epoch),
            seq: AtomicU64::new(0),
            in_flight: [const { AtomicU32::new(0) }; 2],
            wrapping: AtomicBool::new(false),
            wrap_wanted: AtomicBool::new(false),
            switch_wanted: AtomicBool::new(false),
            flushes: FlushTickets::new(),
            entries: AtomicU64::new(0),
            barriers: AtomicU64::new(0),
            wraps: AtomicU64::new(0),
        }
    }

    /// Flushes of every member begun and ended since the array started.
    pub fn flush_counts(&self) -> (u64, u64) {
        self.flushes.counts()
    }

    pub fn area(&self) -> Option<LogArea> {
        self.area.map(|area| LogArea {
            ring_sectors: self.ring_sectors.load(Ordering::Relaxed),
            ..area
        })
    }

    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Relaxed)
    }

    /// The epochs up to which entries may exist on disk (the array's start: the newest head
    /// holds `epoch`, so entries of `epoch + 1` may exist too).
    pub(super) fn set_epoch(&self, epoch: u64) {
        let newest = epoch.saturating_add(1);
        self.epoch.store(newest, Ordering::SeqCst);
        self.live_from.store(newest, Ordering::SeqCst);
    }

    /// Entries and barriers written, and switches to a new epoch, since the array started.
    pub fn counts(&self) -> (u64, u64, u64) {
        (
            self.entries.load(Ordering::Relaxed),
            self.barriers.load(Ordering::Relaxed),
            self.wraps.load(Ordering::Relaxed),
        )
    }

    /// Empties half `half` of every member's ring.
    fn reset_half(&self, half: usize) {
        for c in self.cursors.get(half).into_iter().flatten() {
            c.store(0, Ordering::SeqCst);
        }
    }

    /// Takes `sectors` of member `member`'s ring in half `half`; its ring offset, or `None`
    /// if the half is full.
    fn reserve(&self, area: &LogArea, half: usize, member: u32, sectors: u64) -> Option<u64> {
        let cursor = self.cursors.get(half)?.get(member as usize)?;
        let size = area.half_sectors();
        // A slice adds at most once per member and epoch (it waits for the next one if the
        // half is full): the count stays far below 2^32.
        let n = u32::try_from(sectors).ok()?;
        let at = u64::from(cursor.fetch_add(n, Ordering::Relaxed));
        (at.checked_add(sectors)? <= size).then(|| size * half as u64 + at)
    }

    fn flight(&self, epoch: u64) -> &AtomicU32 {
        &self.in_flight[(epoch % 2) as usize]
    }
}

/// By epoch parity, the lock slots whose stripes may hold a replayable entry: one bit per
/// slot for each half of the ring, half 0's first (the engine's [`Store::live_words`]).
struct LiveSlots<'a> {
    words: &'a [AtomicU64],
}

impl LiveSlots<'_> {
    /// The word and bit of lock slot `slot` in half `half`.
    fn bit(&self, half: usize, slot: u32) -> Option<(&AtomicU64, u64)> {
        let per_half = self.words.len() / 2;
        let at = (slot / 64) as usize;
        if at >= per_half {
            return None;
        }
        let word = self.words.get(half * per_half + at)?;
        Some((word, 1u64 << (slot % 64)))
    }

    /// Whether any of `slots` may hold a replayable entry.
    fn any(&self, slots: Slots) -> bool {
        (0..slots.count()).any(|i| {
            (0..2).any(|h| {
                self.bit(h, slots.nth(i))
                    .is_some_and(|(w, b)| w.load(Ordering::SeqCst) & b != 0)
            })
        })
    }

    fn set(&self, half: usize, slots: Slots) {
        for i in 0..slots.count() {
            if let Some((w, b)) = self.bit(half, slots.nth(i)) {
                w.fetch_or(b, Ordering::SeqCst);
            }
        }
    }

    /// Forgets the live slots of half `half` (its entries are void now).
    fn clear(&self, half: usize) {
        let per_half = self.words.len() / 2;
        for w in self.words.iter().skip(half * per_half).take(per_half) {
            w.store(0, Ordering::SeqCst);
        }
    }
}

/// What a slice logs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum LogNeed {
    /// Nothing: go on with the writes.
    None,
    /// The partial parity of a write that leaves columns alone.
    Partial,
    /// A barrier: a full write over rows an older entry may cover.
    Barrier,
}

impl<M: Store> ArrayEngine<M> {
    /// The array has a partial parity log.
    pub fn has_log(&self) -> bool {
        self.log.area.is_some()
    }

    /// The log's state (for DETAIL and the platform's replay).
    pub fn log(&self) -> &LogState {
        &self.log
    }

    fn live_slots(&self) -> LiveSlots<'_> {
        LiveSlots {
            words: self.members.live_words(),
        }
    }

    /// Whose entries this array writes: its UUID and the key its superblocks record (a new
    /// one at every start; the replay before it takes the last life's key).
    pub fn log_id(&self) -> LogId {
        LogId {
            uuid: self.superblock.array_uuid,
            key: self.superblock.log_key,
        }
    }

    /// The worker: a wrap is wanted (a device joined the array).
    pub(super) fn want_log_wrap<P: Platform>(&self, p: &P) {
        if self.has_log() {
            self.log.wrap_wanted.store(true, Ordering::SeqCst);
            p.kick_worker();
        }
    }

    /// Sends the log writes of the current slice of `rq` (parity computed), or queues it
    /// behind a wrap; false if there is nothing to log (no in-sync parity member): the caller
    /// sends the writes. `need` is not [`LogNeed::None`].
    pub(super) fn send_log<P: Platform>(&self, p: &P, rq: P::Request, slice: &LoggedSlice) -> bool {
        let Some(area) = self.log.area() else {
            return false;
        };
        let state = p.state(rq);
        let stripe = state.stripe();
        let log = &self.log;
        let wait = |seen: u64| {
            self.release_log(p, rq);
            stripe.set_step(Step::LogWait);
            // A switch or void may end after `seen` and drain the list before the push
            // (`wait_list.rs`).
            park(
                p,
                WorkList::LogWait,
                rq,
                || log.epoch.load(Ordering::SeqCst) == seen || log.wrapping.load(Ordering::SeqCst),
                || wake_all(p, WorkList::LogWait),
            );
            p.kick_worker();
        };
        // Counted in the epoch first, then the epoch and the void checked (the worker moves on,
        // then looks at the count).
        self.release_log(p, rq);
        let epoch = log.epoch.load(Ordering::SeqCst);
        stripe.hold_log(epoch);
        log.flight(epoch).fetch_add(1, Ordering::SeqCst);
        if log.wrapping.load(Ordering::SeqCst) || log.epoch.load(Ordering::SeqCst) != epoch {
            wait(epoch);
            return true;
        }
        let half = (epoch % 2) as usize;
        let len = slice.sectors;
        let (kind, payload) = match slice.need {
            LogNeed::Barrier => (EntryKind::Barrier, 0),
            _ => (EntryKind::Partial, len),
        };
        // The in-sync parity members of the slice's stripes take an entry each: of a partial
        // write P's and Q's partial parity, of a full one a barrier.
        let mut targets: [Option<(u32, ParityKind)>; 2] = [None, None];
        let mut barrier_members = MemberSet::EMPTY;
        if kind == EntryKind::Partial {
            let map = slice.map;
            let pq = [(Some(map.p()), ParityKind::P), (map.q(), ParityKind::Q)];
            for (target, (member, parity)) in targets.iter_mut().zip(pq) {
                if let Some(member) = member.filter(|&m| self.usable(m, MemberSet::EMPTY)) {
                    *target = Some((member, parity));
                }
            }
        } else {
            barrier_members = slice
                .parity_members
                .iter()
                .filter(|&m| self.usable(m, MemberSet::EMPTY))
                .fold(MemberSet::EMPTY, MemberSet::with);
        }
        let members = targets
            .iter()
            .flatten()
            .fold(barrier_members, |set, &(m, _)| set.with(m));
        if members.is_empty() {
            self.release_log(p, rq);
            return false;
        }
        // Ring space on every target, or wait for a wrap.
        let entry_sectors = LogArea::entry_sectors(payload);
        let mut at = [0u64; MAX_MEMBERS as usize];
        for m in members.iter() {
            match (
                log.reserve(&area, half, m, entry_sectors),
                at.get_mut(m as usize),
            ) {
                (Some(offset), Some(slot_at)) => *slot_at = offset,
                _ => {
                    log.switch_wanted.store(true, Ordering::SeqCst);
                    wait(epoch);
                    return true;
                }
            }
        }
        // The partial parity of each target, in the parity member's new-data column (unused:
        // a parity member has no new data).
        let n = self.geometry().members();
        for &(target, parity) in targets.iter().flatten() {
            let column = n + target;
            p.copy_column(rq, target, column, 0, len);
            for (m, &(f, e)) in (0..n).zip(slice.written.iter()) {
                if e == 0 {
                    continue;
                }
                let coef = match parity {
                    ParityKind::P => 1,
                    ParityKind::Q => match slice.map.syndrome_slot(m) {
                        Some(s) => gf_pow2(s),
                        None => continue,
                    },
                };
                let from = if slice.rmw { n + m } else { m };
                p.accumulate_column(rq, from, column, coef, u64::from(f), u64::from(e - f));
            }
        }
        // Relaxed: the replay orders entries of the same rows by it, and those come from
        // slices the stripe lock already orders (a read-modify-write of one atomic always
        // reads its latest value); nothing else is published through it.
        let seq = log.seq.fetch_add(1, Ordering::Relaxed).wrapping_add(1);
        let mut entry = Entry {
            kind,
            parity: ParityKind::P,
            epoch,
            seq,
            start: slice.start,
            sectors: len,
            members: n,
            written: match kind {
                EntryKind::Partial => slice.written,
                EntryKind::Barrier => [(0, 0); MAX_MEMBERS as usize],
            },
            payload_crc: 0,
            targets: members,
        };
        self.live_slots().set(half, slice.slots);
        stripe.set_step(Step::Log);
        state.begin_pass(Phase::Stripe);
        // Headers first (each target's, or one barrier for all), then the writes.
        let id = &self.log_id();
        let mut ios = [None; 2];
        for (index, (&(member, parity), io)) in
            (0u32..).zip(targets.iter().flatten().zip(ios.iter_mut()))
        {
            let column = n + member;
            entry.parity = parity;
            entry.payload_crc = p.column_crc(rq, column, 0, payload);
            p.set_log_header(rq, index, &|block| encode_entry(id, &entry, block));
            *io = Some((member, index, column));
        }
        if !barrier_members.is_empty() {
            p.set_log_header(rq, 0, &|block| encode_entry(id, &entry, block));
        }
        let barriers = barrier_members.iter().map(|m| (m, 0, 0));
        for (member, header, column) in ios.into_iter().flatten().chain(barriers) {
            let io = LogIo {
                member,
                sector: area.ring_sector(at.get(member as usize).copied().unwrap_or(0)),
                header,
                column,
                sectors: payload,
            };
            state.add_piece();
            if p.submit_log(rq, &io).is_err() {
                let _ = state.put(Status::IoError);
            }
        }
        let counter = match kind {
            EntryKind::Partial => &log.entries,
            EntryKind::Barrier => &log.barriers,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        if state.put(Status::Ok).is_some() {
            p.queue_stripe_work(rq);
        }
        true
    }

    /// Whether the slice being planned must log: a partial write always, a full one where one
    /// of its stripes (`slots`) may hold a replayable entry.
    pub(super) fn log_need(&self, full: bool, slots: Slots) -> LogNeed {
        if !self.has_log() || self.log_suspended() {
            LogNeed::None
        } else if !full {
            LogNeed::Partial
        } else if self.live_slots().any(slots) {
            LogNeed::Barrier
        } else {
            LogNeed::None
        }
    }

    /// The slice's logged write is done (or will not happen): no longer in flight.
    pub(super) fn release_log<P: Platform>(&self, p: &P, rq: P::Request) {
        if let Some(epoch) = p.state(rq).stripe().drop_log() {
            let log = &self.log;
            let left = log.flight(epoch).fetch_sub(1, Ordering::SeqCst);
            // The last write of an epoch the worker waits for: a void, or the retirement of
            // an epoch a newer one took over from.
            if left == 1
                && (log.wrapping.load(Ordering::SeqCst) || epoch < log.epoch.load(Ordering::SeqCst))
            {
                p.kick_worker();
            }
        }
    }

    /// The worker: voids the whole log when wanted, retires the older epoch once its writes
    /// are done, and switches to a new epoch when the current half is full.
    pub(super) fn log_step<P: Platform>(&self, p: &P) {
        if !self.has_log() {
            return;
        }
        let log = &self.log;
        if log.wrap_wanted.load(Ordering::SeqCst) {
            log.wrapping.store(true, Ordering::SeqCst);
            if log.in_flight.iter().all(|f| f.load(Ordering::SeqCst) == 0) {
                self.void_log(p);
            }
            // Else the last one to finish kicks the worker.
            return;
        }
        let epoch = log.epoch.load(Ordering::SeqCst);
        let live_from = log.live_from.load(Ordering::SeqCst);
        if live_from < epoch && log.flight(live_from).load(Ordering::SeqCst) == 0 {
            // Every write the older half protects is done: the heads move on, which makes
            // those writes durable first and voids the half.
            self.write_heads(p, epoch);
            log.live_from.store(epoch, Ordering::SeqCst);
            self.live_slots().clear((live_from % 2) as usize);
        }
        if log.switch_wanted.load(Ordering::SeqCst) && log.live_from.load(Ordering::SeqCst) == epoch
        {
            let next = epoch.wrapping_add(1);
            log.reset_half((next % 2) as usize);
            log.switch_wanted.store(false, Ordering::SeqCst);
            log.epoch.store(next, Ordering::SeqCst);
            log.wraps.fetch_add(1, Ordering::Relaxed);
            wake_all(p, WorkList::LogWait);
            // The half just left is retired once its writes are done (they kick the worker).
            p.kick_worker();
        }
    }

    /// Writes every working member's head: entries of epochs before `live_from` are void.
    fn write_heads<P: Platform>(&self, p: &P, live_from: u64) {
        let Some(area) = self.log.area() else {
            return;
        };
        let uuid = self.superblock.array_uuid;
        // Every member's writes the voided entries protect are durable first, on every
        // member at once: one head landing before another member's flush would void entries
        // that member's lost writes still need.
        self.flush_all(p);
        let targets = self.writable_members();
        let failed = p.write_log_head(targets, area.offset, &|block: &mut [u8; BLOCK_BYTES]| {
            encode_head(&uuid, live_from, block)
        });
        for m in failed.iter() {
            self.try_fail(p, m, MemberEvent::SuperblockWriteFailed);
        }
    }

    /// Voids every entry (the heads skip past every epoch that may have been written) and
    /// starts a new epoch in an empty ring, then lets the writes waiting for the log go. The
    /// worker (or the array's start, before any write), with no logged write in flight.
    pub fn void_log<P: Platform>(&self, p: &P) {
        if !self.has_log() {
            return;
        }
        let log = &self.log;
        log.wrapping.store(true, Ordering::SeqCst);
        let epoch = log.epoch.load(Ordering::SeqCst).wrapping_add(1);
        self.write_heads(p, epoch);
        for half in 0..2 {
            log.reset_half(half);
            self.live_slots().clear(half);
        }
        log.live_from.store(epoch, Ordering::SeqCst);
        log.epoch.store(epoch, Ordering::SeqCst);
        log.wraps.fetch_add(1, Ordering::Relaxed);
        log.switch_wanted.store(false, Ordering::SeqCst);
        log.wrap_wanted.store(false, Ordering::SeqCst);
        log.wrapping.store(false, Ordering::SeqCst);
        wake_all(p, WorkList::LogWait);
    }

    /// The log's ring ends before member sector `end` (a reshape's new data offset; the
    /// caller checked that a log of [`MIN_LOG_SECTORS`] is left). With the log void and
    /// nothing logging (a reshape's start, the queue frozen).
    ///
    /// [`MIN_LOG_SECTORS`]: super::ppl::MIN_LOG_SECTORS
    pub(super) fn shrink_log(&self, end: u64) {
        let Some(area) = self.log.area() else {
            return;
        };
        let ring = LogArea::new(Area {
            offset: area.offset,
            sectors: end.saturating_sub(area.offset),
        })
        .map_or(area.ring_sectors, |a| a.ring_sectors.min(area.ring_sectors));
        self.log.ring_sectors.store(ring, Ordering::Relaxed);
    }

    /// The worker, marking the array clean (no write in flight): voids the log if anything
    /// was logged since the last void, so the next dirty period starts with empty rings and
    /// no barrier to write.
    pub(super) fn void_log_if_used<P: Platform>(&self, p: &P) {
        let log = &self.log;
        let used = log
            .cursors
            .iter()
            .flatten()
            .any(|c| c.load(Ordering::Relaxed) > 0);
        let idle = log.in_flight.iter().all(|f| f.load(Ordering::SeqCst) == 0);
        if self.has_log() && used && idle {
            self.void_log(p);
        }
    }
}

/// A slice that logs, as the stripe engine planned it.
pub(super) struct LoggedSlice {
    pub need: LogNeed,
    /// The lock slots of the slice's stripes.
    pub slots: Slots,
    /// The slice's rows: data-area sectors (the same on every member).
    pub start: u64,
    pub sectors: u64,
    /// The roles of its stripe (a partial slice has one).
    pub map: StripeMap,
    /// The parity members of every stripe it crosses (where a barrier goes).
    pub parity_members: MemberSet,
    /// Each member's written rows relative to `start` (`(0, 0)`: none).
    pub written: [(u32, u32); MAX_MEMBERS as usize],
    /// A read-modify-write: member `m`'s new data is in column `members + m`, not `m`.
    pub rmw: bool,
}
