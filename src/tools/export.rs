//! `waitroom-proxy export-terraform`: drop.toml as the variables of infra/cloudflare, so the
//! managed room runs on the same numbers, and a list of what Cloudflare cannot express.
//!
//! Pure: a parsed file in, the tfvars text and the notes out. Every list the Terraform iterates
//! (bypass rules, scheduled events) is a list of HCL objects built by `objects`, so a new kind of
//! entry only needs its own fields.

use std::time::Duration;

use hcl::{Attribute, Body, Expression, Identifier, ObjectKey};

use crate::config::file::{ConfigFile, PageSection, RoomEntry, RoomSection};
use crate::config::model::{ConfigError, SameSite, check_room_id, invalid, same_site};
use crate::config::{QueueingMethod, RoomSettings};
use crate::request::route::PathPattern;
use crate::respond::locale::{Locale, PageLanguage};

/// Cloudflare refuses smaller `total_active_users` and `new_users_per_minute`.
pub const CLOUDFLARE_MIN_USERS: u64 = 200;
/// Cloudflare's session_duration bounds, in minutes.
const SESSION_MINUTES: (u64, u64) = (1, 30);
/// Fixed on Cloudflare: a queued visitor keeps its place this long after its last refresh.
const CLOUDFLARE_ABANDON_AFTER: Duration = Duration::from_secs(300);
/// Fixed on Cloudflare: the waiting page refreshes this often.
const CLOUDFLARE_REFRESH: Duration = Duration::from_secs(20);

/// Cloudflare refuses a pre-queue that opens less than this before its event starts.
const CLOUDFLARE_MIN_PREQUEUE_MS: i64 = 5 * 60 * 1000;

/// Every `default_template_language` the provider (v5) accepts, spelt as it spells them.
/// infra/cloudflare/room/variables.tf validates against the same list (a test keeps them equal).
pub const CLOUDFLARE_LANGUAGES: [&str; 38] = [
    "en-US", "es-ES", "de-DE", "fr-FR", "it-IT", "ja-JP", "ko-KR", "pt-BR", "zh-CN", "zh-TW",
    "nl-NL", "pl-PL", "id-ID", "tr-TR", "ar-EG", "ru-RU", "fa-IR", "bg-BG", "hr-HR", "cs-CZ",
    "da-DK", "fi-FI", "lt-LT", "ms-MY", "nb-NO", "ro-RO", "el-GR", "he-IL", "hi-IN", "hu-HU",
    "sr-BA", "sk-SK", "sl-SI", "sv-SE", "tl-PH", "th-TH", "uk-UA", "vi-VN",
];

/// Cloudflare's code for one of our page languages (all of ours are among its 38).
pub fn cloudflare_language(locale: Locale) -> Option<&'static str> {
    CLOUDFLARE_LANGUAGES
        .into_iter()
        .find(|code| code.eq_ignore_ascii_case(locale.tag()))
}

#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("cannot write HCL: {0}")]
    Hcl(#[from] hcl::Error),
}

#[derive(Debug)]
pub struct TerraformExport {
    /// terraform.tfvars for infra/cloudflare, the notes repeated at the top as comments.
    pub tfvars: String,
    /// What Cloudflare cannot express or does differently, one sentence each.
    pub notes: Vec<String>,
    /// The file's settings that need Cloudflare's Waiting Room Advanced plan (each also a
    /// note); when there are any the tfvars set `advanced_plan = true`, else they leave it out.
    pub advanced: Vec<String>,
}

/// The variables of infra/cloudflare from a drop.toml; `source` names it in the header. Each
/// room of the file becomes one entry of `rooms`, keyed by its id; a note every room shares is
/// said once, one that concerns some rooms names them.
pub fn terraform_vars(file: &ConfigFile, source: &str) -> Result<TerraformExport, ExportError> {
    let rooms: Vec<(&RoomSection, &PageSection, Place)> = match (&file.room, file.rooms.as_slice())
    {
        (Some(room), []) => vec![(room, &file.page, Place::one())],
        (None, []) => return Err(invalid("room", "is required: [room] or [[rooms]]").into()),
        (Some(_), [_, ..]) => {
            return Err(invalid(
                "rooms",
                "a file holds [room] (one room) or [[rooms]] (several), not both",
            )
            .into());
        }
        (None, entries) => entries
            .iter()
            .enumerate()
            .map(|(i, entry)| {
                (
                    &entry.room,
                    entry.page.as_ref().unwrap_or(&file.page),
                    Place::of(i, entry),
                )
            })
            .collect(),
    };
    let samesite = same_site(&file.pass.cookie_samesite)?;
    if samesite == SameSite::None && !file.pass.cookie_secure {
        return Err(invalid(
            "pass.cookie_samesite",
            "\"None\" needs pass.cookie_secure = true: Cloudflare refuses samesite = \"none\" \
             with secure = \"never\"",
        )
        .into());
    }
    let turnstile = Turnstile::from_file(file)?;

    let mut exports: Vec<RoomExport> = Vec::with_capacity(rooms.len());
    for (room, page, place) in &rooms {
        if let Some(other) = exports.iter().find(|e| e.id == room.id) {
            return Err(invalid(
                &format!("{}.id", place.room),
                format!(
                    "{:?} is the id of {} too: Cloudflare names rooms uniquely",
                    room.id, other.place
                ),
            )
            .into());
        }
        let export =
            room_vars(file, room, page, samesite, &turnstile).map_err(|e| place.rename(e))?;
        exports.push(RoomExport {
            id: room.id.clone(),
            place: place.room.clone(),
            ..export
        });
    }

    let several = exports.len() > 1;
    let mut notes = merged(&exports, |e| &e.notes, several);
    let advanced = merged(&exports, |e| &e.advanced, several);
    let crawlers: Vec<String> = exports
        .iter()
        .filter(|e| e.crawler_bypass)
        .map(|e| e.id.clone())
        .collect();
    if !crawlers.is_empty() {
        notes.push(format!(
            "room.bypass_verified_crawlers ({}): Cloudflare's search_engine_crawler_bypass is a \
             zone setting: it applies to every waiting room of the zone, and Cloudflare keeps its \
             own crawler list (room.crawler_ranges has no counterpart)",
            crawlers.join(", ")
        ));
    }

    let mut vars = vec![
        Attribute::new(
            "rooms",
            Expression::Object(
                exports
                    .into_iter()
                    .map(|e| {
                        let fields = e
                            .vars
                            .into_iter()
                            .map(|a| (ObjectKey::from(a.key), a.expr))
                            .collect();
                        (
                            ObjectKey::Expression(text(e.id)),
                            Expression::Object(fields),
                        )
                    })
                    .collect(),
            ),
        ),
        Attribute::new("search_engine_crawler_bypass", !crawlers.is_empty()),
    ];

    if advanced.is_empty() {
        notes.push(
            "JSON for `Accept: application/json` (json_response_enabled) and waiting.html need \
             Cloudflare's Waiting Room Advanced plan, so infra/cloudflare sends them only with \
             advanced_plan = true (set it in terraform.tfvars if the zone has the plan); \
             without it JSON clients get Cloudflare's HTML page"
                .to_owned(),
        );
    } else {
        for setting in &advanced {
            notes.push(format!(
                "Advanced plan: {setting} needs Cloudflare's Waiting Room Advanced plan \
                 (advanced_plan = true is written; terraform apply fails on a zone without it)"
            ));
        }
        // Last, so that it reads as the conclusion of the notes above it.
        vars.push(Attribute::new("advanced_plan", true));
    }

    let body = Body::builder().add_attributes(vars).build();
    let mut tfvars = header(source, &notes);
    tfvars.push_str(&hcl::format::to_string(&body)?);
    Ok(TerraformExport {
        tfvars,
        notes,
        advanced,
    })
}

/// One room's entry of `rooms`, with what Cloudflare cannot express of it.
#[derive(Default)]
struct RoomExport {
    id: String,
    /// `room` or `rooms[i]`: how errors name it.
    place: String,
    vars: Vec<Attribute>,
    notes: Vec<String>,
    advanced: Vec<String>,
    crawler_bypass: bool,
}

/// Said once when every room says it; else named by the room it concerns.
fn merged(
    exports: &[RoomExport],
    list: impl Fn(&RoomExport) -> &Vec<String>,
    several: bool,
) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for export in exports {
        for item in list(export) {
            let shared = exports.iter().all(|e| list(e).contains(item));
            let item = if shared || !several {
                item.clone()
            } else {
                format!("room {:?}: {item}", export.id)
            };
            if !out.contains(&item) {
                out.push(item);
            }
        }
    }
    out
}

/// Where a room is in the file, for the keys its errors name.
struct Place {
    /// `room` or `rooms[2]`.
    room: String,
    /// Its page's keys: `page`, or `rooms[2].page` when it has its own.
    page: String,
}

impl Place {
    fn one() -> Self {
        Self {
            room: "room".into(),
            page: "page".into(),
        }
    }

    fn of(index: usize, entry: &RoomEntry) -> Self {
        Self {
            room: format!("rooms[{index}]"),
            page: if entry.page.is_some() {
                format!("rooms[{index}].page")
            } else {
                "page".into()
            },
        }
    }

    fn rename(&self, error: ConfigError) -> ConfigError {
        let ConfigError::Invalid { key, reason } = error else {
            return error;
        };
        let key = if let Some(rest) = key.strip_prefix("room.") {
            format!("{}.{rest}", self.room)
        } else if let Some(rest) = key.strip_prefix("page.") {
            format!("{}.{rest}", self.page)
        } else {
            key
        };
        ConfigError::Invalid { key, reason }
    }
}

/// One room's variables: room/variables.tf's, but room_name (its key in `rooms`).
fn room_vars(
    file: &ConfigFile,
    room: &RoomSection,
    page: &PageSection,
    samesite: SameSite,
    turnstile: &Turnstile,
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

    let by_path = settings.bypass.iter().map(|pattern| {
        vec![
            ("description", text(format!("bypass {}", pattern.as_str()))),
            ("expression", text(bypass_expression(pattern))),
        ]
    });
    let by_address = (!room.bypass_ips.is_empty()).then(|| {
        vec![
            ("description", text("bypass staff and monitoring addresses")),
            (
                "expression",
                text(format!("ip.src in {{{}}}", room.bypass_ips.join(" "))),
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
            ("expression", text(expression)),
        ]
    });
    let by_cookie = settings.bypass_cookies.iter().map(|rule| {
        vec![
            ("description", text(format!("bypass cookie {}", rule.name))),
            (
                "expression",
                text(format!(
                    "http.cookie contains {}",
                    rules_string(&format!("{}={}", rule.name, rule.value))
                )),
            ),
        ]
    });
    let bypass_rules = by_path.chain(by_address).chain(by_header).chain(by_cookie);
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
struct Turnstile {
    mode: &'static str,
    action: &'static str,
}

impl Turnstile {
    fn from_file(file: &ConfigFile) -> Result<Self, ConfigError> {
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

/// page.default_template_language as Cloudflare's code: ours map to theirs; any other of
/// Cloudflare's 38 passes too (the proxy's built-in pages do not speak it); "auto" is en-US.
fn template_language(text: &str, notes: &mut Vec<String>) -> Result<&'static str, ConfigError> {
    const KEY: &str = "page.default_template_language";
    match PageLanguage::parse(text) {
        Ok(PageLanguage::Fixed(locale)) => cloudflare_language(locale).ok_or_else(|| {
            invalid(
                KEY,
                format!("{:?} is not one of Cloudflare's languages", locale.tag()),
            )
        }),
        Ok(PageLanguage::Auto) => {
            notes.push(format!(
                "{KEY} = \"auto\": Cloudflare's built-in page has one language per room; \
                 exported as en-US"
            ));
            Ok("en-US")
        }
        Err(ours) => {
            let code = CLOUDFLARE_LANGUAGES
                .into_iter()
                .find(|code| code.eq_ignore_ascii_case(text.trim()))
                .ok_or_else(|| {
                    invalid(
                        KEY,
                        format!(
                            "{text:?} is neither one of the proxy's languages nor one of \
                             Cloudflare's 38 ({})",
                            CLOUDFLARE_LANGUAGES.join(", ")
                        ),
                    )
                })?;
            notes.push(format!(
                "{KEY} = {code:?}: Cloudflare's page speaks it, the proxy's built-in pages do \
                 not ({ours}): waitroom-proxy refuses this file"
            ));
            Ok(code)
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
    turnstile: &Turnstile,
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

fn text(value: impl Into<String>) -> Expression {
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

fn header(source: &str, notes: &[String]) -> String {
    let mut text = format!(
        "# Written by `waitroom-proxy export-terraform` from {source}: change {source} and \
         export again.\n# zone_id is not in it: set zone_id in another .tfvars file or \
         TF_VAR_zone_id.\n#\n# What Cloudflare cannot express or does differently:\n"
    );
    for note in notes {
        text.push_str(&format!("# - {note}\n"));
    }
    text.push('\n');
    text
}

/// Whole minutes within Cloudflare's 1..30 (nearest minute, halves up), and a note when that
/// changes the session.
fn session_minutes(session: Duration) -> (u64, Option<String>) {
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

/// A Cloudflare Rules-language string literal.
fn rules_string(text: &str) -> String {
    format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""))
}

/// Our bypass pattern as a Cloudflare rule expression on the same path, case-sensitive like ours:
/// an exact path, a prefix, a suffix, or else a strict wildcard (where `*` matches slashes too,
/// as in ours).
pub fn bypass_expression(pattern: &PathPattern) -> String {
    let text = pattern.as_str();
    const PATH: &str = "http.request.uri.path";
    let stars = text.matches('*').count();
    match (stars, text.strip_suffix('*'), text.strip_prefix('*')) {
        (0, _, _) => format!("{PATH} eq {}", rules_string(text)),
        (1, Some(prefix), _) if !prefix.is_empty() => {
            format!("starts_with({PATH}, {})", rules_string(prefix))
        }
        (1, _, Some(suffix)) if !suffix.is_empty() => {
            format!("ends_with({PATH}, {})", rules_string(suffix))
        }
        // In a wildcard value a backslash escapes the next character.
        _ => format!(
            "{PATH} strict wildcard {}",
            rules_string(&text.replace('\\', "\\\\"))
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file_with_limits(total: u64, rate: u64, room_extra: &str, rest: &str) -> ConfigFile {
        let text = format!(
            "[origin]\naddress = \"127.0.0.1:3000\"\n[room]\nid = \"spring-drop\"\n\
             name = \"Spring \\\"${{drop}}\\\"\"\ntotal_active_users = {total}\n\
             new_users_per_minute = {rate}\n{room_extra}\n{rest}"
        );
        ConfigFile::parse(&text).unwrap()
    }

    fn file(room_extra: &str, rest: &str) -> ConfigFile {
        file_with_limits(500, 250, room_extra, rest)
    }

    fn export(room_extra: &str, rest: &str) -> TerraformExport {
        terraform_vars(&file(room_extra, rest), "drop.toml").unwrap()
    }

    fn tfvars(export: &TerraformExport) -> serde_json::Value {
        hcl::from_str(&export.tfvars).unwrap_or_else(|e| panic!("{e}\n{}", export.tfvars))
    }

    /// The one room's variables as room/variables.tf names them: its entry of `rooms`, its key
    /// as room_name, and the zone's variables beside them.
    fn parsed(export: &TerraformExport) -> serde_json::Value {
        let top = tfvars(export);
        let rooms = top["rooms"].as_object().unwrap();
        assert_eq!(rooms.len(), 1, "{}", export.tfvars);
        let (id, room) = rooms.iter().next().unwrap();
        let mut v = room.clone();
        v["room_name"] = id.clone().into();
        for (key, value) in top.as_object().unwrap() {
            if key != "rooms" {
                v[key] = value.clone();
            }
        }
        v
    }

    fn notes_about<'a>(export: &'a TerraformExport, needle: &str) -> Vec<&'a String> {
        export.notes.iter().filter(|n| n.contains(needle)).collect()
    }

    #[test]
    fn the_room_maps_key_for_key() {
        let out = export(
            "host = \"shop.example.com\"\npath = \"/drops\"\nsession_duration = \"10m\"\n\
             disable_session_renewal = true\nqueueing_method = \"random\"\n\
             queueing_status_code = 202\nqueue_all = true\nsuspended = true\n\
             enabled_origin_commands = [\"revoke\"]",
            "[pass]\ncookie_samesite = \"Strict\"\ncookie_secure = false\n\
             [page]\ndefault_template_language = \"fr-FR\"",
        );
        let v = parsed(&out);
        assert_eq!(v["room_name"], "spring-drop");
        assert_eq!(v["description"], "Spring \"${drop}\"");
        assert_eq!(v["host"], "shop.example.com");
        assert_eq!(v["path"], "/drops");
        assert_eq!(v["total_active_users"], 500);
        assert_eq!(v["new_users_per_minute"], 250);
        assert_eq!(v["session_duration"], 10);
        assert_eq!(v["disable_session_renewal"], true);
        assert_eq!(v["queueing_method"], "random");
        assert_eq!(v["queueing_status_code"], 202);
        assert_eq!(v["queue_all"], true);
        assert_eq!(v["suspended"], true);
        assert_eq!(v["cookie_suffix"], "spring-drop");
        assert_eq!(v["cookie_samesite"], "strict");
        assert_eq!(v["cookie_secure"], "never");
        assert_eq!(v["default_template_language"], "fr-FR");
        assert_eq!(v["enabled_origin_commands"], serde_json::json!(["revoke"]));
        assert_eq!(v["bypass_rules"], serde_json::json!([]));
        assert_eq!(v["events"], serde_json::json!([]));
        assert!(
            out.tfvars
                .contains(r#"description = "Spring \"$${drop}\"""#),
            "a template marker in a name stays literal: {}",
            out.tfvars
        );
        assert_eq!(notes_about(&out, "draws at random too").len(), 1);
        assert_eq!(v["turnstile_mode"], "off", "no [turnstile]: no challenge");
        assert_eq!(v["turnstile_action"], "log");
        assert_eq!(
            out.advanced,
            [
                "room.disable_session_renewal = true",
                "room.queueing_method = \"random\""
            ]
        );
        assert_eq!(v["advanced_plan"], true);
        assert!(notes_about(&out, "room.host").is_empty());
        assert!(notes_about(&out, "session_duration").is_empty());
    }

    #[test]
    fn durations_become_whole_minutes_within_cloudflares_range() {
        assert_eq!(session_minutes(Duration::from_secs(300)), (5, None));
        for (seconds, minutes) in [(30, 1), (89, 1), (90, 2), (150, 3), (45 * 60, 30), (1, 1)] {
            let (got, note) = session_minutes(Duration::from_secs(seconds));
            assert_eq!(got, minutes, "{seconds}s");
            let note = note.unwrap_or_default();
            assert!(note.contains(&format!("exported as {minutes}")), "{note}");
        }
        let out = export("session_duration = \"30s\"", "");
        assert_eq!(parsed(&out)["session_duration"], 1);
        assert_eq!(notes_about(&out, "room.session_duration = 30s").len(), 1);
    }

    #[test]
    fn what_cloudflare_cannot_express_is_said() {
        let out = export(
            "burst = 10\nrefresh_interval = \"5s\"\nabandon_after = \"1m\"\n\
             claim_window = \"15s\"",
            "[page]\ndefault_template_language = \"auto\"\ntemplate = \"mine.html\"",
        );
        for needle in [
            "room.host is not set",
            "room.burst = 10",
            "room.refresh_interval = 5s",
            "room.abandon_after = 60s",
            "room.claim_window = 15s",
            "exact positions",
            "[rate_limit]",
            "\"auto\"",
            "page.template = \"mine.html\": Cloudflare's custom_page_html",
            "Advanced plan: page.template = \"mine.html\"",
        ] {
            assert_eq!(
                notes_about(&out, needle).len(),
                1,
                "{needle}: {:?}",
                out.notes
            );
        }
        let off = export(
            "",
            "[rate_limit]\ntickets_per_ip_per_minute = 0\nmax_live_tickets_per_ip = 0",
        );
        assert!(notes_about(&off, "[rate_limit]").is_empty());
        let v = parsed(&out);
        assert_eq!(v["default_template_language"], "en-US");
        assert!(v.get("host").is_none());
        for note in &out.notes {
            assert!(out.tfvars.contains(&format!("# - {note}\n")));
        }

        let small = terraform_vars(&file_with_limits(50, 10, "", ""), "drop.toml").unwrap();
        let v = parsed(&small);
        assert_eq!(v["total_active_users"], 50, "exported as is");
        assert_eq!(v["new_users_per_minute"], 10);
        assert_eq!(notes_about(&small, "minimum is 200").len(), 2);
    }

    #[test]
    fn address_header_and_cookie_bypasses_become_rule_expressions() {
        let out = export(
            "bypass_ips = [\"203.0.113.0/24\", \"10.0.0.1\"]\n\
             bypass_headers = [\"X-Monitoring: monitor-0123456789\", \"X-Staff-Key: s3cret-0123456789\"]\n\
             bypass_cookies = [\"staff_session=0123456789abcdef\"]",
            "",
        );
        let expressions: Vec<String> = parsed(&out)["bypass_rules"]
            .as_array()
            .map(|rules| {
                rules
                    .iter()
                    .map(|r| r["expression"].as_str().unwrap_or_default().to_owned())
                    .collect()
            })
            .unwrap_or_default();
        assert_eq!(
            expressions,
            [
                "ip.src in {203.0.113.0/24 10.0.0.1}",
                "any(http.request.headers[\"x-monitoring\"][*] eq \"monitor-0123456789\")",
                "any(http.request.headers[\"x-staff-key\"][*] eq \"s3cret-0123456789\")",
                "http.cookie contains \"staff_session=0123456789abcdef\"",
            ]
        );
    }

    #[test]
    fn events_become_cloudflare_events() {
        let events = "queueing_method = \"lottery\"\nbypass_verified_crawlers = true\n\
            [[room.events]]\nname = \"drop-1000\"\n\
            prequeue_start_time = \"2026-12-05T09:30:00+01:00\"\n\
            event_start_time = \"2026-12-05T10:00:00+01:00\"\n\
            event_end_time = \"2026-12-05T12:00:00+01:00\"\nshuffle_at_event_start = true\n\
            total_active_users = 300\nnew_users_per_minute = 250\nsession_duration = \"90s\"\n\
            heading = \"Drop at 10\"\n\
            [[room.events]]\nname = \"restock\"\nevent_start_time = \"2026-12-06T10:00:00Z\"\n\
            event_end_time = \"2026-12-06T11:00:00Z\"\nqueueing_method = \"random\"\n";
        let exported = export(events, "");
        let vars = parsed(&exported);
        assert_eq!(vars["queueing_method"], "fifo");
        assert_eq!(vars["search_engine_crawler_bypass"], true);
        let list = vars["events"].as_array().unwrap();
        assert_eq!(list.len(), 2);
        assert_eq!(list[0]["name"], "drop-1000");
        assert_eq!(list[0]["prequeue_start_time"], "2026-12-05T09:30:00+01:00");
        assert_eq!(list[0]["shuffle_at_event_start"], true);
        assert_eq!(list[0]["total_active_users"], 300);
        assert_eq!(list[0]["new_users_per_minute"], 250);
        assert_eq!(list[0]["session_duration"], 2);
        assert_eq!(list[1]["queueing_method"], "random");
        assert!(list[1].get("prequeue_start_time").is_none());
        assert!(
            list[1].get("total_active_users").is_none(),
            "inherits the room's"
        );
        assert_eq!(notes_about(&exported, "lottery").len(), 1);
        assert_eq!(notes_about(&exported, "heading and message").len(), 1);
        assert_eq!(
            notes_about(&exported, "search_engine_crawler_bypass").len(),
            1
        );
        assert!(notes_about(&exported, "drop-1000\": session_duration").len() == 1);
    }

    #[test]
    fn bypass_patterns_become_rule_expressions() {
        let p = |s: &str| bypass_expression(&PathPattern::parse(s).unwrap());
        assert_eq!(
            p("/favicon.ico"),
            r#"http.request.uri.path eq "/favicon.ico""#
        );
        assert_eq!(
            p("/static/*"),
            r#"starts_with(http.request.uri.path, "/static/")"#
        );
        assert_eq!(p("*.css"), r#"ends_with(http.request.uri.path, ".css")"#);
        assert_eq!(
            p("/a/*/b*"),
            r#"http.request.uri.path strict wildcard "/a/*/b*""#
        );
        assert_eq!(p("*"), r#"http.request.uri.path strict wildcard "*""#);
        assert_eq!(
            p("/say\"hi\"\\"),
            r#"http.request.uri.path eq "/say\"hi\"\\""#
        );
        // No escapes in our patterns: a backslash is a character like any other.
        assert_eq!(p("/x\\*"), r#"starts_with(http.request.uri.path, "/x\\")"#);
        assert_eq!(
            p("/a\\b/*/c"),
            r#"http.request.uri.path strict wildcard "/a\\\\b/*/c""#
        );

        let out = export("bypass = [\"/static/*\", \"*.js\"]", "");
        assert_eq!(
            parsed(&out)["bypass_rules"],
            serde_json::json!([
                {
                    "description": "bypass /static/*",
                    "expression": "starts_with(http.request.uri.path, \"/static/\")"
                },
                {
                    "description": "bypass *.js",
                    "expression": "ends_with(http.request.uri.path, \".js\")"
                }
            ])
        );
    }

    #[test]
    fn invalid_settings_are_refused_naming_the_key() {
        let bad = |room: &str, rest: &str| match terraform_vars(&file(room, rest), "x") {
            Ok(_) => panic!("accepted {room} {rest}"),
            Err(e) => e.to_string(),
        };
        assert!(bad("queueing_method = \"lifo\"", "").starts_with("room.queueing_method"));
        assert!(
            bad("", "[page]\ndefault_template_language = \"xx\"")
                .starts_with("page.default_template_language")
        );
        assert!(bad("", "[pass]\ncookie_samesite = \"lots\"").starts_with("pass.cookie_samesite"));
    }

    #[test]
    fn turnstile_is_written_for_the_room_and_every_event() {
        let events = "[[room.events]]\nname = \"drop\"\n\
            event_start_time = \"2026-12-06T10:00:00Z\"\n\
            event_end_time = \"2026-12-06T11:00:00Z\"\n";
        let none = parsed(&export(events, ""));
        assert_eq!(none["turnstile_mode"], "off");
        assert_eq!(none["turnstile_action"], "log");
        assert_eq!(none["events"][0]["turnstile_mode"], "off");
        assert_eq!(none["events"][0]["turnstile_action"], "log");
        assert!(none.get("advanced_plan").is_none());

        let section = |mode: &str, action: &str| {
            format!(
                "[turnstile]\nmode = \"{mode}\"\naction = \"{action}\"\n\
                 site_key = \"1x00000000000000000000AA\"\n"
            )
        };
        let invisible = export(events, &section("invisible", "log"));
        let v = parsed(&invisible);
        assert_eq!(v["turnstile_mode"], "invisible");
        assert_eq!(v["events"][0]["turnstile_mode"], "invisible");
        assert!(invisible.advanced.is_empty(), "{:?}", invisible.advanced);
        assert!(v.get("advanced_plan").is_none());
        assert_eq!(
            notes_about(&invisible, "advanced_plan = true (set it").len(),
            1
        );

        let parked = export(events, &section("visible_managed", "infinite_queue"));
        let v = parsed(&parked);
        assert_eq!(v["turnstile_mode"], "visible_managed");
        assert_eq!(v["turnstile_action"], "infinite_queue");
        assert_eq!(v["events"][0]["turnstile_action"], "infinite_queue");
        assert_eq!(
            parked.advanced,
            [
                "turnstile.mode = \"visible_managed\"",
                "turnstile.action = \"infinite_queue\""
            ]
        );
        assert_eq!(v["advanced_plan"], true);
        assert_eq!(notes_about(&parked, "Advanced plan: turnstile.").len(), 2);

        // Off: the action is moot and asks for no plan.
        let off = export("", &section("off", "infinite_queue"));
        assert_eq!(parsed(&off)["turnstile_action"], "log");
        assert!(off.advanced.is_empty());
        assert!(
            terraform_vars(&file("", &section("loud", "log")), "x")
                .unwrap_err()
                .to_string()
                .starts_with("turnstile.mode")
        );
    }

    #[test]
    fn what_needs_the_advanced_plan_is_named_and_only_then_asked_for() {
        let plain = export("", "");
        assert!(plain.advanced.is_empty());
        assert!(
            parsed(&plain).get("advanced_plan").is_none(),
            "{}",
            plain.tfvars
        );

        let events = "[[room.events]]\nname = \"drop\"\n\
            event_start_time = \"2026-12-06T10:00:00Z\"\n\
            event_end_time = \"2026-12-06T11:00:00Z\"\nqueueing_method = \"reject\"\n\
            disable_session_renewal = true\n";
        let out = export(events, "");
        assert_eq!(
            out.advanced,
            [
                "room.events \"drop\": disable_session_renewal = true",
                "room.events \"drop\": queueing_method = \"reject\""
            ]
        );
        assert_eq!(parsed(&out)["advanced_plan"], true);

        // The lottery is exported as fifo, which needs no plan.
        let lottery = export("queueing_method = \"lottery\"", "");
        assert!(lottery.advanced.is_empty());
    }

    #[test]
    fn every_page_language_has_its_cloudflare_code_and_cloudflares_others_pass() {
        for locale in Locale::ALL {
            assert_eq!(cloudflare_language(locale), Some(locale.tag()));
            let out = export(
                "",
                &format!("[page]\ndefault_template_language = \"{}\"", locale.tag()),
            );
            assert_eq!(parsed(&out)["default_template_language"], locale.tag());
        }
        let korean = export("", "[page]\ndefault_template_language = \"ko-kr\"");
        assert_eq!(parsed(&korean)["default_template_language"], "ko-KR");
        assert_eq!(
            notes_about(&korean, "\"ko-KR\": Cloudflare's page speaks it").len(),
            1
        );
        let unique: std::collections::BTreeSet<&str> = CLOUDFLARE_LANGUAGES.into_iter().collect();
        assert_eq!(unique.len(), 38);
    }

    #[test]
    fn what_terraform_apply_would_refuse_is_refused_naming_the_key() {
        let error = |room: &str, rest: &str| match terraform_vars(&file(room, rest), "x") {
            Ok(_) => panic!("accepted {room} {rest}"),
            Err(e) => e.to_string(),
        };
        let event = |prequeue: &str| {
            format!(
                "[[room.events]]\nname = \"drop\"\nprequeue_start_time = \"{prequeue}\"\n\
                 event_start_time = \"2026-12-06T10:00:00Z\"\n\
                 event_end_time = \"2026-12-06T11:00:00Z\"\n"
            )
        };
        let short = error(&event("2026-12-06T09:56:00Z"), "");
        assert!(
            short.starts_with("room.events[0].prequeue_start_time"),
            "{short}"
        );
        assert!(
            short.contains("240s") && short.contains("5 minutes"),
            "{short}"
        );
        let enough = export(&event("2026-12-06T09:55:00Z"), "");
        assert_eq!(
            parsed(&enough)["events"][0]["prequeue_start_time"],
            "2026-12-06T09:55:00Z"
        );

        let cookie = error(
            "",
            "[pass]\ncookie_samesite = \"None\"\ncookie_secure = false",
        );
        assert!(cookie.starts_with("pass.cookie_samesite"), "{cookie}");
        let secure = parsed(&export("", "[pass]\ncookie_samesite = \"None\""));
        assert_eq!(secure["cookie_samesite"], "none");
        assert_eq!(secure["cookie_secure"], "always");
    }

    #[test]
    fn every_room_becomes_an_entry_and_their_notes_are_said_once_or_named() {
        let text = "[origin]\naddress = \"127.0.0.1:3000\"\n\
            [[rooms]]\nid = \"sneakers\"\nhost = \"shop.example.com\"\npath = \"/drop/sneakers\"\n\
            total_active_users = 400\nnew_users_per_minute = 300\nburst = 10\n\
            [[rooms]]\nid = \"tickets\"\nhost = \"shop.example.com\"\npath = \"/tickets\"\n\
            total_active_users = 900\nnew_users_per_minute = 600\nqueueing_method = \"random\"\n\
            [rooms.page]\ndefault_template_language = \"de-DE\"\n";
        let out = terraform_vars(&ConfigFile::parse(text).unwrap(), "two.toml").unwrap();
        let v = tfvars(&out);
        let rooms = v["rooms"].as_object().unwrap();
        assert_eq!(rooms.keys().collect::<Vec<_>>(), ["sneakers", "tickets"]);
        assert_eq!(rooms["sneakers"]["path"], "/drop/sneakers");
        assert_eq!(rooms["sneakers"]["total_active_users"], 400);
        assert_eq!(rooms["sneakers"]["default_template_language"], "en-US");
        assert_eq!(rooms["tickets"]["total_active_users"], 900);
        assert_eq!(rooms["tickets"]["queueing_method"], "random");
        assert_eq!(rooms["tickets"]["default_template_language"], "de-DE");
        assert_eq!(rooms["tickets"]["cookie_suffix"], "tickets");
        assert!(
            rooms["tickets"].get("room_name").is_none(),
            "the key names it"
        );
        assert_eq!(
            v["advanced_plan"], true,
            "the tickets' random queue needs it"
        );
        assert_eq!(
            out.advanced,
            ["room \"tickets\": room.queueing_method = \"random\""]
        );
        assert_eq!(
            notes_about(&out, "exact positions").len(),
            1,
            "{:?}",
            out.notes
        );
        assert_eq!(
            notes_about(&out, "room \"sneakers\": room.burst = 10").len(),
            1,
            "{:?}",
            out.notes
        );
        assert!(notes_about(&out, "room \"tickets\": room.burst").is_empty());

        let same_id = text.replace("id = \"tickets\"", "id = \"sneakers\"");
        let error = terraform_vars(&ConfigFile::parse(&same_id).unwrap(), "two.toml")
            .unwrap_err()
            .to_string();
        assert!(error.contains("rooms[1].id"), "{error}");
        let bad = text.replace(
            "default_template_language = \"de-DE\"",
            "default_template_language = \"xx\"",
        );
        let error = terraform_vars(&ConfigFile::parse(&bad).unwrap(), "two.toml")
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("rooms[1].page.default_template_language"),
            "{error}"
        );
    }
}
