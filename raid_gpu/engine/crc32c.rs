// SPDX-License-Identifier: GPL-2.0

//! CRC-32C (Castagnoli), the checksum of graid's on-disk metadata and log entries.
//!
//! Parameters are those of iSCSI, ext4 and btrfs metadata: reflected polynomial `0x82F63B78`,
//! initial value `!0`, final XOR `!0`, so `crc32c(b"123456789") == 0xE306_9283`. Every logged
//! write checksums a 4 KiB header here, so the loop takes eight bytes a step (slicing-by-8:
//! eight tables, one per byte position) rather than one; the kernel checksums a log entry's
//! payload with its own `crc32c()`, which the CPU's instruction speeds up.

/// The Castagnoli polynomial, bit-reflected.
const POLY_REFLECTED: u32 = 0x82F6_3B78;

/// `TABLES[0][b]` is the CRC register after shifting the byte `b` through it;
/// `TABLES[k][b]` the same followed by `k` zero bytes.
const TABLES: [[u32; 256]; 8] = build_tables();

const fn build_tables() -> [[u32; 256]; 8] {
    let mut tables = [[0u32; 256]; 8];
    let mut byte = 0;
    while byte < 256 {
        let mut crc = byte as u32;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ POLY_REFLECTED
            } else {
                crc >> 1
            };
            bit += 1;
        }
        tables[0][byte] = crc;
        byte += 1;
    }
    let mut k = 1;
    while k < 8 {
        let mut byte = 0;
        while byte < 256 {
            let prev = tables[k - 1][byte];
            tables[k][byte] = (prev >> 8) ^ tables[0][(prev & 0xff) as usize];
            byte += 1;
        }
        k += 1;
    }
    tables
}

/// The table entry of byte `shift / 8` of `word`, `k` bytes before the end of an 8-byte step.
fn entry(k: usize, word: u32, shift: u32) -> u32 {
    let [t0, t1, t2, t3, t4, t5, t6, t7] = &TABLES;
    let table = match k {
        0 => t0,
        1 => t1,
        2 => t2,
        3 => t3,
        4 => t4,
        5 => t5,
        6 => t6,
        _ => t7,
    };
    // A `u8` index into a 256-entry array is always in bounds.
    table[usize::from((word >> shift) as u8)]
}

/// Feeds `bytes` into a running CRC register (pre-inverted; see [`crc32c`]).
fn update(mut register: u32, bytes: &[u8]) -> u32 {
    let mut steps = bytes.chunks_exact(8);
    for step in &mut steps {
        // Always 8 bytes (`chunks_exact`): the fallback is never taken.
        let word = <[u8; 8]>::try_from(step).map_or(0, u64::from_le_bytes);
        let (lo, hi) = (word as u32 ^ register, (word >> 32) as u32);
        register = entry(7, lo, 0)
            ^ entry(6, lo, 8)
            ^ entry(5, lo, 16)
            ^ entry(4, lo, 24)
            ^ entry(3, hi, 0)
            ^ entry(2, hi, 8)
            ^ entry(1, hi, 16)
            ^ entry(0, hi, 24);
    }
    for &b in steps.remainder() {
        register = (register >> 8) ^ entry(0, register ^ u32::from(b), 0);
    }
    register
}

/// CRC-32C of `bytes`.
pub fn crc32c(bytes: &[u8]) -> u32 {
    !update(!0, bytes)
}
