//! The checks every accelerator engine (Vulkan, CUDA) must pass against the byte-at-a-time
//! oracle ([`ReferenceEngine`]), shared so each engine's tests are one macro call:
//! [`engine_conformance_tests!`](crate::engine_conformance_tests). Only with the
//! `conformance` feature (a dev-dependency's).

use crate::{AlignedBuf, Change, Chunk, Engine, Job, Recover, ReferenceEngine, Update};

/// `count` columns of `len` bytes, filled from `seed`.
pub fn columns(count: usize, len: usize, seed: u64) -> Vec<AlignedBuf> {
    let mut x = seed | 1;
    (0..count)
        .map(|_| {
            let bytes: Vec<u8> = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect();
            AlignedBuf::from_slice(&bytes)
        })
        .collect()
}

/// P (and, for RAID 6, Q) of `data` by `engine`.
pub fn generate(engine: &dyn Engine, data: &[AlignedBuf], raid6: bool) -> (AlignedBuf, AlignedBuf) {
    let len = data[0].len();
    let (mut p, mut q) = (AlignedBuf::zeroed(len), AlignedBuf::zeroed(len));
    let data: Vec<&[u8]> = data.iter().map(|d| &d[..]).collect();
    let mut jobs = if raid6 {
        vec![Job::GenPq {
            data,
            p: &mut p[..],
            q: &mut q[..],
        }]
    } else {
        vec![Job::Xor {
            data,
            p: &mut p[..],
        }]
    };
    engine.compute(&mut jobs).expect("compute");
    drop(jobs);
    (p, q)
}

/// P and Q of `data` columns of `len` bytes from `seed`: `Err` says which differs.
pub fn check_generation(
    engine: &dyn Engine,
    data: usize,
    raid6: bool,
    len: usize,
    seed: u64,
) -> Result<(), String> {
    let columns = columns(data, len, seed);
    let (p, q) = generate(engine, &columns, raid6);
    let (p_ref, q_ref) = generate(&ReferenceEngine, &columns, raid6);
    if p[..] != p_ref[..] {
        return Err(format!("P differs ({data} data, {len} bytes)"));
    }
    if raid6 && q[..] != q_ref[..] {
        return Err(format!("Q differs ({data} data, {len} bytes)"));
    }
    Ok(())
}

/// Several jobs of different widths and lengths in one batch, 1 MiB columns too.
pub fn check_batch_of_shapes(engine: &dyn Engine) {
    let shapes = [
        (4, true, 1 << 20),
        (3, false, 4096),
        (16, true, 65536),
        (2, true, 512),
    ];
    let inputs: Vec<Vec<AlignedBuf>> = shapes
        .iter()
        .enumerate()
        .map(|(i, &(d, _, len))| columns(d, len, i as u64 + 7))
        .collect();
    let mut outputs: Vec<(AlignedBuf, AlignedBuf)> = shapes
        .iter()
        .map(|&(_, _, len)| (AlignedBuf::zeroed(len), AlignedBuf::zeroed(len)))
        .collect();
    let mut jobs: Vec<Job<'_>> = Vec::new();
    for ((input, (p, q)), &(_, raid6, _)) in inputs.iter().zip(outputs.iter_mut()).zip(&shapes) {
        let data: Vec<&[u8]> = input.iter().map(|d| &d[..]).collect();
        jobs.push(if raid6 {
            Job::GenPq {
                data,
                p: &mut p[..],
                q: &mut q[..],
            }
        } else {
            Job::Xor {
                data,
                p: &mut p[..],
            }
        });
    }
    engine.compute(&mut jobs).expect("compute the batch");
    drop(jobs);
    for ((input, (p, q)), &(_, raid6, _)) in inputs.iter().zip(&outputs).zip(&shapes) {
        let (p_ref, q_ref) = generate(&ReferenceEngine, input, raid6);
        assert!(p[..] == p_ref[..], "P differs");
        if raid6 {
            assert!(q[..] == q_ref[..], "Q differs");
        }
    }
}

/// md's field by hand: data 1, 2, 3 give Q = 1 ^ 2·2 ^ 4·3 = 9 and P = 0; 0x80 in slot 1
/// gives Q = 2·0x80 = 0x100 mod 0x11d = 0x1d.
pub fn check_md_golden_q(engine: &dyn Engine) {
    let data: Vec<AlignedBuf> = [1u8, 2, 3]
        .iter()
        .map(|&b| AlignedBuf::from_slice(&[b; 512]))
        .collect();
    let (p, q) = generate(engine, &data, true);
    assert!(p.iter().all(|&b| b == 0));
    assert!(q.iter().all(|&b| b == 9), "Q = {}", q[0]);
    let data: Vec<AlignedBuf> = [0u8, 0x80]
        .iter()
        .map(|&b| AlignedBuf::from_slice(&[b; 512]))
        .collect();
    let (_, q) = generate(engine, &data, true);
    assert!(q.iter().all(|&b| b == 0x1d), "Q = {:#x}", q[0]);
}

/// A read-modify-write of the `changed` data columns (indices, distinct) of a stripe of
/// `data` columns from `seed`: P (and Q) updated in place by `engine` must equal the oracle's
/// parity of the new data; `Err` says which differs.
pub fn check_update(
    engine: &dyn Engine,
    data: usize,
    raid6: bool,
    len: usize,
    seed: u64,
    changed: &[usize],
) -> Result<(), String> {
    let old = columns(data, len, seed);
    let replacements = columns(changed.len(), len, !seed);
    let (mut p, mut q) = generate(&ReferenceEngine, &old, raid6);
    let mut new = old.clone();
    for (&index, replacement) in changed.iter().zip(&replacements) {
        new[index] = replacement.clone();
    }
    let mut jobs = [Job::Update(Update {
        data_chunks: data,
        changes: changed
            .iter()
            .map(|&index| Change {
                index,
                old: &old[index][..],
                new: &new[index][..],
            })
            .collect(),
        p: &mut p[..],
        q: if raid6 { Some(&mut q[..]) } else { None },
    })];
    engine.compute(&mut jobs).map_err(|e| e.to_string())?;
    let (p_ref, q_ref) = generate(&ReferenceEngine, &new, raid6);
    if p[..] != p_ref[..] {
        return Err(format!("P differs after updating {changed:?} of {data}"));
    }
    if raid6 && q[..] != q_ref[..] {
        return Err(format!("Q differs after updating {changed:?} of {data}"));
    }
    Ok(())
}

/// Rebuilds the `lost` slots (data indices, P = data, Q = data + 1) of a stripe of `sources`
/// with `engine`, from the others and the oracle's parity; the rebuilt columns, in order.
pub fn rebuild(
    engine: &dyn Engine,
    sources: &[AlignedBuf],
    raid6: bool,
    lost: &[usize],
) -> Vec<AlignedBuf> {
    let (p, q) = generate(&ReferenceEngine, sources, raid6);
    let len = p.len();
    let mut all: Vec<AlignedBuf> = sources.to_vec();
    all.push(p);
    if raid6 {
        all.push(q);
    }
    // Lost columns start as garbage.
    for &slot in lost {
        all[slot] = AlignedBuf::from_slice(&vec![0xa5; len]);
    }
    {
        let mut chunks: Vec<Chunk<'_>> = all
            .iter_mut()
            .enumerate()
            .map(|(slot, c)| {
                if lost.contains(&slot) {
                    Chunk::Lost(&mut c[..])
                } else {
                    Chunk::Intact(&c[..])
                }
            })
            .collect();
        let q = if raid6 { chunks.pop() } else { None };
        let p = chunks.pop().expect("P");
        let mut jobs = [Job::Recover(Recover { data: chunks, p, q })];
        engine.compute(&mut jobs).expect("recover");
    }
    lost.iter().map(|&slot| all[slot].clone()).collect()
}

/// The `lost` slots of a stripe of `data` columns from `seed`, rebuilt by `engine`: `Err` names
/// the first one that differs from the original.
pub fn check_recovery(
    engine: &dyn Engine,
    data: usize,
    raid6: bool,
    len: usize,
    seed: u64,
    lost: &[usize],
) -> Result<(), String> {
    let sources = columns(data, len, seed);
    let rebuilt = rebuild(engine, &sources, raid6, lost);
    let (p, q) = generate(&ReferenceEngine, &sources, raid6);
    for (slot, column) in lost.iter().zip(&rebuilt) {
        let expected: &[u8] = match *slot {
            s if s < data => &sources[s],
            s if s == data => &p,
            _ => &q,
        };
        if column[..] != *expected {
            return Err(format!(
                "slot {slot} of {lost:?} rebuilt wrong (raid6 {raid6}, {data} data)"
            ));
        }
    }
    Ok(())
}

/// Every lost pair of a 5+2 stripe and every lost column of a 5+1 one.
pub fn check_every_lost_set(engine: &dyn Engine) {
    let data = 5;
    for raid6 in [false, true] {
        let width = data + if raid6 { 2 } else { 1 };
        let mut sets: Vec<Vec<usize>> = (0..width).map(|a| vec![a]).collect();
        if raid6 {
            sets.extend((0..width).flat_map(|a| (a + 1..width).map(move |b| vec![a, b])));
        }
        for lost in sets {
            check_recovery(engine, data, raid6, 1024, 42, &lost).unwrap();
        }
    }
}

/// A RAID 6 job over one stripe laid out back to back in `s`: `data` columns, P, Q.
fn stripe_job(s: &mut [u8], data: usize, len: usize) -> Job<'_> {
    let (d, pq) = s.split_at_mut(data * len);
    let (p, q) = pq.split_at_mut(len);
    Job::GenPq {
        data: d.chunks(len).collect(),
        p,
        q,
    }
}

/// A shared pool (`Engine::share_memory`) holding two RAID 6 stripes back to back, as the ring
/// lays them out, and a third job outside it: `counts()` (jobs from the pool, jobs from
/// elsewhere, as the engine counts them) must grow by two and one, and every parity be right.
/// When the engine cannot share the pool the check is skipped, or fails if `required`.
#[allow(unsafe_code)]
pub fn check_shared_pool(engine: &dyn Engine, counts: &dyn Fn() -> (u64, u64), required: bool) {
    let (data, len) = (4, 8192);
    let mut pool = AlignedBuf::zeroed_page_aligned(2 * (data + 2) * len);
    let base = pool.as_mut_ptr();
    // SAFETY: `pool` stays alive and in place until it is unshared below.
    let shared = unsafe { engine.share_memory(Some((base, pool.len()))) };
    if !shared {
        assert!(!required, "{} did not take the pool", engine.name());
        eprintln!("skipping: {} cannot share host memory", engine.name());
        return;
    }
    let sources = columns(2 * data, len, 99);
    for (i, source) in sources.iter().enumerate() {
        let column = (i / data) * (data + 2) + i % data;
        pool[column * len..(column + 1) * len].copy_from_slice(source);
    }
    let outside = columns(3, len, 5);
    let (mut p3, mut q3) = (AlignedBuf::zeroed(len), AlignedBuf::zeroed(len));
    let (before_pool, before_other) = counts();
    {
        let (first, second) = pool.split_at_mut((data + 2) * len);
        let mut jobs = vec![
            stripe_job(first, data, len),
            stripe_job(second, data, len),
            Job::GenPq {
                data: outside.iter().map(|d| &d[..]).collect(),
                p: &mut p3[..],
                q: &mut q3[..],
            },
        ];
        engine.compute(&mut jobs).expect("compute");
    }
    let (from_pool, other) = counts();
    // SAFETY: unsharing needs nothing.
    unsafe { engine.share_memory(None) };
    assert_eq!(
        from_pool - before_pool,
        2,
        "the pool's jobs were not taken from the pool"
    );
    assert_eq!(
        other - before_other,
        1,
        "the outside job was not counted as staged"
    );
    for s in 0..2 {
        let (p_ref, q_ref) = generate(&ReferenceEngine, &sources[s * data..(s + 1) * data], true);
        let at = s * (data + 2) * len;
        assert!(
            pool[at + data * len..at + (data + 1) * len] == p_ref[..],
            "P of stripe {s}"
        );
        assert!(
            pool[at + (data + 1) * len..at + (data + 2) * len] == q_ref[..],
            "Q of stripe {s}"
        );
    }
    let (p_ref, q_ref) = generate(&ReferenceEngine, &outside, true);
    assert!(p3[..] == p_ref[..] && q3[..] == q_ref[..], "the staged job");
}

/// The conformance tests of an engine, as `#[test]` functions. `$engine` is an expression of
/// type `Option<&'static E>` (`None`: no device here, every test passes without checking),
/// `$counts` a closure from `&E` to its (from the pool, staged) job counts, `$required` whether
/// sharing the pool must work. The caller's crate needs `proptest` as a dev-dependency.
#[macro_export]
macro_rules! engine_conformance_tests {
    ($engine:expr, $counts:expr, $required:expr) => {
        use proptest::prelude::*;
        use $crate::conformance;

        /// The tests share one engine and run in parallel; the shared-pool check counts the
        /// engine's jobs, so it runs alone (write) while the others share it (read).
        static ENGINE_USE: std::sync::RwLock<()> = std::sync::RwLock::new(());

        fn sharing_the_engine() -> std::sync::RwLockReadGuard<'static, ()> {
            ENGINE_USE.read().unwrap_or_else(|poisoned| poisoned.into_inner())
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(24))]

            #[test]
            fn p_and_q_match_the_oracle(
                data in 2usize..=30,
                raid6 in any::<bool>(),
                len_units in 1usize..=64,
                seed in any::<u64>(),
            ) {
                let Some(engine) = $engine else { return Ok(()) };
                let _shared = sharing_the_engine();
                let checked = conformance::check_generation(engine, data, raid6, len_units * 512, seed);
                prop_assert!(checked.is_ok(), "{:?}", checked);
            }
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(48))]

            #[test]
            fn recoveries_of_any_one_or_two_columns_match_the_oracle(
                data in 2usize..=20,
                raid6 in any::<bool>(),
                len_units in 1usize..=16,
                seed in any::<u64>(),
                picks in any::<(usize, usize, bool)>(),
            ) {
                let Some(engine) = $engine else { return Ok(()) };
                let _shared = sharing_the_engine();
                let width = data + if raid6 { 2 } else { 1 };
                let (a, b, two) = picks;
                let mut lost = vec![a % width];
                if raid6 && two && b % width != a % width {
                    lost.push(b % width);
                }
                lost.sort_unstable();
                let checked = conformance::check_recovery(engine, data, raid6, len_units * 512, seed, &lost);
                prop_assert!(checked.is_ok(), "{:?}", checked);
            }
        }

        #[test]
        fn a_batch_of_many_stripes_and_shapes_in_one_call() {
            if let Some(engine) = $engine {
                let _shared = sharing_the_engine();
                conformance::check_batch_of_shapes(engine);
            }
        }

        #[test]
        fn md_golden_vector_for_q() {
            if let Some(engine) = $engine {
                let _shared = sharing_the_engine();
                conformance::check_md_golden_q(engine);
            }
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(32))]

            #[test]
            fn read_modify_writes_match_the_oracle(
                data in 2usize..=30,
                raid6 in any::<bool>(),
                len_units in 1usize..=16,
                seed in any::<u64>(),
                picks in prop::collection::btree_set(0usize..30, 1..=30),
            ) {
                let Some(engine) = $engine else { return Ok(()) };
                let _shared = sharing_the_engine();
                let changed: Vec<usize> = picks.into_iter().filter(|&i| i < data).collect();
                prop_assume!(!changed.is_empty());
                let checked = conformance::check_update(engine, data, raid6, len_units * 512, seed, &changed);
                prop_assert!(checked.is_ok(), "{:?}", checked);
            }
        }

        #[test]
        fn every_lost_pair_of_a_raid6_stripe_and_every_lost_column_of_a_raid5_one() {
            if let Some(engine) = $engine {
                let _shared = sharing_the_engine();
                conformance::check_every_lost_set(engine);
            }
        }

        #[test]
        fn jobs_in_shared_memory_are_taken_from_it() {
            if let Some(engine) = $engine {
                let _alone = ENGINE_USE.write().unwrap_or_else(|poisoned| poisoned.into_inner());
                let counts = $counts;
                conformance::check_shared_pool(engine, &|| counts(engine), $required);
            }
        }
    };
}
