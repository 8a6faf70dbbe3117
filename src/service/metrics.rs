//! Prometheus metrics, one registry per proxy (so several can run in one test process), every
//! series labelled with the room id.

use crate::gate::Outcome;
use prometheus::{
    Encoder, Gauge, Histogram, HistogramOpts, IntCounter, IntCounterVec, IntGauge, Opts, Registry,
    TextEncoder,
};

/// What became of a Turnstile token posted by the waiting page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChallengeResult {
    Passed,
    Failed,
    /// siteverify could not be asked or gave no usable answer.
    Unreachable,
    /// Not a token at all (missing, too long, bad characters): refused without asking.
    Malformed,
}

impl ChallengeResult {
    const ALL: [ChallengeResult; 4] = [
        ChallengeResult::Passed,
        ChallengeResult::Failed,
        ChallengeResult::Unreachable,
        ChallengeResult::Malformed,
    ];

    pub fn label(self) -> &'static str {
        match self {
            ChallengeResult::Passed => "passed",
            ChallengeResult::Failed => "failed",
            ChallengeResult::Unreachable => "unreachable",
            ChallengeResult::Malformed => "malformed",
        }
    }
}

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
    "waitroom_leader",
    "waitroom_prequeueing",
    "waitroom_order_inversions_total",
    "waitroom_order_pairs_total",
    "waitroom_order_tau",
    "waitroom_turnstile_verifications_total",
    "waitroom_turnstile_parked_total",
];

/// The histograms among `NAMES`.
pub const HISTOGRAMS: &[&str] = &["waitroom_wait_seconds", "waitroom_origin_seconds"];

/// Every `kind` of `waitroom_upstream_errors_total`: what the proxy's `fail_to_proxy` counts
/// (an origin that refused or dropped the connection, a failed TLS handshake, a timeout, an
/// error status). Each series exists from the start at 0, so the first failure shows in `rate()`.
pub const UPSTREAM_ERROR_KINDS: &[&str] = &["connect", "tls", "timeout", "status"];

/// Every `class` of `waitroom_origin_responses_total`, likewise created at 0.
pub const ORIGIN_CLASSES: &[&str] = &["1xx", "2xx", "3xx", "4xx", "5xx"];

/// The process metrics of the prometheus crate's process collector (Linux only: it reads
/// /proc), in the same registry: memory, file descriptors, CPU time, threads.
pub const PROCESS_NAMES: &[&str] = if cfg!(target_os = "linux") {
    &[
        "process_cpu_seconds_total",
        "process_open_fds",
        "process_max_fds",
        "process_virtual_memory_bytes",
        "process_resident_memory_bytes",
        "process_start_time_seconds",
        "process_threads",
    ]
} else {
    &[]
};

pub struct Metrics {
    registry: Registry,
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
    /// One counter per outcome, resolved once: no label hashing per request.
    requests: [IntCounter; 8],
    /// New tickets refused by the per-address limit: too fast, or too many in line.
    pub refused_too_fast: IntCounter,
    pub refused_too_many_live: IntCounter,
    upstream_errors: IntCounterVec,
    origin_responses: IntCounterVec,
    pub origin_seconds: Histogram,
    pub store_errors: IntCounter,
    pub store_up: IntGauge,
    pub leader: IntGauge,
    pub prequeueing: IntGauge,
    pub order_inversions: IntCounter,
    pub order_pairs: IntCounter,
    pub order_tau: Gauge,
    turnstile_verifications: [IntCounter; 4],
    pub turnstile_parked: IntCounter,
}

fn must<T>(r: prometheus::Result<T>) -> T {
    // Metric definitions are constants: an error here is a programming mistake caught by the
    // first test that builds a proxy.
    match r {
        Ok(v) => v,
        Err(e) => panic!("invalid metric definition: {e}"),
    }
}

impl Metrics {
    pub fn new(room_id: &str) -> Self {
        let registry = Registry::new_custom(
            None,
            Some(std::iter::once(("room".to_owned(), room_id.to_owned())).collect()),
        );
        let registry = must(registry);
        let gauge = |name: &str, help: &str| {
            let g = must(IntGauge::new(name, help));
            must(registry.register(Box::new(g.clone())));
            g
        };
        let counter = |name: &str, help: &str| {
            let c = must(IntCounter::new(name, help));
            must(registry.register(Box::new(c.clone())));
            c
        };
        let counter_vec = |name: &str, help: &str, label: &str| {
            let c = must(IntCounterVec::new(Opts::new(name, help), &[label]));
            must(registry.register(Box::new(c.clone())));
            c
        };
        let wait_seconds = must(Histogram::with_opts(
            HistogramOpts::new(
                "waitroom_wait_seconds",
                "Time from ticket to admission, for visitors admitted by this instance",
            )
            .buckets(vec![
                1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1200.0, 1800.0, 3600.0, 7200.0,
            ]),
        ));
        must(registry.register(Box::new(wait_seconds.clone())));
        let refused = counter_vec(
            "waitroom_tickets_refused_total",
            "New tickets refused by the per-address limit, by reason (rate, live)",
            "reason",
        );
        let origin_seconds = must(Histogram::with_opts(
            HistogramOpts::new(
                "waitroom_origin_seconds",
                "Time from choosing the origin to its response header, for forwarded requests",
            )
            .buckets(vec![
                0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
            ]),
        ));
        must(registry.register(Box::new(origin_seconds.clone())));
        let order_tau = must(Gauge::new(
            "waitroom_order_tau",
            "Kendall's tau between arrival and admission order over this instance's last 1000 \
             admissions: 1 in arrival order (fifo), near 0 for a lottery or a shuffled pre-queue",
        ));
        must(registry.register(Box::new(order_tau.clone())));
        #[cfg(target_os = "linux")]
        must(registry.register(Box::new(
            prometheus::process_collector::ProcessCollector::for_self(),
        )));
        // Labelled series that can happen are there from the start, at 0: `rate()` and
        // `increase()` need a sample before the first error to see it.
        let upstream_errors = counter_vec(
            "waitroom_upstream_errors_total",
            "Requests the origin failed (connect, tls, timeout, status)",
            "kind",
        );
        for kind in UPSTREAM_ERROR_KINDS {
            upstream_errors.with_label_values(&[*kind]);
        }
        let origin_responses = counter_vec(
            "waitroom_origin_responses_total",
            "Responses from the origin by status class (1xx, 2xx, 3xx, 4xx, 5xx)",
            "class",
        );
        for class in ORIGIN_CLASSES {
            origin_responses.with_label_values(&[*class]);
        }
        Self {
            occupancy: gauge(
                "waitroom_occupancy",
                "Live passes plus admissions still being claimed, room-wide",
            ),
            capacity: gauge("waitroom_capacity", "Configured total_active_users"),
            rate_per_minute: gauge(
                "waitroom_rate_per_minute",
                "Configured new_users_per_minute",
            ),
            admitting: gauge(
                "waitroom_admitting",
                "1 when the settings let new visitors in (not queue_all, reject or suspended)",
            ),
            queue_length: gauge("waitroom_queue_length", "Visitors waiting, room-wide"),
            admitted: counter(
                "waitroom_admitted_total",
                "Visitors let in by this instance (directly or claiming their turn)",
            ),
            abandoned: counter(
                "waitroom_abandoned_total",
                "Waiting visitors dropped after they stopped polling (counted by the leader)",
            ),
            revoked: counter(
                "waitroom_revoked_total",
                "Passes ended early by the origin command, leave or the admin API",
            ),
            expired: counter(
                "waitroom_expired_total",
                "Passes that expired (counted by the leader)",
            ),
            no_shows: counter(
                "waitroom_no_shows_total",
                "Called visitors who never claimed their admission (counted by the leader)",
            ),
            wait_seconds,
            requests: {
                let by_outcome = counter_vec(
                    "waitroom_requests_total",
                    "Requests on the protected route by outcome",
                    "outcome",
                );
                Outcome::ALL.map(|o| by_outcome.with_label_values(&[o.label()]))
            },
            refused_too_fast: refused.with_label_values(&["rate"]),
            refused_too_many_live: refused.with_label_values(&["live"]),
            upstream_errors,
            origin_responses,
            origin_seconds,
            store_errors: counter(
                "waitroom_store_errors_total",
                "Store operations that failed",
            ),
            store_up: gauge(
                "waitroom_store_up",
                "1 when the last store operation succeeded",
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
            ),
            order_pairs: counter(
                "waitroom_order_pairs_total",
                "Pairs of admissions compared for order_inversions",
            ),
            order_tau,
            turnstile_verifications: {
                let by_outcome = counter_vec(
                    "waitroom_turnstile_verifications_total",
                    "Turnstile tokens posted by waiting pages, by outcome",
                    "outcome",
                );
                ChallengeResult::ALL.map(|r| by_outcome.with_label_values(&[r.label()]))
            },
            turnstile_parked: counter(
                "waitroom_turnstile_parked_total",
                "Visitors who failed the challenge, parked in a line that never admits them",
            ),
            registry,
        }
    }

    pub fn request(&self, outcome: Outcome) {
        self.requests[outcome as usize].inc();
    }

    pub fn challenge(&self, result: ChallengeResult) {
        self.turnstile_verifications[result as usize].inc();
    }

    /// `kind` is one of `UPSTREAM_ERROR_KINDS` (a new kind belongs in that list, so that its
    /// series exists from the start).
    pub fn upstream_error(&self, kind: &str) {
        debug_assert!(
            UPSTREAM_ERROR_KINDS.contains(&kind),
            "upstream error kind {kind:?} is not in UPSTREAM_ERROR_KINDS"
        );
        self.upstream_errors.with_label_values(&[kind]).inc();
    }

    pub fn origin_response(&self, status: u16) {
        let class = match status {
            100..=199 => "1xx",
            200..=299 => "2xx",
            300..=399 => "3xx",
            400..=499 => "4xx",
            _ => "5xx",
        };
        self.origin_responses.with_label_values(&[class]).inc();
    }

    pub fn render(&self) -> String {
        let mut out = Vec::new();
        if let Err(e) = TextEncoder::new().encode(&self.registry.gather(), &mut out) {
            return format!("# cannot encode metrics: {e}\n");
        }
        String::from_utf8_lossy(&out).into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_published_names_are_exactly_the_registered_metrics() {
        let m = Metrics::new("r");
        // Labelled families only show once they have a series.
        m.request(Outcome::Passed);
        let mut registered: Vec<String> = m
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
            assert!(m.render().contains(&format!("{histogram}_bucket")));
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
        let m = Metrics::new("r");
        let text = m.render();
        let mut kinds = zero_series(&text, "waitroom_upstream_errors_total", "kind");
        kinds.sort();
        let mut expected: Vec<&str> = UPSTREAM_ERROR_KINDS.to_vec();
        expected.sort();
        assert_eq!(kinds, expected, "{text}");
        let classes = zero_series(&text, "waitroom_origin_responses_total", "class");
        assert_eq!(classes, ORIGIN_CLASSES, "{text}");

        m.upstream_error("timeout");
        m.origin_response(503);
        let text = m.render();
        assert!(text.contains("waitroom_upstream_errors_total{kind=\"timeout\",room=\"r\"} 1"));
        assert!(text.contains("waitroom_origin_responses_total{class=\"5xx\",room=\"r\"} 1"));
        assert!(text.contains("waitroom_origin_responses_total{class=\"2xx\",room=\"r\"} 0"));
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn process_metrics_describe_this_process() {
        let text = Metrics::new("r").render();
        let value = |name: &str| -> f64 {
            text.lines()
                .find(|l| l.starts_with(&format!("{name}{{")))
                .and_then(|l| l.rsplit(' ').next())
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("no {name} in {text}"))
        };
        assert!(value("process_resident_memory_bytes") > 1e6);
        assert!(value("process_open_fds") >= 3.0);
        assert!(value("process_max_fds") >= value("process_open_fds"));
        assert!(value("process_threads") >= 1.0);
        assert!(value("process_start_time_seconds") > 1.6e9);
    }
}
