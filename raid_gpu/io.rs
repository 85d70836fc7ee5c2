// SPDX-License-Identifier: GPL-2.0

//! The kernel home of an array's engine: blk-mq requests go into
//! [`ArrayEngine`](crate::engine::array::ArrayEngine), and the member I/O it plans goes out as
//! clones of the request's own bios (no data copy). Everything that decides anything lives in
//! the engine; this file only translates between it and the block layer.

use crate::engine::array::{ArrayEngine, EngineError};
use crate::engine::geometry::Geometry;
use crate::engine::members::MemberState;
use crate::engine::platform::{MemberIo, MetadataError, Op, PieceInfo, Platform, Status, SubmitError};
use crate::engine::request::RequestState;
use crate::engine::superblock::{Slot, Superblock, UUID_LEN};
use crate::kernel_ext::{
    bdev::BlockDeviceFile,
    bio::{self, CloneSet},
    blk_mq::{self, DiskOps, Request},
    plug,
};
use crate::metadata::write_superblock;
use kernel::{bindings, prelude::*};

/// A member device of an array being set up, in role order.
pub(crate) struct Member {
    pub(crate) file: BlockDeviceFile,
    /// This member's UUID, kept in its superblock.
    pub(crate) uuid: [u8; UUID_LEN],
}

impl Member {
    pub(crate) fn new(file: BlockDeviceFile, uuid: [u8; UUID_LEN]) -> Self {
        Self { file, uuid }
    }
}

/// A request handed to the engine: started by `queue_rq`, live until the engine has it ended
/// or requeued.
#[derive(Clone, Copy)]
pub(crate) struct RqHandle(*mut bindings::request);

/// Context riding in front of every member bio.
pub(crate) struct PieceCtx {
    rq: RqHandle,
    io: *const ArrayIo,
    piece: PieceInfo,
}

// SAFETY: the pointers are only dereferenced in the completion, while the request (and so the
// array, which cannot go away with requests in flight) is alive.
unsafe impl Send for PieceCtx {}

/// An array's request handler: the engine, the member devices and the bio set for member I/O.
/// Dropping it (after the disk is gone) marks the superblocks clean.
#[pin_data(PinnedDrop)]
pub(crate) struct ArrayIo {
    pub(crate) engine: ArrayEngine<KVec<MemberState>>,
    /// Member devices, in role order.
    pub(crate) files: KVec<BlockDeviceFile>,
    #[pin]
    clones: CloneSet<PieceCtx>,
}

impl ArrayIo {
    pub(crate) fn new(
        superblock: Superblock,
        geometry: Geometry,
        members: KVec<Member>,
    ) -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            engine: new_engine(superblock, geometry, &members)?,
            files: members_files(members)?,
            clones <- CloneSet::new(64),
        })
    }

    /// Writes every working member's superblock with a new event count.
    pub(crate) fn write_superblocks(&self, clean: bool) -> Result {
        self.engine.write_superblocks(self, clean).map_err(|_| EIO)
    }
}

fn new_engine(
    superblock: Superblock,
    geometry: Geometry,
    members: &[Member],
) -> Result<ArrayEngine<KVec<MemberState>>> {
    let mut states = KVec::with_capacity(members.len(), GFP_KERNEL)?;
    for member in members {
        states.push(MemberState::new(member.uuid), GFP_KERNEL)?;
    }
    ArrayEngine::new(superblock, geometry, states).map_err(|EngineError::MemberCount { .. }| EINVAL)
}

fn members_files(members: KVec<Member>) -> Result<KVec<BlockDeviceFile>> {
    let mut files = KVec::with_capacity(members.len(), GFP_KERNEL)?;
    for member in members.into_iter() {
        files.push(member.file, GFP_KERNEL)?;
    }
    Ok(files)
}

/// Writes `sb` to every member of a new array (before it has an engine), each with its own slot
/// and UUID. Tries all members; returns the last error.
pub(crate) fn write_member_superblocks(members: &[Member], sb: &Superblock) -> Result {
    let targets = (0u32..)
        .zip(members)
        .map(|(slot, member)| (slot, member.uuid, member));
    sb.write_copies(targets, |member, copy| {
        write_superblock(&member.file, copy).inspect_err(|e| {
            pr_err!(
                "graid: superblock write to member {} failed: {:?}\n",
                copy.this_slot,
                e
            );
        })
    })
}

/// The slot table of a fresh array: member `i` active in role `i`.
pub(crate) fn fresh_slots(members: u32) -> [Slot; crate::engine::superblock::MAX_SLOTS] {
    let mut slots = [Slot::Empty; crate::engine::superblock::MAX_SLOTS];
    for (role, slot) in (0..members).zip(slots.iter_mut()) {
        *slot = Slot::Active { role: role as u8 };
    }
    slots
}

fn to_blk_status(status: Status) -> bindings::blk_status_t {
    match status {
        Status::Ok => blk_mq::status_ok(),
        Status::IoError => blk_mq::status_ioerr(),
        Status::NotSupported => blk_mq::status_notsupp(),
    }
}

fn from_blk_status(status: bindings::blk_status_t) -> Status {
    if status == blk_mq::status_ok() {
        Status::Ok
    } else if status == blk_mq::status_notsupp() {
        Status::NotSupported
    } else {
        Status::IoError
    }
}

/// The request's engine state, in its PDU.
///
/// # Safety
///
/// `rq` must be a live request of an array disk.
unsafe fn request_state<'a>(rq: RqHandle) -> &'a RequestState {
    // SAFETY: by the caller's contract the PDU holds a `RequestState`, written by `queue_rq`
    // before the engine saw the request; the PDU lives as long as the tag set.
    unsafe { &*blk_mq::request_data::<ArrayIo>(rq.0) }
}

impl Platform for ArrayIo {
    type Request = RqHandle;
    type Segment = *mut bindings::bio;

    fn segments(&self, rq: RqHandle) -> impl Iterator<Item = (*mut bindings::bio, u64, u64)> {
        // SAFETY: the engine only passes requests it was handed by `queue_rq` and that have
        // not ended; their bio lists are stable while they are in the driver.
        unsafe { blk_mq::bios_of(rq.0) }
    }

    fn submit(&self, rq: RqHandle, io: &MemberIo<*mut bindings::bio>) -> Result<(), SubmitError> {
        let member = self.files.get(io.info.member as usize).ok_or(SubmitError)?;
        let ctx = PieceCtx {
            rq,
            io: self,
            piece: io.info,
        };
        let made = match io.source {
            // SAFETY: the member is open; `piece_end_io` releases the bio.
            None => unsafe { self.clones.flush_bio(member.bdev(), Some(piece_end_io), ctx) },
            // SAFETY: `src` is a bio of the live request, which ends only after every clone
            // completed; the engine keeps `skip + sectors` within it; the member is open.
            Some((src, skip)) => unsafe {
                self.clones.clone_bio(
                    src,
                    skip,
                    io.info.sectors,
                    bio::Target {
                        bdev: member.bdev(),
                        sector: io.member_sector,
                    },
                    Some(piece_end_io),
                    ctx,
                )
            },
        };
        let bio = made.map_err(|_| SubmitError)?;
        // SAFETY: the bio is complete; its end_io releases it.
        unsafe { bio::submit(bio) };
        Ok(())
    }

    fn end_request(&self, rq: RqHandle, status: Status) {
        // SAFETY: the engine ends each request it was handed exactly once.
        unsafe { Request::<ArrayIo>::end(rq.0, to_blk_status(status)) };
    }

    fn requeue(&self, rq: RqHandle) {
        // SAFETY: the engine dropped its last reference; blk-mq dispatches the request again
        // and `queue_rq` hands it back to the engine.
        unsafe { bindings::blk_mq_requeue_request(rq.0, true) };
    }

    fn write_superblock(&self, member: u32, sb: &Superblock) -> Result<(), MetadataError> {
        let file = self.files.get(member as usize).ok_or(MetadataError)?;
        write_superblock(file, sb).map_err(|e| {
            pr_err!("graid: superblock write to member {} failed: {:?}\n", member, e);
            MetadataError
        })
    }

    fn member_failed(&self, member: u32, status: Status) {
        pr_err!("graid: member {} failed ({:?}), array degraded\n", member, status);
    }
}

#[pinned_drop]
impl PinnedDrop for ArrayIo {
    fn drop(self: Pin<&mut Self>) {
        // The disk is gone, so no write is in flight: the data is consistent.
        let _ = self.write_superblocks(true);
    }
}

/// Completion of a member bio; may run in interrupt context.
///
/// # Safety
///
/// Called by the block layer only, for a bio made by [`ArrayIo`]'s `CloneSet<PieceCtx>`.
unsafe extern "C" fn piece_end_io(bio: *mut bindings::bio) {
    // SAFETY: every bio with this end_io was made by an array's CloneSet<PieceCtx>.
    let (ctx, status) = unsafe { CloneSet::<PieceCtx>::finish(bio) };
    // SAFETY: the array outlives its requests, and the request is alive while this piece is
    // counted in its state.
    let (io, state) = unsafe { (&*ctx.io, request_state(ctx.rq)) };
    io.engine
        .piece_done(io, ctx.rq, state, ctx.piece, from_blk_status(status));
}

impl DiskOps for ArrayIo {
    type RequestData = RequestState;

    fn queue_rq(&self, rq: Request<Self>) -> bindings::blk_status_t {
        let op = match rq.op() {
            bindings::req_op_REQ_OP_READ => Op::Read,
            bindings::req_op_REQ_OP_WRITE => Op::Write,
            bindings::req_op_REQ_OP_FLUSH => Op::Flush,
            bindings::req_op_REQ_OP_DISCARD => Op::Discard,
            _ => return blk_mq::status_notsupp(),
        };
        // SAFETY: the PDU is ours and nothing else uses it while the request is here (a
        // requeued request has no member I/O left).
        unsafe { rq.data().write(RequestState::new()) };
        // SAFETY: just written; the request is live.
        let state = unsafe { request_state(RqHandle(rq.raw())) };
        let sectors = u64::from(rq.bytes() >> 9);
        // Not into the submitter's plug, which may be the one being flushed right now.
        plug::with_own_plug(|| {
            self.engine
                .submit(self, RqHandle(rq.raw()), state, op, rq.pos(), sectors)
        });
        blk_mq::status_ok()
    }
}
