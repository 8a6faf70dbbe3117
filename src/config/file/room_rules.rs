//! A room's `routes` and `[[room.rules]]` as the file writes them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// One more route of a room: a path prefix, on the room's host (which `host` may repeat).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RouteSection {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    pub path: String,
}

/// One rule: an action and its conditions, every one of which must hold. A list left out is no
/// condition; a list written out empty would match nothing, and is refused.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RuleSection {
    /// How metrics (`rule` label) and `--test` call it; `rules[i]` when left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// "bypass", "protect" or "block".
    pub action: String,
    /// Canonical path patterns (like `bypass`): one must match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paths: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub methods: Option<Vec<String>>,
    /// Query parameters (decoded names) and the value each must hold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cookies: Option<BTreeMap<String, String>>,
    /// Client addresses or ranges (through `listen.trusted_proxies`): one must hold it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub networks: Option<Vec<String>>,
    /// Country codes, read from `listen.country_header` of a trusted proxy: one must be it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub countries: Option<Vec<String>>,
}
