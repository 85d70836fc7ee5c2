// SPDX-License-Identifier: GPL-2.0

//! The partial parity log's replay: after an unclean stop, before the array takes any I/O,
//! the parity of every row a logged write may have left torn is made whole again from the
//! partial parity and the columns the write changed, as they are on disk now.
//!
//! For each piece [`plan_replay`] gives (rows written by one set of members), with the members
//! missing now:
//!
//! - every changed column present: P = pp ⊕ Σ D, Q = pq ⊕ Σ g^slot · D, for the parity
//!   members present;
//! - RAID 6 with one changed column missing and both parities present: that column's value is
//!   taken from P (D = P ⊕ pp ⊕ the other changed columns), and Q rewritten to match, so the two
//!   parities agree again about the columns the write left alone;
//! - otherwise nothing: a missing changed column was lost after the write (one missing at the
//!   write is never named changed: its new data is inside pp) and held data in flight, and
//!   every column the write left alone is present, so nothing the write did not touch is
//!   computed from the torn parity.
//!
//! The platform finds the entries (`LoggedEntry`, payloads checked); the engine rewrites the
//! parity through the rebuild buffer, synchronously (the array is not live yet).

use super::array::{ArrayEngine, Store};
use super::members::MemberSet;
use super::platform::{Op, Platform, RebuildIoError};
use super::ppl::{drop_torn, gf_pow2, plan_replay, sort_entries, LoggedEntry, ReplayPiece};

/// What a replay did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReplayStats {
    /// Pieces of rows looked at.
    pub pieces: u64,
    /// Parity sectors rewritten.
    pub rewritten_sectors: u64,
    /// Pieces left alone (a changed column missing where nothing can be fixed).
    pub skipped: u64,
    /// Entries of writes cut short while logging (they changed nothing): not replayed.
    pub torn: u64,
}

impl<M: Store> ArrayEngine<M> {
    /// The array's start, after [`Self::replay_log`] if it was not clean: the log's heads
    /// held `epoch`; every member's head gets the next one (voiding every entry), so the array
    /// starts with empty rings. Its entries carry the key of the superblock the engine was
    /// made with ([`Self::log_id`]): fresh random bytes at every start, so an entry of an
    /// earlier life never passes for one of this.
    pub fn start_log<P: Platform>(&self, p: &P, epoch: u64) {
        if self.has_log() {
            self.log.set_epoch(epoch);
            self.void_log(p);
        }
    }

    /// Replays `entries` (every entry of the newest epoch found in the in-sync members' logs,
    /// payloads checked; `logs`: the members whose whole log was read). The array's start
    /// only, before any I/O. An I/O error stops it: the array must not start then.
    pub fn replay_log<P: Platform>(
        &self,
        p: &P,
        entries: &mut [LoggedEntry],
        logs: MemberSet,
    ) -> Result<ReplayStats, RebuildIoError> {
        let mut stats = ReplayStats::default();
        if !self.has_log() || !self.geometry().level().has_parity() {
            return Ok(stats);
        }
        let kept = drop_torn(entries, logs);
        stats.torn = (entries.len() - kept) as u64;
        let entries = entries.get_mut(..kept).unwrap_or(&mut []);
        sort_entries(entries);
        let mut result = Ok(());
        plan_replay(entries, |piece| {
            if result.is_ok() {
                stats.pieces += 1;
                result = self.replay_piece(p, &piece, &mut stats);
            }
        });
        result.map(|()| stats)
    }

    fn replay_piece<P: Platform>(
        &self,
        p: &P,
        piece: &ReplayPiece,
        stats: &mut ReplayStats,
    ) -> Result<(), RebuildIoError> {
        let n = self.geometry().members();
        let chunk = u64::from(self.geometry().chunk_sectors()).max(1);
        let Some(map) = self.geometry().stripe_map(piece.start / chunk) else {
            return Err(RebuildIoError);
        };
        // A piece lies in one stripe (`slice_plan`); refuse one that does not.
        if piece.start / chunk != (piece.start + piece.sectors - 1) / chunk {
            return Err(RebuildIoError);
        }
        let present = |m: u32| self.usable(m, MemberSet::EMPTY);
        let (p_member, q_member) = (map.p(), map.q());
        // A payload counts only from the log of the parity member it is partial of.
        let pp = piece.pp.filter(|&(m, _)| m == p_member);
        let pq = piece.pq.filter(|&(m, _)| Some(m) == q_member);
        let p_ok = present(p_member) && pp.is_some();
        let q_ok = q_member.is_some_and(present) && pq.is_some();
        let missing = piece
            .modified
            .iter()
            .filter(|&m| !present(m))
            .fold(MemberSet::EMPTY, MemberSet::with);
        // What is rewritten: see the module's comment.
        let (rewrite_p, rewrite_q, decode) = match missing.len() {
            0 => (p_ok, q_ok, None),
            1 if p_ok && q_ok => (false, true, missing.iter().next()),
            _ => (false, false, None),
        };
        if !rewrite_p && !rewrite_q {
            stats.skipped += 1;
            return Ok(());
        }
        let sectors = piece.sectors;
        let row = self.data_offset() + piece.start;
        let read = |member: u32, sector: u64, column: u32| {
            p.rebuild_io(Op::Read, member, sector, column, 0, sectors)
        };
        let (pp_col, pq_col) = (n, n + 1);
        for m in piece.modified.iter().filter(|&m| present(m)) {
            read(m, row, m)?;
        }
        if let Some((log_member, at)) = pp.filter(|_| rewrite_p || decode.is_some()) {
            read(log_member, at, pp_col)?;
        }
        if let Some(lost) = decode {
            // The missing changed column as P has it: P ⊕ pp ⊕ the other changed columns.
            read(p_member, row, lost)?;
            p.rebuild_accumulate(pp_col, lost, 1, 0, sectors);
            for m in piece.modified.iter().filter(|&m| m != lost) {
                p.rebuild_accumulate(m, lost, 1, 0, sectors);
            }
        }
        if rewrite_p {
            for m in piece.modified.iter() {
                p.rebuild_accumulate(m, pp_col, 1, 0, sectors);
            }
            p.rebuild_io(Op::Write, p_member, row, pp_col, 0, sectors)?;
            stats.rewritten_sectors += sectors;
        }
        if let (true, Some(q), Some((log_member, at))) = (rewrite_q, q_member, pq) {
            read(log_member, at, pq_col)?;
            for m in piece.modified.iter() {
                let Some(slot) = map.syndrome_slot(m) else {
                    continue;
                };
                p.rebuild_accumulate(m, pq_col, gf_pow2(slot), 0, sectors);
            }
            p.rebuild_io(Op::Write, q, row, pq_col, 0, sectors)?;
            stats.rewritten_sectors += sectors;
        }
        Ok(())
    }
}
