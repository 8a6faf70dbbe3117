//! The autopilot in the running proxy (issue #16): the admission loop's part of it, one
//! [`RoomPilotLoop`] per room, run at the end of each room's tick (`room::admission`).
//!
//! Every instance, each tick:
//! - sends the windows its [`Pilot`] finished to the store (`report_window`, not retried: a
//!   window counted twice would weigh this instance double);
//! - reads the shared state (`load_autopilot`, one round trip) and lays the leader's limits over
//!   the room's own ([`LiveSettings::steer`]), so admission and the gate's direct admission obey
//!   them. A record applies only while the room's own limits are still the ones it started from:
//!   after an operator's change (on any instance) the room's own limits apply at once, until the
//!   leader writes its new starting point.
//!
//! The leader also:
//! - on taking over, goes on from the stored record (`Controller::restore`) when it started from
//!   the room's current limits, else starts from them (`Controller::new`);
//! - follows the room's own limits (`Controller::reset`: an operator's change, an event, a
//!   reload), the `[autopilot]` of a reload (`Controller::reconfigure`) and the pause switch;
//! - notes occupancy and waiting at each tick ([`RoomWindow`]), and once a window is over and
//!   the other instances had time to report it (a grace of a quarter window, at most 1.5 s),
//!   reads the sum of every instance's window (`read_window`) and steps the controller; each
//!   change is logged (the [`LimitChange`]'s line);
//! - writes its record whenever the limits in force or the starting point differ from the
//!   store's, fenced like the admission round: a replaced leader gets `NotLeader` and forgets its
//!   controller.

use std::collections::VecDeque;
use std::sync::Arc;

use super::Room;
use crate::clock::Millis;
use crate::config::RoomSettings;
use crate::config::model::AutopilotConfig;
use crate::core::autopilot::{
    Controller, LimitChange, RoomObservation, RoomWindow, Setpoint, Settings, Status,
    judging_grace, window_start,
};
use crate::core::room::RoomCounts;
use crate::store::{AutopilotRecord, AutopilotState, StoreError};

/// Finished room windows the leader keeps while waiting for their grace (or the store).
const ROOM_WINDOWS_KEPT: usize = 8;

/// The room's own limits, as the autopilot's starting point.
pub fn own_setpoint(settings: &RoomSettings) -> Setpoint {
    Setpoint {
        total_active_users: settings.total_active_users,
        new_users_per_minute: settings.new_users_per_minute,
        burst: settings.burst,
    }
}

fn window_ms(settings: &Settings) -> Millis {
    Millis::try_from(settings.window.as_millis())
        .unwrap_or(Millis::MAX)
        .max(1)
}

/// What only the leader holds.
struct Leading {
    controller: Controller,
    /// The room's own limits the controller started from (the record's `start`).
    start: Setpoint,
    settings: Settings,
    /// The window being observed, by its start.
    observing: Millis,
    room: RoomWindow,
    /// Observed windows, oldest first: (start, end, what the room did).
    finished: VecDeque<(Millis, Millis, RoomObservation)>,
}

impl Leading {
    fn new(controller: Controller, start: Setpoint, settings: Settings, now: Millis) -> Self {
        let observing = window_start(now, window_ms(&settings));
        Self {
            controller,
            start,
            settings,
            observing,
            room: RoomWindow::default(),
            finished: VecDeque::new(),
        }
    }

    /// One admission tick's look at the room, after its admissions.
    fn observe(&mut self, now: Millis, counts: &RoomCounts) {
        let length = window_ms(&self.settings);
        let start = window_start(now, length);
        if start != self.observing {
            if let Some(seen) = self.room.take()
                && start > self.observing
            {
                if self.finished.len() >= ROOM_WINDOWS_KEPT {
                    self.finished.pop_front();
                }
                self.finished
                    .push_back((self.observing, self.observing + length, seen));
            }
            self.observing = start;
        }
        self.room.tick(counts.occupancy(), counts.queued);
    }

    /// A new window length: what was observed with the old one no longer lines up.
    fn restart_windows(&mut self, now: Millis) {
        self.observing = window_start(now, window_ms(&self.settings));
        self.room = RoomWindow::default();
        self.finished.clear();
    }

    fn record(&self, now: Millis) -> AutopilotRecord {
        let status = self.controller.status();
        AutopilotRecord {
            setpoint: self.controller.setpoint(),
            start: self.start,
            reason: status.reason,
            changed_at: status.changed_at.unwrap_or(now),
        }
    }
}

/// One room's autopilot in the admission loop.
pub struct RoomPilotLoop {
    room: Arc<Room>,
    /// Held across store calls: a tokio mutex. Ticks of one room never overlap in the loop; a
    /// test stepping the loop by hand waits its turn here.
    state: tokio::sync::Mutex<LoopState>,
}

/// What the leader's part of one tick works from.
struct LeaderTick<'a> {
    fence: u64,
    /// The autopilot was off since this process last led: start from the room's limits.
    fresh: bool,
    config: &'a AutopilotConfig,
    state: &'a AutopilotState,
    /// The room's own limits now.
    own: Setpoint,
    /// What the tick saw of the room after its admissions (None: the store did not answer).
    counts: Option<&'a RoomCounts>,
    now: Millis,
}

#[derive(Default)]
struct LoopState {
    leading: Option<Leading>,
    /// The autopilot was turned off by a reload while this process ran: turned on again, it
    /// starts from the room's limits, not from the record it left behind (stale by then).
    was_off: bool,
}

impl RoomPilotLoop {
    pub fn new(room: Arc<Room>) -> Self {
        Self {
            room,
            state: tokio::sync::Mutex::new(LoopState::default()),
        }
    }

    /// The end of a room's tick: `fence` while this instance leads, `counts` what the tick saw
    /// of the room after its admissions (None when the store did not answer).
    pub async fn tick(&self, fence: Option<u64>, counts: Option<&RoomCounts>) {
        for window in self.room.pilot.take_finished() {
            let reported = self.room.store.report_window(&window).await;
            if let Err(e) = reported {
                log::debug!(
                    "autopilot: window {} of room {} not reported: {e}",
                    window.started_at,
                    self.room.id
                );
            }
        }
        let config = self.room.pilot.config();
        let own = own_setpoint(&self.room.settings.own_now());
        let mut guard = self.state.lock().await;
        let LoopState { leading, was_off } = &mut *guard;
        if !config.enabled {
            *was_off = true;
            if leading.take().is_some() {
                log::info!(
                    "autopilot of room {} off: the room's own limits apply",
                    self.room.id
                );
            }
            self.room.settings.steer(None);
            self.room.pilot.set_status(
                Status::disabled(own.total_active_users, own.new_users_per_minute, own.burst),
                false,
            );
            return;
        }
        let state = self.room.store.load_autopilot().await;
        // Without the shared state, the limits in force stay as they are.
        let Ok(state) = state else {
            return;
        };
        let now = self.room.clock.now_ms();
        let record = match fence {
            Some(fence) => {
                let tick = LeaderTick {
                    fence,
                    fresh: std::mem::take(was_off),
                    config: &config,
                    state: &state,
                    own,
                    counts,
                    now,
                };
                self.lead(leading, tick).await
            }
            None => {
                if leading.take().is_some() {
                    log::info!(
                        "autopilot of room {}: no longer the leader, following the store",
                        self.room.id
                    );
                }
                state.record.clone()
            }
        };
        let applies = record.filter(|r| r.start == own);
        self.room
            .settings
            .steer(applies.as_ref().map(|r| r.setpoint));
        match leading.as_ref() {
            Some(l) => self.room.pilot.set_status(l.controller.status(), true),
            None => self
                .room
                .pilot
                .set_status(following(applies.as_ref(), state.paused, own), false),
        }
    }

    /// The leader's part; returns the record in force (what the store holds once this tick's
    /// write, if any, went through).
    async fn lead(
        &self,
        leading: &mut Option<Leading>,
        tick: LeaderTick<'_>,
    ) -> Option<AutopilotRecord> {
        let LeaderTick {
            fence,
            fresh,
            config,
            state,
            own,
            counts,
            now,
        } = tick;
        let settings = config.settings.clone();
        match leading {
            None => {
                let controller = match &state.record {
                    Some(r) if r.start == own && !fresh => {
                        Controller::restore(settings.clone(), own, r.setpoint, now)
                    }
                    _ => Controller::new(settings.clone(), own, now),
                };
                let controller = match controller {
                    Ok(c) => c,
                    Err(e) => {
                        // Validated with the config: only a bug gets here. Keep what runs.
                        log::error!("autopilot of room {} cannot start: {e}", self.room.id);
                        return state.record.clone();
                    }
                };
                log::info!(
                    "autopilot of room {}: leading from {} ({})",
                    self.room.id,
                    controller.setpoint(),
                    controller.status().reason
                );
                *leading = Some(Leading::new(controller, own, settings, now));
            }
            Some(l) => {
                if l.settings != settings {
                    let window_changed = l.settings.window != settings.window;
                    match l.controller.reconfigure(now, settings.clone()) {
                        Ok(change) => {
                            log::info!(
                                "autopilot of room {}: new [autopilot] settings",
                                self.room.id
                            );
                            self.log(change);
                            l.settings = settings;
                            if window_changed {
                                l.restart_windows(now);
                            }
                        }
                        Err(e) => log::error!("autopilot of room {}: {e}", self.room.id),
                    }
                }
                if l.start != own {
                    // The operator (or an event) changed the room's limits: the new start.
                    let change = l.controller.reset(now, own);
                    l.start = own;
                    self.log(change);
                }
            }
        }
        let l = leading.as_mut()?;
        if state.paused != l.controller.is_paused() {
            if state.paused {
                l.controller.pause(now);
                log::info!(
                    "autopilot of room {} paused: limits stay at {}",
                    self.room.id,
                    l.controller.setpoint()
                );
            } else {
                l.controller.resume(now);
                log::info!("autopilot of room {} resumed", self.room.id);
            }
        }
        if let Some(counts) = counts {
            l.observe(now, counts);
        }
        let grace = judging_grace(window_ms(&l.settings));
        while let Some(&(start, end, seen)) = l.finished.front() {
            if now < end + grace {
                break;
            }
            let window = self.room.store.read_window(start).await;
            let Ok(window) = window else {
                // Tried again next tick, while it is kept.
                break;
            };
            l.finished.pop_front();
            let change = l.controller.step(now, &window, seen);
            self.log(change);
        }
        let record = l.record(now);
        let stored = state
            .record
            .as_ref()
            .is_some_and(|r| r.setpoint == record.setpoint && r.start == record.start);
        if stored {
            return state.record.clone();
        }
        let saved = self.room.store.save_autopilot(&record, fence).await;
        match saved {
            Ok(()) => Some(record),
            Err(StoreError::NotLeader(_)) => {
                log::warn!(
                    "autopilot of room {}: another instance leads now, its limits apply",
                    self.room.id
                );
                *leading = None;
                state.record.clone()
            }
            // Written again next tick: the store's record still differs.
            Err(_) => state.record.clone(),
        }
    }

    fn log(&self, change: Option<LimitChange>) {
        if let Some(decision) = change {
            log::info!(room = self.room.id.as_str(); "{decision}");
        }
    }
}

/// The status of an instance that applies the leader's record.
fn following(record: Option<&AutopilotRecord>, paused: bool, own: Setpoint) -> Status {
    match record {
        Some(r) => Status {
            enabled: true,
            paused,
            total_active_users: r.setpoint.total_active_users,
            new_users_per_minute: r.setpoint.new_users_per_minute,
            burst: r.setpoint.burst,
            reason: r.reason.clone(),
            changed_at: Some(r.changed_at),
            last_step: "the leader decides: this instance applies its limits".into(),
            phase: "following",
        },
        None => Status {
            enabled: true,
            paused,
            total_active_users: own.total_active_users,
            new_users_per_minute: own.new_users_per_minute,
            burst: own.burst,
            reason: "no decision of the leader for these limits yet: the room's own apply".into(),
            changed_at: None,
            last_step: "the leader decides: this instance applies its limits".into(),
            phase: "following",
        },
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::clock::{Clock, ManualClock};
    use crate::config::Config;
    use crate::config::model::Environment;
    use crate::core::autopilot::Exchange;
    use crate::observe::MetricsRegistry;
    use crate::room::Room;
    use crate::store::Store;
    use crate::store::memory::MemoryStore;

    struct NoEnvironment;

    impl Environment for NoEnvironment {
        fn var(&self, _name: &str) -> Option<String> {
            None
        }
    }

    /// A room of 20 on the driven clock, its autopilot judging 1 s windows against 50 ms.
    fn make_room(store: Arc<dyn Store>, clock: &Arc<ManualClock>) -> (Arc<Room>, RoomPilotLoop) {
        let text = "[origin]\naddress = \"127.0.0.1:1\"\n[room]\nid = \"r\"\nname = \"R\"\n\
                    total_active_users = 20\nnew_users_per_minute = 600\nburst = 20\n\
                    session_duration = \"10m\"\n[pass]\nsecret = \"test-secret-test-secret-test-secret!!\"\n\
                    [admin]\ntoken = \"test-secret-test-secret-test-secret!!\"\n\
                    [autopilot]\nenabled = true\nlatency_target = \"50ms\"\nwindow = \"1s\"\n\
                    min_interval = \"1s\"\nmin_requests = 20\nmin_active_users = 2\n\
                    max_active_users = 100\n";
        let (config, _) = Config::parse(text, &NoEnvironment, false).unwrap();
        let metrics = MetricsRegistry::new();
        let room = Room::new(
            "r",
            config.rooms[0].settings.clone(),
            store,
            clock.clone(),
            &metrics,
        )
        .with_autopilot(config.rooms[0].autopilot.clone());
        let room = Arc::new(room);
        let pilot = RoomPilotLoop::new(room.clone());
        (room, pilot)
    }

    /// One admission tick of the leader: counts, then the autopilot.
    async fn lead_tick(room: &Room, pilot: &RoomPilotLoop) {
        let fence = room.store.lead("a", 60_000).await.unwrap();
        assert!(fence.is_some());
        let counts = room.store.counts().await.unwrap();
        pilot.tick(fence, Some(&counts)).await;
    }

    /// To 10 ms into the next window.
    fn next_window(clock: &ManualClock) {
        let now = clock.now_ms();
        let next = window_start(now, 1_000) + 1_000 + 10;
        clock.advance(Duration::from_millis(u64::try_from(next - now).unwrap()));
    }

    /// A window where the origin answered `requests` times in `latency_ms`, with ticks along it,
    /// judged a grace after its end.
    async fn window(room: &Room, pilot: &RoomPilotLoop, clock: &ManualClock, latency_ms: u64) {
        next_window(clock);
        lead_tick(room, pilot).await;
        for _ in 0..40 {
            room.pilot.record(Exchange::Response {
                status: 200,
                latency: Duration::from_millis(latency_ms),
            });
        }
        for _ in 0..4 {
            clock.advance(Duration::from_millis(200));
            lead_tick(room, pilot).await;
        }
        // The end (the window is reported), then past the grace (250 ms): judged.
        clock.advance(Duration::from_millis(200));
        lead_tick(room, pilot).await;
        clock.advance(Duration::from_millis(1_000));
        lead_tick(room, pilot).await;
    }

    async fn fill(room: &Room, n: usize) {
        for i in 0..n {
            let limits = room.settings.now().limits();
            room.store
                .admit_directly(&format!("v{i}"), &limits)
                .await
                .unwrap();
        }
    }

    #[tokio::test]
    async fn a_slow_window_lowers_the_limits_in_force_and_nobody_leaves() {
        let clock = ManualClock::starting_now();
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new(clock.clone(), 7));
        let (room, pilot) = make_room(store.clone(), &clock);
        lead_tick(&room, &pilot).await;
        let record = store.load_autopilot().await.unwrap().record.unwrap();
        assert_eq!(record.setpoint.total_active_users, 20, "the starting point");
        fill(&room, 20).await;
        // 40 answers of 500 ms in a 1 s window: 20 in flight with 20 inside; the cut is the
        // deepest, half the occupancy.
        window(&room, &pilot, &clock, 500).await;
        let now = room.settings.now();
        assert_eq!(
            (now.total_active_users, now.new_users_per_minute, now.burst),
            (10, 300, 10)
        );
        assert_eq!(room.settings.own_now().total_active_users, 20);
        let shown = room.pilot.status();
        let (status, decides) = (&shown.0, shown.1);
        assert!(decides);
        assert_eq!(status.total_active_users, 10);
        assert!(status.reason.starts_with("breach"), "{}", status.reason);
        let stored = store.load_autopilot().await.unwrap().record.unwrap();
        assert_eq!(stored.setpoint.total_active_users, 10);
        assert_eq!(stored.start.total_active_users, 20);
        // Nobody evicted, nobody new let in.
        assert_eq!(store.counts().await.unwrap().occupancy(), 20);
        let limits = room.settings.now().limits();
        assert_eq!(store.admit_directly("late", &limits).await.unwrap(), None);
    }

    #[tokio::test]
    async fn an_operator_change_resets_pause_holds_and_followers_apply_the_record() {
        let clock = ManualClock::starting_now();
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new(clock.clone(), 7));
        let (room, pilot) = make_room(store.clone(), &clock);
        let (other, follower) = make_room(store.clone(), &clock);
        lead_tick(&room, &pilot).await;
        fill(&room, 20).await;
        window(&room, &pilot, &clock, 500).await;
        assert_eq!(room.settings.now().total_active_users, 10);

        // Another instance, not leading, applies the stored limits.
        follower.tick(None, None).await;
        assert_eq!(other.settings.now().total_active_users, 10);
        let shown = other.pilot.status();
        let (status, decides) = (&shown.0, shown.1);
        assert!(!decides);
        assert_eq!(status.phase, "following");

        // Paused: a breach changes nothing.
        store.set_autopilot_paused(true).await.unwrap();
        lead_tick(&room, &pilot).await;
        assert!(room.pilot.status().0.paused);
        let patched = room
            .settings
            .configured()
            .patched(&serde_json::json!({"total_active_users": 30}))
            .unwrap();
        room.settings.apply(patched);
        lead_tick(&room, &pilot).await;
        assert_eq!(room.settings.now().total_active_users, 30, "the new start");
        assert_eq!(room.settings.now().new_users_per_minute, 600);
        window(&room, &pilot, &clock, 500).await;
        assert_eq!(
            room.settings.now().total_active_users,
            30,
            "held while paused"
        );
        assert!(room.pilot.status().0.paused);

        // The follower's own limits are still 20: the record (started from 30) is not for them.
        follower.tick(None, None).await;
        assert_eq!(other.settings.now().total_active_users, 20);

        // Resumed, the next breach lowers it again, from the occupancy.
        store.set_autopilot_paused(false).await.unwrap();
        lead_tick(&room, &pilot).await;
        window(&room, &pilot, &clock, 500).await;
        assert_eq!(room.settings.now().total_active_users, 10);
    }

    #[tokio::test]
    async fn a_new_leader_goes_on_from_the_record_and_turned_off_the_room_s_own_apply() {
        let clock = ManualClock::starting_now();
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new(clock.clone(), 7));
        let (room, pilot) = make_room(store.clone(), &clock);
        lead_tick(&room, &pilot).await;
        fill(&room, 20).await;
        window(&room, &pilot, &clock, 500).await;
        let (successor_room, successor) = make_room(store.clone(), &clock);
        lead_tick(&successor_room, &successor).await;
        assert_eq!(successor_room.settings.now().total_active_users, 10);
        assert!(
            successor_room
                .pilot
                .status()
                .0
                .reason
                .contains("taken over"),
        );

        let mut off = (*successor_room.pilot.config()).clone();
        off.enabled = false;
        successor_room.pilot.reconfigure(off);
        lead_tick(&successor_room, &successor).await;
        assert_eq!(successor_room.settings.now().total_active_users, 20);
        assert_eq!(successor_room.pilot.status().0.phase, "off");
    }

    #[tokio::test]
    async fn a_quiet_window_changes_nothing() {
        let clock = ManualClock::starting_now();
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new(clock.clone(), 7));
        let (room, pilot) = make_room(store.clone(), &clock);
        lead_tick(&room, &pilot).await;
        fill(&room, 20).await;
        for _ in 0..3 {
            next_window(&clock);
            for _ in 0..10 {
                clock.advance(Duration::from_millis(200));
                lead_tick(&room, &pilot).await;
            }
        }
        assert_eq!(room.settings.now().total_active_users, 20);
        assert!(room.pilot.status().0.last_step.contains("not enough"));
    }
}
