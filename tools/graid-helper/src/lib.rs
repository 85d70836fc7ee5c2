//! graid's parity helper: takes parity jobs off the module's ring (`Documentation/
//! ring-protocol.rst`), computes them with a `graid_parity` engine (CPU SIMD now, GPUs next)
//! and completes them.
//!
//! What exists: the ring's control area seen through atomics (`control`), the jobs checked
//! against the data pool and computed in batches (`exec`), the loop body (`serve`), and a
//! loopback of the whole protocol with a stand-in for the module (`loopback`), which the tests
//! and `graid-helper loopback` use. Attaching to the module's `/dev/graid-helper` comes with
//! the module's side of the ring.

#![deny(clippy::undocumented_unsafe_blocks)]

pub mod control;
pub mod exec;
pub mod loopback;
pub mod serve;
