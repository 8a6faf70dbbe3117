//! How fast a request body arrives. `listen.body_timeout` cuts a body that goes silent; this cuts
//! one that never goes silent long enough to be cut but arrives so slowly that it holds a
//! connection (and an origin connection, when forwarded) for minutes: a byte every few seconds.
//!
//! The rule: once the body has taken longer than its grace (`listen.body_timeout`), it must have
//! averaged at least `listen.min_body_rate` bytes a second since its head. The average is over
//! the whole body, not a sliding window, so an honest upload on a poor mobile link that stalls
//! and then bursts keeps its credit; and a body that ends within its grace is never judged, so
//! small forms sent slowly are never cut.

use std::num::NonZeroU64;
use std::time::Duration;

/// `listen.min_body_rate` and the grace before it applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PaceRule {
    pub min_bytes_per_second: NonZeroU64,
    pub grace: Duration,
}

/// One request body's progress.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BodyPace {
    rule: PaceRule,
    received: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pace {
    Keeping,
    /// Slower than the rule since the head: the connection is to be closed.
    TooSlow,
}

impl BodyPace {
    pub fn new(rule: PaceRule) -> Self {
        Self { rule, received: 0 }
    }

    /// Notes `bytes` more of the body, `elapsed` after its head was read.
    pub fn note(&mut self, bytes: usize, elapsed: Duration) -> Pace {
        self.received = self.received.saturating_add(bytes as u64);
        if elapsed <= self.rule.grace {
            return Pace::Keeping;
        }
        // Whole milliseconds, multiplied before dividing: exact for any rate a config can hold.
        let owed = u128::from(self.rule.min_bytes_per_second.get()) * elapsed.as_millis() / 1000;
        if u128::from(self.received) >= owed {
            Pace::Keeping
        } else {
            Pace::TooSlow
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pace() -> BodyPace {
        BodyPace::new(PaceRule {
            min_bytes_per_second: NonZeroU64::new(500).unwrap(),
            grace: Duration::from_secs(10),
        })
    }

    fn secs(s: f64) -> Duration {
        Duration::from_secs_f64(s)
    }

    #[test]
    fn a_body_within_its_grace_is_never_judged() {
        let mut body = pace();
        assert_eq!(body.note(1, secs(0.1)), Pace::Keeping);
        assert_eq!(body.note(1, secs(9.9)), Pace::Keeping);
        assert_eq!(body.note(1, secs(10.0)), Pace::Keeping);
    }

    #[test]
    fn a_trickle_is_cut_at_its_first_piece_past_the_grace() {
        let mut body = pace();
        let mut at = 0.0;
        let mut verdict = Pace::Keeping;
        while verdict == Pace::Keeping {
            at += 1.5;
            verdict = body.note(2, secs(at));
        }
        assert_eq!(at, 10.5, "the first piece past 10 s");
    }

    #[test]
    fn a_stall_then_a_burst_keeps_its_credit() {
        let mut body = pace();
        assert_eq!(body.note(100, secs(1.0)), Pace::Keeping);
        // Silent for 8 s (under body_timeout), then the rest at once: 20 KB by 11 s.
        assert_eq!(body.note(20_000, secs(11.0)), Pace::Keeping);
        // Averaging 500 B/s exactly is enough.
        let mut exact = pace();
        assert_eq!(exact.note(6_000, secs(12.0)), Pace::Keeping);
        assert_eq!(exact.note(0, secs(12.002)), Pace::TooSlow);
    }

    #[test]
    fn a_steady_upload_at_the_rate_is_never_cut() {
        let mut body = pace();
        for tenth in 1..=600 {
            assert_eq!(body.note(50, secs(f64::from(tenth) / 10.0)), Pace::Keeping);
        }
    }
}
