//! What the proxy counts and how Prometheus reads it, at the bottom of the tree: every part
//! above (the room, the gate, the proxy, the loops) reports here with plain values, and this
//! imports none of them.

mod labels;
mod metrics;

pub use labels::{
    ChallengeResult, ORIGIN_CLASSES, Outcome, STREAM_REFUSALS, StreamRefusal, UPGRADE_REFUSALS,
    UPSTREAM_ERROR_KINDS, UpgradeRefusal, UpstreamFailure,
};
pub use metrics::{HISTOGRAMS, Metrics, MetricsRegistry, NAMES, OriginMetrics, PROCESS_NAMES};
