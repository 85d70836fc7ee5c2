// SPDX-License-Identifier: GPL-2.0

//! Members' superblocks on disk (format: `engine::superblock`): reading one at assembly, and
//! the array's writer, which updates them all at once, durably, from memory set aside when the
//! array starts (it runs where I/O waits on it: no allocation may wait for reclaim).

use crate::engine::bitmap::BLOCK_BYTES;
use crate::engine::members::MemberSet;
use crate::member_devices::MemberDevices;
use crate::engine::superblock::{self, Superblock, SUPERBLOCK_SECTOR, SUPERBLOCK_SIZE};
use crate::kernel_ext::{
    bdev::BlockDeviceFile,
    bio::{read_page, write_pages_durably, PageWrite},
};
use kernel::{bindings, new_mutex, page::Page, prelude::*, sync::Mutex};

/// Writes an array's superblocks: one page per member and one encoding buffer, allocated up
/// front (and before a mirror's copies grow, [`Self::reserve`]). The mutex makes the writer
/// single (the engine never runs two updates at once, and this keeps it so).
#[pin_data]
pub(crate) struct SuperblockWriter {
    #[pin]
    state: Mutex<Buffers>,
}

/// The writer's memory.
struct Buffers {
    block: KBox<[u8; SUPERBLOCK_SIZE]>,
    /// One per member.
    pages: KVec<Page>,
}

impl SuperblockWriter {
    pub(crate) fn new(members: usize) -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            state <- new_mutex!(Buffers {
                block: zeroed_block()?,
                pages: {
                    let mut pages = KVec::with_capacity(members, GFP_KERNEL)?;
                    for _ in 0..members {
                        pages.push(Page::alloc_page(GFP_KERNEL)?, GFP_KERNEL)?;
                    }
                    pages
                },
            }),
        })
    }

    /// Pages for `members` members at least: before the count grows (they are allocated here,
    /// where reclaim may run, not in the writes).
    pub(crate) fn reserve(&self, members: usize) -> Result {
        if self.state.lock().pages.len() >= members {
            return Ok(());
        }
        // Allocated without the lock: the writer holds it with the array's queue frozen, which
        // reclaim may wait on.
        let mut pages = KVec::with_capacity(members, GFP_KERNEL)?;
        for _ in 0..members {
            pages.push(Page::alloc_page(GFP_KERNEL)?, GFP_KERNEL)?;
        }
        let mut state = self.state.lock();
        if state.pages.len() < members {
            // What the pages held does not matter: each write fills its page first.
            core::mem::swap(&mut state.pages, &mut pages);
        }
        drop(state);
        // The old (or unused) pages are freed here, outside the lock.
        drop(pages);
        Ok(())
    }

    /// Writes `copy(m)` to each member `m` in `targets` at once (`PREFLUSH | FUA`) and waits.
    /// Returns the members whose write failed (or could not be made).
    pub(crate) fn write(
        &self,
        files: &MemberDevices,
        targets: MemberSet,
        copy: impl Fn(u32) -> Superblock,
    ) -> MemberSet {
        let mut state = self.state.lock();
        let Buffers { block, pages } = &mut *state;
        let mut failed = MemberSet::EMPTY;
        for member in targets.iter() {
            let page = pages.get(member as usize);
            if !page.is_some_and(|page| fill(page, block, &copy(member))) {
                pr_err!("graid: superblock for member {} not written\n", member);
                failed = failed.with(member);
            }
        }
        let writes = targets.minus(failed).iter().filter_map(|member| {
            let file = files.get(member)?;
            let page = pages.get(member as usize)?;
            Some(PageWrite {
                index: member,
                bdev: file.bdev(),
                sector: SUPERBLOCK_SECTOR,
                page,
            })
        });
        let failed_io = MemberSet::from_bits(write_pages_durably(writes, true));
        // A target with no file or page was not written either.
        let missing = targets
            .iter()
            .filter(|&m| files.get(m).is_none() || pages.get(m as usize).is_none())
            .fold(MemberSet::EMPTY, MemberSet::with);
        failed.union(failed_io).union(missing)
    }

    /// Writes the same block, filled by `fill`, at member sector `sector` of each member in
    /// `targets` at once (`FUA`, with `preflush` also `PREFLUSH`) and waits: a write-intent
    /// bitmap block or a log head. Returns the members whose write failed. The same single
    /// writer as [`Self::write`].
    pub(crate) fn write_block(
        &self,
        files: &MemberDevices,
        targets: MemberSet,
        sector: u64,
        preflush: bool,
        fill: &dyn Fn(&mut [u8; BLOCK_BYTES]),
    ) -> MemberSet {
        let mut state = self.state.lock();
        let Buffers { block, pages } = &mut *state;
        fill(block);
        let mut failed = MemberSet::EMPTY;
        for member in targets.iter() {
            let page = pages.get(member as usize);
            // SAFETY: `block` holds BLOCK_BYTES (= PAGE_SIZE) initialised bytes.
            let copied = page.is_some_and(|page| unsafe {
                page.write_raw(block.as_ptr(), 0, BLOCK_BYTES).is_ok()
            });
            if !copied || files.get(member).is_none() {
                failed = failed.with(member);
            }
        }
        let writes = targets.minus(failed).iter().filter_map(|member| {
            Some(PageWrite {
                index: member,
                bdev: files.get(member)?.bdev(),
                sector,
                page: pages.get(member as usize)?,
            })
        });
        failed.union(MemberSet::from_bits(write_pages_durably(writes, preflush)))
    }

    /// Writes `sb` to the device `bdev` (a spare's: not a member) durably and waits; false on
    /// an error. The same single writer as [`Self::write`], after it (it reuses member 0's
    /// page).
    pub(crate) fn write_one(&self, bdev: *mut bindings::block_device, sb: &Superblock) -> bool {
        let mut state = self.state.lock();
        let Buffers { block, pages } = &mut *state;
        let Some(page) = pages.first().filter(|page| fill(page, block, sb)) else {
            return false;
        };
        let write = PageWrite {
            index: 0,
            bdev,
            sector: SUPERBLOCK_SECTOR,
            page,
        };
        write_pages_durably(core::iter::once(write), true) == 0
    }
}

// A bitmap block goes through the superblock's buffer and pages.
const _: () = assert!(BLOCK_BYTES == SUPERBLOCK_SIZE);

/// Encodes `sb` through `buffer` into `page`; false if it cannot be encoded.
fn fill(page: &Page, buffer: &mut [u8; SUPERBLOCK_SIZE], sb: &Superblock) -> bool {
    if let Err(e) = superblock::encode(sb, buffer) {
        pr_err!("graid: superblock not encoded: {:?}\n", e);
        return false;
    }
    // SAFETY: `buffer` holds SUPERBLOCK_SIZE (= PAGE_SIZE) initialised bytes.
    unsafe { page.write_raw(buffer.as_ptr(), 0, SUPERBLOCK_SIZE) }.is_ok()
}

/// A zeroed superblock-sized buffer on the heap (not built on the stack first).
pub(crate) fn zeroed_block() -> Result<KBox<[u8; SUPERBLOCK_SIZE]>> {
    let mut block = KBox::<[u8; SUPERBLOCK_SIZE]>::new_uninit(GFP_KERNEL)?;
    // SAFETY: all-zero bytes are a valid `[u8; N]`; every byte is written before use.
    Ok(unsafe {
        block.as_mut_ptr().write_bytes(0, 1);
        block.assume_init()
    })
}

/// Reads and decodes `member`'s superblock. `ENODATA` if it carries none (no magic),
/// `EUCLEAN` if it is corrupt or unsupported.
pub(crate) fn read_superblock(member: &BlockDeviceFile) -> Result<Superblock> {
    let page = Page::alloc_page(GFP_KERNEL)?;
    read_page(member.bdev(), SUPERBLOCK_SECTOR, &page)?;
    let mut block = KVec::from_elem(0u8, SUPERBLOCK_SIZE, GFP_KERNEL)?;
    // SAFETY: `block` has room for SUPERBLOCK_SIZE bytes.
    unsafe { page.read_raw(block.as_mut_ptr(), 0, SUPERBLOCK_SIZE)? };
    superblock::decode(&block).map_err(|e| {
        if block.starts_with(&superblock::MAGIC) {
            pr_warn!("graid: member superblock refused: {:?}\n", e);
            crate::errno::euclean()
        } else {
            crate::errno::enodata()
        }
    })
}
