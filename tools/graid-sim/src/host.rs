//! The host platform: in-memory members with injectable faults, request slots, a completion
//! queue, the worker's lists and the worker thread.

use graid_engine::array::{ArrayEngine, EngineStore};
use graid_engine::bitmap::{block_bit, reset_after_resize, RegionState, Regions, BLOCK_BYTES};
use graid_engine::layout::{Recovery, Role, StripeMap};
use graid_engine::members::{MemberSet, MemberState};
use graid_engine::parity::{Columns, ParityJob, ParityOp};
use graid_engine::platform::{
    Computed, Events, LogIo, MemberEvent, MemberIo, Metadata, Op, PieceInfo, RebuildBuffer,
    RebuildIoError, Requests, Source, Status, StripeBuffers, SubmitError, WorkList, LOG_HEADERS,
};
use graid_engine::ppl::{
    add_to_group, decode_entry, decode_group, start_group, LogRun, BLOCK_BYTES as PPL_BLOCK_BYTES,
    BLOCK_SECTORS as PPL_BLOCK_SECTORS,
};
use graid_engine::rebuild::REBUILD_COLUMN_SECTORS;
use graid_engine::request::{Phase, RequestState};
use graid_engine::reshape::Side as PlanSide;
use graid_engine::stripe::{lock_slots_for, SLICE_SECTORS};
use graid_engine::superblock::{Slot, Superblock};
use graid_parity::gf;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

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
    /// The member dies (as above) once the rebuild did this many I/Os on it: a source that
    /// dies in the middle of a rebuild.
    pub die_after_rebuild_ios: Option<u64>,
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
    /// this chance in parts per million (bad sectors appearing as the run goes); on RAID 5/6,
    /// once a write request ended, one sector of each piece of data it wrote.
    pub rot_ppm: u32,
    /// Each read waits up to this many microseconds before it reads the disk (a slow drive:
    /// a read sent before some other I/O reads the disk after it).
    pub read_delay_us: u64,
}

/// An in-memory member: one `u64` tag per sector stands for the sector's contents.
pub struct MemDisk {
    pub sectors: Mutex<Vec<u64>>,
    pub faults: Faults,
    /// Member sectors (data offset included) whose reads fail.
    pub bad: Mutex<BTreeSet<u64>>,
    pub ios: AtomicU64,
    /// I/Os of the rebuild (and scrub) on it.
    pub rebuild_ios: AtomicU64,
    pub dead: AtomicBool,
    pub flushes: AtomicU64,
    /// Flushes sent, including the ones that failed.
    pub flush_attempts: AtomicU64,
    pub superblocks: Mutex<Vec<Superblock>>,
    /// Write-intent bitmap blocks written to it, by block number (the newest).
    pub bitmap_blocks: Mutex<HashMap<u64, Box<[u8; BLOCK_BYTES]>>>,
    /// Partial parity log blocks (heads, entry headers) written to it, by member sector; a
    /// payload's tags are in `sectors`.
    pub log_blocks: Mutex<HashMap<u64, Box<[u8; PPL_BLOCK_BYTES]>>>,
    /// With a volatile write cache ([`Host::volatile_cache`]): the writes it completed since
    /// its last flush, oldest first (and the durable ones among them, to keep their order).
    /// A power cut may lose any of the volatile ones ([`MemDisk::image_after_cut`]).
    pub cache: Mutex<Vec<Cached>>,
}

/// A write a member completed while it had writes in its volatile cache: where, what it
/// replaced, what it wrote, and whether it was durable at once (FUA).
#[derive(Clone, Debug)]
pub enum Cached {
    Sectors {
        first: usize,
        before: Vec<u64>,
        after: Vec<u64>,
        durable: bool,
    },
}

impl MemDisk {
    /// Whether this member's on-disk bitmap has region `region`'s bit set (a block never
    /// written reads as all clear).
    pub fn bitmap_bit(&self, region: u64) -> bool {
        let (block, index) = Regions::place(region);
        self.bitmap_blocks
            .lock()
            .unwrap()
            .get(&block)
            .is_some_and(|b| block_bit(b, index))
    }

    pub fn new(data_sectors: u64, faults: Faults, rng: &mut StdRng) -> Self {
        let bad = (0..faults.bad_sectors)
            .map(|_| DATA_OFFSET + rng.random_range(0..data_sectors))
            .collect();
        Self {
            sectors: Mutex::new(vec![0; (DATA_OFFSET + data_sectors) as usize]),
            faults,
            bad: Mutex::new(bad),
            ios: AtomicU64::new(0),
            rebuild_ios: AtomicU64::new(0),
            dead: AtomicBool::new(false),
            flushes: AtomicU64::new(0),
            flush_attempts: AtomicU64::new(0),
            superblocks: Mutex::new(Vec::new()),
            bitmap_blocks: Mutex::new(HashMap::new()),
            log_blocks: Mutex::new(HashMap::new()),
            cache: Mutex::new(Vec::new()),
        }
    }

    /// Writes `data` at member sector `first` of `sectors` (the member's, locked), remembering
    /// it in the volatile cache when `volatile` is on; `durable` (FUA): a power cut keeps it.
    pub fn store(
        &self,
        sectors: &mut [u64],
        first: usize,
        data: &[u64],
        volatile: bool,
        durable: bool,
    ) {
        let range = first..first + data.len();
        let mut cache = self.cache.lock().unwrap();
        if volatile && !(durable && cache.is_empty()) {
            cache.push(Cached::Sectors {
                first,
                before: sectors[range.clone()].to_vec(),
                after: data.to_vec(),
                durable,
            });
        }
        sectors[range].copy_from_slice(data);
    }

    /// A completed flush: every write the member completed before it is durable.
    pub fn flush_cache(&self) {
        self.cache.lock().unwrap().clear();
    }

    /// What the member holds after a power cut: [`MemDisk::image`], less any of the writes
    /// still in its volatile cache (each lost with even odds, independently; durable ones
    /// stay), as a drive without power-loss protection may leave it.
    pub fn image_after_cut(&self, rng: &mut StdRng) -> MemDisk {
        let copy = self.image();
        let cache = self.cache.lock().unwrap();
        {
            let mut sectors = copy.sectors.lock().unwrap();
            for entry in cache.iter().rev() {
                let Cached::Sectors { first, before, .. } = entry;
                sectors[*first..*first + before.len()].copy_from_slice(before);
            }
            for entry in cache.iter() {
                let Cached::Sectors {
                    first,
                    after,
                    durable,
                    ..
                } = entry;
                if *durable || rng.random_bool(0.5) {
                    sectors[*first..*first + after.len()].copy_from_slice(after);
                }
            }
        }
        copy
    }

    /// A copy of what the device holds (sectors, superblocks, bitmap and log blocks), as a
    /// power cut leaves it.
    pub fn image(&self) -> MemDisk {
        let copy = MemDisk::new(0, self.faults, &mut StdRng::seed_from_u64(0));
        *copy.sectors.lock().unwrap() = self.sectors.lock().unwrap().clone();
        *copy.superblocks.lock().unwrap() = self.superblocks.lock().unwrap().clone();
        *copy.bitmap_blocks.lock().unwrap() = self.bitmap_blocks.lock().unwrap().clone();
        *copy.log_blocks.lock().unwrap() = self.log_blocks.lock().unwrap().clone();
        copy.dead
            .store(self.dead.load(Ordering::Relaxed), Ordering::Relaxed);
        copy
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

    /// A write of `len` sectors at `first` fails because of a bad sector that sticks.
    fn write_hits_stuck(&self, first: u64, len: u64) -> bool {
        self.faults.bad_sectors_stick && self.any_bad(first, len)
    }

    /// A write of `len` sectors at `first` succeeded: it clears the bad sectors there (unless
    /// they stick), and with `rot` one sector it wrote may go bad (`Faults::rot_ppm`).
    fn written(&self, first: u64, len: u64, rot: bool, rng: &mut StdRng) {
        if self.faults.bad_sectors_stick {
            return;
        }
        let mut bad = self.bad.lock().unwrap();
        let cleared: Vec<u64> = bad.range(first..first + len).copied().collect();
        for s in cleared {
            bad.remove(&s);
        }
        if rot && rng.random_range(0..1_000_000) < self.faults.rot_ppm {
            bad.insert(first + rng.random_range(0..len));
        }
    }

    /// Swaps what two devices hold (sectors, superblocks, bitmap and log): the platform moving a
    /// replacement's device into its member's place, as the kernel moves the open device.
    pub fn swap_contents(&self, other: &MemDisk) {
        std::mem::swap(
            &mut *self.sectors.lock().unwrap(),
            &mut *other.sectors.lock().unwrap(),
        );
        std::mem::swap(
            &mut *self.superblocks.lock().unwrap(),
            &mut *other.superblocks.lock().unwrap(),
        );
        // Its bitmap and log areas too: a device brings its own, whatever an earlier life
        // left there.
        std::mem::swap(
            &mut *self.bitmap_blocks.lock().unwrap(),
            &mut *other.bitmap_blocks.lock().unwrap(),
        );
        std::mem::swap(
            &mut *self.log_blocks.lock().unwrap(),
            &mut *other.log_blocks.lock().unwrap(),
        );
    }

    /// The newest superblock written to this member.
    pub fn newest_superblock(&self) -> Option<Superblock> {
        self.superblocks.lock().unwrap().last().copied()
    }
}

/// A member I/O waiting for a completion thread: the request slot and the I/O.
pub type QueuedIo = (usize, MemberIo<SegmentRef>);

/// A request as the submitter made it.
#[derive(Clone, Debug, Default)]
pub struct Spec {
    pub op: Option<Op>,
    pub start: u64,
    pub sectors: u64,
    /// `(first array sector, sectors)` of each segment, contiguous, covering the request.
    pub segments: Vec<(u64, u64)>,
    /// It asks for FUA: its member writes are durable when they complete.
    pub fua: bool,
}

/// A segment of a request: the request's slot and the segment's index in its [`Spec`] (the
/// engine may copy another request's data into a stripe buffer: a held stripe's follower).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentRef {
    pub rq: usize,
    pub index: usize,
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
    /// RAID 5/6 stripe buffer: one column per index (empty when not allocated).
    pub buffer: Mutex<Vec<Vec<u64>>>,
    /// Member I/Os sent and not yet reported back.
    pub outstanding: AtomicU32,
    /// The stripe buffer's log headers.
    pub log_headers: Mutex<Vec<Box<[u8; PPL_BLOCK_BYTES]>>>,
}

/// What the platform saw going wrong (checked after every round).
#[derive(Default)]
pub struct Violations(pub Mutex<Vec<String>>);

impl Violations {
    pub fn report(&self, what: String) {
        self.0.lock().unwrap().push(what);
    }
}

/// The worker's wake-up flag, and its timer.
#[derive(Default)]
pub struct Kick {
    pub pending: Mutex<bool>,
    pub wake: Condvar,
    /// When the worker runs next without a kick (`kick_worker_after`).
    pub timer: Mutex<Option<Instant>>,
}

/// The engine's memory as the host allocates it.
pub type Store = EngineStore<Vec<MemberState>, Vec<AtomicU64>>;

/// The store of `members`, its lock tables sized for `requests` in flight.
pub fn store(members: Vec<MemberState>, requests: usize) -> Store {
    let requests = u32::try_from(requests).unwrap_or(u32::MAX);
    let zeros = |n: usize| Ok::<_, ()>((0..n).map(|_| AtomicU64::new(0)).collect());
    EngineStore::new(members, lock_slots_for(requests), zeros).expect("vectors")
}

/// The host home of one engine.
pub struct Host {
    pub engine: ArrayEngine<Store>,
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
    /// Submitters of an overlapping run that write.
    pub overlap_writers: usize,
    pub rng: Mutex<StdRng>,
    /// Requests that went through the worker.
    pub deferrals: AtomicU64,
    /// Rebuild writes done.
    pub rebuild_copies: AtomicU64,
    /// Times the rebuild slept to keep to its speed limit.
    pub rebuild_sleeps: AtomicU64,
    /// The rebuild's buffer: a column per member, tags per sector.
    pub rebuild_buffer: Mutex<Vec<Vec<u64>>>,
    pub events: Mutex<Vec<(u32, MemberEvent)>>,
    /// Superblocks written to spares, with their slot.
    pub spare_superblocks: Mutex<Vec<(u32, Superblock)>>,
    /// Times the worker asked for a spare to take a failed member's place.
    pub takeovers_wanted: AtomicU32,
    /// The heals the engine started (`Events::heal_started`): regions each walks.
    pub heals: Mutex<Vec<u64>>,
    /// The power goes this many writes after a heal started, its resync pending on the
    /// members (`u64::MAX`: never).
    pub cut_after_heal_starts: AtomicU64,
    pub violations: Violations,
    pub stripe: StripeHome,
    /// The write-intent bitmap's regions and states, if the array has one (more states than
    /// regions: spares for a resize, which gives the regions in `resized_bitmap`).
    pub bitmap: Option<(Regions, Vec<RegionState>)>,
    /// The bitmap's regions since a resize (`Metadata::resize_bitmap`).
    pub resized_bitmap: Mutex<Option<Regions>>,
    /// Bitmap blocks written.
    pub bitmap_writes: AtomicU64,
    /// A power cut: writes are counted, and those past this many never land (they still
    /// report success, as a device's cache would before the power went).
    pub cut_after: AtomicU64,
    pub writes: AtomicU64,
    /// Members have volatile write caches: a completed write that no later completed flush
    /// (or its own FUA) covers may be lost at a power cut, per member, independently
    /// ([`MemDisk::image_after_cut`]).
    pub volatile_cache: bool,
    /// Metadata writes (superblocks, bitmap blocks, log heads: one per call, whatever the
    /// members) done, and the one during which the power goes, right after its first member
    /// took it: the window between two members' metadata writes.
    pub metadata_writes: AtomicU64,
    pub cut_in_metadata: AtomicU64,
}

/// What the host keeps for the stripe engine.
#[derive(Default)]
pub struct StripeHome {
    /// Work for the stripe threads: a request's next step, or a parity completion.
    pub queue: Mutex<Option<Sender<StripeTask>>>,
    pub waits: Mutex<HashMap<u32, Vec<usize>>>,
    /// Per slot: the writes its lock's holder took in.
    pub adopted: Mutex<HashMap<u32, Vec<usize>>>,
    pub buffer_wait: Mutex<Vec<usize>>,
    /// A take off `buffer_wait` is under way: as in the kernel, whose list is a lock-free
    /// stack taken whole and put back, a second taker meanwhile finds it empty.
    pub buffer_wait_taking: AtomicBool,
    /// Requests pushed onto `buffer_wait`, and takes that found it empty though requests
    /// waited on it, because another take was under way (a wake-up lost).
    pub buffer_waits: AtomicU64,
    pub buffer_wakes_lost: AtomicU64,
    pub log_wait: Mutex<Vec<usize>>,
    /// Log writes waiting for their member's batch in flight to end, per member, and the
    /// members with a batch in flight (a bit each): the kernel's `log_batch.rs`.
    pub log_waiting: Mutex<HashMap<u32, Vec<WaitingLog>>>,
    pub log_busy: AtomicU64,
    /// Log writes that carried a group of entries, and the entries they carried.
    pub log_groups: AtomicU64,
    pub log_grouped: AtomicU64,
    /// Buffers in use, and the most allowed at once (0: no limit).
    pub buffers: AtomicU32,
    pub max_buffers: u32,
    /// Wide-slice buffers asked for and given (half are refused, at random, as a platform
    /// short of memory would).
    pub wide_asked: AtomicU64,
    pub wide_given: AtomicU64,
    /// Every wide-slice buffer asked for is given (a platform with memory to spare).
    pub wide_always: AtomicBool,
    /// Percent of parity jobs reported done later, from a stripe thread.
    pub async_parity_percent: u32,
    /// Harness mutations the stress tests must catch.
    pub mutation: Option<Mutation>,
    pub parity_jobs: AtomicU64,
    /// Parity jobs over more than one stripe (adjacent stripes batched).
    pub run_jobs: AtomicU64,
    /// RAID 6 parity updates (read-modify-write) cannot be computed, as in a kernel without
    /// `raid6_can_xor_syndrome()`: such a job fails.
    pub no_raid6_update: bool,
    /// Parity updates (read-modify-write) computed.
    pub update_jobs: AtomicU64,
    /// A parity helper the rebuild's and the scrub's jobs go to (`rebuild_compute`), as to the
    /// kernel's `/dev/graid-helper`: `Some(n)` while attached, right for its first `n` jobs,
    /// then wrong (it changes every column it writes). Nothing it computed wrong may reach a
    /// member.
    pub helper: Mutex<Option<u64>>,
    /// Jobs the helper did, and wrong results the engine caught (`helper_wrong`).
    pub helper_jobs: AtomicU64,
    pub helper_caught: AtomicU64,
    /// A parity helper the requests' parity generations go to (as the kernel's
    /// `Staging::plan` sends them): `Some((right, every))` while attached, right for its first
    /// `right` jobs, then wrong. The platform checks one job in `every` (the kernel's
    /// sampling): a wrong one is caught (counted, the helper detached, the platform's own
    /// parity kept); the others' parity goes to the members as the helper made it, the engine
    /// told first ([`ArrayEngine::parity_unchecked`]).
    pub request_helper: Mutex<Option<(u64, u64)>>,
    pub request_helper_jobs: AtomicU64,
    /// Liars the request path caught (with `helper_caught`, [`Events::helper_catches`]).
    pub request_helper_caught: AtomicU64,
}

/// Deliberate bugs, to show the stress tests catch them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mutation {
    /// Parity updates are skipped (the job "succeeds" without computing).
    SkipParityUpdate,
    /// Q uses the data index + 1 as the coefficient exponent.
    WrongQCoefficient,
}

#[derive(Clone, Copy, Debug)]
pub enum StripeTask {
    Work(usize),
    ParityDone(usize),
    /// A member's batch of log writes goes out ([`Host::send_log_batch`]).
    LogSend(u32),
}

impl StripeTask {
    /// Runs the task, as a stripe thread (the kernel's work queue) would.
    pub fn run(self, host: &Host) {
        match self {
            StripeTask::Work(rq) => host.engine.stripe_work(host, rq),
            StripeTask::ParityDone(rq) => host.engine.parity_done(host, rq, true),
            StripeTask::LogSend(member) => host.send_log_batch(member),
        }
    }
}

/// A log write waiting for its member's batch: the request, the write, its payload's tags and
/// its header.
type WaitingLog = (usize, LogIo, Vec<u64>, Box<[u8; PPL_BLOCK_BYTES]>);

impl Host {
    /// A metadata write (superblock, bitmap block, log head) to each of `targets`: `store`
    /// keeps it on a member that takes it (before a power cut); returns the members whose
    /// write failed (dead, or failing superblock writes).
    /// A metadata block written to every member of `targets`, `FUA` (stored as it lands) and
    /// with `preflush` after a flush of that member's cache.
    fn write_metadata(
        &self,
        targets: MemberSet,
        preflush: bool,
        store: impl Fn(u32, &MemDisk),
    ) -> MemberSet {
        let mut failed = MemberSet::EMPTY;
        let cut_here = self.metadata_writes.fetch_add(1, Ordering::SeqCst)
            == self.cut_in_metadata.load(Ordering::SeqCst);
        for member in targets.iter() {
            let disk = &self.disks[member as usize];
            if disk.dead.load(Ordering::Relaxed) || disk.faults.superblock_errors {
                failed = failed.with(member);
            } else if self.lands() {
                // PREFLUSH: what the member completed before is durable, then the block (FUA).
                if preflush {
                    disk.flush_cache();
                }
                store(member, disk);
                if cut_here {
                    // The power goes once the first member took it.
                    self.cut_after
                        .store(self.writes.load(Ordering::SeqCst), Ordering::SeqCst);
                }
            }
        }
        failed
    }

    /// Whether the next write lands (before the power cut, if one is set).
    pub fn lands(&self) -> bool {
        self.writes.fetch_add(1, Ordering::SeqCst) < self.cut_after.load(Ordering::SeqCst)
    }

    /// The power went: no write lands from now on.
    pub fn power_cut(&self) -> bool {
        self.writes.load(Ordering::SeqCst) >= self.cut_after.load(Ordering::SeqCst)
    }

    pub fn slot(&self, rq: usize) -> &RequestSlot {
        &self.slots[rq]
    }

    /// Members with `event` reported, in order.
    /// Members failed by an I/O error: on a request's I/O, or on a superblock or bitmap write
    /// (which may be the first to find a dying member: the dirty and clean marks write one
    /// whenever the array starts or stops writing), in order, each once.
    pub fn members_failed_by_io(&self) -> Vec<u32> {
        let events = self.events.lock().unwrap();
        let mut failed: Vec<u32> = Vec::new();
        for &(m, e) in events.iter() {
            let by_io = matches!(e, MemberEvent::Failed | MemberEvent::SuperblockWriteFailed);
            if by_io && !failed.contains(&m) {
                failed.push(m);
            }
        }
        failed
    }

    pub fn members_with(&self, event: MemberEvent) -> Vec<u32> {
        let events = self.events.lock().unwrap();
        events
            .iter()
            .filter(|(_, e)| *e == event)
            .map(|&(m, _)| m)
            .collect()
    }

    /// Does one member I/O against the in-memory member and reports its completion.
    pub fn complete(&self, rq: usize, io: &MemberIo<SegmentRef>, rng: &mut StdRng) {
        let member = io.info.member as usize;
        let disk = &self.disks[member];
        if io.info.op == Op::Read && disk.faults.read_delay_us > 0 {
            let us = rng.random_range(0..disk.faults.read_delay_us);
            std::thread::sleep(Duration::from_micros(us));
        }
        let status = self.execute(rq, io, disk, rng);
        if status == Status::Ok && io.info.op.is_write() {
            self.slot(rq)
                .written
                .fetch_or(1 << member, Ordering::Relaxed);
        }
        self.slot(rq).outstanding.fetch_sub(1, Ordering::AcqRel);
        self.engine.piece_done(self, rq, io.info, status);
    }

    pub fn execute(
        &self,
        rq: usize,
        io: &MemberIo<SegmentRef>,
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
            if !self.power_cut() {
                disk.flush_cache();
            }
            return Status::Ok;
        }
        self.check_marks(rq, io, disk);
        let first = io.member_sector;
        let len = io.info.sectors;
        let (data_start, data_end) = self.data_span();
        if first < data_start || first + len > data_end || len == 0 {
            self.violations
                .report(format!("member I/O outside the data area: {io:?}"));
            return Status::IoError;
        }
        let (segment, skip) = match io.source {
            Source::Segment(segment, _) if segment.rq != rq => {
                self.violations
                    .report(format!("member I/O from another request's data: {io:?}"));
                return Status::IoError;
            }
            Source::Segment(segment, skip) => (segment.index, skip),
            Source::Buffer { column, offset } => {
                return self.execute_buffer(rq, io, disk, rng, column, offset);
            }
            Source::None => {
                self.violations
                    .report(format!("data I/O without a source: {io:?}"));
                return Status::IoError;
            }
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
            || (op == Op::Write && disk.write_hits_stuck(first, len))
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
            Op::Write if !self.lands() => {}
            Op::Write => disk.store(
                &mut sectors,
                first as usize,
                &data[buffer_range],
                self.volatile_cache,
                spec.fua,
            ),
            Op::Discard => {
                let zeros = vec![0; done as usize];
                disk.store(
                    &mut sectors,
                    first as usize,
                    &zeros,
                    self.volatile_cache,
                    false,
                );
            }
            Op::Flush => {}
        }
        if op.is_write() && !fails {
            let first_pass = self.slot(rq).state.phase() == Phase::Normal;
            disk.written(first, len, op == Op::Write && first_pass, rng);
        }
        if fails {
            Status::IoError
        } else {
            Status::Ok
        }
    }

    /// RAID 5/6 (whose member writes go through stripe buffers, where a write and a repair's
    /// rewrite look alike): after a write request ended, each member sector of data it wrote
    /// may go bad (`Faults::rot_ppm`).
    fn rot(&self, spec: &Spec) {
        let g = self.engine.geometry();
        if spec.op != Some(Op::Write) || !g.level().has_parity() {
            return;
        }
        let Ok(pieces) = g.map_write(spec.start, spec.sectors) else {
            return;
        };
        let mut rng = self.rng.lock().unwrap();
        for piece in pieces {
            let disk = &self.disks[piece.member as usize];
            if rng.random_range(0..1_000_000) < disk.faults.rot_ppm {
                let at = DATA_OFFSET + piece.member_sector + rng.random_range(0..piece.sectors);
                disk.bad.lock().unwrap().insert(at);
            }
        }
    }

    /// A request's write must find the array marked dirty and its write-intent bits on the
    /// member. Not a read's repair: it writes back what the others say the data is (recovered
    /// from another copy or the parity), so a crash in the middle leaves each sector as it was
    /// (unreadable) or right, never copies or parity that disagree (md's read repair writes
    /// without `md_write_start` too).
    fn check_marks(&self, rq: usize, io: &MemberIo<SegmentRef>, disk: &MemDisk) {
        if self.slot(rq).state.op() != Op::Read {
            self.check_dirty(io, disk);
            self.check_intent(rq, io, disk);
        }
    }

    /// True if some member's newest superblock records `member` as faulty.
    /// A member I/O to or from the request's stripe buffer.
    /// With a bitmap, a request's write must not reach a member before the bits of every
    /// region it dirties are on that member (`write_intent.rs`): a crash then would skip those
    /// regions' resync.
    fn check_intent(&self, rq: usize, io: &MemberIo<SegmentRef>, disk: &MemDisk) {
        // The regions now (a resize may have made them coarser).
        let Some((regions, _)) = self.bitmap() else {
            return;
        };
        // After a power cut nothing lands, the bits' blocks neither.
        if !matches!(io.info.op, Op::Write | Op::Discard) || self.power_cut() {
            return;
        }
        // Members in sync only: a replacement's device gets the bitmap when it takes the role,
        // and a member being rebuilt gets it whole as it joins (writes already reach it by
        // then); its bits are not read at assembly until it is in sync, long after.
        let in_sync = self
            .engine
            .members()
            .get(io.info.member as usize)
            .is_some_and(|m| m.is_in_sync());
        if !in_sync {
            return;
        }
        let spec = self.slot(rq).spec.lock().unwrap().clone();
        // The rows of the geometry that maps the request (while a reshape runs, its side's).
        let (geometry, _) = self.engine.map_of(&self.slot(rq).state);
        for region in regions.of_write(&geometry, spec.start, spec.sectors) {
            if !disk.bitmap_bit(region) {
                self.violations.report(format!(
                    "a write reached a member before its region {region}'s bit: {io:?}"
                ));
            }
        }
    }

    /// A request's write must not reach a member of a redundant array while the member's
    /// last superblock says "clean" (`safe_mode.rs`): a crash then would skip the resync.
    fn check_dirty(&self, io: &MemberIo<SegmentRef>, disk: &MemDisk) {
        let g = self.engine.geometry();
        if !io.info.op.is_write()
            || (g.copies() <= 1 && !g.level().has_parity())
            || self.power_cut()
        {
            return;
        }
        // Only the superblock of the device now in the role counts: a device being added
        // takes writes before its first superblock as a member (its old one, a spare's or, in
        // this harness, the replaced device's, is not trusted at assembly).
        let slot = self
            .engine
            .members()
            .get(io.info.member as usize)
            .map(|m| m.slot());
        let newest = disk.superblocks.lock().unwrap().last().copied();
        if newest.is_some_and(|sb| sb.clean && Some(sb.this_slot) == slot) {
            self.violations.report(format!(
                "a write reached a member whose superblock says clean: {io:?}"
            ));
        }
    }

    fn execute_buffer(
        &self,
        rq: usize,
        io: &MemberIo<SegmentRef>,
        disk: &MemDisk,
        rng: &mut StdRng,
        column: u32,
        offset: u64,
    ) -> Status {
        self.check_marks(rq, io, disk);
        let (op, first, len) = (io.info.op, io.member_sector, io.info.sectors);
        let mut buffer = self.slot(rq).buffer.lock().unwrap();
        let Some(col) = buffer.get_mut(column as usize) else {
            self.violations
                .report(format!("I/O to a column never allocated: {io:?}"));
            return Status::IoError;
        };
        let range = offset as usize..(offset + len) as usize;
        if range.end > col.len() {
            self.violations.report(format!(
                "I/O beyond its buffer column ({}): {io:?}",
                col.len()
            ));
            return Status::IoError;
        }
        let read_fails = op == Op::Read
            && (disk.any_bad(first, len)
                || (disk.faults.read_error_ppm > 0
                    && rng.random_range(0..1_000_000) < disk.faults.read_error_ppm));
        let fails = disk.next_io_fails(rng)
            || read_fails
            || (op == Op::Write && disk.write_hits_stuck(first, len));
        let done = match (fails, op) {
            (false, _) => len,
            (true, Op::Read) => 0,
            (true, _) => rng.random_range(0..=len),
        };
        if op == Op::Write && !fails {
            // (Rot comes at the request's end: `rot`.)
            disk.written(first, len, false, rng);
        }
        let mut sectors = disk.sectors.lock().unwrap();
        let member_range = first as usize..(first + done) as usize;
        match op {
            Op::Read if fails => col[range].fill(GARBAGE),
            Op::Read => col[range].copy_from_slice(&sectors[member_range]),
            Op::Write if !self.lands() => {}
            Op::Write => {
                let n = done as usize;
                let data = &col[range.start..range.start + n];
                let fua = io.fua || self.slot(rq).spec.lock().unwrap().fua;
                disk.store(
                    &mut sectors,
                    member_range.start,
                    data,
                    self.volatile_cache,
                    fua,
                );
            }
            _ => {
                self.violations
                    .report(format!("{op:?} on a stripe buffer: {io:?}"));
                return Status::IoError;
            }
        }
        if fails {
            Status::IoError
        } else {
            Status::Ok
        }
    }

    /// A partial parity log write: header and payload land together or not at all (a torn
    /// one fails its checksum at replay, as if never written).
    /// What log write `io` of `rq` writes: its payload's tags and its header; `None` (a
    /// violation reported) if it cannot be written.
    fn log_write(&self, rq: usize, io: &LogIo) -> Option<(Vec<u64>, Box<[u8; PPL_BLOCK_BYTES]>)> {
        let Some(area) = self.engine.log().area() else {
            self.violations
                .report(format!("request {rq}: a log write without a log"));
            return None;
        };
        let end = io.sector + PPL_BLOCK_SECTORS + io.sectors.div_ceil(8) * 8;
        if io.sector < area.ring_sector(0) || end > area.ring_sector(area.ring_sectors) {
            self.violations.report(format!(
                "request {rq}: a log write outside the ring: {}+{}",
                io.sector, io.sectors
            ));
            return None;
        }
        let buffer = self.slot(rq).buffer.lock().unwrap();
        let payload = buffer
            .get(io.column as usize)
            .and_then(|c| c.get(..io.sectors as usize));
        let Some(payload) = payload.or((io.sectors == 0).then_some(&[][..])) else {
            self.violations.report(format!(
                "request {rq}: a log payload from a missing column {}",
                io.column
            ));
            return None;
        };
        let header = self
            .slot(rq)
            .log_headers
            .lock()
            .unwrap()
            .get(io.header as usize)
            .cloned();
        let Some(header) = header else {
            self.violations
                .report(format!("request {rq}: log header {} never set", io.header));
            return None;
        };
        // What the engine writes, the replay must take back (an entry it refuses is lost).
        if let Err(e) = decode_entry(&self.engine.log_id(), &header) {
            self.violations.report(format!(
                "request {rq}: a log header the replay refuses ({e:?}): {io:?}"
            ));
        }
        Some((payload.to_vec(), header))
    }

    /// Writes one log entry with its own header.
    fn execute_log(&self, rq: usize, io: &LogIo) -> Status {
        let Some((payload, header)) = self.log_write(rq, io) else {
            return Status::IoError;
        };
        let disk = &self.disks[io.member as usize];
        if disk.next_io_fails(&mut self.rng.lock().unwrap()) {
            return Status::IoError;
        }
        if self.lands() {
            let mut sectors = disk.sectors.lock().unwrap();
            let at = (io.sector + PPL_BLOCK_SECTORS) as usize;
            disk.store(&mut sectors, at, &payload, self.volatile_cache, true);
            disk.log_blocks.lock().unwrap().insert(io.sector, header);
        }
        Status::Ok
    }

    /// Writes `run`, entries back to back in `member`'s ring, as one write: a group block in
    /// the first one's header block, their payloads back to back after it. It lands whole or
    /// not at all, as a single entry's write does here (graid-engine's tests tear one).
    fn execute_group(&self, member: u32, run: &[WaitingLog]) -> Status {
        let Some(((_, first, _, header), rest)) = run.split_first() else {
            return Status::Ok;
        };
        let id = self.engine.log_id();
        let mut block = header.clone();
        start_group(&id, &mut block);
        for (_, _, _, header) in rest {
            if !add_to_group(&mut block, header) {
                self.violations
                    .report(format!("a group of {} entries overflowed", run.len()));
            }
        }
        // The replay must take back every entry of the group.
        let group = decode_group(&id, &block);
        let whole = group
            .as_ref()
            .is_ok_and(|g| g.len() == run.len() && (0..g.len()).all(|i| g.entry(&id, i).is_ok()));
        if !whole {
            self.violations.report(format!(
                "a group of {} entries the replay refuses: {:?}",
                run.len(),
                group.err()
            ));
        }
        let disk = &self.disks[member as usize];
        if disk.next_io_fails(&mut self.rng.lock().unwrap()) {
            return Status::IoError;
        }
        self.stripe.log_groups.fetch_add(1, Ordering::Relaxed);
        self.stripe
            .log_grouped
            .fetch_add(run.len() as u64, Ordering::Relaxed);
        if !self.lands() {
            return Status::Ok;
        }
        let mut sectors = disk.sectors.lock().unwrap();
        let mut at = first.sector + PPL_BLOCK_SECTORS;
        for (_, io, payload, _) in run {
            disk.store(
                &mut sectors,
                at as usize,
                payload,
                self.volatile_cache,
                true,
            );
            at += io.sectors.div_ceil(PPL_BLOCK_SECTORS) * PPL_BLOCK_SECTORS;
        }
        disk.log_blocks.lock().unwrap().insert(first.sector, block);
        Status::Ok
    }

    /// Sends `member`'s waiting log writes as its next batch, unless one is in flight: as a
    /// stripe task, so that what other requests log meanwhile waits for it and goes with
    /// the next one, as in the kernel, where the batch is a bio that completes later.
    fn start_log_batch(&self, member: u32) {
        let bit = 1u64 << member;
        let waiting = self
            .stripe
            .log_waiting
            .lock()
            .unwrap()
            .get(&member)
            .is_some_and(|w| !w.is_empty());
        if !waiting || self.stripe.log_busy.fetch_or(bit, Ordering::SeqCst) & bit != 0 {
            return;
        }
        let queued = self
            .stripe
            .queue
            .lock()
            .unwrap()
            .as_ref()
            .is_some_and(|q| q.send(StripeTask::LogSend(member)).is_ok());
        if !queued {
            self.send_log_batch(member);
        }
    }

    /// The batch of `member`'s log writes (a stripe task): the waiting entries that lie back
    /// to back in the ring go as one write each run (a group of up to
    /// `MAX_GROUP_ENTRIES`, never across the ring's middle: [`LogRun`]), the others alone;
    /// then the next batch, if entries came.
    pub fn send_log_batch(&self, member: u32) {
        let batch = self
            .stripe
            .log_waiting
            .lock()
            .unwrap()
            .get_mut(&member)
            .map(std::mem::take)
            .unwrap_or_default();
        let area = self.engine.log().area().expect("log writes without a log");
        let mut rest = &batch[..];
        while let Some((_, first, _, _)) = rest.first() {
            // The engine's rule, as the kernel's batcher follows it.
            let mut run = LogRun::start(&area, first.sector, first.sectors);
            let len = 1 + rest[1..]
                .iter()
                .take_while(|(_, io, _, _)| run.join(io.sector, io.sectors))
                .count();
            let (run, after) = rest.split_at(len);
            let half = area.ring_sector(area.half_sectors());
            let end = run.last().map_or(0, |(_, io, _, _)| {
                io.sector + PPL_BLOCK_SECTORS + io.sectors.div_ceil(8) * 8
            });
            if first.sector < half && end > half {
                self.violations.report(format!(
                    "a log run from {} to {end} crosses the ring's middle at {half}",
                    first.sector
                ));
            }
            let status = match run {
                [(rq, io, _, _)] => self.execute_log(*rq, io),
                _ => self.execute_group(member, run),
            };
            for (rq, io, _, _) in run {
                self.log_done(*rq, io, status);
            }
            rest = after;
        }
        self.stripe
            .log_busy
            .fetch_and(!(1u64 << member), Ordering::SeqCst);
        self.start_log_batch(member);
    }

    /// The oldest request waiting for a stripe buffer, taken as the kernel's list gives it: a
    /// take while another is under way finds nothing (counted when requests waited).
    fn take_buffer_waiter(&self) -> Option<usize> {
        let list = &self.stripe;
        if list.buffer_wait_taking.swap(true, Ordering::SeqCst) {
            if !list.buffer_wait.lock().unwrap().is_empty() {
                list.buffer_wakes_lost.fetch_add(1, Ordering::Relaxed);
            }
            return None;
        }
        let taken = pop_front(&mut list.buffer_wait.lock().unwrap());
        // The kernel walks the list to its oldest and puts the rest back meanwhile.
        std::thread::yield_now();
        list.buffer_wait_taking.store(false, Ordering::SeqCst);
        taken
    }

    /// Log write `io` of `rq` ended with `status`.
    fn log_done(&self, rq: usize, io: &LogIo, status: Status) {
        let info = PieceInfo {
            op: Op::Write,
            member: io.member,
            sectors: io.sectors,
        };
        if status == Status::Ok {
            self.slot(rq)
                .written
                .fetch_or(1 << io.member, Ordering::Relaxed);
        }
        self.engine.piece_done(self, rq, info, status);
    }

    /// Runs a parity job on the request's buffer with md's math, byte by byte over each
    /// sector's 8-byte tag.
    fn parity(&self, rq: usize, job: &ParityJob) -> bool {
        let mut buffer = self.slot(rq).buffer.lock().unwrap();
        self.parity_on(&mut buffer, job)
    }

    /// What the request helper ([`StripeHome::request_helper`]) makes of generation `job` of
    /// `rq`, whose right parity is in its buffer already. Under the helper's lock, so a
    /// result either precedes its catch or is not used, as in the kernel.
    fn request_helper_answer(&self, rq: usize, job: &ParityJob) {
        let mut helper = self.stripe.request_helper.lock().unwrap();
        let Some((right, every)) = *helper else {
            return;
        };
        if self.engine.parity_must_be_checked() {
            return;
        }
        let n = self
            .stripe
            .request_helper_jobs
            .fetch_add(1, Ordering::Relaxed);
        let lies = n >= right;
        if n % every.max(1) == 0 {
            if lies {
                *helper = None;
                self.stripe
                    .request_helper_caught
                    .fetch_add(1, Ordering::SeqCst);
                self.kick_worker();
            }
            return;
        }
        self.engine.parity_unchecked(self, rq);
        if lies {
            helper_lie(&mut self.slot(rq).buffer.lock().unwrap(), job);
        }
    }

    /// Computes `job` on `buffer` (a request's stripe buffer, or the rebuild's).
    fn parity_on(&self, buffer: &mut Vec<Vec<u64>>, job: &ParityJob) -> bool {
        if matches!(job.op, ParityOp::Update { .. }) {
            if job.stripe_count() != 1 || (self.stripe.no_raid6_update && job.map.parity() == 2) {
                return false;
            }
            self.stripe.update_jobs.fetch_add(1, Ordering::Relaxed);
        }
        job.stripes().all(|(map, from, to)| {
            self.parity_stripe(buffer, job.op, map, from as usize, (to - from) as usize)
        })
    }

    /// One stripe of a parity job: `len` sectors from column offset `off`.
    fn parity_stripe(
        &self,
        buffer: &mut Vec<Vec<u64>>,
        op: ParityOp,
        map: StripeMap,
        off: usize,
        len: usize,
    ) -> bool {
        let n = map.members();
        let mutation = self.stripe.mutation;
        let coefficient = |member: u32| -> u8 {
            let slot = map.syndrome_slot(member).unwrap_or(0) as usize;
            match mutation {
                Some(Mutation::WrongQCoefficient) => gf::pow2(slot + 1),
                _ => gf::pow2(slot),
            }
        };
        let column = |buffer: &Vec<Vec<u64>>, c: u32| -> Option<Vec<u64>> {
            buffer
                .get(c as usize)
                .filter(|v| v.len() >= off + len)
                .map(|v| v[off..off + len].to_vec())
        };
        let data_members: Vec<u32> = (0..n)
            .filter(|&m| matches!(map.role(m), Role::Data(_)))
            .collect();
        // P and Q of the given data columns (members in `data_members` order).
        let syndrome = |cols: &[(u32, Vec<u64>)]| -> (Vec<u64>, Vec<u64>) {
            let mut p = vec![0u64; len];
            let mut q = vec![0u64; len];
            for (m, col) in cols {
                let g = coefficient(*m);
                for i in 0..len {
                    p[i] ^= col[i];
                    q[i] ^= mul64(g, col[i]);
                }
            }
            (p, q)
        };
        let store = |buffer: &mut Vec<Vec<u64>>, c: u32, v: Vec<u64>| -> bool {
            match buffer.get_mut(c as usize) {
                Some(col) if col.len() >= off + len => {
                    col[off..off + len].copy_from_slice(&v);
                    true
                }
                _ => false,
            }
        };
        match op {
            ParityOp::Generate => {
                let mut cols = Vec::new();
                for &m in &data_members {
                    let Some(c) = column(buffer, m) else {
                        return false;
                    };
                    cols.push((m, c));
                }
                let (p, q) = syndrome(&cols);
                if mutation == Some(Mutation::SkipParityUpdate) {
                    return true;
                }
                let mut ok = store(buffer, map.p(), p);
                if let Some(qm) = map.q() {
                    ok &= store(buffer, qm, q);
                }
                ok
            }
            ParityOp::Update { changed } => {
                let mut delta = Vec::new();
                for m in changed.iter() {
                    let (Some(old), Some(new)) = (column(buffer, m), column(buffer, n + m)) else {
                        return false;
                    };
                    delta.push((m, old.iter().zip(&new).map(|(a, b)| a ^ b).collect()));
                }
                let (dp, dq) = syndrome(&delta);
                if mutation == Some(Mutation::SkipParityUpdate) {
                    return true;
                }
                let Some(mut p) = column(buffer, map.p()) else {
                    return false;
                };
                p.iter_mut().zip(&dp).for_each(|(x, d)| *x ^= d);
                let mut ok = store(buffer, map.p(), p);
                if let Some(qm) = map.q() {
                    let Some(mut q) = column(buffer, qm) else {
                        return false;
                    };
                    q.iter_mut().zip(&dq).for_each(|(x, d)| *x ^= d);
                    ok &= store(buffer, qm, q);
                }
                ok
            }
            ParityOp::Recover { lost } => {
                let how = map.recovery(lost);
                if matches!(how, Recovery::RegenerateQ | Recovery::RegeneratePq) {
                    return self.parity_stripe(buffer, ParityOp::Generate, map, off, len);
                }
                Self::recover(buffer, map, how, (off, len), &data_members)
            }
        }
    }

    /// Rebuilds lost columns by solving P and Q for them (any 1 or 2 unknowns).
    fn recover(
        buffer: &mut [Vec<u64>],
        map: StripeMap,
        how: Recovery,
        (off, len): (usize, usize),
        data_members: &[u32],
    ) -> bool {
        let lost_data: Vec<u32> = match how {
            Recovery::Intact | Recovery::RegenerateQ | Recovery::RegeneratePq => Vec::new(),
            Recovery::Xor { lost } if lost == map.p() => Vec::new(),
            Recovery::Xor { lost } => vec![lost],
            Recovery::DataAndQ { data } | Recovery::DataAndP { data } => vec![data],
            Recovery::TwoData { a, b } => vec![a, b],
            Recovery::Lost => return false,
        };
        let use_q = matches!(how, Recovery::DataAndP { .. } | Recovery::TwoData { .. });
        let g = |m: u32| gf::pow2(map.syndrome_slot(m).unwrap_or(0) as usize);
        let get = |buffer: &[Vec<u64>], c: u32| {
            buffer
                .get(c as usize)
                .and_then(|v| v.get(off..off + len))
                .map(<[u64]>::to_vec)
        };
        // Partial syndromes of the surviving data.
        let mut p = if matches!(how, Recovery::DataAndP { .. }) {
            vec![0; len]
        } else {
            match get(buffer, map.p()) {
                Some(v) => v,
                None => return false,
            }
        };
        let mut q = if use_q {
            match map.q().and_then(|qm| get(buffer, qm)) {
                Some(v) => v,
                None => return false,
            }
        } else {
            vec![0; len]
        };
        for &m in data_members.iter().filter(|m| !lost_data.contains(m)) {
            let Some(col) = get(buffer, m) else {
                return false;
            };
            for i in 0..len {
                p[i] ^= col[i];
                q[i] ^= mul64(g(m), col[i]);
            }
        }
        let put = |buffer: &mut [Vec<u64>], c: u32, v: Vec<u64>| {
            if let Some(col) = buffer.get_mut(c as usize) {
                if col.len() >= off + len {
                    col[off..off + len].copy_from_slice(&v);
                }
            }
        };
        match lost_data.as_slice() {
            [] => {}
            [d] if !use_q => put(buffer, *d, p.clone()),
            [d] => {
                // Q' = g^d · D  →  D = Q' · g^-d
                let inv = gf::inv(g(*d));
                put(buffer, *d, q.iter().map(|&x| mul64(inv, x)).collect());
            }
            [a, b] => {
                // P' = A ^ B, Q' = ga·A ^ gb·B  →  B = (Q' ^ ga·P') / (ga ^ gb)
                let (ga, gb) = (g(*a), g(*b));
                let inv = gf::inv(ga ^ gb);
                let bv: Vec<u64> = (0..len)
                    .map(|i| mul64(inv, q[i] ^ mul64(ga, p[i])))
                    .collect();
                let av: Vec<u64> = (0..len).map(|i| p[i] ^ bv[i]).collect();
                put(buffer, *a, av);
                put(buffer, *b, bv);
            }
            _ => return false,
        }
        true
    }

    /// The rebuild buffer, as the kernel allocates it: `members + 2` columns (those never
    /// read hold garbage).
    fn rebuild_buffer(&self) -> std::sync::MutexGuard<'_, Vec<Vec<u64>>> {
        let mut buffer = self.rebuild_buffer.lock().unwrap();
        let columns = self.disks.len() + 2;
        if buffer.len() < columns {
            buffer.resize(columns, vec![GARBAGE; REBUILD_COLUMN_SECTORS as usize]);
        }
        buffer
    }

    /// Some superblock says member `member` is out of use: its slot faulty (the sim keeps
    /// role r in slot r), or no device in the role (one a mirror's grow added).
    pub fn recorded_faulty(&self, member: u32) -> bool {
        self.disks.iter().any(|d| {
            d.newest_superblock().is_some_and(|sb| {
                sb.slots[member as usize] == Slot::Faulty
                    || member < sb.members && sb.slot_of_role(member).is_none()
            })
        })
    }

    /// A write or flush ended well: every member it should have reached and did not must be
    /// failed in the superblocks already (no write acknowledged before the failure it depends
    /// on is durable). Discards leave undefined data and are not checked.
    fn check_durable(&self, rq: usize, spec: &Spec) {
        let (geometry, _) = self.engine.map_of(&self.slot(rq).state);
        let expected = match spec.op {
            Some(Op::Flush) => (0..geometry.members()).fold(0u32, |m, i| m | 1 << i),
            Some(Op::Write) => geometry
                .map_write(spec.start, spec.sectors)
                .map(|pieces| pieces.fold(0u32, |m, p| m | 1 << p.member))
                .unwrap_or(0),
            _ => return,
        };
        // A RAID 5/6 write also reaches the parity of every stripe it touches.
        let expected = match spec.op {
            Some(Op::Write) if geometry.level().has_parity() && spec.sectors > 0 => {
                let last = geometry.stripe_of(spec.start + spec.sectors - 1);
                (geometry.stripe_of(spec.start)..=last)
                    .filter_map(|s| geometry.stripe_map(s))
                    .fold(expected, |e, map| e | map.parity_set().bits())
            }
            _ => expected,
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

    /// The member sectors the array's data areas span now: a reshape's two, or the one.
    pub fn data_span(&self) -> (u64, u64) {
        let engine = &self.engine;
        let len = engine.geometry().member_data_sectors();
        let mut offsets = vec![engine.data_offset()];
        if let Some(r) = engine.reshape_progress() {
            offsets.push(r.plan.geometry(PlanSide::Old).1);
            offsets.push(r.plan.geometry(PlanSide::New).1);
        }
        let lo = offsets.iter().copied().min().unwrap_or(DATA_OFFSET);
        let hi = offsets.iter().copied().max().unwrap_or(DATA_OFFSET);
        (lo, hi + len)
    }

    /// Runs the worker until `stop` is set.
    pub fn worker_loop(&self, stop: &AtomicBool) {
        loop {
            {
                let mut pending = self.kick.pending.lock().unwrap();
                while !*pending && !stop.load(Ordering::Acquire) {
                    let due = *self.kick.timer.lock().unwrap();
                    match due {
                        Some(at) if at <= Instant::now() => {
                            *self.kick.timer.lock().unwrap() = None;
                            *pending = true;
                        }
                        Some(at) => {
                            let wait = at.saturating_duration_since(Instant::now());
                            pending = self.kick.wake.wait_timeout(pending, wait).unwrap().0;
                        }
                        None => pending = self.kick.wake.wait(pending).unwrap(),
                    }
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

impl Requests for Host {
    type Request = usize;
    type Segment = SegmentRef;

    fn state(&self, rq: usize) -> &RequestState {
        &self.slot(rq).state
    }

    fn carried(&self, follower: usize, adopter: usize) {
        // Its durability is the adopter's member writes (`check_durable`).
        let written = self.slot(adopter).written.load(Ordering::Relaxed);
        self.slot(follower)
            .written
            .fetch_or(written, Ordering::Relaxed);
    }

    fn fua(&self, rq: usize) -> bool {
        self.slot(rq).spec.lock().unwrap().fua
    }

    fn segments(&self, rq: usize) -> impl Iterator<Item = (SegmentRef, u64, u64)> {
        let spec = self.slot(rq).spec.lock().unwrap();
        let list: Vec<_> = spec
            .segments
            .iter()
            .enumerate()
            .map(|(index, &(start, len))| (SegmentRef { rq, index }, start, len))
            .collect();
        list.into_iter()
    }

    fn submit(&self, rq: usize, io: &MemberIo<SegmentRef>) -> Result<(), SubmitError> {
        if let Source::Buffer { .. } = io.source {
            // A stripe I/O stays in the stripes the request touches.
            let (g, data_offset) = self.engine.map_of(&self.slot(rq).state);
            let spec = self.slot(rq).spec.lock().unwrap().clone();
            let chunk = u64::from(g.chunk_sectors());
            let first = data_offset + g.stripe_of(spec.start) * chunk;
            let end = data_offset + (g.stripe_of(spec.start + spec.sectors.max(1) - 1) + 1) * chunk;
            if io.member_sector < first || io.member_sector + io.info.sectors > end {
                self.violations.report(format!(
                    "request {rq} ({spec:?}, phase {:?}) sent I/O outside its stripes: {io:?}",
                    self.slot(rq).state.phase()
                ));
            }
        }
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
        self.slot(rq).outstanding.fetch_add(1, Ordering::AcqRel);
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
        if slot.state.pending() != 0 || slot.outstanding.load(Ordering::Acquire) != 0 {
            self.violations.report(format!(
                "request {rq} ({:?}, {status:?}, phase {:?}, {} outstanding) ended with member I/O in flight\n{}",
                slot.spec.lock().unwrap(),
                slot.state.phase(),
                slot.outstanding.load(Ordering::Acquire),
                std::backtrace::Backtrace::force_capture()
            ));
        }
        let spec = slot.spec.lock().unwrap().clone();
        if status == Status::Ok {
            self.check_durable(rq, &spec);
            self.rot(&spec);
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
            WorkList::StripeWait(slot) => self
                .stripe
                .waits
                .lock()
                .unwrap()
                .entry(slot)
                .or_default()
                .push(rq),
            WorkList::Adopted(slot) => self
                .stripe
                .adopted
                .lock()
                .unwrap()
                .entry(slot)
                .or_default()
                .push(rq),
            WorkList::BufferWait => {
                self.stripe.buffer_waits.fetch_add(1, Ordering::Relaxed);
                self.stripe.buffer_wait.lock().unwrap().push(rq)
            }
            WorkList::LogWait => self.stripe.log_wait.lock().unwrap().push(rq),
        }
    }

    fn take_all(&self, list: WorkList, mut f: impl FnMut(usize)) {
        let taken = match list {
            WorkList::Deferred => std::mem::take(&mut *self.deferred.lock().unwrap()),
            WorkList::Parked => std::mem::take(&mut *self.parked.lock().unwrap()),
            WorkList::StripeWait(slot) => self
                .stripe
                .waits
                .lock()
                .unwrap()
                .remove(&slot)
                .unwrap_or_default(),
            WorkList::Adopted(slot) => self
                .stripe
                .adopted
                .lock()
                .unwrap()
                .remove(&slot)
                .unwrap_or_default(),
            WorkList::BufferWait => std::mem::take(&mut *self.stripe.buffer_wait.lock().unwrap()),
            WorkList::LogWait => std::mem::take(&mut *self.stripe.log_wait.lock().unwrap()),
        };
        for rq in taken {
            f(rq);
        }
    }

    fn take_oldest(&self, list: WorkList) -> Option<usize> {
        match list {
            WorkList::Deferred => pop_front(&mut self.deferred.lock().unwrap()),
            WorkList::Parked => pop_front(&mut self.parked.lock().unwrap()),
            WorkList::StripeWait(slot) => {
                pop_front(self.stripe.waits.lock().unwrap().get_mut(&slot)?)
            }
            WorkList::Adopted(slot) => {
                pop_front(self.stripe.adopted.lock().unwrap().get_mut(&slot)?)
            }
            WorkList::BufferWait => self.take_buffer_waiter(),
            WorkList::LogWait => pop_front(&mut self.stripe.log_wait.lock().unwrap()),
        }
    }

    fn kick_worker(&self) {
        *self.kick.pending.lock().unwrap() = true;
        self.kick.wake.notify_one();
    }

    fn kick_worker_after(&self, ms: u32) {
        let at = Instant::now() + Duration::from_millis(u64::from(ms));
        {
            let mut timer = self.kick.timer.lock().unwrap();
            if timer.is_none_or(|t| at < t) {
                *timer = Some(at);
            }
        }
        // The worker recomputes its wait.
        let _guard = self.kick.pending.lock().unwrap();
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
}

impl Metadata for Host {
    fn bitmap(&self) -> Option<(Regions, &[RegionState])> {
        let (regions, states) = self.bitmap.as_ref()?;
        let regions = self.resized_bitmap.lock().unwrap().unwrap_or(*regions);
        Some((regions, states.get(..regions.count() as usize)?))
    }

    fn resize_bitmap(&self, regions: Regions) -> bool {
        let (Some((now, _)), Some((_, kept))) = (self.bitmap(), self.bitmap.as_ref()) else {
            return false;
        };
        if !regions.can_follow(&now, kept.len()) {
            return false;
        }
        reset_after_resize(kept, &now, &regions);
        *self.resized_bitmap.lock().unwrap() = Some(regions);
        true
    }

    fn write_bitmap_block(
        &self,
        targets: MemberSet,
        block: u64,
        preflush: bool,
        fill: &dyn Fn(&mut [u8; BLOCK_BYTES]),
    ) -> MemberSet {
        let mut data = Box::new([0u8; BLOCK_BYTES]);
        fill(&mut data);
        self.bitmap_writes.fetch_add(1, Ordering::Relaxed);
        self.write_metadata(targets, preflush, |_, disk| {
            disk.bitmap_blocks
                .lock()
                .unwrap()
                .insert(block, data.clone());
        })
    }

    fn flush_members(&self, targets: MemberSet) -> MemberSet {
        let mut failed = MemberSet::EMPTY;
        for member in targets.iter() {
            let Some(disk) = self.disks.get(member as usize) else {
                failed = failed.with(member);
                continue;
            };
            disk.flush_attempts.fetch_add(1, Ordering::Relaxed);
            if disk.dead.load(Ordering::Relaxed) {
                failed = failed.with(member);
                continue;
            }
            disk.flushes.fetch_add(1, Ordering::Relaxed);
            if !self.power_cut() {
                disk.flush_cache();
            }
        }
        failed
    }

    fn write_superblocks(&self, targets: MemberSet, copy: impl Fn(u32) -> Superblock) -> MemberSet {
        self.write_metadata(targets, true, |member, disk| {
            disk.superblocks.lock().unwrap().push(copy(member))
        })
    }

    fn write_spare_superblock(&self, slot: u32, sb: &Superblock) -> bool {
        self.spare_superblocks.lock().unwrap().push((slot, *sb));
        // On the spare's device too, the disk past the members' (the sim's one spare): a
        // start after a cut finds it there, as the module finds a spare's superblock (a
        // reshape that made it a member and whose update it missed).
        if let Some(disk) = self.disks.last() {
            if self.lands() {
                disk.superblocks.lock().unwrap().push(*sb);
            }
        }
        true
    }

    fn write_log_head(
        &self,
        targets: MemberSet,
        sector: u64,
        fill: &dyn Fn(&mut [u8; PPL_BLOCK_BYTES]),
    ) -> MemberSet {
        let mut data = Box::new([0u8; PPL_BLOCK_BYTES]);
        fill(&mut data);
        // FUA only: the engine flushed every member just before (`write_heads`).
        self.write_metadata(targets, false, |_, disk| {
            disk.log_blocks.lock().unwrap().insert(sector, data.clone());
        })
    }
}

impl Events for Host {
    fn cpu(&self) -> u32 {
        // A per-thread number stands for the CPU.
        thread_local!(static ID: u32 = NEXT_THREAD.fetch_add(1, Ordering::Relaxed));
        ID.with(|id| *id)
    }

    fn takeover_wanted(&self) {
        self.takeovers_wanted.fetch_add(1, Ordering::SeqCst);
    }

    fn member_event(&self, member: u32, event: MemberEvent) {
        self.events.lock().unwrap().push((member, event));
    }

    fn now_ns(&self) -> u64 {
        static EPOCH: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
        let epoch = EPOCH.get_or_init(std::time::Instant::now);
        u64::try_from(epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    fn sleep_ms(&self, ms: u32) {
        self.rebuild_sleeps.fetch_add(1, Ordering::Relaxed);
        std::thread::sleep(Duration::from_millis(u64::from(ms)));
    }

    fn helper_wrong(&self, helper: u64) {
        assert_eq!(helper, 1, "a helper the host never had");
        *self.stripe.helper.lock().unwrap() = None;
        self.stripe.helper_caught.fetch_add(1, Ordering::SeqCst);
    }

    fn helper_catches(&self) -> u64 {
        self.stripe.helper_caught.load(Ordering::SeqCst)
            + self.stripe.request_helper_caught.load(Ordering::SeqCst)
    }

    fn heal_started(&self, regions: u64) {
        self.heals.lock().unwrap().push(regions);
        let after = self.cut_after_heal_starts.load(Ordering::SeqCst);
        if after != u64::MAX {
            let at = self.writes.load(Ordering::SeqCst).saturating_add(after);
            self.cut_after.store(at, Ordering::SeqCst);
        }
    }
}

impl RebuildBuffer for Host {
    fn rebuild_io(
        &self,
        op: Op,
        member: u32,
        sector: u64,
        column: u32,
        offset: u64,
        sectors: u64,
    ) -> Result<(), RebuildIoError> {
        let Some(disk) = self.disks.get(member as usize) else {
            self.violations
                .report(format!("rebuild I/O on unknown member {member}"));
            return Err(RebuildIoError);
        };
        let log = self.engine.log().area();
        let in_log = log.is_some_and(|a| {
            op == Op::Read
                && sector >= a.offset
                && sector + sectors <= a.ring_sector(a.ring_sectors)
        });
        let (data_start, data_end) = self.data_span();
        let in_data = in_log || sector >= data_start && sector + sectors <= data_end;
        let in_buffer =
            column as usize <= self.disks.len() + 1 && offset + sectors <= REBUILD_COLUMN_SECTORS;
        if !in_data || !in_buffer || sectors == 0 {
            self.violations.report(format!(
                "rebuild {op:?} of {sectors} sectors at {sector} of member {member}, column \
                 {column} +{offset}: outside its data area or the buffer"
            ));
            return Err(RebuildIoError);
        }
        let (from, to) = (sector as usize, (sector + sectors) as usize);
        let done = disk.rebuild_ios.fetch_add(1, Ordering::Relaxed);
        if disk.faults.die_after_rebuild_ios.is_some_and(|n| done >= n) {
            disk.dead.store(true, Ordering::Relaxed);
        }
        let fails = disk.next_io_fails(&mut self.rng.lock().unwrap());
        let mut buffer = self.rebuild_buffer();
        let col = &mut buffer[column as usize][offset as usize..(offset + sectors) as usize];
        match op {
            Op::Read if fails || disk.any_bad(sector, sectors) => {
                col.fill(GARBAGE);
                Err(RebuildIoError)
            }
            Op::Read => {
                col.copy_from_slice(&disk.sectors.lock().unwrap()[from..to]);
                // A device takes time: room for a write racing the rebuild to land between
                // its read and its write (the window must hold it off).
                drop(buffer);
                std::thread::sleep(Duration::from_micros(100));
                Ok(())
            }
            Op::Write if fails || disk.write_hits_stuck(sector, sectors) => Err(RebuildIoError),
            Op::Write if !self.lands() => Ok(()),
            Op::Write => {
                disk.written(sector, sectors, false, &mut self.rng.lock().unwrap());
                let mut data = disk.sectors.lock().unwrap();
                disk.store(&mut data, from, col, self.volatile_cache, false);
                let _ = to;
                self.rebuild_copies.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            _ => {
                self.violations.report(format!("rebuild {op:?}"));
                Err(RebuildIoError)
            }
        }
    }

    fn rebuild_accumulate(&self, from: u32, to: u32, coef: u8, offset: u64, sectors: u64) {
        let mut buffer = self.rebuild_buffer();
        accumulate(&mut buffer, from, to, coef, offset, sectors);
    }

    fn rebuild_copy(&self, from: u32, to: u32, offset: u64, sectors: u64) {
        let mut buffer = self.rebuild_buffer();
        let range = offset as usize..(offset + sectors) as usize;
        let data = buffer[from as usize][range.clone()].to_vec();
        buffer[to as usize][range].copy_from_slice(&data);
    }

    fn rebuild_differ(&self, a: u32, b: u32, offset: u64, sectors: u64) -> u64 {
        let buffer = self.rebuild_buffer();
        let range = offset as usize..(offset + sectors) as usize;
        buffer[a as usize][range.clone()]
            .iter()
            .zip(&buffer[b as usize][range])
            .filter(|(x, y)| x != y)
            .count() as u64
    }

    fn rebuild_compute(&self, job: &ParityJob, offload: bool) -> Option<Computed> {
        let mut buffer = self.rebuild_buffer();
        let helper = if offload {
            *self.stripe.helper.lock().unwrap()
        } else {
            None
        };
        if let Some(right) = helper {
            // What a helper writes: only the columns the job computes, the rest as it was.
            let mut theirs = buffer.clone();
            if !self.parity_on(&mut theirs, job) {
                self.violations
                    .report(format!("rebuild parity job on missing columns: {job:?}"));
                return None;
            }
            if self.stripe.helper_jobs.fetch_add(1, Ordering::Relaxed) >= right {
                helper_lie(&mut theirs, job);
            }
            for (map, from, to) in job.stripes() {
                for c in written_columns(job, &map) {
                    let range = from as usize..to as usize;
                    buffer[c as usize][range.clone()].copy_from_slice(&theirs[c as usize][range]);
                }
            }
            return Some(Computed::Helper(1));
        }
        let ok = self.parity_on(&mut buffer, job);
        if !ok {
            self.violations
                .report(format!("rebuild parity job on missing columns: {job:?}"));
        }
        ok.then_some(Computed::Here)
    }
}

impl StripeBuffers for Host {
    fn accumulate_column(
        &self,
        rq: usize,
        from: u32,
        to: u32,
        coef: u8,
        offset: u64,
        sectors: u64,
    ) {
        let mut buffer = self.slot(rq).buffer.lock().unwrap();
        if [from, to].iter().any(|&c| {
            buffer
                .get(c as usize)
                .is_none_or(|col| col.len() < (offset + sectors) as usize)
        }) {
            self.violations.report(format!(
                "request {rq}: accumulate on a missing column {from} -> {to}"
            ));
            return;
        }
        accumulate(&mut buffer, from, to, coef, offset, sectors);
    }

    fn column_crc(&self, rq: usize, column: u32, offset: u64, sectors: u64) -> u32 {
        let buffer = self.slot(rq).buffer.lock().unwrap();
        let Some(tags) = buffer
            .get(column as usize)
            .and_then(|c| c.get(offset as usize..(offset + sectors) as usize))
        else {
            self.violations
                .report(format!("request {rq}: CRC of a missing column {column}"));
            return 0;
        };
        tags_crc(tags)
    }

    fn set_log_header(&self, rq: usize, index: u32, fill: &dyn Fn(&mut [u8; PPL_BLOCK_BYTES])) {
        let mut header = Box::new([0u8; PPL_BLOCK_BYTES]);
        fill(&mut header);
        let mut headers = self.slot(rq).log_headers.lock().unwrap();
        if index >= LOG_HEADERS || self.slot(rq).buffer.lock().unwrap().is_empty() {
            self.violations
                .report(format!("request {rq}: log header {index} without a buffer"));
            return;
        }
        headers.resize(LOG_HEADERS as usize, Box::new([0; PPL_BLOCK_BYTES]));
        headers[index as usize] = header;
    }

    fn submit_log(&self, rq: usize, io: &LogIo) -> Result<(), SubmitError> {
        // A barrier (one header for several members) goes by itself, as in the kernel.
        if io.sectors == 0 {
            self.log_done(rq, io, self.execute_log(rq, io));
            return Ok(());
        }
        // The payload and header as they are now: the kernel's bio reads the request's buffer,
        // which nothing changes until the write completed.
        let Some((payload, header)) = self.log_write(rq, io) else {
            self.log_done(rq, io, Status::IoError);
            return Ok(());
        };
        self.stripe
            .log_waiting
            .lock()
            .unwrap()
            .entry(io.member)
            .or_default()
            .push((rq, *io, payload, header));
        self.start_log_batch(io.member);
        Ok(())
    }

    fn queue_stripe_work(&self, rq: usize) {
        if let Some(queue) = self.stripe.queue.lock().unwrap().as_ref() {
            queue
                .send(StripeTask::Work(rq))
                .expect("stripe threads are running");
        } else {
            self.violations.report(format!(
                "stripe work for request {rq} after the threads stopped"
            ));
        }
    }

    fn alloc_buffer(&self, rq: usize, columns: Columns, sectors: u64) -> bool {
        if sectors > SLICE_SECTORS {
            self.stripe.wide_asked.fetch_add(1, Ordering::Relaxed);
            let always = self.stripe.wide_always.load(Ordering::Relaxed);
            if !always && self.rng.lock().unwrap().random_bool(0.5) {
                return false;
            }
            self.stripe.wide_given.fetch_add(1, Ordering::Relaxed);
        }
        let max = self.stripe.max_buffers;
        let taken = self
            .stripe
            .buffers
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (max == 0 || n < max).then_some(n + 1)
            });
        if taken.is_err() {
            return false;
        }
        let mut buffer = self.slot(rq).buffer.lock().unwrap();
        if !buffer.is_empty() {
            self.violations
                .report(format!("request {rq} got a second stripe buffer"));
        }
        *buffer = (0..64)
            .map(|c| {
                if columns.contains(c) {
                    vec![GARBAGE ^ 0xff; sectors as usize]
                } else {
                    Vec::new()
                }
            })
            .collect();
        true
    }

    fn free_buffer(&self, rq: usize) {
        let mut buffer = self.slot(rq).buffer.lock().unwrap();
        if buffer.is_empty() {
            self.violations
                .report(format!("request {rq} freed a buffer it did not have"));
        }
        buffer.clear();
        self.stripe.buffers.fetch_sub(1, Ordering::SeqCst);
    }

    fn copy_to_buffer(
        &self,
        rq: usize,
        segment: SegmentRef,
        offset: u64,
        column: u32,
        column_offset: u64,
        sectors: u64,
    ) {
        // The segment may be another request's (a held stripe's follower).
        let source = self.slot(segment.rq);
        let spec = source.spec.lock().unwrap().clone();
        let (seg_start, _) = spec.segments[segment.index];
        let at = (seg_start + offset - spec.start) as usize;
        let data = source.data.lock().unwrap();
        let mut buffer = self.slot(rq).buffer.lock().unwrap();
        let col = &mut buffer[column as usize];
        let c = column_offset as usize;
        col[c..c + sectors as usize].copy_from_slice(&data[at..at + sectors as usize]);
    }

    fn copy_from_buffer(
        &self,
        rq: usize,
        column: u32,
        column_offset: u64,
        segment: SegmentRef,
        offset: u64,
        sectors: u64,
    ) {
        let slot = self.slot(rq);
        let spec = slot.spec.lock().unwrap().clone();
        if segment.rq != rq {
            self.violations
                .report(format!("request {rq} read into request {}", segment.rq));
            return;
        }
        let (seg_start, _) = spec.segments[segment.index];
        let at = (seg_start + offset - spec.start) as usize;
        let mut data = slot.data.lock().unwrap();
        let buffer = slot.buffer.lock().unwrap();
        let col = &buffer[column as usize];
        let c = column_offset as usize;
        data[at..at + sectors as usize].copy_from_slice(&col[c..c + sectors as usize]);
    }

    fn copy_column(&self, rq: usize, from: u32, to: u32, offset: u64, sectors: u64) {
        let mut buffer = self.slot(rq).buffer.lock().unwrap();
        let range = offset as usize..(offset + sectors) as usize;
        let src = buffer[from as usize][range.clone()].to_vec();
        buffer[to as usize][range].copy_from_slice(&src);
    }

    fn raid6_update(&self) -> bool {
        !self.stripe.no_raid6_update
    }

    fn compute_parity(&self, rq: usize, job: &ParityJob) {
        self.stripe.parity_jobs.fetch_add(1, Ordering::Relaxed);
        if job.stripe_count() > 1 {
            self.stripe.run_jobs.fetch_add(1, Ordering::Relaxed);
        }
        let ok = self.parity(rq, job);
        if !ok {
            self.violations.report(format!(
                "request {rq}: parity job on missing columns: {job:?}"
            ));
        }
        if ok && job.op == ParityOp::Generate {
            self.request_helper_answer(rq, job);
        }
        let later =
            self.rng.lock().unwrap().random_range(0..100) < self.stripe.async_parity_percent;
        let queued = later
            && self
                .stripe
                .queue
                .lock()
                .unwrap()
                .as_ref()
                .is_some_and(|q| q.send(StripeTask::ParityDone(rq)).is_ok());
        if !queued {
            // The engine must not go on to a request's next slice from inside this call (a
            // kernel stack would overflow over a long request's slices). One slice nests two
            // jobs at most (recover, then generate); deeper is that recursion.
            let depth = PARITY_DEPTH.with(|d| {
                d.set(d.get() + 1);
                d.get()
            });
            if depth > 2 {
                self.violations.report(format!(
                    "request {rq}: parity job started {depth} deep inside parity completions"
                ));
            }
            self.engine.parity_done(self, rq, ok);
            PARITY_DEPTH.with(|d| d.set(d.get() - 1));
        }
    }
}

thread_local! {
    /// Parity completions this thread is inside (see `compute_parity`).
    static PARITY_DEPTH: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// The columns of `map`'s stripe that `job` computes: a generation's P and Q, a recovery's
/// lost columns.
fn written_columns(job: &ParityJob, map: &StripeMap) -> Vec<u32> {
    match job.op {
        ParityOp::Recover { lost } => lost.iter().collect(),
        _ => [Some(map.p()), map.q()].into_iter().flatten().collect(),
    }
}

/// What a lying helper leaves of `job` in `buffer`: every column it computes changed.
fn helper_lie(buffer: &mut [Vec<u64>], job: &ParityJob) {
    for (map, from, to) in job.stripes() {
        for c in written_columns(job, &map) {
            if let Some(col) = buffer.get_mut(c as usize) {
                for tag in col.iter_mut().take(to as usize).skip(from as usize) {
                    *tag ^= 0x11e0_0000_0000_0001;
                }
            }
        }
    }
}

/// Column `to` += `coef` × column `from` (GF(2^8) on each byte of each tag).
fn accumulate(buffer: &mut [Vec<u64>], from: u32, to: u32, coef: u8, offset: u64, sectors: u64) {
    let range = offset as usize..(offset + sectors) as usize;
    let src = buffer[from as usize][range.clone()].to_vec();
    for (d, s) in buffer[to as usize][range].iter_mut().zip(src) {
        *d ^= mul64(coef, s);
    }
}

/// The CRC-32C of sector tags (their little-endian bytes), as a payload's checksum.
pub fn tags_crc(tags: &[u64]) -> u32 {
    let bytes: Vec<u8> = tags.iter().flat_map(|t| t.to_le_bytes()).collect();
    graid_engine::crc32c::crc32c(&bytes)
}

/// GF(2^8) multiplication of each byte of a sector tag by `g`.
pub fn mul64(g: u8, x: u64) -> u64 {
    let bytes = x.to_le_bytes().map(|b| gf::mul(g, b));
    u64::from_le_bytes(bytes)
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

/// The oldest entry of a wait list (pushed at the end).
fn pop_front(list: &mut Vec<usize>) -> Option<usize> {
    (!list.is_empty()).then(|| list.remove(0))
}

/// The partial parity log as the host's members hold it, for `scan_log`.
pub struct LogImage<'a>(pub &'a Host);

impl graid_engine::ppl::LogReader for LogImage<'_> {
    fn read(&mut self, member: u32, sector: u64, block: &mut [u8; PPL_BLOCK_BYTES]) -> bool {
        let Some(disk) = self.0.disks.get(member as usize) else {
            return false;
        };
        *block = disk
            .log_blocks
            .lock()
            .unwrap()
            .get(&sector)
            .map_or([0; PPL_BLOCK_BYTES], |b| **b);
        true
    }

    fn payload_crc(&mut self, member: u32, sector: u64, sectors: u64) -> Option<u32> {
        let disk = self.0.disks.get(member as usize)?;
        let tags = disk.sectors.lock().unwrap();
        Some(tags_crc(
            tags.get(sector as usize..(sector + sectors) as usize)?,
        ))
    }
}
