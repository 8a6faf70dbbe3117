//! The Pingora layer: reads the canonical request once, asks the gate, sends the reply or
//! forwards exactly what the gate decided on, adds the pass cookie to the origin's answer,
//! carries out the origin's revoke command and answers for a failed origin.
//!
//! Pingora's hooks are in `hooks`, over the state they share here (`WaitroomProxy`).
//!
//! Connections are accepted by the front door (`connections`), which counts them and closes
//! slow heads and, when full, idle keep-alive connections.

mod access;
mod body;
mod connections;
mod events;
mod failure;
mod forward;
mod hooks;
pub mod origin;
mod parked;
mod reserved;

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Instant;

use pingora_core::{Error, ErrorSource, ErrorType};
use pingora_http::RequestHeader;
use pingora_proxy::Session;

pub use connections::{ConnectionLimits, ConnectionStats, Connections, FrontDoor};
pub use events::{STREAMS_PER_VISITOR, StreamBudget};
pub use hooks::Hooks;

use crate::config::model::OriginConfig;
use crate::core::autopilot::Exchange;
use crate::core::body_pace::{BodyPace, PaceRule};
use crate::gate::Gate;
use crate::observe::Outcome;
use crate::request::authority::Authority;
use crate::request::client::{Cidr, ClientAddress, client_ip};
use crate::request::route::Routes;
use crate::request::view::{Canonical, Head, Sites};
use crate::respond::Responder;
use crate::room::Room;
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
