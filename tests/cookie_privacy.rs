#![allow(clippy::unwrap_used)]
//! One person, one place, one pass: the proxy's cookies tell a visitor nothing it could re-roll,
//! the previous version's readable cookies are honoured and replaced, and a pass holder's page
//! never reaches a CDN's shared cache. The real proxy on loopback, spoken to over HTTP (and raw
//! sockets where the exact response head matters).

mod common;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use common::origin::{StubOrigin, read_request, serve_in_background};
use common::proxy::{SECRET, Sections, TestProxy, Visitor};
use common::siteverify::{PASS_SECRET, PASS_SITE_KEY};
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use waitroom::clock::Clock;
use waitroom::token::{Pass, Signer, Ticket, Token};

const ROOM: &str = "test-room";
/// One place inside, so the next newcomer is put in line.
const FULL_ROOM: &str = "total_active_users = 1\nnew_users_per_minute = 1000";

/// What the proxy would read from a cookie: the test's only way into a sealed one.
fn open(proxy: &TestProxy, cookie: &str) -> Token {
    Signer::new(ROOM, SECRET.as_bytes())
        .unwrap()
        .verify(cookie, proxy.clock.now_ms())
        .unwrap_or_else(|| panic!("the proxy's own cookie does not verify: {cookie}"))
}

/// The bytes inside a sealed cookie.
fn sealed_bytes(cookie: &str) -> Vec<u8> {
    let body = cookie
        .strip_prefix("v2.")
        .unwrap_or_else(|| panic!("not a sealed cookie: {cookie}"));
    URL_SAFE_NO_PAD.decode(body).unwrap()
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// Nothing a visitor could learn from its cookie: not its id (as text or as the bytes it
/// encodes), the room, the epoch, the kind of token, the place in any spelling.
fn assert_tells_nothing(cookie: &str, id: &str, epoch: &str, place: Option<i64>) {
    let bytes = sealed_bytes(cookie);
    let id_bytes = URL_SAFE_NO_PAD.decode(id).unwrap();
    let mut clear: Vec<Vec<u8>> = vec![
        id.as_bytes().to_vec(),
        id_bytes,
        ROOM.as_bytes().to_vec(),
        epoch.as_bytes().to_vec(),
        b"ticket".to_vec(),
        b"pass".to_vec(),
        b"\"sub\"".to_vec(),
    ];
    if let Some(place) = place {
        clear.push(place.to_string().into_bytes());
        clear.push(place.to_le_bytes()[..6].to_vec());
        clear.push(place.to_be_bytes()[2..].to_vec());
    }
    for needle in clear {
        assert!(
            !contains(&bytes, &needle),
            "{needle:?} readable in {cookie}"
        );
        assert!(
            !contains(cookie.as_bytes(), &needle),
            "{needle:?} in {cookie}"
        );
    }
}

/// What the previous version issued: an HS256 JWT whose claims anyone can read (zero fields
/// left out, as it did).
fn legacy_jwt(token: &Token) -> String {
    let mut claims = match token {
        Token::Ticket(t) => serde_json::json!({
            "typ": "ticket", "room": ROOM, "sub": t.id, "ep": t.epoch,
            "exp": t.expires_at / 1000, "xms": t.expires_at,
            "pl": t.place, "arr": t.arrived_at, "p0": t.initial_position,
            "sp": t.seen.position, "sa": t.seen.admitted_total, "st": t.seen.at,
        }),
        Token::Pass(p) => serde_json::json!({
            "typ": "pass", "room": ROOM, "sub": p.id, "ep": p.epoch,
            "exp": p.expires_at / 1000, "xms": p.expires_at,
            "adm": p.admitted_at, "ren": p.renewed_at,
        }),
    };
    if let Some(map) = claims.as_object_mut() {
        map.retain(|_, v| v.as_i64() != Some(0));
    }
    jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        &claims,
        &jsonwebtoken::EncodingKey::from_secret(SECRET.as_bytes()).unwrap(),
    )
    .unwrap()
}

fn room_cookie_set(answer: &common::proxy::Answer) -> Option<String> {
    answer.set_cookies().iter().find_map(|c| {
        c.strip_prefix("waitroom=")
            .map(|rest| rest.split(';').next().unwrap_or("").to_owned())
    })
}

fn ticket(token: Token) -> Ticket {
    match token {
        Token::Ticket(t) => t,
        Token::Pass(p) => panic!("a pass where a ticket was expected: {p:?}"),
    }
}

fn pass(token: Token) -> Pass {
    match token {
        Token::Pass(p) => p,
        Token::Ticket(t) => panic!("a ticket where a pass was expected: {t:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_proxys_cookies_tell_nothing_and_still_work() {
    let proxy = TestProxy::start(FULL_ROOM);
    let mut inside = proxy.visitor();
    let first = inside.get("/").await;
    assert!(first.reached_origin());
    let raw_pass = room_cookie_set(&first).expect("a pass");
    let p = pass(open(&proxy, &raw_pass));
    assert_tells_nothing(&raw_pass, &p.id, &p.epoch, None);
    assert!(raw_pass.len() < 160, "{} bytes", raw_pass.len());

    let mut waiter = proxy.visitor();
    let page = waiter.get_json("/drop").await.json();
    assert_eq!(page["waitroom"]["position"], 1);
    let raw_ticket = waiter.cookie.clone().expect("a ticket");
    let t = ticket(open(&proxy, &raw_ticket));
    assert_tells_nothing(&raw_ticket, &t.id, &t.epoch, Some(t.place));
    assert!(raw_ticket.len() < 180, "{} bytes", raw_ticket.len());

    // The sealed ticket keeps the place: the JSON status and the page read it.
    let status = waiter.get_json("/__waitroom/status").await;
    assert_eq!(status.header("cache-control"), Some("no-store"));
    assert_eq!(status.json()["waitroom"]["position"], 1);
    assert_eq!(status.json()["waitroom"]["queued"], 1);
    // And the sealed pass lets its holder in without a new cookie.
    let again = inside.get("/cart").await;
    assert!(again.reached_origin());
    assert_eq!(room_cookie_set(&again), None);
    let seen = proxy.origin.requests();
    assert_eq!(seen.last().unwrap().1.as_deref(), Some(raw_pass.as_str()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cookies_of_the_previous_version_are_honoured_then_replaced() {
    let proxy = TestProxy::start(FULL_ROOM);
    let mut inside = proxy.visitor();
    assert!(inside.get("/").await.reached_origin());
    let p = pass(open(&proxy, inside.cookie.as_deref().unwrap()));
    let mut waiter = proxy.visitor();
    assert_eq!(
        waiter.get_json("/drop").await.json()["waitroom"]["position"],
        1
    );
    let t = ticket(open(&proxy, waiter.cookie.as_deref().unwrap()));

    // A pass holder from before the upgrade: in, with its pass sealed on the origin's answer.
    let legacy_pass = legacy_jwt(&Token::Pass(p.clone()));
    assert!(legacy_pass.starts_with("eyJ"));
    let mut old_holder = Visitor::new(&proxy.base);
    old_holder.cookie = Some(legacy_pass.clone());
    let answer = old_holder.get("/cart").await;
    assert_eq!(answer.body, "origin:/cart");
    let renewed = room_cookie_set(&answer).expect("the pass sealed");
    assert!(
        answer
            .header("cache-control")
            .is_some_and(|c| c.contains("private"))
    );
    assert_eq!(
        proxy.origin.requests().last().unwrap().1.as_deref(),
        Some(legacy_pass.as_str()),
        "the origin saw the old cookie"
    );
    let resealed = pass(open(&proxy, &renewed));
    assert_eq!(resealed.id, p.id, "the same admission");
    assert_eq!(resealed.expires_at, p.expires_at);
    assert_tells_nothing(&renewed, &p.id, &p.epoch, None);
    // From then on the sealed pass is used, not re-issued.
    let next = old_holder.get("/checkout").await;
    assert!(next.reached_origin());
    assert_eq!(room_cookie_set(&next), None);
    assert_eq!(
        proxy.origin.requests().last().unwrap().1.as_deref(),
        Some(renewed.as_str())
    );
    assert_eq!(proxy.state().await["occupancy"], 1, "no second admission");

    // A waiting visitor from before the upgrade keeps its place and gets its ticket sealed.
    let legacy_ticket = legacy_jwt(&Token::Ticket(t.clone()));
    let mut old_waiter = Visitor::new(&proxy.base);
    old_waiter.cookie = Some(legacy_ticket);
    let status = old_waiter.get_json("/drop").await;
    assert_eq!(status.json()["waitroom"]["position"], 1);
    assert_eq!(status.json()["waitroom"]["queued"], 1, "no second place");
    let sealed = room_cookie_set(&status).expect("the ticket sealed");
    let resealed = ticket(open(&proxy, &sealed));
    assert_eq!((&resealed.id, resealed.place), (&t.id, t.place));
    assert_eq!(resealed.arrived_at, t.arrived_at);
    assert_tells_nothing(&sealed, &t.id, &t.epoch, Some(t.place));
    // The sealed ticket holds the place until the turn comes.
    inside.leave().await;
    old_holder.leave().await;
    let mut admitted = false;
    for _ in 0..100 {
        proxy.tick().await;
        let answer = old_waiter.get("/drop").await;
        if answer.reached_origin() {
            admitted = true;
            assert!(pass(open(&proxy, old_waiter.cookie.as_deref().unwrap())).id == t.id);
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(admitted, "the upgraded ticket was never called");
}

/// An origin that lets every cache keep every answer for ten minutes, CDNs first (`/plain`
/// says nothing about caching), and never sets a cookie of its own.
fn caching_origin() -> (SocketAddr, Arc<Mutex<Vec<String>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let recorded = seen.clone();
    let addr = serve_in_background(move |stream| {
        let seen = recorded.clone();
        async move {
            let (read, mut write) = stream.into_split();
            let mut reader = BufReader::new(read);
            while let Ok(Some(request)) = read_request(&mut reader).await {
                let path = request.target().to_owned();
                seen.lock().unwrap().push(path.clone());
                let text = format!("origin:{path}");
                let caching = if path.starts_with("/plain") {
                    ""
                } else {
                    "Cache-Control: public, max-age=600\r\nCDN-Cache-Control: max-age=600\r\n\
                     Cloudflare-CDN-Cache-Control: max-age=600\r\nSurrogate-Control: max-age=600\r\n"
                };
                let response = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\
                     {caching}\r\n{text}",
                    text.len()
                );
                if write.write_all(response.as_bytes()).await.is_err() {
                    return;
                }
            }
        }
    });
    (addr, seen)
}

/// The response head the visitor really receives, header names in lower case, read off the
/// socket.
async fn head_received(
    proxy: &TestProxy,
    path: &str,
    cookie: Option<&str>,
) -> Vec<(String, String)> {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", proxy.port))
        .await
        .unwrap();
    let cookie = cookie.map_or(String::new(), |c| format!("Cookie: waitroom={c}\r\n"));
    let request =
        format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{cookie}Connection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut bytes = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut bytes))
        .await
        .unwrap()
        .unwrap();
    let text = String::from_utf8_lossy(&bytes);
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert_eq!(body, format!("origin:{path}"), "the origin's answer");
    head.lines()
        .skip(1)
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect()
}

fn all<'a>(head: &'a [(String, String)], name: &str) -> Vec<&'a str> {
    head.iter()
        .filter(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
        .collect()
}

const CDN_HEADERS: [&str; 3] = [
    "cdn-cache-control",
    "cloudflare-cdn-cache-control",
    "surrogate-control",
];

fn assert_private(head: &[(String, String)], expected: &str) {
    assert_eq!(all(head, "cache-control"), vec![expected], "{head:?}");
    for name in CDN_HEADERS {
        assert!(all(head, name).is_empty(), "{name} left in {head:?}");
    }
}

fn assert_as_sent(head: &[(String, String)]) {
    assert_eq!(
        all(head, "cache-control"),
        vec!["public, max-age=600"],
        "{head:?}"
    );
    for name in CDN_HEADERS {
        assert_eq!(all(head, name), vec!["max-age=600"], "{name} in {head:?}");
    }
}

fn caching_proxy(origin_section: &str) -> (TestProxy, Arc<Mutex<Vec<String>>>) {
    let (addr, seen) = caching_origin();
    let room = format!("{FULL_ROOM}\nbypass = [\"/static/*\"]");
    let proxy = TestProxy::start_sections(
        addr,
        StubOrigin::start(),
        Sections {
            room: &room,
            origin: origin_section,
            ..Sections::default()
        },
    );
    (proxy, seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pass_holders_page_never_reaches_a_shared_cache() {
    let (proxy, seen) = caching_proxy("");
    // Admitted: the pass cookie is set on this answer.
    let mut holder = proxy.visitor();
    let admitted = holder.get("/product").await;
    assert!(admitted.reached_origin());
    assert!(holder.cookie.is_some());
    assert_eq!(
        admitted.header("cache-control"),
        Some("max-age=600, private")
    );
    for name in CDN_HEADERS {
        assert_eq!(admitted.header(name), None, "{name}");
    }
    let cookie = holder.cookie.clone();
    // Passed: no cookie set, private all the same.
    let passed = head_received(&proxy, "/product", cookie.as_deref()).await;
    assert!(all(&passed, "set-cookie").is_empty(), "{passed:?}");
    assert_private(&passed, "max-age=600, private");
    let plain = head_received(&proxy, "/plain", cookie.as_deref()).await;
    assert_private(&plain, "private");
    // A bypassed path is the origin's business, pass or none.
    assert_as_sent(&head_received(&proxy, "/static/app.js", cookie.as_deref()).await);
    assert_as_sent(&head_received(&proxy, "/static/app.js", None).await);
    assert_eq!(
        seen.lock().unwrap().as_slice(),
        [
            "/product",
            "/product",
            "/plain",
            "/static/app.js",
            "/static/app.js"
        ],
        "nothing else reached the origin"
    );

    // The proxy's own answers to the visitors in line are never stored anywhere.
    let mut waiter = proxy.visitor();
    let page = waiter.get("/product").await;
    assert!(!page.reached_origin());
    assert!(page.body.contains("Test drop"));
    assert_eq!(page.header("cache-control"), Some("no-store"));
    let json = waiter.get_json("/product").await;
    assert_eq!(json.json()["waitroom"]["position"], 1);
    assert_eq!(json.header("cache-control"), Some("no-store"));
    let status = waiter.get_json("/__waitroom/status").await;
    assert_eq!(status.header("cache-control"), Some("no-store"));
    for answer in [&page, &json, &status] {
        for name in CDN_HEADERS {
            assert_eq!(answer.header(name), None);
        }
    }
    assert_eq!(
        seen.lock().unwrap().len(),
        5,
        "the waiter never reached the origin"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_origin_that_varies_correctly_may_keep_its_caching() {
    let (proxy, _) = caching_proxy("protected_responses = \"as_sent\"");
    let mut holder = proxy.visitor();
    let admitted = holder.get("/product").await;
    assert!(admitted.reached_origin());
    // An answer that sets the pass stays private whatever the setting.
    assert_eq!(
        admitted.header("cache-control"),
        Some("max-age=600, private")
    );
    assert_eq!(admitted.header("cdn-cache-control"), None);
    let passed = head_received(&proxy, "/product", holder.cookie.as_deref()).await;
    assert_as_sent(&passed);
    let plain = head_received(&proxy, "/plain", holder.cookie.as_deref()).await;
    assert!(all(&plain, "cache-control").is_empty(), "{plain:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_challenge_and_the_429_are_not_stored_either() {
    let turnstile = format!(
        "[turnstile]\nmode = \"visible_managed\"\nsite_key = \"{PASS_SITE_KEY}\"\nsecret = \"{PASS_SECRET}\"\n"
    );
    let proxy = TestProxy::start_with(FULL_ROOM, &turnstile);
    assert!(proxy.visitor().get("/").await.reached_origin());
    let challenge = proxy.visitor().get("/drop").await;
    assert!(!challenge.reached_origin());
    assert!(challenge.body.contains(PASS_SITE_KEY), "{}", challenge.body);
    assert_eq!(challenge.header("cache-control"), Some("no-store"));

    let proxy = TestProxy::start_with(
        FULL_ROOM,
        "[rate_limit]\ntickets_per_ip_per_minute = 1\nburst = 1\nmax_live_tickets_per_ip = 0",
    );
    assert!(proxy.visitor().get("/").await.reached_origin());
    let mut refused = None;
    for _ in 0..5 {
        let answer = proxy.visitor().get_json("/drop").await;
        if answer.status == 429 {
            refused = Some(answer);
            break;
        }
    }
    let refused = refused.expect("the per-address limit refused a ticket");
    assert_eq!(refused.header("cache-control"), Some("no-store"));
}

#[test]
fn protected_responses_is_checked_and_named() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("room.toml");
    let origin: SocketAddr = "127.0.0.1:9".parse().unwrap();
    let text = common::proxy::config_with(
        1,
        2,
        origin,
        Sections {
            origin: "protected_responses = \"public\"",
            room: FULL_ROOM,
            ..Sections::default()
        },
    );
    std::fs::write(&file, text).unwrap();
    let Err(error) = waitroom::config::Config::load(&file, &common::proxy::NoEnvironment, false)
    else {
        panic!("origin.protected_responses = \"public\" accepted");
    };
    let error = error.to_string();
    assert!(error.starts_with("origin.protected_responses"), "{error}");
    assert!(error.contains("private, as_sent"), "{error}");
}
