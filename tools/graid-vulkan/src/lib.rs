//! graid's Vulkan parity engine: md's P (RAID 5) and P+Q (RAID 6) computed by a compute shader
//! (`shaders/parity.wgsl`, compiled to SPIR-V by naga at build time), behind
//! `graid_parity::Engine`.
//!
//! The Vulkan loader is opened at run time: without one, or without a device that computes,
//! [`VulkanEngine::new`] says so and nothing else changes. Any device works, Mesa's lavapipe
//! (CPU) included, which is how CI runs it.
//!
//! This first engine stages: a batch's columns are copied into one host-visible buffer, the
//! shader runs once per job over it, and P and Q are copied back. Importing the ring's pool
//! without a copy (`VK_EXT_external_memory_host`) and the other job kinds (read-modify-write,
//! recovery, which it refuses for now: the caller computes them) come next.

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
        for (index, job) in jobs.iter().enumerate() {
            job.validate(index)?;
            if !matches!(job, Job::Xor { .. } | Job::GenPq { .. }) {
                return Err(ParityError::JobUnsupported {
                    job: index,
                    engine: ENGINE,
                });
            }
        }
        let mut gpu = self.gpu.lock().map_err(|_| ParityError::Backend {
            engine: ENGINE,
            reason: "an earlier batch panicked".into(),
        })?;
        gpu.generate(jobs).map_err(|e| ParityError::Backend {
            engine: ENGINE,
            reason: e.to_string(),
        })
    }
}
