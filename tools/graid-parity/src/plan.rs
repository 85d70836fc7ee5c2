//! Lowers every job to one shape the fast kernels run in a single pass over the stripe:
//!
//! ```text
//! p = p_seed ^ Σ s                  over sources s (s = data, or old ^ new for updates)
//! q = q_seed ^ Σ g^e(s) · s
//! each output = p_coef·p ^ q_coef·q  (^ its previous contents when accumulating)
//! ```
//!
//! Generation, update and all recovery cases differ only in which chunks are sources or seeds
//! and in the two coefficients per output, so the recovery algebra lives here, once, and the
//! kernels stay small.

use crate::gf;
use crate::job::{Chunk, Job, Recover};

/// A chunk that feeds the syndromes.
pub(crate) struct Source<'a> {
    pub data: &'a [u8],
    /// For updates: the old contents, XORed with `data` to give the change.
    pub old: Option<&'a [u8]>,
    /// The chunk's data index: it enters Q multiplied by g^exponent.
    pub exponent: usize,
}

/// A chunk the kernel writes.
pub(crate) struct Output<'a> {
    pub buf: &'a mut [u8],
    pub p_coef: u8,
    pub q_coef: u8,
    /// XOR into the current contents instead of overwriting (in-place parity update).
    pub accumulate: bool,
}

/// One job, lowered. Sources are sorted by descending exponent (the order Horner's rule needs).
pub(crate) struct Plan<'a> {
    pub sources: Vec<Source<'a>>,
    pub p_seed: Option<&'a [u8]>,
    pub q_seed: Option<&'a [u8]>,
    pub outputs: Vec<Output<'a>>,
}

impl<'a> Plan<'a> {
    /// The chunk length in bytes.
    pub fn len(&self) -> usize {
        self.outputs[0].buf.len()
    }

    /// Whether any output depends on Q (otherwise the kernels skip the GF multiplications).
    pub fn needs_q(&self) -> bool {
        self.outputs.iter().any(|o| o.q_coef != 0)
    }

    /// Splits every buffer at byte `mid`: the two halves are independent plans, so they can run
    /// on different threads.
    pub fn split_at(self, mid: usize) -> (Plan<'a>, Plan<'a>) {
        let (mut left_sources, mut right_sources) = (Vec::new(), Vec::new());
        for s in self.sources {
            let (dl, dr) = s.data.split_at(mid);
            let (ol, or) = match s.old {
                Some(old) => {
                    let (l, r) = old.split_at(mid);
                    (Some(l), Some(r))
                }
                None => (None, None),
            };
            left_sources.push(Source {
                data: dl,
                old: ol,
                exponent: s.exponent,
            });
            right_sources.push(Source {
                data: dr,
                old: or,
                exponent: s.exponent,
            });
        }
        let (mut left_outputs, mut right_outputs) = (Vec::new(), Vec::new());
        for o in self.outputs {
            let (bl, br) = o.buf.split_at_mut(mid);
            left_outputs.push(Output { buf: bl, ..o });
            right_outputs.push(Output { buf: br, ..o });
        }
        let split = |seed: Option<&'a [u8]>| match seed {
            Some(s) => {
                let (l, r) = s.split_at(mid);
                (Some(l), Some(r))
            }
            None => (None, None),
        };
        let (pl, pr) = split(self.p_seed);
        let (ql, qr) = split(self.q_seed);
        (
            Plan {
                sources: left_sources,
                p_seed: pl,
                q_seed: ql,
                outputs: left_outputs,
            },
            Plan {
                sources: right_sources,
                p_seed: pr,
                q_seed: qr,
                outputs: right_outputs,
            },
        )
    }

    /// Lowers a validated job.
    pub fn from_job(job: &'a mut Job<'_>) -> Plan<'a> {
        match job {
            Job::Xor { data, p } => Plan {
                sources: data_sources(data.iter().map(|d| Some(*d))),
                p_seed: None,
                q_seed: None,
                outputs: vec![Output::new(p, 1, 0)],
            },
            Job::GenPq { data, p, q } => Plan {
                sources: data_sources(data.iter().map(|d| Some(*d))),
                p_seed: None,
                q_seed: None,
                outputs: vec![Output::new(p, 1, 0), Output::new(q, 0, 1)],
            },
            Job::Update(update) => {
                let mut sources: Vec<Source<'a>> = update
                    .changes
                    .iter()
                    .map(|c| Source {
                        data: c.new,
                        old: Some(c.old),
                        exponent: c.index,
                    })
                    .collect();
                sources.sort_by_key(|s| std::cmp::Reverse(s.exponent));
                let mut outputs = vec![Output::accumulating(&mut *update.p, 1, 0)];
                if let Some(q) = update.q.as_deref_mut() {
                    outputs.push(Output::accumulating(q, 0, 1));
                }
                Plan {
                    sources,
                    p_seed: None,
                    q_seed: None,
                    outputs,
                }
            }
            Job::Recover(recover) => lower_recovery(recover),
        }
    }
}

impl<'a> Output<'a> {
    fn new(buf: &'a mut [u8], p_coef: u8, q_coef: u8) -> Output<'a> {
        Output {
            buf,
            p_coef,
            q_coef,
            accumulate: false,
        }
    }

    fn accumulating(buf: &'a mut [u8], p_coef: u8, q_coef: u8) -> Output<'a> {
        Output {
            accumulate: true,
            ..Output::new(buf, p_coef, q_coef)
        }
    }
}

/// Data chunks as sources, highest index first; `None` (lost) chunks are left out.
fn data_sources<'a>(
    data: impl DoubleEndedIterator<Item = Option<&'a [u8]>> + ExactSizeIterator,
) -> Vec<Source<'a>> {
    // Sized up front: `filter_map` has no exact length, and collecting it would reallocate.
    let mut sources = Vec::with_capacity(data.len());
    sources.extend(data.enumerate().rev().filter_map(|(exponent, d)| {
        d.map(|data| Source {
            data,
            old: None,
            exponent,
        })
    }));
    sources
}

/// An intact chunk is a seed or source; a lost one is an output.
fn split_chunk<'a>(chunk: &'a mut Chunk<'_>) -> (Option<&'a [u8]>, Option<&'a mut [u8]>) {
    match chunk {
        Chunk::Intact(buf) => (Some(*buf), None),
        Chunk::Lost(buf) => (None, Some(&mut **buf)),
    }
}

/// The recovery algebra. With the surviving data summed into the syndromes (lost data counts
/// as zero) and surviving parity as seeds, `p` and `q` hold exactly the lost terms, e.g. for
/// data `a` and `b` lost: p = Da + Db, q = g^a·Da + g^b·Db. Each lost chunk is then a fixed
/// linear combination of `p` and `q`.
fn lower_recovery<'a>(job: &'a mut Recover<'_>) -> Plan<'a> {
    let mut survivors = Vec::with_capacity(job.data.len());
    let mut lost_data = Vec::with_capacity(2);
    let mut data_out = Vec::with_capacity(2);
    for (index, chunk) in job.data.iter_mut().enumerate() {
        let (intact, lost) = split_chunk(chunk);
        survivors.push(intact);
        if let Some(buf) = lost {
            lost_data.push(index);
            data_out.push(buf);
        }
    }
    let sources = data_sources(survivors.into_iter());
    let (p_intact, p_out) = split_chunk(&mut job.p);
    let (q_intact, q_out) = match job.q.as_mut() {
        Some(q) => split_chunk(q),
        None => (None, None),
    };
    let p_lost = p_out.is_some();
    // Q is only worth reading when P alone cannot finish the job.
    let q_seed = if lost_data.len() == 2 || (lost_data.len() == 1 && p_lost) {
        q_intact
    } else {
        None
    };
    let mut data_out = data_out.into_iter();

    let mut outputs = Vec::with_capacity(2);
    match lost_data[..] {
        [] => {
            // Parity only: regenerate it.
            if let Some(p) = p_out {
                outputs.push(Output::new(p, 1, 0));
            }
            if let Some(q) = q_out {
                outputs.push(Output::new(q, 0, 1));
            }
        }
        [a] => {
            let da = data_out.next().expect("one lost data chunk");
            if !p_lost {
                // p = Da (P seeded); q = Σ survivors, so Q = q + g^a·Da.
                outputs.push(Output::new(da, 1, 0));
                if let Some(q) = q_out {
                    outputs.push(Output::new(q, gf::pow2(a), 1));
                }
            } else {
                // q = g^a·Da (Q seeded); p = Σ survivors, so P = p + Da.
                let inv_ga = gf::inv(gf::pow2(a));
                outputs.push(Output::new(da, 0, inv_ga));
                if let Some(p) = p_out {
                    outputs.push(Output::new(p, 1, inv_ga));
                }
            }
        }
        [a, b] => {
            let (kgb, k) = two_data_coefs(a, b);
            let da = data_out.next().expect("first lost data chunk");
            let db = data_out.next().expect("second lost data chunk");
            outputs.push(Output::new(da, kgb, k));
            outputs.push(Output::new(db, 1 ^ kgb, k));
        }
        _ => unreachable!("validated jobs lose at most two chunks"),
    }
    Plan {
        sources,
        // Regenerating only parity never needs the old parity.
        p_seed: if lost_data.is_empty() { None } else { p_intact },
        q_seed,
        outputs,
    }
}

/// The constants of two-data recovery, md's `raid6_2data_recov` in this crate's notation: with
/// p = Da + Db and q = g^a·Da + g^b·Db (the lost terms, survivors and parity summed out),
/// Da = (q + g^b·p) / (g^a + g^b) = kgb·p + k·q and Db = p + Da. Returns (kgb, k), both
/// non-zero; `a` and `b` are distinct data indices.
#[inline]
pub(crate) fn two_data_coefs(a: usize, b: usize) -> (u8, u8) {
    let (ga, gb) = (gf::pow2(a), gf::pow2(b));
    let k = gf::inv(ga ^ gb);
    (gf::mul(k, gb), k)
}
