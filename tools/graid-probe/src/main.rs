//! graid-probe: fires malformed ioctls at `/dev/graid-control` and checks each is refused with
//! the expected errno and nothing worse. Used by the VM selftests; prints one TAP-like line per
//! case and exits non-zero if any case misbehaved.

use graid_abi::{ioc, ior, GraidVersion, GRAID_ABI_VERSION, GRAID_CONTROL_NAME, GRAID_IOC_VERSION};
use std::ffi::CString;
use std::io;
use std::mem::size_of;
use std::process::ExitCode;

struct Fd(libc::c_int);

impl Drop for Fd {
    fn drop(&mut self) {
        // SAFETY: self.0 is a file descriptor this process opened and nobody else closes.
        unsafe { libc::close(self.0) };
    }
}

fn open_control(path: &str) -> io::Result<Fd> {
    let c_path = CString::new(path).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: c_path is a valid NUL-terminated string for the duration of the call.
    let fd = unsafe { libc::open(c_path.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
    if fd < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(Fd(fd))
    }
}

/// Issues a raw ioctl and returns its errno (0 on success).
fn raw_ioctl(fd: &Fd, cmd: u32, arg: usize) -> i32 {
    // SAFETY: the kernel validates `arg`; hostile pointers are the point of this probe, and
    // none of them aliases memory Rust relies on (they are NULL, unmapped or kernel addresses,
    // or a buffer this process owns).
    let ret = unsafe { libc::ioctl(fd.0, cmd as libc::c_ulong, arg) };
    if ret < 0 {
        io::Error::last_os_error().raw_os_error().unwrap_or(-1)
    } else {
        0
    }
}

/// A page-sized buffer followed by an inaccessible guard page.
struct GuardedPage {
    base: *mut u8,
    page: usize,
}

impl GuardedPage {
    fn new() -> io::Result<Self> {
        // SAFETY: sysconf has no memory-safety preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
        // SAFETY: an anonymous private mapping at a kernel-chosen address.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                2 * page,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base = base as *mut u8;
        // SAFETY: base + page is the second page of the mapping created above.
        if unsafe { libc::mprotect(base.add(page).cast(), page, libc::PROT_NONE) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Self { base, page })
    }

    /// Address of the last `len` bytes before the guard page.
    fn tail(&self, len: usize) -> usize {
        self.base as usize + self.page - len
    }
}

impl Drop for GuardedPage {
    fn drop(&mut self) {
        // SAFETY: base/2*page is exactly the mapping created in new().
        unsafe { libc::munmap(self.base.cast(), 2 * self.page) };
    }
}

fn errno_name(e: i32) -> String {
    match e {
        0 => "success".into(),
        libc::EINVAL => "EINVAL".into(),
        libc::EFAULT => "EFAULT".into(),
        libc::ENOTTY => "ENOTTY".into(),
        libc::EPERM => "EPERM".into(),
        libc::EACCES => "EACCES".into(),
        other => format!("errno {other}"),
    }
}

struct Report {
    failed: usize,
    total: usize,
}

impl Report {
    fn check(&mut self, name: &str, got: i32, expected: &[i32]) {
        self.total += 1;
        if expected.contains(&got) {
            println!("ok {name}: {}", errno_name(got));
        } else {
            self.failed += 1;
            let want: Vec<String> = expected.iter().map(|&e| errno_name(e)).collect();
            println!(
                "not ok {name}: got {}, expected {}",
                errno_name(got),
                want.join(" or ")
            );
        }
    }
}

/// Opens the control device as an unprivileged user in a child process; returns the errno.
fn open_as_nobody(path: &str) -> i32 {
    // SAFETY: fork in a single-threaded program; the child only calls async-signal-safe
    // functions (setgid, setuid, open, _exit) before exiting.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        let c_path = CString::new(path).unwrap_or_default();
        // SAFETY: plain syscalls in the forked child, see above.
        unsafe {
            if libc::setgid(65534) != 0 || libc::setuid(65534) != 0 {
                libc::_exit(255);
            }
            let fd = libc::open(c_path.as_ptr(), libc::O_RDWR);
            let code = if fd >= 0 {
                0
            } else {
                *libc::__errno_location()
            };
            libc::_exit(code);
        }
    }
    let mut status = 0;
    // SAFETY: waiting for the child forked above.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    libc::WEXITSTATUS(status)
}

fn main() -> ExitCode {
    let path = std::env::args()
        .nth(1)
        .unwrap_or_else(|| format!("/dev/{GRAID_CONTROL_NAME}"));
    let fd = match open_control(&path) {
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
    let mut r = Report {
        failed: 0,
        total: 0,
    };
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
    r.check(
        "open as an unprivileged user",
        open_as_nobody(&path),
        &[libc::EACCES, libc::EPERM],
    );

    println!("{} probes, {} failed", r.total, r.failed);
    if r.failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
