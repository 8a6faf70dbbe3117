//! What the admission loop hands the gate every tick, and how waiting pages learn that it
//! changed.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;
use tokio::sync::watch;

use crate::clock::Millis;

/// The room as the admission loop last saw it: answers most polls without the store.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct RoomView {
    pub admitted_total: u64,
    pub queued: u64,
    /// Waiting visitors whose turn has come, until they claim it.
    pub called: HashSet<String>,
    /// The store's epoch (empty until the loop first reached the store).
    pub epoch: Arc<str>,
    /// When this instance first saw that epoch: for an `abandon_after` after it, tickets from
    /// before may still come back and take their old places ahead of others, so every poll is
    /// looked up exactly.
    pub epoch_seen_at: Millis,
    /// Admissions per second as last estimated; None until known.
    pub rate_per_second: Option<f64>,
}

impl RoomView {
    /// What a waiting visitor would notice changing.
    fn shows_the_same(&self, other: &RoomView) -> bool {
        self.admitted_total == other.admitted_total
            && self.queued == other.queued
            && self.called == other.called
            && self.epoch == other.epoch
    }
}

/// The one place the view is kept; the loop publishes, everyone else loads.
pub struct ViewCell {
    view: ArcSwap<RoomView>,
    pulse: Arc<Pulse>,
}

impl ViewCell {
    pub fn new(pulse: Arc<Pulse>) -> Self {
        Self {
            view: ArcSwap::from_pointee(RoomView::default()),
            pulse,
        }
    }

    pub fn load(&self) -> arc_swap::Guard<Arc<RoomView>> {
        self.view.load()
    }

    /// Replaces the view; waiting pages are woken when what they show may have changed.
    pub fn publish(&self, view: RoomView) {
        let changed = !self.view.load().shows_the_same(&view);
        self.view.store(Arc::new(view));
        if changed {
            self.pulse.changed();
        }
    }
}

/// A room-wide signal that wakes every open waiting page: when what it shows may have changed
/// (an admission round moved the line, the settings changed), and for a heartbeat. One watch
/// channel for the whole room: an idle stream costs no timer and no wake-up of its own.
pub struct Pulse(watch::Sender<Beat>);

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Beat {
    /// Counts changes: a stream recomputes its status when this moved.
    pub changes: u64,
    /// Counts heartbeats: a stream with nothing new writes a comment so that proxies and load
    /// balancers in front keep it open.
    pub heartbeats: u64,
}

impl Pulse {
    pub fn new() -> Self {
        Self(watch::Sender::new(Beat::default()))
    }

    pub fn changed(&self) {
        self.0.send_modify(|b| b.changes += 1);
    }

    pub fn heartbeat(&self) {
        self.0.send_modify(|b| b.heartbeats += 1);
    }

    pub fn subscribe(&self) -> watch::Receiver<Beat> {
        self.0.subscribe()
    }
}

impl Default for Pulse {
    fn default() -> Self {
        Self::new()
    }
}

/// Waiting visitors seen polling since the loop's last keep-alive batch: their heartbeats in the
/// store are slid once per tick for all of them, not once per poll.
#[derive(Default)]
pub struct Pollers {
    ids: Mutex<HashSet<String>>,
    /// Someone joined since the last batch: the loop must look (a quiet room's loop looks only
    /// once a second), but the join set the heartbeat itself, so no id needs sliding.
    joined: AtomicBool,
}

impl Pollers {
    pub fn seen(&self, id: &str) {
        let mut ids = self.ids.lock().unwrap_or_else(|p| p.into_inner());
        if !ids.contains(id) {
            ids.insert(id.to_owned());
        }
    }

    /// A visitor joined the line: wakes the loop without a heartbeat to send (on Redis, sliding
    /// it again was a read and a write of the visitor's shard for every new visitor).
    pub fn joined(&self) {
        self.joined.store(true, Ordering::Relaxed);
    }

    /// The batch for the loop.
    pub fn take(&self) -> Vec<String> {
        self.joined.store(false, Ordering::Relaxed);
        self.ids
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain()
            .collect()
    }

    /// Nobody seen or joined since the last batch: with nobody waiting either, the room is quiet.
    pub fn is_empty(&self) -> bool {
        !self.joined.load(Ordering::Relaxed)
            && self
                .ids
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .is_empty()
    }

    /// Gives back a batch the store could not take, so nobody is dropped for an outage.
    pub fn give_back(&self, ids: Vec<String>) {
        self.ids
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend(ids);
    }
}
