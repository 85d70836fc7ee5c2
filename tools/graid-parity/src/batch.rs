//! Running a batch's plans on a small, long-lived thread pool.
//!
//! Plans are cut into byte-range segments (every operation is column-wise, so the pieces are
//! independent) and the pool's workers take segments as they free up. Small batches run on the
//! calling thread: waking workers costs more than it saves.

use crate::job::Job;
use crate::plan::Plan;
use crate::simd;
use crate::Level;
use rayon::prelude::*;

/// Work units are at most this many bytes of chunk length: big enough to amortise a task hand-off,
/// small enough that one 1 MiB stripe still spreads over several threads.
const SEGMENT_BYTES: usize = 32 * 1024;
/// Below this much chunk data per batch, don't involve the pool at all.
const PARALLEL_THRESHOLD_BYTES: usize = 64 * 1024;

/// A persistent pool of worker threads, or none for single-threaded engines.
pub(crate) struct Workers {
    pool: Option<rayon::ThreadPool>,
}

impl Workers {
    pub fn new(threads: usize) -> Result<Workers, crate::ParityError> {
        if threads <= 1 {
            return Ok(Workers { pool: None });
        }
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("graid-parity-{i}"))
            .build()
            .map_err(|e| crate::ParityError::ThreadPool(e.to_string()))?;
        Ok(Workers { pool: Some(pool) })
    }

    /// Computes validated jobs.
    pub fn run(&self, level: Level, jobs: &mut [Job<'_>]) {
        let Some(pool) = &self.pool else {
            // One thread: lower and run each job in turn, with no list of plans to allocate.
            for job in jobs {
                simd::compute(level, job);
            }
            return;
        };
        let plans: Vec<Plan<'_>> = jobs.iter_mut().map(Plan::from_job).collect();
        let total: usize = plans.iter().map(|p| p.len() * p.sources.len().max(1)).sum();
        if total >= PARALLEL_THRESHOLD_BYTES {
            let segments = segment(plans);
            pool.install(|| {
                segments
                    .into_par_iter()
                    .with_max_len(1)
                    .for_each(|mut plan| simd::run(level, &mut plan))
            });
        } else {
            for mut plan in plans {
                simd::run(level, &mut plan);
            }
        }
    }
}

/// Cuts plans into segments of at most [`SEGMENT_BYTES`] (a multiple of the chunk alignment).
fn segment(plans: Vec<Plan<'_>>) -> Vec<Plan<'_>> {
    let mut segments = Vec::with_capacity(plans.len());
    for mut plan in plans {
        while plan.len() > SEGMENT_BYTES {
            let (head, tail) = plan.split_at(SEGMENT_BYTES);
            segments.push(head);
            plan = tail;
        }
        segments.push(plan);
    }
    segments
}
