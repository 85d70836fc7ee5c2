//! graid's parity helper: takes parity jobs off the module's ring (`Documentation/
//! ring-protocol.rst`), computes them with a `graid_parity` engine (CPU SIMD, or Vulkan with
//! the CPU as its fallback: `engines`) and completes them.
//!
//! The ring's control area seen through atomics (`control`), the jobs checked against the data
//! pool and computed in batches (`exec`), the loop body (`serve`), the helper attached to the
//! module's `/dev/graid-helper` (`device`: `graid-helper run`), and a loopback of the whole
//! protocol with a stand-in for the module (`loopback`), which the tests and
//! `graid-helper loopback` use.

#![deny(clippy::undocumented_unsafe_blocks)]

pub mod control;
pub mod device;
pub mod engines;
pub mod exec;
pub mod loopback;
pub mod memory_probe;
pub mod route;
pub mod serve;
