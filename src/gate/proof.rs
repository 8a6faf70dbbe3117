//! The proof of work (`[proof_of_work]`, core/proof.rs): a seed for a newcomer who would be
//! given a place, and the answer to it (`POST /__waitroom/proof`, form fields `seed` and
//! `nonce`). A seed is sealed, not stored; a solved one is spent once in the store, so one
//! solution never yields a second place on any instance.

use std::sync::Mutex;

use crate::config::RoomSettings;
use crate::config::model::{OnStoreError, OnUnreachable, ProofOfWorkConfig};
use crate::core::proof::{self, MAX_NONCE_DIGITS, SeedCounts};
use crate::observe::ProofResult;
use crate::request::view::Request;
use crate::token::{MAX_TOKEN_BYTES, Seed, new_visitor_id};

use super::{
    Answer, Asked, ChallengeAnswer, Decided, Decision, Forward, Gate, Outcome, ProofAsked,
};

/// The answer's form fields.
pub const SEED_FIELD: &str = "seed";
pub const NONCE_FIELD: &str = "nonce";

/// `[proof_of_work]` as the gate holds it: the settings, and the seeds each address asked for
/// this minute on this instance (what its difficulty rises with).
pub struct ProofRule {
    pub config: ProofOfWorkConfig,
    asked: Mutex<SeedCounts>,
}

impl ProofRule {
    pub fn new(config: ProofOfWorkConfig) -> Self {
        Self {
            config,
            asked: Mutex::new(SeedCounts::default()),
        }
    }
}

/// The outcome of `POST /__waitroom/proof`.
#[derive(Debug)]
pub enum ProofAnswered {
    /// Wrong, expired, spent or malformed: 403, with a new seed to solve.
    Refused(Decided),
    /// A place, a pass, the per-address limit's refusal; or, when no proof is asked now (or
    /// the visitor holds a place already), what the visitor would get anyway.
    Decided(Decided),
}

impl Gate {
    /// Whether a new place costs a proof of work now: the event governing the room says, else
    /// the room.
    pub(super) fn proof_required(&self, settings: &RoomSettings) -> bool {
        settings
            .event
            .as_ref()
            .and_then(|event| event.proof_of_work)
            .unwrap_or(self.rules.proof.config.enabled)
    }

    /// A fresh seed and the page (or JSON) that asks for its solution; nothing is stored. Its
    /// difficulty rises with the seeds the visitor's address asked for this minute. `claimed`:
    /// a ticket id already counted against the address, which the solution's place will be.
    pub(super) fn proof_challenge(
        &self,
        settings: &RoomSettings,
        req: &Request<'_>,
        refused: Option<ProofResult>,
        claimed: Option<String>,
    ) -> Decision {
        let now = self.room.clock.now_ms();
        let rule = &self.rules.proof;
        let asked = match self.address_key(req) {
            Some(key) => rule
                .asked
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .ask(&key, now),
            None => 1,
        };
        let seed = Seed {
            claimed: claimed.is_some(),
            id: claimed.unwrap_or_else(new_visitor_id),
            bits: rule.config.escalation.bits(asked),
            expires_at: now.saturating_add(crate::clock::millis(rule.config.seed_lifetime)),
        };
        let sealed = match self.rules.signer.seal_seed(&seed) {
            Ok(sealed) => sealed,
            // Sealing a few bytes does not fail; if it ever did, the room could not ask for
            // its price, and answers as when it cannot reach its store.
            Err(e) => {
                log::error!("proof of work: cannot seal a seed: {e}");
                return match self.rules.on_store_error {
                    OnStoreError::Open => Decision::Forward(Forward::plain(Outcome::Unprotected)),
                    OnStoreError::Closed => Decision::Answer(Answer::Closed),
                };
            }
        };
        self.room.metrics.proof_seeds.inc();
        let queued = self.room.view.load().queued;
        Decision::Answer(Answer::Challenge {
            queued,
            estimate: self.estimate(settings, Some(queued + 1), queued + 1),
            challenge: Asked::ProofOfWork(ProofAsked {
                seed: sealed,
                difficulty_bits: seed.bits,
                expires_at: seed.expires_at,
                refused,
            }),
        })
    }

    /// Checks a solution (one hash), spends its seed, then gives the visitor its place under
    /// the per-address limit. `form` is the body.
    pub async fn answer_proof(&self, req: &Request<'_>, form: &[u8]) -> ProofAnswered {
        let settings = self.settings();
        // Another tab's second answer, or no seed handed out now (neither a proof asked nor
        // Turnstile's fallback to one, `on_unreachable = "proof_of_work"`): the visitor's own
        // answer, with no hash or store call. A revoked visitor holds nothing and must solve.
        let holds_place = self
            .token(req)
            .is_some_and(|token| self.room.store.revoked(token.visitor()).is_none());
        if holds_place || !(self.proof_required(&settings) || self.proof_falls_back()) {
            return ProofAnswered::Decided(self.visit(req, ChallengeAnswer::None).await);
        }
        let (result, seed) = self.check_proof(form).await;
        self.room.metrics.proof(result);
        let seed = match seed {
            Some(seed) if result == ProofResult::Passed => seed,
            _ => {
                let again = self.proof_challenge(&settings, req, Some(result), None);
                return ProofAnswered::Refused(self.counted(again, settings));
            }
        };
        if seed.claimed {
            let claimed = Some(seed.id);
            return ProofAnswered::Decided(
                self.visit(req, ChallengeAnswer::Passed { claimed }).await,
            );
        }
        // The per-address limit after the proof: a place refused by it costs the solver its
        // solution, and a flood of answers from one address pays for each.
        let id = new_visitor_id();
        let claimed = match self.claim_ticket(&id, &settings, req).await {
            Ok(Some(refused)) => return ProofAnswered::Decided(self.counted(refused, settings)),
            Ok(None) => Some(id),
            // The join meets the outage again and follows `on_error`.
            Err(_) => None,
        };
        ProofAnswered::Decided(self.visit(req, ChallengeAnswer::Passed { claimed }).await)
    }

    /// Turnstile asks for a proof of work while siteverify cannot be reached.
    fn proof_falls_back(&self) -> bool {
        self.rules
            .turnstile
            .as_ref()
            .is_some_and(|t| t.verifier.on_unreachable == OnUnreachable::ProofOfWork)
    }

    /// What the answer in `form` is worth, and its seed when it opened.
    async fn check_proof(&self, form: &[u8]) -> (ProofResult, Option<Seed>) {
        let mut seed = None;
        let mut nonce = None;
        for (name, value) in form_urlencoded::parse(form) {
            match name.as_ref() {
                SEED_FIELD if value.len() <= MAX_TOKEN_BYTES => seed = Some(value),
                NONCE_FIELD if value.len() <= MAX_NONCE_DIGITS => nonce = Some(value),
                _ => {}
            }
        }
        let (Some(text), Some(nonce)) = (seed, nonce) else {
            return (ProofResult::Malformed, None);
        };
        let Some(seed) = self.rules.signer.open_seed(&text, self.room.clock.now_ms()) else {
            return (ProofResult::Expired, None);
        };
        if !proof::solves(&text, &nonce, seed.bits) {
            return (ProofResult::Wrong, Some(seed));
        }
        let result = match self.room.store.spend_seed(&seed.id, seed.expires_at).await {
            Ok(true) => ProofResult::Passed,
            Ok(false) => ProofResult::Spent,
            // Whether the seed was spent cannot be known: the place the answer leads to meets
            // the same outage and follows `on_error`, as every newcomer's does.
            Err(_) => ProofResult::Passed,
        };
        (result, Some(seed))
    }
}
