// SPDX-License-Identifier: GPL-2.0

//! Requests in the engine's hands, and the lock-free lists they wait on.

use core::marker::PhantomData;
use core::ptr;
use core::sync::atomic::{AtomicPtr, Ordering};
use kernel::bindings;

/// A request in the engine's hands: a started blk-mq request given up by its
/// `Request` handle, taken back once to end it (`ArrayIo::end_request`). The engine's
/// reference count (its `RequestState`) decides when.
#[derive(Clone, Copy)]
pub(crate) struct RqRef(pub(crate) *mut bindings::request);

/// The field of a request's driver data that the lists chain it through (the driver data's
/// layout is `io.rs`'s, not this file's).
pub(crate) trait Link {
    fn of<'a>(rq: RqRef) -> &'a AtomicPtr<bindings::request>;
}

/// A lock-free list of requests (a stack, linked through the requests' driver data): pushed
/// from any context, interrupts included, emptied at once by its consumer.
pub(crate) struct RqStack<L: Link> {
    head: AtomicPtr<bindings::request>,
    _link: PhantomData<L>,
}

impl<L: Link> Default for RqStack<L> {
    fn default() -> Self {
        Self {
            head: AtomicPtr::new(ptr::null_mut()),
            _link: PhantomData,
        }
    }
}

impl<L: Link> RqStack<L> {
    pub(crate) fn push(&self, rq: RqRef) {
        let next = L::of(rq);
        let mut head = self.head.load(Ordering::Acquire);
        loop {
            next.store(head, Ordering::Relaxed);
            match self
                .head
                .compare_exchange_weak(head, rq.0, Ordering::Release, Ordering::Acquire)
            {
                Ok(_) => return,
                Err(current) => head = current,
            }
        }
    }

    /// Takes the request pushed longest ago off the list, leaving the others in their order.
    pub(crate) fn take_oldest(&self) -> Option<RqRef> {
        // Taking the whole list (a swap) and putting the rest back never races with another
        // taker over one node, as popping single nodes off a lock-free stack would (ABA).
        let newest = self.head.swap(ptr::null_mut(), Ordering::AcqRel);
        if newest.is_null() {
            return None;
        }
        // Walk to the oldest; `last_kept` ends as the one just newer than it.
        let (mut oldest, mut last_kept) = (newest, ptr::null_mut());
        loop {
            let next = L::of(RqRef(oldest)).load(Ordering::Relaxed);
            if next.is_null() {
                break;
            }
            (last_kept, oldest) = (oldest, next);
        }
        if !last_kept.is_null() {
            L::of(RqRef(last_kept)).store(ptr::null_mut(), Ordering::Relaxed);
            self.put_back(newest);
        }
        Some(RqRef(oldest))
    }

    /// Puts the chain from `first` (newest first, null-terminated) back under whatever was
    /// pushed since it was taken, so that the list keeps its order.
    fn put_back(&self, mut first: *mut bindings::request) {
        loop {
            match self.head.compare_exchange(
                ptr::null_mut(),
                first,
                Ordering::Release,
                Ordering::Relaxed,
            ) {
                Ok(_) => return,
                Err(_) => {
                    // Newer requests arrived: take them and hang the chain below them.
                    let newer = self.head.swap(ptr::null_mut(), Ordering::AcqRel);
                    let mut tail = newer;
                    while !tail.is_null() {
                        let next = L::of(RqRef(tail)).load(Ordering::Relaxed);
                        if next.is_null() {
                            L::of(RqRef(tail)).store(first, Ordering::Relaxed);
                            first = newer;
                            break;
                        }
                        tail = next;
                    }
                }
            }
        }
    }

    /// Empties the list and hands each request to `f`, oldest first.
    pub(crate) fn take_all(&self, mut f: impl FnMut(RqRef)) {
        let mut newest_first = self.head.swap(ptr::null_mut(), Ordering::AcqRel);
        // Reverse in place: oldest first.
        let mut oldest_first = ptr::null_mut();
        while !newest_first.is_null() {
            let next = L::of(RqRef(newest_first)).load(Ordering::Relaxed);
            L::of(RqRef(newest_first)).store(oldest_first, Ordering::Relaxed);
            oldest_first = newest_first;
            newest_first = next;
        }
        while !oldest_first.is_null() {
            let rq = RqRef(oldest_first);
            // Read before `f`, which may push the request again.
            oldest_first = L::of(rq).load(Ordering::Relaxed);
            f(rq);
        }
    }
}
