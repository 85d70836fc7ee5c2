//! Power cuts with volatile write caches, and the next start as the kernel assembles it.
//!
//! [`power_cut`] drives one array with a single submitter (writes, flushes and idle spells in
//! which the worker marks the array clean, clears bitmap bits and moves a resync or rebuild on),
//! cuts the power at a random member write or between two members' metadata writes, lets each
//! member lose what its volatile cache still held ([`MemDisk::image_after_cut`]), and starts the
//! images again with [`reassemble`] (`Array::assemble` in the module: the freshest superblock,
//! the resync from where it says, the bitmap's bits, the log replayed). Then the resync and
//! rebuild run to the end. What must hold, whatever the cut: every sector that no write touched
//! since the last completed flush reads back as written, and a check finds the copies and
//! parity matching.

use crate::host::{Host, LogImage, MemDisk, QueuedIo, HANG};
use crate::stress::{
    clip_to_run, geometry_of, host_with, scrub_now, submit_inline_batch, submit_inline_data,
    Scenario,
};
use graid_engine::assembly::{member_status, pick_freshest, MemberStatus};
use graid_engine::bitmap::load_block;
use graid_engine::geometry::{Level, MAX_MEMBERS};
use graid_engine::members::{MemberSet, MemberState};
use graid_engine::platform::{Op, Status};
use graid_engine::ppl::{scan_log, LogId, BLOCK_BYTES as PPL_BLOCK_BYTES};
use graid_engine::reshape::ReshapePlan;
use graid_engine::scrub::ScrubMode;
use graid_engine::superblock::{Superblock, RECOVERY_COMPLETE};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use std::sync::atomic::Ordering;
use std::sync::mpsc::Receiver;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Why the images did not start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StartError {
    /// No member holds a superblock of the array.
    NoSuperblock,
    /// Too many members missing: data would be lost.
    TooManyMissing,
    /// Degraded RAID 5/6 whose parity cannot be trusted (`EUCLEAN` in the module).
    ParityUntrusted,
}

/// What a start found and did.
pub struct Started {
    pub host: Arc<Host>,
    pub io_rx: Receiver<QueuedIo>,
    /// Roles with no current device.
    pub missing: MemberSet,
    /// The freshest superblock said clean.
    pub clean: bool,
    /// Parity sectors the log's replay rewrote.
    pub replayed: u64,
    /// Entries the scan found in group blocks.
    pub grouped: u64,
    /// The position of the reshape the start took up, if one was in progress.
    pub resumed: Option<u64>,
}

/// Starts the array on `disks` (the members by role, then the replacement's device) as the
/// module's assembly does. `force` starts a degraded RAID 5/6 whose parity is not trusted (a
/// test's negative control; the module refuses it).
pub fn reassemble(
    scenario: &Scenario,
    seed: u64,
    disks: Vec<MemDisk>,
    force: bool,
) -> Result<Started, StartError> {
    // The superblocks on the first `n` disks, and which is the freshest.
    let look = |n: usize| -> Result<(Vec<(usize, Superblock)>, usize), StartError> {
        let found: Vec<(usize, Superblock)> = disks
            .iter()
            .take(n)
            .enumerate()
            .filter_map(|(i, d)| d.newest_superblock().map(|sb| (i, sb)))
            .collect();
        let sbs: Vec<Superblock> = found.iter().map(|&(_, sb)| sb).collect();
        let uuid = sbs.first().ok_or(StartError::NoSuperblock)?.array_uuid;
        let best = pick_freshest(&sbs, &uuid).ok_or(StartError::NoSuperblock)?;
        Ok((found, best))
    };
    // The disks of the scenario's members, or of as many as the freshest superblock says (a
    // mirror's copies may have changed: `raid_devices.rs`).
    let (mut found, mut best) = look(scenario.members as usize)?;
    // During a reshape, the roles of both geometries.
    let of = |sb: &Superblock| sb.members.max(sb.reshape.map_or(0, |r| r.new_members));
    let n = of(&found[best].1) as usize;
    if n != scenario.members as usize {
        (found, best) = look(n)?;
    }
    let sbs: Vec<Superblock> = found.iter().map(|&(_, sb)| sb).collect();
    let freshest = sbs[best];
    let uuid = freshest.array_uuid;
    // The size, region size and member count the superblocks say (a resize may have changed
    // them).
    let mut scenario = scenario.clone();
    scenario.members = freshest.members;
    scenario.level = freshest.level;
    scenario.chunk_sectors = freshest.chunk_sectors;
    scenario.data_offset = freshest.data_offset;
    scenario.data_sectors = freshest.data_size;
    scenario.bitmap_region_sectors =
        (freshest.bitmap_region != 0).then_some(freshest.bitmap_region);
    let geometry = geometry_of(&scenario);
    let mut roles: Vec<Option<MemberState>> = (0..n).map(|_| None).collect();
    for (k, &(disk, sb)) in found.iter().enumerate() {
        let (role, state) = match member_status(&sbs, best, k) {
            Some(MemberStatus::Active { role }) => {
                (role, MemberState::new(sb.member_uuid, sb.this_slot))
            }
            Some(MemberStatus::Recovering {
                role,
                recovery_offset,
            }) => (
                role,
                MemberState::recovering(sb.member_uuid, sb.this_slot, recovery_offset),
            ),
            _ => continue,
        };
        assert_eq!(
            role as usize, disk,
            "seed {seed}: the sim keeps role r on disk r"
        );
        roles[disk] = Some(state);
    }
    let used: Vec<u32> = roles.iter().flatten().map(MemberState::slot).collect();
    let mut missing = MemberSet::EMPTY;
    let members: Vec<MemberState> = (0..n as u32)
        .zip(roles)
        .map(|(role, state)| {
            state.unwrap_or_else(|| {
                missing = missing.with(role);
                // A slot no present member holds: the superblocks mark it faulty.
                let slot = (role..)
                    .chain(0..)
                    .find(|s| !used.contains(s))
                    .unwrap_or(role);
                MemberState::missing([role as u8 + 1; 16], slot)
            })
        })
        .collect();
    if !geometry.has_all_data(missing) {
        return Err(StartError::TooManyMissing);
    }
    let trusted = freshest.resync_offset == RECOVERY_COMPLETE && (freshest.clean || freshest.ppl);
    // A member being rebuilt is as good as missing above its recovery offset: the module
    // refuses a crashed RAID 5/6 with one as it refuses one degraded (`check_rebuild_sources`,
    // md's "cannot start dirty degraded array"), since what parity implies there may be torn.
    let rebuilding = members.iter().any(MemberState::is_recovering);
    if (!missing.is_empty() || rebuilding) && geometry.level().has_parity() && !trusted && !force {
        return Err(StartError::ParityUntrusted);
    }
    // After a crash while writing, the copies may differ anywhere.
    let resync_from = if freshest.level == Level::Raid0 {
        None
    } else if !freshest.clean {
        Some(0)
    } else if freshest.resync_offset != RECOVERY_COMPLETE {
        Some(freshest.resync_offset)
    } else {
        None
    };
    let in_sync_roles = (0u32..)
        .zip(&members)
        .filter(|(_, m)| m.is_in_sync())
        .fold(MemberSet::EMPTY, |set, (r, _)| set.with(r));
    scenario.in_sync = resync_from.is_none();
    let (host, io_rx) = host_with(&scenario, seed, Some(disks), members, Some(&freshest));
    let engine = &host.engine;
    // A reshape goes on from where the superblocks say, before any request.
    let mut resumed = None;
    if let Some(recorded) = ReshapePlan::recorded(&freshest) {
        let (plan, position) = recorded.expect("the reshape the engine recorded");
        engine.resume_reshape(&plan, position);
        resumed = Some(position);
    }
    if let Some((regions, states)) = &host.bitmap {
        // Every in-sync member's bits, added up; a block never written reads as all set.
        for block in 0..regions.blocks() {
            for m in in_sync_roles.iter() {
                let data = host.disks[m as usize]
                    .bitmap_blocks
                    .lock()
                    .unwrap()
                    .get(&block)
                    .cloned();
                load_block(regions, states, block, data.as_deref(), resync_from);
            }
        }
    }
    if let Some(sector) = resync_from {
        engine.set_resync_start(sector);
    }
    let (mut replayed, mut grouped) = (0, 0);
    if let Some(area) = engine.log().area() {
        let mut entries = Vec::new();
        let mut block = [0; PPL_BLOCK_BYTES];
        // The key the superblock recorded: the one the entries of the last life carry.
        let id = LogId {
            uuid,
            key: freshest.log_key,
        };
        let scan = scan_log(
            &id,
            &area,
            in_sync_roles,
            &mut LogImage(&host),
            &mut block,
            Some(&mut |e| entries.push(e)),
        );
        assert_eq!(
            scan.refused, 0,
            "seed {seed}: the scan refused entries the engine wrote"
        );
        if freshest.log_replay_due() {
            let stats = engine
                .replay_log(&*host, &mut entries, in_sync_roles.minus(scan.unreadable))
                .expect("replay I/O");
            replayed = stats.rewritten_sectors;
        }
        grouped = scan.grouped;
        engine.start_log(&*host, scan.epoch);
    }
    // The bits whole again on every member, then the superblock that starts the array.
    engine.write_whole_bitmap(&*host, MemberSet::first(MAX_MEMBERS));
    engine
        .write_superblocks(&*host)
        .expect("a member took the start's superblock");
    engine.resume_rebuild(&*host);
    engine.start_resync(&*host);
    Ok(Started {
        host,
        io_rx,
        missing,
        clean: freshest.clean,
        resumed,
        replayed,
        grouped,
    })
}

/// Runs the worker until the resync, any rebuild and any reshape are over (or the rebuild
/// stalled).
pub fn settle(host: &Host, seed: u64) {
    let engine = &host.engine;
    let start = Instant::now();
    loop {
        let resyncing = !engine.in_sync() && engine.scrub_progress().mode.is_some();
        let rebuilding = engine.rebuild_target().is_some() && !engine.rebuild_stalled();
        // A reshape goes on degraded; it stands still only where data cannot be read.
        let reshaping = engine.reshape_progress().is_some_and(|r| !r.stalled);
        if !resyncing && !rebuilding && !reshaping {
            return;
        }
        assert!(
            start.elapsed() < HANG,
            "seed {seed}: the resync, rebuild or reshape never ended"
        );
        engine.work(host);
    }
}

/// The shape of a workload before a power cut.
#[derive(Clone, Copy, Debug)]
pub struct Workload {
    /// Requests (writes, flushes, idle spells) at most before the cut.
    pub ops: u64,
    /// Array sectors written, from 0.
    pub region: u64,
    /// The longest small write.
    pub max_len: u64,
}

/// What a power cut left, after the next start.
pub struct CutOutcome {
    pub started: Started,
    /// Sectors that read back wrong though no write touched them since the last completed
    /// flush.
    pub wrong: Vec<u64>,
    /// A check's mismatched sectors after the resync (`None`: the array was not optimal).
    pub mismatches: Option<u64>,
    /// Writes before the cut.
    pub writes: u64,
    /// Writes another write took in (`stripe_hold.rs`) before the cut.
    pub adopted: u64,
    /// Log writes that carried a group of entries before the cut.
    pub log_groups: u64,
}

/// One power cut (see the module comment). `prepare` runs on the fresh host before the
/// workload (a member lost and a device added, say); `force` as for [`reassemble`].
pub fn power_cut(
    scenario: &Scenario,
    seed: u64,
    load: Workload,
    force: bool,
    prepare: impl FnOnce(&Arc<Host>),
) -> Result<CutOutcome, StartError> {
    cut_with(scenario, seed, load, force, prepare, None)
}

/// [`power_cut`] with `during` run between two requests of the workload, before its request
/// `at` (no request in flight then: a grow, say). The power may go in the middle of it.
pub fn power_cut_during(
    scenario: &Scenario,
    seed: u64,
    load: Workload,
    at: u64,
    during: &dyn Fn(&Arc<Host>),
) -> Result<CutOutcome, StartError> {
    cut_with(scenario, seed, load, false, |_| {}, Some((at, during)))
}

/// What [`power_cut_during`] runs between two requests.
type During<'a> = &'a dyn Fn(&Arc<Host>);

fn cut_with(
    scenario: &Scenario,
    seed: u64,
    load: Workload,
    force: bool,
    prepare: impl FnOnce(&Arc<Host>),
    during: Option<(u64, During<'_>)>,
) -> Result<CutOutcome, StartError> {
    let mut scenario = scenario.clone();
    scenario.volatile_cache = true;
    let (host, _io) = crate::stress::new_host(&scenario, seed);
    let engine = &host.engine;
    engine.set_safe_mode_delay(1);
    engine.set_bitmap_clean_interval(1);
    // Created: every member holds a superblock.
    engine
        .write_superblocks(&*host)
        .expect("the creation's superblocks");
    let mut rng = StdRng::seed_from_u64(seed ^ 0xc0ffee);
    let region = engine.geometry().array_sectors().min(load.region);
    let stripe = engine.geometry().stripe_data_sectors().max(1);
    // The members start zeroed and durable: so does the model.
    let mut model = vec![0u64; region as usize];
    prepare(&host);
    flush(&host, seed);
    let mut unsettled = vec![false; region as usize];
    let before = host.writes.load(Ordering::SeqCst);
    host.cut_after.store(
        before + rng.random_range(1..load.ops.max(2) * 4),
        Ordering::SeqCst,
    );
    if rng.random_bool(0.5) {
        let at = host.metadata_writes.load(Ordering::SeqCst);
        host.cut_in_metadata
            .store(at + rng.random_range(0..16), Ordering::SeqCst);
    }
    let mut writes = 0;
    // Where the last stream of writes ended: the next often goes on from there.
    let mut stream_at = 0;
    for n in 0..load.ops {
        if let Some((_, during)) = during.filter(|&(at, _)| at == n) {
            during(&host);
            if host.power_cut() {
                break;
            }
        }
        match rng.random_range(0..16) {
            0 => {
                let status = submit_inline_data(&host, Op::Flush, 0, Vec::new());
                if host.power_cut() {
                    break;
                }
                assert_eq!(status, Some(Status::Ok), "seed {seed}: flush {n}");
                unsettled.fill(false);
            }
            1 => {
                // Idle: the worker marks the array clean, clears bits, resyncs, rebuilds.
                std::thread::sleep(Duration::from_millis(2));
                engine.work(&*host);
                engine.work(&*host);
                if host.power_cut() {
                    break;
                }
            }
            2 | 3 if geometry_has_stripes(&scenario) => {
                let mut batch = Vec::new();
                if rng.random_bool(0.3) {
                    // Small writes to different stripes, in flight at once: their log entries
                    // meet in a member's batch (a group, `log_batch.rs`).
                    let stripes = (region / stripe).max(1);
                    let mut taken = Vec::new();
                    for i in 0..rng.random_range(2..=6u64) {
                        let first = rng.random_range(0..stripes);
                        if taken.contains(&first) {
                            continue;
                        }
                        taken.push(first);
                        let end = ((first + 1) * stripe).min(region);
                        let at = rng.random_range(first * stripe..end);
                        let len = rng.random_range(1..=load.max_len).min(end - at);
                        let len = clip_to_run(&host, at, len);
                        batch.push((
                            at,
                            (0..len)
                                .map(|s| seed << 40 | n << 16 | i << 12 | s)
                                .collect(),
                        ));
                    }
                } else {
                    // A stream: writes that continue each other, in flight at once (a held
                    // stripe takes the later ones in, `stripe_hold.rs`).
                    let mut at = if rng.random_bool(0.5) {
                        stream_at
                    } else {
                        rng.random_range(0..region)
                    };
                    for i in 0..rng.random_range(2..=4u64) {
                        let len = rng.random_range(1..=load.max_len).min(region - at);
                        let len = clip_to_run(&host, at, len);
                        if len == 0 {
                            break;
                        }
                        batch.push((
                            at,
                            (0..len)
                                .map(|s| seed << 40 | n << 16 | i << 12 | s)
                                .collect(),
                        ));
                        at += len;
                    }
                    stream_at = if at >= region { 0 } else { at };
                }
                let statuses = submit_inline_batch(&host, &batch);
                for (start, data) in &batch {
                    let range = *start as usize..*start as usize + data.len();
                    unsettled[range].fill(true);
                }
                if host.power_cut() {
                    break;
                }
                for ((start, data), status) in batch.iter().zip(statuses) {
                    assert_eq!(status, Some(Status::Ok), "seed {seed}: stream write {n}");
                    let range = *start as usize..*start as usize + data.len();
                    model[range].copy_from_slice(data);
                    writes += 1;
                }
            }
            _ => {
                let (start, len) = if geometry_has_stripes(&scenario) && rng.random_range(0..4) == 0
                {
                    let first = rng.random_range(0..(region / stripe).max(1));
                    (first * stripe, stripe.min(region - first * stripe))
                } else {
                    let start = rng.random_range(0..region);
                    (
                        start,
                        rng.random_range(1..=load.max_len).min(region - start),
                    )
                };
                // Inside the queue limits (a reshape's unit, say).
                let len = clip_to_run(&host, start, len);
                let data: Vec<u64> = (0..len).map(|i| seed << 40 | n << 16 | i).collect();
                let status = submit_inline_data(&host, Op::Write, start, data.clone());
                let range = start as usize..(start + len) as usize;
                unsettled[range.clone()].fill(true);
                if host.power_cut() {
                    break;
                }
                assert_eq!(status, Some(Status::Ok), "seed {seed}: write {n}");
                model[range].copy_from_slice(&data);
                writes += 1;
            }
        }
    }
    let adopted = host.engine.hold_counts().adopted;
    let log_groups = host.stripe.log_groups.load(Ordering::Relaxed);
    // The power goes now if it has not yet.
    host.cut_after
        .store(host.writes.load(Ordering::SeqCst), Ordering::SeqCst);
    let violations = host.violations.0.lock().unwrap().clone();
    assert!(violations.is_empty(), "seed {seed}: {violations:#?}");
    let images = host
        .disks
        .iter()
        .map(|d| d.image_after_cut(&mut rng))
        .collect();
    let started = reassemble(&scenario, seed, images, force)?;
    let host = &started.host;
    settle(host, seed);
    let mut wrong = Vec::new();
    for start in (0..region).step_by(64) {
        let len = 64.min(region - start);
        let status = submit_inline_data(host, Op::Read, start, vec![0; len as usize]);
        assert_eq!(status, Some(Status::Ok), "seed {seed}: read at {start}");
        let got = host.slots[0].data.lock().unwrap().clone();
        for (i, &tag) in got.iter().enumerate() {
            let s = start as usize + i;
            if !unsettled[s] && tag != model[s] {
                wrong.push(s as u64);
            }
        }
    }
    let optimal = host.engine.state() == graid_engine::array::ArrayState::Optimal;
    let mismatches = (optimal && scenario.level != Level::Raid0)
        .then(|| scrub_now(host, ScrubMode::Check, seed).mismatches);
    let violations = host.violations.0.lock().unwrap().clone();
    assert!(violations.is_empty(), "seed {seed}: {violations:#?}");
    Ok(CutOutcome {
        started,
        wrong,
        mismatches,
        writes,
        adopted,
        log_groups,
    })
}

fn geometry_has_stripes(scenario: &Scenario) -> bool {
    scenario.level.has_parity()
}

/// An array flush, completed.
pub fn flush(host: &Host, seed: u64) {
    let status = submit_inline_data(host, Op::Flush, 0, Vec::new());
    assert_eq!(status, Some(Status::Ok), "seed {seed}: flush");
}
