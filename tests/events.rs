#![allow(clippy::unwrap_used)]
//! Drops: scheduled events with a pre-queue, the shuffle at the start, the lottery window, the
//! fairness figures and the verified-crawler bypass, over real HTTP on the memory store with a
//! driven clock. tests/proxy_redis.rs runs the shuffle on Redis.

mod common;

use std::collections::HashMap;
use std::time::Duration;

use common::proxy::{ADMIN_TOKEN, TestProxy, Visitor};
use waitroom::clock::{Clock, SystemClock, rfc3339_ms};
use waitroom::core::fairness::kendall_tau;

const MINUTE: i64 = 60_000;

/// A `[[room.events]]` table opening its pre-queue a second ago and starting in a minute.
fn event_opening_now(extra: &str) -> String {
    let now = SystemClock.now_ms();
    format!(
        "[[room.events]]\nname = \"air-max\"\nprequeue_start_time = \"{}\"\n\
         event_start_time = \"{}\"\nevent_end_time = \"{}\"\n{extra}\n",
        rfc3339_ms(now - 1_000),
        rfc3339_ms(now + MINUTE),
        rfc3339_ms(now + 60 * MINUTE),
    )
}

async fn metric(proxy: &TestProxy, name: &str) -> f64 {
    let text = proxy.metrics().await;
    text.lines()
        .find(|l| l.starts_with(name) && l[name.len()..].starts_with([' ', '{']))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in\n{text}"))
}

async fn admin(
    proxy: &TestProxy,
    method: reqwest::Method,
    path: &str,
    body: Option<serde_json::Value>,
) -> (u16, serde_json::Value) {
    let mut req = reqwest::Client::new()
        .request(method, format!("{}{path}", proxy.admin))
        .bearer_auth(ADMIN_TOKEN);
    if let Some(body) = body {
        req = req.json(&body);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(serde_json::Value::Null))
}

/// Visitors join one by one, `step` apart on the proxy's clock.
async fn join(proxy: &TestProxy, n: usize, step: Duration) -> Vec<Visitor> {
    let mut visitors = Vec::new();
    for _ in 0..n {
        let mut v = proxy.visitor();
        let first = v.get_json("/").await;
        assert_eq!(
            first.json()["cfWaitingRoom"]["inWaitingRoom"],
            true,
            "{}",
            first.body
        );
        visitors.push(v);
        proxy.clock.advance(step);
    }
    visitors
}

/// Lets the room admit round by round (`per_round` tokens a second) and answers the round in
/// which each visitor got in.
async fn admission_rounds(proxy: &TestProxy, visitors: &mut [Visitor]) -> Vec<usize> {
    let mut round_of = vec![usize::MAX; visitors.len()];
    for round in 0..visitors.len() {
        proxy.clock.advance(Duration::from_secs(1));
        proxy.tick().await;
        for (i, v) in visitors.iter_mut().enumerate() {
            if round_of[i] == usize::MAX && v.get("/").await.reached_origin() {
                round_of[i] = round;
            }
        }
        if round_of.iter().all(|r| *r != usize::MAX) {
            return round_of;
        }
    }
    panic!("not everyone got in: {round_of:?}");
}

fn tau_of(arrival_and_order: &[(i64, i64)]) -> f64 {
    kendall_tau(arrival_and_order).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prequeue_queues_everyone_then_the_event_admits_with_its_own_limits() {
    let event = event_opening_now(
        "total_active_users = 2\nnew_users_per_minute = 600\nheading = \"Air Max drop\"",
    );
    let proxy = TestProxy::start(&format!(
        "total_active_users = 100\nnew_users_per_minute = 6000\n{event}"
    ));
    // The room is empty, yet in the pre-queue nobody gets in.
    let mut visitors = join(&proxy, 3, Duration::from_millis(10)).await;
    let page = visitors[0].get("/").await;
    assert_eq!(page.status, 200);
    assert!(!page.reached_origin());
    assert!(page.body.contains("id=\"wr-countdown\""), "{}", page.body);
    assert!(page.body.contains("<h1>Air Max drop</h1>"));
    let json = visitors[1].get_json("/").await.json();
    let cf = &json["cfWaitingRoom"];
    assert_eq!(cf["isEventActive"], true);
    assert_eq!(cf["isEventPrequeueing"], true);
    assert_eq!(cf["timeUntilEventStart"], 1);
    assert_eq!(cf["timeUntilEventStartFormatted"], "1 minute");
    assert_eq!(cf["timeUntilEventEnd"], 60);
    assert_eq!(cf["shuffleAtEventStart"], false);
    assert_eq!(json["waitroom"]["position"], serde_json::Value::Null);
    assert_eq!(json["waitroom"]["event"]["phase"], "prequeue");
    let state = proxy.state().await;
    assert_eq!(state["prequeueing"], true);
    assert_eq!(state["event"], "air-max");
    assert_eq!(state["queue_length"], 3);
    assert_eq!(metric(&proxy, "waitroom_prequeueing").await, 1.0);
    proxy.clock.advance(Duration::from_secs(30));
    proxy.tick().await;
    for v in &mut visitors {
        assert!(
            !v.get("/").await.reached_origin(),
            "admitted before the start"
        );
    }

    // The start: the event's own capacity (2) holds, in the pre-queue's order (no shuffle).
    proxy.clock.advance(Duration::from_secs(31));
    proxy.tick().await;
    let mut admitted = Vec::new();
    for v in &mut visitors {
        admitted.push(v.get("/").await.reached_origin());
    }
    assert_eq!(admitted, [true, true, false]);
    let json = visitors[2].get_json("/").await.json();
    assert_eq!(json["cfWaitingRoom"]["isEventPrequeueing"], false);
    assert_eq!(json["cfWaitingRoom"]["isEventActive"], true);
    assert_eq!(json["waitroom"]["position"], 1);
    assert_eq!(proxy.state().await["total_active_users"], 2);

    // After the end the room's own settings are back.
    proxy.clock.advance(Duration::from_secs(3_600));
    proxy.tick().await;
    let state = proxy.state().await;
    assert_eq!(state["total_active_users"], 100);
    assert_eq!(state["event"], serde_json::Value::Null);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shuffled_prequeue_stands_in_random_order_at_the_start_and_latecomers_go_behind() {
    // One admission at the start (capacity 1, one token), so the places stay put to be read.
    let event = event_opening_now(
        "shuffle_at_event_start = true\ntotal_active_users = 1\nnew_users_per_minute = 1",
    );
    let proxy = TestProxy::start(&format!(
        "total_active_users = 100\nnew_users_per_minute = 6000\nburst = 1\n{event}"
    ));
    let json = proxy.visitor().get_json("/").await.json();
    assert_eq!(json["cfWaitingRoom"]["shuffleAtEventStart"], true);
    let mut early = join(&proxy, 120, Duration::from_millis(100)).await;
    proxy.clock.advance(Duration::from_secs(60));
    proxy.tick().await;
    let mut late = join(&proxy, 5, Duration::from_millis(100)).await;

    // Where each stands now: 0 for the one let in, else its exact place.
    let mut standing = Vec::new();
    for v in early.iter_mut().chain(late.iter_mut()) {
        let answer = v.get_json("/").await;
        standing.push(if answer.reached_origin() {
            0
        } else {
            answer.json()["waitroom"]["position"].as_i64().unwrap()
        });
    }
    let (early_standing, late_standing) = standing.split_at(early.len());
    let last_early = early_standing.iter().max().copied().unwrap();
    assert!(
        late_standing.windows(2).all(|w| w[0] < w[1]) && late_standing[0] > last_early,
        "latecomers go behind the pre-queue, in their order: {late_standing:?} after {last_early}"
    );
    let pairs: Vec<(i64, i64)> = early_standing
        .iter()
        .enumerate()
        .map(|(arrival, at)| (arrival as i64, *at))
        .collect();
    // Arrival order says nothing about the place: for 121 visitors tau's standard deviation
    // under independence is about 0.061.
    let tau = tau_of(&pairs);
    assert!(tau.abs() < 0.3, "tau {tau}: {early_standing:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lottery_shuffles_each_window_and_keeps_the_windows_in_order() {
    let proxy = TestProxy::start(
        "total_active_users = 1\nnew_users_per_minute = 600\nburst = 10\n\
         queueing_method = \"lottery\"\nlottery_window = \"30s\"",
    );
    // The first visitor fills the room; the others queue.
    assert!(proxy.visitor().get("/").await.reached_origin());
    let to_window = 30_000 - proxy.clock.now_ms().rem_euclid(30_000);
    proxy
        .clock
        .advance(Duration::from_millis(to_window as u64 + 1));
    let mut visitors = join(&proxy, 60, Duration::from_millis(200)).await;
    let to_window = 30_000 - proxy.clock.now_ms().rem_euclid(30_000);
    proxy
        .clock
        .advance(Duration::from_millis(to_window as u64 + 1));
    visitors.extend(join(&proxy, 30, Duration::from_millis(200)).await);

    let (status, _) = admin(
        &proxy,
        reqwest::Method::PUT,
        "/admin/config",
        Some(serde_json::json!({ "total_active_users": 1000 })),
    )
    .await;
    assert_eq!(status, 200);
    let rounds = admission_rounds(&proxy, &mut visitors).await;
    let (first, second) = rounds.split_at(60);
    assert!(
        first.iter().max() < second.iter().min(),
        "the first window is let in before the second: {rounds:?}"
    );
    for window in [first, second] {
        let pairs: Vec<(i64, i64)> = window
            .iter()
            .enumerate()
            .map(|(arrival, round)| (arrival as i64, *round as i64))
            .collect();
        // Arrival order within one window would give tau 0.75 here (ties in a round count as
        // neither); a shuffle gives about 0 with a standard deviation near 0.08.
        let tau = tau_of(&pairs);
        assert!(tau.abs() < 0.4, "tau {tau}: {window:?}");
    }
    assert!(metric(&proxy, "waitroom_order_inversions_total").await > 0.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifo_admits_in_arrival_order_with_no_inversions() {
    let proxy = TestProxy::start("total_active_users = 1\nnew_users_per_minute = 60\nburst = 1");
    assert!(proxy.visitor().get("/").await.reached_origin());
    let mut visitors = join(&proxy, 20, Duration::from_millis(100)).await;
    let (status, _) = admin(
        &proxy,
        reqwest::Method::PUT,
        "/admin/config",
        Some(serde_json::json!({ "total_active_users": 1000 })),
    )
    .await;
    assert_eq!(status, 200);
    let rounds = admission_rounds(&proxy, &mut visitors).await;
    assert!(rounds.windows(2).all(|w| w[0] <= w[1]), "{rounds:?}");
    assert_eq!(metric(&proxy, "waitroom_order_inversions_total").await, 0.0);
    assert_eq!(metric(&proxy, "waitroom_order_pairs_total").await, 190.0);
    assert_eq!(metric(&proxy, "waitroom_order_tau").await, 1.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_are_listed_added_changed_and_deleted_live() {
    let proxy = TestProxy::start("total_active_users = 100\nnew_users_per_minute = 600");
    let now = proxy.clock.now_ms();
    let at = |minutes: i64| rfc3339_ms(now + minutes * MINUTE);
    let (status, listed) = admin(&proxy, reqwest::Method::GET, "/admin/events", None).await;
    assert_eq!((status, &listed["events"]), (200, &serde_json::json!([])));

    let drop = serde_json::json!({
        "name": "drop-1",
        "prequeue_start_time": at(-1),
        "event_start_time": at(30),
        "event_end_time": at(90),
        "shuffle_at_event_start": true,
    });
    let (status, _) = admin(
        &proxy,
        reqwest::Method::POST,
        "/admin/events",
        Some(drop.clone()),
    )
    .await;
    assert_eq!(status, 201);
    // Applied at once: new visitors queue in the pre-queue of an empty room.
    let json = proxy.visitor().get_json("/").await.json();
    assert_eq!(json["cfWaitingRoom"]["isEventPrequeueing"], true);
    assert_eq!(json["cfWaitingRoom"]["timeUntilEventStart"], 30);

    // Cloudflare's rules, with errors that name the key.
    let (status, _) = admin(
        &proxy,
        reqwest::Method::POST,
        "/admin/events",
        Some(drop.clone()),
    )
    .await;
    assert_eq!(status, 409, "same name twice");
    for (refused, needle) in [
        (
            serde_json::json!({ "name": "drop-2", "event_start_time": at(60), "event_end_time": at(120) }),
            "overlaps",
        ),
        (
            serde_json::json!({ "name": "drop-3", "event_start_time": at(200), "event_end_time": at(100) }),
            "event_end_time",
        ),
        (
            serde_json::json!({ "name": "x", "event_start_time": "tomorrow", "event_end_time": at(5) }),
            "RFC 3339",
        ),
        (
            serde_json::json!({ "name": "x", "event_start_time": at(300), "event_end_time": at(400), "total_active_users": 5 }),
            "together",
        ),
    ] {
        let (status, body) = admin(
            &proxy,
            reqwest::Method::POST,
            "/admin/events",
            Some(refused),
        )
        .await;
        assert_eq!(status, 400, "{body}");
        assert!(
            body["error"].as_str().unwrap().contains(needle),
            "{needle}: {body}"
        );
    }

    // Suspending it lets the room's own settings govern again.
    let (status, changed) = admin(
        &proxy,
        reqwest::Method::PUT,
        "/admin/events/drop-1",
        Some(serde_json::json!({ "suspended": true })),
    )
    .await;
    assert_eq!(
        (status, &changed["suspended"]),
        (200, &serde_json::json!(true))
    );
    // A newcomer is let in: at once, or, when the admission loop has just called the visitor
    // pre-queued above (taking the bucket's token on the test's clock), at a later round once
    // the clock has moved. A pre-queue still in force would hold it for 30 minutes.
    let mut newcomer = proxy.visitor();
    let mut let_in = false;
    for _ in 0..20 {
        if newcomer.get("/").await.reached_origin() {
            let_in = true;
            break;
        }
        proxy.clock.advance(Duration::from_secs(1));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(let_in, "the suspended event still holds newcomers");
    let (status, listed) = admin(&proxy, reqwest::Method::GET, "/admin/events", None).await;
    assert_eq!(status, 200);
    assert_eq!(listed["events"][0]["name"], "drop-1");
    assert_eq!(listed["current"], serde_json::Value::Null);

    let (status, _) = admin(
        &proxy,
        reqwest::Method::DELETE,
        "/admin/events/drop-1",
        None,
    )
    .await;
    assert_eq!(status, 200);
    let (status, _) = admin(
        &proxy,
        reqwest::Method::DELETE,
        "/admin/events/drop-1",
        None,
    )
    .await;
    assert_eq!(status, 404);
    let (_, listed) = admin(&proxy, reqwest::Method::GET, "/admin/events", None).await;
    assert_eq!(listed["events"], serde_json::json!([]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verified_crawlers_skip_the_room_and_forged_ones_queue() {
    let origin = common::origin::StubOrigin::start();
    let proxy = TestProxy::start_sections(
        origin.addr,
        origin,
        common::proxy::Sections {
            listen: "trusted_proxies = [\"127.0.0.1\"]",
            room: "total_active_users = 1\nnew_users_per_minute = 600\nbypass_verified_crawlers = true",
            ..Default::default()
        },
    );
    assert!(
        proxy.visitor().get("/").await.reached_origin(),
        "fills the room"
    );
    let googlebot = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)";
    let client = reqwest::Client::new();
    let ask = |from: &'static str, agent: &'static str| {
        client
            .get(format!("{}/shoes", proxy.base))
            .header("x-forwarded-for", from)
            .header("user-agent", agent)
            .send()
    };
    let crawler = ask("66.249.66.1", googlebot)
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(crawler.starts_with("origin:"), "{crawler}");
    let forged = ask("203.0.113.7", googlebot)
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(!forged.starts_with("origin:"), "a forged crawler queues");
    let counts: HashMap<&str, u64> = [("occupancy", 1), ("queue_length", 1)].into();
    let state = proxy.state().await;
    for (key, value) in counts {
        assert_eq!(state[key], value, "{key}: the crawler is not counted");
    }
}
