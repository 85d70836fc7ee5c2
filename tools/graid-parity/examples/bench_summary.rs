//! Prints a throughput table (GB/s of data) for every operation, dispatch level and thread
//! count, next to the scalar reference and (with `--features isal`) ISA-L's `pq_gen`/`xor_gen`.
//!
//! ```text
//! cargo run --release -p graid-parity --example bench-summary [--features isal] -- \
//!     [--quick] [--only WORD]...
//! ```
//!
//! `--quick` shortens each measurement; `--only gen --only cache` keeps rows whose operation
//! or working set matches every WORD. After the table, one line per goal of issue 4 and row
//! (P+Q generation against ISA-L, the GFNI levels against AVX-512BW, recovery against
//! generation), computed from the single-thread columns, with "met" or "not met".
//!
//! "cache": a batch of stripes with about 256 KiB of data (or one stripe if a stripe is bigger),
//! computed over and over. "dram": a pool of stripes with at least 256 MiB of data, all computed
//! per call, so every byte comes from memory.
//!
//! Every chunk starts on a 4 KiB page boundary, as in the real system (kernel stripe pages, the
//! helper's page-aligned shared data area): the data pool and each column's parity area are
//! page-aligned allocations, cut into chunks of whole pages. With only 64-byte alignment the
//! page offsets of data and parity would change with the allocator from run to run, and with
//! them (4 KiB aliasing, L1 set conflicts) results by up to 2x.

#[cfg(feature = "isal")]
#[path = "../tests/isal/mod.rs"]
mod isal;

use graid_parity::{
    AlignedBuf, Chunk, CpuEngine, Engine, Job, Level, Recover, ReferenceEngine, Update,
};
use std::time::{Duration, Instant};

#[derive(Clone, Copy, PartialEq)]
enum Op {
    Xor,
    PqGen,
    Rmw,
    Recover2Data,
}

impl Op {
    const ALL: [Op; 4] = [Op::Xor, Op::PqGen, Op::Rmw, Op::Recover2Data];

    fn name(self) -> &'static str {
        match self {
            Op::Xor => "xor (P)",
            Op::PqGen => "P+Q gen",
            Op::Rmw => "rmw 1 chunk",
            Op::Recover2Data => "recover 2 data",
        }
    }
}

/// One working set: `stripes` stripes of `data_chunks` data chunks, shared read-only by every
/// column of a row. Each column writes to its own [`WorkingSet::parity_buffer`].
struct WorkingSet {
    data_chunks: usize,
    len: usize,
    stripes: usize,
    data: AlignedBuf,
}

impl WorkingSet {
    fn new(data_chunks: usize, len: usize, min_data_bytes: usize) -> WorkingSet {
        let stripe_bytes = data_chunks * len;
        let stripes = min_data_bytes.div_ceil(stripe_bytes).max(1);
        let mut data = AlignedBuf::zeroed_page_aligned(stripes * stripe_bytes);
        let mut state = 0x1234_5678_9abc_def0u64;
        for chunk in data.chunks_mut(8) {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            chunk.copy_from_slice(&state.to_le_bytes()[..chunk.len()]);
        }
        WorkingSet {
            data_chunks,
            len,
            stripes,
            data,
        }
    }

    /// Room for P, Q and two recovery outputs per stripe, page-aligned like the data.
    fn parity_buffer(&self) -> AlignedBuf {
        AlignedBuf::zeroed_page_aligned(self.stripes * 4 * self.len)
    }

    /// Bytes of payload per batch: the whole stripe's data, or for an update the changed chunk.
    fn payload_bytes(&self, op: Op) -> usize {
        let stripe_data = self.stripes * self.data_chunks * self.len;
        match op {
            Op::Rmw => stripe_data / self.data_chunks,
            _ => stripe_data,
        }
    }

    /// The jobs for `op`, one per stripe. For recovery, data chunks 1 and 2 are lost; their
    /// outputs go to the stripe's spare parity slots.
    fn jobs<'a>(&'a self, op: Op, parity: &'a mut AlignedBuf) -> Vec<Job<'a>> {
        let (n, len) = (self.data_chunks, self.len);
        self.data
            .chunks(n * len)
            .zip(parity.chunks_mut(4 * len))
            .map(|(data, parity)| {
                let chunks: Vec<&[u8]> = data.chunks(len).collect();
                let (p, rest) = parity.split_at_mut(len);
                let (q, spare) = rest.split_at_mut(len);
                let (lost_a, lost_b) = spare.split_at_mut(len);
                match op {
                    Op::Xor => Job::Xor { data: chunks, p },
                    Op::PqGen => Job::GenPq { data: chunks, p, q },
                    Op::Rmw => Job::Update(Update {
                        data_chunks: n,
                        changes: vec![graid_parity::Change {
                            index: n / 2,
                            old: chunks[0],
                            new: chunks[1],
                        }],
                        p,
                        q: Some(q),
                    }),
                    Op::Recover2Data => {
                        let mut data: Vec<Chunk<'_>> =
                            chunks.iter().map(|c| Chunk::Intact(c)).collect();
                        data[1] = Chunk::Lost(lost_a);
                        data[2] = Chunk::Lost(lost_b);
                        Job::Recover(Recover {
                            data,
                            p: Chunk::Intact(p),
                            q: Some(Chunk::Intact(q)),
                        })
                    }
                }
            })
            .collect()
    }
}

/// A column of the table: something that computes one batch per call.
type Runner<'a> = Box<dyn FnMut() + 'a>;

/// Times every runner round-robin, one call each per round, until `budget` has passed, and
/// returns each one's best call. Interleaving gives every column the same share of whatever
/// else the machine is doing; the best call is the least disturbed one.
fn best_times(runners: &mut [Runner<'_>], budget: Duration) -> Vec<Duration> {
    for run in runners.iter_mut() {
        run(); // warm up: page faults, pool start-up
    }
    let mut best = vec![Duration::MAX; runners.len()];
    let start = Instant::now();
    let mut rounds = 0;
    while rounds < 3 || start.elapsed() < budget {
        for (run, best) in runners.iter_mut().zip(&mut best) {
            let t = Instant::now();
            run();
            *best = (*best).min(t.elapsed());
        }
        rounds += 1;
    }
    best
}

fn gbps(bytes: usize, time: Duration) -> f64 {
    bytes as f64 / time.as_secs_f64() / 1e9
}

fn engine_runner<'a>(engine: &'a dyn Engine, mut jobs: Vec<Job<'a>>) -> Runner<'a> {
    Box::new(move || engine.compute(&mut jobs).expect("valid jobs"))
}

#[cfg(feature = "isal")]
fn isal_runner<'a>(mut jobs: Vec<Job<'a>>, threads: usize) -> Runner<'a> {
    fn run_slice(jobs: &mut [Job<'_>]) {
        for job in jobs {
            match job {
                Job::Xor { data, p } => isal::gen_xor(data, p),
                Job::GenPq { data, p, q } => isal::gen_pq(data, p, q),
                _ => unreachable!("ISA-L columns only exist for xor and P+Q"),
            }
        }
    }
    let per_thread = jobs.len().div_ceil(threads);
    Box::new(move || {
        if threads == 1 {
            run_slice(&mut jobs);
        } else {
            // Scoped threads per call: ISA-L has no pool; this is what a caller would do.
            std::thread::scope(|s| {
                for part in jobs.chunks_mut(per_thread) {
                    s.spawn(move || run_slice(part));
                }
            });
        }
    })
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = args.iter().any(|a| a == "--quick");
    // `--only WORD`: rows whose op or set name contains WORD (repeatable).
    let only: Vec<&str> = args
        .windows(2)
        .filter(|w| w[0] == "--only")
        .map(|w| w[1].as_str())
        .collect();
    let wanted = |op: Op, set: &str| {
        only.is_empty() || only.iter().all(|w| op.name().contains(w) || set == *w)
    };
    // Per row: all columns share this much wall time, interleaved.
    let budget = Duration::from_millis(if quick { 300 } else { 2000 });
    let levels = Level::supported();
    let engines: Vec<(String, CpuEngine)> = levels
        .iter()
        .flat_map(|&level| {
            [1, 2].map(|threads| {
                let engine = CpuEngine::builder()
                    .level(level)
                    .threads(threads)
                    .build()
                    .expect("supported level");
                (format!("{level} x{threads}"), engine)
            })
        })
        .collect();

    let mut header = vec![
        "op".to_string(),
        "shape".into(),
        "chunk".into(),
        "set".into(),
    ];
    header.push("reference x1".into());
    header.extend(engines.iter().map(|(name, _)| name.clone()));
    if cfg!(feature = "isal") {
        header.extend(["isa-l x1".into(), "isa-l x2".into()]);
    }
    println!("{}", header.join(" | "));

    let isal_threads: &[usize] = if cfg!(feature = "isal") { &[1, 2] } else { &[] };
    let mut goals = Goals::default();
    for (set_name, min_bytes) in [("cache", 256 << 10), ("dram", 256 << 20)] {
        for data_chunks in [8, 16] {
            for len in [4 << 10, 64 << 10, 1 << 20] {
                let set = WorkingSet::new(data_chunks, len, min_bytes);
                for op in Op::ALL.into_iter().filter(|&op| wanted(op, set_name)) {
                    let mut row = vec![
                        op.name().to_string(),
                        format!("{data_chunks}+2"),
                        format!("{}K", len >> 10),
                        set_name.to_string(),
                    ];
                    let bytes = set.payload_bytes(op);
                    // The reference runs at tens of MB/s: time it alone, on the cache set only.
                    let mut reference_parity = set.parity_buffer();
                    row.push(if set_name == "cache" {
                        let mut runner = [engine_runner(
                            &ReferenceEngine,
                            set.jobs(op, &mut reference_parity),
                        )];
                        let time = best_times(&mut runner, Duration::ZERO)[0];
                        format!("{:.2}", gbps(bytes, time))
                    } else {
                        "-".into()
                    });
                    let isal_op = matches!(op, Op::Xor | Op::PqGen);
                    let isal_columns = if isal_op { isal_threads.len() } else { 0 };
                    let mut parity: Vec<AlignedBuf> = (0..engines.len() + isal_columns)
                        .map(|_| set.parity_buffer())
                        .collect();
                    let mut buffers = parity.iter_mut();
                    let mut runners: Vec<Runner<'_>> = engines
                        .iter()
                        .map(|(_, engine)| {
                            engine_runner(engine, set.jobs(op, buffers.next().expect("buffer")))
                        })
                        .collect();
                    #[cfg(feature = "isal")]
                    for &threads in &isal_threads[..isal_columns] {
                        let jobs = set.jobs(op, buffers.next().expect("buffer"));
                        runners.push(isal_runner(jobs, threads));
                    }
                    let times = best_times(&mut runners, budget);
                    let speeds: Vec<f64> = times.iter().map(|&t| gbps(bytes, t)).collect();
                    row.extend(speeds.iter().map(|speed| format!("{speed:.1}")));
                    let mut columns: Vec<String> =
                        engines.iter().map(|(name, _)| name.clone()).collect();
                    columns.extend(
                        isal_threads[..isal_columns]
                            .iter()
                            .map(|t| format!("isa-l x{t}")),
                    );
                    goals.record(op, &row[1..4].join(" "), columns.into_iter().zip(speeds));
                    if !isal_op {
                        row.extend(isal_threads.iter().map(|_| "-".to_string()));
                    }
                    println!("{}", row.join(" | "));
                }
            }
        }
    }
    goals.print();
}

/// The goals of issue 4, computed from this run's single-thread columns, so a run on another
/// machine (the device) answers them without hand arithmetic.
#[derive(Default)]
struct Goals {
    rows: Vec<GoalRow>,
}

/// One measured row: its operation, "shape chunk set", and GB/s per column.
struct GoalRow {
    op: Op,
    key: String,
    speeds: Vec<(String, f64)>,
}

impl Goals {
    fn record(&mut self, op: Op, key: &str, speeds: impl Iterator<Item = (String, f64)>) {
        self.rows.push(GoalRow {
            op,
            key: key.to_string(),
            speeds: speeds.collect(),
        });
    }

    fn speed(&self, op: Op, key: &str, column: &str) -> Option<f64> {
        let row = self
            .rows
            .iter()
            .find(|row| row.op == op && row.key == key)?;
        row.speeds
            .iter()
            .find(|(name, _)| name == column)
            .map(|&(_, s)| s)
    }

    fn print(&self) {
        let best = format!("{} x1", Level::best());
        let keys: Vec<&String> = self
            .rows
            .iter()
            .filter(|row| row.op == Op::PqGen)
            .map(|row| &row.key)
            .collect();
        let line = |goal: &str, key: &str, detail: String, met: bool| {
            let verdict = if met { "met" } else { "not met" };
            println!("  {goal:<32} {key:<16} {detail} {verdict}");
        };
        println!();
        println!("goals (per core, x1 columns of this run; best level here: {best}):");
        for key in &keys {
            let gen = self.speed(Op::PqGen, key, &best);
            if let (Some(gen), Some(isal)) = (gen, self.speed(Op::PqGen, key, "isa-l x1")) {
                let ratio = gen / isal;
                let detail = format!("{best} {gen:.1} / isa-l {isal:.1} = {ratio:.2}");
                line("P+Q gen >= 1.3x ISA-L pq_gen", key, detail, ratio >= 1.3);
            }
            if let Some(bw) = self.speed(Op::PqGen, key, "avx512bw x1") {
                for gfni in ["avx2-gfni x1", "avx512-gfni x1"] {
                    if let Some(speed) = self.speed(Op::PqGen, key, gfni) {
                        let ratio = speed / bw;
                        let detail =
                            format!("{gfni} {speed:.1} / avx512bw x1 {bw:.1} = {ratio:.2}");
                        line("GFNI >= 1.15x AVX-512BW", key, detail, ratio >= 1.15);
                    }
                }
            }
            if let (Some(gen), Some(rec)) = (gen, self.speed(Op::Recover2Data, key, &best)) {
                let cost = gen / rec;
                let detail = format!("{best} gen {gen:.1} / recover {rec:.1} = {cost:.2}");
                line("2-data recovery <= 1.5x gen cost", key, detail, cost <= 1.5);
            }
        }
    }
}
