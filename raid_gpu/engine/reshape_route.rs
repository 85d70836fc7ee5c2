// SPDX-License-Identifier: GPL-2.0

//! Which geometry maps a request while a reshape runs (issue 46: the seam between the request
//! path and a moving window; the design is `on-disk-format.rst`, "Reshape (design)").
//!
//! Two positions move, one way only, both in array sectors of the content ([`ReshapePlan`]):
//!
//! - the **recorded** position `P`, the one the superblocks hold: on the new side of it every
//!   sector is in the new geometry and durable, so a request there maps new;
//! - the **front**: the far edge of the window being moved (forwards its end, backwards its
//!   start). On the old side of it nothing was moved or is being moved: a request there maps
//!   old;
//! - the **settled** position, between them: the far edge of what was moved whole (the front
//!   once a window's move ended, behind it while one moves). A read there finds the new rows
//!   whole, and nothing writes them until a record lets writes in.
//!
//! Between them lie the sectors moved since `P` was recorded and the window in motion: a
//! request meeting them waits ([`Route::Wait`]) until the superblocks record a position past it
//! (a restart from `P` would copy the old contents over a write let in there, which is why
//! md's writes between `reshape_safe` and `reshape_progress` wait too). A request across a
//! boundary that it could take in parts is split there ([`Route::Split`]).
//!
//! Ordering: the worker moves the front before it moves a window (and, with the barrier that
//! is the rebuild's, waits for the requests that mapped old there to end), and records a
//! position only after the superblocks hold it. A request reads the recorded position first
//! and the front second: a pair from two moments is the older position with the newer front,
//! which only widens what waits (both move away from the old side).

use super::geometry::Geometry;
use super::reshape::{Direction, PlanCell, ReshapePlan};
use core::sync::atomic::{AtomicU64, Ordering};

/// Where a request's range goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// Wholly in the old geometry, outside anything moved or moving.
    Old(Geometry),
    /// Wholly in the new geometry and recorded.
    New(Geometry),
    /// Meets sectors moved but not recorded, or the window in motion: wait for the next record.
    /// So does anything past the content (a grow's new room: its new rows may still hold old
    /// data, so the array takes its new size when the reshape ends, as md's does, and nothing
    /// is sent there before).
    Wait,
    /// Crosses a boundary between parts that map differently: split at this array sector.
    Split(u64),
}

/// The positions of a running reshape, and its plan.
#[derive(Debug, Default)]
pub struct ReshapeRoute {
    plan: PlanCell,
    recorded: AtomicU64,
    front: AtomicU64,
    settled: AtomicU64,
}

impl ReshapeRoute {
    /// A reshape by `plan` whose superblocks record `recorded` (its start, or where a restart
    /// takes it up), with no window in motion.
    pub fn new(plan: ReshapePlan, recorded: u64) -> Self {
        let route = Self::default();
        route.install(&plan, recorded);
        route
    }

    /// Makes `plan` the one routed by, from `recorded` with no window in motion. Only where
    /// nobody routes (a reshape's start or restart, with no request in the engine).
    pub fn install(&self, plan: &ReshapePlan, recorded: u64) {
        self.plan.store(plan);
        self.recorded.store(recorded, Ordering::SeqCst);
        self.front.store(recorded, Ordering::SeqCst);
        self.settled.store(recorded, Ordering::SeqCst);
    }

    /// The plan; `None` before one was installed.
    pub fn plan(&self) -> Option<ReshapePlan> {
        self.plan.load()
    }

    /// The position the superblocks hold.
    pub fn recorded(&self) -> u64 {
        self.recorded.load(Ordering::SeqCst)
    }

    /// The far edge of what was moved or is moving.
    pub fn front(&self) -> u64 {
        self.front.load(Ordering::SeqCst)
    }

    /// The far edge of what was moved whole.
    pub fn settled(&self) -> u64 {
        self.settled.load(Ordering::SeqCst)
    }

    /// The window up to the front was moved whole (the worker, after its writes ended): reads
    /// there map new from now on. False (nothing changes) if `position` is not the front.
    pub fn settle(&self, position: u64) -> bool {
        let onward = position == self.front();
        if onward {
            self.settled.store(position, Ordering::SeqCst);
        }
        onward
    }

    /// The worker is about to move the window up to `front` (its end forwards, its start
    /// backwards). Only away from the old side; false (nothing changes) otherwise.
    pub fn move_front(&self, front: u64) -> bool {
        let Some(plan) = self.plan() else {
            return false;
        };
        let now = self.front();
        let onward = match plan.direction() {
            Direction::Forwards => front >= now && front <= plan.content(),
            Direction::Backwards => front <= now,
        };
        if onward {
            self.front.store(front, Ordering::SeqCst);
        }
        onward
    }

    /// The worker gives a window it closed back, unmoved (the requests it waited for did not
    /// end): the front returns to `front`, the position it had. Requests there map old again,
    /// which is right: the step wrote nothing a restart or the old geometry needs (the plan's
    /// rule). Never behind the recorded position.
    pub fn retreat(&self, front: u64) -> bool {
        let Some(plan) = self.plan() else {
            return false;
        };
        let recorded = self.recorded();
        let behind = match plan.direction() {
            Direction::Forwards => front >= recorded,
            Direction::Backwards => front <= recorded,
        };
        if behind {
            self.front.store(front, Ordering::SeqCst);
        }
        behind
    }

    /// The superblocks hold `position` now (the worker, after they were written). Never past
    /// the front, and only away from the old side; false (nothing changes) otherwise.
    pub fn record(&self, position: u64) -> bool {
        let Some(plan) = self.plan() else {
            return false;
        };
        let (now, front) = (self.recorded(), self.front());
        let onward = match plan.direction() {
            Direction::Forwards => position >= now && position <= front,
            Direction::Backwards => position <= now && position >= front,
        };
        if onward {
            self.recorded.store(position, Ordering::SeqCst);
        }
        onward
    }

    /// Where array sectors `start..start + sectors` go now.
    pub fn route(&self, start: u64, sectors: u64) -> Route {
        self.route_for(start, sectors, false)
    }

    /// [`Self::route`] for a read while the data moves, which never waits as a write must
    /// (md's reads do not wait either): the sectors moved whole read from the new geometry (the
    /// rows are whole, and writes there wait for a record), the window in motion from the old
    /// one, which still holds them whole (no step writes over the old rows a restart from the
    /// recorded position needs). A record waits for the reads mapped old below it before it
    /// lets writes in there (the new rows they write may lie on the old rows those read).
    pub fn route_read(&self, start: u64, sectors: u64) -> Route {
        self.route_for(start, sectors, true)
    }

    fn route_for(&self, start: u64, sectors: u64, read: bool) -> Route {
        let Some(plan) = self.plan() else {
            return Route::Wait;
        };
        // The recorded position first, then the front (module comment); a read's edges are
        // the settled position, both sides of it.
        let recorded = self.recorded();
        let front = self.front();
        let (recorded, front) = if read {
            let settled = self.settled();
            (settled, settled)
        } else {
            (recorded, front)
        };
        let end = start.saturating_add(sectors.max(1));
        let content = plan.content();
        let old = Route::Old(plan.old());
        let new = Route::New(plan.new_geometry());
        let cut = |at: u64| start < at && at < end;
        match plan.direction() {
            Direction::Forwards => {
                // Below the recorded position new; from the front up to the content's end old;
                // in between wait.
                let old_from = front;
                if end <= recorded {
                    new
                } else if start >= old_from && end <= content {
                    old
                } else if cut(recorded) {
                    Route::Split(recorded)
                } else if start >= old_from && cut(content) {
                    Route::Split(content)
                } else {
                    Route::Wait
                }
            }
            Direction::Backwards => {
                // From the recorded position up new (the content ends the array); below the
                // front old; in between wait.
                let old_below = front;
                if start >= recorded {
                    new
                } else if end <= old_below {
                    old
                } else if cut(old_below) {
                    Route::Split(old_below)
                } else {
                    Route::Wait
                }
            }
        }
    }
}
