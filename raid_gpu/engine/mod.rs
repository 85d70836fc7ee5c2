// SPDX-License-Identifier: GPL-2.0

//! The RAID engine: pure, `core`-only logic shared by the kernel module and the host tools.
//!
//! Everything below this module is compiled twice: into `raid_gpu.ko` and, through
//! `tools/graid-engine`, into host crates where it is unit-, property- and stress-tested. It must
//! therefore stay free of kernel, `std` and `alloc` types, never panic on any input, use no
//! floating point and no `unsafe`. Callers own all memory and pass it in; the one thing the
//! engine shares across CPUs, its counters and flags, are `core` atomics. What it needs from
//! its home (sending member I/O, ending requests, writing superblocks) goes through
//! [`platform::Platform`].

#[macro_use]
mod code_enum;

pub mod admin;
pub mod array;
pub mod assembly;
pub mod bitmap;
pub mod crc32c;
pub mod durable;
pub mod geometry;
pub mod geometry_cell;
pub mod layout;
pub mod log_replay;
pub mod log_write;
pub mod members;
pub mod metadata;
pub mod offload;
pub mod parity;
pub mod platform;
pub mod ppl;
pub mod raid_devices;
pub mod rate;
pub mod rebuild;
pub mod replace;
pub mod request;
pub mod reshape;
mod reshape_move;
pub mod reshape_route;
pub mod reshape_run;
pub mod resize;
pub mod ring;
pub mod safe_mode;
pub mod scrub;
pub mod spares;
pub mod stripe;
pub mod stripe_hold;
pub mod superblock;
pub mod suspect;
mod wait_list;
pub mod worker;
pub mod write_intent;
