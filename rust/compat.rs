// SPDX-License-Identifier: GPL-2.0

//! What differs between the kernel series graid builds for, in one place.
//!
//! graid supports several kernel series at once (`KERNEL_SERIES_SUPPORTED` in
//! `build/versions.env`), and the `kernel` crate and the C structures bindgen generates change
//! between them. Everything else in the module is written once, against the functions here;
//! only this file branches, on the `graid_since_X_Y` flags `Kbuild` passes for every series
//! from X.Y up to the one being built against (`Documentation/build.rst`, "Taking on a new
//! kernel series", says how a series is added).

use kernel::{bindings, module_param::ModuleParamAccess};

/// The value of a module parameter: the one given at load time, or its default.
///
/// 7.3 returns it by value (`value()`, with `value_ref()` for the reference 7.2's `value()`
/// returned).
#[inline]
pub(crate) fn param<T: Copy>(param: &ModuleParamAccess<T>) -> T {
    #[cfg(graid_since_7_3)]
    {
        param.value()
    }
    #[cfg(not(graid_since_7_3))]
    {
        *param.value()
    }
}

/// A sysfs file's read handler, as `struct kobj_attribute` takes it.
pub(crate) type KobjShow = unsafe extern "C" fn(
    *mut bindings::kobject,
    *mut bindings::kobj_attribute,
    *mut kernel::ffi::c_char,
) -> isize;

/// A sysfs file's write handler, as `struct kobj_attribute` takes it.
pub(crate) type KobjStore = unsafe extern "C" fn(
    *mut bindings::kobject,
    *mut bindings::kobj_attribute,
    *const kernel::ffi::c_char,
    usize,
) -> isize;

/// Sets a `kobj_attribute`'s read and write handlers.
///
/// 7.3 put each beside a variant taking a `const` attribute (`show_const`, `store_const`), in
/// an anonymous union (a struct under CFI), which bindgen names `__bindgen_anon_N`; the
/// non-`const` handlers keep their old types.
pub(crate) const fn set_kobj_handlers(
    attr: &mut bindings::kobj_attribute,
    show: KobjShow,
    store: Option<KobjStore>,
) {
    #[cfg(graid_since_7_3)]
    {
        attr.__bindgen_anon_1.show = Some(show);
        attr.__bindgen_anon_2.store = store;
    }
    #[cfg(not(graid_since_7_3))]
    {
        attr.show = Some(show);
        attr.store = store;
    }
}
