// SPDX-License-Identifier: GPL-2.0

//! A mirror's copies change (md's `--grow --raid-devices N` on RAID 1, issue 46 item 2): more
//! copies, each a new role with no device that a spare then takes as a failed member's place
//! (a rebuild), or fewer, dropping roles that hold no device any more.
//!
//! Every copy of a mirror holds the same data at the same member sectors, so the roles below
//! the smaller count map every sector as before, and nothing moves. What changes is the count
//! of roles a write goes to and the superblocks' `raid_disks`, in this order:
//!
//! 1. The platform runs it with its queue frozen (no request in flight, none starting) and the
//!    worker idle with the background held, and nothing runs or is pending in the background
//!    (no rebuild, replace, check, repair or resync: refused otherwise, as for a resize).
//! 2. A grow makes the store's next entries members with no device: recorded failures in no
//!    slot-table entry ([`MemberState::reset_missing`]); the array is degraded until spares
//!    take them (md likewise leaves the new slots empty for its recovery to fill). A shrink
//!    drops faulty roles whose devices were removed (md returns `EBUSY` for one still
//!    present); members in use past the new count first move into the lowest such roles below
//!    it ([`Moves`]: the platform moves their devices, the engine their states), as md's
//!    `raid1_reshape` compacts its mirrors.
//! 3. The geometry takes the count ([`GeometryCell::set_members`]), and the superblocks say it.
//!    A power cut before every member took them leaves some a single update behind with the
//!    other count, which assembly accepts (`assembly.rs`): the freshest one's count and slot
//!    table decide, and the roles both counts share hold the same data.
//!
//! [`GeometryCell::set_members`]: super::geometry_cell::GeometryCell::set_members

use super::array::{ArrayEngine, Store};
use super::geometry::{Geometry, GeometryError, Level, MAX_MEMBERS};
use super::members::{Health, MemberState};
use super::platform::Platform;
use core::fmt;
use core::sync::atomic::Ordering;

/// Why the member count may not change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RaidDevicesError {
    /// Only a mirror's copies change this way; other levels restripe (not yet).
    Level(Level),
    /// The count does not fit the level (or the platform's room for members).
    Geometry(GeometryError),
    /// Role `role` would be dropped but is in use, and no faulty role below the count is left
    /// for it: fail and remove a member first.
    InUse { role: u32 },
    /// A rebuild, replace, check, repair or resync runs or is pending.
    Busy,
    /// No member took the new superblocks: the array is broken.
    Broken,
}

impl fmt::Display for RaidDevicesError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Level(level) => write!(
                f,
                "{level} cannot change its member count yet: only raid1 takes more or fewer copies"
            ),
            Self::Geometry(e) => write!(f, "impossible member count: {e}"),
            Self::InUse { role } => write!(
                f,
                "member {role} is still in use and no removed member's place is left for it: \
                 fail and remove a member first"
            ),
            Self::Busy => write!(
                f,
                "a rebuild, replace, check, repair or resync runs or is pending: wait for it"
            ),
            Self::Broken => write!(f, "no member took the new count: the array is broken"),
        }
    }
}

/// The moves a shrink of the copies makes: members in use past the new count into the lowest
/// faulty roles below it (md's `raid1_reshape` compacts likewise), `(from, to)` in order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Moves {
    pairs: [(u8, u8); MAX_MEMBERS as usize],
    len: u8,
}

impl Moves {
    /// The moves, in order (or backwards, to undo them).
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (u32, u32)> + ExactSizeIterator + '_ {
        let pairs = self.pairs.get(..usize::from(self.len)).unwrap_or(&[]);
        pairs
            .iter()
            .map(|&(from, to)| (u32::from(from), u32::from(to)))
    }

    fn push(&mut self, from: u32, to: u32) {
        if let (Some(pair), Ok(from), Ok(to)) = (
            self.pairs.get_mut(usize::from(self.len)),
            u8::try_from(from),
            u8::try_from(to),
        ) {
            *pair = (from, to);
            self.len += 1;
        }
    }
}

impl<M: Store> ArrayEngine<M> {
    /// The geometry the array would have with `members` members, and the moves a smaller
    /// count makes ([`Moves`]); or why it may not have it now. A smaller count must leave room
    /// below it for every member in use; whether the faulty roles it drops or fills still hold
    /// devices is the platform's to check (they must not).
    pub fn raid_devices_allowed(
        &self,
        members: u32,
    ) -> Result<(Geometry, Moves), RaidDevicesError> {
        let now = self.geometry();
        if now.level() != Level::Raid1 {
            return Err(RaidDevicesError::Level(now.level()));
        }
        let new = now
            .with_members(members)
            .map_err(RaidDevicesError::Geometry)?;
        if members > self.member_capacity() {
            return Err(RaidDevicesError::Geometry(GeometryError::MemberCount {
                level: now.level(),
                members,
            }));
        }
        let mut moves = Moves::default();
        let in_use = |m: &MemberState| m.health() != Health::Faulty;
        let mut free = (0u32..)
            .zip(self.members())
            .take(members as usize)
            .filter(|(_, m)| !in_use(m))
            .map(|(role, _)| role);
        let dropped = self.members().get(members as usize..).unwrap_or(&[]);
        for (role, _) in (members..).zip(dropped).filter(|(_, m)| in_use(m)) {
            let to = free.next().ok_or(RaidDevicesError::InUse { role })?;
            moves.push(role, to);
        }
        if !self.in_sync()
            || !self.scrub_idle()
            || self.rebuild_target().is_some()
            || self.replacement().is_some()
            || self.reshaping()
        {
            return Err(RaidDevicesError::Busy);
        }
        Ok((new, moves))
    }

    /// Gives the array `members` members (see the module comment). With the platform's queue
    /// frozen (no request in flight or starting) and the worker idle with the background
    /// held, as the one superblock writer; the platform has already made `moves` with its
    /// devices, which [`Self::raid_devices_allowed`] gave for this count with everything
    /// already still, and the roles a shrink drops or fills hold none. `Busy` (nothing
    /// changed, the platform moves its devices back) if the moves are no longer those. `Ok`:
    /// the new geometry is in use and on disk, and the platform was asked to move a spare into
    /// a new role if the array has one ([`Platform::takeover_wanted`]); it then lets the queue
    /// and the worker go.
    ///
    /// [`Platform::takeover_wanted`]: super::platform::Events::takeover_wanted
    pub fn set_raid_devices<P: Platform>(
        &self,
        p: &P,
        members: u32,
        moves: &Moves,
    ) -> Result<Geometry, RaidDevicesError> {
        let (new, planned) = self.raid_devices_allowed(members)?;
        if planned != *moves {
            return Err(RaidDevicesError::Busy);
        }
        let old = self.geometry();
        if new == old {
            return Ok(new);
        }
        let store = self.members_store();
        // A moved member takes the faulty role's place; that role's entry, a removed device's,
        // stays faulty (retired: refused if it comes back).
        for (from, to) in moves.iter() {
            if let (Some(from), Some(to)) = (store.get(from as usize), store.get(to as usize)) {
                self.retire_slot(to.slot());
                to.take_from(from);
                from.reset_missing();
            }
        }
        // Past the old count: entries of the store nothing reads until the count grows.
        let count = old.members();
        let grown = store.get(count as usize..members as usize);
        grown
            .unwrap_or(&[])
            .iter()
            .for_each(MemberState::reset_missing);
        // Dropped roles' slot-table entries stay faulty (their devices are refused if they
        // come back), written as every other retired entry: no role past the count is left
        // for the superblocks to name. (A moved member's entry went with it: NO_SLOT here.)
        let dropped = store.get(members as usize..count as usize);
        for member in dropped.unwrap_or(&[]) {
            self.retire_slot(member.slot());
            member.reset_missing();
        }
        // Refused failures are by role, and a shrink drops or moves roles: none is kept.
        if members < count {
            self.fail_refused.store(0, Ordering::SeqCst);
        }
        // Validated by `raid_devices_allowed`: this cannot fail.
        let _ = self.geometry.set_members(members);
        self.write_superblocks(p)
            .map_err(|_| RaidDevicesError::Broken)?;
        // A spare of the array takes a new role at once.
        self.want_takeover(p);
        Ok(new)
    }
}
