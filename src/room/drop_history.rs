//! What the admission loop keeps for the drop report: at each tick, the store's counts (the
//! whole room's) and this instance's counters into the room's history of minutes
//! (`core::history`); and this instance's shares of those minutes, published to the store for
//! the other instances' reports. Nothing is counted for it on the request path.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Mutex, MutexGuard};

use super::Room;
use crate::clock::Millis;
use crate::core::history::{Buckets, Counters, History, MINUTE_MS, OwnCounters, Reading, Start};
use crate::core::room::RoomCounts;
use crate::observe::{ChallengeResult, Metrics, UpstreamFailure};

/// How often an instance publishes its shares of the drop report: how late another instance's
/// report may be about this one's counts.
const SHARES_EVERY_MS: Millis = 5_000;

pub struct DropHistory {
    history: Mutex<History>,
    /// When this instance last tried to publish its shares, and when one last reached the
    /// store (see `publish_shares`).
    shares_tried_at: AtomicI64,
    shares_sent_at: AtomicI64,
}

impl DropHistory {
    pub fn new(start: Start) -> Self {
        Self {
            history: Mutex::new(History::new(start)),
            shares_tried_at: AtomicI64::new(Millis::MIN),
            shares_sent_at: AtomicI64::new(Millis::MIN),
        }
    }

    /// The room's minutes as this instance read them.
    pub fn history(&self) -> MutexGuard<'_, History> {
        self.history.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A tick's reading of the room's `counts` and this instance's counters, at `now`.
    pub fn observe(&self, room: &Room, counts: &RoomCounts, now: Millis) {
        let reading = reading(&room.metrics, counts);
        self.history().observe(now, reading);
    }

    /// What this instance alone counted (its shares of the history's minutes: waits, order,
    /// the origin, revocations, challenges) goes to the store every [`SHARES_EVERY_MS`], so
    /// that any instance's drop report adds up every instance's: the current minute, and the
    /// one before until a publication made after its end reached the store (it was still
    /// growing at the last one). A publication replaces the previous one for its minutes, so
    /// one that fails is simply made again at the next.
    pub async fn publish_shares(&self, room: &Room, instance: &str) {
        let now = room.clock.now_ms();
        if now.saturating_sub(self.shares_tried_at.load(Ordering::Relaxed)) < SHARES_EVERY_MS {
            return;
        }
        self.shares_tried_at.store(now, Ordering::Relaxed);
        let minute = now - now.rem_euclid(MINUTE_MS);
        let since = if self.shares_sent_at.load(Ordering::Relaxed) < minute {
            minute - MINUTE_MS
        } else {
            minute
        };
        let shares = self.history().shares_since(since);
        match room.store.publish_shares(instance, &shares).await {
            Ok(()) => self.shares_sent_at.store(now, Ordering::Relaxed),
            Err(e) => log::debug!(
                "room {}: this instance's share of the report not published: {e}",
                room.id
            ),
        }
    }
}

/// What the history takes at a tick: the store's counts and this instance's counters, as they
/// stand, and the waits since the last reading.
fn reading(m: &Metrics, counts: &RoomCounts) -> Reading {
    let (responses, server_errors) = m.origin_responses();
    // Exchanges that ended without a response; `Status` is an answer, counted above.
    let unanswered: u64 = [
        UpstreamFailure::Connect,
        UpstreamFailure::Tls,
        UpstreamFailure::Timeout,
        UpstreamFailure::Resolve,
    ]
    .into_iter()
    .map(|kind| m.origin_failures(kind))
    .sum();
    let shared = m.passes_shared.get();
    Reading {
        inside: counts.occupancy(),
        waiting: counts.queued,
        counters: Counters {
            admitted: counts.admitted_total,
            joined: counts.joined_total,
            abandoned: counts.abandoned_total,
            own: OwnCounters {
                // Every revocation this instance made, less those for sharing.
                revoked_ended: m.revoked.get().saturating_sub(shared),
                revoked_shared: shared,
                challenges_passed: m.challenges(ChallengeResult::Passed),
                challenges_failed: m.challenges(ChallengeResult::Failed),
                origin_requests: responses + unanswered,
                origin_errors: server_errors + unanswered,
                order_pairs: m.order_pairs.get(),
                order_inversions: m.order_inversions.get(),
            },
        },
        waits: m.take_waits(),
        origin_latency: Buckets(Metrics::bucket_counts(&m.origin_seconds)),
    }
}
