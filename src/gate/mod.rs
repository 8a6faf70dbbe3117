//! The per-request decision, on the canonical request: forward (a pass, admitted now, bypassed,
//! not covered), wait in line, closed, the bot challenge, or limited. The gate decides; `respond`
//! turns a decision into a reply. No Pingora types: tested directly (gate/tests.rs).
//!
//! The visitor's way through: `decide` (path bypass) → `visit` (visitor bypass, the
//! room switched off, the visitor's cookie) → a pass holder (`holder`), a waiting visitor
//! (`waiter`, with `standing` saying where it stands) or a newcomer (`newcomer`, with the
//! per-address limit and the bot challenge, `challenge`).

mod challenge;
mod decision;
mod entry;
mod newcomer;
mod proof;
mod standing;
#[cfg(test)]
mod tests;

use std::net::IpAddr;
use std::sync::{Arc, Mutex};

pub use challenge::{Answered, ChallengeAnswer};
pub use decision::{Answer, Asked, Decided, Decision, Forward, Limit, ProofAsked, Shown, Wait};
pub use proof::{ProofAnswered, ProofRule};
pub use standing::{Watch, Watched};

use crate::clock::Millis;
use crate::config::model::OnStoreError;
use crate::config::{QueueingMethod, RoomSettings};
use crate::core::estimate::WaitEstimate;
use crate::core::fairness::FairnessWindow;
use crate::core::ip_limit::IpLimits;
use crate::core::sharing::{PassLimits, UseVerdict};
use crate::entry::EntryVerifier;
use crate::observe::Outcome;
use crate::request::client::network_key;
use crate::request::crawler;
use crate::request::rules::{self, Action, Rule};
use crate::request::view::Request;
use crate::room::Room;
use crate::store::{RevokeReason, StoreError};
use crate::token::{Pass, Signer, Ticket, Token, Verified, new_visitor_id};
use crate::turnstile::{Challenge, Turnstile};

/// A pass's cookie is signed again (and its store entry slid) once this share of the session
/// has gone by, so an active visitor costs one store write per tenth of a session, not one per
/// request. The idle timeout is therefore between 90 % and 100 % of `session_duration`.
const RENEW_AFTER_SHARE: Millis = 10;

/// Admissions kept for the fairness figures (each claim compares itself with all of them).
const FAIRNESS_WINDOW: usize = 1000;

/// The room's rules for its visitors that the config sets once: how a visitor's cookie is read
/// and what a newcomer must pass before it gets a place.
pub struct GateRules {
    pub signer: Arc<Signer>,
    pub cookie_name: String,
    pub on_store_error: OnStoreError,
    pub ip_limits: IpLimits,
    /// `[turnstile]`: newcomers pass a challenge before they get a place in line.
    pub turnstile: Option<TurnstileRule>,
    /// `[proof_of_work]`: newcomers solve a seed before they get any place, when it is on.
    pub proof: ProofRule,
    /// `[entry]`: the line is for customers who bring the shop's entry token.
    pub entry: Option<Arc<EntryVerifier>>,
}

/// `[turnstile]` as the gate holds it: what verifies an answer, and what a page or an app is
/// given to show the challenge.
pub struct TurnstileRule {
    pub verifier: Arc<Turnstile>,
    pub challenge: Arc<Challenge>,
}

pub struct Gate {
    /// The room's shared state: its settings, the loop's view, its store (health noted), the
    /// pollers, the ledger of pass use.
    room: Arc<Room>,
    rules: GateRules,
    /// This instance's last admissions, arrival against admission order.
    fairness: Mutex<FairnessWindow>,
}

impl Gate {
    pub fn new(room: Arc<Room>, rules: GateRules) -> Self {
        Self {
            room,
            rules,
            fairness: Mutex::new(FairnessWindow::new(FAIRNESS_WINDOW)),
        }
    }

    /// The settings in effect now.
    pub fn settings(&self) -> Arc<RoomSettings> {
        self.room.settings.now()
    }

    /// The decision for a request to this room (the proxy routed it here; reserved paths
    /// excluded).
    pub async fn decide(&self, req: &Request<'_>) -> Decided {
        let settings = self.settings();
        let entry_token = self
            .rules
            .entry
            .as_ref()
            .and_then(|verifier| Some((verifier, crate::entry::token_in(req.query)?)));
        let ruled = self.ruled(req, &settings.rules);
        let bypasses = Bypasses(ruled.is_none());
        let decision = if ruled == Some(Action::Block) {
            Decision::Answer(Answer::Blocked)
        } else if ruled == Some(Action::Bypass)
            || (bypasses.0 && settings.bypass.iter().any(|p| p.matches(req.path)))
        {
            Decision::Forward(Forward::plain(Outcome::Bypassed))
        } else if let Some((verifier, token)) = entry_token {
            self.enter(verifier, &token, req, &settings).await
        } else {
            self.visit_with(req, &settings, ChallengeAnswer::None, bypasses)
                .await
        };
        self.counted(decision, settings)
    }

    /// The action of the first of `rules` that holds for `req`, counted by rule.
    fn ruled(&self, req: &Request<'_>, rules: &[Rule]) -> Option<Action> {
        let (_, rule) = rules::first_holding(rules, req)?;
        self.room
            .metrics
            .rule_held(&rule.label, rule.action.as_str(), true);
        Some(rule.action)
    }

    /// Whether a block rule that speaks of the visitor alone (no paths) holds for one of the
    /// room's own `/__waitroom/` requests: a blocked network must not join the line through
    /// the status or take a pass through the challenge's answer either.
    pub fn blocks_reserved(&self, req: &Request<'_>) -> Option<Decided> {
        let settings = self.settings();
        let rule = reserved_block(&settings, req)?;
        self.room
            .metrics
            .rule_held(&rule.label, rule.action.as_str(), true);
        Some(self.counted(Decision::Answer(Answer::Blocked), settings))
    }

    /// [`Gate::blocks_reserved`] without counting: the front door leaves a blocked stream
    /// request to the proxy, which answers and counts it.
    pub fn would_block_reserved(&self, req: &Request<'_>) -> bool {
        reserved_block(&self.settings(), req).is_some()
    }

    /// The decision for the visitor alone, whatever path it asked for: the JSON status and the
    /// answer to the challenge speak for the room's protected route.
    pub async fn visit(&self, req: &Request<'_>, answer: ChallengeAnswer) -> Decided {
        let settings = self.settings();
        let decision = self
            .visit_with(req, &settings, answer, Bypasses(true))
            .await;
        self.counted(decision, settings)
    }

    fn counted(&self, decision: Decision, settings: Arc<RoomSettings>) -> Decided {
        self.room.metrics.request(decision.outcome());
        Decided { decision, settings }
    }

    async fn visit_with(
        &self,
        req: &Request<'_>,
        settings: &RoomSettings,
        answer: ChallengeAnswer,
        bypasses: Bypasses,
    ) -> Decision {
        if bypasses.0 && bypassed(settings, req) {
            return Decision::Forward(Forward::plain(Outcome::Bypassed));
        }
        if settings.suspended {
            return Decision::Forward(Forward::plain(Outcome::Unprotected));
        }
        let verified = self.verified(req);
        let legacy = verified.as_ref().is_some_and(|v| v.legacy);
        let token = verified.map(|v| v.token);
        // A revocation covers the visitor, not just its cookie: the ticket its pass came from
        // (or a copy of it) is refused like the pass.
        let revoked = token
            .as_ref()
            .and_then(|t| self.room.store.revoked(t.visitor()));
        match (token, revoked) {
            (Some(_), Some(RevokeReason::Shared)) => Decision::Answer(Answer::Shared),
            (Some(Token::Pass(pass)), None) => {
                let legacy_pass = legacy.then(|| pass.clone());
                let decision = self.holder(pass, settings, req, answer).await;
                resealed_pass(decision, legacy_pass)
            }
            (Some(Token::Ticket(ticket)), None) => {
                let decision = self.waiter(ticket, settings, req).await;
                resealed_ticket(decision, legacy)
            }
            _ => {
                let id = match &answer {
                    ChallengeAnswer::Passed { claimed: Some(id) } => id.clone(),
                    _ => new_visitor_id(),
                };
                let now = self.room.clock.now_ms();
                self.newcomer(id, None, now, settings, req, answer).await
            }
        }
    }

    /// The token in the request's cookie, if any verifies.
    fn token(&self, req: &Request<'_>) -> Option<Token> {
        self.verified(req).map(|v| v.token)
    }

    /// [`Gate::token`], and whether it is a legacy one to replace.
    fn verified(&self, req: &Request<'_>) -> Option<Verified> {
        self.rules.signer.check(
            req.cookie(&self.rules.cookie_name)?,
            self.room.clock.now_ms(),
        )
    }

    /// The pass this request holds, if any (revoked or not): the origin's revoke command ends
    /// it on whatever path the response answers.
    pub fn pass_holder(&self, headers: &http::HeaderMap) -> Option<String> {
        let raw = crate::request::view::cookie_in(headers, &self.rules.cookie_name)?;
        match self.rules.signer.verify(raw, self.room.clock.now_ms())? {
            Token::Pass(pass) => Some(pass.id),
            Token::Ticket(_) => None,
        }
    }

    /// A visitor with a valid pass: through, sliding the session now and then.
    async fn holder(
        &self,
        pass: Pass,
        settings: &RoomSettings,
        req: &Request<'_>,
        answer: ChallengeAnswer,
    ) -> Decision {
        if let Some(refused) = self.in_use(&pass.id, settings, req).await {
            return refused;
        }
        let now = self.room.clock.now_ms();
        let limits = settings.limits();
        let renew_after = limits.session_ms / RENEW_AFTER_SHARE;
        let mut renewed = None;
        if !settings.disable_session_renewal && now - pass.renewed_at >= renew_after {
            let touched = self
                .room
                .store
                .touch_pass(&pass.id, &pass.epoch, &limits)
                .await;
            match touched {
                Ok(Some(expires_at)) => {
                    renewed = Some(Pass {
                        renewed_at: now,
                        expires_at,
                        ..pass.clone()
                    });
                }
                // The store ended this session (expired, or revoked elsewhere): start over.
                Ok(None) => {
                    return self
                        .newcomer(new_visitor_id(), None, now, settings, req, answer)
                        .await;
                }
                // The pass verified locally: a store outage must not throw admitted visitors out.
                Err(_) => {}
            }
        }
        Decision::Forward(Forward {
            outcome: Outcome::Passed,
            pass: renewed,
            holder: Some(pass.id),
        })
    }

    /// A visitor with a ticket: still waiting, or its turn has come.
    async fn waiter(&self, ticket: Ticket, settings: &RoomSettings, req: &Request<'_>) -> Decision {
        match settings.queueing_method {
            QueueingMethod::Reject => return Decision::Answer(Answer::Closed),
            QueueingMethod::Passthrough => {
                // The room was switched to passthrough while this visitor waited. A place the
                // store could not drop now is dropped as abandoned later.
                if let Err(e) = self.room.store.leave_queue(&ticket.id).await {
                    log::debug!("ticket {} not taken out of the line: {e}", ticket.id);
                }
                let now = self.room.clock.now_ms();
                return self
                    .newcomer(ticket.id, None, now, settings, req, ChallengeAnswer::None)
                    .await;
            }
            QueueingMethod::Fifo | QueueingMethod::Random | QueueingMethod::Lottery => {}
        }
        match self.standing(ticket, settings).await {
            standing::Standing::Waiting {
                ticket,
                position,
                queued,
            } => self.waiting(settings, ticket, position, queued),
            standing::Standing::Called {
                id,
                epoch,
                expires_at,
            } => match self.in_use(&id, settings, req).await {
                // A copy of a called ticket is held to the pass's rule: from a network too many,
                // the pass is revoked, for every copy.
                Some(refused) => refused,
                None => self.admitted(id, epoch, expires_at),
            },
            standing::Standing::Lost(ticket) => {
                let restore = crate::store::TicketPlace {
                    place: ticket.place,
                    epoch: ticket.epoch.clone(),
                };
                self.newcomer(
                    ticket.id,
                    Some(restore),
                    ticket.arrived_at,
                    settings,
                    req,
                    ChallengeAnswer::None,
                )
                .await
            }
            standing::Standing::Unreachable(ticket) => match self.rules.on_store_error {
                OnStoreError::Open => Decision::Forward(Forward::plain(Outcome::Unprotected)),
                OnStoreError::Closed => self.waiting(settings, ticket, None, 0),
            },
        }
    }

    /// A visitor let in now: its pass, to be set as a cookie on the origin's answer.
    fn admitted(&self, id: String, epoch: String, expires_at: Millis) -> Decision {
        self.with_pass(Outcome::Admitted, id, epoch, expires_at)
    }

    /// Through, with a pass signed now for the store's session of `id`.
    fn with_pass(
        &self,
        outcome: Outcome,
        id: String,
        epoch: String,
        expires_at: Millis,
    ) -> Decision {
        let now = self.room.clock.now_ms();
        Decision::Forward(Forward {
            outcome,
            holder: Some(id.clone()),
            pass: Some(Pass {
                id,
                epoch,
                admitted_at: now,
                renewed_at: now,
                expires_at,
            }),
        })
    }

    /// The store's epoch for a new pass: the loop's, or asked of the store before the loop has
    /// first reached it.
    async fn epoch(&self) -> String {
        let known = self.room.view.load().epoch.clone();
        if !known.is_empty() {
            return known.to_string();
        }
        let asked = self.room.store.epoch().await;
        asked.unwrap_or_default()
    }

    /// The wait of a visitor joining the back of a line of `queued` now (the operator's live
    /// view): unknown where nobody waits for a turn (passthrough, reject).
    pub fn newcomer_estimate(&self, settings: &RoomSettings, queued: u64) -> WaitEstimate {
        match settings.queueing_method {
            QueueingMethod::Passthrough | QueueingMethod::Reject => WaitEstimate::Unknown,
            QueueingMethod::Fifo | QueueingMethod::Random | QueueingMethod::Lottery => {
                self.estimate(settings, Some(queued + 1), queued + 1)
            }
        }
    }

    fn estimate(
        &self,
        settings: &RoomSettings,
        position: Option<u64>,
        queued: u64,
    ) -> WaitEstimate {
        if settings.queue_all || settings.prequeueing() {
            return WaitEstimate::Unknown;
        }
        let rate = self.room.view.load().rate_per_second;
        match (settings.queueing_method, position) {
            (QueueingMethod::Random, _) => WaitEstimate::random(queued, rate),
            (_, Some(position)) => WaitEstimate::fifo(position, rate),
            (_, None) => WaitEstimate::Unknown,
        }
    }

    /// A visitor in line, with its ticket renewed: signed again only when it changed (new, or
    /// just looked up) or a tenth of its life has gone, like a pass's renewal, because signing
    /// costs a share of a poll.
    fn waiting(
        &self,
        settings: &RoomSettings,
        mut ticket: Ticket,
        position: Option<u64>,
        queued: u64,
    ) -> Decision {
        let now = self.room.clock.now_ms();
        let abandon_after = settings.limits().abandon_after_ms;
        let issued_at = ticket.expires_at - abandon_after;
        let sign = ticket.seen.at == now || now - issued_at >= abandon_after / 10;
        ticket.expires_at = now + abandon_after;
        Decision::Answer(Answer::Wait(Wait {
            estimate: self.estimate(settings, position, queued),
            ticket,
            sign,
            position,
            queued,
        }))
    }

    /// `POST /__waitroom/leave`: gives up the place or ends the pass.
    pub async fn leave(&self, req: &Request<'_>) -> Result<bool, StoreError> {
        match self.token(req) {
            Some(Token::Ticket(t)) => {
                if let Some(contacts) = &self.room.contacts {
                    contacts.forget(&t.id);
                }
                self.room.store.leave_queue(&t.id).await
            }
            Some(Token::Pass(p)) => self.end_pass(&p.id).await,
            None => Ok(false),
        }
    }

    /// Ends a pass (leave, the origin's revoke command, the admin API).
    pub async fn end_pass(&self, id: &str) -> Result<bool, StoreError> {
        self.revoke(id, RevokeReason::Ended).await
    }

    async fn revoke(&self, id: &str, reason: RevokeReason) -> Result<bool, StoreError> {
        let ended = self
            .room
            .store
            .end_pass(id, reason, &self.settings().limits())
            .await;
        if matches!(ended, Ok(true)) {
            self.room.metrics.revoked.inc();
        }
        ended
    }

    /// `[pass]`: None while this request of pass `id` is within the pass's rules; else the 429
    /// (over its rate), or the revocation (seen from a network too many). The rate is held by
    /// this instance's bucket, which the admission loop debits with what the other instances
    /// served (`RoomLoop`, once a tick), and a network costs a store call only the first time
    /// this instance sees the pass from it: no round trip per request.
    async fn in_use(
        &self,
        id: &str,
        settings: &RoomSettings,
        req: &Request<'_>,
    ) -> Option<Decision> {
        let limits = self.room.pass_use.limits();
        if limits == PassLimits::OFF {
            return None;
        }
        let now = self.room.clock.now_ms();
        let session_ms = settings.limits().session_ms;
        // Formatted only when networks are counted: this runs on every pass holder's request.
        let network = req
            .client_ip
            .filter(|_| limits.max_networks > 0)
            .map(|ip| network_key(ip, self.rules.ip_limits.ipv6_prefix));
        let verdict = self
            .room
            .pass_use
            .lock()
            .request(id, network.as_deref(), session_ms, now);
        match verdict {
            UseVerdict::Fine => None,
            UseVerdict::TooFast { retry_after_ms } => {
                self.room.metrics.pass_requests_limited.inc();
                let seconds = u64::try_from(retry_after_ms).unwrap_or(1).div_ceil(1000);
                Some(Decision::Answer(Answer::Limited {
                    retry_after_secs: seconds.max(1),
                    limit: Limit::PassRate,
                }))
            }
            UseVerdict::Report => {
                let network = network?;
                let noted = self.room.store.note_network(id, &network, session_ms).await;
                let count = match noted {
                    Ok(count) => count,
                    // The pass verified locally: an outage must not throw its holder out. The
                    // network is reported again by the next request.
                    Err(_) => {
                        self.room.pass_use.lock().unreported(id, &network);
                        return None;
                    }
                };
                if count <= limits.max_networks {
                    return None;
                }
                log::warn!(
                    "pass {id} revoked: used from {count} networks within a session \
                     (pass.max_networks = {}), the last {network}",
                    limits.max_networks
                );
                self.room.metrics.passes_shared.inc();
                // Revoked or not (the store may be down), this request does not go through.
                let _ = self.revoke(id, RevokeReason::Shared).await;
                Some(Decision::Answer(Answer::Shared))
            }
        }
    }

    /// A waiting visitor claims its admission: its wait, and where it came in the admission
    /// order against its arrival.
    fn claimed(&self, ticket: &Ticket, called_at: Millis) {
        self.room.metrics.admitted.inc();
        // Claimed here before the loop saw the call (a fast poll, another instance leading):
        // the contact is told all the same, once.
        if let Some(contacts) = &self.room.contacts {
            contacts.called(std::slice::from_ref(&ticket.id), called_at);
        }
        // Tickets from before `arrived_at` existed carry their arrival in their place.
        let arrived_at = if ticket.arrived_at > 0 {
            ticket.arrived_at
        } else {
            ticket.place / 1000
        };
        let waited = (self.room.clock.now_ms() - arrived_at).max(0);
        self.room.metrics.waited(u64::try_from(waited).unwrap_or(0));
        let mut window = self.fairness.lock().unwrap_or_else(|p| p.into_inner());
        let compared = window.record(arrived_at, called_at);
        self.room
            .metrics
            .order_inversions
            .inc_by(compared.inversions);
        self.room.metrics.order_pairs.inc_by(compared.pairs);
        if let Some(tau) = window.tau() {
            self.room.metrics.order_tau.set(tau);
        }
    }
}

/// A pass holder who came with a legacy (readable) pass leaves with the same pass sealed, when
/// it was not renewed anyway.
fn resealed_pass(mut decision: Decision, legacy: Option<Pass>) -> Decision {
    if let (Decision::Forward(forward), Some(pass)) = (&mut decision, legacy)
        && forward.outcome == Outcome::Passed
        && forward.pass.is_none()
    {
        forward.pass = Some(pass);
    }
    decision
}

/// A waiting visitor who came with a legacy (readable) ticket gets it sealed on this answer.
fn resealed_ticket(mut decision: Decision, legacy: bool) -> Decision {
    if let Decision::Answer(Answer::Wait(wait)) = &mut decision {
        wait.sign |= legacy;
    }
    decision
}

/// The block rule (without paths) deciding a reserved request, if one does: the first rule
/// without paths that holds, when it is a block.
fn reserved_block<'s>(settings: &'s RoomSettings, req: &Request<'_>) -> Option<&'s Rule> {
    settings
        .rules
        .iter()
        .filter(|r| r.about_the_visitor_alone())
        .find(|r| r.holds(req))
        .filter(|r| r.action == Action::Block)
}

/// Whether the room's bypass lists (`bypass`, `bypass_ips`, headers, cookies, crawlers) apply:
/// not when a rule decided (a `protect` rule holds the request in the room whatever they say).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bypasses(bool);

/// Staff, monitoring, offices and verified search crawlers skip the room by address, header or
/// cookie (not counted).
fn bypassed(settings: &RoomSettings, req: &Request<'_>) -> bool {
    let crawler = || {
        let user_agent = req.header(http::header::USER_AGENT);
        crawler::verified(user_agent, req.client_ip, &settings.crawler_ranges).is_some()
    };
    let from_address = |ip: IpAddr| settings.bypass_ips.iter().any(|c| c.contains(ip));
    (settings.bypass_verified_crawlers && crawler())
        || req.client_ip.is_some_and(from_address)
        || settings
            .bypass_headers
            .iter()
            .any(|r| r.matches(req.headers))
        || settings.bypass_cookies.iter().any(|rule| {
            req.cookie(&rule.name)
                .is_some_and(|value| rule.matches(value))
        })
}
