//! Nothing destroyed by mistake: before `create`, `add` or `replace --with` writes a superblock
//! on a device, it must hold nothing someone may still want (a filesystem, a partition table, an
//! LVM physical volume, an md member, ...) unless the admin says `--force`, and it must not be in
//! use (mounted, a swap, held by md, dm or another array) even then: writing under a mounted
//! filesystem corrupts it whatever the admin meant.
//!
//! The signatures are libblkid's (util-linux, the library `blkid`, `wipefs` and `lsblk` use), so
//! graid knows every format they know.

use crate::array_ref::running_arrays;
use crate::control::ControlDevice;
use crate::error::CtlError;
use crate::member::{Rdev, System};
use crate::output::{present_members, spare_devices};
use graid_abi::GRAID_ROLE_NONE;
use libblkid_rs::{BlkidProbe, BlkidProbeRet, BlkidSublks, BlkidSublksFlags};
use std::fs;
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// A signature libblkid found on a device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Signature {
    /// `ext4`, `gpt`, `LVM2_member`, `linux_raid_member`, `swap`, ...
    pub kind: String,
    /// A filesystem's or volume's label, if it has one.
    pub label: Option<String>,
    /// Whether it is a partition table (rather than a filesystem or volume superblock).
    pub partition_table: bool,
}

impl Signature {
    /// `an ext4 filesystem (label "home")`, `a gpt partition table`, ...
    pub fn describe(&self) -> String {
        let what = match self.kind.as_str() {
            "LVM2_member" => "an LVM physical volume".to_owned(),
            "linux_raid_member" => "an md RAID member superblock".to_owned(),
            "swap" => "a swap area".to_owned(),
            "crypto_LUKS" => "a LUKS encrypted volume".to_owned(),
            kind if self.partition_table => format!("a {kind} partition table"),
            kind => format!("{} {kind} signature", article(kind)),
        };
        match &self.label {
            Some(label) if !label.is_empty() => format!("{what} (label \"{label}\")"),
            _ => what,
        }
    }
}

fn article(word: &str) -> &'static str {
    if word.starts_with(['a', 'e', 'i', 'o', 'u', 'A', 'E', 'I', 'O', 'U']) {
        "an"
    } else {
        "a"
    }
}

/// Every signature on the device at `path`, as `wipefs` lists them: filesystems, RAID and volume
/// superblocks, partition tables.
pub fn probe(path: &Path) -> io::Result<Vec<Signature>> {
    let blkid = |e: libblkid_rs::BlkidErr| io::Error::other(format!("libblkid: {e}"));
    let mut probe = BlkidProbe::new_from_filename(path).map_err(blkid)?;
    probe.enable_superblocks(true).map_err(blkid)?;
    probe
        .set_superblock_flags(BlkidSublksFlags::new(vec![
            BlkidSublks::Type,
            BlkidSublks::Label,
            BlkidSublks::Magic,
            BlkidSublks::Badcsum,
        ]))
        .map_err(blkid)?;
    probe.enable_partitions(true).map_err(blkid)?;
    let mut found = Vec::new();
    // Each do_probe() step yields the next signature, superblocks first (wipefs's loop).
    while let BlkidProbeRet::Success = probe.do_probe().map_err(blkid)? {
        let value = |name: &str| probe.lookup_value(name).ok();
        if let Some(kind) = value("TYPE") {
            found.push(Signature {
                kind,
                label: value("LABEL"),
                partition_table: false,
            });
        } else if let Some(kind) = value("PTTYPE") {
            found.push(Signature {
                kind,
                label: None,
                partition_table: true,
            });
        }
    }
    Ok(found)
}

/// Who holds a busy device, from what the kernel says: its mounts, swaps and holders.
pub fn holder(sys: &dyn System, path: &str, rdev: Rdev) -> String {
    let dev = format!("{}:{}", rdev.major, rdev.minor);
    if let Ok(mounts) = fs::read_to_string("/proc/self/mountinfo") {
        // mountinfo: ID PARENT MAJOR:MINOR ROOT MOUNTPOINT ...
        let points: Vec<&str> = mounts
            .lines()
            .filter_map(|l| {
                let f: Vec<&str> = l.split(' ').collect();
                (f.get(2) == Some(&dev.as_str())).then(|| f.get(4).copied())?
            })
            .collect();
        if !points.is_empty() {
            return format!("mounted on {}", points.join(", "));
        }
    }
    let canonical = sys.canonicalize(path).ok();
    if let (Ok(swaps), Some(c)) = (fs::read_to_string("/proc/swaps"), &canonical) {
        if swaps
            .lines()
            .skip(1)
            .any(|l| l.split_whitespace().next() == Some(&*c.to_string_lossy()))
        {
            return "in use as swap".to_owned();
        }
    }
    let holders = canonical
        .as_ref()
        .and_then(|c| c.file_name().map(|n| n.to_string_lossy().into_owned()))
        .and_then(|name| fs::read_dir(format!("/sys/class/block/{name}/holders")).ok())
        .map(|dir| {
            dir.filter_map(|e| e.ok())
                .map(|e| format!("/dev/{}", e.file_name().to_string_lossy()))
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    if !holders.is_empty() {
        return format!("held by {}", holders.join(", "));
    }
    "open exclusively by another driver or program (a running array, a filesystem, a VM)".to_owned()
}

/// Whether the device at `path` is free: an exclusive open of a block device fails with EBUSY
/// while anything else holds it exclusively (a mount, swap, md, dm, a graid array).
pub fn is_busy(path: &str) -> bool {
    fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_EXCL)
        .open(path)
        .is_err_and(|e| e.raw_os_error() == Some(libc::EBUSY))
}

/// The devices running arrays hold (members, spares, replacements): a verb given one of them is
/// refused by the module with a reason of its own (a member already, another array's), which
/// says more than "in use".
pub fn held_by_arrays(ctl: &dyn ControlDevice) -> Vec<Rdev> {
    let Ok(arrays) = running_arrays(ctl) else {
        return Vec::new();
    };
    let mut held = Vec::new();
    for d in &arrays {
        held.extend(present_members(d).iter().map(|m| Rdev::from(m.dev)));
        held.extend(spare_devices(d).iter().map(|&s| Rdev::from(s)));
        if d.replace_role != GRAID_ROLE_NONE {
            held.push(Rdev::from(d.replace_dev));
        }
    }
    held
}

/// Refuses `devices` (each with what `verb` is about to do to it) where one is in use, always,
/// or holds a signature, unless `force`. Devices in `held` (running arrays') are left to the
/// module.
pub fn check_devices(
    sys: &dyn System,
    devices: &[String],
    held: &[Rdev],
    force: bool,
    verb: &str,
) -> Result<(), CtlError> {
    for path in devices {
        let rdev = sys.block_rdev(path)?;
        if held.contains(&rdev) {
            continue;
        }
        if sys.is_busy(path) {
            return Err(CtlError::Failed(format!(
                "{path} is in use: {}; not even --force {verb} it",
                sys.holder(path, rdev)
            )));
        }
        if force {
            continue;
        }
        // A device libblkid cannot read is the module's to refuse, with its own reason.
        let Ok(found) = sys.signatures(path) else {
            continue;
        };
        if !found.is_empty() {
            let what: Vec<String> = found.iter().map(Signature::describe).collect();
            return Err(CtlError::Failed(format!(
                "{path} holds {}; {verb} it destroys that: use --force if you mean it (wipefs \
                 -a {path} erases the signatures)",
                what.join(" and ")
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::member::fake::FakeSystem;

    fn sig(kind: &str, label: Option<&str>, pt: bool) -> Signature {
        Signature {
            kind: kind.to_owned(),
            label: label.map(str::to_owned),
            partition_table: pt,
        }
    }

    #[test]
    fn signatures_are_named_for_people() {
        assert_eq!(
            sig("ext4", Some("home"), false).describe(),
            "an ext4 signature (label \"home\")"
        );
        assert_eq!(sig("gpt", None, true).describe(), "a gpt partition table");
        assert_eq!(
            sig("LVM2_member", None, false).describe(),
            "an LVM physical volume"
        );
        assert_eq!(
            sig("linux_raid_member", Some(""), false).describe(),
            "an md RAID member superblock"
        );
        assert_eq!(sig("xfs", None, false).describe(), "a xfs signature");
    }

    #[test]
    fn a_device_with_a_signature_needs_force_and_a_busy_one_is_refused_even_so() {
        let sys = FakeSystem::with_disks(&["nvme0n1", "nvme1n1", "nvme2n1"]);
        sys.set_signatures("/dev/nvme1n1", vec![sig("ext4", Some("data"), false)]);
        let devs = ["/dev/nvme0n1".to_owned(), "/dev/nvme1n1".to_owned()];
        let err = check_devices(&sys, &devs, &[], false, "creating an array on").unwrap_err();
        assert_eq!(
            err.to_string(),
            "/dev/nvme1n1 holds an ext4 signature (label \"data\"); creating an array on it \
             destroys that: use --force if you mean it (wipefs -a /dev/nvme1n1 erases the \
             signatures)"
        );
        check_devices(&sys, &devs, &[], true, "creating an array on").unwrap();
        sys.set_busy("/dev/nvme0n1");
        let err = check_devices(&sys, &devs, &[], true, "creating an array on").unwrap_err();
        assert!(
            err.to_string().starts_with("/dev/nvme0n1 is in use: "),
            "{err}"
        );
        check_devices(&sys, &["/dev/nvme2n1".to_owned()], &[], false, "adding").unwrap();
        // A running array's own devices are the module's to refuse.
        let held = [sys.block_rdev("/dev/nvme0n1").unwrap()];
        check_devices(&sys, &devs[..1], &held, false, "adding").unwrap();
    }

    #[test]
    fn libblkid_reads_a_filesystem_and_a_partition_table_in_an_image() {
        let dir = std::env::temp_dir().join(format!("graid-sig-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let img = dir.join("disk.img");
        let mut data = vec![0u8; 1 << 20];
        // An MBR (DOS) partition table: one partition entry and the 0x55AA boot signature.
        data[446 + 4] = 0x83;
        data[446 + 8] = 8;
        data[446 + 12] = 64;
        data[510] = 0x55;
        data[511] = 0xAA;
        fs::write(&img, &data).unwrap();
        let found = probe(&img).unwrap();
        assert_eq!(found, vec![sig("dos", None, true)], "{found:?}");
        // Nothing on zeroes.
        fs::write(&img, vec![0u8; 1 << 20]).unwrap();
        assert_eq!(probe(&img).unwrap(), vec![]);
        fs::remove_dir_all(&dir).unwrap();
    }
}
