// SPDX-License-Identifier: GPL-2.0

//! Where parity sits in a RAID 5 or RAID 6 stripe: md's four rotating layouts, and which
//! survivors rebuild which chunk when members are lost.
//!
//! A stripe has `n` members: P (and Q on RAID 6) and `d = n - k` data chunks with *data index*
//! `0..d` in array order. md names its layouts by where P starts and how data follows it
//! (`drivers/md/raid5.c`, `raid5_compute_sector`); for stripe `s`:
//!
//! | layout (md number)      | P member                 | data index `i` on member              |
//! |-------------------------|--------------------------|---------------------------------------|
//! | left-asymmetric (0)     | `n - 1 - s % n`          | `i`, skipping P (and Q)               |
//! | right-asymmetric (1)    | `s % n`                  | `i`, skipping P (and Q)               |
//! | left-symmetric (2)      | `n - 1 - s % n`          | `(P + k + i) % n`: continues after P/Q |
//! | right-symmetric (3)     | `s % n`                  | `(P + k + i) % n`                     |
//!
//! On RAID 6, Q is the member after P (`(P + 1) % n`); on the asymmetric layouts, when P is the
//! last member, Q wraps to member 0 and the data starts at member 1.
//!
//! **Q's coefficients** (md's `raid6_d0`/`set_syndrome_sources`): data chunks enter the syndrome
//! in member order starting just after Q (from member 0 when Q is the last member), so a data
//! chunk's *syndrome slot* is its position in that walk: Q = Σ g^slot · D. On the symmetric
//! layouts the slot is the data index; on the asymmetric ones it need not be.

use super::members::MemberSet;

/// md's RAID 5/6 parity layouts (`ALGORITHM_*` numbers 0..=3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ParityLayout {
    LeftAsymmetric,
    RightAsymmetric,
    /// md's default.
    LeftSymmetric,
    RightSymmetric,
}

impl ParityLayout {
    pub const ALL: [Self; 4] = [
        Self::LeftAsymmetric,
        Self::RightAsymmetric,
        Self::LeftSymmetric,
        Self::RightSymmetric,
    ];

    /// md's algorithm number.
    pub const fn code(self) -> u32 {
        match self {
            Self::LeftAsymmetric => 0,
            Self::RightAsymmetric => 1,
            Self::LeftSymmetric => 2,
            Self::RightSymmetric => 3,
        }
    }

    pub const fn from_code(code: u32) -> Option<Self> {
        match code {
            0 => Some(Self::LeftAsymmetric),
            1 => Some(Self::RightAsymmetric),
            2 => Some(Self::LeftSymmetric),
            3 => Some(Self::RightSymmetric),
            _ => None,
        }
    }

    /// mdadm's name for it.
    pub const fn name(self) -> &'static str {
        match self {
            Self::LeftAsymmetric => "left-asymmetric",
            Self::RightAsymmetric => "right-asymmetric",
            Self::LeftSymmetric => "left-symmetric",
            Self::RightSymmetric => "right-symmetric",
        }
    }

    const fn is_left(self) -> bool {
        matches!(self, Self::LeftAsymmetric | Self::LeftSymmetric)
    }

    const fn is_symmetric(self) -> bool {
        matches!(self, Self::LeftSymmetric | Self::RightSymmetric)
    }
}

/// Marks "no Q" in [`StripeMap`].
const NONE: u32 = u32::MAX;

/// The roles of one stripe's members. Small and `Copy`: computed per request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StripeMap {
    layout: ParityLayout,
    members: u32,
    p: u32,
    /// `NONE` on RAID 5.
    q: u32,
}

/// What a member holds in a stripe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Data chunk with this data index (array order within the stripe).
    Data(u32),
    P,
    Q,
}

/// How the lost chunks of one stripe are rebuilt (the degraded map).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recovery {
    /// Nothing lost.
    Intact,
    /// One chunk (data or P) is the XOR of all the others except Q.
    Xor { lost: u32 },
    /// Q alone is lost: regenerate it from the data.
    RegenerateQ,
    /// P and Q are lost: regenerate both from the data.
    RegeneratePq,
    /// One data chunk and Q are lost: the data from P (XOR), then Q.
    DataAndQ { data: u32 },
    /// One data chunk and P are lost: the data from Q (md's `raid6_recov_datap`).
    DataAndP { data: u32 },
    /// Two data chunks are lost: both from P and Q (`raid6_recov_2data`), `a` before `b` in
    /// syndrome order.
    TwoData { a: u32, b: u32 },
    /// More lost than the level can rebuild.
    Lost,
}

impl StripeMap {
    /// The map of stripe `stripe` of an array with `members` members of which `parity` (1 or 2)
    /// hold parity. `members > parity` (the geometry checked it).
    pub fn new(layout: ParityLayout, members: u32, parity: u32, stripe: u64) -> Self {
        let n = members.max(1);
        // Below n <= 32: lossless.
        let rot = (stripe % u64::from(n)) as u32;
        let p = if layout.is_left() { n - 1 - rot } else { rot };
        let q = if parity < 2 {
            NONE
        } else if layout.is_symmetric() {
            (p + 1) % n
        } else if p == n - 1 {
            0
        } else {
            p + 1
        };
        Self {
            layout,
            members: n,
            p,
            q,
        }
    }

    /// The map of the stripe `by` stripes after this one.
    #[must_use]
    pub fn advanced(&self, by: u64) -> Self {
        let n = self.members.max(1);
        let rot = if self.layout.is_left() {
            n.saturating_sub(1).saturating_sub(self.p)
        } else {
            self.p
        };
        let stripe = u64::from(rot).saturating_add(by % u64::from(n));
        Self::new(self.layout, n, self.parity(), stripe)
    }

    pub fn members(&self) -> u32 {
        self.members
    }

    /// Parity chunks in the stripe (1 or 2).
    pub fn parity(&self) -> u32 {
        if self.q == NONE {
            1
        } else {
            2
        }
    }

    /// Data chunks in the stripe.
    pub fn data(&self) -> u32 {
        self.members - self.parity()
    }

    pub fn p(&self) -> u32 {
        self.p
    }

    pub fn q(&self) -> Option<u32> {
        (self.q != NONE).then_some(self.q)
    }

    /// The parity members as a set.
    pub fn parity_set(&self) -> MemberSet {
        let p = MemberSet::of(self.p);
        match self.q() {
            Some(q) => p.with(q),
            None => p,
        }
    }

    /// The member holding data index `index` (`index < data()`).
    pub fn data_member(&self, index: u32) -> u32 {
        let n = self.members;
        let k = self.parity();
        if self.layout.is_symmetric() {
            return (self.p + k + index) % n;
        }
        // Asymmetric: data fills the members in order, skipping the parity. On RAID 6 with P
        // last, Q is member 0 and the data starts at 1.
        if k == 2 && self.p == n - 1 {
            return index + 1;
        }
        if index >= self.p {
            index + k
        } else {
            index
        }
    }

    /// What `member` holds in this stripe.
    pub fn role(&self, member: u32) -> Role {
        if member == self.p {
            return Role::P;
        }
        if member == self.q {
            return Role::Q;
        }
        let n = self.members;
        let k = self.parity();
        let index = if self.layout.is_symmetric() {
            (member + n + n - self.p - k) % n
        } else if k == 2 && self.p == n - 1 {
            member.saturating_sub(1)
        } else if member > self.p {
            member - k
        } else {
            member
        };
        Role::Data(index)
    }

    /// md's first member of the syndrome walk: just after Q, or member 0 when Q is last.
    fn syndrome_start(&self) -> u32 {
        match self.q() {
            Some(q) if q + 1 < self.members => q + 1,
            _ => 0,
        }
    }

    /// The position of data member `member` in Q's sum (its coefficient is g^slot); on
    /// RAID 5 the data index. `None` for a parity member.
    pub fn syndrome_slot(&self, member: u32) -> Option<u32> {
        let Role::Data(index) = self.role(member) else {
            return None;
        };
        if self.q == NONE || self.layout.is_symmetric() {
            return Some(index);
        }
        // Walk from the start, counting data members, until `member`.
        let start = self.syndrome_start();
        let mut slot = 0;
        let mut m = start;
        for _ in 0..self.members {
            if m == member {
                return Some(slot);
            }
            if m != self.p && m != self.q {
                slot += 1;
            }
            m = if m + 1 < self.members { m + 1 } else { 0 };
        }
        None
    }

    /// The data member at syndrome slot `slot` (inverse of [`Self::syndrome_slot`]).
    pub fn slot_member(&self, slot: u32) -> Option<u32> {
        (0..self.members).find(|&m| self.syndrome_slot(m) == Some(slot))
    }

    /// How the chunks of the members in `lost` are rebuilt from the other members.
    pub fn recovery(&self, lost: MemberSet) -> Recovery {
        let lost = lost.intersect(MemberSet::first(self.members));
        let p_lost = lost.contains(self.p);
        let q_lost = self.q != NONE && lost.contains(self.q);
        let mut data = lost.minus(self.parity_set()).iter();
        let (d1, d2) = (data.next(), data.next());
        if data.next().is_some() || lost.len() > self.parity() {
            return Recovery::Lost;
        }
        match (d1, d2, p_lost, q_lost) {
            (None, None, false, false) => Recovery::Intact,
            (None, None, true, false) => Recovery::Xor { lost: self.p },
            (None, None, false, true) => Recovery::RegenerateQ,
            (None, None, true, true) => Recovery::RegeneratePq,
            (Some(d), None, false, false) => Recovery::Xor { lost: d },
            (Some(d), None, false, true) => Recovery::DataAndQ { data: d },
            (Some(d), None, true, false) => Recovery::DataAndP { data: d },
            (Some(a), Some(b), false, false) => {
                let (sa, sb) = (self.syndrome_slot(a), self.syndrome_slot(b));
                if sa < sb {
                    Recovery::TwoData { a, b }
                } else {
                    Recovery::TwoData { a: b, b: a }
                }
            }
            _ => Recovery::Lost,
        }
    }
}
