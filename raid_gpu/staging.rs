// SPDX-License-Identifier: GPL-2.0

//! Copies between a stripe buffer (a request's, or the rebuild's) and a job's area of the
//! helper's pool, as `engine/offload.rs` lays it out: the columns the helper reads in (with the
//! column table, and a recovery's lost table), the columns it computed back out once its
//! completion is believed.

use crate::engine::offload::{lost_slots, slot_member, Staging};
use crate::engine::parity::ParityJob;
use crate::kernel_ext::pin::PinnedPages;
use crate::stripe_io::{self, StripeBuffer};
use kernel::prelude::*;

/// Each stripe piece of `job`: its index, roles, and byte range `[at, at + len)` of the columns.
fn pieces(job: &ParityJob) -> impl Iterator<Item = (u32, crate::engine::layout::StripeMap, usize, usize)> {
    (0u32..).zip(job.stripes()).map(|(t, (map, from, to))| {
        let at = usize::try_from(from).unwrap_or(usize::MAX).saturating_mul(512);
        let len = usize::try_from(to.saturating_sub(from)).unwrap_or(0).saturating_mul(512);
        (t, map, at, len)
    })
}

fn offset(area: usize, relative: u64) -> Result<usize> {
    area.checked_add(usize::try_from(relative).map_err(|_| EINVAL)?)
        .ok_or(EINVAL)
}

/// Writes `job`'s column table (and lost table) and the columns the helper reads into the area
/// at byte `area` of `pool` (padding each short piece with zeros), and zeroes the columns it
/// writes: a helper that answers OK without computing leaves zeros, not an earlier job's
/// bytes, which a check of its result (sampled) then finds wrong. `EINVAL` if a column is not
/// in the buffer or the area is not in the pool.
pub(crate) fn stage_in(
    buf: &mut StripeBuffer,
    job: &ParityJob,
    staging: &Staging,
    pool: &PinnedPages,
    area: usize,
) -> Result {
    let width = staging.data + staging.parity;
    for (t, map, at, len) in pieces(job) {
        if let Some(lost) = staging.lost {
            let slots = lost_slots(&map, lost).ok_or(EINVAL)?;
            let entry = staging.lost_table_offset() + u64::from(t) * 2;
            // SAFETY: `slots` is a local array of 2 bytes.
            unsafe { pool.write(offset(area, entry)?, slots.as_ptr(), slots.len())? };
        }
        for slot in 0..width {
            let column = offset(area, staging.column_offset(t, slot))?;
            let entry = u64::from(t) * u64::from(width) + u64::from(slot);
            let bytes = u64::try_from(column).map_err(|_| EINVAL)?.to_le_bytes();
            // SAFETY: `bytes` is a local array of 8 bytes.
            unsafe { pool.write(offset(area, entry * 8)?, bytes.as_ptr(), bytes.len())? };
            let column_bytes = usize::try_from(staging.column_bytes).map_err(|_| EINVAL)?;
            if !staging.copies(&map, slot).0 {
                pool.zero(column, column_bytes)?;
                continue;
            }
            let member = slot_member(&map, slot).ok_or(EINVAL)?;
            let src = buf.at(member, at, len).ok_or(EINVAL)?;
            // SAFETY: `src` is `len` bytes of the buffer's column (`at` checked them).
            unsafe { pool.write(column, src, len)? };
            if len < column_bytes {
                pool.zero(column + len, column_bytes - len)?;
            }
        }
    }
    Ok(())
}

/// Copies the columns the helper computed for `job` (parity, or what a recovery rebuilt) from
/// the area at byte `area` of `pool` into the buffer.
pub(crate) fn stage_out(
    buf: &mut StripeBuffer,
    job: &ParityJob,
    staging: &Staging,
    pool: &PinnedPages,
    area: usize,
) -> Result {
    for (t, map, at, len) in pieces(job) {
        for slot in 0..staging.data + staging.parity {
            if !staging.copies(&map, slot).1 {
                continue;
            }
            let column = offset(area, staging.column_offset(t, slot))?;
            let member = slot_member(&map, slot).ok_or(EINVAL)?;
            let dst = buf.at(member, at, len).ok_or(EINVAL)?;
            // SAFETY: `dst` is `len` bytes of the buffer's column (`at` checked them).
            unsafe { pool.read(column, dst, len)? };
        }
    }
    Ok(())
}

/// Computes `job` on `buf` in the kernel and compares the result with what the helper wrote
/// into the area at byte `area` of `pool` (its claim of the same job): `Ok(true)` if they
/// agree. Either way `buf` then holds the kernel's result. A recovery compares only the data it
/// rebuilt (the kernel's recovery need not regenerate a lost P or Q beside lost data; the
/// rebuild generates them next). `EINVAL` if the kernel cannot compute the job.
pub(crate) fn verify(
    buf: &mut StripeBuffer,
    job: &ParityJob,
    staging: &Staging,
    pool: &PinnedPages,
    area: usize,
) -> Result<bool> {
    if !stripe_io::compute(buf, job) {
        return Err(EINVAL);
    }
    for (t, map, at, len) in pieces(job) {
        for slot in 0..staging.data + staging.parity {
            let rebuilt_parity = staging.lost.is_some() && slot >= staging.data;
            if !staging.copies(&map, slot).1 || rebuilt_parity {
                continue;
            }
            let column = offset(area, staging.column_offset(t, slot))?;
            let member = slot_member(&map, slot).ok_or(EINVAL)?;
            let ours = buf.at(member, at, len).ok_or(EINVAL)?;
            // SAFETY: `ours` is `len` bytes of the buffer's column (`at` checked them).
            if !unsafe { pool.same(column, ours, len)? } {
                return Ok(false);
            }
        }
    }
    Ok(true)
}
