//! Recovery round trips: erase every single member and every pair, recover, and compare with
//! the original bytes, for every engine and dispatch level this CPU runs.

mod common;

use common::{cpu_engines, recover, Stripe};
use graid_parity::{Engine, ReferenceEngine};

fn engines() -> Vec<Box<dyn Engine>> {
    let mut all: Vec<Box<dyn Engine>> = vec![Box::new(ReferenceEngine)];
    all.extend(
        cpu_engines()
            .into_iter()
            .map(|e| Box::new(e) as Box<dyn Engine>),
    );
    all
}

fn failure_sets(members: usize, max_lost: usize) -> Vec<Vec<usize>> {
    let mut sets: Vec<Vec<usize>> = (0..members).map(|a| vec![a]).collect();
    if max_lost == 2 {
        for a in 0..members {
            for b in a + 1..members {
                sets.push(vec![a, b]);
            }
        }
    }
    sets
}

fn round_trip_all(data_chunks: usize, len: usize, raid6: bool) {
    let stripe = Stripe::random(data_chunks as u64 * 7919 + len as u64, data_chunks, len);
    let members = data_chunks + if raid6 { 2 } else { 1 };
    for engine in engines() {
        for lost in failure_sets(members, if raid6 { 2 } else { 1 }) {
            let recovered = recover(engine.as_ref(), &stripe, &lost, raid6).unwrap();
            for (m, buf) in lost.iter().zip(&recovered) {
                assert!(
                    buf[..] == *stripe.member(*m),
                    "{}: {data_chunks}+{} lost {lost:?}: member {m} recovered wrong",
                    engine.name(),
                    members - data_chunks,
                );
            }
        }
    }
}

#[test]
fn raid6_smallest_stripe_every_pair() {
    round_trip_all(2, 192, true);
}

#[test]
fn raid6_8_plus_2_every_pair() {
    round_trip_all(8, 320, true);
}

#[test]
fn raid6_widest_stripe_every_pair() {
    // 30 data + P + Q = 32 members, the maximum; exponents up to g^29.
    round_trip_all(30, 128, true);
}

#[test]
fn raid5_every_single_failure() {
    round_trip_all(2, 128, false);
    round_trip_all(31, 128, false);
}

#[test]
fn recovery_of_a_4k_chunk_spans_the_unrolled_loop() {
    // 4 KiB exercises the unrolled main loop of every level, not only the tail.
    let stripe = Stripe::random(42, 6, 4096);
    for engine in engines() {
        for lost in [vec![1, 4], vec![0, 6], vec![5, 7], vec![6, 7]] {
            let recovered = recover(engine.as_ref(), &stripe, &lost, true).unwrap();
            for (m, buf) in lost.iter().zip(&recovered) {
                assert!(buf[..] == *stripe.member(*m), "{} {lost:?}", engine.name());
            }
        }
    }
}
