#![allow(clippy::unwrap_used)]
//! A drop day with Redis down (issue 23 items 3 and 4): a proxy starts without its store and
//! joins it when it answers; the admin API answers from what it last knew, and the fastest
//! rollback (`suspended`) works on the instance asked at once and reaches the others when Redis
//! is back. Every test starts its own redis-server.

mod common;

use common::origin::StubOrigin;
use common::proxy::{ADMIN_TOKEN, NoEnvironment, TestProxy, config_text, eventually, free_port};
use common::redis_server::RedisServer;
use waitroom::config::Config;
use waitroom::service::server::{RunOptions, spawn};

fn redis_section(redis: &RedisServer, extra: &str) -> String {
    format!(
        "[store]\nbackend = \"redis\"\nurl = \"{}\"\nleader_ttl = \"1s\"\ncommand_timeout = \"300ms\"\nconnect_timeout = \"1s\"\n{extra}",
        redis.url()
    )
}

async fn ready(proxy: &TestProxy) -> u16 {
    reqwest::get(format!("{}/readyz", proxy.admin))
        .await
        .unwrap()
        .status()
        .as_u16()
}

async fn store_up(proxy: &TestProxy) -> bool {
    proxy
        .metrics()
        .await
        .contains("waitroom_store_up{room=\"test-room\"} 1")
}

async fn patch_config(proxy: &TestProxy, body: &str) -> (u16, serde_json::Value) {
    let answer = reqwest::Client::new()
        .patch(format!("{}/admin/config", proxy.admin))
        .bearer_auth(ADMIN_TOKEN)
        .header("content-type", "application/merge-patch+json")
        .body(body.to_owned())
        .send()
        .await
        .unwrap();
    let status = answer.status().as_u16();
    (status, answer.json().await.unwrap())
}

fn origin_saw(origin: &StubOrigin, path: &str) -> bool {
    origin.requests().iter().any(|(p, _)| p == path)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proxy_started_while_redis_is_down_serves_by_on_error_and_joins_it_when_it_answers() {
    let mut redis = RedisServer::start_persistent();
    let origin = StubOrigin::start();
    let room = "total_active_users = 100\nnew_users_per_minute = 100000\n\
                enabled_origin_commands = [\"revoke\"]";
    // Settings saved in the store before the outage, which a proxy started during it must
    // apply once it joins.
    {
        let before = TestProxy::start_real_time(&origin, room, &redis_section(&redis, ""));
        let (status, _) = patch_config(&before, r#"{"total_active_users": 7}"#).await;
        assert_eq!(status, 200);
    }
    redis.kill();

    let closed = TestProxy::start_real_time(&origin, room, &redis_section(&redis, ""));
    let open =
        TestProxy::start_real_time(&origin, room, &redis_section(&redis, "on_error = \"open\""));
    // Lines before the first section header belong to [admin].
    let strict = TestProxy::start_real_time(
        &origin,
        room,
        &format!("ready_requires_store = true\n{}", redis_section(&redis, "")),
    );
    assert!(
        !store_up(&closed).await,
        "waitroom_store_up 0 from the start"
    );
    let mut newcomer = closed.visitor();
    let queued = newcomer.get("/closed/1").await;
    assert_eq!(queued.status, 200);
    assert!(!queued.reached_origin(), "closed: a newcomer waits");
    assert!(queued.body.contains("Test drop"), "the waiting page");
    assert!(
        newcomer.cookie.is_some(),
        "with a ticket holding its arrival"
    );
    assert!(
        open.visitor().get("/open/1").await.reached_origin(),
        "open: a newcomer goes through"
    );
    assert_eq!(
        ready(&closed).await,
        200,
        "ready without the store by default"
    );
    assert_eq!(ready(&strict).await, 503, "ready_requires_store: unready");
    let state = closed.state().await;
    assert_eq!(state["stale"], true);
    assert_eq!(state["occupancy"], serde_json::Value::Null, "never read");

    redis.restart();
    for proxy in [&closed, &open, &strict] {
        eventually("the proxy joins the store without a restart", || async {
            store_up(proxy).await
        })
        .await;
    }
    eventually("ready once the store answers", || async {
        ready(&strict).await == 200
    })
    .await;
    eventually("the settings saved in the store apply", || async {
        closed.state().await["total_active_users"] == 7
    })
    .await;
    eventually("an instance leads", || async {
        closed.state().await["leader"].is_string()
    })
    .await;
    // Its ticket joins the line at its arrival and is called by the next round.
    let started = std::time::Instant::now();
    while !newcomer.get("/closed/1").await.reached_origin() {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(10),
            "the ticket issued during the outage is admitted"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(strict.visitor().get("/strict/1").await.reached_origin());
    let state = closed.state().await;
    assert_eq!(state["stale"], false);
    assert!(state["occupancy"].as_u64().unwrap() >= 2, "{state}");
    // The revocation feed is followed: a pass ended through another instance is refused here.
    let pass = newcomer.cookie.clone();
    let mut elsewhere = open.visitor();
    elsewhere.cookie = pass.clone();
    assert!(elsewhere.get("/revoke").await.reached_origin());
    let revoked_at = std::time::Instant::now();
    loop {
        let mut replay = closed.visitor();
        replay.cookie = pass.clone();
        replay.get("/after-revoke").await;
        if replay.cookie != pass {
            break;
        }
        assert!(
            revoked_at.elapsed() < std::time::Duration::from_millis(1500),
            "a pass revoked elsewhere is still accepted by the proxy that started without Redis"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    for path in ["/open/1", "/closed/1", "/strict/1", "/revoke"] {
        assert!(origin_saw(&origin, path), "{path} reached the origin");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn during_an_outage_the_admin_api_answers_stale_and_holds_suspended_until_redis_returns() {
    let mut redis = RedisServer::start_persistent();
    let origin = StubOrigin::start();
    let room = "total_active_users = 1\nnew_users_per_minute = 100000";
    let a = TestProxy::start_real_time(&origin, room, &redis_section(&redis, ""));
    let b = TestProxy::start_real_time(&origin, room, &redis_section(&redis, ""));
    // On a busy machine the first store call may outlast command_timeout (the visitor is then
    // queued by on_error): it is let in on a later request all the same.
    let mut inside = a.visitor();
    let mut tries = 0;
    while !inside.get("/").await.reached_origin() {
        tries += 1;
        assert!(tries < 100, "the first visitor is never let in");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let mut waiting = a.visitor();
    assert!(!waiting.get("/").await.reached_origin());
    // The loop's own reading (its gauges), not the admin API's: the API reads the store while
    // it is up, and what it shows in the outage is what the loop last read.
    eventually("the loop has read one inside and one waiting", || async {
        let metrics = a.metrics().await;
        metrics.contains("waitroom_occupancy{room=\"test-room\"} 1")
            && metrics.contains("waitroom_queue_length{room=\"test-room\"} 1")
    })
    .await;

    redis.kill();
    eventually("the outage is noticed", || async {
        a.state().await["stale"] == true
    })
    .await;
    let state = a.state().await;
    assert_eq!(state["occupancy"], 1, "the last known numbers: {state}");
    assert_eq!(state["queue_length"], 1, "{state}");
    assert!(state["stale_seconds"].as_f64().unwrap() >= 0.0, "{state}");
    assert_eq!(state["suspended"], false);
    assert_eq!(state["pending"], serde_json::Value::Null);

    let (status, refused) = patch_config(&a, r#"{"total_active_users": 5}"#).await;
    assert_eq!(status, 503, "{refused}");
    assert!(
        refused["error"]
            .as_str()
            .unwrap()
            .contains("only suspended and queue_all can be changed now"),
        "{refused}"
    );
    let (status, held) = patch_config(&a, r#"{"suspended": true}"#).await;
    assert_eq!(status, 202, "{held}");
    assert_eq!(held["suspended"], true);
    assert_eq!(held["pending"], serde_json::json!({ "suspended": true }));

    assert!(
        a.visitor().get("/suspended/1").await.reached_origin(),
        "suspended at once on the instance asked"
    );
    assert!(
        !b.visitor().get("/not-yet/1").await.reached_origin(),
        "the other instance still gates: it learns with the store"
    );
    let state = a.state().await;
    assert_eq!(state["suspended"], true);
    assert_eq!(state["pending"], serde_json::json!({ "suspended": true }));
    assert_eq!(state["stale"], true);

    redis.restart();
    eventually("the other instance learns suspended", || async {
        b.state().await["suspended"] == true
    })
    .await;
    eventually("the pending mark clears", || async {
        let state = a.state().await;
        state["pending"].is_null() && state["stale"] == false
    })
    .await;
    assert_eq!(a.state().await["suspended"], true);
    assert!(b.visitor().get("/suspended/2").await.reached_origin());
    assert!(origin_saw(&origin, "/suspended/1"));
    assert!(origin_saw(&origin, "/suspended/2"));
    assert!(!origin_saw(&origin, "/not-yet/1"));
}

/// What the proxy says when it cannot start on this store URL (its config check, or the start).
fn start_error(url: &str) -> String {
    let origin = StubOrigin::start();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("room.toml");
    std::fs::write(
        &path,
        config_text(
            free_port(),
            free_port(),
            origin.addr,
            "total_active_users = 10\nnew_users_per_minute = 60",
            &format!("[store]\nbackend = \"redis\"\nurl = \"{url}\"\n"),
        ),
    )
    .unwrap();
    let config = match Config::load(&path, &NoEnvironment, false) {
        Ok((config, _)) => config,
        Err(e) => return e.to_string(),
    };
    let Err(e) = spawn(&config, RunOptions::default()) else {
        panic!("a proxy started on {url}");
    };
    e.to_string()
}

#[test]
fn an_invalid_redis_url_or_refused_credentials_still_fail_at_start() {
    // A configuration error, not an outage: no wait mends it.
    let message = start_error("redis://:secret@127.0.0.1:port");
    assert!(
        message.contains("store.url") && message.contains("not a number between 1 and 65535"),
        "{message}"
    );
    assert!(!message.contains("secret"), "{message}");

    let redis = RedisServer::start_with_password("right-password");
    let at = format!("127.0.0.1:{}", redis.port());
    let message = start_error(&format!("redis://:wrong-password@{at}"));
    assert!(message.contains("refused"), "{message}");
    assert!(message.contains("authentication failed"), "{message}");
    assert!(!message.contains("wrong-password"), "{message}");
    let message = start_error(&format!("redis://{at}"));
    assert!(
        message.contains("refused") && message.contains("NOAUTH"),
        "{message}"
    );
}
