//! What the engine may take of a GPU, so that a co-running AI job keeps it: streams (each a
//! lane with its own device buffer), device memory, and the time a batch may take before the
//! engine gives up on the device.

use crate::CudaError;
use graid_parity::{CHUNK_ALIGN, MAX_MEMBERS};
use std::time::Duration;

/// The engine's bounds on the device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The device's ordinal.
    pub device: usize,
    /// Streams, each with `memory / streams` bytes of device memory: more overlap copies and
    /// kernels of more jobs.
    pub streams: usize,
    /// Device memory, bytes, all streams together.
    pub memory: usize,
    /// A batch not finished in this time fails (the caller computes it) and stops the engine.
    pub timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            device: 0,
            streams: 4,
            memory: 256 << 20,
            timeout: Duration::from_secs(10),
        }
    }
}

/// The most streams.
pub const MAX_STREAMS: usize = 16;
/// The least device memory per stream: one slice of 1 KiB of every column of the widest stripe.
pub const MIN_LANE_BYTES: usize = MAX_MEMBERS * 1024;

impl Limits {
    /// Checks the limits make sense together.
    pub fn validate(&self) -> Result<(), CudaError> {
        let bad = |why: String| Err(CudaError::Limits(why));
        if !(1..=MAX_STREAMS).contains(&self.streams) {
            return bad(format!(
                "streams must be 1 to {MAX_STREAMS}, not {}",
                self.streams
            ));
        }
        if self.memory / self.streams < MIN_LANE_BYTES {
            return bad(format!(
                "{} bytes of device memory for {} streams: each needs {MIN_LANE_BYTES} at least",
                self.memory, self.streams
            ));
        }
        if self.timeout.is_zero() {
            return bad("the timeout must be more than zero".into());
        }
        // Slices of columns stay whole u32 words and chunk-aligned offsets.
        debug_assert_eq!(MIN_LANE_BYTES % (MAX_MEMBERS * CHUNK_ALIGN), 0);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_bad_limits_say_why() {
        assert!(Limits::default().validate().is_ok());
        let with = |f: fn(&mut Limits)| {
            let mut l = Limits::default();
            f(&mut l);
            l.validate().unwrap_err().to_string()
        };
        assert!(with(|l| l.streams = 0).contains("streams must be 1 to 16"));
        assert!(with(|l| l.streams = 17).contains("not 17"));
        assert!(with(|l| l.memory = 64 << 10).contains("each needs 32768"));
        assert!(with(|l| l.timeout = Duration::ZERO).contains("timeout"));
    }
}
