#![allow(clippy::unwrap_used)]
//! The real proxy on loopback in front of a real stub origin, spoken to over HTTP.

mod common;

use std::collections::HashSet;
use std::time::Duration;

use common::proxy::{ADMIN_TOKEN, TestProxy, Visitor, eventually};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_normal_times_the_room_is_invisible() {
    let proxy = TestProxy::start("total_active_users = 10\nnew_users_per_minute = 100");
    let mut v = proxy.visitor();
    let first = v.get("/shoes?size=42").await;
    assert_eq!(first.status, 200);
    assert_eq!(first.body, "origin:/shoes?size=42");
    let cookies = first.set_cookies();
    assert!(
        cookies.iter().any(|c| c.starts_with("origin_session=abc")),
        "{cookies:?}"
    );
    assert!(
        cookies
            .iter()
            .any(|c| c.starts_with("waitroom=") && c.contains("HttpOnly"))
    );
    // The pass is used, not re-issued on every request.
    let second = v.get("/cart").await;
    assert!(second.reached_origin());
    assert!(
        !second
            .set_cookies()
            .iter()
            .any(|c| c.starts_with("waitroom="))
    );
    let seen = proxy.origin.requests();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].1, None);
    assert!(seen[1].1.is_some(), "the pass travels with the visitor");
    let state = proxy.state().await;
    assert_eq!(state["occupancy"], 1);
    assert_eq!(state["queue_length"], 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_room_queues_with_the_waiting_page() {
    let proxy = TestProxy::start(
        "total_active_users = 1\nnew_users_per_minute = 100\nqueueing_status_code = 202",
    );
    let mut inside = proxy.visitor();
    assert!(inside.get("/").await.reached_origin());
    let mut waiter = proxy.visitor();
    let page = waiter.get("/drop").await;
    assert_eq!(page.status, 202);
    assert_eq!(page.header("refresh"), Some("2"));
    assert_eq!(page.header("cache-control"), Some("no-store"));
    assert!(
        page.header("content-type")
            .unwrap_or("")
            .starts_with("text/html")
    );
    assert!(page.body.contains("Test drop"));
    assert!(page.body.len() < 20 * 1024);
    assert!(waiter.cookie.is_some(), "the ticket is set");
    // Refreshing and a second tab keep the one place.
    let ticket = waiter.cookie.clone();
    for _ in 0..3 {
        let again = waiter.get_json("/drop").await.json();
        assert_eq!(again["waitroom"]["position"], 1);
        assert_eq!(again["waitroom"]["queued"], 1);
    }
    let mut second_tab = Visitor::new(&proxy.base);
    second_tab.cookie = ticket;
    assert_eq!(
        second_tab.get_json("/drop").await.json()["waitroom"]["position"],
        1
    );
    assert_eq!(
        proxy.origin.requests().len(),
        1,
        "nobody else reached the origin"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_turn_comes_in_arrival_order_and_lands_on_the_asked_url() {
    let proxy = TestProxy::start("total_active_users = 1\nnew_users_per_minute = 1000");
    let mut inside = proxy.visitor();
    assert!(inside.get("/").await.reached_origin());
    let mut line = Vec::new();
    for i in 0..5 {
        let mut v = proxy.visitor();
        let page = v.get_json(&format!("/item/{i}")).await.json();
        assert_eq!(page["waitroom"]["position"], i + 1);
        line.push(v);
    }
    inside.leave().await;
    for i in 0..line.len() {
        // Everyone polls; only the head of the line gets in.
        let mut admitted = None;
        for _ in 0..100 {
            proxy.tick().await;
            let answer = line[i].get(&format!("/item/{i}")).await;
            if answer.reached_origin() {
                admitted = Some(answer);
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let answer = admitted.unwrap_or_else(|| panic!("visitor {i} never admitted"));
        assert_eq!(answer.body, format!("origin:/item/{i}"));
        assert!(
            answer
                .set_cookies()
                .iter()
                .any(|c| c.starts_with("waitroom="))
        );
        for (later, v) in line.iter_mut().enumerate().skip(i + 1) {
            let status = v.get_json(&format!("/item/{later}")).await.json();
            assert_eq!(status["waitroom"]["position"], later - i, "order kept");
        }
        line[i].leave().await;
    }
    let state = proxy.state().await;
    assert_eq!(state["queue_length"], 0);
    assert_eq!(state["admitted_total"], 6);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_mode_speaks_cloudflare_and_only_for_the_exact_accept() {
    let proxy = TestProxy::start("total_active_users = 1\nnew_users_per_minute = 100");
    proxy.visitor().get("/").await;
    let mut v = proxy.visitor();
    let mixed = v
        .request(
            reqwest::Method::GET,
            "/",
            Some("application/json, text/html"),
        )
        .await;
    assert!(
        mixed
            .header("content-type")
            .unwrap_or("")
            .starts_with("text/html")
    );
    let json = v.get_json("/").await;
    assert_eq!(json.header("content-type"), Some("application/json"));
    let by_query = v.get("/?waitingroom_json=1").await;
    assert_eq!(by_query.header("content-type"), Some("application/json"));
    let body = json.json();
    let expected = [
        "inWaitingRoom",
        "waitTimeKnown",
        "waitTime",
        "waitTime25Percentile",
        "waitTime50Percentile",
        "waitTime75Percentile",
        "waitTimeFormatted",
        "queueIsFull",
        "queueAll",
        "lastUpdated",
        "refreshIntervalSeconds",
        "queueingMethod",
        "isFIFOQueue",
        "isRandomQueue",
        "isPassthroughQueue",
        "isRejectQueue",
        "isEventActive",
        "isEventPrequeueing",
        "timeUntilEventStart",
        "timeUntilEventStartFormatted",
        "timeUntilEventEnd",
        "timeUntilEventEndFormatted",
        "shuffleAtEventStart",
    ];
    assert_eq!(
        body["cfWaitingRoom"].as_object().unwrap().len(),
        expected.len()
    );
    let at: Vec<usize> = expected
        .iter()
        .map(|k| json.body.find(&format!("\"{k}\":")).unwrap())
        .collect();
    assert!(
        at.windows(2).all(|w| w[0] < w[1]),
        "keys keep Cloudflare's order"
    );
    assert!(json.body.find("\"waitroom\":").unwrap() > at[at.len() - 1]);
    let cf = &body["cfWaitingRoom"];
    assert_eq!(cf["inWaitingRoom"], true);
    assert_eq!(cf["refreshIntervalSeconds"], 2);
    assert_eq!(cf["queueingMethod"], "fifo");
    assert_eq!(cf["isFIFOQueue"], true);
    assert_eq!(cf["timeUntilEventStartFormatted"], "unavailable");
    assert_eq!(body["waitroom"]["position"], 1);
    assert_eq!(body["waitroom"]["admitted"], false);
    assert!(body["waitroom"].get("etaSeconds").is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_estimate_comes_from_the_observed_rate() {
    let proxy = TestProxy::start("total_active_users = 1000\nnew_users_per_minute = 60\nburst = 1");
    proxy.visitor().get("/").await;
    let mut line = Vec::new();
    for _ in 0..30 {
        let mut v = proxy.visitor();
        v.get("/").await;
        line.push(v);
    }
    let last = line.last_mut().unwrap();
    let unknown = last.get_json("/").await.json();
    assert_eq!(unknown["cfWaitingRoom"]["waitTimeKnown"], false);
    // One admission a second for ten seconds of (driven) time.
    for _ in 0..10 {
        proxy.clock.advance(Duration::from_secs(1));
        proxy.tick().await;
    }
    let known = last.get_json("/").await.json();
    assert_eq!(known["waitroom"]["position"], 20);
    assert_eq!(known["cfWaitingRoom"]["waitTimeKnown"], true);
    let eta = known["waitroom"]["etaSeconds"].as_u64().unwrap();
    assert!((15..=25).contains(&eta), "20 ahead at one a second: {eta}");
    assert_eq!(known["cfWaitingRoom"]["waitTime"], 1);
    assert_eq!(known["cfWaitingRoom"]["waitTimeFormatted"], "1 minute");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_queueing_admits_in_no_particular_order() {
    let proxy = TestProxy::start(
        "total_active_users = 1\nnew_users_per_minute = 100000\nqueueing_method = \"random\"",
    );
    let mut inside = proxy.visitor();
    inside.get("/").await;
    let n = 30;
    let mut line = Vec::new();
    for _ in 0..n {
        let mut v = proxy.visitor();
        let page = v.get_json("/").await.json();
        assert_eq!(page["cfWaitingRoom"]["isRandomQueue"], true);
        line.push(v);
    }
    inside.leave().await;
    let mut order = Vec::new();
    while order.len() < n {
        proxy.tick().await;
        for (i, v) in line.iter_mut().enumerate() {
            if order.contains(&i) {
                continue;
            }
            if v.get("/").await.reached_origin() {
                order.push(i);
                v.leave().await;
                break;
            }
        }
    }
    let tau = kendall_tau(&order);
    assert!(
        tau.abs() < 0.4,
        "admission order {order:?} follows arrival: tau {tau}"
    );
    assert_ne!(order, (0..n).collect::<Vec<_>>());
}

/// Rank correlation between arrival (index) and admission order: 1 = same order.
fn kendall_tau(order: &[usize]) -> f64 {
    let n = order.len();
    let mut score = 0i64;
    for i in 0..n {
        for j in i + 1..n {
            score += if order[i] < order[j] { 1 } else { -1 };
        }
    }
    score as f64 / (n * (n - 1) / 2) as f64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passes_expire_and_free_capacity() {
    let proxy = TestProxy::start(
        "total_active_users = 1\nnew_users_per_minute = 100\nsession_duration = \"60s\"",
    );
    let mut first = proxy.visitor();
    assert!(first.get("/").await.reached_origin());
    let mut second = proxy.visitor();
    assert!(!second.get("/").await.reached_origin());
    // Activity slides the session: 50 s in, a request renews it.
    proxy.clock.advance(Duration::from_secs(50));
    let renewed = first.get("/").await;
    assert!(renewed.reached_origin());
    assert!(
        renewed
            .set_cookies()
            .iter()
            .any(|c| c.starts_with("waitroom="))
    );
    proxy.clock.advance(Duration::from_secs(50));
    proxy.tick().await;
    assert_eq!(proxy.state().await["passes"], 1, "renewed, still inside");
    proxy.clock.advance(Duration::from_secs(11));
    proxy.tick().await;
    let state = proxy.state().await;
    assert_eq!(state["expired_total"], 1);
    assert!(
        second.get("/").await.reached_origin(),
        "the freed slot went to the next"
    );
    assert!(
        !first.get("/").await.reached_origin(),
        "the expired pass no longer works"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_origin_revoke_command_ends_the_session_at_once() {
    let proxy = TestProxy::start(
        "total_active_users = 1\nnew_users_per_minute = 100\nenabled_origin_commands = [\"revoke\"]",
    );
    let mut buyer = proxy.visitor();
    assert!(buyer.get("/").await.reached_origin());
    let pass = buyer.cookie.clone();
    let checkout = buyer.get("/revoke-after-checkout").await;
    assert!(checkout.reached_origin());
    assert_eq!(
        checkout.header("cf-waiting-room-command"),
        None,
        "never shown"
    );
    assert!(
        checkout
            .set_cookies()
            .iter()
            .any(|c| c.starts_with("waitroom=;"))
    );
    assert_eq!(buyer.cookie, None);
    let state = proxy.state().await;
    assert_eq!(state["occupancy"], 0);
    assert_eq!(state["revoked_total"], 1);
    // The revoked pass, replayed, is refused at once.
    let mut replay = proxy.visitor();
    replay.cookie = pass;
    let again = replay.get("/").await;
    assert!(
        again.reached_origin(),
        "room is empty again, so a new admission"
    );
    assert_ne!(replay.cookie, buyer.cookie);
    assert_eq!(proxy.state().await["admitted_total"], 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_revoke_header_is_ignored_unless_enabled() {
    let proxy = TestProxy::start("total_active_users = 1\nnew_users_per_minute = 100");
    let mut buyer = proxy.visitor();
    buyer.get("/").await;
    let checkout = buyer.get("/revoke").await;
    assert_eq!(checkout.header("cf-waiting-room-command"), None);
    assert_eq!(proxy.state().await["occupancy"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_and_broken_cookies_count_as_none() {
    let proxy = TestProxy::start("total_active_users = 1\nnew_users_per_minute = 100");
    let mut inside = proxy.visitor();
    inside.get("/").await;
    let good = inside.cookie.clone().unwrap();
    // One character of the sealed contents changed.
    let middle = good.len() / 2;
    let flipped = if &good[middle..=middle] == "A" {
        "B"
    } else {
        "A"
    };
    let tampered = format!("{}{flipped}{}", &good[..middle], &good[middle + 1..]);
    for forged in [
        tampered,
        "garbage".to_owned(),
        "a.b.c".to_owned(),
        "x".repeat(8000),
        String::new(),
    ] {
        let mut v = proxy.visitor();
        v.cookie = Some(forged);
        let answer = v.get("/").await;
        assert!(!answer.reached_origin(), "a forged pass must not get in");
        assert_eq!(answer.status, 200);
    }
    let mut v = Visitor::new(&proxy.base);
    v.cookie = Some(good);
    assert!(
        v.get("/").await.reached_origin(),
        "the genuine pass still works"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abandoned_waiters_drop_out() {
    let proxy = TestProxy::start(
        "total_active_users = 1\nnew_users_per_minute = 100\nabandon_after = \"30s\"",
    );
    let mut inside = proxy.visitor();
    inside.get("/").await;
    let mut gone = proxy.visitor();
    gone.get("/").await;
    let mut stays = proxy.visitor();
    stays.get("/").await;
    proxy.clock.advance(Duration::from_secs(20));
    assert_eq!(stays.get_json("/").await.json()["waitroom"]["position"], 2);
    proxy.clock.advance(Duration::from_secs(15));
    proxy.tick().await;
    assert_eq!(stays.get_json("/").await.json()["waitroom"]["position"], 1);
    let state = proxy.state().await;
    assert_eq!(state["abandoned_total"], 1);
    assert_eq!(state["queue_length"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reserved_paths_never_reach_the_origin() {
    let proxy = TestProxy::start("total_active_users = 1\nnew_users_per_minute = 100");
    let mut inside = proxy.visitor();
    inside.get("/").await;
    let mut v = proxy.visitor();
    v.get("/").await;
    let status = v.get("/__waitroom/status").await;
    assert_eq!(status.header("content-type"), Some("application/json"));
    assert_eq!(status.json()["waitroom"]["position"], 1);
    assert_eq!(v.get("/__waitroom/nope").await.status, 404);
    assert_eq!(v.get("/__waitroom/leave").await.status, 405);
    let left = v.leave().await;
    assert_eq!(left.json()["left"], true);
    assert_eq!(proxy.state().await["queue_length"], 0);
    let admitted = inside.get("/__waitroom/status").await.json();
    assert_eq!(admitted["waitroom"]["admitted"], true);
    assert_eq!(admitted["cfWaitingRoom"]["inWaitingRoom"], false);
    assert!(
        proxy
            .origin
            .requests()
            .iter()
            .all(|(p, _)| !p.starts_with("/__waitroom"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_events_stream_pushes_the_status_until_admitted() {
    let proxy = TestProxy::start("total_active_users = 1\nnew_users_per_minute = 100");
    let mut inside = proxy.visitor();
    inside.get("/").await;
    let mut v = proxy.visitor();
    v.get("/").await;
    let client = reqwest::Client::new();
    let mut stream = client
        .get(format!("{}/__waitroom/events", proxy.base))
        .header("cookie", format!("waitroom={}", v.cookie.clone().unwrap()))
        .send()
        .await
        .unwrap();
    assert_eq!(
        stream.headers().get("content-type").unwrap(),
        "text/event-stream"
    );
    let first = stream.chunk().await.unwrap().unwrap();
    let first = String::from_utf8_lossy(&first).to_string();
    // The reconnection hint first (the page's own refresh interval), then the status.
    assert!(
        first.starts_with("retry: 2000\n\ndata: {\"cfWaitingRoom\""),
        "{first}"
    );
    assert!(first.contains("\"position\":1"));
    inside.leave().await;
    proxy.tick().await;
    let mut rest = String::new();
    while let Some(chunk) = tokio::time::timeout(Duration::from_secs(5), stream.chunk())
        .await
        .unwrap()
        .unwrap()
    {
        rest.push_str(&String::from_utf8_lossy(&chunk));
    }
    assert!(rest.contains("\"admitted\":true"), "{rest}");
    // The reload collects the pass.
    assert!(v.get("/").await.reached_origin());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn room_modes_suspended_passthrough_reject_and_queue_all() {
    let suspended =
        TestProxy::start("total_active_users = 1\nnew_users_per_minute = 100\nsuspended = true");
    for _ in 0..3 {
        let answer = suspended.visitor().get("/").await;
        assert!(answer.reached_origin());
        assert!(
            !answer
                .set_cookies()
                .iter()
                .any(|c| c.starts_with("waitroom="))
        );
    }

    let passthrough = TestProxy::start("total_active_users = 1\nnew_users_per_minute = 1");
    passthrough.visitor().get("/").await;
    let mut was_waiting = passthrough.visitor();
    assert!(!was_waiting.get("/").await.reached_origin());
    put_config(&passthrough, r#"{"queueing_method": "passthrough"}"#).await;
    assert!(was_waiting.get("/").await.reached_origin());
    for _ in 0..3 {
        assert!(passthrough.visitor().get("/").await.reached_origin());
    }
    let state = passthrough.state().await;
    assert_eq!(state["admitted_total"], 5, "everyone counted");
    assert_eq!(state["queue_length"], 0);

    let reject = TestProxy::start(
        "total_active_users = 1\nnew_users_per_minute = 100\nqueueing_method = \"reject\"",
    );
    let closed = reject.visitor().get("/").await;
    assert!(!closed.reached_origin());
    assert_eq!(closed.header("refresh"), None);
    assert!(closed.body.contains("This drop is closed"));
    let closed_json = reject.visitor().get_json("/").await.json();
    assert_eq!(closed_json["cfWaitingRoom"]["isRejectQueue"], true);
    assert_eq!(closed_json["cfWaitingRoom"]["refreshIntervalSeconds"], 0);

    let queue_all = TestProxy::start("total_active_users = 5\nnew_users_per_minute = 100");
    let mut early = queue_all.visitor();
    assert!(early.get("/").await.reached_origin());
    put_config(&queue_all, r#"{"queue_all": true}"#).await;
    let mut late = queue_all.visitor();
    let page = late.get_json("/").await.json();
    assert_eq!(page["cfWaitingRoom"]["queueAll"], true);
    assert_eq!(page["cfWaitingRoom"]["waitTimeKnown"], false);
    queue_all.tick().await;
    assert!(
        !late.get("/").await.reached_origin(),
        "nobody new is let in"
    );
    assert!(
        early.get("/").await.reached_origin(),
        "admitted visitors keep going"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bypassed_paths_and_other_routes_are_not_counted() {
    let proxy = TestProxy::start(
        "total_active_users = 1\nnew_users_per_minute = 100\npath = \"/drop\"\nbypass = [\"/drop/static/*\"]",
    );
    for path in ["/drop/static/app.js", "/", "/about"] {
        let answer = proxy.visitor().get(path).await;
        assert!(answer.reached_origin(), "{path}");
        assert!(
            !answer
                .set_cookies()
                .iter()
                .any(|c| c.starts_with("waitroom="))
        );
    }
    assert_eq!(proxy.state().await["occupancy"], 0);
    assert!(proxy.visitor().get("/drop/shoe").await.reached_origin());
    assert!(!proxy.visitor().get("/drop/shoe").await.reached_origin());
}

async fn put_config(proxy: &TestProxy, body: &str) -> reqwest::Response {
    reqwest::Client::new()
        .put(format!("{}/admin/config", proxy.admin))
        .bearer_auth(ADMIN_TOKEN)
        .body(body.to_owned())
        .send()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_api_needs_the_token_and_validates_live_changes() {
    let proxy = TestProxy::start("total_active_users = 1\nnew_users_per_minute = 100");
    let client = reqwest::Client::new();
    for token in [None, Some("wrong"), Some("")] {
        let mut req = client.get(format!("{}/admin/state", proxy.admin));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        assert_eq!(req.send().await.unwrap().status(), 401);
    }
    let unauthorised = client
        .put(format!("{}/admin/config", proxy.admin))
        .body(r#"{"total_active_users": 50}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(unauthorised.status(), 401);
    assert_eq!(
        proxy.state().await["total_active_users"],
        1,
        "nothing applied"
    );

    for (bad, mentions) in [
        ("not json", "JSON"),
        (r#"{"total_active_users": 0}"#, "total_active_users"),
        (r#"{"queueing_method": "lifo"}"#, "queueing_method"),
        (r#"{"session_duration": "soon"}"#, "session_duration"),
        (r#"{"total_active_user": 5}"#, "total_active_user"),
        (r#"{"id": "other"}"#, "room.id"),
        ("[1,2]", "JSON object"),
    ] {
        let answer = put_config(&proxy, bad).await;
        assert_eq!(answer.status(), 400, "{bad}");
        let text = answer.text().await.unwrap();
        assert!(text.contains(mentions), "{bad}: {text}");
    }
    assert_eq!(
        proxy.state().await["total_active_users"],
        1,
        "nothing applied"
    );

    let ok = put_config(
        &proxy,
        r#"{"total_active_users": 3, "new_users_per_minute": 10}"#,
    )
    .await;
    assert_eq!(ok.status(), 200);
    let echoed: serde_json::Value = ok.json().await.unwrap();
    assert_eq!(echoed["total_active_users"], 3);
    assert_eq!(echoed["new_users_per_minute"], 10);
    let state = proxy.state().await;
    assert_eq!(state["total_active_users"], 3);
    assert_eq!(state["new_users_per_minute"], 10);
    for _ in 0..3 {
        assert!(proxy.visitor().get("/").await.reached_origin());
    }
    assert!(!proxy.visitor().get("/").await.reached_origin());

    // Lowering the capacity live stops admissions; nobody is thrown out.
    put_config(&proxy, r#"{"total_active_users": 1}"#).await;
    assert_eq!(proxy.state().await["occupancy"], 3);

    let health = client
        .get(format!("{}/healthz", proxy.admin))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    let ready = client
        .get(format!("{}/readyz", proxy.admin))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_revoke_ends_a_pass_by_id() {
    let proxy = TestProxy::start("total_active_users = 1\nnew_users_per_minute = 100");
    let mut v = proxy.visitor();
    v.get("/").await;
    let pass_id = pass_id(&proxy, v.cookie.as_deref().unwrap());
    let client = reqwest::Client::new();
    let bad = client
        .post(format!("{}/admin/revoke", proxy.admin))
        .bearer_auth(ADMIN_TOKEN)
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);
    let answer: serde_json::Value = client
        .post(format!("{}/admin/revoke", proxy.admin))
        .bearer_auth(ADMIN_TOKEN)
        .body(format!(r#"{{"pass_id": "{pass_id}"}}"#))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(answer["revoked"], true);
    assert_eq!(proxy.state().await["occupancy"], 0);
    let mut replay = proxy.visitor();
    replay.cookie = v.cookie.clone();
    let answer = replay.get("/").await;
    assert!(answer.reached_origin(), "the room is empty again");
    assert_ne!(
        replay.cookie, v.cookie,
        "came in on a new pass, not the revoked one"
    );
    assert_eq!(proxy.state().await["admitted_total"], 2);
}

/// The visitor id inside a pass: sealed for its room, so opened with the room's secret.
fn pass_id(proxy: &TestProxy, raw: &str) -> String {
    use waitroom::clock::Clock;
    let signer =
        waitroom::token::Signer::new("test-room", common::proxy::SECRET.as_bytes()).unwrap();
    let token = signer.verify(raw, proxy.clock.now_ms()).unwrap();
    token.visitor().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_are_labelled_and_count_outcomes() {
    let proxy = TestProxy::start("total_active_users = 1\nnew_users_per_minute = 100");
    proxy.visitor().get("/").await;
    proxy.visitor().get("/").await;
    proxy.tick().await;
    let text = proxy.metrics().await;
    for line in [
        "waitroom_occupancy{room=\"test-room\"} 1",
        "waitroom_capacity{room=\"test-room\"} 1",
        "waitroom_queue_length{room=\"test-room\"} 1",
        "waitroom_admitted_total{room=\"test-room\"} 1",
        "waitroom_requests_total{outcome=\"admitted\",room=\"test-room\"} 1",
        "waitroom_requests_total{outcome=\"queued\",room=\"test-room\"} 1",
        "waitroom_leader{room=\"test-room\"} 1",
        "waitroom_store_up{room=\"test-room\"} 1",
    ] {
        assert!(text.contains(line), "missing {line} in\n{text}");
    }
    for name in [
        "waitroom_abandoned_total",
        "waitroom_revoked_total",
        "waitroom_expired_total",
        "waitroom_wait_seconds_bucket",
    ] {
        assert!(text.contains(name), "missing {name}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capacity_is_never_exceeded_by_hundreds_of_concurrent_visitors() {
    let capacity = 20;
    let proxy = TestProxy::start(&format!(
        "total_active_users = {capacity}\nnew_users_per_minute = 100000\nsession_duration = \"10m\""
    ));
    let store = proxy.running.parts.stores[0].clone();
    let sampler = tokio::spawn(async move {
        let mut max = 0;
        for _ in 0..400 {
            max = max.max(store.counts().await.unwrap().occupancy());
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        max
    });
    let mut tasks = Vec::new();
    for i in 0..300 {
        let mut v = proxy.visitor();
        tasks.push(tokio::spawn(async move {
            for _ in 0..4 {
                v.get(&format!("/p/{i}")).await;
            }
            if i % 3 == 0 {
                v.leave().await;
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let max = sampler.await.unwrap();
    assert!(max <= capacity, "occupancy reached {max}");
    // End to end: the origin never saw more distinct live passes than the capacity allows,
    // counting a pass as live until its holder left.
    let state = proxy.state().await;
    assert!(state["occupancy"].as_u64().unwrap() <= capacity);
    let admitted = state["admitted_total"].as_u64().unwrap();
    let distinct: HashSet<_> = proxy
        .origin
        .requests()
        .into_iter()
        .filter_map(|(_, c)| c)
        .collect();
    assert!(admitted >= capacity, "the room filled up: {admitted}");
    assert!(distinct.len() as u64 <= admitted);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_or_slow_origin_gets_a_branded_page_and_nobody_loses_a_pass() {
    let dead = common::proxy::RefusingPort::bind();
    let origin = common::origin::StubOrigin::start();
    let proxy = TestProxy::start_before(
        dead.addr,
        "total_active_users = 5\nnew_users_per_minute = 100",
        "",
        origin,
    );
    let mut v = proxy.visitor();
    let answer = v.get("/").await;
    assert_eq!(answer.status, 502);
    assert!(answer.body.contains("502"));
    assert!(answer.body.contains("Test drop"));
    assert!(v.cookie.is_none() || proxy.state().await["occupancy"] == 1);

    let live = TestProxy::start("total_active_users = 5\nnew_users_per_minute = 100");
    let mut v = live.visitor();
    assert!(v.get("/").await.reached_origin());
    let slow = v.get("/slow").await;
    assert_eq!(slow.status, 504);
    assert!(
        v.get("/").await.reached_origin(),
        "the pass survived the timeout"
    );
    let metrics = live.metrics().await;
    assert!(metrics.contains("waitroom_upstream_errors_total{kind=\"timeout\""));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_headers_are_refused_and_the_proxy_keeps_serving() {
    let proxy = TestProxy::start("total_active_users = 5\nnew_users_per_minute = 100");
    let client = reqwest::Client::new();
    let huge = client
        .get(format!("{}/", proxy.base))
        .header("x-junk", "j".repeat(200_000))
        .send()
        .await;
    if let Ok(resp) = huge {
        assert_eq!(resp.status(), 431);
    }
    assert!(proxy.visitor().get("/").await.reached_origin());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_port_fails_fast_with_a_clear_error() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let text = common::proxy::config_text(
        port,
        common::proxy::free_port(),
        "127.0.0.1:1".parse().unwrap(),
        "total_active_users = 1\nnew_users_per_minute = 1",
        "",
    );
    let (config, _) =
        waitroom::config::Config::parse(&text, &common::proxy::NoEnvironment, false).unwrap();
    let started = std::time::Instant::now();
    let err = waitroom::service::server::spawn(&config, Default::default())
        .err()
        .expect("must refuse a busy port");
    assert!(started.elapsed() < Duration::from_secs(5));
    let message = err.to_string();
    assert!(message.contains("listen.address"), "{message}");
    assert!(message.contains(&port.to_string()), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eventually_the_loop_admits_without_help() {
    let proxy = TestProxy::start("total_active_users = 1\nnew_users_per_minute = 100");
    let mut inside = proxy.visitor();
    inside.get("/").await;
    let mut v = proxy.visitor();
    v.get("/").await;
    inside.leave().await;
    eventually("the admission loop calls the waiting visitor", || {
        let mut v = v.clone();
        async move { v.get("/").await.reached_origin() }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn staff_and_monitoring_skip_the_room_by_address_header_or_cookie() {
    let rules = "total_active_users = 1\nnew_users_per_minute = 100\n\
                 bypass_ips = [\"203.0.113.0/24\"]\n\
                 bypass_headers = [\"X-Monitoring: monitor-0123456789\", \
                                   \"X-Staff-Key: s3cret-0123456789\"]\n\
                 bypass_cookies = [\"staff_session=session-0123456789\"]";
    let origin = common::origin::StubOrigin::start();
    let trusted = TestProxy::start_sections(
        origin.addr,
        origin.clone(),
        common::proxy::Sections {
            room: rules,
            listen: "trusted_proxies = [\"127.0.0.1\"]",
            ..Default::default()
        },
    );
    let untrusted = TestProxy::start(rules);
    for proxy in [&trusted, &untrusted] {
        assert!(
            proxy.visitor().get("/").await.reached_origin(),
            "fills the room"
        );
    }
    let client = reqwest::Client::new();
    let get = |base: String, headers: Vec<(&'static str, &'static str)>| {
        let client = client.clone();
        async move {
            let mut req = client.get(format!("{base}/drop"));
            for (name, value) in headers {
                req = req.header(name, value);
            }
            let resp = req.send().await.unwrap();
            let sets_room_cookie = resp
                .headers()
                .get_all("set-cookie")
                .iter()
                .any(|v| v.to_str().unwrap_or("").starts_with("waitroom="));
            let body = resp.text().await.unwrap();
            (body.starts_with("origin:"), sets_room_cookie)
        }
    };
    // Behind a trusted proxy, the client address is the first untrusted one from the right.
    for (xff, passes) in [
        ("203.0.113.5", true),
        ("6.6.6.6, 203.0.113.5", true),
        ("203.0.113.5, 6.6.6.6", false),
    ] {
        let (reached, cookie) = get(trusted.base.clone(), vec![("x-forwarded-for", xff)]).await;
        assert_eq!(reached, passes, "X-Forwarded-For: {xff}");
        assert!(!cookie || !passes, "a bypassed request gets no room cookie");
    }
    // From an untrusted peer the header is the client's own claim and is ignored.
    let (reached, _) = get(
        untrusted.base.clone(),
        vec![("x-forwarded-for", "203.0.113.5")],
    )
    .await;
    assert!(!reached);
    for (headers, passes) in [
        (vec![("x-monitoring", "monitor-0123456789")], true),
        (vec![("x-monitoring", "1")], false),
        (vec![("x-staff-key", "s3cret-0123456789")], true),
        (vec![("x-staff-key", "s3cret")], false),
        (
            vec![("cookie", "a=1; staff_session=session-0123456789")],
            true,
        ),
        (vec![("cookie", "staff_session=abc")], false),
        (vec![("cookie", "staff_sessionx=session-0123456789")], false),
    ] {
        let (reached, _) = get(untrusted.base.clone(), headers.clone()).await;
        assert_eq!(reached, passes, "{headers:?}");
    }
    let state = untrusted.state().await;
    assert_eq!(state["occupancy"], 1, "bypassed traffic is not counted");
    let metrics = untrusted.metrics().await;
    assert!(metrics.contains("waitroom_requests_total{outcome=\"bypassed\",room=\"test-room\"} 3"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_changes_are_json_merge_patches() {
    let proxy = TestProxy::start(
        "total_active_users = 1\nnew_users_per_minute = 100\n\
         crawler_ranges = { googlebot = [\"66.249.64.0/19\"], bingbot = [\"157.55.39.0/24\"] }",
    );
    let patch = |content_type: &'static str, body: &'static str| {
        reqwest::Client::new()
            .patch(format!("{}/admin/config", proxy.admin))
            .bearer_auth(ADMIN_TOKEN)
            .header("content-type", content_type)
            .body(body)
            .send()
    };
    let answer = patch(
        "application/merge-patch+json",
        r#"{"total_active_users": 4, "crawler_ranges": {"bingbot": null}}"#,
    )
    .await
    .unwrap();
    assert_eq!(answer.status(), 200);
    let section: serde_json::Value = answer.json().await.unwrap();
    assert_eq!(section["total_active_users"], 4);
    // RFC 7396: objects merge key by key, null removes.
    assert_eq!(
        section["crawler_ranges"],
        serde_json::json!({ "googlebot": ["66.249.64.0/19"] })
    );
    let form = patch(
        "application/x-www-form-urlencoded",
        r#"{"total_active_users": 5}"#,
    )
    .await
    .unwrap();
    assert_eq!(form.status(), 415);
    assert_eq!(
        form.headers().get("accept-patch").unwrap(),
        "application/merge-patch+json"
    );
    assert_eq!(proxy.state().await["total_active_users"], 4);
    // PUT, the alias scripts were written with, takes any body as the same patch.
    assert_eq!(
        put_config(&proxy, r#"{"total_active_users": 6}"#)
            .await
            .status(),
        200
    );
    assert_eq!(proxy.state().await["total_active_users"], 6);
}
