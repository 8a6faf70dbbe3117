//! `waitroom-proxy export-terraform`: drop.toml as the variables of infra/cloudflare, so the
//! managed room runs on the same numbers, and a list of what Cloudflare cannot express.
//!
//! Pure: a parsed file in, the tfvars text and the notes out. Every list the Terraform iterates
//! (bypass rules, scheduled events) is a list of HCL objects built by `objects`, so a new kind of
//! entry only needs its own fields.

use std::time::Duration;

use hcl::{Attribute, Body, Expression, Identifier, ObjectKey};

use crate::config::file::ConfigFile;
use crate::config::model::{ConfigError, SameSite, check_room_id, invalid, same_site};
use crate::config::{QueueingMethod, RoomSettings};
use crate::locale::PageLanguage;
use crate::route::PathPattern;

/// Cloudflare refuses smaller `total_active_users` and `new_users_per_minute`.
pub const CLOUDFLARE_MIN_USERS: u64 = 200;
/// Cloudflare's session_duration bounds, in minutes.
const SESSION_MINUTES: (u64, u64) = (1, 30);
/// Fixed on Cloudflare: a queued visitor keeps its place this long after its last refresh.
const CLOUDFLARE_ABANDON_AFTER: Duration = Duration::from_secs(300);
/// Fixed on Cloudflare: the waiting page refreshes this often.
const CLOUDFLARE_REFRESH: Duration = Duration::from_secs(20);

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
}

/// The variables of infra/cloudflare from a drop.toml; `source` names it in the header.
pub fn terraform_vars(file: &ConfigFile, source: &str) -> Result<TerraformExport, ExportError> {
    let room = &file.room;
    check_room_id(&room.id)?;
    let settings = RoomSettings::from_section(room)?;
    let language = PageLanguage::parse(&file.page.default_template_language)
        .map_err(|e| invalid("page.default_template_language", e))?;
    let samesite = same_site(&file.pass.cookie_samesite)?;
    let mut notes = Vec::new();
    let mut vars: Vec<Attribute> = Vec::new();

    vars.push(Attribute::new("room_name", room.id.as_str()));
    vars.push(Attribute::new("description", room.name.as_str()));
    match &room.host {
        Some(host) => vars.push(Attribute::new("host", host.as_str())),
        None => notes.push(
            "room.host is not set: Cloudflare needs the host a room protects; add host = \
             \"shop.example.com\" to the tfvars (terraform asks for it otherwise)"
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
    vars.push(Attribute::new(
        "queueing_method",
        cloudflare_method("room.queueing_method", settings.queueing_method, &mut notes),
    ));
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

    let language_tag = match language {
        PageLanguage::Fixed(locale) => locale.tag(),
        PageLanguage::Auto => {
            notes.push(
                "page.default_template_language = \"auto\": Cloudflare's built-in page has one \
                 language per room; exported as en-US"
                    .to_owned(),
            );
            "en-US"
        }
    };
    vars.push(Attribute::new("default_template_language", language_tag));
    notes.push(match &file.page.template {
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
        let expression = match &rule.value {
            None => format!(
                "any(http.request.headers.names[*] eq {})",
                rules_string(&rule.name)
            ),
            Some(value) => format!(
                "any(http.request.headers[{}][*] eq {})",
                rules_string(&rule.name),
                rules_string(value)
            ),
        };
        vec![
            ("description", text(format!("bypass header {}", rule.name))),
            ("expression", text(expression)),
        ]
    });
    let by_cookie = settings.bypass_cookies.iter().map(|name| {
        vec![
            ("description", text(format!("bypass cookie {name}"))),
            (
                "expression",
                text(format!(
                    "http.cookie contains {}",
                    rules_string(&format!("{name}="))
                )),
            ),
        ]
    });
    let bypass_rules = by_path.chain(by_address).chain(by_header).chain(by_cookie);
    vars.push(Attribute::new("bypass_rules", objects(bypass_rules)));
    vars.push(Attribute::new(
        "events",
        events(file, &settings, &mut notes),
    ));
    vars.push(Attribute::new(
        "search_engine_crawler_bypass",
        settings.bypass_verified_crawlers,
    ));
    if settings.bypass_verified_crawlers {
        notes.push(
            "room.bypass_verified_crawlers: Cloudflare's search_engine_crawler_bypass is a zone \
             setting: it applies to every waiting room of the zone, and Cloudflare keeps its own \
             crawler list (room.crawler_ranges has no counterpart)"
                .to_owned(),
        );
    }

    let body = Body::builder().add_attributes(vars).build();
    let mut tfvars = header(source, &notes);
    tfvars.push_str(&hcl::format::to_string(&body)?);
    Ok(TerraformExport { tfvars, notes })
}

/// Cloudflare allows this many events per room.
const CLOUDFLARE_MAX_EVENTS: usize = 5;

/// `[[room.events]]` as Cloudflare's waiting room events; overrides left out inherit the room's.
fn events(file: &ConfigFile, settings: &RoomSettings, notes: &mut Vec<String>) -> Expression {
    if settings.events.len() > CLOUDFLARE_MAX_EVENTS {
        notes.push(format!(
            "room.events: {} events; Cloudflare allows {CLOUDFLARE_MAX_EVENTS} per room (terraform \
             refuses more): export a drop.toml with the next five",
            settings.events.len()
        ));
    }
    let entries = file
        .room
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
            }
            if let Some(method) = event.queueing_method {
                let method = cloudflare_method(&key("queueing_method"), method, notes);
                fields.push(("queueing_method", text(method)));
            }
            if event.heading.is_some() || event.message.is_some() {
                notes.push(format!(
                    "{}: an event's heading and message style the proxy's built-in page only",
                    key("heading/message")
                ));
            }
            fields
        });
    objects(entries)
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

    fn parsed(export: &TerraformExport) -> serde_json::Value {
        hcl::from_str(&export.tfvars).unwrap_or_else(|e| panic!("{e}\n{}", export.tfvars))
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
        assert_eq!(notes_about(&out, "random").len(), 1);
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
            "\"mine.html\"",
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
             bypass_headers = [\"X-Monitoring\", \"X-Staff-Key: s3cret\"]\n\
             bypass_cookies = [\"staff_session\"]",
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
                "any(http.request.headers.names[*] eq \"x-monitoring\")",
                "any(http.request.headers[\"x-staff-key\"][*] eq \"s3cret\")",
                "http.cookie contains \"staff_session=\"",
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
}
