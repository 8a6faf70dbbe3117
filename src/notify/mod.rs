//! `[notify]`: the shop's webhook told when a visitor who gave a contact key (an entry token's
//! `contact` claim) is called, so the shop can send an e-mail or an SMS. The instance where the
//! visitor joined holds its contact (`Contacts`, in memory, bounded); the admission loop hands
//! it the visitors it learns are called each tick, and the call goes into one bounded queue
//! (`Outbox`) that a background task drains (`delivery.rs`): never on the request path. A
//! contact held by an instance that stops is lost with it.

mod delivery;
pub mod signature;

pub use delivery::Delivery;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde::Serialize;
use tokio::sync::mpsc;

use crate::clock::{Millis, rfc3339_ms};
use crate::config::model::NotifyConfig;
use crate::core::queue_id::QueueId;
use crate::observe::{Metrics, NotifyResult};

/// The contacts one room holds at most on one instance (an entry token's contact is at most
/// `entry::MAX_CONTACT_BYTES`, 256: under 40 MB).
const MAX_CONTACTS: usize = 100_000;
/// A contact whose visitor was neither called nor seen leaving for this long has most likely
/// stopped waiting (its place expired on some instance); it makes room for others.
const CONTACT_TTL_MS: Millis = 24 * 3600 * 1000;

/// What the receiver is sent: one visitor called.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Called {
    /// Unique per call, the same on every retry: the receiver drops duplicates by it.
    pub event_id: String,
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub room: String,
    pub queue_id: String,
    pub contact: String,
    /// RFC 3339, when this instance learned of the call.
    pub called_at: String,
}

/// A call waiting to be sent, with its room's counters.
struct Queued {
    called: Called,
    metrics: Arc<Metrics>,
}

/// The queue of calls to send, over every room; full, a call is dropped and counted.
#[derive(Clone)]
pub struct Outbox {
    sender: mpsc::Sender<Queued>,
}

impl Outbox {
    /// The queue and the task's end of it, to be run as a background service.
    pub fn new(config: &NotifyConfig) -> Result<(Self, Delivery), reqwest::Error> {
        let (sender, receiver) = mpsc::channel(config.queue_size);
        Ok((Self { sender }, Delivery::new(config, receiver)?))
    }

    fn push(&self, called: Called, metrics: &Arc<Metrics>) {
        let queued = Queued {
            called,
            metrics: metrics.clone(),
        };
        if let Err(e) = self.sender.try_send(queued) {
            let (reason, queued) = match e {
                mpsc::error::TrySendError::Full(q) => ("the queue is full", q),
                mpsc::error::TrySendError::Closed(q) => ("the sender has stopped", q),
            };
            log::warn!(
                "notify: call of queue id {} in room {} dropped: {reason}",
                queued.called.queue_id,
                queued.called.room
            );
            metrics.notification(NotifyResult::Dropped);
        }
    }
}

/// One room's contacts on this instance: visitor id → the contact key its entry token gave.
pub struct Contacts {
    room: String,
    outbox: Outbox,
    metrics: Arc<Metrics>,
    /// `MAX_CONTACTS`, smaller in tests.
    room_for: usize,
    held: Mutex<HashMap<String, Held>>,
}

struct Held {
    contact: String,
    since: Millis,
}

impl Contacts {
    pub fn new(room: &str, outbox: Outbox, metrics: Arc<Metrics>) -> Self {
        Self {
            room: room.to_owned(),
            outbox,
            metrics,
            room_for: MAX_CONTACTS,
            held: Mutex::new(HashMap::new()),
        }
    }

    #[cfg(test)]
    fn with_room_for(mut self, room_for: usize) -> Self {
        self.room_for = room_for;
        self
    }

    fn held(&self) -> std::sync::MutexGuard<'_, HashMap<String, Held>> {
        self.held
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Visitor `id`, in line, is to be told at `contact` when called. A room already holding
    /// `MAX_CONTACTS` (after those past `CONTACT_TTL_MS` are let go) drops it, counted.
    pub fn note(&self, id: &str, contact: &str, now: Millis) {
        let mut held = self.held();
        if held.len() >= self.room_for && !held.contains_key(id) {
            held.retain(|_, h| now - h.since < CONTACT_TTL_MS);
            if held.len() >= self.room_for {
                drop(held);
                log::warn!(
                    "notify: room {} holds {} contacts already; queue id {} will not be told",
                    self.room,
                    self.room_for,
                    QueueId::of(id)
                );
                self.metrics.notification(NotifyResult::Dropped);
                return;
            }
        }
        held.insert(
            id.to_owned(),
            Held {
                contact: contact.to_owned(),
                since: now,
            },
        );
    }

    /// Visitor `id` left the room: nobody to tell.
    pub fn forget(&self, id: &str) {
        self.held().remove(id);
    }

    /// No contact held here: the loop need not ask who is called for them.
    pub fn is_empty(&self) -> bool {
        self.held().is_empty()
    }

    /// The admission loop learned these visitors are called at `now`: each one whose contact
    /// is held here is queued once (its contact let go, so a later tick does not call again).
    pub fn called(&self, ids: &[String], now: Millis) {
        let told: Vec<(String, String)> = {
            let mut held = self.held();
            if held.is_empty() {
                return;
            }
            ids.iter()
                .filter_map(|id| held.remove(id).map(|h| (id.clone(), h.contact)))
                .collect()
        };
        for (id, contact) in told {
            let called = Called {
                event_id: event_id(),
                kind: "called",
                room: self.room.clone(),
                queue_id: QueueId::of(&id).to_string(),
                contact,
                called_at: rfc3339_ms(now),
            };
            self.outbox.push(called, &self.metrics);
        }
    }
}

/// 128 random bits, hex.
fn event_id() -> String {
    (0..16)
        .map(|_| format!("{:02x}", rand::random::<u8>()))
        .collect()
}

#[cfg(test)]
mod tests;
