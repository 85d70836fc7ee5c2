//! System-call helpers shared by the probes: raw file descriptors, raw ioctls, guard pages and
//! a TAP-like report.

use std::ffi::CString;
use std::io;

pub struct Fd(pub libc::c_int);
impl Drop for Fd {
    fn drop(&mut self) {
        // SAFETY: self.0 is a file descriptor this process opened and nobody else closes.
        unsafe { libc::close(self.0) };
    }
}

pub fn open_control(path: &str) -> io::Result<Fd> {
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
pub fn raw_ioctl(fd: &Fd, cmd: u32, arg: usize) -> i32 {
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
pub struct GuardedPage {
    base: *mut u8,
    page: usize,
}

impl GuardedPage {
    pub fn new() -> io::Result<Self> {
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
    pub fn tail(&self, len: usize) -> usize {
        self.base as usize + self.page - len
    }
}

impl Drop for GuardedPage {
    fn drop(&mut self) {
        // SAFETY: base/2*page is exactly the mapping created in new().
        unsafe { libc::munmap(self.base.cast(), 2 * self.page) };
    }
}

pub fn errno_name(e: i32) -> String {
    match e {
        0 => "success".into(),
        libc::EINVAL => "EINVAL".into(),
        libc::EFAULT => "EFAULT".into(),
        libc::ENOTTY => "ENOTTY".into(),
        libc::EPERM => "EPERM".into(),
        libc::EACCES => "EACCES".into(),
        libc::EBUSY => "EBUSY".into(),
        libc::ENOSPC => "ENOSPC".into(),
        libc::ENODEV => "ENODEV".into(),
        libc::ENXIO => "ENXIO".into(),
        libc::EEXIST => "EEXIST".into(),
        other => format!("errno {other}"),
    }
}

#[derive(Default)]
pub struct Report {
    pub failed: usize,
    pub total: usize,
}

impl Report {
    pub fn check(&mut self, name: &str, got: i32, expected: &[i32]) {
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
pub fn open_as_nobody(path: &str) -> i32 {
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
