//! The rules of one step, in the order the module's documentation gives them: hold, breach,
//! grow, or hold in the band.

use std::time::Duration;

use super::controller::{Controller, Direction, Growth, Verdict};
use super::measurement::{RoomObservation, Signal};
use crate::clock::{Millis, millis};

/// A decrease goes to between half (one window cannot empty the room, whatever it measured) and
/// 95 % (a breach always moves the limit) of the window's occupancy.
const CUT_DEEPEST: f64 = 0.5;
const CUT_SHALLOWEST: f64 = 0.95;
/// A window in which the room was still above the limit cuts it by about a third at most.
const DRAINING_CUT_DEEPEST: f64 = 0.65;
/// A window whose p95 is more than this many times the target (and the room not draining)
/// halves the occupancy.
const SEVERE_BREACH: f64 = 2.0;
/// A probe past the knee the last breach showed: 2 % of the capacity, one visitor at least. Five
/// probes without a breach take the room 10 % past it, where the breach is forgotten.
const PROBE_STEP: f64 = 0.02;
/// "At the limit": the room's peak occupancy in the window within 5 % of the capacity.
const SATURATED_PERCENT: u64 = 95;

impl Controller {
    pub(super) fn judge(&mut self, window: &Signal, room: RoomObservation) -> Verdict {
        let s = self.settings.clone();
        if self.paused {
            return Verdict::Hold("paused".into());
        }
        if window.started_at < self.judge_from {
            return Verdict::Hold(format!(
                "window {}..{} began before the last change or restart ({}): not judged",
                window.started_at, window.ended_at, self.judge_from
            ));
        }
        if window.requests < s.min_requests {
            return Verdict::Hold(format!(
                "{} origin requests in the window, fewer than {}: not enough to judge, limits stay",
                window.requests, s.min_requests
            ));
        }
        if let Some(last) = self.last_change_at {
            // Measured between judged windows, not ticks: a leader's tick lands up to a tick
            // later than the last one after a window's end, and the next window after a change
            // must not be refused for that.
            let since = window.ended_at - last;
            if since < millis(s.min_interval) {
                return Verdict::Hold(format!(
                    "last change {} ago, less than min_interval {}",
                    ms(since),
                    ms(millis(s.min_interval))
                ));
            }
        }
        let capacity = self.current.total_active_users;
        // A p95 from fewer latencies than min_requests (most exchanges failed) is not read.
        let p95 = window
            .p95()
            .filter(|_| window.latency.count() >= s.min_requests);
        let errors = window.error_rate().unwrap_or(0.0);
        let target_us = s.latency_target.as_micros() as f64;
        let in_flight = window.in_flight();
        let reading = format!(
            "p95 {} (target {}), errors {:.1} % of {} (max {:.1} %), {:.1} in flight at the origin, {} inside of {}, {} waiting",
            p95.map_or_else(|| "unknown".to_string(), ms_f),
            ms_f(s.latency_target),
            errors * 100.0,
            window.requests,
            s.error_rate_max * 100.0,
            in_flight,
            room.occupancy,
            capacity,
            room.waiting
        );

        // Breach: down to the occupancy the measurement says the origin can take.
        let occupancy = room.occupancy as f64;
        // The occupancy at which p95 would have been `aim`: of the requests in flight, the share
        // beyond what that p95 allows are queued, one visitor each (Vegas's queue estimate,
        // measured against the target instead of a no-load latency).
        let without_queue = |aim_us: f64| {
            let p95_us = p95.map_or(0.0, |p| p.as_micros() as f64);
            let latency =
                (p95_us > target_us).then(|| occupancy - in_flight * (1.0 - aim_us / p95_us));
            let errors = (errors > s.error_rate_max).then(|| occupancy * s.error_rate_max / errors);
            latency.into_iter().chain(errors).reduce(f64::min)
        };
        // Aim at the middle of the band, so that the next window neither breaches nor grows.
        if let Some(wanted) = without_queue(target_us * (1.0 - s.hysteresis / 2.0)) {
            self.phase = Growth::Steady;
            self.calm = 0;
            self.in_band = 0;
            let knee = without_queue(target_us)
                .unwrap_or(occupancy)
                .clamp(0.0, occupancy) as u64;
            let same_place = self
                .ceiling
                .is_some_and(|b| knee * 10 >= b * 9 && knee * 10 <= b * 11);
            self.breaches_here = if same_place {
                self.breaches_here.saturating_add(1)
            } else {
                1
            };
            self.ceiling = Some(knee);
            let mut wanted = wanted.clamp(occupancy * CUT_DEEPEST, occupancy * CUT_SHALLOWEST);
            let draining = room.peak > capacity;
            let severe = p95.is_some_and(|p| p.as_micros() as f64 > SEVERE_BREACH * target_us);
            let how = if draining {
                // Still draining after the last cut: the window's p95 is the load before the
                // cut's, its mean occupancy partly the load after it, and together they ask for
                // too deep a cut. About a third off the limit at most; the next window at the
                // limit reads true (NewReno cuts once per window of data in flight, in spirit).
                wanted = wanted.max(capacity as f64 * DRAINING_CUT_DEEPEST);
                format!(
                    "; the room was still above the limit (up to {} inside): a third off at most",
                    room.peak
                )
            } else if severe {
                // The origin itself changed (a slower deploy, a cold cache): the window mixes
                // the load before the change with the latency after it, its mean in-flight
                // count reads too little of the queue, and the estimate cuts too little. Half
                // the occupancy, as TCP halves on a loss; the windows after it refine.
                wanted = occupancy * CUT_DEEPEST;
                format!("; p95 over {SEVERE_BREACH} times the target: half the occupancy")
            } else {
                String::new()
            };
            let proposed = s.clamp(wanted.floor() as u64);
            if proposed < capacity {
                return Verdict::Change {
                    direction: Direction::Down,
                    capacity: proposed,
                    reason: format!("breach: {reading}{how} -> {proposed}"),
                };
            }
            return Verdict::Hold(if capacity <= s.min_active_users {
                format!("breach: {reading}; already at min_active_users")
            } else {
                format!(
                    "breach: {reading}; {proposed} would not be lower: the last decrease is still taking effect as visitors leave"
                )
            });
        }

        // Healthy enough to grow?
        let room_to_grow = 1.0 - s.hysteresis;
        let latency_low = p95.is_some_and(|p| p.as_micros() as f64 <= target_us * room_to_grow);
        let errors_low = errors <= s.error_rate_max * room_to_grow;
        if !(latency_low && errors_low) {
            self.calm = 0;
            self.in_band = self.in_band.saturating_add(1);
            if self.in_band >= 2 {
                self.phase = Growth::Steady;
            }
            return Verdict::Hold(format!(
                "{reading}: within the hysteresis band (grows only below {:.0} % of the limits)",
                room_to_grow * 100.0
            ));
        }
        self.in_band = 0;
        // The peak, not the mean: a window after a raise ran its first tick or two (the leader's
        // grace) under the old limit, and its mean stays below the new one however fast the
        // room filled it.
        let saturated = room.waiting > 0 && room.peak * 100 >= capacity * SATURATED_PERCENT;
        if !saturated {
            self.calm = 0;
            return Verdict::Hold(format!(
                "healthy, {reading}: the room was not full with people waiting all window, a limit traffic did not reach is not raised"
            ));
        }
        if capacity >= s.max_active_users {
            return Verdict::Hold(format!("healthy, {reading}: at max_active_users"));
        }
        self.calm = self.calm.saturating_add(1);
        // How far below the band: 1 at half its floor or lower, 0 at the floor. Latency is flat
        // until the knee, then climbs: the closer to the band, the smaller the steps (as Vegas
        // grows fast with no queue and by little with a short one).
        let band_floor_us = target_us * room_to_grow;
        let p95_us = p95.map_or(band_floor_us, |p| p.as_micros() as f64);
        let headroom = (2.0 * (1.0 - p95_us / band_floor_us)).clamp(0.0, 1.0);
        if headroom >= 1.0 {
            // Far below the band: whatever breached before, the origin has room now.
            self.forget_breach();
        }
        let (step, how) = match (self.phase, self.ceiling) {
            (Growth::SlowStart, _) => (
                (capacity.div_ceil(2) as f64 * headroom).ceil() as u64,
                "slow start, +50 %, less as p95 nears the band",
            ),
            (Growth::Steady, Some(breach)) => {
                // Towards the knee the last breach showed, then past it by small probes
                // (CUBIC's plateau around its last loss); both wait longer each time the knee
                // breaches at the same place. A knee sharper than a square-root step (a few
                // visitors from the band's floor to the target) was otherwise probed every few
                // windows, each probe a window over the target.
                let towards = capacity < breach;
                let what = if towards {
                    "approaching"
                } else {
                    "probing past"
                };
                if self.calm < self.patience() {
                    return Verdict::Hold(format!(
                        "healthy and full, {reading}: calm window {} of {} before {what} the knee the last breach showed ({breach})",
                        self.calm,
                        self.patience()
                    ));
                }
                if towards {
                    (
                        ((breach - capacity) / 2).max(1),
                        "half way to the knee the last breach showed",
                    )
                } else {
                    (
                        (capacity as f64 * PROBE_STEP).ceil() as u64,
                        "probing past the knee the last breach showed, +2 %",
                    )
                }
            }
            (Growth::Steady, None) => (
                (isqrt_ceil(capacity) as f64 * headroom).ceil() as u64,
                "+sqrt(capacity), less as p95 nears the band",
            ),
        };
        // Never more than +50 % at once, even where a square root is more (tiny rooms).
        let proposed = s.clamp(capacity + step.clamp(1, capacity.div_ceil(2)));
        if self.ceiling.is_some_and(|b| proposed * 10 > b * 11) {
            // Healthy and full beyond where a breach would count as the same knee: the last
            // breach no longer describes the origin.
            self.forget_breach();
        }
        Verdict::Change {
            direction: Direction::Up,
            capacity: proposed,
            reason: format!("healthy and full: {reading}; {how} -> {proposed}"),
        }
    }
}

fn isqrt_ceil(n: u64) -> u64 {
    let r = n.isqrt();
    if r * r < n { r + 1 } else { r }
}

fn ms(v: Millis) -> String {
    if v % 1000 == 0 {
        format!("{}s", v / 1000)
    } else {
        format!("{v}ms")
    }
}

fn ms_f(d: Duration) -> String {
    let us = d.as_micros();
    if us >= 10_000 {
        format!("{} ms", us / 1000)
    } else {
        format!("{:.1} ms", us as f64 / 1000.0)
    }
}
