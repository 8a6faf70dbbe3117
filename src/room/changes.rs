//! What a room runs besides its file: the keys changed live (`PATCH /admin/config`, the events
//! API), when and how each was last changed, saved next to the settings in the store so that
//! every instance, a restart and `--test` can say where the room differs from its file.
//!
//! Keys are the `[room]` keys; an event is `events.<name>` (added, changed or deleted live).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::config::file::{EventSection, RoomSection};

/// When and how a key was last changed live.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    /// RFC 3339.
    pub at: String,
    /// The request that changed it, e.g. `PATCH /admin/config`.
    pub by: String,
}

/// The changes that made the settings in effect differ from the file, by key.
pub type Changes = BTreeMap<String, Change>;

/// The store's record: the settings, and the changes that made them. Earlier versions saved the
/// bare `[room]` section; `decode` still reads that (with no changes known).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Saved {
    pub room: RoomSection,
    #[serde(default)]
    pub changes: Changes,
}

impl Saved {
    pub fn encode(&self) -> Result<String, serde_json::Error> {
        serde_json::to_string(self)
    }

    pub fn decode(json: &str) -> Result<Saved, serde_json::Error> {
        let value: serde_json::Value = serde_json::from_str(json)?;
        // A section has no `room` key: its presence tells the two forms apart.
        if value.get("room").is_some_and(serde_json::Value::is_object) {
            serde_json::from_value(value)
        } else {
            Ok(Saved {
                room: serde_json::from_value(value)?,
                changes: Changes::new(),
            })
        }
    }
}

fn event_key(name: &str) -> String {
    format!("events.{name}")
}

fn keys(section: &RoomSection) -> BTreeMap<String, serde_json::Value> {
    let mut keys = BTreeMap::new();
    if let Ok(serde_json::Value::Object(fields)) = serde_json::to_value(section) {
        for (key, value) in fields {
            if key != "events" {
                keys.insert(key, value);
            }
        }
    }
    // Unset optional keys are left out when serialised: absent and null are the same value.
    for event in &section.events {
        keys.insert(
            event_key(&event.name),
            serde_json::to_value(event).unwrap_or(serde_json::Value::Null),
        );
    }
    keys
}

/// The keys whose values differ between two sections, each event its own key.
pub fn differences(from: &RoomSection, to: &RoomSection) -> Vec<String> {
    let (from, to) = (keys(from), keys(to));
    let mut differ: Vec<String> = from
        .iter()
        .filter(|(key, value)| to.get(*key) != Some(value))
        .map(|(key, _)| key.clone())
        .collect();
    differ.extend(to.keys().filter(|key| !from.contains_key(*key)).cloned());
    differ.sort();
    differ
}

/// The record after `to` replaced `from`: the keys touched now stamped `change`, the earlier
/// stamps kept, and only for keys that still differ from the file.
pub fn record(
    earlier: &Changes,
    from: &RoomSection,
    to: &RoomSection,
    file: &RoomSection,
    change: &Change,
) -> Changes {
    let mut changes = earlier.clone();
    for key in differences(from, to) {
        changes.insert(key, change.clone());
    }
    let differ = differences(file, to);
    changes.retain(|key, _| differ.contains(key));
    changes
}

/// One key where the settings differ from the file.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Override {
    pub key: String,
    /// In effect (null: unset, or an event deleted live).
    pub value: serde_json::Value,
    /// In the file (null: unset there, or an event added live).
    pub file: serde_json::Value,
    /// Null when the saved record does not say (saved by an earlier version).
    pub changed_at: Option<String>,
    pub changed_by: Option<String>,
}

/// Where `live` differs from `file`, key by key, with the record's stamps.
pub fn overrides(live: &RoomSection, file: &RoomSection, changes: &Changes) -> Vec<Override> {
    let (live_keys, file_keys) = (keys(live), keys(file));
    differences(file, live)
        .into_iter()
        .map(|key| {
            let change = changes.get(&key);
            Override {
                value: live_keys
                    .get(&key)
                    .cloned()
                    .unwrap_or(serde_json::Value::Null),
                file: file_keys
                    .get(&key)
                    .cloned()
                    .unwrap_or(serde_json::Value::Null),
                changed_at: change.map(|c| c.at.clone()),
                changed_by: change.map(|c| c.by.clone()),
                key,
            }
        })
        .collect()
}

/// The events of `live` that `file` does not have: added live, which a reload keeps.
pub fn added_events(live: &RoomSection, file: &RoomSection) -> Vec<EventSection> {
    live.events
        .iter()
        .filter(|e| !file.events.iter().any(|f| f.name == e.name))
        .cloned()
        .collect()
}

/// One line for a log: the keys, or that none changed.
pub fn key_list(keys: &[String]) -> String {
    if keys.is_empty() {
        "no key changed".to_owned()
    } else {
        keys.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::file::ConfigFile;

    fn section(extra: &str) -> RoomSection {
        let text = format!(
            "[origin]\naddress = \"127.0.0.1:3000\"\n[room]\nid = \"r\"\ntotal_active_users = 1\nnew_users_per_minute = 10\n{extra}"
        );
        match ConfigFile::parse(&text).map(|f| f.room) {
            Ok(Some(room)) => room,
            other => panic!("bad test section: {other:?}"),
        }
    }

    const EVENT: &str = "[[room.events]]\nname = \"drop\"\nevent_start_time = \
                         \"2030-01-01T10:00:00Z\"\nevent_end_time = \"2030-01-01T11:00:00Z\"\n";

    #[test]
    fn differences_name_keys_and_events() {
        let file = section("");
        let mut live = section(EVENT);
        live.total_active_users = 77;
        assert_eq!(
            differences(&file, &live),
            vec!["events.drop".to_owned(), "total_active_users".to_owned()]
        );
        assert!(differences(&file, &file).is_empty());
    }

    #[test]
    fn the_record_keeps_stamps_only_for_keys_still_overridden() {
        let file = section("");
        let first = Change {
            at: "2030-01-01T00:00:00.000Z".into(),
            by: "PATCH /admin/config".into(),
        };
        let mut live = file.clone();
        live.total_active_users = 77;
        let changes = record(&Changes::new(), &file, &live, &file, &first);
        assert_eq!(changes.get("total_active_users"), Some(&first));
        let second = Change {
            at: "2030-01-01T00:01:00.000Z".into(),
            by: "PUT /admin/config".into(),
        };
        let mut back = live.clone();
        back.total_active_users = 1;
        back.queue_all = true;
        let changes = record(&changes, &live, &back, &file, &second);
        assert_eq!(changes.len(), 1);
        assert_eq!(changes.get("queue_all"), Some(&second));
        let shown = overrides(&back, &file, &changes);
        assert_eq!(shown.len(), 1);
        assert_eq!(shown[0].file, serde_json::json!(false));
        assert_eq!(shown[0].value, serde_json::json!(true));
    }

    #[test]
    fn the_bare_section_of_earlier_versions_still_reads() {
        let file = section("");
        let bare = serde_json::to_string(&file).unwrap_or_default();
        let saved = Saved::decode(&bare).map(|s| (s.room.total_active_users, s.changes.len()));
        assert_eq!(saved.ok(), Some((1, 0)));
        let wrapped = Saved {
            room: section(EVENT),
            changes: Changes::new(),
        };
        let again = wrapped.encode().ok().and_then(|j| Saved::decode(&j).ok());
        assert_eq!(again.map(|s| s.room.events.len()), Some(1));
    }
}
