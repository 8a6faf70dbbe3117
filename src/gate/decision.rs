//! What the gate decides for a request: plain values, turned into replies by `respond`.

use std::sync::Arc;

use crate::clock::Millis;
use crate::config::RoomSettings;
use crate::core::estimate::WaitEstimate;
use crate::entry::EntryRefusal;
use crate::observe::{Outcome, ProofResult};
use crate::token::{Pass, Ticket};
use crate::turnstile::Challenge;

/// A decision with the settings it was made under: the reply shows the same room the decision
/// saw, even when an event boundary passes in between.
#[derive(Debug, Clone)]
pub struct Decided {
    pub decision: Decision,
    pub settings: Arc<RoomSettings>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Send the request on to the origin.
    Forward(Forward),
    /// The proxy answers itself.
    Answer(Answer),
}

/// What the proxy answers instead of forwarding.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// In line: the waiting page, the JSON status or the event stream shows where.
    Wait(Wait),
    /// The room turns visitors away (`queueing_method = "reject"`).
    Closed,
    /// A newcomer passes a challenge before it gets a place; nothing is stored for it.
    Challenge {
        queued: u64,
        estimate: WaitEstimate,
        /// What the page or the app shows of it.
        challenge: Asked,
    },
    /// A new ticket refused by the per-address limit, or a pass holder over its request rate.
    Limited { retry_after_secs: u64, limit: Limit },
    /// The visitor's pass was revoked because it was used from too many networks: told why,
    /// its cookie cleared (its next request starts over, like anyone's).
    Shared,
    /// A members-only line (`[entry]`): a valid entry token came; the visitor is sent back to
    /// `target` (the URL without the token) with what `then` decided for its key's place.
    Entered { target: String, then: Box<Decision> },
    /// A members-only line and a newcomer without a token: to the shop's sign-in.
    EntryRequired,
    /// A members-only line and a token that does not hold.
    EntryRefused(EntryRefusal),
    /// A `block` rule of the room holds for the request: 403, nothing forwarded.
    Blocked,
}

/// The challenge a newcomer is asked.
#[derive(Debug, Clone, PartialEq)]
pub enum Asked {
    /// Cloudflare Turnstile's widget (`[turnstile]`), before a place in line.
    Turnstile(Arc<Challenge>),
    /// A proof of work (`[proof_of_work]`), before any place.
    ProofOfWork(ProofAsked),
}

/// A seed to solve, and why the last answer was refused, if it was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProofAsked {
    /// Sealed (`Signer::seal_seed`): the string a solver hashes with its nonce.
    pub seed: String,
    pub difficulty_bits: u8,
    pub expires_at: Millis,
    pub refused: Option<ProofResult>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Forward {
    /// Passed, Admitted, Bypassed or Unprotected.
    pub outcome: Outcome,
    /// A pass to set as the visitor's cookie on the origin's response: new, or renewed.
    pub pass: Option<Pass>,
    /// The pass the origin may end with its revoke command.
    pub holder: Option<String>,
}

impl Forward {
    pub fn plain(outcome: Outcome) -> Self {
        Self {
            outcome,
            pass: None,
            holder: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Wait {
    pub ticket: Ticket,
    /// The ticket changed (new, or just looked up) or a tenth of its life has gone: signed
    /// again and sent as a cookie. Otherwise the visitor's cookie is still good.
    pub sign: bool,
    /// Exact 1-based place; None when the store could not say.
    pub position: Option<u64>,
    pub queued: u64,
    pub estimate: WaitEstimate,
}

/// Which per-address limit refused a new ticket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// The address's rate of new tickets.
    TooFast,
    /// The address already holds its cap of tickets in line.
    TooManyLive,
    /// A pass holder asks for more than `pass.max_requests_per_minute`.
    PassRate,
}

impl Decision {
    pub fn outcome(&self) -> Outcome {
        match self {
            Decision::Forward(f) => f.outcome,
            Decision::Answer(Answer::Wait(_)) => Outcome::Queued,
            Decision::Answer(Answer::Closed) => Outcome::Rejected,
            Decision::Answer(Answer::Challenge { .. }) => Outcome::Challenged,
            Decision::Answer(Answer::Limited { .. }) => Outcome::Limited,
            Decision::Answer(Answer::Shared) => Outcome::Revoked,
            Decision::Answer(Answer::Entered { then, .. }) => then.outcome(),
            Decision::Answer(Answer::EntryRequired | Answer::EntryRefused(_)) => {
                Outcome::Challenged
            }
            Decision::Answer(Answer::Blocked) => Outcome::Blocked,
        }
    }
}

/// Where one visitor stands, as its page, its JSON or its event stream shows it.
#[derive(Debug, Clone, Copy)]
pub enum Shown {
    Waiting {
        position: Option<u64>,
        queued: u64,
        estimate: WaitEstimate,
    },
    Admitted,
    /// No longer waiting and not admitted (dropped out, left): the page should reload.
    Gone,
    Closed,
}
