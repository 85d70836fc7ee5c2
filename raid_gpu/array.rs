// SPDX-License-Identifier: GPL-2.0

//! One running array: its members, its `/dev/graidN` disk, and how it is created, started,
//! described and stopped.
//!
//! The superblocks say "clean" while no write can be half done (`engine/safe_mode.rs`): a start
//! writes "clean" before the disk appears, the first write marks the array dirty, a quiet
//! period or the stop marks it clean again. Whether the copies or parity match is said apart,
//! by the resync's position (`engine/scrub.rs`): an array assembled after a crash, or created
//! without its copies in sync, resyncs by itself from the start or from where a clean stop
//! left its resync.

use crate::engine::admin::{AddError, FailError};
use crate::engine::array::ArrayState;
use crate::engine::members::Health;
use crate::engine::platform::MemberEvent;
use crate::engine::replace::{ReplaceError, ReplaceStage};
use crate::engine::raid_devices::{Moves, RaidDevicesError};
use crate::engine::resize::ResizeError;
use crate::engine::reshape::{PlanError, ReshapePlan};
use crate::engine::reshape_run::ReshapeError;
use crate::engine::scrub::{ScrubError, ScrubMode};
use crate::engine::geometry::{Geometry, Level, MAX_MEMBERS};
use crate::bitmap_io::Bitmap;
use crate::engine::bitmap::Regions;
use crate::engine::members::MemberSet;
use crate::engine::superblock::{
    new_array_layout, Area, ArrayName, HomeHost, Slot, Superblock, DEFAULT_BITMAP_AREA,
    MAX_SLOTS, RECOVERY_COMPLETE, UUID_LEN,
};
use crate::io::{scrub_name, ArrayHooks, ArrayIo};
use crate::member_devices::{Member, MemberDevices};
use crate::member_devices::SpareDevice;
use crate::kernel_ext::{
    bdev::BlockDeviceFile,
    blk_mq::{Disk, DiskConfig},
    random::random_bytes,
};
use crate::kernel_ext::work::{noio_scope, WorkHandler, Worker};
use crate::superblock_io::read_superblock;
use crate::sysfs::ArrayDirs;
use crate::uapi;
use crate::uevent::{self, MemberChange};
use core::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use kernel::{ffi::c_void, new_mutex, prelude::*, sync::Mutex};

#[path = "array_restripe.rs"]
mod restripe;

/// Smallest usable data area per member: one 1 MiB chunk.
const MIN_MEMBER_DATA_SECTORS: u64 = 2048;

/// How a new array's copies start out.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum InitialSync {
    /// Not known to be in sync: reads come from one fixed copy until a resync.
    Unknown,
    /// Taken as in sync on the caller's word (mdadm's `--assume-clean`).
    AssumeClean,
    /// Every member's data area was zeroed by the device (mdadm's `--write-zeroes`).
    Zeroed,
}

/// The write-intent bitmap CREATE asks for.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum BitmapChoice {
    /// None (mdadm's `--bitmap=none`).
    None,
    /// In the members' reserved area, regions of the default size (or larger, if the area
    /// needs): mdadm's `--bitmap=internal`. RAID 0 has none.
    Default,
    /// In the reserved area, regions of this many sectors (a power of two, at least 8).
    Region(u64),
}

/// What CREATE asks for, validated by the caller except for what needs the devices.
pub(crate) struct CreateParams {
    pub(crate) level: Level,
    pub(crate) chunk_sectors: u32,
    pub(crate) name: ArrayName,
    pub(crate) homehost: HomeHost,
    pub(crate) uuid: [u8; 16],
    pub(crate) created: u64,
    pub(crate) sync: InitialSync,
    pub(crate) bitmap: BitmapChoice,
    /// A partial parity log in the reserved area (RAID 5/6).
    pub(crate) ppl: bool,
    /// (major, minor) of each member, in role order, without duplicates.
    pub(crate) members: KVec<(u32, u32)>,
}

/// How an array starts, besides its members: a resync due, its bitmap, the log to replay (the
/// key its entries carry), a reshape to go on with (from its recorded position).
struct Start {
    resync_from: Option<u64>,
    bitmap: Option<Bitmap>,
    replay: Option<[u8; UUID_LEN]>,
    reshape: Option<(ReshapePlan, u64)>,
}

/// A running array.
#[pin_data(PinnedDrop)]
pub(crate) struct Array {
    pub(crate) index: u32,
    /// Held by every change of members and spares (`graidctl fail/remove/add`, a spare's
    /// takeover): one at a time.
    #[pin]
    members_lock: Mutex<()>,
    /// Set once the array is whole, cleared when it starts going away: a takeover asked for
    /// outside that time (the first superblock write may ask) does nothing.
    running: AtomicBool,
    /// Moves a spare into a failed member's place ([`Array::take_over`]): the failed device's
    /// release waits for requests to drain, which the engine's worker cannot do itself.
    /// Before the disk: initialised before the disk's first superblock write may ask for it.
    /// It also sends the uevents of what the engine's worker decided (`announce_pending`).
    #[pin]
    takeover: Worker<Array>,
    /// Members whose failure, finished rebuild, stopped rebuild or replace's end is yet to be
    /// announced, as bits per [`ANNOUNCED`] (the engine's worker notes them; the takeover work
    /// item announces them).
    to_announce: [AtomicU32; ANNOUNCED.len()],
    /// A scrub's end yet to be announced: [`SCRUB_ENDED`] with its mode and whether it stopped
    /// before its end (the last one only, if two end before the work item runs).
    scrub_to_announce: AtomicU32,
    /// A reshape ended: the takeover work item gives the disk its new size and limits
    /// (`array_restripe.rs`).
    reshape_ended: AtomicBool,
    /// `/sys/block/graidN/graid/`, made once the array is whole, removed before its disk.
    #[pin]
    sysfs: Mutex<Option<ArrayDirs>>,
    #[pin]
    disk: Disk<ArrayIo>,
    /// The members' exclusive-open holder (freed last).
    _holder: Holder,
}

/// What the engine's worker reports that udev hears of, in `to_announce`'s order.
const ANNOUNCED: [(MemberEvent, MemberChange); 7] = [
    (MemberEvent::FailureRecorded, MemberChange::Failed),
    (MemberEvent::KeptLastCopy, MemberChange::ArrayBroken),
    (MemberEvent::Rebuilt, MemberChange::Rebuilt),
    (MemberEvent::RebuildStalled, MemberChange::RebuildStalled),
    (MemberEvent::Replaced, MemberChange::Replaced),
    (MemberEvent::ReplacementFailed, MemberChange::ReplaceFailed),
    (MemberEvent::ReplaceAbandoned, MemberChange::ReplaceAbandoned),
];

/// `scrub_to_announce`'s bits: set, stopped, and the mode in the low byte.
const SCRUB_ENDED: u32 = 1 << 9;
const SCRUB_STOPPED: u32 = 1 << 8;

/// What an array does for its request handler: the handler's events reach the array.
const HOOKS: ArrayHooks = ArrayHooks {
    kick_takeover: |io| {
        // SAFETY: every `ArrayIo` is the request handler of an array's disk (`Array::start`).
        unsafe { Array::of_io(io) }.kick_takeover()
    },
    note_event: |io, member, event| {
        // SAFETY: as above.
        unsafe { Array::of_io(io) }.note_event(member, event)
    },
    note_scrub_end: |io, mode, stopped| {
        // SAFETY: as above.
        unsafe { Array::of_io(io) }.note_scrub_end(mode, stopped)
    },
    reshape_ended: |io| {
        // SAFETY: as above.
        let array = unsafe { Array::of_io(io) };
        array.reshape_ended.store(true, Ordering::SeqCst);
        array.kick_takeover();
    },
};

/// How long removing a member waits for the array's requests in flight to end.
const REMOVE_DRAIN_MS: u32 = 30_000;

/// Discards become one member I/O per chunk and copy, so bound how many chunks one request
/// may span.
const MAX_DISCARD_CHUNKS: u32 = 64;

fn max_discard_sectors(geometry: &Geometry) -> u32 {
    // RAID 5/6 would have to keep the parity of discarded ranges consistent: not offered.
    if geometry.level().has_parity() {
        return 0;
    }
    match geometry.chunk_sectors() {
        // Not striped: one member I/O per copy whatever the size.
        0 => u32::MAX,
        chunk => chunk.saturating_mul(MAX_DISCARD_CHUNKS),
    }
}

/// A unique cookie that claims member devices exclusively for one array: the block layer lets
/// the same holder open a device twice, so every array needs its own.
pub(crate) struct Holder(KBox<u64>);

impl Holder {
    pub(crate) fn new() -> Result<Self> {
        Ok(Self(KBox::new(0u64, GFP_KERNEL)?))
    }

    /// The cookie to pass to [`BlockDeviceFile::open_exclusive`].
    pub(crate) fn cookie(&self) -> *mut c_void {
        core::ptr::from_ref::<u64>(&self.0).cast_mut().cast::<c_void>()
    }
}

/// A partial parity log key (`ppl.rs`, `LogId`): random bytes, drawn at every start.
fn new_log_key() -> [u8; 16] {
    let mut key = [0u8; 16];
    random_bytes(&mut key);
    key
}

pub(crate) fn random_uuid() -> [u8; 16] {
    let mut uuid = [0u8; 16];
    random_bytes(&mut uuid);
    // RFC 9562 version 4, variant 10.
    uuid[6] = (uuid[6] & 0x0f) | 0x40;
    uuid[8] = (uuid[8] & 0x3f) | 0x80;
    uuid
}

impl WorkHandler for Array {
    fn run(&self) {
        if self.running.load(Ordering::SeqCst) {
            self.announce_pending();
            self.settle_reshape();
            self.take_over();
        }
    }
}

/// The slot table of a fresh array: member `i` active in role `i`.
fn fresh_slots(members: u32) -> [Slot; MAX_SLOTS] {
    let mut slots = [Slot::Empty; MAX_SLOTS];
    for (role, slot) in (0..members).zip(slots.iter_mut()) {
        *slot = Slot::Active { role: role as u8 };
    }
    slots
}

/// Refuses a member set that holds one device twice (two numbers can name one device, say a
/// partition and an alias) or a zoned device (its writes must follow zone rules graid does not
/// keep). `Err` with the index of the refused member.
pub(crate) fn check_members(files: &[&BlockDeviceFile]) -> Result<(), (usize, Error)> {
    for (i, file) in files.iter().enumerate() {
        if files.iter().take(i).any(|earlier| earlier.same_device(file)) {
            return Err((i, EINVAL));
        }
        if file.is_zoned() {
            return Err((i, crate::errno::emediumtype()));
        }
    }
    Ok(())
}

impl Array {
    /// Opens the members exclusively, zeroes them if asked, and starts the array (its first
    /// superblocks are written just before `/dev/graid<index>` appears). Nothing is written
    /// unless every member opened, fits and the geometry is valid.
    // Not inlined, here and below: keeps each ioctl's stack frame small (build/frame-check.sh).
    #[inline(never)]
    pub(crate) fn create(index: u32, params: CreateParams) -> Result<Pin<KBox<Array>>> {
        let holder = Holder::new()?;
        let mut members = KVec::with_capacity(params.members.len(), GFP_KERNEL)?;
        for (slot, &(major, minor)) in (0u32..).zip(params.members.iter()) {
            let file = BlockDeviceFile::open_exclusive(major, minor, holder.cookie())?;
            members.push(Member::new(file, random_uuid(), slot), GFP_KERNEL)?;
        }
        let mut files = KVec::with_capacity(members.len(), GFP_KERNEL)?;
        for member in members.iter() {
            files.push(&member.file, GFP_KERNEL)?;
        }
        check_members(&files).map_err(|(_, e)| e)?;
        drop(files);
        let smallest = members.iter().map(|m| m.file.nr_sectors()).min().unwrap_or(0);
        let (journal, data_offset) = new_array_layout(smallest, params.ppl);
        let data_sectors = smallest
            .checked_sub(data_offset)
            .filter(|&s| s >= MIN_MEMBER_DATA_SECTORS)
            .ok_or(ENOSPC)?;
        let nr = members.len() as u32;
        let geometry = Geometry::new(params.level, nr, params.chunk_sectors, data_sectors)
            .inspect_err(|e| pr_err!("graid: cannot create {}: {:?}\n", params.name.as_str(), e))
            .map_err(|_| EINVAL)?;
        let walk = geometry.resync_sectors();
        let (bitmap, bitmap_region) = match params.bitmap {
            _ if params.level == Level::Raid0 => (Area::NONE, 0),
            BitmapChoice::None => (Area::NONE, 0),
            BitmapChoice::Default => Regions::fitting(walk, DEFAULT_BITMAP_AREA.sectors)
                .map_or((Area::NONE, 0), |r| (DEFAULT_BITMAP_AREA, r.region_sectors())),
            BitmapChoice::Region(sectors) => (DEFAULT_BITMAP_AREA, sectors),
        };
        let superblock = Superblock {
            features_compat: 0,
            features_incompat: 0,
            array_uuid: params.uuid,
            array_name: params.name,
            homehost: params.homehost,
            created: params.created,
            // The first update writes event 1.
            events: 0,
            clean: false,
            resync_offset: RECOVERY_COMPLETE,
            level: params.level,
            chunk_sectors: params.chunk_sectors,
            members: nr,
            member_uuid: members.first().map(|m| m.uuid).unwrap_or([0; 16]),
            this_slot: 0,
            data_offset,
            data_size: geometry.member_data_sectors(),
            recovery_offset: RECOVERY_COMPLETE,
            bitmap,
            bitmap_region,
            bitmap_events: 0,
            journal,
            ppl: params.ppl,
            log_key: if params.ppl { new_log_key() } else { [0; 16] },
            slots: fresh_slots(nr),
            reshape: None,
        };
        if let Err(e) = superblock.validate() {
            pr_err!("graid: cannot create {}: {:?}\n", superblock.array_name.as_str(), e);
            return Err(EINVAL);
        }
        if params.sync == InitialSync::Zeroed {
            for (i, member) in members.iter().enumerate() {
                member
                    .file
                    .zero_out_fast(superblock.data_offset, superblock.data_size)
                    .inspect_err(|e| pr_err!("graid: cannot zero member {}: {:?}\n", i, e))?;
            }
        }
        let in_sync = params.level == Level::Raid0 || params.sync != InitialSync::Unknown;
        let mut present = KVec::with_capacity(members.len(), GFP_KERNEL)?;
        for member in members.into_iter() {
            present.push(Some(member), GFP_KERNEL)?;
        }
        let resync_from = (!in_sync).then_some(0);
        let bitmap = Bitmap::new(&superblock)?;
        if let Some(bitmap) = &bitmap {
            // Not in sync anywhere yet: every bit set, on disk before the array appears.
            if !in_sync {
                bitmap.mark_all(resync_from);
            }
        }
        let start = Start {
            resync_from,
            bitmap,
            replay: None,
            reshape: None,
        };
        Self::start(index, superblock, geometry, present, KVec::new(), holder, start)
    }

    /// Starts an array from members carrying its superblocks, in role order (checked by the
    /// caller), `freshest` the newest of them; `None` for a role without a member (a degraded
    /// start the caller allowed: the data is all there without them).
    #[inline(never)]
    pub(crate) fn assemble(
        index: u32,
        members: KVec<Option<Member>>,
        spares: KVec<SpareDevice>,
        freshest: Superblock,
        holder: Holder,
    ) -> Result<Pin<KBox<Array>>> {
        let geometry = freshest.geometry().map_err(|_| crate::errno::euclean())?;
        let name = freshest.array_name.as_str();
        // After a crash while writing, the copies may differ anywhere.
        let resync_from = if freshest.level == Level::Raid0 {
            None
        } else if !freshest.clean {
            pr_warn!("graid: {} was not stopped cleanly: resynchronising it\n", name);
            Some(0)
        } else if freshest.resync_offset != RECOVERY_COMPLETE {
            pr_info!("graid: {}: its resync goes on from sector {}\n", name, freshest.resync_offset);
            Some(freshest.resync_offset)
        } else {
            None
        };
        let bitmap = Bitmap::new(&freshest)?;
        if let Some(bitmap) = &bitmap {
            bitmap.load(&members, resync_from)?;
            // Only a resync makes the bits news: after a clean stop they are regions written
            // last (cleared once idle) or while a member was away (kept for its re-add), which
            // `detail` and sysfs show.
            if resync_from.is_some() {
                pr_info!(
                    "graid: {}: the resync covers {} of {} bitmap regions (written to before it stopped)\n",
                    name,
                    bitmap.dirty_regions(),
                    bitmap.regions().count()
                );
            }
        }
        // A partial parity log is replayed after a crash, before anything reads the array,
        // with the key its entries carry; this life's entries get a new one. Not in the middle
        // of a reshape: it logged nothing, and the resync after it covers the crash.
        let replay = freshest.log_replay_due().then_some(freshest.log_key);
        let mut freshest = freshest;
        if freshest.ppl {
            freshest.log_key = new_log_key();
        }
        // A reshape in progress goes on from the position recorded (the caller refused one
        // that cannot be planned).
        let reshape = ReshapePlan::recorded(&freshest)
            .transpose()
            .map_err(|_| crate::errno::eopnotsupp())?;
        if let Some((plan, position)) = reshape {
            pr_info!(
                "graid: {}: its reshape goes on from sector {} of {}\n",
                name,
                position,
                plan.content()
            );
        }
        let start = Start {
            resync_from,
            bitmap,
            replay,
            reshape,
        };
        Self::start(index, freshest, geometry, members, spares, holder, start)
    }

    /// Sets up the engine, replays the partial parity log if `replay` (the key its entries
    /// carry), writes every member's
    /// bitmap, log head and superblock (clean, events + 1) and brings up the disk; a resync
    /// from `resync_from` (array or member sectors, see `Geometry::resync_sectors`) if the
    /// copies are not in sync.
    fn start(
        index: u32,
        superblock: Superblock,
        geometry: Geometry,
        members: KVec<Option<Member>>,
        spares: KVec<SpareDevice>,
        holder: Holder,
        start: Start,
    ) -> Result<Pin<KBox<Array>>> {
        let Start {
            resync_from,
            bitmap,
            replay,
            reshape,
        } = start;
        let in_sync = resync_from.is_none();
        // While a reshape runs: the size it moves, requests inside its units, the new
        // geometry's preferences.
        let (capacity, boundary, shape) = match &reshape {
            Some((plan, _)) => (plan.content(), plan.boundary_sectors(), plan.new_geometry()),
            None => (geometry.array_sectors(), geometry.boundary_sectors(), geometry),
        };
        let mut stack = KVec::with_capacity(members.len(), GFP_KERNEL)?;
        for m in members.iter().flatten() {
            stack.push((m.file.bdev(), superblock.data_offset), GFP_KERNEL)?;
        }
        let mut spare_bdevs = KVec::with_capacity(spares.len(), GFP_KERNEL)?;
        for spare in spares.iter() {
            spare_bdevs.push(spare.file.bdev(), GFP_KERNEL)?;
        }
        let config = DiskConfig {
            index,
            capacity_sectors: capacity,
            chunk_sectors: boundary,
            io_min: shape.io_min_bytes(),
            io_opt: shape.io_opt_bytes(),
            max_discard_sectors: max_discard_sectors(&geometry),
            // RAID 5/6 copies a request into stripe buffers: a whole stripe in one request
            // (as md's raid5 allows) makes a full-stripe write of sequential writes that the
            // block layer merged, instead of partial ones that must read.
            copy_max_sectors: if geometry.level().has_parity() {
                boundary
            } else {
                0
            },
            members: &stack,
        };
        let first_write = |io: &ArrayIo| {
            if let Some((plan, position)) = &reshape {
                // Before any request and the first superblock: the new geometry's members,
                // and buffers for them.
                io.engine.resume_reshape(plan, *position);
                let new = plan.new_geometry();
                io.replace_reserve(io.new_reserve(&new)?);
                drop(io.swap_rebuild_buffer(ArrayIo::new_rebuild_buffer(&new)?));
            }
            if let Some(sector) = resync_from {
                io.engine.set_resync_start(sector);
            }
            io.engine.set_safe_mode_delay(crate::safe_mode_delay_ms());
            io.engine.set_bitmap_clean_interval(crate::bitmap_clean_ms());
            // The parity made whole again from the log after a crash, then every head at the
            // next epoch.
            io.start_log(replay)?;
            // The bits as read (or all set), whole again on every member, before the
            // superblock that says the array has them.
            io.engine.write_whole_bitmap(io, MemberSet::first(MAX_MEMBERS));
            io.engine.write_superblocks(io).map_err(|_| {
                pr_err!("graid: {}: no member took the superblock\n", superblock.array_name.as_str());
                EIO
            })
        };
        let io = ArrayIo::new(&superblock, geometry, members, spares, in_sync, bitmap, HOOKS);
        let array = Self::pin_new(index, &config, io, first_write, holder)?;
        for bdev in spare_bdevs {
            array.disk.link_member(bdev);
        }
        // An interrupted rebuild goes on from its checkpoint; a member missing at assembly
        // (or failed by the first superblock write) takes a spare.
        array.running.store(true, Ordering::SeqCst);
        array.add_sysfs();
        let io = array.io();
        io.engine.resume_rebuild(io);
        if crate::auto_resync() {
            io.engine.start_resync(io);
        }
        if io.engine.takeover().is_some() {
            array.kick_takeover();
        }
        Ok(array)
    }

    /// Allocates the array and brings up its disk, `first_write` run before the disk is
    /// added. Out of line: with the distro's older rustc (1.85) the nested initializers in
    /// [`Self::start`]'s frame passed the kernel's frame limit.
    #[inline(never)]
    fn pin_new(
        index: u32,
        config: &DiskConfig<'_>,
        io: impl PinInit<ArrayIo, Error>,
        first_write: impl FnOnce(&ArrayIo) -> Result,
        holder: Holder,
    ) -> Result<Pin<KBox<Array>>> {
        KBox::pin_init(
            try_pin_init!(&this in Array {
                index,
                members_lock <- new_mutex!(()),
                running: AtomicBool::new(false),
                to_announce: [const { AtomicU32::new(0) }; ANNOUNCED.len()],
                scrub_to_announce: AtomicU32::new(0),
                reshape_ended: AtomicBool::new(false),
                sysfs <- new_mutex!(None),
                // SAFETY: the worker is a field of the value `this` points at.
                takeover <- unsafe { Worker::new(this.as_ptr(), c"graid_takeover", kernel::static_lock_class!()) },
                disk <- Disk::new(config, io, first_write),
                _holder: holder,
            }),
            GFP_KERNEL,
        )
    }

    /// The array whose request handler `io` is.
    ///
    /// # Safety
    ///
    /// `io` must be the request handler of an array's disk (every `ArrayIo` is: only
    /// [`Array::start`] makes one).
    unsafe fn of_io(io: &ArrayIo) -> &Array {
        // SAFETY: `io` is the ops of a `Disk<ArrayIo>` (the caller's contract), which is the
        // `disk` field of an `Array`.
        unsafe {
            let disk = Disk::of_ops(io);
            &*kernel::container_of!(core::ptr::from_ref(disk), Array, disk)
        }
    }

    /// Adds `/sys/block/graidN/graid/`; without it the array runs on (as md's does).
    fn add_sysfs(self: &Pin<KBox<Self>>) {
        let members = self.io().engine.geometry().members();
        // SAFETY: the array is pinned in its box, and its drop removes the directories before
        // the disk.
        match unsafe { ArrayDirs::new(self, members) } {
            Ok(dirs) => *self.sysfs.lock() = Some(dirs),
            Err(e) => pr_warn!("graid: graid{}: no sysfs directory: {:?}\n", self.index, e),
        }
    }

    /// The array's disk's kobject (`/sys/block/graidN`).
    pub(crate) fn disk_kobject(&self) -> *mut kernel::bindings::kobject {
        self.disk.kobject()
    }

    /// Makes [`Self::take_over`] run soon, if the array is running. Any context.
    fn kick_takeover(&self) {
        if self.running.load(Ordering::SeqCst) {
            self.takeover.kick();
        }
    }

    /// Notes what the engine's worker reported about `member`, for a uevent: its failure once
    /// recorded, the end of its rebuild. Any context.
    fn note_event(&self, member: u32, event: MemberEvent) {
        let Some(which) = ANNOUNCED.iter().position(|&(e, _)| e == event) else {
            return;
        };
        if let (Some(bits), Some(bit)) = (self.to_announce.get(which), 1u32.checked_shl(member)) {
            bits.fetch_or(bit, Ordering::SeqCst);
            self.kick_takeover();
        }
    }

    fn note_scrub_end(&self, mode: ScrubMode, stopped: bool) {
        let code = match mode {
            ScrubMode::Check => 0,
            ScrubMode::Repair => 1,
            ScrubMode::Resync => 2,
        };
        let stopped = if stopped { SCRUB_STOPPED } else { 0 };
        self.scrub_to_announce
            .store(SCRUB_ENDED | stopped | code, Ordering::SeqCst);
        self.kick_takeover();
    }

    /// Sends the uevents noted by [`Self::note_event`] and [`Self::note_scrub_end`].
    fn announce_pending(&self) {
        for (bits, &(_, change)) in self.to_announce.iter().zip(&ANNOUNCED) {
            let members = bits.swap(0, Ordering::SeqCst);
            for member in (0..32u32).filter(|m| members & (1 << m) != 0) {
                self.announce(Some((change, member)));
            }
        }
        let ended = self.scrub_to_announce.swap(0, Ordering::SeqCst);
        if ended & SCRUB_ENDED != 0 {
            let mode = match ended & 0xff {
                0 => ScrubMode::Check,
                1 => ScrubMode::Repair,
                _ => ScrubMode::Resync,
            };
            let io = self.io();
            let mismatches = io.engine.scrub_progress().mismatches;
            let sb = io.engine.superblock();
            let ending = if ended & SCRUB_STOPPED != 0 { "stopped" } else { "finished" };
            let result = noio_scope(|| {
                uevent::announce_scrub(&self.disk, sb, scrub_name(mode), ending, mismatches)
            });
            if let Err(e) = result {
                pr_warn!("graid: graid{}: udev announcement failed: {:?}\n", self.index, e);
            }
        }
    }

    /// Moves spares into failed members' places while the engine has both. A failed member's
    /// device is released first, as `graidctl remove` does.
    fn take_over(&self) {
        let _members = self.members_lock.lock();
        let io = self.io();
        if let Err(e) = self.settle_replacement() {
            pr_err!(
                "graid: {}: the replacement's device could not be moved: {:?}\n",
                io.engine.superblock().array_name.as_str(),
                e
            );
        }
        while self.running.load(Ordering::SeqCst) {
            let Some((role, slot, uuid)) = io.engine.takeover() else {
                break;
            };
            if let Err(e) = self.move_spare_in(role, slot, uuid) {
                pr_err!(
                    "graid: {}: the spare cannot take member {}'s place: {:?}\n",
                    io.engine.superblock().array_name.as_str(),
                    role,
                    e
                );
                break;
            }
        }
    }

    /// Role `role` (faulty) drops its device and takes the spare in slot-table entry `slot`,
    /// which is then rebuilt.
    #[inline(never)]
    fn move_spare_in(&self, role: u32, slot: u32, uuid: [u8; 16]) -> Result {
        let io = self.io();
        // The failed device is used by nothing once the queue is drained and the worker idle;
        // nor is the spare's (the worker writes its superblock).
        let (old, attached) = self.with_members_idle(|| {
            // SAFETY: inside `with_members_idle`.
            let old = unsafe { self.release_role_device(role) };
            let attached = match self.take_spare_device(slot) {
                Some(spare) => io.files.attach(role, spare.file),
                None => Err(ENODEV),
            };
            (old, attached)
        })?;
        self.close_released(old);
        if let Err(e) = attached {
            // The spare's device is gone: the engine forgets it too.
            io.engine.request_spare_removal(io, slot);
            io.wait_worker();
            return Err(e);
        }
        io.engine.request_add(io, role, uuid, slot);
        io.wait_worker();
        io.engine.add_outcome(role, &uuid).map_err(|_| EIO)?;
        pr_info!(
            "graid: {}: a spare took member {}'s place, rebuilding\n",
            io.engine.superblock().array_name.as_str(),
            role
        );
        // What the worker decided before (a replace abandoned, a member failed) is told first.
        self.announce_pending();
        self.announce(Some((MemberChange::SpareActivated, role)));
        Ok(())
    }

    /// Moves a replace's device as the engine's stage says (`engine/replace.rs`): into the
    /// member's place once the copy is complete (the old device is released), out of the array
    /// once it failed, back to the spares once the member failed; then the worker records it.
    /// The caller holds `members_lock`.
    fn settle_replacement(&self) -> Result {
        let io = self.io();
        let engine = &io.engine;
        if !engine
            .replacement()
            .is_some_and(|r| r.stage != ReplaceStage::Copying)
        {
            return Ok(());
        }
        let index = engine.replacement_index();
        let released = self.with_members_idle(|| {
            // Read again with nothing in flight: the stage cannot change now.
            let r = engine.replacement()?;
            let released = match r.stage {
                ReplaceStage::Idle | ReplaceStage::Copying => return None,
                ReplaceStage::Done => {
                    io.files.get(index)?;
                    // SAFETY: inside `with_members_idle`, `members_lock` held.
                    let old = unsafe { self.release_role_device(r.role) };
                    // SAFETY: as above.
                    let new = unsafe { io.files.detach(index) }?;
                    // The role's place was just emptied: this attaches.
                    if io.files.attach(r.role, KBox::into_inner(new)).is_err() {
                        return None;
                    }
                    old
                }
                // SAFETY: as above.
                ReplaceStage::Failed => unsafe { io.files.detach(index) },
                ReplaceStage::Abandoned => {
                    // SAFETY: as above.
                    let file = unsafe { io.files.detach(index) }?;
                    let spare = SpareDevice {
                        slot: r.slot,
                        uuid: r.uuid,
                        file: KBox::into_inner(file),
                    };
                    if Self::keep_spare(io, spare).is_err() {
                        // No memory for the list: the spare is lost to the array (the device is
                        // closed), which the engine's takeover notices as a missing spare.
                        pr_err!("graid: no memory to keep the replacement as a spare\n");
                    }
                    None
                }
            };
            engine.request_replace_end(io);
            io.wait_worker();
            Some((r, released))
        })?;
        let Some((r, old)) = released else {
            return Ok(());
        };
        self.close_released(old);
        if r.stage == ReplaceStage::Done {
            pr_info!(
                "graid: {}: the replacement took member {}'s place; the old device is released\n",
                engine.superblock().array_name.as_str(),
                r.role
            );
        }
        Ok(())
    }

    /// REPLACE: copies the active member whose device is `(major, minor)` to the device
    /// `with` (a spare of the array, or made one first; `(0, 0)`: any spare) in the background;
    /// the replacement takes the member's place once it holds everything. Returns the role.
    /// `ENXIO`: no member; the rest as [`uapi::GRAID_MEMBER_OP_REPLACE`] says.
    pub(crate) fn replace_member(&self, major: u32, minor: u32, with: (u32, u32)) -> Result<u32> {
        let io = self.io();
        let role = io.files.role_of(major, minor).ok_or(ENXIO)?;
        let allowed = || match io.engine.replace_allowed(role) {
            Ok(()) => Ok(()),
            Err(ReplaceError::Unsupported) => Err(crate::errno::eopnotsupp()),
            Err(ReplaceError::TooManyMembers) => Err(E2BIG),
            Err(ReplaceError::NoMember) => Err(ENXIO),
            Err(_) => Err(EBUSY),
        };
        allowed()?;
        // A device that is no spare yet becomes one, as ADD does (and stays one if the
        // replace cannot start).
        let slot = match with {
            (0, 0) => {
                let spares = io.spares.lock();
                let first = spares.first().map(|s| s.slot);
                drop(spares);
                first.ok_or(ENOENT)?
            }
            (wmajor, wminor) => match self.spare_slot_of(wmajor, wminor) {
                Some(slot) => slot,
                None => {
                    self.add_member(wmajor, wminor)?;
                    self.spare_slot_of(wmajor, wminor).ok_or(EBUSY)?
                }
            },
        };
        let _members = self.members_lock.lock();
        allowed()?;
        let index = io.engine.replacement_index();
        if io.files.get(index).is_some() {
            // A replacement's device not released yet.
            return Err(EBUSY);
        }
        let spare = self.take_spare_device(slot).ok_or(ENOENT)?;
        // Nothing uses the replacement's place until the engine starts the replace.
        io.files.attach(index, spare.file)?;
        io.engine.request_replace(io, role, slot);
        io.wait_worker();
        if let Err(e) = io.engine.replace_outcome(role, slot) {
            // Back to the spares.
            let file = self.with_members_idle(|| {
                // SAFETY: inside `with_members_idle`, `members_lock` held.
                unsafe { io.files.detach(index) }
            })?;
            if let Some(file) = file {
                let spare = SpareDevice {
                    slot,
                    uuid: spare.uuid,
                    file: KBox::into_inner(file),
                };
                Self::keep_spare(io, spare)?;
            }
            return Err(match e {
                ReplaceError::NoSpare => ENOENT,
                _ => EBUSY,
            });
        }
        self.announce(Some((MemberChange::ReplaceStarted, role)));
        Ok(role)
    }

    /// Takes role `role`'s device out of the array and returns it, for
    /// [`Self::close_released`] once the queue is live again.
    ///
    /// # Safety
    ///
    /// Called inside [`Self::with_members_idle`], with `members_lock` held (only member
    /// operations, which hold it, would wake the worker).
    unsafe fn release_role_device(&self, role: u32) -> Option<KBox<BlockDeviceFile>> {
        // SAFETY: the queue is frozen and the worker idle (the caller's contract).
        unsafe { self.io().files.detach(role) }
    }

    /// Unlinks a device taken out of the array as a slave and closes it. Never inside the
    /// freeze: the holder mutex is taken elsewhere around allocations that may reclaim, and
    /// reclaim may write back through this array (lockdep: q_usage_counter -> blk_holder_mutex).
    fn close_released(&self, file: Option<KBox<BlockDeviceFile>>) {
        if let Some(file) = file {
            self.disk.unlink_member(file.bdev());
        }
    }

    /// Runs `f` while no request is in flight (hence no member I/O or stripe step) and the
    /// worker is idle with the rebuild held: what `f` takes out of the array is used by
    /// nothing. `EBUSY` (nothing run) if requests did not drain in time.
    fn with_members_idle<R>(&self, f: impl FnOnce() -> R) -> Result<R> {
        let io = self.io();
        io.engine.hold_rebuild();
        let frozen = match self.disk.freeze(REMOVE_DRAIN_MS) {
            Ok(frozen) => frozen,
            Err(e) => {
                io.engine.release_rebuild(io);
                return Err(e);
            }
        };
        frozen.ops().quiesce_worker();
        // No allocation in here may reclaim through I/O: it could wait on this frozen queue
        // (md's mddev_suspend does the same).
        let result = noio_scope(f);
        drop(frozen);
        io.engine.release_rebuild(io);
        Ok(result)
    }

    /// Announces the array's name, UUID and level to udev (`tools/udev/`), and with `change`
    /// what happened to which member.
    pub(crate) fn announce(&self, change: Option<(MemberChange, u32)>) {
        let sb = self.io().engine.superblock();
        if let Err(e) = noio_scope(|| uevent::announce(&self.disk, sb, change)) {
            pr_warn!("graid: graid{}: udev announcement failed: {:?}\n", self.index, e);
        }
    }

    /// Tells udev a restripe started, or ended (the name and level with it, as [`Self::announce`]).
    pub(crate) fn announce_reshape(&self, ended: bool) {
        let sb = self.io().engine.superblock();
        if let Err(e) = noio_scope(|| uevent::announce_reshape(&self.disk, sb, ended)) {
            pr_warn!("graid: graid{}: udev announcement failed: {:?}
", self.index, e);
        }
    }

    /// Tells udev that the array started degraded (md's DegradedArray), if it did.
    pub(crate) fn announce_if_degraded(&self) {
        let engine = &self.io().engine;
        if engine.state() != ArrayState::Degraded {
            return;
        }
        if let Err(e) = noio_scope(|| uevent::announce_degraded(&self.disk, engine.superblock())) {
            pr_warn!("graid: graid{}: udev announcement failed: {:?}\n", self.index, e);
        }
    }

    pub(crate) fn io(&self) -> &ArrayIo {
        self.disk.ops()
    }

    /// Refuses opens from now on, unless the disk is open (`EBUSY`): the first step of a stop.
    pub(crate) fn begin_stop(&self) -> Result {
        self.disk.begin_close()
    }

    /// FAIL: stops using the member whose device is `(major, minor)`, and records that in the
    /// other members' superblocks before returning its role. `ENXIO`: no member of this array;
    /// `EBUSY`: it holds the last copy of some data (nothing changed); `EIO`: no superblock
    /// took the update. Failing a failed member changes nothing.
    pub(crate) fn fail_member(&self, major: u32, minor: u32) -> Result<u32> {
        let _members = self.members_lock.lock();
        let io = self.io();
        let role = io.files.role_of(major, minor).ok_or(ENXIO)?;
        io.engine.request_fail(io, role);
        io.wait_worker();
        // The uevent goes out from the takeover work item, as for a failure the worker decided.
        match io.engine.fail_outcome(role) {
            Ok(()) => Ok(role),
            Err(FailError::LastCopy) => Err(EBUSY),
            Err(FailError::NoMember) => Err(ENXIO),
            Err(FailError::NotRecorded) => Err(EIO),
        }
    }

    /// ADD: puts the device `(major, minor)` in the place of a removed member, writes its
    /// superblock and starts its rebuild; returns its role. With no removed member it becomes
    /// a spare ([`uapi::GRAID_ROLE_SPARE`]), which takes a failed member's place at once if
    /// one waits (a RAID 0's waits for a restripe). `EEXIST`: already a member or spare; `ENOSPC`: too
    /// small, or no room for another spare; `EXDEV`: it carries another array's superblock;
    /// `EIO`: no superblock took the update. Nothing changes on a refusal.
    pub(crate) fn add_member(&self, major: u32, minor: u32) -> Result<u32> {
        let _members = self.members_lock.lock();
        let io = self.io();
        let engine = &io.engine;
        if io.files.role_of(major, minor).is_some() || self.spare_slot_of(major, minor).is_some() {
            return Err(EEXIST);
        }
        // A failed member still holding its device is not taken directly: the device becomes
        // a spare, which takes its place once that device is released.
        let role = match engine.add_target() {
            Ok(role) if io.files.get(role).is_none() => Some(role),
            Ok(_) | Err(AddError::RoleTaken) => None,
            Err(AddError::Unsupported) => return Err(crate::errno::eopnotsupp()),
            Err(_) => return Err(EBUSY),
        };
        if role.is_none() && engine.spares().is_full() {
            return Err(ENOSPC);
        }
        let slot = engine.free_slot().ok_or(ENOSPC)?;
        let file = BlockDeviceFile::open_exclusive(major, minor, self._holder.cookie())?;
        let sb = engine.superblock();
        // Both data areas while a reshape runs.
        let needed = engine.data_end();
        if file.nr_sectors() < needed {
            return Err(ENOSPC);
        }
        let old = read_superblock(&file).ok();
        if old.is_some_and(|other| other.array_uuid != sb.array_uuid) {
            return Err(EXDEV);
        }
        let uuid = random_uuid();
        let Some(role) = role else {
            return self.add_spare(SpareDevice { slot, uuid, file });
        };
        let bdev = file.bdev();
        io.files.attach(role, file)?;
        self.disk.link_member(bdev);
        // The device this member had, back before the bitmap lost track of it: only what
        // was written while it was away is rebuilt (md's bitmap-based re-add).
        if old.is_some_and(|old| engine.bitmap_covers(&old, role)) {
            pr_info!(
                "graid: {}: the device of role {} is back: rebuilding what changed while it was away\n",
                sb.array_name.as_str(),
                role
            );
            engine.request_re_add(io, role, uuid, slot);
        } else {
            engine.request_add(io, role, uuid, slot);
        }
        io.wait_worker();
        match engine.add_outcome(role, &uuid) {
            Ok(()) => {
                self.announce(Some((MemberChange::Added, role)));
                Ok(role)
            }
            Err(AddError::NotRecorded) => Err(EIO),
            Err(_) => Err(EBUSY),
        }
    }

    /// The spare (its device), the caller holding `members_lock`.
    #[inline(never)]
    fn add_spare(&self, spare: SpareDevice) -> Result<u32> {
        let io = self.io();
        let (slot, uuid, bdev) = (spare.slot, spare.uuid, spare.file.bdev());
        Self::keep_spare(io, spare)?;
        io.engine.request_spare(io, uuid, slot);
        io.wait_worker();
        if let Err(e) = io.engine.spare_added(slot) {
            if e != AddError::NotRecorded {
                // Not in the engine's table: closed again, nothing changed.
                drop(self.take_spare_device(slot));
                return Err(EBUSY);
            }
            return Err(EIO);
        }
        self.disk.link_member(bdev);
        self.announce(Some((MemberChange::SpareAdded, uapi::GRAID_ROLE_SPARE)));
        Ok(uapi::GRAID_ROLE_SPARE)
    }

    /// The slot-table entry of the spare whose device is `(major, minor)`.
    fn spare_slot_of(&self, major: u32, minor: u32) -> Option<u32> {
        let spares = self.io().spares.lock();
        let found = spares.iter().find(|s| s.file.dev() == (major, minor));
        found.map(|s| s.slot)
    }

    /// Puts `spare` on the spares list (closed again if the list has no room). NOIO: the
    /// engine's worker takes this lock, and a member operation may wait for the worker with the
    /// queue frozen, where reclaim that writes back through the array would wait too (lockdep,
    /// 24-replace on the debug kernel).
    fn keep_spare(io: &ArrayIo, spare: SpareDevice) -> Result {
        noio_scope(|| io.spares.lock().push(spare, GFP_KERNEL))?;
        Ok(())
    }

    /// Takes spare `slot`'s device out of the list.
    fn take_spare_device(&self, slot: u32) -> Option<SpareDevice> {
        let mut spares = self.io().spares.lock();
        let at = spares.iter().position(|s| s.slot == slot)?;
        spares.remove(at).ok()
    }

    /// REMOVE: releases the failed member whose device is `(major, minor)`; its role is then
    /// missing. Or releases a spare. `ENXIO`: no member or spare of this array; `EBUSY`: the
    /// member is in use (or its failure not yet recorded), or requests did not drain in time
    /// (nothing changed).
    pub(crate) fn remove_member(&self, major: u32, minor: u32) -> Result<u32> {
        let _members = self.members_lock.lock();
        let io = self.io();
        if let Some(slot) = self.spare_slot_of(major, minor) {
            return self.remove_spare(slot);
        }
        let role = io.files.role_of(major, minor).ok_or(ENXIO)?;
        let health = io.engine.members().get(role as usize).map(|m| m.health());
        if health != Some(Health::Faulty) {
            return Err(EBUSY);
        }
        // SAFETY: inside `with_members_idle`.
        let file = self.with_members_idle(|| unsafe { self.release_role_device(role) })?;
        self.close_released(file);
        self.announce(Some((MemberChange::Removed, role)));
        Ok(role)
    }

    /// Releases spare `slot`: out of the engine's table (its slot-table entry retired, so the
    /// device is refused if it comes back) before its device is closed.
    #[inline(never)]
    fn remove_spare(&self, slot: u32) -> Result<u32> {
        let io = self.io();
        io.engine.request_spare_removal(io, slot);
        io.wait_worker();
        if io.engine.spares().holds(slot) {
            return Err(EIO);
        }
        let spare = self.take_spare_device(slot).ok_or(ENXIO)?;
        self.disk.unlink_member(spare.file.bdev());
        drop(spare);
        self.announce(Some((MemberChange::SpareRemoved, uapi::GRAID_ROLE_SPARE)));
        Ok(uapi::GRAID_ROLE_SPARE)
    }

    /// RESIZE: each member's data area takes `req.member_data_sectors` (0: all the room the
    /// smallest member or spare has past the data offset), then the disk's capacity follows;
    /// `req` gets the sizes now and the room (`GRAID_RESIZE_QUERY`: the sizes it would take,
    /// nothing changed). `ENOSPC`: the members (or a spare) have no such room; `EBUSY`: the
    /// array is not optimal, a rebuild, replace, check, repair, resync or heal runs, or
    /// requests did not drain in time; `EOPNOTSUPP`: smaller than now without
    /// `GRAID_RESIZE_SHRINK`; `EINVAL`: not a size this array can have; `EIO`: the array broke
    /// writing its superblocks.
    pub(crate) fn resize(&self, req: &mut uapi::GraidResize) -> Result {
        // Member operations and this take turns: the devices sized here stay the members.
        let _members = self.members_lock.lock();
        let io = self.io();
        let room = self.member_room();
        req.room_sectors = room;
        let want = match req.member_data_sectors {
            0 => room,
            n => n,
        };
        let shrink = req.flags & uapi::GRAID_RESIZE_SHRINK != 0;
        // Refused before the freeze, so a refusal (or nothing to do) costs the I/O nothing.
        let mut sized = io
            .engine
            .resize_allowed(want, room, shrink)
            .map_err(resize_errno)?;
        if req.flags & uapi::GRAID_RESIZE_QUERY == 0 && sized != io.engine.geometry() {
            let was = io.engine.geometry().array_sectors();
            sized = self
                .with_members_idle(|| io.engine.resize(io, want, room, shrink))?
                .map_err(resize_errno)?;
            // Not while frozen: the uevent takes uevent_sock_mutex, under which others
            // allocate with reclaim that may wait on this queue (lockdep). A request past a
            // shrink's new end meanwhile fails the engine's own check.
            self.disk.set_capacity(sized.array_sectors());
            pr_info!(
                "graid: graid{}: resized from {} to {} sectors ({} per member)\n",
                self.index,
                was,
                sized.array_sectors(),
                sized.member_data_sectors()
            );
        }
        req.member_data_sectors = sized.member_data_sectors();
        req.array_sectors = sized.array_sectors();
        Ok(())
    }

    /// RESHAPE: gives the array `req.raid_devices` members (0: as now), a new chunk or a new
    /// layout. A RAID 1 takes more or fewer copies (`engine/raid_devices.rs`); a RAID 0, 5
    /// or 6 is restriped online (`array_restripe.rs`). `req` gets the shape now (or, being
    /// restriped, the one it goes to) and the reshape's progress (`GRAID_RESHAPE_QUERY`: what
    /// it would be, nothing changed; with nothing asked, the progress alone).
    /// `EOPNOTSUPP`: a level change (not yet), RAID 10, fewer members of a striped level;
    /// `EINVAL`: not a shape this array can have; `ENOSPC`: too few spares for the new
    /// members, or no room to move the data offset; `EBUSY`: a role past a smaller count still
    /// holds a device, a reshape, rebuild, replace, check, repair or resync runs, the array is
    /// degraded, or requests did not drain in time; `EIO`: the array broke writing its
    /// superblocks.
    pub(crate) fn reshape(&self, req: &mut uapi::GraidReshape) -> Result {
        let asked = uapi::GRAID_RESHAPE_LEVEL | uapi::GRAID_RESHAPE_LAYOUT | uapi::GRAID_RESHAPE_CHUNK;
        if req.flags & asked == 0 && req.raid_devices == 0 {
            self.reshape_status(req);
            return Ok(());
        }
        if req.flags & uapi::GRAID_RESHAPE_LEVEL != 0 {
            return Err(crate::errno::eopnotsupp());
        }
        match self.io().engine.geometry().level() {
            Level::Raid1 if req.flags & asked != 0 => Err(EINVAL),
            Level::Raid1 => self.change_copies(req),
            Level::Raid10 => Err(crate::errno::eopnotsupp()),
            _ => self.restripe(req),
        }
    }

    /// RESHAPE for a RAID 1: more or fewer copies.
    fn change_copies(&self, req: &mut uapi::GraidReshape) -> Result {
        // Member operations and this take turns: the roles checked here keep their devices.
        let members = self.members_lock.lock();
        let io = self.io();
        let now = io.engine.geometry();
        let want = match req.raid_devices {
            0 => now.members(),
            n => n,
        };
        // Refused before the freeze, so a refusal costs the I/O nothing; asked again inside it.
        let (new, moves) = io.engine.raid_devices_allowed(want).map_err(raid_devices_errno)?;
        if !devices_fit(&io.files, now.members(), want, &moves) {
            return Err(EBUSY);
        }
        if req.flags & uapi::GRAID_RESHAPE_QUERY == 0 && new != now {
            // What the new count needs, allocated before the freeze.
            io.superblocks.reserve(want as usize)?;
            let buffer = ArrayIo::new_rebuild_buffer(&new)?;
            let (changed, old_buffer) = self.with_members_idle(|| {
                // A member may have failed since the look above (an error of a request the
                // freeze drained): the moves are those of now, with nothing running that could
                // change them again, and the engine takes exactly these.
                let moves = match io.engine.raid_devices_allowed(want) {
                    Ok((_, moves)) if devices_fit(&io.files, now.members(), want, &moves) => moves,
                    Ok(_) => return (Err(EBUSY), None),
                    Err(e) => return (Err(raid_devices_errno(e)), None),
                };
                // SAFETY: inside `with_members_idle`.
                if let Err(e) = unsafe { move_devices(&io.files, &moves) } {
                    return (Err(e), None);
                }
                let changed = io.engine.set_raid_devices(io, want, &moves);
                if matches!(changed, Err(ref e) if *e != RaidDevicesError::Broken) {
                    // Refused before any state moved: the devices go back where the states
                    // say. (Not reached: nothing ran since the moves were asked for.)
                    // SAFETY: inside `with_members_idle`.
                    unsafe { undo_moves(&io.files, &moves, usize::MAX) };
                }
                let changed = changed.map_err(raid_devices_errno);
                // The count may have changed even where the superblocks then failed (EIO: the
                // array broke): the buffer follows the count in use.
                let in_use = io.engine.geometry().members() == want;
                let old = in_use.then(|| io.swap_rebuild_buffer(buffer));
                (changed, old)
            })?;
            drop(old_buffer);
            drop(members);
            // Not under the member lock: a directory's removal waits for its readers. The
            // count now, whichever change came last.
            self.set_member_dirs(io.engine.geometry().members());
            changed?;
            pr_info!(
                "graid: graid{}: {} members, was {}\n",
                self.index,
                want,
                now.members()
            );
            self.announce(None);
        }
        req.raid_devices = new.members();
        Ok(())
    }

    /// The room every member device and spare has past the data offset: the most a resize may
    /// give each member's data area.
    fn member_room(&self) -> u64 {
        let io = self.io();
        let offset = io.engine.data_offset();
        let roles = (0..io.engine.geometry().members()).filter_map(|role| io.files.get(role));
        let members = roles.map(|f| f.nr_sectors().saturating_sub(offset));
        let spares = io.spares.lock();
        let spare_room = spares
            .iter()
            .map(|s| s.file.nr_sectors().saturating_sub(offset));
        Iterator::chain(members, spare_room).min().unwrap_or(0)
    }

    /// SPEED: sets the rebuild's speed limits if asked (`EINVAL` for a floor of 0 or above
    /// the cap), and reports them.
    pub(crate) fn speed(&self, req: &mut uapi::GraidSpeed) -> Result {
        let engine = &self.io().engine;
        if req.flags & uapi::GRAID_SPEED_SET != 0
            && !engine.set_rebuild_speed(req.min_kibs, req.max_kibs)
        {
            return Err(EINVAL);
        }
        (req.min_kibs, req.max_kibs) = engine.rebuild_speed();
        Ok(())
    }

    /// SCRUB: starts a check or repair from the start (a running one starts over), or stops
    /// one (a resync pauses). While a resync is pending, a repair makes it go on. `EOPNOTSUPP`:
    /// RAID 0; `EBUSY`: the array is not optimal (rebuild it first), or a check while a resync
    /// is pending.
    pub(crate) fn scrub(&self, action: u32) -> Result {
        // It kicks the worker: not while a member operation holds the worker idle to take a
        // device out (`with_members_idle`), where a worker run could still reach it.
        let _members = self.members_lock.lock();
        let io = self.io();
        let mode = match action {
            uapi::GRAID_SCRUB_IDLE => {
                io.engine.idle_scrub();
                return Ok(());
            }
            uapi::GRAID_SCRUB_CHECK => ScrubMode::Check,
            uapi::GRAID_SCRUB_REPAIR => ScrubMode::Repair,
            _ => return Err(EINVAL),
        };
        io.engine.start_scrub(io, mode).map_err(|e| match e {
            ScrubError::NotRedundant => crate::errno::eopnotsupp(),
            ScrubError::NotOptimal
            | ScrubError::Replacing
            | ScrubError::ResyncPending
            | ScrubError::Reshaping => EBUSY,
        })
    }

    /// DETAIL's replace fields.
    fn detail_replace(&self, out: &mut uapi::GraidDetail) {
        let io = self.io();
        out.replace_role = uapi::GRAID_ROLE_NONE;
        let Some(r) = io.engine.replacement() else {
            return;
        };
        out.replace_role = r.role;
        out.replace_state = match r.stage {
            ReplaceStage::Idle | ReplaceStage::Copying => uapi::GRAID_REPLACE_COPYING,
            ReplaceStage::Done => uapi::GRAID_REPLACE_SWAPPING,
            ReplaceStage::Failed => uapi::GRAID_REPLACE_FAILED,
            ReplaceStage::Abandoned => uapi::GRAID_REPLACE_ABANDONED,
        };
        out.replace_copied = r.copied;
        let (major, minor) = io.files.dev(io.engine.replacement_index()).unwrap_or((0, 0));
        out.replace_dev = uapi::GraidMember { major, minor };
    }

    /// DETAIL of the array, on the heap (it is too big for the stack), built from zero.
    pub(crate) fn detail_boxed(&self) -> Result<KBox<uapi::GraidDetail>> {
        let out = KBox::<uapi::GraidDetail>::new_uninit(GFP_KERNEL)?;
        // SAFETY: GraidDetail is plain integers (see its FromBytes impl); all-zero is valid.
        let mut out = unsafe {
            let mut out = out;
            out.as_mut_ptr().write_bytes(0, 1);
            out.assume_init()
        };
        out.index = self.index;
        self.detail(&mut out);
        Ok(out)
    }

    /// Fills in DETAIL.
    fn detail(&self, out: &mut uapi::GraidDetail) {
        let io = self.io();
        let engine = &io.engine;
        let sb = engine.superblock();
        // A reshape changes them: the geometry's now (being restriped, the one it goes to).
        let now = engine.geometry();
        out.level = now.level().code();
        out.chunk_sectors = now.chunk_sectors();
        // The list below is read once, and the count is its length: a change of the copies
        // meanwhile shows one count or the other, never a count with a zeroed member.
        let members = engine.members();
        out.nr_members = members.len() as u32;
        out.state = match engine.state() {
            ArrayState::Optimal => uapi::GRAID_ARRAY_OPTIMAL,
            ArrayState::Degraded => uapi::GRAID_ARRAY_DEGRADED,
            ArrayState::Broken => uapi::GRAID_ARRAY_BROKEN,
            ArrayState::Failed => uapi::GRAID_ARRAY_FAILED,
        };
        out.flags = if engine.in_sync() {
            0
        } else {
            uapi::GRAID_DETAIL_RESYNC_PENDING
        };
        if engine.rebuild_stalled() {
            out.flags |= uapi::GRAID_DETAIL_REBUILD_STALLED;
        }
        if engine.is_dirty() {
            out.flags |= uapi::GRAID_DETAIL_DIRTY;
        }
        let scrub = engine.scrub_progress();
        if scrub.stalled {
            out.flags |= uapi::GRAID_DETAIL_SCRUB_STALLED;
        }
        if engine.healing() {
            out.flags |= uapi::GRAID_DETAIL_PARITY_HEAL;
        }
        out.member_data_sectors = engine.geometry().member_data_sectors();
        out.rebuilt_sectors = engine.rebuilt_sectors();
        out.rebuild_skipped_sectors = engine.rebuild_skipped_sectors();
        if engine.has_log() {
            out.flags |= uapi::GRAID_DETAIL_PPL;
            (out.ppl_entries, out.ppl_barriers, out.ppl_wraps) = engine.log().counts();
        }
        if let Some(bitmap) = &self.io().bitmap {
            let regions = bitmap.regions();
            out.bitmap_region_sectors = regions.region_sectors();
            out.bitmap_regions = regions.count();
            out.bitmap_dirty = bitmap.dirty_regions();
        }
        (out.speed_min_kibs, out.speed_max_kibs) = engine.rebuild_speed();
        out.scrub_action = match scrub.mode {
            None => uapi::GRAID_SCRUB_IDLE,
            Some(ScrubMode::Check) => uapi::GRAID_SCRUB_CHECK,
            Some(ScrubMode::Repair) => uapi::GRAID_SCRUB_REPAIR,
            Some(ScrubMode::Resync) => uapi::GRAID_SCRUB_RESYNC,
        };
        (out.scrub_done, out.scrub_total) = (scrub.done, scrub.total);
        out.mismatch_sectors = scrub.mismatches;
        out.scrub_read_errors = scrub.read_errors;
        out.rate_kibs = engine.background_kibs();
        let spares = io.spares.lock();
        for (spare, out) in spares.iter().zip(out.spares.iter_mut()) {
            let (major, minor) = spare.file.dev();
            *out = uapi::GraidMember { major, minor };
        }
        out.nr_spares = spares.len().min(uapi::GRAID_MAX_SPARES) as u32;
        drop(spares);
        self.detail_replace(out);
        out.open_count = self.disk.open_count();
        out.size_sectors = engine.capacity_sectors();
        out.events = engine.events();
        out.uuid = sb.array_uuid;
        out.name = *sb.array_name.as_padded();
        out.homehost = *sb.homehost.as_padded();
        for ((role, member), slot) in (0u32..).zip(members).zip(out.members.iter_mut()) {
            let dev = io.files.dev(role);
            let (major, minor) = dev.unwrap_or((0, 0));
            let s = member.stats();
            *slot = uapi::GraidMemberDetail {
                dev: uapi::GraidMember { major, minor },
                role,
                state: if dev.is_none() {
                    uapi::GRAID_MEMBER_MISSING
                } else if member.is_faulty() {
                    uapi::GRAID_MEMBER_FAULTY
                } else if member.is_recovering() {
                    uapi::GRAID_MEMBER_REBUILDING
                } else {
                    uapi::GRAID_MEMBER_ACTIVE
                },
                recovery_offset: member.recovery_offset(),
                reads: s.reads,
                writes: s.writes,
                read_bytes: s.read_bytes,
                write_bytes: s.write_bytes,
                errors: s.errors,
                corrected: s.corrected,
            };
        }
    }
}

#[pinned_drop]
impl PinnedDrop for Array {
    fn drop(self: Pin<&mut Self>) {
        // A takeover running now ends first; one queued later does nothing.
        self.running.store(false, Ordering::SeqCst);
        self.takeover.cancel();
        // Its files read the array: gone (and their reads and writes done) before it goes.
        let dirs = self.sysfs.lock().take();
        drop(dirs);
        // No request is left once the disk is gone, and the worker is idle after it: the last
        // superblock update has the members to itself.
        self.disk.remove();
        let io = self.io();
        // The rebuild's last checkpoint is the superblock update below.
        io.engine.hold_rebuild();
        io.quiesce_worker();
        // Nothing is in flight any more: clean, with a pending resync's position.
        io.engine.mark_stopped();
        if io.engine.write_superblocks(io).is_err() {
            pr_err!(
                "graid: {}: final superblock update reached no member\n",
                io.engine.superblock().array_name.as_str()
            );
        }
    }
}

/// Whether the devices allow a change of a mirror's copies from `now` to `want` members with
/// `moves`: a dropped role's device would be held with no role to release it by, a moved
/// member needs its new role free (md: EBUSY for a device still present), and a grow's new
/// roles and the replacement's place past them must be empty (a device left there by a
/// replace's release that could not drain would sit in a role nobody records).
fn devices_fit(files: &MemberDevices, now: u32, want: u32, moves: &Moves) -> bool {
    let moved = |role| moves.iter().any(|(from, _)| from == role);
    let filled = |role| moves.iter().any(|(_, to)| to == role);
    let held = |role| files.get(role).is_some();
    !((want..now).any(|role| held(role) && !moved(role))
        || (0..want).any(|role| held(role) && filled(role))
        || (now..=want).any(held))
}

/// Moves the devices of a shrink of a mirror's copies ([`Moves`]), all or none.
///
/// # Safety
///
/// As for [`MemberDevices::move_role`].
unsafe fn move_devices(files: &MemberDevices, moves: &Moves) -> Result {
    for (done, (from, to)) in moves.iter().enumerate() {
        // SAFETY: the caller's contract.
        if let Err(e) = unsafe { files.move_role(from, to) } {
            // The roles were checked free inside the freeze: not reached. Undone, so the
            // devices stay where the engine's states say.
            // SAFETY: the caller's contract.
            unsafe { undo_moves(files, moves, done) };
            return Err(e);
        }
    }
    Ok(())
}

/// Moves the first `done` of `moves` back, last first.
///
/// # Safety
///
/// As for [`MemberDevices::move_role`].
unsafe fn undo_moves(files: &MemberDevices, moves: &Moves, done: usize) {
    for (from, to) in moves.iter().take(done).rev() {
        // SAFETY: the caller's contract; `from` was emptied by the move undone.
        let _ = unsafe { files.move_role(to, from) };
    }
}

/// What a refused change of the member count tells userspace.
fn raid_devices_errno(e: RaidDevicesError) -> Error {
    match e {
        RaidDevicesError::Level(_) => crate::errno::eopnotsupp(),
        RaidDevicesError::Geometry(_) => EINVAL,
        RaidDevicesError::InUse { .. } | RaidDevicesError::Busy => EBUSY,
        RaidDevicesError::Broken => EIO,
    }
}

/// RESHAPE's answer to a restripe the engine refused (`EIO`: the array broke).
fn reshape_errno_of(e: ReshapeError) -> Error {
    match e {
        ReshapeError::Plan(PlanError::Nothing) | ReshapeError::Smaller { .. } => EINVAL,
        ReshapeError::Plan(PlanError::Gap { .. }) | ReshapeError::AreaInUse => ENOSPC,
        ReshapeError::Plan(_) | ReshapeError::Fewer => {
            crate::errno::eopnotsupp()
        }
        ReshapeError::Members => ENOSPC,
        ReshapeError::Busy | ReshapeError::Degraded => EBUSY,
        ReshapeError::Broken => EIO,
    }
}

fn resize_errno(e: ResizeError) -> Error {
    match e {
        ResizeError::NoRoom { .. } | ResizeError::BitmapFull => ENOSPC,
        ResizeError::Shrink { .. } => crate::errno::eopnotsupp(),
        ResizeError::Geometry(_) => EINVAL,
        ResizeError::NotOptimal | ResizeError::Busy | ResizeError::Healing => EBUSY,
        ResizeError::Broken => EIO,
    }
}
