//! SSSE3: 16-byte vectors; GF multiplication by `pshufb` lookups in split-nibble tables.

use super::exec::Vector;
use crate::gf;
use std::arch::x86_64::*;

#[derive(Clone, Copy)]
pub(crate) struct Ssse3(__m128i);

impl Vector for Ssse3 {
    const BYTES: usize = 16;
    const HORNER: bool = true;
    type Multiplier = (__m128i, __m128i);

    #[inline(always)]
    unsafe fn zero() -> Self {
        Ssse3(_mm_setzero_si128())
    }

    #[inline(always)]
    unsafe fn load(src: *const u8) -> Self {
        Ssse3(_mm_loadu_si128(src.cast()))
    }

    #[inline(always)]
    unsafe fn store(self, dst: *mut u8) {
        _mm_storeu_si128(dst.cast(), self.0)
    }

    #[inline(always)]
    unsafe fn xor(self, other: Self) -> Self {
        Ssse3(_mm_xor_si128(self.0, other.0))
    }

    #[inline(always)]
    unsafe fn mul2(self) -> Self {
        // Bytes with the top bit set compare "less than zero": that mask selects the polynomial.
        let overflow = _mm_cmpgt_epi8(_mm_setzero_si128(), self.0);
        let reduce = _mm_and_si128(overflow, _mm_set1_epi8(gf::POLY_LOW as i8));
        Ssse3(_mm_xor_si128(_mm_add_epi8(self.0, self.0), reduce))
    }

    #[inline(always)]
    unsafe fn multiplier(c: u8) -> Self::Multiplier {
        let table = &gf::NIBBLE_TABLES[c as usize];
        (
            _mm_loadu_si128(table.as_ptr().cast()),
            _mm_loadu_si128(table[16..].as_ptr().cast()),
        )
    }

    #[inline(always)]
    unsafe fn mul(self, (low, high): Self::Multiplier) -> Self {
        let nibble = _mm_set1_epi8(0x0f);
        let low_nibbles = _mm_and_si128(self.0, nibble);
        let high_nibbles = _mm_and_si128(_mm_srli_epi16(self.0, 4), nibble);
        Ssse3(_mm_xor_si128(
            _mm_shuffle_epi8(low, low_nibbles),
            _mm_shuffle_epi8(high, high_nibbles),
        ))
    }
}

level_entries! {
    mod entries {
        name: "SSSE3",
        features: "ssse3",
        detect: ["ssse3"],
        vector: Ssse3,
        unroll: 4,
        gen: 4,
    }
}
