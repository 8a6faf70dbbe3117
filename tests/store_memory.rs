#![allow(clippy::unwrap_used)]
//! The in-memory store through the conformance suite.

mod common;

use std::sync::Arc;

use waitroom::clock::ManualClock;
use waitroom::store::memory::MemoryStore;

async fn make() -> (MemoryStore, Arc<ManualClock>) {
    let clock = ManualClock::starting_now();
    (MemoryStore::new(clock.clone(), 42), clock)
}

store_conformance!(make);
