//! Which engine computes a batch:
//! - `--engine cpu`: SIMD (`graid_parity::CpuEngine`);
//! - `cuda`, `vulkan`: that GPU for generations, updates and recoveries, the CPU for any job
//!   it does not take, and for its whole share again if the device fails or times out, so no
//!   job is lost to a GPU error or hang;
//! - `auto`: CUDA if there is an NVIDIA GPU, else Vulkan on a real GPU, else the CPU (a CPU
//!   Vulkan such as lavapipe is slower than SIMD). Each batch is routed by size and load
//!   (`route`): batches too small to pay for the trip to the device (`--gpu-min-batch-kib`)
//!   stay on the CPU, so small writes keep their latency; bulk writes, rebuilds and scrubs go
//!   to the GPU, unless a co-running job has made it slower than the CPU.
//!
//! What the CUDA engine may take of the GPU (streams, memory, time) is bounded by the
//! `--gpu-*` options, so a co-running AI job keeps its GPU.

use crate::route::{Route, Router};
use graid_cuda::{CudaEngine, Limits};
use graid_parity::{device, CpuEngine, Engine, Job, ParityError};
use graid_vulkan::VulkanEngine;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

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
    /// With `--engine auto`: a batch of fewer KiB of columns than this is computed by the CPU
    /// (larger ones too while the GPU is slower than the CPU).
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
                return Ok(Box::new(GpuFirst::new(engine, cpu).auto(min_batch)));
            }
            match VulkanEngine::new() {
                Ok(engine) if engine.is_gpu() => {
                    Ok(Box::new(GpuFirst::new(engine, cpu).auto(min_batch)))
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
    /// Where each batch's GPU share goes.
    router: Mutex<Router>,
    /// Batches the GPU failed, which the CPU computed instead.
    gpu_failures: AtomicU64,
    /// Batches (shares of them) by where they went.
    counts: Mutex<RouteCounts>,
}

/// How many batches' GPU shares went each way.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RouteCounts {
    /// To the GPU, probes of a loaded GPU included.
    pub gpu: u64,
    /// To the CPU as smaller than the floor.
    pub small: u64,
    /// To the CPU while the GPU was the slower side, probes of the CPU included.
    pub loaded: u64,
}

impl<G: Engine> GpuFirst<G> {
    pub fn new(gpu: G, cpu: CpuEngine) -> Self {
        Self {
            gpu,
            cpu,
            router: Mutex::new(Router::new(0, false)),
            gpu_failures: AtomicU64::new(0),
            counts: Mutex::default(),
        }
    }

    /// Sends a batch to the GPU only if its GPU share has `bytes` of columns at least.
    pub fn min_batch(self, bytes: usize) -> Self {
        self.router(Router::new(bytes, false))
    }

    /// `--engine auto`: by size (`min_bytes`) and by load.
    pub fn auto(self, min_bytes: usize) -> Self {
        self.router(Router::new(min_bytes, true))
    }

    fn router(mut self, router: Router) -> Self {
        self.router = Mutex::new(router);
        self
    }

    /// Batches the GPU failed (and the CPU computed).
    pub fn gpu_failures(&self) -> u64 {
        self.gpu_failures.load(Ordering::Relaxed)
    }

    /// Where the batches went.
    pub fn route_counts(&self) -> RouteCounts {
        *lock(&self.counts)
    }

    fn count(&self, route: Route) {
        let mut counts = lock(&self.counts);
        match route {
            Route::Gpu | Route::GpuProbe => counts.gpu += 1,
            Route::Small => counts.small += 1,
            Route::Loaded | Route::CpuProbe => counts.loaded += 1,
        }
    }

    /// The GPU's share of a batch on the CPU, timed for the router if it was routed there by
    /// load (a redo after a GPU failure is not).
    fn on_cpu(&self, route: Route, jobs: &mut [Job<'_>], bytes: usize) -> Result<(), ParityError> {
        let start = Instant::now();
        self.cpu.compute(jobs)?;
        lock(&self.router).took(route, bytes, start.elapsed());
        Ok(())
    }
}

/// The guarded value, also after a panic elsewhere (counters and rates stay usable).
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
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
        let route = lock(&self.router).route(bytes, Instant::now());
        if !gpu_jobs.is_empty() {
            self.count(route);
        }
        if !gpu_jobs.is_empty() && !matches!(route, Route::Gpu | Route::GpuProbe) {
            self.on_cpu(route, gpu_jobs, bytes)?;
        } else if !gpu_jobs.is_empty() {
            // A read-modify-write updates its parity in place: a device that fails part way
            // may have written some of it, and the CPU redoing the job on that would apply
            // the change twice. So the parity it started from is kept to put back.
            let parity_before = updated_parity(gpu_jobs);
            let start = Instant::now();
            match self.gpu.compute(gpu_jobs) {
                Ok(()) => {
                    lock(&self.router).took(route, bytes, start.elapsed());
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
