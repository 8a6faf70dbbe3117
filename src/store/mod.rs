//! The one interface to the room's shared state. The in-memory store serves a single instance
//! with nothing else installed; the Redis store lets many instances act as one room. Both pass
//! the conformance suite in tests/common/conformance.rs.

pub mod memory;
pub mod redis;

use async_trait::async_trait;

use crate::clock::Millis;
use crate::core::ip_limit::{IpClaim, IpLimits};
use crate::core::queue::Place;
use crate::core::room::{Limits, PollOutcome, RoomCounts, RoundReport};

#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    #[error("store unavailable: {0}")]
    Unavailable(String),
    #[error("instance no longer leads the admission loop (fencing token {0} is stale)")]
    NotLeader(u64),
    #[error("store returned malformed data: {0}")]
    Corrupt(String),
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

    /// Ends a pass or an unclaimed admission at once and refuses its cookie from now on.
    async fn end_pass(&self, id: &str, limits: &Limits) -> StoreResult<bool>;

    /// Gives up a place in line.
    async fn leave_queue(&self, id: &str) -> StoreResult<bool>;

    /// The poll path's batch, once per admission-loop tick: slides the heartbeat of these
    /// visitors (those still waiting) and answers who is called now. Polls between two exact
    /// `poll`s then need no store call at all.
    async fn keep_alive(&self, ids: &[String], limits: &Limits) -> StoreResult<Vec<String>>;

    /// Counts a new ticket against its client address's limits (`ip`: an address, or an IPv6
    /// /64), before the ticket joins the line; `Allowed` records it. Tickets stop counting once
    /// they no longer wait (called, abandoned, left). Shared by every instance on the store.
    async fn claim_ticket(&self, ip: &str, ticket: &str, limits: &IpLimits)
    -> StoreResult<IpClaim>;

    /// Local answer, no round trip: has this pass been ended?
    fn is_revoked(&self, id: &str) -> bool;

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

    /// The current epoch: it changes when the store's data is lost, and tickets and passes
    /// carry the epoch they were issued in.
    async fn epoch(&self) -> StoreResult<String>;

    /// Cheap reachability check for /readyz.
    async fn ping(&self) -> StoreResult<()>;
}
