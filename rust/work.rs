// SPDX-License-Identifier: GPL-2.0

//! An ordered workqueue of one's own with one work item embedded in its owner
//! (`include/linux/workqueue.h`).
//!
//! `kernel::workqueue` in 7.2 enqueues reference-counted pointers (`Arc`, `KBox`); an array's
//! worker instead lives inside the pinned array it serves, for as long as the array does. The
//! work item is cancelled (waiting for a running instance) before its owner goes away, and its
//! queue is `WQ_MEM_RECLAIM`: I/O completion depends on it, so it has a rescuer thread and runs
//! under memory pressure.

use crate::kernel_ext::shim;
use core::marker::PhantomData;
use kernel::{bindings, prelude::*, sync::LockClassKey, types::Opaque};

/// What a [`Worker`] runs.
pub(crate) trait WorkHandler: Send + Sync {
    /// Runs in process context, never twice at once. Allocations inside are `GFP_NOIO`.
    fn run(&self);
}

/// An ordered workqueue named `name` that runs under memory pressure (`WQ_MEM_RECLAIM`).
fn ordered_reclaim_queue(name: &'static CStr) -> Result<*mut bindings::workqueue_struct> {
    // SAFETY: `name` is a NUL-terminated string; the flags are valid.
    let queue = unsafe {
        shim::graid_alloc_ordered_workqueue(name.as_char_ptr(), bindings::wq_flags_WQ_MEM_RECLAIM)
    };
    if queue.is_null() {
        return Err(ENOMEM);
    }
    Ok(queue)
}

/// An ordered, memory-reclaim-safe workqueue with one work item that calls `T::run` on the
/// value it is embedded in.
///
/// # Invariants
///
/// `queue` was allocated by `alloc_ordered_workqueue` and is destroyed once, in `drop`, after
/// `work` was cancelled; `owner` points at the pinned `T` this value is a field of.
#[pin_data(PinnedDrop)]
pub(crate) struct Worker<T: WorkHandler> {
    #[pin]
    work: Opaque<bindings::work_struct>,
    /// A timer that kicks `work` ([`Self::kick_after`]).
    #[pin]
    later: Opaque<bindings::delayed_work>,
    /// Serialises [`Self::kick_after`]'s callers (the earliest deadline wins).
    #[pin]
    kick_lock: Opaque<bindings::spinlock_t>,
    queue: *mut bindings::workqueue_struct,
    owner: *const T,
    _owner: PhantomData<T>,
}

// SAFETY: the work item and the queue are used from any CPU; `T` is `Sync`.
unsafe impl<T: WorkHandler> Send for Worker<T> {}
// SAFETY: as above.
unsafe impl<T: WorkHandler> Sync for Worker<T> {}

impl<T: WorkHandler> Worker<T> {
    /// A worker for `owner`, with a queue named `name`; its work item in lockdep class `key`.
    /// Each worker needs a class of its own (`kernel::static_lock_class!()` at the caller): a
    /// static here would be one for every `T` (statics are not generic), and lockdep would take
    /// a flush of one worker under a lock another one takes for a deadlock.
    ///
    /// # Safety
    ///
    /// `owner` must point at the pinned value this worker is a field of, so it outlives the
    /// worker.
    pub(crate) unsafe fn new(
        owner: *const T,
        name: &'static CStr,
        key: Pin<&'static LockClassKey>,
    ) -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            work <- Opaque::ffi_init(|slot: *mut bindings::work_struct| {
                // SAFETY: `slot` is valid for writes and pinned; `run` matches `work_func_t`.
                unsafe {
                    bindings::init_work_with_key(
                        slot,
                        Some(Self::run),
                        false,
                        name.as_char_ptr(),
                        key.as_ptr(),
                    )
                }
            }),
            later <- Opaque::ffi_init(|slot: *mut bindings::delayed_work| {
                // SAFETY: `slot` is valid for writes and pinned; `kick_now` matches
                // `work_func_t`.
                unsafe { shim::graid_init_delayed_work(slot, Some(Self::kick_now)) }
            }),
            kick_lock <- Opaque::ffi_init(|slot: *mut bindings::spinlock_t| {
                // SAFETY: `slot` is valid for writes and pinned.
                unsafe { shim::graid_kick_lock_init(slot) }
            }),
            queue: ordered_reclaim_queue(name)?,
            owner,
            _owner: PhantomData,
        })
    }

    /// Makes `T::run` run in `ms` milliseconds, or sooner when kicked; a timer already set
    /// for earlier stands, one set for later is brought forward (a write held for its
    /// follower must not wait for the quiet period's timer). Any context.
    pub(crate) fn kick_after(&self, ms: u32) {
        // SAFETY: the queue, the timer and the lock live as long as `self` (type invariant).
        unsafe {
            shim::graid_kick_earlier(self.queue, self.later.get(), ms, self.kick_lock.get())
        };
    }

    /// Takes a timer set by [`Self::kick_after`] off, waiting for one firing now.
    pub(crate) fn cancel_timer(&self) {
        // SAFETY: the timer lives as long as `self`.
        unsafe { bindings::cancel_delayed_work_sync(self.later.get()) };
    }

    /// # Safety
    ///
    /// Called by the workqueue for the timer of a live `Worker<T>`.
    unsafe extern "C" fn kick_now(work: *mut bindings::work_struct) {
        // `work` is the first field of the `delayed_work`, so both have one address.
        let dwork = work.cast::<bindings::delayed_work>();
        // SAFETY: `dwork` is the `later` field of a `Worker<T>` (only ever queued by
        // `kick_after`), which is live while its timer can fire (cancelled in `drop`).
        let this = unsafe { &*kernel::container_of!(Opaque::cast_from(dwork), Self, later) };
        this.kick();
    }

    /// Makes `T::run` run soon (again, if it is running now). Any context.
    pub(crate) fn kick(&self) {
        // SAFETY: the queue and the work item live as long as `self` (type invariant).
        unsafe {
            bindings::queue_work_on(bindings::wq_misc_consts_WORK_CPU_UNBOUND as i32, self.queue, self.work.get())
        };
    }

    /// Waits until `T::run` is neither queued nor running (it may be kicked again after).
    pub(crate) fn flush(&self) {
        // SAFETY: the work item lives as long as `self`.
        unsafe { bindings::flush_work(self.work.get()) };
    }

    /// True while `T::run` is queued, running, or due on its timer. A run that kicks itself
    /// is queued again as it ends, which [`Self::flush`] does not wait for: a caller that
    /// needs the worker idle flushes until this is false.
    pub(crate) fn busy(&self) -> bool {
        // SAFETY: the work item and the timer's live as long as `self`; `work_busy` only
        // reads their state under the pool's lock.
        unsafe {
            bindings::work_busy(self.work.get()) != 0
                || bindings::work_busy(&raw mut (*self.later.get()).work) != 0
        }
    }

    /// Takes `T::run` off the queue (and its timer off) and waits for a running one to end
    /// (it may be kicked again after).
    pub(crate) fn cancel(&self) {
        self.cancel_timer();
        // SAFETY: the work item lives as long as `self`.
        unsafe { bindings::cancel_work_sync(self.work.get()) };
    }

    /// # Safety
    ///
    /// Called by the workqueue for the work item of a live `Worker<T>`.
    unsafe extern "C" fn run(work: *mut bindings::work_struct) {
        // SAFETY: `work` is the `work` field of a `Worker<T>` (only ever queued by `kick`).
        let this = unsafe { &*kernel::container_of!(Opaque::cast_from(work), Self, work) };
        // NOIO: the worker finishes I/O; reclaim must not wait on it.
        // SAFETY: the owner outlives its worker (type invariant), which is cancelled before
        // either goes away.
        noio_scope(|| unsafe { (*this.owner).run() });
    }
}

#[pinned_drop]
impl<T: WorkHandler> PinnedDrop for Worker<T> {
    fn drop(self: Pin<&mut Self>) {
        // SAFETY: the work item and queue are live (type invariant); nothing queues the work
        // once its owner is being dropped, and the timer, which would, goes first, so after the
        // cancels it never runs again.
        unsafe {
            bindings::cancel_delayed_work_sync(self.later.get());
            bindings::cancel_work_sync(self.work.get());
            bindings::destroy_workqueue(self.queue);
        }
    }
}

/// A timer that runs `T::run` in process context: a delayed work item of its own, on an
/// ordered memory-reclaim-safe queue (deadlines whose work finishes I/O).
///
/// # Invariants
///
/// As [`Worker`]'s, with `work` a `delayed_work`.
#[pin_data(PinnedDrop)]
pub(crate) struct DelayedWorker<T: WorkHandler> {
    #[pin]
    work: Opaque<bindings::delayed_work>,
    queue: *mut bindings::workqueue_struct,
    owner: *const T,
    _owner: PhantomData<T>,
}

// SAFETY: as `Worker`'s.
unsafe impl<T: WorkHandler> Send for DelayedWorker<T> {}
// SAFETY: as above.
unsafe impl<T: WorkHandler> Sync for DelayedWorker<T> {}

impl<T: WorkHandler> DelayedWorker<T> {
    /// A delayed worker for `owner`, with a queue named `name`.
    ///
    /// # Safety
    ///
    /// `owner` must point at the pinned value this worker is a field of, so it outlives the
    /// worker.
    pub(crate) unsafe fn new(owner: *const T, name: &'static CStr) -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            work <- Opaque::ffi_init(|slot: *mut bindings::delayed_work| {
                // SAFETY: `slot` is valid for writes and pinned; `run` matches `work_func_t`.
                unsafe { shim::graid_init_delayed_work(slot, Some(Self::run)) }
            }),
            queue: ordered_reclaim_queue(name)?,
            owner,
            _owner: PhantomData,
        })
    }

    /// Makes `T::run` run in `ms` milliseconds, unless it is already set to run (then the
    /// earlier time stands). Any context.
    pub(crate) fn run_after(&self, ms: u32) {
        // SAFETY: the queue and the work item live as long as `self` (type invariant).
        unsafe { shim::graid_queue_delayed_work_ms(self.queue, self.work.get(), ms) };
    }

    /// Takes `T::run` off the timer or the queue and waits for a running one to end.
    pub(crate) fn cancel(&self) {
        // SAFETY: the work item lives as long as `self`.
        unsafe { bindings::cancel_delayed_work_sync(self.work.get()) };
    }

    /// # Safety
    ///
    /// Called by the workqueue for the work item of a live `DelayedWorker<T>`.
    unsafe extern "C" fn run(work: *mut bindings::work_struct) {
        // `work` is the first field of the `delayed_work`, so both have one address.
        let dwork = work.cast::<bindings::delayed_work>();
        // SAFETY: `dwork` is the `work` field of a `DelayedWorker<T>` (only ever queued by
        // `run_after`).
        let this = unsafe { &*kernel::container_of!(Opaque::cast_from(dwork), Self, work) };
        // SAFETY: the owner outlives its worker (type invariant).
        noio_scope(|| unsafe { (*this.owner).run() });
    }
}

#[pinned_drop]
impl<T: WorkHandler> PinnedDrop for DelayedWorker<T> {
    fn drop(self: Pin<&mut Self>) {
        // SAFETY: the work item and queue are live (type invariant); nothing queues it once
        // its owner is being dropped.
        unsafe {
            bindings::cancel_delayed_work_sync(self.work.get());
            bindings::destroy_workqueue(self.queue);
        }
    }
}

/// A multi-threaded (unbound) workqueue that runs under memory pressure (`WQ_MEM_RECLAIM`):
/// the RAID 5/6 stripe steps of many requests run on it in parallel.
///
/// # Invariants
///
/// `queue` was allocated by `alloc_workqueue` and is destroyed once, in `drop`.
pub(crate) struct WorkQueue {
    queue: *mut bindings::workqueue_struct,
}

// SAFETY: workqueues are used from any CPU.
unsafe impl Send for WorkQueue {}
// SAFETY: as above.
unsafe impl Sync for WorkQueue {}

impl WorkQueue {
    pub(crate) fn new(name: &'static CStr) -> Result<Self> {
        // SAFETY: `name` is a NUL-terminated string that outlives the queue.
        let queue = unsafe { shim::graid_alloc_unbound_workqueue(name.as_char_ptr()) };
        if queue.is_null() {
            return Err(ENOMEM);
        }
        Ok(Self { queue })
    }

    /// Queues `work` (any context). Nothing happens if it is already queued; if it is
    /// running, it runs again after.
    pub(crate) fn queue(&self, work: &RequestWork) {
        // SAFETY: the queue is live (type invariant); `work` was initialised (`RequestWork`
        // invariant) and outlives its execution (its owner waits for `flush`).
        unsafe {
            bindings::queue_work_on(
                bindings::wq_misc_consts_WORK_CPU_UNBOUND as i32,
                self.queue,
                work.work.get(),
            )
        };
    }

    /// Waits until every work item queued so far has run.
    pub(crate) fn flush(&self) {
        // SAFETY: the queue is live (type invariant).
        unsafe { bindings::__flush_workqueue(self.queue) };
    }
}

impl Drop for WorkQueue {
    fn drop(&mut self) {
        // SAFETY: live (type invariant); destroyed once. Destruction drains what is queued.
        unsafe { bindings::destroy_workqueue(self.queue) };
    }
}

/// A work item kept in a request's driver data, run with [`WorkQueue::queue`].
///
/// # Invariants
///
/// `work` is initialised by [`RequestWork::init`] before it is first queued.
#[repr(transparent)]
#[pin_data]
pub(crate) struct RequestWork {
    #[pin]
    work: Opaque<bindings::work_struct>,
}

// SAFETY: the work item is queued from any CPU; the workqueue synchronises it.
unsafe impl Send for RequestWork {}
// SAFETY: as above.
unsafe impl Sync for RequestWork {}

impl Default for RequestWork {
    fn default() -> Self {
        Self {
            work: Opaque::uninit(),
        }
    }
}

impl RequestWork {
    /// Makes the work item call `func` when it runs.
    ///
    /// # Safety
    ///
    /// `self` must not move afterwards (it lives in a request's PDU) and must not be queued
    /// or running.
    pub(crate) unsafe fn init(&self, func: unsafe extern "C" fn(*mut bindings::work_struct)) {
        // SAFETY: by the caller's contract the item is idle and stays where it is.
        unsafe {
            bindings::init_work_with_key(
                self.work.get(),
                Some(func),
                false,
                c"graid_stripe".as_char_ptr(),
                kernel::static_lock_class!().as_ptr(),
            )
        };
    }

    /// A work item that calls `func`, initialised where it will stay (a field of a pinned
    /// value), for work that belongs to no request.
    pub(crate) fn new_in_place(
        func: unsafe extern "C" fn(*mut bindings::work_struct),
        name: &'static CStr,
        key: Pin<&'static LockClassKey>,
    ) -> impl PinInit<Self> {
        pin_init!(Self {
            work <- Opaque::ffi_init(move |slot: *mut bindings::work_struct| {
                // SAFETY: `slot` is valid for writes and pinned; `func` matches `work_func_t`.
                unsafe {
                    bindings::init_work_with_key(
                        slot,
                        Some(func),
                        false,
                        name.as_char_ptr(),
                        key.as_ptr(),
                    )
                }
            }),
        })
    }

    /// The `RequestWork` of a `work_struct` handed to the function given to [`Self::init`].
    ///
    /// # Safety
    ///
    /// `work` must be the work item of a live `RequestWork`.
    pub(crate) unsafe fn from_raw<'a>(work: *mut bindings::work_struct) -> &'a Self {
        // SAFETY: `RequestWork` is a transparent wrapper around the work item.
        unsafe { &*work.cast::<Self>() }
    }
}

/// Runs `f` with every allocation in it behaving as `GFP_NOIO` (`memalloc_noio_save`): code
/// that finishes I/O must not wait for reclaim that waits for that I/O.
pub(crate) fn noio_scope<R>(f: impl FnOnce() -> R) -> R {
    // SAFETY: paired with the restore below, on this task.
    let flags = unsafe { shim::graid_memalloc_noio_save() };
    let result = f();
    // SAFETY: as above.
    unsafe { shim::graid_memalloc_noio_restore(flags) };
    result
}
