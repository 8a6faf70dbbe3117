//! Failed console sign-ins, rate-limited: each failure takes a token from its client address's
//! bucket and from one bucket for everyone; while either is empty, every sign-in from that
//! address (or from anyone) is answered 429, the right token too, so that guessing costs time
//! whatever the guess. The admin token has at least 32 bytes, so this is not what keeps it
//! secret: it keeps a guessing script from filling the log and the admin listener's one thread.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;

use crate::clock::{Millis, SharedClock};
use crate::core::bucket::TokenBucket;

/// One address may fail this many times at once, then once every 12 seconds: an operator who
/// mistypes is not locked out for long.
pub const PER_ADDRESS_BURST: u64 = 5;
const PER_ADDRESS_PER_MINUTE: u64 = 5;
/// Everyone together: a guesser spread over many addresses still gets one guess every 3 s.
const GLOBAL_BURST: u64 = 20;
const GLOBAL_PER_MINUTE: u64 = 20;
/// Addresses remembered at once; beyond this, those whose bucket has filled again (as good as
/// new) are forgotten first.
const MAX_ADDRESSES: usize = 10_000;

/// A sign-in refused for too many failures: try again in this many seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooManyFailures {
    pub retry_after_seconds: u64,
}

pub struct SignInLimit {
    clock: SharedClock,
    buckets: Mutex<Buckets>,
}

struct Buckets {
    everyone: TokenBucket,
    /// `None`: the admin listener accepted a connection without an IP address (a Unix socket).
    by_address: HashMap<Option<IpAddr>, TokenBucket>,
}

fn retry_after(ms: Millis) -> u64 {
    u64::try_from(ms).unwrap_or(0).div_ceil(1000).max(1)
}

impl SignInLimit {
    pub fn new(clock: SharedClock) -> Self {
        let now = clock.now_ms();
        Self {
            clock,
            buckets: Mutex::new(Buckets {
                everyone: TokenBucket::full(GLOBAL_BURST, now),
                by_address: HashMap::new(),
            }),
        }
    }

    fn buckets(&self) -> std::sync::MutexGuard<'_, Buckets> {
        self.buckets.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// May `address` try to sign in now?
    pub fn check(&self, address: Option<IpAddr>) -> Result<(), TooManyFailures> {
        let now = self.clock.now_ms();
        let mut buckets = self.buckets();
        buckets
            .everyone
            .refill(now, GLOBAL_PER_MINUTE, GLOBAL_BURST);
        let mut wait = buckets.everyone.ms_until_one(GLOBAL_PER_MINUTE);
        if let Some(bucket) = buckets.by_address.get_mut(&address) {
            bucket.refill(now, PER_ADDRESS_PER_MINUTE, PER_ADDRESS_BURST);
            wait = wait.max(bucket.ms_until_one(PER_ADDRESS_PER_MINUTE));
        }
        match wait {
            0 => Ok(()),
            ms => Err(TooManyFailures {
                retry_after_seconds: retry_after(ms),
            }),
        }
    }

    /// A wrong token from `address`: one token less for it and for everyone.
    pub fn failed(&self, address: Option<IpAddr>) {
        let now = self.clock.now_ms();
        let mut buckets = self.buckets();
        buckets
            .everyone
            .refill(now, GLOBAL_PER_MINUTE, GLOBAL_BURST);
        buckets.everyone.take(1);
        if buckets.by_address.len() >= MAX_ADDRESSES && !buckets.by_address.contains_key(&address) {
            buckets.by_address.retain(|_, bucket| {
                bucket.refill(now, PER_ADDRESS_PER_MINUTE, PER_ADDRESS_BURST);
                bucket.ms_until_full(PER_ADDRESS_PER_MINUTE, PER_ADDRESS_BURST) > 0
            });
        }
        let bucket = buckets
            .by_address
            .entry(address)
            .or_insert_with(|| TokenBucket::full(PER_ADDRESS_BURST, now));
        bucket.refill(now, PER_ADDRESS_PER_MINUTE, PER_ADDRESS_BURST);
        bucket.take(1);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;
    use crate::clock::ManualClock;

    fn address(last: u8) -> Option<IpAddr> {
        Some(IpAddr::from([192, 0, 2, last]))
    }

    fn limit() -> (Arc<ManualClock>, SignInLimit) {
        let clock = ManualClock::new(5_000_000);
        (clock.clone(), SignInLimit::new(clock))
    }

    #[test]
    fn an_address_is_held_after_its_burst_of_failures_then_let_try_again() {
        let (clock, limit) = limit();
        for _ in 0..PER_ADDRESS_BURST {
            assert_eq!(limit.check(address(1)), Ok(()));
            limit.failed(address(1));
        }
        assert_eq!(
            limit.check(address(1)),
            Err(TooManyFailures {
                retry_after_seconds: 12
            })
        );
        // Another address is not held for it.
        assert_eq!(limit.check(address(2)), Ok(()));
        clock.advance(Duration::from_millis(11_500));
        assert_eq!(
            limit.check(address(1)),
            Err(TooManyFailures {
                retry_after_seconds: 1
            })
        );
        clock.advance(Duration::from_secs(1));
        assert_eq!(limit.check(address(1)), Ok(()));
        // One more try, not a new burst.
        limit.failed(address(1));
        assert!(limit.check(address(1)).is_err());
    }

    #[test]
    fn failures_spread_over_many_addresses_hold_everyone() {
        let (clock, limit) = limit();
        for i in 0..GLOBAL_BURST {
            let from = address(u8::try_from(i).unwrap_or(0));
            assert_eq!(limit.check(from), Ok(()));
            limit.failed(from);
        }
        assert_eq!(
            limit.check(address(200)),
            Err(TooManyFailures {
                retry_after_seconds: 3
            })
        );
        clock.advance(Duration::from_secs(3));
        assert_eq!(limit.check(address(200)), Ok(()));
    }

    #[test]
    fn successes_cost_nothing() {
        let (_, limit) = limit();
        for _ in 0..100 {
            assert_eq!(limit.check(address(1)), Ok(()));
        }
    }

    #[test]
    fn the_table_of_addresses_stays_bounded() {
        let (clock, limit) = limit();
        for i in 0..MAX_ADDRESSES {
            let [.., a, b] = u32::try_from(i).unwrap_or(0).to_be_bytes();
            limit.failed(Some(IpAddr::from([10, 0, a, b])));
            // The global bucket would hold everyone long before: only the table is tested here.
            clock.advance(Duration::from_secs(3));
        }
        assert_eq!(limit.buckets().by_address.len(), MAX_ADDRESSES);
        limit.failed(address(1));
        // The early addresses' buckets had filled again and were forgotten.
        let remembered = limit.buckets().by_address.len();
        assert!(remembered < MAX_ADDRESSES, "{remembered}");
        assert!(limit.buckets().by_address.contains_key(&address(1)));
    }
}
