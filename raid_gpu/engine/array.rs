// SPDX-License-Identifier: GPL-2.0

//! The array engine: turns requests into member I/O, accounts for their completions, fails
//! members that return errors where the level has redundancy, and keeps the superblocks in step.
//!
//! It owns no memory and sends nothing itself: the [`Platform`] does that. The kernel module and
//! the host harness (`tools/graid-sim`) run this same code.

use super::geometry::{Geometry, Piece};
use super::members::MemberState;
use super::platform::{MemberIo, MetadataError, Op, PieceInfo, Platform, Status};
use super::request::{Outcome, RequestState};
use super::superblock::{Slot, Superblock};
use core::ops::Deref;
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

/// Why an engine could not be set up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EngineError {
    /// The member list does not match the geometry.
    MemberCount { given: usize, expected: u32 },
}

/// How much of the array still works.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArrayState {
    Optimal,
    /// Some member failed, every sector still has a copy.
    Degraded,
    /// Some data has no copy on a working member: every request fails.
    Failed,
}

/// The logic of one running array. `M` holds the members' state in role order (a vector the
/// caller allocated: the engine itself allocates nothing, and stays small enough to build on a
/// kernel stack).
#[derive(Debug)]
pub struct ArrayEngine<M> {
    /// The array-wide superblock fields; per-member fields are filled in when writing.
    superblock: Superblock,
    geometry: Geometry,
    /// Superblock event counter (of the last superblock written).
    events: AtomicU64,
    members: M,
    /// Round-robin choice of the copy that serves the next read.
    next_read_copy: AtomicU32,
    /// A member failed since the superblocks were last written.
    superblocks_stale: AtomicBool,
    /// Cached [`ArrayState::Failed`], recomputed when a member fails.
    failed: AtomicBool,
}

impl<M: Deref<Target = [MemberState]>> ArrayEngine<M> {
    /// An engine for an array described by `superblock` (array-wide fields) and `geometry`, with
    /// one fresh [`MemberState`] per member in role order.
    pub fn new(
        superblock: Superblock,
        geometry: Geometry,
        members: M,
    ) -> Result<Self, EngineError> {
        let given = members.len();
        if given != geometry.members() as usize {
            return Err(EngineError::MemberCount {
                given,
                expected: geometry.members(),
            });
        }
        Ok(Self {
            events: AtomicU64::new(superblock.events),
            superblock,
            geometry,
            members,
            next_read_copy: AtomicU32::new(0),
            superblocks_stale: AtomicBool::new(false),
            failed: AtomicBool::new(false),
        })
    }

    pub fn geometry(&self) -> &Geometry {
        &self.geometry
    }

    /// The array-wide superblock fields the array was started with.
    pub fn superblock(&self) -> &Superblock {
        &self.superblock
    }

    /// The members, in role order.
    pub fn members(&self) -> &[MemberState] {
        &self.members
    }

    /// Event count of the last superblock written.
    pub fn events(&self) -> u64 {
        self.events.load(Ordering::Acquire)
    }

    pub fn state(&self) -> ArrayState {
        if !self.has_all_data() {
            ArrayState::Failed
        } else if self.members().iter().any(MemberState::is_faulty) {
            ArrayState::Degraded
        } else {
            ArrayState::Optimal
        }
    }

    /// Writes every working member's superblock with a new event count; failed members are
    /// recorded as faulty in the slot table and not written to. Tries every member and returns
    /// the last error. Call from a context that may sleep.
    pub fn write_superblocks<P: Platform>(
        &self,
        platform: &P,
        clean: bool,
    ) -> Result<(), MetadataError> {
        let mut sb = self.superblock;
        sb.events = self.events.fetch_add(1, Ordering::AcqRel).saturating_add(1);
        sb.clean = clean;
        for (member, slot) in self.members().iter().zip(sb.slots.iter_mut()) {
            if member.is_faulty() {
                *slot = Slot::Faulty;
            }
        }
        let working = (0u32..)
            .zip(self.members())
            .filter(|(_, member)| !member.is_faulty())
            .map(|(index, member)| (index, *member.uuid(), index));
        sb.write_copies(working, |index, copy| {
            platform.write_superblock(index, copy)
        })
    }

    /// Starts (or restarts, after a requeue) request `rq`: `op` on `sectors` sectors at array
    /// sector `start`. Sends its member I/O through `platform`, which ends or requeues it once
    /// the last one completed. `state` belongs to the request. Call from a context that may
    /// sleep.
    pub fn submit<P: Platform>(
        &self,
        platform: &P,
        rq: P::Request,
        state: &RequestState,
        op: Op,
        start: u64,
        sectors: u64,
    ) {
        state.begin();
        // Record a member failure before more I/O depends on the array's state.
        if self.superblocks_stale.swap(false, Ordering::AcqRel) {
            self.failed.store(!self.has_all_data(), Ordering::Release);
            // A member that cannot take its superblock fails its next I/O as well.
            let _ = self.write_superblocks(platform, false);
        }
        let sent = if self.failed.load(Ordering::Acquire) {
            Err(Status::IoError)
        } else if op == Op::Flush {
            self.submit_flush(platform, rq, state)
        } else {
            self.submit_data(platform, rq, state, op, start, sectors)
        };
        // Drops the submitter's reference; member I/O in flight holds its own.
        self.put(platform, rq, state, sent.err().unwrap_or(Status::Ok));
    }

    /// Reports the completion of a member I/O the platform sent for `rq`. Any context.
    pub fn piece_done<P: Platform>(
        &self,
        platform: &P,
        rq: P::Request,
        state: &RequestState,
        piece: PieceInfo,
        status: Status,
    ) {
        let member = self.members().get(piece.member as usize);
        if let Some(member) = member {
            member.account(&piece, status);
        }
        let mut status = status;
        // A member with an I/O error is failed where another copy carries on (the request runs
        // again without it). "Not supported", say for a discard, says nothing about its health.
        if status == Status::IoError && self.geometry.copies() > 1 {
            if let Some(member) = member {
                if member.set_faulty() {
                    self.superblocks_stale.store(true, Ordering::Release);
                    platform.member_failed(piece.member, status);
                }
            }
            state.set_retry();
            status = Status::Ok;
        }
        self.put(platform, rq, state, status);
    }

    fn put<P: Platform>(&self, platform: &P, rq: P::Request, state: &RequestState, status: Status) {
        match state.put(status) {
            Outcome::Pending => {}
            Outcome::End(status) => platform.end_request(rq, status),
            Outcome::Requeue => platform.requeue(rq),
        }
    }

    /// Sends one member I/O, counted before it can complete.
    fn send<P: Platform>(
        &self,
        platform: &P,
        rq: P::Request,
        state: &RequestState,
        io: &MemberIo<P::Segment>,
    ) -> Result<(), Status> {
        state.add_piece();
        if platform.submit(rq, io).is_err() {
            // Never the last reference: the submitter holds one.
            let _ = state.put(Status::IoError);
            return Err(Status::IoError);
        }
        Ok(())
    }

    /// An empty flush to every working member.
    fn submit_flush<P: Platform>(
        &self,
        platform: &P,
        rq: P::Request,
        state: &RequestState,
    ) -> Result<(), Status> {
        for (index, member) in (0u32..).zip(self.members()) {
            if member.is_faulty() {
                continue;
            }
            let io = MemberIo {
                info: PieceInfo {
                    op: Op::Flush,
                    member: index,
                    sectors: 0,
                },
                member_sector: 0,
                source: None,
            };
            self.send(platform, rq, state, &io)?;
        }
        Ok(())
    }

    /// Reads, writes or discards: every piece the geometry maps the range to, on working
    /// members, one member I/O per request segment overlapping the piece.
    fn submit_data<P: Platform>(
        &self,
        platform: &P,
        rq: P::Request,
        state: &RequestState,
        op: Op,
        start: u64,
        sectors: u64,
    ) -> Result<(), Status> {
        // Refuse before sending anything rather than leave a hole in the data.
        if !segments_cover(platform, rq, start, sectors) {
            return Err(Status::IoError);
        }
        let pieces = if op == Op::Read {
            let copies = self.geometry.copies().max(1);
            let copy = self.next_read_copy.fetch_add(1, Ordering::Relaxed) % copies;
            self.geometry.map_read(start, sectors, copy)
        } else {
            self.geometry.map_write(start, sectors)
        };
        let pieces = pieces.map_err(|_| Status::IoError)?;
        for piece in pieces {
            let piece = if self.member_ok(piece.member) {
                piece
            } else if op == Op::Read {
                self.healthy_copy(piece).ok_or(Status::IoError)?
            } else if self.healthy_copy(piece).is_some() {
                // Another copy takes the data.
                continue;
            } else {
                return Err(Status::IoError);
            };
            self.submit_piece(platform, rq, state, op, &piece)?;
        }
        Ok(())
    }

    /// Sends the part of `piece` that each request segment holds.
    fn submit_piece<P: Platform>(
        &self,
        platform: &P,
        rq: P::Request,
        state: &RequestState,
        op: Op,
        piece: &Piece,
    ) -> Result<(), Status> {
        let piece_end = piece
            .array_sector
            .checked_add(piece.sectors)
            .ok_or(Status::IoError)?;
        let member_start = self
            .superblock
            .data_offset
            .checked_add(piece.member_sector)
            .ok_or(Status::IoError)?;
        for (segment, segment_start, segment_sectors) in platform.segments(rq) {
            let segment_end = segment_start
                .checked_add(segment_sectors)
                .ok_or(Status::IoError)?;
            let from = segment_start.max(piece.array_sector);
            let to = segment_end.min(piece_end);
            let Some(len) = to.checked_sub(from).filter(|&len| len > 0) else {
                continue;
            };
            // `from` lies in both the segment and the piece, so neither subtraction underflows.
            let io = MemberIo {
                info: PieceInfo {
                    op,
                    member: piece.member,
                    sectors: len,
                },
                member_sector: member_start.saturating_add(from - piece.array_sector),
                source: Some((segment, from - segment_start)),
            };
            self.send(platform, rq, state, &io)?;
        }
        Ok(())
    }

    fn member_ok(&self, index: u32) -> bool {
        self.members()
            .get(index as usize)
            .is_some_and(|m| !m.is_faulty())
    }

    /// The same data as `piece` on a copy whose member works.
    fn healthy_copy(&self, piece: Piece) -> Option<Piece> {
        (0..self.geometry.copies())
            .filter_map(|c| {
                self.geometry
                    .map_read(piece.array_sector, piece.sectors, c)
                    .ok()?
                    .next()
            })
            .find(|p| self.member_ok(p.member))
    }

    /// True while every part of the data has a copy on a working member.
    fn has_all_data(&self) -> bool {
        let probe = |start| {
            (0..self.geometry.copies()).any(|copy| {
                self.geometry
                    .map_read(start, 1, copy)
                    .ok()
                    .and_then(|mut pieces| pieces.next())
                    .is_some_and(|p| self.member_ok(p.member))
            })
        };
        // One sector of each of the first `members` chunks covers every member combination of
        // the layout (a row for RAID 0/1, every adjacent pair for near-2 RAID 10).
        let chunk = u64::from(self.geometry.chunk_sectors().max(1));
        (0..u64::from(self.geometry.members())).all(|i| probe(i.saturating_mul(chunk)))
    }
}

/// True if the request's segments follow each other without gap or overlap from `start` for
/// exactly `sectors` sectors.
fn segments_cover<P: Platform>(platform: &P, rq: P::Request, start: u64, sectors: u64) -> bool {
    let Some(end) = start.checked_add(sectors) else {
        return false;
    };
    let mut next = start;
    for (_, segment_start, segment_sectors) in platform.segments(rq) {
        match segment_start.checked_add(segment_sectors) {
            Some(segment_end) if segment_start == next && segment_sectors > 0 => next = segment_end,
            _ => return false,
        }
    }
    next == end
}
