//! `graidctl grow ARRAY --size max|SIZE` (GRAID_IOC_RESIZE): after every member was replaced
//! by a larger device, each member's data area takes the room (md's `--grow --size`), online;
//! the array's capacity follows (so `lsblk`, `resize2fs` and `xfs_growfs` see it at once) and
//! the new room is resynced in the background (`graidctl wait`). SIZE is each member's data
//! area, as md's `--size`; `max` is all the room the smallest member (or spare) has.
//!
//! A smaller SIZE shrinks the array, once what it holds ends within the new size: the
//! filesystem, LVM physical volume or partition table libblkid finds on it is asked for its
//! own size (`content_end.rs`), and anything reaching past the new end refuses the shrink (shrink
//! it first: `resize2fs`, `pvresize`, a partition tool). Where graidctl cannot tell (nothing
//! it recognizes, raw data, a format whose size it cannot read), `--force` says the admin
//! knows.

use crate::array_ref::{resolve, ArrayRef};
use crate::content_end::content_end;
use crate::control::ControlDevice;
use crate::errno::{ioctl_error, Op};
use crate::error::CtlError;
use crate::member::System;
use crate::nvmet::{Nvmet, NVMET_ROOT};
use crate::output::{array_device, json, ArrayView};
use crate::size::{format_sectors, parse_size};
use graid_abi::{GraidDetail, GraidResize, GRAID_RESIZE_QUERY, GRAID_RESIZE_SHRINK};
use serde::Serialize;

/// The arguments of `grow`.
#[derive(clap::Args, Debug)]
pub struct GrowArgs {
    /// The array (see ARRAY below).
    array: String,
    /// Each member's data area: `max` for all the room the smallest member has past the data
    /// offset, or a size such as 900G (a bare number is KiB, as mdadm's --size); rounded down
    /// to whole chunks. Smaller than now shrinks the array, once what it holds ends within
    /// the new size.
    #[arg(
        long,
        required_unless_present_any = ["raid_devices", "chunk", "layout"],
        conflicts_with_all = ["raid_devices", "chunk", "layout"]
    )]
    size: Option<String>,
    /// The member count (md's --raid-devices). raid1: the copies; more: each new role is
    /// rebuilt onto a device given with --add or a spare of the array; fewer: the members
    /// past the new count must have been failed and removed. raid0/5/6: the data is
    /// restriped online over the new members (devices given with --add, or spares of the
    /// array), which adds their room to the array when the restripe ends.
    #[arg(short = 'n', long)]
    raid_devices: Option<u32>,
    /// raid0/5/6: restripe onto this chunk size (as --chunk of create: a power of two from 4K
    /// to 1M, K/M suffix, a bare number in KiB), online.
    #[arg(short, long, value_parser = crate::size::parse_chunk, value_name = "SIZE")]
    chunk: Option<u32>,
    /// raid5/6: restripe onto this parity layout (md's names, as create's --layout), online.
    #[arg(long, value_parser = crate::create::parse_layout, value_name = "LAYOUT")]
    layout: Option<graid_engine::geometry::ParityLayout>,
    /// Devices to add as spares first, which take the new roles (with --raid-devices).
    #[arg(long, num_args = 1.., requires = "raid_devices", value_name = "DEVICE")]
    add: Vec<String>,
    /// With --size: shrink even where graidctl cannot tell where the array's content ends
    /// (raw data, a format whose size it cannot read); content that it sees reaching past
    /// the new end is refused still. With --add: add devices that hold a signature (as
    /// graidctl add --force).
    #[arg(long)]
    force: bool,
}

impl GrowArgs {
    pub fn array(&self) -> &str {
        &self.array
    }
}

#[derive(Debug, Serialize)]
struct Grown {
    array: String,
    /// Bytes, before and after.
    size_before: u64,
    size: u64,
    member_data_bytes: u64,
    resync: bool,
}

/// `--size` in sectors; 0 for `max`.
fn parse_member_size(text: &str) -> Result<u64, CtlError> {
    if text == "max" {
        return Ok(0);
    }
    let bytes = parse_size(text, 1024).map_err(|e| CtlError::Usage(format!("--size: {e}")))?;
    match bytes / 512 {
        0 => Err(CtlError::Usage(format!(
            "--size: '{text}' is less than a sector"
        ))),
        sectors => Ok(sectors),
    }
}

pub fn run(
    ctl: &dyn ControlDevice,
    sys: &dyn System,
    array: &ArrayRef,
    args: &GrowArgs,
    json_out: bool,
) -> Result<String, CtlError> {
    let Some(size) = &args.size else {
        // Clap requires one of them.
        let shape = crate::grow_members::Shape {
            raid_devices: args.raid_devices.unwrap_or(0),
            chunk_sectors: args.chunk,
            layout: args.layout.map(|l| l.code()),
        };
        return crate::grow_members::run(ctl, sys, array, &shape, &args.add, args.force, json_out);
    };
    let wanted = parse_member_size(size)?;
    let detail = resolve(ctl, sys, array)?;
    let view = ArrayView::new(&detail, sys);
    let label = view.label();
    let shrink = wanted != 0 && wanted < detail.member_data_sectors;
    if shrink {
        check_shrink(ctl, sys, &detail, &label, wanted, args.force)?;
    }
    let mut req = GraidResize {
        index: detail.index,
        flags: if shrink { GRAID_RESIZE_SHRINK } else { 0 },
        member_data_sectors: wanted,
        array_sectors: 0,
        room_sectors: 0,
    };
    if let Err(e) = ctl.resize(&mut req) {
        if e.raw_os_error() == Some(libc::ENOSPC) {
            return Err(CtlError::Failed(format!(
                "cannot grow {label}: the smallest member or spare has room for {} of data \
                 (replace the smaller ones first; nothing changed)",
                format_sectors(req.room_sectors)
            )));
        }
        return Err(ioctl_error(Op::Resize { array: &label }, &e));
    }
    let resync = req.array_sectors > detail.size_sectors && detail.level != 0;
    let verb = if req.array_sectors < detail.size_sectors {
        "shrunk"
    } else {
        "grown"
    };
    // An NVMe-oF export's hosts hear of the new size (nvmet's namespace-changed notice).
    let exports = view.exports;
    if req.array_sectors != detail.size_sectors {
        for e in &exports {
            Nvmet::new(NVMET_ROOT).revalidate(&e.nqn).map_err(|err| {
                CtlError::Failed(format!(
                    "{label} {verb}, but its NVMe-oF export {} was not told: {err}",
                    e.nqn
                ))
            })?;
        }
    }
    if json_out {
        return Ok(json(&Grown {
            array: label,
            size_before: detail.size_sectors * 512,
            size: req.array_sectors * 512,
            member_data_bytes: req.member_data_sectors * 512,
            resync,
        }));
    }
    if req.array_sectors == detail.size_sectors {
        return Ok(format!(
            "graidctl: {label}: already {} ({} per member); nothing to change\n",
            format_sectors(req.array_sectors),
            format_sectors(req.member_data_sectors)
        ));
    }
    let then = if resync {
        "; the new room resyncs in the background (graidctl wait)"
    } else {
        ""
    };
    let told = match exports.len() {
        0 => String::new(),
        _ => format!(
            "; NVMe-oF hosts told ({})",
            exports
                .iter()
                .map(|e| e.nqn.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    Ok(format!(
        "graidctl: {label}: {verb} from {} to {} ({} per member){then}{told}\n",
        format_sectors(detail.size_sectors),
        format_sectors(req.array_sectors),
        format_sectors(req.member_data_sectors)
    ))
}

/// Refuses a shrink to `wanted` sectors per member unless everything the array holds ends
/// within the size it would have (see the module comment).
fn check_shrink(
    ctl: &dyn ControlDevice,
    sys: &dyn System,
    detail: &GraidDetail,
    label: &str,
    wanted: u64,
    force: bool,
) -> Result<(), CtlError> {
    // What the module would make of it (chunk rounding, the level's data members), and whether
    // it would refuse anyway.
    let mut query = GraidResize {
        index: detail.index,
        flags: GRAID_RESIZE_SHRINK | GRAID_RESIZE_QUERY,
        member_data_sectors: wanted,
        ..GraidResize::default()
    };
    ctl.resize(&mut query)
        .map_err(|e| ioctl_error(Op::Resize { array: label }, &e))?;
    let new_bytes = query.array_sectors * 512;
    let path = array_device(detail.index);
    // A mounted filesystem may not have written its own size to the device yet (XFS and ext4
    // journal it), and nothing in use should lose its end under it.
    if sys.is_busy(&path) {
        let holder = match sys.block_rdev(&path) {
            Ok(rdev) => sys.holder(&path, rdev),
            Err(_) => "open exclusively".to_owned(),
        };
        return Err(CtlError::Failed(format!(
            "cannot shrink {label}: it is in use ({holder}); unmount it or deactivate what holds \
             it first (nothing changed)"
        )));
    }
    let unreadable =
        |e: std::io::Error| CtlError::Failed(format!("cannot shrink {label}: reading {path}: {e}"));
    let block = sys.logical_block_size(&path).map_err(unreadable)?;
    let found = sys.signatures(&path).map_err(unreadable)?;
    let unsure = |why: String| {
        if force {
            Ok(())
        } else {
            Err(CtlError::Failed(format!(
                "cannot shrink {label} to {}: {why}; if nothing past {} is in use, say so with \
                 --force (nothing changed)",
                format_sectors(query.array_sectors),
                format_sectors(query.array_sectors)
            )))
        }
    };
    if found.is_empty() {
        return unsure(
            "it holds no filesystem, volume or partition table graidctl knows, so it cannot \
             tell where the data ends"
                .to_owned(),
        );
    }
    let read = |offset: u64, len: usize| sys.read_at(&path, offset, len);
    for signature in &found {
        let what = signature.describe();
        let end = content_end(&signature.kind, &read, block).map_err(unreadable)?;
        match end {
            Some(end) if end > new_bytes => {
                return Err(CtlError::Failed(format!(
                    "cannot shrink {label} to {}: it holds {what} that takes {}; shrink that \
                     first ({}; nothing changed)",
                    format_sectors(query.array_sectors),
                    format_sectors(end.div_ceil(512)),
                    shrink_hint(&signature.kind)
                )));
            }
            Some(_) => {}
            None => unsure(format!("it holds {what}, whose size graidctl cannot read"))?,
        }
    }
    Ok(())
}

/// The tool that shrinks content of `kind`.
fn shrink_hint(kind: &str) -> &'static str {
    match kind {
        "ext2" | "ext3" | "ext4" => "resize2fs, unmounted",
        "btrfs" => "btrfs filesystem resize",
        "LVM2_member" => "pvresize --setphysicalvolumesize",
        "swap" => "swapoff, then mkswap with a size",
        "dos" | "gpt" => "sfdisk or parted: the last partition",
        "xfs" => "XFS cannot shrink: copy it off",
        _ => "its own tool",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::array_ref::parse;
    use crate::control::fake::{array, FakeControl};
    use crate::member::fake::FakeSystem;
    use crate::signature::Signature;
    use graid_abi::GRAID_MEMBER_ACTIVE;

    fn go_with(
        ctl: &FakeControl,
        sys: &FakeSystem,
        size: &str,
        force: bool,
    ) -> Result<String, CtlError> {
        let args = GrowArgs {
            array: "m".to_owned(),
            size: Some(size.to_owned()),
            raid_devices: None,
            chunk: None,
            layout: None,
            add: Vec::new(),
            force,
        };
        run(ctl, sys, &parse("m").unwrap(), &args, false)
    }

    fn go(ctl: &FakeControl, size: &str) -> Result<String, CtlError> {
        go_with(ctl, &FakeSystem::with_disks(&["vda", "vdb"]), size, false)
    }

    fn setup() -> FakeControl {
        let mut a = array(
            0,
            "m",
            1,
            &[(259, 0, GRAID_MEMBER_ACTIVE), (259, 1, GRAID_MEMBER_ACTIVE)],
        );
        a.member_data_sectors = 2048 * 1024;
        a.size_sectors = 2048 * 1024;
        let ctl = FakeControl::with(vec![a]);
        *ctl.room.borrow_mut() = 4 * 2048 * 1024;
        ctl
    }

    #[test]
    fn grows_to_the_room_or_a_size_and_says_what_follows() {
        let ctl = setup();
        assert_eq!(
            go(&ctl, "max").unwrap(),
            "graidctl: /dev/graid0 (m): grown from 1 GiB to 4 GiB (4 GiB per member); the new \
             room resyncs in the background (graidctl wait)\n"
        );
        assert_eq!(ctl.resizes.borrow()[0].member_data_sectors, 0);
        assert_eq!(ctl.resizes.borrow()[0].flags, 0);
        assert_eq!(
            go(&ctl, "4G").unwrap(),
            "graidctl: /dev/graid0 (m): already 4 GiB (4 GiB per member); nothing to change\n"
        );
    }

    #[test]
    fn refuses_more_than_the_room_with_the_reason() {
        let ctl = setup();
        let e = go(&ctl, "8G").unwrap_err().to_string();
        assert!(e.contains("has room for 4 GiB"), "{e}");
        assert!(go(&ctl, "1x").unwrap_err().to_string().contains("--size"));
    }

    /// An ext4 superblock of `blocks` 4 KiB blocks at its place.
    fn ext4_of(blocks: u32) -> Vec<u8> {
        let mut dev = vec![0u8; 4096];
        dev[1024 + 0x38..1024 + 0x3a].copy_from_slice(&0xef53u16.to_le_bytes());
        dev[1024 + 0x04..1024 + 0x08].copy_from_slice(&blocks.to_le_bytes());
        dev[1024 + 0x18..1024 + 0x1c].copy_from_slice(&2u32.to_le_bytes());
        dev
    }

    fn holding(kind: &str, content: Vec<u8>) -> FakeSystem {
        let sys = FakeSystem::with_disks(&["vda", "vdb"]);
        sys.set_signatures(
            "/dev/graid0",
            vec![Signature {
                kind: kind.to_owned(),
                label: None,
                partition_table: false,
            }],
        );
        sys.contents
            .borrow_mut()
            .insert("/dev/graid0".to_owned(), content);
        sys
    }

    #[test]
    fn shrinks_only_past_where_the_filesystem_ends() {
        let ctl = setup();
        // A 768 MiB filesystem: not to 512 MiB, whatever --force says.
        let sys = holding("ext4", ext4_of(768 * 256));
        for force in [false, true] {
            let e = go_with(&ctl, &sys, "512M", force).unwrap_err().to_string();
            assert!(
                e.contains("cannot shrink /dev/graid0 (m) to 512 MiB: it holds an ext4")
                    && e.contains("takes 768 MiB")
                    && e.contains("resize2fs"),
                "{e}"
            );
        }
        // Only the question was asked.
        assert!(ctl
            .resizes
            .borrow()
            .iter()
            .all(|r| r.flags == GRAID_RESIZE_SHRINK | GRAID_RESIZE_QUERY));
        // resize2fs'd to 512 MiB: it fits.
        let sys = holding("ext4", ext4_of(512 * 256));
        assert_eq!(
            go_with(&ctl, &sys, "512M", false).unwrap(),
            "graidctl: /dev/graid0 (m): shrunk from 1 GiB to 512 MiB (512 MiB per member)\n"
        );
        let last = *ctl.resizes.borrow().last().unwrap();
        assert_eq!(last.flags, GRAID_RESIZE_SHRINK);
        assert_eq!(last.member_data_sectors, 1024 * 1024);
    }

    #[test]
    fn a_shrink_of_an_array_in_use_is_refused_even_when_its_content_fits() {
        let ctl = setup();
        let sys = holding("ext4", ext4_of(256 * 256));
        sys.set_busy("/dev/graid0");
        for force in [false, true] {
            let e = go_with(&ctl, &sys, "512M", force).unwrap_err().to_string();
            assert!(
                e.contains("cannot shrink /dev/graid0 (m): it is in use"),
                "{e}"
            );
        }
        assert_eq!(ctl.arrays.borrow()[0].size_sectors, 2048 * 1024);
    }

    #[test]
    fn a_shrink_where_graidctl_cannot_tell_needs_force() {
        let ctl = setup();
        let raw = FakeSystem::with_disks(&["vda", "vdb"]);
        let e = go_with(&ctl, &raw, "512M", false).unwrap_err().to_string();
        assert!(
            e.contains("holds no filesystem, volume or partition table") && e.contains("--force"),
            "{e}"
        );
        let luks = holding("crypto_LUKS", vec![0; 4096]);
        let e = go_with(&ctl, &luks, "512M", false).unwrap_err().to_string();
        assert!(
            e.contains("a LUKS encrypted volume, whose size graidctl cannot read"),
            "{e}"
        );
        assert_eq!(
            ctl.arrays.borrow()[0].size_sectors,
            2048 * 1024,
            "refused, yet shrunk"
        );
        // A header its kind's own says is not one: not guessed either.
        let broken = holding("ext4", vec![0; 4096]);
        assert!(go_with(&ctl, &broken, "512M", false).is_err());
        assert!(go_with(&ctl, &raw, "512M", true)
            .unwrap()
            .contains("shrunk from 1 GiB to 512 MiB"));
    }
}
