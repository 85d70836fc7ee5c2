// SPDX-License-Identifier: GPL-2.0

//! Where array sectors live on the members: RAID 0, RAID 1, RAID 10 (near layout, 2 copies),
//! RAID 5 and RAID 6 (where each stripe's parity sits: `layout.rs`).
//!
//! All sizes and offsets are in 512-byte sectors. Member offsets are relative to the start of the
//! member's data area (the superblock's data offset is added by the caller).
//!
//! # Layouts
//!
//! Array chunks are numbered `c = 0, 1, 2, ...` in array order; `n` is the member count.
//!
//! * **RAID 0** (md's single-zone raid0, all members equally sized): chunk `c` is on member
//!   `c % n`, member chunk row `c / n`.
//! * **RAID 1**: no chunks. Every member holds the whole array at the same offset; copy `k` is on
//!   member `k`.
//! * **RAID 10, near layout, 2 copies** (md's `--layout=n2`, on-disk layout `0x102`): copy `k`
//!   (0 or 1) of chunk `c` goes to device-chunk slot `x = 2c + k`, and slots are dealt across the
//!   members row by row: member `x % n`, member chunk row `x / n`. With an even `n` this is
//!   mirrored pairs striped together; with an odd `n` the two copies of a chunk may wrap into the
//!   next row, exactly as md does. Three members:
//!
//!   ```text
//!            member 0  member 1  member 2
//!   row 0      c0        c0        c1
//!   row 1      c1        c2        c2
//!   row 2      c3        c3        c4
//!   ```
//!
//! * **RAID 5 and RAID 6** (md's raid456): `k` = 1 or 2 parity members, `d = n - k` data members.
//!   Chunk `c` is data index `c % d` of stripe `s = c / d`, and stripe `s` is member chunk row
//!   `s` on every member. Which member holds P, Q and each data index depends on `s` and the
//!   layout ([`ParityLayout`], see `layout.rs`). Left-symmetric (md's default), four members:
//!
//!   ```text
//!            member 0  member 1  member 2  member 3
//!   row 0      c0        c1        c2        P
//!   row 1      c4        c5        P         c3
//!   row 2      c8        P         c6        c7
//!   ```
//!
//! Member sizes are rounded down to whole chunks for every striped level, and a RAID 10 array
//! holds `rows * n / 2` chunks (rounded down, as md does: an odd last slot stays unused).

use super::members::MemberSet;
use core::fmt;
use core::iter::FusedIterator;
use core::num::NonZeroU64;

/// log2 of the sector size.
pub const SECTOR_SHIFT: u32 = 9;
/// Smallest chunk: 4 KiB, one page.
pub const MIN_CHUNK_SECTORS: u32 = 8;
/// Largest chunk: 1 MiB.
pub const MAX_CHUNK_SECTORS: u32 = 2048;
/// Fewest members of any level.
pub const MIN_MEMBERS: u32 = 2;
/// Most members of any level (the superblock's role table is sized for them).
pub const MAX_MEMBERS: u32 = 32;
/// Largest array or member size: keeps every sector count convertible to bytes in a `u64`.
pub const MAX_SECTORS: u64 = u64::MAX >> SECTOR_SHIFT;
/// Copies of each chunk in RAID 10's near-2 layout.
pub const RAID10_NEAR_COPIES: u32 = 2;
/// RAID 5/6: the data a run of adjacent stripes holds at most (1 MiB), unless one stripe
/// holds more ([`Geometry::run_stripes`]). Larger runs batch more stripes into one member I/O
/// and one parity job; smaller ones let more unrelated writes run in parallel (a run is
/// locked as one).
pub const RUN_DATA_SECTORS: u64 = 2048;

pub use super::layout::{ParityLayout, StripeMap};

/// RAID level, with its layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Level {
    /// Striping, no redundancy.
    Raid0,
    /// Mirroring across all members.
    Raid1,
    /// Striped mirrors, md's near layout with 2 copies.
    Raid10,
    /// Striping with one rotating parity chunk per stripe (P).
    Raid5(ParityLayout),
    /// Striping with two rotating parity chunks per stripe (P and Q).
    Raid6(ParityLayout),
}

impl Level {
    /// On-disk level number (md's numbering).
    pub const fn code(self) -> u32 {
        match self {
            Self::Raid0 => 0,
            Self::Raid1 => 1,
            Self::Raid10 => 10,
            Self::Raid5(_) => 5,
            Self::Raid6(_) => 6,
        }
    }

    /// The level with on-disk number `code` in its default layout (md's default for RAID 5
    /// and 6: left-symmetric), if graid supports it.
    pub const fn from_code(code: u32) -> Option<Self> {
        match code {
            0 => Some(Self::Raid0),
            1 => Some(Self::Raid1),
            10 => Some(Self::Raid10),
            5 => Some(Self::Raid5(ParityLayout::LeftSymmetric)),
            6 => Some(Self::Raid6(ParityLayout::LeftSymmetric)),
            _ => None,
        }
    }

    /// The level with on-disk numbers `code` and `layout`: `Err(Some(level))` names a level
    /// graid knows whose layout it does not, `Err(None)` a level it does not know at all.
    pub const fn from_codes(code: u32, layout: u32) -> Result<Self, Option<Self>> {
        let Some(level) = Self::from_code(code) else {
            return Err(None);
        };
        let with_layout = match level {
            Self::Raid0 | Self::Raid1 | Self::Raid10 => Some(level),
            Self::Raid5(_) => match ParityLayout::from_code(layout) {
                Some(l) => Some(Self::Raid5(l)),
                None => None,
            },
            Self::Raid6(_) => match ParityLayout::from_code(layout) {
                Some(l) => Some(Self::Raid6(l)),
                None => None,
            },
        };
        match with_layout {
            Some(l) if l.layout() == layout => Ok(l),
            _ => Err(Some(level)),
        }
    }

    /// On-disk layout number of the level's layout, md's encoding: for RAID 10 the low byte is the
    /// near-copy count and the next byte the far-copy count; for RAID 5 and 6 md's algorithm
    /// number.
    pub const fn layout(self) -> u32 {
        match self {
            Self::Raid0 | Self::Raid1 => 0,
            Self::Raid10 => 0x100 | RAID10_NEAR_COPIES,
            Self::Raid5(l) | Self::Raid6(l) => l.code(),
        }
    }

    /// Whether the level stripes data in chunks (RAID 1 does not).
    pub const fn is_striped(self) -> bool {
        !matches!(self, Self::Raid1)
    }

    /// Parity chunks per stripe: 1 for RAID 5, 2 for RAID 6, 0 otherwise.
    pub const fn parity_members(self) -> u32 {
        match self {
            Self::Raid5(_) => 1,
            Self::Raid6(_) => 2,
            _ => 0,
        }
    }

    /// RAID 5 or 6: writes go through the stripe engine.
    /// RAID 1 and RAID 10: the data is kept in copies.
    pub const fn is_mirrored(self) -> bool {
        matches!(self, Self::Raid1 | Self::Raid10)
    }

    pub const fn has_parity(self) -> bool {
        self.parity_members() > 0
    }

    /// The fewest members the level allows.
    pub const fn min_members(self) -> u32 {
        match self {
            Self::Raid5(_) => 3,
            Self::Raid6(_) => 4,
            _ => MIN_MEMBERS,
        }
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "raid{}", self.code())
    }
}

/// Why a geometry is impossible.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GeometryError {
    /// The member count is outside the level's range.
    MemberCount { level: Level, members: u32 },
    /// Striped levels need a power-of-two chunk of 8..=2048 sectors; RAID 1 needs 0.
    ChunkSize { level: Level, chunk_sectors: u32 },
    /// The members are too small to hold a single chunk.
    TooSmall { member_data_sectors: u64 },
    /// A member or the array would exceed [`MAX_SECTORS`].
    TooLarge { member_data_sectors: u64 },
}

impl fmt::Display for GeometryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::MemberCount { level, members } => write!(
                f,
                "{level} cannot have {members} members (allowed: {}..={MAX_MEMBERS})",
                level.min_members()
            ),
            Self::ChunkSize {
                level: Level::Raid1,
                chunk_sectors,
            } => write!(
                f,
                "raid1 has no chunks, but a chunk of {chunk_sectors} sectors was given"
            ),
            Self::ChunkSize {
                level,
                chunk_sectors,
            } => write!(
                f,
                "{level} chunk of {chunk_sectors} sectors is not a power of two in \
                 {MIN_CHUNK_SECTORS}..={MAX_CHUNK_SECTORS} sectors (4 KiB..1 MiB)"
            ),
            Self::TooSmall {
                member_data_sectors,
            } => write!(
                f,
                "member data area of {member_data_sectors} sectors cannot hold one chunk"
            ),
            Self::TooLarge {
                member_data_sectors,
            } => write!(
                f,
                "member data area of {member_data_sectors} sectors makes the array too large"
            ),
        }
    }
}

impl core::error::Error for GeometryError {}

/// Why an array range cannot be mapped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MapError {
    /// The range does not lie inside the array.
    OutOfRange {
        start: u64,
        sectors: u64,
        array_sectors: u64,
    },
    /// A read asked for a copy the level does not have.
    NoSuchCopy { copy: u32, copies: u32 },
}

impl fmt::Display for MapError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::OutOfRange {
                start,
                sectors,
                array_sectors,
            } => write!(
                f,
                "{sectors} sectors at {start} reach beyond the array's {array_sectors} sectors"
            ),
            Self::NoSuchCopy { copy, copies } => {
                write!(f, "copy {copy} does not exist, the array has {copies}")
            }
        }
    }
}

impl core::error::Error for MapError {}

/// Chunks of array data on `members` members of `member_chunks` chunks each (`None`: too
/// many to count).
fn array_chunks(level: Level, members: NonZeroU64, member_chunks: u64) -> Option<u64> {
    match level {
        Level::Raid0 => member_chunks.checked_mul(members.get()),
        Level::Raid1 => Some(member_chunks),
        Level::Raid10 => member_chunks
            .checked_mul(members.get())
            .map(|slots| slots / u64::from(RAID10_NEAR_COPIES)),
        Level::Raid5(_) | Level::Raid6(_) => member_chunks.checked_mul(
            members
                .get()
                .saturating_sub(u64::from(level.parity_members())),
        ),
    }
}

/// A validated array shape. Fields are private so every value upholds the invariants checked by
/// [`Geometry::new`] (member count >= 2, chunk a power of two, sizes bounded); the mapping code
/// relies on them for panic-free arithmetic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    level: Level,
    members: NonZeroU64,
    /// log2 of the chunk size in sectors; unused (0) for RAID 1.
    chunk_shift: u32,
    /// The used part of each member's data area (whole chunks for striped levels).
    member_data_sectors: u64,
    array_sectors: u64,
}

impl Geometry {
    /// Validates an array shape. `member_data_sectors` is the size of each member's data area; for
    /// striped levels it is rounded down to whole chunks. RAID 1 takes `chunk_sectors == 0`.
    pub fn new(
        level: Level,
        members: u32,
        chunk_sectors: u32,
        member_data_sectors: u64,
    ) -> Result<Self, GeometryError> {
        let members_nz = match NonZeroU64::new(u64::from(members)) {
            Some(n) if (level.min_members()..=MAX_MEMBERS).contains(&members) => n,
            _ => return Err(GeometryError::MemberCount { level, members }),
        };
        let chunk_ok = if level.is_striped() {
            chunk_sectors.is_power_of_two()
                && (MIN_CHUNK_SECTORS..=MAX_CHUNK_SECTORS).contains(&chunk_sectors)
        } else {
            chunk_sectors == 0
        };
        if !chunk_ok {
            return Err(GeometryError::ChunkSize {
                level,
                chunk_sectors,
            });
        }
        let too_large = GeometryError::TooLarge {
            member_data_sectors,
        };
        if member_data_sectors > MAX_SECTORS {
            return Err(too_large);
        }
        let chunk_shift = if level.is_striped() {
            chunk_sectors.trailing_zeros()
        } else {
            0
        };
        let member_chunks = member_data_sectors >> chunk_shift;
        let array_chunks = array_chunks(level, members_nz, member_chunks).ok_or(too_large)?;
        if array_chunks == 0 {
            return Err(GeometryError::TooSmall {
                member_data_sectors,
            });
        }
        if array_chunks > MAX_SECTORS >> chunk_shift {
            return Err(too_large);
        }
        Ok(Self {
            level,
            members: members_nz,
            chunk_shift,
            member_data_sectors: member_chunks << chunk_shift,
            array_sectors: array_chunks << chunk_shift,
        })
    }

    /// The same shape with each member's data area `member_data_sectors` (a resize).
    pub fn resized(&self, member_data_sectors: u64) -> Result<Self, GeometryError> {
        Self::new(
            self.level,
            self.members(),
            self.chunk_sectors(),
            member_data_sectors,
        )
    }

    /// The same level, chunk and size over `members` members (a mirror's copies changed).
    pub fn with_members(&self, members: u32) -> Result<Self, GeometryError> {
        Self::new(
            self.level,
            members,
            self.chunk_sectors(),
            self.member_data_sectors,
        )
    }

    /// [`Self::resized`] and [`Self::with_members`] for a count and size that this level and
    /// chunk already took: the checks are not made again (a running array's geometry, asked
    /// for at every request). A count of 0 (never stored) keeps this one's.
    pub(super) fn resized_again(&self, members: u32, member_data_sectors: u64) -> Self {
        let members = NonZeroU64::new(u64::from(members)).unwrap_or(self.members);
        let member_chunks = member_data_sectors >> self.chunk_shift;
        let array_chunks = array_chunks(self.level, members, member_chunks).unwrap_or(0);
        Self {
            members,
            member_data_sectors: member_chunks << self.chunk_shift,
            array_sectors: array_chunks << self.chunk_shift,
            ..*self
        }
    }

    /// The RAID level.
    pub fn level(&self) -> Level {
        self.level
    }

    /// Number of members (RAID positions).
    pub fn members(&self) -> u32 {
        // At most MAX_MEMBERS: lossless.
        self.members.get() as u32
    }

    /// Chunk size in sectors; 0 for RAID 1.
    pub fn chunk_sectors(&self) -> u32 {
        if self.level.is_striped() {
            1u32.wrapping_shl(self.chunk_shift)
        } else {
            0
        }
    }

    /// Sectors of each member's data area that hold array data.
    pub fn member_data_sectors(&self) -> u64 {
        self.member_data_sectors
    }

    /// Size of the array.
    pub fn array_sectors(&self) -> u64 {
        self.array_sectors
    }

    /// The sectors a resync or scrub walks through: the array's on mirrors (each copy of a
    /// range compared), a member's on RAID 5/6 (each stripe row's data and parity).
    pub fn resync_sectors(&self) -> u64 {
        if self.level.has_parity() {
            self.member_data_sectors
        } else {
            self.array_sectors
        }
    }

    /// How many copies of each sector the array keeps.
    pub fn copies(&self) -> u32 {
        match self.level {
            Level::Raid0 | Level::Raid5(_) | Level::Raid6(_) => 1,
            Level::Raid1 => self.members(),
            Level::Raid10 => RAID10_NEAR_COPIES,
        }
    }

    /// Members' worth of distinct data in one full stripe (the stripe width).
    pub fn data_members(&self) -> u32 {
        match self.level {
            Level::Raid0 => self.members(),
            Level::Raid1 => 1,
            Level::Raid10 => (self.members() / RAID10_NEAR_COPIES).max(1),
            Level::Raid5(_) | Level::Raid6(_) => self
                .members()
                .saturating_sub(self.level.parity_members())
                .max(1),
        }
    }

    /// Sectors of array data in one stripe (a chunk on every data member); for RAID 1 the
    /// whole array.
    pub fn stripe_data_sectors(&self) -> u64 {
        if self.level.is_striped() {
            self.sectors_in(u64::from(self.data_members()))
        } else {
            self.array_sectors
        }
    }

    /// The stripe (member chunk row) array sector `sector` lies in, for RAID 5 and 6.
    pub fn stripe_of(&self, sector: u64) -> u64 {
        let data = u64::from(self.data_members()).max(1);
        self.chunks_in(sector) / data
    }

    /// Where P, Q and the data chunks of stripe `stripe` sit (RAID 5 and 6; `None` otherwise).
    pub fn stripe_map(&self, stripe: u64) -> Option<StripeMap> {
        match self.level {
            Level::Raid5(layout) | Level::Raid6(layout) => Some(StripeMap::new(
                layout,
                self.members(),
                self.level.parity_members(),
                stripe,
            )),
            _ => None,
        }
    }

    /// First member sector (relative to the data area) of stripe `stripe`'s chunks.
    pub fn stripe_member_sector(&self, stripe: u64) -> u64 {
        self.sectors_in(stripe)
    }

    /// RAID 5 and 6: how many adjacent stripes form a *run*, the unit a request stays within
    /// and the stripe engine locks and batches: as many as [`RUN_DATA_SECTORS`] of data
    /// hold, at least one. 1 for the other levels.
    pub fn run_stripes(&self) -> u64 {
        if self.level.has_parity() {
            (RUN_DATA_SECTORS / self.stripe_data_sectors().max(1)).max(1)
        } else {
            1
        }
    }

    /// Value for the queue limit `chunk_sectors`: no piece returned by the mapping crosses a
    /// multiple of it, so blk-mq requests split there map to a single chunk per copy. For
    /// RAID 5 and 6 a whole run of stripes ([`Self::run_stripes`]): a request never spans
    /// two runs. 0 (no boundary) for RAID 1.
    pub fn boundary_sectors(&self) -> u32 {
        if self.level.has_parity() {
            // A run holds at most max(RUN_DATA_SECTORS, one stripe of 1 MiB * 31) sectors:
            // fits.
            let run = self
                .run_stripes()
                .saturating_mul(self.stripe_data_sectors());
            u32::try_from(run).unwrap_or(u32::MAX)
        } else {
            self.chunk_sectors()
        }
    }

    /// Value for the queue limit `io_min` in bytes: one chunk; 0 (no preference) for RAID 1.
    pub fn io_min_bytes(&self) -> u32 {
        // At most 1 MiB.
        self.chunk_sectors() << SECTOR_SHIFT
    }

    /// Value for the queue limit `io_opt` in bytes: a full stripe, chunk times data members;
    /// 0 (no preference) for RAID 1.
    pub fn io_opt_bytes(&self) -> u32 {
        // At most 1 MiB * 32 = 32 MiB.
        self.io_min_bytes().saturating_mul(self.data_members())
    }

    /// Member I/O for reading `sectors` sectors at array sector `start` from copy `copy`
    /// (`0..copies()`): one piece per chunk touched, in array order. Degraded readers remap a
    /// piece whose member is missing by calling this again for the piece with another copy.
    /// True if every sector still has a copy (or enough parity) with the members in `lost`
    /// gone: an array may run without them.
    pub fn has_all_data(&self, lost: MemberSet) -> bool {
        let lost = lost.intersect(MemberSet::first(self.members()));
        if self.level.has_parity() {
            // Every stripe has one chunk on each member: any `parity` of them may be lost.
            return lost.len() <= self.level.parity_members();
        }
        // One sector of each of the first `members` chunks covers every member combination of
        // the layout (a row for RAID 0/1, every adjacent pair for near-2 RAID 10).
        let chunk = u64::from(self.chunk_sectors().max(1));
        (0..u64::from(self.members())).all(|i| {
            (0..self.copies()).any(|copy| {
                self.map_read(i.saturating_mul(chunk), 1, copy)
                    .ok()
                    .and_then(|mut pieces| pieces.next())
                    .is_some_and(|piece| !lost.contains(piece.member))
            })
        })
    }

    pub fn map_read(&self, start: u64, sectors: u64, copy: u32) -> Result<Pieces, MapError> {
        let copies = self.copies();
        if copy >= copies {
            return Err(MapError::NoSuchCopy { copy, copies });
        }
        self.pieces(start, sectors, copy, copy)
    }

    /// Member I/O for writing `sectors` sectors at array sector `start`: every copy of every chunk
    /// touched, chunk by chunk in array order, copies in order within a chunk.
    pub fn map_write(&self, start: u64, sectors: u64) -> Result<Pieces, MapError> {
        self.pieces(start, sectors, 0, self.copies().saturating_sub(1))
    }

    fn pieces(
        &self,
        start: u64,
        sectors: u64,
        first_copy: u32,
        last_copy: u32,
    ) -> Result<Pieces, MapError> {
        match start.checked_add(sectors) {
            Some(end) if end <= self.array_sectors => Ok(Pieces {
                geometry: *self,
                next_sector: start,
                end,
                copy: first_copy,
                first_copy,
                last_copy,
            }),
            _ => Err(MapError::OutOfRange {
                start,
                sectors,
                array_sectors: self.array_sectors,
            }),
        }
    }

    /// The data that member `member` holds at `member_sector` of its data area on a mirrored
    /// level (RAID 1, 10), as the piece of it there: at most `limit` sectors, within one
    /// chunk. `None` past the array's data (space a RAID 10 of an odd member count leaves at
    /// the end), for other levels and out-of-range arguments. The inverse of `map_write`.
    pub fn mirror_piece(&self, member: u32, member_sector: u64, limit: u64) -> Option<Piece> {
        if member >= self.members() || member_sector >= self.member_data_sectors() || limit == 0 {
            return None;
        }
        let (array_sector, copy) = match self.level {
            Level::Raid1 => (member_sector, member),
            Level::Raid10 => {
                let row = self.chunks_in(member_sector);
                let slot = row
                    .checked_mul(u64::from(self.members()))?
                    .checked_add(u64::from(member))?;
                let copies = u64::from(RAID10_NEAR_COPIES);
                // Below RAID10_NEAR_COPIES: lossless.
                let copy = (slot % copies) as u32;
                let chunk = slot / copies;
                (
                    self.sectors_in(chunk) | (member_sector & self.chunk_mask()),
                    copy,
                )
            }
            _ => return None,
        };
        let remaining = self
            .array_sectors
            .checked_sub(array_sector)
            .filter(|&r| r > 0)?;
        let sectors = self.piece_len(array_sector, remaining.min(limit));
        Some(Piece {
            member,
            member_sector,
            sectors,
            array_sector,
            copy,
        })
    }

    /// Member and member sector of copy `copy` of array sector `sector`. Callers pass
    /// `sector < array_sectors` and `copy < copies()`, which bounds every intermediate value; the
    /// checked arithmetic only keeps overflow panics out of the kernel build.
    fn locate(&self, sector: u64, copy: u32) -> Option<(u32, u64)> {
        let chunk = self.chunks_in(sector);
        let offset_in_chunk = sector & self.chunk_mask();
        let slot = match self.level {
            Level::Raid0 => chunk,
            Level::Raid1 => return Some((copy, sector)),
            Level::Raid10 => chunk
                .checked_mul(u64::from(RAID10_NEAR_COPIES))?
                .checked_add(u64::from(copy))?,
            Level::Raid5(_) | Level::Raid6(_) => {
                let data = u64::from(self.data_members());
                let stripe = chunk.checked_div(data)?;
                // Below `data`, at most 31: lossless.
                let index = chunk.checked_rem(data)? as u32;
                let member = self.stripe_map(stripe)?.data_member(index);
                return Some((member, self.sectors_in(stripe) | offset_in_chunk));
            }
        };
        // Remainder by at most MAX_MEMBERS: lossless.
        let member = (slot % self.members) as u32;
        let row = slot / self.members;
        Some((member, self.sectors_in(row) | offset_in_chunk))
    }

    // The three helpers below shift by `chunk_shift`, which `new` bounded to 0..=11. The
    // `wrapping_*` forms are the same operations minus the shift-overflow check (a panic path)
    // that the kernel build would otherwise keep.

    /// Whole chunks in `sectors`.
    fn chunks_in(&self, sectors: u64) -> u64 {
        sectors.wrapping_shr(self.chunk_shift)
    }

    /// Sectors in `chunks` chunks.
    fn sectors_in(&self, chunks: u64) -> u64 {
        chunks.wrapping_shl(self.chunk_shift)
    }

    /// Offset-within-chunk bits of a sector number.
    fn chunk_mask(&self) -> u64 {
        self.sectors_in(1).wrapping_sub(1)
    }

    /// Sectors from `sector` to the end of its chunk, capped at `remaining`.
    fn piece_len(&self, sector: u64, remaining: u64) -> u64 {
        if !self.level.is_striped() {
            return remaining;
        }
        let chunk_mask = self.chunk_mask();
        // `mask - offset` cannot underflow, and a mask below 2^11 plus one cannot saturate.
        let to_chunk_end = (chunk_mask - (sector & chunk_mask)).saturating_add(1);
        to_chunk_end.min(remaining)
    }
}

/// One contiguous member I/O covering part of an array range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Piece {
    /// Member (RAID position) index, `0..members`.
    pub member: u32,
    /// First sector on the member, relative to its data area.
    pub member_sector: u64,
    /// Length in sectors (never 0, never crossing a chunk boundary on striped levels).
    pub sectors: u64,
    /// First array sector the piece covers.
    pub array_sector: u64,
    /// Which copy of the data this is, `0..copies()`.
    pub copy: u32,
}

/// Iterator over the member pieces of an array range; see [`Geometry::map_read`] and
/// [`Geometry::map_write`]. Allocates nothing.
#[derive(Clone, Debug)]
pub struct Pieces {
    geometry: Geometry,
    next_sector: u64,
    end: u64,
    /// Copy of the current chunk piece to yield next.
    copy: u32,
    first_copy: u32,
    last_copy: u32,
}

impl Iterator for Pieces {
    type Item = Piece;

    fn next(&mut self) -> Option<Piece> {
        let remaining = self.end.checked_sub(self.next_sector).filter(|&r| r > 0)?;
        let sectors = self.geometry.piece_len(self.next_sector, remaining);
        let (member, member_sector) = self.geometry.locate(self.next_sector, self.copy)?;
        let piece = Piece {
            member,
            member_sector,
            sectors,
            array_sector: self.next_sector,
            copy: self.copy,
        };
        if self.copy < self.last_copy {
            self.copy = self.copy.saturating_add(1);
        } else {
            self.copy = self.first_copy;
            // At most `end`: `sectors <= remaining`.
            self.next_sector = self.next_sector.saturating_add(sectors);
        }
        Some(piece)
    }
}

impl FusedIterator for Pieces {}
