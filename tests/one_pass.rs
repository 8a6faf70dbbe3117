#![allow(clippy::unwrap_used)]
//! One person, one place, one pass (issue 22, items 1, 2 and 5), played as a scalper would
//! against the real proxy in front of a recording origin, on the memory store and on two proxies
//! sharing a real Redis: a pass copied to other networks, a pass shared by a farm behind one
//! address, one pass's requests spread over two proxies, a called ticket cloned before its call,
//! a room with space taken by plain requests from one address, and the ticket of a revoked pass. Every visitor reaches the proxy from
//! 127.0.0.1, which the proxy trusts as a balancer: `X-Forwarded-For` says which network a
//! visitor is on. Judged by what the origin received.

mod common;

use std::time::{Duration, Instant};

use common::origin::StubOrigin;
use common::proxy::{Sections, TestProxy, Visitor, eventually};
use common::redis_server::RedisServer;

const BEHIND_A_BALANCER: &str = "trusted_proxies = [\"127.0.0.1\"]";

fn requests_for(origin: &StubOrigin, path: &str) -> usize {
    origin
        .requests()
        .iter()
        .filter(|(p, _)| p.as_str() == path)
        .count()
}

fn visitor_on(base: &str, network: &str, cookie: Option<String>) -> Visitor {
    let mut v = Visitor::new(base);
    v.forwarded_for = Some(network.to_owned());
    v.cookie = cookie;
    v
}

fn memory_proxy(room: &str, pass: &str, rest: &str) -> TestProxy {
    let origin = StubOrigin::start();
    TestProxy::start_sections(
        origin.addr,
        origin,
        Sections {
            listen: BEHIND_A_BALANCER,
            room,
            pass,
            rest,
            ..Sections::default()
        },
    )
}

fn redis_proxies(redis: &RedisServer, room: &str, pass: &str, rest: &str) -> Vec<TestProxy> {
    let sections = Sections {
        listen: BEHIND_A_BALANCER,
        room,
        pass,
        rest,
        ..Sections::default()
    };
    TestProxy::sharing_redis(2, &redis.url(), sections)
}

/// A pass used from a fourth network is revoked on every proxy: its holders are told why (403,
/// page and JSON, cookie cleared), and the origin sees none of their requests after that.
async fn a_pass_copied_to_other_networks_is_revoked_everywhere(proxies: &[TestProxy]) {
    let origin = &proxies[0].origin;
    let base = |i: usize| proxies[i % proxies.len()].base.as_str();
    let mut owner = visitor_on(base(0), "198.51.100.7", None);
    assert!(owner.get("/drop").await.reached_origin());
    let pass = owner.cookie.clone().unwrap();
    // The same person on a second address of the same /24, then on mobile data and another
    // Wi-Fi: three networks, still one person.
    for (i, network) in ["198.51.100.200", "203.0.113.5", "2001:db8:1:2::9"]
        .into_iter()
        .enumerate()
    {
        let mut same = visitor_on(base(i + 1), network, Some(pass.clone()));
        assert!(same.get("/drop").await.reached_origin(), "{network}");
    }
    let served = requests_for(origin, "/drop");
    assert_eq!(served, 4);
    // The fourth network: a copy handed to someone else.
    let mut clone = visitor_on(base(0), "192.0.2.44", Some(pass.clone()));
    let refused = clone.get_json("/drop").await;
    assert_eq!(refused.status, 403, "{}", refused.body);
    assert_eq!(refused.json()["reason"], "shared");
    assert!(
        refused
            .set_cookies()
            .iter()
            .any(|c| c.starts_with("waitroom=;") || c.contains("Max-Age=0")),
        "the cookie is cleared: {:?}",
        refused.set_cookies()
    );
    // Every holder is refused from now on, on every proxy, page and JSON alike.
    for i in 0..proxies.len() {
        let mut holder = visitor_on(base(i), "198.51.100.7", Some(pass.clone()));
        let told = refused_403(&holder, "/drop", false).await;
        assert!(told.body.contains("too many places"), "{}", told.body);
        assert_eq!(
            holder.get_json("/other").await.json()["error"],
            "pass_revoked"
        );
    }
    assert_eq!(
        requests_for(origin, "/drop"),
        served,
        "nothing more reached the origin"
    );
    assert_eq!(requests_for(origin, "/other"), 0);
    let mut shared = 0;
    for proxy in proxies {
        shared += counter(&proxy.metrics().await, "waitroom_passes_shared_total");
    }
    assert_eq!(shared, 1);
}

/// The answer once `visitor` (its cookie unchanged) is refused with 403 there: a revocation
/// reaches the other proxies within a second.
async fn refused_403(visitor: &Visitor, path: &str, json: bool) -> common::proxy::Answer {
    let mut last = None;
    for _ in 0..100 {
        let mut v = visitor.clone();
        let answer = if json {
            v.get_json(path).await
        } else {
            v.get(path).await
        };
        if answer.status == 403 {
            return answer;
        }
        last = Some((answer.status, answer.body));
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    panic!("never refused at {path}: {last:?}");
}

/// The value of a room-labelled counter in a proxy's /metrics text.
fn counter(text: &str, name: &str) -> u64 {
    text.lines()
        .find(|l| l.starts_with(name) && l.contains("room=\"test-room\""))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse::<f64>().ok())
        .map_or(0, |v| v as u64)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pass_copied_to_other_networks_is_revoked_on_memory() {
    let proxy = memory_proxy("total_active_users = 1\nnew_users_per_minute = 600", "", "");
    a_pass_copied_to_other_networks_is_revoked_everywhere(std::slice::from_ref(&proxy)).await;
    // The room is free again: the shared pass no longer holds the place.
    let mut next = visitor_on(&proxy.base, "198.18.0.1", None);
    assert!(next.get("/next").await.reached_origin());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pass_copied_to_other_networks_is_revoked_across_redis_proxies() {
    let redis = RedisServer::start();
    let proxies = redis_proxies(
        &redis,
        "total_active_users = 1\nnew_users_per_minute = 600",
        "",
        "",
    );
    a_pass_copied_to_other_networks_is_revoked_everywhere(&proxies).await;
}

/// Thirty clones of one pass behind one address, all at once: the origin serves what one person
/// may ask in a minute, the rest get 429 with Retry-After. The pass itself is not revoked.
async fn a_farm_behind_one_address_is_held_to_the_pass_rate(proxies: &[TestProxy]) {
    let origin = &proxies[0].origin;
    let mut owner = visitor_on(&proxies[0].base, "198.51.100.7", None);
    assert!(owner.get("/drop").await.reached_origin());
    let pass = owner.cookie.clone().unwrap();
    let mut clones = Vec::new();
    for i in 0..30 {
        let base = proxies[i % proxies.len()].base.clone();
        let pass = pass.clone();
        clones.push(tokio::spawn(async move {
            let mut clone = visitor_on(&base, "198.51.100.7", Some(pass));
            clone.get("/drop").await
        }));
    }
    let mut limited = 0;
    for clone in clones {
        let answer = clone.await.unwrap();
        if answer.status == 429 {
            limited += 1;
            // A proxy that served its share before it heard of the other's owes that share too.
            let retry: u64 = answer.header("retry-after").unwrap().parse().unwrap();
            assert!(
                (1..=60 * proxies.len() as u64 + 6).contains(&retry),
                "{retry}"
            );
        } else {
            assert!(
                answer.reached_origin(),
                "{}: {}",
                answer.status,
                answer.body
            );
        }
    }
    // 10 a minute per pass: the owner's request and 9 clones. All at once, each proxy may serve
    // its own 10 before the loop's next tick tells it what the other served (the lag); over
    // time the proxies share one budget (`one_pass_has_one_budget_across_redis_proxies`).
    let served = requests_for(origin, "/drop");
    assert!(
        (10..=10 * proxies.len()).contains(&served),
        "{served} served, {limited} limited"
    );
    assert_eq!(limited, 31 - served);
    let json = visitor_on(&proxies[0].base, "198.51.100.7", Some(pass))
        .get_json("/drop")
        .await;
    assert_eq!(json.status, 429);
    assert_eq!(json.json()["reason"], "pass_rate");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_farm_behind_one_address_is_held_to_the_pass_rate_on_memory() {
    let proxy = memory_proxy(
        "total_active_users = 1\nnew_users_per_minute = 600",
        "max_requests_per_minute = 10",
        "",
    );
    a_farm_behind_one_address_is_held_to_the_pass_rate(std::slice::from_ref(&proxy)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_farm_behind_one_address_is_held_to_the_pass_rate_on_redis() {
    let redis = RedisServer::start();
    let proxies = redis_proxies(
        &redis,
        "total_active_users = 1\nnew_users_per_minute = 600",
        "max_requests_per_minute = 10",
        "",
    );
    a_farm_behind_one_address_is_held_to_the_pass_rate(&proxies).await;
}

/// Every pass holder's request the proxies have reported to the Redis at `redis` so far (the sum
/// over the minutes kept).
fn reported_uses(redis: &RedisServer) -> u64 {
    let sum = "local n = 0 for _, k in ipairs(redis.call('KEYS', ARGV[1])) do \
               for _, v in ipairs(redis.call('HVALS', k)) do n = n + tonumber(v) end end return n";
    redis
        .command(&["EVAL", sum, "0", "wr:{test-room}:uses:*"])
        .trim()
        .trim_start_matches(':')
        .parse()
        .unwrap()
}

/// One pass's requests alternate between two proxies, much faster than its budget of 10 a
/// minute, with an honest pass's alternating beside them at 8 of its 10: the origin serves the
/// first pass one budget in all, not one per proxy, and the honest pass is never refused. Each
/// request waits until the proxy that served it has reported it to Redis (its loop's tick), so
/// what a proxy serves before it hears of the other's last request is the documented lag: one
/// request, plus one when the run crosses a minute before the second proxy's first report.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_pass_has_one_budget_across_redis_proxies() {
    const BUDGET: u64 = 10;
    let redis = RedisServer::start();
    let proxies = redis_proxies(
        &redis,
        "total_active_users = 2\nnew_users_per_minute = 600",
        &format!("max_requests_per_minute = {BUDGET}"),
        "",
    );
    let origin = &proxies[0].origin;
    let started = Instant::now();
    let mut greedy = visitor_on(&proxies[0].base, "198.51.100.7", None);
    assert!(greedy.get("/greedy").await.reached_origin());
    let mut honest = visitor_on(&proxies[1].base, "203.0.113.5", None);
    assert!(honest.get("/honest").await.reached_origin());
    let (greedy_pass, honest_pass) = (
        greedy.cookie.clone().unwrap(),
        honest.cookie.clone().unwrap(),
    );
    let mut reached = 2;
    let mut refused = 0;
    for i in 0..40 {
        let proxy = &proxies[i % 2];
        let request = |path: &str, pass: &str, network: &str| {
            let mut v = visitor_on(&proxy.base, network, Some(pass.to_owned()));
            let path = path.to_owned();
            async move { v.get(&path).await }
        };
        let answer = request("/greedy", &greedy_pass, "198.51.100.7").await;
        if answer.reached_origin() {
            reached += 1;
        } else {
            assert_eq!(answer.status, 429, "{}", answer.body);
            refused += 1;
        }
        if i % 5 == 0 && i < 35 {
            let answer = request("/honest", &honest_pass, "203.0.113.5").await;
            assert!(
                answer.reached_origin(),
                "the honest pass refused at its request {}: {} {}",
                i / 5 + 2,
                answer.status,
                answer.body
            );
            reached += 1;
        }
        eventually("the proxy's report reaches Redis", || {
            let reported = reported_uses(&redis);
            async move { reported == reached }
        })
        .await;
    }
    let honest_served = requests_for(origin, "/honest") as u64;
    assert_eq!(honest_served, 8);
    let greedy_served = requests_for(origin, "/greedy") as u64;
    // The budget refills at 10 a minute while the run lasts.
    let refilled = started.elapsed().as_secs() * BUDGET / 60 + 1;
    let lag = 2;
    assert!(
        greedy_served <= BUDGET + refilled + lag,
        "{greedy_served} served over two proxies, one budget is {BUDGET} (+{refilled} refilled)"
    );
    assert!(greedy_served >= BUDGET, "{greedy_served} served");
    assert_eq!(greedy_served + refused, 41);
}

/// Honest use keeps its pass: many tabs at once, a phone moving between networks (three), and
/// a family behind one address each with their own pass.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn honest_tabs_devices_and_network_switches_keep_their_pass() {
    let proxy = memory_proxy("total_active_users = 5\nnew_users_per_minute = 600", "", "");
    let mut phone = visitor_on(&proxy.base, "198.51.100.7", None);
    assert!(phone.get("/drop").await.reached_origin());
    let pass = phone.cookie.clone().unwrap();
    let mut tabs = Vec::new();
    for i in 0..12 {
        let base = proxy.base.clone();
        let pass = pass.clone();
        tabs.push(tokio::spawn(async move {
            let mut tab = visitor_on(&base, "198.51.100.7", Some(pass));
            tab.get(&format!("/tab/{i}")).await.reached_origin()
        }));
    }
    for tab in tabs {
        assert!(tab.await.unwrap());
    }
    for network in [
        "203.0.113.9",
        "2001:db8:77::1",
        "198.51.100.7",
        "203.0.113.10",
    ] {
        phone.forwarded_for = Some(network.to_owned());
        assert!(phone.get("/cart").await.reached_origin(), "{network}");
    }
    for member in 0..3 {
        let mut family = visitor_on(&proxy.base, "198.51.100.8", None);
        assert!(
            family
                .get(&format!("/family/{member}"))
                .await
                .reached_origin(),
            "{member}"
        );
    }
    assert_eq!(requests_for(&proxy.origin, "/cart"), 4);
}

/// A called ticket copied to other networks before its call yields one pass, held to the pass's
/// rule: the copy on a network too many revokes it, for every copy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cloned_ticket_yields_one_pass_under_the_same_rule() {
    let proxy = memory_proxy(
        "total_active_users = 1\nnew_users_per_minute = 600\nenabled_origin_commands = [\"revoke\"]",
        "max_networks = 2",
        "",
    );
    let mut occupant = visitor_on(&proxy.base, "192.0.2.1", None);
    assert!(occupant.get("/drop").await.reached_origin());
    let mut waiter = visitor_on(&proxy.base, "198.51.100.7", None);
    assert_eq!(waiter.get_json("/drop").await.status, 200);
    let ticket = waiter.cookie.clone().unwrap();
    // The occupant checks out: the origin ends its session, the waiter is called.
    assert!(occupant.get("/revoke").await.reached_origin());
    proxy.tick().await;
    let mut outcomes = Vec::new();
    for network in ["198.51.100.7", "203.0.113.5", "2001:db8:1::1"] {
        let mut copy = visitor_on(&proxy.base, network, Some(ticket.clone()));
        let answer = copy.get("/drop").await;
        outcomes.push((network, answer.status, answer.reached_origin()));
    }
    assert_eq!(
        outcomes,
        vec![
            ("198.51.100.7", 200, true),
            ("203.0.113.5", 200, true),
            ("2001:db8:1::1", 403, false)
        ]
    );
    let mut again = visitor_on(&proxy.base, "198.51.100.7", Some(ticket));
    assert_eq!(again.get("/drop").await.status, 403, "the first copy too");
    assert_eq!(requests_for(&proxy.origin, "/drop"), 3);
}

/// A room with space is not taken by one address's plain requests: each direct admission is a
/// new place from the address, counted like a ticket.
async fn one_address_gets_one_new_place_a_minute(proxies: &[TestProxy]) {
    let origin = &proxies[0].origin;
    let mut statuses = Vec::new();
    for i in 0..7 {
        let mut bot = visitor_on(&proxies[i % proxies.len()].base, "198.51.100.7", None);
        statuses.push(bot.get("/drop").await.status);
    }
    assert_eq!(requests_for(origin, "/drop"), 1, "{statuses:?}");
    assert_eq!(statuses.iter().filter(|s| **s == 429).count(), 6);
    // Someone else still finds the room open.
    let mut honest = visitor_on(&proxies[0].base, "203.0.113.5", None);
    assert!(honest.get("/drop").await.reached_origin());
}

const ONE_A_MINUTE: &str =
    "[rate_limit]\ntickets_per_ip_per_minute = 1\nburst = 1\nmax_live_tickets_per_ip = 1";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_address_cannot_take_a_room_with_space_on_memory() {
    let proxy = memory_proxy(
        "total_active_users = 5\nnew_users_per_minute = 600",
        "",
        ONE_A_MINUTE,
    );
    one_address_gets_one_new_place_a_minute(std::slice::from_ref(&proxy)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_address_cannot_take_a_room_with_space_across_redis_proxies() {
    let redis = RedisServer::start();
    let proxies = redis_proxies(
        &redis,
        "total_active_users = 5\nnew_users_per_minute = 600",
        "",
        ONE_A_MINUTE,
    );
    one_address_gets_one_new_place_a_minute(&proxies).await;
}

const ONE_NETWORK_ROOM: &str =
    "total_active_users = 1\nnew_users_per_minute = 600\nsession_duration = \"2m\"";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ticket_of_a_pass_revoked_for_sharing_is_refused_on_memory() {
    let proxy = memory_proxy(ONE_NETWORK_ROOM, "max_networks = 1", "");
    the_ticket_of_a_pass_revoked_for_sharing_is_refused_too(std::slice::from_ref(&proxy)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ticket_of_a_pass_revoked_for_sharing_is_refused_across_redis_proxies() {
    let redis = RedisServer::start();
    let proxies = redis_proxies(&redis, ONE_NETWORK_ROOM, "max_networks = 1", "");
    the_ticket_of_a_pass_revoked_for_sharing_is_refused_too(&proxies).await;
}

/// The ticket a shared pass came from (kept by the farm) is refused like the pass: no place in
/// line under the revoked visitor's id, on any proxy.
async fn the_ticket_of_a_pass_revoked_for_sharing_is_refused_too(proxies: &[TestProxy]) {
    let mut occupant = visitor_on(&proxies[0].base, "192.0.2.1", None);
    assert!(occupant.get("/drop").await.reached_origin());
    let mut waiter = visitor_on(&proxies[0].base, "198.51.100.7", None);
    assert_eq!(waiter.get_json("/drop").await.status, 200);
    let ticket = waiter.cookie.clone().unwrap();
    assert!(occupant.leave().await.status == 200);
    eventually("the waiter is called and claims its pass", || {
        let mut w = waiter.clone();
        async move { w.get("/drop").await.reached_origin() }
    })
    .await;
    // The pass used from a second network: revoked.
    let mut copy = visitor_on(
        &proxies[1 % proxies.len()].base,
        "203.0.113.5",
        Some(ticket.clone()),
    );
    assert_eq!(copy.get("/drop").await.status, 403);
    for proxy in proxies {
        let mut replay = visitor_on(&proxy.base, "198.51.100.7", Some(ticket.clone()));
        refused_403(&replay, "/__waitroom/status", true).await;
        assert_eq!(replay.get("/drop").await.status, 403);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(requests_for(&proxies[0].origin, "/drop"), 2);
}
