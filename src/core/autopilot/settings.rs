//! The `[autopilot]` settings as the controller obeys them, and what it refuses.

use std::time::Duration;

/// The `[autopilot]` settings, as the controller obeys them (checked by [`Settings::validate`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// The p95 of the origin's latency on admitted requests, over a window, not to exceed.
    pub latency_target: Duration,
    /// The share of errors (5xx, timeouts, connection failures) not to exceed, in [0, 1).
    pub error_rate_max: f64,
    /// How long one window is: the controller judges one window at a time.
    pub window: Duration,
    /// The capacity never goes below this...
    pub min_active_users: u64,
    /// ...nor above this.
    pub max_active_users: u64,
    /// The least time between two changes.
    pub min_interval: Duration,
    /// The capacity only rises while p95 and error rate are below their limit by this fraction
    /// (0.2: p95 at most 80 % of the target); in between it holds.
    pub hysteresis: f64,
    /// Origin exchanges a window needs before it is judged at all.
    pub min_requests: u64,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            latency_target: Duration::from_millis(250),
            error_rate_max: 0.02,
            window: Duration::from_secs(10),
            min_active_users: 10,
            max_active_users: 2000,
            min_interval: Duration::from_secs(10),
            hysteresis: 0.2,
            min_requests: 50,
        }
    }
}

/// A setting the controller cannot work with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("autopilot.{key}: {message}")]
pub struct SettingsError {
    pub key: &'static str,
    pub message: String,
}

fn invalid(key: &'static str, message: impl Into<String>) -> SettingsError {
    SettingsError {
        key,
        message: message.into(),
    }
}

/// Below this many samples a p95 is one or two requests' word.
pub const MIN_REQUESTS_FLOOR: u64 = 20;

impl Settings {
    pub fn validate(&self) -> Result<(), SettingsError> {
        if self.latency_target.is_zero() || self.latency_target > Duration::from_secs(60) {
            return Err(invalid(
                "latency_target",
                "must be longer than zero and at most 60s",
            ));
        }
        if !(self.error_rate_max > 0.0 && self.error_rate_max < 1.0) {
            return Err(invalid(
                "error_rate_max",
                format!(
                    "{} is not a share between 0 and 1 (0.02: 2 %)",
                    self.error_rate_max
                ),
            ));
        }
        if self.window < Duration::from_secs(1) || self.window > Duration::from_secs(600) {
            return Err(invalid("window", "must be between 1s and 10m"));
        }
        if self.min_active_users == 0 {
            return Err(invalid("min_active_users", "must be at least 1"));
        }
        if self.max_active_users < self.min_active_users {
            return Err(invalid(
                "max_active_users",
                format!(
                    "{} is below min_active_users ({})",
                    self.max_active_users, self.min_active_users
                ),
            ));
        }
        if self.min_interval > Duration::from_secs(3600) {
            return Err(invalid("min_interval", "must be at most 1h"));
        }
        if !(0.0..=0.9).contains(&self.hysteresis) {
            return Err(invalid(
                "hysteresis",
                format!("{} is not between 0 and 0.9", self.hysteresis),
            ));
        }
        if self.min_requests < MIN_REQUESTS_FLOOR {
            return Err(invalid(
                "min_requests",
                format!("must be at least {MIN_REQUESTS_FLOOR}, or one slow request moves the p95"),
            ));
        }
        Ok(())
    }

    pub(super) fn clamp(&self, capacity: u64) -> u64 {
        capacity.clamp(self.min_active_users, self.max_active_users)
    }
}
