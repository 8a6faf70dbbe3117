#![allow(clippy::unwrap_used)]
//! The configuration file: shipped files are valid, every error names its key, secrets are
//! required (or explicitly insecure with --dev) and masked when printed.

use std::collections::HashMap;
use std::process::Command;

use waitroom::config::model::Environment;
use waitroom::config::{Config, ConfigError};

struct Env(HashMap<&'static str, &'static str>);

impl Environment for Env {
    fn var(&self, name: &str) -> Option<String> {
        self.0.get(name).map(|v| v.to_string())
    }
}

const SECRET: &str = "0123456789abcdef0123456789abcdef-secret";
const TOKEN: &str = "0123456789abcdef0123456789abcdef-token";

fn with_secrets() -> Env {
    Env(HashMap::from([
        ("WR_JWT_SECRET", SECRET),
        ("WR_ADMIN_TOKEN", TOKEN),
    ]))
}

fn minimal(room_extra: &str) -> String {
    format!(
        "[origin]\naddress = \"127.0.0.1:3000\"\n[room]\nid = \"r\"\ntotal_active_users = 2\n\
         new_users_per_minute = 2\n{room_extra}\n"
    )
}

fn error_of(text: &str) -> String {
    match Config::parse(text, &with_secrets(), false) {
        Ok(_) => panic!("accepted: {text}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn the_shipped_configs_are_valid() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("config");
    let mut checked = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            Config::load(&path, &with_secrets(), false)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            checked += 1;
        }
    }
    assert!(checked >= 2);
}

#[test]
fn defaults_follow_cloudflare_and_the_brief() {
    let (config, warnings) = Config::parse(&minimal(""), &with_secrets(), false).unwrap();
    assert!(warnings.is_empty());
    let room = &config.rooms[0].settings;
    assert_eq!(room.burst, 2, "one minute's worth");
    assert_eq!(room.session_duration.as_secs(), 300);
    assert_eq!(room.refresh_interval.as_secs(), 20);
    assert_eq!(room.abandon_after.as_secs(), 300);
    assert_eq!(room.claim_window.as_secs(), 40);
    assert_eq!(room.queueing_status_code, 200);
    assert_eq!(config.rooms[0].routes[0].path, "/");
    assert_eq!(config.admin_address.to_string(), "127.0.0.1:9091");
    assert_eq!(config.pass.cookie_name, "waitroom");
    assert!(config.pass.cookie_secure);
    assert_eq!(config.pass.secret, SECRET.as_bytes());
    assert_eq!(config.admin_token, TOKEN);
    let ip = config.rate_limit;
    assert_eq!(
        (ip.per_minute, ip.burst, ip.max_live),
        (60, 120, 500),
        "the per-address limit is on"
    );
}

#[test]
fn the_per_address_limit_turns_off_with_zeros_and_takes_its_own_burst() {
    let parse = |section: &str| {
        let text = format!("{}[rate_limit]\n{section}\n", minimal(""));
        Config::parse(&text, &with_secrets(), false)
            .unwrap()
            .0
            .rate_limit
    };
    assert!(parse("tickets_per_ip_per_minute = 0\nmax_live_tickets_per_ip = 0").is_off());
    let own = parse("tickets_per_ip_per_minute = 10\nburst = 3");
    assert_eq!((own.per_minute, own.burst, own.max_live), (10, 3, 500));
    let message = error_of(&format!(
        "{}[rate_limit]\ntickets_per_ip_per_minute = 10\nburst = 0\n",
        minimal("")
    ));
    assert!(message.contains("rate_limit.burst"), "{message}");
    let message = error_of(&format!("{}[rate_limit]\nper_ip = 1\n", minimal("")));
    assert!(message.contains("per_ip"), "{message}");
}

#[test]
fn a_small_shop_may_run_a_room_of_two_with_short_sessions() {
    let text = minimal("session_duration = \"3s\"\nrefresh_interval = \"1s\"\nburst = 1");
    let (config, _) = Config::parse(&text, &with_secrets(), false).unwrap();
    assert_eq!(config.rooms[0].settings.session_duration.as_secs(), 3);
}

#[test]
fn every_error_names_the_key_and_the_reason() {
    let cases = [
        (minimal("total_active_user = 5"), "total_active_user"),
        (
            minimal("session_duration = \"soon\""),
            "room.session_duration",
        ),
        (minimal("abandon_after = \"0s\""), "room.abandon_after"),
        (
            minimal("queueing_method = \"lifo\""),
            "room.queueing_method",
        ),
        (
            minimal("queueing_status_code = 503"),
            "room.queueing_status_code",
        ),
        (minimal("bypass = [\"static/*\"]"), "room.bypass"),
        (minimal("bypass_ips = [\"10.0.0.0/40\"]"), "room.bypass_ips"),
        (
            minimal("bypass_headers = [\"bad header: x\"]"),
            "room.bypass_headers",
        ),
        (minimal("bypass_cookies = [\"a;b\"]"), "room.bypass_cookies"),
        (
            format!("[listen]\ntrusted_proxies = [\"lb\"]\n{}", minimal("")),
            "listen.trusted_proxies",
        ),
        (
            minimal("enabled_origin_commands = [\"reboot\"]"),
            "room.enabled_origin_commands",
        ),
        (minimal("path = \"drop\""), "room.path"),
        (minimal("").replace("id = \"r\"", "id = \"a b\""), "room.id"),
        (
            minimal("").replace("total_active_users = 2", "total_active_users = 0"),
            "room.total_active_users",
        ),
        (
            minimal("").replace("127.0.0.1:3000", "nowhere"),
            "origin.address",
        ),
        (
            minimal("").replace(
                "address = \"127.0.0.1:3000\"",
                "address = \"127.0.0.1:3000\"\nresolve_interval = \"100ms\"",
            ),
            "origin.resolve_interval",
        ),
        (
            minimal("").replace(
                "address = \"127.0.0.1:3000\"",
                "address = \"127.0.0.1:3000\"\nresolve_interval = \"often\"",
            ),
            "origin.resolve_interval",
        ),
        (
            minimal("").replace(
                "address = \"127.0.0.1:3000\"",
                "address = \"127.0.0.1:3000\"\nresolve_interval = \"1000000y\"",
            ),
            "origin.resolve_interval",
        ),
        (
            format!("{}[store]\nbackend = \"redis\"\n", minimal("")),
            "store.url",
        ),
        (
            format!("{}[store]\nbackend = \"etcd\"\n", minimal("")),
            "store.backend",
        ),
        (
            format!("{}[store]\non_error = \"maybe\"\n", minimal("")),
            "store.on_error",
        ),
        (
            format!(
                "{}[pass]\ncookie_samesite = \"None\"\ncookie_secure = false\n",
                minimal("")
            ),
            "pass.cookie_samesite",
        ),
        (
            format!("{}[page]\nprimary_color = \"blue\"\n", minimal("")),
            "page.primary_color",
        ),
        (
            format!("{}[page]\nlogo_url = \"http://x/logo.png\"\n", minimal("")),
            "page.logo_url",
        ),
        (
            format!("{}[listen]\naddress = \"localhost\"\n", minimal("")),
            "listen.address",
        ),
        (
            format!("{}[admin]\naddress = \"0.0.0.0:8080\"\n", minimal("")),
            "admin.address",
        ),
        (format!("{}[nonsense]\n", minimal("")), "nonsense"),
        ("[room\n".to_owned(), "TOML"),
    ];
    for (text, key) in cases {
        let message = error_of(&text);
        assert!(message.contains(key), "{key}: {message}");
    }
}

#[test]
fn secrets_are_required_long_or_explicitly_insecure() {
    let none = Env(HashMap::new());
    // Both missing are both reported; the pass secret first.
    match Config::parse(&minimal(""), &none, false).map_err(|e| e.into_list().remove(0)) {
        Err(ConfigError::Invalid { key, reason }) => {
            assert_eq!(key, "pass.secret");
            assert!(reason.contains("WR_JWT_SECRET") && reason.contains("--dev"));
        }
        other => panic!("{other:?}"),
    }
    let short = Env(HashMap::from([
        ("WR_JWT_SECRET", "short"),
        ("WR_ADMIN_TOKEN", TOKEN),
    ]));
    assert!(error_of_with(&minimal(""), &short).contains("at least 32 bytes"));
    let (config, warnings) = Config::parse(&minimal(""), &none, true).unwrap();
    assert_eq!(config.pass.secret.len(), 64);
    assert!(warnings.iter().any(|w| w.contains("INSECURE")));
    // The generated admin token is shown (the console's sign-in takes it), the signing key not.
    let token_line = warnings.iter().find(|w| w.contains("admin.token")).unwrap();
    assert!(
        token_line.ends_with(&format!(": {}", config.admin_token)),
        "{token_line}"
    );
    let secret_line = warnings.iter().find(|w| w.contains("pass.secret")).unwrap();
    let secret = String::from_utf8_lossy(&config.pass.secret);
    assert!(!secret_line.contains(secret.as_ref()), "{secret_line}");
}

fn error_of_with(text: &str, env: &Env) -> String {
    match Config::parse(text, env, false) {
        Ok(_) => panic!("accepted"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn the_environment_overrides_the_file_and_printing_masks_secrets() {
    let text = format!(
        "{}[pass]\nsecret = \"file-secret-file-secret-file-secret-xx\"\n",
        minimal("")
    );
    let (config, _) = Config::parse(&text, &with_secrets(), false).unwrap();
    assert_eq!(config.pass.secret, SECRET.as_bytes());
    let printed = config.masked_toml();
    assert!(!printed.contains(SECRET) && !printed.contains(TOKEN));
    assert!(!printed.contains("file-secret"));
    assert!(printed.contains("secret = \"********\""));
    assert!(printed.contains("total_active_users = 2"));
}

#[test]
fn the_binary_checks_a_config_like_nginx_t() {
    let bin = env!("CARGO_BIN_EXE_waitroom-proxy");
    let drop = concat!(env!("CARGO_MANIFEST_DIR"), "/config/drop.toml");
    let ok = Command::new(bin)
        .args(["--config", drop, "--test"])
        .env("WR_JWT_SECRET", SECRET)
        .env("WR_ADMIN_TOKEN", TOKEN)
        .output()
        .unwrap();
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let stdout = String::from_utf8_lossy(&ok.stdout);
    assert!(stdout.contains("[room]") && !stdout.contains(SECRET));

    let missing = Command::new(bin)
        .args(["--config", drop, "--test"])
        .env_remove("WR_JWT_SECRET")
        .env_remove("WR_ADMIN_TOKEN")
        .output()
        .unwrap();
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("pass.secret"));

    let absent = Command::new(bin)
        .args(["--config", "/nonexistent.toml", "--test"])
        .output()
        .unwrap();
    assert_eq!(absent.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&absent.stderr).contains("cannot read"));

    let version = Command::new(bin).arg("--version").output().unwrap();
    assert!(String::from_utf8_lossy(&version.stdout).contains(env!("CARGO_PKG_VERSION")));
}

#[test]
fn tls_lifecycle_and_log_keys_are_checked_and_named() {
    let with = |section: &str| format!("{}{section}\n", minimal(""));
    let cases = [
        (
            with("[listen]\ncertificate = \"/etc/waitroom/cert.pem\""),
            "listen.key",
        ),
        (
            with("[listen]\nkey = \"/etc/waitroom/key.pem\""),
            "listen.certificate",
        ),
        (
            with("[listen]\ngrace_period = \"a while\""),
            "listen.grace_period",
        ),
        (
            with("[listen]\nupgrade_socket = \"\""),
            "listen.upgrade_socket",
        ),
        (with("[log]\nformat = \"xml\""), "log.format"),
        (with("[log]\nlevel = \"debug\""), "level"),
    ];
    for (text, key) in cases {
        let error = error_of(&text);
        assert!(error.contains(key), "{key}: {error}");
    }
    let origin_ca = minimal("").replace(
        "address = \"127.0.0.1:3000\"",
        "address = \"127.0.0.1:3000\"\nca_file = \"/etc/ca.pem\"",
    );
    assert!(error_of(&origin_ca).starts_with("origin.ca_file"));

    // Defaults: plain HTTP, a 10 s drain, no hand-over, text logs with the access log on, the
    // origin verified.
    let (config, warnings) = Config::parse(&minimal(""), &with_secrets(), false).unwrap();
    assert!(warnings.is_empty());
    assert!(config.tls.is_none());
    assert_eq!(config.grace_period.as_secs(), 10);
    assert!(config.upgrade_socket.is_none() && config.pid_file.is_none());
    assert!(config.log.access);
    assert_eq!(config.log.format, waitroom::config::model::LogFormat::Text);
    assert!(config.origin.verify);
    // "0s" is a valid grace period; turning verification off is loud.
    let unchecked = minimal("").replace(
        "address = \"127.0.0.1:3000\"",
        "address = \"127.0.0.1:3000\"\ntls = true\nverify = false",
    );
    let (_, warnings) = Config::parse(
        &format!("{unchecked}[listen]\ngrace_period = \"0s\"\n"),
        &with_secrets(),
        false,
    )
    .unwrap();
    assert!(warnings.iter().any(|w| w.contains("origin.verify")));
}

#[test]
fn turnstile_keys_are_checked_and_named() {
    let with = |lines: &str| {
        format!(
            "{}[turnstile]\nsite_key = \"1x00000000000000000000AA\"\nsecret = \"s3cret\"\n{lines}\n",
            minimal("")
        )
    };
    let cases = [
        (with("mode = \"managed\""), "turnstile.mode"),
        (with("action = \"block\""), "turnstile.action"),
        (
            with("on_unreachable = \"open\""),
            "turnstile.on_unreachable",
        ),
        (with("timeout = \"soon\""), "turnstile.timeout"),
        (
            with("siteverify_url = \"ftp://example.com/siteverify\""),
            "turnstile.siteverify_url",
        ),
        (
            with("siteverify_url = \"not a url\""),
            "turnstile.siteverify_url",
        ),
        (with("sitekey = \"x\""), "sitekey"),
        (
            with("").replace("1x00000000000000000000AA", r#"a\" onload=\"x"#),
            "turnstile.site_key",
        ),
        (
            format!("{}[turnstile]\nsecret = \"s3cret\"\n", minimal("")),
            "turnstile.site_key",
        ),
        (
            format!(
                "{}[turnstile]\nsite_key = \"1x00000000000000000000AA\"\n",
                minimal("")
            ),
            "turnstile.secret",
        ),
    ];
    for (text, key) in cases {
        let error = error_of(&text);
        assert!(error.contains(key), "{key}: {error}");
    }
    // "off" needs no keys, and no section is no challenge.
    let off = format!("{}[turnstile]\nmode = \"off\"\n", minimal(""));
    assert!(
        Config::parse(&off, &with_secrets(), false)
            .unwrap()
            .0
            .turnstile
            .is_none()
    );
    assert!(
        Config::parse(&minimal(""), &with_secrets(), false)
            .unwrap()
            .0
            .turnstile
            .is_none()
    );
    assert!(error_of(&format!("{off}action = \"block\"\n")).contains("turnstile.action"));
}

#[test]
fn turnstile_defaults_follow_cloudflare_and_the_secret_comes_from_the_environment() {
    use waitroom::config::model::{OnUnreachable, TurnstileAction, TurnstileMode};
    let text = format!(
        "{}[turnstile]\nsite_key = \"1x00000000000000000000AA\"\nsecret = \"from-the-file\"\n",
        minimal("")
    );
    let mut env = with_secrets();
    env.0
        .insert("WR_TURNSTILE_SECRET", "2x0000000000000000000000000000000AA");
    let (config, warnings) = Config::parse(&text, &env, false).unwrap();
    let t = config.turnstile.clone().unwrap();
    assert_eq!(t.mode, TurnstileMode::Invisible);
    assert_eq!(t.action, TurnstileAction::Log);
    assert_eq!(t.on_unreachable, OnUnreachable::Allow);
    assert_eq!(t.timeout.as_secs(), 3);
    assert_eq!(
        t.siteverify_url.as_str(),
        "https://challenges.cloudflare.com/turnstile/v0/siteverify"
    );
    assert_eq!(t.secret, "2x0000000000000000000000000000000AA");
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("test secrets") && w.contains("every challenge fails")),
        "{warnings:?}"
    );
    // The defaults fail open, and `--test` says so in plain words.
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("turnstile.action = \"log\"") && w.contains("still gets a place")),
        "{warnings:?}"
    );
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("turnstile.on_unreachable = \"allow\"")
                && w.contains("unverified")),
        "{warnings:?}"
    );
    let strict = text.replace(
        "secret = \"from-the-file\"",
        "secret = \"from-the-file\"\naction = \"infinite_queue\"\non_unreachable = \"proof_of_work\"",
    );
    let (strict, warnings) = Config::parse(&strict, &with_secrets(), false).unwrap();
    let strict = strict.turnstile.unwrap();
    assert_eq!(strict.on_unreachable, OnUnreachable::ProofOfWork);
    assert!(
        !warnings
            .iter()
            .any(|w| w.contains("still gets a place") || w.contains("unverified")),
        "{warnings:?}"
    );
    let printed = config.masked_toml();
    assert!(!printed.contains("2x000") && !printed.contains("from-the-file"));
    assert!(printed.contains("[turnstile]"));

    let plain = text.replace(
        "secret = \"from-the-file\"",
        "secret = \"from-the-file\"\nsiteverify_url = \"http://verify.example.com/\"",
    );
    let (_, warnings) = Config::parse(&plain, &with_secrets(), false).unwrap();
    assert!(
        warnings.iter().any(|w| w.contains("unencrypted")),
        "{warnings:?}"
    );
    let local = plain.replace("verify.example.com", "127.0.0.1:9");
    let (_, warnings) = Config::parse(&local, &with_secrets(), false).unwrap();
    assert!(
        !warnings.iter().any(|w| w.contains("unencrypted")),
        "{warnings:?}"
    );
}

#[test]
fn the_turnstile_example_in_drop_toml_is_valid_and_names_every_key() {
    let drop =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/config/drop.toml")).unwrap();
    let (_, example) = drop.split_once("# [turnstile]\n").unwrap();
    // The section ends where the next one begins.
    let example = example.split("\n[").next().unwrap();
    // The commented assignments of the section, uncommented.
    let lines: Vec<&str> = example
        .lines()
        .filter_map(|l| l.strip_prefix("# "))
        .filter(|l| {
            l.split_once(" = ")
                .is_some_and(|(key, _)| key.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'))
        })
        .collect();
    let text = format!("{}[turnstile]\n{}\n", minimal(""), lines.join("\n"));
    let (config, _) = Config::parse(&text, &with_secrets(), false).unwrap();
    assert!(config.turnstile.is_some());
    let documented = waitroom::config::file::TurnstileSection::default();
    let keys = serde_json::to_value(&documented).unwrap();
    for key in ["site_key", "secret"]
        .into_iter()
        .chain(keys.as_object().unwrap().keys().map(String::as_str))
    {
        assert!(
            lines.iter().any(|l| l.starts_with(&format!("{key} = "))),
            "config/drop.toml does not show turnstile.{key}"
        );
    }
}

#[test]
fn an_event_governs_the_room_from_its_prequeue_to_its_end() {
    let text = minimal(
        "queueing_method = \"lottery\"\n\
         [[room.events]]\nname = \"drop\"\nprequeue_start_time = \"2026-12-05T09:30:00+01:00\"\n\
         event_start_time = \"2026-12-05T10:00:00+01:00\"\nevent_end_time = \"2026-12-05T12:00:00+01:00\"\n\
         total_active_users = 300\nnew_users_per_minute = 100\nsession_duration = \"10m\"\n\
         queueing_method = \"passthrough\"\nshuffle_at_event_start = true\n\
         [[room.events]]\nname = \"off\"\nevent_start_time = \"2026-12-06T10:00:00Z\"\n\
         event_end_time = \"2026-12-06T11:00:00Z\"\nsuspended = true\ntotal_active_users = 9\n\
         new_users_per_minute = 9\n",
    );
    let (config, _) = Config::parse(&text, &with_secrets(), false).unwrap();
    let at = |t: &str| waitroom::clock::parse_rfc3339(t).unwrap();
    let (before, change) = config.rooms[0].settings.at(at("2026-12-05T08:00:00Z"));
    assert!(before.event.is_none());
    assert_eq!(before.total_active_users, 2);
    assert_eq!(
        change,
        at("2026-12-05T08:30:00Z"),
        "the pre-queue opens next"
    );

    let (prequeue, change) = config.rooms[0].settings.at(at("2026-12-05T08:45:00Z"));
    assert!(prequeue.prequeueing());
    let limits = prequeue.limits();
    assert!(!limits.admitting, "nobody is admitted in a pre-queue");
    assert_eq!(
        prequeue.queueing_method.as_str(),
        "fifo",
        "a pre-queue queues even when the event will pass everyone through"
    );
    assert_eq!(
        limits.placing,
        waitroom::core::room::Placing::DrawUntil {
            from_ms: at("2026-12-05T08:30:00Z"),
            until_ms: at("2026-12-05T09:00:00Z"),
        }
    );
    assert_eq!(change, at("2026-12-05T09:00:00Z"));

    let (running, _) = config.rooms[0].settings.at(at("2026-12-05T10:00:00Z"));
    assert!(!running.prequeueing() && running.event.is_some());
    assert_eq!(
        (
            running.total_active_users,
            running.new_users_per_minute,
            running.burst
        ),
        (300, 100, 100)
    );
    assert_eq!(running.session_duration.as_secs(), 600);
    assert_eq!(running.queueing_method.as_str(), "passthrough");

    // After the end the room's own lottery; a suspended event is ignored.
    for after in ["2026-12-05T11:00:00Z", "2026-12-06T10:30:00Z"] {
        let (settings, _) = config.rooms[0].settings.at(at(after));
        assert!(settings.event.is_none(), "{after}");
        assert_eq!(settings.total_active_users, 2);
        assert!(matches!(
            settings.limits().placing,
            waitroom::core::room::Placing::Lottery { window_ms: 30_000 }
        ));
    }
}

#[test]
fn event_errors_name_the_event_and_the_key() {
    let event = |body: &str| {
        error_of(&minimal(&format!(
            "[[room.events]]\nname = \"drop\"\n{body}\n"
        )))
    };
    let start_end =
        "event_start_time = \"2026-12-05T10:00:00Z\"\nevent_end_time = \"2026-12-05T12:00:00Z\"";
    for (body, needle) in [
        (
            "event_start_time = \"10:00\"\nevent_end_time = \"2026-12-05T12:00:00Z\"",
            "room.events[0].event_start_time",
        ),
        (
            &format!("{start_end}\nprequeue_start_time = \"2026-12-05T11:00:00Z\""),
            "must come after prequeue_start_time",
        ),
        (
            &format!("{start_end}\nshuffle_at_event_start = true"),
            "needs a prequeue_start_time",
        ),
        (
            &format!("{start_end}\nnew_users_per_minute = 5"),
            "together",
        ),
        (
            &format!("{start_end}\nqueueing_method = \"lifo\""),
            "room.events[0].queueing_method",
        ),
        (
            &format!("{start_end}\nsession_duration = \"soon\""),
            "room.events[0].session_duration",
        ),
        (
            &format!("{start_end}\ncolour = \"red\""),
            "room.events[0].colour: is not a known key",
        ),
    ] {
        let e = event(body);
        assert!(e.contains(needle), "{body}: {e}");
    }
    let bad_name = error_of(&minimal(&format!(
        "[[room.events]]\nname = \"a drop\"\n{start_end}\n"
    )));
    assert!(bad_name.contains("room.events[0].name"), "{bad_name}");
    let overlap = error_of(&minimal(&format!(
        "[[room.events]]\nname = \"a\"\n{start_end}\n[[room.events]]\nname = \"b\"\n\
         event_start_time = \"2026-12-05T11:00:00Z\"\nevent_end_time = \"2026-12-05T13:00:00Z\"\n"
    )));
    assert!(overlap.contains("room.events[1]: overlaps"), "{overlap}");
    let twice = error_of(&minimal(&format!(
        "[[room.events]]\nname = \"a\"\n{start_end}\n[[room.events]]\nname = \"a\"\n\
         event_start_time = \"2026-12-06T11:00:00Z\"\nevent_end_time = \"2026-12-06T13:00:00Z\"\n"
    )));
    assert!(twice.contains("two events are named"), "{twice}");
    let crawler = error_of(&minimal(
        "crawler_ranges = { yandexbot = [\"192.0.2.0/24\"] }",
    ));
    assert!(
        crawler.contains("room.crawler_ranges.yandexbot"),
        "{crawler}"
    );
}

#[test]
fn bypass_rules_need_a_secret_and_printing_masks_it() {
    for (rule, key, how) in [
        (
            "bypass_headers = [\"x-staff\"]",
            "room.bypass_headers",
            "\"x-staff: <secret>\"",
        ),
        (
            "bypass_cookies = [\"staff_cookie\"]",
            "room.bypass_cookies",
            "\"staff_cookie=<secret>\"",
        ),
        (
            "bypass_headers = [\"X-Staff: s3cret\"]",
            "room.bypass_headers",
            "at least 16 characters",
        ),
        (
            "bypass_cookies = [\"staff=s3cret\"]",
            "room.bypass_cookies",
            "at least 16 characters",
        ),
    ] {
        let e = error_of(&minimal(rule));
        assert!(
            e.starts_with(&format!("{key}: ")) && e.contains(how),
            "{rule}: {e}"
        );
    }
    let text = minimal(
        "bypass_headers = [\"X-Staff-Key: header-secret-0123\"]\n\
         bypass_cookies = [\"staff=cookie-secret-0123\"]",
    );
    let (config, _) = Config::parse(&text, &with_secrets(), false).unwrap();
    let room = &config.rooms[0].settings;
    assert_eq!(room.bypass_headers[0].name, "x-staff-key");
    assert_eq!(room.bypass_headers[0].value, "header-secret-0123");
    assert!(room.bypass_cookies[0].matches("cookie-secret-0123"));
    let printed = config.masked_toml();
    assert!(
        !printed.contains("header-secret") && !printed.contains("cookie-secret"),
        "{printed}"
    );
    assert!(
        printed.contains("\"X-Staff-Key: ********\"") && printed.contains("\"staff=********\"")
    );
}

#[test]
fn hosts_and_paths_are_canonical_or_refused_with_their_canonical_spelling() {
    let text = format!(
        "[listen]\nhosts = [\"WWW.Shop.Example.\", \"[2001:DB8::1]\", \"www.shop.example\"]\n{}",
        minimal("host = \"Shop.Example.\"\npath = \"/drop/\"")
    );
    let (config, warnings) = Config::parse(&text, &with_secrets(), false).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(
        config.rooms[0].routes[0].host.as_deref(),
        Some("shop.example")
    );
    assert_eq!(config.rooms[0].routes[0].path, "/drop/");
    assert_eq!(config.hosts, ["www.shop.example", "[2001:db8::1]"]);
    // Without a room host every host is served: the list is pointless, and said to be.
    let text = format!("[listen]\nhosts = [\"www.shop.example\"]\n{}", minimal(""));
    let (_, warnings) = Config::parse(&text, &with_secrets(), false).unwrap();
    assert!(
        warnings.iter().any(|w| w.contains("listen.hosts")),
        "{warnings:?}"
    );

    let listen = |hosts: &str| format!("[listen]\nhosts = [{hosts}]\n{}", minimal(""));
    for (text, key, needle) in [
        (
            listen("\"shop.example:8443\""),
            "listen.hosts",
            "holds a port",
        ),
        (
            listen("\"shop example\""),
            "listen.hosts",
            "not a host name",
        ),
        (
            minimal("host = \"shop.example:80\""),
            "room.host",
            "holds a port",
        ),
        (minimal("host = \"127.1\""), "room.host", "not a host name"),
        (
            minimal("path = \"/drop//shoes\""),
            "room.path",
            "\"/drop/shoes\"",
        ),
        (minimal("path = \"/%64rop\""), "room.path", "\"/drop\""),
        (minimal("path = \"/drop;v=1\""), "room.path", "';'"),
        (
            minimal("bypass = [\"/static/./*\"]"),
            "room.bypass",
            "\"/static/*\"",
        ),
        (
            minimal("bypass = [\"/static//*\"]"),
            "room.bypass",
            "\"/static/*\"",
        ),
        (minimal("bypass = [\"*;*.css\"]"), "room.bypass", "';'"),
        (
            minimal("bypass = [\"/a\\\\*\"]"),
            "room.bypass",
            "backslash",
        ),
        (
            minimal("bypass = [\"/%7Euser/*\"]"),
            "room.bypass",
            "\"/~user/*\"",
        ),
    ] {
        let e = error_of(&text);
        assert!(
            e.starts_with(&format!("{key}: ")) && e.contains(needle),
            "{key}: {e}"
        );
    }
}

#[test]
fn listen_connection_settings_and_ready_requires_store_are_read_and_checked() {
    use waitroom::config::model::Cap;
    let (config, _) = Config::parse(&minimal(""), &with_secrets(), false).unwrap();
    let c = config.connections;
    assert_eq!(c.keepalive_timeout.as_secs(), 60);
    assert_eq!(c.header_timeout.as_secs(), 15);
    assert_eq!(c.max_connections, Cap::FromFileLimit);
    assert_eq!(c.max_connections_per_ip, None, "off: carrier NATs");
    assert_eq!(c.max_event_streams, Cap::FromFileLimit);
    assert!(!config.admin_ready_requires_store);

    let text = format!(
        "[listen]\nkeepalive_timeout = \"75s\"\nheader_timeout = \"5s\"\nmax_connections = 20000\n\
         max_connections_per_ip = 200\nmax_event_streams = 9000\n[admin]\n\
         ready_requires_store = true\n{}",
        minimal("")
    );
    let (config, _) = Config::parse(&text, &with_secrets(), false).unwrap();
    let c = config.connections;
    assert_eq!(
        (c.keepalive_timeout.as_secs(), c.header_timeout.as_secs()),
        (75, 5)
    );
    assert_eq!(format!("{:?}", c.max_connections), "At(20000)");
    assert_eq!(c.max_connections_per_ip.map(u64::from), Some(200));
    assert_eq!(format!("{:?}", c.max_event_streams), "At(9000)");
    assert!(config.admin_ready_requires_store);

    let listen = |lines: &str| format!("[listen]\n{lines}\n{}", minimal(""));
    for (text, key) in [
        (
            listen("keepalive_timeout = \"0s\""),
            "listen.keepalive_timeout",
        ),
        (
            listen("keepalive_timeout = \"11m\""),
            "listen.keepalive_timeout",
        ),
        (listen("header_timeout = \"0s\""), "listen.header_timeout"),
        (listen("header_timeout = \"soon\""), "listen.header_timeout"),
        (
            listen("max_connections = 100\nmax_connections_per_ip = 101"),
            "listen.max_connections_per_ip",
        ),
        (listen("max_connections = -1"), "max_connections"),
        (
            format!("{}[admin]\nready_requires_store = \"yes\"\n", minimal("")),
            "ready_requires_store",
        ),
    ] {
        let e = error_of(&text);
        assert!(e.contains(key), "{key}: {e}");
    }
    // Ten minutes is the longest keep-alive allowed.
    assert!(
        Config::parse(
            &listen("keepalive_timeout = \"10m\""),
            &with_secrets(),
            false
        )
        .is_ok()
    );
}

#[test]
fn ipv6_clients_are_grouped_by_a_56_bit_prefix_unless_told_otherwise() {
    let parse = |lines: &str| {
        let text = format!("{}[rate_limit]\n{lines}\n", minimal(""));
        Config::parse(&text, &with_secrets(), false)
    };
    assert_eq!(parse("").unwrap().0.rate_limit.ipv6_prefix, 56);
    for bits in [32, 48, 64, 128] {
        let limits = parse(&format!("ipv6_prefix = {bits}"))
            .unwrap()
            .0
            .rate_limit;
        assert_eq!(u32::from(limits.ipv6_prefix), bits);
    }
    for bits in ["31", "129", "300", "4294967296"] {
        match parse(&format!("ipv6_prefix = {bits}")) {
            Err(e) => assert!(e.to_string().contains("ipv6_prefix"), "{bits}: {e}"),
            Ok(_) => panic!("{bits} accepted"),
        }
    }
}

#[test]
fn wr_redis_url_replaces_store_url_and_its_password_is_never_printed() {
    let redis = |url: &str| format!("{}[store]\nbackend = \"redis\"\n{url}\n", minimal(""));
    let url_of = |config: &Config| match &config.store.backend {
        waitroom::config::model::Backend::Redis { url } => url.clone(),
        other => panic!("{other:?}"),
    };
    let mut env = with_secrets();
    env.0.insert(
        "WR_REDIS_URL",
        "redis://proxy:env-password@redis.internal:6379/2",
    );
    let (config, _) = Config::parse(
        &redis("url = \"redis://:file-password@redis.internal:6379/0\""),
        &env,
        false,
    )
    .unwrap();
    assert_eq!(
        url_of(&config),
        "redis://proxy:env-password@redis.internal:6379/2",
        "the environment wins over the file"
    );
    let printed = config.masked_toml();
    assert!(
        !printed.contains("env-password") && !printed.contains("file-password"),
        "{printed}"
    );
    assert!(printed.contains("url = \"redis://proxy:****@redis.internal:6379/2\""));
    assert!(!format!("{config:?}").contains("env-password"));

    // An empty variable is unset; a user name with a password, or a password alone, both read.
    env.0.insert("WR_REDIS_URL", "");
    for url in [
        "redis://user:password@127.0.0.1:6379/0",
        "redis://:password@127.0.0.1:6379/0",
    ] {
        let (config, _) = Config::parse(&redis(&format!("url = \"{url}\"")), &env, false).unwrap();
        assert_eq!(url_of(&config), url);
        let printed = config.masked_toml();
        assert!(!printed.contains("password@"), "{printed}");
    }
    let e = error_of_with(&redis(""), &env);
    assert!(
        e.starts_with("store.url: ") && e.contains("WR_REDIS_URL"),
        "{e}"
    );
}

#[test]
fn the_binary_prints_the_store_url_masked() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("drop.toml");
    std::fs::write(
        &path,
        format!(
            "{}[store]\nbackend = \"redis\"\nurl = \"redis://127.0.0.1:6379/0\"\n",
            minimal("")
        ),
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_waitroom-proxy"))
        .args(["--config".as_ref(), path.as_os_str(), "--test".as_ref()])
        .env("WR_JWT_SECRET", SECRET)
        .env("WR_ADMIN_TOKEN", TOKEN)
        .env("WR_REDIS_URL", "rediss://:s3cr%40t-in-env@127.0.0.1:6380/0")
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stderr}");
    assert!(
        stdout.contains("url = \"rediss://:****@127.0.0.1:6380/0\""),
        "{stdout}"
    );
    assert!(!stdout.contains("s3cr") && !stderr.contains("s3cr"));
}

#[test]
fn wr_sentinel_password_replaces_the_file_and_is_never_printed() {
    let sentinels = |extra: &str| {
        format!(
            "{}[store]\nbackend = \"redis\"\nsentinels = [\"127.0.0.1:26379\"]\n\
             master_name = \"shop\"\n{extra}\n",
            minimal("")
        )
    };
    let mut env = with_secrets();
    env.0
        .insert("WR_SENTINEL_PASSWORD", "sentinel-env-password");
    let (config, _) = Config::parse(
        &sentinels("sentinel_username = \"watcher\"\nsentinel_password = \"sentinel-file-pw\""),
        &env,
        false,
    )
    .unwrap();
    let auth = &config.store.sentinel_auth;
    assert_eq!(auth.password.as_deref(), Some("sentinel-env-password"));
    assert_eq!(auth.username.as_deref(), Some("watcher"));
    let printed = format!("{} {config:?}", config.masked_toml());
    assert!(
        !printed.contains("sentinel-env-password") && !printed.contains("sentinel-file-pw"),
        "{printed}"
    );
    assert!(
        printed.contains("sentinel_password = \"********\""),
        "{printed}"
    );

    // Without Sentinels there is nobody to give it to: the key is named.
    let e = error_of_with(
        &format!(
            "{}[store]\nbackend = \"redis\"\nurl = \"redis://127.0.0.1:6379\"\n",
            minimal("")
        ),
        &env,
    );
    assert!(
        e.starts_with("store.sentinel_password: needs store.sentinels"),
        "{e}"
    );
    assert!(!e.contains("sentinel-env-password"), "{e}");

    // --test prints neither the variable's password nor the file's.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("drop.toml");
    std::fs::write(&path, sentinels("sentinel_password = \"sentinel-file-pw\"")).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_waitroom-proxy"))
        .args(["--config".as_ref(), path.as_os_str(), "--test".as_ref()])
        .env("WR_JWT_SECRET", SECRET)
        .env("WR_ADMIN_TOKEN", TOKEN)
        .env("WR_SENTINEL_PASSWORD", "sentinel-env-password")
        .output()
        .unwrap();
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        printed.contains("sentinel_password = \"********\""),
        "{printed}"
    );
    assert!(
        !printed.contains("sentinel-env-password") && !printed.contains("sentinel-file-pw"),
        "{printed}"
    );
}

#[test]
fn replica_acks_are_read_and_checked_and_named() {
    let store = |extra: &str| {
        format!(
            "{}[store]\nbackend = \"redis\"\nurl = \"redis://127.0.0.1:6379\"\n{extra}\n",
            minimal("")
        )
    };
    let (config, _) = Config::parse(&store(""), &with_secrets(), false).unwrap();
    assert_eq!(config.store.replica_acks, 0);
    let (config, _) = Config::parse(
        &store("replica_acks = 1\nreplica_ack_timeout = \"20ms\""),
        &with_secrets(),
        false,
    )
    .unwrap();
    assert_eq!(config.store.replica_acks, 1);
    assert_eq!(config.store.replica_ack_timeout.as_millis(), 20);
    for (extra, expected) in [
        (
            "replica_acks = -1",
            "store.replica_acks: must be a whole number of at least 0, got -1",
        ),
        (
            "replica_acks = 1\nreplica_ack_timeout = \"1s\"",
            "store.replica_ack_timeout: must be shorter than store.command_timeout (500ms)",
        ),
        (
            "replica_ack_timeout = \"0s\"",
            "store.replica_ack_timeout: must be longer than zero",
        ),
    ] {
        let e = error_of(&store(extra));
        assert!(e.starts_with(expected), "{extra}: {e}");
    }
}

#[test]
fn the_autopilot_is_off_by_default_and_its_keys_are_checked_and_named() {
    use waitroom::core::autopilot::Settings;
    let (config, _) = Config::parse(&minimal(""), &with_secrets(), false).unwrap();
    assert!(!config.rooms[0].autopilot.enabled);
    assert_eq!(config.rooms[0].autopilot.settings, Settings::default());

    let with = |lines: &str| format!("{}[autopilot]\n{lines}\n", minimal(""));
    let (config, _) = Config::parse(
        &with(
            "enabled = true\nlatency_target = \"400ms\"\nerror_rate_max = 0.05\nwindow = \"20s\"\n\
             min_active_users = 1\nmax_active_users = 50\nmin_interval = \"30s\"\n\
             hysteresis = 0.3\nmin_requests = 200\nexclude = [\"/export/*\", \"*.zip\"]",
        ),
        &with_secrets(),
        false,
    )
    .unwrap();
    let a = &config.rooms[0].autopilot;
    assert!(a.enabled);
    assert_eq!(a.settings.latency_target.as_millis(), 400);
    assert_eq!(a.settings.window.as_secs(), 20);
    assert_eq!(a.settings.min_interval.as_secs(), 30);
    assert_eq!(
        (a.settings.min_active_users, a.settings.max_active_users),
        (1, 50)
    );
    assert_eq!(a.settings.min_requests, 200);
    assert!(a.exclude[0].matches("/export/orders.csv") && a.exclude[1].matches("/a.zip"));
    // The room's 2 lies outside 10..=2000 (the defaults): the controller clamps, no error.
    assert!(Config::parse(&with("enabled = true"), &with_secrets(), false).is_ok());

    for (lines, key) in [
        ("latency_target = \"0s\"", "autopilot.latency_target"),
        ("error_rate_max = 0.0", "autopilot.error_rate_max"),
        ("window = \"1h\"", "autopilot.window"),
        ("min_active_users = 0", "autopilot.min_active_users"),
        (
            "min_active_users = 100\nmax_active_users = 99",
            "autopilot.max_active_users",
        ),
        ("min_interval = \"forever\"", "autopilot.min_interval"),
        ("hysteresis = -0.1", "autopilot.hysteresis"),
        ("min_requests = 5", "autopilot.min_requests"),
        ("exclude = [\"/a/../b\"]", "autopilot.exclude"),
        ("exclude = [\"a\"]", "autopilot.exclude"),
        ("enable = true", "enable"),
    ] {
        let e = error_of(&with(lines));
        assert!(e.contains(key), "{key}: {e}");
    }
}

/// Every key a section has (with its default) is shown in config/drop.toml, set or commented.
#[test]
fn drop_toml_documents_every_key_of_every_section() {
    use waitroom::config::file::{
        AdminSection, AutopilotSection, ListenSection, LogSection, PageSection, PassSection,
        RateLimitSection, StoreSection, TurnstileSection,
    };
    let drop =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/config/drop.toml")).unwrap();
    let section_text = |name: &str| -> String {
        let start = drop
            .find(&format!("[{name}]\n"))
            .unwrap_or_else(|| panic!("no [{name}] in drop.toml"));
        let rest = &drop[start + name.len() + 3..];
        let end = rest.find("\n[").unwrap_or(rest.len());
        rest[..end].to_owned()
    };
    let sections = [
        ("listen", serde_json::to_value(ListenSection::default())),
        ("pass", serde_json::to_value(PassSection::default())),
        ("store", serde_json::to_value(StoreSection::default())),
        ("admin", serde_json::to_value(AdminSection::default())),
        ("page", serde_json::to_value(PageSection::default())),
        ("log", serde_json::to_value(LogSection::default())),
        (
            "rate_limit",
            serde_json::to_value(RateLimitSection::default()),
        ),
        (
            "autopilot",
            serde_json::to_value(AutopilotSection::default()),
        ),
        (
            "turnstile",
            serde_json::to_value(TurnstileSection::default()),
        ),
    ];
    for (name, keys) in sections {
        let text = section_text(name);
        for key in keys.unwrap().as_object().unwrap().keys() {
            let shown = text.lines().any(|l| {
                let l = l.trim_start_matches("# ");
                l.starts_with(&format!("{key} = "))
            });
            assert!(shown, "config/drop.toml does not show {name}.{key}");
        }
    }
}

/// `[[rooms]]` tables on an origin; `rooms` is the text after `[origin]`.
fn with_rooms(rooms: &str) -> String {
    format!("[origin]\naddress = \"127.0.0.1:3000\"\n{rooms}")
}

const ROOM_A: &str = "[[rooms]]\nid = \"drop\"\npath = \"/drop\"\ntotal_active_users = 2\n\
                      new_users_per_minute = 2\n";
const ROOM_B: &str = "[[rooms]]\nid = \"tickets\"\nhost = \"Tickets.example.com\"\n\
                      total_active_users = 5\nnew_users_per_minute = 5\n";

#[test]
fn several_rooms_each_with_their_own_numbers_page_and_cookie() {
    let text = with_rooms(&format!(
        "{ROOM_A}[rooms.page]\ntitle = \"Sneakers\"\n\n{ROOM_B}\n[page]\ntitle = \"The shop\"\n"
    ));
    let (config, _) = Config::parse(&text, &with_secrets(), false).unwrap();
    let [drop, tickets] = config.rooms.as_slice() else {
        panic!("two rooms: {:?}", config.rooms.len());
    };
    assert_eq!(drop.id, "drop");
    assert_eq!(drop.routes[0].path, "/drop");
    assert_eq!(drop.routes[0].host, None);
    assert_eq!(drop.settings.total_active_users, 2);
    assert_eq!(drop.branding.title, "Sneakers", "its own [rooms.page]");
    assert_eq!(drop.cookie_name, "waitroom-drop");
    assert_eq!(
        tickets.routes[0].host.as_deref(),
        Some("tickets.example.com")
    );
    assert_eq!(tickets.routes[0].path, "/");
    assert_eq!(tickets.settings.total_active_users, 5);
    assert_eq!(tickets.branding.title, "The shop", "the top-level [page]");
    assert_eq!(tickets.cookie_name, "waitroom-tickets");
    // The one-room shorthand keeps the cookie name as it is.
    let (one, _) = Config::parse(&minimal(""), &with_secrets(), false).unwrap();
    assert_eq!(one.rooms[0].cookie_name, "waitroom");
}

#[test]
fn room_errors_name_the_room_and_the_key() {
    let both = format!("{}{ROOM_A}", minimal(""));
    assert!(
        error_of(&both).starts_with("rooms: a file holds [room]"),
        "{}",
        error_of(&both)
    );
    let none = "[origin]\naddress = \"127.0.0.1:3000\"\n";
    assert!(
        error_of(none).starts_with("room: is required"),
        "{}",
        error_of(none)
    );
    let twice = with_rooms(&format!("{ROOM_A}{ROOM_A}"));
    assert!(
        error_of(&twice).starts_with("rooms[1].id: \"drop\" is the id of rooms[0] too"),
        "{}",
        error_of(&twice)
    );
    let same_place = with_rooms(&format!(
        "{ROOM_A}{}",
        ROOM_A.replace("id = \"drop\"", "id = \"drop2\"")
    ));
    assert!(
        error_of(&same_place)
            .starts_with("rooms[1].path: /drop (any host) is claimed by rooms[0].path"),
        "{}",
        error_of(&same_place)
    );
    let bad_number = with_rooms(&format!(
        "{ROOM_A}{}",
        ROOM_B.replace("total_active_users = 5", "total_active_users = 0")
    ));
    assert!(
        error_of(&bad_number).starts_with("rooms[1].total_active_users: must be at least 1"),
        "{}",
        error_of(&bad_number)
    );
    let bad_page = with_rooms(&format!(
        "{ROOM_A}{ROOM_B}[rooms.page]\nprimary_color = \"blue\"\n"
    ));
    assert!(
        error_of(&bad_page).starts_with("rooms[1].page.primary_color"),
        "{}",
        error_of(&bad_page)
    );
    let unknown = with_rooms(&format!("{ROOM_A}colour = \"red\"\n"));
    assert!(
        error_of(&unknown).contains("colour"),
        "{}",
        error_of(&unknown)
    );
}

/// Runs the binary's `--test` on `text`; answers its exit code and its stderr lines.
fn test_run(text: &str) -> (Option<i32>, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("drop.toml");
    std::fs::write(&path, text).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_waitroom-proxy"))
        .arg("--config")
        .arg(&path)
        .arg("--test")
        .env("WR_JWT_SECRET", SECRET)
        .env("WR_ADMIN_TOKEN", TOKEN)
        .env_remove("WR_REDIS_URL")
        .output()
        .unwrap();
    let prefix = format!("waitroom-proxy: {}: ", path.display());
    let lines = String::from_utf8_lossy(&out.stderr)
        .lines()
        .map(|l| l.strip_prefix(&prefix).unwrap_or(l).to_owned())
        .collect();
    (out.status.code(), lines)
}

#[test]
fn several_errors_are_reported_in_one_run_each_named() {
    let text = format!(
        "[listen]\naddress = \"0.0.0.0:99999\"\n{}queue_all = \"yes\"\nsession_duration = \"soon\"\n\
         [store]\nbackend = \"redis\"\nurl = \"127.0.0.1:6379\"\n[admin]\naddress = \"localhost:9091\"\n",
        minimal("").replace("total_active_users = 2", "total_active_users = -5")
    );
    let (code, lines) = test_run(&text);
    assert_eq!(code, Some(2), "{lines:?}");
    for key in [
        "room.total_active_users: ",
        "room.queue_all: ",
        "listen.address: ",
        "store.url: ",
        "admin.address: ",
    ] {
        assert!(
            lines.iter().any(|l| l.starts_with(key)),
            "{key} not among {lines:?}"
        );
    }
    // The model's errors come with the type errors, each key once.
    let all = error_of(&text);
    assert!(
        all.contains("room.session_duration") || all.contains("room.queue_all"),
        "{all}"
    );
    assert_eq!(all.lines().count(), lines.len(), "{all}\n{lines:?}");
}

#[test]
fn every_key_of_a_room_at_fault_is_named_in_one_run() {
    let one = error_of(
        &minimal(
            "session_duration = \"soon\"\nqueueing_method = \"lifo\"\n\
             bypass_ips = [\"10.0.0.0/40\"]\n[[room.events]]\nname = \"a b\"\n\
             event_start_time = \"2026-12-05T10:00:00Z\"\nevent_end_time = \"2026-12-05T12:00:00Z\"",
        )
        .replace("total_active_users = 2", "total_active_users = 0"),
    );
    let keys: Vec<&str> = one
        .lines()
        .map(|l| l.split(": ").next().unwrap_or(l))
        .collect();
    assert_eq!(
        keys,
        [
            "room.total_active_users",
            "room.queueing_method",
            "room.events[0].name",
            "room.session_duration",
            "room.bypass_ips",
        ],
        "{one}"
    );
    let rooms = error_of(&with_rooms(
        "[[rooms]]\nid = \"a\"\npath = \"/a\"\ntotal_active_users = 0\nnew_users_per_minute = 2\n\
         [[rooms]]\nid = \"b\"\npath = \"/b\"\ntotal_active_users = 2\nnew_users_per_minute = 2\n\
         abandon_after = \"0s\"\n",
    ));
    assert!(rooms.contains("rooms[0].total_active_users: "), "{rooms}");
    assert!(rooms.contains("rooms[1].abandon_after: "), "{rooms}");
    // Several keys of one section too, in the file's order of sections.
    let sections = error_of(&format!(
        "[listen]\ngrace_period = \"soon\"\ntrusted_proxies = [\"lb\"]\n{}\
         [store]\nprefix = \"\"\non_error = \"maybe\"\n",
        minimal("").replace(
            "127.0.0.1:3000\"",
            "127.0.0.1:3000\"\nconnect_timeout = \"x\"\nread_timeout = \"y\""
        )
    ));
    let keys: Vec<&str> = sections
        .lines()
        .map(|l| l.split(": ").next().unwrap_or(l))
        .collect();
    assert_eq!(
        keys,
        [
            "listen.grace_period",
            "listen.trusted_proxies",
            "origin.connect_timeout",
            "origin.read_timeout",
            "store.prefix",
            "store.on_error",
        ],
        "{sections}"
    );
}

#[test]
fn a_negative_count_is_named_in_plain_words() {
    let text = minimal("").replace("total_active_users = 2", "total_active_users = -5");
    let expected = "room.total_active_users: must be a whole number of at least 1, got -5";
    assert_eq!(error_of(&text), expected);
    let (code, lines) = test_run(&text);
    assert_eq!(code, Some(2));
    assert_eq!(lines, [expected]);
    let flag = error_of(&minimal("queue_all = 1"));
    assert_eq!(flag, "room.queue_all: must be true or false, got 1");
    let rooms = error_of(&with_rooms(
        "[[rooms]]\nid = \"a\"\ntotal_active_users = 2\nnew_users_per_minute = -1\n",
    ));
    assert!(
        rooms.starts_with("rooms[0].new_users_per_minute: must be a whole number"),
        "{rooms}"
    );
}

#[test]
fn bad_redis_urls_and_ports_are_refused_at_test() {
    let redis = |url: &str| {
        format!(
            "{}[store]\nbackend = \"redis\"\nurl = \"{url}\"\n",
            minimal("")
        )
    };
    for (url, reason) in [
        (
            "127.0.0.1:6379",
            "has no scheme: write redis://127.0.0.1:6379",
        ),
        (
            "http://redis.internal:6379",
            "http:// is not a Redis scheme",
        ),
        (
            "redis://redis.internal:99999/0",
            "port 99999 is not between 1 and 65535",
        ),
        (
            "redis://:secret-pw@redis.internal:0/0",
            "port 0 is not between 1 and 65535",
        ),
        (
            "redis://redis.internal:63x9",
            "is not a number between 1 and 65535",
        ),
        (
            "redis://a:6379,b:6379",
            "a cluster's URL starts redis+cluster://",
        ),
        ("redis://", "names no host"),
    ] {
        let (code, lines) = test_run(&redis(url));
        assert_eq!(code, Some(2), "{url}: {lines:?}");
        let line = lines.join("\n");
        assert!(line.starts_with("store.url: "), "{url}: {line}");
        assert!(line.contains(reason), "{url}: {line}");
        assert!(!line.contains("secret-pw"), "{line}");
    }
    for url in [
        "redis://127.0.0.1:6379/0",
        "redis://redis.internal",
        "rediss://:pw@[::1]:6380/0",
        "redis+cluster://a:7000,b:7001",
        "rediss+cluster://user:pw@a:7000",
    ] {
        Config::parse(&redis(url), &with_secrets(), false).unwrap_or_else(|e| panic!("{url}: {e}"));
    }
    for (section, text, reason) in [
        (
            "listen",
            "[listen]\naddress = \"0.0.0.0:99999\"\n",
            "port 99999 is not between 1 and 65535",
        ),
        (
            "admin",
            "[admin]\naddress = \"127.0.0.1:0\"\n",
            "port 0 is not between 1 and 65535",
        ),
        (
            "admin",
            "[admin]\naddress = \"localhost:9091\"\n",
            "is not an IP address",
        ),
        ("listen", "[listen]\naddress = \"8080\"\n", "has no port"),
    ] {
        let e = error_of(&format!("{}{text}", minimal("")));
        assert!(e.starts_with(&format!("{section}.address: ")), "{e}");
        assert!(e.contains(reason), "{e}");
    }
    let origin = error_of(&minimal("").replace("127.0.0.1:3000", "shop.internal:70000"));
    assert_eq!(
        origin,
        "origin.address: port 70000 is not between 1 and 65535"
    );
}

/// Every language of Cloudflare's built-in page is one of the proxy's, in any case, and a
/// language outside the 38 is refused naming the key and the choices.
#[test]
fn default_template_language_takes_each_of_cloudflares_38() {
    use waitroom::language::PageLanguage;
    use waitroom::tools::export::CLOUDFLARE_LANGUAGES;
    for tag in CLOUDFLARE_LANGUAGES {
        for spelling in [tag.to_owned(), tag.to_ascii_lowercase()] {
            let text = format!(
                "{}[page]\ndefault_template_language = \"{spelling}\"\n",
                minimal("")
            );
            let (config, _) = Config::parse(&text, &with_secrets(), false).unwrap();
            let language = config.rooms[0].branding.language;
            assert!(matches!(language, PageLanguage::Fixed(l) if l.tag() == tag));
        }
    }
    let error = error_of(&format!(
        "{}[page]\ndefault_template_language = \"sw-KE\"\n",
        minimal("")
    ));
    assert!(error.contains("page.default_template_language"), "{error}");
    assert!(error.contains("\"sw-KE\""), "{error}");
    assert!(
        error.contains("he-IL") && error.contains("vi-VN"),
        "{error}"
    );
}
