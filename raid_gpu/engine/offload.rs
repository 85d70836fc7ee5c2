// SPDX-License-Identifier: GPL-2.0

//! Which parity jobs go to the helper, and where a job's columns lie in the pool
//! (`Documentation/ring-protocol.rst`, "Offload").
//!
//! The kernel *stages* an offloaded job: it copies the job's data columns from the request's
//! stripe buffer (kernel memory) into the job's area of the helper's pool, the helper writes
//! P (and Q) there, and the kernel copies them back once the completion is believed. So the
//! helper never holds memory the kernel writes to a member: whatever it does to the pool, late
//! or after it closed, reaches no disk, and a job taken back is computed from the kernel's own
//! copy. The cost is one copy of the data, which md's bio-to-stripe copy already has next to it.
//!
//! Each job slot owns one area of [`AREA_BYTES`]: the column table first, then the columns,
//! stripe by stripe in md's syndrome order (data slots, P, Q), each `column_bytes` long. A run's
//! first and last stripes may be partial: their columns are padded with zeros to the longest
//! piece, whose parity is zero and never copied back.

use super::layout::{Role, StripeMap};
use super::members::MemberSet;
use super::parity::{ParityJob, ParityOp};

/// Bytes of pool per job slot.
pub const AREA_BYTES: u64 = 2 << 20;
/// The column table at the start of each area: `u64` pool offsets.
pub const TABLE_BYTES: u64 = 64 << 10;
/// Most bytes one column may have (the helper's limit, `graid_parity::MAX_CHUNK_BYTES`).
pub const MAX_COLUMN_BYTES: u64 = 1 << 20;
/// Default smallest job offloaded, in data bytes (`ring-offload.md`: below it the ring costs
/// more than it saves).
pub const DEFAULT_MIN_BYTES: u64 = 128 << 10;

code_enum! {
    /// Why a parity job was computed in the kernel instead of by the helper.
    pub enum Fallback {
        /// No helper attached (or it lost the kernel's trust).
        NoHelper,
        /// Less data than the offload threshold: the ring would cost more than it saves.
        Small,
        /// An op kept in the kernel: read-modify-write (latency-critical), recovery on the
        /// request path or for a helper that does not do it, and a job of several stripes for a
        /// helper that did not take `RING_FEATURE_BATCH`.
        Op,
        /// The job's columns do not fit a pool area.
        TooBig,
        /// Every job slot is in use, or the submission queue is full.
        Busy,
        /// The helper answered that it could not do the job.
        HelperFailed,
        /// The helper missed the job's deadline.
        Expired,
        /// The helper detached (closed, killed, broke the protocol) with the job out.
        Detached,
        /// The helper takes longer per byte than the kernel now ([`route`]).
        Slower,
        /// The helper answered OK, but the kernel's check of its result ([`verify_due`]) found
        /// it wrong: the kernel's result is used and the helper detached.
        Wrong,
    }
}

impl Fallback {
    /// How many reasons there are (counter arrays).
    pub const COUNT: usize = Self::ALL.len();

    pub fn index(self) -> usize {
        usize::from(self.code())
    }
}

/// Where an offloaded job's columns go in its area.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Staging {
    /// Data columns per stripe.
    pub data: u32,
    /// Parity columns per stripe: 1 (RAID 5, XOR) or 2 (RAID 6, P and Q).
    pub parity: u32,
    /// Stripes in the job.
    pub stripes: u32,
    /// Bytes of every column (the longest stripe piece of the job).
    pub column_bytes: u64,
    /// A recovery: the members lost (the helper rebuilds them, stripe by stripe, from the
    /// others; the lost table follows the column table). `None`: a generation.
    pub lost: Option<MemberSet>,
}

/// Which ops a caller lets go to the helper.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Offloadable {
    /// Generations only: the request path (its recoveries are degraded reads, latency-bound).
    Generate,
    /// Generations and recoveries: rebuild and scrub, whose worker waits for the job.
    GenerateAndRecover,
}

impl Staging {
    /// Whether `job` goes to the helper, and if so its layout. Generations (full-stripe and
    /// reconstruct writes, a scrub's parity) and, where `ops` allows, recoveries (a rebuild's)
    /// of at least `min_bytes` of data go; read-modify-writes never.
    pub fn plan(job: &ParityJob, min_bytes: u64, ops: Offloadable) -> Result<Self, Fallback> {
        let lost = match (job.op, ops) {
            (ParityOp::Generate, _) => None,
            (ParityOp::Recover { lost }, Offloadable::GenerateAndRecover) => {
                // Every stripe must be recoverable from what is left.
                if job
                    .stripes()
                    .any(|(map, _, _)| lost_slots(&map, lost).is_none())
                {
                    return Err(Fallback::Op);
                }
                Some(lost)
            }
            _ => return Err(Fallback::Op),
        };
        let (data, parity) = (job.map.data(), job.map.parity());
        let data_bytes = u64::from(data)
            .saturating_mul(job.sectors)
            .saturating_mul(512);
        if data_bytes < min_bytes || data_bytes == 0 {
            return Err(Fallback::Small);
        }
        let mut stripes = 0u32;
        let mut longest = 0u64;
        for (_, from, to) in job.stripes() {
            stripes = stripes.saturating_add(1);
            longest = longest.max(to.saturating_sub(from));
        }
        let staging = Self {
            data,
            parity,
            stripes,
            column_bytes: longest.saturating_mul(512),
            lost,
        };
        let columns = staging.columns();
        let fits = staging.column_bytes > 0
            && staging.column_bytes <= MAX_COLUMN_BYTES
            && staging
                .lost_table_offset()
                .saturating_add(staging.lost_table_bytes())
                <= TABLE_BYTES
            && columns
                .saturating_mul(staging.column_bytes)
                .saturating_add(TABLE_BYTES)
                <= AREA_BYTES;
        if fits {
            Ok(staging)
        } else {
            Err(Fallback::TooBig)
        }
    }

    /// Columns in the job (every stripe's data and parity).
    pub fn columns(&self) -> u64 {
        u64::from(self.stripes) * u64::from(self.data + self.parity)
    }

    /// Offset within the area of column `slot` (syndrome order: data slots, P, Q) of stripe
    /// `stripe`.
    pub fn column_offset(&self, stripe: u32, slot: u32) -> u64 {
        let index = u64::from(stripe) * u64::from(self.data + self.parity) + u64::from(slot);
        TABLE_BYTES + index * self.column_bytes
    }

    /// Data bytes the job carries (for the counters).
    pub fn data_bytes(&self) -> u64 {
        u64::from(self.stripes) * u64::from(self.data) * self.column_bytes
    }

    /// Offset within the area of the lost table (right after the column table).
    pub fn lost_table_offset(&self) -> u64 {
        self.columns().saturating_mul(8)
    }

    /// Bytes of the lost table: two per stripe for a recovery, none for a generation.
    pub fn lost_table_bytes(&self) -> u64 {
        if self.lost.is_some() {
            u64::from(self.stripes) * 2
        } else {
            0
        }
    }

    /// Whether the kernel copies column `slot` of stripe `map` into the area (the data of a
    /// generation; what survives of a recovery) and whether it copies it back out (a
    /// generation's parity; what a recovery rebuilt).
    pub fn copies(&self, map: &StripeMap, slot: u32) -> (bool, bool) {
        match self.lost {
            None => (slot < self.data, slot >= self.data),
            Some(lost) => {
                let gone = slot_member(map, slot).is_none_or(|m| lost.contains(m));
                (!gone, gone)
            }
        }
    }
}

/// A lost-table entry naming no column (the ring's `NO_SLOT`).
pub const NO_SLOT: u8 = u8::MAX;

/// The syndrome slots of `map`'s members in `lost` (data slots, then P, then Q), [`NO_SLOT`]
/// where fewer than two; `None` if more are lost than the parity rebuilds.
pub fn lost_slots(map: &StripeMap, lost: MemberSet) -> Option<[u8; 2]> {
    let mut slots = [NO_SLOT; 2];
    let mut count = 0usize;
    for slot in 0..map.data() + map.parity() {
        if slot_member(map, slot).is_some_and(|m| lost.contains(m)) {
            *slots.get_mut(count)? = u8::try_from(slot).ok()?;
            count += 1;
        }
    }
    (count <= map.parity() as usize).then_some(slots)
}

/// The member in syndrome slot `slot` of `map`: data slots first (md's order of Q's sum), then
/// P, then Q.
pub fn slot_member(map: &StripeMap, slot: u32) -> Option<u32> {
    let data = map.data();
    if slot < data {
        return (0..map.members())
            .find(|&m| matches!(map.role(m), Role::Data(_)) && map.syndrome_slot(m) == Some(slot));
    }
    match slot - data {
        0 => Some(map.p()),
        1 => map.q(),
        _ => None,
    }
}

/// Where an eligible job goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    Helper,
    Kernel,
}

/// Completions of a newly attached helper that the kernel checks, every one.
pub const VERIFY_FIRST: u64 = 16;
/// After those, one completion is checked per this many nanoseconds.
pub const VERIFY_INTERVAL_NS: u64 = 1_000_000_000;

/// Whether the kernel recomputes a completed job and compares its result with the helper's,
/// the helper having passed `verified` checks since it attached and the last check having been
/// at `last_ns`: every one of a new helper's first [`VERIFY_FIRST`], then one a second (or
/// every one, `always`). A helper that answers OK with wrong parity is so caught at its first
/// job, or within a second if it turns: the protocol checks alone cannot see it.
pub fn verify_due(verified: u64, now_ns: u64, last_ns: u64, always: bool) -> bool {
    always || verified < VERIFY_FIRST || now_ns.saturating_sub(last_ns) >= VERIFY_INTERVAL_NS
}

/// How often a job goes the other way than the costs say, so both costs stay measured: one
/// job a second (nanoseconds). A slower side so costs at most one job's delay a second.
pub const PROBE_INTERVAL_NS: u64 = 1_000_000_000;

/// A cost (nanoseconds per KiB of data) updated with `ns` for `bytes`: an exponentially
/// weighted average (1/8 weight to the new sample); 0 means not measured yet.
pub fn cost_update(old: u64, bytes: u64, ns: u64) -> u64 {
    let sample = ns.saturating_mul(1024) / bytes.max(1);
    let sample = sample.max(1);
    if old == 0 {
        sample
    } else {
        (old.saturating_mul(7).saturating_add(sample)) / 8
    }
}

/// Whether a probe is due at `now_ns`, the last one having gone at `last_ns`.
pub fn probe_due(now_ns: u64, last_ns: u64) -> bool {
    now_ns.saturating_sub(last_ns) >= PROBE_INTERVAL_NS
}

/// Where an eligible job goes, given the kernel's cost of computing a job and the helper's
/// from submission to completion (its queueing and wake-ups included, so the comparison leans
/// towards the kernel): the helper once it is measured and no slower (or the kernel is not
/// measured yet), else the kernel; a `probe` goes the other way. So a new helper gets one job
/// (a probe) until its first completion says what it costs, not a burst it may be slow at, and
/// offload never makes an array slower for long: a helper slower than the kernel gets one job
/// a second.
pub fn route(kernel_cost: u64, helper_cost: u64, probe: bool) -> Route {
    let helper_first = helper_cost != 0 && (kernel_cost == 0 || helper_cost <= kernel_cost);
    if helper_first != probe {
        Route::Helper
    } else {
        Route::Kernel
    }
}
