// SPDX-License-Identifier: GPL-2.0

//! A reference on this module (`__module_get`/`module_put` on `THIS_MODULE`, in `shim.c`,
//! where it is a link-time constant in every kernel series).
//!
//! Each running array holds one, so `rmmod raid_gpu` refuses (`in use`) while an array runs,
//! as md's personality modules do, instead of stopping the arrays itself.

use super::shim;

/// A reference on this module, given back when dropped.
pub(crate) struct ModuleRef(());

impl ModuleRef {
    /// Takes a reference. Only from this module's own code (an ioctl of its control device,
    /// whose open file already holds one), so the module is live.
    pub(crate) fn take() -> Self {
        // SAFETY: `THIS_MODULE` is this module, live while its code runs: `__module_get` only
        // increments its count.
        unsafe { shim::graid_module_get() };
        Self(())
    }
}

impl Drop for ModuleRef {
    fn drop(&mut self) {
        // SAFETY: gives back the reference `take` took. Dropped only in this module's code
        // reached through a file of its own (the control device's STOP ioctl), whose reference
        // keeps the module's text until that call returns.
        unsafe { shim::graid_module_put() };
    }
}
