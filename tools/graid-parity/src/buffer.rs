//! A heap buffer whose bytes start on a [`CHUNK_ALIGN`] boundary (or a page boundary), for
//! callers (tests, benches, tools) that have no page-aligned memory of their own.

use crate::job::CHUNK_ALIGN;

/// The page size [`AlignedBuf::zeroed_page_aligned`] aligns to.
const PAGE_BYTES: usize = 4096;

/// A zero-initialised byte buffer aligned to [`CHUNK_ALIGN`] bytes.
///
/// It over-allocates by one alignment unit and exposes the aligned window, which needs no
/// `unsafe` and costs at most 63 bytes (4095 for a page-aligned buffer).
pub struct AlignedBuf {
    storage: Vec<u8>,
    start: usize,
    len: usize,
    align: usize,
}

impl AlignedBuf {
    /// A buffer of `len` zero bytes.
    pub fn zeroed(len: usize) -> AlignedBuf {
        AlignedBuf::zeroed_aligned(len, CHUNK_ALIGN)
    }

    /// A buffer of `len` zero bytes starting on a 4 KiB page boundary, like the memory the
    /// engine gets in the real system (the kernel's stripe pages, the helper's page-aligned
    /// shared data area). Benchmarks use it: where buffers start within a page (4 KiB
    /// aliasing, L1 set conflicts) moves throughput by up to 2x, so 64-byte alignment alone
    /// makes results vary from run to run with the allocator's placement.
    pub fn zeroed_page_aligned(len: usize) -> AlignedBuf {
        AlignedBuf::zeroed_aligned(len, PAGE_BYTES)
    }

    fn zeroed_aligned(len: usize, align: usize) -> AlignedBuf {
        let storage = vec![0u8; len + align];
        let start = storage.as_ptr().align_offset(align);
        assert!(start < align, "cannot align a heap buffer");
        AlignedBuf {
            storage,
            start,
            len,
            align,
        }
    }

    /// An aligned copy of `bytes`.
    pub fn from_slice(bytes: &[u8]) -> AlignedBuf {
        let mut buf = AlignedBuf::zeroed(bytes.len());
        buf.copy_from_slice(bytes);
        buf
    }
}

// Not derived: a cloned Vec lands at a new address, so the aligned offset must be recomputed.
impl Clone for AlignedBuf {
    fn clone(&self) -> AlignedBuf {
        let mut buf = AlignedBuf::zeroed_aligned(self.len, self.align);
        buf.copy_from_slice(self);
        buf
    }
}

impl std::ops::Deref for AlignedBuf {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.storage[self.start..self.start + self.len]
    }
}

impl std::ops::DerefMut for AlignedBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.storage[self.start..self.start + self.len]
    }
}

impl std::fmt::Debug for AlignedBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AlignedBuf({} bytes)", self.len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn is_aligned_and_sized() {
        for len in [0, 1, 64, 4096, 4097] {
            let mut buf = AlignedBuf::zeroed(len);
            assert_eq!(buf.len(), len);
            assert_eq!(buf.as_ptr() as usize % CHUNK_ALIGN, 0);
            assert_eq!(buf.as_mut_ptr() as usize % CHUNK_ALIGN, 0);
            assert!(buf.iter().all(|&b| b == 0));
        }
    }

    #[test]
    fn page_aligned_is_page_aligned_and_clones_stay_so() {
        for len in [0, 64, 4096, 5000] {
            let buf = AlignedBuf::zeroed_page_aligned(len);
            assert_eq!(buf.len(), len);
            assert_eq!(buf.as_ptr() as usize % PAGE_BYTES, 0);
            assert!(buf.iter().all(|&b| b == 0));
            assert_eq!(buf.clone().as_ptr() as usize % PAGE_BYTES, 0);
        }
    }

    #[test]
    fn clone_stays_aligned() {
        let buf = AlignedBuf::from_slice(&[7u8; 100]);
        let copy = buf.clone();
        assert_eq!(
            copy.as_ptr() as usize % CHUNK_ALIGN,
            0,
            "clone must re-align"
        );
        assert_eq!(&copy[..], &buf[..]);
    }
}
