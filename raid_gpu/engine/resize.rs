// SPDX-License-Identifier: GPL-2.0

//! Resize (md's `--grow --size`): every member's data area takes more of its device (after the
//! members were replaced by larger ones), or less of it (after the administrator shrank what
//! the array holds), online (issue 46, item 1).
//!
//! The mapping of the sectors the array had does not change with its size (the geometry's
//! shape stays; `geometry_cell.rs`), so what a grow does is tell the new room apart until it is
//! in sync, in an order that a power cut at any point leaves assemblable and right:
//!
//! 1. The platform runs it with its queue frozen (no request in flight, none starting) and the
//!    worker idle with the background held, and nothing runs or is pending in the background
//!    (no rebuild, replace, check, repair, resync or heal: refused otherwise, as md refuses).
//! 2. **The bitmap** (if any) takes regions over the new walk (`Metadata::resize_bitmap`):
//!    the same region size while the platform's spare states hold them, else the smallest
//!    larger power of two that fits (md's `md_bitmap_resize` doubles its chunk likewise). Then
//!    every block is written with every bit set before the superblocks name the coarser
//!    regions: a set bit is true of any region size (it only claims that writes may have been
//!    in flight), so the blocks read right whichever superblock a cut leaves. The cleaner
//!    clears them later, each with the `PREFLUSH` of any clearing block.
//! 3. **The new room's bits** are written set (`FUA`) before anything claims the new size: a
//!    start after a power cut would otherwise find them clear past the resync's position and
//!    skip them. A cut before the superblocks leaves bits past the old last region, which a
//!    start ignores.
//! 4. **The superblocks** say the new `data_size` (and region size) and a resync pending from
//!    the old end of the walk (a flush of every member first, as every update that claims
//!    something): a cut after them assembles the grown array and resumes the resync where it
//!    was. A member whose write the cut missed is one update behind with the old size, which
//!    assembly accepts (`assembly.rs`).
//! 5. The platform then lets the queue go and gives the disk its new capacity (not while frozen:
//!    its uevent may wait on reclaim that waits on the queue); the resync walks
//!    the new room (RAID 5/6 parity computed from the data, mirrors copied from copy 0), and
//!    writes there meanwhile compute parity from every data column (reconstruct-write, as for
//!    any array not in sync), so the room is consistent wherever it was written.
//!
//! RAID 0 grows without a resync: nothing there has to agree with anything.
//!
//! A shrink is the same with nothing to resync: regions past the new end are dropped, the
//! superblocks say the smaller size, and requests past it are refused from then on (the
//! geometry maps nothing there). Whether anything is mapped beyond the new end is for the
//! caller to know (`graidctl grow` reads what the array holds: a filesystem's, a volume
//! group's or a partition table's own size); the engine only takes a shrink asked for as one.
//! A cut before the superblocks leaves the old size, whose tail nothing wrote since.

use super::array::{ArrayEngine, ArrayState, Store};
use super::bitmap::{Regions, BITS_PER_BLOCK};
use super::geometry::{Geometry, GeometryError};
use super::platform::Platform;
use core::fmt;

/// Why a resize is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResizeError {
    /// The size does not fit the array's shape (below one chunk, or too large).
    Geometry(GeometryError),
    /// Each member's data area would be `wanted` sectors, and the smallest member has room
    /// for `room` past its data offset.
    NoRoom { wanted: u64, room: u64 },
    /// Smaller than now, and not asked for as a shrink.
    Shrink { now: u64, wanted: u64 },
    /// A member is missing, failed or not in sync.
    NotOptimal,
    /// A rebuild, replace, check, repair or resync runs or is pending.
    Busy,
    /// The parity a lying helper computed is being healed.
    Healing,
    /// The bitmap has no room for the array's regions at any region size.
    BitmapFull,
    /// No member took the new superblocks: the array is broken.
    Broken,
}

impl fmt::Display for ResizeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Geometry(e) => write!(f, "impossible size: {e}"),
            Self::NoRoom { wanted, room } => write!(
                f,
                "each member needs {wanted} sectors of data area, the smallest has {room}"
            ),
            Self::Shrink { now, wanted } => write!(
                f,
                "{wanted} sectors per member is less than the {now} in use: not a shrink asked \
                 for"
            ),
            Self::NotOptimal => write!(f, "the array is not optimal: rebuild it first"),
            Self::Busy => write!(
                f,
                "a rebuild, replace, check, repair or resync runs or is pending: wait for it"
            ),
            Self::Healing => write!(f, "a helper's unchecked parity is being healed: wait"),
            Self::BitmapFull => write!(f, "the write-intent bitmap has no room for the new size"),
            Self::Broken => write!(f, "no member took the new size: the array is broken"),
        }
    }
}

impl<M: Store> ArrayEngine<M> {
    /// The geometry the array would have with `member_data_sectors` in each member's data area
    /// (rounded down to whole chunks), where the smallest member has `room` sectors past its
    /// data offset; or why it may not have it now. Smaller than now only with `shrink`.
    pub fn resize_allowed(
        &self,
        member_data_sectors: u64,
        room: u64,
        shrink: bool,
    ) -> Result<Geometry, ResizeError> {
        let now = self.geometry();
        let new = now
            .resized(member_data_sectors)
            .map_err(ResizeError::Geometry)?;
        if new.member_data_sectors() > room {
            return Err(ResizeError::NoRoom {
                wanted: new.member_data_sectors(),
                room,
            });
        }
        if new.member_data_sectors() < now.member_data_sectors() && !shrink {
            return Err(ResizeError::Shrink {
                now: now.member_data_sectors(),
                wanted: new.member_data_sectors(),
            });
        }
        if self.state() != ArrayState::Optimal {
            return Err(ResizeError::NotOptimal);
        }
        if self.healing() {
            return Err(ResizeError::Healing);
        }
        if !self.in_sync()
            || !self.scrub_idle()
            || self.rebuild_target().is_some()
            || self.replacement().is_some()
            || self.reshaping()
        {
            return Err(ResizeError::Busy);
        }
        Ok(new)
    }

    /// Gives each member's data area `member_data_sectors` (see the module comment; `room` and
    /// `shrink` as for [`Self::resize_allowed`]). With the platform's queue frozen (no request
    /// in flight or starting) and the worker idle with the background held, as the one
    /// superblock writer. `Ok`: the new geometry is in use and on disk, and the resync of a
    /// grown room (if the array has one) is armed for the worker's next run; the platform then
    /// lets the queue go, gives the disk its new capacity and kicks the worker (releasing the
    /// background does). A request past a shrink's new end meanwhile fails the geometry's
    /// check.
    pub fn resize<P: Platform>(
        &self,
        p: &P,
        member_data_sectors: u64,
        room: u64,
        shrink: bool,
    ) -> Result<Geometry, ResizeError> {
        let new = self.resize_allowed(member_data_sectors, room, shrink)?;
        let old = self.geometry();
        if new == old {
            return Ok(new);
        }
        let (from, to) = (old.resync_sectors(), new.resync_sectors());
        let coarser = self.resize_bitmap(p, to)?;
        self.suspect_resize(to);
        // Validated by `resize_allowed`: this cannot fail.
        let _ = self.geometry.resize(new.member_data_sectors());
        let grown = to > from && self.redundant();
        if grown {
            self.resync_from(from);
            self.grown_bits_set(p, from, to, !coarser);
        }
        self.write_superblocks(p).map_err(|_| ResizeError::Broken)?;
        if grown {
            // No kick: the worker stays idle until the platform lets it go (its release kicks
            // it).
            self.arm_resync();
        }
        Ok(new)
    }

    /// The bitmap's regions over a walk of `walk` sectors: the same size if the platform's
    /// states hold them, else coarser, with every bit written set first (module comment, 2).
    /// True if they became coarser (every block is then written, every bit set).
    fn resize_bitmap<P: Platform>(&self, p: &P, walk: u64) -> Result<bool, ResizeError> {
        let Some((now, _)) = p.bitmap() else {
            return Ok(false);
        };
        let mut region = now.region_sectors();
        let regions = loop {
            let regions = Regions::new(walk, region).ok_or(ResizeError::BitmapFull)?;
            if p.resize_bitmap(regions) {
                break regions;
            }
            region = region.checked_mul(2).ok_or(ResizeError::BitmapFull)?;
        };
        if regions.region_sectors() == now.region_sectors() {
            return Ok(false);
        }
        let Some((_, states)) = p.bitmap() else {
            return Ok(false);
        };
        // Nothing is in flight and nothing needs a resync (`resize_allowed`): every region is
        // only on disk, once every block says so.
        for state in states {
            state.mark_on_disk();
        }
        // Every bit set as far as either size has regions: the old superblock, still in force
        // until the new one lands, reads old regions past the new last one too, which a block
        // written for the new count alone would clear before their writes are durable.
        let count = regions.count().max(now.count());
        let targets = self.bitmap_targets();
        for block in 0..regions.blocks().max(now.blocks()) {
            // Bits only set: FUA, nothing before it needs to be durable.
            self.write_block_bits(p, block, count, &|_| true, targets, false);
        }
        Ok(true)
    }

    /// The bitmap regions over walk sectors `[from, to)` (the grown room) need the resync,
    /// and their bits are written set (`write`; already, where the regions became coarser), on
    /// disk before the superblocks say the new size.
    pub(super) fn grown_bits_set<P: Platform>(&self, p: &P, from: u64, to: u64, write: bool) {
        let Some((regions, states)) = p.bitmap() else {
            return;
        };
        let range = regions.of_walk(from, to);
        if range.is_empty() {
            return;
        }
        let room = states
            .get(range.start as usize..range.end as usize)
            .unwrap_or(&[]);
        for state in room {
            state.set_needs_sync();
        }
        if !write {
            return;
        }
        let blocks = range.start / BITS_PER_BLOCK..=(range.end - 1) / BITS_PER_BLOCK;
        for block in blocks {
            // Bits only set: FUA, nothing before it needs to be durable.
            self.write_block(p, &regions, states, block, self.bitmap_targets(), false);
        }
        // On disk now: kept there after the resync passed until the cleaner clears them (see
        // `RegionState::set_needs_sync`).
        for state in room {
            state.mark_on_disk();
        }
    }
}
