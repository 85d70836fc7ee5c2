//! The scalar reference: every operation written byte by byte straight from its definition.
//! Slow on purpose; it is the oracle the fast kernels are tested against, so it shares nothing
//! with them but the field tables.

use crate::gf;
use crate::job::{Chunk, Job, Recover, Update};

/// Computes one job. The job must already have passed [`Job::validate`].
pub(crate) fn compute(job: &mut Job<'_>) {
    match job {
        Job::Xor { data, p } => xor(data, p),
        Job::GenPq { data, p, q } => gen_pq(data, p, q),
        Job::Update(update) => apply_update(update),
        Job::Recover(recover) => recover_lost(recover),
    }
}

fn xor(data: &[&[u8]], p: &mut [u8]) {
    for (byte, out) in p.iter_mut().enumerate() {
        *out = data.iter().fold(0, |acc, d| acc ^ d[byte]);
    }
}

/// Q's contribution of data chunk `index`: g^index · value.
fn q_term(index: usize, value: u8) -> u8 {
    gf::mul(gf::pow2(index), value)
}

fn gen_pq(data: &[&[u8]], p: &mut [u8], q: &mut [u8]) {
    for byte in 0..p.len() {
        p[byte] = data.iter().fold(0, |acc, d| acc ^ d[byte]);
        q[byte] = data
            .iter()
            .enumerate()
            .fold(0, |acc, (i, d)| acc ^ q_term(i, d[byte]));
    }
}

fn apply_update(update: &mut Update<'_>) {
    for change in &update.changes {
        for byte in 0..update.p.len() {
            let delta = change.old[byte] ^ change.new[byte];
            update.p[byte] ^= delta;
            if let Some(q) = update.q.as_deref_mut() {
                q[byte] ^= q_term(change.index, delta);
            }
        }
    }
}

/// Reads byte `byte` of an intact chunk; lost chunks read as zero so sums skip them.
fn read(chunk: &Chunk<'_>, byte: usize) -> u8 {
    match chunk {
        Chunk::Intact(buf) => buf[byte],
        Chunk::Lost(_) => 0,
    }
}

fn write(chunk: &mut Chunk<'_>, byte: usize, value: u8) {
    if let Chunk::Lost(buf) = chunk {
        buf[byte] = value;
    }
}

fn recover_lost(job: &mut Recover<'_>) {
    let lost_data: Vec<usize> = (0..job.data.len())
        .filter(|&i| job.data[i].is_lost())
        .collect();
    for byte in 0..job.p.bytes().len() {
        // Syndromes of the surviving data only.
        let mut p_partial = 0u8;
        let mut q_partial = 0u8;
        for (i, chunk) in job.data.iter().enumerate() {
            p_partial ^= read(chunk, byte);
            q_partial ^= q_term(i, read(chunk, byte));
        }
        let p = read(&job.p, byte);
        let q = job.q.as_ref().map_or(0, |q| read(q, byte));
        let p_lost = job.p.is_lost();
        let q_lost = job.q.as_ref().is_some_and(|q| q.is_lost());

        match lost_data[..] {
            // Only parity lost: recompute it.
            [] => {}
            // One data chunk: from P if P survived, else from Q.
            [a] => {
                let value = if !p_lost {
                    p ^ p_partial
                } else {
                    // Q = q_partial + g^a·Da  =>  Da = (Q + q_partial) / g^a
                    gf::mul(q ^ q_partial, gf::inv(gf::pow2(a)))
                };
                write(&mut job.data[a], byte, value);
                p_partial ^= value;
                q_partial ^= q_term(a, value);
            }
            // Two data chunks: solve Da + Db = P', g^a·Da + g^b·Db = Q'.
            [a, b] => {
                let p_sum = p ^ p_partial;
                let q_sum = q ^ q_partial;
                let (ga, gb) = (gf::pow2(a), gf::pow2(b));
                let da = gf::mul(q_sum ^ gf::mul(gb, p_sum), gf::inv(ga ^ gb));
                let db = p_sum ^ da;
                write(&mut job.data[a], byte, da);
                write(&mut job.data[b], byte, db);
                p_partial ^= da ^ db;
                q_partial ^= q_term(a, da) ^ q_term(b, db);
            }
            _ => unreachable!("validated jobs lose at most two chunks"),
        }
        if p_lost {
            write(&mut job.p, byte, p_partial);
        }
        if q_lost {
            if let Some(q) = job.q.as_mut() {
                write(q, byte, q_partial);
            }
        }
    }
}
