//! Resize (`engine/resize.rs`): an array whose members were all replaced by larger ones grows
//! into the room, keeps every sector it held, writes the new size and a resync pending from
//! the old end to its superblocks (and the new regions' bits to its bitmap first), resyncs
//! the room and serves it; a grow past what the bitmap's states hold makes its regions
//! coarser; a shrink keeps what lies below the new end and refuses what lies past it; a power
//! cut anywhere in either assembles one size or the other with nothing lost; what is refused
//! is refused with the reason.

use graid_engine::geometry::{Level, ParityLayout};
use graid_engine::platform::{Metadata, Op, Status};
use graid_engine::resize::ResizeError;
use graid_engine::scrub::ScrubMode;
use graid_sim::host::{Host, DATA_OFFSET};
use graid_sim::stress::{
    lose_member, read_back_inline, run, scrub_now, seeds, submit_inline_data, Scenario,
};
use std::time::Instant;

const RAID5: Level = Level::Raid5(ParityLayout::LeftSymmetric);
const RAID6: Level = Level::Raid6(ParityLayout::LeftSymmetric);

/// (level, members, chunk, bitmap, log)
fn arrays() -> [(Level, u32, u32, bool, bool); 7] {
    [
        (Level::Raid0, 3, 8, false, false),
        (Level::Raid1, 2, 0, true, false),
        (Level::Raid1, 3, 0, false, false),
        (Level::Raid10, 4, 16, true, false),
        (RAID5, 4, 16, true, true),
        (RAID5, 3, 8, false, false),
        (RAID6, 5, 8, true, true),
    ]
}

fn scenario(level: Level, members: u32, chunk: u32, bitmap: bool, ppl: bool) -> Scenario {
    let mut s = Scenario::new(level, members, chunk);
    s.data_sectors = 2048;
    s.bitmap_region_sectors = bitmap.then_some(64);
    s.ppl = ppl;
    s
}

/// Every member replaced by one `extra` sectors larger: the room past each data area holds
/// what the new device held (not zeros, and not alike on two members). Returns the room each
/// member has past its data offset.
fn larger_members(host: &Host, extra: u64) -> u64 {
    for (m, disk) in host.disks.iter().enumerate() {
        let mut sectors = disk.sectors.lock().unwrap();
        let start = sectors.len() as u64;
        sectors.extend((start..start + extra).map(|s| 0xdead_0000_0000 ^ s ^ (m as u64) << 40));
    }
    let len = host.disks[0].sectors.lock().unwrap().len() as u64;
    len - DATA_OFFSET
}

/// Runs the worker until the array is in sync again.
fn resync(host: &Host, seed: u64) {
    let start = Instant::now();
    while !host.engine.in_sync() {
        assert!(
            start.elapsed().as_secs() < 60,
            "seed {seed}: the resync never ended"
        );
        host.engine.work(host);
    }
}

#[test]
fn a_grown_array_keeps_its_data_and_resyncs_and_serves_the_new_room() {
    for seed in seeds(2) {
        for (level, members, chunk, bitmap, ppl) in arrays() {
            let what = format!("{level:?} of {members}, bitmap {bitmap}, log {ppl}");
            let report = run(&scenario(level, members, chunk, bitmap, ppl), seed);
            assert!(
                report.errors.is_empty(),
                "seed {seed}: {what}: {:?}",
                report.errors
            );
            let host = &*report.host;
            let engine = &host.engine;
            let old = engine.geometry();
            let room = larger_members(host, 3 * old.member_data_sectors());
            let new = engine
                .resize(host, room, room, false)
                .unwrap_or_else(|e| panic!("seed {seed}: {what}: grow refused: {e}"));
            assert_eq!(engine.geometry(), new, "{what}");
            assert!(new.array_sectors() >= 3 * old.array_sectors(), "{what}");
            // On disk before anything else: the new size, a resync pending from the old end.
            let newest = *host.disks[0].superblocks.lock().unwrap().last().unwrap();
            assert_eq!(newest.data_size, new.member_data_sectors(), "{what}");
            let redundant = level != Level::Raid0;
            if redundant {
                assert!(!engine.in_sync(), "seed {seed}: {what}: in sync at once");
                assert_eq!(
                    newest.resync_offset,
                    old.resync_sectors(),
                    "seed {seed}: {what}: the resync's start"
                );
                if bitmap {
                    // The new regions' bits are on disk, so a crash resyncs them again.
                    let (regions, _) = host.bitmap.as_ref().unwrap();
                    let first = regions.count();
                    assert!(
                        host.disks[0].bitmap_bit(first),
                        "seed {seed}: {what}: the new room's first region's bit is not on disk"
                    );
                }
            }
            resync(host, seed);
            // Every sector the array held reads back as written.
            let mut model = report.model.clone();
            model.resize(new.array_sectors() as usize, None);
            read_back_inline(host, &model, seed);
            if redundant {
                let check = scrub_now(host, ScrubMode::Check, seed);
                assert_eq!(check.mismatches, 0, "seed {seed}: {what}: after the resync");
            }
            // The new room takes writes, and they read back.
            let tail = new.array_sectors() - old.array_sectors();
            let at = old.array_sectors() + tail / 2;
            let data: Vec<u64> = (0..24)
                .map(|i| (0x6e65_7700_0000u64 + i).wrapping_add(seed))
                .collect();
            assert_eq!(
                submit_inline_data(host, Op::Write, at, data.clone()),
                Some(Status::Ok),
                "seed {seed}: {what}: a write to the new room"
            );
            for (i, &d) in data.iter().enumerate() {
                model[at as usize + i] = Some(d);
            }
            read_back_inline(host, &model, seed);
            if redundant {
                let check = scrub_now(host, ScrubMode::Check, seed);
                assert_eq!(
                    check.mismatches, 0,
                    "seed {seed}: {what}: after a write there"
                );
            }
            let violations = host.violations.0.lock().unwrap().clone();
            assert!(
                violations.is_empty(),
                "seed {seed}: {what}: {violations:#?}"
            );
        }
    }
}

#[test]
fn a_resize_is_refused_with_the_reason() {
    let seed = 1;
    let report = run(&scenario(RAID5, 4, 16, true, true), seed);
    let host = &*report.host;
    let engine = &host.engine;
    let old = engine.geometry();
    let now = old.member_data_sectors();
    // No room on the members.
    assert!(matches!(
        engine.resize(host, now * 2, now, false),
        Err(ResizeError::NoRoom { .. })
    ));
    // Smaller, not asked for as a shrink.
    assert!(matches!(
        engine.resize(host, now / 2, now, false),
        Err(ResizeError::Shrink { .. })
    ));
    assert_eq!(engine.geometry(), old, "a refused resize changed the size");
    let room = larger_members(host, now);
    // Degraded.
    lose_member(host, 1, seed);
    engine.work(host);
    assert_eq!(
        engine.resize(host, room, room, false),
        Err(ResizeError::NotOptimal)
    );
    assert_eq!(
        engine.resize(host, now / 2, now, true),
        Err(ResizeError::NotOptimal)
    );
    assert_eq!(engine.geometry(), old);
}

#[test]
fn a_grow_past_the_bitmaps_states_makes_its_regions_coarser_and_keeps_every_mark() {
    for seed in seeds(2) {
        for (level, members, chunk, bitmap, ppl) in arrays().into_iter().filter(|a| a.3) {
            let what = format!("{level:?} of {members}, log {ppl}");
            let report = run(&scenario(level, members, chunk, bitmap, ppl), seed);
            assert!(report.errors.is_empty(), "seed {seed}: {what}");
            let host = &*report.host;
            let engine = &host.engine;
            let old = engine.geometry();
            let (before, _) = host.bitmap().unwrap();
            // 16 times the walk: four times what the kept states hold at this size.
            let room = larger_members(host, 15 * old.member_data_sectors());
            let new = engine
                .resize(host, room, room, false)
                .unwrap_or_else(|e| panic!("seed {seed}: {what}: refused: {e}"));
            let (after, states) = host.bitmap().unwrap();
            assert_eq!(
                after.region_sectors(),
                4 * before.region_sectors(),
                "seed {seed}: {what}: the smallest region size whose states fit"
            );
            assert_eq!(after.walk_sectors(), new.resync_sectors(), "{what}");
            let newest = *host.disks[0].superblocks.lock().unwrap().last().unwrap();
            assert_eq!(newest.bitmap_region, after.region_sectors(), "{what}");
            // Every bit on disk and in memory, whichever region size a start reads them at.
            for region in 0..after.count().max(before.count()) {
                for (m, disk) in host.disks.iter().take(members as usize).enumerate() {
                    assert!(
                        disk.bitmap_bit(region),
                        "seed {seed}: {what}: member {m}'s bit {region} is clear"
                    );
                }
            }
            assert!(states.iter().all(|s| s.on_disk()), "seed {seed}: {what}");
            resync(host, seed);
            let mut model = report.model.clone();
            model.resize(new.array_sectors() as usize, None);
            read_back_inline(host, &model, seed);
            let check = scrub_now(host, ScrubMode::Check, seed);
            assert_eq!(check.mismatches, 0, "seed {seed}: {what}");
            // The cleaner clears them at the new size.
            engine.set_bitmap_clean_interval(1);
            for _ in 0..8 {
                std::thread::sleep(std::time::Duration::from_millis(2));
                engine.work(host);
            }
            assert!(
                (0..after.count()).any(|r| !host.disks[0].bitmap_bit(r)),
                "seed {seed}: {what}: no bit was ever cleared"
            );
        }
    }
}

#[test]
fn a_shrunk_array_keeps_what_lies_below_its_new_end_and_refuses_what_lies_past_it() {
    for seed in seeds(2) {
        for (level, members, chunk, bitmap, ppl) in arrays() {
            let what = format!("{level:?} of {members}, bitmap {bitmap}, log {ppl}");
            let report = run(&scenario(level, members, chunk, bitmap, ppl), seed);
            assert!(report.errors.is_empty(), "seed {seed}: {what}");
            let host = &*report.host;
            let engine = &host.engine;
            let old = engine.geometry();
            let room = old.member_data_sectors();
            let new = engine
                .resize(host, room / 2, room, true)
                .unwrap_or_else(|e| panic!("seed {seed}: {what}: shrink refused: {e}"));
            assert_eq!(new.member_data_sectors(), room / 2, "{what}");
            assert!(
                engine.in_sync(),
                "seed {seed}: {what}: a shrink resyncs nothing"
            );
            let newest = *host.disks[0].superblocks.lock().unwrap().last().unwrap();
            assert_eq!(newest.data_size, room / 2, "seed {seed}: {what}");
            if bitmap {
                let (regions, _) = host.bitmap().unwrap();
                assert_eq!(regions.walk_sectors(), new.resync_sectors(), "{what}");
            }
            let mut model = report.model.clone();
            model.truncate(new.array_sectors() as usize);
            read_back_inline(host, &model, seed);
            // Past the new end: refused, reads and writes alike.
            let end = new.array_sectors();
            for op in [Op::Read, Op::Write] {
                let data = if op == Op::Write {
                    vec![7; 8]
                } else {
                    Vec::new()
                };
                assert_ne!(
                    submit_inline_data(host, op, end, data),
                    Some(Status::Ok),
                    "seed {seed}: {what}: {op:?} past the new end"
                );
            }
            if level != Level::Raid0 {
                let check = scrub_now(host, ScrubMode::Check, seed);
                assert_eq!(check.mismatches, 0, "seed {seed}: {what}");
            }
            // Grown back: the room resyncs again (no mark left from before the shrink
            // spares it) and serves.
            let grown = engine
                .resize(host, room, room, false)
                .unwrap_or_else(|e| panic!("seed {seed}: {what}: grow back refused: {e}"));
            assert_eq!(grown, old, "{what}");
            resync(host, seed);
            model.resize(old.array_sectors() as usize, None);
            read_back_inline(host, &model, seed);
            if level != Level::Raid0 {
                let check = scrub_now(host, ScrubMode::Check, seed);
                assert_eq!(check.mismatches, 0, "seed {seed}: {what}: grown back");
            }
            let violations = host.violations.0.lock().unwrap().clone();
            assert!(
                violations.is_empty(),
                "seed {seed}: {what}: {violations:#?}"
            );
        }
    }
}

/// Power cuts during a resize from each array's size to `factor` (over 2) times it, each
/// assembled with nothing lost and the room consistent; returns how many assembled at the new
/// size and how many at the old.
fn cut_during_resizes(factor_halves: u64, cuts: u64, bitmap_only: bool) -> (u32, u32) {
    use graid_sim::crash::{power_cut_during, Workload};
    use std::sync::atomic::{AtomicU64, Ordering};
    // Within the smallest size any of them shrinks to.
    const LOAD: Workload = Workload {
        ops: 160,
        region: 1024,
        max_len: 24,
    };
    let resized = AtomicU64::new(0);
    let (mut assembled_new, mut assembled_old) = (0, 0);
    for seed in seeds(cuts) {
        for (level, members, chunk, bitmap, ppl) in arrays() {
            if bitmap_only && !bitmap {
                continue;
            }
            let what = format!("{level:?} of {members}, bitmap {bitmap}, log {ppl}");
            let s = scenario(level, members, chunk, bitmap, ppl);
            let old = graid_sim::stress::geometry_of(&s).member_data_sectors();
            let wanted = old * factor_halves / 2;
            // Before a request early in the workload, so the cut falls in the resize as often
            // as after it.
            let at = seed % 24;
            let outcome = power_cut_during(&s, seed, LOAD, at, &|host| {
                let room = larger_members(host, wanted.saturating_sub(old));
                let shrink = wanted < old;
                if host.engine.resize(&**host, wanted, room, shrink).is_ok() {
                    resized.fetch_add(1, Ordering::Relaxed);
                }
            })
            .unwrap_or_else(|e| panic!("seed {seed}: {what}: not started: {e:?}"));
            assert!(
                outcome.wrong.is_empty(),
                "seed {seed}: {what}: sectors no write touched since the last flush read back \
                 wrong: {:?}",
                outcome.wrong
            );
            assert_eq!(
                outcome.mismatches.unwrap_or(0),
                0,
                "seed {seed}: {what}: copies or parity differ after the resync (the new room)"
            );
            let now = outcome.started.host.engine.geometry().member_data_sectors();
            if now == old {
                assembled_old += 1;
            } else {
                assert_eq!(
                    now, wanted,
                    "seed {seed}: {what}: a size neither before nor after"
                );
                assembled_new += 1;
            }
        }
    }
    assert!(resized.load(Ordering::Relaxed) > 0, "no resize ran");
    eprintln!("assembled resized {assembled_new}, at the old size {assembled_old}");
    (assembled_new, assembled_old)
}

#[test]
fn a_power_cut_during_a_grow_assembles_either_size_with_nothing_lost_and_the_room_consistent() {
    let (grown, _) = cut_during_resizes(4, 12, false);
    assert!(grown > 0, "no cut came after a grow's superblocks");
}

#[test]
fn a_power_cut_during_a_grow_that_coarsens_the_bitmap_loses_nothing() {
    // 16 times: the regions grow four times larger (every bit written set first).
    let (grown, _) = cut_during_resizes(32, 8, true);
    assert!(grown > 0, "no cut came after a grow's superblocks");
}

#[test]
fn a_power_cut_during_a_shrink_assembles_either_size_with_nothing_lost() {
    let (shrunk, _) = cut_during_resizes(1, 12, false);
    assert!(shrunk > 0, "no cut came after a shrink's superblocks");
}

#[test]
fn coarser_regions_are_set_in_every_block_before_the_superblocks_name_them() {
    // A bitmap of two blocks at the smallest region size, grown five times: the room starts
    // past the first block at the new size, so only the write of every block sets its bits.
    let mut s = Scenario::new(Level::Raid1, 2, 0);
    s.data_sectors = 2 * graid_engine::bitmap::BITS_PER_BLOCK * 8;
    s.bitmap_region_sectors = Some(8);
    s.in_sync = true;
    let (host, _io) = graid_sim::stress::new_host(&s, 1);
    let engine = &host.engine;
    engine.write_superblocks(&*host).unwrap();
    let old = engine.geometry();
    let room = larger_members(&host, 4 * old.member_data_sectors());
    engine.resize(&*host, room, room, false).unwrap();
    let (regions, _) = host.bitmap().unwrap();
    assert_eq!(regions.region_sectors(), 16);
    let room_first = old.resync_sectors() / 16;
    assert!(
        room_first >= graid_engine::bitmap::BITS_PER_BLOCK,
        "the room starts in block 0"
    );
    for (m, disk) in host.disks.iter().take(2).enumerate() {
        for region in [0, room_first - 1] {
            assert!(disk.bitmap_bit(region), "member {m}: bit {region} clear");
        }
    }
}

#[test]
fn a_small_grow_that_makes_the_regions_coarser_keeps_the_old_regions_bits_set() {
    // Grown to 3.5 times first (the kept states hold it at the same size), then to 4.5 times:
    // the regions double and there are fewer of them than before. Until the superblocks name
    // the new size, the old one is in force and reads the old regions past the new last one:
    // their bits must stay set (every block written with every bit set as far as either size
    // has regions).
    for seed in seeds(2) {
        let s = scenario(Level::Raid1, 2, 0, true, false);
        let report = run(&s, seed);
        assert!(report.errors.is_empty(), "seed {seed}: {:?}", report.errors);
        let host = &*report.host;
        let engine = &host.engine;
        let base = engine.geometry().member_data_sectors();
        let room = larger_members(host, 4 * base);
        engine
            .resize(host, base * 7 / 2, room, false)
            .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        resync(host, seed);
        let (before, _) = host.bitmap().unwrap();
        engine
            .resize(host, base * 9 / 2, room, false)
            .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        let (after, _) = host.bitmap().unwrap();
        assert_eq!(
            after.region_sectors(),
            2 * before.region_sectors(),
            "seed {seed}"
        );
        assert!(
            after.count() < before.count(),
            "seed {seed}: no fewer regions"
        );
        for region in 0..before.count() {
            for (m, disk) in host.disks.iter().take(2).enumerate() {
                assert!(
                    disk.bitmap_bit(region),
                    "seed {seed}: member {m}'s bit {region} (of {} before, {} after) is clear",
                    before.count(),
                    after.count()
                );
            }
        }
        resync(host, seed);
        let check = scrub_now(host, ScrubMode::Check, seed);
        assert_eq!(check.mismatches, 0, "seed {seed}");
    }
}
