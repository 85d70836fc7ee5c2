// SPDX-License-Identifier: GPL-2.0

//! Which devices may join an array at assembly, judged from their decoded superblocks alone.
//!
//! The freshest superblock (highest event counter) of the array speaks for the array: its slot
//! table says what every device is. Like md, a device one event behind the freshest is still
//! current: superblocks are written to all members in parallel, so a crash can leave some a
//! single update behind, and every update that makes a device's data stale (it failed, it was
//! removed) also changes its slot in the table, which the check below catches.
//! Device sizes are not known here: the caller checks the data area fits each device.

use super::geometry::Level;
use super::superblock::{Slot, Superblock, RECOVERY_COMPLETE, UUID_LEN};

/// Verdict on one device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemberStatus {
    /// Current and in sync for `role`.
    Active { role: u8 },
    /// Holds `role` but is in sync only up to `recovery_offset` (a rebuild was interrupted).
    Recovering { role: u8, recovery_offset: u64 },
    /// A current spare.
    Spare,
    /// Belongs to another array.
    Foreign,
    /// Missed updates: more than one event behind the freshest superblock.
    Stale { events: u64, freshest_events: u64 },
    /// The freshest superblock marks this device faulty.
    Faulty,
    /// The freshest superblock no longer lists this device.
    Removed,
    /// Another device (index `of`) claims the same slot or member UUID and is preferred.
    Duplicate { of: usize },
    /// Same array UUID, but level, members, chunk or data size differ from the freshest.
    Mismatch,
}

impl MemberStatus {
    /// Whether the device can be part of the running array (possibly after recovery).
    pub fn joins(&self) -> bool {
        matches!(
            self,
            Self::Active { .. } | Self::Recovering { .. } | Self::Spare
        )
    }
}

/// Index of the freshest superblock of array `array_uuid` in `sbs` (highest event counter,
/// first on ties), or `None` if no device belongs to it.
pub fn pick_freshest(sbs: &[Superblock], array_uuid: &[u8; UUID_LEN]) -> Option<usize> {
    sbs.iter()
        .enumerate()
        .filter(|(_, sb)| sb.array_uuid == *array_uuid)
        .fold(None, |best: Option<(usize, u64)>, (i, sb)| match best {
            Some((_, events)) if events >= sb.events => best,
            _ => Some((i, sb.events)),
        })
        .map(|(i, _)| i)
}

/// Verdict on device `index` given the freshest superblock `freshest` (see [`pick_freshest`]).
/// `None` if either index is outside `sbs`.
pub fn member_status(sbs: &[Superblock], freshest: usize, index: usize) -> Option<MemberStatus> {
    let best = sbs.get(freshest)?;
    let sb = sbs.get(index)?;
    if sb.array_uuid != best.array_uuid {
        return Some(MemberStatus::Foreign);
    }
    if let Some(of) = preferred_twin(sbs, index) {
        return Some(MemberStatus::Duplicate { of });
    }
    // The data area too: every member's I/O goes to the freshest superblock's offset, so a
    // device whose own superblock puts the data elsewhere would be read and written wrong
    // (and past its end, its size being checked against its own offset). A data area of
    // another size is the one before a resize whose update this member missed (a power cut
    // between the members' superblock writes), if it is one update behind: the mapping of
    // what it holds is the same, and its device is checked against the new size. So is a
    // mirror's other member count (`raid_devices.rs`): every copy holds the same data, and the
    // freshest slot table says which role this device has.
    //
    // A reshape (`reshape_run.rs`) keeps the old geometry in these fields until the update
    // that ends it names the new one: a member one update behind that one names the new one
    // in its reshape fields, and holds its data in it (the end is written after every window
    // moved and was flushed). One behind the update that started it names the old one alone
    // (nothing moved before that update).
    let one_behind = sb.events.saturating_add(1) == best.events;
    let shape = |s: &Superblock| (s.level, s.chunk_sectors, s.data_offset);
    let ended = |s: &Superblock| {
        s.reshape
            .map(|r| (r.new_level, r.new_chunk_sectors, r.new_data_offset))
    };
    let behind_the_end = one_behind
        && best.reshape.is_none()
        && ended(sb) == Some(shape(best))
        && sb.reshape.map(|r| r.new_members) == Some(best.members);
    let same_geometry = shape(sb) == shape(best)
        && (sb.members == best.members || one_behind && is_mirror(best))
        && same_reshape(sb, best);
    let same_shape =
        (same_geometry || behind_the_end) && (sb.data_size == best.data_size || one_behind);
    if !same_shape {
        return Some(MemberStatus::Mismatch);
    }
    if sb.events < best.events.saturating_sub(1) {
        return Some(MemberStatus::Stale {
            events: sb.events,
            freshest_events: best.events,
        });
    }
    let entry = usize::try_from(sb.this_slot)
        .ok()
        .and_then(|slot| best.slots.get(slot))
        .copied()
        .unwrap_or(Slot::Empty);
    // A role a reshape added is written by the reshape itself, whatever its device held as a
    // spare (whose superblock says recovery 0): in use, as its start made it.
    let joined = |role: u8| {
        best.reshape
            .is_some_and(|r| (best.members..r.new_members).contains(&u32::from(role)))
    };
    Some(match entry {
        Slot::Active { role } if sb.recovery_offset == RECOVERY_COMPLETE || joined(role) => {
            MemberStatus::Active { role }
        }
        Slot::Active { role } => MemberStatus::Recovering {
            role,
            recovery_offset: sb.recovery_offset,
        },
        Slot::Spare => MemberStatus::Spare,
        Slot::Faulty => MemberStatus::Faulty,
        Slot::Empty => MemberStatus::Removed,
    })
}

/// RAID 1, by the superblock's level code.
fn is_mirror(sb: &Superblock) -> bool {
    sb.level == Level::Raid1
}

/// Both superblocks name the same reshape (its position aside, which moves with every update),
/// or none; or `sb` is one update behind the one that started or ended it.
fn same_reshape(sb: &Superblock, best: &Superblock) -> bool {
    let target = |s: &Superblock| {
        s.reshape.map(|r| {
            (
                r.new_level,
                r.new_chunk_sectors,
                r.new_members,
                r.new_data_offset,
                r.backwards,
            )
        })
    };
    target(sb) == target(best) || sb.events.saturating_add(1) == best.events
}

/// Another device of the same array that claims the same slot or member UUID and is preferred
/// over `index`: more events, or as many and earlier in `sbs`.
fn preferred_twin(sbs: &[Superblock], index: usize) -> Option<usize> {
    let sb = sbs.get(index)?;
    sbs.iter().enumerate().find_map(|(j, other)| {
        let twin = j != index
            && other.array_uuid == sb.array_uuid
            && (other.this_slot == sb.this_slot || other.member_uuid == sb.member_uuid);
        let preferred = other.events > sb.events || (other.events == sb.events && j < index);
        (twin && preferred).then_some(j)
    })
}
