//! A RAID 0, 5 or 6 restriped online (`engine/reshape_run.rs`): random writes and reads run
//! through the whole reshape (each submitter keeps the model of its stretch, and every read
//! must return it), then every sector reads back in the new geometry, the parity checks clean,
//! the superblocks name the new geometry alone, and the members hold exactly the new layout
//! at the new data offset (each sector where the new geometry maps it).

use graid_engine::geometry::{Geometry, Level, ParityLayout};
use graid_engine::platform::{Op, Status};
use graid_engine::scrub::ScrubMode;
use graid_engine::superblock::{encode, SUPERBLOCK_SIZE};
use graid_sim::host::{Host, DATA_OFFSET};
use graid_sim::stress::{
    fixed_seed, read_back_inline, run, scrub_now, seeds, submit_inline_data, ReshapeTo, Scenario,
};

const RAID5: Level = Level::Raid5(ParityLayout::LeftSymmetric);
const RAID6: Level = Level::Raid6(ParityLayout::LeftSymmetric);

/// A reshape to `level` over `members` with chunk `chunk`, its data offset `below` sectors
/// lower, one unit a step (many windows and records).
fn reshape_to(level: Level, members: u32, chunk_sectors: u32, below: u64) -> ReshapeTo {
    ReshapeTo {
        level,
        members,
        chunk_sectors,
        data_offset: DATA_OFFSET - below,
        window: 1,
        kill: &[],
        replace_killed: false,
    }
}

fn scenario(level: Level, members: u32, chunk: u32, to: ReshapeTo) -> Scenario {
    let mut s = Scenario::new(level, members, chunk);
    s.data_sectors = 2048;
    s.reshape = Some(to);
    s
}

/// Every sector the model knows lies where `g` at `data_offset` maps it, on the disks
/// themselves (no engine in between).
fn laid_out_as(host: &Host, g: &Geometry, data_offset: u64, model: &[Option<u64>], seed: u64) {
    laid_out_on(host, g, data_offset, model, seed, &[]);
}

/// [`laid_out_as`] on every member but those in `away`.
fn laid_out_on(
    host: &Host,
    g: &Geometry,
    data_offset: u64,
    model: &[Option<u64>],
    seed: u64,
    away: &[u32],
) {
    for (sector, want) in model.iter().enumerate() {
        let Some(want) = *want else { continue };
        let piece = g
            .map_read(sector as u64, 1, 0)
            .expect("mapped")
            .next()
            .expect("a piece");
        if away.contains(&piece.member) {
            continue;
        }
        let got = host.disks[piece.member as usize].sectors.lock().unwrap()
            [(data_offset + piece.member_sector) as usize];
        assert_eq!(got, want, "seed {seed}: array sector {sector} on disk");
    }
}

/// Runs `s` (the reshape under load) and checks its end.
fn reshaped(s: &Scenario, seed: u64) {
    let to = s.reshape.expect("a reshape");
    let report = run(s, seed);
    assert!(report.errors.is_empty(), "seed {seed}: {:?}", report.errors);
    let host = &*report.host;
    let engine = &host.engine;
    let new = engine.geometry();
    assert_eq!(
        (new.level(), new.members(), new.chunk_sectors()),
        (to.level, to.members, to.chunk_sectors),
        "seed {seed}"
    );
    assert_eq!(engine.data_offset(), to.data_offset, "seed {seed}");
    assert!(engine.reshape_progress().is_none(), "seed {seed}");
    let counts = engine.reshape_counts();
    let logged = engine.log().counts().0;
    eprintln!(
        "seed {seed}: {counts:?}, {} sectors written",
        report.ok_write_sectors
    );
    // On disk: the new geometry alone, in every member's newest superblock.
    for disk in 0..to.members as usize {
        let sb = host.disks[disk].newest_superblock().expect("a superblock");
        let mut block = [0; SUPERBLOCK_SIZE];
        encode(&sb, &mut block).unwrap_or_else(|e| panic!("seed {seed}: disk {disk}: {e:?}"));
        assert_eq!(sb.reshape, None, "seed {seed}: disk {disk}");
        assert_eq!(
            (sb.level, sb.members, sb.chunk_sectors, sb.data_offset),
            (to.level, to.members, to.chunk_sectors, to.data_offset),
            "seed {seed}: disk {disk}"
        );
    }
    laid_out_as(host, &new, to.data_offset, &report.model, seed);
    if new.level().has_parity() {
        let check = scrub_now(host, ScrubMode::Check, seed);
        assert_eq!(check.mismatches, 0, "seed {seed}: parity after the reshape");
    }
    // The new room (a grow's) takes writes, and everything reads back.
    let mut model = report.model.clone();
    model.resize(new.array_sectors() as usize, None);
    let end = new.array_sectors();
    let data: Vec<u64> = (0..16)
        .map(|i| (0x7e5a_0000_0000 ^ seed.wrapping_mul(64)).wrapping_add(i))
        .collect();
    let at = end - 16;
    assert_eq!(
        submit_inline_data(host, Op::Write, at, data.clone()),
        Some(Status::Ok),
        "seed {seed}"
    );
    for (i, d) in data.into_iter().enumerate() {
        model[at as usize + i] = Some(d);
    }
    read_back_inline(host, &model, seed);
    let violations = host.violations.0.lock().unwrap().clone();
    assert!(violations.is_empty(), "seed {seed}: {violations:#?}");
    kept_up_in_both_geometries(s, host, logged, seed);
}

/// The bitmap and the log came through the reshape: no write is left counted in a region
/// (each write's count left the regions it joined, whichever geometry mapped it), and the
/// log took entries again after the end (the end's write above is a partial one), in a ring
/// that ends by the new data offset.
fn kept_up_in_both_geometries(s: &Scenario, host: &Host, logged: u64, seed: u64) {
    if let Some((_, states)) = &host.bitmap {
        let counted: Vec<usize> = (states.iter().enumerate())
            .filter(|(_, r)| r.writes() != 0)
            .map(|(i, _)| i)
            .collect();
        assert!(
            counted.is_empty(),
            "seed {seed}: regions {counted:?} still count writes"
        );
    }
    if s.ppl {
        let log = host.engine.log();
        assert!(
            log.counts().0 > logged,
            "seed {seed}: nothing logged after the reshape"
        );
        let area = log.area().expect("the log");
        assert!(
            area.ring_sector(area.ring_sectors) <= host.engine.data_offset(),
            "seed {seed}: the log's ring {area:?} reaches into the data"
        );
    }
}

#[test]
fn raid5_grown_by_a_member_under_load() {
    for seed in seeds(3) {
        let to = reshape_to(RAID5, 5, 16, 256);
        reshaped(&scenario(RAID5, 4, 16, to), seed);
    }
}

#[test]
fn raid6_grown_by_a_member_under_load() {
    for seed in seeds(2) {
        let to = reshape_to(RAID6, 6, 16, 256);
        reshaped(&scenario(RAID6, 5, 16, to), seed);
    }
}

#[test]
fn raid0_grown_by_a_member_under_load() {
    for seed in seeds(2) {
        let to = reshape_to(Level::Raid0, 4, 16, 256);
        reshaped(&scenario(Level::Raid0, 3, 16, to), seed);
    }
}

#[test]
fn raid5_with_a_bitmap_grown_under_load() {
    for seed in seeds(2) {
        let to = reshape_to(RAID5, 5, 16, 256);
        let mut s = scenario(RAID5, 4, 16, to);
        s.bitmap_region_sectors = Some(64);
        reshaped(&s, seed);
    }
}

/// A device away across a reshape (or part of one) does not come back through the bitmap:
/// the bits name the rows requests wrote, not those the reshape moved, so it is rebuilt
/// whole.
#[test]
fn the_bitmap_does_not_cover_a_device_away_across_a_reshape() {
    use graid_sim::stress::start_reshape;
    for seed in seeds(1) {
        let mut s = Scenario::new(RAID5, 4, 16);
        s.data_sectors = 1024;
        s.bitmap_region_sectors = Some(64);
        let report = run(&s, seed);
        let host = &*report.host;
        let engine = &host.engine;
        let before = host.disks[2].newest_superblock().expect("a superblock");
        assert!(engine.bitmap_covers(&before, 2), "seed {seed}: before");
        start_reshape(host, reshape_to(RAID5, 5, 16, 256), seed);
        while engine.reshape_counts().windows < 2 {
            engine.work(host);
        }
        let during = host.disks[2].newest_superblock().expect("a superblock");
        assert!(during.reshape.is_some(), "seed {seed}");
        assert!(!engine.bitmap_covers(&before, 2), "seed {seed}: during");
        assert!(!engine.bitmap_covers(&during, 2), "seed {seed}: during");
        while engine.reshaping() {
            engine.work(host);
        }
        for sb in [before, during] {
            assert!(!engine.bitmap_covers(&sb, 2), "seed {seed}: after");
        }
        let now = host.disks[2].newest_superblock().expect("a superblock");
        assert!(engine.bitmap_covers(&now, 2), "seed {seed}: its own");
    }
}

/// The log's ring gives its end to the data (graid's 1 MiB log and no other room before the
/// data, as on members under 1 GiB).
#[test]
fn raid6_with_a_log_grown_under_load() {
    for seed in seeds(2) {
        let to = reshape_to(RAID6, 6, 16, 512);
        let mut s = scenario(RAID6, 5, 16, to);
        s.ppl = true;
        reshaped(&s, seed);
    }
}

#[test]
fn raid5_chunk_changed_under_load() {
    for seed in seeds(2) {
        let to = reshape_to(RAID5, 4, 64, 512);
        let s = scenario(RAID5, 4, 16, to);
        reshaped(&s, seed);
    }
}

/// Power cuts at random moments of a reshape under small writes (volatile caches: a member
/// loses what it did not flush), each started again as the module assembles it, the reshape
/// taken up where the superblocks say and run to its end: every sector no write touched since
/// the last completed flush reads back as written, and the parity checks clean. Returns how
/// many starts took a reshape up in its middle, and how many found it ended.
fn cut_during_reshapes(from: Scenario, to: ReshapeTo, cuts: u64) -> (u32, u32) {
    use graid_sim::crash::{power_cut_during, Workload};
    const LOAD: Workload = Workload {
        ops: 120,
        region: 4096,
        max_len: 24,
    };
    let (mut middle, mut ended) = (0, 0);
    for seed in seeds(cuts) {
        let at = seed % 12;
        // Windows of one unit (many records), of the default size (few), and between.
        let to = ReshapeTo {
            window: [to.window, 0, 1024][(seed % 3) as usize],
            ..to
        };
        let outcome = power_cut_during(&from, seed, LOAD, at, &|host| {
            graid_sim::stress::start_reshape(host, to, seed);
        })
        .unwrap_or_else(|e| panic!("seed {seed}: not started: {e:?}"));
        assert!(
            outcome.wrong.is_empty(),
            "seed {seed}: sectors no write touched since the last flush read back wrong: {:?}",
            outcome.wrong
        );
        let host = &outcome.started.host;
        assert!(
            outcome.started.missing.is_empty(),
            "seed {seed}: members {:?} left out",
            outcome.started.missing
        );
        assert!(
            !host.engine.reshaping(),
            "seed {seed}: the reshape never ended"
        );
        let g = host.engine.geometry();
        if (g.members(), g.chunk_sectors()) == (to.members, to.chunk_sectors) {
            assert_eq!(host.engine.data_offset(), to.data_offset, "seed {seed}");
            match outcome.started.resumed {
                Some(_) => middle += 1,
                None => ended += 1,
            }
        }
        if let Some(mismatches) = outcome.mismatches {
            assert_eq!(
                mismatches,
                0,
                "seed {seed}: parity after the cut (resumed at {:?}, clean {}, bitmap {:?}, \
                 log {})",
                outcome.started.resumed,
                outcome.started.clean,
                from.bitmap_region_sectors,
                from.ppl
            );
        }
    }
    (middle, ended)
}

#[test]
fn a_power_cut_during_a_raid5_grow_loses_nothing() {
    let mut from = Scenario::new(RAID5, 4, 16);
    // Small enough that some reshapes end before the cut.
    from.data_sectors = 512;
    let to = reshape_to(RAID5, 5, 16, 256);
    let (middle, ended) = cut_during_reshapes(from, to, 48);
    // One replayed seed cuts once; the spread of cuts is a property of the many.
    if fixed_seed().is_none() {
        assert!(middle > 0, "no cut came in the middle of the reshape");
        assert!(ended > 0, "no cut came after the reshape's end");
    }
}

#[test]
fn a_power_cut_during_a_grow_with_a_bitmap_or_a_log_loses_nothing() {
    for ppl in [false, true] {
        let mut from = Scenario::new(RAID5, 4, 16);
        from.data_sectors = 1024;
        from.bitmap_region_sectors = (!ppl).then_some(64);
        from.ppl = ppl;
        let to = reshape_to(RAID5, 5, 16, 256);
        let (middle, _) = cut_during_reshapes(from, to, 24);
        assert!(
            middle > 0 || fixed_seed().is_some(),
            "no cut came in the middle of the reshape (log: {ppl})"
        );
    }
}

#[test]
fn a_power_cut_during_a_raid6_chunk_change_loses_nothing() {
    let mut from = Scenario::new(RAID6, 5, 16);
    from.data_sectors = 2048;
    let to = reshape_to(RAID6, 5, 32, 512);
    let (middle, _) = cut_during_reshapes(from, to, 32);
    assert!(
        middle > 0 || fixed_seed().is_some(),
        "no cut came in the middle of the reshape"
    );
}

/// Bad sectors on a member under a grow: the reshape recovers what it cannot read from the
/// parity (md's reshape does), under load, and ends with everything where the new geometry
/// puts it.
#[test]
fn bad_sectors_under_a_reshape_are_recovered_from_the_parity() {
    use graid_sim::host::Faults;
    for seed in seeds(2) {
        let bad = Faults {
            bad_sectors: 24,
            ..Faults::default()
        };
        let s = scenario(RAID5, 4, 16, reshape_to(RAID5, 5, 16, 256)).with_fault(1, bad);
        reshaped(&s, seed);
    }
}

/// Sectors the reshape cannot read even through the parity (a bad sector on a degraded
/// array): it stands still and says so, retried, nothing written over; once the sector reads
/// again the reshape ends with nothing lost.
#[test]
fn an_unrecoverable_window_makes_the_reshape_stand_still_not_lose_data() {
    use graid_sim::stress::{fail_member, start_reshape};
    use std::time::{Duration, Instant};
    for seed in seeds(2) {
        let mut s = Scenario::new(RAID5, 4, 16);
        s.data_sectors = 1024;
        let report = run(&s, seed);
        assert!(report.errors.is_empty(), "seed {seed}: {:?}", report.errors);
        let host = &*report.host;
        let engine = &host.engine;
        let to = reshape_to(RAID5, 5, 16, 256);
        start_reshape(host, to, seed);
        // Degraded, and a bad sector in the middle of member 1's data area.
        fail_member(host, 2, seed);
        let bad = DATA_OFFSET + 600;
        host.disks[1].bad.lock().unwrap().insert(bad);
        let began = Instant::now();
        while !engine.reshape_progress().is_some_and(|r| r.stalled) {
            assert!(
                began.elapsed() < Duration::from_secs(20),
                "seed {seed}: never stood still ({:?})",
                engine.reshape_progress()
            );
            engine.work(host);
        }
        assert!(engine.reshaping(), "seed {seed}");
        assert!(engine.reshape_counts().retries > 0, "seed {seed}");
        host.disks[1].bad.lock().unwrap().clear();
        let began = Instant::now();
        while engine.reshaping() {
            assert!(
                began.elapsed() < Duration::from_secs(20),
                "seed {seed}: never ended"
            );
            engine.work(host);
            std::thread::sleep(Duration::from_millis(2));
        }
        assert_eq!(engine.geometry().members(), 5, "seed {seed}");
        read_back_inline(host, &report.model, seed);
        rebuild_now(host, &[2], seed);
        let check = scrub_now(host, ScrubMode::Check, seed);
        assert_eq!(check.mismatches, 0, "seed {seed}");
        let violations = host.violations.0.lock().unwrap().clone();
        assert!(violations.is_empty(), "seed {seed}: {violations:#?}");
    }
}

/// Puts new devices (garbage first) in `members`' places unless one is there, and runs the
/// worker until they are rebuilt and the array is in sync (a grow's new room is resynced
/// once the array is whole).
fn rebuild_now(host: &Host, members: &[u32], seed: u64) {
    for &member in members {
        add_new_device(host, member, seed);
    }
    let engine = &host.engine;
    let began = std::time::Instant::now();
    while engine.rebuild_target().is_some() || !engine.in_sync() {
        assert!(
            began.elapsed() < std::time::Duration::from_secs(30),
            "seed {seed}: never rebuilt ({:?})",
            engine.rebuild_target()
        );
        engine.work(host);
    }
}

/// Puts a new device (garbage first) in member `member`'s place unless one is there.
fn add_new_device(host: &Host, member: u32, seed: u64) {
    use graid_sim::host::GARBAGE;
    use graid_sim::stress::NEW_DEVICE_UUID;
    let engine = &host.engine;
    if !engine.members()[member as usize].is_active() {
        let disk = &host.disks[member as usize];
        for (i, tag) in disk.sectors.lock().unwrap().iter_mut().enumerate() {
            *tag = GARBAGE ^ i as u64;
        }
        disk.dead.store(false, std::sync::atomic::Ordering::SeqCst);
        let slot = engine.free_slot().expect("a free slot");
        engine.request_add(host, member, NEW_DEVICE_UUID, slot);
        engine.work(host);
        assert_eq!(
            engine.add_outcome(member, &NEW_DEVICE_UUID),
            Ok(()),
            "seed {seed}"
        );
    }
}

/// Members lost in the middle of a reshape under load (their drives die): it goes on
/// degraded, as md's does, every read returning the model all along; it ends in the new
/// geometry on the members left (the lost columns recovered from the old parity), and once
/// new devices took the lost places and were rebuilt, every member holds the new layout and
/// the parity checks clean.
fn lost_mid_reshape(from: Scenario, to: ReshapeTo, seed: u64) {
    use graid_engine::array::ArrayState;
    let report = run(
        &Scenario {
            reshape: Some(to),
            ..from
        },
        seed,
    );
    assert!(report.errors.is_empty(), "seed {seed}: {:?}", report.errors);
    let host = &*report.host;
    let engine = &host.engine;
    let new = engine.geometry();
    assert_eq!(
        (new.members(), new.chunk_sectors(), engine.data_offset()),
        (to.members, to.chunk_sectors, to.data_offset),
        "seed {seed}"
    );
    if !to.replace_killed {
        assert_eq!(engine.state(), ArrayState::Degraded, "seed {seed}");
        laid_out_on(host, &new, to.data_offset, &report.model, seed, to.kill);
    }
    rebuild_now(host, to.kill, seed);
    assert_eq!(engine.state(), ArrayState::Optimal, "seed {seed}");
    laid_out_as(host, &new, to.data_offset, &report.model, seed);
    read_back_inline(host, &report.model, seed);
    let check = scrub_now(host, ScrubMode::Check, seed);
    assert_eq!(check.mismatches, 0, "seed {seed}: parity after the rebuild");
    let violations = host.violations.0.lock().unwrap().clone();
    assert!(violations.is_empty(), "seed {seed}: {violations:#?}");
}

#[test]
fn a_member_lost_mid_grow_leaves_it_going_on_degraded() {
    for seed in seeds(2) {
        let to = ReshapeTo {
            kill: &[2],
            ..reshape_to(RAID5, 5, 16, 256)
        };
        lost_mid_reshape(scenario(RAID5, 4, 16, to), to, seed);
    }
}

#[test]
fn two_raid6_members_lost_mid_grow_leave_it_going_on_degraded() {
    for seed in seeds(2) {
        let to = ReshapeTo {
            kill: &[1, 3],
            ..reshape_to(RAID6, 5, 16, 256)
        };
        lost_mid_reshape(scenario(RAID6, 4, 16, to), to, seed);
    }
}

/// Each new stripe gathers columns from several old ones, so two lost old columns may both
/// belong on the two lost members: both kept in the buffer's spare columns.
#[test]
fn two_raid6_members_lost_mid_chunk_change_leave_it_going_on_degraded() {
    for seed in seeds(2) {
        let to = ReshapeTo {
            kill: &[1, 3],
            ..reshape_to(RAID6, 5, 64, 512)
        };
        lost_mid_reshape(scenario(RAID6, 5, 16, to), to, seed);
    }
}

#[test]
fn a_member_lost_mid_chunk_change_leaves_it_going_on_degraded() {
    for seed in seeds(2) {
        let to = ReshapeTo {
            kill: &[0],
            ..reshape_to(RAID5, 4, 32, 512)
        };
        lost_mid_reshape(scenario(RAID5, 4, 16, to), to, seed);
    }
}

/// A new device takes the lost member's place while the reshape still runs (a spare's
/// takeover): the reshape writes to it, and it is rebuilt in the new geometry after the end.
#[test]
fn a_device_that_takes_a_lost_place_mid_reshape_is_rebuilt_after_it() {
    for seed in seeds(2) {
        let to = ReshapeTo {
            kill: &[1],
            replace_killed: true,
            ..reshape_to(RAID5, 5, 16, 256)
        };
        lost_mid_reshape(scenario(RAID5, 4, 16, to), to, seed);
    }
}

/// The rebuild's speed limit holds for a reshape (member rows a second, as for a rebuild),
/// a slow one too: a step moves no more than a second of the floor allows, since its pause
/// lasts a second at most. 768 KiB of rows a member at 256 KiB/s: three windows, two pauses.
#[test]
fn a_reshape_keeps_to_a_slow_speed_limit() {
    use graid_sim::stress::start_reshape;
    use std::time::{Duration, Instant};
    let seed = seeds(1).next().expect("a seed");
    let mut s = Scenario::new(RAID5, 4, 16);
    s.data_sectors = 2048;
    let report = run(&s, seed);
    let host = &*report.host;
    let engine = &host.engine;
    assert!(engine.set_rebuild_speed(256, 256));
    // A gap wide enough for the default window: only the pace makes them smaller.
    let to = ReshapeTo {
        window: 0,
        ..reshape_to(RAID5, 5, 16, 2048)
    };
    start_reshape(host, to, seed);
    let began = Instant::now();
    while engine.reshaping() {
        engine.work(host);
    }
    let took = began.elapsed();
    assert!(
        took >= Duration::from_millis(1900),
        "seed {seed}: moved in {took:?}, the limit asks 2 s at least"
    );
    assert!(engine.reshape_counts().windows >= 3, "seed {seed}");
    read_back_inline(host, &report.model, seed);
}

/// A chunk that does not divide the member size would leave the array's end out of the new
/// shape: refused with the sizes (md refuses the same), nothing changed, everything reads.
#[test]
fn a_chunk_that_does_not_divide_the_members_is_refused() {
    use graid_engine::geometry::Geometry;
    use graid_engine::reshape_run::ReshapeError;
    for seed in seeds(1) {
        let mut s = Scenario::new(RAID5, 4, 16);
        s.data_sectors = 2064;
        let report = run(&s, seed);
        let host = &*report.host;
        let engine = &host.engine;
        let new = Geometry::new(RAID5, 4, 32, 2064).expect("the new geometry");
        let got = engine.reshape_allowed(new, DATA_OFFSET - 512);
        assert_eq!(
            got.err(),
            Some(ReshapeError::Smaller {
                now: 3 * 2064,
                new: 3 * 2048
            }),
            "seed {seed}"
        );
        assert!(!engine.reshaping(), "seed {seed}");
        assert_eq!(engine.geometry().chunk_sectors(), 16, "seed {seed}");
        read_back_inline(host, &report.model, seed);
    }
}

/// Slow reads under a grow: a read mapped old before a record may still be reading when the
/// next window moves over its old rows, so a step waits for such reads first (the drain's
/// reads); every read returns what the model says.
#[test]
fn slow_reads_under_a_grow_read_what_was_written() {
    use graid_sim::host::Faults;
    for seed in seeds(2) {
        let slow = Faults {
            read_delay_us: 3000,
            ..Faults::default()
        };
        let to = reshape_to(RAID5, 5, 16, 256);
        let mut s = scenario(RAID5, 4, 16, to);
        for m in 0..4 {
            s = s.with_fault(m, slow);
        }
        reshaped(&s, seed);
    }
}
