//! What a start is made with and how it fails: the options that differ between production and a
//! test run, and every reason the proxy refuses to start (each names the key at fault).

use std::net::SocketAddr;
use std::sync::Arc;

use super::tls::TlsError;
use crate::clock::{SharedClock, SystemClock};
use crate::proxy::origin::{Resolve, ResolveError, SystemResolver};
use crate::store::StoreError;
use crate::token::SignError;
use crate::turnstile::ClientError;

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("{key} {address} is already in use (or not ours to bind): {reason}")]
    AddressInUse {
        key: &'static str,
        address: SocketAddr,
        reason: String,
    },
    #[error("store: {0}")]
    Store(#[from] StoreError),
    #[error("{0}")]
    Tls(#[from] TlsError),
    #[error("listen.pid_file {path}: {reason}")]
    PidFile { path: String, reason: String },
    #[error("{0}")]
    Unsupported(String),
    #[error("cannot start a runtime or thread: {0}")]
    Runtime(#[from] std::io::Error),
    #[error("the store connection thread panicked")]
    StoreThread,
    #[error("{0}")]
    Sign(#[from] SignError),
    #[error("{0}")]
    Turnstile(#[from] ClientError),
    #[error("entry: the key cannot check tokens: {0}")]
    Entry(#[from] jsonwebtoken::errors::Error),
    #[error("notify: cannot make the webhook's client: {0}")]
    Notify(#[source] reqwest::Error),
    #[error("cannot read the open-file limit: {0}")]
    OpenFiles(#[from] nix::Error),
    #[error("page.template {path}: {reason}")]
    PageTemplate {
        path: String,
        reason: ramhorns::Error,
    },
    #[error("origin.address {address:?} does not resolve: {reason}")]
    OriginUnresolved {
        address: String,
        reason: ResolveError,
    },
}

/// What differs between production and a test run.
pub struct RunOptions {
    pub clock: SharedClock,
    /// Seed of random queueing (fixed in tests, random in production).
    pub seed: u64,
    /// Redis takes time from `clock` instead of its own `TIME` (tests that drive the clock).
    pub redis_follows_clock: bool,
    /// Take the listening sockets over from the running process (`--upgrade`).
    pub upgrade: bool,
    /// Looks up the origin's name (the system's resolver; a scripted one in tests).
    pub resolver: Arc<dyn Resolve>,
    /// An origin whose name does not resolve stops the start. Off only in tests of a proxy
    /// that never knew an address for its origin.
    pub origin_must_resolve: bool,
}

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            clock: Arc::new(SystemClock),
            seed: rand::random(),
            redis_follows_clock: false,
            upgrade: false,
            resolver: Arc::new(SystemResolver),
            origin_must_resolve: true,
        }
    }
}
