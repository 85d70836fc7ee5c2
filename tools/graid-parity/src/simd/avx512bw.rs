//! AVX-512BW: 64-byte vectors; GF multiplication by `vpshufb` nibble tables (per 128-bit lane,
//! like AVX2), doubling through a mask register.

use super::exec::Vector;
use crate::gf;
use std::arch::x86_64::*;

#[derive(Clone, Copy)]
pub(crate) struct Avx512Bw(__m512i);

impl Vector for Avx512Bw {
    const BYTES: usize = 64;
    const HORNER: bool = true;
    type Multiplier = (__m512i, __m512i);

    #[inline(always)]
    unsafe fn zero() -> Self {
        Avx512Bw(_mm512_setzero_si512())
    }

    #[inline(always)]
    unsafe fn load(src: *const u8) -> Self {
        Avx512Bw(_mm512_loadu_si512(src.cast()))
    }

    #[inline(always)]
    unsafe fn store(self, dst: *mut u8) {
        _mm512_storeu_si512(dst.cast(), self.0)
    }

    #[inline(always)]
    unsafe fn xor(self, other: Self) -> Self {
        Avx512Bw(_mm512_xor_si512(self.0, other.0))
    }

    #[inline(always)]
    unsafe fn mul2(self) -> Self {
        // The top bit of each byte becomes a mask bit; masked bytes get the polynomial.
        let overflow = _mm512_movepi8_mask(self.0);
        let reduce = _mm512_maskz_mov_epi8(overflow, _mm512_set1_epi8(gf::POLY_LOW as i8));
        Avx512Bw(_mm512_xor_si512(_mm512_add_epi8(self.0, self.0), reduce))
    }

    #[inline(always)]
    unsafe fn multiplier(c: u8) -> Self::Multiplier {
        let table = &gf::NIBBLE_TABLES[c as usize];
        (
            _mm512_broadcast_i32x4(_mm_loadu_si128(table.as_ptr().cast())),
            _mm512_broadcast_i32x4(_mm_loadu_si128(table[16..].as_ptr().cast())),
        )
    }

    #[inline(always)]
    unsafe fn mul(self, (low, high): Self::Multiplier) -> Self {
        let nibble = _mm512_set1_epi8(0x0f);
        let low_nibbles = _mm512_and_si512(self.0, nibble);
        let high_nibbles = _mm512_and_si512(_mm512_srli_epi16(self.0, 4), nibble);
        Avx512Bw(_mm512_xor_si512(
            _mm512_shuffle_epi8(low, low_nibbles),
            _mm512_shuffle_epi8(high, high_nibbles),
        ))
    }
}

level_entries! {
    mod entries {
        name: "AVX-512BW",
        features: "avx512f,avx512bw",
        detect: ["avx512f", "avx512bw"],
        vector: Avx512Bw,
        unroll: 4,
        gen: 4,
    }
}
