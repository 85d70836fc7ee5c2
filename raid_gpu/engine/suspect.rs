// SPDX-License-Identifier: GPL-2.0

//! Parity a helper computed that nobody checked, healed once a helper is caught lying.
//!
//! The platform checks a sample of a helper's results (`offload::verify_due`: a new helper's
//! first jobs, then one a second): a helper that turns liar between samples gets its parity
//! onto the members, where a degraded read or a rebuild would turn it into wrong data. So:
//!
//! - every write whose parity the platform took from a helper unchecked marks the regions of
//!   its stripes ([`ArrayEngine::parity_unchecked`]), before its member writes are sent;
//! - when any helper is caught lying (the platform counts catches, [`Events::helper_catches`]),
//!   the worker moves the marks into the healing set and starts a resync from the start that
//!   walks only those regions (with a write-intent bitmap their bits are written first, so a
//!   crash meanwhile resyncs them again; without one the superblocks' pending resync walks
//!   everything after a crash). The superblocks say a resync is pending until it ends, so the
//!   array is not started degraded meanwhile, and an administrator's `fail` is refused (every
//!   member holds the last right copy of those stripes);
//! - the platform keeps parity that holds the only copy of some data (a member missing) from
//!   the helper altogether ([`ArrayEngine::parity_must_be_checked`]): no later heal could
//!   recompute it.
//!
//! Marks are dropped only by the heal that walks them: a helper may lie long before it is
//! caught, and a sample it passed says nothing about the jobs before it. A helper's results
//! that end after its catch are never used (the platform computes those jobs again), so every
//! result of a liar that reached a member was marked before its catch was counted.
//!
//! [`Events::helper_catches`]: super::platform::Events::helper_catches

use super::array::{ArrayEngine, Store};
use super::bitmap::{Regions, MIN_REGION_SECTORS};
use super::platform::Platform;
use core::ops::Range;
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

/// Words of region bits: at most `64 * WORDS` regions, however large the array.
const WORDS: usize = 16;
/// The most regions: the walk is cut into at most this many.
pub const MAX_SUSPECT_REGIONS: u64 = 64 * WORDS as u64;

/// A set of regions, one bit each.
#[derive(Debug, Default)]
struct RegionBits([AtomicU64; WORDS]);

impl RegionBits {
    fn set(&self, range: Range<u64>) {
        for r in range.take(MAX_SUSPECT_REGIONS as usize) {
            if let Some(word) = self.0.get((r / 64) as usize) {
                word.fetch_or(1 << (r % 64), Ordering::SeqCst);
            }
        }
    }

    fn clear(&self, r: u64) {
        if let Some(word) = self.0.get((r / 64) as usize) {
            word.fetch_and(!(1 << (r % 64)), Ordering::SeqCst);
        }
    }

    fn get(&self, r: u64) -> bool {
        self.0
            .get((r / 64) as usize)
            .is_some_and(|w| w.load(Ordering::SeqCst) & (1 << (r % 64)) != 0)
    }

    fn any_in(&self, range: Range<u64>) -> bool {
        range
            .take(MAX_SUSPECT_REGIONS as usize)
            .any(|r| self.get(r))
    }

    fn count(&self) -> u64 {
        self.0
            .iter()
            .map(|w| u64::from(w.load(Ordering::SeqCst).count_ones()))
            .sum()
    }

    /// Moves every bit of `from` into `self`; true if any moved.
    fn take_from(&self, from: &RegionBits) -> bool {
        let mut any = false;
        for (to, from) in self.0.iter().zip(from.0.iter()) {
            let bits = from.swap(0, Ordering::SeqCst);
            any |= bits != 0;
            to.fetch_or(bits, Ordering::SeqCst);
        }
        any
    }

    fn clear_all(&self) {
        for w in &self.0 {
            w.store(0, Ordering::SeqCst);
        }
    }

    /// Regions `2^by` times as large: each bit moves to the region holding its own.
    fn coarsen(&self, by: u32) {
        if by == 0 {
            return;
        }
        let mut old = [0u64; WORDS];
        for (o, w) in old.iter_mut().zip(self.0.iter()) {
            *o = w.swap(0, Ordering::SeqCst);
        }
        for (i, word) in (0u64..).zip(old) {
            for b in (0..64).filter(|b| word & (1 << b) != 0) {
                let r = (i * 64 + b).checked_shr(by).unwrap_or(0);
                self.set(r..r + 1);
            }
        }
    }
}

/// log2 of the suspect regions' size for a walk of `walk_sectors`: the smallest power of two
/// that cuts it into at most [`MAX_SUSPECT_REGIONS`] (`None`: none does).
fn region_shift(walk_sectors: u64) -> Option<u32> {
    let wanted = walk_sectors
        .div_ceil(MAX_SUSPECT_REGIONS)
        .max(MIN_REGION_SECTORS);
    wanted.checked_next_power_of_two().map(u64::trailing_zeros)
}

/// The array's unchecked parity: where it lies, and the heal walking it.
#[derive(Debug)]
pub struct SuspectParity {
    /// log2 of the regions' size (at most [`MAX_SUSPECT_REGIONS`] of them over the resync
    /// walk; 0: none). Changed only by a resize, with no request in flight.
    shift: AtomicU32,
    /// Regions some write's unchecked parity went to since the last heal walked them.
    marked: RegionBits,
    /// Regions the running heal has yet to pass.
    healing: RegionBits,
    /// Catches of lying helpers this array has acted on ([`Events::helper_catches`]).
    ///
    /// [`Events::helper_catches`]: super::platform::Events::helper_catches
    seen_catches: AtomicU64,
    /// The running resync is a heal only (the array was in sync when it started): without a
    /// bitmap it walks only the healing regions.
    heal_only: AtomicBool,
    /// The resync that walks the healing regions has begun (from the start, after the last
    /// catch that added some).
    begun: AtomicBool,
}

impl SuspectParity {
    /// For a resync walk of `walk_sectors`: regions of the smallest power of two that cuts it
    /// into at most [`MAX_SUSPECT_REGIONS`].
    pub fn new(walk_sectors: u64) -> Self {
        Self {
            shift: AtomicU32::new(region_shift(walk_sectors).unwrap_or(0)),
            marked: RegionBits::default(),
            healing: RegionBits::default(),
            seen_catches: AtomicU64::new(0),
            heal_only: AtomicBool::new(false),
            begun: AtomicBool::new(false),
        }
    }
}

impl<M: Store> ArrayEngine<M> {
    /// The regions of unchecked parity over the resync walk as it is now.
    fn suspect_regions(&self) -> Option<Regions> {
        let shift = self.suspect.shift.load(Ordering::SeqCst);
        if shift == 0 {
            return None;
        }
        Regions::new(self.geometry().resync_sectors(), 1u64.checked_shl(shift)?)
    }

    /// The resync walk grows to `walk_sectors` (a resize: no heal pending, no request in
    /// flight): the regions grow as they must to stay within [`MAX_SUSPECT_REGIONS`], each
    /// mark kept in the region holding it.
    pub(super) fn suspect_resize(&self, walk_sectors: u64) {
        let s = &self.suspect;
        let old = s.shift.load(Ordering::SeqCst);
        let Some(new) = region_shift(walk_sectors) else {
            return;
        };
        if old != 0 && new > old {
            s.marked.coarsen(new - old);
            s.healing.coarsen(new - old);
        }
        s.shift.store(new.max(old), Ordering::SeqCst);
    }

    /// The platform is about to send request `rq`'s member writes with parity a helper
    /// computed and nobody checked: the regions of its stripes are marked, to be healed if a
    /// helper is caught lying. Before the writes are sent. Any context.
    pub fn parity_unchecked<P: Platform>(&self, p: &P, rq: P::Request) {
        let Some(regions) = self.suspect_regions() else {
            return;
        };
        let state = p.state(rq);
        self.suspect
            .marked
            .set(regions.of_write(&self.geometry(), state.start(), state.sectors()));
    }

    /// Whether parity computed now must not come from a helper unchecked: a member is missing
    /// or out of sync, so parity may hold the only copy of some data, which no heal could
    /// recompute if the helper lied.
    pub fn parity_must_be_checked(&self) -> bool {
        self.members().iter().any(|m| !m.is_in_sync())
    }

    /// A heal runs or waits to: the administrator may not take a member out (every member
    /// holds the last right copy of the stripes it walks).
    pub fn healing(&self) -> bool {
        self.suspect.healing.count() > 0
    }

    /// The worker: if a helper was caught lying since the last look, this array's marks are
    /// to be healed (a member may not be failed from now on), and the heal begins unless a
    /// check or repair runs: that ends first, its counts intact (see the module's
    /// documentation). A catch during a heal starts it over with the new marks.
    pub(super) fn heal_step<P: Platform>(&self, p: &P) {
        let s = &self.suspect;
        let catches = p.helper_catches();
        if s.seen_catches.swap(catches, Ordering::SeqCst) != catches
            && s.healing.take_from(&s.marked)
        {
            s.begun.store(false, Ordering::SeqCst);
        }
        if s.begun.load(Ordering::SeqCst) || !self.healing() || self.checking() {
            return;
        }
        let Some(regions) = self.suspect_regions() else {
            return;
        };
        if !self.redundant() {
            return;
        }
        s.begun.store(true, Ordering::SeqCst);
        // With a bitmap, its bits say on disk which regions the resync must walk, before the
        // superblocks say one is pending: a crash meanwhile walks them again.
        if let Some((bits, states)) = p.bitmap() {
            for r in 0..regions.count() {
                if !s.healing.get(r) {
                    continue;
                }
                let span = regions.span(r);
                let range = bits.of_walk(span.start, span.end);
                for state in states
                    .get(range.start as usize..range.end as usize)
                    .unwrap_or(&[])
                {
                    state.set_needs_sync();
                }
            }
            self.write_whole_bitmap(p, self.bitmap_targets());
            // On disk now (see `RegionState::set_needs_sync`).
            for state in states.iter().filter(|s| s.needs_sync()) {
                state.mark_on_disk();
            }
        }
        // A resync that was pending (not a heal's) walks everything again from the start.
        let heal_only = self.in_sync() || s.heal_only.load(Ordering::SeqCst);
        s.heal_only.store(heal_only, Ordering::SeqCst);
        self.resync_again();
        let _ = self.write_superblocks(p);
        p.heal_started(s.healing.count());
        self.start_resync(p);
    }

    /// Whether the resync may skip walk sectors `[a, b)` as a heal: it only heals, and no
    /// region there is to be healed. Without a bitmap (with one, its bits say so).
    pub(super) fn heal_skips(&self, a: u64, b: u64) -> bool {
        let s = &self.suspect;
        let Some(regions) = self.suspect_regions() else {
            return false;
        };
        s.heal_only.load(Ordering::SeqCst) && !s.healing.any_in(regions.of_walk(a, b))
    }

    /// The resync passed walk sectors `[a, b)`: the regions wholly below `b` are healed.
    pub(super) fn heal_passed(&self, a: u64, b: u64) {
        let s = &self.suspect;
        let Some(regions) = self.suspect_regions() else {
            return;
        };
        for r in regions.of_walk(a, b) {
            if regions.span(r).end <= b {
                s.healing.clear(r);
            }
        }
    }

    /// The resync ended: nothing is left to heal.
    pub(super) fn heal_done(&self) {
        self.suspect.healing.clear_all();
        self.suspect.heal_only.store(false, Ordering::SeqCst);
        self.suspect.begun.store(false, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coarser_regions_keep_every_mark_in_the_region_holding_it() {
        let bits = RegionBits::default();
        bits.set(3..4);
        bits.set(64..66);
        bits.set(1023..1024);
        bits.coarsen(2);
        for r in 0..MAX_SUSPECT_REGIONS {
            assert_eq!(bits.get(r), [0, 16, 255].contains(&r), "region {r}");
        }
        assert_eq!(bits.count(), 3);
        bits.coarsen(0);
        assert_eq!(bits.count(), 3);
        // A walk four times as long takes regions four times as large.
        let small = region_shift(64 * MAX_SUSPECT_REGIONS).unwrap();
        assert_eq!(region_shift(256 * MAX_SUSPECT_REGIONS), Some(small + 2));
    }
}
