//! The autopilot (issue #16): steers the room's `total_active_users` and `new_users_per_minute`
//! by the origin's health, as the proxy sees it on admitted requests. No I/O: time comes in as
//! [`Millis`], the origin's health as one [`Signal`] per window, the room as a
//! [`RoomObservation`]. The design and where each rule comes from: docs/autopilot.md.
//!
//! Who does what:
//! - every instance records each origin exchange of an admitted request in a [`Recorder`], which
//!   hands over one [`Signal`] per window (aligned on the clock, so the windows of several
//!   instances line up); the signal goes to the store;
//! - the leader adds the instances' signals of one window together ([`Signal::merge`], exact:
//!   the latency histogram has fixed buckets), feeds its admission ticks to a [`RoomWindow`], and
//!   calls [`Controller::step`] once per window; a [`LimitChange`] is the new capacity, rate and
//!   burst, written to the store like a live settings change, with a reason for the log.
//!
//! The rules of a step, in order (each hold says why in [`Controller::status`]):
//! 1. Hold when paused, for a window begun before the last change, for a window with fewer than
//!    `min_requests` origin exchanges (no traffic: no change), or for a window that ended within
//!    `min_interval` of the end of the window that made the last change.
//! 2. Breach (p95 above `latency_target`, or error rate above `error_rate_max`): down to the
//!    occupancy the origin can take, estimated from the window: its occupancy less its queue,
//!    the share of its requests in flight (Little's law on the latency sum) beyond what a p95
//!    in the middle of the hysteresis band allows, one visitor each (Vegas's queue estimate,
//!    against the target); for errors, the occupancy times `error_rate_max / error rate`. The
//!    cut is between 50 % and 95 % of the occupancy (the load that breached, TCP's flight-size
//!    rule, not the limit), and only if below the capacity: while the room drains after a cut,
//!    windows that still breach lower it again only if they ask for less, and by about a third
//!    of the limit at most. A p95 over twice the target (the origin changed) halves the
//!    occupancy, unless the room is still draining.
//! 3. Healthy (p95 and error rate under their limits by the `hysteresis` margin) and saturated
//!    (occupancy within 5 % of the capacity at some tick, with people waiting at every tick):
//!    up. By half per window until the first breach or two windows in the band (TCP's slow
//!    start); then half way to where the last breach put the knee, or, at or past it, by 2 %
//!    (a probe). Either waits 1, 2, 4... calm windows when the knee breaches again at the same
//!    place (within 10 %), so probing a knee that stays put gets rarer. 10 % past the last
//!    breach, or with p95 under half the band's floor, the breach is forgotten and the limit
//!    grows by the square root of the capacity, less as p95 nears the band (whole at half its
//!    floor, one visitor at the floor). Never more than +50 % at once.
//! 4. Otherwise (in the band between the hysteresis margin and the limits, or not saturated):
//!    hold.
//! 5. The rate and the burst follow the capacity in the operator's ratios; all stay >= 1, the
//!    capacity within [`min_active_users`, `max_active_users`].
//!
//! [`min_active_users`]: Settings::min_active_users
//! [`max_active_users`]: Settings::max_active_users
//!
//! The parts: [`measurement`] (what instances record and report, and what the leader sees of the
//! room), [`settings`] (the `[autopilot]` section as the controller obeys it), the controller's
//! state and its changes (`controller`), and the rules of a step (`rules`).

mod controller;
pub mod measurement;
mod rules;
pub mod settings;

#[cfg(test)]
mod sim;
#[cfg(test)]
mod tests;

pub use controller::{Controller, Direction, LimitChange, Setpoint, Status};
pub use measurement::{
    BUCKETS, Exchange, LatencyHistogram, NoSuchBucket, Recorder, RoomObservation, RoomWindow,
    Signal, judging_grace, window_start,
};
pub use settings::{MIN_REQUESTS_FLOOR, Settings, SettingsError};
