//! `graidctl list`, `graidctl detail ARRAY` and `graidctl detail --export ARRAY`.

use crate::array_ref::{resolve, ArrayRef};
use crate::control::ControlDevice;
use crate::error::CtlError;
use crate::helper;
use crate::member::System;
use crate::output::{export_text, json, running_views, Align, ArrayView, Table};
use crate::size::format_sectors;
use serde::Serialize;

#[derive(Serialize)]
struct ListReport {
    arrays: Vec<ArrayView>,
}

pub fn list(ctl: &dyn ControlDevice, sys: &dyn System, json_out: bool) -> Result<String, CtlError> {
    let arrays = running_views(ctl, sys)?;
    if json_out {
        return Ok(json(&ListReport { arrays }));
    }
    if arrays.is_empty() {
        return Ok("no graid arrays are running\n".to_owned());
    }
    let mut table = Table::new(&[
        ("DEVICE", Align::Left),
        ("NAME", Align::Left),
        ("LEVEL", Align::Left),
        ("SIZE", Align::Right),
        ("STATE", Align::Left),
        ("MEMBERS", Align::Right),
        ("EXPORTED", Align::Left),
    ]);
    for a in &arrays {
        // Where the fabric reaches it (`detail` says to whom), or `-`.
        let exported = a
            .exports
            .iter()
            .flat_map(|e| &e.listeners)
            .map(|l| l.text())
            .collect::<Vec<_>>()
            .join(", ");
        table.row(vec![
            a.device.clone(),
            a.name.clone(),
            a.level.clone(),
            format_sectors(a.size_sectors),
            a.state.clone(),
            a.members_summary(),
            if exported.is_empty() {
                "-".to_owned()
            } else {
                exported
            },
        ]);
    }
    Ok(table.render())
}

pub fn detail(
    ctl: &dyn ControlDevice,
    sys: &dyn System,
    array: &ArrayRef,
    json_out: bool,
) -> Result<String, CtlError> {
    let view = ArrayView::new(&resolve(ctl, sys, array)?, sys);
    // RAID 5/6 parity goes to the helper when one is attached.
    let helper = matches!(view.level.as_str(), "raid5" | "raid6")
        .then(|| helper::status(ctl))
        .flatten();
    let reshape = crate::grow_members::reshape_view(ctl, view.index);
    Ok(if json_out {
        json(&DetailWithHelper {
            view: &view,
            helper,
            reshape,
        })
    } else {
        let mut text = view.detail_text();
        if let Some(reshape) = reshape {
            text += &format!("       Reshape : {}\n", reshape.text());
        }
        if let Some(helper) = helper {
            text += &format!("        Helper : {}\n", helper.summary());
        }
        text
    })
}

/// `detail --json`: the array, for RAID 5/6 the parity helper, and a restripe under way.
#[derive(Serialize)]
struct DetailWithHelper<'a> {
    #[serde(flatten)]
    view: &'a ArrayView,
    #[serde(skip_serializing_if = "Option::is_none")]
    helper: Option<helper::HelperView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reshape: Option<crate::grow_members::ReshapeView>,
}

/// One running array as graid.conf's ARRAY line.
#[derive(Serialize)]
struct ScanLine {
    name: String,
    uuid: String,
    line: String,
}

/// `detail --scan`: an ARRAY line for each running array (`config.rs`), to paste into
/// /etc/graid/graid.conf; `--json` gives each with its name and UUID.
pub fn scan(ctl: &dyn ControlDevice, sys: &dyn System, json_out: bool) -> Result<String, CtlError> {
    let lines: Vec<ScanLine> = running_views(ctl, sys)?
        .into_iter()
        .map(|a| ScanLine {
            line: format!(
                "ARRAY /dev/graid/{} UUID={} level={} members={}",
                a.name,
                a.uuid,
                a.level,
                a.members.len()
            ),
            name: a.name,
            uuid: a.uuid,
        })
        .collect();
    Ok(if json_out {
        json(&lines)
    } else {
        lines.iter().map(|l| format!("{}\n", l.line)).collect()
    })
}

/// `detail --export`: udev properties (see Documentation/udev.rst).
pub fn export(
    ctl: &dyn ControlDevice,
    sys: &dyn System,
    array: &ArrayRef,
) -> Result<String, CtlError> {
    Ok(export_text(&resolve(ctl, sys, array)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::array_ref::parse;
    use crate::control::fake::{array, FakeControl};
    use crate::member::fake::FakeSystem;
    use graid_abi::{
        GRAID_ARRAY_DEGRADED, GRAID_DETAIL_DIRTY, GRAID_DETAIL_RESYNC_PENDING, GRAID_MEMBER_FAULTY,
        GRAID_MEMBER_MISSING,
    };

    fn setup() -> (FakeControl, FakeSystem) {
        let mut degraded = array(
            3,
            "scratch",
            1,
            &[
                (259, 2, 0),
                (259, 9, GRAID_MEMBER_FAULTY),
                (0, 0, GRAID_MEMBER_MISSING),
            ],
        );
        degraded.state = GRAID_ARRAY_DEGRADED;
        degraded.flags = GRAID_DETAIL_RESYNC_PENDING | GRAID_DETAIL_DIRTY;
        degraded.members[0].corrected = 2;
        degraded.size_sectors = 3 << 30;
        let ctl = FakeControl::with(vec![
            array(0, "data", 10, &[(259, 0, 0), (259, 1, 0)]),
            degraded,
        ]);
        (
            ctl,
            FakeSystem::with_disks(&["nvme0n1", "nvme1n1", "nvme2n1"]),
        )
    }

    #[test]
    fn scan_prints_config_lines_that_parse_back() {
        let (ctl, sys) = setup();
        let text = scan(&ctl, &sys, false).unwrap();
        assert_eq!(
            text,
            "ARRAY /dev/graid/data UUID=01010101-0101-0101-0101-010101010101 level=raid10 \
             members=2\nARRAY /dev/graid/scratch UUID=04040404-0404-0404-0404-040404040404 \
             level=raid1 members=3\n"
        );
        let (config, warnings) = crate::config::parse(&text).unwrap();
        assert!(warnings.is_empty());
        assert_eq!(config.arrays[1].name, "scratch");
        assert_eq!(config.arrays[1].uuid, [4; 16]);
    }

    #[test]
    fn list_table() {
        let (ctl, sys) = setup();
        sys.exports.borrow_mut().push(crate::nvmet::Export {
            nqn: "nqn.2024-01.com.example:scratch".into(),
            device: "/dev/graid3".into(),
            enabled: true,
            listeners: vec![crate::nvmet::Listener {
                transport: "tcp".into(),
                addr: "10.0.0.1".into(),
                port: "4420".into(),
            }],
            hosts: vec!["nqn.2024-01.com.example:gpu1".into()],
            allow_any_host: false,
        });
        assert_eq!(
            list(&ctl, &sys, false).unwrap(),
            "\
DEVICE       NAME     LEVEL       SIZE  STATE     MEMBERS  EXPORTED
/dev/graid0  data     raid10     1 GiB  optimal       2/2  -
/dev/graid3  scratch  raid1   1.50 TiB  degraded      1/3  tcp 10.0.0.1:4420
"
        );
        let text = detail(&ctl, &sys, &parse("scratch").unwrap(), false).unwrap();
        assert!(
            text.contains(
                "Exported : nqn.2024-01.com.example:scratch over tcp 10.0.0.1:4420 to \
                 nqn.2024-01.com.example:gpu1\n"
            ),
            "{text}"
        );
        let empty = FakeControl::with(vec![]);
        assert_eq!(
            list(&empty, &sys, false).unwrap(),
            "no graid arrays are running\n"
        );
        assert_eq!(
            list(&empty, &sys, true).unwrap(),
            "{\n  \"arrays\": []\n}\n"
        );
    }

    #[test]
    fn list_skips_arrays_that_vanish_and_reports_list_errors() {
        let (ctl, sys) = setup();
        ctl.fail.borrow_mut().push(("list", libc::EPERM));
        let err = list(&ctl, &sys, false).unwrap_err();
        assert_eq!(err.exit_code(), crate::error::EXIT_PERMISSION);
    }

    #[test]
    fn detail_text_is_mdadm_like() {
        let (ctl, sys) = setup();
        assert_eq!(
            detail(&ctl, &sys, &parse("scratch").unwrap(), false).unwrap(),
            "\
/dev/graid3:
          Name : scratch
     Home Host : none
          UUID : 04040404-0404-0404-0404-040404040404
    RAID Level : raid1
    Chunk Size : -
    Array Size : 1.50 TiB (3221225472 sectors)
         State : degraded
          Sync : resync pending (reads use one copy until it passes)
        Marked : dirty (writing; a crash now means a resync)
        Bitmap : none
        Events : 7
    Open Count : 0
       Members : 3 (1 active, 0 rebuilding, 1 faulty, 1 missing)

ROLE  DEVICE        STATE    READS  WRITES     READ  WRITTEN  ERRORS  CORRECTED
   0  /dev/nvme2n1  active       0      10      0 B   40 KiB       0          2
   1  259:9         faulty     100      10  400 KiB   40 KiB       0          0
   2  -             missing    200      10  800 KiB   40 KiB       0          0
"
        );
    }

    #[test]
    fn detail_shows_a_rebuilds_speed_and_time_left_and_the_spares() {
        let (ctl, sys) = setup();
        {
            let mut arrays = ctl.arrays.borrow_mut();
            let a = &mut arrays[0];
            a.members[1].state = graid_abi::GRAID_MEMBER_REBUILDING;
            a.member_data_sectors = 1 << 21;
            a.members[1].recovery_offset = 1 << 19;
            a.rate_kibs = 96 * 1024;
            a.rebuild_skipped_sectors = 1 << 18;
            a.bitmap_region_sectors = 1 << 17;
            a.bitmap_regions = 16;
            a.bitmap_dirty = 3;
            a.nr_spares = 1;
            a.spares[0] = graid_abi::GraidMember {
                major: 259,
                minor: 2,
            };
        }
        let text = detail(&ctl, &sys, &parse("/dev/graid0").unwrap(), false).unwrap();
        // 768 MiB left at 96 MiB/s.
        assert!(
            text.contains(
                "Rebuild : 25.0% of role 1 (256 MiB of 1 GiB), 128 MiB skipped by the bitmap, \
                 96 MiB/s, 8s left\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("Bitmap : internal, 64 MiB chunks, 3 of 16 dirty\n"),
            "{text}"
        );
        assert!(text.contains("Spares : /dev/nvme2n1\n"), "{text}");
        let json = detail(&ctl, &sys, &parse("/dev/graid0").unwrap(), true).unwrap();
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(v["rebuild"]["seconds_left"], 8);
        assert_eq!(v["bitmap"]["dirty_regions"], 3);
        assert_eq!(v["rebuild_skipped_sectors"], 1 << 18);
        assert_eq!(v["spares"][0]["device"], "/dev/nvme2n1");
    }

    #[test]
    fn detail_says_a_heal_runs_after_a_lying_helper() {
        let (ctl, sys) = setup();
        ctl.arrays.borrow_mut()[0].flags |=
            graid_abi::GRAID_DETAIL_PARITY_HEAL | graid_abi::GRAID_DETAIL_RESYNC_PENDING;
        let text = detail(&ctl, &sys, &parse("/dev/graid0").unwrap(), false).unwrap();
        assert!(
            text.contains("Sync : healing: a resync rewrites the parity a helper caught lying"),
            "{text}"
        );
        let v: serde_json::Value = serde_json::from_str(
            &detail(&ctl, &sys, &parse("/dev/graid0").unwrap(), true).unwrap(),
        )
        .unwrap();
        assert_eq!(v["parity_heal"], true);
    }

    #[test]
    fn detail_says_where_a_scrub_stopped_and_what_it_could_not_read() {
        let (ctl, sys) = setup();
        {
            let mut arrays = ctl.arrays.borrow_mut();
            let a = &mut arrays[0];
            a.flags |= graid_abi::GRAID_DETAIL_SCRUB_STALLED;
            a.scrub_done = 1 << 20;
            a.scrub_total = 1 << 22;
            a.scrub_read_errors = 3;
        }
        let text = detail(&ctl, &sys, &parse("/dev/graid0").unwrap(), false).unwrap();
        assert!(
            text.contains("Scrub : stopped at 25.0%: a window could not be made consistent"),
            "{text}"
        );
        assert!(text.contains("Unreadable : 3 blocks of 4 KiB"), "{text}");
        let v: serde_json::Value = serde_json::from_str(
            &detail(&ctl, &sys, &parse("/dev/graid0").unwrap(), true).unwrap(),
        )
        .unwrap();
        assert_eq!(v["scrub_stopped_percent"], 25.0);
        assert_eq!(v["scrub_read_errors"], 3);
        ctl.arrays.borrow_mut()[0].flags = 0;
        let v: serde_json::Value = serde_json::from_str(
            &detail(&ctl, &sys, &parse("/dev/graid0").unwrap(), true).unwrap(),
        )
        .unwrap();
        assert!(v["scrub_stopped_percent"].is_null());
    }

    #[test]
    fn detail_of_a_parity_array_says_whether_its_write_hole_is_closed() {
        let sys = FakeSystem::with_disks(&["nvme0n1", "nvme1n1", "nvme2n1"]);
        let ctl = FakeControl::with(vec![
            array(0, "p", 5, &[(259, 0, 0), (259, 1, 0), (259, 2, 0)]),
            array(1, "m", 1, &[(259, 0, 0), (259, 1, 0)]),
        ]);
        {
            let mut arrays = ctl.arrays.borrow_mut();
            arrays[0].flags |= graid_abi::GRAID_DETAIL_PPL;
            arrays[0].ppl_entries = 40;
            arrays[0].ppl_barriers = 2;
            arrays[0].ppl_wraps = 3;
        }
        let text = detail(&ctl, &sys, &parse("p").unwrap(), false).unwrap();
        assert!(
            text.contains(
                "Write Hole : closed by the partial parity log (40 entries, 2 barriers, 3 wraps)\n"
            ),
            "{text}"
        );
        let v: serde_json::Value =
            serde_json::from_str(&detail(&ctl, &sys, &parse("p").unwrap(), true).unwrap()).unwrap();
        assert_eq!(v["ppl"]["entries"], 40);
        assert_eq!(v["ppl"]["wraps"], 3);
        ctl.arrays.borrow_mut()[0].flags &= !graid_abi::GRAID_DETAIL_PPL;
        let text = detail(&ctl, &sys, &parse("p").unwrap(), false).unwrap();
        assert!(
            text.contains("Write Hole : open: no partial parity log"),
            "{text}"
        );
        // A mirror has no write hole: no line.
        let text = detail(&ctl, &sys, &parse("m").unwrap(), false).unwrap();
        assert!(!text.contains("Write Hole"), "{text}");
    }

    #[test]
    fn detail_of_a_parity_array_shows_the_helper() {
        let sys = FakeSystem::with_disks(&["nvme0n1", "nvme1n1", "nvme2n1"]);
        let mut ctl = FakeControl::with(vec![
            array(0, "p", 5, &[(259, 0, 0), (259, 1, 0), (259, 2, 0)]),
            array(1, "m", 1, &[(259, 0, 0), (259, 1, 0)]),
        ]);
        ctl.helper.state = graid_abi::ring::HELPER_STATE_HEALTHY;
        ctl.helper.engine[..3].copy_from_slice(b"cpu");
        ctl.helper.pid = 7;
        ctl.helper.jobs = 12;
        let text = detail(&ctl, &sys, &parse("p").unwrap(), false).unwrap();
        assert!(
            text.contains("Helper : cpu (pid 7), healthy: 12 jobs offloaded, 0 in the kernel\n"),
            "{text}"
        );
        let json = detail(&ctl, &sys, &parse("p").unwrap(), true).unwrap();
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(v["helper"]["jobs"], 12);
        assert_eq!(v["name"], "p");
        // A mirror has no parity: no helper line.
        let text = detail(&ctl, &sys, &parse("m").unwrap(), false).unwrap();
        assert!(!text.contains("Helper"), "{text}");
    }

    #[test]
    fn detail_json_shape() {
        let (ctl, sys) = setup();
        let out = detail(&ctl, &sys, &parse("/dev/graid0").unwrap(), true).unwrap();
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        // serde_json's Map is sorted; the printed text keeps the struct's order.
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "bitmap",
                "chunk_bytes",
                "chunk_sectors",
                "device",
                "dirty",
                "events",
                "exports",
                "homehost",
                "index",
                "level",
                "member_data_bytes",
                "members",
                "mismatch_sectors",
                "name",
                "open_count",
                "parity_heal",
                "ppl",
                "raid_devices",
                "rebuild",
                "rebuild_skipped_sectors",
                "rebuilt_sectors",
                "replace",
                "resync_pending",
                "scrub",
                "scrub_read_errors",
                "scrub_stopped_percent",
                "size_bytes",
                "size_sectors",
                "spares",
                "state",
                "uuid"
            ]
        );
        assert!(out.starts_with("{\n  \"device\": \"/dev/graid0\",\n  \"index\": 0,"));
        assert_eq!(v["index"], 0);
        assert_eq!(v["chunk_sectors"], 1024);
        assert_eq!(v["chunk_bytes"], 512 * 1024);
        assert_eq!(v["raid_devices"], v["members"].as_array().unwrap().len());
        assert_eq!(v["size_bytes"], 1u64 << 30);
        assert_eq!(v["uuid"], "01010101-0101-0101-0101-010101010101");
        let m = &v["members"][1];
        let keys: Vec<&str> = m.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "corrected",
                "device",
                "errors",
                "major",
                "minor",
                "read_bytes",
                "reads",
                "role",
                "state",
                "write_bytes",
                "writes"
            ]
        );
        assert_eq!(m["device"], "/dev/nvme1n1");
        assert_eq!(
            (m["major"].clone(), m["minor"].clone()),
            (259.into(), 1.into())
        );
        let out = detail(&ctl, &sys, &parse("scratch").unwrap(), true).unwrap();
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["members"][2]["device"], serde_json::Value::Null);
        assert_eq!(v["members"][2]["state"], "missing");
        assert_eq!(v["state"], "degraded");
        assert_eq!(v["resync_pending"], true);
        assert_eq!(v["members"][0]["corrected"], 2);
    }

    #[test]
    fn detail_export_matches_the_uevent() {
        let (ctl, sys) = setup();
        assert_eq!(
            export(&ctl, &sys, &parse("/dev/graid3").unwrap()).unwrap(),
            "GRAID_NAME=scratch\nGRAID_UUID=04040404-0404-0404-0404-040404040404\nGRAID_LEVEL=raid1\n\
             GRAID_UUID_HEX=04040404040404040404040404040404\n"
        );
        assert_eq!(
            export(&ctl, &sys, &parse("data").unwrap()).unwrap(),
            "GRAID_NAME=data\nGRAID_UUID=01010101-0101-0101-0101-010101010101\nGRAID_LEVEL=raid10\n\
             GRAID_UUID_HEX=01010101010101010101010101010101\n"
        );
        assert!(export(&ctl, &sys, &parse("/dev/graid7").unwrap()).is_err());
    }
}
