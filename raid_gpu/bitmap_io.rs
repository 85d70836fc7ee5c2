// SPDX-License-Identifier: GPL-2.0

//! The write-intent bitmap's home in the module (its logic: `engine::bitmap` and
//! `engine::write_intent`): one state per region, allocated when the array starts, and the bits
//! read back from the members' bitmap areas at assembly. The blocks are written by the
//! superblock writer (`superblock_io.rs`), the same single writer.

use crate::engine::bitmap::{load_block, RegionState, Regions, BLOCK_BYTES, BLOCK_SECTORS};
use crate::engine::superblock::{Superblock, RECOVERY_COMPLETE};
use crate::member_devices::Member;
use crate::kernel_ext::bio::read_page;
use crate::superblock_io::zeroed_block;
use kernel::{alloc::KVVec, page::Page, prelude::*};

/// An array's write-intent bitmap in memory.
pub(crate) struct Bitmap {
    pub(crate) regions: Regions,
    /// First member sector of the bitmap area.
    pub(crate) offset: u64,
    /// One per region (kvmalloc: a large array has many).
    pub(crate) states: KVVec<RegionState>,
}

impl Bitmap {
    /// The bitmap `sb` describes, every region clear; `None` if the array has none.
    pub(crate) fn new(sb: &Superblock) -> Result<Option<Self>> {
        let Some(regions) = sb.bitmap_regions() else {
            return Ok(None);
        };
        let count = usize::try_from(regions.count()).map_err(|_| EINVAL)?;
        let mut states = KVVec::with_capacity(count, GFP_KERNEL)?;
        for _ in 0..count {
            states.push(RegionState::new(), GFP_KERNEL)?;
        }
        Ok(Some(Self {
            regions,
            offset: sb.bitmap.offset,
            states,
        }))
    }

    /// Every region dirty: a new array whose copies are not known to match.
    pub(crate) fn mark_all(&self, resync_from: Option<u64>) {
        for block in 0..self.regions.blocks() {
            load_block(&self.regions, &self.states, block, None, resync_from);
        }
    }

    /// Reads the bits of every member in sync (their bits add up: each holds every block
    /// written since it joined); a block none of them could read counts as all set. Regions
    /// the resync from `resync_from` must visit are marked for it. Before the array runs.
    pub(crate) fn load(&self, members: &[Option<Member>], resync_from: Option<u64>) -> Result {
        let page = Page::alloc_page(GFP_KERNEL)?;
        let mut buffer = zeroed_block()?;
        let in_sync = || {
            members
                .iter()
                .flatten()
                .filter(|m| m.recovery_offset == RECOVERY_COMPLETE)
        };
        for block in 0..self.regions.blocks() {
            let sector = self.block_sector(block);
            let mut read = false;
            for member in in_sync() {
                if read_page(member.file.bdev(), sector, &page).is_err() {
                    pr_warn!("graid: bitmap block {} unreadable on a member\n", block);
                    continue;
                }
                // SAFETY: `buffer` has room for BLOCK_BYTES (= PAGE_SIZE) bytes.
                unsafe { page.read_raw(buffer.as_mut_ptr(), 0, BLOCK_BYTES)? };
                load_block(&self.regions, &self.states, block, Some(&buffer), resync_from);
                read = true;
            }
            if !read {
                load_block(&self.regions, &self.states, block, None, resync_from);
            }
        }
        Ok(())
    }

    /// The member sector where block `block` lives.
    pub(crate) fn block_sector(&self, block: u64) -> u64 {
        self.offset.saturating_add(block.saturating_mul(BLOCK_SECTORS))
    }

    /// Regions whose bit is set (or about to be): what a resync or re-add would visit now.
    pub(crate) fn dirty_regions(&self) -> u64 {
        self.states.iter().filter(|s| s.bit()).count() as u64
    }
}
