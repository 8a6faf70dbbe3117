#![allow(clippy::unwrap_used)]
//! The autopilot in the running proxy (issue #16): a slow origin lowers the room's limits
//! (seen in /admin/state and the metrics) without evicting anyone, the pause switch stops it,
//! an operator's change sets its new starting point; on Redis, two proxies apply the limits the
//! one leader decides. Real time, windows of 1 s (the least `[autopilot] window` takes); every
//! wait polls with a deadline, nothing is asserted about speed.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::origin::StubOrigin;
use common::proxy::{ADMIN_TOKEN, Sections, TestProxy, Visitor};
use common::redis_server::RedisServer;

/// A room of 20 whose rate and burst never bind (the capacity does), with visitors staying.
const ROOM: &str = "total_active_users = 20\nnew_users_per_minute = 60000\nburst = 20\n\
                    session_duration = \"10m\"\nrefresh_interval = \"1s\"\n";

/// Judged every second, on 20 requests at least, against a 50 ms target: an origin answering
/// in 150 ms breaches every window.
const AUTOPILOT: &str = "[autopilot]\nenabled = true\nlatency_target = \"50ms\"\n\
                         window = \"1s\"\nmin_interval = \"1s\"\nmin_requests = 20\n\
                         min_active_users = 2\nmax_active_users = 100\n\
                         exclude = [\"/static/*\"]\n";

const SLOW_PAGE: &str = "/delay/150";

/// Visitors who browse the slow page over and over until stopped (those waiting in line poll
/// more gently).
struct Crowd {
    stop: Arc<AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Crowd {
    fn start(bases: &[String], n: usize) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let tasks = (0..n)
            .map(|i| {
                let stop = stop.clone();
                let base = bases[i % bases.len()].clone();
                tokio::spawn(async move {
                    let mut v = Visitor::new(&base);
                    while !stop.load(Ordering::Relaxed) {
                        if !v.get(SLOW_PAGE).await.reached_origin() {
                            tokio::time::sleep(Duration::from_millis(100)).await;
                        }
                    }
                })
            })
            .collect();
        Self { stop, tasks }
    }

    async fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.tasks {
            t.await.unwrap();
        }
    }
}

/// Polls `check` every 100 ms until it gives a value, for at most 60 s (a loaded machine is
/// slow; windows are a second long and judged a second after their end).
async fn until<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn limit(state: &serde_json::Value) -> u64 {
    state["autopilot"]["total_active_users"].as_u64().unwrap()
}

/// `name{room="test-room"} value` in a Prometheus text.
fn metric(text: &str, name: &str) -> Option<i64> {
    let prefix = format!("{name}{{room=\"test-room\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|v| v.trim().parse().ok())
}

async fn admin(proxy_admin: &str, method: reqwest::Method, path: &str, body: &str) -> u16 {
    reqwest::Client::new()
        .request(method, format!("{proxy_admin}{path}"))
        .bearer_auth(ADMIN_TOKEN)
        .header("content-type", "application/json")
        .body(body.to_owned())
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

fn sections(rest: &str) -> Sections<'_> {
    Sections {
        room: ROOM,
        rest,
        ..Sections::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_origin_lowers_the_limit_pause_holds_it_and_an_operator_change_resets_it() {
    let origin = StubOrigin::start();
    let proxy = TestProxy::start_real_time_sections(&origin, sections(AUTOPILOT));
    let state = proxy.state().await;
    assert_eq!(state["total_active_users"], 20);
    let metrics = proxy.metrics().await;
    assert!(
        metric(&metrics, "waitroom_origin_inflight").is_some(),
        "{metrics}"
    );

    // 30 visitors for 20 places: the room is full, 10 wait, and the origin is slow.
    let crowd = Crowd::start(std::slice::from_ref(&proxy.base), 30);
    let lowered = until("the autopilot lowers total_active_users", || async {
        let state = proxy.state().await;
        (state["autopilot"]["enabled"] == true && limit(&state) < 20).then_some(state)
    })
    .await;
    let lowered_to = limit(&lowered);
    let reason = lowered["autopilot"]["reason"].as_str().unwrap();
    assert!(reason.starts_with("breach: p95"), "{reason}");
    assert!(lowered["autopilot"]["changed_at"].is_string(), "{lowered}");
    assert_eq!(lowered["total_active_users"], 20, "the room's own limit");
    let rate = lowered["autopilot"]["new_users_per_minute"]
        .as_u64()
        .unwrap();
    assert_eq!(
        rate,
        60000 * lowered_to / 20,
        "the rate keeps the operator's ratio"
    );

    // Lowering evicts nobody: those inside stay (10-minute passes) above the new limit.
    let state = proxy.state().await;
    assert!(state["occupancy"].as_u64().unwrap() > lowered_to, "{state}");
    let metrics = until("the metrics show the limit in force", || async {
        let text = proxy.metrics().await;
        let shown = metric(&text, "waitroom_autopilot_total_active_users")?;
        (shown == i64::try_from(limit(&proxy.state().await)).unwrap()).then_some(text)
    })
    .await;
    assert!(
        metric(&metrics, "waitroom_autopilot_new_users_per_minute").unwrap() < 60000,
        "{metrics}"
    );
    assert!(metric(&metrics, "waitroom_origin_inflight").unwrap() >= 0);

    // Paused, and the operator sets 35: the new starting point, held however slow the origin.
    let paused = admin(
        &proxy.admin,
        reqwest::Method::POST,
        "/admin/autopilot",
        r#"{"paused": true}"#,
    )
    .await;
    assert_eq!(paused, 200);
    until("the leader pauses", || async {
        (proxy.state().await["autopilot"]["paused"] == true).then_some(())
    })
    .await;
    let patched = admin(
        &proxy.admin,
        reqwest::Method::PATCH,
        "/admin/config",
        r#"{"total_active_users": 35}"#,
    )
    .await;
    assert_eq!(patched, 200);
    let reset = until(
        "the operator's change is the new starting point",
        || async {
            let state = proxy.state().await;
            (limit(&state) == 35).then_some(state)
        },
    )
    .await;
    let reason = reset["autopilot"]["reason"].as_str().unwrap();
    assert!(reason.contains("the operator changed"), "{reason}");
    // The operator changed the capacity only: the rate is theirs too.
    assert_eq!(reset["autopilot"]["new_users_per_minute"], 60000);
    // Several windows breach while paused; none changes the limit.
    let held_since = Instant::now();
    while held_since.elapsed() < Duration::from_secs(5) {
        let state = proxy.state().await;
        assert_eq!(limit(&state), 35, "changed while paused: {state}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(
        proxy.state().await["autopilot"]["last_step"]
            .as_str()
            .unwrap()
            .contains("paused")
    );

    // Resumed: the slow origin lowers it again, from the operator's 35.
    let resumed = admin(
        &proxy.admin,
        reqwest::Method::POST,
        "/admin/autopilot",
        r#"{"paused": false}"#,
    )
    .await;
    assert_eq!(resumed, 200);
    until(
        "the autopilot lowers the limit again once resumed",
        || async {
            let state = proxy.state().await;
            (state["autopilot"]["paused"] == false && limit(&state) < 35).then_some(())
        },
    )
    .await;
    crowd.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pause_switch_is_refused_where_the_autopilot_is_off_and_state_says_off() {
    let proxy = TestProxy::start_real_time_sections(&StubOrigin::start(), sections(""));
    let status = admin(
        &proxy.admin,
        reqwest::Method::POST,
        "/admin/autopilot",
        r#"{"paused": true}"#,
    )
    .await;
    assert_eq!(status, 409);
    let bad = admin(
        &proxy.admin,
        reqwest::Method::POST,
        "/admin/autopilot",
        r#"{"paused": "yes"}"#,
    )
    .await;
    assert_eq!(bad, 400);
    let state = until("the loop reports the autopilot off", || async {
        let state = proxy.state().await;
        (state["autopilot"]["phase"] == "off").then_some(state)
    })
    .await;
    assert_eq!(state["autopilot"]["enabled"], false);
    assert_eq!(
        limit(&state),
        20,
        "the room's own limit is the one in force"
    );
    let metrics = proxy.metrics().await;
    assert_eq!(
        metric(&metrics, "waitroom_autopilot_total_active_users"),
        Some(20)
    );
    assert_eq!(
        metric(&metrics, "waitroom_autopilot_new_users_per_minute"),
        Some(60000)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_redis_only_the_leader_decides_and_both_proxies_apply_its_limits() {
    let redis = RedisServer::start();
    let origin = StubOrigin::start();
    let rest = format!(
        "[store]\nbackend = \"redis\"\nurl = \"{}\"\nleader_ttl = \"1s\"\n\
         command_timeout = \"500ms\"\nconnect_timeout = \"1s\"\n{AUTOPILOT}",
        redis.url()
    );
    let proxies: Vec<TestProxy> = (0..2)
        .map(|_| TestProxy::start_real_time_sections(&origin, sections(&rest)))
        .collect();
    let bases: Vec<String> = proxies.iter().map(|p| p.base.clone()).collect();
    let crowd = Crowd::start(&bases, 30);
    until("the autopilot lowers total_active_users", || async {
        let state = proxies[0].state().await;
        (limit(&state) < 20).then_some(())
    })
    .await;
    let agreed = until("both proxies apply the same limits", || async {
        let a = proxies[0].state().await;
        let b = proxies[1].state().await;
        let same = |k: &str| a["autopilot"][k] == b["autopilot"][k];
        (limit(&a) < 20
            && same("total_active_users")
            && same("new_users_per_minute")
            && same("burst"))
        .then_some((a, b))
    })
    .await;
    crowd.stop().await;
    let (a, b) = agreed;
    // One decides, the leader; the other follows the store.
    for state in [&a, &b] {
        assert_eq!(state["autopilot"]["decides"], state["is_leader"], "{state}");
    }
    assert_ne!(a["is_leader"], b["is_leader"], "one leader: {a} {b}");
    let follower = if a["is_leader"] == true { &b } else { &a };
    assert_eq!(follower["autopilot"]["phase"], "following", "{follower}");
    // The store holds what both apply.
    let stored = proxies[0].running.parts.stores[0]
        .load_autopilot()
        .await
        .unwrap()
        .record
        .unwrap();
    assert_eq!(stored.start.total_active_users, 20);
    // Both instances' metrics show the limit in force (the crowd is gone: it holds still).
    let expected = until("the store and both proxies agree", || async {
        let stored = proxies[0].running.parts.stores[0]
            .load_autopilot()
            .await
            .ok()?
            .record?;
        let mut all = true;
        for p in &proxies {
            let shown = metric(&p.metrics().await, "waitroom_autopilot_total_active_users")?;
            all &= shown == i64::try_from(stored.setpoint.total_active_users).unwrap();
        }
        all.then_some(stored.setpoint.total_active_users)
    })
    .await;
    assert!(expected < 20);
}
