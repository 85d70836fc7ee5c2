// SPDX-License-Identifier: GPL-2.0

//! Completion accounting for one request: how many member I/Os are out, the first error, and
//! whether the request must run again because a member failed under it.

use super::platform::Status;
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU8, Ordering};

/// Per-request state, kept by the platform with the request (the PDU in the kernel) and reset
/// by the engine each time the request is submitted.
#[derive(Debug)]
pub struct RequestState {
    /// Member I/Os in flight, plus one held by the submitter while it sends them.
    pending: AtomicU32,
    /// First error status seen ([`Status`] code, 0 = OK).
    status: AtomicU8,
    /// A member I/O failed on a member that has redundancy: send the request again, without it.
    retry: AtomicBool,
}

impl Default for RequestState {
    fn default() -> Self {
        Self::new()
    }
}

/// What the last reference on a request decides.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Member I/Os are still out.
    Pending,
    /// End the request with this status.
    End(Status),
    /// Submit the request again.
    Requeue,
}

impl RequestState {
    pub const fn new() -> Self {
        Self {
            pending: AtomicU32::new(0),
            status: AtomicU8::new(0),
            retry: AtomicBool::new(false),
        }
    }

    /// Starts a submission: only the submitter's reference, no error, no retry.
    pub(crate) fn begin(&self) {
        self.status.store(0, Ordering::Relaxed);
        self.retry.store(false, Ordering::Relaxed);
        self.pending.store(1, Ordering::Release);
    }

    /// One more member I/O is about to be sent.
    pub(crate) fn add_piece(&self) {
        self.pending.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn set_retry(&self) {
        self.retry.store(true, Ordering::Relaxed);
    }

    /// Drops one reference with the status it ended with.
    pub(crate) fn put(&self, status: Status) -> Outcome {
        if status != Status::Ok {
            // Keep the first error.
            let _ = self.status.compare_exchange(
                0,
                status.to_code(),
                Ordering::Relaxed,
                Ordering::Relaxed,
            );
        }
        // AcqRel: the last one sees every other reference's status and retry stores.
        if self.pending.fetch_sub(1, Ordering::AcqRel) != 1 {
            return Outcome::Pending;
        }
        if self.retry.load(Ordering::Relaxed) {
            Outcome::Requeue
        } else {
            Outcome::End(Status::from_code(self.status.load(Ordering::Relaxed)))
        }
    }

    /// Member I/Os in flight (plus the submitter's reference while it runs); for tests.
    pub fn pending(&self) -> u32 {
        self.pending.load(Ordering::Acquire)
    }
}
