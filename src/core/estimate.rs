//! Wait estimates from the admission rate actually observed, not the configured one: when the
//! capacity binds, admissions run slower than `new_users_per_minute`, and the estimate must say so.

use std::collections::VecDeque;

use crate::clock::Millis;

const WINDOW_MS: Millis = 60_000;
/// Below this span of samples the rate is not known yet.
const MIN_SPAN_MS: Millis = 3_000;
/// Weight of the newest window rate in the smoothed rate.
const SMOOTHING: f64 = 0.3;

#[derive(Debug, Default)]
pub struct RateEstimator {
    samples: VecDeque<(Millis, u64)>,
    smoothed_per_sec: Option<f64>,
}

impl RateEstimator {
    /// Feeds the room's running total of admissions (sampled by the admission loop).
    pub fn observe(&mut self, now: Millis, admitted_total: u64) {
        if let Some((_, last_total)) = self.samples.back()
            && admitted_total < *last_total
        {
            // The store lost its counters: start over rather than report a negative rate.
            self.samples.clear();
            self.smoothed_per_sec = None;
        }
        self.samples.push_back((now, admitted_total));
        while self
            .samples
            .front()
            .is_some_and(|(t, _)| *t < now - WINDOW_MS)
        {
            self.samples.pop_front();
        }
        let (Some((t0, n0)), Some((t1, n1))) = (self.samples.front(), self.samples.back()) else {
            return;
        };
        let span = t1 - t0;
        if span < MIN_SPAN_MS {
            return;
        }
        let window_rate = (n1 - n0) as f64 * 1000.0 / span as f64;
        self.smoothed_per_sec = Some(match self.smoothed_per_sec {
            Some(previous) => previous + SMOOTHING * (window_rate - previous),
            None => window_rate,
        });
    }

    /// Admissions per second, or None while unknown or zero (no honest estimate exists then).
    pub fn per_second(&self) -> Option<f64> {
        self.smoothed_per_sec.filter(|r| *r > 1e-9)
    }
}

/// What a waiting visitor is told about its wait.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum WaitEstimate {
    Unknown,
    /// FIFO: the visitor's own wait.
    Exact {
        seconds: u64,
    },
    /// Random: each admission picks uniformly among `queued` visitors, so a visitor's wait is
    /// uniform between now and the time the whole line takes to drain.
    Spread {
        p25: u64,
        p50: u64,
        p75: u64,
    },
}

impl WaitEstimate {
    pub fn fifo(position: u64, rate: Option<f64>) -> Self {
        match rate {
            Some(r) => WaitEstimate::Exact {
                seconds: (position as f64 / r).ceil() as u64,
            },
            None => WaitEstimate::Unknown,
        }
    }

    pub fn random(queued: u64, rate: Option<f64>) -> Self {
        match rate {
            Some(r) => {
                let drain = queued as f64 / r;
                let at = |q: f64| (drain * q).ceil() as u64;
                WaitEstimate::Spread {
                    p25: at(0.25),
                    p50: at(0.5),
                    p75: at(0.75),
                }
            }
            None => WaitEstimate::Unknown,
        }
    }

    /// The visitor's expected wait in seconds, when known.
    pub fn seconds(&self) -> Option<u64> {
        match *self {
            WaitEstimate::Unknown => None,
            WaitEstimate::Exact { seconds } => Some(seconds),
            WaitEstimate::Spread { p50, .. } => Some(p50),
        }
    }
}

/// Whole minutes as Cloudflare reports them: rounded up, so "0 minutes" is never promised.
pub fn minutes_ceil(seconds: u64) -> u64 {
    seconds.div_ceil(60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_until_enough_has_been_seen() {
        let mut e = RateEstimator::default();
        e.observe(0, 0);
        e.observe(1_000, 10);
        assert_eq!(e.per_second(), None);
        e.observe(4_000, 40);
        assert_eq!(e.per_second(), Some(10.0));
    }

    #[test]
    fn follows_a_slowdown_smoothly() {
        let mut e = RateEstimator::default();
        let mut total = 0;
        for s in 0..=60 {
            e.observe(s * 1000, total);
            total += 10;
        }
        let fast = e.per_second().unwrap_or_default();
        assert!((fast - 10.0).abs() < 0.01, "{fast}");
        for s in 61..=70 {
            e.observe(s * 1000, total);
        }
        let slower = e.per_second().unwrap_or_default();
        assert!(slower < fast && slower > 0.0, "{slower}");
    }

    #[test]
    fn a_stalled_room_has_no_honest_estimate() {
        let mut e = RateEstimator::default();
        for s in 0..=70 {
            e.observe(s * 1000, 5);
        }
        assert_eq!(e.per_second(), None);
        assert_eq!(
            WaitEstimate::fifo(10, e.per_second()),
            WaitEstimate::Unknown
        );
    }

    #[test]
    fn counters_going_backwards_reset_the_estimate() {
        let mut e = RateEstimator::default();
        e.observe(0, 100);
        e.observe(5_000, 150);
        assert!(e.per_second().is_some());
        e.observe(6_000, 3);
        assert_eq!(e.per_second(), None);
    }

    #[test]
    fn fifo_and_random_estimates() {
        assert_eq!(
            WaitEstimate::fifo(30, Some(0.5)),
            WaitEstimate::Exact { seconds: 60 }
        );
        assert_eq!(
            WaitEstimate::random(100, Some(1.0)),
            WaitEstimate::Spread {
                p25: 25,
                p50: 50,
                p75: 75
            }
        );
        assert_eq!(minutes_ceil(61), 2);
        assert_eq!(minutes_ceil(0), 0);
    }
}
