#![allow(clippy::unwrap_used)]
//! Members-only lines (`[entry]`, issue 25 item 2) over real HTTP, against the proxy in front of
//! a recording stub origin: no place without the shop's entry token; forged, expired and
//! other-room tokens refused with a reason; the token never reaches the origin; one customer key
//! holds one place however many clients bring it, on one proxy and on two sharing a real Redis;
//! `sign-entry` signs what the proxy accepts.

mod common;

use common::proxy::{Sections, TestProxy};
use common::redis_server::RedisServer;

const ENTRY_SECRET: &str = "entry-secret-entry-secret-entry-secret!";
const LOGIN: &str = "https://shop.example/login";
const ROOM: &str = "total_active_users = 10\nnew_users_per_minute = 1000";
const FULL_ROOM: &str = "total_active_users = 1\nnew_users_per_minute = 1000";

fn entry_section(login: bool) -> String {
    let login = if login {
        format!("login_url = \"{LOGIN}\"\n")
    } else {
        String::new()
    };
    format!("[entry]\nrequire_token = true\nsecret = \"{ENTRY_SECRET}\"\n{login}")
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn token(key: &str, exp: u64, room: Option<&str>) -> String {
    waitroom::entry::sign(ENTRY_SECRET, key, exp, room, None).unwrap()
}

/// A client that keeps the waiting-room cookie and does not follow redirects: the test reads
/// each 303 itself.
struct Client {
    http: reqwest::Client,
    base: String,
    cookie: Option<String>,
}

struct Seen {
    status: u16,
    location: Option<String>,
    body: String,
}

impl Client {
    fn new(proxy: &TestProxy) -> Self {
        Self {
            http: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap(),
            base: proxy.base.clone(),
            cookie: None,
        }
    }

    async fn get(&mut self, target: &str, json: bool) -> Seen {
        let mut req = self.http.get(format!("{}{target}", self.base));
        if json {
            req = req.header("accept", "application/json");
        }
        if let Some(cookie) = &self.cookie {
            req = req.header("cookie", format!("waitroom={cookie}"));
        }
        let resp = req.send().await.unwrap();
        let status = resp.status().as_u16();
        let location = resp
            .headers()
            .get("location")
            .map(|v| v.to_str().unwrap().to_owned());
        for set in resp.headers().get_all("set-cookie") {
            let set = set.to_str().unwrap();
            if let Some(rest) = set.strip_prefix("waitroom=") {
                self.cookie = Some(rest.split(';').next().unwrap().to_owned());
            }
        }
        Seen {
            status,
            location,
            body: resp.text().await.unwrap(),
        }
    }

    /// Brings `token` to `target` and follows the redirect back, as a browser does.
    async fn enter(&mut self, target: &str, token: &str) -> (Seen, Seen) {
        let sep = if target.contains('?') { '&' } else { '?' };
        let first = self
            .get(&format!("{target}{sep}wr_entry={token}"), false)
            .await;
        let back = first.location.clone().unwrap_or_default();
        let second = self.get(&back, false).await;
        (first, second)
    }
}

fn entries(metrics: &str, result: &str) -> f64 {
    let series = format!("waitroom_entries_total{{result=\"{result}\",room=\"test-room\"}} ");
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(&series))
        .map_or(0.0, |v| v.parse().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newcomer_without_a_token_is_sent_to_sign_in() {
    let proxy = TestProxy::start_with(ROOM, &entry_section(true));
    let mut c = Client::new(&proxy);
    let page = c.get("/drop", false).await;
    assert_eq!(page.status, 303);
    assert_eq!(page.location.as_deref(), Some(LOGIN));
    let json = c.get("/drop", true).await;
    assert_eq!(json.status, 403);
    let body: serde_json::Value = serde_json::from_str(&json.body).unwrap();
    assert_eq!(body["error"], "entry_required");
    assert_eq!(body["login_url"], LOGIN);
    assert!(c.cookie.is_none());
    assert!(proxy.origin.requests().is_empty());
    assert_eq!(proxy.state().await["occupancy"], 0);

    // Without a login_url, a page says what the line is.
    let proxy = TestProxy::start_with(ROOM, &entry_section(false));
    let page = Client::new(&proxy).get("/drop", false).await;
    assert_eq!(page.status, 403);
    assert!(page.body.contains("signed-in customers"), "{}", page.body);
    assert_eq!(entries(&proxy.metrics().await, "required"), 1.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_expired_and_other_room_tokens_are_refused_with_a_reason() {
    let proxy = TestProxy::start_with(ROOM, &entry_section(true));
    let forged = waitroom::entry::sign(
        "another-secret-another-secret-another!",
        "alice",
        now() + 600,
        None,
        None,
    )
    .unwrap();
    for (token, reason) in [
        (forged, "forged"),
        ("not-a-token".to_owned(), "forged"),
        (token("alice", now() - 600, None), "expired"),
        (
            token("alice", now() + 600, Some("other-room")),
            "other_room",
        ),
    ] {
        let mut c = Client::new(&proxy);
        let refused = c.get(&format!("/drop?wr_entry={token}"), true).await;
        assert_eq!(refused.status, 403, "{reason}");
        let body: serde_json::Value = serde_json::from_str(&refused.body).unwrap();
        assert_eq!(body["error"], "entry_refused");
        assert_eq!(body["reason"], reason);
        assert!(c.cookie.is_none());
        // A page is sent to sign in again.
        let page = c.get(&format!("/drop?wr_entry={token}"), false).await;
        assert_eq!(page.location.as_deref(), Some(LOGIN));
    }
    assert!(proxy.origin.requests().is_empty());
    let metrics = proxy.metrics().await;
    assert_eq!(entries(&metrics, "forged"), 4.0);
    assert_eq!(entries(&metrics, "expired"), 2.0);
    assert_eq!(entries(&metrics, "other_room"), 2.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_gives_its_place_and_never_reaches_the_origin() {
    let proxy = TestProxy::start_with(ROOM, &entry_section(true));
    let mut c = Client::new(&proxy);
    let (first, back) = c
        .enter(
            "/drop?size=42",
            &token("alice", now() + 600, Some("test-room")),
        )
        .await;
    assert_eq!(first.status, 303);
    assert_eq!(first.location.as_deref(), Some("/drop?size=42"));
    assert!(c.cookie.is_some(), "the pass cookie with the redirect");
    assert_eq!(back.status, 200);
    assert_eq!(back.body, "origin:/drop?size=42");
    let seen = proxy.origin.received();
    assert_eq!(seen.len(), 1);
    assert!(seen.iter().all(|r| !r.target().contains("wr_entry")));
    assert_eq!(entries(&proxy.metrics().await, "entered"), 1.0);
}

/// One key, two clients (two browsers, a phone): one place, on one proxy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_key_holds_one_place_however_many_clients_bring_it() {
    // A room with space: both clients get the key's one pass.
    let proxy = TestProxy::start_with(ROOM, &entry_section(true));
    let (mut laptop, mut phone) = (Client::new(&proxy), Client::new(&proxy));
    let (_, a) = laptop
        .enter("/drop", &token("alice", now() + 600, None))
        .await;
    let (_, b) = phone
        .enter("/drop", &token("alice", now() + 600, None))
        .await;
    assert!(a.body.starts_with("origin:") && b.body.starts_with("origin:"));
    assert_eq!(proxy.state().await["occupancy"], 1, "one place for the key");
    assert_eq!(proxy.state().await["admitted_total"], 1);

    // A full room: the key's one place in line, the same from the second client.
    let proxy = TestProxy::start_with(FULL_ROOM, &entry_section(true));
    let mut inside = Client::new(&proxy);
    inside
        .enter("/drop", &token("bob", now() + 600, None))
        .await;
    let (mut laptop, mut phone) = (Client::new(&proxy), Client::new(&proxy));
    laptop
        .enter("/drop", &token("alice", now() + 600, None))
        .await;
    let a = laptop.get("/drop", true).await;
    phone
        .enter("/drop", &token("alice", now() + 600, None))
        .await;
    let b = phone.get("/drop", true).await;
    let (a, b): (serde_json::Value, serde_json::Value) = (
        serde_json::from_str(&a.body).unwrap(),
        serde_json::from_str(&b.body).unwrap(),
    );
    assert_eq!(a["waitroom"]["position"], 1, "{a}");
    assert_eq!(b["waitroom"]["position"], 1, "{b}");
    assert_eq!(proxy.state().await["queue_length"], 1);
    // Another key is one more place.
    let mut carol = Client::new(&proxy);
    carol
        .enter("/drop", &token("carol", now() + 600, None))
        .await;
    let c: serde_json::Value = serde_json::from_str(&carol.get("/drop", true).await.body).unwrap();
    assert_eq!(c["waitroom"]["position"], 2);
}

/// The key's pass on one proxy is its pass on the other: two proxies sharing Redis.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_key_holds_one_place_across_redis_proxies() {
    let redis = RedisServer::start();
    let rest = entry_section(true);
    let proxies = TestProxy::sharing_redis(
        2,
        &redis.url(),
        Sections {
            room: ROOM,
            rest: &rest,
            ..Sections::default()
        },
    );
    let (mut laptop, mut phone) = (Client::new(&proxies[0]), Client::new(&proxies[1]));
    let (_, a) = laptop
        .enter("/drop", &token("alice", now() + 600, None))
        .await;
    let (_, b) = phone
        .enter("/drop", &token("alice", now() + 600, None))
        .await;
    assert!(a.body.starts_with("origin:"), "{}", a.body);
    assert!(b.body.starts_with("origin:"), "{}", b.body);
    assert_eq!(proxies[0].state().await["occupancy"], 1);
    let (_, other) = Client::new(&proxies[1])
        .enter("/drop", &token("bob", now() + 600, None))
        .await;
    assert!(other.body.starts_with("origin:"));
    assert_eq!(proxies[1].state().await["occupancy"], 2);
}

/// `waitroom-proxy sign-entry --config FILE --key dave ARGS`, without WR_ENTRY_SECRET.
fn sign_entry(file: &std::path::Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_waitroom-proxy"))
        .args(["sign-entry", "--config"])
        .arg(file)
        .args(["--key", "dave"])
        .args(args)
        .env_remove("WR_ENTRY_SECRET")
        .output()
        .unwrap()
}

/// `waitroom-proxy sign-entry` prints a token the proxy takes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sign_entry_prints_a_token_the_proxy_takes() {
    let proxy = TestProxy::start_with(ROOM, &entry_section(true));
    let run = sign_entry(&proxy.config_file, &["--ttl", "10m", "--room", "test-room"]);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let token = String::from_utf8(run.stdout).unwrap();
    let (first, back) = Client::new(&proxy).enter("/", token.trim()).await;
    assert_eq!(first.status, 303);
    assert!(back.body.starts_with("origin:"), "{}", back.body);

    // Without a secret it says why.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("keyed.toml");
    let text = std::fs::read_to_string(&proxy.config_file)
        .unwrap()
        .replace(&format!("secret = \"{ENTRY_SECRET}\""), "");
    std::fs::write(&file, text).unwrap();
    let run = sign_entry(&file, &[]);
    assert_eq!(run.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&run.stderr).contains("entry.secret is not set"));
}

/// A shop that keeps its signing key: `entry.public_key` (Ed25519 here), tokens signed EdDSA
/// with the private key the proxy never sees.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_public_key_checks_the_shops_eddsa_tokens() {
    let pair = rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let public = dir.path().join("shop.pub.pem");
    std::fs::write(&public, pair.public_key_pem()).unwrap();
    let section = format!(
        "[entry]\nrequire_token = true\npublic_key = \"{}\"\n",
        public.display()
    );
    let proxy = TestProxy::start_with(ROOM, &section);
    let signing = jsonwebtoken::EncodingKey::from_ed_pem(pair.serialize_pem().as_bytes()).unwrap();
    let claims = serde_json::json!({ "key": "erin", "exp": now() + 600 });
    let token = jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::EdDSA),
        &claims,
        &signing,
    )
    .unwrap();
    let (first, back) = Client::new(&proxy).enter("/drop", &token).await;
    assert_eq!(first.status, 303);
    assert!(back.body.starts_with("origin:"), "{}", back.body);
    // An HS256 token (whatever its secret) is not the shop's.
    let mut c = Client::new(&proxy);
    let hs = c
        .get(&format!("/drop?wr_entry={}", token_for_hs()), true)
        .await;
    assert_eq!(hs.status, 403);
}

fn token_for_hs() -> String {
    token("erin", now() + 600, None)
}

/// On a bypassed path the request is forwarded, without the token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_on_a_bypassed_path_is_taken_off_what_is_forwarded() {
    let proxy = TestProxy::start_with(
        &format!("{ROOM}\nbypass = [\"/static/*\"]"),
        &entry_section(true),
    );
    let token = token("alice", now() + 600, None);
    let answer = Client::new(&proxy)
        .get(&format!("/static/app.js?wr_entry={token}&v=1"), false)
        .await;
    assert_eq!(answer.body, "origin:/static/app.js?v=1");
    assert!(
        proxy
            .origin
            .received()
            .iter()
            .all(|r| !r.target().contains("wr_entry"))
    );
}
