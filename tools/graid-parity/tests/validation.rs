//! Malformed jobs are refused with a precise error, never a panic, and nothing is written.

mod common;

use common::{cpu_engines, Stripe};
use graid_parity::{
    AlignedBuf, Change, Chunk, Engine, Job, ParityError, Recover, ReferenceEngine, Role, Update,
    CHUNK_ALIGN, MAX_CHUNK_BYTES,
};

fn engines() -> Vec<Box<dyn Engine>> {
    let mut all: Vec<Box<dyn Engine>> = vec![Box::new(ReferenceEngine)];
    all.extend(
        cpu_engines()
            .into_iter()
            .map(|e| Box::new(e) as Box<dyn Engine>),
    );
    all
}

/// Runs `make_job`'s job through every engine and checks each refuses it with `expected`.
fn assert_refused(expected: ParityError, make_job: impl Fn(&mut [AlignedBuf]) -> Vec<Job<'_>>) {
    for engine in engines() {
        let mut bufs: Vec<AlignedBuf> = (0..40).map(|_| AlignedBuf::zeroed(4096)).collect();
        let mut jobs = make_job(&mut bufs);
        let got = engine.compute(&mut jobs);
        assert_eq!(got, Err(expected.clone()), "{}", engine.name());
        assert!(!expected.to_string().is_empty());
    }
}

fn split(bufs: &mut [AlignedBuf], n: usize) -> (Vec<&[u8]>, &mut [u8], &mut [u8]) {
    let (data, rest) = bufs.split_at_mut(n);
    let (p, rest) = rest.split_first_mut().unwrap();
    let q = &mut rest[0];
    (
        data.iter().map(|d| &d[..]).collect(),
        &mut p[..],
        &mut q[..],
    )
}

#[test]
fn too_few_members() {
    let expected = ParityError::MemberCount {
        job: 0,
        members: 3,
        min: 4,
        max: 32,
    };
    assert_refused(expected, |bufs| {
        let (data, p, q) = split(bufs, 1);
        vec![Job::GenPq { data, p, q }]
    });
    let expected = ParityError::MemberCount {
        job: 0,
        members: 2,
        min: 3,
        max: 32,
    };
    assert_refused(expected, |bufs| {
        let (data, p, _) = split(bufs, 1);
        vec![Job::Xor { data, p }]
    });
}

#[test]
fn too_many_members() {
    let expected = ParityError::MemberCount {
        job: 0,
        members: 33,
        min: 4,
        max: 32,
    };
    assert_refused(expected, |bufs| {
        let (data, p, q) = split(bufs, 31);
        vec![Job::GenPq { data, p, q }]
    });
}

#[test]
fn mismatched_lengths() {
    let expected = ParityError::LengthMismatch {
        job: 0,
        role: Role::Q,
        len: 4032,
        expected: 4096,
    };
    assert_refused(expected, |bufs| {
        let (data, p, q) = split(bufs, 3);
        vec![Job::GenPq {
            data,
            p,
            q: &mut q[64..],
        }]
    });
}

#[test]
fn empty_chunks() {
    let expected = ParityError::EmptyChunk {
        job: 0,
        role: Role::Data(0),
    };
    assert_refused(expected, |bufs| {
        let (mut data, p, q) = split(bufs, 3);
        data[0] = &data[0][..0];
        vec![Job::GenPq { data, p, q }]
    });
}

#[test]
fn misaligned_buffers() {
    let expected = ParityError::BufferNotAligned {
        job: 0,
        role: Role::Data(1),
        align: CHUNK_ALIGN,
    };
    assert_refused(expected, |bufs| {
        let (data, p, q) = split(bufs, 3);
        // Same length everywhere; only data chunk 1 starts 8 bytes past a boundary.
        let data = data
            .iter()
            .enumerate()
            .map(|(i, d)| if i == 1 { &d[8..4040] } else { &d[..4032] })
            .collect();
        vec![Job::GenPq {
            data,
            p: &mut p[..4032],
            q: &mut q[..4032],
        }]
    });
}

#[test]
fn length_not_a_multiple_of_the_alignment() {
    let expected = ParityError::LengthNotAligned {
        job: 0,
        len: 4000,
        align: CHUNK_ALIGN,
    };
    assert_refused(expected, |bufs| {
        let (data, p, q) = split(bufs, 3);
        let data = data.iter().map(|d| &d[..4000]).collect();
        vec![Job::GenPq {
            data,
            p: &mut p[..4000],
            q: &mut q[..4000],
        }]
    });
}

#[test]
fn chunk_too_large() {
    let len = MAX_CHUNK_BYTES + CHUNK_ALIGN;
    let big: Vec<AlignedBuf> = (0..3).map(|_| AlignedBuf::zeroed(len)).collect();
    let (mut p, mut q) = (AlignedBuf::zeroed(len), AlignedBuf::zeroed(len));
    let result = ReferenceEngine.compute(&mut [Job::GenPq {
        data: big.iter().map(|d| &d[..]).collect(),
        p: &mut p,
        q: &mut q,
    }]);
    assert_eq!(
        result,
        Err(ParityError::ChunkTooLarge {
            job: 0,
            len,
            max: MAX_CHUNK_BYTES
        })
    );
}

#[test]
fn recovery_with_too_many_or_no_lost_chunks() {
    let stripe = Stripe::random(9, 4, 128);
    let mut outs: Vec<AlignedBuf> = (0..3).map(|_| AlignedBuf::zeroed(128)).collect();
    for engine in engines() {
        let [a, b, c] = &mut outs[..] else {
            unreachable!()
        };
        let mut three_lost = [Job::Recover(Recover {
            data: vec![
                Chunk::Lost(a),
                Chunk::Lost(b),
                Chunk::Intact(&stripe.data[2]),
                Chunk::Intact(&stripe.data[3]),
            ],
            p: Chunk::Lost(c),
            q: Some(Chunk::Intact(&stripe.q)),
        })];
        assert_eq!(
            engine.compute(&mut three_lost),
            Err(ParityError::LostCount {
                job: 0,
                lost: 3,
                max: 2
            })
        );
        let mut none_lost = [Job::Recover(Recover {
            data: stripe.data.iter().map(|d| Chunk::Intact(d)).collect(),
            p: Chunk::Intact(&stripe.p),
            q: None,
        })];
        assert_eq!(
            engine.compute(&mut none_lost),
            Err(ParityError::LostCount {
                job: 0,
                lost: 0,
                max: 1
            })
        );
    }
}

#[test]
fn update_with_bad_indices() {
    let stripe = Stripe::random(10, 4, 128);
    for engine in engines() {
        let (mut p, mut q) = (stripe.p.clone(), stripe.q.clone());
        let change = |index| Change {
            index,
            old: &stripe.data[0],
            new: &stripe.data[1],
        };
        let mut out_of_range = [Job::Update(Update {
            data_chunks: 4,
            changes: vec![change(4)],
            p: &mut p,
            q: Some(&mut q),
        })];
        assert_eq!(
            engine.compute(&mut out_of_range),
            Err(ParityError::DataIndexOutOfRange {
                job: 0,
                index: 4,
                data_chunks: 4
            })
        );
        let mut duplicate = [Job::Update(Update {
            data_chunks: 4,
            changes: vec![change(2), change(2)],
            p: &mut p,
            q: Some(&mut q),
        })];
        assert_eq!(
            engine.compute(&mut duplicate),
            Err(ParityError::DuplicateDataIndex { job: 0, index: 2 })
        );
        let mut nothing = [Job::Update(Update {
            data_chunks: 4,
            changes: vec![],
            p: &mut p,
            q: None,
        })];
        assert_eq!(
            engine.compute(&mut nothing),
            Err(ParityError::NoChanges { job: 0 })
        );
    }
}

#[test]
fn a_refused_batch_writes_nothing() {
    // Job 0 is valid, job 1 is not: job 0's output must stay untouched.
    let stripe = Stripe::random(11, 3, 256);
    for engine in engines() {
        let (mut p, mut q) = (
            AlignedBuf::from_slice(&[0x5a; 256]),
            AlignedBuf::zeroed(256),
        );
        let (mut bad_p, mut bad_q) = (AlignedBuf::zeroed(256), AlignedBuf::zeroed(192));
        let result = engine.compute(&mut [
            Job::GenPq {
                data: stripe.data_refs(),
                p: &mut p,
                q: &mut q,
            },
            Job::GenPq {
                data: stripe.data_refs(),
                p: &mut bad_p,
                q: &mut bad_q,
            },
        ]);
        assert_eq!(
            result,
            Err(ParityError::LengthMismatch {
                job: 1,
                role: Role::Q,
                len: 192,
                expected: 256
            })
        );
        assert!(
            p.iter().all(|&b| b == 0x5a),
            "{} wrote before validating",
            engine.name()
        );
    }
}
