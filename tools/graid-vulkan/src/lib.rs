//! graid's Vulkan parity engine: md's P (RAID 5) and P+Q (RAID 6), read-modify-write updates,
//! and the recovery of one or two lost columns of any role, computed by compute shaders
//! (`shaders/parity.wgsl`, `update.wgsl`, `recover.wgsl`, compiled to SPIR-V by naga at build
//! time), behind
//! `graid_parity::Engine`.
//!
//! The Vulkan loader is opened at run time: without one, or without a device that computes,
//! [`VulkanEngine::new`] says so and nothing else changes. Any device works, Mesa's lavapipe
//! (CPU) included, which is how CI runs it.
//!
//! Memory: the helper's pool is imported for the device (`share_memory`, with
//! `VK_EXT_external_memory_host` where the device has it), and a job whose columns lie in it
//! back to back is computed in place, without a copy. Any other job is staged: its columns
//! are copied into a host-visible buffer, and what the shader wrote copied back.

mod gpu;

use graid_parity::{Engine, Job, ParityError};
use std::sync::Mutex;

pub use gpu::VulkanError;

/// The engine's name in errors.
const ENGINE: &str = "vulkan";

/// Parity on a Vulkan device.
pub struct VulkanEngine {
    gpu: Mutex<gpu::Gpu>,
    name: String,
}

impl VulkanEngine {
    /// The engine on the first device that computes (a discrete GPU before an integrated one,
    /// before a CPU implementation such as lavapipe).
    pub fn new() -> Result<Self, VulkanError> {
        let gpu = gpu::Gpu::new()?;
        let name = format!("vulkan:{}", gpu.device_name());
        Ok(Self {
            gpu: Mutex::new(gpu),
            name,
        })
    }

    /// Whether the device is a GPU (discrete, integrated or virtual), not a CPU implementation
    /// such as lavapipe.
    pub fn is_gpu(&self) -> bool {
        self.gpu.lock().is_ok_and(|gpu| gpu.is_gpu())
    }

    /// Jobs computed in place in the shared region (no copy), and jobs staged, so far.
    pub fn jobs_in_place_and_staged(&self) -> (u64, u64) {
        self.gpu
            .lock()
            .map(|gpu| (gpu.shared_jobs, gpu.staged_jobs))
            .unwrap_or_default()
    }

    /// The device's name, as its driver gives it.
    pub fn device_name(&self) -> String {
        self.gpu
            .lock()
            .map(|gpu| gpu.device_name().to_owned())
            .unwrap_or_default()
    }
}

impl Engine for VulkanEngine {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn compute(&self, jobs: &mut [Job<'_>]) -> Result<(), ParityError> {
        graid_parity::device::check(jobs, ENGINE)?;
        let mut gpu = self.gpu.lock().map_err(|_| ParityError::Backend {
            engine: ENGINE,
            reason: "an earlier batch panicked".into(),
        })?;
        gpu.compute(jobs).map_err(|e| ParityError::Backend {
            engine: ENGINE,
            reason: e.to_string(),
        })
    }

    /// Imports the region for the device (`VK_EXT_external_memory_host`): jobs whose columns
    /// lie in it back to back are then computed in place. False, with the reason on stderr,
    /// where the device cannot: those jobs are staged.
    #[allow(unsafe_code)]
    unsafe fn share_memory(&self, region: Option<(*mut u8, usize)>) -> bool {
        let Ok(mut gpu) = self.gpu.lock() else {
            return false;
        };
        match gpu.share(region) {
            Ok(shared) => shared,
            Err(e) => {
                eprintln!("graid-vulkan: the pool is staged, not shared: {e}");
                false
            }
        }
    }
}
