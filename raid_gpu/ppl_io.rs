// SPDX-License-Identifier: GPL-2.0

//! The partial parity log's home in the module (its logic: `engine::ppl`, `engine::log_write`,
//! `engine::log_replay`): at the array's start, before anything reads it, the in-sync members'
//! logs are read, replayed after an unclean stop, and voided (every head gets the next epoch).

use crate::kernel_ext::crc::crc32c;
use crate::engine::members::MemberSet;
use crate::engine::ppl::{scan_log, LogId, LogReader, LoggedEntry, BLOCK_BYTES, MAX_LOGGED_SECTORS};
use crate::io::ArrayIo;
use crate::kernel_ext::bio::transfer_virt;
use crate::engine::superblock::UUID_LEN;
use crate::superblock_io::zeroed_block;
use kernel::{alloc::KVVec, prelude::*};

/// Bytes the log is read in at a dirty start: the scan walks each ring block by block, so one
/// read serves 64 blocks (a 64 MiB ring takes 256 reads per member, not 16 383), and a payload
/// (at most 128 KiB) mostly lies in the window its header was read in (review 3's R3).
const WINDOW_BYTES: usize = 256 * 1024;

/// Reads the members' logs for `scan_log` through a window of [`WINDOW_BYTES`].
struct MemberLogs<'a> {
    io: &'a ArrayIo,
    /// The window (kmalloc: a bio takes it in one piece), and where it was read from: member
    /// and sector (`None`: nothing read).
    window: KVec<u8>,
    at: Option<(u32, u64)>,
}

impl MemberLogs<'_> {
    /// `bytes` of member `member` from `sector`, read through the window if they lie in it, or
    /// in the window read from `sector` now.
    fn window(&mut self, member: u32, sector: u64, bytes: usize) -> Option<&[u8]> {
        let inside = |(m, first): (u32, u64)| {
            let skip = usize::try_from(sector.checked_sub(first)?.checked_mul(512)?).ok()?;
            (m == member && skip.checked_add(bytes)? <= WINDOW_BYTES).then_some(skip)
        };
        if let Some(skip) = self.at.and_then(inside) {
            return self.window.get(skip..skip.checked_add(bytes)?);
        }
        let file = self.io.files.get(member)?;
        self.at = None;
        let to = self.window.as_mut_ptr();
        // SAFETY: at most WINDOW_BYTES of a kmalloc buffer owned here, for a synchronous read;
        // the member is open.
        let read = |len| unsafe { transfer_virt(file.bdev(), sector, to, len, false) };
        if read(WINDOW_BYTES).is_ok() {
            self.at = Some((member, sector));
        } else if bytes > WINDOW_BYTES || read(bytes).is_err() {
            // Near the device's end a window is too long: then only what was asked for.
            return None;
        }
        self.window.get(..bytes)
    }
}

impl LogReader for MemberLogs<'_> {
    fn read(&mut self, member: u32, sector: u64, block: &mut [u8; BLOCK_BYTES]) -> bool {
        // A window of exactly one block (no length check that could panic).
        match self
            .window(member, sector, BLOCK_BYTES)
            .and_then(|data| <&[u8; BLOCK_BYTES]>::try_from(data).ok())
        {
            Some(data) => {
                *block = *data;
                true
            }
            None => false,
        }
    }

    fn payload_crc(&mut self, member: u32, sector: u64, sectors: u64) -> Option<u32> {
        let bytes = usize::try_from(sectors).ok()?.checked_mul(512)?;
        self.window(member, sector, bytes).map(crc32c)
    }
}

impl ArrayIo {
    /// The log at the array's start: finds the newest epoch (the heads) and, with `replay`
    /// (the array was not stopped cleanly: the key the entries of its last life carry), reads
    /// the rings and makes the parity whole again from the entries of that epoch; then voids
    /// every entry. Before the disk appears; nothing else does I/O yet. `Err` if the replay
    /// could not read or write: the array must not start with parity it could not fix.
    pub(crate) fn start_log(&self, replay: Option<[u8; UUID_LEN]>) -> Result {
        let engine = &self.engine;
        let Some(area) = engine.log().area() else {
            return Ok(());
        };
        let name = engine.superblock().array_name;
        let name = name.as_str();
        let in_sync = (0..engine.geometry().members())
            .filter(|&m| engine.members().get(m as usize).is_some_and(|s| s.is_in_sync()))
            .fold(MemberSet::EMPTY, MemberSet::with);
        // A payload fits a window.
        const _: () = assert!(MAX_LOGGED_SECTORS as usize * 512 <= WINDOW_BYTES);
        let mut window = KVec::with_capacity(WINDOW_BYTES, GFP_KERNEL)?;
        window.extend_with(WINDOW_BYTES, 0u8, GFP_KERNEL)?;
        let mut reader = MemberLogs {
            io: self,
            window,
            at: None,
        };
        let mut entries = KVVec::<LoggedEntry>::new();
        let mut full = false;
        // Without a replay only the heads' epoch matters.
        let id = LogId {
            key: replay.unwrap_or(engine.superblock().log_key),
            ..engine.log_id()
        };
        let mut block = zeroed_block()?;
        let mut take = |e| {
            full |= entries.push(e, GFP_KERNEL).is_err();
        };
        let out: Option<&mut dyn FnMut(LoggedEntry)> = match replay {
            Some(_) => Some(&mut take),
            None => None,
        };
        let scan = scan_log(&id, &area, in_sync, &mut reader, &mut block, out);
        if full {
            return Err(ENOMEM);
        }
        if !scan.unreadable.is_empty() {
            pr_warn!(
                "graid: {}: partial parity log unreadable on members {:#x}\n",
                name,
                scan.unreadable.bits()
            );
        }
        if replay.is_some() {
            let logs_read = in_sync.minus(scan.unreadable);
            let stats = engine.replay_log(self, &mut entries, logs_read).map_err(|_| {
                pr_err!("graid: {}: the partial parity log replay failed (I/O error)\n", name);
                EIO
            })?;
            pr_info!(
                "graid: {}: partial parity log replayed: {} entries ({} in groups, {} of writes cut short while logging), {} parity sectors rewritten, {} pieces left alone\n",
                name,
                scan.entries,
                scan.grouped,
                stats.torn,
                stats.rewritten_sectors,
                stats.skipped
            );
        }
        engine.start_log(self, scan.epoch);
        Ok(())
    }
}
