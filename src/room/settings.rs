//! The room's live settings: as configured (the file, the admin API, what another instance
//! saved), and as in effect now (a scheduled event's overrides applied, then the autopilot's
//! limits when it steers), worked out again exactly when an event boundary passes, not at the
//! next tick.

use std::sync::{Arc, Mutex};

use arc_swap::{ArcSwap, ArcSwapOption};

use crate::clock::{Millis, SharedClock};
use crate::config::RoomSettings;
use crate::core::autopilot::Setpoint;
use crate::observe::Metrics;
use crate::room::Pulse;

pub struct LiveSettings {
    configured: ArcSwap<RoomSettings>,
    effective: ArcSwap<Effective>,
    /// The autopilot's limits, laid over the room's own (issue #16); None: the room's own apply.
    steered: ArcSwapOption<Setpoint>,
    /// One recomputation at a time: a crowd crossing a boundary together computes it once.
    recompute: Mutex<()>,
    clock: SharedClock,
    metrics: Arc<Metrics>,
    pulse: Arc<Pulse>,
}

#[derive(Debug)]
struct Effective {
    /// In force: `own` with the autopilot's limits laid over it.
    settings: Arc<RoomSettings>,
    /// The room's own: as configured, an event's overrides applied.
    own: Arc<RoomSettings>,
    /// Valid from when it was worked out until the next event boundary.
    from: Millis,
    until: Millis,
}

impl LiveSettings {
    pub fn new(
        configured: RoomSettings,
        clock: SharedClock,
        metrics: Arc<Metrics>,
        pulse: Arc<Pulse>,
    ) -> Self {
        let live = Self {
            effective: ArcSwap::from_pointee(Effective {
                settings: Arc::new(configured.clone()),
                own: Arc::new(configured.clone()),
                from: Millis::MAX,
                until: Millis::MIN,
            }),
            configured: ArcSwap::from_pointee(configured),
            steered: ArcSwapOption::empty(),
            recompute: Mutex::new(()),
            clock,
            metrics,
            pulse,
        };
        live.work_out(live.clock.now_ms());
        live
    }

    /// The settings in effect now (an event's overrides applied, and the autopilot's limits
    /// when it steers): what admission obeys.
    pub fn now(&self) -> Arc<RoomSettings> {
        self.effective().settings.clone()
    }

    /// The room's own settings now (an event's overrides applied), without the autopilot's
    /// limits: its starting point, and what `/admin/state` shows as the room's.
    pub fn own_now(&self) -> Arc<RoomSettings> {
        self.effective().own.clone()
    }

    fn effective(&self) -> Arc<Effective> {
        let now = self.clock.now_ms();
        let current = self.effective.load_full();
        if now >= current.from && now < current.until {
            return current;
        }
        drop(current);
        let _one_at_a_time = self.recompute.lock().unwrap_or_else(|p| p.into_inner());
        let current = self.effective.load_full();
        if now >= current.from && now < current.until {
            return current;
        }
        self.work_out(now)
    }

    /// Lays the autopilot's limits over the room's own (None: the room's own apply again).
    /// Lowering them never evicts anyone: admission only adds while occupancy is below them.
    pub fn steer(&self, setpoint: Option<Setpoint>) {
        // Called at every tick: the common case (no change) takes no lock.
        if self.steered.load().as_deref() == setpoint.as_ref() {
            return;
        }
        let _one_at_a_time = self.recompute.lock().unwrap_or_else(|p| p.into_inner());
        if self.steered.load().as_deref() == setpoint.as_ref() {
            return;
        }
        self.steered.store(setpoint.map(Arc::new));
        self.work_out(self.clock.now_ms());
        // Waiting pages show an estimate from the rate: it changed.
        self.pulse.changed();
    }

    /// The autopilot's limits laid over the room's own, if it steers.
    pub fn steered(&self) -> Option<Setpoint> {
        self.steered.load().as_deref().copied()
    }

    /// The settings as configured, which the admin API patches and saves.
    pub fn configured(&self) -> Arc<RoomSettings> {
        self.configured.load_full()
    }

    pub fn apply(&self, settings: RoomSettings) {
        let _one_at_a_time = self.recompute.lock().unwrap_or_else(|p| p.into_inner());
        self.configured.store(Arc::new(settings));
        self.work_out(self.clock.now_ms());
        self.pulse.changed();
    }

    fn work_out(&self, now: Millis) -> Arc<Effective> {
        let (own, until) = self.configured.load().at(now);
        let mut settings = own.clone();
        if let Some(steered) = self.steered.load().as_deref() {
            settings.total_active_users = steered.total_active_users;
            settings.new_users_per_minute = steered.new_users_per_minute;
            settings.burst = steered.burst;
        }
        let previous = self.effective.load();
        let phase = |s: &RoomSettings| s.event.as_ref().map(|e| (e.name.clone(), e.phase));
        if phase(&previous.settings) != phase(&settings) {
            match &settings.event {
                Some(e) => log::info!("event {:?} now in its {:?} phase", e.name, e.phase),
                None => log::info!("no event governs the room now"),
            }
            self.pulse.changed();
        }
        drop(previous);
        let gauge = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        let m = &self.metrics;
        m.capacity.set(gauge(settings.total_active_users));
        m.rate_per_minute.set(gauge(settings.new_users_per_minute));
        let admitting = settings.limits().admitting && !settings.suspended;
        m.admitting.set(i64::from(admitting));
        m.prequeueing.set(i64::from(settings.prequeueing()));
        m.autopilot_total_active_users
            .set(gauge(settings.total_active_users));
        m.autopilot_new_users_per_minute
            .set(gauge(settings.new_users_per_minute));
        let effective = Arc::new(Effective {
            settings: Arc::new(settings),
            own: Arc::new(own),
            from: now,
            until,
        });
        self.effective.store(effective.clone());
        effective
    }
}
