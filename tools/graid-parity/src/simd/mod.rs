//! The kernels: one generic single-pass executor ([`exec`]) and, per dispatch level, the vector
//! type it runs on. This is the only module allowed `unsafe`.
#![allow(unsafe_code)]

mod exec;
#[cfg(test)]
mod gfni_model;
mod portable;

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512bw;
#[cfg(target_arch = "x86_64")]
mod gfni;
#[cfg(target_arch = "x86_64")]
mod ssse3;

use crate::job::Job;
use crate::plan::Plan;
use crate::Level;

/// Runs a plan with the given level's kernels. The level must be supported by this CPU (the
/// level modules re-check and panic rather than execute an illegal instruction).
pub(crate) fn run(level: Level, plan: &mut Plan<'_>) {
    match level {
        Level::Scalar => portable::run(plan),
        #[cfg(target_arch = "x86_64")]
        Level::Ssse3 => ssse3::run(plan),
        #[cfg(target_arch = "x86_64")]
        Level::Avx2 => avx2::run(plan),
        #[cfg(target_arch = "x86_64")]
        Level::Avx512Bw => avx512bw::run(plan),
        #[cfg(target_arch = "x86_64")]
        Level::Avx2Gfni => gfni::run_avx2(plan),
        #[cfg(target_arch = "x86_64")]
        Level::Avx512Gfni => gfni::run_avx512(plan),
        #[cfg(not(target_arch = "x86_64"))]
        other => panic!("dispatch level {other} does not exist on this architecture"),
    }
}

/// Computes a validated job. Plain P+Q generation skips the lowering to a [`Plan`] on the
/// levels that have a direct entry for it; everything else runs through [`run`].
pub(crate) fn compute(level: Level, job: &mut Job<'_>) {
    match (level, job) {
        #[cfg(target_arch = "x86_64")]
        (Level::Ssse3, Job::GenPq { data, p, q }) => ssse3::generate(data, p, q),
        #[cfg(target_arch = "x86_64")]
        (Level::Avx2, Job::GenPq { data, p, q }) => avx2::generate(data, p, q),
        #[cfg(target_arch = "x86_64")]
        (Level::Avx512Bw, Job::GenPq { data, p, q }) => avx512bw::generate(data, p, q),
        (level, job) => run(level, &mut Plan::from_job(job)),
    }
}
