//! The validated internal model, one module per section of the file. Each module checks its
//! section and names the key of every error; `Config::from_file_in` only puts them together.

mod autopilot;
mod bypass;
mod canonical;
mod entry;
mod listen;
mod log;
mod notify;
mod origin;
mod page;
pub mod page_template;
mod pass;
mod proof;
mod rate_limit;
mod room;
mod rooms;
mod rules;
mod secrets;
mod store;
mod turnstile;
mod typed;
mod values;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use autopilot::AutopilotConfig;
pub use bypass::{CookieRule, HeaderRule, MIN_BYPASS_SECRET_CHARS};
pub use entry::{EntryConfig, EntryKey};
pub use listen::{
    Cap, ENV_RUNTIME_DIRECTORY, ListenConfig, ListenTls, MAX_KEEPALIVE, PID_FILE_NAME,
    UPGRADE_SOCKET_NAME,
};
pub use log::{LogConfig, LogFormat};
pub use notify::NotifyConfig;
pub use origin::{OriginConfig, ProtectedResponses};
pub use page::Branding;
pub use page_template::PageTemplate;
pub(crate) use pass::same_site;
pub use pass::{PassConfig, SameSite};
pub use proof::ProofOfWorkConfig;
pub(crate) use room::check_room_id;
pub use room::{
    EventNow, QueueingMethod, RoomEvent, RoomSettings, merge_patch, merge_patch_named, new_event,
};
pub use rooms::{RoomConfig, RoomPlace, rules_can_hold};
pub use secrets::{
    ENV_ADMIN_TOKEN, ENV_ENTRY_SECRET, ENV_JWT_SECRET, ENV_TURNSTILE_SECRET, MIN_SECRET_BYTES,
    mask_room,
};
pub use store::{
    Backend, ENV_REDIS_URL, ENV_SENTINEL_PASSWORD, OnStoreError, SentinelAuth, StoreConfig,
};
pub use turnstile::{OnUnreachable, TurnstileAction, TurnstileConfig, TurnstileMode};

use crate::config::file::ConfigFile;
use crate::core::ip_limit::IpLimits;
use crate::request::client::Cidr;
use secrets::{Generated, NonEmpty, secret};

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {reason}")]
    Read { path: String, reason: String },
    #[error("{0}")]
    Syntax(String),
    #[error("{key}: {reason}")]
    Invalid { key: String, reason: String },
    /// Every error of one file, one `key: reason` a line.
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))]
    Many(Vec<ConfigError>),
}

impl ConfigError {
    /// One error as itself, several as `Many`.
    pub fn all(mut errors: Vec<ConfigError>) -> ConfigError {
        match errors.len() {
            1 => errors.remove(0),
            _ => ConfigError::Many(errors),
        }
    }

    /// The key an error is about, if one.
    pub fn key(&self) -> Option<String> {
        match self {
            ConfigError::Invalid { key, .. } => Some(key.clone()),
            _ => None,
        }
    }

    /// The errors one by one.
    pub fn into_list(self) -> Vec<ConfigError> {
        match self {
            ConfigError::Many(errors) => errors,
            one => vec![one],
        }
    }
}

pub use typed::plain as plain_words;

pub(crate) fn invalid(key: &str, reason: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        key: key.into(),
        reason: reason.into(),
    }
}

#[derive(Debug, Clone)]
pub struct Config {
    pub listen: SocketAddr,
    /// Peers whose X-Forwarded-For names the client.
    pub trusted_proxies: Vec<Cidr>,
    /// `listen.country_header`, lower case: where a trusted proxy names the client's country.
    pub country_header: Option<String>,
    pub threads: usize,
    pub tls: Option<ListenTls>,
    /// How long SIGTERM (or a hand-over) lets requests in flight finish.
    pub grace_period: Duration,
    /// Where a process started with `--upgrade` receives the listening sockets.
    pub upgrade_socket: Option<PathBuf>,
    /// Written once the listening sockets are ours (after a hand-over too), for systemd.
    pub pid_file: Option<PathBuf>,
    /// `listen.hosts`, canonical: served besides the rooms' hosts. Once a room names a host, a
    /// request for a host in neither is refused (421).
    pub hosts: Vec<String>,
    /// The `[listen]` settings of visitors' connections.
    pub connections: ListenConfig,
    pub log: LogConfig,
    pub origin: OriginConfig,
    /// `[room]`, or each of `[[rooms]]`, in the file's order.
    pub rooms: Vec<RoomConfig>,
    pub pass: PassConfig,
    pub store: StoreConfig,
    /// `[rate_limit]`: new tickets per client address.
    pub rate_limit: IpLimits,
    pub admin_address: SocketAddr,
    pub admin_token: String,
    /// `admin.ready_requires_store`: /readyz also answers 503 while the store is unreachable.
    pub admin_ready_requires_store: bool,
    /// `admin.console_session`: how long a console sign-in lasts.
    pub admin_console_session: Duration,
    /// `admin.certificate` and `admin.key`: the admin listener speaks TLS.
    pub admin_tls: Option<ListenTls>,
    /// `[turnstile]`, when a challenge is on.
    pub turnstile: Option<TurnstileConfig>,
    /// `[proof_of_work]`, on or off (an event may turn it on for its time only).
    pub proof_of_work: ProofOfWorkConfig,
    /// `[entry]`, when the line is for members only.
    pub entry: Option<EntryConfig>,
    /// `[notify]`, when the shop has a webhook.
    pub notify: Option<NotifyConfig>,
    /// The effective file (defaults filled in, environment applied), for `--test`.
    pub file: ConfigFile,
    /// The file this was loaded from: reloads read it again.
    pub source: Option<PathBuf>,
    /// Started with `--dev`: a reload accepts missing secrets like the start did.
    pub dev: bool,
}

impl ConfigFile {
    /// The file as written, unvalidated: `Config::from_file` validates it.
    pub fn read(path: &Path) -> Result<ConfigFile, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Read {
            path: path.display().to_string(),
            reason: e.to_string(),
        })?;
        Self::parse(&text)
    }

    /// Every type error of the file, each named by its key.
    pub fn parse(text: &str) -> Result<ConfigFile, ConfigError> {
        match typed::read(text) {
            (Some(file), errors) if errors.is_empty() => Ok(file),
            (_, errors) => Err(ConfigError::all(errors)),
        }
    }
}

/// The sections whose keys [`set_aside`] may take out (a room's are taken care of in
/// `RoomSettings::from_section_all`).
const PLAIN_SECTIONS: &[&str] = &[
    "listen",
    "origin",
    "pass",
    "store",
    "admin",
    "page",
    "log",
    "turnstile",
    "proof_of_work",
    "entry",
    "rate_limit",
    "autopilot",
    "notify",
];

/// `file` without the `section.key`s named (back to their defaults), or None when that takes
/// nothing out.
fn set_aside(file: &ConfigFile, keys: &[String]) -> Option<ConfigFile> {
    let before = serde_json::to_value(file).ok()?;
    let mut value = before.clone();
    for key in keys {
        let Some((section, name)) = key.split_once('.') else {
            continue;
        };
        if !PLAIN_SECTIONS.contains(&section) || name.contains(['.', '[']) {
            continue;
        }
        if let Some(fields) = value.get_mut(section).and_then(|s| s.as_object_mut()) {
            fields.remove(name);
        }
    }
    if value == before {
        return None;
    }
    serde_json::from_value(value).ok()
}

/// A section's value, or its errors kept for the report.
fn keep<T>(errors: &mut Vec<ConfigError>, result: Result<T, ConfigError>) -> Option<T> {
    match result {
        Ok(value) => Some(value),
        Err(e) => {
            errors.extend(e.into_list());
            None
        }
    }
}

/// Where the secrets (and `WR_REDIS_URL`, `WR_SENTINEL_PASSWORD`, `RUNTIME_DIRECTORY`) come
/// from.
pub trait Environment {
    fn var(&self, name: &str) -> Option<String>;
}

pub struct ProcessEnvironment;

impl Environment for ProcessEnvironment {
    fn var(&self, name: &str) -> Option<String> {
        std::env::var(name).ok().filter(|v| !v.is_empty())
    }
}

impl Config {
    pub fn load(
        path: &Path,
        env: &dyn Environment,
        dev: bool,
    ) -> Result<(Config, Vec<String>), ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Read {
            path: path.display().to_string(),
            reason: e.to_string(),
        })?;
        let base_dir = path.parent().unwrap_or(Path::new("."));
        let (mut config, warnings) = Self::from_text_in(&text, env, dev, base_dir)?;
        // Kept for SIGHUP: the room is read again from the same file.
        config.source = Some(path.to_path_buf());
        Ok((config, warnings))
    }

    /// A config from text; a relative `[page] template` is taken from the working directory.
    pub fn parse(
        text: &str,
        env: &dyn Environment,
        dev: bool,
    ) -> Result<(Config, Vec<String>), ConfigError> {
        Self::from_text_in(text, env, dev, Path::new("."))
    }

    /// The type errors of the text and, when the rest of it could be read, the errors of its
    /// validation too: `--test` reports all of them at once.
    fn from_text_in(
        text: &str,
        env: &dyn Environment,
        dev: bool,
        base_dir: &Path,
    ) -> Result<(Config, Vec<String>), ConfigError> {
        let (file, mut errors) = typed::read(text);
        let Some(mut file) = file else {
            return Err(ConfigError::all(errors));
        };
        let first = match Self::from_file_in(file.clone(), env, dev, base_dir) {
            Ok(loaded) if errors.is_empty() => return Ok(loaded),
            Ok(_) => return Err(ConfigError::all(errors)),
            Err(e) => e,
        };
        // A key is reported once: one with a type error was read with a stand-in, and what
        // the model says of that is no news.
        let mut seen: Vec<String> = errors.iter().filter_map(ConfigError::key).collect();
        let mut add = |errors: &mut Vec<ConfigError>, more: ConfigError| {
            let before = errors.len();
            for e in more.into_list() {
                match e.key() {
                    Some(key) if seen.contains(&key) => {}
                    Some(key) => {
                        seen.push(key);
                        errors.push(e);
                    }
                    None => errors.push(e),
                }
            }
            errors.len() > before
        };
        add(&mut errors, first);
        // A section stops at its first error: with the keys named so far set aside (their
        // defaults), the next ones show. A few rounds are plenty for a hand-written file.
        for _ in 0..8 {
            let keys: Vec<String> = errors.iter().filter_map(ConfigError::key).collect();
            let Some(next) = set_aside(&file, &keys) else {
                break;
            };
            file = next;
            let Err(more) = Self::from_file_in(file.clone(), env, dev, base_dir) else {
                break;
            };
            if !add(&mut errors, more) {
                break;
            }
        }
        // Found round by round, shown section by section as the file has them.
        let section_at = |e: &ConfigError| {
            e.key()
                .and_then(|key| {
                    let section = key.split(['.', '[']).next().unwrap_or_default().to_owned();
                    text.find(&format!("[{section}"))
                })
                .unwrap_or(usize::MAX)
        };
        errors.sort_by_key(section_at);
        Err(ConfigError::all(errors))
    }

    pub fn from_file(
        file: ConfigFile,
        env: &dyn Environment,
        dev: bool,
    ) -> Result<(Config, Vec<String>), ConfigError> {
        Self::from_file_in(file, env, dev, Path::new("."))
    }

    /// `base_dir` is where relative file names in the config (the page template) live.
    pub fn from_file_in(
        mut file: ConfigFile,
        env: &dyn Environment,
        dev: bool,
        base_dir: &Path,
    ) -> Result<(Config, Vec<String>), ConfigError> {
        let env = &NonEmpty(env);
        let mut warnings = Vec::new();
        // Each section is checked even when another failed: `--test` says everything at once.
        let mut errors = Vec::new();
        let mut read_secret = |key, name, value: &mut Option<String>, generated| {
            secret(key, name, value, env, dev, generated, &mut warnings)
        };
        let pass_secret = read_secret(
            "pass.secret",
            ENV_JWT_SECRET,
            &mut file.pass.secret,
            Generated::Hidden,
        );
        let admin_token = read_secret(
            "admin.token",
            ENV_ADMIN_TOKEN,
            &mut file.admin.token,
            Generated::Shown,
        );
        let pass_secret = keep(&mut errors, pass_secret);
        let admin_token = keep(&mut errors, admin_token);
        // Without a secret the other pass keys are still worth checking.
        let pass = keep(
            &mut errors,
            pass::pass(
                &file.pass,
                pass_secret
                    .clone()
                    .unwrap_or_else(|| "x".repeat(MIN_SECRET_BYTES)),
            ),
        );
        let cookie_name = pass
            .as_ref()
            .map_or_else(|| file.pass.cookie_name.clone(), |p| p.cookie_name.clone());
        let rooms = keep(
            &mut errors,
            rooms::rooms(&file, &cookie_name, base_dir, &mut warnings),
        );
        let origin = keep(&mut errors, origin::origin(&file.origin, &mut warnings));
        let store = keep(
            &mut errors,
            store::store(&mut file.store, env, &mut warnings),
        );
        let listen = keep(&mut errors, listen::listen(&file.listen, env));
        let log = keep(&mut errors, log::log(&file.log));
        let rate_limit = keep(&mut errors, rate_limit::ip_limits(&file.rate_limit));
        let admin_address = keep(
            &mut errors,
            values::socket_addr("admin.address", &file.admin.address),
        );
        let admin_console_session = keep(
            &mut errors,
            values::duration("admin.console_session", &file.admin.console_session),
        );
        let admin_tls = keep(
            &mut errors,
            listen::tls_pair(
                "admin",
                file.admin.certificate.as_deref(),
                file.admin.key.as_deref(),
            ),
        );
        let turnstile = keep(
            &mut errors,
            turnstile::turnstile(&mut file.turnstile, env, &mut warnings),
        );
        let proof_of_work = keep(&mut errors, proof::proof_of_work(&file.proof_of_work));
        let entry = keep(&mut errors, entry::entry(&mut file.entry, env, base_dir));
        let notify = keep(&mut errors, notify::notify(&mut file.notify, env));
        if let (Some(admin), Some(listen)) = (&admin_address, &listen)
            && *admin == listen.address
        {
            keep(
                &mut errors,
                Err::<(), _>(invalid("admin.address", "must differ from listen.address")),
            );
        }
        let (
            Some(_),
            Some(admin_token),
            Some(pass),
            Some(rooms),
            Some(origin),
            Some(store),
            Some(listen),
            Some(log),
            Some(rate_limit),
            Some(admin_address),
            Some(admin_console_session),
            Some(admin_tls),
            Some(turnstile),
            Some(proof_of_work),
            Some(entry),
            Some(notify),
        ) = (
            pass_secret,
            admin_token,
            pass,
            rooms,
            origin,
            store,
            listen,
            log,
            rate_limit,
            admin_address,
            admin_console_session,
            admin_tls,
            turnstile,
            proof_of_work,
            entry,
            notify,
        )
        else {
            return Err(ConfigError::all(errors));
        };
        if !errors.is_empty() {
            return Err(ConfigError::all(errors));
        }
        if rooms.iter().any(|r| r.routes[0].host.is_none()) && !listen.hosts.is_empty() {
            warnings.push(
                "listen.hosts has no effect while a room has no host: every host is served".into(),
            );
        }
        let config = Config {
            listen: listen.address,
            threads: listen.threads,
            tls: listen.tls,
            grace_period: listen.grace_period,
            trusted_proxies: listen.trusted_proxies,
            country_header: listen.country_header,
            upgrade_socket: listen.upgrade_socket,
            pid_file: listen.pid_file,
            hosts: listen.hosts,
            connections: listen.connections,
            log,
            origin,
            rooms,
            pass,
            store,
            rate_limit,
            admin_address,
            admin_token,
            admin_ready_requires_store: file.admin.ready_requires_store,
            admin_console_session,
            admin_tls,
            turnstile,
            proof_of_work,
            entry,
            notify,
            file,
            source: None,
            dev,
        };
        Ok((config, warnings))
    }
}
