//! The room's recent past, one record per minute, for the drop report: fed with the cumulative
//! counters the admission loop reads at each tick (the store's counts, this instance's
//! metrics), each minute keeps what changed in it. Bounded: the oldest minute goes first.
//! Pure: the caller passes the time and the readings.

use std::collections::VecDeque;

use crate::clock::Millis;

pub const MINUTE_MS: Millis = 60_000;
/// A day of minutes: a drop and the hours around it.
pub const KEPT_MINUTES: usize = 24 * 60;

/// Counters that only grow, as read at one tick (totals since some start) or as what changed
/// over a minute or a span of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counters {
    /// The room's, from the store: every instance's visitors.
    pub admitted: u64,
    pub joined: u64,
    pub abandoned: u64,
    /// This instance's.
    pub own: OwnCounters,
}

impl Counters {
    fn each(self, other: Self, f: impl Fn(u64, u64) -> u64) -> Self {
        Self {
            admitted: f(self.admitted, other.admitted),
            joined: f(self.joined, other.joined),
            abandoned: f(self.abandoned, other.abandoned),
            own: self.own.each(other.own, f),
        }
    }
}

/// What one instance alone counts: each count belongs to exactly one instance, so every
/// instance's add up to the whole room's (the room-wide counts of [`Counters`] every instance
/// reads alike from the store, and must never be added).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct OwnCounters {
    /// Passes it revoked, by reason.
    pub revoked_ended: u64,
    pub revoked_shared: u64,
    pub challenges_passed: u64,
    pub challenges_failed: u64,
    /// Its exchanges with the origin, and those that failed (5xx, no answer).
    pub origin_requests: u64,
    pub origin_errors: u64,
    /// Its admissions compared with the earlier ones for order (ties excluded), and those that
    /// arrived before someone admitted ahead of them.
    pub order_pairs: u64,
    pub order_inversions: u64,
}

impl OwnCounters {
    fn each(self, other: Self, f: impl Fn(u64, u64) -> u64) -> Self {
        Self {
            revoked_ended: f(self.revoked_ended, other.revoked_ended),
            revoked_shared: f(self.revoked_shared, other.revoked_shared),
            challenges_passed: f(self.challenges_passed, other.challenges_passed),
            challenges_failed: f(self.challenges_failed, other.challenges_failed),
            origin_requests: f(self.origin_requests, other.origin_requests),
            origin_errors: f(self.origin_errors, other.origin_errors),
            order_pairs: f(self.order_pairs, other.order_pairs),
            order_inversions: f(self.order_inversions, other.order_inversions),
        }
    }

    /// Kendall's tau of arrival against admission order over the compared pairs: 1 in arrival
    /// order, -1 reversed. None when no pair was compared.
    pub fn order_tau(&self) -> Option<f64> {
        (self.order_pairs > 0)
            .then(|| 1.0 - 2.0 * self.order_inversions as f64 / self.order_pairs as f64)
    }

    /// The origin's failed share of its exchanges; None without exchanges.
    pub fn origin_error_rate(&self) -> Option<f64> {
        (self.origin_requests > 0).then(|| self.origin_errors as f64 / self.origin_requests as f64)
    }
}

/// Counts per bucket of a histogram with fixed upper bounds (the last bucket has none): what a
/// Prometheus histogram holds, not cumulated.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Buckets(pub Vec<u64>);

impl Buckets {
    fn each(&self, other: &Self, f: impl Fn(u64, u64) -> u64) -> Self {
        let len = self.0.len().max(other.0.len());
        let at = |b: &Self, i: usize| b.0.get(i).copied().unwrap_or(0);
        Buckets((0..len).map(|i| f(at(self, i), at(other, i))).collect())
    }

    pub fn count(&self) -> u64 {
        self.0.iter().sum()
    }

    /// The `q` quantile (0.95: the p95), placed within its bucket by linear interpolation as
    /// Prometheus's `histogram_quantile` does, so within one bucket of the exact value; in the
    /// last, unbounded bucket, the highest bound. `bounds` are the buckets' upper bounds, in
    /// order, starting from 0. None when empty.
    pub fn quantile(&self, bounds: &[f64], q: f64) -> Option<f64> {
        let total = self.count();
        if total == 0 {
            return None;
        }
        let rank = q.clamp(0.0, 1.0) * total as f64;
        let mut before = 0u64;
        for (index, &count) in self.0.iter().enumerate() {
            if count > 0 && (before + count) as f64 >= rank {
                let lower = index.checked_sub(1).map_or(0.0, |i| bounds[i]);
                let Some(&upper) = bounds.get(index) else {
                    return bounds.last().copied();
                };
                let within = (rank - before as f64) / count as f64;
                return Some(lower + (upper - lower) * within);
            }
            before += count;
        }
        bounds.last().copied()
    }
}

/// One tick's reading: the gauges now and the counters' totals.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Reading {
    pub inside: u64,
    pub waiting: u64,
    pub counters: Counters,
    /// Each wait from ticket to admission (ms) since the previous reading: not totals, so a
    /// reading's waits are taken once, whatever its order.
    pub waits: Vec<u32>,
    /// The origin's latency (seconds), by bucket, totals.
    pub origin_latency: Buckets,
}

/// What one minute saw: the gauges as last read in it, and what the counters added.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Minute {
    pub start: Millis,
    pub inside: u64,
    pub waiting: u64,
    pub added: Counters,
    /// The waits (ms) of the visitors admitted from the line in this minute, each of them: the
    /// report's quantiles are exact.
    pub waits: Vec<u32>,
    pub origin_latency: Buckets,
}

/// What one instance alone counted in one minute: everything a [`Minute`] holds but the store's
/// room-wide figures (inside, waiting, admitted, joined, abandoned). What it publishes for the
/// other instances' reports.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Share {
    pub counted: OwnCounters,
    pub waits: Vec<u32>,
    pub origin_latency: Vec<u64>,
}

impl Minute {
    /// This minute's per-instance part.
    pub fn share(&self) -> Share {
        Share {
            counted: self.added.own,
            waits: self.waits.clone(),
            origin_latency: self.origin_latency.0.clone(),
        }
    }

    /// Adds another instance's share of this minute.
    fn take_in(&mut self, share: &Share) {
        self.added.own = self.added.own.each(share.counted, u64::saturating_add);
        self.waits.extend_from_slice(&share.waits);
        self.origin_latency = self
            .origin_latency
            .each(&Buckets(share.origin_latency.clone()), u64::saturating_add);
    }
}

/// Minutes added up over a span.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Summary {
    pub minutes: usize,
    pub peak_inside: u64,
    pub peak_waiting: u64,
    pub added: Counters,
    /// Every wait of the span, in no order.
    pub waits: Vec<u32>,
    pub origin_latency: Buckets,
}

impl Summary {
    /// The `q` quantile of the waits (ms; 0.95: the p95) by nearest rank: one of the waits
    /// itself. None without a wait.
    pub fn wait_quantile(&self, q: f64) -> Option<u32> {
        let mut sorted = self.waits.clone();
        sorted.sort_unstable();
        let rank = (q.clamp(0.0, 1.0) * sorted.len() as f64).ceil() as usize;
        sorted.get(rank.saturating_sub(1)).copied()
    }

    pub fn longest_wait_ms(&self) -> Option<u32> {
        self.waits.iter().copied().max()
    }
}

/// What the first reading is measured from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// Zero: the store began with this process (the memory store), so all its counts are this
    /// history's, the admissions before the loop's first tick too.
    FromZero,
    /// The first reading itself: a shared store holds the room's past from before this
    /// instance started, which is not this history's.
    FromFirstReading,
}

/// The last [`KEPT_MINUTES`] minutes (or fewer), oldest first.
#[derive(Debug)]
pub struct History {
    kept: usize,
    minutes: VecDeque<Minute>,
    /// The highest totals read so far: what the next reading is measured from. The highest, so
    /// that two ticks whose readings arrive out of order count nothing twice.
    seen: Option<Reading>,
}

impl History {
    /// The last [`KEPT_MINUTES`].
    pub fn new(start: Start) -> Self {
        Self::keeping(KEPT_MINUTES, start)
    }

    pub fn keeping(kept: usize, start: Start) -> Self {
        Self {
            kept: kept.max(1),
            minutes: VecDeque::new(),
            seen: (start == Start::FromZero).then(Reading::default),
        }
    }

    /// A tick's reading at `now`.
    pub fn observe(&mut self, now: Millis, reading: Reading) {
        let start = now - now.rem_euclid(MINUTE_MS);
        let (added, latency) = match &self.seen {
            Some(seen) => (
                reading.counters.each(seen.counters, u64::saturating_sub),
                reading
                    .origin_latency
                    .each(&seen.origin_latency, u64::saturating_sub),
            ),
            None => Default::default(),
        };
        let newer = self.minutes.back().is_none_or(|last| last.start < start);
        if newer {
            if self.minutes.len() == self.kept {
                self.minutes.pop_front();
            }
            self.minutes.push_back(Minute {
                start,
                ..Minute::default()
            });
        }
        if let Some(minute) = self.minutes.back_mut() {
            // A clock set back adds to the latest minute rather than rewriting the past.
            minute.inside = reading.inside;
            minute.waiting = reading.waiting;
            minute.added = minute.added.each(added, u64::saturating_add);
            minute.waits.extend_from_slice(&reading.waits);
            minute.origin_latency = minute.origin_latency.each(&latency, u64::saturating_add);
        }
        self.seen = Some(match self.seen.take() {
            // The totals are what the next reading is measured from; its waits were taken.
            Some(seen) => Reading {
                counters: reading.counters.each(seen.counters, u64::max),
                origin_latency: reading.origin_latency.each(&seen.origin_latency, u64::max),
                waits: Vec::new(),
                ..reading
            },
            None => Reading {
                waits: Vec::new(),
                ..reading
            },
        });
    }

    /// This instance's shares of the minutes that start at `from` or later, oldest first: what
    /// it publishes for the other instances' reports.
    pub fn shares_since(&self, from: Millis) -> Vec<(Millis, Share)> {
        self.minutes
            .iter()
            .filter(|m| m.start >= from)
            .map(|m| (m.start, m.share()))
            .collect()
    }

    /// This history with the other instances' shares added to the minutes it holds: the whole
    /// room's figures. A share of a minute this history does not hold (before this instance
    /// started, or past what it keeps) has no room-wide figures to go beside, and is left out.
    pub fn with_shares<'a>(&self, others: impl IntoIterator<Item = &'a (Millis, Share)>) -> Self {
        let mut merged = Self {
            kept: self.kept,
            minutes: self.minutes.clone(),
            seen: None,
        };
        for (start, share) in others {
            if let Some(minute) = merged.minutes.iter_mut().find(|m| m.start == *start) {
                minute.take_in(share);
            }
        }
        merged
    }

    /// The minutes that start in `[from, until)`, oldest first.
    pub fn minutes(&self, from: Millis, until: Millis) -> impl Iterator<Item = &Minute> {
        self.minutes
            .iter()
            .filter(move |m| m.start >= from && m.start < until)
    }

    /// The minutes that start in `[from, until)`, added up.
    pub fn summary(&self, from: Millis, until: Millis) -> Summary {
        let mut sum = Summary::default();
        for minute in self.minutes(from, until) {
            sum.minutes += 1;
            sum.peak_inside = sum.peak_inside.max(minute.inside);
            sum.peak_waiting = sum.peak_waiting.max(minute.waiting);
            sum.added = sum.added.each(minute.added, u64::saturating_add);
            sum.waits.extend_from_slice(&minute.waits);
            sum.origin_latency = sum
                .origin_latency
                .each(&minute.origin_latency, u64::saturating_add);
        }
        sum
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{Clock, ManualClock};
    use std::time::Duration;

    fn reading(admitted: u64, joined: u64, inside: u64, waiting: u64) -> Reading {
        Reading {
            inside,
            waiting,
            counters: Counters {
                admitted,
                joined,
                ..Counters::default()
            },
            ..Reading::default()
        }
    }

    /// A clock at the start of a minute, so that the tests' minutes are where they say.
    fn clock() -> std::sync::Arc<ManualClock> {
        let clock = ManualClock::starting_now();
        let into = clock.now_ms().rem_euclid(MINUTE_MS);
        clock.advance(Duration::from_millis((MINUTE_MS - into) as u64));
        clock
    }

    #[test]
    fn each_minute_keeps_what_changed_in_it_and_its_last_gauges() {
        let clock = clock();
        let start = clock.now_ms();
        let mut history = History::new(Start::FromFirstReading);
        history.observe(clock.now_ms(), reading(100, 200, 0, 0));
        clock.advance(Duration::from_secs(20));
        history.observe(clock.now_ms(), reading(103, 210, 3, 7));
        clock.advance(Duration::from_secs(30));
        history.observe(clock.now_ms(), reading(105, 212, 5, 6));
        clock.advance(Duration::from_secs(15));
        history.observe(clock.now_ms(), reading(106, 212, 4, 5));
        let minutes: Vec<&Minute> = history.minutes(start, start + 10 * MINUTE_MS).collect();
        assert_eq!(minutes.len(), 2);
        assert_eq!(minutes[0].start, start);
        assert_eq!(
            (minutes[0].added.admitted, minutes[0].added.joined),
            (5, 12),
            "the first reading is the start, not an admission"
        );
        assert_eq!((minutes[0].inside, minutes[0].waiting), (5, 6));
        assert_eq!(minutes[1].start, start + MINUTE_MS);
        assert_eq!(minutes[1].added.admitted, 1);
        let summary = history.summary(start, start + 10 * MINUTE_MS);
        assert_eq!(summary.added.admitted, 6);
        assert_eq!(summary.minutes, 2);
        assert_eq!((summary.peak_inside, summary.peak_waiting), (5, 6));
        assert_eq!(
            history
                .summary(start + MINUTE_MS, start + 2 * MINUTE_MS)
                .added
                .admitted,
            1
        );
    }

    #[test]
    fn other_instances_shares_add_to_the_minutes_held_and_the_room_wide_figures_stay() {
        let clock = clock();
        let start = clock.now_ms();
        let mut history = History::new(Start::FromZero);
        let mut mine = reading(4, 6, 4, 2);
        mine.counters.own.origin_requests = 10;
        mine.counters.own.origin_errors = 1;
        mine.counters.own.order_pairs = 6;
        mine.waits = vec![900, 300, 2_000];
        history.observe(start, mine);
        let theirs = Share {
            counted: OwnCounters {
                revoked_shared: 1,
                challenges_failed: 2,
                origin_requests: 30,
                origin_errors: 2,
                order_pairs: 4,
                order_inversions: 1,
                ..OwnCounters::default()
            },
            waits: vec![4_000, 100],
            ..Share::default()
        };
        let before_start = (start - MINUTE_MS, theirs.clone());
        let merged = history.with_shares(&[(start, theirs.clone()), before_start]);
        let summary = merged.summary(Millis::MIN, Millis::MAX);
        assert_eq!(summary.minutes, 1, "no minute made for a share alone");
        // The room-wide figures are the store's: not added again.
        assert_eq!((summary.added.admitted, summary.added.joined), (4, 6));
        assert_eq!((summary.peak_inside, summary.peak_waiting), (4, 2));
        let added = summary.added.own;
        assert_eq!((added.origin_requests, added.origin_errors), (40, 3));
        assert_eq!((added.revoked_shared, added.challenges_failed), (1, 2));
        assert_eq!(added.order_tau(), Some(0.8));
        let mut waits = summary.waits.clone();
        waits.sort_unstable();
        assert_eq!(waits, vec![100, 300, 900, 2_000, 4_000]);
        assert_eq!(summary.longest_wait_ms(), Some(4_000));
        assert_eq!(summary.wait_quantile(0.5), Some(900));
        // The history itself is untouched, and what it publishes is its own share alone.
        assert_eq!(
            history
                .summary(Millis::MIN, Millis::MAX)
                .added
                .own
                .origin_requests,
            10
        );
        let published = history.shares_since(start);
        assert_eq!(published.len(), 1);
        assert_eq!(published[0].1.counted.origin_requests, 10);
        assert_eq!(published[0].1.waits, vec![900, 300, 2_000]);
        assert!(history.shares_since(start + MINUTE_MS).is_empty());
    }

    #[test]
    fn a_history_from_zero_counts_the_first_reading_too() {
        let clock = clock();
        let now = clock.now_ms();
        let mut history = History::new(Start::FromZero);
        history.observe(now, reading(2, 3, 2, 3));
        let summary = history.summary(now, now + MINUTE_MS);
        assert_eq!((summary.added.admitted, summary.added.joined), (2, 3));
    }

    #[test]
    fn readings_out_of_order_count_nothing_twice() {
        let clock = clock();
        let mut history = History::new(Start::FromFirstReading);
        history.observe(clock.now_ms(), reading(0, 0, 0, 0));
        history.observe(clock.now_ms(), reading(5, 0, 0, 0));
        history.observe(clock.now_ms(), reading(3, 0, 0, 0));
        history.observe(clock.now_ms(), reading(6, 0, 0, 0));
        let now = clock.now_ms();
        assert_eq!(
            history
                .summary(now - MINUTE_MS, now + MINUTE_MS)
                .added
                .admitted,
            6
        );
    }

    #[test]
    fn only_the_last_minutes_are_kept() {
        let clock = clock();
        let mut history = History::keeping(3, Start::FromFirstReading);
        for admitted in 0..5 {
            history.observe(clock.now_ms(), reading(admitted, 0, 0, 0));
            clock.advance(Duration::from_secs(60));
        }
        let all: Vec<Millis> = history.minutes(0, Millis::MAX).map(|m| m.start).collect();
        assert_eq!(all.len(), 3);
        let now = clock.now_ms();
        assert_eq!(
            all,
            vec![now - 3 * MINUTE_MS, now - 2 * MINUTE_MS, now - MINUTE_MS]
        );
    }

    #[test]
    fn a_minute_nobody_read_has_no_record() {
        let clock = clock();
        let start = clock.now_ms();
        let mut history = History::new(Start::FromFirstReading);
        history.observe(clock.now_ms(), reading(0, 0, 0, 0));
        clock.advance(Duration::from_secs(180));
        history.observe(clock.now_ms(), reading(4, 0, 0, 0));
        let starts: Vec<Millis> = history.minutes(0, Millis::MAX).map(|m| m.start).collect();
        assert_eq!(starts, vec![start, start + 3 * MINUTE_MS]);
    }

    #[test]
    fn every_wait_is_kept_in_its_minute_and_its_quantiles_are_exact() {
        let clock = clock();
        let start = clock.now_ms();
        let mut history = History::new(Start::FromFirstReading);
        let waited = |waits: &[u32]| Reading {
            waits: waits.to_vec(),
            ..Reading::default()
        };
        history.observe(clock.now_ms(), waited(&[4_000, 1_000]));
        history.observe(clock.now_ms(), waited(&[9_000]));
        history.observe(clock.now_ms(), waited(&[]));
        clock.advance(Duration::from_secs(60));
        history.observe(clock.now_ms(), waited(&[2_000]));
        let minutes: Vec<&Minute> = history.minutes(0, Millis::MAX).collect();
        assert_eq!(minutes[0].waits, vec![4_000, 1_000, 9_000]);
        assert_eq!(minutes[1].waits, vec![2_000]);
        let day = history.summary(start, start + 2 * MINUTE_MS);
        assert_eq!(day.longest_wait_ms(), Some(9_000));
        // Nearest rank over 1 000, 2 000, 4 000, 9 000: the p50 is the 2nd, the p95 the 4th.
        assert_eq!(day.wait_quantile(0.5), Some(2_000));
        assert_eq!(day.wait_quantile(0.95), Some(9_000));
        assert_eq!(day.wait_quantile(0.0), Some(1_000));
        let none = history.summary(start + 5 * MINUTE_MS, Millis::MAX);
        assert_eq!(none.longest_wait_ms(), None);
        assert_eq!(none.wait_quantile(0.5), None);
    }

    #[test]
    fn quantiles_are_interpolated_within_their_bucket() {
        let bounds = [1.0, 5.0, 15.0];
        // 10 in [0, 1], 10 in (1, 5], none in (5, 15], 0 above.
        let buckets = Buckets(vec![10, 10, 0, 0]);
        assert_eq!(buckets.quantile(&bounds, 0.5), Some(1.0));
        assert_eq!(buckets.quantile(&bounds, 0.25), Some(0.5));
        assert_eq!(buckets.quantile(&bounds, 0.75), Some(3.0));
        assert_eq!(buckets.quantile(&bounds, 1.0), Some(5.0));
        assert_eq!(
            Buckets(vec![0, 0, 0, 3]).quantile(&bounds, 0.5),
            Some(15.0),
            "above every bound: the highest bound"
        );
        assert_eq!(Buckets(vec![0; 4]).quantile(&bounds, 0.5), None);
    }

    #[test]
    fn histograms_add_by_minute() {
        let clock = clock();
        let start = clock.now_ms();
        let mut history = History::new(Start::FromFirstReading);
        let latency = |b: Vec<u64>| Reading {
            origin_latency: Buckets(b),
            ..Reading::default()
        };
        history.observe(clock.now_ms(), latency(vec![5, 0, 0]));
        history.observe(clock.now_ms(), latency(vec![7, 1, 0]));
        clock.advance(Duration::from_secs(60));
        history.observe(clock.now_ms(), latency(vec![7, 3, 2]));
        let minutes: Vec<&Minute> = history.minutes(0, Millis::MAX).collect();
        assert_eq!(minutes[0].origin_latency, Buckets(vec![2, 1, 0]));
        assert_eq!(minutes[1].origin_latency, Buckets(vec![0, 2, 2]));
        assert_eq!(
            history.summary(start, Millis::MAX).origin_latency,
            Buckets(vec![2, 3, 2])
        );
    }

    #[test]
    fn tau_and_error_rate_from_the_counts() {
        let counters = OwnCounters {
            order_pairs: 10,
            order_inversions: 0,
            origin_requests: 40,
            origin_errors: 2,
            ..OwnCounters::default()
        };
        assert_eq!(counters.order_tau(), Some(1.0));
        assert_eq!(counters.origin_error_rate(), Some(0.05));
        let reversed = OwnCounters {
            order_pairs: 4,
            order_inversions: 4,
            ..OwnCounters::default()
        };
        assert_eq!(reversed.order_tau(), Some(-1.0));
        assert_eq!(OwnCounters::default().order_tau(), None);
        assert_eq!(OwnCounters::default().origin_error_rate(), None);
    }
}
