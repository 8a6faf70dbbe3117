//! Pingora's hooks, in the order Pingora runs them for one request: `early_request_filter`
//! (the connection's settings: keep-alive, pipelining; its head is read) → `request_filter`
//! (every request: decide, answer or let through) → `upstream_peer` (forwarded only) →
//! `upstream_request_filter` (the canonical target and Host, X-Forwarded-*) → `response_filter`
//! (the origin's header: cookies, the revoke command) → `logging` (once, after the response or
//! the failure). `fail_to_proxy` runs instead of the response when the origin failed.

use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use pingora::prelude::HttpPeer;
use pingora_core::Error;
use pingora_http::{RequestHeader, ResponseHeader};
use pingora_proxy::{FailToProxy, ProxyHttp, Session};

use super::access::{AccessLine, http_version};
use super::{
    InFlight, Logged, RequestCtx, WaitroomProxy, body, connections, failure, forward, head,
    oversized, visitor_went_away,
};
use crate::core::body_pace::BodyPace;
use crate::gate::Decision;
use crate::observe::Outcome;
use crate::request::authority::Authority;
use crate::request::client::ClientAddress;
use crate::request::view::{Canonical, Request};
use crate::respond::reply::Reply;

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
