#![allow(clippy::unwrap_used)]
//! Several rooms in one proxy, and in two proxies sharing Redis: each room holds its own
//! capacity under a crowd on both, a pass for one never admits to the other, a visitor may wait
//! in both, and each room has its own reserved paths and admin API.

mod common;

use std::collections::HashMap;
use std::time::Duration;

use common::origin::StubOrigin;
use common::proxy::{ADMIN_TOKEN, Sections, TestProxy};
use common::redis_server::RedisServer;

/// Two rooms on one host: a sneaker drop of 2 and a ticket sale of 1.
fn two_rooms(extra: &str) -> String {
    format!(
        r#"
[[rooms]]
id = "drop"
name = "Sneaker drop"
path = "/drop"
total_active_users = 2
new_users_per_minute = 100000
session_duration = "1h"
admission_interval = "20ms"
refresh_interval = "2s"
{extra}

[[rooms]]
id = "tickets"
name = "Ticket sale"
path = "/tickets"
total_active_users = 1
new_users_per_minute = 100000
session_duration = "1h"
admission_interval = "20ms"
refresh_interval = "2s"
{extra}
"#
    )
}

/// A browser: every cookie the proxy sets, by name.
#[derive(Clone, Default)]
struct Browser {
    cookies: HashMap<String, String>,
}

struct Answer {
    status: u16,
    body: String,
}

impl Browser {
    async fn get(&mut self, base: &str, path: &str) -> Answer {
        let client = reqwest::Client::new();
        let mut request = client.get(format!("{base}{path}"));
        if !self.cookies.is_empty() {
            let line: Vec<String> = self
                .cookies
                .iter()
                .map(|(n, v)| format!("{n}={v}"))
                .collect();
            request = request.header("cookie", line.join("; "));
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        for set in response.headers().get_all("set-cookie") {
            let set = set.to_str().unwrap();
            let (pair, attributes) = set.split_once(';').unwrap_or((set, ""));
            let (name, value) = pair.split_once('=').unwrap();
            if attributes.contains("Max-Age=0") || value.is_empty() {
                self.cookies.remove(name);
            } else {
                self.cookies.insert(name.to_owned(), value.to_owned());
            }
        }
        Answer {
            status,
            body: response.text().await.unwrap(),
        }
    }
}

async fn admin_get(proxy: &TestProxy, path: &str) -> (u16, serde_json::Value) {
    let answer = reqwest::Client::new()
        .get(format!("{}{path}", proxy.admin))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
        .unwrap();
    let status = answer.status().as_u16();
    (status, answer.json().await.unwrap())
}

async fn occupancy(proxy: &TestProxy, room: &str) -> u64 {
    let (_, state) = admin_get(proxy, &format!("/admin/rooms/{room}/state")).await;
    state["occupancy"].as_u64().unwrap()
}

fn start(extra: &str, rest: &str) -> TestProxy {
    let origin = StubOrigin::start();
    let rooms = two_rooms(extra);
    TestProxy::start_sections(
        origin.addr,
        origin,
        Sections {
            rooms: Some(&rooms),
            rest,
            ..Sections::default()
        },
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_room_holds_its_own_line_and_a_pass_admits_to_its_room_only() {
    let proxy = start("", "");
    let base = proxy.base.clone();
    let mut drop_a = Browser::default();
    let mut drop_b = Browser::default();
    let mut ticket = Browser::default();
    assert_eq!(
        drop_a.get(&base, "/drop/shoes").await.body,
        "origin:/drop/shoes"
    );
    assert_eq!(
        drop_b.get(&base, "/drop/shoes").await.body,
        "origin:/drop/shoes"
    );
    assert_eq!(
        ticket.get(&base, "/tickets/1").await.body,
        "origin:/tickets/1"
    );
    // Each room's cookie has its own name: one never overwrites the other.
    assert!(drop_a.cookies.contains_key("waitroom-drop"));
    assert!(ticket.cookies.contains_key("waitroom-tickets"));
    // Both rooms are full now, each by its own numbers.
    assert_eq!(occupancy(&proxy, "drop").await, 2);
    assert_eq!(occupancy(&proxy, "tickets").await, 1);

    // A pass for the drop does not admit to the ticket sale: its holder waits there.
    let other_room = drop_a.get(&base, "/tickets/1").await;
    assert!(
        other_room.body.contains("Ticket sale"),
        "{}",
        other_room.body
    );
    assert!(
        drop_a.cookies.contains_key("waitroom-tickets"),
        "a ticket for the other room"
    );
    // ... while still holding the drop's pass: a visitor may be in one room and wait in another.
    assert_eq!(drop_a.get(&base, "/drop/x").await.body, "origin:/drop/x");
    // Nor does the drop's pass under the ticket room's cookie name: it names its room.
    let mut forger = Browser::default();
    let pass = drop_b.cookies["waitroom-drop"].clone();
    forger.cookies.insert("waitroom-tickets".into(), pass);
    let forged = forger.get(&base, "/tickets/1").await;
    assert!(forged.body.contains("Ticket sale"), "{}", forged.body);

    // Each room's JSON status at its own reserved path.
    let status = drop_a.get(&base, "/__waitroom/status?room=tickets").await;
    assert_eq!(status.status, 200);
    let json: serde_json::Value = serde_json::from_str(&status.body).unwrap();
    assert_eq!(json["waitroom"]["position"], 1);
    assert_eq!(
        drop_a.get(&base, "/__waitroom/status").await.status,
        404,
        "several rooms: the page names its room"
    );
    // A path no room covers is forwarded as it is.
    assert_eq!(
        Browser::default().get(&base, "/cart").await.body,
        "origin:/cart"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_api_lists_the_rooms_and_speaks_for_each() {
    let proxy = start("", "");
    let (status, rooms) = admin_get(&proxy, "/admin/rooms").await;
    assert_eq!(status, 200);
    let ids: Vec<&str> = rooms["rooms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["room"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["drop", "tickets"]);
    let (status, state) = admin_get(&proxy, "/admin/rooms/tickets/state").await;
    assert_eq!(status, 200);
    assert_eq!(state["total_active_users"], 1);
    let (status, _) = admin_get(&proxy, "/admin/state").await;
    assert_eq!(status, 404, "several rooms: name one");
    assert_eq!(admin_get(&proxy, "/admin/rooms/nope/state").await.0, 404);
    // A live change of one room leaves the other alone.
    let changed = reqwest::Client::new()
        .patch(format!("{}/admin/rooms/tickets/config", proxy.admin))
        .bearer_auth(ADMIN_TOKEN)
        .header("content-type", "application/merge-patch+json")
        .body(r#"{"total_active_users": 3}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(changed.status(), 200);
    assert_eq!(
        admin_get(&proxy, "/admin/rooms/tickets/state").await.1["total_active_users"],
        3
    );
    assert_eq!(
        admin_get(&proxy, "/admin/rooms/drop/state").await.1["total_active_users"],
        2
    );
    let metrics = proxy.metrics().await;
    assert!(
        metrics.contains("waitroom_capacity{room=\"tickets\"} 3"),
        "{metrics}"
    );
    assert!(
        metrics.contains("waitroom_capacity{room=\"drop\"} 2"),
        "{metrics}"
    );
}

/// A crowd on both rooms at once (a sampler reading each room's occupancy the whole time):
/// each room admits up to its own capacity and never beyond.
async fn crowd_on_both_rooms(proxies: &[TestProxy]) {
    let bases: Vec<String> = proxies.iter().map(|p| p.base.clone()).collect();
    let mut visitors = Vec::new();
    for i in 0..40 {
        let base = bases[i % bases.len()].clone();
        let path = if i % 2 == 0 { "/drop/x" } else { "/tickets/x" };
        visitors.push(tokio::spawn(async move {
            let mut browser = Browser::default();
            let mut admitted = 0;
            // Each visitor comes back a few times, as a waiting page would.
            for _ in 0..5 {
                if browser.get(&base, path).await.body.starts_with("origin:") {
                    admitted += 1;
                }
                tokio::time::sleep(Duration::from_millis(30)).await;
            }
            (path, admitted > 0)
        }));
    }
    let sampler = {
        let admin: Vec<String> = proxies.iter().map(|p| p.admin.clone()).collect();
        tokio::spawn(async move {
            let client = reqwest::Client::new();
            let (mut drop_max, mut tickets_max) = (0, 0);
            for _ in 0..60 {
                for (room, max) in [("drop", &mut drop_max), ("tickets", &mut tickets_max)] {
                    let state: serde_json::Value = client
                        .get(format!("{}/admin/rooms/{room}/state", admin[0]))
                        .bearer_auth(ADMIN_TOKEN)
                        .send()
                        .await
                        .unwrap()
                        .json()
                        .await
                        .unwrap();
                    *max = (*max).max(state["occupancy"].as_u64().unwrap());
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            (drop_max, tickets_max)
        })
    };
    let mut admitted = HashMap::new();
    for visitor in visitors {
        let (path, got_in) = visitor.await.unwrap();
        *admitted.entry(path).or_insert(0) += u64::from(got_in);
    }
    let (drop_max, tickets_max) = sampler.await.unwrap();
    assert!(drop_max <= 2, "the drop held 2 at most, saw {drop_max}");
    assert!(
        tickets_max <= 1,
        "the ticket sale held 1 at most, saw {tickets_max}"
    );
    // Sessions last an hour: exactly each room's capacity got in.
    assert_eq!(admitted["/drop/x"], 2, "{admitted:?}");
    assert_eq!(admitted["/tickets/x"], 1, "{admitted:?}");
    for proxy in proxies {
        assert!(
            proxy
                .origin
                .requests()
                .iter()
                .all(|(p, _)| p == "/drop/x" || p == "/tickets/x")
        );
    }
    let (_, drop) = admin_get(&proxies[0], "/admin/rooms/drop/state").await;
    let (_, tickets) = admin_get(&proxies[0], "/admin/rooms/tickets/state").await;
    assert_eq!(drop["occupancy"], 2);
    assert_eq!(tickets["occupancy"], 1);
    assert_eq!(
        drop["queue_length"], 18,
        "everyone else waits in their own room's line"
    );
    assert_eq!(tickets["queue_length"], 19);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_a_crowd_on_both_each_room_holds_its_capacity() {
    let proxy = start("", "");
    crowd_on_both_rooms(std::slice::from_ref(&proxy)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_proxies_on_one_redis_hold_each_rooms_capacity() {
    let redis = RedisServer::start();
    let origin = StubOrigin::start();
    let rooms = two_rooms("");
    let store = format!("[store]\nbackend = \"redis\"\nurl = \"{}\"\n", redis.url());
    let sections = Sections {
        rooms: Some(&rooms),
        rest: &store,
        ..Sections::default()
    };
    let proxies = vec![
        TestProxy::start_real_time_sections(&origin, sections),
        TestProxy::start_real_time_sections(&origin, sections),
    ];
    crowd_on_both_rooms(&proxies).await;
    // A pass from one instance is good on the other, and still only for its room.
    let mut visitor = Browser::default();
    let (a, b) = (&proxies[0].base, &proxies[1].base);
    let first = visitor.get(a, "/drop/y").await;
    assert!(!first.body.starts_with("origin:"), "the drop is full");
    assert!(visitor.cookies.contains_key("waitroom-drop"));
    let elsewhere = visitor.get(b, "/tickets/y").await;
    assert!(!elsewhere.body.starts_with("origin:"));
}
