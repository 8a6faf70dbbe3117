//! The admin listener, apart from the public port: health, readiness, metrics, and the
//! token-protected room API.

use std::sync::Arc;

use async_trait::async_trait;
use pingora_core::apps::http_app::ServeHttp;
use pingora_core::protocols::http::ServerSession;
use serde::Deserialize;

use crate::admission::AdmissionLoop;
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

    async fn put_config(&self, session: &mut ServerSession) -> Reply {
        let body = match read_body(session).await {
            Ok(body) => body,
            Err(reply) => return reply,
        };
        let patch: serde_json::Value = match serde_json::from_slice(&body) {
            Ok(v) => v,
            Err(e) => return error(400, format!("body is not JSON: {e}")),
        };
        let settings = match self.gate.settings().patched(&patch) {
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
                match (method.as_str(), p) {
                    ("GET", "/admin/state") => self.state().await,
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
