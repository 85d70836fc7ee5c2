//! graid's parity engine: RAID-5 XOR and RAID-6 P+Q parity, read-modify-write parity updates and
//! recovery of one or two lost chunks, computed in batches of stripes.
//!
//! The field and layout are Linux md's (`lib/raid6`): GF(2^8) with polynomial 0x11d,
//! P = ⊕ D_i, Q = Σ g^i · D_i with g = 2 and D_0 the first data chunk, so parity written by graid
//! is parity md would write.
//!
//! ```
//! use graid_parity::{AlignedBuf, CpuEngine, Engine, Job};
//!
//! let data: Vec<AlignedBuf> = (0..4u8).map(|i| AlignedBuf::from_slice(&[i; 4096])).collect();
//! let (mut p, mut q) = (AlignedBuf::zeroed(4096), AlignedBuf::zeroed(4096));
//! let engine = CpuEngine::new()?;
//! engine.compute(&mut [Job::GenPq {
//!     data: data.iter().map(|d| &d[..]).collect(),
//!     p: &mut p,
//!     q: &mut q,
//! }])?;
//! assert_eq!(p[0], 0 ^ 1 ^ 2 ^ 3);
//! # Ok::<(), graid_parity::ParityError>(())
//! ```
#![deny(unsafe_code)]
#![deny(clippy::undocumented_unsafe_blocks)]

mod batch;
mod buffer;
#[cfg(feature = "conformance")]
pub mod conformance;
pub mod device;
mod dispatch;
mod engine;
mod error;
pub mod gf;
mod job;
mod plan;
mod reference;
mod simd;

pub use buffer::AlignedBuf;
pub use dispatch::{Level, LEVEL_ENV};
pub use engine::{CpuEngine, CpuEngineBuilder, Engine, ReferenceEngine};
pub use error::{ParityError, Role};
pub use job::{
    Change, Chunk, Job, Recover, Update, CHUNK_ALIGN, MAX_CHUNK_BYTES, MAX_MEMBERS,
    MIN_RAID5_MEMBERS, MIN_RAID6_MEMBERS,
};
