use super::*;
use crate::core::autopilot::measurement::{SUB, bucket_floor, bucket_of};

// ---------------------------------------------------------------------------------------------
// Histogram, signal, recorder, room window
// ---------------------------------------------------------------------------------------------

#[test]
fn buckets_are_contiguous_and_at_most_a_sixteenth_wide() {
    assert_eq!(bucket_floor(0), 0);
    for i in 0..BUCKETS {
        let (lo, hi) = (bucket_floor(i), bucket_floor(i + 1));
        assert!(hi > lo, "bucket {i}");
        assert_eq!(bucket_of(lo), i, "start of bucket {i}");
        assert_eq!(bucket_of(hi - 1), i, "end of bucket {i}");
        if i >= SUB as usize {
            assert!((hi - lo) * 16 <= lo, "bucket {i} is {lo}..{hi}");
        }
    }
    // Beyond the last power of two, everything goes in the last bucket.
    assert_eq!(bucket_of(u64::MAX), BUCKETS - 1);
    assert_eq!(bucket_of(bucket_floor(BUCKETS)), BUCKETS - 1);
    // 250 ms falls in a bucket of 8.2 ms.
    let (lo, hi) = LatencyHistogram::bucket_range(bucket_of(250_000));
    assert_eq!((lo.as_micros(), hi.as_micros()), (245_760, 253_952));
}

#[test]
fn the_p95_ignores_one_slow_request_in_twenty_and_reads_two() {
    let mut h = LatencyHistogram::default();
    assert_eq!(h.quantile(950), None);
    for _ in 0..19 {
        h.record(Duration::from_millis(100));
    }
    h.record(Duration::from_secs(30));
    let p95 = h.quantile(950).unwrap();
    assert!(
        p95 >= Duration::from_millis(94) && p95 <= Duration::from_millis(106),
        "{p95:?}"
    );
    h.record(Duration::from_secs(30));
    assert!(h.quantile(950).unwrap() >= Duration::from_secs(28));
}

#[test]
fn a_histogram_is_stored_as_its_non_empty_buckets() {
    let mut h = LatencyHistogram::default();
    h.record(Duration::from_micros(3));
    h.record(Duration::from_millis(250));
    h.record(Duration::from_millis(250));
    let json = serde_json::to_string(&h).unwrap();
    assert_eq!(json, format!("[[3,1],[{},2]]", bucket_of(250_000)));
    let back: LatencyHistogram = serde_json::from_str(&json).unwrap();
    assert_eq!(back, h);
    assert_eq!(back.count(), 3);
    let err = serde_json::from_str::<LatencyHistogram>(&format!("[[{BUCKETS},1]]")).unwrap_err();
    assert!(err.to_string().contains("does not exist"), "{err}");
}

proptest! {
    #[test]
    fn quantiles_are_within_one_bucket_of_the_exact_nearest_rank(
        latencies in proptest::collection::vec(1u64..20_000_000, 1..400),
        per_mille in 1u64..=1000,
    ) {
        let mut h = LatencyHistogram::default();
        for us in &latencies {
            h.record(Duration::from_micros(*us));
        }
        let mut sorted = latencies.clone();
        sorted.sort_unstable();
        let rank = (per_mille as usize * sorted.len()).div_ceil(1000).max(1);
        let exact = sorted[rank - 1];
        let (lo, hi) = LatencyHistogram::bucket_range(bucket_of(exact));
        let read = h.quantile(per_mille).unwrap();
        prop_assert!(read >= lo && read < hi, "exact {exact} us, read {read:?}, bucket {lo:?}..{hi:?}");
    }

    #[test]
    fn merged_windows_are_exactly_the_windows_of_all_their_requests(
        a in proptest::collection::vec((1u64..5_000_000, any::<bool>()), 0..200),
        b in proptest::collection::vec((1u64..5_000_000, any::<bool>()), 0..200),
    ) {
        let record = |s: &mut Signal, items: &[(u64, bool)]| {
            for (us, error) in items {
                s.record(Exchange::Response {
                    status: if *error { 502 } else { 200 },
                    latency: Duration::from_micros(*us),
                });
            }
        };
        let (mut one, mut two, mut all) = (Signal::new(T0), Signal::new(T0), Signal::new(T0));
        one.ended_at = T0 + W;
        two.ended_at = T0 + W;
        all.ended_at = T0 + W;
        record(&mut one, &a);
        record(&mut two, &b);
        record(&mut all, &a);
        record(&mut all, &b);
        one.merge(&two);
        prop_assert_eq!(&one, &all);
        prop_assert_eq!(one.p95(), all.p95());
        // Through the store and back, still the same.
        let stored: Signal = serde_json::from_str(&serde_json::to_string(&one).unwrap()).unwrap();
        prop_assert_eq!(stored, all);
    }
}

#[test]
fn a_signal_counts_5xx_timeouts_and_failures_as_errors() {
    let mut s = Signal::new(T0);
    s.ended_at = T0 + 1_000;
    assert_eq!(s.error_rate(), None);
    let ok = |ms| Exchange::Response {
        status: 200,
        latency: Duration::from_millis(ms),
    };
    s.record(ok(100));
    s.record(ok(300));
    s.record(Exchange::Response {
        status: 404,
        latency: Duration::from_millis(100),
    });
    s.record(Exchange::Response {
        status: 500,
        latency: Duration::from_millis(100),
    });
    s.record(Exchange::Timeout {
        after: Duration::from_millis(400),
    });
    s.record(Exchange::Failed);
    assert_eq!((s.requests, s.errors, s.latency.count()), (6, 3, 5));
    assert_eq!(s.error_rate(), Some(0.5));
    // 1 s of requests in flight over a 1 s window: one at a time on average.
    assert_eq!(s.latency_total_us, 1_000_000);
    assert!((s.in_flight() - 1.0).abs() < 1e-9);
}

#[test]
fn the_recorder_cuts_windows_on_the_clock_and_hands_each_over_once() {
    let ok = Exchange::Response {
        status: 200,
        latency: Duration::from_millis(10),
    };
    let mut r = Recorder::new(Duration::from_secs(10), 1_000_003);
    assert_eq!(r.roll(1_009_999), None);
    assert_eq!(r.record(1_005_000, ok), None);
    assert_eq!(r.record(1_009_999, ok), None);
    let first = r.record(1_010_000, ok).unwrap();
    assert_eq!(
        (first.started_at, first.ended_at, first.requests),
        (1_000_000, 1_010_000, 2)
    );
    // A window without requests is handed over too (no traffic is a reading), then the next.
    let second = r.roll(1_020_500).unwrap();
    assert_eq!((second.started_at, second.requests), (1_010_000, 1));
    let third = r.roll(1_031_000).unwrap();
    assert_eq!(
        (third.started_at, third.ended_at, third.requests),
        (1_020_000, 1_030_000, 0)
    );
    assert_eq!(r.roll(1_031_000), None);
    assert_eq!(window_start(-1, 10), -10);
}

#[test]
fn the_room_window_averages_occupancy_and_keeps_its_peak_and_the_fewest_waiting() {
    let mut w = RoomWindow::default();
    assert_eq!(w.observation(), None);
    w.tick(90, 50);
    w.tick(103, 0);
    w.tick(101, 70);
    assert_eq!(
        w.take(),
        Some(RoomObservation {
            occupancy: 98,
            peak: 103,
            waiting: 0
        })
    );
    assert_eq!(w.take(), None);
}
