// SPDX-License-Identifier: GPL-2.0

//! Replacing a working member while it keeps serving (`graidctl replace OLD --with NEW`, md's
//! `want_replacement`): a spare of the array is copied from the member and gets every write the
//! member gets; once it holds everything it takes the member's place and the old device leaves.
//! The array never has less redundancy than before.
//!
//! - The replacement's member I/O goes to index [`ArrayEngine::replacement_index`], one past the
//!   roles: the platform holds its device there while the copy runs (so an array of
//!   [`MAX_MEMBERS`] members cannot replace: member sets are 32 bits).
//! - Every write, flush and discard for the role goes to the replacement too, from the start and
//!   everywhere (below and above the copy's offset, as a rebuild does). An error there fails
//!   only the replacement: it holds nothing anyone reads.
//! - The copy is a rebuild step (`rebuild.rs`): the same window closed to writes and the same
//!   pace. It reads the member itself; where that fails, it recomputes from the others.
//! - On disk the replacement stays a spare until the swap: a stop or crash meanwhile leaves the
//!   old member whole (it got every write) and the new device a spare; the replace is asked
//!   again.
//! - The device moves are the platform's (they wait for the array's requests to drain, which
//!   the worker must not): the worker asks with `Events::takeover_wanted`, the platform reads
//!   [`ArrayEngine::replacement`], moves the device as its stage says, and posts
//!   [`ArrayEngine::request_replace_end`], on which the worker records the outcome.

use super::array::{ArrayEngine, Store};
use super::geometry::MAX_MEMBERS;
use super::members::{AtomicUuid, MemberSet, MemberState};
use super::platform::{MemberEvent, Platform};
use super::scrub::ScrubProgress;
use super::superblock::UUID_LEN;
use core::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};

code_enum! {
    /// Where a replace stands.
    pub enum ReplaceStage {
        /// None runs.
        Idle,
        /// The copy runs; writes go to both devices.
        Copying,
        /// The copy is complete; writes go to both until the platform swaps the devices.
        Done,
        /// The replacement failed (an I/O error, by hand, or nothing left to copy from): the
        /// platform releases its device; it has left the spares.
        Failed,
        /// The member being replaced failed: the replacement goes back to the spares (the
        /// platform moves its device there), which take the member's place as usual.
        Abandoned,
    }
}

/// Why a replace cannot start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplaceError {
    /// RAID 0: nothing to copy from if the member fails meanwhile (md refuses too).
    Unsupported,
    /// The array has [`MAX_MEMBERS`] members: no index is left for the replacement.
    TooManyMembers,
    /// No such member.
    NoMember,
    /// The member is not in use and in sync: it is not replaced but rebuilt.
    NotInSync,
    /// Another member is missing or failed: a device added goes there (rebuild first).
    Degraded,
    /// A replace, rebuild or scrub runs.
    Busy,
    /// The device is not a spare of the array.
    NoSpare,
}

/// A replace, as [`ArrayEngine::replacement`] reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Replacement {
    /// The member (role) being replaced.
    pub role: u32,
    /// The replacement's slot-table entry and UUID (a spare's).
    pub slot: u32,
    pub uuid: [u8; UUID_LEN],
    pub stage: ReplaceStage,
    /// Member sectors copied.
    pub copied: u64,
}

/// The replace's shared state. Changed only by the worker.
#[derive(Debug)]
pub struct ReplaceState {
    stage: AtomicU8,
    role: AtomicU32,
    slot: AtomicU32,
    uuid: AtomicUuid,
    copied: AtomicU64,
}

impl ReplaceState {
    pub const fn new() -> Self {
        Self {
            stage: AtomicU8::new(0),
            role: AtomicU32::new(0),
            slot: AtomicU32::new(0),
            uuid: AtomicUuid::zero(),
            copied: AtomicU64::new(0),
        }
    }

    fn stage(&self) -> ReplaceStage {
        ReplaceStage::from_code(self.stage.load(Ordering::SeqCst))
    }

    fn set_stage(&self, stage: ReplaceStage) {
        self.stage.store(stage.code(), Ordering::SeqCst);
    }

    /// The copy reached `offset` member sectors.
    pub(super) fn set_copied(&self, offset: u64) {
        self.copied.store(offset, Ordering::SeqCst);
    }
}

impl Default for ReplaceState {
    fn default() -> Self {
        Self::new()
    }
}

impl<M: Store> ArrayEngine<M> {
    /// The member index the replacement's I/O goes to: one past the roles.
    pub fn replacement_index(&self) -> u32 {
        self.geometry().members()
    }

    /// The replace running or waiting for the platform, if any.
    pub fn replacement(&self) -> Option<Replacement> {
        let r = &self.replace;
        let stage = r.stage();
        (stage != ReplaceStage::Idle).then(|| Replacement {
            role: r.role.load(Ordering::SeqCst),
            slot: r.slot.load(Ordering::SeqCst),
            uuid: r.uuid.load(),
            stage,
            copied: r.copied.load(Ordering::SeqCst),
        })
    }

    /// Whether member `role` could be replaced now; the spare is checked when the worker
    /// starts it.
    pub fn replace_allowed(&self, role: u32) -> Result<(), ReplaceError> {
        if !self.redundant() {
            return Err(ReplaceError::Unsupported);
        }
        if self.geometry().members() >= MAX_MEMBERS {
            return Err(ReplaceError::TooManyMembers);
        }
        let member = self
            .members()
            .get(role as usize)
            .ok_or(ReplaceError::NoMember)?;
        if !member.is_in_sync() {
            return Err(ReplaceError::NotInSync);
        }
        if self.members().iter().any(MemberState::is_faulty) {
            return Err(ReplaceError::Degraded);
        }
        let scrubbing = matches!(self.scrub_progress(), ScrubProgress { mode: Some(_), .. });
        let busy = self.replacement().is_some() || self.rebuild_target().is_some();
        if busy || scrubbing || self.reshaping() {
            return Err(ReplaceError::Busy);
        }
        Ok(())
    }

    /// Posts a replace of member `role` by the spare in slot-table entry `slot` and kicks the
    /// worker; the caller then waits for the worker and reads [`Self::replace_outcome`]. The
    /// spare's device must already be reachable at [`Self::replacement_index`].
    pub fn request_replace<P: Platform>(&self, p: &P, role: u32, slot: u32) {
        self.post(p, super::admin::REPLACE, role, [0; UUID_LEN], slot);
    }

    /// Whether the replace posted by [`Self::request_replace`] runs.
    pub fn replace_outcome(&self, role: u32, slot: u32) -> Result<(), ReplaceError> {
        match self.replacement() {
            Some(r) if r.role == role && r.slot == slot => Ok(()),
            Some(_) => Err(ReplaceError::Busy),
            None if !self.spares.holds(slot) => Err(ReplaceError::NoSpare),
            None => self.replace_allowed(role),
        }
    }

    /// Posts the end of a replace once the platform moved the device as the stage says
    /// (`Done`: into the role, the old one released; `Failed`: released; `Abandoned`: back
    /// with the spares) and kicks the worker, which records it; the caller waits for it.
    pub fn request_replace_end<P: Platform>(&self, p: &P) {
        self.post(p, super::admin::REPLACE_END, 0, [0; UUID_LEN], 0);
    }

    /// The worker's part of [`Self::request_replace`].
    pub(super) fn start_replace<P: Platform>(&self, p: &P, role: u32, slot: u32) {
        if self.replace_allowed(role).is_err() {
            return;
        }
        let Some((_, uuid)) = self.spares.iter().find(|&(s, _)| s == slot) else {
            return;
        };
        let r = &self.replace;
        r.role.store(role, Ordering::SeqCst);
        r.slot.store(slot, Ordering::SeqCst);
        r.uuid.store(uuid);
        r.set_copied(0);
        self.rebuild.rate.stop();
        // Last: the write path sends to the replacement from here on.
        r.set_stage(ReplaceStage::Copying);
        p.member_event(role, MemberEvent::ReplaceStarted);
        p.kick_worker();
    }

    /// The worker's part of [`Self::request_replace_end`].
    pub(super) fn end_replace<P: Platform>(&self, p: &P) {
        let Some(r) = self.replacement() else {
            return;
        };
        match r.stage {
            ReplaceStage::Done => {
                let Some(member) = self.members().get(r.role as usize) else {
                    return;
                };
                let old_slot = member.slot();
                member.take_device(r.uuid, r.slot);
                self.spares.remove(r.slot);
                self.retire_slot(old_slot);
                self.replace.set_stage(ReplaceStage::Idle);
                self.write_whole_bitmap(p, MemberSet::EMPTY.with(r.role));
                // Void the log now, while nothing is in flight (the platform waits for this
                // with the array frozen): the role's new device holds none of the entries of
                // this epoch (and maybe some of an earlier life), and a replay that read its
                // log whole would take their absence for torn writes and drop their barriers,
                // replaying older partial parity over newer data (review 3's R1).
                self.void_log(p);
                // On error the array is broken, which DETAIL shows.
                let _ = self.write_superblocks(p);
                p.member_event(r.role, MemberEvent::Replaced);
            }
            ReplaceStage::Failed => {
                self.replace.set_stage(ReplaceStage::Idle);
                // Records the replacement's entry as faulty.
                let _ = self.write_superblocks(p);
            }
            ReplaceStage::Abandoned => {
                self.replace.set_stage(ReplaceStage::Idle);
                self.want_takeover(p);
            }
            ReplaceStage::Idle | ReplaceStage::Copying => {}
        }
    }

    /// Where writes to member `member` are copied too: the replacement's index while one
    /// copies or waits for the swap. Any context.
    pub(super) fn replica_of(&self, member: u32) -> Option<u32> {
        let role = self.replace.role.load(Ordering::SeqCst);
        (self.replica_live() && role == member).then(|| self.replacement_index())
    }

    /// The replacement takes writes (for flushes: it is one more device to flush).
    pub(super) fn replica_live(&self) -> bool {
        matches!(
            self.replace.stage(),
            ReplaceStage::Copying | ReplaceStage::Done
        )
    }

    /// The slot-table entry of the spare that is the replacement, while its device is not with
    /// the spares.
    pub(super) fn replacing_slot(&self) -> Option<u32> {
        self.replacement().map(|r| r.slot)
    }

    /// The replacement failed: it leaves the spares, its entry is retired (its device is
    /// refused if it comes back), and the platform is asked to release it. The worker only.
    pub(super) fn fail_replacement<P: Platform>(&self, p: &P) {
        let Some(r) = self.replacement() else {
            return;
        };
        if !matches!(r.stage, ReplaceStage::Copying | ReplaceStage::Done) {
            return;
        }
        self.replace.set_stage(ReplaceStage::Failed);
        self.spares.remove(r.slot);
        self.retire_slot(r.slot);
        p.member_event(r.role, MemberEvent::ReplacementFailed);
        p.takeover_wanted();
    }

    /// Gives up a replace whose member failed: the replacement goes back to the spares. The
    /// worker only.
    pub(super) fn settle_replacement<P: Platform>(&self, p: &P) {
        let Some(r) = self.replacement() else {
            return;
        };
        let active = self
            .members()
            .get(r.role as usize)
            .is_some_and(MemberState::is_active);
        if !active && matches!(r.stage, ReplaceStage::Copying | ReplaceStage::Done) {
            self.replace.set_stage(ReplaceStage::Abandoned);
            self.rebuild.rate.stop();
            p.member_event(r.role, MemberEvent::ReplaceAbandoned);
            p.takeover_wanted();
        }
    }

    /// The copy is complete: the platform swaps the devices.
    pub(super) fn replace_copied<P: Platform>(&self, p: &P) {
        self.replace
            .set_copied(self.geometry().member_data_sectors());
        self.replace.set_stage(ReplaceStage::Done);
        self.rebuild.rate.stop();
        p.takeover_wanted();
    }

    /// The member whose data the replace copies now, if it copies.
    pub(super) fn replace_copying(&self) -> Option<(u32, u64)> {
        let r = &self.replace;
        (r.stage() == ReplaceStage::Copying).then(|| {
            (
                r.role.load(Ordering::SeqCst),
                r.copied.load(Ordering::SeqCst),
            )
        })
    }
}
