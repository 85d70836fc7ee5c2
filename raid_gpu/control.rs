// SPDX-License-Identifier: GPL-2.0

//! `/dev/graid-control`: the ioctls graidctl uses to manage arrays.
//!
//! Every argument is copied in, validated completely and only then acted on, so a malformed
//! request changes nothing. All array changes happen under one mutex.

use crate::array::{random_uuid, Array, CreateParams, Holder};
use crate::engine::assembly::{member_status, pick_freshest, MemberStatus};
use crate::engine::geometry::{Geometry, Level};
use crate::engine::superblock::ArrayName;
use crate::io::Member;
use crate::kernel_ext::{bdev::BlockDeviceFile, capability::require_sys_admin, misc::MiscOps};
use crate::metadata::read_superblock;
use crate::uapi::{
    self, GraidAssemble, GraidCreate, GraidDetail, GraidList, GraidStop, GraidVersion,
};
use core::mem::size_of;
use kernel::{
    bindings,
    fs::File,
    new_mutex,
    prelude::*,
    sync::Mutex,
    transmute::{AsBytes, FromBytes},
    uaccess::UserSlice,
};

// SAFETY: this and all impls below: the uapi structs are `repr(C)`, made of integers and
// integer arrays only, without padding (checked by graid-abi's host tests): every byte is
// initialised and every bit pattern is a valid value.
unsafe impl AsBytes for GraidVersion {}
// SAFETY: see above.
unsafe impl AsBytes for GraidCreate {}
// SAFETY: see above.
unsafe impl FromBytes for GraidCreate {}
// SAFETY: see above.
unsafe impl FromBytes for GraidStop {}
// SAFETY: see above.
unsafe impl AsBytes for GraidAssemble {}
// SAFETY: see above.
unsafe impl FromBytes for GraidAssemble {}
// SAFETY: see above.
unsafe impl AsBytes for GraidList {}
// SAFETY: see above.
unsafe impl AsBytes for GraidDetail {}
// SAFETY: see above.
unsafe impl FromBytes for GraidDetail {}

/// The control device: owns every running array.
#[pin_data]
pub(crate) struct Control {
    #[pin]
    arrays: Mutex<KVec<Pin<KBox<Array>>>>,
}

impl Control {
    pub(crate) fn new() -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            arrays <- new_mutex!(KVec::new()),
        })
    }
}

impl MiscOps for Control {
    fn open(&self, _file: &File) -> Result {
        require_sys_admin()
    }

    fn ioctl(&self, _file: &File, cmd: u32, arg: usize) -> Result<isize> {
        // Checked again here: an opened descriptor may have been passed to another process.
        require_sys_admin()?;
        let user = |size| UserSlice::new(UserPtr::from_addr(arg), size);
        match cmd {
            uapi::GRAID_IOC_VERSION => version(user(size_of::<GraidVersion>())),
            uapi::GRAID_IOC_CREATE => self.create(user(size_of::<GraidCreate>())),
            uapi::GRAID_IOC_ASSEMBLE => self.assemble(user(size_of::<GraidAssemble>())),
            uapi::GRAID_IOC_STOP => self.stop(user(size_of::<GraidStop>())),
            uapi::GRAID_IOC_LIST => self.list(user(size_of::<GraidList>())),
            uapi::GRAID_IOC_DETAIL => self.detail(user(size_of::<GraidDetail>())),
            _ => Err(ENOTTY),
        }
    }
}

#[inline(never)]
fn version(user: UserSlice) -> Result<isize> {
    let mut answer = GraidVersion {
        abi_version: uapi::GRAID_ABI_VERSION,
        struct_size: size_of::<GraidVersion>() as u32,
        module_version: [0; uapi::GRAID_VERSION_LEN],
    };
    let v = crate::MODULE_VERSION.as_bytes();
    let len = v.len().min(uapi::GRAID_VERSION_LEN - 1);
    answer.module_version[..len].copy_from_slice(&v[..len]);
    user.writer().write(&answer)?;
    Ok(0)
}

/// Checks everything about a CREATE request that does not need the member devices.
fn parse_create(req: &GraidCreate) -> Result<CreateParams> {
    if req.flags != 0 || req.reserved != 0 {
        return Err(EINVAL);
    }
    let level = Level::from_code(req.level).ok_or(EINVAL)?;
    let nr = req.nr_members as usize;
    let members = req.members.get(..nr).ok_or(EINVAL)?;
    // Level, member count and chunk size, before any device is touched.
    Geometry::new(level, req.nr_members, req.chunk_sectors, 1 << 30).map_err(|_| EINVAL)?;
    // The ABI promises a NUL-terminated name; the on-disk field need not hold the NUL.
    if !req.name.contains(&0) {
        return Err(EINVAL);
    }
    let name = ArrayName::from_padded(req.name).map_err(|_| EINVAL)?;
    if name.as_str().is_empty() {
        return Err(EINVAL);
    }
    let mut devs = KVec::with_capacity(nr, GFP_KERNEL)?;
    for (i, m) in members.iter().enumerate() {
        if members.iter().skip(i + 1).any(|other| other == m) {
            return Err(EINVAL);
        }
        devs.push((m.major, m.minor), GFP_KERNEL)?;
    }
    let uuid = if req.uuid == [0; 16] { random_uuid() } else { req.uuid };
    let created = if req.ctime != 0 {
        req.ctime
    } else {
        // SAFETY: reads the wall clock.
        unsafe { bindings::ktime_get_real_seconds() as u64 }
    };
    Ok(CreateParams {
        level,
        chunk_sectors: req.chunk_sectors,
        name,
        uuid,
        created,
        members: devs,
    })
}

/// The lowest array index not in use.
fn free_index(arrays: &[Pin<KBox<Array>>]) -> Result<u32> {
    (0..uapi::GRAID_MAX_ARRAYS as u32)
        .find(|i| !arrays.iter().any(|a| a.index == *i))
        .ok_or(ENFILE)
}

impl Control {
    #[inline(never)]
    fn create(&self, user: UserSlice) -> Result<isize> {
        let (mut reader, mut writer) = user.reader_writer();
        let mut req: GraidCreate = reader.read()?;
        let params = parse_create(&req)?;
        let mut arrays = self.arrays.lock();
        if arrays.iter().any(|a| a.name().as_str() == params.name.as_str()) {
            return Err(EEXIST);
        }
        let index = free_index(&arrays)?;
        let array = Array::create(index, params)?;
        array.announce();
        arrays.push(array, GFP_KERNEL)?;
        req.index = index;
        writer.write(&req)?;
        Ok(0)
    }

    /// ASSEMBLE: the answer is copied back even on failure, so `bad_member` reaches userspace.
    #[inline(never)]
    fn assemble(&self, user: UserSlice) -> Result<isize> {
        let (mut reader, mut writer) = user.reader_writer();
        let mut req: GraidAssemble = reader.read()?;
        req.bad_member = u32::MAX;
        let result = self.assemble_members(&mut req);
        if let Ok(index) = result {
            req.index = index;
        }
        writer.write(&req)?;
        result.map(|_| 0)
    }

    #[inline(never)]
    fn assemble_members(&self, req: &mut GraidAssemble) -> Result<u32> {
        if req.flags != 0 {
            return Err(EINVAL);
        }
        let nr = req.nr_members as usize;
        let all = req.members;
        let devs = all.get(..nr).filter(|d| !d.is_empty()).ok_or(EINVAL)?;
        let holder = Holder::new()?;
        let mut files = KVec::with_capacity(nr, GFP_KERNEL)?;
        let mut sbs = KVec::with_capacity(nr, GFP_KERNEL)?;
        for (i, dev) in devs.iter().enumerate() {
            req.bad_member = i as u32;
            if devs.iter().take(i).any(|earlier| earlier == dev) {
                return Err(EINVAL);
            }
            let file = BlockDeviceFile::open_exclusive(dev.major, dev.minor, holder.cookie())?;
            sbs.push(read_superblock(&file)?, GFP_KERNEL)?;
            files.push(Some(file), GFP_KERNEL)?;
        }
        // The array is the one the first member belongs to; the newest superblock describes it.
        let uuid = sbs.first().map(|sb| sb.array_uuid).ok_or(EINVAL)?;
        let freshest = pick_freshest(&sbs, &uuid).ok_or(EINVAL)?;
        let best = *sbs.get(freshest).ok_or(EINVAL)?;
        let mut by_role: KVec<Option<Member>> = KVec::with_capacity(best.members as usize, GFP_KERNEL)?;
        for _ in 0..best.members {
            by_role.push(None, GFP_KERNEL)?;
        }
        for (i, (file, sb)) in files.iter_mut().zip(sbs.iter()).enumerate() {
            req.bad_member = i as u32;
            let role = match member_status(&sbs, freshest, i).ok_or(EINVAL)? {
                MemberStatus::Active { role } => role,
                MemberStatus::Foreign => return Err(EXDEV),
                MemberStatus::Stale { .. } | MemberStatus::Faulty | MemberStatus::Removed => {
                    return Err(crate::errno::estale())
                }
                MemberStatus::Mismatch => return Err(crate::errno::euclean()),
                // Spares, rebuilds and duplicates are not supported yet.
                _ => return Err(EINVAL),
            };
            let slot = by_role.get_mut(usize::from(role)).ok_or(EINVAL)?;
            if slot.is_some() {
                return Err(EINVAL);
            }
            *slot = Some(Member::new(file.take().ok_or(EINVAL)?, sb.member_uuid));
        }
        req.bad_member = u32::MAX;
        let mut members = KVec::with_capacity(by_role.len(), GFP_KERNEL)?;
        for member in by_role.into_iter() {
            // A role nobody fills: degraded assembly is not supported yet.
            members.push(member.ok_or(ENODEV)?, GFP_KERNEL)?;
        }
        if !best.clean {
            pr_warn!("graid: {} was not stopped cleanly; mirrors are not resynchronised yet\n", best.array_name.as_str());
        }
        let mut arrays = self.arrays.lock();
        if arrays.iter().any(|a| a.uuid() == &best.array_uuid || a.name().as_str() == best.array_name.as_str()) {
            return Err(EEXIST);
        }
        let index = free_index(&arrays)?;
        let array = Array::assemble(index, members, best, holder)?;
        array.announce();
        arrays.push(array, GFP_KERNEL)?;
        Ok(index)
    }

    #[inline(never)]
    fn stop(&self, user: UserSlice) -> Result<isize> {
        let req: GraidStop = user.reader().read()?;
        if req.flags & !uapi::GRAID_STOP_FORCE != 0 {
            return Err(EINVAL);
        }
        let mut arrays = self.arrays.lock();
        let pos = arrays.iter().position(|a| a.index == req.index).ok_or(ENODEV)?;
        // Even with FORCE: tearing down an open disk could lose writes in flight.
        if arrays.get(pos).map(|a| a.open_count()).unwrap_or(0) > 0 {
            return Err(EBUSY);
        }
        let array = arrays.remove(pos)?;
        // Deletes the disk (draining I/O), marks the superblocks clean, releases the members.
        drop(array);
        Ok(0)
    }

    #[inline(never)]
    fn list(&self, user: UserSlice) -> Result<isize> {
        let mut out = GraidList {
            count: 0,
            reserved: 0,
            indices: [0; uapi::GRAID_MAX_ARRAYS],
        };
        let arrays = self.arrays.lock();
        for (a, slot) in arrays.iter().zip(out.indices.iter_mut()) {
            *slot = a.index;
            out.count += 1;
        }
        drop(arrays);
        user.writer().write(&out)?;
        Ok(0)
    }

    #[inline(never)]
    fn detail(&self, user: UserSlice) -> Result<isize> {
        let (mut reader, mut writer) = user.reader_writer();
        // Only the index is input (the first field); the rest is output, built on the heap
        // (it is too big for the stack) from zero, so nothing the caller passed is echoed back.
        let index: u32 = reader.read()?;
        let mut out = KBox::<GraidDetail>::new_uninit(GFP_KERNEL)?;
        // SAFETY: GraidDetail is plain integers (see the FromBytes impl); all-zero is valid.
        let mut out = unsafe {
            out.as_mut_ptr().write_bytes(0, 1);
            out.assume_init()
        };
        out.index = index;
        let arrays = self.arrays.lock();
        let array = arrays.iter().find(|a| a.index == index).ok_or(ENODEV)?;
        array.detail(&mut out);
        drop(arrays);
        writer.write(&*out)?;
        Ok(0)
    }
}
