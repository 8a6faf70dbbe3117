//! For `--test`: what the room runs may not be what the file says, since live changes saved in
//! the store outlive restarts. With a Redis store, each room's saved settings are read (within a
//! short timeout) and compared with the file, key by key.

use std::time::Duration;

use crate::config::Config;
use crate::config::model::{Backend, mask_room};
use crate::room::changes::{self, Saved};
use crate::store::redis::{RedisOptions, TimeSource, peek_settings};

/// `--test` waits no longer than this for the store: a check must not hang on a firewall.
pub const TEST_TIMEOUT: Duration = Duration::from_secs(3);

/// Lines for the operator: where each room's live settings differ from the file, or why that
/// could not be read. Empty with the memory store (nothing of it outlives the process).
pub fn live_overrides(config: &Config, timeout: Duration) -> Vec<String> {
    let Backend::Redis { url } = &config.store.backend else {
        return Vec::new();
    };
    // A rediss:// URL needs it, as at start.
    crate::service::tls::install_crypto_provider();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => return vec![unreadable(&e.to_string())],
    };
    runtime.block_on(async {
        match tokio::time::timeout(timeout, read_all(config, url, timeout)).await {
            Ok(lines) => lines,
            Err(_) => vec![unreadable(&format!(
                "no answer within {}s",
                timeout.as_secs_f64()
            ))],
        }
    })
}

fn unreadable(reason: &str) -> String {
    format!(
        "live settings: cannot read them from the store ({reason}): what runs may differ from \
         this file (GET /admin/config on a running instance shows it)"
    )
}

async fn read_all(config: &Config, url: &str, timeout: Duration) -> Vec<String> {
    let mut lines = Vec::new();
    for room in &config.rooms {
        let options = RedisOptions {
            url: url.to_owned(),
            prefix: config.store.prefix.clone(),
            room: room.id.clone(),
            connect_timeout: config.store.connect_timeout.min(timeout),
            command_timeout: config.store.command_timeout.min(timeout),
            time: TimeSource::Server,
            seed: 0,
            sentinel_auth: super::stores::sentinel_auth(config),
            // A look at the settings writes no admission.
            replica_acks: None,
        };
        let saved = match peek_settings(&options).await {
            Ok(saved) => saved,
            Err(e) => {
                lines.push(unreadable(&e.to_string()));
                return lines;
            }
        };
        let file = &room.settings.section;
        let Some(saved) = saved else {
            lines.push(format!(
                "room {}: no live settings saved in the store: the file applies",
                room.id
            ));
            continue;
        };
        let record = match Saved::decode(&saved.json) {
            Ok(record) => record,
            Err(e) => {
                lines.push(format!(
                    "room {}: the store's live settings (version {}) cannot be read ({e}): a \
                     running instance ignores them",
                    room.id, saved.version
                ));
                continue;
            }
        };
        let (mut live, mut file) = (record.room, file.clone());
        mask_room(&mut live);
        mask_room(&mut file);
        let overrides = changes::overrides(&live, &file, &record.changes);
        if overrides.is_empty() {
            lines.push(format!(
                "room {}: the store's live settings (version {}) are the file's",
                room.id, saved.version
            ));
            continue;
        }
        lines.push(format!(
            "room {}: the store's live settings (version {}) override the file, and a start \
             applies them (POST /admin/reload makes the file's apply again):",
            room.id, saved.version
        ));
        for o in overrides {
            let how = match (&o.changed_by, &o.changed_at) {
                (Some(by), Some(at)) => format!(" ({by} at {at})"),
                _ => String::new(),
            };
            lines.push(format!(
                "  room.{}: {} live, {} in the file{how}",
                o.key,
                shown(&o.value),
                shown(&o.file)
            ));
        }
    }
    lines
}

fn shown(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::Null => "unset".to_owned(),
        other => other.to_string(),
    }
}
