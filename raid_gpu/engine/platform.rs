// SPDX-License-Identifier: GPL-2.0

//! What the engine asks of its home: the seam between the pure array logic and the kernel (or
//! the host test harness).
//!
//! The engine plans every request as a list of [`MemberIo`]s and hands them to the platform one
//! by one; the platform sends each to its member and, when it completes, reports back exactly
//! once through [`ArrayEngine::piece_done`](super::array::ArrayEngine::piece_done). Ending the
//! request is the platform's job too, when the engine says so.
//!
//! Everything that may wait or must not race (member failures, superblock updates, read repair)
//! happens in the array's *worker*: one serialised task per array, in process context, that the
//! platform runs ([`ArrayEngine::work`](super::array::ArrayEngine::work)) whenever the engine
//! kicks it. Requests reach it through two lists the platform keeps.

use super::bitmap::{RegionState, Regions, BLOCK_BYTES};
use super::members::MemberSet;
use super::parity::{Columns, ParityJob};
use super::ppl::BLOCK_BYTES as PPL_BLOCK_BYTES;
use super::request::RequestState;
use super::scrub::ScrubMode;
use super::superblock::Superblock;

/// What a request asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Read,
    Write,
    /// Make every completed write durable (an empty flush on every working member).
    Flush,
    /// The range's contents are no longer needed.
    Discard,
}

impl Op {
    /// Writes, flushes and discards change what the members hold.
    pub fn is_write(self) -> bool {
        !matches!(self, Op::Read)
    }

    pub(crate) fn to_code(self) -> u8 {
        match self {
            Op::Read => 0,
            Op::Write => 1,
            Op::Flush => 2,
            Op::Discard => 3,
        }
    }

    pub(crate) fn from_code(code: u8) -> Self {
        match code {
            0 => Op::Read,
            1 => Op::Write,
            2 => Op::Flush,
            _ => Op::Discard,
        }
    }
}

/// How a request or a member I/O ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    Ok,
    /// The member (or the array) could not do it.
    IoError,
    /// The member does not support the operation (a discard, say); never fails a member.
    NotSupported,
}

impl Status {
    /// A compact form for atomics.
    pub(crate) fn to_code(self) -> u8 {
        match self {
            Status::Ok => 0,
            Status::IoError => 1,
            Status::NotSupported => 2,
        }
    }

    pub(crate) fn from_code(code: u8) -> Self {
        match code {
            0 => Status::Ok,
            2 => Status::NotSupported,
            _ => Status::IoError,
        }
    }
}

/// What a member I/O was, reported back with its completion (for accounting and error
/// handling).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PieceInfo {
    pub op: Op,
    /// Member (RAID position) index.
    pub member: u32,
    /// Length in sectors (0 for a flush).
    pub sectors: u64,
}

/// Where a member I/O's data lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source<S> {
    /// No data: a flush.
    None,
    /// A segment of the request and the offset into it, in sectors.
    Segment(S, u64),
    /// A column of the request's stripe buffer and the offset into it, in sectors.
    Buffer { column: u32, offset: u64 },
}

/// One I/O for the platform to send to a member.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemberIo<S> {
    pub info: PieceInfo,
    /// First sector on the member device (its data offset included).
    pub member_sector: u64,
    pub source: Source<S>,
    /// A write that must be durable when it completes (`REQ_FUA`), whatever the request asks.
    pub fua: bool,
}

/// A member I/O could not be sent (no memory for it, say); the request fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SubmitError;

/// No working member took a superblock update: the state of the array could not be recorded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MetadataError;

/// The platform's lists of requests for the worker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorkList {
    /// Requests the worker must act on: a pass ended with member errors, a repair pass ended,
    /// or a write waits for a repair to finish.
    Deferred,
    /// Finished requests that wait for a member failure to be recorded in the superblocks.
    Parked,
    /// RAID 5/6 requests waiting for the stripe lock of this slot.
    StripeWait(u32),
    /// RAID 5/6 writes the holder of this slot's lock took in (`stripe_hold.rs`): only that
    /// holder touches the list.
    Adopted(u32),
    /// RAID 5/6 requests waiting for stripe buffer memory.
    BufferWait,
    /// RAID 5/6 requests waiting for the partial parity log to wrap (`log_write.rs`).
    LogWait,
}

/// One partial parity log write (`log_write.rs`): the request's log header `header` (see
/// [`StripeBuffers::set_log_header`]) then `sectors` of buffer column `column` from its start, at
/// `sector` of member `member`, with FUA.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogIo {
    pub member: u32,
    pub sector: u64,
    pub header: u32,
    pub column: u32,
    pub sectors: u64,
}

/// Log headers a request's stripe buffer holds (one per parity member).
pub const LOG_HEADERS: u32 = 2;

/// A rebuild read or write failed (or was refused: a bad argument).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RebuildIoError;

/// One transfer of a [`RebuildBuffer::rebuild_batch`]: `sectors` sectors at `sector` (from the
/// member's start) of member `member`, into or out of rebuild buffer column `column` from its
/// start.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RebuildIo {
    pub sector: u64,
    pub sectors: u64,
    pub member: u32,
    pub column: u32,
}

/// Most transfers a [`RebuildBuffer::rebuild_batch`] holds: a buffer column each.
pub const MAX_REBUILD_BATCH: usize = super::geometry::MAX_MEMBERS as usize + 2;

/// Who computed a job of the rebuild buffer ([`RebuildBuffer::rebuild_compute`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Computed {
    /// The platform itself (the kernel): trusted.
    Here,
    /// The parity helper (`Documentation/ring-protocol.rst`), this attachment of it: root, but
    /// not trusted with what reaches a member. The engine checks its answer before writing
    /// anything that depends on it, and reports a wrong one ([`Events::helper_wrong`]).
    Helper(u64),
}

/// What happened to a member, for the log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemberEvent {
    /// An I/O error made the array stop using it.
    Failed,
    /// It returned an error but holds the last copy of some data: kept, and the array takes no
    /// more writes (md's "broken").
    KeptLastCopy,
    /// Its superblock could not be written: failed.
    SuperblockWriteFailed,
    /// A read error on it was repaired by rewriting the data from another copy.
    ReadErrorRepaired,
    /// The administrator failed it (`graidctl fail`).
    FailedOnRequest,
    /// A device was added in its place; the rebuild starts.
    Added,
    /// Its rebuild finished: it is in sync.
    Rebuilt,
    /// Its rebuild stopped: some data it needs has no readable copy.
    RebuildStalled,
    /// Its failure (any of the above, or on request) is recorded in the superblocks now.
    FailureRecorded,
    /// A replace of it started: a spare is being copied from it (`replace.rs`).
    ReplaceStarted,
    /// Its replacement took its place; its old device left the array.
    Replaced,
    /// It failed while being replaced: the replacement went back to the spares.
    ReplaceAbandoned,
    /// Its replacement failed (an I/O error, by hand, or nothing left to copy from): the
    /// replace ends, the member stays.
    ReplacementFailed,
}

/// Requests in flight: their state and data, their member I/O, their end, and the lists the
/// worker takes the waiting ones from.
pub trait Requests {
    /// A request in flight: a small handle (a pointer in the kernel).
    type Request: Copy;

    /// A contiguous part of a request's data (a bio in the kernel).
    type Segment: Copy;

    /// The request's engine state, kept with the request.
    fn state(&self, rq: Self::Request) -> &RequestState;

    /// The request must be durable when it ends (`REQ_FUA`): every member write of it is sent
    /// with FUA. Another request's write may carry its data only if it does too.
    fn fua(&self, rq: Self::Request) -> bool;

    /// The request's segments in array order, each with its first array sector and length.
    fn segments(&self, rq: Self::Request) -> impl Iterator<Item = (Self::Segment, u64, u64)>;

    /// Sends one member I/O: `io.info.op` says what to do, which need not be the request's own
    /// operation (a read error is repaired by writing from the request's buffers). On `Ok`, the
    /// platform later calls [`ArrayEngine::piece_done`](super::array::ArrayEngine::piece_done)
    /// for it exactly once, from any context. On `Err` nothing was sent.
    fn submit(&self, rq: Self::Request, io: &MemberIo<Self::Segment>) -> Result<(), SubmitError>;

    /// `follower`'s data in one stripe went to the members with `adopter`'s writes, which are
    /// done (`stripe_hold.rs`): for the platform's accounting. Nothing by default.
    fn carried(&self, follower: Self::Request, adopter: Self::Request) {
        let _ = (follower, adopter);
    }

    /// Ends the request with `status`. Called exactly once per request handed to
    /// [`ArrayEngine::submit`](super::array::ArrayEngine::submit).
    fn end_request(&self, rq: Self::Request, status: Status);

    /// Adds a request to one of the worker's lists (any context; does not wake the worker).
    fn push(&self, list: WorkList, rq: Self::Request);

    /// Takes every request off `list` and hands each to `f` (the worker, and a stripe step for
    /// the stripe-lock and log wait lists). Requests pushed meanwhile, `f`'s own included, stay
    /// on the list for the next call.
    fn take_all(&self, list: WorkList, f: impl FnMut(Self::Request));

    /// Takes the request that has waited longest off `list`, if any (any context).
    fn take_oldest(&self, list: WorkList) -> Option<Self::Request>;

    /// Makes the worker run [`ArrayEngine::work`](super::array::ArrayEngine::work) soon, in
    /// process context, never twice at once (any context).
    fn kick_worker(&self);

    /// Makes the worker run in `ms` milliseconds, or sooner when kicked; a timer already set
    /// for earlier stands. Any context.
    fn kick_worker_after(&self, ms: u32);

    /// True if some request in flight in the array satisfies `pred` (the worker only).
    fn any_request(&self, pred: impl FnMut(&RequestState) -> bool) -> bool;

    /// Sleeps a little: the worker waits for writes to drain (the worker only).
    fn pause(&self);
}

/// Metadata written and made durable at once: superblocks, the write-intent bitmap, the
/// partial parity log's heads (the worker, or the array's start and stop while no I/O runs).
pub trait Metadata {
    /// Sends an empty flush (`PREFLUSH`) to each member in `targets` at once and waits: every
    /// write they completed before is durable on return. Returns the members whose flush
    /// failed. The worker, or the array's start and stop while no I/O runs.
    fn flush_members(&self, targets: MemberSet) -> MemberSet;

    /// Writes one superblock to each member in `targets` at once and waits for them: `copy(m)`
    /// is member `m`'s, already filled in. Returns the members whose write failed. Durable on
    /// return (`PREFLUSH | FUA`: every write completed before is durable too). Called only by
    /// one writer at a time (the worker, or the array's start and stop while no I/O runs).
    fn write_superblocks(&self, targets: MemberSet, copy: impl Fn(u32) -> Superblock) -> MemberSet;

    /// The write-intent bitmap (`bitmap.rs`, `write_intent.rs`), if the array has one: its
    /// regions and one state per region. None by default.
    fn bitmap(&self) -> Option<(Regions, &[RegionState])> {
        None
    }

    /// A resize (with no request in flight, nothing needing a resync): from now on `bitmap`
    /// returns `regions`, over the new walk, of the same region size or a larger one. States
    /// past the new last region are cleared, and with a larger region size every state (the
    /// caller then sets them). False (nothing changed) if the platform has no state for each
    /// (it keeps spare ones for this: [`Regions::states_kept`]) or no bitmap.
    fn resize_bitmap(&self, regions: Regions) -> bool {
        let _ = regions;
        false
    }

    /// Writes bitmap block `block`, filled by `fill`, to each member in `targets` at once and
    /// waits; returns the members whose write failed. Durable on return (`FUA`); with
    /// `preflush`, so is every write the member completed before (`PREFLUSH`: a block that
    /// clears bits). The superblock writer's caller only (the worker).
    fn write_bitmap_block(
        &self,
        targets: MemberSet,
        block: u64,
        preflush: bool,
        fill: &dyn Fn(&mut [u8; BLOCK_BYTES]),
    ) -> MemberSet {
        let _ = (block, preflush, fill);
        targets
    }

    /// Writes a partial parity log head, filled by `fill`, at member sector `sector` of each
    /// member in `targets` at once and waits; returns the members whose write failed. Durable
    /// on return (`FUA`), and nothing more: the engine flushed every member first, which the
    /// head's own `PREFLUSH` would only repeat. The worker, or the array's start with no I/O
    /// running.
    fn write_log_head(
        &self,
        targets: MemberSet,
        sector: u64,
        fill: &dyn Fn(&mut [u8; PPL_BLOCK_BYTES]),
    ) -> MemberSet;

    /// Writes spare `slot`'s superblock and waits (durable on return); false on an error. The
    /// same caller as [`Self::write_superblocks`], after it.
    fn write_spare_superblock(&self, slot: u32, sb: &Superblock) -> bool;
}

/// What the engine tells its home, and asks of the world around it: member events, a takeover
/// wanted, a wrong helper, the clock, the CPU.
pub trait Events {
    /// A member is faulty and a spare waits: the platform should move the spare into its place
    /// soon, outside the worker (the failed member's device must be released first, which
    /// waits for the array's requests to drain; see [`ArrayEngine::takeover`]). The worker only.
    ///
    /// [`ArrayEngine::takeover`]: super::array::ArrayEngine::takeover
    fn takeover_wanted(&self);

    /// The CPU running the caller: a hint that spreads counters over cache lines (any number;
    /// a stale one costs only sharing).
    fn cpu(&self) -> u32;

    /// Something happened to member `member` (for the log). Any context.
    fn member_event(&self, member: u32, event: MemberEvent);

    /// A check, repair or resync ended: at its end, or `stopped` before it (for the log and
    /// monitoring; the counts are in [`ScrubProgress`]). The worker only.
    ///
    /// [`ScrubProgress`]: super::scrub::ScrubProgress
    fn scrub_ended(&self, mode: ScrubMode, stopped: bool) {
        let _ = (mode, stopped);
    }

    /// The engine found a result of helper attachment `helper` ([`Computed::Helper`]) wrong:
    /// the platform stops trusting it (detaches it, counts it, logs it) if it is still the
    /// one attached. The worker only.
    fn helper_wrong(&self, helper: u64) {
        let _ = helper;
    }

    /// How many times a parity helper has been caught lying (any array's, any attachment's),
    /// counted before any of its later results could be used: the worker heals what helpers
    /// computed unchecked when it changes (`suspect.rs`). Any context.
    fn helper_catches(&self) -> u64 {
        0
    }

    /// A heal started: a resync walks `regions` regions whose parity a helper computed
    /// unchecked (for the log and monitoring). The worker only.
    fn heal_started(&self, regions: u64) {
        let _ = regions;
    }

    /// A reshape ended: the array's geometry is the new one, on disk too. The platform takes
    /// its size and queue limits ([`ArrayEngine::io_boundary`]). The worker only. Nothing by
    /// default.
    ///
    /// [`ArrayEngine::io_boundary`]: super::array::ArrayEngine::io_boundary
    fn reshape_ended(&self) {}

    /// Nanoseconds on a monotonic clock (any origin): the rebuild's pace.
    fn now_ns(&self) -> u64;

    /// Sleeps `ms` milliseconds: the rebuild keeps to its speed limit (the worker only).
    fn sleep_ms(&self, ms: u32);
}

/// Rebuild and scrub (`rebuild.rs`, `scrub.rs`): the array's rebuild buffer and its member
/// I/O. The worker only, synchronous.
pub trait RebuildBuffer {
    /// Reads (`Op::Read`) or writes (`Op::Write`) `sectors` sectors at `sector` (from the
    /// member's start) of member `member` into or from column `column` of the array's rebuild
    /// buffer at `offset` sectors, and waits. The buffer has `members + 2` columns, each
    /// [`REBUILD_COLUMN_SECTORS`](super::rebuild::REBUILD_COLUMN_SECTORS) long. `Err` on an I/O
    /// error (or a bad argument: nothing done).
    fn rebuild_io(
        &self,
        op: Op,
        member: u32,
        sector: u64,
        column: u32,
        offset: u64,
        sectors: u64,
    ) -> Result<(), RebuildIoError>;

    /// Sends every transfer in `ios` at once (each one `op`, as [`Self::rebuild_io`] does) and
    /// waits for them all: the members work in parallel. Returns the indices into `ios` of the
    /// transfers that failed (or were refused), as bits. The worker only. By default one after
    /// the other.
    fn rebuild_batch(&self, op: Op, ios: &[RebuildIo]) -> u64 {
        let mut failed = 0u64;
        for (i, io) in ios.iter().enumerate() {
            if self
                .rebuild_io(op, io.member, io.sector, io.column, 0, io.sectors)
                .is_err()
            {
                failed |= 1u64.checked_shl(i as u32).unwrap_or(0);
            }
        }
        failed
    }

    /// Copies `sectors` sectors at `offset` from rebuild buffer column `from` to column `to`.
    fn rebuild_copy(&self, from: u32, to: u32, offset: u64, sectors: u64);

    /// Adds `coef` times rebuild buffer column `from` to column `to` (GF(2^8), md's
    /// polynomial; 1 is a plain XOR), `sectors` sectors at `offset` of both.
    fn rebuild_accumulate(&self, from: u32, to: u32, coef: u8, offset: u64, sectors: u64);

    /// How many of the `sectors` 512-byte sectors at `offset` differ between rebuild buffer
    /// columns `a` and `b`.
    fn rebuild_differ(&self, a: u32, b: u32, offset: u64, sectors: u64) -> u64;

    /// Computes `job` on the rebuild buffer (as [`StripeBuffers::compute_parity`] does on a request's)
    /// and waits; with `offload`, by the parity helper if one takes it. Says who did, `None`
    /// if it could not. A helper's answer changes only the columns the job computes (a
    /// generation's P and Q, a recovery's lost columns).
    fn rebuild_compute(&self, job: &ParityJob, offload: bool) -> Option<Computed>;
}

/// RAID 5/6 (`stripe.rs`, `log_write.rs`): the stripe engine's work items, requests' stripe
/// buffers, parity on them and the partial parity log's writes.
pub trait StripeBuffers: Requests {
    /// Makes [`ArrayEngine::stripe_work`](super::array::ArrayEngine::stripe_work) run for `rq`
    /// soon, in process context (a work item). Any context; never runs it inline. Requests of
    /// one array may run in parallel, each one at a time.
    fn queue_stripe_work(&self, rq: Self::Request);

    /// Gives `rq` a stripe buffer: the columns in `columns`, `sectors` long each. Process
    /// context, may sleep briefly but must not wait for I/O. `false` if there is no memory
    /// now; it may only be refused while another buffer of the array is in use (the platform
    /// keeps a reserve for one), so a refused request always gets one when others end.
    fn alloc_buffer(&self, rq: Self::Request, columns: Columns, sectors: u64) -> bool;

    /// Frees `rq`'s stripe buffer.
    fn free_buffer(&self, rq: Self::Request);

    /// Copies `sectors` sectors of the request's data at `offset` into `segment` into buffer
    /// column `column` at `column_offset`.
    fn copy_to_buffer(
        &self,
        rq: Self::Request,
        segment: Self::Segment,
        offset: u64,
        column: u32,
        column_offset: u64,
        sectors: u64,
    );

    /// Copies buffer column `column` at `column_offset` into the request's data.
    fn copy_from_buffer(
        &self,
        rq: Self::Request,
        column: u32,
        column_offset: u64,
        segment: Self::Segment,
        offset: u64,
        sectors: u64,
    );

    /// Copies `sectors` sectors at `offset` from buffer column `from` to column `to`.
    fn copy_column(&self, rq: Self::Request, from: u32, to: u32, offset: u64, sectors: u64);

    /// Adds `coef` times buffer column `from` to column `to` (GF(2^8), md's polynomial; 1 is
    /// a plain XOR), `sectors` sectors at `offset` of both.
    fn accumulate_column(
        &self,
        rq: Self::Request,
        from: u32,
        to: u32,
        coef: u8,
        offset: u64,
        sectors: u64,
    );

    /// CRC-32C of `sectors` sectors at `offset` of buffer column `column`.
    fn column_crc(&self, rq: Self::Request, column: u32, offset: u64, sectors: u64) -> u32;

    /// Fills log header `index` (below [`LOG_HEADERS`]) of `rq`'s stripe buffer with `fill`;
    /// the buffer keeps it until it is freed (the log writes that send it have completed by
    /// then).
    fn set_log_header(
        &self,
        rq: Self::Request,
        index: u32,
        fill: &dyn Fn(&mut [u8; PPL_BLOCK_BYTES]),
    );

    /// Sends one partial parity log write for `rq` (see [`LogIo`]); reported through
    /// [`ArrayEngine::piece_done`](super::array::ArrayEngine::piece_done) as a write of
    /// `io.member`, like a [`Requests::submit`]. On `Err` nothing was sent.
    fn submit_log(&self, rq: Self::Request, io: &LogIo) -> Result<(), SubmitError>;

    /// Whether [`Self::compute_parity`] can do a RAID 6 [`ParityOp::Update`] (read-modify-write:
    /// the old data folded out of P and Q and the new folded in). md asks
    /// `raid6_can_xor_syndrome()`: without it the engine writes by reconstruct-write instead.
    /// RAID 5's update, a plain XOR, always can.
    ///
    /// [`ParityOp::Update`]: super::parity::ParityOp::Update
    fn raid6_update(&self) -> bool {
        true
    }

    /// Computes `job` on `rq`'s stripe buffer and then calls
    /// [`ArrayEngine::parity_done`](super::array::ArrayEngine::parity_done) for `rq`, inline
    /// or later, from process context. Called from process context.
    fn compute_parity(&self, rq: Self::Request, job: &ParityJob);
}

/// The services a home gives the engine: each part above, implemented on its own (the kernel in
/// `raid_gpu/io.rs`, the host harness in `tools/graid-sim`).
pub trait Platform: Requests + Metadata + Events + RebuildBuffer + StripeBuffers {}

impl<T: Requests + Metadata + Events + RebuildBuffer + StripeBuffers> Platform for T {}
