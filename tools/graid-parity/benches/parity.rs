//! Criterion benchmarks: each operation at every dispatch level this CPU supports, on one
//! 8+2 stripe of 64 KiB chunks (cache-resident). `examples/bench_summary.rs` prints the wider
//! table (shapes, chunk sizes, DRAM working sets, threads, ISA-L).
//!
//! `cargo bench -p graid-parity` (filter with e.g. `-- gen_pq/avx2`).

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use graid_parity::{
    AlignedBuf, Change, Chunk, CpuEngine, Engine, Job, Level, Recover, ReferenceEngine, Update,
};

const DATA_CHUNKS: usize = 8;
const CHUNK: usize = 64 << 10;

struct Stripe {
    data: Vec<AlignedBuf>,
    p: AlignedBuf,
    q: AlignedBuf,
    spare: [AlignedBuf; 2],
}

/// Every chunk page-aligned, as in the real system (kernel stripe pages, the helper's shared
/// data area); with 64-byte alignment only, the buffers' page offsets, and with them the
/// results, would vary from run to run (4 KiB aliasing, L1 set conflicts).
fn stripe() -> Stripe {
    let data = (0..DATA_CHUNKS)
        .map(|i| {
            let mut chunk = AlignedBuf::zeroed_page_aligned(CHUNK);
            for (b, byte) in chunk.iter_mut().enumerate() {
                *byte = (b * 31 + i * 7) as u8;
            }
            chunk
        })
        .collect();
    let page = || AlignedBuf::zeroed_page_aligned(CHUNK);
    Stripe {
        data,
        p: page(),
        q: page(),
        spare: [page(), page()],
    }
}

fn engines() -> Vec<(String, Box<dyn Engine>)> {
    let mut all: Vec<(String, Box<dyn Engine>)> =
        vec![("reference".into(), Box::new(ReferenceEngine))];
    for level in Level::supported() {
        let engine = CpuEngine::with_level(level).expect("supported level");
        all.push((level.name().into(), Box::new(engine)));
    }
    all
}

fn operation(c: &mut Criterion, name: &str, make: fn(&mut Stripe) -> Job<'_>, bytes: usize) {
    let mut group = c.benchmark_group(name);
    group.throughput(Throughput::Bytes(bytes as u64));
    for (level, engine) in engines() {
        let mut s = stripe();
        let mut jobs = [make(&mut s)];
        group.bench_function(BenchmarkId::from_parameter(level), |b| {
            b.iter(|| engine.compute(&mut jobs).expect("valid job"))
        });
    }
    group.finish();
}

fn data_refs(data: &[AlignedBuf]) -> Vec<&[u8]> {
    data.iter().map(|d| &d[..]).collect()
}

fn benches(c: &mut Criterion) {
    let stripe_bytes = DATA_CHUNKS * CHUNK;
    operation(
        c,
        "xor",
        |s| Job::Xor {
            data: data_refs(&s.data),
            p: &mut s.p,
        },
        stripe_bytes,
    );
    operation(
        c,
        "gen_pq",
        |s| Job::GenPq {
            data: data_refs(&s.data),
            p: &mut s.p,
            q: &mut s.q,
        },
        stripe_bytes,
    );
    operation(
        c,
        "rmw_one_chunk",
        |s| {
            Job::Update(Update {
                data_chunks: DATA_CHUNKS,
                changes: vec![Change {
                    index: 3,
                    old: &s.data[0],
                    new: &s.data[1],
                }],
                p: &mut s.p,
                q: Some(&mut s.q),
            })
        },
        CHUNK,
    );
    operation(
        c,
        "recover_2data",
        |s| {
            let [a, b] = &mut s.spare;
            let mut data: Vec<Chunk<'_>> = s.data.iter().map(|d| Chunk::Intact(d)).collect();
            data[2] = Chunk::Lost(a);
            data[5] = Chunk::Lost(b);
            Job::Recover(Recover {
                data,
                p: Chunk::Intact(&s.p),
                q: Some(Chunk::Intact(&s.q)),
            })
        },
        stripe_bytes,
    );
}

criterion_group!(parity, benches);
criterion_main!(parity);
