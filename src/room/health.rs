//! Whether the store answers, as the last call to it found: for `/readyz`, the gauge, and the
//! poll path's freshness rule. An outage is logged when it starts and when it ends, never once
//! per request: a flash crowd during a Redis outage must not write a log line per visitor.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::observe::Metrics;
use crate::store::StoreError;

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

    /// Records the outcome of a store call.
    pub fn note<T>(&self, result: &Result<T, StoreError>) {
        let up = result.is_ok();
        if let Err(e) = result {
            self.metrics.store_errors.inc();
            if self.up.swap(false, Ordering::Relaxed) {
                log::warn!("store unreachable: {e}");
            }
        } else if !self.up.swap(true, Ordering::Relaxed) {
            log::info!("store reachable again");
        }
        self.metrics.store_up.set(i64::from(up));
    }
}
