// SPDX-License-Identifier: GPL-2.0

//! One window of a reshape moved (`reshape_run.rs` decides which and when): array sectors
//! read in the old geometry and written in whole stripes of the new one through the rebuild
//! buffer, parity computed here (not offloaded: nothing a helper computes is needed where the
//! position moves on at once).
//!
//! Degraded as md's reshape is: a data column whose old member is lost (failed, missing, not
//! yet rebuilt) or whose read fails (a bad sector) is recovered from the other columns of its
//! old stripe, which no write touches while the window moves (windows are whole stripes of
//! both geometries, and the step drained the writes that mapped them old). The rebuild buffer
//! holds one new stripe's columns, so each recovery is done first, in the columns of the old
//! stripe's members, and its result put where the move needs it: written at once to its new
//! place (and read back with the rest), or, where that member cannot be written, kept in one
//! of the buffer's two spare columns (one per lost member at most: a stripe has one column on
//! each). Columns on members that cannot be written are not written; the parity covers them,
//! and a rebuild after the reshape puts them back.

use super::array::{ArrayEngine, Store};
use super::layout::Recovery;
use super::members::MemberSet;
use super::parity::{ParityJob, ParityOp};
use super::platform::{MemberEvent, Op, Platform, RebuildIo, MAX_REBUILD_BATCH};
use super::rebuild::{bit, REBUILD_COLUMN_SECTORS};
use super::reshape::{ReshapePlan, Side as PlanSide};
use core::sync::atomic::Ordering;

/// Where the rows of one data column of a new stripe come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Source {
    /// Nothing to read: past the content on a member that cannot be read (the parity
    /// covers whatever it holds).
    Nothing,
    /// The old geometry: `sector` of member `member`.
    Old { member: u32, sector: u64 },
    /// The new place itself: a grow's new room, or rows recovered and written there.
    Here,
    /// Recovered into spare buffer column `column` (its member cannot be written).
    Kept { column: u32 },
}

/// How an attempt at moving some rows ended.
enum Moved {
    Done,
    /// Reads of these members failed: tried again with them counted lost (none: what
    /// failed cannot be recovered, too much is lost).
    Unreadable(MemberSet),
    /// A write failed (its member is failed), or the buffer could not take the job.
    Failed,
}

/// The rows one call moves: `grain` rows at chunk offset `at` of new stripe `stripe`, whose
/// array sectors start at `base` and member rows at `row`.
#[derive(Clone, Copy)]
struct Rows {
    stripe: u64,
    base: u64,
    row: u64,
    at: u64,
    grain: u64,
    chunk: u64,
}

impl<M: Store> ArrayEngine<M> {
    /// Reads array sectors `[lo, hi)` in the old geometry and writes them in whole stripes of
    /// the new one; false on an error (a member that failed a write is failed).
    pub(super) fn move_window<P: Platform>(
        &self,
        p: &P,
        plan: &ReshapePlan,
        lo: u64,
        hi: u64,
    ) -> bool {
        let (new, new_offset) = plan.geometry(PlanSide::New);
        let data = u64::from(new.data_members());
        let chunk = u64::from(new.chunk_sectors()).max(1);
        let grain = REBUILD_COLUMN_SECTORS
            .min(u64::from(plan.old().chunk_sectors()))
            .min(chunk)
            .max(1);
        let first = new.stripe_of(lo);
        let last = new.stripe_of(hi.saturating_sub(1));
        for stripe in first..=last {
            let row = new_offset.saturating_add(new.stripe_member_sector(stripe));
            let base = stripe.saturating_mul(data.saturating_mul(chunk));
            let mut at = 0;
            while at < chunk {
                let rows = Rows {
                    stripe,
                    base,
                    row,
                    at,
                    grain,
                    chunk,
                };
                if !self.move_rows(p, plan, rows) {
                    return false;
                }
                at += grain;
            }
        }
        true
    }

    /// Moves `rows`, around the members that cannot be read (and, after a failed read, that
    /// one too).
    fn move_rows<P: Platform>(&self, p: &P, plan: &ReshapePlan, rows: Rows) -> bool {
        let mut lost = (0..self.geometry().members())
            .filter(|&m| !self.usable(m, MemberSet::EMPTY))
            .fold(MemberSet::EMPTY, MemberSet::with);
        // Each try loses a member more: past the parity the recovery refuses.
        for _ in 0..4 {
            match self.try_move_rows(p, plan, rows, lost) {
                Moved::Done => return true,
                Moved::Failed => return false,
                Moved::Unreadable(more) if !more.is_empty() => lost = lost.union(more),
                Moved::Unreadable(_) => break,
            }
        }
        // Standing still (reported) until it reads.
        self.reshape.read_failed.store(true, Ordering::Relaxed);
        false
    }

    /// Moves `rows`, the old columns on the members in `lost` recovered from the parity:
    /// every data column read from the old geometry (or, past the content, from where it lies
    /// in the new one: a grow's new room, whose parity must match it), parity generated,
    /// every column of the content and the parity written where its member takes writes.
    fn try_move_rows<P: Platform>(
        &self,
        p: &P,
        plan: &ReshapePlan,
        rows: Rows,
        lost: MemberSet,
    ) -> Moved {
        let (new, _) = plan.geometry(PlanSide::New);
        let map = new.stripe_map(rows.stripe);
        let here = rows.row.saturating_add(rows.at);
        // One batch of transfers, the reads and then the writes (the kernel's frame is small).
        let mut ios = [RebuildIo::default(); MAX_REBUILD_BATCH];
        let mut n = 0;
        // Of the reads, those of new places, as bits (a failed one is not recovered); the
        // columns read from the old geometry, written after; the columns recovered into the
        // buffer's spare columns, `(spare, column)`.
        let (mut new_places, mut moved, mut kept) = (0u64, MemberSet::EMPTY, [None; 2]);
        for d in 0..new.data_members() {
            let column = map.as_ref().map_or(d, |m| m.data_member(d));
            let spares_used = kept.iter().flatten().count() as u32;
            let source = match self.source(p, plan, rows, (d, column), lost, spares_used) {
                Ok(source) => source,
                Err(why) => return why,
            };
            let read = match source {
                Source::Old { member, sector } => {
                    moved = moved.with(column);
                    RebuildIo {
                        sector,
                        sectors: rows.grain,
                        member,
                        column,
                    }
                }
                Source::Here => {
                    new_places |= 1u64.checked_shl(n as u32).unwrap_or(0);
                    RebuildIo {
                        sector: here,
                        sectors: rows.grain,
                        member: column,
                        column,
                    }
                }
                Source::Kept { column: spare } => {
                    if let Some(free) = kept.iter_mut().find(|k| k.is_none()) {
                        *free = Some((spare, column));
                    }
                    continue;
                }
                Source::Nothing => continue,
            };
            if let Some(io) = ios.get_mut(n) {
                *io = read;
                n += 1;
            }
        }
        let reads = ios.get(..n).unwrap_or(&[]);
        let failed = p.rebuild_batch(Op::Read, reads);
        if failed & new_places != 0 {
            return Moved::Unreadable(MemberSet::EMPTY);
        }
        if failed != 0 {
            // Recovered next time.
            return Moved::Unreadable(failed_members(reads, failed));
        }
        for &(spare, column) in kept.iter().flatten() {
            p.rebuild_copy(spare, column, 0, rows.grain);
        }
        let mut columns = moved;
        if let Some(map) = map {
            let job = ParityJob {
                op: ParityOp::Generate,
                map,
                head: rows.at,
                chunk: rows.chunk,
                sectors: rows.grain,
            };
            if p.rebuild_compute(&job, false).is_none() {
                return Moved::Failed;
            }
            columns = columns.union(map.parity_set());
        }
        let mut n = 0;
        for column in columns.iter().filter(|&c| self.writable(c)) {
            if let Some(io) = ios.get_mut(n) {
                *io = RebuildIo {
                    sector: here,
                    sectors: rows.grain,
                    member: column,
                    column,
                };
                n += 1;
            }
        }
        if self.rebuild_batch_ok(p, Op::Write, ios.get(..n).unwrap_or(&[])) {
            Moved::Done
        } else {
            Moved::Failed
        }
    }

    /// Where data column `d` of `rows` (on member `column` in the new stripe) comes from:
    /// recovered first if its old member is in `lost`, and then written to its new place at
    /// once or, where that cannot be written, kept in the buffer's next spare column (`used`
    /// are taken; one column of the new stripe per lost member, and there are two).
    #[inline(never)]
    fn source<P: Platform>(
        &self,
        p: &P,
        plan: &ReshapePlan,
        rows: Rows,
        (d, column): (u32, u32),
        lost: MemberSet,
        used: u32,
    ) -> Result<Source, Moved> {
        let (new, _) = plan.geometry(PlanSide::New);
        let (old, old_offset) = plan.geometry(PlanSide::Old);
        let a = rows
            .base
            .saturating_add(u64::from(d).saturating_mul(rows.chunk))
            .saturating_add(rows.at);
        if a >= plan.content() {
            let readable = new.level().has_parity() && self.usable(column, MemberSet::EMPTY);
            return Ok(if readable {
                Source::Here
            } else {
                Source::Nothing
            });
        }
        let piece = old
            .map_read(a, rows.grain, 0)
            .ok()
            .and_then(|mut i| i.next())
            .ok_or(Moved::Failed)?;
        if !lost.contains(piece.member) {
            return Ok(Source::Old {
                member: piece.member,
                sector: old_offset.saturating_add(piece.member_sector),
            });
        }
        self.recover_old(p, plan, a, rows.grain, lost)?;
        if self.writable(column) {
            let write = RebuildIo {
                sector: rows.row.saturating_add(rows.at),
                sectors: rows.grain,
                member: column,
                column: piece.member,
            };
            if !self.rebuild_batch_ok(p, Op::Write, &[write]) {
                return Err(Moved::Failed);
            }
            return Ok(Source::Here);
        }
        // Spare columns past both geometries' members (the recoveries' columns).
        if used >= 2 || old.members() > new.members() {
            return Err(Moved::Unreadable(MemberSet::EMPTY));
        }
        let spare = new.members().saturating_add(used);
        p.rebuild_copy(piece.member, spare, 0, rows.grain);
        Ok(Source::Kept { column: spare })
    }

    /// Recovers the old geometry's `sectors` at array sector `a` (inside one chunk) from the
    /// other columns of its old stripe, the members in `lost` not read: its member's column
    /// of the rebuild buffer holds them after. The buffer's other columns are overwritten.
    fn recover_old<P: Platform>(
        &self,
        p: &P,
        plan: &ReshapePlan,
        a: u64,
        sectors: u64,
        lost: MemberSet,
    ) -> Result<(), Moved> {
        let (old, old_offset) = plan.geometry(PlanSide::Old);
        let stripe = old.stripe_of(a);
        let map = old.stripe_map(stripe).ok_or(Moved::Failed)?;
        let piece = old
            .map_read(a, sectors, 0)
            .ok()
            .and_then(|mut i| i.next())
            .ok_or(Moved::Failed)?;
        let first = old.stripe_member_sector(stripe);
        let lost = lost.intersect(MemberSet::first(old.members()));
        let job = ParityJob {
            op: ParityOp::Recover { lost },
            map,
            head: piece.member_sector.saturating_sub(first),
            chunk: u64::from(old.chunk_sectors()).max(1),
            sectors,
        };
        if job
            .stripes()
            .any(|(m, _, _)| m.recovery(lost) == Recovery::Lost)
        {
            return Err(Moved::Unreadable(MemberSet::EMPTY));
        }
        let mut reads = [RebuildIo::default(); MAX_REBUILD_BATCH];
        let mut n = 0;
        for member in (0..old.members()).filter(|&m| !lost.contains(m)) {
            if let Some(r) = reads.get_mut(n) {
                *r = RebuildIo {
                    sector: old_offset.saturating_add(piece.member_sector),
                    sectors,
                    member,
                    column: member,
                };
                n += 1;
            }
        }
        let reads = reads.get(..n).unwrap_or(&[]);
        let failed = p.rebuild_batch(Op::Read, reads);
        if failed != 0 {
            return Err(Moved::Unreadable(failed_members(reads, failed)));
        }
        p.rebuild_compute(&job, false).ok_or(Moved::Failed)?;
        Ok(())
    }

    /// Sends a batch of rebuild-buffer transfers; false if one failed (a member whose write
    /// failed is failed: the window is moved again around it).
    fn rebuild_batch_ok<P: Platform>(&self, p: &P, op: Op, ios: &[RebuildIo]) -> bool {
        if ios.is_empty() {
            return true;
        }
        let failed = p.rebuild_batch(op, ios);
        if failed == 0 {
            return true;
        }
        if op == Op::Write {
            for member in failed_members(ios, failed).iter() {
                self.try_fail(p, member, MemberEvent::Failed);
            }
        }
        false
    }
}

/// The members of the transfers in `ios` that `failed` (a [`RebuildBuffer::rebuild_batch`]
/// result) names.
///
/// [`RebuildBuffer::rebuild_batch`]: super::platform::RebuildBuffer::rebuild_batch
fn failed_members(ios: &[RebuildIo], failed: u64) -> MemberSet {
    (ios.iter().enumerate())
        .filter(|&(i, _)| bit(failed, i))
        .fold(MemberSet::EMPTY, |set, (_, io)| set.with(io.member))
}
