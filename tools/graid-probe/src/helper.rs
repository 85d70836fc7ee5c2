//! `/dev/graid-helper`: who may open it, the ring's version negotiation, and what the control
//! area's mappings allow (`Documentation/ring-protocol.rst`).

use crate::sys::{open_as_nobody, open_control, raw_ioctl, Fd, Report};
use graid_abi::ring::{
    HelperAttach, HelperEnter, HelperPool, RingHeader, CONTROL_BYTES, CQ_ENTRIES, CQ_TAIL_OFFSET,
    H2K_BYTES, H2K_OFFSET, HEARTBEAT_OFFSET, HELPER_ENTER_WAIT, HELPER_IOC_ATTACH,
    HELPER_IOC_DETACH, HELPER_IOC_ENTER, HELPER_IOC_REGISTER_POOL, K2H_BYTES, POOL_MIN_BYTES,
    RING_ABI_VERSION, RING_FEATURES, RING_MAGIC, SQ_ENTRIES,
};
use std::process::ExitCode;

/// Maps `len` bytes of the device at `offset` with `prot`; the address, or the errno.
fn map(fd: &Fd, offset: u64, len: u64, prot: i32) -> Result<*mut u8, i32> {
    // SAFETY: a shared mapping of the device at a kernel-chosen address; nothing aliases it.
    let at = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len as usize,
            prot,
            libc::MAP_SHARED,
            fd.0,
            offset as libc::off_t,
        )
    };
    if at == libc::MAP_FAILED {
        Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(-1))
    } else {
        Ok(at.cast())
    }
}

fn errno_of(result: Result<*mut u8, i32>) -> i32 {
    match result {
        Ok(at) => {
            // SAFETY: unmapping what `map` just mapped; no reference into it exists.
            unsafe { libc::munmap(at.cast(), 4096) };
            0
        }
        Err(e) => e,
    }
}

fn attach(fd: &Fd, version: u32) -> (i32, HelperAttach) {
    let mut req = HelperAttach {
        abi_version: version,
        features: u64::MAX,
        ..HelperAttach::default()
    };
    let got = raw_ioctl(fd, HELPER_IOC_ATTACH, &mut req as *mut _ as usize);
    (got, req)
}

fn enter(fd: &Fd, flags: u32) -> (i32, HelperEnter) {
    let mut req = HelperEnter { flags, pending: 99 };
    let got = raw_ioctl(fd, HELPER_IOC_ENTER, &mut req as *mut _ as usize);
    (got, req)
}

/// `poll` on the device for `ms` milliseconds: the events, or the errno.
fn poll_events(fd: &Fd, ms: i32) -> Result<i16, i32> {
    let mut p = libc::pollfd {
        fd: fd.0,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    let n = unsafe { libc::poll(&mut p, 1, ms) };
    if n < 0 {
        Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(-1))
    } else {
        Ok(p.revents)
    }
}

extern "C" fn on_alarm(_: libc::c_int) {}

/// ENTER with WAIT while no job will come, interrupted by SIGALRM after a second: the errno.
fn enter_wait_interrupted(fd: &Fd) -> i32 {
    // SAFETY: a handler that does nothing, installed without SA_RESTART so the wait is
    // interrupted; then a one-shot alarm.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_alarm as *const () as usize;
        libc::sigaction(libc::SIGALRM, &action, std::ptr::null_mut());
        libc::alarm(1);
    }
    enter(fd, HELPER_ENTER_WAIT).0
}

pub fn run(path: &str) -> ExitCode {
    let mut r = Report::default();
    r.check(
        "open as nobody",
        open_as_nobody(path),
        &[libc::EPERM, libc::EACCES],
    );
    let fd = match open_control(path) {
        Ok(fd) => fd,
        Err(e) => {
            println!("not ok open {path}: {e}");
            return ExitCode::FAILURE;
        }
    };
    r.check(
        "a second helper",
        open_control(path)
            .err()
            .and_then(|e| e.raw_os_error())
            .unwrap_or(0),
        &[libc::EBUSY],
    );
    r.check(
        "mmap before attach",
        errno_of(map(&fd, 0, 4096, libc::PROT_READ)),
        &[libc::EINVAL],
    );
    r.check(
        "attach speaking another ABI version",
        attach(&fd, RING_ABI_VERSION + 1).0,
        &[libc::EPROTO],
    );
    r.check(
        "an unknown ioctl",
        raw_ioctl(&fd, 0xBC99, 0),
        &[libc::ENOTTY],
    );
    let (got, answer) = attach(&fd, RING_ABI_VERSION);
    r.check("attach", got, &[0]);
    r.total += 1;
    if answer.features == RING_FEATURES && answer.control_bytes == CONTROL_BYTES {
        println!("ok attach answers the features in force and the area's size");
    } else {
        r.failed += 1;
        println!("not ok attach answered {answer:?}");
    }
    r.check(
        "attach twice",
        attach(&fd, RING_ABI_VERSION).0,
        &[libc::EBUSY],
    );
    r.check(
        "K2H mapped writable",
        errno_of(map(&fd, 0, K2H_BYTES, libc::PROT_READ | libc::PROT_WRITE)),
        &[libc::EACCES],
    );
    r.check(
        "a mapping across K2H and H2K",
        errno_of(map(&fd, K2H_BYTES - 4096, 8192, libc::PROT_READ)),
        &[libc::EINVAL],
    );
    r.check(
        "a mapping past the area",
        errno_of(map(&fd, CONTROL_BYTES, 4096, libc::PROT_READ)),
        &[libc::EINVAL],
    );
    let mut mapped = Vec::new();
    match map(&fd, 0, K2H_BYTES, libc::PROT_READ) {
        Ok(k2h) => {
            mapped.push((k2h, K2H_BYTES));
            r.check("K2H mapped read-only", 0, &[0]);
            // SAFETY: the header lies in the mapping, which the kernel filled at attach.
            let (magic, version, sq, cq) = unsafe {
                (
                    k2h.cast::<u64>().read_volatile(),
                    k2h.add(8).cast::<u32>().read_volatile(),
                    k2h.add(12).cast::<u32>().read_volatile(),
                    k2h.add(16).cast::<u32>().read_volatile(),
                )
            };
            r.total += 1;
            if (magic, version, sq, cq) == (RING_MAGIC, RING_ABI_VERSION, SQ_ENTRIES, CQ_ENTRIES) {
                println!("ok the header in K2H");
            } else {
                r.failed += 1;
                println!("not ok the header: {magic:#x} {version} {sq} {cq}");
            }
            pool_checks(&mut r, &fd, k2h);
            // SAFETY: changing the protection of our own mapping.
            let made_writable =
                unsafe { libc::mprotect(k2h.cast(), 4096, libc::PROT_READ | libc::PROT_WRITE) };
            r.check(
                "K2H made writable afterwards",
                if made_writable == 0 {
                    0
                } else {
                    std::io::Error::last_os_error().raw_os_error().unwrap_or(-1)
                },
                &[libc::EACCES],
            );
        }
        Err(e) => r.check("K2H mapped read-only", e, &[0]),
    }
    match map(
        &fd,
        H2K_OFFSET,
        H2K_BYTES,
        libc::PROT_READ | libc::PROT_WRITE,
    ) {
        Ok(h2k) => {
            mapped.push((h2k, H2K_BYTES));
            r.check("H2K mapped read-write", 0, &[0]);
            // SAFETY: the heartbeat lies in the mapping, which is writable.
            unsafe {
                h2k.add((HEARTBEAT_OFFSET - H2K_OFFSET) as usize)
                    .cast::<u64>()
                    .write_volatile(1)
            };
            ring_checks(&mut r, &fd, h2k);
        }
        Err(e) => r.check("H2K mapped read-write", e, &[0]),
    }
    r.check(
        "detach twice",
        raw_ioctl(&fd, HELPER_IOC_DETACH, 0),
        &[libc::EINVAL],
    );
    // A mapping holds the file open; with them gone, closing releases the device for the
    // next helper (an exit, SIGKILL included, does both).
    for (at, len) in mapped {
        // SAFETY: unmapping our own mappings; nothing refers into them any more.
        unsafe { libc::munmap(at.cast(), len as usize) };
    }
    drop(fd);
    let again = open_control(path)
        .err()
        .and_then(|e| e.raw_os_error())
        .unwrap_or(0);
    r.check("a helper after the first closed", again, &[0]);
    println!("# {} of {} checks failed", r.failed, r.total);
    if r.failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// REGISTER_POOL of private anonymous memory: the header in K2H then says how much.
fn pool_checks(r: &mut Report, fd: &Fd, k2h: *mut u8) {
    let bytes = POOL_MIN_BYTES as usize;
    // SAFETY: a fresh private anonymous mapping; unmapped below, after the device let go.
    let at = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            bytes,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if at == libc::MAP_FAILED {
        r.check("a pool's memory", -1, &[0]);
        return;
    }
    let mut req = HelperPool {
        address: at as u64,
        bytes: bytes as u64,
    };
    r.check(
        "register a pool",
        raw_ioctl(fd, HELPER_IOC_REGISTER_POOL, &mut req as *mut _ as usize),
        &[0],
    );
    // SAFETY: `pool_bytes` lies in the header, in the readable K2H mapping.
    let pool_bytes = unsafe {
        k2h.add(std::mem::offset_of!(RingHeader, pool_bytes))
            .cast::<u64>()
            .read_volatile()
    };
    r.total += 1;
    if pool_bytes == bytes as u64 {
        println!("ok the header says the pool's size");
    } else {
        r.failed += 1;
        println!("not ok the header says a pool of {pool_bytes} bytes, not {bytes}");
    }
    // The pin holds the pages, not the mapping: unmapping is safe while registered.
    // SAFETY: our own mapping; nothing refers into it.
    unsafe { libc::munmap(at, bytes) };
}

/// ENTER and poll with no job out, then a completion of no job: the protocol error detaches
/// the helper, which attaches again and detaches cleanly.
fn ring_checks(r: &mut Report, fd: &Fd, h2k: *mut u8) {
    let (got, answer) = enter(fd, 0);
    r.check("enter with no job published", got, &[0]);
    r.total += 1;
    if answer.pending == 0 {
        println!("ok enter answers no job pending");
    } else {
        r.failed += 1;
        println!("not ok enter answered {} pending", answer.pending);
    }
    r.check("enter with unknown flags", enter(fd, 2).0, &[libc::EINVAL]);
    r.check(
        "poll with no job published",
        poll_events(fd, 200).map(i32::from).unwrap_or(-1),
        &[0],
    );
    r.check(
        "enter waiting, interrupted by a signal",
        enter_wait_interrupted(fd),
        &[libc::EINTR],
    );
    // A completion of a job the kernel never sent: the helper is detached.
    // SAFETY: the CQ tail lies in the writable H2K mapping.
    unsafe {
        h2k.add((CQ_TAIL_OFFSET - H2K_OFFSET) as usize)
            .cast::<u32>()
            .write_volatile(1)
    };
    r.check(
        "enter after completing a job never sent",
        enter(fd, 0).0,
        &[libc::EPROTO],
    );
    let events = poll_events(fd, 0).map(i32::from).unwrap_or(-1);
    let hung_up = i32::from(libc::POLLERR | libc::POLLHUP);
    r.check(
        "poll after the protocol error",
        if events & hung_up == hung_up {
            0
        } else {
            events
        },
        &[0],
    );
    r.check("enter once detached", enter(fd, 0).0, &[libc::EINVAL]);
    r.check("attach again", attach(fd, RING_ABI_VERSION).0, &[0]);
    r.check("enter on the new attachment", enter(fd, 0).0, &[0]);
    r.check("detach", raw_ioctl(fd, HELPER_IOC_DETACH, 0), &[0]);
}
