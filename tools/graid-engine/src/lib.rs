//! graid's RAID engine for host tools and tests.
//!
//! The code is the kernel module's own `raid_gpu/engine/`, included verbatim, so the geometry
//! and the on-disk format the tools see are exactly the module's. It is `core`-only; this crate
//! adds nothing but tests.

#![no_std]

#[path = "../../../raid_gpu/engine/mod.rs"]
mod engine;

pub use engine::*;
