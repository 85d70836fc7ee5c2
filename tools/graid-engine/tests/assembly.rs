//! Assembly verdicts from superblocks alone.

use graid_engine::assembly::{member_status, pick_freshest, MemberStatus};
use graid_engine::geometry::{Level, ParityLayout};
use graid_engine::superblock::{
    Area, ArrayName, HomeHost, Reshape, Slot, Superblock, MAX_SLOTS, RECOVERY_COMPLETE,
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

/// Device in `slot` of a RAID 5 of 3 members (slots 0-2), slot 3 a spare, at `events`.
fn raid5_member(slot: u32, events: u64) -> Superblock {
    let mut sb = member(slot, events);
    sb.level = Level::Raid5(ParityLayout::LeftSymmetric);
    sb.chunk_sectors = 128;
    sb.members = 3;
    sb.slots[2] = Slot::Active { role: 2 };
    sb.slots[3] = Slot::Spare;
    sb
}

/// The superblock `sb` as a reshape to 4 members at data offset 2048 that reached `position`
/// writes it (slot 3 joined as role 3).
fn reshaping(mut sb: Superblock, position: u64) -> Superblock {
    sb.slots[3] = Slot::Active { role: 3 };
    sb.reshape = Some(Reshape {
        position,
        new_level: sb.level,
        new_chunk_sectors: sb.chunk_sectors,
        new_members: 4,
        new_data_offset: 2048,
        backwards: false,
    });
    sb
}

/// `sb` as the update that ended that reshape writes it.
fn reshaped(mut sb: Superblock) -> Superblock {
    sb.slots[3] = Slot::Active { role: 3 };
    sb.members = 4;
    sb.data_offset = 2048;
    sb
}

#[test]
fn a_reshape_start_or_end_missed_by_one_update_still_assembles() {
    // The start: members one behind name the old geometry alone; the spare that joined still
    // holds its spare superblock (recovery 0), and is in use, not rebuilt (the reshape writes
    // it).
    let mut spare = raid5_member(3, 9);
    spare.recovery_offset = 0;
    let sbs = [
        reshaping(raid5_member(0, 10), 0),
        raid5_member(1, 9),
        raid5_member(2, 9),
        spare,
    ];
    let want: Vec<_> = (0..4).map(|role| MemberStatus::Active { role }).collect();
    assert_eq!(statuses(&sbs), want);
    // In the middle: positions differ, the reshape is the same.
    let sbs = [
        reshaping(raid5_member(0, 20), 900),
        reshaping(raid5_member(1, 19), 600),
        reshaping(raid5_member(2, 20), 900),
        reshaping(raid5_member(3, 20), 900),
    ];
    assert_eq!(statuses(&sbs), want);
    // The end: one behind names the new geometry in its reshape fields.
    let sbs = [
        reshaped(raid5_member(0, 30)),
        reshaping(raid5_member(1, 29), 900),
        reshaped(raid5_member(2, 30)),
        reshaping(raid5_member(3, 29), 900),
    ];
    assert_eq!(statuses(&sbs), want);
    // Two behind the end, or one behind an end of another reshape: not the same array shape.
    let mut other = reshaping(raid5_member(2, 29), 900);
    if let Some(r) = other.reshape.as_mut() {
        r.new_data_offset = 1024;
    }
    let sbs = [
        reshaped(raid5_member(0, 30)),
        reshaping(raid5_member(1, 28), 900),
        other,
    ];
    let got = statuses(&sbs);
    assert!(matches!(
        got[1],
        MemberStatus::Mismatch | MemberStatus::Stale { .. }
    ));
    assert_eq!(got[2], MemberStatus::Mismatch);
    // A role that was not added by the reshape and is behind in its rebuild stays recovering.
    let mut rebuilding = reshaping(raid5_member(2, 20), 900);
    rebuilding.recovery_offset = 64;
    let sbs = [reshaping(raid5_member(0, 20), 900), rebuilding];
    assert_eq!(
        statuses(&sbs)[1],
        MemberStatus::Recovering {
            role: 2,
            recovery_offset: 64
        }
    );
}

#[test]
fn out_of_range_indices() {
    let sbs = [member(0, 1)];
    assert_eq!(member_status(&sbs, 0, 1), None);
    assert_eq!(member_status(&sbs, 1, 0), None);
}
