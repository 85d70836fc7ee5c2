//! The text of the sysfs files, from DETAIL's answer.

use graid_abi::sysfs::{
    array_file, member_file, parse_kibs, parse_sync_action, ARRAY_FILES, MEMBER_FILES,
};
use graid_abi::*;

fn detail() -> GraidDetail {
    // SAFETY: GraidDetail is plain integers; all-zero is valid (the module starts from it too).
    let mut d: GraidDetail = unsafe { core::mem::zeroed() };
    d.level = GRAID_LEVEL_RAID5;
    d.chunk_sectors = 128;
    d.nr_members = 3;
    d.member_data_sectors = 204800;
    d.replace_role = GRAID_ROLE_NONE;
    d.speed_min_kibs = 1000;
    d.speed_max_kibs = 200000;
    d.uuid = [
        0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0, 1, 2, 3, 4, 5, 6, 7,
    ];
    d.name[..3].copy_from_slice(b"web");
    for (role, m) in d.members.iter_mut().take(3).enumerate() {
        m.role = role as u32;
        m.dev = GraidMember {
            major: 259,
            minor: role as u32,
        };
        m.recovery_offset = u64::MAX;
    }
    d
}

fn read(name: &str, d: &GraidDetail) -> String {
    let mut s = String::new();
    array_file(name, d, &GraidReshape::default(), &mut s)
        .expect("a file")
        .expect("written");
    s
}

fn read_member(name: &str, d: &GraidDetail, role: u32) -> String {
    let mut s = String::new();
    member_file(name, d, role, &mut s)
        .expect("a file")
        .expect("written");
    s
}

#[test]
fn every_listed_file_reads_as_one_line() {
    let d = detail();
    for file in ARRAY_FILES {
        let name = file.name.to_str().unwrap();
        let text = read(name, &d);
        assert!(
            text.ends_with('\n') && text.lines().count() == 1,
            "{name}: {text:?}"
        );
    }
    for file in MEMBER_FILES {
        let name = file.name.to_str().unwrap();
        let text = read_member(name, &d, 2);
        assert!(
            text.ends_with('\n') && text.lines().count() == 1,
            "{name}: {text:?}"
        );
    }
    let mut s = String::new();
    assert!(array_file("nonsense", &d, &GraidReshape::default(), &mut s).is_none());
    assert!(
        member_file("state", &d, 3, &mut s).is_none(),
        "role 3 of 3 members"
    );
}

#[test]
fn an_optimal_idle_array_reads_as_mds_would() {
    let d = detail();
    assert_eq!(read("level", &d), "raid5\n");
    assert_eq!(read("raid_disks", &d), "3\n");
    assert_eq!(read("chunk_size", &d), "65536\n");
    assert_eq!(read("component_size", &d), "102400\n");
    assert_eq!(read("array_state", &d), "clean\n");
    assert_eq!(read("state", &d), "optimal\n");
    assert_eq!(read("degraded", &d), "0\n");
    assert_eq!(read("sync_action", &d), "idle\n");
    assert_eq!(read("sync_completed", &d), "none\n");
    assert_eq!(read("sync_speed", &d), "none\n");
    assert_eq!(read("sync_speed_min", &d), "1000\n");
    assert_eq!(read("sync_speed_max", &d), "200000\n");
    assert_eq!(read("consistency_policy", &d), "resync\n");
    assert_eq!(read("spares", &d), "none\n");
    assert_eq!(read("name", &d), "web\n");
    assert_eq!(read("uuid", &d), "01234567-89ab-cdef-0001-020304050607\n");
    assert_eq!(read_member("state", &d, 1), "in_sync\n");
    assert_eq!(read_member("slot", &d, 1), "1\n");
    assert_eq!(read_member("dev", &d, 1), "259:1\n");
    assert_eq!(read_member("recovery_start", &d, 1), "none\n");
}

#[test]
fn a_rebuild_reads_as_recover_with_its_member_as_spare() {
    let mut d = detail();
    d.state = GRAID_ARRAY_DEGRADED;
    d.flags = GRAID_DETAIL_DIRTY;
    d.members[1].state = GRAID_MEMBER_REBUILDING;
    d.members[1].recovery_offset = 4096;
    d.members[2].state = GRAID_MEMBER_MISSING;
    d.rate_kibs = 5000;
    d.nr_spares = 2;
    d.spares[0] = GraidMember {
        major: 8,
        minor: 16,
    };
    d.spares[1] = GraidMember {
        major: 8,
        minor: 32,
    };
    assert_eq!(read("array_state", &d), "active\n");
    assert_eq!(read("state", &d), "degraded\n");
    assert_eq!(read("degraded", &d), "2\n");
    assert_eq!(read("sync_action", &d), "recover\n");
    assert_eq!(read("sync_completed", &d), "4096 / 204800\n");
    assert_eq!(read("sync_speed", &d), "5000\n");
    assert_eq!(read("spares", &d), "8:16 8:32\n");
    assert_eq!(read_member("state", &d, 1), "spare\n");
    assert_eq!(read_member("recovery_start", &d, 1), "4096\n");
    assert_eq!(read_member("state", &d, 2), "missing\n");
    assert_eq!(read_member("dev", &d, 2), "none\n");
}

#[test]
fn scrubs_replaces_and_failures_read_as_mds_would() {
    let mut d = detail();
    d.scrub_action = GRAID_SCRUB_CHECK;
    d.scrub_done = 10;
    d.scrub_total = 20;
    d.mismatch_sectors = 8;
    d.flags = GRAID_DETAIL_PPL;
    assert_eq!(read("sync_action", &d), "check\n");
    assert_eq!(read("sync_completed", &d), "10 / 20\n");
    assert_eq!(read("mismatch_cnt", &d), "8\n");
    assert_eq!(read("consistency_policy", &d), "ppl\n");
    d.scrub_action = GRAID_SCRUB_RESYNC;
    assert_eq!(read("sync_action", &d), "resync\n");
    d.scrub_action = GRAID_SCRUB_IDLE;
    d.replace_role = 0;
    d.replace_copied = 100;
    assert_eq!(read("sync_action", &d), "recover\n");
    assert_eq!(read("sync_completed", &d), "100 / 204800\n");
    d.flags = 0;
    d.bitmap_region_sectors = 128;
    assert_eq!(read("consistency_policy", &d), "bitmap\n");
    d.state = GRAID_ARRAY_BROKEN;
    d.members[0].state = GRAID_MEMBER_FAULTY;
    assert_eq!(read("array_state", &d), "broken\n");
    assert_eq!(read("state", &d), "broken\n");
    assert_eq!(read_member("state", &d, 0), "faulty\n");
    d.level = GRAID_LEVEL_RAID0;
    assert_eq!(read("consistency_policy", &d), "none\n");
}

#[test]
fn only_the_controls_are_writable() {
    let writable: Vec<&str> = ARRAY_FILES
        .iter()
        .chain(&MEMBER_FILES)
        .filter(|f| f.writable)
        .map(|f| f.name.to_str().unwrap())
        .collect();
    assert_eq!(
        writable,
        ["sync_action", "sync_speed_min", "sync_speed_max"]
    );
}

#[test]
fn writes_take_mds_words_and_plain_numbers_only() {
    assert_eq!(parse_sync_action(b"check\n"), Some(GRAID_SCRUB_CHECK));
    assert_eq!(parse_sync_action(b"repair"), Some(GRAID_SCRUB_REPAIR));
    assert_eq!(parse_sync_action(b"idle\n"), Some(GRAID_SCRUB_IDLE));
    for bad in [&b"resync\n"[..], b"frozen", b"check\n\n", b"", b" check"] {
        assert_eq!(parse_sync_action(bad), None, "{bad:?}");
    }
    assert_eq!(parse_kibs(b"5000\n"), Some(5000));
    for bad in [&b"-1"[..], b"", b"\n", b"12k", b"99999999999", b"+5"] {
        assert_eq!(parse_kibs(bad), None, "{bad:?}");
    }
}

#[test]
fn a_restripe_reads_as_mds_reshape() {
    let d = detail();
    assert_eq!(read("reshape_position", &d), "none\n");
    let r = GraidReshape {
        state: GRAID_RESHAPE_RUNNING,
        total_sectors: 409600,
        moved_sectors: 12288,
        ..GraidReshape::default()
    };
    let file = |name: &str| {
        let mut s = String::new();
        array_file(name, &d, &r, &mut s)
            .expect("a file")
            .expect("written");
        s
    };
    assert_eq!(file("sync_action"), "reshape\n");
    assert_eq!(file("sync_completed"), "12288 / 409600\n");
    assert_eq!(file("reshape_position"), "12288\n");
}
