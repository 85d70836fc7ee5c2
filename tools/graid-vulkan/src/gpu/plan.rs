//! A job as the shaders see it: its columns in order (data in md's syndrome order, P, Q),
//! which of them the shader writes, and the push constants of its dispatch.

use graid_parity::{gf, Chunk, Job};

/// No lost slot (the shader's `0xffffffff`).
const NONE: u32 = u32::MAX;

/// Push constants: `parity.wgsl`'s `Params` is the first four, `recover.wgsl`'s `Recovery`
/// all nine.
pub(super) type Constants = [u32; 9];

/// What a job asks of the device.
pub(super) struct Plan<'a> {
    /// Every column, in order.
    pub(super) columns: Vec<&'a [u8]>,
    /// Which columns the shader writes (the rest it only reads).
    pub(super) written: Vec<bool>,
    /// The recovery shader, else the generation one.
    pub(super) recover: bool,
    /// Push constants, but for the base (word 0), which depends on where the columns lie.
    pub(super) constants: Constants,
}

fn chunk<'a>(c: &'a Chunk<'_>) -> (&'a [u8], bool) {
    match c {
        Chunk::Intact(b) => (b, false),
        Chunk::Lost(b) => (b, true),
    }
}

/// The plan of `job`, or `None` for a kind the shaders do not do (read-modify-write).
pub(super) fn plan<'a>(job: &'a Job<'_>) -> Option<Plan<'a>> {
    let (columns, written, recover): (Vec<&[u8]>, Vec<bool>, bool) = match job {
        Job::Xor { data, p } => {
            let mut columns = data.clone();
            columns.push(p);
            let written = (0..columns.len()).map(|i| i == data.len()).collect();
            (columns, written, false)
        }
        Job::GenPq { data, p, q } => {
            let mut columns = data.clone();
            columns.push(p);
            columns.push(q);
            let written = (0..columns.len()).map(|i| i >= data.len()).collect();
            (columns, written, false)
        }
        Job::Recover(r) => {
            let all = r.data.iter().chain([&r.p]).chain(r.q.as_ref());
            let (columns, written) = all.map(chunk).unzip();
            (columns, written, true)
        }
        Job::Update(_) => return None,
    };
    let len = columns.first()?.len();
    let data = match job {
        Job::Recover(r) => r.data.len(),
        Job::Xor { data, .. } | Job::GenPq { data, .. } => data.len(),
        Job::Update(_) => return None,
    };
    let parity = columns.len() - data;
    let words = (len / 4) as u32;
    let constants = if recover {
        recovery_constants(data, parity, &written)?
    } else {
        [0, words, data as u32, u32::from(parity == 2), 0, 0, 0, 0, 0]
    };
    let mut constants = constants;
    constants[1] = words;
    Some(Plan {
        columns,
        written,
        recover,
        constants,
    })
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
    ])
}

/// The columns of `job` the shader writes, mutably, in order.
pub(super) fn written_mut<'a>(job: &'a mut Job<'_>) -> Vec<&'a mut [u8]> {
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
        Job::Update(_) => Vec::new(),
    }
}
