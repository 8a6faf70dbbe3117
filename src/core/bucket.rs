//! The token bucket that holds admissions to `new_users_per_minute`.
//!
//! Written by hand rather than taken from a rate-limiting crate on purpose: the Redis store runs
//! the same arithmetic inside its Lua scripts (`src/store/lua/common.lua`, `bucket`), and the
//! conformance suite holds both to one answer. A crate's bucket (GCRA, or another refill rule)
//! would let the memory and Redis stores admit differently.

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

    /// Takes `n` tokens the bucket may not have, owing at most `most`: what was spent elsewhere
    /// (another instance's share of one budget) is paid back before anything more is allowed.
    pub fn owe(&mut self, n: u64, most: u64) {
        self.tokens = (self.tokens - n as f64)
            .max(-(most as f64))
            .min(self.tokens);
    }

    /// How long until a whole token is there, at `per_minute` (0 when one is there now).
    pub fn ms_until_one(&self, per_minute: u64) -> Millis {
        ms_for(1.0 - self.tokens, per_minute)
    }

    /// How long until the bucket is full again: a bucket that is full is as good as a new one.
    pub fn ms_until_full(&self, per_minute: u64, burst: u64) -> Millis {
        ms_for(burst as f64 - self.tokens, per_minute)
    }
}

fn ms_for(missing: f64, per_minute: u64) -> Millis {
    if missing <= 0.0 || per_minute == 0 {
        return 0;
    }
    (missing * 60_000.0 / per_minute as f64).ceil() as Millis
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
    fn says_how_long_until_the_next_token_and_until_full() {
        let mut b = TokenBucket::full(3, 0);
        assert_eq!((b.ms_until_one(60), b.ms_until_full(60, 3)), (0, 0));
        b.take(3);
        assert_eq!((b.ms_until_one(60), b.ms_until_full(60, 3)), (1_000, 3_000));
        b.refill(250, 60, 3);
        assert_eq!((b.ms_until_one(60), b.ms_until_full(60, 3)), (750, 2_750));
    }

    #[test]
    fn a_debt_is_paid_back_before_a_token_is_there_and_is_bounded() {
        let mut b = TokenBucket::full(10, 0);
        b.owe(15, 100);
        assert_eq!((b.available(), b.ms_until_one(60)), (0, 6_000));
        b.owe(1_000, 20);
        assert_eq!(b.ms_until_one(60), 21_000, "owing at most 20");
        b.refill(21_000, 60, 10);
        assert_eq!(b.available(), 1);
        let mut deep = TokenBucket::full(1, 0);
        deep.take(50);
        deep.owe(1, 20);
        assert_eq!(
            deep.ms_until_one(60),
            50_000,
            "a bound never gives tokens back"
        );
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
