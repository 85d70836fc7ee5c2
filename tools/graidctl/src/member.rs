//! Member block devices: path → device number, device number → `/dev` path (sysfs), and the
//! list of block devices `assemble --scan` examines.
//!
//! [`System`] is the seam to the machine, so the verbs can be tested with a fake one.

use crate::error::CtlError;
use crate::sbio;
use crate::signature::{self, Signature};
use graid_engine::superblock::SUPERBLOCK_SIZE;
use std::collections::HashMap;
use std::fs;
use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

/// A device number, `major:minor`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Rdev {
    pub major: u32,
    pub minor: u32,
}

impl std::fmt::Display for Rdev {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.major, self.minor)
    }
}

impl From<graid_abi::GraidMember> for Rdev {
    /// The device number the module reports.
    fn from(dev: graid_abi::GraidMember) -> Self {
        Self {
            major: dev.major,
            minor: dev.minor,
        }
    }
}

impl Rdev {
    /// Splits a `dev_t` as glibc's `major()`/`minor()` do.
    pub fn from_dev_t(dev: u64) -> Self {
        Self {
            major: (((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff)) as u32,
            minor: ((dev & 0xff) | ((dev >> 12) & !0xff)) as u32,
        }
    }
}

/// A block device found in sysfs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockDev {
    pub path: String,
    pub rdev: Rdev,
}

/// What graidctl needs from the machine besides the control device.
pub trait System {
    /// The device number of the block device at `path` (symlinks followed). Errors name the path
    /// and say why it cannot be a member.
    fn block_rdev(&self, path: &str) -> Result<Rdev, CtlError>;
    /// `/dev/NAME` of block device `rdev`, if the system has it.
    fn dev_path(&self, rdev: Rdev) -> Option<String>;
    /// `path` with every symlink resolved.
    fn canonicalize(&self, path: &str) -> io::Result<PathBuf>;
    /// Every block device with a nonzero size.
    fn block_devices(&self) -> Vec<BlockDev>;
    /// The superblock block (4 KiB at byte 4096) of `path`.
    fn read_superblock(&self, path: &str) -> io::Result<Box<[u8; SUPERBLOCK_SIZE]>>;
    /// The signatures (filesystems, partition tables, volumes) on `path`, libblkid's.
    fn signatures(&self, path: &str) -> io::Result<Vec<Signature>>;
    /// `len` bytes at byte `offset` of `path` (fewer only at its end), as the device holds them
    /// now (not an older copy the kernel's cache of the device kept).
    fn read_at(&self, path: &str, offset: u64, len: usize) -> io::Result<Vec<u8>>;
    /// The logical block size of the block device at `path`, bytes.
    fn logical_block_size(&self, path: &str) -> io::Result<u64>;
    /// Whether something holds `path` exclusively (a mount, swap, md, dm, an array).
    fn is_busy(&self, path: &str) -> bool;
    /// What holds the busy device `path`, for a message.
    fn holder(&self, path: &str, rdev: Rdev) -> String;
    /// What the kernel's NVMe-oF target exports (`nvmet.rs`), devices' symlinks resolved.
    fn exports(&self) -> Vec<crate::nvmet::Export>;
}

/// The real machine: `stat`, `/sys/dev/block`, `/sys/class/block`.
pub struct RealSystem;

impl System for RealSystem {
    fn block_rdev(&self, path: &str) -> Result<Rdev, CtlError> {
        let meta = match fs::metadata(path) {
            Ok(meta) => meta,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(CtlError::Failed(format!("member {path}: no such device")))
            }
            Err(e) => return Err(CtlError::io(format!("member {path}"), e)),
        };
        if !meta.file_type().is_block_device() {
            return Err(CtlError::Failed(format!(
                "member {path}: not a block device ({})",
                file_kind(&meta.file_type())
            )));
        }
        Ok(Rdev::from_dev_t(meta.rdev()))
    }

    fn dev_path(&self, rdev: Rdev) -> Option<String> {
        let uevent = fs::read_to_string(format!("/sys/dev/block/{rdev}/uevent")).ok()?;
        parse_uevent(&uevent)
            .get("DEVNAME")
            .map(|name| format!("/dev/{name}"))
    }

    fn canonicalize(&self, path: &str) -> io::Result<PathBuf> {
        fs::canonicalize(path)
    }

    fn block_devices(&self) -> Vec<BlockDev> {
        let Ok(entries) = fs::read_dir("/sys/class/block") else {
            return Vec::new();
        };
        let mut devices: Vec<BlockDev> = entries
            .flatten()
            .filter_map(|entry| {
                let dir = entry.path();
                let size = fs::read_to_string(dir.join("size")).ok()?;
                if size.trim() == "0" {
                    return None;
                }
                let text = fs::read_to_string(dir.join("uevent")).ok()?;
                let uevent = parse_uevent(&text);
                Some(BlockDev {
                    path: format!("/dev/{}", uevent.get("DEVNAME")?),
                    rdev: Rdev {
                        major: uevent.get("MAJOR")?.parse().ok()?,
                        minor: uevent.get("MINOR")?.parse().ok()?,
                    },
                })
            })
            .collect();
        devices.sort_by(|a, b| a.path.cmp(&b.path));
        devices
    }

    fn read_superblock(&self, path: &str) -> io::Result<Box<[u8; SUPERBLOCK_SIZE]>> {
        sbio::read_superblock(Path::new(path))
    }

    fn signatures(&self, path: &str) -> io::Result<Vec<Signature>> {
        signature::probe(Path::new(path))
    }

    fn read_at(&self, path: &str, offset: u64, len: usize) -> io::Result<Vec<u8>> {
        use std::os::fd::AsRawFd;
        use std::os::unix::fs::FileExt;
        let file = fs::File::open(path)?;
        // Drop the device's cached pages first: a filesystem that writes through its own cache
        // (XFS) leaves stale ones behind. Not a block device (a test's file): nothing cached.
        // BLKFLSBUF is _IO(0x12, 97), BLKSSZGET _IO(0x12, 104): the same direction bits.
        let blkflsbuf = (libc::BLKSSZGET & !0xff) | 97;
        // SAFETY: BLKFLSBUF takes no argument; the descriptor is open for the call.
        let _ = unsafe { libc::ioctl(file.as_raw_fd(), blkflsbuf, 0) };
        let mut out = vec![0u8; len];
        let mut done = 0;
        while done < len {
            match file.read_at(&mut out[done..], offset + done as u64)? {
                0 => break,
                n => done += n,
            }
        }
        out.truncate(done);
        Ok(out)
    }

    fn logical_block_size(&self, path: &str) -> io::Result<u64> {
        use std::os::fd::AsRawFd;
        let file = fs::File::open(path)?;
        let mut size: libc::c_int = 0;
        // SAFETY: BLKSSZGET writes one int through the pointer, which is valid for it.
        let rc = unsafe { libc::ioctl(file.as_raw_fd(), libc::BLKSSZGET, &mut size) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        u64::try_from(size).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
    }

    fn is_busy(&self, path: &str) -> bool {
        signature::is_busy(path)
    }

    fn holder(&self, path: &str, rdev: Rdev) -> String {
        signature::holder(self, path, rdev)
    }

    fn exports(&self) -> Vec<crate::nvmet::Export> {
        let resolve = |p: &str| {
            fs::canonicalize(p).map_or_else(|_| p.to_owned(), |c| c.to_string_lossy().into_owned())
        };
        crate::nvmet::Nvmet::new(crate::nvmet::NVMET_ROOT).exports(&resolve)
    }
}

fn file_kind(t: &fs::FileType) -> &'static str {
    if t.is_dir() {
        "a directory"
    } else if t.is_file() {
        "a regular file"
    } else if t.is_char_device() {
        "a character device"
    } else {
        "not a device"
    }
}

/// The `KEY=value` lines of a sysfs `uevent` file.
pub fn parse_uevent(text: &str) -> HashMap<&str, &str> {
    text.lines()
        .filter_map(|line| line.split_once('='))
        .collect()
}

/// How a member is shown in messages: its path, or `major:minor` when the system has no node.
pub fn describe(sys: &dyn System, rdev: Rdev) -> String {
    sys.dev_path(rdev)
        .map_or_else(|| rdev.to_string(), |path| format!("{path} ({rdev})"))
}

/// Resolves each member path to its device number, refusing duplicates (the same device given
/// twice, under the same or another name).
pub fn resolve_members(sys: &dyn System, paths: &[String]) -> Result<Vec<Rdev>, CtlError> {
    let mut seen: HashMap<Rdev, &str> = HashMap::new();
    let mut rdevs = Vec::with_capacity(paths.len());
    for path in paths {
        let rdev = sys.block_rdev(path)?;
        if let Some(first) = seen.insert(rdev, path) {
            return Err(CtlError::Usage(if first == path {
                format!("member {path} is given twice")
            } else {
                format!("member {path} is the same device ({rdev}) as {first}")
            }));
        }
        rdevs.push(rdev);
    }
    Ok(rdevs)
}

#[cfg(test)]
pub mod fake {
    //! A machine of fake block devices for host tests.

    use super::*;
    use std::cell::RefCell;

    /// A fake device: path, device number, superblock block if readable.
    pub type FakeDevice = (String, Rdev, Option<Box<[u8; SUPERBLOCK_SIZE]>>);

    #[derive(Default)]
    pub struct FakeSystem {
        pub devices: Vec<FakeDevice>,
        /// symlink → target.
        pub links: Vec<(String, String)>,
        /// What libblkid would find, by path.
        pub signatures: RefCell<HashMap<String, Vec<Signature>>>,
        /// Paths something holds.
        pub busy: RefCell<Vec<String>>,
        /// What `read_at` reads, by path (nothing: zeros).
        pub contents: RefCell<HashMap<String, Vec<u8>>>,
        /// Logical block sizes, by path (nothing: 512).
        pub block_sizes: RefCell<HashMap<String, u64>>,
        /// What nvmet exports.
        pub exports: RefCell<Vec<crate::nvmet::Export>>,
    }

    impl FakeSystem {
        pub fn with_disks(names: &[&str]) -> Self {
            let devices = names
                .iter()
                .enumerate()
                .map(|(i, name)| {
                    let rdev = Rdev {
                        major: 259,
                        minor: i as u32,
                    };
                    (format!("/dev/{name}"), rdev, None)
                })
                .collect();
            Self {
                devices,
                ..Self::default()
            }
        }

        pub fn set_signatures(&self, path: &str, found: Vec<Signature>) {
            self.signatures.borrow_mut().insert(path.to_owned(), found);
        }

        pub fn set_busy(&self, path: &str) {
            self.busy.borrow_mut().push(path.to_owned());
        }
    }

    impl System for FakeSystem {
        fn block_rdev(&self, path: &str) -> Result<Rdev, CtlError> {
            let path = self
                .links
                .iter()
                .find(|(l, _)| l == path)
                .map_or(path, |(_, t)| t.as_str());
            self.devices
                .iter()
                .find(|(p, _, _)| p == path)
                .map(|(_, rdev, _)| *rdev)
                .ok_or_else(|| CtlError::Failed(format!("member {path}: no such device")))
        }

        fn dev_path(&self, rdev: Rdev) -> Option<String> {
            self.devices
                .iter()
                .find(|(_, r, _)| *r == rdev)
                .map(|(p, _, _)| p.clone())
        }

        fn canonicalize(&self, path: &str) -> io::Result<PathBuf> {
            match self.links.iter().find(|(l, _)| l == path) {
                Some((_, target)) => Ok(PathBuf::from(target)),
                None if path.starts_with("/dev/graid")
                    || self.devices.iter().any(|(p, _, _)| p == path) =>
                {
                    Ok(PathBuf::from(path))
                }
                None => Err(io::Error::from_raw_os_error(libc::ENOENT)),
            }
        }

        fn block_devices(&self) -> Vec<BlockDev> {
            self.devices
                .iter()
                .map(|(path, rdev, _)| BlockDev {
                    path: path.clone(),
                    rdev: *rdev,
                })
                .collect()
        }

        fn read_superblock(&self, path: &str) -> io::Result<Box<[u8; SUPERBLOCK_SIZE]>> {
            self.devices
                .iter()
                .find(|(p, _, _)| p == path)
                .and_then(|(_, _, block)| block.clone())
                .ok_or_else(|| io::Error::from_raw_os_error(libc::EIO))
        }

        fn signatures(&self, path: &str) -> io::Result<Vec<Signature>> {
            Ok(self
                .signatures
                .borrow()
                .get(path)
                .cloned()
                .unwrap_or_default())
        }

        fn read_at(&self, path: &str, offset: u64, len: usize) -> io::Result<Vec<u8>> {
            let contents = self.contents.borrow();
            let Some(data) = contents.get(path) else {
                return Ok(vec![0; len]);
            };
            let start = usize::try_from(offset)
                .unwrap_or(usize::MAX)
                .min(data.len());
            Ok(data[start..(start + len).min(data.len())].to_vec())
        }

        fn logical_block_size(&self, path: &str) -> io::Result<u64> {
            Ok(self.block_sizes.borrow().get(path).copied().unwrap_or(512))
        }

        fn is_busy(&self, path: &str) -> bool {
            self.busy.borrow().iter().any(|p| p == path)
        }

        fn holder(&self, path: &str, _rdev: Rdev) -> String {
            format!("{path} is held by the test")
        }

        fn exports(&self) -> Vec<crate::nvmet::Export> {
            self.exports.borrow().clone()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fake::FakeSystem;
    use super::*;

    #[test]
    fn dev_t_splits_like_glibc() {
        // makedev(8, 16) and makedev(259, 0x12345) in glibc's encoding.
        assert_eq!(
            Rdev::from_dev_t(0x810),
            Rdev {
                major: 8,
                minor: 16
            }
        );
        let dev: u64 = (259 & 0xfff) << 8 | (0x45) | ((0x12345 & !0xff) << 12);
        assert_eq!(
            Rdev::from_dev_t(dev),
            Rdev {
                major: 259,
                minor: 0x12345
            }
        );
        let big: u64 = (0x1234u64 & !0xfff) << 32 | (0x1234 & 0xfff) << 8 | 7;
        assert_eq!(Rdev::from_dev_t(big).major, 0x1234);
    }

    #[test]
    fn uevent_devname() {
        let text = "MAJOR=259\nMINOR=3\nDEVNAME=nvme0n1p1\nDEVTYPE=partition\nPARTN=1\n";
        let map = parse_uevent(text);
        assert_eq!(map.get("DEVNAME"), Some(&"nvme0n1p1"));
        assert_eq!(map.get("MINOR"), Some(&"3"));
        assert_eq!(map.get("NOPE"), None);
    }

    #[test]
    fn duplicate_members_are_refused_by_device_number() {
        let mut sys = FakeSystem::with_disks(&["a", "b"]);
        sys.links
            .push(("/dev/disk/by-id/x".into(), "/dev/a".into()));
        let ok = resolve_members(&sys, &["/dev/a".into(), "/dev/b".into()]).unwrap();
        assert_eq!(ok.len(), 2);
        let err = resolve_members(&sys, &["/dev/a".into(), "/dev/a".into()]).unwrap_err();
        assert_eq!(err.to_string(), "member /dev/a is given twice");
        assert_eq!(err.exit_code(), crate::error::EXIT_USAGE);
        let err =
            resolve_members(&sys, &["/dev/a".into(), "/dev/disk/by-id/x".into()]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "member /dev/disk/by-id/x is the same device (259:0) as /dev/a"
        );
        let err = resolve_members(&sys, &["/dev/zz".into()]).unwrap_err();
        assert_eq!(err.to_string(), "member /dev/zz: no such device");
    }

    #[test]
    fn real_system_lists_block_devices_from_sysfs() {
        // Whatever this machine has (possibly nothing in a container): well-formed entries.
        for dev in RealSystem.block_devices() {
            assert!(dev.path.starts_with("/dev/"), "{dev:?}");
            assert_eq!(RealSystem.dev_path(dev.rdev).as_deref(), Some(&*dev.path));
        }
    }

    #[test]
    fn real_system_refuses_non_block_devices() {
        let err = RealSystem.block_rdev("/").unwrap_err();
        assert_eq!(
            err.to_string(),
            "member /: not a block device (a directory)"
        );
        let err = RealSystem.block_rdev("/nonexistent/graid").unwrap_err();
        assert_eq!(err.to_string(), "member /nonexistent/graid: no such device");
        let err = RealSystem.block_rdev("/dev/null").unwrap_err();
        assert!(err.to_string().contains("a character device"), "{err}");
    }
}
