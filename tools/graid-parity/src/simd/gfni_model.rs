//! A software model of the GFNI levels, for CPUs without GFNI: the same executor in its
//! direct (non-Horner) form, with every multiplication done by a bit-exact model of
//! `gf2p8affineqb` using the same matrices ([`gf::AFFINE_MATRICES`]). If this agrees with the
//! reference, the GFNI kernels differ from it only in the intrinsics themselves.

use super::exec::{self, Vector};
use crate::gf;
use crate::plan::Plan;

#[derive(Clone, Copy)]
struct AffineWord(u64);

/// `gf2p8affineqb` on one byte with imm8 = 0: output bit `i` is the parity of
/// `matrix.byte[7 - i] & x`.
fn affine_byte(x: u8, matrix: u64) -> u8 {
    (0..8).fold(0u8, |out, bit| {
        let row = (matrix >> (8 * (7 - bit))) as u8;
        out | ((((row & x).count_ones() & 1) as u8) << bit)
    })
}

impl Vector for AffineWord {
    const BYTES: usize = 8;
    const HORNER: bool = false;
    type Multiplier = u64;

    unsafe fn zero() -> Self {
        AffineWord(0)
    }

    unsafe fn load(src: *const u8) -> Self {
        AffineWord(src.cast::<u64>().read_unaligned())
    }

    unsafe fn store(self, dst: *mut u8) {
        dst.cast::<u64>().write_unaligned(self.0)
    }

    unsafe fn xor(self, other: Self) -> Self {
        AffineWord(self.0 ^ other.0)
    }

    unsafe fn mul2(self) -> Self {
        self.mul(Self::multiplier(2))
    }

    unsafe fn multiplier(c: u8) -> u64 {
        gf::AFFINE_MATRICES[c as usize]
    }

    unsafe fn mul(self, matrix: u64) -> Self {
        AffineWord(u64::from_ne_bytes(
            self.0.to_ne_bytes().map(|b| affine_byte(b, matrix)),
        ))
    }
}

fn run_model(plan: &mut Plan<'_>) {
    // SAFETY: the model uses no CPU features; plans come from validated jobs.
    unsafe { exec::run::<AffineWord, 2, 2>(plan) }
}

#[cfg(test)]
mod tests {
    use super::run_model;
    use crate::job::{Change, Chunk, Job, Recover, Update};
    use crate::plan::Plan;
    use crate::{reference, AlignedBuf};

    fn random_chunks(seed: u64, count: usize, len: usize) -> Vec<AlignedBuf> {
        let mut state = seed | 1;
        (0..count)
            .map(|_| {
                let bytes: Vec<u8> = (0..len)
                    .map(|_| {
                        state ^= state << 13;
                        state ^= state >> 7;
                        state ^= state << 17;
                        state as u8
                    })
                    .collect();
                AlignedBuf::from_slice(&bytes)
            })
            .collect()
    }

    fn refs(chunks: &[AlignedBuf]) -> Vec<&[u8]> {
        chunks.iter().map(|c| &c[..]).collect()
    }

    #[test]
    fn model_generates_md_parity() {
        for (n, len) in [(2, 64), (5, 192), (30, 128)] {
            let data = random_chunks(n as u64, n, len);
            let mut out: Vec<AlignedBuf> = (0..4).map(|_| AlignedBuf::zeroed(len)).collect();
            let [p, q, p_ref, q_ref] = &mut out[..] else {
                unreachable!()
            };
            let mut job = Job::GenPq {
                data: refs(&data),
                p,
                q,
            };
            job.validate(0).unwrap();
            run_model(&mut Plan::from_job(&mut job));
            let mut expected = Job::GenPq {
                data: refs(&data),
                p: p_ref,
                q: q_ref,
            };
            reference::compute(&mut expected);
            assert!(
                out[0][..] == out[2][..] && out[1][..] == out[3][..],
                "{n}+2"
            );
        }
    }

    #[test]
    fn model_recovers_every_pair_and_updates() {
        let (n, len) = (6, 128);
        let data = random_chunks(99, n, len);
        let (mut p, mut q) = (AlignedBuf::zeroed(len), AlignedBuf::zeroed(len));
        reference::compute(&mut Job::GenPq {
            data: refs(&data),
            p: &mut p,
            q: &mut q,
        });
        let members: Vec<&[u8]> = data
            .iter()
            .map(|d| &d[..])
            .chain([&p[..], &q[..]])
            .collect();
        for a in 0..n + 2 {
            for b in a + 1..n + 2 {
                let mut outs = [AlignedBuf::zeroed(len), AlignedBuf::zeroed(len)];
                {
                    let [oa, ob] = &mut outs;
                    let mut free = [Some(&mut oa[..]), Some(&mut ob[..])].into_iter().flatten();
                    let mut chunk = |m: usize| {
                        if m == a || m == b {
                            Chunk::Lost(free.next().unwrap())
                        } else {
                            Chunk::Intact(members[m])
                        }
                    };
                    let data = (0..n).map(&mut chunk).collect();
                    let (pc, qc) = (chunk(n), chunk(n + 1));
                    let mut job = Job::Recover(Recover {
                        data,
                        p: pc,
                        q: Some(qc),
                    });
                    job.validate(0).unwrap();
                    run_model(&mut Plan::from_job(&mut job));
                }
                assert!(
                    outs[0][..] == *members[a] && outs[1][..] == *members[b],
                    "{a},{b}"
                );
            }
        }
        // Update chunk 4 to chunk 0's contents: the result must equal the reference's update.
        let (mut p2, mut q2) = (p.clone(), q.clone());
        let (mut p3, mut q3) = (p.clone(), q.clone());
        let change = || {
            vec![Change {
                index: 4,
                old: &data[4][..],
                new: &data[0][..],
            }]
        };
        let mut job = Job::Update(Update {
            data_chunks: n,
            changes: change(),
            p: &mut p2,
            q: Some(&mut q2),
        });
        job.validate(0).unwrap();
        run_model(&mut Plan::from_job(&mut job));
        reference::compute(&mut Job::Update(Update {
            data_chunks: n,
            changes: change(),
            p: &mut p3,
            q: Some(&mut q3),
        }));
        assert!(p2[..] == p3[..] && q2[..] == q3[..]);
    }
}
