//! The one interface to the room's shared state. The in-memory store serves a single instance
//! with nothing else installed; the Redis store lets many instances act as one room. Both pass
//! the conformance suite in tests/common/conformance.rs.

mod health;
pub mod memory;
mod observed;
pub mod redis;

pub use health::StoreHealth;
pub use observed::Observed;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::clock::Millis;
use crate::core::autopilot::{Setpoint, Signal};
use crate::core::history::{KEPT_MINUTES, MINUTE_MS, Share};
use crate::core::ip_limit::{IpClaim, IpLimits};
use crate::core::queue::Place;
use crate::core::queue_id::QueueId;
use crate::core::room::{FoundVisitor, Limits, PollOutcome, RoomCounts, RoundReport};
use crate::core::sharing::SharedUse;

#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    #[error("store unavailable: {0}")]
    Unavailable(String),
    #[error("instance no longer leads the admission loop (fencing token {0} is stale)")]
    NotLeader(u64),
    #[error("store returned malformed data: {0}")]
    Corrupt(String),
    /// Redis answered but refused this proxy (a wrong or missing password, a user without the
    /// rights): unlike `Unavailable`, waiting does not help, so a start fails on it.
    #[error("store refused the connection: {0}")]
    Refused(String),
    /// Unlike `Unavailable`, no retry helps: the URL itself is wrong. The message repeats the
    /// cause, as the logs print no chain of sources.
    #[error("invalid Redis URL {url}: {source}")]
    InvalidUrl {
        /// Without its password.
        url: String,
        source: ::redis::RedisError,
    },
}

pub type StoreResult<T> = Result<T, StoreError>;

/// Why a pass was ended: what its holders are told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RevokeReason {
    /// The visitor left, the origin ended the session (checkout), or the operator did: the
    /// visitor may queue again as anyone may.
    Ended,
    /// Seen from more client networks than `pass.max_networks` allows: the pass was shared.
    Shared,
}

impl RevokeReason {
    pub fn as_str(self) -> &'static str {
        match self {
            RevokeReason::Ended => "ended",
            RevokeReason::Shared => "shared",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "ended" => Some(RevokeReason::Ended),
            "shared" => Some(RevokeReason::Shared),
            _ => None,
        }
    }
}

/// The place a signed ticket carries, so a store that lost its data can put the visitor back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TicketPlace {
    pub place: Place,
    pub epoch: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Joined {
    pub place: Place,
    pub position: u64,
    pub queued: u64,
    /// The store's epoch: written into the ticket.
    pub epoch: String,
}

/// Room settings saved in the store so that every instance applies them and they survive
/// restarts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SavedSettings {
    pub version: u64,
    pub json: String,
}

/// What the autopilot's leader writes to the store at each change of limits (issue #16), so
/// that every instance applies the same limits and a new leader goes on from them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AutopilotRecord {
    /// The limits in force: what every instance admits by while the autopilot is on.
    #[serde(flatten)]
    pub setpoint: Setpoint,
    /// The room's own limits the autopilot started from (the ratios of rate and burst to
    /// capacity). A new leader goes on from `setpoint` (`Controller::restore`) only while the
    /// room's limits are still these; else an operator changed them meanwhile, and it starts
    /// from the new ones (`Controller::new`).
    pub start: Setpoint,
    /// Why the limits are what they are (the last decision's reason), for /admin/state.
    pub reason: String,
    pub changed_at: Millis,
}

/// The autopilot's state shared through the store, as any instance reads it back.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AutopilotState {
    /// The operator's switch (`/admin/autopilot`, on any instance): the leader pauses while set.
    pub paused: bool,
    /// The leader's last record; None before its first change, and after a loss of the store's
    /// data (then the room's own limits apply until the leader decides again).
    pub record: Option<AutopilotRecord>,
}

/// How long a reported window is kept after its end, in lengths of the window: the leader reads
/// it a second or two after its end, and one that took over meanwhile still finds the last few.
pub const WINDOW_KEPT_FOR: Millis = 5;

/// Until when the store keeps a window (both stores follow this rule): its end plus
/// [`WINDOW_KEPT_FOR`] of its length (taken as at least a second).
/// How long a published share is kept: the day a history holds, and a minute for the one
/// still growing.
pub const SHARES_KEPT_MS: Millis = (KEPT_MINUTES as Millis + 1) * MINUTE_MS;

/// Whether the share of the minute starting at `minute` is still kept at `now`.
pub fn share_kept(minute: Millis, now: Millis) -> bool {
    minute + SHARES_KEPT_MS > now
}

pub fn window_kept_until(window: &Signal) -> Millis {
    let length = (window.ended_at - window.started_at).max(1_000);
    window
        .ended_at
        .saturating_add(WINDOW_KEPT_FOR.saturating_mul(length))
}

#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// Admits a new visitor at once when nobody waits, the room has space and the rate allows.
    /// Returns the pass expiry, or None when the visitor must queue.
    async fn admit_directly(&self, id: &str, limits: &Limits) -> StoreResult<Option<Millis>>;

    /// Registers a pass with no check (`passthrough`); returns its expiry.
    async fn admit_unconditionally(&self, id: &str, limits: &Limits) -> StoreResult<Millis>;

    /// Puts a visitor in line, idempotently. A ticket from an earlier epoch gets its place back;
    /// from the current epoch it means the visitor dropped out, and it goes to the back.
    async fn join(
        &self,
        id: &str,
        ticket: Option<&TicketPlace>,
        limits: &Limits,
    ) -> StoreResult<Joined>;

    /// A waiting visitor's request: heartbeat, or the claim of its admission once called.
    async fn poll(&self, id: &str, limits: &Limits) -> StoreResult<PollOutcome>;

    /// Slides a live pass's expiry by a session; None when the pass is gone. A pass issued in
    /// another epoch (`pass_epoch`) outlived a loss of the store's data: it is registered again,
    /// unless it was revoked.
    async fn touch_pass(
        &self,
        id: &str,
        pass_epoch: &str,
        limits: &Limits,
    ) -> StoreResult<Option<Millis>>;

    /// Ends a pass or an unclaimed admission at once and refuses its cookie (pass or ticket)
    /// from now on, for `reason` (every instance learns it).
    async fn end_pass(&self, id: &str, reason: RevokeReason, limits: &Limits) -> StoreResult<bool>;

    /// Gives up a place in line.
    async fn leave_queue(&self, id: &str) -> StoreResult<bool>;

    /// The visitor with this queue id (`core::queue_id`) while the room holds it (waiting,
    /// called or inside), with its first arrival; None once it is gone, or for an id never
    /// seen. One look-up in an index the store keeps beside the line (O(log n) with the rank).
    async fn find_visitor(&self, queue_id: QueueId) -> StoreResult<Option<FoundVisitor>>;

    /// The poll path's batch, once per admission-loop tick: slides the heartbeat of these
    /// visitors (those still waiting) and answers who is called now. Polls between two exact
    /// `poll`s then need no store call at all.
    async fn keep_alive(&self, ids: &[String], limits: &Limits) -> StoreResult<Vec<String>>;

    /// Counts a new ticket against its client address's limits (`ip`: an address, or an IPv6
    /// /64), before the ticket joins the line; `Allowed` records it. Tickets stop counting once
    /// they no longer wait (called, abandoned, left). Shared by every instance on the store.
    async fn claim_ticket(&self, ip: &str, ticket: &str, limits: &IpLimits)
    -> StoreResult<IpClaim>;

    /// Local answer, no round trip: has this visitor's pass been ended, and why?
    fn revoked(&self, id: &str) -> Option<RevokeReason>;

    /// Notes that pass `pass` was used from client network `network` and answers how many
    /// networks it was used from within the last `window_ms` (a session), on every instance.
    async fn note_network(&self, pass: &str, network: &str, window_ms: Millis) -> StoreResult<u64>;

    /// Spends a proof-of-work seed (its id) until `until`: true the first time on any instance,
    /// false for a seed already spent, so one solution never yields a second place.
    async fn spend_seed(&self, id: &str, until: Millis) -> StoreResult<bool>;

    /// `pass.max_requests_per_minute` as one budget over every instance: adds `uses` (each pass
    /// and the requests this instance served of it since its last report) to the room's count
    /// of the current minute, and answers that minute and, for each pass in `uses`' order, the
    /// count of every instance in it and in the minute before (`UseCounts`, core/sharing.rs).
    /// A minute's counts are kept until the end of the next. Called once a tick by each instance,
    /// never per request. Not retried on a broken connection: counted twice, a pass's requests
    /// would cost it twice on every instance.
    async fn report_pass_use(&self, uses: &[(String, u64)]) -> StoreResult<SharedUse>;

    /// One admission step. Refused (`NotLeader`) for a fencing token below the highest this room
    /// has handed out or used: the lease of a proxy group lives in one room's store and leads
    /// every room, so a leader that was replaced can never act after its successor has.
    async fn admission_round(&self, limits: &Limits, fence: u64) -> StoreResult<RoundReport>;

    async fn counts(&self) -> StoreResult<RoomCounts>;

    /// Acquires or renews the admission leadership; the fencing token while this instance leads.
    async fn lead(&self, instance: &str, ttl_ms: Millis) -> StoreResult<Option<u64>>;

    /// Gives the leadership up (on shutdown), so another instance takes over at once.
    async fn resign(&self, instance: &str) -> StoreResult<()>;

    /// The instance that leads now, if any.
    async fn leader(&self) -> StoreResult<Option<String>>;

    async fn save_settings(&self, json: &str) -> StoreResult<u64>;

    async fn load_settings(&self) -> StoreResult<Option<SavedSettings>>;

    /// Adds one instance's finished autopilot window (`Recorder`'s output) into the room's
    /// record of that window, keyed by its `started_at`: the counts of every instance add up
    /// exactly, latency histogram included. Kept until [`window_kept_until`]; a report that comes
    /// later, or a window without exchanges, adds nothing. Not retried on a broken connection: a
    /// report counted twice would weigh that instance double.
    async fn report_window(&self, window: &Signal) -> StoreResult<()>;

    /// The window that began at `started_at`, every instance's reports added together (what the
    /// leader judges, with `Controller::step`); `Signal::new(started_at)`, empty, when nobody
    /// reported it or it is no longer kept.
    async fn read_window(&self, started_at: Millis) -> StoreResult<Signal>;

    /// Publishes `instance`'s shares of the room's minutes (what it alone counted: its part of
    /// the drop report), each replacing what it published for that minute before, so that a
    /// share sent again, or sent while its minute still grows, counts once. Kept a day
    /// ([`SHARES_KEPT_MS`]).
    async fn publish_shares(&self, instance: &str, shares: &[(Millis, Share)]) -> StoreResult<()>;

    /// The shares every instance but `except` published for each of `minutes` (minute starts),
    /// as (minute, share) pairs: added to `except`'s own, the whole room's figures.
    async fn shares_of(
        &self,
        minutes: &[Millis],
        except: &str,
    ) -> StoreResult<Vec<(Millis, Share)>>;

    /// Writes the autopilot leader's record, fenced exactly like `admission_round`: a stale
    /// token gets `NotLeader`, so a paused former leader that wakes up cannot overwrite its
    /// successor's limits. Called on each
    /// of the leader's decisions.
    async fn save_autopilot(&self, record: &AutopilotRecord, fence: u64) -> StoreResult<()>;

    /// The autopilot's shared state: the pause switch and the leader's last record. Read by every
    /// instance to apply the limits, and by a new leader to go on from them.
    async fn load_autopilot(&self) -> StoreResult<AutopilotState>;

    /// Sets the operator's pause switch (`/admin/autopilot`), from any instance; the leader reads
    /// it back with `load_autopilot`. The limits in force stay as they are while paused.
    async fn set_autopilot_paused(&self, paused: bool) -> StoreResult<()>;

    /// The current epoch: it changes when the store's data is lost, and tickets and passes
    /// carry the epoch they were issued in.
    async fn epoch(&self) -> StoreResult<String>;

    /// Cheap reachability check for /readyz.
    async fn ping(&self) -> StoreResult<()>;

    /// Admissions whose write fewer replicas acknowledged than `[store] replica_acks` asked,
    /// within `replica_ack_timeout`, since the store was opened: a running total. The visitors
    /// were let in all the same; a failover to a replica that lacks the write loses their pass.
    /// A store without replicas (the memory store) has none.
    fn unacknowledged_admissions(&self) -> u64 {
        0
    }
}
