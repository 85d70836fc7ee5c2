//! The ring protocol's state machine against whatever a helper does: every job submitted comes
//! back exactly once (done by the helper, or taken back for the kernel), a slot is never reused
//! while the helper may still write its buffers, and garbage never passes for a completion.

use graid_engine::ring::{
    ring_pending, Completion, HelperState, JobSlot, JobTable, SubmitError, Ticket, MISSES_TO_DETACH,
};
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};

/// What a helper (or time) does next.
#[derive(Clone, Debug)]
enum Step {
    /// The kernel submits a job due `timeout` ns from now.
    Submit { timeout: u64 },
    /// The helper completes the `pick`-th job it holds (if any), correctly.
    Complete { pick: usize },
    /// The helper completes that job again (or one it never had): a duplicate.
    Duplicate { pick: usize },
    /// The helper writes a completion of its own invention.
    Garbage { job: u32, generation: u32 },
    /// The helper completes a job with the generation before its own (a stale id).
    Stale { pick: usize },
    /// Time passes; deadlines are checked.
    Tick { ns: u64 },
    /// The helper closes its file (SIGKILL included).
    Close,
    /// Its pins are gone too.
    Gone,
    /// A (new) helper attaches.
    Attach,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (1u64..2_000).prop_map(|timeout| Step::Submit { timeout }),
        4 => any::<usize>().prop_map(|pick| Step::Complete { pick }),
        1 => any::<usize>().prop_map(|pick| Step::Duplicate { pick }),
        1 => (0u32..20, any::<u32>()).prop_map(|(job, generation)| Step::Garbage { job, generation }),
        1 => any::<usize>().prop_map(|pick| Step::Stale { pick }),
        2 => (0u64..1_500).prop_map(|ns| Step::Tick { ns }),
        1 => Just(Step::Close),
        1 => Just(Step::Gone),
        1 => Just(Step::Attach),
    ]
}

/// What the kernel knows from outside the table: the jobs it handed out and how each ended.
#[derive(Default)]
struct Model {
    /// Tickets out (by job slot) that have not ended.
    out: BTreeMap<u32, Ticket>,
    /// How many times each submission (by its number) ended.
    ended: Vec<u32>,
    /// Submission number and deadline of each ticket out.
    number: BTreeMap<u32, usize>,
    deadline: BTreeMap<u32, u64>,
    /// Every ticket ever completed or taken back, to replay as duplicates and stale ids.
    history: Vec<Ticket>,
    /// Slots taken back while the helper might still write them.
    quarantined: BTreeSet<u32>,
}

impl Model {
    fn end(&mut self, job: u32) {
        let number = self.number.remove(&job).expect("a job out");
        self.ended[number] += 1;
        if let Some(t) = self.out.remove(&job) {
            self.history.push(t);
        }
    }
}

const SLOTS: usize = 8;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn every_job_ends_exactly_once_whatever_the_helper_does(
        steps in proptest::collection::vec(step(), 1..200)
    ) {
        let mut table = JobTable::new(vec![JobSlot::default(); SLOTS]);
        table.attach();
        let mut model = Model::default();
        let mut now = 0u64;
        for step in steps {
            match step {
                Step::Submit { timeout } => match (table.state(), table.submit(now + timeout)) {
                    (before, Ok(ticket)) => {
                        prop_assert!(
                            before == HelperState::Healthy || model.out.is_empty(),
                            "a degraded helper got a second job"
                        );
                        prop_assert!(!model.out.contains_key(&ticket.job), "slot handed out twice");
                        prop_assert!(
                            !model.quarantined.contains(&ticket.job),
                            "a quarantined slot reused"
                        );
                        model.out.insert(ticket.job, ticket);
                        model.number.insert(ticket.job, model.ended.len());
                        model.deadline.insert(ticket.job, now + timeout);
                        model.ended.push(0);
                    }
                    (_, Err(SubmitError::Full)) => {
                        prop_assert_eq!(model.out.len() + model.quarantined.len(), SLOTS)
                    }
                    (_, Err(SubmitError::NotAttached)) => {
                        prop_assert_ne!(table.state(), HelperState::Healthy)
                    }
                },
                Step::Complete { pick } => {
                    let Some(&ticket) = model.out.values().nth(pick % model.out.len().max(1)) else {
                        continue;
                    };
                    let done = table.complete(ticket.job, ticket.generation);
                    prop_assert_eq!(done, Ok(Completion::Done { job: ticket.job }));
                    model.end(ticket.job);
                }
                Step::Duplicate { pick } | Step::Stale { pick } => {
                    let Some(&old) = model.history.get(pick % model.history.len().max(1)) else {
                        continue;
                    };
                    let generation = match step {
                        Step::Stale { .. } => old.generation.wrapping_sub(1),
                        _ => old.generation,
                    };
                    let current = model.out.get(&old.job).copied();
                    match table.complete(old.job, generation) {
                        // Only a late completion of a slot still quarantined passes.
                        Ok(Completion::Late { job }) => {
                            prop_assert!(model.quarantined.remove(&job), "late for no quarantine");
                        }
                        Ok(Completion::Done { job }) => {
                            // Only if it names the job out now, exactly.
                            prop_assert_eq!(current.map(|t| t.generation), Some(generation));
                            model.end(job);
                        }
                        Err(_) => {
                            table.detach(|job| {
                                model.quarantined.insert(job);
                            });
                            for job in model.quarantined.clone() {
                                if model.out.contains_key(&job) {
                                    model.end(job);
                                }
                            }
                        }
                    }
                }
                Step::Garbage { job, generation } => {
                    let current = model.out.get(&job).copied();
                    match table.complete(job, generation) {
                        Ok(Completion::Done { job }) => {
                            prop_assert_eq!(current.map(|t| t.generation), Some(generation));
                            model.end(job);
                        }
                        Ok(Completion::Late { job }) => {
                            prop_assert!(model.quarantined.remove(&job));
                        }
                        Err(_) => {
                            prop_assert!(current.map(|t| t.generation) != Some(generation));
                            table.detach(|job| {
                                model.quarantined.insert(job);
                            });
                            for job in model.quarantined.clone() {
                                if model.out.contains_key(&job) {
                                    model.end(job);
                                }
                            }
                        }
                    }
                }
                Step::Tick { ns } => {
                    now += ns;
                    let mut taken = Vec::new();
                    table.expire(now, |job| taken.push(job));
                    for job in taken {
                        prop_assert!(model.out.contains_key(&job), "took back a job not out");
                        model.quarantined.insert(job);
                        model.end(job);
                    }
                    // No job stays out past its deadline.
                    for job in model.out.keys() {
                        prop_assert!(model.deadline[job] > now, "job {} overdue", job);
                    }
                }
                Step::Close => {
                    let mut taken = Vec::new();
                    table.detach(|job| taken.push(job));
                    for job in taken {
                        model.quarantined.insert(job);
                        model.end(job);
                    }
                    prop_assert!(model.out.is_empty(), "a job out after detach");
                    prop_assert_eq!(table.state(), HelperState::Detached);
                }
                Step::Gone => {
                    table.helper_gone();
                    if table.state() == HelperState::Detached {
                        model.quarantined.clear();
                    }
                }
                Step::Attach => {
                    if table.state() == HelperState::Detached {
                        table.attach();
                    }
                }
            }
            prop_assert_eq!(table.queued(), model.out.len());
            prop_assert_eq!(table.quarantined(), model.quarantined.len());
        }
        // Whatever happened, the helper's going takes back the rest: every job ends once.
        let mut taken = Vec::new();
        table.detach(|job| taken.push(job));
        for job in taken {
            model.end(job);
        }
        prop_assert!(model.ended.iter().all(|&n| n == 1), "{:?}", model.ended);
    }
}

#[test]
fn missed_deadlines_degrade_then_detach_and_an_on_time_completion_restores_trust() {
    let mut table = JobTable::new(vec![JobSlot::default(); 4]);
    table.attach();
    let first = table.submit(100).unwrap();
    let second = table.submit(10_000).unwrap();
    let mut taken = Vec::new();
    table.expire(200, |job| taken.push(job));
    assert_eq!(taken, [first.job]);
    assert_eq!(table.state(), HelperState::Degraded);
    assert_eq!(table.submit(20_000), Err(SubmitError::NotAttached));
    // The late completion of the first frees its slot; the second, on time, restores trust.
    assert_eq!(
        table.complete(first.job, first.generation),
        Ok(Completion::Late { job: first.job })
    );
    assert_eq!(table.state(), HelperState::Degraded);
    assert_eq!(
        table.complete(second.job, second.generation),
        Ok(Completion::Done { job: second.job })
    );
    assert_eq!(table.state(), HelperState::Healthy);
    // MISSES_TO_DETACH misses in a row detach: jobs due one after the other, none done.
    let mut table = JobTable::new(vec![JobSlot::default(); MISSES_TO_DETACH as usize]);
    table.attach();
    for i in 0..u64::from(MISSES_TO_DETACH) {
        table.submit(100 * (i + 1)).unwrap();
    }
    for miss in 1..=u64::from(MISSES_TO_DETACH) {
        let mut taken = 0;
        table.expire(100 * miss, |_| taken += 1);
        assert_eq!(taken, 1, "miss {miss}");
        let want = if miss < u64::from(MISSES_TO_DETACH) {
            HelperState::Degraded
        } else {
            HelperState::Detached
        };
        assert_eq!(table.state(), want, "miss {miss}");
    }
    assert_eq!(table.quarantined(), MISSES_TO_DETACH as usize);
}

#[test]
fn a_degraded_helper_gets_one_probe_job_at_a_time() {
    let mut table = JobTable::new(vec![JobSlot::default(); 4]);
    table.attach();
    let first = table.submit(100).unwrap();
    table.expire(200, |_| {});
    assert_eq!(table.state(), HelperState::Degraded);
    // Nothing out: one probe goes, a second waits for it.
    let probe = table.submit(1_000).unwrap();
    assert_ne!(probe.job, first.job, "the quarantined slot reused");
    assert_eq!(table.submit(1_000), Err(SubmitError::NotAttached));
    assert_eq!(
        table.complete(probe.job, probe.generation),
        Ok(Completion::Done { job: probe.job })
    );
    assert_eq!(table.state(), HelperState::Healthy);
    assert!(table.submit(2_000).is_ok() && table.submit(2_000).is_ok());
}

#[test]
fn a_quarantined_slot_waits_for_the_helper_to_be_gone() {
    let mut table = JobTable::new(vec![JobSlot::default(); 1]);
    table.attach();
    let t = table.submit(10).unwrap();
    table.detach(|_| {});
    table.attach();
    assert_eq!(
        table.submit(100),
        Err(SubmitError::Full),
        "reused while quarantined"
    );
    // A new helper cannot free it; only the old one's going does.
    table.detach(|_| {});
    table.helper_gone();
    table.attach();
    let again = table.submit(100).unwrap();
    assert_eq!(again.job, t.job);
    assert_ne!(again.generation, t.generation);
    // The old ticket is now a stale id.
    assert!(table.complete(t.job, t.generation).is_err());
}

#[test]
fn ring_indices_from_the_other_side_are_checked() {
    assert_eq!(ring_pending(10, 14, 8), Some(4));
    assert_eq!(ring_pending(u32::MAX - 1, 2, 8), Some(4), "wraps");
    assert_eq!(ring_pending(10, 19, 8), None, "more than the ring holds");
    assert_eq!(ring_pending(10, 9, 8), None, "behind the head");
}
