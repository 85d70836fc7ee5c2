//! GF(2^8) arithmetic with Linux md's field: polynomial x^8 + x^4 + x^3 + x^2 + 1 (0x11d),
//! generator g = 2. Tables are built at compile time so every backend shares one definition.

/// The reduction polynomial, without the x^8 term (the byte XORed in when a product overflows).
pub const POLY_LOW: u8 = 0x1d;

/// Multiplies by the generator g = 2: a shift, reduced by 0x11d when bit 7 falls off.
pub const fn mul2(x: u8) -> u8 {
    let reduce = if x & 0x80 != 0 { POLY_LOW } else { 0 };
    (x << 1) ^ reduce
}

/// Carry-less "Russian peasant" multiplication; slow but obviously right, used to build tables.
pub const fn mul_slow(mut a: u8, mut b: u8) -> u8 {
    let mut product = 0;
    while b != 0 {
        if b & 1 != 0 {
            product ^= a;
        }
        a = mul2(a);
        b >>= 1;
    }
    product
}

const fn build_exp() -> [u8; 256] {
    let mut table = [0u8; 256];
    let mut x = 1u8;
    let mut i = 0;
    while i < 256 {
        table[i] = x;
        x = mul2(x);
        i += 1;
    }
    table
}

const fn build_log() -> [u8; 256] {
    let exp = build_exp();
    let mut table = [0u8; 256];
    let mut i = 0;
    // g has order 255, so exponents 0..255 visit every non-zero element exactly once.
    while i < 255 {
        table[exp[i] as usize] = i as u8;
        i += 1;
    }
    table
}

/// `EXP[i]` = g^i; g^255 = g^0 = 1.
pub const EXP: [u8; 256] = build_exp();
/// `LOG[x]` = i such that g^i = x, for x != 0 (`LOG[0]` is meaningless and set to 0).
pub const LOG: [u8; 256] = build_log();

const fn build_nibble_tables() -> [[u8; 32]; 256] {
    let mut tables = [[0u8; 32]; 256];
    let mut c = 0;
    while c < 256 {
        let mut n = 0;
        while n < 16 {
            tables[c][n] = mul_slow(c as u8, n as u8);
            tables[c][16 + n] = mul_slow(c as u8, (n as u8) << 4);
            n += 1;
        }
        c += 1;
    }
    tables
}

const fn build_affine_matrices() -> [u64; 256] {
    let mut matrices = [0u64; 256];
    let mut c = 0;
    while c < 256 {
        // Multiplication by a constant is linear over GF(2): bit `i` of `c*x` is the parity of
        // `x & row_i`, where bit `k` of `row_i` is bit `i` of `c * 2^k`. gf2p8affineqb reads the
        // row for output bit `i` from byte `7 - i` of the 64-bit matrix operand.
        let mut out_bit = 0;
        while out_bit < 8 {
            let mut row = 0u64;
            let mut in_bit = 0;
            while in_bit < 8 {
                if (mul_slow(c as u8, 1 << in_bit) >> out_bit) & 1 != 0 {
                    row |= 1 << in_bit;
                }
                in_bit += 1;
            }
            matrices[c] |= row << (8 * (7 - out_bit));
            out_bit += 1;
        }
        c += 1;
    }
    matrices
}

/// Split-nibble product tables, one per constant: `c*x = T[c][x & 15] ^ T[c][16 + (x >> 4)]`.
/// This is the layout `pshufb` consumes (16 entries per nibble half).
pub static NIBBLE_TABLES: [[u8; 32]; 256] = build_nibble_tables();

/// Per-constant 8x8 bit matrices that make `gf2p8affineqb(x, AFFINE[c], 0)` compute `c * x`
/// in md's field (`gf2p8mulb` cannot: it is hard-wired to the AES polynomial 0x11b).
pub static AFFINE_MATRICES: [u64; 256] = build_affine_matrices();

/// Multiplies two field elements.
pub fn mul(a: u8, b: u8) -> u8 {
    if a == 0 || b == 0 {
        return 0;
    }
    let sum = LOG[a as usize] as usize + LOG[b as usize] as usize;
    EXP[sum % 255]
}

/// g^e for any exponent (g has order 255).
pub fn pow2(e: usize) -> u8 {
    EXP[e % 255]
}

/// Multiplicative inverse.
///
/// # Panics
/// On zero, which has no inverse; callers only invert values that are provably non-zero
/// (powers of g and sums of distinct powers of g).
pub fn inv(a: u8) -> u8 {
    assert!(a != 0, "zero has no inverse in GF(2^8)");
    EXP[(255 - LOG[a as usize] as usize) % 255]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A bit-for-bit model of one byte of Intel's `gf2p8affineqb` with imm8 = 0: output bit `i`
    /// is the parity of `matrix.byte[7 - i] AND x`.
    fn affine_model(x: u8, matrix: u64) -> u8 {
        let mut out = 0u8;
        for bit in 0..8 {
            let row = (matrix >> (8 * (7 - bit))) as u8;
            out |= (((row & x).count_ones() & 1) as u8) << bit;
        }
        out
    }

    #[test]
    fn table_multiplication_matches_shift_and_add() {
        for a in 0..=255u8 {
            for b in 0..=255u8 {
                assert_eq!(mul(a, b), mul_slow(a, b), "{a:#x} * {b:#x}");
            }
        }
    }

    #[test]
    fn generator_has_order_255() {
        let mut seen = [false; 256];
        for e in 0..255 {
            let x = pow2(e);
            assert!(!seen[x as usize], "g^{e} repeats");
            seen[x as usize] = true;
        }
        assert!(!seen[0]);
        assert_eq!(pow2(255), 1);
    }

    #[test]
    fn inverse_is_inverse() {
        for a in 1..=255u8 {
            assert_eq!(mul(a, inv(a)), 1, "{a:#x}");
        }
    }

    #[test]
    fn md_field_spot_values() {
        // 0x80 * 2 overflows and reduces by 0x1d (0x11b, the AES polynomial, would give 0x1b).
        assert_eq!(mul2(0x80), 0x1d);
        assert_eq!(mul(0x80, 0x02), 0x1d);
        assert_eq!(EXP[8], 0x1d);
    }

    #[test]
    fn nibble_tables_multiply() {
        for c in 0..=255u8 {
            let table = &NIBBLE_TABLES[c as usize];
            for x in 0..=255u8 {
                let got = table[(x & 15) as usize] ^ table[16 + (x >> 4) as usize];
                assert_eq!(got, mul(c, x), "{c:#x} * {x:#x}");
            }
        }
    }

    #[test]
    fn affine_matrices_multiply_in_md_field() {
        for c in 0..=255u8 {
            let matrix = AFFINE_MATRICES[c as usize];
            for x in 0..=255u8 {
                assert_eq!(affine_model(x, matrix), mul(c, x), "{c:#x} * {x:#x}");
            }
        }
    }

    #[test]
    fn affine_identity_is_intel_identity() {
        // Intel documents 0x0102040810204080 as the identity matrix for gf2p8affineqb.
        assert_eq!(AFFINE_MATRICES[1], 0x0102_0408_1020_4080);
    }
}
