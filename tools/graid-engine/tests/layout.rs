//! RAID 5/6 layouts checked against md's own code, transliterated here from
//! `drivers/md/raid5.c` (`raid5_compute_sector`, `raid6_d0`, `raid6_idx_to_slot`) as literally
//! as Rust allows, so the engine's closed forms are compared with md's case analysis.

use graid_engine::geometry::{Geometry, Level, ParityLayout};
use graid_engine::layout::{Recovery, Role, StripeMap};
use graid_engine::members::MemberSet;
use proptest::prelude::*;

/// md's `raid5_compute_sector` for one array sector: (member, member sector, P, Q).
fn md_compute_sector(
    level: u32,
    algorithm: u32,
    raid_disks: u32,
    sectors_per_chunk: u64,
    r_sector: u64,
) -> (u32, u64, u32, Option<u32>) {
    let max_degraded = if level == 6 { 2 } else { 1 };
    let data_disks = u64::from(raid_disks - max_degraded);
    let chunk_offset = r_sector % sectors_per_chunk;
    let chunk_number = r_sector / sectors_per_chunk;
    let stripe = chunk_number / data_disks;
    let mut dd_idx = (chunk_number % data_disks) as i64;
    let stripe2 = stripe;
    let rd = i64::from(raid_disks);
    let (pd_idx, qd_idx): (i64, i64);
    match (level, algorithm) {
        (5, 0) => {
            pd_idx = data_disks as i64 - (stripe2 % u64::from(raid_disks)) as i64;
            qd_idx = -1;
            if dd_idx >= pd_idx {
                dd_idx += 1;
            }
        }
        (5, 1) => {
            pd_idx = (stripe2 % u64::from(raid_disks)) as i64;
            qd_idx = -1;
            if dd_idx >= pd_idx {
                dd_idx += 1;
            }
        }
        (5, 2) => {
            pd_idx = data_disks as i64 - (stripe2 % u64::from(raid_disks)) as i64;
            qd_idx = -1;
            dd_idx = (pd_idx + 1 + dd_idx) % rd;
        }
        (5, 3) => {
            pd_idx = (stripe2 % u64::from(raid_disks)) as i64;
            qd_idx = -1;
            dd_idx = (pd_idx + 1 + dd_idx) % rd;
        }
        (6, 0) | (6, 1) => {
            let rot = (stripe2 % u64::from(raid_disks)) as i64;
            pd_idx = if algorithm == 0 { rd - 1 - rot } else { rot };
            if pd_idx == rd - 1 {
                dd_idx += 1;
                qd_idx = 0;
            } else {
                qd_idx = pd_idx + 1;
                if dd_idx >= pd_idx {
                    dd_idx += 2;
                }
            }
        }
        (6, 2) | (6, 3) => {
            let rot = (stripe2 % u64::from(raid_disks)) as i64;
            pd_idx = if algorithm == 2 { rd - 1 - rot } else { rot };
            qd_idx = (pd_idx + 1) % rd;
            dd_idx = (pd_idx + 2 + dd_idx) % rd;
        }
        _ => unreachable!(),
    }
    let new_sector = stripe * sectors_per_chunk + chunk_offset;
    (
        dd_idx as u32,
        new_sector,
        pd_idx as u32,
        (qd_idx >= 0).then_some(qd_idx as u32),
    )
}

/// md's syndrome order for a RAID 6 stripe: the members in the order `set_syndrome_sources`
/// puts them in `ptrs[0..disks-2]`.
fn md_syndrome_order(disks: u32, pd_idx: u32, qd_idx: u32) -> Vec<u32> {
    let d0 = if qd_idx == disks - 1 { 0 } else { qd_idx + 1 };
    let mut order = Vec::new();
    let mut i = d0;
    loop {
        if i != pd_idx && i != qd_idx {
            order.push(i);
        }
        i = if i + 1 < disks { i + 1 } else { 0 };
        if i == d0 {
            break;
        }
    }
    order
}

fn parity_level(raid6: bool, layout: ParityLayout) -> Level {
    if raid6 {
        Level::Raid6(layout)
    } else {
        Level::Raid5(layout)
    }
}

#[test]
fn left_symmetric_four_members_matches_the_doc_picture() {
    let g = Geometry::new(Level::Raid5(ParityLayout::LeftSymmetric), 4, 8, 64).unwrap();
    assert_eq!(g.array_sectors(), 64 * 3);
    let member_of_chunk = |c: u64| g.map_read(c * 8, 1, 0).unwrap().next().unwrap().member;
    let rows: Vec<Vec<u32>> = (0..3)
        .map(|row| (0..3).map(|i| member_of_chunk(row * 3 + i)).collect())
        .collect();
    assert_eq!(rows, [vec![0, 1, 2], vec![3, 0, 1], vec![2, 3, 0]]);
    let ps: Vec<u32> = (0..3).map(|s| g.stripe_map(s).unwrap().p()).collect();
    assert_eq!(ps, [3, 2, 1]);
}

#[test]
fn every_layout_matches_md_for_every_member_count() {
    for raid6 in [false, true] {
        for layout in ParityLayout::ALL {
            let level = parity_level(raid6, layout);
            for n in level.min_members()..=32 {
                let chunk = 8u64;
                let g = Geometry::new(level, n, chunk as u32, chunk * 2 * u64::from(n)).unwrap();
                let (code, alg) = (level.code(), layout.code());
                for c in 0..g.array_sectors() / chunk {
                    let sector = c * chunk + 3;
                    let (member, msector, p, q) = md_compute_sector(code, alg, n, chunk, sector);
                    let piece = g.map_read(sector, 1, 0).unwrap().next().unwrap();
                    assert_eq!(
                        (piece.member, piece.member_sector),
                        (member, msector),
                        "{level:?} n={n} sector {sector}"
                    );
                    let stripe = g.stripe_of(sector);
                    let map = g.stripe_map(stripe).unwrap();
                    assert_eq!(
                        (map.p(), map.q()),
                        (p, q),
                        "{level:?} n={n} stripe {stripe}"
                    );
                    assert_eq!(
                        map.role(member),
                        Role::Data((c % u64::from(map.data())) as u32)
                    );
                }
            }
        }
    }
}

#[test]
fn syndrome_slots_follow_md_order() {
    for layout in ParityLayout::ALL {
        for n in 4..=32u32 {
            for stripe in 0..u64::from(2 * n) {
                let map = StripeMap::new(layout, n, 2, stripe);
                let order = md_syndrome_order(n, map.p(), map.q().unwrap());
                for (slot, &member) in order.iter().enumerate() {
                    assert_eq!(map.syndrome_slot(member), Some(slot as u32));
                    assert_eq!(map.slot_member(slot as u32), Some(member));
                }
                assert_eq!(map.syndrome_slot(map.p()), None);
            }
        }
    }
}

#[test]
fn roles_invert_data_members() {
    for raid6 in [false, true] {
        for layout in ParityLayout::ALL {
            for n in 3 + u32::from(raid6)..=32 {
                for stripe in 0..u64::from(n) {
                    let map = StripeMap::new(layout, n, 1 + u32::from(raid6), stripe);
                    let mut seen = MemberSet::EMPTY;
                    for i in 0..map.data() {
                        let m = map.data_member(i);
                        assert!(m < n);
                        assert_eq!(map.role(m), Role::Data(i));
                        seen = seen.with(m);
                    }
                    assert_eq!(seen.union(map.parity_set()), MemberSet::first(n));
                }
            }
        }
    }
}

#[test]
fn recovery_plans() {
    let map = StripeMap::new(ParityLayout::LeftSymmetric, 6, 2, 0);
    let (p, q) = (map.p(), map.q().unwrap());
    assert_eq!((p, q), (5, 0));
    let d = |i| map.data_member(i);
    assert_eq!(map.recovery(MemberSet::EMPTY), Recovery::Intact);
    assert_eq!(map.recovery(MemberSet::of(p)), Recovery::Xor { lost: p });
    assert_eq!(map.recovery(MemberSet::of(q)), Recovery::RegenerateQ);
    assert_eq!(
        map.recovery(MemberSet::of(p).with(q)),
        Recovery::RegeneratePq
    );
    assert_eq!(
        map.recovery(MemberSet::of(d(2))),
        Recovery::Xor { lost: d(2) }
    );
    assert_eq!(
        map.recovery(MemberSet::of(d(2)).with(q)),
        Recovery::DataAndQ { data: d(2) }
    );
    assert_eq!(
        map.recovery(MemberSet::of(d(2)).with(p)),
        Recovery::DataAndP { data: d(2) }
    );
    assert_eq!(
        map.recovery(MemberSet::of(d(3)).with(d(1))),
        Recovery::TwoData { a: d(1), b: d(3) }
    );
    assert_eq!(
        map.recovery(MemberSet::of(d(3)).with(d(1)).with(p)),
        Recovery::Lost
    );
    let raid5 = StripeMap::new(ParityLayout::LeftSymmetric, 3, 1, 1);
    assert_eq!(raid5.recovery(MemberSet::of(0).with(1)), Recovery::Lost);
    assert_eq!(raid5.recovery(MemberSet::of(1)), Recovery::Xor { lost: 1 });
}

#[test]
fn parity_levels_size_and_limits() {
    let g = Geometry::new(Level::Raid6(ParityLayout::LeftSymmetric), 6, 128, 1000).unwrap();
    assert_eq!(g.member_data_sectors(), 896);
    assert_eq!(g.array_sectors(), 896 * 4);
    assert_eq!(g.data_members(), 4);
    assert_eq!(g.copies(), 1);
    assert_eq!(g.stripe_data_sectors(), 512);
    // A run: as many whole stripes as 1 MiB of data holds, or one larger stripe.
    assert_eq!(g.run_stripes(), 4);
    assert_eq!(g.boundary_sectors(), 2048);
    let g5 = Geometry::new(Level::Raid5(ParityLayout::LeftSymmetric), 6, 128, 1000).unwrap();
    assert_eq!((g5.run_stripes(), g5.boundary_sectors()), (3, 1920));
    let wide = Geometry::new(Level::Raid5(ParityLayout::LeftSymmetric), 6, 1024, 4096).unwrap();
    assert_eq!((wide.run_stripes(), wide.boundary_sectors()), (1, 5120));
    assert_eq!(g.io_opt_bytes(), 4 * 128 * 512);
    assert!(Geometry::new(Level::Raid5(ParityLayout::LeftSymmetric), 2, 8, 1000).is_err());
    assert!(Geometry::new(Level::Raid6(ParityLayout::LeftSymmetric), 3, 8, 1000).is_err());
    assert!(Geometry::new(Level::Raid6(ParityLayout::LeftSymmetric), 33, 8, 1000).is_err());
    assert!(Geometry::new(Level::Raid5(ParityLayout::LeftSymmetric), 32, 2048, 4096).is_ok());
    assert!(Geometry::new(Level::Raid5(ParityLayout::LeftSymmetric), 3, 4096, 8192).is_err());
}

#[test]
fn level_and_layout_codes() {
    for layout in ParityLayout::ALL {
        for level in [Level::Raid5(layout), Level::Raid6(layout)] {
            assert_eq!(Level::from_codes(level.code(), level.layout()), Ok(level));
        }
    }
    assert_eq!(
        Level::from_codes(5, 4),
        Err(Some(Level::Raid5(ParityLayout::LeftSymmetric)))
    );
    assert_eq!(Level::from_codes(10, 0x102), Ok(Level::Raid10));
    assert_eq!(Level::from_codes(10, 0x201), Err(Some(Level::Raid10)));
    assert_eq!(Level::from_codes(4, 0), Err(None));
    assert_eq!(
        Level::from_code(6),
        Some(Level::Raid6(ParityLayout::LeftSymmetric))
    );
}

proptest! {
    /// Every data sector maps to the member md puts it on, never onto a parity member, and
    /// the stripe it is in is the member chunk row it lands in.
    #[test]
    fn data_never_lands_on_parity(
        raid6 in any::<bool>(),
        layout in proptest::sample::select(ParityLayout::ALL.to_vec()),
        n in 4u32..=32,
        chunk_shift in 3u32..=11,
        rows in 1u64..6,
        pick in any::<u64>(),
    ) {
        let level = parity_level(raid6, layout);
        let chunk = 1u64 << chunk_shift;
        let g = Geometry::new(level, n, chunk as u32, rows * chunk).unwrap();
        let sector = pick % g.array_sectors();
        let piece = g.map_read(sector, 1, 0).unwrap().next().unwrap();
        let map = g.stripe_map(g.stripe_of(sector)).unwrap();
        prop_assert!(!map.parity_set().contains(piece.member));
        prop_assert_eq!(piece.member_sector / chunk, g.stripe_of(sector));
        let md = md_compute_sector(level.code(), layout.code(), n, chunk, sector);
        prop_assert_eq!((piece.member, piece.member_sector), (md.0, md.1));
    }
}
