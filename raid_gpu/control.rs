// SPDX-License-Identifier: GPL-2.0

//! `/dev/graid-control`: the ioctls graidctl uses to manage arrays.
//!
//! Every argument is copied in, validated completely and only then acted on, so a malformed
//! request changes nothing. The list of arrays is under one mutex, held only to look up and
//! to reserve or publish an entry: never across member I/O (opening, zeroing, superblock
//! writes, draining a disk), so one hung member cannot freeze every ioctl.

use crate::array::{
    check_members, random_uuid, Array, BitmapChoice, CreateParams, Holder, InitialSync,
};
use crate::engine::assembly::{member_status, pick_freshest, MemberStatus};
use crate::engine::geometry::{Geometry, Level};
use crate::engine::members::MemberSet;
use crate::engine::reshape::ReshapePlan;
use crate::engine::superblock::{ArrayName, HomeHost, Superblock, RECOVERY_COMPLETE};
use crate::member_devices::Member;
use crate::member_devices::SpareDevice;
use crate::kernel_ext::{
    bdev::BlockDeviceFile, capability::require_sys_admin, misc::MiscOps, module_ref::ModuleRef,
    random::real_seconds,
};
use crate::superblock_io::read_superblock;
use crate::uapi::{
    self, GraidAssemble, GraidCreate, GraidDetail, GraidList, GraidMemberOp, GraidReshape, GraidResize,
    GraidScrub, GraidSpeed, GraidStop, GraidVersion,
};
use core::mem::size_of;
use core::ptr;
use core::sync::atomic::{AtomicPtr, Ordering};
use kernel::{
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
// SAFETY: see above.
unsafe impl AsBytes for GraidMemberOp {}
// SAFETY: see above.
unsafe impl FromBytes for GraidMemberOp {}
// SAFETY: see above.
unsafe impl FromBytes for GraidScrub {}
// SAFETY: see above.
unsafe impl AsBytes for GraidSpeed {}
// SAFETY: see above.
unsafe impl FromBytes for GraidSpeed {}
// SAFETY: see above.
unsafe impl AsBytes for GraidResize {}
// SAFETY: see above.
unsafe impl FromBytes for GraidResize {}
// SAFETY: see above.
unsafe impl AsBytes for GraidReshape {}
// SAFETY: see above.
unsafe impl FromBytes for GraidReshape {}

/// One array index in use: a running array, or one being created, assembled or stopped
/// (reserved: its index, name and UUID are taken, but it is not listed).
struct Entry {
    index: u32,
    name: ArrayName,
    uuid: [u8; 16],
    array: Option<Pin<KBox<Array>>>,
    /// Held while the array runs: `rmmod` refuses meanwhile.
    pinned: Option<ModuleRef>,
    /// A member operation is using the array (outside the list's lock): it is not stopped
    /// meanwhile, and a second member operation waits its turn (`EBUSY`).
    busy: bool,
}

/// A running array lent to one member operation, outside the list's lock (see
/// [`Entry::busy`]); given back when dropped.
struct Lent<'a> {
    control: &'a Control,
    index: u32,
    array: &'a Array,
}

impl Drop for Lent<'_> {
    fn drop(&mut self) {
        let mut arrays = self.control.arrays.lock();
        if let Some(entry) = arrays.iter_mut().find(|e| e.index == self.index) {
            entry.busy = false;
        }
    }
}

/// The control device: owns every running array.
#[pin_data(PinnedDrop)]
pub(crate) struct Control {
    #[pin]
    arrays: Mutex<KVec<Entry>>,
}

/// The control device, for [`kick_every_array`]; null when there is none.
static CONTROL: AtomicPtr<Control> = AtomicPtr::new(ptr::null_mut());

/// Kicks the worker of every running array: a parity helper was caught lying, and each heals
/// what it took from helpers unchecked (`engine/suspect.rs`). Process context, no lock held.
pub(crate) fn kick_every_array() {
    for_each_running_array(crate::engine::platform::Requests::kick_worker);
}

/// Calls `f` with the I/O state of every running array, under the list's lock. Process
/// context, nothing else locked: the helper device's deadline work and the debugfs readers.
pub(crate) fn for_each_running_array(mut f: impl FnMut(&crate::io::ArrayIo)) {
    let control = CONTROL.load(Ordering::Acquire);
    if control.is_null() {
        return;
    }
    // SAFETY: set while the control device lives; its callers, the helper device's deadline
    // work and the debugfs files, are cancelled and removed before the control device goes
    // (the module's field order).
    let control = unsafe { &*control };
    let arrays = control.arrays.lock();
    for array in arrays.iter().filter_map(|e| e.array.as_ref()) {
        f(array.io());
    }
}

#[pinned_drop]
impl PinnedDrop for Control {
    fn drop(self: Pin<&mut Self>) {
        CONTROL.store(ptr::null_mut(), Ordering::Release);
    }
}

impl Control {
    pub(crate) fn new() -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            arrays <- new_mutex!(KVec::new()),
        })
        .pin_chain(|control| {
            CONTROL.store(ptr::from_ref(&*control).cast_mut(), Ordering::Release);
            Ok(())
        })
    }

    /// Reserves index `want`, or the lowest free index, for an array called `name` with
    /// `uuid`: `EEXIST` if the name or UUID is taken, `EBUSY` if `want` is, `ENFILE` if every
    /// index is.
    fn reserve(&self, name: ArrayName, uuid: [u8; 16], want: Option<u32>) -> Result<u32> {
        let mut arrays = self.arrays.lock();
        if arrays.iter().any(|e| e.uuid == uuid || e.name.as_str() == name.as_str()) {
            return Err(EEXIST);
        }
        let free = |i: &u32| !arrays.iter().any(|e| e.index == *i);
        let index = match want {
            Some(index) if free(&index) => index,
            Some(_) => return Err(EBUSY),
            None => (0..uapi::GRAID_MAX_ARRAYS as u32).find(free).ok_or(ENFILE)?,
        };
        arrays.push(
            Entry {
                index,
                name,
                uuid,
                array: None,
                pinned: None,
                busy: false,
            },
            GFP_KERNEL,
        )?;
        Ok(index)
    }

    /// Lends running array `index` to a member operation: `ENODEV` if there is none, `EBUSY`
    /// while another member operation has it.
    fn lend(&self, index: u32) -> Result<Lent<'_>> {
        let mut arrays = self.arrays.lock();
        let entry = arrays
            .iter_mut()
            .find(|e| e.index == index && e.array.is_some())
            .ok_or(ENODEV)?;
        if entry.busy {
            return Err(EBUSY);
        }
        let array: *const Array = &**entry.array.as_ref().ok_or(ENODEV)?;
        entry.busy = true;
        // SAFETY: the array is pinned in its box, which stays in the entry while it is busy:
        // STOP refuses a busy entry, and only STOP takes a published array out; `Lent`'s drop
        // clears `busy`, so the reference does not outlive the loan.
        let array = unsafe { &*array };
        Ok(Lent {
            control: self,
            index,
            array,
        })
    }

    /// Publishes the array started for reserved `index`, or gives the index back on failure.
    fn publish(&self, index: u32, started: Result<Pin<KBox<Array>>>) -> Result<u32> {
        let mut arrays = self.arrays.lock();
        let pos = arrays.iter().position(|e| e.index == index);
        match (started, pos) {
            (Ok(array), Some(pos)) => {
                array.announce(None);
                array.announce_if_degraded();
                if let Some(entry) = arrays.get_mut(pos) {
                    entry.array = Some(array);
                    entry.pinned = Some(ModuleRef::take());
                }
                Ok(index)
            }
            (Err(e), pos) => {
                if let Some(pos) = pos {
                    let _ = arrays.remove(pos);
                }
                Err(e)
            }
            // Unreachable: only the reserver removes a reserved entry.
            (Ok(_), None) => Err(EINVAL),
        }
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
            uapi::GRAID_IOC_MEMBER => self.member(user(size_of::<GraidMemberOp>())),
            uapi::GRAID_IOC_SPEED => self.speed(user(size_of::<GraidSpeed>())),
            uapi::GRAID_IOC_SCRUB => self.scrub(user(size_of::<GraidScrub>())),
            uapi::GRAID_IOC_RESIZE => self.resize(user(size_of::<GraidResize>())),
            uapi::GRAID_IOC_RESHAPE => self.reshape(user(size_of::<GraidReshape>())),
            crate::ring_uapi::GRAID_IOC_HELPER_STATUS => {
                let status = crate::helper_device::status();
                user(size_of::<crate::ring_uapi::HelperStatus>())
                    .writer()
                    .write(&status)?;
                Ok(0)
            }
            _ => Err(ENOTTY),
        }
    }
}

/// Whether the reshape `best` records, if any, is one this raid_gpu can continue (said in the
/// log if not). Out of line: the plan would add to `assemble_members`'s frame, near the
/// kernel's limit with the distro's rustc.
#[inline(never)]
fn reshape_plannable(best: &Superblock) -> bool {
    match ReshapePlan::recorded(best) {
        Some(Err(e)) => {
            pr_err!(
                "graid: {}: a reshape is in progress on these members that this raid_gpu cannot continue ({:?}); nothing changed\n",
                best.array_name.as_str(),
                e
            );
            false
        }
        _ => true,
    }
}

/// Whether an array may start without the roles in `missing` (mdadm's rules): only when asked
/// (`ENODEV` otherwise, naming them), only with every sector still readable (`ENODEV`), and a
/// RAID 5/6 only if it was stopped cleanly or has a partial parity log (not in the middle of a
/// reshape) (`EUCLEAN`: after a crash its parity may not match its data, and a missing chunk
/// rebuilt from it would be wrong; md refuses the same without its PPL).
fn check_degraded_start(best: &Superblock, missing: MemberSet, run: bool) -> Result {
    let name = best.array_name.as_str();
    if !run {
        return Err(ENODEV);
    }
    if !keeps_all_data(best, missing)? {
        pr_err!("graid: {}: too many members missing to start: data would be lost\n", name);
        return Err(ENODEV);
    }
    if best.level.has_parity() && !parity_trusted(best) {
        pr_err!("graid: {}: not stopped cleanly (or not resynchronised) and degraded: its parity may not match its data; not started\n", name);
        return Err(crate::errno::euclean());
    }
    pr_warn!("graid: {}: starting degraded, roles missing: {:#x}\n", name, missing.bits());
    Ok(())
}

/// The parity can be trusted to rebuild a missing member: no resync pending (an initial sync
/// never finished, or one after a crash), and either stopped (or idle) with no write in flight,
/// or with a partial parity log, which the start replays to make whole what a crash tore (not
/// in the middle of a reshape: the log takes no entry while the data moves).
fn parity_trusted(sb: &Superblock) -> bool {
    sb.resync_offset == RECOVERY_COMPLETE && (sb.clean || (sb.ppl && sb.reshape.is_none()))
}

/// Whether every sector keeps a copy (or enough parity) without the roles in `lost`: in both
/// geometries while a reshape runs (a degraded start goes on with it degraded, as md's does).
/// `EUCLEAN` for a superblock whose geometry does not validate.
#[inline(never)]
fn keeps_all_data(best: &Superblock, lost: MemberSet) -> Result<bool> {
    let old = best.geometry().map_err(|_| crate::errno::euclean())?;
    let new = match best.reshape {
        Some(_) => Some(best.new_geometry().ok_or_else(crate::errno::euclean)?),
        None => None,
    };
    Ok(old.has_all_data(lost) && new.is_none_or(|g| g.has_all_data(lost)))
}

/// A member being rebuilt holds no data yet: some other copy must (`ENODEV` if not).
#[inline(never)]
fn check_rebuild_sources(best: &Superblock, by_role: &[Option<Member>], missing: MemberSet) -> Result {
    let rebuilding = (0u32..)
        .zip(by_role.iter())
        .filter(|(_, m)| m.as_ref().is_some_and(|m| m.recovery_offset != RECOVERY_COMPLETE))
        .fold(MemberSet::EMPTY, |set, (role, _)| set.with(role));
    if !keeps_all_data(best, missing.union(rebuilding))? {
        pr_err!(
            "graid: {}: the members being rebuilt have no in-sync copy to rebuild from\n",
            best.array_name.as_str()
        );
        return Err(ENODEV);
    }
    if !rebuilding.is_empty() && best.level.has_parity() && !parity_trusted(best) {
        pr_err!(
            "graid: {}: not stopped cleanly with a member being rebuilt: its parity may not match its data; not started\n",
            best.array_name.as_str()
        );
        return Err(crate::errno::euclean());
    }
    Ok(())
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
    let layout_given = req.flags & uapi::GRAID_CREATE_LAYOUT != 0;
    if req.flags & !uapi::GRAID_CREATE_FLAGS != 0 || (!layout_given && req.layout != 0) {
        return Err(EINVAL);
    }
    let no_bitmap = req.flags & uapi::GRAID_CREATE_NO_BITMAP != 0;
    let bitmap = match req.bitmap_region_sectors {
        _ if no_bitmap && req.bitmap_region_sectors != 0 => return Err(EINVAL),
        _ if no_bitmap => BitmapChoice::None,
        0 => BitmapChoice::Default,
        // A RAID 0 has no bitmap to size.
        _ if req.level == uapi::GRAID_LEVEL_RAID0 => return Err(EINVAL),
        // The superblock's validation checks that its bits fit, once the size is known.
        sectors => BitmapChoice::Region(sectors),
    };
    let no_ppl = req.flags & uapi::GRAID_CREATE_NO_PPL != 0;
    let options = uapi::GRAID_CREATE_LAYOUT | uapi::GRAID_CREATE_NO_BITMAP | uapi::GRAID_CREATE_NO_PPL;
    let sync = match req.flags & !options {
        0 => InitialSync::Unknown,
        uapi::GRAID_CREATE_ASSUME_CLEAN => InitialSync::AssumeClean,
        uapi::GRAID_CREATE_WRITE_ZEROES => InitialSync::Zeroed,
        _ => return Err(EINVAL),
    };
    let level = if layout_given {
        Level::from_codes(req.level, req.layout).map_err(|_| EINVAL)?
    } else {
        Level::from_code(req.level).ok_or(EINVAL)?
    };
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
    let homehost = HomeHost::from_padded(req.homehost).map_err(|_| EINVAL)?;
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
        real_seconds()
    };
    Ok(CreateParams {
        level,
        chunk_sectors: req.chunk_sectors,
        name,
        homehost,
        uuid,
        created,
        sync,
        bitmap,
        // RAID 5/6 only; the others have no parity to log.
        ppl: level.has_parity() && !no_ppl,
        members: devs,
    })
}

impl Control {
    #[inline(never)]
    fn create(&self, user: UserSlice) -> Result<isize> {
        let (mut reader, mut writer) = user.reader_writer();
        let mut req: GraidCreate = reader.read()?;
        let params = parse_create(&req)?;
        let index = self.reserve(params.name, params.uuid, None)?;
        req.index = self.publish(index, Array::create(index, params))?;
        writer.write(&req)?;
        Ok(0)
    }

    /// ASSEMBLE: the answer is copied back even on failure, so `bad_member` reaches userspace.
    #[inline(never)]
    fn assemble(&self, user: UserSlice) -> Result<isize> {
        let (mut reader, mut writer) = user.reader_writer();
        let mut req: GraidAssemble = reader.read()?;
        req.bad_member = u32::MAX;
        req.missing = 0;
        let result = self.assemble_members(&mut req);
        if let Ok(index) = result {
            req.index = index;
        }
        writer.write(&req)?;
        result.map(|_| 0)
    }

    #[inline(never)]
    fn assemble_members(&self, req: &mut GraidAssemble) -> Result<u32> {
        let known = uapi::GRAID_ASSEMBLE_RUN | uapi::GRAID_ASSEMBLE_INDEX;
        if req.flags & !known != 0 || req.reserved != 0 {
            return Err(EINVAL);
        }
        let want = (req.flags & uapi::GRAID_ASSEMBLE_INDEX != 0).then_some(req.index);
        if want.is_some_and(|i| i >= uapi::GRAID_MAX_ARRAYS as u32) {
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
        let mut opened = KVec::with_capacity(nr, GFP_KERNEL)?;
        for file in files.iter().flatten() {
            opened.push(file, GFP_KERNEL)?;
        }
        if let Err((i, e)) = check_members(&opened) {
            req.bad_member = i as u32;
            return Err(e);
        }
        drop(opened);
        // The array is the one the first member belongs to; the newest superblock describes it.
        let uuid = sbs.first().map(|sb| sb.array_uuid).ok_or(EINVAL)?;
        let freshest = pick_freshest(&sbs, &uuid).ok_or(EINVAL)?;
        let best = *sbs.get(freshest).ok_or(EINVAL)?;
        // A reshape in progress goes on (`engine/reshape_run.rs`); one this raid_gpu cannot
        // plan is refused, never misread (its sectors lie in two geometries).
        if !reshape_plannable(&best) {
            req.bad_member = u32::MAX;
            return Err(crate::errno::eopnotsupp());
        }
        // During a reshape, the roles of both geometries.
        let roles = best.reshape.map_or(best.members, |r| r.new_members.max(best.members));
        let mut by_role: KVec<Option<Member>> = KVec::with_capacity(roles as usize, GFP_KERNEL)?;
        for _ in 0..roles {
            by_role.push(None, GFP_KERNEL)?;
        }
        let mut spares = KVec::new();
        // The role of a spare: none (roles are below 32).
        const SPARE: u8 = u8::MAX;
        for (i, (file, sb)) in files.iter_mut().zip(sbs.iter()).enumerate() {
            req.bad_member = i as u32;
            let (role, recovery_offset) = match member_status(&sbs, freshest, i).ok_or(EINVAL)? {
                MemberStatus::Active { role } => (role, RECOVERY_COMPLETE),
                // An interrupted rebuild goes on.
                MemberStatus::Recovering { role, recovery_offset } => (role, recovery_offset),
                MemberStatus::Spare => (SPARE, 0),
                MemberStatus::Foreign => return Err(EXDEV),
                MemberStatus::Stale { .. } | MemberStatus::Faulty | MemberStatus::Removed => {
                    return Err(crate::errno::estale())
                }
                MemberStatus::Mismatch => return Err(crate::errno::euclean()),
                MemberStatus::Duplicate { .. } => return Err(EINVAL),
            };
            let file = file.take().ok_or(EINVAL)?;
            // The data area must fit (both, during a reshape): a shrunk device would take I/O
            // past its end.
            let needed = best.data_end().ok_or(EINVAL)?;
            if file.nr_sectors() < needed {
                pr_err!(
                    "graid: {}: member {} has {} sectors, the array needs {}\n",
                    best.array_name.as_str(),
                    i,
                    file.nr_sectors(),
                    needed
                );
                return Err(ENOSPC);
            }
            if role == SPARE {
                if spares.len() >= uapi::GRAID_MAX_SPARES {
                    return Err(ENOSPC);
                }
                let spare = SpareDevice {
                    slot: sb.this_slot,
                    uuid: sb.member_uuid,
                    file,
                };
                spares.push(spare, GFP_KERNEL)?;
                continue;
            }
            let slot = by_role.get_mut(usize::from(role)).ok_or(EINVAL)?;
            if slot.is_some() {
                return Err(EINVAL);
            }
            *slot = Some(Member {
                recovery_offset,
                ..Member::new(file, sb.member_uuid, sb.this_slot)
            });
        }
        req.bad_member = u32::MAX;
        let missing = (0u32..)
            .zip(by_role.iter())
            .filter(|(_, m)| m.is_none())
            .fold(MemberSet::EMPTY, |set, (role, _)| set.with(role));
        req.missing = missing.bits();
        if !missing.is_empty() {
            check_degraded_start(&best, missing, req.flags & uapi::GRAID_ASSEMBLE_RUN != 0)?;
        }
        check_rebuild_sources(&best, &by_role, missing)?;
        let index = self.reserve(best.array_name, best.array_uuid, want)?;
        self.publish(index, Array::assemble(index, by_role, spares, best, holder))
    }

    #[inline(never)]
    fn stop(&self, user: UserSlice) -> Result<isize> {
        let req: GraidStop = user.reader().read()?;
        if req.flags & !uapi::GRAID_STOP_FORCE != 0 {
            return Err(EINVAL);
        }
        let array = {
            let mut arrays = self.arrays.lock();
            let entry = arrays
                .iter_mut()
                .find(|e| e.index == req.index && e.array.is_some())
                .ok_or(ENODEV)?;
            if entry.busy {
                return Err(EBUSY);
            }
            // Even with FORCE: tearing down an open disk could lose writes in flight. From here
            // on nobody can open it.
            entry.array.as_ref().ok_or(ENODEV)?.begin_stop()?;
            // The entry stays, reserved, until the array is gone.
            entry.array.take().ok_or(ENODEV)?
        };
        // Deletes the disk (draining I/O), writes the last superblocks, releases the members.
        drop(array);
        let mut arrays = self.arrays.lock();
        if let Some(pos) = arrays.iter().position(|e| e.index == req.index) {
            let _ = arrays.remove(pos);
        }
        Ok(0)
    }

    /// MEMBER: fails or removes one member. The answer (the member's role) is copied back on
    /// success only.
    #[inline(never)]
    fn member(&self, user: UserSlice) -> Result<isize> {
        let (mut reader, mut writer) = user.reader_writer();
        let mut req: GraidMemberOp = reader.read()?;
        let known = matches!(
            req.op,
            uapi::GRAID_MEMBER_OP_FAIL
                | uapi::GRAID_MEMBER_OP_REMOVE
                | uapi::GRAID_MEMBER_OP_ADD
                | uapi::GRAID_MEMBER_OP_REPLACE
        );
        let with = (req.with.major, req.with.minor);
        if req.flags != 0 || !known || (req.op != uapi::GRAID_MEMBER_OP_REPLACE && with != (0, 0)) {
            return Err(EINVAL);
        }
        let (major, minor) = (req.dev.major, req.dev.minor);
        let lent = self.lend(req.index)?;
        req.role = match req.op {
            uapi::GRAID_MEMBER_OP_FAIL => lent.array.fail_member(major, minor)?,
            uapi::GRAID_MEMBER_OP_REMOVE => lent.array.remove_member(major, minor)?,
            uapi::GRAID_MEMBER_OP_ADD => lent.array.add_member(major, minor)?,
            uapi::GRAID_MEMBER_OP_REPLACE => lent.array.replace_member(major, minor, with)?,
            _ => return Err(EINVAL),
        };
        drop(lent);
        writer.write(&req)?;
        Ok(0)
    }

    #[inline(never)]
    fn scrub(&self, user: UserSlice) -> Result<isize> {
        let req: GraidScrub = user.reader().read()?;
        if req.action > uapi::GRAID_SCRUB_REPAIR {
            return Err(EINVAL);
        }
        let lent = self.lend(req.index)?;
        lent.array.scrub(req.action)?;
        Ok(0)
    }

    /// RESIZE: the answer (the sizes now, and the room) is copied back on success and on
    /// `ENOSPC`.
    #[inline(never)]
    fn resize(&self, user: UserSlice) -> Result<isize> {
        let (mut reader, mut writer) = user.reader_writer();
        let mut req: GraidResize = reader.read()?;
        if req.flags & !(uapi::GRAID_RESIZE_SHRINK | uapi::GRAID_RESIZE_QUERY) != 0 {
            return Err(EINVAL);
        }
        let lent = self.lend(req.index)?;
        let result = lent.array.resize(&mut req);
        drop(lent);
        if result.is_ok() || result == Err(ENOSPC) {
            writer.write(&req)?;
        }
        result.map(|()| 0)
    }

    /// RESHAPE: the answer (the member count now) is copied back on success.
    #[inline(never)]
    fn reshape(&self, user: UserSlice) -> Result<isize> {
        let (mut reader, mut writer) = user.reader_writer();
        let mut req: GraidReshape = reader.read()?;
        let known = uapi::GRAID_RESHAPE_QUERY
            | uapi::GRAID_RESHAPE_LEVEL
            | uapi::GRAID_RESHAPE_LAYOUT
            | uapi::GRAID_RESHAPE_CHUNK;
        if req.flags & !known != 0 {
            return Err(EINVAL);
        }
        let lent = self.lend(req.index)?;
        let result = lent.array.reshape(&mut req);
        drop(lent);
        result?;
        writer.write(&req)?;
        Ok(0)
    }

    #[inline(never)]
    fn speed(&self, user: UserSlice) -> Result<isize> {
        let (mut reader, mut writer) = user.reader_writer();
        let mut req: GraidSpeed = reader.read()?;
        if req.flags & !uapi::GRAID_SPEED_SET != 0 {
            return Err(EINVAL);
        }
        let lent = self.lend(req.index)?;
        lent.array.speed(&mut req)?;
        drop(lent);
        writer.write(&req)?;
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
        let running = arrays.iter().filter(|e| e.array.is_some());
        for (e, slot) in running.zip(out.indices.iter_mut()) {
            *slot = e.index;
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
        let arrays = self.arrays.lock();
        let array = arrays
            .iter()
            .find(|e| e.index == index)
            .and_then(|e| e.array.as_ref())
            .ok_or(ENODEV)?;
        let out = array.detail_boxed()?;
        drop(arrays);
        writer.write(&*out)?;
        Ok(0)
    }
}
