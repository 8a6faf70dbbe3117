//! Reading without a script: every script first checks (and, when missing, sets) the room's
//! epoch, which a check from the command line must leave alone, or a `--test` against an empty
//! Redis would pass for a loss of its data.

use super::conn::{self, Connections, within};
use super::{RedisOptions, SavedSettings};
use crate::store::StoreResult;

/// The room's saved settings (`Store::load_settings`), read with one HMGET.
pub async fn peek_settings(options: &RedisOptions) -> StoreResult<Option<SavedSettings>> {
    let base = format!("{}{{{}}}:", options.prefix, options.room);
    let Connections { mut conn, .. } = conn::connect(options, &format!("{base}revoked")).await?;
    let (version, json): (Option<u64>, Option<String>) = within(
        options.command_timeout,
        redis::cmd("HMGET")
            .arg(format!("{base}settings"))
            .arg("version")
            .arg("json")
            .query_async(&mut conn),
    )
    .await?;
    Ok(match (version, json) {
        (Some(version), Some(json)) => Some(SavedSettings { version, json }),
        _ => None,
    })
}
