//! The ring protocol with no kernel: a stand-in for the module submits parity jobs (the
//! engine's own `JobTable`, the real layout, a pool in this process) and checks every
//! completion, while the helper's loop serves them on another thread. For tests, and to measure
//! what the ring itself costs per job and per GB (`graid-helper loopback`).

use crate::control::{decode_cqe, encode_sqe, ControlArea, CQ, CQE_WORDS, SQ};
use crate::exec::Pool;
use crate::serve::serve_batch;
use graid_abi::ring::{Sqe, CONTROL_BYTES, JOB_OP_PQ, JOB_OP_XOR, JOB_STATUS_OK};
use graid_engine::ring::{Completion, JobSlot, JobTable};
use graid_parity::{AlignedBuf, Engine, Job, ReferenceEngine};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// The jobs a loopback run submits: every job `stripes` stripes of `data` data columns and
/// `parity` (1: RAID 5, 2: RAID 6) parity columns of `column_bytes` each.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    pub data: usize,
    pub parity: usize,
    pub column_bytes: usize,
    pub stripes: usize,
}

impl Shape {
    fn columns(&self) -> usize {
        self.stripes * (self.data + self.parity)
    }

    /// Data bytes one job covers.
    pub fn data_bytes(&self) -> u64 {
        (self.stripes * self.data * self.column_bytes) as u64
    }
}

/// What a run measured.
#[derive(Clone, Copy, Debug)]
pub struct Report {
    pub jobs: usize,
    pub elapsed: Duration,
    /// Completions the stand-in refused (never, with an honest helper).
    pub refused: usize,
    /// Jobs answered with a status other than OK.
    pub failed: usize,
    /// Whether the engine took the pool for its device (`Engine::share_memory`).
    pub shared: bool,
}

/// A loopback: the control area, the pool and the job slots of one run.
pub struct Loopback {
    words: Vec<AtomicU32>,
    pool_buffer: AlignedBuf,
    base: *mut u8,
    shape: Shape,
    slots: usize,
    slot_bytes: usize,
    table_bytes: usize,
}

// SAFETY: the pool is written through `base` by the stand-in (a job's data, before the job is
// published; its parity read after its completion) and by the helper's loop (a job's parity,
// between the two): the ring's release/acquire pairs order those, as in the real protocol.
unsafe impl Sync for Loopback {}

impl Loopback {
    /// A loopback with `slots` jobs in flight at most.
    pub fn new(shape: Shape, slots: usize) -> Self {
        let table_bytes = (shape.columns() * 8).div_ceil(4096) * 4096;
        let slot_bytes = table_bytes + shape.columns() * shape.column_bytes;
        // Whole pages, as the helper's real pool: a device may import only those.
        let mut pool_buffer =
            AlignedBuf::zeroed_page_aligned((slot_bytes * slots).next_multiple_of(4096));
        let base = pool_buffer.as_mut_ptr();
        let words = (0..CONTROL_BYTES / 4).map(|_| AtomicU32::new(0)).collect();
        let this = Self {
            words,
            pool_buffer,
            base,
            shape,
            slots,
            slot_bytes,
            table_bytes,
        };
        for slot in 0..slots {
            this.write_column_table(slot);
        }
        this
    }

    fn area(&self) -> ControlArea<'_> {
        ControlArea::new(&self.words).expect("a whole control area")
    }

    /// The helper's view of the pool.
    fn pool(&self) -> Pool {
        // SAFETY: the buffer lives as long as `self`; see `Sync` above for who writes when.
        unsafe { Pool::new(self.base, self.pool_buffer.len()) }
    }

    fn column_offset(&self, slot: usize, column: usize) -> usize {
        slot * self.slot_bytes + self.table_bytes + column * self.shape.column_bytes
    }

    fn write_column_table(&self, slot: usize) {
        for column in 0..self.shape.columns() {
            let entry = (self.column_offset(slot, column) as u64).to_le_bytes();
            // SAFETY: the table lies in the slot's own bytes, which no job uses yet.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    entry.as_ptr(),
                    self.base.add(slot * self.slot_bytes + column * 8),
                    8,
                );
            }
        }
    }

    /// Column `column` of `slot`, for the stand-in (the job is not out).
    #[allow(clippy::mut_from_ref)]
    fn column(&self, slot: usize, column: usize) -> &mut [u8] {
        // SAFETY: in the pool; the slot's job is not out, so the helper does not touch it, and
        // the stand-in uses one column at a time.
        unsafe {
            std::slice::from_raw_parts_mut(
                self.base.add(self.column_offset(slot, column)),
                self.shape.column_bytes,
            )
        }
    }

    /// Fills `slot`'s data columns with a pattern of `seed`.
    fn fill(&self, slot: usize, seed: u64) {
        let per = self.shape.data + self.shape.parity;
        for stripe in 0..self.shape.stripes {
            for d in 0..self.shape.data {
                let column = self.column(slot, stripe * per + d);
                let mut x = seed ^ ((stripe * per + d) as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
                for chunk in column.chunks_exact_mut(8) {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    chunk.copy_from_slice(&x.to_le_bytes());
                }
            }
        }
    }

    /// True if `slot`'s parity is what the reference engine computes from its data.
    fn parity_is_right(&self, slot: usize) -> bool {
        let per = self.shape.data + self.shape.parity;
        (0..self.shape.stripes).all(|stripe| {
            let data: Vec<AlignedBuf> = (0..self.shape.data)
                .map(|d| AlignedBuf::from_slice(self.column(slot, stripe * per + d)))
                .collect();
            let bytes = self.shape.column_bytes;
            let (mut p, mut q) = (AlignedBuf::zeroed(bytes), AlignedBuf::zeroed(bytes));
            let data: Vec<&[u8]> = data.iter().map(|d| &d[..]).collect();
            let mut job = if self.shape.parity == 2 {
                Job::GenPq {
                    data,
                    p: &mut p,
                    q: &mut q,
                }
            } else {
                Job::Xor { data, p: &mut p }
            };
            if ReferenceEngine
                .compute(std::slice::from_mut(&mut job))
                .is_err()
            {
                return false;
            }
            let base = stripe * per + self.shape.data;
            self.column(slot, base) == &p[..]
                && (self.shape.parity == 1 || self.column(slot, base + 1) == &q[..])
        })
    }

    /// Runs `jobs` jobs through the ring while `engine` serves them on a helper thread, in
    /// batches of at most `batch`. With `verify`, every job gets fresh data and its parity is
    /// checked against the reference engine (slow: for tests); otherwise the data is filled
    /// once and the run measures the ring and the engine.
    pub fn run(&self, jobs: usize, engine: &dyn Engine, batch: usize, verify: bool) -> Report {
        let area = self.area();
        let mut table = JobTable::new(vec![JobSlot::default(); self.slots]);
        table.attach();
        if !verify {
            (0..self.slots).for_each(|slot| self.fill(slot, slot as u64));
        }
        let stop = AtomicBool::new(false);
        // SAFETY: the pool lives as long as `self`, and is forgotten before this returns.
        let shared = unsafe { engine.share_memory(Some(self.pool_region())) };
        let mut report = Report {
            jobs,
            elapsed: Duration::ZERO,
            refused: 0,
            failed: 0,
            shared,
        };
        let op = if self.shape.parity == 2 {
            JOB_OP_PQ
        } else {
            JOB_OP_XOR
        };
        let started = Instant::now();
        std::thread::scope(|s| {
            s.spawn(|| {
                let pool = self.pool();
                while !stop.load(Ordering::Acquire) {
                    match serve_batch(&area, &pool, engine, batch) {
                        Ok(0) => std::thread::yield_now(),
                        Ok(_) => {}
                        Err(_) => break,
                    }
                }
            });
            let (mut submitted, mut ended) = (0, 0);
            let mut words = [0u32; CQE_WORDS];
            while ended < jobs {
                while submitted < jobs {
                    let Ok(ticket) = table.submit(u64::MAX) else {
                        break;
                    };
                    let slot = ticket.job as usize;
                    if verify {
                        self.fill(slot, submitted as u64);
                    }
                    let sqe = Sqe {
                        job: ticket.job,
                        generation: ticket.generation,
                        op,
                        data_columns: self.shape.data as u8,
                        stripes: self.shape.stripes as u32,
                        column_bytes: self.shape.column_bytes as u32,
                        columns_offset: (slot * self.slot_bytes) as u64,
                        ..Sqe::default()
                    };
                    while !SQ.push(&area, &encode_sqe(&sqe)) {
                        std::thread::yield_now();
                    }
                    submitted += 1;
                }
                match CQ.pop(&area, &mut words) {
                    Ok(true) => {
                        let cqe = decode_cqe(&words);
                        match table.complete(cqe.job, cqe.generation) {
                            Ok(Completion::Done { job }) => {
                                let right = !verify || self.parity_is_right(job as usize);
                                if cqe.status != JOB_STATUS_OK || !right {
                                    report.failed += 1;
                                }
                                ended += 1;
                            }
                            _ => report.refused += 1,
                        }
                    }
                    Ok(false) => std::thread::yield_now(),
                    Err(_) => {
                        report.refused += 1;
                        break;
                    }
                }
            }
            report.elapsed = started.elapsed();
            stop.store(true, Ordering::Release);
        });
        // SAFETY: forgetting needs nothing.
        unsafe { engine.share_memory(None) };
        report
    }

    /// The pool as the engine may share it.
    fn pool_region(&self) -> (*mut u8, usize) {
        (self.base, self.pool_buffer.len())
    }

    /// The same jobs computed straight by `engine`, with no ring: the baseline the ring's
    /// cost is measured against. Returns the time for `jobs` jobs.
    pub fn direct(&self, jobs: usize, engine: &dyn Engine, batch: usize) -> Duration {
        let pool = self.pool();
        let sqes: Vec<Sqe> = (0..self.slots.min(batch))
            .map(|slot| Sqe {
                job: slot as u32,
                op: if self.shape.parity == 2 {
                    JOB_OP_PQ
                } else {
                    JOB_OP_XOR
                },
                data_columns: self.shape.data as u8,
                stripes: self.shape.stripes as u32,
                column_bytes: self.shape.column_bytes as u32,
                columns_offset: (slot * self.slot_bytes) as u64,
                ..Sqe::default()
            })
            .collect();
        // SAFETY: as in `run`.
        unsafe { engine.share_memory(Some(self.pool_region())) };
        let started = Instant::now();
        let mut done = 0;
        while done < jobs {
            let n = sqes.len().min(jobs - done);
            pool.execute(&sqes[..n], engine);
            done += n;
        }
        let elapsed = started.elapsed();
        // SAFETY: forgetting needs nothing.
        unsafe { engine.share_memory(None) };
        elapsed
    }
}
