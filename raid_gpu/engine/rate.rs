// SPDX-License-Identifier: GPL-2.0

//! The speed of the array's background work (a rebuild or a check/repair, one at a time), as
//! DETAIL reports it: sectors done over the last second or so. The worker adds to it after
//! each window; anyone reads it.

use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// How long a measurement runs before it is published, in nanoseconds.
const PERIOD_NS: u64 = 1_000_000_000;

#[derive(Debug)]
pub struct RateMeter {
    /// When the current measurement began (0: none runs).
    mark_ns: AtomicU64,
    /// Sectors done since then.
    sectors: AtomicU64,
    /// The last published speed, KiB/s.
    kibs: AtomicU32,
}

impl Default for RateMeter {
    fn default() -> Self {
        Self::new()
    }
}

impl RateMeter {
    pub const fn new() -> Self {
        Self {
            mark_ns: AtomicU64::new(0),
            sectors: AtomicU64::new(0),
            kibs: AtomicU32::new(0),
        }
    }

    /// `sectors` more were done in a window that began at `started` and ended at `now`
    /// (nanoseconds on the platform's clock). The worker only.
    pub fn add(&self, started: u64, now: u64, sectors: u64) {
        let mut mark = self.mark_ns.load(Ordering::Relaxed);
        if mark == 0 {
            // The first window of a run: the measurement starts with it.
            mark = started.max(1);
            self.mark_ns.store(mark, Ordering::Relaxed);
            self.sectors.store(0, Ordering::Relaxed);
        }
        let total = self.sectors.load(Ordering::Relaxed).saturating_add(sectors);
        let elapsed = now.saturating_sub(mark);
        if elapsed < PERIOD_NS {
            self.sectors.store(total, Ordering::Relaxed);
            return;
        }
        // KiB (sectors / 2) per second, over milliseconds: no product near overflow, and no
        // 128-bit division (the kernel has none).
        let kibs = (total / 2).saturating_mul(1000) / (elapsed / 1_000_000).max(1);
        self.kibs
            .store(u32::try_from(kibs).unwrap_or(u32::MAX), Ordering::Relaxed);
        self.mark_ns.store(now.max(1), Ordering::Relaxed);
        self.sectors.store(0, Ordering::Relaxed);
    }

    /// The run ended: no speed until the next one has run a second.
    pub fn stop(&self) {
        self.mark_ns.store(0, Ordering::Relaxed);
        self.kibs.store(0, Ordering::Relaxed);
    }

    /// The speed over the last measured second or so, KiB/s; 0 when nothing runs or before
    /// the first second.
    pub fn kibs(&self) -> u32 {
        self.kibs.load(Ordering::Relaxed)
    }
}
