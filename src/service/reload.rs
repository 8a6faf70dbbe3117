//! Reloading the rooms' settings from the configuration file (SIGHUP, `POST /admin/reload`, or
//! one room's `POST /admin/rooms/{id}/reload`), without touching a connection. Each room of the
//! file becomes the live settings of that room on every instance, exactly as a live change
//! through the admin API would make it, and each room's `[autopilot]` applies to this instance's
//! autopilot (its leader reconfigures the controller, or stops steering when it is turned off);
//! the other sections (and a room added or removed) only take effect in a new process (a restart
//! or a hand-over), and the reload says which changed.

use std::sync::Arc;

use serde::Serialize;

use crate::config::RoomSettings;
use crate::config::file::{ConfigFile, EventSection, RoomSection};
use crate::config::model::ProcessEnvironment;
use crate::config::{Config, ConfigError};
use crate::room::admission::RoomLoop;
use crate::room::changes;
use crate::service::admission::AdmissionLoop;
use crate::store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    #[error("the proxy was not started from a file: nothing to reload")]
    NoFile,
    #[error("{0}")]
    Config(#[from] ConfigError),
    #[error("{key}: cannot change while running: restart the proxy or hand over to a new one")]
    Fixed { key: String },
    #[error("no room {0:?}")]
    NoRoom(String),
    #[error("not applied: {0}")]
    Store(#[from] StoreError),
    /// The events added live would be kept, but they do not fit with the file's settings.
    #[error(
        "the events added live ({names}) do not fit with the file: {reason}; delete them \
         (DELETE /admin/events/{{name}}) or add them to the file"
    )]
    LiveEvents { names: String, reason: ConfigError },
}

/// What a reload applied, and which sections wait for a new process.
#[derive(Debug, Serialize)]
pub struct Reloaded {
    /// The one room of a `[room]` file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub room: Option<RoomSection>,
    /// The rooms of a `[[rooms]]` file (the one room asked for, for a room's own reload).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rooms: Vec<RoomSection>,
    pub needs_restart: Vec<String>,
    /// Events added live through the admin API and not in the file: kept, by room id.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub kept_live_events: Vec<String>,
}

pub struct Reloader {
    /// The configuration this process started with.
    running: Config,
    admission: Arc<AdmissionLoop>,
}

fn same<T: Serialize>(a: &T, b: &T) -> bool {
    serde_json::to_value(a).ok() == serde_json::to_value(b).ok()
}

/// The sections of `fresh` (other than the rooms' own settings) that differ from `running`.
fn changed_sections(running: &ConfigFile, fresh: &ConfigFile) -> Vec<String> {
    let mut changed = Vec::new();
    let mut check = |name: &str, differs: bool| {
        if differs {
            changed.push(name.to_owned());
        }
    };
    check("listen", !same(&running.listen, &fresh.listen));
    check("origin", !same(&running.origin, &fresh.origin));
    check("pass", !same(&running.pass, &fresh.pass));
    check("store", !same(&running.store, &fresh.store));
    check("admin", !same(&running.admin, &fresh.admin));
    check("page", !same(&running.page, &fresh.page));
    check("log", !same(&running.log, &fresh.log));
    check("turnstile", !same(&running.turnstile, &fresh.turnstile));
    check("rate_limit", !same(&running.rate_limit, &fresh.rate_limit));
    // The webhook's queue and sender are made once, at start.
    check("notify", !same(&running.notify, &fresh.notify));
    // [autopilot] is not among them: a reload applies it (below).
    for (i, (was, is)) in running.rooms.iter().zip(&fresh.rooms).enumerate() {
        check(&format!("rooms[{i}].page"), !same(&was.page, &is.page));
    }
    changed
}

/// The file's settings with the events added live (`POST /admin/events`) that the file does
/// not name: an operator who reloads to pick up another key would not expect a drop scheduled
/// through the API to vanish. An event the file names again is the file's.
fn keep_live_events(
    running: &RoomLoop,
    from_file: RoomSettings,
) -> Result<(RoomSettings, Vec<String>), ReloadError> {
    let live = running.settings_section();
    let added = changes::added_events(&live, &running.file_section());
    let kept: Vec<EventSection> = added
        .into_iter()
        .filter(|e| !from_file.section.events.iter().any(|f| f.name == e.name))
        .collect();
    if kept.is_empty() {
        return Ok((from_file, Vec::new()));
    }
    let names: Vec<String> = kept.iter().map(|e| e.name.clone()).collect();
    let mut section = from_file.section.clone();
    section.events.extend(kept);
    match RoomSettings::from_section(&section) {
        Ok(settings) => Ok((settings, names)),
        Err(reason) => Err(ReloadError::LiveEvents {
            names: names.join(", "),
            reason,
        }),
    }
}

/// Where a room is in the file, for the keys errors name.
fn room_key(config: &Config, i: usize, key: &str) -> String {
    if config.file.room.is_some() {
        format!("room.{key}")
    } else {
        format!("rooms[{i}].{key}")
    }
}

impl Reloader {
    pub fn new(running: Config, admission: Arc<AdmissionLoop>) -> Self {
        Self { running, admission }
    }

    /// Applies every room of the file.
    pub async fn reload(&self) -> Result<Reloaded, ReloadError> {
        self.reload_rooms(None).await
    }

    /// Applies the file's settings of one room only.
    pub async fn reload_room(&self, id: &str) -> Result<Reloaded, ReloadError> {
        self.reload_rooms(Some(id)).await
    }

    async fn reload_rooms(&self, only: Option<&str>) -> Result<Reloaded, ReloadError> {
        let path = self.running.source.as_ref().ok_or(ReloadError::NoFile)?;
        let (fresh, warnings) = Config::load(path, &ProcessEnvironment, self.running.dev)?;
        for warning in &warnings {
            log::warn!("{}: {warning}", path.display());
        }
        let (running, fresh_rooms) = (&self.running.rooms, &fresh.rooms);
        if fresh_rooms.len() != running.len()
            || fresh.file.room.is_some() != self.running.file.room.is_some()
        {
            return Err(ReloadError::Fixed {
                key: "rooms".into(),
            });
        }
        for (i, (was, is)) in running.iter().zip(fresh_rooms).enumerate() {
            for (key, same) in [
                ("id", was.id == is.id),
                ("host", was.routes[0].host == is.routes[0].host),
                ("path", was.routes[0].path == is.routes[0].path),
                ("routes", was.routes == is.routes),
                ("cookie_domain", was.cookie_domain == is.cookie_domain),
            ] {
                if !same {
                    return Err(ReloadError::Fixed {
                        key: room_key(&fresh, i, key),
                    });
                }
            }
        }
        if let Some(id) = only
            && !running.iter().any(|r| r.id == id)
        {
            return Err(ReloadError::NoRoom(id.to_owned()));
        }
        let needs_restart = changed_sections(&self.running.file, &fresh.file);
        // Every room is settled before any is published: a refusal applies nothing.
        let mut plans = Vec::new();
        let mut kept_live_events = Vec::new();
        for room in fresh.rooms {
            if only.is_some_and(|id| id != room.id) {
                continue;
            }
            let Some(running) = self.admission.room(&room.id) else {
                return Err(ReloadError::NoRoom(room.id));
            };
            let file = room.settings.section.clone();
            let (settings, kept) = keep_live_events(running, room.settings)?;
            kept_live_events.extend(kept.iter().map(|name| format!("{}: {name}", room.id)));
            plans.push((running, settings, file, room.autopilot, room.id));
        }
        let mut applied = Vec::new();
        for (running, settings, file, autopilot, id) in plans {
            applied.push(running.publish_reload(settings, file).await?);
            if *running.pilot().config() != autopilot {
                log::info!(
                    "room {id}: [autopilot] reloaded (enabled = {})",
                    autopilot.enabled
                );
                running.pilot().reconfigure(autopilot);
            }
        }
        let one_room = fresh.file.room.is_some();
        Ok(Reloaded {
            room: if one_room { applied.pop() } else { None },
            rooms: if one_room { Vec::new() } else { applied },
            needs_restart,
            kept_live_events,
        })
    }

    /// A reload on behalf of a signal: the outcome goes to the log.
    pub async fn reload_and_log(&self) {
        let from = self
            .running
            .source
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        match self.reload().await {
            Ok(done) if done.needs_restart.is_empty() => {
                log::info!(
                    file = from.as_str(),
                    kept_live_events = done.kept_live_events.join(",").as_str();
                    "room settings reloaded"
                );
            }
            Ok(done) => log::warn!(
                file = from.as_str(),
                needs_restart = done.needs_restart.join(",").as_str();
                "room settings reloaded; changes to other sections wait for a restart or a \
                 hand-over"
            ),
            Err(e) => log::error!(file = from.as_str(); "reload refused, nothing changed: {e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_webhook_waits_for_a_restart() {
        let running = ConfigFile::parse("[origin]\naddress = \"127.0.0.1:9\"\n").unwrap();
        let mut fresh = running.clone();
        assert!(changed_sections(&running, &fresh).is_empty());
        fresh.notify.webhook_url = Some("https://shop.example/hook".into());
        assert_eq!(changed_sections(&running, &fresh), ["notify"]);
    }
}
