//! Prometheus metrics, one registry per proxy (so several can run in one test process), every
//! series labelled with the room id.

use prometheus::{
    Encoder, Histogram, HistogramOpts, IntCounter, IntCounterVec, IntGauge, Opts, Registry,
    TextEncoder,
};

/// What happened to a request on the protected route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Held a valid pass.
    Passed,
    /// Let in by this request (directly, or claiming its turn).
    Admitted,
    Queued,
    Bypassed,
    Rejected,
    /// Room suspended, or the store unreachable with on_error = "open".
    Unprotected,
}

impl Outcome {
    const ALL: [Outcome; 6] = [
        Outcome::Passed,
        Outcome::Admitted,
        Outcome::Queued,
        Outcome::Bypassed,
        Outcome::Rejected,
        Outcome::Unprotected,
    ];

    fn label(self) -> &'static str {
        match self {
            Outcome::Passed => "passed",
            Outcome::Admitted => "admitted",
            Outcome::Queued => "queued",
            Outcome::Bypassed => "bypassed",
            Outcome::Rejected => "rejected",
            Outcome::Unprotected => "unprotected",
        }
    }
}

pub struct Metrics {
    registry: Registry,
    pub occupancy: IntGauge,
    pub capacity: IntGauge,
    pub queue_length: IntGauge,
    pub admitted: IntCounter,
    pub abandoned: IntCounter,
    pub revoked: IntCounter,
    pub expired: IntCounter,
    pub no_shows: IntCounter,
    pub wait_seconds: Histogram,
    /// One counter per outcome, resolved once: no label hashing per request.
    requests: [IntCounter; 6],
    upstream_errors: IntCounterVec,
    pub store_errors: IntCounter,
    pub store_up: IntGauge,
    pub leader: IntGauge,
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
        Self {
            occupancy: gauge(
                "waitroom_occupancy",
                "Live passes plus admissions still being claimed, room-wide",
            ),
            capacity: gauge("waitroom_capacity", "Configured total_active_users"),
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
            upstream_errors: counter_vec(
                "waitroom_upstream_errors_total",
                "Requests the origin failed (connect, timeout, other)",
                "kind",
            ),
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
            registry,
        }
    }

    pub fn request(&self, outcome: Outcome) {
        self.requests[outcome as usize].inc();
    }

    pub fn upstream_error(&self, kind: &str) {
        self.upstream_errors.with_label_values(&[kind]).inc();
    }

    pub fn render(&self) -> String {
        let mut out = Vec::new();
        if let Err(e) = TextEncoder::new().encode(&self.registry.gather(), &mut out) {
            return format!("# cannot encode metrics: {e}\n");
        }
        String::from_utf8_lossy(&out).into_owned()
    }
}
