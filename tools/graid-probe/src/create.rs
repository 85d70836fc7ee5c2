//! CREATE, STOP and DETAIL against real member devices: every malformed request is refused
//! with the right errno and writes nothing to any member; a valid one works exactly once.

use crate::sys::{open_control, raw_ioctl, Fd, Report};
use graid_abi::{
    GraidCreate, GraidDetail, GraidMember, GraidStop, GRAID_CREATE_ASSUME_CLEAN,
    GRAID_CREATE_WRITE_ZEROES, GRAID_HOMEHOST_LEN, GRAID_IOC_CREATE, GRAID_IOC_DETAIL,
    GRAID_IOC_STOP, GRAID_LEVEL_RAID0, GRAID_LEVEL_RAID1, GRAID_MAX_MEMBERS, GRAID_NAME_LEN,
};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::process::ExitCode;

pub fn member_of(path: &str) -> Result<GraidMember, String> {
    let meta = std::fs::metadata(path).map_err(|e| format!("{path}: {e}"))?;
    if !meta.file_type().is_block_device() {
        return Err(format!("{path} is not a block device"));
    }
    let rdev = meta.rdev();
    Ok(GraidMember {
        major: libc::major(rdev),
        minor: libc::minor(rdev),
    })
}

/// True if the 4 KiB superblock block of `path` is all zero.
fn superblock_area_is_zero(path: &str) -> bool {
    let mut buf = vec![0u8; 4096];
    let read = File::open(path).and_then(|mut f| {
        f.seek(SeekFrom::Start(4096))?;
        f.read_exact(&mut buf)
    });
    read.is_ok() && buf.iter().all(|&b| b == 0)
}

pub fn request(level: u32, chunk: u32, name: &str, members: &[GraidMember]) -> GraidCreate {
    let mut req = GraidCreate {
        level,
        chunk_sectors: chunk,
        nr_members: members.len() as u32,
        flags: 0,
        name: [0; GRAID_NAME_LEN],
        uuid: [0; 16],
        ctime: 0,
        members: [GraidMember::default(); GRAID_MAX_MEMBERS],
        index: u32::MAX,
        layout: 0,
        bitmap_region_sectors: 0,
        homehost: [0; GRAID_HOMEHOST_LEN],
    };
    req.name[..name.len()].copy_from_slice(name.as_bytes());
    req.members[..members.len()].copy_from_slice(members);
    req
}

fn create(fd: &Fd, req: &mut GraidCreate) -> i32 {
    raw_ioctl(fd, GRAID_IOC_CREATE, req as *mut GraidCreate as usize)
}

pub fn run(control: &str, small: &str, paths: &[String]) -> ExitCode {
    let fd = match open_control(control) {
        Ok(fd) => fd,
        Err(e) => {
            println!("not ok open {control}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut members = Vec::new();
    for p in paths {
        match member_of(p) {
            Ok(m) => members.push(m),
            Err(e) => {
                println!("not ok {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    let small_member = match member_of(small) {
        Ok(m) => m,
        Err(e) => {
            println!("not ok {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut r = Report::default();
    let pair = &members[..2];
    let refused = |r: &mut Report, what: &str, mut req: GraidCreate, want: &[i32]| {
        r.check(
            &format!("create refuses {what}"),
            create(&fd, &mut req),
            want,
        );
        r.total += 1;
        if paths.iter().all(|p| superblock_area_is_zero(p)) {
            println!("ok nothing written after refusing {what}");
        } else {
            r.failed += 1;
            println!("not ok a superblock was written after refusing {what}");
        }
    };

    refused(
        &mut r,
        "an unknown level",
        request(7, 128, "bad", pair),
        &[libc::EINVAL],
    );
    refused(
        &mut r,
        "RAID 5 with two members",
        request(5, 128, "bad", pair),
        &[libc::EINVAL],
    );
    refused(
        &mut r,
        "RAID 6 with two members",
        request(6, 128, "bad", pair),
        &[libc::EINVAL],
    );
    let mut with_layout = request(5, 128, "bad", pair);
    with_layout.layout = 2;
    refused(
        &mut r,
        "a layout without its flag",
        with_layout,
        &[libc::EINVAL],
    );
    with_layout.flags = graid_abi::GRAID_CREATE_LAYOUT;
    with_layout.layout = 4;
    refused(
        &mut r,
        "a RAID 5 layout md does not have",
        with_layout,
        &[libc::EINVAL],
    );
    let mut raid0_layout = request(GRAID_LEVEL_RAID0, 128, "bad", pair);
    raid0_layout.flags = graid_abi::GRAID_CREATE_LAYOUT;
    raid0_layout.layout = 2;
    refused(
        &mut r,
        "a parity layout for RAID 0",
        raid0_layout,
        &[libc::EINVAL],
    );
    refused(
        &mut r,
        "a chunk that is not a power of two",
        request(GRAID_LEVEL_RAID0, 96, "bad", pair),
        &[libc::EINVAL],
    );
    refused(
        &mut r,
        "a chunk below 4 KiB",
        request(GRAID_LEVEL_RAID0, 4, "bad", pair),
        &[libc::EINVAL],
    );
    refused(
        &mut r,
        "a chunk above 1 MiB",
        request(GRAID_LEVEL_RAID0, 4096, "bad", pair),
        &[libc::EINVAL],
    );
    refused(
        &mut r,
        "a RAID 1 chunk",
        request(GRAID_LEVEL_RAID1, 128, "bad", pair),
        &[libc::EINVAL],
    );
    refused(
        &mut r,
        "one member",
        request(GRAID_LEVEL_RAID0, 128, "bad", &members[..1]),
        &[libc::EINVAL],
    );
    let mut too_many = request(GRAID_LEVEL_RAID0, 128, "bad", pair);
    too_many.nr_members = GRAID_MAX_MEMBERS as u32 + 1;
    refused(&mut r, "33 members", too_many, &[libc::EINVAL]);
    let dup = [members[0], members[1], members[0]];
    refused(
        &mut r,
        "a member listed twice",
        request(GRAID_LEVEL_RAID0, 128, "bad", &dup),
        &[libc::EINVAL],
    );
    let mut long_name = request(GRAID_LEVEL_RAID0, 128, "bad", pair);
    long_name.name = [b'x'; GRAID_NAME_LEN];
    refused(&mut r, "a name without NUL", long_name, &[libc::EINVAL]);
    refused(
        &mut r,
        "an empty name",
        request(GRAID_LEVEL_RAID0, 128, "", pair),
        &[libc::EINVAL],
    );
    refused(
        &mut r,
        "a name with a slash",
        request(GRAID_LEVEL_RAID0, 128, "a/b", pair),
        &[libc::EINVAL],
    );
    for (what, host) in [
        ("a home host with a slash", &b"a/b"[..]),
        ("a home host with a newline", &b"a\nb"[..]),
        ("a home host with bytes after its NUL", &b"a\0b"[..]),
        ("a home host that is not UTF-8", &b"\xc3\x28"[..]),
    ] {
        let mut req = request(GRAID_LEVEL_RAID0, 128, "bad", pair);
        req.homehost[..host.len()].copy_from_slice(host);
        refused(&mut r, what, req, &[libc::EINVAL]);
    }
    let bitmap = |flags: u32, region: u64, level: u32, chunk: u32| GraidCreate {
        flags,
        bitmap_region_sectors: region,
        ..request(level, chunk, "bad", pair)
    };
    let no_bitmap = graid_abi::GRAID_CREATE_NO_BITMAP;
    refused(
        &mut r,
        "a bitmap region size with no bitmap",
        bitmap(no_bitmap, 1 << 17, GRAID_LEVEL_RAID1, 0),
        &[libc::EINVAL],
    );
    refused(
        &mut r,
        "a bitmap region that is not a power of two",
        bitmap(0, 3 << 10, GRAID_LEVEL_RAID1, 0),
        &[libc::EINVAL],
    );
    refused(
        &mut r,
        "a bitmap region below 4 KiB",
        bitmap(0, 4, GRAID_LEVEL_RAID1, 0),
        &[libc::EINVAL],
    );
    refused(
        &mut r,
        "a bitmap region for RAID 0",
        bitmap(0, 1 << 17, GRAID_LEVEL_RAID0, 128),
        &[libc::EINVAL],
    );
    let mut flags = request(GRAID_LEVEL_RAID0, 128, "bad", pair);
    flags.flags = 0x80;
    refused(&mut r, "unknown flags", flags, &[libc::EINVAL]);
    let mut both = request(GRAID_LEVEL_RAID1, 0, "bad", pair);
    both.flags = GRAID_CREATE_ASSUME_CLEAN | GRAID_CREATE_WRITE_ZEROES;
    refused(
        &mut r,
        "--assume-clean with --write-zeroes",
        both,
        &[libc::EINVAL],
    );
    // MKDEV keeps 12 major and 20 minor bits: (major, 2^20 + minor) would alias
    // (major + 1, minor), a device given twice under two numbers.
    let alias = [
        members[0],
        GraidMember {
            major: members[0].major - 1,
            minor: (1 << 20) | members[0].minor,
        },
    ];
    refused(
        &mut r,
        "a member number dev_t cannot hold (an alias of another member)",
        request(GRAID_LEVEL_RAID0, 128, "bad", &alias),
        &[libc::EINVAL],
    );
    let huge_major = [
        members[0],
        GraidMember {
            major: 1 << 12,
            minor: members[0].minor,
        },
    ];
    refused(
        &mut r,
        "a major number dev_t cannot hold",
        request(GRAID_LEVEL_RAID0, 128, "bad", &huge_major),
        &[libc::EINVAL],
    );
    let missing = [
        members[0],
        GraidMember {
            major: 259,
            minor: 999_999,
        },
    ];
    refused(
        &mut r,
        "a device that does not exist",
        request(GRAID_LEVEL_RAID0, 128, "bad", &missing),
        &[libc::ENXIO, libc::ENODEV],
    );
    let tiny = [members[0], small_member];
    refused(
        &mut r,
        "a member too small",
        request(GRAID_LEVEL_RAID0, 128, "bad", &tiny),
        &[libc::ENOSPC],
    );
    {
        // An exclusive open (like a mounted filesystem's) makes the device busy.
        let busy = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_EXCL)
            .open(&paths[0]);
        match busy {
            Ok(_held) => refused(
                &mut r,
                "a member in use",
                request(GRAID_LEVEL_RAID0, 128, "bad", pair),
                &[libc::EBUSY],
            ),
            Err(e) => {
                r.total += 1;
                r.failed += 1;
                println!("not ok cannot hold {} exclusively: {e}", paths[0]);
            }
        }
    }

    // A valid request works, and only once.
    let mut good = request(GRAID_LEVEL_RAID0, 128, "probe", pair);
    r.check("create a valid RAID 0", create(&fd, &mut good), &[0]);
    let index = good.index;
    r.total += 1;
    if index < 64 && !superblock_area_is_zero(&paths[0]) {
        println!("ok created /dev/graid{index} and wrote superblocks");
    } else {
        r.failed += 1;
        println!(
            "not ok create answered index {index}, superblock written: {}",
            !superblock_area_is_zero(&paths[0])
        );
    }
    let mut again = request(
        GRAID_LEVEL_RAID0,
        128,
        "probe",
        &members[2..4.min(members.len())],
    );
    r.check(
        "create refuses a name in use",
        create(&fd, &mut again),
        &[libc::EEXIST, libc::EINVAL],
    );
    let mut reuse = request(GRAID_LEVEL_RAID0, 128, "other", pair);
    r.check(
        "create refuses members of a running array",
        create(&fd, &mut reuse),
        &[libc::EBUSY],
    );

    let mut detail: GraidDetail = unsafe_zeroed_detail();
    detail.index = index;
    r.check(
        "detail of the new array",
        raw_ioctl(&fd, GRAID_IOC_DETAIL, &mut detail as *mut _ as usize),
        &[0],
    );
    r.total += 1;
    if detail.nr_members == 2
        && detail.level == GRAID_LEVEL_RAID0
        && detail.chunk_sectors == 128
        && &detail.name[..6] == b"probe\0"
    {
        println!("ok detail describes it");
    } else {
        r.failed += 1;
        println!("not ok detail: {detail:?}");
    }
    let mut stop = GraidStop { index, flags: 0 };
    // udevd holds a new array's disk open while it processes its uevents: wait for it to let go.
    let mut stopped = raw_ioctl(&fd, GRAID_IOC_STOP, &mut stop as *mut _ as usize);
    for _ in 0..30 {
        if stopped != libc::EBUSY {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
        stopped = raw_ioctl(&fd, GRAID_IOC_STOP, &mut stop as *mut _ as usize);
    }
    r.check("stop it", stopped, &[0]);
    r.check(
        "stop it again",
        raw_ioctl(&fd, GRAID_IOC_STOP, &mut stop as *mut _ as usize),
        &[libc::ENODEV],
    );
    let mut bad_flags = GraidStop { index, flags: 0x80 };
    r.check(
        "stop with unknown flags",
        raw_ioctl(&fd, GRAID_IOC_STOP, &mut bad_flags as *mut _ as usize),
        &[libc::EINVAL],
    );
    r.check(
        "detail of a stopped array",
        raw_ioctl(&fd, GRAID_IOC_DETAIL, &mut detail as *mut _ as usize),
        &[libc::ENODEV],
    );

    println!("{} probes, {} failed", r.total, r.failed);
    if r.failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn unsafe_zeroed_detail() -> GraidDetail {
    // SAFETY: GraidDetail is plain integers; all-zero is a valid value.
    unsafe { std::mem::zeroed() }
}
