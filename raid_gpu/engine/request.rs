// SPDX-License-Identifier: GPL-2.0

//! Per-request state: what the request asks for, which pass of its life it is in, how many member
//! I/Os of that pass are out, the first error, and which members returned errors.
//!
//! A request runs one or more *passes*. The first ([`Phase::Normal`]) is sent from the submitter;
//! when it ends with member errors on a level with redundancy, the array's worker takes over and
//! runs the passes of error handling (recover, repair write, verify) one after the other.

use super::members::MemberSet;
use super::platform::{Op, Status};
use super::stripe::StripeState;
use core::ops::Range;
use core::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};

code_enum! {
    /// Which pass a request is in, or where it waits.
    pub enum Phase {
        /// Its first pass, as the submitter planned it.
        Normal,
        /// Re-reading from copies on members that returned no error.
        Recover,
        /// Writing the recovered data back to the members whose read failed.
        RepairWrite,
        /// Reading the repaired range back from those members.
        Verify,
        /// Waiting for the worker to send it: writes wait while a read error is being repaired.
        Waiting,
        /// Done, waiting for a member failure it depends on to reach the superblocks.
        Parked,
        /// A RAID 5/6 request in the stripe engine (its steps: `StripeState`).
        Stripe,
    }
}

code_enum! {
    /// Which geometry maps a request while a reshape runs (`reshape_run.rs`).
    pub enum Side {
        /// No reshape runs: the array's geometry, as it is now.
        Current,
        /// Being routed: the worker counts it as maybe old until it knows.
        Routing,
        /// The reshape's old geometry and data offset.
        Old,
        /// The reshape's new geometry and data offset.
        New,
    }
}

/// Per-request state, kept by the platform with the request (the PDU in the kernel).
#[derive(Debug)]
pub struct RequestState {
    /// Member I/Os of the current pass in flight, plus one held by whoever sends them.
    pending: AtomicU32,
    /// First error status of the pass ([`Status`] code, 0 = OK).
    status: AtomicU8,
    /// Members that returned an I/O error in this pass (handled by the worker).
    errors: AtomicU32,
    /// Members not to read from again for this request.
    avoid: AtomicU32,
    /// Members the repair writes to (then verifies).
    repair: AtomicU32,
    /// A [`Phase`] code.
    phase: AtomicU8,
    /// The request: an [`Op`] code, first array sector, length.
    op: AtomicU8,
    start: AtomicU64,
    sectors: AtomicU64,
    /// The repair was tried (it is tried once per request).
    repair_tried: AtomicU8,
    /// The write-intent regions the request is counted in (`write_intent.rs`), packed by
    /// [`pack_regions`]; 0: none. Kept, not recomputed, so the counts leave the regions they
    /// joined even where a reshape maps the request again.
    regions_held: AtomicU64,
    /// A [`Side`] code: which geometry maps it.
    side: AtomicU8,
    /// RAID 5/6 progress.
    stripe: StripeState,
}

/// A region range as [`RequestState`] keeps it: both ends in 32 bits (a bitmap of 2^32
/// regions would not fit any member's reserved area); an empty range packs to 0.
fn pack_regions(regions: Range<u64>) -> u64 {
    if regions.is_empty() {
        return 0;
    }
    let end = regions.end.min(u64::from(u32::MAX));
    (regions.start.min(end) << 32) | end
}

fn unpack_regions(packed: u64) -> Range<u64> {
    (packed >> 32)..(packed & u64::from(u32::MAX))
}

impl Default for RequestState {
    fn default() -> Self {
        Self::new()
    }
}

/// What the last reference of a pass found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PassResult {
    /// The first error reported as the request's own.
    pub(crate) status: Status,
    /// Members that returned I/O errors the worker must handle.
    pub(crate) errors: MemberSet,
}

impl RequestState {
    pub const fn new() -> Self {
        Self {
            pending: AtomicU32::new(0),
            status: AtomicU8::new(0),
            errors: AtomicU32::new(0),
            avoid: AtomicU32::new(0),
            repair: AtomicU32::new(0),
            phase: AtomicU8::new(0),
            op: AtomicU8::new(0),
            start: AtomicU64::new(0),
            sectors: AtomicU64::new(0),
            repair_tried: AtomicU8::new(0),
            regions_held: AtomicU64::new(0),
            side: AtomicU8::new(0),
            stripe: StripeState::new(),
        }
    }

    /// RAID 5/6 progress.
    pub(crate) fn stripe(&self) -> &StripeState {
        &self.stripe
    }

    /// A new request: `op` on `sectors` sectors at `start`; nothing sent yet.
    pub(crate) fn begin(&self, op: Op, start: u64, sectors: u64) {
        self.op.store(op.to_code(), Ordering::Relaxed);
        self.start.store(start, Ordering::Relaxed);
        self.sectors.store(sectors, Ordering::Relaxed);
        self.avoid.store(0, Ordering::Relaxed);
        self.repair.store(0, Ordering::Relaxed);
        self.repair_tried.store(0, Ordering::Relaxed);
        self.regions_held.store(0, Ordering::Relaxed);
        self.begin_pass(Phase::Normal);
    }

    /// The write-intent regions the request is counted in (empty: none).
    pub(crate) fn held_regions(&self) -> Range<u64> {
        unpack_regions(self.regions_held.load(Ordering::Relaxed))
    }

    /// Notes that the request is counted in `regions` (only its own pass touches this).
    pub(crate) fn hold_regions(&self, regions: Range<u64>) {
        self.regions_held
            .store(pack_regions(regions), Ordering::Relaxed);
    }

    /// Notes that the request is counted in no region; the regions it was (their counts are
    /// to be dropped).
    pub(crate) fn release_regions(&self) -> Range<u64> {
        unpack_regions(self.regions_held.swap(0, Ordering::Relaxed))
    }

    /// A new pass: only the sender's reference, no error. SeqCst: a worker draining writes
    /// (`ArrayEngine::freeze`) must see this before the submitter looks at the freeze flag.
    pub(crate) fn begin_pass(&self, phase: Phase) {
        self.status.store(0, Ordering::Relaxed);
        self.errors.store(0, Ordering::Relaxed);
        self.phase.store(phase.code(), Ordering::Relaxed);
        self.pending.store(1, Ordering::SeqCst);
    }

    /// The request waits without I/O (`Waiting`, `Parked`).
    pub(crate) fn set_idle(&self, phase: Phase) {
        self.phase.store(phase.code(), Ordering::Relaxed);
        self.pending.store(0, Ordering::SeqCst);
    }

    pub fn op(&self) -> Op {
        Op::from_code(self.op.load(Ordering::Relaxed))
    }

    pub fn start(&self) -> u64 {
        self.start.load(Ordering::Relaxed)
    }

    pub fn sectors(&self) -> u64 {
        self.sectors.load(Ordering::Relaxed)
    }

    /// Which geometry maps it.
    pub fn side(&self) -> Side {
        Side::from_code(self.side.load(Ordering::SeqCst))
    }

    /// SeqCst: a request marked [`Side::Routing`] before it reads the reshape's front is seen
    /// by a worker that moved the front before it looks (`reshape_run.rs`).
    pub(crate) fn set_side(&self, side: Side) {
        self.side.store(side.code(), Ordering::SeqCst);
    }

    /// [`Self::set_side`] where no worker looks for it meanwhile (no reshape runs).
    pub(crate) fn set_side_relaxed(&self, side: Side) {
        self.side.store(side.code(), Ordering::Relaxed);
    }

    pub fn phase(&self) -> Phase {
        Phase::from_code(self.phase.load(Ordering::Relaxed))
    }

    /// Member I/Os in flight (plus the sender's reference while it sends).
    pub fn pending(&self) -> u32 {
        self.pending.load(Ordering::SeqCst)
    }

    /// True while the request writes to members (a pass of a write, flush or discard is out).
    pub fn is_writing(&self) -> bool {
        self.op().is_write() && self.pending() > 0
    }

    /// The status the request ends with, once its passes are done.
    pub(crate) fn status(&self) -> Status {
        Status::from_code(self.status.load(Ordering::Relaxed))
    }

    /// Members that returned I/O errors in the last pass.
    pub(crate) fn errors(&self) -> MemberSet {
        MemberSet::from_bits(self.errors.load(Ordering::Relaxed))
    }

    pub(crate) fn avoid(&self) -> MemberSet {
        MemberSet::from_bits(self.avoid.load(Ordering::Relaxed))
    }

    pub(crate) fn add_avoid(&self, members: MemberSet) {
        self.avoid.fetch_or(members.bits(), Ordering::Relaxed);
    }

    pub(crate) fn repair_targets(&self) -> MemberSet {
        MemberSet::from_bits(self.repair.load(Ordering::Relaxed))
    }

    pub(crate) fn set_repair_targets(&self, members: MemberSet) {
        self.repair.store(members.bits(), Ordering::Relaxed);
    }

    /// Marks the repair tried; true if it had not been.
    pub(crate) fn try_repair(&self) -> bool {
        self.repair_tried.swap(1, Ordering::Relaxed) == 0
    }

    /// One more member I/O is about to be sent.
    pub(crate) fn add_piece(&self) {
        self.pending.fetch_add(1, Ordering::Relaxed);
    }

    /// A member I/O returned an error the worker handles (the pass itself reports OK for it).
    pub(crate) fn note_error(&self, member: u32) {
        self.errors
            .fetch_or(MemberSet::of(member).bits(), Ordering::Relaxed);
    }

    /// Drops one reference with the status it ended with; the pass's result when it was the
    /// last.
    pub(crate) fn put(&self, status: Status) -> Option<PassResult> {
        if status != Status::Ok {
            // Keep the first error.
            let _ = self.status.compare_exchange(
                0,
                status.to_code(),
                Ordering::Relaxed,
                Ordering::Relaxed,
            );
        }
        // AcqRel: the last one sees every other reference's status and error stores.
        if self.pending.fetch_sub(1, Ordering::AcqRel) != 1 {
            return None;
        }
        Some(PassResult {
            status: self.status(),
            errors: MemberSet::from_bits(self.errors.load(Ordering::Relaxed)),
        })
    }
}
