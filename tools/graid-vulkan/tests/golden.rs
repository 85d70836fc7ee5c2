//! The Vulkan engine against the byte-at-a-time oracle (`graid_parity::ReferenceEngine`) on
//! whatever device the machine has: Mesa's lavapipe in CI. Without a Vulkan device the tests
//! say so and pass, unless `GRAID_REQUIRE_VULKAN=1` (as `make test` sets it, with lavapipe
//! installed by `make deps`) makes that a failure.

use graid_parity::{AlignedBuf, Engine, Job, ParityError, ReferenceEngine};
use graid_vulkan::VulkanEngine;
use proptest::prelude::*;
use std::sync::OnceLock;

/// The engine, made once for all tests (a device is slow to open on lavapipe).
fn engine() -> Option<&'static VulkanEngine> {
    static ENGINE: OnceLock<Option<VulkanEngine>> = OnceLock::new();
    ENGINE
        .get_or_init(|| match VulkanEngine::new() {
            Ok(engine) => {
                eprintln!("graid-vulkan tests on {}", engine.device_name());
                Some(engine)
            }
            Err(e) => {
                let required = std::env::var("GRAID_REQUIRE_VULKAN").is_ok_and(|v| v == "1");
                assert!(
                    !required,
                    "GRAID_REQUIRE_VULKAN=1 but no Vulkan engine: {e}"
                );
                eprintln!("skipping the Vulkan tests: {e}");
                None
            }
        })
        .as_ref()
}

/// Columns of `len` bytes filled from `seed`.
fn columns(count: usize, len: usize, seed: u64) -> Vec<AlignedBuf> {
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

/// P (and Q) of `data` by `engine`.
fn generate(engine: &dyn Engine, data: &[AlignedBuf], raid6: bool) -> (AlignedBuf, AlignedBuf) {
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

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn p_and_q_match_the_oracle(
        data in 2usize..=30,
        raid6 in any::<bool>(),
        len_units in 1usize..=64,
        seed in any::<u64>(),
    ) {
        let Some(gpu) = engine() else { return Ok(()) };
        let len = len_units * 512;
        let columns = columns(data, len, seed);
        let (p, q) = generate(gpu, &columns, raid6);
        let (p_ref, q_ref) = generate(&ReferenceEngine, &columns, raid6);
        prop_assert!(p[..] == p_ref[..], "P differs");
        if raid6 {
            prop_assert!(q[..] == q_ref[..], "Q differs");
        }
    }
}

#[test]
fn a_batch_of_many_stripes_and_shapes_in_one_call() {
    let Some(gpu) = engine() else { return };
    // Several jobs of different widths and lengths, big ones too (1 MiB columns).
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
    gpu.compute(&mut jobs).expect("compute the batch");
    drop(jobs);
    for ((input, (p, q)), &(_, raid6, _)) in inputs.iter().zip(&outputs).zip(&shapes) {
        let (p_ref, q_ref) = generate(&ReferenceEngine, input, raid6);
        assert!(p[..] == p_ref[..], "P differs");
        if raid6 {
            assert!(q[..] == q_ref[..], "Q differs");
        }
    }
}

#[test]
fn md_golden_vector_for_q() {
    let Some(gpu) = engine() else { return };
    // Data bytes 1, 2, 3 in slots 0, 1, 2: Q = 1 + 2*2 + 4*3 = 1 ^ 4 ^ 12 = 9 in GF(2^8);
    // P = 1 ^ 2 ^ 3 = 0. And 0x80 in slot 1: 2 * 0x80 = 0x100 mod 0x11d = 0x1d.
    let data: Vec<AlignedBuf> = [1u8, 2, 3]
        .iter()
        .map(|&b| AlignedBuf::from_slice(&[b; 512]))
        .collect();
    let (p, q) = generate(gpu, &data, true);
    assert!(p.iter().all(|&b| b == 0));
    assert!(q.iter().all(|&b| b == 9), "Q = {}", q[0]);
    let data: Vec<AlignedBuf> = [0u8, 0x80]
        .iter()
        .map(|&b| AlignedBuf::from_slice(&[b; 512]))
        .collect();
    let (_, q) = generate(gpu, &data, true);
    assert!(q.iter().all(|&b| b == 0x1d), "Q = {:#x}", q[0]);
}

#[test]
fn jobs_it_does_not_do_are_refused_before_anything_is_written() {
    let Some(gpu) = engine() else { return };
    let data = columns(3, 512, 1);
    let (mut p, mut q) = (AlignedBuf::zeroed(512), AlignedBuf::zeroed(512));
    let (mut p2, mut new) = (AlignedBuf::zeroed(512), AlignedBuf::zeroed(512));
    new.copy_from_slice(&data[2]);
    let mut jobs = vec![
        Job::GenPq {
            data: data.iter().map(|d| &d[..]).collect(),
            p: &mut p[..],
            q: &mut q[..],
        },
        Job::Update(graid_parity::Update {
            data_chunks: 3,
            changes: vec![graid_parity::Change {
                index: 0,
                old: &data[0][..],
                new: &new[..],
            }],
            p: &mut p2[..],
            q: None,
        }),
    ];
    let result = gpu.compute(&mut jobs);
    assert!(
        matches!(result, Err(ParityError::JobUnsupported { job: 1, .. })),
        "{result:?}"
    );
    drop(jobs);
    assert!(p.iter().all(|&b| b == 0), "P written by a refused batch");
}

/// Rebuilds the `lost` slots (data indices, P = data, Q = data + 1) of a stripe of `data`
/// columns with `engine`, from the others and the oracle's parity; the rebuilt columns.
fn rebuild(
    engine: &dyn Engine,
    sources: &[AlignedBuf],
    raid6: bool,
    lost: &[usize],
) -> Vec<AlignedBuf> {
    use graid_parity::{Chunk, Recover};
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
    let data = sources.len();
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
    let _ = data;
    lost.iter().map(|&slot| all[slot].clone()).collect()
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
        let Some(gpu) = engine() else { return Ok(()) };
        let width = data + if raid6 { 2 } else { 1 };
        let (a, b, two) = picks;
        let mut lost = vec![a % width];
        if raid6 && two && b % width != a % width {
            lost.push(b % width);
        }
        lost.sort_unstable();
        let sources = columns(data, len_units * 512, seed);
        let rebuilt = rebuild(gpu, &sources, raid6, &lost);
        let (p, q) = generate(&ReferenceEngine, &sources, raid6);
        for (slot, column) in lost.iter().zip(&rebuilt) {
            let expected: &[u8] = match *slot {
                s if s < data => &sources[s],
                s if s == data => &p,
                _ => &q,
            };
            prop_assert!(column[..] == *expected, "slot {} of {:?} rebuilt wrong", slot, lost);
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

#[test]
fn jobs_in_shared_memory_are_computed_in_place() {
    use graid_parity::Engine as _;
    let Some(gpu) = engine() else { return };
    // A page-aligned "pool" holding two RAID 6 stripes back to back (4 data, P, Q), as the
    // ring lays them out, and a third job outside it (staged).
    let (data, len) = (4, 8192);
    let mut pool = AlignedBuf::zeroed_page_aligned(2 * (data + 2) * len);
    let base = pool.as_mut_ptr();
    // SAFETY: `pool` outlives its use here, and is forgotten before it goes.
    let shared = unsafe { gpu.share_memory(Some((base, pool.len()))) };
    let required = std::env::var("GRAID_REQUIRE_VULKAN").is_ok_and(|v| v == "1");
    if !shared {
        assert!(
            !required,
            "the device did not take the pool (VK_EXT_external_memory_host)"
        );
        eprintln!("skipping: the device cannot import host memory");
        return;
    }
    let sources = columns(2 * data, len, 99);
    for (i, source) in sources.iter().enumerate() {
        let column = (i / data) * (data + 2) + i % data;
        pool[column * len..(column + 1) * len].copy_from_slice(source);
    }
    let outside = columns(3, len, 5);
    let (mut p3, mut q3) = (AlignedBuf::zeroed(len), AlignedBuf::zeroed(len));
    let (before_in_place, before_staged) = gpu.jobs_in_place_and_staged();
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
        gpu.compute(&mut jobs).expect("compute");
    }
    let (in_place, staged) = gpu.jobs_in_place_and_staged();
    // SAFETY: forgetting needs nothing.
    unsafe { gpu.share_memory(None) };
    assert_eq!(
        in_place - before_in_place,
        2,
        "the pool's jobs were not computed in place"
    );
    assert_eq!(staged - before_staged, 1, "the outside job was not staged");
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

#[test]
fn every_lost_pair_of_a_raid6_stripe_and_every_lost_column_of_a_raid5_one() {
    let Some(gpu) = engine() else { return };
    let data = 5;
    let sources = columns(data, 1024, 42);
    for raid6 in [false, true] {
        let width = data + if raid6 { 2 } else { 1 };
        let (p, q) = generate(&ReferenceEngine, &sources, raid6);
        let mut sets: Vec<Vec<usize>> = (0..width).map(|a| vec![a]).collect();
        if raid6 {
            sets.extend((0..width).flat_map(|a| (a + 1..width).map(move |b| vec![a, b])));
        }
        for lost in sets {
            let rebuilt = rebuild(gpu, &sources, raid6, &lost);
            for (slot, column) in lost.iter().zip(&rebuilt) {
                let expected: &[u8] = match *slot {
                    s if s < data => &sources[s],
                    s if s == data => &p,
                    _ => &q,
                };
                assert!(
                    column[..] == *expected,
                    "slot {slot} of {lost:?} (raid6 {raid6})"
                );
            }
        }
    }
}
