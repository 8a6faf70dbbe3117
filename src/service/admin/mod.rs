//! The admin listener, apart from the public port: health, readiness, metrics, and the
//! token-protected API: the rooms (`/admin/rooms`, one room's API in `room`), the reload of the
//! file, and, when the proxy runs one room, that room's API at `/admin/...` directly. The
//! operator's console (`console`) signs a browser in with the token and then calls the same API
//! with its session cookie and CSRF token; its live view is an event stream (`live`). Every
//! change through the API is recorded (`audit`).

mod audit;
mod console;
mod live;
mod report;
mod room;
mod sessions;
mod sign_in_limit;
mod visitors;

use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::Duration;

use async_trait::async_trait;
use pingora_core::apps::{HttpPersistentSettings, HttpServerApp, ReusedHttpStream};
use pingora_core::protocols::http::ServerSession;
use pingora_core::server::ShutdownWatch;
use pingora_http::ResponseHeader;
use subtle::ConstantTimeEq;

use room::RoomRequest;
pub use room::{RoomAdmin, RuleReach};

use audit::{AuditLog, Caller, Change};
use sessions::Sessions;
use sign_in_limit::SignInLimit;

use crate::clock::SharedClock;
use crate::observe::MetricsRegistry;
use crate::proxy::Connections;
use crate::respond::reply::Reply;
use crate::service::admission::AdmissionLoop;
use crate::service::limits::OpenFiles;
use crate::service::reload::{ReloadError, Reloaded, Reloader};

/// Admin request bodies are small JSON objects (or the sign-in form).
const MAX_BODY: usize = 64 * 1024;

pub struct AdminApp {
    rooms: Vec<RoomAdmin>,
    metrics: Arc<MetricsRegistry>,
    admission: Arc<AdmissionLoop>,
    reloader: Arc<Reloader>,
    token: String,
    /// `[admin] ready_requires_store`: /readyz fails while a store is unreachable.
    ready_requires_store: bool,
    listener: Arc<ListenerState>,
    sessions: Sessions,
    sign_in_limit: SignInLimit,
    audit: AuditLog,
    /// Live views open now (`live::MAX_STREAMS` at most).
    live_streams: AtomicUsize,
    /// The proxy's clock: the report's time.
    clock: SharedClock,
    /// How the console's pages are reached: their origin, their cookie's `Secure`.
    scheme: console::Scheme,
}

/// The public listener as each room's state shows it: the open-file limit it lives within and
/// its connections.
pub struct ListenerState {
    pub open_files: OpenFiles,
    pub connections: Arc<Connections>,
    pub max_event_streams: usize,
}

impl ListenerState {
    fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "open_files": self.open_files,
            "connections": self.connections.stats(),
            "max_event_streams": self.max_event_streams,
        })
    }
}

/// What the admin API is given besides the rooms.
pub struct AdminParts {
    pub admission: Arc<AdmissionLoop>,
    pub reloader: Arc<Reloader>,
    pub token: String,
    pub ready_requires_store: bool,
    pub metrics: Arc<MetricsRegistry>,
    pub listener: Arc<ListenerState>,
    /// The proxy's clock: sessions and the sign-in limit expire on it (tests drive it).
    pub clock: SharedClock,
    /// `[admin] console_session`.
    pub console_session: Duration,
    /// The admin listener speaks TLS (`admin.certificate`).
    pub tls: bool,
}

/// What a request to the admin listener gets: an answer, or the live view's stream.
enum Routed {
    Reply(Reply),
    Live(Watcher),
}

/// Who watches a live view: a console session ends its stream when it ends.
enum Watcher {
    Token,
    Session(String),
}

/// The peer address of the admin connection (the admin listener is not behind a proxy whose
/// `X-Forwarded-For` would name someone else).
fn client_ip(session: &ServerSession) -> Option<IpAddr> {
    session
        .client_addr()
        .and_then(|address| address.as_inet())
        .map(|address| address.ip())
}

/// Methods that change nothing: everything else needs a console session's CSRF token.
fn changes_nothing(method: &str) -> bool {
    matches!(method, "GET" | "HEAD")
}

async fn write_reply(session: &mut ServerSession, reply: Reply) -> pingora::Result<()> {
    let response = reply.into_http();
    let (parts, body) = response.into_parts();
    let header: ResponseHeader = parts.into();
    session.write_response_header(Box::new(header)).await?;
    if !body.is_empty() {
        session.write_response_body(body.into(), true).await?;
    }
    Ok(())
}

fn error(status: u16, message: impl Into<String>) -> Reply {
    Reply::json(status, &serde_json::json!({ "error": message.into() }))
}

async fn read_body(session: &mut ServerSession) -> Result<Vec<u8>, Reply> {
    let mut body = Vec::new();
    loop {
        match session.read_request_body().await {
            Ok(Some(chunk)) => {
                body.extend_from_slice(&chunk);
                if body.len() > MAX_BODY {
                    return Err(error(413, format!("body larger than {MAX_BODY} bytes")));
                }
            }
            Ok(None) => return Ok(body),
            Err(e) => return Err(error(400, format!("cannot read body: {e}"))),
        }
    }
}

fn parse_json<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, Reply> {
    serde_json::from_slice(body)
        .map_err(|e| error(400, format!("body is not valid JSON for this: {e}")))
}

/// A reload's answer: what it applied, or why nothing was.
fn reloaded(result: Result<Reloaded, ReloadError>) -> Reply {
    match result {
        Ok(done) => Reply::json(200, &done),
        Err(e @ ReloadError::NoFile) => error(409, e.to_string()),
        Err(e @ ReloadError::NoRoom(_)) => error(404, e.to_string()),
        Err(e @ (ReloadError::Config(_) | ReloadError::Fixed { .. })) => error(400, e.to_string()),
        Err(e @ ReloadError::Store(_)) => error(503, e.to_string()),
        Err(e @ ReloadError::LiveEvents { .. }) => error(409, e.to_string()),
    }
}

impl AdminApp {
    pub fn new(rooms: Vec<RoomAdmin>, parts: AdminParts) -> Self {
        Self {
            rooms,
            metrics: parts.metrics,
            admission: parts.admission,
            reloader: parts.reloader,
            token: parts.token,
            ready_requires_store: parts.ready_requires_store,
            listener: parts.listener,
            sessions: Sessions::new(parts.clock.clone(), parts.console_session),
            sign_in_limit: SignInLimit::new(parts.clock.clone()),
            audit: AuditLog::new(parts.clock.clone()),
            live_streams: AtomicUsize::new(0),
            clock: parts.clock,
            scheme: if parts.tls {
                console::Scheme::Https
            } else {
                console::Scheme::Http
            },
        }
    }

    /// The admin token, compared in constant time.
    fn token_matches(&self, given: &str) -> bool {
        bool::from(given.trim().as_bytes().ct_eq(self.token.as_bytes()))
    }

    /// Who calls the API: the bearer token, or a console session. A change (any method but GET
    /// and HEAD) with a session must come from the console's own page with the session's CSRF
    /// token (403 otherwise): a cookie is sent by the browser whoever asks it to, a header is
    /// not. A request that brings a bearer token is judged by it alone.
    fn caller(&self, session: &ServerSession, method: &str) -> Result<(Caller, Watcher), Reply> {
        let headers = &session.req_header().headers;
        let unauthorised = |message: &str| {
            Err(error(401, message.to_owned()).with_header("www-authenticate", "Bearer"))
        };
        if let Some(authorization) = headers.get("authorization") {
            let given = authorization
                .to_str()
                .ok()
                .and_then(|v| v.strip_prefix("Bearer "));
            return match given {
                Some(given) if self.token_matches(given) => Ok((Caller::Token, Watcher::Token)),
                _ => unauthorised("missing or wrong bearer token"),
            };
        }
        let Some(id) = console::session_id(headers) else {
            return unauthorised("missing or wrong bearer token");
        };
        let Some(found) = self.sessions.find(id) else {
            return unauthorised("the console session ended: sign in again at /admin/console");
        };
        if !changes_nothing(method)
            && let Err(forgery) = console::check_change(headers, &found, self.scheme)
        {
            let who = Caller::Console(found.short_id.clone()).name();
            let client = client_ip(session)
                .map(|ip| ip.to_string())
                .unwrap_or_default();
            log::warn!(
                who = who.as_str(),
                client = client.as_str();
                "admin change refused: {forgery}"
            );
            return Err(error(403, forgery.to_string()));
        }
        Ok((
            Caller::Console(found.short_id),
            Watcher::Session(id.to_owned()),
        ))
    }

    /// `/readyz`: ready while this instance can serve. A store outage leaves it ready (pass
    /// holders are served, newcomers follow `[store] on_error`): with one shared store, failing
    /// readiness would take every instance out of the load balancer at once. Kubernetes' own
    /// convention for `?verbose`: one `[+]`/`[-]` line per check.
    async fn ready(&self, verbose: bool) -> Reply {
        let mut lines = Vec::new();
        let mut ready = true;
        for room in &self.rooms {
            let check = if self.rooms.len() == 1 {
                "store".to_owned()
            } else {
                format!("store {}", room.id())
            };
            match room.ping().await {
                Ok(()) => lines.push(format!("[+]{check} ok")),
                Err(e) if self.ready_requires_store => {
                    ready = false;
                    lines.push(format!("[-]{check} failed: {e}"));
                }
                Err(e) => lines.push(format!(
                    "[+]{check} failed: {e} (not required: ready_requires_store = false)"
                )),
            }
        }
        let status = if ready { 200 } else { 503 };
        let verdict = if ready {
            "readyz check passed"
        } else {
            "readyz check failed"
        };
        if verbose {
            Reply::text(status, format!("{}\n{verdict}\n", lines.join("\n")))
        } else if ready {
            Reply::text(status, "ready\n")
        } else {
            let failed: Vec<&String> = lines.iter().filter(|l| l.starts_with("[-]")).collect();
            Reply::text(
                status,
                format!(
                    "not ready: {}\n",
                    failed
                        .iter()
                        .map(|l| l.as_str())
                        .collect::<Vec<_>>()
                        .join("; ")
                ),
            )
        }
    }

    /// `GET /admin/rooms`: every room and its state.
    async fn rooms(&self) -> Reply {
        let mut rooms = Vec::with_capacity(self.rooms.len());
        for room in &self.rooms {
            let state = room.state(&self.admission, &self.listener).await;
            rooms.push(
                serde_json::from_slice::<serde_json::Value>(&state.body).unwrap_or_else(
                    |_| serde_json::json!({ "room": room.id(), "error": "no state" }),
                ),
            );
        }
        Reply::json(200, &serde_json::json!({ "rooms": rooms }))
    }

    async fn route(&self, session: &mut ServerSession) -> Routed {
        let method = session.req_header().method.clone();
        let path = session.req_header().uri.path().to_owned();
        let reply = match (method.as_str(), path.as_str()) {
            ("GET", "/healthz") => Reply::text(200, "ok\n"),
            ("GET", "/readyz") => {
                let verbose = session.req_header().uri.query().is_some_and(|q| {
                    q.split('&')
                        .any(|kv| kv == "verbose" || kv.starts_with("verbose="))
                });
                self.ready(verbose).await
            }
            ("GET", "/metrics") => {
                Reply::new(200, "text/plain; version=0.0.4", self.metrics.render())
            }
            (_, p) if p == "/admin/console" || p.starts_with("/admin/console/") => {
                return self.console(session, method.as_str(), p).await;
            }
            (_, p) if p.starts_with("/admin/") => {
                let who = match self.caller(session, method.as_str()) {
                    Ok((who, _)) => who,
                    Err(refused) => return Routed::Reply(refused),
                };
                if changes_nothing(method.as_str()) {
                    return Routed::Reply(
                        self.api(session, method.as_str(), &p["/admin/".len()..], &[])
                            .await,
                    );
                }
                // A body too large or cut short is recorded too, as the attempt it was.
                let (body, reply) = match read_body(session).await {
                    Ok(body) => {
                        let reply = self
                            .api(session, method.as_str(), &p["/admin/".len()..], &body)
                            .await;
                        (body, reply)
                    }
                    Err(refused) => (Vec::new(), refused),
                };
                self.audit.record(
                    Change {
                        who: &who,
                        client: client_ip(session).map(|ip| ip.to_string()),
                        method: method.as_str(),
                        path: p,
                        body: &body,
                    },
                    reply.status,
                );
                reply
            }
            _ => error(404, "no such endpoint"),
        };
        Routed::Reply(reply)
    }

    /// `/admin/console...`: the page (the sign-in form alone without a session), signing in and
    /// out, and the live view.
    async fn console(&self, session: &mut ServerSession, method: &str, path: &str) -> Routed {
        let reply = match (method, path) {
            ("GET", "/admin/console") => {
                let signed_in = console::session_id(&session.req_header().headers)
                    .and_then(|id| self.sessions.find(id));
                match signed_in {
                    Some(found) => console::console_page(&found),
                    None => console::sign_in_page(200, None),
                }
            }
            ("POST", "/admin/console/login") => self.sign_in(session).await,
            ("POST", "/admin/console/logout") => self.sign_out(session),
            ("GET", "/admin/console/events") => match self.caller(session, method) {
                Ok((_, watcher)) => return Routed::Live(watcher),
                Err(refused) => refused,
            },
            _ => error(404, "no such console endpoint"),
        };
        Routed::Reply(reply)
    }

    /// `POST /admin/console/login` with the form's `token`: a session and its cookie, then the
    /// console (303). A wrong token is logged with the client's address (never the token) and
    /// counts against the sign-in limit.
    async fn sign_in(&self, session: &mut ServerSession) -> Reply {
        let client = client_ip(session);
        let client_name = client.map(|ip| ip.to_string()).unwrap_or_default();
        if let Err(forgery) = console::same_origin(&session.req_header().headers, self.scheme) {
            log::warn!(client = client_name.as_str(); "console sign-in refused: {forgery}");
            return console::sign_in_page(403, Some(&forgery.to_string()));
        }
        if let Err(held) = self.sign_in_limit.check(client) {
            let wait = held.retry_after_seconds;
            log::warn!(
                client = client_name.as_str();
                "console sign-in refused: too many failed sign-ins, {wait} s to wait"
            );
            let problem = format!("Too many failed sign-ins: try again in {wait} s.");
            return console::sign_in_page(429, Some(&problem))
                .with_header("retry-after", wait.to_string());
        }
        let body = match read_body(session).await {
            Ok(body) => body,
            Err(refused) => return refused,
        };
        let given = console::token_in_form(&body).unwrap_or_default();
        if !self.token_matches(&given) {
            self.sign_in_limit.failed(client);
            log::warn!(client = client_name.as_str(); "console sign-in failed: wrong token");
            return console::sign_in_page(401, Some("That is not the admin token."));
        }
        let opened = self.sessions.open();
        let who = Caller::Console(opened.session.short_id.clone());
        self.audit.record(
            Change {
                who: &who,
                client: client.map(|ip| ip.to_string()),
                method: "POST",
                path: "/admin/console/login",
                body: b"",
            },
            303,
        );
        Reply::text(303, "signed in\n")
            .with_header("location", "/admin/console")
            .with_header(
                "set-cookie",
                console::session_cookie(&opened.id, self.sessions.lifetime(), self.scheme),
            )
    }

    /// `POST /admin/console/logout`: the session ends here and in its open live views, and the
    /// browser forgets the cookie. A change like any other: the console's page and its CSRF
    /// token, so that another site cannot sign the operator out either.
    fn sign_out(&self, session: &ServerSession) -> Reply {
        let who = match self.caller(session, "POST") {
            Ok((who @ Caller::Console(_), Watcher::Session(id))) => {
                self.sessions.close(&id);
                who
            }
            Ok(_) => return error(400, "sign-out ends a console session: send its cookie"),
            Err(refused) => return refused,
        };
        self.audit.record(
            Change {
                who: &who,
                client: client_ip(session).map(|ip| ip.to_string()),
                method: "POST",
                path: "/admin/console/logout",
                body: b"",
            },
            200,
        );
        Reply::json(200, &serde_json::json!({ "signed_out": true }))
            .with_header("set-cookie", console::cleared_cookie(self.scheme))
    }

    /// The token-protected API; `rest` follows `/admin/`.
    async fn api(&self, session: &ServerSession, method: &str, rest: &str, body: &[u8]) -> Reply {
        match (method, rest) {
            ("GET", "rooms") => return self.rooms().await,
            ("GET", "config") if self.rooms.len() != 1 => {
                let rooms: Vec<serde_json::Value> =
                    self.rooms.iter().map(RoomAdmin::config).collect();
                return Reply::json(200, &serde_json::json!({ "rooms": rooms }));
            }
            ("POST", "reload") => return reloaded(self.reloader.reload().await),
            ("GET", "report") => {
                return report::report(
                    &self.rooms,
                    self.admission.instance(),
                    self.clock.now_ms(),
                    session.req_header().uri.query(),
                )
                .await;
            }
            ("GET", "audit") => {
                let entries = self.audit.newest_first();
                return Reply::json(200, &serde_json::json!({ "entries": entries }));
            }
            _ => {}
        }
        // `/admin/rooms/{id}/...` names the room; a proxy of one room takes `/admin/...` too.
        let (room, rest) = match rest.strip_prefix("rooms/") {
            Some(in_room) => {
                let (id, rest) = in_room.split_once('/').unwrap_or((in_room, ""));
                match self.rooms.iter().find(|r| r.id() == id) {
                    Some(room) => (room, rest),
                    None => return error(404, format!("no room {id:?}")),
                }
            }
            None => match self.rooms.as_slice() {
                [room] => (room, rest),
                _ => {
                    return error(
                        404,
                        "this proxy runs several rooms: use /admin/rooms/{id}/... (GET /admin/rooms lists them)",
                    );
                }
            },
        };
        let request = RoomRequest {
            session,
            method,
            rest,
            body,
        };
        room.route(request, &self.admission, &self.reloader, &self.listener)
            .await
    }
}

/// Implemented directly rather than through Pingora's `ServeHttp`, which writes one whole answer:
/// the live view is a stream. The rest is what `ServeHttp` does: one answer, then the
/// connection kept alive (60 s) unless the server is shutting down.
#[async_trait]
impl HttpServerApp for AdminApp {
    async fn process_new_http(
        self: &Arc<Self>,
        mut session: ServerSession,
        shutdown: &ShutdownWatch,
    ) -> Option<ReusedHttpStream> {
        match session.read_request().await {
            Ok(true) => {}
            Ok(false) => return None,
            Err(e) => {
                log::debug!("admin listener: no request read: {e}");
                return None;
            }
        }
        session.set_keepalive(if *shutdown.borrow() { None } else { Some(60) });
        match self.route(&mut session).await {
            Routed::Reply(reply) => {
                if let Err(e) = write_reply(&mut session, reply).await {
                    log::debug!("admin listener: answer not written: {e}");
                    return None;
                }
                let settings = HttpPersistentSettings::for_session(&session);
                match session.finish().await {
                    Ok(reusable) => reusable
                        .map(|stream| ReusedHttpStream::from_reusable_stream(stream, settings)),
                    Err(e) => {
                        log::debug!("admin listener: request not finished: {e}");
                        None
                    }
                }
            }
            Routed::Live(watcher) => {
                self.live(session, watcher, shutdown.clone()).await;
                None
            }
        }
    }
}
