//! The per-request decision: forward (valid pass, or admitted now), or answer with the waiting
//! page, the JSON status or the closed page. No Pingora types here, so it is tested directly.

use std::collections::HashSet;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;

use crate::client::limit_key;
use crate::clock::{Millis, SharedClock, rfc3339_ms};
use crate::config::model::{OnStoreError, OnUnreachable, PassConfig, TurnstileAction};
use crate::config::{Config, QueueingMethod, RoomSettings};
use crate::core::estimate::WaitEstimate;
use crate::core::fairness::FairnessWindow;
use crate::core::ip_limit::{IpClaim, IpLimits};
use crate::core::room::{Placing, PollOutcome};
use crate::crawler;
use crate::custom_page::{CustomPage, PageVariables};
use crate::locale::{Locale, PageLanguage};
use crate::metrics::{ChallengeResult, Metrics, Outcome};
use crate::page::{self, Branding, ChallengeView, ClosedView, Countdown, ErrorView, WaitingView};
use crate::reply::Reply;
use crate::route::Route;
use crate::status::{Standing, StatusBody};
use crate::store::{Store, StoreError, TicketPlace};
use crate::token::{Pass, Sighting, SignError, Signer, Ticket, Token, new_visitor_id};
use crate::turnstile::{self, PARKED_EPOCH, Turnstile, Verification};

/// Paths under this prefix are the proxy's own and never reach the origin.
pub const RESERVED_PREFIX: &str = "/__waitroom/";
pub const STATUS_PATH: &str = "/__waitroom/status";

/// The parts of a request the decision needs.
#[derive(Debug, Clone, Copy, Default)]
pub struct RequestView<'a> {
    pub host: Option<&'a str>,
    pub path: &'a str,
    pub query: Option<&'a str>,
    /// The raw `Accept` header.
    pub accept: Option<&'a str>,
    /// The raw `Accept-Language` header, for the built-in pages' language.
    pub accept_language: Option<&'a str>,
    /// The raw `Cookie` header(s), joined.
    pub cookie: Option<&'a str>,
    /// The visitor's address (behind trusted proxies: from X-Forwarded-For).
    pub client_ip: Option<IpAddr>,
    /// Every request header, for the header bypass rules.
    pub headers: Option<&'a http::HeaderMap>,
    /// The request carried a Turnstile answer the configured action lets through: its join is
    /// not challenged again.
    pub turnstile_passed: bool,
}

impl RequestView<'_> {
    /// Cloudflare's rule: JSON only for exactly `Accept: application/json`, or the query flag.
    pub fn wants_json(&self) -> bool {
        self.accept.map(str::trim) == Some("application/json")
            || self.query.is_some_and(|q| {
                q.split('&')
                    .any(|kv| kv == "waitingroom_json=1" || kv == "waitingroom_json=true")
            })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Send the request on. `set_cookie` goes on the origin's response; `visitor` is the pass
    /// the origin may revoke.
    Forward {
        outcome: Outcome,
        set_cookie: Option<String>,
        visitor: Option<String>,
    },
    Respond {
        outcome: Outcome,
        reply: Reply,
    },
}

impl Verdict {
    fn forward(outcome: Outcome) -> Self {
        Verdict::Forward {
            outcome,
            set_cookie: None,
            visitor: None,
        }
    }

    pub fn outcome(&self) -> Outcome {
        match self {
            Verdict::Forward { outcome, .. } | Verdict::Respond { outcome, .. } => *outcome,
        }
    }
}

/// A passes's cookie is signed again (and its store entry slid) once this share of the session
/// has gone by, so an active visitor costs one store write per tenth of a session, not one per
/// request. The idle timeout is therefore between 90 % and 100 % of `session_duration`.
const RENEW_AFTER_SHARE: u32 = 10;

pub struct Gate {
    pub room_id: String,
    route: Route,
    /// The room's settings as configured (file, admin API), events included.
    configured: ArcSwap<RoomSettings>,
    /// The settings in effect now, worked out from `configured` again when an event boundary
    /// passes or the configuration changes.
    effective: ArcSwap<Effective>,
    recompute: Mutex<()>,
    signer: Signer,
    pass_config: PassConfig,
    on_store_error: OnStoreError,
    ip_limits: IpLimits,
    pub store: Arc<dyn Store>,
    pub clock: SharedClock,
    pub metrics: Metrics,
    branding: Branding,
    /// `[page] template`: replaces the built-in waiting and closed pages.
    custom_page: Option<Arc<CustomPage>>,
    /// Admissions per second as last estimated by the admission loop (f64 bits; NaN: unknown).
    rate_bits: AtomicU64,
    store_ok: AtomicBool,
    /// Epoch of the store as last seen, for tickets issued while the store is unreachable.
    last_epoch: ArcSwap<String>,
    /// When this instance first saw that epoch: for an `abandon_after` after it, tickets from
    /// before may still come back and take their old places ahead of others, so every poll is
    /// looked up exactly.
    epoch_seen_at: AtomicI64,
    /// The room as the admission loop last saw it: answers most polls without the store.
    view: ArcSwap<RoomView>,
    /// Waiting visitors seen polling since the loop's last keep-alive batch.
    polled: Mutex<HashSet<String>>,
    /// This instance's last admissions, arrival against admission order.
    fairness: Mutex<FairnessWindow>,
    /// `[turnstile]`: newcomers pass a challenge before they get a place.
    turnstile: Option<Turnstile>,
}

/// Admissions kept for the fairness figures (each claim compares itself with all of them).
const FAIRNESS_WINDOW: usize = 1000;

#[derive(Debug)]
struct Effective {
    settings: Arc<RoomSettings>,
    /// Valid from when it was worked out until the next event boundary.
    from: Millis,
    until: Millis,
}

/// What the poll path needs to know of the whole room, refreshed every loop tick.
#[derive(Debug, Default)]
pub struct RoomView {
    pub admitted_total: u64,
    pub queued: u64,
    pub called: HashSet<String>,
}

/// An exact look-up at least this often per visitor (capped by half of `abandon_after`), so the
/// estimated position never drifts for long.
const EXACT_POLL_EVERY_MS: Millis = 120_000;

impl Gate {
    pub fn new(
        config: &Config,
        store: Arc<dyn Store>,
        clock: SharedClock,
    ) -> Result<Self, SignError> {
        Ok(Self {
            room_id: config.room_id.clone(),
            route: config.route.clone(),
            configured: ArcSwap::from_pointee(config.room.clone()),
            effective: ArcSwap::from_pointee(Effective {
                settings: Arc::new(config.room.clone()),
                from: Millis::MAX,
                until: Millis::MIN,
            }),
            recompute: Mutex::new(()),
            signer: Signer::new(&config.room_id, &config.pass.secret)?,
            pass_config: config.pass.clone(),
            on_store_error: config.store.on_error,
            ip_limits: config.rate_limit,
            store,
            clock,
            metrics: Metrics::new(&config.room_id),
            branding: config.branding.clone(),
            custom_page: config.custom_page.clone(),
            rate_bits: AtomicU64::new(f64::NAN.to_bits()),
            store_ok: AtomicBool::new(true),
            last_epoch: ArcSwap::from_pointee(String::new()),
            epoch_seen_at: AtomicI64::new(0),
            view: ArcSwap::from_pointee(RoomView::default()),
            polled: Mutex::new(HashSet::new()),
            fairness: Mutex::new(FairnessWindow::new(FAIRNESS_WINDOW)),
            turnstile: None,
        })
    }

    pub fn with_turnstile(mut self, turnstile: Turnstile) -> Self {
        self.turnstile = Some(turnstile);
        self
    }

    /// The settings in effect now (an event's overrides applied).
    pub fn settings(&self) -> Arc<RoomSettings> {
        let now = self.clock.now_ms();
        let current = self.effective.load();
        if now >= current.from && now < current.until {
            return current.settings.clone();
        }
        drop(current);
        let _one_at_a_time = self.recompute.lock().unwrap_or_else(|p| p.into_inner());
        let current = self.effective.load();
        if now >= current.from && now < current.until {
            return current.settings.clone();
        }
        self.work_out_effective(now)
    }

    /// The settings as configured, which the admin API patches and saves.
    pub fn configured_settings(&self) -> Arc<RoomSettings> {
        self.configured.load_full()
    }

    pub fn apply_settings(&self, settings: RoomSettings) {
        let _one_at_a_time = self.recompute.lock().unwrap_or_else(|p| p.into_inner());
        self.configured.store(Arc::new(settings));
        self.work_out_effective(self.clock.now_ms());
    }

    fn work_out_effective(&self, now: Millis) -> Arc<RoomSettings> {
        let (settings, until) = self.configured.load().at(now);
        let previous = self.effective.load();
        if previous.settings.event.as_ref().map(|e| (&e.name, e.phase))
            != settings.event.as_ref().map(|e| (&e.name, e.phase))
        {
            match &settings.event {
                Some(e) => log::info!("event {:?} now in its {:?} phase", e.name, e.phase),
                None => log::info!("no event governs the room now"),
            }
        }
        let gauge = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        self.metrics
            .capacity
            .set(gauge(settings.total_active_users));
        self.metrics
            .rate_per_minute
            .set(gauge(settings.new_users_per_minute));
        let admitting = settings.limits().admitting && !settings.suspended;
        self.metrics.admitting.set(i64::from(admitting));
        self.metrics
            .prequeueing
            .set(i64::from(settings.prequeueing()));
        let settings = Arc::new(settings);
        self.effective.store(Arc::new(Effective {
            settings: settings.clone(),
            from: now,
            until,
        }));
        settings
    }

    pub fn set_rate(&self, per_second: Option<f64>) {
        self.rate_bits
            .store(per_second.unwrap_or(f64::NAN).to_bits(), Ordering::Relaxed);
    }

    fn rate(&self) -> Option<f64> {
        let r = f64::from_bits(self.rate_bits.load(Ordering::Relaxed));
        (!r.is_nan()).then_some(r)
    }

    pub fn store_ok(&self) -> bool {
        self.store_ok.load(Ordering::Relaxed)
    }

    /// Records the outcome of a store call for /readyz and the metrics.
    pub fn note_store<T>(&self, result: &Result<T, StoreError>) {
        let ok = result.is_ok();
        if let Err(e) = result {
            self.metrics.store_errors.inc();
            log::warn!("store call failed: {e}");
        }
        self.store_ok.store(ok, Ordering::Relaxed);
        self.metrics.store_up.set(i64::from(ok));
    }

    pub fn set_view(&self, view: RoomView) {
        self.view.store(Arc::new(view));
    }

    /// The visitors to keep alive in the store, handed over to the admission loop.
    pub fn take_polled(&self) -> Vec<String> {
        let mut polled = self.polled.lock().unwrap_or_else(|p| p.into_inner());
        polled.drain().collect()
    }

    /// Gives back a batch the store could not take, so nobody is dropped for an outage.
    pub fn return_polled(&self, ids: Vec<String>) {
        let mut polled = self.polled.lock().unwrap_or_else(|p| p.into_inner());
        polled.extend(ids);
    }

    /// A poll answered from the ticket and the room view, when that is as good as asking the
    /// store: the visitor was seen recently in this epoch, is not called, and the store is up.
    /// Position = last exact position minus admissions since; only visitors who gave up ahead
    /// make it an over-estimate, corrected at the next exact look-up. In a pre-queue no place
    /// is shown and nobody is called, so every poll is answered here (a heartbeat); the first
    /// poll after the start is exact, since places seen before it were not final.
    fn estimated_position(
        &self,
        ticket: &Ticket,
        settings: &RoomSettings,
    ) -> Option<(Option<u64>, u64)> {
        let seen = ticket.seen;
        let now = self.clock.now_ms();
        let limits = settings.limits();
        let abandon_after = limits.abandon_after_ms;
        let exact_every = EXACT_POLL_EVERY_MS.min(abandon_after / 2);
        let view = self.view.load();
        let settled = now - self.epoch_seen_at.load(Ordering::Relaxed) >= abandon_after;
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
            && self.store_ok()
            && ticket.epoch == **self.last_epoch.load()
            && !view.called.contains(&ticket.id);
        if !fresh {
            return None;
        }
        self.polled
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(ticket.id.clone());
        if prequeue {
            return Some((None, view.queued));
        }
        let admitted_since = view.admitted_total.saturating_sub(seen.admitted_total);
        let position = seen.position.saturating_sub(admitted_since).max(1);
        Some((Some(position), view.queued.max(position)))
    }

    fn sighting(&self, position: u64) -> Sighting {
        Sighting {
            position,
            admitted_total: self.view.load().admitted_total,
            at: self.clock.now_ms(),
        }
    }

    /// Remembers the store's epoch (the admission loop refreshes it every tick).
    pub fn set_epoch(&self, epoch: &str) {
        if **self.last_epoch.load() != epoch {
            self.last_epoch.store(Arc::new(epoch.to_owned()));
            self.epoch_seen_at
                .store(self.clock.now_ms(), Ordering::Relaxed);
        }
    }

    /// The store's epoch for a new pass; asked of the store only before the loop has run.
    async fn epoch(&self) -> Arc<String> {
        let known = self.last_epoch.load_full();
        if !known.is_empty() {
            return known;
        }
        match self.store.epoch().await {
            Ok(epoch) => {
                self.set_epoch(&epoch);
                self.last_epoch.load_full()
            }
            Err(_) => known,
        }
    }

    pub fn branding(&self) -> &Branding {
        &self.branding
    }

    /// The token in the request's cookie, if any verifies.
    pub fn token(&self, req: &RequestView) -> Option<Token> {
        let raw = cookie_value(req.cookie?, &self.pass_config.cookie_name)?;
        self.signer.verify(raw, self.clock.now_ms())
    }

    /// The decision for a request on the public listener (reserved paths excluded).
    pub async fn decide(&self, req: &RequestView<'_>) -> Verdict {
        let verdict = self.decide_inner(req).await;
        self.metrics.request(verdict.outcome());
        verdict
    }

    async fn decide_inner(&self, req: &RequestView<'_>) -> Verdict {
        if !self.route.covers(req.host, req.path) {
            return Verdict::forward(Outcome::Unprotected);
        }
        let settings = self.settings();
        if settings.bypass.iter().any(|p| p.matches(req.path)) || bypassed(&settings, req) {
            return Verdict::forward(Outcome::Bypassed);
        }
        if settings.suspended {
            return Verdict::forward(Outcome::Unprotected);
        }
        match self.token(req) {
            Some(Token::Pass(pass)) if !self.store.is_revoked(&pass.id) => {
                self.holder(pass, &settings, req).await
            }
            Some(Token::Ticket(ticket)) => self.waiter(ticket, &settings, req).await,
            _ => {
                let now = self.clock.now_ms();
                self.newcomer(new_visitor_id(), None, now, &settings, req)
                    .await
            }
        }
    }

    /// A visitor with a valid pass: through, sliding the session now and then.
    async fn holder(&self, pass: Pass, settings: &RoomSettings, req: &RequestView<'_>) -> Verdict {
        let now = self.clock.now_ms();
        let session_ms = settings.limits().session_ms;
        let renew_after = session_ms / Millis::from(RENEW_AFTER_SHARE);
        let mut set_cookie = None;
        if !settings.disable_session_renewal && now - pass.renewed_at >= renew_after {
            let touched = self
                .store
                .touch_pass(&pass.id, &pass.epoch, &settings.limits())
                .await;
            self.note_store(&touched);
            match touched {
                Ok(Some(expires_at)) => {
                    let renewed = Pass {
                        renewed_at: now,
                        expires_at,
                        ..pass.clone()
                    };
                    set_cookie = self.pass_cookie(&renewed);
                }
                // The store ended this session (expired, or revoked elsewhere): start over.
                Ok(None) => {
                    return self
                        .newcomer(new_visitor_id(), None, now, settings, req)
                        .await;
                }
                // The pass verified locally: a store outage must not throw admitted visitors out.
                Err(_) => {}
            }
        }
        Verdict::Forward {
            outcome: Outcome::Passed,
            set_cookie,
            visitor: Some(pass.id),
        }
    }

    /// A visitor with a ticket: still waiting, or its turn has come.
    async fn waiter(
        &self,
        ticket: Ticket,
        settings: &RoomSettings,
        req: &RequestView<'_>,
    ) -> Verdict {
        match settings.queueing_method {
            QueueingMethod::Reject => return self.closed(settings, req),
            QueueingMethod::Passthrough => {
                // The room was switched to passthrough while this visitor waited.
                let left = self.store.leave_queue(&ticket.id).await;
                self.note_store(&left);
                let now = self.clock.now_ms();
                return self.newcomer(ticket.id, None, now, settings, req).await;
            }
            QueueingMethod::Fifo | QueueingMethod::Random | QueueingMethod::Lottery => {}
        }
        if ticket.epoch == PARKED_EPOCH {
            let (position, queued) = self.parked_place(&ticket);
            return self.waiting(settings, req, ticket, Some(position), queued);
        }
        if let Some((position, queued)) = self.estimated_position(&ticket, settings) {
            return self.waiting(settings, req, ticket, position, queued);
        }
        let polled = self.store.poll(&ticket.id, &settings.limits()).await;
        self.note_store(&polled);
        match polled {
            Ok(PollOutcome::Admitted {
                expires_at,
                called_at,
            }) => {
                if let Some(called_at) = called_at {
                    self.claimed(&ticket, called_at);
                }
                self.admitted(&ticket.id, &ticket.epoch, expires_at)
            }
            Ok(PollOutcome::Waiting { position, queued }) => {
                let ticket = Ticket {
                    seen: self.sighting(position),
                    ..ticket
                };
                self.waiting(settings, req, ticket, Some(position), queued)
            }
            Ok(PollOutcome::Unknown) => {
                let restore = TicketPlace {
                    place: ticket.place,
                    epoch: ticket.epoch.clone(),
                };
                let arrived_at = ticket.arrived_at;
                self.newcomer(ticket.id, Some(restore), arrived_at, settings, req)
                    .await
            }
            Err(_) => match self.on_store_error {
                OnStoreError::Open => Verdict::forward(Outcome::Unprotected),
                OnStoreError::Closed => self.waiting(settings, req, ticket, None, 0),
            },
        }
    }

    /// A visitor without a usable token (or whose place was lost): in at once when the room is
    /// open and nobody waits, else into the line.
    async fn newcomer(
        &self,
        id: String,
        restore: Option<TicketPlace>,
        arrived_at: Millis,
        settings: &RoomSettings,
        req: &RequestView<'_>,
    ) -> Verdict {
        let limits = settings.limits();
        match settings.queueing_method {
            QueueingMethod::Reject => return self.closed(settings, req),
            QueueingMethod::Passthrough => {
                let admitted = self.store.admit_unconditionally(&id, &limits).await;
                self.note_store(&admitted);
                return match admitted {
                    Ok(expires_at) => {
                        self.metrics.admitted.inc();
                        self.admitted(&id, &self.epoch().await, expires_at)
                    }
                    Err(_) => Verdict::forward(Outcome::Unprotected),
                };
            }
            QueueingMethod::Fifo | QueueingMethod::Random | QueueingMethod::Lottery => {}
        }
        // While a line waits (as of the loop's last look) a direct admission would be refused:
        // skip the store call and join. The store still decides atomically when the view is
        // stale the other way.
        let line_waits = self.view.load().queued > 0;
        if limits.admitting && !line_waits {
            let direct = self.store.admit_directly(&id, &limits).await;
            self.note_store(&direct);
            match direct {
                Ok(Some(expires_at)) => {
                    self.metrics.admitted.inc();
                    return self.admitted(&id, &self.epoch().await, expires_at);
                }
                Ok(None) => {}
                Err(_) => {
                    return self.store_unreachable(id, restore, arrived_at, settings, req);
                }
            }
        }
        // Cloudflare challenges on the waiting page only: a visitor let in at once never sees it,
        // and a ticket whose place was lost passed it already.
        if restore.is_none()
            && !req.turnstile_passed
            && let Some(turnstile) = &self.turnstile
        {
            return self.challenge(turnstile, settings, req);
        }
        // A returning ticket is no new place: only new ones count against the address.
        if restore.is_none() {
            match self.claim_ticket(&id, settings, req).await {
                Ok(None) => {}
                Ok(Some(refused)) => return refused,
                Err(_) => return self.store_unreachable(id, restore, arrived_at, settings, req),
            }
        }
        let joined = self.store.join(&id, restore.as_ref(), &limits).await;
        self.note_store(&joined);
        match joined {
            Ok(joined) => {
                self.set_epoch(&joined.epoch);
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
                self.waiting(settings, req, ticket, Some(joined.position), joined.queued)
            }
            Err(_) => self.store_unreachable(id, restore, arrived_at, settings, req),
        }
    }

    /// `[rate_limit]`: None when this new ticket may join the line, else the 429 that refuses
    /// it. A store error is the caller's to handle like a failed join (`on_error`), so an outage
    /// never refuses anyone for the limit.
    async fn claim_ticket(
        &self,
        id: &str,
        settings: &RoomSettings,
        req: &RequestView<'_>,
    ) -> Result<Option<Verdict>, StoreError> {
        let Some(ip) = req.client_ip.filter(|_| !self.ip_limits.is_off()) else {
            return Ok(None);
        };
        let claimed = self
            .store
            .claim_ticket(&limit_key(ip), id, &self.ip_limits)
            .await;
        self.note_store(&claimed);
        let (retry_after, reason, message) = match claimed? {
            IpClaim::Allowed => return Ok(None),
            IpClaim::TooFast { retry_after_ms } => {
                self.metrics.refused_too_fast.inc();
                let seconds = u64::try_from(retry_after_ms.max(1))
                    .unwrap_or(1)
                    .div_ceil(1000);
                (
                    seconds,
                    "rate",
                    "Many new visitors came from your network address in a short time.",
                )
            }
            // A place frees when a visitor from the address is let in or leaves: ask again at
            // the pace a waiting page polls.
            IpClaim::TooManyLive => {
                self.metrics.refused_too_many_live.inc();
                (
                    settings.refresh_interval.as_secs().max(1),
                    "live",
                    "Your network address already holds many places in line.",
                )
            }
        };
        Ok(Some(self.too_many_tickets(
            req,
            retry_after,
            reason,
            message,
        )))
    }

    /// 429 for a refused new ticket: JSON for JSON clients, else a short page that tries again
    /// by itself (a visitor behind a busy office NAT gets in once the address has room).
    fn too_many_tickets(
        &self,
        req: &RequestView<'_>,
        retry_after: u64,
        reason: &str,
        message: &str,
    ) -> Verdict {
        let reply = if req.wants_json() {
            Reply::json(
                429,
                &serde_json::json!({
                    "error": "too_many_tickets",
                    "reason": reason,
                    "retryAfterSeconds": retry_after,
                }),
            )
        } else {
            let message = format!("{message} This page tries again in {retry_after} seconds.");
            let view = ErrorView {
                branding: &self.branding,
                status: 429,
                heading: "Too many visitors from your network",
                message: &message,
            };
            match page::render_error(&view) {
                Ok(html) => Reply::html(429, html),
                Err(_) => Reply::text(429, message),
            }
            .with_header("refresh", retry_after.to_string())
        };
        Verdict::Respond {
            outcome: Outcome::Limited,
            reply: reply.with_header("retry-after", retry_after.to_string()),
        }
    }

    /// The store cannot be reached for a visitor who holds no pass.
    fn store_unreachable(
        &self,
        id: String,
        restore: Option<TicketPlace>,
        arrived_at: Millis,
        settings: &RoomSettings,
        req: &RequestView<'_>,
    ) -> Verdict {
        match self.on_store_error {
            OnStoreError::Open => Verdict::forward(Outcome::Unprotected),
            OnStoreError::Closed => {
                // A place from the arrival time, in an epoch no store has: when the store is
                // back, the ticket is put in line where its arrival time says.
                let ticket = Ticket {
                    id,
                    place: restore.map_or(self.clock.now_ms().saturating_mul(1000), |r| r.place),
                    epoch: "offline".into(),
                    arrived_at,
                    initial_position: 0,
                    seen: Sighting::default(),
                    expires_at: 0,
                };
                self.waiting(settings, req, ticket, None, 0)
            }
        }
    }

    /// A waiting visitor claims its admission: its wait, and where it came in the admission
    /// order against its arrival.
    fn claimed(&self, ticket: &Ticket, called_at: Millis) {
        self.metrics.admitted.inc();
        // Tickets from before `arrived_at` existed carry their arrival in their place.
        let arrived_at = if ticket.arrived_at > 0 {
            ticket.arrived_at
        } else {
            ticket.place / 1000
        };
        let waited = (self.clock.now_ms() - arrived_at).max(0);
        self.metrics.wait_seconds.observe(waited as f64 / 1000.0);
        let mut window = self.fairness.lock().unwrap_or_else(|p| p.into_inner());
        let compared = window.record(arrived_at, called_at);
        self.metrics.order_inversions.inc_by(compared.inversions);
        self.metrics.order_pairs.inc_by(compared.pairs);
        if let Some(tau) = window.tau() {
            self.metrics.order_tau.set(tau);
        }
    }

    fn admitted(&self, id: &str, epoch: &str, expires_at: Millis) -> Verdict {
        let now = self.clock.now_ms();
        let pass = Pass {
            id: id.to_owned(),
            epoch: epoch.to_owned(),
            admitted_at: now,
            renewed_at: now,
            expires_at,
        };
        Verdict::Forward {
            outcome: Outcome::Admitted,
            set_cookie: self.pass_cookie(&pass),
            visitor: Some(pass.id),
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
        match (settings.queueing_method, position) {
            (QueueingMethod::Random, _) => WaitEstimate::random(queued, self.rate()),
            (_, Some(position)) => WaitEstimate::fifo(position, self.rate()),
            (_, None) => WaitEstimate::Unknown,
        }
    }

    pub fn status_body(
        &self,
        settings: &RoomSettings,
        position: Option<u64>,
        queued: u64,
    ) -> StatusBody {
        let standing = Standing::Waiting {
            position,
            queued,
            estimate: self.estimate(settings, position, queued),
        };
        StatusBody::new(settings, standing, self.clock.now_ms())
    }

    fn waiting(
        &self,
        settings: &RoomSettings,
        req: &RequestView<'_>,
        mut ticket: Ticket,
        position: Option<u64>,
        queued: u64,
    ) -> Verdict {
        let now = self.clock.now_ms();
        let abandon_after = settings.limits().abandon_after_ms;
        // Signing costs a share of a poll: a ticket is signed again only when it changed (new,
        // or just looked up) or a tenth of its life has gone, like a pass's renewal.
        let issued_at = ticket.expires_at - abandon_after;
        let sign = ticket.seen.at == now || now - issued_at >= abandon_after / 10;
        ticket.expires_at = now + abandon_after;
        let refresh = settings.refresh_interval.as_secs().max(1);
        let estimate = self.estimate(settings, position, queued);
        let standing = Standing::Waiting {
            position,
            queued,
            estimate,
        };
        let body = StatusBody::new(settings, standing, now);
        // In a pre-queue a place means nothing until the start (and a shuffled one is drawn).
        let shown_position = match settings.queueing_method {
            QueueingMethod::Random => None,
            _ if settings.prequeueing() => None,
            _ => position,
        };
        let event = settings.event.as_ref();
        let mut reply = self.page(settings, req, &body, shown_position, |locale| {
            page::render_waiting(&WaitingView {
                branding: &self.branding,
                locale,
                room_name: &settings.name,
                position: shown_position,
                queued,
                initial_position: (ticket.initial_position > 0).then_some(ticket.initial_position),
                estimate,
                last_updated: rfc3339_ms(now),
                refresh_interval_seconds: refresh,
                status_url: STATUS_PATH,
                countdown: event.filter(|_| settings.prequeueing()).map(|e| Countdown {
                    starts_at: e.times.start_ms,
                    now,
                    shuffled: e.shuffle_at_event_start,
                }),
                heading: event.and_then(|e| e.heading.as_deref()),
                message: event.and_then(|e| e.message.as_deref()),
            })
        });
        reply = reply.with_header("refresh", refresh.to_string());
        if sign && let Some(cookie) = self.ticket_cookie(&ticket, settings) {
            reply = reply.with_header("set-cookie", cookie);
        }
        Verdict::Respond {
            outcome: Outcome::Queued,
            reply,
        }
    }

    fn closed(&self, settings: &RoomSettings, req: &RequestView<'_>) -> Verdict {
        let body = StatusBody::new(settings, Standing::Closed, self.clock.now_ms());
        // Cloudflare renders the custom page for a reject queue too (isRejectQueue).
        let reply = self.page(settings, req, &body, None, |locale| {
            page::render_closed(&ClosedView {
                branding: &self.branding,
                locale,
                room_name: &settings.name,
            })
        });
        Verdict::Respond {
            outcome: Outcome::Rejected,
            reply,
        }
    }

    /// A waiting-room answer in the form the visitor asked for: Cloudflare's JSON, the operator's
    /// template, or the built-in page in the visitor's language.
    fn page(
        &self,
        settings: &RoomSettings,
        req: &RequestView<'_>,
        body: &StatusBody,
        shown_position: Option<u64>,
        builtin: impl FnOnce(Locale) -> Result<String, askama::Error>,
    ) -> Reply {
        let status = settings.queueing_status_code;
        if req.wants_json() {
            return Reply::json(status, body);
        }
        if let Some(custom) = &self.custom_page {
            let variables = PageVariables::new(body, shown_position, &settings.name);
            return Reply::html(status, custom.render(&variables));
        }
        let locale = self.branding.language.locale_for(req.accept_language);
        match builtin(locale) {
            Ok(html) => self.in_language(Reply::html(status, html), locale),
            Err(e) => Reply::text(500, format!("cannot render the page: {e}\n")),
        }
    }

    /// Says which language a built-in page is in, and that it depends on Accept-Language when
    /// the language is the visitor's.
    fn in_language(&self, reply: Reply, locale: Locale) -> Reply {
        let reply = reply.with_header("content-language", locale.tag());
        match self.branding.language {
            PageLanguage::Auto => reply.with_header("vary", "Accept-Language"),
            PageLanguage::Fixed(_) => reply,
        }
    }

    fn cookie(&self, value: &str, max_age_secs: i64) -> String {
        let c = &self.pass_config;
        format!(
            "{}={value}; Path=/; Max-Age={max_age_secs}; HttpOnly; SameSite={}{}",
            c.cookie_name,
            c.cookie_samesite.as_str(),
            if c.cookie_secure { "; Secure" } else { "" }
        )
    }

    /// A Set-Cookie value that deletes the visitor's cookie.
    pub fn clearing_cookie(&self) -> String {
        self.cookie("", 0)
    }

    fn pass_cookie(&self, pass: &Pass) -> Option<String> {
        let raw = self
            .signer
            .sign_pass(pass)
            .map_err(|e| log::error!("{e}"))
            .ok()?;
        let max_age = (pass.expires_at - self.clock.now_ms()).max(0) / 1000 + 1;
        Some(self.cookie(&raw, max_age))
    }

    fn ticket_cookie(&self, ticket: &Ticket, settings: &RoomSettings) -> Option<String> {
        let raw = self
            .signer
            .sign_ticket(ticket)
            .map_err(|e| log::error!("{e}"))
            .ok()?;
        Some(self.cookie(&raw, settings.abandon_after.as_secs().max(1) as i64))
    }

    /// `POST /__waitroom/leave`: give up the place or end the pass.
    pub async fn leave(&self, req: &RequestView<'_>) -> Reply {
        let settings = self.settings();
        let result = match self.token(req) {
            Some(Token::Ticket(t)) => self.store.leave_queue(&t.id).await,
            Some(Token::Pass(p)) => self.end_pass(&p.id, &settings).await,
            None => Ok(false),
        };
        self.note_store(&result);
        match result {
            Ok(left) => Reply::json(200, &serde_json::json!({ "left": left }))
                .with_header("set-cookie", self.clearing_cookie()),
            Err(e) => Reply::json(
                503,
                &serde_json::json!({ "left": false, "error": e.to_string() }),
            ),
        }
    }

    /// Ends a pass (leave, origin revoke, admin revoke).
    pub async fn end_pass(&self, id: &str, settings: &RoomSettings) -> Result<bool, StoreError> {
        let ended = self.store.end_pass(id, &settings.limits()).await?;
        if ended {
            self.metrics.revoked.inc();
        }
        Ok(ended)
    }

    /// For the events stream: the visitor's status now, and whether the stream is done. The
    /// stream cannot set cookies, so an admitted visitor is told to reload, and that request
    /// collects the pass.
    pub async fn watch(&self, req: &RequestView<'_>) -> (StatusBody, bool) {
        let settings = self.settings();
        let now = self.clock.now_ms();
        // A room switched live while the visitor waits: end the stream, the page reloads into
        // what it now gets.
        if settings.suspended || settings.queueing_method == QueueingMethod::Passthrough {
            return (StatusBody::new(&settings, Standing::Gone, now), true);
        }
        if settings.queueing_method == QueueingMethod::Reject {
            return (StatusBody::new(&settings, Standing::Closed, now), true);
        }
        let standing = match self.token(req) {
            Some(Token::Pass(p)) if !self.store.is_revoked(&p.id) => Standing::Admitted,
            Some(Token::Ticket(t)) => {
                if t.epoch == PARKED_EPOCH {
                    let (position, queued) = self.parked_place(&t);
                    return (self.status_body(&settings, Some(position), queued), false);
                }
                if let Some((position, queued)) = self.estimated_position(&t, &settings) {
                    return (self.status_body(&settings, position, queued), false);
                }
                let polled = self.store.poll(&t.id, &settings.limits()).await;
                self.note_store(&polled);
                match polled {
                    Ok(PollOutcome::Waiting { position, queued }) => {
                        return (self.status_body(&settings, Some(position), queued), false);
                    }
                    Ok(PollOutcome::Admitted { called_at, .. }) => {
                        if let Some(called_at) = called_at {
                            self.claimed(&t, called_at);
                        }
                        Standing::Admitted
                    }
                    Ok(PollOutcome::Unknown) => Standing::Gone,
                    Err(_) => return (self.status_body(&settings, None, 0), false),
                }
            }
            _ => Standing::Gone,
        };
        (StatusBody::new(&settings, standing, now), true)
    }

    /// `GET /__waitroom/status`: the JSON status for any visitor, admitting it when its turn has
    /// come (the pass cookie comes with the answer).
    pub async fn status(&self, req: &RequestView<'_>) -> Reply {
        let protected = RequestView {
            accept: Some("application/json"),
            path: self.route.path.as_str(),
            ..*req
        };
        let verdict = self.decide(&protected).await;
        self.status_reply(verdict)
    }

    /// A verdict as the JSON status: the answer itself, or "admitted" with the pass cookie.
    fn status_reply(&self, verdict: Verdict) -> Reply {
        match verdict {
            Verdict::Respond { reply, .. } => reply,
            Verdict::Forward { set_cookie, .. } => {
                let body =
                    StatusBody::new(&self.settings(), Standing::Admitted, self.clock.now_ms());
                let reply = Reply::json(200, &body);
                match set_cookie {
                    Some(cookie) => reply.with_header("set-cookie", cookie),
                    None => reply,
                }
            }
        }
    }
}

/// Turnstile: the challenge instead of a place, the answer to it, and parked visitors.
impl Gate {
    /// The waiting page (or JSON) with the widget and no place: nothing is stored for it.
    fn challenge(
        &self,
        turnstile: &Turnstile,
        settings: &RoomSettings,
        req: &RequestView<'_>,
    ) -> Verdict {
        let queued = self.view.load().queued;
        // No place yet, but what the back of the line waits is worth knowing.
        let standing = Standing::Waiting {
            position: None,
            queued,
            estimate: self.estimate(settings, Some(queued + 1), queued + 1),
        };
        let mut body = StatusBody::new(settings, standing, self.clock.now_ms());
        let challenge = turnstile.challenge();
        let widget = challenge.widget.clone();
        body.waitroom.challenge = Some(challenge);
        let reply = self.page(settings, req, &body, None, |locale| {
            page::render_challenge(&ChallengeView {
                branding: &self.branding,
                locale,
                room_name: &settings.name,
                widget: &widget,
            })
        });
        Verdict::Respond {
            outcome: Outcome::Challenged,
            reply,
        }
    }

    /// `POST /__waitroom/turnstile`: verifies the widget's token with siteverify, then puts the
    /// visitor in line (the answer sets the ticket, or the pass when the room has space), parks
    /// it, or asks for the challenge again. `form` is the request body.
    pub async fn answer_challenge(&self, req: &RequestView<'_>, form: &[u8]) -> Reply {
        let Some(turnstile) = &self.turnstile else {
            return Reply::text(404, "no such waiting-room endpoint\n");
        };
        // A second answer (another tab, a double submit) is not worth a siteverify call: the
        // visitor's place or pass answers. A revoked pass is no pass: that visitor starts over.
        let holds_place = match self.token(req) {
            Some(Token::Ticket(_)) => true,
            Some(Token::Pass(pass)) => !self.store.is_revoked(&pass.id),
            None => false,
        };
        if holds_place {
            return self.status(req).await;
        }
        let token = match turnstile::token_from_form(form) {
            Ok(token) => token,
            Err(e) => {
                self.metrics.challenge(ChallengeResult::Malformed);
                return Reply::json(400, &serde_json::json!({ "error": e.to_string() }));
            }
        };
        match turnstile.verify(&token, req.client_ip).await {
            Verification::Passed => self.metrics.challenge(ChallengeResult::Passed),
            Verification::Failed { codes } => {
                self.metrics.challenge(ChallengeResult::Failed);
                log::info!("turnstile: challenge failed ({})", codes.join(", "));
                if turnstile.action == TurnstileAction::InfiniteQueue {
                    return self.park(req);
                }
            }
            Verification::Unreachable(e) => {
                self.metrics.challenge(ChallengeResult::Unreachable);
                log::warn!("turnstile: {e}");
                if turnstile.on_unreachable == OnUnreachable::Retry {
                    return Reply::json(
                        503,
                        &serde_json::json!({ "error": "the challenge cannot be checked now: try again" }),
                    );
                }
            }
        }
        let passed = RequestView {
            turnstile_passed: true,
            ..*req
        };
        self.status(&passed).await
    }

    /// A failed challenge under `infinite_queue`: a ticket at the back of the line as the loop
    /// last saw it, in no store, answered like any waiting visitor's.
    fn park(&self, req: &RequestView<'_>) -> Reply {
        let settings = self.settings();
        let view = self.view.load();
        let now = self.clock.now_ms();
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
        self.metrics.turnstile_parked.inc();
        let json = RequestView {
            accept: Some("application/json"),
            ..*req
        };
        self.status_reply(self.waiting(&settings, &json, ticket, Some(position), position))
    }

    /// A parked visitor's place and line length, from the room view: never its turn.
    fn parked_place(&self, ticket: &Ticket) -> (u64, u64) {
        let view = self.view.load();
        let position = turnstile::parked_position(ticket.seen, view.admitted_total);
        (position, view.queued.max(position))
    }
}

/// Staff, monitoring, offices and verified search crawlers skip the room by address, header or
/// cookie (not counted).
fn bypassed(settings: &RoomSettings, req: &RequestView<'_>) -> bool {
    let crawler = || {
        let user_agent = req
            .headers
            .and_then(|h| h.get(http::header::USER_AGENT))
            .and_then(|v| v.to_str().ok());
        crawler::verified(user_agent, req.client_ip, &settings.crawler_ranges).is_some()
    };
    (settings.bypass_verified_crawlers && crawler())
        || req
            .client_ip
            .is_some_and(|ip| settings.bypass_ips.iter().any(|c| c.contains(ip)))
        || req
            .headers
            .is_some_and(|h| settings.bypass_headers.iter().any(|r| r.matches(h)))
        || req.cookie.is_some_and(|c| {
            settings
                .bypass_cookies
                .iter()
                .any(|rule| cookie_value(c, &rule.name).is_some_and(|v| rule.matches(v)))
        })
}

/// The value of one cookie in a Cookie header, without allocating.
pub fn cookie_value<'a>(header: &'a str, name: &str) -> Option<&'a str> {
    header.split(';').find_map(|pair| {
        let (k, v) = pair.trim().split_once('=')?;
        (k == name).then_some(v.trim_matches('"'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_only_for_the_exact_accept_or_the_query_flag() {
        let req = |accept: Option<&'static str>, query: Option<&'static str>| RequestView {
            accept,
            query,
            path: "/",
            ..Default::default()
        };
        assert!(req(Some("application/json"), None).wants_json());
        assert!(!req(Some("application/json, text/html"), None).wants_json());
        assert!(!req(Some("text/html"), None).wants_json());
        assert!(req(None, Some("a=1&waitingroom_json=1")).wants_json());
        assert!(!req(None, Some("waitingroom_json=0")).wants_json());
    }

    #[test]
    fn finds_one_cookie_among_many() {
        assert_eq!(
            cookie_value("a=1; waitroom=tok; b=2", "waitroom"),
            Some("tok")
        );
        assert_eq!(cookie_value("waitroomx=1", "waitroom"), None);
        assert_eq!(cookie_value("garbage", "waitroom"), None);
    }
}
