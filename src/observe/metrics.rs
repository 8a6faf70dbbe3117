//! Prometheus families: one registry per proxy (so several can run in one test process), every
//! family labelled with the room, each room's series resolved once (`Metrics`).

use super::labels::{
    ChallengeResult, EntryResult, NotifyResult, ORIGIN_CLASSES, Outcome, ProofResult,
    StreamRefusal, UpgradeRefusal, UpstreamFailure,
};
#[cfg(target_os = "linux")]
use super::memory_limit::MemoryLimit;
use std::sync::Mutex;

use prometheus::{
    Encoder, Gauge, GaugeVec, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec,
    IntGauge, IntGaugeVec, Opts, Registry, TextEncoder,
};

/// Every metric the proxy exports (histograms add `_bucket`, `_sum`, `_count`): dashboards and
/// alert rules are checked against this list, and a test keeps it equal to the registry.
pub const NAMES: &[&str] = &[
    "waitroom_occupancy",
    "waitroom_capacity",
    "waitroom_rate_per_minute",
    "waitroom_admitting",
    "waitroom_queue_length",
    "waitroom_admitted_total",
    "waitroom_abandoned_total",
    "waitroom_revoked_total",
    "waitroom_expired_total",
    "waitroom_no_shows_total",
    "waitroom_wait_seconds",
    "waitroom_requests_total",
    "waitroom_tickets_refused_total",
    "waitroom_upstream_errors_total",
    "waitroom_origin_responses_total",
    "waitroom_origin_seconds",
    "waitroom_store_errors_total",
    "waitroom_store_up",
    "waitroom_store_replica_ack_timeouts_total",
    "waitroom_leader",
    "waitroom_prequeueing",
    "waitroom_order_inversions_total",
    "waitroom_order_pairs_total",
    "waitroom_order_tau",
    "waitroom_turnstile_verifications_total",
    "waitroom_turnstile_parked_total",
    "waitroom_proofs_total",
    "waitroom_proof_seeds_total",
    "waitroom_entries_total",
    "waitroom_notifications_total",
    "waitroom_autopilot_total_active_users",
    "waitroom_autopilot_new_users_per_minute",
    "waitroom_origin_inflight",
    "waitroom_passes_shared_total",
    "waitroom_pass_requests_limited_total",
    "waitroom_event_streams_refused_total",
    "waitroom_body_timeouts_total",
    "waitroom_client_address_unparsed_total",
    "waitroom_upgrades_refused_total",
    "waitroom_rule_matches_total",
    "waitroom_origin_resolve_failures_total",
    "waitroom_origin_addresses",
];

/// `waitroom_wait_seconds`' buckets' upper bounds (s): the drop report's wait quantiles are
/// read within them.
pub const WAIT_BOUNDS: &[f64] = &[
    1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1200.0, 1800.0, 3600.0, 7200.0,
];
/// `waitroom_origin_seconds`' buckets' upper bounds (s).
pub const ORIGIN_BOUNDS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// The histograms among `NAMES`.
pub const HISTOGRAMS: &[&str] = &["waitroom_wait_seconds", "waitroom_origin_seconds"];

/// The process's memory limit, its control group's (`memory_limit`).
const MEMORY_LIMIT: &str = "waitroom_memory_limit_bytes";

/// The metrics of the process as a whole, with no room label (Linux only: they read /proc and
/// the control groups), in the same registry: the prometheus crate's process collector (memory,
/// file descriptors, CPU time, threads) and the memory limit.
pub const PROCESS_NAMES: &[&str] = if cfg!(target_os = "linux") {
    &[
        "process_cpu_seconds_total",
        "process_open_fds",
        "process_max_fds",
        "process_virtual_memory_bytes",
        "process_resident_memory_bytes",
        "process_start_time_seconds",
        "process_threads",
        MEMORY_LIMIT,
    ]
} else {
    &[]
};

/// One room's series, resolved once from the proxy's families: no label hashing per request.
pub struct Metrics {
    pub occupancy: IntGauge,
    pub capacity: IntGauge,
    pub rate_per_minute: IntGauge,
    pub admitting: IntGauge,
    pub queue_length: IntGauge,
    pub admitted: IntCounter,
    pub abandoned: IntCounter,
    pub revoked: IntCounter,
    pub expired: IntCounter,
    pub no_shows: IntCounter,
    pub wait_seconds: Histogram,
    /// Every wait (ms) from ticket to admission since the drop report's history last took them
    /// (`take_waits`): its quantiles are exact, where a histogram's lie within a bucket. One
    /// entry per admission from the line, which the room's rate bounds.
    waits: Mutex<Vec<u32>>,
    requests: [IntCounter; Outcome::ALL.len()],
    /// New tickets refused by the per-address limit: too fast, or too many in line.
    pub refused_too_fast: IntCounter,
    pub refused_too_many_live: IntCounter,
    upstream_errors: [IntCounter; UpstreamFailure::ALL.len()],
    origin_responses: [IntCounter; 5],
    pub origin_seconds: Histogram,
    pub store_errors: IntCounter,
    pub store_up: IntGauge,
    /// Admissions whose write fewer replicas acknowledged than `store.replica_acks` asked, in
    /// time (the visitor was let in all the same).
    pub store_replica_ack_timeouts: IntCounter,
    pub leader: IntGauge,
    pub prequeueing: IntGauge,
    pub order_inversions: IntCounter,
    pub order_pairs: IntCounter,
    pub order_tau: Gauge,
    turnstile_verifications: [IntCounter; 4],
    pub turnstile_parked: IntCounter,
    proofs: [IntCounter; 5],
    /// Proof-of-work seeds handed out (each a challenge shown; nothing stored for it).
    pub proof_seeds: IntCounter,
    entries: [IntCounter; 5],
    notifications: [IntCounter; NotifyResult::ALL.len()],
    /// The limits in force (the autopilot's setpoint, or the room's own when it is off).
    pub autopilot_total_active_users: IntGauge,
    pub autopilot_new_users_per_minute: IntGauge,
    /// This instance's requests of the room waiting for the origin's response header.
    pub origin_inflight: IntGauge,
    /// Passes revoked because they were used from more networks than `pass.max_networks`.
    pub passes_shared: IntCounter,
    /// Pass holders' requests refused by `pass.max_requests_per_minute`.
    pub pass_requests_limited: IntCounter,
    /// Event streams answered "poll instead", by reason.
    event_streams_refused: [IntCounter; StreamRefusal::ALL.len()],
    /// Connections closed because a request body went silent past `listen.body_timeout` or
    /// arrived slower than `listen.min_body_rate`.
    pub body_timeouts: IntCounter,
    /// Requests whose client address a trusted proxy wrote unreadably (`unknown`, ...).
    pub client_address_unparsed: IntCounter,
    /// Upgrades refused, by stage.
    upgrades_refused: [IntCounter; UpgradeRefusal::ALL.len()],
    /// Requests each rule of `[[room.rules]]` held for: labelled by the rule's name, so the
    /// family with this room's id, the rest given per rule (`rule_held`).
    rule_matches: (IntCounterVec, String),
}

/// The origin's name as looked up in the background (`proxy::origin`): one origin for every
/// room, so not labelled by room.
#[derive(Clone)]
pub struct OriginMetrics {
    /// Lookups of the origin's name that failed (the last good addresses were kept).
    pub resolve_failures: IntCounter,
    /// The addresses the origin's name has now (0: forwarded requests get the 502 page).
    pub addresses: IntGauge,
}

fn must<T>(r: prometheus::Result<T>) -> T {
    // Metric definitions are constants: an error here is a programming mistake caught by the
    // first test that builds a proxy.
    match r {
        Ok(v) => v,
        Err(e) => panic!("invalid metric definition: {e}"),
    }
}

/// The proxy's registry (one per proxy, so several can run in one test process): every family
/// labelled by room, plus the process metrics.
pub struct MetricsRegistry {
    registry: Registry,
    occupancy: IntGaugeVec,
    capacity: IntGaugeVec,
    rate_per_minute: IntGaugeVec,
    admitting: IntGaugeVec,
    queue_length: IntGaugeVec,
    admitted: IntCounterVec,
    abandoned: IntCounterVec,
    revoked: IntCounterVec,
    expired: IntCounterVec,
    no_shows: IntCounterVec,
    wait_seconds: HistogramVec,
    requests: IntCounterVec,
    refused: IntCounterVec,
    upstream_errors: IntCounterVec,
    origin_responses: IntCounterVec,
    origin_seconds: HistogramVec,
    store_errors: IntCounterVec,
    store_up: IntGaugeVec,
    store_replica_ack_timeouts: IntCounterVec,
    leader: IntGaugeVec,
    prequeueing: IntGaugeVec,
    order_inversions: IntCounterVec,
    order_pairs: IntCounterVec,
    order_tau: GaugeVec,
    turnstile_verifications: IntCounterVec,
    turnstile_parked: IntCounterVec,
    proofs: IntCounterVec,
    proof_seeds: IntCounterVec,
    entries: IntCounterVec,
    notifications: IntCounterVec,
    autopilot_total_active_users: IntGaugeVec,
    autopilot_new_users_per_minute: IntGaugeVec,
    origin_inflight: IntGaugeVec,
    passes_shared: IntCounterVec,
    pass_requests_limited: IntCounterVec,
    event_streams_refused: IntCounterVec,
    body_timeouts: IntCounterVec,
    client_address_unparsed: IntCounterVec,
    upgrades_refused: IntCounterVec,
    rule_matches: IntCounterVec,
    origin: OriginMetrics,
}

impl Default for MetricsRegistry {
    fn default() -> Self {
        Self::new()
    }
}

impl MetricsRegistry {
    pub fn new() -> Self {
        let registry = Registry::new();
        let gauge = |name: &str, help: &str| {
            let g = must(IntGaugeVec::new(Opts::new(name, help), &["room"]));
            must(registry.register(Box::new(g.clone())));
            g
        };
        let counter = |name: &str, help: &str, labels: &[&str]| {
            let c = must(IntCounterVec::new(Opts::new(name, help), labels));
            must(registry.register(Box::new(c.clone())));
            c
        };
        let histogram = |name: &str, help: &str, buckets: Vec<f64>| {
            let h = must(HistogramVec::new(
                HistogramOpts::new(name, help).buckets(buckets),
                &["room"],
            ));
            must(registry.register(Box::new(h.clone())));
            h
        };
        let order_tau = must(GaugeVec::new(
            Opts::new(
                "waitroom_order_tau",
                "Kendall's tau between arrival and admission order over this instance's last \
                 1000 admissions: 1 in arrival order (fifo), near 0 for a lottery or a shuffled \
                 pre-queue",
            ),
            &["room"],
        ));
        must(registry.register(Box::new(order_tau.clone())));
        let origin = OriginMetrics {
            resolve_failures: must(IntCounter::new(
                "waitroom_origin_resolve_failures_total",
                "Lookups of origin.address's name that failed (the last good addresses are kept)",
            )),
            addresses: must(IntGauge::new(
                "waitroom_origin_addresses",
                "Addresses known for the origin (0: forwarded requests get the 502 page)",
            )),
        };
        must(registry.register(Box::new(origin.resolve_failures.clone())));
        must(registry.register(Box::new(origin.addresses.clone())));
        #[cfg(target_os = "linux")]
        must(registry.register(Box::new(
            prometheus::process_collector::ProcessCollector::for_self(),
        )));
        #[cfg(target_os = "linux")]
        must(registry.register(Box::new(must(MemoryLimit::new(MEMORY_LIMIT)))));
        let room = &["room"];
        Self {
            occupancy: gauge(
                "waitroom_occupancy",
                "Live passes plus admissions still being claimed, room-wide",
            ),
            capacity: gauge("waitroom_capacity", "total_active_users in effect"),
            rate_per_minute: gauge("waitroom_rate_per_minute", "new_users_per_minute in effect"),
            admitting: gauge(
                "waitroom_admitting",
                "1 when the settings let new visitors in (not queue_all, reject or suspended)",
            ),
            queue_length: gauge("waitroom_queue_length", "Visitors waiting, room-wide"),
            admitted: counter(
                "waitroom_admitted_total",
                "Visitors let in by this instance (directly or claiming their turn)",
                room,
            ),
            abandoned: counter(
                "waitroom_abandoned_total",
                "Waiting visitors dropped after they stopped polling (counted by the leader)",
                room,
            ),
            revoked: counter(
                "waitroom_revoked_total",
                "Passes ended early by the origin command, leave or the admin API",
                room,
            ),
            expired: counter(
                "waitroom_expired_total",
                "Passes that expired (counted by the leader)",
                room,
            ),
            no_shows: counter(
                "waitroom_no_shows_total",
                "Called visitors who never claimed their admission (counted by the leader)",
                room,
            ),
            wait_seconds: histogram(
                "waitroom_wait_seconds",
                "Time from ticket to admission, for visitors admitted by this instance",
                WAIT_BOUNDS.to_vec(),
            ),
            requests: counter(
                "waitroom_requests_total",
                "Requests to a room by outcome",
                &["room", "outcome"],
            ),
            refused: counter(
                "waitroom_tickets_refused_total",
                "New tickets refused by the per-address limit, by reason (rate, live)",
                &["room", "reason"],
            ),
            upstream_errors: counter(
                "waitroom_upstream_errors_total",
                "Requests the origin failed (connect, tls, timeout, status, resolve)",
                &["room", "kind"],
            ),
            origin_responses: counter(
                "waitroom_origin_responses_total",
                "Responses from the origin by status class (1xx, 2xx, 3xx, 4xx, 5xx)",
                &["room", "class"],
            ),
            origin_seconds: histogram(
                "waitroom_origin_seconds",
                "Time from choosing the origin to its response header, for forwarded requests",
                ORIGIN_BOUNDS.to_vec(),
            ),
            store_errors: counter(
                "waitroom_store_errors_total",
                "Store operations that failed",
                room,
            ),
            store_up: gauge(
                "waitroom_store_up",
                "1 when the last store operation succeeded",
            ),
            store_replica_ack_timeouts: counter(
                "waitroom_store_replica_ack_timeouts_total",
                "Admissions whose write fewer replicas than store.replica_acks acknowledged \
                 within store.replica_ack_timeout (let in all the same: a failover to a replica \
                 that lacks the write loses the pass)",
                room,
            ),
            leader: gauge(
                "waitroom_leader",
                "1 when this instance holds the admission leadership",
            ),
            prequeueing: gauge(
                "waitroom_prequeueing",
                "1 while an event's pre-queue is open (everyone queues, nobody is admitted)",
            ),
            order_inversions: counter(
                "waitroom_order_inversions_total",
                "Pairs of admissions (this instance, each against its last 1000) admitted in the \
                 opposite order of their arrival",
                room,
            ),
            order_pairs: counter(
                "waitroom_order_pairs_total",
                "Pairs of admissions compared for order_inversions",
                room,
            ),
            order_tau,
            turnstile_verifications: counter(
                "waitroom_turnstile_verifications_total",
                "Turnstile tokens posted by waiting pages, by outcome",
                &["room", "outcome"],
            ),
            turnstile_parked: counter(
                "waitroom_turnstile_parked_total",
                "Visitors who failed the challenge, parked in a line that never admits them",
                room,
            ),
            proofs: counter(
                "waitroom_proofs_total",
                "Proof-of-work answers posted, by result (passed, wrong, expired, spent, \
                 malformed)",
                &["room", "result"],
            ),
            proof_seeds: counter(
                "waitroom_proof_seeds_total",
                "Proof-of-work seeds handed out to newcomers",
                room,
            ),
            entries: counter(
                "waitroom_entries_total",
                "Members-only lines: entry tokens by result (entered, forged, expired, \
                 other_room) and newcomers without one (required)",
                &["room", "result"],
            ),
            notifications: counter(
                "waitroom_notifications_total",
                "[notify] webhook calls of visitors called: sent, failed (after every retry), \
                 dropped (the queue or the room's contacts full)",
                &["room", "result"],
            ),
            autopilot_total_active_users: gauge(
                "waitroom_autopilot_total_active_users",
                "total_active_users in force: the autopilot's, or the room's own when it is off",
            ),
            autopilot_new_users_per_minute: gauge(
                "waitroom_autopilot_new_users_per_minute",
                "new_users_per_minute in force: the autopilot's, or the room's own when it is off",
            ),
            origin_inflight: gauge(
                "waitroom_origin_inflight",
                "Requests of this instance waiting for the origin's response header",
            ),
            passes_shared: counter(
                "waitroom_passes_shared_total",
                "Passes revoked for use from more client networks than pass.max_networks \
                 (counted by the instance that saw the network too many)",
                room,
            ),
            pass_requests_limited: counter(
                "waitroom_pass_requests_limited_total",
                "Pass holders' requests refused (429) by pass.max_requests_per_minute",
                room,
            ),
            event_streams_refused: counter(
                "waitroom_event_streams_refused_total",
                "Event streams refused (the page polls instead), by reason (visitor, address, \
                 proxy)",
                &["room", "reason"],
            ),
            body_timeouts: counter(
                "waitroom_body_timeouts_total",
                "Connections closed because a request body went silent past \
                 listen.body_timeout or arrived slower than listen.min_body_rate (the request's \
                 room, or the first room)",
                room,
            ),
            client_address_unparsed: counter(
                "waitroom_client_address_unparsed_total",
                "Requests whose X-Forwarded-For entry for the client was not an address: \
                 counted in one shared per-address budget (the request's room, or the first room)",
                room,
            ),
            upgrades_refused: counter(
                "waitroom_upgrades_refused_total",
                "Upgrades (WebSocket) refused: taken off the request (request) or a 101 from the \
                 origin answered 502 (response)",
                &["room", "stage"],
            ),
            rule_matches: counter(
                "waitroom_rule_matches_total",
                "Requests a rule of [[room.rules]] held for, by rule (its name, or rules[i]) and \
                 action (bypass, protect, block)",
                &["room", "rule", "action"],
            ),
            origin,
            registry,
        }
    }

    /// The origin's series (one origin for every room).
    pub fn origin(&self) -> OriginMetrics {
        self.origin.clone()
    }

    /// One room's series. Labelled series that can happen are there from the start, at 0:
    /// `rate()` and `increase()` need a sample before the first error to see it.
    pub fn room(&self, id: &str) -> Metrics {
        let with = |label: &'static str| [id, label];
        Metrics {
            occupancy: self.occupancy.with_label_values(&[id]),
            capacity: self.capacity.with_label_values(&[id]),
            rate_per_minute: self.rate_per_minute.with_label_values(&[id]),
            admitting: self.admitting.with_label_values(&[id]),
            queue_length: self.queue_length.with_label_values(&[id]),
            admitted: self.admitted.with_label_values(&[id]),
            abandoned: self.abandoned.with_label_values(&[id]),
            revoked: self.revoked.with_label_values(&[id]),
            expired: self.expired.with_label_values(&[id]),
            no_shows: self.no_shows.with_label_values(&[id]),
            wait_seconds: self.wait_seconds.with_label_values(&[id]),
            waits: Mutex::new(Vec::new()),
            requests: Outcome::ALL.map(|o| self.requests.with_label_values(&with(o.label()))),
            refused_too_fast: self.refused.with_label_values(&with("rate")),
            refused_too_many_live: self.refused.with_label_values(&with("live")),
            upstream_errors: UpstreamFailure::ALL
                .map(|kind| self.upstream_errors.with_label_values(&with(kind.label()))),
            origin_responses: ORIGIN_CLASSES
                .map(|class| self.origin_responses.with_label_values(&with(class))),
            origin_seconds: self.origin_seconds.with_label_values(&[id]),
            passes_shared: self.passes_shared.with_label_values(&[id]),
            pass_requests_limited: self.pass_requests_limited.with_label_values(&[id]),
            store_errors: self.store_errors.with_label_values(&[id]),
            store_up: self.store_up.with_label_values(&[id]),
            store_replica_ack_timeouts: self.store_replica_ack_timeouts.with_label_values(&[id]),
            leader: self.leader.with_label_values(&[id]),
            prequeueing: self.prequeueing.with_label_values(&[id]),
            order_inversions: self.order_inversions.with_label_values(&[id]),
            order_pairs: self.order_pairs.with_label_values(&[id]),
            order_tau: self.order_tau.with_label_values(&[id]),
            turnstile_verifications: ChallengeResult::ALL.map(|r| {
                self.turnstile_verifications
                    .with_label_values(&with(r.label()))
            }),
            turnstile_parked: self.turnstile_parked.with_label_values(&[id]),
            proofs: ProofResult::ALL.map(|r| self.proofs.with_label_values(&with(r.label()))),
            proof_seeds: self.proof_seeds.with_label_values(&[id]),
            entries: EntryResult::ALL.map(|r| self.entries.with_label_values(&with(r.label()))),
            notifications: NotifyResult::ALL
                .map(|r| self.notifications.with_label_values(&with(r.label()))),
            autopilot_total_active_users: self
                .autopilot_total_active_users
                .with_label_values(&[id]),
            autopilot_new_users_per_minute: self
                .autopilot_new_users_per_minute
                .with_label_values(&[id]),
            origin_inflight: self.origin_inflight.with_label_values(&[id]),
            event_streams_refused: StreamRefusal::ALL.map(|reason| {
                self.event_streams_refused
                    .with_label_values(&with(reason.label()))
            }),
            body_timeouts: self.body_timeouts.with_label_values(&[id]),
            client_address_unparsed: self.client_address_unparsed.with_label_values(&[id]),
            upgrades_refused: UpgradeRefusal::ALL.map(|stage| {
                self.upgrades_refused
                    .with_label_values(&with(stage.label()))
            }),
            rule_matches: (self.rule_matches.clone(), id.to_owned()),
        }
    }

    pub fn render(&self) -> String {
        let mut out = Vec::new();
        if let Err(e) = TextEncoder::new().encode(&self.registry.gather(), &mut out) {
            return format!("# cannot encode metrics: {e}\n");
        }
        String::from_utf8_lossy(&out).into_owned()
    }
}

impl Metrics {
    pub fn request(&self, outcome: Outcome) {
        self.requests[outcome as usize].inc();
    }

    pub fn challenge(&self, result: ChallengeResult) {
        self.turnstile_verifications[result as usize].inc();
    }

    pub fn entry(&self, result: EntryResult) {
        self.entries[result as usize].inc();
    }

    pub fn notification(&self, result: NotifyResult) {
        self.notifications[result as usize].inc();
    }

    /// What `waitroom_notifications_total` counted so far with `result`.
    pub fn notifications(&self, result: NotifyResult) -> u64 {
        self.notifications[result as usize].get()
    }

    pub fn proof(&self, result: ProofResult) {
        self.proofs[result as usize].inc();
    }

    pub fn upstream_error(&self, kind: UpstreamFailure) {
        self.upstream_errors[kind as usize].inc();
    }

    pub fn stream_refused(&self, reason: StreamRefusal) {
        self.event_streams_refused[reason as usize].inc();
    }

    pub fn upgrade_refused(&self, stage: UpgradeRefusal) {
        self.upgrades_refused[stage as usize].inc();
    }

    /// A rule held for a request (`inc`), or its series made at 0 (when the rule is set up).
    pub fn rule_held(&self, rule: &str, action: &str, inc: bool) {
        let (family, room) = &self.rule_matches;
        let series = family.with_label_values(&[room.as_str(), rule, action]);
        if inc {
            series.inc();
        }
    }

    /// One wait from ticket to admission: the histogram, and the report's list.
    pub fn waited(&self, waited_ms: u64) {
        self.wait_seconds.observe(waited_ms as f64 / 1000.0);
        self.waits
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .push(u32::try_from(waited_ms).unwrap_or(u32::MAX));
    }

    /// The waits (ms) since the last call.
    pub fn take_waits(&self) -> Vec<u32> {
        std::mem::take(
            &mut *self
                .waits
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner()),
        )
    }

    pub fn challenges(&self, result: ChallengeResult) -> u64 {
        self.turnstile_verifications[result as usize].get()
    }

    pub fn origin_failures(&self, kind: UpstreamFailure) -> u64 {
        self.upstream_errors[kind as usize].get()
    }

    /// The origin's responses so far, all classes, and the 5xx among them.
    pub fn origin_responses(&self) -> (u64, u64) {
        let all = self.origin_responses.iter().map(IntCounter::get).sum();
        (all, self.origin_responses[4].get())
    }

    /// A histogram's counts per bucket (not cumulated), the last one above every bound.
    pub fn bucket_counts(histogram: &Histogram) -> Vec<u64> {
        use prometheus::core::Metric;
        let metric = histogram.metric();
        let sampled = metric.get_histogram();
        let mut below = 0;
        let mut counts: Vec<u64> = sampled
            .get_bucket()
            .iter()
            .map(|bucket| {
                let cumulative = bucket.cumulative_count();
                let count = cumulative.saturating_sub(below);
                below = cumulative;
                count
            })
            .collect();
        counts.push(sampled.get_sample_count().saturating_sub(below));
        counts
    }

    pub fn origin_response(&self, status: u16) {
        let class = usize::from(status.clamp(100, 599) / 100 - 1);
        self.origin_responses[class].inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::UPSTREAM_ERROR_KINDS;

    #[test]
    fn the_published_names_are_exactly_the_registered_metrics() {
        let families = MetricsRegistry::new();
        let m = families.room("r");
        m.request(Outcome::Passed);
        // A room's rules' series exist once its rules are set up.
        m.rule_held("rules[0]", "block", false);
        let mut registered: Vec<String> = families
            .registry
            .gather()
            .iter()
            .map(|family| family.name().to_owned())
            .collect();
        registered.sort();
        let mut published: Vec<String> = NAMES
            .iter()
            .chain(PROCESS_NAMES)
            .map(|n| (*n).to_owned())
            .collect();
        published.sort();
        assert_eq!(registered, published);
        for histogram in HISTOGRAMS {
            assert!(NAMES.contains(histogram));
            assert!(families.render().contains(&format!("{histogram}_bucket")));
        }
    }

    /// `name{room="r",label="value"} 0` lines of a fresh registry.
    fn zero_series(text: &str, name: &str, label: &str) -> Vec<String> {
        text.lines()
            .filter(|l| l.starts_with(&format!("{name}{{")) && l.ends_with(" 0"))
            .filter_map(|l| {
                let value = l.split(&format!("{label}=\"")).nth(1)?;
                Some(value[..value.find('"')?].to_owned())
            })
            .collect()
    }

    #[test]
    fn every_error_kind_and_status_class_starts_at_zero() {
        let families = MetricsRegistry::new();
        let m = families.room("r");
        let text = families.render();
        let mut kinds = zero_series(&text, "waitroom_upstream_errors_total", "kind");
        kinds.sort();
        let mut expected: Vec<&str> = UPSTREAM_ERROR_KINDS.to_vec();
        expected.sort();
        assert_eq!(kinds, expected, "{text}");
        let classes = zero_series(&text, "waitroom_origin_responses_total", "class");
        assert_eq!(classes, ORIGIN_CLASSES, "{text}");

        m.upstream_error(UpstreamFailure::Timeout);
        m.origin_response(503);
        let text = families.render();
        assert!(text.contains("waitroom_upstream_errors_total{kind=\"timeout\",room=\"r\"} 1"));
        assert!(text.contains("waitroom_origin_responses_total{class=\"5xx\",room=\"r\"} 1"));
        assert!(text.contains("waitroom_origin_responses_total{class=\"2xx\",room=\"r\"} 0"));
    }

    #[test]
    fn rooms_have_their_own_series_in_one_registry() {
        let families = MetricsRegistry::new();
        let (a, b) = (families.room("a"), families.room("b"));
        a.request(Outcome::Queued);
        a.request(Outcome::Queued);
        b.request(Outcome::Queued);
        let text = families.render();
        assert!(text.contains("waitroom_requests_total{outcome=\"queued\",room=\"a\"} 2"));
        assert!(text.contains("waitroom_requests_total{outcome=\"queued\",room=\"b\"} 1"));
        assert_eq!(text.matches("# TYPE waitroom_requests_total").count(), 1);
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn process_metrics_describe_this_process() {
        let text = MetricsRegistry::new().render();
        let value = |name: &str| -> f64 {
            text.lines()
                .find(|l| l.starts_with(&format!("{name} ")))
                .and_then(|l| l.rsplit(' ').next())
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("no {name} in {text}"))
        };
        assert!(value("process_resident_memory_bytes") > 1e6);
        assert!(value("process_open_fds") >= 3.0);
        assert!(value("process_max_fds") >= value("process_open_fds"));
        assert!(value("process_threads") >= 1.0);
        assert!(value("process_start_time_seconds") > 1.6e9);
        // This machine's limit, or 0 for none: present either way, never below 0.
        assert!(value(MEMORY_LIMIT) >= 0.0);
    }
}
