// SPDX-License-Identifier: GPL-2.0

//! A block plug of the driver's own for the I/O it submits from `queue_rq`.
//!
//! `queue_rq` can run inside the flush of the submitting task's plug: `blk_finish_plug` →
//! `blk_mq_flush_plug_list` → dispatch → `queue_rq`, with `current->plug` still pointing at
//! the plug being flushed. Bios submitted to the members there would be added to that plug in
//! the middle of its flush, whose request count was reset when the flush began and no longer
//! matches its list; a later addition then reads a NULL "last request"
//! (`blk_add_rq_to_plug`; a KASAN null-pointer dereference under the debug kernel, reached by
//! `12-discard`'s fio closing the array). So member I/O goes into a plug of its own, flushed
//! before `queue_rq` returns, with the task's plug set aside meanwhile.
//!
//! Setting a plug aside must first drop the timestamp the block layer may have cached in it:
//! with `PF_BLOCK_TS` set, every context switch clears `current->plug->cur_ktime`, so a
//! preemption while the task has no plug would write through NULL (seen in
//! `13-member-dies-under-writeback`: an oops in `finish_task_switch` with the task
//! preempted at the start of `blk_start_plug`).

use core::{mem::MaybeUninit, ptr};
use super::shim;
use kernel::{bindings, task::Task};

/// Runs `f` with a fresh plug as the task's plug, flushes that plug, and puts the task's own
/// plug (if any) back. Member bios submitted by `f` are batched per call.
pub(crate) fn with_own_plug<R>(f: impl FnOnce() -> R) -> R {
    let task = Task::current_raw();
    let mut own = MaybeUninit::<bindings::blk_plug>::uninit();
    // The kernel's own invalidation (`blk_plug_invalidate_ts`): the task's plug, if it has a
    // cached timestamp, loses it and `PF_BLOCK_TS` is cleared, so no context switch looks at
    // `current->plug` until one is installed again. Only this task sets the flag again.
    // SAFETY: acts on the running task, which is in task context here.
    unsafe { shim::graid_blk_plug_invalidate_ts() };
    // SAFETY: `task` is the running task, and a task's `plug` is only touched by the task
    // itself; it is restored below before this function returns.
    let outer = unsafe { ptr::replace(&raw mut (*task).plug, ptr::null_mut()) };
    // SAFETY: the task has no plug now, so `blk_start_plug` initialises `own` and installs it;
    // `own` lives on this frame until after `blk_finish_plug` below has uninstalled it.
    unsafe { bindings::blk_start_plug(own.as_mut_ptr()) };
    let result = f();
    // SAFETY: `own` was started above and is still the task's plug (`f` is a nested scope of
    // ours and cannot end it); finishing flushes its requests and uninstalls it.
    unsafe { bindings::blk_finish_plug(own.as_mut_ptr()) };
    // SAFETY: as for taking it: the running task's own field.
    unsafe { (*task).plug = outer };
    result
}
