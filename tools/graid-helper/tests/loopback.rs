//! The helper through the whole ring protocol with a stand-in for the module, and its refusal
//! of jobs that name memory it must not touch.

use graid_abi::ring::{
    Sqe, JOB_OP_CHECK, JOB_OP_PQ, JOB_OP_RECOVER, JOB_OP_XOR, JOB_STATUS_FAILED, JOB_STATUS_OK,
    NO_SLOT,
};
use graid_helper::exec::Pool;
use graid_helper::loopback::{Loopback, Shape};
use graid_parity::{AlignedBuf, CpuEngine, Engine, ReferenceEngine};

#[test]
fn every_job_through_the_ring_comes_back_with_the_right_parity() {
    let engine = CpuEngine::builder().threads(2).build().unwrap();
    for (data, parity, stripes) in [(4, 2, 1), (3, 1, 3), (8, 2, 2)] {
        let shape = Shape {
            data,
            parity,
            column_bytes: 4096,
            stripes,
        };
        let loopback = Loopback::new(shape, 8);
        // More jobs than slots and batches smaller than the slots: slots are reused, with new
        // generations, while others are out.
        let report = loopback.run(300, &engine, 5, true);
        assert_eq!(report.refused, 0, "{shape:?}: completions refused");
        assert_eq!(report.failed, 0, "{shape:?}: wrong parity or a failed job");
    }
}

/// A pool of `bytes` with a column table at 0 and, at `table[i]`, the offsets given.
struct TestPool {
    buffer: AlignedBuf,
}

impl TestPool {
    fn new(bytes: usize) -> Self {
        Self {
            buffer: AlignedBuf::zeroed_page_aligned(bytes),
        }
    }

    fn table(&mut self, at: usize, offsets: &[u64]) {
        for (i, o) in offsets.iter().enumerate() {
            self.buffer[at + i * 8..at + i * 8 + 8].copy_from_slice(&o.to_le_bytes());
        }
    }

    fn pool(&mut self) -> Pool {
        // SAFETY: the buffer outlives the pool in every test, and nothing else touches it
        // while a job runs.
        unsafe { Pool::new(self.buffer.as_mut_ptr(), self.buffer.len()) }
    }
}

fn job(op: u8, data: u8, column_bytes: u32, columns_offset: u64) -> Sqe {
    Sqe {
        op,
        data_columns: data,
        stripes: 1,
        column_bytes,
        columns_offset,
        ..Sqe::default()
    }
}

#[test]
fn jobs_naming_memory_the_helper_must_not_touch_fail_and_the_rest_of_the_batch_runs() {
    const K: u64 = 4096;
    let mut t = TestPool::new(64 * 1024);
    // Table A at 0: a good 2+2 job in [4K, 20K).
    t.table(0, &[K, 2 * K, 3 * K, 4 * K]);
    // Table B at 64: a column past the pool's end.
    t.table(64, &[K * 6, K * 7, K * 8, 64 * 1024 - 512]);
    // Table C at 128: a misaligned column.
    t.table(128, &[K * 6 + 8, K * 7, K * 8, K * 9]);
    // Table D at 192: two columns of one job on the same memory.
    t.table(192, &[K * 6, K * 6, K * 8, K * 9]);
    // Table E at 256: overlaps job A's memory (another job of the same batch).
    t.table(256, &[K * 10, K * 11, K * 12, K * 4]);
    // Table F at 320: a good 2+1 XOR job in [40K, 52K).
    t.table(320, &[10 * K, 11 * K, 12 * K]);
    // Column data for A and F.
    for (i, byte) in [(1, 1u8), (2, 2), (10, 3), (11, 4)] {
        t.buffer[i * 4096..(i + 1) * 4096].fill(byte);
    }
    let pool = t.pool();
    let engine = ReferenceEngine;
    let sqes = [
        job(JOB_OP_PQ, 2, 4096, 0),
        job(JOB_OP_PQ, 2, 4096, 64),
        job(JOB_OP_PQ, 2, 4096, 128),
        job(JOB_OP_PQ, 2, 4096, 192),
        job(JOB_OP_PQ, 2, 4096, 256),
        job(JOB_OP_XOR, 2, 4096, 320),
        // Not a job this helper does, a table outside the pool, sizes it refuses.
        job(JOB_OP_CHECK, 2, 4096, 0),
        job(JOB_OP_PQ, 2, 4096, 1 << 40),
        job(JOB_OP_PQ, 2, 100, 0),
        job(JOB_OP_PQ, 1, 4096, 0),
        Sqe {
            stripes: 0,
            ..job(JOB_OP_XOR, 2, 4096, 320)
        },
    ];
    let status = pool.execute(&sqes, &engine);
    let ok = JOB_STATUS_OK;
    let failed = JOB_STATUS_FAILED;
    assert_eq!(
        status,
        [ok, failed, failed, failed, failed, ok, failed, failed, failed, failed, failed]
    );
    // The good jobs computed what they should: P = 1 ^ 2, and the XOR 3 ^ 4.
    assert!(t.buffer[3 * 4096..4 * 4096].iter().all(|&b| b == 3));
    assert!(t.buffer[12 * 4096..13 * 4096].iter().all(|&b| b == 7));
    // Q = 1 + 2·2 in GF(2^8): 1 ^ 4 = 5.
    assert!(t.buffer[4 * 4096..5 * 4096].iter().all(|&b| b == 5));
    // And nothing the refused jobs named as parity was written.
    assert!(t.buffer[8 * 4096..10 * 4096].iter().all(|&b| b == 0));
}

/// A 4+2 RAID 6 job of `stripes` stripes in a fresh pool (table at 0, columns from 64 KiB),
/// its data filled with a pattern and P and Q generated: the pool and each column's offset.
fn generated_raid6(stripes: usize) -> (TestPool, Vec<usize>) {
    const COLUMN: usize = 4096;
    let width = 6;
    let offsets: Vec<usize> = (0..stripes * width)
        .map(|i| 64 * 1024 + i * COLUMN)
        .collect();
    let mut t = TestPool::new(64 * 1024 + offsets.len() * COLUMN);
    t.table(0, &offsets.iter().map(|&o| o as u64).collect::<Vec<_>>());
    for (i, &o) in offsets.iter().enumerate() {
        for (j, b) in t.buffer[o..o + COLUMN].iter_mut().enumerate() {
            *b = (i * 31 + j * 7 + j / 256) as u8;
        }
    }
    let generate = Sqe {
        stripes: stripes as u32,
        ..job(JOB_OP_PQ, 4, COLUMN as u32, 0)
    };
    assert_eq!(
        t.pool().execute(&[generate], &ReferenceEngine),
        [JOB_STATUS_OK]
    );
    (t, offsets)
}

#[test]
fn a_recovery_rebuilds_each_stripes_lost_columns_whatever_their_role() {
    const COLUMN: usize = 4096;
    let stripes = 5;
    let (mut t, offsets) = generated_raid6(stripes);
    let good = t.buffer.to_vec();
    // Per stripe: one data column, data and P, data and Q, two data, nothing.
    let lost: [[u8; 2]; 5] = [[1, NO_SLOT], [0, 4], [3, 5], [1, 2], [NO_SLOT, NO_SLOT]];
    let lost_table = 64 * 1024 - 64;
    for (s, pair) in lost.iter().enumerate() {
        for &slot in pair.iter().filter(|&&x| x != NO_SLOT) {
            let o = offsets[s * 6 + usize::from(slot)];
            t.buffer[o..o + COLUMN].fill(0xEE);
        }
    }
    // The lost table right after the column table (30 entries): move the table to fit.
    let table_at = lost_table - stripes * 6 * 8;
    t.table(
        table_at,
        &offsets.iter().map(|&o| o as u64).collect::<Vec<_>>(),
    );
    for (s, pair) in lost.iter().enumerate() {
        t.buffer[lost_table + s * 2..lost_table + s * 2 + 2].copy_from_slice(pair);
    }
    let recover = Sqe {
        stripes: stripes as u32,
        parity_columns: 2,
        ..job(JOB_OP_RECOVER, 4, COLUMN as u32, table_at as u64)
    };
    assert_eq!(
        t.pool().execute(&[recover], &CpuEngine::new().unwrap()),
        [JOB_STATUS_OK]
    );
    for &o in &offsets {
        assert!(
            t.buffer[o..o + COLUMN] == good[o..o + COLUMN],
            "column at {o} differs"
        );
    }
}

#[test]
fn a_recovery_with_a_bad_lost_table_is_refused_untouched() {
    const COLUMN: usize = 4096;
    let (mut t, offsets) = generated_raid6(1);
    let table_at = 1024;
    t.table(
        table_at,
        &offsets.iter().map(|&o| o as u64).collect::<Vec<_>>(),
    );
    let lost_at = table_at + 6 * 8;
    let recover = |parity_columns| Sqe {
        parity_columns,
        ..job(JOB_OP_RECOVER, 4, COLUMN as u32, table_at as u64)
    };
    let before = t.buffer.to_vec();
    // More lost than the parity rebuilds, a slot past the stripe, the same slot twice, and
    // a parity count a stripe cannot have.
    for (pair, parity) in [([0, 1], 1), ([0, 6], 2), ([2, 2], 2), ([0, NO_SLOT], 3)] {
        t.buffer[lost_at..lost_at + 2].copy_from_slice(&pair);
        let status = t.pool().execute(&[recover(parity)], &ReferenceEngine);
        assert_eq!(status, [JOB_STATUS_FAILED], "{pair:?} with parity {parity}");
        t.buffer[lost_at..lost_at + 2].copy_from_slice(&before[lost_at..lost_at + 2]);
        assert!(
            t.buffer[..] == before[..],
            "a refused job wrote into the pool"
        );
    }
}

/// An engine that fails every batch (a broken GPU, a bad SIMD path).
struct Broken;

impl Engine for Broken {
    fn name(&self) -> String {
        "broken".into()
    }
    fn compute(&self, _: &mut [graid_parity::Job<'_>]) -> Result<(), graid_parity::ParityError> {
        Err(graid_parity::ParityError::Backend {
            engine: "broken",
            reason: "device lost".into(),
        })
    }
}

#[test]
fn an_engine_that_fails_fails_the_batch_not_the_helper() {
    let mut t = TestPool::new(32 * 1024);
    t.table(0, &[4096, 8192, 12288]);
    let pool = t.pool();
    assert_eq!(
        pool.execute(&[job(JOB_OP_XOR, 2, 4096, 0)], &Broken),
        [JOB_STATUS_FAILED]
    );
}

/// Whether the Vulkan tests must run (`make test` sets it, with lavapipe installed).
fn vulkan_required() -> bool {
    std::env::var("GRAID_REQUIRE_VULKAN").is_ok_and(|v| v == "1")
}

#[test]
fn the_vulkan_engine_through_the_whole_ring_protocol() {
    use graid_helper::engines::{build, EngineChoice};
    let engine = match build(EngineChoice::Vulkan, 2, &Default::default()) {
        Ok(engine) => engine,
        Err(e) => {
            assert!(!vulkan_required(), "GRAID_REQUIRE_VULKAN=1 but {e}");
            eprintln!("skipping: {e}");
            return;
        }
    };
    for (data, parity, stripes) in [(4, 2, 1), (3, 1, 3), (8, 2, 2)] {
        let shape = Shape {
            data,
            parity,
            column_bytes: 16384,
            stripes,
        };
        let report = Loopback::new(shape, 8).run(200, engine.as_ref(), 5, true);
        assert_eq!(report.refused, 0, "{shape:?}: completions refused");
        assert_eq!(report.failed, 0, "{shape:?}: wrong parity or a failed job");
    }
}

/// Golden P/Q and a recovery in one batch through `engine`, checked against the oracle.
fn mixed_batch(engine: &dyn Engine) {
    use graid_parity::{Chunk, Job, Recover};
    let len = 4096;
    let fill = |seed: u8| {
        let bytes: Vec<u8> = (0..len)
            .map(|i| (i as u8).wrapping_mul(seed) ^ seed)
            .collect();
        AlignedBuf::from_slice(&bytes)
    };
    let data: Vec<AlignedBuf> = (1..=4).map(fill).collect();
    let (mut p, mut q) = (AlignedBuf::zeroed(len), AlignedBuf::zeroed(len));
    let (mut p_ref, mut q_ref) = (AlignedBuf::zeroed(len), AlignedBuf::zeroed(len));
    let slices = || data.iter().map(|d| &d[..]).collect::<Vec<_>>();
    let mut reference = [Job::GenPq {
        data: slices(),
        p: &mut p_ref[..],
        q: &mut q_ref[..],
    }];
    ReferenceEngine.compute(&mut reference).unwrap();
    drop(reference);
    // Data column 2 lost: rebuilt from the rest and the reference P.
    let mut rebuilt = AlignedBuf::zeroed(len);
    let mut jobs = vec![
        Job::Recover(Recover {
            data: vec![
                Chunk::Intact(&data[0][..]),
                Chunk::Intact(&data[1][..]),
                Chunk::Lost(&mut rebuilt[..]),
                Chunk::Intact(&data[3][..]),
            ],
            p: Chunk::Intact(&p_ref[..]),
            q: Some(Chunk::Intact(&q_ref[..])),
        }),
        Job::GenPq {
            data: slices(),
            p: &mut p[..],
            q: &mut q[..],
        },
    ];
    engine.compute(&mut jobs).expect("the mixed batch");
    drop(jobs);
    assert!(p[..] == p_ref[..] && q[..] == q_ref[..], "P or Q differs");
    assert!(rebuilt[..] == data[2][..], "the recovery differs");
}

#[test]
fn a_gpu_first_engine_does_every_kind_of_job_and_survives_a_failing_gpu() {
    use graid_helper::engines::{build, EngineChoice, GpuFirst};
    let failing = GpuFirst::new(Broken, CpuEngine::new().unwrap());
    mixed_batch(&failing);
    assert_eq!(failing.gpu_failures(), 1, "the GPU's failure was not seen");
    match build(EngineChoice::Vulkan, 1, &Default::default()) {
        Ok(engine) => mixed_batch(engine.as_ref()),
        Err(e) => assert!(!vulkan_required(), "GRAID_REQUIRE_VULKAN=1 but {e}"),
    }
}

/// A stand-in GPU that counts the batches it computes (with the reference engine).
#[derive(Default)]
struct Counting(std::sync::atomic::AtomicU64);

impl Engine for Counting {
    fn name(&self) -> String {
        "counting".into()
    }
    fn compute(&self, jobs: &mut [graid_parity::Job<'_>]) -> Result<(), graid_parity::ParityError> {
        self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        ReferenceEngine.compute(jobs)
    }
}

#[test]
fn batches_smaller_than_the_minimum_stay_on_the_cpu() {
    use graid_helper::engines::GpuFirst;
    // The mixed batch has 6 + 6 columns of 4 KiB: 48 KiB.
    let engine =
        GpuFirst::new(Counting::default(), CpuEngine::new().unwrap()).min_batch(48 * 1024 + 1);
    mixed_batch(&engine);
    let counts = engine.route_counts();
    assert_eq!(
        (counts.gpu, counts.small),
        (0, 1),
        "a small batch went to the GPU"
    );
    let engine = GpuFirst::new(Counting::default(), CpuEngine::new().unwrap()).min_batch(48 * 1024);
    mixed_batch(&engine);
    let counts = engine.route_counts();
    assert_eq!(
        (counts.gpu, counts.small),
        (1, 0),
        "a large enough batch stayed on the CPU"
    );
}

/// A GPU that a co-running job keeps busy: every batch takes 30 ms.
struct Busy;

impl Engine for Busy {
    fn name(&self) -> String {
        "busy".into()
    }
    fn compute(&self, jobs: &mut [graid_parity::Job<'_>]) -> Result<(), graid_parity::ParityError> {
        std::thread::sleep(std::time::Duration::from_millis(30));
        ReferenceEngine.compute(jobs)
    }
}

#[test]
fn auto_moves_batches_off_a_gpu_slower_than_the_cpu() {
    use graid_helper::engines::GpuFirst;
    let engine = GpuFirst::new(Busy, CpuEngine::new().unwrap()).auto(0);
    for _ in 0..20 {
        mixed_batch(&engine);
    }
    // The first batch measures the GPU, the second the CPU; the rest stay on the CPU until
    // the GPU's next probe, a second later.
    let counts = engine.route_counts();
    assert!(counts.gpu <= 2, "a loaded GPU kept its batches: {counts:?}");
    assert_eq!(counts.gpu + counts.loaded, 20, "{counts:?}");
    // `--engine vulkan`/`cuda` use the GPU whatever its load.
    let forced = GpuFirst::new(Busy, CpuEngine::new().unwrap());
    for _ in 0..3 {
        mixed_batch(&forced);
    }
    assert_eq!(forced.route_counts().gpu, 3);
}

#[test]
fn the_cuda_engine_is_asked_for_by_name_and_says_why_it_is_missing() {
    use graid_helper::engines::{build, EngineChoice};
    match build(EngineChoice::Cuda, 1, &Default::default()) {
        Ok(engine) => {
            assert!(engine.name().starts_with("cuda:"), "{}", engine.name());
            mixed_batch(engine.as_ref());
        }
        Err(e) if !graid_cuda::driver_present() => {
            assert_eq!(e, "no CUDA engine: no CUDA driver (libcuda.so.1 not found)")
        }
        Err(e) => eprintln!("a CUDA driver but no engine: {e}"),
    }
    // `auto` without CUDA or a real GPU is the CPU, never an error.
    let engine = build(EngineChoice::Auto, 1, &Default::default()).expect("auto always builds");
    mixed_batch(engine.as_ref());
}

/// A GPU that computes the whole batch, then reports a failure: a device that fails after
/// writing its results, or part of them.
struct FailsAfterWriting;

impl Engine for FailsAfterWriting {
    fn name(&self) -> String {
        "fails-after-writing".into()
    }
    fn compute(&self, jobs: &mut [graid_parity::Job<'_>]) -> Result<(), graid_parity::ParityError> {
        ReferenceEngine.compute(jobs)?;
        Err(graid_parity::ParityError::Backend {
            engine: "fails-after-writing",
            reason: "lost after the writes".into(),
        })
    }
}

#[test]
fn a_gpu_failing_after_an_in_place_update_does_not_get_it_applied_twice() {
    use graid_helper::engines::GpuFirst;
    use graid_parity::{Change, Job, Update};
    let len = 4096;
    let column = |seed: u8| {
        AlignedBuf::from_slice(
            &(0..len)
                .map(|i| (i as u8).wrapping_mul(seed) ^ seed)
                .collect::<Vec<_>>(),
        )
    };
    let old: Vec<AlignedBuf> = (1..=4).map(column).collect();
    let new = column(99);
    let parity_of = |data: &[&AlignedBuf]| {
        let (mut p, mut q) = (AlignedBuf::zeroed(len), AlignedBuf::zeroed(len));
        let mut job = [Job::GenPq {
            data: data.iter().map(|d| &d[..]).collect(),
            p: &mut p[..],
            q: &mut q[..],
        }];
        ReferenceEngine.compute(&mut job).unwrap();
        drop(job);
        (p, q)
    };
    let (mut p, mut q) = parity_of(&old.iter().collect::<Vec<_>>());
    let engine = GpuFirst::new(FailsAfterWriting, CpuEngine::new().unwrap());
    let mut jobs = [Job::Update(Update {
        data_chunks: 4,
        changes: vec![Change {
            index: 2,
            old: &old[2][..],
            new: &new[..],
        }],
        p: &mut p[..],
        q: Some(&mut q[..]),
    })];
    engine.compute(&mut jobs).expect("the CPU takes over");
    drop(jobs);
    assert_eq!(engine.gpu_failures(), 1);
    let (p_ref, q_ref) = parity_of(&[&old[0], &old[1], &new, &old[3]]);
    assert!(p[..] == p_ref[..], "P updated twice (or not at all)");
    assert!(q[..] == q_ref[..], "Q updated twice (or not at all)");
}

#[test]
fn the_memory_probe_sees_the_pool_kind_imported_and_the_cpu_importing_nothing() {
    use graid_helper::engines::{build, EngineChoice};
    use graid_helper::memory_probe;
    let lines = memory_probe::run(&ReferenceEngine);
    assert_eq!(lines.len(), 5);
    assert!(
        lines.iter().all(|l| !l.ends_with(": imported")),
        "{lines:?}"
    );
    match build(EngineChoice::Vulkan, 1, &Default::default()) {
        Ok(engine) => {
            let lines = memory_probe::run(engine.as_ref());
            assert_eq!(
                lines[0], "anonymous (the helper's pool): imported",
                "{lines:?}"
            );
        }
        Err(e) => assert!(!vulkan_required(), "GRAID_REQUIRE_VULKAN=1 but {e}"),
    }
}
