//! The kernels: one generic single-pass executor ([`exec`]) and, per dispatch level, the vector
//! type it runs on. This is the only module allowed `unsafe`.
#![allow(unsafe_code)]

/// The entry points of one x86 level, in a module of their own: `run` (a [`Plan`]), `generate`
/// (a `GenPq` job, straight to [`exec::generate_job`]) and `recover` (an [`exec::Recovery`]).
/// Each checks the CPU, then calls a `#[target_feature]` function, which has to exist once per
/// level: the generic kernels are `#[inline(always)]` and compile for the features of the
/// function they are inlined into.
#[cfg(target_arch = "x86_64")]
macro_rules! level_entries {
    (
        mod $module:ident {
            name: $name:literal,
            features: $features:literal,
            detect: [$($feature:tt),+],
            vector: $vector:ident,
            unroll: $unroll:literal,
            gen: $gen:literal,
        }
    ) => {
        pub(crate) mod $module {
            use super::$vector;
            use $crate::simd::exec::{self, Recovery};
            use $crate::plan::Plan;

            fn check() {
                assert!(
                    $(is_x86_feature_detected!($feature))&&+,
                    concat!($name, " level on a CPU without ", $features)
                );
            }

            #[target_feature(enable = $features)]
            unsafe fn run_unchecked(plan: &mut Plan<'_>) {
                exec::run::<$vector, $unroll, $gen>(plan)
            }

            #[target_feature(enable = $features)]
            unsafe fn generate_unchecked(data: &[&[u8]], p: &mut [u8], q: &mut [u8]) {
                exec::generate_job::<$vector, $gen>(data, p, q)
            }

            pub(crate) fn run(plan: &mut Plan<'_>) {
                check();
                // SAFETY: the CPU has the level's features (checked above); plans come from
                // validated jobs.
                unsafe { run_unchecked(plan) }
            }

            /// P and Q of a validated `GenPq` job.
            pub(crate) fn generate(data: &[&[u8]], p: &mut [u8], q: &mut [u8]) {
                check();
                // SAFETY: the CPU has the level's features (checked above); the job was
                // validated (equal lengths, a multiple of 64 bytes, at least two data chunks).
                unsafe { generate_unchecked(data, p, q) }
            }

            #[target_feature(enable = $features)]
            unsafe fn recover_unchecked(recovery: &Recovery<'_>) {
                recovery.run::<$vector, $gen>()
            }

            /// The two lost members of a recovery job that has its own pass.
            pub(crate) fn recover(recovery: &Recovery<'_>) {
                check();
                // SAFETY: the CPU has the level's features (checked above); a `Recovery` only
                // holds buffers of one length, a multiple of 64 bytes.
                unsafe { recover_unchecked(recovery) }
            }
        }
    };
}

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
        Level::Ssse3 => ssse3::entries::run(plan),
        #[cfg(target_arch = "x86_64")]
        Level::Avx2 => avx2::entries::run(plan),
        #[cfg(target_arch = "x86_64")]
        Level::Avx512Bw => avx512bw::entries::run(plan),
        #[cfg(target_arch = "x86_64")]
        Level::Avx2Gfni => gfni::avx2_entries::run(plan),
        #[cfg(target_arch = "x86_64")]
        Level::Avx512Gfni => gfni::avx512_entries::run(plan),
        #[cfg(not(target_arch = "x86_64"))]
        other => panic!("dispatch level {other} does not exist on this architecture"),
    }
}

/// Computes a validated job. Plain P+Q generation and recovery of two members (two data, data
/// and P, data and Q) skip the lowering to a [`Plan`] on every x86 level; everything else runs
/// through [`run`].
pub(crate) fn compute(level: Level, job: &mut Job<'_>) {
    #[cfg(target_arch = "x86_64")]
    match (level, &mut *job) {
        (Level::Ssse3, Job::GenPq { data, p, q }) => return ssse3::entries::generate(data, p, q),
        (Level::Avx2, Job::GenPq { data, p, q }) => return avx2::entries::generate(data, p, q),
        (Level::Avx512Bw, Job::GenPq { data, p, q }) => {
            return avx512bw::entries::generate(data, p, q)
        }
        (Level::Avx2Gfni, Job::GenPq { data, p, q }) => {
            return gfni::avx2_entries::generate(data, p, q)
        }
        (Level::Avx512Gfni, Job::GenPq { data, p, q }) => {
            return gfni::avx512_entries::generate(data, p, q)
        }
        (_, Job::Recover(recover)) if level != Level::Scalar => {
            if let Some(recovery) = exec::Recovery::from_job(recover) {
                return match level {
                    Level::Ssse3 => ssse3::entries::recover(&recovery),
                    Level::Avx2 => avx2::entries::recover(&recovery),
                    Level::Avx512Bw => avx512bw::entries::recover(&recovery),
                    Level::Avx2Gfni => gfni::avx2_entries::recover(&recovery),
                    // Level::Avx512Gfni, the only other level of this arm.
                    _ => gfni::avx512_entries::recover(&recovery),
                };
            }
        }
        _ => {}
    }
    run(level, &mut Plan::from_job(job))
}
