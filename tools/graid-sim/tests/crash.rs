//! Power cuts with volatile write caches on every level, with and without the write-intent
//! bitmap and the partial parity log, during a resync and during a rebuild (`src/crash.rs`):
//! after the next start, the resync and the rebuild, every sector no write touched since the
//! last completed flush reads back as written, and a check finds the copies and parity matching.

use graid_engine::geometry::{Level, ParityLayout};
use graid_sim::crash::{power_cut, Workload};
use graid_sim::stress::{lose_member, seeds, Scenario, NEW_DEVICE_UUID};

const RAID5: Level = Level::Raid5(ParityLayout::LeftSymmetric);
const RAID6: Level = Level::Raid6(ParityLayout::LeftSymmetric);

const LOAD: Workload = Workload {
    ops: 400,
    region: 1024,
    max_len: 24,
};

/// The arrays every cut runs on: (level, members, chunk, bitmap, log).
fn arrays() -> [(Level, u32, u32, bool, bool); 7] {
    [
        (Level::Raid1, 3, 0, true, false),
        (Level::Raid1, 2, 0, false, false),
        (Level::Raid10, 4, 16, true, false),
        (RAID5, 4, 16, true, true),
        (RAID5, 3, 8, false, false),
        (RAID6, 5, 8, true, true),
        (RAID6, 4, 16, true, false),
    ]
}

fn scenario(level: Level, members: u32, chunk: u32, bitmap: bool, ppl: bool) -> Scenario {
    let mut s = Scenario::new(level, members, chunk);
    s.data_sectors = 2048;
    // Small regions: a cut finds some bits set and some cleared.
    s.bitmap_region_sectors = bitmap.then_some(64);
    s.ppl = ppl;
    s
}

fn check(what: &str, seed: u64, outcome: &graid_sim::crash::CutOutcome) {
    assert!(
        outcome.wrong.is_empty(),
        "seed {seed}: {what}: sectors {:?} lost though flushed and untouched since \
         ({} writes before the cut)",
        outcome.wrong,
        outcome.writes
    );
    assert_eq!(
        outcome.mismatches.unwrap_or(0),
        0,
        "seed {seed}: {what}: copies or parity differ after the resync"
    );
}

/// One power cut of `array` (as [`arrays`] lists them) under the load, its outcome checked.
fn cut_and_check(
    (level, members, chunk, bitmap, ppl): (Level, u32, u32, bool, bool),
    seed: u64,
) -> graid_sim::crash::CutOutcome {
    let s = scenario(level, members, chunk, bitmap, ppl);
    let what = format!("{level:?} of {members}, bitmap {bitmap}, log {ppl}");
    let outcome = power_cut(&s, seed, LOAD, false, |_| {})
        .unwrap_or_else(|e| panic!("seed {seed}: {what}: not started: {e:?}"));
    check(&what, seed, &outcome);
    outcome
}

#[test]
fn a_power_cut_loses_no_flushed_write_and_leaves_copies_and_parity_matching() {
    let (mut clean_starts, mut replays, mut adopted) = (0, 0, 0);
    let (mut groups, mut grouped_scans) = (0, 0);
    for seed in seeds(12) {
        for array in arrays() {
            let outcome = cut_and_check(array, seed);
            clean_starts += u32::from(outcome.started.clean);
            replays += u32::from(outcome.started.replayed > 0);
            adopted += outcome.adopted;
            groups += outcome.log_groups;
            grouped_scans += u32::from(outcome.started.grouped > 0);
        }
    }
    // A cut that finds a group in the log is a matter of timing (3 to 7 of the 24 logged
    // cuts above on an idle machine, none in one run beside other tests): more cuts of the
    // logged arrays, each checked the same, until one does (or 36 more seeds).
    for seed in seeds(36) {
        if grouped_scans > 0 {
            break;
        }
        for array in arrays().into_iter().filter(|a| a.4) {
            let outcome = cut_and_check(array, seed);
            groups += outcome.log_groups;
            grouped_scans += u32::from(outcome.started.grouped > 0);
        }
    }
    // The cuts fell where it matters: some after the array was marked clean, some with a log
    // to replay.
    assert!(clean_starts > 0, "no cut came while the array was clean");
    assert!(replays > 0, "no start replayed the log");
    // Streams of writes met on stripes: the first took the others in.
    assert!(adopted > 0, "no write was ever taken in by another");
    // Log entries queued while their member's write was in flight went out as groups, and
    // starts after a cut found entries in them.
    assert!(groups > 0, "no log write carried a group");
    assert!(grouped_scans > 0, "no start found a group in the log");
}

#[test]
fn a_power_cut_during_the_initial_resync_loses_nothing_flushed() {
    for seed in seeds(8) {
        for (level, members, chunk, bitmap, ppl) in arrays() {
            let mut s = scenario(level, members, chunk, bitmap, ppl);
            s.in_sync = false;
            let what = format!("{level:?} of {members} resyncing, bitmap {bitmap}, log {ppl}");
            let outcome = power_cut(&s, seed, LOAD, false, |host| {
                host.engine.start_resync(&**host);
            })
            .expect("the array starts");
            check(&what, seed, &outcome);
            assert!(outcome.started.host.engine.in_sync(), "seed {seed}: {what}");
        }
    }
}

#[test]
fn a_power_cut_during_a_rebuild_loses_nothing_flushed() {
    for seed in seeds(8) {
        for (level, members, chunk, bitmap, ppl) in arrays() {
            let s = scenario(level, members, chunk, bitmap, ppl);
            let what = format!("{level:?} of {members} rebuilding, bitmap {bitmap}, log {ppl}");
            let outcome = power_cut(&s, seed, LOAD, false, |host| {
                lose_member(host, 1, seed);
                let slot = host.engine.free_slot().expect("a free slot");
                host.engine.request_add(&**host, 1, NEW_DEVICE_UUID, slot);
                host.engine.work(&**host);
            });
            match outcome {
                Ok(outcome) => check(&what, seed, &outcome),
                // A RAID 5/6 without a log that crashed while degraded (rebuilding) is refused
                // a start, as md refuses it: its parity may not match its data.
                Err(e) => assert!(
                    level.has_parity() && !ppl,
                    "seed {seed}: {what}: not started: {e:?}"
                ),
            }
        }
    }
}

/// The seed that found the sim starting what the module refuses: a RAID 5 without a log cut
/// while a member was being rebuilt. Above the recovery offset its parity may be torn, so the
/// start must be refused (`check_rebuild_sources` in the module), not started and lose data.
#[test]
fn a_crash_while_rebuilding_without_a_log_is_refused_as_the_module_refuses() {
    let seed = 6_151_052_081_852_283_891;
    let s = scenario(RAID5, 3, 8, false, false);
    let outcome = power_cut(&s, seed, LOAD, false, |host| {
        lose_member(host, 1, seed);
        let slot = host.engine.free_slot().expect("a free slot");
        host.engine.request_add(&**host, 1, NEW_DEVICE_UUID, slot);
        host.engine.work(&**host);
    });
    assert!(
        matches!(outcome, Err(graid_sim::crash::StartError::ParityUntrusted)),
        "a crashed RAID 5 with a member being rebuilt and no log started: {:?}",
        outcome.map(|o| o.wrong)
    );
}
