// SPDX-License-Identifier: GPL-2.0

//! An array's restripe (issue 46; the engine's side is `engine/reshape_run.rs`): RESHAPE for
//! RAID 0, 5 and 6, which starts one with the queue frozen; its end, where the disk takes its
//! new size and queue limits; and its progress, for RESHAPE's query.

use super::{reshape_errno_of, Array, REMOVE_DRAIN_MS};
use crate::engine::geometry::{Geometry, Level};
use crate::engine::reshape::{ReshapePlan, Side};
use crate::engine::reshape_run::ReshapeError;
use crate::engine::ppl::MIN_LOG_SECTORS;
use crate::engine::superblock::{Area, DATA_OFFSET_ALIGN_SECTORS, METADATA_END_SECTOR};
use crate::io::ArrayIo;
use crate::member_devices::SpareDevice;
use crate::uapi;
use core::sync::atomic::Ordering;
use kernel::prelude::*;

impl Array {
    /// RESHAPE for RAID 0, 5 and 6 (see [`Array::reshape`]): the spares join as the new
    /// members, the engine starts moving the data, and the disk's queue limit keeps requests
    /// inside one unit of the move.
    pub(super) fn restripe(&self, req: &mut uapi::GraidReshape) -> Result {
        let members = self.members_lock.lock();
        let io = self.io();
        let now = io.engine.geometry();
        let count = match req.raid_devices {
            0 => now.members(),
            n => n,
        };
        let chunk = match req.flags & uapi::GRAID_RESHAPE_CHUNK {
            0 => now.chunk_sectors(),
            _ => req.chunk_sectors,
        };
        let level = match req.flags & uapi::GRAID_RESHAPE_LAYOUT {
            0 => now.level(),
            _ => Level::from_codes(now.level().code(), req.layout).map_err(|_| EINVAL)?,
        };
        let new = Geometry::new(level, count, chunk, now.member_data_sectors()).map_err(|_| EINVAL)?;
        if new == now && !io.engine.reshaping() {
            self.reshape_status(req);
            return Ok(());
        }
        let (plan, joining) = self.plan_restripe(&now, &new)?;
        if req.flags & uapi::GRAID_RESHAPE_QUERY != 0 {
            fill_target(req, &new);
            return Ok(());
        }
        // What the new count needs, allocated before the freeze.
        io.superblocks.reserve(count as usize)?;
        let buffer = ArrayIo::new_rebuild_buffer(&new)?;
        let reserve = io.new_reserve(&new)?;
        let mut limits = self.disk.begin_limits();
        let boundary = plan.boundary_sectors();
        let copy_max = if new.level().has_parity() { boundary } else { 0 };
        limits.set_io_shape(boundary, new.io_min_bytes(), new.io_opt_bytes(), copy_max);
        let started = self.with_members_idle(|| {
            // Asked again with nothing running: a member may have failed since.
            if io.engine.reshape_allowed(new, plan.geometry(Side::New).1) != Ok(plan) {
                return Err(EBUSY);
            }
            let roles = now.members()..count;
            if roles.clone().any(|role| io.files.get(role).is_some()) {
                return Err(EBUSY);
            }
            // Every request from now on is split at the move's units (none is in flight). A
            // refusal below leaves this limit: it divides the old one, so requests are only
            // smaller than they could be until the next start.
            limits.commit()?;
            let mut joined = 0;
            for (role, &slot) in roles.zip(joining.slots.iter()) {
                if let Err(e) = self.join_spare(role, slot) {
                    self.leave_spares(now.members(), joined, &joining);
                    return Err(e);
                }
                joined += 1;
            }
            if let Err(e) = io.engine.start_reshape(io, &plan, &joining.slots) {
                self.leave_spares(now.members(), joined, &joining);
                return Err(reshape_errno_of(e));
            }
            io.replace_reserve(reserve);
            Ok(io.swap_rebuild_buffer(buffer))
        })?;
        let old_buffer = started?;
        drop(old_buffer);
        drop(members);
        // Not under the member lock: a directory's removal waits for its readers.
        self.set_member_dirs(io.engine.geometry().members());
        pr_info!(
            "graid: graid{}: restriping from {} members, chunk {} to {} members, chunk {}; data moves from sector {} to {}\n",
            self.index,
            now.members(),
            now.chunk_sectors(),
            count,
            new.chunk_sectors(),
            plan.geometry(Side::Old).1,
            plan.geometry(Side::New).1
        );
        self.announce_reshape(false);
        self.reshape_status(req);
        Ok(())
    }

    /// The plan of a restripe from `now` to `new`, and the spares that join (their slots, in
    /// the new roles' order). The data offset moves down into the room before the data (half
    /// of it, so a later reshape finds room too; all of it if half is too little), or up into
    /// the room after it where the plan runs backwards.
    fn plan_restripe(&self, now: &Geometry, new: &Geometry) -> Result<(ReshapePlan, Joining)> {
        let io = self.io();
        let offset = io.engine.data_offset();
        let data = now.member_data_sectors();
        let need = new.members().saturating_sub(now.members()) as usize;
        let mut joining = Joining {
            slots: KVec::with_capacity(need, GFP_KERNEL)?,
            uuids: KVec::with_capacity(need, GFP_KERNEL)?,
        };
        let spares = io.spares.lock();
        for spare in spares.iter().take(need) {
            joining.slots.push(spare.slot, GFP_KERNEL)?;
            joining.uuids.push(spare.uuid, GFP_KERNEL)?;
        }
        // The smallest device that will hold data: the room after the data area.
        let joining_sizes = spares.iter().take(need).map(|s| s.file.nr_sectors());
        let member_sizes = (0..now.members()).filter_map(|r| io.files.get(r).map(|f| f.nr_sectors()));
        let smallest = Iterator::chain(joining_sizes, member_sizes).min().unwrap_or(0);
        drop(spares);
        if joining.slots.len() < need {
            return Err(ENOSPC);
        }
        let sb = io.engine.superblock();
        // The areas in use, whole or with the log's ring as short as it may be; an unused
        // one's room is lent (`reshape_run.rs`, `lend_areas`).
        let areas_end = |log_sectors: u64| {
            [
                (sb.bitmap, sb.bitmap_region != 0),
                (Area { sectors: log_sectors, ..sb.journal }, sb.ppl),
            ]
            .iter()
            .filter(|(a, used)| *used && a.sectors != 0)
            .map(|(a, _)| a.offset.saturating_add(a.sectors))
            .fold(METADATA_END_SECTOR, u64::max)
        };
        let align = |sectors: u64| sectors & !(DATA_OFFSET_ALIGN_SECTORS - 1);
        let below = |log_sectors: u64| {
            let lowest = areas_end(log_sectors).next_multiple_of(DATA_OFFSET_ALIGN_SECTORS);
            offset.saturating_sub(lowest)
        };
        let (whole, shortest) = (below(sb.journal.sectors), below(MIN_LOG_SECTORS));
        let above = smallest.saturating_sub(offset.saturating_add(data));
        // The log keeps its whole ring where the room allows.
        let candidates = [
            offset.saturating_sub(align(whole / 2)),
            offset.saturating_sub(align(whole)),
            offset.saturating_sub(align(shortest / 2)),
            offset.saturating_sub(align(shortest)),
            offset.saturating_add(align(above / 2)),
            offset.saturating_add(align(above)),
        ];
        // With no room at all, the offset as it is: the engine says why (what refuses any
        // offset comes first).
        let mut why = match io.engine.reshape_allowed(*new, offset) {
            Ok(_) => ReshapeError::Plan(crate::engine::reshape::PlanError::Gap { need: 0, have: 0 }),
            Err(e @ (ReshapeError::Plan(_) | ReshapeError::AreaInUse)) => e,
            Err(e) => return Err(reshape_errno_of(e)),
        };
        for &candidate in candidates.iter().filter(|&&c| c != offset) {
            match io.engine.reshape_allowed(*new, candidate) {
                Ok(plan) => return Ok((plan, joining)),
                Err(e @ (ReshapeError::Plan(_) | ReshapeError::AreaInUse)) => why = e,
                Err(e) => return Err(reshape_errno_of(e)),
            }
        }
        pr_info!("graid: graid{}: no reshape: {:?}\n", self.index, why);
        Err(reshape_errno_of(why))
    }

    /// Spare `slot`'s device takes role `role`, which has none. Inside `with_members_idle`.
    fn join_spare(&self, role: u32, slot: u32) -> Result {
        let io = self.io();
        // Allocated before the spare leaves its list: a failure leaves it there.
        let boxed = KBox::new_uninit(GFP_KERNEL)?;
        let spare = self.take_spare_device(slot).ok_or(ENODEV)?;
        let uuid = spare.uuid;
        if let Err(file) = io.files.attach_box(role, KBox::write(boxed, spare.file)) {
            let spare = SpareDevice {
                slot,
                uuid,
                file: KBox::into_inner(file),
            };
            Self::keep_spare(io, spare)?;
            return Err(EBUSY);
        }
        Ok(())
    }

    /// The first `joined` of `joining` go back to the spares from their roles (from `first`
    /// on): the reshape did not start. Inside `with_members_idle`.
    fn leave_spares(&self, first: u32, joined: usize, joining: &Joining) {
        let io = self.io();
        let spares = joining.slots.iter().zip(joining.uuids.iter()).take(joined);
        for (role, (&slot, &uuid)) in (first..).zip(spares) {
            // SAFETY: inside `with_members_idle`, `members_lock` held.
            let Some(file) = (unsafe { io.files.detach(role) }) else {
                continue;
            };
            let spare = SpareDevice {
                slot,
                uuid,
                file: KBox::into_inner(file),
            };
            if Self::keep_spare(io, spare).is_err() {
                pr_warn!("graid: graid{}: spare in slot {} closed: no memory to keep it\n", self.index, slot);
            }
        }
    }

    /// Makes the member directories under sysfs match `count` members.
    pub(super) fn set_member_dirs(&self, count: u32) {
        let mut dirs = self.sysfs.lock();
        if let Some(dirs) = Option::as_mut(&mut *dirs) {
            // SAFETY: the directories are the array's own (made by `add_sysfs`), removed with
            // it before its disk.
            if let Err(e) = unsafe { dirs.set_members(self, count) } {
                pr_warn!("graid: graid{}: member directories not made: {:?}\n", self.index, e);
            }
        }
    }

    /// After a reshape's end (the takeover work item): the disk takes the new geometry's
    /// queue limits and size. The reshape's own limit stays where the queue does not drain in
    /// time: it divides the new one, so requests are only smaller than they could be.
    pub(super) fn settle_reshape(&self) {
        if !self.reshape_ended.swap(false, Ordering::SeqCst) {
            return;
        }
        let members = self.members_lock.lock();
        let io = self.io();
        let g = io.engine.geometry();
        let mut limits = self.disk.begin_limits();
        let copy_max = if g.level().has_parity() { g.boundary_sectors() } else { 0 };
        limits.set_io_shape(g.boundary_sectors(), g.io_min_bytes(), g.io_opt_bytes(), copy_max);
        match self.disk.freeze(REMOVE_DRAIN_MS) {
            Ok(frozen) => {
                if let Err(e) = limits.commit() {
                    pr_warn!("graid: graid{}: queue limits not updated: {:?}\n", self.index, e);
                }
                drop(frozen);
            }
            Err(e) => {
                drop(limits);
                pr_warn!("graid: graid{}: queue limits not updated: {:?}\n", self.index, e);
            }
        }
        drop(members);
        // Not while frozen (the uevent's lock, as for a resize).
        self.disk.set_capacity(g.array_sectors());
        pr_info!(
            "graid: graid{}: reshape finished: {} members, chunk {}, {} sectors, data from sector {}\n",
            self.index,
            g.members(),
            g.chunk_sectors(),
            g.array_sectors(),
            io.engine.data_offset()
        );
        self.announce_reshape(true);
    }

    /// RESHAPE's answer: the shape now (being restriped, the one it goes to) and the
    /// reshape's progress.
    pub(crate) fn reshape_status(&self, req: &mut uapi::GraidReshape) {
        let engine = &self.io().engine;
        fill_target(req, &engine.geometry());
        let counts = engine.reshape_counts();
        (req.windows, req.records, req.waits) = (counts.windows, counts.records, counts.waits);
        req.data_offset = engine.data_offset();
        req.new_data_offset = req.data_offset;
        let Some(r) = engine.reshape_progress() else {
            req.state = uapi::GRAID_RESHAPE_NONE;
            return;
        };
        req.state = if r.stalled {
            uapi::GRAID_RESHAPE_STALLED
        } else {
            uapi::GRAID_RESHAPE_RUNNING
        };
        let (old, old_offset) = r.plan.geometry(Side::Old);
        let (new, new_offset) = r.plan.geometry(Side::New);
        fill_target(req, &new);
        req.from_raid_devices = old.members();
        req.from_layout = old.level().layout();
        req.from_chunk_sectors = old.chunk_sectors();
        req.data_offset = old_offset;
        req.new_data_offset = new_offset;
        req.total_sectors = r.plan.content();
        // From where the move starts: 0 forwards, the end backwards.
        let from_start = |at: u64| r.plan.start_position().abs_diff(at);
        req.moved_sectors = from_start(r.front);
        req.recorded_sectors = from_start(r.recorded);
    }
}

/// The spares that join a restripe, in the new roles' order.
struct Joining {
    slots: KVec<u32>,
    uuids: KVec<[u8; 16]>,
}

/// RESHAPE's shape fields from `g`.
fn fill_target(req: &mut uapi::GraidReshape, g: &Geometry) {
    req.raid_devices = g.members();
    req.layout = g.level().layout();
    req.chunk_sectors = g.chunk_sectors();
}
