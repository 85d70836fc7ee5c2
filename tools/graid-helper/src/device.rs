//! The helper attached to the module: `/dev/graid-helper` opened, the ring negotiated and
//! mapped, the pool donated, and the loop that serves jobs until a signal asks it to stop
//! (`Documentation/ring-protocol.rst`).

use crate::control::ControlArea;
use crate::exec::Pool;
use crate::serve::serve_batch;
use graid_abi::ring::{
    HelperAttach, HelperEnter, HelperPool, RingHeader, CONTROL_BYTES, H2K_BYTES, H2K_OFFSET,
    HEARTBEAT_OFFSET, HELPER_ENGINE_LEN, HELPER_IOC_ATTACH, HELPER_IOC_DETACH, HELPER_IOC_ENTER,
    HELPER_IOC_REGISTER_POOL, K2H_BYTES, POOL_UNIT_BYTES, RING_ABI_VERSION, RING_FEATURES,
    RING_MAGIC,
};
use graid_parity::Engine;
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, Ordering};

/// Jobs taken off the SQ per batch at most.
const BATCH: usize = 256;

/// Set by SIGTERM and SIGINT: finish the batch, detach, exit.
static STOP: AtomicBool = AtomicBool::new(false);
/// The self-pipe the stop signals write to (-1: none), and its read end, which the idle wait
/// polls beside the device: a signal that comes just before the wait still ends it.
static STOP_PIPE_WRITE: AtomicI32 = AtomicI32::new(-1);
static STOP_PIPE_READ: AtomicI32 = AtomicI32::new(-1);

extern "C" fn on_stop(_signal: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
    let fd = STOP_PIPE_WRITE.load(Ordering::SeqCst);
    if fd >= 0 {
        // SAFETY: write(2) is async-signal-safe; one byte from a local. A full pipe (the byte
        // is already there) is fine.
        let _ = unsafe { libc::write(fd, [1u8].as_ptr().cast(), 1) };
    }
}

/// Makes SIGTERM and SIGINT set [`STOP`] and wake the idle wait (a self-pipe it polls; no
/// `SA_RESTART`, so a blocking call returns `EINTR` too).
pub fn catch_stop_signals() -> io::Result<()> {
    let mut fds = [-1; 2];
    // SAFETY: `fds` has room for the two descriptors.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    STOP_PIPE_READ.store(fds[0], Ordering::SeqCst);
    STOP_PIPE_WRITE.store(fds[1], Ordering::SeqCst);
    for signal in [libc::SIGTERM, libc::SIGINT] {
        // SAFETY: a zeroed sigaction is valid; the handler only stores an atomic
        // (async-signal-safe).
        let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
        action.sa_sigaction = on_stop as extern "C" fn(libc::c_int) as usize;
        // SAFETY: `action.sa_mask` is a valid sigset to initialise.
        unsafe { libc::sigemptyset(&mut action.sa_mask) };
        // SAFETY: a valid action for a catchable signal.
        if unsafe { libc::sigaction(signal, &action, std::ptr::null_mut()) } != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Whether a stop was asked for.
pub fn stopping() -> bool {
    STOP.load(Ordering::SeqCst)
}

/// Why the helper could not attach or had to let go.
#[derive(Debug, thiserror::Error)]
pub enum HelperError {
    #[error("{path}: {source}")]
    Open { path: String, source: io::Error },
    #[error("another helper is attached (the device is busy)")]
    Busy,
    #[error("the module speaks another ring ABI than this helper ({RING_ABI_VERSION})")]
    Version,
    #[error("{what}: {source}")]
    Sys {
        what: &'static str,
        source: io::Error,
    },
    #[error("the control area does not look like a ring: {0}")]
    BadHeader(&'static str),
    #[error("the module detached this helper (it broke the protocol or missed deadlines)")]
    Detached,
    #[error("the kernel's ring indices are impossible")]
    BadIndex,
}

fn ioctl<T>(fd: &OwnedFd, cmd: u32, arg: &mut T) -> io::Result<()> {
    // SAFETY: `arg` is a live, properly sized `repr(C)` argument of `cmd`.
    let got = unsafe { libc::ioctl(fd.as_raw_fd(), cmd as _, arg as *mut T) };
    if got < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// An anonymous or device mapping, unmapped on drop.
struct Mapping {
    at: *mut u8,
    len: usize,
}

impl Mapping {
    fn new(
        at: *mut u8,
        len: usize,
        prot: i32,
        flags: i32,
        fd: i32,
        offset: u64,
    ) -> io::Result<Self> {
        // SAFETY: either a fresh mapping at an address the kernel picks, or (MAP_FIXED) a
        // replacement inside a reservation this helper owns and nothing references yet.
        let got = unsafe { libc::mmap(at.cast(), len, prot, flags, fd, offset as libc::off_t) };
        if got == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Self {
            at: got.cast(),
            len,
        })
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the mapping this value made; nothing refers into it any more.
        unsafe { libc::munmap(self.at.cast(), self.len) };
    }
}

/// The helper, attached: the device, the control area (K2H read-only and H2K read-write,
/// mapped back to back so the ring code sees one area), and the pool.
pub struct Attached {
    // Field order is drop order: the mappings go before the file closes.
    control: Mapping,
    _pool_memory: Mapping,
    pool: Pool,
    fd: OwnedFd,
    pool_start: *mut u8,
    pub pool_bytes: usize,
}

/// The pool's memory after the device closed; unmapped on drop.
pub struct PoolMemory(#[allow(dead_code)] Mapping);

impl Attached {
    /// Opens `path`, attaches as `engine`, maps the ring and donates a pool of `pool_bytes`.
    pub fn attach(path: &str, engine: &str, pool_bytes: usize) -> Result<Self, HelperError> {
        Self::attach_with(path, engine, pool_bytes, RING_FEATURES)
    }

    /// [`Self::attach`] taking only `features` (`RING_FEATURE_*`): how an older helper attaches
    /// (tests).
    pub fn attach_with(
        path: &str,
        engine: &str,
        pool_bytes: usize,
        features: u64,
    ) -> Result<Self, HelperError> {
        let cpath = CString::new(path).map_err(|_| HelperError::Open {
            path: path.into(),
            source: io::ErrorKind::InvalidInput.into(),
        })?;
        // SAFETY: a valid C string; the descriptor is owned below.
        let raw = unsafe { libc::open(cpath.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
        if raw < 0 {
            let source = io::Error::last_os_error();
            if source.raw_os_error() == Some(libc::EBUSY) {
                return Err(HelperError::Busy);
            }
            return Err(HelperError::Open {
                path: path.into(),
                source,
            });
        }
        // SAFETY: `raw` was just opened and is owned by nothing else.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let mut name = [0u8; HELPER_ENGINE_LEN];
        for (dst, src) in name
            .iter_mut()
            .zip(engine.bytes().take(HELPER_ENGINE_LEN - 1))
        {
            *dst = src;
        }
        let mut req = HelperAttach {
            abi_version: RING_ABI_VERSION,
            features,
            engine: name,
            ..HelperAttach::default()
        };
        if let Err(e) = ioctl(&fd, HELPER_IOC_ATTACH, &mut req) {
            if e.raw_os_error() == Some(libc::EPROTO) {
                return Err(HelperError::Version);
            }
            return Err(HelperError::Sys {
                what: "attach",
                source: e,
            });
        }
        if req.control_bytes != CONTROL_BYTES {
            return Err(HelperError::BadHeader("control area size"));
        }
        let control = map_control(&fd)?;
        check_header(&control)?;
        let (pool_map, pool, pool_start, pool_bytes) = donate_pool(&fd, pool_bytes)?;
        Ok(Self {
            control,
            _pool_memory: pool_map,
            pool,
            fd,
            pool_start,
            pool_bytes,
        })
    }

    /// The control area, through atomics.
    pub fn area(&self) -> ControlArea<'_> {
        let words = CONTROL_BYTES as usize / 4;
        // SAFETY: the control mapping is CONTROL_BYTES long, page aligned, lives as long as
        // `self`, and is only ever accessed as atomics (by the kernel too).
        let slice =
            unsafe { std::slice::from_raw_parts(self.control.at.cast::<AtomicU32>(), words) };
        ControlArea::new(slice).expect("the mapping is the whole area")
    }

    /// Sleeps until jobs are pending, the module lets go (`EINVAL`), or a stop signal came
    /// (the self-pipe: even one that came just before).
    fn wait_for_jobs(&self) -> io::Result<()> {
        let mut fds = [
            libc::pollfd {
                fd: self.fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            // Ignored by poll while negative (no stop signals caught).
            libc::pollfd {
                fd: STOP_PIPE_READ.load(Ordering::SeqCst),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: `fds` is two valid pollfd entries.
        if unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) } < 0 {
            return Err(io::Error::last_os_error());
        }
        if fds[0].revents & (libc::POLLERR | libc::POLLHUP) != 0 {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        Ok(())
    }

    /// `HELPER_IOC_ENTER` with `flags`: the jobs pending, or the errno.
    pub fn enter(&self, flags: u32) -> io::Result<u32> {
        let mut enter = HelperEnter { flags, pending: 0 };
        ioctl(&self.fd, HELPER_IOC_ENTER, &mut enter)?;
        Ok(enter.pending)
    }

    /// The pool's first byte and length (the kernel's copy of every job is elsewhere: tests
    /// scribble on it).
    pub fn pool_range(&self) -> (*mut u8, usize) {
        (self.pool_start, self.pool_bytes)
    }

    /// Closes the device (the module detaches this helper) but keeps the pool mapped: the
    /// memory stays writable by this process, as a GPU's pin may outlive the file.
    pub fn close_keeping_pool(self) -> PoolMemory {
        let Self {
            control,
            _pool_memory,
            fd,
            ..
        } = self;
        drop(control);
        drop(fd);
        PoolMemory(_pool_memory)
    }

    /// Serves jobs with `engine` until a stop signal (then detaches: `Ok`) or the module lets
    /// go of the helper (`Err`). `served` counts the jobs.
    pub fn serve(&self, engine: &dyn Engine, served: &mut u64) -> Result<(), HelperError> {
        let area = self.area();
        let mut beat = 0u32;
        while !stopping() {
            let done =
                serve_batch(&area, &self.pool, engine, BATCH).map_err(|_| HelperError::BadIndex)?;
            *served += done as u64;
            beat = beat.wrapping_add(1);
            area.store(HEARTBEAT_OFFSET, beat, Ordering::Relaxed);
            // Completions committed; sleep only when nothing was done and nothing is pending.
            let mut enter = HelperEnter::default();
            let entered = ioctl(&self.fd, HELPER_IOC_ENTER, &mut enter).and_then(|()| {
                match (done, enter.pending) {
                    (0, 0) => self.wait_for_jobs(),
                    _ => Ok(()),
                }
            });
            if let Err(e) = entered {
                match e.raw_os_error() {
                    Some(libc::EINTR) => continue,
                    Some(libc::EPROTO) | Some(libc::EINVAL) => return Err(HelperError::Detached),
                    _ => {
                        return Err(HelperError::Sys {
                            what: "enter",
                            source: e,
                        })
                    }
                }
            }
        }
        // Every job taken was completed; the kernel computes any still on the SQ.
        let mut unused = 0u32;
        ioctl(&self.fd, HELPER_IOC_DETACH, &mut unused).map_err(|source| HelperError::Sys {
            what: "detach",
            source,
        })?;
        Ok(())
    }
}

/// Maps K2H read-only and H2K read-write, back to back in one reservation.
fn map_control(fd: &OwnedFd) -> Result<Mapping, HelperError> {
    let len = CONTROL_BYTES as usize;
    let reserve = Mapping::new(
        std::ptr::null_mut(),
        len,
        libc::PROT_NONE,
        libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
        -1,
        0,
    )
    .map_err(|source| HelperError::Sys {
        what: "reserve the control area",
        source,
    })?;
    let fixed = libc::MAP_SHARED | libc::MAP_FIXED;
    let k2h = Mapping::new(
        reserve.at,
        K2H_BYTES as usize,
        libc::PROT_READ,
        fixed,
        fd.as_raw_fd(),
        0,
    )
    .map_err(|source| HelperError::Sys {
        what: "map the ring (K2H)",
        source,
    })?;
    let h2k_at = reserve.at.wrapping_add(H2K_OFFSET as usize);
    let h2k = Mapping::new(
        h2k_at,
        H2K_BYTES as usize,
        libc::PROT_READ | libc::PROT_WRITE,
        fixed,
        fd.as_raw_fd(),
        H2K_OFFSET,
    )
    .map_err(|source| HelperError::Sys {
        what: "map the ring (H2K)",
        source,
    })?;
    // The two fixed mappings now cover the reservation: one value owns the whole range.
    std::mem::forget(k2h);
    std::mem::forget(h2k);
    Ok(reserve)
}

fn check_header(control: &Mapping) -> Result<(), HelperError> {
    // SAFETY: the K2H mapping starts with the header, readable, at least a page long.
    let header: RingHeader = unsafe { std::ptr::read_volatile(control.at.cast::<RingHeader>()) };
    if header.magic != RING_MAGIC {
        return Err(HelperError::BadHeader("magic"));
    }
    if header.abi_version != RING_ABI_VERSION {
        return Err(HelperError::Version);
    }
    Ok(())
}

/// Allocates the pool (private anonymous memory, transparent huge pages asked for, not
/// inherited by children) and registers it with the kernel, which pins it.
fn donate_pool(fd: &OwnedFd, bytes: usize) -> Result<(Mapping, Pool, *mut u8, usize), HelperError> {
    let unit = POOL_UNIT_BYTES as usize;
    let bytes = bytes.max(2 * unit).div_ceil(unit) * unit;
    // One unit more, so the pool can start on a huge page boundary.
    let map = Mapping::new(
        std::ptr::null_mut(),
        bytes + unit,
        libc::PROT_READ | libc::PROT_WRITE,
        libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
        -1,
        0,
    )
    .map_err(|source| HelperError::Sys {
        what: "allocate the pool",
        source,
    })?;
    let start = (map.at as usize).next_multiple_of(unit);
    let base = start as *mut u8;
    // SAFETY: advice on memory this helper owns; failure only loses the hint.
    unsafe {
        libc::madvise(base.cast(), bytes, libc::MADV_HUGEPAGE);
        libc::madvise(base.cast(), bytes, libc::MADV_DONTFORK);
    }
    let mut req = HelperPool {
        address: start as u64,
        bytes: bytes as u64,
    };
    ioctl(fd, HELPER_IOC_REGISTER_POOL, &mut req).map_err(|source| HelperError::Sys {
        what: "register the pool",
        source,
    })?;
    // SAFETY: `base..base + bytes` lies in `map`, which lives as long as the pool (both are
    // fields of `Attached`); the kernel writes a job's columns only before publishing it and
    // reads them only after its completion.
    let pool = unsafe { Pool::new(base, bytes) };
    Ok((map, pool, base, bytes))
}
