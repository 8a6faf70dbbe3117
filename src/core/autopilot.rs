//! The autopilot (issue #16): steers the room's `total_active_users` and `new_users_per_minute`
//! by the origin's health, as the proxy sees it on admitted requests. No I/O: time comes in as
//! [`Millis`], the origin's health as one [`Signal`] per window, the room as a
//! [`RoomObservation`]. The design and where each rule comes from: docs/autopilot.md.
//!
//! Who does what:
//! - every instance records each origin exchange of an admitted request in a [`Recorder`], which
//!   hands over one [`Signal`] per window (aligned on the clock, so the windows of several
//!   instances line up); the signal goes to the store;
//! - the leader adds the instances' signals of one window together ([`Signal::merge`], exact:
//!   the latency histogram has fixed buckets), feeds its admission ticks to a [`RoomWindow`], and
//!   calls [`Controller::step`] once per window; a [`Decision`] is the new capacity, rate and
//!   burst, written to the store like a live settings change, with a reason for the log.
//!
//! The rules of a step, in order (each hold says why in [`Controller::status`]):
//! 1. Hold when paused, for a window begun before the last change, for a window with fewer than
//!    `min_requests` origin exchanges (no traffic: no change), or for a window that ended within
//!    `min_interval` of the end of the window that made the last change.
//! 2. Breach (p95 above `latency_target`, or error rate above `error_rate_max`): down to the
//!    occupancy the origin can take, estimated from the window: its occupancy less its queue,
//!    the share of its requests in flight (Little's law on the latency sum) beyond what a p95
//!    in the middle of the hysteresis band allows, one visitor each (Vegas's queue estimate,
//!    against the target); for errors, the occupancy times `error_rate_max / error rate`. The
//!    cut is between 50 % and 95 % of the occupancy (the load that breached, TCP's flight-size
//!    rule, not the limit), and only if below the capacity: while the room drains after a cut,
//!    windows that still breach lower it again only if they ask for less, and by about a third
//!    of the limit at most. A p95 over twice the target (the origin changed) halves the
//!    occupancy, unless the room is still draining.
//! 3. Healthy (p95 and error rate under their limits by the `hysteresis` margin) and saturated
//!    (occupancy within 5 % of the capacity at some tick, with people waiting at every tick):
//!    up. By half per window until the first breach or two windows in the band (TCP's slow
//!    start); then half way to where the last breach put the knee, or, at or past it, by 2 %
//!    (a probe). Either waits 1, 2, 4... calm windows when the knee breaches again at the same
//!    place (within 10 %), so probing a knee that stays put gets rarer. 10 % past the last
//!    breach, or with p95 under half the band's floor, the breach is forgotten and the limit
//!    grows by the square root of the capacity, less as p95 nears the band (whole at half its
//!    floor, one visitor at the floor). Never more than +50 % at once.
//! 4. Otherwise (in the band between the hysteresis margin and the limits, or not saturated):
//!    hold.
//! 5. The rate and the burst follow the capacity in the operator's ratios; all stay >= 1, the
//!    capacity within [`min_active_users`, `max_active_users`].
//!
//! [`min_active_users`]: Settings::min_active_users
//! [`max_active_users`]: Settings::max_active_users

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::clock::Millis;

#[cfg(test)]
mod sim;
#[cfg(test)]
mod tests;

// ---------------------------------------------------------------------------------------------
// Latency histogram
// ---------------------------------------------------------------------------------------------

/// Linear sub-buckets per power of two: a bucket is at most 1/16 (6.25 %) wide.
const SUB_BITS: u32 = 4;
const SUB: u64 = 1 << SUB_BITS;
/// The last power of two with its own buckets: 2^27 us, about 134 s. Slower goes in the last.
const TOP_OCTAVE: u32 = 27;
/// Number of buckets: values below 16 us have one each, then 16 per power of two.
pub const BUCKETS: usize = ((TOP_OCTAVE - SUB_BITS + 2) as usize) * SUB as usize;

/// The bucket of a latency in microseconds.
fn bucket_of(us: u64) -> usize {
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
fn bucket_floor(index: usize) -> u64 {
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

// ---------------------------------------------------------------------------------------------
// What instances record and report
// ---------------------------------------------------------------------------------------------

/// How one exchange with the origin, for an admitted visitor, ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
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

    pub fn record(&mut self, outcome: Outcome) {
        self.requests += 1;
        match outcome {
            Outcome::Response { status, latency } => {
                if status >= 500 {
                    self.errors += 1;
                }
                self.record_latency(latency);
            }
            Outcome::Timeout { after } => {
                self.errors += 1;
                self.record_latency(after);
            }
            Outcome::Failed => self.errors += 1,
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
        let window_ms = duration_ms(window).max(1);
        Self {
            window_ms,
            current: Signal::new(window_start(now, window_ms)),
        }
    }

    /// Records one exchange that ended at `now`; returns the previous window if `now` is past it.
    pub fn record(&mut self, now: Millis, outcome: Outcome) -> Option<Signal> {
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

// ---------------------------------------------------------------------------------------------
// Settings
// ---------------------------------------------------------------------------------------------

/// The `[autopilot]` settings, as the controller obeys them (checked by [`Settings::validate`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// The p95 of the origin's latency on admitted requests, over a window, not to exceed.
    pub latency_target: Duration,
    /// The share of errors (5xx, timeouts, connection failures) not to exceed, in [0, 1).
    pub error_rate_max: f64,
    /// How long one window is: the controller judges one window at a time.
    pub window: Duration,
    /// The capacity never goes below this...
    pub min_active_users: u64,
    /// ...nor above this.
    pub max_active_users: u64,
    /// The least time between two changes.
    pub min_interval: Duration,
    /// The capacity only rises while p95 and error rate are below their limit by this fraction
    /// (0.2: p95 at most 80 % of the target); in between it holds.
    pub hysteresis: f64,
    /// Origin exchanges a window needs before it is judged at all.
    pub min_requests: u64,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            latency_target: Duration::from_millis(250),
            error_rate_max: 0.02,
            window: Duration::from_secs(10),
            min_active_users: 10,
            max_active_users: 2000,
            min_interval: Duration::from_secs(10),
            hysteresis: 0.2,
            min_requests: 50,
        }
    }
}

/// A setting the controller cannot work with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("autopilot.{key}: {message}")]
pub struct SettingsError {
    pub key: &'static str,
    pub message: String,
}

fn invalid(key: &'static str, message: impl Into<String>) -> SettingsError {
    SettingsError {
        key,
        message: message.into(),
    }
}

/// Below this many samples a p95 is one or two requests' word.
pub const MIN_REQUESTS_FLOOR: u64 = 20;

impl Settings {
    pub fn validate(&self) -> Result<(), SettingsError> {
        if self.latency_target.is_zero() || self.latency_target > Duration::from_secs(60) {
            return Err(invalid(
                "latency_target",
                "must be longer than zero and at most 60s",
            ));
        }
        if !(self.error_rate_max > 0.0 && self.error_rate_max < 1.0) {
            return Err(invalid(
                "error_rate_max",
                format!(
                    "{} is not a share between 0 and 1 (0.02: 2 %)",
                    self.error_rate_max
                ),
            ));
        }
        if self.window < Duration::from_secs(1) || self.window > Duration::from_secs(600) {
            return Err(invalid("window", "must be between 1s and 10m"));
        }
        if self.min_active_users == 0 {
            return Err(invalid("min_active_users", "must be at least 1"));
        }
        if self.max_active_users < self.min_active_users {
            return Err(invalid(
                "max_active_users",
                format!(
                    "{} is below min_active_users ({})",
                    self.max_active_users, self.min_active_users
                ),
            ));
        }
        if self.min_interval > Duration::from_secs(3600) {
            return Err(invalid("min_interval", "must be at most 1h"));
        }
        if !(0.0..=0.9).contains(&self.hysteresis) {
            return Err(invalid(
                "hysteresis",
                format!("{} is not between 0 and 0.9", self.hysteresis),
            ));
        }
        if self.min_requests < MIN_REQUESTS_FLOOR {
            return Err(invalid(
                "min_requests",
                format!("must be at least {MIN_REQUESTS_FLOOR}, or one slow request moves the p95"),
            ));
        }
        Ok(())
    }

    fn clamp(&self, capacity: u64) -> u64 {
        capacity.clamp(self.min_active_users, self.max_active_users)
    }
}

fn duration_ms(d: Duration) -> Millis {
    Millis::try_from(d.as_millis()).unwrap_or(Millis::MAX)
}

// ---------------------------------------------------------------------------------------------
// The controller
// ---------------------------------------------------------------------------------------------

/// The limits the admission loop obeys. Deserialize: the store keeps the leader's setpoint
/// (`crate::store::AutopilotRecord`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Setpoint {
    pub total_active_users: u64,
    pub new_users_per_minute: u64,
    pub burst: u64,
}

impl fmt::Display for Setpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} inside, {}/min (burst {})",
            self.total_active_users, self.new_users_per_minute, self.burst
        )
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    Down,
    Up,
    /// Set from outside: the start, an operator's change, new bounds.
    Set,
}

/// A change of limits, with why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Decision {
    pub at: Millis,
    pub direction: Direction,
    pub from: Setpoint,
    pub to: Setpoint,
    pub reason: String,
}

impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "autopilot: total_active_users {} -> {}, new_users_per_minute {} -> {}: {}",
            self.from.total_active_users,
            self.to.total_active_users,
            self.from.new_users_per_minute,
            self.to.new_users_per_minute,
            self.reason
        )
    }
}

/// What /admin/state shows.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Status {
    pub enabled: bool,
    pub paused: bool,
    pub total_active_users: u64,
    pub new_users_per_minute: u64,
    pub burst: u64,
    /// Why the limits are what they are (the last change).
    pub reason: String,
    pub changed_at: Option<Millis>,
    /// What the last step read, and why it changed nothing if it did not.
    pub last_step: String,
    /// "slow_start" until the first breach after a (re)start, then "steady".
    pub phase: &'static str,
}

impl Status {
    /// The status of a room whose autopilot is off: the room's own limits.
    pub fn disabled(total_active_users: u64, new_users_per_minute: u64, burst: u64) -> Self {
        Self {
            enabled: false,
            paused: false,
            total_active_users,
            new_users_per_minute,
            burst,
            reason: "autopilot off: the room's settings apply".into(),
            changed_at: None,
            last_step: String::new(),
            phase: "off",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Growing by half at a time, as TCP's slow start, until the first sign of the knee.
    SlowStart,
    Steady,
}

/// A decrease goes to between half (one window cannot empty the room, whatever it measured) and
/// 95 % (a breach always moves the limit) of the window's occupancy.
const CUT_DEEPEST: f64 = 0.5;
const CUT_SHALLOWEST: f64 = 0.95;
/// A window in which the room was still above the limit cuts it by about a third at most.
const DRAINING_CUT_DEEPEST: f64 = 0.65;
/// A window whose p95 is more than this many times the target (and the room not draining)
/// halves the occupancy.
const SEVERE_BREACH: f64 = 2.0;
/// A probe past the knee the last breach showed: 2 % of the capacity, one visitor at least. Five
/// probes without a breach take the room 10 % past it, where the breach is forgotten.
const PROBE_STEP: f64 = 0.02;
/// Patience doubles at most 5 times: 32 calm windows (about 5 minutes of 10 s windows).
const MAX_PATIENCE_DOUBLINGS: u32 = 5;
/// "At the limit": the room's peak occupancy in the window within 5 % of the capacity.
const SATURATED_PERCENT: u64 = 95;

enum Verdict {
    Hold(String),
    Change {
        direction: Direction,
        capacity: u64,
        reason: String,
    },
}

/// Steers one room's limits. See the module's documentation for the rules.
#[derive(Debug, Clone)]
pub struct Controller {
    settings: Settings,
    /// The operator's starting point, as given: the ratios of rate and burst to capacity.
    start: Setpoint,
    current: Setpoint,
    phase: Phase,
    paused: bool,
    /// Windows that began earlier are not judged: they saw limits since replaced.
    judge_from: Millis,
    /// The end of the window that made the last change up or down.
    last_change_at: Option<Millis>,
    /// Where the last breach put the knee: the occupancy at which p95 would have met the target
    /// (the breached window's occupancy less its queue). Increases approach it by halves.
    ceiling: Option<u64>,
    /// Breaches in a row that put the knee at about the same place (within 10 %): each doubles
    /// the calm windows needed before approaching it or probing past it again, so probing the
    /// knee gets rarer.
    breaches_here: u32,
    /// Healthy, full windows in a row since the last change.
    calm: u32,
    /// Windows in a row in the hysteresis band: two end slow start (one can be the burst of a
    /// room filling up).
    in_band: u32,
    reason: String,
    changed_at: Option<Millis>,
    last_step: String,
}

impl Controller {
    /// A controller starting from the room's limits (clamped into the bounds).
    pub fn new(settings: Settings, start: Setpoint, now: Millis) -> Result<Self, SettingsError> {
        settings.validate()?;
        let mut c = Self {
            settings,
            start,
            current: start,
            phase: Phase::SlowStart,
            paused: false,
            judge_from: now,
            last_change_at: None,
            ceiling: None,
            breaches_here: 0,
            calm: 0,
            in_band: 0,
            reason: String::new(),
            changed_at: None,
            last_step: String::new(),
        };
        c.restart(now, start, "starting point: the room's settings");
        Ok(c)
    }

    /// A controller taking over limits an earlier leader set (read back from the store): the
    /// ratios still come from the room's settings (`start`), the limits in force are `current`
    /// (clamped into the bounds), and it goes on in its steady phase: a new leader does not
    /// jump by half from limits that were already tuned. Its memory of the knee is lost; the
    /// next breach teaches it again.
    pub fn restore(
        settings: Settings,
        start: Setpoint,
        current: Setpoint,
        now: Millis,
    ) -> Result<Self, SettingsError> {
        let mut c = Self::new(settings, start, now)?;
        let capacity = c.settings.clamp(current.total_active_users);
        c.apply(
            now,
            Direction::Set,
            capacity,
            format!("taken over from the previous leader ({current})"),
        );
        c.phase = Phase::Steady;
        Ok(c)
    }

    /// The limits in force.
    pub fn setpoint(&self) -> Setpoint {
        self.current
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    pub fn is_paused(&self) -> bool {
        self.paused
    }

    pub fn status(&self) -> Status {
        Status {
            enabled: true,
            paused: self.paused,
            total_active_users: self.current.total_active_users,
            new_users_per_minute: self.current.new_users_per_minute,
            burst: self.current.burst,
            reason: self.reason.clone(),
            changed_at: self.changed_at,
            last_step: self.last_step.clone(),
            phase: match self.phase {
                Phase::SlowStart => "slow_start",
                Phase::Steady => "steady",
            },
        }
    }

    /// An operator's live change of the room's limits: the new starting point (clamped into the
    /// bounds), with slow start again. Returns the change when the limits in force move.
    pub fn reset(&mut self, now: Millis, start: Setpoint) -> Option<Decision> {
        self.restart(
            now,
            start,
            "new starting point: the operator changed the room's limits",
        )
    }

    /// New `[autopilot]` settings (a reload): the capacity is clamped into the new bounds.
    pub fn reconfigure(
        &mut self,
        now: Millis,
        settings: Settings,
    ) -> Result<Option<Decision>, SettingsError> {
        settings.validate()?;
        self.settings = settings;
        let capacity = self.settings.clamp(self.current.total_active_users);
        if capacity == self.current.total_active_users {
            return Ok(None);
        }
        let reason = format!(
            "new bounds [{}, {}]",
            self.settings.min_active_users, self.settings.max_active_users
        );
        self.judge_from = now;
        Ok(Some(self.apply(now, Direction::Set, capacity, reason)))
    }

    /// Stops judging windows; the limits in force stay as they are.
    pub fn pause(&mut self, now: Millis) {
        self.paused = true;
        self.last_step = format!("paused at {now}");
    }

    /// Judges again, from the next window that begins after now.
    pub fn resume(&mut self, now: Millis) {
        self.paused = false;
        self.judge_from = now;
        self.last_step = format!("resumed at {now}: judging windows that begin from now on");
    }

    /// Judges one window: `window` is the origin's health over it (all instances), `room` what the
    /// leader saw of the room over it. Returns the change of limits, if any; the reading and the
    /// reason for a hold go to [`Controller::status`].
    pub fn step(
        &mut self,
        now: Millis,
        window: &Signal,
        room: RoomObservation,
    ) -> Option<Decision> {
        match self.judge(window, room) {
            Verdict::Hold(why) => {
                self.last_step = why;
                None
            }
            Verdict::Change {
                direction,
                capacity,
                reason,
            } => {
                // The window is spent: the next one judged begins after it.
                self.judge_from = self.judge_from.max(window.ended_at);
                self.last_change_at = Some(window.ended_at);
                self.calm = 0;
                self.last_step = reason.clone();
                Some(self.apply(now, direction, capacity, reason))
            }
        }
    }

    fn restart(&mut self, now: Millis, start: Setpoint, why: &str) -> Option<Decision> {
        self.start = Setpoint {
            total_active_users: start.total_active_users.max(1),
            new_users_per_minute: start.new_users_per_minute.max(1),
            burst: start.burst.max(1),
        };
        self.phase = Phase::SlowStart;
        self.forget_breach();
        self.calm = 0;
        self.in_band = 0;
        self.judge_from = now;
        let capacity = self.settings.clamp(self.start.total_active_users);
        let mut reason = format!("{why} ({})", self.start);
        if capacity != self.start.total_active_users {
            reason.push_str(&format!(
                ", capacity clamped into [{}, {}]",
                self.settings.min_active_users, self.settings.max_active_users
            ));
        }
        let before = self.current;
        let decision = self.apply(now, Direction::Set, capacity, reason);
        (decision.to != before).then_some(decision)
    }

    fn forget_breach(&mut self) {
        self.ceiling = None;
        self.breaches_here = 0;
    }

    /// Calm windows needed before approaching the last breach again: 1, 2, 4... up to 32.
    fn patience(&self) -> u32 {
        1 << self
            .breaches_here
            .saturating_sub(1)
            .min(MAX_PATIENCE_DOUBLINGS)
    }

    /// The rate and burst that go with a capacity: the starting point's ratios, at least 1.
    fn setpoint_for(&self, capacity: u64) -> Setpoint {
        let scale = |value: u64| -> u64 {
            let c0 = u128::from(self.start.total_active_users);
            let scaled = (u128::from(capacity) * u128::from(value) + c0 / 2) / c0;
            u64::try_from(scaled).unwrap_or(u64::MAX).max(1)
        };
        Setpoint {
            total_active_users: capacity,
            new_users_per_minute: scale(self.start.new_users_per_minute),
            burst: scale(self.start.burst),
        }
    }

    fn apply(
        &mut self,
        now: Millis,
        direction: Direction,
        capacity: u64,
        reason: String,
    ) -> Decision {
        let from = self.current;
        self.current = self.setpoint_for(capacity);
        self.changed_at = Some(now);
        self.reason = reason.clone();
        Decision {
            at: now,
            direction,
            from,
            to: self.current,
            reason,
        }
    }

    fn judge(&mut self, window: &Signal, room: RoomObservation) -> Verdict {
        let s = self.settings.clone();
        if self.paused {
            return Verdict::Hold("paused".into());
        }
        if window.started_at < self.judge_from {
            return Verdict::Hold(format!(
                "window {}..{} began before the last change or restart ({}): not judged",
                window.started_at, window.ended_at, self.judge_from
            ));
        }
        if window.requests < s.min_requests {
            return Verdict::Hold(format!(
                "{} origin requests in the window, fewer than {}: not enough to judge, limits stay",
                window.requests, s.min_requests
            ));
        }
        if let Some(last) = self.last_change_at {
            // Measured between judged windows, not ticks: a leader's tick lands up to a tick
            // later than the last one after a window's end, and the next window after a change
            // must not be refused for that.
            let since = window.ended_at - last;
            if since < duration_ms(s.min_interval) {
                return Verdict::Hold(format!(
                    "last change {} ago, less than min_interval {}",
                    ms(since),
                    ms(duration_ms(s.min_interval))
                ));
            }
        }
        let capacity = self.current.total_active_users;
        // A p95 from fewer latencies than min_requests (most exchanges failed) is not read.
        let p95 = window
            .p95()
            .filter(|_| window.latency.count() >= s.min_requests);
        let errors = window.error_rate().unwrap_or(0.0);
        let target_us = s.latency_target.as_micros() as f64;
        let in_flight = window.in_flight();
        let reading = format!(
            "p95 {} (target {}), errors {:.1} % of {} (max {:.1} %), {:.1} in flight at the origin, {} inside of {}, {} waiting",
            p95.map_or_else(|| "unknown".to_string(), ms_f),
            ms_f(s.latency_target),
            errors * 100.0,
            window.requests,
            s.error_rate_max * 100.0,
            in_flight,
            room.occupancy,
            capacity,
            room.waiting
        );

        // Breach: down to the occupancy the measurement says the origin can take.
        let occupancy = room.occupancy as f64;
        // The occupancy at which p95 would have been `aim`: of the requests in flight, the share
        // beyond what that p95 allows are queued, one visitor each (Vegas's queue estimate,
        // measured against the target instead of a no-load latency).
        let without_queue = |aim_us: f64| {
            let p95_us = p95.map_or(0.0, |p| p.as_micros() as f64);
            let latency =
                (p95_us > target_us).then(|| occupancy - in_flight * (1.0 - aim_us / p95_us));
            let errors = (errors > s.error_rate_max).then(|| occupancy * s.error_rate_max / errors);
            latency.into_iter().chain(errors).reduce(f64::min)
        };
        // Aim at the middle of the band, so that the next window neither breaches nor grows.
        if let Some(wanted) = without_queue(target_us * (1.0 - s.hysteresis / 2.0)) {
            self.phase = Phase::Steady;
            self.calm = 0;
            self.in_band = 0;
            let knee = without_queue(target_us)
                .unwrap_or(occupancy)
                .clamp(0.0, occupancy) as u64;
            let same_place = self
                .ceiling
                .is_some_and(|b| knee * 10 >= b * 9 && knee * 10 <= b * 11);
            self.breaches_here = if same_place {
                self.breaches_here.saturating_add(1)
            } else {
                1
            };
            self.ceiling = Some(knee);
            let mut wanted = wanted.clamp(occupancy * CUT_DEEPEST, occupancy * CUT_SHALLOWEST);
            let draining = room.peak > capacity;
            let severe = p95.is_some_and(|p| p.as_micros() as f64 > SEVERE_BREACH * target_us);
            let how = if draining {
                // Still draining after the last cut: the window's p95 is the load before the
                // cut's, its mean occupancy partly the load after it, and together they ask for
                // too deep a cut. About a third off the limit at most; the next window at the
                // limit reads true (NewReno cuts once per window of data in flight, in spirit).
                wanted = wanted.max(capacity as f64 * DRAINING_CUT_DEEPEST);
                format!(
                    "; the room was still above the limit (up to {} inside): a third off at most",
                    room.peak
                )
            } else if severe {
                // The origin itself changed (a slower deploy, a cold cache): the window mixes
                // the load before the change with the latency after it, its mean in-flight
                // count reads too little of the queue, and the estimate cuts too little. Half
                // the occupancy, as TCP halves on a loss; the windows after it refine.
                wanted = occupancy * CUT_DEEPEST;
                format!("; p95 over {SEVERE_BREACH} times the target: half the occupancy")
            } else {
                String::new()
            };
            let proposed = s.clamp(wanted.floor() as u64);
            if proposed < capacity {
                return Verdict::Change {
                    direction: Direction::Down,
                    capacity: proposed,
                    reason: format!("breach: {reading}{how} -> {proposed}"),
                };
            }
            return Verdict::Hold(if capacity <= s.min_active_users {
                format!("breach: {reading}; already at min_active_users")
            } else {
                format!(
                    "breach: {reading}; {proposed} would not be lower: the last decrease is still taking effect as visitors leave"
                )
            });
        }

        // Healthy enough to grow?
        let room_to_grow = 1.0 - s.hysteresis;
        let latency_low = p95.is_some_and(|p| p.as_micros() as f64 <= target_us * room_to_grow);
        let errors_low = errors <= s.error_rate_max * room_to_grow;
        if !(latency_low && errors_low) {
            self.calm = 0;
            self.in_band = self.in_band.saturating_add(1);
            if self.in_band >= 2 {
                self.phase = Phase::Steady;
            }
            return Verdict::Hold(format!(
                "{reading}: within the hysteresis band (grows only below {:.0} % of the limits)",
                room_to_grow * 100.0
            ));
        }
        self.in_band = 0;
        // The peak, not the mean: a window after a raise ran its first tick or two (the leader's
        // grace) under the old limit, and its mean stays below the new one however fast the
        // room filled it.
        let saturated = room.waiting > 0 && room.peak * 100 >= capacity * SATURATED_PERCENT;
        if !saturated {
            self.calm = 0;
            return Verdict::Hold(format!(
                "healthy, {reading}: the room was not full with people waiting all window, a limit traffic did not reach is not raised"
            ));
        }
        if capacity >= s.max_active_users {
            return Verdict::Hold(format!("healthy, {reading}: at max_active_users"));
        }
        self.calm = self.calm.saturating_add(1);
        // How far below the band: 1 at half its floor or lower, 0 at the floor. Latency is flat
        // until the knee, then climbs: the closer to the band, the smaller the steps (as Vegas
        // grows fast with no queue and by little with a short one).
        let band_floor_us = target_us * room_to_grow;
        let p95_us = p95.map_or(band_floor_us, |p| p.as_micros() as f64);
        let headroom = (2.0 * (1.0 - p95_us / band_floor_us)).clamp(0.0, 1.0);
        if headroom >= 1.0 {
            // Far below the band: whatever breached before, the origin has room now.
            self.forget_breach();
        }
        let (step, how) = match (self.phase, self.ceiling) {
            (Phase::SlowStart, _) => (
                (capacity.div_ceil(2) as f64 * headroom).ceil() as u64,
                "slow start, +50 %, less as p95 nears the band",
            ),
            (Phase::Steady, Some(breach)) => {
                // Towards the knee the last breach showed, then past it by small probes
                // (CUBIC's plateau around its last loss); both wait longer each time the knee
                // breaches at the same place. A knee sharper than a square-root step (a few
                // visitors from the band's floor to the target) was otherwise probed every few
                // windows, each probe a window over the target.
                let towards = capacity < breach;
                let what = if towards {
                    "approaching"
                } else {
                    "probing past"
                };
                if self.calm < self.patience() {
                    return Verdict::Hold(format!(
                        "healthy and full, {reading}: calm window {} of {} before {what} the knee the last breach showed ({breach})",
                        self.calm,
                        self.patience()
                    ));
                }
                if towards {
                    (
                        ((breach - capacity) / 2).max(1),
                        "half way to the knee the last breach showed",
                    )
                } else {
                    (
                        (capacity as f64 * PROBE_STEP).ceil() as u64,
                        "probing past the knee the last breach showed, +2 %",
                    )
                }
            }
            (Phase::Steady, None) => (
                (isqrt_ceil(capacity) as f64 * headroom).ceil() as u64,
                "+sqrt(capacity), less as p95 nears the band",
            ),
        };
        // Never more than +50 % at once, even where a square root is more (tiny rooms).
        let proposed = s.clamp(capacity + step.clamp(1, capacity.div_ceil(2)));
        if self.ceiling.is_some_and(|b| proposed * 10 > b * 11) {
            // Healthy and full beyond where a breach would count as the same knee: the last
            // breach no longer describes the origin.
            self.forget_breach();
        }
        Verdict::Change {
            direction: Direction::Up,
            capacity: proposed,
            reason: format!("healthy and full: {reading}; {how} -> {proposed}"),
        }
    }
}

fn isqrt_ceil(n: u64) -> u64 {
    let r = n.isqrt();
    if r * r < n { r + 1 } else { r }
}

fn ms(v: Millis) -> String {
    if v % 1000 == 0 {
        format!("{}s", v / 1000)
    } else {
        format!("{v}ms")
    }
}

fn ms_f(d: Duration) -> String {
    let us = d.as_micros();
    if us >= 10_000 {
        format!("{} ms", us / 1000)
    } else {
        format!("{:.1} ms", us as f64 / 1000.0)
    }
}
