// SPDX-License-Identifier: GPL-2.0

//! graid's on-disk member superblock: one 4 KiB little-endian block, 4 KiB from the start of
//! every member, protected by CRC-32C. `Documentation/on-disk-format.rst` describes it byte by
//! byte; the offsets in [`offset`] are the source of truth and a golden test pins the encoding.
//!
//! [`decode`] treats its input as hostile: it never panics and accepts only superblocks that
//! [`encode`] could have written (apart from unknown compatible feature bits and reserved bytes).

use core::fmt;

use super::bitmap::{Regions, BLOCK_SECTORS};
use super::crc32c::crc32c;
use super::geometry::{Geometry, GeometryError, Level, MAX_SECTORS};
use super::ppl::LogArea;

/// Size of the superblock block in bytes.
pub const SUPERBLOCK_SIZE: usize = 4096;
/// Member sector where the superblock starts (byte 4096, like md's v1.2). The first 4 KiB stay
/// untouched so a partition table or boot sector there survives and is never mistaken for ours.
pub const SUPERBLOCK_SECTOR: u64 = 8;
/// First member sector after the superblock: reserved areas and the data area start here or later.
pub const METADATA_END_SECTOR: u64 = SUPERBLOCK_SECTOR + (SUPERBLOCK_SIZE as u64 >> 9);
/// Data offset graid creates arrays with: 2 MiB, leaving room for a bitmap and a journal.
pub const DEFAULT_DATA_OFFSET_SECTORS: u64 = 4096;
/// The bitmap area graid creates arrays with: from the end of the superblock to 1 MiB (the
/// second MiB before the data is left for a journal or partial parity log).
pub const DEFAULT_BITMAP_AREA: Area = Area {
    offset: METADATA_END_SECTOR,
    sectors: 2048 - METADATA_END_SECTOR,
};
/// The journal area and data offset graid creates an array with on members of
/// `member_sectors`: with a partial parity log, [`super::ppl::log_area_for`]'s area, else no
/// journal; the data after the metadata areas (at [`DEFAULT_DATA_OFFSET_SECTORS`] at least) and
/// the [`reshape_headroom`] past them.
pub fn new_array_layout(member_sectors: u64, ppl: bool) -> (Area, u64) {
    let (journal, metadata_end) = if ppl {
        let log = super::ppl::log_area_for(member_sectors);
        (log, log.offset + log.sectors)
    } else {
        (Area::NONE, 0)
    };
    let data_offset =
        metadata_end.max(DEFAULT_DATA_OFFSET_SECTORS) + reshape_headroom(member_sectors);
    (journal, data_offset)
}

/// The most room graid leaves before the data for a reshape: 128 MiB, as mdadm's headroom.
pub const MAX_RESHAPE_HEADROOM_SECTORS: u64 = 128 * 2048;

/// The room graid leaves between its metadata areas and the data of a new array, so that a
/// reshape to more data members can move the data offset down into it with no backup file
/// (`on-disk-format.rst`, "Reshape (design)"): a 1024th of the member, rounded down to a power
/// of two, at most [`MAX_RESHAPE_HEADROOM_SECTORS`] (mdadm sizes its headroom alike). None on
/// members under 1 GiB, where it would be under 1 MiB: they keep the 2 MiB offset (a reshape of
/// one lends the log's area instead, or is refused for want of room).
pub fn reshape_headroom(member_sectors: u64) -> u64 {
    let want = (member_sectors / 1024).min(MAX_RESHAPE_HEADROOM_SECTORS);
    if want < 2048 {
        return 0;
    }
    1 << (u64::BITS - 1 - want.leading_zeros())
}

/// The data area starts on a 4 KiB boundary, so 4 KiB-sector members stay aligned.
pub const DATA_OFFSET_ALIGN_SECTORS: u64 = 8;

/// First 8 bytes of every superblock.
pub const MAGIC: [u8; 8] = *b"GRAID-SB";
/// The only format version this code reads and writes. Compatible extensions use feature bits.
pub const FORMAT_VERSION: u32 = 1;
/// Bytes of the array name field.
pub const NAME_LEN: usize = 32;
/// Bytes of the home-host field.
pub const HOMEHOST_LEN: usize = 64;
/// Bytes of a UUID.
pub const UUID_LEN: usize = 16;
/// Entries in the slot table: one per device that ever joined the array and is still
/// remembered, active members and spares alike (at most 32 of them active).
pub const MAX_SLOTS: usize = 64;
/// `recovery_offset` of a member whose whole data area is in sync.
pub const RECOVERY_COMPLETE: u64 = u64::MAX;

/// Compatible feature: the bitmap area holds a write-intent bitmap of
/// [`offset::BITMAP_REGION_SECTORS`]-sector regions (`bitmap.rs`). Compatible because a writer
/// that drops it loses only the bitmap: a reader without it resyncs everything.
pub const FEATURE_BITMAP: u64 = 1 << 0;
/// Compatible feature: the journal area holds a partial parity log (`ppl.rs`). Compatible
/// because a writer that drops it leaves an array without one, which after a crash refuses to
/// start degraded (as every array without one does).
pub const FEATURE_PPL: u64 = 1 << 1;
/// Compatible features this code knows. Unknown ones are ignored on read and dropped on write,
/// so a feature may only be compatible if its data is harmless to lose with its bit.
pub const FEATURES_COMPAT_KNOWN: u64 = FEATURE_BITMAP | FEATURE_PPL;
/// Incompatible feature: a reshape is in progress ([`Reshape`], on-disk-format.rst
/// "Reshape"): below or above its position the data is in another geometry, which a reader
/// that does not know it would read wrong. Set for exactly as long as the reshape runs.
pub const FEATURE_RESHAPE: u64 = 1 << 0;
/// Incompatible features this code knows. A superblock with any other bit set is refused.
pub const FEATURES_INCOMPAT_KNOWN: u64 = FEATURE_RESHAPE;

/// State flag: no write was in flight when this was written (the array was idle or
/// stopped); without it, the copies or parity may differ anywhere.
const STATE_CLEAN: u32 = 1 << 0;
/// State flag: a resync has not finished; [`offset::RESYNC_OFFSET`] says where it goes on.
const STATE_RESYNC_PENDING: u32 = 1 << 1;
const STATE_KNOWN: u32 = STATE_CLEAN | STATE_RESYNC_PENDING;

/// Byte offsets of the fields. Everything not listed is reserved and written as zero.
pub mod offset {
    /// `[u8; 8]` [`super::MAGIC`].
    pub const MAGIC: usize = 0x000;
    /// `u32` format version.
    pub const VERSION: usize = 0x008;
    /// `u32` state flags (bit 0: clean, bit 1: resync pending).
    pub const STATE: usize = 0x00C;
    /// `u64` compatible feature bits.
    pub const FEATURES_COMPAT: usize = 0x010;
    /// `u64` incompatible (required) feature bits.
    pub const FEATURES_INCOMPAT: usize = 0x018;
    /// `[u8; 16]` array UUID.
    pub const ARRAY_UUID: usize = 0x020;
    /// `[u8; 32]` array name, UTF-8, NUL-padded.
    pub const ARRAY_NAME: usize = 0x030;
    /// `u64` creation time, seconds since the Unix epoch.
    pub const CREATED: usize = 0x050;
    /// `u64` event counter.
    pub const EVENTS: usize = 0x058;
    /// `u32` RAID level (0, 1, 10, 5, 6).
    pub const LEVEL: usize = 0x060;
    /// `u32` layout: md's numbers (0x102 for RAID 10, 0..=3 for RAID 5/6).
    pub const LAYOUT: usize = 0x064;
    /// `u32` chunk size in sectors (0 for RAID 1).
    pub const CHUNK_SECTORS: usize = 0x068;
    /// `u32` number of members (RAID positions).
    pub const MEMBERS: usize = 0x06C;
    /// `[u8; 16]` this device's UUID.
    pub const MEMBER_UUID: usize = 0x070;
    /// `u32` this device's index in the slot table.
    pub const THIS_SLOT: usize = 0x080;
    /// `u64` data area start, sectors from the member start.
    pub const DATA_OFFSET: usize = 0x088;
    /// `u64` data area size in sectors, the same on every member.
    pub const DATA_SIZE: usize = 0x090;
    /// `u64` sectors of this member's data area known in sync.
    pub const RECOVERY_OFFSET: usize = 0x098;
    /// `u64` bitmap area start, sectors from the member start (0: none).
    pub const BITMAP_OFFSET: usize = 0x0A0;
    /// `u64` bitmap area size in sectors.
    pub const BITMAP_SECTORS: usize = 0x0A8;
    /// `u64` journal area start, sectors from the member start (0: none).
    pub const JOURNAL_OFFSET: usize = 0x0B0;
    /// `u64` journal area size in sectors.
    pub const JOURNAL_SECTORS: usize = 0x0B8;
    /// `u64` where a pending resync goes on (with the resync-pending state bit; else 0).
    pub const RESYNC_OFFSET: usize = 0x0C0;
    /// `u64` write-intent bitmap region size in sectors of the resync's walk (with
    /// [`super::FEATURE_BITMAP`]; else 0).
    pub const BITMAP_REGION_SECTORS: usize = 0x0C8;
    /// `u64` events of the newest update written while every member was in sync (with
    /// [`super::FEATURE_BITMAP`]; else 0): a member last written at or after it missed only
    /// what the bitmap holds.
    pub const BITMAP_EVENTS: usize = 0x0D0;
    /// `[u8; 16]` the partial parity log's key (with [`super::FEATURE_PPL`]; else 0): every
    /// entry header carries it, so no block the log did not write as a header (user data in
    /// a payload) is ever taken for one. Drawn anew at every start.
    pub const LOG_KEY: usize = 0x0D8;
    /// `[u16; 64]` slot table.
    pub const SLOTS: usize = 0x100;
    /// End of the slot table.
    pub const SLOTS_END: usize = SLOTS + 2 * super::MAX_SLOTS;
    /// `[u8; 64]` the host the array belongs to, UTF-8, NUL-padded; all zero: none, any host
    /// may start it by itself. Reserved (zero) before it was defined, so older superblocks read
    /// as belonging to no host, and a writer that does not know it drops only the host.
    pub const HOMEHOST: usize = 0x180;
    /// `u64` with [`super::FEATURE_RESHAPE`]: the reshape's position, array sectors.
    pub const RESHAPE_POSITION: usize = 0x1C0;
    /// `u32` with [`super::FEATURE_RESHAPE`]: the level when the reshape ends.
    pub const NEW_LEVEL: usize = 0x1C8;
    /// `u32` with [`super::FEATURE_RESHAPE`]: md's layout number when it ends.
    pub const NEW_LAYOUT: usize = 0x1CC;
    /// `u32` with [`super::FEATURE_RESHAPE`]: the chunk size when it ends.
    pub const NEW_CHUNK_SECTORS: usize = 0x1D0;
    /// `u32` with [`super::FEATURE_RESHAPE`]: the member count when it ends.
    pub const NEW_MEMBERS: usize = 0x1D4;
    /// `u64` with [`super::FEATURE_RESHAPE`]: each member's data area start when it ends.
    pub const NEW_DATA_OFFSET: usize = 0x1D8;
    /// `u32` with [`super::FEATURE_RESHAPE`]: bit 0, backwards.
    pub const RESHAPE_FLAGS: usize = 0x1E0;
    /// `u32` CRC-32C of bytes `0..CHECKSUM`.
    pub const CHECKSUM: usize = 0xFFC;
}

/// A text field of `N` bytes: UTF-8, no NUL, `/` or control characters (a name becomes
/// `/dev/graid/NAME` and a uevent variable). Stored NUL-padded.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct PaddedText<const N: usize>([u8; N]);

/// An array name.
pub type ArrayName = PaddedText<NAME_LEN>;
/// The host an array belongs to (mdadm's homehost): empty for none.
pub type HomeHost = PaddedText<HOMEHOST_LEN>;

/// Why an array name or host is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NameError {
    /// Longer than the field's `max` bytes.
    TooLong { len: usize, max: usize },
    /// Not valid UTF-8.
    NotUtf8,
    /// A NUL byte followed by something other than NUL padding.
    NotNulPadded,
    /// Contains `/` or a control character.
    ForbiddenChar,
}

impl fmt::Display for NameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::TooLong { len, max } => write!(f, "is {len} bytes, at most {max} fit"),
            Self::NotUtf8 => f.write_str("is not valid UTF-8"),
            Self::NotNulPadded => f.write_str("has bytes after its NUL padding"),
            Self::ForbiddenChar => f.write_str("contains '/' or a control character"),
        }
    }
}

impl core::error::Error for NameError {}

impl<const N: usize> PaddedText<N> {
    /// The empty text.
    pub const EMPTY: Self = Self([0; N]);

    /// Checks and pads `text`.
    pub fn new(text: &str) -> Result<Self, NameError> {
        let bytes = text.as_bytes();
        if bytes.len() > N {
            return Err(NameError::TooLong {
                len: bytes.len(),
                max: N,
            });
        }
        let mut padded = [0u8; N];
        for (dst, &src) in padded.iter_mut().zip(bytes) {
            *dst = src;
        }
        Self::from_padded(padded)
    }

    /// Checks a field as stored on disk.
    pub fn from_padded(padded: [u8; N]) -> Result<Self, NameError> {
        let (text, padding) = padded
            .split_at_checked(text_len(&padded))
            .ok_or(NameError::NotNulPadded)?;
        if padding.iter().any(|&b| b != 0) {
            return Err(NameError::NotNulPadded);
        }
        core::str::from_utf8(text).map_err(|_| NameError::NotUtf8)?;
        // Byte-wise on valid UTF-8: C0 controls, DEL, '/', and C1 controls (U+0080..U+009F,
        // encoded as 0xC2 0x80..0x9F).
        let mut prev = 0u8;
        for &b in text {
            if b < 0x20 || b == 0x7F || b == b'/' || (prev == 0xC2 && (0x80..=0x9F).contains(&b)) {
                return Err(NameError::ForbiddenChar);
            }
            prev = b;
        }
        Ok(Self(padded))
    }

    /// The text without padding.
    pub fn as_str(&self) -> &str {
        // Validated on construction; never falls back.
        self.0
            .get(..text_len(&self.0))
            .and_then(|text| core::str::from_utf8(text).ok())
            .unwrap_or("")
    }

    /// Whether the field is empty (all zero).
    pub fn is_empty(&self) -> bool {
        self.0.first().is_none_or(|&b| b == 0)
    }

    /// The NUL-padded bytes as stored on disk.
    pub fn as_padded(&self) -> &[u8; N] {
        &self.0
    }
}

/// Bytes before the first NUL. Counted with a bounded `Range`: unlike `position()` or `0..`, its
/// counter carries no overflow check (a panic path) into the kernel build.
fn text_len<const N: usize>(padded: &[u8; N]) -> usize {
    for (&b, i) in padded.iter().zip(0..N) {
        if b == 0 {
            return i;
        }
    }
    N
}

impl<const N: usize> fmt::Debug for PaddedText<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

/// What a slot-table entry says about one device. On disk a `u16`: `0x0000` empty,
/// `0x01rr` active in role `rr`, `0x0200` spare, `0x0300` faulty.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Slot {
    /// No device.
    Empty,
    /// Holds RAID position `role` (in sync up to that device's own recovery offset).
    Active { role: u8 },
    /// A spare, waiting for a role.
    Spare,
    /// Failed; kept so the device is refused if it comes back.
    Faulty,
}

impl Slot {
    const EMPTY: u16 = 0x0000;
    const ACTIVE: u16 = 0x0100;
    const SPARE: u16 = 0x0200;
    const FAULTY: u16 = 0x0300;

    /// The on-disk `u16`.
    pub fn encode(self) -> u16 {
        match self {
            Self::Empty => Self::EMPTY,
            Self::Active { role } => Self::ACTIVE | u16::from(role),
            Self::Spare => Self::SPARE,
            Self::Faulty => Self::FAULTY,
        }
    }

    /// The entry for an on-disk `u16`, if it is one of the defined encodings.
    pub fn decode(raw: u16) -> Option<Self> {
        let [role, kind] = raw.to_le_bytes();
        match (u16::from(kind) << 8, role) {
            (Self::EMPTY, 0) => Some(Self::Empty),
            (Self::ACTIVE, role) => Some(Self::Active { role }),
            (Self::SPARE, 0) => Some(Self::Spare),
            (Self::FAULTY, 0) => Some(Self::Faulty),
            _ => None,
        }
    }
}

/// A reserved on-member area in sectors from the member start; `sectors == 0` means none.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Area {
    pub offset: u64,
    pub sectors: u64,
}

impl Area {
    /// No area.
    pub const NONE: Self = Self {
        offset: 0,
        sectors: 0,
    };

    /// This area, ending at member sector `end` at the latest (a reshape's data moved into the
    /// room an unused area reserved); none if nothing is left of it.
    pub fn ending_by(self, end: u64) -> Self {
        match end.checked_sub(self.offset) {
            Some(room) if room > 0 && self.sectors > 0 => Self {
                offset: self.offset,
                sectors: self.sectors.min(room),
            },
            _ if self.sectors == 0 => self,
            _ => Self::NONE,
        }
    }
}

/// Which reserved area an error is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AreaKind {
    Bitmap,
    Journal,
}

impl fmt::Display for AreaKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Bitmap => "bitmap",
            Self::Journal => "journal",
        })
    }
}

/// A UUID shown in the canonical 8-4-4-4-12 form (lowercase, bytes in order).
pub struct UuidText<'a>(pub &'a [u8; UUID_LEN]);

impl fmt::Display for UuidText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, byte) in self.0.iter().enumerate() {
            if matches!(i, 4 | 6 | 8 | 10) {
                f.write_str("-")?;
            }
            write!(f, "{byte:02x}")?;
        }
        Ok(())
    }
}

/// A reshape in progress ([`FEATURE_RESHAPE`]): the superblock's level, chunk, members and
/// data offset are the old geometry's until it ends; `data_size` is both geometries'.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reshape {
    /// Array sector up to which (forwards) or from which (backwards) the data is in the new
    /// geometry.
    pub position: u64,
    pub new_level: Level,
    pub new_chunk_sectors: u32,
    pub new_members: u32,
    pub new_data_offset: u64,
    /// From the end towards the start (fewer data members).
    pub backwards: bool,
}

/// Reshape flag: backwards.
const RESHAPE_BACKWARDS: u32 = 1 << 0;

/// One member's superblock, decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Superblock {
    /// Compatible feature bits (unknown ones are dropped by [`encode`]), but for those the
    /// fields below stand for ([`FEATURE_BITMAP`]).
    pub features_compat: u64,
    /// Incompatible feature bits; must be a subset of [`FEATURES_INCOMPAT_KNOWN`], but for
    /// those the fields below stand for ([`FEATURE_RESHAPE`]).
    pub features_incompat: u64,
    pub array_uuid: [u8; UUID_LEN],
    pub array_name: ArrayName,
    /// The host the array belongs to; empty: none (any host starts it by itself).
    pub homehost: HomeHost,
    /// Creation time, seconds since the Unix epoch.
    pub created: u64,
    /// Bumped on every metadata change; the freshest members win at assembly.
    pub events: u64,
    /// No write was in flight when this was written: the copies or parity differ at most
    /// where `resync_offset` says. Without it they may differ anywhere.
    pub clean: bool,
    /// Where the resync goes on, if one is pending ([`RECOVERY_COMPLETE`]: none): array
    /// sectors on RAID 1/10, member data-area sectors on RAID 5/6 (the resync's own walk).
    /// Ignored where `clean` is not set (the resync then starts from 0).
    pub resync_offset: u64,
    pub level: Level,
    /// Chunk size in sectors, 0 for RAID 1.
    pub chunk_sectors: u32,
    /// Number of RAID positions.
    pub members: u32,
    /// This device's UUID.
    pub member_uuid: [u8; UUID_LEN],
    /// This device's entry in `slots`.
    pub this_slot: u32,
    /// Start of the data area in sectors from the member start.
    pub data_offset: u64,
    /// Size of the data area in sectors, the same on every member.
    pub data_size: u64,
    /// Sectors of this member's data area known in sync; [`RECOVERY_COMPLETE`] when all are.
    pub recovery_offset: u64,
    /// The area the write-intent bitmap lives in (reserved without one).
    pub bitmap: Area,
    /// Region size of the write-intent bitmap in sectors of the resync's walk; 0: the array
    /// has none. On disk as [`FEATURE_BITMAP`] and [`offset::BITMAP_REGION_SECTORS`].
    pub bitmap_region: u64,
    /// With a bitmap: the events of the newest update written while every member was in sync.
    /// Bits are only cleared then, so a member whose own superblock is at least this new
    /// missed nothing the bitmap does not show (`re-add`). 0 without a bitmap.
    pub bitmap_events: u64,
    /// The area of the partial parity log (reserved without one).
    pub journal: Area,
    /// The journal area holds a partial parity log ([`FEATURE_PPL`]; RAID 5/6 only).
    pub ppl: bool,
    /// The log's key (see [`offset::LOG_KEY`]); zeros without a log.
    pub log_key: [u8; UUID_LEN],
    /// What every remembered device is, indexed by device slot.
    pub slots: [Slot; MAX_SLOTS],
    /// The reshape in progress, if any ([`FEATURE_RESHAPE`]).
    pub reshape: Option<Reshape>,
}

/// Why a superblock is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SuperblockError {
    /// Fewer than [`SUPERBLOCK_SIZE`] bytes were given.
    TooShort { len: usize },
    /// Not a graid superblock.
    BadMagic,
    /// A format version this code does not read.
    UnsupportedVersion { version: u32 },
    /// The block is corrupt.
    BadChecksum { stored: u32, computed: u32 },
    /// Features this code does not implement are required.
    UnknownRequiredFeatures { bits: u64 },
    /// State flags this code does not know.
    UnknownState { bits: u32 },
    /// A RAID level graid does not implement.
    UnknownLevel { level: u32 },
    /// A layout the level does not have.
    BadLayout { level: Level, layout: u32 },
    /// The data area is empty.
    EmptyDataArea,
    /// Level, member count, chunk size and data size do not make an array.
    Geometry(GeometryError),
    /// The array name field is invalid.
    BadName(NameError),
    /// The home-host field is invalid.
    BadHomeHost(NameError),
    /// The array UUID is all zeroes.
    NilArrayUuid,
    /// The member UUID is all zeroes.
    NilMemberUuid,
    /// A slot-table entry has no defined meaning.
    BadSlotEntry { slot: usize, raw: u16 },
    /// A slot claims a role the array does not have.
    RoleOutOfRange { slot: usize, role: u8, members: u32 },
    /// Two slots claim the same role.
    DuplicateRole { role: u8 },
    /// This device's slot is out of the table or empty.
    BadThisSlot { slot: u32 },
    /// The data area overlaps the superblock or is not 4 KiB aligned.
    BadDataOffset { data_offset: u64 },
    /// The data area ends beyond the largest supported member.
    DataAreaTooLarge { data_offset: u64, data_size: u64 },
    /// A reserved area overlaps the superblock, the data area or the other area.
    BadArea {
        area: AreaKind,
        offset: u64,
        sectors: u64,
    },
    /// The recovery offset lies beyond the data area.
    BadRecoveryOffset {
        recovery_offset: u64,
        data_size: u64,
    },
    /// The pending resync's position lies beyond the sectors it walks.
    BadResyncOffset { resync_offset: u64, sectors: u64 },
    /// The write-intent bitmap's region size is not a power of two of at least 8 sectors,
    /// or its bits do not fit the bitmap area (or it has none, or it is not 4 KiB aligned), or
    /// its events are newer than the superblock's.
    BadBitmap {
        region_sectors: u64,
        area_sectors: u64,
    },
    /// The reshape's new geometry, its data offset, its direction or its position does not
    /// hold together.
    BadReshape { what: &'static str },
}

impl fmt::Display for SuperblockError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::TooShort { len } => {
                write!(f, "superblock needs {SUPERBLOCK_SIZE} bytes, got {len}")
            }
            Self::BadMagic => f.write_str("no graid superblock (bad magic)"),
            Self::UnsupportedVersion { version } => write!(
                f,
                "superblock format version {version} is not supported (only {FORMAT_VERSION})"
            ),
            Self::BadChecksum { stored, computed } => write!(
                f,
                "superblock checksum mismatch: stored {stored:#010x}, computed {computed:#010x}"
            ),
            Self::UnknownRequiredFeatures { bits } => {
                write!(f, "superblock requires unknown features {bits:#x}")
            }
            Self::UnknownState { bits } => write!(f, "unknown state flags {bits:#x}"),
            Self::UnknownLevel { level } => write!(f, "unsupported RAID level {level}"),
            Self::BadLayout { level, layout } => {
                write!(f, "layout {layout:#x} is not valid for {level}")
            }
            Self::EmptyDataArea => f.write_str("data area is empty"),
            Self::Geometry(e) => write!(f, "impossible geometry: {e}"),
            Self::BadName(e) => write!(f, "array name {e}"),
            Self::BadHomeHost(e) => write!(f, "home host {e}"),
            Self::NilArrayUuid => f.write_str("array UUID is nil"),
            Self::NilMemberUuid => f.write_str("member UUID is nil"),
            Self::BadSlotEntry { slot, raw } => {
                write!(f, "slot {slot} has undefined entry {raw:#06x}")
            }
            Self::RoleOutOfRange {
                slot,
                role,
                members,
            } => write!(
                f,
                "slot {slot} claims role {role} of an array with {members} members"
            ),
            Self::DuplicateRole { role } => write!(f, "role {role} is claimed by two slots"),
            Self::BadThisSlot { slot } => {
                write!(f, "this device's slot {slot} is outside the table or empty")
            }
            Self::BadDataOffset { data_offset } => write!(
                f,
                "data offset {data_offset} is not 4 KiB aligned at or after sector \
                 {METADATA_END_SECTOR}"
            ),
            Self::DataAreaTooLarge {
                data_offset,
                data_size,
            } => write!(
                f,
                "data area of {data_size} sectors at {data_offset} is beyond the largest member"
            ),
            Self::BadArea {
                area,
                offset,
                sectors,
            } => write!(
                f,
                "{area} area of {sectors} sectors at {offset} overlaps other metadata or data"
            ),
            Self::BadRecoveryOffset {
                recovery_offset,
                data_size,
            } => write!(
                f,
                "recovery offset {recovery_offset} is beyond the {data_size}-sector data area"
            ),
            Self::BadResyncOffset {
                resync_offset,
                sectors,
            } => write!(
                f,
                "resync offset {resync_offset} is beyond the {sectors} sectors a resync walks"
            ),
            Self::BadBitmap {
                region_sectors,
                area_sectors,
            } => write!(
                f,
                "a bitmap of {region_sectors}-sector regions does not fit its aligned \
                 {area_sectors}-sector area"
            ),
            Self::BadReshape { what } => write!(f, "the reshape in progress is invalid: {what}"),
        }
    }
}

impl core::error::Error for SuperblockError {}

impl From<GeometryError> for SuperblockError {
    fn from(e: GeometryError) -> Self {
        Self::Geometry(e)
    }
}

impl From<NameError> for SuperblockError {
    fn from(e: NameError) -> Self {
        Self::BadName(e)
    }
}

impl Superblock {
    /// The array geometry this superblock describes.
    pub fn geometry(&self) -> Result<Geometry, GeometryError> {
        Geometry::new(self.level, self.members, self.chunk_sectors, self.data_size)
    }

    /// The partial parity log is replayed at the start this superblock describes: the array
    /// has one and was not stopped cleanly, and no reshape was under way (which logs
    /// nothing: the resync after the crash covers it).
    pub fn log_replay_due(&self) -> bool {
        self.ppl && !self.clean && self.reshape.is_none()
    }

    /// The member sector the data ends before: during a reshape the later of its two data
    /// areas' ends. `None` if it overflows.
    pub fn data_end(&self) -> Option<u64> {
        let offset = match self.reshape {
            Some(r) => self.data_offset.max(r.new_data_offset),
            None => self.data_offset,
        };
        offset.checked_add(self.data_size)
    }

    /// This superblock as the member in slot `slot` with UUID `uuid` stores it: the per-member
    /// fields filled in, everything else the array's.
    pub fn for_member(&self, slot: u32, uuid: [u8; UUID_LEN]) -> Superblock {
        Superblock {
            this_slot: slot,
            member_uuid: uuid,
            ..*self
        }
    }

    /// The slot-table entry a member whose device is missing at assembly keeps: its device's
    /// (where its failure is then recorded), or none ([`NO_SLOT`]) where the table names no
    /// device in the role (it failed before, or the role is one a mirror's grow added): no
    /// other entry is marked for it, neither a spare's that happens to have the role's number
    /// nor a free one, which a later add would then have to skip for good.
    ///
    /// [`NO_SLOT`]: super::members::NO_SLOT
    pub fn missing_member_slot(&self, role: u32) -> u32 {
        self.slot_of_role(role).unwrap_or(super::members::NO_SLOT)
    }

    /// This device's slot-table entry, if the slot exists.
    pub fn this_slot_entry(&self) -> Option<Slot> {
        usize::try_from(self.this_slot)
            .ok()
            .and_then(|i| self.slots.get(i))
            .copied()
    }

    /// The slot-table entry of the device holding `role`, if the table has one.
    pub fn slot_of_role(&self, role: u32) -> Option<u32> {
        (0u32..)
            .zip(self.slots.iter())
            .find(|(_, s)| matches!(s, Slot::Active { role: r } if u32::from(*r) == role))
            .map(|(i, _)| i)
    }

    /// This device's role, if it is an active member.
    pub fn this_role(&self) -> Option<u8> {
        match self.this_slot_entry() {
            Some(Slot::Active { role }) => Some(role),
            _ => None,
        }
    }

    /// Checks everything [`decode`] checks after the checksum; returns the geometry.
    pub fn validate(&self) -> Result<Geometry, SuperblockError> {
        let unknown = self.features_incompat & !FEATURES_INCOMPAT_KNOWN;
        if unknown != 0 {
            return Err(SuperblockError::UnknownRequiredFeatures { bits: unknown });
        }
        if self.data_size == 0 {
            return Err(SuperblockError::EmptyDataArea);
        }
        let geometry = self.geometry()?;
        if self.array_uuid == [0; UUID_LEN] {
            return Err(SuperblockError::NilArrayUuid);
        }
        if self.member_uuid == [0; UUID_LEN] {
            return Err(SuperblockError::NilMemberUuid);
        }
        self.validate_slots()?;
        self.validate_placement()?;
        if self.recovery_offset != RECOVERY_COMPLETE && self.recovery_offset > self.data_size {
            return Err(SuperblockError::BadRecoveryOffset {
                recovery_offset: self.recovery_offset,
                data_size: self.data_size,
            });
        }
        let walk = geometry.resync_sectors();
        if self.resync_offset != RECOVERY_COMPLETE && self.resync_offset > walk {
            return Err(SuperblockError::BadResyncOffset {
                resync_offset: self.resync_offset,
                sectors: walk,
            });
        }
        self.validate_bitmap(walk)?;
        self.validate_reshape(&geometry)?;
        if self.ppl && (!self.level.has_parity() || LogArea::new(self.journal).is_none()) {
            return Err(SuperblockError::BadArea {
                area: AreaKind::Journal,
                offset: self.journal.offset,
                sectors: self.journal.sectors,
            });
        }
        Ok(geometry)
    }

    /// The bitmap's regions, if the array has a bitmap (valid once [`Self::validate`] passed).
    pub fn bitmap_regions(&self) -> Option<Regions> {
        if self.bitmap_region == 0 {
            return None;
        }
        let walk = self.geometry().ok()?.resync_sectors();
        Regions::new(walk, self.bitmap_region)
    }

    /// The geometry a reshape in progress ends in (`None` without one; valid once
    /// [`Self::validate`] passed).
    pub fn new_geometry(&self) -> Option<Geometry> {
        let r = self.reshape?;
        Geometry::new(
            r.new_level,
            r.new_members,
            r.new_chunk_sectors,
            self.data_size,
        )
        .ok()
    }

    /// A reshape's new geometry must be one, its data area aligned, after the metadata and
    /// the reserved areas, on the side its direction says, and its position within the array.
    fn validate_reshape(&self, old: &Geometry) -> Result<(), SuperblockError> {
        let Some(r) = self.reshape else {
            return Ok(());
        };
        let bad = |what| Err(SuperblockError::BadReshape { what });
        let Some(new) = self.new_geometry() else {
            return bad("the new geometry is impossible");
        };
        let offset = r.new_data_offset;
        if offset < METADATA_END_SECTOR || offset & (DATA_OFFSET_ALIGN_SECTORS - 1) != 0 {
            return bad("the new data offset is not 4 KiB aligned after the superblock");
        }
        if offset
            .checked_add(self.data_size)
            .is_none_or(|end| end > MAX_SECTORS)
        {
            return bad("the new data area ends beyond the largest member");
        }
        let areas_end = [self.bitmap, self.journal]
            .iter()
            .filter(|a| a.sectors != 0)
            .map(|a| a.offset.saturating_add(a.sectors))
            .max()
            .unwrap_or(0);
        if areas_end > offset {
            return bad("the new data area overlaps the bitmap or log area");
        }
        if r.backwards != (offset > self.data_offset) || offset == self.data_offset {
            return bad("the data offset moves against the direction");
        }
        if r.position > old.array_sectors().max(new.array_sectors()) {
            return bad("the position is beyond the array");
        }
        Ok(())
    }

    /// A bitmap needs a valid region size and an aligned area its blocks fit in.
    fn validate_bitmap(&self, walk: u64) -> Result<(), SuperblockError> {
        if self.bitmap_region == 0 {
            return match self.bitmap_events {
                0 => Ok(()),
                _ => Err(SuperblockError::BadBitmap {
                    region_sectors: 0,
                    area_sectors: self.bitmap.sectors,
                }),
            };
        }
        let area = self.bitmap;
        // RAID 0 has no copies to resync.
        let mirrored = self.level != Level::Raid0;
        let fits = Regions::new(walk, self.bitmap_region)
            .is_some_and(|r| r.area_sectors() <= area.sectors && r.blocks() > 0);
        let events_ok = self.bitmap_events <= self.events;
        if mirrored && fits && events_ok && area.offset % BLOCK_SECTORS == 0 {
            return Ok(());
        }
        Err(SuperblockError::BadBitmap {
            region_sectors: self.bitmap_region,
            area_sectors: area.sectors,
        })
    }

    fn validate_slots(&self) -> Result<(), SuperblockError> {
        // Bit r set: some slot holds role r. Roles are < members <= 32 once checked.
        let mut roles_seen: u32 = 0;
        // During a reshape the roles of both geometries are in use.
        let members = self
            .reshape
            .map_or(self.members, |r| r.new_members.max(self.members));
        for (entry, slot) in self.slots.iter().zip(0..MAX_SLOTS) {
            let Slot::Active { role } = *entry else {
                continue;
            };
            if u32::from(role) >= members {
                return Err(SuperblockError::RoleOutOfRange {
                    slot,
                    role,
                    members,
                });
            }
            let bit = 1u32.checked_shl(u32::from(role)).unwrap_or(0);
            if roles_seen & bit != 0 {
                return Err(SuperblockError::DuplicateRole { role });
            }
            roles_seen |= bit;
        }
        match self.this_slot_entry() {
            None | Some(Slot::Empty) => Err(SuperblockError::BadThisSlot {
                slot: self.this_slot,
            }),
            Some(_) => Ok(()),
        }
    }

    /// Superblock, reserved areas and data area must not overlap and must fit a member.
    fn validate_placement(&self) -> Result<(), SuperblockError> {
        let data_offset = self.data_offset;
        if data_offset < METADATA_END_SECTOR || data_offset & (DATA_OFFSET_ALIGN_SECTORS - 1) != 0 {
            return Err(SuperblockError::BadDataOffset { data_offset });
        }
        match data_offset.checked_add(self.data_size) {
            Some(end) if end <= MAX_SECTORS => {}
            _ => {
                return Err(SuperblockError::DataAreaTooLarge {
                    data_offset,
                    data_size: self.data_size,
                })
            }
        }
        let areas = [
            (AreaKind::Bitmap, self.bitmap),
            (AreaKind::Journal, self.journal),
        ];
        for (kind, area) in areas {
            let bad = SuperblockError::BadArea {
                area: kind,
                offset: area.offset,
                sectors: area.sectors,
            };
            if area.sectors == 0 {
                if area.offset != 0 {
                    return Err(bad);
                }
                continue;
            }
            match area.offset.checked_add(area.sectors) {
                Some(end) if area.offset >= METADATA_END_SECTOR && end <= data_offset => {}
                _ => return Err(bad),
            }
        }
        // Both areas lie before the data; they must not overlap each other either.
        let (b, j) = (self.bitmap, self.journal);
        let disjoint = b.sectors == 0
            || j.sectors == 0
            || b.offset.saturating_add(b.sectors) <= j.offset
            || j.offset.saturating_add(j.sectors) <= b.offset;
        if !disjoint {
            return Err(SuperblockError::BadArea {
                area: AreaKind::Journal,
                offset: j.offset,
                sectors: j.sectors,
            });
        }
        Ok(())
    }
}

fn put<const N: usize>(block: &mut [u8; SUPERBLOCK_SIZE], at: usize, bytes: [u8; N]) {
    // Offsets are constants inside the block; `get_mut` just keeps this free of panic paths.
    if let Some(field) = block
        .get_mut(at..)
        .and_then(|rest| rest.first_chunk_mut::<N>())
    {
        *field = bytes;
    }
}

fn put_u32(block: &mut [u8; SUPERBLOCK_SIZE], at: usize, value: u32) {
    put(block, at, value.to_le_bytes());
}

fn put_u64(block: &mut [u8; SUPERBLOCK_SIZE], at: usize, value: u64) {
    put(block, at, value.to_le_bytes());
}

fn get<const N: usize>(block: &[u8; SUPERBLOCK_SIZE], at: usize) -> [u8; N] {
    block
        .get(at..)
        .and_then(|rest| rest.first_chunk::<N>())
        .copied()
        .unwrap_or([0; N])
}

fn get_u32(block: &[u8; SUPERBLOCK_SIZE], at: usize) -> u32 {
    u32::from_le_bytes(get(block, at))
}

fn get_u64(block: &[u8; SUPERBLOCK_SIZE], at: usize) -> u64 {
    u64::from_le_bytes(get(block, at))
}

/// CRC-32C of everything before the checksum field.
fn checksum(block: &[u8; SUPERBLOCK_SIZE]) -> u32 {
    crc32c(block.get(..offset::CHECKSUM).unwrap_or(&[]))
}

/// Writes `sb` as a complete block (reserved bytes zeroed, checksum set). Refuses a superblock
/// that [`decode`] would refuse, so graid never writes one it cannot read back.
pub fn encode(sb: &Superblock, block: &mut [u8; SUPERBLOCK_SIZE]) -> Result<(), SuperblockError> {
    sb.validate()?;
    *block = [0; SUPERBLOCK_SIZE];
    let pending = sb.resync_offset != RECOVERY_COMPLETE;
    let state =
        if sb.clean { STATE_CLEAN } else { 0 } | if pending { STATE_RESYNC_PENDING } else { 0 };
    // Unknown compatible features go, since their data in reserved bytes is not written back;
    // the bitmap's bit follows its region size.
    let bitmap = if sb.bitmap_region != 0 {
        FEATURE_BITMAP
    } else {
        0
    };
    let ppl = if sb.ppl { FEATURE_PPL } else { 0 };
    let compat =
        sb.features_compat & FEATURES_COMPAT_KNOWN & !(FEATURE_BITMAP | FEATURE_PPL) | bitmap | ppl;
    put(block, offset::MAGIC, MAGIC);
    put_u32(block, offset::VERSION, FORMAT_VERSION);
    put_u32(block, offset::STATE, state);
    put_u64(block, offset::FEATURES_COMPAT, compat);
    let reshape = if sb.reshape.is_some() {
        FEATURE_RESHAPE
    } else {
        0
    };
    put_u64(
        block,
        offset::FEATURES_INCOMPAT,
        sb.features_incompat & !FEATURE_RESHAPE | reshape,
    );
    put(block, offset::ARRAY_UUID, sb.array_uuid);
    put(block, offset::ARRAY_NAME, *sb.array_name.as_padded());
    put(block, offset::HOMEHOST, *sb.homehost.as_padded());
    put_u64(block, offset::CREATED, sb.created);
    put_u64(block, offset::EVENTS, sb.events);
    put_u32(block, offset::LEVEL, sb.level.code());
    put_u32(block, offset::LAYOUT, sb.level.layout());
    put_u32(block, offset::CHUNK_SECTORS, sb.chunk_sectors);
    put_u32(block, offset::MEMBERS, sb.members);
    put(block, offset::MEMBER_UUID, sb.member_uuid);
    put_u32(block, offset::THIS_SLOT, sb.this_slot);
    put_u64(block, offset::DATA_OFFSET, sb.data_offset);
    put_u64(block, offset::DATA_SIZE, sb.data_size);
    put_u64(block, offset::RECOVERY_OFFSET, sb.recovery_offset);
    put_u64(block, offset::BITMAP_OFFSET, sb.bitmap.offset);
    put_u64(block, offset::BITMAP_SECTORS, sb.bitmap.sectors);
    put_u64(block, offset::JOURNAL_OFFSET, sb.journal.offset);
    put_u64(block, offset::JOURNAL_SECTORS, sb.journal.sectors);
    if pending {
        put_u64(block, offset::RESYNC_OFFSET, sb.resync_offset);
    }
    if sb.ppl {
        put(block, offset::LOG_KEY, sb.log_key);
    }
    if sb.bitmap_region != 0 {
        put_u64(block, offset::BITMAP_REGION_SECTORS, sb.bitmap_region);
        put_u64(block, offset::BITMAP_EVENTS, sb.bitmap_events);
    }
    if let Some(r) = sb.reshape {
        put_u64(block, offset::RESHAPE_POSITION, r.position);
        put_u32(block, offset::NEW_LEVEL, r.new_level.code());
        put_u32(block, offset::NEW_LAYOUT, r.new_level.layout());
        put_u32(block, offset::NEW_CHUNK_SECTORS, r.new_chunk_sectors);
        put_u32(block, offset::NEW_MEMBERS, r.new_members);
        put_u64(block, offset::NEW_DATA_OFFSET, r.new_data_offset);
        let flags = if r.backwards { RESHAPE_BACKWARDS } else { 0 };
        put_u32(block, offset::RESHAPE_FLAGS, flags);
    }
    if let Some(table) = block.get_mut(offset::SLOTS..offset::SLOTS_END) {
        for (raw, slot) in table.chunks_exact_mut(2).zip(&sb.slots) {
            if let Some(pair) = raw.first_chunk_mut() {
                *pair = slot.encode().to_le_bytes();
            }
        }
    }
    let crc = checksum(block);
    put_u32(block, offset::CHECKSUM, crc);
    Ok(())
}

/// Reads and fully validates a superblock from the first [`SUPERBLOCK_SIZE`] bytes of `bytes`.
pub fn decode(bytes: &[u8]) -> Result<Superblock, SuperblockError> {
    let block = bytes
        .first_chunk::<SUPERBLOCK_SIZE>()
        .ok_or(SuperblockError::TooShort { len: bytes.len() })?;
    if get::<8>(block, offset::MAGIC) != MAGIC {
        return Err(SuperblockError::BadMagic);
    }
    let version = get_u32(block, offset::VERSION);
    if version != FORMAT_VERSION {
        return Err(SuperblockError::UnsupportedVersion { version });
    }
    let stored = get_u32(block, offset::CHECKSUM);
    let computed = checksum(block);
    if stored != computed {
        return Err(SuperblockError::BadChecksum { stored, computed });
    }
    let state = get_u32(block, offset::STATE);
    if state & !STATE_KNOWN != 0 {
        return Err(SuperblockError::UnknownState {
            bits: state & !STATE_KNOWN,
        });
    }
    let level_code = get_u32(block, offset::LEVEL);
    let layout = get_u32(block, offset::LAYOUT);
    let level = Level::from_codes(level_code, layout).map_err(|known| match known {
        Some(level) => SuperblockError::BadLayout { level, layout },
        None => SuperblockError::UnknownLevel { level: level_code },
    })?;
    let mut slots = [Slot::Empty; MAX_SLOTS];
    let table = block.get(offset::SLOTS..offset::SLOTS_END).unwrap_or(&[]);
    for ((slot, raw), index) in slots
        .iter_mut()
        .zip(table.chunks_exact(2))
        .zip(0..MAX_SLOTS)
    {
        let raw = raw
            .first_chunk()
            .map_or(0, |pair| u16::from_le_bytes(*pair));
        *slot = Slot::decode(raw).ok_or(SuperblockError::BadSlotEntry { slot: index, raw })?;
    }
    let features_compat = get_u64(block, offset::FEATURES_COMPAT);
    let features_incompat = get_u64(block, offset::FEATURES_INCOMPAT);
    let reshape = if features_incompat & FEATURE_RESHAPE != 0 {
        let code = get_u32(block, offset::NEW_LEVEL);
        let layout = get_u32(block, offset::NEW_LAYOUT);
        let new_level =
            Level::from_codes(code, layout).map_err(|_| SuperblockError::BadReshape {
                what: "the new level or layout is unknown",
            })?;
        let flags = get_u32(block, offset::RESHAPE_FLAGS);
        if flags & !RESHAPE_BACKWARDS != 0 {
            return Err(SuperblockError::BadReshape {
                what: "unknown reshape flags",
            });
        }
        Some(Reshape {
            position: get_u64(block, offset::RESHAPE_POSITION),
            new_level,
            new_chunk_sectors: get_u32(block, offset::NEW_CHUNK_SECTORS),
            new_members: get_u32(block, offset::NEW_MEMBERS),
            new_data_offset: get_u64(block, offset::NEW_DATA_OFFSET),
            backwards: flags & RESHAPE_BACKWARDS != 0,
        })
    } else {
        None
    };
    let sb = Superblock {
        // The bitmap's bit is `bitmap_region`'s, the log's `ppl`.
        features_compat: features_compat & !(FEATURE_BITMAP | FEATURE_PPL),
        // The reshape's bit is `reshape`'s.
        features_incompat: features_incompat & !FEATURE_RESHAPE,
        array_uuid: get(block, offset::ARRAY_UUID),
        array_name: ArrayName::from_padded(get(block, offset::ARRAY_NAME))?,
        homehost: HomeHost::from_padded(get(block, offset::HOMEHOST))
            .map_err(SuperblockError::BadHomeHost)?,
        created: get_u64(block, offset::CREATED),
        events: get_u64(block, offset::EVENTS),
        clean: state & STATE_CLEAN != 0,
        resync_offset: if state & STATE_RESYNC_PENDING != 0 {
            get_u64(block, offset::RESYNC_OFFSET)
        } else {
            RECOVERY_COMPLETE
        },
        level,
        chunk_sectors: get_u32(block, offset::CHUNK_SECTORS),
        members: get_u32(block, offset::MEMBERS),
        member_uuid: get(block, offset::MEMBER_UUID),
        this_slot: get_u32(block, offset::THIS_SLOT),
        data_offset: get_u64(block, offset::DATA_OFFSET),
        data_size: get_u64(block, offset::DATA_SIZE),
        recovery_offset: get_u64(block, offset::RECOVERY_OFFSET),
        bitmap: Area {
            offset: get_u64(block, offset::BITMAP_OFFSET),
            sectors: get_u64(block, offset::BITMAP_SECTORS),
        },
        bitmap_region: if features_compat & FEATURE_BITMAP != 0 {
            get_u64(block, offset::BITMAP_REGION_SECTORS)
        } else {
            0
        },
        bitmap_events: if features_compat & FEATURE_BITMAP != 0 {
            get_u64(block, offset::BITMAP_EVENTS)
        } else {
            0
        },
        journal: Area {
            offset: get_u64(block, offset::JOURNAL_OFFSET),
            sectors: get_u64(block, offset::JOURNAL_SECTORS),
        },
        ppl: features_compat & FEATURE_PPL != 0,
        log_key: if features_compat & FEATURE_PPL != 0 {
            get(block, offset::LOG_KEY)
        } else {
            [0; UUID_LEN]
        },
        slots,
        reshape,
    };
    sb.validate()?;
    Ok(sb)
}
