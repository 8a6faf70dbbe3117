//! `waitroom-proxy sign-entry`: an entry token for a members-only line, signed with the file's
//! `entry.secret` (or `WR_ENTRY_SECRET`), as the shop's sign-in would sign it: for demos and
//! tests. A room keyed by `entry.public_key` cannot: only the shop holds the private key.

use std::time::Duration;

use crate::config::file::ConfigFile;
use crate::config::model::ENV_ENTRY_SECRET;
use crate::config::model::Environment;

#[derive(Debug, thiserror::Error)]
pub enum SignEntryError {
    #[error(
        "entry.secret is not set (nor {ENV_ENTRY_SECRET}): with entry.public_key the shop signs \
         tokens with its private key"
    )]
    NoSecret,
    #[error("the key must not be empty")]
    EmptyKey,
    #[error("cannot sign: {0}")]
    Sign(#[from] jsonwebtoken::errors::Error),
}

/// A token for customer `key`, valid for `ttl` from `now_secs` (Unix seconds), for `room` when
/// named.
pub fn sign_entry(
    file: &ConfigFile,
    env: &dyn Environment,
    key: &str,
    ttl: Duration,
    room: Option<&str>,
    now_secs: u64,
) -> Result<String, SignEntryError> {
    let secret = env
        .var(ENV_ENTRY_SECRET)
        .or_else(|| file.entry.secret.clone())
        .ok_or(SignEntryError::NoSecret)?;
    if key.trim().is_empty() {
        return Err(SignEntryError::EmptyKey);
    }
    Ok(crate::entry::sign(
        &secret,
        key,
        now_secs.saturating_add(ttl.as_secs()),
        room,
    )?)
}
