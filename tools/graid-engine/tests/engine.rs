//! The array engine in its host home: in-memory members, threads for submitters, completions
//! and requeues, random I/O and random member faults, every result checked against a model.
//!
//! This is the ztest idea from the design: the code under test is the module's own
//! `raid_gpu/engine/array.rs`; only the platform around it differs. A failing run prints its
//! seed; `GRAID_ENGINE_SEED=<seed>` replays it, `GRAID_ENGINE_ROUNDS=<n>` runs longer.

use graid_engine::array::{ArrayEngine, ArrayState};
use graid_engine::geometry::{Geometry, Level};
use graid_engine::members::MemberState;
use graid_engine::platform::{MemberIo, MetadataError, Op, Platform, Status, SubmitError};
use graid_engine::request::RequestState;
use graid_engine::superblock::{Area, ArrayName, Slot, Superblock, MAX_SLOTS, RECOVERY_COMPLETE};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::Duration;

/// Where member data starts, as on real members (the superblock area lies before it).
const DATA_OFFSET: u64 = 4096;
/// A request that has not ended after this long is reported as hung.
const HANG: Duration = Duration::from_secs(20);

/// What a member does wrong.
#[derive(Clone, Copy, Debug, Default)]
struct Faults {
    /// Every I/O fails once this many I/Os have been done (a drive that dies).
    die_after: Option<u64>,
    /// Each I/O fails with this chance, in parts per million (bad blocks, a flaky link).
    error_ppm: u32,
    /// Discards are refused with "not supported".
    no_discard: bool,
}

/// An in-memory member: one `u64` tag per sector stands for the sector's contents.
struct MemDisk {
    sectors: Mutex<Vec<u64>>,
    faults: Faults,
    ios: AtomicU64,
    dead: AtomicBool,
    flushes: AtomicU64,
    /// Flushes sent, including the ones that failed.
    flush_attempts: AtomicU64,
    superblocks: Mutex<Vec<Superblock>>,
}

impl MemDisk {
    fn new(data_sectors: u64, faults: Faults) -> Self {
        Self {
            sectors: Mutex::new(vec![0; (DATA_OFFSET + data_sectors) as usize]),
            faults,
            ios: AtomicU64::new(0),
            dead: AtomicBool::new(false),
            flushes: AtomicU64::new(0),
            flush_attempts: AtomicU64::new(0),
            superblocks: Mutex::new(Vec::new()),
        }
    }

    /// Decides whether the next I/O fails.
    fn next_io_fails(&self, rng: &mut StdRng) -> bool {
        let done = self.ios.fetch_add(1, Ordering::Relaxed);
        if self.faults.die_after.is_some_and(|n| done >= n) {
            self.dead.store(true, Ordering::Relaxed);
        }
        self.dead.load(Ordering::Relaxed)
            || (self.faults.error_ppm > 0 && rng.random_range(0..1_000_000) < self.faults.error_ppm)
    }
}

/// A member I/O waiting for a completion thread: the request slot and the I/O.
type QueuedIo = (usize, MemberIo<usize>);

/// A request as the submitter made it.
#[derive(Clone, Debug, Default)]
struct Spec {
    op: Option<Op>,
    start: u64,
    sectors: u64,
    /// `(first array sector, sectors)` of each segment, contiguous, covering the request.
    segments: Vec<(u64, u64)>,
}

/// One request slot: the engine's state plus the request's data buffer (a tag per sector).
#[derive(Default)]
struct RequestSlot {
    state: RequestState,
    spec: Mutex<Spec>,
    data: Mutex<Vec<u64>>,
    outcome: Mutex<Option<Status>>,
    ended: Condvar,
    ends: AtomicU32,
}

/// What the platform saw going wrong (checked after every round).
#[derive(Default)]
struct Violations(Mutex<Vec<String>>);

impl Violations {
    fn report(&self, what: String) {
        self.0.lock().unwrap().push(what);
    }
}

/// The host home of one engine.
struct Host {
    engine: ArrayEngine<Vec<MemberState>>,
    disks: Vec<MemDisk>,
    slots: Vec<RequestSlot>,
    data_sectors: u64,
    /// Member I/O waiting for a completion thread.
    queue: Mutex<Option<Sender<QueuedIo>>>,
    requeues: Mutex<Option<Sender<usize>>>,
    /// Chance in percent that a member I/O completes inside `submit` (before it returns).
    inline_percent: AtomicU32,
    /// Chance in parts per million that `submit` refuses a member I/O.
    submit_error_ppm: u32,
    rng: Mutex<StdRng>,
    requeued: AtomicU64,
    failed_members: Mutex<Vec<u32>>,
    violations: Violations,
}

impl Host {
    fn slot(&self, rq: usize) -> &RequestSlot {
        &self.slots[rq]
    }

    /// Does one member I/O against the in-memory member and reports its completion.
    fn complete(&self, rq: usize, io: &MemberIo<usize>, rng: &mut StdRng) {
        let member = io.info.member as usize;
        let disk = &self.disks[member];
        let status = self.execute(rq, io, disk, rng);
        let slot = self.slot(rq);
        self.engine
            .piece_done(self, rq, &slot.state, io.info, status);
    }

    fn execute(&self, rq: usize, io: &MemberIo<usize>, disk: &MemDisk, rng: &mut StdRng) -> Status {
        let op = io.info.op;
        if op == Op::Discard && disk.faults.no_discard {
            return Status::NotSupported;
        }
        if op == Op::Flush {
            disk.flush_attempts.fetch_add(1, Ordering::Relaxed);
            if disk.next_io_fails(rng) {
                return Status::IoError;
            }
            disk.flushes.fetch_add(1, Ordering::Relaxed);
            return Status::Ok;
        }
        let first = io.member_sector;
        let len = io.info.sectors;
        if first < DATA_OFFSET || first + len > DATA_OFFSET + self.data_sectors || len == 0 {
            self.violations
                .report(format!("member I/O outside the data area: {io:?}"));
            return Status::IoError;
        }
        let Some((segment, skip)) = io.source else {
            self.violations
                .report(format!("data I/O without a source: {io:?}"));
            return Status::IoError;
        };
        let spec = self.slot(rq).spec.lock().unwrap().clone();
        let Some(&(seg_start, seg_len)) = spec.segments.get(segment) else {
            self.violations
                .report(format!("no segment {segment}: {io:?}"));
            return Status::IoError;
        };
        if skip + len > seg_len {
            self.violations.report(format!(
                "I/O beyond its segment {seg_start}+{seg_len}: {io:?}"
            ));
            return Status::IoError;
        }
        let buffer_at = (seg_start + skip - spec.start) as usize;
        let fails = disk.next_io_fails(rng);
        // A failing write may still have written a part.
        let done = if fails && op != Op::Read {
            rng.random_range(0..=len)
        } else if fails {
            0
        } else {
            len
        };
        let mut sectors = disk.sectors.lock().unwrap();
        let mut data = self.slot(rq).data.lock().unwrap();
        let member_range = first as usize..(first + done) as usize;
        let buffer_range = buffer_at..buffer_at + done as usize;
        match op {
            Op::Read => data[buffer_range].copy_from_slice(&sectors[member_range]),
            Op::Write => sectors[member_range].copy_from_slice(&data[buffer_range]),
            Op::Discard => sectors[member_range].fill(0),
            Op::Flush => {}
        }
        if fails {
            Status::IoError
        } else {
            Status::Ok
        }
    }
}

impl Platform for Host {
    type Request = usize;
    type Segment = usize;

    fn segments(&self, rq: usize) -> impl Iterator<Item = (usize, u64, u64)> {
        let spec = self.slot(rq).spec.lock().unwrap();
        let list: Vec<_> = spec
            .segments
            .iter()
            .enumerate()
            .map(|(i, &(start, len))| (i, start, len))
            .collect();
        list.into_iter()
    }

    fn submit(&self, rq: usize, io: &MemberIo<usize>) -> Result<(), SubmitError> {
        let (inline, refuse) = {
            let mut rng = self.rng.lock().unwrap();
            (
                rng.random_range(0..100) < self.inline_percent.load(Ordering::Relaxed),
                rng.random_range(0..1_000_000) < self.submit_error_ppm,
            )
        };
        if refuse {
            return Err(SubmitError);
        }
        if inline {
            let mut rng = StdRng::seed_from_u64(self.rng.lock().unwrap().random());
            self.complete(rq, io, &mut rng);
        } else if let Some(queue) = self.queue.lock().unwrap().as_ref() {
            queue
                .send((rq, *io))
                .expect("completion threads are running");
        }
        Ok(())
    }

    fn end_request(&self, rq: usize, status: Status) {
        let slot = self.slot(rq);
        if slot.ends.fetch_add(1, Ordering::AcqRel) != 0 {
            self.violations.report(format!("request {rq} ended twice"));
        }
        if slot.state.pending() != 0 {
            self.violations
                .report(format!("request {rq} ended with member I/O in flight"));
        }
        *slot.outcome.lock().unwrap() = Some(status);
        slot.ended.notify_all();
    }

    fn requeue(&self, rq: usize) {
        self.requeued.fetch_add(1, Ordering::Relaxed);
        if let Some(requeues) = self.requeues.lock().unwrap().as_ref() {
            requeues.send(rq).expect("the requeue thread is running");
        }
    }

    fn write_superblock(&self, member: u32, sb: &Superblock) -> Result<(), MetadataError> {
        let disk = &self.disks[member as usize];
        if disk.dead.load(Ordering::Relaxed) {
            return Err(MetadataError);
        }
        disk.superblocks.lock().unwrap().push(*sb);
        Ok(())
    }

    fn member_failed(&self, member: u32, status: Status) {
        if status != Status::IoError {
            self.violations
                .report(format!("member {member} failed with {status:?}"));
        }
        self.failed_members.lock().unwrap().push(member);
    }
}

/// Submits (or resubmits) a slot's request to the engine.
fn submit(host: &Host, rq: usize) {
    let spec = host.slot(rq).spec.lock().unwrap().clone();
    let op = spec.op.expect("a request has an op");
    host.engine
        .submit(host, rq, &host.slot(rq).state, op, spec.start, spec.sectors);
}

/// The shape of one stress run.
#[derive(Clone, Debug)]
struct Scenario {
    level: Level,
    members: u32,
    chunk_sectors: u32,
    data_sectors: u64,
    faults: Vec<Faults>,
    submitters: usize,
    /// Requests each submitter has in flight at once.
    batch: usize,
    rounds: usize,
    inline_percent: u32,
    submit_error_ppm: u32,
}

impl Scenario {
    fn new(level: Level, members: u32, chunk_sectors: u32) -> Self {
        Self {
            level,
            members,
            chunk_sectors,
            data_sectors: 8192,
            faults: vec![Faults::default(); members as usize],
            submitters: 4,
            batch: 4,
            rounds: rounds(),
            inline_percent: 20,
            submit_error_ppm: 0,
        }
    }

    fn with_fault(mut self, member: usize, faults: Faults) -> Self {
        self.faults[member] = faults;
        self
    }
}

fn rounds() -> usize {
    std::env::var("GRAID_ENGINE_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(150)
}

fn superblock(geometry: &Geometry, level: Level, chunk_sectors: u32) -> Superblock {
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
        created: 1_767_225_600,
        events: 7,
        clean: false,
        level,
        chunk_sectors,
        members: geometry.members(),
        member_uuid: [0; 16],
        this_slot: 0,
        data_offset: DATA_OFFSET,
        data_size: geometry.member_data_sectors(),
        recovery_offset: RECOVERY_COMPLETE,
        bitmap: Area::NONE,
        journal: Area::NONE,
        slots,
    }
}

/// What a run observed, for scenario-specific checks.
struct Report {
    host: Arc<Host>,
    /// Requests that ended with an error, by op.
    errors: Vec<(Op, Status)>,
    /// Sectors of the array whose contents are known, with the tag they must hold.
    model: Vec<Option<u64>>,
    ok_read_sectors: u64,
    ok_write_sectors: u64,
}

/// Runs a scenario under `seed` and checks everything that holds for every scenario: each
/// request ends exactly once, no member I/O strays outside a member's data area or its request,
/// and every successful read returns what the model says the array holds.
fn run(scenario: &Scenario, seed: u64) -> Report {
    let geometry = Geometry::new(
        scenario.level,
        scenario.members,
        scenario.chunk_sectors,
        scenario.data_sectors,
    )
    .expect("valid geometry");
    let members = (0..scenario.members)
        .map(|m| MemberState::new([m as u8 + 1; 16]))
        .collect();
    let engine = ArrayEngine::new(
        superblock(&geometry, scenario.level, scenario.chunk_sectors),
        geometry,
        members,
    )
    .expect("engine");
    let slots = (0..scenario.submitters * scenario.batch)
        .map(|_| RequestSlot::default())
        .collect();
    let (io_tx, io_rx) = channel::<QueuedIo>();
    let (rq_tx, rq_rx) = channel::<usize>();
    let host = Arc::new(Host {
        engine,
        disks: scenario
            .faults
            .iter()
            .map(|&f| MemDisk::new(geometry.member_data_sectors(), f))
            .collect(),
        slots,
        data_sectors: geometry.member_data_sectors(),
        queue: Mutex::new(Some(io_tx)),
        requeues: Mutex::new(Some(rq_tx)),
        inline_percent: AtomicU32::new(scenario.inline_percent),
        submit_error_ppm: scenario.submit_error_ppm,
        rng: Mutex::new(StdRng::seed_from_u64(seed ^ 0x5eed)),
        requeued: AtomicU64::new(0),
        failed_members: Mutex::new(Vec::new()),
        violations: Violations::default(),
    });

    // Completion threads take member I/O in whatever order the channel hands it out.
    let io_rx = Arc::new(Mutex::new(io_rx));
    let completers: Vec<_> = (0..2u64)
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
    // The requeue thread plays blk-mq's requeue work.
    let requeuer = {
        let host = host.clone();
        thread::spawn(move || {
            let rq_rx: Receiver<usize> = rq_rx;
            while let Ok(rq) = rq_rx.recv() {
                submit(&host, rq);
            }
        })
    };

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
    host.queue.lock().unwrap().take();
    host.requeues.lock().unwrap().take();
    for c in completers {
        c.join().expect("completion thread");
    }
    requeuer.join().expect("requeue thread");
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

struct SubmitterResult {
    model: Vec<Option<u64>>,
    errors: Vec<(Op, Status)>,
    ok_read_sectors: u64,
    ok_write_sectors: u64,
}

/// Issues batches of non-overlapping random requests in `[base, base + stretch)`, waits for
/// them, and keeps the model of that stretch.
fn submitter(
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
    let max_len = (lane).min(u64::from(scenario.chunk_sectors.max(8)) * 3);
    for _ in 0..scenario.rounds {
        let slots: Vec<usize> = (0..scenario.batch)
            .map(|b| t * scenario.batch + b)
            .collect();
        for (b, &rq) in slots.iter().enumerate() {
            let op = match rng.random_range(0..20) {
                0..8 => Op::Read,
                8..16 => Op::Write,
                16 => Op::Flush,
                _ => Op::Discard,
            };
            let sectors = rng.random_range(1..=max_len);
            let start = base + b as u64 * lane + rng.random_range(0..=lane - sectors);
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
            };
            *slot.data.lock().unwrap() = data;
            *slot.outcome.lock().unwrap() = None;
            slot.ends.store(0, Ordering::Release);
            submit(host, rq);
        }
        for &rq in &slots {
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
            let status = outcome.expect("ended");
            drop(outcome);
            let spec = slot.spec.lock().unwrap().clone();
            let op = spec.op.expect("op");
            let at = (spec.start - base) as usize;
            let range = at..at + spec.sectors as usize;
            let data = slot.data.lock().unwrap();
            match (op, status) {
                (Op::Read, Status::Ok) => {
                    for (i, (&want, &got)) in model[range].iter().zip(data.iter()).enumerate() {
                        if let Some(want) = want {
                            assert_eq!(
                                got,
                                want,
                                "seed {seed}: read of array sector {} returned stale or wrong data",
                                spec.start + i as u64
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
                (Op::Discard, Status::Ok) => model[range].fill(Some(0)),
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

/// After a run: sends one request with every member I/O completing inline and returns how it
/// ended.
fn submit_inline(host: &Host, op: Op, start: u64, sectors: u64) -> Option<Status> {
    submit_inline_segments(host, op, start, sectors, vec![(start, sectors)])
}

fn submit_inline_segments(
    host: &Host,
    op: Op,
    start: u64,
    sectors: u64,
    segments: Vec<(u64, u64)>,
) -> Option<Status> {
    host.inline_percent.store(100, Ordering::Relaxed);
    let slot = &host.slots[0];
    *slot.spec.lock().unwrap() = Spec {
        op: Some(op),
        start,
        sectors,
        segments,
    };
    *slot.data.lock().unwrap() = vec![3; sectors.min(1 << 20) as usize];
    *slot.outcome.lock().unwrap() = None;
    slot.ends.store(0, Ordering::Relaxed);
    submit(host, 0);
    let outcome = *slot.outcome.lock().unwrap();
    outcome
}

/// Every copy of every known array sector on a working member holds the model's tag.
fn check_copies(report: &Report, seed: u64) {
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
/// failed members recorded as faulty, none written to a member after it failed.
fn check_superblocks(report: &Report, seed: u64) {
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
            assert_eq!(&sb.member_uuid, member.uuid());
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

fn seeds(count: u64) -> impl Iterator<Item = u64> {
    let fixed = std::env::var("GRAID_ENGINE_SEED")
        .ok()
        .and_then(|s| s.parse().ok());
    let base = fixed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1)
    });
    let count = if fixed.is_some() { 1 } else { count };
    (0..count).map(move |i| base.wrapping_add(i.wrapping_mul(0x9e37_79b9_7f4a_7c15)))
}

fn total_member_bytes(report: &Report) -> (u64, u64) {
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
            assert_eq!(report.host.requeued.load(Ordering::Relaxed), 0);
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
            assert_eq!(
                *report.host.failed_members.lock().unwrap(),
                vec![victim as u32]
            );
            assert!(report.host.requeued.load(Ordering::Relaxed) > 0);
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
fn raid10_survives_failures_in_different_pairs_and_fails_when_a_pair_is_gone() {
    for seed in seeds(3) {
        // 4 members, near-2: pairs (0,1) and (2,3).
        for (a, b, survives) in [(0, 2, true), (1, 3, true), (0, 1, false), (2, 3, false)] {
            let dies = |n| Faults {
                die_after: Some(n),
                ..Faults::default()
            };
            let scenario = Scenario::new(Level::Raid10, 4, 16)
                .with_fault(a, dies(50))
                .with_fault(b, dies(250));
            let report = run(&scenario, seed);
            let engine = &report.host.engine;
            if survives {
                assert!(
                    report.errors.is_empty(),
                    "seed {seed}: ({a},{b}): {:?}",
                    report.errors
                );
                assert_eq!(engine.state(), ArrayState::Degraded);
            } else {
                assert!(
                    !report.errors.is_empty(),
                    "seed {seed}: ({a},{b}) lost a pair without an error"
                );
                assert_eq!(engine.state(), ArrayState::Failed);
                assert!(report.errors.iter().all(|&(_, s)| s == Status::IoError));
                // A failed array fails everything, even where the other pair still has a copy.
                let other_pair_chunk = if a == 0 { 0 } else { 16 };
                assert_eq!(
                    submit_inline(&report.host, Op::Read, other_pair_chunk, 8),
                    Some(Status::IoError)
                );
                assert_eq!(
                    submit_inline(&report.host, Op::Flush, 0, 0),
                    Some(Status::IoError)
                );
            }
            check_copies(&report, seed);
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
        assert_eq!(report.host.requeued.load(Ordering::Relaxed), 0);
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
fn a_refused_discard_is_reported_and_fails_no_member() {
    for seed in seeds(2) {
        let scenario = Scenario::new(Level::Raid10, 4, 16).with_fault(
            2,
            Faults {
                no_discard: true,
                ..Faults::default()
            },
        );
        let report = run(&scenario, seed);
        let engine = &report.host.engine;
        assert!(!report.errors.is_empty());
        assert!(
            report
                .errors
                .iter()
                .all(|&e| e == (Op::Discard, Status::NotSupported)),
            "seed {seed}: {:?}",
            report.errors
        );
        assert_eq!(engine.state(), ArrayState::Optimal);
        check_copies(&report, seed);
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
