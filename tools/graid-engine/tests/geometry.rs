//! RAID 0/1/10 geometry: worked examples and property tests against a sector-by-sector model,
//! and a running array's geometry resized (`GeometryCell`).

use std::collections::{HashMap, HashSet};

use graid_engine::geometry::{Geometry, GeometryError, Level, MapError, Piece, MAX_SECTORS};
use graid_engine::geometry_cell::GeometryCell;
use proptest::prelude::*;

fn geometry(level: Level, members: u32, chunk: u32, member_sectors: u64) -> Geometry {
    Geometry::new(level, members, chunk, member_sectors).expect("valid geometry")
}

fn piece(member: u32, member_sector: u64, sectors: u64, array_sector: u64, copy: u32) -> Piece {
    Piece {
        member,
        member_sector,
        sectors,
        array_sector,
        copy,
    }
}

fn read(g: &Geometry, start: u64, sectors: u64, copy: u32) -> Vec<Piece> {
    g.map_read(start, sectors, copy)
        .expect("in range")
        .collect()
}

fn write(g: &Geometry, start: u64, sectors: u64) -> Vec<Piece> {
    g.map_write(start, sectors).expect("in range").collect()
}

// ---- worked examples ----

#[test]
fn raid0_three_members() {
    // Chunk 8: chunks 0, 1, 2 on members 0, 1, 2 in row 0; chunk 3 on member 0 row 1.
    let g = geometry(Level::Raid0, 3, 8, 100);
    assert_eq!(g.member_data_sectors(), 96);
    assert_eq!(g.array_sectors(), 288);
    assert_eq!(
        read(&g, 5, 20, 0),
        [
            piece(0, 5, 3, 5, 0),
            piece(1, 0, 8, 8, 0),
            piece(2, 0, 8, 16, 0),
            piece(0, 8, 1, 24, 0),
        ]
    );
    assert_eq!(write(&g, 5, 20), read(&g, 5, 20, 0));
    assert_eq!(read(&g, 287, 1, 0), [piece(2, 95, 1, 287, 0)]);
}

#[test]
fn raid1_three_members() {
    let g = geometry(Level::Raid1, 3, 0, 1000);
    assert_eq!(g.array_sectors(), 1000);
    assert_eq!(g.copies(), 3);
    assert_eq!(read(&g, 10, 500, 2), [piece(2, 10, 500, 10, 2)]);
    assert_eq!(
        write(&g, 10, 500),
        [
            piece(0, 10, 500, 10, 0),
            piece(1, 10, 500, 10, 1),
            piece(2, 10, 500, 10, 2),
        ]
    );
}

#[test]
fn raid10_four_members_is_striped_pairs() {
    // Chunk 0 on members 0+1, chunk 1 on 2+3 (row 0), chunk 2 on 0+1 (row 1).
    let g = geometry(Level::Raid10, 4, 8, 16);
    assert_eq!(g.array_sectors(), 32);
    assert_eq!(
        write(&g, 6, 12),
        [
            piece(0, 6, 2, 6, 0),
            piece(1, 6, 2, 6, 1),
            piece(2, 0, 8, 8, 0),
            piece(3, 0, 8, 8, 1),
            piece(0, 8, 2, 16, 0),
            piece(1, 8, 2, 16, 1),
        ]
    );
    assert_eq!(read(&g, 8, 8, 1), [piece(3, 0, 8, 8, 1)]);
}

#[test]
fn raid10_three_members_wraps_copies_like_md() {
    //          m0  m1  m2
    //   row 0  c0  c0  c1
    //   row 1  c1  c2  c2
    //   row 2  c3  c3  (c4's first copy: unusable, its mirror has no room)
    let g = geometry(Level::Raid10, 3, 8, 24);
    assert_eq!(g.array_sectors(), 4 * 8);
    assert_eq!(
        write(&g, 4, 8),
        [
            piece(0, 4, 4, 4, 0),
            piece(1, 4, 4, 4, 1),
            piece(2, 0, 4, 8, 0),
            piece(0, 8, 4, 8, 1),
        ]
    );
    assert_eq!(read(&g, 16, 8, 0), [piece(1, 8, 8, 16, 0)]);
    assert_eq!(read(&g, 16, 8, 1), [piece(2, 8, 8, 16, 1)]);
    assert_eq!(read(&g, 24, 8, 1), [piece(1, 16, 8, 24, 1)]);
}

#[test]
fn queue_limits() {
    let raid0 = geometry(Level::Raid0, 4, 128, 1 << 20);
    assert_eq!(raid0.boundary_sectors(), 128);
    assert_eq!(raid0.io_min_bytes(), 64 << 10);
    assert_eq!(raid0.io_opt_bytes(), 256 << 10);

    let raid10_odd = geometry(Level::Raid10, 3, 128, 1 << 20);
    assert_eq!(raid10_odd.data_members(), 1);
    assert_eq!(raid10_odd.io_opt_bytes(), 64 << 10);
    let raid10 = geometry(Level::Raid10, 32, 2048, 1 << 20);
    assert_eq!(raid10.io_opt_bytes(), 16 << 20);

    let raid1 = geometry(Level::Raid1, 2, 0, 1 << 20);
    assert_eq!(
        (
            raid1.boundary_sectors(),
            raid1.io_min_bytes(),
            raid1.io_opt_bytes()
        ),
        (0, 0, 0)
    );
}

#[test]
fn level_codes_round_trip() {
    for level in [Level::Raid0, Level::Raid1, Level::Raid10] {
        assert_eq!(Level::from_code(level.code()), Some(level));
    }
    assert_eq!(Level::from_code(4), None);
    assert_eq!(Level::Raid10.layout(), 0x102);
    assert_eq!(Level::Raid10.to_string(), "raid10");
}

#[test]
fn constructor_rejects_impossible_shapes() {
    use GeometryError::*;
    let e = |level, members, chunk, size| Geometry::new(level, members, chunk, size).unwrap_err();
    for level in [Level::Raid0, Level::Raid1, Level::Raid10] {
        let chunk = if level == Level::Raid1 { 0 } else { 8 };
        for members in [0, 1, 33, u32::MAX] {
            assert_eq!(e(level, members, chunk, 64), MemberCount { level, members });
        }
        assert_eq!(
            e(level, 2, chunk, MAX_SECTORS + 1),
            TooLarge {
                member_data_sectors: MAX_SECTORS + 1
            }
        );
    }
    for chunk in [0, 4, 12, 4096, u32::MAX] {
        let level = Level::Raid0;
        assert_eq!(
            e(level, 2, chunk, 1 << 20),
            ChunkSize {
                level,
                chunk_sectors: chunk
            }
        );
    }
    assert!(matches!(e(Level::Raid1, 2, 8, 64), ChunkSize { .. }));
    assert!(matches!(e(Level::Raid10, 2, 8, 7), TooSmall { .. }));
    assert!(matches!(e(Level::Raid1, 2, 0, 0), TooSmall { .. }));
    // 32 members of MAX_SECTORS / 16 would make the array exceed MAX_SECTORS.
    assert!(matches!(
        e(Level::Raid0, 32, 8, MAX_SECTORS / 16),
        TooLarge { .. }
    ));
    assert!(Geometry::new(Level::Raid0, 32, 2048, MAX_SECTORS / 32).is_ok());
    assert!(Geometry::new(Level::Raid1, 32, 0, MAX_SECTORS).is_ok());
    assert!(!e(Level::Raid0, 1, 8, 64).to_string().is_empty());
}

#[test]
fn map_rejects_bad_requests() {
    let g = geometry(Level::Raid10, 3, 8, 24);
    let out = |start, sectors| MapError::OutOfRange {
        start,
        sectors,
        array_sectors: 32,
    };
    assert_eq!(g.map_write(30, 3).unwrap_err(), out(30, 3));
    assert_eq!(g.map_read(33, 0, 0).unwrap_err(), out(33, 0));
    assert_eq!(g.map_write(u64::MAX, 2).unwrap_err(), out(u64::MAX, 2));
    assert_eq!(
        g.map_read(0, 1, 2).unwrap_err(),
        MapError::NoSuchCopy { copy: 2, copies: 2 }
    );
    assert_eq!(write(&g, 32, 0), []);
    assert!(geometry(Level::Raid0, 2, 8, 8).map_read(0, 1, 1).is_err());
}

// ---- reference model ----

/// Places every (chunk, copy) by filling the member grid slot by slot, row by row, the way the
/// layouts are defined, and answers sector by sector.
struct Model {
    level: Level,
    chunk: u64,
    array_sectors: u64,
    copies: u32,
    /// (chunk, copy) -> (member, member row)
    place: HashMap<(u64, u32), (u32, u64)>,
}

impl Model {
    fn new(level: Level, members: u32, chunk: u32, member_sectors: u64) -> Self {
        let copies = match level {
            Level::Raid0 => 1,
            Level::Raid1 => members,
            Level::Raid10 => 2,
            // Parity levels have their own model (tests/layout.rs, against md's code).
            Level::Raid5(_) | Level::Raid6(_) => unreachable!("not modelled here"),
        };
        if level == Level::Raid1 {
            return Self {
                level,
                chunk: 0,
                array_sectors: member_sectors,
                copies,
                place: HashMap::new(),
            };
        }
        let chunk = u64::from(chunk);
        let rows = member_sectors / chunk;
        let mut place = HashMap::new();
        let (mut next_chunk, mut next_copy) = (0u64, 0u32);
        for row in 0..rows {
            for member in 0..members {
                place.insert((next_chunk, next_copy), (member, row));
                next_copy += 1;
                if next_copy == copies {
                    next_copy = 0;
                    next_chunk += 1;
                }
            }
        }
        // A chunk whose copies did not all fit is not part of the array.
        Self {
            level,
            chunk,
            array_sectors: next_chunk * chunk,
            copies,
            place,
        }
    }

    fn locate(&self, sector: u64, copy: u32) -> (u32, u64) {
        if self.level == Level::Raid1 {
            return (copy, sector);
        }
        let (member, row) = self.place[&(sector / self.chunk, copy)];
        (member, row * self.chunk + sector % self.chunk)
    }
}

fn level_strategy() -> impl Strategy<Value = Level> {
    prop_oneof![Just(Level::Raid0), Just(Level::Raid1), Just(Level::Raid10)]
}

/// Random valid geometry parameters with small members: (level, members, chunk, member sectors).
fn shape_strategy() -> impl Strategy<Value = (Level, u32, u32, u64)> {
    (level_strategy(), 2u32..=32, 3u32..=11, 1u64..=6, 0u64..2048).prop_map(
        |(level, members, chunk_shift, rows, extra)| {
            if level == Level::Raid1 {
                (level, members, 0, rows * 64 + extra)
            } else {
                let chunk = 1u32 << chunk_shift;
                let member_sectors = rows * u64::from(chunk) + extra % u64::from(chunk);
                (level, members, chunk, member_sectors)
            }
        },
    )
}

/// A shape and a range inside its array, at most a few chunks long.
fn shape_and_range() -> impl Strategy<Value = ((Level, u32, u32, u64), u64, u64)> {
    shape_strategy().prop_flat_map(|shape| {
        let (level, members, chunk, member_sectors) = shape;
        let array = Model::new(level, members, chunk, member_sectors).array_sectors;
        let max_len = array.min(3 * u64::from(chunk.max(64)) + 7);
        (Just(shape), 0..=max_len)
            .prop_flat_map(move |(shape, len)| (Just(shape), 0..=array - len, Just(len)))
    })
}

/// Checks `pieces` for one copy: contiguous, in order, exactly covering the range, every
/// sector where the model puts it, never crossing a chunk or the member data area.
fn check_copy(
    g: &Geometry,
    model: &Model,
    pieces: &[&Piece],
    start: u64,
    len: u64,
    copy: u32,
) -> Result<(), TestCaseError> {
    let mut next = start;
    for p in pieces {
        prop_assert_eq!(p.copy, copy);
        prop_assert_eq!(p.array_sector, next);
        prop_assert!(p.sectors > 0);
        prop_assert!(p.member < g.members());
        prop_assert!(p.member_sector + p.sectors <= g.member_data_sectors());
        let last = p.array_sector + p.sectors - 1;
        if let (Some(first_chunk), Some(last_chunk)) = (
            p.array_sector.checked_div(model.chunk),
            last.checked_div(model.chunk),
        ) {
            prop_assert_eq!(first_chunk, last_chunk);
        }
        for i in 0..p.sectors {
            prop_assert_eq!(
                (p.member, p.member_sector + i),
                model.locate(p.array_sector + i, copy)
            );
        }
        next += p.sectors;
    }
    prop_assert_eq!(next, start + len);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn array_size_matches_the_model((level, members, chunk, member_sectors) in shape_strategy()) {
        let g = geometry(level, members, chunk, member_sectors);
        let model = Model::new(level, members, chunk, member_sectors);
        prop_assert_eq!(g.array_sectors(), model.array_sectors);
        prop_assert_eq!(g.copies(), model.copies);
        prop_assert!(g.member_data_sectors() <= member_sectors);
        prop_assert!(member_sectors - g.member_data_sectors() < u64::from(chunk.max(1)));
    }

    #[test]
    fn a_resized_geometry_is_a_new_one_and_maps_the_old_sectors_alike(
        ((level, members, chunk, member_sectors), start, len) in shape_and_range(),
        grow in 0u64..5000,
    ) {
        let g = geometry(level, members, chunk, member_sectors);
        let cell = GeometryCell::new(g);
        let larger = member_sectors + grow;
        let resized = cell.resize(larger).expect("a larger size");
        prop_assert_eq!(resized, geometry(level, members, chunk, larger));
        prop_assert_eq!(cell.get(), resized);
        for copy in 0..g.copies() {
            prop_assert_eq!(read(&g, start, len, copy), read(&resized, start, len, copy));
        }
        prop_assert_eq!(write(&g, start, len), write(&resized, start, len));
    }

    #[test]
    fn writes_map_every_copy_of_every_sector(
        ((level, members, chunk, member_sectors), start, len) in shape_and_range()
    ) {
        let g = geometry(level, members, chunk, member_sectors);
        let model = Model::new(level, members, chunk, member_sectors);
        let pieces = write(&g, start, len);
        for copy in 0..g.copies() {
            let of_copy: Vec<&Piece> = pieces.iter().filter(|p| p.copy == copy).collect();
            check_copy(&g, &model, &of_copy, start, len, copy)?;
        }
        // Copies of a chunk piece come together, in copy order.
        for group in pieces.chunks(g.copies() as usize) {
            for (copy, p) in group.iter().enumerate() {
                prop_assert_eq!(p.copy as usize, copy);
                prop_assert_eq!((p.array_sector, p.sectors), (group[0].array_sector, group[0].sectors));
            }
        }
        // No two copies of anything land on the same member sector.
        let mut targets = HashSet::new();
        for p in &pieces {
            for i in 0..p.sectors {
                prop_assert!(targets.insert((p.member, p.member_sector + i)));
            }
        }
    }

    #[test]
    fn reads_map_the_chosen_copy(
        ((level, members, chunk, member_sectors), start, len) in shape_and_range(),
        copy_seed in any::<u32>(),
    ) {
        let g = geometry(level, members, chunk, member_sectors);
        let model = Model::new(level, members, chunk, member_sectors);
        let copy = copy_seed % g.copies();
        let pieces = read(&g, start, len, copy);
        let refs: Vec<&Piece> = pieces.iter().collect();
        check_copy(&g, &model, &refs, start, len, copy)?;
        let writes = write(&g, start, len);
        let copy_writes: Vec<&Piece> = writes.iter().filter(|p| p.copy == copy).collect();
        prop_assert_eq!(refs, copy_writes);
    }

    #[test]
    fn mirror_pieces_invert_the_write_map(
        ((level, members, chunk, member_sectors), start, len) in shape_and_range()
    ) {
        let g = geometry(level, members, chunk, member_sectors);
        if level.is_mirrored() {
            for p in write(&g, start, len) {
                let back = g.mirror_piece(p.member, p.member_sector, p.sectors);
                prop_assert_eq!(back, Some(p));
            }
            // Every member sector is either the array's data or past it: walking a member's
            // whole data area covers each of its sectors once, in order.
            for member in 0..members.min(3) {
                let mut at = 0;
                while at < g.member_data_sectors() {
                    match g.mirror_piece(member, at, u64::MAX) {
                        Some(p) => {
                            prop_assert_eq!((p.member, p.member_sector), (member, at));
                            prop_assert!(p.sectors > 0);
                            let located = read(&g, p.array_sector, p.sectors, p.copy);
                            prop_assert_eq!(located, vec![p]);
                            at += p.sectors;
                        }
                        None => {
                            // Only the tail of an odd RAID 10 holds no data.
                            prop_assert_eq!(level, Level::Raid10);
                            at += 1;
                        }
                    }
                }
            }
        } else {
            prop_assert_eq!(g.mirror_piece(0, 0, 1), None);
        }
    }

    #[test]
    fn out_of_range_is_refused(
        (level, members, chunk, member_sectors) in shape_strategy(),
        start in any::<u64>(),
        len in 1u64..1 << 40,
    ) {
        let g = geometry(level, members, chunk, member_sectors);
        let inside = start.checked_add(len).is_some_and(|end| end <= g.array_sectors());
        prop_assert_eq!(g.map_write(start, len).is_ok(), inside);
    }
}

#[test]
fn which_members_an_array_can_run_without() {
    use graid_engine::geometry::ParityLayout;
    use graid_engine::members::MemberSet;
    let set = |m: &[u32]| m.iter().fold(MemberSet::EMPTY, |s, &m| s.with(m));
    let g = |level, members, chunk| Geometry::new(level, members, chunk, 1 << 16).unwrap();
    let raid0 = g(Level::Raid0, 3, 16);
    assert!(raid0.has_all_data(MemberSet::EMPTY));
    assert!(!raid0.has_all_data(set(&[2])));
    let raid1 = g(Level::Raid1, 3, 0);
    assert!(raid1.has_all_data(set(&[0, 2])));
    assert!(!raid1.has_all_data(set(&[0, 1, 2])));
    // Near-2 on four members: pairs (0,1) and (2,3); on five every adjacent pair shares data.
    let raid10 = g(Level::Raid10, 4, 16);
    assert!(raid10.has_all_data(set(&[0, 3])));
    assert!(!raid10.has_all_data(set(&[2, 3])));
    let odd = g(Level::Raid10, 5, 16);
    assert!(odd.has_all_data(set(&[0, 2])));
    assert!(!odd.has_all_data(set(&[3, 4])));
    assert!(!odd.has_all_data(set(&[4, 0])));
    let raid5 = g(Level::Raid5(ParityLayout::LeftSymmetric), 4, 16);
    assert!(raid5.has_all_data(set(&[3])));
    assert!(!raid5.has_all_data(set(&[0, 3])));
    let raid6 = g(Level::Raid6(ParityLayout::LeftSymmetric), 5, 16);
    assert!(raid6.has_all_data(set(&[1, 4])));
    assert!(!raid6.has_all_data(set(&[0, 1, 4])));
    // Members beyond the array do not count.
    assert!(raid6.has_all_data(set(&[7, 9, 30])));
}
