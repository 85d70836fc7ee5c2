//! `graidctl grow ARRAY --raid-devices N [--add DEV...]` (GRAID_IOC_RESHAPE): a RAID 1 takes
//! more or fewer copies online, as md's `mdadm --grow --raid-devices=N --add DEV`.
//!
//! More copies: the devices named with `--add` join as spares first (as `graidctl add` on an
//! optimal array), then the count grows; each new role starts without a device and a spare
//! takes it at once, rebuilt from the others (`graidctl wait`). Without a spare the array
//! stays degraded until a device is added. Fewer copies: only members that were failed and
//! removed are dropped (md refuses to drop a device still there); members past the new count
//! move into the places of removed ones below it, as md's mirrors do.
//! Other levels are refused with the reason (restriping is not done yet).

use crate::array_ref::{resolve, ArrayRef};
use crate::control::ControlDevice;
use crate::errno::{ioctl_error, Op};
use crate::error::CtlError;
use crate::manage::{self, Action};
use crate::member::System;
use crate::output::{json, present_members, ArrayView};
use crate::signature;
use graid_abi::{
    GraidDetail, GraidReshape, GRAID_ARRAY_OPTIMAL, GRAID_MAX_MEMBERS, GRAID_MEMBER_FAULTY,
    GRAID_MEMBER_MISSING, GRAID_RESHAPE_QUERY,
};
use serde::Serialize;

#[derive(Debug, Serialize)]
struct Changed {
    array: String,
    raid_devices_before: u32,
    raid_devices: u32,
    /// Devices added as spares first, which take the new roles.
    added: Vec<String>,
}

/// Changes `array`'s member count to `count`, adding `add` as spares first.
pub fn run(
    ctl: &dyn ControlDevice,
    sys: &dyn System,
    array: &ArrayRef,
    count: u32,
    add: &[String],
    force: bool,
    json_out: bool,
) -> Result<String, CtlError> {
    let detail = resolve(ctl, sys, array)?;
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
    if detail.level != 1 && count != now {
        return Err(CtlError::Failed(format!(
            "cannot change the member count of {label}: only raid1 takes more or fewer copies \
             yet; restriping raid{} over more members is not supported (nothing changed)",
            detail.level
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
            3,
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
        let out = run(&ctl, &sys, &parse("m").unwrap(), 4, &[], false, false).unwrap();
        assert!(
            out.contains("4 members, was 3; 1 new role(s) wait"),
            "{out}"
        );
        let err = run(
            &ctl,
            &sys,
            &parse("m").unwrap(),
            5,
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
            3,
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
        let err = run(&ctl, &sys(), &parse("m").unwrap(), 2, &[], false, false)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("member 2 (259:2) failed but is still in it"),
            "{err}"
        );
        ctl.arrays.borrow_mut()[0].members[1].state = GRAID_MEMBER_FAULTY;
        ctl.arrays.borrow_mut()[0].members[2].state = GRAID_MEMBER_ACTIVE;
        let err = run(&ctl, &sys(), &parse("m").unwrap(), 2, &[], false, false)
            .unwrap_err()
            .to_string();
        assert!(err.contains("member 1 (259:1) failed"), "{err}");
        assert!(ctl.reshapes.borrow().is_empty());
        // Removed: member 2 moves into its place.
        ctl.arrays.borrow_mut()[0].members[1].state = GRAID_MEMBER_MISSING;
        let out = run(&ctl, &sys(), &parse("m").unwrap(), 2, &[], false, true).unwrap();
        assert!(out.contains("\"raid_devices\": 2"), "{out}");
        let after = ctl.arrays.borrow()[0];
        assert_eq!((after.members[1].dev.minor, after.members[1].state), (2, 0));
        // Three in it: one too many for two.
        let ctl = FakeControl::with(vec![array(0, "m", 1, &members[..2])]);
        ctl.arrays.borrow_mut()[0].nr_members = 3;
        ctl.arrays.borrow_mut()[0].members[2] = after.members[1];
        let err = run(&ctl, &sys(), &parse("m").unwrap(), 2, &[], false, false)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("3 are in it; fail and remove 1 first"),
            "{err}"
        );
    }

    #[test]
    fn other_levels_are_refused_with_the_reason() {
        let members = [(259, 0, 0), (259, 1, 0), (259, 2, 0)];
        let ctl = FakeControl::with(vec![array(0, "p", 5, &members)]);
        let err = run(&ctl, &sys(), &parse("p").unwrap(), 4, &[], false, false)
            .unwrap_err()
            .to_string();
        assert!(err.contains("only raid1"), "{err}");
        let ctl = FakeControl::with(vec![array(0, "m", 1, &members[..2])]);
        for count in [1, 33] {
            let err = run(&ctl, &sys(), &parse("m").unwrap(), count, &[], false, false)
                .unwrap_err()
                .to_string();
            assert!(
                err.contains("not a member count this array can have"),
                "{err}"
            );
        }
        let two = ["/dev/nvme2n1".to_owned(), "/dev/nvme3n1".to_owned()];
        let err = run(&ctl, &sys(), &parse("m").unwrap(), 3, &two, false, false)
            .unwrap_err()
            .to_string();
        assert!(err.contains("2 devices for 1 new role"), "{err}");
    }
}
