//! dm-log-writes' log, read and replayed.
//!
//! The kernel's `log-writes` target (drivers/md/dm-log-writes.c, documented in
//! Documentation/admin-guide/device-mapper/log-writes.rst) passes every I/O to its device and
//! records each write, discard and flush on a second device, in the order the writes became
//! durable: a plain write is logged only when a flush issued after it completes (with the
//! other writes that flush covered, in their completion order, just before the flush's own
//! entry), a FUA write when it completes. `dmsetup message DEV 0 mark NAME` adds a named mark.
//! Replaying a prefix of the log onto a copy of the device's starting contents gives what the
//! device could hold after a power cut at that point, its volatile cache lost.
//!
//! The format (little-endian). The log device is cut in blocks of `sectorsize` bytes (the
//! logged device's logical block size):
//!
//! - block 0, the super: `magic: u64` ([`MAGIC`]), `version: u64` (1), `nr_entries: u64`,
//!   `sectorsize: u32`. The kernel rewrites it after each FUA write and mark it logs, and when
//!   the target goes away (after logging the writes no flush covered, and the mark
//!   `dm-log-writes-end`), so `nr_entries` counts what is complete on the log device.
//! - from block 1, `nr_entries` entries, each a header block — `sector: u64`, `nr_sectors: u64`
//!   (both in `sectorsize` units of the logged device), `flags: u64` ([`FLAG_FLUSH`], ...),
//!   `data_len: u64` — followed by `nr_sectors` blocks of the data written, except for a
//!   discard (no data). A mark's header block holds its name (`data_len` bytes, no NUL) after
//!   the four fields; its `nr_sectors` is 0. An empty flush has no data either.
//!
//! The planning here is pure (no I/O beyond [`ReadAt`]), so it is tested on synthetic logs.

use std::fmt;
use std::io;

/// The super's magic number.
pub const MAGIC: u64 = 0x006a_7366_7773_6872;
/// The only log version the kernel writes.
pub const VERSION: u64 = 1;
/// The entry is a flush (`REQ_PREFLUSH`): everything logged before it is durable.
pub const FLAG_FLUSH: u64 = 1 << 0;
/// The entry is a FUA write: durable when it completed.
pub const FLAG_FUA: u64 = 1 << 1;
/// The entry is a discard (no data in the log).
pub const FLAG_DISCARD: u64 = 1 << 2;
/// The entry is a mark (`dmsetup message ... mark NAME`).
pub const FLAG_MARK: u64 = 1 << 3;
/// The write was `REQ_META`.
pub const FLAG_METADATA: u64 = 1 << 4;
/// Bytes of an entry header's fields (a mark's name follows them).
const ENTRY_FIELDS: u64 = 32;
/// The mark the kernel adds when the target is removed.
pub const END_MARK: &str = "dm-log-writes-end";

/// What can go wrong reading or replaying a log.
#[derive(Debug)]
pub enum Error {
    /// Reading the log or writing the target failed.
    Io(String, io::Error),
    /// The log is not what the kernel writes.
    Format(String),
    /// The request does not fit the log (no such mark, a range out of order).
    Request(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io(what, e) => write!(f, "{what}: {e}"),
            Error::Format(what) => write!(f, "not a dm-log-writes log: {what}"),
            Error::Request(what) => write!(f, "{what}"),
        }
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;

/// Positioned reads of a log (a file or device, or bytes in a test).
pub trait ReadAt {
    /// Fills `buf` from byte `offset`; an error if the source ends first.
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;
    /// The source's size in bytes.
    fn size(&self) -> io::Result<u64>;
}

impl ReadAt for [u8] {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let start = usize::try_from(offset).ok().filter(|&s| s <= self.len());
        match start.and_then(|s| self.get(s..s.checked_add(buf.len())?)) {
            Some(src) => {
                buf.copy_from_slice(src);
                Ok(())
            }
            None => Err(io::ErrorKind::UnexpectedEof.into()),
        }
    }
    fn size(&self) -> io::Result<u64> {
        Ok(self.len() as u64)
    }
}

impl ReadAt for std::fs::File {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        std::os::unix::fs::FileExt::read_exact_at(self, buf, offset)
    }
    fn size(&self) -> io::Result<u64> {
        // A block device's metadata says 0: its end is where a seek to the end lands.
        let mut f: &std::fs::File = self;
        io::Seek::seek(&mut f, io::SeekFrom::End(0))
    }
}

fn le64(b: &[u8], at: usize) -> u64 {
    let mut v = [0u8; 8];
    v.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(v)
}

/// The log's super block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Super {
    /// Entries complete on the log device.
    pub nr_entries: u64,
    /// Bytes per block, of the log and of the logged device's sector numbers.
    pub sectorsize: u32,
}

impl Super {
    /// Decodes and checks the super block's first bytes.
    pub fn decode(b: &[u8]) -> Result<Super> {
        if b.len() < 28 {
            return Err(Error::Format("shorter than a super block".into()));
        }
        let magic = le64(b, 0);
        if magic != MAGIC {
            return Err(Error::Format(format!(
                "magic {magic:#x}, expected {MAGIC:#x}"
            )));
        }
        let version = le64(b, 8);
        if version != VERSION {
            return Err(Error::Format(format!(
                "version {version}, expected {VERSION}"
            )));
        }
        let nr_entries = le64(b, 16);
        let sectorsize = u32::from_le_bytes([b[24], b[25], b[26], b[27]]);
        if !sectorsize.is_power_of_two() || !(512..=65536).contains(&sectorsize) {
            return Err(Error::Format(format!("sector size {sectorsize}")));
        }
        Ok(Super {
            nr_entries,
            sectorsize,
        })
    }
}

/// One logged write, discard, flush or mark.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Its place in the log, from 0.
    pub index: usize,
    /// The first block written, in the logged device's `sectorsize` units.
    pub sector: u64,
    /// Blocks written (or discarded).
    pub nr_sectors: u64,
    /// `FLAG_*` bits.
    pub flags: u64,
    /// The mark's name, for a mark.
    pub mark: Option<String>,
    /// Byte offset of the entry's header block in the log; its data follows.
    pub header_offset: u64,
}

impl Entry {
    pub fn is_mark(&self) -> bool {
        self.flags & FLAG_MARK != 0
    }
    pub fn is_flush(&self) -> bool {
        self.flags & FLAG_FLUSH != 0
    }
    pub fn is_fua(&self) -> bool {
        self.flags & FLAG_FUA != 0
    }
    pub fn is_discard(&self) -> bool {
        self.flags & FLAG_DISCARD != 0
    }
    /// Carries data to write (a write, not a mark, discard or empty flush).
    pub fn has_data(&self) -> bool {
        !self.is_mark() && !self.is_discard() && self.nr_sectors > 0
    }
    /// A write or discard that was durable only once a later flush covered it: the kind a
    /// flush's batch is made of.
    pub fn is_volatile(&self) -> bool {
        !self.is_mark() && !self.is_flush() && !self.is_fua() && self.nr_sectors > 0
    }
    /// Short flag names, `-` for none.
    pub fn flag_names(&self) -> String {
        let names = [
            (FLAG_FLUSH, "flush"),
            (FLAG_FUA, "fua"),
            (FLAG_DISCARD, "discard"),
            (FLAG_MARK, "mark"),
            (FLAG_METADATA, "meta"),
        ];
        let set: Vec<&str> = names
            .iter()
            .filter(|(f, _)| self.flags & f != 0)
            .map(|(_, n)| *n)
            .collect();
        if set.is_empty() {
            "-".into()
        } else {
            set.join(",")
        }
    }
}

/// A log: its super and every entry's header.
#[derive(Clone, Debug)]
pub struct Log {
    pub sup: Super,
    pub entries: Vec<Entry>,
}

impl Log {
    /// Reads the super and walks the entries' headers (skipping their data).
    pub fn read<R: ReadAt + ?Sized>(src: &R) -> Result<Log> {
        let size = src.size().map_err(|e| Error::Io("log size".into(), e))?;
        let mut head = [0u8; 28];
        src.read_exact_at(&mut head, 0)
            .map_err(|e| Error::Io("reading the super block".into(), e))?;
        let sup = Super::decode(&head)?;
        let ss = u64::from(sup.sectorsize);
        let mut entries = Vec::new();
        let mut offset = ss;
        let mut header = vec![0u8; sup.sectorsize as usize];
        for index in 0..sup.nr_entries {
            let index =
                usize::try_from(index).map_err(|_| Error::Format("too many entries".into()))?;
            if offset.checked_add(ss).is_none_or(|end| end > size) {
                return Err(Error::Format(format!(
                    "entry {index} at byte {offset} is past the log's end ({size} bytes); the super counts {}",
                    sup.nr_entries
                )));
            }
            src.read_exact_at(&mut header, offset)
                .map_err(|e| Error::Io(format!("reading entry {index}"), e))?;
            let (sector, nr_sectors, flags, data_len) = (
                le64(&header, 0),
                le64(&header, 8),
                le64(&header, 16),
                le64(&header, 24),
            );
            let mut entry = Entry {
                index,
                sector,
                nr_sectors,
                flags,
                mark: None,
                header_offset: offset,
            };
            if entry.is_mark() {
                if data_len > ss - ENTRY_FIELDS || nr_sectors != 0 {
                    return Err(Error::Format(format!(
                        "entry {index}: a mark of {data_len} bytes and {nr_sectors} blocks"
                    )));
                }
                let name = &header[ENTRY_FIELDS as usize..(ENTRY_FIELDS + data_len) as usize];
                entry.mark = Some(String::from_utf8_lossy(name).into_owned());
            } else if data_len != 0 {
                // Inline data is a kernel path no caller takes (only marks carry data_len).
                return Err(Error::Format(format!(
                    "entry {index}: inline data ({data_len} bytes) in a write"
                )));
            }
            let data = if entry.is_discard() || entry.is_mark() {
                0
            } else {
                nr_sectors
                    .checked_mul(ss)
                    .ok_or_else(|| Error::Format(format!("entry {index}: {nr_sectors} blocks")))?
            };
            offset = offset
                .checked_add(ss)
                .and_then(|o| o.checked_add(data))
                .filter(|&end| end <= size)
                .ok_or_else(|| {
                    Error::Format(format!(
                        "entry {index}'s {nr_sectors} blocks of data run past the log's end"
                    ))
                })?;
            entries.push(entry);
        }
        Ok(Log { sup, entries })
    }

    /// Bytes per block.
    pub fn block(&self) -> u64 {
        u64::from(self.sup.sectorsize)
    }

    /// The index of the first mark named `name` at or after entry `from`.
    pub fn find_mark(&self, name: &str, from: usize) -> Result<usize> {
        self.entries
            .iter()
            .skip(from)
            .find(|e| e.mark.as_deref() == Some(name))
            .map(|e| e.index)
            .ok_or_else(|| {
                Error::Request(format!("no mark '{name}' in the log (from entry {from})"))
            })
    }

    /// The marks, in log order: (index, name).
    pub fn marks(&self) -> Vec<(usize, &str)> {
        self.entries
            .iter()
            .filter_map(|e| e.mark.as_deref().map(|m| (e.index, m)))
            .collect()
    }

    /// The flushes among entries `from..to`, each with the batch of writes it made durable.
    pub fn flush_events(&self, from: usize, to: usize) -> Result<Vec<FlushEvent>> {
        check_range(from, to, self.entries.len())?;
        let e = &self.entries;
        let mut events = Vec::new();
        for i in from..to {
            if !e[i].is_flush() {
                continue;
            }
            let mut batch_start = i;
            while batch_start > from && e[batch_start - 1].is_volatile() {
                batch_start -= 1;
            }
            // dm sends a PREFLUSH write with data as an empty flush that keeps the write's
            // sector and FUA flag, then, once the flush is done, the data with FUA: the first
            // FUA write of that sector after the flush is the rest of the same write.
            let write = (e[i].is_fua() && !e[i].has_data()).then_some(e[i].sector);
            let data = write.and_then(|sector| {
                e[i + 1..to]
                    .iter()
                    .find(|d| d.is_fua() && !d.is_flush() && d.has_data() && d.sector == sector)
            });
            events.push(FlushEvent {
                flush: i,
                batch_start,
                after: data.map_or(i + 1, |d| d.index + 1),
                write,
            });
        }
        Ok(events)
    }

    /// What replaying entries `from..to` does, in order.
    pub fn plan(&self, from: usize, to: usize) -> Result<Vec<Op>> {
        check_range(from, to, self.entries.len())?;
        let ss = self.block();
        let mut ops = Vec::new();
        for e in &self.entries[from..to] {
            if e.is_mark() {
                continue;
            }
            let target = e.sector.checked_mul(ss);
            let len = e.nr_sectors.checked_mul(ss);
            let (Some(target), Some(len)) = (target, len) else {
                return Err(Error::Format(format!(
                    "entry {}: sector {} overflows",
                    e.index, e.sector
                )));
            };
            // A flush with data flushes first, then writes (REQ_PREFLUSH), and a FUA write is
            // durable once done: a sync on each side.
            if e.is_flush() {
                ops.push(Op::Flush);
            }
            if e.is_discard() {
                ops.push(Op::Discard { target, len });
            } else if len > 0 {
                ops.push(Op::Write {
                    target,
                    log: e.header_offset + ss,
                    len,
                });
            }
            if e.is_fua() && len > 0 {
                ops.push(Op::Flush);
            }
        }
        Ok(ops)
    }
}

fn check_range(from: usize, to: usize, n: usize) -> Result<()> {
    if from > to || to > n {
        return Err(Error::Request(format!(
            "entries {from}..{to} are not a range of the log's {n}"
        )));
    }
    Ok(())
}

/// A flush in the log and the writes it made durable. A cut (the number of entries replayed)
/// in `batch_start..=flush` is the device after a power cut before the flush completed, its
/// cache having kept the writes the cut takes; a cut at `flush + 1` is the device after the
/// flush, and at `after`, for the flush of a PREFLUSH write with data, after that write too.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlushEvent {
    /// The flush's index.
    pub flush: usize,
    /// The first write of the batch logged with it (== `flush` when none).
    pub batch_start: usize,
    /// The cut past the flush and, for a PREFLUSH write with data, past that write's data
    /// (logged as a FUA write of the same sector after the flush); else `flush + 1`.
    pub after: usize,
    /// For a PREFLUSH write with data (the flush entry has the FUA flag and the write's
    /// sector), that sector; `None` for an empty flush.
    pub write: Option<u64>,
}

/// One step of a replay.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// Copy `len` bytes from byte `log` of the log to byte `target` of the target.
    Write { target: u64, log: u64, len: u64 },
    /// `len` bytes at `target` were discarded.
    Discard { target: u64, len: u64 },
    /// Everything so far must be durable.
    Flush,
}

/// What a replay does with a discard.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DiscardMode {
    /// Write zeroes (what a device that zeroes discarded blocks reads back; deterministic).
    Zero,
    /// Discard on the target too (BLKDISCARD; its contents then are the target's business).
    Discard,
    /// Leave the target's blocks alone.
    Skip,
}

/// Where a replay writes.
pub trait Target {
    fn write_at(&mut self, data: &[u8], offset: u64) -> io::Result<()>;
    fn discard(&mut self, offset: u64, len: u64) -> io::Result<()>;
    fn sync(&mut self) -> io::Result<()>;
    fn size(&mut self) -> io::Result<u64>;
}

impl Target for Vec<u8> {
    fn write_at(&mut self, data: &[u8], offset: u64) -> io::Result<()> {
        let start =
            usize::try_from(offset).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        let dst = start
            .checked_add(data.len())
            .and_then(|end| self.get_mut(start..end))
            .ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
        dst.copy_from_slice(data);
        Ok(())
    }
    fn discard(&mut self, offset: u64, len: u64) -> io::Result<()> {
        let zeroes = vec![
            0u8;
            usize::try_from(len)
                .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?
        ];
        Target::write_at(self, &zeroes, offset)
    }
    fn sync(&mut self) -> io::Result<()> {
        Ok(())
    }
    fn size(&mut self) -> io::Result<u64> {
        Ok(self.len() as u64)
    }
}

/// What a replay did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Replayed {
    pub writes: u64,
    pub bytes: u64,
    pub discards: u64,
    pub flushes: u64,
}

/// Bytes copied per read of the log.
const COPY_CHUNK: u64 = 1 << 20;

/// Carries out `ops` (from [`Log::plan`]) from `log` onto `target`, syncing at each flush when
/// `sync_each`, and at the end always.
pub fn replay<R: ReadAt + ?Sized, T: Target + ?Sized>(
    log: &R,
    ops: &[Op],
    target: &mut T,
    discard: DiscardMode,
    sync_each: bool,
) -> Result<Replayed> {
    let size = target
        .size()
        .map_err(|e| Error::Io("target size".into(), e))?;
    let mut done = Replayed::default();
    let mut buf = Vec::new();
    for op in ops {
        match *op {
            Op::Write {
                target: at, len, ..
            }
            | Op::Discard { target: at, len }
                if at.checked_add(len).is_none_or(|end| end > size) =>
            {
                return Err(Error::Request(format!(
                    "a write of {len} bytes at byte {at} is past the target's end ({size} bytes)"
                )));
            }
            Op::Write {
                target: at,
                log: from,
                len,
            } => {
                let mut off = 0;
                while off < len {
                    let n = (len - off).min(COPY_CHUNK) as usize;
                    buf.resize(n, 0);
                    log.read_exact_at(&mut buf, from + off).map_err(|e| {
                        Error::Io(
                            format!("reading {n} bytes of the log at byte {}", from + off),
                            e,
                        )
                    })?;
                    target.write_at(&buf, at + off).map_err(|e| {
                        Error::Io(format!("writing {n} bytes at byte {}", at + off), e)
                    })?;
                    off += n as u64;
                }
                done.writes += 1;
                done.bytes += len;
            }
            Op::Discard { target: at, len } => {
                match discard {
                    DiscardMode::Skip => {}
                    DiscardMode::Discard => target.discard(at, len).map_err(|e| {
                        Error::Io(format!("discarding {len} bytes at byte {at}"), e)
                    })?,
                    DiscardMode::Zero => {
                        let mut off = 0;
                        buf.clear();
                        buf.resize(len.min(COPY_CHUNK) as usize, 0);
                        while off < len {
                            let n = (len - off).min(COPY_CHUNK) as usize;
                            target.write_at(&buf[..n], at + off).map_err(|e| {
                                Error::Io(format!("zeroing {n} bytes at byte {}", at + off), e)
                            })?;
                            off += n as u64;
                        }
                    }
                }
                done.discards += 1;
            }
            Op::Flush => {
                if sync_each {
                    target
                        .sync()
                        .map_err(|e| Error::Io("syncing the target".into(), e))?;
                }
                done.flushes += 1;
            }
        }
    }
    target
        .sync()
        .map_err(|e| Error::Io("syncing the target".into(), e))?;
    Ok(done)
}

pub mod synth {
    //! Logs laid out as the kernel writes them, for tests (of this crate and its users).

    use super::{FLAG_DISCARD, FLAG_FLUSH, FLAG_FUA, FLAG_MARK, FLAG_METADATA, MAGIC, VERSION};

    /// Builds a log entry by entry.
    pub struct LogBuilder {
        ss: usize,
        buf: Vec<u8>,
        entries: u64,
    }

    impl LogBuilder {
        /// An empty log of `sectorsize`-byte blocks (the super is written by [`Self::finish`]).
        pub fn new(sectorsize: u32) -> Self {
            let ss = sectorsize as usize;
            LogBuilder {
                ss,
                buf: vec![0; ss],
                entries: 0,
            }
        }

        /// One entry: the header block, then `data` (whole blocks) unless it is a discard.
        pub fn entry(
            &mut self,
            sector: u64,
            nr_sectors: u64,
            flags: u64,
            name: &[u8],
            data: &[u8],
        ) -> &mut Self {
            let mut header = vec![0u8; self.ss];
            header[0..8].copy_from_slice(&sector.to_le_bytes());
            header[8..16].copy_from_slice(&nr_sectors.to_le_bytes());
            header[16..24].copy_from_slice(&flags.to_le_bytes());
            header[24..32].copy_from_slice(&(name.len() as u64).to_le_bytes());
            header[32..32 + name.len()].copy_from_slice(name);
            self.buf.extend_from_slice(&header);
            self.buf.extend_from_slice(data);
            self.entries += 1;
            self
        }

        /// A plain write of `data` (a multiple of the block size) at block `sector`.
        pub fn write(&mut self, sector: u64, data: &[u8]) -> &mut Self {
            self.entry(sector, (data.len() / self.ss) as u64, 0, &[], data)
        }

        /// A FUA write.
        pub fn fua(&mut self, sector: u64, data: &[u8]) -> &mut Self {
            self.entry(sector, (data.len() / self.ss) as u64, FLAG_FUA, &[], data)
        }

        /// An empty flush.
        pub fn flush(&mut self) -> &mut Self {
            self.entry(0, 0, FLAG_FLUSH, &[], &[])
        }

        /// The flush dm sends ahead of a `PREFLUSH | FUA` write with data at `sector`: no data,
        /// but the write's sector and flags (its data follows later as a FUA write).
        pub fn preflush(&mut self, sector: u64) -> &mut Self {
            self.entry(sector, 0, FLAG_FLUSH | FLAG_FUA | FLAG_METADATA, &[], &[])
        }

        /// A discard of `blocks` blocks at `sector` (no data in the log).
        pub fn discard(&mut self, sector: u64, blocks: u64) -> &mut Self {
            self.entry(sector, blocks, FLAG_DISCARD, &[], &[])
        }

        /// A mark.
        pub fn mark(&mut self, name: &str) -> &mut Self {
            self.entry(0, 0, FLAG_MARK, name.as_bytes(), &[])
        }

        /// The log's bytes, the super counting `counted` entries (all when `None`).
        pub fn finish(&self, counted: Option<u64>) -> Vec<u8> {
            let mut out = self.buf.clone();
            out[0..8].copy_from_slice(&MAGIC.to_le_bytes());
            out[8..16].copy_from_slice(&VERSION.to_le_bytes());
            out[16..24].copy_from_slice(&counted.unwrap_or(self.entries).to_le_bytes());
            out[24..28].copy_from_slice(&(self.ss as u32).to_le_bytes());
            out
        }
    }

    /// `blocks` blocks of `ss` bytes, each filled with `fill` plus its block number.
    pub fn pattern(ss: u32, blocks: usize, fill: u8) -> Vec<u8> {
        (0..blocks)
            .flat_map(|b| vec![fill.wrapping_add(b as u8); ss as usize])
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::synth::{pattern, LogBuilder};
    use super::*;

    /// A log with every kind of entry: two flush batches, FUA writes, a discard and marks.
    fn sample(ss: u32) -> (LogBuilder, Vec<u8>) {
        let mut b = LogBuilder::new(ss);
        b.mark("start")
            .write(2, &pattern(ss, 2, 0x10)) // 1
            .write(8, &pattern(ss, 1, 0x20)) // 2
            .preflush(0) // 3: a PREFLUSH|FUA write's flush ...
            .fua(0, &pattern(ss, 1, 0x30)) // 4: ... and its data
            .fua(12, &pattern(ss, 1, 0x40)) // 5: a FUA write on its own
            .mark("r1") // 6
            .write(3, &pattern(ss, 1, 0x50)) // 7: overwrites block 3
            .discard(8, 1) // 8
            .write(9, &pattern(ss, 3, 0x60)) // 9
            .flush() // 10
            .mark("r2"); // 11
        let bytes = b.finish(None);
        (b, bytes)
    }

    /// The device after the first `n` entries of `sample`, built by hand: what each entry
    /// puts where (entry, block, data).
    fn expected(ss: u32, n: usize, dev_blocks: usize) -> Vec<u8> {
        let steps = [
            (1, 2, pattern(ss, 2, 0x10)),
            (2, 8, pattern(ss, 1, 0x20)),
            (4, 0, pattern(ss, 1, 0x30)),
            (5, 12, pattern(ss, 1, 0x40)),
            (7, 3, pattern(ss, 1, 0x50)),
            (8, 8, vec![0; ss as usize]),
            (9, 9, pattern(ss, 3, 0x60)),
        ];
        let ss = ss as usize;
        let mut dev = vec![0u8; dev_blocks * ss];
        for (_, block, data) in steps.iter().filter(|(entry, _, _)| *entry < n) {
            dev[block * ss..block * ss + data.len()].copy_from_slice(data);
        }
        dev
    }

    #[test]
    fn parses_what_the_kernel_writes() {
        for ss in [512u32, 4096] {
            let (_, bytes) = sample(ss);
            let log = Log::read(bytes.as_slice()).unwrap();
            assert_eq!(
                log.sup,
                Super {
                    nr_entries: 12,
                    sectorsize: ss
                }
            );
            assert_eq!(log.entries.len(), 12);
            let s = u64::from(ss);
            // Each header one block, its data right after: 1 + 1, 1 + 2, 1 + 1, 1, 1 + 1, ...
            let offsets: Vec<u64> = log.entries.iter().map(|e| e.header_offset / s).collect();
            assert_eq!(offsets, [1, 2, 5, 7, 8, 10, 12, 13, 15, 16, 20, 21]);
            assert_eq!(log.marks(), vec![(0, "start"), (6, "r1"), (11, "r2")]);
            let e = &log.entries[9];
            assert_eq!((e.sector, e.nr_sectors, e.flags), (9, 3, 0));
            assert!(log.entries[8].is_discard() && !log.entries[8].has_data());
            assert!(log.entries[3].is_flush() && !log.entries[3].has_data());
            assert!(log.entries[4].is_fua() && log.entries[4].has_data());
            assert_eq!(log.entries[4].flag_names(), "fua");
            assert_eq!(log.entries[1].flag_names(), "-");
            assert_eq!(log.find_mark("r1", 0).unwrap(), 6);
            assert_eq!(log.find_mark("start", 1).ok(), None);
        }
    }

    #[test]
    fn replays_every_prefix_and_continues_from_any_point() {
        for ss in [512u32, 4096] {
            let (_, bytes) = sample(ss);
            let log = Log::read(bytes.as_slice()).unwrap();
            let n = log.entries.len();
            for cut in 0..=n {
                let mut dev = vec![0u8; 16 * ss as usize];
                let ops = log.plan(0, cut).unwrap();
                replay(bytes.as_slice(), &ops, &mut dev, DiscardMode::Zero, true).unwrap();
                assert_eq!(dev, expected(ss, cut, 16), "sectorsize {ss}, cut {cut}");
                // The same cut reached in two steps, from every point in between.
                for mid in 0..=cut {
                    let mut dev2 = vec![0u8; 16 * ss as usize];
                    for (a, b) in [(0, mid), (mid, cut)] {
                        let ops = log.plan(a, b).unwrap();
                        replay(bytes.as_slice(), &ops, &mut dev2, DiscardMode::Zero, false)
                            .unwrap();
                    }
                    assert_eq!(dev2, dev, "sectorsize {ss}, {mid} then {cut}");
                }
            }
        }
    }

    #[test]
    fn a_cut_at_a_mark_is_everything_before_it() {
        let ss = 512;
        let (_, bytes) = sample(ss);
        let log = Log::read(bytes.as_slice()).unwrap();
        let r1 = log.find_mark("r1", 0).unwrap();
        let mut dev = vec![0u8; 16 * ss as usize];
        replay(
            bytes.as_slice(),
            &log.plan(0, r1).unwrap(),
            &mut dev,
            DiscardMode::Zero,
            false,
        )
        .unwrap();
        assert_eq!(dev, expected(ss, r1, 16));
        // Block 3 still holds the first batch's data, block 8 is not discarded yet.
        assert_eq!(dev[3 * 512], 0x11);
        assert_eq!(dev[8 * 512], 0x20);
    }

    #[test]
    fn discards_zero_discard_or_are_skipped() {
        let ss = 512;
        let (_, bytes) = sample(ss);
        let log = Log::read(bytes.as_slice()).unwrap();
        let ops = log.plan(0, 9).unwrap();
        let mut zeroed = vec![0xffu8; 16 * 512];
        let mut skipped = zeroed.clone();
        replay(
            bytes.as_slice(),
            &ops,
            &mut zeroed,
            DiscardMode::Zero,
            false,
        )
        .unwrap();
        replay(
            bytes.as_slice(),
            &ops,
            &mut skipped,
            DiscardMode::Skip,
            false,
        )
        .unwrap();
        assert!(zeroed[8 * 512..9 * 512].iter().all(|&b| b == 0));
        assert!(skipped[8 * 512..9 * 512].iter().all(|&b| b == 0x20));
        // Vec's discard zeroes too; a device's is BLKDISCARD.
        let mut discarded = vec![0xffu8; 16 * 512];
        let done = replay(
            bytes.as_slice(),
            &ops,
            &mut discarded,
            DiscardMode::Discard,
            false,
        )
        .unwrap();
        assert_eq!(discarded, zeroed);
        assert_eq!(
            done,
            Replayed {
                writes: 5,
                bytes: 6 * 512,
                discards: 1,
                flushes: 3
            }
        );
    }

    #[test]
    fn plans_syncs_around_flushes_and_fua_writes() {
        let ss = 512u32;
        let mut b = LogBuilder::new(ss);
        b.entry(4, 1, FLAG_FLUSH | FLAG_FUA, &[], &pattern(ss, 1, 1))
            .write(5, &pattern(ss, 1, 2));
        let bytes = b.finish(None);
        let log = Log::read(bytes.as_slice()).unwrap();
        assert_eq!(
            log.plan(0, 2).unwrap(),
            vec![
                Op::Flush,
                Op::Write {
                    target: 4 * 512,
                    log: 2 * 512,
                    len: 512
                },
                Op::Flush,
                Op::Write {
                    target: 5 * 512,
                    log: 4 * 512,
                    len: 512
                },
            ]
        );
        assert!(log.plan(1, 3).is_err());
        assert!(log.plan(2, 1).is_err());
    }

    #[test]
    fn finds_each_flush_and_the_batch_it_made_durable() {
        let ev = |flush, batch_start, after, write| FlushEvent {
            flush,
            batch_start,
            after,
            write,
        };
        let (_, bytes) = sample(512);
        let log = Log::read(bytes.as_slice()).unwrap();
        // Flush 3 (of a PREFLUSH write of block 0) made entries 1 and 2 durable, and its
        // data is entry 4; flush 10 made 7..=9 durable (the discard included).
        assert_eq!(
            log.flush_events(0, 12).unwrap(),
            vec![ev(3, 1, 5, Some(0)), ev(10, 7, 11, None)]
        );
        assert!(log.entries[3].is_fua() && log.entries[3].flag_names() == "flush,fua,meta");
        // Between r1 and r2 only the second; a range never reaches back before its start.
        assert_eq!(log.flush_events(6, 11).unwrap(), vec![ev(10, 7, 11, None)]);
        assert_eq!(log.flush_events(8, 11).unwrap(), vec![ev(10, 8, 11, None)]);
        // A FUA write before the batch ends it; an empty batch starts at the flush. A FUA write
        // after an empty flush is a write of its own (it may have waited for other members'
        // flushes), not part of the flush; a PREFLUSH write's data comes after other FUA
        // writes, or not in the range at all.
        let mut b = LogBuilder::new(512);
        b.write(1, &pattern(512, 1, 1))
            .fua(2, &pattern(512, 1, 2))
            .write(3, &pattern(512, 1, 3))
            .flush() // 3
            .fua(5, &pattern(512, 1, 4))
            .preflush(6) // 5
            .fua(7, &pattern(512, 1, 5))
            .fua(6, &pattern(512, 1, 6)) // 7: 5's data
            .preflush(9) // 8
            .write(9, &pattern(512, 1, 7))
            .fua(9, &pattern(512, 1, 8)); // 10: 8's data
        let bytes = b.finish(None);
        let log = Log::read(bytes.as_slice()).unwrap();
        assert_eq!(
            log.flush_events(0, 11).unwrap(),
            vec![
                ev(3, 2, 4, None),
                ev(5, 5, 8, Some(6)),
                ev(8, 8, 11, Some(9))
            ]
        );
        assert_eq!(log.flush_events(0, 10).unwrap()[2], ev(8, 8, 9, Some(9)));
    }

    #[test]
    fn reads_only_the_entries_the_super_counts() {
        // The super is rewritten after FUA writes and marks: entries logged after the last
        // rewrite are on the log device but not counted, and not replayed.
        let (b, _) = sample(512);
        let bytes = b.finish(Some(6));
        let log = Log::read(bytes.as_slice()).unwrap();
        assert_eq!(log.entries.len(), 6);
        assert!(log.find_mark("r1", 0).is_err());
    }

    #[test]
    fn refuses_what_the_kernel_does_not_write() {
        let (b, good) = sample(512);
        let err = |bytes: &[u8]| Log::read(bytes).unwrap_err().to_string();
        let mut bad = good.clone();
        bad[0] ^= 1;
        assert!(err(&bad).contains("magic"), "{}", err(&bad));
        let mut bad = good.clone();
        bad[8] = 2;
        assert!(err(&bad).contains("version"));
        let mut bad = good.clone();
        bad[24..28].copy_from_slice(&1000u32.to_le_bytes());
        assert!(err(&bad).contains("sector size"));
        // More entries counted than the log holds.
        let bad = b.finish(Some(13));
        assert!(err(&bad).contains("past the log's end"), "{}", err(&bad));
        // Data cut short.
        assert!(err(&good[..good.len() - 1]).contains("past the log's end"));
        let truncated = &good[..9 * 512];
        assert!(err(truncated).contains("entry 4"), "{}", err(truncated));
        // A mark name longer than its block, and inline data in a write.
        let mut b = LogBuilder::new(512);
        b.entry(0, 0, FLAG_MARK, &[b'x'; 480], &[]);
        let mut bad = b.finish(None);
        bad[512 + 24..512 + 32].copy_from_slice(&481u64.to_le_bytes());
        assert!(err(&bad).contains("a mark of 481 bytes"));
        let mut b = LogBuilder::new(512);
        b.entry(0, 1, 0, b"inline", &pattern(512, 1, 0));
        assert!(err(&b.finish(None)).contains("inline data"));
        assert!(err(&good[..20]).contains("super"));
    }

    #[test]
    fn refuses_to_write_past_the_target() {
        let (_, bytes) = sample(512);
        let log = Log::read(bytes.as_slice()).unwrap();
        let mut small = vec![0u8; 12 * 512];
        let e = replay(
            bytes.as_slice(),
            &log.plan(0, 12).unwrap(),
            &mut small,
            DiscardMode::Zero,
            false,
        )
        .unwrap_err();
        assert!(e.to_string().contains("past the target's end"), "{e}");
    }
}
