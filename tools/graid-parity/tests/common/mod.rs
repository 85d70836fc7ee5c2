//! Helpers shared by the integration tests: deterministic stripes, every engine this CPU can
//! run, and recovery job plumbing.
#![allow(dead_code)]

use graid_parity::{
    AlignedBuf, Chunk, CpuEngine, Engine, Job, Level, Recover, ReferenceEngine, MAX_MEMBERS,
};

/// SplitMix64: a tiny deterministic generator so test data needs no dependency.
pub struct SplitMix(pub u64);

impl SplitMix {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    pub fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            let word = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&word[..chunk.len()]);
        }
    }
}

/// A stripe with correct parity (computed by the reference engine).
pub struct Stripe {
    pub data: Vec<AlignedBuf>,
    pub p: AlignedBuf,
    pub q: AlignedBuf,
}

impl Stripe {
    pub fn random(seed: u64, data_chunks: usize, len: usize) -> Stripe {
        let mut rng = SplitMix(seed);
        let data = (0..data_chunks)
            .map(|_| {
                let mut buf = AlignedBuf::zeroed(len);
                rng.fill(&mut buf);
                buf
            })
            .collect();
        Stripe::with_parity(data)
    }

    pub fn with_parity(data: Vec<AlignedBuf>) -> Stripe {
        let len = data[0].len();
        let mut stripe = Stripe {
            data,
            p: AlignedBuf::zeroed(len),
            q: AlignedBuf::zeroed(len),
        };
        let data = stripe.data.iter().map(|d| &d[..]).collect();
        // A stripe too wide for RAID-6 is a RAID-5 stripe: P only, Q stays zero.
        let mut job = if stripe.data.len() + 2 <= MAX_MEMBERS {
            [Job::GenPq {
                data,
                p: &mut stripe.p,
                q: &mut stripe.q,
            }]
        } else {
            [Job::Xor {
                data,
                p: &mut stripe.p,
            }]
        };
        ReferenceEngine.compute(&mut job).expect("reference P+Q");
        stripe
    }

    pub fn len(&self) -> usize {
        self.p.len()
    }

    /// Member `m`: data chunks first, then P, then Q (the on-disk role order).
    pub fn member(&self, m: usize) -> &[u8] {
        let n = self.data.len();
        match m {
            _ if m < n => &self.data[m],
            _ if m == n => &self.p,
            _ => &self.q,
        }
    }

    pub fn data_refs(&self) -> Vec<&[u8]> {
        self.data.iter().map(|d| &d[..]).collect()
    }
}

/// Every CPU engine this machine can run (each supported level, one thread), plus the best
/// level on two threads to cover the pool.
pub fn cpu_engines() -> Vec<CpuEngine> {
    let mut engines: Vec<CpuEngine> = Level::supported()
        .into_iter()
        .map(|level| CpuEngine::with_level(level).expect("supported level"))
        .collect();
    engines.push(
        CpuEngine::builder()
            .level(Level::best())
            .threads(2)
            .build()
            .expect("two-thread engine"),
    );
    engines
}

/// Recovers the members in `lost` (sorted, member numbering as in [`Stripe::member`]) with
/// `engine`; returns the recovered buffers in the same order. Lost buffers start as garbage so
/// a kernel that forgets to write them fails.
pub fn recover(
    engine: &dyn Engine,
    stripe: &Stripe,
    lost: &[usize],
    raid6: bool,
) -> Result<Vec<AlignedBuf>, graid_parity::ParityError> {
    let n = stripe.data.len();
    let mut outputs: Vec<AlignedBuf> = lost
        .iter()
        .map(|_| AlignedBuf::from_slice(&vec![0xa5; stripe.len()]))
        .collect();
    {
        let mut free = outputs.iter_mut();
        let mut chunk = |m: usize| {
            if lost.contains(&m) {
                Chunk::Lost(free.next().expect("one output per lost member"))
            } else {
                Chunk::Intact(stripe.member(m))
            }
        };
        let data = (0..n).map(&mut chunk).collect();
        let p = chunk(n);
        let q = raid6.then(|| chunk(n + 1));
        engine.compute(&mut [Job::Recover(Recover { data, p, q })])?;
    }
    Ok(outputs)
}
