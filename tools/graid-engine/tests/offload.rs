//! The offload's staging layout (`engine/offload.rs`): which jobs go to the helper, and that
//! every job's columns fit its pool area without overlapping, whatever the geometry.

use graid_engine::geometry::ParityLayout;
use graid_engine::layout::StripeMap;
use graid_engine::members::MemberSet;
use graid_engine::offload::{
    cost_update, probe_due, route, slot_member, Fallback, Route, Staging, AREA_BYTES,
    DEFAULT_MIN_BYTES, PROBE_INTERVAL_NS, TABLE_BYTES,
};
use graid_engine::parity::{ParityJob, ParityOp};
use proptest::prelude::*;

fn job(
    members: u32,
    parity: u32,
    layout: ParityLayout,
    stripe: u64,
    chunk: u64,
    head: u64,
    sectors: u64,
) -> ParityJob {
    ParityJob {
        op: ParityOp::Generate,
        map: StripeMap::new(layout, members, parity, stripe),
        head,
        chunk,
        sectors,
    }
}

fn layouts() -> impl Strategy<Value = ParityLayout> {
    prop_oneof![
        Just(ParityLayout::LeftSymmetric),
        Just(ParityLayout::LeftAsymmetric),
        Just(ParityLayout::RightSymmetric),
        Just(ParityLayout::RightAsymmetric),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn every_column_of_a_staged_job_has_its_own_place_in_the_area(
        members in 3u32..=32,
        raid6 in any::<bool>(),
        layout in layouts(),
        stripe in 0u64..1000,
        chunk_shift in 3u32..=11,
        head_seed in any::<u64>(),
        sectors in 1u64..=2048,
    ) {
        let parity = if raid6 { 2 } else { 1 };
        prop_assume!(members > parity + 1);
        let chunk = 1u64 << chunk_shift;
        let head = head_seed % chunk;
        let job = job(members, parity, layout, stripe, chunk, head, sectors);
        let staging = match Staging::plan(&job, 0) {
            Ok(staging) => staging,
            Err(reason) => {
                prop_assert_eq!(reason, Fallback::TooBig);
                continue_outside_area(&job);
                return Ok(());
            }
        };
        prop_assert_eq!(staging.data + staging.parity, members);
        prop_assert_eq!(u64::from(staging.stripes), job.stripe_count());
        prop_assert!(staging.columns() * 8 <= TABLE_BYTES);
        let mut spans = Vec::new();
        for (t, (map, from, to)) in (0u32..).zip(job.stripes()) {
            // Each piece fits its column; every member appears once in the stripe's order.
            prop_assert!((to - from) * 512 <= staging.column_bytes);
            let mut seen = MemberSet::EMPTY;
            for slot in 0..members {
                let m = slot_member(&map, slot).expect("a member per slot");
                prop_assert!(!seen.contains(m), "member {} twice", m);
                seen = seen.with(m);
                let at = staging.column_offset(t, slot);
                prop_assert_eq!(at % 64, 0, "misaligned column");
                spans.push((at, at + staging.column_bytes));
            }
        }
        spans.sort_unstable();
        prop_assert!(spans.first().is_some_and(|s| s.0 >= TABLE_BYTES));
        prop_assert!(spans.last().is_some_and(|s| s.1 <= AREA_BYTES));
        prop_assert!(spans.windows(2).all(|w| w[0].1 <= w[1].0), "columns overlap");
    }
}

/// A job refused as too big really would not fit.
fn continue_outside_area(job: &ParityJob) {
    let longest = job.stripes().map(|(_, a, b)| b - a).max().unwrap_or(0) * 512;
    let columns = job.stripe_count() * u64::from(job.map.members());
    assert!(
        longest > 1 << 20
            || columns * 8 > TABLE_BYTES
            || TABLE_BYTES + columns * longest > AREA_BYTES,
        "refused a job that fits"
    );
}

#[test]
fn small_jobs_and_other_ops_stay_in_the_kernel() {
    let full = job(6, 2, ParityLayout::LeftSymmetric, 0, 128, 0, 128);
    // 4 data columns of 64 KiB: 256 KiB, above the default threshold.
    assert!(Staging::plan(&full, DEFAULT_MIN_BYTES).is_ok());
    let small = job(6, 2, ParityLayout::LeftSymmetric, 0, 128, 0, 8);
    assert_eq!(
        Staging::plan(&small, DEFAULT_MIN_BYTES),
        Err(Fallback::Small)
    );
    assert!(Staging::plan(&small, 0).is_ok());
    let rmw = ParityJob {
        op: ParityOp::Update {
            changed: MemberSet::of(0),
        },
        ..full
    };
    assert_eq!(Staging::plan(&rmw, 0), Err(Fallback::Op));
    let recover = ParityJob {
        op: ParityOp::Recover {
            lost: MemberSet::of(1),
        },
        ..full
    };
    assert_eq!(Staging::plan(&recover, 0), Err(Fallback::Op));
}

#[test]
fn a_run_over_several_stripes_pads_its_short_pieces_to_the_longest() {
    // Starts 32 sectors into a 128-sector chunk, covers 300 sectors: pieces 96, 128, 76.
    let run = job(5, 1, ParityLayout::LeftSymmetric, 7, 128, 32, 300);
    let staging = Staging::plan(&run, 0).unwrap();
    assert_eq!(staging.stripes, 3);
    assert_eq!(staging.column_bytes, 128 * 512);
    assert_eq!(staging.column_offset(0, 0), TABLE_BYTES);
    assert_eq!(staging.column_offset(1, 0), TABLE_BYTES + 5 * 128 * 512);
    assert_eq!(staging.data_bytes(), 3 * 4 * 128 * 512);
}

#[test]
fn the_faster_side_gets_the_jobs_and_the_slower_one_a_probe_a_second() {
    for probe in [false, true] {
        let helper = |kernel, helper| (route(kernel, helper, probe) == Route::Helper) != probe;
        // Nothing measured yet, or the helper no slower: the helper (a probe: the kernel).
        assert!(helper(0, 0));
        assert!(helper(100, 0));
        assert!(helper(0, 100));
        assert!(helper(100, 100));
        // A slower helper: the kernel (a probe: the helper).
        assert!(!helper(100, 101));
        assert!(!helper(100, 5000));
    }
    assert!(probe_due(PROBE_INTERVAL_NS, 0));
    assert!(!probe_due(PROBE_INTERVAL_NS - 1, 0));
    assert!(!probe_due(5, 10), "a clock read before the last probe");
}

#[test]
fn costs_follow_the_measurements() {
    // 1 ms for 1 MiB: 1000 ns per KiB.
    let first = cost_update(0, 1 << 20, 1_000_000);
    assert_eq!(first, 976);
    // Samples pull the average towards them, an eighth at a time.
    let mut cost = first;
    for _ in 0..64 {
        cost = cost_update(cost, 1 << 20, 2_000_000);
    }
    assert!((1900..=1953).contains(&cost), "{cost}");
    assert_eq!(
        cost_update(0, 0, 0),
        1,
        "never 0 (not measured) once measured"
    );
}
