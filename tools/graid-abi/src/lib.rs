//! graid's kernel ABI for userspace.
//!
//! The definitions are the module's own `raid_gpu/uapi.rs`, included verbatim, so the tools and the
//! module are always built from one source of truth.

#![no_std]

#[path = "../../../raid_gpu/uapi.rs"]
mod uapi;

pub use uapi::*;

/// The parity ring's layout and the helper device's ioctls (`raid_gpu/ring_uapi.rs`).
#[path = "../../../raid_gpu/ring_uapi.rs"]
pub mod ring;

/// The files under `/sys/block/graidN/graid/` (`raid_gpu/sysfs_text.rs`).
#[path = "../../../raid_gpu/sysfs_text.rs"]
pub mod sysfs;

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
        assert_eq!(
            GRAID_IOC_RESIZE as u64,
            nix::request_code_readwrite!(GRAID_IOCTL_TYPE, 0x0A, size_of::<GraidResize>()) as u64
        );
    }

    #[test]
    fn ring_layout_is_what_the_protocol_says() {
        use super::ring::*;
        assert_eq!(size_of::<Sqe>(), SQE_BYTES);
        assert_eq!(size_of::<Cqe>(), CQE_BYTES);
        assert!(size_of::<RingHeader>() <= CACHE_LINE);
        assert_eq!(size_of::<HelperAttach>(), 24 + HELPER_ENGINE_LEN);
        assert_eq!(
            size_of::<HelperStatus>(),
            8 + HELPER_ENGINE_LEN + 16 + 11 * 8 + 8 * HELPER_FALLBACKS
        );
        assert_eq!(size_of::<HelperPool>(), 16);
        assert!(SQ_ENTRIES.is_power_of_two() && CQ_ENTRIES.is_power_of_two());
        // Regions are page-aligned and the helper-written one starts after the kernel's.
        for offset in [K2H_BYTES, H2K_OFFSET, CQ_OFFSET, CONTROL_BYTES] {
            assert_eq!(offset % 4096, 0, "{offset}");
        }
        for offset in [SQ_TAIL_OFFSET, CQ_HEAD_OFFSET, KERNEL_FLAGS_OFFSET] {
            assert!(offset < SQ_OFFSET && offset % CACHE_LINE as u64 == 0);
        }
        for offset in [
            SQ_HEAD_OFFSET,
            CQ_TAIL_OFFSET,
            HELPER_FLAGS_OFFSET,
            HEARTBEAT_OFFSET,
        ] {
            assert!((H2K_OFFSET..CQ_OFFSET).contains(&offset) && offset % CACHE_LINE as u64 == 0);
        }
        assert_eq!(
            HELPER_IOC_ATTACH as u64,
            nix::request_code_readwrite!(HELPER_IOCTL_TYPE, 0x00, size_of::<HelperAttach>()) as u64
        );
        assert_eq!(
            HELPER_IOC_ENTER as u64,
            nix::request_code_readwrite!(HELPER_IOCTL_TYPE, 0x02, size_of::<HelperEnter>()) as u64
        );
    }

    #[test]
    fn structs_have_no_padding() {
        // Sizes are the sums of the fields: no implicit padding anywhere.
        assert_eq!(size_of::<GraidVersion>(), 4 + 4 + GRAID_VERSION_LEN);
        assert_eq!(size_of::<GraidMember>(), 8);
        let members = GRAID_MAX_MEMBERS * size_of::<GraidMember>();
        assert_eq!(
            size_of::<GraidCreate>(),
            4 * 4 + GRAID_NAME_LEN + 16 + 8 + members + 8 + 8 + GRAID_HOMEHOST_LEN
        );
        assert_eq!(size_of::<GraidAssemble>(), 8 + members + 16);
        assert_eq!(size_of::<GraidStop>(), 8);
        assert_eq!(size_of::<GraidMemberOp>(), 4 + 4 + 8 + 4 + 4 + 8);
        assert_eq!(size_of::<GraidList>(), 8 + 4 * GRAID_MAX_ARRAYS);
        assert_eq!(size_of::<GraidMemberDetail>(), 8 + 4 + 4 + 7 * 8);
        assert_eq!(
            size_of::<GraidDetail>(),
            8 * 4
                + 8
                + 8
                + 8
                + 8
                + 8
                + 8
                + 8
                + 8
                + 8
                + 16
                + GRAID_NAME_LEN
                + GRAID_MAX_MEMBERS * size_of::<GraidMemberDetail>()
                + GRAID_MAX_SPARES * size_of::<GraidMember>()
                + 4
                + 4
                + 8
                + 8
                + 4 * 8
                + 3 * 8
                + 8
                + GRAID_HOMEHOST_LEN
        );
        assert_eq!(size_of::<GraidResize>(), 4 + 4 + 3 * 8);
        assert_eq!(size_of::<GraidReshape>(), 10 * 4 + 8 * 8);
    }

    #[test]
    fn ioctl_numbers_are_distinct_and_fit_the_size_field() {
        let all = [
            GRAID_IOC_VERSION,
            GRAID_IOC_CREATE,
            GRAID_IOC_ASSEMBLE,
            GRAID_IOC_STOP,
            GRAID_IOC_LIST,
            GRAID_IOC_DETAIL,
            GRAID_IOC_MEMBER,
        ];
        for (i, a) in all.iter().enumerate() {
            assert_eq!((a >> 8) & 0xff, GRAID_IOCTL_TYPE);
            for b in &all[i + 1..] {
                assert_ne!(a & 0xff, b & 0xff, "two ioctls share a number");
            }
        }
        // _IOC_SIZEBITS is 14: the largest argument must fit.
        assert!(size_of::<GraidDetail>() < 1 << 14);
        assert_eq!(
            GRAID_IOC_STOP as u64,
            nix::request_code_write!(GRAID_IOCTL_TYPE, 0x03, size_of::<GraidStop>()) as u64
        );
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
