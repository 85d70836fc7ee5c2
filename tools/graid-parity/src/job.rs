//! The jobs an engine computes, one stripe each, and the checks every job passes before any
//! byte is computed.

use crate::error::{ParityError, Role};

/// Every chunk buffer must start on, and be a multiple of, this many bytes (one cache line, and
/// the widest vector the kernels use).
pub const CHUNK_ALIGN: usize = 64;
/// The largest chunk a job may use.
pub const MAX_CHUNK_BYTES: usize = 1 << 20;
/// The most members (data + parity) a stripe may have.
pub const MAX_MEMBERS: usize = 32;
/// The fewest members of a RAID-5 stripe (two data + P).
pub const MIN_RAID5_MEMBERS: usize = 3;
/// The fewest members of a RAID-6 stripe (two data + P + Q).
pub const MIN_RAID6_MEMBERS: usize = 4;

/// One stripe's worth of parity work.
pub enum Job<'a> {
    /// RAID-5: `p` = XOR of `data`.
    Xor {
        data: Vec<&'a [u8]>,
        p: &'a mut [u8],
    },
    /// RAID-6: `p` = XOR of `data`, `q` = Σ g^i · data\[i\] (md's `gen_syndrome`).
    GenPq {
        data: Vec<&'a [u8]>,
        p: &'a mut [u8],
        q: &'a mut [u8],
    },
    /// Read-modify-write: fold the change of some data chunks into existing parity.
    Update(Update<'a>),
    /// Rebuild one or two lost chunks from the survivors.
    Recover(Recover<'a>),
}

/// Updates P (and Q on RAID-6) in place after some data chunks change, without reading the
/// unchanged ones: P ^= old ^ new, Q ^= g^index · (old ^ new).
pub struct Update<'a> {
    /// How many data chunks the stripe has (to check indices and member counts).
    pub data_chunks: usize,
    /// The changed data chunks; indices must be distinct.
    pub changes: Vec<Change<'a>>,
    /// Current P; updated in place.
    pub p: &'a mut [u8],
    /// Current Q, for RAID-6; updated in place.
    pub q: Option<&'a mut [u8]>,
}

/// One data chunk's old and new contents.
pub struct Change<'a> {
    pub index: usize,
    pub old: &'a [u8],
    pub new: &'a [u8],
}

/// A stripe with one or two lost members. Lost chunks are filled in; intact ones are read.
pub struct Recover<'a> {
    pub data: Vec<Chunk<'a>>,
    pub p: Chunk<'a>,
    /// `None` for RAID-5.
    pub q: Option<Chunk<'a>>,
}

/// A member's chunk in a recovery job.
pub enum Chunk<'a> {
    /// Readable, correct contents.
    Intact(&'a [u8]),
    /// Lost: the buffer the recovered contents are written to.
    Lost(&'a mut [u8]),
}

impl Chunk<'_> {
    pub fn is_lost(&self) -> bool {
        matches!(self, Chunk::Lost(_))
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        match self {
            Chunk::Intact(buf) => buf,
            Chunk::Lost(buf) => buf,
        }
    }
}

impl Recover<'_> {
    /// How many chunks are marked lost.
    pub fn lost_count(&self) -> usize {
        self.data.iter().filter(|c| c.is_lost()).count()
            + usize::from(self.p.is_lost())
            + self.q.as_ref().map_or(0, |q| usize::from(q.is_lost()))
    }
}

impl Job<'_> {
    /// Checks member counts, indices and every buffer's length and alignment. `job` is the
    /// job's position in its batch, used in error messages.
    pub fn validate(&self, job: usize) -> Result<(), ParityError> {
        match self {
            Job::Xor { data, p } => {
                check_members(job, data.len() + 1, MIN_RAID5_MEMBERS)?;
                let data = data.iter().enumerate().map(|(i, d)| (Role::Data(i), *d));
                check_buffers(job, data.chain([(Role::P, &**p)]))
            }
            Job::GenPq { data, p, q } => {
                check_members(job, data.len() + 2, MIN_RAID6_MEMBERS)?;
                let data = data.iter().enumerate().map(|(i, d)| (Role::Data(i), *d));
                check_buffers(job, data.chain([(Role::P, &**p), (Role::Q, &**q)]))
            }
            Job::Update(update) => {
                let (parity, min) = match update.q {
                    Some(_) => (2, MIN_RAID6_MEMBERS),
                    None => (1, MIN_RAID5_MEMBERS),
                };
                check_members(job, update.data_chunks + parity, min)?;
                check_changes(job, update)?;
                let changes = update.changes.iter().flat_map(|c| {
                    [
                        (Role::OldData(c.index), c.old),
                        (Role::NewData(c.index), c.new),
                    ]
                });
                let q = update.q.as_deref().map(|q| (Role::Q, q));
                check_buffers(job, changes.chain([(Role::P, &*update.p)]).chain(q))
            }
            Job::Recover(recover) => {
                let (parity, min) = match recover.q {
                    Some(_) => (2, MIN_RAID6_MEMBERS),
                    None => (1, MIN_RAID5_MEMBERS),
                };
                check_members(job, recover.data.len() + parity, min)?;
                let lost = recover.lost_count();
                if lost == 0 || lost > parity {
                    return Err(ParityError::LostCount {
                        job,
                        lost,
                        max: parity,
                    });
                }
                let data =
                    (recover.data.iter().enumerate()).map(|(i, d)| (Role::Data(i), d.bytes()));
                let q = recover.q.as_ref().map(|q| (Role::Q, q.bytes()));
                check_buffers(job, data.chain([(Role::P, recover.p.bytes())]).chain(q))
            }
        }
    }
}

fn check_members(job: usize, members: usize, min: usize) -> Result<(), ParityError> {
    if (min..=MAX_MEMBERS).contains(&members) {
        Ok(())
    } else {
        Err(ParityError::MemberCount {
            job,
            members,
            min,
            max: MAX_MEMBERS,
        })
    }
}

fn check_changes(job: usize, update: &Update<'_>) -> Result<(), ParityError> {
    if update.changes.is_empty() {
        return Err(ParityError::NoChanges { job });
    }
    let mut seen = [false; MAX_MEMBERS];
    for change in &update.changes {
        let index = change.index;
        if index >= update.data_chunks {
            return Err(ParityError::DataIndexOutOfRange {
                job,
                index,
                data_chunks: update.data_chunks,
            });
        }
        if std::mem::replace(&mut seen[index], true) {
            return Err(ParityError::DuplicateDataIndex { job, index });
        }
    }
    Ok(())
}

fn check_buffers<'b>(
    job: usize,
    buffers: impl IntoIterator<Item = (Role, &'b [u8])>,
) -> Result<(), ParityError> {
    let mut expected = None;
    for (role, buf) in buffers {
        let expected = *expected.get_or_insert(buf.len());
        if buf.is_empty() {
            return Err(ParityError::EmptyChunk { job, role });
        }
        if buf.len() != expected {
            return Err(ParityError::LengthMismatch {
                job,
                role,
                len: buf.len(),
                expected,
            });
        }
        if !(buf.as_ptr() as usize).is_multiple_of(CHUNK_ALIGN) {
            return Err(ParityError::BufferNotAligned {
                job,
                role,
                align: CHUNK_ALIGN,
            });
        }
    }
    let len = expected.unwrap_or(0);
    if !len.is_multiple_of(CHUNK_ALIGN) {
        return Err(ParityError::LengthNotAligned {
            job,
            len,
            align: CHUNK_ALIGN,
        });
    }
    if len > MAX_CHUNK_BYTES {
        return Err(ParityError::ChunkTooLarge {
            job,
            len,
            max: MAX_CHUNK_BYTES,
        });
    }
    Ok(())
}
