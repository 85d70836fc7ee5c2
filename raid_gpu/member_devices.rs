// SPDX-License-Identifier: GPL-2.0

//! The member devices of a running array, by role. A role's device can be released while the
//! array runs (`graidctl remove`): the I/O path reads a slot without a lock, so a device is
//! released only while nothing can use it (the array's queue frozen and its worker idle: see
//! [`MemberDevices::detach`]).

use crate::engine::superblock::{RECOVERY_COMPLETE, UUID_LEN};
use crate::kernel_ext::bdev::BlockDeviceFile;
use core::ptr;
use core::sync::atomic::{AtomicPtr, AtomicU64, Ordering};
use kernel::prelude::*;

/// One role's device.
struct DeviceSlot {
    /// A `KBox` given up with `into_raw`; null once released.
    file: AtomicPtr<BlockDeviceFile>,
    /// `major << 32 | minor` of the device, 0 once released: what DETAIL reports, readable
    /// without touching the device.
    dev: AtomicU64,
}

/// The devices of an array's members, in role order.
pub(crate) struct MemberDevices {
    slots: KVec<DeviceSlot>,
}

impl MemberDevices {
    /// The devices by role; `None` for a role without one (a degraded assembly); places
    /// without a device up to `places` in all.
    pub(crate) fn new(
        files: impl IntoIterator<Item = Option<BlockDeviceFile>>,
        places: usize,
    ) -> Result<Self> {
        let mut slots = KVec::with_capacity(places, GFP_KERNEL)?;
        let files = Iterator::chain(files.into_iter(), core::iter::repeat_with(|| None));
        for file in files.take(places) {
            // Once in a slot, a device is closed with it, on every error path below too.
            let slot = match file {
                Some(file) => {
                    let (major, minor) = file.dev();
                    let file = KBox::new(file, GFP_KERNEL)?;
                    DeviceSlot {
                        file: AtomicPtr::new(KBox::into_raw(file)),
                        dev: AtomicU64::new(u64::from(major) << 32 | u64::from(minor)),
                    }
                }
                None => DeviceSlot {
                    file: AtomicPtr::new(ptr::null_mut()),
                    dev: AtomicU64::new(0),
                },
            };
            slots.push(slot, GFP_KERNEL)?;
        }
        Ok(Self { slots })
    }

    /// Role `role`'s device, if it has one.
    pub(crate) fn get(&self, role: u32) -> Option<&BlockDeviceFile> {
        let file = self.slots.get(role as usize)?.file.load(Ordering::Acquire);
        // SAFETY: a non-null pointer came from `KBox::into_raw` and is freed only by `detach`
        // (whose caller guarantees no reference from here is alive then) or in `drop`.
        unsafe { file.as_ref() }
    }

    /// Role `role`'s device number, `None` if it has no device.
    pub(crate) fn dev(&self, role: u32) -> Option<(u32, u32)> {
        let dev = self.slots.get(role as usize)?.dev.load(Ordering::Acquire);
        // The halves of a u64: lossless.
        (dev != 0).then_some(((dev >> 32) as u32, dev as u32))
    }

    /// The role whose device is `(major, minor)`.
    pub(crate) fn role_of(&self, major: u32, minor: u32) -> Option<u32> {
        (0..self.slots.len() as u32).find(|&role| self.dev(role) == Some((major, minor)))
    }

    /// Gives role `role`, which has no device, the device `file`. `EBUSY` if it has one.
    pub(crate) fn attach(&self, role: u32, file: BlockDeviceFile) -> Result {
        self.attach_box(role, KBox::new(file, GFP_KERNEL)?)
            .map_err(|_closed| EBUSY)
    }

    /// [`Self::attach`] for a device already boxed: allocates nothing, and gives the device
    /// back if the role has one (or is out of range).
    pub(crate) fn attach_box(
        &self,
        role: u32,
        file: KBox<BlockDeviceFile>,
    ) -> Result<(), KBox<BlockDeviceFile>> {
        let Some(slot) = self.slots.get(role as usize) else {
            return Err(file);
        };
        let (major, minor) = file.dev();
        let file = KBox::into_raw(file);
        if let Err(_taken) =
            slot.file
                .compare_exchange(ptr::null_mut(), file, Ordering::AcqRel, Ordering::Acquire)
        {
            // SAFETY: from `KBox::into_raw` above and never shared: given back.
            return Err(unsafe { KBox::from_raw(file) });
        }
        slot.dev.store(u64::from(major) << 32 | u64::from(minor), Ordering::Release);
        Ok(())
    }

    /// Takes role `role`'s device out of the array and returns it (closed when dropped).
    ///
    /// # Safety
    ///
    /// No reference returned by [`Self::get`] may be alive, and none may be taken until this
    /// returns: the array's queue is frozen (no request, hence no member I/O or stripe step, is
    /// in flight) and its worker idle with nothing to wake it.
    pub(crate) unsafe fn detach(&self, role: u32) -> Option<KBox<BlockDeviceFile>> {
        let slot = self.slots.get(role as usize)?;
        slot.dev.store(0, Ordering::Release);
        let file = slot.file.swap(ptr::null_mut(), Ordering::AcqRel);
        // SAFETY: from `KBox::into_raw`, and the swap made this the only owner; nobody uses
        // it (the caller's contract).
        (!file.is_null()).then(|| unsafe { KBox::from_raw(file) })
    }
}

impl MemberDevices {
    /// Moves role `from`'s device to role `to`, which has none (a mirror's member taking a
    /// removed one's place when the copies shrink). `EBUSY` if `to` has a device, `EINVAL` for
    /// a role out of range; nothing moves then.
    ///
    /// # Safety
    ///
    /// As for [`Self::detach`]: no reference returned by [`Self::get`] is alive, and none is
    /// taken until this returns.
    pub(crate) unsafe fn move_role(&self, from: u32, to: u32) -> Result {
        let from = self.slots.get(from as usize).ok_or(EINVAL)?;
        let to = self.slots.get(to as usize).ok_or(EINVAL)?;
        if !to.file.load(Ordering::Acquire).is_null() {
            return Err(EBUSY);
        }
        // The caller's contract: nobody reads either slot meanwhile.
        to.file
            .store(from.file.swap(ptr::null_mut(), Ordering::AcqRel), Ordering::Release);
        to.dev.store(from.dev.swap(0, Ordering::AcqRel), Ordering::Release);
        Ok(())
    }
}

impl Drop for DeviceSlot {
    fn drop(&mut self) {
        let file = self.file.swap(ptr::null_mut(), Ordering::AcqRel);
        if !file.is_null() {
            // SAFETY: from `KBox::into_raw`, and the swap made this the only owner; a slot is
            // dropped when the array goes away, or when building the table failed, and nobody
            // uses its device then.
            drop(unsafe { KBox::from_raw(file) });
        }
    }
}

/// A spare's device: never used for array I/O, only for its superblock until it takes a failed
/// member's place.
pub(crate) struct SpareDevice {
    /// Its slot-table entry.
    pub(crate) slot: u32,
    pub(crate) uuid: [u8; 16],
    pub(crate) file: BlockDeviceFile,
}

/// A member device of an array being set up, in role order.
pub(crate) struct Member {
    pub(crate) file: BlockDeviceFile,
    /// This member's UUID, kept in its superblock.
    pub(crate) uuid: [u8; UUID_LEN],
    /// Its device's slot-table entry.
    pub(crate) slot: u32,
    /// Sectors of its data area in sync (`RECOVERY_COMPLETE`: all): a rebuild resumes here.
    pub(crate) recovery_offset: u64,
}

impl Member {
    /// An in-sync member in slot-table entry `slot`.
    pub(crate) fn new(file: BlockDeviceFile, uuid: [u8; UUID_LEN], slot: u32) -> Self {
        Self {
            file,
            uuid,
            slot,
            recovery_offset: RECOVERY_COMPLETE,
        }
    }
}
