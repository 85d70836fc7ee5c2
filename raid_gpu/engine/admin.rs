// SPDX-License-Identifier: GPL-2.0

//! What an administrator asks of a running array's members (`graidctl fail`), carried out by
//! the worker: a member's health changes only there (see `array.rs`), so a request from an
//! ioctl is posted here, the worker is kicked, and the caller waits for the worker to finish
//! (the platform's flush) before it reads the outcome.

use super::array::ArrayEngine;
use super::members::{Health, MemberState};
use super::platform::{MemberEvent, Platform};
use core::ops::Deref;
use core::sync::atomic::Ordering;

/// Why a member could not be failed on request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailError {
    /// No such member.
    NoMember,
    /// It holds the last copy of some data: failing it would lose data (nothing changed).
    LastCopy,
    /// The failure could not be recorded in any superblock (the array is broken).
    NotRecorded,
}

impl<M: Deref<Target = [MemberState]>> ArrayEngine<M> {
    /// Posts a request to fail member `member` and kicks the worker. The caller then waits for
    /// the worker and reads [`Self::fail_outcome`]. Any context; one request per member at a
    /// time (the caller serialises them).
    pub fn request_fail<P: Platform>(&self, p: &P, member: u32) {
        let Some(bit) = 1u32.checked_shl(member) else {
            return;
        };
        self.fail_refused.fetch_and(!bit, Ordering::SeqCst);
        self.fail_requests.fetch_or(bit, Ordering::SeqCst);
        p.kick_worker();
    }

    /// The outcome of [`Self::request_fail`] once the worker ran: `Ok` when the member is out
    /// of use and its failure recorded in the superblocks.
    pub fn fail_outcome(&self, member: u32) -> Result<(), FailError> {
        let state = self
            .members()
            .get(member as usize)
            .ok_or(FailError::NoMember)?;
        let refused = 1u32
            .checked_shl(member)
            .is_some_and(|bit| self.fail_refused.load(Ordering::SeqCst) & bit != 0);
        match state.health() {
            _ if refused => Err(FailError::LastCopy),
            Health::Faulty => Ok(()),
            Health::Failing | Health::Active => Err(FailError::NotRecorded),
        }
    }

    /// The worker's part: fails every member asked for, unless it holds the last copy of some
    /// data (then nothing changes: unlike an I/O error, a request does not break the array).
    pub(super) fn handle_fail_requests<P: Platform>(&self, p: &P) {
        let asked = self.fail_requests.swap(0, Ordering::SeqCst);
        for member in (0..32u32).filter(|m| asked & (1 << m) != 0) {
            let active = self
                .members()
                .get(member as usize)
                .is_some_and(MemberState::is_active);
            if !active {
                continue;
            }
            if !self.has_all_data(Some(member)) {
                self.fail_refused.fetch_or(1 << member, Ordering::SeqCst);
                continue;
            }
            self.try_fail(p, member, MemberEvent::FailedOnRequest);
        }
    }
}
