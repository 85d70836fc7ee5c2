// SPDX-License-Identifier: GPL-2.0

//! The files under `/sys/block/graidN/graid/`: what each one reads, rendered from what DETAIL
//! reports (so the files and `graidctl detail` cannot disagree), and the values the writable
//! ones take. Names and values are md's (`/sys/block/mdN/md/`) where the meaning is md's, so
//! scripts written for md port by changing the path. Shared verbatim with the tools
//! (`graid_abi::sysfs`), where it is tested.

use crate::uapi::{
    GraidDetail, GraidMemberDetail, GraidReshape, GRAID_ARRAY_BROKEN, GRAID_ARRAY_DEGRADED,
    GRAID_ARRAY_FAILED, GRAID_ARRAY_OPTIMAL, GRAID_DETAIL_DIRTY, GRAID_DETAIL_PPL,
    GRAID_LEVEL_RAID0, GRAID_MEMBER_ACTIVE, GRAID_MEMBER_FAULTY, GRAID_MEMBER_MISSING,
    GRAID_MEMBER_REBUILDING, GRAID_RESHAPE_NONE, GRAID_ROLE_NONE, GRAID_SCRUB_CHECK,
    GRAID_SCRUB_IDLE, GRAID_SCRUB_REPAIR, GRAID_SCRUB_RESYNC,
};
use core::ffi::CStr;
use core::fmt::{self, Write};

/// A file: its name, and whether root may write it.
#[derive(Clone, Copy, Debug)]
pub struct File {
    pub name: &'static CStr,
    pub writable: bool,
}

const fn ro(name: &'static CStr) -> File {
    File {
        name,
        writable: false,
    }
}

const fn rw(name: &'static CStr) -> File {
    File {
        name,
        writable: true,
    }
}

/// The array's files, in `graid/` under the disk's directory.
pub const ARRAY_FILES: [File; 23] = [
    ro(c"level"),
    ro(c"raid_disks"),
    ro(c"chunk_size"),
    ro(c"component_size"),
    ro(c"array_state"),
    ro(c"state"),
    ro(c"degraded"),
    rw(c"sync_action"),
    ro(c"sync_completed"),
    ro(c"reshape_position"),
    ro(c"sync_speed"),
    rw(c"sync_speed_min"),
    rw(c"sync_speed_max"),
    ro(c"mismatch_cnt"),
    ro(c"consistency_policy"),
    ro(c"bitmap_regions"),
    ro(c"bitmap_dirty"),
    ro(c"ppl_entries"),
    ro(c"ppl_wraps"),
    ro(c"spares"),
    ro(c"name"),
    ro(c"uuid"),
    ro(c"events"),
];

/// Each member's files, in `graid/rdN/` (N: its role, md's `rdN`).
pub const MEMBER_FILES: [File; 6] = [
    ro(c"state"),
    ro(c"slot"),
    ro(c"dev"),
    ro(c"errors"),
    ro(c"corrected"),
    ro(c"recovery_start"),
];

/// Writes the text of the array's file `name` (a line) to `out`; `None`: no such file. `r`:
/// RESHAPE's answer (the restripe under way, if any).
pub fn array_file(
    name: &str,
    d: &GraidDetail,
    r: &GraidReshape,
    out: &mut impl Write,
) -> Option<fmt::Result> {
    let reshaping = r.state != GRAID_RESHAPE_NONE;
    Some(match name {
        // md's names while a reshape runs: its action, progress and position (array sectors
        // moved from where it started; every reshape graid runs goes forwards from 0).
        "sync_action" if reshaping => writeln!(out, "reshape"),
        "sync_completed" if reshaping => {
            writeln!(out, "{} / {}", r.moved_sectors, r.total_sectors)
        }
        "reshape_position" if reshaping => writeln!(out, "{}", r.moved_sectors),
        "reshape_position" => writeln!(out, "none"),
        "level" => writeln!(out, "raid{}", d.level),
        "raid_disks" => writeln!(out, "{}", d.nr_members),
        // md's units: bytes for the chunk, KiB for what each member holds.
        "chunk_size" => writeln!(out, "{}", u64::from(d.chunk_sectors) * 512),
        "component_size" => writeln!(out, "{}", d.member_data_sectors / 2),
        "array_state" => writeln!(out, "{}", array_state(d)),
        "state" => writeln!(out, "{}", state(d)),
        "degraded" => writeln!(out, "{}", degraded(d)),
        "sync_action" => writeln!(out, "{}", sync_action(d)),
        "sync_completed" => match sync_completed(d) {
            Some((done, total)) => writeln!(out, "{done} / {total}"),
            None => writeln!(out, "none"),
        },
        "sync_speed" => match sync_action(d) {
            "idle" => writeln!(out, "none"),
            _ => writeln!(out, "{}", d.rate_kibs),
        },
        "sync_speed_min" => writeln!(out, "{}", d.speed_min_kibs),
        "sync_speed_max" => writeln!(out, "{}", d.speed_max_kibs),
        "mismatch_cnt" => writeln!(out, "{}", d.mismatch_sectors),
        "consistency_policy" => writeln!(out, "{}", consistency_policy(d)),
        "bitmap_regions" => writeln!(out, "{}", d.bitmap_regions),
        "bitmap_dirty" => writeln!(out, "{}", d.bitmap_dirty),
        "ppl_entries" => writeln!(out, "{}", d.ppl_entries),
        "ppl_wraps" => writeln!(out, "{}", d.ppl_wraps),
        "spares" => spares(d, out),
        "name" => writeln!(out, "{}", text(&d.name)),
        "uuid" => uuid(&d.uuid, out),
        "events" => writeln!(out, "{}", d.events),
        _ => return None,
    })
}

/// Writes the text of member `role`'s file `name` to `out`; `None`: no such file or member.
pub fn member_file(
    name: &str,
    d: &GraidDetail,
    role: u32,
    out: &mut impl Write,
) -> Option<fmt::Result> {
    let m = members(d).get(usize::try_from(role).ok()?)?;
    Some(match name {
        "state" => writeln!(out, "{}", member_state(m)),
        "slot" => writeln!(out, "{}", m.role),
        "dev" => match m.state {
            GRAID_MEMBER_MISSING => writeln!(out, "none"),
            _ => writeln!(out, "{}:{}", m.dev.major, m.dev.minor),
        },
        "errors" => writeln!(out, "{}", m.errors),
        "corrected" => writeln!(out, "{}", m.corrected),
        // md's: where the member's recovery stands, `none` once it is in sync.
        "recovery_start" => match m.state {
            GRAID_MEMBER_REBUILDING => writeln!(out, "{}", m.recovery_offset),
            _ => writeln!(out, "none"),
        },
        _ => return None,
    })
}

/// What a write to `sync_action` asks for, as a `GRAID_SCRUB_*` action: md's `check`, `repair`
/// and `idle` (a trailing newline, as `echo` writes, is ignored). `None`: anything else (md's
/// `resync`, `recover` and `frozen` are not asked for this way: graid starts those itself).
pub fn parse_sync_action(text: &[u8]) -> Option<u32> {
    match trim_newline(text) {
        b"check" => Some(GRAID_SCRUB_CHECK),
        b"repair" => Some(GRAID_SCRUB_REPAIR),
        b"idle" => Some(GRAID_SCRUB_IDLE),
        _ => None,
    }
}

/// A speed written to `sync_speed_min` or `sync_speed_max`, KiB/s, in decimal.
pub fn parse_kibs(text: &[u8]) -> Option<u32> {
    let digits = trim_newline(text);
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    core::str::from_utf8(digits).ok()?.parse().ok()
}

fn trim_newline(text: &[u8]) -> &[u8] {
    text.strip_suffix(b"\n").unwrap_or(text)
}

fn members(d: &GraidDetail) -> &[GraidMemberDetail] {
    d.members.get(..d.nr_members as usize).unwrap_or(&d.members)
}

/// md's `array_state`: `broken` once I/O fails, `active` while the superblocks say writes
/// may be in flight, `clean` otherwise.
fn array_state(d: &GraidDetail) -> &'static str {
    match d.state {
        GRAID_ARRAY_FAILED | GRAID_ARRAY_BROKEN => "broken",
        _ if d.flags & GRAID_DETAIL_DIRTY != 0 => "active",
        _ => "clean",
    }
}

/// graid's own word for the array, as `graidctl detail` shows it.
fn state(d: &GraidDetail) -> &'static str {
    match d.state {
        GRAID_ARRAY_OPTIMAL => "optimal",
        GRAID_ARRAY_DEGRADED => "degraded",
        GRAID_ARRAY_FAILED => "failed",
        GRAID_ARRAY_BROKEN => "broken",
        _ => "unknown",
    }
}

/// md's `degraded`: members not in sync (failed, missing or being rebuilt).
fn degraded(d: &GraidDetail) -> usize {
    members(d)
        .iter()
        .filter(|m| m.state != GRAID_MEMBER_ACTIVE)
        .count()
}

/// md's `sync_action`: `recover` while a member is rebuilt or replaced, the scrub's action
/// while one runs, `idle` otherwise.
pub fn sync_action(d: &GraidDetail) -> &'static str {
    if rebuilding(d).is_some() {
        return "recover";
    }
    match d.scrub_action {
        GRAID_SCRUB_CHECK => "check",
        GRAID_SCRUB_REPAIR => "repair",
        GRAID_SCRUB_RESYNC => "resync",
        _ if d.replace_role != GRAID_ROLE_NONE => "recover",
        _ => "idle",
    }
}

fn rebuilding(d: &GraidDetail) -> Option<&GraidMemberDetail> {
    members(d)
        .iter()
        .find(|m| m.state == GRAID_MEMBER_REBUILDING)
}

/// md's `sync_completed`, sectors done of the total of what runs (a rebuild's and a
/// replace's in member sectors, a scrub's in the units DETAIL gives).
fn sync_completed(d: &GraidDetail) -> Option<(u64, u64)> {
    let total = d.member_data_sectors;
    if let Some(m) = rebuilding(d) {
        return Some((m.recovery_offset.min(total), total));
    }
    if d.scrub_action != GRAID_SCRUB_IDLE {
        return Some((d.scrub_done.min(d.scrub_total), d.scrub_total));
    }
    (d.replace_role != GRAID_ROLE_NONE).then_some((d.replace_copied.min(total), total))
}

/// md's `consistency_policy`.
fn consistency_policy(d: &GraidDetail) -> &'static str {
    if d.level == GRAID_LEVEL_RAID0 {
        "none"
    } else if d.flags & GRAID_DETAIL_PPL != 0 {
        "ppl"
    } else if d.bitmap_region_sectors != 0 {
        "bitmap"
    } else {
        "resync"
    }
}

/// md's words for a member's state: `in_sync`, `faulty`, `spare` while it is rebuilt (not yet
/// in sync); graid's `missing` for a role without a device.
fn member_state(m: &GraidMemberDetail) -> &'static str {
    match m.state {
        GRAID_MEMBER_ACTIVE => "in_sync",
        GRAID_MEMBER_FAULTY => "faulty",
        GRAID_MEMBER_REBUILDING => "spare",
        GRAID_MEMBER_MISSING => "missing",
        _ => "unknown",
    }
}

/// The spares' devices as `major:minor`, space-separated; `none` without spares.
fn spares(d: &GraidDetail, out: &mut impl Write) -> fmt::Result {
    let spares = d.spares.get(..d.nr_spares as usize).unwrap_or(&d.spares);
    if spares.is_empty() {
        return writeln!(out, "none");
    }
    for (i, s) in spares.iter().enumerate() {
        let sep = if i == 0 { "" } else { " " };
        write!(out, "{sep}{}:{}", s.major, s.minor)?;
    }
    writeln!(out)
}

/// md's form of a UUID, `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` (as graid's uevents print it).
fn uuid(uuid: &[u8; 16], out: &mut impl Write) -> fmt::Result {
    for (i, byte) in uuid.iter().enumerate() {
        let dash = if matches!(i, 4 | 6 | 8 | 10) { "-" } else { "" };
        write!(out, "{dash}{byte:02x}")?;
    }
    writeln!(out)
}

/// A NUL-padded name field as text (what precedes the first NUL; `?` if it is not UTF-8).
fn text(field: &[u8]) -> &str {
    let name = field.split(|&b| b == 0).next().unwrap_or_default();
    core::str::from_utf8(name).unwrap_or("?")
}
