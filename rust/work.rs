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
use kernel::{bindings, prelude::*, types::Opaque};

/// What a [`Worker`] runs.
pub(crate) trait WorkHandler: Send + Sync {
    /// Runs in process context, never twice at once. Allocations inside are `GFP_NOIO`.
    fn run(&self);
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
    queue: *mut bindings::workqueue_struct,
    owner: *const T,
    _owner: PhantomData<T>,
}

// SAFETY: the work item and the queue are used from any CPU; `T` is `Sync`.
unsafe impl<T: WorkHandler> Send for Worker<T> {}
// SAFETY: as above.
unsafe impl<T: WorkHandler> Sync for Worker<T> {}

impl<T: WorkHandler> Worker<T> {
    /// A worker for `owner`, with a queue named `name`.
    ///
    /// # Safety
    ///
    /// `owner` must point at the pinned value this worker is a field of, so it outlives the
    /// worker.
    pub(crate) unsafe fn new(owner: *const T, name: &'static CStr) -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            work <- Opaque::ffi_init(|slot: *mut bindings::work_struct| {
                // SAFETY: `slot` is valid for writes and pinned; `run` matches `work_func_t`.
                unsafe {
                    bindings::init_work_with_key(
                        slot,
                        Some(Self::run),
                        false,
                        name.as_char_ptr(),
                        kernel::static_lock_class!().as_ptr(),
                    )
                }
            }),
            queue: {
                // SAFETY: `name` is a NUL-terminated string; the flags are valid.
                let queue = unsafe {
                    shim::graid_alloc_ordered_workqueue(
                        name.as_char_ptr(),
                        bindings::wq_flags_WQ_MEM_RECLAIM,
                    )
                };
                if queue.is_null() {
                    return Err(ENOMEM);
                }
                queue
            },
            owner,
            _owner: PhantomData,
        })
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

    /// # Safety
    ///
    /// Called by the workqueue for the work item of a live `Worker<T>`.
    unsafe extern "C" fn run(work: *mut bindings::work_struct) {
        // SAFETY: `work` is the `work` field of a `Worker<T>` (only ever queued by `kick`).
        let this = unsafe { &*kernel::container_of!(Opaque::cast_from(work), Self, work) };
        // NOIO: the worker finishes I/O; reclaim must not wait on it.
        // SAFETY: paired with the restore below, on this task.
        let flags = unsafe { shim::graid_memalloc_noio_save() };
        // SAFETY: the owner outlives its worker (type invariant), which is cancelled before
        // either goes away.
        unsafe { (*this.owner).run() };
        // SAFETY: as above.
        unsafe { shim::graid_memalloc_noio_restore(flags) };
    }
}

#[pinned_drop]
impl<T: WorkHandler> PinnedDrop for Worker<T> {
    fn drop(self: Pin<&mut Self>) {
        // SAFETY: the work item and queue are live (type invariant); nothing queues the work
        // once its owner is being dropped, so after the cancel it never runs again.
        unsafe {
            bindings::cancel_work_sync(self.work.get());
            bindings::destroy_workqueue(self.queue);
        }
    }
}
