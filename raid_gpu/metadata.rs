// SPDX-License-Identifier: GPL-2.0

//! Writing members' superblocks (format: `engine::superblock`).

use crate::engine::superblock::{self, Superblock, SUPERBLOCK_SECTOR, SUPERBLOCK_SIZE};
use crate::kernel_ext::{bdev::BlockDeviceFile, bio::sync_page_io};
use kernel::{page::Page, prelude::*};

/// Encodes `sb` and writes it (FUA) to `member`.
pub(crate) fn write_superblock(member: &BlockDeviceFile, sb: &Superblock) -> Result {
    let mut block = KVec::from_elem(0u8, SUPERBLOCK_SIZE, GFP_KERNEL)?;
    let block_ref: &mut [u8; SUPERBLOCK_SIZE] =
        block.as_mut_slice().try_into().map_err(|_| EINVAL)?;
    if let Err(e) = superblock::encode(sb, block_ref) {
        pr_err!("graid: superblock not written: {:?}\n", e);
        return Err(EINVAL);
    }
    let page = Page::alloc_page(GFP_KERNEL)?;
    // SAFETY: `block` holds SUPERBLOCK_SIZE (= PAGE_SIZE) initialised bytes.
    unsafe { page.write_raw(block.as_ptr(), 0, SUPERBLOCK_SIZE)? };
    sync_page_io(member.bdev(), SUPERBLOCK_SECTOR, &page, true)
}

/// Reads and decodes `member`'s superblock. `ENODATA` if it carries none (no magic),
/// `EUCLEAN` if it is corrupt or unsupported.
pub(crate) fn read_superblock(member: &BlockDeviceFile) -> Result<Superblock> {
    let page = Page::alloc_page(GFP_KERNEL)?;
    sync_page_io(member.bdev(), SUPERBLOCK_SECTOR, &page, false)?;
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
