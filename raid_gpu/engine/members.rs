// SPDX-License-Identifier: GPL-2.0

//! The state the engine keeps per member: identity, health and I/O counters; and [`MemberSet`],
//! a set of members by index.

use super::platform::{Op, PieceInfo, Status};
use super::superblock::{RECOVERY_COMPLETE, UUID_LEN};
use core::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};

/// Where a member stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Health {
    /// In use.
    Active,
    /// Failed and no longer used, but not yet recorded in any superblock: writes that skipped
    /// it may not be acknowledged yet.
    Failing,
    /// Failed, and the superblocks say so.
    Faulty,
}

impl Health {
    const fn code(self) -> u8 {
        match self {
            Health::Active => 0,
            Health::Failing => 1,
            Health::Faulty => 2,
        }
    }

    const fn from_code(code: u8) -> Self {
        match code {
            0 => Health::Active,
            1 => Health::Failing,
            _ => Health::Faulty,
        }
    }
}

/// Shards of a member's I/O counters: completions on different CPUs add to different cache
/// lines (a CPU picks `cpu % STAT_SHARDS`), so counting costs no line shared between CPUs.
pub const STAT_SHARDS: usize = 8;

/// One shard of the I/O counters, a cache line of its own.
#[derive(Debug)]
#[repr(align(64))]
struct StatShard {
    reads: AtomicU64,
    writes: AtomicU64,
    read_bytes: AtomicU64,
    write_bytes: AtomicU64,
    errors: AtomicU64,
}

impl StatShard {
    /// Every counter, in one order (a member's state copied or cleared whole).
    fn counters(&self) -> [&AtomicU64; 5] {
        [
            &self.reads,
            &self.writes,
            &self.read_bytes,
            &self.write_bytes,
            &self.errors,
        ]
    }

    const fn new() -> Self {
        Self {
            reads: AtomicU64::new(0),
            writes: AtomicU64::new(0),
            read_bytes: AtomicU64::new(0),
            write_bytes: AtomicU64::new(0),
            errors: AtomicU64::new(0),
        }
    }
}

/// The slot-table entry of a member that has none: a role added with no device yet. Past
/// every table, so nothing is written for it.
pub const NO_SLOT: u32 = u32::MAX;

/// One member of a running array.
#[derive(Debug)]
pub struct MemberState {
    /// This member's UUID, kept in its superblock: a device added in place of a removed one
    /// brings its own.
    uuid: AtomicUuid,
    /// Its device's entry in the superblock's slot table.
    slot: AtomicU32,
    /// Sectors of its data area known in sync ([`RECOVERY_COMPLETE`]: all). Below that it is
    /// written to but never read from (it is being rebuilt). Changed only by the worker.
    recovery: AtomicU64,
    /// A [`Health`] code. Changed only by the array's worker (and before the array starts).
    health: AtomicU8,
    shards: [StatShard; STAT_SHARDS],
    /// Read errors repaired by rewriting the data from another copy (rare: not sharded).
    corrected: AtomicU64,
}

/// A member's I/O counters at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemberStats {
    pub reads: u64,
    pub writes: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub errors: u64,
    pub corrected: u64,
}

/// A UUID that the worker may replace while others read it (a member's, when a device takes
/// its place): two little-endian halves.
#[derive(Debug)]
pub struct AtomicUuid([AtomicU64; 2]);

impl AtomicUuid {
    pub const fn zero() -> Self {
        Self([AtomicU64::new(0), AtomicU64::new(0)])
    }

    pub fn new(uuid: [u8; UUID_LEN]) -> Self {
        let this = Self::zero();
        this.store(uuid);
        this
    }

    pub fn load(&self) -> [u8; UUID_LEN] {
        let mut uuid = [0u8; UUID_LEN];
        for (bytes, half) in uuid.chunks_exact_mut(8).zip(&self.0) {
            bytes.copy_from_slice(&half.load(Ordering::Relaxed).to_le_bytes());
        }
        uuid
    }

    pub fn store(&self, uuid: [u8; UUID_LEN]) {
        for (half, bytes) in self.0.iter().zip(uuid.chunks_exact(8)) {
            let mut le = [0u8; 8];
            le.copy_from_slice(bytes);
            half.store(u64::from_le_bytes(le), Ordering::Relaxed);
        }
    }
}

impl MemberState {
    /// A working, in-sync member in slot-table entry `slot`, with no I/O done yet.
    pub fn new(uuid: [u8; UUID_LEN], slot: u32) -> Self {
        Self {
            uuid: AtomicUuid::new(uuid),
            slot: AtomicU32::new(slot),
            recovery: AtomicU64::new(RECOVERY_COMPLETE),
            health: AtomicU8::new(Health::Active.code()),
            shards: [const { StatShard::new() }; STAT_SHARDS],
            corrected: AtomicU64::new(0),
        }
    }

    /// A working member in sync only up to `recovery_offset` sectors of its data area: a
    /// rebuild of it was interrupted, and goes on from there.
    pub fn recovering(uuid: [u8; UUID_LEN], slot: u32, recovery_offset: u64) -> Self {
        let state = Self::new(uuid, slot);
        state.recovery.store(recovery_offset, Ordering::Relaxed);
        state
    }

    /// A member whose device was not there when the array started (degraded assembly): out
    /// of use, as a recorded failure.
    pub fn missing(uuid: [u8; UUID_LEN], slot: u32) -> Self {
        let state = Self::new(uuid, slot);
        state.health.store(Health::Faulty.code(), Ordering::Relaxed);
        state
    }

    /// Makes this unused entry of the store a member with no device yet (a mirror's new
    /// copy): out of use as a recorded failure, in no slot-table entry ([`NO_SLOT`]), its
    /// counters zero. The worker only, with no request in flight.
    pub(crate) fn reset_missing(&self) {
        self.uuid.store([0; UUID_LEN]);
        self.slot.store(NO_SLOT, Ordering::Relaxed);
        self.recovery.store(RECOVERY_COMPLETE, Ordering::SeqCst);
        self.health.store(Health::Faulty.code(), Ordering::SeqCst);
        for counter in self.shards.iter().flat_map(StatShard::counters) {
            counter.store(0, Ordering::Relaxed);
        }
        self.corrected.store(0, Ordering::Relaxed);
    }

    /// Takes `other`'s place: its identity, health, position and counters (a mirror's member
    /// moving to a lower role when the copies shrink). The worker only, with no request in
    /// flight.
    pub(crate) fn take_from(&self, other: &MemberState) {
        self.uuid.store(other.uuid());
        self.slot.store(other.slot(), Ordering::Relaxed);
        self.recovery
            .store(other.recovery.load(Ordering::SeqCst), Ordering::SeqCst);
        self.health
            .store(other.health.load(Ordering::SeqCst), Ordering::SeqCst);
        let mine = self.shards.iter().flat_map(StatShard::counters);
        for (m, t) in mine.zip(other.shards.iter().flat_map(StatShard::counters)) {
            m.store(t.load(Ordering::Relaxed), Ordering::Relaxed);
        }
        self.corrected
            .store(other.corrected.load(Ordering::Relaxed), Ordering::Relaxed);
    }

    pub fn uuid(&self) -> [u8; UUID_LEN] {
        self.uuid.load()
    }

    /// Its device's slot-table entry.
    pub fn slot(&self) -> u32 {
        self.slot.load(Ordering::Relaxed)
    }

    /// Sectors of its data area in sync ([`RECOVERY_COMPLETE`]: all of them).
    pub fn recovery_offset(&self) -> u64 {
        // SeqCst: the rebuild moves it between writes that the I/O path orders against it.
        self.recovery.load(Ordering::SeqCst)
    }

    /// In use, and all its data in sync: reads may come from it.
    pub fn is_in_sync(&self) -> bool {
        self.is_active() && self.recovery_offset() == RECOVERY_COMPLETE
    }

    /// In use but not yet in sync: being rebuilt.
    pub fn is_recovering(&self) -> bool {
        self.is_active() && self.recovery_offset() != RECOVERY_COMPLETE
    }

    /// The rebuild reached `offset` ([`RECOVERY_COMPLETE`]: done). The worker only.
    pub(crate) fn set_recovery_offset(&self, offset: u64) {
        self.recovery.store(offset, Ordering::SeqCst);
    }

    /// A new device takes this faulty member's place: `uuid` in slot-table entry `slot`, in
    /// use (written to) and in sync up to nothing. True if done (the member was faulty). The
    /// worker only, with the device already reachable for member I/O.
    pub(crate) fn begin_recovery(&self, uuid: [u8; UUID_LEN], slot: u32) -> bool {
        if self.health() != Health::Faulty {
            return false;
        }
        self.uuid.store(uuid);
        self.slot.store(slot, Ordering::Relaxed);
        self.recovery.store(0, Ordering::SeqCst);
        self.health.store(Health::Active.code(), Ordering::SeqCst);
        true
    }

    /// Its replacement's device (`uuid` in slot-table entry `slot`), a copy of all its data
    /// that got every write, takes its place: in use and in sync as before. The worker only,
    /// with the device already in the member's place.
    pub(crate) fn take_device(&self, uuid: [u8; UUID_LEN], slot: u32) {
        self.uuid.store(uuid);
        self.slot.store(slot, Ordering::Relaxed);
    }

    pub fn health(&self) -> Health {
        // SeqCst: the durability gate (`ArrayEngine::complete`) orders this against the array's
        // count of failing members.
        Health::from_code(self.health.load(Ordering::SeqCst))
    }

    /// The member is used for I/O.
    pub fn is_active(&self) -> bool {
        self.health() == Health::Active
    }

    /// The member failed and is no longer used (recorded in the superblocks or not yet).
    pub fn is_faulty(&self) -> bool {
        !self.is_active()
    }

    /// Active → failing; true if this call did it.
    pub(crate) fn begin_failing(&self) -> bool {
        self.health
            .compare_exchange(
                Health::Active.code(),
                Health::Failing.code(),
                Ordering::SeqCst,
                Ordering::SeqCst,
            )
            .is_ok()
    }

    /// Failing → faulty, once a superblock records it; true if this call did it.
    pub(crate) fn mark_recorded(&self) -> bool {
        self.health
            .compare_exchange(
                Health::Failing.code(),
                Health::Faulty.code(),
                Ordering::SeqCst,
                Ordering::SeqCst,
            )
            .is_ok()
    }

    /// Counts one completed member I/O, completed on CPU `cpu`.
    pub(crate) fn account(&self, cpu: u32, piece: &PieceInfo, status: Status) {
        let Some(shard) = self.shards.get(cpu as usize % STAT_SHARDS) else {
            return;
        };
        let bytes = piece.sectors.saturating_mul(512);
        let (count, total) = match (status, piece.op) {
            (Status::Ok, Op::Read) => (&shard.reads, Some(&shard.read_bytes)),
            (Status::Ok, Op::Write) => (&shard.writes, Some(&shard.write_bytes)),
            // Flushes and discards move no data.
            (Status::Ok, Op::Flush | Op::Discard) => return,
            _ => (&shard.errors, None),
        };
        count.fetch_add(1, Ordering::Relaxed);
        if let Some(total) = total {
            total.fetch_add(bytes, Ordering::Relaxed);
        }
    }

    /// Counts a read error repaired on this member.
    pub(crate) fn count_corrected(&self) {
        self.corrected.fetch_add(1, Ordering::Relaxed);
    }

    /// The counters, summed over the shards.
    pub fn stats(&self) -> MemberStats {
        let sum = |field: fn(&StatShard) -> &AtomicU64| {
            self.shards.iter().fold(0u64, |n, s| {
                n.wrapping_add(field(s).load(Ordering::Relaxed))
            })
        };
        MemberStats {
            reads: sum(|s| &s.reads),
            writes: sum(|s| &s.writes),
            read_bytes: sum(|s| &s.read_bytes),
            write_bytes: sum(|s| &s.write_bytes),
            errors: sum(|s| &s.errors),
            corrected: self.corrected.load(Ordering::Relaxed),
        }
    }
}

/// A set of members by index: bit `i` is member `i` (an array has at most 32 members).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemberSet(u32);

impl MemberSet {
    pub const EMPTY: Self = Self(0);

    pub const fn from_bits(bits: u32) -> Self {
        Self(bits)
    }

    pub const fn bits(self) -> u32 {
        self.0
    }

    /// The set holding only `member` (empty if `member` is not a member index).
    pub fn of(member: u32) -> Self {
        Self(1u32.checked_shl(member).unwrap_or(0))
    }

    pub fn contains(self, member: u32) -> bool {
        self.0 & Self::of(member).0 != 0
    }

    /// Members `0..count`.
    pub fn first(count: u32) -> Self {
        Self(
            1u32.checked_shl(count)
                .map_or(u32::MAX, |b| b.wrapping_sub(1)),
        )
    }

    /// How many members the set holds.
    pub fn len(self) -> u32 {
        self.0.count_ones()
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    #[must_use]
    pub fn with(self, member: u32) -> Self {
        Self(self.0 | Self::of(member).0)
    }

    #[must_use]
    pub fn union(self, other: Self) -> Self {
        Self(self.0 | other.0)
    }

    #[must_use]
    pub fn minus(self, other: Self) -> Self {
        Self(self.0 & !other.0)
    }

    #[must_use]
    pub fn intersect(self, other: Self) -> Self {
        Self(self.0 & other.0)
    }

    /// The members in the set, lowest index first.
    pub fn iter(self) -> impl Iterator<Item = u32> {
        (0u32..32).filter(move |&m| self.contains(m))
    }
}
