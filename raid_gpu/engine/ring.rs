// SPDX-License-Identifier: GPL-2.0

//! The kernel's side of the parity ring's protocol (`Documentation/ring-protocol.rst`), as a
//! pure state machine: which jobs the helper holds, whether a completion it wrote may be
//! believed, which jobs must be computed in the kernel instead, and when the helper is no
//! longer trusted. Whatever the helper does (or stops doing), every job handed to
//! [`JobTable::submit`] comes back exactly once: from [`JobTable::complete`] (the helper did
//! it), or from [`JobTable::expire`] or [`JobTable::detach`] (the kernel does it).
//!
//! No locking and no memory of its own: the platform keeps the table under its lock and owns
//! the slots (`M`). The ring indices the helper writes are checked by [`ring_pending`] before
//! any entry is read.

use core::ops::DerefMut;

/// A job table slot.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JobSlot {
    state: SlotState,
    /// Bumped at every submission: a completion must name the current one.
    generation: u32,
    /// When the job is given up on (platform clock, nanoseconds).
    deadline_ns: u64,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum SlotState {
    #[default]
    Free,
    /// Published to the helper; its result is awaited.
    Queued,
    /// Given up on (expired, or the helper detached) and done by the kernel, but the helper
    /// may still write into its buffers: not reused until the helper completes it late or is
    /// gone for good.
    Quarantined,
}

/// A job the helper holds: its slot and generation, as the SQ entry carries them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ticket {
    pub job: u32,
    pub generation: u32,
}

/// Why a job could not be submitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SubmitError {
    /// No helper is attached, or it is not trusted any more: compute in the kernel.
    NotAttached,
    /// Every slot is in use: compute in the kernel.
    Full,
}

/// What a completion meant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Completion {
    /// The helper did job `job` (its status is the caller's to read): the job ends now.
    Done { job: u32 },
    /// A completion of a job the kernel already did (after its deadline): the slot's buffers
    /// are the kernel's again. Nothing else to do.
    Late { job: u32 },
}

/// A completion that cannot be believed: an unknown job, a wrong generation, a job not out.
/// The helper is detached ([`JobTable::detach`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProtocolError;

/// Where the helper stands.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HelperState {
    /// None attached.
    #[default]
    Detached,
    /// Attached and trusted: jobs go to it.
    Healthy,
    /// It missed a deadline: one job at a time until it completes one on time again.
    Degraded,
}

/// How many missed deadlines in a row detach the helper.
pub const MISSES_TO_DETACH: u32 = 4;

/// The job table: slots in a caller-owned slice (`M`), the helper's state and its record.
#[derive(Debug)]
pub struct JobTable<M> {
    slots: M,
    state: HelperState,
    /// Deadlines missed in a row.
    misses: u32,
    /// Where the search for a free slot starts (spreads reuse, so a stale completion names a
    /// slot that moved on to a new generation less often).
    cursor: usize,
}

impl<M: DerefMut<Target = [JobSlot]>> JobTable<M> {
    /// A table over `slots` (all free), no helper attached.
    pub fn new(mut slots: M) -> Self {
        slots.fill(JobSlot::default());
        Self {
            slots,
            state: HelperState::Detached,
            misses: 0,
            cursor: 0,
        }
    }

    pub fn state(&self) -> HelperState {
        self.state
    }

    /// A helper attached. Slots still quarantined from a former helper stay so (its pins may
    /// outlive its file) until [`Self::helper_gone`].
    pub fn attach(&mut self) {
        self.state = HelperState::Healthy;
        self.misses = 0;
    }

    /// Jobs the helper holds now.
    pub fn queued(&self) -> usize {
        self.count(SlotState::Queued)
    }

    /// Slots the kernel may not reuse yet.
    pub fn quarantined(&self) -> usize {
        self.count(SlotState::Quarantined)
    }

    fn count(&self, state: SlotState) -> usize {
        self.slots.iter().filter(|s| s.state == state).count()
    }

    /// Takes a free slot for a job the helper must finish by `deadline_ns`; the SQ entry
    /// carries the ticket.
    /// A degraded helper gets one job at a time (a probe: completed on time, it is healthy
    /// again), so a helper that was only slow for a while earns its way back.
    pub fn submit(&mut self, deadline_ns: u64) -> Result<Ticket, SubmitError> {
        let probe = self.state == HelperState::Degraded && self.queued() == 0;
        if self.state != HelperState::Healthy && !probe {
            return Err(SubmitError::NotAttached);
        }
        let n = self.slots.len();
        let start = self.cursor.min(n);
        let found = (start..n).chain(0..start).find(|&i| {
            self.slots
                .get(i)
                .is_some_and(|s| s.state == SlotState::Free)
        });
        let Some(index) = found else {
            return Err(SubmitError::Full);
        };
        let job = u32::try_from(index).map_err(|_| SubmitError::Full)?;
        let slot = self.slots.get_mut(index).ok_or(SubmitError::Full)?;
        slot.generation = slot.generation.wrapping_add(1);
        slot.state = SlotState::Queued;
        slot.deadline_ns = deadline_ns;
        self.cursor = index.saturating_add(1);
        Ok(Ticket {
            job,
            generation: slot.generation,
        })
    }

    /// A completion the helper wrote for `job` of `generation`. Believed only for a job out
    /// with that generation (or, late, one the kernel already took back); anything else is a
    /// protocol error, and the caller detaches the helper.
    pub fn complete(&mut self, job: u32, generation: u32) -> Result<Completion, ProtocolError> {
        let slot = self
            .slots
            .get_mut(job as usize)
            .filter(|s| s.generation == generation)
            .ok_or(ProtocolError)?;
        match slot.state {
            SlotState::Queued => {
                slot.state = SlotState::Free;
                // On time: the helper earns its trust back.
                self.misses = 0;
                if self.state == HelperState::Degraded {
                    self.state = HelperState::Healthy;
                }
                Ok(Completion::Done { job })
            }
            SlotState::Quarantined => {
                slot.state = SlotState::Free;
                Ok(Completion::Late { job })
            }
            SlotState::Free => Err(ProtocolError),
        }
    }

    /// Takes back every job whose deadline passed by `now_ns` (quarantined: the kernel computes
    /// them, calling `take` for each) and counts the misses: one degrades the helper,
    /// [`MISSES_TO_DETACH`] in a row detach it (then every job is taken back).
    pub fn expire(&mut self, now_ns: u64, mut take: impl FnMut(u32)) {
        let mut missed = false;
        for (job, slot) in (0u32..).zip(self.slots.iter_mut()) {
            if slot.state == SlotState::Queued && slot.deadline_ns <= now_ns {
                slot.state = SlotState::Quarantined;
                missed = true;
                take(job);
            }
        }
        if !missed {
            return;
        }
        self.misses = self.misses.saturating_add(1);
        if self.misses >= MISSES_TO_DETACH {
            self.detach(take);
        } else if self.state == HelperState::Healthy {
            self.state = HelperState::Degraded;
        }
    }

    /// The helper is detached (it closed its file, broke the protocol, or missed too much):
    /// every job it holds is taken back (quarantined; `take` for each) and no new one goes out.
    pub fn detach(&mut self, mut take: impl FnMut(u32)) {
        self.state = HelperState::Detached;
        for (job, slot) in (0u32..).zip(self.slots.iter_mut()) {
            if slot.state == SlotState::Queued {
                slot.state = SlotState::Quarantined;
                take(job);
            }
        }
    }

    /// Nothing of the former helper can touch the buffers any more (its file is released and
    /// its pins dropped): quarantined slots are free again. Only while detached.
    pub fn helper_gone(&mut self) {
        if self.state != HelperState::Detached {
            return;
        }
        for slot in self.slots.iter_mut() {
            if slot.state == SlotState::Quarantined {
                slot.state = SlotState::Free;
            }
        }
    }
}

/// Entries `[head, tail)` of a ring of `entries` (a power of two) with free-running indices:
/// how many are pending, or `None` when `tail` (written by the other side) is impossible (more
/// than the ring holds: a protocol error).
pub fn ring_pending(head: u32, tail: u32, entries: u32) -> Option<u32> {
    let pending = tail.wrapping_sub(head);
    (pending <= entries).then_some(pending)
}
