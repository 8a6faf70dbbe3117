//! The admin listener, apart from the public port: health, readiness, metrics, and the
//! token-protected API: the rooms (`/admin/rooms`, one room's API in `room`), the reload of the
//! file, and, when the proxy runs one room, that room's API at `/admin/...` directly.

mod room;

use std::sync::Arc;

use async_trait::async_trait;
use pingora_core::apps::http_app::ServeHttp;
use pingora_core::protocols::http::ServerSession;
use subtle::ConstantTimeEq;

pub use room::RoomAdmin;

use crate::observe::MetricsRegistry;
use crate::proxy::Connections;
use crate::respond::reply::Reply;
use crate::service::admission::AdmissionLoop;
use crate::service::limits::OpenFiles;
use crate::service::reload::{ReloadError, Reloaded, Reloader};

/// Admin request bodies are small JSON objects.
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

async fn read_json<T: serde::de::DeserializeOwned>(
    session: &mut ServerSession,
) -> Result<T, Reply> {
    let body = read_body(session).await?;
    serde_json::from_slice(&body)
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
        }
    }

    fn authorised(&self, session: &ServerSession) -> bool {
        session
            .req_header()
            .headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .is_some_and(|given| bool::from(given.trim().as_bytes().ct_eq(self.token.as_bytes())))
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

    async fn route(&self, session: &mut ServerSession) -> Reply {
        let method = session.req_header().method.clone();
        let path = session.req_header().uri.path().to_owned();
        match (method.as_str(), path.as_str()) {
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
            (_, p) if p.starts_with("/admin/") => {
                if !self.authorised(session) {
                    return error(401, "missing or wrong bearer token")
                        .with_header("www-authenticate", "Bearer");
                }
                self.api(session, method.as_str(), &p["/admin/".len()..])
                    .await
            }
            _ => error(404, "no such endpoint"),
        }
    }

    /// The token-protected API; `rest` follows `/admin/`.
    async fn api(&self, session: &mut ServerSession, method: &str, rest: &str) -> Reply {
        match (method, rest) {
            ("GET", "rooms") => return self.rooms().await,
            ("GET", "config") if self.rooms.len() != 1 => {
                let rooms: Vec<serde_json::Value> =
                    self.rooms.iter().map(RoomAdmin::config).collect();
                return Reply::json(200, &serde_json::json!({ "rooms": rooms }));
            }
            ("POST", "reload") => return reloaded(self.reloader.reload().await),
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
        room.route(
            session,
            method,
            rest,
            &self.admission,
            &self.reloader,
            &self.listener,
        )
        .await
    }
}

#[async_trait]
impl ServeHttp for AdminApp {
    async fn response(&self, session: &mut ServerSession) -> http::Response<Vec<u8>> {
        self.route(session).await.into_http()
    }
}
