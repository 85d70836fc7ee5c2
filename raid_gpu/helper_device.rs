// SPDX-License-Identifier: GPL-2.0

//! `/dev/graid-helper`: where the parity helper attaches (`Documentation/ring-protocol.rst`).
//!
//! Root only, one helper at a time. `HELPER_IOC_ATTACH` negotiates the ring's ABI version and
//! features and allocates the control area; the helper then maps it: K2H (header, SQ, the
//! kernel's indices) read-only, H2K (its indices, the CQ) read-write, each with an `mmap` of its
//! own. `HELPER_IOC_ENTER` consumes its completions (each checked by the job state machine,
//! `engine/ring.rs`: a completion of no job out detaches it) and with `HELPER_ENTER_WAIT` sleeps
//! until jobs are published; `poll` says the same without the call. Closing the file (SIGKILL
//! included) or `HELPER_IOC_DETACH` detaches it. No parity job goes out yet: that, and the pool,
//! come next (issue 12).

use crate::engine::ring::{ring_pending, JobSlot, JobTable};
use crate::errno;
use crate::kernel_ext::{capability::require_sys_admin, misc::MiscOps};
use crate::ring_uapi::{
    self, HelperAttach, HelperEnter, RingHeader, CONTROL_BYTES, CQE_BYTES, CQ_ENTRIES,
    CQ_HEAD_OFFSET, CQ_OFFSET, CQ_TAIL_OFFSET, H2K_OFFSET, HELPER_ENTER_WAIT, K2H_BYTES,
    RING_ABI_VERSION, RING_FEATURES, RING_MAGIC, SQE_BYTES, SQ_ENTRIES, SQ_HEAD_OFFSET,
};
use core::mem::size_of;
use kernel::{
    alloc::flags::{GFP_KERNEL, __GFP_ZERO},
    fs::File,
    mm::virt::VmaNew,
    new_mutex, new_poll_condvar,
    page::{Page, PAGE_SIZE},
    prelude::*,
    sync::{poll::PollCondVar, poll::PollTable, Mutex},
    transmute::{AsBytes, FromBytes},
    uaccess::{UserPtr, UserSlice},
};

// SAFETY: `repr(C)`, integers only, no padding (checked by graid-abi's host tests): every byte
// is initialised and every bit pattern is valid.
unsafe impl AsBytes for HelperAttach {}
// SAFETY: see above.
unsafe impl FromBytes for HelperAttach {}
// SAFETY: see above.
unsafe impl AsBytes for HelperEnter {}
// SAFETY: see above.
unsafe impl FromBytes for HelperEnter {}

/// `EPOLL*` events (`include/uapi/linux/eventpoll.h`; bindgen cannot export the `__force`
/// casts).
const EPOLLIN: u32 = 0x1;
const EPOLLERR: u32 = 0x8;
const EPOLLHUP: u32 = 0x10;
const EPOLLRDNORM: u32 = 0x40;

/// An attached helper's ring.
struct Attachment {
    /// The control area's pages.
    pages: KVec<Page>,
    /// Which jobs the helper holds (`engine/ring.rs`).
    jobs: JobTable<KVec<JobSlot>>,
    /// The SQ tail the kernel published, and the CQ head it consumed to: the kernel's own
    /// copies (the pages' are for the helper, never read back).
    sq_tail: u32,
    cq_head: u32,
}

/// The helper's answers broke the protocol: it is detached.
struct ProtocolError;

impl Attachment {
    /// The `u32` at byte `offset` of the control area.
    fn read_u32(&self, offset: u64) -> Result<u32, ProtocolError> {
        let offset = usize::try_from(offset).map_err(|_| ProtocolError)?;
        let page = self.pages.get(offset / PAGE_SIZE).ok_or(ProtocolError)?;
        let mut bytes = [0u8; 4];
        // SAFETY: `bytes` is a local buffer of 4 bytes; the page checks the range.
        unsafe { page.read_raw(bytes.as_mut_ptr(), offset % PAGE_SIZE, 4) }
            .map_err(|_| ProtocolError)?;
        Ok(u32::from_le_bytes(bytes))
    }

    fn write_u32(&self, offset: u64, value: u32) {
        let Ok(offset) = usize::try_from(offset) else {
            return;
        };
        if let Some(page) = self.pages.get(offset / PAGE_SIZE) {
            let bytes = value.to_le_bytes();
            // SAFETY: `bytes` is a local buffer of 4 bytes; the page checks the range.
            let _ = unsafe { page.write_raw(bytes.as_ptr(), offset % PAGE_SIZE, 4) };
        }
    }

    /// Jobs published and not yet taken, by the helper's SQ head.
    fn pending(&self) -> Result<u32, ProtocolError> {
        let head = self.read_u32(SQ_HEAD_OFFSET)?;
        ring_pending(head, self.sq_tail, SQ_ENTRIES).ok_or(ProtocolError)
    }

    /// Consumes the completions the helper published, each checked by the job table.
    fn reap(&mut self) -> Result<(), ProtocolError> {
        let tail = self.read_u32(CQ_TAIL_OFFSET)?;
        let count = ring_pending(self.cq_head, tail, CQ_ENTRIES).ok_or(ProtocolError)?;
        for _ in 0..count {
            let slot = u64::from(self.cq_head % CQ_ENTRIES);
            let at = CQ_OFFSET + slot * CQE_BYTES as u64;
            let (job, generation) = (self.read_u32(at)?, self.read_u32(at + 4)?);
            // No job goes out yet, so any completion is one of no job out.
            self.jobs
                .complete(job, generation)
                .map_err(|_| ProtocolError)?;
            self.cq_head = self.cq_head.wrapping_add(1);
        }
        self.write_u32(CQ_HEAD_OFFSET, self.cq_head);
        Ok(())
    }
}

/// The helper that has the device open, and what it attached.
struct Helper {
    /// The open file (its address: identity only), 0 when none.
    file: usize,
    attached: Option<Attachment>,
}

impl Helper {
    /// `file` is the helper's open file.
    fn owns(&self, file: &File) -> bool {
        self.file == file.as_ptr() as usize
    }
}

/// The helper device's state.
#[pin_data]
pub(crate) struct HelperDevice {
    #[pin]
    helper: Mutex<Helper>,
    /// Wakes a helper waiting in ENTER or poll: jobs published, or it was detached.
    #[pin]
    jobs: PollCondVar,
}

impl HelperDevice {
    pub(crate) fn new() -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            helper <- new_mutex!(Helper {
                file: 0,
                attached: None,
            }),
            jobs <- new_poll_condvar!("graid_helper_jobs"),
        })
    }

    /// ATTACH: checks the helper's ABI version (`EPROTO` if it differs), answers the features
    /// in force and the control area's size, and allocates the area. `EBUSY` if attached.
    fn attach(&self, file: &File, user: UserSlice) -> Result<isize> {
        let (mut reader, mut writer) = user.reader_writer();
        let mut req: HelperAttach = reader.read()?;
        let mut helper = self.helper.lock();
        if !helper.owns(file) {
            return Err(EBADF);
        }
        if helper.attached.is_some() {
            return Err(EBUSY);
        }
        if req.abi_version != RING_ABI_VERSION {
            return Err(errno::eproto());
        }
        req.features &= RING_FEATURES;
        req.control_bytes = CONTROL_BYTES;
        let pages = control_area(req.features)?;
        let mut slots = KVec::with_capacity(SQ_ENTRIES as usize, GFP_KERNEL)?;
        for _ in 0..SQ_ENTRIES {
            slots.push(JobSlot::default(), GFP_KERNEL)?;
        }
        let mut jobs = JobTable::new(slots);
        jobs.attach();
        writer.write(&req)?;
        helper.attached = Some(Attachment {
            pages,
            jobs,
            sq_tail: 0,
            cq_head: 0,
        });
        Ok(0)
    }

    /// ENTER: consumes the helper's completions and answers the jobs pending; with
    /// `HELPER_ENTER_WAIT` first sleeps until there are some (`ERESTARTSYS` on a signal).
    /// `EPROTO` (and detached) when its indices or completions break the protocol.
    fn enter(&self, file: &File, user: UserSlice) -> Result<isize> {
        let (mut reader, mut writer) = user.reader_writer();
        let mut req: HelperEnter = reader.read()?;
        if req.flags & !HELPER_ENTER_WAIT != 0 {
            return Err(EINVAL);
        }
        let mut helper = self.helper.lock();
        if !helper.owns(file) {
            return Err(EBADF);
        }
        loop {
            let answer = match helper.attached.as_mut() {
                None => return Err(EINVAL),
                Some(a) => a.reap().and_then(|()| a.pending()),
            };
            let Ok(pending) = answer else {
                helper.attached = None;
                self.jobs.notify_all();
                return Err(errno::eproto());
            };
            if pending > 0 || req.flags & HELPER_ENTER_WAIT == 0 {
                req.pending = pending;
                break;
            }
            if self.jobs.wait_interruptible(&mut helper) {
                return Err(ERESTARTSYS);
            }
        }
        drop(helper);
        writer.write(&req)?;
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
    const POLL: bool = true;

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
        if helper.owns(file) {
            helper.attached = None;
            helper.file = 0;
        }
    }

    /// Readable when jobs are pending; an error and a hang-up when not attached (or the
    /// protocol broke).
    fn poll(&self, file: &File, table: &PollTable<'_>) -> u32 {
        table.register_wait(file, &self.jobs);
        let helper = self.helper.lock();
        let owner = helper.owns(file);
        match helper.attached.as_ref().map(Attachment::pending) {
            Some(Ok(pending)) if owner => {
                if pending > 0 {
                    EPOLLIN | EPOLLRDNORM
                } else {
                    0
                }
            }
            _ => EPOLLERR | EPOLLHUP,
        }
    }

    fn ioctl(&self, file: &File, cmd: u32, arg: usize) -> Result<isize> {
        require_sys_admin()?;
        let user = |size| UserSlice::new(UserPtr::from_addr(arg), size);
        match cmd {
            ring_uapi::HELPER_IOC_ATTACH => self.attach(file, user(size_of::<HelperAttach>())),
            ring_uapi::HELPER_IOC_ENTER => self.enter(file, user(size_of::<HelperEnter>())),
            ring_uapi::HELPER_IOC_DETACH => {
                let mut helper = self.helper.lock();
                if !helper.owns(file) || helper.attached.is_none() {
                    return Err(EINVAL);
                }
                helper.attached = None;
                self.jobs.notify_all();
                Ok(0)
            }
            _ => Err(ENOTTY),
        }
    }

    /// Maps K2H (read-only: `EACCES` for a writable mapping) or H2K, each whole or in part, but
    /// never across the two; `EINVAL` before ATTACH or outside the area.
    fn mmap(&self, file: &File, vma: &VmaNew) -> Result {
        let helper = self.helper.lock();
        let control = match (&helper.attached, helper.owns(file)) {
            (Some(a), true) => &a.pages,
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
