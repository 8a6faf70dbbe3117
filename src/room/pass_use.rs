//! This instance's ledger of pass use (`core::sharing::PassUse`), written by two: the gate
//! counts every pass holder's request against it, and the admission loop reports the counts to
//! the store and takes the other instances' use off it.

use std::sync::{Mutex, MutexGuard};

use crate::core::sharing::{PassLimits, PassUse};

/// Passes whose use this instance follows at most (a few hundred bytes each); beyond, the
/// ledger starts over and each pass reports its network once more.
const PASS_USE_KEPT: usize = 200_000;

pub struct PassLedger {
    limits: PassLimits,
    ledger: Mutex<PassUse>,
}

impl PassLedger {
    pub fn new(limits: PassLimits) -> Self {
        Self {
            limits,
            ledger: Mutex::new(PassUse::new(limits, PASS_USE_KEPT)),
        }
    }

    /// `[pass]`, without taking the lock: the gate's every pass holder asks.
    pub fn limits(&self) -> PassLimits {
        self.limits
    }

    pub fn lock(&self) -> MutexGuard<'_, PassUse> {
        self.ledger.lock().unwrap_or_else(|p| p.into_inner())
    }
}
