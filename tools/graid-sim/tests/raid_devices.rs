//! A mirror's copies change (`engine/raid_devices.rs`): a RAID 1 grown by a copy has a new
//! role with no device, which a device added then fills by a rebuild, after which every copy
//! holds every sector; a copy whose member was failed and removed is dropped; a power cut
//! during either assembles the old count or the new with nothing lost; what is refused is
//! refused with the reason.

use graid_engine::geometry::{Geometry, Level, ParityLayout};
use graid_engine::members::Health;
use graid_engine::platform::{Op, Status};
use graid_engine::raid_devices::{Moves, RaidDevicesError};
use graid_engine::scrub::ScrubMode;
use graid_engine::superblock::Slot;
use graid_sim::host::{Host, DATA_OFFSET};
use graid_sim::stress::{
    fail_member, read_back_inline, run, scrub_now, seeds, submit_inline_data, Scenario,
    NEW_DEVICE_UUID,
};
use std::time::Instant;

/// Tags nobody writes: a sector the rebuild misses shows.
const GARBAGE: u64 = 0x6a72_6261_6765_0000;

fn mirror(members: u32, bitmap: bool) -> Scenario {
    let mut s = Scenario::new(Level::Raid1, members, 0);
    s.data_sectors = 2048;
    s.bitmap_region_sectors = bitmap.then_some(64);
    s
}

/// Runs the worker until member `role` is in sync.
fn rebuild(host: &Host, role: u32, seed: u64) {
    let start = Instant::now();
    while !host.engine.members()[role as usize].is_in_sync() {
        assert!(
            start.elapsed().as_secs() < 60,
            "seed {seed}: the rebuild of {role} never ended"
        );
        host.engine.work(host);
    }
}

/// The member count changed to `count` as the platform does it: the moves asked for, then
/// made (the test moves no devices: its shrinks move nobody, or move the disks themselves).
fn change(host: &Host, count: u32) -> Result<Geometry, RaidDevicesError> {
    let (_, moves) = host.engine.raid_devices_allowed(count)?;
    host.engine.set_raid_devices(host, count, &moves)
}

/// Member `role`'s data area as its disk holds it.
fn data_area(host: &Host, role: u32) -> Vec<u64> {
    let sectors = host.disks[role as usize].sectors.lock().unwrap();
    let len = host.engine.geometry().member_data_sectors();
    sectors[DATA_OFFSET as usize..(DATA_OFFSET + len) as usize].to_vec()
}

/// The member count disk `disk`'s newest superblock says, which must encode (a slot table
/// naming a role past the count does not).
fn newest_members(host: &Host, disk: usize) -> u32 {
    let sb = *host.disks[disk]
        .superblocks
        .lock()
        .unwrap()
        .last()
        .expect("a superblock");
    let mut block = [0; graid_engine::superblock::SUPERBLOCK_SIZE];
    graid_engine::superblock::encode(&sb, &mut block)
        .unwrap_or_else(|e| panic!("disk {disk}'s newest superblock: {e:?}"));
    sb.members
}

#[test]
fn a_mirror_grown_by_a_copy_rebuilds_it_and_writes_every_copy() {
    for seed in seeds(2) {
        for bitmap in [false, true] {
            let report = run(&mirror(2, bitmap), seed);
            assert!(report.errors.is_empty(), "seed {seed}: {:?}", report.errors);
            let host = &*report.host;
            let engine = &host.engine;
            let before = engine.geometry();
            // The new copy's device holds what it held before, not zeros.
            for (i, tag) in host.disks[2].sectors.lock().unwrap().iter_mut().enumerate() {
                *tag = GARBAGE ^ i as u64;
            }
            let grown =
                change(host, 3).unwrap_or_else(|e| panic!("seed {seed}: grow refused: {e}"));
            assert_eq!((grown.members(), grown.copies()), (3, 3));
            assert_eq!(grown.array_sectors(), before.array_sectors());
            assert_eq!(engine.members().len(), 3);
            // On disk: the count, and no slot for the new role; the array waits for a device.
            for disk in 0..2 {
                assert_eq!(newest_members(host, disk), 3, "seed {seed}: disk {disk}");
            }
            let sb = *host.disks[0].superblocks.lock().unwrap().last().unwrap();
            assert!(!sb.slots.contains(&Slot::Active { role: 2 }), "seed {seed}");
            assert_eq!(engine.members()[2].health(), Health::Faulty);
            assert_eq!(engine.add_target(), Ok(2), "seed {seed}");
            // The data reads back from the copies that hold it meanwhile.
            read_back_inline(host, &report.model, seed);
            let slot = engine.free_slot().expect("a free slot");
            engine.request_add(host, 2, NEW_DEVICE_UUID, slot);
            rebuild(host, 2, seed);
            assert_eq!(
                data_area(host, 2),
                data_area(host, 0),
                "seed {seed}: copy 2"
            );
            let check = scrub_now(host, ScrubMode::Check, seed);
            assert_eq!(check.mismatches, 0, "seed {seed}");
            // A write now reaches all three copies.
            let data: Vec<u64> = (0..40)
                .map(|i| (0x3c0b_1e50_0000u64 + i).wrapping_add(seed))
                .collect();
            assert_eq!(
                submit_inline_data(host, Op::Write, 100, data.clone()),
                Some(Status::Ok)
            );
            let mut model = report.model.clone();
            for (i, &d) in data.iter().enumerate() {
                model[100 + i] = Some(d);
            }
            read_back_inline(host, &model, seed);
            for role in 1..3 {
                assert_eq!(
                    data_area(host, role),
                    data_area(host, 0),
                    "seed {seed}: copy {role} after a write"
                );
            }
            let violations = host.violations.0.lock().unwrap().clone();
            assert!(violations.is_empty(), "seed {seed}: {violations:#?}");
        }
    }
}

#[test]
fn a_copy_is_dropped_only_once_its_member_failed() {
    for seed in seeds(2) {
        let report = run(&mirror(3, true), seed);
        assert!(report.errors.is_empty(), "seed {seed}: {:?}", report.errors);
        let host = &*report.host;
        let engine = &host.engine;
        assert_eq!(
            change(host, 2),
            Err(RaidDevicesError::InUse { role: 2 }),
            "seed {seed}"
        );
        assert_eq!(
            engine.geometry().members(),
            3,
            "seed {seed}: changed anyway"
        );
        fail_member(host, 2, seed);
        let shrunk = change(host, 2).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        assert_eq!(shrunk.members(), 2);
        assert_eq!(engine.members().len(), 2);
        assert_eq!(engine.state(), graid_engine::array::ArrayState::Optimal);
        for disk in 0..2 {
            assert_eq!(newest_members(host, disk), 2, "seed {seed}: disk {disk}");
        }
        read_back_inline(host, &report.model, seed);
        let check = scrub_now(host, ScrubMode::Check, seed);
        assert_eq!(check.mismatches, 0, "seed {seed}");
    }
}

#[test]
fn a_member_past_the_new_count_moves_into_a_removed_ones_place() {
    for seed in seeds(2) {
        let report = run(&mirror(3, true), seed);
        assert!(report.errors.is_empty(), "seed {seed}: {:?}", report.errors);
        let host = &*report.host;
        let engine = &host.engine;
        fail_member(host, 1, seed);
        let moving = engine.members()[2].uuid();
        let (_, moves) = engine.raid_devices_allowed(2).unwrap();
        assert_eq!(moves.iter().collect::<Vec<_>>(), [(2, 1)], "seed {seed}");
        // The platform's part: the device goes to its new role (the sim keeps role r on disk
        // r); the removed one's disk is scribbled over, as if gone.
        host.disks[1].swap_contents(&host.disks[2]);
        for (i, tag) in host.disks[2].sectors.lock().unwrap().iter_mut().enumerate() {
            *tag = GARBAGE ^ i as u64;
        }
        // Moves other than those of now (the platform moved its devices by an older look)
        // are refused, and nothing changes.
        assert_eq!(
            engine.set_raid_devices(host, 2, &Moves::default()),
            Err(RaidDevicesError::Busy)
        );
        assert_eq!(engine.geometry().members(), 3, "seed {seed}");
        change(host, 2).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        assert_eq!(engine.state(), graid_engine::array::ArrayState::Optimal);
        assert_eq!(engine.members()[1].uuid(), moving, "seed {seed}");
        assert!(engine.members()[1].is_in_sync());
        for disk in 0..2 {
            assert_eq!(newest_members(host, disk), 2, "seed {seed}: disk {disk}");
        }
        let sb = *host.disks[0].superblocks.lock().unwrap().last().unwrap();
        assert_eq!(sb.slots[2], Slot::Active { role: 1 }, "seed {seed}");
        assert_eq!(
            sb.slots[1],
            Slot::Faulty,
            "seed {seed}: the removed device's entry"
        );
        read_back_inline(host, &report.model, seed);
        let check = scrub_now(host, ScrubMode::Check, seed);
        assert_eq!(check.mismatches, 0, "seed {seed}");
        // Writes reach the moved member in its new role.
        let data: Vec<u64> = (0..16)
            .map(|i| (0x6d76_0000u64 + i).wrapping_add(seed))
            .collect();
        assert_eq!(
            submit_inline_data(host, Op::Write, 300, data),
            Some(Status::Ok)
        );
        assert_eq!(data_area(host, 1), data_area(host, 0), "seed {seed}");
    }
}

#[test]
fn what_cannot_change_its_copies_is_refused_with_the_reason() {
    let raid5 = Level::Raid5(ParityLayout::LeftSymmetric);
    let report = run(&Scenario::new(raid5, 4, 16), 1);
    let host = &*report.host;
    assert_eq!(change(host, 5), Err(RaidDevicesError::Level(raid5)));
    let report = run(&mirror(2, false), 1);
    let (host, engine) = (&*report.host, &report.host.engine);
    for count in [1, 33] {
        assert!(
            matches!(change(host, count), Err(RaidDevicesError::Geometry(_))),
            "{count} members"
        );
    }
    engine.start_scrub(host, ScrubMode::Check).unwrap();
    assert_eq!(change(host, 3), Err(RaidDevicesError::Busy));
    assert_eq!(engine.geometry().members(), 2);
    assert!(RaidDevicesError::InUse { role: 2 }
        .to_string()
        .contains("fail and remove"));
}

/// Power cuts during a change of the copies from `from` to `to` (a shrink fails the last
/// member first), each assembled at one count or the other with nothing lost; returns how
/// many assembled at the new count.
fn cut_during_changes(from: u32, to: u32, cuts: u64) -> u32 {
    use graid_sim::crash::{power_cut_during, Workload};
    use std::sync::atomic::{AtomicU64, Ordering};
    const LOAD: Workload = Workload {
        ops: 160,
        region: 1024,
        max_len: 24,
    };
    let changed = AtomicU64::new(0);
    let mut assembled_new = 0;
    for seed in seeds(cuts) {
        for bitmap in [false, true] {
            let s = mirror(from, bitmap);
            let at = seed % 24;
            let outcome = power_cut_during(&s, seed, LOAD, at, &|host| {
                if to < from {
                    for role in to..from {
                        host.engine.request_fail(&**host, role);
                        host.engine.work(&**host);
                    }
                }
                if change(host, to).is_ok() {
                    changed.fetch_add(1, Ordering::Relaxed);
                }
            })
            .unwrap_or_else(|e| panic!("seed {seed}: not started: {e:?}"));
            assert!(
                outcome.wrong.is_empty(),
                "seed {seed}: sectors no write touched since the last flush read back wrong: \
                 {:?}",
                outcome.wrong
            );
            // No member that held a copy before is left out: one whose superblock write the
            // cut missed is one update behind with the other count, and joins.
            let kept = from.min(to);
            assert!(
                outcome.started.missing.iter().all(|role| role >= kept),
                "seed {seed}: members {:?} left out",
                outcome.started.missing
            );
            let now = outcome.started.host.engine.geometry().members();
            assert!(
                now == from || now == to,
                "seed {seed}: {now} members, neither {from} nor {to}"
            );
            if now == to {
                assembled_new += 1;
            }
        }
    }
    assert!(changed.load(Ordering::Relaxed) > 0, "no change ran");
    assembled_new
}

#[test]
fn a_power_cut_while_a_mirror_takes_a_copy_loses_nothing() {
    assert!(
        cut_during_changes(2, 3, 10) > 0,
        "no cut came after the grow's superblocks"
    );
}

#[test]
fn a_power_cut_while_a_mirror_drops_a_copy_loses_nothing() {
    assert!(
        cut_during_changes(3, 2, 10) > 0,
        "no cut came after the shrink's superblocks"
    );
}
