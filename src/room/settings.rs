//! The room's live settings: as configured (the file, the admin API, what another instance
//! saved), and as in effect now (a scheduled event's overrides applied), worked out again exactly
//! when an event boundary passes, not at the next tick.

use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;

use crate::clock::{Millis, SharedClock};
use crate::config::RoomSettings;
use crate::room::Pulse;
use crate::service::metrics::Metrics;

pub struct LiveSettings {
    configured: ArcSwap<RoomSettings>,
    effective: ArcSwap<Effective>,
    /// One recomputation at a time: a crowd crossing a boundary together computes it once.
    recompute: Mutex<()>,
    clock: SharedClock,
    metrics: Arc<Metrics>,
    pulse: Arc<Pulse>,
}

#[derive(Debug)]
struct Effective {
    settings: Arc<RoomSettings>,
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
                from: Millis::MAX,
                until: Millis::MIN,
            }),
            configured: ArcSwap::from_pointee(configured),
            recompute: Mutex::new(()),
            clock,
            metrics,
            pulse,
        };
        live.work_out(live.clock.now_ms());
        live
    }

    /// The settings in effect now (an event's overrides applied).
    pub fn now(&self) -> Arc<RoomSettings> {
        let now = self.clock.now_ms();
        let current = self.effective.load();
        if now >= current.from && now < current.until {
            return current.settings.clone();
        }
        drop(current);
        let _one_at_a_time = self.recompute.lock().unwrap_or_else(|p| p.into_inner());
        let current = self.effective.load();
        if now >= current.from && now < current.until {
            return current.settings.clone();
        }
        self.work_out(now)
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

    fn work_out(&self, now: Millis) -> Arc<RoomSettings> {
        let (settings, until) = self.configured.load().at(now);
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
        let settings = Arc::new(settings);
        self.effective.store(Arc::new(Effective {
            settings: settings.clone(),
            from: now,
            until,
        }));
        settings
    }
}
