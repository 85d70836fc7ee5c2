//! A job as a GPU kernel sees it: its columns in order (data in md's syndrome order, P, Q),
//! which of them the kernel writes, and the kernel's constants. Shared by graid's GPU engines
//! (Vulkan's shaders and CUDA's kernels take the same constants), so the recovery algebra's
//! case analysis exists once on the host side.

use crate::{gf, Chunk, Job, ParityError, Update};

/// No lost slot (the kernels' `0xffffffff`).
pub const NONE: u32 = u32::MAX;

/// The kernels' constants, in order: `base` (the first column's word offset, where the engine
/// needs one), `words` (u32 per column), then by kernel:
/// - [`Kernel::Generate`]: `data` (data columns), `pq` (1: Q too);
/// - [`Kernel::Recover`]: `data`, `parity` (1 or 2), `lost_a`, `lost_b` (lost slots: data
///   index, P = `data`, Q = `data + 1`, else [`NONE`]), `mode` (1: one data column with P; 2:
///   data and P; 3: two data; 4: parity only), `c0`, `c1` (the mode's GF(2^8) constants);
/// - [`Kernel::Update`]: `changes`, `parity`, then words 4 to 11 hold each change's Q
///   coefficient g^index, four bytes a word, change `k` in byte `k % 4` of word `4 + k / 4`.
pub type Constants = [u32; 12];

/// The most changes an update carries (the coefficient bytes the constants hold).
pub const MAX_UPDATE_CHANGES: usize = 32;

/// Which kernel computes a job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kernel {
    /// P (and Q) from the data columns.
    Generate,
    /// One or two lost columns from the others.
    Recover,
    /// Read-modify-write: the changes (old, new pairs) folded into P (and Q) in place.
    Update,
}

/// What a job asks of the device.
pub struct Plan<'a> {
    /// Every column, in order.
    pub columns: Vec<&'a [u8]>,
    /// Which columns the kernel writes (the rest it only reads; an update reads the parity it
    /// writes).
    pub written: Vec<bool>,
    /// The kernel.
    pub kernel: Kernel,
    /// Push constants, but for the base (word 0), which depends on where the columns lie.
    pub constants: Constants,
}

impl Plan<'_> {
    /// Whether the kernel reads column `slot` (every column it does not write, and an update's
    /// parity too): what an engine must copy to the device.
    pub fn reads(&self, slot: usize) -> bool {
        !self.written[slot] || self.kernel == Kernel::Update
    }
}

fn chunk<'a>(c: &'a Chunk<'_>) -> (&'a [u8], bool) {
    match c {
        Chunk::Intact(b) => (b, false),
        Chunk::Lost(b) => (b, true),
    }
}

/// Bytes of columns the kernel of `job` reads or writes (its plan's columns times their
/// length), without building the plan; `None` where [`plan`] is `None`. For routing and
/// staging decisions on the hot path.
pub fn bytes(job: &Job<'_>) -> Option<usize> {
    let (columns, len) = match job {
        Job::Xor { data, p } => (data.len() + 1, p.len()),
        Job::GenPq { data, p, .. } => (data.len() + 2, p.len()),
        Job::Recover(r) => (
            r.data.len() + 1 + usize::from(r.q.is_some()),
            chunk(&r.p).0.len(),
        ),
        Job::Update(u) if u.changes.len() > MAX_UPDATE_CHANGES => return None,
        Job::Update(u) => (
            2 * u.changes.len() + 1 + usize::from(u.q.is_some()),
            u.p.len(),
        ),
    };
    Some(columns * len)
}

/// Validates every job of a batch for a GPU engine named `engine`: each must be valid and
/// of a shape the kernels take, else the batch is refused before anything is written.
pub fn check(jobs: &[Job<'_>], engine: &'static str) -> Result<(), ParityError> {
    for (index, job) in jobs.iter().enumerate() {
        job.validate(index)?;
        if plan(job).is_none() {
            return Err(ParityError::JobUnsupported { job: index, engine });
        }
    }
    Ok(())
}

/// The plan of `job`, or `None` for a shape the kernels do not take (more than
/// [`MAX_UPDATE_CHANGES`] changes; validated jobs never have them).
pub fn plan<'a>(job: &'a Job<'_>) -> Option<Plan<'a>> {
    let (columns, written, kernel): (Vec<&[u8]>, Vec<bool>, Kernel) = match job {
        Job::Xor { data, p } => {
            let mut columns = data.clone();
            columns.push(p);
            let written = (0..columns.len()).map(|i| i == data.len()).collect();
            (columns, written, Kernel::Generate)
        }
        Job::GenPq { data, p, q } => {
            let mut columns = data.clone();
            columns.push(p);
            columns.push(q);
            let written = (0..columns.len()).map(|i| i >= data.len()).collect();
            (columns, written, Kernel::Generate)
        }
        Job::Recover(r) => {
            let all = r.data.iter().chain([&r.p]).chain(r.q.as_ref());
            let (columns, written) = all.map(chunk).unzip();
            (columns, written, Kernel::Recover)
        }
        Job::Update(u) => {
            let mut columns: Vec<&[u8]> = u.changes.iter().flat_map(|c| [c.old, c.new]).collect();
            let inputs = columns.len();
            columns.push(u.p);
            columns.extend(u.q.as_deref());
            let written = (0..columns.len()).map(|i| i >= inputs).collect();
            (columns, written, Kernel::Update)
        }
    };
    let len = columns.first()?.len();
    let words = (len / 4) as u32;
    let mut constants = match job {
        Job::Xor { data, .. } | Job::GenPq { data, .. } => {
            let parity = columns.len() - data.len();
            [
                0,
                0,
                data.len() as u32,
                u32::from(parity == 2),
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
            ]
        }
        Job::Recover(r) => {
            recovery_constants(r.data.len(), columns.len() - r.data.len(), &written)?
        }
        Job::Update(u) => update_constants(u)?,
    };
    constants[1] = words;
    Some(Plan {
        columns,
        written,
        kernel,
        constants,
    })
}

/// The update kernel's constants: the count of changes, the parity columns and each change's
/// Q coefficient g^index.
fn update_constants(u: &Update<'_>) -> Option<Constants> {
    if u.changes.len() > MAX_UPDATE_CHANGES {
        return None;
    }
    let mut k: Constants = [0; 12];
    k[2] = u.changes.len() as u32;
    k[3] = if u.q.is_some() { 2 } else { 1 };
    for (i, change) in u.changes.iter().enumerate() {
        k[4 + i / 4] |= u32::from(gf::pow2(change.index)) << (8 * (i % 4));
    }
    Some(k)
}

/// `recover.wgsl`'s constants for a stripe of `data` data columns and `parity` parity columns
/// whose `lost` slots are marked (one or two, validated by the caller).
fn recovery_constants(data: usize, parity: usize, lost: &[bool]) -> Option<Constants> {
    let slots: Vec<usize> = (0..lost.len()).filter(|&s| lost[s]).collect();
    let p = data;
    let lost_data: Vec<usize> = slots.iter().copied().filter(|&s| s < data).collect();
    let has = |s: usize| slots.contains(&s);
    let g = |e: usize| u32::from(gf::pow2(e));
    let (mode, c0, c1) = match lost_data[..] {
        [] => (4, 0, 0),
        [x] if !has(p) => (1, g(x), 0),
        [x] => (2, u32::from(gf::inv(gf::pow2(x))), 0),
        [x, y] => {
            // md's raid6_2data_recov: Dx = A * Pxy + B * Qxy.
            let gyx = gf::pow2(y - x);
            let denominator = gf::inv(gyx ^ 1);
            let a = gf::mul(gyx, denominator);
            let b = gf::mul(gf::inv(gf::pow2(x)), denominator);
            (3, u32::from(a), u32::from(b))
        }
        _ => return None,
    };
    if parity == 1 && mode != 1 && mode != 4 {
        return None;
    }
    let slot = |i: usize| slots.get(i).map_or(NONE, |&s| s as u32);
    Some([
        0,
        0,
        data as u32,
        parity as u32,
        slot(0),
        slot(1),
        mode,
        c0,
        c1,
        0,
        0,
        0,
    ])
}

/// The columns of `job` the kernel writes, mutably, in order.
pub fn written_mut<'a>(job: &'a mut Job<'_>) -> Vec<&'a mut [u8]> {
    match job {
        Job::Xor { p, .. } => vec![&mut **p],
        Job::GenPq { p, q, .. } => vec![&mut **p, &mut **q],
        Job::Recover(r) => r
            .data
            .iter_mut()
            .chain([&mut r.p])
            .chain(r.q.as_mut())
            .filter_map(|c| match c {
                Chunk::Lost(b) => Some(&mut **b),
                Chunk::Intact(_) => None,
            })
            .collect(),
        Job::Update(u) => [&mut *u.p].into_iter().chain(u.q.as_deref_mut()).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Change, Recover};

    #[test]
    fn bytes_are_the_plans_columns_times_their_length() {
        let d = [[1u8; 64]; 4];
        let (mut p, mut q) = ([0u8; 64], [0u8; 64]);
        let (mut lost, old) = ([0u8; 64], [2u8; 64]);
        let data = || d.iter().map(|c| &c[..]).collect::<Vec<_>>();
        let check = |job: &Job<'_>| {
            let plan = plan(job).unwrap();
            assert_eq!(bytes(job), Some(plan.columns.len() * plan.columns[0].len()));
        };
        check(&Job::Xor {
            data: data(),
            p: &mut p[..],
        });
        check(&Job::GenPq {
            data: data(),
            p: &mut p[..],
            q: &mut q[..],
        });
        check(&Job::Recover(Recover {
            data: vec![
                Chunk::Intact(&d[0]),
                Chunk::Lost(&mut lost[..]),
                Chunk::Intact(&d[2]),
            ],
            p: Chunk::Intact(&d[3]),
            q: Some(Chunk::Intact(&old)),
        }));
        let (mut p2, mut q2) = ([0u8; 64], [0u8; 64]);
        check(&Job::Update(Update {
            data_chunks: 4,
            changes: vec![
                Change {
                    index: 1,
                    old: &old,
                    new: &d[1],
                },
                Change {
                    index: 3,
                    old: &old,
                    new: &d[3],
                },
            ],
            p: &mut p2[..],
            q: Some(&mut q2[..]),
        }));
    }
}
