//! The host platform: in-memory members with injectable faults, request slots, a completion
//! queue, the worker's lists and the worker thread.

use graid_engine::array::ArrayEngine;
use graid_engine::members::{MemberSet, MemberState};
use graid_engine::platform::{MemberEvent, MemberIo, Op, Platform, Status, SubmitError, WorkList};
use graid_engine::request::{Phase, RequestState};
use graid_engine::superblock::{Slot, Superblock};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Condvar, Mutex};
use std::time::Duration;

/// Where member data starts, as on real members (the superblock area lies before it).
pub const DATA_OFFSET: u64 = 4096;
/// A request that has not ended after this long is reported as hung.
pub const HANG: Duration = Duration::from_secs(20);
/// What a failed read leaves in the buffer: the engine must never return it.
pub const GARBAGE: u64 = 0xdead_dead_dead_dead;

static NEXT_THREAD: AtomicU32 = AtomicU32::new(0);

/// What a member does wrong.
#[derive(Clone, Copy, Debug, Default)]
pub struct Faults {
    /// Every I/O (superblock writes too) fails once this many I/Os have been done (a drive
    /// that dies).
    pub die_after: Option<u64>,
    /// Each I/O fails with this chance, in parts per million (a flaky link). A failing read
    /// leaves garbage in the buffer; a failing write may have written a part.
    pub error_ppm: u32,
    /// Each read fails with this chance, in parts per million (writes never do), leaving
    /// garbage in the buffer.
    pub read_error_ppm: u32,
    /// This many sectors of the data area fail every read (like dm-dust's bad blocks).
    pub bad_sectors: usize,
    /// A successful write over a bad sector does not clear it, and writes to bad sectors fail
    /// (a region that cannot be repaired); otherwise a write clears it.
    pub bad_sectors_stick: bool,
    /// Discards are refused with "not supported".
    pub no_discard: bool,
    /// Discards fail with an I/O error.
    pub discard_errors: bool,
    /// Superblock writes fail.
    pub superblock_errors: bool,
    /// After a successful write of a request's first pass, one sector it wrote goes bad with
    /// this chance in parts per million (bad sectors appearing as the run goes).
    pub rot_ppm: u32,
}

/// An in-memory member: one `u64` tag per sector stands for the sector's contents.
pub struct MemDisk {
    pub sectors: Mutex<Vec<u64>>,
    pub faults: Faults,
    /// Member sectors (data offset included) whose reads fail.
    pub bad: Mutex<BTreeSet<u64>>,
    pub ios: AtomicU64,
    pub dead: AtomicBool,
    pub flushes: AtomicU64,
    /// Flushes sent, including the ones that failed.
    pub flush_attempts: AtomicU64,
    pub superblocks: Mutex<Vec<Superblock>>,
}

impl MemDisk {
    pub fn new(data_sectors: u64, faults: Faults, rng: &mut StdRng) -> Self {
        let bad = (0..faults.bad_sectors)
            .map(|_| DATA_OFFSET + rng.random_range(0..data_sectors))
            .collect();
        Self {
            sectors: Mutex::new(vec![0; (DATA_OFFSET + data_sectors) as usize]),
            faults,
            bad: Mutex::new(bad),
            ios: AtomicU64::new(0),
            dead: AtomicBool::new(false),
            flushes: AtomicU64::new(0),
            flush_attempts: AtomicU64::new(0),
            superblocks: Mutex::new(Vec::new()),
        }
    }

    /// Decides whether the next I/O fails.
    pub fn next_io_fails(&self, rng: &mut StdRng) -> bool {
        let done = self.ios.fetch_add(1, Ordering::Relaxed);
        if self.faults.die_after.is_some_and(|n| done >= n) {
            self.dead.store(true, Ordering::Relaxed);
        }
        self.dead.load(Ordering::Relaxed)
            || (self.faults.error_ppm > 0 && rng.random_range(0..1_000_000) < self.faults.error_ppm)
    }

    fn any_bad(&self, first: u64, len: u64) -> bool {
        self.bad
            .lock()
            .unwrap()
            .range(first..first + len)
            .next()
            .is_some()
    }

    /// The newest superblock written to this member.
    pub fn newest_superblock(&self) -> Option<Superblock> {
        self.superblocks.lock().unwrap().last().copied()
    }
}

/// A member I/O waiting for a completion thread: the request slot and the I/O.
pub type QueuedIo = (usize, MemberIo<usize>);

/// A request as the submitter made it.
#[derive(Clone, Debug, Default)]
pub struct Spec {
    pub op: Option<Op>,
    pub start: u64,
    pub sectors: u64,
    /// `(first array sector, sectors)` of each segment, contiguous, covering the request.
    pub segments: Vec<(u64, u64)>,
}

/// One request slot: the engine's state plus the request's data buffer (a tag per sector).
#[derive(Default)]
pub struct RequestSlot {
    pub state: RequestState,
    pub spec: Mutex<Spec>,
    pub data: Mutex<Vec<u64>>,
    pub outcome: Mutex<Option<Status>>,
    pub ended: Condvar,
    pub ends: AtomicU32,
    /// Handed to the engine and not ended yet.
    pub in_flight: AtomicBool,
    /// Members a write, flush or discard of this request reached successfully.
    pub written: AtomicU32,
}

/// What the platform saw going wrong (checked after every round).
#[derive(Default)]
pub struct Violations(pub Mutex<Vec<String>>);

impl Violations {
    pub fn report(&self, what: String) {
        self.0.lock().unwrap().push(what);
    }
}

/// The worker's wake-up flag.
#[derive(Default)]
pub struct Kick {
    pub pending: Mutex<bool>,
    pub wake: Condvar,
}

/// The host home of one engine.
pub struct Host {
    pub engine: ArrayEngine<Vec<MemberState>>,
    pub disks: Vec<MemDisk>,
    pub slots: Vec<RequestSlot>,
    pub data_sectors: u64,
    /// Member I/O waiting for a completion thread.
    pub queue: Mutex<Option<Sender<QueuedIo>>>,
    pub deferred: Mutex<Vec<usize>>,
    pub parked: Mutex<Vec<usize>>,
    pub kick: Kick,
    /// Chance in percent that a member I/O completes inside `submit` (before it returns).
    pub inline_percent: AtomicU32,
    /// Chance in parts per million that `submit` refuses a member I/O.
    pub submit_error_ppm: u32,
    pub rng: Mutex<StdRng>,
    /// Requests that went through the worker.
    pub deferrals: AtomicU64,
    pub events: Mutex<Vec<(u32, MemberEvent)>>,
    pub violations: Violations,
}

impl Host {
    pub fn slot(&self, rq: usize) -> &RequestSlot {
        &self.slots[rq]
    }

    /// Members with `event` reported, in order.
    pub fn members_with(&self, event: MemberEvent) -> Vec<u32> {
        let events = self.events.lock().unwrap();
        events
            .iter()
            .filter(|(_, e)| *e == event)
            .map(|&(m, _)| m)
            .collect()
    }

    /// Does one member I/O against the in-memory member and reports its completion.
    pub fn complete(&self, rq: usize, io: &MemberIo<usize>, rng: &mut StdRng) {
        let member = io.info.member as usize;
        let disk = &self.disks[member];
        let status = self.execute(rq, io, disk, rng);
        if status == Status::Ok && io.info.op.is_write() {
            self.slot(rq)
                .written
                .fetch_or(1 << member, Ordering::Relaxed);
        }
        self.engine.piece_done(self, rq, io.info, status);
    }

    pub fn execute(
        &self,
        rq: usize,
        io: &MemberIo<usize>,
        disk: &MemDisk,
        rng: &mut StdRng,
    ) -> Status {
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
        let bad = disk.any_bad(first, len);
        let read_fails = op == Op::Read
            && (bad
                || (disk.faults.read_error_ppm > 0
                    && rng.random_range(0..1_000_000) < disk.faults.read_error_ppm));
        let fails = disk.next_io_fails(rng)
            || read_fails
            || (op == Op::Write && bad && disk.faults.bad_sectors_stick)
            || (op == Op::Discard && disk.faults.discard_errors);
        // A failing write may still have written a part; a failing read leaves garbage.
        let done = match (fails, op) {
            (false, _) => len,
            (true, Op::Read) => 0,
            (true, _) => rng.random_range(0..=len),
        };
        let mut sectors = disk.sectors.lock().unwrap();
        let mut data = self.slot(rq).data.lock().unwrap();
        let member_range = first as usize..(first + done) as usize;
        let buffer_range = buffer_at..buffer_at + done as usize;
        match op {
            Op::Read if fails => data[buffer_at..buffer_at + len as usize].fill(GARBAGE),
            Op::Read => data[buffer_range].copy_from_slice(&sectors[member_range]),
            Op::Write => sectors[member_range].copy_from_slice(&data[buffer_range]),
            Op::Discard => sectors[member_range].fill(0),
            Op::Flush => {}
        }
        if op.is_write() && !fails && !disk.faults.bad_sectors_stick {
            let mut bad = disk.bad.lock().unwrap();
            let cleared: Vec<u64> = bad.range(first..first + len).copied().collect();
            for s in cleared {
                bad.remove(&s);
            }
            let first_pass = self.slot(rq).state.phase() == Phase::Normal;
            if op == Op::Write && first_pass && rng.random_range(0..1_000_000) < disk.faults.rot_ppm
            {
                bad.insert(first + rng.random_range(0..len));
            }
        }
        if fails {
            Status::IoError
        } else {
            Status::Ok
        }
    }

    /// True if some member's newest superblock records `member` as faulty.
    pub fn recorded_faulty(&self, member: u32) -> bool {
        self.disks.iter().any(|d| {
            d.newest_superblock()
                .is_some_and(|sb| sb.slots[member as usize] == Slot::Faulty)
        })
    }

    /// A write or flush ended well: every member it should have reached and did not must be
    /// failed in the superblocks already (no write acknowledged before the failure it depends
    /// on is durable). Discards leave undefined data and are not checked.
    fn check_durable(&self, rq: usize, spec: &Spec) {
        let geometry = self.engine.geometry();
        let expected = match spec.op {
            Some(Op::Flush) => (0..geometry.members()).fold(0u32, |m, i| m | 1 << i),
            Some(Op::Write) => geometry
                .map_write(spec.start, spec.sectors)
                .map(|pieces| pieces.fold(0u32, |m, p| m | 1 << p.member))
                .unwrap_or(0),
            _ => return,
        };
        let written = self.slot(rq).written.load(Ordering::Relaxed);
        for member in MemberSet::from_bits(expected & !written).iter() {
            if !self.recorded_faulty(member) {
                self.violations.report(format!(
                    "request {rq} ({spec:?}) acknowledged without member {member}, whose \
                     failure no superblock records"
                ));
            }
        }
    }

    /// Runs the worker until `stop` is set.
    pub fn worker_loop(&self, stop: &AtomicBool) {
        loop {
            {
                let mut pending = self.kick.pending.lock().unwrap();
                while !*pending && !stop.load(Ordering::Acquire) {
                    pending = self.kick.wake.wait(pending).unwrap();
                }
                if !*pending && stop.load(Ordering::Acquire) {
                    return;
                }
                *pending = false;
            }
            self.engine.work(self);
        }
    }
}

impl Platform for Host {
    type Request = usize;
    type Segment = usize;

    fn state(&self, rq: usize) -> &RequestState {
        &self.slot(rq).state
    }

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
        let spec = slot.spec.lock().unwrap().clone();
        if status == Status::Ok {
            self.check_durable(rq, &spec);
        }
        slot.in_flight.store(false, Ordering::Release);
        *slot.outcome.lock().unwrap() = Some(status);
        slot.ended.notify_all();
    }

    fn push(&self, list: WorkList, rq: usize) {
        match list {
            WorkList::Deferred => {
                self.deferrals.fetch_add(1, Ordering::Relaxed);
                self.deferred.lock().unwrap().push(rq);
            }
            WorkList::Parked => self.parked.lock().unwrap().push(rq),
        }
    }

    fn take_all(&self, list: WorkList, mut f: impl FnMut(usize)) {
        let taken = match list {
            WorkList::Deferred => std::mem::take(&mut *self.deferred.lock().unwrap()),
            WorkList::Parked => std::mem::take(&mut *self.parked.lock().unwrap()),
        };
        for rq in taken {
            f(rq);
        }
    }

    fn kick_worker(&self) {
        *self.kick.pending.lock().unwrap() = true;
        self.kick.wake.notify_one();
    }

    fn any_request(&self, mut pred: impl FnMut(&RequestState) -> bool) -> bool {
        self.slots
            .iter()
            .any(|s| s.in_flight.load(Ordering::Acquire) && pred(&s.state))
    }

    fn pause(&self) {
        std::thread::sleep(Duration::from_micros(50));
    }

    fn write_superblocks(&self, targets: MemberSet, copy: impl Fn(u32) -> Superblock) -> MemberSet {
        let mut failed = MemberSet::EMPTY;
        for member in targets.iter() {
            let disk = &self.disks[member as usize];
            if disk.dead.load(Ordering::Relaxed) || disk.faults.superblock_errors {
                failed = failed.with(member);
            } else {
                disk.superblocks.lock().unwrap().push(copy(member));
            }
        }
        failed
    }

    fn cpu(&self) -> u32 {
        // A per-thread number stands for the CPU.
        thread_local!(static ID: u32 = NEXT_THREAD.fetch_add(1, Ordering::Relaxed));
        ID.with(|id| *id)
    }

    fn member_event(&self, member: u32, event: MemberEvent) {
        self.events.lock().unwrap().push((member, event));
    }
}

/// Submits a slot's request to the engine.
pub fn submit(host: &Host, rq: usize) {
    let spec = host.slot(rq).spec.lock().unwrap().clone();
    let op = spec.op.expect("a request has an op");
    let slot = host.slot(rq);
    slot.written.store(0, Ordering::Relaxed);
    slot.in_flight.store(true, Ordering::Release);
    host.engine.submit(host, rq, op, spec.start, spec.sectors);
}
