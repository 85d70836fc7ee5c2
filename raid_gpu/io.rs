// SPDX-License-Identifier: GPL-2.0

//! The data path of one array: each request is cut into member pieces by the engine's geometry
//! and sent to the members as clones of the request's own bios (no data copy). The request ends
//! when its last piece does, with the first error any piece saw.

use crate::engine::geometry::{Geometry, Piece};
use crate::engine::superblock::{Slot, Superblock};
use crate::metadata::write_superblock;
use crate::kernel_ext::{
    bdev::BlockDeviceFile,
    bio::{self, CloneSet},
    blk_mq::{DiskOps, Request},
};
use kernel::{
    bindings,
    prelude::*,
    sync::atomic::{ordering, Atomic},
};

/// Per-member I/O counters, reported by DETAIL.
pub(crate) struct MemberStats {
    pub(crate) reads: Atomic<u64>,
    pub(crate) writes: Atomic<u64>,
    pub(crate) read_bytes: Atomic<u64>,
    pub(crate) write_bytes: Atomic<u64>,
    pub(crate) errors: Atomic<u64>,
}

impl MemberStats {
    pub(crate) fn new() -> Self {
        Self {
            reads: Atomic::new(0),
            writes: Atomic::new(0),
            read_bytes: Atomic::new(0),
            write_bytes: Atomic::new(0),
            errors: Atomic::new(0),
        }
    }
}

/// One member of a running array.
pub(crate) struct Member {
    pub(crate) file: BlockDeviceFile,
    /// This member's UUID, kept in its superblock.
    pub(crate) uuid: [u8; 16],
    pub(crate) stats: MemberStats,
    faulty: Atomic<bool>,
}

impl Member {
    pub(crate) fn new(file: BlockDeviceFile, uuid: [u8; 16]) -> Self {
        Self {
            file,
            uuid,
            stats: MemberStats::new(),
            faulty: Atomic::new(false),
        }
    }

    /// The member returned an I/O error and is no longer used.
    pub(crate) fn is_faulty(&self) -> bool {
        self.faulty.load(ordering::Relaxed)
    }
}

/// Per-request state, in the request's PDU.
pub(crate) struct RequestState {
    /// Pieces in flight, plus one held by `queue_rq` while it submits.
    pending: Atomic<i32>,
    /// First error status seen (0 = OK).
    status: Atomic<i32>,
    /// A piece failed on a member that has redundancy: send the request again, without it.
    retry: Atomic<bool>,
}

/// Context riding in front of every member bio.
pub(crate) struct PieceCtx {
    rq: *mut bindings::request,
    io: *const ArrayIo,
    member: u32,
    write: bool,
    bytes: u32,
}

// SAFETY: the pointers are only dereferenced in the completion, while the request (and so the
// array, which cannot go away with requests in flight) is alive.
unsafe impl Send for PieceCtx {}

/// The array's request handler: geometry, members, metadata and the bio set for member pieces.
/// Dropping it (after the disk is gone) marks the superblocks clean.
#[pin_data(PinnedDrop)]
pub(crate) struct ArrayIo {
    /// The array-wide superblock fields; per-member fields are filled in when writing.
    pub(crate) superblock: Superblock,
    /// Superblock event counter.
    pub(crate) events: Atomic<u64>,
    pub(crate) geometry: Geometry,
    /// First sector of the data area on every member.
    pub(crate) data_offset: u64,
    pub(crate) members: KVec<Member>,
    #[pin]
    clones: CloneSet<PieceCtx>,
    /// Round-robin choice of the mirror that serves the next read.
    next_read_copy: Atomic<u32>,
    /// A member failed since the superblocks were last written.
    superblocks_stale: Atomic<bool>,
    /// Some data has no copy left on a working member: every request fails.
    failed: Atomic<bool>,
}

const REQ_OP_READ: u32 = bindings::req_op_REQ_OP_READ;
const REQ_OP_WRITE: u32 = bindings::req_op_REQ_OP_WRITE;
const REQ_OP_FLUSH: u32 = bindings::req_op_REQ_OP_FLUSH;

impl ArrayIo {
    pub(crate) fn new(
        superblock: Superblock,
        geometry: Geometry,
        members: KVec<Member>,
    ) -> impl PinInit<Self, Error> {
        let data_offset = superblock.data_offset;
        try_pin_init!(Self {
            events: Atomic::new(superblock.events),
            superblock,
            geometry,
            data_offset,
            members,
            clones <- CloneSet::new(64),
            next_read_copy: Atomic::new(0),
            superblocks_stale: Atomic::new(false),
            failed: Atomic::new(false),
        })
    }

    /// Writes every member's superblock with a new event count.
    /// Failed members are recorded as faulty in the slot table and not written to.
    pub(crate) fn write_superblocks(&self, clean: bool) -> Result {
        let mut sb = self.superblock;
        sb.events = self.events.fetch_add(1, ordering::Full) + 1;
        sb.clean = clean;
        for (member, slot) in self.members.iter().zip(sb.slots.iter_mut()) {
            if member.is_faulty() {
                *slot = Slot::Faulty;
            }
        }
        write_member_superblocks(&self.members, &sb)
    }

    /// True while every part of the data has a copy on a member that has not failed.
    pub(crate) fn has_all_data(&self) -> bool {
        let probe = |start| {
            (0..self.geometry.copies()).any(|copy| {
                self.geometry
                    .map_read(start, 1, copy)
                    .ok()
                    .and_then(|mut pieces| pieces.next())
                    .is_some_and(|p| self.member_ok(p.member))
            })
        };
        // One sector of each of the first `members` chunks covers every member combination
        // of the layout (a row for RAID 0/1, every adjacent pair for near-2 RAID 10).
        let chunk = u64::from(self.geometry.chunk_sectors().max(1));
        (0..u64::from(self.geometry.members())).all(|i| probe(i * chunk))
    }

    fn member_ok(&self, index: u32) -> bool {
        self.members.get(index as usize).is_some_and(|m| !m.is_faulty())
    }

    /// `piece`, or the same data on another copy if its member failed.
    fn healthy_copy(&self, piece: Piece) -> Option<Piece> {
        if self.member_ok(piece.member) {
            return Some(piece);
        }
        (0..self.geometry.copies())
            .filter_map(|c| self.geometry.map_read(piece.array_sector, piece.sectors, c).ok()?.next())
            .find(|p| self.member_ok(p.member))
    }

    /// Sends every piece of a read or write; false if any could not be sent.
    fn submit_rw(&self, rq: &Request<Self>, write: bool) -> bool {
        let start = rq.pos();
        let sectors = u64::from(rq.bytes() >> 9);
        let pieces = if write {
            self.geometry.map_write(start, sectors)
        } else {
            let copies = self.geometry.copies().max(1);
            let copy = self.next_read_copy.fetch_add(1, ordering::Relaxed) % copies;
            self.geometry.map_read(start, sectors, copy)
        };
        let Ok(pieces) = pieces else {
            return false;
        };
        for piece in pieces {
            let piece = if self.member_ok(piece.member) {
                piece
            } else if write {
                // Another copy takes the data; with none left the write cannot succeed.
                if self.healthy_copy(piece).is_some() {
                    continue;
                }
                return false;
            } else {
                match self.healthy_copy(piece) {
                    Some(p) => p,
                    None => return false,
                }
            };
            let piece_end = piece.array_sector + piece.sectors;
            // Each bio of the request that overlaps the piece gets one clone, trimmed to the overlap.
            for (src, bio_start, bio_sectors) in rq.bios() {
                let from = bio_start.max(piece.array_sector);
                let to = (bio_start + bio_sectors).min(piece_end);
                if from >= to {
                    continue;
                }
                if !self.submit_piece(rq, src, bio_start, from, to, &piece, write) {
                    return false;
                }
            }
        }
        true
    }

    #[allow(clippy::too_many_arguments)]
    fn submit_piece(
        &self,
        rq: &Request<Self>,
        src: *mut bindings::bio,
        bio_start: u64,
        from: u64,
        to: u64,
        piece: &Piece,
        write: bool,
    ) -> bool {
        let Some(member) = self.members.get(piece.member as usize) else {
            return false;
        };
        let sector = self.data_offset + piece.member_sector + (from - piece.array_sector);
        let ctx = PieceCtx {
            rq: rq.raw(),
            io: self,
            member: piece.member,
            write,
            bytes: ((to - from) << 9) as u32,
        };
        // SAFETY: `src` belongs to the started request, which outlives the clone (it ends only
        // after every clone completed); the member is open; the range lies within `src`.
        let clone = unsafe {
            self.clones.clone_bio(
                src,
                member.file.bdev(),
                from - bio_start,
                to - from,
                sector,
                Some(piece_end_io),
                ctx,
            )
        };
        match clone {
            Ok(clone) => {
                self.add_pending(rq);
                // SAFETY: the clone is complete; its end_io releases it.
                unsafe { bio::submit(clone) };
                true
            }
            Err(_) => false,
        }
    }

    /// Sends an empty flush to every member.
    fn submit_flush(&self, rq: &Request<Self>) -> bool {
        for (index, member) in self.members.iter().enumerate() {
            let ctx = PieceCtx {
                rq: rq.raw(),
                io: self,
                member: index as u32,
                write: true,
                bytes: 0,
            };
            // SAFETY: the member is open; end_io releases the bio.
            match unsafe { self.clones.flush_bio(member.file.bdev(), Some(piece_end_io), ctx) } {
                Ok(bio) => {
                    self.add_pending(rq);
                    // SAFETY: the bio is complete; its end_io releases it.
                    unsafe { bio::submit(bio) };
                }
                Err(_) => return false,
            }
        }
        true
    }

    fn add_pending(&self, rq: &Request<Self>) {
        // SAFETY: the PDU was initialised by `queue_rq` before any piece was sent.
        let state = unsafe { &*rq.data() };
        state.pending.fetch_add(1, ordering::Relaxed);
    }
}

/// Writes `sb` to every member, with each one's own slot and UUID. Tries all members; returns
/// the last error.
pub(crate) fn write_member_superblocks(members: &[Member], sb: &Superblock) -> Result {
    let mut sb = *sb;
    let mut result = Ok(());
    for (slot, member) in members.iter().enumerate() {
        if member.is_faulty() {
            continue;
        }
        sb.this_slot = slot as u32;
        sb.member_uuid = member.uuid;
        if let Err(e) = write_superblock(&member.file, &sb) {
            pr_err!("graid: superblock write to member {} failed: {:?}\n", slot, e);
            result = Err(e);
        }
    }
    result
}

#[pinned_drop]
impl PinnedDrop for ArrayIo {
    fn drop(self: Pin<&mut Self>) {
        // The disk is gone, so no write is in flight: the data is consistent.
        let _ = self.write_superblocks(true);
    }
}

/// The slot table of a fresh array: member `i` active in role `i`.
pub(crate) fn fresh_slots(members: u32) -> [Slot; crate::engine::superblock::MAX_SLOTS] {
    let mut slots = [Slot::Empty; crate::engine::superblock::MAX_SLOTS];
    for (role, slot) in (0..members).zip(slots.iter_mut()) {
        *slot = Slot::Active { role: role as u8 };
    }
    slots
}

/// Drops one reference on a request's pieces; the last one ends the request.
///
/// # Safety
///
/// `rq` must be a request of an array disk whose PDU was initialised by `queue_rq`, and the
/// caller must own one of its `pending` references.
unsafe fn put_request(rq: *mut bindings::request, status: bindings::blk_status_t) {
    // SAFETY: by the caller's contract.
    let state = unsafe { &*crate::kernel_ext::blk_mq::request_data::<ArrayIo>(rq) };
    if status != 0 {
        // Keep the first error.
        let _ = state.status.cmpxchg(0, i32::from(status), ordering::Relaxed);
    }
    if state.pending.fetch_sub(1, ordering::Full) == 1 {
        if state.retry.load(ordering::Relaxed) {
            // SAFETY: this was the last reference; blk-mq dispatches the request again, and
            // `queue_rq` then avoids the member that failed.
            unsafe { bindings::blk_mq_requeue_request(rq, true) };
            return;
        }
        let status = state.status.load(ordering::Relaxed) as bindings::blk_status_t;
        // SAFETY: this was the last reference: nothing touches the request afterwards.
        unsafe { Request::<ArrayIo>::end(rq, status) };
    }
}

/// Completion of a member piece; may run in interrupt context.
unsafe extern "C" fn piece_end_io(bio: *mut bindings::bio) {
    // SAFETY: every bio with this end_io was made by an array's CloneSet<PieceCtx>.
    let (ctx, status) = unsafe { CloneSet::<PieceCtx>::finish(bio) };
    // SAFETY: the array outlives its requests; `ctx.io` points at it.
    let io = unsafe { &*ctx.io };
    if let Some(member) = io.members.get(ctx.member as usize) {
        let stats = &member.stats;
        if status != 0 {
            stats.errors.add(1, ordering::Relaxed);
        } else if ctx.write {
            stats.writes.add(1, ordering::Relaxed);
            stats.write_bytes.add(u64::from(ctx.bytes), ordering::Relaxed);
        } else {
            stats.reads.add(1, ordering::Relaxed);
            stats.read_bytes.add(u64::from(ctx.bytes), ordering::Relaxed);
        }
    }
    let mut status = status;
    if status != 0 && io.geometry.copies() > 1 {
        // Redundant level: fail the member, keep serving from the other copies.
        if let Some(member) = io.members.get(ctx.member as usize) {
            if !member.faulty.xchg(true, ordering::Full) {
                pr_err!("graid: member {} failed (I/O error {}), array degraded\n", ctx.member, status);
                io.superblocks_stale.store(true, ordering::Release);
            }
        }
        // SAFETY: the request is alive while this piece holds a reference.
        let state = unsafe { &*crate::kernel_ext::blk_mq::request_data::<ArrayIo>(ctx.rq) };
        state.retry.store(true, ordering::Relaxed);
        status = 0;
    }
    // SAFETY: this piece held one reference on the request.
    unsafe { put_request(ctx.rq, status) };
}

impl DiskOps for ArrayIo {
    type RequestData = RequestState;

    fn queue_rq(&self, rq: Request<Self>) -> bindings::blk_status_t {
        // SAFETY: the PDU is ours; fresh state for this request, holding the submit reference.
        unsafe {
            rq.data().write(RequestState {
                pending: Atomic::new(1),
                status: Atomic::new(0),
                retry: Atomic::new(false),
            })
        };
        // Record a member failure before more I/O depends on the array's state (process context).
        if self.superblocks_stale.xchg(false, ordering::Full) {
            self.failed.store(!self.has_all_data(), ordering::Release);
            let _ = self.write_superblocks(false);
        }
        if self.failed.load(ordering::Acquire) {
            // SAFETY: nothing was sent; drop the submit reference with the error.
            unsafe { put_request(rq.raw(), crate::kernel_ext::blk_mq::status_ioerr()) };
            return crate::kernel_ext::blk_mq::status_ok();
        }
        let sent = match rq.op() {
            REQ_OP_READ => self.submit_rw(&rq, false),
            REQ_OP_WRITE => self.submit_rw(&rq, true),
            REQ_OP_FLUSH => self.submit_flush(&rq),
            _ => {
                // SAFETY: nothing was sent; drop the submit reference with the error.
                unsafe { put_request(rq.raw(), crate::kernel_ext::blk_mq::status_notsupp()) };
                return crate::kernel_ext::blk_mq::status_ok();
            }
        };
        let status = if sent {
            0
        } else {
            crate::kernel_ext::blk_mq::status_ioerr()
        };
        // SAFETY: drops the submit reference; pieces in flight hold their own.
        unsafe { put_request(rq.raw(), status) };
        crate::kernel_ext::blk_mq::status_ok()
    }
}
