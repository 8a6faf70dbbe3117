//! Whether the store answers, as the last call to it found: for `/readyz`, the gauge, and the
//! poll path's freshness rule. Every call through an [`Observed`](super::Observed) store is
//! noted here. An outage is logged when it starts and when it ends, never once per request: a
//! flash crowd during a Redis outage must not write a log line per visitor.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use super::StoreError;
use crate::observe::Metrics;

pub struct StoreHealth {
    up: AtomicBool,
    /// The store's running total of unacknowledged admissions, as far as the metric counts it.
    unacknowledged: AtomicU64,
    metrics: Arc<Metrics>,
}

impl StoreHealth {
    pub fn new(metrics: Arc<Metrics>) -> Self {
        metrics.store_up.set(1);
        Self {
            up: AtomicBool::new(true),
            unacknowledged: AtomicU64::new(0),
            metrics,
        }
    }

    pub fn is_up(&self) -> bool {
        self.up.load(Ordering::Relaxed)
    }

    /// Records the outcome of a store call. A refused fencing token is the store's answer, not
    /// an outage: a replaced leader is told so by a store that works.
    pub fn note<T>(&self, result: &Result<T, StoreError>) {
        match result {
            Ok(_) | Err(StoreError::NotLeader(_)) => self.answered(),
            Err(e) => self.failed(e),
        }
    }

    /// Down from the first moment (gauge, `/readyz`): a store that did not answer at start.
    pub fn failed(&self, e: &StoreError) {
        self.metrics.store_errors.inc();
        if self.up.swap(false, Ordering::Relaxed) {
            log::warn!("store unreachable: {e}");
        }
        self.metrics.store_up.set(0);
    }

    /// Counts the admissions the store's replicas did not acknowledge since the last note:
    /// `total` is the store's running total (`Store::unacknowledged_admissions`). Calls that
    /// race each other add up to the total once (each adds what it raised the maximum by); the
    /// usual call, with nothing new, only reads.
    pub fn note_unacknowledged(&self, total: u64) {
        if total <= self.unacknowledged.load(Ordering::Relaxed) {
            return;
        }
        let counted = self.unacknowledged.fetch_max(total, Ordering::Relaxed);
        if total > counted {
            self.metrics
                .store_replica_ack_timeouts
                .inc_by(total - counted);
        }
    }

    fn answered(&self) {
        if !self.up.swap(true, Ordering::Relaxed) {
            log::info!("store reachable again");
        }
        self.metrics.store_up.set(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::MetricsRegistry;

    #[test]
    fn unacknowledged_admissions_are_counted_once_however_the_notes_arrive() {
        let metrics = Arc::new(MetricsRegistry::new().room("r"));
        let health = StoreHealth::new(metrics.clone());
        // Two calls racing may note their totals out of order: 3 after 5 adds nothing.
        for total in [0, 3, 5, 3, 5, 6] {
            health.note_unacknowledged(total);
        }
        assert_eq!(metrics.store_replica_ack_timeouts.get(), 6);
    }
}
