//! graid's CUDA parity engine: md's P (RAID 5) and P+Q (RAID 6), read-modify-write updates,
//! and the recovery of one or two lost columns of any role, computed by CUDA kernels (`kernels/parity.cu`, compiled to
//! PTX ahead of time by `build/ptx.sh` and embedded), behind `graid_parity::Engine`.
//!
//! The driver is opened at run time (cudarc's dynamic loading): without one, or without a
//! device, [`CudaEngine::new`] says so ("no CUDA driver", "no CUDA device") and nothing else
//! changes, so graid builds and tests without CUDA.
//!
//! Memory: the helper's pool is registered with the driver (`share_memory`,
//! `cuMemHostRegister`), so a job in it is copied by DMA straight from the pool and its parity
//! straight back, with no copy by the CPU. Other jobs' memory the driver stages itself.
//! What the engine takes of the device is bounded ([`Limits`]): streams at the lowest priority,
//! device memory, and the time a batch may take.

mod gpu;
mod limits;
mod schedule;

use cudarc::driver::DriverError;
use graid_parity::{Engine, Job, ParityError};
use std::sync::Mutex;
use std::time::Duration;

pub use limits::{Limits, MAX_STREAMS, MIN_LANE_BYTES};

/// The engine's name in errors.
const ENGINE: &str = "cuda";

/// Why the CUDA engine cannot run or did not finish.
#[derive(Debug, thiserror::Error)]
pub enum CudaError {
    #[error("no CUDA driver (libcuda.so.1 not found)")]
    NoDriver,
    #[error("no CUDA device")]
    NoDevice,
    #[error("CUDA {what}: {source}")]
    Driver {
        what: &'static str,
        source: DriverError,
    },
    #[error("the embedded PTX holds a NUL byte")]
    Ptx,
    #[error("the device did not finish a batch in {0:?}")]
    Timeout(Duration),
    #[error("the CUDA engine stopped after an earlier failure: {0}")]
    Disabled(String),
    #[error("a job the kernels do not take")]
    Unsupported,
    #[error("an earlier batch panicked")]
    Poisoned,
    #[error("bad limits: {0}")]
    Limits(String),
}

/// Whether the CUDA driver library (`libcuda.so.1`) opens here.
pub fn driver_present() -> bool {
    // SAFETY: only tries to open the library, which has no other effect.
    unsafe { cudarc::driver::sys::is_culib_present() }
}

/// Parity on a CUDA device.
pub struct CudaEngine {
    gpu: Mutex<gpu::Gpu>,
    name: String,
}

// SAFETY: the CUDA handles inside (context, module, functions, streams, device memory) may be
// used from any thread once the context is bound to it, which every call into `Gpu` does
// first; the Mutex lets one thread at a time in.
unsafe impl Send for gpu::Gpu {}

impl CudaEngine {
    /// The engine on device `limits.device`, within `limits`.
    pub fn new(limits: Limits) -> Result<Self, CudaError> {
        let gpu = gpu::Gpu::new(limits)?;
        let name = format!("cuda:{}", gpu.device_name());
        Ok(Self {
            gpu: Mutex::new(gpu),
            name,
        })
    }

    /// Jobs copied straight from registered memory, and jobs the driver staged, so far.
    pub fn jobs_direct_and_staged(&self) -> (u64, u64) {
        self.gpu
            .lock()
            .map(|gpu| (gpu.direct_jobs, gpu.staged_jobs))
            .unwrap_or_default()
    }
}

impl Engine for CudaEngine {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn compute(&self, jobs: &mut [Job<'_>]) -> Result<(), ParityError> {
        graid_parity::device::check(jobs, ENGINE)?;
        let backend = |e: CudaError| ParityError::Backend {
            engine: ENGINE,
            reason: e.to_string(),
        };
        let mut gpu = self.gpu.lock().map_err(|_| backend(CudaError::Poisoned))?;
        gpu.compute(jobs).map_err(backend)
    }

    /// Registers the region with the driver (`cuMemHostRegister`): its jobs' DMA then needs no
    /// staging. False, with the reason on stderr, where the driver refuses.
    #[allow(unsafe_code)]
    unsafe fn share_memory(&self, region: Option<(*mut u8, usize)>) -> bool {
        let Ok(mut gpu) = self.gpu.lock() else {
            return false;
        };
        // SAFETY: the caller's promise (the region stays mapped until unshared), passed on.
        match unsafe { gpu.share(region) } {
            Ok(shared) => shared,
            Err(e) => {
                eprintln!("graid-cuda: the pool is staged by the driver, not registered: {e}");
                false
            }
        }
    }
}
