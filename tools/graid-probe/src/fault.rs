//! CREATE or ASSEMBLE with the N-th fault-injection point it reaches made to fail
//! (`/proc/thread-self/fail-nth`: a slab or page allocation, with failslab and fail_page_alloc
//! set to consider every allocation), for N = 1, 2, ... until the call no longer reaches the
//! N-th (`--every K:F`: N = F, F + K, F + 2K, ... only, F in 1..=K, for a shorter sweep that
//! still reaches past the last allocation). After each run: nothing is left running (a run that succeeded anyway, the allocation
//! having a fallback, is stopped again), and a member superblock that called for a resync ("not
//! clean", or a resync pending) still does. The kernel side of "cleanly" (no oops, no leak) is the test runner's dmesg and
//! kmemleak checks.
//!
//! Prints one summary line; exits 1 on a violation, 2 when the calls could not be made.

use crate::create::{member_of, request};
use crate::sys::{errno_name, open_control, raw_ioctl};
use graid_abi::{
    GraidAssemble, GraidList, GraidMember, GraidStop, GRAID_IOC_ASSEMBLE, GRAID_IOC_CREATE,
    GRAID_IOC_LIST, GRAID_IOC_STOP, GRAID_MAX_ARRAYS, GRAID_MAX_MEMBERS,
};
use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::process::ExitCode;

/// `graid-probe fail-sweep [--every K:F] assemble MEMBER...` or `graid-probe fail-sweep
/// [--every K:F] create LEVEL FLAGS NAME MEMBER...`.
pub fn run(control: &str, args: &[String]) -> ExitCode {
    match sweep(control, args) {
        Ok(Ok(summary)) => {
            println!("{summary}");
            ExitCode::SUCCESS
        }
        Ok(Err(violation)) => {
            println!("not ok {violation}");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("graid-probe fail-sweep: {e}");
            ExitCode::from(2)
        }
    }
}

/// Whether `path`'s superblock (state word at byte 4096 + 0x0C), if it has one, calls for a
/// resync: not clean (bit 0 clear), or a resync pending (bit 1).
fn superblock_wants_resync(path: &str) -> Option<bool> {
    let file = std::fs::File::open(path).ok()?;
    let mut block = [0u8; 16];
    file.read_exact_at(&mut block, 4096).ok()?;
    (&block[..8] == b"GRAID-SB").then_some(block[12] & 1 == 0 || block[12] & 2 != 0)
}

/// `--every K:F` at the front of `args`: the stride and first N, and the rest of `args`.
fn stride(args: &[String]) -> Result<(u32, u32, &[String]), String> {
    if args.first().map(String::as_str) != Some("--every") {
        return Ok((1, 1, args));
    }
    let spec = args.get(1).ok_or(USAGE)?;
    let (every, first) = spec
        .split_once(':')
        .and_then(|(k, f)| Some((k.parse::<u32>().ok()?, f.parse::<u32>().ok()?)))
        .filter(|&(k, f)| k >= 1 && (1..=k).contains(&f))
        .ok_or_else(|| format!("--every wants K:F with 1 <= F <= K, not '{spec}'"))?;
    Ok((every, first, &args[2..]))
}

fn sweep(control: &str, args: &[String]) -> Result<Result<String, String>, String> {
    let (every, first, args) = stride(args)?;
    let (what, paths) = match args.first().map(String::as_str) {
        Some("assemble") if args.len() >= 2 => ("assemble", &args[1..]),
        Some("create") if args.len() >= 5 => ("create", &args[4..]),
        _ => return Err(USAGE.into()),
    };
    let fd = open_control(control).map_err(|e| format!("{control}: {e}"))?;
    let fail_nth = OpenOptions::new()
        .read(true)
        .write(true)
        .open("/proc/thread-self/fail-nth")
        .map_err(|e| format!("/proc/thread-self/fail-nth: {e}"))?;
    let members: Vec<GraidMember> = paths
        .iter()
        .map(|p| member_of(p))
        .collect::<Result<_, _>>()?;
    let dirty_before: Vec<bool> = paths
        .iter()
        .map(|p| superblock_wants_resync(p) == Some(true))
        .collect();
    for (failed, nth) in (first..=20_000).step_by(every as usize).enumerate() {
        // Built before the fault is armed: only the ioctl runs armed.
        let mut assemble = GraidAssemble {
            nr_members: members.len() as u32,
            flags: 0,
            members: [GraidMember::default(); GRAID_MAX_MEMBERS],
            index: u32::MAX,
            bad_member: 0,
            missing: 0,
            reserved: 0,
        };
        assemble.members[..members.len()].copy_from_slice(&members);
        let mut create = if what == "create" {
            let level: u32 = args[1].parse().map_err(|_| "bad LEVEL")?;
            let flags: u32 = args[2].parse().map_err(|_| "bad FLAGS")?;
            let mut req = request(level, if level == 1 { 0 } else { 128 }, &args[3], &members);
            req.flags = flags;
            req
        } else {
            request(0, 0, "", &members)
        };
        fail_nth
            .write_at(nth.to_string().as_bytes(), 0)
            .map_err(|e| format!("arming fail-nth: {e}"))?;
        let errno = if what == "create" {
            raw_ioctl(&fd, GRAID_IOC_CREATE, &mut create as *mut _ as usize)
        } else {
            raw_ioctl(&fd, GRAID_IOC_ASSEMBLE, &mut assemble as *mut _ as usize)
        };
        let mut left = [0u8; 16];
        let read = fail_nth.read_at(&mut left, 0).unwrap_or(0);
        let _ = fail_nth.write_at(b"0", 0);
        let injected = String::from_utf8_lossy(&left[..read]).trim() == "0";
        if !injected {
            return Ok(if errno == 0 {
                Ok(match every {
                    1 => format!(
                        "{what}: {failed} allocations failed in turn, each handled; then it worked"
                    ),
                    _ => format!(
                        "{what}: {failed} allocations failed in turn (every {every}th from \
                         {first}), each handled; then it worked"
                    ),
                })
            } else {
                Err(format!(
                    "{what} failed without an injected fault: {}",
                    errno_name(errno)
                ))
            });
        }
        if errno == 0 {
            // Succeeded through a fallback: stop it again.
            let index = if what == "create" {
                create.index
            } else {
                assemble.index
            };
            let mut stop = GraidStop { index, flags: 0 };
            let mut stopped = raw_ioctl(&fd, GRAID_IOC_STOP, &mut stop as *mut _ as usize);
            // udev probes a new disk at once: wait for it to let go.
            for _ in 0..100 {
                if stopped != libc::EBUSY {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(100));
                stopped = raw_ioctl(&fd, GRAID_IOC_STOP, &mut stop as *mut _ as usize);
            }
            if stopped != 0 {
                return Ok(Err(format!(
                    "N={nth}: cannot stop the array: {}",
                    errno_name(stopped)
                )));
            }
        }
        let mut list = GraidList {
            count: 0,
            reserved: 0,
            indices: [0; GRAID_MAX_ARRAYS],
        };
        let listed = raw_ioctl(&fd, GRAID_IOC_LIST, &mut list as *mut _ as usize);
        if listed != 0 || list.count != 0 {
            return Ok(Err(format!(
                "N={nth}: after {what} ({}), LIST says {} arrays ({})",
                errno_name(errno),
                list.count,
                errno_name(listed)
            )));
        }
        for (path, &dirty) in paths.iter().zip(&dirty_before) {
            if dirty && superblock_wants_resync(path) != Some(true) {
                return Ok(Err(format!(
                    "N={nth}: {what} ({}) left {path} in sync, or without its superblock",
                    errno_name(errno)
                )));
            }
        }
    }
    Ok(Err(format!("{what}: no end after 20000 allocations")))
}

const USAGE: &str =
    "usage: fail-sweep [--every K:F] assemble MEMBER... | fail-sweep [--every K:F] create LEVEL FLAGS NAME MEMBER...";

#[cfg(test)]
mod tests {
    use super::stride;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn every_takes_stride_and_first() {
        let a = args(&["--every", "3:2", "create", "6"]);
        let (every, first, rest) = stride(&a).unwrap();
        assert_eq!((every, first), (3, 2));
        assert_eq!(rest, &a[2..]);
        let b = args(&["assemble", "/dev/x"]);
        assert_eq!(stride(&b).unwrap(), (1, 1, &b[..]));
    }

    #[test]
    fn every_refuses_a_first_outside_the_stride() {
        for bad in ["3:0", "3:4", "0:0", "3", "x:1", ""] {
            assert!(
                stride(&args(&["--every", bad, "assemble"])).is_err(),
                "{bad}"
            );
        }
        assert!(stride(&args(&["--every"])).is_err());
    }
}
