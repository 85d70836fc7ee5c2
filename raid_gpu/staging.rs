// SPDX-License-Identifier: GPL-2.0

//! Copies between a request's stripe buffer and a job's area of the helper's pool, as
//! `engine/offload.rs` lays it out: the data columns in (with the column table), the parity
//! columns back out once the helper's completion is believed.

use crate::engine::offload::{slot_member, Staging};
use crate::engine::parity::ParityJob;
use crate::kernel_ext::pin::PinnedPages;
use crate::stripe_io::StripeBuffer;
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

/// Writes `job`'s column table and data columns into the area at byte `area` of `pool`
/// (padding each short piece with zeros). `EINVAL` if a column is not in the buffer or the
/// area is not in the pool.
pub(crate) fn stage_in(
    buf: &mut StripeBuffer,
    job: &ParityJob,
    staging: &Staging,
    pool: &PinnedPages,
    area: usize,
) -> Result {
    let width = staging.data + staging.parity;
    for (t, map, at, len) in pieces(job) {
        for slot in 0..width {
            let column = offset(area, staging.column_offset(t, slot))?;
            let entry = u64::from(t) * u64::from(width) + u64::from(slot);
            let bytes = u64::try_from(column).map_err(|_| EINVAL)?.to_le_bytes();
            // SAFETY: `bytes` is a local array of 8 bytes.
            unsafe { pool.write(offset(area, entry * 8)?, bytes.as_ptr(), bytes.len())? };
            if slot >= staging.data {
                continue;
            }
            let member = slot_member(&map, slot).ok_or(EINVAL)?;
            let src = buf.at(member, at, len).ok_or(EINVAL)?;
            // SAFETY: `src` is `len` bytes of the buffer's column (`at` checked them).
            unsafe { pool.write(column, src, len)? };
            let column_bytes = usize::try_from(staging.column_bytes).map_err(|_| EINVAL)?;
            if len < column_bytes {
                pool.zero(column + len, column_bytes - len)?;
            }
        }
    }
    Ok(())
}

/// Copies `job`'s parity columns from the area at byte `area` of `pool` into the buffer.
pub(crate) fn stage_out(
    buf: &mut StripeBuffer,
    job: &ParityJob,
    staging: &Staging,
    pool: &PinnedPages,
    area: usize,
) -> Result {
    for (t, map, at, len) in pieces(job) {
        for slot in staging.data..staging.data + staging.parity {
            let column = offset(area, staging.column_offset(t, slot))?;
            let member = slot_member(&map, slot).ok_or(EINVAL)?;
            let dst = buf.at(member, at, len).ok_or(EINVAL)?;
            // SAFETY: `dst` is `len` bytes of the buffer's column (`at` checked them).
            unsafe { pool.read(column, dst, len)? };
        }
    }
    Ok(())
}
