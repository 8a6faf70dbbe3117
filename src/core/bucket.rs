//! The token bucket that holds admissions to `new_users_per_minute`.

use crate::clock::Millis;

#[derive(Debug, Clone, PartialEq)]
pub struct TokenBucket {
    tokens: f64,
    refilled_at: Millis,
}

impl TokenBucket {
    /// A bucket starts full: the first minute of a drop may use its whole burst.
    pub fn full(burst: u64, now: Millis) -> Self {
        Self {
            tokens: burst as f64,
            refilled_at: now,
        }
    }

    pub fn refill(&mut self, now: Millis, per_minute: u64, burst: u64) {
        let elapsed = (now - self.refilled_at).max(0) as f64;
        self.tokens = (self.tokens + elapsed * per_minute as f64 / 60_000.0).min(burst as f64);
        self.refilled_at = self.refilled_at.max(now);
    }

    /// Whole tokens available now.
    pub fn available(&self) -> u64 {
        self.tokens.max(0.0).floor() as u64
    }

    pub fn take(&mut self, n: u64) {
        self.tokens -= n as f64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refills_at_the_configured_rate_up_to_the_burst() {
        let mut b = TokenBucket::full(10, 0);
        b.take(10);
        assert_eq!(b.available(), 0);
        b.refill(6_000, 60, 10); // one token a second
        assert_eq!(b.available(), 6);
        b.refill(600_000, 60, 10);
        assert_eq!(b.available(), 10);
    }

    #[test]
    fn a_lower_burst_caps_what_was_saved() {
        let mut b = TokenBucket::full(100, 0);
        b.refill(1, 60, 5);
        assert_eq!(b.available(), 5);
    }

    #[test]
    fn time_going_backwards_does_not_mint_tokens() {
        let mut b = TokenBucket::full(1, 10_000);
        b.take(1);
        b.refill(5_000, 60, 1);
        b.refill(10_500, 60, 1);
        assert_eq!(b.available(), 0);
    }
}
