// SPDX-License-Identifier: GPL-2.0

//! The parity ring between `raid_gpu.ko` and `graid-helper`: the layout of the shared control
//! area, the job and completion entries, and the helper device's ioctls. `core`-only and shared
//! verbatim with the tools (`tools/graid-abi`, as `graid_abi::ring`), like `uapi.rs`.
//! `Documentation/ring-protocol.rst` describes the protocol; `engine/ring.rs` is its state
//! machine.
//!
//! Everything in shared memory is an offset or an index, never a pointer. The kernel writes the
//! K2H region (the helper maps it read-only) and reads only indices and completions from the
//! H2K region, each validated before use; it never reads back what it wrote to K2H.

use crate::uapi::{ior, iow, iowr};

/// Bumped on every incompatible change of anything in this file.
pub const RING_ABI_VERSION: u32 = 2;

/// `/dev/` name of the helper's device.
pub const HELPER_DEVICE_NAME: &str = "graid-helper";

/// [`RingHeader::magic`]: "GRRING01" little-endian.
pub const RING_MAGIC: u64 = u64::from_le_bytes(*b"GRRING01");

/// Submission queue entries (a power of two).
pub const SQ_ENTRIES: u32 = 4096;
/// Completion queue entries: twice the submissions, so the CQ is never full.
pub const CQ_ENTRIES: u32 = 2 * SQ_ENTRIES;

/// Cache line size the layout keeps writers apart by.
pub const CACHE_LINE: usize = 64;

/// Offsets (bytes from the start of the mmap) of the regions.
pub const K2H_OFFSET: u64 = 0;
/// The header, then the SQ.
pub const SQ_OFFSET: u64 = 4096;
/// K2H: header and SQ, page-aligned.
pub const K2H_BYTES: u64 = SQ_OFFSET + SQ_ENTRIES as u64 * SQE_BYTES as u64;
/// H2K, mapped read-write by the helper: its indices, then the CQ.
pub const H2K_OFFSET: u64 = K2H_BYTES;
pub const CQ_OFFSET: u64 = H2K_OFFSET + 4096;
pub const H2K_BYTES: u64 = 4096 + CQ_ENTRIES as u64 * CQE_BYTES as u64;
/// The whole control area.
pub const CONTROL_BYTES: u64 = K2H_BYTES + H2K_BYTES;

/// Features the kernel offers and the helper accepts ([`HelperAttach::features`]).
/// Jobs may carry several stripes (one job per batch, columns contiguous per stripe).
pub const RING_FEATURE_BATCH: u64 = 1;
/// The helper does [`JOB_OP_RECOVER`] (rebuild, scrub and degraded reads may go to it).
pub const RING_FEATURE_RECOVER: u64 = 2;
/// Every feature this ABI defines.
pub const RING_FEATURES: u64 = RING_FEATURE_BATCH | RING_FEATURE_RECOVER;

/// The start of K2H: what the helper checks before it trusts anything else.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RingHeader {
    pub magic: u64,
    pub abi_version: u32,
    pub sq_entries: u32,
    pub cq_entries: u32,
    pub sqe_bytes: u32,
    pub cqe_bytes: u32,
    pub reserved: u32,
    /// `RING_FEATURE_*` in force.
    pub features: u64,
    /// Bytes of the data pool the helper registered (0 until it did).
    pub pool_bytes: u64,
}

/// The indices, each a `u32` on a cache line of its own (offsets from the mmap's start).
/// Free-running: SQ entries `[sq_head, sq_tail)` are published jobs not yet taken, CQ entries
/// `[cq_head, cq_tail)` completions not yet consumed; entry `i` is at `i % entries`.
///
/// K2H, written by the kernel: the SQ tail it published up to.
pub const SQ_TAIL_OFFSET: u64 = K2H_OFFSET + CACHE_LINE as u64;
/// K2H: the CQ head: completions consumed.
pub const CQ_HEAD_OFFSET: u64 = K2H_OFFSET + 2 * CACHE_LINE as u64;
/// K2H: `KERNEL_*` flags.
pub const KERNEL_FLAGS_OFFSET: u64 = K2H_OFFSET + 3 * CACHE_LINE as u64;
/// H2K, written by the helper: the SQ head: jobs taken.
pub const SQ_HEAD_OFFSET: u64 = H2K_OFFSET;
/// H2K: the CQ tail: completions published.
pub const CQ_TAIL_OFFSET: u64 = H2K_OFFSET + CACHE_LINE as u64;
/// H2K: `HELPER_*` flags.
pub const HELPER_FLAGS_OFFSET: u64 = H2K_OFFSET + 2 * CACHE_LINE as u64;
/// H2K: a `u64` the helper bumps while it lives.
pub const HEARTBEAT_OFFSET: u64 = H2K_OFFSET + 3 * CACHE_LINE as u64;

/// Kernel flag: it stopped polling the CQ; a helper that completes must `ENTER`.
pub const KERNEL_NEED_WAKEUP: u32 = 1;
/// Helper flag: it sleeps; the kernel that publishes must wake it (poll).
pub const HELPER_NEED_WAKEUP: u32 = 1;

/// What a job computes ([`Sqe::op`]).
pub const JOB_OP_XOR: u8 = 1;
/// P and Q of the data columns.
pub const JOB_OP_PQ: u8 = 2;
/// Check: P (and Q) of the data compared with the stored ones; the result says whether equal.
/// Reserved: the kernel does not send it (a scrub compares in the kernel).
pub const JOB_OP_CHECK: u8 = 3;
/// Rebuild each stripe's lost columns (at most `parity_columns`, any of data, P and Q) from the
/// others. The *lost table* follows the column table: two bytes per stripe, the syndrome slots
/// lost (data `0..data_columns`, P = `data_columns`, Q = `data_columns + 1`), [`NO_SLOT`] for
/// none. Only with [`RING_FEATURE_RECOVER`].
pub const JOB_OP_RECOVER: u8 = 4;
/// A lost-table entry naming no column.
pub const NO_SLOT: u8 = u8::MAX;

/// A job, written by the kernel into the SQ. 64 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sqe {
    /// Slot in the kernel's job table, and its generation: echoed in the completion.
    pub job: u32,
    pub generation: u32,
    /// One of `JOB_OP_*`.
    pub op: u8,
    /// Data columns per stripe (P and Q follow them in `columns`).
    pub data_columns: u8,
    /// Parity columns per stripe: 1 (RAID 5) or 2 (RAID 6). XOR and PQ imply it (an ABI 2
    /// kernel without [`RING_FEATURE_RECOVER`] wrote 0xff here); RECOVER needs it.
    pub parity_columns: u8,
    pub reserved0: u8,
    /// Stripes in the job.
    pub stripes: u32,
    /// Bytes of each column (a multiple of 512).
    pub column_bytes: u32,
    pub reserved: u32,
    /// Offset in the data pool of the job's column table: `stripes * (data_columns +
    /// parity_columns)` u64 pool offsets, stripe by stripe, each column's data at that offset
    /// (for RECOVER, the lost table right after it).
    pub columns_offset: u64,
    /// Echoed back untouched (the kernel's own cookie; never trusted).
    pub tag: u64,
    pub reserved2: [u64; 3],
}

/// [`Cqe::status`]: done as asked.
pub const JOB_STATUS_OK: u32 = 0;
/// CHECK: the parity differs.
pub const JOB_STATUS_MISMATCH: u32 = 1;
/// The helper could not do it: the kernel computes it.
pub const JOB_STATUS_FAILED: u32 = 2;

/// A completion, written by the helper into the CQ. 16 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cqe {
    pub job: u32,
    pub generation: u32,
    pub status: u32,
    pub reserved: u32,
}

/// Bytes of a [`Sqe`] and a [`Cqe`].
pub const SQE_BYTES: usize = 64;
pub const CQE_BYTES: usize = 16;

/// Argument of [`HELPER_IOC_ATTACH`]: the helper says which ABI it speaks and which features it
/// takes; the kernel answers with the ones in force and the control area's size.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HelperAttach {
    /// In: the helper's [`RING_ABI_VERSION`]; `EPROTO` if it differs.
    pub abi_version: u32,
    pub reserved: u32,
    /// In: features the helper takes; out: those in force (the intersection).
    pub features: u64,
    /// Out: bytes to mmap at offset 0.
    pub control_bytes: u64,
    /// In: the helper's engine (`cpu-avx2`, `cuda:0`, ...), NUL-padded: shown by
    /// `graidctl detail`, never interpreted.
    pub engine: [u8; HELPER_ENGINE_LEN],
}

/// Bytes of an engine name.
pub const HELPER_ENGINE_LEN: usize = 32;

/// Argument of [`HELPER_IOC_REGISTER_POOL`]: private anonymous memory the helper donates as
/// the data pool (the kernel pins it once, for as long as the helper stays attached): a
/// multiple of [`POOL_UNIT_BYTES`] from [`POOL_MIN_BYTES`] to [`POOL_MAX_BYTES`], page-aligned.
/// The kernel uses one [`POOL_UNIT_BYTES`] area per job in flight.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HelperPool {
    pub address: u64,
    pub bytes: u64,
}

/// The pool's granule: one job's area (`engine/offload.rs`).
pub const POOL_UNIT_BYTES: u64 = 2 << 20;
/// The smallest pool: two jobs in flight.
pub const POOL_MIN_BYTES: u64 = 2 * POOL_UNIT_BYTES;
/// The largest pool.
pub const POOL_MAX_BYTES: u64 = 1 << 30;

/// Argument of [`HELPER_IOC_ENTER`]: the helper published completions up to the CQ tail it
/// wrote; with `HELPER_ENTER_WAIT` it sleeps until jobs are published.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HelperEnter {
    pub flags: u32,
    /// Out: jobs published and not yet taken.
    pub pending: u32,
}

/// [`HelperEnter::flags`]: wait for jobs.
pub const HELPER_ENTER_WAIT: u32 = 1;

/// The helper ioctls' type byte.
pub const HELPER_IOCTL_TYPE: u32 = 0xBC;

pub const HELPER_IOC_ATTACH: u32 = helper_ioc(iowr::<HelperAttach>(0x00));
pub const HELPER_IOC_REGISTER_POOL: u32 = helper_ioc(iow::<HelperPool>(0x01));
pub const HELPER_IOC_ENTER: u32 = helper_ioc(iowr::<HelperEnter>(0x02));
/// Detaches: every job not completed is taken back by the kernel (also what closing does).
pub const HELPER_IOC_DETACH: u32 = helper_ioc(ior::<u32>(0x03));

/// `code` (a control-device ioctl number) with the helper's type byte instead.
const fn helper_ioc(code: u32) -> u32 {
    (code & !(0xff << 8)) | (HELPER_IOCTL_TYPE << 8)
}

/// [`HelperStatus::state`]: no helper attached.
pub const HELPER_STATE_NONE: u32 = 0;
/// Attached and trusted: jobs go to it.
pub const HELPER_STATE_HEALTHY: u32 = 1;
/// It missed a deadline: one job at a time until it completes one on time.
pub const HELPER_STATE_DEGRADED: u32 = 2;
/// Attached, but no pool registered yet: no jobs.
pub const HELPER_STATE_NO_POOL: u32 = 3;

/// Fallback reasons counted in [`HelperStatus::fallbacks`], in order (`engine/offload.rs`).
pub const HELPER_FALLBACK_NAMES: [&str; HELPER_FALLBACKS] = [
    "no-helper",
    "small",
    "op",
    "too-big",
    "busy",
    "helper-failed",
    "expired",
    "detached",
    "slower",
    "wrong",
];
pub const HELPER_FALLBACKS: usize = 10;

/// Answer of [`GRAID_IOC_HELPER_STATUS`] (on the control device, `/dev/graid-control`): the
/// helper and the offload counters since the module loaded.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HelperStatus {
    /// `HELPER_STATE_*`.
    pub state: u32,
    /// The attached helper's process id (0: none).
    pub pid: u32,
    /// Its engine, as it named it at ATTACH.
    pub engine: [u8; HELPER_ENGINE_LEN],
    /// Bytes of the registered pool, job slots (areas) in it, jobs out now.
    pub pool_bytes: u64,
    pub slots: u32,
    pub queued: u32,
    /// Helpers attached since load.
    pub attaches: u64,
    /// Jobs sent to the helper, and their data bytes.
    pub jobs: u64,
    pub bytes: u64,
    /// Jobs the helper completed (in time, status ok).
    pub completed: u64,
    /// Completion batches reaped (ENTERs that consumed at least one completion).
    pub batches: u64,
    /// Submission to completion, summed and the longest, in nanoseconds.
    pub latency_total_ns: u64,
    pub latency_max_ns: u64,
    /// Helpers detached for breaking the protocol.
    pub protocol_errors: u64,
    /// Of the jobs sent, those of the rebuild and the scrub (their worker waits for them), and
    /// the recoveries ([`JOB_OP_RECOVER`]).
    pub background_jobs: u64,
    pub recover_jobs: u64,
    /// Completions the kernel recomputed and compared (`engine::offload::verify_due`).
    pub verified_jobs: u64,
    /// Parity jobs computed in the kernel, by reason (`HELPER_FALLBACK_NAMES`).
    pub fallbacks: [u64; HELPER_FALLBACKS],
}

/// The control device's ioctl for [`HelperStatus`].
pub const GRAID_IOC_HELPER_STATUS: u32 = crate::uapi::ior::<HelperStatus>(0x09);
