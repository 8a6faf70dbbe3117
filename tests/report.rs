#![allow(clippy::unwrap_used)]
//! The drop report (`GET /admin/report`) on the real proxy, its clock driven: visitors let in,
//! queued, called and gone, and the report's figures, its minutes, its CSV and its HTML file
//! exactly what happened; `?event=` keeps one event's window; nobody reads it without the token;
//! two proxies on Redis report the room's line alike and their own origin traffic apart.

mod common;

use std::time::Duration;

use common::proxy::{ADMIN_TOKEN, Sections, TestProxy, Visitor, eventually};
use common::redis_server::RedisServer;
use reqwest::StatusCode;
use waitroom::clock::{Clock, Millis, rfc3339_ms};

const MINUTE: Millis = 60_000;

/// Capacity two, and a visitor who stops polling is gone after a minute.
fn start() -> TestProxy {
    TestProxy::start("total_active_users = 2\nnew_users_per_minute = 100\nabandon_after = \"1m\"")
}

async fn get(proxy: &TestProxy, path: &str) -> reqwest::Response {
    reqwest::Client::new()
        .get(format!("{}{path}", proxy.admin))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
        .unwrap()
}

async fn report(proxy: &TestProxy, query: &str) -> serde_json::Value {
    let answer = get(proxy, &format!("/admin/report{query}")).await;
    assert_eq!(answer.status(), StatusCode::OK);
    answer.json().await.unwrap()
}

/// Moves the driven clock to one second past the start of the next minute, and returns that
/// minute's start.
fn next_minute(proxy: &TestProxy) -> Millis {
    let now = proxy.clock.now_ms();
    let start = now - now.rem_euclid(MINUTE) + MINUTE;
    proxy
        .clock
        .advance(Duration::from_millis((start + 1_000 - now) as u64));
    start
}

/// Polls (and ticks) until `visitor` reaches the origin.
async fn admitted(proxy: &TestProxy, visitor: &mut Visitor) {
    for _ in 0..200 {
        proxy.tick().await;
        if visitor.get("/").await.reached_origin() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("never admitted");
}

/// The timeline's point for the minute starting at `start`.
fn minute(room: &serde_json::Value, start: Millis) -> serde_json::Value {
    let at = rfc3339_ms(start);
    room["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["minute"] == at.as_str())
        .cloned()
        .unwrap_or_else(|| panic!("no minute {at} in {room}"))
}

/// Two minutes of a small drop: minute 0, two let in at once and three in line; minute 1, the
/// one who stopped polling is dropped, a visitor leaves and the head of the line, after 70 s,
/// takes the slot. An event covers minute 1 only.
async fn a_small_drop(proxy: &TestProxy) -> (Millis, Millis) {
    proxy.tick().await;
    let m0 = next_minute(proxy);
    let m1 = m0 + MINUTE;
    let event = serde_json::json!({
        "name": "second-minute",
        "event_start_time": rfc3339_ms(m1),
        "event_end_time": rfc3339_ms(m1 + MINUTE),
    });
    let added = reqwest::Client::new()
        .post(format!("{}/admin/events", proxy.admin))
        .bearer_auth(ADMIN_TOKEN)
        .json(&event)
        .send()
        .await
        .unwrap();
    assert_eq!(
        added.status(),
        StatusCode::CREATED,
        "{}",
        added.text().await.unwrap()
    );
    let (mut first, mut second) = (proxy.visitor(), proxy.visitor());
    assert!(first.get("/").await.reached_origin());
    assert!(second.get("/").await.reached_origin());
    let mut line: Vec<Visitor> = Vec::new();
    for position in 1..=3 {
        let mut waiting = proxy.visitor();
        let page = waiting.get_json("/").await.json();
        assert_eq!(page["waitroom"]["position"], position);
        line.push(waiting);
    }
    proxy.tick().await;
    // The first two in line keep polling; the third is never heard from again.
    proxy.clock.advance(Duration::from_secs(30));
    for waiting in &mut line[..2] {
        waiting.get("/").await;
    }
    proxy.tick().await;
    proxy.clock.advance(Duration::from_secs(40));
    for waiting in &mut line[..2] {
        waiting.get("/").await;
    }
    proxy.tick().await;
    first.leave().await;
    admitted(proxy, &mut line[0]).await;
    proxy.tick().await;
    (m0, m1)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_report_counts_what_happened_minute_by_minute() {
    let proxy = start();
    let (m0, m1) = a_small_drop(&proxy).await;
    let report = report(&proxy, "").await;
    assert_eq!(report["scope"]["instances"][0], "wait", "{report}");
    // One proxy on the memory store: its own shares are the room's.
    assert_eq!(report["rooms"][0]["shares_merged"], true, "{report}");
    let room = &report["rooms"][0];
    assert_eq!(room["room"], "test-room");
    assert_eq!(room["admitted"], 3, "{room}");
    assert_eq!(room["joined"], 3);
    assert_eq!(room["abandoned"], 1);
    assert_eq!(room["peak_waiting"], 3);
    assert_eq!(room["peak_inside"], 2);
    let first = minute(room, m0);
    assert_eq!(
        (
            &first["inside"],
            &first["waiting"],
            &first["admitted"],
            &first["joined"]
        ),
        (&2.into(), &3.into(), &2.into(), &3.into()),
        "{first}"
    );
    let second = minute(room, m1);
    assert_eq!(
        (
            &second["inside"],
            &second["waiting"],
            &second["admitted"],
            &second["joined"]
        ),
        (&2.into(), &1.into(), &1.into(), &0.into()),
        "{second}"
    );
    // Arrived at m0 + 1 s, let in at m1 + 11 s: every wait is kept, so the quantiles are exact
    // (one wait: all of them are it).
    let wait = &room["wait"];
    assert_eq!(wait["admitted_from_line"], 1, "{wait}");
    for q in ["p50", "p95", "max"] {
        assert_eq!(wait[q], 70.0, "{q}: {wait}");
    }
    // The three who reached the origin, and its stub answered every one.
    assert_eq!(room["origin"]["requests"], 3, "{room}");
    assert_eq!(room["origin"]["errors"], 0);
    assert_eq!(room["origin"]["error_rate"], 0.0);
    assert!(room["origin"]["p95_seconds"].as_f64().unwrap() > 0.0);
    assert_eq!(room["revoked"]["ended"], 1, "the leaver's pass");
    assert_eq!(room["revoked"]["shared"], 0);
    assert_eq!(room["events"][0]["event"], "second-minute");
    assert_eq!(room["events"][0]["admitted"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_events_window_as_json_and_csv() {
    let proxy = start();
    let (m0, m1) = a_small_drop(&proxy).await;
    let report = report(&proxy, "?event=second-minute").await;
    let room = &report["rooms"][0];
    assert_eq!(room["minutes"], 1, "{room}");
    assert_eq!(room["timeline"].as_array().unwrap().len(), 1);
    assert_eq!(room["timeline"][0]["minute"], rfc3339_ms(m1).as_str());
    assert_eq!(
        (&room["admitted"], &room["joined"], &room["abandoned"]),
        (&1.into(), &0.into(), &1.into())
    );
    assert_eq!(room["events"].as_array().unwrap().len(), 1);
    let missing = get(&proxy, "/admin/report?event=nope").await;
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);
    let bad = get(&proxy, "/admin/report?format=pdf").await;
    assert_eq!(bad.status(), StatusCode::BAD_REQUEST);

    let csv = get(&proxy, "/admin/report?format=csv").await;
    assert_eq!(csv.status(), StatusCode::OK);
    assert!(
        csv.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/csv")
    );
    let text = csv.text().await.unwrap();
    let mut rows = text.lines();
    let header: Vec<&str> = rows.next().unwrap().split(',').collect();
    assert_eq!(
        header,
        [
            "room",
            "minute",
            "inside",
            "waiting",
            "admitted",
            "joined",
            "abandoned",
            "origin_requests",
            "origin_errors"
        ]
    );
    let rows: Vec<Vec<&str>> = rows.map(|r| r.split(',').collect()).collect();
    assert!(rows.iter().all(|r| r.len() == header.len()), "{text}");
    let row = |start: Millis| {
        rows.iter()
            .find(|r| r[1] == rfc3339_ms(start))
            .unwrap_or_else(|| panic!("no row for {start} in {text}"))
            .clone()
    };
    assert_eq!(
        row(m0)[..7],
        ["test-room", &rfc3339_ms(m0), "2", "3", "2", "3", "0"]
    );
    assert_eq!(row(m1)[2..7], ["2", "1", "1", "0", "1"]);
    let admitted: u64 = rows.iter().map(|r| r[4].parse::<u64>().unwrap()).sum();
    assert_eq!(admitted, 3);

    let one = get(&proxy, "/admin/report?format=csv&event=second-minute").await;
    let text = one.text().await.unwrap();
    assert_eq!(text.lines().count(), 2, "the header and minute 1: {text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_html_report_is_a_self_contained_download() {
    let proxy = start();
    a_small_drop(&proxy).await;
    let answer = get(&proxy, "/admin/report?format=html").await;
    assert_eq!(answer.status(), StatusCode::OK);
    let disposition = answer.headers()["content-disposition"].to_str().unwrap();
    assert!(
        disposition.starts_with("attachment; filename=\"waitroom-report-")
            && disposition.ends_with(".html\""),
        "{disposition}"
    );
    assert!(
        answer.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/html")
    );
    let html = answer.text().await.unwrap();
    for outside in ["http://", "https://", "<script", "<link", "src="] {
        assert!(!html.contains(outside), "{outside} in {html}");
    }
    assert!(html.contains("<svg"), "{html}");
    assert!(html.contains("<polyline class=\"inside\" points=\""));
    assert!(
        html.contains("<rect class=\"admitted\""),
        "admitted per minute as bars"
    );
    assert!(html.contains("Test drop (test-room)"));
    assert!(html.contains("event second-minute"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nobody_reads_the_report_without_the_token() {
    let proxy = start();
    let client = reqwest::Client::new();
    let url = format!("{}/admin/report", proxy.admin);
    let none = client.get(&url).send().await.unwrap();
    assert_eq!(none.status(), StatusCode::UNAUTHORIZED);
    let wrong = client.get(&url).bearer_auth("guess").send().await.unwrap();
    assert_eq!(wrong.status(), StatusCode::UNAUTHORIZED);
    let html = client
        .get(format!("{url}?format=html"))
        .header("cookie", "waitroom_console=made-up")
        .send()
        .await
        .unwrap();
    assert_eq!(html.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(get(&proxy, "/admin/report").await.status(), StatusCode::OK);
}

/// Two proxies sharing Redis: the line's figures are the store's, the same on both; what each
/// instance counted itself (here what reached the origin) it publishes as its shares, and each
/// report adds every instance's; with the store gone, a report still answers with its own share,
/// saying so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxies_on_redis_report_the_whole_room_each_adding_the_others_shares() {
    let mut redis = RedisServer::start();
    let proxies = TestProxy::sharing_redis(
        2,
        &redis.url(),
        Sections {
            room: "total_active_users = 10\nnew_users_per_minute = 100",
            ..Sections::default()
        },
    );
    // Each history starts at its loop's first reading: the visitors come after it.
    for proxy in &proxies {
        eventually("a first minute recorded", || async {
            report(proxy, "").await["rooms"][0]["minutes"].as_u64() >= Some(1)
        })
        .await;
    }
    for _ in 0..2 {
        assert!(proxies[0].visitor().get("/").await.reached_origin());
    }
    assert!(proxies[1].visitor().get("/").await.reached_origin());
    for proxy in &proxies {
        // The other instance publishes its share every few seconds (SHARES_EVERY_MS).
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        let room = loop {
            let report = report(proxy, "").await;
            let room = report["rooms"][0].clone();
            if room["admitted"] == 3 && room["origin"]["requests"] == 3 {
                assert_eq!(room["shares_merged"], true, "{room}");
                assert!(
                    report["scope"]["instances"]
                        .as_array()
                        .unwrap()
                        .contains(&"origin".into())
                );
                assert!(
                    report["scope"]["room"]
                        .as_array()
                        .unwrap()
                        .contains(&"admitted".into())
                );
                break room;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the three admissions and every instance's origin requests: {room}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        // The per-minute rows carry the merged origin counts too.
        let csv = get(proxy, "/admin/report?format=csv")
            .await
            .text()
            .await
            .unwrap();
        let merged: u64 = csv
            .lines()
            .skip(1)
            .filter_map(|row| row.split(',').nth(7)?.parse::<u64>().ok())
            .sum();
        assert_eq!(merged, 3, "{csv}\n{room}");
    }

    redis.kill();
    let report = report(&proxies[1], "").await;
    let room = &report["rooms"][0];
    assert_eq!(room["shares_merged"], false, "{room}");
    assert!(
        room["shares_error"]
            .as_str()
            .is_some_and(|e| e.contains("this instance's alone")),
        "{room}"
    );
    assert_eq!(room["origin"]["requests"], 1, "its own share: {room}");
}

/// Three visitors let in from the line in the order they came: every pair compared is in
/// order, so the report's Kendall tau is 1, and their three waits are the quantiles' exact
/// values.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_order_kept_reads_as_a_kendall_tau_of_one_and_the_waits_as_they_were() {
    let proxy = TestProxy::start(
        "total_active_users = 1\nnew_users_per_minute = 100\nabandon_after = \"10m\"",
    );
    proxy.tick().await;
    let mut holder = proxy.visitor();
    assert!(holder.get("/").await.reached_origin());
    let mut line: Vec<Visitor> = Vec::new();
    for _ in 0..3 {
        let mut waiting = proxy.visitor();
        assert!(!waiting.get("/").await.reached_origin());
        line.push(waiting);
        proxy.clock.advance(Duration::from_secs(10));
    }
    // Each in turn: the one inside leaves, the head of the line takes the place.
    let mut inside = holder;
    for next in line {
        let mut next = next;
        inside.leave().await;
        admitted(&proxy, &mut next).await;
        proxy.clock.advance(Duration::from_secs(5));
        inside = next;
    }
    proxy.tick().await;
    let report = report(&proxy, "").await;
    let room = &report["rooms"][0];
    assert_eq!(room["order_tau"], 1.0, "{room}");
    let wait = &room["wait"];
    assert_eq!(wait["admitted_from_line"], 3, "{wait}");
    // Joined at 0, 10 and 20 s; let in at 30, 35 and 40 s (give or take the ticks' instants).
    assert_eq!(wait["max"], 30.0, "{wait}");
    assert_eq!(wait["p50"], 25.0, "{wait}");
    assert_eq!(wait["p95"], 30.0, "{wait}");
}
