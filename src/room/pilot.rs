//! The autopilot's part of a room (issue #16) that the proxy and the admission loop share: the
//! room's `[autopilot]` as in effect (a reload replaces it), the [`Recorder`] of this instance's
//! origin exchanges (written by the proxy on every admitted request, taken by the loop once per
//! window), and the status `/admin/state` shows (written by the loop).
//!
//! The hot path takes one short mutex per origin exchange, and only while the autopilot is on:
//! a histogram increment, no allocation, no I/O. Finished windows wait here until the loop's
//! next tick sends them to the store.

use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;

use crate::clock::SharedClock;
use crate::config::model::AutopilotConfig;
use crate::core::autopilot::{Exchange, Recorder, Signal, Status};

/// Finished windows kept while the store cannot take them: older ones are past what the leader
/// still reads (`WINDOW_KEPT_FOR` windows), so the oldest goes first.
const FINISHED_KEPT: usize = 4;

struct Recording {
    recorder: Recorder,
    finished: Vec<Signal>,
}

pub struct Pilot {
    config: ArcSwap<AutopilotConfig>,
    recording: Mutex<Recording>,
    clock: SharedClock,
    /// What `/admin/state` shows, and whether this instance decides (the leader) or follows.
    status: ArcSwap<(Status, bool)>,
}

impl Pilot {
    pub fn new(config: AutopilotConfig, clock: SharedClock, status: Status) -> Self {
        let recorder = Recorder::new(config.settings.window, clock.now_ms());
        Self {
            config: ArcSwap::from_pointee(config),
            recording: Mutex::new(Recording {
                recorder,
                finished: Vec::new(),
            }),
            clock,
            status: ArcSwap::from_pointee((status, false)),
        }
    }

    pub fn config(&self) -> Arc<AutopilotConfig> {
        self.config.load_full()
    }

    /// A reload's `[autopilot]`. A new window length starts a new recorder: the window under
    /// way is dropped (the old and new windows would not line up).
    pub fn reconfigure(&self, config: AutopilotConfig) {
        let window_changed = config.settings.window != self.config.load().settings.window;
        if window_changed {
            let mut recording = self.lock();
            recording.recorder = Recorder::new(config.settings.window, self.clock.now_ms());
            recording.finished.clear();
        }
        self.config.store(Arc::new(config));
    }

    /// Whether an admitted request to this canonical path is part of the autopilot's signal.
    pub fn watches(&self, path: &str) -> bool {
        let config = self.config.load();
        config.enabled && !config.exclude.iter().any(|p| p.matches(path))
    }

    /// One origin exchange of a watched request, ended now.
    pub fn record(&self, exchange: Exchange) {
        let now = self.clock.now_ms();
        let mut recording = self.lock();
        if let Some(done) = recording.recorder.record(now, exchange) {
            recording.keep(done);
        }
    }

    /// The windows finished by now, with exchanges in them, oldest first: for the store.
    pub fn take_finished(&self) -> Vec<Signal> {
        let now = self.clock.now_ms();
        let mut recording = self.lock();
        if let Some(done) = recording.recorder.roll(now) {
            recording.keep(done);
        }
        std::mem::take(&mut recording.finished)
    }

    pub fn status(&self) -> Arc<(Status, bool)> {
        self.status.load_full()
    }

    /// `decides`: this instance is the leader and its controller set the status.
    pub fn set_status(&self, status: Status, decides: bool) {
        self.status.store(Arc::new((status, decides)));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Recording> {
        // A panic elsewhere while holding it leaves counts, never a broken invariant.
        self.recording
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Recording {
    fn keep(&mut self, window: Signal) {
        // An instance with no exchanges in a window reports nothing.
        if window.requests == 0 {
            return;
        }
        if self.finished.len() >= FINISHED_KEPT {
            self.finished.remove(0);
        }
        self.finished.push(window);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::clock::ManualClock;
    use crate::core::autopilot::Settings;

    fn pilot(clock: &Arc<ManualClock>) -> Pilot {
        let config = AutopilotConfig {
            enabled: true,
            settings: Settings {
                window: Duration::from_secs(2),
                ..Settings::default()
            },
            exclude: vec![],
        };
        Pilot::new(config, clock.clone(), Status::disabled(1, 1, 1))
    }

    #[test]
    fn windows_are_handed_over_once_finished_and_only_with_exchanges() {
        let clock = ManualClock::starting_now();
        let p = pilot(&clock);
        p.record(Exchange::Failed);
        assert!(p.take_finished().is_empty(), "the window is under way");
        clock.advance(Duration::from_secs(2));
        let done = p.take_finished();
        assert_eq!(done.len(), 1);
        assert_eq!((done[0].requests, done[0].errors), (1, 1));
        clock.advance(Duration::from_secs(2));
        assert!(p.take_finished().is_empty(), "an empty window is not sent");
    }

    #[test]
    fn excluded_paths_and_a_room_with_the_autopilot_off_are_not_watched() {
        let clock = ManualClock::starting_now();
        let p = pilot(&clock);
        let mut config = (*p.config()).clone();
        config.exclude = vec![crate::request::route::PathPattern::parse("/static/*").unwrap()];
        p.reconfigure(config.clone());
        assert!(p.watches("/checkout"));
        assert!(!p.watches("/static/app.js"));
        config.enabled = false;
        p.reconfigure(config);
        assert!(!p.watches("/checkout"));
    }

    #[test]
    fn a_new_window_length_starts_a_new_window() {
        let clock = ManualClock::starting_now();
        let p = pilot(&clock);
        p.record(Exchange::Failed);
        let mut config = (*p.config()).clone();
        config.settings.window = Duration::from_secs(5);
        p.reconfigure(config);
        clock.advance(Duration::from_secs(5));
        assert!(
            p.take_finished().is_empty(),
            "the old window's exchange was dropped"
        );
    }

    #[test]
    fn a_store_that_does_not_take_them_keeps_only_the_last_few() {
        let clock = ManualClock::starting_now();
        let p = pilot(&clock);
        for _ in 0..10 {
            p.record(Exchange::Response {
                status: 200,
                latency: Duration::from_millis(5),
            });
            clock.advance(Duration::from_secs(2));
        }
        let done = p.take_finished();
        assert_eq!(done.len(), FINISHED_KEPT);
        assert!(done.windows(2).all(|w| w[0].started_at < w[1].started_at));
    }
}
