//! The validated internal model. Every check lives in `Config::from_file` and
//! `RoomSettings::from_section`, and every error names the key it is about.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::clock::{Millis, parse_rfc3339};
use crate::config::file::{
    ConfigFile, EventSection, PageSection, RateLimitSection, RoomSection, TurnstileSection,
};
use crate::core::ip_limit::IpLimits;
use crate::core::room::{Limits, Pick, Placing};
use crate::core::schedule::{self, EventTimes, Phase};
use crate::locale::PageLanguage;
use crate::request::client::Cidr;
use crate::request::route::{PathPattern, Route};
use crate::respond::custom_page::CustomPage;
use crate::respond::page::Branding;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {reason}")]
    Read { path: String, reason: String },
    #[error("{0}")]
    Syntax(String),
    #[error("{key}: {reason}")]
    Invalid { key: String, reason: String },
}

pub(crate) fn invalid(key: &str, reason: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        key: key.into(),
        reason: reason.into(),
    }
}

/// The minimum length of the pass-signing secret and of the admin token.
pub const MIN_SECRET_BYTES: usize = 32;

/// The environment variables the proxy reads its secrets from (deploy files name them too).
pub const ENV_JWT_SECRET: &str = "WR_JWT_SECRET";
pub const ENV_ADMIN_TOKEN: &str = "WR_ADMIN_TOKEN";
pub const ENV_TURNSTILE_SECRET: &str = "WR_TURNSTILE_SECRET";
/// Set by systemd's `RuntimeDirectory=`: where the upgrade socket and the pid file go by default.
pub const ENV_RUNTIME_DIRECTORY: &str = "RUNTIME_DIRECTORY";
pub const UPGRADE_SOCKET_NAME: &str = "upgrade.sock";
pub const PID_FILE_NAME: &str = "waitroom.pid";

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum QueueingMethod {
    Fifo,
    Random,
    /// Ours, not Cloudflare's: arrivals within each `lottery_window` are shuffled.
    Lottery,
    Passthrough,
    Reject,
}

impl QueueingMethod {
    pub fn as_str(self) -> &'static str {
        match self {
            QueueingMethod::Fifo => "fifo",
            QueueingMethod::Random => "random",
            QueueingMethod::Lottery => "lottery",
            QueueingMethod::Passthrough => "passthrough",
            QueueingMethod::Reject => "reject",
        }
    }

    fn parse(key: &str, text: &str) -> Result<Self, ConfigError> {
        Ok(match text {
            "fifo" => QueueingMethod::Fifo,
            "random" => QueueingMethod::Random,
            "lottery" => QueueingMethod::Lottery,
            "passthrough" => QueueingMethod::Passthrough,
            "reject" => QueueingMethod::Reject,
            other => {
                return Err(invalid(
                    key,
                    format!("{other:?} is not one of fifo, random, lottery, passthrough, reject"),
                ));
            }
        })
    }

    /// Visitors wait in a line (as opposed to passing through or being turned away).
    pub fn queues(self) -> bool {
        matches!(
            self,
            QueueingMethod::Fifo | QueueingMethod::Random | QueueingMethod::Lottery
        )
    }
}

/// A scheduled event, validated.
#[derive(Debug, Clone)]
pub struct RoomEvent {
    pub name: String,
    pub times: EventTimes,
    pub shuffle_at_event_start: bool,
    pub suspended: bool,
    /// total_active_users and new_users_per_minute, set together.
    pub limits: Option<(u64, u64)>,
    pub session_duration: Option<Duration>,
    pub disable_session_renewal: Option<bool>,
    pub queueing_method: Option<QueueingMethod>,
    pub heading: Option<String>,
    pub message: Option<String>,
}

impl RoomEvent {
    fn from_section(i: usize, e: &EventSection) -> Result<Self, ConfigError> {
        let key = |k: &str| format!("room.events[{i}].{k}");
        let name = e.name.trim();
        if name.is_empty()
            || name.len() > 64
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        {
            return Err(invalid(
                &key("name"),
                format!(
                    "{:?} is not a name of 1-64 letters, digits, '-', '_' or '.'",
                    e.name
                ),
            ));
        }
        let time = |k: &str, text: &str| parse_rfc3339(text).map_err(|e| invalid(&key(k), e));
        let times = EventTimes {
            prequeue_ms: e
                .prequeue_start_time
                .as_deref()
                .map(|t| time("prequeue_start_time", t))
                .transpose()?,
            start_ms: time("event_start_time", &e.event_start_time)?,
            end_ms: time("event_end_time", &e.event_end_time)?,
        };
        if e.shuffle_at_event_start && times.prequeue_ms.is_none() {
            return Err(invalid(
                &key("shuffle_at_event_start"),
                "needs a prequeue_start_time: only a pre-queue is shuffled",
            ));
        }
        let limits = match (e.total_active_users, e.new_users_per_minute) {
            (None, None) => None,
            (Some(0), _) => return Err(invalid(&key("total_active_users"), "must be at least 1")),
            (_, Some(0)) => {
                return Err(invalid(&key("new_users_per_minute"), "must be at least 1"));
            }
            (Some(users), Some(rate)) => Some((users, rate)),
            _ => {
                return Err(invalid(
                    &key("total_active_users"),
                    "total_active_users and new_users_per_minute are overridden together",
                ));
            }
        };
        let queueing_method = e
            .queueing_method
            .as_deref()
            .map(|m| QueueingMethod::parse(&key("queueing_method"), m))
            .transpose()?;
        Ok(Self {
            name: name.to_owned(),
            times,
            shuffle_at_event_start: e.shuffle_at_event_start,
            suspended: e.suspended,
            limits,
            session_duration: e
                .session_duration
                .as_deref()
                .map(|d| duration(&key("session_duration"), d))
                .transpose()?,
            disable_session_renewal: e.disable_session_renewal,
            queueing_method,
            heading: e.heading.clone(),
            message: e.message.clone(),
        })
    }
}

/// The event governing the room now, as the page, the JSON and the admission need it.
#[derive(Debug, Clone)]
pub struct EventNow {
    pub name: String,
    pub phase: Phase,
    pub times: EventTimes,
    pub shuffle_at_event_start: bool,
    pub heading: Option<String>,
    pub message: Option<String>,
}

/// The room's live settings: replaced whole when the admin API or the store changes them.
#[derive(Debug, Clone)]
pub struct RoomSettings {
    pub name: String,
    pub total_active_users: u64,
    pub new_users_per_minute: u64,
    pub burst: u64,
    pub session_duration: Duration,
    pub disable_session_renewal: bool,
    pub queueing_method: QueueingMethod,
    pub queueing_status_code: u16,
    pub queue_all: bool,
    pub suspended: bool,
    pub refresh_interval: Duration,
    pub abandon_after: Duration,
    pub claim_window: Duration,
    pub admission_interval: Duration,
    pub bypass: Vec<PathPattern>,
    pub bypass_ips: Vec<Cidr>,
    pub bypass_headers: Vec<HeaderRule>,
    pub bypass_cookies: Vec<String>,
    pub bypass_verified_crawlers: bool,
    /// The operator's crawler ranges, by crawler name.
    pub crawler_ranges: Vec<(String, Cidr)>,
    pub revoke_command_enabled: bool,
    pub lottery_window: Duration,
    pub events: Vec<RoomEvent>,
    /// Set on the settings in effect at a moment (`at`): the event governing the room then.
    pub event: Option<EventNow>,
    /// The file form these were made from, for patches and echoes.
    pub section: RoomSection,
}

fn duration(key: &str, text: &str) -> Result<Duration, ConfigError> {
    let d = humantime::parse_duration(text.trim()).map_err(|e| {
        invalid(
            key,
            format!("{text:?} is not a duration like \"90s\" or \"5m\" ({e})"),
        )
    })?;
    if d.is_zero() {
        return Err(invalid(key, "must be longer than zero"));
    }
    Ok(d)
}

/// A duration that may be zero (a grace period of "0s" means: stop at once).
fn duration_or_zero(key: &str, text: &str) -> Result<Duration, ConfigError> {
    humantime::parse_duration(text.trim()).map_err(|e| {
        invalid(
            key,
            format!("{text:?} is not a duration like \"10s\" or \"0s\" ({e})"),
        )
    })
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

impl RoomSettings {
    pub fn from_section(s: &RoomSection) -> Result<Self, ConfigError> {
        if s.total_active_users == 0 {
            return Err(invalid("room.total_active_users", "must be at least 1"));
        }
        if s.new_users_per_minute == 0 {
            return Err(invalid("room.new_users_per_minute", "must be at least 1"));
        }
        let burst = s.burst.unwrap_or(s.new_users_per_minute);
        if burst == 0 {
            return Err(invalid("room.burst", "must be at least 1"));
        }
        let queueing_method = QueueingMethod::parse("room.queueing_method", &s.queueing_method)?;
        if ![200, 202, 429].contains(&s.queueing_status_code) {
            return Err(invalid(
                "room.queueing_status_code",
                format!("{} is not one of 200, 202, 429", s.queueing_status_code),
            ));
        }
        let refresh_interval = duration("room.refresh_interval", &s.refresh_interval)?;
        let claim_window = match &s.claim_window {
            Some(text) => duration("room.claim_window", text)?,
            None => refresh_interval * 2,
        };
        let bypass = s
            .bypass
            .iter()
            .map(|p| PathPattern::parse(p).map_err(|e| invalid("room.bypass", e)))
            .collect::<Result<Vec<_>, _>>()?;
        let mut revoke_command_enabled = false;
        for command in &s.enabled_origin_commands {
            match command.as_str() {
                "revoke" => revoke_command_enabled = true,
                other => {
                    return Err(invalid(
                        "room.enabled_origin_commands",
                        format!("{other:?} is not a known command (only \"revoke\")"),
                    ));
                }
            }
        }
        if s.name.trim().is_empty() {
            return Err(invalid("room.name", "cannot be empty"));
        }
        let events = s
            .events
            .iter()
            .enumerate()
            .map(|(i, e)| RoomEvent::from_section(i, e))
            .collect::<Result<Vec<_>, _>>()?;
        let times: Vec<EventTimes> = events.iter().map(|e| e.times).collect();
        if let Err(e) = schedule::validate(&times) {
            return Err(invalid(
                &format!("room.events[{}]", e.event()),
                e.to_string(),
            ));
        }
        let mut names = std::collections::HashSet::new();
        if let Some(twice) = events.iter().find(|e| !names.insert(e.name.as_str())) {
            return Err(invalid(
                "room.events",
                format!("two events are named {:?}", twice.name),
            ));
        }
        Ok(Self {
            name: s.name.clone(),
            total_active_users: s.total_active_users,
            new_users_per_minute: s.new_users_per_minute,
            burst,
            session_duration: duration("room.session_duration", &s.session_duration)?,
            disable_session_renewal: s.disable_session_renewal,
            queueing_method,
            queueing_status_code: s.queueing_status_code,
            queue_all: s.queue_all,
            suspended: s.suspended,
            refresh_interval,
            abandon_after: duration("room.abandon_after", &s.abandon_after)?,
            claim_window,
            admission_interval: duration("room.admission_interval", &s.admission_interval)?,
            bypass,
            bypass_ips: s
                .bypass_ips
                .iter()
                .map(|c| Cidr::parse(c).map_err(|e| invalid("room.bypass_ips", e)))
                .collect::<Result<_, _>>()?,
            bypass_headers: s
                .bypass_headers
                .iter()
                .map(|h| HeaderRule::parse(h).map_err(|e| invalid("room.bypass_headers", e)))
                .collect::<Result<_, _>>()?,
            bypass_cookies: s
                .bypass_cookies
                .iter()
                .map(|c| {
                    if !c.is_empty()
                        && c.bytes()
                            .all(|b| b.is_ascii_graphic() && !b";=,".contains(&b))
                    {
                        Ok(c.clone())
                    } else {
                        Err(invalid(
                            "room.bypass_cookies",
                            format!("{c:?} is not a cookie name"),
                        ))
                    }
                })
                .collect::<Result<_, _>>()?,
            bypass_verified_crawlers: s.bypass_verified_crawlers,
            crawler_ranges: crawler_ranges(s)?,
            revoke_command_enabled,
            lottery_window: duration("room.lottery_window", &s.lottery_window)?,
            events,
            event: None,
            section: s.clone(),
        })
    }

    /// The settings in effect at `now`: the room's own, or those of the event governing it (not
    /// suspended), with its overrides. Also the moment they may next change.
    pub fn at(&self, now: Millis) -> (RoomSettings, Millis) {
        let live: Vec<&RoomEvent> = self.events.iter().filter(|e| !e.suspended).collect();
        let times: Vec<EventTimes> = live.iter().map(|e| e.times).collect();
        let mut effective = self.clone();
        effective.event = None;
        if let Some((i, phase)) = schedule::current(&times, now) {
            let event = live[i];
            if let Some((users, rate)) = event.limits {
                effective.total_active_users = users;
                effective.new_users_per_minute = rate;
                effective.burst = rate;
            }
            if let Some(session) = event.session_duration {
                effective.session_duration = session;
            }
            if let Some(disable) = event.disable_session_renewal {
                effective.disable_session_renewal = disable;
            }
            if let Some(method) = event.queueing_method {
                effective.queueing_method = method;
            }
            // A pre-queue queues every new visitor, whatever the event lets through later.
            if phase == Phase::Prequeue && effective.queueing_method == QueueingMethod::Passthrough
            {
                effective.queueing_method = QueueingMethod::Fifo;
            }
            effective.event = Some(EventNow {
                name: event.name.clone(),
                phase,
                times: event.times,
                shuffle_at_event_start: event.shuffle_at_event_start,
                heading: event.heading.clone(),
                message: event.message.clone(),
            });
        }
        (effective, schedule::next_change(&times, now))
    }

    /// The room is in an event's pre-queue: new visitors queue, nobody is admitted.
    pub fn prequeueing(&self) -> bool {
        self.event
            .as_ref()
            .is_some_and(|e| e.phase == Phase::Prequeue)
    }

    /// Applies a JSON object of [room] keys to these settings, validated like the file.
    pub fn patched(&self, patch: &serde_json::Value) -> Result<Self, ConfigError> {
        let serde_json::Value::Object(changes) = patch else {
            return Err(invalid("body", "must be a JSON object of [room] keys"));
        };
        for fixed in ["id", "host", "path"] {
            if changes.contains_key(fixed) {
                return Err(invalid(
                    &format!("room.{fixed}"),
                    "cannot be changed live: edit the file and restart",
                ));
            }
        }
        let section = merge_patch(&self.section, changes).map_err(|e| invalid("room", e))?;
        Self::from_section(&section)
    }

    pub fn limits(&self) -> Limits {
        Limits {
            capacity: self.total_active_users,
            new_users_per_minute: self.new_users_per_minute,
            burst: self.burst,
            session_ms: millis(self.session_duration),
            abandon_after_ms: millis(self.abandon_after),
            claim_window_ms: millis(self.claim_window),
            pick: match self.queueing_method {
                QueueingMethod::Random => Pick::Random,
                _ => Pick::Fifo,
            },
            placing: self.placing(),
            admitting: !self.queue_all
                && self.queueing_method != QueueingMethod::Reject
                && !self.prequeueing(),
        }
    }
}

/// `current` with the keys of a JSON object patch set, as a live change of a file section: a null
/// removes the key (back to its default, or unset).
pub fn merge_patch<T>(
    current: &T,
    changes: &serde_json::Map<String, serde_json::Value>,
) -> Result<T, String>
where
    T: serde::Serialize + serde::de::DeserializeOwned,
{
    let serde_json::Value::Object(mut merged) =
        serde_json::to_value(current).map_err(|e| format!("cannot be serialised: {e}"))?
    else {
        return Err("is not a table".into());
    };
    for (key, value) in changes {
        if value.is_null() {
            merged.remove(key);
        } else {
            merged.insert(key.clone(), value.clone());
        }
    }
    serde_json::from_value(serde_json::Value::Object(merged)).map_err(|e| e.to_string())
}

fn crawler_ranges(s: &RoomSection) -> Result<Vec<(String, Cidr)>, ConfigError> {
    let mut ranges = Vec::new();
    for (name, list) in &s.crawler_ranges {
        let key = format!("room.crawler_ranges.{name}");
        if !crate::crawler::known(name) {
            return Err(invalid(&key, "not a known crawler (googlebot, bingbot)"));
        }
        for range in list {
            ranges.push((
                name.clone(),
                Cidr::parse(range).map_err(|e| invalid(&key, e))?,
            ));
        }
    }
    Ok(ranges)
}

impl RoomSettings {
    fn placing(&self) -> Placing {
        let shuffled = self.event.as_ref().and_then(|e| {
            let from_ms = e.times.prequeue_ms?;
            e.shuffle_at_event_start.then_some(Placing::DrawUntil {
                from_ms,
                until_ms: e.times.start_ms,
            })
        });
        match shuffled {
            // Passed on after the start too: the store decides by its own clock whether the
            // pre-queue is over, so a proxy whose clock runs ahead cannot end it early.
            Some(draw) => draw,
            None if self.queueing_method == QueueingMethod::Lottery => Placing::Lottery {
                window_ms: millis(self.lottery_window),
            },
            None => Placing::Arrival,
        }
    }
}

/// `room.bypass_headers`: a header that must be present, optionally with exactly one value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderRule {
    /// Lower case, as HTTP/2 sends it and the http crate stores it.
    pub name: String,
    pub value: Option<String>,
}

impl HeaderRule {
    fn parse(text: &str) -> Result<Self, String> {
        let (name, value) = match text.split_once(':') {
            Some((n, v)) => (n.trim(), Some(v.trim().to_owned())),
            None => (text.trim(), None),
        };
        if name.is_empty() || http::HeaderName::from_bytes(name.as_bytes()).is_err() {
            return Err(format!("{text:?} is not a header name, or \"Name: value\""));
        }
        Ok(Self {
            name: name.to_ascii_lowercase(),
            value,
        })
    }

    pub fn matches(&self, headers: &http::HeaderMap) -> bool {
        headers.get_all(self.name.as_str()).iter().any(|v| {
            self.value
                .as_deref()
                .is_none_or(|want| v.to_str().is_ok_and(|got| got.trim() == want))
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SameSite {
    Strict,
    Lax,
    None,
}

impl SameSite {
    pub fn as_str(self) -> &'static str {
        match self {
            SameSite::Strict => "Strict",
            SameSite::Lax => "Lax",
            SameSite::None => "None",
        }
    }
}

#[derive(Debug, Clone)]
pub struct PassConfig {
    pub secret: Vec<u8>,
    pub cookie_name: String,
    pub cookie_secure: bool,
    pub cookie_samesite: SameSite,
}

#[derive(Debug, Clone)]
pub struct OriginConfig {
    pub address: String,
    pub tls: bool,
    pub sni: String,
    /// Check the origin's certificate chain and name (only with `tls`).
    pub verify: bool,
    /// Trust only the CAs in this PEM file for the origin, not the system's.
    pub ca_file: Option<PathBuf>,
    pub host_header: Option<String>,
    pub connect_timeout: Duration,
    pub read_timeout: Duration,
    pub write_timeout: Duration,
    pub serve_demo_shop: bool,
}

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

/// The certificate and key of the public listener, which then speaks TLS (HTTP/2 and HTTP/1.1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenTls {
    pub certificate: PathBuf,
    pub key: PathBuf,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogConfig {
    pub format: LogFormat,
    /// One line per request on the public listener.
    pub access: bool,
}

/// How the widget shows on the waiting page (Cloudflare's turnstile_mode, "off" aside).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnstileMode {
    Invisible,
    VisibleNonInteractive,
    VisibleManaged,
}

impl TurnstileMode {
    pub fn as_str(self) -> &'static str {
        match self {
            TurnstileMode::Invisible => "invisible",
            TurnstileMode::VisibleNonInteractive => "visible_non_interactive",
            TurnstileMode::VisibleManaged => "visible_managed",
        }
    }
}

/// What a failed challenge leads to (Cloudflare's turnstile_action).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnstileAction {
    /// Counted, then treated as passed.
    Log,
    /// A place in a line that never admits (no store entry), looking like a real one.
    InfiniteQueue,
}

/// What a challenge answer leads to while siteverify cannot be reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnUnreachable {
    /// A place in line anyway: an outage of Cloudflare does not stop humans from queueing.
    Allow,
    /// The challenge again: nobody gets a place unverified.
    Retry,
}

#[derive(Debug, Clone)]
pub struct TurnstileConfig {
    pub mode: TurnstileMode,
    pub site_key: String,
    pub secret: String,
    pub siteverify_url: reqwest::Url,
    pub timeout: Duration,
    pub action: TurnstileAction,
    pub on_unreachable: OnUnreachable,
}

/// Cloudflare's published test secrets, which answer the same for every token.
const TEST_SECRETS: [(&str, &str); 3] = [
    (
        "1x0000000000000000000000000000000AA",
        "every challenge passes",
    ),
    (
        "2x0000000000000000000000000000000AA",
        "every challenge fails",
    ),
    (
        "3x0000000000000000000000000000000AA",
        "every token is reported as already spent",
    ),
];

/// `[turnstile]`: None when the section is left out or `mode = "off"`.
fn turnstile(
    section: &mut Option<TurnstileSection>,
    env: &dyn Environment,
    warnings: &mut Vec<String>,
) -> Result<Option<TurnstileConfig>, ConfigError> {
    let Some(t) = section else {
        return Ok(None);
    };
    let mode = match t.mode.as_str() {
        "off" => None,
        "invisible" => Some(TurnstileMode::Invisible),
        "visible_non_interactive" => Some(TurnstileMode::VisibleNonInteractive),
        "visible_managed" => Some(TurnstileMode::VisibleManaged),
        other => {
            return Err(invalid(
                "turnstile.mode",
                format!(
                    "{other:?} is not one of off, invisible, visible_non_interactive, \
                     visible_managed"
                ),
            ));
        }
    };
    let action = match t.action.as_str() {
        "log" => TurnstileAction::Log,
        "infinite_queue" => TurnstileAction::InfiniteQueue,
        other => {
            return Err(invalid(
                "turnstile.action",
                format!("{other:?} is not one of log, infinite_queue"),
            ));
        }
    };
    let on_unreachable = match t.on_unreachable.as_str() {
        "allow" => OnUnreachable::Allow,
        "retry" => OnUnreachable::Retry,
        other => {
            return Err(invalid(
                "turnstile.on_unreachable",
                format!("{other:?} is not one of allow, retry"),
            ));
        }
    };
    let timeout = duration("turnstile.timeout", &t.timeout)?;
    let siteverify_url = reqwest::Url::parse(&t.siteverify_url)
        .ok()
        .filter(|u| matches!(u.scheme(), "http" | "https") && u.host().is_some())
        .ok_or_else(|| {
            invalid(
                "turnstile.siteverify_url",
                format!("{:?} is not an http:// or https:// URL", t.siteverify_url),
            )
        })?;
    let Some(mode) = mode else {
        return Ok(None);
    };
    if let Some(value) = env.var(ENV_TURNSTILE_SECRET) {
        t.secret = Some(value);
    }
    let secret = match &t.secret {
        Some(s) if !s.trim().is_empty() => s.trim().to_owned(),
        _ => {
            return Err(invalid(
                "turnstile.secret",
                format!("is required with a turnstile mode: set it or {ENV_TURNSTILE_SECRET}"),
            ));
        }
    };
    // The site key is written into the page's HTML (also raw, in `{{{turnstile}}}`): only the
    // characters Cloudflare's keys are made of may pass.
    let site_key = match &t.site_key {
        Some(k)
            if !k.is_empty()
                && k.len() <= 100
                && k.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_".contains(&b)) =>
        {
            k.clone()
        }
        Some(k) => {
            return Err(invalid(
                "turnstile.site_key",
                format!("{k:?} is not a site key (letters, digits, '-' and '_')"),
            ));
        }
        None => {
            return Err(invalid(
                "turnstile.site_key",
                "is required with a turnstile mode",
            ));
        }
    };
    if let Some((_, effect)) = TEST_SECRETS.iter().find(|(s, _)| *s == secret) {
        warnings.push(format!(
            "turnstile.secret is one of Cloudflare's test secrets: {effect}"
        ));
    }
    let loopback = siteverify_url.host_str().is_some_and(|h| {
        h == "localhost"
            || h.trim_matches(['[', ']'])
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback())
    });
    if siteverify_url.scheme() == "http" && !loopback {
        warnings
            .push("turnstile.siteverify_url is plain http: the secret travels unencrypted".into());
    }
    Ok(Some(TurnstileConfig {
        mode,
        site_key,
        secret,
        siteverify_url,
        timeout,
        action,
        on_unreachable,
    }))
}

#[derive(Debug, Clone)]
pub struct Config {
    pub listen: SocketAddr,
    /// Peers whose X-Forwarded-For names the client.
    pub trusted_proxies: Vec<Cidr>,
    pub threads: usize,
    pub tls: Option<ListenTls>,
    /// How long SIGTERM (or a hand-over) lets requests in flight finish.
    pub grace_period: Duration,
    /// Where a process started with `--upgrade` receives the listening sockets.
    pub upgrade_socket: Option<PathBuf>,
    /// Written once the listening sockets are ours (after a hand-over too), for systemd.
    pub pid_file: Option<PathBuf>,
    pub log: LogConfig,
    pub origin: OriginConfig,
    pub room_id: String,
    pub route: Route,
    pub room: RoomSettings,
    pub pass: PassConfig,
    pub store: StoreConfig,
    /// `[rate_limit]`: new tickets per client address.
    pub rate_limit: IpLimits,
    pub admin_address: SocketAddr,
    pub admin_token: String,
    pub branding: Branding,
    /// `[page] template`, compiled once here: requests only render it.
    pub custom_page: Option<Arc<CustomPage>>,
    /// `[turnstile]`, when a challenge is on.
    pub turnstile: Option<TurnstileConfig>,
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

    pub fn parse(text: &str) -> Result<ConfigFile, ConfigError> {
        toml::from_str(text).map_err(|e| ConfigError::Syntax(e.to_string()))
    }
}

/// Where the secrets come from when the file leaves them out.
pub trait Environment {
    fn var(&self, name: &str) -> Option<String>;
}

pub struct ProcessEnvironment;

impl Environment for ProcessEnvironment {
    fn var(&self, name: &str) -> Option<String> {
        std::env::var(name).ok().filter(|v| !v.is_empty())
    }
}

fn socket_addr(key: &str, text: &str) -> Result<SocketAddr, ConfigError> {
    text.parse().map_err(|_| {
        invalid(
            key,
            format!("{text:?} is not an address like 127.0.0.1:8080"),
        )
    })
}

fn non_empty_path(key: &str, text: Option<&str>) -> Result<Option<PathBuf>, ConfigError> {
    match text {
        Some(t) if t.trim().is_empty() => Err(invalid(key, "cannot be empty")),
        Some(t) => Ok(Some(PathBuf::from(t))),
        None => Ok(None),
    }
}

fn colour(key: &str, text: &str) -> Result<String, ConfigError> {
    let hex = text.strip_prefix('#').unwrap_or("");
    if (hex.len() == 3 || hex.len() == 6) && hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(text.to_owned())
    } else {
        Err(invalid(
            key,
            format!("{text:?} is not a colour like \"#1d4ed8\""),
        ))
    }
}

fn branding(page: &PageSection, room_name: &str) -> Result<Branding, ConfigError> {
    if let Some(url) = &page.logo_url
        && !(url.starts_with("https://") || url.starts_with('/'))
    {
        return Err(invalid(
            "page.logo_url",
            "must be an https:// URL or a path on the shop",
        ));
    }
    Ok(Branding {
        title: page.title.clone().unwrap_or_else(|| room_name.to_owned()),
        logo_url: page.logo_url.clone(),
        primary_color: colour("page.primary_color", &page.primary_color)?,
        background_color: colour("page.background_color", &page.background_color)?,
        text_color: colour("page.text_color", &page.text_color)?,
        heading: page.heading.clone(),
        message: page.message.clone(),
        closed_heading: page.closed_heading.clone(),
        closed_message: page.closed_message.clone(),
        language: PageLanguage::parse(&page.default_template_language)
            .map_err(|e| invalid("page.default_template_language", e))?,
    })
}

/// Reads and compiles `[page] template`; a relative path is taken from `base_dir`.
fn custom_page(
    page: &PageSection,
    base_dir: &Path,
    warnings: &mut Vec<String>,
) -> Result<Option<Arc<CustomPage>>, ConfigError> {
    let Some(name) = &page.template else {
        return Ok(None);
    };
    let path = base_dir.join(name);
    let source = std::fs::read_to_string(&path).map_err(|e| {
        invalid(
            "page.template",
            format!("cannot read {}: {e}", path.display()),
        )
    })?;
    let (compiled, lint) = CustomPage::compile(source)
        .map_err(|e| invalid("page.template", format!("{}: {e}", path.display())))?;
    warnings.extend(
        lint.into_iter()
            .map(|w| format!("page.template: {}: {w}", path.display())),
    );
    Ok(Some(Arc::new(compiled)))
}

fn ip_limits(section: &RateLimitSection) -> Result<IpLimits, ConfigError> {
    let per_minute = section.tickets_per_ip_per_minute;
    let burst = section.burst.unwrap_or(per_minute.saturating_mul(2));
    if per_minute > 0 && burst == 0 {
        return Err(invalid(
            "rate_limit.burst",
            "must be at least 1 while tickets_per_ip_per_minute is on",
        ));
    }
    Ok(IpLimits {
        per_minute,
        burst,
        max_live: section.max_live_tickets_per_ip,
        ipv6_prefix: 64,
    })
}

/// The room id names cookies and store keys (and Cloudflare's room): letters, digits, - and _.
pub(crate) fn check_room_id(id: &str) -> Result<(), ConfigError> {
    if id.is_empty()
        || id.len() > 64
        || !id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return Err(invalid(
            "room.id",
            "must be 1-64 characters of letters, digits, '-' and '_'",
        ));
    }
    Ok(())
}

pub(crate) fn same_site(text: &str) -> Result<SameSite, ConfigError> {
    match text.to_ascii_lowercase().as_str() {
        "strict" => Ok(SameSite::Strict),
        "lax" => Ok(SameSite::Lax),
        "none" => Ok(SameSite::None),
        other => Err(invalid(
            "pass.cookie_samesite",
            format!("{other:?} is not one of Strict, Lax, None"),
        )),
    }
}

/// A secret from the environment or the file, or in dev mode a random one.
fn secret(
    key: &str,
    env_name: &str,
    from_file: &mut Option<String>,
    env: &dyn Environment,
    dev: bool,
    warnings: &mut Vec<String>,
) -> Result<String, ConfigError> {
    if let Some(value) = env.var(env_name) {
        *from_file = Some(value);
    }
    match from_file {
        Some(value) if value.len() >= MIN_SECRET_BYTES => Ok(value.clone()),
        _ if dev => {
            let generated: String = (0..MIN_SECRET_BYTES)
                .map(|_| format!("{:02x}", rand::random::<u8>()))
                .collect();
            warnings.push(format!(
                "INSECURE (--dev): {key} is missing or shorter than {MIN_SECRET_BYTES} bytes; \
                 using a random one for this run only"
            ));
            *from_file = Some(generated.clone());
            Ok(generated)
        }
        Some(_) => Err(invalid(
            key,
            format!("must be at least {MIN_SECRET_BYTES} bytes (or set {env_name})"),
        )),
        None => Err(invalid(
            key,
            format!(
                "is required: set it in the file or in {env_name} (at least {MIN_SECRET_BYTES} \
                 bytes), or run with --dev to try the proxy insecurely"
            ),
        )),
    }
}

impl Config {
    pub fn load(
        path: &Path,
        env: &dyn Environment,
        dev: bool,
    ) -> Result<(Config, Vec<String>), ConfigError> {
        let file = ConfigFile::read(path)?;
        let base_dir = path.parent().unwrap_or(Path::new("."));
        let (mut config, warnings) = Self::from_file_in(file, env, dev, base_dir)?;
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
        Self::from_file(ConfigFile::parse(text)?, env, dev)
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
        let mut warnings = Vec::new();
        let pass_secret = secret(
            "pass.secret",
            ENV_JWT_SECRET,
            &mut file.pass.secret,
            env,
            dev,
            &mut warnings,
        )?;
        let admin_token = secret(
            "admin.token",
            ENV_ADMIN_TOKEN,
            &mut file.admin.token,
            env,
            dev,
            &mut warnings,
        )?;

        let room_id = file.room.id.clone();
        check_room_id(&room_id)?;
        if !file.room.path.starts_with('/') {
            return Err(invalid("room.path", "must start with '/'"));
        }
        let room = RoomSettings::from_section(&file.room)?;

        let origin = &file.origin;
        let (origin_host, origin_port) = origin
            .address
            .rsplit_once(':')
            .ok_or_else(|| invalid("origin.address", "must be host:port"))?;
        if origin_host.is_empty() || origin_port.parse::<u16>().is_err() {
            return Err(invalid(
                "origin.address",
                format!("{:?} is not host:port", origin.address),
            ));
        }
        if origin.ca_file.is_some() && !origin.tls {
            return Err(invalid("origin.ca_file", "needs origin.tls = true"));
        }
        if origin.tls && !origin.verify {
            warnings.push(
                "origin.verify = false: the origin's certificate is not checked; anyone on the \
                 path to it can read and change the traffic"
                    .into(),
            );
        }
        let origin_config = OriginConfig {
            address: origin.address.clone(),
            tls: origin.tls,
            verify: origin.verify,
            ca_file: non_empty_path("origin.ca_file", origin.ca_file.as_deref())?,
            sni: origin
                .sni
                .clone()
                .unwrap_or_else(|| origin_host.trim_matches(['[', ']']).to_owned()),
            host_header: origin.host_header.clone(),
            connect_timeout: duration("origin.connect_timeout", &origin.connect_timeout)?,
            read_timeout: duration("origin.read_timeout", &origin.read_timeout)?,
            write_timeout: duration("origin.write_timeout", &origin.write_timeout)?,
            serve_demo_shop: origin.serve_demo_shop,
        };

        let pass = &file.pass;
        if pass.cookie_name.is_empty()
            || !pass
                .cookie_name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        {
            return Err(invalid(
                "pass.cookie_name",
                "must be letters, digits, '-', '_' or '.'",
            ));
        }
        let samesite = same_site(&pass.cookie_samesite)?;
        if samesite == SameSite::None && !pass.cookie_secure {
            return Err(invalid(
                "pass.cookie_samesite",
                "None needs cookie_secure = true (browsers drop it otherwise)",
            ));
        }

        let store = &file.store;
        let backend = match store.backend.as_str() {
            "memory" => Backend::Memory,
            "redis" => Backend::Redis {
                url: store
                    .url
                    .clone()
                    .ok_or_else(|| invalid("store.url", "is required with backend = \"redis\""))?,
            },
            other => {
                return Err(invalid(
                    "store.backend",
                    format!("{other:?} is not one of memory, redis"),
                ));
            }
        };
        if store.prefix.is_empty() {
            return Err(invalid("store.prefix", "cannot be empty"));
        }
        let on_error = match store.on_error.as_str() {
            "closed" => OnStoreError::Closed,
            "open" => OnStoreError::Open,
            other => {
                return Err(invalid(
                    "store.on_error",
                    format!("{other:?} is not one of closed, open"),
                ));
            }
        };
        if on_error == OnStoreError::Open {
            warnings.push(
                "store.on_error = \"open\": while the store is unreachable, new visitors go \
                 straight to the origin with no capacity limit"
                    .into(),
            );
        }

        let listen = &file.listen;
        let tls = match (
            non_empty_path("listen.certificate", listen.certificate.as_deref())?,
            non_empty_path("listen.key", listen.key.as_deref())?,
        ) {
            (Some(certificate), Some(key)) => Some(ListenTls { certificate, key }),
            (None, None) => None,
            (Some(_), None) => {
                return Err(invalid("listen.key", "is required with listen.certificate"));
            }
            (None, Some(_)) => {
                return Err(invalid("listen.certificate", "is required with listen.key"));
            }
        };
        // Under systemd (RuntimeDirectory=) the hand-over needs no configuration.
        let runtime_dir = env
            .var(ENV_RUNTIME_DIRECTORY)
            .and_then(|dirs| dirs.split(':').next().map(PathBuf::from));
        let in_runtime_dir = |name: &str| runtime_dir.as_ref().map(|dir| dir.join(name));
        let upgrade_socket =
            non_empty_path("listen.upgrade_socket", listen.upgrade_socket.as_deref())?
                .or_else(|| in_runtime_dir(UPGRADE_SOCKET_NAME));
        let pid_file = non_empty_path("listen.pid_file", listen.pid_file.as_deref())?
            .or_else(|| in_runtime_dir(PID_FILE_NAME));
        let log = LogConfig {
            format: match file.log.format.as_str() {
                "text" => LogFormat::Text,
                "json" => LogFormat::Json,
                other => {
                    return Err(invalid(
                        "log.format",
                        format!("{other:?} is not one of text, json"),
                    ));
                }
            },
            access: file.log.access,
        };

        let config = Config {
            listen: socket_addr("listen.address", &listen.address)?,
            threads: listen.threads,
            tls,
            grace_period: duration_or_zero("listen.grace_period", &listen.grace_period)?,
            trusted_proxies: listen
                .trusted_proxies
                .iter()
                .map(|c| Cidr::parse(c).map_err(|e| invalid("listen.trusted_proxies", e)))
                .collect::<Result<_, _>>()?,
            upgrade_socket,
            pid_file,
            log,
            origin: origin_config,
            route: Route {
                host: file.room.host.as_ref().map(|h| h.to_ascii_lowercase()),
                path: file.room.path.clone(),
            },
            room_id,
            pass: PassConfig {
                secret: pass_secret.into_bytes(),
                cookie_name: pass.cookie_name.clone(),
                cookie_secure: pass.cookie_secure,
                cookie_samesite: samesite,
            },
            store: StoreConfig {
                backend,
                prefix: store.prefix.clone(),
                on_error,
                connect_timeout: duration("store.connect_timeout", &store.connect_timeout)?,
                command_timeout: duration("store.command_timeout", &store.command_timeout)?,
                leader_ttl: duration("store.leader_ttl", &store.leader_ttl)?,
            },
            rate_limit: ip_limits(&file.rate_limit)?,
            admin_address: socket_addr("admin.address", &file.admin.address)?,
            admin_token,
            branding: branding(&file.page, &room.name)?,
            custom_page: custom_page(&file.page, base_dir, &mut warnings)?,
            turnstile: turnstile(&mut file.turnstile, env, &mut warnings)?,
            room,
            file,
            source: None,
            dev,
        };
        if config.admin_address == config.listen {
            return Err(invalid("admin.address", "must differ from listen.address"));
        }
        Ok((config, warnings))
    }

    /// The effective configuration as TOML, secrets masked, for `--test`.
    pub fn masked_toml(&self) -> String {
        let mut file = self.file.clone();
        let mask = |s: &mut Option<String>| {
            if s.is_some() {
                *s = Some("********".into());
            }
        };
        mask(&mut file.pass.secret);
        mask(&mut file.admin.token);
        if let Some(t) = &mut file.turnstile {
            mask(&mut t.secret);
        }
        toml::to_string_pretty(&file).unwrap_or_else(|e| format!("# cannot print: {e}\n"))
    }
}
