// SPDX-License-Identifier: GPL-2.0

//! `/dev/graid-helper`: where the parity helper attaches, and the module's side of the offload
//! (`Documentation/ring-protocol.rst`).
//!
//! Root only, one helper at a time. `HELPER_IOC_ATTACH` negotiates the ring's ABI version and
//! features and allocates the control area; the helper maps it: K2H (header, SQ, the kernel's
//! indices) read-only, H2K (its indices, the CQ) read-write. `HELPER_IOC_REGISTER_POOL` pins
//! the memory it donates for the jobs' columns. From then on [`offload`] sends RAID 5/6
//! generations to it: the data is staged into the job's area of the pool (`staging.rs`), the
//! job published on the SQ, and the request waits. [`offload_and_wait`] does the same for the
//! rebuild's and the scrub's jobs (recoveries too), whose worker sleeps until the job ends. `HELPER_IOC_ENTER` consumes its completions,
//! each checked by the job state machine (`engine/ring.rs`) before the parity is copied back;
//! with `HELPER_ENTER_WAIT` it sleeps until jobs are published (`poll` says the same). A job
//! past its deadline, one the helper could not do, and every job out when it detaches
//! (closing the file, SIGKILL included, `HELPER_IOC_DETACH`, a protocol error, too many missed
//! deadlines) is computed by the kernel from its own copy of the data: every job ends exactly
//! once.

use crate::engine::offload::{
    cost_update, probe_due, route, verify_due, Fallback, Offloadable, Route, Staging, AREA_BYTES,
    DEFAULT_MIN_BYTES,
};
use crate::engine::parity::ParityJob;
use crate::engine::ring::{ring_pending, Completion, HelperState, JobSlot, JobTable};
use crate::errno;
use crate::staging::{stage_in, stage_out, verify};
use crate::rq_stack::RqRef;
use crate::stripe_io::StripeBuffer;
use crate::kernel_ext::{
    capability::require_sys_admin,
    compat::param,
    misc::MiscOps,
    pin::PinnedPages,
    racy,
    work::{noio_scope, DelayedWorker, WorkHandler},
};
use crate::ring_uapi::{
    self, Cqe, HelperAttach, HelperEnter, HelperPool, HelperStatus, RingHeader, Sqe,
    CONTROL_BYTES, CQE_BYTES, CQ_ENTRIES, CQ_HEAD_OFFSET, CQ_OFFSET, CQ_TAIL_OFFSET,
    H2K_OFFSET, HELPER_ENGINE_LEN, HELPER_ENTER_WAIT, HELPER_FALLBACKS, HELPER_FALLBACK_NAMES,
    HELPER_STATE_DEGRADED, HELPER_STATE_HEALTHY, HELPER_STATE_NONE, HELPER_STATE_NO_POOL,
    JOB_OP_PQ, JOB_OP_RECOVER, JOB_OP_XOR, JOB_STATUS_OK, K2H_BYTES, POOL_MAX_BYTES, POOL_MIN_BYTES,
    POOL_UNIT_BYTES, RING_ABI_VERSION, RING_FEATURES, RING_FEATURE_BATCH, RING_FEATURE_RECOVER,
    RING_MAGIC, SQE_BYTES,
    SQ_ENTRIES,
    SQ_HEAD_OFFSET, SQ_OFFSET, SQ_TAIL_OFFSET,
};
use core::mem::size_of;
use pin_init::stack_pin_init;
use core::ptr;
use core::sync::atomic::{fence, AtomicPtr, AtomicBool, AtomicU32, AtomicU64, Ordering};
use kernel::{
    alloc::flags::{GFP_KERNEL, __GFP_ZERO},
    bindings,
    fs::File,
    mm::virt::VmaNew,
    new_mutex, new_poll_condvar,
    page::{Page, PAGE_SIZE},
    prelude::*,
    sync::{poll::PollCondVar, poll::PollTable, Arc, Completion as Done, Mutex, MutexGuard},
    transmute::{AsBytes, FromBytes},
    uaccess::{UserPtr, UserSlice},
};

// SAFETY: `repr(C)`, integers only, no padding (checked by graid-abi's host tests): every byte
// is initialised and every bit pattern is valid.
unsafe impl AsBytes for HelperAttach {}
// SAFETY: see above.
unsafe impl FromBytes for HelperAttach {}
// SAFETY: see above.
unsafe impl AsBytes for HelperEnter {}
// SAFETY: see above.
unsafe impl FromBytes for HelperEnter {}
// SAFETY: see above.
unsafe impl FromBytes for HelperPool {}
// SAFETY: see above.
unsafe impl AsBytes for HelperStatus {}
// SAFETY: see above.
unsafe impl AsBytes for Sqe {}

/// `EPOLL*` events (`include/uapi/linux/eventpoll.h`; bindgen cannot export the `__force`
/// casts).
const EPOLLIN: u32 = 0x1;
const EPOLLERR: u32 = 0x8;
const EPOLLHUP: u32 = 0x10;
const EPOLLRDNORM: u32 = 0x40;

/// The helper device, once registered: where arrays send parity jobs. Set when its
/// initialisation completes, cleared when it is dropped (after every array is gone).
static DEVICE: AtomicPtr<HelperDevice> = AtomicPtr::new(ptr::null_mut());

/// Helpers caught lying since the module loaded (any attachment, any way): each array heals
/// the parity helpers computed for it unchecked when this changes (`engine/suspect.rs`).
static CATCHES: AtomicU64 = AtomicU64::new(0);
/// The newest attachment caught lying ([`Attachment::id`], 0: none): a result of it, or of an
/// older one, that ends after the catch is not used but computed again by the kernel.
static CAUGHT_ATTACHMENT: AtomicU64 = AtomicU64::new(0);

/// See [`CATCHES`].
pub(crate) fn catches() -> u64 {
    CATCHES.load(Ordering::SeqCst)
}

/// Attachment `id` was caught lying: counted (after [`CAUGHT_ATTACHMENT`], so a result that
/// sees the count unchanged was marked before it), and every array's worker is kicked to heal.
fn note_caught(id: u64) {
    CAUGHT_ATTACHMENT.fetch_max(id, Ordering::SeqCst);
    CATCHES.fetch_add(1, Ordering::SeqCst);
    if let Some(device) = device() {
        // From the deadline work, without this caller's locks (it may hold the helper's).
        device.kick_arrays.store(true, Ordering::SeqCst);
        device.deadlines.run_after(0);
    }
}

/// The helper device, if registered.
fn device() -> Option<&'static HelperDevice> {
    let device = DEVICE.load(Ordering::Acquire);
    // SAFETY: set only while the device is alive. Its users are arrays (gone before it is
    // dropped), the control device and the debugfs file (both dropped before it: the module's
    // fields come first).
    (!device.is_null()).then(|| unsafe { &*device })
}

/// A job the kernel computes: if it was one the helper could have taken, its data bytes, so
/// the caller measures the kernel's cost ([`kernel_measured`]).
pub(crate) struct KernelJob {
    pub(crate) measure_bytes: Option<u64>,
}

/// What a job of an array's request needs from the array (its request handler, `io.rs`).
pub(crate) trait JobOwner: Sync {
    /// Runs `f` on the stripe buffer of `rq`; false if it has none.
    fn with_stripe_buffer(&self, rq: RqRef, f: &mut dyn FnMut(&mut StripeBuffer)) -> bool;
    /// The helper's parity of `rq`'s job is in its buffer: the request moves on.
    fn parity_by_helper(&self, rq: RqRef);
    /// The parity in `rq`'s buffer is the helper's, unchecked: the engine marks its stripes
    /// (`engine/suspect.rs`) before anything is written.
    fn parity_unchecked(&self, rq: RqRef);
    /// Computes `job` of `rq` in the kernel and moves the request on.
    fn parity_by_kernel(&self, rq: RqRef, job: &ParityJob);
}

/// Sends `job` of request `rq` of `io` to the helper. `Ok`: the job is the helper's, and ends
/// through `io`'s [`JobOwner::parity_by_helper`] or [`JobOwner::parity_by_kernel`], later,
/// exactly once. `Err`: nothing was sent; the caller computes it (the reason is counted).
pub(crate) fn offload<T: JobOwner + 'static>(
    io: &T,
    rq: RqRef,
    job: &ParityJob,
) -> Result<(), KernelJob> {
    let device = device().ok_or(KernelJob { measure_bytes: None })?;
    let staging = device.plan(job, Offloadable::Generate)?;
    let io: *const dyn JobOwner = ptr::from_ref(io);
    let owner = Owner::Request { io, rq };
    device
        .submit(owner, job, &staging)
        .map(|_| ())
        .map_err(|reason| device.refused(reason, &staging))
}

/// Sends `job` on `buffer` to the helper and waits until it ends: `Ok`, the helper's result is
/// in `buffer`, and this is the attachment that computed it (for [`caught_wrong`]); `Err`, the
/// caller computes it. For the rebuild and the scrub, whose worker may sleep: recoveries go
/// too. The wait is bounded by the job's deadline. The engine checks such a result before
/// anything that depends on it reaches a member (`engine/rebuild.rs`, `engine/scrub.rs`).
pub(crate) fn offload_and_wait(buffer: &mut StripeBuffer, job: &ParityJob) -> Result<u64, KernelJob> {
    let device = device().ok_or(KernelJob { measure_bytes: None })?;
    let staging = device.plan(job, Offloadable::GenerateAndRecover)?;
    stack_pin_init!(let waiter = Waiter::new(buffer));
    let owner = Owner::Waiter(ptr::from_ref(&*waiter));
    let helper = device
        .submit(owner, job, &staging)
        .map_err(|reason| device.refused(reason, &staging))?;
    // Ends exactly once (the job table): completed, expired, or taken back at a detach.
    waiter.done.wait_for_completion();
    if waiter.by_helper.load(Ordering::Relaxed) {
        Ok(helper)
    } else {
        Err(KernelJob { measure_bytes: None })
    }
}

/// The engine found wrong a result of attachment `helper` that [`offload_and_wait`] returned
/// (a rebuild's recovery or a scrub's parity, each checked before use): as a wrong sampled
/// result, it is counted (`wrong`, a protocol error) and the helper detached, if it is still
/// the one attached.
pub(crate) fn caught_wrong(helper: u64) {
    if let Some(device) = device() {
        device.caught_wrong(helper);
    }
}

/// The kernel computed `bytes` of data of a job the helper could have taken in `ns`.
pub(crate) fn kernel_measured(bytes: u64, ns: u64) {
    if let Some(device) = device() {
        let cost = &device.kernel_cost;
        // Racing updates lose a sample at worst.
        cost.store(cost_update(cost.load(Ordering::Relaxed), bytes, ns), Ordering::Relaxed);
    }
}

/// The helper and the offload counters (`GRAID_IOC_HELPER_STATUS`).
pub(crate) fn status() -> HelperStatus {
    device().map_or_else(HelperStatus::default, HelperDevice::status)
}

/// `/sys/kernel/debug/graid/offload`: [`status`] as `name: value` lines (what `graidctl helper
/// --json` shows, for scripts and bug reports without graidctl).
pub(crate) fn write_stats(_: &(), f: &mut kernel::fmt::Formatter<'_>) -> kernel::fmt::Result {
    let s = status();
    let state = match s.state {
        HELPER_STATE_HEALTHY => "healthy",
        HELPER_STATE_DEGRADED => "degraded",
        HELPER_STATE_NO_POOL => "no-pool",
        _ => "none",
    };
    let end = s.engine.iter().position(|&b| b == 0).unwrap_or(s.engine.len());
    let engine = s.engine.get(..end).and_then(|e| core::str::from_utf8(e).ok()).unwrap_or("?");
    writeln!(f, "state: {state}\nengine: {engine}\npid: {}", s.pid)?;
    let counters = [
        ("pool_bytes", s.pool_bytes),
        ("slots", u64::from(s.slots)),
        ("queued", u64::from(s.queued)),
        ("attaches", s.attaches),
        ("jobs", s.jobs),
        ("bytes", s.bytes),
        ("background_jobs", s.background_jobs),
        ("recover_jobs", s.recover_jobs),
        ("verified_jobs", s.verified_jobs),
        ("completed", s.completed),
        ("batches", s.batches),
        ("latency_total_ns", s.latency_total_ns),
        ("latency_max_ns", s.latency_max_ns),
        ("protocol_errors", s.protocol_errors),
    ];
    for (name, value) in counters {
        writeln!(f, "{name}: {value}")?;
    }
    for (name, value) in HELPER_FALLBACK_NAMES.iter().zip(s.fallbacks) {
        writeln!(f, "in_kernel.{name}: {value}")?;
    }
    Ok(())
}

/// Milliseconds a job may take before the kernel computes it.
fn deadline_ms() -> u32 {
    param(&crate::module_parameters::offload_deadline_ms).max(1)
}

/// Whether the kernel checks the helper's results: 0 never, 1 sampled (the default), 2 all.
fn verify_mode() -> u32 {
    param(&crate::module_parameters::offload_verify)
}

/// Whether jobs go to the faster side (the default), or every eligible job to the helper.
fn balanced() -> bool {
    param(&crate::module_parameters::offload_balance) != 0
}

/// Smallest job offloaded, in data bytes.
fn min_bytes() -> u64 {
    let kib = param(&crate::module_parameters::offload_min_kib);
    if kib == u32::MAX {
        DEFAULT_MIN_BYTES
    } else {
        u64::from(kib) * 1024
    }
}

fn now_ns() -> u64 {
    // SAFETY: no preconditions.
    u64::try_from(unsafe { bindings::ktime_get() }).unwrap_or(0)
}

/// Who a job is for.
#[derive(Clone, Copy)]
enum Owner {
    /// A request of an array: moved on when the job ends.
    Request { io: *const dyn JobOwner, rq: RqRef },
    /// A task sleeping in [`offload_and_wait`].
    Waiter(*const Waiter),
}

impl Owner {
    /// Runs a staging copy or check on the owner's stripe buffer; `None` if it has none.
    fn stage<R>(self, copy: impl FnOnce(&mut StripeBuffer) -> R) -> Option<R> {
        match self {
            Self::Request { io, rq } => {
                let (mut copy, mut result) = (Some(copy), None);
                // SAFETY: see `Shadow`.
                unsafe { &*io }.with_stripe_buffer(rq, &mut |buffer| {
                    result = copy.take().map(|copy| copy(buffer));
                });
                result
            }
            // SAFETY: the waiter sleeps until its job ends and touches its buffer only after:
            // until then the buffer is the job's, used under the device's lock only.
            Self::Waiter(waiter) => Some(copy(unsafe { &mut *(*waiter).buffer })),
        }
    }
}

/// A task waiting for its job (on its stack, in [`offload_and_wait`]).
#[pin_data]
struct Waiter {
    #[pin]
    done: Done,
    /// The waiter's stripe buffer: the job's columns come from it and go back to it.
    buffer: *mut StripeBuffer,
    /// Whether the helper did the job (else the waiter computes it), written before `done`.
    by_helper: AtomicBool,
}

impl Waiter {
    fn new(buffer: &mut StripeBuffer) -> impl PinInit<Self> {
        let buffer = ptr::from_mut(buffer);
        pin_init!(Self {
            done <- Done::new(),
            buffer,
            by_helper: AtomicBool::new(false),
        })
    }
}

/// The kernel's record of a job out (the *shadow*): the truth, whatever the SQ entry says now.
struct Shadow {
    owner: Owner,
    job: ParityJob,
    staging: Staging,
    sent_ns: u64,
    /// The attachment it was sent to ([`Attachment::id`]).
    attachment: u64,
}

// SAFETY: an owner's `io` points at an array that outlives its requests (a request with a job
// out has not ended, so its array is alive), usable from any thread; `RqRef` is a request
// handle; a waiter lives until its job ends, and only its completion and atomics are shared.
unsafe impl Send for Shadow {}

/// A job that ended, handled once the lock is dropped.
struct Finished {
    shadow: Shadow,
    /// `None`: the helper's parity is in the buffer; else why the kernel computes it.
    fallback: Option<Fallback>,
    /// The kernel computed the job too and compared ([`verify_due`]): the parity in the
    /// buffer is the kernel's.
    checked: bool,
}

impl Finished {
    /// Ends the job: its request moves on (with the parity done, or computed now by the
    /// kernel), or its waiter wakes up.
    fn run(self, stats: &Stats) {
        let Shadow {
            owner,
            job,
            attachment,
            ..
        } = self.shadow;
        if let Some(reason) = self.fallback {
            stats.fallback(reason);
        }
        match owner {
            Owner::Request { io, rq } => {
                // SAFETY: see `Shadow`.
                let io = unsafe { &*io };
                match self.fallback {
                    None if self.checked => io.parity_by_helper(rq),
                    None => {
                        // Marked before the catches are looked at (both SeqCst): either the
                        // marks precede a catch, and the heal it starts walks them, or the
                        // catch is seen here and the kernel computes the job again
                        // (`engine/suspect.rs`).
                        io.parity_unchecked(rq);
                        if CAUGHT_ATTACHMENT.load(Ordering::SeqCst) >= attachment {
                            io.parity_by_kernel(rq, &job);
                        } else {
                            io.parity_by_helper(rq);
                        }
                    }
                    Some(_) => io.parity_by_kernel(rq, &job),
                }
            }
            Owner::Waiter(waiter) => {
                // SAFETY: see `Shadow`; nothing touches the waiter after `complete_all`.
                let waiter = unsafe { &*waiter };
                waiter.by_helper.store(self.fallback.is_none(), Ordering::Relaxed);
                waiter.done.complete_all();
            }
        }
    }
}

/// Lists of finished jobs a pool keeps ([`Pool::take_list`]): one for `ENTER`, one for the
/// deadline work.
const LISTS: usize = 2;

/// The pool the helper registered, and the jobs out in it: slot `i` owns area `i`.
struct Pool {
    pages: PinnedPages,
    jobs: JobTable<KVec<JobSlot>>,
    shadows: KVec<Option<Shadow>>,
    /// Lists with room for every slot's job, allocated with the pool: the jobs that end under
    /// the lock go on one, to run after it (never an allocation under the lock).
    lists: KVec<KVec<Finished>>,
    /// Completions checked by the kernel and found right, and when the last check ran.
    verified: u64,
    last_verify_ns: u64,
}

impl Pool {
    fn area(job: u32) -> usize {
        (job as usize).saturating_mul(AREA_BYTES as usize)
    }

    /// A list with room for `slots` jobs.
    fn new_list(slots: usize) -> Result<KVec<Finished>> {
        // NOIO: the memory may come from reclaim that waits for these very jobs.
        Ok(noio_scope(|| KVec::with_capacity(slots, GFP_KERNEL))?)
    }

    /// A list for the jobs that end under the lock: one the pool keeps, else `own` (the
    /// caller's, allocated without the lock) if it is big enough; `Err(slots)`: neither, the
    /// caller allocates one of `slots` (only when more than [`LISTS`] reap at once).
    fn take_list(&mut self, own: &mut Option<KVec<Finished>>) -> Result<KVec<Finished>, usize> {
        if let Some(list) = self.lists.pop() {
            return Ok(list);
        }
        match own.take() {
            Some(list) if list.capacity() >= self.shadows.len() => Ok(list),
            _ => Err(self.shadows.len()),
        }
    }

    /// Keeps an emptied list for the next [`Self::take_list`] (one too many, or too small for
    /// this pool, is handed back to be freed).
    fn give_back(&mut self, list: KVec<Finished>) -> Option<KVec<Finished>> {
        if list.capacity() < self.shadows.len() || !list.is_empty() {
            return Some(list);
        }
        self.lists.push_within_capacity(list).err().map(|e| e.0)
    }

    /// Moves the shadow of `job` (taken back) to `list` to be computed by the kernel.
    fn take_back(shadows: &mut [Option<Shadow>], list: &mut KVec<Finished>, job: u32, why: Fallback) {
        if let Some(shadow) = shadows.get_mut(job as usize).and_then(Option::take) {
            // The list has room for every slot.
            let _ = list.push_within_capacity(Finished {
                shadow,
                fallback: Some(why),
                checked: false,
            });
        }
    }
}

// Every reason has its counter and its name in the ABI.
const _: () = assert!(Fallback::COUNT == HELPER_FALLBACKS);

/// Offload counters since the module loaded.
#[derive(Default)]
struct Stats {
    attaches: AtomicU64,
    jobs: AtomicU64,
    bytes: AtomicU64,
    completed: AtomicU64,
    batches: AtomicU64,
    latency_total_ns: AtomicU64,
    latency_max_ns: AtomicU64,
    protocol_errors: AtomicU64,
    background_jobs: AtomicU64,
    recover_jobs: AtomicU64,
    verified_jobs: AtomicU64,
    fallbacks: [AtomicU64; HELPER_FALLBACKS],
}

impl Stats {
    fn fallback(&self, reason: Fallback) {
        if let Some(counter) = self.fallbacks.get(reason.index()) {
            counter.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn completed(&self, latency_ns: u64) {
        self.completed.fetch_add(1, Ordering::Relaxed);
        self.latency_total_ns.fetch_add(latency_ns, Ordering::Relaxed);
        self.latency_max_ns.fetch_max(latency_ns, Ordering::Relaxed);
    }
}

/// The control area's pages, shared with the helper's mappings being set up (`mmap` inserts
/// them without the lock).
struct ControlArea {
    pages: KVec<Page>,
}

/// An attached helper's ring.
struct Attachment {
    /// Which attachment since the module loaded (the `attaches` count): a result the engine
    /// finds wrong later names its helper by it ([`caught_wrong`]).
    id: u64,
    control: Arc<ControlArea>,
    /// The SQ tail the kernel published, and the CQ head it consumed to: the kernel's own
    /// copies (the pages' are for the helper, never read back).
    sq_tail: u32,
    cq_head: u32,
    engine: [u8; HELPER_ENGINE_LEN],
    /// `RING_FEATURE_*` in force.
    features: u64,
    pid: u32,
    pool: Option<Pool>,
}

/// The helper's answers broke the protocol: it is detached.
struct ProtocolError;

impl Attachment {
    /// Runs `f` on the `u32` at byte `offset` of the control area, as an atomic shared with
    /// the helper's mapping.
    fn word<R>(&self, offset: u64, f: impl FnOnce(&AtomicU32) -> R) -> Option<R> {
        let offset = usize::try_from(offset).ok().filter(|o| o % 4 == 0)?;
        let page = self.control.pages.get(offset / PAGE_SIZE)?;
        // SAFETY: a page of the area, alive while `self` is; unmapped below.
        let base = unsafe { bindings::kmap_local_page(page.as_ptr()) };
        let word = base.cast::<u8>().wrapping_add(offset % PAGE_SIZE).cast::<u32>();
        // SAFETY: `word` is 4 aligned bytes inside the mapped page; the helper touches them
        // only as an atomic too (or not at all: K2H is read-only to it).
        let result = f(unsafe { AtomicU32::from_ptr(word) });
        // SAFETY: `base` was mapped above, on this task.
        unsafe { bindings::kunmap_local(base) };
        Some(result)
    }

    fn load(&self, offset: u64, order: Ordering) -> Result<u32, ProtocolError> {
        self.word(offset, |w| w.load(order)).ok_or(ProtocolError)
    }

    fn store(&self, offset: u64, value: u32) {
        self.word(offset, |w| w.store(value, Ordering::Release));
    }

    /// Jobs published and not yet taken, by the helper's SQ head.
    fn pending(&self) -> Result<u32, ProtocolError> {
        let head = self.load(SQ_HEAD_OFFSET, Ordering::Acquire)?;
        ring_pending(head, self.sq_tail, SQ_ENTRIES).ok_or(ProtocolError)
    }

    /// Writes `sqe` at the SQ tail and publishes it.
    fn publish(&mut self, sqe: &Sqe) -> Result {
        let at = SQ_OFFSET + u64::from(self.sq_tail % SQ_ENTRIES) * SQE_BYTES as u64;
        let at = usize::try_from(at).map_err(|_| EINVAL)?;
        let page = self.control.pages.get(at / PAGE_SIZE).ok_or(EINVAL)?;
        let bytes = sqe.as_bytes();
        // SAFETY: `bytes` is the entry, a local; the range is checked (entries never straddle).
        // The helper may be reading the page (K2H is mapped to it): a racy copy.
        unsafe { racy::write(page, at % PAGE_SIZE, bytes.as_ptr(), bytes.len())? };
        self.sq_tail = self.sq_tail.wrapping_add(1);
        // The entry before the tail (the helper loads the tail with acquire).
        fence(Ordering::Release);
        self.store(SQ_TAIL_OFFSET, self.sq_tail);
        Ok(())
    }

    /// Consumes the completions the helper published, each checked by the job table; the
    /// jobs that ended go to `list`, their parity already copied back (or a reason to compute
    /// it in the kernel).
    fn reap(
        &mut self,
        list: &mut KVec<Finished>,
        stats: &Stats,
        helper_cost: &AtomicU64,
    ) -> Result<(), ProtocolError> {
        let tail = self.load(CQ_TAIL_OFFSET, Ordering::Acquire)?;
        let count = ring_pending(self.cq_head, tail, CQ_ENTRIES).ok_or(ProtocolError)?;
        if count > 0 {
            stats.batches.fetch_add(1, Ordering::Relaxed);
        }
        let now = now_ns();
        for _ in 0..count {
            let at = CQ_OFFSET + u64::from(self.cq_head % CQ_ENTRIES) * CQE_BYTES as u64;
            let cqe = Cqe {
                job: self.load(at, Ordering::Relaxed)?,
                generation: self.load(at + 4, Ordering::Relaxed)?,
                status: self.load(at + 8, Ordering::Relaxed)?,
                reserved: 0,
            };
            // Completions with no pool are of no job out.
            let pool = self.pool.as_mut().ok_or(ProtocolError)?;
            let done = pool
                .jobs
                .complete(cqe.job, cqe.generation)
                .map_err(|_| ProtocolError)?;
            if let Completion::Done { job } = done {
                let shadow = pool
                    .shadows
                    .get_mut(job as usize)
                    .and_then(Option::take)
                    .ok_or(ProtocolError)?;
                let mut fallback = Some(Fallback::HelperFailed);
                let mut checked = false;
                if cqe.status == JOB_STATUS_OK {
                    let area = Pool::area(job);
                    let (job, staging) = (&shadow.job, &shadow.staging);
                    let mode = verify_mode();
                    let check = mode != 0
                        && verify_due(pool.verified, now, pool.last_verify_ns, mode >= 2);
                    checked = check;
                    // Checked: the kernel computes the job and compares (its own result stays);
                    // else the helper's result is copied back.
                    let right = if check {
                        pool.last_verify_ns = now;
                        shadow.owner.stage(|b| verify(b, job, staging, &pool.pages, area))
                    } else {
                        let copy = |b: &mut StripeBuffer| stage_out(b, job, staging, &pool.pages, area);
                        shadow.owner.stage(|b| copy(b).map(|()| true))
                    };
                    match right {
                        Some(Ok(true)) => {
                            fallback = None;
                            if check {
                                pool.verified += 1;
                                stats.verified_jobs.fetch_add(1, Ordering::Relaxed);
                            }
                            let latency = now.saturating_sub(shadow.sent_ns);
                            stats.completed(latency);
                            let old = helper_cost.load(Ordering::Relaxed);
                            let cost = cost_update(old, shadow.staging.data_bytes(), latency);
                            helper_cost.store(cost, Ordering::Relaxed);
                        }
                        Some(Ok(false)) => fallback = Some(Fallback::Wrong),
                        _ => {}
                    }
                }
                let wrong = fallback == Some(Fallback::Wrong);
                // The list has room for every slot, and each slot ends once per reap.
                let _ = list.push_within_capacity(Finished {
                    shadow,
                    fallback,
                    checked,
                });
                if wrong {
                    // Before the list's other jobs run: their results are computed again.
                    note_caught(self.id);
                    pr_warn!("graid: parity helper returned a wrong result: detached, the parity it computed unchecked is being repaired\n");
                    return Err(ProtocolError);
                }
            }
            self.cq_head = self.cq_head.wrapping_add(1);
        }
        self.store(CQ_HEAD_OFFSET, self.cq_head);
        Ok(())
    }

    /// Writes `RingHeader::pool_bytes`: the pool registered.
    fn set_pool_bytes(&self, bytes: u64) -> Result {
        let page = self.control.pages.first().ok_or(EINVAL)?;
        let value = bytes.to_le_bytes();
        // SAFETY: `value` is a local of its own length; the helper may be reading the header
        // (mapped read-only to it): a racy copy.
        unsafe { racy::write(page, POOL_BYTES_OFFSET, value.as_ptr(), value.len()) }
    }

    /// Detaches: every job out is taken back (to be computed by the kernel).
    fn detach(&mut self) {
        if let Some(pool) = self.pool.as_mut() {
            pool.jobs.detach(|_| {});
        }
    }

    /// The jobs still out in a detached attachment, to be computed by the kernel.
    fn run_orphans(mut self, stats: &Stats) {
        if let Some(pool) = self.pool.as_mut() {
            for shadow in pool.shadows.iter_mut().filter_map(Option::take) {
                Finished {
                    shadow,
                    fallback: Some(Fallback::Detached),
                    checked: false,
                }
                .run(stats);
            }
        }
        // Dropping `self` unpins the pool and frees the control area.
    }
}

/// The helper that has the device open, and what it attached.
struct Helper {
    /// The open file (its address: identity only), 0 when none.
    file: usize,
    attached: Option<Attachment>,
}

impl Helper {
    /// `file` is the helper's open file.
    fn owns(&self, file: &File) -> bool {
        self.file == file.as_ptr() as usize
    }
}

/// The helper device's state.
#[pin_data(PinnedDrop)]
pub(crate) struct HelperDevice {
    #[pin]
    helper: Mutex<Helper>,
    /// Wakes a helper waiting in ENTER or poll: jobs published, or it was detached.
    #[pin]
    jobs: PollCondVar,
    /// Takes back the jobs past their deadline.
    #[pin]
    deadlines: DelayedWorker<HelperDevice>,
    stats: Stats,
    /// Nanoseconds per KiB of data: the kernel computing an eligible job, the helper from
    /// submission to completion (0: not measured; reset when a helper attaches).
    kernel_cost: AtomicU64,
    helper_cost: AtomicU64,
    /// When a job last went the other way than the costs say (`engine::offload::route`).
    last_probe_ns: AtomicU64,
    /// A helper was caught lying: the deadline work kicks every array's worker
    /// ([`note_caught`]).
    kick_arrays: AtomicBool,
}

impl HelperDevice {
    pub(crate) fn new() -> impl PinInit<Self, Error> {
        try_pin_init!(&this in Self {
            helper <- new_mutex!(Helper {
                file: 0,
                attached: None,
            }),
            jobs <- new_poll_condvar!("graid_helper_jobs"),
            // SAFETY: the worker is a field of the value `this` points at.
            deadlines <- unsafe { DelayedWorker::new(this.as_ptr(), c"graid_offload") },
            stats: Stats::default(),
            kernel_cost: AtomicU64::new(0),
            helper_cost: AtomicU64::new(0),
            last_probe_ns: AtomicU64::new(0),
            kick_arrays: AtomicBool::new(false),
        })
        .pin_chain(|device| {
            DEVICE.store(ptr::from_ref(&*device).cast_mut(), Ordering::Release);
            Ok(())
        })
    }

    /// Takes the attachment out (the helper is detached), wakes its waiters, and computes
    /// every job it still had.
    /// Drops the lock first, then runs `finished` (their I/O is sent without it).
    fn detach(&self, mut helper: MutexGuard<'_, Helper>, finished: KVec<Finished>) {
        let old = helper.attached.take();
        drop(helper);
        self.jobs.notify_all();
        noio_scope(|| {
            for job in finished {
                job.run(&self.stats);
            }
            if let Some(mut old) = old {
                old.detach();
                old.run_orphans(&self.stats);
            }
        });
    }

    /// Drops the lock, then runs `finished`, whose list then goes back to the pool.
    fn finish(&self, helper: MutexGuard<'_, Helper>, mut finished: KVec<Finished>) {
        drop(helper);
        noio_scope(|| {
            for job in finished.drain_all() {
                job.run(&self.stats);
            }
        });
        if finished.capacity() > 0 {
            let mut helper = self.helper.lock();
            let pool = helper.attached.as_mut().and_then(|a| a.pool.as_mut());
            let unused = match pool {
                Some(pool) => pool.give_back(finished),
                None => Some(finished),
            };
            drop(helper);
            drop(unused);
        }
    }

    /// See [`caught_wrong`].
    fn caught_wrong(&self, id: u64) {
        // Counted even if it is gone: what it computed unchecked before is healed all the same.
        note_caught(id);
        let helper = self.helper.lock();
        if helper.attached.as_ref().is_some_and(|a| a.id == id) {
            self.stats.fallback(Fallback::Wrong);
            self.stats.protocol_errors.fetch_add(1, Ordering::Relaxed);
            pr_warn!("graid: parity helper returned a wrong recovery or parity (checked before use): detached\n");
            self.detach(helper, KVec::new());
        }
    }

    /// `job`'s layout in an area if it may go to the helper (`ops`), else the reason (counted).
    fn plan(&self, job: &ParityJob, ops: Offloadable) -> Result<Staging, KernelJob> {
        Staging::plan(job, min_bytes(), ops).map_err(|reason| {
            self.stats.fallback(reason);
            KernelJob { measure_bytes: None }
        })
    }

    /// `staging`'s job was refused by [`Self::submit`] for `reason` (counted): the kernel
    /// computes it, and measures that.
    fn refused(&self, reason: Fallback, staging: &Staging) -> KernelJob {
        self.stats.fallback(reason);
        KernelJob {
            measure_bytes: Some(staging.data_bytes()),
        }
    }

    /// See [`offload`]: `job` of `owner`, planned as `staging`, to the helper if it is
    /// attached, does the op, is no slower than the kernel (`engine::offload::route`) and has
    /// room; `Ok`: the attachment it went to.
    fn submit(&self, owner: Owner, job: &ParityJob, staging: &Staging) -> Result<u64, Fallback> {
        let staging = *staging;
        let op = match (staging.lost, staging.parity) {
            (Some(_), _) => JOB_OP_RECOVER,
            (None, 2) => JOB_OP_PQ,
            (None, _) => JOB_OP_XOR,
        };
        let data_columns = u8::try_from(staging.data).map_err(|_| Fallback::TooBig)?;
        let parity_columns = u8::try_from(staging.parity).map_err(|_| Fallback::TooBig)?;
        let column_bytes = u32::try_from(staging.column_bytes).map_err(|_| Fallback::TooBig)?;
        let mut helper = self.helper.lock();
        let a = helper.attached.as_mut().ok_or(Fallback::NoHelper)?;
        if op == JOB_OP_RECOVER && a.features & RING_FEATURE_RECOVER == 0 {
            return Err(Fallback::Op);
        }
        // A job of several stripes only to a helper that takes them.
        if staging.stripes > 1 && a.features & RING_FEATURE_BATCH == 0 {
            return Err(Fallback::Op);
        }
        // A full SQ (or an impossible head: ENTER will tell) sends nothing.
        match a.pending() {
            Ok(pending) if pending < SQ_ENTRIES => {}
            _ => return Err(Fallback::Busy),
        }
        let pool = a.pool.as_mut().ok_or(Fallback::NoHelper)?;
        if balanced() {
            let now = now_ns();
            let last = self.last_probe_ns.load(Ordering::Relaxed);
            // One caller wins a due probe.
            let probe = probe_due(now, last)
                && self
                    .last_probe_ns
                    .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                    .is_ok();
            let kernel = self.kernel_cost.load(Ordering::Relaxed);
            let helper = self.helper_cost.load(Ordering::Relaxed);
            if route(kernel, helper, probe) == Route::Kernel {
                return Err(Fallback::Slower);
            }
        }
        let sent_ns = now_ns();
        let deadline = sent_ns.saturating_add(u64::from(deadline_ms()) * 1_000_000);
        let ticket = pool.jobs.submit(deadline).map_err(|e| match e {
            crate::engine::ring::SubmitError::NotAttached => Fallback::NoHelper,
            crate::engine::ring::SubmitError::Full => Fallback::Busy,
        })?;
        let area = Pool::area(ticket.job);
        let staged = owner
            .stage(|b| stage_in(b, job, &staging, &pool.pages, area))
            .is_some_and(|r| r.is_ok());
        let sqe = Sqe {
            job: ticket.job,
            generation: ticket.generation,
            op,
            data_columns,
            parity_columns,
            stripes: staging.stripes,
            column_bytes,
            columns_offset: area as u64,
            ..Sqe::default()
        };
        if !staged || a.publish(&sqe).is_err() {
            // Never seen by the helper: the slot is free again (its generation moved on).
            if let Some(pool) = a.pool.as_mut() {
                let _ = pool.jobs.complete(ticket.job, ticket.generation);
            }
            return Err(Fallback::TooBig);
        }
        if let Some(slot) = a.pool.as_mut().and_then(|p| p.shadows.get_mut(ticket.job as usize)) {
            *slot = Some(Shadow {
                owner,
                job: *job,
                staging,
                sent_ns,
                attachment: a.id,
            });
        }
        let id = a.id;
        drop(helper);
        self.stats.jobs.fetch_add(1, Ordering::Relaxed);
        self.stats.bytes.fetch_add(staging.data_bytes(), Ordering::Relaxed);
        if matches!(owner, Owner::Waiter(_)) {
            self.stats.background_jobs.fetch_add(1, Ordering::Relaxed);
        }
        if op == JOB_OP_RECOVER {
            self.stats.recover_jobs.fetch_add(1, Ordering::Relaxed);
        }
        self.jobs.notify_all();
        self.deadlines.run_after(deadline_ms());
        Ok(id)
    }

    fn status(&self) -> HelperStatus {
        let mut status = HelperStatus::default();
        {
            let helper = self.helper.lock();
            if let Some(a) = helper.attached.as_ref() {
                status.pid = a.pid;
                status.engine = a.engine;
                status.state = match a.pool.as_ref() {
                    None => HELPER_STATE_NO_POOL,
                    Some(pool) => {
                        status.pool_bytes = pool.pages.bytes() as u64;
                        status.slots = pool.shadows.len() as u32;
                        status.queued = pool.jobs.queued() as u32;
                        match pool.jobs.state() {
                            HelperState::Healthy => HELPER_STATE_HEALTHY,
                            HelperState::Degraded => HELPER_STATE_DEGRADED,
                            HelperState::Detached => HELPER_STATE_NONE,
                        }
                    }
                };
            }
        }
        let s = &self.stats;
        status.attaches = s.attaches.load(Ordering::Relaxed);
        status.jobs = s.jobs.load(Ordering::Relaxed);
        status.bytes = s.bytes.load(Ordering::Relaxed);
        status.completed = s.completed.load(Ordering::Relaxed);
        status.batches = s.batches.load(Ordering::Relaxed);
        status.latency_total_ns = s.latency_total_ns.load(Ordering::Relaxed);
        status.latency_max_ns = s.latency_max_ns.load(Ordering::Relaxed);
        status.protocol_errors = s.protocol_errors.load(Ordering::Relaxed);
        status.background_jobs = s.background_jobs.load(Ordering::Relaxed);
        status.recover_jobs = s.recover_jobs.load(Ordering::Relaxed);
        status.verified_jobs = s.verified_jobs.load(Ordering::Relaxed);
        for (out, counter) in status.fallbacks.iter_mut().zip(&s.fallbacks) {
            *out = counter.load(Ordering::Relaxed);
        }
        status
    }

    /// Whether `file` may attach now: `EBADF` if it is not the helper's, `EBUSY` if attached.
    fn may_attach(helper: &Helper, file: &File) -> Result {
        if !helper.owns(file) {
            return Err(EBADF);
        }
        if helper.attached.is_some() {
            return Err(EBUSY);
        }
        Ok(())
    }

    /// ATTACH: checks the helper's ABI version (`EPROTO` if it differs), answers the features
    /// in force and the control area's size, and allocates the area. `EBUSY` if attached.
    ///
    /// The allocation and the copies from and to user space run without the lock: the I/O
    /// path takes it (reclaim may wait for that I/O), and `mmap` takes it under the mmap
    /// lock, which a fault on the reply would take. So the checks run twice.
    fn attach(&self, file: &File, user: UserSlice) -> Result<isize> {
        let (mut reader, mut writer) = user.reader_writer();
        let mut req: HelperAttach = reader.read()?;
        Self::may_attach(&self.helper.lock(), file)?;
        if req.abi_version != RING_ABI_VERSION {
            return Err(errno::eproto());
        }
        req.features &= RING_FEATURES;
        req.control_bytes = CONTROL_BYTES;
        let control = control_area(req.features)?;
        writer.write(&req)?;
        let pid = u32::try_from(kernel::current!().pid()).unwrap_or(0);
        let mut helper = self.helper.lock();
        if let Err(e) = Self::may_attach(&helper, file) {
            drop(helper);
            drop(control);
            return Err(e);
        }
        helper.attached = Some(Attachment {
            id: self.stats.attaches.fetch_add(1, Ordering::Relaxed).wrapping_add(1),
            control,
            sq_tail: 0,
            cq_head: 0,
            engine: req.engine,
            features: req.features,
            pid,
            pool: None,
        });
        drop(helper);
        self.helper_cost.store(0, Ordering::Relaxed);
        Ok(0)
    }

    /// REGISTER_POOL: pins the memory the helper donates (private anonymous, a multiple of
    /// `POOL_UNIT_BYTES`): one job slot per unit. `EBUSY` if it registered one already,
    /// `EINVAL` for a bad range or memory of the wrong kind.
    fn register_pool(&self, file: &File, user: UserSlice) -> Result<isize> {
        let req: HelperPool = user.reader().read()?;
        if req.bytes < POOL_MIN_BYTES || req.bytes > POOL_MAX_BYTES || req.bytes % POOL_UNIT_BYTES != 0 {
            return Err(EINVAL);
        }
        let address = usize::try_from(req.address).map_err(|_| EINVAL)?;
        let bytes = usize::try_from(req.bytes).map_err(|_| EINVAL)?;
        let slots = usize::try_from(req.bytes / AREA_BYTES).map_err(|_| EINVAL)?;
        {
            let helper = self.helper.lock();
            match (&helper.attached, helper.owns(file)) {
                (Some(a), true) if a.pool.is_none() => {}
                (Some(_), true) => return Err(EBUSY),
                _ => return Err(EINVAL),
            }
        }
        // Pinning faults the pages in: not under the lock.
        let pages = PinnedPages::pin_anonymous(address, bytes)?;
        let mut table = KVec::with_capacity(slots, GFP_KERNEL)?;
        let mut shadows = KVec::with_capacity(slots, GFP_KERNEL)?;
        for _ in 0..slots {
            table.push(JobSlot::default(), GFP_KERNEL)?;
            shadows.push(None, GFP_KERNEL)?;
        }
        let mut lists = KVec::with_capacity(LISTS, GFP_KERNEL)?;
        for _ in 0..LISTS {
            lists.push(KVec::with_capacity(slots, GFP_KERNEL)?, GFP_KERNEL)?;
        }
        let mut jobs = JobTable::new(table);
        jobs.attach();
        let pool = Pool {
            pages,
            jobs,
            shadows,
            lists,
            verified: 0,
            last_verify_ns: 0,
        };
        let mut helper = self.helper.lock();
        let owner = helper.owns(file);
        match helper.attached.as_mut() {
            Some(a) if owner && a.pool.is_none() => {
                let set = a.set_pool_bytes(req.bytes);
                if set.is_ok() {
                    a.pool = Some(pool);
                    return Ok(0);
                }
                // Unpinned without the lock (the unpin takes the mmap lock).
                drop(helper);
                drop(pool);
                set.map(|()| 0)
            }
            _ => {
                drop(helper);
                drop(pool);
                Err(EBUSY)
            }
        }
    }

    /// ENTER: consumes the helper's completions and answers the jobs pending; with
    /// `HELPER_ENTER_WAIT` first sleeps until there are some (`ERESTARTSYS` on a signal).
    /// `EPROTO` (and detached) when its indices or completions break the protocol.
    fn enter(&self, file: &File, user: UserSlice) -> Result<isize> {
        let (mut reader, mut writer) = user.reader_writer();
        let mut req: HelperEnter = reader.read()?;
        if req.flags & !HELPER_ENTER_WAIT != 0 {
            return Err(EINVAL);
        }
        // A list of our own, allocated without the lock, if the pool's are all in use.
        let mut own = None;
        loop {
            let mut helper = self.helper.lock();
            if !helper.owns(file) {
                return Err(EBADF);
            }
            let Some(a) = helper.attached.as_mut() else {
                return Err(EINVAL);
            };
            let mut list = match a.pool.as_mut().map(|pool| pool.take_list(&mut own)) {
                None => KVec::new(),
                Some(Ok(list)) => list,
                Some(Err(slots)) => {
                    drop(helper);
                    own = Some(Pool::new_list(slots)?);
                    continue;
                }
            };
            let answer = a
                .reap(&mut list, &self.stats, &self.helper_cost)
                .and_then(|()| a.pending());
            let Ok(pending) = answer else {
                self.stats.protocol_errors.fetch_add(1, Ordering::Relaxed);
                self.detach(helper, list);
                return Err(errno::eproto());
            };
            let wait = pending == 0 && req.flags & HELPER_ENTER_WAIT != 0 && list.is_empty();
            if !wait {
                self.finish(helper, list);
                req.pending = pending;
                break;
            }
            // Empty: back to the pool while this waits.
            own = match helper.attached.as_mut().and_then(|a| a.pool.as_mut()) {
                Some(pool) => pool.give_back(list),
                None => Some(list),
            };
            if self.jobs.wait_interruptible(&mut helper) {
                return Err(ERESTARTSYS);
            }
        }
        writer.write(&req)?;
        Ok(0)
    }
}

#[pinned_drop]
impl PinnedDrop for HelperDevice {
    fn drop(self: Pin<&mut Self>) {
        DEVICE.store(ptr::null_mut(), Ordering::Release);
        // Before the fields go: the deadline check locks `helper`. Nothing queues it again (no
        // helper is attached while the module unloads: its open file holds the module).
        self.deadlines.cancel();
    }
}

impl WorkHandler for HelperDevice {
    /// The deadline check: jobs past theirs are taken back and computed here; too many misses
    /// in a row detach the helper. First, after a catch, every array's worker is kicked.
    fn run(&self) {
        if self.kick_arrays.swap(false, Ordering::SeqCst) {
            crate::control::kick_every_array();
        }
        let mut own = None;
        let (mut helper, mut list) = loop {
            let mut helper = self.helper.lock();
            let Some(pool) = helper.attached.as_mut().and_then(|a| a.pool.as_mut()) else {
                return;
            };
            match pool.take_list(&mut own) {
                Ok(list) => break (helper, list),
                Err(slots) => {
                    drop(helper);
                    // No memory: the check runs again a deadline later.
                    let Ok(list) = Pool::new_list(slots) else {
                        self.deadlines.run_after(deadline_ms());
                        return;
                    };
                    own = Some(list);
                }
            }
        };
        let Some(pool) = helper.attached.as_mut().and_then(|a| a.pool.as_mut()) else {
            return;
        };
        let Pool { jobs, shadows, .. } = pool;
        jobs.expire(now_ns(), |job| {
            Pool::take_back(shadows, &mut list, job, Fallback::Expired)
        });
        let detached = jobs.state() == HelperState::Detached;
        let queued = jobs.queued() > 0;
        if detached {
            pr_warn!("graid: parity helper missed too many deadlines: detached\n");
            self.detach(helper, list);
            return;
        }
        self.finish(helper, list);
        if queued {
            self.deadlines.run_after((deadline_ms() / 4).max(1));
        }
    }
}

/// Where `RingHeader::pool_bytes` lies in the first page.
const POOL_BYTES_OFFSET: usize = core::mem::offset_of!(RingHeader, pool_bytes);

/// The control area's pages, zeroed, the header written.
fn control_area(features: u64) -> Result<Arc<ControlArea>> {
    let count = usize::try_from(CONTROL_BYTES).map_err(|_| EINVAL)? / PAGE_SIZE;
    let mut pages = KVec::with_capacity(count, GFP_KERNEL)?;
    for _ in 0..count {
        pages.push(Page::alloc_page(GFP_KERNEL | __GFP_ZERO)?, GFP_KERNEL)?;
    }
    let header = header_bytes(features);
    let first = pages.first().ok_or(EINVAL)?;
    // SAFETY: `header` is a local array of its own length, within the page; the page is new,
    // mapped nowhere else yet.
    unsafe { first.write_raw(header.as_ptr(), 0, header.len())? };
    Ok(Arc::new(ControlArea { pages }, GFP_KERNEL)?)
}

/// The `RingHeader` as its `repr(C)` bytes (little-endian, as the tools read it).
fn header_bytes(features: u64) -> [u8; size_of::<RingHeader>()] {
    let mut bytes = [0u8; size_of::<RingHeader>()];
    let fields: [&[u8]; 9] = [
        &RING_MAGIC.to_le_bytes(),
        &RING_ABI_VERSION.to_le_bytes(),
        &SQ_ENTRIES.to_le_bytes(),
        &CQ_ENTRIES.to_le_bytes(),
        &(SQE_BYTES as u32).to_le_bytes(),
        &(CQE_BYTES as u32).to_le_bytes(),
        &0u32.to_le_bytes(),
        &features.to_le_bytes(),
        &0u64.to_le_bytes(),
    ];
    let mut at = 0;
    for field in fields {
        if let Some(dst) = bytes.get_mut(at..at + field.len()) {
            dst.copy_from_slice(field);
        }
        at += field.len();
    }
    bytes
}

impl MiscOps for HelperDevice {
    const MMAP: bool = true;
    const POLL: bool = true;

    /// Root only, and one helper at a time (`EBUSY`).
    fn open(&self, file: &File) -> Result {
        require_sys_admin()?;
        let mut helper = self.helper.lock();
        if helper.file != 0 {
            return Err(EBUSY);
        }
        helper.file = file.as_ptr() as usize;
        Ok(())
    }

    /// The helper is gone (an exit, SIGKILL included, closes the file): detached, its jobs
    /// computed by the kernel, its pool unpinned.
    fn release(&self, file: &File) {
        let mut helper = self.helper.lock();
        if helper.owns(file) {
            helper.file = 0;
            self.detach(helper, KVec::new());
        }
    }

    /// Readable when jobs are pending; an error and a hang-up when not attached (or the
    /// protocol broke).
    fn poll(&self, file: &File, table: &PollTable<'_>) -> u32 {
        table.register_wait(file, &self.jobs);
        let helper = self.helper.lock();
        let owner = helper.owns(file);
        match helper.attached.as_ref().map(Attachment::pending) {
            Some(Ok(pending)) if owner => {
                if pending > 0 {
                    EPOLLIN | EPOLLRDNORM
                } else {
                    0
                }
            }
            _ => EPOLLERR | EPOLLHUP,
        }
    }

    fn ioctl(&self, file: &File, cmd: u32, arg: usize) -> Result<isize> {
        require_sys_admin()?;
        let user = |size| UserSlice::new(UserPtr::from_addr(arg), size);
        match cmd {
            ring_uapi::HELPER_IOC_ATTACH => self.attach(file, user(size_of::<HelperAttach>())),
            ring_uapi::HELPER_IOC_ENTER => self.enter(file, user(size_of::<HelperEnter>())),
            ring_uapi::HELPER_IOC_REGISTER_POOL => {
                self.register_pool(file, user(size_of::<HelperPool>()))
            }
            ring_uapi::HELPER_IOC_DETACH => {
                let helper = self.helper.lock();
                if !helper.owns(file) || helper.attached.is_none() {
                    return Err(EINVAL);
                }
                self.detach(helper, KVec::new());
                Ok(0)
            }
            _ => Err(ENOTTY),
        }
    }

    /// Maps K2H (read-only: `EACCES` for a writable mapping) or H2K, each whole or in part, but
    /// never across the two; `EINVAL` before ATTACH or outside the area.
    fn mmap(&self, file: &File, vma: &VmaNew) -> Result {
        // Only a reference to the pages under the lock: the caller holds the mmap lock, and
        // inserting pages allocates page tables; neither may nest in the lock the I/O path
        // takes (the reference keeps the pages while they are inserted, the mapping after).
        let area = {
            let helper = self.helper.lock();
            match (&helper.attached, helper.owns(file)) {
                (Some(a), true) => a.control.clone(),
                _ => return Err(EINVAL),
            }
        };
        let control = &area.pages;
        // SAFETY: the vma is being set up by the VFS for this call (it holds the mmap lock).
        let start: usize = unsafe { (*vma.as_ptr()).vm_pgoff };
        let pages = (vma.end() - vma.start()) / PAGE_SIZE;
        let end = start.checked_add(pages).ok_or(EINVAL)?;
        let k2h_pages = usize::try_from(K2H_BYTES).map_err(|_| EINVAL)? / PAGE_SIZE;
        let h2k_first = usize::try_from(H2K_OFFSET).map_err(|_| EINVAL)? / PAGE_SIZE;
        if end > control.len() || (start < k2h_pages && end > h2k_first) {
            return Err(EINVAL);
        }
        if end <= k2h_pages {
            // The kernel's region: the helper only reads it.
            if vma.writable() {
                return Err(EACCES);
            }
            vma.try_clear_maywrite()?;
        }
        vma.set_dontcopy();
        vma.set_dontexpand();
        let map = vma.set_mixedmap();
        for (i, page) in control.iter().enumerate().take(end).skip(start) {
            map.vm_insert_page(vma.start() + (i - start) * PAGE_SIZE, page)?;
        }
        Ok(())
    }
}
