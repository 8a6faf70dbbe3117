//! The admin listener, apart from the public port: health, readiness, metrics, and the
//! token-protected room API.

use std::sync::Arc;

use async_trait::async_trait;
use pingora_core::apps::http_app::ServeHttp;
use pingora_core::protocols::http::ServerSession;
use serde::Deserialize;

use subtle::ConstantTimeEq;

use crate::config::RoomSettings;
use crate::config::file::EventSection;
use crate::config::model::merge_patch;
use crate::core::schedule::Phase;
use crate::gate::Gate;
use crate::respond::reply::Reply;
use crate::room::{LiveSettings, Room, StoreHealth};
use crate::service::admission::AdmissionLoop;
use crate::service::metrics::MetricsRegistry;
use crate::service::reload::{ReloadError, Reloader};
use crate::store::Store;

/// Admin request bodies are small JSON objects.
const MAX_BODY: usize = 64 * 1024;

pub struct AdminApp {
    room_id: String,
    store: Arc<dyn Store>,
    metrics: Arc<MetricsRegistry>,
    settings: Arc<LiveSettings>,
    health: Arc<StoreHealth>,
    gate: Arc<Gate>,
    admission: Arc<AdmissionLoop>,
    reloader: Arc<Reloader>,
    token: String,
    /// `[admin] ready_requires_store`: /readyz fails while the store is unreachable.
    ready_requires_store: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RevokeRequest {
    pass_id: String,
}

fn find(events: &[EventSection], name: &str) -> Option<usize> {
    events.iter().position(|e| e.name == name)
}

enum EventChange<'a> {
    Add,
    Change(&'a str),
    Delete(&'a str),
}

async fn read_json<T: serde::de::DeserializeOwned>(
    session: &mut ServerSession,
) -> Result<T, Reply> {
    let body = read_body(session).await?;
    serde_json::from_slice(&body)
        .map_err(|e| error(400, format!("body is not valid JSON for this: {e}")))
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

/// What the admin API is given besides the room's shared state.
pub struct AdminParts {
    pub gate: Arc<Gate>,
    pub admission: Arc<AdmissionLoop>,
    pub reloader: Arc<Reloader>,
    pub token: String,
    pub ready_requires_store: bool,
    pub metrics: Arc<MetricsRegistry>,
}

impl AdminApp {
    pub fn new(room: &Room, parts: AdminParts) -> Self {
        Self {
            room_id: room.id.clone(),
            store: room.store.clone(),
            metrics: parts.metrics,
            settings: room.settings.clone(),
            health: room.health.clone(),
            gate: parts.gate,
            admission: parts.admission,
            reloader: parts.reloader,
            token: parts.token,
            ready_requires_store: parts.ready_requires_store,
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

    async fn state(&self) -> Reply {
        let settings = self.settings.now();
        let counts = self.store.counts().await;
        self.health.note(&counts);
        let leader = self.store.leader().await.ok().flatten();
        match counts {
            Ok(c) => Reply::json(
                200,
                &serde_json::json!({
                    "room": self.room_id,
                    "name": settings.name,
                    "occupancy": c.occupancy(),
                    "passes": c.passes,
                    "called": c.called,
                    "total_active_users": settings.total_active_users,
                    "new_users_per_minute": settings.new_users_per_minute,
                    "burst": settings.burst,
                    "queue_length": c.queued,
                    "admitted_last_minute": c.admitted_last_minute,
                    "admitted_total": c.admitted_total,
                    "abandoned_total": c.abandoned_total,
                    "expired_total": c.expired_total,
                    "revoked_total": c.revoked_total,
                    "no_show_total": c.no_show_total,
                    "queueing_method": settings.queueing_method.as_str(),
                    "event": settings.event.as_ref().map(|e| e.name.as_str()),
                    "prequeueing": settings.prequeueing(),
                    "queue_all": settings.queue_all,
                    "suspended": settings.suspended,
                    "session_duration_seconds": settings.session_duration.as_secs_f64(),
                    "instance": self.admission.instance(),
                    "leader": leader,
                    "is_leader": self.admission.is_leader(),
                    "store_ok": self.health.is_up(),
                    "settings_version": self.admission.settings_version(),
                }),
            ),
            Err(e) => error(503, format!("store unavailable: {e}")),
        }
    }

    /// `GET /admin/events`: the scheduled events as configured, and the one governing now.
    fn events(&self) -> Reply {
        let configured = self.settings.configured();
        let now = self.settings.now();
        Reply::json(
            200,
            &serde_json::json!({
                "events": configured.section.events,
                "current": now.event.as_ref().map(|e| serde_json::json!({
                    "name": e.name,
                    "phase": match e.phase {
                        Phase::Prequeue => "prequeue",
                        Phase::Running => "running",
                    },
                })),
            }),
        )
    }

    /// Adds, changes or deletes one event, validated with all the others, applied everywhere.
    async fn change_events(&self, session: &mut ServerSession, change: EventChange<'_>) -> Reply {
        let mut section = self.settings.configured().section.clone();
        let (status, answer) = match change {
            EventChange::Add => {
                let event: EventSection = match read_json(session).await {
                    Ok(event) => event,
                    Err(reply) => return reply,
                };
                if find(&section.events, &event.name).is_some() {
                    return error(409, format!("an event named {:?} exists", event.name));
                }
                section.events.push(event.clone());
                (201, Some(event))
            }
            EventChange::Change(name) => {
                let Some(i) = find(&section.events, name) else {
                    return error(404, format!("no event named {name:?}"));
                };
                let patch: serde_json::Value = match read_json(session).await {
                    Ok(patch) => patch,
                    Err(reply) => return reply,
                };
                let serde_json::Value::Object(changes) = patch else {
                    return error(400, "body must be a JSON object of event keys");
                };
                let event = match merge_patch(&section.events[i], &changes) {
                    Ok(event) => event,
                    Err(e) => return error(400, format!("not an event: {e}")),
                };
                if event.name != name && find(&section.events, &event.name).is_some() {
                    return error(409, format!("an event named {:?} exists", event.name));
                }
                section.events[i] = event.clone();
                (200, Some(event))
            }
            EventChange::Delete(name) => {
                let Some(i) = find(&section.events, name) else {
                    return error(404, format!("no event named {name:?}"));
                };
                section.events.remove(i);
                (200, None)
            }
        };
        let settings = match RoomSettings::from_section(&section) {
            Ok(settings) => settings,
            Err(e) => return error(400, e.to_string()),
        };
        match self.admission.publish_settings(settings).await {
            Ok(_) => match answer {
                Some(event) => Reply::json(status, &event),
                None => Reply::json(status, &serde_json::json!({ "deleted": true })),
            },
            Err(e) => error(503, format!("not applied: {e}")),
        }
    }

    async fn patch_config(&self, session: &mut ServerSession) -> Reply {
        let content_type = session
            .req_header()
            .headers
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(|v| {
                v.split(';')
                    .next()
                    .unwrap_or("")
                    .trim()
                    .to_ascii_lowercase()
            });
        if let Some(content_type) = content_type
            && content_type != "application/merge-patch+json"
            && content_type != "application/json"
        {
            return error(
                415,
                format!("{content_type} is not a merge patch: send application/merge-patch+json"),
            )
            .with_header("accept-patch", "application/merge-patch+json");
        }
        let body = match read_body(session).await {
            Ok(body) => body,
            Err(reply) => return reply,
        };
        let patch: serde_json::Value = match serde_json::from_slice(&body) {
            Ok(v) => v,
            Err(e) => return error(400, format!("body is not JSON: {e}")),
        };
        let settings = match self.settings.configured().patched(&patch) {
            Ok(s) => s,
            Err(e) => return error(400, e.to_string()),
        };
        match self.admission.publish_settings(settings).await {
            Ok(section) => Reply::json(200, &section),
            Err(e) => error(503, format!("not applied: {e}")),
        }
    }

    async fn revoke(&self, session: &mut ServerSession) -> Reply {
        let body = match read_body(session).await {
            Ok(body) => body,
            Err(reply) => return reply,
        };
        let request: RevokeRequest = match serde_json::from_slice(&body) {
            Ok(r) => r,
            Err(e) => return error(400, format!("expected {{\"pass_id\": \"...\"}}: {e}")),
        };
        match self.gate.end_pass(&request.pass_id).await {
            Ok(revoked) => Reply::json(200, &serde_json::json!({ "revoked": revoked })),
            Err(e) => error(503, format!("not revoked: {e}")),
        }
    }

    /// `POST /admin/reload`: the file's [room] becomes the live settings, as on SIGHUP.
    async fn reload(&self) -> Reply {
        match self.reloader.reload().await {
            Ok(done) => Reply::json(200, &done),
            Err(e @ ReloadError::NoFile) => error(409, e.to_string()),
            Err(e @ (ReloadError::Config(_) | ReloadError::Fixed { .. })) => {
                error(400, e.to_string())
            }
            Err(e @ ReloadError::Store(_)) => error(503, e.to_string()),
        }
    }

    /// `/readyz`: ready while this instance can serve. A store outage leaves it ready (pass
    /// holders are served, newcomers follow `[store] on_error`): with one shared store, failing
    /// readiness would take every instance out of the load balancer at once. Kubernetes' own
    /// convention for `?verbose`: one `[+]`/`[-]` line per check.
    async fn ready(&self, verbose: bool) -> Reply {
        let ping = self.store.ping().await;
        self.health.note(&ping);
        let store_line = match &ping {
            Ok(()) => "[+]store ok".to_owned(),
            Err(e) if self.ready_requires_store => format!("[-]store failed: {e}"),
            Err(e) => format!("[+]store failed: {e} (not required: ready_requires_store = false)"),
        };
        let ready = ping.is_ok() || !self.ready_requires_store;
        let status = if ready { 200 } else { 503 };
        let verdict = if ready {
            "readyz check passed"
        } else {
            "readyz check failed"
        };
        if verbose {
            Reply::text(status, format!("{store_line}\n{verdict}\n"))
        } else if ready {
            Reply::text(status, "ready\n")
        } else {
            Reply::text(status, format!("not ready: {store_line}\n"))
        }
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
                if let Some(name) = p.strip_prefix("/admin/events/") {
                    return match method.as_str() {
                        "PUT" => self.change_events(session, EventChange::Change(name)).await,
                        "DELETE" => self.change_events(session, EventChange::Delete(name)).await,
                        _ => error(405, "use PUT or DELETE on /admin/events/{name}"),
                    };
                }
                match (method.as_str(), p) {
                    ("GET", "/admin/state") => self.state().await,
                    ("GET", "/admin/events") => self.events(),
                    ("POST", "/admin/events") => {
                        self.change_events(session, EventChange::Add).await
                    }
                    // RFC 7396 merge patch; PUT kept for the clients written before PATCH.
                    ("PATCH" | "PUT", "/admin/config") => self.patch_config(session).await,
                    ("POST", "/admin/revoke") => self.revoke(session).await,
                    ("POST", "/admin/reload") => self.reload().await,
                    _ => error(404, "no such admin endpoint"),
                }
            }
            _ => error(404, "no such endpoint"),
        }
    }
}

#[async_trait]
impl ServeHttp for AdminApp {
    async fn response(&self, session: &mut ServerSession) -> http::Response<Vec<u8>> {
        self.route(session).await.into_http()
    }
}
