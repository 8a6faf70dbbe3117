//! A simulated shop and crowd for the autopilot's tests: discrete events on a fake clock, no
//! sleeps, the same seed always gives the same run.
//!
//! The origin has `workers` workers and a service time (uniform within +-50 % of `service_ms`):
//! a request is served at once while a worker is free, else it waits its turn (first come,
//! first served), so latency stays near the service time up to `workers` requests in flight and
//! then grows with the line: a knee at `workers` in flight, `workers / service` requests a second
//! at most. The service time can change mid-run (`slowdowns`).
//!
//! A visitor inside the room views `pages` pages: a request, the response, a think time
//! (uniform within +-50 % of `think_ms`), the next request; after the last page it leaves and
//! frees its place. So in flight ~ occupancy x latency / (latency + think), and a slow origin
//! also keeps visitors inside longer. The room admits every 200 ms (the admission loop's default
//! tick): within the capacity, through the real token bucket, from a crowd of `crowd` people.
//! Every `window` the instance's [`Recorder`] hands its window to the [`Controller`], with what
//! the ticks saw of the room, at the first tick after the leader's grace (as the proxy does: the
//! next window's first ticks still run under the limits it replaces).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::*;
use crate::clock::Millis;
use crate::core::bucket::TokenBucket;

const SECOND_US: i64 = 1_000_000;
/// The admission loop's tick, as the proxy's default `admission_interval`.
const TICK_US: i64 = 200_000;

#[derive(Debug, Clone)]
pub struct Scenario {
    pub workers: usize,
    pub service_ms: f64,
    /// `(at_ms, factor)`: from `at_ms` on, the service time is `service_ms * factor`.
    pub slowdowns: Vec<(Millis, f64)>,
    pub pages: u32,
    pub think_ms: f64,
    /// People who want in (waiting from the start); `u64::MAX`: an endless crowd.
    pub crowd: u64,
    /// People who join the line each minute, on top of the crowd.
    pub arrivals_per_minute: u64,
    pub start: Setpoint,
    /// None: the limits stay at `start` (a static setting).
    pub autopilot: Option<Settings>,
    pub duration_ms: Millis,
    pub seed: u64,
}

impl Scenario {
    /// The shop of the scenario tests: 8 workers of 50 ms (160 requests/s at most), visits of
    /// 10 pages with 1 s of thought between them (about 11 s inside), an endless crowd, a rate of
    /// 10 admissions a minute per place (Little's law needs about 5.5).
    pub fn shop(capacity: u64) -> Self {
        Self {
            workers: 8,
            service_ms: 50.0,
            slowdowns: Vec::new(),
            pages: 10,
            think_ms: 1000.0,
            crowd: u64::MAX,
            arrivals_per_minute: 0,
            start: Setpoint {
                total_active_users: capacity,
                new_users_per_minute: capacity * 10,
                burst: capacity * 10,
            },
            autopilot: Some(Settings::default()),
            duration_ms: 300_000,
            seed: 16,
        }
    }

    pub fn fixed(mut self) -> Self {
        self.autopilot = None;
        self
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    /// The admission tick (and, on window boundaries, the controller's step).
    Tick,
    /// A visitor sends its next request.
    Send { visitor: u32 },
    /// A worker finishes the request a visitor sent at `sent_at`.
    Done { visitor: u32, sent_at: i64 },
}

/// One completed request: when it ended and how long it took (us).
#[derive(Debug, Clone, Copy)]
pub struct Completion {
    pub at_us: i64,
    pub latency_us: i64,
}

/// A second of the run, sampled at its admission tick.
#[derive(Debug, Clone, Copy)]
pub struct Second {
    pub at_ms: Millis,
    pub capacity: u64,
    pub occupancy: u64,
}

#[derive(Debug, Default)]
pub struct Run {
    pub completions: Vec<Completion>,
    pub seconds: Vec<Second>,
    pub decisions: Vec<LimitChange>,
    /// What the controller said at each window, `(at_ms, last_step)`.
    pub steps: Vec<(Millis, String)>,
}

impl Run {
    fn span(&self, from_ms: Millis, to_ms: Millis) -> impl Iterator<Item = &Completion> {
        self.completions
            .iter()
            .filter(move |c| c.at_us >= from_ms * 1000 && c.at_us < to_ms * 1000)
    }

    /// Exact p95 (nearest rank, ms) of the requests completed in `[from, to)`; None if none.
    pub fn p95_ms(&self, from_ms: Millis, to_ms: Millis) -> Option<f64> {
        let mut l: Vec<i64> = self.span(from_ms, to_ms).map(|c| c.latency_us).collect();
        if l.is_empty() {
            return None;
        }
        l.sort_unstable();
        let rank = (l.len() * 95).div_ceil(100);
        Some(l[rank - 1] as f64 / 1000.0)
    }

    /// Requests completed per second in `[from, to)`.
    pub fn throughput(&self, from_ms: Millis, to_ms: Millis) -> f64 {
        self.span(from_ms, to_ms).count() as f64 * 1000.0 / (to_ms - from_ms) as f64
    }

    pub fn capacity_at(&self, at_ms: Millis) -> u64 {
        self.seconds
            .iter()
            .rev()
            .find(|s| s.at_ms <= at_ms)
            .or(self.seconds.first())
            .map_or(0, |s| s.capacity)
    }

    /// Changes of direction (a decrease after an increase or the reverse) in `[from, to)`.
    pub fn reversals(&self, from_ms: Millis, to_ms: Millis) -> usize {
        let moves: Vec<Direction> = self
            .decisions
            .iter()
            .filter(|d| d.at >= from_ms && d.at < to_ms && d.direction != Direction::Set)
            .map(|d| d.direction)
            .collect();
        moves.windows(2).filter(|w| w[0] != w[1]).count()
    }

    /// The first window boundary from which no two windows in a row up to `to_ms` have a p95
    /// above `target_ms`: the run has settled there. A window over it alone is a probe of the
    /// knee, or the shop's own noise at the knee; the
    /// callers count those apart. None if it never settles.
    pub fn settled_at(&self, window_ms: Millis, target_ms: f64, to_ms: Millis) -> Option<Millis> {
        let mut settled = None;
        let mut previous_over = false;
        let mut t = 0;
        while t + window_ms <= to_ms {
            let over = self.p95_ms(t, t + window_ms).is_some_and(|p| p > target_ms);
            if over && previous_over {
                settled = None;
            } else if !over {
                settled.get_or_insert(t);
            }
            previous_over = over;
            t += window_ms;
        }
        settled
    }
}

struct Sim {
    s: Scenario,
    rng: StdRng,
    events: BinaryHeap<Reverse<(i64, u64, Event)>>,
    seq: u64,
    busy: usize,
    line: VecDeque<(u32, i64)>,
    pages_left: Vec<u32>,
    free_visitors: Vec<u32>,
    inside: u64,
    waiting: u64,
    limits: Setpoint,
    bucket: TokenBucket,
    recorder: Recorder,
    room: RoomWindow,
    /// Finished windows waiting for the leader's grace before they are judged.
    judging: VecDeque<(Signal, RoomObservation)>,
    controller: Option<Controller>,
    run: Run,
}

impl Sim {
    fn schedule(&mut self, at: i64, event: Event) {
        self.seq += 1;
        self.events.push(Reverse((at, self.seq, event)));
    }

    fn spread(&mut self, mean: f64) -> i64 {
        (mean * self.rng.random_range(0.5..1.5)) as i64
    }

    fn service_us(&mut self, now: i64) -> i64 {
        let factor = self
            .s
            .slowdowns
            .iter()
            .rev()
            .find(|(at, _)| now >= at * 1000)
            .map_or(1.0, |(_, f)| *f);
        let mean = self.s.service_ms * 1000.0 * factor;
        self.spread(mean).max(1)
    }

    fn start_service(&mut self, now: i64, visitor: u32, sent_at: i64) {
        self.busy += 1;
        let service = self.service_us(now);
        self.schedule(now + service, Event::Done { visitor, sent_at });
    }

    fn send(&mut self, now: i64, visitor: u32) {
        if self.busy < self.s.workers {
            self.start_service(now, visitor, now);
        } else {
            self.line.push_back((visitor, now));
        }
    }

    fn done(&mut self, now: i64, visitor: u32, sent_at: i64) {
        self.busy -= 1;
        if let Some((next, its_sent_at)) = self.line.pop_front() {
            self.start_service(now, next, its_sent_at);
        }
        let latency = now - sent_at;
        self.run.completions.push(Completion {
            at_us: now,
            latency_us: latency,
        });
        let finished = self.recorder.record(
            now / 1000,
            Exchange::Response {
                status: 200,
                latency: Duration::from_micros(latency as u64),
            },
        );
        assert!(finished.is_none(), "the tick closes each window first");
        let v = visitor as usize;
        self.pages_left[v] -= 1;
        if self.pages_left[v] == 0 {
            self.inside -= 1;
            self.free_visitors.push(visitor);
        } else {
            let think = self.spread(self.s.think_ms * 1000.0);
            self.schedule(now + think, Event::Send { visitor });
        }
    }

    fn tick(&mut self, now: i64) {
        let now_ms = now / 1000;
        if let Some(window) = self.recorder.roll(now_ms)
            && let Some(seen) = self.room.take()
        {
            self.judging.push_back((window, seen));
        }
        while let Some((window, seen)) = self.judging.pop_front_if(|(window, _)| {
            now_ms >= window.ended_at + judging_grace(window.ended_at - window.started_at)
        }) {
            if let Some(controller) = self.controller.as_mut() {
                if let Some(decision) = controller.step(now_ms, &window, seen) {
                    self.limits = decision.to;
                    self.run.decisions.push(decision);
                }
                self.run.steps.push((now_ms, controller.status().last_step));
            }
        }
        let arrived = self.s.arrivals_per_minute * (now_ms as u64 + TICK_US as u64 / 1000) / 60_000
            - self.s.arrivals_per_minute * now_ms as u64 / 60_000;
        self.waiting = self.waiting.saturating_add(arrived);
        let l = self.limits;
        self.bucket.refill(now_ms, l.new_users_per_minute, l.burst);
        let room_left = l.total_active_users.saturating_sub(self.inside);
        let admit = self.bucket.available().min(room_left).min(self.waiting);
        self.bucket.take(admit);
        self.waiting -= admit;
        self.inside += admit;
        for _ in 0..admit {
            let visitor = match self.free_visitors.pop() {
                Some(v) => v,
                None => {
                    self.pages_left.push(0);
                    (self.pages_left.len() - 1) as u32
                }
            };
            self.pages_left[visitor as usize] = self.s.pages;
            // Admitted visitors show up within the second, on their next poll.
            let arrives = now + self.rng.random_range(0..SECOND_US);
            self.schedule(arrives, Event::Send { visitor });
        }
        self.room.tick(self.inside, self.waiting);
        if now % SECOND_US == 0 {
            self.run.seconds.push(Second {
                at_ms: now_ms,
                capacity: l.total_active_users,
                occupancy: self.inside,
            });
        }
        if now_ms + TICK_US / 1000 < self.s.duration_ms {
            self.schedule(now + TICK_US, Event::Tick);
        }
    }
}

/// Runs a scenario to its end.
pub fn run(s: &Scenario) -> Run {
    let window = s
        .autopilot
        .as_ref()
        .map_or(Duration::from_secs(10), |a| a.window);
    let controller = s
        .autopilot
        .clone()
        .map(|settings| Controller::new(settings, s.start, 0).expect("valid settings"));
    let limits = controller.as_ref().map_or(s.start, Controller::setpoint);
    let mut sim = Sim {
        rng: StdRng::seed_from_u64(s.seed),
        events: BinaryHeap::new(),
        seq: 0,
        busy: 0,
        line: VecDeque::new(),
        pages_left: Vec::new(),
        free_visitors: Vec::new(),
        inside: 0,
        waiting: s.crowd,
        limits,
        bucket: TokenBucket::full(limits.burst, 0),
        recorder: Recorder::new(window, 0),
        room: RoomWindow::default(),
        judging: VecDeque::new(),
        controller,
        run: Run::default(),
        s: s.clone(),
    };
    sim.schedule(0, Event::Tick);
    while let Some(Reverse((at, _, event))) = sim.events.pop() {
        if at >= s.duration_ms * 1000 {
            break;
        }
        match event {
            Event::Tick => sim.tick(at),
            Event::Send { visitor } => sim.send(at, visitor),
            Event::Done { visitor, sent_at } => sim.done(at, visitor, sent_at),
        }
    }
    sim.run
}

/// The best static capacity for a scenario: every capacity of `capacities` run without the
/// autopilot; the highest throughput over `[from_ms, end)` among those whose p95 over that span
/// stays within `target_ms`. Returns `(capacity, throughput)`.
pub fn best_static(
    s: &Scenario,
    capacities: impl IntoIterator<Item = u64>,
    from_ms: Millis,
    target_ms: f64,
) -> (u64, f64) {
    let mut best = (0, 0.0);
    for capacity in capacities {
        let mut fixed = s.clone().fixed();
        fixed.start = Setpoint {
            total_active_users: capacity,
            new_users_per_minute: capacity * s.start.new_users_per_minute
                / s.start.total_active_users,
            burst: capacity * s.start.burst / s.start.total_active_users,
        };
        let r = run(&fixed);
        let p95 = r.p95_ms(from_ms, s.duration_ms).unwrap_or(f64::INFINITY);
        let throughput = r.throughput(from_ms, s.duration_ms);
        if p95 <= target_ms && throughput > best.1 {
            best = (capacity, throughput);
        }
    }
    best
}
