// SPDX-License-Identifier: GPL-2.0

//! The userspace ABI of `raid_gpu`: ioctl numbers and argument structs of `/dev/graid-control`.
//!
//! This one file is compiled into the kernel module and, through `tools/graid-abi`, into every
//! tool, so the two sides cannot drift apart. It must stay `core`-only: no kernel or std types.
//! Every struct is `#[repr(C)]`, naturally aligned, without implicit padding, and little-endian
//! on every architecture graid supports.

/// Bumped on every incompatible change to anything in this file.
pub const GRAID_ABI_VERSION: u32 = 1;

/// Name of the control misc device, as it appears under `/dev`.
pub const GRAID_CONTROL_NAME: &str = "graid-control";

/// ioctl type byte of graid (free in `Documentation/userspace-api/ioctl/ioctl-number.rst`).
pub const GRAID_IOCTL_TYPE: u32 = 0xBB;

const IOC_NRBITS: u32 = 8;
const IOC_TYPEBITS: u32 = 8;
const IOC_SIZEBITS: u32 = 14;
const IOC_NRSHIFT: u32 = 0;
const IOC_TYPESHIFT: u32 = IOC_NRSHIFT + IOC_NRBITS;
const IOC_SIZESHIFT: u32 = IOC_TYPESHIFT + IOC_TYPEBITS;
const IOC_DIRSHIFT: u32 = IOC_SIZESHIFT + IOC_SIZEBITS;
const IOC_WRITE: u32 = 1;
const IOC_READ: u32 = 2;

/// Encodes an ioctl number the way `_IOC()` in `include/uapi/asm-generic/ioctl.h` does.
pub const fn ioc(dir: u32, nr: u32, size: usize) -> u32 {
    (dir << IOC_DIRSHIFT)
        | (GRAID_IOCTL_TYPE << IOC_TYPESHIFT)
        | (nr << IOC_NRSHIFT)
        | ((size as u32) << IOC_SIZESHIFT)
}

/// `_IOR(GRAID_IOCTL_TYPE, nr, T)`: the kernel writes a `T` to userspace.
pub const fn ior<T>(nr: u32) -> u32 {
    ioc(IOC_READ, nr, core::mem::size_of::<T>())
}

/// `_IOWR(GRAID_IOCTL_TYPE, nr, T)`: userspace passes a `T` in and gets it back updated.
pub const fn iowr<T>(nr: u32) -> u32 {
    ioc(IOC_READ | IOC_WRITE, nr, core::mem::size_of::<T>())
}

/// Length of the NUL-padded module version string in [`GraidVersion`].
pub const GRAID_VERSION_LEN: usize = 32;

/// Answer of [`GRAID_IOC_VERSION`].
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GraidVersion {
    /// [`GRAID_ABI_VERSION`] the module was built with.
    pub abi_version: u32,
    /// `size_of::<GraidVersion>()` as the module sees it: a cheap guard against layout drift.
    pub struct_size: u32,
    /// Module version, UTF-8, NUL-padded.
    pub module_version: [u8; GRAID_VERSION_LEN],
}

impl GraidVersion {
    /// An all-zero value, for userspace to pass in.
    pub const ZERO: Self = Self {
        abi_version: 0,
        struct_size: 0,
        module_version: [0; GRAID_VERSION_LEN],
    };

    /// The module version without its NUL padding (empty if not valid UTF-8).
    pub fn module_version_str(&self) -> &str {
        let len = self
            .module_version
            .iter()
            .position(|&b| b == 0)
            .unwrap_or(GRAID_VERSION_LEN);
        core::str::from_utf8(&self.module_version[..len]).unwrap_or("")
    }
}

/// Reports the ABI and module versions.
pub const GRAID_IOC_VERSION: u32 = ior::<GraidVersion>(0x00);
