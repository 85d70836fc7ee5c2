//! The ring's control area (`Documentation/ring-protocol.rst`) seen as 32-bit atomics: the
//! indices, and the SQ and CQ entries copied in and out word by word. Safe for either side: the
//! helper (over the module's mmap) and the loopback's kernel stand-in (over a `Vec`).
//!
//! Entries are published by a release store of the producer's tail and read after an acquire
//! load of it, so the word copies themselves may be relaxed.

use graid_abi::ring::{
    Cqe, Sqe, CQE_BYTES, CQ_ENTRIES, CQ_HEAD_OFFSET, CQ_OFFSET, CQ_TAIL_OFFSET, SQE_BYTES,
    SQ_ENTRIES, SQ_HEAD_OFFSET, SQ_OFFSET, SQ_TAIL_OFFSET,
};
use graid_engine::ring::ring_pending;
use std::sync::atomic::{AtomicU32, Ordering};

/// Words of an SQ and a CQ entry.
pub const SQE_WORDS: usize = SQE_BYTES / 4;
pub const CQE_WORDS: usize = CQE_BYTES / 4;

/// The control area: `CONTROL_BYTES / 4` words.
pub struct ControlArea<'a> {
    words: &'a [AtomicU32],
}

/// The other side wrote an index that cannot be (more entries pending than the queue holds).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BadIndex;

impl<'a> ControlArea<'a> {
    /// `None` if `words` is shorter than the control area.
    pub fn new(words: &'a [AtomicU32]) -> Option<Self> {
        let needed = usize::try_from(graid_abi::ring::CONTROL_BYTES / 4).ok()?;
        (words.len() >= needed).then_some(Self { words })
    }

    fn word(&self, byte_offset: u64) -> &AtomicU32 {
        // Offsets come from this crate's own constants, within the area checked in `new`.
        &self.words[(byte_offset / 4) as usize]
    }

    pub fn load(&self, byte_offset: u64, order: Ordering) -> u32 {
        self.word(byte_offset).load(order)
    }

    pub fn store(&self, byte_offset: u64, value: u32, order: Ordering) {
        self.word(byte_offset).store(value, order);
    }
}

/// One of the two queues, from either side.
#[derive(Clone, Copy, Debug)]
pub struct Queue {
    base: u64,
    entries: u32,
    entry_words: usize,
    head: u64,
    tail: u64,
}

/// The submission queue: the kernel produces, the helper consumes.
pub const SQ: Queue = Queue {
    base: SQ_OFFSET,
    entries: SQ_ENTRIES,
    entry_words: SQE_WORDS,
    head: SQ_HEAD_OFFSET,
    tail: SQ_TAIL_OFFSET,
};

/// The completion queue: the helper produces, the kernel consumes.
pub const CQ: Queue = Queue {
    base: CQ_OFFSET,
    entries: CQ_ENTRIES,
    entry_words: CQE_WORDS,
    head: CQ_HEAD_OFFSET,
    tail: CQ_TAIL_OFFSET,
};

impl Queue {
    fn entry_offset(&self, index: u32) -> u64 {
        let slot = u64::from(index % self.entries);
        self.base + slot * (self.entry_words as u64 * 4)
    }

    /// Producer: appends `entry` (`entry_words` words); false if the queue is full.
    pub fn push(&self, area: &ControlArea<'_>, entry: &[u32]) -> bool {
        let head = area.load(self.head, Ordering::Acquire);
        let tail = area.load(self.tail, Ordering::Relaxed);
        if tail.wrapping_sub(head) >= self.entries {
            return false;
        }
        let at = self.entry_offset(tail);
        for (i, &word) in entry.iter().take(self.entry_words).enumerate() {
            area.store(at + i as u64 * 4, word, Ordering::Relaxed);
        }
        area.store(self.tail, tail.wrapping_add(1), Ordering::Release);
        true
    }

    /// Consumer: takes the next entry into `out`; `Ok(false)` if none is pending.
    pub fn pop(&self, area: &ControlArea<'_>, out: &mut [u32]) -> Result<bool, BadIndex> {
        let tail = area.load(self.tail, Ordering::Acquire);
        let head = area.load(self.head, Ordering::Relaxed);
        let pending = ring_pending(head, tail, self.entries).ok_or(BadIndex)?;
        if pending == 0 {
            return Ok(false);
        }
        let at = self.entry_offset(head);
        for (i, word) in out.iter_mut().take(self.entry_words).enumerate() {
            *word = area.load(at + i as u64 * 4, Ordering::Relaxed);
        }
        area.store(self.head, head.wrapping_add(1), Ordering::Release);
        Ok(true)
    }
}

/// An SQ entry as the words `Sqe`'s `repr(C)` layout puts in memory (little-endian).
pub fn encode_sqe(sqe: &Sqe) -> [u32; SQE_WORDS] {
    let mut w = [0u32; SQE_WORDS];
    w[0] = sqe.job;
    w[1] = sqe.generation;
    w[2] = u32::from_le_bytes([sqe.op, sqe.data_columns, sqe.parity_columns, sqe.reserved0]);
    w[3] = sqe.stripes;
    w[4] = sqe.column_bytes;
    w[5] = sqe.reserved;
    (w[6], w[7]) = split(sqe.columns_offset);
    (w[8], w[9]) = split(sqe.tag);
    w
}

pub fn decode_sqe(w: &[u32; SQE_WORDS]) -> Sqe {
    let [op, data_columns, parity_columns, reserved0] = w[2].to_le_bytes();
    Sqe {
        job: w[0],
        generation: w[1],
        op,
        data_columns,
        parity_columns,
        reserved0,
        stripes: w[3],
        column_bytes: w[4],
        reserved: w[5],
        columns_offset: join(w[6], w[7]),
        tag: join(w[8], w[9]),
        reserved2: [0; 3],
    }
}

pub fn encode_cqe(cqe: &Cqe) -> [u32; CQE_WORDS] {
    [cqe.job, cqe.generation, cqe.status, cqe.reserved]
}

pub fn decode_cqe(w: &[u32; CQE_WORDS]) -> Cqe {
    Cqe {
        job: w[0],
        generation: w[1],
        status: w[2],
        reserved: w[3],
    }
}

fn split(v: u64) -> (u32, u32) {
    (v as u32, (v >> 32) as u32)
}

fn join(lo: u32, hi: u32) -> u64 {
    u64::from(lo) | u64::from(hi) << 32
}

#[cfg(test)]
mod tests {
    use super::*;

    fn area_words() -> Vec<AtomicU32> {
        (0..graid_abi::ring::CONTROL_BYTES / 4)
            .map(|_| AtomicU32::new(0))
            .collect()
    }

    #[test]
    fn entries_round_trip_through_the_queue() {
        let words = area_words();
        let area = ControlArea::new(&words).unwrap();
        let sqe = Sqe {
            job: 7,
            generation: 9,
            op: 2,
            data_columns: 8,
            parity_columns: 0xff,
            reserved0: 0xfe,
            stripes: 3,
            column_bytes: 65536,
            columns_offset: 0x1_2345_6000,
            tag: u64::MAX - 1,
            ..Sqe::default()
        };
        assert!(SQ.push(&area, &encode_sqe(&sqe)));
        let mut out = [0u32; SQE_WORDS];
        assert_eq!(SQ.pop(&area, &mut out), Ok(true));
        assert_eq!(decode_sqe(&out), sqe);
        assert_eq!(SQ.pop(&area, &mut out), Ok(false));
        // Full after SQ_ENTRIES, and an impossible tail is refused.
        for _ in 0..SQ_ENTRIES {
            assert!(SQ.push(&area, &encode_sqe(&sqe)));
        }
        assert!(!SQ.push(&area, &encode_sqe(&sqe)));
        area.store(SQ_TAIL_OFFSET, 1 + 2 * SQ_ENTRIES, Ordering::Release);
        assert_eq!(SQ.pop(&area, &mut out), Err(BadIndex));
    }

    #[test]
    fn the_word_layout_is_the_structs_memory_layout() {
        // What `encode_sqe` writes is what a `repr(C)` Sqe holds in memory on a little-endian
        // machine (the module writes the struct, the helper reads words).
        let sqe = Sqe {
            job: 0x0102_0304,
            generation: 0x0506_0708,
            op: 1,
            data_columns: 2,
            parity_columns: 3,
            reserved0: 4,
            stripes: 5,
            column_bytes: 6,
            reserved: 7,
            columns_offset: 0x0809_0a0b_0c0d_0e0f,
            tag: 0x1011_1213_1415_1617,
            reserved2: [0; 3],
        };
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&sqe.job.to_le_bytes());
        bytes.extend_from_slice(&sqe.generation.to_le_bytes());
        bytes.extend_from_slice(&[1, 2, 3, 4]);
        bytes.extend_from_slice(&5u32.to_le_bytes());
        bytes.extend_from_slice(&6u32.to_le_bytes());
        bytes.extend_from_slice(&7u32.to_le_bytes());
        bytes.extend_from_slice(&sqe.columns_offset.to_le_bytes());
        bytes.extend_from_slice(&sqe.tag.to_le_bytes());
        bytes.resize(SQE_BYTES, 0);
        let words: Vec<u32> = bytes
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        assert_eq!(encode_sqe(&sqe).to_vec(), words);
        assert_eq!(std::mem::offset_of!(Sqe, columns_offset), 24);
        assert_eq!(std::mem::offset_of!(Sqe, tag), 32);
    }
}
