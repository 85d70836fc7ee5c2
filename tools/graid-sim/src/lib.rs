//! graid's array engine in a host home, for stress tests and native benchmarks.
//!
//! The ztest idea from the design: [`host::Host`] is a [`Platform`] made of threads and in-memory
//! members (one tag per sector stands for its contents) around the kernel module's own
//! `raid_gpu/engine/array.rs`; [`stress::run`] drives it with random concurrent I/O and member
//! faults and checks every result against a model. The tests live in `tests/`; see
//! `Documentation/engine.rst`.
//!
//! [`Platform`]: graid_engine::platform::Platform

pub mod crash;
pub mod host;
pub mod stress;
