//! graid's kernel ABI for userspace.
//!
//! The definitions are the module's own `raid_gpu/uapi.rs`, included verbatim, so the tools and the
//! module are always built from one source of truth.

#![no_std]

#[path = "../../../raid_gpu/uapi.rs"]
mod uapi;

pub use uapi::*;

#[cfg(test)]
mod tests {
    use super::*;
    use core::mem::size_of;

    // The reference encoding is nix's, which follows the kernel's asm-generic/ioctl.h.
    #[test]
    fn ioctl_numbers_match_the_kernel_encoding() {
        assert_eq!(
            GRAID_IOC_VERSION as u64,
            nix::request_code_read!(GRAID_IOCTL_TYPE, 0x00, size_of::<GraidVersion>()) as u64
        );
        assert_eq!(
            iowr::<u64>(0x07) as u64,
            nix::request_code_readwrite!(GRAID_IOCTL_TYPE, 0x07, size_of::<u64>()) as u64
        );
    }

    #[test]
    fn structs_have_no_padding() {
        assert_eq!(size_of::<GraidVersion>(), 4 + 4 + GRAID_VERSION_LEN);
    }

    #[test]
    fn module_version_str_stops_at_nul() {
        let mut v = GraidVersion::ZERO;
        v.module_version[..5].copy_from_slice(b"1.2.3");
        assert_eq!(v.module_version_str(), "1.2.3");
        v.module_version = [b'x'; GRAID_VERSION_LEN];
        assert_eq!(v.module_version_str().len(), GRAID_VERSION_LEN);
        v.module_version[0] = 0xff;
        assert_eq!(v.module_version_str(), "");
    }
}
