#![allow(dead_code, clippy::unwrap_used)]
//! Shared by the integration tests; each test binary uses part of it.

pub mod conformance;
pub mod origin;
pub mod process;
pub mod proxy;
pub mod redis_server;
pub mod siteverify;
pub mod tls;
