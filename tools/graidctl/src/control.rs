//! The control device `/dev/graid-control` and its ioctls.
//!
//! [`ControlDevice`] is the seam between the verbs and the kernel: one method per ioctl, each
//! returning the raw OS error so the caller can explain it in context (see `errno.rs`). The real
//! device is [`Control`]; tests use a fake. All of graidctl's `unsafe` for ioctls is in this file.

use crate::error::CtlError;
use crate::version;
use graid_abi::ring::{HelperStatus, GRAID_IOC_HELPER_STATUS};
use graid_abi::{
    GraidAssemble, GraidCreate, GraidDetail, GraidList, GraidMemberOp, GraidReshape, GraidResize,
    GraidScrub, GraidSpeed, GraidStop, GraidVersion, GRAID_CONTROL_NAME, GRAID_IOC_ASSEMBLE,
    GRAID_IOC_CREATE, GRAID_IOC_DETAIL, GRAID_IOC_LIST, GRAID_IOC_MEMBER, GRAID_IOC_RESHAPE,
    GRAID_IOC_RESIZE, GRAID_IOC_SCRUB, GRAID_IOC_SPEED, GRAID_IOC_STOP, GRAID_IOC_VERSION,
    GRAID_MAX_ARRAYS,
};
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;

/// The ioctls of the control device. Arguments the kernel fills in are updated in place, also
/// when the call fails (`GraidAssemble::bad_member` is set on failure).
pub trait ControlDevice {
    fn version(&self) -> io::Result<GraidVersion>;
    fn create(&self, arg: &mut GraidCreate) -> io::Result<()>;
    fn assemble(&self, arg: &mut GraidAssemble) -> io::Result<()>;
    fn stop(&self, arg: &GraidStop) -> io::Result<()>;
    fn list(&self) -> io::Result<GraidList>;
    fn detail(&self, index: u32) -> io::Result<GraidDetail>;
    fn member(&self, arg: &mut GraidMemberOp) -> io::Result<()>;
    fn speed(&self, arg: &mut GraidSpeed) -> io::Result<()>;
    fn scrub(&self, arg: &GraidScrub) -> io::Result<()>;
    /// Grows a running array (`arg` gets the sizes now and the members' room).
    fn resize(&self, arg: &mut GraidResize) -> io::Result<()>;
    /// Changes a running array's member count (`arg` gets the count now).
    fn reshape(&self, arg: &mut GraidReshape) -> io::Result<()>;
    /// The parity helper and the offload counters.
    fn helper_status(&self) -> io::Result<HelperStatus>;
}

/// An all-zero `GraidList` (the kernel fills it).
pub fn empty_list() -> GraidList {
    GraidList {
        count: 0,
        reserved: 0,
        indices: [0; GRAID_MAX_ARRAYS],
    }
}

/// A `GraidDetail` asking about array `index`; every other field zero.
pub fn detail_request(index: u32) -> GraidDetail {
    GraidDetail {
        index,
        level: 0,
        chunk_sectors: 0,
        nr_members: 0,
        state: 0,
        open_count: 0,
        flags: 0,
        nr_spares: 0,
        size_sectors: 0,
        events: 0,
        member_data_sectors: 0,
        rebuilt_sectors: 0,
        speed_min_kibs: 0,
        speed_max_kibs: 0,
        scrub_action: 0,
        rate_kibs: 0,
        scrub_done: 0,
        scrub_total: 0,
        mismatch_sectors: 0,
        uuid: [0; 16],
        name: [0; graid_abi::GRAID_NAME_LEN],
        members: [Default::default(); graid_abi::GRAID_MAX_MEMBERS],
        spares: [Default::default(); graid_abi::GRAID_MAX_SPARES],
        replace_role: graid_abi::GRAID_ROLE_NONE,
        replace_state: 0,
        replace_dev: Default::default(),
        replace_copied: 0,
        bitmap_region_sectors: 0,
        bitmap_regions: 0,
        bitmap_dirty: 0,
        rebuild_skipped_sectors: 0,
        ppl_entries: 0,
        ppl_barriers: 0,
        ppl_wraps: 0,
        scrub_read_errors: 0,
        homehost: [0; graid_abi::GRAID_HOMEHOST_LEN],
    }
}

/// modprobe, by path: udev runs graidctl with a minimal environment.
pub fn modprobe_path() -> &'static str {
    ["/usr/sbin/modprobe", "/sbin/modprobe"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
        .unwrap_or("modprobe")
}

/// An open handle on the module's control device.
pub struct Control {
    file: File,
}

impl Control {
    /// Opens the control device at its standard path.
    pub fn open() -> Result<Self, CtlError> {
        Self::open_path(&format!("/dev/{GRAID_CONTROL_NAME}"))
    }

    pub fn open_path(path: &str) -> Result<Self, CtlError> {
        let path = path.to_owned();
        match OpenOptions::new().read(true).write(true).open(&path) {
            Ok(file) => Ok(Self { file }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Err(CtlError::NoModule { path }),
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
                Err(CtlError::Permission { path })
            }
            Err(source) => Err(CtlError::Io {
                what: format!("opening {path}"),
                source,
            }),
        }
    }

    /// Opens the control device and checks that the module speaks this graidctl's ABI, as every
    /// array verb must before its first array ioctl.
    pub fn open_checked() -> Result<Self, CtlError> {
        let control = Self::open()?;
        let answer = control.version().map_err(|source| CtlError::Io {
            what: format!("VERSION ioctl on /dev/{GRAID_CONTROL_NAME}"),
            source,
        })?;
        version::check_module(&answer)?;
        Ok(control)
    }

    /// [`Self::open_checked`], loading the module first if it is not loaded (`modprobe
    /// raid_gpu`): assembly at boot starts from udev, before anything else asked for graid.
    /// Every other verb leaves loading to the administrator and says so.
    pub fn open_loading() -> Result<Self, CtlError> {
        match Self::open_checked() {
            Err(CtlError::NoModule { path }) => {
                let loaded = std::process::Command::new(modprobe_path())
                    .args(["-q", "raid_gpu"])
                    .status()
                    .is_ok_and(|s| s.success());
                if !loaded {
                    return Err(CtlError::NoModule { path });
                }
                Self::open_checked()
            }
            other => other,
        }
    }

    /// Issues `request` with `arg` as its argument.
    fn call<T: AbiArg>(&self, request: u32, arg: &mut T) -> io::Result<()> {
        // The size field of the request must be the argument's size: the kernel copies exactly
        // that many bytes in and/or out. Checked at run time so a mismatched pair cannot compile
        // into an out-of-bounds write.
        let size = (request >> 16) & 0x3fff;
        assert_eq!(
            size as usize,
            std::mem::size_of::<T>(),
            "ioctl size mismatch"
        );
        // SAFETY: `arg` is a valid, exclusively borrowed `T` for the whole call, and the request
        // encodes `size_of::<T>()` (checked above), so the kernel reads and writes only within it.
        // `T: AbiArg` is one of the ABI's `repr(C)` structs made only of integers and integer
        // arrays, for which any bytes the kernel writes are a valid value.
        let ret = unsafe {
            libc::ioctl(
                self.file.as_raw_fd(),
                request as libc::c_ulong,
                arg as *mut T,
            )
        };
        if ret < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    }
}

/// The ABI structs: `repr(C)`, integers only, every bit pattern valid.
trait AbiArg {}
impl AbiArg for GraidVersion {}
impl AbiArg for GraidCreate {}
impl AbiArg for GraidAssemble {}
impl AbiArg for GraidStop {}
impl AbiArg for GraidList {}
impl AbiArg for GraidDetail {}
impl AbiArg for GraidMemberOp {}
impl AbiArg for GraidResize {}
impl AbiArg for GraidReshape {}
impl AbiArg for HelperStatus {}
impl AbiArg for GraidSpeed {}
impl AbiArg for GraidScrub {}

impl ControlDevice for Control {
    fn version(&self) -> io::Result<GraidVersion> {
        let mut version = GraidVersion::ZERO;
        self.call(GRAID_IOC_VERSION, &mut version)?;
        Ok(version)
    }

    fn create(&self, arg: &mut GraidCreate) -> io::Result<()> {
        self.call(GRAID_IOC_CREATE, arg)
    }

    fn assemble(&self, arg: &mut GraidAssemble) -> io::Result<()> {
        self.call(GRAID_IOC_ASSEMBLE, arg)
    }

    fn stop(&self, arg: &GraidStop) -> io::Result<()> {
        let mut copy = *arg;
        self.call(GRAID_IOC_STOP, &mut copy)
    }

    fn list(&self) -> io::Result<GraidList> {
        let mut list = empty_list();
        self.call(GRAID_IOC_LIST, &mut list)?;
        Ok(list)
    }

    fn detail(&self, index: u32) -> io::Result<GraidDetail> {
        let mut detail = detail_request(index);
        self.call(GRAID_IOC_DETAIL, &mut detail)?;
        Ok(detail)
    }

    fn member(&self, arg: &mut GraidMemberOp) -> io::Result<()> {
        self.call(GRAID_IOC_MEMBER, arg)
    }

    fn speed(&self, arg: &mut GraidSpeed) -> io::Result<()> {
        self.call(GRAID_IOC_SPEED, arg)
    }

    fn scrub(&self, arg: &GraidScrub) -> io::Result<()> {
        self.call(GRAID_IOC_SCRUB, &mut arg.clone())
    }

    fn resize(&self, arg: &mut GraidResize) -> io::Result<()> {
        self.call(GRAID_IOC_RESIZE, arg)
    }

    fn reshape(&self, arg: &mut GraidReshape) -> io::Result<()> {
        self.call(GRAID_IOC_RESHAPE, arg)
    }

    fn helper_status(&self) -> io::Result<HelperStatus> {
        let mut status = HelperStatus::default();
        self.call(GRAID_IOC_HELPER_STATUS, &mut status)?;
        Ok(status)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every ioctl goes through `call` (whose size check would panic on a mismatched pair) and
    /// comes back with the kernel's errno: /dev/null answers ENOTTY to all of them.
    #[test]
    fn real_ioctls_pass_errno_through() {
        let null = Control::open_path("/dev/null").unwrap();
        let enotty =
            |r: io::Result<()>| assert_eq!(r.unwrap_err().raw_os_error(), Some(libc::ENOTTY));
        enotty(null.version().map(drop));
        enotty(null.list().map(drop));
        enotty(null.detail(0).map(drop));
        enotty(null.stop(&GraidStop { index: 0, flags: 0 }));
        let mut assemble = GraidAssemble {
            nr_members: 0,
            flags: 0,
            members: [Default::default(); graid_abi::GRAID_MAX_MEMBERS],
            index: 0,
            bad_member: u32::MAX,
            missing: 0,
            reserved: 0,
        };
        enotty(null.assemble(&mut assemble));
        enotty(null.member(&mut GraidMemberOp::default()));
        enotty(null.speed(&mut GraidSpeed::default()));
        enotty(null.scrub(&GraidScrub::default()));
        enotty(null.reshape(&mut GraidReshape::default()));
        let mut list_sized = empty_list();
        enotty(null.call(GRAID_IOC_LIST, &mut list_sized));
    }

    #[test]
    fn missing_control_device_means_no_module() {
        let err = Control::open_path("/nonexistent/graid-control")
            .err()
            .unwrap();
        assert_eq!(err.exit_code(), crate::error::EXIT_NO_MODULE);
    }
}

#[cfg(test)]
pub mod fake {
    //! An in-memory control device for host tests: a set of running arrays, and scripted errors.

    use super::*;
    use graid_abi::{GraidMemberDetail, GRAID_MEMBER_MISSING};
    use std::cell::RefCell;

    #[derive(Default)]
    pub struct FakeControl {
        pub arrays: RefCell<Vec<GraidDetail>>,
        /// errno each ioctl fails with, by name ("create", "assemble", ...).
        pub fail: RefCell<Vec<(&'static str, i32)>>,
        /// `bad_member` and `missing` an ASSEMBLE failure reports.
        pub bad_member: u32,
        pub missing: u32,
        pub created: RefCell<Vec<GraidCreate>>,
        pub assembled: RefCell<Vec<GraidAssemble>>,
        pub stopped: RefCell<Vec<GraidStop>>,
        pub member_ops: RefCell<Vec<GraidMemberOp>>,
        pub scrubs: RefCell<Vec<GraidScrub>>,
        pub resizes: RefCell<Vec<GraidResize>>,
        pub reshapes: RefCell<Vec<GraidReshape>>,
        /// The restripe each array runs (RESHAPE's progress answer), by index.
        pub restriping: RefCell<Vec<GraidReshape>>,
        /// The room RESIZE reports, sectors per member.
        pub room: RefCell<u64>,
        pub helper: HelperStatus,
    }

    /// A running array for the fake.
    pub fn array(index: u32, name: &str, level: u32, members: &[(u32, u32, u32)]) -> GraidDetail {
        let mut d = detail_request(index);
        d.level = level;
        d.chunk_sectors = if level == 1 { 0 } else { 1024 };
        d.nr_members = members.len() as u32;
        d.size_sectors = 1 << 21;
        d.events = 7;
        d.uuid = [index as u8 + 1; 16];
        d.name[..name.len()].copy_from_slice(name.as_bytes());
        for (role, &(major, minor, state)) in members.iter().enumerate() {
            d.members[role] = GraidMemberDetail {
                dev: graid_abi::GraidMember { major, minor },
                role: role as u32,
                state,
                reads: 100 * role as u64,
                writes: 10,
                read_bytes: 4096 * 100 * role as u64,
                write_bytes: 40960,
                errors: 0,
                corrected: 0,
                recovery_offset: u64::MAX,
            };
        }
        d
    }

    impl FakeControl {
        pub fn with(arrays: Vec<GraidDetail>) -> Self {
            Self {
                arrays: RefCell::new(arrays),
                bad_member: u32::MAX,
                ..Default::default()
            }
        }

        fn check(&self, op: &str) -> io::Result<()> {
            match self.fail.borrow().iter().find(|(o, _)| *o == op) {
                Some(&(_, errno)) => Err(io::Error::from_raw_os_error(errno)),
                None => Ok(()),
            }
        }

        fn next_index(&self) -> u32 {
            (0..)
                .find(|i| self.arrays.borrow().iter().all(|a| a.index != *i))
                .unwrap()
        }
    }

    impl ControlDevice for FakeControl {
        fn version(&self) -> io::Result<GraidVersion> {
            self.check("version")?;
            let mut v = GraidVersion::ZERO;
            v.abi_version = graid_abi::GRAID_ABI_VERSION;
            v.struct_size = std::mem::size_of::<GraidVersion>() as u32;
            Ok(v)
        }

        fn create(&self, arg: &mut GraidCreate) -> io::Result<()> {
            self.created.borrow_mut().push(*arg);
            self.check("create")?;
            arg.index = self.next_index();
            let members: Vec<_> = arg.members[..arg.nr_members as usize]
                .iter()
                .map(|m| (m.major, m.minor, graid_abi::GRAID_MEMBER_ACTIVE))
                .collect();
            let name = graid_engine::superblock::ArrayName::from_padded(arg.name).unwrap();
            let mut d = array(arg.index, name.as_str(), arg.level, &members);
            d.chunk_sectors = arg.chunk_sectors;
            if arg.uuid != [0; 16] {
                d.uuid = arg.uuid;
            }
            self.arrays.borrow_mut().push(d);
            Ok(())
        }

        fn assemble(&self, arg: &mut GraidAssemble) -> io::Result<()> {
            self.assembled.borrow_mut().push(*arg);
            if let Err(e) = self.check("assemble") {
                arg.bad_member = self.bad_member;
                arg.missing = self.missing;
                return Err(e);
            }
            arg.index = self.next_index();
            arg.bad_member = u32::MAX;
            let members: Vec<_> = arg.members[..arg.nr_members as usize]
                .iter()
                .map(|m| (m.major, m.minor, graid_abi::GRAID_MEMBER_ACTIVE))
                .collect();
            let d = array(arg.index, "found", 10, &members);
            self.arrays.borrow_mut().push(d);
            Ok(())
        }

        fn stop(&self, arg: &GraidStop) -> io::Result<()> {
            self.stopped.borrow_mut().push(*arg);
            self.check("stop")?;
            let mut arrays = self.arrays.borrow_mut();
            let before = arrays.len();
            arrays.retain(|a| a.index != arg.index);
            if arrays.len() == before {
                return Err(io::Error::from_raw_os_error(libc::ENODEV));
            }
            Ok(())
        }

        fn list(&self) -> io::Result<GraidList> {
            self.check("list")?;
            let mut list = empty_list();
            for (slot, a) in list.indices.iter_mut().zip(self.arrays.borrow().iter()) {
                *slot = a.index;
                list.count += 1;
            }
            Ok(list)
        }

        fn detail(&self, index: u32) -> io::Result<GraidDetail> {
            self.check("detail")?;
            self.arrays
                .borrow()
                .iter()
                .find(|a| a.index == index)
                .copied()
                .ok_or_else(|| io::Error::from_raw_os_error(libc::ENODEV))
        }

        /// Starts or stops a scrub (in the array's DETAIL) as the module would.
        fn scrub(&self, arg: &GraidScrub) -> io::Result<()> {
            self.scrubs.borrow_mut().push(*arg);
            self.check("scrub")?;
            let mut arrays = self.arrays.borrow_mut();
            let array = arrays
                .iter_mut()
                .find(|a| a.index == arg.index)
                .ok_or_else(|| io::Error::from_raw_os_error(libc::ENODEV))?;
            array.scrub_action = arg.action;
            array.scrub_done = 0;
            array.scrub_total = array.size_sectors;
            Ok(())
        }

        fn helper_status(&self) -> io::Result<HelperStatus> {
            self.check("helper")?;
            Ok(self.helper)
        }

        /// Grows the array (in its DETAIL) to the size asked, or to `room` for 0, as the
        /// module would; `ENOSPC` past the room.
        fn resize(&self, arg: &mut GraidResize) -> io::Result<()> {
            self.resizes.borrow_mut().push(*arg);
            self.check("resize")?;
            let room = *self.room.borrow();
            arg.room_sectors = room;
            let want = match arg.member_data_sectors {
                0 => room,
                n => n,
            };
            if want > room {
                return Err(io::Error::from_raw_os_error(libc::ENOSPC));
            }
            let mut arrays = self.arrays.borrow_mut();
            let array = arrays
                .iter_mut()
                .find(|a| a.index == arg.index)
                .ok_or_else(|| io::Error::from_raw_os_error(libc::ENODEV))?;
            if want < array.member_data_sectors && arg.flags & graid_abi::GRAID_RESIZE_SHRINK == 0 {
                return Err(io::Error::from_raw_os_error(libc::EOPNOTSUPP));
            }
            let per_member = array.size_sectors / array.member_data_sectors.max(1);
            if arg.flags & graid_abi::GRAID_RESIZE_QUERY != 0 {
                (arg.member_data_sectors, arg.array_sectors) = (want, want * per_member);
                return Ok(());
            }
            array.member_data_sectors = want;
            array.size_sectors = want * per_member;
            (arg.member_data_sectors, arg.array_sectors) = (want, array.size_sectors);
            Ok(())
        }

        /// A RAID 1's copies change as the module's would: new roles missing, dropped roles
        /// only without a device.
        fn reshape(&self, arg: &mut GraidReshape) -> io::Result<()> {
            self.reshapes.borrow_mut().push(*arg);
            self.check("reshape")?;
            let errno = |e| Err(io::Error::from_raw_os_error(e));
            let mut arrays = self.arrays.borrow_mut();
            let array = arrays
                .iter_mut()
                .find(|a| a.index == arg.index)
                .ok_or_else(|| io::Error::from_raw_os_error(libc::ENODEV))?;
            let now = array.nr_members;
            let want = match arg.raid_devices {
                0 => now,
                n => n,
            };
            let asked = graid_abi::GRAID_RESHAPE_CHUNK | graid_abi::GRAID_RESHAPE_LAYOUT;
            let running = self
                .restriping
                .borrow()
                .iter()
                .find(|r| r.index == arg.index)
                .copied();
            if arg.raid_devices == 0 && arg.flags & asked == 0 {
                // The progress alone.
                *arg = running.unwrap_or(GraidReshape {
                    index: arg.index,
                    flags: arg.flags,
                    raid_devices: now,
                    chunk_sectors: array.chunk_sectors,
                    ..GraidReshape::default()
                });
                return Ok(());
            }
            if matches!(array.level, 0 | 5 | 6) {
                // A restripe, as the module's: spares join as the new members.
                if want < now {
                    return errno(libc::EOPNOTSUPP);
                }
                if running.is_some() || array.state != graid_abi::GRAID_ARRAY_OPTIMAL {
                    return errno(libc::EBUSY);
                }
                if array.nr_spares < want - now {
                    return errno(libc::ENOSPC);
                }
                let chunk = match arg.flags & graid_abi::GRAID_RESHAPE_CHUNK {
                    0 => array.chunk_sectors,
                    _ => arg.chunk_sectors,
                };
                let answer = GraidReshape {
                    index: arg.index,
                    flags: arg.flags,
                    raid_devices: want,
                    chunk_sectors: chunk,
                    layout: arg.layout,
                    state: graid_abi::GRAID_RESHAPE_RUNNING,
                    from_raid_devices: now,
                    from_chunk_sectors: array.chunk_sectors,
                    total_sectors: array.size_sectors,
                    data_offset: 4096,
                    new_data_offset: 2048,
                    ..GraidReshape::default()
                };
                *arg = answer;
                if arg.flags & graid_abi::GRAID_RESHAPE_QUERY != 0 {
                    return Ok(());
                }
                for role in now..want {
                    let dev = array.spares[0];
                    array.spares.rotate_left(1);
                    array.nr_spares -= 1;
                    array.members[role as usize] = GraidMemberDetail {
                        role,
                        dev,
                        state: graid_abi::GRAID_MEMBER_ACTIVE,
                        ..GraidMemberDetail::default()
                    };
                }
                array.nr_members = want;
                array.chunk_sectors = chunk;
                self.restriping.borrow_mut().push(answer);
                return Ok(());
            }
            if array.level != 1 {
                return errno(libc::EOPNOTSUPP);
            }
            if !(2..=32).contains(&want) {
                return errno(libc::EINVAL);
            }
            // Members in use past the count move into the lowest missing roles below it.
            let mut members = array.members;
            for from in want..now {
                if members[from as usize].state == GRAID_MEMBER_MISSING {
                    continue;
                }
                let free = (0..want).find(|&r| members[r as usize].state == GRAID_MEMBER_MISSING);
                let Some(to) = free else {
                    return errno(libc::EBUSY);
                };
                members[to as usize] = GraidMemberDetail {
                    role: to,
                    ..members[from as usize]
                };
                members[from as usize].state = GRAID_MEMBER_MISSING;
            }
            arg.raid_devices = want;
            if arg.flags & graid_abi::GRAID_RESHAPE_QUERY != 0 {
                return Ok(());
            }
            array.members = members;
            for role in now..want {
                // A spare takes a new role at once (the module's take-over), else none.
                let spare = match array.nr_spares {
                    0 => None,
                    n => {
                        array.nr_spares = n - 1;
                        Some(array.spares[0])
                    }
                };
                if spare.is_some() {
                    array.spares.rotate_left(1);
                }
                array.members[role as usize] = GraidMemberDetail {
                    role,
                    dev: spare.unwrap_or_default(),
                    state: if spare.is_some() {
                        graid_abi::GRAID_MEMBER_REBUILDING
                    } else {
                        GRAID_MEMBER_MISSING
                    },
                    ..GraidMemberDetail::default()
                };
            }
            array.nr_members = want;
            if want > now {
                array.state = graid_abi::GRAID_ARRAY_DEGRADED;
            }
            Ok(())
        }

        /// Sets or reads the speed limits (in the array's DETAIL) as the module would.
        fn speed(&self, arg: &mut GraidSpeed) -> io::Result<()> {
            self.check("speed")?;
            let mut arrays = self.arrays.borrow_mut();
            let array = arrays
                .iter_mut()
                .find(|a| a.index == arg.index)
                .ok_or_else(|| io::Error::from_raw_os_error(libc::ENODEV))?;
            if arg.flags & graid_abi::GRAID_SPEED_SET != 0 {
                if arg.min_kibs == 0 || (arg.max_kibs != 0 && arg.min_kibs > arg.max_kibs) {
                    return Err(io::Error::from_raw_os_error(libc::EINVAL));
                }
                (array.speed_min_kibs, array.speed_max_kibs) = (arg.min_kibs, arg.max_kibs);
            }
            (arg.min_kibs, arg.max_kibs) = (array.speed_min_kibs, array.speed_max_kibs);
            Ok(())
        }

        /// Fails or removes the member as the module would (without its refusals, which
        /// tests script through `fail`).
        fn member(&self, arg: &mut GraidMemberOp) -> io::Result<()> {
            self.member_ops.borrow_mut().push(*arg);
            self.check("member")?;
            let mut arrays = self.arrays.borrow_mut();
            let array = arrays
                .iter_mut()
                .find(|a| a.index == arg.index)
                .ok_or_else(|| io::Error::from_raw_os_error(libc::ENODEV))?;
            let spares = array.nr_spares as usize;
            if arg.op == graid_abi::GRAID_MEMBER_OP_ADD {
                // Takes the first missing role, as the module does, or becomes a spare.
                let missing = array.members[..array.nr_members as usize]
                    .iter_mut()
                    .find(|m| m.state == graid_abi::GRAID_MEMBER_MISSING);
                let Some(member) = missing else {
                    let slot = array
                        .spares
                        .get_mut(spares)
                        .ok_or_else(|| io::Error::from_raw_os_error(libc::ENOSPC))?;
                    *slot = arg.dev;
                    array.nr_spares += 1;
                    arg.role = graid_abi::GRAID_ROLE_SPARE;
                    return Ok(());
                };
                arg.role = member.role;
                member.dev = arg.dev;
                member.state = graid_abi::GRAID_MEMBER_REBUILDING;
                member.recovery_offset = 0;
                return Ok(());
            }
            if arg.op == graid_abi::GRAID_MEMBER_OP_REPLACE {
                let member = array.members[..array.nr_members as usize]
                    .iter()
                    .find(|m| m.dev == arg.dev)
                    .ok_or_else(|| io::Error::from_raw_os_error(libc::ENXIO))?;
                arg.role = member.role;
                array.replace_role = member.role;
                array.replace_state = graid_abi::GRAID_REPLACE_COPYING;
                array.replace_dev = arg.with;
                return Ok(());
            }
            if let Some(at) = array.spares[..spares].iter().position(|s| *s == arg.dev) {
                if arg.op == graid_abi::GRAID_MEMBER_OP_FAIL {
                    return Err(io::Error::from_raw_os_error(libc::ENXIO));
                }
                array.spares.copy_within(at + 1..spares, at);
                array.nr_spares -= 1;
                arg.role = graid_abi::GRAID_ROLE_SPARE;
                return Ok(());
            }
            let member = array.members[..array.nr_members as usize]
                .iter_mut()
                .find(|m| m.dev == arg.dev && m.state != graid_abi::GRAID_MEMBER_MISSING)
                .ok_or_else(|| io::Error::from_raw_os_error(libc::ENXIO))?;
            arg.role = member.role;
            if arg.op == graid_abi::GRAID_MEMBER_OP_FAIL {
                member.state = graid_abi::GRAID_MEMBER_FAULTY;
            } else {
                member.state = graid_abi::GRAID_MEMBER_MISSING;
                member.dev = Default::default();
            }
            Ok(())
        }
    }
}
