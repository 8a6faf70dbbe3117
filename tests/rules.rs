#![allow(clippy::unwrap_used)]
//! A room's rules (`[[room.rules]]`) on the real proxy in front of a recording origin: a bypass
//! on `?preview=<secret>` past a full room (decoded, every copy), a blocked range answered 403
//! with the branded page in the visitor's language and counted per rule (its reserved requests
//! too), each condition (method, header, cookie, query, path, country from a trusted proxy only)
//! and a protect rule that holds against the room's bypass list and path tricks; `--test`
//! explains the rules and refuses those that can never hold.

mod common;

use common::origin::StubOrigin;
use common::process::config_test;
use common::proxy::{Sections, TestProxy};

const SECRET: &str = "preview-7f3a9c2e51d4";

/// A room of one, already full (its one place taken by the first visitor), with `rules`.
async fn full_room(rules: &str, listen: &str, room_extra: &str) -> TestProxy {
    let room = format!(
        "path = \"/drop\"\ntotal_active_users = 1\nnew_users_per_minute = 100000\n\
         session_duration = \"1h\"\n{room_extra}\n{rules}"
    );
    let origin = StubOrigin::start();
    let proxy = TestProxy::start_sections(
        origin.addr,
        origin,
        Sections {
            room: Box::leak(room.into_boxed_str()),
            listen,
            // The pages speak the visitor's language.
            rest: "[page]\ndefault_template_language = \"auto\"\n",
            ..Sections::default()
        },
    );
    let mut first = proxy.visitor();
    assert!(first.get("/drop/first").await.reached_origin());
    proxy
}

struct Got {
    status: u16,
    body: String,
    content_type: String,
}

impl Got {
    fn reached_origin(&self) -> bool {
        self.body.starts_with("origin:")
    }
}

/// One request with its own headers (each pair sent as given, repeats kept), no cookie jar.
async fn ask(proxy: &TestProxy, method: &str, path: &str, headers: &[(&str, &str)]) -> Got {
    let client = reqwest::Client::new();
    let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
    let mut request = client.request(method, format!("{}{path}", proxy.base));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    Got {
        status,
        body: response.text().await.unwrap(),
        content_type,
    }
}

/// The targets the origin received besides the first visitor's.
fn origin_targets(proxy: &TestProxy) -> Vec<String> {
    proxy
        .origin
        .received()
        .iter()
        .map(|r| r.target().to_owned())
        .filter(|t| t != "/drop/first")
        .collect()
}

fn rule_count(metrics: &str, rule: &str, action: &str) -> u64 {
    metrics
        .lines()
        .find(|l| {
            l.starts_with("waitroom_rule_matches_total{")
                && l.contains(&format!("rule=\"{rule}\""))
                && l.contains(&format!("action=\"{action}\""))
        })
        .and_then(|l| l.rsplit(' ').next())
        .map_or_else(
            || panic!("no series for {rule} {action}:\n{metrics}"),
            |v| v.parse().unwrap(),
        )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_preview_secret_in_the_query_skips_the_full_room_uncounted() {
    let rules = format!(
        "[[room.rules]]\nname = \"preview\"\naction = \"bypass\"\nquery = {{ preview = \"{SECRET}\" }}"
    );
    let proxy = full_room(&rules, "", "").await;
    let through = ask(&proxy, "GET", &format!("/drop/new?preview={SECRET}"), &[]).await;
    assert!(through.reached_origin(), "{}", through.body);
    // The name and value percent-encoded: what an origin decodes is what the rule reads.
    let encoded = "/drop/new?%70review=preview%2D7f3a9c2e51d4";
    assert!(ask(&proxy, "GET", encoded, &[]).await.reached_origin());
    // A second value beside the secret (an origin reading the last one gets it), a wrong one,
    // the name in another case, none: all wait like anyone.
    for target in [
        format!("/drop/new?preview={SECRET}&preview=x"),
        format!("/drop/new?preview=x&preview={SECRET}"),
        "/drop/new?preview=preview-7f3a9c2e51d5".to_owned(),
        format!("/drop/new?Preview={SECRET}"),
        "/drop/new".to_owned(),
    ] {
        let answer = ask(&proxy, "GET", &target, &[]).await;
        assert!(!answer.reached_origin(), "{target} went through");
        assert_eq!(answer.status, 200, "{target}: the waiting page");
    }
    assert_eq!(
        origin_targets(&proxy),
        [format!("/drop/new?preview={SECRET}"), encoded.to_owned()]
    );
    let state = proxy.state().await;
    assert_eq!(state["occupancy"], 1, "bypasses take no place: {state}");
    assert_eq!(rule_count(&proxy.metrics().await, "preview", "bypass"), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocked_range_gets_the_branded_page_in_its_language_and_reaches_nothing() {
    let rules = "[[room.rules]]\nname = \"bad-range\"\naction = \"block\"\n\
                 networks = [\"203.0.113.0/24\"]";
    let proxy = full_room(rules, "trusted_proxies = [\"127.0.0.1\"]", "").await;
    let from = |ip: &'static str| {
        [
            ("x-forwarded-for", ip),
            ("accept-language", "de-DE,de;q=0.9"),
        ]
    };
    let blocked = ask(&proxy, "GET", "/drop/new", &from("203.0.113.77")).await;
    assert_eq!(blocked.status, 403);
    assert!(
        blocked.content_type.starts_with("text/html"),
        "{}",
        blocked.content_type
    );
    assert!(blocked.body.contains("lang=\"de-DE\""), "{}", blocked.body);
    assert!(
        blocked
            .body
            .contains("Der Zugriff auf diese Seite ist gesperrt"),
        "{}",
        blocked.body
    );
    let json = ask(
        &proxy,
        "GET",
        "/drop/new",
        &[
            ("x-forwarded-for", "203.0.113.77"),
            ("accept", "application/json"),
        ],
    )
    .await;
    assert_eq!(
        (json.status, json.body.as_str()),
        (403, r#"{"error":"blocked"}"#)
    );
    // Its reserved requests too: the range cannot join the line through the status.
    let status = ask(&proxy, "GET", "/__waitroom/status", &from("203.0.113.5")).await;
    assert_eq!(status.status, 403, "{}", status.body);
    assert!(status.body.contains("blocked"), "{}", status.body);
    let events = ask(&proxy, "GET", "/__waitroom/events", &from("203.0.113.5")).await;
    assert_eq!(events.status, 403, "{}", events.body);
    // Another network waits as usual.
    let elsewhere = ask(&proxy, "GET", "/drop/new", &from("198.51.100.4")).await;
    assert_eq!(elsewhere.status, 200);
    assert!(!elsewhere.reached_origin());
    assert!(
        origin_targets(&proxy).is_empty(),
        "{:?}",
        origin_targets(&proxy)
    );
    assert_eq!(rule_count(&proxy.metrics().await, "bad-range", "block"), 4);
    assert!(
        proxy
            .metrics()
            .await
            .contains("waitroom_requests_total{outcome=\"blocked\",room=\"test-room\"} 4"),
        "{}",
        proxy.metrics().await
    );
    // The room switched off lets everyone through but the blocked range: a rule is about who
    // asks, not about the line.
    let off = common::proxy::admin_patch(&proxy.admin, "/admin/config", r#"{"suspended": true}"#);
    assert_eq!(off.await.status(), 200);
    let still = ask(&proxy, "GET", "/drop/off", &from("203.0.113.77")).await;
    assert_eq!(still.status, 403);
    let open = ask(&proxy, "GET", "/drop/open", &from("198.51.100.4")).await;
    assert!(open.reached_origin(), "{}", open.body);
    assert_eq!(origin_targets(&proxy), ["/drop/open"]);
}

/// A method, a target and headers.
type Asked<'a> = (&'a str, &'a str, &'a [(&'a str, &'a str)]);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_condition_blocks_what_it_names_and_nothing_else() {
    let rules = "[[room.rules]]\nname = \"no-posts\"\naction = \"block\"\nmethods = [\"POST\"]\n\
                 paths = [\"/drop/api/*\"]\n\
                 [[room.rules]]\nname = \"bots\"\naction = \"block\"\n\
                 headers = { \"User-Agent\" = \"*BadBot*\" }\n\
                 [[room.rules]]\nname = \"banned\"\naction = \"block\"\n\
                 cookies = { tier = \"banned\" }\n\
                 [[room.rules]]\nname = \"debug\"\naction = \"block\"\nquery = { debug = \"1\" }";
    let proxy = full_room(rules, "", "").await;
    let blocked: [Asked; 7] = [
        ("POST", "/drop/api/cart", &[]),
        ("POST", "/drop//api/./cart", &[]),
        ("GET", "/drop", &[("user-agent", "Mozilla/5.0 BadBot/1.0")]),
        (
            "GET",
            "/drop",
            &[("user-agent", "Firefox"), ("user-agent", "BadBot")],
        ),
        ("GET", "/drop", &[("cookie", "a=1; tier=banned")]),
        ("GET", "/drop?debug=0&debug=1", &[]),
        ("GET", "/drop?%64ebug=%31", &[]),
    ];
    for (method, path, headers) in blocked {
        let answer = ask(&proxy, method, path, headers).await;
        assert_eq!(
            answer.status, 403,
            "{method} {path} {headers:?}: {}",
            answer.body
        );
    }
    let waiting: [Asked; 5] = [
        ("GET", "/drop/api/cart", &[]),
        ("POST", "/drop/cart", &[]),
        ("GET", "/drop", &[("user-agent", "Firefox")]),
        ("GET", "/drop", &[("cookie", "tier=gold")]),
        ("GET", "/drop?debug=0", &[]),
    ];
    for (method, path, headers) in waiting {
        let answer = ask(&proxy, method, path, headers).await;
        assert_eq!(
            answer.status, 200,
            "{method} {path} {headers:?}: {}",
            answer.body
        );
        assert!(!answer.reached_origin());
    }
    assert!(
        origin_targets(&proxy).is_empty(),
        "{:?}",
        origin_targets(&proxy)
    );
    let metrics = proxy.metrics().await;
    for (rule, count) in [("no-posts", 2), ("bots", 2), ("banned", 1), ("debug", 2)] {
        assert_eq!(rule_count(&metrics, rule, "block"), count, "{rule}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_country_is_believed_only_from_a_trusted_proxy_and_a_single_line() {
    let rules = "[[room.rules]]\nname = \"embargo\"\naction = \"block\"\ncountries = [\"xx\"]";
    let trusted = full_room(
        rules,
        "trusted_proxies = [\"127.0.0.1\"]\ncountry_header = \"CF-IPCountry\"",
        "",
    )
    .await;
    let answer = ask(&trusted, "GET", "/drop", &[("cf-ipcountry", "XX")]).await;
    assert_eq!(answer.status, 403);
    let two_lines = [("cf-ipcountry", "XX"), ("cf-ipcountry", "XX")];
    assert_eq!(ask(&trusted, "GET", "/drop", &two_lines).await.status, 200);
    assert_eq!(
        ask(&trusted, "GET", "/drop", &[("cf-ipcountry", "DE")])
            .await
            .status,
        200
    );
    // The same header from a peer that is no trusted proxy is anyone's to write.
    let untrusted = full_room(
        rules,
        "trusted_proxies = [\"10.0.0.0/8\"]\ncountry_header = \"CF-IPCountry\"",
        "",
    )
    .await;
    let answer = ask(&untrusted, "GET", "/drop", &[("cf-ipcountry", "XX")]).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_protect_rule_holds_against_the_bypass_list_and_path_tricks() {
    let rules = "[[room.rules]]\nname = \"checkout-api\"\naction = \"protect\"\n\
                 paths = [\"/drop/static/checkout/*\"]";
    let proxy = full_room(rules, "", "bypass = [\"/drop/static/*\"]").await;
    assert!(
        ask(&proxy, "GET", "/drop/static/app.js", &[])
            .await
            .reached_origin()
    );
    for path in [
        "/drop/static/checkout/pay",
        "/drop/static//checkout/pay",
        "/drop/static/x/../checkout/pay",
        "/drop/static/%63heckout/pay",
        "/drop/static/checkout;a=b/pay",
    ] {
        let answer = ask(&proxy, "GET", path, &[]).await;
        assert!(!answer.reached_origin(), "{path} skipped the room");
        assert_eq!(answer.status, 200, "{path}");
    }
    assert_eq!(origin_targets(&proxy), ["/drop/static/app.js"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_header_secret_bypass_needs_every_copy() {
    let rules = format!(
        "[[room.rules]]\naction = \"bypass\"\nheaders = {{ \"X-Preview\" = \"{SECRET}\" }}"
    );
    let proxy = full_room(&rules, "", "").await;
    assert!(
        ask(&proxy, "GET", "/drop/a", &[("x-preview", SECRET)])
            .await
            .reached_origin()
    );
    let two = [("x-preview", SECRET), ("x-preview", "other")];
    assert!(!ask(&proxy, "GET", "/drop/b", &two).await.reached_origin());
    assert_eq!(origin_targets(&proxy), ["/drop/a"]);
    assert_eq!(rule_count(&proxy.metrics().await, "rules[0]", "bypass"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rules_change_live_and_the_admin_api_never_shows_a_secret() {
    let proxy = full_room("", "", "").await;
    let target = format!("/drop/new?preview={SECRET}");
    assert!(!ask(&proxy, "GET", &target, &[]).await.reached_origin());
    let patch = r#"{"rules": [{"name": "preview", "action": "bypass",
                    "query": {"preview": "preview-7f3a9c2e51d4"}}]}"#;
    let changed = common::proxy::admin_patch(&proxy.admin, "/admin/config", patch).await;
    assert_eq!(changed.status(), 200, "{}", changed.text().await.unwrap());
    assert!(ask(&proxy, "GET", &target, &[]).await.reached_origin());
    let shown = common::proxy::admin_get(&proxy.admin, "/admin/config").await;
    assert!(!shown.to_string().contains(SECRET), "{shown}");
    assert!(shown.to_string().contains("preview"), "{shown}");
    // A rule that could never hold is refused live too, naming its key.
    let refused = common::proxy::admin_patch(
        &proxy.admin,
        "/admin/config",
        r#"{"rules": [{"action": "block", "methods": []}]}"#,
    )
    .await;
    assert_eq!(refused.status(), 400);
    assert!(
        refused
            .text()
            .await
            .unwrap()
            .contains("room.rules[0].methods")
    );
    // Checked against the room's routes and the country header as the file is.
    for (patch, said) in [
        (
            r#"{"rules": [{"action": "protect", "paths": ["/cart/*"]}]}"#,
            "room.rules[0].paths: \\\"/cart/*\\\" lie outside every route of the room",
        ),
        (
            r#"{"rules": [{"action": "block", "countries": ["XX"]}]}"#,
            "room.rules[0].countries: no country is ever known",
        ),
    ] {
        let refused = common::proxy::admin_patch(&proxy.admin, "/admin/config", patch).await;
        assert_eq!(refused.status(), 400, "{patch}");
        let body = refused.text().await.unwrap();
        assert!(body.contains(said), "{patch}: {body}");
    }
    let kept = ask(&proxy, "GET", &target, &[]).await;
    assert!(
        kept.reached_origin(),
        "a refused change leaves the last one in force"
    );
}

/// `--test` on `room_extra` and `listen`: its exit code and stderr.
fn check(room_extra: &str, listen: &str) -> (Option<i32>, String) {
    config_test(&format!(
        "[listen]\n{listen}\n[origin]\naddress = \"127.0.0.1:3000\"\n[room]\nid = \"drop\"\n\
         path = \"/drop\"\ntotal_active_users = 5\nnew_users_per_minute = 5\n{room_extra}\n"
    ))
}

#[test]
fn test_explains_each_rule_in_words_and_refuses_those_that_can_never_hold() {
    let good = format!(
        "[[room.rules]]\nname = \"bad-range\"\naction = \"block\"\nnetworks = [\"203.0.113.0/24\"]\n\
         [[room.rules]]\nname = \"preview\"\naction = \"bypass\"\nquery = {{ preview = \"{SECRET}\" }}"
    );
    let (code, stderr) = check(&good, "");
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains(
            "room \"drop\" rule \"bad-range\": a request where the client is in 203.0.113.0/24 is \
             refused with 403 and the blocked page; nothing reaches the origin"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains(
            "room \"drop\" rule \"preview\": a request where every query parameter \"preview\" \
             is the secret ******** goes straight to the origin, not counted"
        ),
        "{stderr}"
    );
    assert!(!stderr.contains(SECRET), "the secret printed: {stderr}");
    // A bypass pattern that matches anywhere in a path is said, as the room's bypass list's is.
    let (code, stderr) = check(
        &format!(
            "[[room.rules]]\naction = \"bypass\"\npaths = [\"*.css\"]\n\
             headers = {{ x-preview = \"{SECRET}\" }}"
        ),
        "",
    );
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains("room.rules[0].paths \"*.css\" matches anywhere in a path"),
        "{stderr}"
    );
    for (rule, listen, said) in [
        (
            "action = \"block\"\nmethods = []",
            "",
            "room.rules[0].methods: is empty",
        ),
        (
            "action = \"protect\"\npaths = [\"/cart/*\"]",
            "",
            "room.rules[0].paths: \"/cart/*\" lie outside every route of the room (/drop (any host))",
        ),
        (
            "action = \"block\"\ncountries = [\"XX\"]",
            "trusted_proxies = [\"10.0.0.0/8\"]",
            "room.rules[0].countries: no country is ever known: set listen.country_header",
        ),
        (
            "action = \"bypass\"\ncookies = { staff = \"short\" }",
            "",
            "room.rules[0].cookies.staff: a bypass rule's value is a secret",
        ),
        ("action = \"bypass\"", "", "room.rules[0]: has no condition"),
        (
            // A narrower rule after a wider one: the wider decides every request first.
            "name = \"block-range\"\naction = \"block\"\nnetworks = [\"203.0.113.0/24\"]\n\
             [[room.rules]]\nname = \"office-preview\"\naction = \"bypass\"\n\
             networks = [\"203.0.113.7\"]\npaths = [\"/drop/*\"]",
            "",
            "room.rules[1]: can never hold: block-range (room.rules[0]) holds for every request \
             this one would",
        ),
    ] {
        let (code, stderr) = check(&format!("[[room.rules]]\n{rule}"), listen);
        assert_eq!(code, Some(2), "{rule}: {stderr}");
        assert!(stderr.contains(said), "{rule}: {stderr}");
    }
}
