// SPDX-License-Identifier: GPL-2.0

//! What an administrator asks of a running array's members (`graidctl fail`, `add`), carried out by
//! the worker: a member's health changes only there (see `array.rs`), so a request from an
//! ioctl is posted here, the worker is kicked, and the caller waits for the worker to finish
//! (the platform's flush) before it reads the outcome.

use super::array::{ArrayEngine, Store};
use super::members::{AtomicUuid, Health, MemberSet, MemberState};
use super::platform::{MemberEvent, Platform};
use super::superblock::{Slot, MAX_SLOTS, UUID_LEN};
use core::sync::atomic::{AtomicU32, Ordering};

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

/// Why a device could not be added.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AddError {
    /// No such member.
    NoMember,
    /// Not offered (no level refuses an add now; kept for the platform's errno).
    Unsupported,
    /// The member is not faulty: its role is taken.
    RoleTaken,
    /// The slot table has no free entry for the device.
    NoSlot,
    /// The new member could not be recorded in any superblock (the array is broken).
    NotRecorded,
}

/// `valid | kind | member << 8 | slot << 16` of a posted add.
const ADD_POSTED: u32 = 1;
/// The posted device becomes a spare (`member` is unused).
const ADD_SPARE: u32 = 2;
/// The spare in `slot` leaves the array.
const REMOVE_SPARE: u32 = 4;
/// The spare in `slot` replaces member `member` (`replace.rs`).
pub(super) const REPLACE: u32 = 8;
/// The platform moved the replacement's device: record the outcome.
pub(super) const REPLACE_END: u32 = 16;
/// With a plain add: the device comes back with what the bitmap covers
/// ([`ArrayEngine::bitmap_covers`]); its rebuild only visits marked regions.
const RE_ADD: u32 = 32;

/// A device to add, posted for the worker: the member (role) it takes, its UUID and slot.
#[derive(Debug)]
pub struct AddRequest {
    what: AtomicU32,
    uuid: AtomicUuid,
}

impl AddRequest {
    pub const fn new() -> Self {
        Self {
            what: AtomicU32::new(0),
            uuid: AtomicUuid::zero(),
        }
    }
}

impl Default for AddRequest {
    fn default() -> Self {
        Self::new()
    }
}

impl<M: Store> ArrayEngine<M> {
    /// The member a device added now would take: the first faulty one (if it still holds its
    /// device, the device added becomes a spare and takes over: see [`Self::takeover`]).
    /// `Err` says why none can (`RoleTaken`: none is faulty; a device added is a spare). A
    /// RAID 0 has nothing to rebuild a member from: a device added is a spare that waits for a
    /// restripe onto more members (`reshape_run.rs`).
    pub fn add_target(&self) -> Result<u32, AddError> {
        if !self.redundant() {
            return Err(AddError::RoleTaken);
        }
        (0u32..)
            .zip(self.members())
            .find(|(_, m)| m.health() == Health::Faulty)
            .map(|(i, _)| i)
            .ok_or(AddError::RoleTaken)
    }

    /// A slot-table entry for a new device, held by no member or spare: one never used
    /// first; else one a device left (faulty, removed), as md reuses a removed device's
    /// number, or the table (64 entries) would fill up over an array's life. The device that
    /// left it cannot come back through it: it missed the update that marked it faulty (or
    /// removed it) and the one that gives its entry away, and assembly refuses a superblock
    /// two updates behind as stale.
    pub fn free_slot(&self) -> Option<u32> {
        let spares = self.spares.slot_bits();
        let replacing = self.replacing_slot();
        let free = |i: &u32| {
            spares & (1u64 << i) == 0
                && Some(*i) != replacing
                && !self.members().iter().any(|m| m.slot() == *i)
        };
        let never_used = |i: &u32| {
            self.superblock.slots.get(*i as usize) == Some(&Slot::Empty)
                && self.retired_slots.load(Ordering::SeqCst) & (1u64 << i) == 0
        };
        let slots = || 0..MAX_SLOTS as u32;
        (slots().filter(free).find(never_used)).or_else(|| slots().find(free))
    }

    /// Slot-table entry `slot` is taken by a new device (a member or a spare): retired no
    /// more, if a device left it before ([`Self::free_slot`]).
    fn take_slot(&self, slot: u32) {
        let bit = 1u64.checked_shl(slot).unwrap_or(0);
        self.retired_slots.fetch_and(!bit, Ordering::SeqCst);
    }

    /// A spare to move into a failed member's place now: `(member, spare slot, spare UUID)`,
    /// the first faulty member and the first spare, if the array has both and the rebuild has
    /// something to read from.
    pub fn takeover(&self) -> Option<(u32, u32, [u8; UUID_LEN])> {
        if !self.redundant() || !self.has_all_data(None) {
            return None;
        }
        let replacing = self.replacing_slot();
        let (slot, uuid) = self.spares.iter().find(|&(s, _)| Some(s) != replacing)?;
        let member = (0u32..)
            .zip(self.members())
            .find(|(_, m)| m.health() == Health::Faulty)?
            .0;
        Some((member, slot, uuid))
    }

    /// Posts a new spare (`uuid`, in slot-table entry `slot`) and kicks the worker; the
    /// caller then waits for the worker and reads [`Self::spare_added`]. The device must
    /// already be reachable for its superblock writes. One member operation at a time.
    pub fn request_spare<P: Platform>(&self, p: &P, uuid: [u8; UUID_LEN], slot: u32) {
        self.post(p, ADD_SPARE, 0, uuid, slot);
    }

    /// Whether the spare posted by [`Self::request_spare`] is in the array and recorded.
    pub fn spare_added(&self, slot: u32) -> Result<(), AddError> {
        if !self.spares.holds(slot) {
            return Err(AddError::NoSlot);
        }
        if self.broken.load(Ordering::SeqCst) {
            return Err(AddError::NotRecorded);
        }
        Ok(())
    }

    /// Posts the removal of the spare in slot-table entry `slot` and kicks the worker; once the
    /// worker ran it is out of the table, its entry retired (its device refused if it comes
    /// back), and the superblocks say so. The caller closes the device after that.
    pub fn request_spare_removal<P: Platform>(&self, p: &P, slot: u32) {
        self.post(p, REMOVE_SPARE, 0, [0; UUID_LEN], slot);
    }

    pub(super) fn post<P: Platform>(
        &self,
        p: &P,
        kind: u32,
        member: u32,
        uuid: [u8; UUID_LEN],
        slot: u32,
    ) {
        let r = &self.add_request;
        r.uuid.store(uuid);
        let what = ADD_POSTED | kind | (member & 0xff) << 8 | (slot & 0xff) << 16;
        r.what.store(what, Ordering::SeqCst);
        p.kick_worker();
    }

    /// Posts the addition of a device (`uuid`, in slot-table entry `slot`) as member `member`
    /// and kicks the worker; the caller then waits for the worker and reads
    /// [`Self::add_outcome`]. The device must already be reachable for member I/O. One at a
    /// time (the caller serialises them).
    pub fn request_add<P: Platform>(&self, p: &P, member: u32, uuid: [u8; UUID_LEN], slot: u32) {
        self.post(p, 0, member, uuid, slot);
    }

    /// [`Self::request_add`] for a device the bitmap covers ([`Self::bitmap_covers`], which
    /// the caller checked against the device's own superblock): its rebuild skips what was
    /// not written while it was away.
    pub fn request_re_add<P: Platform>(&self, p: &P, member: u32, uuid: [u8; UUID_LEN], slot: u32) {
        self.post(p, RE_ADD, member, uuid, slot);
    }

    /// The outcome of [`Self::request_add`] once the worker ran: `Ok` when the member is in
    /// use with the new device, recorded in the superblocks, and being rebuilt.
    pub fn add_outcome(&self, member: u32, uuid: &[u8; UUID_LEN]) -> Result<(), AddError> {
        let state = self
            .members()
            .get(member as usize)
            .ok_or(AddError::NoMember)?;
        if state.uuid() != *uuid || !state.is_active() {
            return Err(AddError::RoleTaken);
        }
        if self.broken.load(Ordering::SeqCst) {
            return Err(AddError::NotRecorded);
        }
        Ok(())
    }

    /// The worker's part of an add: the member takes the new device (a spare's, which leaves
    /// the spares), its old slot is retired, the superblocks record it, and the rebuild starts.
    /// Or a spare joins or leaves the spares.
    pub(super) fn handle_add_request<P: Platform>(&self, p: &P) {
        let what = self.add_request.what.swap(0, Ordering::SeqCst);
        if what & ADD_POSTED == 0 {
            return;
        }
        let (member, slot) = ((what >> 8) & 0xff, (what >> 16) & 0xff);
        let uuid = self.add_request.uuid.load();
        if what & ADD_SPARE != 0 {
            if self.spares.insert(slot, uuid) {
                self.take_slot(slot);
                // On error the array is broken, which `spare_added` reports.
                let _ = self.write_superblocks(p);
                self.want_takeover(p);
            }
            return;
        }
        if what & REPLACE != 0 {
            self.start_replace(p, member, slot);
            return;
        }
        if what & REPLACE_END != 0 {
            self.end_replace(p);
            return;
        }
        if what & REMOVE_SPARE != 0 {
            if self.spares.remove(slot) {
                self.retire_slot(slot);
                let _ = self.write_superblocks(p);
            }
            return;
        }
        let Some(state) = self.members().get(member as usize) else {
            return;
        };
        let old_slot = state.slot();
        if !state.begin_recovery(uuid, slot) {
            return;
        }
        self.take_slot(slot);
        self.spares.remove(slot);
        if old_slot != slot {
            self.retire_slot(old_slot);
        }
        self.restart_rebuild(member, what & RE_ADD != 0);
        p.member_event(member, MemberEvent::Added);
        // Its bitmap area holds whatever it held: the whole bitmap first.
        self.write_whole_bitmap(p, MemberSet::EMPTY.with(member));
        // Its log may hold entries of this epoch from an earlier life.
        self.want_log_wrap(p);
        // On error the array is broken, which `add_outcome` reports.
        let _ = self.write_superblocks(p);
    }

    /// Slot-table entry `slot` is kept, faulty, so its device is refused if it comes back.
    pub(super) fn retire_slot(&self, slot: u32) {
        let bit = 1u64.checked_shl(slot).unwrap_or(0);
        self.retired_slots.fetch_or(bit, Ordering::SeqCst);
    }

    /// Tells the platform when a spare can take a failed member's place. The worker only.
    pub(super) fn want_takeover<P: Platform>(&self, p: &P) {
        if self.takeover().is_some() {
            p.takeover_wanted();
        }
    }

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
        if member == self.replacement_index() {
            // Failed, released or never there: the replace is over either way.
            return Ok(());
        }
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
    /// data, or a heal runs (then nothing changes: unlike an I/O error, a request does not
    /// break the array).
    pub(super) fn handle_fail_requests<P: Platform>(&self, p: &P) {
        let asked = self.fail_requests.swap(0, Ordering::SeqCst);
        for member in (0..32u32).filter(|m| asked & (1 << m) != 0) {
            if member == self.replacement_index() {
                self.fail_replacement(p);
                continue;
            }
            let active = self
                .members()
                .get(member as usize)
                .is_some_and(MemberState::is_active);
            if !active {
                continue;
            }
            // A heal walks parity a lying helper may have computed: until it passed, every
            // member holds the last right copy of those stripes (`suspect.rs`).
            if !self.has_all_data(Some(member)) || self.healing() {
                self.fail_refused.fetch_or(1 << member, Ordering::SeqCst);
                continue;
            }
            self.try_fail(p, member, MemberEvent::FailedOnRequest);
        }
    }
}
