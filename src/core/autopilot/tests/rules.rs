use super::*;

// ---------------------------------------------------------------------------------------------
// The controller, one rule at a time
// ---------------------------------------------------------------------------------------------

#[test]
fn it_starts_from_the_room_settings_clamped_into_the_bounds() {
    let c = controller(180);
    assert_eq!(c.setpoint(), start(180));
    let status = c.status();
    assert!(status.enabled && !status.paused);
    assert_eq!(
        (status.total_active_users, status.new_users_per_minute),
        (180, 1800)
    );
    assert_eq!((status.changed_at, status.phase), (Some(T0), "slow_start"));

    let c = controller(5000);
    assert_eq!(
        c.setpoint(),
        Setpoint {
            total_active_users: 2000,
            new_users_per_minute: 20_000,
            burst: 20_000
        }
    );
    assert!(
        c.status().reason.contains("clamped into [10, 2000]"),
        "{}",
        c.status().reason
    );
    assert_eq!(controller(3).setpoint().total_active_users, 10);
}

#[test]
fn the_rate_and_burst_follow_the_capacity_in_the_starting_ratio_and_stay_above_zero() {
    let s = Setpoint {
        total_active_users: 300,
        new_users_per_minute: 100,
        burst: 7,
    };
    let c = Controller::new(Settings::default(), s, T0).unwrap();
    assert_eq!(c.setpoint_for(150).new_users_per_minute, 50);
    assert_eq!(c.setpoint_for(151).new_users_per_minute, 50); // 50.33, rounded
    assert_eq!(c.setpoint_for(152).new_users_per_minute, 51); // 50.67
    assert_eq!(c.setpoint_for(10).burst, 1); // 0.23 -> at least 1
    assert_eq!(c.setpoint_for(2000).burst, 47);
}

#[test]
fn without_traffic_the_limits_stay() {
    let mut c = controller(180);
    for k in 0..100 {
        // An empty window, then one just under min_requests, and the room full with people waiting.
        let w = if k % 2 == 0 {
            window(k, &[], 0)
        } else {
            window(k, &[(5_000, 49)], 0)
        };
        assert_eq!(step(&mut c, k, &w, full(180)), None);
    }
    assert_eq!(c.setpoint(), start(180));
    assert!(
        c.status().last_step.contains("49 origin requests"),
        "{}",
        c.status().last_step
    );
}

#[test]
fn one_slow_request_does_not_move_the_room() {
    let mut c = controller(180);
    let w = window(0, &[(50, 99), (30_000, 1)], 0);
    assert!(w.p95().unwrap() < Duration::from_millis(60));
    let not_full = RoomObservation {
        occupancy: 100,
        peak: 100,
        waiting: 0,
    };
    assert_eq!(step(&mut c, 0, &w, not_full), None);
    assert_eq!(capacity(&c), 180);
}

#[test]
fn a_latency_breach_cuts_to_the_occupancy_the_origin_can_take() {
    let mut c = controller(200);
    // 1000 requests of 450 ms in 10 s: 45 in flight on average; p95 ~457 ms (in its bucket).
    let w = window(0, &[(450, 1000)], 0);
    let p95 = w.p95().unwrap().as_micros() as f64;
    assert!((w.in_flight() - 45.0).abs() < 1e-9);
    let d = step(&mut c, 0, &w, full(200)).unwrap();
    // Of the 45 in flight, the share above a p95 of 225 ms (the middle of the band) is queued:
    // 200 - 45 * (1 - 225/457) = 177.
    let expected = (200.0 - 45.0 * (1.0 - 225_000.0 / p95)).floor() as u64;
    assert_eq!(expected, 177);
    assert_eq!(d.direction, Direction::Down);
    assert_eq!(
        (d.from, d.to),
        (
            start(200),
            Setpoint {
                total_active_users: 177,
                new_users_per_minute: 1770,
                burst: 1770
            }
        )
    );
    assert_eq!(d.at, T0 + W);
    assert!(
        d.reason.starts_with("breach: p95 457 ms (target 250 ms)"),
        "{}",
        d.reason
    );
    assert!(d.to_string().starts_with(
        "autopilot: total_active_users 200 -> 177, new_users_per_minute 2000 -> 1770: breach"
    ));
    assert_eq!(c.status().changed_at, Some(T0 + W));
    assert_eq!(c.status().phase, "steady");
}

#[test]
fn a_cut_is_never_deeper_than_half_nor_shallower_than_five_percent() {
    let mut c = controller(400);
    // 1000 requests of 20 s: 2000 in flight, far more than inside; one window halves the room.
    let d = step(&mut c, 0, &window(0, &[(20_000, 1000)], 0), full(400)).unwrap();
    assert_eq!(d.to.total_active_users, 200);
    // Just over the target with little in flight: 5 % off the occupancy all the same.
    let d = step(&mut c, 1, &window(1, &[(255, 100)], 0), full(200)).unwrap();
    assert_eq!(d.to.total_active_users, 190);
}

#[test]
fn an_error_breach_cuts_by_the_share_over_the_budget() {
    let mut c = controller(200);
    // 4 % errors against a 2 % budget: to half the occupancy.
    let d = step(&mut c, 0, &window(0, &[(50, 960)], 40), full(200)).unwrap();
    assert_eq!(d.to.total_active_users, 100);
    assert!(d.reason.contains("errors 4.0 %"), "{}", d.reason);
    // 3 % against 2 %: to two thirds.
    let mut c = controller(200);
    let d = step(&mut c, 0, &window(0, &[(50, 970)], 30), full(150)).unwrap();
    assert_eq!(d.to.total_active_users, 100);
    // 1.8 %: within the budget, no cut (and too close to it to grow: the band).
    let mut c = controller(200);
    assert_eq!(
        step(&mut c, 0, &window(0, &[(50, 982)], 18), full(200)),
        None
    );
    assert!(
        c.status().last_step.contains("hysteresis"),
        "{}",
        c.status().last_step
    );
    // Every exchange failing (origin down): no latency at all, all errors: half.
    let mut c = controller(200);
    let mut w = Signal::new(T0);
    w.ended_at = T0 + W;
    for _ in 0..100 {
        w.record(Exchange::Failed);
    }
    assert_eq!(
        step(&mut c, 0, &w, full(200))
            .unwrap()
            .to
            .total_active_users,
        100
    );
}

#[test]
fn it_never_goes_below_min_active_users() {
    let mut c = controller(30);
    let slow = |k| window(k, &[(5_000, 100)], 0);
    assert_eq!(
        step(&mut c, 0, &slow(0), full(30))
            .unwrap()
            .to
            .total_active_users,
        15
    );
    assert_eq!(
        step(&mut c, 1, &slow(1), full(15))
            .unwrap()
            .to
            .total_active_users,
        10
    );
    assert_eq!(step(&mut c, 2, &slow(2), full(10)), None);
    assert!(c.status().last_step.contains("already at min_active_users"));
    assert_eq!(capacity(&c), 10);
}

#[test]
fn while_the_room_drains_after_a_cut_it_only_cuts_again_if_the_reading_asks_for_less() {
    let mut c = controller(200);
    let d = step(&mut c, 0, &window(0, &[(450, 1000)], 0), full(200)).unwrap();
    assert_eq!(d.to.total_active_users, 177);
    // Next window: nobody was evicted, 195 still inside on average, the origin at 300 ms: its
    // reading asks for 195 - 30 * (1 - 225/~305) = 187, which the last cut already covers.
    let draining = RoomObservation {
        occupancy: 195,
        peak: 195,
        waiting: 500,
    };
    assert_eq!(
        step(&mut c, 1, &window(1, &[(300, 1000)], 0), draining),
        None
    );
    assert!(
        c.status().last_step.contains("still taking effect"),
        "{}",
        c.status().last_step
    );
    // A much worse reading while draining asks for 195 - 200 * (1 - 225/~2030) = 17, no deeper
    // than half the occupancy: 97; its p95 is over twice the target. But the room was above the
    // limit all window: its p95 is partly the load before the cut. 65 % of the limit at least:
    // 115.
    let d = step(&mut c, 2, &window(2, &[(2_000, 1000)], 0), draining).unwrap();
    assert_eq!(d.to.total_active_users, 115);
    assert!(d.reason.contains("still above"), "{}", d.reason);
    // At the limit, the reading is the limit's own, and p95 ~1015 ms is over twice the target:
    // half the occupancy, 57.
    let d = step(&mut c, 3, &window(3, &[(1_000, 1000)], 0), full(115)).unwrap();
    assert_eq!(d.to.total_active_users, 57);
    assert!(d.reason.contains("half the occupancy"), "{}", d.reason);
}

#[test]
fn a_p95_over_twice_the_target_halves_the_occupancy() {
    // 600 ms at 200 inside with 20 in flight: the estimate alone would ask for
    // 200 - 20 * (1 - 225/~620) = 187, as if the queue were the whole story. The origin itself
    // turned slow: half the room.
    let mut c = controller(200);
    let w = window(0, &[(600, 333)], 0);
    assert!((w.in_flight() - 19.98).abs() < 1e-9);
    let d = step(&mut c, 0, &w, full(200)).unwrap();
    assert_eq!(d.to.total_active_users, 100);
    assert!(d.reason.contains("over 2 times the target"), "{}", d.reason);
    // Up to twice the target (480 ms) the estimate stands: 100 - 48 * (1 - 225/~490) = 74.
    let d = step(&mut c, 1, &window(1, &[(480, 1000)], 0), full(100)).unwrap();
    assert_eq!(d.to.total_active_users, 74);
    assert!(!d.reason.contains("half the occupancy"), "{}", d.reason);
}

#[test]
fn healthy_and_full_it_grows_by_half_until_the_first_breach_then_probes_the_knee_by_two_percent() {
    let mut c = controller(40);
    let mut k = 0;
    for expected in [60, 90, 135, 203] {
        let room = full(capacity(&c));
        let d = step(&mut c, k, &fast(k), room).unwrap();
        assert_eq!(
            (d.direction, d.to.total_active_users),
            (Direction::Up, expected)
        );
        assert!(d.reason.contains("slow start"), "{}", d.reason);
        k += 1;
    }
    // A breach at 203 inside: down, and out of slow start.
    let d = step(&mut c, k, &window(k, &[(300, 1000)], 0), full(203)).unwrap();
    assert_eq!(d.direction, Direction::Down);
    let after_cut = d.to.total_active_users;
    assert_eq!(after_cut, 192); // 203 - 30 * (1 - 225/~301) = 195.4, but at least 5 % off
    // Healthy again (p95 ~155 ms, under the band but not far under). That breach put the knee
    // at 203 - 30 * (1 - 250/~310) = 197: half way there each window (at least 1); past it,
    // probes of 2 % (one window of patience after a first breach there); 10 % past it (217) the
    // breach no longer describes the origin: square roots scaled by how far p95 is under the
    // band (2 * (1 - 155/200) of 15 = 7).
    for (expected, how) in [
        (194, "half way"),
        (195, "half way"),
        (196, "half way"),
        (197, "half way"),
        (201, "probing past"),
        (206, "probing past"),
        (211, "probing past"),
        (216, "probing past"),
        (221, "probing past"),
        (228, "+sqrt"),
    ] {
        k += 1;
        let room = full(capacity(&c));
        let d = step(&mut c, k, &window(k, &[(150, 1000)], 0), room).unwrap();
        assert_eq!(d.to.total_active_users, expected);
        assert!(d.reason.contains(how), "{}", d.reason);
    }
    // Far under the band (p95 under half its floor): whole square roots.
    k += 1;
    let d = step(&mut c, k, &fast(k), full(228)).unwrap();
    assert_eq!(d.to.total_active_users, 244);
}

#[test]
fn a_limit_traffic_did_not_reach_is_never_raised() {
    let mut c = controller(200);
    let below = RoomObservation {
        occupancy: 189, // under 95 % of 200
        peak: 189,
        waiting: 1000,
    };
    let nobody_waiting = RoomObservation {
        occupancy: 200,
        peak: 200,
        waiting: 0,
    };
    for k in 0..20 {
        let room = if k % 2 == 0 { below } else { nobody_waiting };
        assert_eq!(step(&mut c, k, &fast(k), room), None);
    }
    assert!(
        c.status().last_step.contains("not raised"),
        "{}",
        c.status().last_step
    );
    assert_eq!(capacity(&c), 200);
    // 190 of 200 with people waiting is full enough.
    let d = step(
        &mut c,
        20,
        &fast(20),
        RoomObservation {
            occupancy: 190,
            peak: 190,
            waiting: 1,
        },
    );
    assert_eq!(d.unwrap().direction, Direction::Up);
}

#[test]
fn the_window_after_a_raise_counts_as_full_when_the_room_reached_the_new_limit() {
    let mut c = controller(100);
    assert_eq!(
        step(&mut c, 0, &fast(0), full(100))
            .unwrap()
            .to
            .total_active_users,
        150
    );
    // The leader's grace: the next window's first ticks still ran at 100, then the room filled
    // to 150. Its mean (140) is under 95 % of 150; it reached the limit all the same.
    let filling = RoomObservation {
        occupancy: 140,
        peak: 150,
        waiting: 300,
    };
    assert_eq!(
        step(&mut c, 1, &fast(1), filling)
            .unwrap()
            .to
            .total_active_users,
        225
    );
    // Had it not reached the new limit, the limit was not exercised.
    let short_of_it = RoomObservation {
        peak: 210,
        ..filling
    };
    assert_eq!(step(&mut c, 2, &fast(2), short_of_it), None);
}

#[test]
fn in_the_hysteresis_band_it_holds_and_two_windows_there_end_slow_start() {
    let mut c = controller(100);
    let band = |k| window(k, &[(220, 1000)], 0); // p95 ~220 ms: under 250, over 80 % of it
    // One window in the band (a room filling up sends a burst of first requests): hold, but
    // still in slow start.
    assert_eq!(step(&mut c, 0, &band(0), full(100)), None);
    assert!(c.status().last_step.contains("within the hysteresis band"));
    assert_eq!(c.status().phase, "slow_start");
    assert_eq!(
        step(&mut c, 1, &fast(1), full(100))
            .unwrap()
            .to
            .total_active_users,
        150
    );
    // Two in a row: the knee is near, slow start is over.
    for k in 2..10 {
        assert_eq!(step(&mut c, k, &band(k), full(150)), None);
    }
    assert_eq!(c.status().phase, "steady");
    // Then healthy again: +sqrt, not +50 %.
    assert_eq!(
        step(&mut c, 10, &fast(10), full(150))
            .unwrap()
            .to
            .total_active_users,
        163
    );
}

#[test]
fn changes_are_at_least_min_interval_apart() {
    let settings = Settings {
        min_interval: Duration::from_secs(30),
        ..Default::default()
    };
    let mut c = Controller::new(settings, start(100), T0).unwrap();
    assert!(step(&mut c, 0, &fast(0), full(100)).is_some());
    assert_eq!(step(&mut c, 1, &fast(1), full(150)), None);
    assert_eq!(
        step(&mut c, 2, &window(2, &[(2_000, 500)], 0), full(150)),
        None
    );
    assert!(
        c.status().last_step.contains("less than min_interval 30s"),
        "{}",
        c.status().last_step
    );
    assert!(step(&mut c, 3, &fast(3), full(150)).is_some());
}

#[test]
fn a_window_begun_before_the_last_change_is_not_judged() {
    let mut c = controller(100);
    assert!(step(&mut c, 0, &fast(0), full(100)).is_some()); // at T0 + W
    // A window of 10 s that began at T0 + 5 s saw the old limits half of its time.
    let mut overlapping = window(0, &[(2_000, 500)], 0);
    overlapping.started_at += 5_000;
    overlapping.ended_at += 5_000;
    assert_eq!(c.step(T0 + 2 * W, &overlapping, full(150)), None);
    assert!(
        c.status().last_step.contains("not judged"),
        "{}",
        c.status().last_step
    );
    // A window begun before the controller started, likewise.
    let mut c = controller(100);
    let mut early = fast(0);
    early.started_at -= 1;
    assert_eq!(c.step(T0 + W, &early, full(100)), None);
}

#[test]
fn paused_it_changes_nothing_and_resumed_it_judges_windows_begun_after() {
    let mut c = controller(100);
    c.pause(T0 + 1);
    assert!(c.is_paused() && c.status().paused);
    for k in 0..5 {
        assert_eq!(
            step(&mut c, k, &window(k, &[(3_000, 500)], 0), full(100)),
            None
        );
    }
    assert_eq!(capacity(&c), 100);
    c.resume(T0 + 5 * W + 1);
    assert_eq!(step(&mut c, 5, &fast(5), full(100)), None); // began before the resume
    assert!(step(&mut c, 6, &fast(6), full(100)).is_some());
}

#[test]
fn an_operators_change_is_the_new_starting_point() {
    let mut c = controller(100);
    let d = step(&mut c, 0, &window(0, &[(2_000, 500)], 0), full(100)).unwrap();
    assert_eq!(d.to.total_active_users, 50);
    let new = Setpoint {
        total_active_users: 300,
        new_users_per_minute: 600,
        burst: 50,
    };
    let d = c.reset(T0 + W + 500, new).unwrap();
    assert_eq!((d.direction, d.to), (Direction::Set, new));
    assert!(
        c.status().reason.contains("operator"),
        "{}",
        c.status().reason
    );
    assert_eq!(c.status().phase, "slow_start");
    // The window under way when the operator changed the limits is not judged.
    assert_eq!(step(&mut c, 1, &fast(1), full(300)), None);
    // Slow start from the new point, in its ratios.
    let d = step(&mut c, 2, &fast(2), full(300)).unwrap();
    assert_eq!(
        d.to,
        Setpoint {
            total_active_users: 450,
            new_users_per_minute: 900,
            burst: 75
        }
    );
    // The same limits again: nothing moves.
    assert_eq!(c.reset(T0 + 4 * W, d.to), None);
}

#[test]
fn a_new_leader_goes_on_from_the_stored_limits_without_slow_start() {
    let stored = Setpoint {
        total_active_users: 150,
        new_users_per_minute: 1500,
        burst: 1500,
    };
    let mut c = Controller::restore(Settings::default(), start(100), stored, T0).unwrap();
    assert_eq!(c.setpoint(), stored);
    assert_eq!(c.status().phase, "steady");
    assert!(
        c.status().reason.contains("previous leader"),
        "{}",
        c.status().reason
    );
    // Healthy and full: +sqrt(150) = 13, not +75; in the room's ratio.
    let d = step(&mut c, 0, &fast(0), full(150)).unwrap();
    assert_eq!(
        (d.to.total_active_users, d.to.new_users_per_minute),
        (163, 1630)
    );
    // Stored limits outside the bounds come back inside them.
    let c = Controller::restore(Settings::default(), start(100), start(9000), T0).unwrap();
    assert_eq!(c.setpoint().total_active_users, 2000);
}

#[test]
fn new_bounds_clamp_the_capacity_at_once() {
    let mut c = controller(500);
    let tighter = Settings {
        max_active_users: 300,
        ..Default::default()
    };
    let d = c.reconfigure(T0 + 1, tighter.clone()).unwrap().unwrap();
    assert_eq!(
        (
            d.direction,
            d.to.total_active_users,
            d.to.new_users_per_minute
        ),
        (Direction::Set, 300, 3000)
    );
    assert_eq!(c.reconfigure(T0 + 2, tighter), Ok(None));
    let broken = Settings {
        min_requests: 0,
        ..Default::default()
    };
    assert!(c.reconfigure(T0 + 3, broken).is_err());
    assert_eq!(c.settings().max_active_users, 300);
}

#[test]
fn probing_the_same_knee_again_needs_ever_more_calm_windows() {
    let mut c = controller(100);
    let mut k = 0;
    let breach = |c: &mut Controller, k: &mut i64| {
        let room = full(capacity(c));
        let d = step(c, *k, &window(*k, &[(260, 1000)], 0), room).unwrap();
        assert_eq!(d.direction, Direction::Down);
        *k += 1;
    };
    // The first breach at 100 inside: down to 95; one calm window and it approaches again.
    breach(&mut c, &mut k);
    let mut calm_windows = Vec::new();
    for _ in 0..4 {
        let mut waited = 0;
        loop {
            let w = window(k, &[(150, 1000)], 0);
            let room = full(capacity(&c));
            let moved = step(&mut c, k, &w, room);
            k += 1;
            waited += 1;
            if let Some(d) = moved {
                assert_eq!(d.direction, Direction::Up);
                break;
            }
            assert!(
                c.status().last_step.contains("calm window"),
                "{}",
                c.status().last_step
            );
        }
        calm_windows.push(waited);
        // Up near the knee again; it breaches at about the same place.
        breach(&mut c, &mut k);
    }
    assert_eq!(calm_windows, vec![1, 2, 4, 8]);
    // Far below the band (p95 under half of 200 ms): the origin has room, the memory goes.
    let room = full(capacity(&c));
    assert!(step(&mut c, k, &fast(k), room).is_some());
}

#[test]
fn probing_past_a_sharp_knee_gets_rarer_too() {
    // An origin whose p95 jumps from 150 ms to 300 ms past 100 inside: sharper than one step.
    // After each breach the limit climbs back to where that breach put the knee and past it;
    // the probes past it wait as long as the approaches do, so the breaches spread out.
    let mut c = controller(100);
    let mut breaches = Vec::new();
    let mut limits = Vec::new();
    for k in 0..400 {
        let inside = capacity(&c);
        limits.push(inside);
        let w = if inside > 100 {
            window(k, &[(300, 1000)], 0)
        } else {
            window(k, &[(150, 1000)], 0)
        };
        if step(&mut c, k, &w, full(inside)).is_some_and(|d| d.direction == Direction::Down) {
            breaches.push(k);
        }
    }
    let gaps: Vec<i64> = breaches.windows(2).map(|b| b[1] - b[0]).collect();
    assert!(breaches.len() >= 4, "it keeps probing: {breaches:?}");
    assert!(
        gaps.windows(2).all(|g| g[1] >= g[0]),
        "gaps between probes never shrink: {gaps:?}"
    );
    assert!(
        gaps.last().is_some_and(|g| *g >= 32),
        "after a few probes at the same place, one in 32 windows or fewer: {gaps:?}"
    );
    let late = &limits[200..];
    let near = late.iter().filter(|l| (90..=100).contains(*l)).count();
    assert!(
        near * 10 >= late.len() * 9,
        "it rests just under the knee: {late:?}"
    );
}
