//! The Pingora layer: reads the canonical request once, asks the gate, sends the reply or
//! forwards exactly what the gate decided on, adds the pass cookie to the origin's answer,
//! carries out the origin's revoke command and answers for a failed origin.
//!
//! Hooks, in the order Pingora runs them for one request: `early_request_filter` (the
//! connection's settings: keep-alive, pipelining; its head is read) → `request_filter` (every
//! request: decide, answer or let through) → `upstream_peer` (forwarded only) → `upstream_request_filter`
//! (the canonical target and Host, X-Forwarded-*) → `response_filter` (the origin's header:
//! cookies, the revoke command) → `logging` (once, after the response or the failure).
//! `fail_to_proxy` runs instead of the response when the origin failed.
//!
//! Connections are accepted by the front door (`connections`), which counts them and closes
//! slow heads and, when full, idle keep-alive connections.

mod access;
mod body;
mod connections;
mod events;
mod failure;
mod forward;
pub mod origin;
mod parked;
mod reserved;

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use pingora::prelude::HttpPeer;
use pingora_core::{Error, ErrorSource, ErrorType};
use pingora_http::{RequestHeader, ResponseHeader};
use pingora_proxy::{FailToProxy, ProxyHttp, Session};

pub use connections::{ConnectionLimits, ConnectionStats, Connections, FrontDoor};
pub use events::{STREAMS_PER_VISITOR, StreamBudget};

use crate::config::model::OriginConfig;
use crate::core::autopilot::Exchange;
use crate::core::body_pace::{BodyPace, PaceRule};
use crate::gate::{Decision, Gate};
use crate::observe::Outcome;
use crate::request::authority::Authority;
use crate::request::client::{Cidr, ClientAddress, client_ip};
use crate::request::route::Routes;
use crate::request::view::{Canonical, Head, Request, Sites};
use crate::respond::Responder;
use crate::respond::reply::Reply;
use crate::room::Room;
use access::{AccessLine, http_version};
use origin::OriginAddresses;

/// Larger request headers are refused with 431 before any work is done.
const MAX_HEADER_VALUE: usize = 16 * 1024;
const MAX_HEADERS_TOTAL: usize = 64 * 1024;

/// What the public listener needs of one room.
pub struct Front {
    /// The room's shared state: its metrics, the pulse its streams wait on, the autopilot's
    /// recorder of origin exchanges.
    pub room: Arc<Room>,
    pub gate: Arc<Gate>,
    pub responder: Arc<Responder>,
}

pub struct WaitroomProxy {
    /// The rooms, in the config's order; `routes` says which a request belongs to.
    fronts: Vec<Front>,
    routes: Routes,
    sites: Sites,
    origin: OriginConfig,
    /// `origin.address` as last looked up, off the request path.
    addresses: Arc<OriginAddresses>,
    access_log: bool,
    trusted_proxies: Vec<Cidr>,
    /// `listen.country_header`: read only from a trusted proxy.
    country_header: Option<String>,
    /// The listener speaks TLS: what `X-Forwarded-Proto` says.
    tls: bool,
    streams: StreamBudget,
    /// `listen.keepalive_timeout` in whole seconds (Pingora's unit), at least 1.
    keepalive_secs: u64,
    /// `listen.body_timeout`: the longest silence between two reads of a request body.
    body_timeout: std::time::Duration,
    /// `listen.min_body_rate`, with `body_timeout` as its grace.
    min_body_pace: Option<PaceRule>,
    /// `rate_limit.ipv6_prefix`: how per-address budgets count IPv6 clients.
    ipv6_prefix: u8,
    /// A room is members-only (`[entry]`): `wr_entry` is taken off what is forwarded.
    members_only: bool,
}

/// What the access line says was decided for a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Logged {
    /// Not decided yet: the request failed before a decision (a head Pingora refused).
    Undecided,
    /// The gate's outcome, or `unprotected` for a request no room covers.
    Gate(Outcome),
    /// The proxy's own paths (`/__waitroom/...`).
    Reserved,
    /// Refused before any decision: a target or host read more than one way, oversized headers.
    Refused,
}

impl Logged {
    fn label(self) -> &'static str {
        match self {
            Logged::Undecided => "-",
            Logged::Gate(outcome) => outcome.label(),
            Logged::Reserved => "reserved",
            Logged::Refused => "refused",
        }
    }
}

#[derive(Debug)]
pub struct RequestCtx {
    started: Instant,
    decision: Logged,
    /// What is forwarded, when it differs from what came.
    target: Option<String>,
    /// The request may open a tunnel (`Upgrade`): a pass holder on a protected path, or a path
    /// of a room's `websocket_paths`. Anything else reaches the origin without its `Upgrade`,
    /// and a 101 the origin answers anyway is refused (`forward::refuse_tunnel`).
    upgrade_allowed: bool,
    host: Option<String>,
    /// The pass cookie for the origin's answer.
    set_cookie: Option<String>,
    /// The pass the origin may revoke, when the gate looked at it.
    holder: Option<String>,
    /// The room the request belongs to (an index of `fronts`), if any covers it.
    room: Option<usize>,
    origin_started: Option<Instant>,
    origin_status: Option<u16>,
    /// An admitted request the autopilot watches (its room's autopilot is on and the path is
    /// not excluded): its origin exchange is recorded once, then this goes back to false.
    watched: bool,
    /// A pass holder's or a newly admitted visitor's request: what the origin answers is for
    /// this visitor alone (`origin.protected_responses`).
    protected: bool,
    /// This request's turn through the origin's addresses (`OriginAddresses::turn`), and how
    /// many it tried: a connection refused by one address is retried on the next.
    origin_turn: Option<usize>,
    origin_tries: usize,
    /// Counted in `waitroom_origin_inflight` from choosing the origin to its response header
    /// (or the failure, or the end of the request, whichever comes first).
    in_flight: Option<InFlight>,
    /// How fast this request's body arrives (`listen.min_body_rate`), timed from `started`.
    body_pace: Option<BodyPace>,
}

/// One request in `waitroom_origin_inflight` until dropped: a guard, so that no path out of a
/// request (a visitor gone mid-way, a retry choosing the origin again) leaves it counted.
pub(crate) struct InFlight(prometheus::IntGauge);

impl InFlight {
    fn new(gauge: &prometheus::IntGauge) -> Self {
        gauge.inc();
        Self(gauge.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.dec();
    }
}

impl std::fmt::Debug for InFlight {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("InFlight")
    }
}

pub struct ProxySettings {
    pub routes: Routes,
    pub sites: Sites,
    pub origin: OriginConfig,
    pub addresses: Arc<OriginAddresses>,
    pub access_log: bool,
    pub trusted_proxies: Vec<Cidr>,
    pub country_header: Option<String>,
    pub tls: bool,
    pub max_event_streams: usize,
    /// `listen.max_event_streams_per_ip`, if limited.
    pub max_event_streams_per_ip: Option<usize>,
    /// How long an idle keep-alive connection is kept (`listen.keepalive_timeout`).
    pub keepalive_timeout: std::time::Duration,
    pub body_timeout: std::time::Duration,
    pub min_body_pace: Option<PaceRule>,
    pub ipv6_prefix: u8,
}

impl WaitroomProxy {
    pub fn new(fronts: Vec<Front>, settings: ProxySettings) -> Self {
        Self {
            members_only: fronts.iter().any(|f| f.gate.members_only()),
            fronts,
            routes: settings.routes,
            sites: settings.sites,
            origin: settings.origin,
            addresses: settings.addresses,
            access_log: settings.access_log,
            trusted_proxies: settings.trusted_proxies,
            country_header: settings.country_header,
            tls: settings.tls,
            streams: StreamBudget::new(
                settings.max_event_streams,
                settings.max_event_streams_per_ip,
            ),
            keepalive_secs: whole_seconds(settings.keepalive_timeout),
            body_timeout: settings.body_timeout,
            min_body_pace: settings.min_body_pace,
            ipv6_prefix: settings.ipv6_prefix,
        }
    }

    /// The visitor's address: the peer's, or X-Forwarded-For's when the peer is a trusted proxy.
    fn client_ip(&self, session: &Session) -> Option<ClientAddress> {
        let peer = session.client_addr()?.as_inet()?.ip();
        Some(self.client_of(peer, &session.req_header().headers))
    }

    fn client_of(&self, peer: IpAddr, headers: &http::HeaderMap) -> ClientAddress {
        let forwarded = headers
            .get_all(&forward::X_FORWARDED_FOR)
            .iter()
            .map(|v| v.as_bytes());
        client_ip(peer, forwarded, &self.trusted_proxies)
    }

    fn is_trusted(&self, ip: IpAddr) -> bool {
        self.trusted_proxies.iter().any(|c| c.contains(ip))
    }

    /// Whether the peer itself is a trusted proxy, whose country header is believed.
    fn peer_trusted(&self, session: &Session) -> bool {
        session
            .client_addr()
            .and_then(|a| a.as_inet())
            .is_some_and(|a| self.is_trusted(a.ip()))
    }

    /// Notes what goes to the origin: the canonical request, whatever was decided, not the
    /// client's spelling of it.
    fn forwarding(&self, ctx: &mut RequestCtx, req: &RequestHeader, canonical: &Canonical<'_>) {
        ctx.target = canonical.target.rewritten().map(str::to_owned);
        // An entry token on a path the room does not hold (a bypassed one) still never reaches
        // the origin: the protected ones were redirected without it.
        let query = canonical.target.query();
        if self.members_only && crate::entry::token_in(query).is_some() {
            ctx.target = Some(crate::entry::without_token(canonical.target.path(), query));
        }
        if self.origin.host_header.is_none() {
            ctx.host = host_to_forward(req, canonical.host.as_ref());
        }
    }

    /// The room a reserved path speaks for: the one its `?room=` names, the only one, or the
    /// one covering the host's root.
    fn reserved_room(&self, canonical: &Canonical<'_>) -> Option<usize> {
        let named = canonical.target.query().and_then(|q| {
            form_urlencoded::parse(q.as_bytes())
                .find(|(k, _)| k == "room")
                .map(|(_, v)| v.into_owned())
        });
        match named {
            Some(id) => self.fronts.iter().position(|f| f.room.id == id),
            None if self.fronts.len() == 1 => Some(0),
            None => self
                .routes
                .room_for(canonical.host.as_ref().map(Authority::host), "/"),
        }
    }

    /// The autopilot's record of an admitted request's exchange with the origin (once).
    fn record_exchange(&self, ctx: &mut RequestCtx, exchange: Exchange) {
        if !std::mem::take(&mut ctx.watched) {
            return;
        }
        if let Some(front) = ctx.room.and_then(|i| self.fronts.get(i)) {
            front.room.pilot.record(exchange);
        }
    }

    /// The room a request's network-level figures are counted in (refused upgrades, body
    /// timeouts, unreadable client addresses): its own, or the first room.
    fn counting_room(&self, ctx: &RequestCtx) -> Option<&Front> {
        ctx.room
            .and_then(|i| self.fronts.get(i))
            .or(self.fronts.first())
    }

    /// A path outside every room may upgrade when a room on its host lists it in
    /// `websocket_paths`: a shop whose room covers `/drop` keeps its WebSocket at `/ws`.
    fn websocket_path_outside_rooms(&self, host: Option<&str>, path: &str) -> bool {
        self.routes.rooms_on(host).any(|i| {
            self.fronts.get(i).is_some_and(|front| {
                let settings = front.gate.settings();
                settings.websocket_paths.iter().any(|p| p.matches(path))
            })
        })
    }

    fn count_unparsed(&self, ctx: &RequestCtx, unparsed: bool) {
        if unparsed && let Some(front) = self.counting_room(ctx) {
            front.room.metrics.client_address_unparsed.inc();
        }
    }

    /// The room whose figures and pages an origin exchange belongs to: the request's room, or
    /// the only room (which then counts the whole origin, as before there were several).
    fn origin_room(&self, ctx: &RequestCtx) -> Option<&Front> {
        match ctx.room {
            Some(i) => self.fronts.get(i),
            None if self.fronts.len() == 1 => self.fronts.first(),
            None => None,
        }
    }
}

/// Pingora counts keep-alive in whole seconds, and 0 would mean for ever: a part second is
/// rounded up, never down.
fn whole_seconds(d: std::time::Duration) -> u64 {
    (d.as_secs() + u64::from(d.subsec_nanos() > 0)).max(1)
}

/// A visitor who closed the page or the connection: nobody to answer, and not an error.
pub(super) fn visitor_went_away(e: &Error) -> bool {
    e.esource() != &ErrorSource::Upstream
        && matches!(
            e.etype(),
            ErrorType::ReadError | ErrorType::WriteError | ErrorType::ConnectionClosed
        )
}

fn oversized(req: &RequestHeader) -> bool {
    let mut total = 0;
    for (name, value) in &req.headers {
        let len = name.as_str().len() + value.len();
        if len > MAX_HEADER_VALUE {
            return true;
        }
        total += len;
    }
    total > MAX_HEADERS_TOTAL
}

/// The parts of the request head that name what it asks for. More than two Host lines are as
/// refused as two: only the first two are looked at.
fn head<'a>(req: &'a RequestHeader, host_lines: &'a mut [&'a [u8]; 2]) -> Head<'a> {
    let mut count = 0;
    for (slot, line) in host_lines
        .iter_mut()
        .zip(req.headers.get_all(http::header::HOST))
    {
        *slot = line.as_bytes();
        count += 1;
    }
    let h2 = req.version == http::Version::HTTP_2;
    Head {
        method: &req.method,
        target: req.raw_path(),
        host_lines: &host_lines[..count],
        authority: h2
            .then(|| req.uri.authority().map(|a| a.as_str().as_bytes()))
            .flatten(),
        needs_host: req.version >= http::Version::HTTP_11,
    }
}

/// The Host line to send the origin when it is not what the client sent: an HTTP/2 request
/// (the origin gets its `:authority`), or a spelling other than the canonical one.
fn host_to_forward(req: &RequestHeader, host: Option<&Authority<'_>>) -> Option<String> {
    let host = host?;
    let sent = req.headers.get(http::header::HOST).map(|v| v.as_bytes());
    let same =
        req.version != http::Version::HTTP_2 && sent.is_some_and(|sent| spelled_as(host, sent));
    (!same).then(|| host.to_host_header())
}

/// Whether `raw` is exactly the canonical spelling of `host`, without building it.
fn spelled_as(host: &Authority<'_>, raw: &[u8]) -> bool {
    let name = host.host().as_bytes();
    match host.port() {
        None => raw == name,
        Some(port) => {
            raw.len() > name.len()
                && raw.starts_with(name)
                && raw[name.len()] == b':'
                && raw[name.len() + 1..] == *port.to_string().as_bytes()
        }
    }
}

/// The proxy as Pingora runs it: its hooks, over the state it shares with the front door (which
/// serves event streams itself, `parked`).
pub struct Hooks(Arc<WaitroomProxy>);

impl Hooks {
    pub fn new(proxy: Arc<WaitroomProxy>) -> Self {
        Self(proxy)
    }
}

impl std::ops::Deref for Hooks {
    type Target = WaitroomProxy;

    fn deref(&self) -> &WaitroomProxy {
        &self.0
    }
}

#[async_trait]
impl ProxyHttp for Hooks {
    type CTX = RequestCtx;

    fn new_ctx(&self) -> Self::CTX {
        RequestCtx {
            started: Instant::now(),
            decision: Logged::Undecided,
            target: None,
            upgrade_allowed: false,
            host: None,
            set_cookie: None,
            holder: None,
            room: None,
            origin_started: None,
            origin_status: None,
            watched: false,
            protected: false,
            origin_turn: None,
            origin_tries: 0,
            in_flight: None,
            body_pace: self.min_body_pace.map(BodyPace::new),
        }
    }

    /// Runs first, as soon as the head is read: the connection's settings.
    async fn early_request_filter(
        &self,
        session: &mut Session,
        _ctx: &mut Self::CTX,
    ) -> pingora::Result<()>
    where
        Self::CTX: Send + Sync,
    {
        connections::head_read(session);
        // Pingora's read timeout bounds each read of a request body (the gap between two
        // pieces), not the head (the front door's `header_timeout`) nor the wait for the next
        // request (keep-alive). Set per request: a reused connection starts from Pingora's 60 s.
        session.set_read_timeout(Some(self.body_timeout));
        // Requests a client sends before reading the answers are answered one after the other,
        // each through the gate like the first (RFC 9112 9.3.2). Without this, Pingora answers
        // the first and closes the connection on the rest.
        session.set_pipelining_enabled(true);
        // Pingora keeps an HTTP/1.1 connection for ever unless told; a client that asked for a
        // close (or HTTP/1.0 without keep-alive) is left as it asked.
        if session.get_keepalive().is_some() {
            session.set_keepalive(Some(self.keepalive_secs));
        }
        Ok(())
    }

    /// Runs first for every request: refuses what cannot be read one way only, answers reserved
    /// paths and visitors who must wait; lets the rest through to `upstream_peer` (returns
    /// false) with the canonical target and Host noted for `upstream_request_filter`.
    async fn request_filter(
        &self,
        session: &mut Session,
        ctx: &mut Self::CTX,
    ) -> pingora::Result<bool> {
        if oversized(session.req_header()) {
            ctx.decision = Logged::Refused;
            session.set_keepalive(None);
            Reply::text(431, "request header fields too large\n")
                .send(session, false)
                .await?;
            return Ok(true);
        }
        let client = self.client_ip(session);
        let client_ip = client.and_then(ClientAddress::ip);
        let unparsed = client == Some(ClientAddress::Unparsed);
        let req = session.req_header();
        let head_only = req.method == http::Method::HEAD;
        let mut host_lines = [&[][..]; 2];
        let canonical = match Canonical::read(head(req, &mut host_lines), &self.sites) {
            Ok(canonical) => canonical,
            Err(refusal) => {
                ctx.decision = Logged::Refused;
                log::debug!(
                    "refused {:?}: {refusal}",
                    String::from_utf8_lossy(req.raw_path())
                );
                // What follows on the connection may be framed the way the refused head was.
                session.set_keepalive(None);
                Reply::text(refusal.status(), format!("{refusal}\n"))
                    .send(session, head_only)
                    .await?;
                return Ok(true);
            }
        };
        if let Some(reserved) = canonical.reserved() {
            ctx.decision = Logged::Reserved;
            let Some(room) = self.reserved_room(&canonical) else {
                Reply::text(404, "no such room: name it with ?room=\n")
                    .send(session, head_only)
                    .await?;
                return Ok(true);
            };
            ctx.room = Some(room);
            self.count_unparsed(ctx, unparsed);
            let canonical = canonical.into_owned();
            self.own_path(session, ctx, room, reserved, canonical, client)
                .await?;
            return Ok(true);
        }
        let room = self.routes.room_for(
            canonical.host.as_ref().map(Authority::host),
            canonical.target.match_path(),
        );
        ctx.room = room;
        self.count_unparsed(ctx, unparsed);
        let Some(front) = room.and_then(|i| self.fronts.get(i)) else {
            ctx.decision = Logged::Gate(Outcome::Unprotected);
            ctx.upgrade_allowed = req.headers.contains_key(http::header::UPGRADE)
                && self.websocket_path_outside_rooms(
                    canonical.host.as_ref().map(Authority::host),
                    canonical.target.match_path(),
                );
            self.forwarding(ctx, req, &canonical);
            return Ok(false);
        };
        let request = Request::new(&canonical, &req.headers, client_ip)
            .with_unparsed_client(unparsed)
            .with_method(&req.method)
            .with_country_from(self.country_header.as_deref(), self.peer_trusted(session));
        let decided = front.gate.decide(&request).await;
        ctx.decision = Logged::Gate(decided.decision.outcome());
        let reply = match &decided.decision {
            Decision::Forward(forward) => {
                // The autopilot judges the origin by what admitted visitors get: not bypassed
                // paths, not excluded ones (matched like bypass, on the canonical path).
                ctx.protected = matches!(forward.outcome, Outcome::Passed | Outcome::Admitted);
                ctx.watched = ctx.protected && front.room.pilot.watches(request.path);
                ctx.upgrade_allowed = ctx.protected
                    || decided
                        .settings
                        .websocket_paths
                        .iter()
                        .any(|p| p.matches(request.path));
                ctx.set_cookie = front.responder.pass_cookie(forward);
                ctx.holder = forward.holder.clone();
                self.forwarding(ctx, req, &canonical);
                return Ok(false);
            }
            Decision::Answer(answer) => {
                let format = front.responder.format(&request);
                front.responder.reply(&decided.settings, answer, format)
            }
        };
        reply.send(session, head_only).await?;
        Ok(true)
    }

    async fn upstream_peer(
        &self,
        _session: &mut Session,
        ctx: &mut Self::CTX,
    ) -> pingora::Result<Box<HttpPeer>> {
        let o = &self.origin;
        let turn = *ctx.origin_turn.get_or_insert_with(|| self.addresses.turn());
        let address = self.addresses.pick(turn.wrapping_add(ctx.origin_tries));
        ctx.origin_tries += 1;
        let Some(address) = address else {
            return Err(Error::explain(
                failure::ORIGIN_UNRESOLVED,
                format!("no address known for origin.address {}", o.address),
            )
            .into_up());
        };
        // From an address, never a name: Pingora's `HttpPeer::new` panics on a lookup that
        // fails, and a lookup here would wait on the DNS in the request's path.
        let mut peer = HttpPeer::new(address, o.tls, o.sni.clone());
        peer.options.connection_timeout = Some(o.connect_timeout);
        peer.options.read_timeout = Some(o.read_timeout);
        peer.options.write_timeout = Some(o.write_timeout);
        peer.options.verify_cert = o.verify;
        peer.options.verify_hostname = o.verify;
        ctx.origin_started = Some(Instant::now());
        // A retry chooses the origin again: the earlier attempt's count goes with its guard.
        ctx.in_flight = self
            .origin_room(ctx)
            .map(|front| InFlight::new(&front.room.metrics.origin_inflight));
        Ok(Box::new(peer))
    }

    /// Runs when connecting to the origin failed: tried again on its next address while this
    /// request has not tried them all (nothing was sent yet, so any request may be retried).
    fn fail_to_connect(
        &self,
        _session: &mut Session,
        _peer: &HttpPeer,
        ctx: &mut Self::CTX,
        mut e: Box<Error>,
    ) -> Box<Error> {
        if ctx.origin_tries < self.addresses.count() {
            e.set_retry(true);
        }
        e
    }

    /// Runs on the copy of the request that goes to the origin: what the gate decided on is
    /// what the origin receives.
    async fn upstream_request_filter(
        &self,
        session: &mut Session,
        upstream: &mut RequestHeader,
        ctx: &mut Self::CTX,
    ) -> pingora::Result<()> {
        forward::rewrite(self, session, upstream, ctx)
    }

    /// Runs on each piece of a forwarded request body as it arrives, on either protocol: a body
    /// slower than `listen.min_body_rate` ends its connection.
    async fn request_body_filter(
        &self,
        _session: &mut Session,
        body: &mut Option<bytes::Bytes>,
        _end_of_stream: bool,
        ctx: &mut Self::CTX,
    ) -> pingora::Result<()> {
        match (ctx.body_pace.as_mut(), body) {
            (Some(pace), Some(piece)) => body::keep_pace(pace, piece.len(), ctx.started),
            _ => Ok(()),
        }
    }

    /// Runs on the origin's response header as it arrives, before Pingora acts on it (a 101
    /// would open the tunnel right after this).
    async fn upstream_response_filter(
        &self,
        _session: &mut Session,
        response: &mut ResponseHeader,
        ctx: &mut Self::CTX,
    ) -> pingora::Result<()> {
        forward::refuse_tunnel(self, response, ctx)
    }

    /// Runs on the origin's response header before it goes to the visitor.
    async fn response_filter(
        &self,
        session: &mut Session,
        response: &mut ResponseHeader,
        ctx: &mut Self::CTX,
    ) -> pingora::Result<()> {
        if response.status == http::StatusCode::SWITCHING_PROTOCOLS && ctx.upgrade_allowed {
            // An allowed tunnel's silence is normal (a WebSocket waits for the shop to push):
            // `listen.body_timeout` and `min_body_rate` are for request bodies, not for it.
            session.set_read_timeout(None);
            ctx.body_pace = None;
        }
        forward::answer(self, session, response, ctx).await
    }

    /// Runs when the request failed: a small branded page instead of a bare error.
    async fn fail_to_proxy(
        &self,
        session: &mut Session,
        e: &Error,
        ctx: &mut Self::CTX,
    ) -> FailToProxy
    where
        Self::CTX: Send + Sync,
    {
        failure::answer(self, session, e, ctx).await
    }

    /// Runs when a request failed, to ask whether Pingora should log it at ERROR: not when the
    /// visitor closed the page or the connection (a crowd closing its tabs would flood the log).
    fn suppress_error_log(&self, _session: &Session, _ctx: &Self::CTX, error: &Error) -> bool {
        let gone = visitor_went_away(error);
        if gone {
            log::debug!("the visitor went away: {error}");
        }
        // Counted, and a crowd of tricklers must not flood the log either.
        if failure::body_timed_out(error) {
            log::debug!("a request body went silent past listen.body_timeout: {error}");
            return true;
        }
        gone
    }

    /// Runs once per request, after the response went out or the request failed: the access
    /// line, with the gate's decision.
    async fn logging(&self, session: &mut Session, e: Option<&Error>, ctx: &mut Self::CTX)
    where
        Self::CTX: Send + Sync,
    {
        connections::request_done(session);
        if !self.access_log {
            return;
        }
        let req = session.req_header();
        let status = session.response_written().map_or(0, |r| r.status.as_u16());
        let client = session
            .client_addr()
            .map(|a| a.to_string())
            .unwrap_or_default();
        let error = e.map(|e| e.etype().as_str()).unwrap_or("");
        let host = req
            .headers
            .get(http::header::HOST)
            .and_then(|v| v.to_str().ok())
            .or_else(|| req.uri.host())
            .unwrap_or("");
        AccessLine {
            decision: ctx.decision.label(),
            method: req.method.as_str(),
            host,
            path: req.uri.path(),
            status,
            origin_status: ctx.origin_status.unwrap_or(0),
            ms: ctx.started.elapsed().as_millis() as u64,
            bytes: session.body_bytes_sent() as u64,
            proto: http_version(req.version),
            client: &client,
            visitor: ctx.holder.as_deref().unwrap_or(""),
            error,
        }
        .write();
    }
}
