// SPDX-License-Identifier: GPL-2.0

//! RAID 5/6 in the kernel: stripe buffers and the in-kernel parity backend over `lib/raid/`.
//!
//! A stripe buffer holds up to 64 columns (a current and a new one per member, see
//! `engine/parity.rs`), each one `kmalloc` allocation of whole pages: physically contiguous
//! (one bvec per member I/O) and page aligned (what the library's recovery functions need).
//! Parity is computed page by page, so the kernel's zero page can stand in for data a
//! syndrome update leaves out, and recovery stays within its one-page limit.

use crate::engine::layout::{Recovery, Role, StripeMap};
use crate::kernel_ext::crc::crc32c;
use crate::engine::parity::{Columns, ParityJob, ParityOp};
use crate::engine::platform::LOG_HEADERS;
use crate::engine::ppl::BLOCK_BYTES as PPL_BLOCK_BYTES;
use crate::kernel_ext::raid_math::{self, Vectors, MAX_VECTORS};
use crate::write_stats::{self, Counters};
use core::ptr;
use core::sync::atomic::AtomicU64;
use kernel::alloc::{flags, Flags};
use kernel::page::PAGE_SIZE;
use kernel::prelude::*;

/// Columns a buffer can hold.
pub(crate) const COLUMNS: usize = 64;

/// One request's stripe buffer.
pub(crate) struct StripeBuffer {
    columns: KVec<KVec<u8>>,
    /// Bytes of each column in use now.
    bytes: usize,
    /// The array's reserve buffer, handed back instead of freed.
    pub(crate) reserve: bool,
    /// With a partial parity log: [`LOG_HEADERS`] header blocks for the log writes.
    headers: KVec<u8>,
    /// With a partial parity log: a page the RAID 6 library's P side of a Q accumulation
    /// goes to (see [`Self::accumulate`]).
    scratch: KVec<u8>,
}

impl StripeBuffer {
    /// A buffer with the columns in `columns`, each `bytes` long (rounded up to pages), and
    /// log header blocks if `log`.
    pub(crate) fn new(columns: Columns, bytes: usize, log: bool, gfp: Flags) -> Result<KBox<Self>> {
        let mut list = KVec::with_capacity(COLUMNS, gfp)?;
        for _ in 0..COLUMNS {
            list.push(KVec::new(), gfp)?;
        }
        let mut buffer = KBox::new(
            Self {
                columns: list,
                bytes: 0,
                reserve: false,
                headers: KVec::new(),
                scratch: KVec::new(),
            },
            gfp,
        )?;
        buffer.refit(columns, bytes, log, gfp)?;
        Ok(buffer)
    }

    /// Makes the buffer hold `columns`, each `bytes` long, and log header blocks if `log`:
    /// a column too short takes the memory of a column not asked for that is long enough,
    /// else memory allocated with `gfp` (zeroed once, when allocated). What the columns held
    /// before is left in them: every step fills what it reads (member reads, the request's
    /// data, computed parity) before it uses it.
    pub(crate) fn refit(&mut self, columns: Columns, bytes: usize, log: bool, gfp: Flags) -> Result {
        let need = bytes.max(1).next_multiple_of(PAGE_SIZE);
        for c in columns.iter() {
            let short = self.columns.get(c as usize).ok_or(EINVAL)?.len() < need;
            if !short {
                continue;
            }
            let spare = (0..COLUMNS as u32).find(|&d| {
                !columns.contains(d) && self.columns.get(d as usize).is_some_and(|col| col.len() >= need)
            });
            let memory = match spare.and_then(|d| self.columns.get_mut(d as usize)) {
                Some(spare) => core::mem::take(spare),
                None => zeroed_pages(need, gfp)?,
            };
            if let Some(slot) = self.columns.get_mut(c as usize) {
                // The short memory goes where the spare was (or is freed): kept for later.
                let short = core::mem::replace(slot, memory);
                if let Some(d) = spare.and_then(|d| self.columns.get_mut(d as usize)) {
                    *d = short;
                }
            }
        }
        if log && self.headers.is_empty() {
            let len = LOG_HEADERS as usize * PPL_BLOCK_BYTES;
            let mut headers = KVec::with_capacity(len, gfp)?;
            headers.extend_with(len, 0u8, gfp)?;
            self.headers = headers;
        }
        if log && self.scratch.is_empty() {
            self.scratch = zeroed_pages(PAGE_SIZE, gfp)?;
        }
        self.bytes = bytes;
        Ok(())
    }

    /// Bytes of memory the buffer holds (its columns, headers and scratch page).
    pub(crate) fn storage(&self) -> usize {
        self.columns
            .iter()
            .map(|c| c.len())
            .fold(self.headers.len() + self.scratch.len(), usize::saturating_add)
    }

    /// Uses the buffer for columns of `bytes` bytes; false if its columns are shorter or one
    /// of `columns` is missing.
    pub(crate) fn fit(&mut self, columns: Columns, bytes: usize) -> bool {
        let fits = columns.iter().all(|c| {
            self.columns
                .get(c as usize)
                .is_some_and(|col| col.len() >= bytes && !col.is_empty())
        });
        if fits {
            self.bytes = bytes;
        }
        fits
    }

    /// Pointer to `len` bytes at `offset` of column `column`, if they lie inside it.
    pub(crate) fn at(&mut self, column: u32, offset: usize, len: usize) -> Option<*mut u8> {
        let col = self.columns.get_mut(column as usize)?;
        let end = offset.checked_add(len)?;
        if col.is_empty() || end > col.len() {
            return None;
        }
        // In bounds: checked above.
        Some(col.as_mut_ptr().wrapping_add(offset))
    }

    /// Log header block `index`, if the buffer has it.
    pub(crate) fn header(&mut self, index: u32) -> Option<*mut u8> {
        let start = (index as usize).checked_mul(PPL_BLOCK_BYTES)?;
        let block = self.headers.get_mut(start..start.checked_add(PPL_BLOCK_BYTES)?)?;
        Some(block.as_mut_ptr())
    }

    /// Fills log header block `index` with `fill` (nothing if the buffer has none).
    pub(crate) fn fill_header(&mut self, index: u32, fill: &dyn Fn(&mut [u8; PPL_BLOCK_BYTES])) {
        let start = (index as usize).saturating_mul(PPL_BLOCK_BYTES);
        let block = self
            .headers
            .get_mut(start..start.saturating_add(PPL_BLOCK_BYTES))
            .and_then(|b| b.first_chunk_mut::<PPL_BLOCK_BYTES>());
        if let Some(block) = block {
            fill(block);
        }
    }

    /// Column `to` += `coef` × column `from`, `len` bytes at byte `at` (GF(2^8); nothing if
    /// either lacks them, or they are one column), a page at a time through the kernel's RAID
    /// library where it can: a plain XOR (`coef` 1: RAID 5's partial parity, P's of RAID 6) by
    /// its XOR, a power of two (`coef` = 2^s: the Q partial parity of data slot `s`) by its
    /// syndrome update with `from` as slot `s`'s data and Q `to`, the P side in the scratch
    /// page. Else byte by byte.
    pub(crate) fn accumulate(&mut self, from: u32, to: u32, coef: u8, at: usize, len: usize) {
        if from == to {
            return;
        }
        let (Some(src), Some(dst)) = (self.at(from, at, len), self.at(to, at, len)) else {
            return;
        };
        let aligned = at % 512 == 0 && len % 512 == 0;
        let scratch = self.scratch.as_mut_ptr();
        let slot = syndrome_slot_of(coef).filter(|_| !self.scratch.is_empty());
        if aligned && (coef == 1 || (slot.is_some() && raid_math::can_xor_syndrome())) {
            let mut done = 0;
            while done < len {
                let piece = (len - done).min(PAGE_SIZE);
                let mut ptrs: Vectors = [ptr::null_mut(); MAX_VECTORS];
                let (s, d) = (src.wrapping_add(done), dst.wrapping_add(done));
                match slot {
                    Some(slot) if coef != 1 => {
                        // Data slots below `slot` are not read (the library only multiplies
                        // by 2 for them); the zero page stands there all the same.
                        for p in ptrs.iter_mut().take(slot) {
                            *p = raid_math::zero_page();
                        }
                        ptrs[slot] = s;
                        ptrs[slot + 1] = scratch;
                        ptrs[slot + 2] = d;
                        // SAFETY: `slot + 3 <= MAX_VECTORS` disks (`syndrome_slot_of`), at
                        // least 4 (`slot >= 1`: slot 0 is `coef` 1); `s` and `d` are `piece`
                        // bytes of two different columns at a multiple of 512 inside them
                        // (page-aligned allocations, `at` checked both), the scratch a page
                        // of its own; none in any I/O while a step computes; task context.
                        unsafe { raid_math::xor_syndrome(slot + 3, slot, slot, piece, &mut ptrs) };
                    }
                    _ => {
                        ptrs[0] = s;
                        // SAFETY: two different columns (separate page-aligned allocations),
                        // `piece` bytes of each at a multiple of 512 inside them (`at` checked
                        // both), a multiple of 512 long; not in any I/O while a step computes
                        // on them; task context (stripe steps only).
                        unsafe { raid_math::xor_into(d, &mut ptrs, 1, piece) };
                    }
                }
                done += piece;
            }
            return;
        }
        // SAFETY: two different columns (separate allocations), `len` bytes each, not in
        // any I/O while a step computes on them.
        let (src, dst) = unsafe {
            (
                core::slice::from_raw_parts(src.cast_const(), len),
                core::slice::from_raw_parts_mut(dst, len),
            )
        };
        crate::engine::ppl::accumulate(dst, src, coef);
    }

    /// CRC-32C of `len` bytes at byte `at` of column `column` (0 if it lacks them).
    pub(crate) fn crc(&mut self, column: u32, at: usize, len: usize) -> u32 {
        match self.at(column, at, len) {
            // SAFETY: `len` bytes of the column, read-only here.
            Some(p) => crc32c(unsafe { core::slice::from_raw_parts(p.cast_const(), len) }),
            None => 0,
        }
    }

    /// Copies `len` bytes at byte `at` of column `from` to column `to` (nothing if either
    /// lacks them, or they are one column).
    pub(crate) fn copy_column(&mut self, from: u32, to: u32, at: usize, len: usize) {
        if from == to {
            return;
        }
        if let (Some(src), Some(dst)) = (self.at(from, at, len), self.at(to, at, len)) {
            // SAFETY: two different columns (separate allocations), `len` bytes each.
            unsafe { ptr::copy_nonoverlapping(src, dst, len) };
        }
    }
}

/// `len` zeroed bytes (whole pages) in one page-aligned allocation, as the RAID library's
/// pointers must be: page-sized kmalloc allocations are page aligned, and anything else is
/// refused rather than handed to the library.
fn zeroed_pages(len: usize, gfp: Flags) -> Result<KVec<u8>> {
    let mut memory = KVec::with_capacity(len, gfp)?;
    memory.extend_with(len, 0u8, gfp)?;
    if memory.as_ptr() as usize % PAGE_SIZE != 0 {
        return Err(ENOMEM);
    }
    Ok(memory)
}

/// The data slot `s` whose Q coefficient is `coef` (`coef` = 2^s in GF(2^8)), if it is a slot
/// a stripe can have (below `MAX_VECTORS - 2`).
fn syndrome_slot_of(coef: u8) -> Option<usize> {
    let mut power = 1u8;
    for slot in 0..MAX_VECTORS - 2 {
        if power == coef {
            return Some(slot);
        }
        power = crate::engine::ppl::gf_mul(power, 2);
    }
    None
}

/// Computes `job` on `buf`, stripe by stripe and page by page within each; false if the job
/// does not fit the buffer or the library cannot do it (a RAID 6 read-modify-write without
/// `raid6_xor_syndrome`, an update over more than one stripe).
pub(crate) fn compute(buf: &mut StripeBuffer, job: &ParityJob) -> bool {
    let bytes = |sectors: u64| usize::try_from(sectors).ok()?.checked_mul(512);
    match bytes(job.sectors) {
        Some(total) if total > 0 && total <= buf.bytes => {}
        _ => return false,
    }
    if matches!(job.op, ParityOp::Update { .. }) && job.stripe_count() != 1 {
        return false;
    }
    for (map, from, to) in job.stripes() {
        let (Some(mut offset), Some(end)) = (bytes(from), bytes(to)) else {
            return false;
        };
        // Pieces of at most a page from the stripe's first byte: 512-byte aligned, which is
        // all the library's SIMD loops ask (a run's later stripes need not start on a page).
        while offset < end {
            let len = (end - offset).min(PAGE_SIZE);
            if !compute_piece(buf, &map, job.op, offset, len) {
                return false;
            }
            offset += len;
        }
    }
    true
}

/// The stripe's members in md's syndrome order: data slots first, then P and Q.
fn slot_order(map: &StripeMap) -> Option<([u32; MAX_VECTORS], usize)> {
    let mut order = [0u32; MAX_VECTORS];
    let data = map.data() as usize;
    for m in 0..map.members() {
        match map.role(m) {
            Role::Data(_) => {
                let slot = map.syndrome_slot(m)? as usize;
                *order.get_mut(slot)? = m;
            }
            Role::P => *order.get_mut(data)? = m,
            Role::Q => *order.get_mut(data + 1)? = m,
        }
    }
    Some((order, data))
}

/// One piece (`len <= PAGE_SIZE` bytes at `offset` of every column) of one stripe of a job.
fn compute_piece(
    buf: &mut StripeBuffer,
    map: &StripeMap,
    op: ParityOp,
    offset: usize,
    len: usize,
) -> bool {
    let n = map.members();
    let Some((order, data)) = slot_order(map) else {
        return false;
    };
    let raid6 = map.q().is_some();
    let mut col = |c: u32| buf.at(c, offset, len);
    // Every pointer below comes from `col`: inside its column, 512-byte aligned (columns are
    // page aligned, `offset` a multiple of 512), `len <= PAGE_SIZE` bytes long.
    // A read-modify-write buffer holds only the changed data columns and P/Q: the others stay
    // null here, and only `Update` runs without them.
    let mut ptrs: Vectors = [ptr::null_mut(); MAX_VECTORS];
    let disks = data + if raid6 { 2 } else { 1 };
    for (slot, &m) in order.iter().take(disks).enumerate() {
        ptrs[slot] = col(m).unwrap_or(ptr::null_mut());
    }
    let complete = ptrs.iter().take(disks).all(|p| !p.is_null());
    let needs_all = !matches!(op, ParityOp::Update { .. });
    if (needs_all && !complete) || ptrs[data].is_null() || (raid6 && ptrs[data + 1].is_null()) {
        return false;
    }
    let p_ptr = ptrs[data];
    // This stripe's part of a recovery: regenerating lost parity is a generation.
    let op = match op {
        ParityOp::Recover { lost } => match map.recovery(lost) {
            Recovery::RegenerateQ | Recovery::RegeneratePq => ParityOp::Generate,
            how => return recover(map, how, &mut ptrs, data, disks, len),
        },
        op => op,
    };
    match op {
        ParityOp::Generate => {
            if raid6 {
                // SAFETY: `disks` valid pointers (see above); task context (work items only).
                unsafe { raid_math::gen_syndrome(disks, len, &mut ptrs) };
            } else {
                // SAFETY: as above; P is one of the buffer's columns, not a source.
                unsafe {
                    p_ptr.write_bytes(0, len);
                    raid_math::xor_into(p_ptr, &mut ptrs, data, len);
                }
            }
            true
        }
        ParityOp::Update { changed } => {
            let mut old: Vectors = [ptr::null_mut(); MAX_VECTORS];
            let mut new: Vectors = [ptr::null_mut(); MAX_VECTORS];
            let (mut first, mut last, mut count) = (usize::MAX, 0, 0);
            for m in changed.iter() {
                let (Some(slot), Some(o), Some(nw)) =
                    (map.syndrome_slot(m), col(m), col(n + m))
                else {
                    return false;
                };
                let slot = slot as usize;
                if raid6 {
                    old[slot] = o;
                    new[slot] = nw;
                } else {
                    old[count] = o;
                    old[count + 1] = nw;
                }
                count += 2;
                first = first.min(slot);
                last = last.max(slot);
            }
            if count == 0 {
                return true;
            }
            if !raid6 {
                // P ^= old ^ new for every changed member.
                // SAFETY: as above.
                unsafe { raid_math::xor_into(p_ptr, &mut old, count, len) };
                return true;
            }
            if !raid_math::can_xor_syndrome() {
                return false;
            }
            let zero = raid_math::zero_page();
            for table in [&mut old, &mut new] {
                for p in table.iter_mut().take(last + 1).skip(first) {
                    if p.is_null() {
                        *p = zero;
                    }
                }
                table[data] = p_ptr;
                table[data + 1] = ptrs[data + 1];
                // Folding the old data out and the new data in: P ^= Σ old ^ new, and the same
                // for Q with each slot's coefficient. Slots outside `first..=last` are unused.
                // SAFETY: as above; `len <= PAGE_SIZE`, so the zero page covers it.
                unsafe { raid_math::xor_syndrome(disks, first, last, len, table) };
            }
            true
        }
        // Resolved above.
        ParityOp::Recover { .. } => false,
    }
}

/// Rebuilds the lost columns of one page. `ptrs` holds every member's page in syndrome order.
fn recover(
    map: &StripeMap,
    how: Recovery,
    ptrs: &mut Vectors,
    data: usize,
    disks: usize,
    len: usize,
) -> bool {
    let slot = |m: u32| map.syndrome_slot(m).map(|s| s as usize);
    let xor_rebuild = |lost: usize, ptrs: &mut Vectors| {
        // The lost page is the XOR of P and every other data page (or, for P, of the data).
        let mut srcs: Vectors = [ptr::null_mut(); MAX_VECTORS];
        let mut count = 0;
        for (i, &p) in ptrs.iter().take(data + 1).enumerate() {
            if i != lost {
                srcs[count] = p;
                count += 1;
            }
        }
        let dest = ptrs[lost];
        // SAFETY: the pointers are the stripe's pages (see `compute_page`), `dest` not among
        // the sources; task context.
        unsafe {
            dest.write_bytes(0, len);
            raid_math::xor_into(dest, &mut srcs, count, len);
        }
    };
    match how {
        Recovery::Intact | Recovery::RegenerateQ | Recovery::RegeneratePq => true,
        Recovery::Xor { lost } if lost == map.p() => {
            xor_rebuild(data, ptrs);
            true
        }
        Recovery::Xor { lost: d } | Recovery::DataAndQ { data: d } => match slot(d) {
            Some(s) => {
                xor_rebuild(s, ptrs);
                true
            }
            None => false,
        },
        Recovery::DataAndP { data: d } => match slot(d) {
            Some(s) => {
                // SAFETY: page-aligned pages of at most a page (see `compute_page`).
                unsafe { raid_math::recov_datap(disks, len, s, ptrs) };
                true
            }
            None => false,
        },
        Recovery::TwoData { a, b } => match (slot(a), slot(b)) {
            (Some(sa), Some(sb)) if sa < sb => {
                // SAFETY: as above.
                unsafe { raid_math::recov_2data(disks, len, sa, sb, ptrs) };
                true
            }
            _ => false,
        },
        Recovery::Lost => false,
    }
}

/// Where an array's stripe buffers came from (`/sys/kernel/debug/graid/stripe_buffers`):
/// taken back from the array's cache, wide and narrow fresh allocations, the reserve, and
/// requests that waited for a buffer to be freed.
pub(crate) type BufferStats = Counters<5>;
pub(crate) const BUFFER_CACHED: usize = 0;
pub(crate) const BUFFER_WIDE: usize = 1;
pub(crate) const BUFFER_FRESH: usize = 2;
pub(crate) const BUFFER_RESERVE: usize = 3;
pub(crate) const BUFFER_WAITS: usize = 4;
static BUFFERS_GONE: [AtomicU64; 5] = write_stats::gone();

/// A new array's buffer counters.
pub(crate) const fn buffer_stats() -> BufferStats {
    Counters::new(&BUFFERS_GONE)
}

/// Writes taken in by another's stripe write (`/sys/kernel/debug/graid/held_stripes`;
/// `engine/stripe_hold.rs`).
pub(crate) type CarriedWrites = Counters<1>;
static CARRIED_GONE: [AtomicU64; 1] = write_stats::gone();

/// A new array's count of carried writes.
pub(crate) const fn carried_writes() -> CarriedWrites {
    Counters::new(&CARRIED_GONE)
}

/// Writes every array's carried writes for debugfs.
pub(crate) fn write_hold_stats(_: &(), f: &mut kernel::fmt::Formatter<'_>) -> kernel::fmt::Result {
    write_stats::write_totals(f, ["carried"], &CARRIED_GONE, |io| &io.carried)
}

/// Writes every array's buffer counters for debugfs.
pub(crate) fn write_buffer_stats(_: &(), f: &mut kernel::fmt::Formatter<'_>) -> kernel::fmt::Result {
    let names = ["cached", "wide", "fresh", "reserve", "waits"];
    write_stats::write_totals(f, names, &BUFFERS_GONE, |io| &io.buffer_stats)
}

/// The array's reserve buffer: one buffer of every column at the longest slice, so a request
/// always gets memory when nothing else holds a buffer (the engine's promise to the platform).
pub(crate) struct Reserve {
    buffer: core::sync::atomic::AtomicPtr<StripeBuffer>,
}

impl Reserve {
    pub(crate) fn new(members: u32, slice_bytes: usize, log: bool) -> Result<Self> {
        let mut all = Columns::EMPTY;
        for c in 0..(2 * members).min(COLUMNS as u32) {
            all = all.with(c);
        }
        let mut buffer = StripeBuffer::new(all, slice_bytes, log, flags::GFP_KERNEL)?;
        buffer.reserve = true;
        Ok(Self {
            buffer: core::sync::atomic::AtomicPtr::new(KBox::into_raw(buffer)),
        })
    }

    /// No reserve (RAID 0/1/10).
    pub(crate) fn none() -> Self {
        Self {
            buffer: core::sync::atomic::AtomicPtr::new(ptr::null_mut()),
        }
    }

    /// Takes the reserve, if nobody holds it.
    pub(crate) fn take(&self) -> Option<KBox<StripeBuffer>> {
        let raw = self
            .buffer
            .swap(ptr::null_mut(), core::sync::atomic::Ordering::AcqRel);
        // SAFETY: a non-null pointer here came from `KBox::into_raw` and is owned by nobody
        // else (the swap took it).
        (!raw.is_null()).then(|| unsafe { KBox::from_raw(raw) })
    }

    /// Takes `other`'s buffer in place of this one's (a reshape's new member count needs more
    /// columns). With no request in flight: nobody holds the reserve.
    pub(crate) fn replace_with(&self, other: Reserve) {
        if let Some(buffer) = other.take() {
            drop(self.take());
            self.put(buffer);
        }
    }

    /// Gives the reserve back.
    pub(crate) fn put(&self, buffer: KBox<StripeBuffer>) {
        self.buffer
            .store(KBox::into_raw(buffer), core::sync::atomic::Ordering::Release);
    }
}

impl Drop for Reserve {
    fn drop(&mut self) {
        drop(self.take());
    }
}
