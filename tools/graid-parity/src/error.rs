//! The one error type of the crate: every way a batch can be refused.

use std::fmt;

/// Which buffer of a job an error refers to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Data chunk `i` (D_i, the i-th data member of the stripe).
    Data(usize),
    /// The old contents of data chunk `i` in an update job.
    OldData(usize),
    /// The new contents of data chunk `i` in an update job.
    NewData(usize),
    /// The P (XOR) parity chunk.
    P,
    /// The Q (Reed-Solomon) parity chunk.
    Q,
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Role::Data(i) => write!(f, "data chunk {i}"),
            Role::OldData(i) => write!(f, "old data chunk {i}"),
            Role::NewData(i) => write!(f, "new data chunk {i}"),
            Role::P => f.write_str("P"),
            Role::Q => f.write_str("Q"),
        }
    }
}

/// Why a batch was refused. A refused batch has written nothing: every job is checked before
/// any is computed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ParityError {
    #[error("job {job}: {members} members is outside the supported {min}..={max}")]
    MemberCount {
        job: usize,
        members: usize,
        min: usize,
        max: usize,
    },
    #[error("job {job}: {role} is empty")]
    EmptyChunk { job: usize, role: Role },
    #[error("job {job}: {role} is {len} bytes, but the first chunk is {expected} bytes")]
    LengthMismatch {
        job: usize,
        role: Role,
        len: usize,
        expected: usize,
    },
    #[error("job {job}: chunk length {len} is not a multiple of {align} bytes")]
    LengthNotAligned {
        job: usize,
        len: usize,
        align: usize,
    },
    #[error("job {job}: chunk length {len} exceeds the {max}-byte maximum")]
    ChunkTooLarge { job: usize, len: usize, max: usize },
    #[error("job {job}: {role} does not start on a {align}-byte boundary")]
    BufferNotAligned {
        job: usize,
        role: Role,
        align: usize,
    },
    #[error("job {job}: {lost} chunks are marked lost; this stripe can recover 1..={max}")]
    LostCount { job: usize, lost: usize, max: usize },
    #[error("job {job}: update names data chunk {index}, but the stripe has {data_chunks}")]
    DataIndexOutOfRange {
        job: usize,
        index: usize,
        data_chunks: usize,
    },
    #[error("job {job}: update names data chunk {index} twice")]
    DuplicateDataIndex { job: usize, index: usize },
    #[error("job {job}: update has no changed data chunks")]
    NoChanges { job: usize },
    #[error("dispatch level {level} needs CPU features ({needs}) this CPU lacks")]
    LevelUnsupported {
        level: crate::Level,
        needs: &'static str,
    },
    #[error("unknown dispatch level {0:?}; expected one of: {levels}", levels = crate::Level::NAMES)]
    UnknownLevel(String),
    #[error("could not start the parity thread pool: {0}")]
    ThreadPool(String),
    #[error("job {job}: the {engine} engine does not do this kind of job")]
    JobUnsupported { job: usize, engine: &'static str },
    #[error("the {engine} engine failed: {reason}")]
    Backend {
        engine: &'static str,
        reason: String,
    },
}
