//! The admission model of one room, with no I/O: who waits, who was called, who holds a pass,
//! and the token bucket. The in-memory store runs it behind a mutex; the Redis store runs the same
//! rules in Lua, and both pass one conformance suite.
//!
//! Occupancy is live passes plus called visitors who have not yet claimed their admission. It
//! never exceeds the capacity because every step that adds to it (direct admission, an admission
//! round) checks the capacity inside the same critical section.

use std::collections::{HashMap, VecDeque};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::clock::Millis;
use crate::core::bucket::TokenBucket;
use crate::core::expiring::ExpiringSet;
use crate::core::queue::{OrderedQueue, Place};
use crate::core::queue_id::QueueId;

/// How an admission round chooses among the waiting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pick {
    /// Arrival order.
    Fifo,
    /// Uniformly at random among everyone waiting.
    Random,
}

/// How a new arrival's place in line is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placing {
    /// In order of arrival.
    Arrival,
    /// The lottery: arrivals within each window of this length are shuffled among themselves,
    /// and the windows keep their order, so arriving a few milliseconds earlier gives no edge.
    Lottery { window_ms: Millis },
    /// An event's shuffled pre-queue: every arrival before `until_ms` draws a uniformly random
    /// place between `from_ms` and `until_ms`, so at the start the pre-queue stands in random
    /// order and later arrivals go behind it.
    DrawUntil { from_ms: Millis, until_ms: Millis },
}

impl Placing {
    /// The span of time whose places an arrival at `now` draws from; None: arrival order.
    pub fn draw_span(self, now: Millis) -> Option<(Millis, Millis)> {
        match self {
            Placing::Arrival => None,
            Placing::Lottery { window_ms } => {
                let window_ms = window_ms.max(1);
                let from = now - now.rem_euclid(window_ms);
                Some((from, from + window_ms))
            }
            Placing::DrawUntil { from_ms, until_ms } => {
                (now < until_ms).then_some((from_ms.min(now), until_ms))
            }
        }
    }
}

/// The place drawn in a span with the random number `r`: uniform over the span's places (one per
/// microsecond, like arrival places), so drawn and arrival places compare on one scale.
pub fn drawn_place(from_ms: Millis, until_ms: Millis, r: u64) -> Place {
    let span = u64::try_from((until_ms - from_ms).max(1)).unwrap_or(1) * 1000;
    from_ms * 1000 + (r % span) as Place
}

/// The knobs an admission step obeys, taken from the live room settings.
#[derive(Debug, Clone, PartialEq)]
pub struct Limits {
    pub capacity: u64,
    pub new_users_per_minute: u64,
    pub burst: u64,
    pub session_ms: Millis,
    pub abandon_after_ms: Millis,
    pub claim_window_ms: Millis,
    pub pick: Pick,
    pub placing: Placing,
    /// False under `queue_all` and `reject`: nobody new gets in.
    pub admitting: bool,
}

/// Where a join put a visitor: its place, its 1-based position, and how many wait in all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placed {
    pub place: Place,
    pub position: u64,
    pub queued: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PollOutcome {
    Waiting {
        position: u64,
        queued: u64,
    },
    /// The visitor holds a pass until `expires_at`. `called_at`, when the admission round called
    /// it, is set on the poll that claimed the admission, so the admission is recorded once.
    Admitted {
        expires_at: Millis,
        called_at: Option<Millis>,
    },
    /// Not waiting, not called, no pass: abandoned, left, or lost with the store's data.
    Unknown,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RoundReport {
    pub called: u64,
    pub expired: u64,
    pub abandoned: u64,
    pub no_shows: u64,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct RoomCounts {
    pub passes: u64,
    pub called: u64,
    pub queued: u64,
    pub admitted_total: u64,
    pub admitted_last_minute: u64,
    pub abandoned_total: u64,
    pub expired_total: u64,
    pub revoked_total: u64,
    pub no_show_total: u64,
    /// Visitors given a place in line (a join again with the same id keeps its place and is
    /// not counted twice): the drop report's `joined`.
    pub joined_total: u64,
}

impl RoomCounts {
    pub fn occupancy(&self) -> u64 {
        self.passes + self.called
    }
}

/// Where a visitor found by its queue id stands (`GET /admin/visitors/{id}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VisitorState {
    Waiting {
        position: u64,
        queued: u64,
    },
    /// Called by an admission round; its admission is held for it until `claim_by`.
    Called {
        claim_by: Millis,
    },
    /// Holds a pass until `expires_at`.
    Inside {
        expires_at: Millis,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FoundVisitor {
    /// When the visitor first got a place in line or, admitted at once, its pass.
    pub arrived_at: Millis,
    pub state: VisitorState,
}

const MINUTE_MS: Millis = 60_000;

#[derive(Debug)]
pub struct RoomState {
    epoch: String,
    queue: OrderedQueue,
    places: HashMap<String, Place>,
    /// Waiting visitors, due to be dropped when they stop polling.
    heartbeats: ExpiringSet,
    /// Called visitors, due to free their slot if they never come back to claim it.
    called: ExpiringSet,
    passes: ExpiringSet,
    revoked: ExpiringSet,
    bucket: Option<TokenBucket>,
    last_place: Place,
    recent_admissions: VecDeque<Millis>,
    counts: RoomCounts,
    /// Every visitor the room holds (waiting, called or inside) by its queue id, with its id
    /// and arrival: kept exactly as long as the visitor is in one of those, so it never grows
    /// past the room's own records.
    visitors: HashMap<QueueId, (String, Millis)>,
    rng: StdRng,
}

impl RoomState {
    pub fn new(epoch: String, seed: u64) -> Self {
        Self {
            epoch,
            queue: OrderedQueue::default(),
            places: HashMap::new(),
            heartbeats: ExpiringSet::default(),
            called: ExpiringSet::default(),
            passes: ExpiringSet::default(),
            revoked: ExpiringSet::default(),
            bucket: None,
            last_place: 0,
            recent_admissions: VecDeque::new(),
            counts: RoomCounts::default(),
            visitors: HashMap::new(),
            rng: StdRng::seed_from_u64(seed),
        }
    }

    /// Identifies this copy of the room's data; a ticket from another epoch was issued before
    /// the data was lost, so its place is trusted and restored.
    pub fn epoch(&self) -> &str {
        &self.epoch
    }

    fn occupancy(&self) -> u64 {
        (self.passes.len() + self.called.len()) as u64
    }

    /// Indexes a visitor by its queue id from now, unless it is already (its first arrival
    /// stays).
    fn note_visitor(&mut self, id: &str, now: Millis) {
        self.visitors
            .entry(QueueId::of(id))
            .or_insert_with(|| (id.to_owned(), now));
    }

    /// Takes a visitor out of the index once the room holds nothing of it any more.
    fn forget_if_gone(&mut self, id: &str) {
        if self.places.contains_key(id) || self.passes.contains(id) || self.called.contains(id) {
            return;
        }
        let queue_id = QueueId::of(id);
        if self
            .visitors
            .get(&queue_id)
            .is_some_and(|(known, _)| known == id)
        {
            self.visitors.remove(&queue_id);
        }
    }

    /// The visitor with this queue id, if the room holds it.
    pub fn find_visitor(&self, queue_id: QueueId) -> Option<FoundVisitor> {
        let (id, arrived_at) = self.visitors.get(&queue_id)?;
        let state = if let Some(expires_at) = self.passes.get(id) {
            VisitorState::Inside { expires_at }
        } else if let Some(claim_by) = self.called.get(id) {
            VisitorState::Called { claim_by }
        } else {
            VisitorState::Waiting {
                position: self.position_of(id)?,
                queued: self.queue.len() as u64,
            }
        };
        Some(FoundVisitor {
            arrived_at: *arrived_at,
            state,
        })
    }

    fn refill(&mut self, limits: &Limits, now: Millis) -> &mut TokenBucket {
        let bucket = self
            .bucket
            .get_or_insert_with(|| TokenBucket::full(limits.burst, now));
        bucket.refill(now, limits.new_users_per_minute, limits.burst);
        bucket
    }

    fn record_admissions(&mut self, n: u64, now: Millis) {
        self.counts.admitted_total += n;
        for _ in 0..n {
            self.recent_admissions.push_back(now);
        }
        self.forget_old_admissions(now);
    }

    fn forget_old_admissions(&mut self, now: Millis) {
        while self
            .recent_admissions
            .front()
            .is_some_and(|t| *t <= now - MINUTE_MS)
        {
            self.recent_admissions.pop_front();
        }
    }

    /// Admits a visitor at once when nobody waits, the room has space and the rate allows.
    /// Returns the pass expiry, or None when the visitor must queue.
    pub fn admit_directly(&mut self, id: &str, limits: &Limits, now: Millis) -> Option<Millis> {
        if !limits.admitting || !self.queue.is_empty() || self.occupancy() >= limits.capacity {
            return None;
        }
        let bucket = self.refill(limits, now);
        if bucket.available() < 1 {
            return None;
        }
        bucket.take(1);
        let expires_at = now + limits.session_ms;
        self.passes.set(id, expires_at);
        self.note_visitor(id, now);
        self.record_admissions(1, now);
        Some(expires_at)
    }

    /// Registers a pass without any check: `passthrough` lets everyone in and still counts them.
    pub fn admit_unconditionally(&mut self, id: &str, limits: &Limits, now: Millis) -> Millis {
        let expires_at = now + limits.session_ms;
        self.passes.set(id, expires_at);
        self.note_visitor(id, now);
        self.record_admissions(1, now);
        expires_at
    }

    fn next_place(&mut self, placing: Placing, now: Millis) -> Place {
        if let Some((from, until)) = placing.draw_span(now) {
            // Arrivals in order after the span go behind every place drawn in it.
            self.last_place = self.last_place.max(until * 1000 - 1);
            return drawn_place(from, until, self.rng.random());
        }
        self.last_place = (self.last_place + 1).max(now.saturating_mul(1000));
        self.last_place
    }

    fn position_of(&self, id: &str) -> Option<u64> {
        let place = self.places.get(id)?;
        Some(self.queue.rank(*place, id) as u64 + 1)
    }

    /// Puts a visitor in line. Joining again keeps the place it has. `restore` is the place a
    /// ticket from an earlier epoch carries.
    pub fn join(
        &mut self,
        id: &str,
        restore: Option<Place>,
        limits: &Limits,
        now: Millis,
    ) -> Placed {
        if !self.places.contains_key(id) {
            let place = match restore {
                Some(place) => {
                    self.last_place = self.last_place.max(place);
                    place
                }
                None => self.next_place(limits.placing, now),
            };
            self.places.insert(id.to_owned(), place);
            self.queue.insert(place, id);
            self.note_visitor(id, now);
            self.counts.joined_total += 1;
        }
        self.heartbeats.set(id, now + limits.abandon_after_ms);
        let place = self.places.get(id).copied().unwrap_or_default();
        Placed {
            place,
            position: self.position_of(id).unwrap_or(1),
            queued: self.queue.len() as u64,
        }
    }

    /// A visitor's request: a heartbeat while it waits, the claim of its admission once called.
    pub fn poll(&mut self, id: &str, limits: &Limits, now: Millis) -> PollOutcome {
        if let Some(expires_at) = self.passes.get(id) {
            return PollOutcome::Admitted {
                expires_at,
                called_at: None,
            };
        }
        if let Some(claim_by) = self.called.remove(id) {
            let expires_at = now + limits.session_ms;
            self.passes.set(id, expires_at);
            self.places.remove(id);
            return PollOutcome::Admitted {
                expires_at,
                called_at: Some(claim_by - limits.claim_window_ms),
            };
        }
        match self.position_of(id) {
            Some(position) => {
                self.heartbeats.set(id, now + limits.abandon_after_ms);
                PollOutcome::Waiting {
                    position,
                    queued: self.queue.len() as u64,
                }
            }
            None => PollOutcome::Unknown,
        }
    }

    /// Slides the heartbeat of the given visitors that still wait, and lists who is called.
    pub fn keep_alive(&mut self, ids: &[String], limits: &Limits, now: Millis) -> Vec<String> {
        for id in ids {
            if self.heartbeats.contains(id) {
                self.heartbeats.set(id, now + limits.abandon_after_ms);
            }
        }
        self.called.ids()
    }

    /// Moves a live pass's expiry (a sliding session). False when the pass is gone. With
    /// `register_again`, a pass this state never saw (it was lost with the data) comes back.
    pub fn touch_pass(
        &mut self,
        id: &str,
        expires_at: Millis,
        register_again: bool,
        now: Millis,
    ) -> bool {
        let known = self.passes.contains(id);
        if !known && (!register_again || self.revoked.contains(id)) {
            return false;
        }
        self.passes.set(id, expires_at);
        self.note_visitor(id, now);
        true
    }

    /// Ends a pass at once (leave, revoke): its slot is free and its cookie is refused until it
    /// would have expired anyway. A place in line is not a pass: it stays (leave_queue gives it
    /// up), since dropping its recorded place would leave its queue entry orphaned.
    pub fn end_pass(&mut self, id: &str, limits: &Limits, now: Millis) -> bool {
        let had = self.passes.remove(id).or_else(|| {
            let called = self.called.remove(id);
            if called.is_some() {
                self.places.remove(id);
            }
            called
        });
        let until = had.unwrap_or(now).max(now + limits.session_ms);
        self.revoked.set(id, until);
        if had.is_some() {
            self.counts.revoked_total += 1;
        }
        self.forget_if_gone(id);
        had.is_some()
    }

    pub fn is_revoked(&self, id: &str) -> bool {
        self.revoked.contains(id)
    }

    /// In line: not yet called, nor gone.
    pub fn is_waiting(&self, id: &str) -> bool {
        self.places.contains_key(id) && !self.called.contains(id)
    }

    /// Gives up a place in line (or an unclaimed admission).
    pub fn leave_queue(&mut self, id: &str) -> bool {
        self.called.remove(id);
        self.heartbeats.remove(id);
        let left = match self.places.remove(id) {
            Some(place) => self.queue.remove(place, id),
            None => false,
        };
        self.forget_if_gone(id);
        left
    }

    fn remove_waiting(&mut self, id: &str) {
        if let Some(place) = self.places.remove(id) {
            self.queue.remove(place, id);
        }
        self.heartbeats.remove(id);
    }

    /// One step of the admission loop: heal capacity (expired passes, no-shows, abandoned
    /// waiters), then call as many waiting visitors as the free capacity and the rate allow.
    pub fn admission_round(&mut self, limits: &Limits, now: Millis) -> RoundReport {
        let mut report = RoundReport::default();
        for id in self.passes.take_expired(now) {
            self.forget_if_gone(&id);
            report.expired += 1;
        }
        for id in self.called.take_expired(now) {
            self.places.remove(&id);
            self.forget_if_gone(&id);
            report.no_shows += 1;
        }
        for id in self.heartbeats.take_expired(now) {
            if let Some(place) = self.places.remove(&id) {
                self.queue.remove(place, &id);
            }
            self.forget_if_gone(&id);
            report.abandoned += 1;
        }
        self.revoked.take_expired(now);

        let free = limits.capacity.saturating_sub(self.occupancy());
        let tokens = self.refill(limits, now).available();
        let n = if limits.admitting {
            free.min(tokens).min(self.queue.len() as u64)
        } else {
            0
        };
        for _ in 0..n {
            let k = match limits.pick {
                Pick::Fifo => 0,
                Pick::Random => self.rng.random_range(0..self.queue.len()),
            };
            let Some((_, id)) = self.queue.nth(k).cloned() else {
                break;
            };
            // The place stays recorded until the claim: a called visitor joining again keeps
            // its call instead of taking a second place.
            let place = self.places.get(&id).copied();
            self.remove_waiting(&id);
            if let Some(place) = place {
                self.places.insert(id.clone(), place);
            }
            self.called.set(&id, now + limits.claim_window_ms);
            report.called += 1;
        }
        if let Some(bucket) = self.bucket.as_mut() {
            bucket.take(report.called);
        }
        self.record_admissions(report.called, now);
        self.counts.expired_total += report.expired;
        self.counts.abandoned_total += report.abandoned;
        self.counts.no_show_total += report.no_shows;
        report
    }

    pub fn counts(&mut self, now: Millis) -> RoomCounts {
        self.forget_old_admissions(now);
        RoomCounts {
            passes: self.passes.len() as u64,
            called: self.called.len() as u64,
            queued: self.queue.len() as u64,
            admitted_last_minute: self.recent_admissions.len() as u64,
            ..self.counts
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(capacity: u64, per_minute: u64) -> Limits {
        Limits {
            capacity,
            new_users_per_minute: per_minute,
            burst: per_minute,
            session_ms: 60_000,
            abandon_after_ms: 300_000,
            claim_window_ms: 40_000,
            pick: Pick::Fifo,
            placing: Placing::Arrival,
            admitting: true,
        }
    }

    fn room() -> RoomState {
        RoomState::new("e1".into(), 7)
    }

    #[test]
    fn admits_directly_only_while_nobody_waits_and_space_is_left() {
        let l = limits(2, 100);
        let mut r = room();
        assert!(r.admit_directly("a", &l, 0).is_some());
        assert!(r.admit_directly("b", &l, 0).is_some());
        assert_eq!(r.admit_directly("c", &l, 0), None, "room is full");
        r.end_pass("a", &l, 1);
        r.join("w", None, &l, 1);
        assert_eq!(r.admit_directly("d", &l, 1), None, "someone waits");
    }

    #[test]
    fn fifo_rounds_call_in_arrival_order_and_claims_become_passes() {
        let l = limits(1, 100);
        let mut r = room();
        for (i, id) in ["a", "b", "c"].iter().enumerate() {
            let j = r.join(id, None, &l, i as Millis);
            assert_eq!(j.position, i as u64 + 1);
        }
        assert_eq!(r.admission_round(&l, 10).called, 1);
        assert_eq!(
            r.poll("b", &l, 11),
            PollOutcome::Waiting {
                position: 1,
                queued: 2
            }
        );
        match r.poll("a", &l, 20) {
            PollOutcome::Admitted {
                expires_at,
                called_at,
            } => {
                assert_eq!(expires_at, 60_020);
                assert_eq!(called_at, Some(10));
            }
            other => panic!("expected admission, got {other:?}"),
        }
        assert_eq!(r.admission_round(&l, 30).called, 0, "room is full");
        assert!(r.end_pass("a", &l, 31));
        assert!(r.is_revoked("a"));
        assert_eq!(r.admission_round(&l, 32).called, 1);
        assert!(matches!(r.poll("b", &l, 33), PollOutcome::Admitted { .. }));
    }

    #[test]
    fn the_rate_holds_across_rounds_and_direct_admissions() {
        let l = Limits {
            burst: 2,
            ..limits(1000, 60)
        };
        let mut r = room();
        assert!(r.admit_directly("x", &l, 0).is_some());
        for i in 0..100 {
            r.join(&format!("v{i}"), None, &l, 0);
        }
        assert_eq!(r.admission_round(&l, 0).called, 1, "burst of 2, one used");
        assert_eq!(r.admission_round(&l, 500).called, 0);
        let mut called = 0;
        for t in (1_000..=60_000).step_by(250) {
            called += r.admission_round(&l, t).called;
        }
        assert_eq!(called, 60, "one a second for a minute");
    }

    #[test]
    fn waiters_who_stop_polling_drop_out_and_never_take_an_admission() {
        let l = Limits {
            admitting: false,
            ..limits(10, 100)
        };
        let mut r = room();
        r.join("gone", None, &l, 0);
        r.join("here", None, &l, 0);
        r.poll("here", &l, 200_000);
        let report = r.admission_round(&l, 300_000);
        assert_eq!(report.abandoned, 1);
        assert_eq!(r.poll("gone", &l, 300_001), PollOutcome::Unknown);
        let l = Limits {
            admitting: true,
            ..l
        };
        assert_eq!(r.admission_round(&l, 300_002).called, 1);
        assert!(matches!(
            r.poll("here", &l, 300_003),
            PollOutcome::Admitted { .. }
        ));
    }

    #[test]
    fn a_called_visitor_who_never_claims_frees_the_slot() {
        let l = limits(1, 100);
        let mut r = room();
        r.join("a", None, &l, 0);
        r.join("b", None, &l, 0);
        assert_eq!(r.admission_round(&l, 0).called, 1);
        assert_eq!(r.counts(0).occupancy(), 1);
        let report = r.admission_round(&l, 40_000);
        assert_eq!(report.no_shows, 1);
        assert_eq!(report.called, 1);
        assert_eq!(r.poll("a", &l, 40_001), PollOutcome::Unknown);
    }

    #[test]
    fn ending_a_waiting_visitor_leaves_the_line_whole() {
        let l = limits(5, 100);
        let mut r = room();
        r.join("a", None, &l, 0);
        r.join("b", None, &l, 0);
        assert!(!r.end_pass("a", &l, 1));
        assert_eq!(
            r.poll("a", &l, 2),
            PollOutcome::Waiting {
                position: 1,
                queued: 2
            }
        );
        assert_eq!(r.admission_round(&l, 3).called, 2);
        let counts = r.counts(3);
        assert_eq!((counts.called, counts.queued), (2, 0));
        assert!(matches!(r.poll("b", &l, 4), PollOutcome::Admitted { .. }));
    }

    #[test]
    fn a_visitor_is_found_by_its_queue_id_while_the_room_holds_it_and_only_then() {
        let l = limits(1, 100);
        let mut r = room();
        let find = |r: &RoomState, id: &str| r.find_visitor(QueueId::of(id));
        r.join("a", None, &l, 5);
        r.join("b", None, &l, 6);
        r.join("b", None, &l, 9);
        assert_eq!(
            find(&r, "b"),
            Some(FoundVisitor {
                arrived_at: 6,
                state: VisitorState::Waiting {
                    position: 2,
                    queued: 2
                }
            }),
            "joining again keeps the first arrival"
        );
        r.admission_round(&l, 10);
        assert_eq!(
            find(&r, "a").map(|f| f.state),
            Some(VisitorState::Called { claim_by: 40_010 })
        );
        r.poll("a", &l, 11);
        assert_eq!(
            find(&r, "a").map(|f| f.state),
            Some(VisitorState::Inside { expires_at: 60_011 })
        );
        assert!(r.leave_queue("b"));
        assert_eq!(find(&r, "b"), None, "left: gone");
        r.end_pass("a", &l, 12);
        assert_eq!(find(&r, "a"), None, "revoked: gone");
        assert!(r.visitors.is_empty());

        // Passes that expire, no-shows and waiters who stop polling leave nothing behind.
        r.admit_directly("direct", &l, 100);
        assert_eq!(find(&r, "direct").map(|f| f.arrived_at), Some(100));
        r.join("late", None, &l, 100);
        r.join("idle", None, &l, 100);
        r.admission_round(&l, 60_100);
        assert_eq!(find(&r, "direct"), None, "expired");
        r.admission_round(&l, 100_100);
        assert_eq!(find(&r, "late"), None, "called and never came");
        r.admission_round(&l, 400_100);
        assert_eq!(find(&r, "idle"), None, "abandoned");
        assert!(r.visitors.is_empty());
    }

    #[test]
    fn passes_expire_and_heal_capacity() {
        let l = limits(1, 100);
        let mut r = room();
        r.admit_directly("a", &l, 0);
        assert!(r.touch_pass("a", 90_000, false, 0));
        assert_eq!(r.admission_round(&l, 60_000).expired, 0);
        assert_eq!(r.admission_round(&l, 90_000).expired, 1);
        assert!(!r.touch_pass("a", 100_000, false, 90_000));
        assert!(r.admit_directly("b", &l, 90_001).is_some());
    }

    #[test]
    fn joining_again_keeps_the_place_and_a_restored_place_goes_back_in_order() {
        let l = limits(1, 100);
        let mut r = room();
        let a = r.join("a", None, &l, 5);
        assert_eq!(r.join("a", None, &l, 6), a);
        let b = r.join("b", None, &l, 7);
        let mut fresh = RoomState::new("e2".into(), 1);
        fresh.join("late", None, &l, 100);
        fresh.join("b", Some(b.place), &l, 101);
        let restored = fresh.join("a", Some(a.place), &l, 102);
        assert_eq!(restored.position, 1);
        assert_eq!(
            fresh.poll("b", &l, 103),
            PollOutcome::Waiting {
                position: 2,
                queued: 3
            }
        );
    }

    #[test]
    fn random_pick_is_uniform_among_the_waiting() {
        let l = Limits {
            pick: Pick::Random,
            ..limits(1, 1_000_000)
        };
        let mut first_pick = [0u32; 4];
        for seed in 0..4000 {
            let mut r = RoomState::new("e".into(), seed);
            for id in ["0", "1", "2", "3"] {
                r.join(id, None, &l, 0);
            }
            r.admission_round(&l, 1);
            let picked = ["0", "1", "2", "3"]
                .iter()
                .position(|id| matches!(r.poll(id, &l, 2), PollOutcome::Admitted { .. }));
            if let Some(i) = picked {
                first_pick[i] += 1;
            }
        }
        for count in first_pick {
            assert!((850..=1150).contains(&count), "{first_pick:?}");
        }
    }

    /// The order rounds call the waiting in (FIFO pick: the queue's order).
    fn call_order(r: &RoomState) -> Vec<String> {
        (0..r.queue.len())
            .filter_map(|k| r.queue.nth(k).map(|(_, id)| id.clone()))
            .collect()
    }

    #[test]
    fn a_lottery_shuffles_within_each_window_and_keeps_windows_in_order() {
        let l = Limits {
            placing: Placing::Lottery { window_ms: 30_000 },
            ..limits(1, 100)
        };
        let mut r = room();
        // 3 windows of 150 arrivals, one every 200 ms.
        let mut arrivals = Vec::new();
        for k in 0..450 {
            let id = format!("v{k:03}");
            r.join(&id, None, &l, k * 200);
            arrivals.push((id, k * 200));
        }
        let order = call_order(&r);
        let called_at: HashMap<&str, Millis> = order
            .iter()
            .enumerate()
            .map(|(i, id)| (id.as_str(), i as Millis))
            .collect();
        for window in 0..3 {
            let ids = &arrivals[window * 150..(window + 1) * 150];
            let called: Vec<Millis> = ids.iter().map(|(id, _)| called_at[id.as_str()]).collect();
            // Windows keep their order: everyone of this window is called after the one before.
            assert!(called.iter().all(|&c| c >= window as Millis * 150));
            assert!(called.iter().all(|&c| c < (window as Millis + 1) * 150));
            let pairs: Vec<_> = ids.iter().map(|(_, at)| *at).zip(called).collect();
            let tau = crate::core::fairness::kendall_tau(&pairs).unwrap_or(1.0);
            // Independence gives a standard deviation of about 0.055 for 150 pairs.
            assert!(tau.abs() < 0.2, "window {window}: tau {tau}");
        }
        // Back to arrival order: behind the whole last window.
        r.join("late", None, &limits(1, 100), 450 * 200);
        assert_eq!(call_order(&r).last().map(String::as_str), Some("late"));
    }

    #[test]
    fn a_shuffled_prequeue_is_random_and_later_arrivals_go_behind() {
        let (from_ms, until_ms) = (10_000, 70_000);
        let l = Limits {
            placing: Placing::DrawUntil { from_ms, until_ms },
            ..limits(1, 100)
        };
        let mut r = room();
        r.join("before-the-event", None, &limits(1, 100), 5_000);
        for k in 0..200 {
            r.join(&format!("p{k:03}"), None, &l, from_ms + k * 300);
        }
        // After the start the same placing gives arrival order.
        r.join("after-1", None, &l, until_ms);
        r.join("after-2", None, &l, until_ms + 1);
        let order = call_order(&r);
        assert_eq!(order.first().map(String::as_str), Some("before-the-event"));
        assert_eq!(order[order.len() - 2..], ["after-1", "after-2"]);
        let pairs: Vec<(Millis, Millis)> = order[1..201]
            .iter()
            .enumerate()
            .map(|(called, id)| {
                let k: Millis = id[1..].parse().unwrap_or_default();
                (k, called as Millis)
            })
            .collect();
        let tau = crate::core::fairness::kendall_tau(&pairs).unwrap_or(1.0);
        assert!(tau.abs() < 0.2, "tau {tau}");
    }

    #[test]
    fn occupancy_never_exceeds_capacity_under_any_interleaving() {
        let mut rng = StdRng::seed_from_u64(3);
        let mut r = room();
        let mut l = limits(5, 600);
        let mut now = 0;
        for step in 0..20_000 {
            now += rng.random_range(0..200);
            let id = format!("v{}", rng.random_range(0..50));
            match rng.random_range(0..7) {
                0 => {
                    r.admit_directly(&id, &l, now);
                }
                1 => {
                    r.join(&id, None, &l, now);
                }
                2 => {
                    r.poll(&id, &l, now);
                }
                3 => {
                    r.end_pass(&id, &l, now);
                }
                4 => {
                    r.admission_round(&l, now);
                }
                5 => {
                    r.touch_pass(&id, now + l.session_ms, false, now);
                }
                _ => {
                    // Lowering the capacity live only stops admissions.
                    l.capacity = if step % 3 == 0 { 2 } else { 5 };
                }
            }
            let occupancy = r.counts(now).occupancy();
            assert!(occupancy <= 5, "step {step}: {occupancy}");
        }
    }
}
