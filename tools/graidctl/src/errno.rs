//! Turning an ioctl's errno into a message that says what went wrong, in the words of the
//! operation that failed (documented in Documentation/graidctl.rst).

use crate::error::CtlError;
use crate::manage::Action;
use std::io;

/// The ioctl that failed, with what graidctl knows about its target.
#[derive(Clone, Copy, Debug)]
pub enum Op<'a> {
    /// Creating array `name`.
    Create { name: &'a str },
    /// Assembling; `member` is the refused member's description when the module named one.
    Assemble { member: Option<&'a str> },
    /// Stopping `array` (e.g. `/dev/graid0 (data)`), open `open_count` times when last asked.
    Stop {
        array: &'a str,
        force: bool,
        open_count: u32,
    },
    /// Listing arrays.
    List,
    /// Describing `array`.
    Detail { array: &'a str },
    /// Failing, removing or adding `member` of `array`.
    Member {
        array: &'a str,
        member: &'a str,
        action: Action,
    },
    /// Setting or reading the rebuild speed of `array`.
    Speed { array: &'a str },
    /// Starting or stopping `what` (check, repair) on `array`.
    Scrub { array: &'a str, what: &'a str },
    /// Growing `array`.
    Resize { array: &'a str },
    /// Changing `array`'s member count.
    Reshape { array: &'a str },
    /// Reading the parity helper's status.
    HelperStatus,
}

impl Op<'_> {
    fn ioctl(&self) -> &'static str {
        match self {
            Op::Create { .. } => "CREATE",
            Op::Assemble { .. } => "ASSEMBLE",
            Op::Stop { .. } => "STOP",
            Op::List => "LIST",
            Op::Detail { .. } => "DETAIL",
            Op::Member { .. } => "MEMBER",
            Op::Speed { .. } => "SPEED",
            Op::Scrub { .. } => "SCRUB",
            Op::Resize { .. } => "RESIZE",
            Op::Reshape { .. } => "RESHAPE",
            Op::HelperStatus => "HELPER_STATUS",
        }
    }

    fn failed(&self) -> String {
        match self {
            Op::Create { name } => format!("cannot create array '{name}'"),
            Op::Assemble { member: Some(m) } => format!("cannot assemble: member {m}"),
            Op::Assemble { member: None } => "cannot assemble".to_owned(),
            Op::Stop { array, .. } => format!("cannot stop {array}"),
            Op::List => "cannot list arrays".to_owned(),
            Op::Detail { array } => format!("cannot describe {array}"),
            Op::Speed { array } => format!("cannot set the rebuild speed of {array}"),
            Op::Scrub { array, what } => format!("cannot {what} {array}"),
            Op::Resize { array } => format!("cannot grow {array}"),
            Op::Reshape { array } => format!("cannot change the member count of {array}"),
            Op::HelperStatus => "cannot read the parity helper's status".to_owned(),
            Op::Member {
                array,
                member,
                action,
            } => format!(
                "cannot {} {member} {} {array}",
                action.verb(),
                action.preposition()
            ),
        }
    }
}

/// The symbolic name of the errnos graidctl explains, for the end of its messages.
pub fn errno_name(errno: i32) -> Option<&'static str> {
    Some(match errno {
        libc::EPERM => "EPERM",
        libc::EACCES => "EACCES",
        libc::ENOTTY => "ENOTTY",
        libc::EFAULT => "EFAULT",
        libc::EINVAL => "EINVAL",
        libc::EBUSY => "EBUSY",
        libc::EEXIST => "EEXIST",
        libc::ENODEV => "ENODEV",
        libc::ENXIO => "ENXIO",
        libc::ENOENT => "ENOENT",
        libc::ENOSPC => "ENOSPC",
        libc::E2BIG => "E2BIG",
        libc::ESTALE => "ESTALE",
        libc::EUCLEAN => "EUCLEAN",
        libc::EMEDIUMTYPE => "EMEDIUMTYPE",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        libc::EXDEV => "EXDEV",
        libc::ENODATA => "ENODATA",
        libc::EIO => "EIO",
        libc::EROFS => "EROFS",
        libc::ENOMEM => "ENOMEM",
        libc::EINTR => "EINTR",
        libc::EAGAIN => "EAGAIN",
        _ => return None,
    })
}

/// Why `op` failed with `errno`, without the operation itself.
fn reason(op: &Op<'_>, errno: i32) -> String {
    let is_member_op = matches!(op, Op::Create { .. } | Op::Assemble { .. });
    let named_member = matches!(op, Op::Assemble { member: Some(_) });
    match errno {
        libc::EINVAL => match op {
            Op::Create { .. } => "invalid argument: the module refused the level, chunk size, \
                                  member count, name, UUID or flags, or a device given twice \
                                  (under two names)"
                .to_owned(),
            Op::Assemble { .. } => {
                "invalid argument: the module refused the member list or flags".to_owned()
            }
            Op::Stop { .. } => "invalid argument: the module refused the index or flags".to_owned(),
            Op::Resize { .. } => {
                "not a size this array can have (less than a chunk per member, or too large)"
                    .to_owned()
            }
            Op::Reshape { .. } => {
                "not a member count this array can have (2 to 32 copies)".to_owned()
            }
            _ => "invalid argument".to_owned(),
        },
        libc::EBUSY if matches!(op, Op::Reshape { .. }) => {
            "a member past the new count is still in the array (fail and remove it first), or \
             a rebuild, replace, check, repair or resync runs or is pending (graidctl wait), or \
             its I/O did not drain in time (nothing changed)"
                .to_owned()
        }
        libc::EOPNOTSUPP if matches!(op, Op::Reshape { .. }) => {
            "only a raid1 array changes its member count yet (more or fewer copies); \
             restriping raid0/5/6 and level, layout and chunk changes are not supported \
             (nothing changed)"
                .to_owned()
        }
        libc::EIO if matches!(op, Op::Reshape { .. }) => {
            "the new count could not be recorded in any member's superblock (the array is \
             broken: reads go on, writes fail)"
                .to_owned()
        }
        libc::EBUSY if matches!(op, Op::Resize { .. }) => {
            "the array is not optimal (degraded or rebuilding), or a rebuild, replace, check, \
             repair, resync or heal runs or is pending (graidctl wait, or check --stop), or its \
             I/O did not drain in time (nothing changed)"
                .to_owned()
        }
        libc::EOPNOTSUPP if matches!(op, Op::Resize { .. }) => {
            "smaller than the array is now, and not asked for as a shrink (nothing changed)"
                .to_owned()
        }
        libc::ENOSPC if matches!(op, Op::Resize { .. }) => {
            "a member or spare has no room for it, or the write-intent bitmap has no room \
             for that many regions at any chunk size (nothing changed)"
                .to_owned()
        }
        libc::EIO if matches!(op, Op::Resize { .. }) => {
            "the new size could not be recorded in any member's superblock (the array is \
             broken: reads go on, writes fail)"
                .to_owned()
        }
        libc::EBUSY if matches!(op, Op::Scrub { .. }) => {
            "the array is not optimal (degraded or rebuilding): a check or repair needs every \
             member in sync (graidctl wait for the rebuild first), another member operation \
             is running, or (a check) the array is still resyncing (graidctl wait)"
                .to_owned()
        }
        libc::EBUSY => match op {
            Op::Member {
                action: Action::Fail,
                ..
            } => "it holds the last copy of some data: failing it would lose data, or a \
                  resync heals the parity a helper caught lying may have computed (graidctl \
                  wait, then fail it) (nothing changed)"
                .to_owned(),
            Op::Member {
                action: Action::Add | Action::ReAdd,
                ..
            } => "another member operation is running (nothing changed)".to_owned(),
            Op::Member {
                action: Action::Replace,
                ..
            } => "a replace, rebuild, check or repair runs, or the array is degraded (rebuild \
                  it first), or the member is not in sync, or another member operation is \
                  running (nothing changed)"
                .to_owned(),
            Op::Member {
                action: Action::Remove,
                ..
            } => "it is in use: only a failed member can be removed (graidctl fail it first), \
                 or the array's I/O did not drain in time, or another member operation is \
                 running (nothing changed)"
                .to_owned(),
            Op::Stop {
                force: false,
                open_count,
                ..
            } => format!(
                "the array is in use (open {open_count} time(s)); unmount or close it \
                 first (--force cannot stop an open array either)"
            ),
            Op::Stop { force: true, .. } => {
                "the array is in use and cannot be stopped without losing I/O".to_owned()
            }
            _ if named_member => "in use (mounted, held open exclusively, or a member of a \
                                  running array)"
                .to_owned(),
            _ if is_member_op => "a member is in use (mounted, held open exclusively, or a \
                                  member of a running array)"
                .to_owned(),
            _ => "device or resource busy".to_owned(),
        },
        libc::EEXIST if matches!(op, Op::Member { .. }) => {
            "already a member or spare of this array".to_owned()
        }
        libc::EEXIST => match op {
            Op::Create { name } => format!("an array named '{name}' (or with this UUID) exists"),
            Op::Assemble { .. } => {
                "the array is already running (or another array has its name)".to_owned()
            }
            _ => "already exists".to_owned(),
        },
        libc::ENXIO if matches!(op, Op::Member { .. }) => {
            "not a member or spare of this array (any more)".to_owned()
        }
        libc::ENODEV | libc::ENXIO => match op {
            Op::Stop { .. }
            | Op::Detail { .. }
            | Op::Member { .. }
            | Op::Speed { .. }
            | Op::Scrub { .. }
            | Op::Resize { .. }
            | Op::Reshape { .. } => "no such array".to_owned(),
            _ if named_member => "no such device".to_owned(),
            // The module names no member: every device opened, but a role has none.
            Op::Assemble { .. } if errno == libc::ENODEV => {
                "the array is incomplete: a member (role) is missing (graidctl assemble --run \
                 starts it degraded)"
                    .to_owned()
            }
            _ if is_member_op => "a member device does not exist".to_owned(),
            _ => "no such device".to_owned(),
        },
        libc::ENOENT if matches!(op, Op::Member { .. }) => {
            "the array has no spare to replace it with (name a device with --with)".to_owned()
        }
        libc::E2BIG if matches!(op, Op::Member { .. }) => {
            "the array has 32 members: a replace needs one place more (fail, remove and add \
             instead)"
                .to_owned()
        }
        libc::ENOSPC if matches!(op, Op::Member { .. }) => {
            "too small for the array's data area, or the array has as many spares as it can \
             hold (8), or the superblock's device table is full"
                .to_owned()
        }
        libc::ENOSPC | libc::E2BIG => match op {
            Op::Create { .. } => {
                "a member is too small (each needs 2 MiB for metadata plus room for data)"
                    .to_owned()
            }
            _ if named_member => "too small for the data area its superblock describes".to_owned(),
            _ => "a member is too small for the array".to_owned(),
        },
        libc::ESTALE if named_member => "stale: its superblock missed updates the other \
                                         members have (event counter behind)"
            .to_owned(),
        libc::ESTALE => "a member is stale (its superblock missed updates)".to_owned(),
        libc::EUCLEAN if named_member => "bad or corrupt graid superblock (graidctl examine \
                                          shows why)"
            .to_owned(),
        libc::EUCLEAN => "a member has a bad or corrupt graid superblock".to_owned(),
        libc::ENODATA if named_member => "no graid superblock".to_owned(),
        libc::ENODATA => "a member has no graid superblock".to_owned(),
        libc::EXDEV if matches!(op, Op::Member { .. }) => {
            "it carries the superblock of another array (graidctl zero-superblock erases it, \
             if its data is not needed)"
                .to_owned()
        }
        libc::EXDEV if named_member => {
            "belongs to another array (its array UUID differs)".to_owned()
        }
        libc::EXDEV => "the members belong to different arrays (array UUIDs differ)".to_owned(),
        libc::EMEDIUMTYPE if named_member => {
            "is a zoned device (graid needs conventional block devices)".to_owned()
        }
        libc::EMEDIUMTYPE => {
            "a member is a zoned device (graid needs conventional block devices)".to_owned()
        }
        libc::EOPNOTSUPP if matches!(op, Op::Member { .. } | Op::Scrub { .. }) => {
            "RAID 0 keeps no copy or parity to rebuild or compare".to_owned()
        }
        libc::EOPNOTSUPP if matches!(op, Op::Assemble { .. }) => {
            "a reshape is in progress on these members, which this version of graid cannot \
             continue (graidctl examine shows it; nothing changed)"
                .to_owned()
        }
        libc::EOPNOTSUPP if matches!(op, Op::Create { .. }) => {
            "a member cannot zero its data area with its own zeroing command (write zeroes); \
             use --assume-clean only if the members hold identical data, or neither flag and \
             resync later"
                .to_owned()
        }
        libc::EIO if matches!(op, Op::Member { .. }) => {
            "the change could not be recorded in any member's superblock (the array is \
             broken: reads go on, writes fail)"
                .to_owned()
        }
        libc::EIO => "I/O error on a member".to_owned(),
        libc::EROFS if named_member => "read-only device".to_owned(),
        libc::EROFS => "a member is read-only".to_owned(),
        libc::ENOMEM => "the kernel is out of memory".to_owned(),
        libc::EINTR | libc::EAGAIN => "interrupted; try again".to_owned(),
        libc::EFAULT => "internal error: the module could not access the ioctl argument".to_owned(),
        _ => io::Error::from_raw_os_error(errno).to_string(),
    }
}

/// The error graidctl reports when `op`'s ioctl fails with `err`.
pub fn ioctl_error(op: Op<'_>, err: &io::Error) -> CtlError {
    let Some(errno) = err.raw_os_error() else {
        return CtlError::Failed(format!("{}: {err}", op.failed()));
    };
    let suffix = errno_name(errno).map_or(String::new(), |n| format!(" ({n})"));
    match errno {
        libc::EPERM | libc::EACCES => CtlError::Denied(format!(
            "{}: permission denied: graid's ioctls need root (CAP_SYS_ADMIN){suffix}",
            op.failed()
        )),
        libc::ENOTTY => CtlError::Unsupported(format!(
            "{}: the loaded raid_gpu module does not implement the {} ioctl (older than \
             graidctl?){suffix}",
            op.failed(),
            op.ioctl()
        )),
        _ => CtlError::Failed(format!("{}: {}{suffix}", op.failed(), reason(&op, errno))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{EXIT_ABI_MISMATCH, EXIT_FAILURE, EXIT_PERMISSION};

    fn msg(op: Op<'_>, errno: i32) -> (String, u8) {
        let e = ioctl_error(op, &io::Error::from_raw_os_error(errno));
        (e.to_string(), e.exit_code())
    }

    #[test]
    fn assemble_without_a_named_member_says_a_role_is_missing() {
        let (m, _) = msg(Op::Assemble { member: None }, libc::ENODEV);
        assert!(m.contains("a member (role) is missing"), "{m}");
        let (m, _) = msg(Op::Assemble { member: None }, libc::ENXIO);
        assert!(m.contains("does not exist"), "{m}");
    }

    #[test]
    fn create_errors_name_the_array_and_reason() {
        let op = Op::Create { name: "data" };
        let (m, code) = msg(op, libc::EEXIST);
        assert_eq!(
            m,
            "cannot create array 'data': an array named 'data' (or with this UUID) exists (EEXIST)"
        );
        assert_eq!(code, EXIT_FAILURE);
        assert!(msg(op, libc::ENOSPC).0.contains("too small"));
        assert!(msg(op, libc::E2BIG).0.contains("too small"));
        assert!(msg(op, libc::EBUSY).0.contains("a member is in use"));
        assert!(msg(op, libc::EINVAL).0.contains("invalid argument"));
    }

    #[test]
    fn assemble_errors_name_the_refused_member() {
        let op = Op::Assemble {
            member: Some("/dev/sdb (8:16)"),
        };
        assert_eq!(
            msg(op, libc::ESTALE).0,
            "cannot assemble: member /dev/sdb (8:16): stale: its superblock missed updates the \
             other members have (event counter behind) (ESTALE)"
        );
        assert!(msg(op, libc::EXDEV).0.contains("another array"));
        assert!(msg(op, libc::EMEDIUMTYPE).0.contains("zoned"));
        assert!(msg(op, libc::ENOSPC).0.contains("too small"));
        assert!(msg(op, libc::EUCLEAN).0.contains("corrupt"));
        let anon = Op::Assemble { member: None };
        assert!(msg(anon, libc::ESTALE).0.contains("a member is stale"));
    }

    #[test]
    fn stop_busy_suggests_force_with_the_open_count() {
        let op = Op::Stop {
            array: "/dev/graid0 (data)",
            force: false,
            open_count: 2,
        };
        let (m, _) = msg(op, libc::EBUSY);
        assert!(m.starts_with("cannot stop /dev/graid0 (data): "), "{m}");
        assert!(m.contains("open 2 time(s)") && m.contains("--force"), "{m}");
        assert!(msg(op, libc::ENODEV).0.contains("no such array"));
    }

    #[test]
    fn member_refusals_say_why() {
        let fail = Op::Member {
            array: "/dev/graid0 (data)",
            member: "/dev/vdb (254:16)",
            action: Action::Fail,
        };
        assert_eq!(
            msg(fail, libc::EBUSY).0,
            "cannot fail /dev/vdb (254:16) in /dev/graid0 (data): it holds the last copy of \
             some data: failing it would lose data, or a resync heals the parity a helper caught \
             lying may have computed (graidctl wait, then fail it) (nothing changed) (EBUSY)"
        );
        let remove = Op::Member {
            array: "/dev/graid0 (data)",
            member: "/dev/vdb (254:16)",
            action: Action::Remove,
        };
        let (m, _) = msg(remove, libc::EBUSY);
        assert!(m.starts_with("cannot remove /dev/vdb (254:16) from /dev/graid0 (data): "));
        assert!(m.contains("graidctl fail it first"), "{m}");
        assert!(msg(remove, libc::ENXIO).0.contains("not a member"));
        assert!(msg(remove, libc::ENODEV).0.contains("no such array"));
        assert!(msg(fail, libc::EIO).0.contains("broken"));
        assert!(msg(fail, libc::ENOTTY).0.contains("MEMBER ioctl"));
    }

    #[test]
    fn permission_and_missing_ioctls_have_their_exit_codes() {
        let op = Op::List;
        assert_eq!(msg(op, libc::EPERM).1, EXIT_PERMISSION);
        assert_eq!(msg(op, libc::EACCES).1, EXIT_PERMISSION);
        let (m, code) = msg(op, libc::ENOTTY);
        assert_eq!(code, EXIT_ABI_MISMATCH);
        assert!(m.contains("LIST ioctl"), "{m}");
        // Unknown errnos fall back to the OS text.
        let (m, code) = msg(op, libc::ETIMEDOUT);
        assert!(m.starts_with("cannot list arrays: "), "{m}");
        assert_eq!(code, EXIT_FAILURE);
    }
}
