// SPDX-License-Identifier: GPL-2.0

//! The geometry of a running array, as everything that maps sectors asks for it: a whole
//! [`Geometry`] value per question, never a field read in place, so a resize (issue 46) can
//! change the size under a running engine and every reader still sees one consistent shape.
//!
//! The shape (level, layout, members, chunk) is fixed for the array's life here; the size, each
//! member's data area, is one atomic word, validated when it is stored ([`Geometry::resized`])
//! and every value handed out is rebuilt from it, so a reader never sees the array size of one
//! resize with the member size of another. What may change it, and when, is the resize's
//! business: the mapping of the sectors both sizes hold is the same, so requests in flight are
//! unaffected.

use super::geometry::{Geometry, GeometryError};
use core::sync::atomic::{AtomicU64, Ordering};

/// A running array's geometry: its shape, and its size as it is now.
#[derive(Debug)]
pub struct GeometryCell {
    /// The geometry the array started with: its shape, and its size until a resize.
    shape: Geometry,
    /// Each member's data area now (whole chunks), as [`Geometry::member_data_sectors`].
    member_data_sectors: AtomicU64,
}

impl GeometryCell {
    pub fn new(geometry: Geometry) -> Self {
        Self {
            shape: geometry,
            member_data_sectors: AtomicU64::new(geometry.member_data_sectors()),
        }
    }

    /// The geometry now.
    pub fn get(&self) -> Geometry {
        // Every size stored was validated for this shape ([`Self::resize`]).
        self.shape
            .resized_again(self.member_data_sectors.load(Ordering::Acquire))
    }

    /// Gives each member's data area `member_data_sectors` (rounded down to whole chunks); the
    /// new geometry, or why that size is impossible for this shape (nothing changes then).
    pub fn resize(&self, member_data_sectors: u64) -> Result<Geometry, GeometryError> {
        let geometry = self.shape.resized(member_data_sectors)?;
        self.member_data_sectors
            .store(geometry.member_data_sectors(), Ordering::Release);
        Ok(geometry)
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
}
