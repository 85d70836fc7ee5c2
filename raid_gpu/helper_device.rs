// SPDX-License-Identifier: GPL-2.0

//! `/dev/graid-helper`: where the parity helper attaches (`Documentation/ring-protocol.rst`).
//!
//! Root only, one helper at a time. `HELPER_IOC_ATTACH` negotiates the ring's ABI version and
//! features and allocates the control area; the helper then maps it: K2H (header, SQ, the
//! kernel's indices) read-only, H2K (its indices, the CQ) read-write, each with an `mmap` of its
//! own. Closing the file (SIGKILL included) or `HELPER_IOC_DETACH` detaches it. No parity job
//! goes out yet: that, and the pool, come next (issue 12).

use crate::errno;
use crate::kernel_ext::{capability::require_sys_admin, misc::MiscOps};
use crate::ring_uapi::{
    self, HelperAttach, RingHeader, CONTROL_BYTES, CQE_BYTES, CQ_ENTRIES, H2K_OFFSET, K2H_BYTES,
    RING_ABI_VERSION, RING_FEATURES, RING_MAGIC, SQE_BYTES, SQ_ENTRIES,
};
use core::mem::size_of;
use kernel::{
    alloc::flags::{GFP_KERNEL, __GFP_ZERO},
    fs::File,
    mm::virt::VmaNew,
    new_mutex,
    page::{Page, PAGE_SIZE},
    prelude::*,
    sync::Mutex,
    transmute::{AsBytes, FromBytes},
    uaccess::{UserPtr, UserSlice},
};

// SAFETY: `repr(C)`, integers only, no padding (checked by graid-abi's host tests): every byte
// is initialised and every bit pattern is valid.
unsafe impl AsBytes for HelperAttach {}
// SAFETY: see above.
unsafe impl FromBytes for HelperAttach {}

/// The helper that has the device open, and what it attached.
struct Helper {
    /// The open file (its address: identity only), 0 when none.
    file: usize,
    /// The control area's pages once attached.
    control: Option<KVec<Page>>,
}

/// The helper device's state.
#[pin_data]
pub(crate) struct HelperDevice {
    #[pin]
    helper: Mutex<Helper>,
}

impl HelperDevice {
    pub(crate) fn new() -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            helper <- new_mutex!(Helper {
                file: 0,
                control: None,
            }),
        })
    }

    /// ATTACH: checks the helper's ABI version (`EPROTO` if it differs), answers the features
    /// in force and the control area's size, and allocates the area. `EBUSY` if attached.
    fn attach(&self, file: &File, user: UserSlice) -> Result<isize> {
        let (mut reader, mut writer) = user.reader_writer();
        let mut req: HelperAttach = reader.read()?;
        let mut helper = self.helper.lock();
        if helper.file != file.as_ptr() as usize {
            return Err(EBADF);
        }
        if helper.control.is_some() {
            return Err(EBUSY);
        }
        if req.abi_version != RING_ABI_VERSION {
            return Err(errno::eproto());
        }
        req.features &= RING_FEATURES;
        req.control_bytes = CONTROL_BYTES;
        let control = control_area(req.features)?;
        writer.write(&req)?;
        helper.control = Some(control);
        Ok(0)
    }
}

/// The control area's pages, zeroed, the header written.
fn control_area(features: u64) -> Result<KVec<Page>> {
    let count = usize::try_from(CONTROL_BYTES).map_err(|_| EINVAL)? / PAGE_SIZE;
    let mut pages = KVec::with_capacity(count, GFP_KERNEL)?;
    for _ in 0..count {
        pages.push(Page::alloc_page(GFP_KERNEL | __GFP_ZERO)?, GFP_KERNEL)?;
    }
    let header = header_bytes(features);
    let first = pages.first().ok_or(EINVAL)?;
    // SAFETY: `header` is a local array of its own length, within the page.
    unsafe { first.write_raw(header.as_ptr(), 0, header.len())? };
    Ok(pages)
}

/// The `RingHeader` as its `repr(C)` bytes (little-endian, as the tools read it).
fn header_bytes(features: u64) -> [u8; size_of::<RingHeader>()] {
    let mut bytes = [0u8; size_of::<RingHeader>()];
    let fields: [&[u8]; 9] = [
        &RING_MAGIC.to_le_bytes(),
        &RING_ABI_VERSION.to_le_bytes(),
        &SQ_ENTRIES.to_le_bytes(),
        &CQ_ENTRIES.to_le_bytes(),
        &(SQE_BYTES as u32).to_le_bytes(),
        &(CQE_BYTES as u32).to_le_bytes(),
        &0u32.to_le_bytes(),
        &features.to_le_bytes(),
        &0u64.to_le_bytes(),
    ];
    let mut at = 0;
    for field in fields {
        if let Some(dst) = bytes.get_mut(at..at + field.len()) {
            dst.copy_from_slice(field);
        }
        at += field.len();
    }
    bytes
}

impl MiscOps for HelperDevice {
    const MMAP: bool = true;

    /// Root only, and one helper at a time (`EBUSY`).
    fn open(&self, file: &File) -> Result {
        require_sys_admin()?;
        let mut helper = self.helper.lock();
        if helper.file != 0 {
            return Err(EBUSY);
        }
        helper.file = file.as_ptr() as usize;
        Ok(())
    }

    /// The helper is gone: detached (its mappings keep their pages until unmapped).
    fn release(&self, file: &File) {
        let mut helper = self.helper.lock();
        if helper.file == file.as_ptr() as usize {
            helper.control = None;
            helper.file = 0;
        }
    }

    fn ioctl(&self, file: &File, cmd: u32, arg: usize) -> Result<isize> {
        require_sys_admin()?;
        let user = |size| UserSlice::new(UserPtr::from_addr(arg), size);
        match cmd {
            ring_uapi::HELPER_IOC_ATTACH => self.attach(file, user(size_of::<HelperAttach>())),
            ring_uapi::HELPER_IOC_DETACH => {
                let mut helper = self.helper.lock();
                if helper.file != file.as_ptr() as usize || helper.control.is_none() {
                    return Err(EINVAL);
                }
                helper.control = None;
                Ok(0)
            }
            _ => Err(ENOTTY),
        }
    }

    /// Maps K2H (read-only: `EACCES` for a writable mapping) or H2K, each whole or in part, but
    /// never across the two; `EINVAL` before ATTACH or outside the area.
    fn mmap(&self, file: &File, vma: &VmaNew) -> Result {
        let helper = self.helper.lock();
        let control = match (&helper.control, helper.file == file.as_ptr() as usize) {
            (Some(control), true) => control,
            _ => return Err(EINVAL),
        };
        // SAFETY: the vma is being set up by the VFS for this call (it holds the mmap lock).
        let start: usize = unsafe { (*vma.as_ptr()).vm_pgoff };
        let pages = (vma.end() - vma.start()) / PAGE_SIZE;
        let end = start.checked_add(pages).ok_or(EINVAL)?;
        let k2h_pages = usize::try_from(K2H_BYTES).map_err(|_| EINVAL)? / PAGE_SIZE;
        let h2k_first = usize::try_from(H2K_OFFSET).map_err(|_| EINVAL)? / PAGE_SIZE;
        if end > control.len() || (start < k2h_pages && end > h2k_first) {
            return Err(EINVAL);
        }
        if end <= k2h_pages {
            // The kernel's region: the helper only reads it.
            if vma.writable() {
                return Err(EACCES);
            }
            vma.try_clear_maywrite()?;
        }
        vma.set_dontcopy();
        vma.set_dontexpand();
        let map = vma.set_mixedmap();
        for (i, page) in control.iter().enumerate().take(end).skip(start) {
            map.vm_insert_page(vma.start() + (i - start) * PAGE_SIZE, page)?;
        }
        Ok(())
    }
}
