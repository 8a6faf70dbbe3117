#![allow(clippy::unwrap_used)]
//! What runs is what you can see (issue 23 item 5): `GET /admin/config` shows each key changed
//! live with the file's value and when and how; a reload keeps the events added live; PUT, like
//! PATCH, refuses a body that is not JSON.

mod common;

use common::origin::StubOrigin;
use common::proxy::{ADMIN_TOKEN, Sections, TestProxy};
use common::redis_server::RedisServer;
use waitroom::clock::{Clock, SystemClock, rfc3339_ms};

const MINUTE: i64 = 60_000;

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
        req = req
            .header("content-type", "application/merge-patch+json")
            .body(body.to_string());
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(serde_json::Value::Null))
}

fn override_of<'a>(config: &'a serde_json::Value, key: &str) -> Option<&'a serde_json::Value> {
    config["overrides"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["key"] == key)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_patch_shows_in_get_config_with_the_files_value_and_when() {
    let proxy = TestProxy::start("total_active_users = 1\nnew_users_per_minute = 100");
    let (status, config) = admin(&proxy, reqwest::Method::GET, "/admin/config", None).await;
    assert_eq!(status, 200, "{config}");
    assert_eq!(config["settings"]["total_active_users"], 1);
    assert_eq!(config["overrides"], serde_json::json!([]));

    let unauthorised = reqwest::Client::new()
        .get(format!("{}/admin/config", proxy.admin))
        .send()
        .await
        .unwrap();
    assert_eq!(unauthorised.status(), 401);

    let before = rfc3339_ms(proxy.clock.now_ms());
    let (status, body) = admin(
        &proxy,
        reqwest::Method::PATCH,
        "/admin/config",
        Some(serde_json::json!({ "total_active_users": 77 })),
    )
    .await;
    assert_eq!(status, 200, "{body}");

    let (_, config) = admin(&proxy, reqwest::Method::GET, "/admin/config", None).await;
    assert_eq!(config["settings"]["total_active_users"], 77);
    let changed = override_of(&config, "total_active_users").unwrap_or_else(|| panic!("{config}"));
    assert_eq!(changed["value"], 77);
    assert_eq!(changed["file"], 1);
    assert_eq!(changed["changed_by"], "PATCH /admin/config");
    let at = changed["changed_at"].as_str().unwrap();
    assert!(at >= before.as_str(), "{at} before {before}");
    assert_eq!(config["overrides"].as_array().unwrap().len(), 1, "{config}");

    // Put back to the file's value: no longer an override.
    let (status, _) = admin(
        &proxy,
        reqwest::Method::PATCH,
        "/admin/config",
        Some(serde_json::json!({ "total_active_users": 1 })),
    )
    .await;
    assert_eq!(status, 200);
    let (_, config) = admin(&proxy, reqwest::Method::GET, "/admin/config", None).await;
    assert_eq!(config["overrides"], serde_json::json!([]), "{config}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_keeps_an_event_added_live() {
    let proxy = TestProxy::start("total_active_users = 5\nnew_users_per_minute = 100");
    let now = SystemClock.now_ms();
    let event = serde_json::json!({
        "name": "late-drop",
        "event_start_time": rfc3339_ms(now + 60 * MINUTE),
        "event_end_time": rfc3339_ms(now + 120 * MINUTE),
    });
    let (status, body) = admin(&proxy, reqwest::Method::POST, "/admin/events", Some(event)).await;
    assert_eq!(status, 201, "{body}");
    let (_, config) = admin(&proxy, reqwest::Method::GET, "/admin/config", None).await;
    let added = override_of(&config, "events.late-drop").unwrap_or_else(|| panic!("{config}"));
    assert_eq!(added["file"], serde_json::Value::Null);
    assert_eq!(added["changed_by"], "POST /admin/events");

    let text = std::fs::read_to_string(&proxy.config_file).unwrap();
    std::fs::write(
        &proxy.config_file,
        text.replace("total_active_users = 5", "total_active_users = 7"),
    )
    .unwrap();
    let (status, body) = admin(&proxy, reqwest::Method::POST, "/admin/reload", None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["room"]["total_active_users"], 7);
    assert_eq!(
        body["kept_live_events"],
        serde_json::json!(["test-room: late-drop"])
    );
    let (_, listed) = admin(&proxy, reqwest::Method::GET, "/admin/events", None).await;
    let names: Vec<&str> = listed["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["late-drop"], "{listed}");
    // The file is authoritative again for everything else; the event is still its own override.
    let (_, config) = admin(&proxy, reqwest::Method::GET, "/admin/config", None).await;
    let overrides = config["overrides"].as_array().unwrap();
    assert_eq!(overrides.len(), 1, "{config}");
    assert_eq!(overrides[0]["key"], "events.late-drop");
    assert_eq!(overrides[0]["changed_by"], "POST /admin/events");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn put_config_refuses_a_body_that_is_not_json() {
    let proxy = TestProxy::start("total_active_users = 5\nnew_users_per_minute = 100");
    for method in [reqwest::Method::PUT, reqwest::Method::PATCH] {
        let answer = reqwest::Client::new()
            .request(method.clone(), format!("{}/admin/config", proxy.admin))
            .bearer_auth(ADMIN_TOKEN)
            .header("content-type", "text/plain")
            .body(r#"{"total_active_users": 9}"#)
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 415, "{method}");
    }
    // JSON is still taken by PUT, the alias.
    let answer = reqwest::Client::new()
        .put(format!("{}/admin/config", proxy.admin))
        .bearer_auth(ADMIN_TOKEN)
        .header("content-type", "application/json")
        .body(r#"{"total_active_users": 9}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    assert_eq!(proxy.state().await["total_active_users"], 5 + 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_test_flag_prints_the_live_overrides_saved_in_redis() {
    let redis = RedisServer::start();
    let origin = StubOrigin::start();
    let rest = format!(
        "[store]\nbackend = \"redis\"\nurl = \"{}\"\ncommand_timeout = \"500ms\"\n\
         connect_timeout = \"1s\"\n",
        redis.url()
    );
    let proxy = TestProxy::start_real_time(
        &origin,
        "total_active_users = 5\nnew_users_per_minute = 100",
        &rest,
    );
    let check = || {
        std::process::Command::new(env!("CARGO_BIN_EXE_waitroom-proxy"))
            .arg("--config")
            .arg(&proxy.config_file)
            .arg("--test")
            .output()
            .unwrap()
    };
    let before = check();
    assert!(before.status.success());
    let said = String::from_utf8_lossy(&before.stderr).into_owned();
    assert!(!said.contains("override the file"), "{said}");

    let (status, body) = admin(
        &proxy,
        reqwest::Method::PATCH,
        "/admin/config",
        Some(serde_json::json!({ "total_active_users": 77 })),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let after = check();
    assert!(after.status.success());
    let said = String::from_utf8_lossy(&after.stderr).into_owned();
    assert!(
        said.contains("room.total_active_users: 77 live, 5 in the file (PATCH /admin/config at"),
        "{said}"
    );

    // Redis gone: said, and the file is still valid.
    drop(redis);
    let unreachable = check();
    assert!(unreachable.status.success());
    let said = String::from_utf8_lossy(&unreachable.stderr).into_owned();
    assert!(
        said.contains("live settings: cannot read them from the store"),
        "{said}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_patch_names_each_key_in_the_files_words() {
    let proxy = TestProxy::start("total_active_users = 5\nnew_users_per_minute = 100");
    let (status, body) = admin(
        &proxy,
        reqwest::Method::PATCH,
        "/admin/config",
        Some(serde_json::json!({ "total_active_users": -5, "queue_all": "yes" })),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    let error = body["error"].as_str().unwrap();
    assert!(
        error.contains("room.total_active_users: must be a whole number of at least 1, got -5"),
        "{error}"
    );
    assert!(
        error.contains("room.queue_all: must be true or false, got the string \"yes\""),
        "{error}"
    );
    assert_eq!(proxy.state().await["total_active_users"], 5);

    // The events API says the same.
    let now = SystemClock.now_ms();
    let event = serde_json::json!({
        "name": "drop",
        "event_start_time": rfc3339_ms(now + 60 * MINUTE),
        "event_end_time": rfc3339_ms(now + 120 * MINUTE),
        "total_active_users": -5,
        "new_users_per_minute": 10,
    });
    let (status, body) = admin(&proxy, reqwest::Method::POST, "/admin/events", Some(event)).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(
        body["error"],
        "room.events[0].total_active_users: must be a whole number of at least 1, got -5"
    );
    let (status, body) = admin(
        &proxy,
        reqwest::Method::POST,
        "/admin/events",
        Some(serde_json::json!({ "name": "drop" })),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(
        body["error"],
        "room.events[0].event_start_time: is required"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_config_lists_every_room_of_a_rooms_file() {
    let origin = StubOrigin::start();
    let rooms = "[[rooms]]\nid = \"drop\"\npath = \"/drop\"\ntotal_active_users = 2\n\
                 new_users_per_minute = 100\nadmission_interval = \"20ms\"\n\
                 [[rooms]]\nid = \"tickets\"\npath = \"/tickets\"\ntotal_active_users = 3\n\
                 new_users_per_minute = 100\nadmission_interval = \"20ms\"\n";
    let proxy = TestProxy::start_sections(
        origin.addr,
        origin,
        Sections {
            rooms: Some(rooms),
            ..Sections::default()
        },
    );
    let (status, body) = admin(
        &proxy,
        reqwest::Method::PATCH,
        "/admin/rooms/tickets/config",
        Some(serde_json::json!({ "queue_all": true })),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let (status, all) = admin(&proxy, reqwest::Method::GET, "/admin/config", None).await;
    assert_eq!(status, 200, "{all}");
    let rooms = all["rooms"].as_array().unwrap();
    assert_eq!(rooms.len(), 2, "{all}");
    assert_eq!(rooms[0]["room"], "drop");
    assert_eq!(rooms[0]["overrides"], serde_json::json!([]));
    assert_eq!(rooms[1]["overrides"][0]["key"], "queue_all");
    assert_eq!(rooms[1]["overrides"][0]["file"], false);
    let (_, one) = admin(
        &proxy,
        reqwest::Method::GET,
        "/admin/rooms/tickets/config",
        None,
    )
    .await;
    assert_eq!(one["settings"]["queue_all"], true, "{one}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_refuses_naming_the_live_events_that_no_longer_fit() {
    let proxy = TestProxy::start("total_active_users = 5\nnew_users_per_minute = 100");
    let now = SystemClock.now_ms();
    let event = serde_json::json!({
        "name": "late-drop",
        "event_start_time": rfc3339_ms(now + 60 * MINUTE),
        "event_end_time": rfc3339_ms(now + 120 * MINUTE),
    });
    let (status, body) = admin(&proxy, reqwest::Method::POST, "/admin/events", Some(event)).await;
    assert_eq!(status, 201, "{body}");
    // The file now schedules its own drop over the same hour.
    let text = std::fs::read_to_string(&proxy.config_file).unwrap();
    let overlapping = format!(
        "[[room.events]]\nname = \"file-drop\"\nevent_start_time = \"{}\"\n\
         event_end_time = \"{}\"\n",
        rfc3339_ms(now + 90 * MINUTE),
        rfc3339_ms(now + 150 * MINUTE),
    );
    std::fs::write(
        &proxy.config_file,
        text.replace("total_active_users = 5", "total_active_users = 7")
            .replace("[pass]", &format!("{overlapping}\n[pass]")),
    )
    .unwrap();
    let (status, body) = admin(&proxy, reqwest::Method::POST, "/admin/reload", None).await;
    assert_eq!(status, 409, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("late-drop"),
        "{body}"
    );
    assert_eq!(
        proxy.state().await["total_active_users"],
        5,
        "nothing applied"
    );
}
