//! Assembly verdicts from superblocks alone.

use graid_engine::assembly::{member_status, pick_freshest, MemberStatus};
use graid_engine::geometry::Level;
use graid_engine::superblock::{
    Area, ArrayName, HomeHost, Slot, Superblock, MAX_SLOTS, RECOVERY_COMPLETE,
};

const ARRAY: [u8; 16] = [7; 16];
const OTHER_ARRAY: [u8; 16] = [9; 16];

/// Device in `slot` of a 2-member RAID 1 whose slots 0 and 1 hold roles 0 and 1 and slot 2 a
/// spare, at event count `events`.
fn member(slot: u32, events: u64) -> Superblock {
    let mut slots = [Slot::Empty; MAX_SLOTS];
    slots[0] = Slot::Active { role: 0 };
    slots[1] = Slot::Active { role: 1 };
    slots[2] = Slot::Spare;
    Superblock {
        features_compat: 0,
        features_incompat: 0,
        array_uuid: ARRAY,
        array_name: ArrayName::new("mirror").unwrap(),
        homehost: HomeHost::EMPTY,
        created: 0,
        events,
        clean: true,
        resync_offset: RECOVERY_COMPLETE,
        level: Level::Raid1,
        chunk_sectors: 0,
        members: 2,
        member_uuid: [slot as u8 + 1; 16],
        this_slot: slot,
        data_offset: 4096,
        data_size: 1 << 20,
        recovery_offset: RECOVERY_COMPLETE,
        bitmap: Area::NONE,
        bitmap_region: 0,
        bitmap_events: 0,
        journal: Area::NONE,
        ppl: false,
        log_key: [0; 16],
        slots,
        reshape: None,
    }
}

fn statuses(sbs: &[Superblock]) -> Vec<MemberStatus> {
    let freshest = pick_freshest(sbs, &ARRAY).expect("array present");
    (0..sbs.len())
        .map(|i| member_status(sbs, freshest, i).unwrap())
        .collect()
}

#[test]
fn healthy_array() {
    let sbs = [member(0, 10), member(1, 10), member(2, 10)];
    assert_eq!(pick_freshest(&sbs, &ARRAY), Some(0));
    assert_eq!(
        statuses(&sbs),
        [
            MemberStatus::Active { role: 0 },
            MemberStatus::Active { role: 1 },
            MemberStatus::Spare
        ]
    );
    assert!(statuses(&sbs).iter().all(MemberStatus::joins));
}

#[test]
fn freshest_wins_and_one_event_behind_is_current() {
    let sbs = [member(0, 9), member(1, 10), member(2, 8)];
    assert_eq!(pick_freshest(&sbs, &ARRAY), Some(1));
    assert_eq!(
        statuses(&sbs),
        [
            MemberStatus::Active { role: 0 },
            MemberStatus::Active { role: 1 },
            MemberStatus::Stale {
                events: 8,
                freshest_events: 10
            }
        ]
    );
}

#[test]
fn freshest_table_marks_failed_and_removed_devices() {
    let mut fresh = member(1, 11);
    fresh.slots[0] = Slot::Faulty;
    fresh.slots[2] = Slot::Empty;
    let sbs = [member(0, 10), fresh, member(2, 10)];
    assert_eq!(
        statuses(&sbs),
        [
            MemberStatus::Faulty,
            MemberStatus::Active { role: 1 },
            MemberStatus::Removed
        ]
    );
    assert!(!MemberStatus::Faulty.joins());
}

#[test]
fn interrupted_rebuild_is_recovering() {
    let mut rebuilding = member(0, 10);
    rebuilding.recovery_offset = 4096;
    let sbs = [rebuilding, member(1, 10)];
    assert_eq!(
        statuses(&sbs)[0],
        MemberStatus::Recovering {
            role: 0,
            recovery_offset: 4096
        }
    );
}

#[test]
fn foreign_devices_are_ignored() {
    let mut foreign = member(0, 99);
    foreign.array_uuid = OTHER_ARRAY;
    let sbs = [foreign, member(1, 10)];
    assert_eq!(pick_freshest(&sbs, &ARRAY), Some(1));
    assert_eq!(statuses(&sbs)[0], MemberStatus::Foreign);
    assert_eq!(pick_freshest(&sbs, &[0; 16]), None);
    assert_eq!(pick_freshest(&[], &ARRAY), None);
}

#[test]
fn duplicates_prefer_the_freshest_then_the_first() {
    // Two copies of slot 0 (a cloned disk): the fresher one wins.
    let sbs = [member(0, 9), member(1, 10), member(0, 10)];
    assert_eq!(
        statuses(&sbs),
        [
            MemberStatus::Duplicate { of: 2 },
            MemberStatus::Active { role: 1 },
            MemberStatus::Active { role: 0 }
        ]
    );
    // Same member UUID in another slot, same events: the first one listed wins.
    let mut clone = member(2, 10);
    clone.member_uuid = member(1, 10).member_uuid;
    let sbs = [member(0, 10), member(1, 10), clone];
    assert_eq!(statuses(&sbs)[2], MemberStatus::Duplicate { of: 1 });
}

#[test]
fn different_shapes_do_not_mix() {
    let mut resized = member(1, 10);
    resized.data_size += 8;
    let sbs = [member(0, 10), resized];
    assert_eq!(statuses(&sbs)[1], MemberStatus::Mismatch);
    // Its data elsewhere: the array's I/O would go to the freshest superblock's offset on it
    // (and past its end where that offset is larger).
    let mut moved = member(1, 10);
    moved.data_offset -= 8;
    let sbs = [member(0, 10), moved];
    assert_eq!(statuses(&sbs)[1], MemberStatus::Mismatch);
}

#[test]
fn a_member_that_missed_a_resize_update_is_one_update_behind_with_the_other_size() {
    // A power cut between the members' superblock writes of a grow, or of a shrink.
    for delta in [-8i64, 8] {
        let mut behind = member(1, 9);
        behind.data_size = behind.data_size.checked_add_signed(delta).unwrap();
        let sbs = [member(0, 10), behind];
        assert_eq!(
            statuses(&sbs)[1],
            MemberStatus::Active { role: 1 },
            "{delta}"
        );
        // Two updates behind, it is no member of this shape.
        let mut older = behind;
        older.events = 8;
        let sbs = [member(0, 10), older];
        assert_eq!(statuses(&sbs)[1], MemberStatus::Mismatch, "{delta}");
    }
}

#[test]
fn a_mirror_member_that_missed_a_change_of_the_copies_is_one_update_behind() {
    // A power cut between the members' superblock writes of a grow to three copies, or of a
    // shrink back to two: the freshest count and slot table decide.
    for (behind_count, fresh_count) in [(2, 3), (3, 2)] {
        let mut fresh = member(0, 10);
        fresh.members = fresh_count;
        let mut behind = member(1, 9);
        behind.members = behind_count;
        let sbs = [fresh, behind];
        assert_eq!(
            statuses(&sbs)[1],
            MemberStatus::Active { role: 1 },
            "{behind_count} -> {fresh_count}"
        );
        let mut older = behind;
        older.events = 8;
        assert_eq!(statuses(&[fresh, older])[1], MemberStatus::Mismatch);
    }
    // Striped levels restripe for another count: never one update behind by it.
    let mut fresh = member(0, 10);
    let mut behind = member(1, 9);
    for sb in [&mut fresh, &mut behind] {
        sb.level = graid_engine::geometry::Level::Raid0;
        sb.chunk_sectors = 128;
    }
    fresh.members = 3;
    assert_eq!(statuses(&[fresh, behind])[1], MemberStatus::Mismatch);
}

#[test]
fn out_of_range_indices() {
    let sbs = [member(0, 1)];
    assert_eq!(member_status(&sbs, 0, 1), None);
    assert_eq!(member_status(&sbs, 1, 0), None);
}
