//! The `Engine` trait and its CPU implementations.

use crate::batch::Workers;
use crate::job::Job;
use crate::{reference, Level, ParityError};

/// Something that computes parity jobs: the CPU kernels here, GPU backends elsewhere.
pub trait Engine: Send + Sync {
    /// A short description for logs and benchmarks, e.g. `cpu-avx2x2`.
    fn name(&self) -> String;

    /// Computes every job of the batch. All jobs are validated first: on error nothing has
    /// been written.
    fn compute(&self, jobs: &mut [Job<'_>]) -> Result<(), ParityError>;

    /// Memory most jobs' buffers will lie in (the helper's pool), which an engine may map for
    /// its device once instead of copying every job (`None`: forget it). Returns whether it
    /// did; the CPU engines need nothing and say no.
    ///
    /// # Safety
    ///
    /// `base..base + len` stays valid memory until the next call or the engine's drop.
    // Unsafe to call, not to implement here: the caller vouches for memory the engine keeps.
    #[allow(unsafe_code)]
    unsafe fn share_memory(&self, region: Option<(*mut u8, usize)>) -> bool {
        let _ = region;
        false
    }
}

fn validate_all(jobs: &[Job<'_>]) -> Result<(), ParityError> {
    jobs.iter()
        .enumerate()
        .try_for_each(|(index, job)| job.validate(index))
}

/// The byte-at-a-time oracle. Slow; for tests and as a baseline in benchmarks.
#[derive(Clone, Copy, Debug, Default)]
pub struct ReferenceEngine;

impl Engine for ReferenceEngine {
    fn name(&self) -> String {
        "reference".into()
    }

    fn compute(&self, jobs: &mut [Job<'_>]) -> Result<(), ParityError> {
        validate_all(jobs)?;
        jobs.iter_mut().for_each(reference::compute);
        Ok(())
    }
}

/// The CPU SIMD engine: one dispatch level, a pool of worker threads.
pub struct CpuEngine {
    level: Level,
    threads: usize,
    workers: Workers,
}

/// Configures a [`CpuEngine`].
#[derive(Clone, Debug, Default)]
pub struct CpuEngineBuilder {
    level: Option<Level>,
    threads: Option<usize>,
}

impl CpuEngineBuilder {
    /// Forces a dispatch level; [`CpuEngineBuilder::build`] refuses one the CPU lacks.
    /// Without it, `GRAID_PARITY_LEVEL` or else the best supported level is used.
    pub fn level(mut self, level: Level) -> Self {
        self.level = Some(level);
        self
    }

    /// Worker threads (default 1: compute on the calling thread).
    pub fn threads(mut self, threads: usize) -> Self {
        self.threads = Some(threads);
        self
    }

    pub fn build(self) -> Result<CpuEngine, ParityError> {
        let level = match self.level {
            Some(level) => level.check_supported()?,
            None => Level::select()?,
        };
        let threads = self.threads.unwrap_or(1).max(1);
        Ok(CpuEngine {
            level,
            threads,
            workers: Workers::new(threads)?,
        })
    }
}

impl CpuEngine {
    /// `GRAID_PARITY_LEVEL` or the best supported level, on the calling thread.
    pub fn new() -> Result<CpuEngine, ParityError> {
        CpuEngine::builder().build()
    }

    pub fn builder() -> CpuEngineBuilder {
        CpuEngineBuilder::default()
    }

    /// A single-threaded engine at `level`, or the error saying what the CPU lacks.
    pub fn with_level(level: Level) -> Result<CpuEngine, ParityError> {
        CpuEngine::builder().level(level).build()
    }

    pub fn level(&self) -> Level {
        self.level
    }

    pub fn threads(&self) -> usize {
        self.threads
    }
}

impl Engine for CpuEngine {
    fn name(&self) -> String {
        format!("cpu-{}x{}", self.level, self.threads)
    }

    fn compute(&self, jobs: &mut [Job<'_>]) -> Result<(), ParityError> {
        validate_all(jobs)?;
        self.workers.run(self.level, jobs);
        Ok(())
    }
}
