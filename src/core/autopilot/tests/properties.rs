use super::*;

// ---------------------------------------------------------------------------------------------
// Properties over arbitrary sequences of windows
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone)]
struct Reading {
    requests: u64,
    latency_ms: u64,
    slow_share: u8,
    errors_per_mille: u64,
    occupancy_per_cent: u64,
    waiting: u64,
    paused: bool,
}

fn reading() -> impl Strategy<Value = Reading> {
    (
        prop_oneof![Just(0u64), 1u64..60, 50u64..2000],
        1u64..3000,
        0u8..=100,
        prop_oneof![Just(0u64), 0u64..100],
        0u64..=130,
        prop_oneof![Just(0u64), 1u64..1000],
        proptest::bool::weighted(0.05),
    )
        .prop_map(
            |(
                requests,
                latency_ms,
                slow_share,
                errors_per_mille,
                occupancy_per_cent,
                waiting,
                paused,
            )| {
                Reading {
                    requests,
                    latency_ms,
                    slow_share,
                    errors_per_mille,
                    occupancy_per_cent,
                    waiting,
                    paused,
                }
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn every_step_keeps_the_rules(
        first in 1u64..3000,
        rate in 1u64..5000,
        min in 1u64..50,
        span in 0u64..500,
        readings in proptest::collection::vec(reading(), 1..60),
    ) {
        let settings = Settings {
            min_active_users: min,
            max_active_users: min + span,
            ..Default::default()
        };
        let target = settings.latency_target;
        let mut c = Controller::new(
            settings.clone(),
            Setpoint { total_active_users: first, new_users_per_minute: rate, burst: rate },
            T0,
        )
        .unwrap();
        let mut last_change: Option<Millis> = None;
        for (k, r) in readings.iter().enumerate() {
            let k = k as i64;
            let before = c.setpoint();
            let cap = before.total_active_users;
            let slow = r.requests * u64::from(r.slow_share) / 100;
            let errors = r.requests * r.errors_per_mille / 1000;
            let ok = r.requests - errors;
            let w = window(k, &[(r.latency_ms, ok.min(slow)), (20, ok - ok.min(slow))], errors);
            let room = RoomObservation {
                occupancy: cap * r.occupancy_per_cent / 100,
                peak: cap * r.occupancy_per_cent / 100,
                waiting: r.waiting,
            };
            if r.paused { c.pause(T0 + k * W) } else if c.is_paused() { c.resume(T0 + k * W) }
            let d = step(&mut c, k, &w, room);
            let now = c.setpoint();
            // Bounds, and rates that admit someone.
            prop_assert!(now.total_active_users >= min && now.total_active_users <= min + span);
            prop_assert!(now.new_users_per_minute >= 1 && now.burst >= 1);
            let Some(d) = d else {
                prop_assert_eq!(now, before);
                continue;
            };
            prop_assert_eq!((d.from, d.to), (before, now));
            prop_assert_ne!(d.from, d.to);
            prop_assert!(!c.is_paused());
            prop_assert!(w.requests >= settings.min_requests, "no change without traffic");
            if let Some(t) = last_change {
                prop_assert!(d.at - t >= 10_000, "min_interval");
            }
            last_change = Some(d.at);
            let p95 = w.p95().filter(|_| w.latency.count() >= settings.min_requests);
            let breach = p95.is_some_and(|p| p > target)
                || w.error_rate().unwrap_or(0.0) > settings.error_rate_max;
            match d.direction {
                Direction::Down => {
                    prop_assert!(breach);
                    // At most half of the occupancy off, within the bounds.
                    prop_assert!(now.total_active_users >= (room.occupancy / 2).max(min));
                }
                Direction::Up => {
                    prop_assert!(!breach);
                    prop_assert!(p95.is_some_and(|p| p.as_secs_f64() <= target.as_secs_f64() * 0.8));
                    prop_assert!(room.waiting > 0 && room.peak * 100 >= cap * 95, "exercised");
                    prop_assert!(now.total_active_users <= (cap + cap.div_ceil(2)).max(min));
                }
                Direction::Set => prop_assert!(false, "a step never sets"),
            }
        }
    }
}
