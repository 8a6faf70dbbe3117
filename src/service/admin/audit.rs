//! The record of changes made through the admin API, by the bearer token or a console session:
//! who, when, what (method, path, the fields the body set) and from which address, with the
//! answer's status so that a refused change shows too. The last [`MAX_ENTRIES`] are kept in
//! memory for `GET /admin/audit`; each is also one structured line of the log file (target
//! `waitroom::audit`), which keeps them all.

use std::collections::VecDeque;
use std::sync::Mutex;

use serde::Serialize;
use serde_json::{Map, Value};

use crate::clock::{SharedClock, rfc3339_ms};

/// The log target of audit lines, to route or grep them apart from the access log.
pub const AUDIT_LOG: &str = "waitroom::audit";

/// Entries kept for the console; older ones live on in the log file.
pub const MAX_ENTRIES: usize = 1000;

/// Who made a change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    /// The bearer token (a script, curl).
    Token,
    /// A console session, by its short id.
    Console(String),
}

impl Caller {
    pub fn name(&self) -> String {
        match self {
            Caller::Token => "token".to_owned(),
            Caller::Console(short_id) => format!("console:{short_id}"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AuditEntry {
    /// RFC 3339, UTC.
    pub at: String,
    pub who: String,
    /// The peer address of the admin connection; `null` when it had none (a Unix socket).
    pub client: Option<String>,
    pub method: String,
    pub path: String,
    /// The top-level fields the body set. Only plain values are written out: a list or an object
    /// (the bypass rules' values, which are secrets the config API masks) shows as `"…"`.
    pub changed: Map<String, Value>,
    pub status: u16,
}

/// What a change's request was, before its answer.
pub struct Change<'a> {
    pub who: &'a Caller,
    pub client: Option<String>,
    pub method: &'a str,
    pub path: &'a str,
    pub body: &'a [u8],
}

/// The fields of a JSON object body, as the audit shows them (see [`AuditEntry::changed`]). A
/// body that is not a JSON object (empty, or refused as malformed) changed no field.
fn changed_fields(body: &[u8]) -> Map<String, Value> {
    let Ok(Value::Object(fields)) = serde_json::from_slice::<Value>(body) else {
        return Map::new();
    };
    fields
        .into_iter()
        .map(|(key, value)| match value {
            Value::Array(_) | Value::Object(_) => (key, Value::from("…")),
            plain => (key, plain),
        })
        .collect()
}

pub struct AuditLog {
    clock: SharedClock,
    entries: Mutex<VecDeque<AuditEntry>>,
}

impl AuditLog {
    pub fn new(clock: SharedClock) -> Self {
        Self {
            clock,
            entries: Mutex::new(VecDeque::with_capacity(MAX_ENTRIES)),
        }
    }

    fn entries_mut(&self) -> std::sync::MutexGuard<'_, VecDeque<AuditEntry>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records `change`, answered with `status`, and writes its log line.
    pub fn record(&self, change: Change<'_>, status: u16) {
        let entry = AuditEntry {
            at: rfc3339_ms(self.clock.now_ms()),
            who: change.who.name(),
            client: change.client,
            method: change.method.to_owned(),
            path: change.path.to_owned(),
            changed: changed_fields(change.body),
            status,
        };
        let changed = Value::Object(entry.changed.clone()).to_string();
        log::info!(
            target: AUDIT_LOG,
            who = entry.who.as_str(),
            client = entry.client.as_deref().unwrap_or("-"),
            method = entry.method.as_str(),
            path = entry.path.as_str(),
            changed = changed.as_str(),
            status = entry.status;
            "admin change"
        );
        let mut entries = self.entries_mut();
        if entries.len() == MAX_ENTRIES {
            entries.pop_front();
        }
        entries.push_back(entry);
    }

    /// The entries kept, newest first.
    pub fn newest_first(&self) -> Vec<AuditEntry> {
        self.entries_mut().iter().rev().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;

    fn change<'a>(who: &'a Caller, path: &'a str, body: &'a [u8]) -> Change<'a> {
        Change {
            who,
            client: Some("192.0.2.7".into()),
            method: "PATCH",
            path,
            body,
        }
    }

    #[test]
    fn an_entry_says_who_when_what_and_from_where() {
        let log = AuditLog::new(ManualClock::new(1_596_498_360_000));
        let who = Caller::Console("1a2b3c4d".into());
        log.record(
            change(
                &who,
                "/admin/config",
                br#"{"queue_all": true, "total_active_users": 50, "bypass_headers": ["X-Key: s3cret"]}"#,
            ),
            200,
        );
        let entries = log.newest_first();
        assert_eq!(entries.len(), 1);
        let entry = &entries[0];
        assert_eq!(entry.at, "2020-08-03T23:46:00.000Z");
        assert_eq!(entry.who, "console:1a2b3c4d");
        assert_eq!(entry.client.as_deref(), Some("192.0.2.7"));
        assert_eq!(entry.method, "PATCH");
        assert_eq!(entry.path, "/admin/config");
        assert_eq!(entry.status, 200);
        assert_eq!(
            Value::Object(entry.changed.clone()),
            serde_json::json!({"queue_all": true, "total_active_users": 50, "bypass_headers": "…"})
        );
    }

    #[test]
    fn a_body_that_is_not_an_object_changed_no_field() {
        let log = AuditLog::new(ManualClock::new(0));
        for body in [&b""[..], b"not json", b"[1, 2]", b"42"] {
            log.record(change(&Caller::Token, "/admin/reload", body), 400);
        }
        assert!(log.newest_first().iter().all(|e| e.changed.is_empty()));
        assert!(log.newest_first().iter().all(|e| e.who == "token"));
    }

    #[test]
    fn the_log_keeps_the_last_entries_newest_first() {
        let clock = ManualClock::new(0);
        let log = AuditLog::new(clock.clone());
        for i in 0..MAX_ENTRIES + 5 {
            let body = format!("{{\"n\": {i}}}");
            log.record(
                change(&Caller::Token, "/admin/config", body.as_bytes()),
                200,
            );
            clock.advance(std::time::Duration::from_millis(1));
        }
        let entries = log.newest_first();
        assert_eq!(entries.len(), MAX_ENTRIES);
        assert_eq!(entries[0].changed["n"], MAX_ENTRIES + 4);
        assert_eq!(entries[MAX_ENTRIES - 1].changed["n"], 5);
    }
}
