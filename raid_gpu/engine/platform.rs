// SPDX-License-Identifier: GPL-2.0

//! What the engine asks of its home: the seam between the pure array logic and the kernel (or
//! the host test harness).
//!
//! The engine plans every request as a list of [`MemberIo`]s and hands them to the platform one
//! by one; the platform sends each to its member and, when it completes, reports back exactly
//! once through [`ArrayEngine::piece_done`](super::array::ArrayEngine::piece_done). Ending or
//! requeueing the request is the platform's job too, when the engine says so.

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

/// One I/O for the platform to send to a member.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemberIo<S> {
    pub info: PieceInfo,
    /// First sector on the member device (its data offset included).
    pub member_sector: u64,
    /// Where the data lives: a segment of the request and the offset into it, in sectors;
    /// `None` for a flush.
    pub source: Option<(S, u64)>,
}

/// A member I/O could not be sent (no memory for it, say); the request fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SubmitError;

/// A superblock could not be written to a member.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MetadataError;

/// The services a home gives the engine.
pub trait Platform {
    /// A request in flight: a small handle (a pointer in the kernel).
    type Request: Copy;
    /// A contiguous part of a request's data (a bio in the kernel).
    type Segment: Copy;

    /// The request's segments in array order, each with its first array sector and length.
    fn segments(&self, rq: Self::Request) -> impl Iterator<Item = (Self::Segment, u64, u64)>;

    /// Sends one member I/O. On `Ok`, the platform later calls
    /// [`ArrayEngine::piece_done`](super::array::ArrayEngine::piece_done) for it exactly once,
    /// from any context. On `Err` nothing was sent.
    fn submit(&self, rq: Self::Request, io: &MemberIo<Self::Segment>) -> Result<(), SubmitError>;

    /// Ends the request with `status`. Called exactly once per request handed to
    /// [`ArrayEngine::submit`](super::array::ArrayEngine::submit) unless it was requeued.
    fn end_request(&self, rq: Self::Request, status: Status);

    /// Hands the request back to be submitted again later, from a context that may sleep.
    fn requeue(&self, rq: Self::Request);

    /// Writes a superblock, already filled in for this member, to member `member`.
    /// Called only where the engine was entered from a context that may sleep.
    fn write_superblock(&self, member: u32, sb: &Superblock) -> Result<(), MetadataError>;

    /// Member `member` failed with `status` and is no longer used (for the log). May be called
    /// from the completion context.
    fn member_failed(&self, member: u32, status: Status);
}
