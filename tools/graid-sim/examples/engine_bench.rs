//! What the array engine itself costs per request, natively: a platform that moves no data and
//! completes every member I/O at once, so the time is the engine's planning, accounting and
//! completion logic only (the module pays this per request on top of the block layer). RAID 5/6
//! requests run their stripe steps one after the other as the platform's work items would,
//! with buffers that hold nothing and parity that costs nothing: the stripe engine's own
//! logic per request (locks, plans, member I/O, completions), not the parity math
//! (`graid-parity`'s bench) nor the copies.
//!
//! cargo run --release -p graid-sim --example engine_bench

use graid_engine::array::ArrayEngine;
use graid_engine::geometry::{Geometry, Level};
use graid_engine::layout::ParityLayout;
use graid_engine::members::{MemberSet, MemberState};
use graid_engine::parity::{Columns, ParityJob};
use graid_engine::platform::{
    Computed, Events, LogIo, MemberEvent, MemberIo, Metadata, Op, PieceInfo, RebuildBuffer,
    RebuildIoError, Requests, Status, StripeBuffers, SubmitError, WorkList,
};
use graid_engine::request::RequestState;
use graid_engine::superblock::Superblock;
use graid_sim::stress::superblock;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use std::cell::Cell;
use std::hint::black_box;
use std::time::Instant;

/// A platform that completes every member I/O inline and keeps count.
struct Null {
    engine: ArrayEngine<graid_sim::host::Store>,
    state: RequestState,
    /// The one segment of the current request.
    segment: Cell<(u64, u64)>,
    member_ios: Cell<u64>,
    ended: Cell<u64>,
    /// The list the request waits in, if it does.
    waiting: Cell<Option<WorkList>>,
    /// A stripe step is queued ([`StripeBuffers::queue_stripe_work`]): `main` runs it.
    step_queued: Cell<bool>,
}

impl Null {
    /// Runs the request's queued stripe steps until it has none left (RAID 5/6).
    fn run_steps(&self) {
        while self.step_queued.replace(false) {
            self.engine.stripe_work(self, ());
        }
    }
}

impl Requests for Null {
    type Request = ();
    type Segment = ();

    fn state(&self, _rq: ()) -> &RequestState {
        &self.state
    }

    fn fua(&self, _rq: ()) -> bool {
        false
    }

    fn segments(&self, _rq: ()) -> impl Iterator<Item = ((), u64, u64)> {
        let (start, sectors) = self.segment.get();
        std::iter::once(((), start, sectors))
    }

    fn submit(&self, rq: (), io: &MemberIo<()>) -> Result<(), SubmitError> {
        self.member_ios.set(self.member_ios.get() + 1);
        black_box(io);
        self.engine.piece_done(self, rq, io.info, Status::Ok);
        Ok(())
    }

    fn end_request(&self, _rq: (), status: Status) {
        assert_eq!(status, Status::Ok);
        self.ended.set(self.ended.get() + 1);
    }

    // Only the first write waits (for the dirty mark), in the one request's list.
    fn push(&self, list: WorkList, _rq: ()) {
        self.waiting.set(Some(list));
    }

    fn take_all(&self, list: WorkList, mut f: impl FnMut(())) {
        if let Some(rq) = self.take_oldest(list) {
            f(rq);
        }
    }

    fn take_oldest(&self, list: WorkList) -> Option<()> {
        (self.waiting.get() == Some(list)).then(|| self.waiting.set(None))
    }

    fn kick_worker(&self) {}

    fn kick_worker_after(&self, _ms: u32) {}

    fn any_request(&self, mut pred: impl FnMut(&RequestState) -> bool) -> bool {
        pred(&self.state)
    }

    fn pause(&self) {}
}

impl Metadata for Null {
    fn write_log_head(
        &self,
        _targets: MemberSet,
        _sector: u64,
        _fill: &dyn Fn(&mut [u8; graid_engine::ppl::BLOCK_BYTES]),
    ) -> MemberSet {
        MemberSet::EMPTY
    }

    fn flush_members(&self, _targets: MemberSet) -> MemberSet {
        MemberSet::EMPTY
    }

    fn write_superblocks(
        &self,
        _targets: MemberSet,
        _copy: impl Fn(u32) -> Superblock,
    ) -> MemberSet {
        MemberSet::EMPTY
    }

    // No spares in the bench.
    fn write_spare_superblock(&self, _slot: u32, _sb: &Superblock) -> bool {
        true
    }
}

impl Events for Null {
    fn now_ns(&self) -> u64 {
        0
    }

    fn sleep_ms(&self, _ms: u32) {}

    fn cpu(&self) -> u32 {
        0
    }

    fn member_event(&self, _member: u32, _event: MemberEvent) {}

    fn takeover_wanted(&self) {}
}

impl RebuildBuffer for Null {
    fn rebuild_io(
        &self,
        _op: Op,
        _m: u32,
        _sector: u64,
        _c: u32,
        _offset: u64,
        _sectors: u64,
    ) -> Result<(), RebuildIoError> {
        Ok(())
    }

    fn rebuild_copy(&self, _from: u32, _to: u32, _offset: u64, _sectors: u64) {}

    fn rebuild_accumulate(&self, _from: u32, _to: u32, _coef: u8, _offset: u64, _sectors: u64) {}

    fn rebuild_differ(&self, _a: u32, _b: u32, _offset: u64, _sectors: u64) -> u64 {
        0
    }

    fn rebuild_compute(&self, _job: &ParityJob, _offload: bool) -> Option<Computed> {
        Some(Computed::Here)
    }
}

impl StripeBuffers for Null {
    fn queue_stripe_work(&self, _rq: ()) {
        self.step_queued.set(true);
    }

    fn alloc_buffer(&self, _rq: (), _columns: Columns, _sectors: u64) -> bool {
        true
    }

    fn free_buffer(&self, _rq: ()) {}

    fn copy_to_buffer(&self, _: (), _: (), _: u64, _: u32, _: u64, _: u64) {}

    fn copy_from_buffer(&self, _: (), _: u32, _: u64, _: (), _: u64, _: u64) {}

    fn copy_column(&self, _rq: (), _from: u32, _to: u32, _offset: u64, _sectors: u64) {}

    #[allow(clippy::too_many_arguments)]
    fn accumulate_column(
        &self,
        _rq: (),
        _from: u32,
        _to: u32,
        _coef: u8,
        _offset: u64,
        _sectors: u64,
    ) {
    }

    fn column_crc(&self, _rq: (), _column: u32, _offset: u64, _sectors: u64) -> u32 {
        0
    }

    fn set_log_header(
        &self,
        _rq: (),
        _index: u32,
        _fill: &dyn Fn(&mut [u8; graid_engine::ppl::BLOCK_BYTES]),
    ) {
    }

    fn submit_log(&self, rq: (), io: &LogIo) -> Result<(), SubmitError> {
        let info = PieceInfo {
            op: Op::Write,
            member: io.member,
            sectors: io.sectors,
        };
        self.engine.piece_done(self, rq, info, Status::Ok);
        Ok(())
    }

    fn compute_parity(&self, rq: (), job: &ParityJob) {
        black_box(job);
        self.engine.parity_done(self, rq, true);
    }
}

fn main() {
    const REQUESTS: u64 = 2_000_000;
    println!("level    members  chunk  request  op     ns/request  member I/Os/request");
    let shapes = [
        (Level::Raid0, 4, 128),
        (Level::Raid1, 2, 0),
        (Level::Raid10, 4, 128),
        (Level::Raid5(ParityLayout::LeftSymmetric), 6, 128),
        (Level::Raid6(ParityLayout::LeftSymmetric), 6, 128),
    ];
    for (level, members, chunk) in shapes {
        let geometry = Geometry::new(level, members, chunk, 1 << 30).expect("geometry");
        let states = (0..members)
            .map(|m| MemberState::new([m as u8; 16], m))
            .collect();
        let store = graid_sim::host::store(states, 1);
        let engine = ArrayEngine::new(superblock(&geometry, level, chunk), geometry, store, true)
            .expect("engine");
        let null = Null {
            engine,
            state: RequestState::new(),
            segment: Cell::new((0, 0)),
            member_ios: Cell::new(0),
            ended: Cell::new(0),
            waiting: Cell::new(None),
            step_queued: Cell::new(false),
        };
        // The first write waits while the worker marks the array dirty; the rest go at once.
        null.segment.set((0, 8));
        null.engine.submit(&null, (), Op::Write, 0, 8);
        null.engine.work(&null);
        null.run_steps();
        assert!(null.engine.is_dirty() || level == Level::Raid0);
        // RAID 5/6: the largest request is a whole run (the queue limits split there).
        let largest = if level.has_parity() {
            u64::from(geometry.boundary_sectors())
        } else {
            2048
        };
        for sectors in [8u64, 128, largest] {
            for op in [Op::Read, Op::Write] {
                let mut rng = StdRng::seed_from_u64(1);
                let span = geometry.array_sectors() / sectors;
                let starts: Vec<u64> = (0..4096)
                    .map(|_| rng.random_range(0..span) * sectors)
                    .collect();
                null.member_ios.set(0);
                null.ended.set(0);
                let began = Instant::now();
                for i in 0..REQUESTS {
                    let start = starts[(i % 4096) as usize];
                    null.segment.set((start, sectors));
                    null.engine.submit(&null, (), op, start, sectors);
                    null.run_steps();
                }
                let elapsed = began.elapsed();
                assert_eq!(null.ended.get(), REQUESTS);
                println!(
                    "{:<8} {:<8} {:<6} {:<8} {:<6} {:<11.1} {:.2}",
                    format!("{level}"),
                    members,
                    if chunk == 0 {
                        "-".to_string()
                    } else {
                        format!("{}K", chunk / 2)
                    },
                    format!("{}K", sectors / 2),
                    format!("{op:?}").to_lowercase(),
                    elapsed.as_nanos() as f64 / REQUESTS as f64,
                    null.member_ios.get() as f64 / REQUESTS as f64,
                );
            }
        }
    }
}
