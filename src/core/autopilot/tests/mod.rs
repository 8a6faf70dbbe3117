//! The autopilot's tests: the helpers here, one file per part (measurement, settings, the
//! controller's rules, properties over random windows, the simulated shop).

use proptest::prelude::*;

use super::sim::{self, Scenario};
use super::*;
use std::time::Duration;

use crate::clock::Millis;

mod measurement;
mod properties;
mod rules;
mod settings;
mod shop;

// ---------------------------------------------------------------------------------------------
// Helpers: windows of 10 s from T0, filled with plain values.
// ---------------------------------------------------------------------------------------------

const T0: Millis = 1_700_000_000_000;
const W: Millis = 10_000;

fn start(capacity: u64) -> Setpoint {
    Setpoint {
        total_active_users: capacity,
        new_users_per_minute: capacity * 10,
        burst: capacity * 10,
    }
}

fn controller(capacity: u64) -> Controller {
    Controller::new(Settings::default(), start(capacity), T0).unwrap()
}

/// Window `k` (from T0 + k windows), with `(latency_ms, count)` responses and `errors` 503s at 20 ms.
fn window(k: i64, responses: &[(u64, u64)], errors: u64) -> Signal {
    let mut s = Signal::new(T0 + k * W);
    s.ended_at = s.started_at + W;
    for (ms, count) in responses {
        for _ in 0..*count {
            s.record(Exchange::Response {
                status: 200,
                latency: Duration::from_millis(*ms),
            });
        }
    }
    for _ in 0..errors {
        s.record(Exchange::Response {
            status: 503,
            latency: Duration::from_millis(20),
        });
    }
    s
}

fn fast(k: i64) -> Signal {
    window(k, &[(50, 1000)], 0)
}

fn full(occupancy: u64) -> RoomObservation {
    RoomObservation {
        occupancy,
        peak: occupancy,
        waiting: 500,
    }
}

/// Steps at the end of window `k`.
fn step(c: &mut Controller, k: i64, w: &Signal, room: RoomObservation) -> Option<LimitChange> {
    c.step(T0 + (k + 1) * W, w, room)
}

fn capacity(c: &Controller) -> u64 {
    c.setpoint().total_active_users
}
