// SPDX-License-Identifier: GPL-2.0

//! The one way a request waits on a worker list (`WorkList`) for a condition another context
//! makes true: a stripe's lock, the log's next epoch, buffer memory, the follower a holder waits
//! for (review 3, section 4: each of these had its own hand-proved wake-up).
//!
//! # The lost wake-up, and why it cannot happen
//!
//! A waiter finds the condition false and puts itself on the list; a waker makes the condition
//! true and drains the list. Unordered, the waker could drain before the push and the waiter
//! could look before the store: the request would sit on a list nobody drains again.
//!
//! So both sides take the same shape, with a `SeqCst` fence between their two steps:
//!
//! - the waiter ([`park`], or [`recheck`] after it pushed): push, fence, load the condition;
//! - the waker ([`wake_all`], or its own drain after [`waker_fence`]): store the condition,
//!   fence, take the list.
//!
//! The two fences are in one total order. If the waiter's comes first, the waker's take (after
//! its fence) sees the push; if the waker's comes first, the waiter's load (after its fence)
//! sees the store and the waiter drains the list itself. Either way somebody drains it after
//! the push. Draining twice is harmless: every drain hands each request on exactly once (the
//! platform's `take_all` moves them off the list), and a request woken with its condition
//! false again just waits again.
//!
//! The fences make the argument independent of how the platform's list and each condition's
//! atomics are ordered; they are on the slow path only (a request that waits).

use super::platform::{Platform, WorkList};
use core::sync::atomic::{fence, Ordering};

/// Puts `rq` on `list` to wait while `blocked()` holds, then looks again (see the module
/// comment): if the condition came true meanwhile, runs `wake` (which drains the list, `rq`
/// with it). Returns whether `rq` is left waiting (`blocked()` still held). From the push on,
/// `rq` may run elsewhere: `blocked` and `wake` must not touch its state.
pub(super) fn park<P: Platform>(
    p: &P,
    list: WorkList,
    rq: P::Request,
    blocked: impl FnOnce() -> bool,
    wake: impl FnOnce(),
) -> bool {
    p.push(list, rq);
    recheck(blocked, wake)
}

/// The waiter's second step, for a context that pushed requests back onto a list itself (a
/// drain that kept some): fence, then `wake` if `blocked()` no longer holds. Returns whether it
/// still holds.
pub(super) fn recheck(blocked: impl FnOnce() -> bool, wake: impl FnOnce()) -> bool {
    fence(Ordering::SeqCst);
    if blocked() {
        return true;
    }
    wake();
    false
}

/// The waker's step between making the condition true and taking the list, for a drain of its
/// own (one that hands requests elsewhere than the stripe work queue, or only some of them).
pub(super) fn waker_fence() {
    fence(Ordering::SeqCst);
}

/// The waker: once the condition is true (stored before this), sends every request waiting on
/// `list` on to the stripe work queue.
pub(super) fn wake_all<P: Platform>(p: &P, list: WorkList) {
    waker_fence();
    p.take_all(list, |w| p.queue_stripe_work(w));
}
