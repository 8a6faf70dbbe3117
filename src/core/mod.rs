//! Pure decision logic: no I/O, time passed in. Everything here is unit-tested with plain values.

pub mod autopilot;
pub mod body_pace;
pub mod bucket;
pub mod estimate;
pub mod expiring;
pub mod fairness;
pub mod history;
pub mod ip_limit;
pub mod proof;
pub mod queue;
pub mod queue_id;
pub mod room;
pub mod schedule;
pub mod sharing;
