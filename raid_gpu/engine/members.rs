// SPDX-License-Identifier: GPL-2.0

//! The state the engine keeps per member: identity, health and I/O counters; and [`MemberSet`],
//! a set of members by index.

use super::platform::{Op, PieceInfo, Status};
use super::superblock::UUID_LEN;
use core::sync::atomic::{AtomicU64, AtomicU8, Ordering};

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

/// One member of a running array.
#[derive(Debug)]
pub struct MemberState {
    /// This member's UUID, kept in its superblock.
    uuid: [u8; UUID_LEN],
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

impl MemberState {
    /// A working member with no I/O done yet.
    pub const fn new(uuid: [u8; UUID_LEN]) -> Self {
        Self {
            uuid,
            health: AtomicU8::new(Health::Active.code()),
            shards: [const { StatShard::new() }; STAT_SHARDS],
            corrected: AtomicU64::new(0),
        }
    }

    /// A member whose device was not there when the array started (degraded assembly): out
    /// of use, as a recorded failure.
    pub const fn missing(uuid: [u8; UUID_LEN]) -> Self {
        Self {
            health: AtomicU8::new(Health::Faulty.code()),
            ..Self::new(uuid)
        }
    }

    pub fn uuid(&self) -> &[u8; UUID_LEN] {
        &self.uuid
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
