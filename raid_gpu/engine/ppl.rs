// SPDX-License-Identifier: GPL-2.0

//! The partial parity log (PPL): what closes the RAID 5/6 write hole. The pure part: the log's
//! layout and blocks, and which parity a replay rewrites from which entry.
//!
//! # Why a partial parity log
//!
//! A partial-stripe write changes some data columns and the parity in place. A crash between
//! those writes leaves the parity matching neither the old nor the new data; on a degraded
//! array the lost member's data is then computed from that parity and comes back wrong, though
//! nothing wrote it (the write hole). Before such a write graid writes, with FUA, to the log of
//! the stripe's parity member the *partial parity* of the rows it updates: for every row, the
//! XOR (for Q: the GF(2^8) sum, g^slot · D) of the data columns the write leaves alone there,
//! as md's PPL does for RAID 5. After a crash the parity is made whole again from the log and
//! the data columns the write changed, as they are now (old, new or torn, it does not matter):
//! P = pp ⊕ Σ D_changed. A lost column the write left alone is inside pp, so it stays
//! reconstructable; a column it changed that was lost after it was being written. A column
//! missing when the write is made counts as one it leaves alone, its new data inside pp
//! (`stripe.rs`, `after_compute`): the replay, which cannot read it, makes the parity hold it.
//!
//! A journal (md's raid5-cache) would log the new data too: every partial write twice, and a
//! device for it. The partial parity is at most one column per parity member, written to a
//! member the write writes anyway, and only partial writes pay (a full-stripe write changes
//! every column: nothing of the stripe needs protecting).
//!
//! # Layout
//!
//! The log lives in the superblock's journal area of every member (by default the second MiB
//! before the data, [`DEFAULT_LOG_AREA`]): a 4 KiB *head* block, then a *ring* of entries. An
//! entry is a 4 KiB header block and its payload (the partial parity of its rows, rounded up
//! to 4 KiB). Entries of one *epoch* are appended; when a member's ring is full the log *wraps*:
//! once no logged write is in flight, every member's head is rewritten with the next epoch
//! (`FUA`, after an empty flush of every member: every write before it is durable), which
//! voids every older entry at once.
//! A replay takes only entries of the epoch its members' heads hold.
//!
//! Entries that lie back to back in a ring and go to the member in one write share a header
//! block: a *group* block holds their fields (up to [`MAX_GROUP_ENTRIES`], md's io_unit) and
//! their payloads follow it back to back, so a run of 4 KiB entries writes half the bytes.
//! Each entry's place in the ring is still reserved with a header block of its own; a group
//! leaves the run's last blocks unwritten.
//!
//! An entry is also voided, for the rows it covers, by any later entry (by sequence number) on
//! rows it covers: the later write found the stripe as the earlier one left it. A full-stripe
//! write over rows whose run may hold a replayable entry therefore logs a *barrier*: a header
//! without payload, so an older partial parity is never replayed over newer data.

use super::crc32c::crc32c;
use super::geometry::MAX_MEMBERS;
use super::members::MemberSet;
use super::superblock::{Area, METADATA_END_SECTOR, UUID_LEN};

/// Bytes of a head or entry header block.
pub const BLOCK_BYTES: usize = 4096;
/// Sectors of a block.
pub const BLOCK_SECTORS: u64 = (BLOCK_BYTES / 512) as u64;
/// The log area graid creates arrays with: the second MiB before the data (the bitmap has the
/// first).
pub const DEFAULT_LOG_AREA: Area = Area {
    offset: 2048,
    sectors: 2048,
};
/// The largest log area graid creates arrays with: 64 MiB (mdadm leaves 128 MiB before the
/// data of members of 128 GiB or more).
pub const MAX_DEFAULT_LOG_SECTORS: u64 = 64 * 2048;

/// The log area graid creates an array with on members of `member_sectors`: from 1 MiB on (the
/// bitmap has the first), a thousandth of the member (mdadm's rule for the room before its
/// data), rounded down to a power of two between [`DEFAULT_LOG_AREA`]'s 1 MiB and
/// [`MAX_DEFAULT_LOG_SECTORS`]. The larger the ring, the rarer an epoch switch (a flush of
/// every member, which logged writes may wait for): a 1 MiB area's half holds three partial
/// entries of 1 MiB writes at 512 KiB chunks, a 64 MiB one's about two hundred.
pub fn log_area_for(member_sectors: u64) -> Area {
    let want = (member_sectors / 1024).clamp(DEFAULT_LOG_AREA.sectors, MAX_DEFAULT_LOG_SECTORS);
    Area {
        offset: DEFAULT_LOG_AREA.offset,
        // `want` is at least 1 MiB: never zero.
        sectors: 1 << (u64::BITS - 1 - want.leading_zeros()),
    }
}

/// The smallest log area: a head and two entries of the longest slice.
pub const MIN_LOG_SECTORS: u64 = BLOCK_SECTORS + 2 * (BLOCK_SECTORS + MAX_LOGGED_SECTORS);
// Each half holds at least one entry of the longest slice.
/// The most rows one logged write slice covers (its partial parity's length).
pub const MAX_LOGGED_SECTORS: u64 = 256;
/// The most rows a barrier covers: a full slice, as long as the widest stripe buffer allows
/// (far longer than a partial entry: a whole stripe of 512 KiB chunks is 1024 rows). A
/// barrier refused at replay would let an older partial entry be replayed over the newer
/// full-stripe data it voids.
pub const MAX_BARRIER_SECTORS: u64 = super::stripe::WIDE_SLICE_SECTORS;

const HEAD_MAGIC: [u8; 8] = *b"GRAIDPLH";
const ENTRY_MAGIC: [u8; 8] = *b"GRAIDPLE";
/// The head's version.
const VERSION: u32 = 1;
/// The entry header's version. 2: its checksum covers its fields only (at
/// [`entry::FIELDS_CHECKSUM`]), not the whole block: a tenth of the bytes to checksum per
/// logged write. Version 1 entries (checksum over the block) are still read.
const ENTRY_VERSION: u32 = 2;

const GROUP_MAGIC: [u8; 8] = *b"GRAIDPLG";
/// The group block's version.
const GROUP_VERSION: u32 = 1;

/// Byte offsets in a head block.
mod head {
    pub const MAGIC: usize = 0x00;
    pub const VERSION: usize = 0x08;
    pub const UUID: usize = 0x10;
    pub const EPOCH: usize = 0x20;
}

/// Byte offsets in an entry header.
mod entry {
    pub const MAGIC: usize = 0x00;
    pub const VERSION: usize = 0x08;
    pub const KIND: usize = 0x0C;
    pub const UUID: usize = 0x10;
    pub const EPOCH: usize = 0x20;
    pub const SEQ: usize = 0x28;
    pub const START: usize = 0x30;
    pub const SECTORS: usize = 0x38;
    pub const PARITY: usize = 0x40;
    pub const MEMBERS: usize = 0x44;
    pub const PAYLOAD_SECTORS: usize = 0x48;
    pub const PAYLOAD_CRC: usize = 0x50;
    /// `u32`: the members the write logged this entry to (a [`super::MemberSet`]).
    pub const TARGETS: usize = 0x54;
    /// `[u8; 16]` the log's key (the superblock's `log_key`).
    pub const KEY: usize = 0x58;
    /// `[(u32, u32); 32]`: each member's written rows, from and to, relative to `START`.
    pub const WRITTEN: usize = 0x80;
    /// Version 2: CRC-32C of the bytes before it (the fields); the rest of the block is
    /// unused.
    pub const FIELDS_CHECKSUM: usize = WRITTEN + 8 * super::MAX_MEMBERS as usize;
}

/// Byte offsets in a group block: several entries' fields in one header block (md's io_unit).
mod group {
    pub const MAGIC: usize = 0x00;
    pub const VERSION: usize = 0x08;
    /// `u32`: records that follow.
    pub const COUNT: usize = 0x0C;
    pub const UUID: usize = 0x10;
    pub const KEY: usize = 0x20;
    /// The records: each the first [`super::RECORD_BYTES`] of a version 2 entry header, its
    /// fields and their checksum; after the last, CRC-32C of the bytes before it.
    pub const RECORDS: usize = 0x40;
}

/// Bytes of a group's record: an entry header's fields and their checksum.
const RECORD_BYTES: usize = entry::FIELDS_CHECKSUM + 4;

/// The most entries a group block holds.
pub const MAX_GROUP_ENTRIES: usize = (BLOCK_BYTES - group::RECORDS - 4) / RECORD_BYTES;

/// Both blocks: CRC-32C of the bytes before it.
const CHECKSUM: usize = BLOCK_BYTES - 4;

fn put<const N: usize>(block: &mut [u8], at: usize, bytes: [u8; N]) {
    if let Some(field) = block
        .get_mut(at..)
        .and_then(|rest| rest.first_chunk_mut::<N>())
    {
        *field = bytes;
    }
}

fn get<const N: usize>(block: &[u8], at: usize) -> [u8; N] {
    block
        .get(at..)
        .and_then(|rest| rest.first_chunk::<N>())
        .copied()
        .unwrap_or([0; N])
}

fn get_u32(block: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(get(block, at))
}

fn get_u64(block: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(get(block, at))
}

fn seal(block: &mut [u8; BLOCK_BYTES]) {
    let crc = crc32c(block.get(..CHECKSUM).unwrap_or(&[]));
    put(block, CHECKSUM, crc.to_le_bytes());
}

fn sealed(block: &[u8; BLOCK_BYTES]) -> bool {
    crc32c(block.get(..CHECKSUM).unwrap_or(&[])) == get_u32(block, CHECKSUM)
}

/// Seals an entry header's fields (version 2).
fn seal_fields(block: &mut [u8; BLOCK_BYTES]) {
    let crc = crc32c(block.get(..entry::FIELDS_CHECKSUM).unwrap_or(&[]));
    put(block, entry::FIELDS_CHECKSUM, crc.to_le_bytes());
}

/// Whether an entry's fields (a header block's first bytes, or a group's record) are sealed.
fn fields_sealed(block: &[u8]) -> bool {
    crc32c(block.get(..entry::FIELDS_CHECKSUM).unwrap_or(&[]))
        == get_u32(block, entry::FIELDS_CHECKSUM)
}

/// Where a member's log lies: the head, then the ring.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogArea {
    /// First sector of the area (the head), from the member's start.
    pub offset: u64,
    /// Sectors of the ring after the head, a multiple of [`BLOCK_SECTORS`].
    pub ring_sectors: u64,
}

impl LogArea {
    /// The log in `area`, if it is large enough and 4 KiB aligned.
    pub fn new(area: Area) -> Option<Self> {
        if area.sectors < MIN_LOG_SECTORS
            || area.offset < METADATA_END_SECTOR
            || area.offset % BLOCK_SECTORS != 0
        {
            return None;
        }
        Some(Self {
            offset: area.offset,
            ring_sectors: (area.sectors - BLOCK_SECTORS) / BLOCK_SECTORS * BLOCK_SECTORS,
        })
    }

    /// The member sector of ring offset `at`.
    pub fn ring_sector(&self, at: u64) -> u64 {
        self.offset + BLOCK_SECTORS + at
    }

    /// Ring sectors an entry with `payload` sectors of partial parity takes.
    pub fn entry_sectors(payload: u64) -> u64 {
        BLOCK_SECTORS + payload.div_ceil(BLOCK_SECTORS) * BLOCK_SECTORS
    }

    /// Sectors of each half of the ring (epochs alternate between them), a multiple of
    /// [`BLOCK_SECTORS`].
    pub fn half_sectors(&self) -> u64 {
        self.ring_sectors / 2 / BLOCK_SECTORS * BLOCK_SECTORS
    }

    /// The ring offsets where an entry header may start (every block).
    pub fn header_offsets(&self) -> impl Iterator<Item = u64> {
        (0..self.ring_sectors / BLOCK_SECTORS).map(|b| b * BLOCK_SECTORS)
    }
}

/// Writes a head block: the log of array `uuid` holds entries of `epoch`.
pub fn encode_head(uuid: &[u8; UUID_LEN], epoch: u64, block: &mut [u8; BLOCK_BYTES]) {
    *block = [0; BLOCK_BYTES];
    put(block, head::MAGIC, HEAD_MAGIC);
    put(block, head::VERSION, VERSION.to_le_bytes());
    put(block, head::UUID, *uuid);
    put(block, head::EPOCH, epoch.to_le_bytes());
    seal(block);
}

/// The epoch a head block of array `uuid` holds; `None` if it is not one (never written,
/// damaged, another array's).
pub fn decode_head(uuid: &[u8; UUID_LEN], block: &[u8; BLOCK_BYTES]) -> Option<u64> {
    (get::<8>(block, head::MAGIC) == HEAD_MAGIC
        && get_u32(block, head::VERSION) == VERSION
        && get::<UUID_LEN>(block, head::UUID) == *uuid
        && sealed(block))
    .then(|| get_u64(block, head::EPOCH))
}

/// What an entry is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryKind {
    /// A partial write's partial parity: the payload holds it for every row of the entry.
    Partial,
    /// A full-stripe write over rows an older entry may cover: no payload; voids the older
    /// entries there.
    Barrier,
}

/// Which parity an entry's payload is partial of (the parity of the member whose log holds it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParityKind {
    P,
    Q,
}

/// One log entry's header, decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    pub kind: EntryKind,
    pub parity: ParityKind,
    pub epoch: u64,
    /// Orders entries across members: the later entry wins where two cover a row.
    pub seq: u64,
    /// The rows it covers: data-area sectors, the same on every member.
    pub start: u64,
    pub sectors: u64,
    pub members: u32,
    /// Each member's written rows, relative to `start` (`(0, 0)`: none).
    pub written: [(u32, u32); MAX_MEMBERS as usize],
    /// CRC-32C of the payload (`sectors` sectors for a partial entry).
    pub payload_crc: u32,
    /// Every member the write logged this entry to (P's and Q's logs, or a barrier's parity
    /// members). The write sends no data until all of them completed, so a log that was read
    /// whole and lacks the entry means the write never sent any ([`drop_torn`]). Empty: an
    /// entry from before graid recorded them, taken as whole.
    pub targets: MemberSet,
}

impl Entry {
    /// The payload's length in sectors.
    pub fn payload_sectors(&self) -> u64 {
        match self.kind {
            EntryKind::Partial => self.sectors,
            EntryKind::Barrier => 0,
        }
    }

    /// The most rows an entry of its kind covers.
    pub fn max_sectors(&self) -> u64 {
        match self.kind {
            EntryKind::Partial => MAX_LOGGED_SECTORS,
            EntryKind::Barrier => MAX_BARRIER_SECTORS,
        }
    }

    /// The end of its rows.
    pub fn end(&self) -> u64 {
        self.start.saturating_add(self.sectors)
    }

    /// The members written at row `row` (absolute).
    pub fn modified_at(&self, row: u64) -> MemberSet {
        let Some(at) = row.checked_sub(self.start) else {
            return MemberSet::EMPTY;
        };
        (0..self.members.min(MAX_MEMBERS))
            .filter(|&m| {
                self.written
                    .get(m as usize)
                    .is_some_and(|&(f, t)| u64::from(f) <= at && at < u64::from(t))
            })
            .fold(MemberSet::EMPTY, MemberSet::with)
    }

    /// The first row after `row` where the set of written members changes, or the end.
    fn next_boundary(&self, row: u64) -> u64 {
        let mut next = self.end();
        for &(f, t) in self.written.iter().take(self.members as usize) {
            for b in [f, t] {
                let b = self.start.saturating_add(u64::from(b));
                if b > row && b < next {
                    next = b;
                }
            }
        }
        next
    }
}

/// Why an entry header was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryError {
    /// Not an entry of this array (never written, another array's, damaged).
    NotEntry,
    /// Sealed, but its fields make no sense (a bug or a forgery).
    Malformed,
}

/// Whose log an entry belongs to: the array's UUID (public: udev names a link after it) and
/// the log's key (secret: in the superblock on the members, drawn at every start). A block
/// whose bytes user data chose (a payload: partial parity is the XOR of data chunks) cannot
/// carry the key, so it is never taken for an entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogId {
    pub uuid: [u8; UUID_LEN],
    pub key: [u8; UUID_LEN],
}

/// Writes `e` as an entry header of log `id`.
pub fn encode_entry(id: &LogId, e: &Entry, block: &mut [u8; BLOCK_BYTES]) {
    *block = [0; BLOCK_BYTES];
    put(block, entry::MAGIC, ENTRY_MAGIC);
    put(block, entry::VERSION, ENTRY_VERSION.to_le_bytes());
    put(block, entry::KEY, id.key);
    let kind: u32 = match e.kind {
        EntryKind::Partial => 1,
        EntryKind::Barrier => 2,
    };
    put(block, entry::KIND, kind.to_le_bytes());
    put(block, entry::UUID, id.uuid);
    put(block, entry::EPOCH, e.epoch.to_le_bytes());
    put(block, entry::SEQ, e.seq.to_le_bytes());
    put(block, entry::START, e.start.to_le_bytes());
    put(block, entry::SECTORS, e.sectors.to_le_bytes());
    let parity: u32 = match e.parity {
        ParityKind::P => 0,
        ParityKind::Q => 1,
    };
    put(block, entry::PARITY, parity.to_le_bytes());
    put(block, entry::MEMBERS, e.members.to_le_bytes());
    put(
        block,
        entry::PAYLOAD_SECTORS,
        e.payload_sectors().to_le_bytes(),
    );
    put(block, entry::PAYLOAD_CRC, e.payload_crc.to_le_bytes());
    put(block, entry::TARGETS, e.targets.bits().to_le_bytes());
    for (m, &(f, t)) in e.written.iter().enumerate() {
        put(block, entry::WRITTEN + 8 * m, f.to_le_bytes());
        put(block, entry::WRITTEN + 8 * m + 4, t.to_le_bytes());
    }
    seal_fields(block);
}

/// Reads an entry header of log `id` (another log's, or a block without its key, is no
/// entry). Never panics; refuses anything [`encode_entry`]
/// would not have written: a partial entry of more than [`MAX_LOGGED_SECTORS`] rows, a
/// barrier of more than [`MAX_BARRIER_SECTORS`].
pub fn decode_entry(id: &LogId, block: &[u8; BLOCK_BYTES]) -> Result<Entry, EntryError> {
    if !carries_id(
        block,
        entry::MAGIC,
        ENTRY_MAGIC,
        entry::UUID,
        entry::KEY,
        id,
    ) {
        return Err(EntryError::NotEntry);
    }
    let whole = match get_u32(block, entry::VERSION) {
        1 => sealed(block),
        ENTRY_VERSION => fields_sealed(block),
        // Ours (it carries the key), of a format this code does not know.
        _ => return Err(EntryError::Malformed),
    };
    if !whole {
        return Err(EntryError::NotEntry);
    }
    decode_fields(block)
}

/// Whether `block` has `magic` at `at_magic` and log `id`'s UUID and key at `at_uuid` and
/// `at_key`.
fn carries_id(
    block: &[u8],
    at_magic: usize,
    magic: [u8; 8],
    at_uuid: usize,
    at_key: usize,
    id: &LogId,
) -> bool {
    get::<8>(block, at_magic) == magic
        && get::<UUID_LEN>(block, at_uuid) == id.uuid
        && get::<UUID_LEN>(block, at_key) == id.key
}

/// An entry's fields, checked as [`decode_entry`] says (its seal already is).
fn decode_fields(block: &[u8]) -> Result<Entry, EntryError> {
    let kind = match get_u32(block, entry::KIND) {
        1 => EntryKind::Partial,
        2 => EntryKind::Barrier,
        _ => return Err(EntryError::Malformed),
    };
    let parity = match get_u32(block, entry::PARITY) {
        0 => ParityKind::P,
        1 => ParityKind::Q,
        _ => return Err(EntryError::Malformed),
    };
    let members = get_u32(block, entry::MEMBERS);
    let sectors = get_u64(block, entry::SECTORS);
    let start = get_u64(block, entry::START);
    let mut written = [(0u32, 0u32); MAX_MEMBERS as usize];
    for (m, slot) in written.iter_mut().enumerate() {
        let f = get_u32(block, entry::WRITTEN + 8 * m);
        let t = get_u32(block, entry::WRITTEN + 8 * m + 4);
        let empty = (f, t) == (0, 0);
        if !empty && (f >= t || u64::from(t) > sectors || m as u32 >= members) {
            return Err(EntryError::Malformed);
        }
        *slot = (f, t);
    }
    let e = Entry {
        kind,
        parity,
        epoch: get_u64(block, entry::EPOCH),
        seq: get_u64(block, entry::SEQ),
        start,
        sectors,
        members,
        written,
        payload_crc: get_u32(block, entry::PAYLOAD_CRC),
        targets: MemberSet::from_bits(get_u32(block, entry::TARGETS)),
    };
    if !(2..=MAX_MEMBERS).contains(&members)
        || e.targets.iter().any(|m| m >= members)
        || sectors == 0
        || sectors > e.max_sectors()
        || start.checked_add(sectors).is_none()
        || get_u64(block, entry::PAYLOAD_SECTORS) != e.payload_sectors()
    {
        return Err(EntryError::Malformed);
    }
    Ok(e)
}

/// Turns `block`, a partial entry's header as [`encode_entry`] of log `id` wrote it, into a
/// group block whose first record is that entry. A run of entries that lie back to back in
/// the ring, written at once, then takes one header block instead of one each: their payloads
/// follow the group block back to back, each rounded up to a block, in the records' order,
/// and the run's last blocks stay unwritten (each entry's place was reserved with a header
/// block of its own).
pub fn start_group(id: &LogId, block: &mut [u8; BLOCK_BYTES]) {
    block.copy_within(..RECORD_BYTES, group::RECORDS);
    if let Some(head) = block.get_mut(..group::RECORDS) {
        head.fill(0);
    }
    put(block, group::MAGIC, GROUP_MAGIC);
    put(block, group::VERSION, GROUP_VERSION.to_le_bytes());
    put(block, group::COUNT, 1u32.to_le_bytes());
    put(block, group::UUID, id.uuid);
    put(block, group::KEY, id.key);
    seal_group(block);
}

/// Adds the entry of `header` (a partial entry's header as [`encode_entry`] wrote it) to the
/// group in `block` as its last record, and seals the group again; false if the group holds
/// [`MAX_GROUP_ENTRIES`] already.
pub fn add_to_group(block: &mut [u8; BLOCK_BYTES], header: &[u8; BLOCK_BYTES]) -> bool {
    let count = get_u32(block, group::COUNT) as usize;
    let at = group::RECORDS + count * RECORD_BYTES;
    let (Some(to), Some(from)) = (
        block.get_mut(at..at + RECORD_BYTES),
        header.get(..RECORD_BYTES),
    ) else {
        return false;
    };
    if count >= MAX_GROUP_ENTRIES {
        return false;
    }
    to.copy_from_slice(from);
    put(block, group::COUNT, (count as u32 + 1).to_le_bytes());
    seal_group(block);
    true
}

/// Which of a member's waiting entries go out as one write: a *run*, written as a group when it
/// holds more than one ([`start_group`]). Entries join while each starts where the one before
/// ends, up to [`MAX_GROUP_ENTRIES`], and never across the middle of the ring: the group
/// block, which holds every record of the run, lies at the first entry's place, so a run
/// across the middle would put the record of an entry of the next epoch at the end of the
/// earlier half, which the epoch after that overwrites while the entry may still be live
/// (review 3's F1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogRun {
    /// The member sector after the run's last entry.
    end: u64,
    /// The member sector where the first entry's half of the ring ends.
    half_end: u64,
    count: usize,
}

impl LogRun {
    /// A run that starts with the entry at member sector `sector` with `payload` sectors of
    /// partial parity, in the ring of `area`.
    pub fn start(area: &LogArea, sector: u64, payload: u64) -> Self {
        let ring = area.ring_sector(0);
        let half = area.half_sectors().max(1);
        let halves = sector.saturating_sub(ring) / half + 1;
        Self {
            end: sector.saturating_add(LogArea::entry_sectors(payload)),
            half_end: ring.saturating_add(halves.saturating_mul(half)),
            count: 1,
        }
    }

    /// Adds the entry at `sector` with `payload` sectors to the run if it continues it: starts
    /// where the run ends, in the same half of the ring, with room left in the group.
    pub fn join(&mut self, sector: u64, payload: u64) -> bool {
        let end = sector.saturating_add(LogArea::entry_sectors(payload));
        if sector != self.end || end > self.half_end || self.count >= MAX_GROUP_ENTRIES {
            return false;
        }
        self.end = end;
        self.count += 1;
        true
    }

    /// Entries in the run.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Never: a run starts with an entry.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
}

/// Seals a group block: the checksum after its last record.
fn seal_group(block: &mut [u8; BLOCK_BYTES]) {
    let end = group::RECORDS + get_u32(block, group::COUNT) as usize * RECORD_BYTES;
    let crc = crc32c(block.get(..end).unwrap_or(&[]));
    put(block, end, crc.to_le_bytes());
}

/// A group block of a log, its seal checked ([`decode_group`]).
pub struct Group<'a> {
    block: &'a [u8; BLOCK_BYTES],
    count: usize,
}

impl Group<'_> {
    /// Entries it holds.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether it holds none (never: a group has one entry at least).
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Its `index`th entry, checked as [`decode_entry`] checks a header; only a partial entry
    /// is ever in a group.
    pub fn entry(&self, id: &LogId, index: usize) -> Result<Entry, EntryError> {
        let at = group::RECORDS + index * RECORD_BYTES;
        let record = self
            .block
            .get(at..at + RECORD_BYTES)
            .filter(|_| index < self.count)
            .ok_or(EntryError::Malformed)?;
        // The group is sealed: a record that does not check out was written so.
        if !carries_id(
            record,
            entry::MAGIC,
            ENTRY_MAGIC,
            entry::UUID,
            entry::KEY,
            id,
        ) || get_u32(record, entry::VERSION) != ENTRY_VERSION
            || !fields_sealed(record)
        {
            return Err(EntryError::Malformed);
        }
        decode_fields(record).and_then(|e| match e.kind {
            EntryKind::Partial => Ok(e),
            EntryKind::Barrier => Err(EntryError::Malformed),
        })
    }
}

/// Reads a group block of log `id`: [`EntryError::NotEntry`] if it is not one (never written,
/// another log's, torn), [`EntryError::Malformed`] if sealed but not a group this code writes.
pub fn decode_group<'a>(id: &LogId, block: &'a [u8; BLOCK_BYTES]) -> Result<Group<'a>, EntryError> {
    if !carries_id(
        block,
        group::MAGIC,
        GROUP_MAGIC,
        group::UUID,
        group::KEY,
        id,
    ) {
        return Err(EntryError::NotEntry);
    }
    if get_u32(block, group::VERSION) != GROUP_VERSION {
        return Err(EntryError::Malformed);
    }
    let count = get_u32(block, group::COUNT) as usize;
    if count == 0 || count > MAX_GROUP_ENTRIES {
        return Err(EntryError::Malformed);
    }
    let end = group::RECORDS + count * RECORD_BYTES;
    if crc32c(block.get(..end).unwrap_or(&[])) != get_u32(block, end) {
        return Err(EntryError::NotEntry);
    }
    Ok(Group { block, count })
}

/// An entry found in a member's log, its payload checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoggedEntry {
    /// The member whose log holds it (the parity member it is partial of).
    pub member: u32,
    /// The member sector of its payload.
    pub payload_sector: u64,
    pub entry: Entry,
}

/// One piece of a replay: rows whose parity must be made whole again, each row written by the
/// same members.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplayPiece {
    /// Data-area rows.
    pub start: u64,
    pub sectors: u64,
    /// Members the logged write changed in these rows.
    pub modified: MemberSet,
    /// Where the partial P (Q) of these rows lies: the log's member and the member sector.
    pub pp: Option<(u32, u64)>,
    pub pq: Option<(u32, u64)>,
}

/// Moves the entries of every write whose logging was cut short to the end of `entries` and
/// returns how many are left before them (in no particular order). A write whose entry is
/// missing from one of its targets' logs, among the members in `logs` (those whose whole log
/// was read), never got past its log writes: it changed no data or parity, so its entries
/// describe nothing on disk. Worse, taken as the newest entry of its rows they would void the
/// older entries there whose writes may still be torn: on RAID 6 a write's P entry can land
/// and its Q entry not, and the older write's Q, still in a volatile cache, is lost.
pub fn drop_torn(entries: &mut [LoggedEntry], logs: MemberSet) -> usize {
    entries.sort_unstable_by_key(|l| (l.entry.seq, l.member));
    let mut kept = 0;
    let mut group = 0;
    while let Some(first) = entries.get(group) {
        let seq = first.entry.seq;
        let end = entries
            .iter()
            .skip(group)
            .position(|l| l.entry.seq != seq)
            .map_or(entries.len(), |len| group + len);
        let (found, targets) = entries
            .get(group..end)
            .unwrap_or(&[])
            .iter()
            .fold((MemberSet::EMPTY, MemberSet::EMPTY), |(f, t), l| {
                (f.with(l.member), t.union(l.entry.targets))
            });
        if targets.intersect(logs).minus(found).is_empty() {
            for i in group..end {
                // `kept <= group <= i`: earlier slots only.
                if let Some(&l) = entries.get(i) {
                    if let Some(slot) = entries.get_mut(kept) {
                        *slot = l;
                    }
                    kept += 1;
                }
            }
        }
        group = end;
    }
    kept
}

/// Sorts `entries` for [`plan_replay`].
pub fn sort_entries(entries: &mut [LoggedEntry]) {
    entries.sort_unstable_by_key(|l| (l.entry.start, l.entry.seq));
}

/// What a replay of `entries` (sorted by [`sort_entries`], all of one epoch) rewrites: for
/// every partial entry, the rows no later entry covers, split where the set of written members
/// changes, each with the payloads of that write (P's and Q's entries share a sequence number).
pub fn plan_replay(entries: &[LoggedEntry], mut out: impl FnMut(ReplayPiece)) {
    for (i, first) in entries.iter().enumerate() {
        let e = &first.entry;
        if e.kind != EntryKind::Partial {
            continue;
        }
        // The pair's other half is handled with the first of the two (by index).
        let same = |l: &LoggedEntry| {
            l.entry.seq == e.seq && l.entry.kind == EntryKind::Partial && l.entry.start == e.start
        };
        if entries.iter().take(i).any(same) {
            continue;
        }
        let (mut pp, mut pq) = (None, None);
        for l in entries.iter().filter(|l| same(l)) {
            let at = Some((l.member, l.payload_sector));
            match l.entry.parity {
                ParityKind::P => pp = pp.or(at),
                ParityKind::Q => pq = pq.or(at),
            }
        }
        // Later entries overlapping `e`: sorted by start, so the scan stops past its end.
        let later = || {
            entries
                .iter()
                .take_while(|l| l.entry.start < e.end())
                .filter(|l| l.entry.seq > e.seq && l.entry.end() > e.start)
        };
        let mut row = e.start;
        while row < e.end() {
            if let Some(cover) = later()
                .filter(|l| l.entry.start <= row && row < l.entry.end())
                .map(|l| l.entry.end())
                .max()
            {
                row = cover;
                continue;
            }
            let next_cover = later()
                .map(|l| l.entry.start)
                .filter(|&s| s > row)
                .min()
                .unwrap_or(u64::MAX);
            let end = e.next_boundary(row).min(next_cover).min(e.end());
            let offset = row - e.start;
            let modified = e.modified_at(row);
            out(ReplayPiece {
                start: row,
                sectors: end - row,
                modified,
                pp: pp.map(|(m, s)| (m, s + offset)),
                pq: pq.map(|(m, s)| (m, s + offset)),
            });
            row = end;
        }
    }
}

/// g^n in GF(2^8) with md's polynomial 0x11d: data member at syndrome slot `n`'s coefficient
/// in Q.
pub fn gf_pow2(n: u32) -> u8 {
    (0..n % 255).fold(1, |x, _| gf_mul(x, 2))
}

/// Reads a member's log: `read(member, sector, block)` fills `block` from member sector
/// `sector` (false on an I/O error), `payload_crc(member, sector, sectors)` gives the CRC-32C
/// of a payload (`None` on an I/O error).
pub trait LogReader {
    fn read(&mut self, member: u32, sector: u64, block: &mut [u8; BLOCK_BYTES]) -> bool;
    fn payload_crc(&mut self, member: u32, sector: u64, sectors: u64) -> Option<u32>;
}

/// What [`scan_log`] found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScanStats {
    /// The newest epoch a head holds (0: no head, a log never written).
    pub epoch: u64,
    /// Entries of that epoch taken, and refused (damaged payload, malformed header).
    pub entries: u64,
    pub refused: u64,
    /// Entries taken from group blocks (counted in `entries` too).
    pub grouped: u64,
    /// Members whose log could not be read.
    pub unreadable: MemberSet,
}

/// Finds what a replay takes from the logs of `members` (the in-sync ones): the newest epoch
/// any head holds, and, with `out`, every entry of that epoch whose payload is intact, handed
/// to it (without: the heads only, all a clean start needs). A torn entry (a crash during its
/// write) fails its checksum and is left out: its write had not started.
///
/// `block` is scratch space (a kernel stack has no room for it).
pub fn scan_log(
    id: &LogId,
    area: &LogArea,
    members: MemberSet,
    reader: &mut dyn LogReader,
    block: &mut [u8; BLOCK_BYTES],
    out: Option<&mut dyn FnMut(LoggedEntry)>,
) -> ScanStats {
    let mut stats = ScanStats::default();
    for m in members.iter() {
        if !reader.read(m, area.offset, block) {
            stats.unreadable = stats.unreadable.with(m);
        } else if let Some(epoch) = decode_head(&id.uuid, block) {
            stats.epoch = stats.epoch.max(epoch);
        }
    }
    let Some(out) = out.filter(|_| stats.epoch != 0) else {
        return stats;
    };
    for m in members.minus(stats.unreadable).iter() {
        for at in area.header_offsets() {
            let sector = area.ring_sector(at);
            if !reader.read(m, sector, block) {
                stats.unreadable = stats.unreadable.with(m);
                break;
            }
            let mut found = Found {
                member: m,
                at,
                area,
                epoch: stats.epoch,
                stats: &mut stats,
                reader: &mut *reader,
                out: &mut *out,
            };
            match decode_entry(id, block) {
                Err(EntryError::NotEntry) => {}
                entry => {
                    found.take(entry, 0);
                    continue;
                }
            }
            match decode_group(id, block) {
                Err(EntryError::NotEntry) => {}
                Err(EntryError::Malformed) => found.stats.refused += 1,
                Ok(group) => {
                    // Each payload after the ones before it, from the block after the group's.
                    let mut offset = 0;
                    for index in 0..group.len() {
                        let entry = group.entry(id, index);
                        if found.take(entry, offset) {
                            found.stats.grouped += 1;
                        }
                        let payload = entry.map_or(0, |e| e.payload_sectors());
                        offset += payload.div_ceil(BLOCK_SECTORS) * BLOCK_SECTORS;
                    }
                }
            }
        }
    }
    stats
}

/// What [`scan_log`] found at ring offset `at` of `member`'s log.
struct Found<'a, 'r> {
    member: u32,
    at: u64,
    area: &'a LogArea,
    epoch: u64,
    stats: &'a mut ScanStats,
    reader: &'a mut (dyn LogReader + 'r),
    out: &'a mut dyn FnMut(LoggedEntry),
}

impl Found<'_, '_> {
    /// Takes `entry`, read from the header block at `at` (a group's), if it is of the epoch
    /// the scan looks for and its payload, `offset` sectors after the header block, is in the
    /// ring and intact; true if it took it.
    fn take(&mut self, entry: Result<Entry, EntryError>, offset: u64) -> bool {
        let entry = match entry {
            // The heads' epoch and the one after it (written while the heads moved on).
            Ok(e) if e.epoch == self.epoch || e.epoch == self.epoch.wrapping_add(1) => e,
            Ok(_) | Err(EntryError::NotEntry) => return false,
            Err(EntryError::Malformed) => {
                self.stats.refused += 1;
                return false;
            }
        };
        let m = self.member;
        let payload_sector = self.area.ring_sector(self.at) + BLOCK_SECTORS + offset;
        let payload = entry.payload_sectors();
        let fits = self.at + offset + LogArea::entry_sectors(payload) <= self.area.ring_sectors;
        let intact = payload == 0
            || (fits
                && self.reader.payload_crc(m, payload_sector, payload) == Some(entry.payload_crc));
        // A member's log holds only entries sent to it.
        let ours = entry.targets.is_empty() || entry.targets.contains(m);
        if fits && intact && ours {
            self.stats.entries += 1;
            (self.out)(LoggedEntry {
                member: m,
                payload_sector,
                entry,
            });
            true
        } else {
            self.stats.refused += 1;
            false
        }
    }
}

/// `to ^= coef · from`, byte by byte in GF(2^8) with md's polynomial (1 is a plain XOR): a
/// partial parity's terms, on a buffer's bytes.
pub fn accumulate(to: &mut [u8], from: &[u8], coef: u8) {
    if coef == 1 {
        for (t, f) in to.iter_mut().zip(from) {
            *t ^= f;
        }
        return;
    }
    let mut table = [0u8; 256];
    for (x, product) in (0u8..=255).zip(table.iter_mut()) {
        *product = gf_mul(coef, x);
    }
    for (t, &f) in to.iter_mut().zip(from) {
        *t ^= table[usize::from(f)];
    }
}

/// GF(2^8) product with md's polynomial 0x11d.
pub fn gf_mul(mut a: u8, mut b: u8) -> u8 {
    let mut product = 0;
    while b != 0 {
        if b & 1 != 0 {
            product ^= a;
        }
        let carry = a & 0x80 != 0;
        a <<= 1;
        if carry {
            a ^= 0x1d;
        }
        b >>= 1;
    }
    product
}
