//! One pass, one person: what a pass is used from and how fast. A pass shared with a farm is
//! seen from many networks (each clone has its own address) or asks for more pages than a person
//! can (many clones behind one address). Three ledgers, all pure:
//!
//! - [`NetworkLedger`], the store's: the client networks each pass was seen from within the last
//!   session, shared by every instance (the memory store keeps one; the Redis store runs the same
//!   rule in lua/note_network.lua), so a pass cloned to four networks is caught whichever
//!   instances its clones reach.
//! - [`UseCounts`], the store's too: every instance's requests of each pass in this minute and
//!   the last (the Redis store: lua/report_pass_use.lua), so that `max_requests_per_minute` is
//!   one budget however many instances a pass's requests are spread over.
//! - [`PassUse`], each instance's own: the networks it already reported for a pass (a pass holder
//!   costs a store call only the first time this instance sees it from a network, not on every
//!   request) and the pass's request budget, a token bucket held locally for the same reason.
//!   The admission loop reports what this instance served of each pass once a tick
//!   ([`PassUse::take_report`]) and takes what the other instances served off the local bucket
//!   ([`PassUse::settle`]): each instance's bucket is then the one budget, late by a tick.

use std::collections::{BTreeMap, HashMap};

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

/// The unit of the count the instances share: a minute, named by its start.
pub const MINUTE_MS: Millis = 60_000;

/// The minute `now` falls in.
pub fn minute_of(now: Millis) -> Millis {
    now - now.rem_euclid(MINUTE_MS)
}

/// Every instance's requests of one pass, as the store counted them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MinuteCounts {
    /// In the minute of the report, the report included.
    pub current: u64,
    /// In the minute before it.
    pub previous: u64,
}

/// The store's answer to a report of pass use.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SharedUse {
    /// The minute the report was counted in (the reporting instance's clock).
    pub minute: Millis,
    /// Each reported pass's counts, in the order of the report.
    pub counts: Vec<MinuteCounts>,
}

/// The store's side of the shared budget, for the memory store: each pass's requests in the
/// current minute and the one before, from every instance; older minutes are dropped, so it
/// holds at most two minutes of the passes in use.
#[derive(Debug, Default)]
pub struct UseCounts {
    minutes: BTreeMap<Millis, HashMap<String, u64>>,
}

impl UseCounts {
    /// Adds `uses` (pass, requests) to the minute of `now`.
    pub fn add(&mut self, uses: &[(String, u64)], now: Millis) -> SharedUse {
        let minute = minute_of(now);
        let previous = minute - MINUTE_MS;
        self.minutes.retain(|m, _| (previous..=minute).contains(m));
        let mut counts = Vec::with_capacity(uses.len());
        for (pass, n) in uses {
            let count = self
                .minutes
                .entry(minute)
                .or_default()
                .entry(pass.clone())
                .or_insert(0);
            *count = count.saturating_add(*n);
            let current = *count;
            let previous = self
                .minutes
                .get(&previous)
                .and_then(|m| m.get(pass))
                .copied()
                .unwrap_or(0);
            counts.push(MinuteCounts { current, previous });
        }
        SharedUse { minute, counts }
    }

    /// Passes counted, over the minutes kept.
    pub fn len(&self) -> usize {
        self.minutes.values().map(HashMap::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A pass this instance over-served before it heard of the other instances' use may owe at most
/// this many minutes of its budget: enough for ten instances each serving a whole minute's worth
/// before their first report, while a reply of the store that makes no sense cannot lock a pass
/// out for a session.
const MOST_OWED_MINUTES: u64 = 10;

/// What this instance knows of the other instances' use of one pass in one minute.
#[derive(Debug, Clone, Copy)]
struct OthersUse {
    minute: Millis,
    /// What this instance reported in that minute.
    mine: u64,
    /// What the others had served in it when last read: already taken off the bucket.
    others: u64,
}

impl OthersUse {
    /// The start of a minute: what the others served in it so far is owed at once.
    fn first(minute: Millis, sent: u64, current: u64) -> (Self, u64) {
        let others = current.saturating_sub(sent);
        (
            Self {
                minute,
                mine: sent,
                others,
            },
            others,
        )
    }

    /// The others' requests not taken off the bucket yet, in a minute whose count of every
    /// instance is now `total`.
    fn news(&mut self, total: u64) -> u64 {
        let others = total.saturating_sub(self.mine);
        let news = others.saturating_sub(self.others);
        self.others = self.others.max(others);
        news
    }
}

/// What this instance knows of one pass's use.
#[derive(Debug, Clone)]
struct Usage {
    /// The networks reported to the store, and when.
    reported: Vec<(Box<str>, Millis)>,
    bucket: Option<TokenBucket>,
    /// Requests served here since the last report of this pass's use.
    unreported: u64,
    /// The other instances' use as last read; None before this instance's first report.
    others: Option<OthersUse>,
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
/// and beyond `max_entries` the ledger starts over (a pass then reports its network again, and
/// starts a new bucket, which learns the others' use of the minute at its first report).
#[derive(Debug)]
pub struct PassUse {
    usage: HashMap<String, Usage>,
    limits: PassLimits,
    max_entries: usize,
    swept_at: Millis,
    /// Passes with requests not reported yet (a pass once per report).
    unreported: Vec<String>,
}

impl PassUse {
    pub fn new(limits: PassLimits, max_entries: usize) -> Self {
        Self {
            usage: HashMap::new(),
            limits,
            max_entries,
            swept_at: 0,
            unreported: Vec::new(),
        }
    }

    pub fn limits(&self) -> PassLimits {
        self.limits
    }

    /// One request of `pass` from `network` (None: the client's address is unknown). A network
    /// is reported again after half a session, so the store's window, a session long, never
    /// forgets a network that is still in use.
    pub fn request(
        &mut self,
        pass: &str,
        network: Option<&str>,
        session_ms: Millis,
        now: Millis,
    ) -> UseVerdict {
        let limits = self.limits;
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
                    unreported: 0,
                    others: None,
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
            if usage.unreported == 0 {
                self.unreported.push(pass.to_owned());
            }
            usage.unreported += 1;
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

    /// Up to `most` passes with the requests this instance served of each since its last
    /// report, now counted as reported: for the store (`Store::report_pass_use`), then
    /// [`PassUse::settle`] with its answer. A report that fails is not made again: the others
    /// then under-count these requests, which lets a pass a little more, never an honest
    /// visitor less.
    pub fn take_report(&mut self, most: usize) -> Vec<(String, u64)> {
        let mut report = Vec::new();
        while report.len() < most {
            let Some(pass) = self.unreported.pop() else {
                break;
            };
            // Gone (swept, or the ledger started over) or already taken: nothing to report.
            if let Some(usage) = self.usage.get_mut(&pass)
                && usage.unreported > 0
            {
                let n = std::mem::take(&mut usage.unreported);
                report.push((pass, n));
            }
        }
        report
    }

    /// The store's answer to `sent`: what the other instances served of each pass since this
    /// instance last read it is taken off the pass's bucket here (owed, past its tokens). The
    /// minute of the last reading is caught up on when it is the one before; what the others
    /// served in a minute this instance never read (the pass was not used here then) is not
    /// owed: a bucket new here may serve a minute's worth the others already had, once.
    pub fn settle(&mut self, sent: &[(String, u64)], shared: &SharedUse) {
        let per_minute = self.limits.max_requests_per_minute;
        let most_owed = per_minute.saturating_mul(MOST_OWED_MINUTES);
        for ((pass, n), counts) in sent.iter().zip(&shared.counts) {
            let Some(usage) = self.usage.get_mut(pass) else {
                continue;
            };
            let owed = match &mut usage.others {
                Some(seen) if seen.minute == shared.minute => {
                    seen.mine = seen.mine.saturating_add(*n);
                    seen.news(counts.current)
                }
                Some(seen) if seen.minute == shared.minute - MINUTE_MS => {
                    let last = seen.news(counts.previous);
                    let (now, news) = OthersUse::first(shared.minute, *n, counts.current);
                    *seen = now;
                    last.saturating_add(news)
                }
                _ => {
                    let (now, news) = OthersUse::first(shared.minute, *n, counts.current);
                    usage.others = Some(now);
                    news
                }
            };
            if let Some(bucket) = usage.bucket.as_mut() {
                bucket.owe(owed, most_owed);
            }
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
        let mut use_ = PassUse::new(limits(3, 0), 100);
        assert_eq!(use_.request("p", Some("a"), SESSION, 0), UseVerdict::Report);
        assert_eq!(use_.request("p", Some("a"), SESSION, 1), UseVerdict::Fine);
        assert_eq!(use_.request("p", Some("b"), SESSION, 2), UseVerdict::Report);
        assert_eq!(use_.request("p", Some("a"), SESSION, 3), UseVerdict::Fine);
        assert_eq!(
            use_.request("p", Some("a"), SESSION, SESSION / 2),
            UseVerdict::Report,
            "again before the store's window forgets it"
        );
        use_.unreported("p", "b");
        assert_eq!(
            use_.request("p", Some("b"), SESSION, SESSION / 2),
            UseVerdict::Report,
            "a report that failed is tried again"
        );
        assert_eq!(use_.request("p", None, SESSION, 5), UseVerdict::Fine);
        let mut off = PassUse::new(PassLimits::OFF, 100);
        assert_eq!(off.request("q", Some("a"), SESSION, 5), UseVerdict::Fine);
        assert!(off.take_report(10).is_empty(), "nothing counted when off");
    }

    #[test]
    fn a_pass_is_held_to_its_rate() {
        let mut use_ = PassUse::new(limits(0, 60), 100);
        for i in 0..60 {
            assert_eq!(use_.request("p", None, SESSION, i), UseVerdict::Fine);
        }
        let UseVerdict::TooFast { retry_after_ms } = use_.request("p", None, SESSION, 60) else {
            panic!("the 61st request in a second is over the budget");
        };
        assert!((900..=1_000).contains(&retry_after_ms), "{retry_after_ms}");
        assert_eq!(
            use_.request("other", None, SESSION, 60),
            UseVerdict::Fine,
            "each pass has its own budget"
        );
        assert_eq!(use_.request("p", None, SESSION, 1_100), UseVerdict::Fine);
    }

    #[test]
    fn the_ledger_is_bounded() {
        let mut use_ = PassUse::new(limits(3, 0), 10);
        for i in 0..25 {
            use_.request(&format!("p{i}"), Some("a"), SESSION, 0);
        }
        assert!(use_.len() <= 10);
        use_.request("late", Some("a"), SESSION, SESSION + 1_000);
        assert_eq!(use_.len(), 1, "passes unseen for a session are forgotten");
    }

    fn served(use_: &mut PassUse, pass: &str, now: Millis) -> bool {
        use_.request(pass, None, SESSION, now) == UseVerdict::Fine
    }

    /// One instance's tick: its report to the shared counts, and their answer laid over it.
    fn tick(use_: &mut PassUse, store: &mut UseCounts, now: Millis) {
        let sent = use_.take_report(usize::MAX);
        let shared = store.add(&sent, now);
        use_.settle(&sent, &shared);
    }

    #[test]
    fn each_report_carries_the_requests_since_the_last() {
        let mut use_ = PassUse::new(limits(0, 60), 100);
        for now in 0..3 {
            served(&mut use_, "p", now);
        }
        served(&mut use_, "q", 3);
        let mut report = use_.take_report(10);
        report.sort();
        assert_eq!(report, vec![("p".to_owned(), 3), ("q".to_owned(), 1)]);
        assert!(use_.take_report(10).is_empty(), "counted as reported");
        served(&mut use_, "p", 4);
        served(&mut use_, "q", 5);
        assert_eq!(use_.take_report(1).len(), 1, "at most what is asked");
        assert_eq!(use_.take_report(1).len(), 1, "the rest the next time");
    }

    #[test]
    fn the_store_counts_every_instance_by_minute_and_keeps_two() {
        let mut counts = UseCounts::default();
        let uses = |n: u64| vec![("p".to_owned(), n)];
        let at = 5 * MINUTE_MS + 10;
        assert_eq!(
            counts.add(&uses(3), at),
            SharedUse {
                minute: 5 * MINUTE_MS,
                counts: vec![MinuteCounts {
                    current: 3,
                    previous: 0
                }]
            }
        );
        assert_eq!(counts.add(&uses(2), at + 1).counts[0].current, 5);
        let next = counts.add(&uses(1), at + MINUTE_MS);
        assert_eq!(
            next.counts[0],
            MinuteCounts {
                current: 1,
                previous: 5
            }
        );
        assert_eq!(
            counts.add(&uses(1), at + 3 * MINUTE_MS).counts[0],
            MinuteCounts {
                current: 1,
                previous: 0
            }
        );
        assert_eq!(counts.len(), 1, "older minutes are dropped");
    }

    /// Two instances, one pass alternating between them faster than its budget, each reporting
    /// every `tick_ms`: what they serve together over ten minutes is one budget (a minute's worth
    /// at once, then the rate) and what each serves before it hears of the other's, at most
    /// what arrives in two ticks. Held alone, each would have served its own budget.
    #[test]
    fn two_instances_hold_one_pass_to_one_budget() {
        let per_minute = 60;
        let mut a = PassUse::new(limits(0, per_minute), 100);
        let mut b = PassUse::new(limits(0, per_minute), 100);
        let mut store = UseCounts::default();
        let (tick_ms, every_ms) = (200, 10);
        let mut total = 0;
        let mut now = 7 * MINUTE_MS + 12_345;
        let start = now;
        let mut request = 0u64;
        while now < start + 10 * MINUTE_MS {
            let instance = if request.is_multiple_of(2) {
                &mut a
            } else {
                &mut b
            };
            total += u64::from(served(instance, "p", now));
            request += 1;
            now += every_ms;
            if request.is_multiple_of((tick_ms / every_ms) as u64) {
                tick(&mut a, &mut store, now);
                tick(&mut b, &mut store, now + 1);
            }
        }
        let budget = per_minute + per_minute * 10;
        let lag = (2 * tick_ms / every_ms) as u64;
        assert!(
            (budget - lag..=budget + lag).contains(&total),
            "{total} served, one budget is {budget}"
        );
    }

    /// An honest visitor at nine tenths of the budget, its requests spread over three instances
    /// (one each, in turn, across minute boundaries), is never refused: nothing is counted twice.
    #[test]
    fn an_honest_visitor_spread_over_instances_is_never_refused() {
        let per_minute = 60;
        let mut instances: Vec<PassUse> = (0..3)
            .map(|_| PassUse::new(limits(0, per_minute), 100))
            .collect();
        let mut store = UseCounts::default();
        let every_ms = MINUTE_MS / 54;
        let mut now = 3 * MINUTE_MS + 59_000;
        for request in 0..54 * 5 {
            let i = request % instances.len();
            assert!(
                served(&mut instances[i], "p", now),
                "request {request} refused"
            );
            now += every_ms;
            for (n, instance) in instances.iter_mut().enumerate() {
                tick(instance, &mut store, now + n as Millis);
            }
        }
    }

    /// Across a minute boundary the minute last read is caught up on; a bucket new on an
    /// instance owes what the others served in the current minute only.
    #[test]
    fn the_minute_before_is_caught_up_on_and_a_new_bucket_owes_this_minute() {
        let l = limits(0, 10);
        let (mut a, mut b) = (PassUse::new(l, 100), PassUse::new(l, 100));
        let mut store = UseCounts::default();
        let t = 20 * MINUTE_MS + 50_000;
        assert!(served(&mut a, "p", t));
        tick(&mut a, &mut store, t);
        for i in 0..6 {
            assert!(served(&mut b, "p", t + 1 + i));
        }
        tick(&mut b, &mut store, t + 10);
        // The next minute: a hears of b's six of the last minute and the two of this one.
        let next = t + MINUTE_MS - 50_000 + 1;
        for i in 0..2 {
            assert!(served(&mut b, "p", next + i));
        }
        tick(&mut b, &mut store, next + 5);
        assert!(served(&mut a, "p", next + 6));
        tick(&mut a, &mut store, next + 7);
        // a's bucket, full again ten seconds on, less this request and b's eight: one left.
        assert!(served(&mut a, "p", next + 8));
        assert!(!served(&mut a, "p", next + 9), "b's eight are owed");
        // A third instance new to the pass owes the others' requests of this minute reported so
        // far (b's two and a's one), not the last minute's.
        let mut c = PassUse::new(l, 100);
        for i in 0..7 {
            assert!(served(&mut c, "p", next + 10 + i), "{i}");
        }
        tick(&mut c, &mut store, next + 20);
        assert!(
            !served(&mut c, "p", next + 21),
            "10 - 7 of its own - 3 of the others"
        );
    }

    #[test]
    fn what_a_pass_owes_is_bounded() {
        let l = limits(0, 10);
        let mut a = PassUse::new(l, 100);
        assert!(served(&mut a, "p", 0));
        let sent = a.take_report(10);
        let absurd = SharedUse {
            minute: 0,
            counts: vec![MinuteCounts {
                current: u64::MAX,
                previous: 0,
            }],
        };
        a.settle(&sent, &absurd);
        let UseVerdict::TooFast { retry_after_ms } = a.request("p", None, SESSION, 1) else {
            panic!("owing");
        };
        assert!(
            retry_after_ms <= (MOST_OWED_MINUTES as Millis + 1) * MINUTE_MS,
            "{retry_after_ms}"
        );
    }
}
