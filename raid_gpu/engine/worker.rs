// SPDX-License-Identifier: GPL-2.0

//! The array's worker: one serialised task per array, in process context, that does what the
//! I/O path must not: decide member failures, repair read errors, record failures in the
//! superblocks (`metadata.rs`), end the writes that waited for that, and mark the array dirty
//! and clean (`safe_mode.rs`).
//!
//! # Member errors (md's rules)
//!
//! - A write or flush error fails the member, unless it holds the last copy of some data: then
//!   the member stays, the request fails and the array takes no more writes (broken). A
//!   request whose failed member was dropped succeeded on the other copies and ends well once
//!   the failure is recorded.
//! - A read error is repaired first (md's `fix_read_error`): writes stop, the range is read
//!   from the other copies, written back to the members that failed the read and read back
//!   from them. Only a member that fails that rewrite or re-read is failed. With no other copy
//!   the read fails and nothing else happens.
//! - Discard errors never fail a member, nor the request (the I/O path drops them, as md does:
//!   discarded data is undefined anyway).

use super::array::{ArrayEngine, Store};
use super::members::MemberSet;
use super::platform::{MemberEvent, Op, Platform, Status, WorkList};
use super::request::{Phase, RequestState};
use core::sync::atomic::Ordering;

impl<M: Store> ArrayEngine<M> {
    /// The worker's body: the platform runs it in process context, one call at a time, whenever
    /// the engine kicked it. May sleep (superblock writes, waiting for writes to drain).
    pub fn work<P: Platform>(&self, p: &P) {
        // Writes held for their followers whose time is up go on.
        self.release_holds(p, false);
        loop {
            let mut thawed = false;
            // Before a member may be failed: a heal refuses it.
            self.heal_step(p);
            self.handle_fail_requests(p);
            // Before the writes waiting for them are sent again.
            self.mark_dirty_for_writes(p);
            self.write_wanted_bits(p);
            self.log_step(p);
            p.take_all(WorkList::Deferred, |rq| thawed |= self.handle(p, rq));
            if self.failing.load(Ordering::SeqCst) > 0 {
                // On error the array is broken, and the parked writes end with an error below.
                let _ = self.write_superblocks(p);
            }
            self.release_parked(p);
            self.settle_replacement(p);
            // A repair that ended let the waiting writes go: send them now.
            if !thawed {
                break;
            }
        }
        self.handle_add_request(p);
        self.reshape_step(p);
        // Both walk one geometry: after a reshape.
        if !self.reshaping() {
            self.rebuild_step(p);
            self.scrub_step(p);
        }
        self.safe_mode_step(p);
        self.clean_bits(p);
    }

    /// Acts on one deferred request. True if it ended the last repair (writes may go again).
    fn handle<P: Platform>(&self, p: &P, rq: P::Request) -> bool {
        let state = p.state(rq);
        match state.phase() {
            Phase::Waiting if self.frozen.load(Ordering::SeqCst) || self.reshape_holds(state) => {
                // The repair's end, or the reshape's next step, sends it again.
                p.push(WorkList::Deferred, rq);
                false
            }
            Phase::Waiting => {
                self.run_pass(p, rq, Phase::Normal);
                false
            }
            Phase::Parked => {
                p.push(WorkList::Parked, rq);
                false
            }
            Phase::Stripe => {
                self.stripe_errors(p, rq);
                false
            }
            Phase::Normal if state.op() == Op::Read && self.geometry().level().has_parity() => {
                self.direct_read_errors(p, rq);
                false
            }
            phase if state.op() == Op::Read => self.recover_read(p, rq, state, phase),
            _ => {
                // A write or flush some members failed: drop them, or fail the request where
                // one holds the last copy.
                let mut status = state.status();
                for member in state.errors().iter() {
                    if !self.try_fail(p, member, MemberEvent::Failed) {
                        status = Status::IoError;
                    }
                }
                self.complete(p, rq, status);
                false
            }
        }
    }

    /// The next step of a read after a pass ended in `phase`. True if it ended the last repair.
    fn recover_read<P: Platform>(
        &self,
        p: &P,
        rq: P::Request,
        state: &RequestState,
        phase: Phase,
    ) -> bool {
        let (status, errors) = (state.status(), state.errors());
        match phase {
            Phase::Normal if errors.is_empty() => {
                self.complete(p, rq, status);
                false
            }
            Phase::Normal => {
                state.add_avoid(errors);
                if !self.readable(state.start(), state.sectors(), state.avoid()) {
                    // The last copy failed to read: the read fails, nothing else changes.
                    self.complete(p, rq, Status::IoError);
                    return false;
                }
                self.freeze(p);
                self.run_pass(p, rq, Phase::Recover);
                false
            }
            Phase::Recover if !errors.is_empty() => {
                state.add_avoid(errors);
                self.recover_again(p, rq, state)
            }
            Phase::Recover => {
                let targets = self.active(state.avoid());
                if status == Status::Ok && !targets.is_empty() && state.try_repair() {
                    state.set_repair_targets(targets);
                    self.run_pass(p, rq, Phase::RepairWrite);
                    false
                } else {
                    self.finish_repair(p, rq, status)
                }
            }
            Phase::RepairWrite => {
                for member in errors.iter() {
                    self.try_fail(p, member, MemberEvent::Failed);
                }
                let verify = self.active(state.repair_targets().minus(errors));
                state.set_repair_targets(verify);
                if status == Status::Ok && !verify.is_empty() {
                    self.run_pass(p, rq, Phase::Verify);
                    false
                } else {
                    // The buffers still hold what the recover pass read.
                    self.finish_repair(p, rq, Status::Ok)
                }
            }
            Phase::Verify if errors.is_empty() && status == Status::Ok => {
                for member in state.repair_targets().iter() {
                    self.read_error_repaired(p, member);
                }
                self.finish_repair(p, rq, Status::Ok)
            }
            Phase::Verify => {
                for member in errors.iter() {
                    self.try_fail(p, member, MemberEvent::Failed);
                }
                state.add_avoid(errors);
                // A failed read may have left anything in the buffers: read the good copy again
                // (the repair is not tried twice).
                self.recover_again(p, rq, state)
            }
            Phase::Waiting | Phase::Parked | Phase::Stripe => false,
        }
    }

    /// Stops writes for a repair and waits until none is in flight: a write landing between the
    /// recover read and the rewrite would be overwritten with older data (md's `freeze_array`).
    fn freeze<P: Platform>(&self, p: &P) {
        self.repairs.fetch_add(1, Ordering::SeqCst);
        self.frozen.store(true, Ordering::SeqCst);
        while p.any_request(RequestState::is_writing) {
            // A held write waits for the worker otherwise.
            self.release_holds(p, true);
            p.pause();
        }
    }

    /// Ends a repaired read; the last repair lets writes go again. True if it did.
    /// Another recover pass from the copies not yet avoided; the read fails if none is left.
    fn recover_again<P: Platform>(&self, p: &P, rq: P::Request, state: &RequestState) -> bool {
        if self.readable(state.start(), state.sectors(), state.avoid()) {
            self.run_pass(p, rq, Phase::Recover);
            false
        } else {
            self.finish_repair(p, rq, Status::IoError)
        }
    }

    fn finish_repair<P: Platform>(&self, p: &P, rq: P::Request, status: Status) -> bool {
        self.complete(p, rq, status);
        let before = self
            .repairs
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .unwrap_or(0);
        if before == 1 {
            self.frozen.store(false, Ordering::SeqCst);
            return true;
        }
        false
    }

    /// Ends the parked writes if the failures they wait for are recorded (or never will be:
    /// then they fail).
    fn release_parked<P: Platform>(&self, p: &P) {
        // Taken first, checked after: a write parked after the check would otherwise be ended
        // before a failure that began meanwhile is recorded.
        p.take_all(WorkList::Parked, |rq| {
            if self.failing.load(Ordering::SeqCst) == 0 {
                self.end(p, rq, Status::Ok);
            } else if self.broken.load(Ordering::SeqCst) {
                self.end(p, rq, Status::IoError);
            } else {
                p.push(WorkList::Parked, rq);
            }
        });
    }

    /// A read error of member `member` was repaired: the data written back from another copy
    /// (or the parity) and read again. Counted (DETAIL's corrected errors) and told.
    pub(super) fn read_error_repaired<P: Platform>(&self, p: &P, member: u32) {
        if let Some(m) = self.members().get(member as usize) {
            m.count_corrected();
        }
        p.member_event(member, MemberEvent::ReadErrorRepaired);
    }

    /// The members of `set` still in use.
    fn active(&self, set: MemberSet) -> MemberSet {
        set.iter()
            .filter(|&m| self.usable(m, MemberSet::EMPTY))
            .fold(MemberSet::EMPTY, MemberSet::with)
    }
}
