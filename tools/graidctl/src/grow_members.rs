//! `graidctl grow ARRAY --raid-devices N [--add DEV...]`, `--chunk SIZE`, `--layout NAME`
//! (GRAID_IOC_RESHAPE), as md's `mdadm --grow`.
//!
//! A RAID 1 takes more or fewer copies online. More copies: the devices named with `--add`
//! join as spares first (as `graidctl add` on an optimal array), then the count grows; each
//! new role starts without a device and a spare takes it at once, rebuilt from the others
//! (`graidctl wait`). Without a spare the array stays degraded until a device is added. Fewer
//! copies: only members that were failed and removed are dropped (md refuses to drop a device
//! still there); members past the new count move into the places of removed ones below it,
//! as md's mirrors do.
//!
//! A RAID 0, 5 or 6 is restriped online onto more members, another chunk or another layout:
//! the `--add` devices (or spares of the array) join as the new members, the data moves to
//! the new geometry in the background while the array serves I/O (`graidctl wait`, `detail`),
//! and the array takes the new members' room when the move ends. No backup file: the data
//! offset moves into the room new arrays leave before their data. Fewer members, a level
//! change and RAID 10 are refused with the reason.

use crate::array_ref::{resolve, ArrayRef};
use crate::control::ControlDevice;
use crate::errno::{ioctl_error, Op};
use crate::error::CtlError;
use crate::manage::{self, Action};
use crate::member::System;
use crate::output::{json, present_members, ArrayView};
use crate::signature;
use crate::size::format_sectors;
use graid_abi::{
    GraidDetail, GraidReshape, GRAID_ARRAY_OPTIMAL, GRAID_MAX_MEMBERS, GRAID_MEMBER_FAULTY,
    GRAID_MEMBER_MISSING, GRAID_RESHAPE_CHUNK, GRAID_RESHAPE_LAYOUT, GRAID_RESHAPE_QUERY,
    GRAID_RESHAPE_RUNNING, GRAID_RESHAPE_STALLED,
};
use serde::Serialize;

/// What `grow` asks to change: the member count (0: as now), the chunk, the layout.
#[derive(Clone, Copy, Debug, Default)]
pub struct Shape {
    pub raid_devices: u32,
    pub chunk_sectors: Option<u32>,
    /// md's layout number.
    pub layout: Option<u32>,
}

#[derive(Debug, Serialize)]
struct Changed {
    array: String,
    raid_devices_before: u32,
    raid_devices: u32,
    /// Devices added as spares first, which take the new roles.
    added: Vec<String>,
}

#[derive(Debug, Serialize)]
struct Restriping {
    array: String,
    raid_devices_before: u32,
    raid_devices: u32,
    chunk_bytes_before: u64,
    chunk_bytes: u64,
    layout_before: u32,
    layout: u32,
    /// Bytes the restripe moves, and where each member's data starts before and after.
    moving_bytes: u64,
    data_offset_bytes: u64,
    new_data_offset_bytes: u64,
    added: Vec<String>,
}

/// Changes `array`'s shape as `shape` asks, adding `add` as spares first.
pub fn run(
    ctl: &dyn ControlDevice,
    sys: &dyn System,
    array: &ArrayRef,
    shape: &Shape,
    add: &[String],
    force: bool,
    json_out: bool,
) -> Result<String, CtlError> {
    let detail = resolve(ctl, sys, array)?;
    match detail.level {
        1 => {
            if shape.chunk_sectors.is_some() || shape.layout.is_some() {
                let label = ArrayView::new(&detail, sys).label();
                return Err(CtlError::Failed(format!(
                    "cannot change the chunk or layout of {label}: raid1 has neither (nothing \
                     changed)"
                )));
            }
            let count = match shape.raid_devices {
                0 => detail.nr_members,
                n => n,
            };
            copies(ctl, sys, array, detail, count, add, force, json_out)
        }
        0 | 5 | 6 => restripe(ctl, sys, array, detail, shape, add, force, json_out),
        level => {
            let label = ArrayView::new(&detail, sys).label();
            Err(CtlError::Failed(format!(
                "cannot reshape {label}: raid{level} is not restriped yet (nothing changed)"
            )))
        }
    }
}

/// A RAID 0, 5 or 6 restriped (see the module comment).
#[allow(clippy::too_many_arguments)]
fn restripe(
    ctl: &dyn ControlDevice,
    sys: &dyn System,
    array: &ArrayRef,
    detail: GraidDetail,
    shape: &Shape,
    add: &[String],
    force: bool,
    json_out: bool,
) -> Result<String, CtlError> {
    let label = ArrayView::new(&detail, sys).label();
    let now = detail.nr_members;
    let count = match shape.raid_devices {
        0 => now,
        n => n,
    };
    check_restripe(&detail, &label, count, shape, add)?;
    let mut flags = 0;
    if shape.chunk_sectors.is_some() {
        flags |= GRAID_RESHAPE_CHUNK;
    }
    if shape.layout.is_some() {
        flags |= GRAID_RESHAPE_LAYOUT;
    }
    let ask = |flags: u32| GraidReshape {
        index: detail.index,
        flags,
        raid_devices: count,
        chunk_sectors: shape.chunk_sectors.unwrap_or(0),
        layout: shape.layout.unwrap_or(0),
        ..GraidReshape::default()
    };
    // What it would do, asked first (with the spares it would take: --add devices are not
    // spares yet, so a grow that needs them is asked after they are).
    let before = status(ctl, detail.index).unwrap_or_default();
    if add.is_empty() || count == now {
        let mut query = ask(flags | GRAID_RESHAPE_QUERY);
        ctl.reshape(&mut query)
            .map_err(|e| restripe_error(&label, &e, add))?;
    }
    if !add.is_empty() {
        signature::check_devices(sys, add, &signature::held_by_arrays(ctl), force, "adding")?;
        manage::run(ctl, sys, array, add, Action::Add, false)?;
    }
    let mut req = ask(flags);
    ctl.reshape(&mut req)
        .map_err(|e| restripe_error(&label, &e, add))?;
    let sector = 512u64;
    if json_out {
        return Ok(json(&Restriping {
            array: label,
            raid_devices_before: now,
            raid_devices: req.raid_devices,
            chunk_bytes_before: u64::from(detail.chunk_sectors) * sector,
            chunk_bytes: u64::from(req.chunk_sectors) * sector,
            layout_before: before.layout,
            layout: req.layout,
            moving_bytes: req.total_sectors * sector,
            data_offset_bytes: req.data_offset * sector,
            new_data_offset_bytes: req.new_data_offset * sector,
            added: add.to_vec(),
        }));
    }
    Ok(format!(
        "graidctl: {label}: restriping {} from {now} members, chunk {} to {} members, chunk \
         {}, online (graidctl wait; detail shows the progress)\n",
        format_sectors(req.total_sectors),
        format_sectors(u64::from(detail.chunk_sectors)),
        req.raid_devices,
        format_sectors(u64::from(req.chunk_sectors)),
    ))
}

/// The reshape's progress (RESHAPE with nothing asked).
pub fn status(ctl: &dyn ControlDevice, index: u32) -> Option<GraidReshape> {
    let mut req = GraidReshape {
        index,
        flags: GRAID_RESHAPE_QUERY,
        ..GraidReshape::default()
    };
    ctl.reshape(&mut req).ok().map(|()| req)
}

/// A restripe under way, as `detail` and `wait` show it.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct ReshapeView {
    /// `running`, or `stalled` (data it cannot read even through the parity).
    pub state: &'static str,
    pub raid_devices_from: u32,
    pub raid_devices: u32,
    pub chunk_bytes_from: u64,
    pub chunk_bytes: u64,
    pub layout_from: u32,
    pub layout: u32,
    /// Bytes of the array it moves, moved so far, and recorded in the superblocks (a restart
    /// goes on from there).
    pub total_bytes: u64,
    pub moved_bytes: u64,
    pub recorded_bytes: u64,
    pub percent: f64,
    /// Where each member's data starts, and where it moves to.
    pub data_offset_bytes: u64,
    pub new_data_offset_bytes: u64,
}

impl ReshapeView {
    fn of(r: &GraidReshape) -> Option<Self> {
        let state = match r.state {
            GRAID_RESHAPE_RUNNING => "running",
            GRAID_RESHAPE_STALLED => "stalled",
            _ => return None,
        };
        let bytes = |sectors: u64| sectors.saturating_mul(512);
        Some(Self {
            state,
            raid_devices_from: r.from_raid_devices,
            raid_devices: r.raid_devices,
            chunk_bytes_from: bytes(u64::from(r.from_chunk_sectors)),
            chunk_bytes: bytes(u64::from(r.chunk_sectors)),
            layout_from: r.from_layout,
            layout: r.layout,
            total_bytes: bytes(r.total_sectors),
            moved_bytes: bytes(r.moved_sectors),
            recorded_bytes: bytes(r.recorded_sectors),
            percent: match r.total_sectors {
                0 => 100.0,
                t => r.moved_sectors as f64 * 100.0 / t as f64,
            },
            data_offset_bytes: bytes(r.data_offset),
            new_data_offset_bytes: bytes(r.new_data_offset),
        })
    }

    /// `detail`'s line.
    pub fn text(&self) -> String {
        let size = crate::size::format_bytes;
        let stalled = match self.state {
            "stalled" => {
                ", stalled: data it cannot read even through the parity (tried again every \
                 second)"
            }
            _ => "",
        };
        format!(
            "{:.1}% of {} ({} -> {} members, chunk {} -> {}){stalled}",
            self.percent,
            size(self.total_bytes),
            self.raid_devices_from,
            self.raid_devices,
            size(self.chunk_bytes_from),
            size(self.chunk_bytes),
        )
    }
}

/// The restripe array `index` runs, if any.
pub fn reshape_view(ctl: &dyn ControlDevice, index: u32) -> Option<ReshapeView> {
    status(ctl, index).as_ref().and_then(ReshapeView::of)
}

/// RESHAPE's refusal of a restripe, in the array's terms.
fn restripe_error(label: &str, e: &std::io::Error, add: &[String]) -> CtlError {
    let why = match e.raw_os_error() {
        Some(libc::ENOSPC) => Some(
            "too few spares for the new members (add them with --add), or no room before or \
             after the data to move it into (arrays made by older graid leave none; the \
             write-intent bitmap's area is never lent, the partial parity log keeps 268 KiB)",
        ),
        Some(libc::EOPNOTSUPP) => Some("not supported yet: fewer members, or a level change"),
        Some(libc::EBUSY) => Some(
            "the array is degraded, or a reshape, rebuild, replace, check, repair or resync \
             runs (wait for it)",
        ),
        _ => None,
    };
    let err = match why {
        Some(why) => CtlError::Failed(format!("cannot restripe {label}: {why}; nothing changed")),
        None => ioctl_error(Op::Reshape { array: label }, e),
    };
    match add {
        [] => err,
        _ => CtlError::Failed(format!(
            "{err}; {} stayed as spare(s) of {label}",
            add.join(", ")
        )),
    }
}

/// What graidctl can tell before asking the module about a restripe.
fn check_restripe(
    detail: &GraidDetail,
    label: &str,
    count: u32,
    shape: &Shape,
    add: &[String],
) -> Result<(), CtlError> {
    let now = detail.nr_members;
    if !(2..=GRAID_MAX_MEMBERS as u32).contains(&count) {
        return Err(CtlError::Failed(format!(
            "cannot restripe {label} onto {count} members: not a member count this array can \
             have (2 to {GRAID_MAX_MEMBERS}); nothing changed"
        )));
    }
    if count < now {
        return Err(CtlError::Failed(format!(
            "cannot restripe {label} onto fewer members ({count}, it has {now}): not supported \
             yet; nothing changed"
        )));
    }
    if shape.layout.is_some() && detail.level == 0 {
        return Err(CtlError::Usage(
            "--layout is for raid5 and raid6, not raid0".to_owned(),
        ));
    }
    // md's rule too: the new shape must hold the whole member, or the array's end is lost.
    if let Some(chunk) = shape.chunk_sectors.filter(|&c| c != 0) {
        if !detail.member_data_sectors.is_multiple_of(u64::from(chunk)) {
            return Err(CtlError::Failed(format!(
                "cannot restripe {label} onto {} chunks: they do not divide each member's \
                 data area ({}), so the array's end would be lost; shrink the members to a \
                 multiple of the chunk first (graidctl grow --size); nothing changed",
                crate::size::format_bytes(u64::from(chunk) * 512),
                crate::size::format_bytes(detail.member_data_sectors * 512)
            )));
        }
    }
    if detail.state != GRAID_ARRAY_OPTIMAL {
        return Err(CtlError::Failed(format!(
            "cannot restripe {label}: it is not optimal (md refuses too); rebuild it first \
             (graidctl add, graidctl wait), nothing changed"
        )));
    }
    if add.len() as u32 > count - now {
        return Err(CtlError::Usage(format!(
            "--add names {} devices for {} new member(s); add the others as spares with \
             graidctl add",
            add.len(),
            count - now
        )));
    }
    Ok(())
}

/// A RAID 1's copies changed to `count`.
#[allow(clippy::too_many_arguments)]
fn copies(
    ctl: &dyn ControlDevice,
    sys: &dyn System,
    array: &ArrayRef,
    detail: GraidDetail,
    count: u32,
    add: &[String],
    force: bool,
    json_out: bool,
) -> Result<String, CtlError> {
    let label = ArrayView::new(&detail, sys).label();
    check(&detail, &label, count, add)?;
    // Asked first, so a refusal adds no spare.
    let mut query = GraidReshape {
        index: detail.index,
        flags: GRAID_RESHAPE_QUERY,
        raid_devices: count,
        ..GraidReshape::default()
    };
    ctl.reshape(&mut query)
        .map_err(|e| ioctl_error(Op::Reshape { array: &label }, &e))?;
    if !add.is_empty() {
        signature::check_devices(sys, add, &signature::held_by_arrays(ctl), force, "adding")?;
        manage::run(ctl, sys, array, add, Action::Add, false)?;
    }
    let mut req = GraidReshape {
        index: detail.index,
        raid_devices: count,
        ..GraidReshape::default()
    };
    ctl.reshape(&mut req).map_err(|e| {
        let err = ioctl_error(Op::Reshape { array: &label }, &e);
        match add {
            [] => err,
            _ => CtlError::Failed(format!(
                "{err}; {} stayed as spare(s) of {label}",
                add.join(", ")
            )),
        }
    })?;
    let before = detail.nr_members;
    if json_out {
        return Ok(json(&Changed {
            array: label,
            raid_devices_before: before,
            raid_devices: req.raid_devices,
            added: add.to_vec(),
        }));
    }
    Ok(match req.raid_devices.cmp(&before) {
        std::cmp::Ordering::Equal => {
            format!("graidctl: {label}: already {before} members; nothing to change\n")
        }
        std::cmp::Ordering::Less => format!(
            "graidctl: {label}: {} members, was {before}\n",
            req.raid_devices
        ),
        std::cmp::Ordering::Greater => {
            // Which devices took the new roles (a spare the array had goes first), as DETAIL
            // says: the module's take-over runs just after the ioctl, so a spare still waiting
            // is given a moment (3 s at most).
            let taken_in = |d: &GraidDetail| -> Vec<String> {
                present_members(d)
                    .iter()
                    .filter(|m| m.role >= before && m.state != GRAID_MEMBER_MISSING)
                    .map(|m| {
                        let rdev = crate::member::Rdev::from(m.dev);
                        sys.dev_path(rdev).unwrap_or_else(|| rdev.to_string())
                    })
                    .collect()
            };
            let mut after = ctl.detail(detail.index).unwrap_or(detail);
            for _ in 0..30 {
                let wanted = (req.raid_devices - before) as usize;
                if after.nr_spares == 0 || taken_in(&after).len() >= wanted {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(100));
                after = ctl.detail(detail.index).unwrap_or(after);
            }
            let taken = taken_in(&after);
            let waiting = req.raid_devices - before - taken.len() as u32;
            let rebuilding = match taken.as_slice() {
                [] => String::new(),
                t => format!(
                    "; {} rebuilding into the new role(s) (graidctl wait)",
                    t.join(", ")
                ),
            };
            let degraded = match waiting {
                0 => String::new(),
                n => format!("; {n} new role(s) wait for a device (graidctl add)"),
            };
            format!(
                "graidctl: {label}: {} members, was {before}{rebuilding}{degraded}\n",
                req.raid_devices
            )
        }
    })
}

/// What graidctl can tell before asking the module, said in the array's terms.
fn check(detail: &GraidDetail, label: &str, count: u32, add: &[String]) -> Result<(), CtlError> {
    let now = detail.nr_members;
    if !(2..=GRAID_MAX_MEMBERS as u32).contains(&count) {
        return Err(CtlError::Failed(format!(
            "cannot change the member count of {label} to {count}: not a member count this \
             array can have (2 to {GRAID_MAX_MEMBERS}); nothing changed"
        )));
    }
    if count < now {
        if !add.is_empty() {
            return Err(CtlError::Usage(
                "--add goes with more members, not fewer".to_owned(),
            ));
        }
        let present = present_members(detail);
        if let Some(m) = present.iter().find(|m| m.state == GRAID_MEMBER_FAULTY) {
            let dev = crate::member::Rdev::from(m.dev);
            return Err(CtlError::Failed(format!(
                "cannot shrink {label} to {count} members: member {} ({dev}) failed but is \
                 still in it; remove it first (graidctl remove), nothing changed",
                m.role
            )));
        }
        let in_use = present
            .iter()
            .filter(|m| m.state != GRAID_MEMBER_MISSING)
            .count() as u32;
        if in_use > count {
            return Err(CtlError::Failed(format!(
                "cannot shrink {label} to {count} members: {in_use} are in it; fail and remove \
                 {} first (graidctl fail, graidctl remove), nothing changed",
                in_use - count
            )));
        }
    }
    // A device added to a degraded array takes the missing member's place, not a new role.
    if !add.is_empty() && detail.state != GRAID_ARRAY_OPTIMAL {
        return Err(CtlError::Failed(format!(
            "cannot grow {label} with --add: it is not optimal, so a device added takes a \
             missing member's place; rebuild it first (graidctl add, graidctl wait), nothing \
             changed"
        )));
    }
    if count > now && add.len() as u32 > count - now {
        return Err(CtlError::Usage(format!(
            "--add names {} devices for {} new role(s); add the others as spares with \
             graidctl add",
            add.len(),
            count - now
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::array_ref::parse;
    use crate::control::fake::{array, FakeControl};
    use crate::member::fake::FakeSystem;
    use graid_abi::{GRAID_MEMBER_ACTIVE, GRAID_MEMBER_FAULTY};

    fn n(raid_devices: u32) -> Shape {
        Shape {
            raid_devices,
            ..Shape::default()
        }
    }

    fn sys() -> FakeSystem {
        FakeSystem::with_disks(&["nvme0n1", "nvme1n1", "nvme2n1", "nvme3n1"])
    }

    #[test]
    fn a_mirror_grows_with_its_new_device_added_as_a_spare_first() {
        let ctl = FakeControl::with(vec![array(
            0,
            "m",
            1,
            &[(259, 0, GRAID_MEMBER_ACTIVE), (259, 1, GRAID_MEMBER_ACTIVE)],
        )]);
        let sys = sys();
        let out = run(
            &ctl,
            &sys,
            &parse("m").unwrap(),
            &n(3),
            &["/dev/nvme2n1".to_owned()],
            false,
            false,
        )
        .unwrap();
        assert!(out.contains("3 members, was 2"), "{out}");
        assert!(out.contains("; /dev/nvme2n1 rebuilding"), "{out}");
        // The add went first, then the query's twin.
        let ops = ctl.member_ops.borrow();
        assert_eq!((ops.len(), ops[0].dev.minor), (1, 2));
        let reshapes = ctl.reshapes.borrow();
        assert_eq!(reshapes.len(), 2);
        assert_eq!(reshapes[0].flags, GRAID_RESHAPE_QUERY);
        assert_eq!((reshapes[1].flags, reshapes[1].raid_devices), (0, 3));
        assert_eq!(ctl.arrays.borrow()[0].nr_members, 3);
        drop((ops, reshapes));
        // Without a device: the new role waits, and a degraded array takes no --add.
        let out = run(&ctl, &sys, &parse("m").unwrap(), &n(4), &[], false, false).unwrap();
        assert!(
            out.contains("4 members, was 3; 1 new role(s) wait"),
            "{out}"
        );
        let err = run(
            &ctl,
            &sys,
            &parse("m").unwrap(),
            &n(5),
            &["/dev/nvme3n1".to_owned()],
            false,
            false,
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("not optimal"), "{err}");
    }

    #[test]
    fn a_refused_grow_adds_no_spare() {
        let ctl = FakeControl::with(vec![array(
            0,
            "m",
            1,
            &[(259, 0, GRAID_MEMBER_ACTIVE), (259, 1, GRAID_MEMBER_ACTIVE)],
        )]);
        ctl.fail.borrow_mut().push(("reshape", libc::EBUSY));
        let err = run(
            &ctl,
            &sys(),
            &parse("m").unwrap(),
            &n(3),
            &["/dev/nvme2n1".to_owned()],
            false,
            false,
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("fail and remove it first"), "{err}");
        assert!(ctl.member_ops.borrow().is_empty());
    }

    #[test]
    fn a_copy_still_there_is_not_dropped() {
        let members = [
            (259, 0, GRAID_MEMBER_ACTIVE),
            (259, 1, GRAID_MEMBER_ACTIVE),
            (259, 2, GRAID_MEMBER_FAULTY),
        ];
        let ctl = FakeControl::with(vec![array(0, "m", 1, &members)]);
        let err = run(&ctl, &sys(), &parse("m").unwrap(), &n(2), &[], false, false)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("member 2 (259:2) failed but is still in it"),
            "{err}"
        );
        ctl.arrays.borrow_mut()[0].members[1].state = GRAID_MEMBER_FAULTY;
        ctl.arrays.borrow_mut()[0].members[2].state = GRAID_MEMBER_ACTIVE;
        let err = run(&ctl, &sys(), &parse("m").unwrap(), &n(2), &[], false, false)
            .unwrap_err()
            .to_string();
        assert!(err.contains("member 1 (259:1) failed"), "{err}");
        assert!(ctl.reshapes.borrow().is_empty());
        // Removed: member 2 moves into its place.
        ctl.arrays.borrow_mut()[0].members[1].state = GRAID_MEMBER_MISSING;
        let out = run(&ctl, &sys(), &parse("m").unwrap(), &n(2), &[], false, true).unwrap();
        assert!(out.contains("\"raid_devices\": 2"), "{out}");
        let after = ctl.arrays.borrow()[0];
        assert_eq!((after.members[1].dev.minor, after.members[1].state), (2, 0));
        // Three in it: one too many for two.
        let ctl = FakeControl::with(vec![array(0, "m", 1, &members[..2])]);
        ctl.arrays.borrow_mut()[0].nr_members = 3;
        ctl.arrays.borrow_mut()[0].members[2] = after.members[1];
        let err = run(&ctl, &sys(), &parse("m").unwrap(), &n(2), &[], false, false)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("3 are in it; fail and remove 1 first"),
            "{err}"
        );
    }

    #[test]
    fn a_raid5_is_restriped_over_a_device_added_first() {
        let members = [(259, 0, 0), (259, 1, 0), (259, 2, 0)];
        let ctl = FakeControl::with(vec![array(0, "p", 5, &members)]);
        let sys = sys();
        let add = ["/dev/nvme3n1".to_owned()];
        let out = run(&ctl, &sys, &parse("p").unwrap(), &n(4), &add, false, false).unwrap();
        assert!(
            out.contains("restriping 1 GiB from 3 members, chunk 512 KiB to 4 members"),
            "{out}"
        );
        // The add first (a grow that needs it is not asked before), then the restripe.
        assert_eq!(ctl.member_ops.borrow().len(), 1);
        let reshapes = ctl.reshapes.borrow();
        let asked: Vec<_> = reshapes
            .iter()
            .filter(|r| r.raid_devices != 0)
            .map(|r| (r.flags, r.raid_devices))
            .collect();
        assert_eq!(asked, [(0, 4)]);
        drop(reshapes);
        assert_eq!(ctl.arrays.borrow()[0].nr_members, 4);
        // detail shows it, and another reshape waits for its end.
        let view = reshape_view(&ctl, 0).expect("a restripe");
        assert_eq!((view.raid_devices_from, view.raid_devices), (3, 4));
        assert!(
            view.text().starts_with("0.0% of 1 GiB (3 -> 4 members"),
            "{}",
            view.text()
        );
        let err = run(&ctl, &sys, &parse("p").unwrap(), &n(5), &[], false, false)
            .unwrap_err()
            .to_string();
        assert!(err.contains("a reshape, rebuild"), "{err}");
    }

    #[test]
    fn a_chunk_change_asks_first_and_says_what_moves() {
        let members = [(259, 0, 0), (259, 1, 0), (259, 2, 0)];
        let ctl = FakeControl::with(vec![array(0, "z", 0, &members)]);
        let shape = Shape {
            chunk_sectors: Some(128),
            ..Shape::default()
        };
        let out = run(&ctl, &sys(), &parse("z").unwrap(), &shape, &[], false, true).unwrap();
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["chunk_bytes_before"], 512 * 1024);
        assert_eq!(v["chunk_bytes"], 64 * 1024);
        assert_eq!(v["raid_devices"], 3);
        let reshapes = ctl.reshapes.borrow();
        assert_eq!(reshapes[1].flags, GRAID_RESHAPE_CHUNK | GRAID_RESHAPE_QUERY);
        assert_eq!(
            (reshapes[2].flags, reshapes[2].chunk_sectors),
            (GRAID_RESHAPE_CHUNK, 128)
        );
    }

    #[test]
    fn restripes_refused_before_asking_say_why() {
        let members = [(259, 0, 0), (259, 1, 0), (259, 2, 0)];
        let ctl = FakeControl::with(vec![array(0, "p", 5, &members)]);
        let sys = sys();
        let p = parse("p").unwrap();
        let err = run(&ctl, &sys, &p, &n(2), &[], false, false)
            .unwrap_err()
            .to_string();
        assert!(err.contains("fewer members"), "{err}");
        // Without a spare for the new member, the module's ENOSPC is told in words.
        let err = run(&ctl, &sys, &p, &n(4), &[], false, false)
            .unwrap_err()
            .to_string();
        assert!(err.contains("too few spares"), "{err}");
        let z = FakeControl::with(vec![array(0, "z", 0, &members)]);
        let shape = Shape {
            layout: Some(3),
            ..Shape::default()
        };
        let err = run(&z, &sys, &parse("z").unwrap(), &shape, &[], false, false).unwrap_err();
        assert!(err.to_string().contains("--layout is for raid5"), "{err}");
        let mut degraded = array(
            0,
            "d",
            6,
            &[(259, 0, 0), (259, 1, 0), (259, 2, 0), (259, 3, 2)],
        );
        degraded.state = graid_abi::GRAID_ARRAY_DEGRADED;
        let d = FakeControl::with(vec![degraded]);
        let err = run(&d, &sys, &parse("d").unwrap(), &n(5), &[], false, false).unwrap_err();
        assert!(err.to_string().contains("not optimal"), "{err}");
        let ten = FakeControl::with(vec![array(0, "t", 10, &members[..2])]);
        let err = run(&ten, &sys, &parse("t").unwrap(), &n(4), &[], false, false).unwrap_err();
        assert!(err.to_string().contains("raid10 is not restriped"), "{err}");
        let m = FakeControl::with(vec![array(0, "m", 1, &members[..2])]);
        let shape = Shape {
            chunk_sectors: Some(128),
            ..Shape::default()
        };
        let err = run(&m, &sys, &parse("m").unwrap(), &shape, &[], false, false).unwrap_err();
        assert!(err.to_string().contains("raid1 has neither"), "{err}");
        // A chunk that does not divide the members' data areas would lose the array's end.
        let mut odd = array(0, "q", 5, &members);
        odd.member_data_sectors = 3 * 1024;
        let q = FakeControl::with(vec![odd]);
        let shape = Shape {
            chunk_sectors: Some(2048),
            ..Shape::default()
        };
        let err = run(&q, &sys, &parse("q").unwrap(), &shape, &[], false, false).unwrap_err();
        assert!(err.to_string().contains("do not divide"), "{err}");
        assert!(q.reshapes.borrow().iter().all(|r| r.chunk_sectors != 2048));
        // Nothing was asked of the module where graidctl refused first.
        assert!(ctl.reshapes.borrow().iter().all(|r| r.raid_devices != 2));
    }

    #[test]
    fn the_count_of_a_mirror_is_checked_and_its_adds_counted() {
        let members = [(259, 0, 0), (259, 1, 0), (259, 2, 0)];
        let ctl = FakeControl::with(vec![array(0, "m", 1, &members[..2])]);
        for count in [1, 33] {
            let err = run(
                &ctl,
                &sys(),
                &parse("m").unwrap(),
                &n(count),
                &[],
                false,
                false,
            )
            .unwrap_err()
            .to_string();
            assert!(
                err.contains("not a member count this array can have"),
                "{err}"
            );
        }
        let two = ["/dev/nvme2n1".to_owned(), "/dev/nvme3n1".to_owned()];
        let err = run(
            &ctl,
            &sys(),
            &parse("m").unwrap(),
            &n(3),
            &two,
            false,
            false,
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("2 devices for 1 new role"), "{err}");
    }
}
