//! Whether the `raid_gpu` module is installed for a kernel, for the monitor to say so at boot
//! when the running kernel has none (DKMS skipped a kernel series graid does not support yet):
//! then no graid array can start.
//!
//! "Installed" means what `modprobe` would find: an entry of `MODULES_ROOT/RELEASE/modules.dep`
//! (written by `depmod`, which DKMS runs) whose file is `raid_gpu.ko`, compressed or not. A
//! module loaded by hand (`insmod` of a test build) counts too: `/sys/module/raid_gpu`.

use std::cmp::Ordering;
use std::path::{Path, PathBuf};

/// The module's name, as `modprobe` and `/sys/module` spell it.
pub const MODULE: &str = "raid_gpu";

/// Where each kernel's modules are installed, one directory per release.
pub const MODULES_ROOT: &str = "/lib/modules";

/// The file names `depmod` knows a module by: plain and each compression it reads.
const FILE_NAMES: [&str; 4] = [
    "raid_gpu.ko",
    "raid_gpu.ko.xz",
    "raid_gpu.ko.zst",
    "raid_gpu.ko.gz",
];

/// Where the module stands for the running kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Status {
    /// The running kernel's release (`uname -r`).
    pub release: String,
    /// Loaded, or installed for `release`: it can be (or is) loaded.
    pub installed: bool,
    /// The other installed kernel releases that have it, newest first.
    pub others: Vec<String>,
}

impl Status {
    /// The running kernel's, looking in `MODULES_ROOT` and `/sys/module`.
    pub fn running() -> Self {
        let release = running_release().unwrap_or_default();
        let loaded = Path::new("/sys/module").join(MODULE).exists();
        Self::of(Path::new(MODULES_ROOT), &release, loaded)
    }

    /// Kernel `release`'s, with its modules under `root`; `loaded`: whether the module is
    /// loaded already (which settles it whatever `modules.dep` says).
    pub fn of(root: &Path, release: &str, loaded: bool) -> Self {
        Self {
            release: release.to_owned(),
            installed: loaded || installed_for(root, release),
            others: releases_with_module(root, release),
        }
    }
}

/// The running kernel's release, as `uname -r` prints it.
pub fn running_release() -> Option<String> {
    // SAFETY: utsname is plain data; all zeroes is a valid value, and uname fills it.
    let mut uts: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: uts is a valid, writable utsname.
    if unsafe { libc::uname(&mut uts) } != 0 {
        return std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .ok()
            .map(|s| s.trim().to_owned());
    }
    // The field is NUL-terminated within its length (the kernel guarantees it).
    let bytes: Vec<u8> = uts
        .release
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

/// Whether `modules.dep`'s text lists the module: a line `PATH: DEPENDENCIES...` whose PATH's
/// file name is one of [`FILE_NAMES`] (a module that only depends on it does not count).
pub fn dep_lists_module(modules_dep: &str) -> bool {
    modules_dep.lines().any(|line| {
        let Some((path, _deps)) = line.split_once(':') else {
            return false;
        };
        let name = path.trim().rsplit('/').next().unwrap_or_default();
        FILE_NAMES.contains(&name)
    })
}

fn modules_dep(root: &Path, release: &str) -> PathBuf {
    root.join(release).join("modules.dep")
}

/// Whether the module is installed for kernel `release` under `root` (false when its
/// `modules.dep` is missing or unreadable: `modprobe` could not load it either).
pub fn installed_for(root: &Path, release: &str) -> bool {
    !release.is_empty()
        && std::fs::read_to_string(modules_dep(root, release))
            .is_ok_and(|text| dep_lists_module(&text))
}

/// The kernel releases under `root` other than `except` that have the module, newest first.
pub fn releases_with_module(root: &Path, except: &str) -> Vec<String> {
    let Ok(dir) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    let mut releases: Vec<String> = dir
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter(|release| release != except && installed_for(root, release))
        .collect();
    releases.sort_by(|a, b| compare_releases(b, a));
    releases
}

/// Orders kernel releases as versions: runs of digits compare as numbers (`7.10` after `7.9`),
/// the rest as text; a release that is a prefix of another comes first (`7.2` before `7.2.1`).
pub fn compare_releases(a: &str, b: &str) -> Ordering {
    let (mut a, mut b) = (a, b);
    loop {
        match (a.is_empty(), b.is_empty()) {
            (true, true) => return Ordering::Equal,
            (true, false) => return Ordering::Less,
            (false, true) => return Ordering::Greater,
            _ => {}
        }
        let (ra, rest_a) = split_run(a);
        let (rb, rest_b) = split_run(b);
        let a_digits = ra.starts_with(|c: char| c.is_ascii_digit());
        let b_digits = rb.starts_with(|c: char| c.is_ascii_digit());
        let order = match (a_digits, b_digits) {
            (true, true) => {
                // Numerically, without overflow: leading zeroes aside, the longer is larger.
                let (za, zb) = (ra.trim_start_matches('0'), rb.trim_start_matches('0'));
                za.len().cmp(&zb.len()).then_with(|| za.cmp(zb))
            }
            _ => ra.cmp(rb),
        };
        if order != Ordering::Equal {
            return order;
        }
        (a, b) = (rest_a, rest_b);
    }
}

/// The leading run of `s` (all digits, or no digit) and the rest.
fn split_run(s: &str) -> (&str, &str) {
    let digits = s.starts_with(|c: char| c.is_ascii_digit());
    let end = s
        .find(|c: char| c.is_ascii_digit() != digits)
        .unwrap_or(s.len());
    s.split_at(end)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A modules root with one directory per `(release, modules.dep text)`; None: no
    /// modules.dep (a directory left behind by a removed kernel).
    fn root(tag: &str, kernels: &[(&str, Option<&str>)]) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("graidctl-modules-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for (release, dep) in kernels {
            let kdir = dir.join(release);
            std::fs::create_dir_all(&kdir).unwrap();
            if let Some(dep) = dep {
                std::fs::write(kdir.join("modules.dep"), dep).unwrap();
            }
        }
        dir
    }

    const DEBIAN: &str = "kernel/drivers/md/raid456.ko.xz: kernel/crypto/async_tx/async_pq.ko.xz \
kernel/lib/raid6/raid6_pq.ko.xz\nupdates/dkms/raid_gpu.ko.xz:\nkernel/fs/ext4/ext4.ko.xz: \
kernel/fs/mbcache.ko.xz kernel/fs/jbd2/jbd2.ko.xz\n";
    const OTHER: &str = "kernel/drivers/md/raid456.ko.xz: kernel/lib/raid6/raid6_pq.ko.xz\n\
kernel/fs/ext4/ext4.ko.xz:\n";

    #[test]
    fn modules_dep_names_the_module_by_its_file() {
        assert!(dep_lists_module(DEBIAN));
        assert!(!dep_lists_module(OTHER));
        assert!(!dep_lists_module(""));
        // Plain, compressed, and with dependencies after the colon.
        assert!(dep_lists_module("extra/raid_gpu.ko:\n"));
        assert!(dep_lists_module(
            "updates/dkms/raid_gpu.ko.zst: kernel/lib/raid6/raid6_pq.ko.zst kernel/x.ko.zst\n"
        ));
        assert!(dep_lists_module("/lib/modules/7.2.0/extra/raid_gpu.ko.gz:"));
        // Another module with a like name, or one that depends on it, is not it.
        assert!(!dep_lists_module("extra/raid_gpu_test.ko.xz:\n"));
        assert!(!dep_lists_module("extra/not_raid_gpu.ko:\n"));
        assert!(!dep_lists_module(
            "extra/graid_extra.ko.xz: updates/dkms/raid_gpu.ko.xz\n"
        ));
        assert!(!dep_lists_module("updates/dkms/raid_gpu.ko.xz\n"));
    }

    #[test]
    fn versions_order_numbers_as_numbers() {
        use Ordering::*;
        assert_eq!(
            compare_releases("7.10.1+deb13-amd64", "7.9.3+deb13-amd64"),
            Greater
        );
        assert_eq!(
            compare_releases("7.2.12+deb13-amd64", "7.2.9+deb13-amd64"),
            Greater
        );
        assert_eq!(
            compare_releases("7.2+deb13-amd64", "7.2.1+deb13-amd64"),
            Less
        );
        assert_eq!(compare_releases("7.2.1", "7.2"), Greater);
        assert_eq!(compare_releases("7.02", "7.2"), Equal);
        assert_eq!(
            compare_releases("7.4.1+deb13-amd64", "7.4.1+deb13-amd64"),
            Equal
        );
        assert_eq!(
            compare_releases("7.4.1+deb13-amd64", "7.4.1+deb13-cloud-amd64"),
            Less
        );
        // No overflow on absurd numbers.
        assert_eq!(
            compare_releases("99999999999999999999999.1", "99999999999999999999998.9"),
            Greater
        );
    }

    #[test]
    fn the_running_kernel_and_the_others_that_have_it() {
        let dir = root(
            "status",
            &[
                ("7.4.1+deb13-amd64", Some(OTHER)),
                ("7.3.4+deb13-amd64", Some(DEBIAN)),
                ("7.10.0+deb13-amd64", Some(DEBIAN)),
                ("7.2.12+deb13-amd64", Some("updates/dkms/raid_gpu.ko:\n")),
                ("7.9.9+deb13-amd64", Some(OTHER)),
                ("7.1.0+deb13-amd64", None),
            ],
        );
        let s = Status::of(&dir, "7.4.1+deb13-amd64", false);
        assert!(!s.installed);
        assert_eq!(
            s.others,
            [
                "7.10.0+deb13-amd64",
                "7.3.4+deb13-amd64",
                "7.2.12+deb13-amd64"
            ]
        );
        // Loaded by hand: it is there, whatever modules.dep says.
        assert!(Status::of(&dir, "7.4.1+deb13-amd64", true).installed);
        // Installed for the running kernel: not listed among the others.
        let s = Status::of(&dir, "7.3.4+deb13-amd64", false);
        assert!(s.installed);
        assert_eq!(s.others, ["7.10.0+deb13-amd64", "7.2.12+deb13-amd64"]);
        // A kernel without modules.dep, or not there at all.
        assert!(!installed_for(&dir, "7.1.0+deb13-amd64"));
        assert!(!installed_for(&dir, "8.0.0"));
        assert!(!installed_for(&dir, ""));
        std::fs::remove_dir_all(&dir).unwrap();
        // No modules root at all.
        let s = Status::of(&dir, "7.4.1+deb13-amd64", false);
        assert!(!s.installed && s.others.is_empty());
    }

    #[test]
    fn the_running_release_is_known() {
        let release = running_release().unwrap();
        assert!(!release.is_empty());
        assert!(
            !release.contains('\0') && !release.contains('\n'),
            "{release:?}"
        );
    }
}
