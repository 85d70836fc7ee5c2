// SPDX-License-Identifier: GPL-2.0

//! The parity interface: what the stripe engine asks a parity backend to compute.
//!
//! A job works on one request's *stripe buffer*: a set of equally long columns the platform
//! allocated ([`StripeBuffers::alloc_buffer`](super::platform::StripeBuffers::alloc_buffer)). Column `m`
//! holds member `m`'s contents for the job's window of the stripe (data, P or Q, by the
//! stripe's [`StripeMap`]); column `members + m` holds the *new* contents of data member `m`
//! for a read-modify-write. The math is md's (`lib/raid/`): P = ⊕ D, Q = Σ g^slot · D over
//! GF(2^8) with polynomial 0x11d, `slot` the member's [`StripeMap::syndrome_slot`].
//!
//! A job may cover several adjacent stripes (a *run*): column offset `x` is chunk offset
//! `(head + x) % chunk` of the run's stripe `(head + x) / chunk`, each member's column being
//! contiguous on the member across the run. Every stripe has its own roles (P and Q rotate), so
//! backends work stripe by stripe ([`ParityJob::stripes`]); a batching backend (the helper over
//! the shared ring, a GPU) can take the whole run as one dispatch.
//!
//! Backends: the kernel's `lib/raid/` (task context, synchronous), `tools/graid-parity` on the
//! host, and later the helper over the shared ring (asynchronous, batched). The engine hands
//! over one job per request step and is told of its end through
//! [`ArrayEngine::parity_done`](super::array::ArrayEngine::parity_done), inline or later, so
//! a backend may collect jobs from many requests into one batch.

use super::layout::StripeMap;
use super::members::MemberSet;

/// What to compute.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParityOp {
    /// Columns P (and Q) from every data column.
    Generate,
    /// Read-modify-write: P (and Q) updated in place for the data members in `changed`, whose
    /// old contents are in column `m` and new ones in column `members + m`. One stripe only
    /// (a member's role differs between stripes); backends refuse it over more.
    Update { changed: MemberSet },
    /// Rebuild the columns of the members in `lost` from the others, stripe by stripe as
    /// each stripe's [`StripeMap::recovery`] says.
    Recover { lost: MemberSet },
}

/// One parity computation on a request's stripe buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParityJob {
    pub op: ParityOp,
    /// The roles in the run's first stripe (which column is P, Q, and each data column's
    /// coefficient); the next stripes' follow by [`StripeMap::advanced`].
    pub map: StripeMap,
    /// The chunk offset of column offset 0 in the first stripe, in sectors.
    pub head: u64,
    /// Chunk size in sectors.
    pub chunk: u64,
    /// Length of every column involved, in sectors.
    pub sectors: u64,
}

impl ParityJob {
    /// The job stripe by stripe: each stripe's roles and its column range `[from, to)`.
    pub fn stripes(&self) -> impl Iterator<Item = (StripeMap, u64, u64)> {
        let (map, head) = (self.map, self.head);
        let chunk = self.chunk.max(1);
        let end = head.saturating_add(self.sectors);
        (0..end.div_ceil(chunk)).map(move |t| {
            let from = t.saturating_mul(chunk).max(head) - head;
            let to = t.saturating_add(1).saturating_mul(chunk).min(end) - head;
            (map.advanced(t), from, to)
        })
    }

    /// How many stripes the job covers.
    pub fn stripe_count(&self) -> u64 {
        self.stripes().count() as u64
    }
}

/// Buffer columns by index (up to 64: a current and a new column per member).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Columns(u64);

impl Columns {
    pub const EMPTY: Self = Self(0);

    pub const fn bits(self) -> u64 {
        self.0
    }

    pub fn contains(self, column: u32) -> bool {
        column < 64 && self.0 & (1u64 << column) != 0
    }

    #[must_use]
    pub fn with(self, column: u32) -> Self {
        Self(self.0 | 1u64.checked_shl(column).unwrap_or(0))
    }

    /// Every member's current column.
    pub fn members(set: MemberSet) -> Self {
        Self(u64::from(set.bits()))
    }

    /// The new-data columns of the members in `set`, for `members` members.
    pub fn new_data(set: MemberSet, members: u32) -> Self {
        Self(u64::from(set.bits()).checked_shl(members).unwrap_or(0))
    }

    #[must_use]
    pub fn union(self, other: Self) -> Self {
        Self(self.0 | other.0)
    }

    /// How many columns.
    pub const fn count(self) -> u32 {
        self.0.count_ones()
    }

    /// The columns, lowest first.
    pub fn iter(self) -> impl Iterator<Item = u32> {
        (0u32..64).filter(move |&c| self.contains(c))
    }
}
