//! The RAID 5/6 stripe engine under the host harness: concurrent random I/O (sub-stripe,
//! unaligned, full stripes, requests queued behind each other on one stripe), members failing
//! mid-run, and at the end the members' raw contents checked against md's parity math,
//! recomputed here independently of the engine's layout code.

use graid_engine::array::ArrayState;
use graid_engine::geometry::{Level, ParityLayout};
use graid_engine::platform::{MemberEvent, Op, Status};
use graid_engine::scrub::ScrubMode;
use graid_parity::gf;
use graid_sim::crash::flush;
use graid_sim::host::{mul64, Faults, Host, Mutation, DATA_OFFSET};
use graid_sim::stress::{
    fail_member, new_host, read_back_inline, run, run_overlapping, scrub_now, seeds,
    submit_inline_data, Report, Scenario, NEW_DEVICE_UUID,
};
use std::sync::atomic::Ordering;

fn raid5(members: u32, chunk: u32) -> Scenario {
    Scenario::new(Level::Raid5(ParityLayout::LeftSymmetric), members, chunk)
}

fn raid6(members: u32, chunk: u32) -> Scenario {
    Scenario::new(Level::Raid6(ParityLayout::LeftSymmetric), members, chunk)
}

/// md's P/Q members and syndrome order for stripe `stripe` (from `raid5_compute_sector` and
/// `set_syndrome_sources`, left-symmetric and left-asymmetric only), written apart from
/// `layout.rs` so a wrong coefficient there is caught here.
fn md_stripe(
    layout: ParityLayout,
    n: u32,
    raid6: bool,
    stripe: u64,
) -> (u32, Option<u32>, Vec<u32>) {
    let rot = (stripe % u64::from(n)) as u32;
    let p = n - 1 - rot;
    let q = raid6.then(|| match layout {
        ParityLayout::LeftSymmetric => (p + 1) % n,
        _ if p == n - 1 => 0,
        _ => p + 1,
    });
    let d0 = match q {
        Some(q) if q != n - 1 => q + 1,
        Some(_) => 0,
        None => (p + 1) % n,
    };
    let order = (0..n)
        .map(|i| (d0 + i) % n)
        .filter(|&m| m != p && Some(m) != q)
        .collect();
    (p, q, order)
}

/// Every stripe whose members all still work holds md's P (and Q) of its data.
fn check_parity(host: &Host, layout: ParityLayout, seed: u64) {
    let g = host.engine.geometry();
    let n = g.members();
    let raid6 = g.level().parity_members() == 2;
    let alive: Vec<bool> = host
        .engine
        .members()
        .iter()
        .zip(&host.disks)
        .map(|(m, d)| m.is_active() && !d.dead.load(Ordering::Relaxed))
        .collect();
    if alive.iter().any(|a| !a) {
        return;
    }
    let disks: Vec<Vec<u64>> = host
        .disks
        .iter()
        .map(|d| d.sectors.lock().unwrap().clone())
        .collect();
    let chunk = u64::from(g.chunk_sectors());
    let stripes = g.member_data_sectors() / chunk;
    for stripe in 0..stripes {
        let (p, q, order) = md_stripe(layout, n, raid6, stripe);
        for off in 0..chunk {
            let at = (DATA_OFFSET + stripe * chunk + off) as usize;
            let (mut pp, mut qq) = (0u64, 0u64);
            for (slot, &m) in order.iter().enumerate() {
                pp ^= disks[m as usize][at];
                qq ^= mul64(gf::pow2(slot), disks[m as usize][at]);
            }
            assert_eq!(
                disks[p as usize][at], pp,
                "seed {seed}: P of stripe {stripe} +{off}"
            );
            if let Some(q) = q {
                assert_eq!(
                    disks[q as usize][at], qq,
                    "seed {seed}: Q of stripe {stripe} +{off}"
                );
            }
        }
    }
}

fn healthy(report: &Report, seed: u64) {
    assert!(
        report.errors.is_empty(),
        "seed {seed}: {} errors, first {:?}",
        report.errors.len(),
        report.errors[0]
    );
    assert_eq!(report.host.engine.state(), ArrayState::Optimal);
    assert!(report.ok_write_sectors > 0 && report.ok_read_sectors > 0);
}

#[test]
fn healthy_raid5_and_raid6_keep_md_parity() {
    for seed in seeds(2) {
        for (scenario, layout) in [
            (raid5(3, 8), ParityLayout::LeftSymmetric),
            (raid5(4, 16), ParityLayout::LeftSymmetric),
            (raid5(8, 8), ParityLayout::LeftSymmetric),
            (raid6(4, 8), ParityLayout::LeftSymmetric),
            (raid6(6, 16), ParityLayout::LeftSymmetric),
            (raid6(8, 128), ParityLayout::LeftSymmetric),
        ] {
            let report = run(&scenario, seed);
            healthy(&report, seed);
            check_parity(&report.host, layout, seed);
        }
    }
}

#[test]
fn asymmetric_layouts_keep_md_parity() {
    for seed in seeds(2) {
        for level in [
            Level::Raid5(ParityLayout::LeftAsymmetric),
            Level::Raid6(ParityLayout::LeftAsymmetric),
        ] {
            let report = run(&Scenario::new(level, 5, 8), seed);
            healthy(&report, seed);
            check_parity(&report.host, ParityLayout::LeftAsymmetric, seed);
        }
    }
}

#[test]
fn read_modify_write_and_reconstruct_write_both_run() {
    // Small writes on 8 members choose read-modify-write, large ones reconstruct or full.
    let seed = seeds(1).next().unwrap();
    let report = run(&raid6(8, 64), seed);
    healthy(&report, seed);
    check_parity(&report.host, ParityLayout::LeftSymmetric, seed);
    assert!(report.host.stripe.parity_jobs.load(Ordering::Relaxed) > 0);
    assert!(report.host.stripe.update_jobs.load(Ordering::Relaxed) > 0);
}

#[test]
fn raid6_writes_by_reconstruct_write_where_the_platform_cannot_update_parity() {
    // As md without `raid6_can_xor_syndrome()`: the same small writes that choose
    // read-modify-write above go by reconstruct-write, and all succeed.
    for seed in seeds(2) {
        let scenario = Scenario {
            no_raid6_update: true,
            ..raid6(8, 64)
        };
        let report = run(&scenario, seed);
        healthy(&report, seed);
        check_parity(&report.host, ParityLayout::LeftSymmetric, seed);
        assert_eq!(report.host.stripe.update_jobs.load(Ordering::Relaxed), 0);
    }
    // RAID 5's update is a plain XOR, always there.
    let seed = seeds(1).next().unwrap();
    let report = run(
        &Scenario {
            no_raid6_update: true,
            ..raid5(8, 64)
        },
        seed,
    );
    healthy(&report, seed);
    assert!(report.host.stripe.update_jobs.load(Ordering::Relaxed) > 0);
}

#[test]
fn wide_slices_and_their_narrow_fallback_both_run() {
    // Chunks of 256 and 512 sectors: requests longer than a narrow slice ask for a wide one,
    // which the harness refuses half the time.
    for seed in seeds(2) {
        for scenario in [raid5(4, 512), raid6(6, 256)] {
            let report = run(&scenario, seed);
            healthy(&report, seed);
            check_parity(&report.host, ParityLayout::LeftSymmetric, seed);
            let stripe = &report.host.stripe;
            let (asked, given) = (
                stripe.wide_asked.load(Ordering::Relaxed),
                stripe.wide_given.load(Ordering::Relaxed),
            );
            assert!(
                given > 0 && given < asked,
                "seed {seed}: {given} of {asked} wide buffers given"
            );
        }
    }
}

#[test]
fn adjacent_stripes_are_batched() {
    // Chunks of 8 sectors: requests span several stripes of a run, and rows written in every
    // data column go out across stripes, one parity job for them all.
    for seed in seeds(2) {
        for scenario in [raid5(3, 8), raid6(6, 8)] {
            let report = run(&scenario, seed);
            healthy(&report, seed);
            check_parity(&report.host, ParityLayout::LeftSymmetric, seed);
            let run_jobs = report.host.stripe.run_jobs.load(Ordering::Relaxed);
            assert!(
                run_jobs > 0,
                "seed {seed}: no parity job over several stripes"
            );
        }
    }
    // One whole run of a 6-member RAID 6 at 8-sector chunks: 64 stripes of 32 data sectors.
    // Slices are at least 64 rows (8 stripes), so at most 8 parity jobs and 8 writes per
    // member where a stripe at a time would take 64 and 64.
    let seed = seeds(1).next().unwrap();
    let report = run(&raid6(6, 8), seed);
    let host = &report.host;
    let run_sectors = u64::from(host.engine.geometry().boundary_sectors());
    assert_eq!(run_sectors, 2048);
    let ios = |host: &Host| -> Vec<u64> {
        // The members' (not the replacement's disk past them).
        host.disks
            .iter()
            .take(host.engine.members().len())
            .map(|d| d.ios.load(Ordering::Relaxed))
            .collect()
    };
    let (ios_before, jobs_before) = (ios(host), host.stripe.parity_jobs.load(Ordering::Relaxed));
    let status = graid_sim::stress::submit_inline(host, Op::Write, run_sectors, run_sectors);
    assert_eq!(status, Some(Status::Ok));
    let jobs = host.stripe.parity_jobs.load(Ordering::Relaxed) - jobs_before;
    assert!((1..=8).contains(&jobs), "{jobs} parity jobs for one run");
    for (m, (after, before)) in ios(host).iter().zip(&ios_before).enumerate() {
        assert!(
            (1..=8).contains(&(after - before)),
            "member {m}: {} writes for one run",
            after - before
        );
    }
    check_parity(host, ParityLayout::LeftSymmetric, seed);
}

#[test]
fn sequential_streams_are_gathered_into_whole_stripes_exactly() {
    // Each submitter's writes in flight follow one another: the write holding a stripe takes
    // in those that continue it, or holds for them (`stripe_hold.rs`). Every read must still
    // see what was written, the parity must be md's, and the gathering must happen.
    let (mut adopted, mut held) = (0, 0);
    for seed in seeds(2) {
        for scenario in [
            raid5(4, 8),
            raid5(6, 16),
            raid6(5, 8),
            raid6(6, 32),
            Scenario {
                ppl: true,
                ..raid5(5, 16)
            },
            Scenario {
                ppl: true,
                bitmap_region_sectors: Some(256),
                ..raid6(6, 8)
            },
        ] {
            let scenario = Scenario {
                sequential: true,
                ..scenario
            };
            let report = run(&scenario, seed);
            healthy(&report, seed);
            check_parity(&report.host, ParityLayout::LeftSymmetric, seed);
            let counts = report.host.engine.hold_counts();
            adopted += counts.adopted;
            held += counts.held;
        }
    }
    assert!(adopted > 0, "no write was ever taken in by another");
    assert!(held > 0, "no write ever held for its follower");
}

#[test]
fn sequential_streams_over_a_lost_member_read_right() {
    // A member dies early in the run: the streams go on degraded (no hold then, but adoption
    // still runs through the degraded plans).
    for seed in seeds(2) {
        for (scenario, dead) in [(raid5(4, 8), 1usize), (raid6(5, 16), 3)] {
            let scenario = Scenario {
                sequential: true,
                ..scenario.with_fault(dead, dies_after(40))
            };
            let report = run(&scenario, seed);
            assert!(report.errors.is_empty(), "seed {seed}: {:?}", report.errors);
        }
    }
}

#[test]
fn requests_sharing_stripes_run_one_after_the_other() {
    // Lanes of 96 sectors in stripes of 192: neighbouring requests share a stripe.
    for seed in seeds(2) {
        for mut scenario in [raid5(4, 64), raid6(5, 64)] {
            scenario.data_sectors = 512;
            let report = run(&scenario, seed);
            healthy(&report, seed);
            check_parity(&report.host, ParityLayout::LeftSymmetric, seed);
        }
    }
}

#[test]
fn one_stripe_buffer_at_a_time_is_slow_but_complete() {
    for seed in seeds(2) {
        let mut scenario = raid6(6, 16);
        scenario.max_buffers = 1;
        let report = run(&scenario, seed);
        healthy(&report, seed);
        check_parity(&report.host, ParityLayout::LeftSymmetric, seed);
    }
}

/// Two buffers freed at once wake two waiting requests: a waker that finds the list being
/// taken by another leaves its wake-up to that one (review 2, Q6), instead of waking nobody.
#[test]
fn buffers_freed_at_once_each_wake_a_waiting_request() {
    let (mut waits, mut lost) = (0, 0);
    for seed in seeds(4) {
        for mut scenario in [raid5(4, 16), raid6(6, 16)] {
            scenario.max_buffers = 3;
            let report = run(&scenario, seed);
            healthy(&report, seed);
            check_parity(&report.host, ParityLayout::LeftSymmetric, seed);
            let stripe = &report.host.stripe;
            waits += stripe.buffer_waits.load(Ordering::Relaxed);
            lost += stripe.buffer_wakes_lost.load(Ordering::Relaxed);
        }
    }
    assert!(waits > 0, "no request waited for a buffer");
    assert_eq!(lost, 0, "wake-ups lost in {waits} waits for a buffer");
}

fn dies_after(ios: u64) -> Faults {
    Faults {
        die_after: Some(ios),
        ..Faults::default()
    }
}

#[test]
fn raid5_survives_a_member_dying_under_load() {
    for seed in seeds(3) {
        for members in [3u32, 4, 8] {
            let scenario = raid5(members, 8).with_fault(1, dies_after(40));
            let report = run(&scenario, seed);
            assert!(
                report.errors.is_empty(),
                "seed {seed}: {} errors, first {:?}",
                report.errors.len(),
                report.errors.first()
            );
            assert_eq!(report.host.engine.state(), ArrayState::Degraded);
            assert_eq!(report.host.members_failed_by_io(), [1]);
            assert!(report.host.recorded_faulty(1), "seed {seed}");
        }
    }
}

#[test]
fn raid6_survives_two_members_dying_under_load() {
    for seed in seeds(3) {
        for members in [4u32, 6, 8] {
            let scenario = raid6(members, 16)
                .with_fault(0, dies_after(30))
                .with_fault(members as usize - 1, dies_after(90));
            let report = run(&scenario, seed);
            assert!(
                report.errors.is_empty(),
                "seed {seed}: {} errors, first {:?}",
                report.errors.len(),
                report.errors.first()
            );
            assert_eq!(report.host.engine.state(), ArrayState::Degraded);
            let mut failed = report.host.members_failed_by_io();
            failed.sort();
            assert_eq!(failed, [0, members - 1], "seed {seed}");
        }
    }
}

#[test]
fn beyond_redundancy_every_request_fails_and_no_read_is_wrong() {
    for seed in seeds(3) {
        // Reads that succeed are checked against the model inside `run`.
        let scenario = raid5(4, 8)
            .with_fault(0, dies_after(20))
            .with_fault(2, dies_after(60));
        let report = run(&scenario, seed);
        assert!(!report.errors.is_empty(), "seed {seed}: nothing failed");
        assert!(report
            .errors
            .iter()
            .all(|&(_, status)| status == Status::IoError));
        assert!(matches!(
            report.host.engine.state(),
            ArrayState::Failed | ArrayState::Broken
        ));
    }
}

#[test]
fn overlapping_requests_to_one_stripe_keep_parity_consistent() {
    for seed in seeds(2) {
        let mut scenario = raid6(6, 8);
        scenario.rounds = scenario.rounds.min(100);
        scenario.overlap_writers = 2;
        let host = run_overlapping(&scenario, seed, 128);
        assert!(host.violations.0.lock().unwrap().is_empty());
        check_parity(&host, ParityLayout::LeftSymmetric, seed);
    }
}

/// Runs `scenario` and tells whether the checks caught something.
fn caught(scenario: &Scenario, seed: u64) -> bool {
    let scenario = scenario.clone();
    std::panic::catch_unwind(move || {
        let report = run(&scenario, seed);
        check_parity(&report.host, ParityLayout::LeftSymmetric, seed);
    })
    .is_err()
}

#[test]
fn a_skipped_parity_update_is_caught() {
    let seed = seeds(1).next().unwrap();
    let mut scenario = raid5(4, 8);
    scenario.mutation = Some(Mutation::SkipParityUpdate);
    assert!(caught(&scenario, seed));
}

#[test]
fn a_wrong_q_coefficient_is_caught() {
    let seed = seeds(1).next().unwrap();
    let mut scenario = raid6(6, 8);
    scenario.mutation = Some(Mutation::WrongQCoefficient);
    assert!(caught(&scenario, seed));
}

#[test]
fn discards_are_refused_on_parity_levels() {
    let report = run(&raid5(3, 8), seeds(1).next().unwrap());
    let status = graid_sim::stress::submit_inline(&report.host, Op::Discard, 0, 8);
    assert_eq!(status, Some(Status::NotSupported));
}

#[test]
fn a_member_added_under_load_is_rebuilt_from_parity() {
    for seed in seeds(3) {
        // Data, P or Q rebuilt as the stripes rotate; RAID 6 also with a second member gone.
        let cases = [
            (raid5(4, 16), ParityLayout::LeftSymmetric, 1, None),
            (
                Scenario::new(Level::Raid6(ParityLayout::LeftAsymmetric), 5, 8),
                ParityLayout::LeftAsymmetric,
                3,
                None,
            ),
            (raid6(6, 16), ParityLayout::LeftSymmetric, 2, Some(4)),
        ];
        for (base, layout, target, also_gone) in cases {
            let mut scenario = Scenario {
                rebuild: Some(target),
                data_sectors: 16384,
                ..base
            };
            if let Some(gone) = also_gone {
                scenario = scenario.with_fault(gone as usize, dies_after(0));
            }
            let report = run(&scenario, seed);
            let host = &report.host;
            let engine = &host.engine;
            let member = &engine.members()[target as usize];
            assert!(
                member.is_in_sync(),
                "seed {seed}: member {target} not rebuilt"
            );
            assert_eq!(member.uuid(), NEW_DEVICE_UUID);
            assert!(
                report.errors.is_empty(),
                "seed {seed}: {:?}",
                report.errors[0]
            );
            assert!(host.members_with(MemberEvent::Rebuilt).contains(&target));
            if also_gone.is_none() {
                assert_eq!(engine.state(), ArrayState::Optimal, "seed {seed}");
                // The rebuilt member's data and parity are md's, stripe by stripe.
                check_parity(host, layout, seed);
            }
        }
    }
}

#[test]
fn a_second_failure_during_a_raid6_rebuild_keeps_the_array_serving() {
    for seed in seeds(3) {
        // Member 4 dies after the rebuild read it 20 times (of 64 windows): mid-rebuild.
        let scenario = Scenario {
            rebuild: Some(2),
            data_sectors: 16384,
            ..raid6(6, 16)
        }
        .with_fault(
            4,
            Faults {
                die_after_rebuild_ios: Some(20),
                ..Faults::default()
            },
        );
        let report = run(&scenario, seed);
        let host = &report.host;
        let engine = &host.engine;
        let events = host.events.lock().unwrap().clone();
        let at = |member, event| events.iter().position(|&e| e == (member, event));
        let (added, failed, rebuilt) = (
            at(2, MemberEvent::Added),
            at(4, MemberEvent::Failed),
            at(2, MemberEvent::Rebuilt),
        );
        assert!(
            added < failed && failed < rebuilt && added.is_some(),
            "seed {seed}: not a failure mid-rebuild: {events:?}"
        );
        // Nobody saw it; the rebuild finished around it; the read-back (in `run`) went
        // through the rebuilt member with member 4 gone.
        assert!(report.errors.is_empty(), "seed {seed}: {:?}", report.errors);
        assert!(engine.members()[2].is_in_sync(), "seed {seed}");
        assert!(engine.members()[4].is_faulty());
        assert_eq!(engine.state(), ArrayState::Degraded, "seed {seed}");
    }
}

#[test]
fn a_spare_takes_a_failed_members_place_and_is_rebuilt_from_parity() {
    for seed in seeds(2) {
        for (base, layout, target) in [
            (raid5(4, 16), ParityLayout::LeftSymmetric, 2),
            (raid6(5, 8), ParityLayout::LeftSymmetric, 0),
        ] {
            let scenario = Scenario {
                rebuild: Some(target),
                via_spare: true,
                data_sectors: 8192,
                ..base
            };
            let report = run(&scenario, seed);
            let host = &report.host;
            let engine = &host.engine;
            assert!(engine.spares().is_empty(), "seed {seed}");
            assert!(
                engine.members()[target as usize].is_in_sync(),
                "seed {seed}"
            );
            assert_eq!(engine.members()[target as usize].uuid(), NEW_DEVICE_UUID);
            assert!(report.errors.is_empty(), "seed {seed}: {:?}", report.errors);
            assert_eq!(engine.state(), ArrayState::Optimal, "seed {seed}");
            check_parity(host, layout, seed);
        }
    }
}

#[test]
fn a_replacement_copied_under_load_takes_the_members_place_with_parity_intact() {
    for seed in seeds(2) {
        for (base, layout, role) in [
            (raid5(4, 16), ParityLayout::LeftSymmetric, 1),
            (raid6(5, 8), ParityLayout::LeftSymmetric, 4),
        ] {
            let scenario = Scenario {
                replace: Some(role),
                data_sectors: 8192,
                ..base
            };
            let report = run(&scenario, seed);
            let host = &report.host;
            let engine = &host.engine;
            assert!(
                host.members_with(MemberEvent::Replaced).contains(&role),
                "seed {seed}: {:?}",
                host.events.lock().unwrap()
            );
            assert!(engine.spares().is_empty(), "seed {seed}");
            assert!(engine.members()[role as usize].is_in_sync(), "seed {seed}");
            assert_eq!(engine.members()[role as usize].uuid(), NEW_DEVICE_UUID);
            assert!(report.errors.is_empty(), "seed {seed}: {:?}", report.errors);
            assert_eq!(engine.state(), ArrayState::Optimal, "seed {seed}");
            // The read-back of `run` went through the new device; every stripe's parity
            // matches its data, on the new device too.
            check_parity(host, layout, seed);
        }
    }
}

/// Flips a bit of the P sector of `rows` member rows spread over the members (97 apart).
fn flip_parity_rows(host: &Host, layout: ParityLayout, rows: u64) {
    let g = host.engine.geometry();
    let chunk = u64::from(g.chunk_sectors());
    let raid6 = g.level().parity_members() == 2;
    for row in (0..rows).map(|i| i * 97 % g.member_data_sectors()) {
        let (p, _, _) = md_stripe(layout, g.members(), raid6, row / chunk);
        host.disks[p as usize].sectors.lock().unwrap()[(DATA_OFFSET + row) as usize] ^= 1;
    }
}

#[test]
fn check_counts_wrong_parity_and_repair_regenerates_it() {
    for seed in seeds(2) {
        for (scenario, layout) in [
            (raid5(4, 16), ParityLayout::LeftSymmetric),
            (raid6(5, 8), ParityLayout::LeftSymmetric),
        ] {
            let report = run(&scenario, seed);
            let host = &*report.host;
            let g = host.engine.geometry();
            assert_eq!(scrub_now(host, ScrubMode::Check, seed).mismatches, 0);
            // Scribble over the P sector of 23 rows, and over one data sector (its row's P,
            // and Q on RAID 6, then disagree with it).
            let chunk = u64::from(g.chunk_sectors());
            let n = g.members();
            let raid6 = g.level().parity_members() == 2;
            flip_parity_rows(host, layout, 23);
            let data_row = 5 * chunk + 3;
            let (_, _, order) = md_stripe(layout, n, raid6, data_row / chunk);
            host.disks[order[0] as usize].sectors.lock().unwrap()
                [(DATA_OFFSET + data_row) as usize] ^= 1;
            let expected = 23 + if raid6 { 2 } else { 1 };
            let check = scrub_now(host, ScrubMode::Check, seed);
            assert_eq!(check.mismatches, expected, "seed {seed}: check");
            let repair = scrub_now(host, ScrubMode::Repair, seed);
            assert_eq!(repair.mismatches, expected, "seed {seed}: repair");
            assert_eq!(scrub_now(host, ScrubMode::Check, seed).mismatches, 0);
            // md's repair keeps the data and regenerates the parity from it.
            check_parity(host, layout, seed);
        }
    }
}

/// Writes distinct tags over array sectors `[0, sectors)` and returns them.
fn fill(host: &Host, sectors: u64) -> Vec<u64> {
    let data: Vec<u64> = (0..sectors)
        .map(|s| 0x3e1_0000_0000 | (s << 4) | 1)
        .collect();
    assert_eq!(
        submit_inline_data(host, Op::Write, 0, data.clone()),
        Some(Status::Ok)
    );
    data
}

/// Reads `[start, start + sectors)` inline: how it ended, and what it returned.
fn read(host: &Host, start: u64, sectors: u64) -> (Option<Status>, Vec<u64>) {
    let status = submit_inline_data(host, Op::Read, start, vec![0; sectors as usize]);
    (status, host.slots[0].data.lock().unwrap().clone())
}

/// The member holding array sector `sector`, and its member sector (data offset included).
fn place(host: &Host, sector: u64) -> (usize, u64) {
    let piece = host
        .engine
        .geometry()
        .map_read(sector, 1, 0)
        .unwrap()
        .next()
        .unwrap();
    (piece.member as usize, DATA_OFFSET + piece.member_sector)
}

fn corrected(host: &Host, member: usize) -> u64 {
    host.engine.members()[member].stats().corrected
}

/// md's `R5_ReadError`: a read error on an optimal RAID 5/6 is served from parity, the
/// sectors are written back and read again, the member counts a corrected error and stays.
/// A direct read's bad sector, and one under a small write's read-modify-write (on P).
#[test]
fn a_read_error_on_an_optimal_array_is_repaired_from_parity_and_the_member_stays() {
    // Wide enough that a one-sector write reads the old data and P (read-modify-write).
    for scenario in [raid5(5, 8), raid6(7, 8)] {
        let (host, _io_rx) = new_host(&scenario, 31);
        let g = host.engine.geometry();
        let mut data = fill(&host, 256);
        let (m, at) = place(&host, 50);
        host.disks[m].bad.lock().unwrap().insert(at);
        let (status, got) = read(&host, 40, 32);
        assert_eq!(status, Some(Status::Ok), "{:?}", g.level());
        assert_eq!(got, data[40..72], "{:?}: wrong data", g.level());
        assert!(host.members_failed_by_io().is_empty(), "{:?}", g.level());
        assert_eq!(host.engine.state(), ArrayState::Optimal);
        assert_eq!(corrected(&host, m), 1, "{:?}", g.level());
        assert_eq!(
            host.members_with(MemberEvent::ReadErrorRepaired),
            [m as u32]
        );
        assert!(
            host.disks[m].bad.lock().unwrap().is_empty(),
            "not rewritten"
        );

        let (_, row) = place(&host, 130);
        let p = g.stripe_map(g.stripe_of(130)).unwrap().p() as usize;
        host.disks[p].bad.lock().unwrap().insert(row);
        data[130] = 0x3e1_ffff_0001;
        assert_eq!(
            submit_inline_data(&host, Op::Write, 130, vec![data[130]]),
            Some(Status::Ok)
        );
        assert!(host.members_failed_by_io().is_empty(), "{:?}", g.level());
        assert_eq!(corrected(&host, p), 1, "{:?}: P", g.level());
        assert!(
            host.disks[p].bad.lock().unwrap().is_empty(),
            "P not rewritten"
        );
        assert_eq!(read(&host, 0, 256), (Some(Status::Ok), data.clone()));
        assert_eq!(scrub_now(&host, ScrubMode::Check, 31).mismatches, 0);
        check_parity(&host, ParityLayout::LeftSymmetric, 31);
        let violations = host.violations.0.lock().unwrap().clone();
        assert!(violations.is_empty(), "{violations:#?}");
    }
}

/// md's rule: a member whose rewrite fails is failed; the read is still served from parity.
#[test]
fn a_member_whose_rewrite_from_parity_fails_is_failed_and_the_read_still_succeeds() {
    for scenario in [raid5(4, 8), raid6(5, 8)] {
        let (probe, _io_rx) = new_host(&scenario, 32);
        let (m, at) = place(&probe, 50);
        let mut scenario = scenario;
        scenario.faults[m].bad_sectors_stick = true;
        let (host, _io_rx) = new_host(&scenario, 32);
        let data = fill(&host, 256);
        host.disks[m].bad.lock().unwrap().insert(at);
        assert_eq!(
            read(&host, 40, 32),
            (Some(Status::Ok), data[40..72].to_vec())
        );
        assert_eq!(host.members_failed_by_io(), [m as u32]);
        assert_eq!(host.engine.state(), ArrayState::Degraded);
        assert!(host.recorded_faulty(m as u32));
        assert_eq!(read(&host, 0, 256), (Some(Status::Ok), data));
    }
}

/// Degraded beyond what parity can rebuild for one place: the read there fails, and nothing
/// else (md's last-copy rule): no member is failed, the array is not broken, other reads and
/// writes go on. A RAID 6 missing one member still rebuilds around the bad sector.
#[test]
fn on_a_degraded_array_a_read_error_parity_cannot_cover_fails_only_that_read() {
    let (host, _io_rx) = new_host(&raid5(4, 8), 33);
    let data = fill(&host, 256);
    let (d, at) = place(&host, 50);
    let lost = (d as u32 + 1) % 4;
    fail_member(&host, lost, 33);
    host.disks[d].bad.lock().unwrap().insert(at);
    assert_eq!(read(&host, 50, 1).0, Some(Status::IoError));
    assert_eq!(host.engine.state(), ArrayState::Degraded);
    assert!(host.members_with(MemberEvent::KeptLastCopy).is_empty());
    assert!(host.engine.members()[d].is_in_sync(), "member {d} dropped");
    assert_eq!(read(&host, 0, 40), (Some(Status::Ok), data[..40].to_vec()));
    assert_eq!(
        submit_inline_data(&host, Op::Write, 100, vec![7; 8]),
        Some(Status::Ok)
    );

    let (host, _io_rx) = new_host(&raid6(5, 8), 34);
    let data = fill(&host, 256);
    let (d, at) = place(&host, 50);
    fail_member(&host, (d as u32 + 1) % 5, 34);
    host.disks[d].bad.lock().unwrap().insert(at);
    assert_eq!(
        read(&host, 40, 32),
        (Some(Status::Ok), data[40..72].to_vec())
    );
    assert_eq!(corrected(&host, d), 1);
    assert!(host.engine.members()[d].is_in_sync(), "member {d} dropped");
    assert_eq!(host.engine.state(), ArrayState::Degraded);
}

/// Under random load with bad sectors on one member: every read right, no request failed, the
/// member kept, its read errors corrected; a check then finds the parity right.
#[test]
fn read_errors_under_load_are_repaired_from_parity_without_failing_the_member() {
    for seed in seeds(2) {
        // The second RAID 5 with a partial parity log (its repaired slices log too).
        for (scenario, ppl) in [
            (raid5(4, 8), false),
            (raid5(5, 16), true),
            (raid6(6, 8), false),
        ] {
            let mut scenario = scenario.with_fault(
                1,
                Faults {
                    bad_sectors: 100,
                    ..Faults::default()
                },
            );
            scenario.ppl = ppl;
            let report = run(&scenario, seed);
            healthy(&report, seed);
            let host = &report.host;
            assert!(host.members_failed_by_io().is_empty(), "seed {seed}");
            let fixed = corrected(host, 1);
            assert!(fixed > 0, "seed {seed}: nothing was repaired");
            assert_eq!(
                host.members_with(MemberEvent::ReadErrorRepaired).len() as u64,
                fixed,
                "seed {seed}"
            );
            assert_eq!(scrub_now(host, ScrubMode::Check, seed).mismatches, 0);
            check_parity(host, ParityLayout::LeftSymmetric, seed);
        }
    }
}

/// A repair rewrites a member's rows from the others; a write landing in between would be
/// undone there. Overlapping reads and writes while sectors of member 0 keep going bad: the
/// parity stays right and the member is never failed.
#[test]
fn read_repair_from_parity_never_races_a_write() {
    for seed in seeds(2) {
        for scenario in [raid5(4, 8), raid6(5, 8)] {
            let mut scenario = scenario.with_fault(
                0,
                Faults {
                    rot_ppm: 200_000,
                    ..Faults::default()
                },
            );
            scenario.rounds *= 4;
            scenario.inline_percent = 0;
            let host = run_overlapping(&scenario, seed, 64);
            assert!(corrected(&host, 0) > 0, "seed {seed}: nothing was repaired");
            assert_eq!(
                host.engine.state(),
                ArrayState::Optimal,
                "seed {seed}: {:?}",
                host.events.lock().unwrap()
            );
            check_parity(&host, ParityLayout::LeftSymmetric, seed);
        }
    }
}

/// Only the block that failed is rebuilt and rewritten (md's stripe page), not the rows around
/// it: where the parity is stale (an array not in sync), rebuilding sectors that read well
/// from it would change them.
#[test]
fn a_read_repair_rewrites_only_the_block_that_failed() {
    let mut scenario = raid5(4, 32);
    scenario.in_sync = false;
    let (host, _io_rx) = new_host(&scenario, 35);
    let g = host.engine.geometry();
    let data = fill(&host, 96);
    // Array sectors 0..32: the first data chunk of stripe 0, member rows 0..32.
    let (d, at) = place(&host, 5);
    host.disks[d].bad.lock().unwrap().insert(at);
    let p = g.stripe_map(0).unwrap().p() as usize;
    host.disks[p].sectors.lock().unwrap()[(DATA_OFFSET + 20) as usize] ^= 0x5c1b_0000;
    assert_eq!(read(&host, 0, 32), (Some(Status::Ok), data[..32].to_vec()));
    assert_eq!(corrected(&host, d), 1);
    let disk = host.disks[d].sectors.lock().unwrap();
    let rows = DATA_OFFSET as usize..DATA_OFFSET as usize + 32;
    assert_eq!(
        disk[rows],
        data[..32],
        "member {d} rewritten beyond its bad block"
    );
}

#[test]
fn a_helper_that_turns_liar_gets_no_wrong_recovery_onto_a_member() {
    // The rebuild's recoveries go to a helper that is right for its first three jobs and
    // wrong from then on (as `graid-probe hostile turncoat` in the VM): the engine checks each
    // recovery against the parity on the members before it writes anything, so the liar is
    // caught at its first wrong answer, the kernel recomputes, and every stripe ends right.
    for seed in seeds(2) {
        let cases = [
            (raid5(4, 16), ParityLayout::LeftSymmetric, 1, None),
            (raid6(6, 16), ParityLayout::LeftSymmetric, 2, None),
            // Two lost: data and data, data and P, data and Q, P and Q as the stripes rotate.
            (raid6(6, 16), ParityLayout::LeftSymmetric, 2, Some(4)),
        ];
        // An honest helper (never wrong) is never accused.
        let liars = [(3, 1), (u64::MAX, 0)];
        for ((base, layout, target, also_gone), (right, caught)) in cases
            .into_iter()
            .flat_map(|c| liars.map(|l| (c.clone(), l)))
        {
            let mut scenario = Scenario {
                rebuild: Some(target),
                data_sectors: 16384,
                helper_lies_after: Some(right),
                ..base
            };
            if let Some(gone) = also_gone {
                scenario = scenario.with_fault(gone as usize, dies_after(0));
            }
            // `run` reads everything back through the rebuilt member.
            let report = run(&scenario, seed);
            let host = &report.host;
            assert!(report.errors.is_empty(), "seed {seed}: {:?}", report.errors);
            assert!(
                host.engine.members()[target as usize].is_in_sync(),
                "seed {seed}: member {target} not rebuilt"
            );
            let stripe = &host.stripe;
            assert!(
                stripe.helper_jobs.load(Ordering::Relaxed) > 3,
                "seed {seed}"
            );
            assert_eq!(
                stripe.helper_caught.load(Ordering::Relaxed),
                caught,
                "seed {seed}: a liar is caught once, then detached"
            );
            assert_eq!(
                stripe.helper.lock().unwrap().is_none(),
                caught == 1,
                "seed {seed}"
            );
            if also_gone.is_none() {
                check_parity(host, layout, seed);
            }
        }
    }
}

#[test]
fn a_lying_helpers_scrub_parity_is_never_written() {
    use graid_engine::scrub::ScrubMode;
    for seed in seeds(2) {
        for (scenario, layout) in [
            (raid5(4, 16), ParityLayout::LeftSymmetric),
            (raid6(5, 8), ParityLayout::LeftSymmetric),
        ] {
            let report = run(&scenario, seed);
            let host = &*report.host;
            flip_parity_rows(host, layout, 23);
            let stripe = &host.stripe;
            // A helper that lies from its first job: its claims of mismatches are recomputed
            // by the kernel before they are counted, and it is caught.
            *stripe.helper.lock().unwrap() = Some(0);
            assert_eq!(
                scrub_now(host, ScrubMode::Check, seed).mismatches,
                23,
                "seed {seed}"
            );
            assert_eq!(
                stripe.helper_caught.load(Ordering::Relaxed),
                1,
                "seed {seed}"
            );
            // Again for the repair: what it writes is the kernel's parity, never the liar's.
            *stripe.helper.lock().unwrap() = Some(0);
            assert_eq!(
                scrub_now(host, ScrubMode::Repair, seed).mismatches,
                23,
                "seed {seed}"
            );
            assert_eq!(
                stripe.helper_caught.load(Ordering::Relaxed),
                2,
                "seed {seed}"
            );
            assert_eq!(
                scrub_now(host, ScrubMode::Check, seed).mismatches,
                0,
                "seed {seed}"
            );
            check_parity(host, layout, seed);
        }
    }
}

#[test]
fn an_engine_takes_only_a_lock_table_of_a_power_of_two_of_slots_within_bounds() {
    use graid_engine::array::{ArrayEngine, EngineError, EngineStore};
    use graid_engine::geometry::Geometry;
    use graid_engine::members::MemberState;
    use graid_engine::stripe::{lock_slots_for, MAX_LOCK_SLOTS, MIN_LOCK_SLOTS};
    use graid_sim::stress::superblock;
    use std::sync::atomic::AtomicU64;

    let level = Level::Raid5(ParityLayout::LeftSymmetric);
    let geometry = Geometry::new(level, 4, 16, 1 << 20).expect("geometry");
    let words = |n: usize| (0..n).map(|_| AtomicU64::new(0)).collect::<Vec<_>>();
    let engine = |locks: usize, live: usize| {
        let members = (0..4)
            .map(|m| MemberState::new([m as u8; 16], m))
            .collect::<Vec<_>>();
        let store = EngineStore {
            members,
            locks: words(locks),
            live: words(live),
            flush_marks: words(64 * locks),
        };
        ArrayEngine::new(superblock(&geometry, level, 16), geometry, store, true)
    };
    for slots in [MIN_LOCK_SLOTS, lock_slots_for(2 * 256), MAX_LOCK_SLOTS] {
        let n = slots as usize / 64;
        let engine = engine(n, 2 * n).expect("a table in bounds");
        assert_eq!(engine.lock_slots(), slots);
    }
    for (locks, live) in [
        (
            MIN_LOCK_SLOTS as usize / 64 + 1,
            2 * (MIN_LOCK_SLOTS as usize / 64 + 1),
        ),
        (MIN_LOCK_SLOTS as usize / 128, MIN_LOCK_SLOTS as usize / 64),
        (MAX_LOCK_SLOTS as usize / 32, MAX_LOCK_SLOTS as usize / 16),
        (MIN_LOCK_SLOTS as usize / 64, MIN_LOCK_SLOTS as usize / 64),
    ] {
        assert_eq!(
            engine(locks, live).err(),
            Some(EngineError::LockTable {
                words: locks,
                live_words: live,
                flush_marks: 64 * locks,
            }),
            "{locks} lock words, {live} live words"
        );
    }
}

/// Runs the worker inline until the heal (a resync) ends.
fn heal_inline(host: &Host, seed: u64) {
    let start = std::time::Instant::now();
    while !host.engine.in_sync() {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(60),
            "seed {seed}: the heal never ended"
        );
        host.engine.work(host);
    }
    assert!(!host.engine.healing(), "seed {seed}");
}

/// The heal runs to its end; then a check finds nothing, the parity is md's, and with `victim`
/// failed every sector reads back as the model says.
fn heal_then_fail(
    host: &Host,
    layout: ParityLayout,
    model: &[Option<u64>],
    victim: u32,
    seed: u64,
) {
    heal_inline(host, seed);
    assert_eq!(
        scrub_now(host, ScrubMode::Check, seed).mismatches,
        0,
        "seed {seed}: wrong parity left after the heal"
    );
    check_parity(host, layout, seed);
    fail_member(host, victim, seed);
    read_back_inline(host, model, seed);
}

/// The arrays a helper that lies from its ninth request generation on and is never sampled
/// writes to: RAID 5 with and without a bitmap, RAID 6.
fn never_sampled_liars() -> [(Scenario, ParityLayout); 3] {
    [
        (raid5(4, 16), None),
        (raid5(4, 16), Some(256)),
        (raid6(6, 16), None),
    ]
    .map(|(base, bitmap)| {
        let scenario = Scenario {
            request_helper: Some((8, u64::MAX)),
            bitmap_region_sectors: bitmap,
            data_sectors: 16384,
            ..base
        };
        (scenario, ParityLayout::LeftSymmetric)
    })
}

#[test]
fn a_lying_helpers_unchecked_parity_is_healed_before_a_member_may_go() {
    // Issue 45's item 5. The requests' parity goes to a helper that lies from its ninth job
    // and is never sampled: its parity reaches the members (a check counts the mismatches).
    // Then it is caught, as a sampled wrong answer would catch it: the worker heals every
    // region that unchecked parity went to before anything else, the superblocks saying a
    // resync is pending (no degraded start, a crash resyncs), and an administrator's fail
    // meanwhile is refused. Once healed a check finds nothing, and with a member failed every
    // sector reads back as written.
    use graid_engine::admin::FailError;
    use graid_engine::superblock::RECOVERY_COMPLETE;
    for seed in seeds(2) {
        for (scenario, layout) in never_sampled_liars() {
            let report = run(&scenario, seed);
            let host = &*report.host;
            let stripe = &host.stripe;
            assert!(
                stripe.request_helper_jobs.load(Ordering::Relaxed) > 8,
                "seed {seed}: too few generations went to the helper"
            );
            let lied = scrub_now(host, ScrubMode::Check, seed).mismatches;
            assert!(
                lied > 0,
                "seed {seed}: the helper's lies are not on the members"
            );
            // Caught.
            *stripe.request_helper.lock().unwrap() = None;
            stripe.request_helper_caught.fetch_add(1, Ordering::SeqCst);
            let victim = 1;
            host.engine.request_fail(host, victim);
            host.engine.work(host);
            assert_eq!(
                host.engine.fail_outcome(victim),
                Err(FailError::LastCopy),
                "seed {seed}: a member was failed before the heal"
            );
            assert_eq!(host.heals.lock().unwrap().len(), 1, "seed {seed}");
            let newest = host.disks[0].superblocks.lock().unwrap().last().cloned();
            assert!(
                newest.is_some_and(|sb| sb.resync_offset != RECOVERY_COMPLETE),
                "seed {seed}: the superblocks do not say a resync is pending"
            );
            if let Some((regions, states)) = &host.bitmap {
                // The walked regions' bits are set, so a crash resyncs them again.
                let set = (0..regions.count())
                    .filter(|&r| states[r as usize].bit())
                    .count();
                assert!(set > 0, "seed {seed}: no bitmap bit set for the heal");
            }
            heal_then_fail(host, layout, &report.model, victim, seed);
        }
    }
}

/// Flushes the members and lets the worker mark the array clean, as an idle array is: only
/// the heal then says on disk that the parity is not to be trusted.
fn flush_and_mark_clean(host: &Host, seed: u64) {
    flush(host, seed);
    host.engine.set_safe_mode_delay(1);
    for _ in 0..100 {
        if !host.engine.is_dirty() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
        host.engine.work(host);
    }
    panic!("seed {seed}: not marked clean");
}

/// Heal writes (member writes of its resync) a full heal of `scenario`'s lies takes.
fn heal_writes(scenario: &Scenario, seed: u64) -> u64 {
    let report = run(scenario, seed);
    let host = &*report.host;
    flush_and_mark_clean(host, seed);
    let before = host.writes.load(Ordering::SeqCst);
    *host.stripe.request_helper.lock().unwrap() = None;
    host.stripe
        .request_helper_caught
        .fetch_add(1, Ordering::SeqCst);
    // The worker's next pass sees the catch.
    host.engine.work(host);
    heal_inline(host, seed);
    host.writes.load(Ordering::SeqCst) - before
}

#[test]
fn a_power_cut_during_a_heal_leaves_it_pending_and_the_next_start_finishes_it() {
    // The lying helper's parity is on the members, durable, and the array marked clean when it
    // is caught (only the heal says the parity is not to be trusted); the power goes
    // at a random member or metadata write of the heal, each member losing what its volatile
    // cache held. The next start finds the heal's resync pending (the superblocks, and with a
    // bitmap its bits) and walks every region the heal had not made durable: then a check
    // finds nothing and with a member failed every sector reads back as written.
    use graid_sim::crash::reassemble;
    use rand::{rngs::StdRng, RngExt, SeedableRng};
    let (mut cases, mut cut_mid_heal) = (0, 0);
    for seed in seeds(2) {
        for (scenario, layout) in never_sampled_liars() {
            let scenario = Scenario {
                volatile_cache: true,
                ..scenario
            };
            let full = heal_writes(&scenario, seed);
            let report = run(&scenario, seed);
            let host = &*report.host;
            assert!(report.errors.is_empty(), "seed {seed}: {:?}", report.errors);
            assert!(
                scrub_now(host, ScrubMode::Check, seed).mismatches > 0,
                "seed {seed}: the helper's lies are not on the members"
            );
            flush_and_mark_clean(host, seed);
            let mut rng = StdRng::seed_from_u64(seed ^ 0x4ea1);
            // Before the heal's pending mark is on the members the catch is only in memory: a
            // crash then forgets it (as it forgets where unchecked parity went), and the array
            // starts clean. From the mark on, the heal is durable.
            host.cut_after_heal_starts
                .store(rng.random_range(0..(full * 3 / 4).max(1)), Ordering::SeqCst);
            if rng.random_bool(0.3) {
                let metadata = host.metadata_writes.load(Ordering::SeqCst);
                host.cut_in_metadata
                    .store(metadata + rng.random_range(1..6), Ordering::SeqCst);
            }
            *host.stripe.request_helper.lock().unwrap() = None;
            host.stripe
                .request_helper_caught
                .fetch_add(1, Ordering::SeqCst);
            let start = std::time::Instant::now();
            // The worker's next pass sees the catch.
            host.engine.work(host);
            while !host.power_cut() && !host.engine.in_sync() {
                assert!(
                    start.elapsed() < std::time::Duration::from_secs(60),
                    "seed {seed}: the heal never ended"
                );
                host.engine.work(host);
            }
            // Each run's threads lie a little differently: a heal may end before its cut.
            let cut = host.power_cut();
            cases += 1;
            cut_mid_heal += u32::from(cut);
            let images = host
                .disks
                .iter()
                .map(|d| d.image_after_cut(&mut rng))
                .collect();
            let restarted = Scenario {
                request_helper: None,
                ..scenario.clone()
            };
            let started = reassemble(&restarted, seed, images, false)
                .unwrap_or_else(|e| panic!("seed {seed}: the array does not start: {e:?}"));
            let host = &*started.host;
            assert!(
                !cut || !host.engine.in_sync(),
                "seed {seed}: the start finds no resync pending"
            );
            heal_then_fail(host, layout, &report.model, 1, seed);
        }
    }
    assert!(
        cut_mid_heal * 2 >= cases,
        "only {cut_mid_heal} of {cases} power cuts came during the heal"
    );
}

#[test]
fn a_healed_regions_bit_stays_on_disk_after_the_resync_passed_it_until_a_flush_clears_it() {
    // A region the heal walks has its bit set on disk before the superblocks say a resync is
    // pending. Once the resync passed it, its rewritten parity is not durable until a flush;
    // a block written meanwhile to set another region's bit (FUA alone, no flush) must keep
    // this one's set, or a power cut then would skip the region at the next start with its
    // parity torn. Only the cleaner (with its PREFLUSH) may clear it.
    use graid_engine::platform::Metadata;
    let mut checked = 0;
    for seed in seeds(6) {
        let (scenario, _) = never_sampled_liars()[1].clone();
        // Few writes, in small regions: some regions the helper's parity never reached.
        let scenario = Scenario {
            bitmap_region_sectors: Some(16),
            submitters: 1,
            rounds: 1,
            ..scenario
        };
        let report = run(&scenario, seed);
        let host = &*report.host;
        assert!(report.errors.is_empty(), "seed {seed}: {:?}", report.errors);
        flush_and_mark_clean(host, seed);
        // The cleaner clears the bits of the idle array, then looks no more (a look could
        // clear a bit with its flush).
        host.engine.set_bitmap_clean_interval(1);
        for _ in 0..20 {
            std::thread::sleep(std::time::Duration::from_millis(2));
            host.engine.work(host);
        }
        host.engine.set_bitmap_clean_interval(u32::MAX);
        host.stripe
            .request_helper_caught
            .fetch_add(1, Ordering::SeqCst);
        *host.stripe.request_helper.lock().unwrap() = None;
        host.engine.work(host);
        let (regions, states) = host.bitmap().unwrap();
        let Some(healed) = (0..regions.count()).find(|&r| states[r as usize].needs_sync()) else {
            continue;
        };
        let Some(other) = (0..regions.count()).find(|&r| !states[r as usize].bit()) else {
            continue;
        };
        // The resync passes the healed region, and no further than it must.
        let end = regions.span(healed).end;
        let start = std::time::Instant::now();
        while host.engine.resync_offset() < end && !host.engine.in_sync() {
            assert!(
                start.elapsed().as_secs() < 60,
                "seed {seed}: the heal never passed"
            );
            host.engine.work(host);
        }
        assert!(
            !states[healed as usize].needs_sync(),
            "seed {seed}: not passed"
        );
        // A write to the other region: its bit is set by a FUA block write.
        let g = host.engine.geometry();
        let at = regions.span(other).start / u64::from(g.chunk_sectors()) * g.stripe_data_sectors();
        let bit_writes = host.bitmap_writes.load(Ordering::SeqCst);
        assert_eq!(
            submit_inline_data(host, Op::Write, at, vec![7; 8]),
            Some(Status::Ok),
            "seed {seed}"
        );
        assert!(
            host.bitmap_writes.load(Ordering::SeqCst) > bit_writes,
            "seed {seed}: no bitmap block was written for region {other}"
        );
        for (m, disk) in host
            .disks
            .iter()
            .take(scenario.members as usize)
            .enumerate()
        {
            assert!(
                disk.bitmap_bit(healed),
                "seed {seed}: member {m}'s bit of healed region {healed} was cleared without a \
                 flush after the resync passed it"
            );
        }
        checked += 1;
    }
    assert!(checked > 0, "no seed had a healed region and a clear one");
}

#[test]
fn a_helper_caught_by_a_sample_under_load_leaves_nothing_wrong_behind() {
    // The same helper sampled as the kernel samples (here one job in eight), lying from its
    // 30th: caught at the first sample after, while writes go on; what it computed unchecked
    // before is healed under load, and afterwards a member can go.
    for seed in seeds(2) {
        for (base, layout) in [
            (raid5(4, 16), ParityLayout::LeftSymmetric),
            (raid6(6, 16), ParityLayout::LeftSymmetric),
        ] {
            let scenario = Scenario {
                request_helper: Some((29, 8)),
                data_sectors: 16384,
                ..base
            };
            let report = run(&scenario, seed);
            let host = &*report.host;
            assert!(report.errors.is_empty(), "seed {seed}: {:?}", report.errors);
            let stripe = &host.stripe;
            assert_eq!(
                stripe.request_helper_caught.load(Ordering::SeqCst),
                1,
                "seed {seed}: the liar was not caught ({} jobs)",
                stripe.request_helper_jobs.load(Ordering::Relaxed)
            );
            assert!(
                !host.heals.lock().unwrap().is_empty(),
                "seed {seed}: no heal"
            );
            heal_then_fail(host, layout, &report.model, 2, seed);
        }
    }
}

#[test]
fn a_repair_running_at_a_catch_ends_first_and_the_heal_follows() {
    // An administrator's repair runs when a helper is caught: it ends with its own count (the
    // scribbled parity it rewrote), a fail is refused meanwhile, and the heal runs after it.
    use graid_engine::admin::FailError;
    let seed = 7;
    let scenario = Scenario {
        request_helper: Some((8, u64::MAX)),
        data_sectors: 16384,
        ..raid5(4, 16)
    };
    let report = run(&scenario, seed);
    let host = &*report.host;
    let engine = &host.engine;
    let stripe = &host.stripe;
    engine.start_scrub(host, ScrubMode::Repair).unwrap();
    engine.work(host);
    *stripe.request_helper.lock().unwrap() = None;
    stripe.request_helper_caught.fetch_add(1, Ordering::SeqCst);
    engine.request_fail(host, 2);
    engine.work(host);
    assert_eq!(engine.fail_outcome(2), Err(FailError::LastCopy));
    assert!(engine.healing());
    while engine.scrub_progress().mode == Some(ScrubMode::Repair) {
        assert!(
            host.heals.lock().unwrap().is_empty(),
            "the heal began during the repair"
        );
        engine.work(host);
    }
    assert!(
        engine.scrub_progress().mismatches > 0,
        "the repair found the lies"
    );
    // The repair's end kicks the worker again.
    engine.work(host);
    assert_eq!(
        host.heals.lock().unwrap().len(),
        1,
        "no heal after the repair"
    );
    heal_then_fail(host, ParityLayout::LeftSymmetric, &report.model, 2, seed);
}

#[test]
fn parity_that_holds_the_only_copy_of_some_data_never_comes_from_a_helper() {
    // A member is gone: a full write's parity is the only copy of that member's chunks, so a
    // helper (here one that lies about everything, never sampled) must not compute it.
    for scenario in [raid5(4, 16), raid6(6, 16)] {
        let seed = 11;
        let report = run(&scenario, seed);
        let host = &*report.host;
        fail_member(host, 1, seed);
        *host.stripe.request_helper.lock().unwrap() = Some((0, u64::MAX));
        // Past its first job, which is checked.
        host.stripe.request_helper_jobs.store(1, Ordering::Relaxed);
        let g = host.engine.geometry();
        let sectors = u64::from(g.boundary_sectors()).min(g.array_sectors());
        let data: Vec<u64> = (0..sectors)
            .map(|s| 0x7e1_0000_0000 | (s << 4) | 5)
            .collect();
        assert_eq!(
            submit_inline_data(host, Op::Write, 0, data.clone()),
            Some(Status::Ok)
        );
        let (status, got) = read(host, 0, sectors);
        assert_eq!(status, Some(Status::Ok));
        assert!(
            got == data,
            "{:?}: a degraded write's data reads back wrong",
            g.level()
        );
        assert_eq!(host.stripe.request_helper_jobs.load(Ordering::Relaxed), 1);
    }
}
