// SPDX-License-Identifier: GPL-2.0

//! sysfs directories of a driver's own files (as md's `md/` beside a disk's attributes,
//! `include/linux/kobject.h`, `include/linux/sysfs.h`).
//!
//! A [`Dir`] is a kobject named under a parent kobject, with the files of a static
//! [`AttributeList`]. Every file reads and writes through the [`Files`] implementation of the
//! object that owns the directory, told which directory by the key it was created with.
//! Dropping the `Dir` removes it and waits for the reads and writes under way (kernfs drains
//! them), so its owner only has to outlive the `Dir`.

use core::{
    fmt,
    ptr::{self, NonNull},
    sync::atomic::{AtomicUsize, Ordering},
};
use super::compat::{set_kobj_handlers, KobjStore};
use kernel::{
    bindings,
    error::to_result,
    ffi::{c_char, c_void},
    page::PAGE_SIZE,
    prelude::*,
    str::{as_char_ptr_in_const_context, CStrExt},
};

/// What a directory's files read and take, for the object that owns the directory.
pub(crate) trait Files: Sync {
    /// Writes the text of file `name` in the directory created with `key` to `out`.
    fn show(&self, key: u32, name: &str, out: &mut Page<'_>) -> Result;
    /// Takes `text`, written to file `name` in the directory created with `key`.
    fn store(&self, key: u32, name: &str, text: &[u8]) -> Result;
}

/// The page a file's text is written to (sysfs gives a whole page).
pub(crate) struct Page<'a> {
    buf: &'a mut [u8],
    len: usize,
}

impl fmt::Write for Page<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let end = self.len.checked_add(s.len()).ok_or(fmt::Error)?;
        let dst = self.buf.get_mut(self.len..end).ok_or(fmt::Error)?;
        dst.copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

/// One file of a directory.
pub(crate) struct Attribute(bindings::kobj_attribute);

// SAFETY: never changed after it is built; the C side only reads it.
unsafe impl Sync for Attribute {}

impl Attribute {
    /// File `name`: read-only (0444), or written by root too (0644) if `writable`.
    pub(crate) const fn new(name: &'static CStr, writable: bool) -> Self {
        let mut attr: bindings::kobj_attribute = pin_init::zeroed();
        attr.attr.name = as_char_ptr_in_const_context(name);
        attr.attr.mode = if writable { 0o644 } else { 0o444 };
        let store: Option<KobjStore> = if writable {
            Some(store_callback)
        } else {
            None
        };
        set_kobj_handlers(&mut attr, show_callback, store);
        Self(attr)
    }
}

/// A directory's files: a NULL-terminated table of pointers to [`Attribute`]s, `N` - 1 at
/// most (`sysfs_create_files`' argument).
pub(crate) struct AttributeList<const N: usize>([*const bindings::attribute; N]);

// SAFETY: pointers to immutable statics, only read.
unsafe impl<const N: usize> Sync for AttributeList<N> {}

impl<const N: usize> AttributeList<N> {
    /// The list of `files`, whose length must be `N` - 1 (checked at build time).
    pub(crate) const fn new(files: &'static [Attribute]) -> Self {
        let mut list = [ptr::null(); N];
        let mut i = 0;
        while i < files.len() && i + 1 < N {
            list[i] = &raw const files[i].0.attr;
            i += 1;
        }
        // In a static's initializer, which is where lists are built, a wrong length fails the
        // build.
        assert!(files.len() + 1 == N);
        Self(list)
    }
}

/// A directory's kobject and what its files need.
#[repr(C)]
struct DirObject {
    kobj: bindings::kobject,
    owner: *const c_void,
    key: u32,
    show: unsafe fn(*const c_void, u32, &str, &mut Page<'_>) -> Result,
    store: unsafe fn(*const c_void, u32, &str, &[u8]) -> Result,
}

/// # Safety
///
/// `owner` must point at a live `T`.
unsafe fn show_for<T: Files>(
    owner: *const c_void,
    key: u32,
    name: &str,
    out: &mut Page<'_>,
) -> Result {
    // SAFETY: by the caller's contract.
    unsafe { &*owner.cast::<T>() }.show(key, name, out)
}

/// # Safety
///
/// `owner` must point at a live `T`.
unsafe fn store_for<T: Files>(owner: *const c_void, key: u32, name: &str, text: &[u8]) -> Result {
    // SAFETY: by the caller's contract.
    unsafe { &*owner.cast::<T>() }.store(key, name, text)
}

struct KobjType(bindings::kobj_type);

// SAFETY: never changed; the C side only reads it.
unsafe impl Sync for KobjType {}

static DIR_KTYPE: KobjType = KobjType({
    let mut ktype: bindings::kobj_type = pin_init::zeroed();
    ktype.release = Some(release_callback);
    ktype.sysfs_ops = &raw const bindings::kobj_sysfs_ops;
    ktype
});

/// Directories whose kobject is not released yet. A release can come well after the `Dir`
/// went (`CONFIG_DEBUG_KOBJECT_RELEASE` delays it by seconds, and a reader of one of its files
/// holds it), and it runs [`release_callback`], in this module's text: the module's exit waits
/// for them ([`wait_for_releases`]).
static UNRELEASED: AtomicUsize = AtomicUsize::new(0);

/// Waits until every directory's kobject was released. Module exit only (process context).
pub(crate) fn wait_for_releases() {
    while UNRELEASED.load(Ordering::Acquire) != 0 {
        // SAFETY: module exit may sleep.
        unsafe { bindings::msleep(10) };
    }
}

/// Frees a [`DirObject`] after its last reference went.
///
/// # Safety
///
/// Called by the kobject core with the `kobj` of a `DirObject` made by [`Dir::new`].
unsafe extern "C" fn release_callback(kobj: *mut bindings::kobject) {
    // SAFETY: `kobj` is the first field of a `DirObject` that `Dir::new` leaked from a box.
    drop(unsafe { KBox::from_raw(kobj.cast::<DirObject>()) });
    // Last: the module may go once the count is 0 (nothing of it runs after this but the return).
    UNRELEASED.fetch_sub(1, Ordering::Release);
}

/// The file's name and the directory it is in.
///
/// # Safety
///
/// `kobj` must be a live [`DirObject`]'s and `attr` one of the [`Attribute`]s in its list.
unsafe fn file<'a>(
    kobj: *mut bindings::kobject,
    attr: *const bindings::kobj_attribute,
) -> Option<(&'a DirObject, &'a str)> {
    // SAFETY: by the caller's contract; attribute names are static C strings.
    unsafe {
        let dir = &*kobj.cast::<DirObject>();
        let name = CStr::from_char_ptr((*attr).attr.name).to_str().ok()?;
        Some((dir, name))
    }
}

/// # Safety
///
/// Called by sysfs for a file of a live [`Dir`], with a page-sized `buf`.
unsafe extern "C" fn show_callback(
    kobj: *mut bindings::kobject,
    attr: *mut bindings::kobj_attribute,
    buf: *mut c_char,
) -> isize {
    // SAFETY: sysfs only calls for the files of a directory it has not removed; dropping the
    // `Dir` removes it (waiting for this call) before its owner goes.
    let Some((dir, name)) = (unsafe { file(kobj, attr) }) else {
        return EINVAL.to_errno() as isize;
    };
    // SAFETY: sysfs hands `show` a zeroed page of its own.
    let buf = unsafe { core::slice::from_raw_parts_mut(buf.cast::<u8>(), PAGE_SIZE) };
    let mut page = Page { buf, len: 0 };
    // SAFETY: the owner outlives the directory (`Dir::new`'s contract).
    match unsafe { (dir.show)(dir.owner, dir.key, name, &mut page) } {
        Ok(()) => page.len as isize,
        Err(e) => e.to_errno() as isize,
    }
}

/// # Safety
///
/// Called by sysfs for a writable file of a live [`Dir`], with `count` bytes at `buf`.
unsafe extern "C" fn store_callback(
    kobj: *mut bindings::kobject,
    attr: *mut bindings::kobj_attribute,
    buf: *const c_char,
    count: usize,
) -> isize {
    // SAFETY: as in `show_callback`.
    let Some((dir, name)) = (unsafe { file(kobj, attr) }) else {
        return EINVAL.to_errno() as isize;
    };
    // SAFETY: sysfs passes the `count` bytes written (copied into its own buffer).
    let text = unsafe { core::slice::from_raw_parts(buf.cast::<u8>(), count) };
    // SAFETY: as in `show_callback`.
    match unsafe { (dir.store)(dir.owner, dir.key, name, text) } {
        Ok(()) => count as isize,
        Err(e) => e.to_errno() as isize,
    }
}

/// A directory in sysfs, removed when dropped.
///
/// # Invariants
///
/// `kobj` is the `kobj` of a [`DirObject`] added to sysfs, on which this holds a reference.
pub(crate) struct Dir {
    kobj: NonNull<bindings::kobject>,
}

// SAFETY: a kobject may be removed and put from any process context.
unsafe impl Send for Dir {}
// SAFETY: `&Dir` only gives out the kobject pointer.
unsafe impl Sync for Dir {}

impl Dir {
    /// Creates directory `name` under `parent` holding `files`, which read and write through
    /// `owner`, told `key`.
    ///
    /// # Safety
    ///
    /// `parent` must be a live kobject, and `owner` must outlive the returned `Dir`.
    pub(crate) unsafe fn new<T: Files, const N: usize>(
        parent: *mut bindings::kobject,
        name: &CStr,
        files: &'static AttributeList<N>,
        owner: &T,
        key: u32,
    ) -> Result<Self> {
        let object = KBox::new(
            DirObject {
                kobj: pin_init::zeroed(),
                owner: ptr::from_ref(owner).cast(),
                key,
                show: show_for::<T>,
                store: store_for::<T>,
            },
            GFP_KERNEL,
        )?;
        // The kobject owns the box from here (`release_callback` frees it).
        UNRELEASED.fetch_add(1, Ordering::Relaxed);
        let kobj = NonNull::from(KBox::leak(object)).cast::<bindings::kobject>();
        // SAFETY: `kobj` is zeroed and not yet initialised; the kobject owns the box, also when
        // adding fails.
        let added = unsafe {
            bindings::kobject_init_and_add(
                kobj.as_ptr(),
                &DIR_KTYPE.0,
                parent,
                c"%s".as_char_ptr(),
                name.as_char_ptr(),
            )
        };
        if added != 0 {
            // SAFETY: as `kobject_init_and_add` asks after a failure; frees the box.
            unsafe { bindings::kobject_put(kobj.as_ptr()) };
            return Err(Error::from_errno(added));
        }
        // The invariant holds from here.
        let dir = Self { kobj };
        // SAFETY: the kobject is in sysfs; the list is NULL-terminated and static.
        to_result(unsafe { bindings::sysfs_create_files(kobj.as_ptr(), files.0.as_ptr()) })?;
        Ok(dir)
    }

    /// The directory's kobject, a parent for directories under it.
    pub(crate) fn kobject(&self) -> *mut bindings::kobject {
        self.kobj.as_ptr()
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        // SAFETY: by the type invariant. `kobject_del` removes the directory and its files and
        // waits for their callbacks under way; the put frees the object once directories
        // under it let go of it too.
        unsafe {
            bindings::kobject_del(self.kobj.as_ptr());
            bindings::kobject_put(self.kobj.as_ptr());
        }
    }
}
