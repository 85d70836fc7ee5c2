// SPDX-License-Identifier: GPL-2.0

//! A reshape's plan (issue 46, items 2 and 3; on-disk-format.rst, "Reshape"): which windows of
//! the array move from the old geometry to the new one, in which order, and before which of
//! them the superblocks must record the position, so that a power cut at any moment leaves
//! every sector where the recorded position says it is. Pure arithmetic on two geometries and
//! their data offsets; the steps that read, write and record are the engine's.
//!
//! The data offset moves instead of a backup file (md's method): the new geometry's data lives
//! at `new_offset`, below the old one's when the data spreads over more data members (the
//! reshape then runs forwards from sector 0, where the new rows of a sector are lower than its
//! old ones), above it when it needs fewer (backwards from the end). A step writes whole
//! stripes of the new geometry for a window next to the position; it may do so only where
//! every member row it writes lies outside the rows that still hold old data a restart from
//! the *recorded* position would read (md's `reshape_request`: `writepos` against `safepos`).
//! Where it would not, the position is recorded first (then the rows up to the window itself
//! are free: only the window's own old copy and what lies beyond it are needed), and where even
//! that is not enough, the window is made smaller. The gap between the offsets is what makes
//! the first window (forwards; the last, backwards) possible at all: [`ReshapePlan::new`]
//! refuses a gap too small for one unit.
//!
//! Windows start and end on multiples of the *unit*, a whole number of stripes of both
//! geometries, so no stripe of either geometry straddles the position; only the end of the
//! content (the old array's size) may cut a unit short.

use super::geometry::{Geometry, Level};
use super::geometry_cell::GeometryWords;
use super::superblock::Superblock;
use core::fmt;
use core::sync::atomic::{AtomicU64, Ordering};

/// Which way the position moves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// From sector 0 up: below the position is new, from it on old. The new offset is lower.
    Forwards,
    /// From the end down: from the position on is new, below it old. The new offset is higher.
    Backwards,
}

/// Which geometry holds a sector.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    Old,
    New,
}

/// Why a reshape cannot be planned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlanError {
    /// Only RAID 0, 5 and 6 are restriped, each into its own level (md's takeovers change the
    /// level without moving data and come first).
    Level,
    /// Nothing changes: the same shape at the same offset.
    Nothing,
    /// The data offset must move the other way for this reshape (lower to spread the data over
    /// more data members, higher for fewer).
    OffsetDirection,
    /// The offsets are too close for the first window (`need` member sectors apart at least).
    Gap { need: u64, have: u64 },
}

impl fmt::Display for PlanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Level => write!(f, "only RAID 0, 5 and 6 are restriped, into the same level"),
            Self::Nothing => write!(f, "nothing changes"),
            Self::OffsetDirection => write!(
                f,
                "the data offset must move down to spread the data over more members, up for \
                 fewer"
            ),
            Self::Gap { need, have } => write!(
                f,
                "the data offset must move by {need} sectors at least, only {have} are free"
            ),
        }
    }
}

/// The next window a step moves, and whether the position must be recorded first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    /// Array sectors `start..end` move to the new geometry.
    pub start: u64,
    pub end: u64,
    /// The superblocks must record the current position (after a flush of every member)
    /// before the window's new stripes are written.
    pub record_first: bool,
}

/// A reshape from one geometry at one data offset to another at another.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReshapePlan {
    old: Geometry,
    new: Geometry,
    old_offset: u64,
    new_offset: u64,
    direction: Direction,
    /// Sectors of both geometries' whole stripes: every window's bound but the content's end.
    unit: u64,
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

impl ReshapePlan {
    /// Plans moving the content (the smaller of the two arrays: a reshape to fewer data members
    /// keeps only what the new geometry holds, the array having been made that small first) of
    /// `old` at `old_offset` into `new` at `new_offset` (member sectors where each data area
    /// starts).
    pub fn new(
        old: Geometry,
        old_offset: u64,
        new: Geometry,
        new_offset: u64,
    ) -> Result<Self, PlanError> {
        let plan = Self::shaped(old, old_offset, new, new_offset)?;
        let (direction, unit) = (plan.direction, plan.unit);
        // The hardest window must fit with the position recorded at its start: forwards the
        // first (the distance between a sector's old and new rows grows with the position, or
        // stays), backwards the last (it shrinks as the position comes down); backwards the
        // first too, whose end is the content's, maybe not a whole unit.
        let hardest: &[u64] = match direction {
            Direction::Forwards => &[0],
            Direction::Backwards => &[unit, plan.content()],
        };
        let first = hardest.iter().all(|&at| {
            let at = at.min(plan.content());
            plan.next_window(at, at, unit).is_some()
        });
        if !first {
            return Err(PlanError::Gap {
                need: plan.gap_needed(),
                have: old_offset.abs_diff(new_offset),
            });
        }
        Ok(plan)
    }

    /// The plan's shape (levels, direction, unit), without the check that its first window
    /// fits: [`Self::new`]'s, and a plan loaded again ([`PlanCell`]).
    fn shaped(
        old: Geometry,
        old_offset: u64,
        new: Geometry,
        new_offset: u64,
    ) -> Result<Self, PlanError> {
        let same_level = matches!(
            (old.level(), new.level()),
            (Level::Raid0, Level::Raid0)
                | (Level::Raid5(_), Level::Raid5(_))
                | (Level::Raid6(_), Level::Raid6(_))
        );
        if !same_level {
            return Err(PlanError::Level);
        }
        let direction = match new.data_members().cmp(&old.data_members()) {
            core::cmp::Ordering::Greater => Direction::Forwards,
            core::cmp::Ordering::Less => Direction::Backwards,
            core::cmp::Ordering::Equal if new_offset < old_offset => Direction::Forwards,
            core::cmp::Ordering::Equal if new_offset > old_offset => Direction::Backwards,
            core::cmp::Ordering::Equal
                if new.resized(old.member_data_sectors()).ok() == Some(old) =>
            {
                return Err(PlanError::Nothing)
            }
            core::cmp::Ordering::Equal => {
                return Err(PlanError::Gap {
                    need: u64::from(new.chunk_sectors().max(old.chunk_sectors())),
                    have: 0,
                })
            }
        };
        let wrong_way = match direction {
            Direction::Forwards => new_offset > old_offset,
            Direction::Backwards => new_offset < old_offset,
        };
        if wrong_way {
            return Err(PlanError::OffsetDirection);
        }
        let (a, b) = (old.stripe_data_sectors(), new.stripe_data_sectors());
        let unit = (a / gcd(a, b).max(1))
            .checked_mul(b)
            .ok_or(PlanError::Level)?
            .max(1);
        Ok(Self {
            old,
            new,
            old_offset,
            new_offset,
            direction,
            unit,
        })
    }

    /// The reshape superblock `sb` records, and its position; `None` if it records none.
    /// `Err` where the plan is impossible (a superblock that validated names a possible one;
    /// a graid that plans otherwise refuses it rather than misread it).
    pub fn recorded(sb: &Superblock) -> Option<Result<(Self, u64), PlanError>> {
        let r = sb.reshape?;
        let plan = (|| {
            let old = sb.geometry().map_err(|_| PlanError::Level)?;
            let new = sb.new_geometry().ok_or(PlanError::Level)?;
            let plan = Self::new(old, sb.data_offset, new, r.new_data_offset)?;
            let backwards = plan.direction == Direction::Backwards;
            if backwards != r.backwards || r.position > plan.content() {
                return Err(PlanError::OffsetDirection);
            }
            Ok((plan, r.position))
        })();
        Some(plan)
    }

    pub fn direction(&self) -> Direction {
        self.direction
    }

    /// Sectors of whole stripes of both geometries: every window's bound but the content's
    /// end. A request inside one unit never straddles the position.
    pub fn unit(&self) -> u64 {
        self.unit
    }

    /// The queue limit that keeps every request inside one stripe run (RAID 5/6) or chunk
    /// of both geometries and inside one unit ([`Geometry::boundary_sectors`]).
    pub fn boundary_sectors(&self) -> u32 {
        let old = u64::from(self.old.boundary_sectors());
        let new = u64::from(self.new.boundary_sectors());
        // At most the smaller boundary: lossless.
        gcd(gcd(old, new), self.unit) as u32
    }

    pub fn old(&self) -> Geometry {
        self.old
    }

    pub fn new_geometry(&self) -> Geometry {
        self.new
    }

    /// The sectors that move: the smaller array's.
    pub fn content(&self) -> u64 {
        self.old.array_sectors().min(self.new.array_sectors())
    }

    /// Where the position starts: 0 forwards, the content's end backwards.
    pub fn start_position(&self) -> u64 {
        match self.direction {
            Direction::Forwards => 0,
            Direction::Backwards => self.content(),
        }
    }

    /// Whether the reshape is over at `position`.
    pub fn done(&self, position: u64) -> bool {
        match self.direction {
            Direction::Forwards => position >= self.content(),
            Direction::Backwards => position == 0,
        }
    }

    /// The geometry holding array sector `sector` while the position is `position`. Past the
    /// content (a grow's new room), the new one.
    pub fn side(&self, position: u64, sector: u64) -> Side {
        let new = match self.direction {
            Direction::Forwards => sector < position || sector >= self.content(),
            Direction::Backwards => sector >= position,
        };
        if new {
            Side::New
        } else {
            Side::Old
        }
    }

    /// The geometry and data offset of `side`.
    pub fn geometry(&self, side: Side) -> (Geometry, u64) {
        match side {
            Side::Old => (self.old, self.old_offset),
            Side::New => (self.new, self.new_offset),
        }
    }

    /// The next window from `position` (the superblocks having recorded `recorded`), at most
    /// `max_sectors` long (at least one unit is taken whatever it says); `None` once done.
    pub fn next_window(&self, position: u64, recorded: u64, max_sectors: u64) -> Option<Window> {
        if self.done(position) {
            return None;
        }
        let want = self.align_down(max_sectors).max(self.unit);
        match self.direction {
            Direction::Forwards => {
                let limit = position.saturating_add(want).min(self.content());
                let unrecorded = self.forwards_end(recorded, position).min(limit);
                if unrecorded > position {
                    return Some(Window {
                        start: position,
                        end: unrecorded,
                        record_first: false,
                    });
                }
                let end = self.forwards_end(position, position).min(limit);
                (end > position).then_some(Window {
                    start: position,
                    end,
                    record_first: true,
                })
            }
            Direction::Backwards => {
                // The unit holding the sector below the position, and the lowest start the
                // length allows.
                let top = self.align_down(position.saturating_sub(1));
                // Rounded up: at most `want` long (from an unaligned content end too).
                let lowest = position.saturating_sub(want);
                let floor = lowest
                    .checked_next_multiple_of(self.unit)
                    .unwrap_or(lowest)
                    .min(top);
                let unrecorded = self.backwards_start(recorded).max(floor);
                if unrecorded <= top {
                    return Some(Window {
                        start: unrecorded,
                        end: position,
                        record_first: false,
                    });
                }
                let start = self.backwards_start(position).max(floor);
                (start <= top).then_some(Window {
                    start,
                    end: position,
                    record_first: true,
                })
            }
        }
    }

    fn align_down(&self, sector: u64) -> u64 {
        sector.saturating_sub(sector.checked_rem(self.unit).unwrap_or(0))
    }

    /// Forwards: the furthest window end (a unit multiple, or the content's end) from
    /// `position` whose new stripes stay below the old rows that a restart from `recorded`
    /// reads: `new_offset + rows_new(end) <= old_offset + row_old(recorded)`.
    fn forwards_end(&self, recorded: u64, position: u64) -> u64 {
        let (old, new) = (&self.old, &self.new);
        let bound = self
            .old_offset
            .saturating_add(old.stripe_member_sector(old.stripe_of(recorded)));
        let Some(room) = bound.checked_sub(self.new_offset) else {
            return position;
        };
        let chunk = u64::from(new.chunk_sectors()).max(1);
        let stripes = room / chunk;
        let end = stripes.saturating_mul(new.stripe_data_sectors());
        if end >= self.content() {
            return self.content();
        }
        self.align_down(end).max(position)
    }

    /// Backwards: the lowest window start (a unit multiple) whose new stripes stay above the
    /// old rows that a restart from `recorded` reads: `new_offset + row_new(start) >=
    /// old_offset + rows_old(recorded)`.
    fn backwards_start(&self, recorded: u64) -> u64 {
        let (old, new) = (&self.old, &self.new);
        let old_stripes = recorded.div_ceil(old.stripe_data_sectors().max(1));
        let bound = self
            .old_offset
            .saturating_add(old.stripe_member_sector(old_stripes));
        let Some(need) = bound.checked_sub(self.new_offset) else {
            return 0;
        };
        let chunk = u64::from(new.chunk_sectors()).max(1);
        let start = need
            .div_ceil(chunk)
            .saturating_mul(new.stripe_data_sectors());
        start.div_ceil(self.unit).saturating_mul(self.unit)
    }

    /// The gap a first window needs: the rows of one unit in the new geometry (forwards) or
    /// in the old one (backwards), plus what the rows' rounding takes.
    fn gap_needed(&self) -> u64 {
        let unit = self.unit.min(self.content().max(1));
        let g = match self.direction {
            Direction::Forwards => &self.new,
            Direction::Backwards => &self.old,
        };
        let stripes = unit.div_ceil(g.stripe_data_sectors().max(1));
        g.stripe_member_sector(stripes)
    }
}

/// A [`ReshapePlan`] kept in atomics, for the running array's state, which holds no lock
/// (`reshape_run.rs`): stored only where nobody loads it (a reshape's start, with no request
/// in the engine), loaded anywhere.
#[derive(Debug, Default)]
pub struct PlanCell {
    old: GeometryWords,
    new: GeometryWords,
    old_offset: AtomicU64,
    new_offset: AtomicU64,
}

impl PlanCell {
    pub fn store(&self, plan: &ReshapePlan) {
        self.old.store(&plan.old);
        self.new.store(&plan.new);
        self.old_offset.store(plan.old_offset, Ordering::Relaxed);
        self.new_offset.store(plan.new_offset, Ordering::Relaxed);
    }

    /// The plan stored; `None` before one was.
    pub fn load(&self) -> Option<ReshapePlan> {
        ReshapePlan::shaped(
            self.old.load()?,
            self.old_offset.load(Ordering::Relaxed),
            self.new.load()?,
            self.new_offset.load(Ordering::Relaxed),
        )
        .ok()
    }
}
