//! The per-address limit on new tickets: a token bucket per client address, and a cap on the
//! tickets an address holds in line at once. It stops one address from farming places; it does
//! not touch visitors who already hold a ticket or a pass, nor those let in at once while the
//! room has space. The memory store keeps an `IpLedger`; the Redis store runs the same rules in
//! lua/claim_ticket.lua, and both pass the conformance suite.

use std::collections::HashMap;

use crate::clock::Millis;
use crate::core::bucket::TokenBucket;

/// `[rate_limit]`: 0 turns each limit off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpLimits {
    /// New tickets an address may take per minute.
    pub per_minute: u64,
    /// New tickets an address may take at once after a quiet spell.
    pub burst: u64,
    /// Tickets an address may hold in line at once.
    pub max_live: u64,
    /// IPv6 clients are counted by their network of this many leading bits
    /// ([`MIN_IPV6_PREFIX`]..=[`MAX_IPV6_PREFIX`], 56 by default). One subscriber picks its
    /// addresses freely in the network its provider delegates, so counting single addresses
    /// would limit nobody. /56 is the delegation usual for one home subscriber. Longer is
    /// looser: at /64 (one LAN) the holder of a /48 gets 65 536 budgets. Shorter is stricter:
    /// at /48, some mobile carriers, which hand each phone a /64 out of a shared block, put
    /// many subscribers in one budget.
    pub ipv6_prefix: u8,
}

/// The shortest `ipv6_prefix`: a /32 is a whole provider's allocation.
pub const MIN_IPV6_PREFIX: u8 = 32;
/// The longest `ipv6_prefix`: one address.
pub const MAX_IPV6_PREFIX: u8 = 128;

impl IpLimits {
    pub fn is_off(&self) -> bool {
        self.per_minute == 0 && self.max_live == 0
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IpClaim {
    Allowed,
    /// The address's bucket is empty; the next token comes in `retry_after_ms`.
    TooFast {
        retry_after_ms: Millis,
    },
    /// The address already holds `max_live` tickets in line; one frees when a visitor behind it
    /// is let in, gives up or leaves.
    TooManyLive,
}

/// A claimed ticket counts, even before it shows in the line, for this long: the claim comes
/// just before the join, and a concurrent claim of the same address must not drop a ticket
/// whose join is still on its way. Longer than a store call takes (`command_timeout`, 500 ms by
/// default).
pub const JOIN_GRACE_MS: Millis = 2_000;

/// An address at its cap has its tickets checked against the line at most this often: a flood
/// of refused requests then costs one look at `max_live` tickets a second, not one per request.
pub const RECHECK_EVERY_MS: Millis = 1_000;

/// An address holding tickets is remembered this long after its last request for one. Its
/// tickets may wait far longer, and forgetting them hands the address a fresh cap: an address
/// that keeps asking is never forgotten, one that falls silent for half an hour starts afresh.
/// Shorter would free that cap sooner; longer would keep finished addresses in the store.
pub const RETAIN_LIVE_MS: Millis = 30 * 60_000;

/// What is known of one address.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct IpRecord {
    /// Present while the rate is limited.
    bucket: Option<TokenBucket>,
    /// Tickets counted against the cap, with the time each was claimed.
    live: HashMap<String, Millis>,
    /// When `live` was last checked against the line.
    checked_at: Option<Millis>,
}

impl IpRecord {
    /// A new ticket for this address, if its limits allow; `waiting` says whether a ticket is
    /// still in line.
    pub fn claim(
        &mut self,
        ticket: &str,
        limits: &IpLimits,
        now: Millis,
        waiting: impl Fn(&str) -> bool,
    ) -> IpClaim {
        if limits.per_minute > 0 {
            let bucket = self
                .bucket
                .get_or_insert_with(|| TokenBucket::full(limits.burst, now));
            bucket.refill(now, limits.per_minute, limits.burst);
            if bucket.available() == 0 {
                return IpClaim::TooFast {
                    retry_after_ms: bucket.ms_until_one(limits.per_minute).max(1),
                };
            }
        }
        if limits.max_live > 0 {
            let due = self
                .checked_at
                .is_none_or(|at| now - at >= RECHECK_EVERY_MS);
            if self.live.len() as u64 >= limits.max_live && due {
                self.live
                    .retain(|id, claimed| now - *claimed < JOIN_GRACE_MS || waiting(id));
                self.checked_at = Some(now);
            }
            if self.live.len() as u64 >= limits.max_live {
                return IpClaim::TooManyLive;
            }
            self.live.insert(ticket.to_owned(), now);
        }
        if let Some(bucket) = self.bucket.as_mut() {
            bucket.take(1);
        }
        IpClaim::Allowed
    }

    /// How long after `now` this record still matters: until its bucket is full again, and while
    /// it holds tickets. Zero: forgetting it changes nothing.
    pub fn keep_for(&self, limits: &IpLimits) -> Millis {
        let refill = self
            .bucket
            .as_ref()
            .map_or(0, |b| b.ms_until_full(limits.per_minute, limits.burst));
        let live = if self.live.is_empty() {
            0
        } else {
            RETAIN_LIVE_MS
        };
        refill.max(live)
    }
}

/// Every address's record, each forgotten once it no longer matters, so idle addresses cost
/// nothing.
#[derive(Debug, Default)]
pub struct IpLedger {
    records: HashMap<String, (IpRecord, Millis)>,
    swept_at: Millis,
}

/// How often the ledger drops the records it no longer needs.
const SWEEP_EVERY_MS: Millis = 60_000;

impl IpLedger {
    pub fn claim(
        &mut self,
        ip: &str,
        ticket: &str,
        limits: &IpLimits,
        now: Millis,
        waiting: impl Fn(&str) -> bool,
    ) -> IpClaim {
        if now - self.swept_at >= SWEEP_EVERY_MS {
            self.records.retain(|_, (_, until)| *until > now);
            self.swept_at = now;
        }
        let (record, until) = self.records.entry(ip.to_owned()).or_default();
        if *until <= now {
            *record = IpRecord::default();
        }
        let claim = record.claim(ticket, limits, now, waiting);
        let keep = record.keep_for(limits);
        if keep > 0 {
            *until = now + keep;
        } else {
            self.records.remove(ip);
        }
        claim
    }

    /// Addresses remembered now.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RATE: IpLimits = IpLimits {
        per_minute: 60,
        burst: 3,
        max_live: 0,
        ipv6_prefix: 56,
    };
    const CAP: IpLimits = IpLimits {
        per_minute: 0,
        burst: 0,
        max_live: 2,
        ipv6_prefix: 56,
    };

    fn nobody_waits(_: &str) -> bool {
        false
    }

    #[test]
    fn the_burst_then_one_ticket_per_token() {
        let mut r = IpRecord::default();
        for i in 0..3 {
            assert_eq!(
                r.claim(&format!("t{i}"), &RATE, 0, nobody_waits),
                IpClaim::Allowed
            );
        }
        assert_eq!(
            r.claim("t3", &RATE, 0, nobody_waits),
            IpClaim::TooFast {
                retry_after_ms: 1_000
            }
        );
        assert_eq!(
            r.claim("t3", &RATE, 400, nobody_waits),
            IpClaim::TooFast {
                retry_after_ms: 600
            }
        );
        assert_eq!(r.claim("t3", &RATE, 1_000, nobody_waits), IpClaim::Allowed);
        assert!(matches!(
            r.claim("t4", &RATE, 1_000, nobody_waits),
            IpClaim::TooFast { .. }
        ));
    }

    #[test]
    fn a_flood_over_a_minute_gets_the_burst_plus_the_rate() {
        let mut r = IpRecord::default();
        let mut allowed = 0;
        // A request every 10 ms for a minute: 6 000 asks.
        for i in 0..6_000 {
            if r.claim(&format!("t{i}"), &RATE, i * 10, nobody_waits) == IpClaim::Allowed {
                allowed += 1;
            }
        }
        assert_eq!(allowed, 3 + 59);
    }

    #[test]
    fn the_cap_counts_tickets_in_line_and_frees_when_they_leave() {
        let line = std::cell::RefCell::new(vec!["a".to_owned(), "b".to_owned()]);
        let waiting = |id: &str| line.borrow().iter().any(|w| w == id);
        let mut r = IpRecord::default();
        assert_eq!(r.claim("a", &CAP, 0, waiting), IpClaim::Allowed);
        assert_eq!(r.claim("b", &CAP, 0, waiting), IpClaim::Allowed);
        assert_eq!(r.claim("c", &CAP, 5_000, waiting), IpClaim::TooManyLive);
        line.borrow_mut().retain(|id| id != "a");
        // Checked at 5 s: not again within a second.
        assert_eq!(r.claim("c", &CAP, 5_500, waiting), IpClaim::TooManyLive);
        assert_eq!(r.claim("c", &CAP, 6_000, waiting), IpClaim::Allowed);
        line.borrow_mut().push("c".to_owned());
        assert_eq!(r.claim("d", &CAP, 9_000, waiting), IpClaim::TooManyLive);
    }

    #[test]
    fn a_ticket_whose_join_is_on_its_way_counts() {
        let mut r = IpRecord::default();
        assert_eq!(r.claim("a", &CAP, 0, nobody_waits), IpClaim::Allowed);
        assert_eq!(r.claim("b", &CAP, 100, nobody_waits), IpClaim::Allowed);
        assert_eq!(
            r.claim("c", &CAP, 1_500, nobody_waits),
            IpClaim::TooManyLive
        );
        // Neither ever showed in the line: after the grace they stop counting.
        assert_eq!(r.claim("c", &CAP, 2_600, nobody_waits), IpClaim::Allowed);
    }

    #[test]
    fn a_refusal_for_the_cap_costs_no_token() {
        let both = IpLimits {
            per_minute: 60,
            burst: 2,
            max_live: 1,
            ipv6_prefix: 56,
        };
        let waiting = |id: &str| id == "a";
        let mut r = IpRecord::default();
        assert_eq!(r.claim("a", &both, 0, waiting), IpClaim::Allowed);
        assert_eq!(r.claim("b", &both, 0, waiting), IpClaim::TooManyLive);
        assert_eq!(r.claim("b", &both, 0, waiting), IpClaim::TooManyLive);
        assert_eq!(r.bucket.as_ref().map(TokenBucket::available), Some(1));
    }

    #[test]
    fn a_record_is_kept_while_it_matters() {
        let mut r = IpRecord::default();
        assert_eq!(r.keep_for(&RATE), 0);
        r.claim("a", &RATE, 0, nobody_waits);
        assert_eq!(r.keep_for(&RATE), 1_000, "until the bucket is full again");
        let mut c = IpRecord::default();
        c.claim("a", &CAP, 0, nobody_waits);
        assert_eq!(c.keep_for(&CAP), RETAIN_LIVE_MS, "while it holds tickets");
    }

    #[test]
    fn the_ledger_forgets_idle_addresses_and_keeps_them_apart() {
        let mut ledger = IpLedger::default();
        for i in 0..3 {
            ledger.claim("198.51.100.7", &format!("t{i}"), &RATE, 0, nobody_waits);
        }
        assert!(matches!(
            ledger.claim("198.51.100.7", "t3", &RATE, 0, nobody_waits),
            IpClaim::TooFast { .. }
        ));
        assert_eq!(
            ledger.claim("198.51.100.8", "u", &RATE, 0, nobody_waits),
            IpClaim::Allowed,
            "another address has its own bucket"
        );
        assert_eq!(ledger.len(), 2);
        // Both buckets are full again well before the next sweep, which forgets them.
        ledger.claim("203.0.113.1", "v", &RATE, SWEEP_EVERY_MS, nobody_waits);
        assert_eq!(ledger.len(), 1);
        // A record past its time starts afresh even before a sweep.
        let mut cap = IpLedger::default();
        cap.claim("a", "t1", &CAP, 0, |_| true);
        cap.claim("a", "t2", &CAP, 0, |_| true);
        assert_eq!(
            cap.claim("a", "t3", &CAP, 10, |_| true),
            IpClaim::TooManyLive
        );
        assert_eq!(
            cap.claim("a", "t3", &CAP, 10 + RETAIN_LIVE_MS, |_| true),
            IpClaim::Allowed
        );
    }
}
