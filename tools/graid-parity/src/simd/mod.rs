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

/// Computes a validated job. Plain P+Q generation and recovery of two members (two data, data
/// and P, data and Q) skip the lowering to a [`Plan`] on the levels that have direct entries
/// for them; everything else runs through [`run`].
pub(crate) fn compute(level: Level, job: &mut Job<'_>) {
    #[cfg(target_arch = "x86_64")]
    match (level, &mut *job) {
        (Level::Ssse3, Job::GenPq { data, p, q }) => return ssse3::generate(data, p, q),
        (Level::Avx2, Job::GenPq { data, p, q }) => return avx2::generate(data, p, q),
        (Level::Avx512Bw, Job::GenPq { data, p, q }) => return avx512bw::generate(data, p, q),
        (Level::Ssse3 | Level::Avx2 | Level::Avx512Bw, Job::Recover(recover)) => {
            if let Some(recovery) = exec::Recovery::from_job(recover) {
                return match level {
                    Level::Ssse3 => ssse3::recover(&recovery),
                    Level::Avx2 => avx2::recover(&recovery),
                    // Level::Avx512Bw, the only other level of this arm.
                    _ => avx512bw::recover(&recovery),
                };
            }
        }
        _ => {}
    }
    run(level, &mut Plan::from_job(job))
}
