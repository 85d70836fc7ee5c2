// SPDX-License-Identifier: GPL-2.0

//! Member block devices, opened exclusively (`bdev_file_open_by_dev`).

use crate::kernel_ext::shim;
use core::ptr::NonNull;
use kernel::{
    bindings,
    error::{from_err_ptr, to_result},
    ffi::c_void,
    prelude::*,
};

/// A block device opened for reading and writing, exclusively for one holder.
///
/// # Invariants
///
/// `file` is a block device file returned by `bdev_file_open_by_dev` and not yet released.
pub(crate) struct BlockDeviceFile {
    file: NonNull<bindings::file>,
}

// SAFETY: a block device file may be used and released from any thread.
unsafe impl Send for BlockDeviceFile {}
// SAFETY: all methods only read immutable properties of the open device.
unsafe impl Sync for BlockDeviceFile {}

impl BlockDeviceFile {
    /// Opens device `major:minor`, exclusively for `holder`: fails with `EBUSY` if another
    /// holder (a mounted filesystem, md, another array) has it, and with `EINVAL` for a number
    /// `dev_t` cannot hold (it would alias another device).
    pub(crate) fn open_exclusive(major: u32, minor: u32, holder: *mut c_void) -> Result<Self> {
        if major >= 1 << (32 - bindings::MINORBITS) || minor >= 1 << bindings::MINORBITS {
            return Err(EINVAL);
        }
        // SAFETY: pure computation.
        let dev = unsafe { shim::graid_mkdev(major, minor) };
        // SAFETY: `holder` is an opaque cookie the block layer only compares; NULL holder ops
        // are allowed.
        let file = from_err_ptr(unsafe {
            bindings::bdev_file_open_by_dev(
                dev,
                shim::graid_blk_open_rw_excl(),
                holder,
                core::ptr::null(),
            )
        })?;
        let file = NonNull::new(file).ok_or(ENODEV)?;
        // INVARIANT: `file` was just opened.
        Ok(Self { file })
    }

    /// The underlying `struct block_device`, valid while `self` lives.
    pub(crate) fn bdev(&self) -> *mut bindings::block_device {
        // SAFETY: `file` is an open block device file (type invariant).
        unsafe { bindings::file_bdev(self.file.as_ptr()) }
    }

    /// Size in 512-byte sectors.
    pub(crate) fn nr_sectors(&self) -> u64 {
        // SAFETY: `bdev()` is valid while the file is open.
        unsafe { shim::graid_bdev_nr_sectors(self.bdev()) }
    }

    /// True if `self` and `other` are the same device (opened twice).
    pub(crate) fn same_device(&self, other: &Self) -> bool {
        self.bdev() == other.bdev()
    }

    /// A zoned device (host-managed or host-aware): its writes must follow zone rules.
    pub(crate) fn is_zoned(&self) -> bool {
        // SAFETY: `bdev()` is valid while the file is open.
        unsafe { shim::graid_bdev_is_zoned(self.bdev()) }
    }

    /// Zeroes `sectors` sectors from `sector` with the device's own zeroing command (write
    /// zeroes or an unmap that reads back zeroes); `EOPNOTSUPP` if it has none, rather than
    /// writing the zeroes one by one.
    pub(crate) fn zero_out_fast(&self, sector: u64, sectors: u64) -> Result {
        // SAFETY: `bdev()` is valid while the file is open; the flags are valid.
        to_result(unsafe {
            bindings::blkdev_issue_zeroout(
                self.bdev(),
                sector,
                sectors,
                bindings::GFP_KERNEL,
                bindings::BLKDEV_ZERO_NOFALLBACK,
            )
        })
    }

    /// Device number as (major, minor).
    pub(crate) fn dev(&self) -> (u32, u32) {
        // SAFETY: `bdev()` is valid while the file is open; MAJOR/MINOR are pure.
        unsafe {
            let dev = shim::graid_bdev_dev(self.bdev());
            (shim::graid_major(dev), shim::graid_minor(dev))
        }
    }
}

impl Drop for BlockDeviceFile {
    fn drop(&mut self) {
        // SAFETY: `file` is open (type invariant) and released exactly once, here.
        unsafe { bindings::bdev_fput(self.file.as_ptr()) };
    }
}
