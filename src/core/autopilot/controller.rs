//! The controller's state: the limits in force, the starting point whose ratios they keep, and
//! what it remembers of the knee between windows; the changes it makes and what it shows. How a
//! window is judged is in `rules`.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::measurement::{RoomObservation, Signal};
use super::settings::{Settings, SettingsError};
use crate::clock::Millis;

/// The limits the admission loop obeys. Deserialize: the store keeps the leader's setpoint
/// (`crate::store::AutopilotRecord`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Setpoint {
    pub total_active_users: u64,
    pub new_users_per_minute: u64,
    pub burst: u64,
}

impl fmt::Display for Setpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} inside, {}/min (burst {})",
            self.total_active_users, self.new_users_per_minute, self.burst
        )
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    Down,
    Up,
    /// Set from outside: the start, an operator's change, new bounds.
    Set,
}

/// A change of limits, with why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LimitChange {
    pub at: Millis,
    pub direction: Direction,
    pub from: Setpoint,
    pub to: Setpoint,
    pub reason: String,
}

impl fmt::Display for LimitChange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "autopilot: total_active_users {} -> {}, new_users_per_minute {} -> {}: {}",
            self.from.total_active_users,
            self.to.total_active_users,
            self.from.new_users_per_minute,
            self.to.new_users_per_minute,
            self.reason
        )
    }
}

/// What /admin/state shows.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Status {
    pub enabled: bool,
    pub paused: bool,
    pub total_active_users: u64,
    pub new_users_per_minute: u64,
    pub burst: u64,
    /// Why the limits are what they are (the last change).
    pub reason: String,
    pub changed_at: Option<Millis>,
    /// What the last step read, and why it changed nothing if it did not.
    pub last_step: String,
    /// "slow_start" until the first breach after a (re)start, then "steady".
    pub phase: &'static str,
}

impl Status {
    /// The status of a room whose autopilot is off: the room's own limits.
    pub fn disabled(total_active_users: u64, new_users_per_minute: u64, burst: u64) -> Self {
        Self {
            enabled: false,
            paused: false,
            total_active_users,
            new_users_per_minute,
            burst,
            reason: "autopilot off: the room's settings apply".into(),
            changed_at: None,
            last_step: String::new(),
            phase: "off",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Growth {
    /// Growing by half at a time, as TCP's slow start, until the first sign of the knee.
    SlowStart,
    Steady,
}

/// Patience doubles at most 5 times: 32 calm windows (about 5 minutes of 10 s windows).
const MAX_PATIENCE_DOUBLINGS: u32 = 5;

/// What one step decided, before the controller applies it.
pub(super) enum Verdict {
    Hold(String),
    Change {
        direction: Direction,
        capacity: u64,
        reason: String,
    },
}

/// Steers one room's limits. See the module's documentation for the rules.
#[derive(Debug, Clone)]
pub struct Controller {
    pub(super) settings: Settings,
    /// The operator's starting point, as given: the ratios of rate and burst to capacity.
    pub(super) start: Setpoint,
    pub(super) current: Setpoint,
    pub(super) phase: Growth,
    pub(super) paused: bool,
    /// Windows that began earlier are not judged: they saw limits since replaced.
    pub(super) judge_from: Millis,
    /// The end of the window that made the last change up or down.
    pub(super) last_change_at: Option<Millis>,
    /// Where the last breach put the knee: the occupancy at which p95 would have met the target
    /// (the breached window's occupancy less its queue). Increases approach it by halves.
    pub(super) ceiling: Option<u64>,
    /// Breaches in a row that put the knee at about the same place (within 10 %): each doubles
    /// the calm windows needed before approaching it or probing past it again, so probing the
    /// knee gets rarer.
    pub(super) breaches_here: u32,
    /// Healthy, full windows in a row since the last change.
    pub(super) calm: u32,
    /// Windows in a row in the hysteresis band: two end slow start (one can be the burst of a
    /// room filling up).
    pub(super) in_band: u32,
    pub(super) reason: String,
    pub(super) changed_at: Option<Millis>,
    pub(super) last_step: String,
}

impl Controller {
    /// A controller starting from the room's limits (clamped into the bounds).
    pub fn new(settings: Settings, start: Setpoint, now: Millis) -> Result<Self, SettingsError> {
        settings.validate()?;
        let mut c = Self {
            settings,
            start,
            current: start,
            phase: Growth::SlowStart,
            paused: false,
            judge_from: now,
            last_change_at: None,
            ceiling: None,
            breaches_here: 0,
            calm: 0,
            in_band: 0,
            reason: String::new(),
            changed_at: None,
            last_step: String::new(),
        };
        c.restart(now, start, "starting point: the room's settings");
        Ok(c)
    }

    /// A controller taking over limits an earlier leader set (read back from the store): the
    /// ratios still come from the room's settings (`start`), the limits in force are `current`
    /// (clamped into the bounds), and it goes on in its steady phase: a new leader does not
    /// jump by half from limits that were already tuned. Its memory of the knee is lost; the
    /// next breach teaches it again.
    pub fn restore(
        settings: Settings,
        start: Setpoint,
        current: Setpoint,
        now: Millis,
    ) -> Result<Self, SettingsError> {
        let mut c = Self::new(settings, start, now)?;
        let capacity = c.settings.clamp(current.total_active_users);
        c.apply(
            now,
            Direction::Set,
            capacity,
            format!("taken over from the previous leader ({current})"),
        );
        c.phase = Growth::Steady;
        Ok(c)
    }

    /// The limits in force.
    pub fn setpoint(&self) -> Setpoint {
        self.current
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    pub fn is_paused(&self) -> bool {
        self.paused
    }

    pub fn status(&self) -> Status {
        Status {
            enabled: true,
            paused: self.paused,
            total_active_users: self.current.total_active_users,
            new_users_per_minute: self.current.new_users_per_minute,
            burst: self.current.burst,
            reason: self.reason.clone(),
            changed_at: self.changed_at,
            last_step: self.last_step.clone(),
            phase: match self.phase {
                Growth::SlowStart => "slow_start",
                Growth::Steady => "steady",
            },
        }
    }

    /// An operator's live change of the room's limits: the new starting point (clamped into the
    /// bounds), with slow start again. Returns the change when the limits in force move.
    pub fn reset(&mut self, now: Millis, start: Setpoint) -> Option<LimitChange> {
        self.restart(
            now,
            start,
            "new starting point: the operator changed the room's limits",
        )
    }

    /// New `[autopilot]` settings (a reload): the capacity is clamped into the new bounds.
    pub fn reconfigure(
        &mut self,
        now: Millis,
        settings: Settings,
    ) -> Result<Option<LimitChange>, SettingsError> {
        settings.validate()?;
        self.settings = settings;
        let capacity = self.settings.clamp(self.current.total_active_users);
        if capacity == self.current.total_active_users {
            return Ok(None);
        }
        let reason = format!(
            "new bounds [{}, {}]",
            self.settings.min_active_users, self.settings.max_active_users
        );
        self.judge_from = now;
        Ok(Some(self.apply(now, Direction::Set, capacity, reason)))
    }

    /// Stops judging windows; the limits in force stay as they are.
    pub fn pause(&mut self, now: Millis) {
        self.paused = true;
        self.last_step = format!("paused at {now}");
    }

    /// Judges again, from the next window that begins after now.
    pub fn resume(&mut self, now: Millis) {
        self.paused = false;
        self.judge_from = now;
        self.last_step = format!("resumed at {now}: judging windows that begin from now on");
    }

    /// Judges one window: `window` is the origin's health over it (all instances), `room` what the
    /// leader saw of the room over it. Returns the change of limits, if any; the reading and the
    /// reason for a hold go to [`Controller::status`].
    pub fn step(
        &mut self,
        now: Millis,
        window: &Signal,
        room: RoomObservation,
    ) -> Option<LimitChange> {
        match self.judge(window, room) {
            Verdict::Hold(why) => {
                self.last_step = why;
                None
            }
            Verdict::Change {
                direction,
                capacity,
                reason,
            } => {
                // The window is spent: the next one judged begins after it.
                self.judge_from = self.judge_from.max(window.ended_at);
                self.last_change_at = Some(window.ended_at);
                self.calm = 0;
                self.last_step = reason.clone();
                Some(self.apply(now, direction, capacity, reason))
            }
        }
    }

    fn restart(&mut self, now: Millis, start: Setpoint, why: &str) -> Option<LimitChange> {
        self.start = Setpoint {
            total_active_users: start.total_active_users.max(1),
            new_users_per_minute: start.new_users_per_minute.max(1),
            burst: start.burst.max(1),
        };
        self.phase = Growth::SlowStart;
        self.forget_breach();
        self.calm = 0;
        self.in_band = 0;
        self.judge_from = now;
        let capacity = self.settings.clamp(self.start.total_active_users);
        let mut reason = format!("{why} ({})", self.start);
        if capacity != self.start.total_active_users {
            reason.push_str(&format!(
                ", capacity clamped into [{}, {}]",
                self.settings.min_active_users, self.settings.max_active_users
            ));
        }
        let before = self.current;
        let decision = self.apply(now, Direction::Set, capacity, reason);
        (decision.to != before).then_some(decision)
    }

    pub(super) fn forget_breach(&mut self) {
        self.ceiling = None;
        self.breaches_here = 0;
    }

    /// Calm windows needed before approaching the last breach again: 1, 2, 4... up to 32.
    pub(super) fn patience(&self) -> u32 {
        1 << self
            .breaches_here
            .saturating_sub(1)
            .min(MAX_PATIENCE_DOUBLINGS)
    }

    /// The rate and burst that go with a capacity: the starting point's ratios, at least 1.
    pub(super) fn setpoint_for(&self, capacity: u64) -> Setpoint {
        let scale = |value: u64| -> u64 {
            let c0 = u128::from(self.start.total_active_users);
            let scaled = (u128::from(capacity) * u128::from(value) + c0 / 2) / c0;
            u64::try_from(scaled).unwrap_or(u64::MAX).max(1)
        };
        Setpoint {
            total_active_users: capacity,
            new_users_per_minute: scale(self.start.new_users_per_minute),
            burst: scale(self.start.burst),
        }
    }

    pub(super) fn apply(
        &mut self,
        now: Millis,
        direction: Direction,
        capacity: u64,
        reason: String,
    ) -> LimitChange {
        let from = self.current;
        self.current = self.setpoint_for(capacity);
        self.changed_at = Some(now);
        self.reason = reason.clone();
        LimitChange {
            at: now,
            direction,
            from,
            to: self.current,
            reason,
        }
    }
}
