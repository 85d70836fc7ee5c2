// SPDX-License-Identifier: GPL-2.0

//! CRC-32C (Castagnoli), the checksum of graid's on-disk metadata.
//!
//! Parameters are those of iSCSI, ext4 and btrfs metadata: reflected polynomial `0x82F63B78`,
//! initial value `!0`, final XOR `!0`, so `crc32c(b"123456789") == 0xE306_9283`. A bytewise table
//! is plenty for a 4 KiB superblock read a few times per assembly; the data path never uses it.

/// The Castagnoli polynomial, bit-reflected.
const POLY_REFLECTED: u32 = 0x82F6_3B78;

/// `TABLE[b]` is the CRC register after shifting the byte `b` through it.
const TABLE: [u32; 256] = build_table();

const fn build_table() -> [u32; 256] {
    let mut table = [0u32; 256];
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
        table[byte] = crc;
        byte += 1;
    }
    table
}

/// Feeds `bytes` into a running CRC register (pre-inverted; see [`crc32c`]).
fn update(mut register: u32, bytes: &[u8]) -> u32 {
    for &b in bytes {
        // A `u8` index into a 256-entry array is always in bounds.
        register = (register >> 8) ^ TABLE[usize::from(register as u8 ^ b)];
    }
    register
}

/// CRC-32C of `bytes`.
pub fn crc32c(bytes: &[u8]) -> u32 {
    !update(!0, bytes)
}
