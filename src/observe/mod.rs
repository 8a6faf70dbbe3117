//! What the proxy counts and how Prometheus reads it, at the bottom of the tree: every part
//! above (the room, the gate, the proxy, the loops) reports here with plain values, and this
//! imports none of them.

/// The log target of the access log, one line per request on the public listener
/// (`RUST_LOG=waitroom::access=off` drops them too).
pub const ACCESS_LOG: &str = "waitroom::access";

mod labels;
#[cfg(target_os = "linux")]
mod memory_limit;
mod metrics;

pub use labels::{
    ChallengeResult, EntryResult, NotifyResult, ORIGIN_CLASSES, Outcome, ProofResult,
    STREAM_REFUSALS, StreamRefusal, UPGRADE_REFUSALS, UPSTREAM_ERROR_KINDS, UpgradeRefusal,
    UpstreamFailure,
};
pub use metrics::{HISTOGRAMS, Metrics, MetricsRegistry, NAMES, OriginMetrics, PROCESS_NAMES};
pub use metrics::{ORIGIN_BOUNDS, WAIT_BOUNDS};
