#![allow(clippy::unwrap_used)]
//! Several proxies on one real Redis act as one room; Redis faults (restart with and without its
//! data, an outage) and a killed leader are survived. Every test starts its own redis-server.

mod common;

use std::collections::HashSet;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::origin::StubOrigin;
use common::proxy::{ADMIN_TOKEN, TestProxy, Visitor, config_text, eventually, free_port};
use common::redis_server::RedisServer;

fn redis_section(redis: &RedisServer, extra: &str) -> String {
    format!(
        "[store]\nbackend = \"redis\"\nurl = \"{}\"\nleader_ttl = \"1s\"\ncommand_timeout = \"300ms\"\nconnect_timeout = \"1s\"\n{extra}",
        redis.url()
    )
}

fn instances(n: usize, redis: &RedisServer, room: &str, store_extra: &str) -> Vec<TestProxy> {
    let origin = StubOrigin::start();
    (0..n)
        .map(|_| TestProxy::start_real_time(&origin, room, &redis_section(redis, store_extra)))
        .collect()
}

async fn admitted_on(proxy: &TestProxy, v: &mut Visitor, path: &str) -> bool {
    let mut on = Visitor::new(&proxy.base);
    on.cookie = v.cookie.clone();
    let answer = on.get(path).await;
    v.cookie = on.cookie;
    answer.reached_origin()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_instances_hold_one_capacity_under_hundreds_of_visitors() {
    let redis = RedisServer::start();
    let capacity = 15;
    let proxies = instances(
        3,
        &redis,
        &format!(
            "total_active_users = {capacity}\nnew_users_per_minute = 100000\nsession_duration = \"10m\""
        ),
        "",
    );
    let store = proxies[0].running.parts.stores[0].clone();
    let sampler = tokio::spawn(async move {
        let mut max = 0;
        for _ in 0..300 {
            if let Ok(c) = store.counts().await {
                max = max.max(c.occupancy());
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        max
    });
    let bases: Vec<String> = proxies.iter().map(|p| p.base.clone()).collect();
    let mut tasks = Vec::new();
    for i in 0..240 {
        let bases = bases.clone();
        tasks.push(tokio::spawn(async move {
            // No sticky sessions: each request may land on another instance.
            let mut cookie = None;
            for round in 0..4 {
                let mut v = Visitor::new(&bases[(i + round) % bases.len()]);
                v.cookie = cookie;
                v.get(&format!("/p/{i}")).await;
                cookie = v.cookie;
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let max = sampler.await.unwrap();
    assert!(max <= capacity, "occupancy reached {max}");
    let state = proxies[1].state().await;
    assert_eq!(state["occupancy"], capacity, "the room filled, no more");
    assert_eq!(state["admitted_total"], capacity);
    assert_eq!(state["queue_length"], 240 - capacity);
    let leaders: Vec<bool> = {
        let mut v = Vec::new();
        for p in &proxies {
            v.push(p.state().await["is_leader"].as_bool().unwrap());
        }
        v
    };
    assert_eq!(leaders.iter().filter(|l| **l).count(), 1, "{leaders:?}");
    let distinct: HashSet<_> = proxies[0]
        .origin
        .requests()
        .into_iter()
        .filter_map(|(_, c)| c)
        .collect();
    assert!(!distinct.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifo_order_holds_across_instances() {
    let redis = RedisServer::start();
    let proxies = instances(
        3,
        &redis,
        "total_active_users = 1\nnew_users_per_minute = 100000",
        "",
    );
    let mut holder = proxies[0].visitor();
    assert!(holder.get("/").await.reached_origin());
    let mut line = Vec::new();
    for i in 0..6 {
        let mut v = proxies[i % 3].visitor();
        let status = v.get_json("/").await.json();
        assert_eq!(status["waitroom"]["position"], i + 1);
        line.push(v);
    }
    holder.leave().await;
    let mut order = Vec::new();
    let started = Instant::now();
    while order.len() < line.len() && started.elapsed() < Duration::from_secs(20) {
        for (i, v) in line.iter_mut().enumerate() {
            if order.contains(&i) {
                continue;
            }
            // Poll on another instance than the one joined.
            if admitted_on(&proxies[(i + 1) % 3], v, "/").await {
                order.push(i);
                v.leave().await;
            }
        }
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    assert_eq!(order, (0..6).collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revocations_and_live_settings_reach_every_instance() {
    let redis = RedisServer::start();
    let proxies = instances(
        2,
        &redis,
        "total_active_users = 5\nnew_users_per_minute = 100\nenabled_origin_commands = [\"revoke\"]",
        "",
    );
    let mut v = proxies[0].visitor();
    assert!(v.get("/").await.reached_origin());
    let pass = v.cookie.clone();
    let mut elsewhere = proxies[1].visitor();
    elsewhere.cookie = pass.clone();
    assert!(
        elsewhere.get("/").await.reached_origin(),
        "a pass works on every instance"
    );
    let revoke = v.get("/revoke").await;
    assert!(revoke.reached_origin());
    // The other instance refuses the pass within a second: replay it until refused.
    let revoked_at = Instant::now();
    let mut refused = false;
    while revoked_at.elapsed() < Duration::from_millis(1500) {
        let mut replay = proxies[1].visitor();
        replay.cookie = pass.clone();
        replay.get("/").await;
        if replay.cookie != pass {
            refused = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(refused, "instance B still accepted a pass revoked on A");

    let client = reqwest::Client::new();
    let answer = client
        .put(format!("{}/admin/config", proxies[0].admin))
        .bearer_auth(ADMIN_TOKEN)
        .body(r#"{"total_active_users": 9}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    let other = &proxies[1];
    eventually("the change reaches instance B", || async {
        other.state().await["total_active_users"] == 9
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_changed_live_survive_a_restart_of_the_proxy() {
    let redis = RedisServer::start();
    let room = "total_active_users = 5\nnew_users_per_minute = 100";
    {
        let first = instances(1, &redis, room, "").remove(0);
        let answer = reqwest::Client::new()
            .put(format!("{}/admin/config", first.admin))
            .bearer_auth(ADMIN_TOKEN)
            .body(r#"{"total_active_users": 7}"#)
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 200);
    }
    let second = instances(1, &redis, room, "").remove(0);
    eventually("the saved settings apply at start", || async {
        second.state().await["total_active_users"] == 7
    })
    .await;
}

/// A proxy as a separate process, so it can be killed like a crash.
struct ProcessProxy {
    child: Child,
    base: String,
    admin: String,
    _dir: tempfile::TempDir,
}

impl ProcessProxy {
    fn start(redis: &RedisServer, origin: &StubOrigin, room: &str) -> Self {
        let (listen, admin) = (free_port(), free_port());
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("room.toml");
        std::fs::write(
            &path,
            config_text(listen, admin, origin.addr, room, &redis_section(redis, "")),
        )
        .unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_waitroom-proxy"))
            .arg("--config")
            .arg(&path)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        common::proxy::wait_listening(listen);
        common::proxy::wait_listening(admin);
        Self {
            child,
            base: format!("http://127.0.0.1:{listen}"),
            admin: format!("http://127.0.0.1:{admin}"),
            _dir: dir,
        }
    }

    async fn state(&self) -> serde_json::Value {
        common::proxy::admin_state(&self.admin).await
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for ProcessProxy {
    fn drop(&mut self) {
        self.kill();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_leader_is_replaced_and_nobody_is_admitted_twice() {
    let redis = RedisServer::start();
    let origin = StubOrigin::start();
    let room = "total_active_users = 1\nnew_users_per_minute = 100000";
    let a = ProcessProxy::start(&redis, &origin, room);
    let b = ProcessProxy::start(&redis, &origin, room);
    let mut holder = Visitor::new(&a.base);
    assert!(holder.get("/").await.reached_origin());
    let mut waiters = Vec::new();
    for _ in 0..3 {
        let mut w = Visitor::new(&b.base);
        assert!(!w.get("/").await.reached_origin());
        waiters.push(w);
    }
    eventually("one instance leads", || async {
        a.state().await["leader"].is_string()
    })
    .await;
    let (mut leader, survivor) = if a.state().await["is_leader"] == true {
        (a, b)
    } else {
        (b, a)
    };
    // Killed like a crash: no chance to resign the lock.
    leader.kill();
    let killed_at = Instant::now();
    let mut took_over = false;
    while killed_at.elapsed() < Duration::from_secs(5) {
        if survivor.state().await["is_leader"] == true {
            took_over = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(took_over, "no takeover within 5 s of a 1 s lock");
    assert_eq!(survivor.state().await["admitted_total"], 1);

    let mut holder_here = Visitor::new(&survivor.base);
    holder_here.cookie = holder.cookie.take();
    holder_here.leave().await;
    for (i, w) in waiters.iter_mut().enumerate() {
        let mut on = Visitor::new(&survivor.base);
        on.cookie = w.cookie.clone();
        let started = Instant::now();
        while !on.get("/").await.reached_origin() {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "waiter {i} stalled"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        on.leave().await;
    }
    let state = survivor.state().await;
    assert_eq!(state["admitted_total"], 4, "holder + 3 waiters, none twice");
    assert_eq!(state["queue_length"], 0);
    assert_eq!(state["occupancy"], 0);
}

async fn position(proxy: &TestProxy, v: &mut Visitor) -> serde_json::Value {
    let mut on = Visitor::new(&proxy.base);
    on.cookie = v.cookie.clone();
    let status = on.get("/__waitroom/status").await.json();
    v.cookie = on.cookie;
    status["waitroom"]["position"].clone()
}

async fn ready(proxy: &TestProxy) -> u16 {
    reqwest::get(format!("{}/readyz", proxy.admin))
        .await
        .unwrap()
        .status()
        .as_u16()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_losing_its_data_loses_nobody_their_place_or_pass() {
    let mut redis = RedisServer::start();
    let proxies = instances(
        2,
        &redis,
        "total_active_users = 1\nnew_users_per_minute = 100000\nsession_duration = \"3s\"",
        "",
    );
    let (a, b) = (&proxies[0], &proxies[1]);
    let mut inside = a.visitor();
    assert!(inside.get("/").await.reached_origin());
    let mut first = a.visitor();
    first.get("/").await;
    let mut second = b.visitor();
    second.get("/").await;
    assert_eq!(position(b, &mut second).await, 2);

    redis.restart();
    for p in [a, b] {
        eventually("the store answers again", || async {
            ready(p).await == 200
        })
        .await;
    }
    // Past a tenth of the session, so the next request renews the pass.
    tokio::time::sleep(Duration::from_millis(400)).await;
    // The admitted visitor keeps going; its renewal registers the pass again.
    assert!(admitted_on(a, &mut inside, "/").await);
    // Places come back from the tickets, in their original order, whoever returns first.
    assert_eq!(position(b, &mut second).await, 1);
    assert_eq!(position(a, &mut first).await, 1);
    assert_eq!(position(b, &mut second).await, 2);
    let mut late = b.visitor();
    late.get("/").await;
    assert_eq!(position(a, &mut late).await, 3);
    let state = a.state().await;
    assert_eq!(state["queue_length"], 3);
    assert_eq!(state["passes"], 1, "the live pass registered again");

    // Once the holder leaves, the room fills again in order (after the post-loss pause).
    let mut leaving = Visitor::new(&a.base);
    leaving.cookie = inside.cookie.clone();
    leaving.leave().await;
    for (i, v) in [&mut first, &mut second, &mut late].into_iter().enumerate() {
        let started = Instant::now();
        while !admitted_on(&proxies[i % 2], v, "/").await {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "visitor {i} stalled"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let mut out = Visitor::new(&a.base);
        out.cookie = v.cookie.clone();
        out.leave().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_restart_with_its_data_changes_nothing() {
    let mut redis = RedisServer::start_persistent();
    let proxies = instances(
        2,
        &redis,
        "total_active_users = 1\nnew_users_per_minute = 100000",
        "",
    );
    let (a, b) = (&proxies[0], &proxies[1]);
    let mut inside = a.visitor();
    assert!(inside.get("/").await.reached_origin());
    let mut first = b.visitor();
    first.get("/").await;
    let mut second = a.visitor();
    second.get("/").await;
    redis.restart();
    for p in [a, b] {
        eventually("the store answers again", || async {
            ready(p).await == 200
        })
        .await;
    }
    assert!(admitted_on(b, &mut inside, "/").await);
    assert_eq!(position(a, &mut second).await, 2);
    assert_eq!(position(b, &mut first).await, 1);
    inside.leave().await;
    let started = Instant::now();
    while !admitted_on(a, &mut first, "/").await {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "no pause (of a session: 5 minutes) without a loss"
        );
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_outage_is_survived_closed_or_open_and_recovered_without_restart() {
    let mut redis = RedisServer::start_persistent();
    let origin = StubOrigin::start();
    let room = "total_active_users = 1\nnew_users_per_minute = 100000";
    // The per-address limit at its defaults: its check fails with Redis too, and must not keep
    // anyone out.
    let limited =
        |store_extra: &str| format!("{}\n[rate_limit]\n", redis_section(&redis, store_extra));
    let closed = TestProxy::start_real_time(&origin, room, &limited(""));
    let open = TestProxy::start_real_time(&origin, room, &limited("on_error = \"open\""));
    // Lines before the first section header belong to [admin].
    let strict = TestProxy::start_real_time(
        &origin,
        room,
        &format!("ready_requires_store = true\n{}", limited("")),
    );
    let mut inside = closed.visitor();
    assert!(inside.get("/").await.reached_origin());
    let mut waiting = closed.visitor();
    waiting.get("/").await;
    assert_eq!(ready(&closed).await, 200);

    redis.kill();
    assert!(
        inside.get("/").await.reached_origin(),
        "a valid pass keeps going"
    );
    let kept = waiting.get("/").await;
    assert!(!kept.reached_origin());
    assert_eq!(kept.status, 200);
    assert!(
        kept.body.contains("Test drop"),
        "the waiting page, not an error"
    );
    let mut newcomer = closed.visitor();
    let queued = newcomer.get("/").await;
    assert!(!queued.reached_origin(), "closed: new visitors queue");
    assert!(
        newcomer.cookie.is_some(),
        "with a ticket holding their arrival"
    );
    assert!(
        open.visitor().get("/").await.reached_origin(),
        "open: new visitors pass"
    );
    // Still ready: pass holders are served and newcomers queue; with one shared store, failing
    // readiness would take every instance out of the load balancer at once.
    assert_eq!(ready(&closed).await, 200);
    let verbose = reqwest::get(format!("{}/readyz?verbose", closed.admin))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(verbose.starts_with("[+]store failed: "), "{verbose}");
    assert!(verbose.ends_with("readyz check passed\n"), "{verbose}");
    assert_eq!(
        ready(&strict).await,
        503,
        "ready_requires_store: unready without the store"
    );
    let metrics = closed.metrics().await;
    assert!(
        metrics.contains("waitroom_store_up{room=\"test-room\"} 0"),
        "{metrics}"
    );

    redis.restart();
    eventually("the store comes back by itself", || async {
        closed
            .metrics()
            .await
            .contains("waitroom_store_up{room=\"test-room\"} 1")
    })
    .await;
    eventually("the strict instance is ready again", || async {
        ready(&strict).await == 200
    })
    .await;
    assert_eq!(position(&closed, &mut waiting).await, 1);
    assert_eq!(
        position(&closed, &mut newcomer).await,
        2,
        "the ticket issued during the outage is placed by its arrival"
    );
    assert!(inside.get("/").await.reached_origin());
}

/// Calls of one command in Redis's INFO commandstats.
fn calls(redis: &RedisServer, command: &str) -> u64 {
    let info = redis.command(&["INFO", "commandstats"]);
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("cmdstat_{command}:calls=")))
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn polls_rarely_reach_redis() {
    let redis = RedisServer::start();
    // A slow loop, so that what is counted is the poll path alone.
    let proxy = instances(
        1,
        &redis,
        "total_active_users = 1\nnew_users_per_minute = 100\nadmission_interval = \"1h\"\nabandon_after = \"6s\"",
        "",
    )
    .remove(0);
    // For an abandon_after after a store epoch first appears every poll is exact (returning
    // tickets may still take places ahead); the cheap path is for the steady state after.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let mut inside = proxy.visitor();
    assert!(inside.get("/").await.reached_origin());
    let mut line = Vec::new();
    for _ in 0..50 {
        let mut v = proxy.visitor();
        v.get("/").await;
        line.push(v);
    }
    let before = calls(&redis, "evalsha") + calls(&redis, "eval");
    let mut polls = 0;
    for _ in 0..10 {
        for (i, v) in line.iter_mut().enumerate() {
            let status = v.get_json("/").await.json();
            assert_eq!(status["waitroom"]["position"], i + 1);
            polls += 1;
        }
    }
    let scripts = calls(&redis, "evalsha") + calls(&redis, "eval") - before;
    let per_poll = scripts as f64 / polls as f64;
    assert!(per_poll <= 0.2, "{scripts} script calls for {polls} polls");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shuffled_prequeue_across_two_instances_stands_in_random_order() {
    use waitroom::clock::{Clock, SystemClock, rfc3339_ms};
    let redis = RedisServer::start();
    let now = SystemClock.now_ms();
    // Room for two instances to start on a busy machine before the pre-queue ends.
    let start = now + 10_000;
    // One admission at the start (capacity 1, one token), so the places stay put to be read.
    let room = format!(
        "total_active_users = 100\nnew_users_per_minute = 6000\nburst = 1\n\
         [[room.events]]\nname = \"drop\"\nprequeue_start_time = \"{}\"\n\
         event_start_time = \"{}\"\nevent_end_time = \"{}\"\nshuffle_at_event_start = true\n\
         total_active_users = 1\nnew_users_per_minute = 1\n",
        rfc3339_ms(now - 1_000),
        rfc3339_ms(start),
        rfc3339_ms(now + 3_600_000),
    );
    let proxies = instances(2, &redis, &room, "");
    let mut early = Vec::new();
    for i in 0..60 {
        let mut v = proxies[i % 2].visitor();
        let json = v.get_json("/").await.json();
        assert_eq!(json["cfWaitingRoom"]["isEventPrequeueing"], true);
        assert_eq!(json["waitroom"]["position"], serde_json::Value::Null);
        early.push(v);
    }
    let wait = (start - SystemClock.now_ms()).max(0) as u64 + 500;
    tokio::time::sleep(Duration::from_millis(wait)).await;
    let mut late = Vec::new();
    for i in 0..3 {
        let mut v = proxies[i % 2].visitor();
        assert_eq!(
            v.get_json("/").await.json()["cfWaitingRoom"]["isEventPrequeueing"],
            false
        );
        late.push(v);
    }
    let mut standing = Vec::new();
    for (i, v) in early.iter_mut().chain(late.iter_mut()).enumerate() {
        let answer = position(&proxies[(i + 1) % 2], v).await;
        standing.push(answer.as_i64().unwrap_or(0));
    }
    let (early_standing, late_standing) = standing.split_at(60);
    let distinct: HashSet<i64> = early_standing.iter().copied().collect();
    assert_eq!(distinct.len(), 60, "{early_standing:?}");
    let last_early = early_standing.iter().max().copied().unwrap();
    assert!(
        late_standing.windows(2).all(|w| w[0] < w[1]) && late_standing[0] > last_early,
        "latecomers go behind the pre-queue: {late_standing:?} after {last_early}"
    );
    let pairs: Vec<(i64, i64)> = early_standing
        .iter()
        .enumerate()
        .map(|(arrival, at)| (arrival as i64, *at))
        .collect();
    // Independence gives tau a standard deviation of about 0.088 for 60 visitors.
    let tau = waitroom::core::fairness::kendall_tau(&pairs).unwrap();
    assert!(tau.abs() < 0.45, "tau {tau}: {early_standing:?}");
}
