//! The array engine under random concurrent I/O and member faults, in its host home. A failing
//! run prints its seed; `GRAID_ENGINE_SEED=<seed>` replays it, `GRAID_ENGINE_ROUNDS=<n>` runs
//! longer.

use graid_engine::array::ArrayState;
use graid_engine::geometry::{Level, ParityLayout};
use graid_engine::members::Health;
use graid_engine::platform::{MemberEvent, Op, Status};
use graid_engine::superblock::Slot;
use graid_sim::host::Faults;
use graid_sim::stress::{
    add_spare, check_copies, check_mirrors_match, check_superblocks, lose_member, new_host, run,
    run_overlapping, scrub_now, seeds, submit_inline, submit_inline_segments, total_member_bytes,
    wait_rebuilt, Report, Scenario, Threads, NEW_DEVICE_UUID,
};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use std::sync::atomic::Ordering;

#[test]
fn healthy_arrays_serve_random_concurrent_io_exactly() {
    let shapes = [
        (Level::Raid0, 2, 8),
        (Level::Raid0, 5, 32),
        (Level::Raid1, 2, 0),
        (Level::Raid1, 3, 0),
        (Level::Raid10, 4, 16),
        (Level::Raid10, 5, 8),
    ];
    for seed in seeds(2) {
        for &(level, members, chunk) in &shapes {
            let report = run(&Scenario::new(level, members, chunk), seed);
            assert!(
                report.errors.is_empty(),
                "seed {seed}: {level:?}: {:?}",
                report.errors
            );
            assert_eq!(report.host.engine.state(), ArrayState::Optimal);
            // Only writes waiting for the array to be marked dirty went through the worker.
            let waiting_at_once = report.host.slots.len() as u64;
            assert!(
                report.host.deferrals.load(Ordering::Relaxed)
                    <= report.host.engine.dirty_marks() * waiting_at_once,
                "seed {seed}: {level:?}: deferred for another reason"
            );
            assert_eq!(
                report.host.engine.dirty_marks() > 0,
                level != Level::Raid0,
                "seed {seed}: {level:?}"
            );
            check_copies(&report, seed);
            // Every byte read came from one copy; every byte written went to every copy.
            let copies = u64::from(report.host.engine.geometry().copies());
            let (read, written) = total_member_bytes(&report);
            assert_eq!(read, report.ok_read_sectors * 512, "seed {seed}: {level:?}");
            assert_eq!(
                written,
                report.ok_write_sectors * 512 * copies,
                "seed {seed}: {level:?}"
            );
            // Flushes reached every member.
            let flushes: Vec<u64> = report
                .host
                .disks
                .iter()
                .take(members as usize)
                .map(|d| d.flushes.load(Ordering::Relaxed))
                .collect();
            assert!(
                flushes.windows(2).all(|w| w[0] == w[1]),
                "seed {seed}: {flushes:?}"
            );
        }
    }
}

#[test]
fn a_mirror_that_dies_under_load_is_failed_and_nothing_is_lost() {
    for seed in seeds(3) {
        let mut rng = StdRng::seed_from_u64(seed);
        for (level, members, chunk) in [
            (Level::Raid1, 2, 0),
            (Level::Raid1, 3, 0),
            (Level::Raid10, 4, 16),
            (Level::Raid10, 5, 8),
        ] {
            let victim = rng.random_range(0..members as usize);
            let die_after = rng.random_range(0..400);
            let scenario = Scenario::new(level, members, chunk).with_fault(
                victim,
                Faults {
                    die_after: Some(die_after),
                    ..Faults::default()
                },
            );
            let report = run(&scenario, seed);
            let engine = &report.host.engine;
            assert!(
                report.errors.is_empty(),
                "seed {seed}: {level:?} errors: {:?}",
                report.errors
            );
            assert_eq!(
                engine.state(),
                ArrayState::Degraded,
                "seed {seed}: {level:?}"
            );
            for (i, m) in engine.members().iter().enumerate() {
                assert_eq!(
                    m.is_faulty(),
                    i == victim,
                    "seed {seed}: {level:?} member {i}"
                );
            }
            assert_eq!(report.host.members_failed_by_io(), vec![victim as u32]);
            assert!(report.host.deferrals.load(Ordering::Relaxed) > 0);
            check_copies(&report, seed);
            check_superblocks(&report, seed);
        }
    }
}

#[test]
fn random_errors_on_one_member_fail_only_that_member() {
    for seed in seeds(3) {
        let mut rng = StdRng::seed_from_u64(seed);
        for (level, members, chunk) in [
            (Level::Raid1, 2, 0),
            (Level::Raid10, 4, 8),
            (Level::Raid10, 6, 64),
        ] {
            let victim = rng.random_range(0..members as usize);
            let scenario = Scenario::new(level, members, chunk).with_fault(
                victim,
                Faults {
                    error_ppm: 20_000,
                    ..Faults::default()
                },
            );
            let report = run(&scenario, seed);
            assert!(
                report.errors.is_empty(),
                "seed {seed}: {level:?}: {:?}",
                report.errors
            );
            let engine = &report.host.engine;
            for (i, m) in engine.members().iter().enumerate() {
                assert!(
                    !m.is_faulty() || i == victim,
                    "seed {seed}: {level:?} member {i} failed"
                );
            }
            check_copies(&report, seed);
            check_superblocks(&report, seed);
        }
    }
}

#[test]
fn raid10_survives_failures_in_different_pairs_and_keeps_the_last_copy_of_a_pair() {
    for seed in seeds(3) {
        // 4 members, near-2: pairs (0,1) and (2,3).
        for (a, b, same_pair) in [(0, 2, false), (1, 3, false), (0, 1, true), (2, 3, true)] {
            let dies = |n| Faults {
                die_after: Some(n),
                ..Faults::default()
            };
            let scenario = Scenario::new(Level::Raid10, 4, 16)
                .with_fault(a, dies(50))
                .with_fault(b, dies(250));
            let report = run(&scenario, seed);
            let host = &report.host;
            let engine = &host.engine;
            if !same_pair {
                assert!(
                    report.errors.is_empty(),
                    "seed {seed}: ({a},{b}): {:?}",
                    report.errors
                );
                assert_eq!(engine.state(), ArrayState::Degraded);
            } else {
                // The second member of the pair holds the last copy: it stays in the array, the
                // requests it cannot serve fail, and the array takes no more writes.
                assert!(
                    !report.errors.is_empty(),
                    "seed {seed}: ({a},{b}) lost a pair without an error"
                );
                assert!(report.errors.iter().all(|&(_, s)| s == Status::IoError));
                assert_eq!(engine.state(), ArrayState::Broken, "seed {seed}");
                assert_eq!(engine.members()[a].health(), Health::Faulty);
                assert_eq!(engine.members()[b].health(), Health::Active);
                assert!(host
                    .members_with(MemberEvent::KeptLastCopy)
                    .contains(&(b as u32)));
                // The other pair still serves reads; no write goes anywhere.
                let other_pair_chunk = if a == 0 { 16 } else { 0 };
                assert_eq!(
                    submit_inline(host, Op::Read, other_pair_chunk, 8),
                    Some(Status::Ok)
                );
                assert_eq!(
                    submit_inline(host, Op::Write, other_pair_chunk, 8),
                    Some(Status::IoError)
                );
                let lost_pair_chunk = 16 - other_pair_chunk;
                assert_eq!(
                    submit_inline(host, Op::Read, lost_pair_chunk, 8),
                    Some(Status::IoError)
                );
            }
            check_copies(&report, seed);
            check_superblocks(&report, seed);
        }
    }
}

#[test]
fn members_fail_on_request_unless_they_hold_the_last_copy() {
    use graid_engine::admin::FailError;
    for seed in seeds(2) {
        // RAID 10, pairs (0,1) and (2,3); RAID 6 of five; RAID 0 has nothing to spare.
        let cases: [(Level, u32, u32, &[u32], u32); 3] = [
            (Level::Raid10, 4, 16, &[0, 3], 1),
            (
                Level::Raid6(graid_engine::geometry::ParityLayout::LeftSymmetric),
                5,
                16,
                &[1, 4],
                2,
            ),
            (Level::Raid0, 2, 16, &[], 0),
        ];
        for (level, members, chunk, spare, last) in cases {
            let report = run(&Scenario::new(level, members, chunk), seed);
            let host = &*report.host;
            let engine = &host.engine;
            for &m in spare {
                engine.request_fail(host, m);
                engine.work(host);
                assert_eq!(engine.fail_outcome(m), Ok(()), "seed {seed}: {level:?} {m}");
                assert_eq!(engine.members()[m as usize].health(), Health::Faulty);
                assert!(
                    host.recorded_faulty(m),
                    "seed {seed}: {m} not in the superblocks"
                );
                assert!(host.members_with(MemberEvent::FailedOnRequest).contains(&m));
            }
            // Asked again: nothing changes, and it is still reported failed.
            if let Some(&m) = spare.first() {
                engine.request_fail(host, m);
                engine.work(host);
                assert_eq!(engine.fail_outcome(m), Ok(()));
            }
            // Refused: the array keeps serving reads and writes (a refusal breaks nothing).
            let events = engine.events();
            engine.request_fail(host, last);
            engine.work(host);
            assert_eq!(
                engine.fail_outcome(last),
                Err(FailError::LastCopy),
                "seed {seed}"
            );
            assert_eq!(engine.members()[last as usize].health(), Health::Active);
            assert_eq!(
                engine.events(),
                events,
                "seed {seed}: a refusal wrote superblocks"
            );
            assert_ne!(engine.state(), ArrayState::Broken);
            assert_eq!(submit_inline(host, Op::Write, 0, 64), Some(Status::Ok));
            assert_eq!(submit_inline(host, Op::Read, 0, 64), Some(Status::Ok));
            assert_eq!(engine.fail_outcome(members + 1), Err(FailError::NoMember));
            check_superblocks(&report, seed);
        }
    }
}

#[test]
fn raid0_reports_member_errors_and_keeps_its_members() {
    for seed in seeds(3) {
        let scenario = Scenario::new(Level::Raid0, 3, 16).with_fault(
            1,
            Faults {
                error_ppm: 30_000,
                ..Faults::default()
            },
        );
        let report = run(&scenario, seed);
        let engine = &report.host.engine;
        assert!(
            !report.errors.is_empty(),
            "seed {seed}: errors were injected but none came back"
        );
        assert!(
            engine.members().iter().all(|m| !m.is_faulty()),
            "seed {seed}: RAID0 has no member to spare"
        );
        assert_eq!(report.host.deferrals.load(Ordering::Relaxed), 0);
        assert!(engine.members()[1].stats().errors > 0);
        check_copies(&report, seed);
    }
}

#[test]
fn refused_member_io_fails_the_request_and_nothing_else() {
    for seed in seeds(2) {
        for (level, members, chunk) in [
            (Level::Raid0, 4, 8),
            (Level::Raid1, 2, 0),
            (Level::Raid10, 4, 8),
        ] {
            let mut scenario = Scenario::new(level, members, chunk);
            scenario.submit_error_ppm = 20_000;
            let report = run(&scenario, seed);
            let engine = &report.host.engine;
            assert!(
                !report.errors.is_empty(),
                "seed {seed}: {level:?}: no refusal surfaced"
            );
            assert_eq!(
                engine.state(),
                ArrayState::Optimal,
                "seed {seed}: a refusal is not a member failure"
            );
            check_copies(&report, seed);
        }
    }
}

#[test]
fn flushes_skip_failed_members() {
    for seed in seeds(2) {
        let scenario = Scenario::new(Level::Raid1, 3, 0).with_fault(
            0,
            Faults {
                die_after: Some(0),
                ..Faults::default()
            },
        );
        let report = run(&scenario, seed);
        assert!(report.errors.is_empty(), "seed {seed}: {:?}", report.errors);
        let disks = &report.host.disks;
        // Only flushes already in flight when it failed (at most one per request) reach it.
        let in_flight = (scenario.submitters * scenario.batch) as u64;
        assert!(
            disks[0].flush_attempts.load(Ordering::Relaxed) <= in_flight,
            "seed {seed}"
        );
        assert!(
            disks[1].flushes.load(Ordering::Relaxed) > in_flight,
            "seed {seed}: too few flushes to tell"
        );
        assert_eq!(
            disks[1].flushes.load(Ordering::Relaxed),
            disks[2].flushes.load(Ordering::Relaxed),
            "seed {seed}"
        );
        check_superblocks(&report, seed);
    }
}

/// A request whose segments do not cover it exactly is refused before anything is sent.
#[test]
fn segments_that_do_not_cover_the_request_are_refused() {
    let mut scenario = Scenario::new(Level::Raid1, 2, 0);
    (scenario.submitters, scenario.batch, scenario.rounds) = (1, 1, 0);
    let report = run(&scenario, 1);
    let host = &report.host;
    let bad = [
        vec![(10, 3), (14, 4)],          // a hole
        vec![(10, 5), (14, 4)],          // an overlap
        vec![(10, 4)],                   // too short
        vec![(10, 4), (14, 5)],          // too long
        vec![(10, 4), (14, 0), (14, 4)], // an empty segment
        vec![],
    ];
    for segments in bad {
        let status = submit_inline_segments(host, Op::Write, 10, 8, segments.clone());
        assert_eq!(status, Some(Status::IoError), "{segments:?}");
        assert_eq!(host.slots[0].ends.load(Ordering::Relaxed), 1);
        assert_eq!(host.slots[0].state.pending(), 0);
    }
    let written: u64 = host.engine.members().iter().map(|m| m.stats().writes).sum();
    assert_eq!(written, 0, "a refused request reached a member");
    assert_eq!(
        submit_inline_segments(host, Op::Write, 10, 8, vec![(10, 3), (13, 5)]),
        Some(Status::Ok)
    );
}

#[test]
fn out_of_range_requests_fail_cleanly() {
    let mut scenario = Scenario::new(Level::Raid0, 2, 8);
    scenario.submitters = 1;
    scenario.batch = 1;
    scenario.rounds = 0;
    let report = run(&scenario, 1);
    let host = &report.host;
    let end = host.engine.geometry().array_sectors();
    for (start, sectors) in [
        (end, 1),
        (end - 1, 2),
        (u64::MAX, 1),
        (u64::MAX - 1, u64::MAX),
    ] {
        for op in [Op::Read, Op::Write, Op::Discard] {
            assert_eq!(
                submit_inline(host, op, start, sectors),
                Some(Status::IoError),
                "{op:?} {start}+{sectors}"
            );
        }
    }
    // The last sector itself is fine.
    assert_eq!(submit_inline(host, Op::Write, end - 1, 1), Some(Status::Ok));
    assert_eq!(submit_inline(host, Op::Read, end - 1, 1), Some(Status::Ok));
}

#[test]
fn discard_errors_fail_neither_the_member_nor_the_request() {
    for seed in seeds(2) {
        for (level, members, chunk) in [(Level::Raid1, 2, 0), (Level::Raid10, 4, 16)] {
            for faults in [
                Faults {
                    discard_errors: true,
                    ..Faults::default()
                },
                Faults {
                    no_discard: true,
                    ..Faults::default()
                },
            ] {
                let scenario = Scenario::new(level, members, chunk).with_fault(1, faults);
                let report = run(&scenario, seed);
                assert!(report.errors.is_empty(), "seed {seed}: {:?}", report.errors);
                assert_eq!(report.host.engine.state(), ArrayState::Optimal);
                assert!(
                    report.host.engine.members()[1].stats().errors > 0,
                    "seed {seed}: no discard failed"
                );
                check_copies(&report, seed);
            }
        }
    }
}

#[test]
fn raid0_reports_a_refused_discard() {
    for seed in seeds(2) {
        let scenario = Scenario::new(Level::Raid0, 3, 16).with_fault(
            2,
            Faults {
                no_discard: true,
                ..Faults::default()
            },
        );
        let report = run(&scenario, seed);
        assert!(!report.errors.is_empty());
        assert!(
            report
                .errors
                .iter()
                .all(|&e| e == (Op::Discard, Status::NotSupported)),
            "seed {seed}: {:?}",
            report.errors
        );
        assert_eq!(report.host.engine.state(), ArrayState::Optimal);
        check_copies(&report, seed);
    }
}

#[test]
fn read_errors_are_repaired_from_another_copy_without_failing_the_member() {
    for seed in seeds(3) {
        for (level, members, chunk) in [
            (Level::Raid1, 2, 0),
            (Level::Raid1, 3, 0),
            (Level::Raid10, 4, 16),
        ] {
            let scenario = Scenario::new(level, members, chunk).with_fault(
                1,
                Faults {
                    bad_sectors: 200,
                    ..Faults::default()
                },
            );
            let report = run(&scenario, seed);
            let host = &report.host;
            assert!(
                report.errors.is_empty(),
                "seed {seed}: {level:?}: {:?}",
                report.errors
            );

            let corrected = host.engine.members()[1].stats().corrected;
            assert!(
                corrected > 0,
                "seed {seed}: {level:?}: nothing was repaired"
            );
            assert_eq!(
                host.members_with(MemberEvent::ReadErrorRepaired).len() as u64,
                corrected
            );
            check_copies(&report, seed);
        }
    }
}

#[test]
fn a_member_whose_repair_fails_is_failed_and_the_read_still_succeeds() {
    for seed in seeds(3) {
        for (level, members, chunk) in [(Level::Raid1, 2, 0), (Level::Raid10, 4, 16)] {
            let scenario = Scenario::new(level, members, chunk).with_fault(
                1,
                Faults {
                    bad_sectors: 200,
                    bad_sectors_stick: true,
                    ..Faults::default()
                },
            );
            let report = run(&scenario, seed);
            let host = &report.host;
            assert!(
                report.errors.is_empty(),
                "seed {seed}: {level:?}: {:?}",
                report.errors
            );
            assert_eq!(
                host.members_with(MemberEvent::Failed),
                vec![1],
                "seed {seed}"
            );
            assert_eq!(host.engine.state(), ArrayState::Degraded);
            check_copies(&report, seed);
            check_superblocks(&report, seed);
        }
    }
}

/// A read that fails after the rewrite (the verify pass) may leave anything in the buffers:
/// the member is failed and the range read again from the good copy, never returned as is.
#[test]
fn a_failed_read_back_fails_the_member_and_is_never_returned() {
    let mut failed_by_verify = 0;
    for seed in seeds(3) {
        for (level, members, chunk) in [(Level::Raid1, 2, 0), (Level::Raid10, 4, 16)] {
            let scenario = Scenario::new(level, members, chunk).with_fault(
                1,
                Faults {
                    read_error_ppm: 300_000,
                    ..Faults::default()
                },
            );
            let report = run(&scenario, seed);
            let host = &report.host;
            assert!(report.errors.is_empty(), "seed {seed}: {:?}", report.errors);
            // Writes never fail here: only a failed read back can fail the member.
            let failed = host.members_with(MemberEvent::Failed);
            assert!(
                failed.is_empty() || failed == [1],
                "seed {seed}: {failed:?}"
            );
            failed_by_verify += failed.len();
            check_copies(&report, seed);
        }
    }
    assert!(
        failed_by_verify > 0,
        "no read back failed: nothing was tested"
    );
}

#[test]
fn the_last_copy_is_never_failed() {
    for seed in seeds(3) {
        // Member 0 dies at once; member 1, the last copy, has bad blocks and a flaky link.
        let scenario = Scenario::new(Level::Raid1, 2, 0)
            .with_fault(
                0,
                Faults {
                    die_after: Some(0),
                    ..Faults::default()
                },
            )
            .with_fault(
                1,
                Faults {
                    bad_sectors: 50,
                    error_ppm: 5_000,
                    ..Faults::default()
                },
            );
        let report = run(&scenario, seed);
        let host = &report.host;
        let engine = &host.engine;
        assert_eq!(engine.members()[1].health(), Health::Active, "seed {seed}");
        assert_ne!(engine.state(), ArrayState::Failed, "seed {seed}");
        assert!(
            report.errors.iter().all(|&(_, s)| s == Status::IoError),
            "seed {seed}: {:?}",
            report.errors
        );
        assert!(!report.errors.is_empty(), "seed {seed}: no error surfaced");
        // Member 0's failure is on record on the last copy.
        let newest = host.disks[1]
            .newest_superblock()
            .expect("a superblock update");
        assert_eq!(newest.slots[0], Slot::Faulty);
    }
}

#[test]
fn a_member_that_cannot_take_its_superblock_is_failed_too() {
    for seed in seeds(2) {
        let scenario = Scenario::new(Level::Raid1, 3, 0)
            .with_fault(
                0,
                Faults {
                    die_after: Some(100),
                    ..Faults::default()
                },
            )
            .with_fault(
                2,
                Faults {
                    superblock_errors: true,
                    ..Faults::default()
                },
            );
        let report = run(&scenario, seed);
        let host = &report.host;
        assert!(report.errors.is_empty(), "seed {seed}: {:?}", report.errors);
        // Member 0 dies on a request's I/O, or on a superblock write (the dirty and clean
        // marks write them whenever the array starts or stops writing).
        let mut failed = host.members_failed_by_io();
        failed.sort();
        assert_eq!(failed, vec![0, 2], "seed {seed}");
        assert!(host
            .members_with(MemberEvent::SuperblockWriteFailed)
            .contains(&2));
        assert!(!host.members_with(MemberEvent::Failed).contains(&2));
        let newest = host.disks[1]
            .newest_superblock()
            .expect("a superblock update");
        assert_eq!(
            (newest.slots[0], newest.slots[2]),
            (Slot::Faulty, Slot::Faulty)
        );
        assert_eq!(host.engine.state(), ArrayState::Degraded);
        check_copies(&report, seed);
        check_superblocks(&report, seed);
    }
}

#[test]
fn mirrors_not_known_in_sync_read_from_one_copy() {
    for seed in seeds(2) {
        for (in_sync, level, members, chunk) in [
            (false, Level::Raid1, 2, 0),
            (false, Level::Raid10, 4, 16),
            (true, Level::Raid1, 2, 0),
            (true, Level::Raid10, 4, 16),
        ] {
            let mut scenario = Scenario::new(level, members, chunk);
            scenario.in_sync = in_sync;
            let report = run(&scenario, seed);
            assert!(report.errors.is_empty(), "seed {seed}: {:?}", report.errors);
            // Copy 0 of near-2 RAID 10 on 4 members lives on members 0 and 2.
            let second_copies: u64 = report
                .host
                .engine
                .members()
                .iter()
                .skip(1)
                .step_by(2)
                .map(|m| m.stats().reads)
                .sum();
            if in_sync {
                assert!(
                    second_copies > 0,
                    "seed {seed}: {level:?}: reads not spread"
                );
            } else {
                assert_eq!(
                    second_copies, 0,
                    "seed {seed}: {level:?}: read another copy"
                );
            }
        }
    }
}

/// Read repair rewrites a range with what the other copy held; a write to the range landing
/// between that read and the rewrite would be undone on one copy only. Writes wait while a
/// repair runs (md's `freeze_array`); this hunts for the race with overlapping requests while
/// sectors of member 0 keep going bad.
#[test]
fn read_repair_never_races_a_write() {
    for seed in seeds(2) {
        for (level, members, chunk) in [(Level::Raid1, 2, 0), (Level::Raid10, 4, 8)] {
            let mut scenario = Scenario::new(level, members, chunk).with_fault(
                0,
                Faults {
                    rot_ppm: 200_000,
                    ..Faults::default()
                },
            );
            scenario.rounds *= 10;
            scenario.inline_percent = 0;
            let host = run_overlapping(&scenario, seed, 16);
            let corrected = host.engine.members()[0].stats().corrected;
            assert!(
                corrected > 0,
                "seed {seed}: {level:?}: nothing was repaired"
            );
            assert_eq!(
                host.engine.state(),
                ArrayState::Optimal,
                "seed {seed}: {level:?}"
            );
        }
    }
}

#[test]
fn a_member_added_under_load_is_rebuilt_exactly() {
    for seed in seeds(3) {
        // RAID 1 of two and three; RAID 10 of four and five (odd: copies cross rows); the
        // rebuilt member in different places.
        let cases = [
            (Level::Raid1, 2, 0, 1),
            (Level::Raid1, 3, 0, 0),
            (Level::Raid10, 4, 16, 2),
            (Level::Raid10, 5, 8, 4),
        ];
        for (level, members, chunk, target) in cases {
            // Big enough for many rebuild windows while the submitters run.
            let scenario = Scenario {
                rebuild: Some(target),
                data_sectors: 32768,
                ..Scenario::new(level, members, chunk)
            };
            let report = run(&scenario, seed);
            let host = &*report.host;
            let engine = &host.engine;
            let member = &engine.members()[target as usize];
            assert!(
                member.is_in_sync(),
                "seed {seed}: {level:?} member {target} not rebuilt"
            );
            assert_eq!(member.uuid(), NEW_DEVICE_UUID);
            assert_eq!(engine.state(), ArrayState::Optimal, "seed {seed}");
            assert!(report.errors.is_empty(), "seed {seed}: {:?}", report.errors);
            assert!(host.members_with(MemberEvent::Added).contains(&target));
            assert!(host.members_with(MemberEvent::Rebuilt).contains(&target));
            assert!(host.rebuild_copies.load(Ordering::Relaxed) > 0);
            check_mirrors_match(&report, seed);
            // The superblocks end saying so: the new device in a new slot, in sync; its
            // old slot faulty, so the old device is refused if it comes back.
            let sb = host.disks[target as usize].newest_superblock().unwrap();
            assert_eq!(sb.member_uuid, NEW_DEVICE_UUID);
            assert_ne!(sb.this_slot, target, "seed {seed}: the old slot reused");
            assert_eq!(
                sb.slots[sb.this_slot as usize],
                Slot::Active { role: target as u8 }
            );
            assert_eq!(sb.slots[target as usize], Slot::Faulty);
            assert_eq!(
                sb.recovery_offset,
                graid_engine::superblock::RECOVERY_COMPLETE
            );
        }
    }
}

/// A member that failed keeps its data and comes back (re-add) while the submitters write:
/// its rebuild skips the regions the bitmap shows unwritten since it left, under concurrent
/// writes to the others, and every copy or parity matches after (every read checked against
/// the model throughout).
#[test]
fn a_re_added_member_under_load_is_rebuilt_where_the_bitmap_marks_writes() {
    for seed in seeds(2) {
        let cases = [
            (Level::Raid1, 2, 0, 1),
            (Level::Raid10, 4, 16, 2),
            (Level::Raid5(ParityLayout::LeftSymmetric), 4, 16, 1),
            (Level::Raid6(ParityLayout::LeftSymmetric), 5, 8, 3),
        ];
        for (level, members, chunk, target) in cases {
            let scenario = Scenario {
                rebuild: Some(target),
                re_add: true,
                bitmap_region_sectors: Some(256),
                data_sectors: 32768,
                ..Scenario::new(level, members, chunk)
            };
            let report = run(&scenario, seed);
            let host = &*report.host;
            let engine = &host.engine;
            assert!(
                engine.members()[target as usize].is_in_sync(),
                "seed {seed}: {level:?} member {target} not rebuilt"
            );
            assert_eq!(engine.state(), ArrayState::Optimal, "seed {seed}");
            assert!(report.errors.is_empty(), "seed {seed}: {:?}", report.errors);
            if level.has_parity() {
                check_copies(&report, seed);
            } else {
                check_mirrors_match(&report, seed);
            }
            eprintln!(
                "seed {seed}: {level:?}: {} of {} member sectors skipped",
                engine.rebuild_skipped_sectors(),
                host.data_sectors
            );
        }
    }
}

#[test]
fn a_spare_takes_a_failed_members_place_and_is_rebuilt_under_load() {
    for seed in seeds(2) {
        for (level, members, chunk, target) in [(Level::Raid1, 2, 0, 1), (Level::Raid10, 4, 16, 3)]
        {
            let scenario = Scenario {
                rebuild: Some(target),
                via_spare: true,
                data_sectors: 16384,
                ..Scenario::new(level, members, chunk)
            };
            let report = run(&scenario, seed);
            let host = &*report.host;
            let engine = &host.engine;
            assert!(
                host.takeovers_wanted.load(Ordering::SeqCst) > 0,
                "seed {seed}"
            );
            assert!(
                engine.spares().is_empty(),
                "seed {seed}: the spare is still a spare"
            );
            assert!(engine.takeover().is_none());
            let member = &engine.members()[target as usize];
            assert!(member.is_in_sync(), "seed {seed}: {level:?} not rebuilt");
            assert_eq!(member.uuid(), NEW_DEVICE_UUID);
            assert_eq!(engine.state(), ArrayState::Optimal, "seed {seed}");
            assert!(report.errors.is_empty(), "seed {seed}: {:?}", report.errors);
            check_mirrors_match(&report, seed);
            // The spare's slot now holds the role; the failed device's is retired.
            let sb = host.disks[target as usize].newest_superblock().unwrap();
            assert_eq!(sb.member_uuid, NEW_DEVICE_UUID);
            assert_eq!(
                sb.slots[sb.this_slot as usize],
                Slot::Active { role: target as u8 }
            );
            assert_eq!(sb.slots[target as usize], Slot::Faulty);
        }
    }
}

#[test]
fn a_rebuild_source_that_dies_midway_is_replaced_by_another_copy_or_stops_the_rebuild() {
    for seed in seeds(3) {
        let dies = Faults {
            die_after_rebuild_ios: Some(10),
            ..Faults::default()
        };
        // RAID 1 of three: the rebuild of member 0 reads from member 1 until it dies, then
        // from member 2, and finishes.
        let scenario = Scenario {
            rebuild: Some(0),
            data_sectors: 16384,
            ..Scenario::new(Level::Raid1, 3, 0)
        }
        .with_fault(1, dies);
        let report = run(&scenario, seed);
        let engine = &report.host.engine;
        assert!(engine.members()[0].is_in_sync(), "seed {seed}: not rebuilt");
        assert!(
            engine.members()[1].is_faulty(),
            "seed {seed}: the source did not die"
        );
        assert!(report.errors.is_empty(), "seed {seed}: {:?}", report.errors);
        check_mirrors_match(&report, seed);
        // RAID 10 of four: member 2's only source (3) dies: the rebuild stops, and the array
        // either keeps the dead last copy and takes no more writes (broken, md's rule) or has
        // lost that half; requests there fail, and nothing wrong is ever read (`run` checks).
        let scenario = Scenario {
            rebuild: Some(2),
            data_sectors: 16384,
            ..Scenario::new(Level::Raid10, 4, 16)
        }
        .with_fault(3, dies);
        let report = run(&scenario, seed);
        let engine = &report.host.engine;
        assert!(engine.rebuild_stalled(), "seed {seed}: the rebuild went on");
        assert!(engine.members()[2].is_recovering());
        let state = engine.state();
        assert!(
            matches!(state, ArrayState::Broken | ArrayState::Failed),
            "seed {seed}: {state:?}"
        );
        assert!(report
            .host
            .members_with(MemberEvent::RebuildStalled)
            .contains(&2));
    }
}

#[test]
fn a_rebuild_target_that_dies_fails_alone() {
    for seed in seeds(3) {
        let scenario = Scenario {
            rebuild: Some(1),
            ..Scenario::new(Level::Raid10, 4, 16)
        }
        .with_fault(
            1,
            Faults {
                die_after: Some(40),
                ..Faults::default()
            },
        );
        let report = run(&scenario, seed);
        let engine = &report.host.engine;
        assert_eq!(engine.members()[1].health(), Health::Faulty, "seed {seed}");
        assert_eq!(engine.state(), ArrayState::Degraded);
        // Requests never saw it: it held nothing anyone read.
        assert!(report.errors.is_empty(), "seed {seed}: {:?}", report.errors);
        assert!(report.host.recorded_faulty(1));
        check_copies(&report, seed);
    }
}

/// The slot table (64 entries) does not fill up over an array's life: after more failures
/// and new devices than it has entries, each new device still gets one (an entry a device
/// left, given away), the superblocks name every role once, the data reads back, and a device
/// whose entry was given away is stale at assembly.
#[test]
fn slot_entries_devices_left_are_given_to_new_ones() {
    use graid_engine::assembly::{member_status, pick_freshest, MemberStatus};
    use graid_sim::stress::{fail_member, read_back_inline};
    for seed in seeds(1) {
        let mut s = Scenario::new(Level::Raid5(ParityLayout::LeftSymmetric), 3, 16);
        s.data_sectors = 128;
        let report = run(&s, seed);
        let host = &*report.host;
        let engine = &host.engine;
        let first = host.disks[1].newest_superblock().expect("a superblock");
        for round in 0..70u8 {
            fail_member(host, 1, seed);
            let slot = engine
                .free_slot()
                .unwrap_or_else(|| panic!("seed {seed}: round {round}: no free entry"));
            let uuid = [round.wrapping_add(1); 16];
            engine.request_add(host, 1, uuid, slot);
            engine.work(host);
            assert_eq!(
                engine.add_outcome(1, &uuid),
                Ok(()),
                "seed {seed}: round {round}"
            );
            while engine.rebuild_target().is_some() {
                engine.work(host);
            }
        }
        assert_eq!(engine.state(), ArrayState::Optimal, "seed {seed}");
        let now: Vec<_> = (0..3)
            .map(|d| host.disks[d].newest_superblock().expect("a superblock"))
            .collect();
        for sb in &now {
            let mut roles: Vec<u8> = (sb.slots.iter())
                .filter_map(|s| match s {
                    Slot::Active { role } => Some(*role),
                    _ => None,
                })
                .collect();
            roles.sort_unstable();
            assert_eq!(roles, [0, 1, 2], "seed {seed}: {:?}", sb.slots);
        }
        let sbs = [now[0], now[2], first];
        let freshest = pick_freshest(&sbs, &first.array_uuid).expect("the array");
        assert!(
            matches!(
                member_status(&sbs, freshest, 2),
                Some(MemberStatus::Stale { .. })
            ),
            "seed {seed}: {:?}",
            member_status(&sbs, freshest, 2)
        );
        read_back_inline(host, &report.model, seed);
        // A spare in an entry given away is written as a spare (no more as the faulty
        // device's).
        let slot = add_spare(host, seed);
        let sb = host.disks[0].newest_superblock().expect("a superblock");
        assert_eq!(sb.slots[slot as usize], Slot::Spare, "seed {seed}");
    }
}

#[test]
fn an_idle_rebuild_keeps_to_its_speed_cap() {
    // 4 MiB of member at a cap of 8 MiB/s: four 1 MiB windows, each but the last followed by
    // the rest of its 125 ms (a lower bound: a slow machine only adds to it); with no cap the
    // rebuild never sleeps.
    for (max_kibs, at_least_ms) in [(8192, 370), (0, 0)] {
        let scenario = Scenario {
            data_sectors: 8192,
            ..Scenario::new(Level::Raid1, 2, 0)
        };
        let seed = 1;
        let (host, io_rx) = new_host(&scenario, seed);
        lose_member(&host, 1, seed);
        let engine = &host.engine;
        assert!(engine.set_rebuild_speed(1, max_kibs));
        assert!(!engine.set_rebuild_speed(0, 0), "a floor of 0 was taken");
        assert!(
            !engine.set_rebuild_speed(10, 5),
            "a floor above the cap was taken"
        );
        assert_eq!(engine.rebuild_speed(), (1, max_kibs));
        let threads = Threads::start(&host, io_rx, seed);
        let start = std::time::Instant::now();
        engine.request_add(&*host, 1, NEW_DEVICE_UUID, engine.free_slot().unwrap());
        while !engine.members()[1].is_active() {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        wait_rebuilt(&host, seed);
        let took = start.elapsed();
        threads.stop(&host);
        assert!(engine.members()[1].is_in_sync());
        let sleeps = host.rebuild_sleeps.load(Ordering::Relaxed);
        assert!(
            took.as_millis() >= at_least_ms,
            "capped at {max_kibs} KiB/s, took {took:?}"
        );
        assert_eq!(
            sleeps > 0,
            max_kibs != 0,
            "{sleeps} sleeps at a cap of {max_kibs}"
        );
    }
}

#[test]
fn check_counts_differing_copies_and_repair_rewrites_them() {
    use graid_engine::scrub::ScrubMode;
    use graid_sim::host::DATA_OFFSET;
    for seed in seeds(2) {
        for (level, members, chunk) in [(Level::Raid1, 3, 0), (Level::Raid10, 4, 16)] {
            let report = run(&Scenario::new(level, members, chunk), seed);
            let host = &*report.host;
            let clean = scrub_now(host, ScrubMode::Check, seed);
            assert_eq!(
                clean.mismatches, 0,
                "seed {seed}: {level:?} mismatches when clean"
            );
            // Scribble over 37 sectors of member 1 (array data everywhere in its area).
            let mut rng = StdRng::seed_from_u64(seed);
            let mut hit = std::collections::BTreeSet::new();
            while hit.len() < 37 {
                hit.insert(rng.random_range(0..host.data_sectors));
            }
            let before = {
                let mut disk = host.disks[1].sectors.lock().unwrap();
                for &s in &hit {
                    disk[(DATA_OFFSET + s) as usize] ^= 0x5a5a;
                }
                disk.clone()
            };
            let check = scrub_now(host, ScrubMode::Check, seed);
            assert_eq!(check.mismatches, 37, "seed {seed}: {level:?} check");
            assert_eq!(
                *host.disks[1].sectors.lock().unwrap(),
                before,
                "check wrote"
            );
            let repair = scrub_now(host, ScrubMode::Repair, seed);
            assert_eq!(repair.mismatches, 37, "seed {seed}: {level:?} repair");
            assert_eq!(scrub_now(host, ScrubMode::Check, seed).mismatches, 0);
            check_copies(&report, seed);
        }
    }
}

/// After a replace of `role` that completed: the new device holds the role, in sync, in the
/// spare's slot; the old device's slot is retired; the array is optimal and nothing failed.
fn check_replaced(report: &Report, role: u32, seed: u64) {
    let host = &*report.host;
    let engine = &host.engine;
    assert!(
        host.members_with(MemberEvent::Replaced).contains(&role),
        "seed {seed}: no replace recorded: {:?}",
        host.events.lock().unwrap()
    );
    assert!(engine.replacement().is_none(), "seed {seed}");
    assert!(
        engine.spares().is_empty(),
        "seed {seed}: the spare is still a spare"
    );
    let member = &engine.members()[role as usize];
    assert!(member.is_in_sync(), "seed {seed}");
    assert_eq!(member.uuid(), NEW_DEVICE_UUID, "seed {seed}");
    assert_eq!(engine.state(), ArrayState::Optimal, "seed {seed}");
    assert!(report.errors.is_empty(), "seed {seed}: {:?}", report.errors);
    let sb = host.disks[role as usize].newest_superblock().unwrap();
    assert_eq!(sb.member_uuid, NEW_DEVICE_UUID);
    assert_eq!(
        sb.slots[sb.this_slot as usize],
        Slot::Active { role: role as u8 }
    );
    assert_eq!(
        sb.slots[role as usize],
        Slot::Faulty,
        "seed {seed}: old slot not retired"
    );
}

#[test]
fn a_replacement_copied_under_load_takes_the_members_place() {
    for seed in seeds(2) {
        for (level, members, chunk, role) in [
            (Level::Raid1, 2, 0, 1),
            (Level::Raid1, 3, 0, 0),
            (Level::Raid10, 4, 16, 2),
        ] {
            let scenario = Scenario {
                replace: Some(role),
                data_sectors: 16384,
                ..Scenario::new(level, members, chunk)
            };
            let report = run(&scenario, seed);
            check_replaced(&report, role, seed);
            // Every copy matches the model: the replacement got the copy and every write
            // (the old device was scribbled over once swapped out).
            check_mirrors_match(&report, seed);
        }
    }
}

#[test]
fn a_replacement_that_fails_ends_the_replace_and_the_member_stays() {
    for seed in seeds(2) {
        let scenario = Scenario {
            replace: Some(1),
            data_sectors: 16384,
            replacement_faults: Faults {
                // Anywhere in the copy, by seed.
                die_after_rebuild_ios: Some(seed % 40),
                ..Faults::default()
            },
            ..Scenario::new(Level::Raid1, 2, 0)
        };
        let report = run(&scenario, seed);
        let host = &*report.host;
        let engine = &host.engine;
        assert!(
            host.members_with(MemberEvent::ReplacementFailed)
                .contains(&1),
            "seed {seed}: {:?}",
            host.events.lock().unwrap()
        );
        assert!(engine.replacement().is_none(), "seed {seed}");
        assert!(
            engine.spares().is_empty(),
            "seed {seed}: a failed replacement stays a spare"
        );
        let member = &engine.members()[1];
        assert!(member.is_in_sync(), "seed {seed}");
        assert_ne!(member.uuid(), NEW_DEVICE_UUID, "seed {seed}");
        assert_eq!(engine.state(), ArrayState::Optimal, "seed {seed}");
        assert!(report.errors.is_empty(), "seed {seed}: {:?}", report.errors);
        // The replacement's slot is recorded as faulty, so its device is refused if it
        // comes back.
        let sb = host.disks[0].newest_superblock().unwrap();
        let slot = engine.members().len();
        assert_eq!(sb.slots[slot], Slot::Faulty, "seed {seed}");
        check_mirrors_match(&report, seed);
    }
}

#[test]
fn a_member_failing_while_replaced_gives_its_replacement_back_to_the_spares() {
    for seed in seeds(2) {
        // The member dies once the copy has read from it a few times: the copy goes on from
        // the other copies, and the next write to it fails it.
        let scenario = Scenario {
            replace: Some(1),
            data_sectors: 16384,
            ..Scenario::new(Level::Raid1, 3, 0).with_fault(
                1,
                Faults {
                    die_after_rebuild_ios: Some(2),
                    ..Faults::default()
                },
            )
        };
        let report = run(&scenario, seed);
        let host = &*report.host;
        let engine = &host.engine;
        assert!(
            host.members_with(MemberEvent::ReplaceAbandoned)
                .contains(&1),
            "seed {seed}: {:?}",
            host.events.lock().unwrap()
        );
        assert!(engine.replacement().is_none(), "seed {seed}");
        assert_eq!(engine.members()[1].health(), Health::Faulty, "seed {seed}");
        assert!(report.errors.is_empty(), "seed {seed}: {:?}", report.errors);
        // The replacement is a spare again, ready to take the failed member's place.
        let (member, _, uuid) = engine.takeover().expect("the spare back");
        assert_eq!((member, uuid), (1, NEW_DEVICE_UUID), "seed {seed}");
        check_mirrors_match(&report, seed);
    }
}

#[test]
fn a_replace_is_refused_where_it_makes_no_sense_and_changes_nothing() {
    use graid_engine::replace::ReplaceError;
    use graid_engine::scrub::{ScrubError, ScrubMode};
    let seed = 1;
    let refused = |level, members, chunk, role| {
        let (host, _io) = new_host(&Scenario::new(level, members, chunk), seed);
        host.engine.replace_allowed(role)
    };
    assert_eq!(
        refused(Level::Raid0, 2, 8, 0),
        Err(ReplaceError::Unsupported)
    );
    assert_eq!(
        refused(Level::Raid1, 32, 0, 0),
        Err(ReplaceError::TooManyMembers)
    );
    assert_eq!(refused(Level::Raid1, 2, 0, 2), Err(ReplaceError::NoMember));

    // A failed member is rebuilt, not replaced; nor is another while one is missing.
    let (host, _io) = new_host(&Scenario::new(Level::Raid1, 3, 0), seed);
    lose_member(&host, 2, seed);
    assert_eq!(host.engine.replace_allowed(2), Err(ReplaceError::NotInSync));
    assert_eq!(host.engine.replace_allowed(0), Err(ReplaceError::Degraded));

    // A replace asked with a slot that holds no spare starts nothing.
    let (host, _io) = new_host(&Scenario::new(Level::Raid1, 2, 0), seed);
    let engine = &host.engine;
    engine.request_replace(&*host, 0, 7);
    engine.work(&*host);
    assert!(engine.replacement().is_none());
    assert_eq!(engine.replace_outcome(0, 7), Err(ReplaceError::NoSpare));

    // One at a time, and never beside a scrub.
    let slot = add_spare(&host, seed);
    engine.request_replace(&*host, 1, slot);
    engine.work(&*host);
    assert_eq!(engine.replace_outcome(1, slot), Ok(()));
    assert_eq!(engine.replace_allowed(0), Err(ReplaceError::Busy));
    assert_eq!(
        engine.start_scrub(&*host, ScrubMode::Repair),
        Err(ScrubError::Replacing)
    );
    // The spare being copied to is no spare for another member's takeover.
    engine.request_fail(&*host, 0);
    engine.work(&*host);
    assert_eq!(engine.fail_outcome(0), Ok(()));
    assert!(
        engine.replacement().is_some(),
        "the replace of role 1 goes on"
    );
    assert!(engine.takeover().is_none());
}
