//! What graidctl prints: the views of arrays and members shared by the human and JSON output,
//! plain-text tables, and JSON rendering.

use crate::array_ref::running_arrays;
use crate::control::ControlDevice;
use crate::error::CtlError;
use crate::member::{Rdev, System};
use crate::size::{format_sectors, SECTOR_BYTES};
use crate::uuid;
use graid_abi::{
    GraidDetail, GraidMemberDetail, GRAID_ARRAY_BROKEN, GRAID_ARRAY_DEGRADED, GRAID_ARRAY_FAILED,
    GRAID_ARRAY_OPTIMAL, GRAID_DETAIL_DIRTY, GRAID_DETAIL_PARITY_HEAL, GRAID_DETAIL_PPL,
    GRAID_DETAIL_REBUILD_STALLED, GRAID_DETAIL_RESYNC_PENDING, GRAID_DETAIL_SCRUB_STALLED,
    GRAID_MAX_SPARES, GRAID_MEMBER_ACTIVE, GRAID_MEMBER_FAULTY, GRAID_MEMBER_MISSING,
    GRAID_MEMBER_REBUILDING, GRAID_REPLACE_ABANDONED, GRAID_REPLACE_COPYING, GRAID_REPLACE_FAILED,
    GRAID_REPLACE_SWAPPING, GRAID_ROLE_NONE, GRAID_SCRUB_CHECK, GRAID_SCRUB_REPAIR,
    GRAID_SCRUB_RESYNC,
};
use serde::Serialize;

/// Pretty JSON of `value`, newline-terminated.
pub fn json<T: Serialize>(value: &T) -> String {
    let mut text = serde_json::to_string_pretty(value).expect("views serialize");
    text.push('\n');
    text
}

/// `raid0`, `raid1`, `raid10`, or `level N` for a level this graidctl does not know.
pub fn level_name(level: u32) -> String {
    match level {
        0 | 1 | 10 | 5 | 6 => format!("raid{level}"),
        other => format!("level {other}"),
    }
}

fn array_state_name(state: u32) -> String {
    match state {
        GRAID_ARRAY_OPTIMAL => "optimal".to_owned(),
        GRAID_ARRAY_DEGRADED => "degraded".to_owned(),
        GRAID_ARRAY_FAILED => "failed".to_owned(),
        GRAID_ARRAY_BROKEN => "broken".to_owned(),
        other => format!("unknown ({other})"),
    }
}

fn member_state_name(state: u32) -> String {
    match state {
        GRAID_MEMBER_ACTIVE => "active".to_owned(),
        GRAID_MEMBER_FAULTY => "faulty".to_owned(),
        GRAID_MEMBER_MISSING => "missing".to_owned(),
        GRAID_MEMBER_REBUILDING => "rebuilding".to_owned(),
        other => format!("unknown ({other})"),
    }
}

/// The text of a NUL-terminated name field (lossy: the module only stores valid UTF-8).
pub fn name_str(field: &[u8]) -> String {
    let len = field.iter().position(|&b| b == 0).unwrap_or(field.len());
    String::from_utf8_lossy(&field[..len]).into_owned()
}

/// `/dev/graidN`.
pub fn array_device(index: u32) -> String {
    format!("/dev/graid{index}")
}

/// `detail --export`: the udev properties the module's change uevent carries, in the same form
/// (`raidN` whatever N is), as `KEY=value` lines for udev's `IMPORT{program}`.
/// The members DETAIL filled in (`nr_members` of them, never past the array).
pub fn present_members(d: &GraidDetail) -> &[GraidMemberDetail] {
    &d.members[..(d.nr_members as usize).min(d.members.len())]
}

/// The spares DETAIL filled in (`nr_spares` of them, never past the table).
pub fn spare_devices(d: &GraidDetail) -> &[graid_abi::GraidMember] {
    &d.spares[..(d.nr_spares as usize).min(GRAID_MAX_SPARES)]
}

/// Every running array, as `detail` shows it.
pub fn running_views(
    ctl: &dyn ControlDevice,
    sys: &dyn System,
) -> Result<Vec<ArrayView>, CtlError> {
    let exports = sys.exports();
    Ok(running_arrays(ctl)?
        .iter()
        .map(|d| ArrayView {
            reshape: crate::grow_members::reshape_view(ctl, d.index),
            ..ArrayView::with_exports(d, sys, &exports)
        })
        .collect())
}

pub fn export_text(d: &GraidDetail) -> String {
    let uuid = uuid::format(&d.uuid);
    format!(
        "GRAID_NAME={}\nGRAID_UUID={uuid}\nGRAID_LEVEL=raid{}\nGRAID_UUID_HEX={}\n",
        name_str(&d.name),
        d.level,
        uuid::hex(&uuid)
    )
}

/// One running array, as `detail`, `list` and `--json` show it.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct ArrayView {
    pub device: String,
    pub index: u32,
    pub name: String,
    /// The host the array belongs to (create --homehost); empty: none.
    pub homehost: String,
    pub uuid: String,
    pub level: String,
    /// Chunk size; 0 for RAID 1.
    pub chunk_sectors: u32,
    pub chunk_bytes: u64,
    /// The member count (md's "Raid Devices"): roles, with a device or not.
    pub raid_devices: u32,
    /// Each member's data area (md's "Used Dev Size"), bytes.
    pub member_data_bytes: u64,
    pub size_sectors: u64,
    pub size_bytes: u64,
    pub state: String,
    /// The copies are not known to be in sync: a resync runs (or waits), and reads of what it
    /// has not reached use one copy.
    pub resync_pending: bool,
    /// A parity helper was caught lying: the resync rewrites the parity of every region a
    /// helper computed unchecked, and no member may be failed until it ends.
    pub parity_heal: bool,
    /// The array is marked dirty: its superblocks say "not clean" while writes may be in
    /// flight (md's "active"); marked clean after a quiet period.
    pub dirty: bool,
    pub events: u64,
    pub open_count: u32,
    /// The rebuild under way, if any.
    pub rebuild: Option<RebuildView>,
    /// Sectors rebuilt since the array started (a rate over two looks).
    pub rebuilt_sectors: u64,
    /// Member sectors a re-added member's rebuild skipped since the array started: the
    /// bitmap showed no write there while it was away.
    pub rebuild_skipped_sectors: u64,
    /// The check or repair under way, if any.
    pub scrub: Option<ScrubView>,
    /// Mismatched 512-byte sectors found by the running or last check or repair.
    pub mismatch_sectors: u64,
    /// 4 KiB blocks the running or last check, repair or resync could not read: each
    /// rewritten from the other copies or the parity (the members' `corrected`), or it stopped
    /// there.
    pub scrub_read_errors: u64,
    /// The last check, repair or resync stopped before its end, this far (percent): a window
    /// there could not be made consistent (a member failed its rewrite, or some data has no
    /// readable copy). None if it did not.
    pub scrub_stopped_percent: Option<f64>,
    pub members: Vec<MemberView>,
    /// Devices waiting to take a failed member's place.
    pub spares: Vec<SpareView>,
    /// The replace under way (`graidctl replace`), if any.
    pub replace: Option<ReplaceView>,
    /// RAID 5/6: the partial parity log, if the array has one (what closes the write hole).
    pub ppl: Option<PplView>,
    /// The write-intent bitmap, if the array has one (after the members: scripts that cut the
    /// members' objects out of the JSON at the first brace keep working).
    pub bitmap: Option<BitmapView>,
    /// Its NVMe-oF exports (the kernel's target serving it), `graidctl export`'s or others'.
    pub exports: Vec<crate::nvmet::Export>,
    /// The restripe under way, for a look's readers (the monitor, metrics); `detail --json`
    /// adds its own `reshape` (a separate ioctl), so it is not serialized here.
    #[serde(skip)]
    pub reshape: Option<crate::grow_members::ReshapeView>,
}

/// The partial parity log, as `detail` shows it: what it wrote since the array started.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct PplView {
    /// Partial-stripe writes logged.
    pub entries: u64,
    /// Full-stripe writes over logged stripes (a header each).
    pub barriers: u64,
    /// Times the log was emptied (a ring full, the array clean, a device joining).
    pub wraps: u64,
}

/// The write-intent bitmap, as `detail` shows it.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct BitmapView {
    /// What one bit covers: array space on RAID 1/10, member space on RAID 5/6.
    pub chunk_bytes: u64,
    pub regions: u64,
    /// Regions whose bit is set now: written lately (or not yet resynced).
    pub dirty_regions: u64,
}

/// A replace, as `detail` shows it.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct ReplaceView {
    /// The member being replaced.
    pub role: u32,
    /// The replacement's device: `/dev/NAME`, or null when it has no device node.
    pub device: Option<String>,
    pub major: u32,
    pub minor: u32,
    /// `copying`, `swapping` (about to take the member's place), `failed` (being released)
    /// or `abandoned` (the member failed; going back to the spares).
    pub state: String,
    /// Sectors copied, of `total_sectors`.
    pub done_sectors: u64,
    pub total_sectors: u64,
    pub percent: f64,
    /// Its speed over the last second or so, KiB/s (0: not measured yet).
    pub rate_kibs: u32,
    /// Seconds left at that speed (null: not measured yet).
    pub seconds_left: Option<u64>,
}

impl ReplaceView {
    fn new(d: &GraidDetail, sys: &dyn System) -> Option<Self> {
        if d.replace_role == GRAID_ROLE_NONE {
            return None;
        }
        let rdev = Rdev::from(d.replace_dev);
        let total = d.member_data_sectors.max(1);
        let done = d.replace_copied.min(total);
        Some(Self {
            role: d.replace_role,
            device: sys.dev_path(rdev),
            major: rdev.major,
            minor: rdev.minor,
            state: match d.replace_state {
                GRAID_REPLACE_COPYING => "copying".to_owned(),
                GRAID_REPLACE_SWAPPING => "swapping".to_owned(),
                GRAID_REPLACE_FAILED => "failed".to_owned(),
                GRAID_REPLACE_ABANDONED => "abandoned".to_owned(),
                other => format!("unknown ({other})"),
            },
            done_sectors: done,
            total_sectors: d.member_data_sectors,
            percent: percent(done, total),
            rate_kibs: d.rate_kibs,
            seconds_left: seconds_left(d.member_data_sectors.saturating_sub(done), d.rate_kibs),
        })
    }

    /// The replacement's path, or `major:minor` without a node.
    pub fn device_text(&self) -> String {
        self.device
            .clone()
            .unwrap_or_else(|| format!("{}:{}", self.major, self.minor))
    }
}

/// `done` of `total` in percent, rounded down to a tenth.
fn percent(done: u64, total: u64) -> f64 {
    (done.min(total) as f64 * 1000.0 / total.max(1) as f64).floor() / 10.0
}

/// A spare of a running array.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct SpareView {
    /// `/dev/NAME`, or null when it has no device node.
    pub device: Option<String>,
    pub major: u32,
    pub minor: u32,
}

impl SpareView {
    /// Its path, or `major:minor` without a node.
    fn text(&self) -> String {
        self.device
            .clone()
            .unwrap_or_else(|| format!("{}:{}", self.major, self.minor))
    }
}

/// A check or repair, as `detail` shows it.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct ScrubView {
    /// `check` or `repair`.
    pub action: String,
    /// Sectors scrubbed of `total_sectors` (the array's on RAID 1/10, a member's on 5/6).
    pub done_sectors: u64,
    pub total_sectors: u64,
    pub percent: f64,
    /// Its speed over the last second or so, KiB/s (0: not measured yet).
    pub rate_kibs: u32,
    /// Seconds left at that speed (null: not measured yet).
    pub seconds_left: Option<u64>,
}

/// A member's rebuild, as `detail` shows it.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct RebuildView {
    pub role: u32,
    /// Sectors of its data area in sync, of `total_sectors`.
    pub done_sectors: u64,
    pub total_sectors: u64,
    pub percent: f64,
    /// Its speed over the last second or so, KiB/s (0: not measured yet).
    pub rate_kibs: u32,
    /// Seconds left at that speed (null: not measured yet).
    pub seconds_left: Option<u64>,
    /// It stopped: some data has no readable copy.
    pub stalled: bool,
}

/// Seconds to do `sectors` more at `kibs` KiB/s; `None` at 0.
fn seconds_left(sectors: u64, kibs: u32) -> Option<u64> {
    (kibs > 0).then(|| (sectors / 2).div_ceil(u64::from(kibs)))
}

/// `, 96.0 MiB/s, 1m12s left`, or empty when not measured yet.
pub fn speed_text(kibs: u32, seconds_left: Option<u64>) -> String {
    let Some(left) = seconds_left else {
        return String::new();
    };
    let left = if left >= 60 {
        format!("{}m{:02}s", left / 60, left % 60)
    } else {
        format!("{left}s")
    };
    format!(", {}/s, {left} left", format_sectors(u64::from(kibs) * 2))
}

/// One member of a running array.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct MemberView {
    pub role: u32,
    /// `/dev/NAME`, or null when the member is missing or has no device node.
    pub device: Option<String>,
    pub major: u32,
    pub minor: u32,
    pub state: String,
    pub reads: u64,
    pub writes: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub errors: u64,
    /// Read errors repaired from another copy.
    pub corrected: u64,
}

impl MemberView {
    fn new(m: &GraidMemberDetail, sys: &dyn System) -> Self {
        let rdev = Rdev::from(m.dev);
        let present = m.state != GRAID_MEMBER_MISSING && rdev != Rdev { major: 0, minor: 0 };
        Self {
            role: m.role,
            device: if present { sys.dev_path(rdev) } else { None },
            major: rdev.major,
            minor: rdev.minor,
            state: member_state_name(m.state),
            reads: m.reads,
            writes: m.writes,
            read_bytes: m.read_bytes,
            write_bytes: m.write_bytes,
            errors: m.errors,
            corrected: m.corrected,
        }
    }

    /// Its device number as the module reports it.
    pub fn rdev(&self) -> Rdev {
        Rdev {
            major: self.major,
            minor: self.minor,
        }
    }

    /// The device column: path, `major:minor` without a node, `-` when missing.
    fn device_text(&self) -> String {
        match &self.device {
            Some(path) => path.clone(),
            None if self.state == "missing" => "-".to_owned(),
            None => format!("{}:{}", self.major, self.minor),
        }
    }
}

/// Why a check, repair or resync stops before its end (DETAIL's `GRAID_DETAIL_SCRUB_STALLED`).
pub const SCRUB_STOPPED: &str = "a window could not be made consistent (a member failed its \
     rewrite, or some data has no readable copy; the kernel log says which)";

impl ArrayView {
    pub fn new(d: &GraidDetail, sys: &dyn System) -> Self {
        Self::with_exports(d, sys, &sys.exports())
    }

    /// [`Self::new`] with what nvmet exports read already (once for every array of a look).
    fn with_exports(d: &GraidDetail, sys: &dyn System, exports: &[crate::nvmet::Export]) -> Self {
        let members = present_members(d);
        let device = array_device(d.index);
        Self {
            reshape: None,
            exports: exports
                .iter()
                .filter(|e| e.device == device)
                .cloned()
                .collect(),
            device,
            index: d.index,
            name: name_str(&d.name),
            homehost: name_str(&d.homehost),
            uuid: uuid::format(&d.uuid),
            level: level_name(d.level),
            chunk_sectors: d.chunk_sectors,
            chunk_bytes: u64::from(d.chunk_sectors) * SECTOR_BYTES,
            raid_devices: d.nr_members,
            member_data_bytes: d.member_data_sectors.saturating_mul(SECTOR_BYTES),
            size_sectors: d.size_sectors,
            size_bytes: d.size_sectors.saturating_mul(SECTOR_BYTES),
            state: array_state_name(d.state),
            resync_pending: d.flags & GRAID_DETAIL_RESYNC_PENDING != 0,
            parity_heal: d.flags & GRAID_DETAIL_PARITY_HEAL != 0,
            dirty: d.flags & GRAID_DETAIL_DIRTY != 0,
            events: d.events,
            open_count: d.open_count,
            rebuilt_sectors: d.rebuilt_sectors,
            rebuild_skipped_sectors: d.rebuild_skipped_sectors,
            ppl: (d.flags & GRAID_DETAIL_PPL != 0).then_some(PplView {
                entries: d.ppl_entries,
                barriers: d.ppl_barriers,
                wraps: d.ppl_wraps,
            }),
            bitmap: (d.bitmap_region_sectors != 0).then(|| BitmapView {
                chunk_bytes: d.bitmap_region_sectors.saturating_mul(SECTOR_BYTES),
                regions: d.bitmap_regions,
                dirty_regions: d.bitmap_dirty,
            }),
            scrub: match d.scrub_action {
                GRAID_SCRUB_CHECK | GRAID_SCRUB_REPAIR | GRAID_SCRUB_RESYNC => Some(ScrubView {
                    action: match d.scrub_action {
                        GRAID_SCRUB_CHECK => "check",
                        GRAID_SCRUB_REPAIR => "repair",
                        _ => "resync",
                    }
                    .to_owned(),
                    done_sectors: d.scrub_done,
                    total_sectors: d.scrub_total,
                    percent: (d.scrub_done.min(d.scrub_total) as f64 * 1000.0
                        / d.scrub_total.max(1) as f64)
                        .floor()
                        / 10.0,
                    rate_kibs: d.rate_kibs,
                    seconds_left: seconds_left(
                        d.scrub_total.saturating_sub(d.scrub_done),
                        d.rate_kibs,
                    ),
                }),
                _ => None,
            },
            mismatch_sectors: d.mismatch_sectors,
            scrub_read_errors: d.scrub_read_errors,
            scrub_stopped_percent: (d.flags & GRAID_DETAIL_SCRUB_STALLED != 0).then(|| {
                (d.scrub_done.min(d.scrub_total) as f64 * 1000.0 / d.scrub_total.max(1) as f64)
                    .floor()
                    / 10.0
            }),
            rebuild: members
                .iter()
                .find(|m| m.state == GRAID_MEMBER_REBUILDING)
                .map(|m| {
                    let total = d.member_data_sectors.max(1);
                    let done = m.recovery_offset.min(total);
                    RebuildView {
                        role: m.role,
                        done_sectors: done,
                        total_sectors: d.member_data_sectors,
                        percent: (done as f64 * 1000.0 / total as f64).floor() / 10.0,
                        rate_kibs: d.rate_kibs,
                        seconds_left: seconds_left(
                            d.member_data_sectors.saturating_sub(done),
                            d.rate_kibs,
                        ),
                        stalled: d.flags & GRAID_DETAIL_REBUILD_STALLED != 0,
                    }
                }),
            members: members.iter().map(|m| MemberView::new(m, sys)).collect(),
            spares: spare_devices(d)
                .iter()
                .map(|&s| SpareView {
                    device: sys.dev_path(Rdev::from(s)),
                    major: s.major,
                    minor: s.minor,
                })
                .collect(),
            replace: ReplaceView::new(d, sys),
        }
    }

    /// The replace for people: `role 1 by /dev/nvme4n1: copying 42.5% (…), 96 MiB/s, 8s left`,
    /// or empty.
    pub fn replace_text(&self) -> String {
        match &self.replace {
            Some(r) => format!(
                "role {} by {}: {} {:.1}% ({} of {}){}",
                r.role,
                r.device_text(),
                r.state,
                r.percent,
                format_sectors(r.done_sectors),
                format_sectors(r.total_sectors),
                speed_text(r.rate_kibs, r.seconds_left)
            ),
            None => String::new(),
        }
    }

    /// `/dev/graid0 (data)`, for messages.
    pub fn label(&self) -> String {
        if self.name.is_empty() {
            self.device.clone()
        } else {
            format!("{} ({})", self.device, self.name)
        }
    }

    /// Active members over all members, e.g. `3/4`.
    pub fn members_summary(&self) -> String {
        let active = self.members.iter().filter(|m| m.state == "active").count();
        format!("{active}/{}", self.members.len())
    }

    /// Chunk size for people: `512 KiB`, or `-` for RAID 1.
    pub fn chunk_text(&self) -> String {
        if self.chunk_sectors == 0 {
            "-".to_owned()
        } else {
            format_sectors(u64::from(self.chunk_sectors))
        }
    }

    /// Whether the copies are known to match, for people.
    pub fn sync_text(&self) -> &'static str {
        if self.parity_heal {
            "healing: a resync rewrites the parity a helper caught lying may have computed \
             (no member may be failed until it ends)"
        } else if self.resync_pending {
            "resync pending (reads use one copy until it passes)"
        } else {
            "in sync"
        }
    }

    /// Whether writes may be in flight, for people (md's "active" and "clean").
    pub fn marked_text(&self) -> &'static str {
        if self.dirty {
            "dirty (writing; a crash now means a resync)"
        } else {
            "clean"
        }
    }

    /// The bitmap for people: `internal, 64 MiB chunks, 2 of 24 dirty`; `none` (empty for
    /// RAID 0, which never has one).
    pub fn bitmap_text(&self) -> String {
        match &self.bitmap {
            Some(b) => format!(
                "internal, {} chunks, {} of {} dirty",
                crate::size::format_bytes(b.chunk_bytes),
                b.dirty_regions,
                b.regions
            ),
            None if self.level == "raid0" => String::new(),
            None => "none".to_owned(),
        }
    }

    /// The write hole for people, RAID 5/6 only (empty otherwise: the line is left out).
    pub fn write_hole_text(&self) -> String {
        match &self.ppl {
            Some(p) => format!(
                "closed by the partial parity log ({} entries, {} barriers, {} wraps)",
                p.entries, p.barriers, p.wraps
            ),
            None if matches!(self.level.as_str(), "raid5" | "raid6") => {
                "open: no partial parity log (after a crash it does not start degraded)".to_owned()
            }
            None => String::new(),
        }
    }

    /// Its NVMe-oF exports for people: `NQN over tcp 10.0.0.1:4420 to HOSTNQN, ...`, one
    /// per line, or empty (the line is then left out).
    pub fn exports_text(&self) -> String {
        let lines: Vec<String> = self
            .exports
            .iter()
            .map(|e| {
                let at: Vec<String> = e.listeners.iter().map(|l| l.text()).collect();
                let at = if at.is_empty() {
                    "no port".to_owned()
                } else {
                    at.join(", ")
                };
                let to = if e.allow_any_host {
                    "any host".to_owned()
                } else {
                    e.hosts.join(", ")
                };
                let off = if e.enabled {
                    ""
                } else {
                    " (namespace disabled)"
                };
                format!("{} over {at} to {to}{off}", e.nqn)
            })
            .collect();
        lines.join(&format!("\n{:17}", ""))
    }

    /// The rebuild for people: `42.5% of role 1 (…)`, or empty (the line is then left out).
    pub fn rebuild_text(&self) -> String {
        match &self.rebuild {
            Some(r) => format!(
                "{:.1}% of role {} ({} of {}){}{}{}",
                r.percent,
                r.role,
                format_sectors(r.done_sectors),
                format_sectors(r.total_sectors),
                if self.rebuild_skipped_sectors > 0 {
                    format!(
                        ", {} skipped by the bitmap",
                        format_sectors(self.rebuild_skipped_sectors)
                    )
                } else {
                    String::new()
                },
                speed_text(r.rate_kibs, r.seconds_left),
                if r.stalled {
                    ", stopped: some data has no readable copy"
                } else {
                    ""
                }
            ),
            None => String::new(),
        }
    }

    /// The check, repair or resync for people: `check 40.0% (3 mismatched sectors so far)`,
    /// where the last one stopped before its end, or empty.
    pub fn scrub_text(&self) -> String {
        match (&self.scrub, self.scrub_stopped_percent) {
            (Some(s), _) => format!(
                "{} {:.1}% ({} mismatched sectors so far){}",
                s.action,
                s.percent,
                self.mismatch_sectors,
                speed_text(s.rate_kibs, s.seconds_left)
            ),
            (None, Some(percent)) => format!("stopped at {percent:.1}%: {SCRUB_STOPPED}"),
            (None, None) => String::new(),
        }
    }

    /// The scrub's unreadable blocks for people, or empty.
    pub fn scrub_read_errors_text(&self) -> String {
        match self.scrub_read_errors {
            0 => String::new(),
            n => format!(
                "{n} block{} of 4 KiB (last check, repair or resync: each rewritten from the \
                 others, or it stopped there)",
                if n == 1 { "" } else { "s" }
            ),
        }
    }

    /// The `detail` report.
    pub fn detail_text(&self) -> String {
        let count = |state: &str| self.members.iter().filter(|m| m.state == state).count();
        let fields = [
            ("Name", self.name.clone()),
            (
                "Home Host",
                if self.homehost.is_empty() {
                    "none".to_owned()
                } else {
                    self.homehost.clone()
                },
            ),
            ("UUID", self.uuid.clone()),
            ("RAID Level", self.level.clone()),
            ("Chunk Size", self.chunk_text()),
            (
                "Array Size",
                format!(
                    "{} ({} sectors)",
                    format_sectors(self.size_sectors),
                    self.size_sectors
                ),
            ),
            ("State", self.state.clone()),
            ("Sync", self.sync_text().to_owned()),
            ("Marked", self.marked_text().to_owned()),
            ("Bitmap", self.bitmap_text()),
            ("Write Hole", self.write_hole_text()),
            ("Rebuild", self.rebuild_text()),
            ("Replace", self.replace_text()),
            ("Scrub", self.scrub_text()),
            ("Unreadable", self.scrub_read_errors_text()),
            (
                "Mismatches",
                if self.mismatch_sectors > 0 {
                    format!(
                        "{} sectors (last check, repair or resync)",
                        self.mismatch_sectors
                    )
                } else {
                    String::new()
                },
            ),
            ("Events", self.events.to_string()),
            ("Open Count", self.open_count.to_string()),
            ("Exported", self.exports_text()),
            (
                "Members",
                format!(
                    "{} ({} active, {} rebuilding, {} faulty, {} missing)",
                    self.members.len(),
                    count("active"),
                    count("rebuilding"),
                    count("faulty"),
                    count("missing")
                ),
            ),
            (
                "Spares",
                self.spares
                    .iter()
                    .map(SpareView::text)
                    .collect::<Vec<_>>()
                    .join(", "),
            ),
        ];
        let mut out = format!("{}:\n", self.device);
        for (key, value) in fields {
            if value.is_empty() {
                continue;
            }
            let line = format!("{key:>14} : {value}");
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out.push('\n');
        let mut table = Table::new(&[
            ("ROLE", Align::Right),
            ("DEVICE", Align::Left),
            ("STATE", Align::Left),
            ("READS", Align::Right),
            ("WRITES", Align::Right),
            ("READ", Align::Right),
            ("WRITTEN", Align::Right),
            ("ERRORS", Align::Right),
            ("CORRECTED", Align::Right),
        ]);
        for m in &self.members {
            table.row(vec![
                m.role.to_string(),
                m.device_text(),
                m.state.clone(),
                m.reads.to_string(),
                m.writes.to_string(),
                crate::size::format_bytes(m.read_bytes),
                crate::size::format_bytes(m.write_bytes),
                m.errors.to_string(),
                m.corrected.to_string(),
            ]);
        }
        out.push_str(&table.render());
        out
    }
}

/// Column alignment in a [`Table`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Align {
    Left,
    Right,
}

/// A plain-text table: a header line, then one line per row, columns two spaces apart.
pub struct Table {
    columns: Vec<(&'static str, Align)>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(columns: &[(&'static str, Align)]) -> Self {
        Self {
            columns: columns.to_vec(),
            rows: Vec::new(),
        }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        assert_eq!(cells.len(), self.columns.len(), "table row width");
        self.rows.push(cells);
    }

    pub fn render(&self) -> String {
        let width = |i: usize| {
            self.rows
                .iter()
                .map(|r| r[i].chars().count())
                .chain([self.columns[i].0.len()])
                .max()
                .unwrap_or(0)
        };
        let widths: Vec<usize> = (0..self.columns.len()).map(width).collect();
        let header: Vec<String> = self.columns.iter().map(|(h, _)| (*h).to_owned()).collect();
        let mut out = String::new();
        for cells in std::iter::once(&header).chain(&self.rows) {
            let mut line = String::new();
            for (i, cell) in cells.iter().enumerate() {
                if i > 0 {
                    line.push_str("  ");
                }
                let pad = widths[i] - cell.chars().count();
                match self.columns[i].1 {
                    Align::Left => {
                        line.push_str(cell);
                        line.push_str(&" ".repeat(pad));
                    }
                    Align::Right => {
                        line.push_str(&" ".repeat(pad));
                        line.push_str(cell);
                    }
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_aligns_columns() {
        let mut t = Table::new(&[("A", Align::Left), ("NUMBER", Align::Right)]);
        t.row(vec!["long-name".into(), "7".into()]);
        t.row(vec!["x".into(), "123456789".into()]);
        assert_eq!(
            t.render(),
            "A             NUMBER\nlong-name          7\nx          123456789\n"
        );
    }

    #[test]
    fn names_stop_at_nul_and_unknown_values_are_shown() {
        assert_eq!(name_str(b"data\0\0\0"), "data");
        assert_eq!(name_str(b"full"), "full");
        assert_eq!(level_name(10), "raid10");
        assert_eq!(level_name(6), "raid6");
        assert_eq!(level_name(4), "level 4");
        assert_eq!(array_state_name(9), "unknown (9)");
        assert_eq!(member_state_name(GRAID_MEMBER_FAULTY), "faulty");
    }
}
