// SPDX-License-Identifier: GPL-2.0

//! What an array tells udev: a "change" uevent on `/dev/graidN` with the array's name, UUID and
//! level (the rules in `tools/udev/` name the array from them), and, when a member changes,
//! which member and what happened, so monitoring can react (`Documentation/udev.rst`).

use crate::engine::superblock::Superblock;
use crate::io::ArrayIo;
use crate::kernel_ext::blk_mq::Disk;
use kernel::prelude::*;

/// A member change, as `GRAID_EVENT=` says it.
#[derive(Clone, Copy)]
pub(crate) enum MemberChange {
    /// Failed on request (`graidctl fail`): out of use, recorded in the superblocks.
    Failed,
    /// Its device was released from the array (`graidctl remove`).
    Removed,
}

impl MemberChange {
    fn name(self) -> &'static [u8] {
        match self {
            Self::Failed => b"member-failed",
            Self::Removed => b"member-removed",
        }
    }
}

/// `KEY=` followed by `value`.
fn var(key: &[u8], value: &[u8]) -> Result<KVec<u8>> {
    let mut v = KVec::with_capacity(key.len() + value.len(), GFP_KERNEL)?;
    v.extend_from_slice(key, GFP_KERNEL)?;
    v.extend_from_slice(value, GFP_KERNEL)?;
    Ok(v)
}

/// The decimal digits of `n`.
fn decimal(mut n: u32) -> Result<KVec<u8>> {
    let mut digits = KVec::new();
    loop {
        // Below 10: lossless.
        digits.push(b'0' + (n % 10) as u8, GFP_KERNEL)?;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    digits.reverse();
    Ok(digits)
}

/// Sends the array's change uevent: `GRAID_NAME`, `GRAID_UUID`, `GRAID_LEVEL`, and with
/// `change` also `GRAID_EVENT` and `GRAID_MEMBER` (the role). Allocates (`GFP_KERNEL`): the
/// caller is in process context, in a NOIO scope where writeback to the array could wait.
pub(crate) fn announce(
    disk: &Disk<ArrayIo>,
    sb: &Superblock,
    change: Option<(MemberChange, u32)>,
) -> Result {
    let mut uuid = KVec::new();
    for (i, byte) in sb.array_uuid.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            uuid.push(b'-', GFP_KERNEL)?;
        }
        for nibble in [byte >> 4, byte & 0xf] {
            let digit = b"0123456789abcdef".get(usize::from(nibble)).copied();
            uuid.push(digit.unwrap_or(b'0'), GFP_KERNEL)?;
        }
    }
    let name = var(b"GRAID_NAME=", sb.array_name.as_str().as_bytes())?;
    let uuid = var(b"GRAID_UUID=", &uuid)?;
    let level = var(b"GRAID_LEVEL=raid", &decimal(sb.level.code())?)?;
    match change {
        None => disk.change_uevent(&[&name, &uuid, &level]),
        Some((what, role)) => {
            let event = var(b"GRAID_EVENT=", what.name())?;
            let member = var(b"GRAID_MEMBER=", &decimal(role)?)?;
            disk.change_uevent(&[&name, &uuid, &level, &event, &member])
        }
    }
}
