//! One room of drop.toml as one entry of infra/cloudflare's `rooms` (room/variables.tf's
//! variables), with what Cloudflare cannot express of it.

use std::time::Duration;

use hcl::{Attribute, Expression, Identifier, ObjectKey};

use super::RoomExport;
use super::rules::{bypass_expression, export_rules, rules_string};
use crate::config::file::{ConfigFile, PageSection, RoomSection};
use crate::config::model::{ConfigError, SameSite, check_room_id, invalid};
use crate::config::{QueueingMethod, RoomSettings};
use crate::language::PageLanguage;

/// Cloudflare refuses smaller `total_active_users` and `new_users_per_minute`.
const CLOUDFLARE_MIN_USERS: u64 = 200;
/// Cloudflare's session_duration bounds, in minutes.
const SESSION_MINUTES: (u64, u64) = (1, 30);
/// Fixed on Cloudflare: a queued visitor keeps its place this long after its last refresh.
const CLOUDFLARE_ABANDON_AFTER: Duration = Duration::from_secs(300);
/// Fixed on Cloudflare: the waiting page refreshes this often.
const CLOUDFLARE_REFRESH: Duration = Duration::from_secs(20);
/// Cloudflare refuses a pre-queue that opens less than this before its event starts.
const CLOUDFLARE_MIN_PREQUEUE_MS: i64 = 5 * 60 * 1000;

/// One room's variables: room/variables.tf's, but room_name (its key in `rooms`).
pub(super) fn room_vars(
    file: &ConfigFile,
    room: &RoomSection,
    page: &PageSection,
    samesite: SameSite,
    turnstile: &TurnstileSettings,
) -> Result<RoomExport, ConfigError> {
    check_room_id(&room.id)?;
    let settings = RoomSettings::from_section(room)?;
    let mut notes = Vec::new();
    let mut advanced = Vec::new();
    let mut vars: Vec<Attribute> = Vec::new();

    vars.push(Attribute::new("description", room.name.as_str()));
    match &room.host {
        Some(host) => vars.push(Attribute::new("host", host.as_str())),
        None => notes.push(
            "room.host is not set: Cloudflare needs the host a room protects; add host = \
             \"shop.example.com\" to the room's entry of rooms in the tfvars (terraform refuses \
             it otherwise)"
                .to_owned(),
        ),
    }
    vars.push(Attribute::new("path", room.path.as_str()));
    if !room.routes.is_empty() {
        let routes = room.routes.iter().map(|route| {
            let host = route.host.as_ref().or(room.host.as_ref());
            vec![
                ("host", text(host.map_or("", String::as_str))),
                ("path", text(route.path.as_str())),
            ]
        });
        vars.push(Attribute::new("additional_routes", objects(routes)));
        advanced.push(format!(
            "room.routes ({} more): Cloudflare's additional_routes",
            room.routes.len()
        ));
    }

    for (key, value) in [
        ("total_active_users", settings.total_active_users),
        ("new_users_per_minute", settings.new_users_per_minute),
    ] {
        vars.push(Attribute::new(key, value));
        if value < CLOUDFLARE_MIN_USERS {
            notes.push(format!(
                "room.{key} = {value}: Cloudflare's minimum is {CLOUDFLARE_MIN_USERS}; the value \
                 is exported as is and terraform refuses it, because a managed room cannot \
                 protect a shop this small: raise it knowingly or stay on the proxy"
            ));
        }
    }
    if settings.burst != settings.new_users_per_minute {
        notes.push(format!(
            "room.burst = {}: Cloudflare has no burst; it spreads new_users_per_minute over the \
             minute",
            settings.burst
        ));
    }
    notes.push(
        "capacity: Cloudflare's total_active_users and new_users_per_minute are targets shared \
         between its data centres and may be overshot; the proxy's are hard limits"
            .to_owned(),
    );

    let (minutes, session_note) = session_minutes(settings.session_duration);
    vars.push(Attribute::new("session_duration", minutes));
    if let Some(note) = session_note {
        notes.push(note);
    }
    vars.push(Attribute::new(
        "disable_session_renewal",
        settings.disable_session_renewal,
    ));
    if settings.disable_session_renewal {
        advanced.push("room.disable_session_renewal = true".to_owned());
    }
    let method = cloudflare_method("room.queueing_method", settings.queueing_method, &mut notes);
    if method != QueueingMethod::Fifo.as_str() {
        advanced.push(format!("room.queueing_method = {method:?}"));
    }
    vars.push(Attribute::new("queueing_method", method));
    if settings.queueing_method == QueueingMethod::Random {
        notes.push(
            "room.queueing_method = \"random\": Cloudflare draws at random too, but its page \
             shows neither how many wait nor a place, and its admissions are budgeted per data \
             centre rather than drawn from one line"
                .to_owned(),
        );
    }
    vars.push(Attribute::new(
        "queueing_status_code",
        u64::from(settings.queueing_status_code),
    ));
    vars.push(Attribute::new("queue_all", settings.queue_all));
    vars.push(Attribute::new("suspended", settings.suspended));

    if settings.refresh_interval != CLOUDFLARE_REFRESH {
        notes.push(format!(
            "room.refresh_interval = {:?}: Cloudflare refreshes the waiting page every 20s",
            settings.refresh_interval
        ));
    }
    if settings.abandon_after != CLOUDFLARE_ABANDON_AFTER {
        notes.push(format!(
            "room.abandon_after = {:?}: Cloudflare keeps a queued visitor's place for 5 minutes \
             after its last refresh",
            settings.abandon_after
        ));
    }
    notes.push(format!(
        "room.claim_window = {:?}: Cloudflare has no called-but-not-back state; it decides \
         admission when the visitor's own request arrives",
        settings.claim_window
    ));
    notes.push(
        "exact positions: Cloudflare shows only a wait estimate; {{position}} and {{queued}} \
         render empty at the edge (waiting.html then shows the estimate)"
            .to_owned(),
    );
    if !room.websocket_paths.is_empty() {
        notes.push(format!(
            "room.websocket_paths = {:?}: not exported; the Cloudflare waiting room has no \
             setting for the paths that may open a WebSocket, so at the edge their upgrades \
             follow the zone's WebSockets setting, not this list (a bypass rule on them is the \
             nearest, if their handshakes must not queue)",
            room.websocket_paths
        ));
    }
    if let Some(domain) = &room.cookie_domain {
        notes.push(format!(
            "room.cookie_domain = {domain:?}: not exported; Cloudflare's waiting room cookie \
             (__cfwaitingroom) has no domain setting, so whether one visitor's place carries \
             over the additional_routes of several hosts is Cloudflare's to decide: try it on \
             the zone before the drop"
        ));
    }
    let ip = &file.rate_limit;
    if ip.tickets_per_ip_per_minute > 0 || ip.max_live_tickets_per_ip > 0 {
        notes.push(
            "[rate_limit]: Cloudflare Waiting Room has no per-address limit on new tickets; a \
             rate limiting rule on the room's path is the nearest"
                .to_owned(),
        );
    }

    vars.push(Attribute::new("cookie_suffix", room.id.as_str()));
    vars.push(Attribute::new(
        "cookie_samesite",
        match samesite {
            SameSite::Strict => "strict",
            SameSite::Lax => "lax",
            SameSite::None => "none",
        },
    ));
    vars.push(Attribute::new(
        "cookie_secure",
        if file.pass.cookie_secure {
            "always"
        } else {
            "never"
        },
    ));

    let language_tag = template_language(&page.default_template_language, &mut notes)?;
    vars.push(Attribute::new("default_template_language", language_tag));
    if let Some(template) = &page.template {
        advanced.push(format!("page.template = {template:?} (custom_page_html)"));
    }
    notes.push(match &page.template {
        Some(template) => format!(
            "page.template = {template:?}: Cloudflare's custom_page_html is read from \
             infra/cloudflare/waiting.html; keep the two the same file"
        ),
        None => "[page] colours, logo and texts style the proxy's built-in page only: the \
                 managed room serves infra/cloudflare/waiting.html (custom_page_html)"
            .to_owned(),
    });

    let commands: Vec<Expression> = room
        .enabled_origin_commands
        .iter()
        .map(|c| Expression::from(c.as_str()))
        .collect();
    vars.push(Attribute::new("enabled_origin_commands", commands));

    // The rules first: Cloudflare's rules, like the proxy's, are taken in order.
    let ruled = export_rules(&settings.rules);
    notes.extend(ruled.notes.iter().cloned());
    let by_rule = ruled.bypass.iter().map(|(description, expression)| {
        vec![
            ("description", text(description.as_str())),
            ("expression", text(expression.as_str())),
        ]
    });
    let guarded = |expression: String| text(ruled.guarded(&expression));
    let by_path = settings.bypass.iter().map(|pattern| {
        vec![
            ("description", text(format!("bypass {}", pattern.as_str()))),
            ("expression", guarded(bypass_expression(pattern))),
        ]
    });
    let by_address = (!room.bypass_ips.is_empty()).then(|| {
        vec![
            ("description", text("bypass staff and monitoring addresses")),
            (
                "expression",
                guarded(format!("ip.src in {{{}}}", room.bypass_ips.join(" "))),
            ),
        ]
    });
    let by_header = settings.bypass_headers.iter().map(|rule| {
        let expression = format!(
            "any(http.request.headers[{}][*] eq {})",
            rules_string(&rule.name),
            rules_string(&rule.value)
        );
        vec![
            ("description", text(format!("bypass header {}", rule.name))),
            ("expression", guarded(expression)),
        ]
    });
    let by_cookie = settings.bypass_cookies.iter().map(|rule| {
        vec![
            ("description", text(format!("bypass cookie {}", rule.name))),
            (
                "expression",
                guarded(format!(
                    "http.cookie contains {}",
                    rules_string(&format!("{}={}", rule.name, rule.value))
                )),
            ),
        ]
    });
    let bypass_rules = by_rule
        .chain(by_path)
        .chain(by_address)
        .chain(by_header)
        .chain(by_cookie);
    vars.push(Attribute::new("bypass_rules", objects(bypass_rules)));
    vars.push(Attribute::new("turnstile_mode", turnstile.mode));
    vars.push(Attribute::new("turnstile_action", turnstile.action));
    advanced.extend(turnstile.advanced());
    vars.push(Attribute::new(
        "events",
        events(room, &settings, turnstile, &mut notes, &mut advanced)?,
    ));
    Ok(RoomExport {
        vars,
        notes,
        advanced,
        crawler_bypass: settings.bypass_verified_crawlers,
        ..RoomExport::default()
    })
}

/// `[turnstile]` as Cloudflare's room settings: no section, or mode = "off", is "off" (left
/// out, the provider would turn on an invisible challenge).
pub(super) struct TurnstileSettings {
    mode: &'static str,
    action: &'static str,
}

impl TurnstileSettings {
    pub(super) fn from_file(file: &ConfigFile) -> Result<Self, ConfigError> {
        let Some(section) = &file.turnstile else {
            return Ok(Self {
                mode: "off",
                action: "log",
            });
        };
        let mode = [
            "off",
            "invisible",
            "visible_non_interactive",
            "visible_managed",
        ]
        .into_iter()
        .find(|m| *m == section.mode)
        .ok_or_else(|| {
            invalid(
                "turnstile.mode",
                format!(
                    "{:?} is not one of off, invisible, visible_non_interactive, \
                         visible_managed",
                    section.mode
                ),
            )
        })?;
        let action = ["log", "infinite_queue"]
            .into_iter()
            .find(|a| *a == section.action)
            .ok_or_else(|| {
                invalid(
                    "turnstile.action",
                    format!("{:?} is not one of log, infinite_queue", section.action),
                )
            })?;
        // With the challenge off, what a failure leads to does not matter (and would ask for
        // the Advanced plan for nothing).
        let action = if mode == "off" { "log" } else { action };
        Ok(Self { mode, action })
    }

    /// Which of these settings need the Advanced plan.
    fn advanced(&self) -> Vec<String> {
        let mut out = Vec::new();
        if !["off", "invisible"].contains(&self.mode) {
            out.push(format!("turnstile.mode = {:?}", self.mode));
        }
        if self.action != "log" {
            out.push(format!("turnstile.action = {:?}", self.action));
        }
        out
    }
}

/// page.default_template_language as Cloudflare's code (the proxy's tags are Cloudflare's);
/// "auto" is en-US.
fn template_language(text: &str, notes: &mut Vec<String>) -> Result<&'static str, ConfigError> {
    const KEY: &str = "page.default_template_language";
    match PageLanguage::parse(text).map_err(|e| invalid(KEY, e))? {
        PageLanguage::Fixed(locale) => Ok(locale.tag()),
        PageLanguage::Auto => {
            notes.push(format!(
                "{KEY} = \"auto\": Cloudflare's built-in page has one language per room; \
                 exported as en-US"
            ));
            Ok("en-US")
        }
    }
}

/// Cloudflare allows this many events per room.
const CLOUDFLARE_MAX_EVENTS: usize = 5;

/// `[[room.events]]` as Cloudflare's waiting room events; overrides left out inherit the room's,
/// but the challenge is written on each (the room's `[turnstile]`, which events do not change).
fn events(
    room: &RoomSection,
    settings: &RoomSettings,
    turnstile: &TurnstileSettings,
    notes: &mut Vec<String>,
    advanced: &mut Vec<String>,
) -> Result<Expression, ConfigError> {
    if settings.events.len() > CLOUDFLARE_MAX_EVENTS {
        notes.push(format!(
            "room.events: {} events; Cloudflare allows {CLOUDFLARE_MAX_EVENTS} per room (terraform \
             refuses more): export a drop.toml with the next five",
            settings.events.len()
        ));
    }
    for (i, event) in settings.events.iter().enumerate() {
        if let Some(prequeue) = event.times.prequeue_ms
            && event.times.start_ms - prequeue < CLOUDFLARE_MIN_PREQUEUE_MS
        {
            return Err(invalid(
                &format!("room.events[{i}].prequeue_start_time"),
                format!(
                    "event {:?}: the pre-queue opens {}s before event_start_time; Cloudflare \
                     refuses less than 5 minutes",
                    event.name,
                    (event.times.start_ms - prequeue) / 1000
                ),
            ));
        }
    }
    let entries = room
        .events
        .iter()
        .zip(&settings.events)
        .map(|(section, event)| {
            let key = |k: &str| format!("room.events {:?}: {k}", event.name);
            let mut fields = vec![
                ("name", text(&event.name)),
                (
                    "description",
                    text(section.description.as_deref().unwrap_or("")),
                ),
                ("event_start_time", text(&section.event_start_time)),
                ("event_end_time", text(&section.event_end_time)),
                (
                    "shuffle_at_event_start",
                    Expression::from(event.shuffle_at_event_start),
                ),
                ("suspended", Expression::from(event.suspended)),
            ];
            if let Some(prequeue) = &section.prequeue_start_time {
                fields.push(("prequeue_start_time", text(prequeue)));
            }
            if let Some((users, rate)) = event.limits {
                fields.push(("total_active_users", Expression::from(users)));
                fields.push(("new_users_per_minute", Expression::from(rate)));
            }
            if let Some(session) = event.session_duration {
                let (minutes, note) = session_minutes(session);
                fields.push(("session_duration", Expression::from(minutes)));
                notes.extend(note.map(|n| format!("{}: {n}", key("session_duration"))));
            }
            if let Some(disable) = event.disable_session_renewal {
                fields.push(("disable_session_renewal", Expression::from(disable)));
                if disable {
                    advanced.push(format!("{} = true", key("disable_session_renewal")));
                }
            }
            if let Some(method) = event.queueing_method {
                let method = cloudflare_method(&key("queueing_method"), method, notes);
                fields.push(("queueing_method", text(method)));
                if method != QueueingMethod::Fifo.as_str() {
                    advanced.push(format!("{} = {method:?}", key("queueing_method")));
                }
            }
            fields.push(("turnstile_mode", text(turnstile.mode)));
            fields.push(("turnstile_action", text(turnstile.action)));
            if event.heading.is_some() || event.message.is_some() {
                notes.push(format!(
                    "{}: an event's heading and message style the proxy's built-in page only",
                    key("heading/message")
                ));
            }
            fields
        });
    Ok(objects(entries))
}

/// Cloudflare's name for a queueing method; the lottery, which it lacks, becomes fifo.
fn cloudflare_method(key: &str, method: QueueingMethod, notes: &mut Vec<String>) -> &'static str {
    if method != QueueingMethod::Lottery {
        return method.as_str();
    }
    notes.push(format!(
        "{key} = \"lottery\": Cloudflare has no lottery window; exported as fifo (its nearest \
         fair draw is an event's pre-queue with shuffle_at_event_start)"
    ));
    QueueingMethod::Fifo.as_str()
}

pub(super) fn text(value: impl Into<String>) -> Expression {
    Expression::String(value.into())
}

/// A list of HCL objects, one per entry, each a list of (field, value) pairs.
fn objects(entries: impl Iterator<Item = Vec<(&'static str, Expression)>>) -> Expression {
    Expression::Array(
        entries
            .map(|fields| {
                fields
                    .into_iter()
                    .map(|(key, value)| (ObjectKey::from(Identifier::unchecked(key)), value))
                    .collect()
            })
            .collect(),
    )
}

/// Whole minutes within Cloudflare's 1..30 (nearest minute, halves up), and a note when that
/// changes the session.
pub(super) fn session_minutes(session: Duration) -> (u64, Option<String>) {
    let seconds = session.as_secs_f64();
    let rounded = ((seconds / 60.0).round() as u64).clamp(SESSION_MINUTES.0, SESSION_MINUTES.1);
    let exact = Duration::from_secs(rounded * 60) == session;
    let note = (!exact).then(|| {
        format!(
            "room.session_duration = {session:?}: Cloudflare counts whole minutes from {} to {}; \
             exported as {rounded}",
            SESSION_MINUTES.0, SESSION_MINUTES.1
        )
    });
    (rounded, note)
}
