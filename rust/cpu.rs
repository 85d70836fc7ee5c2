// SPDX-License-Identifier: GPL-2.0

//! The current CPU (`include/linux/smp.h`).

use crate::kernel_ext::shim;

/// The CPU running the caller, as a hint: the task may move right after (no preemption is
/// disabled), which is fine for spreading counters over cache lines.
pub(crate) fn current_cpu() -> u32 {
    // SAFETY: reads a per-CPU variable; no preconditions.
    unsafe { shim::graid_raw_smp_processor_id() }
}
