//! Property tests: every dispatch level this CPU supports (and the thread pool) must produce
//! byte-for-byte what the scalar reference produces, over random member counts, chunk sizes,
//! contents, update subsets and failure sets. Case counts and sizes are bounded so the suite
//! stays fast in debug builds.

mod common;

use common::{cpu_engines, recover, Stripe};
use graid_parity::{AlignedBuf, Change, Engine, Job, ReferenceEngine, Update, CHUNK_ALIGN};
use proptest::prelude::*;

fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Chunk lengths: mostly small, covering both the unrolled loop and the tail of every level.
fn chunk_len() -> impl Strategy<Value = usize> {
    (1usize..=40).prop_map(|units| units * CHUNK_ALIGN)
}

fn gen_outputs(engine: &dyn Engine, stripe: &Stripe) -> (AlignedBuf, AlignedBuf, AlignedBuf) {
    let len = stripe.len();
    let (mut p, mut q, mut x) = (
        AlignedBuf::zeroed(len),
        AlignedBuf::zeroed(len),
        AlignedBuf::zeroed(len),
    );
    engine
        .compute(&mut [
            Job::GenPq {
                data: stripe.data_refs(),
                p: &mut p,
                q: &mut q,
            },
            Job::Xor {
                data: stripe.data_refs(),
                p: &mut x,
            },
        ])
        .unwrap();
    (p, q, x)
}

/// Applies an update (new contents for the chunks in `changed`) to copies of the stripe's
/// parity; returns the updated P and Q.
fn updated_parity(
    engine: &dyn Engine,
    stripe: &Stripe,
    new_data: &[AlignedBuf],
    changed: &[usize],
    raid6: bool,
) -> (AlignedBuf, AlignedBuf) {
    let (mut p, mut q) = (stripe.p.clone(), stripe.q.clone());
    let changes = changed
        .iter()
        .map(|&index| Change {
            index,
            old: &stripe.data[index],
            new: &new_data[index],
        })
        .collect();
    engine
        .compute(&mut [Job::Update(Update {
            data_chunks: stripe.data.len(),
            changes,
            p: &mut p,
            q: raid6.then_some(&mut q[..]),
        })])
        .unwrap();
    (p, q)
}

proptest! {
    #![proptest_config(config(64))]

    #[test]
    fn generation_matches_reference(
        data_chunks in 2usize..=30, len in chunk_len(), seed in any::<u64>()
    ) {
        let stripe = Stripe::random(seed, data_chunks, len);
        for engine in cpu_engines() {
            let (p, q, x) = gen_outputs(&engine, &stripe);
            prop_assert!(p[..] == stripe.p[..], "{} P", engine.name());
            prop_assert!(q[..] == stripe.q[..], "{} Q", engine.name());
            prop_assert!(x[..] == stripe.p[..], "{} XOR", engine.name());
        }
    }

    #[test]
    fn recovery_matches_reference_and_original(
        data_chunks in 2usize..=30,
        len in chunk_len(),
        seed in any::<u64>(),
        first in any::<prop::sample::Index>(),
        second in any::<prop::sample::Index>(),
        two_lost in any::<bool>(),
    ) {
        let stripe = Stripe::random(seed, data_chunks, len);
        let members = data_chunks + 2;
        let a = first.index(members);
        // Pick b from the other members.
        let b = (a + 1 + second.index(members - 1)) % members;
        let mut lost = if two_lost { vec![a, b] } else { vec![a] };
        lost.sort_unstable();
        let expected = recover(&ReferenceEngine, &stripe, &lost, true).unwrap();
        for (m, buf) in lost.iter().zip(&expected) {
            prop_assert!(buf[..] == *stripe.member(*m), "reference lost {:?}", lost);
        }
        for engine in cpu_engines() {
            let got = recover(&engine, &stripe, &lost, true).unwrap();
            for (g, e) in got.iter().zip(&expected) {
                prop_assert!(g[..] == e[..], "{} lost {:?}", engine.name(), lost);
            }
        }
    }

    #[test]
    fn update_matches_reference_and_regeneration(
        data_chunks in 2usize..=30,
        len in chunk_len(),
        seed in any::<u64>(),
        mask in any::<u32>(),
        raid6 in any::<bool>(),
    ) {
        let stripe = Stripe::random(seed, data_chunks, len);
        let fresh = Stripe::random(seed ^ 0x5555, data_chunks, len);
        let mut changed: Vec<usize> = (0..data_chunks).filter(|i| mask >> i & 1 == 1).collect();
        if changed.is_empty() {
            changed.push(mask as usize % data_chunks);
        }
        // The new stripe: changed chunks from `fresh`, the rest unchanged.
        let new_data: Vec<AlignedBuf> = (0..data_chunks)
            .map(|i| if changed.contains(&i) { fresh.data[i].clone() } else { stripe.data[i].clone() })
            .collect();
        let regenerated = Stripe::with_parity(new_data.clone());
        let (ref_p, ref_q) = updated_parity(&ReferenceEngine, &stripe, &new_data, &changed, raid6);
        prop_assert!(ref_p[..] == regenerated.p[..], "reference P update");
        if raid6 {
            prop_assert!(ref_q[..] == regenerated.q[..], "reference Q update");
        }
        for engine in cpu_engines() {
            let (p, q) = updated_parity(&engine, &stripe, &new_data, &changed, raid6);
            prop_assert!(p[..] == ref_p[..], "{} P update {:?}", engine.name(), changed);
            prop_assert!(q[..] == ref_q[..], "{} Q update {:?}", engine.name(), changed);
        }
    }
}

proptest! {
    // Few cases: these batches are big enough to go through the thread pool's segmentation.
    #![proptest_config(config(8))]

    #[test]
    fn large_batches_on_the_pool_match_reference(
        shapes in prop::collection::vec((2usize..=12, 1usize..=40), 2..=6),
        seed in any::<u64>(),
    ) {
        let stripes: Vec<Stripe> = shapes
            .iter()
            .enumerate()
            .map(|(i, &(n, units))| Stripe::random(seed + i as u64, n, units * 1024))
            .collect();
        for engine in cpu_engines().into_iter().filter(|e| e.threads() > 1) {
            let mut outputs: Vec<(AlignedBuf, AlignedBuf)> = stripes
                .iter()
                .map(|s| (AlignedBuf::zeroed(s.len()), AlignedBuf::zeroed(s.len())))
                .collect();
            let mut jobs: Vec<Job> = stripes
                .iter()
                .zip(outputs.iter_mut())
                .map(|(s, (p, q))| Job::GenPq { data: s.data_refs(), p, q })
                .collect();
            engine.compute(&mut jobs).unwrap();
            drop(jobs);
            for (s, (p, q)) in stripes.iter().zip(&outputs) {
                prop_assert!(p[..] == s.p[..] && q[..] == s.q[..], "{}", engine.name());
            }
        }
    }
}
