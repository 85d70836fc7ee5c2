//! Routing requests during a reshape (`engine/reshape_route.rs`): a plan's windows are moved as
//! the worker would (the front moved first, the position recorded when the plan asks and at
//! random otherwise), and at every moment every range routes as the sectors it covers say: new
//! only where every sector is below the recorded position, old only where every sector is past
//! the front, split exactly where the mapping changes, and waiting otherwise. Then readers on
//! other threads route while a writer moves both positions: a range routed new is recorded.

use graid_engine::geometry::{Geometry, Level, ParityLayout};
use graid_engine::reshape::{Direction, ReshapePlan};
use graid_engine::reshape_route::{ReshapeRoute, Route};
use proptest::prelude::*;
use rand::{rngs::StdRng, RngExt, SeedableRng};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

const RAID5: Level = Level::Raid5(ParityLayout::LeftSymmetric);
const RAID6: Level = Level::Raid6(ParityLayout::LeftSymmetric);

/// A sector's class at the positions `route` holds now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    Old,
    New,
    Wait,
}

/// A read's: the sectors moved whole are new (recorded or not), the window in motion old; a read
/// never waits.
fn class(route: &ReshapeRoute, sector: u64, read: bool) -> Class {
    let (recorded, front) = match read {
        true => (route.settled(), route.settled()),
        false => (route.recorded(), route.front()),
    };
    let old_edge = front;
    let content = route.plan().unwrap().content();
    match route.plan().unwrap().direction() {
        Direction::Forwards if sector < recorded => Class::New,
        Direction::Forwards if sector >= old_edge && sector < content => Class::Old,
        Direction::Backwards if sector >= recorded => Class::New,
        Direction::Backwards if sector < old_edge => Class::Old,
        _ => Class::Wait,
    }
}

/// Every range of `len` sectors from `start` routes as its sectors' classes say: a range whose
/// first sector maps (old or new) goes there whole if every sector does, else is split exactly
/// where the class first changes; a range whose first sector waits, waits.
fn check(route: &ReshapeRoute, start: u64, len: u64) {
    check_as(route, start, len, false);
    check_as(route, start, len, true);
}

fn check_as(route: &ReshapeRoute, start: u64, len: u64, read: bool) {
    let classes: Vec<Class> = (start..start + len)
        .map(|s| class(route, s, read))
        .collect();
    let what = format!(
        "{start}+{len} at recorded {} front {}",
        route.recorded(),
        route.front()
    );
    let first = classes[0];
    let change = classes.iter().position(|&c| c != first);
    let want = match (first, change) {
        (Class::Wait, _) => Route::Wait,
        (_, Some(i)) => Route::Split(start + i as u64),
        (Class::Old, None) => Route::Old(route.plan().unwrap().old()),
        (Class::New, None) => Route::New(route.plan().unwrap().new_geometry()),
    };
    let got = if read {
        route.route_read(start, len)
    } else {
        route.route(start, len)
    };
    assert_eq!(got, want, "{what} (read: {read}): {classes:?}");
}

/// Moves `plan`'s windows to the end, at most `max` sectors each, checking random ranges
/// after every change of either position.
fn walk(plan: ReshapePlan, max: u64, seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let route = ReshapeRoute::new(plan, plan.start_position());
    let content = plan.content();
    let mut position = plan.start_position();
    let probe = |route: &ReshapeRoute, rng: &mut StdRng| {
        for _ in 0..24 {
            let start = rng.random_range(0..content);
            let len = rng.random_range(1..=(content - start).min(2048));
            check(route, start, len);
        }
    };
    let mut steps = 0;
    while let Some(w) = plan.next_window(position, route.recorded(), max) {
        if w.record_first {
            assert!(route.record(position), "recording the position");
            probe(&route, &mut rng);
        }
        let (front, next) = match plan.direction() {
            Direction::Forwards => (w.end, w.end),
            Direction::Backwards => (w.start, w.start),
        };
        assert!(route.move_front(front));
        probe(&route, &mut rng);
        // The window is moved now; sometimes the position is recorded at once (a checkpoint).
        assert!(route.settle(front));
        probe(&route, &mut rng);
        position = next;
        if rng.random_range(0..4) == 0 {
            assert!(route.record(position));
            probe(&route, &mut rng);
        }
        steps += 1;
        assert!(steps < 100_000, "the plan never ends");
    }
    assert!(route.record(position));
    // Done and recorded: everything is new.
    assert_eq!(route.route(0, content), Route::New(plan.new_geometry()));
}

fn plan(old: Geometry, old_offset: u64, new: Geometry, new_offset: u64) -> ReshapePlan {
    ReshapePlan::new(old, old_offset, new, new_offset).expect("a plan")
}

#[test]
fn raid5_four_to_five_forwards() {
    let old = Geometry::new(RAID5, 4, 128, 16384).unwrap();
    let new = Geometry::new(RAID5, 5, 128, 16384).unwrap();
    for seed in 0..4 {
        walk(plan(old, 8192, new, 4096), 1024 + seed * 512, seed);
    }
}

#[test]
fn raid5_five_to_four_backwards() {
    let old = Geometry::new(RAID5, 5, 128, 16384).unwrap();
    let new = Geometry::new(RAID5, 4, 128, 16384).unwrap();
    for seed in 0..4 {
        walk(plan(old, 4096, new, 8192), 2048, seed);
    }
}

#[test]
fn raid6_chunk_change() {
    let old = Geometry::new(RAID6, 5, 16, 16384).unwrap();
    let new = Geometry::new(RAID6, 5, 128, 16384).unwrap();
    walk(plan(old, 8192, new, 4096), 4096, 9);
}

#[test]
fn positions_move_one_way_and_never_record_past_the_front() {
    let old = Geometry::new(RAID5, 4, 128, 16384).unwrap();
    let new = Geometry::new(RAID5, 5, 128, 16384).unwrap();
    let route = ReshapeRoute::new(plan(old, 8192, new, 4096), 0);
    assert!(!route.record(384), "recorded past the front");
    assert!(route.move_front(768));
    assert!(route.record(384));
    assert!(!route.move_front(384), "the front moved back");
    assert!(!route.record(0), "the record moved back");
    assert!(
        !route.move_front(route.plan().unwrap().content() + 1),
        "past the content"
    );
    assert_eq!((route.recorded(), route.front()), (384, 768));
    // Past the content (the grow's room) waits for the end.
    let content = route.plan().unwrap().content();
    assert_eq!(route.route(content, 8), Route::Wait);
    assert!(route.move_front(content));
    assert_eq!(route.route(content - 8, 16), Route::Wait);
}

proptest! {
    #[test]
    fn any_restripe_routes_by_its_sectors(
        (old_members, new_members) in (3u32..8, 3u32..8).prop_filter("a change", |(a, b)| a != b),
        chunk_shift in 3u32..7,
        max in 1u64..64,
        seed in any::<u64>(),
    ) {
        let chunk = 1u32 << chunk_shift;
        let data = 64 * u64::from(chunk);
        let old = Geometry::new(RAID5, old_members, chunk, data).unwrap();
        let new = Geometry::new(RAID5, new_members, chunk, data).unwrap();
        let (old_offset, new_offset) = if new_members > old_members { (8192, 0) } else { (0, 8192) };
        if let Ok(plan) = ReshapePlan::new(old, old_offset, new, new_offset) {
            walk(plan, max * u64::from(chunk), seed);
        }
    }
}

#[test]
fn readers_never_see_a_range_new_before_it_is_recorded() {
    let old = Geometry::new(RAID5, 4, 16, 16384).unwrap();
    let new = Geometry::new(RAID5, 5, 16, 16384).unwrap();
    let plan = plan(old, 8192, new, 4096);
    let route = Arc::new(ReshapeRoute::new(plan, 0));
    let done = Arc::new(AtomicBool::new(false));
    let started = Arc::new(std::sync::Barrier::new(4));
    let readers: Vec<_> = (0..3)
        .map(|t| {
            let (route, done) = (Arc::clone(&route), Arc::clone(&done));
            let started = Arc::clone(&started);
            std::thread::spawn(move || {
                started.wait();
                let mut rng = StdRng::seed_from_u64(t);
                let content = route.plan().unwrap().content();
                let mut routed = 0u64;
                while !done.load(Ordering::SeqCst) {
                    let start = rng.random_range(0..content);
                    let len = rng.random_range(1..=(content - start).min(256));
                    let front_before = route.front();
                    match route.route(start, len) {
                        Route::New(_) => {
                            assert!(start + len <= route.recorded(), "new before recorded");
                        }
                        Route::Old(_) => {
                            assert!(start >= front_before, "old below the front");
                        }
                        _ => {}
                    }
                    // A read: new only where moved whole, old only outside the moved.
                    let settled_before = route.settled();
                    match route.route_read(start, len) {
                        Route::New(_) => {
                            assert!(start + len <= route.settled(), "read new before settled");
                        }
                        Route::Old(_) => {
                            assert!(start >= settled_before, "read old below what settled");
                        }
                        Route::Wait => panic!("a read waits"),
                        Route::Split(_) => {}
                    }
                    routed += 1;
                }
                routed
            })
        })
        .collect();
    started.wait();
    let mut position = 0;
    while let Some(w) = plan.next_window(position, route.recorded(), 256) {
        if w.record_first {
            assert!(route.record(position));
        }
        assert!(route.move_front(w.end));
        // The window's copy: the readers route meanwhile.
        std::thread::sleep(std::time::Duration::from_micros(200));
        assert!(route.settle(w.end));
        position = w.end;
    }
    assert!(route.record(position));
    done.store(true, Ordering::SeqCst);
    for r in readers {
        assert!(r.join().unwrap() > 0);
    }
}
