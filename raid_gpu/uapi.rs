// SPDX-License-Identifier: GPL-2.0

//! The userspace ABI of `raid_gpu`: ioctl numbers and argument structs of `/dev/graid-control`.
//!
//! This one file is compiled into the kernel module and, through `tools/graid-abi`, into every
//! tool, so the two sides cannot drift apart. It must stay `core`-only: no kernel or std types.
//! Every struct is `#[repr(C)]`, naturally aligned, without implicit padding, and little-endian
//! on every architecture graid supports.

/// Bumped on every incompatible change to anything in this file.
pub const GRAID_ABI_VERSION: u32 = 11;

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

/// `_IOW(GRAID_IOCTL_TYPE, nr, T)`: userspace passes a `T` in.
pub const fn iow<T>(nr: u32) -> u32 {
    ioc(IOC_WRITE, nr, core::mem::size_of::<T>())
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

/// Most members an array can have.
pub const GRAID_MAX_MEMBERS: usize = 32;
/// Length of an array name field, including the terminating NUL.
pub const GRAID_NAME_LEN: usize = 32;
/// Length of the NUL-padded home-host field ([`GraidCreate::homehost`]).
pub const GRAID_HOMEHOST_LEN: usize = 64;
/// Most arrays [`GRAID_IOC_LIST`] reports at once.
pub const GRAID_MAX_ARRAYS: usize = 64;

/// RAID levels, as in `GraidCreate::level` (same numbers as md).
pub const GRAID_LEVEL_RAID0: u32 = 0;
/// Mirroring.
pub const GRAID_LEVEL_RAID1: u32 = 1;
/// Striped mirrors, md's near-2 layout.
pub const GRAID_LEVEL_RAID10: u32 = 10;
pub const GRAID_LEVEL_RAID5: u32 = 5;
pub const GRAID_LEVEL_RAID6: u32 = 6;

/// A member block device, by its device number (`major(st_rdev)`, `minor(st_rdev)`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GraidMember {
    /// Device major number.
    pub major: u32,
    /// Device minor number.
    pub minor: u32,
}

/// [`GraidCreate::flags`]: the mirrors are taken as in sync without a resync (the caller knows
/// they are, e.g. new zeroed drives; mdadm's `--assume-clean`).
pub const GRAID_CREATE_ASSUME_CLEAN: u32 = 1;
/// [`GraidCreate::flags`]: zero every member's data area with the device's own zeroing command
/// (write zeroes), so the mirrors start in sync; refused (`EOPNOTSUPP`) by a member without one.
pub const GRAID_CREATE_WRITE_ZEROES: u32 = 2;
/// CREATE flag: `layout` holds the layout (md's number); without it the level's default
/// (left-symmetric for RAID 5/6) and `layout` must be 0. Combines with the others.
pub const GRAID_CREATE_LAYOUT: u32 = 4;
/// CREATE flag: no write-intent bitmap (mdadm's `--bitmap=none`); `bitmap_region_sectors`
/// must be 0. Without it RAID 1, 10, 5 and 6 get one in the members' reserved area.
pub const GRAID_CREATE_NO_BITMAP: u32 = 8;
/// CREATE flag: no partial parity log (mdadm's `--consistency-policy=resync`). Without it
/// RAID 5 and 6 get one in the members' reserved area, which closes the write hole; without
/// one a RAID 5/6 that was not stopped cleanly does not start degraded.
pub const GRAID_CREATE_NO_PPL: u32 = 16;
/// Every flag CREATE knows.
pub const GRAID_CREATE_FLAGS: u32 = GRAID_CREATE_ASSUME_CLEAN
    | GRAID_CREATE_WRITE_ZEROES
    | GRAID_CREATE_LAYOUT
    | GRAID_CREATE_NO_BITMAP
    | GRAID_CREATE_NO_PPL;

/// Argument of [`GRAID_IOC_CREATE`].
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GraidCreate {
    /// One of the `GRAID_LEVEL_*` values.
    pub level: u32,
    /// Chunk size in 512-byte sectors: a power of two from 8 (4 KiB) to 2048 (1 MiB); 0 for RAID1.
    pub chunk_sectors: u32,
    /// Number of valid entries in `members`.
    pub nr_members: u32,
    /// `GRAID_CREATE_*` flags; at most one of `ASSUME_CLEAN` and `WRITE_ZEROES`. Without
    /// either, mirrors start "resync pending": reads come from one fixed copy until a resync.
    pub flags: u32,
    /// Array name: UTF-8, NUL-terminated, no `/` or control characters.
    pub name: [u8; GRAID_NAME_LEN],
    /// Array UUID; all zero lets the module pick a random one.
    pub uuid: [u8; 16],
    /// Creation time, seconds since the epoch (userspace's clock, recorded in the superblocks).
    pub ctime: u64,
    /// Members in role order.
    pub members: [GraidMember; GRAID_MAX_MEMBERS],
    /// Out: the new array's index N, as in `/dev/graidN`.
    pub index: u32,
    /// With [`GRAID_CREATE_LAYOUT`]: md's layout number (RAID 5/6: 0 left-asymmetric,
    /// 1 right-asymmetric, 2 left-symmetric, 3 right-symmetric; RAID 10: 0x102; RAID 0/1: 0).
    /// Otherwise 0.
    pub layout: u32,
    /// The write-intent bitmap's region size in sectors of the resync's walk (array sectors
    /// on RAID 1/10, member sectors on RAID 5/6): a power of two from 8, whose bits fit the
    /// reserved area (`EINVAL` otherwise); 0 picks the default (64 MiB, larger for an array
    /// too large for the area). Must be 0 for RAID 0 and with [`GRAID_CREATE_NO_BITMAP`].
    pub bitmap_region_sectors: u64,
    /// The host the array belongs to (recorded in the superblocks; assembly at boot starts
    /// only this host's arrays by itself): UTF-8, NUL-padded, no `/` or control characters;
    /// all zero: none.
    pub homehost: [u8; GRAID_HOMEHOST_LEN],
}

/// [`GraidAssemble::flags`]: start the array even with roles missing, as long as every sector
/// still has a copy or parity (mdadm's `--run`).
pub const GRAID_ASSEMBLE_RUN: u32 = 1;
/// [`GraidAssemble::flags`]: `index` is an input: start the array as `/dev/graid<index>`
/// (`EBUSY` if that index is in use), as `mdadm --assemble /dev/mdN` does.
pub const GRAID_ASSEMBLE_INDEX: u32 = 2;

/// Argument of [`GRAID_IOC_ASSEMBLE`].
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GraidAssemble {
    /// Number of valid entries in `members`.
    pub nr_members: u32,
    /// `GRAID_ASSEMBLE_*` flags.
    pub flags: u32,
    /// The array's members, in any order.
    pub members: [GraidMember; GRAID_MAX_MEMBERS],
    /// Out: the array's index N, as in `/dev/graidN` (in, with [`GRAID_ASSEMBLE_INDEX`]: the
    /// index wanted).
    pub index: u32,
    /// Out: index into `members` of the member that was refused, when assembly fails on one;
    /// `u32::MAX` otherwise.
    pub bad_member: u32,
    /// Out: the roles no given member fills (bit N: role N), when assembly refuses for them
    /// and when a degraded start runs without them; 0 otherwise.
    pub missing: u32,
    /// Reserved, 0.
    pub reserved: u32,
}

/// [`GraidStop::flags`]: stop even if the array is open (refused unless no I/O can be lost).
pub const GRAID_STOP_FORCE: u32 = 1;

/// Argument of [`GRAID_IOC_STOP`].
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GraidStop {
    /// Index N of `/dev/graidN`.
    pub index: u32,
    /// `GRAID_STOP_*` flags.
    pub flags: u32,
}

/// Argument of [`GRAID_IOC_LIST`].
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GraidList {
    /// Out: number of arrays.
    pub count: u32,
    /// Reserved, must be 0.
    pub reserved: u32,
    /// Out: their indices, the first `count` entries.
    pub indices: [u32; GRAID_MAX_ARRAYS],
}

/// Array states in [`GraidDetail::state`].
pub const GRAID_ARRAY_OPTIMAL: u32 = 0;
/// At least one member is faulty or missing; data is still served.
pub const GRAID_ARRAY_DEGRADED: u32 = 1;
/// Too many members are faulty; I/O fails.
pub const GRAID_ARRAY_FAILED: u32 = 2;
/// A member holding the last copy of some data failed a write (it was kept): reads go on,
/// writes fail (md's "broken").
pub const GRAID_ARRAY_BROKEN: u32 = 3;

/// [`GraidDetail::flags`]: the copies are not known to be in sync (an unclean shutdown, or
/// created without `--assume-clean`/`--write-zeroes`); a resync runs (or waits) and reads of
/// what it has not reached come from one fixed copy.
pub const GRAID_DETAIL_RESYNC_PENDING: u32 = 1;

/// Member states in [`GraidMemberDetail::state`].
pub const GRAID_MEMBER_ACTIVE: u32 = 0;
/// The member failed I/O and is no longer used.
pub const GRAID_MEMBER_FAULTY: u32 = 1;
/// The member is missing (the array was assembled without it).
pub const GRAID_MEMBER_MISSING: u32 = 2;
/// The member is being rebuilt: written to, read from only once in sync
/// ([`GraidMemberDetail::recovery_offset`] says how far).
pub const GRAID_MEMBER_REBUILDING: u32 = 3;

/// [`GraidDetail::flags`]: the rebuild stopped: some data has no readable copy.
pub const GRAID_DETAIL_REBUILD_STALLED: u32 = 2;
/// [`GraidDetail::flags`]: the array is marked dirty (md's "active"): its superblocks say "not
/// clean" while writes may be in flight; it is marked clean after a quiet period.
pub const GRAID_DETAIL_DIRTY: u32 = 4;
/// [`GraidDetail::flags`]: the array has a partial parity log (RAID 5/6): a crash while
/// degraded loses nothing the writes in flight did not touch.
pub const GRAID_DETAIL_PPL: u32 = 8;
/// [`GraidDetail::flags`]: the last check, repair or resync stopped before its end, at
/// `scrub_done`: a window there could not be made consistent (a member failed its rewrite, or
/// some data has no readable copy). A resync stopped so waits to be asked again (REPAIR).
pub const GRAID_DETAIL_SCRUB_STALLED: u32 = 16;
/// [`GraidDetail::flags`]: a parity helper was caught lying, and the resync (pending or
/// running) rewrites the parity of every region whose parity a helper computed unchecked;
/// until it ends no member may be failed (`EBUSY`) and the array does not start degraded.
pub const GRAID_DETAIL_PARITY_HEAL: u32 = 32;

/// One member in [`GraidDetail`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GraidMemberDetail {
    /// The member's device.
    pub dev: GraidMember,
    /// Role (position) in the array.
    pub role: u32,
    /// One of `GRAID_MEMBER_*`.
    pub state: u32,
    /// Completed read requests sent to this member.
    pub reads: u64,
    /// Completed write requests sent to this member.
    pub writes: u64,
    /// Bytes read from this member.
    pub read_bytes: u64,
    /// Bytes written to this member.
    pub write_bytes: u64,
    /// I/O errors this member returned.
    pub errors: u64,
    /// Read errors on this member repaired by rewriting the data from another copy or the
    /// parity (one per repaired request, or per 4 KiB block a scrub rewrote).
    pub corrected: u64,
    /// Sectors of its data area in sync; `u64::MAX` when all are.
    pub recovery_offset: u64,
}

/// Argument of [`GRAID_IOC_DETAIL`].
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GraidDetail {
    /// In: index N of `/dev/graidN`.
    pub index: u32,
    /// Out: one of the `GRAID_LEVEL_*` values.
    pub level: u32,
    /// Out: chunk size in sectors (0 for RAID1).
    pub chunk_sectors: u32,
    /// Out: number of members.
    pub nr_members: u32,
    /// Out: one of `GRAID_ARRAY_*`.
    pub state: u32,
    /// Out: how many times the array is open.
    pub open_count: u32,
    /// Out: `GRAID_DETAIL_*` flags.
    pub flags: u32,
    /// Out: how many of `spares` are filled in.
    pub nr_spares: u32,
    /// Out: array size in sectors.
    pub size_sectors: u64,
    /// Out: superblock event counter.
    pub events: u64,
    /// Out: size of each member's data area in sectors (what a rebuild copies).
    pub member_data_sectors: u64,
    /// Out: sectors rebuilt since the array started (a rate over two reads).
    pub rebuilt_sectors: u64,
    /// Out: the rebuild's speed floor and cap, KiB/s (see [`GraidSpeed`]).
    pub speed_min_kibs: u32,
    pub speed_max_kibs: u32,
    /// Out: the scrub running, one of `GRAID_SCRUB_*` (`GRAID_SCRUB_IDLE`: none).
    pub scrub_action: u32,
    /// Out: the speed of the rebuild or scrub running, KiB/s, over the last second or so (0:
    /// none runs, or it has not run a second yet).
    pub rate_kibs: u32,
    /// Out: sectors scrubbed of `scrub_total` (array sectors on RAID 1/10, member sectors on
    /// RAID 5/6).
    pub scrub_done: u64,
    pub scrub_total: u64,
    /// Out: 512-byte sectors of copies or parity that differed, found by the running or last
    /// scrub (md's `mismatch_cnt`, counted in sectors).
    pub mismatch_sectors: u64,
    /// Out: array UUID.
    pub uuid: [u8; 16],
    /// Out: array name, NUL-terminated.
    pub name: [u8; GRAID_NAME_LEN],
    /// Out: the first `nr_members` entries describe the members in role order.
    pub members: [GraidMemberDetail; GRAID_MAX_MEMBERS],
    /// Out: the spares' devices, in the order they were added (a replacement among them).
    pub spares: [GraidMember; GRAID_MAX_SPARES],
    /// Out: the member being replaced ([`GRAID_MEMBER_OP_REPLACE`]); `GRAID_ROLE_NONE`: none.
    pub replace_role: u32,
    /// Out: one of `GRAID_REPLACE_*`.
    pub replace_state: u32,
    /// Out: the replacement's device.
    pub replace_dev: GraidMember,
    /// Out: member sectors copied to the replacement, of `member_data_sectors`.
    pub replace_copied: u64,
    /// Out: the write-intent bitmap's region size in sectors of the resync's walk; 0: the
    /// array has no bitmap.
    pub bitmap_region_sectors: u64,
    /// Out: its regions, and how many have their bit set now.
    pub bitmap_regions: u64,
    pub bitmap_dirty: u64,
    /// Out: member sectors the rebuild of a re-added member skipped since the array started
    /// (nothing was written there while it was away).
    pub rebuild_skipped_sectors: u64,
    /// Out, with [`GRAID_DETAIL_PPL`]: partial parity log entries and barriers written, and
    /// times the log wrapped, since the array started.
    pub ppl_entries: u64,
    pub ppl_barriers: u64,
    pub ppl_wraps: u64,
    /// Out: 4 KiB blocks the running or last scrub could not read: each recovered from the
    /// others and rewritten (the member's `corrected` count), or the scrub stopped there.
    pub scrub_read_errors: u64,
    /// Out: the host the array belongs to, as in its superblocks (NUL-padded; empty: none).
    pub homehost: [u8; GRAID_HOMEHOST_LEN],
}

/// [`GraidDetail::replace_role`] when no replace runs.
pub const GRAID_ROLE_NONE: u32 = u32::MAX;
/// [`GraidDetail::replace_state`]: the replacement is being copied (and gets every write).
pub const GRAID_REPLACE_COPYING: u32 = 1;
/// The copy is complete; the replacement is about to take the member's place.
pub const GRAID_REPLACE_SWAPPING: u32 = 2;
/// The replacement failed and is being released.
pub const GRAID_REPLACE_FAILED: u32 = 3;
/// The member failed: the replacement is going back to the spares.
pub const GRAID_REPLACE_ABANDONED: u32 = 4;

/// How many spares an array holds at most.
pub const GRAID_MAX_SPARES: usize = 8;

/// [`GraidMemberOp::role`] of a spare (ADD made the device one; REMOVE released one).
pub const GRAID_ROLE_SPARE: u32 = u32::MAX;

/// [`GraidMemberOp::op`]: stop using an active member, as if it had failed (mdadm's `--fail`).
/// Refused (`EBUSY`) when it holds the last copy of some data; the failure is recorded in the
/// other members' superblocks before the ioctl returns.
pub const GRAID_MEMBER_OP_FAIL: u32 = 1;
/// [`GraidMemberOp::op`]: release a failed member's device from the array (mdadm's
/// `--remove`); its role is then missing. Also releases a spare (`role` is then
/// [`GRAID_ROLE_SPARE`]). Refused (`EBUSY`) for a member in use.
pub const GRAID_MEMBER_OP_REMOVE: u32 = 2;
/// [`GraidMemberOp::op`]: add a device (mdadm's `--add`). In the place of a removed member it
/// gets a new superblock and is rebuilt in the background; `role` says which member it
/// became. Otherwise it becomes a spare (`role` is [`GRAID_ROLE_SPARE`]), which takes the place
/// of the next member that fails (at once if one is failed now: the failed device is
/// released). `EOPNOTSUPP` on RAID 0 (nothing to rebuild from); `ENOSPC` when it is too small
/// or the array has [`GRAID_MAX_SPARES`] spares; `EXDEV` when it carries a superblock of
/// another array; `EEXIST` when it is already a member or spare.
pub const GRAID_MEMBER_OP_ADD: u32 = 3;
/// [`GraidMemberOp::op`]: replace the active, in-sync member `dev` by `with` (mdadm's
/// `--replace --with`): `with` (made a spare first if it is not one) is copied from the member
/// in the background and gets every write; once it holds everything it takes the member's
/// place and the old device is released (an `member-replaced` uevent). The array keeps its
/// redundancy throughout. `with` of 0:0 takes a spare of the array. `EOPNOTSUPP` on RAID 0;
/// `EBUSY` while a replace, rebuild or scrub runs, or the member is not in sync; `ENOSPC`,
/// `EXDEV` as ADD; `E2BIG` for an array of [`GRAID_MAX_MEMBERS`] members; `ENOENT`: no spare.
pub const GRAID_MEMBER_OP_REPLACE: u32 = 4;

/// Argument of [`GRAID_IOC_MEMBER`]: one operation on one member of a running array.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GraidMemberOp {
    /// Index N of `/dev/graidN`.
    pub index: u32,
    /// One of `GRAID_MEMBER_OP_*`.
    pub op: u32,
    /// The member's device: one the array holds (`ENXIO` otherwise), or for ADD the new one.
    pub dev: GraidMember,
    /// Must be 0; reserved for options.
    pub flags: u32,
    /// Out: the member's role in the array.
    pub role: u32,
    /// REPLACE: the replacement's device (0:0: any spare); otherwise 0.
    pub with: GraidMember,
}

/// [`GraidScrub::action`] and [`GraidDetail::scrub_action`]: no scrub (asked: stop one).
pub const GRAID_SCRUB_IDLE: u32 = 0;
/// Compare every copy or every stripe's parity, count mismatches.
pub const GRAID_SCRUB_CHECK: u32 = 1;
/// The same, and rewrite what differs (the other copies from the first, parity from data).
pub const GRAID_SCRUB_REPAIR: u32 = 2;
/// [`GraidDetail::scrub_action`]: the resync the array runs by itself (not asked for).
pub const GRAID_SCRUB_RESYNC: u32 = 3;

/// Argument of [`GRAID_IOC_SCRUB`]: starts (over) or stops a running array's scrub.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GraidScrub {
    /// Index N of `/dev/graidN`.
    pub index: u32,
    /// One of `GRAID_SCRUB_*`.
    pub action: u32,
}

/// [`GraidSpeed::flags`]: set the limits (otherwise they are only read back).
pub const GRAID_SPEED_SET: u32 = 1;

/// Argument of [`GRAID_IOC_SPEED`]: a running array's rebuild speed limits, in KiB/s, as md's
/// `sync_speed_min`/`sync_speed_max`: the floor is kept to while the array serves other I/O
/// (that I/O keeps priority), the cap while it is otherwise idle.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GraidSpeed {
    /// Index N of `/dev/graidN`.
    pub index: u32,
    /// `GRAID_SPEED_SET` or 0.
    pub flags: u32,
    /// In (with SET) and out: the floor, at least 1.
    pub min_kibs: u32,
    /// In (with SET) and out: the cap; 0 for none. Not below the floor.
    pub max_kibs: u32,
}

/// [`GraidResize::flags`]: a smaller size is wanted (a shrink; refused with `EOPNOTSUPP`
/// without it). The caller has made sure nothing is mapped past the new end.
pub const GRAID_RESIZE_SHRINK: u32 = 1;
/// [`GraidResize::flags`]: only say what the sizes would be (and why not, as the resize would
/// refuse), changing nothing.
pub const GRAID_RESIZE_QUERY: u32 = 2;

/// Argument of [`GRAID_IOC_RESIZE`]: gives each member's data area of a running array more of
/// its device (md's `--grow --size`), or less with [`GRAID_RESIZE_SHRINK`], and the array the
/// capacity that follows.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GraidResize {
    /// Index N of `/dev/graidN`.
    pub index: u32,
    /// `GRAID_RESIZE_SHRINK`, `GRAID_RESIZE_QUERY`, or 0.
    pub flags: u32,
    /// In: each member's data area wanted, sectors (rounded down to whole chunks); 0 for all
    /// the smallest member has. Out: what it is now (with `QUERY`: what it would be).
    pub member_data_sectors: u64,
    /// Out: the array's size now (with `QUERY`: what it would be), sectors.
    pub array_sectors: u64,
    /// Out: the most each member's data area could take (the smallest member's room past the
    /// data offset), sectors; filled in on `ENOSPC` too.
    pub room_sectors: u64,
}

/// [`GraidReshape::flags`]: only say whether the change would be taken (and why not, as it
/// would refuse), changing nothing. With no change asked for (`raid_devices` 0, no other
/// flag), only the reshape's progress is reported, never refused.
pub const GRAID_RESHAPE_QUERY: u32 = 1;
/// [`GraidReshape::flags`]: a new level in `level` (md's takeovers; not yet taken:
/// `EOPNOTSUPP`).
pub const GRAID_RESHAPE_LEVEL: u32 = 2;
/// [`GraidReshape::flags`]: a new layout in `layout` (RAID 5 and 6: md's algorithm number).
pub const GRAID_RESHAPE_LAYOUT: u32 = 4;
/// [`GraidReshape::flags`]: a new chunk in `chunk_sectors` (RAID 0, 5 and 6).
pub const GRAID_RESHAPE_CHUNK: u32 = 8;

/// [`GraidReshape::state`]: no reshape runs.
pub const GRAID_RESHAPE_NONE: u32 = 0;
/// [`GraidReshape::state`]: a reshape moves the data.
pub const GRAID_RESHAPE_RUNNING: u32 = 1;
/// [`GraidReshape::state`]: a reshape stands still: its window cannot be read even through the
/// parity (tried again every second), or the array lost data or broke. A lost member does not
/// stop it: it goes on degraded.
pub const GRAID_RESHAPE_STALLED: u32 = 2;

/// Argument of [`GRAID_IOC_RESHAPE`]: changes a running array's member count, chunk or layout
/// (md's `--grow --raid-devices/--chunk/--layout`). A RAID 1 takes more or fewer copies: a
/// new role has no device until one is added (a spare of the array takes it at once), and
/// only roles whose members were failed and removed may be dropped. A RAID 0, 5 or 6 is
/// restriped online: spares of the array join as the new members, the data moves to the new
/// geometry at a new data offset, and the array takes its new size when the move ends.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GraidReshape {
    /// Index N of `/dev/graidN`.
    pub index: u32,
    /// `GRAID_RESHAPE_*` bits, or 0.
    pub flags: u32,
    /// In: the member count wanted (0: as now). Out: the count now (with `QUERY`: what it
    /// would be); while a reshape runs, the count it goes to.
    pub raid_devices: u32,
    /// With [`GRAID_RESHAPE_LEVEL`]: the level wanted (`GRAID_LEVEL_*`).
    pub level: u32,
    /// In, with [`GRAID_RESHAPE_LAYOUT`]: md's layout number wanted. Out: the layout (to be).
    pub layout: u32,
    /// In, with [`GRAID_RESHAPE_CHUNK`]: the chunk wanted, sectors. Out: the chunk (to be).
    pub chunk_sectors: u32,
    /// Out: one of `GRAID_RESHAPE_NONE`, `_RUNNING`, `_STALLED`.
    pub state: u32,
    /// Out, while a reshape runs: the geometry it moves from.
    pub from_raid_devices: u32,
    pub from_layout: u32,
    pub from_chunk_sectors: u32,
    /// Out, while a reshape runs: the array sectors it moves, how many of them are moved,
    /// and how many of those the superblocks record (a restart goes on from there).
    pub total_sectors: u64,
    pub moved_sectors: u64,
    pub recorded_sectors: u64,
    /// Out, while a reshape runs: where each member's data starts, and where it moves to.
    pub data_offset: u64,
    pub new_data_offset: u64,
    /// Out: windows moved, positions recorded and requests that waited for the reshape since
    /// the array started.
    pub windows: u64,
    pub records: u64,
    pub waits: u64,
}

/// Creates an array and writes a fresh superblock to each member.
pub const GRAID_IOC_CREATE: u32 = iowr::<GraidCreate>(0x01);
/// Assembles an array from members that carry its superblock.
pub const GRAID_IOC_ASSEMBLE: u32 = iowr::<GraidAssemble>(0x02);
/// Stops an array: its block device goes away (refused while it is open), members are released,
/// superblocks marked clean if the copies are in sync.
pub const GRAID_IOC_STOP: u32 = iow::<GraidStop>(0x03);
/// Lists the running arrays.
pub const GRAID_IOC_LIST: u32 = ior::<GraidList>(0x04);
/// Describes one running array.
pub const GRAID_IOC_DETAIL: u32 = iowr::<GraidDetail>(0x05);
/// Changes one member of a running array (see `GRAID_MEMBER_OP_*`).
pub const GRAID_IOC_MEMBER: u32 = iowr::<GraidMemberOp>(0x06);
/// Reads or sets a running array's rebuild speed limits.
pub const GRAID_IOC_SPEED: u32 = iowr::<GraidSpeed>(0x07);
/// Starts or stops a running array's check or repair.
pub const GRAID_IOC_SCRUB: u32 = iow::<GraidScrub>(0x08);
/// Resizes a running array: into the room its members have, or smaller (0x09 is the helper
/// status's).
pub const GRAID_IOC_RESIZE: u32 = iowr::<GraidResize>(0x0A);
/// Changes a running array's member count (a mirror's copies).
pub const GRAID_IOC_RESHAPE: u32 = iowr::<GraidReshape>(0x0B);
