//! `[store]`: where the room's state lives. `store.url` may carry a password: it comes from
//! `WR_REDIS_URL` in deployments, and is never printed whole (`masked_url`); so may
//! `store.sentinel_password` (`WR_SENTINEL_PASSWORD`), never printed at all (`masked_secret`).

use std::fmt;
use std::time::Duration;

use super::values::{choice, duration};
use super::{ConfigError, Environment, invalid};
use crate::config::file::StoreSection;
use crate::config::masking::{masked_secret, masked_url};

/// Replaces `store.url` (Kubernetes builds it with the Redis password from a Secret).
pub const ENV_REDIS_URL: &str = "WR_REDIS_URL";

/// Replaces `store.sentinel_password`, like `WR_REDIS_URL` the URL.
pub const ENV_SENTINEL_PASSWORD: &str = "WR_SENTINEL_PASSWORD";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnStoreError {
    /// New visitors queue while the store is unreachable.
    Closed,
    /// New visitors go straight through: the shop is unprotected.
    Open,
}

#[derive(Clone, PartialEq, Eq)]
pub enum Backend {
    Memory,
    Redis { url: String },
}

/// By hand: the URL's password stays out of debug prints.
impl fmt::Debug for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Backend::Memory => f.write_str("Memory"),
            Backend::Redis { url } => f
                .debug_struct("Redis")
                .field("url", &masked_url(url))
                .finish(),
        }
    }
}

/// The Sentinels' own credentials (the master's are in the URL); both None for Sentinels that
/// ask for none.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct SentinelAuth {
    pub username: Option<String>,
    pub password: Option<String>,
}

/// By hand: the password stays out of debug prints.
impl fmt::Debug for SentinelAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SentinelAuth")
            .field("username", &self.username)
            .field("password", &masked_secret(self.password.as_deref()))
            .finish()
    }
}

#[derive(Debug, Clone)]
pub struct StoreConfig {
    pub backend: Backend,
    pub prefix: String,
    pub on_error: OnStoreError,
    pub connect_timeout: Duration,
    pub command_timeout: Duration,
    pub leader_ttl: Duration,
    pub sentinel_auth: SentinelAuth,
    /// Replicas asked to acknowledge each admission (`WAIT`); 0: none.
    pub replica_acks: u32,
    pub replica_ack_timeout: Duration,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum BackendName {
    Memory,
    Redis,
}

/// `[store]`; `WR_REDIS_URL`, when set, replaces `store.url` in `section` too (like the secrets,
/// so a reload that reads the file again keeps it).
pub(crate) fn store(
    section: &mut StoreSection,
    env: &dyn Environment,
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
    if let Some(url) = env.var(ENV_REDIS_URL) {
        if name == BackendName::Memory {
            warnings.push(format!(
                "{ENV_REDIS_URL} is set but store.backend = \"memory\": ignored"
            ));
        }
        section.url = Some(url);
    }
    if let Some(password) = env.var(ENV_SENTINEL_PASSWORD) {
        if name == BackendName::Memory {
            warnings.push(format!(
                "{ENV_SENTINEL_PASSWORD} is set but store.backend = \"memory\": ignored"
            ));
        }
        section.sentinel_password = Some(password);
    }
    let backend = match name {
        BackendName::Memory => Backend::Memory,
        BackendName::Redis => Backend::Redis {
            url: match (section.sentinels.as_slice(), &section.master_name) {
                ([], None) => section.url.clone().ok_or_else(|| {
                    invalid(
                        "store.url",
                        format!(
                            "is required with backend = \"redis\": set it or {ENV_REDIS_URL} \
                             (or store.sentinels and store.master_name)"
                        ),
                    )
                })?,
                ([], Some(_)) => {
                    return Err(invalid("store.master_name", "needs store.sentinels"));
                }
                (_, None) => {
                    return Err(invalid(
                        "store.master_name",
                        "is required with store.sentinels: the name the Sentinels monitor",
                    ));
                }
                (sentinels, Some(master)) => {
                    sentinel_url(section.url.as_deref(), sentinels, master)?
                }
            },
        },
    };
    let sentinel_auth = match &backend {
        Backend::Redis { url } => {
            redis_url(url)?;
            sentinel_auth(section, url)?
        }
        Backend::Memory => SentinelAuth::default(),
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
    let command_timeout = duration("store.command_timeout", &section.command_timeout)?;
    let replica_ack_timeout = duration("store.replica_ack_timeout", &section.replica_ack_timeout)?;
    if section.replica_acks > 0 {
        replica_acks_fit(&backend, command_timeout, replica_ack_timeout, warnings)?;
    }
    Ok(StoreConfig {
        backend,
        prefix: section.prefix.clone(),
        on_error,
        connect_timeout: duration("store.connect_timeout", &section.connect_timeout)?,
        command_timeout,
        leader_ttl: duration("store.leader_ttl", &section.leader_ttl)?,
        sentinel_auth,
        replica_acks: section.replica_acks,
        replica_ack_timeout,
    })
}

/// `store.sentinel_username` and `sentinel_password`: the Sentinels' own, so only where the
/// store follows Sentinels (`store.sentinels`, or a `redis+sentinel://` URL).
fn sentinel_auth(section: &StoreSection, url: &str) -> Result<SentinelAuth, ConfigError> {
    let follows_sentinels =
        url.starts_with("redis+sentinel://") || url.starts_with("rediss+sentinel://");
    for (key, value) in [
        ("store.sentinel_username", &section.sentinel_username),
        ("store.sentinel_password", &section.sentinel_password),
    ] {
        match value {
            Some(v) if v.is_empty() => {
                return Err(invalid(
                    key,
                    "cannot be empty: leave it out for Sentinels that ask for no password",
                ));
            }
            Some(_) if !follows_sentinels => {
                return Err(invalid(
                    key,
                    format!(
                        "needs store.sentinels: it is the Sentinels' own credential (the \
                         master's goes in store.url; {ENV_SENTINEL_PASSWORD} sets the password)"
                    ),
                ));
            }
            _ => {}
        }
    }
    if section.sentinel_username.is_some() && section.sentinel_password.is_none() {
        return Err(invalid(
            "store.sentinel_username",
            format!("needs store.sentinel_password (or {ENV_SENTINEL_PASSWORD})"),
        ));
    }
    Ok(SentinelAuth {
        username: section.sentinel_username.clone(),
        password: section.sentinel_password.clone(),
    })
}

/// `store.replica_acks` where it can hold: a server or Sentinel's master, whose WAIT answers
/// within the command's time limit.
fn replica_acks_fit(
    backend: &Backend,
    command_timeout: Duration,
    replica_ack_timeout: Duration,
    warnings: &mut Vec<String>,
) -> Result<(), ConfigError> {
    match backend {
        Backend::Memory => warnings.push(
            "store.replica_acks has no effect with backend = \"memory\": one process has no \
             replicas"
                .into(),
        ),
        Backend::Redis { url } if url.contains("+cluster://") => {
            return Err(invalid(
                "store.replica_acks",
                "is not supported with a Redis Cluster yet (a single server or Sentinel's \
                 master only): set it to 0",
            ));
        }
        Backend::Redis { .. } => {}
    }
    if replica_ack_timeout >= command_timeout {
        return Err(invalid(
            "store.replica_ack_timeout",
            format!(
                "must be shorter than store.command_timeout ({}): the replicas' answer comes \
                 on a connection that waits no longer",
                humantime::format_duration(command_timeout)
            ),
        ));
    }
    Ok(())
}

/// The store's URL for a master named by Sentinels: `redis+sentinel://[user:password@]s1,s2/
/// master[/db]`, the credentials, TLS and database taken from `url` when it is set (its host is
/// the Sentinels' to name).
fn sentinel_url(
    url: Option<&str>,
    sentinels: &[String],
    master: &str,
) -> Result<String, ConfigError> {
    for sentinel in sentinels {
        let port = sentinel
            .rsplit_once(':')
            .map(|(_, port)| port.parse::<u16>());
        if !matches!(port, Some(Ok(p)) if p > 0) || sentinel.contains(['/', '@', ',']) {
            return Err(invalid(
                "store.sentinels",
                format!("{sentinel:?} is not host:port"),
            ));
        }
    }
    if master.is_empty() || master.contains(['/', '@', ',', ' ']) {
        return Err(invalid(
            "store.master_name",
            format!("{master:?} is not a name Sentinel monitors"),
        ));
    }
    let (scheme, userinfo, db) = match url {
        None => ("redis", String::new(), String::new()),
        Some(url) => {
            let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
            if scheme != "redis" && scheme != "rediss" {
                return Err(invalid(
                    "store.url",
                    "with store.sentinels, gives only the master's credentials, TLS and database: \
                     redis://[user:password@]host/db or rediss://…",
                ));
            }
            let (userinfo, rest) = match rest.rsplit_once('@') {
                Some((userinfo, rest)) => (format!("{userinfo}@"), rest),
                None => (String::new(), rest),
            };
            let db = rest
                .split_once('/')
                .map(|(_, db)| db)
                .filter(|db| !db.is_empty())
                .map_or_else(String::new, |db| format!("/{db}"));
            (scheme, userinfo, db)
        }
    };
    Ok(format!(
        "{scheme}+sentinel://{userinfo}{}/{master}{db}",
        sentinels.join(",")
    ))
}

/// The schemes the Redis client is given: a server, over TLS, a cluster (its nodes listed), a
/// local socket.
const SCHEMES: &[&str] = &[
    "redis://",
    "rediss://",
    "redis+cluster://",
    "rediss+cluster://",
    "redis+sentinel://",
    "rediss+sentinel://",
    "redis+unix://",
    "unix://",
];

/// `store.url` in the form the client takes, checked here so that `--test` refuses what the
/// start would: the scheme, and each host with a port of 1-65535. Never shows the password.
fn redis_url(url: &str) -> Result<(), ConfigError> {
    let key = "store.url";
    let shown = masked_url(url);
    let Some(scheme) = SCHEMES.iter().find(|s| url.starts_with(**s)) else {
        let reason = match url.split_once("://") {
            Some((scheme, _)) => format!(
                "{shown:?}: {scheme}:// is not a Redis scheme (redis://, rediss:// for TLS, \
                 redis+cluster:// or rediss+cluster:// for a cluster, redis+sentinel:// or \
                 rediss+sentinel:// for Sentinels)"
            ),
            None => format!(
                "{shown:?} has no scheme: write redis://{shown} (rediss:// for TLS, \
                 redis+cluster:// for a cluster)"
            ),
        };
        return Err(invalid(key, reason));
    };
    let rest = &url[scheme.len()..];
    if scheme.contains("unix") {
        return if rest.starts_with('/') {
            Ok(())
        } else {
            Err(invalid(
                key,
                format!("{shown:?}: a socket URL names a path, like unix:///run/redis.sock"),
            ))
        };
    }
    // The user information ends at the last `@` (a password may hold one unencoded).
    let hosts = rest.rsplit_once('@').map_or(rest, |(_, hosts)| hosts);
    let hosts = hosts.split(['/', '?']).next().unwrap_or("");
    if hosts.is_empty() {
        return Err(invalid(key, format!("{shown:?} names no host")));
    }
    let several = scheme.contains("cluster") || scheme.contains("sentinel");
    if !several && hosts.contains(',') {
        return Err(invalid(
            key,
            format!("{shown:?} names several hosts: a cluster's URL starts redis+cluster://"),
        ));
    }
    for host in hosts.split(',').map(str::trim) {
        // The port may be left out (6379).
        let bare_v6 = host.starts_with('[') && host.ends_with(']');
        if bare_v6 || !host.contains(':') {
            if host.is_empty() || host == "[]" {
                return Err(invalid(key, format!("{shown:?} names an empty host")));
            }
            continue;
        }
        super::values::host_port(key, host).map_err(|e| match e {
            ConfigError::Invalid { reason, .. } => invalid(key, format!("{shown:?}: {reason}")),
            other => other,
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
