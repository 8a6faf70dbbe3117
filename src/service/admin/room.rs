//! One room's admin API: its state, live settings, scheduled events, revocation, reload, the
//! autopilot's pause switch and the look-up of a visitor by queue id.
//! Served at `/admin/rooms/{id}/...`, and at `/admin/...` when the proxy runs one room.

use std::sync::Arc;

use pingora_core::protocols::http::ServerSession;
use serde::Deserialize;

use super::{ListenerState, error, parse_json, reloaded};
use crate::config::RoomSettings;
use crate::config::file::EventSection;
use crate::config::model::{mask_room, merge_patch_named, new_event, rules_can_hold};
use crate::core::room::RoomCounts;
use crate::core::schedule::Phase;
use crate::gate::Gate;
use crate::request::route::Route;
use crate::respond::reply::Reply;
use crate::room::admission::{Published, RoomLoop};
use crate::room::{Room, changes};
use crate::service::admission::AdmissionLoop;
use crate::service::reload::Reloader;
use crate::store::StoreError;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RevokeRequest {
    pass_id: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AutopilotRequest {
    paused: bool,
}

fn find(events: &[EventSection], name: &str) -> Option<usize> {
    events.iter().position(|e| e.name == name)
}

enum EventChange<'a> {
    Add,
    Change(&'a str),
    Delete(&'a str),
}

/// One request to a room's API.
pub struct RoomRequest<'a> {
    pub session: &'a ServerSession,
    pub method: &'a str,
    /// What follows `/admin/` (or `/admin/rooms/{id}/`).
    pub rest: &'a str,
    /// Read already: the audit records it.
    pub body: &'a [u8],
}

/// What one room's API works on.
pub struct RoomAdmin {
    room: Arc<Room>,
    gate: Arc<Gate>,
    room_loop: Arc<RoomLoop>,
    /// What a live change of the rules is checked against, as `--test` checks the file's.
    reach: RuleReach,
}

/// The room's routes, and whether a trusted proxy names a country (`listen.country_header`).
pub struct RuleReach {
    pub routes: Vec<Route>,
    pub country_known: bool,
}

impl RoomAdmin {
    pub fn new(
        room: Arc<Room>,
        gate: Arc<Gate>,
        room_loop: Arc<RoomLoop>,
        reach: RuleReach,
    ) -> Self {
        Self {
            room,
            gate,
            room_loop,
            reach,
        }
    }

    pub fn id(&self) -> &str {
        &self.room.id
    }

    pub fn room(&self) -> &Arc<Room> {
        &self.room
    }

    pub fn room_loop(&self) -> &Arc<RoomLoop> {
        &self.room_loop
    }

    /// The room's store answers: for `/readyz`.
    pub async fn ping(&self) -> Result<(), crate::store::StoreError> {
        self.room.store.ping().await
    }

    pub async fn route(
        &self,
        request: RoomRequest<'_>,
        admission: &AdmissionLoop,
        reloader: &Reloader,
        listener: &ListenerState,
    ) -> Reply {
        let RoomRequest {
            session,
            method,
            rest,
            body,
        } = request;
        if let Some(queue_id) = rest.strip_prefix("visitors/") {
            return match method {
                "GET" => super::visitors::look_up(&self.room, queue_id).await,
                _ => error(405, "use GET on visitors/{queue_id}"),
            };
        }
        if let Some(name) = rest.strip_prefix("events/") {
            return match method {
                "PUT" | "PATCH" => {
                    let by = format!("{method} /admin/events/{name}");
                    self.change_events(body, EventChange::Change(name), &by)
                        .await
                }
                "DELETE" => {
                    let by = format!("DELETE /admin/events/{name}");
                    self.change_events(body, EventChange::Delete(name), &by)
                        .await
                }
                _ => error(405, "use PATCH (or PUT) or DELETE on events/{name}"),
            };
        }
        match (method, rest) {
            ("GET", "state") => self.state(admission, listener).await,
            ("GET", "config") => Reply::json(200, &self.config()),
            ("GET", "events") => self.events(),
            ("POST", "events") => {
                self.change_events(body, EventChange::Add, "POST /admin/events")
                    .await
            }
            // RFC 7396 merge patch; PUT kept for the clients written before PATCH.
            ("PATCH", "config") => {
                self.patch_config(session, body, "PATCH /admin/config")
                    .await
            }
            ("PUT", "config") => self.patch_config(session, body, "PUT /admin/config").await,
            ("POST", "revoke") => self.revoke(body).await,
            ("POST", "autopilot") => self.pause_autopilot(body).await,
            ("POST", "reload") => reloaded(reloader.reload_room(&self.room.id).await),
            _ => error(404, "no such admin endpoint"),
        }
    }

    /// The room's state. While the store is unreachable, the counts are those the admission
    /// loop last read (`stale`, `stale_seconds` old; null when it never reached the store), so
    /// that an operator still sees the room and its settings during an outage.
    pub async fn state(&self, admission: &AdmissionLoop, listener: &ListenerState) -> Reply {
        let settings = self.room.settings.now();
        // The room's own limits; those in force are the autopilot's (below) when it steers.
        let own = self.room.settings.own_now();
        let autopilot = self.autopilot_state();
        // Known down: answered at once from what was last read, not after a command timeout.
        let counts = if self.room.health.is_up() {
            self.room.store.counts().await
        } else {
            Err(StoreError::Unavailable("unreachable as last seen".into()))
        };
        let (counts, stale_seconds, store_error, leader) = match counts {
            Ok(c) => (Some(c), Some(0.0), None, admission.leader().await),
            Err(e) => {
                let last = self.room_loop.last_counts();
                let now = self.room.clock.now_ms();
                let age = last.map(|(at, _)| (now - at).max(0) as f64 / 1000.0);
                (last.map(|(_, c)| c), age, Some(e.to_string()), None)
            }
        };
        let count = |f: fn(&RoomCounts) -> u64| counts.as_ref().map(f);
        Reply::json(
            200,
            &serde_json::json!({
                "room": self.room.id,
                "name": settings.name,
                "stale": store_error.is_some(),
                "stale_seconds": stale_seconds,
                "store_error": store_error,
                "occupancy": count(RoomCounts::occupancy),
                "passes": count(|c| c.passes),
                "called": count(|c| c.called),
                "total_active_users": own.total_active_users,
                "new_users_per_minute": own.new_users_per_minute,
                "burst": own.burst,
                "autopilot": autopilot,
                "queue_length": count(|c| c.queued),
                "wait_estimate_seconds": counts
                    .as_ref()
                    .and_then(|c| self.gate.newcomer_estimate(&settings, c.queued).seconds()),
                "admitted_last_minute": count(|c| c.admitted_last_minute),
                "admitted_total": count(|c| c.admitted_total),
                "abandoned_total": count(|c| c.abandoned_total),
                "expired_total": count(|c| c.expired_total),
                "revoked_total": count(|c| c.revoked_total),
                "no_show_total": count(|c| c.no_show_total),
                "queueing_method": settings.queueing_method.as_str(),
                "event": settings.event.as_ref().map(|e| e.name.as_str()),
                "prequeueing": settings.prequeueing(),
                "queue_all": settings.queue_all,
                "suspended": settings.suspended,
                "pending": self.room_loop.pending(),
                "session_duration_seconds": settings.session_duration.as_secs_f64(),
                "instance": admission.instance(),
                "leader": leader,
                "is_leader": admission.is_leader(),
                "store_ok": self.room.health.is_up(),
                "settings_version": self.room_loop.settings_version(),
                "listener": listener.json(),
            }),
        )
    }

    /// `GET /admin/config`: the settings as configured (the file and what changed live), and
    /// each key that differs from the file with the file's value and when and how it changed.
    pub fn config(&self) -> serde_json::Value {
        let mut settings = self.room.settings.configured().section.clone();
        let mut file = (*self.room_loop.file_section()).clone();
        mask_room(&mut settings);
        mask_room(&mut file);
        let overrides = changes::overrides(&settings, &file, &self.room_loop.changes());
        serde_json::json!({
            "room": self.room.id,
            "settings_version": self.room_loop.settings_version(),
            "settings": settings,
            "overrides": overrides,
        })
    }

    /// `GET /admin/events`: the scheduled events as configured, and the one governing now.
    fn events(&self) -> Reply {
        let configured = self.room.settings.configured();
        let now = self.room.settings.now();
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
    async fn change_events(&self, body: &[u8], change: EventChange<'_>, by: &str) -> Reply {
        let mut section = self.room.settings.configured().section.clone();
        let (status, answer) = match change {
            EventChange::Add => {
                let body: serde_json::Value = match parse_json(body) {
                    Ok(body) => body,
                    Err(reply) => return reply,
                };
                let at = format!("room.events[{}]", section.events.len());
                let event = match new_event(&body, &at) {
                    Ok(event) => event,
                    Err(e) => return error(400, e.to_string()),
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
                let patch: serde_json::Value = match parse_json(body) {
                    Ok(patch) => patch,
                    Err(reply) => return reply,
                };
                let serde_json::Value::Object(changes) = patch else {
                    return error(400, "body must be a JSON object of event keys");
                };
                let at = format!("room.events[{i}]");
                let event = match merge_patch_named(&section.events[i], &changes, &at) {
                    Ok(event) => event,
                    Err(e) => return error(400, e.to_string()),
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
        // No key of an event is held during an outage: it is refused, saying what can be
        // changed now.
        match self.room_loop.change_settings(settings, &[], by).await {
            Ok(_) => match answer {
                Some(event) => Reply::json(status, &event),
                None => Reply::json(status, &serde_json::json!({ "deleted": true })),
            },
            Err(e) => error(503, e.to_string()),
        }
    }

    /// PATCH names its patch format (RFC 5789: 415 otherwise); PUT, the alias kept for scripts
    /// written before PATCH, is held to the same: a form or text body is a mistake, not a patch.
    /// `by` names the request in the record of changes.
    async fn patch_config(&self, session: &ServerSession, body: &[u8], by: &str) -> Reply {
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
        let patch: serde_json::Value = match serde_json::from_slice(body) {
            Ok(v) => v,
            Err(e) => return error(400, format!("body is not JSON: {e}")),
        };
        let settings = match self.room.settings.configured().patched(&patch) {
            Ok(s) => s,
            Err(e) => return error(400, e.to_string()),
        };
        let reach = &self.reach;
        if let Err(e) = rules_can_hold(&reach.routes, &settings.rules, reach.country_known) {
            return error(400, e.to_string());
        }
        let keys: Vec<&str> = patch
            .as_object()
            .map(|changes| changes.keys().map(String::as_str).collect())
            .unwrap_or_default();
        match self.room_loop.change_settings(settings, &keys, by).await {
            Ok(Published::Saved(section)) => Reply::json(200, &section),
            // Accepted, not done: applied on this instance, every other one learns it when the
            // store answers again.
            Ok(Published::Held { section, pending }) => {
                let mut answer =
                    serde_json::to_value(&section).unwrap_or_else(|_| serde_json::json!({}));
                if let Some(fields) = answer.as_object_mut() {
                    fields.insert("pending".into(), pending.into());
                }
                Reply::json(202, &answer)
            }
            Err(e) => error(503, e.to_string()),
        }
    }

    /// The autopilot's part of `/admin/state`: its status (the limits in force, why, what the
    /// last window read), and whether this instance decides (the leader) or applies.
    fn autopilot_state(&self) -> serde_json::Value {
        let status = self.room_loop.pilot().status();
        let (status, decides) = (&status.0, status.1);
        let mut value = serde_json::to_value(status).unwrap_or_else(|_| serde_json::json!({}));
        if let Some(fields) = value.as_object_mut() {
            fields.insert("decides".into(), decides.into());
            fields.insert(
                "changed_at".into(),
                status
                    .changed_at
                    .map(crate::clock::rfc3339_ms)
                    .map_or(serde_json::Value::Null, serde_json::Value::from),
            );
        }
        value
    }

    /// `POST /admin/autopilot` `{"paused": true|false}`: the switch every instance shares; the
    /// leader holds (or judges again) from its next tick, and the limits in force stay as they
    /// are while paused.
    async fn pause_autopilot(&self, body: &[u8]) -> Reply {
        let request: AutopilotRequest = match parse_json(body) {
            Ok(request) => request,
            Err(reply) => return reply,
        };
        if !self.room_loop.pilot().config().enabled {
            return error(
                409,
                "this room's autopilot is off ([autopilot] enabled = false)",
            );
        }
        let set = self.room.store.set_autopilot_paused(request.paused).await;
        match set {
            Ok(()) => {
                log::info!(
                    "autopilot of room {} {} by the admin API",
                    self.room.id,
                    if request.paused { "paused" } else { "resumed" }
                );
                Reply::json(200, &serde_json::json!({ "paused": request.paused }))
            }
            Err(e) => error(503, format!("not applied: {e}")),
        }
    }

    async fn revoke(&self, body: &[u8]) -> Reply {
        let request: RevokeRequest = match serde_json::from_slice(body) {
            Ok(r) => r,
            Err(e) => return error(400, format!("expected {{\"pass_id\": \"...\"}}: {e}")),
        };
        match self.gate.end_pass(&request.pass_id).await {
            Ok(revoked) => Reply::json(200, &serde_json::json!({ "revoked": revoked })),
            Err(e) => error(503, format!("not revoked: {e}")),
        }
    }
}
