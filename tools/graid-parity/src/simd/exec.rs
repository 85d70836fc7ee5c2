//! The single-pass kernel every level runs, generic over the vector type. Each level module
//! instantiates [`run`] inside a `#[target_feature]` function; everything here is
//! `#[inline(always)]` so the intrinsics are compiled for that level's instruction set.
//!
//! For each column of `UNROLL` vectors it reads every source once, keeps P and Q in registers,
//! and writes every output once: generation, update and two-chunk recovery all cost one pass.

use crate::gf;
use crate::job::{Chunk, Recover, CHUNK_ALIGN, MAX_MEMBERS};
use crate::plan::{self, Plan};
use std::marker::PhantomData;
use std::ptr;

/// One SIMD register's worth of bytes and the GF(2^8) operations on it.
///
/// Every method is `unsafe` because it may only run on a CPU with the level's features (and
/// `load`/`store` additionally need `BYTES` valid bytes at the pointer).
pub(crate) trait Vector: Copy {
    /// Bytes per vector.
    const BYTES: usize;
    /// `true`: accumulate Q by Horner's rule (q = 2q + s), cheapest when doubling is cheaper
    /// than a general multiplication (nibble tables). `false`: multiply each source by its own
    /// g^i, which GFNI does in one instruction and which has no serial dependency through q.
    const HORNER: bool;
    /// A constant prepared for [`Vector::mul`] (nibble tables or an affine matrix).
    type Multiplier: Copy;

    unsafe fn zero() -> Self;
    unsafe fn load(src: *const u8) -> Self;
    unsafe fn store(self, dst: *mut u8);
    unsafe fn xor(self, other: Self) -> Self;
    /// Multiplies every byte by g = 2.
    unsafe fn mul2(self) -> Self;
    unsafe fn multiplier(c: u8) -> Self::Multiplier;
    unsafe fn mul(self, by: Self::Multiplier) -> Self;
}

/// Multiplication by a constant, with the cheap constants spelled out.
#[derive(Clone, Copy)]
enum Scale<M> {
    Zero,
    One,
    Two,
    Four,
    By(M),
}

#[inline(always)]
unsafe fn scale_for<V: Vector>(c: u8) -> Scale<V::Multiplier> {
    match c {
        0 => Scale::Zero,
        1 => Scale::One,
        2 => Scale::Two,
        4 => Scale::Four,
        _ => Scale::By(V::multiplier(c)),
    }
}

#[inline(always)]
unsafe fn scale<V: Vector>(v: V, by: Scale<V::Multiplier>) -> V {
    match by {
        Scale::Zero => V::zero(),
        Scale::One => v,
        Scale::Two => v.mul2(),
        Scale::Four => v.mul2().mul2(),
        Scale::By(m) => v.mul(m),
    }
}

/// A source for the direct form: Q += scale · source.
struct Feed<M> {
    data: *const u8,
    /// Null unless this is an update's old data.
    old: *const u8,
    scale: Scale<M>,
}

/// What an output is made of. Plain P and Q are spelled out so the common case costs nothing
/// but the store (a generic scale would tempt the compiler to precompute every variant).
#[derive(Clone, Copy)]
enum Blend<M> {
    P,
    Q,
    /// a·p ⊕ b·q, both non-zero.
    Both(Coef<M>, Coef<M>),
    /// a·p or b·q alone, with a coefficient other than 1.
    POnly(M),
    QOnly(M),
}

/// A coefficient of an output: 1, or a prepared multiplier.
#[derive(Clone, Copy)]
enum Coef<M> {
    One,
    By(M),
}

#[inline(always)]
unsafe fn coef_for<V: Vector>(c: u8) -> Coef<V::Multiplier> {
    match c {
        1 => Coef::One,
        _ => Coef::By(V::multiplier(c)),
    }
}

#[inline(always)]
unsafe fn apply<V: Vector>(v: V, coef: Coef<V::Multiplier>) -> V {
    match coef {
        Coef::One => v,
        Coef::By(m) => v.mul(m),
    }
}

#[inline(always)]
unsafe fn blend_for<V: Vector>(p_coef: u8, q_coef: u8) -> Blend<V::Multiplier> {
    match (p_coef, q_coef) {
        (1, 0) => Blend::P,
        (0, 1) => Blend::Q,
        (a, 0) => Blend::POnly(V::multiplier(a)),
        (0, b) => Blend::QOnly(V::multiplier(b)),
        (a, b) => Blend::Both(coef_for::<V>(a), coef_for::<V>(b)),
    }
}

struct Sink<M> {
    buf: *mut u8,
    blend: Blend<M>,
    accumulate: bool,
}

/// How Q is accumulated for one plan.
// One lives on the stack per plan; boxing the array would bring back the allocation it avoids.
#[allow(clippy::large_enum_variant)]
enum QForm<M> {
    /// Horner's rule over every exponent from the highest down to 0: q = 2q + D_i, with null
    /// entries for chunks that are absent (lost). One doubling per position, no tables.
    Dense([*const u8; MAX_MEMBERS], usize),
    /// Each source multiplied by its own g^i: used with GFNI (one instruction per multiply),
    /// for updates (few, scattered sources), and when Q is not needed at all.
    Direct(Vec<Feed<M>>),
}

struct Context<M> {
    form: QForm<M>,
    /// A plan has one or two outputs.
    sinks: [Option<Sink<M>>; 2],
    /// Null when absent.
    p_seed: *const u8,
    q_seed: *const u8,
}

fn seed_ptr(seed: Option<&[u8]>) -> *const u8 {
    seed.map_or(ptr::null(), <[u8]>::as_ptr)
}

/// Runs a plan. `UNROLL` vectors per column in general; `GEN` vectors per column in plain P+Q
/// generation, whose 2·`GEN` accumulators stay in registers across every data chunk, and in the
/// recovery of two members (two data, data and P, data and Q; [`Recovery`]).
///
/// # Safety
/// The CPU must support `V`'s instructions. The plan must come from a validated job: all
/// buffers the same length, a multiple of 64 bytes (so of `V::BYTES`).
#[inline(always)]
pub(crate) unsafe fn run<V: Vector, const UNROLL: usize, const GEN: usize>(plan: &mut Plan<'_>) {
    if let Some(recovery) = Recovery::from_plan(plan) {
        recovery.run::<V, GEN>();
        return;
    }
    let needs_q = plan.needs_q();
    let has_old = plan.sources.iter().any(|s| s.old.is_some());
    // Every level takes the dense form first, if it applies, so that plain generation is
    // found below; levels that multiply directly then switch to the direct form for the rest.
    let form = if needs_q && !has_old {
        dense_form(plan)
    } else {
        direct_form::<V>(plan)
    };
    let mut sinks = [None, None];
    debug_assert!(plan.outputs.len() <= sinks.len());
    for (slot, out) in sinks.iter_mut().zip(plan.outputs.iter_mut()) {
        *slot = Some(Sink {
            buf: out.buf.as_mut_ptr(),
            blend: blend_for::<V>(out.p_coef, out.q_coef),
            accumulate: out.accumulate,
        });
    }
    let mut ctx = Context {
        form,
        sinks,
        p_seed: seed_ptr(plan.p_seed),
        q_seed: seed_ptr(plan.q_seed),
    };
    let len = plan.len();
    if let Some((dense, p, q)) = plain_generation(&ctx) {
        generate::<V, GEN>(dense, p, q, len);
        return;
    }
    if !V::HORNER && matches!(ctx.form, QForm::Dense(..)) {
        ctx.form = direct_form::<V>(plan);
    }
    match (&ctx.form, needs_q, has_old) {
        (QForm::Dense(dense, count), _, _) => columns::<V, UNROLL>(&ctx, len, |c, o| {
            dense_column::<V, UNROLL>(c, &dense[..*count], o)
        }),
        (QForm::Direct(feeds), true, true) => columns::<V, UNROLL>(&ctx, len, |c, o| {
            direct_column::<V, UNROLL, true, true>(c, feeds, o)
        }),
        (QForm::Direct(feeds), true, false) => columns::<V, UNROLL>(&ctx, len, |c, o| {
            direct_column::<V, UNROLL, true, false>(c, feeds, o)
        }),
        (QForm::Direct(feeds), false, true) => columns::<V, UNROLL>(&ctx, len, |c, o| {
            direct_column::<V, UNROLL, false, true>(c, feeds, o)
        }),
        (QForm::Direct(feeds), false, false) => columns::<V, UNROLL>(&ctx, len, |c, o| {
            direct_column::<V, UNROLL, false, false>(c, feeds, o)
        }),
    }
}

/// Horner's form: every exponent from the highest down to 0, with null slots for absent
/// sources.
fn dense_form<M>(plan: &Plan<'_>) -> QForm<M> {
    let highest = plan.sources.first().map_or(0, |s| s.exponent);
    let mut dense = [ptr::null(); MAX_MEMBERS];
    for source in &plan.sources {
        // Sources are sorted by descending exponent: slot 0 is the highest.
        dense[highest - source.exponent] = source.data.as_ptr();
    }
    QForm::Dense(dense, highest + 1)
}

/// The direct form: each source with its own g^i.
#[inline(always)]
unsafe fn direct_form<V: Vector>(plan: &Plan<'_>) -> QForm<V::Multiplier> {
    QForm::Direct(
        plan.sources
            .iter()
            .map(|source| Feed {
                data: source.data.as_ptr(),
                old: seed_ptr(source.old),
                scale: scale_for::<V>(gf::pow2(source.exponent)),
            })
            .collect(),
    )
}

/// The common case, plain P+Q generation, gets its own loop: every exponent from the highest
/// down to 0 present, no seeds, and the two outputs plain P and Q (overwritten). Returns the
/// data pointers (highest exponent first) and the P and Q outputs.
fn plain_generation<M>(ctx: &Context<M>) -> Option<(&[*const u8], *mut u8, *mut u8)> {
    let QForm::Dense(dense, count) = &ctx.form else {
        return None;
    };
    let dense = &dense[..*count];
    if dense.is_empty()
        || dense.iter().any(|d| d.is_null())
        || !ctx.p_seed.is_null()
        || !ctx.q_seed.is_null()
    {
        return None;
    }
    let (mut p, mut q) = (None, None);
    for sink in ctx.sinks.iter().flatten() {
        match (&sink.blend, sink.accumulate) {
            (Blend::P, false) if p.is_none() => p = Some(sink.buf),
            (Blend::Q, false) if q.is_none() => q = Some(sink.buf),
            _ => return None,
        }
    }
    Some((dense, p?, q?))
}

/// P and Q of a validated `GenPq` job, without lowering it to a [`Plan`] first: the cheapest
/// route for the most common job (small chunks make per-job set-up visible).
///
/// # Safety
/// The CPU must support `V`'s instructions. The job must be validated: at least one data
/// chunk, all buffers the same length, a multiple of 64 bytes.
#[inline(always)]
pub(crate) unsafe fn generate_job<V: Vector, const GEN: usize>(
    data: &[&[u8]],
    p: &mut [u8],
    q: &mut [u8],
) {
    let mut dense = [ptr::null(); MAX_MEMBERS];
    // Highest exponent first, the order `generate` takes.
    for (slot, chunk) in dense.iter_mut().zip(data.iter().rev()) {
        *slot = chunk.as_ptr();
    }
    generate::<V, GEN>(
        &dense[..data.len()],
        p.as_mut_ptr(),
        q.as_mut_ptr(),
        p.len(),
    );
}

/// Plain generation over the whole chunk: `GEN` vectors per column, then single vectors for
/// the tail. Horner's rule where doubling is cheap, each chunk times its own g^i where a
/// multiplication is one instruction (GFNI).
///
/// # Safety
/// As [`run`]; `dense` (highest exponent first) is non-empty and at most [`MAX_MEMBERS`] long,
/// every pointer non-null, and `p`, `q` and every source valid for `len` bytes.
#[inline(always)]
unsafe fn generate<V: Vector, const GEN: usize>(
    dense: &[*const u8],
    p: *mut u8,
    q: *mut u8,
    len: usize,
) {
    debug_assert!(len.is_multiple_of(V::BYTES));
    // Horner's rule seeds P and Q with the highest chunk; the direct form with the lowest,
    // exponent 0, which needs no multiplication, and prepares the others' multipliers once.
    let multipliers: [V::Multiplier; MAX_MEMBERS];
    let (seed, rest, by) = if V::HORNER {
        let (top, rest) = dense.split_first().expect("at least one source");
        (*top, rest, &[][..])
    } else {
        let (last, rest) = dense.split_last().expect("at least one source");
        let mut by = [V::multiplier(1); MAX_MEMBERS];
        for (slot, exponent) in by.iter_mut().zip((1..=rest.len()).rev()) {
            *slot = V::multiplier(gf::pow2(exponent));
        }
        multipliers = by;
        (*last, rest, &multipliers[..rest.len()])
    };
    let block = V::BYTES * GEN;
    let mut offset = 0;
    while offset + block <= len {
        generate_column::<V, GEN>(seed, rest, by, p, q, offset);
        offset += block;
    }
    while offset < len {
        generate_column::<V, 1>(seed, rest, by, p, q, offset);
        offset += V::BYTES;
    }
}

/// One column of plain generation: P and Q start as the seed chunk, then take the rest, with
/// Horner's rule (q = 2q + D_i, highest exponent first) or in the direct form (each chunk
/// times its own g^i from `by`: [`accumulate_direct`]); both stay in registers until the
/// stores.
#[inline(always)]
unsafe fn generate_column<V: Vector, const UNROLL: usize>(
    seed: *const u8,
    rest: &[*const u8],
    by: &[V::Multiplier],
    p_out: *mut u8,
    q_out: *mut u8,
    offset: usize,
) {
    let mut p = [V::zero(); UNROLL];
    for (u, p) in p.iter_mut().enumerate() {
        *p = V::load(seed.add(offset + u * V::BYTES));
    }
    let mut q = p;
    if V::HORNER {
        for &data in rest {
            for u in 0..UNROLL {
                let v = V::load(data.add(offset + u * V::BYTES));
                p[u] = p[u].xor(v);
                q[u] = q[u].mul2().xor(v);
            }
        }
    } else {
        accumulate_direct::<V, UNROLL>(&mut p, &mut q, rest, by, offset);
    }
    for u in 0..UNROLL {
        p[u].store(p_out.add(offset + u * V::BYTES));
        q[u].store(q_out.add(offset + u * V::BYTES));
    }
}

/// Adds `sources` to `p` and, each times its own multiplier in `by` (same length), to `q`, for
/// the `UNROLL` vectors at `offset`. Sources go in pairs, so each accumulator takes a three-way
/// XOR, which AVX-512 does in one instruction (`vpternlog`; the compiler fuses it).
#[inline(always)]
unsafe fn accumulate_direct<V: Vector, const UNROLL: usize>(
    p: &mut [V; UNROLL],
    q: &mut [V; UNROLL],
    sources: &[*const u8],
    by: &[V::Multiplier],
    offset: usize,
) {
    let paired = sources.len() & !1;
    for (data, by) in sources[..paired].chunks_exact(2).zip(by.chunks_exact(2)) {
        for u in 0..UNROLL {
            let a = V::load(data[0].add(offset + u * V::BYTES));
            let b = V::load(data[1].add(offset + u * V::BYTES));
            p[u] = p[u].xor(a.xor(b));
            q[u] = q[u].xor(a.mul(by[0]).xor(b.mul(by[1])));
        }
    }
    if let (Some(&data), Some(&by)) = (sources.get(paired), by.get(paired)) {
        for u in 0..UNROLL {
            let v = V::load(data.add(offset + u * V::BYTES));
            p[u] = p[u].xor(v);
            q[u] = q[u].xor(v.mul(by));
        }
    }
}

/// Which two members a [`Recovery`] rebuilds, and the constants that solve for them. `x` is the
/// lost data chunk (the lower-numbered one for two data chunks), `y` the other lost member.
/// Below, p and q are the survivors' partial syndromes (lost members count as zero), and
/// p' = p + P, q' = q + Q with the intact parity, so p' and q' hold only the lost terms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Solve {
    /// Data a and b: Dx = a·p' + b·q', Dy = p' + Dx (md's `raid6_2data_recov`).
    TwoData { a: u8, b: u8 },
    /// Data a and P: Dx = g^-a·q' (the constant `c`), P = p + Dx.
    DataP { c: u8 },
    /// Data a and Q: Dx = p', Q = q + g^a·Dx (`c` = g^a).
    DataQ { c: u8 },
}

/// A RAID-6 recovery that loses at least one data chunk and two members in all (two data, data
/// and P, data and Q), ready for its own single-pass loop ([`Recovery::run`]): like plain
/// generation it keeps the survivors' P and Q for a column of vectors in registers across every
/// surviving chunk, then applies the recovery constants and stores the two lost members, with
/// no [`Plan`] and no allocation.
///
/// Built only from buffers of one length, a multiple of [`CHUNK_ALIGN`] (checked, so `run`'s
/// pointer arithmetic stays in bounds even for a job that skipped validation); it holds the
/// job's buffers borrowed for its lifetime.
pub(crate) struct Recovery<'a> {
    /// Surviving data chunks, highest exponent first.
    survivors: [*const u8; MAX_MEMBERS],
    count: usize,
    /// The lost data chunks below the highest survivor, as the number of survivors (after the
    /// highest) that Horner's rule takes before reaching each: there it only doubles q. The
    /// first `holes` entries count. (Lost chunks above the highest survivor would only double
    /// zero.)
    cuts: [usize; 2],
    holes: usize,
    /// Intact parity, or null when that parity is an output.
    p_seed: *const u8,
    q_seed: *const u8,
    x: *mut u8,
    y: *mut u8,
    solve: Solve,
    len: usize,
    _buffers: PhantomData<&'a mut [u8]>,
}

impl<'a> Recovery<'a> {
    /// The recovery pass for a RAID-6 job that loses two members, at least one of them data;
    /// `None` for every other job (which the general executor handles).
    // Only the x86 levels have direct entries for jobs.
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    #[inline(always)]
    pub(crate) fn from_job(job: &'a mut Recover<'_>) -> Option<Recovery<'a>> {
        let len = job.p.bytes().len();
        let q = job.q.as_mut()?;
        let n = job.data.len();
        if n > MAX_MEMBERS || !len.is_multiple_of(CHUNK_ALIGN) {
            return None;
        }
        let mut survivors = [ptr::null(); MAX_MEMBERS];
        let mut count = 0;
        let (mut cuts, mut holes) = ([0; 2], 0);
        // Filled from the highest index down.
        let mut lost = [0; 2];
        let mut outputs = [ptr::null_mut(); 2];
        let mut lost_count = 0;
        for (index, chunk) in job.data.iter_mut().enumerate().rev() {
            match chunk {
                Chunk::Intact(buf) if buf.len() == len => {
                    survivors[count] = buf.as_ptr();
                    count += 1;
                }
                Chunk::Lost(buf) if buf.len() == len && lost_count < 2 => {
                    lost[lost_count] = index;
                    outputs[lost_count] = buf.as_mut_ptr();
                    lost_count += 1;
                    if count > 0 {
                        cuts[holes] = count - 1;
                        holes += 1;
                    }
                }
                _ => return None,
            }
        }
        if lost_count == 2 {
            // Lowest index first, as the outputs are defined.
            lost.swap(0, 1);
            outputs.swap(0, 1);
        }
        let parity = |chunk: &mut Chunk<'_>| match chunk {
            Chunk::Intact(buf) if buf.len() == len => Some((buf.as_ptr(), ptr::null_mut())),
            Chunk::Lost(buf) if buf.len() == len => Some((ptr::null(), buf.as_mut_ptr())),
            _ => None,
        };
        let (p_seed, p_out) = parity(&mut job.p)?;
        let (q_seed, q_out) = parity(q)?;
        let (solve, y) = match (lost_count, p_seed.is_null(), q_seed.is_null()) {
            (2, false, false) => {
                let (a, b) = plan::two_data_coefs(lost[0], lost[1]);
                (Solve::TwoData { a, b }, outputs[1])
            }
            (1, true, false) => {
                let c = gf::inv(gf::pow2(lost[0]));
                (Solve::DataP { c }, p_out)
            }
            (1, false, true) => (
                Solve::DataQ {
                    c: gf::pow2(lost[0]),
                },
                q_out,
            ),
            _ => return None,
        };
        Some(Recovery {
            survivors,
            count,
            cuts,
            holes,
            p_seed,
            q_seed,
            x: outputs[0],
            y,
            solve,
            len,
            _buffers: PhantomData,
        })
    }

    /// The same pass for a plan lowered from such a job (the thread pool runs plans, one byte
    /// range each): recognised by its sources, seeds and output coefficients (see
    /// `plan::lower_recovery`). `None` for every other plan.
    fn from_plan(plan: &'a mut Plan<'_>) -> Option<Recovery<'a>> {
        let [x, y] = &mut plan.outputs[..] else {
            return None;
        };
        if x.accumulate || y.accumulate || plan.sources.iter().any(|s| s.old.is_some()) {
            return None;
        }
        let len = x.buf.len();
        let p_seed = seed_ptr(plan.p_seed);
        let q_seed = seed_ptr(plan.q_seed);
        let solve = match (p_seed.is_null(), q_seed.is_null()) {
            (false, false) if x.p_coef > 1 && x.q_coef != 0 => Solve::TwoData {
                a: x.p_coef,
                b: x.q_coef,
            },
            (true, false) if x.p_coef == 0 && x.q_coef != 0 => Solve::DataP { c: x.q_coef },
            (false, true) if (x.p_coef, x.q_coef) == (1, 0) && y.p_coef != 0 => {
                Solve::DataQ { c: y.p_coef }
            }
            _ => return None,
        };
        let y_matches = match solve {
            Solve::TwoData { a, b } => (y.p_coef, y.q_coef) == (a ^ 1, b),
            Solve::DataP { c } => (y.p_coef, y.q_coef) == (1, c),
            Solve::DataQ { .. } => y.q_coef == 1,
        };
        let lengths_match = y.buf.len() == len
            && len.is_multiple_of(CHUNK_ALIGN)
            && plan.sources.iter().all(|s| s.data.len() == len)
            && [plan.p_seed, plan.q_seed]
                .iter()
                .flatten()
                .all(|s| s.len() == len);
        if !y_matches || !lengths_match || plan.sources.len() > MAX_MEMBERS {
            return None;
        }
        let mut survivors = [ptr::null(); MAX_MEMBERS];
        let (mut cuts, mut holes) = ([0; 2], 0);
        // Sources are sorted by descending exponent; a gap between two is a lost chunk.
        for (count, pair) in plan.sources.windows(2).enumerate() {
            for _ in pair[1].exponent + 1..pair[0].exponent {
                *cuts.get_mut(holes)? = count;
                holes += 1;
            }
        }
        if let Some(last) = plan.sources.last() {
            for _ in 0..last.exponent {
                *cuts.get_mut(holes)? = plan.sources.len() - 1;
                holes += 1;
            }
        }
        for (slot, source) in survivors.iter_mut().zip(&plan.sources) {
            *slot = source.data.as_ptr();
        }
        Some(Recovery {
            survivors,
            count: plan.sources.len(),
            cuts,
            holes,
            p_seed,
            q_seed,
            x: x.buf.as_mut_ptr(),
            y: y.buf.as_mut_ptr(),
            solve,
            len,
            _buffers: PhantomData,
        })
    }

    /// Runs the pass: `UNROLL` vectors per column, then single vectors for the tail.
    ///
    /// # Safety
    /// The CPU must support `V`'s instructions, and `V::BYTES` must divide [`CHUNK_ALIGN`].
    /// (Every pointer is valid for `len` bytes by construction.)
    #[inline(always)]
    pub(crate) unsafe fn run<V: Vector, const UNROLL: usize>(&self) {
        let (p, q) = (self.p_seed, self.q_seed);
        match self.solve {
            Solve::TwoData { a, b } => self.columns::<V, UNROLL, _>(TwoData::<V> {
                p,
                q,
                a: V::multiplier(a),
                b: V::multiplier(b),
            }),
            Solve::DataP { c } => self.columns::<V, UNROLL, _>(DataP::<V> {
                q,
                c: V::multiplier(c),
            }),
            Solve::DataQ { c } => self.columns::<V, UNROLL, _>(DataQ::<V> {
                p,
                c: V::multiplier(c),
            }),
        }
    }

    #[inline(always)]
    unsafe fn columns<V: Vector, const UNROLL: usize, F: Finish<V>>(&self, finish: F) {
        debug_assert!(self.len.is_multiple_of(V::BYTES));
        let (top, rest) = match self.survivors[..self.count].split_first() {
            Some((top, rest)) => (*top, rest),
            None => (ptr::null(), &[][..]),
        };
        // Survivors between the holes: each run is a plain Horner loop, as in generation.
        let (mut runs, mut start) = ([&[][..]; 3], 0);
        for (run, &cut) in runs.iter_mut().zip(&self.cuts[..self.holes]) {
            *run = &rest[start..cut];
            start = cut;
        }
        runs[self.holes] = &rest[start..];
        let runs = &runs[..=self.holes];
        if !V::HORNER {
            return self.columns_direct::<V, UNROLL, F>(top, runs, finish);
        }
        let block = V::BYTES * UNROLL;
        let mut offset = 0;
        while offset + block <= self.len {
            column::<V, UNROLL, F>(top, runs, finish, (self.x, self.y), offset);
            offset += block;
        }
        // The tail (a power-of-two chunk leaves two 32-byte vectors after blocks of six) in
        // pairs: two independent chains instead of one latency-bound vector at a time.
        while offset + 2 * V::BYTES <= self.len {
            column::<V, 2, F>(top, runs, finish, (self.x, self.y), offset);
            offset += 2 * V::BYTES;
        }
        while offset < self.len {
            column::<V, 1, F>(top, runs, finish, (self.x, self.y), offset);
            offset += V::BYTES;
        }
    }

    /// [`Recovery::columns`] for levels that multiply directly (GFNI): each survivor times its
    /// own g^i, taken from the positions Horner's rule would have given it (`top`, then `runs`
    /// with one lost chunk between consecutive runs).
    #[inline(always)]
    unsafe fn columns_direct<V: Vector, const UNROLL: usize, F: Finish<V>>(
        &self,
        top: *const u8,
        runs: &[&[*const u8]],
        finish: F,
    ) {
        let mut sources = [ptr::null(); MAX_MEMBERS];
        let mut by = [V::multiplier(1); MAX_MEMBERS];
        let mut count = 0;
        // The exponent of a survivor is the number of doublings Horner's rule would apply after
        // it: one per later survivor and one per later hole.
        let later: usize = runs.iter().map(|run| run.len()).sum::<usize>() + runs.len() - 1;
        if !top.is_null() {
            sources[0] = top;
            by[0] = V::multiplier(gf::pow2(later));
            count = 1;
        }
        let mut exponent = later;
        for (hole, run) in runs.iter().enumerate() {
            if hole > 0 {
                exponent -= 1;
            }
            for &data in *run {
                exponent -= 1;
                sources[count] = data;
                by[count] = V::multiplier(gf::pow2(exponent));
                count += 1;
            }
        }
        let (sources, by) = (&sources[..count], &by[..count]);
        let outputs = (self.x, self.y);
        let block = V::BYTES * UNROLL;
        let mut offset = 0;
        while offset + block <= self.len {
            column_direct::<V, UNROLL, F>(sources, by, finish, outputs, offset);
            offset += block;
        }
        while offset < self.len {
            column_direct::<V, 1, F>(sources, by, finish, outputs, offset);
            offset += V::BYTES;
        }
    }
}

/// One column of a [`Recovery`] in the direct form: the survivors' P and Q as in
/// [`generate_column`], then the two outputs.
#[inline(always)]
unsafe fn column_direct<V: Vector, const UNROLL: usize, F: Finish<V>>(
    sources: &[*const u8],
    by: &[V::Multiplier],
    finish: F,
    (x_out, y_out): (*mut u8, *mut u8),
    offset: usize,
) {
    let (mut p, mut q) = ([V::zero(); UNROLL], [V::zero(); UNROLL]);
    accumulate_direct::<V, UNROLL>(&mut p, &mut q, sources, by, offset);
    for u in 0..UNROLL {
        let at = offset + u * V::BYTES;
        let (x, y) = finish.outputs(p[u], q[u], at);
        x.store(x_out.add(at));
        y.store(y_out.add(at));
    }
}

/// One column of a [`Recovery`]: the survivors' P and Q by Horner's rule as in
/// [`generate_column`], kept in registers, with one extra doubling of q between runs (a lost
/// chunk contributes nothing else), then the two outputs.
#[inline(always)]
unsafe fn column<V: Vector, const UNROLL: usize, F: Finish<V>>(
    top: *const u8,
    runs: &[&[*const u8]],
    finish: F,
    (x_out, y_out): (*mut u8, *mut u8),
    offset: usize,
) {
    let at = |u: usize| offset + u * V::BYTES;
    let mut p = [V::zero(); UNROLL];
    if !top.is_null() {
        for (u, p) in p.iter_mut().enumerate() {
            *p = V::load(top.add(at(u)));
        }
    }
    let mut q = p;
    for (hole, run) in runs.iter().enumerate() {
        if hole > 0 {
            for q in q.iter_mut() {
                *q = q.mul2();
            }
        }
        for &data in *run {
            for u in 0..UNROLL {
                let v = V::load(data.add(at(u)));
                p[u] = p[u].xor(v);
                q[u] = q[u].mul2().xor(v);
            }
        }
    }
    for u in 0..UNROLL {
        let (x, y) = finish.outputs(p[u], q[u], at(u));
        x.store(x_out.add(at(u)));
        y.store(y_out.add(at(u)));
    }
}

/// The last step of a [`Recovery`] column, per vector: from the survivors' partial syndromes
/// `p` and `q` of the vector at byte `at`, the two lost members (x, y).
trait Finish<V: Vector>: Copy {
    unsafe fn outputs(self, p: V, q: V, at: usize) -> (V, V);
}

/// Two lost data chunks: Dx = a·(p + P) + b·(q + Q), Dy = (p + P) + Dx.
#[derive(Clone, Copy)]
struct TwoData<V: Vector> {
    p: *const u8,
    q: *const u8,
    a: V::Multiplier,
    b: V::Multiplier,
}

impl<V: Vector> Finish<V> for TwoData<V> {
    #[inline(always)]
    unsafe fn outputs(self, p: V, q: V, at: usize) -> (V, V) {
        let p = p.xor(V::load(self.p.add(at)));
        let q = q.xor(V::load(self.q.add(at)));
        let x = p.mul(self.a).xor(q.mul(self.b));
        (x, p.xor(x))
    }
}

/// Lost data and P: Dx = c·(q + Q), P = p + Dx.
#[derive(Clone, Copy)]
struct DataP<V: Vector> {
    q: *const u8,
    c: V::Multiplier,
}

impl<V: Vector> Finish<V> for DataP<V> {
    #[inline(always)]
    unsafe fn outputs(self, p: V, q: V, at: usize) -> (V, V) {
        let x = q.xor(V::load(self.q.add(at))).mul(self.c);
        (x, p.xor(x))
    }
}

/// Lost data and Q: Dx = p + P, Q = q + c·Dx.
#[derive(Clone, Copy)]
struct DataQ<V: Vector> {
    p: *const u8,
    c: V::Multiplier,
}

impl<V: Vector> Finish<V> for DataQ<V> {
    #[inline(always)]
    unsafe fn outputs(self, p: V, q: V, at: usize) -> (V, V) {
        let x = p.xor(V::load(self.p.add(at)));
        (x, q.xor(x.mul(self.c)))
    }
}

/// Walks the chunk in blocks of `UNROLL` vectors, then one vector at a time for the tail.
#[inline(always)]
unsafe fn columns<V: Vector, const UNROLL: usize>(
    ctx: &Context<V::Multiplier>,
    len: usize,
    column: impl Fn(&Context<V::Multiplier>, usize),
) {
    debug_assert!(len.is_multiple_of(V::BYTES));
    let block = V::BYTES * UNROLL;
    let mut offset = 0;
    while offset + block <= len {
        column(ctx, offset);
        offset += block;
    }
    while offset < len {
        // The general one-vector column: correct for every plan, and the tail is short.
        match &ctx.form {
            QForm::Dense(dense, count) => dense_column::<V, 1>(ctx, &dense[..*count], offset),
            QForm::Direct(feeds) => direct_column::<V, 1, true, true>(ctx, feeds, offset),
        }
        offset += V::BYTES;
    }
}

#[inline(always)]
unsafe fn load_p<V: Vector, const UNROLL: usize>(
    ctx: &Context<V::Multiplier>,
    offset: usize,
) -> [V; UNROLL] {
    let mut p = [V::zero(); UNROLL];
    if !ctx.p_seed.is_null() {
        for (u, p) in p.iter_mut().enumerate() {
            *p = V::load(ctx.p_seed.add(offset + u * V::BYTES));
        }
    }
    p
}

/// Horner's rule down every exponent: q = 2q + D_i.
#[inline(always)]
unsafe fn dense_column<V: Vector, const UNROLL: usize>(
    ctx: &Context<V::Multiplier>,
    dense: &[*const u8],
    offset: usize,
) {
    let mut p = load_p::<V, UNROLL>(ctx, offset);
    let mut q = [V::zero(); UNROLL];
    for &data in dense {
        for q in q.iter_mut() {
            *q = q.mul2();
        }
        if !data.is_null() {
            for u in 0..UNROLL {
                let v = V::load(data.add(offset + u * V::BYTES));
                p[u] = p[u].xor(v);
                q[u] = q[u].xor(v);
            }
        }
    }
    finish::<V, UNROLL>(ctx, p, q, offset);
}

/// Q += g^i · source, each multiplied on its own. `OLD`: sources are updates (new ^ old).
#[inline(always)]
unsafe fn direct_column<V: Vector, const UNROLL: usize, const Q: bool, const OLD: bool>(
    ctx: &Context<V::Multiplier>,
    feeds: &[Feed<V::Multiplier>],
    offset: usize,
) {
    let mut p = load_p::<V, UNROLL>(ctx, offset);
    let mut q = [V::zero(); UNROLL];
    for feed in feeds {
        let mut v = [V::zero(); UNROLL];
        for u in 0..UNROLL {
            v[u] = V::load(feed.data.add(offset + u * V::BYTES));
            if OLD && !feed.old.is_null() {
                v[u] = v[u].xor(V::load(feed.old.add(offset + u * V::BYTES)));
            }
            p[u] = p[u].xor(v[u]);
        }
        if Q {
            match feed.scale {
                Scale::One => {
                    for u in 0..UNROLL {
                        q[u] = q[u].xor(v[u]);
                    }
                }
                Scale::By(m) => {
                    for u in 0..UNROLL {
                        q[u] = q[u].xor(v[u].mul(m));
                    }
                }
                other => {
                    for u in 0..UNROLL {
                        q[u] = q[u].xor(scale(v[u], other));
                    }
                }
            }
        }
    }
    finish::<V, UNROLL>(ctx, p, q, offset);
}

/// Adds the Q seed and writes every output: p_coef·p + q_coef·q.
#[inline(always)]
unsafe fn finish<V: Vector, const UNROLL: usize>(
    ctx: &Context<V::Multiplier>,
    p: [V; UNROLL],
    mut q: [V; UNROLL],
    offset: usize,
) {
    let at = |u: usize| offset + u * V::BYTES;
    if !ctx.q_seed.is_null() {
        for (u, q) in q.iter_mut().enumerate() {
            *q = q.xor(V::load(ctx.q_seed.add(at(u))));
        }
    }
    for sink in ctx.sinks.iter().flatten() {
        let mut out = [V::zero(); UNROLL];
        match sink.blend {
            Blend::P => out = p,
            Blend::Q => out = q,
            Blend::POnly(m) => {
                for u in 0..UNROLL {
                    out[u] = p[u].mul(m);
                }
            }
            Blend::QOnly(m) => {
                for u in 0..UNROLL {
                    out[u] = q[u].mul(m);
                }
            }
            Blend::Both(a, b) => {
                for u in 0..UNROLL {
                    out[u] = apply(p[u], a).xor(apply(q[u], b));
                }
            }
        }
        for (u, out) in out.iter_mut().enumerate() {
            let dst = sink.buf.add(at(u));
            if sink.accumulate {
                *out = out.xor(V::load(dst));
            }
            out.store(dst);
        }
    }
}
