#![allow(clippy::unwrap_used)]
//! Crafted requests over raw sockets, as a bot paid to skip the line would send them, against
//! the real proxy in front of a recording origin: with the room full, no spelling of a protected
//! request reaches the origin, and what a pass holder's request becomes at the origin is exactly
//! what the gate decided on.

mod common;

use std::time::Duration;

use common::origin::StubOrigin;
use common::proxy::{Sections, TestProxy};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const HOST: &str = "shop.example.com";

/// What came back for one request written byte for byte.
struct Raw {
    status: u16,
    /// The whole answer, as sent.
    text: String,
}

impl Raw {
    /// The values of a header of the answer (names compared without case).
    fn headers<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.text
            .lines()
            .skip(1)
            .take_while(|l| !l.is_empty())
            .filter_map(move |l| {
                let (n, v) = l.split_once(':')?;
                n.eq_ignore_ascii_case(name).then_some(v.trim())
            })
    }

    fn header<'a>(&'a self, name: &'a str) -> Option<&'a str> {
        self.headers(name).next()
    }

    /// The waiting-room cookie the answer sets, if it sets one that is not a deletion.
    fn cookie(&self) -> Option<String> {
        self.headers("set-cookie").find_map(|v| {
            let value = v.strip_prefix("waitroom=")?;
            Some(value.split(';').next()?.to_owned()).filter(|v| !v.is_empty())
        })
    }

    fn is_waiting_page(&self) -> bool {
        self.status == 200 && self.text.contains("Test drop")
    }

    fn answered_by_origin(&self, target: &str) -> bool {
        self.text.ends_with(&format!("origin:{target}"))
    }
}

/// Writes `head` (lines joined with CRLF, a blank line added) in one write and reads until the
/// proxy closes the connection (every request here asks it to).
async fn raw(port: u16, lines: &[&str]) -> Raw {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let head = format!("{}\r\n\r\n", lines.join("\r\n"));
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut answer))
        .await
        .expect("the proxy answers and closes")
        .ok();
    let text = String::from_utf8_lossy(&answer).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    Raw { status, text }
}

/// GET `target` as a browser on `HOST` would, with the waiting-room cookie if any.
async fn get(port: u16, target: &str, cookie: Option<&str>) -> Raw {
    let request_line = format!("GET {target} HTTP/1.1");
    let cookie_line = cookie.map(|c| format!("Cookie: waitroom={c}"));
    let mut lines = vec![
        request_line.as_str(),
        "Host: shop.example.com",
        "Connection: close",
    ];
    if let Some(line) = &cookie_line {
        lines.push(line);
    }
    raw(port, &lines).await
}

/// A full room (capacity 1 unless `extra_room` says otherwise, taken by a first visitor whose
/// pass is returned) on `HOST`, covering every path unless `extra_room` names one, with the
/// bypass list of config/drop.toml.
async fn full_room(extra_room: &str, listen: &str, origin: &str) -> (TestProxy, String) {
    let origin_server = StubOrigin::start();
    let capacity = if extra_room.contains("total_active_users") {
        ""
    } else {
        "total_active_users = 1\n"
    };
    let room = format!(
        "host = \"{HOST}\"\n{capacity}new_users_per_minute = 100000\n\
         session_duration = \"1h\"\nenabled_origin_commands = [\"revoke\"]\n\
         bypass = [\"/favicon.ico\", \"/static/*\", \"*.css\", \"*.js\"]\n{extra_room}"
    );
    let proxy = TestProxy::start_sections(
        origin_server.addr,
        origin_server,
        Sections {
            room: &room,
            listen,
            origin,
            ..Sections::default()
        },
    );
    let path = if extra_room.contains("path = \"/drop\"") {
        "/drop"
    } else {
        "/"
    };
    let inside = get(proxy.port, path, None).await;
    assert_eq!(inside.status, 200);
    let pass = inside.cookie().expect("the first visitor gets a pass");
    (proxy, pass)
}

fn origin_targets(proxy: &TestProxy) -> Vec<String> {
    proxy
        .origin
        .received()
        .iter()
        .map(|r| r.target().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_spelling_of_a_protected_path_reaches_the_origin() {
    let (proxy, _pass) = full_room("", "", "").await;
    let before = origin_targets(&proxy);
    // (target, status): 200 is the waiting page (the room is full), 400 a refusal.
    let table: &[(&str, u16)] = &[
        ("/checkout", 200),
        ("/static/../checkout", 200),
        ("/static/%2e%2e/checkout", 200),
        ("/static/%2E%2e/checkout", 200),
        ("/static/.%2e/checkout", 200),
        ("/static/..;/checkout", 400),
        ("/static/..;x=1/checkout", 400),
        ("/static/.;/../checkout", 400),
        ("/checkout;x.css", 200),
        ("/checkout;x.js?a=1", 200),
        ("/checkout%3Bx.css", 200),
        ("/static/..%2fcheckout", 400),
        ("/static/..%2Fcheckout", 400),
        ("/static/..%5ccheckout", 400),
        ("/static\\..\\checkout", 400),
        ("//checkout", 200),
        ("/./checkout", 200),
        ("/%63heckout", 200),
        ("/static/%00/../checkout", 400),
        ("/static/%0a/../checkout", 400),
        ("/static/../../checkout", 400),
        ("/x//../static/../checkout", 400),
        ("/static/x/%2e%2e/%2e%2e/checkout", 200),
        ("http://shop.example.com/checkout", 200),
        ("http://shop.example.com/static/%2e%2e/checkout", 200),
        ("*", 400),
        ("checkout", 400),
    ];
    for (target, status) in table {
        let answer = get(proxy.port, target, None).await;
        assert_eq!(answer.status, *status, "{target}: {}", answer.text);
        if answer.status == 200 {
            assert!(answer.is_waiting_page(), "{target}: the waiting page");
        }
    }
    assert_eq!(
        origin_targets(&proxy),
        before,
        "none of these reached the origin"
    );
    // Real static files are served exactly as before.
    for target in [
        "/static/app.js",
        "/static/site.css",
        "/favicon.ico",
        "/a/b.css",
    ] {
        let answer = get(proxy.port, target, None).await;
        assert_eq!(answer.status, 200, "{target}");
        assert!(answer.answered_by_origin(target), "{target}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_room_prefix_matches_the_canonical_path() {
    let (proxy, _pass) = full_room("path = \"/drop\"", "", "").await;
    let before = origin_targets(&proxy);
    for target in [
        "/./drop",
        "/x/../drop",
        "/%64rop",
        "//drop",
        "/drop;jsessionid=1",
        "/%64rop/shoes",
    ] {
        let answer = get(proxy.port, target, None).await;
        assert!(answer.is_waiting_page(), "{target}: {}", answer.text);
    }
    assert_eq!(origin_targets(&proxy), before);
    let outside = get(proxy.port, "/shop/./shoes", None).await;
    assert!(
        outside.answered_by_origin("/shop/shoes"),
        "{}",
        outside.text
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_rooms_host_is_forwarded() {
    let (proxy, pass) = full_room("", "", "host_header = \"internal.shop\"").await;
    let before = origin_targets(&proxy);
    let line = "GET /checkout HTTP/1.1";
    let close = "Connection: close";
    let cases: &[(&[&str], u16)] = &[
        (&[line, "Host: other.example.com", close], 421),
        (&[line, "Host: SHOP.example.com.", close], 200),
        (&[line, "Host: shop.example.com:8080", close], 200),
        (&[line, "Host: shop.example.com:abc", close], 400),
        (&[line, "Host: shop.example.com:99999", close], 400),
        (&[line, "Host: ", close], 400),
        (&[line, close], 400),
        (&["GET /checkout HTTP/1.0"], 400),
        (
            &[
                line,
                "Host: shop.example.com",
                "Host: other.example.com",
                close,
            ],
            400,
        ),
        (
            &["GET http://shop.example.com/checkout HTTP/1.1", close],
            400,
        ),
        (
            &[
                "GET http://other.example.com/checkout HTTP/1.1",
                "Host: shop.example.com",
                close,
            ],
            400,
        ),
        (
            &[
                "GET http://other.example.com/checkout HTTP/1.1",
                "Host: other.example.com",
                close,
            ],
            421,
        ),
        (&[line, "Host: shop.example.com@other", close], 400),
    ];
    for (lines, status) in cases {
        let answer = raw(proxy.port, lines).await;
        assert_eq!(answer.status, *status, "{lines:?}: {}", answer.text);
    }
    assert_eq!(
        origin_targets(&proxy),
        before,
        "no other host reached the origin"
    );
    // With the pass, the origin gets the canonical target, and the configured Host only after
    // the decision was made on the visitor's.
    let lines = [
        "GET http://SHOP.example.com./static/%2e%2e/check%6Fut?a=%2e HTTP/1.1",
        "Host: shop.example.com",
        "Connection: close",
    ];
    let cookie = format!("Cookie: waitroom={pass}");
    let mut with_pass = lines.to_vec();
    with_pass.push(&cookie);
    let answer = raw(proxy.port, &with_pass).await;
    // Pingora refuses an absolute-form authority that differs byte for byte from Host.
    assert_eq!(answer.status, 400);
    let answer = get(proxy.port, "/static/%2e%2e/check%6Fut?a=%2e", Some(&pass)).await;
    assert_eq!(answer.status, 200, "{}", answer.text);
    let received = proxy.origin.received();
    let last = received.last().unwrap();
    assert_eq!(last.target(), "/checkout?a=%2e");
    assert_eq!(last.header("host"), Some("internal.shop"));
    let answer = get(proxy.port, "http://shop.example.com/%63art", Some(&pass)).await;
    assert_eq!(answer.status, 200, "{}", answer.text);
    assert_eq!(proxy.origin.received().last().unwrap().target(), "/cart");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_origin_gets_the_canonical_host_when_none_is_configured() {
    let (proxy, pass) = full_room("", "", "").await;
    let lines = [
        "GET /cart HTTP/1.1",
        "Host: SHOP.Example.COM.",
        "Connection: close",
    ];
    let cookie = format!("Cookie: waitroom={pass}");
    let mut with_pass = lines.to_vec();
    with_pass.push(&cookie);
    assert_eq!(raw(proxy.port, &with_pass).await.status, 200);
    let received = proxy.origin.received();
    assert_eq!(received.last().unwrap().header("host"), Some(HOST));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_forwarded_for_line_counts_and_the_origin_gets_the_peer_appended() {
    let (proxy, _pass) = full_room(
        "bypass_ips = [\"10.9.9.9\"]",
        "trusted_proxies = [\"127.0.0.0/8\"]",
        "",
    )
    .await;
    let before = origin_targets(&proxy);
    // The client wrote the first line; the load balancer in front appended its own.
    let forged = raw(
        proxy.port,
        &[
            "GET /checkout HTTP/1.1",
            "Host: shop.example.com",
            "X-Forwarded-For: 10.9.9.9",
            "X-Forwarded-For: 198.51.100.7",
            "Connection: close",
        ],
    )
    .await;
    assert!(forged.is_waiting_page(), "queued, not bypassed");
    assert_eq!(origin_targets(&proxy), before);
    // The balancer itself says the office address: bypassed, and the origin sees the chain.
    let office = raw(
        proxy.port,
        &[
            "GET /checkout HTTP/1.1",
            "Host: shop.example.com",
            "X-Forwarded-For: 10.9.9.9",
            "X-Forwarded-Proto: https",
            "Connection: close",
        ],
    )
    .await;
    assert!(office.answered_by_origin("/checkout"), "{}", office.text);
    let received = proxy.origin.received();
    let last = received.last().unwrap();
    assert_eq!(last.header("x-forwarded-for"), Some("10.9.9.9, 127.0.0.1"));
    assert_eq!(last.header("x-forwarded-proto"), Some("https"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_cannot_pick_its_forwarded_proto_or_address_without_a_trusted_proxy() {
    let (proxy, pass) = full_room("bypass_ips = [\"10.9.9.9\"]", "", "").await;
    let cookie = format!("Cookie: waitroom={pass}");
    let answer = raw(
        proxy.port,
        &[
            "GET /cart HTTP/1.1",
            "Host: shop.example.com",
            "X-Forwarded-For: 10.9.9.9",
            "X-Forwarded-Proto: https",
            &cookie,
            "Connection: close",
        ],
    )
    .await;
    assert_eq!(answer.status, 200);
    let received = proxy.origin.received();
    let last = received.last().unwrap();
    assert_eq!(last.header("x-forwarded-for"), Some("10.9.9.9, 127.0.0.1"));
    assert_eq!(last.header("x-forwarded-proto"), Some("http"));
    let forged = get(proxy.port, "/checkout", None).await;
    let forged_ip = raw(
        proxy.port,
        &[
            "GET /checkout HTTP/1.1",
            "Host: shop.example.com",
            "X-Forwarded-For: 10.9.9.9",
            "Connection: close",
        ],
    )
    .await;
    assert!(forged.is_waiting_page() && forged_ip.is_waiting_page());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_origins_revoke_ends_a_pass_on_a_bypassed_path_too() {
    let (proxy, pass) = full_room("", "", "").await;
    // `*.js` is bypassed; the origin's answer to it still ends the session.
    let answer = get(proxy.port, "/revoke.js", Some(&pass)).await;
    assert_eq!(answer.status, 200);
    assert!(
        answer
            .headers("set-cookie")
            .any(|c| c.starts_with("waitroom=;")),
        "{}",
        answer.text
    );
    assert_eq!(answer.header("cf-waiting-room-command"), None);
    let metrics = proxy.metrics().await;
    assert!(
        metrics.contains("waitroom_revoked_total{room=\"test-room\"} 1"),
        "{metrics}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_that_sets_a_pass_is_never_stored_by_a_shared_cache() {
    let (proxy, _pass) = full_room("total_active_users = 2", "", "").await;
    let admitted = get(proxy.port, "/cached", None).await;
    assert!(admitted.cookie().is_some(), "{}", admitted.text);
    assert_eq!(
        admitted.header("cache-control"),
        Some("max-age=60, private"),
        "{}",
        admitted.text
    );
    let waiting = get(proxy.port, "/cached", None).await;
    assert_eq!(waiting.header("cache-control"), Some("no-store"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_sites_the_proxy_fronts_are_listed_and_forwarded_as_they_are() {
    let (proxy, _pass) = full_room("", "hosts = [\"Static.Example.com.\"]", "").await;
    let listed = raw(
        proxy.port,
        &[
            "GET /a.png HTTP/1.1",
            "Host: static.example.com",
            "Connection: close",
        ],
    )
    .await;
    assert!(listed.answered_by_origin("/a.png"), "{}", listed.text);
    let other = raw(
        proxy.port,
        &[
            "GET /a.png HTTP/1.1",
            "Host: www.example.com",
            "Connection: close",
        ],
    )
    .await;
    assert_eq!(other.status, 421);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_requests_are_answered_in_order_each_through_the_gate() {
    let (proxy, pass) = full_room("", "", "").await;
    let before = origin_targets(&proxy);
    // Three requests in one write: a pass holder's, a newcomer's for a protected page (the
    // room is full: it waits), the pass holder's again, which asks for the close.
    let requests = format!(
        "GET /cart HTTP/1.1\r\nHost: {HOST}\r\nCookie: waitroom={pass}\r\n\r\n\
         GET /checkout HTTP/1.1\r\nHost: {HOST}\r\n\r\n\
         GET /pay HTTP/1.1\r\nHost: {HOST}\r\nCookie: waitroom={pass}\r\nConnection: close\r\n\r\n"
    );
    let mut stream = TcpStream::connect(("127.0.0.1", proxy.port)).await.unwrap();
    stream.write_all(requests.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut answer))
        .await
        .expect("all three are answered, then the connection closes")
        .unwrap();
    let text = String::from_utf8_lossy(&answer);
    let statuses: Vec<&str> = text
        .match_indices("HTTP/1.1 ")
        .map(|(i, _)| &text[i + 9..i + 12])
        .collect();
    assert_eq!(statuses, ["200", "200", "200"], "{text}");
    let cart = text.find("origin:/cart").expect("the first answer");
    let waiting = text.find("Test drop").expect("the waiting page second");
    let pay = text.find("origin:/pay").expect("the third answer");
    assert!(cart < waiting && waiting < pay, "in order: {text}");
    let mut expected = before;
    expected.extend(["/cart".to_owned(), "/pay".to_owned()]);
    assert_eq!(
        origin_targets(&proxy),
        expected,
        "the waiting visitor's request never reached the origin"
    );
}
