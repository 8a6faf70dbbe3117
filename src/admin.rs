//! The admin listener, apart from the public port: health, readiness, metrics, and the
//! token-protected room API.

use std::sync::Arc;

use async_trait::async_trait;
use pingora_core::apps::http_app::ServeHttp;
use pingora_core::protocols::http::ServerSession;
use serde::Deserialize;

use crate::admission::AdmissionLoop;
use crate::config::RoomSettings;
use crate::config::file::EventSection;
use crate::config::model::merge_patch;
use crate::core::schedule::Phase;
use crate::gate::Gate;
use crate::reload::{ReloadError, Reloader};
use crate::reply::Reply;

/// Admin request bodies are small JSON objects.
const MAX_BODY: usize = 64 * 1024;

pub struct AdminApp {
    gate: Arc<Gate>,
    admission: Arc<AdmissionLoop>,
    reloader: Arc<Reloader>,
    token: String,
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

/// Compares in time independent of where the first difference is.
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
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

impl AdminApp {
    pub fn new(
        gate: Arc<Gate>,
        admission: Arc<AdmissionLoop>,
        reloader: Arc<Reloader>,
        token: String,
    ) -> Self {
        Self {
            gate,
            admission,
            reloader,
            token,
        }
    }

    fn authorised(&self, session: &ServerSession) -> bool {
        session
            .req_header()
            .headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .is_some_and(|given| same_secret(given.trim().as_bytes(), self.token.as_bytes()))
    }

    async fn state(&self) -> Reply {
        let settings = self.gate.settings();
        let counts = self.gate.store.counts().await;
        self.gate.note_store(&counts);
        let leader = self.gate.store.leader().await.ok().flatten();
        match counts {
            Ok(c) => Reply::json(
                200,
                &serde_json::json!({
                    "room": self.gate.room_id,
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
                    "store_ok": self.gate.store_ok(),
                    "settings_version": self.admission.settings_version(),
                }),
            ),
            Err(e) => error(503, format!("store unavailable: {e}")),
        }
    }

    /// `GET /admin/events`: the scheduled events as configured, and the one governing now.
    fn events(&self) -> Reply {
        let configured = self.gate.configured_settings();
        let now = self.gate.settings();
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
        let mut section = self.gate.configured_settings().section.clone();
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

    async fn put_config(&self, session: &mut ServerSession) -> Reply {
        let body = match read_body(session).await {
            Ok(body) => body,
            Err(reply) => return reply,
        };
        let patch: serde_json::Value = match serde_json::from_slice(&body) {
            Ok(v) => v,
            Err(e) => return error(400, format!("body is not JSON: {e}")),
        };
        let settings = match self.gate.configured_settings().patched(&patch) {
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
        let ended = self
            .gate
            .end_pass(&request.pass_id, &self.gate.settings())
            .await;
        self.gate.note_store(&ended);
        match ended {
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

    async fn route(&self, session: &mut ServerSession) -> Reply {
        let method = session.req_header().method.clone();
        let path = session.req_header().uri.path().to_owned();
        match (method.as_str(), path.as_str()) {
            ("GET", "/healthz") => Reply::text(200, "ok\n"),
            ("GET", "/readyz") => {
                let ping = self.gate.store.ping().await;
                self.gate.note_store(&ping);
                match ping {
                    Ok(()) => Reply::text(200, "ready\n"),
                    Err(e) => Reply::text(503, format!("not ready: {e}\n")),
                }
            }
            ("GET", "/metrics") => {
                Reply::new(200, "text/plain; version=0.0.4", self.gate.metrics.render())
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
                    ("PUT", "/admin/config") => self.put_config(session).await,
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

#[cfg(test)]
mod tests {
    use super::same_secret;

    #[test]
    fn secrets_compare_whole() {
        assert!(same_secret(b"abc", b"abc"));
        assert!(!same_secret(b"abc", b"abd"));
        assert!(!same_secret(b"abc", b"abcd"));
    }
}
