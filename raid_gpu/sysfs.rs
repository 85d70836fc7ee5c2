// SPDX-License-Identifier: GPL-2.0

//! `/sys/block/graidN/graid/`: the array's files and one directory `rdN/` per member, md's
//! `md/` layout. What each file reads and takes is `sysfs_text.rs`'s, from the array's
//! DETAIL; here are the tables of files and the array's side of them.

use crate::array::Array;
use crate::kernel_ext::sysfs::{Attribute, AttributeList, Dir, Files, Page};
use crate::sysfs_text;
use crate::uapi;
use kernel::{prelude::*, str::CString};

/// The attributes of `files`, as `sysfs_text.rs` lists them.
const fn attributes<const N: usize>(files: &[sysfs_text::File; N]) -> [Attribute; N] {
    let mut out = [const { Attribute::new(c"", false) }; N];
    let mut i = 0;
    while i < N {
        out[i] = Attribute::new(files[i].name, files[i].writable);
        i += 1;
    }
    out
}

const ARRAY_ATTRIBUTES: [Attribute; sysfs_text::ARRAY_FILES.len()] =
    attributes(&sysfs_text::ARRAY_FILES);
static ARRAY_FILES: AttributeList<{ sysfs_text::ARRAY_FILES.len() + 1 }> =
    AttributeList::new(&ARRAY_ATTRIBUTES);

const MEMBER_ATTRIBUTES: [Attribute; sysfs_text::MEMBER_FILES.len()] =
    attributes(&sysfs_text::MEMBER_FILES);
static MEMBER_FILES: AttributeList<{ sysfs_text::MEMBER_FILES.len() + 1 }> =
    AttributeList::new(&MEMBER_ATTRIBUTES);

/// The key of the array's own directory; a member's is its role.
const ARRAY_DIR: u32 = u32::MAX;

/// An array's directories, removed when dropped (members first), which the array does before
/// its disk goes.
pub(crate) struct ArrayDirs {
    /// Dropped before `top`, which holds them (field order).
    members: KVec<Dir>,
    top: Dir,
}

impl ArrayDirs {
    /// Creates `graid/` and its `rdN/` under `array`'s disk.
    ///
    /// # Safety
    ///
    /// `array` must outlive the result, and its disk must not be removed before the result
    /// is dropped.
    pub(crate) unsafe fn new(array: &Array, members: u32) -> Result<Self> {
        // SAFETY: the disk is live until the result is dropped (the caller's contract), and
        // so is `array`.
        let top = unsafe {
            Dir::new(
                array.disk_kobject(),
                c"graid",
                &ARRAY_FILES,
                array,
                ARRAY_DIR,
            )?
        };
        let mut dirs = Self {
            members: KVec::with_capacity(members as usize, GFP_KERNEL)?,
            top,
        };
        // SAFETY: the caller's contract.
        unsafe { dirs.set_members(array, members)? };
        Ok(dirs)
    }

    /// Makes `rdN/` for roles `0..members` exactly: more after a mirror's grow, fewer after a
    /// shrink.
    ///
    /// # Safety
    ///
    /// As for [`Self::new`], with the `array` these directories were made for.
    pub(crate) unsafe fn set_members(&mut self, array: &Array, members: u32) -> Result {
        self.members.truncate(members as usize);
        for role in self.members.len() as u32..members {
            let name = CString::try_from_fmt(fmt!("rd{role}"))?;
            // SAFETY: `top` is live and outlives the member directories (dropped after them);
            // `array` as the caller's contract says.
            let dir = unsafe { Dir::new(self.top.kobject(), &name, &MEMBER_FILES, array, role)? };
            self.members.push(dir, GFP_KERNEL)?;
        }
        Ok(())
    }
}

impl Files for Array {
    fn show(&self, key: u32, name: &str, out: &mut Page<'_>) -> Result {
        let detail = self.detail_boxed()?;
        let written = if key == ARRAY_DIR {
            let mut reshape = crate::uapi::GraidReshape::default();
            self.reshape_status(&mut reshape);
            sysfs_text::array_file(name, &detail, &reshape, out)
        } else {
            sysfs_text::member_file(name, &detail, key, out)
        };
        match written {
            Some(Ok(())) => Ok(()),
            Some(Err(_)) => Err(ENOSPC),
            None => Err(ENOENT),
        }
    }

    fn store(&self, key: u32, name: &str, text: &[u8]) -> Result {
        if key != ARRAY_DIR {
            return Err(EACCES);
        }
        if name == "sync_action" {
            return self.scrub(sysfs_text::parse_sync_action(text).ok_or(EINVAL)?);
        }
        let kibs = sysfs_text::parse_kibs(text).ok_or(EINVAL)?;
        let mut speed = uapi::GraidSpeed {
            index: self.index,
            flags: 0,
            min_kibs: 0,
            max_kibs: 0,
        };
        self.speed(&mut speed)?;
        match name {
            "sync_speed_min" => speed.min_kibs = kibs,
            "sync_speed_max" => speed.max_kibs = kibs,
            _ => return Err(EACCES),
        }
        speed.flags = uapi::GRAID_SPEED_SET;
        self.speed(&mut speed)
    }
}
