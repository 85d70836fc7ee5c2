//! The background speed DETAIL reports.

use graid_engine::rate::RateMeter;

const MS: u64 = 1_000_000;

#[test]
fn the_rate_is_published_per_second_and_cleared_at_the_end() {
    let meter = RateMeter::new();
    // 1 MiB windows of 100 ms each, from t = 5 s: 10 MiB/s.
    let mut t = 5_000 * MS;
    for _ in 0..9 {
        meter.add(t, t + 100 * MS, 2048);
        t += 100 * MS;
        assert_eq!(meter.kibs(), 0, "published before a second passed");
    }
    meter.add(t, t + 100 * MS, 2048);
    t += 100 * MS;
    assert_eq!(meter.kibs(), 10 * 1024);
    // Slower: 1 MiB per 200 ms for the next second and a bit.
    for _ in 0..5 {
        meter.add(t, t + 200 * MS, 2048);
        t += 200 * MS;
    }
    assert_eq!(meter.kibs(), 5 * 1024);
    meter.stop();
    assert_eq!(meter.kibs(), 0);
    // A new run measures from its own first window, not from the last mark.
    meter.add(t + 60_000 * MS, t + 61_000 * MS, 4096);
    assert_eq!(meter.kibs(), 2 * 1024);
}
