//! Dirty/clean tracking and the resync, in the engine's host home: an idle array is marked
//! clean and its next write waits until it is dirty again (a flush round first only where
//! something the superblock holds moved); a resync under load leaves every
//! copy and every parity matching; a resync goes on from the position a superblock gave it.

use graid_engine::geometry::{Level, ParityLayout};
use graid_engine::platform::{Op, Status};
use graid_engine::scrub::{ScrubError, ScrubMode};
use graid_engine::superblock::RECOVERY_COMPLETE;
use graid_sim::host::{Host, DATA_OFFSET};
use graid_sim::stress::{
    check_copies, check_mirrors_match, new_host, run, scrub_now, seeds, submit_inline, Scenario,
};
use std::time::{Duration, Instant};

/// The newest superblock member 0 holds: (clean, resync offset, events).
fn newest(host: &Host) -> (bool, u64, u64) {
    let sbs = host.disks[0].superblocks.lock().unwrap();
    let sb = sbs.last().expect("a superblock was written");
    (sb.clean, sb.resync_offset, sb.events)
}

/// Flush rounds begun so far (of every member or of some).
fn flush_rounds(host: &Host) -> u64 {
    host.engine.log().flush_counts().0
}

#[test]
fn an_idle_array_is_marked_clean_and_its_next_write_marks_it_dirty_first() {
    for (level, members, chunk) in [
        (Level::Raid1, 2, 0),
        (Level::Raid5(ParityLayout::LeftSymmetric), 3, 8),
    ] {
        let scenario = Scenario::new(level, members, chunk);
        // No platform threads: `submit_inline` plays the worker, and so does the test.
        let (host, _io_rx) = new_host(&scenario, 1);
        host.engine.set_safe_mode_delay(20);
        assert!(!host.engine.is_dirty(), "{level:?}: dirty before any write");
        // A read needs nothing.
        assert_eq!(submit_inline(&host, Op::Read, 0, 8), Some(Status::Ok));
        assert!(host.disks[0].superblocks.lock().unwrap().is_empty());
        let mut events = 0;
        for round in 1..=3u64 {
            let flushes = flush_rounds(&host);
            // The write waits for the worker, which writes "not clean" first (the host fails
            // the run if data reaches a member whose superblock says clean).
            assert_eq!(
                submit_inline(&host, Op::Write, 16 * round, 8),
                Some(Status::Ok)
            );
            assert!(host.engine.is_dirty(), "{level:?}: round {round}");
            // The first update of a started array flushes first; a mark after a clean one,
            // with nothing moved since, claims nothing and sends no flush round.
            assert_eq!(
                flush_rounds(&host) - flushes,
                u64::from(round == 1),
                "{level:?}: round {round}: flush rounds before the dirty mark"
            );
            let (clean, _, marked) = newest(&host);
            assert!(!clean, "{level:?}: written while the superblock says clean");
            if round > 1 {
                assert_eq!(marked, events + 1, "{level:?}: one update per mark");
            }
            // More writes while dirty cost no update.
            assert_eq!(submit_inline(&host, Op::Write, 64, 8), Some(Status::Ok));
            assert_eq!(newest(&host).2, marked);
            // Not before the quiet period...
            host.engine.work(&*host);
            assert!(host.engine.is_dirty(), "{level:?}: marked clean at once");
            // ... but after it.
            std::thread::sleep(Duration::from_millis(25));
            host.engine.work(&*host);
            assert!(!host.engine.is_dirty(), "{level:?}: not marked clean");
            assert_eq!(newest(&host), (true, RECOVERY_COMPLETE, marked + 1));
            events = marked + 1;
        }
        assert_eq!(host.engine.dirty_marks(), 3);
        assert_eq!(host.engine.superblock_updates_unflushed(), 2);
        // A member failed since: the next mark holds its failure, and flushes first.
        host.engine.request_fail(&*host, 1);
        host.engine.work(&*host);
        std::thread::sleep(Duration::from_millis(25));
        host.engine.work(&*host);
        assert!(
            !host.engine.is_dirty(),
            "{level:?}: not marked clean degraded"
        );
        let flushes = flush_rounds(&host);
        assert_eq!(submit_inline(&host, Op::Write, 96, 8), Some(Status::Ok));
        assert!(
            flush_rounds(&host) > flushes,
            "{level:?}: a degraded array's dirty mark sent no flush round"
        );
        assert_eq!(host.engine.superblock_updates_unflushed(), 2);
        let violations = host.violations.0.lock().unwrap().clone();
        assert!(violations.is_empty(), "{violations:#?}");
    }
}

#[test]
fn raid0_is_never_marked_dirty() {
    let scenario = Scenario::new(Level::Raid0, 2, 8);
    let (host, _io_rx) = new_host(&scenario, 1);
    assert_eq!(submit_inline(&host, Op::Write, 0, 64), Some(Status::Ok));
    assert!(!host.engine.is_dirty());
    assert!(host.disks[0].superblocks.lock().unwrap().is_empty());
}

/// Makes `member`'s copy (or parity) differ from the others in `n` distinct places at and
/// above member sector `from`, below `from + 512`, and returns how many.
fn scribble(host: &Host, member: usize, from: u64, n: u64) -> u64 {
    let mut disk = host.disks[member].sectors.lock().unwrap();
    for i in 0..n {
        // An odd stride modulo a power of two: distinct sectors.
        let s = from + (i * 7919) % 512;
        disk[(DATA_OFFSET + s) as usize] ^= 0x5a5a_0000 | s;
    }
    n
}

#[test]
fn a_resync_under_load_leaves_every_copy_and_parity_matching() {
    for seed in seeds(2) {
        for (level, members, chunk) in [
            (Level::Raid1, 3, 0),
            (Level::Raid10, 4, 16),
            (Level::Raid5(ParityLayout::LeftSymmetric), 4, 16),
            (Level::Raid6(ParityLayout::LeftSymmetric), 5, 8),
        ] {
            let mut scenario = Scenario::new(level, members, chunk);
            scenario.in_sync = false;
            scenario.resync = true;
            // Differing copies or parity before the run: the resync must find and fix them
            // while the submitters write.
            scenario.scribble = Some((1, 300));
            let report = run(&scenario, seed);
            assert!(report.errors.is_empty(), "seed {seed}: {:?}", report.errors);
            let host = &*report.host;
            assert!(host.engine.in_sync(), "seed {seed}: {level:?}");
            check_copies(&report, seed);
            if level.has_parity() {
                let check = scrub_now(host, ScrubMode::Check, seed);
                assert_eq!(check.mismatches, 0, "seed {seed}: {level:?} parity");
            } else {
                check_mirrors_match(&report, seed);
            }
            // The last superblock says so.
            assert_eq!(newest(host).1, RECOVERY_COMPLETE, "seed {seed}: {level:?}");
        }
    }
}

#[test]
fn a_resync_goes_on_from_its_position_and_a_check_waits_for_it() {
    for (level, members, chunk) in [
        (Level::Raid1, 2, 0),
        (Level::Raid5(ParityLayout::LeftSymmetric), 3, 8),
    ] {
        let mut scenario = Scenario::new(level, members, chunk);
        scenario.in_sync = false;
        let (host, _io_rx) = new_host(&scenario, 3);
        let walk = host.engine.scrub_progress().total;
        let half = walk / 2;
        // Member sectors of member 1 below and above the half way point (the same for a
        // two-way mirror; RAID 5 walks member sectors).
        let below = scribble(&host, 1, 0, 1);
        let above = scribble(&host, 1, half, 20);
        host.engine.set_resync_start(half);
        assert_eq!(host.engine.resync_offset(), half);
        assert_eq!(
            host.engine.start_scrub(&*host, ScrubMode::Check),
            Err(ScrubError::ResyncPending)
        );
        host.engine.start_resync(&*host);
        let start = Instant::now();
        while !host.engine.in_sync() {
            assert!(start.elapsed() < Duration::from_secs(20), "no end");
            host.engine.work(&*host);
        }
        let resync = host.engine.scrub_progress();
        assert_eq!(resync.mismatches, above, "{level:?}: {resync:?}");
        // What lay below the position was left alone: only a check finds it now.
        let check = scrub_now(&host, ScrubMode::Check, 3);
        assert_eq!(check.mismatches, below, "{level:?}");
    }
}

/// md's `idle`: it stops a check or a repair where it is, but a resync the array needs goes on
/// from its position, to the end (review 3's R6: a script that cancels a check with `idle`
/// must not leave an unclean array unsynchronised).
#[test]
fn idle_stops_a_check_but_never_a_needed_resync() {
    for (level, members, chunk) in [
        (Level::Raid1, 2, 0),
        (Level::Raid6(ParityLayout::LeftSymmetric), 4, 8),
    ] {
        let mut scenario = Scenario::new(level, members, chunk);
        scenario.in_sync = false;
        let (host, _io_rx) = new_host(&scenario, 4);
        let engine = &host.engine;
        let half = engine.scrub_progress().total / 2;
        engine.set_resync_start(half);
        engine.start_resync(&*host);
        engine.idle_scrub();
        assert_eq!(
            engine.scrub_progress().mode,
            Some(ScrubMode::Resync),
            "{level:?}: idle stopped a needed resync"
        );
        assert_eq!(
            engine.resync_offset(),
            half,
            "{level:?}: the resync started over"
        );
        let start = Instant::now();
        while !engine.in_sync() {
            assert!(start.elapsed() < Duration::from_secs(20), "no end");
            engine.work(&*host);
        }
        // In sync: a check runs, and idle stops it where it is.
        engine
            .start_scrub(&*host, ScrubMode::Check)
            .expect("a check");
        engine.work(&*host);
        engine.idle_scrub();
        assert_eq!(
            engine.scrub_progress().mode,
            None,
            "{level:?}: the check went on"
        );
    }
}

/// The regions of the sectors the run wrote (the model's non-zero tags: it knows the initial
/// zeroes too).
fn written_regions(report: &graid_sim::stress::Report) -> std::collections::BTreeSet<u64> {
    let (regions, _) = report.host.bitmap.as_ref().expect("a bitmap");
    let g = report.host.engine.geometry();
    (0u64..)
        .zip(&report.model)
        .filter(|(_, tag)| tag.is_some_and(|t| t != 0))
        .flat_map(|(sector, _)| regions.of_write(&g, sector, 1))
        .collect()
}

#[test]
fn writes_go_only_once_their_regions_bits_are_on_every_member() {
    for seed in seeds(2) {
        for (level, members, chunk) in [
            (Level::Raid1, 2, 0),
            (Level::Raid10, 4, 16),
            (Level::Raid5(ParityLayout::LeftSymmetric), 4, 16),
            (Level::Raid6(ParityLayout::LeftSymmetric), 5, 8),
        ] {
            let mut scenario = Scenario::new(level, members, chunk);
            scenario.bitmap_region_sectors = Some(64);
            // The host fails the run if a write reaches a member before its bits.
            let report = run(&scenario, seed);
            assert!(report.errors.is_empty(), "seed {seed}: {:?}", report.errors);
            let host = &*report.host;
            assert!(
                host.bitmap_writes
                    .load(std::sync::atomic::Ordering::Relaxed)
                    > 0
            );
            let written = written_regions(&report);
            assert!(!written.is_empty());
            for m in 0..members as usize {
                for &r in &written {
                    assert!(
                        host.disks[m].bitmap_bit(r),
                        "seed {seed}: {level:?}: region {r} written, its bit not on member {m}"
                    );
                }
            }
            // Nothing in flight is left counted.
            let (_, states) = host.bitmap.as_ref().unwrap();
            assert!(
                states.iter().all(|s| s.writes() == 0),
                "seed {seed}: {level:?}"
            );
        }
    }
}

#[test]
fn idle_regions_lose_their_bits_and_a_degraded_array_keeps_them() {
    let mut scenario = Scenario::new(Level::Raid1, 3, 0);
    scenario.bitmap_region_sectors = Some(64);
    let (host, _io_rx) = new_host(&scenario, 5);
    host.engine.set_bitmap_clean_interval(10);
    let look = || {
        std::thread::sleep(Duration::from_millis(12));
        host.engine.work(&*host);
    };
    assert_eq!(submit_inline(&host, Op::Write, 70, 8), Some(Status::Ok));
    assert!(
        host.disks[0].bitmap_bit(1),
        "region 1's bit before the write"
    );
    assert!(!host.disks[0].bitmap_bit(0) && !host.disks[0].bitmap_bit(2));
    look();
    look();
    look();
    assert!(!host.disks[0].bitmap_bit(1), "an idle region kept its bit");
    assert_eq!(submit_inline(&host, Op::Write, 130, 8), Some(Status::Ok));
    assert!(host.disks[2].bitmap_bit(2));
    // Degraded: the bits stay, for the member that comes back.
    host.engine.request_fail(&*host, 1);
    host.engine.work(&*host);
    assert_eq!(submit_inline(&host, Op::Write, 200, 8), Some(Status::Ok));
    for _ in 0..4 {
        look();
    }
    assert!(host.disks[0].bitmap_bit(2) && host.disks[0].bitmap_bit(3));
    let violations = host.violations.0.lock().unwrap().clone();
    assert!(violations.is_empty(), "{violations:#?}");
}

#[test]
fn with_a_bitmap_the_resync_only_visits_the_regions_dirty_at_start() {
    for (level, members, chunk) in [
        (Level::Raid1, 2, 0),
        (Level::Raid5(ParityLayout::LeftSymmetric), 3, 8),
    ] {
        let mut scenario = Scenario::new(level, members, chunk);
        scenario.in_sync = false;
        scenario.bitmap_region_sectors = Some(512);
        let (host, _io_rx) = new_host(&scenario, 7);
        let (regions, states) = host.bitmap.as_ref().unwrap();
        // Regions 1 and 5 were dirty at the crash; the resync walk is member sectors on RAID 5
        // and array sectors (= member sectors) on a two-way mirror.
        for r in [1, 5] {
            states[r].set_dirty_at_start();
        }
        let in_dirty = scribble(&host, 1, regions.span(1).start, 7)
            + scribble(&host, 1, regions.span(5).start, 5);
        let in_clean = scribble(&host, 1, regions.span(3).start, 4);
        host.engine.start_resync(&*host);
        let start = Instant::now();
        while !host.engine.in_sync() {
            assert!(start.elapsed() < Duration::from_secs(20), "no end");
            host.engine.work(&*host);
        }
        assert_eq!(
            host.engine.scrub_progress().mismatches,
            in_dirty,
            "{level:?}: the resync repaired other than the dirty regions"
        );
        assert!(states.iter().all(|s| !s.needs_sync()));
        // What lay in a clean region was left alone (the bitmap said nothing was written
        // there): only a check finds it.
        let check = scrub_now(&host, ScrubMode::Check, 7);
        assert_eq!(check.mismatches, in_clean, "{level:?}");
    }
}

#[test]
fn a_re_added_member_is_rebuilt_only_where_the_bitmap_marks_writes() {
    for (level, members, chunk) in [
        (Level::Raid1, 2, 0),
        (Level::Raid10, 4, 16),
        (Level::Raid5(ParityLayout::LeftSymmetric), 3, 8),
        (Level::Raid6(ParityLayout::LeftSymmetric), 4, 8),
    ] {
        let mut scenario = Scenario::new(level, members, chunk);
        scenario.bitmap_region_sectors = Some(512);
        let (host, _io_rx) = new_host(&scenario, 11);
        let engine = &host.engine;
        engine.write_superblocks(&*host).unwrap();
        engine.request_fail(&*host, 1);
        engine.work(&*host);
        assert_eq!(engine.fail_outcome(1), Ok(()));
        let device = *host.disks[1].superblocks.lock().unwrap().last().unwrap();
        assert!(engine.bitmap_covers(&device, 1), "{level:?}");
        assert!(!engine.bitmap_covers(&device, 0), "{level:?}: another role");
        let stale = graid_engine::superblock::Superblock {
            events: device.events - 1,
            ..device
        };
        assert!(
            !engine.bitmap_covers(&stale, 1),
            "{level:?}: older than the last update of a whole array"
        );
        // Written while member 1 was away: region 0 only.
        assert_eq!(submit_inline(&host, Op::Write, 0, 8), Some(Status::Ok));
        // What lies on member 1 where nothing was written stays (the rebuild skips it), so a
        // check finds it afterwards: the proof that the rebuild did not copy there.
        let stale_sectors = scribble(&host, 1, 4096, 6);
        let slot = engine.free_slot().unwrap();
        engine.request_re_add(&*host, 1, [0x4e; 16], slot);
        let start = Instant::now();
        while !engine.members()[1].is_in_sync() {
            assert!(start.elapsed() < Duration::from_secs(20), "no end");
            engine.work(&*host);
        }
        let skipped = engine.rebuild_skipped_sectors();
        assert!(
            skipped >= host.data_sectors / 2,
            "{level:?}: only {skipped} of {} member sectors skipped",
            host.data_sectors
        );
        // The write made while it was away reached it: a check finds what the stale sectors
        // alone make on an array that never lost the member (RAID 6 counts P and Q apart).
        let check = scrub_now(&host, ScrubMode::Check, 11);
        let (whole, _io_rx) = new_host(&scenario, 11);
        assert_eq!(submit_inline(&whole, Op::Write, 0, 8), Some(Status::Ok));
        assert_eq!(scribble(&whole, 1, 4096, 6), stale_sectors);
        let expected = scrub_now(&whole, ScrubMode::Check, 11).mismatches;
        assert!(expected >= stale_sectors, "{level:?}");
        assert_eq!(check.mismatches, expected, "{level:?}");
        let violations = host.violations.0.lock().unwrap().clone();
        assert!(violations.is_empty(), "{level:?}: {violations:#?}");
    }
}

#[test]
fn a_member_away_while_the_array_was_whole_again_is_not_covered() {
    let mut scenario = Scenario::new(Level::Raid1, 2, 0);
    scenario.bitmap_region_sectors = Some(512);
    let (host, _io_rx) = new_host(&scenario, 12);
    let engine = &host.engine;
    engine.write_superblocks(&*host).unwrap();
    engine.request_fail(&*host, 1);
    engine.work(&*host);
    let away = *host.disks[1].superblocks.lock().unwrap().last().unwrap();
    // Another device fills the role and is rebuilt in full: the array is whole again, and
    // the bits may be cleared.
    let slot = engine.free_slot().unwrap();
    engine.request_add(&*host, 1, [0x4f; 16], slot);
    let start = Instant::now();
    while !engine.members()[1].is_in_sync() {
        assert!(start.elapsed() < Duration::from_secs(20), "no end");
        engine.work(&*host);
    }
    assert_eq!(engine.rebuild_skipped_sectors(), 0, "a plain add skipped");
    engine.request_fail(&*host, 1);
    engine.work(&*host);
    assert!(
        !engine.bitmap_covers(&away, 1),
        "the first device missed the updates of the whole array"
    );
}

#[test]
fn a_check_and_a_repair_under_load_leave_every_copy_and_parity_matching() {
    // A pass that read a window before a write and wrote it after would put stale data over
    // the new: writes must be held out of the window it works on.
    for seed in seeds(2) {
        for (level, members, chunk) in [
            (Level::Raid1, 4, 0),
            (Level::Raid10, 4, 16),
            (Level::Raid5(ParityLayout::LeftSymmetric), 4, 16),
            (Level::Raid6(ParityLayout::LeftSymmetric), 5, 8),
        ] {
            for mode in [ScrubMode::Repair, ScrubMode::Check] {
                let mut scenario = Scenario::new(level, members, chunk);
                scenario.scrub = Some(mode);
                let report = run(&scenario, seed);
                assert!(report.errors.is_empty(), "seed {seed}: {:?}", report.errors);
                check_copies(&report, seed);
                let host = &*report.host;
                if level.has_parity() {
                    let check = scrub_now(host, ScrubMode::Check, seed);
                    assert_eq!(check.mismatches, 0, "seed {seed}: {level:?} after {mode:?}");
                } else {
                    check_mirrors_match(&report, seed);
                }
            }
        }
    }
}

/// Runs the worker until the running scrub (a resync, say) ends or stops, or `until` holds.
fn work_until(host: &Host, until: impl Fn(&Host) -> bool) {
    let start = Instant::now();
    while host.engine.scrub_progress().mode.is_some() && !until(host) {
        assert!(start.elapsed() < Duration::from_secs(20), "no end");
        host.engine.work(host);
    }
    // The worker's next runs: a failure recorded, nothing more moved.
    for _ in 0..3 {
        host.engine.work(host);
    }
}

/// Writes distinct tags over array sectors `[0, sectors)` and returns them.
fn fill(host: &Host, sectors: u64) -> Vec<u64> {
    let data: Vec<u64> = (0..sectors)
        .map(|s| 0x7a9_0000_0000 | (s << 4) | 1)
        .collect();
    assert_eq!(
        graid_sim::stress::submit_inline_data(host, Op::Write, 0, data.clone()),
        Some(Status::Ok)
    );
    data
}

/// Makes the parity (RAID 5/6: the P of the row's stripe) or copy 1 (mirrors) of member rows
/// `rows` disagree with the data, as a crash's half-done writes leave them.
fn scribble_rows(host: &Host, rows: &[u64]) -> u64 {
    let g = host.engine.geometry();
    for &row in rows {
        let member = if g.level().has_parity() {
            let stripe = row / u64::from(g.chunk_sectors());
            g.stripe_map(stripe).unwrap().p() as usize
        } else {
            1
        };
        host.disks[member].sectors.lock().unwrap()[(DATA_OFFSET + row) as usize] ^= 0x5c1b_0000;
    }
    rows.len() as u64
}

fn add_bad(host: &Host, bad: &[(usize, u64)]) {
    for &(member, row) in bad {
        host.disks[member]
            .bad
            .lock()
            .unwrap()
            .insert(DATA_OFFSET + row);
    }
}

/// md's resync on a read error (`R5_ReadError`, raid1's `fix_sync_read_error`): the block is
/// recovered from the others, written back and read again, and the window is then compared
/// and repaired like any other. Bad sectors on several members of one window, in different
/// 4 KiB blocks (two in one block on RAID 6), inside a window whose parity or copies the
/// scribble made disagree.
#[test]
fn a_resync_rewrites_bad_sectors_from_the_others_and_leaves_every_window_consistent() {
    // Level, members, chunk, and the bad sectors: (member, member row).
    type Case = (Level, u32, u32, &'static [(usize, u64)]);
    let cases: [Case; 3] = [
        // Copy 0, the one the resync keeps, and copy 1 in another block of the same piece.
        (Level::Raid1, 2, 0, &[(0, 5), (1, 30)]),
        // Data of stripe 0 and the P of stripe 2 (member 1), rows 3 and 21.
        (
            Level::Raid5(ParityLayout::LeftSymmetric),
            4,
            8,
            &[(0, 3), (1, 21)],
        ),
        // Two members in one row (recovered from P and Q), a third elsewhere.
        (
            Level::Raid6(ParityLayout::LeftSymmetric),
            5,
            8,
            &[(0, 3), (1, 3), (2, 21)],
        ),
    ];
    for (level, members, chunk, bad) in cases {
        let mut scenario = Scenario::new(level, members, chunk);
        scenario.in_sync = false;
        let (host, _io_rx) = new_host(&scenario, 21);
        let data = fill(&host, 256);
        // Rows of the first window (128 KiB of every member), none of them a bad one's.
        let scribbled = scribble_rows(&host, &[40, 41, 100, 150, 200]);
        add_bad(&host, bad);
        host.engine.start_resync(&*host);
        work_until(&host, |h| h.engine.in_sync());
        assert!(host.engine.in_sync(), "{level:?}: the resync did not end");
        assert!(
            host.members_failed_by_io().is_empty(),
            "{level:?}: a member was failed"
        );
        for (m, disk) in host.disks.iter().enumerate() {
            let left = disk.bad.lock().unwrap().clone();
            assert!(left.is_empty(), "{level:?}: member {m} still has {left:?}");
        }
        let corrected: u64 = host
            .engine
            .members()
            .iter()
            .map(|m| m.stats().corrected)
            .sum();
        assert_eq!(corrected, bad.len() as u64, "{level:?}: corrected blocks");
        assert_eq!(
            host.engine.scrub_progress().mismatches,
            scribbled,
            "{level:?}: the resync's mismatches"
        );
        let check = scrub_now(&host, ScrubMode::Check, 21);
        assert_eq!(
            (check.mismatches, check.read_errors),
            (0, 0),
            "{level:?}: {check:?}"
        );
        // The data the bad sectors held was recovered, not invented.
        let slot = &host.slots[0];
        assert_eq!(
            graid_sim::stress::submit_inline_data(&host, Op::Read, 0, vec![0; 256]),
            Some(Status::Ok)
        );
        assert_eq!(*slot.data.lock().unwrap(), data, "{level:?}: data changed");
        let violations = host.violations.0.lock().unwrap().clone();
        assert!(violations.is_empty(), "{level:?}: {violations:#?}");
    }
}

/// A bad sector the resync cannot rewrite (it sticks): the member is failed (not the last
/// copy) and recorded, and the window is not claimed: the position stays before it, the
/// array is not in sync, the bitmap keeps the region.
#[test]
fn a_resync_over_a_sector_that_cannot_be_rewritten_fails_the_member_and_keeps_the_window() {
    for (level, members, chunk, victim) in [
        (Level::Raid1, 2, 0, 1usize),
        (Level::Raid5(ParityLayout::LeftSymmetric), 4, 8, 2),
        (Level::Raid6(ParityLayout::LeftSymmetric), 5, 8, 3),
    ] {
        let mut scenario = Scenario::new(level, members, chunk);
        scenario.in_sync = false;
        scenario.bitmap_region_sectors = Some(512);
        scenario.faults[victim].bad_sectors_stick = true;
        let (host, _io_rx) = new_host(&scenario, 22);
        let (_, states) = host.bitmap.as_ref().unwrap();
        for s in states.iter() {
            s.set_dirty_at_start();
        }
        // In the second window (walk sectors 256..512 of region 0).
        add_bad(&host, &[(victim, 300)]);
        host.engine.start_resync(&*host);
        work_until(&host, |h| !h.members_failed_by_io().is_empty());
        assert_eq!(
            host.members_failed_by_io(),
            vec![victim as u32],
            "{level:?}: the member whose rewrite failed"
        );
        assert!(!host.engine.in_sync(), "{level:?}: in sync");
        assert_eq!(host.engine.resync_offset(), 256, "{level:?}: position");
        assert!(states[0].needs_sync(), "{level:?}: region 0 lost its bit");
        let newest = host.disks[0].newest_superblock().unwrap();
        assert_eq!(
            newest.slots[victim],
            graid_engine::superblock::Slot::Faulty,
            "{level:?}: the failure is not recorded"
        );
        assert!(!newest.clean || newest.resync_offset <= 256, "{level:?}");
    }
}

/// A window with data no member can give (two members of a RAID 5 unreadable in one row):
/// the resync stops there and says so, fails nothing, and the array stays not in sync.
#[test]
fn a_resync_over_unreadable_data_stops_at_that_window_and_fails_nothing() {
    let mut scenario = Scenario::new(Level::Raid5(ParityLayout::LeftSymmetric), 4, 8);
    scenario.in_sync = false;
    let (host, _io_rx) = new_host(&scenario, 23);
    add_bad(&host, &[(0, 300), (1, 300)]);
    host.engine.start_resync(&*host);
    work_until(&host, |_| false);
    assert!(!host.engine.in_sync(), "in sync over unreadable data");
    let progress = host.engine.scrub_progress();
    assert_eq!((progress.mode, progress.done), (None, 256), "{progress:?}");
    assert!(progress.stalled && progress.read_errors > 0, "{progress:?}");
    assert!(host.members_failed_by_io().is_empty());
    assert_eq!(
        host.engine.state(),
        graid_engine::array::ArrayState::Optimal
    );
}

/// A check that meets bad sectors rewrites them from the other copies or the parity, as md's
/// check does, counts them (read errors, and a corrected error for the member) and fails
/// nothing; the data stays what was written.
#[test]
fn a_check_rewrites_bad_sectors_from_the_others_and_fails_nothing() {
    for (level, members, chunk) in [
        (Level::Raid10, 4, 16),
        (Level::Raid5(ParityLayout::LeftSymmetric), 4, 8),
        (Level::Raid6(ParityLayout::LeftSymmetric), 5, 8),
    ] {
        let scenario = Scenario::new(level, members, chunk);
        let (host, _io_rx) = new_host(&scenario, 24);
        let data = fill(&host, 512);
        let bad = [(0, 130), (2, 260), (2, 300)];
        add_bad(&host, &bad);
        let check = scrub_now(&host, ScrubMode::Check, 24);
        assert_eq!(
            (check.mismatches, check.read_errors),
            (0, bad.len() as u64),
            "{level:?}: {check:?}"
        );
        assert!(host.members_failed_by_io().is_empty(), "{level:?}");
        for (m, disk) in host.disks.iter().enumerate() {
            let left = disk.bad.lock().unwrap().clone();
            assert!(left.is_empty(), "{level:?}: member {m} still has {left:?}");
        }
        let corrected: Vec<u64> = host
            .engine
            .members()
            .iter()
            .map(|m| m.stats().corrected)
            .collect();
        assert_eq!(corrected[0] + corrected[2], 3, "{level:?}: {corrected:?}");
        assert_eq!(
            graid_sim::stress::submit_inline_data(&host, Op::Read, 0, vec![0; 512]),
            Some(Status::Ok)
        );
        assert_eq!(*host.slots[0].data.lock().unwrap(), data, "{level:?}");
        let again = scrub_now(&host, ScrubMode::Check, 24);
        assert_eq!((again.mismatches, again.read_errors), (0, 0), "{level:?}");
    }
}
