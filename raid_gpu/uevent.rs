// SPDX-License-Identifier: GPL-2.0

//! What an array tells udev: a "change" uevent on `/dev/graidN` with the array's name, UUID and
//! level (the rules in `tools/udev/` name the array from them), and, when a member changes,
//! which member and what happened, so monitoring can react (`Documentation/udev.rst`).

use crate::engine::superblock::{Superblock, UuidText};
use crate::kernel_ext::blk_mq::{Disk, DiskOps};
use kernel::prelude::*;
use kernel::str::CString;

/// A member change, as `GRAID_EVENT=` says it.
#[derive(Clone, Copy)]
pub(crate) enum MemberChange {
    /// Failed (on request or after I/O errors): out of use, recorded in the superblocks.
    Failed,
    /// Its device was released from the array (`graidctl remove`).
    Removed,
    /// A device took its place (`graidctl add`); its rebuild started.
    Added,
    /// A device was added as a spare (the role is `spare`).
    SpareAdded,
    /// A spare was released (the role is `spare`).
    SpareRemoved,
    /// A spare took the place of this failed member (whose device was released); its
    /// rebuild started.
    SpareActivated,
    /// Its rebuild finished: in sync.
    Rebuilt,
    /// Its rebuild stopped: some data has no readable copy.
    RebuildStalled,
    /// A replace of it started (`graidctl replace`).
    ReplaceStarted,
    /// Its replacement took its place; the old device left the array.
    Replaced,
    /// Its replacement failed; it stays.
    ReplaceFailed,
    /// It failed while being replaced; the replacement is a spare again.
    ReplaceAbandoned,
    /// It returned an error but holds the last copy of some data: kept, and the array takes
    /// no more writes (md's "broken").
    ArrayBroken,
}

impl MemberChange {
    fn name(self) -> &'static str {
        match self {
            Self::Failed => "member-failed",
            Self::Removed => "member-removed",
            Self::Added => "member-added",
            Self::SpareAdded => "spare-added",
            Self::SpareRemoved => "spare-removed",
            Self::SpareActivated => "spare-activated",
            Self::Rebuilt => "rebuild-finished",
            Self::RebuildStalled => "rebuild-stalled",
            Self::ReplaceStarted => "replace-started",
            Self::Replaced => "member-replaced",
            Self::ReplaceFailed => "replace-failed",
            Self::ReplaceAbandoned => "replace-abandoned",
            Self::ArrayBroken => "array-broken",
        }
    }
}

// `format_args!`, not the kernel's `fmt!`: the engine's types implement `core::fmt::Display`
// (the engine also builds on the host).

/// Sends the array's change uevent: `GRAID_NAME`, `GRAID_UUID`, `GRAID_LEVEL`, and with
/// `change` also `GRAID_EVENT` and `GRAID_MEMBER` (the role). Allocates (`GFP_KERNEL`): the
/// caller is in process context, in a NOIO scope where writeback to the array could wait.
pub(crate) fn announce<T: DiskOps>(
    disk: &Disk<T>,
    sb: &Superblock,
    change: Option<(MemberChange, u32)>,
) -> Result {
    let Some((what, role)) = change else {
        return send(disk, sb, &[]);
    };
    let event = CString::try_from_fmt(format_args!("GRAID_EVENT={}", what.name()))?;
    let member = if role == crate::uapi::GRAID_ROLE_SPARE {
        CString::try_from_fmt(format_args!("GRAID_MEMBER=spare"))?
    } else {
        CString::try_from_fmt(format_args!("GRAID_MEMBER={role}"))?
    };
    send(disk, sb, &[event.to_bytes(), member.to_bytes()])
}

/// Sends the array's change uevent for a scrub's end: `GRAID_EVENT=check-finished` (or
/// `repair-`, `resync-`; `-stopped` when it stopped before its end) and `GRAID_MISMATCHES`, the
/// mismatched sectors it counted (md's `mismatch_cnt`). Allocates, as [`announce`].
pub(crate) fn announce_scrub<T: DiskOps>(
    disk: &Disk<T>,
    sb: &Superblock,
    scrub: &str,
    ending: &str,
    mismatches: u64,
) -> Result {
    let event = CString::try_from_fmt(format_args!("GRAID_EVENT={scrub}-{ending}"))?;
    let count = CString::try_from_fmt(format_args!("GRAID_MISMATCHES={mismatches}"))?;
    send(disk, sb, &[event.to_bytes(), count.to_bytes()])
}

/// Sends `GRAID_EVENT=reshape-started` or `reshape-finished` (a restripe; md's uevents say
/// only "change"). Allocates, as [`announce`].
pub(crate) fn announce_reshape<T: DiskOps>(disk: &Disk<T>, sb: &Superblock, ended: bool) -> Result {
    let event: &[u8] = if ended {
        b"GRAID_EVENT=reshape-finished"
    } else {
        b"GRAID_EVENT=reshape-started"
    };
    send(disk, sb, &[event])
}

/// Sends `GRAID_EVENT=degraded-array`: the array started without every member in sync (md's
/// DegradedArray). Allocates, as [`announce`].
pub(crate) fn announce_degraded<T: DiskOps>(disk: &Disk<T>, sb: &Superblock) -> Result {
    send(disk, sb, &[b"GRAID_EVENT=degraded-array"])
}

/// The most variables an event adds to the array's three.
const MAX_EXTRA: usize = 2;

/// The change uevent with the array's three variables and `extra` (at most [`MAX_EXTRA`]).
fn send<T: DiskOps>(disk: &Disk<T>, sb: &Superblock, extra: &[&[u8]]) -> Result {
    let name = CString::try_from_fmt(format_args!("GRAID_NAME={}", sb.array_name.as_str()))?;
    let uuid = CString::try_from_fmt(format_args!("GRAID_UUID={}", UuidText(&sb.array_uuid)))?;
    let level = CString::try_from_fmt(format_args!("GRAID_LEVEL={}", sb.level))?;
    let mut vars: [&[u8]; 3 + MAX_EXTRA] = [name.to_bytes(), uuid.to_bytes(), level.to_bytes(), &[], &[]];
    let extra = &extra[..extra.len().min(MAX_EXTRA)];
    for (slot, var) in vars[3..].iter_mut().zip(extra) {
        *slot = var;
    }
    disk.change_uevent(&vars[..3 + extra.len()])
}
