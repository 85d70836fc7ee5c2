//! Which engine computes a batch: `--engine cpu` (SIMD, `graid_parity::CpuEngine`), `vulkan`
//! (a Vulkan device for generations and recoveries, the CPU for every job it does not do, and for its
//! whole share again if the device fails: no job is lost to a GPU error or hang), and `auto`
//! (Vulkan on a real GPU, else the CPU: a CPU implementation such as lavapipe is slower than
//! the SIMD engine).

use graid_parity::{CpuEngine, Engine, Job, ParityError};
use graid_vulkan::VulkanEngine;
use std::sync::atomic::{AtomicU64, Ordering};

/// The engine a user asked for.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum EngineChoice {
    Auto,
    Cpu,
    Vulkan,
}

/// Builds the engine for `choice` with `threads` CPU threads; an error names why (no Vulkan
/// device, ...).
pub fn build(choice: EngineChoice, threads: usize) -> Result<Box<dyn Engine>, String> {
    let cpu = CpuEngine::builder()
        .threads(threads)
        .build()
        .map_err(|e| format!("no CPU engine: {e}"))?;
    match choice {
        EngineChoice::Cpu => Ok(Box::new(cpu)),
        EngineChoice::Vulkan => match VulkanEngine::new() {
            Ok(gpu) => Ok(Box::new(GpuFirst::new(gpu, cpu))),
            Err(e) => Err(format!("no Vulkan engine: {e}")),
        },
        EngineChoice::Auto => match VulkanEngine::new() {
            Ok(gpu) if gpu.is_gpu() => Ok(Box::new(GpuFirst::new(gpu, cpu))),
            _ => Ok(Box::new(cpu)),
        },
    }
}

/// A GPU engine (`G`) for what it does, the CPU for the rest and as its fallback.
pub struct GpuFirst<G = VulkanEngine> {
    gpu: G,
    cpu: CpuEngine,
    /// Batches the GPU failed, which the CPU computed instead.
    gpu_failures: AtomicU64,
}

impl<G: Engine> GpuFirst<G> {
    pub fn new(gpu: G, cpu: CpuEngine) -> Self {
        Self {
            gpu,
            cpu,
            gpu_failures: AtomicU64::new(0),
        }
    }

    /// Batches the GPU failed (and the CPU computed).
    pub fn gpu_failures(&self) -> u64 {
        self.gpu_failures.load(Ordering::Relaxed)
    }
}

/// Whether the GPU engine does `job` (all but read-modify-write).
fn for_gpu(job: &Job<'_>) -> bool {
    !matches!(job, Job::Update(_))
}

impl<G: Engine> Engine for GpuFirst<G> {
    fn name(&self) -> String {
        format!("{}+{}", self.gpu.name(), self.cpu.name())
    }

    fn compute(&self, jobs: &mut [Job<'_>]) -> Result<(), ParityError> {
        for (index, job) in jobs.iter().enumerate() {
            job.validate(index)?;
        }
        // The GPU's jobs first (the caller reads results, not positions).
        jobs.sort_by_key(|job| !for_gpu(job));
        let split = jobs.iter().take_while(|job| for_gpu(job)).count();
        let (gpu_jobs, cpu_jobs) = jobs.split_at_mut(split);
        if !gpu_jobs.is_empty() {
            if let Err(e) = self.gpu.compute(gpu_jobs) {
                // It wrote nothing it would have had to: the CPU does them all.
                if self.gpu_failures.fetch_add(1, Ordering::Relaxed) == 0 {
                    eprintln!("graid-helper: {e}; the CPU computes the GPU's jobs");
                }
                self.cpu.compute(gpu_jobs)?;
            }
        }
        if !cpu_jobs.is_empty() {
            self.cpu.compute(cpu_jobs)?;
        }
        Ok(())
    }

    unsafe fn share_memory(&self, region: Option<(*mut u8, usize)>) -> bool {
        // SAFETY: the caller's promise, passed on.
        unsafe { self.gpu.share_memory(region) }
    }
}
