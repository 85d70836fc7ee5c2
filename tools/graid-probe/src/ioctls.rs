//! Malformed and hostile ioctls: unknown numbers, wrong sizes and directions, NULL, short and
//! kernel pointers, unprivileged opens.

use crate::sys::{open_as_nobody, open_control, raw_ioctl, GuardedPage, Report};
use graid_abi::{ioc, ior, GraidVersion, GRAID_ABI_VERSION, GRAID_IOC_VERSION};
use std::mem::size_of;
use std::process::ExitCode;

pub fn run(path: &str) -> ExitCode {
    let fd = match open_control(path) {
        Ok(fd) => fd,
        Err(e) => {
            println!("not ok open {path}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let guard = match GuardedPage::new() {
        Ok(g) => g,
        Err(e) => {
            println!("not ok guard page: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut r = Report::default();
    let vsize = size_of::<GraidVersion>();

    let mut version = GraidVersion::ZERO;
    let got = raw_ioctl(&fd, GRAID_IOC_VERSION, &mut version as *mut _ as usize);
    r.check("version with a valid buffer", got, &[0]);
    r.total += 1;
    if version.abi_version == GRAID_ABI_VERSION && version.struct_size as usize == vsize {
        println!("ok version answer is ABI {GRAID_ABI_VERSION}");
    } else {
        r.failed += 1;
        println!("not ok version answer: {version:?}");
    }

    r.check(
        "version with NULL",
        raw_ioctl(&fd, GRAID_IOC_VERSION, 0),
        &[libc::EFAULT],
    );
    let short = guard.tail(vsize / 2);
    r.check(
        "version into a buffer cut short by an unmapped page",
        raw_ioctl(&fd, GRAID_IOC_VERSION, short),
        &[libc::EFAULT],
    );
    r.check(
        "version into the guard page",
        raw_ioctl(&fd, GRAID_IOC_VERSION, guard.tail(0)),
        &[libc::EFAULT],
    );
    r.check(
        "version into kernel memory",
        raw_ioctl(&fd, GRAID_IOC_VERSION, 0xffff_8880_0000_0000),
        &[libc::EFAULT],
    );
    r.check(
        "version into a non-canonical address",
        raw_ioctl(&fd, GRAID_IOC_VERSION, 0x8000_0000_0000_0000),
        &[libc::EFAULT],
    );
    let whole = guard.tail(vsize);
    r.check(
        "version into a buffer ending at the guard page",
        raw_ioctl(&fd, GRAID_IOC_VERSION, whole),
        &[0],
    );

    r.check(
        "unknown command number",
        raw_ioctl(&fd, ior::<GraidVersion>(0xee), whole),
        &[libc::ENOTTY],
    );
    r.check(
        "version number with a wrong size",
        raw_ioctl(&fd, ioc(2, 0x00, 8), whole),
        &[libc::ENOTTY, libc::EINVAL],
    );
    r.check(
        "version number with write direction",
        raw_ioctl(&fd, ioc(1, 0x00, vsize), whole),
        &[libc::ENOTTY, libc::EINVAL],
    );
    r.check(
        "foreign ioctl type",
        raw_ioctl(&fd, 0x8004_1270, whole),
        &[libc::ENOTTY],
    );
    r.check("zero command", raw_ioctl(&fd, 0, 0), &[libc::ENOTTY]);

    // ASSEMBLE: flags and the wanted index are checked before any device is opened.
    let mut assemble = graid_abi::GraidAssemble {
        nr_members: 1,
        flags: 4,
        members: [Default::default(); graid_abi::GRAID_MAX_MEMBERS],
        index: 0,
        bad_member: 0,
        missing: 0,
        reserved: 0,
    };
    r.check(
        "assemble with an unknown flag",
        raw_ioctl(
            &fd,
            graid_abi::GRAID_IOC_ASSEMBLE,
            &mut assemble as *mut _ as usize,
        ),
        &[libc::EINVAL],
    );
    assemble.flags = graid_abi::GRAID_ASSEMBLE_INDEX;
    assemble.index = graid_abi::GRAID_MAX_ARRAYS as u32;
    r.check(
        "assemble as an index beyond the last array",
        raw_ioctl(
            &fd,
            graid_abi::GRAID_IOC_ASSEMBLE,
            &mut assemble as *mut _ as usize,
        ),
        &[libc::EINVAL],
    );
    assemble.flags = 0;
    assemble.reserved = 1;
    r.check(
        "assemble with the reserved field set",
        raw_ioctl(
            &fd,
            graid_abi::GRAID_IOC_ASSEMBLE,
            &mut assemble as *mut _ as usize,
        ),
        &[libc::EINVAL],
    );

    // MEMBER: a bad pointer, then malformed requests, checked before any array is looked up.
    r.check(
        "member with NULL",
        raw_ioctl(&fd, graid_abi::GRAID_IOC_MEMBER, 0),
        &[libc::EFAULT],
    );
    let mut op = graid_abi::GraidMemberOp {
        index: 63,
        op: 99,
        ..Default::default()
    };
    r.check(
        "member with an unknown operation",
        raw_ioctl(&fd, graid_abi::GRAID_IOC_MEMBER, &mut op as *mut _ as usize),
        &[libc::EINVAL],
    );
    op.op = graid_abi::GRAID_MEMBER_OP_FAIL;
    op.flags = 1;
    r.check(
        "member with unknown flags",
        raw_ioctl(&fd, graid_abi::GRAID_IOC_MEMBER, &mut op as *mut _ as usize),
        &[libc::EINVAL],
    );
    op.flags = 0;
    r.check(
        "member of an array that is not running",
        raw_ioctl(&fd, graid_abi::GRAID_IOC_MEMBER, &mut op as *mut _ as usize),
        &[libc::ENODEV],
    );
    // SPEED: unknown flags, then an array that is not running.
    let mut speed = graid_abi::GraidSpeed {
        index: 63,
        flags: 2,
        min_kibs: 1,
        max_kibs: 0,
    };
    r.check(
        "speed with unknown flags",
        raw_ioctl(
            &fd,
            graid_abi::GRAID_IOC_SPEED,
            &mut speed as *mut _ as usize,
        ),
        &[libc::EINVAL],
    );
    speed.flags = graid_abi::GRAID_SPEED_SET;
    r.check(
        "speed of an array that is not running",
        raw_ioctl(
            &fd,
            graid_abi::GRAID_IOC_SPEED,
            &mut speed as *mut _ as usize,
        ),
        &[libc::ENODEV],
    );
    // SCRUB: an unknown action, then an array that is not running.
    let mut scrub = graid_abi::GraidScrub {
        index: 63,
        action: 9,
    };
    r.check(
        "scrub with an unknown action",
        raw_ioctl(
            &fd,
            graid_abi::GRAID_IOC_SCRUB,
            &mut scrub as *mut _ as usize,
        ),
        &[libc::EINVAL],
    );
    scrub.action = graid_abi::GRAID_SCRUB_CHECK;
    r.check(
        "scrub of an array that is not running",
        raw_ioctl(
            &fd,
            graid_abi::GRAID_IOC_SCRUB,
            &mut scrub as *mut _ as usize,
        ),
        &[libc::ENODEV],
    );
    r.check(
        "open as an unprivileged user",
        open_as_nobody(path),
        &[libc::EACCES, libc::EPERM],
    );

    println!("{} probes, {} failed", r.total, r.failed);
    if r.failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
