//! What instances record and report: the origin's latency in fixed buckets that add up exactly
//! across instances, one [`Signal`] per window aligned on the clock; and what the leader sees of
//! the room over a window.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::clock::{Millis, millis};

/// Linear sub-buckets per power of two: a bucket is at most 1/16 (6.25 %) wide.
const SUB_BITS: u32 = 4;
pub(super) const SUB: u64 = 1 << SUB_BITS;
/// The last power of two with its own buckets: 2^27 us, about 134 s. Slower goes in the last.
const TOP_OCTAVE: u32 = 27;
/// Number of buckets: values below 16 us have one each, then 16 per power of two.
pub const BUCKETS: usize = ((TOP_OCTAVE - SUB_BITS + 2) as usize) * SUB as usize;

/// The bucket of a latency in microseconds.
pub(super) fn bucket_of(us: u64) -> usize {
    if us < SUB {
        return us as usize;
    }
    let octave = 63 - us.leading_zeros();
    if octave > TOP_OCTAVE {
        return BUCKETS - 1;
    }
    let sub = (us >> (octave - SUB_BITS)) & (SUB - 1);
    ((octave - SUB_BITS + 1) as usize) * SUB as usize + sub as usize
}

/// The smallest latency (us) of a bucket; `bucket_floor(i + 1)` is the end of bucket `i`.
pub(super) fn bucket_floor(index: usize) -> u64 {
    if index < SUB as usize {
        return index as u64;
    }
    let octave = (index / SUB as usize) as u32 + SUB_BITS - 1;
    let sub = (index % SUB as usize) as u64;
    (SUB + sub) << (octave - SUB_BITS)
}

/// Latencies counted in fixed log-linear buckets (16 per power of two, from 1 us to ~134 s):
/// the histograms of several instances over one window add up exactly, and a quantile read from
/// the sum is the quantile of all their requests, to within one bucket (6.25 %).
///
/// Stored and sent as its non-empty buckets, `[[index, count], ...]`.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "Vec<(u16, u64)>", try_from = "Vec<(u16, u64)>")]
pub struct LatencyHistogram {
    counts: Vec<u64>,
    total: u64,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        Self {
            counts: vec![0; BUCKETS],
            total: 0,
        }
    }
}

impl fmt::Debug for LatencyHistogram {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LatencyHistogram")
            .field("total", &self.total)
            .field("p50", &self.quantile(500))
            .field("p95", &self.quantile(950))
            .finish()
    }
}

/// A bucket index past the last one, in a stored histogram.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("latency bucket {0} does not exist (there are {BUCKETS})")]
pub struct NoSuchBucket(pub usize);

impl LatencyHistogram {
    pub fn record(&mut self, latency: Duration) {
        let us = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
        self.counts[bucket_of(us)] += 1;
        self.total += 1;
    }

    /// Adds `count` to one bucket (a stored histogram read back). Saturating: the counts come
    /// from the store, and a damaged one must not overflow (a panic in a debug build, a
    /// nonsense p95 in a release one).
    pub fn add_to_bucket(&mut self, index: usize, count: u64) -> Result<(), NoSuchBucket> {
        let slot = self.counts.get_mut(index).ok_or(NoSuchBucket(index))?;
        *slot = slot.saturating_add(count);
        self.total = self.total.saturating_add(count);
        Ok(())
    }

    pub fn merge(&mut self, other: &LatencyHistogram) {
        for (mine, theirs) in self.counts.iter_mut().zip(&other.counts) {
            *mine = mine.saturating_add(*theirs);
        }
        self.total = self.total.saturating_add(other.total);
    }

    /// Latencies recorded.
    pub fn count(&self) -> u64 {
        self.total
    }

    /// The non-empty buckets, `(index, count)`, in order.
    pub fn buckets(&self) -> impl Iterator<Item = (usize, u64)> + '_ {
        self.counts
            .iter()
            .enumerate()
            .filter(|(_, c)| **c > 0)
            .map(|(i, c)| (i, *c))
    }

    /// The range of latencies a bucket counts: `[start, end)`.
    pub fn bucket_range(index: usize) -> (Duration, Duration) {
        (
            Duration::from_micros(bucket_floor(index)),
            Duration::from_micros(bucket_floor(index + 1)),
        )
    }

    /// The `per_mille`-th quantile (950: the p95) by nearest rank: found in its bucket, and placed
    /// within the bucket by linear interpolation of its rank, as Prometheus's
    /// `histogram_quantile` does. Within one bucket (6.25 %) of the exact value. None when empty.
    pub fn quantile(&self, per_mille: u64) -> Option<Duration> {
        if self.total == 0 {
            return None;
        }
        let per_mille = per_mille.clamp(1, 1000);
        // ceil(q * n) with integers: the rank of the nearest-rank quantile.
        let rank = (u128::from(per_mille) * u128::from(self.total)).div_ceil(1000);
        let mut before: u128 = 0;
        for (index, count) in self.counts.iter().enumerate() {
            let count = u128::from(*count);
            if before + count >= rank {
                let (start, end) = Self::bucket_range(index);
                let (start, end) = (start.as_micros(), end.as_micros());
                // The rank-th of `count` values spread evenly over [start, end).
                let within = (end - start) * (rank - before) / (count + 1);
                return Some(Duration::from_micros(
                    u64::try_from(start + within).unwrap_or(u64::MAX),
                ));
            }
            before += count;
        }
        None
    }
}

impl From<LatencyHistogram> for Vec<(u16, u64)> {
    fn from(h: LatencyHistogram) -> Self {
        h.buckets().map(|(i, c)| (i as u16, c)).collect()
    }
}

impl TryFrom<Vec<(u16, u64)>> for LatencyHistogram {
    type Error = NoSuchBucket;

    fn try_from(buckets: Vec<(u16, u64)>) -> Result<Self, Self::Error> {
        let mut h = LatencyHistogram::default();
        for (index, count) in buckets {
            h.add_to_bucket(usize::from(index), count)?;
        }
        Ok(h)
    }
}

/// How one exchange with the origin, for an admitted visitor, ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exchange {
    /// Response headers arrived after `latency` (from sending the request upstream). A 5xx
    /// counts as an error; its latency counts too.
    Response { status: u16, latency: Duration },
    /// No response within the upstream timeout: an error, with the time waited as its latency.
    Timeout { after: Duration },
    /// The connection failed (refused, reset before a response): an error without a latency.
    Failed,
}

/// The origin's health over one window, as one instance saw it or as several added together.
///
/// What an instance reports: this, for each window, keyed by `started_at`. What only the leader
/// knows, and passes next to it: the room ([`RoomObservation`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Signal {
    pub started_at: Millis,
    pub ended_at: Millis,
    /// Every exchange: responses, timeouts and failures.
    pub requests: u64,
    /// 5xx responses, timeouts and connection failures.
    pub errors: u64,
    /// Latency of responses and timeouts.
    pub latency: LatencyHistogram,
    /// The sum of those latencies, in microseconds: divided by the window's length, the mean
    /// number of this room's requests in flight at the origin (Little's law).
    pub latency_total_us: u64,
}

impl Signal {
    /// An empty window that begins at `started_at` (it ends when closed).
    pub fn new(started_at: Millis) -> Self {
        Self {
            started_at,
            ended_at: started_at,
            requests: 0,
            errors: 0,
            latency: LatencyHistogram::default(),
            latency_total_us: 0,
        }
    }

    pub fn record(&mut self, outcome: Exchange) {
        self.requests += 1;
        match outcome {
            Exchange::Response { status, latency } => {
                if status >= 500 {
                    self.errors += 1;
                }
                self.record_latency(latency);
            }
            Exchange::Timeout { after } => {
                self.errors += 1;
                self.record_latency(after);
            }
            Exchange::Failed => self.errors += 1,
        }
    }

    fn record_latency(&mut self, latency: Duration) {
        self.latency.record(latency);
        let us = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
        self.latency_total_us = self.latency_total_us.saturating_add(us);
    }

    /// Adds another instance's signal (normally over the same window): counts and histograms add
    /// up exactly; the window spans both.
    pub fn merge(&mut self, other: &Signal) {
        self.started_at = self.started_at.min(other.started_at);
        self.ended_at = self.ended_at.max(other.ended_at);
        // Another instance's counts, read back from the store: saturating, like the histogram.
        self.requests = self.requests.saturating_add(other.requests);
        self.errors = self.errors.saturating_add(other.errors);
        self.latency.merge(&other.latency);
        self.latency_total_us = self.latency_total_us.saturating_add(other.latency_total_us);
    }

    pub fn p95(&self) -> Option<Duration> {
        self.latency.quantile(950)
    }

    /// The mean number of requests in flight at the origin over the window (Little's law: the
    /// time they spent there over the window's length).
    pub fn in_flight(&self) -> f64 {
        let span_us = (self.ended_at - self.started_at).max(1) as f64 * 1000.0;
        self.latency_total_us as f64 / span_us
    }

    /// Errors over requests; None without requests.
    pub fn error_rate(&self) -> Option<f64> {
        (self.requests > 0).then(|| self.errors as f64 / self.requests as f64)
    }
}

/// The start of the window that holds `now`: windows are aligned on the clock, so every instance
/// cuts the same ones.
pub fn window_start(now: Millis, window_ms: Millis) -> Millis {
    let window_ms = window_ms.max(1);
    now - now.rem_euclid(window_ms)
}

/// How long after a window's end the leader waits before judging it: every instance reports at
/// its first admission tick after the end (200 ms by default), so a fraction of a second is
/// enough; a quarter of the window, between 250 ms and 1.5 s. The controller takes a change as in
/// force from the judged window's end (the next window is judged), so the grace is also how much
/// of that next window still ran under the replaced limits: kept short.
pub fn judging_grace(window_ms: Millis) -> Millis {
    (window_ms / 4).clamp(250, 1_500)
}

/// One instance's current window: records exchanges and hands over each window once it is over.
#[derive(Debug, Clone)]
pub struct Recorder {
    window_ms: Millis,
    current: Signal,
}

impl Recorder {
    pub fn new(window: Duration, now: Millis) -> Self {
        let window_ms = millis(window).max(1);
        Self {
            window_ms,
            current: Signal::new(window_start(now, window_ms)),
        }
    }

    /// Records one exchange that ended at `now`; returns the previous window if `now` is past it.
    pub fn record(&mut self, now: Millis, outcome: Exchange) -> Option<Signal> {
        let finished = self.roll(now);
        self.current.record(outcome);
        finished
    }

    /// Closes the current window if `now` is past its end (call it on a timer too, so a window
    /// without traffic is reported as such). Windows with nothing in them in between are skipped.
    pub fn roll(&mut self, now: Millis) -> Option<Signal> {
        let start = window_start(now, self.window_ms);
        if start <= self.current.started_at {
            return None;
        }
        let mut finished = std::mem::replace(&mut self.current, Signal::new(start));
        finished.ended_at = finished.started_at + self.window_ms;
        Some(finished)
    }
}

/// What the leader saw of the room over a window, from its admission ticks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RoomObservation {
    /// Visitors inside (passes plus called), averaged over the window's admission ticks, each
    /// taken after the tick's admissions.
    pub occupancy: u64,
    /// The most visitors inside at any tick: the limit was reached if this is at it.
    pub peak: u64,
    /// The fewest visitors waiting at any tick: above zero, people waited all window long.
    pub waiting: u64,
}

/// Adds up the admission ticks of one window into a [`RoomObservation`].
#[derive(Debug, Clone, Default)]
pub struct RoomWindow {
    ticks: u64,
    occupancy_sum: u64,
    peak: u64,
    waiting_min: Option<u64>,
}

impl RoomWindow {
    /// One admission tick: occupancy after the tick's admissions, and visitors still waiting.
    pub fn tick(&mut self, occupancy: u64, waiting: u64) {
        self.ticks += 1;
        self.occupancy_sum = self.occupancy_sum.saturating_add(occupancy);
        self.peak = self.peak.max(occupancy);
        self.waiting_min = Some(self.waiting_min.map_or(waiting, |w| w.min(waiting)));
    }

    /// The window so far; None before the first tick.
    pub fn observation(&self) -> Option<RoomObservation> {
        let waiting = self.waiting_min?;
        Some(RoomObservation {
            occupancy: (self.occupancy_sum + self.ticks / 2) / self.ticks,
            peak: self.peak,
            waiting,
        })
    }

    /// The window so far, and a new one begins.
    pub fn take(&mut self) -> Option<RoomObservation> {
        let seen = self.observation();
        *self = RoomWindow::default();
        seen
    }
}
