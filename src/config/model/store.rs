//! `[store]`: where the room's state lives.

use std::time::Duration;

use super::values::{choice, duration};
use super::{ConfigError, invalid};
use crate::config::file::StoreSection;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnStoreError {
    /// New visitors queue while the store is unreachable.
    Closed,
    /// New visitors go straight through: the shop is unprotected.
    Open,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Backend {
    Memory,
    Redis { url: String },
}

#[derive(Debug, Clone)]
pub struct StoreConfig {
    pub backend: Backend,
    pub prefix: String,
    pub on_error: OnStoreError,
    pub connect_timeout: Duration,
    pub command_timeout: Duration,
    pub leader_ttl: Duration,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum BackendName {
    Memory,
    Redis,
}

pub(crate) fn store(
    section: &StoreSection,
    warnings: &mut Vec<String>,
) -> Result<StoreConfig, ConfigError> {
    let name = choice(
        "store.backend",
        &section.backend,
        &[
            ("memory", BackendName::Memory),
            ("redis", BackendName::Redis),
        ],
    )?;
    let backend = match name {
        BackendName::Memory => Backend::Memory,
        BackendName::Redis => Backend::Redis {
            url: section
                .url
                .clone()
                .ok_or_else(|| invalid("store.url", "is required with backend = \"redis\""))?,
        },
    };
    if section.prefix.is_empty() {
        return Err(invalid("store.prefix", "cannot be empty"));
    }
    let on_error = choice(
        "store.on_error",
        &section.on_error,
        &[
            ("closed", OnStoreError::Closed),
            ("open", OnStoreError::Open),
        ],
    )?;
    if on_error == OnStoreError::Open {
        warnings.push(
            "store.on_error = \"open\": while the store is unreachable, new visitors go \
             straight to the origin with no capacity limit"
                .into(),
        );
    }
    Ok(StoreConfig {
        backend,
        prefix: section.prefix.clone(),
        on_error,
        connect_timeout: duration("store.connect_timeout", &section.connect_timeout)?,
        command_timeout: duration("store.command_timeout", &section.command_timeout)?,
        leader_ttl: duration("store.leader_ttl", &section.leader_ttl)?,
    })
}
