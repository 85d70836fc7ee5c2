// SPDX-License-Identifier: GPL-2.0

//! Counters of the write path for debugfs (`/sys/kernel/debug/graid/`), kept per array: a
//! write counts in its own array's cache lines, never in one that every array shares. When an
//! array goes, its counts fold into a module-wide total of the arrays gone, so a file reads as
//! what every array did since the module loaded (the stopped ones included). Counted, never
//! used for decisions.

use core::sync::atomic::{AtomicU64, Ordering};

/// `N` counters of one array; folded into `gone` when dropped.
pub(crate) struct Counters<const N: usize> {
    values: [AtomicU64; N],
    gone: &'static [AtomicU64; N],
}

impl<const N: usize> Counters<N> {
    pub(crate) const fn new(gone: &'static [AtomicU64; N]) -> Self {
        Self {
            values: [const { AtomicU64::new(0) }; N],
            gone,
        }
    }

    /// Adds `n` to counter `which` (an index below `N`; a wrong one counts nothing).
    pub(crate) fn add(&self, which: usize, n: u64) {
        if let Some(counter) = self.values.get(which) {
            counter.fetch_add(n, Ordering::Relaxed);
        }
    }

    fn add_into(&self, sums: &mut [u64; N]) {
        for (sum, value) in sums.iter_mut().zip(&self.values) {
            *sum = sum.wrapping_add(value.load(Ordering::Relaxed));
        }
    }
}

impl<const N: usize> Drop for Counters<N> {
    fn drop(&mut self) {
        for (gone, value) in self.gone.iter().zip(&self.values) {
            gone.fetch_add(value.load(Ordering::Relaxed), Ordering::Relaxed);
        }
    }
}

/// The module-wide total of the arrays gone, for [`Counters::new`].
pub(crate) const fn gone<const N: usize>() -> [AtomicU64; N] {
    [const { AtomicU64::new(0) }; N]
}

/// Writes `name: value` lines: `gone` plus every running array's counters (`of` picks them
/// out of an array's I/O state).
pub(crate) fn write_totals<const N: usize>(
    f: &mut kernel::fmt::Formatter<'_>,
    names: [&str; N],
    gone: &'static [AtomicU64; N],
    of: fn(&crate::io::ArrayIo) -> &Counters<N>,
) -> kernel::fmt::Result {
    let mut sums = [0u64; N];
    for (sum, value) in sums.iter_mut().zip(gone) {
        *sum = value.load(Ordering::Relaxed);
    }
    crate::control::for_each_running_array(|io| of(io).add_into(&mut sums));
    for (name, sum) in names.iter().zip(sums) {
        writeln!(f, "{name}: {sum}")?;
    }
    Ok(())
}
