//! Where a waiting visitor stands: one answer for the waiting page, the JSON status and the
//! event stream. Most polls are answered from the signed ticket and the room view without a
//! store call; the store is asked when that would not be as good.

use crate::clock::Millis;
use crate::config::{QueueingMethod, RoomSettings};
use crate::core::room::{Placing, PollOutcome};
use crate::token::{Sighting, Ticket};
use crate::turnstile::{self, PARKED_EPOCH};

use super::Gate;
use super::decision::Shown;
use crate::request::view::Request;
use crate::token::Token;

/// An exact look-up at least this often per visitor (capped by half of `abandon_after`), so the
/// estimated position never drifts for long.
const EXACT_POLL_EVERY_MS: Millis = 120_000;

pub(super) enum Standing {
    /// In line: the ticket (with a fresh sighting when the store was just asked).
    Waiting {
        ticket: Ticket,
        position: Option<u64>,
        queued: u64,
    },
    /// Its turn came and the admission is now claimed: the pass to issue.
    Called {
        id: String,
        epoch: String,
        expires_at: Millis,
    },
    /// The store does not know the ticket (dropped out, or the store lost its data).
    Lost(Ticket),
    /// The store did not answer.
    Unreachable(Ticket),
}

/// What a waiting page's event stream shows now, and whether the stream is done.
#[derive(Debug, Clone)]
pub struct Watched {
    pub shown: Shown,
    pub done: bool,
    pub settings: std::sync::Arc<RoomSettings>,
}

impl Gate {
    pub(super) async fn standing(&self, ticket: Ticket, settings: &RoomSettings) -> Standing {
        if ticket.epoch == PARKED_EPOCH {
            let view = self.room.view.load();
            let position = turnstile::parked_position(ticket.seen, view.admitted_total);
            let queued = view.queued.max(position);
            return Standing::Waiting {
                ticket,
                position: Some(position),
                queued,
            };
        }
        if let Some((position, queued)) = self.estimated_position(&ticket, settings) {
            return Standing::Waiting {
                ticket,
                position,
                queued,
            };
        }
        let polled = self.room.store.poll(&ticket.id, &settings.limits()).await;
        match polled {
            Ok(PollOutcome::Admitted {
                expires_at,
                called_at,
            }) => {
                if let Some(called_at) = called_at {
                    self.claimed(&ticket, called_at);
                }
                Standing::Called {
                    id: ticket.id,
                    epoch: ticket.epoch,
                    expires_at,
                }
            }
            Ok(PollOutcome::Waiting { position, queued }) => Standing::Waiting {
                ticket: Ticket {
                    seen: self.sighting(position),
                    ..ticket
                },
                position: Some(position),
                queued,
            },
            Ok(PollOutcome::Unknown) => Standing::Lost(ticket),
            Err(_) => Standing::Unreachable(ticket),
        }
    }

    pub(super) fn sighting(&self, position: u64) -> Sighting {
        Sighting {
            position,
            admitted_total: self.room.view.load().admitted_total,
            at: self.room.clock.now_ms(),
        }
    }

    /// A poll answered from the ticket and the room view, when that is as good as asking the
    /// store: the visitor was seen recently in this epoch, is not called, and the store is up.
    /// Position = last exact position minus admissions since; only visitors who gave up ahead
    /// make it an over-estimate, corrected at the next exact look-up. In a pre-queue no place
    /// is shown and nobody is called, so every poll is answered here (a heartbeat); the first
    /// poll after the start is exact, since places seen before it were not final.
    pub(super) fn estimated_position(
        &self,
        ticket: &Ticket,
        settings: &RoomSettings,
    ) -> Option<(Option<u64>, u64)> {
        let seen = ticket.seen;
        let now = self.room.clock.now_ms();
        let limits = settings.limits();
        let abandon_after = limits.abandon_after_ms;
        let exact_every = EXACT_POLL_EVERY_MS.min(abandon_after / 2);
        let view = self.room.view.load();
        let settled = now - view.epoch_seen_at >= abandon_after;
        let prequeue = settings.prequeueing();
        let seen_before_start = settings
            .event
            .as_ref()
            .is_some_and(|e| seen.at < e.times.start_ms);
        // Until its lottery window closes, later arrivals may draw places ahead of a visitor.
        let seen_while_drawing = match limits.placing {
            Placing::Lottery { window_ms } => {
                let window_ms = window_ms.max(1);
                seen.at < ticket.arrived_at - ticket.arrived_at.rem_euclid(window_ms) + window_ms
            }
            _ => false,
        };
        let recent =
            seen.at > 0 && now - seen.at < exact_every && !seen_before_start && !seen_while_drawing;
        let fresh = settled
            && (prequeue || recent)
            && self.room.health.is_up()
            && !view.epoch.is_empty()
            && *ticket.epoch == *view.epoch
            && !view.called.contains(&ticket.id);
        if !fresh {
            return None;
        }
        self.room.pollers.seen(&ticket.id);
        if prequeue {
            return Some((None, view.queued));
        }
        let admitted_since = view.admitted_total.saturating_sub(seen.admitted_total);
        let position = seen.position.saturating_sub(admitted_since).max(1);
        Some((Some(position), view.queued.max(position)))
    }

    /// What an event stream follows: the visitor's token, read once when the stream opens.
    pub fn watch(&self, req: &Request<'_>) -> Watch {
        Watch {
            token: self.token(req),
        }
    }

    /// An open stream's visitor is still there: its place is kept like a poll keeps it.
    pub fn keep(&self, watch: &Watch) {
        if let Some(Token::Ticket(ticket)) = &watch.token {
            self.room.pollers.seen(&ticket.id);
        }
    }

    /// For the event stream: the visitor's status now, and whether the stream is done. The
    /// stream cannot set cookies, so an admitted visitor is told to reload, and that request
    /// collects the pass; the ticket's last sighting is kept in the stream instead.
    pub async fn look(&self, watch: &mut Watch) -> Watched {
        let settings = self.settings();
        let (shown, done) = self.shown(watch, &settings).await;
        Watched {
            shown,
            done,
            settings,
        }
    }

    async fn shown(&self, watch: &mut Watch, settings: &RoomSettings) -> (Shown, bool) {
        // A room switched live while the visitor waits: end the stream, the page reloads into
        // what it now gets.
        if settings.suspended || settings.queueing_method == QueueingMethod::Passthrough {
            return (Shown::Gone, true);
        }
        if settings.queueing_method == QueueingMethod::Reject {
            return (Shown::Closed, true);
        }
        let revoked = watch.visitor().and_then(|id| self.room.store.revoked(id));
        let ticket = match (&watch.token, revoked) {
            (Some(Token::Pass(_)), None) => return (Shown::Admitted, true),
            (Some(Token::Ticket(ticket)), None) => ticket.clone(),
            _ => return (Shown::Gone, true),
        };
        let waiting = |position: Option<u64>, queued: u64| Shown::Waiting {
            position,
            queued,
            estimate: self.estimate(settings, position, queued),
        };
        match self.standing(ticket, settings).await {
            Standing::Waiting {
                ticket,
                position,
                queued,
            } => {
                watch.token = Some(Token::Ticket(ticket));
                (waiting(position, queued), false)
            }
            Standing::Called { .. } => (Shown::Admitted, true),
            Standing::Lost(_) => (Shown::Gone, true),
            Standing::Unreachable(_) => (waiting(None, 0), false),
        }
    }
}

/// An event stream's visitor, as its cookie said when the stream opened; a waiting visitor's
/// sightings are kept here, since the stream cannot sign a new cookie.
#[derive(Debug)]
pub struct Watch {
    token: Option<Token>,
}

impl Watch {
    /// The visitor's id (ticket or pass): at most a few streams per visitor.
    pub fn visitor(&self) -> Option<&str> {
        self.token.as_ref().map(Token::visitor)
    }
}
