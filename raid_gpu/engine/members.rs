// SPDX-License-Identifier: GPL-2.0

//! The state the engine keeps per member: identity, health and I/O counters.

use super::platform::{Op, PieceInfo, Status};
use super::superblock::UUID_LEN;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// One member of a running array.
#[derive(Debug)]
pub struct MemberState {
    /// This member's UUID, kept in its superblock.
    uuid: [u8; UUID_LEN],
    faulty: AtomicBool,
    reads: AtomicU64,
    writes: AtomicU64,
    read_bytes: AtomicU64,
    write_bytes: AtomicU64,
    errors: AtomicU64,
}

/// A member's I/O counters at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemberStats {
    pub reads: u64,
    pub writes: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub errors: u64,
}

impl MemberState {
    /// A working member with no I/O done yet.
    pub const fn new(uuid: [u8; UUID_LEN]) -> Self {
        Self {
            uuid,
            faulty: AtomicBool::new(false),
            reads: AtomicU64::new(0),
            writes: AtomicU64::new(0),
            read_bytes: AtomicU64::new(0),
            write_bytes: AtomicU64::new(0),
            errors: AtomicU64::new(0),
        }
    }

    pub fn uuid(&self) -> &[u8; UUID_LEN] {
        &self.uuid
    }

    /// The member returned an I/O error and is no longer used.
    pub fn is_faulty(&self) -> bool {
        self.faulty.load(Ordering::Acquire)
    }

    /// Marks the member faulty; true if this call did it.
    pub(crate) fn set_faulty(&self) -> bool {
        !self.faulty.swap(true, Ordering::AcqRel)
    }

    /// Counts one completed member I/O.
    pub(crate) fn account(&self, piece: &PieceInfo, status: Status) {
        let bytes = piece.sectors.saturating_mul(512);
        let (count, total) = match (status, piece.op) {
            (Status::Ok, Op::Read) => (&self.reads, Some(&self.read_bytes)),
            (Status::Ok, Op::Write) => (&self.writes, Some(&self.write_bytes)),
            // Flushes and discards move no data.
            (Status::Ok, Op::Flush | Op::Discard) => return,
            _ => (&self.errors, None),
        };
        count.fetch_add(1, Ordering::Relaxed);
        if let Some(total) = total {
            total.fetch_add(bytes, Ordering::Relaxed);
        }
    }

    pub fn stats(&self) -> MemberStats {
        MemberStats {
            reads: self.reads.load(Ordering::Relaxed),
            writes: self.writes.load(Ordering::Relaxed),
            read_bytes: self.read_bytes.load(Ordering::Relaxed),
            write_bytes: self.write_bytes.load(Ordering::Relaxed),
            errors: self.errors.load(Ordering::Relaxed),
        }
    }
}
