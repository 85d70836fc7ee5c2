//! `graidctl replace ARRAY MEMBER [--with NEW] [--wait]`: GRAID_IOC_MEMBER's REPLACE (mdadm's
//! `--replace --with`).
//!
//! The member keeps serving while NEW is copied from it in the background and gets every write;
//! once NEW holds everything it takes the member's place and the old device leaves the array.
//! What makes no sense is refused from DETAIL before anything is sent, with nothing changed;
//! the module checks again.

use crate::array_ref::{self, resolve, ArrayRef};
use crate::control::{Control, ControlDevice};
use crate::errno::{ioctl_error, Op};
use crate::error::CtlError;
use crate::manage::Action;
use crate::member::{Rdev, System};
use crate::output::{json, ArrayView};
use crate::signature;
use crate::wait;
use graid_abi::{GraidMember, GraidMemberOp};
use serde::Serialize;

/// The arguments of `replace`.
#[derive(clap::Args, Debug)]
pub struct ReplaceArgs {
    /// The array (see ARRAY below).
    array: String,
    /// The member to replace: active and in sync.
    member: String,
    /// The device that takes its place: a spare of the array, or a device that is added as
    /// one first. Without it, a spare of the array.
    #[arg(long)]
    with: Option<String>,
    /// Wait until the replace ends, showing its progress (as `graidctl wait` does).
    #[arg(long)]
    wait: bool,
    /// Take even a --with device that holds a filesystem, a partition table, an LVM physical
    /// volume or an md member (what libblkid finds; all are destroyed). A device in use
    /// (mounted, a swap, held by md or dm) is refused even so.
    #[arg(short, long)]
    force: bool,
}

/// `graidctl replace` on the real control device.
pub fn main(args: &ReplaceArgs, sys: &dyn System, json_out: bool) -> Result<String, CtlError> {
    let array = array_ref::parse(&args.array)?;
    let ctl = Control::open_checked()?;
    if let Some(with) = &args.with {
        signature::check_devices(
            sys,
            std::slice::from_ref(with),
            &signature::held_by_arrays(&ctl),
            args.force,
            "replacing a member by",
        )?;
    }
    let started = run(
        &ctl,
        sys,
        &array,
        &args.member,
        args.with.as_deref(),
        json_out,
    )?;
    if !args.wait {
        return Ok(started);
    }
    print!("{started}");
    let progress = wait::Progress::for_output(json_out);
    let mut pause = || std::thread::sleep(wait::POLL);
    wait::run(&ctl, sys, &array, &progress, json_out, &mut pause)
}

#[derive(Debug, Serialize)]
struct Report {
    action: &'static str,
    member: String,
    role: u32,
    /// The replacement's device as given (null: a spare of the array).
    with: Option<String>,
    /// The array afterwards.
    array: ArrayView,
}

/// Starts the replace of `member` by `with` (a spare of the array when `None`).
pub fn run(
    ctl: &dyn ControlDevice,
    sys: &dyn System,
    array: &ArrayRef,
    member: &str,
    with: Option<&str>,
    json_out: bool,
) -> Result<String, CtlError> {
    let detail = resolve(ctl, sys, array)?;
    let view = ArrayView::new(&detail, sys);
    let label = view.label();
    let refuse = |why: String| {
        Err(CtlError::Failed(format!(
            "cannot replace {member} in {label}: {why}; nothing changed"
        )))
    };
    let rdev = sys.block_rdev(member)?;
    let holding = |dev: Rdev| {
        view.members
            .iter()
            .find(move |m| m.state != "missing" && m.rdev() == dev)
    };
    let Some(target) = holding(rdev) else {
        return refuse(format!("{rdev} is not a member of it"));
    };
    if view.level == "raid0" {
        return refuse("RAID 0 keeps no copy or parity to fall back on (md refuses too)".into());
    }
    if let Some(r) = &view.replace {
        return refuse(format!(
            "a replace of role {} runs already (graidctl wait {} shows it)",
            r.role, view.device
        ));
    }
    if target.state != "active" {
        return refuse(format!(
            "it is {}: a failed member is not replaced but removed, and a new device added in \
             its place (graidctl remove, add)",
            target.state
        ));
    }
    if let Some(r) = &view.rebuild {
        return refuse(format!(
            "role {} is being rebuilt (graidctl wait {} first)",
            r.role, view.device
        ));
    }
    if view.members.iter().any(|m| m.state != "active") {
        return refuse(
            "the array is degraded: a device added goes in the missing member's place first \
             (graidctl add)"
                .into(),
        );
    }
    if let Some(s) = &view.scrub {
        return refuse(format!(
            "a {} runs (graidctl wait {} first)",
            s.action, view.device
        ));
    }
    let with_rdev = match with {
        Some(path) => {
            let new = sys.block_rdev(path)?;
            if holding(new).is_some() {
                return refuse(format!("{path} ({new}) is a member of it already"));
            }
            new
        }
        None if view.spares.is_empty() => {
            return refuse("it has no spare (name the new device with --with)".into());
        }
        None => Rdev::from(GraidMember::default()),
    };
    let mut req = GraidMemberOp {
        index: detail.index,
        op: Action::Replace.op(),
        dev: GraidMember {
            major: rdev.major,
            minor: rdev.minor,
        },
        flags: 0,
        role: 0,
        with: GraidMember {
            major: with_rdev.major,
            minor: with_rdev.minor,
        },
    };
    let description = format!("{member} ({rdev})");
    ctl.member(&mut req).map_err(|e| {
        ioctl_error(
            Op::Member {
                array: &label,
                member: &description,
                action: Action::Replace,
            },
            &e,
        )
    })?;
    let after = ctl.detail(detail.index).unwrap_or(detail);
    let after = ArrayView::new(&after, sys);
    if json_out {
        return Ok(json(&Report {
            action: Action::Replace.done(),
            member: member.to_owned(),
            role: req.role,
            with: with.map(str::to_owned),
            array: after,
        }));
    }
    let new = match (&after.replace, with) {
        (Some(r), _) => r.device_text(),
        (None, Some(path)) => path.to_owned(),
        (None, None) => "a spare".to_owned(),
    };
    Ok(format!(
        "graidctl: replacing {member} (role {}) in {label} by {new}: copying in the \
         background; it takes the member's place when done (graidctl wait {} shows progress)\n",
        req.role, after.device
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::array_ref::parse;
    use crate::control::fake::{array, FakeControl};
    use crate::member::fake::FakeSystem;
    use graid_abi::{
        GRAID_MEMBER_ACTIVE, GRAID_MEMBER_FAULTY, GRAID_MEMBER_OP_REPLACE, GRAID_MEMBER_REBUILDING,
    };

    fn setup(states: &[u32]) -> (FakeControl, FakeSystem) {
        let sys = FakeSystem::with_disks(&["vda", "vdb", "vdc", "vdd", "vde"]);
        let members: Vec<_> = (0u32..)
            .zip(states)
            .map(|(i, &state)| (259, i, state))
            .collect();
        (FakeControl::with(vec![array(0, "data", 1, &members)]), sys)
    }

    fn go(ctl: &FakeControl, sys: &FakeSystem, with: Option<&str>) -> Result<String, CtlError> {
        run(ctl, sys, &parse("data").unwrap(), "/dev/vdb", with, false)
    }

    #[test]
    fn sends_replace_with_both_devices() {
        let (ctl, sys) = setup(&[GRAID_MEMBER_ACTIVE, GRAID_MEMBER_ACTIVE]);
        let out = go(&ctl, &sys, Some("/dev/vdd")).unwrap();
        let sent = ctl.member_ops.borrow();
        assert_eq!(sent.len(), 1);
        assert_eq!(sent[0].op, GRAID_MEMBER_OP_REPLACE);
        assert_eq!((sent[0].dev.major, sent[0].dev.minor), (259, 1));
        assert_eq!((sent[0].with.major, sent[0].with.minor), (259, 3));
        assert!(out.contains("replacing /dev/vdb (role 1)"), "{out}");
    }

    #[test]
    fn refuses_what_makes_no_sense_and_sends_nothing() {
        for (states, with, why) in [
            (
                &[GRAID_MEMBER_ACTIVE, GRAID_MEMBER_FAULTY][..],
                Some("/dev/vdd"),
                "it is faulty",
            ),
            (
                &[GRAID_MEMBER_ACTIVE, GRAID_MEMBER_REBUILDING],
                Some("/dev/vdd"),
                "it is rebuilding",
            ),
            (
                &[GRAID_MEMBER_FAULTY, GRAID_MEMBER_ACTIVE],
                Some("/dev/vdd"),
                "degraded",
            ),
            (
                &[GRAID_MEMBER_ACTIVE, GRAID_MEMBER_ACTIVE],
                Some("/dev/vda"),
                "a member of it already",
            ),
            (
                &[GRAID_MEMBER_ACTIVE, GRAID_MEMBER_ACTIVE],
                None,
                "no spare",
            ),
        ] {
            let (ctl, sys) = setup(states);
            let err = go(&ctl, &sys, with).unwrap_err().to_string();
            assert!(err.contains(why), "{err}");
            assert!(err.contains("nothing changed"), "{err}");
            assert!(ctl.member_ops.borrow().is_empty());
        }
        // Not a member at all.
        let (ctl, sys) = setup(&[GRAID_MEMBER_ACTIVE, GRAID_MEMBER_ACTIVE]);
        let err = run(&ctl, &sys, &parse("data").unwrap(), "/dev/vde", None, false)
            .unwrap_err()
            .to_string();
        assert!(err.contains("is not a member"), "{err}");
    }

    #[test]
    fn refuses_raid0_and_a_second_replace() {
        let (ctl, sys) = setup(&[GRAID_MEMBER_ACTIVE, GRAID_MEMBER_ACTIVE]);
        ctl.arrays.borrow_mut()[0].level = 0;
        let err = go(&ctl, &sys, Some("/dev/vdd")).unwrap_err().to_string();
        assert!(err.contains("RAID 0"), "{err}");

        let (ctl, sys) = setup(&[GRAID_MEMBER_ACTIVE, GRAID_MEMBER_ACTIVE]);
        ctl.arrays.borrow_mut()[0].replace_role = 0;
        let err = go(&ctl, &sys, Some("/dev/vdd")).unwrap_err().to_string();
        assert!(err.contains("a replace of role 0 runs already"), "{err}");
    }
}
