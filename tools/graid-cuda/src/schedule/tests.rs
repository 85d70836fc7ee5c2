//! Schedules run on an emulated device: lane buffers in host memory and the kernels of
//! `kernels/parity.cu` transcribed to Rust, against the byte-at-a-time oracle.

use super::*;
use graid_parity::conformance::columns as filled;
use graid_parity::{AlignedBuf, Change, Chunk, Engine, Recover, ReferenceEngine, Update};
use proptest::prelude::*;

fn times_two(x: u32) -> u32 {
    let carries = (x >> 7) & 0x0101_0101;
    ((x << 1) & 0xfefe_fefe) ^ (carries * 0x1d)
}

fn times(mut x: u32, c: u32) -> u32 {
    let mut acc = 0;
    let mut c = c & 0xff;
    while c != 0 {
        if c & 1 != 0 {
            acc ^= x;
        }
        x = times_two(x);
        c >>= 1;
    }
    acc
}

/// `graid_generate`, `graid_recover` and `graid_update`, one word at a time.
fn kernel(col: &mut [u32], which: Kernel, k: &Constants) {
    let (words, data) = (k[1] as usize, k[2] as usize);
    let at = |slot: usize, w: usize| slot * words + w;
    for w in 0..words {
        if which == Kernel::Update {
            let (changes, parity) = (data, k[3]);
            let (mut p, mut q) = (col[at(2 * changes, w)], 0);
            if parity == 2 {
                q = col[at(2 * changes + 1, w)];
            }
            for c in 0..changes {
                let d = col[at(2 * c, w)] ^ col[at(2 * c + 1, w)];
                p ^= d;
                q ^= times(d, k[4 + c / 4] >> (8 * (c % 4)));
            }
            col[at(2 * changes, w)] = p;
            if parity == 2 {
                col[at(2 * changes + 1, w)] = q;
            }
            continue;
        }
        if which == Kernel::Generate {
            let (mut p, mut q) = (0, 0);
            for i in (0..data).rev() {
                p ^= col[at(i, w)];
                q = times_two(q) ^ col[at(i, w)];
            }
            col[at(data, w)] = p;
            if k[3] != 0 {
                col[at(data + 1, w)] = q;
            }
            continue;
        }
        let (parity, lost_a, lost_b, mode, c0, c1) = (k[3], k[4], k[5], k[6], k[7], k[8]);
        let lost = |slot: usize| slot as u32 == lost_a || slot as u32 == lost_b;
        let (mut ps, mut qs) = (0, 0);
        for i in (0..data).rev() {
            let d = if lost(i) { 0 } else { col[at(i, w)] };
            ps ^= d;
            qs = times_two(qs) ^ d;
        }
        let (p, q, a, b) = (data, data + 1, lost_a as usize, lost_b as usize);
        match mode {
            1 => {
                let dx = col[at(p, w)] ^ ps;
                col[at(a, w)] = dx;
                if parity == 2 && lost(q) {
                    col[at(q, w)] = qs ^ times(dx, c0);
                }
            }
            2 => {
                let dx = times(col[at(q, w)] ^ qs, c0);
                col[at(a, w)] = dx;
                col[at(p, w)] = ps ^ dx;
            }
            3 => {
                let pxy = col[at(p, w)] ^ ps;
                let qxy = col[at(q, w)] ^ qs;
                let dx = times(pxy, c0) ^ times(qxy, c1);
                col[at(a, w)] = dx;
                col[at(b, w)] = pxy ^ dx;
            }
            _ => {
                if lost(p) {
                    col[at(p, w)] = ps;
                }
                if parity == 2 && lost(q) {
                    col[at(q, w)] = qs;
                }
            }
        }
    }
}

/// Runs `ops` on `lanes` emulated lanes of `lane_bytes`, checking each stays in its buffer.
fn run(ops: &[Op], lanes: usize, lane_bytes: usize) {
    let mut buffers = vec![vec![0u32; lane_bytes / 4]; lanes];
    for op in ops {
        match *op {
            Op::CopyIn {
                lane,
                host,
                offset,
                bytes,
            } => {
                assert!(offset + bytes <= lane_bytes, "{op:?} overflows the lane");
                // SAFETY: the schedule's host ranges lie in the test's live columns.
                let src = unsafe { std::slice::from_raw_parts(host, bytes) };
                for (i, word) in src.chunks_exact(4).enumerate() {
                    buffers[lane][offset / 4 + i] = u32::from_le_bytes(word.try_into().unwrap());
                }
            }
            Op::Launch {
                lane,
                kernel: which,
                ref constants,
            } => kernel(&mut buffers[lane], which, constants),
            Op::CopyOut {
                lane,
                offset,
                host,
                bytes,
            } => {
                assert!(offset + bytes <= lane_bytes, "{op:?} overflows the lane");
                // SAFETY: the schedule writes only the test's written columns, which it holds
                // mutably (through the jobs' raw addresses) and does not read meanwhile.
                let dst = unsafe { std::slice::from_raw_parts_mut(host.cast_mut(), bytes) };
                for (i, word) in dst.chunks_exact_mut(4).enumerate() {
                    word.copy_from_slice(&buffers[lane][offset / 4 + i].to_le_bytes());
                }
            }
        }
    }
}

/// Computes `jobs` through a schedule on the emulated device.
fn emulate(jobs: &mut [Job<'_>], lanes: usize, lane_bytes: usize) -> Vec<Op> {
    let works: Vec<Work> = jobs
        .iter_mut()
        .map(|j| Work::of(j).expect("a GPU job"))
        .collect();
    let (ops, used) = schedule(&works, lanes, lane_bytes);
    assert!(used >= 1 && used <= lanes);
    run(&ops, lanes, lane_bytes);
    ops
}

fn column_list(addresses: &[(usize, bool)]) -> Vec<Column> {
    addresses
        .iter()
        .map(|&(at, written)| Column {
            host: at as *const u8,
            read: !written,
            written,
        })
        .collect()
}

#[test]
fn back_to_back_columns_are_one_copy() {
    // Four data columns back to back, P and Q back to back after a gap.
    let c = column_list(&[
        (0, false),
        (64, false),
        (128, false),
        (192, false),
        (512, true),
        (576, true),
    ]);
    assert_eq!(runs(&c, 64, true, |c| c.read), vec![(0, 4)]);
    assert_eq!(runs(&c, 64, true, |c| c.written), vec![(4, 2)]);
    // Slices of columns are never contiguous.
    assert_eq!(
        runs(&c, 64, false, |c| !c.written),
        vec![(0, 1), (1, 1), (2, 1), (3, 1)]
    );
}

#[test]
fn a_gap_or_a_skipped_column_starts_a_new_run() {
    let c = column_list(&[
        (0, false),
        (64, true),
        (128, false),
        (1000, false),
        (1064, false),
    ]);
    assert_eq!(
        runs(&c, 64, true, |c| !c.written),
        vec![(0, 1), (2, 1), (3, 2)]
    );
    assert_eq!(runs(&c, 64, true, |c| c.written), vec![(1, 1)]);
}

#[test]
fn a_stripe_laid_out_as_the_ring_does_is_one_copy_in_and_one_out() {
    let (data, len) = (8, 4096);
    let mut stripe = vec![0u8; (data + 2) * len];
    let (d, pq) = stripe.split_at_mut(data * len);
    let (p, q) = pq.split_at_mut(len);
    let mut jobs = [Job::GenPq {
        data: d.chunks(len).collect(),
        p,
        q,
    }];
    let works: Vec<Work> = jobs.iter_mut().map(|j| Work::of(j).unwrap()).collect();
    let (ops, used) = schedule(&works, 4, 1 << 20);
    assert_eq!(used, 1);
    assert!(
        matches!(
            ops[..],
            [
                Op::CopyIn {
                    bytes: 32768,
                    offset: 0,
                    ..
                },
                Op::Launch { .. },
                Op::CopyOut {
                    bytes: 8192,
                    offset: 32768,
                    ..
                }
            ]
        ),
        "{ops:?}"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// A batch of generations and recoveries, its columns apart or back to back, on 1 to 4
    /// lanes small enough to cut jobs into slices, equals the oracle's, and every operation
    /// stays inside its lane.
    #[test]
    fn schedules_compute_what_the_oracle_does(
        shapes in prop::collection::vec((2usize..=12, any::<bool>(), 1usize..=8, any::<(usize, usize, bool)>()), 1..5),
        lanes in 1usize..=4,
        lane_units in 1usize..=64,
        seed in any::<u64>(),
    ) {
        // At least 4 bytes per column of the widest job (an update of 12 columns: 26).
        let lane_bytes = lane_units * 26 * 4;
        for (i, &(data, raid6, len_units, (a, b, two))) in shapes.iter().enumerate() {
            let len = len_units * 64;
            let sources = filled(data, len, seed ^ i as u64);
            // Generation, straight into a stripe laid out back to back.
            let width = data + if raid6 { 2 } else { 1 };
            let mut stripe = AlignedBuf::zeroed(width * len);
            for (s, source) in sources.iter().enumerate() {
                stripe[s * len..(s + 1) * len].copy_from_slice(source);
            }
            {
                let (d, pq) = stripe.split_at_mut(data * len);
                let mut job = if raid6 {
                    let (p, q) = pq.split_at_mut(len);
                    [Job::GenPq { data: d.chunks(len).collect(), p, q }]
                } else {
                    [Job::Xor { data: d.chunks(len).collect(), p: pq }]
                };
                emulate(&mut job, lanes, lane_bytes);
            }
            let mut expected = stripe.clone();
            {
                let (d, pq) = expected.split_at_mut(data * len);
                pq.fill(0);
                let mut job = if raid6 {
                    let (p, q) = pq.split_at_mut(len);
                    [Job::GenPq { data: d.chunks(len).collect(), p, q }]
                } else {
                    [Job::Xor { data: d.chunks(len).collect(), p: pq }]
                };
                ReferenceEngine.compute(&mut job).unwrap();
            }
            prop_assert!(stripe[..] == expected[..], "generation {} ({} data, raid6 {})", i, data, raid6);
            // Recovery of one or two slots, columns apart (separate buffers).
            let mut lost = vec![a % width];
            if raid6 && two && b % width != a % width {
                lost.push(b % width);
            }
            let mut all: Vec<AlignedBuf> = expected.chunks(len).map(AlignedBuf::from_slice).collect();
            for &slot in &lost {
                all[slot] = AlignedBuf::from_slice(&vec![0x5a; len]);
            }
            {
                let mut chunks: Vec<Chunk<'_>> = all
                    .iter_mut()
                    .enumerate()
                    .map(|(slot, c)| if lost.contains(&slot) { Chunk::Lost(&mut c[..]) } else { Chunk::Intact(&c[..]) })
                    .collect();
                let q = if raid6 { chunks.pop() } else { None };
                let p = chunks.pop().unwrap();
                emulate(&mut [Job::Recover(Recover { data: chunks, p, q })], lanes, lane_bytes);
            }
            for &slot in &lost {
                prop_assert!(all[slot][..] == expected[slot * len..(slot + 1) * len], "slot {} of {:?} ({} data)", slot, lost, data);
            }
            // A read-modify-write of the first data columns (one to all), its parity in place.
            let changed = 1 + a % data;
            let new = filled(changed, len, !seed ^ i as u64);
            let (mut p, mut q) = (AlignedBuf::from_slice(&all[data]), AlignedBuf::from_slice(&all[width - 1]));
            {
                let changes = (0..changed)
                    .map(|index| Change { index, old: &all[index][..], new: &new[index][..] })
                    .collect();
                let q = if raid6 { Some(&mut q[..]) } else { None };
                emulate(&mut [Job::Update(Update { data_chunks: data, changes, p: &mut p[..], q })], lanes, lane_bytes);
            }
            let mut after: Vec<AlignedBuf> = all[..data].to_vec();
            after[..changed].clone_from_slice(&new);
            let (p_ref, q_ref) = graid_parity::conformance::generate(&ReferenceEngine, &after, raid6);
            prop_assert!(p[..] == p_ref[..], "P after updating {} of {} data", changed, data);
            prop_assert!(!raid6 || q[..] == q_ref[..], "Q after updating {} of {} data", changed, data);
        }
    }
}
