//! Reloading the room's settings from the configuration file (SIGHUP or `POST /admin/reload`),
//! without touching a connection. The file's `[room]` becomes the live settings of every
//! instance, exactly as `PUT /admin/config` would make it; the other sections only take effect
//! in a new process (a restart or a hand-over), and the reload says which of them changed.

use std::sync::Arc;

use serde::Serialize;

use crate::config::file::{ConfigFile, RoomSection};
use crate::config::model::ProcessEnvironment;
use crate::config::{Config, ConfigError};
use crate::service::admission::AdmissionLoop;
use crate::store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    #[error("the proxy was not started from a file: nothing to reload")]
    NoFile,
    #[error("{0}")]
    Config(#[from] ConfigError),
    #[error("{key}: cannot change while running: restart the proxy or hand over to a new one")]
    Fixed { key: &'static str },
    #[error("not applied: {0}")]
    Store(#[from] StoreError),
}

/// What a reload applied, and which sections wait for a new process.
#[derive(Debug, Serialize)]
pub struct Reloaded {
    pub room: RoomSection,
    pub needs_restart: Vec<&'static str>,
}

pub struct Reloader {
    /// The configuration this process started with.
    running: Config,
    admission: Arc<AdmissionLoop>,
}

fn same<T: Serialize>(a: &T, b: &T) -> bool {
    serde_json::to_value(a).ok() == serde_json::to_value(b).ok()
}

/// The sections of `fresh` (other than [room]) that differ from `running`.
fn changed_sections(running: &ConfigFile, fresh: &ConfigFile) -> Vec<&'static str> {
    let mut changed = Vec::new();
    let mut check = |name, differs: bool| {
        if differs {
            changed.push(name);
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
    check("autopilot", !same(&running.autopilot, &fresh.autopilot));
    changed
}

impl Reloader {
    pub fn new(running: Config, admission: Arc<AdmissionLoop>) -> Self {
        Self { running, admission }
    }

    pub async fn reload(&self) -> Result<Reloaded, ReloadError> {
        let path = self.running.source.as_ref().ok_or(ReloadError::NoFile)?;
        let (fresh, warnings) = Config::load(path, &ProcessEnvironment, self.running.dev)?;
        for warning in &warnings {
            log::warn!("{}: {warning}", path.display());
        }
        if fresh.room_id != self.running.room_id {
            return Err(ReloadError::Fixed { key: "room.id" });
        }
        if fresh.route.host != self.running.route.host {
            return Err(ReloadError::Fixed { key: "room.host" });
        }
        if fresh.route.path != self.running.route.path {
            return Err(ReloadError::Fixed { key: "room.path" });
        }
        let needs_restart = changed_sections(&self.running.file, &fresh.file);
        let room = self.admission.publish_settings(fresh.room).await?;
        Ok(Reloaded {
            room,
            needs_restart,
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
                log::info!(file = from.as_str(); "room settings reloaded");
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
