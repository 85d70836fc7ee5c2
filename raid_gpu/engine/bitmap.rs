// SPDX-License-Identifier: GPL-2.0

//! The write-intent bitmap's pure logic (md's bitmap): which regions a write dirties, the
//! per-region state that lets writes go without a lock, and the on-disk blocks.
//!
//! # Regions
//!
//! The array's resync walk (array sectors on RAID 1/10, member sectors on RAID 5/6: see
//! [`Geometry::resync_sectors`]) is cut into regions of a power-of-two size, one bit each. A
//! set bit says "writes may have been in flight here": after a crash only those regions need a
//! resync, and a member that was away only needs what was written meanwhile.
//!
//! # Writes without a lock
//!
//! Each region has one [`RegionState`], an atomic word: bit 31 says its bit is set on disk,
//! bit 30 that it has been idle since the cleaner last looked, bit 29 that it needs a resync
//! (it was dirty at assembly), the rest count the writes in flight there.
//!
//! - A write adds itself to the count first. If the bit was on disk, it goes.
//! - Otherwise it waits for the worker. The worker writes the blocks of every region that waits
//!   in one batch (`FUA`: setting bits claims nothing about earlier writes), then marks them on
//!   disk, then sends the waiting writes.
//! - A region's bit is cleared lazily, by the worker, and only with no write in flight there:
//!   a first look marks it idle, a later one clears it with one compare-and-swap from "on disk,
//!   idle, no writes" to 0 (a write ending in between takes the idle mark away). A write that
//!   comes after it sees the bit off and waits for the worker. The worker writes the cleared
//!   block before it sets the bit again (it is one thread), so the disk ends with the bit set.
//! - A region that needs a resync keeps its bit until the resync has passed it.
//!
//! Writes to different regions touch different words; writes to one region share one.
//!
//! # On disk
//!
//! The bitmap area holds 4096-byte blocks, each with [`BITS_PER_BLOCK`] bits (bit `r % 8` of
//! byte `r / 8` of the block for region `r` of that block) and a CRC-32C of the rest in its
//! last 4 bytes. A block whose checksum fails reads as every bit set: a damaged bitmap only
//! costs a longer resync.

use super::crc32c::crc32c;
use super::geometry::Geometry;
use core::ops::Range;
use core::sync::atomic::{AtomicU32, Ordering};

/// Region size by default: 64 MiB of the resync's walk (mdadm's default bitmap chunk).
pub const DEFAULT_REGION_SECTORS: u64 = 64 * 2048;

/// Smallest region: 4 KiB.
pub const MIN_REGION_SECTORS: u64 = 8;
/// A platform keeps this many region states per region of the bitmap it starts with (as many
/// as its area can hold, if fewer), so a resize may grow the array that much at the same
/// region size (`resize.rs`, [`super::platform::Metadata::resize_bitmap`]); beyond that the
/// regions grow coarser.
pub const RESIZE_STATES: u64 = 4;

/// Bytes of one on-disk block.
pub const BLOCK_BYTES: usize = 4096;

/// Sectors of one on-disk block.
pub const BLOCK_SECTORS: u64 = (BLOCK_BYTES / 512) as u64;

/// Regions one block records: every bit but the checksum's.
pub const BITS_PER_BLOCK: u64 = ((BLOCK_BYTES - 4) * 8) as u64;

/// The regions of an array's resync walk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Regions {
    /// log2 of the region size: regions are found by shifts, so no division can panic.
    shift: u32,
    /// Sectors of the resync walk.
    walk_sectors: u64,
}

impl Regions {
    /// Regions of `region_sectors` (a power of two, at least [`MIN_REGION_SECTORS`]) over a
    /// walk of `walk_sectors`; `None` for another size.
    pub fn new(walk_sectors: u64, region_sectors: u64) -> Option<Self> {
        (region_sectors.is_power_of_two() && region_sectors >= MIN_REGION_SECTORS).then_some(Self {
            shift: region_sectors.trailing_zeros(),
            walk_sectors,
        })
    }

    /// The region size for a walk of `walk_sectors` whose bitmap must fit `area_sectors`: the
    /// default, or the smallest larger power of two whose blocks fit. `None` if not even one
    /// block fits.
    pub fn fitting(walk_sectors: u64, area_sectors: u64) -> Option<Self> {
        let blocks = area_sectors / BLOCK_SECTORS;
        if blocks == 0 {
            return None;
        }
        let mut region = DEFAULT_REGION_SECTORS;
        loop {
            let regions = Self::new(walk_sectors, region)?;
            if regions.blocks() <= blocks {
                return Some(regions);
            }
            region = region.checked_mul(2)?;
        }
    }

    pub fn region_sectors(&self) -> u64 {
        // `shift` < 64: a power of two's.
        1u64.checked_shl(self.shift).unwrap_or(0)
    }

    /// The region holding walk sector `sector`.
    fn region_of(&self, sector: u64) -> u64 {
        sector.checked_shr(self.shift).unwrap_or(0)
    }

    /// How many regions (bits) the walk has.
    pub fn count(&self) -> u64 {
        let partial = self.walk_sectors & self.region_sectors().wrapping_sub(1) != 0;
        self.region_of(self.walk_sectors)
            .saturating_add(u64::from(partial))
    }

    /// The sectors of the resync's walk the regions cover.
    pub fn walk_sectors(&self) -> u64 {
        self.walk_sectors
    }

    /// log2 of the region size.
    pub fn shift(&self) -> u32 {
        self.shift
    }

    /// Regions of `1 << shift` sectors (kept within the sizes [`Self::new`] takes) over a walk
    /// of `walk_sectors`: what a platform that keeps the two apart makes of them again.
    pub fn of_shift(walk_sectors: u64, shift: u32) -> Self {
        Self {
            shift: shift.clamp(MIN_REGION_SECTORS.trailing_zeros(), 63),
            walk_sectors,
        }
    }

    /// Whether these regions can follow `now` in a platform that keeps `kept` region states (a
    /// resize, `Metadata::resize_bitmap`): regions no smaller, a state for each.
    pub fn can_follow(&self, now: &Regions, kept: usize) -> bool {
        self.shift >= now.shift && self.count() <= kept as u64
    }

    /// How many region states a platform keeps for these regions, in an area of
    /// `area_sectors`: [`RESIZE_STATES`] times their count, at most what the area's blocks
    /// can record.
    pub fn states_kept(&self, area_sectors: u64) -> u64 {
        let fits = (area_sectors / BLOCK_SECTORS).saturating_mul(BITS_PER_BLOCK);
        self.count()
            .saturating_mul(RESIZE_STATES)
            .min(fits)
            .max(self.count())
    }

    /// On-disk blocks the bits take.
    pub fn blocks(&self) -> u64 {
        self.count().div_ceil(BITS_PER_BLOCK)
    }

    /// Sectors of the bitmap area the blocks take.
    pub fn area_sectors(&self) -> u64 {
        self.blocks().saturating_mul(BLOCK_SECTORS)
    }

    /// The walk sectors region `region` covers.
    pub fn span(&self, region: u64) -> Range<u64> {
        let start = region
            .checked_shl(self.shift)
            .filter(|&s| self.region_of(s) == region)
            .unwrap_or(u64::MAX);
        start.min(self.walk_sectors)
            ..start
                .saturating_add(self.region_sectors())
                .min(self.walk_sectors)
    }

    /// The regions a run of walk sectors `[start, end)` touches (empty if it is empty).
    pub fn of_walk(&self, start: u64, end: u64) -> Range<u64> {
        let end = end.min(self.walk_sectors);
        if start >= end {
            return 0..0;
        }
        self.region_of(start)..self.region_of(end.saturating_sub(1)).saturating_add(1)
    }

    /// The regions a write of `sectors` array sectors at `start` dirties: the same array
    /// sectors on mirrors; on RAID 5/6 the whole stripes it touches (their rows of member
    /// sectors: their parity changes too).
    pub fn of_write(&self, geometry: &Geometry, start: u64, sectors: u64) -> Range<u64> {
        let end = start.saturating_add(sectors);
        if sectors == 0 {
            return 0..0;
        }
        if !geometry.level().has_parity() {
            return self.of_walk(start, end);
        }
        let first = geometry.stripe_of(start);
        let last = geometry.stripe_of(end - 1);
        let rows = geometry.stripe_member_sector(first)
            ..geometry
                .stripe_member_sector(last)
                .saturating_add(u64::from(geometry.chunk_sectors()));
        self.of_walk(rows.start, rows.end)
    }

    /// Which block, and which bit of it, records region `region`.
    pub fn place(region: u64) -> (u64, u64) {
        (region / BITS_PER_BLOCK, region % BITS_PER_BLOCK)
    }
}

/// Bit 31 of a [`RegionState`]: the region's bit is set on disk.
const ON_DISK: u32 = 1 << 31;
/// Bit 30: no write in flight or ended since the cleaner's last look.
const IDLE: u32 = 1 << 30;
/// Bit 29: the region was dirty when the array started; the resync has not passed it yet.
const NEEDS_SYNC: u32 = 1 << 29;
/// Bit 28: the worker is writing a block with this region's bit set for a waiting write.
const WRITING: u32 = 1 << 28;
/// The writes-in-flight count.
const COUNT: u32 = WRITING - 1;

/// What a write must do before it goes (see [`RegionState::start_write`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteStart {
    /// The region's bit is on disk: go.
    Go,
    /// Wait for the worker to set the bit on disk (the write is counted already).
    NeedBit,
}

/// One region's state: whether its bit is on disk, and the writes in flight there.
#[derive(Debug, Default)]
pub struct RegionState(AtomicU32);

impl RegionState {
    pub const fn new() -> Self {
        Self(AtomicU32::new(0))
    }

    /// The region's bit was found set when the array started (or the array was never in
    /// sync): on disk, and kept until the resync passes it ([`Self::synced`]). Before the
    /// array runs.
    pub fn set_dirty_at_start(&self) {
        self.0.fetch_or(ON_DISK | NEEDS_SYNC, Ordering::SeqCst);
    }

    /// A write to the region begins: counted, and told whether it may go. SeqCst, against
    /// [`Self::try_clear`]'s swap. Any context.
    pub fn start_write(&self) -> WriteStart {
        if self.0.fetch_add(1, Ordering::SeqCst) & ON_DISK != 0 {
            WriteStart::Go
        } else {
            WriteStart::NeedBit
        }
    }

    /// A write to the region ended (or gave up before it began): uncounted, and the region no
    /// longer idle. Any context.
    pub fn end_write(&self) {
        // Never below zero: every end follows its start.
        let _ = self
            .0
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |v| {
                (v & COUNT)
                    .checked_sub(1)
                    .map(|n| n | (v & (ON_DISK | NEEDS_SYNC | WRITING)))
            });
    }

    /// The region's bit was written set (durably): writes may go. The worker only.
    pub fn mark_on_disk(&self) {
        self.0.fetch_or(ON_DISK, Ordering::SeqCst);
    }

    /// The worker is about to write the region's block for a write that waits: true if one
    /// does (the block then has the bit set, and [`Self::block_written`] lets it go). A write
    /// that starts waiting after this is left for the next block write.
    pub fn claim_waiting(&self) -> bool {
        self.0
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |v| {
                (v & ON_DISK == 0 && v & COUNT != 0).then_some(v | WRITING)
            })
            .is_ok()
    }

    /// The block with the bit of a region [`Self::claim_waiting`] claimed is on disk.
    pub fn block_written(&self) {
        let _ = self
            .0
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |v| {
                (v & WRITING != 0).then_some((v | ON_DISK) & !WRITING)
            });
    }

    /// The block write failed everywhere: the claim is dropped (the writes keep waiting).
    pub fn block_not_written(&self) {
        self.0.fetch_and(!WRITING, Ordering::SeqCst);
    }

    /// A running array's region must be walked by the next resync (a heal, `suspect.rs`; a
    /// grow's new room, `resize.rs`). The worker, which then writes the region's block before
    /// the superblocks say a resync is pending, and marks it on disk
    /// ([`Self::mark_on_disk`]): once the resync passes the region, its bit is then cleared
    /// only by the cleaner, with the `PREFLUSH` that makes the resync's writes durable first,
    /// never by a block written to set another region's bit (`FUA` alone).
    pub fn set_needs_sync(&self) {
        self.0.fetch_or(NEEDS_SYNC, Ordering::SeqCst);
    }

    /// The region is gone or its size changed (a resize; nothing in flight): every mark
    /// dropped.
    pub fn reset(&self) {
        self.0.store(0, Ordering::SeqCst);
    }

    /// The resync passed the region: its bit may be cleared like any other.
    pub fn synced(&self) {
        self.0.fetch_and(!NEEDS_SYNC, Ordering::SeqCst);
    }

    /// The cleaner's look: clears the bit in memory of a region that has been idle since the
    /// last look (true: the worker then writes its block), else marks an on-disk region with
    /// nothing in flight idle for the next look. The worker only.
    pub fn try_clear(&self) -> bool {
        if self
            .0
            .compare_exchange(ON_DISK | IDLE, 0, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            return true;
        }
        let _ =
            self.0
                .compare_exchange(ON_DISK, ON_DISK | IDLE, Ordering::SeqCst, Ordering::SeqCst);
        false
    }

    /// The bit is on disk.
    pub fn on_disk(&self) -> bool {
        self.0.load(Ordering::SeqCst) & ON_DISK != 0
    }

    /// The resync has yet to pass the region.
    pub fn needs_sync(&self) -> bool {
        self.0.load(Ordering::SeqCst) & NEEDS_SYNC != 0
    }

    /// Writes in flight in the region.
    pub fn writes(&self) -> u32 {
        self.0.load(Ordering::SeqCst) & COUNT
    }

    /// A write waits for the bit: counted, and the bit not on disk.
    pub fn waits(&self) -> bool {
        let v = self.0.load(Ordering::SeqCst);
        v & ON_DISK == 0 && v & COUNT != 0
    }

    /// What the region's bit must say on disk now: set while it is on disk, needs a resync, or
    /// a write waits for it (a block written for another region then sets it early, which is
    /// harmless).
    pub fn bit(&self) -> bool {
        self.0.load(Ordering::SeqCst) & (ON_DISK | NEEDS_SYNC | WRITING | COUNT) != 0
    }
}

/// What a platform's kept `states` hold after its regions went from `now` to `new` (a resize,
/// [`super::platform::Metadata::resize_bitmap`]): the states past `new`'s last region cleared
/// (a later grow must not find marks there), every state if the region size changed.
pub fn reset_after_resize(states: &[RegionState], now: &Regions, new: &Regions) {
    let keep = if new.shift == now.shift {
        usize::try_from(new.count()).unwrap_or(usize::MAX)
    } else {
        0
    };
    for state in states.iter().skip(keep) {
        state.reset();
    }
}

/// Fills `out` with block `block` of the bitmap: bit `i` from `bit(region)` for the block's
/// regions below `regions`, zero past them, the checksum last.
pub fn encode_block(
    block: u64,
    regions: u64,
    bit: impl Fn(u64) -> bool,
    out: &mut [u8; BLOCK_BYTES],
) {
    *out = [0; BLOCK_BYTES];
    let first = block.saturating_mul(BITS_PER_BLOCK);
    let (bits, crc) = out.split_at_mut(BLOCK_BYTES - 4);
    for (i, byte) in (0u64..).zip(bits.iter_mut()) {
        for b in 0..8u64 {
            let region = first + i * 8 + b;
            if region < regions && bit(region) {
                *byte |= 1 << b;
            }
        }
    }
    crc.copy_from_slice(&crc32c(bits).to_le_bytes());
}

/// Whether `block`'s checksum holds.
pub fn block_intact(block: &[u8; BLOCK_BYTES]) -> bool {
    let (bits, crc) = block.split_at(BLOCK_BYTES - 4);
    crc32c(bits).to_le_bytes() == crc
}

/// Takes in block `block` of the bitmap as read from a member when the array starts (`None`:
/// unreadable, so every bit set), before it runs; call once per member copy (bits add up).
/// A set bit is on disk; its region needs a resync too if one runs from walk sector
/// `resync_from` and the region ends past it (an unclean stop resyncs from 0).
pub fn load_block(
    regions: &Regions,
    states: &[RegionState],
    block: u64,
    data: Option<&[u8; BLOCK_BYTES]>,
    resync_from: Option<u64>,
) {
    let first = block.saturating_mul(BITS_PER_BLOCK);
    for index in 0..BITS_PER_BLOCK {
        let region = first + index;
        // Past the last region: bits a resize set before its superblocks, or spare states.
        if region >= regions.count() {
            break;
        }
        let Some(state) = states.get(region as usize) else {
            break;
        };
        if data.is_some_and(|d| !block_bit(d, index)) {
            continue;
        }
        if resync_from.is_some_and(|from| regions.span(region).end > from) {
            state.set_dirty_at_start();
        } else {
            state.mark_on_disk();
        }
    }
}

/// Bit `index` of a block read from disk: from its bits if its checksum holds, else set.
pub fn block_bit(block: &[u8; BLOCK_BYTES], index: u64) -> bool {
    if !block_intact(block) || index >= BITS_PER_BLOCK {
        return true;
    }
    block
        .get((index / 8) as usize)
        .is_none_or(|byte| byte & (1 << (index % 8)) != 0)
}
