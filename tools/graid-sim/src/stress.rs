//! Stress runs: submitter threads with random requests against one [`Host`], a model of what
//! the array must hold, and the checks every scenario shares.

use crate::host::{
    submit, Faults, Host, Kick, MemDisk, Mutation, QueuedIo, RequestSlot, Spec, StripeHome,
    StripeTask, Violations, DATA_OFFSET, GARBAGE, HANG,
};
use graid_engine::array::ArrayEngine;
use graid_engine::bitmap::{RegionState, Regions};
use graid_engine::geometry::{Geometry, Level, MAX_MEMBERS};
use graid_engine::members::{MemberState, NO_SLOT};
use graid_engine::platform::{Op, Status};
use graid_engine::ppl::DEFAULT_LOG_AREA;
use graid_engine::replace::{ReplaceStage, Replacement};
use graid_engine::reshape::ReshapePlan;
use graid_engine::scrub::{ScrubMode, ScrubProgress};
use graid_engine::superblock::{
    Area, ArrayName, HomeHost, Slot, Superblock, DEFAULT_BITMAP_AREA, MAX_SLOTS, RECOVERY_COMPLETE,
};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::mpsc::{channel, Receiver};
use std::sync::{Arc, Barrier, Mutex};
use std::thread;

/// The shape of one stress run.
#[derive(Clone, Debug)]
pub struct Scenario {
    pub level: Level,
    pub members: u32,
    pub chunk_sectors: u32,
    pub data_sectors: u64,
    /// Where each member's data area starts ([`DATA_OFFSET`]; a reshape moves it).
    pub data_offset: u64,
    pub faults: Vec<Faults>,
    pub submitters: usize,
    /// Requests each submitter has in flight at once.
    pub batch: usize,
    pub rounds: usize,
    pub inline_percent: u32,
    pub submit_error_ppm: u32,
    /// The copies start known identical (otherwise reads come from one fixed copy).
    pub in_sync: bool,
    /// Submitters send discards (RAID 5/6 refuse them).
    pub discards: bool,
    /// RAID 5/6: stripe buffers allowed at once (0: no limit), percent of parity jobs that
    /// complete later, and a deliberate bug.
    pub max_buffers: u32,
    pub async_parity_percent: u32,
    pub mutation: Option<Mutation>,
    /// Submitters of `run_overlapping` that write (the others read).
    pub overlap_writers: usize,
    /// This member is failed and its disk scribbled over before the run, and a device is
    /// added in its place while the submitters run: the run rebuilds it under load.
    pub rebuild: Option<u32>,
    /// With `rebuild`: the new device is a spare added before the member fails, and takes
    /// its place as the platform does when the engine asks ([`ArrayEngine::takeover`]).
    pub via_spare: bool,
    /// With `rebuild` and a bitmap: the member keeps what it held when it failed and comes
    /// back as a re-add ([`ArrayEngine::request_re_add`]), rebuilt only where the bitmap
    /// marks writes.
    pub re_add: bool,
    /// This member is replaced while the submitters run: a spare is added before, the
    /// replace asked for once they started, and the devices swapped as the platform does once
    /// the copy is complete (see [`finish_replace`]).
    pub replace: Option<u32>,
    /// The replacement's device (the disk past the members').
    pub replacement_faults: Faults,
    /// With `in_sync` false: the array resyncs while the submitters run, and the run waits
    /// for the resync to end.
    pub resync: bool,
    /// A check or repair started once the submitters run; the run waits for it to end.
    pub scrub: Option<ScrubMode>,
    /// (member, n): before the run, `n` sectors of this member's data area get values no
    /// other copy or parity agrees with (a crash's half-done writes, for the resync to fix).
    pub scribble: Option<(usize, u64)>,
    /// A write-intent bitmap with regions of this many sectors of the resync walk.
    pub bitmap_region_sectors: Option<u64>,
    /// RAID 5/6: a partial parity log in the default area (its heads written at the start).
    pub ppl: bool,
    /// Members with volatile write caches (see [`Host::volatile_cache`]).
    pub volatile_cache: bool,
    /// RAID 6: the platform cannot compute a parity update (read-modify-write), as a kernel
    /// without `raid6_can_xor_syndrome()`.
    pub no_raid6_update: bool,
    /// RAID 5/6: a parity helper takes the rebuild's and the scrub's jobs, right for the first
    /// this many, then wrong (`StripeHome::helper`).
    pub helper_lies_after: Option<u64>,
    /// RAID 5/6: a parity helper takes the requests' parity generations, `(right, every)`:
    /// right for its first `right`, then wrong, one in `every` checked
    /// (`StripeHome::request_helper`).
    pub request_helper: Option<(u64, u64)>,
    /// Each submitter's requests in flight are one sequential stream: each starts where the
    /// one before ended (held partial stripes take the next in, `stripe_hold.rs`); one write
    /// in eight asks for FUA.
    pub sequential: bool,
    /// A reshape started before the submitters (as the kernel's, with nothing in flight),
    /// a spare joining where the new geometry has one member more; the run waits for its end.
    pub reshape: Option<ReshapeTo>,
}

/// The geometry a reshape goes to, and where its data starts on each member.
#[derive(Clone, Copy, Debug)]
pub struct ReshapeTo {
    pub level: Level,
    pub members: u32,
    pub chunk_sectors: u32,
    pub data_offset: u64,
    /// The most a step moves ([`ArrayEngine::set_reshape_window`]; 0: the default).
    pub window: u64,
    /// Members whose drives die (every I/O fails) once the reshape moved a few windows,
    /// while the submitters run: it goes on degraded.
    pub kill: &'static [u32],
    /// Once the engine failed them, each killed member's place is taken by a new device
    /// (garbage first) while the reshape still runs: the reshape writes to it, and it is
    /// rebuilt in the new geometry after the end.
    pub replace_killed: bool,
}

impl Scenario {
    pub fn new(level: Level, members: u32, chunk_sectors: u32) -> Self {
        Self {
            level,
            members,
            chunk_sectors,
            data_sectors: 8192,
            data_offset: DATA_OFFSET,
            faults: vec![Faults::default(); members as usize],
            submitters: 4,
            batch: 4,
            rounds: rounds(),
            inline_percent: 20,
            submit_error_ppm: 0,
            in_sync: true,
            discards: !level.has_parity(),
            max_buffers: 0,
            async_parity_percent: 50,
            mutation: None,
            overlap_writers: 1,
            rebuild: None,
            via_spare: false,
            re_add: false,
            replace: None,
            replacement_faults: Faults::default(),
            resync: false,
            scrub: None,
            scribble: None,
            bitmap_region_sectors: None,
            ppl: false,
            volatile_cache: false,
            no_raid6_update: false,
            helper_lies_after: None,
            request_helper: None,
            sequential: false,
            reshape: None,
        }
    }

    pub fn with_fault(mut self, member: usize, faults: Faults) -> Self {
        self.faults[member] = faults;
        self
    }
}

pub fn rounds() -> usize {
    std::env::var("GRAID_ENGINE_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(150)
}

pub fn superblock(geometry: &Geometry, level: Level, chunk_sectors: u32) -> Superblock {
    let mut slots = [Slot::Empty; MAX_SLOTS];
    for (role, slot) in slots
        .iter_mut()
        .take(geometry.members() as usize)
        .enumerate()
    {
        *slot = Slot::Active { role: role as u8 };
    }
    Superblock {
        features_compat: 0,
        features_incompat: 0,
        array_uuid: [0xaa; 16],
        array_name: ArrayName::new("stress").unwrap(),
        homehost: HomeHost::EMPTY,
        created: 1_767_225_600,
        events: 7,
        clean: false,
        resync_offset: RECOVERY_COMPLETE,
        level,
        chunk_sectors,
        members: geometry.members(),
        member_uuid: [0; 16],
        this_slot: 0,
        data_offset: DATA_OFFSET,
        data_size: geometry.member_data_sectors(),
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

/// A host for `scenario`: its engine, members with their faults, one request slot per
/// submitter and batch entry; and the receiving end of its member I/O queue.
pub fn new_host(scenario: &Scenario, seed: u64) -> (Arc<Host>, Receiver<QueuedIo>) {
    let members = (0..scenario.members)
        .map(|m| MemberState::new([m as u8 + 1; 16], m))
        .collect();
    host_with(scenario, seed, None, members, None)
}

/// A log key for a start (the module draws random bytes; here they follow the seed).
pub fn log_key(seed: u64) -> [u8; 16] {
    let mut key = [0; 16];
    StdRng::seed_from_u64(seed ^ 0x10c_4e7).fill(&mut key[..]);
    key
}

/// The scenario's geometry.
pub fn geometry_of(scenario: &Scenario) -> Geometry {
    Geometry::new(
        scenario.level,
        scenario.members,
        scenario.chunk_sectors,
        scenario.data_sectors,
    )
    .expect("valid geometry")
}

/// A host for `scenario` on `disks` (fresh ones if `None`) with these member states, and the
/// superblock (events, state) the array starts from, if not the scenario's own.
pub fn host_with(
    scenario: &Scenario,
    seed: u64,
    disks: Option<Vec<MemDisk>>,
    members: Vec<MemberState>,
    from: Option<&Superblock>,
) -> (Arc<Host>, Receiver<QueuedIo>) {
    let fresh = disks.is_none();
    let geometry = geometry_of(scenario);
    let events = from.map_or(7, |sb| sb.events);
    let requests = scenario.submitters * scenario.batch;
    // Room for every role, as the module keeps (a mirror's copies may grow).
    let mut members = members;
    while members.len() < MAX_MEMBERS as usize {
        members.push(MemberState::missing([0; 16], NO_SLOT));
    }
    let engine = ArrayEngine::new(
        Superblock {
            events,
            bitmap: if scenario.bitmap_region_sectors.is_some() {
                DEFAULT_BITMAP_AREA
            } else {
                Area::NONE
            },
            bitmap_region: scenario.bitmap_region_sectors.unwrap_or(0),
            journal: if scenario.ppl {
                DEFAULT_LOG_AREA
            } else {
                Area::NONE
            },
            ppl: scenario.ppl,
            data_offset: scenario.data_offset,
            // A new key at every start, as the module draws one.
            log_key: log_key(seed ^ events),
            ..superblock(&geometry, scenario.level, scenario.chunk_sectors)
        },
        geometry,
        crate::host::store(members, requests),
        scenario.in_sync,
    )
    .expect("engine");
    let slots = (0..requests).map(|_| RequestSlot::default()).collect();
    let (io_tx, io_rx) = channel::<QueuedIo>();
    let mut disk_rng = StdRng::seed_from_u64(seed ^ 0xd15c);
    let host = Arc::new(Host {
        engine,
        // One disk past the members': a replacement's device (`ArrayEngine::replacement_index`).
        disks: disks.unwrap_or_else(|| {
            scenario
                .faults
                .iter()
                .chain([&scenario.replacement_faults])
                .map(|&f| MemDisk::new(geometry.member_data_sectors(), f, &mut disk_rng))
                .collect()
        }),
        slots,
        data_sectors: geometry.member_data_sectors(),
        queue: Mutex::new(Some(io_tx)),
        deferred: Mutex::new(Vec::new()),
        parked: Mutex::new(Vec::new()),
        kick: Kick::default(),
        inline_percent: AtomicU32::new(scenario.inline_percent),
        submit_error_ppm: scenario.submit_error_ppm,
        overlap_writers: scenario.overlap_writers,
        rng: Mutex::new(StdRng::seed_from_u64(seed ^ 0x5eed)),
        deferrals: AtomicU64::new(0),
        rebuild_copies: AtomicU64::new(0),
        rebuild_sleeps: AtomicU64::new(0),
        rebuild_buffer: Mutex::new(Vec::new()),
        spare_superblocks: Mutex::new(Vec::new()),
        takeovers_wanted: AtomicU32::new(0),
        heals: Mutex::new(Vec::new()),
        cut_after_heal_starts: AtomicU64::new(u64::MAX),
        events: Mutex::new(Vec::new()),
        violations: Violations::default(),
        stripe: StripeHome {
            max_buffers: scenario.max_buffers,
            async_parity_percent: scenario.async_parity_percent,
            mutation: scenario.mutation,
            no_raid6_update: scenario.no_raid6_update,
            helper: Mutex::new(scenario.helper_lies_after),
            request_helper: Mutex::new(scenario.request_helper),
            ..StripeHome::default()
        },
        bitmap: scenario.bitmap_region_sectors.map(|size| {
            let regions = Regions::new(geometry.resync_sectors(), size).expect("region size");
            // Spare states for a resize, as the module keeps (no area limits them here).
            let states = (0..regions.states_kept(u64::MAX))
                .map(|_| RegionState::new())
                .collect();
            (regions, states)
        }),
        resized_bitmap: Mutex::new(None),
        bitmap_writes: AtomicU64::new(0),
        cut_after: AtomicU64::new(u64::MAX),
        writes: AtomicU64::new(0),
        volatile_cache: scenario.volatile_cache,
        metadata_writes: AtomicU64::new(0),
        cut_in_metadata: AtomicU64::new(u64::MAX),
    });
    if fresh {
        // A new array's log: every head written.
        host.engine.start_log(&*host, 0);
    }
    (host, io_rx)
}

/// The platform's own threads: two completion threads that take member I/O in whatever order
/// the channel hands it out, and the array's worker.
pub struct Threads {
    completers: Vec<thread::JoinHandle<()>>,
    stripers: Vec<thread::JoinHandle<()>>,
    worker: thread::JoinHandle<()>,
    stop: Arc<AtomicBool>,
}

impl Threads {
    pub fn start(host: &Arc<Host>, io_rx: Receiver<QueuedIo>, seed: u64) -> Self {
        let io_rx = Arc::new(Mutex::new(io_rx));
        let completers = (0..2u64)
            .map(|i| {
                let (host, io_rx) = (host.clone(), io_rx.clone());
                thread::spawn(move || {
                    let mut rng = StdRng::seed_from_u64(seed.wrapping_add(i));
                    loop {
                        let next = io_rx.lock().unwrap().recv();
                        let Ok((rq, io)) = next else { break };
                        host.complete(rq, &io, &mut rng);
                    }
                })
            })
            .collect();
        // Two stripe threads stand for the kernel's work queue.
        let (stripe_tx, stripe_rx) = channel::<StripeTask>();
        *host.stripe.queue.lock().unwrap() = Some(stripe_tx);
        let stripe_rx = Arc::new(Mutex::new(stripe_rx));
        let stripers = (0..2)
            .map(|_| {
                let (host, stripe_rx) = (host.clone(), stripe_rx.clone());
                thread::spawn(move || loop {
                    let next = stripe_rx.lock().unwrap().recv();
                    if next.is_err() {
                        break;
                    }
                    if let Ok(task) = next {
                        task.run(&host);
                    }
                })
            })
            .collect();
        let stop = Arc::new(AtomicBool::new(false));
        let worker = {
            let (host, stop) = (host.clone(), stop.clone());
            thread::spawn(move || host.worker_loop(&stop))
        };
        Self {
            completers,
            stripers,
            worker,
            stop,
        }
    }

    /// Stops the threads once every request has ended.
    pub fn stop(self, host: &Host) {
        host.queue.lock().unwrap().take();
        for c in self.completers {
            c.join().expect("completion thread");
        }
        host.stripe.queue.lock().unwrap().take();
        for s in self.stripers {
            s.join().expect("stripe thread");
        }
        self.stop.store(true, Ordering::Release);
        host.kick.wake.notify_all();
        self.worker.join().expect("worker thread");
    }
}

/// What a run observed, for scenario-specific checks.
pub struct Report {
    pub host: Arc<Host>,
    /// Requests that ended with an error, by op.
    pub errors: Vec<(Op, Status)>,
    /// Sectors of the array whose contents are known, with the tag they must hold.
    pub model: Vec<Option<u64>>,
    pub ok_read_sectors: u64,
    pub ok_write_sectors: u64,
}

/// Runs a scenario under `seed` and checks everything that holds for every scenario: each
/// request ends exactly once, no member I/O strays outside a member's data area or its request,
/// and every successful read returns what the model says the array holds.
pub fn run(scenario: &Scenario, seed: u64) -> Report {
    let (host, io_rx) = new_host(scenario, seed);
    let geometry = host.engine.geometry();
    if let Some(target) = scenario.rebuild {
        if scenario.via_spare {
            add_spare(&host, seed);
        }
        if scenario.re_add {
            fail_member(&host, target, seed);
        } else {
            lose_member(&host, target, seed);
        }
    }
    let replacing = scenario.replace.map(|role| (role, add_spare(&host, seed)));
    if let Some((member, n)) = scenario.scribble {
        let mut rng = StdRng::seed_from_u64(seed ^ 0x5c1b);
        for _ in 0..n {
            let s = rng.random_range(0..host.data_sectors);
            // RAID 5/6: the parity of the stripe (the data has no other copy to differ from).
            let member = if geometry.level().has_parity() {
                let stripe = s / u64::from(geometry.chunk_sectors());
                geometry.stripe_map(stripe).expect("a stripe").p() as usize
            } else {
                member
            };
            host.disks[member].sectors.lock().unwrap()[(DATA_OFFSET + s) as usize] ^=
                0x5c1b_0000_0000;
        }
    }
    if let Some(to) = scenario.reshape {
        start_reshape(&host, to, seed);
    }
    let threads = Threads::start(&host, io_rx, seed);

    // Each submitter owns one stretch of the array, so the model stays exact.
    let array_sectors = geometry.array_sectors();
    let stretch = array_sectors / scenario.submitters as u64;
    let submitters: Vec<_> = (0..scenario.submitters)
        .map(|t| {
            let host = host.clone();
            let scenario = scenario.clone();
            thread::spawn(move || {
                let base = t as u64 * stretch;
                submitter(
                    &host,
                    &scenario,
                    seed.wrapping_mul(31).wrapping_add(t as u64),
                    t,
                    base,
                    stretch,
                )
            })
        })
        .collect();
    if let Some(to) = scenario.reshape.filter(|to| !to.kill.is_empty()) {
        kill_mid_reshape(&host, to, seed);
    }
    if let Some(target) = scenario.rebuild {
        // Some I/O first, so the rebuild starts under load.
        thread::sleep(std::time::Duration::from_millis(5));
        let (member, slot, uuid) = if scenario.via_spare {
            host.engine
                .takeover()
                .expect("a spare for the failed member")
        } else {
            let slot = host.engine.free_slot().expect("a free slot");
            (target, slot, NEW_DEVICE_UUID)
        };
        assert_eq!(member, target, "seed {seed}: the spare goes elsewhere");
        if scenario.re_add {
            host.engine.request_re_add(&*host, member, uuid, slot);
        } else {
            host.engine.request_add(&*host, member, uuid, slot);
        }
    }
    if let Some((role, slot)) = replacing {
        thread::sleep(std::time::Duration::from_millis(5));
        host.engine.request_replace(&*host, role, slot);
    }
    if scenario.resync {
        host.engine.start_resync(&*host);
    }
    if let Some(mode) = scenario.scrub {
        thread::sleep(std::time::Duration::from_millis(2));
        host.engine
            .start_scrub(&*host, mode)
            .unwrap_or_else(|e| panic!("seed {seed}: {mode:?} refused: {e:?}"));
    }
    let mut model = vec![None; array_sectors as usize];
    let mut errors = Vec::new();
    let (mut ok_read_sectors, mut ok_write_sectors) = (0, 0);
    for (t, s) in submitters.into_iter().enumerate() {
        let result = s
            .join()
            .unwrap_or_else(|_| panic!("seed {seed}: submitter {t} panicked"));
        let base = t as u64 * stretch;
        for (i, tag) in result.model.into_iter().enumerate() {
            model[base as usize + i] = tag;
        }
        errors.extend(result.errors);
        ok_read_sectors += result.ok_read_sectors;
        ok_write_sectors += result.ok_write_sectors;
    }
    if scenario.rebuild.is_some() {
        wait_rebuilt(&host, seed);
    }
    if replacing.is_some() {
        finish_replace(&host, seed);
        wait_rebuilt(&host, seed);
    }
    if scenario.resync {
        wait_resynced(&host, seed);
    }
    if scenario.scrub.is_some() {
        let start = std::time::Instant::now();
        while host.engine.scrub_progress().mode.is_some() {
            assert!(start.elapsed() < HANG, "seed {seed}: the scrub never ended");
            thread::sleep(std::time::Duration::from_millis(1));
        }
    }
    if scenario.reshape.is_some() {
        wait_reshaped(&host, seed);
    }
    if scenario.level.has_parity() || scenario.reshape.is_some() {
        // After a rebuild, through the rebuilt member too; after a reshape, in the new
        // geometry.
        read_back(&host, &model, seed);
    }
    threads.stop(&host);
    let violations = host.violations.0.lock().unwrap().clone();
    assert!(violations.is_empty(), "seed {seed}: {violations:#?}");
    Report {
        host,
        errors,
        model,
        ok_read_sectors,
        ok_write_sectors,
    }
}

/// The UUID of the device a rebuild run adds.
pub const NEW_DEVICE_UUID: [u8; 16] = [0x5e; 16];

/// Fails member `target` (recorded in the superblocks) and fills its disk with tags nobody
/// writes, so that a sector the rebuild misses shows. Before the platform's threads start.
pub fn lose_member(host: &Host, target: u32, seed: u64) {
    fail_member(host, target, seed);
    let mut disk = host.disks[target as usize].sectors.lock().unwrap();
    for (i, tag) in disk.iter_mut().enumerate() {
        *tag = GARBAGE ^ i as u64;
    }
}

/// Fails member `target`, recorded in the superblocks; its disk keeps what it holds (a
/// device that can come back). Before the platform's threads start.
pub fn fail_member(host: &Host, target: u32, seed: u64) {
    let engine = &host.engine;
    engine.request_fail(host, target);
    engine.work(host);
    assert_eq!(engine.fail_outcome(target), Ok(()), "seed {seed}");
}

/// Adds a spare device ([`NEW_DEVICE_UUID`]) to an optimal array: recorded, and no takeover
/// asked for. Before the platform's threads start. Returns its slot.
pub fn add_spare(host: &Host, seed: u64) -> u32 {
    let engine = &host.engine;
    let slot = engine.free_slot().expect("a free slot");
    engine.request_spare(host, NEW_DEVICE_UUID, slot);
    engine.work(host);
    assert_eq!(engine.spare_added(slot), Ok(()), "seed {seed}");
    assert_eq!(
        host.takeovers_wanted.load(Ordering::SeqCst),
        0,
        "seed {seed}"
    );
    let written = host.spare_superblocks.lock().unwrap();
    let (at, sb) = written.last().expect("the spare's superblock written");
    assert_eq!(
        (*at, sb.this_slot, sb.member_uuid),
        (slot, slot, NEW_DEVICE_UUID)
    );
    assert_eq!(sb.slots[slot as usize], Slot::Spare);
    slot
}

/// Waits for the replace asked for to end its copy (or fail, or be abandoned), then moves the
/// device as the platform does (the submitters are done: nothing is in flight, as under the
/// kernel's freeze) and lets the worker record it. After a swap the old device is scribbled
/// over: it left the array, and nothing may read it. Returns the stage the replace ended in.
pub fn finish_replace(host: &Host, seed: u64) -> ReplaceStage {
    let engine = &host.engine;
    let start = std::time::Instant::now();
    let r = loop {
        let r = engine.replacement().expect("a replace running");
        if r.stage != ReplaceStage::Copying {
            break r;
        }
        assert!(
            start.elapsed() < HANG,
            "seed {seed}: the replace never ended"
        );
        thread::sleep(std::time::Duration::from_millis(1));
    };
    move_replacement(host, r);
    engine.request_replace_end(host);
    while engine.replacement().is_some() {
        assert!(
            start.elapsed() < HANG,
            "seed {seed}: the replace's end was not recorded"
        );
        thread::sleep(std::time::Duration::from_millis(1));
    }
    r.stage
}

/// Moves the devices of a replace that ended in `r`'s stage as the platform does before it
/// posts the end: after a copy the replacement takes the role, and the old device is scribbled
/// over (it left the array, and nothing may read it).
pub fn move_replacement(host: &Host, r: Replacement) {
    if r.stage == ReplaceStage::Done {
        let index = host.engine.replacement_index() as usize;
        let (member, replacement) = (&host.disks[r.role as usize], &host.disks[index]);
        member.swap_contents(replacement);
        let mut old = replacement.sectors.lock().unwrap();
        for (i, tag) in old.iter_mut().enumerate() {
            *tag = GARBAGE ^ i as u64;
        }
    }
}

/// Runs a whole scrub in `mode` on the calling thread (the platform's threads stopped) and
/// returns where it ended.
pub fn scrub_now(host: &Host, mode: ScrubMode, seed: u64) -> ScrubProgress {
    let engine = &host.engine;
    engine
        .start_scrub(host, mode)
        .unwrap_or_else(|e| panic!("seed {seed}: scrub refused: {e:?}"));
    let start = std::time::Instant::now();
    while engine.scrub_progress().mode.is_some() {
        assert!(start.elapsed() < HANG, "seed {seed}: the scrub never ended");
        engine.work(host);
    }
    let progress = engine.scrub_progress();
    assert_eq!(
        progress.done, progress.total,
        "seed {seed}: the scrub stopped early"
    );
    progress
}

/// Waits until the array is in sync (the worker thread runs the resync).
pub fn wait_resynced(host: &Host, seed: u64) {
    let start = std::time::Instant::now();
    while !host.engine.in_sync() {
        assert!(
            start.elapsed() < HANG,
            "seed {seed}: the resync never ended"
        );
        thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// Starts a reshape to `to` as the platform does (nothing in flight): a spare joins where
/// the new geometry has a member more (its disk, the one past the members', holds garbage
/// first: the reshape writes all of it). Returns the plan.
pub fn start_reshape(host: &Host, to: ReshapeTo, seed: u64) -> ReshapePlan {
    let engine = &host.engine;
    let old = engine.geometry();
    let joining: Vec<u32> = if to.members > old.members() {
        assert_eq!(
            to.members,
            old.members() + 1,
            "seed {seed}: one disk joins at most"
        );
        let disk = &host.disks[old.members() as usize];
        for (i, tag) in disk.sectors.lock().unwrap().iter_mut().enumerate() {
            *tag = GARBAGE ^ i as u64;
        }
        vec![add_spare(host, seed)]
    } else {
        Vec::new()
    };
    let new = Geometry::new(
        to.level,
        to.members,
        to.chunk_sectors,
        old.member_data_sectors(),
    )
    .expect("the new geometry");
    engine.set_reshape_window(to.window);
    let plan = engine
        .reshape_allowed(new, to.data_offset)
        .unwrap_or_else(|e| panic!("seed {seed}: reshape refused: {e}"));
    engine
        .start_reshape(host, &plan, &joining)
        .unwrap_or_else(|e| panic!("seed {seed}: reshape not started: {e}"));
    plan
}

/// Kills `to.kill`'s drives once the reshape (run by the worker thread) moved a few windows,
/// and with `to.replace_killed` puts new devices in their places once the engine failed them.
fn kill_mid_reshape(host: &Host, to: ReshapeTo, seed: u64) {
    let engine = &host.engine;
    let start = std::time::Instant::now();
    while engine.reshape_counts().windows < 3 {
        assert!(
            start.elapsed() < HANG,
            "seed {seed}: the reshape never moved"
        );
        thread::sleep(std::time::Duration::from_micros(200));
    }
    assert!(engine.reshaping(), "seed {seed}: the reshape ended first");
    for &m in to.kill {
        host.disks[m as usize].dead.store(true, Ordering::SeqCst);
    }
    if !to.replace_killed {
        return;
    }
    for &m in to.kill {
        while engine.members()[m as usize].is_active() {
            assert!(
                start.elapsed() < HANG,
                "seed {seed}: member {m} never failed"
            );
            thread::sleep(std::time::Duration::from_micros(200));
        }
        assert!(engine.reshaping(), "seed {seed}: the reshape ended first");
        let disk = &host.disks[m as usize];
        for (i, tag) in disk.sectors.lock().unwrap().iter_mut().enumerate() {
            *tag = GARBAGE ^ i as u64;
        }
        disk.dead.store(false, Ordering::SeqCst);
        let slot = engine.free_slot().expect("a free slot");
        engine.request_add(host, m, NEW_DEVICE_UUID, slot);
        while engine.add_outcome(m, &NEW_DEVICE_UUID).is_err() {
            assert!(
                start.elapsed() < HANG,
                "seed {seed}: member {m}'s new device never added"
            );
            thread::sleep(std::time::Duration::from_micros(200));
        }
    }
}

/// Waits until the reshape ended (the worker thread runs it).
pub fn wait_reshaped(host: &Host, seed: u64) {
    let start = std::time::Instant::now();
    while host.engine.reshaping() {
        assert!(
            start.elapsed() < HANG,
            "seed {seed}: the reshape never ended ({:?})",
            host.engine.reshape_progress()
        );
        thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// Waits until no member is being rebuilt (the worker thread runs the rebuild).
pub fn wait_rebuilt(host: &Host, seed: u64) {
    let start = std::time::Instant::now();
    while host.engine.rebuild_target().is_some() && !host.engine.rebuild_stalled() {
        assert!(
            start.elapsed() < HANG,
            "seed {seed}: the rebuild never ended"
        );
        thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// Every array sector's copies on in-sync members hold the same tag, one the model allows
/// (every sector, written or not: a sector the rebuild missed holds scribble).
pub fn check_mirrors_match(report: &Report, seed: u64) {
    let engine = &report.host.engine;
    let geometry = engine.geometry();
    for sector in 0..geometry.array_sectors() {
        let mut seen: Option<(u32, u64)> = None;
        for piece in geometry.map_write(sector, 1).unwrap() {
            if !engine.members()[piece.member as usize].is_in_sync() {
                continue;
            }
            let tag = report.host.disks[piece.member as usize]
                .sectors
                .lock()
                .unwrap()[(DATA_OFFSET + piece.member_sector) as usize];
            if let Some(want) = report.model[sector as usize] {
                assert_eq!(
                    tag, want,
                    "seed {seed}: array sector {sector} on member {} differs from the model",
                    piece.member
                );
            }
            match seen {
                Some((other, t)) if t != tag => panic!(
                    "seed {seed}: array sector {sector}: member {other} holds {t:#x}, member {} \
                     {tag:#x}",
                    piece.member
                ),
                _ => seen = Some((piece.member, tag)),
            }
        }
    }
}

/// Waits until request `rq` ended (a hang fails the test) and returns how.
fn wait_end(host: &Host, rq: usize, seed: u64) -> Status {
    let slot = host.slot(rq);
    let outcome = slot.outcome.lock().unwrap();
    let (outcome, timeout) = slot
        .ended
        .wait_timeout_while(outcome, HANG, |o| o.is_none())
        .unwrap();
    assert!(
        !timeout.timed_out(),
        "seed {seed}: request {rq} never ended"
    );
    outcome.expect("ended")
}

/// Reads the whole array back through the engine, one run of stripes per request, and checks
/// every sector the model knows (the reads of a degraded array rebuild from parity). The
/// platform's threads run.
pub fn read_back(host: &Host, model: &[Option<u64>], seed: u64) {
    let slot = host.slot(0);
    check_read_back(host, model, seed, |start, sectors| {
        *slot.spec.lock().unwrap() = Spec {
            op: Some(Op::Read),
            start,
            sectors,
            segments: vec![(start, sectors)],
            fua: false,
        };
        *slot.data.lock().unwrap() = vec![u64::MAX; sectors as usize];
        *slot.outcome.lock().unwrap() = None;
        slot.ends.store(0, Ordering::Release);
        submit(host, 0);
        wait_end(host, 0, seed)
    });
}

/// [`read_back`] after a run, its platform's threads stopped: each read completes inline.
pub fn read_back_inline(host: &Host, model: &[Option<u64>], seed: u64) {
    check_read_back(host, model, seed, |start, sectors| {
        let status = submit_inline_data(host, Op::Read, start, vec![u64::MAX; sectors as usize]);
        status.unwrap_or_else(|| panic!("seed {seed}: the read at {start} never ended"))
    });
}

/// The walk of [`read_back`]: `read(start, sectors)` reads a run of stripes into slot 0's data
/// and says how it ended.
fn check_read_back(
    host: &Host,
    model: &[Option<u64>],
    seed: u64,
    mut read: impl FnMut(u64, u64) -> Status,
) {
    // The disk's size (what a reshape moves while it runs), and the queue limit (its units
    // then); RAID 1 has no boundary: any size will do.
    let end = host.engine.capacity_sectors();
    let step = match host.engine.io_boundary() {
        0 => 256,
        b => u64::from(b),
    };
    let mut start = 0;
    while start < end {
        let sectors = step.min(end - start);
        let status = read(start, sectors);
        if status == Status::Ok {
            let data = host.slot(0).data.lock().unwrap();
            for (i, &got) in data.iter().enumerate() {
                let sector = start + i as u64;
                // Past the model: a grow's new room.
                if let Some(want) = model.get(sector as usize).copied().flatten() {
                    assert_eq!(got, want, "seed {seed}: read-back of array sector {sector}");
                }
            }
        } else {
            assert!(
                matches!(
                    host.engine.state(),
                    graid_engine::array::ArrayState::Failed
                        | graid_engine::array::ArrayState::Broken
                ),
                "seed {seed}: read-back at {start} failed ({status:?}) on a working array"
            );
        }
        start += sectors;
    }
}

pub struct SubmitterResult {
    pub model: Vec<Option<u64>>,
    pub errors: Vec<(Op, Status)>,
    pub ok_read_sectors: u64,
    pub ok_write_sectors: u64,
}

/// Issues batches of non-overlapping random requests in `[base, base + stretch)`, waits for
/// them, and keeps the model of that stretch.
pub fn submitter(
    host: &Host,
    scenario: &Scenario,
    seed: u64,
    t: usize,
    base: u64,
    stretch: u64,
) -> SubmitterResult {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut model: Vec<Option<u64>> = vec![Some(0); stretch as usize];
    let mut result = SubmitterResult {
        model: Vec::new(),
        errors: Vec::new(),
        ok_read_sectors: 0,
        ok_write_sectors: 0,
    };
    let lane = stretch / scenario.batch as u64;
    // Three chunks, and on RAID 5/6 up to two stripes and a chunk, so requests also write
    // whole stripes and batch adjacent ones.
    let g = host.engine.geometry();
    let chunk = u64::from(scenario.chunk_sectors.max(8));
    let stripes = if g.level().has_parity() {
        2 * g.stripe_data_sectors() + chunk
    } else {
        0
    };
    let max_len = lane.min((3 * chunk).max(stripes));
    // The sequential stream's next start (lane offsets do not apply to it).
    let mut cursor = base;
    for _ in 0..scenario.rounds {
        let slots: Vec<usize> = (0..scenario.batch)
            .map(|b| t * scenario.batch + b)
            .collect();
        for (b, &rq) in slots.iter().enumerate() {
            let op = match rng.random_range(0..20) {
                0..8 => Op::Read,
                8..16 => Op::Write,
                16 => Op::Flush,
                _ if scenario.discards => Op::Discard,
                _ => Op::Write,
            };
            let mut sectors = rng.random_range(1..=max_len);
            let start = if scenario.sequential {
                if cursor + sectors > base + stretch {
                    cursor = base;
                }
                cursor
            } else {
                base + b as u64 * lane + rng.random_range(0..=lane - sectors)
            };
            sectors = clip_to_run(host, start, sectors);
            let op = if scenario.sequential && op != Op::Read {
                Op::Write
            } else {
                op
            };
            cursor = start + sectors;
            let mut segments = Vec::new();
            let mut at = start;
            while at < start + sectors {
                let len = rng.random_range(1..=start + sectors - at);
                segments.push((at, len));
                at += len;
            }
            let data = if op == Op::Write {
                (0..sectors).map(|_| rng.random::<u64>() | 1).collect()
            } else {
                vec![u64::MAX; sectors as usize]
            };
            let slot = host.slot(rq);
            *slot.spec.lock().unwrap() = Spec {
                op: Some(op),
                start,
                sectors: if op == Op::Flush { 0 } else { sectors },
                segments: if op == Op::Flush {
                    Vec::new()
                } else {
                    segments
                },
                fua: scenario.sequential && op == Op::Write && rng.random_range(0..8) == 0,
            };
            *slot.data.lock().unwrap() = data;
            *slot.outcome.lock().unwrap() = None;
            slot.ends.store(0, Ordering::Release);
            submit(host, rq);
        }
        for &rq in &slots {
            let slot = host.slot(rq);
            let status = wait_end(host, rq, seed);
            let spec = slot.spec.lock().unwrap().clone();
            let op = spec.op.expect("op");
            let at = (spec.start - base) as usize;
            let range = at..at + spec.sectors as usize;
            let data = slot.data.lock().unwrap();
            match (op, status) {
                (Op::Read, Status::Ok) => {
                    for (i, (&want, &got)) in model[range].iter().zip(data.iter()).enumerate() {
                        assert_ne!(
                            got,
                            GARBAGE,
                            "seed {seed}: read of array sector {} returned what a failed read \
                             left in the buffer",
                            spec.start + i as u64
                        );
                        if let Some(want) = want {
                            assert_eq!(
                                got,
                                want,
                                "seed {seed}: read of array sector {} returned stale or wrong data \
                                 (request {spec:?}; the value is the model's at lane offset {:?})",
                                spec.start + i as u64,
                                model.iter().position(|&m| m == Some(got)).map(|x| x as u64 + base),
                            );
                        }
                    }
                    result.ok_read_sectors += spec.sectors;
                }
                (Op::Write, Status::Ok) => {
                    for (m, &d) in model[range].iter_mut().zip(data.iter()) {
                        *m = Some(d);
                    }
                    result.ok_write_sectors += spec.sectors;
                }
                // Discarded data is undefined (a copy may have failed its discard).
                (Op::Discard, Status::Ok) => model[range].fill(None),
                (Op::Flush, Status::Ok) => {}
                (Op::Flush | Op::Read, _) => result.errors.push((op, status)),
                // A failed write or discard may have reached any part of its range.
                (Op::Write | Op::Discard, _) => {
                    model[range].fill(None);
                    result.errors.push((op, status));
                }
            }
        }
    }
    result.model = model;
    result
}

/// RAID 5/6 requests stay inside one run of stripes, and every request inside a reshape's
/// unit (the kernel's queue limits split them there).
pub fn clip_to_run(host: &Host, start: u64, sectors: u64) -> u64 {
    let engine = &host.engine;
    // And while a reshape runs, inside one unit of it (`ArrayEngine::io_boundary`).
    if !engine.geometry().level().has_parity() && !engine.reshaping() {
        return sectors;
    }
    let run = u64::from(engine.io_boundary()).max(1);
    sectors.min(run - start % run)
}

/// After a run: sends one request with every member I/O completing inline (and the worker
/// run inline) and returns how it ended.
pub fn submit_inline(host: &Host, op: Op, start: u64, sectors: u64) -> Option<Status> {
    submit_inline_segments(host, op, start, sectors, vec![(start, sectors)])
}

pub fn submit_inline_segments(
    host: &Host,
    op: Op,
    start: u64,
    sectors: u64,
    segments: Vec<(u64, u64)>,
) -> Option<Status> {
    submit_inline_with(
        host,
        op,
        (start, sectors),
        segments,
        vec![3; sectors.min(1 << 20) as usize],
    )
}

/// [`submit_inline`] with the request's data (one tag per sector: what a write writes, the
/// buffer a read fills, left in `host.slots[0].data`).
pub fn submit_inline_data(host: &Host, op: Op, start: u64, data: Vec<u64>) -> Option<Status> {
    let sectors = data.len() as u64;
    submit_inline_with(host, op, (start, sectors), vec![(start, sectors)], data)
}

/// The request `(start, sectors)` with these segments (which a test may make wrong) and data.
fn submit_inline_with(
    host: &Host,
    op: Op,
    (start, sectors): (u64, u64),
    segments: Vec<(u64, u64)>,
    data: Vec<u64>,
) -> Option<Status> {
    let spec = Spec {
        op: Some(op),
        start,
        sectors,
        segments,
        fua: false,
    };
    run_inline(host, vec![(spec, data)])[0]
}

/// Several writes at once, each `(start, data)`: writes that continue each other meet on a
/// stripe, where the first takes the others in (`stripe_hold.rs`). Returns how each ended.
pub fn submit_inline_batch(host: &Host, writes: &[(u64, Vec<u64>)]) -> Vec<Option<Status>> {
    let requests = writes
        .iter()
        .map(|(start, data)| {
            let sectors = data.len() as u64;
            let spec = Spec {
                op: Some(Op::Write),
                start: *start,
                sectors,
                segments: vec![(*start, sectors)],
                fua: false,
            };
            (spec, data.clone())
        })
        .collect();
    run_inline(host, requests)
}

/// Sends each request in its own slot (0, 1, ...), every member I/O completing inline, and
/// plays the (stopped) run's stripe threads and worker here until all ended, or at least
/// 10 000 rounds and 100 ms passed (a write held for a follower that never comes waits 2 ms).
/// Returns how each ended (`None`: it did not).
fn run_inline(host: &Host, requests: Vec<(Spec, Vec<u64>)>) -> Vec<Option<Status>> {
    host.inline_percent.store(100, Ordering::Relaxed);
    let (stripe_tx, stripe_rx) = channel::<StripeTask>();
    *host.stripe.queue.lock().unwrap() = Some(stripe_tx);
    let count = requests.len();
    for (rq, (spec, data)) in requests.into_iter().enumerate() {
        let slot = &host.slots[rq];
        *slot.spec.lock().unwrap() = spec;
        *slot.data.lock().unwrap() = data;
        *slot.outcome.lock().unwrap() = None;
        slot.ends.store(0, Ordering::Relaxed);
        submit(host, rq);
    }
    let outcomes = || -> Vec<Option<Status>> {
        (0..count)
            .map(|rq| *host.slots[rq].outcome.lock().unwrap())
            .collect()
    };
    let began = std::time::Instant::now();
    for round in 0.. {
        // A request that never ends is given up on only after many rounds and a while: a
        // write held for its followers waits for the clock (`HOLD_NS`), which a loaded host
        // (two emulated VMs beside the tests) may barely give this thread in 100 ms.
        if outcomes().iter().all(Option::is_some)
            || (round >= 10_000 && began.elapsed() > std::time::Duration::from_secs(2))
        {
            break;
        }
        while let Ok(task) = stripe_rx.try_recv() {
            task.run(host);
        }
        host.engine.work(host);
    }
    host.stripe.queue.lock().unwrap().take();
    outcomes()
}

/// Reads from every submitter but the first, writes from the first, all over the first
/// `region` sectors of the array, `scenario.rounds` requests each. No model of the contents (concurrent overlapping
/// writes have no single answer); what must hold: every read returns, for each sector, a value
/// some write put there (or the initial zero), and at the end every copy of every sector agrees
/// on working members. Returns the host.
pub fn run_overlapping(scenario: &Scenario, seed: u64, region: u64) -> Arc<Host> {
    /// Requests each submitter sends between two checks.
    const PHASE: usize = 8;
    let mut scenario = scenario.clone();
    scenario.batch = 1;
    let (host, io_rx) = new_host(&scenario, seed);
    let threads = Threads::start(&host, io_rx, seed);
    let written: Arc<Mutex<Vec<BTreeSet<u64>>>> =
        Arc::new(Mutex::new(vec![[0].into(); region as usize]));
    // Every PHASE requests the submitters meet; one checks the copies while nothing runs (a
    // copy left behind by a race shows there, before a later write hides it). A failure is
    // recorded and ends every submitter at the next meeting (a panic would strand the others).
    let barrier = Arc::new(Barrier::new(scenario.submitters));
    let failure: Arc<Mutex<Option<String>>> = Arc::new(Mutex::new(None));
    let submitters: Vec<_> = (0..scenario.submitters)
        .map(|t| {
            let (host, written) = (host.clone(), written.clone());
            let (barrier, failure) = (barrier.clone(), failure.clone());
            let rounds = scenario.rounds;
            thread::spawn(move || {
                let mut rng = StdRng::seed_from_u64(seed.wrapping_mul(131).wrapping_add(t as u64));
                let mut failed = false;
                for round in 0..rounds {
                    if !failed {
                        if let Err(e) = overlapping_request(&host, &written, &mut rng, t, region) {
                            failure.lock().unwrap().get_or_insert(e);
                            failed = true;
                        }
                    }
                    if round % PHASE == PHASE - 1 || round == rounds - 1 {
                        if barrier.wait().is_leader() {
                            if let Err(e) =
                                check_copies_agree(&host, &written.lock().unwrap(), region)
                            {
                                failure.lock().unwrap().get_or_insert(e);
                            }
                        }
                        barrier.wait();
                        if failure.lock().unwrap().is_some() {
                            return;
                        }
                    }
                }
            })
        })
        .collect();
    for (t, s) in submitters.into_iter().enumerate() {
        s.join()
            .unwrap_or_else(|_| panic!("seed {seed}: submitter {t} panicked"));
    }
    if let Some(e) = failure.lock().unwrap().take() {
        panic!("seed {seed}: {e}");
    }
    threads.stop(&host);
    let violations = host.violations.0.lock().unwrap().clone();
    assert!(violations.is_empty(), "seed {seed}: {violations:#?}");
    if let Err(e) = check_copies_agree(&host, &written.lock().unwrap(), region) {
        panic!("seed {seed}: {e}");
    }
    host
}

/// One random read or write over the first `region` sectors, from slot `t`, checked.
fn overlapping_request(
    host: &Host,
    written: &Mutex<Vec<BTreeSet<u64>>>,
    rng: &mut StdRng,
    t: usize,
    region: u64,
) -> Result<(), String> {
    // One writer: concurrent overlapping writes may leave mirrors different on their own (as
    // in md); what is checked here is reads and their repairs racing a write.
    let op = if t < host.overlap_writers {
        Op::Write
    } else {
        Op::Read
    };
    let sectors = rng.random_range(1..=region.min(16));
    let start = rng.random_range(0..=region - sectors);
    let sectors = clip_to_run(host, start, sectors);
    let data: Vec<u64> = if op == Op::Write {
        (0..sectors).map(|_| rng.random::<u64>() | 1).collect()
    } else {
        vec![u64::MAX; sectors as usize]
    };
    if op == Op::Write {
        let mut w = written.lock().unwrap();
        for (i, &tag) in data.iter().enumerate() {
            w[start as usize + i].insert(tag);
        }
    }
    let slot = host.slot(t);
    *slot.spec.lock().unwrap() = Spec {
        op: Some(op),
        start,
        sectors,
        segments: vec![(start, sectors)],
        fua: false,
    };
    *slot.data.lock().unwrap() = data;
    *slot.outcome.lock().unwrap() = None;
    slot.ends.store(0, Ordering::Release);
    submit(host, t);
    let outcome = slot.outcome.lock().unwrap();
    let (outcome, timeout) = slot
        .ended
        .wait_timeout_while(outcome, HANG, |o| o.is_none())
        .unwrap();
    if timeout.timed_out() {
        return Err(format!("request {t} never ended"));
    }
    if *outcome != Some(Status::Ok) {
        return Err(format!("{op:?} {start}+{sectors} ended {:?}", *outcome));
    }
    drop(outcome);
    if op == Op::Read {
        let data = slot.data.lock().unwrap();
        let w = written.lock().unwrap();
        for (i, tag) in data.iter().enumerate() {
            let sector = start as usize + i;
            if !w[sector].contains(tag) {
                return Err(format!(
                    "read of sector {sector} returned {tag:#x}, never written there"
                ));
            }
        }
    }
    Ok(())
}

/// Every copy of each of the first `region` array sectors on a working member holds the same
/// value, one that some write put there.
fn check_copies_agree(host: &Host, written: &[BTreeSet<u64>], region: u64) -> Result<(), String> {
    let engine = &host.engine;
    let geometry = engine.geometry();
    for sector in 0..region {
        let mut seen = None;
        for piece in geometry.map_write(sector, 1).unwrap() {
            if engine.members()[piece.member as usize].is_faulty() {
                continue;
            }
            let tag = host.disks[piece.member as usize].sectors.lock().unwrap()
                [(DATA_OFFSET + piece.member_sector) as usize];
            if !written[sector as usize].contains(&tag) {
                return Err(format!(
                    "member {} holds {tag:#x} at array sector {sector}, never written there",
                    piece.member
                ));
            }
            match seen {
                None => seen = Some(tag),
                Some(other) if other != tag => {
                    return Err(format!("the copies of array sector {sector} differ"));
                }
                Some(_) => {}
            }
        }
    }
    Ok(())
}

/// Every copy of every known array sector on a working member holds the model's tag.
pub fn check_copies(report: &Report, seed: u64) {
    let engine = &report.host.engine;
    let geometry = engine.geometry();
    for (sector, tag) in report.model.iter().enumerate() {
        let Some(tag) = *tag else { continue };
        for copy in 0..geometry.copies() {
            let piece = geometry
                .map_read(sector as u64, 1, copy)
                .unwrap()
                .next()
                .unwrap();
            if engine.members()[piece.member as usize].is_faulty() {
                continue;
            }
            let disk = report.host.disks[piece.member as usize]
                .sectors
                .lock()
                .unwrap();
            assert_eq!(
                disk[(DATA_OFFSET + piece.member_sector) as usize],
                tag,
                "seed {seed}: copy {copy} of array sector {sector} on member {} differs",
                piece.member
            );
        }
    }
}

/// The superblocks written during the run: events rising, each with its own slot and UUID,
/// failed members recorded as faulty in every working member's newest one, none telling a
/// member that it is faulty itself.
pub fn check_superblocks(report: &Report, seed: u64) {
    let engine = &report.host.engine;
    for (index, (disk, member)) in report.host.disks.iter().zip(engine.members()).enumerate() {
        let written = disk.superblocks.lock().unwrap();
        let mut last = 7;
        for sb in written.iter() {
            assert!(
                sb.events > last,
                "seed {seed}: member {index} events went {last} -> {}",
                sb.events
            );
            last = sb.events;
            assert_eq!(sb.this_slot as usize, index);
            assert_eq!(sb.member_uuid, member.uuid());
            assert!(sb.validate().is_ok(), "seed {seed}: {:?}", sb.validate());
            assert_ne!(
                sb.slots[index],
                Slot::Faulty,
                "seed {seed}: member {index} told it is faulty"
            );
        }
        if !member.is_faulty() {
            let newest = written.last();
            for (other, m) in engine.members().iter().enumerate() {
                if m.is_faulty() {
                    let sb = newest.unwrap_or_else(|| {
                        panic!("seed {seed}: member {index} never heard of the failure")
                    });
                    assert_eq!(
                        sb.slots[other],
                        Slot::Faulty,
                        "seed {seed}: member {other} not recorded as faulty"
                    );
                }
            }
        }
    }
}

/// The seed `GRAID_ENGINE_SEED` fixes, to replay one failed run.
pub fn fixed_seed() -> Option<u64> {
    std::env::var("GRAID_ENGINE_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
}

pub fn seeds(count: u64) -> impl Iterator<Item = u64> {
    let fixed = fixed_seed();
    let base = fixed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1)
    });
    let count = if fixed.is_some() { 1 } else { count };
    (0..count).map(move |i| base.wrapping_add(i.wrapping_mul(0x9e37_79b9_7f4a_7c15)))
}

pub fn total_member_bytes(report: &Report) -> (u64, u64) {
    report
        .host
        .engine
        .members()
        .iter()
        .fold((0, 0), |(r, w), m| {
            let s = m.stats();
            (r + s.read_bytes, w + s.write_bytes)
        })
}
