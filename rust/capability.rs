// SPDX-License-Identifier: GPL-2.0

//! Capability checks (`include/linux/capability.h`).

use kernel::{bindings, prelude::*};

/// Fails with `EPERM` unless the current task has `CAP_SYS_ADMIN` in the initial user namespace.
pub(crate) fn require_sys_admin() -> Result {
    // SAFETY: `capable()` only inspects the current task's credentials; any capability number
    // is accepted and CAP_SYS_ADMIN is a valid one.
    if unsafe { bindings::capable(bindings::CAP_SYS_ADMIN as i32) } {
        Ok(())
    } else {
        Err(EPERM)
    }
}
