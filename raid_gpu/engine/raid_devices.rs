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
//!    takes only roles that are faulty, their devices already removed (md returns `EBUSY`
//!    for one still present).
//! 3. The geometry takes the count ([`GeometryCell::set_members`]), and the superblocks say it.
//!    A power cut before every member took them leaves some a single update behind with the
//!    other count, which assembly accepts (`assembly.rs`): the freshest one's count and slot
//!    table decide, and the roles both counts share hold the same data.
//!
//! [`GeometryCell::set_members`]: super::geometry_cell::GeometryCell::set_members

use super::array::{ArrayEngine, Store};
use super::geometry::{Geometry, GeometryError, Level};
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
    /// Role `role` would be dropped but is in use: fail and remove it first.
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
                "member {role} is still in use: fail and remove the members past the new count \
                 first"
            ),
            Self::Busy => write!(
                f,
                "a rebuild, replace, check, repair or resync runs or is pending: wait for it"
            ),
            Self::Broken => write!(f, "no member took the new count: the array is broken"),
        }
    }
}

impl<M: Store> ArrayEngine<M> {
    /// The geometry the array would have with `members` members, or why it may not have it
    /// now. Roles past a smaller count must be faulty; whether their devices are gone is the
    /// platform's to check.
    pub fn raid_devices_allowed(&self, members: u32) -> Result<Geometry, RaidDevicesError> {
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
        let dropped = self.members().get(members as usize..).unwrap_or(&[]);
        if let Some(role) = (members..)
            .zip(dropped)
            .find_map(|(role, m)| (m.health() != Health::Faulty).then_some(role))
        {
            return Err(RaidDevicesError::InUse { role });
        }
        if !self.in_sync()
            || !self.scrub_idle()
            || self.rebuild_target().is_some()
            || self.replacement().is_some()
        {
            return Err(RaidDevicesError::Busy);
        }
        Ok(new)
    }

    /// Gives the array `members` members (see the module comment). With the platform's queue
    /// frozen (no request in flight or starting) and the worker idle with the background
    /// held, as the one superblock writer; a shrink's dropped roles hold no device. `Ok`: the
    /// new geometry is in use and on disk, and the platform was asked to move a spare into a
    /// new role if the array has one ([`Platform::takeover_wanted`]); it then lets the queue
    /// and the worker go.
    ///
    /// [`Platform::takeover_wanted`]: super::platform::Events::takeover_wanted
    pub fn set_raid_devices<P: Platform>(
        &self,
        p: &P,
        members: u32,
    ) -> Result<Geometry, RaidDevicesError> {
        let new = self.raid_devices_allowed(members)?;
        let old = self.geometry();
        if new == old {
            return Ok(new);
        }
        // Past the old count: entries of the store nothing reads until the count grows.
        let count = self.geometry().members();
        let grown = self.members_store().get(count as usize..members as usize);
        grown
            .unwrap_or(&[])
            .iter()
            .for_each(MemberState::reset_missing);
        // Dropped roles' slot-table entries stay faulty (their devices are refused if they
        // come back), written as every other retired entry: no role past the count is left
        // for the superblocks to name.
        let dropped = self.members_store().get(members as usize..count as usize);
        for member in dropped.unwrap_or(&[]) {
            self.retire_slot(member.slot());
            member.reset_missing();
        }
        // A refused failure of a role past the new count says nothing of the roles left.
        let kept = u32::MAX.checked_shr(32 - members.min(32)).unwrap_or(0);
        self.fail_refused.fetch_and(kept, Ordering::SeqCst);
        // Validated by `raid_devices_allowed`: this cannot fail.
        let _ = self.geometry.set_members(members);
        self.write_superblocks(p)
            .map_err(|_| RaidDevicesError::Broken)?;
        // A spare of the array takes a new role at once.
        self.want_takeover(p);
        Ok(new)
    }
}
