// SPDX-License-Identifier: GPL-2.0

//! The geometry of a running array, as everything that maps sectors asks for it: a whole
//! [`Geometry`] value per question, never a field read in place, so a resize or a change of a
//! mirror's copies (issue 46) can change it under a running engine and every reader still sees
//! one consistent shape.
//!
//! The member count and each member's data area share one atomic word, validated when stored
//! ([`Geometry::resized`], [`Geometry::with_members`]), and every value handed out is rebuilt
//! from it, so a reader never sees the array size of one change with the member size or count
//! of another. The level, layout and chunk sit in a second word that changes only where nothing
//! reads the cell: a reshape's start, with no request in the engine ([`GeometryCell::reshape_to`]).
//! What may change it, and when, is the caller's business: a resize maps the sectors both
//! sizes hold alike, and a mirror's copies change with no request in flight.

use super::geometry::{Geometry, GeometryError, Level, MAX_SECTORS};
use core::sync::atomic::{AtomicU64, Ordering};

/// Where the member count sits in the word: above every data area size.
const MEMBERS_SHIFT: u32 = 56;
const _: () = assert!(MAX_SECTORS < 1 << MEMBERS_SHIFT);

/// A geometry's count and size as one word.
fn pack(geometry: &Geometry) -> u64 {
    u64::from(geometry.members()) << MEMBERS_SHIFT | geometry.member_data_sectors()
}

/// A geometry's level, layout and chunk as one word (the count and size are [`pack`]'s).
fn pack_shape(geometry: &Geometry) -> u64 {
    let level = geometry.level();
    u64::from(level.code())
        | u64::from(level.layout()) << 16
        | u64::from(geometry.chunk_sectors()) << 40
}

/// A whole geometry in two words, for state that changes while others read it and holds no
/// lock: a reshape's old and new geometries (`reshape_run.rs`). Stored only where nobody reads
/// it (the caller's business); loaded anywhere.
#[derive(Debug, Default)]
pub struct GeometryWords {
    shape: AtomicU64,
    word: AtomicU64,
}

impl GeometryWords {
    pub fn store(&self, geometry: &Geometry) {
        self.shape.store(pack_shape(geometry), Ordering::Relaxed);
        self.word.store(pack(geometry), Ordering::Relaxed);
    }

    /// The geometry stored (validated again: `None` where nothing valid was).
    pub fn load(&self) -> Option<Geometry> {
        unpack(
            self.shape.load(Ordering::Relaxed),
            self.word.load(Ordering::Relaxed),
        )
    }
}

/// The geometry of a [`pack_shape`] and a [`pack`] word, validated.
fn unpack(shape: u64, word: u64) -> Option<Geometry> {
    // Fields of at most 16 and 24 bits: lossless.
    let level =
        Level::from_codes((shape & 0xffff) as u32, (shape >> 16 & 0xff_ffff) as u32).ok()?;
    let chunk = (shape >> 40) as u32;
    let members = (word >> MEMBERS_SHIFT) as u32;
    Geometry::new(level, members, chunk, word & ((1 << MEMBERS_SHIFT) - 1)).ok()
}

/// A running array's geometry: its level and chunk, and its member count and size as they are
/// now.
#[derive(Debug)]
pub struct GeometryCell {
    /// The level, layout and chunk now, [`pack_shape`]d.
    shape: AtomicU64,
    /// The member count and each member's data area now (whole chunks), [`pack`]ed.
    word: AtomicU64,
    /// The geometry the array started with, the shape of which [`Self::get`] uses while the
    /// shape word is the one it had then.
    started: Geometry,
    /// Its shape word, so `get` need not pack it again at every request.
    started_shape: u64,
}

impl GeometryCell {
    pub fn new(geometry: Geometry) -> Self {
        Self {
            shape: AtomicU64::new(pack_shape(&geometry)),
            word: AtomicU64::new(pack(&geometry)),
            started: geometry,
            started_shape: pack_shape(&geometry),
        }
    }

    /// The geometry now.
    pub fn get(&self) -> Geometry {
        let shape = self.shape.load(Ordering::Acquire);
        let word = self.word.load(Ordering::Acquire);
        if shape != self.started_shape {
            // After a reshape (rare: validated again). Stored valid, so never the fallback.
            return unpack(shape, word).unwrap_or(self.started);
        }
        // Every word stored was validated for this level and chunk ([`Self::store`]). Below
        // 2^8 after the shift: lossless.
        let members = (word >> MEMBERS_SHIFT) as u32;
        self.started
            .resized_again(members, word & ((1 << MEMBERS_SHIFT) - 1))
    }

    /// Makes `geometry` (any level, layout, chunk and count) the array's: a reshape's start.
    /// Only with no request in the engine and no other reader (the platform's queue frozen,
    /// its members' lock held): the two words change one after the other.
    pub fn reshape_to(&self, geometry: &Geometry) {
        self.shape.store(pack_shape(geometry), Ordering::Release);
        self.store(geometry);
    }

    /// Gives each member's data area `member_data_sectors` (rounded down to whole chunks); the
    /// new geometry, or why that size is impossible for this shape (nothing changes then).
    pub fn resize(&self, member_data_sectors: u64) -> Result<Geometry, GeometryError> {
        let geometry = self.get().resized(member_data_sectors)?;
        self.store(&geometry);
        Ok(geometry)
    }

    /// Gives the array `members` members, the size kept; the new geometry, or why that count
    /// is impossible for this level (nothing changes then).
    pub fn set_members(&self, members: u32) -> Result<Geometry, GeometryError> {
        let geometry = self.get().with_members(members)?;
        self.store(&geometry);
        Ok(geometry)
    }

    fn store(&self, geometry: &Geometry) {
        self.word.store(pack(geometry), Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::geometry::{Level, ParityLayout};

    #[test]
    fn a_resize_keeps_the_shape_and_maps_the_old_sectors_alike() {
        let raid5 = Level::Raid5(ParityLayout::LeftSymmetric);
        let start = Geometry::new(raid5, 4, 16, 1000).unwrap();
        let cell = GeometryCell::new(start);
        assert_eq!(cell.get(), start);
        assert_eq!(start.member_data_sectors(), 992);
        let grown = cell.resize(4000).unwrap();
        assert_eq!(cell.get(), grown);
        assert_eq!(grown.member_data_sectors(), 4000);
        assert_eq!(grown.array_sectors(), 3 * 4000);
        assert_eq!((grown.level(), grown.members()), (raid5, 4));
        assert_eq!(grown.chunk_sectors(), 16);
        for sector in (0..start.array_sectors()).step_by(7) {
            let before = start.map_write(sector, 1).unwrap();
            assert!(
                before.eq(grown.map_write(sector, 1).unwrap()),
                "sector {sector}"
            );
        }
        // An impossible size changes nothing.
        assert!(cell.resize(8).is_err());
        assert_eq!(cell.get(), grown);
    }

    #[test]
    fn a_mirror_keeps_its_size_through_changes_of_its_copies() {
        let start = Geometry::new(Level::Raid1, 2, 0, 5000).unwrap();
        let cell = GeometryCell::new(start);
        let three = cell.set_members(3).unwrap();
        assert_eq!((three.members(), three.copies()), (3, 3));
        assert_eq!(cell.get(), three);
        assert_eq!(three.array_sectors(), start.array_sectors());
        let grown = cell.resize(1 << 54).unwrap();
        assert_eq!((grown.members(), cell.get()), (3, grown));
        assert!(cell.set_members(33).is_err() && cell.set_members(1).is_err());
        assert_eq!(cell.get(), grown);
        assert_eq!(cell.set_members(2).unwrap().member_data_sectors(), 1 << 54);
        assert_eq!(cell.get().members(), 2);
    }
}
