//! AVX2: 32-byte vectors; GF multiplication by `vpshufb` lookups in split-nibble tables.

use super::exec::Vector;
use crate::gf;
use std::arch::x86_64::*;

#[derive(Clone, Copy)]
pub(crate) struct Avx2(__m256i);

impl Vector for Avx2 {
    const BYTES: usize = 32;
    const HORNER: bool = true;
    type Multiplier = (__m256i, __m256i);

    #[inline(always)]
    unsafe fn zero() -> Self {
        Avx2(_mm256_setzero_si256())
    }

    #[inline(always)]
    unsafe fn load(src: *const u8) -> Self {
        Avx2(_mm256_loadu_si256(src.cast()))
    }

    #[inline(always)]
    unsafe fn store(self, dst: *mut u8) {
        _mm256_storeu_si256(dst.cast(), self.0)
    }

    #[inline(always)]
    unsafe fn xor(self, other: Self) -> Self {
        Avx2(_mm256_xor_si256(self.0, other.0))
    }

    #[inline(always)]
    unsafe fn mul2(self) -> Self {
        // blendv picks the polynomial for bytes whose top bit is set: one instruction where a
        // compare-and-mask takes two.
        let poly = _mm256_set1_epi8(gf::POLY_LOW as i8);
        let reduce = _mm256_blendv_epi8(_mm256_setzero_si256(), poly, self.0);
        Avx2(_mm256_xor_si256(_mm256_add_epi8(self.0, self.0), reduce))
    }

    #[inline(always)]
    unsafe fn multiplier(c: u8) -> Self::Multiplier {
        let table = &gf::NIBBLE_TABLES[c as usize];
        (
            _mm256_broadcastsi128_si256(_mm_loadu_si128(table.as_ptr().cast())),
            _mm256_broadcastsi128_si256(_mm_loadu_si128(table[16..].as_ptr().cast())),
        )
    }

    #[inline(always)]
    unsafe fn mul(self, (low, high): Self::Multiplier) -> Self {
        let nibble = _mm256_set1_epi8(0x0f);
        let low_nibbles = _mm256_and_si256(self.0, nibble);
        let high_nibbles = _mm256_and_si256(_mm256_srli_epi16(self.0, 4), nibble);
        Avx2(_mm256_xor_si256(
            _mm256_shuffle_epi8(low, low_nibbles),
            _mm256_shuffle_epi8(high, high_nibbles),
        ))
    }
}

level_entries! {
    mod entries {
        name: "AVX2",
        features: "avx2",
        detect: ["avx2"],
        vector: Avx2,
        unroll: 4,
        gen: 6,
    }
}
