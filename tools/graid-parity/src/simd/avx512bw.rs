//! AVX-512BW: 64-byte vectors; GF multiplication by `vpshufb` nibble tables (per 128-bit lane,
//! like AVX2), doubling through a mask register.

use super::exec::{self, Recovery, Vector};
use crate::gf;
use crate::plan::Plan;
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

#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn run_avx512bw(plan: &mut Plan<'_>) {
    exec::run::<Avx512Bw, 4, 4>(plan)
}

#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn generate_avx512bw(data: &[&[u8]], p: &mut [u8], q: &mut [u8]) {
    exec::generate_job::<Avx512Bw, 4>(data, p, q)
}

#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn recover_avx512bw(recovery: &Recovery<'_>) {
    recovery.run::<Avx512Bw, 4>()
}

pub(crate) fn run(plan: &mut Plan<'_>) {
    assert!(
        is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512bw"),
        "AVX-512BW level on a CPU without AVX-512BW"
    );
    // SAFETY: the CPU supports AVX-512F and AVX-512BW (checked above); plans come from
    // validated jobs.
    unsafe { run_avx512bw(plan) }
}

/// P and Q of a validated `GenPq` job.
pub(crate) fn generate(data: &[&[u8]], p: &mut [u8], q: &mut [u8]) {
    assert!(
        is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512bw"),
        "AVX-512BW level on a CPU without AVX-512BW"
    );
    // SAFETY: the CPU supports AVX-512F and AVX-512BW (checked above); the job was validated
    // (equal lengths, a multiple of 64 bytes, at least two data chunks).
    unsafe { generate_avx512bw(data, p, q) }
}

/// The two lost members of a recovery job that has its own pass.
pub(crate) fn recover(recovery: &Recovery<'_>) {
    assert!(
        is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512bw"),
        "AVX-512BW level on a CPU without AVX-512BW"
    );
    // SAFETY: the CPU supports AVX-512F and AVX-512BW (checked above); a `Recovery` only holds buffers of
    // one length, a multiple of 64 bytes.
    unsafe { recover_avx512bw(recovery) }
}
