//! Turning jobs from the SQ into parity work on the data pool, and computing a batch of them at
//! once with a `graid_parity::Engine` (its worker threads split the batch).
//!
//! The kernel is trusted, but a job that names memory outside the pool, misaligned or
//! overlapping memory (within the job or with another job of the batch), or an op this helper
//! does not do, is answered `JOB_STATUS_FAILED` (the kernel then computes it), never acted on.

use graid_abi::ring::{
    Sqe, JOB_OP_PQ, JOB_OP_RECOVER, JOB_OP_XOR, JOB_STATUS_FAILED, JOB_STATUS_OK, NO_SLOT,
};
use graid_parity::{Chunk, Engine, Job, Recover, CHUNK_ALIGN, MAX_CHUNK_BYTES, MAX_MEMBERS};

/// Most stripes one job may carry.
pub const MAX_STRIPES_PER_JOB: u32 = 4096;

/// The data pool: memory shared with the kernel, in which jobs name columns by offset.
pub struct Pool {
    base: *mut u8,
    len: usize,
}

// SAFETY: the pool is plain memory; who may touch which bytes when is the protocol's (a job's
// columns belong to the helper from the SQ entry's publication to its completion's).
unsafe impl Send for Pool {}
// SAFETY: as above.
unsafe impl Sync for Pool {}

/// A byte range of the pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Span {
    start: usize,
    len: usize,
}

/// A job checked against the pool: its columns, stripe by stripe (data, then P, then Q).
struct Checked {
    op: u8,
    data: usize,
    parity: usize,
    column_bytes: usize,
    columns: Vec<Span>,
    /// RECOVER: each stripe's lost slots (none for a generation).
    lost: Vec<[u8; 2]>,
}

impl Pool {
    /// The pool at `base`, `len` bytes.
    ///
    /// # Safety
    ///
    /// `base..base + len` is valid memory for the pool's lifetime, which nothing else writes
    /// while a job using it is being executed (the protocol's ownership rule).
    pub unsafe fn new(base: *mut u8, len: usize) -> Self {
        Self { base, len }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The u64 at `offset`, if it lies in the pool (the column table).
    fn read_u64(&self, offset: usize) -> Option<u64> {
        let end = offset.checked_add(8)?;
        if end > self.len || offset % 8 != 0 {
            return None;
        }
        let mut bytes = [0u8; 8];
        // SAFETY: in bounds (checked); a plain copy of pool bytes the kernel wrote before it
        // published the job.
        unsafe { std::ptr::copy_nonoverlapping(self.base.add(offset), bytes.as_mut_ptr(), 8) };
        Some(u64::from_le_bytes(bytes))
    }

    /// The two bytes at `offset`, if they lie in the pool (a lost-table entry).
    fn read_pair(&self, offset: usize) -> Option<[u8; 2]> {
        if offset.checked_add(2)? > self.len {
            return None;
        }
        let mut pair = [0u8; 2];
        // SAFETY: in bounds (checked); a plain copy, as in `read_u64`.
        unsafe { std::ptr::copy_nonoverlapping(self.base.add(offset), pair.as_mut_ptr(), 2) };
        Some(pair)
    }

    /// Checks `sqe` and finds its columns, or `None` if it is not a job this helper does on
    /// this pool.
    fn check(&self, sqe: &Sqe) -> Option<Checked> {
        let parity = match sqe.op {
            JOB_OP_XOR => 1,
            JOB_OP_PQ => 2,
            JOB_OP_RECOVER if matches!(sqe.parity_columns, 1 | 2) => {
                usize::from(sqe.parity_columns)
            }
            _ => return None,
        };
        let data = usize::from(sqe.data_columns);
        let column_bytes = usize::try_from(sqe.column_bytes).ok()?;
        // Two data columns at least (RAID 5 of three members, RAID 6 of four).
        if data < 2
            || data + parity > MAX_MEMBERS
            || sqe.stripes == 0
            || sqe.stripes > MAX_STRIPES_PER_JOB
            || column_bytes == 0
            || column_bytes % 512 != 0
            || column_bytes > MAX_CHUNK_BYTES
        {
            return None;
        }
        let per_stripe = data + parity;
        let count = per_stripe.checked_mul(usize::try_from(sqe.stripes).ok()?)?;
        let table = usize::try_from(sqe.columns_offset).ok()?;
        let mut columns = Vec::with_capacity(count);
        for i in 0..count {
            let start = usize::try_from(self.read_u64(table.checked_add(i * 8)?)?).ok()?;
            let end = start.checked_add(column_bytes)?;
            if end > self.len || start % CHUNK_ALIGN != 0 {
                return None;
            }
            columns.push(Span {
                start,
                len: column_bytes,
            });
        }
        let mut lost = Vec::new();
        if sqe.op == JOB_OP_RECOVER {
            let at = table.checked_add(count.checked_mul(8)?)?;
            for stripe in 0..usize::try_from(sqe.stripes).ok()? {
                let pair = self.read_pair(at.checked_add(stripe * 2)?)?;
                if !valid_lost(pair, data + parity, parity) {
                    return None;
                }
                lost.push(pair);
            }
        }
        Some(Checked {
            op: sqe.op,
            data,
            parity,
            column_bytes,
            columns,
            lost,
        })
    }

    /// Computes the jobs of one batch with `engine` and returns each one's status.
    pub fn execute(&self, sqes: &[Sqe], engine: &dyn Engine) -> Vec<u32> {
        let mut status = vec![JOB_STATUS_FAILED; sqes.len()];
        // Every column the batch writes or reads must be its own: a job that overlaps one
        // taken before it is refused (no two slices of the pool may alias).
        let mut taken: Vec<Span> = Vec::new();
        let mut accepted = Vec::new();
        for (index, sqe) in sqes.iter().enumerate() {
            let Some(job) = self.check(sqe) else {
                continue;
            };
            let mut spans = job.columns.clone();
            spans.sort();
            let overlaps_itself = spans.windows(2).any(|w| w[0].start + w[0].len > w[1].start);
            let overlaps_batch = spans.iter().any(|s| {
                taken
                    .iter()
                    .any(|t| s.start < t.start + t.len && t.start < s.start + s.len)
            });
            if overlaps_itself || overlaps_batch {
                continue;
            }
            taken.extend(spans);
            accepted.push((index, job));
        }
        let mut jobs: Vec<Job<'_>> = Vec::new();
        for (_, job) in &accepted {
            for (t, stripe) in job.columns.chunks_exact(job.data + job.parity).enumerate() {
                // A recovery's stripe with nothing lost has nothing to do.
                jobs.extend(self.stripe_job(job, t, stripe));
            }
        }
        if engine.compute(&mut jobs).is_ok() {
            for (index, _) in &accepted {
                status[*index] = JOB_STATUS_OK;
            }
        }
        status
    }

    /// Stripe `t` of `job` as a parity job on the pool's memory (`None`: nothing to do).
    fn stripe_job(&self, job: &Checked, t: usize, stripe: &[Span]) -> Option<Job<'_>> {
        if job.op == JOB_OP_RECOVER {
            return self.recover_job(job, job.lost.get(t)?, stripe);
        }
        let (data, parity) = stripe.split_at(job.data);
        // SAFETY: every span lies in the pool (checked), is disjoint from every other span of
        // the batch (checked), and belongs to the helper until the job's completion (the
        // protocol): so these slices alias nothing and nobody else touches them meanwhile.
        let data: Vec<&[u8]> = data
            .iter()
            .map(|s| unsafe { std::slice::from_raw_parts(self.base.add(s.start), s.len) })
            .collect();
        // SAFETY: as above.
        let mut parity = parity
            .iter()
            .map(|s| unsafe { std::slice::from_raw_parts_mut(self.base.add(s.start), s.len) });
        let p = parity.next().unwrap_or_default();
        debug_assert_eq!(p.len(), job.column_bytes);
        Some(match (job.op, parity.next()) {
            (JOB_OP_PQ, Some(q)) => Job::GenPq { data, p, q },
            _ => Job::Xor { data, p },
        })
    }

    /// A recovery's stripe: the `lost` slots are rebuilt from the others.
    fn recover_job(&self, job: &Checked, lost: &[u8; 2], stripe: &[Span]) -> Option<Job<'_>> {
        if lost.iter().all(|&s| s == NO_SLOT) {
            return None;
        }
        let mut chunks = stripe.iter().enumerate().map(|(slot, s)| {
            if lost.contains(&u8::try_from(slot).unwrap_or(NO_SLOT)) {
                // SAFETY: as in `stripe_job`.
                Chunk::Lost(unsafe {
                    std::slice::from_raw_parts_mut(self.base.add(s.start), s.len)
                })
            } else {
                // SAFETY: as in `stripe_job`.
                Chunk::Intact(unsafe { std::slice::from_raw_parts(self.base.add(s.start), s.len) })
            }
        });
        let data: Vec<Chunk<'_>> = chunks.by_ref().take(job.data).collect();
        let p = chunks.next()?;
        let q = chunks.next();
        Some(Job::Recover(Recover { data, p, q }))
    }
}

/// Whether a lost-table entry names one or two distinct slots of a stripe of `width` columns,
/// at most `parity` of them (a stripe with none lost is valid: nothing to do).
fn valid_lost(pair: [u8; 2], width: usize, parity: usize) -> bool {
    let named: Vec<u8> = pair.into_iter().filter(|&s| s != NO_SLOT).collect();
    named.len() <= parity
        && named.iter().all(|&s| usize::from(s) < width)
        && !(named.len() == 2 && named[0] == named[1])
}
