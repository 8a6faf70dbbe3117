//! A visitor without a usable token, or whose place was lost: in at once when the room is open
//! and nobody waits, else (after the bot challenge and the per-address limit) into the line.

use crate::clock::Millis;
use crate::config::model::OnStoreError;
use crate::config::{QueueingMethod, RoomSettings};
use crate::core::ip_limit::IpClaim;
use crate::request::client::{UNPARSED_LIMIT_KEY, limit_key};
use crate::request::view::Request;
use crate::store::{StoreError, TicketPlace};
use crate::token::{Sighting, Ticket};

use super::{Answer, ChallengeAnswer, Decision, Forward, Gate, Limit};
use crate::observe::Outcome;

/// The epoch of a ticket issued while the store was unreachable: no store has it, so when the
/// store is back the ticket is put in line where its arrival time says.
const OFFLINE_EPOCH: &str = "offline";

impl Gate {
    pub(super) async fn newcomer(
        &self,
        id: String,
        restore: Option<TicketPlace>,
        arrived_at: Millis,
        settings: &RoomSettings,
        req: &Request<'_>,
        answer: ChallengeAnswer,
    ) -> Decision {
        let limits = settings.limits();
        match settings.queueing_method {
            QueueingMethod::Reject => return Decision::Answer(Answer::Closed),
            QueueingMethod::Passthrough => {
                let admitted = self.room.store.admit_unconditionally(&id, &limits).await;
                return match admitted {
                    Ok(expires_at) => {
                        self.room.metrics.admitted.inc();
                        let epoch = self.epoch().await;
                        self.admitted(id, epoch, expires_at)
                    }
                    Err(_) => Decision::Forward(Forward::plain(Outcome::Unprotected)),
                };
            }
            QueueingMethod::Fifo | QueueingMethod::Random | QueueingMethod::Lottery => {}
        }
        // A members-only line: no place without the shop's entry token (a ticket whose place
        // was lost had one).
        if self.rules.entry.is_some() && restore.is_none() && answer != ChallengeAnswer::Member {
            return self.entry_required();
        }
        // No place without a proof of work while it is on: not a pass given at once, not a
        // place in line. A ticket whose place was lost paid for it already.
        if restore.is_none() && answer == ChallengeAnswer::None && self.proof_required(settings) {
            return self.proof_challenge(settings, req, None, None);
        }
        // Every new place counts against its address, whether it is a place in line or a pass
        // given at once: else one address takes a room that has space by plain requests. A
        // returning ticket counts like a new one: a ticket that lost its place (the store lost
        // its data, or it dropped out) is one more place.
        let mut counted = matches!(answer, ChallengeAnswer::Passed { claimed: Some(_) });
        // While a line waits (as of the loop's last look) a direct admission would be refused:
        // skip the store call and join. The store still decides atomically when the view is
        // stale the other way.
        let line_waits = self.room.view.load().queued > 0;
        if limits.admitting && !line_waits {
            if !counted {
                match self.claim_ticket(&id, settings, req).await {
                    Ok(None) => counted = true,
                    Ok(Some(refused)) => return refused,
                    Err(_) => return self.store_unreachable(id, restore, arrived_at, settings),
                }
            }
            let direct = self.room.store.admit_directly(&id, &limits).await;
            match direct {
                Ok(Some(expires_at)) => {
                    self.room.metrics.admitted.inc();
                    // The pass's first network: its copies elsewhere count from here.
                    if let Some(refused) = self.in_use(&id, settings, req).await {
                        return refused;
                    }
                    let epoch = self.epoch().await;
                    return self.admitted(id, epoch, expires_at);
                }
                Ok(None) => {}
                Err(_) => return self.store_unreachable(id, restore, arrived_at, settings),
            }
        }
        // Cloudflare challenges on the waiting page only: a visitor let in at once never sees
        // it, and a ticket whose place was lost passed it already. The answer counts against
        // the address again, as a new place.
        if let Some(rule) = &self.rules.turnstile
            && restore.is_none()
            && answer == ChallengeAnswer::None
        {
            return self.challenge(settings, rule);
        }
        if !counted {
            match self.claim_ticket(&id, settings, req).await {
                Ok(None) => {}
                Ok(Some(refused)) => return refused,
                Err(_) => return self.store_unreachable(id, restore, arrived_at, settings),
            }
        }
        let joined = self.room.store.join(&id, restore.as_ref(), &limits).await;
        match joined {
            Ok(joined) => {
                // A quiet room's loop looks at it only once a second; someone in line wakes it.
                self.room.pollers.joined();
                let ticket = Ticket {
                    id,
                    place: joined.place,
                    epoch: joined.epoch,
                    arrived_at,
                    initial_position: restore
                        .as_ref()
                        .map_or(joined.position, |_| joined.position.max(1)),
                    seen: self.sighting(joined.position),
                    expires_at: 0,
                };
                self.waiting(settings, ticket, Some(joined.position), joined.queued)
            }
            Err(_) => self.store_unreachable(id, restore, arrived_at, settings),
        }
    }

    /// `[rate_limit]`: None when this ticket may join the line, else the refusal. A store error
    /// is the caller's to handle like a failed join (`on_error`), so an outage never refuses
    /// anyone for the limit.
    pub(super) async fn claim_ticket(
        &self,
        id: &str,
        settings: &RoomSettings,
        req: &Request<'_>,
    ) -> Result<Option<Decision>, StoreError> {
        if self.rules.ip_limits.is_off() {
            return Ok(None);
        }
        let Some(key) = self.address_key(req) else {
            return Ok(None);
        };
        let claimed = self
            .room
            .store
            .claim_ticket(&key, id, &self.rules.ip_limits)
            .await;
        let (retry_after_secs, limit) = match claimed? {
            IpClaim::Allowed => return Ok(None),
            IpClaim::TooFast { retry_after_ms } => {
                self.room.metrics.refused_too_fast.inc();
                let seconds = u64::try_from(retry_after_ms.max(1))
                    .unwrap_or(1)
                    .div_ceil(1000);
                (seconds, Limit::TooFast)
            }
            // A place frees when a visitor from the address is let in or leaves: ask again at
            // the pace a waiting page polls.
            IpClaim::TooManyLive => {
                self.room.metrics.refused_too_many_live.inc();
                (
                    settings.refresh_interval.as_secs().max(1),
                    Limit::TooManyLive,
                )
            }
        };
        Ok(Some(Decision::Answer(Answer::Limited {
            retry_after_secs,
            limit,
        })))
    }

    /// What the per-address budgets count a request under: its address (IPv6 by its network),
    /// a shared key for addresses that could not be read, or None without an address.
    pub(super) fn address_key(&self, req: &Request<'_>) -> Option<String> {
        match req.client_ip {
            Some(ip) => Some(limit_key(ip, self.rules.ip_limits.ipv6_prefix)),
            // Never the balancer's address: that would put everyone behind it in one budget.
            None if req.unparsed_client => Some(UNPARSED_LIMIT_KEY.to_owned()),
            None => None,
        }
    }

    /// The store cannot be reached for a visitor who holds no pass.
    fn store_unreachable(
        &self,
        id: String,
        restore: Option<TicketPlace>,
        arrived_at: Millis,
        settings: &RoomSettings,
    ) -> Decision {
        match self.rules.on_store_error {
            OnStoreError::Open => Decision::Forward(Forward::plain(Outcome::Unprotected)),
            OnStoreError::Closed => {
                let ticket = Ticket {
                    id,
                    place: restore
                        .map_or(self.room.clock.now_ms().saturating_mul(1000), |r| r.place),
                    epoch: OFFLINE_EPOCH.into(),
                    arrived_at,
                    initial_position: 0,
                    seen: Sighting::default(),
                    expires_at: 0,
                };
                self.waiting(settings, ticket, None, 0)
            }
        }
    }
}
