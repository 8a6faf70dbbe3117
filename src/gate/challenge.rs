//! Turnstile: the challenge a newcomer passes before it gets a place, the answer to it, and
//! parked visitors (a failed challenge under `action = "infinite_queue"`).

use crate::config::RoomSettings;
use crate::config::model::{OnUnreachable, TurnstileAction};
use crate::observe::ChallengeResult;
use crate::request::view::Request;
use crate::token::{Sighting, Ticket, new_visitor_id};
use crate::turnstile::{self, PARKED_EPOCH, TokenError, Verification};

use super::{Answer, Asked, Decided, Decision, Gate, TurnstileRule};

/// Whether a request answers the bot challenge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChallengeAnswer {
    None,
    /// Passed, or let through by the configured action. `claimed` is the new ticket's id when
    /// it was already counted against the visitor's address (before siteverify was asked).
    Passed {
        claimed: Option<String>,
    },
    /// A valid entry token of a members-only line: the customer's key is the price of its
    /// place, no challenge is asked.
    Member,
}

/// The outcome of `POST /__waitroom/turnstile`.
#[derive(Debug)]
pub enum Answered {
    /// The room has no challenge: the path does not exist.
    NoChallenge,
    /// The form holds no token: nothing was asked of siteverify.
    Malformed(TokenError),
    /// siteverify could not be asked and `on_unreachable = "retry"`.
    TryAgain,
    /// What the visitor gets now: a place, a pass, a parked place, or the limit's refusal.
    Decided(Decided),
}

impl Gate {
    /// The waiting page (or JSON) with the widget and no place: nothing is stored for it. What
    /// the back of the line waits is still worth knowing.
    pub(super) fn challenge(&self, settings: &RoomSettings, rule: &TurnstileRule) -> Decision {
        let queued = self.room.view.load().queued;
        Decision::Answer(Answer::Challenge {
            queued,
            estimate: self.estimate(settings, Some(queued + 1), queued + 1),
            challenge: Asked::Turnstile(rule.challenge.clone()),
        })
    }

    /// Verifies the widget's token with siteverify, then puts the visitor in line (or in, when
    /// the room has space), parks it, or asks for the challenge again. `form` is the body.
    pub async fn answer_challenge(&self, req: &Request<'_>, form: &[u8]) -> Answered {
        let Some(TurnstileRule {
            verifier: turnstile,
            ..
        }) = &self.rules.turnstile
        else {
            return Answered::NoChallenge;
        };
        // A second answer (another tab, a double submit) is not worth a siteverify call: the
        // visitor's place or pass answers. A revoked visitor holds neither: it starts over.
        let holds_place = self
            .token(req)
            .is_some_and(|token| self.room.store.revoked(token.visitor()).is_none());
        // While a proof of work is asked, it is the price of a place: a Turnstile token is not.
        if holds_place || self.proof_required(&self.settings()) {
            return Answered::Decided(self.visit(req, ChallengeAnswer::None).await);
        }
        let token = match turnstile::token_from_form(form) {
            Ok(token) => token,
            Err(e) => {
                self.room.metrics.challenge(ChallengeResult::Malformed);
                return Answered::Malformed(e);
            }
        };
        // The per-address limit comes before siteverify: a flood of answers from one address
        // is refused here and costs no siteverify call.
        let settings = self.settings();
        let id = new_visitor_id();
        let claimed = match self.claim_ticket(&id, &settings, req).await {
            Ok(Some(refused)) => return Answered::Decided(self.counted(refused, settings)),
            Ok(None) => Some(id),
            // The join meets the outage again and follows `on_error`.
            Err(_) => None,
        };
        match turnstile.verify(&token, req.client_ip).await {
            Verification::Passed => self.room.metrics.challenge(ChallengeResult::Passed),
            Verification::Failed { codes } => {
                self.room.metrics.challenge(ChallengeResult::Failed);
                log::info!("turnstile: challenge failed ({})", codes.join(", "));
                if turnstile.action == TurnstileAction::InfiniteQueue {
                    let parked = self.park(&settings);
                    return Answered::Decided(self.counted(parked, settings));
                }
            }
            Verification::Unreachable(e) => {
                self.room.metrics.challenge(ChallengeResult::Unreachable);
                log::warn!("turnstile: {e}");
                match turnstile.on_unreachable {
                    OnUnreachable::Allow => {}
                    OnUnreachable::Retry => return Answered::TryAgain,
                    // The ticket claimed above is the seed's: its solution takes that place
                    // and claims no second one from the address.
                    OnUnreachable::ProofOfWork => {
                        let asked = self.proof_challenge(&settings, req, None, claimed);
                        return Answered::Decided(self.counted(asked, settings));
                    }
                }
            }
        }
        Answered::Decided(self.visit(req, ChallengeAnswer::Passed { claimed }).await)
    }

    /// A ticket at the back of the line as the loop last saw it, in no store, answered like any
    /// waiting visitor's: never its turn.
    fn park(&self, settings: &RoomSettings) -> Decision {
        let view = self.room.view.load();
        let now = self.room.clock.now_ms();
        let position = view.queued + 1;
        let ticket = Ticket {
            id: new_visitor_id(),
            place: now.saturating_mul(1000),
            epoch: PARKED_EPOCH.into(),
            arrived_at: now,
            initial_position: position,
            seen: Sighting {
                position,
                admitted_total: view.admitted_total,
                at: now,
            },
            expires_at: 0,
        };
        self.room.metrics.turnstile_parked.inc();
        self.waiting(settings, ticket, Some(position), position)
    }
}
