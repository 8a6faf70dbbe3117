//! Whether the store answers, as the last call to it found: for `/readyz`, the gauge, and the
//! poll path's freshness rule. Every call through an [`Observed`](super::Observed) store is
//! noted here. An outage is logged when it starts and when it ends, never once per request: a
//! flash crowd during a Redis outage must not write a log line per visitor.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use super::StoreError;
use crate::observe::Metrics;

pub struct StoreHealth {
    up: AtomicBool,
    metrics: Arc<Metrics>,
}

impl StoreHealth {
    pub fn new(metrics: Arc<Metrics>) -> Self {
        metrics.store_up.set(1);
        Self {
            up: AtomicBool::new(true),
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

    fn answered(&self) {
        if !self.up.swap(true, Ordering::Relaxed) {
            log::info!("store reachable again");
        }
        self.metrics.store_up.set(1);
    }
}
