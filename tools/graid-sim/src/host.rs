//! The host platform: in-memory members with injectable faults, request slots, a completion
//! queue and a requeue queue.

use graid_engine::array::ArrayEngine;
use graid_engine::members::MemberState;
use graid_engine::platform::{MemberIo, MetadataError, Op, Platform, Status, SubmitError};
use graid_engine::request::RequestState;
use graid_engine::superblock::Superblock;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Condvar, Mutex};
use std::time::Duration;

/// Where member data starts, as on real members (the superblock area lies before it).
pub const DATA_OFFSET: u64 = 4096;
/// A request that has not ended after this long is reported as hung.
pub const HANG: Duration = Duration::from_secs(20);

/// What a member does wrong.
#[derive(Clone, Copy, Debug, Default)]
pub struct Faults {
    /// Every I/O fails once this many I/Os have been done (a drive that dies).
    pub die_after: Option<u64>,
    /// Each I/O fails with this chance, in parts per million (bad blocks, a flaky link).
    pub error_ppm: u32,
    /// Discards are refused with "not supported".
    pub no_discard: bool,
}

/// An in-memory member: one `u64` tag per sector stands for the sector's contents.
pub struct MemDisk {
    pub sectors: Mutex<Vec<u64>>,
    pub faults: Faults,
    pub ios: AtomicU64,
    pub dead: AtomicBool,
    pub flushes: AtomicU64,
    /// Flushes sent, including the ones that failed.
    pub flush_attempts: AtomicU64,
    pub superblocks: Mutex<Vec<Superblock>>,
}

impl MemDisk {
    pub fn new(data_sectors: u64, faults: Faults) -> Self {
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
    pub fn next_io_fails(&self, rng: &mut StdRng) -> bool {
        let done = self.ios.fetch_add(1, Ordering::Relaxed);
        if self.faults.die_after.is_some_and(|n| done >= n) {
            self.dead.store(true, Ordering::Relaxed);
        }
        self.dead.load(Ordering::Relaxed)
            || (self.faults.error_ppm > 0 && rng.random_range(0..1_000_000) < self.faults.error_ppm)
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
}

/// What the platform saw going wrong (checked after every round).
#[derive(Default)]
pub struct Violations(pub Mutex<Vec<String>>);

impl Violations {
    pub fn report(&self, what: String) {
        self.0.lock().unwrap().push(what);
    }
}

/// The host home of one engine.
pub struct Host {
    pub engine: ArrayEngine<Vec<MemberState>>,
    pub disks: Vec<MemDisk>,
    pub slots: Vec<RequestSlot>,
    pub data_sectors: u64,
    /// Member I/O waiting for a completion thread.
    pub queue: Mutex<Option<Sender<QueuedIo>>>,
    pub requeues: Mutex<Option<Sender<usize>>>,
    /// Chance in percent that a member I/O completes inside `submit` (before it returns).
    pub inline_percent: AtomicU32,
    /// Chance in parts per million that `submit` refuses a member I/O.
    pub submit_error_ppm: u32,
    pub rng: Mutex<StdRng>,
    pub requeued: AtomicU64,
    pub failed_members: Mutex<Vec<u32>>,
    pub violations: Violations,
}

impl Host {
    pub fn slot(&self, rq: usize) -> &RequestSlot {
        &self.slots[rq]
    }

    /// Does one member I/O against the in-memory member and reports its completion.
    pub fn complete(&self, rq: usize, io: &MemberIo<usize>, rng: &mut StdRng) {
        let member = io.info.member as usize;
        let disk = &self.disks[member];
        let status = self.execute(rq, io, disk, rng);
        let slot = self.slot(rq);
        self.engine
            .piece_done(self, rq, &slot.state, io.info, status);
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
pub fn submit(host: &Host, rq: usize) {
    let spec = host.slot(rq).spec.lock().unwrap().clone();
    let op = spec.op.expect("a request has an op");
    host.engine
        .submit(host, rq, &host.slot(rq).state, op, spec.start, spec.sectors);
}
