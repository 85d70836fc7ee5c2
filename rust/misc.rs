// SPDX-License-Identifier: GPL-2.0

//! Misc character devices (`include/linux/miscdevice.h`) with a `file_operations` of our own.
//!
//! `kernel::miscdevice` in 7.2 leaves `fops.owner` NULL, so nothing stops the module from being
//! unloaded while one of its files is open. This registration owns its `file_operations`, sets
//! `owner` so the VFS holds a module reference for every open file, and dispatches every file
//! of the device to one shared [`MiscOps`] value living in the registration itself.

use kernel::ffi::{c_int, c_long, c_uint, c_ulong};
use kernel::{
    bindings,
    error::{from_result, to_result},
    fs::File,
    mm::virt::VmaNew,
    prelude::*,
    sync::poll::PollTable,
    types::Opaque,
};

/// What a misc device does. One value serves every open file of the device.
pub(crate) trait MiscOps: Send + Sync + Sized {
    /// The device can be mapped ([`Self::mmap`]); otherwise `mmap` fails with `ENODEV`.
    const MMAP: bool = false;

    /// The device can be polled ([`Self::poll`]).
    const POLL: bool = false;

    /// Decides whether `file` may be opened.
    fn open(&self, file: &File) -> Result;

    /// The last reference to an open `file` is gone. Nothing by default.
    fn release(&self, _file: &File) {}

    /// Handles an ioctl on an open file. Unknown commands must fail with `ENOTTY`.
    fn ioctl(&self, file: &File, cmd: u32, arg: usize) -> Result<isize>;

    /// Maps part of the device into a new `vma` of `file` (only with [`Self::MMAP`]).
    fn mmap(&self, _file: &File, _vma: &VmaNew) -> Result {
        Err(ENODEV)
    }

    /// Registers `table` with what wakes `file`'s pollers and returns the `EPOLL*` events ready
    /// now (only with [`Self::POLL`]).
    fn poll(&self, _file: &File, _table: &PollTable<'_>) -> u32 {
        0
    }
}

/// A registered misc device.
///
/// # Invariants
///
/// `misc` is registered with `misc_register()` for the whole life of this value and points at
/// `fops`; deregistration happens exactly once, in `drop`.
#[pin_data(PinnedDrop)]
pub(crate) struct MiscRegistration<T: MiscOps> {
    #[pin]
    ops: T,
    #[pin]
    fops: Opaque<bindings::file_operations>,
    #[pin]
    misc: Opaque<bindings::miscdevice>,
}

// SAFETY: the raw C structs are only touched by the VFS and at registration and deregistration,
// which may happen on any thread; `ops` is itself `Send`.
unsafe impl<T: MiscOps> Send for MiscRegistration<T> {}
// SAFETY: `&self` only gives access to `ops`, which is `Sync`.
unsafe impl<T: MiscOps> Sync for MiscRegistration<T> {}

impl<T: MiscOps> MiscRegistration<T> {
    /// Registers `/dev/<name>` with the given file mode, owned by `module`.
    pub(crate) fn register(
        name: &'static CStr,
        mode: u16,
        module: &'static ThisModule,
        ops: impl PinInit<T, Error>,
    ) -> impl PinInit<Self, Error> {
        try_pin_init!(&this in Self {
            ops <- ops,
            fops <- Opaque::ffi_init(move |slot: *mut bindings::file_operations| {
                let mut fops: bindings::file_operations = pin_init::zeroed();
                fops.owner = module.as_ptr();
                fops.open = Some(Self::open_callback);
                fops.release = Some(Self::release_callback);
                fops.unlocked_ioctl = Some(Self::ioctl_callback);
                if T::MMAP {
                    fops.mmap = Some(Self::mmap_callback);
                }
                if T::POLL {
                    fops.poll = Some(Self::poll_callback);
                }
                #[cfg(CONFIG_COMPAT)]
                {
                    fops.compat_ioctl = bindings::compat_ptr_ioctl;
                }
                fops.llseek = Some(bindings::noop_llseek);
                // SAFETY: the initializer may write to `slot`.
                unsafe { slot.write(fops) };
            }),
            misc <- Opaque::try_ffi_init(move |slot: *mut bindings::miscdevice| {
                let mut misc: bindings::miscdevice = pin_init::zeroed();
                misc.minor = bindings::MISC_DYNAMIC_MINOR as c_int;
                misc.name = name.as_char_ptr();
                misc.mode = mode;
                // SAFETY: `this` points at the value being initialised, whose `fops` field was
                // initialised above; the pointer stays valid while registered, as the value is
                // pinned and deregisters in `drop`.
                misc.fops = unsafe { Opaque::cast_into(&raw const (*this.as_ptr()).fops) };
                // SAFETY: the initializer may write to `slot`.
                unsafe { slot.write(misc) };
                // SAFETY: `slot` holds a fully initialised miscdevice whose `ops` and `fops` are
                // initialised; it stays pinned until `drop` deregisters it.
                // INVARIANT: on success `misc` is registered.
                to_result(unsafe { bindings::misc_register(slot) })
            }),
        })
    }

    /// The registration a file of this device belongs to.
    ///
    /// # Safety
    ///
    /// `file` must be an open file of a device registered by a `MiscRegistration<T>`, whose
    /// `private_data` still holds the `miscdevice` pointer `misc_open()` stored there.
    unsafe fn from_file<'a>(file: *mut bindings::file) -> &'a Self {
        // SAFETY: by the function's safety requirements.
        let misc = unsafe { (*file).private_data }.cast::<Opaque<bindings::miscdevice>>();
        // SAFETY: `misc` points at the `misc` field of a live `MiscRegistration<T>`: the VFS
        // holds a reference on the owning module while the file is open, and the registration
        // outlives every open of its device.
        unsafe { &*kernel::container_of!(misc, Self, misc) }
    }

    /// # Safety
    ///
    /// Called by `misc_open()` for a file of a device registered by `Self`.
    unsafe extern "C" fn open_callback(_inode: *mut bindings::inode, file: *mut bindings::file) -> c_int {
        // SAFETY: `misc_open()` set `private_data` to our `miscdevice` before calling us.
        let this = unsafe { Self::from_file(file) };
        // SAFETY: `file` is valid for the duration of this call.
        let file = unsafe { File::from_raw_file(file) };
        from_result(|| {
            this.ops.open(file)?;
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Called by the VFS when the last reference to a file opened through `open_callback`
    /// goes.
    unsafe extern "C" fn release_callback(
        _inode: *mut bindings::inode,
        file: *mut bindings::file,
    ) -> c_int {
        // SAFETY: the file was opened through `open_callback`, so `private_data` is ours.
        let this = unsafe { Self::from_file(file) };
        // SAFETY: `file` is valid for the duration of this call.
        let file = unsafe { File::from_raw_file(file) };
        this.ops.release(file);
        0
    }

    /// # Safety
    ///
    /// Called by the VFS (`mmap_region`) for an open file of a device registered by `Self`,
    /// with `vma` in its initial setup.
    unsafe extern "C" fn mmap_callback(
        file: *mut bindings::file,
        vma: *mut bindings::vm_area_struct,
    ) -> c_int {
        // SAFETY: the file was opened through `open_callback`, so `private_data` is ours.
        let this = unsafe { Self::from_file(file) };
        // SAFETY: `file` is valid for the duration of this call.
        let file = unsafe { File::from_raw_file(file) };
        // SAFETY: the VFS calls `mmap` while the vma is being set up, for this call's duration.
        let vma = unsafe { VmaNew::from_raw(vma) };
        from_result(|| {
            this.ops.mmap(file, vma)?;
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Called by the VFS for an open file of a device registered by `Self`, with a `table`
    /// that is null or valid for the call.
    unsafe extern "C" fn poll_callback(
        file: *mut bindings::file,
        table: *mut bindings::poll_table_struct,
    ) -> bindings::__poll_t {
        // SAFETY: the file was opened through `open_callback`, so `private_data` is ours.
        let this = unsafe { Self::from_file(file) };
        // SAFETY: `file` is valid for the duration of this call.
        let file = unsafe { File::from_raw_file(file) };
        // SAFETY: `table` is null or valid for the duration of this call (the VFS's contract).
        let table = unsafe { PollTable::from_raw(table) };
        this.ops.poll(file, &table)
    }

    /// # Safety
    ///
    /// Called by the VFS for an open file of a device registered by `Self`.
    unsafe extern "C" fn ioctl_callback(file: *mut bindings::file, cmd: c_uint, arg: c_ulong) -> c_long {
        // SAFETY: the file was opened through `open_callback`, so `private_data` is ours.
        let this = unsafe { Self::from_file(file) };
        // SAFETY: `file` is valid for the duration of this call.
        let file = unsafe { File::from_raw_file(file) };
        from_result(|| Ok(this.ops.ioctl(file, cmd, arg)? as c_long))
    }
}

#[pinned_drop]
impl<T: MiscOps> PinnedDrop for MiscRegistration<T> {
    fn drop(self: Pin<&mut Self>) {
        // SAFETY: by the type invariants the device is registered, and this is the only place
        // that deregisters it.
        unsafe { bindings::misc_deregister(self.misc.get()) };
    }
}
