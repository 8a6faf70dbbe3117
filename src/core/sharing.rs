//! One pass, one person: what a pass is used from and how fast. A pass shared with a farm is
//! seen from many networks (each clone has its own address) or asks for more pages than a person
//! can (many clones behind one address). Two ledgers, both pure:
//!
//! - [`NetworkLedger`], the store's: the client networks each pass was seen from within the last
//!   session, shared by every instance (the memory store keeps one; the Redis store runs the same
//!   rule in lua/note_network.lua), so a pass cloned to four networks is caught whichever
//!   instances its clones reach.
//! - [`PassUse`], each instance's own: the networks it already reported for a pass (a pass holder
//!   costs a store call only the first time this instance sees it from a network, not on every
//!   request) and the pass's request budget, held locally for the same reason.

use std::collections::HashMap;

use crate::clock::Millis;
use crate::core::bucket::TokenBucket;

/// `[pass]` limits on how a pass is used; 0 turns each off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PassLimits {
    /// Client networks a pass may be seen from within one session; beyond, it is revoked.
    pub max_networks: u64,
    /// Requests to protected paths per pass and minute (a minute's worth may come at once).
    pub max_requests_per_minute: u64,
}

impl PassLimits {
    pub const OFF: PassLimits = PassLimits {
        max_networks: 0,
        max_requests_per_minute: 0,
    };
}

/// The networks one pass was seen from, each with when it was last reported.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NetworkRecord {
    seen: HashMap<String, Millis>,
}

impl NetworkRecord {
    /// Notes `network` now and answers how many networks were seen within `window_ms`.
    pub fn note(&mut self, network: &str, window_ms: Millis, now: Millis) -> u64 {
        self.seen.retain(|_, at| now - *at < window_ms);
        self.seen.insert(network.to_owned(), now);
        self.seen.len() as u64
    }

    /// The last report is older than the window: nothing left to remember.
    pub fn is_stale(&self, window_ms: Millis, now: Millis) -> bool {
        self.seen.values().all(|at| now - *at >= window_ms)
    }
}

/// The store's side, for the memory store: every pass's networks within the last session.
#[derive(Debug, Default)]
pub struct NetworkLedger {
    passes: HashMap<String, NetworkRecord>,
    noted_since_sweep: usize,
}

/// Stale records are swept after this many notes, so the ledger stays as large as the passes
/// that are really in use.
const SWEEP_EVERY: usize = 1024;

impl NetworkLedger {
    pub fn note(&mut self, pass: &str, network: &str, window_ms: Millis, now: Millis) -> u64 {
        self.noted_since_sweep += 1;
        if self.noted_since_sweep >= SWEEP_EVERY {
            self.noted_since_sweep = 0;
            self.passes.retain(|_, r| !r.is_stale(window_ms, now));
        }
        self.passes
            .entry(pass.to_owned())
            .or_default()
            .note(network, window_ms, now)
    }

    pub fn len(&self) -> usize {
        self.passes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.passes.is_empty()
    }
}

/// What this instance knows of one pass's use.
#[derive(Debug, Clone)]
struct Usage {
    /// The networks reported to the store, and when.
    reported: Vec<(Box<str>, Millis)>,
    bucket: Option<TokenBucket>,
    last_seen: Millis,
}

/// The verdict on one request of a pass holder, before it goes to the origin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UseVerdict {
    /// Within its limits, and nothing new to tell the store.
    Fine,
    /// Within its rate, from a network this instance has not reported for this pass lately: the
    /// store must count it.
    Report,
    /// Over its request budget: the next request is allowed in `retry_after_ms`.
    TooFast { retry_after_ms: Millis },
}

/// Each instance's ledger of pass use. Bounded: passes not seen for a session are forgotten,
/// and beyond `max_entries` the ledger starts over (a pass then reports its network again).
#[derive(Debug)]
pub struct PassUse {
    usage: HashMap<String, Usage>,
    max_entries: usize,
    swept_at: Millis,
}

impl PassUse {
    pub fn new(max_entries: usize) -> Self {
        Self {
            usage: HashMap::new(),
            max_entries,
            swept_at: 0,
        }
    }

    /// One request of `pass` from `network` (None: the client's address is unknown). A network
    /// is reported again after half a session, so the store's window, a session long, never
    /// forgets a network that is still in use.
    pub fn request(
        &mut self,
        pass: &str,
        network: Option<&str>,
        limits: PassLimits,
        session_ms: Millis,
        now: Millis,
    ) -> UseVerdict {
        self.sweep(session_ms, now);
        let usage = match self.usage.get_mut(pass) {
            Some(usage) => usage,
            None => {
                if self.usage.len() >= self.max_entries {
                    self.usage.clear();
                }
                self.usage.entry(pass.to_owned()).or_insert(Usage {
                    reported: Vec::new(),
                    bucket: None,
                    last_seen: now,
                })
            }
        };
        usage.last_seen = now;
        let per_minute = limits.max_requests_per_minute;
        if per_minute > 0 {
            let bucket = usage
                .bucket
                .get_or_insert_with(|| TokenBucket::full(per_minute, now));
            bucket.refill(now, per_minute, per_minute);
            if bucket.available() == 0 {
                return UseVerdict::TooFast {
                    retry_after_ms: bucket.ms_until_one(per_minute).max(1),
                };
            }
            bucket.take(1);
        }
        let Some(network) = network.filter(|_| limits.max_networks > 0) else {
            return UseVerdict::Fine;
        };
        let refresh_after = session_ms / 2;
        match usage.reported.iter_mut().find(|(n, _)| **n == *network) {
            Some((_, at)) if now - *at < refresh_after => UseVerdict::Fine,
            Some((_, at)) => {
                *at = now;
                UseVerdict::Report
            }
            None => {
                usage.reported.push((network.into(), now));
                UseVerdict::Report
            }
        }
    }

    /// Forgets what it reported of `network` for `pass`: the report did not reach the store,
    /// so the next request tries again.
    pub fn unreported(&mut self, pass: &str, network: &str) {
        if let Some(usage) = self.usage.get_mut(pass) {
            usage.reported.retain(|(n, _)| **n != *network);
        }
    }

    /// Passes not seen for a session are forgotten, at most once a second.
    fn sweep(&mut self, session_ms: Millis, now: Millis) {
        if now - self.swept_at < 1_000 {
            return;
        }
        self.swept_at = now;
        self.usage.retain(|_, u| now - u.last_seen < session_ms);
    }

    pub fn len(&self) -> usize {
        self.usage.len()
    }

    pub fn is_empty(&self) -> bool {
        self.usage.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SESSION: Millis = 600_000;

    fn limits(max_networks: u64, max_requests_per_minute: u64) -> PassLimits {
        PassLimits {
            max_networks,
            max_requests_per_minute,
        }
    }

    #[test]
    fn the_store_counts_networks_within_one_session() {
        let mut ledger = NetworkLedger::default();
        assert_eq!(ledger.note("p", "10.0.0.0/24", SESSION, 0), 1);
        assert_eq!(
            ledger.note("p", "10.0.0.0/24", SESSION, 10),
            1,
            "same network"
        );
        assert_eq!(ledger.note("p", "10.0.1.0/24", SESSION, 20), 2);
        assert_eq!(ledger.note("q", "10.0.1.0/24", SESSION, 20), 1, "per pass");
        assert_eq!(
            ledger.note("p", "10.0.2.0/24", SESSION, SESSION + 15),
            2,
            "the first network was last seen over a session ago"
        );
    }

    #[test]
    fn the_store_forgets_passes_nobody_uses() {
        let mut ledger = NetworkLedger::default();
        for i in 0..SWEEP_EVERY - 1 {
            ledger.note(&format!("p{i}"), "n", SESSION, 0);
        }
        ledger.note("late", "n", SESSION, SESSION * 2);
        assert_eq!(ledger.len(), 1);
    }

    #[test]
    fn a_network_is_reported_once_per_half_session() {
        let mut use_ = PassUse::new(100);
        let l = limits(3, 0);
        assert_eq!(
            use_.request("p", Some("a"), l, SESSION, 0),
            UseVerdict::Report
        );
        assert_eq!(
            use_.request("p", Some("a"), l, SESSION, 1),
            UseVerdict::Fine
        );
        assert_eq!(
            use_.request("p", Some("b"), l, SESSION, 2),
            UseVerdict::Report
        );
        assert_eq!(
            use_.request("p", Some("a"), l, SESSION, 3),
            UseVerdict::Fine
        );
        assert_eq!(
            use_.request("p", Some("a"), l, SESSION, SESSION / 2),
            UseVerdict::Report,
            "again before the store's window forgets it"
        );
        use_.unreported("p", "b");
        assert_eq!(
            use_.request("p", Some("b"), l, SESSION, SESSION / 2),
            UseVerdict::Report,
            "a report that failed is tried again"
        );
        assert_eq!(use_.request("p", None, l, SESSION, 5), UseVerdict::Fine);
        assert_eq!(
            use_.request("q", Some("a"), limits(0, 0), SESSION, 5),
            UseVerdict::Fine,
            "off"
        );
    }

    #[test]
    fn a_pass_is_held_to_its_rate() {
        let mut use_ = PassUse::new(100);
        let l = limits(0, 60);
        for i in 0..60 {
            assert_eq!(use_.request("p", None, l, SESSION, i), UseVerdict::Fine);
        }
        let UseVerdict::TooFast { retry_after_ms } = use_.request("p", None, l, SESSION, 60) else {
            panic!("the 61st request in a second is over the budget");
        };
        assert!((900..=1_000).contains(&retry_after_ms), "{retry_after_ms}");
        assert_eq!(
            use_.request("other", None, l, SESSION, 60),
            UseVerdict::Fine,
            "each pass has its own budget"
        );
        assert_eq!(use_.request("p", None, l, SESSION, 1_100), UseVerdict::Fine);
    }

    #[test]
    fn the_ledger_is_bounded() {
        let mut use_ = PassUse::new(10);
        for i in 0..25 {
            use_.request(&format!("p{i}"), Some("a"), limits(3, 0), SESSION, 0);
        }
        assert!(use_.len() <= 10);
        use_.request("late", Some("a"), limits(3, 0), SESSION, SESSION + 1_000);
        assert_eq!(use_.len(), 1, "passes unseen for a session are forgotten");
    }
}
