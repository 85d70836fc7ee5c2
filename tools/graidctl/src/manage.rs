//! `graidctl fail|remove|add ARRAY MEMBER...`: GRAID_IOC_MEMBER.
//!
//! Every MEMBER is checked against the array's DETAIL before anything is sent: a device that is
//! not a member (for `add`: one that is), or (for `remove`) a member still in use, is refused
//! with nothing changed. The module checks again (another tool may have changed the array
//! meanwhile) and refuses what would lose data.

use crate::array_ref::{self, resolve, ArrayRef};
use crate::control::{Control, ControlDevice};
use crate::errno::{ioctl_error, Op};
use crate::error::CtlError;
use crate::member::{Rdev, System};
use crate::output::{json, present_members, spare_devices, ArrayView};
use crate::signature;
use graid_abi::{
    GraidMember, GraidMemberOp, GRAID_MEMBER_ACTIVE, GRAID_MEMBER_MISSING, GRAID_MEMBER_OP_ADD,
    GRAID_MEMBER_OP_FAIL, GRAID_MEMBER_OP_REMOVE, GRAID_MEMBER_OP_REPLACE, GRAID_ROLE_NONE,
    GRAID_ROLE_SPARE,
};
use graid_engine::superblock::{decode, Slot};
use serde::Serialize;

/// What to do to the members.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Fail,
    Remove,
    Add,
    /// An add of a former member, back in its own role.
    ReAdd,
    /// `graidctl replace` (`replace.rs`).
    Replace,
}

impl Action {
    pub fn op(self) -> u32 {
        match self {
            Self::Fail => GRAID_MEMBER_OP_FAIL,
            Self::Remove => GRAID_MEMBER_OP_REMOVE,
            Self::Add | Self::ReAdd => GRAID_MEMBER_OP_ADD,
            Self::Replace => GRAID_MEMBER_OP_REPLACE,
        }
    }

    pub fn verb(self) -> &'static str {
        match self {
            Self::Fail => "fail",
            Self::Remove => "remove",
            Self::Add => "add",
            Self::ReAdd => "re-add",
            Self::Replace => "replace",
        }
    }

    pub fn done(self) -> &'static str {
        match self {
            Self::Fail => "failed",
            Self::Remove => "removed",
            Self::Add => "added",
            Self::ReAdd => "re-added",
            Self::Replace => "replacing",
        }
    }

    pub fn preposition(self) -> &'static str {
        match self {
            Self::Fail => "in",
            Self::Remove => "from",
            Self::Add | Self::ReAdd => "to",
            Self::Replace => "in",
        }
    }
}

/// The arguments of `fail` and `remove`.
#[derive(clap::Args, Debug)]
pub struct MemberArgs {
    /// The array (see ARRAY below).
    array: String,
    /// Member devices.
    #[arg(required = true)]
    members: Vec<String>,
}

/// The arguments of `add`.
#[derive(clap::Args, Debug)]
pub struct AddArgs {
    #[command(flatten)]
    target: MemberArgs,
    /// Add even a device that holds a filesystem, a partition table, an LVM physical volume or
    /// an md member (what libblkid finds; all are destroyed). A device in use (mounted, a
    /// swap, held by md or dm) is refused even so.
    #[arg(short, long)]
    force: bool,
}

/// `graidctl add ARRAY DEVICE...`: first refuses devices in use, and those holding a signature
/// unless `--force`.
pub fn add(args: &AddArgs, sys: &dyn System, json_out: bool) -> Result<String, CtlError> {
    let array = array_ref::parse(&args.target.array)?;
    let ctl = Control::open_checked()?;
    signature::check_devices(
        sys,
        &args.target.members,
        &signature::held_by_arrays(&ctl),
        args.force,
        "adding",
    )?;
    run(
        &ctl,
        sys,
        &array,
        &args.target.members,
        Action::Add,
        json_out,
    )
}

/// `graidctl fail|remove ARRAY MEMBER...` on the real control device.
pub fn main(
    args: &MemberArgs,
    action: Action,
    sys: &dyn System,
    json_out: bool,
) -> Result<String, CtlError> {
    let array = array_ref::parse(&args.array)?;
    let ctl = Control::open_checked()?;
    run(&ctl, sys, &array, &args.members, action, json_out)
}

/// One member changed, for `--json`.
#[derive(Debug, Serialize)]
struct Changed {
    member: String,
    major: u32,
    minor: u32,
    /// Its role; null for a spare.
    role: Option<u32>,
    /// The device was added as a spare, or a spare was removed.
    spare: bool,
    /// The device was a replacement (`graidctl replace`), failed: its replace stopped.
    replacement: bool,
}

#[derive(Debug, Serialize)]
struct Report {
    action: &'static str,
    changed: Vec<Changed>,
    /// The array afterwards.
    array: ArrayView,
}

pub fn run(
    ctl: &dyn ControlDevice,
    sys: &dyn System,
    array: &ArrayRef,
    members: &[String],
    action: Action,
    json_out: bool,
) -> Result<String, CtlError> {
    let detail = resolve(ctl, sys, array)?;
    let label = ArrayView::new(&detail, sys).label();
    let present = present_members(&detail);
    let spares = spare_devices(&detail);
    let mut targets = Vec::new();
    for path in members {
        let rdev = sys.block_rdev(path)?;
        let is_spare = spares.iter().any(|&s| Rdev::from(s) == rdev);
        if is_spare {
            if action != Action::Remove {
                return Err(CtlError::Failed(format!(
                    "cannot {} {path} ({rdev}) {} {label}: it is a spare of it already; \
                     nothing changed",
                    action.verb(),
                    action.preposition()
                )));
            }
            targets.push((path.as_str(), rdev, None));
            continue;
        }
        let replacing = detail.replace_role != GRAID_ROLE_NONE;
        if replacing && Rdev::from(detail.replace_dev) == rdev && action == Action::Fail {
            // Failing a replacement stops its replace (mdadm's way to cancel one).
            targets.push((path.as_str(), rdev, Some(detail.replace_role)));
            continue;
        }
        let is_member = |m: &&graid_abi::GraidMemberDetail| {
            m.state != GRAID_MEMBER_MISSING && Rdev::from(m.dev) == rdev
        };
        if action == Action::ReAdd {
            former_role(sys, path, &detail, &label)?;
        }
        if matches!(action, Action::Add | Action::ReAdd) {
            if present.iter().any(|m| is_member(&m)) {
                return Err(CtlError::Failed(format!(
                    "cannot add {path} ({rdev}) to {label}: it is a member already; nothing \
                     changed"
                )));
            }
            targets.push((path.as_str(), rdev, None));
            continue;
        }
        let member = present.iter().find(is_member).ok_or_else(|| {
            CtlError::Failed(format!("{path} ({rdev}) is not a member of {label}"))
        })?;
        if action == Action::Remove && member.state == GRAID_MEMBER_ACTIVE {
            return Err(CtlError::Failed(format!(
                "cannot remove {path} ({rdev}) from {label}: it is active; only a failed \
                 member can be removed (graidctl fail it first); nothing changed"
            )));
        }
        targets.push((path.as_str(), rdev, None));
    }
    let mut changed = Vec::new();
    for (path, rdev, replacing) in targets {
        let mut req = GraidMemberOp {
            index: detail.index,
            op: action.op(),
            dev: GraidMember {
                major: rdev.major,
                minor: rdev.minor,
            },
            flags: 0,
            role: 0,
            with: GraidMember::default(),
        };
        let description = format!("{path} ({rdev})");
        ctl.member(&mut req).map_err(|e| {
            let err = ioctl_error(
                Op::Member {
                    array: &label,
                    member: &description,
                    action,
                },
                &e,
            );
            with_done(err, &changed, action)
        })?;
        let spare = req.role == GRAID_ROLE_SPARE;
        changed.push(Changed {
            member: path.to_owned(),
            major: rdev.major,
            minor: rdev.minor,
            // A replacement's own index is no role: the replaced member's is.
            role: if spare {
                None
            } else {
                Some(replacing.unwrap_or(req.role))
            },
            spare,
            replacement: replacing.is_some(),
        });
    }
    if json_out {
        let after = ctl.detail(detail.index).unwrap_or(detail);
        return Ok(json(&Report {
            action: action.done(),
            changed,
            array: ArrayView::new(&after, sys),
        }));
    }
    let has_bitmap = detail.bitmap_region_sectors != 0;
    Ok(changed
        .iter()
        .map(|c| {
            let (done, member, to) = (action.done(), &c.member, action.preposition());
            match (c.role, action) {
                (Some(role), _) if c.replacement => format!(
                    "graidctl: {done} {member}, the replacement of role {role} in {label}: the \
                     replace stops (the member stays)\n"
                ),
                (Some(role), Action::ReAdd) if has_bitmap => format!(
                    "graidctl: re-added {member} (role {role}) to {label}, rebuilding what the \
                     write-intent bitmap marks as changed while it was away (in full if the \
                     array was whole again meanwhile; graidctl detail shows progress)\n"
                ),
                (Some(role), Action::ReAdd) => format!(
                    "graidctl: re-added {member} (role {role}) to {label}, rebuilding in full \
                     (without a write-intent bitmap nothing tells what changed while it was \
                     away; graidctl detail shows progress)\n"
                ),
                // A RAID 0 has nothing to rebuild a member from: its spares wait for a
                // restripe onto more members.
                (None, Action::Add) if detail.level == 0 => format!(
                    "graidctl: added {member} to {label} as a spare (it joins a restripe onto \
                     more members: graidctl grow --raid-devices)\n"
                ),
                (None, Action::Add) => format!(
                    "graidctl: added {member} to {label} as a spare (it takes the place of a \
                     member that fails)\n"
                ),
                (None, _) => format!("graidctl: {done} spare {member} {to} {label}\n"),
                (Some(role), Action::Add) => format!(
                    "graidctl: added {member} (role {role}) to {label}, rebuilding \
                     (graidctl detail shows progress)\n"
                ),
                (Some(role), _) => {
                    format!("graidctl: {done} {member} (role {role}) {to} {label}\n")
                }
            }
        })
        .collect())
}

/// `re-add`: the role `path` held in this array, by its superblock, if an add puts it back
/// there (that role is the first missing one); otherwise why not (nothing is sent then).
fn former_role(
    sys: &dyn System,
    path: &str,
    detail: &graid_abi::GraidDetail,
    label: &str,
) -> Result<u32, CtlError> {
    let refuse = |why: String| {
        Err(CtlError::Failed(format!(
            "cannot re-add {path} to {label}: {why}; nothing changed"
        )))
    };
    let sb = match sys.read_superblock(path).map(|block| decode(&block[..])) {
        Ok(Ok(sb)) => sb,
        _ => return refuse("it holds no readable graid superblock (graidctl add it)".into()),
    };
    if sb.array_uuid != detail.uuid {
        return refuse("it was no member of this array (graidctl add it)".into());
    }
    let role = match sb.slots.get(sb.this_slot as usize) {
        Some(Slot::Active { role }) => u32::from(*role),
        _ => return refuse("its superblock gives it no role (graidctl add it)".into()),
    };
    let first_missing = present_members(detail)
        .iter()
        .find(|m| m.state == GRAID_MEMBER_MISSING)
        .map(|m| m.role);
    match first_missing {
        Some(missing) if missing == role => Ok(role),
        Some(missing) => refuse(format!(
            "it held role {role}, but an add takes role {missing} first (graidctl add it there)"
        )),
        None => refuse(format!(
            "role {role} has a device (a failed one is removed first: graidctl remove)"
        )),
    }
}

/// `err`, saying which members were already changed when a later one failed.
fn with_done(err: CtlError, changed: &[Changed], action: Action) -> CtlError {
    if changed.is_empty() {
        return err;
    }
    let done: Vec<&str> = changed.iter().map(|c| c.member.as_str()).collect();
    let note = format!(" ({} before this: {})", action.done(), done.join(", "));
    match err {
        CtlError::Failed(m) => CtlError::Failed(m + &note),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::array_ref::parse;
    use crate::control::fake::{array, FakeControl};
    use crate::member::fake::FakeSystem;
    use graid_abi::GRAID_MEMBER_FAULTY;

    fn setup() -> (FakeControl, FakeSystem) {
        let sys = FakeSystem::with_disks(&["vda", "vdb", "vdc", "vdd", "vde"]);
        let ctl = FakeControl::with(vec![array(
            0,
            "data",
            10,
            &[
                (259, 0, GRAID_MEMBER_ACTIVE),
                (259, 1, GRAID_MEMBER_ACTIVE),
                (259, 2, GRAID_MEMBER_ACTIVE),
                (259, 3, GRAID_MEMBER_ACTIVE),
            ],
        )]);
        (ctl, sys)
    }

    fn go(
        ctl: &FakeControl,
        sys: &FakeSystem,
        members: &[&str],
        action: Action,
    ) -> Result<String, CtlError> {
        let members: Vec<String> = members.iter().map(|m| (*m).to_owned()).collect();
        run(ctl, sys, &parse("data").unwrap(), &members, action, false)
    }

    #[test]
    fn re_add_puts_a_former_member_back_in_its_role_only() {
        use crate::sbio::testutil::{block, sample};
        let (ctl, mut sys) = setup();
        // vdb (role 1) failed and was removed; vde and vdf carry superblocks.
        go(&ctl, &sys, &["/dev/vdb"], Action::Fail).unwrap();
        go(&ctl, &sys, &["/dev/vdb"], Action::Remove).unwrap();
        let ours = [1u8; 16];
        let with_sb = |name: &str, minor: u32, uuid: [u8; 16], role: u8| {
            (
                format!("/dev/{name}"),
                Rdev { major: 259, minor },
                Some(block(&sample("data", uuid, role, 9))),
            )
        };
        sys.devices.push(with_sb("vdf", 5, [9; 16], 1));
        sys.devices.push(with_sb("vdg", 6, ours, 0));
        sys.devices.push(with_sb("vdh", 7, ours, 1));
        for (dev, why) in [
            ("/dev/vdc", "no readable graid superblock"),
            ("/dev/vdf", "no member of this array"),
            ("/dev/vdg", "it held role 0, but an add takes role 1 first"),
        ] {
            let err = go(&ctl, &sys, &[dev], Action::ReAdd)
                .unwrap_err()
                .to_string();
            assert!(err.contains(why), "{dev}: {err}");
            assert!(err.contains("nothing changed"), "{err}");
        }
        let before = ctl.member_ops.borrow().len();
        let out = go(&ctl, &sys, &["/dev/vdh"], Action::ReAdd).unwrap();
        assert!(out.contains("re-added /dev/vdh (role 1)"), "{out}");
        assert!(out.contains("rebuilding in full"), "{out}");
        {
            let ops = ctl.member_ops.borrow();
            assert_eq!(ops.len(), before + 1);
            assert_eq!(ops[before].op, GRAID_MEMBER_OP_ADD);
        }
        ctl.arrays.borrow_mut()[0].bitmap_region_sectors = 1 << 17;
        ctl.arrays.borrow_mut()[0].members[1].state = graid_abi::GRAID_MEMBER_MISSING;
        let out = go(&ctl, &sys, &["/dev/vdh"], Action::ReAdd).unwrap();
        assert!(
            out.contains("rebuilding what the write-intent bitmap marks"),
            "{out}"
        );
    }

    #[test]
    fn fail_then_remove_a_member() {
        let (ctl, sys) = setup();
        let out = go(&ctl, &sys, &["/dev/vdb"], Action::Fail).unwrap();
        assert_eq!(
            out,
            "graidctl: failed /dev/vdb (role 1) in /dev/graid0 (data)\n"
        );
        assert_eq!(ctl.arrays.borrow()[0].members[1].state, GRAID_MEMBER_FAULTY);
        let out = go(&ctl, &sys, &["/dev/vdb"], Action::Remove).unwrap();
        assert_eq!(
            out,
            "graidctl: removed /dev/vdb (role 1) from /dev/graid0 (data)\n"
        );
        let ops = ctl.member_ops.borrow();
        assert_eq!(ops.len(), 2);
        assert_eq!(
            (ops[0].op, ops[1].op),
            (GRAID_MEMBER_OP_FAIL, GRAID_MEMBER_OP_REMOVE)
        );
        assert_eq!(
            ops[1].dev,
            GraidMember {
                major: 259,
                minor: 1
            }
        );
        assert_eq!(
            ctl.arrays.borrow()[0].members[1].state,
            GRAID_MEMBER_MISSING
        );
    }

    #[test]
    fn add_to_an_optimal_array_makes_a_spare_which_remove_releases() {
        let (ctl, sys) = setup();
        let out = go(&ctl, &sys, &["/dev/vde"], Action::Add).unwrap();
        assert_eq!(
            out,
            "graidctl: added /dev/vde to /dev/graid0 (data) as a spare (it takes the place of \
             a member that fails)\n"
        );
        assert_eq!(ctl.arrays.borrow()[0].nr_spares, 1);
        for action in [Action::Add, Action::Fail] {
            let err = go(&ctl, &sys, &["/dev/vde"], action).unwrap_err();
            assert!(
                err.to_string().contains("it is a spare of it already"),
                "{err}"
            );
        }
        assert_eq!(
            ctl.member_ops.borrow().len(),
            1,
            "a refusal reached the module"
        );
        let out = go(&ctl, &sys, &["/dev/vde"], Action::Remove).unwrap();
        assert_eq!(
            out,
            "graidctl: removed spare /dev/vde from /dev/graid0 (data)\n"
        );
        assert_eq!(ctl.arrays.borrow()[0].nr_spares, 0);
        let (ctl, sys) = setup();
        let members: Vec<String> = vec!["/dev/vde".to_owned()];
        let json_out = run(
            &ctl,
            &sys,
            &parse("data").unwrap(),
            &members,
            Action::Add,
            true,
        );
        let v: serde_json::Value = serde_json::from_str(&json_out.unwrap()).unwrap();
        assert_eq!(v["changed"][0]["spare"], true);
        assert!(v["changed"][0]["role"].is_null());
        assert_eq!(v["array"]["spares"][0]["device"], "/dev/vde");
    }

    #[test]
    fn add_takes_the_removed_role_and_refuses_a_member() {
        let (ctl, sys) = setup();
        go(&ctl, &sys, &["/dev/vdb"], Action::Fail).unwrap();
        go(&ctl, &sys, &["/dev/vdb"], Action::Remove).unwrap();
        let err = go(&ctl, &sys, &["/dev/vdc"], Action::Add).unwrap_err();
        assert!(
            err.to_string()
                .contains("is a member already; nothing changed"),
            "{err}"
        );
        assert_eq!(ctl.member_ops.borrow().len(), 2);
        let out = go(&ctl, &sys, &["/dev/vde"], Action::Add).unwrap();
        assert_eq!(
            out,
            "graidctl: added /dev/vde (role 1) to /dev/graid0 (data), rebuilding \
             (graidctl detail shows progress)\n"
        );
        assert_eq!(ctl.member_ops.borrow()[2].op, GRAID_MEMBER_OP_ADD);
        assert_eq!(
            ctl.arrays.borrow()[0].members[1].state,
            graid_abi::GRAID_MEMBER_REBUILDING
        );
        // The module's refusal comes back explained.
        ctl.fail.borrow_mut().push(("member", libc::EOPNOTSUPP));
        let err = go(&ctl, &sys, &["/dev/vdb"], Action::Add).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("cannot add /dev/vdb (259:1) to /dev/graid0 (data): RAID 0 keeps"),
            "{err}"
        );
    }

    #[test]
    fn refusals_send_nothing() {
        let (ctl, sys) = setup();
        // Not a member.
        let err = go(&ctl, &sys, &["/dev/vdb", "/dev/vde"], Action::Fail).unwrap_err();
        assert_eq!(
            err.to_string(),
            "/dev/vde (259:4) is not a member of /dev/graid0 (data)"
        );
        // An active member cannot be removed.
        let err = go(&ctl, &sys, &["/dev/vdc"], Action::Remove).unwrap_err();
        assert!(err.to_string().contains("it is active"), "{err}");
        // No such device at all.
        assert!(go(&ctl, &sys, &["/dev/nope"], Action::Fail).is_err());
        assert!(ctl.member_ops.borrow().is_empty());
    }

    #[test]
    fn module_refusal_names_the_member_and_what_was_done() {
        let (ctl, sys) = setup();
        ctl.fail.borrow_mut().push(("member", libc::EBUSY));
        let err = go(&ctl, &sys, &["/dev/vda"], Action::Fail).unwrap_err();
        assert_eq!(
            err.to_string(),
            "cannot fail /dev/vda (259:0) in /dev/graid0 (data): it holds the last copy of \
             some data: failing it would lose data, or a resync heals the parity a helper caught \
             lying may have computed (graidctl wait, then fail it) (nothing changed) (EBUSY)"
        );
        assert_eq!(ctl.arrays.borrow()[0].members[0].state, GRAID_MEMBER_ACTIVE);
    }

    #[test]
    fn json_reports_the_changed_members_and_the_array_after() {
        let (ctl, sys) = setup();
        let members = vec!["/dev/vda".to_owned(), "/dev/vdc".to_owned()];
        let out = run(
            &ctl,
            &sys,
            &parse("/dev/graid0").unwrap(),
            &members,
            Action::Fail,
            true,
        )
        .unwrap();
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["action"], "failed");
        assert_eq!(v["changed"][1]["member"], "/dev/vdc");
        assert_eq!(v["changed"][1]["role"], 2);
        assert_eq!(v["array"]["members"][2]["state"], "faulty");
    }
}
