//! What the device does for a batch, as a list of operations on *lanes* (a stream and its
//! device buffer each): copies in, kernel launches, copies out. Pure logic, so the cutting of
//! jobs into slices, the merging of copies and the kernels' parameters are tested on the host
//! (`tests` below runs a schedule on an emulated device); `gpu.rs` hands it to CUDA.
//!
//! A job's columns go to the lane's buffer back to back, `n` words each, from offset 0; a job
//! larger than the buffer is cut into slices of every column (parity is bytewise, so slices
//! are independent). Jobs and slices go round-robin to the lanes, so one lane's copies overlap
//! another's kernel. Columns that lie back to back in host memory move in one copy.

use graid_parity::device::{self, Constants, Kernel};
use graid_parity::Job;

/// One column of a job as the device sees it.
pub(crate) struct Column {
    pub(crate) host: *const u8,
    /// The kernel reads it (copied in).
    pub(crate) read: bool,
    /// The kernel writes it (copied out).
    pub(crate) written: bool,
}

/// A job reduced to what the device needs: raw column addresses (the job's borrows end here,
/// so none is alive while the device writes), bytes per column, kernel and constants.
pub(crate) struct Work {
    pub(crate) columns: Vec<Column>,
    pub(crate) len: usize,
    pub(crate) kernel: Kernel,
    pub(crate) constants: Constants,
}

impl Work {
    /// `None` for a job the kernels do not take (`device::plan`).
    pub(crate) fn of(job: &mut Job<'_>) -> Option<Self> {
        let plan = device::plan(job)?;
        let len = plan.columns.first()?.len();
        let read: Vec<bool> = (0..plan.columns.len()).map(|s| plan.reads(s)).collect();
        let hosts: Vec<*const u8> = plan.columns.iter().map(|c| c.as_ptr()).collect();
        let (kernel, constants, written) = (plan.kernel, plan.constants, plan.written);
        let mut outputs = device::written_mut(job)
            .into_iter()
            .map(|c| c.as_mut_ptr().cast_const());
        let columns = hosts
            .into_iter()
            .zip(read.into_iter().zip(written))
            .map(|(host, (read, written))| {
                // A written column's address from its mutable borrow.
                let host = if written {
                    outputs.next().unwrap_or(host)
                } else {
                    host
                };
                Column {
                    host,
                    read,
                    written,
                }
            })
            .collect();
        Some(Self {
            columns,
            len,
            kernel,
            constants,
        })
    }
}

/// One operation on a lane.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Op {
    /// `bytes` from host address `host` to the lane's buffer at `offset`.
    CopyIn {
        lane: usize,
        host: *const u8,
        offset: usize,
        bytes: usize,
    },
    /// The kernel over the lane's buffer: `constants[1]` is the words per column of this
    /// launch; the rest as `graid_parity::device` says (`constants[0]` unused).
    Launch {
        lane: usize,
        kernel: Kernel,
        constants: Constants,
    },
    /// `bytes` from the lane's buffer at `offset` to host address `host`.
    CopyOut {
        lane: usize,
        offset: usize,
        host: *const u8,
        bytes: usize,
    },
}

/// The operations for `works` on `lanes` lanes of `lane_bytes` each (at least 4 bytes per
/// column of the widest job), and how many lanes took work.
pub(crate) fn schedule(works: &[Work], lanes: usize, lane_bytes: usize) -> (Vec<Op>, usize) {
    let mut ops = Vec::new();
    let mut next = 0;
    for work in works {
        let words = work.len / 4;
        let slice = (lane_bytes / (4 * work.columns.len())).clamp(1, words.max(1));
        let mut start = 0;
        while start < words {
            let n = slice.min(words - start);
            slice_ops(&mut ops, work, next % lanes, start, n);
            next += 1;
            start += n;
        }
    }
    (ops, next.min(lanes))
}

/// Words `[start, start + n)` of every column of `work` on `lane`: in, compute, out.
fn slice_ops(ops: &mut Vec<Op>, work: &Work, lane: usize, start: usize, n: usize) {
    let column_bytes = n * 4;
    let whole = column_bytes == work.len;
    let host = |slot: usize| work.columns[slot].host.wrapping_add(start * 4);
    for (first, count) in runs(&work.columns, work.len, whole, |c| c.read) {
        ops.push(Op::CopyIn {
            lane,
            host: host(first),
            offset: first * column_bytes,
            bytes: count * column_bytes,
        });
    }
    let mut constants = work.constants;
    constants[1] = n as u32;
    ops.push(Op::Launch {
        lane,
        kernel: work.kernel,
        constants,
    });
    for (first, count) in runs(&work.columns, work.len, whole, |c| c.written) {
        ops.push(Op::CopyOut {
            lane,
            offset: first * column_bytes,
            host: host(first),
            bytes: count * column_bytes,
        });
    }
}

/// Runs `(first, count)` of consecutive columns that `pick` selects and that lie back to back
/// in host memory (when `whole`: slices of columns never do).
fn runs(
    columns: &[Column],
    len: usize,
    whole: bool,
    pick: impl Fn(&Column) -> bool,
) -> Vec<(usize, usize)> {
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for (slot, column) in columns.iter().enumerate() {
        if !pick(column) {
            continue;
        }
        match runs.last_mut() {
            Some((first, count))
                if whole
                    && *first + *count == slot
                    && columns[slot - 1].host.wrapping_add(len) == column.host =>
            {
                *count += 1
            }
            _ => runs.push((slot, 1)),
        }
    }
    runs
}

#[cfg(test)]
mod tests;
