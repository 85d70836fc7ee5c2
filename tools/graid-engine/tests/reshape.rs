//! A reshape's plan (`engine/reshape.rs`) against a model of the members: every sector of the
//! old array tagged, windows moved one by one as the plan says (each a set of whole new
//! stripes, read from the old geometry and written member row by member row), the position
//! recorded when the plan asks and at random otherwise, user writes between any two row
//! writes, and the power cut at random between any two row writes. A user write goes where
//! the restart would read it (below the recorded position into the new geometry, past the
//! window in motion into the old one); one between them waits for the next record, as the
//! design says (on-disk-format.rst, "Reshape (design)"). At every one of those moments every
//! sector must read back, through the geometry the *recorded* position gives it, as last
//! written: a restart from there finds everything; and once done, through the new geometry.

use graid_engine::geometry::{Geometry, Level, ParityLayout};
use graid_engine::reshape::{Direction, PlanError, ReshapePlan, Side};
use proptest::prelude::*;
use rand::{rngs::StdRng, RngExt, SeedableRng};

/// What a sector of a member holds: an array sector's tag, parity, or what was there before.
const PARITY: u64 = u64::MAX;
const BEFORE: u64 = u64::MAX - 1;

fn tag(sector: u64) -> u64 {
    sector + 1
}

struct Members {
    devices: Vec<Vec<u64>>,
}

impl Members {
    fn new(count: u32, sectors: u64) -> Self {
        Self {
            devices: (0..count).map(|_| vec![BEFORE; sectors as usize]).collect(),
        }
    }

    fn read(&self, g: &Geometry, offset: u64, sector: u64) -> u64 {
        let piece = g.map_read(sector, 1, 0).unwrap().next().unwrap();
        self.devices[piece.member as usize][(offset + piece.member_sector) as usize]
    }

    /// The old array written whole: every data sector its tag, parity rows marked.
    fn fill(&mut self, g: &Geometry, offset: u64) {
        let stripes = g.array_sectors() / g.stripe_data_sectors();
        for stripe in 0..stripes {
            for row in stripe_rows(g, offset, stripe, &tag) {
                self.apply(&row);
            }
        }
    }

    fn apply(&mut self, row: &RowWrite) {
        let device = &mut self.devices[row.member as usize];
        device[row.at as usize..row.at as usize + row.data.len()].copy_from_slice(&row.data);
    }
}

/// One member's chunk of one stripe, as a full-stripe write sends it.
struct RowWrite {
    member: u32,
    at: u64,
    data: Vec<u64>,
}

/// The member writes of stripe `stripe` of `g` at `offset`, each data sector's value from
/// `value`.
fn stripe_rows(
    g: &Geometry,
    offset: u64,
    stripe: u64,
    value: &dyn Fn(u64) -> u64,
) -> Vec<RowWrite> {
    let chunk = u64::from(g.chunk_sectors());
    let at = offset + g.stripe_member_sector(stripe);
    let mut rows: Vec<RowWrite> = (0..g.members())
        .map(|member| RowWrite {
            member,
            at,
            data: vec![PARITY; chunk as usize],
        })
        .collect();
    let start = stripe * g.stripe_data_sectors();
    for piece in g.map_write(start, g.stripe_data_sectors()).unwrap() {
        let row = &mut rows[piece.member as usize];
        for i in 0..piece.sectors {
            let sector = piece.array_sector + i;
            row.data[(piece.member_sector - g.stripe_member_sector(stripe) + i) as usize] =
                value(sector);
        }
    }
    rows
}

/// Every sector of the content reads back as `expect` says through the side `position` gives
/// it.
fn check(plan: &ReshapePlan, members: &Members, expect: &[u64], position: u64, when: &str) {
    for sector in 0..plan.content() {
        let (g, offset) = plan.geometry(plan.side(position, sector));
        let got = members.read(&g, offset, sector);
        assert_eq!(
            got,
            expect[sector as usize],
            "{when}: sector {sector} ({:?} at position {position}) reads {got:#x}",
            plan.side(position, sector)
        );
    }
}

fn level(kind: u8) -> Level {
    match kind {
        0 => Level::Raid0,
        1 => Level::Raid5(ParityLayout::LeftSymmetric),
        _ => Level::Raid6(ParityLayout::LeftSymmetric),
    }
}

/// Plans the reshape with the smallest gap it takes plus `extra`, the offsets placed so the
/// lower one is 16.
fn plan_with_gap(old: Geometry, new: Geometry, extra: u64) -> Option<(ReshapePlan, u64, u64)> {
    let base = 16;
    let gap = match ReshapePlan::new(old, base, new, base) {
        Ok(_) => 0,
        Err(PlanError::Gap { need, have: 0 }) => need,
        Err(PlanError::Nothing) => return None,
        Err(e) => panic!("{old:?} -> {new:?}: {e}"),
    };
    // The direction decides which offset is lower.
    let forwards = new.data_members() > old.data_members()
        || (new.data_members() == old.data_members() && extra % 2 == 0);
    let gap = gap + extra;
    let (old_offset, new_offset) = if forwards && gap > 0 {
        (base + gap, base)
    } else {
        (base, base + gap)
    };
    let plan = ReshapePlan::new(old, old_offset, new, new_offset)
        .unwrap_or_else(|e| panic!("{old:?} at {old_offset} -> {new:?} at {new_offset}: {e}"));
    Some((plan, old_offset, new_offset))
}

/// One data sector written through `g` at `offset`.
fn write_sector(members: &mut Members, g: &Geometry, offset: u64, sector: u64, value: u64) {
    let piece = g.map_write(sector, 1).unwrap().next().unwrap();
    members.devices[piece.member as usize][(offset + piece.member_sector) as usize] = value;
}

/// Runs the reshape to its end with cuts and user writes, checking at every row write.
fn reshape_with_cuts(plan: &ReshapePlan, old_offset: u64, new_offset: u64, seed: u64) -> u32 {
    let (old, new) = (plan.old(), plan.new_geometry());
    let sectors =
        (old_offset + old.member_data_sectors()).max(new_offset + new.member_data_sectors());
    let mut members = Members::new(old.members().max(new.members()), sectors);
    members.fill(&old, old_offset);
    let content = plan.content();
    let mut expect: Vec<u64> = (0..content).map(tag).collect();
    let mut rng = StdRng::seed_from_u64(seed);
    let mut recorded = plan.start_position();
    let mut position = recorded;
    let mut cuts = 0;
    let mut steps = 0;
    let mut next_value = 1u64 << 40;
    let forwards = plan.direction() == Direction::Forwards;
    check(plan, &members, &expect, recorded, "before");
    while !plan.done(position) {
        steps += 1;
        assert!(steps < 100_000, "the reshape never ends");
        let max = rng.random_range(1..=4 * content.max(1));
        let window = plan
            .next_window(position, recorded, max)
            .unwrap_or_else(|| panic!("stuck at {position}, recorded {recorded}"));
        if window.record_first {
            recorded = position;
        }
        // The window as the old geometry holds it now (past the content: a grow's new room).
        let sd = new.stripe_data_sectors();
        let stripes = window.start / sd..window.end.div_ceil(sd);
        let moved: Vec<u64> = (stripes.start * sd..stripes.end * sd)
            .map(|x| {
                if x < content {
                    members.read(&old, old_offset, x)
                } else {
                    0
                }
            })
            .collect();
        let base = stripes.start * sd;
        let value = |x: u64| moved[(x - base) as usize];
        // Writes that wait for the next record: those between it and the window's far end.
        let mut waiting: Vec<(u64, u64)> = Vec::new();
        let mut cut = false;
        'rows: for stripe in stripes {
            for row in stripe_rows(&new, new_offset, stripe, &value) {
                members.apply(&row);
                check(plan, &members, &expect, recorded, "mid-window");
                if rng.random_ratio(1, 8) {
                    let x = rng.random_range(0..content);
                    next_value += 1;
                    let (new_side, old_side) = if forwards {
                        (x < recorded, x >= window.end)
                    } else {
                        (x >= recorded, x < window.start)
                    };
                    if new_side {
                        write_sector(&mut members, &new, new_offset, x, next_value);
                        expect[x as usize] = next_value;
                    } else if old_side {
                        write_sector(&mut members, &old, old_offset, x, next_value);
                        expect[x as usize] = next_value;
                    } else {
                        waiting.push((x, next_value));
                    }
                    check(plan, &members, &expect, recorded, "after a user write");
                }
                if rng.random_ratio(1, 64) {
                    cut = true;
                    break 'rows;
                }
            }
        }
        if cut {
            // Restart from what the superblocks say; the window is redone. The waiting writes
            // were never acknowledged.
            cuts += 1;
            position = recorded;
            continue;
        }
        position = if forwards { window.end } else { window.start };
        // md's checkpoint now and then, and always for writes that wait for it.
        if rng.random_ratio(1, 4) || !waiting.is_empty() {
            recorded = position;
        }
        for (x, v) in waiting {
            write_sector(&mut members, &new, new_offset, x, v);
            expect[x as usize] = v;
        }
        check(plan, &members, &expect, position, "in memory");
        check(plan, &members, &expect, recorded, "recorded");
    }
    // The end is recorded with the new geometry in place of the old.
    for sector in 0..content {
        assert_eq!(
            members.read(&new, new_offset, sector),
            expect[sector as usize],
            "after the end"
        );
    }
    assert_eq!(plan.side(position, 0), Side::New);
    cuts
}

fn geometry(kind: u8, members: u32, chunk: u32, member_sectors: u64) -> Option<Geometry> {
    Geometry::new(level(kind), members, chunk, member_sectors).ok()
}

#[test]
fn raid5_four_to_five_members_forwards_with_md_sized_gap() {
    let old = geometry(1, 4, 16, 64 * 16).unwrap();
    let new = geometry(1, 5, 16, 64 * 16).unwrap();
    let (plan, old_offset, new_offset) = plan_with_gap(old, new, 0).unwrap();
    assert_eq!(plan.direction(), Direction::Forwards);
    assert!(new_offset < old_offset);
    // The first window needs the rows of one unit (lcm of 48 and 64 sectors: 192) in the new
    // geometry: 3 stripes of 16 sectors.
    assert_eq!(old_offset - new_offset, 48);
    // One sector less of gap is refused with the reason.
    assert!(matches!(
        ReshapePlan::new(old, new_offset + 47, new, new_offset),
        Err(PlanError::Gap { need: 48, have: 47 })
    ));
    reshape_with_cuts(&plan, old_offset, new_offset, 1);
    // A higher new offset is the wrong way for more members.
    assert_eq!(
        ReshapePlan::new(old, 16, new, 64),
        Err(PlanError::OffsetDirection)
    );
}

#[test]
fn raid6_chunk_64k_to_512k_needs_the_gap_throughout() {
    let old = geometry(2, 5, 128, 32 * 1024).unwrap();
    let new = geometry(2, 5, 1024, 32 * 1024).unwrap();
    assert_eq!(
        ReshapePlan::new(old, 2048, new, 2048),
        Err(PlanError::Gap {
            need: 1024,
            have: 0
        })
    );
    let (plan, old_offset, new_offset) = plan_with_gap(old, new, 0).unwrap();
    reshape_with_cuts(&plan, old_offset, new_offset, 2);
}

#[test]
fn fewer_members_run_backwards_from_the_end() {
    let old = geometry(1, 5, 16, 64 * 16).unwrap();
    // Each member's data area larger, to hold the same content on fewer.
    let new = geometry(1, 4, 16, 86 * 16).unwrap();
    let (plan, old_offset, new_offset) = plan_with_gap(old, new, 5).unwrap();
    assert_eq!(plan.direction(), Direction::Backwards);
    assert!(new_offset > old_offset);
    reshape_with_cuts(&plan, old_offset, new_offset, 3);
    // The same member size (md's component size stays): only what the new geometry holds
    // moves, the array having been made that small first.
    let same = geometry(1, 4, 16, 64 * 16).unwrap();
    let (plan, old_offset, new_offset) = plan_with_gap(old, same, 3).unwrap();
    assert_eq!(plan.content(), same.array_sectors());
    reshape_with_cuts(&plan, old_offset, new_offset, 4);
}

#[test]
fn a_window_is_never_longer_than_asked_for_a_whole_unit_aside() {
    // Backwards from an unaligned content end: the first window is cut to the length asked.
    let old = geometry(1, 5, 16, 64 * 16).unwrap();
    let new = geometry(1, 4, 16, 86 * 16).unwrap();
    let (plan, _, _) = plan_with_gap(old, new, 5).unwrap();
    let content = plan.content();
    let unit = 192; // lcm(64, 48)
    assert_ne!(content % unit, 0, "the test wants an unaligned end");
    let w = plan.next_window(content, content, unit).unwrap();
    assert!(w.end - w.start <= unit, "{w:?}");
    for max in [unit, 2 * unit, 5 * unit] {
        let w = plan.next_window(10 * unit, 10 * unit, max).unwrap();
        assert!(w.end - w.start <= max, "{w:?} for {max}");
    }
}

#[test]
fn what_is_not_restriped_is_refused() {
    let raid5 = geometry(1, 4, 16, 1024).unwrap();
    let raid6 = geometry(2, 5, 16, 1024).unwrap();
    let raid1 = Geometry::new(Level::Raid1, 2, 0, 1024).unwrap();
    assert_eq!(ReshapePlan::new(raid5, 16, raid6, 0), Err(PlanError::Level));
    assert_eq!(ReshapePlan::new(raid1, 16, raid1, 0), Err(PlanError::Level));
    assert_eq!(
        ReshapePlan::new(raid5, 16, raid5, 16),
        Err(PlanError::Nothing)
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    /// Any restripe of RAID 0, 5 or 6 (members in or out, chunk changes), with the smallest
    /// gap or more: every sector where the recorded position says after every row write, and
    /// in the new geometry at the end.
    #[test]
    fn every_row_write_leaves_every_sector_where_the_recorded_position_says(
        kind in 0u8..3,
        old_members in 2u32..7,
        new_members in 2u32..8,
        old_chunk in prop::sample::select(vec![8u32, 16, 32]),
        new_chunk in prop::sample::select(vec![8u32, 16, 32]),
        stripes in 3u64..24,
        extra in 0u64..40,
        seed in any::<u64>(),
    ) {
        let Some(old) = geometry(kind, old_members, old_chunk, stripes * u64::from(old_chunk)) else {
            return Ok(());
        };
        // Room for the content on the new members, and a little more (a grow's new room).
        let Some(probe) = geometry(kind, new_members, new_chunk, u64::from(new_chunk)) else {
            return Ok(());
        };
        let per_member = old.array_sectors().div_ceil(u64::from(probe.data_members()));
        let new_sectors = per_member.div_ceil(u64::from(new_chunk)) * u64::from(new_chunk)
            + u64::from(new_chunk) * (extra % 3);
        let new = geometry(kind, new_members, new_chunk, new_sectors).unwrap();
        let Some((plan, old_offset, new_offset)) = plan_with_gap(old, new, extra) else {
            return Ok(());
        };
        reshape_with_cuts(&plan, old_offset, new_offset, seed);
    }
}
