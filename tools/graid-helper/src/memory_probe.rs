//! `graid-helper memory-probe`: which kinds of host memory the engine's device takes as a
//! shared pool (`Engine::share_memory`). The pool the helper donates is private anonymous
//! memory; the other kinds show what a driver refuses (the GPU check script records it).

use graid_parity::Engine;

/// Bytes of each region tried: one pool unit.
const BYTES: usize = 2 << 20;

/// A kind of memory, mapped: its name and the mapping (unmapped on drop).
struct Region {
    kind: &'static str,
    at: *mut u8,
    fd: Option<libc::c_int>,
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: `at` is a mapping of `BYTES` this value made; `fd` is its own descriptor.
        unsafe {
            libc::munmap(self.at.cast(), BYTES);
            if let Some(fd) = self.fd {
                libc::close(fd);
            }
        }
    }
}

/// Maps `BYTES` with `flags` over `fd` (-1: anonymous), advised with `advice` if any.
fn map(
    kind: &'static str,
    flags: libc::c_int,
    fd: Option<libc::c_int>,
    advice: Option<libc::c_int>,
) -> Result<Region, String> {
    // SAFETY: a fresh mapping at an address the kernel picks.
    let at = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            BYTES,
            libc::PROT_READ | libc::PROT_WRITE,
            flags,
            fd.unwrap_or(-1),
            0,
        )
    };
    if at == libc::MAP_FAILED {
        if let Some(fd) = fd {
            // SAFETY: our own descriptor.
            unsafe { libc::close(fd) };
        }
        return Err(format!("{kind}: mmap: {}", std::io::Error::last_os_error()));
    }
    let region = Region {
        kind,
        at: at.cast(),
        fd,
    };
    if let Some(advice) = advice {
        // SAFETY: the mapping just made.
        unsafe { libc::madvise(at, BYTES, advice) };
    }
    // Touch every page: a device imports memory that exists.
    // SAFETY: `BYTES` writable bytes at `at`.
    unsafe { std::ptr::write_bytes(region.at, 0x5a, BYTES) };
    Ok(region)
}

/// A `memfd` of `BYTES`, shared-mapped.
fn memfd() -> Result<Region, String> {
    // SAFETY: a valid name; the descriptor is owned by the region.
    let fd = unsafe { libc::memfd_create(c"graid-probe".as_ptr(), libc::MFD_CLOEXEC) };
    // SAFETY: our own descriptor.
    if fd < 0 || unsafe { libc::ftruncate(fd, BYTES as libc::off_t) } != 0 {
        return Err(format!("memfd: {}", std::io::Error::last_os_error()));
    }
    map("memfd (shared)", libc::MAP_SHARED, Some(fd), None)
}

/// Tries each kind of memory with `engine`; one line per kind.
pub fn run(engine: &dyn Engine) -> Vec<String> {
    let private = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS;
    let regions = [
        map("anonymous (the helper's pool)", private, None, None),
        map(
            "anonymous, MADV_HUGEPAGE",
            private,
            None,
            Some(libc::MADV_HUGEPAGE),
        ),
        map(
            "hugetlbfs (MAP_HUGETLB)",
            private | libc::MAP_HUGETLB,
            None,
            None,
        ),
        memfd(),
        map(
            "anonymous shared",
            libc::MAP_SHARED | libc::MAP_ANONYMOUS,
            None,
            None,
        ),
    ];
    regions
        .into_iter()
        .map(|region| match region {
            Err(e) => format!("{e} (not tried)"),
            Ok(region) => {
                // SAFETY: the region lives until the end of this arm, and is forgotten before.
                let taken = unsafe { engine.share_memory(Some((region.at, BYTES))) };
                // SAFETY: forgetting needs nothing.
                unsafe { engine.share_memory(None) };
                format!(
                    "{}: {}",
                    region.kind,
                    if taken { "imported" } else { "refused" }
                )
            }
        })
        .collect()
}
