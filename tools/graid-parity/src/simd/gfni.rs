//! GFNI levels (AVX2 and AVX-512 widths): every multiplication by a constant is one
//! `gf2p8affineqb` with that constant's 8x8 bit matrix ([`gf::AFFINE_MATRICES`]).
//! `gf2p8mulb` would be one instruction too, but it reduces by the AES polynomial 0x11b, not
//! md's 0x11d, so it would compute a different Q.

use super::exec::Vector;
use crate::gf;
use std::arch::x86_64::*;

#[derive(Clone, Copy)]
pub(crate) struct Avx2Gfni(__m256i);

impl Vector for Avx2Gfni {
    const BYTES: usize = 32;
    // One instruction per multiplication: multiply each source by its own g^i and avoid
    // Horner's serial chain through q.
    const HORNER: bool = false;
    type Multiplier = __m256i;

    #[inline(always)]
    unsafe fn zero() -> Self {
        Avx2Gfni(_mm256_setzero_si256())
    }

    #[inline(always)]
    unsafe fn load(src: *const u8) -> Self {
        Avx2Gfni(_mm256_loadu_si256(src.cast()))
    }

    #[inline(always)]
    unsafe fn store(self, dst: *mut u8) {
        _mm256_storeu_si256(dst.cast(), self.0)
    }

    #[inline(always)]
    unsafe fn xor(self, other: Self) -> Self {
        Avx2Gfni(_mm256_xor_si256(self.0, other.0))
    }

    #[inline(always)]
    unsafe fn mul2(self) -> Self {
        self.mul(Self::multiplier(2))
    }

    #[inline(always)]
    unsafe fn multiplier(c: u8) -> Self::Multiplier {
        _mm256_set1_epi64x(gf::AFFINE_MATRICES[c as usize] as i64)
    }

    #[inline(always)]
    unsafe fn mul(self, matrix: Self::Multiplier) -> Self {
        Avx2Gfni(_mm256_gf2p8affine_epi64_epi8::<0>(self.0, matrix))
    }
}

#[derive(Clone, Copy)]
pub(crate) struct Avx512Gfni(__m512i);

impl Vector for Avx512Gfni {
    const BYTES: usize = 64;
    const HORNER: bool = false;
    type Multiplier = __m512i;

    #[inline(always)]
    unsafe fn zero() -> Self {
        Avx512Gfni(_mm512_setzero_si512())
    }

    #[inline(always)]
    unsafe fn load(src: *const u8) -> Self {
        Avx512Gfni(_mm512_loadu_si512(src.cast()))
    }

    #[inline(always)]
    unsafe fn store(self, dst: *mut u8) {
        _mm512_storeu_si512(dst.cast(), self.0)
    }

    #[inline(always)]
    unsafe fn xor(self, other: Self) -> Self {
        Avx512Gfni(_mm512_xor_si512(self.0, other.0))
    }

    #[inline(always)]
    unsafe fn mul2(self) -> Self {
        self.mul(Self::multiplier(2))
    }

    #[inline(always)]
    unsafe fn multiplier(c: u8) -> Self::Multiplier {
        _mm512_set1_epi64(gf::AFFINE_MATRICES[c as usize] as i64)
    }

    #[inline(always)]
    unsafe fn mul(self, matrix: Self::Multiplier) -> Self {
        Avx512Gfni(_mm512_gf2p8affine_epi64_epi8::<0>(self.0, matrix))
    }
}

level_entries! {
    mod avx2_entries {
        name: "AVX2+GFNI",
        features: "avx2,gfni",
        detect: ["avx2", "gfni"],
        vector: Avx2Gfni,
        unroll: 4,
        gen: 4,
    }
}

level_entries! {
    mod avx512_entries {
        name: "AVX-512+GFNI",
        features: "avx512f,avx512bw,gfni",
        detect: ["avx512f", "avx512bw", "gfni"],
        vector: Avx512Gfni,
        unroll: 4,
        gen: 4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `c * x` for every byte `x`, `V::BYTES` bytes per instruction.
    ///
    /// # Safety
    /// The CPU supports what `V`'s instructions need.
    #[inline(always)]
    unsafe fn products<V: Vector>(c: u8) -> [u8; 256] {
        let bytes: [u8; 256] = std::array::from_fn(|x| x as u8);
        let mut out = [0u8; 256];
        for at in (0..256).step_by(V::BYTES) {
            let x = V::load(bytes.as_ptr().add(at));
            x.mul(V::multiplier(c)).store(out.as_mut_ptr().add(at));
        }
        out
    }

    #[target_feature(enable = "avx2,gfni")]
    unsafe fn products_avx2(c: u8) -> [u8; 256] {
        products::<Avx2Gfni>(c)
    }

    #[target_feature(enable = "avx512f,avx512bw,gfni")]
    unsafe fn products_avx512(c: u8) -> [u8; 256] {
        products::<Avx512Gfni>(c)
    }

    /// `gf2p8affineqb` as this CPU executes it, at both widths the GFNI levels use, for every
    /// constant's matrix and every byte: the matrices checked against the instruction itself
    /// (the tests in `gf` check them against a model of Intel's pseudocode). Runs where the
    /// CPU has GFNI: on the device machine, and on the emulated CPU of
    /// `build/emulated-parity.sh`.
    #[test]
    fn instruction_multiplies_in_md_field() {
        if !is_x86_feature_detected!("gfni") || !is_x86_feature_detected!("avx2") {
            eprintln!("skipped: this CPU has no GFNI");
            return;
        }
        let wide = is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512bw");
        let mut wrong = Vec::new();
        for c in 0..=255u8 {
            // SAFETY: AVX2 and GFNI are present (checked above).
            let narrow = unsafe { products_avx2(c) };
            // SAFETY: AVX-512F/BW and GFNI are present (checked above).
            let zmm = wide.then(|| unsafe { products_avx512(c) });
            for x in 0..=255u8 {
                let want = gf::mul(c, x);
                let got = (narrow[x as usize], zmm.map(|w| w[x as usize]));
                if got.0 != want || got.1.is_some_and(|w| w != want) {
                    wrong.push((c, x, got, want));
                }
            }
        }
        assert!(
            wrong.is_empty(),
            "{} wrong products (c, x, (ymm, zmm), want), first: {:x?}",
            wrong.len(),
            &wrong[..wrong.len().min(8)]
        );
    }
}
