//! The write-intent bitmap's pure logic (`raid_gpu/engine/bitmap.rs`): region arithmetic, the
//! lock-free region state under threads, the on-disk blocks.

use graid_engine::bitmap::{
    block_bit, block_intact, encode_block, load_block, RegionState, Regions, WriteStart,
    BITS_PER_BLOCK, BLOCK_BYTES, BLOCK_SECTORS, DEFAULT_REGION_SECTORS,
};
use graid_engine::geometry::{Geometry, Level, ParityLayout};
use proptest::prelude::*;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

#[test]
fn regions_cover_the_walk() {
    let r = Regions::new(1000, 64).unwrap();
    assert_eq!(r.count(), 16);
    assert_eq!(r.span(0), 0..64);
    assert_eq!(r.span(15), 960..1000, "the last region is short");
    assert_eq!(r.span(16), 1000..1000);
    assert_eq!(r.of_walk(0, 1), 0..1);
    assert_eq!(r.of_walk(63, 65), 0..2);
    assert_eq!(r.of_walk(64, 128), 1..2);
    assert_eq!(r.of_walk(990, 5000), 15..16, "clipped to the walk");
    assert_eq!(r.of_walk(10, 10), 0..0);
    assert!(Regions::new(1000, 48).is_none(), "not a power of two");
    assert!(Regions::new(1000, 4).is_none(), "below 4 KiB");
}

#[test]
fn the_region_size_grows_until_the_bits_fit() {
    // 1 TiB walk at 64 MiB regions: 16384 bits, one block.
    let walk = 1u64 << 31;
    let r = Regions::fitting(walk, 2040 * 2).unwrap();
    assert_eq!(r.region_sectors(), DEFAULT_REGION_SECTORS);
    assert_eq!(r.blocks(), 1);
    // An area of one block and a walk needing 3 at 64 MiB: 256 MiB regions.
    let walk = 3 * BITS_PER_BLOCK * DEFAULT_REGION_SECTORS;
    let r = Regions::fitting(walk, BLOCK_SECTORS).unwrap();
    assert_eq!(r.region_sectors(), 4 * DEFAULT_REGION_SECTORS);
    assert!(r.area_sectors() <= BLOCK_SECTORS);
    assert!(Regions::fitting(walk, BLOCK_SECTORS - 1).is_none());
}

fn geometry(level: Level, members: u32, chunk: u32) -> Geometry {
    Geometry::new(level, members, chunk, 1 << 16).unwrap()
}

proptest! {
    /// Every member sector a write touches (its data pieces; on RAID 5/6 the same rows carry
    /// its parity) lies in a region `of_write` names.
    #[test]
    fn a_writes_regions_cover_everything_it_touches(
        shape in prop_oneof![
            Just((Level::Raid1, 2u32, 0u32)),
            Just((Level::Raid10, 4, 16)),
            Just((Level::Raid10, 5, 8)),
            Just((Level::Raid5(ParityLayout::LeftSymmetric), 4, 16)),
            Just((Level::Raid6(ParityLayout::RightAsymmetric), 6, 8)),
        ],
        region_shift in 3u32..12,
        start in 0u64..60_000,
        sectors in 1u64..2048,
    ) {
        let (level, members, chunk) = shape;
        let g = geometry(level, members, chunk);
        let sectors = sectors.min(g.array_sectors() - start.min(g.array_sectors() - 1));
        let start = start.min(g.array_sectors() - sectors);
        let r = Regions::new(g.resync_sectors(), 1 << region_shift).unwrap();
        let named = r.of_write(&g, start, sectors);
        let covered = r.span(named.start).start..r.span(named.end - 1).end;
        for piece in g.map_write(start, sectors).unwrap() {
            let (lo, hi) = if level.has_parity() {
                (piece.member_sector, piece.member_sector + piece.sectors)
            } else {
                (piece.array_sector, piece.array_sector + piece.sectors)
            };
            prop_assert!(
                covered.start <= lo && hi <= covered.end,
                "{level:?}: piece {lo}..{hi} outside {covered:?} ({named:?})"
            );
        }
        prop_assert!(named.end <= r.count());
    }
}

#[test]
fn a_region_state_follows_its_writes_and_its_bit() {
    let s = RegionState::new();
    assert_eq!(s.start_write(), WriteStart::NeedBit);
    assert!(s.waits() && s.bit() && !s.on_disk());
    assert!(!s.try_clear(), "a waiting write keeps the bit");
    assert!(s.claim_waiting());
    s.block_written();
    assert_eq!(s.start_write(), WriteStart::Go);
    assert_eq!(s.writes(), 2);
    assert!(!s.try_clear(), "writes in flight keep the bit");
    s.end_write();
    s.end_write();
    assert_eq!(s.writes(), 0);
    assert!(s.on_disk() && s.bit());
    // Two looks of the cleaner: idle at the first, cleared at the second ...
    assert!(!s.try_clear());
    assert!(s.try_clear());
    assert!(!s.bit() && !s.on_disk());
    s.end_write();
    assert_eq!(s.writes(), 0, "never below zero");
    // ... unless a write came and went in between.
    assert_eq!(s.start_write(), WriteStart::NeedBit);
    assert!(s.claim_waiting());
    s.block_written();
    assert!(s.on_disk());
    assert!(!s.try_clear(), "a write in flight");
    s.end_write();
    assert!(!s.try_clear(), "marked idle");
    assert_eq!(s.start_write(), WriteStart::Go);
    s.end_write();
    assert!(!s.try_clear(), "a write ended since the last look");
    assert!(s.try_clear());
    // A region dirty at assembly keeps its bit until the resync passed it.
    let d = RegionState::new();
    d.set_dirty_at_start();
    assert!(d.on_disk() && d.needs_sync());
    assert!(!d.try_clear() && !d.try_clear());
    d.synced();
    assert!(!d.try_clear());
    assert!(d.try_clear());
}

/// Writers start and end writes while a worker clears bits and sets them for waiting writes,
/// as the array's worker does; a model of the disk's bit must be set whenever a write goes.
#[test]
fn no_write_goes_while_its_bit_is_off_on_disk() {
    const REGIONS: usize = 4;
    let states: Arc<Vec<RegionState>> =
        Arc::new((0..REGIONS).map(|_| RegionState::new()).collect());
    let disk: Arc<Vec<AtomicBool>> =
        Arc::new((0..REGIONS).map(|_| AtomicBool::new(false)).collect());
    let stop = Arc::new(AtomicBool::new(false));
    let violations = Arc::new(AtomicU64::new(0));
    let worker = {
        let (states, disk, stop) = (states.clone(), disk.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                for (s, d) in states.iter().zip(disk.iter()) {
                    if s.try_clear() {
                        d.store(false, Ordering::SeqCst); // the cleared block written
                    }
                    if s.claim_waiting() {
                        d.store(s.bit(), Ordering::SeqCst); // the set block written
                        s.block_written();
                    }
                }
            }
        })
    };
    let writers: Vec<_> = (0..4)
        .map(|t| {
            let (states, disk, violations) = (states.clone(), disk.clone(), violations.clone());
            std::thread::spawn(move || {
                for i in 0..20_000usize {
                    let r = (i * 7 + t) % REGIONS;
                    if states[r].start_write() == WriteStart::NeedBit {
                        while !states[r].on_disk() {
                            std::hint::spin_loop();
                        }
                    }
                    // The write's data goes to the members now.
                    if !disk[r].load(Ordering::SeqCst) {
                        violations.fetch_add(1, Ordering::SeqCst);
                    }
                    states[r].end_write();
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    stop.store(true, Ordering::SeqCst);
    worker.join().unwrap();
    assert_eq!(violations.load(Ordering::SeqCst), 0);
    assert!(states.iter().all(|s| s.writes() == 0));
}

#[test]
fn blocks_carry_their_bits_and_a_checksum() {
    let regions = BITS_PER_BLOCK + 100;
    let bit = |r: u64| r % 3 == 0 || r == BITS_PER_BLOCK + 99;
    let mut block = [0u8; BLOCK_BYTES];
    encode_block(1, regions, bit, &mut block);
    assert!(block_intact(&block));
    for i in 0..BITS_PER_BLOCK {
        let region = BITS_PER_BLOCK + i;
        assert_eq!(
            block_bit(&block, i),
            region < regions && bit(region),
            "bit {i}"
        );
    }
    // A damaged block reads as every region dirty.
    block[17] ^= 0x40;
    assert!(!block_intact(&block));
    assert!((0..BITS_PER_BLOCK).all(|i| block_bit(&block, i)));
    // Block 0 of a short bitmap: nothing past its regions.
    encode_block(0, 10, |_| true, &mut block);
    assert!((0..10).all(|i| block_bit(&block, i)));
    assert!((10..BITS_PER_BLOCK).all(|i| !block_bit(&block, i)));
}

/// What the start makes of the blocks it reads: set bits on disk, needing a resync past where
/// one runs from; an unreadable or damaged block as every bit set.
#[test]
fn blocks_read_at_start_set_the_region_states() {
    let regions = Regions::new(100 * 64, 64).unwrap();
    let fresh = || {
        (0..regions.count())
            .map(|_| RegionState::new())
            .collect::<Vec<_>>()
    };
    let mut block = [0u8; BLOCK_BYTES];
    encode_block(0, regions.count(), |r| r == 3 || r == 40, &mut block);

    let states = fresh();
    load_block(&regions, &states, 0, Some(&block), None);
    let on: Vec<usize> = (0..states.len()).filter(|&r| states[r].on_disk()).collect();
    assert_eq!(on, [3, 40]);
    assert!(
        states.iter().all(|s| !s.needs_sync()),
        "clean: nothing to resync"
    );

    // A resync from walk sector 40 * 64: region 40 needs it, region 3 lies before it.
    let states = fresh();
    load_block(&regions, &states, 0, Some(&block), Some(40 * 64));
    assert!(states[40].needs_sync() && !states[3].needs_sync() && states[3].on_disk());

    // Another member's copy adds its bits.
    let mut other = [0u8; BLOCK_BYTES];
    encode_block(0, regions.count(), |r| r == 7, &mut other);
    load_block(&regions, &states, 0, Some(&other), Some(0));
    assert!(states[7].needs_sync());

    for damaged in [
        None,
        Some(&{
            let mut b = block;
            b[100] ^= 1;
            b
        }),
    ] {
        let states = fresh();
        load_block(&regions, &states, 0, damaged, Some(0));
        assert!(states.iter().all(|s| s.on_disk() && s.needs_sync()));
    }
}
