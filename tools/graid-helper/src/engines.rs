//! Which engine computes a batch:
//! - `--engine cpu`: SIMD (`graid_parity::CpuEngine`);
//! - `cuda`, `vulkan`: that GPU for generations, updates and recoveries, the CPU for any job
//!   it does not take, and for its whole share again if the device fails or times out, so no
//!   job is lost to a GPU error or hang;
//! - `auto`: CUDA if there is an NVIDIA GPU, else Vulkan on a real GPU, else the CPU (a CPU
//!   Vulkan such as lavapipe is slower than SIMD). Batches too small to pay for the trip to
//!   the device (`--gpu-min-batch-kib`) stay on the CPU: small writes keep their latency,
//!   bulk writes, rebuilds and scrubs go to the GPU.
//!
//! What the CUDA engine may take of the GPU (streams, memory, time) is bounded by the
//! `--gpu-*` options, so a co-running AI job keeps its GPU.

use graid_cuda::{CudaEngine, Limits};
use graid_parity::{device, CpuEngine, Engine, Job, ParityError};
use graid_vulkan::VulkanEngine;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The engine a user asked for.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum EngineChoice {
    Auto,
    Cpu,
    Vulkan,
    Cuda,
}

/// What a GPU engine may use, and when `auto` uses it.
#[derive(clap::Args, Clone, Debug, PartialEq, Eq)]
pub struct GpuOptions {
    /// CUDA device (ordinal).
    #[arg(long, default_value_t = 0)]
    pub gpu_device: usize,
    /// CUDA streams, each with an equal share of `--gpu-memory-mib` (at the device's lowest
    /// priority).
    #[arg(long, default_value_t = 4)]
    pub gpu_streams: usize,
    /// Device memory the CUDA engine may use, MiB.
    #[arg(long, default_value_t = 256)]
    pub gpu_memory_mib: usize,
    /// A CUDA batch not done in this many milliseconds is computed by the CPU instead, and the
    /// GPU no longer used.
    #[arg(long, default_value_t = 10_000)]
    pub gpu_timeout_ms: u64,
    /// With `--engine auto`: a batch of fewer KiB of columns than this is computed by the CPU.
    #[arg(long, default_value_t = 1024)]
    pub gpu_min_batch_kib: usize,
}

impl Default for GpuOptions {
    fn default() -> Self {
        let limits = Limits::default();
        Self {
            gpu_device: limits.device,
            gpu_streams: limits.streams,
            gpu_memory_mib: limits.memory >> 20,
            gpu_timeout_ms: limits.timeout.as_millis() as u64,
            gpu_min_batch_kib: 1024,
        }
    }
}

impl GpuOptions {
    fn limits(&self) -> Limits {
        Limits {
            device: self.gpu_device,
            streams: self.gpu_streams,
            memory: self.gpu_memory_mib.saturating_mul(1 << 20),
            timeout: Duration::from_millis(self.gpu_timeout_ms),
        }
    }
}

/// Builds the engine for `choice` with `threads` CPU threads; an error names why (no CUDA
/// driver, no Vulkan device, ...).
pub fn build(
    choice: EngineChoice,
    threads: usize,
    gpu: &GpuOptions,
) -> Result<Box<dyn Engine>, String> {
    let cpu = CpuEngine::builder()
        .threads(threads)
        .build()
        .map_err(|e| format!("no CPU engine: {e}"))?;
    let min_batch = gpu.gpu_min_batch_kib.saturating_mul(1024);
    match choice {
        EngineChoice::Cpu => Ok(Box::new(cpu)),
        EngineChoice::Vulkan => match VulkanEngine::new() {
            Ok(engine) => Ok(Box::new(GpuFirst::new(engine, cpu))),
            Err(e) => Err(format!("no Vulkan engine: {e}")),
        },
        EngineChoice::Cuda => match CudaEngine::new(gpu.limits()) {
            Ok(engine) => Ok(Box::new(GpuFirst::new(engine, cpu))),
            Err(e) => Err(format!("no CUDA engine: {e}")),
        },
        EngineChoice::Auto => {
            if let Ok(engine) = CudaEngine::new(gpu.limits()) {
                return Ok(Box::new(GpuFirst::new(engine, cpu).min_batch(min_batch)));
            }
            match VulkanEngine::new() {
                Ok(engine) if engine.is_gpu() => {
                    Ok(Box::new(GpuFirst::new(engine, cpu).min_batch(min_batch)))
                }
                _ => Ok(Box::new(cpu)),
            }
        }
    }
}

/// A GPU engine (`G`) for what it does, the CPU for the rest and as its fallback.
pub struct GpuFirst<G> {
    gpu: G,
    cpu: CpuEngine,
    /// Bytes of columns a batch's GPU share needs to go to the GPU.
    min_batch: usize,
    /// Batches the GPU failed, which the CPU computed instead.
    gpu_failures: AtomicU64,
    /// Batches (shares of them) the GPU computed, and those the CPU did by the size policy.
    gpu_batches: AtomicU64,
    small_batches: AtomicU64,
}

impl<G: Engine> GpuFirst<G> {
    pub fn new(gpu: G, cpu: CpuEngine) -> Self {
        Self {
            gpu,
            cpu,
            min_batch: 0,
            gpu_failures: AtomicU64::new(0),
            gpu_batches: AtomicU64::new(0),
            small_batches: AtomicU64::new(0),
        }
    }

    /// Sends a batch to the GPU only if its GPU share has `bytes` of columns at least.
    pub fn min_batch(mut self, bytes: usize) -> Self {
        self.min_batch = bytes;
        self
    }

    /// Batches the GPU failed (and the CPU computed).
    pub fn gpu_failures(&self) -> u64 {
        self.gpu_failures.load(Ordering::Relaxed)
    }

    /// Batches the GPU computed, and batches left to the CPU as too small.
    pub fn gpu_and_small_batches(&self) -> (u64, u64) {
        (
            self.gpu_batches.load(Ordering::Relaxed),
            self.small_batches.load(Ordering::Relaxed),
        )
    }
}

/// A copy of the parity (P, then Q if any) of each read-modify-write among `jobs`, in order.
fn updated_parity(jobs: &[Job<'_>]) -> Vec<Vec<u8>> {
    jobs.iter()
        .filter_map(|job| match job {
            Job::Update(u) => Some([Some(&*u.p), u.q.as_deref()]),
            _ => None,
        })
        .flatten()
        .flatten()
        .map(<[u8]>::to_vec)
        .collect()
}

/// Puts back the parity `updated_parity` kept of the same `jobs`.
fn restore_parity(jobs: &mut [Job<'_>], kept: &[Vec<u8>]) {
    let columns = jobs
        .iter_mut()
        .filter_map(|job| match job {
            Job::Update(u) => Some([Some(&mut *u.p), u.q.as_deref_mut()]),
            _ => None,
        })
        .flatten()
        .flatten();
    for (column, before) in columns.zip(kept) {
        column.copy_from_slice(before);
    }
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
        jobs.sort_by_key(|job| device::bytes(job).is_none());
        let split = jobs
            .iter()
            .take_while(|job| device::bytes(job).is_some())
            .count();
        let (gpu_jobs, cpu_jobs) = jobs.split_at_mut(split);
        let bytes: usize = gpu_jobs.iter().filter_map(device::bytes).sum();
        if !gpu_jobs.is_empty() && bytes < self.min_batch {
            self.small_batches.fetch_add(1, Ordering::Relaxed);
            self.cpu.compute(gpu_jobs)?;
        } else if !gpu_jobs.is_empty() {
            // A read-modify-write updates its parity in place: a device that fails part way
            // may have written some of it, and the CPU redoing the job on that would apply
            // the change twice. So the parity it started from is kept to put back.
            let parity_before = updated_parity(gpu_jobs);
            match self.gpu.compute(gpu_jobs) {
                Ok(()) => {
                    self.gpu_batches.fetch_add(1, Ordering::Relaxed);
                }
                Err(e) => {
                    // The device is done with the columns (the engines drain it before they
                    // fail): the CPU does them all, from the parity they started with.
                    if self.gpu_failures.fetch_add(1, Ordering::Relaxed) == 0 {
                        eprintln!("graid-helper: {e}; the CPU computes the GPU's jobs");
                    }
                    restore_parity(gpu_jobs, &parity_before);
                    self.cpu.compute(gpu_jobs)?;
                }
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
