//! The helper's loop body: take a batch of jobs off the SQ, compute them together, publish
//! their completions.

use crate::control::{decode_sqe, encode_cqe, BadIndex, ControlArea, CQ, SQ, SQE_WORDS};
use crate::exec::Pool;
use graid_abi::ring::{Cqe, Sqe};
use graid_parity::Engine;

/// Takes up to `max` jobs off the SQ, computes them and completes them; returns how many.
/// `Err` when the kernel's indices are impossible (the helper then stops).
pub fn serve_batch(
    area: &ControlArea<'_>,
    pool: &Pool,
    engine: &dyn Engine,
    max: usize,
) -> Result<usize, BadIndex> {
    let mut sqes: Vec<Sqe> = Vec::with_capacity(max);
    let mut words = [0u32; SQE_WORDS];
    while sqes.len() < max && SQ.pop(area, &mut words)? {
        sqes.push(decode_sqe(&words));
    }
    if sqes.is_empty() {
        return Ok(0);
    }
    let status = pool.execute(&sqes, engine);
    for (sqe, status) in sqes.iter().zip(status) {
        let cqe = Cqe {
            job: sqe.job,
            generation: sqe.generation,
            status,
            reserved: 0,
        };
        // The CQ holds twice the SQ: a completion always finds room once the kernel consumed
        // what it can.
        while !CQ.push(area, &encode_cqe(&cqe)) {
            std::thread::yield_now();
        }
    }
    Ok(sqes.len())
}
