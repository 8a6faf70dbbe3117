#![allow(clippy::unwrap_used)]
//! The per-address limit on new tickets over HTTP, on the memory store (driven clock) and on a
//! real Redis shared by two instances (real time). Visitors' addresses come from X-Forwarded-For,
//! believed because the proxies trust 127.0.0.1.

mod common;

use std::time::{Duration, Instant};

use common::origin::StubOrigin;
use common::proxy::{Answer, Sections, TestProxy, Visitor};
use common::redis_server::RedisServer;

const TRUST_LOOPBACK: &str = "trusted_proxies = [\"127.0.0.1\"]";
const FLOODER: &str = "203.0.113.66";

/// A new visitor from `address`, sharing `base`'s HTTP client (building one per visitor would
/// cost more than the requests).
fn from(base: &Visitor, address: &str) -> Visitor {
    let mut v = base.clone();
    v.cookie = None;
    v.forwarded_for = Some(address.to_owned());
    v
}

fn memory_proxy(room: &str, rate_limit: &str) -> TestProxy {
    let origin = StubOrigin::start();
    TestProxy::start_sections(
        origin.addr,
        origin.clone(),
        Sections {
            listen: TRUST_LOOPBACK,
            room,
            rest: rate_limit,
            ..Sections::default()
        },
    )
}

/// A ticket: the waiting answer with the room's cookie.
fn got_ticket(answer: &Answer) -> bool {
    answer.status == 200
        && !answer.reached_origin()
        && answer
            .set_cookies()
            .iter()
            .any(|c| c.starts_with("waitroom="))
}

fn retry_after(answer: &Answer) -> u64 {
    answer.header("retry-after").unwrap().parse().unwrap()
}

async fn metric(proxy: &TestProxy, series: &str) -> u64 {
    let text = proxy.metrics().await;
    text.lines()
        .find_map(|l| l.strip_prefix(series))
        .map_or(0, |v| v.trim().parse().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_address_flooding_is_held_to_its_rate_while_others_keep_their_pace() {
    let (per_minute, burst) = (30, 10);
    let proxy = memory_proxy(
        "total_active_users = 1\nnew_users_per_minute = 60\nqueue_all = true",
        &format!(
            "[rate_limit]\ntickets_per_ip_per_minute = {per_minute}\nburst = {burst}\n\
             max_live_tickets_per_ip = 0"
        ),
    );
    let base = proxy.visitor();
    let (mut flood_tickets, mut flood_refused, mut others) = (0, 0, 0);
    let mut waiting = Vec::new();
    // A simulated minute in steps of half a second: each step the flood asks five times at once
    // (no cookie: a new ticket every time), and one visitor from another address arrives.
    for step in 0..120 {
        let asks: Vec<_> = (0..5)
            .map(|k| {
                let mut v = from(&base, FLOODER);
                tokio::spawn(async move {
                    if k % 2 == 0 {
                        v.get_json("/drop").await
                    } else {
                        v.get("/drop").await
                    }
                })
            })
            .collect();
        let mut newcomer = from(&base, &format!("198.51.{}.{}", step / 200, step % 200));
        let arrived = newcomer.get("/drop").await;
        assert!(got_ticket(&arrived), "step {step}: {}", arrived.status);
        others += 1;
        waiting.push(newcomer);
        for ask in asks {
            let answer = ask.await.unwrap();
            if got_ticket(&answer) {
                flood_tickets += 1;
            } else {
                assert_eq!(answer.status, 429, "{}", answer.body);
                // One token every two seconds.
                assert!((1..=2).contains(&retry_after(&answer)));
                flood_refused += 1;
            }
        }
        proxy.clock.advance(Duration::from_millis(500));
    }
    // The burst, then one token per two seconds over the 59.5 s after the first step.
    assert_eq!(flood_tickets, burst + 29);
    assert_eq!(flood_refused, 600 - flood_tickets);
    println!("flood: {flood_tickets} tickets and {flood_refused} refusals in one minute");
    // Visitors already in line keep polling, whatever their address's budget.
    for v in waiting.iter_mut().take(10) {
        assert_eq!(v.get_json("/drop").await.status, 200);
    }
    assert_eq!(
        proxy.state().await["queue_length"],
        flood_tickets + others,
        "no ticket without a place, no place without a ticket"
    );
    assert_eq!(
        metric(
            &proxy,
            "waitroom_tickets_refused_total{reason=\"rate\",room=\"test-room\"}"
        )
        .await,
        flood_refused
    );
    assert_eq!(
        metric(
            &proxy,
            "waitroom_requests_total{outcome=\"limited\",room=\"test-room\"}"
        )
        .await,
        flood_refused
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_status_endpoint_is_held_to_the_same_limit() {
    let burst = 3;
    let proxy = memory_proxy(
        "total_active_users = 1\nnew_users_per_minute = 60\nqueue_all = true",
        &format!(
            "[rate_limit]\ntickets_per_ip_per_minute = 60\nburst = {burst}\n\
             max_live_tickets_per_ip = 0"
        ),
    );
    let base = proxy.visitor();
    // A JSON client without a cookie gets its ticket from /__waitroom/status: a flood of them
    // from one address meets the same budget as the protected route.
    let mut tickets = 0;
    for _ in 0..10 {
        let answer = from(&base, FLOODER).get("/__waitroom/status").await;
        if got_ticket(&answer) {
            tickets += 1;
        } else {
            assert_eq!(answer.status, 429, "{}", answer.body);
        }
    }
    assert_eq!(tickets, burst);
    assert!(got_ticket(
        &from(&base, "198.51.100.7").get("/__waitroom/status").await
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_live_cap_holds_and_frees_when_tickets_leave_or_are_let_in() {
    let proxy = memory_proxy(
        "total_active_users = 1\nnew_users_per_minute = 100",
        "[rate_limit]\ntickets_per_ip_per_minute = 0\nmax_live_tickets_per_ip = 3",
    );
    let base = proxy.visitor();
    let office = "192.0.2.10";
    let mut inside = from(&base, office);
    assert!(
        inside.get("/").await.reached_origin(),
        "let in at once while the room has space: a new place, but no ticket in line"
    );
    // A pass given at once counts toward the cap only while its claim could still be joining
    // the line (2 s), never after: it does not wait.
    proxy.clock.advance(std::time::Duration::from_secs(3));
    let mut line = Vec::new();
    for _ in 0..3 {
        let mut v = from(&base, office);
        assert!(got_ticket(&v.get_json("/").await));
        line.push(v);
    }
    let refused = from(&base, office).get_json("/").await;
    assert_eq!(refused.status, 429);
    assert_eq!(refused.json()["reason"], "live");
    assert_eq!(
        retry_after(&refused),
        2,
        "asks again at the refresh interval"
    );
    assert!(refused.set_cookies().is_empty(), "no ticket");
    let page = from(&base, office).get("/").await;
    assert_eq!(page.status, 429);
    assert!(page.body.contains("Too many visitors from your network"));
    assert_eq!(page.header("refresh"), Some("2"));
    assert!(
        got_ticket(&from(&base, "192.0.2.11").get("/").await),
        "the next address is not concerned"
    );
    for v in &mut line {
        assert_eq!(
            v.get_json("/").await.status,
            200,
            "tickets held keep polling"
        );
    }

    // One leaves: its place in the cap frees.
    line.remove(2).leave().await;
    proxy.clock.advance(Duration::from_secs(2));
    let mut fourth = from(&base, office);
    assert!(got_ticket(&fourth.get_json("/").await));
    line.push(fourth);
    assert_eq!(from(&base, office).get_json("/").await.status, 429);

    // The visitor inside leaves and the head of the line is let in: that frees one too.
    inside.leave().await;
    proxy.tick().await;
    assert!(line[0].get("/").await.reached_origin());
    proxy.clock.advance(Duration::from_secs(2));
    assert!(got_ticket(&from(&base, office).get_json("/").await));
    assert_eq!(from(&base, office).get_json("/").await.status, 429);
    assert_eq!(
        metric(
            &proxy,
            "waitroom_tickets_refused_total{reason=\"live\",room=\"test-room\"}"
        )
        .await,
        4
    );
}

fn redis_proxies(redis: &RedisServer, rate_limit: &str) -> Vec<TestProxy> {
    let sections = Sections {
        listen: TRUST_LOOPBACK,
        room: "total_active_users = 1\nnew_users_per_minute = 60\nqueue_all = true",
        rest: rate_limit,
        ..Sections::default()
    };
    TestProxy::sharing_redis(2, &redis.url(), sections)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_redis_two_instances_share_one_budget_per_address() {
    let redis = RedisServer::start();
    let (per_minute, burst) = (60, 5);
    let proxies = redis_proxies(
        &redis,
        &format!(
            "[rate_limit]\ntickets_per_ip_per_minute = {per_minute}\nburst = {burst}\n\
             max_live_tickets_per_ip = 500"
        ),
    );
    let on: Vec<Visitor> = proxies.iter().map(TestProxy::visitor).collect();
    let started = Instant::now();
    let run_for = Duration::from_secs(3);
    // Four flooders on one address, each request on the next instance.
    let flood: Vec<_> = (0..4)
        .map(|f| {
            let on = on.clone();
            tokio::spawn(async move {
                let (mut tickets, mut refused) = (0u64, 0u64);
                let mut i = f;
                while started.elapsed() < run_for {
                    let answer = from(&on[i % 2], FLOODER).get_json("/drop").await;
                    if got_ticket(&answer) {
                        tickets += 1;
                    } else {
                        assert_eq!(answer.status, 429, "{}", answer.body);
                        refused += 1;
                    }
                    i += 1;
                }
                (tickets, refused)
            })
        })
        .collect();
    // Meanwhile visitors from other addresses arrive at their own pace, on either instance.
    let mut others = 0u64;
    while started.elapsed() < run_for {
        let answer = from(&on[others as usize % 2], &format!("198.51.100.{others}"))
            .get("/drop")
            .await;
        assert!(got_ticket(&answer), "{}: {}", answer.status, answer.body);
        others += 1;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (mut tickets, mut refused) = (0, 0);
    for f in flood {
        let (t, r) = f.await.unwrap();
        tickets += t;
        refused += r;
    }
    let elapsed = started.elapsed().as_secs_f64();
    println!(
        "flood over two instances: {tickets} tickets, {refused} refused in {elapsed:.1} s; \
         {others} other visitors all got theirs"
    );
    // One budget for both instances: the burst plus one a second, with a second of slack for
    // the flood's last requests in flight. Two budgets would allow twice the burst.
    assert!(tickets >= burst, "{tickets}");
    assert!(
        tickets as f64 <= burst as f64 + elapsed * per_minute as f64 / 60.0 + 1.0,
        "{tickets} tickets in {elapsed:.1} s"
    );
    assert!(
        refused > tickets,
        "the flood asked for more: {refused} refused"
    );
    assert_eq!(
        proxies[0].state().await["queue_length"],
        tickets + others,
        "every ticket is a place in the one line"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_redis_the_live_cap_is_shared_and_frees_when_a_ticket_leaves() {
    let redis = RedisServer::start();
    let proxies = redis_proxies(
        &redis,
        "[rate_limit]\ntickets_per_ip_per_minute = 0\nmax_live_tickets_per_ip = 2",
    );
    let on: Vec<Visitor> = proxies.iter().map(TestProxy::visitor).collect();
    let office = "2001:db8:7:7::1";
    let mut a = from(&on[0], office);
    assert!(got_ticket(&a.get_json("/").await));
    // Another address of the same network (/56 by default), on the other instance.
    let mut b = from(&on[1], "2001:db8:7:7::2");
    assert!(got_ticket(&b.get_json("/").await));
    for p in &on {
        let refused = from(p, "2001:db8:7:7:ffff::3").get_json("/").await;
        assert_eq!(refused.status, 429);
        assert_eq!(refused.json()["reason"], "live");
    }
    assert!(got_ticket(
        &from(&on[0], "2001:db8:7:100::1").get_json("/").await
    ));
    assert_eq!(b.get_json("/").await.status, 200, "b still waits");
    a.leave().await;
    // Past the grace a claimed ticket gets to reach the line, and the once-a-second recheck.
    tokio::time::sleep(Duration::from_millis(2_100)).await;
    assert!(got_ticket(&from(&on[1], office).get_json("/").await));
    assert_eq!(from(&on[0], office).get_json("/").await.status, 429);
}
