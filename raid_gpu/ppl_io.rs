// SPDX-License-Identifier: GPL-2.0

//! The partial parity log's home in the module (its logic: `engine::ppl`, `engine::log_write`,
//! `engine::log_replay`): at the array's start, before anything reads it, the in-sync members'
//! logs are read, replayed after an unclean stop, and voided (every head gets the next epoch).

use crate::kernel_ext::crc::crc32c;
use crate::engine::members::MemberSet;
use crate::engine::ppl::{scan_log, LogId, LogReader, LoggedEntry, BLOCK_BYTES, MAX_LOGGED_SECTORS};
use crate::io::ArrayIo;
use crate::kernel_ext::bio::{read_page, transfer_virt};
use crate::engine::superblock::UUID_LEN;
use crate::superblock_io::zeroed_block;
use kernel::{alloc::KVVec, page::Page, prelude::*};

/// Reads the members' logs for `scan_log`: a page at a time, and payloads whole.
struct MemberLogs<'a> {
    io: &'a ArrayIo,
    page: Page,
    /// Room for the longest payload (kmalloc: a bio takes it in one piece).
    payload: KVec<u8>,
}

impl LogReader for MemberLogs<'_> {
    fn read(&mut self, member: u32, sector: u64, block: &mut [u8; BLOCK_BYTES]) -> bool {
        let Some(file) = self.io.files.get(member) else {
            return false;
        };
        if read_page(file.bdev(), sector, &self.page).is_err() {
            return false;
        }
        // SAFETY: `block` has room for BLOCK_BYTES (= PAGE_SIZE) bytes.
        unsafe { self.page.read_raw(block.as_mut_ptr(), 0, BLOCK_BYTES) }.is_ok()
    }

    fn payload_crc(&mut self, member: u32, sector: u64, sectors: u64) -> Option<u32> {
        let file = self.io.files.get(member)?;
        let bytes = usize::try_from(sectors).ok()?.checked_mul(512)?;
        let data = self.payload.get_mut(..bytes)?;
        // SAFETY: `bytes` bytes of a kmalloc buffer owned here, for a synchronous read; the
        // member is open.
        unsafe { transfer_virt(file.bdev(), sector, data.as_mut_ptr(), bytes, false) }.ok()?;
        Some(crc32c(data))
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
        let len = MAX_LOGGED_SECTORS as usize * 512;
        let mut payload = KVec::with_capacity(len, GFP_KERNEL)?;
        payload.extend_with(len, 0u8, GFP_KERNEL)?;
        let mut reader = MemberLogs {
            io: self,
            page: Page::alloc_page(GFP_KERNEL)?,
            payload,
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
