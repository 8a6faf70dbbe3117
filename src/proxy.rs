//! The Pingora layer: turns the gate's verdicts into responses, adds the pass cookie to the
//! origin's answer, carries out the origin's revoke command and answers for a failed origin.

use std::borrow::Cow;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use bytes::Bytes;
use pingora::prelude::HttpPeer;
use pingora_core::{Error, ErrorType};
use pingora_http::{RequestHeader, ResponseHeader};
use pingora_proxy::{FailToProxy, ProxyHttp, Session};

use crate::client::{Cidr, client_ip};
use crate::config::model::OriginConfig;
use crate::gate::{Gate, RESERVED_PREFIX, RequestView, Verdict};
use crate::logging::ACCESS;
use crate::page::{ErrorView, render_error};
use crate::reply::Reply;
use crate::turnstile::TURNSTILE_PATH;

/// The origin's header that ends the visitor's session (Cloudflare's name).
const COMMAND_HEADER: &str = "cf-waiting-room-command";
/// Longest a `/__waitroom/events` stream stays open; the page reconnects after that.
const EVENTS_MAX: Duration = Duration::from_secs(600);
const EVENTS_EVERY: Duration = Duration::from_secs(1);
/// Larger request headers are refused with 431 before any work is done.
const MAX_HEADER_VALUE: usize = 16 * 1024;
const MAX_HEADERS_TOTAL: usize = 64 * 1024;
/// Request bodies the proxy reads itself (leave, a Turnstile token) are small; more is refused.
const MAX_OWN_BODY: usize = 16 * 1024;

pub struct WaitroomProxy {
    gate: Arc<Gate>,
    origin: OriginConfig,
    access_log: bool,
    trusted_proxies: Vec<Cidr>,
}

/// The decision of a request the gate never saw: the proxy's own paths, or refused headers.
const RESERVED: &str = "reserved";
const REFUSED: &str = "refused";

#[derive(Debug)]
pub struct RequestCtx {
    set_cookie: Option<String>,
    visitor: Option<String>,
    started: Instant,
    /// passed, admitted, queued, bypassed, rejected, unprotected, reserved or refused.
    decision: &'static str,
    origin_started: Option<Instant>,
    origin_status: Option<u16>,
}

impl WaitroomProxy {
    pub fn new(
        gate: Arc<Gate>,
        origin: OriginConfig,
        access_log: bool,
        trusted_proxies: Vec<Cidr>,
    ) -> Self {
        Self {
            gate,
            origin,
            access_log,
            trusted_proxies,
        }
    }

    /// The visitor's address: the peer's, or X-Forwarded-For's when the peer is a trusted proxy.
    fn client_ip(&self, session: &Session) -> Option<IpAddr> {
        let peer = session.client_addr()?.as_inet()?.ip();
        let forwarded = header_str(session.req_header(), "x-forwarded-for");
        Some(client_ip(peer, forwarded, &self.trusted_proxies))
    }
}

fn header_str<'a>(req: &'a RequestHeader, name: &str) -> Option<&'a str> {
    req.headers.get(name).and_then(|v| v.to_str().ok())
}

/// All Cookie headers as one (HTTP/2 clients send one per cookie).
fn cookies(req: &RequestHeader) -> Option<Cow<'_, str>> {
    let mut values = req
        .headers
        .get_all("cookie")
        .iter()
        .filter_map(|v| v.to_str().ok());
    let first = values.next()?;
    match values.next() {
        None => Some(Cow::Borrowed(first)),
        Some(second) => {
            let mut joined = format!("{first}; {second}");
            for more in values {
                joined.push_str("; ");
                joined.push_str(more);
            }
            Some(Cow::Owned(joined))
        }
    }
}

/// Everything the gate may look at in a request, built the same way for the protected route and
/// for the reserved paths, so that none of them skips a check that needs the client (the
/// per-address limit, a bypass, Turnstile's remoteip).
fn request_view<'a>(
    req: &'a RequestHeader,
    path: &'a str,
    cookie: Option<&'a str>,
    client_ip: Option<IpAddr>,
) -> RequestView<'a> {
    RequestView {
        host: host(req),
        path,
        query: req.uri.query(),
        accept: header_str(req, "accept"),
        accept_language: header_str(req, "accept-language"),
        cookie,
        client_ip,
        headers: Some(&req.headers),
        turnstile_passed: false,
    }
}

/// The whole request body, or None when it is larger than `MAX_OWN_BODY`.
async fn read_body(session: &mut Session) -> pingora::Result<Option<Vec<u8>>> {
    let mut body = Vec::new();
    while let Some(chunk) = session.read_request_body().await? {
        body.extend_from_slice(&chunk);
        if body.len() > MAX_OWN_BODY {
            return Ok(None);
        }
    }
    Ok(Some(body))
}

impl WaitroomProxy {
    async fn own_path(&self, session: &mut Session, path: &str) -> pingora::Result<()> {
        let head_only = session.req_header().method == http::Method::HEAD;
        let method = session.req_header().method.clone();
        let is_status = path == "/__waitroom/status";
        let reply = match (&method, path) {
            (&http::Method::POST, TURNSTILE_PATH) => match read_body(session).await? {
                None => {
                    session.set_keepalive(None);
                    Reply::text(413, "request body too large\n")
                }
                Some(form) => {
                    let client_ip = self.client_ip(session);
                    let req = session.req_header();
                    let cookie = cookies(req);
                    let view = request_view(req, path, cookie.as_deref(), client_ip);
                    self.gate.answer_challenge(&view, &form).await
                }
            },
            (&http::Method::GET | &http::Method::HEAD, "/__waitroom/status")
            | (&http::Method::POST, "/__waitroom/leave") => {
                if method == http::Method::POST && read_body(session).await?.is_none() {
                    session.set_keepalive(None);
                    Reply::text(413, "request body too large\n")
                } else {
                    let client_ip = self.client_ip(session);
                    let req = session.req_header();
                    let cookie = cookies(req);
                    let view = request_view(req, path, cookie.as_deref(), client_ip);
                    if is_status {
                        self.gate.status(&view).await
                    } else {
                        self.gate.leave(&view).await
                    }
                }
            }
            (&http::Method::GET, "/__waitroom/events") => return self.events(session).await,
            (
                _,
                "/__waitroom/status" | "/__waitroom/events" | "/__waitroom/leave" | TURNSTILE_PATH,
            ) => Reply::text(405, "method not allowed\n"),
            _ => Reply::text(404, "no such waiting-room endpoint\n"),
        };
        reply.send(session, head_only).await
    }

    /// Server-Sent Events: the visitor's status whenever it changes, until it is admitted.
    async fn events(&self, session: &mut Session) -> pingora::Result<()> {
        let mut header = ResponseHeader::build(200, Some(4))?;
        header.insert_header("content-type", "text/event-stream")?;
        header.insert_header("cache-control", "no-store")?;
        header.insert_header("x-accel-buffering", "no")?;
        session
            .write_response_header(Box::new(header), false)
            .await?;
        let started = tokio::time::Instant::now();
        let mut last = None;
        let client_ip = self.client_ip(session);
        loop {
            let req = session.req_header();
            let cookie = cookies(req);
            let view = request_view(req, "/", cookie.as_deref(), client_ip);
            let (body, done) = self.gate.watch(&view).await;
            let fingerprint = Some(body.fingerprint());
            if fingerprint != last {
                let json = serde_json::to_string(&body).unwrap_or_default();
                let event = format!("data: {json}\n\n");
                session
                    .write_response_body(Some(Bytes::from(event)), false)
                    .await?;
                last = fingerprint;
            }
            if done || started.elapsed() > EVENTS_MAX {
                break;
            }
            tokio::time::sleep(EVENTS_EVERY).await;
        }
        session.write_response_body(None, true).await
    }
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

fn host(req: &RequestHeader) -> Option<&str> {
    header_str(req, "host").or_else(|| req.uri.host())
}

#[async_trait]
impl ProxyHttp for WaitroomProxy {
    type CTX = RequestCtx;

    fn new_ctx(&self) -> Self::CTX {
        RequestCtx {
            set_cookie: None,
            visitor: None,
            started: Instant::now(),
            decision: "-",
            origin_started: None,
            origin_status: None,
        }
    }

    /// Runs first for every request: answers reserved paths and visitors who must wait; lets
    /// the rest through to `upstream_peer`.
    async fn request_filter(
        &self,
        session: &mut Session,
        ctx: &mut Self::CTX,
    ) -> pingora::Result<bool> {
        if oversized(session.req_header()) {
            ctx.decision = REFUSED;
            session.set_keepalive(None);
            Reply::text(431, "request header fields too large\n")
                .send(session, false)
                .await?;
            return Ok(true);
        }
        let path = session.req_header().uri.path().to_owned();
        if path.starts_with(RESERVED_PREFIX) {
            ctx.decision = RESERVED;
            self.own_path(session, &path).await?;
            return Ok(true);
        }
        let client_ip = self.client_ip(session);
        let req = session.req_header();
        let head_only = req.method == http::Method::HEAD;
        let cookie = cookies(req);
        let view = request_view(req, &path, cookie.as_deref(), client_ip);
        let verdict = self.gate.decide(&view).await;
        ctx.decision = verdict.outcome().label();
        match verdict {
            Verdict::Forward {
                set_cookie,
                visitor,
                ..
            } => {
                ctx.set_cookie = set_cookie;
                ctx.visitor = visitor;
                Ok(false)
            }
            Verdict::Respond { reply, .. } => {
                reply.send(session, head_only).await?;
                Ok(true)
            }
        }
    }

    async fn upstream_peer(
        &self,
        _session: &mut Session,
        ctx: &mut Self::CTX,
    ) -> pingora::Result<Box<HttpPeer>> {
        let o = &self.origin;
        let mut peer = HttpPeer::new(o.address.as_str(), o.tls, o.sni.clone());
        peer.options.connection_timeout = Some(o.connect_timeout);
        peer.options.read_timeout = Some(o.read_timeout);
        peer.options.write_timeout = Some(o.write_timeout);
        peer.options.verify_cert = o.verify;
        peer.options.verify_hostname = o.verify;
        ctx.origin_started = Some(Instant::now());
        Ok(Box::new(peer))
    }

    async fn upstream_request_filter(
        &self,
        _session: &mut Session,
        upstream_request: &mut RequestHeader,
        _ctx: &mut Self::CTX,
    ) -> pingora::Result<()> {
        if let Some(host) = &self.origin.host_header {
            upstream_request.insert_header("host", host.as_str())?;
        }
        Ok(())
    }

    /// Runs on the origin's response header before it goes to the visitor.
    async fn response_filter(
        &self,
        _session: &mut Session,
        response: &mut ResponseHeader,
        ctx: &mut Self::CTX,
    ) -> pingora::Result<()> {
        let status = response.status.as_u16();
        ctx.origin_status = Some(status);
        self.gate.metrics.origin_response(status);
        if let Some(started) = ctx.origin_started {
            self.gate
                .metrics
                .origin_seconds
                .observe(started.elapsed().as_secs_f64());
        }
        let command = response
            .headers
            .get(COMMAND_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(|v| v.trim().eq_ignore_ascii_case("revoke"));
        if command.is_some() {
            // Never shown to the visitor, whatever it says.
            response.remove_header(COMMAND_HEADER);
        }
        let settings = self.gate.settings();
        if command == Some(true)
            && settings.revoke_command_enabled
            && let Some(visitor) = ctx.visitor.take()
        {
            let ended = self.gate.end_pass(&visitor, &settings).await;
            self.gate.note_store(&ended);
            response.append_header("set-cookie", self.gate.clearing_cookie())?;
            return Ok(());
        }
        if let Some(cookie) = ctx.set_cookie.take() {
            response.append_header("set-cookie", cookie)?;
        }
        Ok(())
    }

    /// Runs when the request failed: a small branded page instead of a bare error.
    async fn fail_to_proxy(
        &self,
        session: &mut Session,
        e: &Error,
        _ctx: &mut Self::CTX,
    ) -> FailToProxy
    where
        Self::CTX: Send + Sync,
    {
        let (code, kind, heading, message) = match e.etype() {
            ErrorType::ConnectTimedout | ErrorType::ReadTimedout | ErrorType::WriteTimedout => (
                504,
                "timeout",
                "The shop is taking too long",
                "The shop did not answer in time. Please try again in a moment.",
            ),
            ErrorType::TLSHandshakeFailure
            | ErrorType::TLSHandshakeTimedout
            | ErrorType::InvalidCert
            | ErrorType::HandshakeError => (
                502,
                "tls",
                "The shop is not answering right now",
                "Please try again in a moment: your place or your pass is kept.",
            ),
            ErrorType::HTTPStatus(code) => (
                *code,
                "status",
                "Something went wrong",
                "Please try again in a moment.",
            ),
            _ if e.esource() == &pingora_core::ErrorSource::Upstream => (
                502,
                "connect",
                "The shop is not answering right now",
                "Please try again in a moment: your place or your pass is kept.",
            ),
            ErrorType::ReadError | ErrorType::WriteError | ErrorType::ConnectionClosed => {
                // The visitor went away: nobody to answer.
                return FailToProxy {
                    error_code: 0,
                    can_reuse_downstream: false,
                };
            }
            _ => (
                400,
                "request",
                "Bad request",
                "The request could not be understood.",
            ),
        };
        if code >= 500 {
            self.gate.metrics.upstream_error(kind);
        }
        let view = ErrorView {
            branding: self.gate.branding(),
            status: code,
            heading,
            message,
        };
        let reply = match render_error(&view) {
            Ok(html) => Reply::html(code, html),
            Err(_) => Reply::text(code, format!("{heading}\n")),
        };
        // The connection is not reused after an error: say so, or clients reuse a closed socket.
        session.set_keepalive(None);
        if let Err(e) = reply.send(session, false).await {
            log::debug!("could not send the error page: {e}");
        }
        FailToProxy {
            error_code: code,
            can_reuse_downstream: false,
        }
    }

    /// Runs once per request, after the response went out or the request failed: the access
    /// line, with the gate's decision.
    async fn logging(&self, session: &mut Session, e: Option<&Error>, ctx: &mut Self::CTX)
    where
        Self::CTX: Send + Sync,
    {
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
        log::info!(
            target: ACCESS,
            decision = ctx.decision,
            method = req.method.as_str(),
            host = host(req).unwrap_or(""),
            path = req.uri.path(),
            status = status,
            origin_status = ctx.origin_status.unwrap_or(0),
            ms = ctx.started.elapsed().as_millis() as u64,
            bytes = session.body_bytes_sent() as u64,
            proto = http_version(req.version),
            client = client.as_str(),
            visitor = ctx.visitor.as_deref().unwrap_or(""),
            error = error;
            "{}", ctx.decision
        );
    }
}

fn http_version(v: http::Version) -> &'static str {
    match v {
        http::Version::HTTP_09 => "HTTP/0.9",
        http::Version::HTTP_10 => "HTTP/1.0",
        http::Version::HTTP_2 => "HTTP/2",
        http::Version::HTTP_3 => "HTTP/3",
        _ => "HTTP/1.1",
    }
}
