// SPDX-License-Identifier: GPL-2.0

//! The write-intent bitmap's home in the module (its logic: `engine::bitmap` and
//! `engine::write_intent`): one state per region, allocated when the array starts, and the bits
//! read back from the members' bitmap areas at assembly. The blocks are written by the
//! superblock writer (`superblock_io.rs`), the same single writer.

use crate::engine::bitmap::{
    load_block, reset_after_resize, RegionState, Regions, BLOCK_BYTES, BLOCK_SECTORS,
};
use crate::engine::superblock::{Superblock, RECOVERY_COMPLETE};
use crate::member_devices::Member;
use crate::kernel_ext::bio::read_page;
use crate::superblock_io::zeroed_block;
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use kernel::{alloc::KVVec, page::Page, prelude::*};

/// An array's write-intent bitmap in memory.
pub(crate) struct Bitmap {
    /// log2 of the regions' size now: a resize may make it larger ([`Self::resize`]).
    shift: AtomicU32,
    /// The sectors of the resync's walk its regions cover now: a resize changes it.
    walk: AtomicU64,
    /// First member sector of the bitmap area.
    pub(crate) offset: u64,
    /// One per region, and spares a resize may take (`Regions::states_kept`; kvmalloc: a
    /// large array has many).
    states: KVVec<RegionState>,
}

impl Bitmap {
    /// The bitmap `sb` describes, every region clear; `None` if the array has none.
    pub(crate) fn new(sb: &Superblock) -> Result<Option<Self>> {
        let Some(regions) = sb.bitmap_regions() else {
            return Ok(None);
        };
        let kept = regions.states_kept(sb.bitmap.sectors);
        let count = usize::try_from(kept).map_err(|_| EINVAL)?;
        let mut states = KVVec::with_capacity(count, GFP_KERNEL)?;
        for _ in 0..count {
            states.push(RegionState::new(), GFP_KERNEL)?;
        }
        Ok(Some(Self {
            shift: AtomicU32::new(regions.shift()),
            walk: AtomicU64::new(regions.walk_sectors()),
            offset: sb.bitmap.offset,
            states,
        }))
    }

    /// The regions now.
    pub(crate) fn regions(&self) -> Regions {
        let walk = self.walk.load(Ordering::Acquire);
        Regions::of_shift(walk, self.shift.load(Ordering::Acquire))
    }

    /// The states of the regions now.
    pub(crate) fn states(&self) -> &[RegionState] {
        let count = usize::try_from(self.regions().count()).unwrap_or(usize::MAX);
        self.states.get(..count).unwrap_or(&self.states)
    }

    /// A resize: `regions` from now on, if they are no smaller than now and the kept states
    /// hold them (see `Metadata::resize_bitmap`). With no request in flight.
    pub(crate) fn resize(&self, regions: Regions) -> bool {
        let now = self.regions();
        if !regions.can_follow(&now, self.states.len()) {
            return false;
        }
        reset_after_resize(&self.states, &now, &regions);
        self.shift.store(regions.shift(), Ordering::Release);
        self.walk.store(regions.walk_sectors(), Ordering::Release);
        true
    }

    /// Every region dirty: a new array whose copies are not known to match.
    pub(crate) fn mark_all(&self, resync_from: Option<u64>) {
        let (regions, states) = (self.regions(), self.states());
        for block in 0..regions.blocks() {
            load_block(&regions, states, block, None, resync_from);
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
        let (regions, states) = (self.regions(), self.states());
        for block in 0..regions.blocks() {
            let sector = self.block_sector(block);
            let mut read = false;
            for member in in_sync() {
                if read_page(member.file.bdev(), sector, &page).is_err() {
                    pr_warn!("graid: bitmap block {} unreadable on a member\n", block);
                    continue;
                }
                // SAFETY: `buffer` has room for BLOCK_BYTES (= PAGE_SIZE) bytes.
                unsafe { page.read_raw(buffer.as_mut_ptr(), 0, BLOCK_BYTES)? };
                load_block(&regions, states, block, Some(&buffer), resync_from);
                read = true;
            }
            if !read {
                load_block(&regions, states, block, None, resync_from);
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
        self.states().iter().filter(|s| s.bit()).count() as u64
    }
}
