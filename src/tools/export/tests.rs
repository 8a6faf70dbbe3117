use std::time::Duration;

use super::room::*;
use super::*;
use crate::language::Locale;
use crate::request::route::PathPattern;

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
fn every_page_language_is_exported_as_cloudflares_code() {
    let ours: Vec<&str> = Locale::ALL.iter().map(|l| l.tag()).collect();
    assert_eq!(
        ours, CLOUDFLARE_LANGUAGES,
        "the proxy speaks Cloudflare's 38, in its order"
    );
    for locale in Locale::ALL {
        let out = export(
            "",
            &format!("[page]\ndefault_template_language = \"{}\"", locale.tag()),
        );
        assert_eq!(parsed(&out)["default_template_language"], locale.tag());
        assert!(notes_about(&out, "default_template_language").is_empty());
    }
    let korean = export("", "[page]\ndefault_template_language = \"ko-kr\"");
    assert_eq!(parsed(&korean)["default_template_language"], "ko-KR");
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

#[test]
fn a_cookie_domain_has_no_counterpart_and_says_so() {
    let out = export(
        "host = \"shop.example.com\"\ncookie_domain = \"example.com\"\n\
         routes = [{ host = \"pay.example.com\", path = \"/checkout\" }]",
        "",
    );
    let notes = notes_about(&out, "room.cookie_domain");
    assert_eq!(notes.len(), 1, "{:?}", out.notes);
    assert!(notes[0].contains("not exported"), "{}", notes[0]);
    // The second host's route is exported as it is written.
    let room = parsed(&out);
    assert_eq!(
        room["additional_routes"][0]["host"], "pay.example.com",
        "{room}"
    );
    assert!(notes_about(&export("", ""), "cookie_domain").is_empty());
}

#[test]
fn websocket_paths_have_no_counterpart_and_say_so() {
    let out = export("websocket_paths = [\"/ws/*\"]", "");
    let notes = notes_about(&out, "room.websocket_paths");
    assert_eq!(notes.len(), 1, "{:?}", out.notes);
    assert!(notes[0].contains("not exported"), "{}", notes[0]);
    assert!(
        out.tfvars
            .contains("# - room.websocket_paths = [\"/ws/*\"]: not exported"),
        "{}",
        out.tfvars
    );
    assert!(notes_about(&export("", ""), "websocket_paths").is_empty());
}

#[test]
fn the_proof_of_work_and_members_only_lines_have_no_counterpart_and_say_so() {
    assert!(notes_about(&export("", ""), "[proof_of_work]").is_empty());
    let on = export("", "[proof_of_work]\nenabled = true\n");
    assert_eq!(
        notes_about(&on, "[proof_of_work]").len(),
        1,
        "{:?}",
        on.notes
    );
    let per_event = export(
        "[[room.events]]\nname = \"drop\"\nevent_start_time = \"2030-01-01T10:00:00Z\"\n\
         event_end_time = \"2030-01-01T11:00:00Z\"\nproof_of_work = true",
        "",
    );
    assert_eq!(notes_about(&per_event, "[proof_of_work]").len(), 1);
    let members = export("", "[entry]\nrequire_token = true\n");
    assert!(
        notes_about(&members, "[entry] require_token")[0].contains("open to everyone"),
        "{:?}",
        members.notes
    );
}

#[test]
fn routes_become_additional_routes_on_the_rooms_host_and_ask_for_the_advanced_plan() {
    let out = export(
        "host = \"shop.example.com\"\npath = \"/drop\"\n\
         routes = [{ path = \"/cart\" }, { host = \"shop.example.com\", path = \"/checkout\" }]",
        "",
    );
    let v = parsed(&out);
    assert_eq!(
        v["additional_routes"],
        serde_json::json!([
            {"host": "shop.example.com", "path": "/cart"},
            {"host": "shop.example.com", "path": "/checkout"},
        ])
    );
    assert!(
        out.advanced.iter().any(|a| a.contains("room.routes")),
        "{:?}",
        out.advanced
    );
    assert_eq!(v["advanced_plan"], true);
    let plain = parsed(&export("host = \"shop.example.com\"", ""));
    assert!(plain.get("additional_routes").is_none(), "{plain}");
}

#[test]
fn bypass_rules_are_exported_and_protect_and_block_rules_guard_the_bypasses_after_them() {
    let out = export(
        "bypass = [\"/drop/static/*\"]\n\
         [[room.rules]]\nname = \"bad-range\"\naction = \"block\"\nnetworks = [\"203.0.113.0/24\"]\n\
         [[room.rules]]\nname = \"preview\"\naction = \"bypass\"\nmethods = [\"GET\"]\n\
         query = { preview = \"0123456789abcdef\" }\n\
         [[room.rules]]\nname = \"checkout-assets\"\naction = \"protect\"\n\
         paths = [\"/drop/static/checkout/*\"]\ncountries = [\"de\"]",
        "[listen]\ntrusted_proxies = [\"10.0.0.0/8\"]\ncountry_header = \"CF-IPCountry\"",
    );
    let v = parsed(&out);
    let rules = v["bypass_rules"].as_array().unwrap();
    let block = "not (ip.src in {203.0.113.0/24})";
    assert_eq!(rules[0]["description"], "rule preview");
    let arg = "http.request.uri.args[\"preview\"][*] eq \"0123456789abcdef\"";
    assert_eq!(
        rules[0]["expression"],
        format!("(http.request.method in {{\"GET\"}} and (any({arg}) and all({arg}))) and {block}")
    );
    let protect = "not ((starts_with(http.request.uri.path, \"/drop/static/checkout/\")) and \
                   ip.src.country in {\"DE\"})";
    assert_eq!(
        rules[1]["expression"],
        format!(
            "(starts_with(http.request.uri.path, \"/drop/static/\")) and {block} and {protect}"
        )
    );
    assert_eq!(
        rules.len(),
        2,
        "the block and protect rules are not bypass rules"
    );
    assert_eq!(
        notes_about(&out, "\"bad-range\" (block)").len(),
        1,
        "{:?}",
        out.notes
    );
    assert_eq!(notes_about(&out, "\"checkout-assets\" (protect)").len(), 1);
}
