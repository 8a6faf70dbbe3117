//! `[room]`: the room's live settings (replaced whole by the admin API, a reload or the store),
//! its scheduled events, and the settings in effect at a moment.

use std::collections::HashSet;
use std::time::Duration;

use super::bypass::{CookieRule, HeaderRule};
use super::values::{choice, duration};
use super::{ConfigError, canonical, invalid};
use crate::clock::millis;
use crate::clock::{Millis, parse_rfc3339};
use crate::config::file::{EventSection, RoomSection};
use crate::core::room::{Limits, Pick, Placing};
use crate::core::schedule::{self, EventTimes, Phase};
use crate::request::client::Cidr;
use crate::request::route::PathPattern;
use crate::request::rules::Rule;

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

const QUEUEING_METHODS: &[(&str, QueueingMethod)] = &[
    ("fifo", QueueingMethod::Fifo),
    ("random", QueueingMethod::Random),
    ("lottery", QueueingMethod::Lottery),
    ("passthrough", QueueingMethod::Passthrough),
    ("reject", QueueingMethod::Reject),
];

/// The origin commands (`Cf-Waiting-Room-Command`) a room may obey.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OriginCommand {
    Revoke,
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
        choice(key, text, QUEUEING_METHODS)
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
    /// `[proof_of_work]` on or off while the event governs; None: the room's.
    pub proof_of_work: Option<bool>,
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
            proof_of_work: e.proof_of_work,
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
    pub proof_of_work: Option<bool>,
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
    /// Paths where any forwarded request may upgrade (WebSocket); elsewhere only pass holders.
    pub websocket_paths: Vec<PathPattern>,
    pub bypass_ips: Vec<Cidr>,
    pub bypass_headers: Vec<HeaderRule>,
    pub bypass_cookies: Vec<CookieRule>,
    pub bypass_verified_crawlers: bool,
    /// The operator's crawler ranges, by crawler name.
    pub crawler_ranges: Vec<(String, Cidr)>,
    pub revoke_command_enabled: bool,
    pub lottery_window: Duration,
    pub events: Vec<RoomEvent>,
    /// `[[room.rules]]`, in order: the first that holds decides, before the bypass lists.
    pub rules: Vec<Rule>,
    /// Set on the settings in effect at a moment (`at`): the event governing the room then.
    pub event: Option<EventNow>,
    /// The file form these were made from, for patches and echoes.
    pub section: RoomSection,
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
        choice(
            "room.queueing_status_code",
            &s.queueing_status_code.to_string(),
            &[("200", ()), ("202", ()), ("429", ())],
        )?;
        let refresh_interval = duration("room.refresh_interval", &s.refresh_interval)?;
        let claim_window = match &s.claim_window {
            Some(text) => duration("room.claim_window", text)?,
            None => refresh_interval * 2,
        };
        let bypass = canonical::patterns("room.bypass", &s.bypass)?;
        let commands = s
            .enabled_origin_commands
            .iter()
            .map(|c| {
                choice(
                    "room.enabled_origin_commands",
                    c,
                    &[("revoke", OriginCommand::Revoke)],
                )
            })
            .collect::<Result<Vec<_>, _>>()?;
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
        let mut names = HashSet::new();
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
            websocket_paths: canonical::patterns("room.websocket_paths", &s.websocket_paths)?,
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
                .map(|c| CookieRule::parse(c).map_err(|e| invalid("room.bypass_cookies", e)))
                .collect::<Result<_, _>>()?,
            bypass_verified_crawlers: s.bypass_verified_crawlers,
            crawler_ranges: crawler_ranges(s)?,
            revoke_command_enabled: commands.contains(&OriginCommand::Revoke),
            lottery_window: duration("room.lottery_window", &s.lottery_window)?,
            events,
            rules: super::rules::rules(&s.rules)?,
            event: None,
            section: s.clone(),
        })
    }

    /// [`Self::from_section`] with every key's error, not only the first: after each, the key
    /// at fault is set aside (its default, or 1 for a required count; an event and those after
    /// it, whose places would shift otherwise) and the rest checked again.
    pub fn from_section_all(s: &RoomSection) -> Result<Self, ConfigError> {
        let mut errors = Vec::new();
        let mut current = s.clone();
        loop {
            match Self::from_section(&current) {
                Ok(settings) if errors.is_empty() => return Ok(settings),
                Ok(_) => return Err(ConfigError::all(errors)),
                Err(e) => {
                    let next = e.key().and_then(|key| set_aside(&current, &key));
                    errors.push(e);
                    match next {
                        Some(next) if errors.len() < 50 => current = next,
                        _ => return Err(ConfigError::all(errors)),
                    }
                }
            }
        }
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
                proof_of_work: event.proof_of_work,
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
        for fixed in ["id", "host", "path", "routes", "cookie_domain"] {
            if changes.contains_key(fixed) {
                return Err(invalid(
                    &format!("room.{fixed}"),
                    "cannot be changed live: edit the file and restart",
                ));
            }
        }
        let section = merge_patch_named(&self.section, changes, "room")?;
        Self::from_section_all(&section)
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

/// `current` changed by a JSON merge patch (RFC 7396), as a live change of a file section: a
/// null removes the key (back to its default, or unset), an object merges into the object it
/// names key by key, anything else replaces the value.
pub fn merge_patch<T>(
    current: &T,
    changes: &serde_json::Map<String, serde_json::Value>,
) -> Result<T, String>
where
    T: serde::Serialize + serde::de::DeserializeOwned,
{
    let mut merged =
        serde_json::to_value(current).map_err(|e| format!("cannot be serialised: {e}"))?;
    json_patch::merge(&mut merged, &serde_json::Value::Object(changes.clone()));
    serde_json::from_value(merged).map_err(|e| e.to_string())
}

/// [`merge_patch`] with its errors named `{prefix}.{key}` in the file's words: serde names no
/// key, so each key alone finds the ones at fault.
pub fn merge_patch_named<T>(
    current: &T,
    changes: &serde_json::Map<String, serde_json::Value>,
    prefix: &str,
) -> Result<T, ConfigError>
where
    T: serde::Serialize + serde::de::DeserializeOwned,
{
    merge_patch(current, changes).map_err(|whole| {
        let errors: Vec<ConfigError> = changes
            .iter()
            .filter_map(|(key, value)| {
                let one = serde_json::Map::from_iter([(key.clone(), value.clone())]);
                let message = merge_patch(current, &one).err()?;
                let (key, reason) = super::plain_words(&format!("{prefix}.{key}"), &message);
                Some(invalid(&key, reason))
            })
            .collect();
        if errors.is_empty() {
            let (key, reason) = super::plain_words(prefix, &whole);
            invalid(&key, reason)
        } else {
            ConfigError::all(errors)
        }
    })
}

/// A new event from a JSON object, its errors named `{prefix}.{key}` like a change's.
pub fn new_event(
    body: &serde_json::Value,
    prefix: &str,
) -> Result<crate::config::file::EventSection, ConfigError> {
    let serde_json::Value::Object(fields) = body else {
        return Err(invalid(prefix, "must be a JSON object of event keys"));
    };
    // Any error but a missing key is found against an event that has every required one.
    let base = crate::config::file::EventSection {
        name: String::new(),
        description: None,
        prequeue_start_time: None,
        event_start_time: String::new(),
        event_end_time: String::new(),
        shuffle_at_event_start: false,
        suspended: false,
        total_active_users: None,
        new_users_per_minute: None,
        session_duration: None,
        disable_session_renewal: None,
        queueing_method: None,
        heading: None,
        message: None,
        proof_of_work: None,
    };
    match serde_json::from_value(body.clone()) {
        Ok(event) => Ok(event),
        Err(e) if e.to_string().starts_with("missing field") => {
            let (key, reason) = super::plain_words(prefix, &e.to_string());
            Err(invalid(&key, reason))
        }
        Err(_) => merge_patch_named(&base, fields, prefix),
    }
}

/// `section` without the key an error named, or None when that cannot go (or changes nothing).
fn set_aside(section: &RoomSection, key: &str) -> Option<RoomSection> {
    let rest = key.strip_prefix("room.")?;
    let field = rest.split(['.', '[']).next()?;
    let mut value = serde_json::to_value(section).ok()?;
    let fields = value.as_object_mut()?;
    match field {
        "id" | "host" | "path" | "routes" | "cookie_domain" => return None,
        "total_active_users" | "new_users_per_minute" => {
            fields.insert(field.to_owned(), 1.into());
        }
        "events" => {
            let from = rest
                .strip_prefix("events[")
                .and_then(|r| r.split(']').next())
                .and_then(|i| i.parse::<usize>().ok())
                .unwrap_or(0);
            fields.get_mut("events")?.as_array_mut()?.truncate(from);
        }
        _ => {
            fields.remove(field)?;
        }
    }
    let next: RoomSection = serde_json::from_value(value).ok()?;
    let moved = serde_json::to_value(&next).ok() != serde_json::to_value(section).ok();
    moved.then_some(next)
}

fn crawler_ranges(s: &RoomSection) -> Result<Vec<(String, Cidr)>, ConfigError> {
    let mut ranges = Vec::new();
    for (name, list) in &s.crawler_ranges {
        let key = format!("room.crawler_ranges.{name}");
        if !crate::request::crawler::known(name) {
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

#[cfg(test)]
mod tests;
