// SPDX-License-Identifier: GPL-2.0

//! The queue of RAID 5/6 stripe steps: requests whose next step is ready, many taken per
//! wake-up, as md's raid5d and group threads take every ready stripe.
//!
//! Each CPU has a *lane*: a lock-free list of ready requests and one work item on the array's
//! stripe queue that runs the step of every request on the list. A request is queued, from any
//! context, onto the lane of the CPU that queues it (for a step after member I/O, the CPU that
//! completed it); the lane's work item runs on the stripe queue, which is unbound and so runs
//! it on a CPU sharing that CPU's cache (the workqueue's default affinity scope) while letting
//! a busy CPU's steps spread, which a queue bound to the CPU lost 15–20 % to under QEMU.
//! A lane's work item queued while it runs runs again after: what is pushed meanwhile is taken
//! then, without a wake-up of its own.
//!
//! A request's step runs once at a time, as a work item of its own would: a request already
//! queued is not queued again (its step, yet to run, sees what the queuer changed), and one
//! whose step is running goes onto the list of the lane running it, which takes it after. Each
//! request's [`LaneLinks`] record both, and are touched after its step only by a
//! compare-exchange that a later user of the same driver data cannot be hurt by (see
//! [`Lane::run`]).

use crate::kernel_ext::{
    cpu::current_cpu,
    work::{noio_scope, RequestWork, WorkQueue},
};
use crate::rq_stack::{Link, RqRef, RqStack};
use core::marker::PhantomData;
use core::ptr;
use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, Ordering};
use kernel::{bindings, prelude::*};

/// A request's part in the lanes, in its driver data.
#[derive(Default)]
pub(crate) struct LaneLinks {
    /// Its link on a lane's list.
    next: AtomicPtr<bindings::request>,
    /// On a lane's list, its step not yet started.
    queued: AtomicBool,
    /// The lane running its step, plus one (0: none).
    running_on: AtomicU32,
}

/// What the lanes need from the array they serve.
pub(crate) trait LaneOwner: Sync + Sized + 'static {
    /// The lane links of request `rq`.
    fn links<'a>(rq: RqRef) -> &'a LaneLinks;
    /// Runs the next step of `rq` (process context).
    fn run_step(&self, rq: RqRef);
}

/// The link of the lanes' lists.
struct LaneLink<T>(PhantomData<T>);

impl<T: LaneOwner> Link for LaneLink<T> {
    fn of<'a>(rq: RqRef) -> &'a AtomicPtr<bindings::request> {
        &T::links(rq).next
    }
}

struct Lane<T: LaneOwner> {
    ready: RqStack<LaneLink<T>>,
    work: RequestWork,
    /// This lane's number plus one, as `LaneLinks::running_on` records it.
    tag: u32,
    owner: *const T,
}

/// One lane per possible CPU.
pub(crate) struct StripeLanes<T: LaneOwner> {
    lanes: KVec<Lane<T>>,
}

// SAFETY: the lanes are used from any CPU; `owner` is only read, and `T` is `Sync`.
unsafe impl<T: LaneOwner> Send for StripeLanes<T> {}
// SAFETY: as above.
unsafe impl<T: LaneOwner> Sync for StripeLanes<T> {}

impl<T: LaneOwner> StripeLanes<T> {
    /// The lanes of `owner`, which they are a field of (so it outlives them). `owner` must
    /// flush the queue it gives [`Self::queue`] before it goes.
    pub(crate) fn new(owner: *const T) -> Result<Self> {
        let count = kernel::cpu::nr_cpu_ids().max(1) as usize;
        let mut lanes = KVec::with_capacity(count, GFP_KERNEL)?;
        for i in 0..count {
            lanes.push(
                Lane {
                    ready: RqStack::default(),
                    work: RequestWork::default(),
                    tag: i as u32 + 1,
                    owner,
                },
                GFP_KERNEL,
            )?;
        }
        // Only now: the vector is full and its elements stay where they are.
        for lane in lanes.iter() {
            // SAFETY: the lane stays in place (no more pushes; the vector moves, its heap
            // buffer does not) and its work item is not queued yet.
            unsafe { lane.work.init(lane_work_fn::<T>) };
        }
        Ok(Self { lanes })
    }

    /// Makes the next step of `rq` run soon, in process context. Any context.
    pub(crate) fn queue(&self, queue: &WorkQueue, rq: RqRef) {
        let links = T::links(rq);
        // Queued already: the step, yet to start, sees whatever the caller changed. SeqCst
        // here and in `Lane::run` (which records the lane before it clears `queued`): past
        // this swap, a step that started is seen in `running_on`.
        if links.queued.swap(true, Ordering::SeqCst) {
            return;
        }
        let running_on = links.running_on.load(Ordering::SeqCst);
        let lane = match running_on.checked_sub(1) {
            // Still running its step: after it, on that lane.
            Some(i) => self.lanes.get(i as usize),
            None => self
                .lanes
                .get(current_cpu() as usize % self.lanes.len().max(1)),
        };
        // Never `None`: there is at least one lane, and `running_on` names one of them.
        if let Some(lane) = lane.or_else(|| self.lanes.first()) {
            lane.ready.push(rq);
            queue.queue(&lane.work);
        }
    }
}

impl<T: LaneOwner> Lane<T> {
    /// Runs the step of `rq`, taken off this lane's list.
    fn run(&self, owner: &T, rq: RqRef) {
        let links = T::links(rq);
        links.running_on.store(self.tag, Ordering::SeqCst);
        links.queued.store(false, Ordering::SeqCst);
        owner.run_step(rq);
        // The request may have ended in its step, and its driver data serve a new request
        // since. That one, if queued before this, found this lane in `running_on` and is on
        // this lane's list, or is running here; so `running_on` is still this lane's or
        // already 0, and the exchange only ever clears this lane's own mark.
        let _ = links
            .running_on
            .compare_exchange(self.tag, 0, Ordering::SeqCst, Ordering::Relaxed);
    }
}

/// Runs every request on the list of the lane whose work item is `work`.
///
/// # Safety
///
/// Called by the workqueue only, for the work item of a [`Lane`] of a [`StripeLanes<T>`].
unsafe extern "C" fn lane_work_fn<T: LaneOwner>(work: *mut bindings::work_struct) {
    // SAFETY: `work` is the `work` field of a live `Lane<T>` (only ever queued that way).
    let lane = unsafe {
        &*kernel::container_of!(ptr::from_ref(RequestWork::from_raw(work)), Lane<T>, work)
    };
    // SAFETY: the owner outlives its lanes and flushes their queue before it goes.
    let owner = unsafe { &*lane.owner };
    // NOIO: the steps finish I/O; reclaim must not wait on it. No plug of its own: member
    // I/O to a device with an I/O scheduler is then dispatched by a kblockd work item, which
    // takes many steps' requests to a device at once (one doorbell); a plug per step sent each
    // step's two or three by themselves, and cost a third of 4 KiB write IOPS under QEMU.
    noio_scope(|| lane.ready.take_all(|rq| lane.run(owner, rq)));
}
