//! The portable level: 64-bit SWAR (eight bytes per `u64`), for CPUs without a SIMD level.

use super::exec::{self, Vector};
use crate::gf;
use crate::plan::Plan;

#[derive(Clone, Copy)]
pub(crate) struct Word(u64);

const LOW_SEVEN: u64 = 0x7f7f_7f7f_7f7f_7f7f;
const HIGH_BIT: u64 = 0x8080_8080_8080_8080;

impl Vector for Word {
    const BYTES: usize = 8;
    const HORNER: bool = true;
    type Multiplier = &'static [u8; 32];

    #[inline(always)]
    unsafe fn zero() -> Self {
        Word(0)
    }

    #[inline(always)]
    unsafe fn load(src: *const u8) -> Self {
        Word(u64::from_le(src.cast::<u64>().read_unaligned()))
    }

    #[inline(always)]
    unsafe fn store(self, dst: *mut u8) {
        dst.cast::<u64>().write_unaligned(self.0.to_le())
    }

    #[inline(always)]
    unsafe fn xor(self, other: Self) -> Self {
        Word(self.0 ^ other.0)
    }

    #[inline(always)]
    unsafe fn mul2(self) -> Self {
        // Shift each byte left; bytes whose top bit fell off get the polynomial XORed in.
        let overflow = (self.0 & HIGH_BIT) >> 7;
        Word(((self.0 & LOW_SEVEN) << 1) ^ (overflow * u64::from(gf::POLY_LOW)))
    }

    #[inline(always)]
    unsafe fn multiplier(c: u8) -> Self::Multiplier {
        &gf::NIBBLE_TABLES[c as usize]
    }

    #[inline(always)]
    unsafe fn mul(self, table: Self::Multiplier) -> Self {
        let bytes = self
            .0
            .to_le_bytes()
            .map(|b| table[(b & 15) as usize] ^ table[16 + (b >> 4) as usize]);
        Word(u64::from_le_bytes(bytes))
    }
}

pub(crate) fn run(plan: &mut Plan<'_>) {
    // SAFETY: `Word` needs no CPU features, and plans are built only from validated jobs.
    unsafe { exec::run::<Word, 4, 4>(plan) }
}
