//! `graidctl examine MEMBER` and `graidctl zero-superblock MEMBER`: a member's superblock,
//! read and cleared directly, without the module.

use crate::error::CtlError;
use crate::member::System;
use crate::output::{json, Align, Table};
use crate::sbio::{zero_superblock, Found, Zeroed, SUPERBLOCK_OFFSET};
use crate::size::format_sectors;
use crate::uuid;
use graid_engine::superblock::{decode, Area, Slot, Superblock, FORMAT_VERSION, RECOVERY_COMPLETE};
use serde::Serialize;
use std::path::Path;

/// A reserved area in the JSON output.
#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct AreaView {
    pub offset: u64,
    pub sectors: u64,
}

/// One non-empty slot-table entry.
#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct SlotView {
    pub slot: usize,
    /// `active`, `spare` or `faulty`.
    pub state: &'static str,
    /// The role of an active slot.
    pub role: Option<u8>,
}

/// Everything a superblock says, for `examine`.
#[derive(Debug, Serialize)]
pub struct ExamineView {
    pub device: String,
    pub version: u32,
    pub array_uuid: String,
    pub name: String,
    /// The host the array belongs to; empty: none.
    pub homehost: String,
    /// Seconds since the epoch.
    pub created: u64,
    pub events: u64,
    pub clean: bool,
    /// Where a pending resync goes on (array sectors on RAID 1/10, member sectors on 5/6);
    /// null when none is pending.
    pub resync_offset: Option<u64>,
    pub level: String,
    pub layout: u32,
    pub chunk_sectors: u32,
    pub members: u32,
    /// Array size the superblock implies, in sectors.
    pub array_sectors: u64,
    pub member_uuid: String,
    pub this_slot: u32,
    /// What this device's slot says: `active`, `spare` or `faulty`.
    pub this_state: &'static str,
    pub this_role: Option<u8>,
    pub data_offset: u64,
    pub data_size: u64,
    /// Sectors of the data area in sync; null when all are.
    pub recovery_offset: Option<u64>,
    pub bitmap: Option<AreaView>,
    /// The write-intent bitmap's chunk (what one bit covers), if the area holds one.
    pub bitmap_chunk_bytes: Option<u64>,
    /// Events of the newest update written while every member was in sync: a former member
    /// at least this new comes back rebuilding only what the bitmap marks.
    pub bitmap_events: Option<u64>,
    pub journal: Option<AreaView>,
    /// The journal area holds a partial parity log (RAID 5/6: the write hole is closed).
    pub ppl: bool,
    pub features_compat: u64,
    pub features_incompat: u64,
    pub slots: Vec<SlotView>,
    /// A reshape in progress (null: none).
    pub reshape: Option<ReshapeView>,
}

/// A reshape in progress, as a superblock records it.
#[derive(Debug, Serialize)]
pub struct ReshapeView {
    /// Array sector up to which (forwards) or from which (backwards) the data is moved.
    pub position: u64,
    pub direction: &'static str,
    pub new_level: String,
    pub new_layout: u32,
    pub new_chunk_sectors: u32,
    pub new_members: u32,
    pub new_data_offset: u64,
}

fn slot_state(slot: Slot) -> (&'static str, Option<u8>) {
    match slot {
        Slot::Empty => ("empty", None),
        Slot::Active { role } => ("active", Some(role)),
        Slot::Spare => ("spare", None),
        Slot::Faulty => ("faulty", None),
    }
}

fn area(a: Area) -> Option<AreaView> {
    (a.sectors != 0).then_some(AreaView {
        offset: a.offset,
        sectors: a.sectors,
    })
}

impl ExamineView {
    pub fn new(device: &str, sb: &Superblock) -> Self {
        let (this_state, this_role) = slot_state(sb.this_slot_entry().unwrap_or(Slot::Empty));
        Self {
            device: device.to_owned(),
            version: FORMAT_VERSION,
            array_uuid: uuid::format(&sb.array_uuid),
            name: sb.array_name.as_str().to_owned(),
            homehost: sb.homehost.as_str().to_owned(),
            created: sb.created,
            events: sb.events,
            clean: sb.clean,
            resync_offset: (sb.resync_offset != RECOVERY_COMPLETE).then_some(sb.resync_offset),
            level: sb.level.to_string(),
            layout: sb.level.layout(),
            chunk_sectors: sb.chunk_sectors,
            members: sb.members,
            // decode() validated the geometry.
            array_sectors: sb.geometry().map_or(0, |g| g.array_sectors()),
            member_uuid: uuid::format(&sb.member_uuid),
            this_slot: sb.this_slot,
            this_state,
            this_role,
            data_offset: sb.data_offset,
            data_size: sb.data_size,
            recovery_offset: (sb.recovery_offset != RECOVERY_COMPLETE)
                .then_some(sb.recovery_offset),
            bitmap: area(sb.bitmap),
            bitmap_chunk_bytes: (sb.bitmap_region != 0).then(|| sb.bitmap_region * 512),
            bitmap_events: (sb.bitmap_region != 0).then_some(sb.bitmap_events),
            journal: area(sb.journal),
            ppl: sb.ppl,
            features_compat: sb.features_compat,
            features_incompat: sb.features_incompat,
            slots: sb
                .slots
                .iter()
                .enumerate()
                .filter(|(_, s)| **s != Slot::Empty)
                .map(|(slot, s)| {
                    let (state, role) = slot_state(*s);
                    SlotView { slot, state, role }
                })
                .collect(),
            reshape: sb.reshape.map(|r| ReshapeView {
                position: r.position,
                direction: if r.backwards { "backwards" } else { "forwards" },
                new_level: r.new_level.to_string(),
                new_layout: r.new_level.layout(),
                new_chunk_sectors: r.new_chunk_sectors,
                new_members: r.new_members,
                new_data_offset: r.new_data_offset,
            }),
        }
    }

    pub fn text(&self) -> String {
        let sectors = |n: u64| format!("{n} sectors ({})", format_sectors(n));
        let area_text = |a: &Option<AreaView>| match a {
            Some(a) => format!("{} at sector {}", sectors(a.sectors), a.offset),
            None => "none".to_owned(),
        };
        let role = match (self.this_state, self.this_role) {
            ("active", Some(role)) => format!("active, role {role}"),
            (state, _) => state.to_owned(),
        };
        let fields = [
            ("Version", self.version.to_string()),
            ("Array UUID", self.array_uuid.clone()),
            ("Name", self.name.clone()),
            (
                "Home Host",
                if self.homehost.is_empty() {
                    "none (any host starts it)".to_owned()
                } else {
                    self.homehost.clone()
                },
            ),
            (
                "Created",
                format!("{} ({})", utc(self.created), self.created),
            ),
            ("RAID Level", self.level.clone()),
            ("Layout", format!("{:#x}", self.layout)),
            (
                "Chunk Size",
                if self.chunk_sectors == 0 {
                    "-".to_owned()
                } else {
                    format_sectors(u64::from(self.chunk_sectors))
                },
            ),
            ("Members", self.members.to_string()),
            ("Array Size", sectors(self.array_sectors)),
            (
                "State",
                match (self.clean, self.resync_offset) {
                    (false, _) => "dirty (resync needed)".to_owned(),
                    (true, None) => "clean".to_owned(),
                    (true, Some(at)) => format!("clean, resync pending from sector {at}"),
                },
            ),
            ("Events", self.events.to_string()),
            ("Member UUID", self.member_uuid.clone()),
            ("Device Slot", self.this_slot.to_string()),
            ("Device Role", role),
            ("Data Offset", sectors(self.data_offset)),
            ("Data Size", sectors(self.data_size)),
            (
                "Recovery Offset",
                self.recovery_offset
                    .map_or("complete".to_owned(), |r| format!("{r} sectors in sync")),
            ),
            (
                "Bitmap",
                match (self.bitmap_chunk_bytes, self.bitmap_events) {
                    (Some(chunk), Some(events)) => format!(
                        "internal, {} chunks, {}; all in sync at event {events}",
                        format_sectors(chunk / 512),
                        area_text(&self.bitmap)
                    ),
                    _ => area_text(&self.bitmap),
                },
            ),
            (
                "Journal",
                if self.ppl {
                    format!("partial parity log, {}", area_text(&self.journal))
                } else {
                    area_text(&self.journal)
                },
            ),
            (
                "Reshape",
                match &self.reshape {
                    None => "none".to_owned(),
                    Some(r) => format!(
                        "{} at sector {}, to {} of {} members, {} chunks, data at sector {} (this \
                         graidctl cannot continue it)",
                        r.direction,
                        r.position,
                        r.new_level,
                        r.new_members,
                        format_sectors(u64::from(r.new_chunk_sectors)),
                        r.new_data_offset
                    ),
                },
            ),
            (
                "Features",
                format!(
                    "compat {:#x}, incompat {:#x}",
                    self.features_compat, self.features_incompat
                ),
            ),
        ];
        let mut out = format!("{}:\n", self.device);
        for (key, value) in fields {
            // Only while one is in progress, as md's "Reshape pos'n".
            if key == "Reshape" && self.reshape.is_none() {
                continue;
            }
            out.push_str(&format!("{key:>15} : {value}\n"));
        }
        out.push('\n');
        let mut table = Table::new(&[
            ("SLOT", Align::Right),
            ("STATE", Align::Left),
            ("ROLE", Align::Right),
        ]);
        for s in &self.slots {
            table.row(vec![
                s.slot.to_string(),
                s.state.to_owned(),
                s.role.map_or("-".to_owned(), |r| r.to_string()),
            ]);
        }
        out.push_str(&table.render());
        out
    }
}

/// `YYYY-MM-DD HH:MM:SS UTC` for seconds since the epoch (proleptic Gregorian calendar).
pub fn utc(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Days to civil date (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

pub fn examine(sys: &dyn System, member: &str, json_out: bool) -> Result<String, CtlError> {
    let block = sys
        .read_superblock(member)
        .map_err(|e| CtlError::io(format!("reading {member}"), e))?;
    let sb = decode(&block[..]).map_err(|e| CtlError::Failed(format!("{member}: {e}")))?;
    let view = ExamineView::new(member, &sb);
    Ok(if json_out { json(&view) } else { view.text() })
}

/// `examine --export`: udev properties for a member, named as blkid names a filesystem's (so
/// `lsblk -f` and udev rules see `graid_member`), plus graid's own for the assembly rules. A
/// device with no graid superblock (or a damaged one) prints nothing: the rules run this for
/// every block device, and most are no member.
pub fn export(sys: &dyn System, member: &str) -> Result<String, CtlError> {
    let block = sys
        .read_superblock(member)
        .map_err(|e| CtlError::io(format!("reading {member}"), e))?;
    let Ok(sb) = decode(&block[..]) else {
        return Ok(String::new());
    };
    let array_uuid = uuid::format(&sb.array_uuid);
    let name = udev_safe(sb.array_name.as_str());
    // lsblk reads the _ENC forms (blkid's udev export has both).
    Ok(format!(
        "ID_FS_TYPE=graid_member\nID_FS_USAGE=raid\nID_FS_UUID={array_uuid}\n\
         ID_FS_UUID_ENC={array_uuid}\nID_FS_UUID_SUB={}\nID_FS_LABEL={name}\n\
         ID_FS_LABEL_ENC={}\nGRAID_MEMBER_ARRAY_UUID={array_uuid}\n\
         GRAID_MEMBER_NAME={name}\nGRAID_MEMBER_EVENTS={}\nGRAID_MEMBER_HOMEHOST={}\n",
        uuid::format(&sb.member_uuid),
        udev_encode(sb.array_name.as_str()),
        sb.events,
        udev_safe(sb.homehost.as_str())
    ))
}

/// A name as blkid's `_ENC` properties carry it (`blkid_encode_string`): ASCII letters,
/// digits, `#+-.:=@_` and multibyte UTF-8 as they are, every other byte as `\xHH`.
fn udev_encode(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        if c.is_ascii_alphanumeric() || "#+-.:=@_".contains(c) || !c.is_ascii() {
            out.push(c);
        } else {
            out.push_str(&format!("\\x{:02x}", c as u32));
        }
    }
    out
}

/// A name as one udev property value: characters udev's import would misread (quotes,
/// backslashes, whitespace) become `_`, as blkid's safe encoding does.
fn udev_safe(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_whitespace() || matches!(c, '"' | '\'' | '\\' | '`' | '$') {
                '_'
            } else {
                c
            }
        })
        .collect()
}

#[derive(Serialize)]
struct ZeroReport<'a> {
    device: &'a str,
    /// Whether anything was written.
    zeroed: bool,
    /// What the block held: `graid`, `damaged` (a graid superblock that does not decode),
    /// `other` (zeroed with --force) or `zero`.
    found: &'static str,
    name: Option<String>,
    array_uuid: Option<String>,
    /// Why a damaged or other block is not a valid graid superblock.
    reason: Option<String>,
}

pub fn zero(member: &str, force: bool, json_out: bool) -> Result<String, CtlError> {
    let outcome = zero_superblock(Path::new(member), force)?;
    let mut report = ZeroReport {
        device: member,
        zeroed: true,
        found: "zero",
        name: None,
        array_uuid: None,
        reason: None,
    };
    let text = match &outcome {
        Zeroed::AlreadyZero => {
            report.zeroed = false;
            format!(
                "graidctl: {member} has no superblock (the block is all zeroes); nothing written\n"
            )
        }
        Zeroed::Zeroed(Found::Graid(sb)) => {
            report.found = "graid";
            report.name = Some(sb.array_name.as_str().to_owned());
            report.array_uuid = Some(uuid::format(&sb.array_uuid));
            format!(
                "graidctl: zeroed the superblock of array '{}' ({}) on {member}\n",
                sb.array_name.as_str(),
                uuid::format(&sb.array_uuid)
            )
        }
        Zeroed::Zeroed(Found::Damaged(e)) => {
            report.found = "damaged";
            report.reason = Some(e.to_string());
            format!("graidctl: zeroed a damaged graid superblock ({e}) on {member}\n")
        }
        Zeroed::Zeroed(Found::Other(e)) => {
            report.found = "other";
            report.reason = Some(e.to_string());
            format!(
                "graidctl: zeroed 4 KiB at byte {SUPERBLOCK_OFFSET} of {member} (--force; it \
                 held no graid superblock)\n"
            )
        }
    };
    Ok(if json_out { json(&report) } else { text })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::member::RealSystem;
    use crate::sbio::testutil::{block, image, sample, TempFile};
    use graid_engine::superblock::SUPERBLOCK_SIZE;

    #[test]
    fn utc_dates() {
        assert_eq!(utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc(1_767_225_600), "2026-01-01 00:00:00 UTC");
        assert_eq!(utc(951_825_599), "2000-02-29 11:59:59 UTC");
        assert_eq!(utc(4_102_444_800), "2100-01-01 00:00:00 UTC");
    }

    #[test]
    fn examines_an_encoded_superblock_in_a_file() {
        let mut sb = sample("golden", [0x10; 16], 1, 42);
        sb.recovery_offset = 4096;
        sb.clean = false;
        // Ignored while not clean: the resync starts over.
        sb.resync_offset = 1024;
        sb.slots[5] = Slot::Faulty;
        let file = image(&block(&sb));
        let path = file.str();
        let text = examine(&RealSystem, path, false).unwrap();
        let expected = format!(
            "\
{path}:
        Version : 1
     Array UUID : 10101010-1010-1010-1010-101010101010
           Name : golden
      Home Host : none (any host starts it)
        Created : 2026-01-01 00:00:00 UTC (1767225600)
     RAID Level : raid1
         Layout : 0x0
     Chunk Size : -
        Members : 2
     Array Size : 1048576 sectors (512 MiB)
          State : dirty (resync needed)
         Events : 42
    Member UUID : 41414141-4141-4141-4141-414141414141
    Device Slot : 1
    Device Role : active, role 1
    Data Offset : 4096 sectors (2 MiB)
      Data Size : 1048576 sectors (512 MiB)
Recovery Offset : 4096 sectors in sync
         Bitmap : none
        Journal : none
       Features : compat 0x0, incompat 0x0

SLOT  STATE   ROLE
   0  active     0
   1  active     1
   5  faulty     -
"
        );
        assert_eq!(text, expected);
    }

    #[test]
    fn export_prints_udev_properties_of_a_member_and_nothing_for_others() {
        let mut sb = sample("my data", [0x10; 16], 1, 42);
        sb.homehost = graid_engine::superblock::HomeHost::new("rack a").unwrap();
        let file = image(&block(&sb));
        let text = export(&RealSystem, file.str()).unwrap();
        assert_eq!(
            text,
            "ID_FS_TYPE=graid_member\nID_FS_USAGE=raid\n\
             ID_FS_UUID=10101010-1010-1010-1010-101010101010\n\
             ID_FS_UUID_ENC=10101010-1010-1010-1010-101010101010\n\
             ID_FS_UUID_SUB=41414141-4141-4141-4141-414141414141\nID_FS_LABEL=my_data\n\
             ID_FS_LABEL_ENC=my\\x20data\n\
             GRAID_MEMBER_ARRAY_UUID=10101010-1010-1010-1010-101010101010\n\
             GRAID_MEMBER_NAME=my_data\nGRAID_MEMBER_EVENTS=42\nGRAID_MEMBER_HOMEHOST=rack_a\n"
        );
        let empty = image(&[0u8; SUPERBLOCK_SIZE]);
        assert_eq!(export(&RealSystem, empty.str()).unwrap(), "");
        let mut damaged = *block(&sample("d", [0x10; 16], 1, 42));
        damaged[100] ^= 1;
        assert_eq!(export(&RealSystem, image(&damaged).str()).unwrap(), "");
    }

    #[test]
    fn examine_json_has_every_field() {
        let file = image(&block(&sample("j", [0x22; 16], 0, 5)));
        let out = examine(&RealSystem, file.str(), true).unwrap();
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["device"], file.str());
        assert_eq!(v["name"], "j");
        assert_eq!(v["level"], "raid1");
        assert_eq!(v["events"], 5);
        assert_eq!(v["this_role"], 0);
        assert_eq!(v["this_state"], "active");
        assert_eq!(v["recovery_offset"], serde_json::Value::Null);
        assert_eq!(v["resync_offset"], serde_json::Value::Null);
        assert_eq!(v["bitmap"], serde_json::Value::Null);
        assert_eq!(v["bitmap_chunk_bytes"], serde_json::Value::Null);
        assert_eq!(v["bitmap_events"], serde_json::Value::Null);
        assert_eq!(v["array_sectors"], 1 << 20);
        assert_eq!(v["slots"].as_array().unwrap().len(), 2);
        assert_eq!(v["slots"][1]["role"], 1);
        assert_eq!(v["ppl"], false);
        assert_eq!(v["homehost"], "");
        assert_eq!(v["reshape"], serde_json::Value::Null);
        assert_eq!(v.as_object().unwrap().len(), 30);
    }

    #[test]
    fn a_reshape_in_progress_is_shown_and_refused() {
        use graid_engine::geometry::{Level, ParityLayout};
        use graid_engine::superblock::Reshape;
        let mut sb = sample("r", [0x33; 16], 0, 9);
        sb.level = Level::Raid5(ParityLayout::LeftSymmetric);
        sb.chunk_sectors = 128;
        sb.members = 3;
        sb.data_offset = 8192;
        sb.reshape = Some(Reshape {
            position: 4096,
            new_level: Level::Raid5(ParityLayout::LeftSymmetric),
            new_chunk_sectors: 128,
            new_members: 4,
            new_data_offset: 4096,
            backwards: false,
        });
        let file = image(&block(&sb));
        let text = examine(&RealSystem, file.str(), false).unwrap();
        assert!(
            text.contains(
                "Reshape : forwards at sector 4096, to raid5 of 4 members, 64 KiB chunks, data \
                 at sector 4096 (this graidctl cannot continue it)"
            ),
            "{text}"
        );
        let json = examine(&RealSystem, file.str(), true).unwrap();
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(v["reshape"]["new_members"], 4);
        assert_eq!(v["reshape"]["direction"], "forwards");
    }

    #[test]
    fn a_pending_resync_is_shown_with_its_position() {
        let mut sb = sample("r", [0x33; 16], 0, 9);
        sb.resync_offset = 2048;
        let file = image(&block(&sb));
        let text = examine(&RealSystem, file.str(), false).unwrap();
        assert!(
            text.contains("State : clean, resync pending from sector 2048\n"),
            "{text}"
        );
        let v: serde_json::Value =
            serde_json::from_str(&examine(&RealSystem, file.str(), true).unwrap()).unwrap();
        assert_eq!(v["resync_offset"], 2048);
        assert_eq!(v["clean"], true);
    }

    #[test]
    fn a_bitmap_is_shown_with_its_chunk_and_events() {
        let mut sb = sample("b", [0x34; 16], 0, 9);
        sb.bitmap = graid_engine::superblock::DEFAULT_BITMAP_AREA;
        sb.bitmap_region = 1 << 17;
        sb.bitmap_events = 8;
        let file = image(&block(&sb));
        let text = examine(&RealSystem, file.str(), false).unwrap();
        assert!(
            text.contains(
                "Bitmap : internal, 64 MiB chunks, 2032 sectors (1016 KiB) at sector 16; all in \
                 sync at event 8\n"
            ),
            "{text}"
        );
        let v: serde_json::Value =
            serde_json::from_str(&examine(&RealSystem, file.str(), true).unwrap()).unwrap();
        assert_eq!(v["bitmap_chunk_bytes"], 64 << 20);
        assert_eq!(v["bitmap_events"], 8);
    }

    #[test]
    fn a_partial_parity_log_is_shown_in_the_journal_area() {
        let mut sb = sample("p", [0x35; 16], 0, 9);
        sb.level = graid_engine::geometry::Level::Raid5(
            graid_engine::geometry::ParityLayout::LeftSymmetric,
        );
        sb.chunk_sectors = 128;
        sb.members = 3;
        sb.slots[2] = Slot::Active { role: 2 };
        sb.journal = graid_engine::ppl::DEFAULT_LOG_AREA;
        sb.ppl = true;
        let file = image(&block(&sb));
        let text = examine(&RealSystem, file.str(), false).unwrap();
        assert!(
            text.contains("Journal : partial parity log, 2048 sectors (1 MiB) at sector 2048\n"),
            "{text}"
        );
        let v: serde_json::Value =
            serde_json::from_str(&examine(&RealSystem, file.str(), true).unwrap()).unwrap();
        assert_eq!(v["ppl"], true);
    }

    #[test]
    fn examine_reports_why_garbage_is_refused() {
        let file = image(&[0x5A; SUPERBLOCK_SIZE]);
        let err = examine(&RealSystem, file.str(), false).unwrap_err();
        assert_eq!(err.exit_code(), crate::error::EXIT_FAILURE);
        assert_eq!(
            err.to_string(),
            format!("{}: no graid superblock (bad magic)", file.str())
        );
        let mut corrupt = block(&sample("c", [1; 16], 0, 1));
        corrupt[0x40] ^= 0x80;
        let file = image(&corrupt);
        let err = examine(&RealSystem, file.str(), false).unwrap_err();
        assert!(err.to_string().contains("checksum mismatch"), "{err}");
        let short = TempFile::new(&[0; 100]);
        let err = examine(&RealSystem, short.str(), false).unwrap_err();
        assert!(err.to_string().contains("too small"), "{err}");
    }

    #[test]
    fn zero_reports_what_it_found() {
        let file = image(&block(&sample("gone", [3; 16], 0, 1)));
        let out = zero(file.str(), false, false).unwrap();
        assert_eq!(
            out,
            format!(
                "graidctl: zeroed the superblock of array 'gone' \
                 (03030303-0303-0303-0303-030303030303) on {}\n",
                file.str()
            )
        );
        let out = zero(file.str(), false, true).unwrap();
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["zeroed"], false);
        assert_eq!(v["found"], "zero");
        let other = image(&[1; SUPERBLOCK_SIZE]);
        assert!(zero(other.str(), false, false).is_err());
        let out = zero(other.str(), true, true).unwrap();
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(
            (v["zeroed"].clone(), v["found"].clone()),
            (true.into(), "other".into())
        );
        assert_eq!(v["reason"], "no graid superblock (bad magic)");
    }
}
