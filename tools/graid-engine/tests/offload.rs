//! The offload's staging layout (`engine/offload.rs`): which jobs go to the helper, and that
//! every job's columns fit its pool area without overlapping, whatever the geometry.

use graid_engine::geometry::ParityLayout;
use graid_engine::layout::StripeMap;
use graid_engine::members::MemberSet;
use graid_engine::offload::{
    cost_update, lost_slots, probe_due, route, slot_member, Fallback, Offloadable, Route, Staging,
    AREA_BYTES, DEFAULT_MIN_BYTES, NO_SLOT, PROBE_INTERVAL_NS, TABLE_BYTES,
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
        lost_seed in any::<(u32, u32, u8)>(),
    ) {
        let parity = if raid6 { 2 } else { 1 };
        prop_assume!(members > parity + 1);
        let chunk = 1u64 << chunk_shift;
        let head = head_seed % chunk;
        let mut job = job(members, parity, layout, stripe, chunk, head, sectors);
        // A generation, or a recovery of up to three members (three is more than RAID 6 rebuilds).
        let (a, b, kind) = lost_seed;
        let lost = match kind % 4 {
            0 => None,
            1 => Some(MemberSet::of(a % members)),
            2 => Some(MemberSet::of(a % members).with(b % members)),
            _ => Some(MemberSet::of(a % members).with(b % members).with((a / 7) % members)),
        };
        if let Some(lost) = lost {
            job.op = ParityOp::Recover { lost };
        }
        let staging = match Staging::plan(&job, 0, Offloadable::GenerateAndRecover) {
            Ok(staging) => staging,
            Err(Fallback::Op) => {
                // Only a recovery of more than the parity rebuilds is refused for its op.
                let lost = lost.expect("a generation is never refused for its op");
                prop_assert!(lost.len() > parity);
                return Ok(());
            }
            Err(reason) => {
                prop_assert_eq!(reason, Fallback::TooBig);
                continue_outside_area(&job, lost.is_some());
                return Ok(());
            }
        };
        prop_assert_eq!(staging.data + staging.parity, members);
        prop_assert_eq!(u64::from(staging.stripes), job.stripe_count());
        prop_assert_eq!(staging.lost, lost);
        prop_assert!(staging.lost_table_offset() + staging.lost_table_bytes() <= TABLE_BYTES);
        let mut spans = Vec::new();
        for (t, (map, from, to)) in (0u32..).zip(job.stripes()) {
            // Each piece fits its column; every member appears once in the stripe's order.
            prop_assert!((to - from) * 512 <= staging.column_bytes);
            let mut seen = MemberSet::EMPTY;
            let (mut copied_out, mut staged_in) = (MemberSet::EMPTY, MemberSet::EMPTY);
            for slot in 0..members {
                let m = slot_member(&map, slot).expect("a member per slot");
                prop_assert!(!seen.contains(m), "member {} twice", m);
                seen = seen.with(m);
                let at = staging.column_offset(t, slot);
                prop_assert_eq!(at % 64, 0, "misaligned column");
                spans.push((at, at + staging.column_bytes));
                let (inward, outward) = staging.copies(&map, slot);
                prop_assert!(inward != outward, "slot {} both or neither ways", slot);
                if inward {
                    staged_in = staged_in.with(m);
                } else {
                    copied_out = copied_out.with(m);
                }
            }
            // A generation takes the data and gives back the parity; a recovery takes what
            // survives and gives back what was lost, which its lost table names.
            let expected_out = lost.unwrap_or(map.parity_set()).intersect(seen);
            prop_assert_eq!(copied_out, expected_out);
            prop_assert_eq!(staged_in, seen.minus(expected_out));
            if let Some(lost) = lost {
                let slots = lost_slots(&map, lost).expect("recoverable");
                let named: Vec<u32> = slots
                    .iter()
                    .filter(|&&s| s != NO_SLOT)
                    .map(|&s| slot_member(&map, u32::from(s)).expect("a slot of the stripe"))
                    .collect();
                prop_assert_eq!(named.len() as u32, copied_out.len());
                prop_assert!(named.iter().all(|&m| copied_out.contains(m)));
            }
        }
        spans.sort_unstable();
        prop_assert!(spans.first().is_some_and(|s| s.0 >= TABLE_BYTES));
        prop_assert!(spans.last().is_some_and(|s| s.1 <= AREA_BYTES));
        prop_assert!(spans.windows(2).all(|w| w[0].1 <= w[1].0), "columns overlap");
    }
}

/// A job refused as too big really would not fit.
fn continue_outside_area(job: &ParityJob, recovery: bool) {
    let longest = job.stripes().map(|(_, a, b)| b - a).max().unwrap_or(0) * 512;
    let columns = job.stripe_count() * u64::from(job.map.members());
    let lost_table = if recovery { job.stripe_count() * 2 } else { 0 };
    assert!(
        longest > 1 << 20
            || columns * 8 + lost_table > TABLE_BYTES
            || TABLE_BYTES + columns * longest > AREA_BYTES,
        "refused a job that fits"
    );
}

#[test]
fn small_jobs_and_other_ops_stay_in_the_kernel() {
    use Offloadable::{Generate, GenerateAndRecover};
    let full = job(6, 2, ParityLayout::LeftSymmetric, 0, 128, 0, 128);
    // 4 data columns of 64 KiB: 256 KiB, above the default threshold.
    assert!(Staging::plan(&full, DEFAULT_MIN_BYTES, Generate).is_ok());
    let small = job(6, 2, ParityLayout::LeftSymmetric, 0, 128, 0, 8);
    assert_eq!(
        Staging::plan(&small, DEFAULT_MIN_BYTES, Generate),
        Err(Fallback::Small)
    );
    assert!(Staging::plan(&small, 0, Generate).is_ok());
    let rmw = ParityJob {
        op: ParityOp::Update {
            changed: MemberSet::of(0),
        },
        ..full
    };
    assert_eq!(Staging::plan(&rmw, 0, Generate), Err(Fallback::Op));
    assert_eq!(
        Staging::plan(&rmw, 0, GenerateAndRecover),
        Err(Fallback::Op)
    );
    let recover = ParityJob {
        op: ParityOp::Recover {
            lost: MemberSet::of(1),
        },
        ..full
    };
    // A recovery goes only where the caller waits for it (rebuild, scrub).
    assert_eq!(Staging::plan(&recover, 0, Generate), Err(Fallback::Op));
    let staging = Staging::plan(&recover, 0, GenerateAndRecover).unwrap();
    assert_eq!(staging.lost, Some(MemberSet::of(1)));
    assert_eq!(staging.lost_table_bytes(), 2);
}

#[test]
fn lost_slots_name_data_p_and_q_in_syndrome_order() {
    let map = StripeMap::new(ParityLayout::LeftSymmetric, 6, 2, 0);
    let (p, q) = (map.p(), map.q().unwrap());
    let data = |slot| slot_member(&map, slot).unwrap();
    assert_eq!(lost_slots(&map, MemberSet::EMPTY), Some([NO_SLOT, NO_SLOT]));
    assert_eq!(lost_slots(&map, MemberSet::of(data(2))), Some([2, NO_SLOT]));
    // P is slot 4 (after the four data slots), Q slot 5; the lower slot first.
    assert_eq!(
        lost_slots(&map, MemberSet::of(p).with(data(2))),
        Some([2, 4])
    );
    assert_eq!(
        lost_slots(&map, MemberSet::of(q).with(data(0))),
        Some([0, 5])
    );
    assert_eq!(lost_slots(&map, MemberSet::of(q).with(p)), Some([4, 5]));
    let three = MemberSet::of(data(0)).with(data(1)).with(data(2));
    assert_eq!(lost_slots(&map, three), None);
    // RAID 5 rebuilds one.
    let map = StripeMap::new(ParityLayout::LeftSymmetric, 4, 1, 0);
    assert_eq!(lost_slots(&map, MemberSet::of(map.p())), Some([3, NO_SLOT]));
    assert_eq!(lost_slots(&map, MemberSet::of(0).with(1)), None);
}

#[test]
fn a_run_over_several_stripes_pads_its_short_pieces_to_the_longest() {
    // Starts 32 sectors into a 128-sector chunk, covers 300 sectors: pieces 96, 128, 76.
    let run = job(5, 1, ParityLayout::LeftSymmetric, 7, 128, 32, 300);
    let staging = Staging::plan(&run, 0, Offloadable::Generate).unwrap();
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
        // A helper not measured yet: the kernel (a probe: the helper, which measures it).
        assert!(!helper(0, 0));
        assert!(!helper(100, 0));
        // The kernel not measured yet, or the helper no slower: the helper (a probe: the
        // kernel).
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

#[test]
fn a_new_helper_is_checked_on_every_job_then_once_a_second() {
    use graid_engine::offload::{verify_due, VERIFY_FIRST, VERIFY_INTERVAL_NS};
    for verified in 0..VERIFY_FIRST {
        assert!(
            verify_due(verified, 5, 5, false),
            "job {verified} of a new helper"
        );
    }
    let last = 10 * VERIFY_INTERVAL_NS;
    assert!(!verify_due(
        VERIFY_FIRST,
        last + VERIFY_INTERVAL_NS - 1,
        last,
        false
    ));
    assert!(verify_due(
        VERIFY_FIRST,
        last + VERIFY_INTERVAL_NS,
        last,
        false
    ));
    assert!(verify_due(u64::MAX, last, last, true), "always");
    assert!(
        !verify_due(VERIFY_FIRST, 0, last, false),
        "a clock read before the last check"
    );
}
