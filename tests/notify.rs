#![allow(clippy::unwrap_used)]
//! `[notify]` (issue 28, item 3) over real HTTP: the proxy in front of a stub origin, a
//! members-only room of one place, and a local receiver standing in for the shop's webhook. A
//! visitor whose entry token carries a contact waits, a place frees, and the receiver gets one
//! POST it can verify with the secret; a receiver that fails first gets the retry with the same
//! event id; one that always fails is counted; a visitor without a contact causes no POST; a bad
//! `webhook_url` is refused by `--test`, and the secret never printed; on two proxies sharing
//! Redis the instance holding the contact tells the shop.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::proxy::{ADMIN_TOKEN, SECRET, Sections, TestProxy, Visitor, eventually};
use common::redis_server::RedisServer;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use waitroom::notify::signature::verify;

const ENTRY_SECRET: &str = "entry-secret-entry-secret-entry-secret!";
const NOTIFY_SECRET: &str = "notify-secret-notify-secret-notify!!";
const FULL_ROOM: &str = "total_active_users = 1\nnew_users_per_minute = 1000";

/// One POST as the receiver read it.
#[derive(Debug, Clone)]
struct Received {
    timestamp: String,
    signature: String,
    body: Vec<u8>,
}

impl Received {
    fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap()
    }

    fn verifies_with(&self, secret: &str) -> bool {
        verify(
            secret.as_bytes(),
            self.timestamp.parse().unwrap(),
            &self.body,
            &self.signature,
        )
    }
}

/// The shop's webhook: answers each POST with the next of `statuses` (the last one for good).
struct Receiver {
    url: String,
    received: Arc<Mutex<Vec<Received>>>,
}

impl Receiver {
    async fn start(statuses: &'static [u16]) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hooks/waitroom", listener.local_addr().unwrap());
        let received = Arc::new(Mutex::new(Vec::new()));
        let seen = received.clone();
        tokio::spawn(async move {
            loop {
                let Ok((mut stream, _)) = listener.accept().await else {
                    return;
                };
                let request = read_request(&mut stream).await;
                let status = {
                    let mut seen = seen.lock().unwrap();
                    seen.push(request);
                    statuses[(seen.len() - 1).min(statuses.len() - 1)]
                };
                let answer = format!(
                    "HTTP/1.1 {status} X\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                );
                let _ = stream.write_all(answer.as_bytes()).await;
            }
        });
        Self { url, received }
    }

    fn received(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }
}

async fn read_request(stream: &mut tokio::net::TcpStream) -> Received {
    let mut bytes = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        let n = stream.read(&mut chunk).await.unwrap();
        assert!(n > 0, "the proxy closed before a whole head");
        bytes.extend_from_slice(&chunk[..n]);
        if let Some(at) = bytes.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
    };
    let head = String::from_utf8(bytes[..head_end].to_vec()).unwrap();
    assert!(head.starts_with("POST /hooks/waitroom "), "{head}");
    let header = |name: &str| {
        head.lines()
            .find_map(|l| {
                let (n, v) = l.split_once(':')?;
                n.eq_ignore_ascii_case(name).then(|| v.trim().to_owned())
            })
            .unwrap_or_default()
    };
    let length: usize = header("content-length").parse().unwrap();
    while bytes.len() < head_end + length {
        let n = stream.read(&mut chunk).await.unwrap();
        assert!(n > 0, "the proxy closed before the whole body");
        bytes.extend_from_slice(&chunk[..n]);
    }
    Received {
        timestamp: header("x-waitroom-timestamp"),
        signature: header("x-waitroom-signature"),
        body: bytes[head_end..head_end + length].to_vec(),
    }
}

fn sections(webhook_url: &str) -> String {
    format!(
        "[entry]\nrequire_token = true\nsecret = \"{ENTRY_SECRET}\"\n\n\
         [notify]\nwebhook_url = \"{webhook_url}\"\nsecret = \"{NOTIFY_SECRET}\"\n"
    )
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// A visitor who brought an entry token for `key` (with `contact`, if any): the cookie the
/// proxy's redirect sets, in a client that then polls as the page does.
async fn member(proxy: &TestProxy, key: &str, contact: Option<&str>) -> Visitor {
    let token = waitroom::entry::sign(ENTRY_SECRET, key, now() + 600, None, contact).unwrap();
    let first = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .get(format!("{}/drop?wr_entry={token}", proxy.base))
        .send()
        .await
        .unwrap();
    assert_eq!(first.status(), 303);
    let mut visitor = proxy.visitor();
    visitor.cookie = first.headers().get_all("set-cookie").iter().find_map(|v| {
        let rest = v.to_str().unwrap().strip_prefix("waitroom=")?;
        Some(rest.split(';').next().unwrap().to_owned())
    });
    assert!(
        visitor.cookie.is_some(),
        "the entry redirect sets the cookie"
    );
    visitor
}

fn notifications(metrics: &str, result: &str) -> f64 {
    let series = format!("waitroom_notifications_total{{result=\"{result}\",room=\"test-room\"}} ");
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(&series))
        .map_or(0.0, |v| v.parse().unwrap())
}

/// Bob holds the room's one place, `waiting` waits behind him; Bob leaves and `waiting` polls
/// until the loop calls it (the page's polls are what the loop learns the call from).
async fn free_the_place_for(proxy: &TestProxy, bob: &mut Visitor, waiting: &mut Visitor) {
    let before = waiting.get_json("/drop").await.json();
    assert_eq!(before["waitroom"]["position"], 1, "{before}");
    assert_eq!(bob.leave().await.status, 200);
    eventually("the waiting visitor is let in", || {
        let mut waiting = waiting.clone();
        async move {
            proxy.tick().await;
            waiting.get_json("/drop").await.reached_origin()
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_called_visitor_with_a_contact_is_posted_once_and_signed() {
    let receiver = Receiver::start(&[200]).await;
    let proxy = TestProxy::start_with(FULL_ROOM, &sections(&receiver.url));
    let mut bob = member(&proxy, "bob", None).await;
    assert!(bob.get("/drop").await.reached_origin());
    let mut alice = member(&proxy, "alice", Some("crm:8812")).await;
    let queue_id = alice.get_json("/drop").await.json()["waitroom"]["queueId"].clone();
    free_the_place_for(&proxy, &mut bob, &mut alice).await;

    eventually("the receiver gets the call", || async {
        !receiver.received().is_empty()
    })
    .await;
    // More ticks, more polls: still one call.
    for _ in 0..5 {
        alice.get("/drop").await;
        proxy.tick().await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let received = receiver.received();
    assert_eq!(received.len(), 1, "{received:?}");
    let call = &received[0];
    assert!(call.verifies_with(NOTIFY_SECRET), "{call:?}");
    assert!(!call.verifies_with("another-secret-another-secret-another!"));
    let sent_at: u64 = call.timestamp.parse().unwrap();
    assert!(
        sent_at.abs_diff(now()) < 60,
        "a timestamp of now: {sent_at}"
    );
    let body = call.json();
    assert_eq!(body["type"], "called");
    assert_eq!(body["room"], "test-room");
    assert_eq!(body["contact"], "crm:8812");
    assert_eq!(body["queue_id"], queue_id, "the queue id the page shows");
    assert_eq!(body["event_id"].as_str().unwrap().len(), 32);
    assert!(body["called_at"].as_str().unwrap().ends_with('Z'), "{body}");
    let metrics = proxy.metrics().await;
    assert_eq!(notifications(&metrics, "sent"), 1.0);
    assert_eq!(notifications(&metrics, "failed"), 0.0);
    assert_eq!(notifications(&metrics, "dropped"), 0.0);
}

/// Called while its tab is closed (no poll since): the loop's tick alone tells the shop, and the
/// visitor's place stays called for it to claim.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_visitor_called_while_away_is_posted_by_the_loop() {
    let receiver = Receiver::start(&[200]).await;
    let proxy = TestProxy::start_with(FULL_ROOM, &sections(&receiver.url));
    let mut bob = member(&proxy, "bob", None).await;
    assert!(bob.get("/drop").await.reached_origin());
    let mut alice = member(&proxy, "alice", Some("crm:8812")).await;
    assert_eq!(
        alice.get_json("/drop").await.json()["waitroom"]["position"],
        1
    );
    assert_eq!(bob.leave().await.status, 200);
    eventually("the loop tells the shop", || async {
        proxy.tick().await;
        !receiver.received().is_empty()
    })
    .await;
    assert_eq!(receiver.received()[0].json()["contact"], "crm:8812");
    assert!(
        alice.get("/drop").await.reached_origin(),
        "the call is hers to claim"
    );
    for _ in 0..3 {
        proxy.tick().await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        receiver.received().len(),
        1,
        "claiming it is no second call"
    );
}

/// Two proxies on one Redis: the contact is held where the token was brought, the place freed
/// and claimed on the other; the holder learns of the call from the store, whichever leads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_redis_the_instance_holding_the_contact_tells_the_shop() {
    let redis = RedisServer::start();
    let receiver = Receiver::start(&[200]).await;
    let rest = sections(&receiver.url);
    let proxies = TestProxy::sharing_redis(
        2,
        &redis.url(),
        Sections {
            room: FULL_ROOM,
            rest: &rest,
            ..Sections::default()
        },
    );
    let mut bob = member(&proxies[1], "bob", None).await;
    assert!(bob.get("/drop").await.reached_origin());
    let mut alice = member(&proxies[0], "alice", Some("crm:8812")).await;
    assert_eq!(
        alice.get_json("/drop").await.json()["waitroom"]["position"],
        1
    );
    assert_eq!(bob.leave().await.status, 200);
    eventually("the holder tells the shop", || async {
        !receiver.received().is_empty()
    })
    .await;
    let mut on_the_other = proxies[1].visitor();
    on_the_other.cookie = alice.cookie.clone();
    assert!(on_the_other.get("/drop").await.reached_origin());
    tokio::time::sleep(Duration::from_millis(500)).await;
    let received = receiver.received();
    assert_eq!(received.len(), 1, "{received:?}");
    assert!(received[0].verifies_with(NOTIFY_SECRET));
    assert_eq!(received[0].json()["contact"], "crm:8812");
    assert_eq!(notifications(&proxies[0].metrics().await, "sent"), 1.0);
    assert_eq!(notifications(&proxies[1].metrics().await, "sent"), 0.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receiver_that_fails_first_gets_the_retry_with_the_same_event() {
    let receiver = Receiver::start(&[500, 200]).await;
    let proxy = TestProxy::start_with(FULL_ROOM, &sections(&receiver.url));
    let mut bob = member(&proxy, "bob", None).await;
    assert!(bob.get("/drop").await.reached_origin());
    let mut alice = member(&proxy, "alice", Some("crm:8812")).await;
    free_the_place_for(&proxy, &mut bob, &mut alice).await;

    eventually("the retry is sent", || async {
        receiver.received().len() >= 2
    })
    .await;
    eventually("the call is counted sent", || async {
        notifications(&proxy.metrics().await, "sent") == 1.0
    })
    .await;
    let received = receiver.received();
    assert_eq!(received.len(), 2, "one failure, one success: {received:?}");
    assert_eq!(
        received[0].json()["event_id"],
        received[1].json()["event_id"]
    );
    assert_eq!(received[0].body, received[1].body, "the same body");
    assert!(received.iter().all(|r| r.verifies_with(NOTIFY_SECRET)));
    assert_eq!(notifications(&proxy.metrics().await, "failed"), 0.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receiver_that_always_fails_is_tried_four_times_and_counted() {
    let receiver = Receiver::start(&[503]).await;
    let proxy = TestProxy::start_with(FULL_ROOM, &sections(&receiver.url));
    let mut bob = member(&proxy, "bob", None).await;
    assert!(bob.get("/drop").await.reached_origin());
    let mut alice = member(&proxy, "alice", Some("crm:8812")).await;
    free_the_place_for(&proxy, &mut bob, &mut alice).await;

    eventually("the call is counted failed", || async {
        notifications(&proxy.metrics().await, "failed") == 1.0
    })
    .await;
    assert_eq!(receiver.received().len(), 4);
    assert_eq!(notifications(&proxy.metrics().await, "sent"), 0.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_visitor_without_a_contact_causes_no_post() {
    let receiver = Receiver::start(&[200]).await;
    let proxy = TestProxy::start_with(FULL_ROOM, &sections(&receiver.url));
    let mut bob = member(&proxy, "bob", None).await;
    assert!(bob.get("/drop").await.reached_origin());
    let mut carol = member(&proxy, "carol", None).await;
    free_the_place_for(&proxy, &mut bob, &mut carol).await;
    for _ in 0..5 {
        proxy.tick().await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(receiver.received().is_empty());
    let metrics = proxy.metrics().await;
    for result in ["sent", "failed", "dropped"] {
        assert_eq!(notifications(&metrics, result), 0.0, "{result}");
    }
}

/// `--test` on a file with `[notify]`: `rest` after the minimal sections.
fn check(rest: &str) -> std::process::Output {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("room.toml");
    std::fs::write(
        &path,
        format!(
            "[origin]\naddress = \"127.0.0.1:9\"\n\n[room]\nid = \"r\"\ntotal_active_users = 10\nnew_users_per_minute = 60\n\n\
             [pass]\nsecret = \"{SECRET}\"\n\n[admin]\ntoken = \"{ADMIN_TOKEN}\"\n\n{rest}"
        ),
    )
    .unwrap();
    std::process::Command::new(env!("CARGO_BIN_EXE_waitroom-proxy"))
        .args(["--config".as_ref(), path.as_os_str(), "--test".as_ref()])
        .env_remove("WR_NOTIFY_SECRET")
        .output()
        .unwrap()
}

#[test]
fn test_refuses_a_bad_webhook_url_and_masks_the_secret() {
    let good = check(&format!(
        "[notify]\nwebhook_url = \"https://shop.example/hooks/waitroom\"\nsecret = \"{NOTIFY_SECRET}\"\n"
    ));
    let stdout = String::from_utf8_lossy(&good.stdout);
    assert!(
        good.status.success(),
        "{}",
        String::from_utf8_lossy(&good.stderr)
    );
    assert!(stdout.contains("[notify]"), "{stdout}");
    assert!(!stdout.contains(NOTIFY_SECRET), "{stdout}");

    for url in ["ftp://shop.example/hook", "shop.example/hook", "http://"] {
        let bad = check(&format!(
            "[notify]\nwebhook_url = \"{url}\"\nsecret = \"{NOTIFY_SECRET}\"\n"
        ));
        assert_eq!(bad.status.code(), Some(2), "{url}");
        let stderr = String::from_utf8_lossy(&bad.stderr);
        assert!(stderr.contains("notify.webhook_url"), "{url}: {stderr}");
    }

    let unsigned = check("[notify]\nwebhook_url = \"https://shop.example/hook\"\n");
    assert_eq!(unsigned.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&unsigned.stderr).contains("notify.secret"));
}
