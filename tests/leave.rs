#![allow(clippy::unwrap_used)]
//! Leaving the line on purpose and the queue id (issue 28): the place is freed at once and the
//! one behind moves up, joining again goes to the back, the operator finds a visitor by the id
//! it reads out (memory and Redis), and the id is no key to act as the visitor.

mod common;

use common::proxy::{ADMIN_TOKEN, Sections, TestProxy, Visitor};
use common::redis_server::RedisServer;

const ROOM: &str = "total_active_users = 1\nnew_users_per_minute = 100";

/// `GET /admin/visitors/{id}` on the admin listener: status and JSON.
async fn look_up(admin: &str, queue_id: &str) -> (u16, serde_json::Value) {
    let resp = reqwest::Client::new()
        .get(format!("{admin}/admin/visitors/{queue_id}"))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap())
}

/// The visitor's place as its JSON status shows it: (position, queue id).
async fn waiting(v: &mut Visitor) -> (u64, String) {
    let json = v.get_json("/drop").await.json();
    let w = &json["waitroom"];
    let queue_id = w["queueId"].as_str().unwrap_or_else(|| panic!("{json}"));
    (w["position"].as_u64().unwrap(), queue_id.to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leaving_frees_the_place_at_once_and_joining_again_goes_to_the_back() {
    let proxy = TestProxy::start(ROOM);
    let mut inside = proxy.visitor();
    assert!(inside.get("/drop").await.reached_origin());
    let (mut b, mut c, mut d) = (proxy.visitor(), proxy.visitor(), proxy.visitor());
    let (b_at, b_id) = waiting(&mut b).await;
    let (c_at, c_id) = waiting(&mut c).await;
    let (d_at, _) = waiting(&mut d).await;
    assert_eq!((b_at, c_at, d_at), (1, 2, 3));
    let (status, found) = look_up(&proxy.admin, &b_id).await;
    assert_eq!(status, 200, "{found}");
    assert_eq!(found["state"], "waiting");
    assert_eq!(found["position"], 1);
    assert_eq!(found["queued"], 3);
    assert!(
        found["arrived_at"]
            .as_str()
            .is_some_and(|t| t.ends_with('Z'))
    );

    let before_leaving = b.cookie.clone();
    let left = b.leave().await;
    assert_eq!(left.status, 200);
    assert_eq!(left.json()["left"], true);
    assert!(b.cookie.is_none(), "the ticket is cleared");
    let (status, gone) = look_up(&proxy.admin, &b_id).await;
    assert_eq!((status, gone["state"].as_str()), (404, Some("gone")));
    let (_, moved) = look_up(&proxy.admin, &c_id).await;
    assert_eq!(
        moved["position"], 1,
        "the one behind moved up at once: {moved}"
    );
    assert_eq!(moved["queued"], 2);

    // Joining again, with no cookie or with the ticket from before leaving, is at the back.
    let (again, again_id) = waiting(&mut b).await;
    assert_eq!(again, 3, "behind c and d");
    assert_ne!(again_id, b_id, "a new place, a new queue id");
    let mut replay = proxy.visitor();
    replay.cookie = before_leaving;
    let (replayed, _) = waiting(&mut replay).await;
    assert_eq!(
        replayed, 4,
        "the old ticket does not get the front place back"
    );

    // The one inside leaves too: the next round calls c, not anyone who left.
    assert_eq!(inside.leave().await.json()["left"], true);
    proxy.tick().await;
    let (_, called) = look_up(&proxy.admin, &c_id).await;
    assert_eq!(called["state"], "called", "{called}");
    assert!(c.get("/drop").await.reached_origin());
    let (_, inside_now) = look_up(&proxy.admin, &c_id).await;
    assert_eq!(inside_now["state"], "inside");
    assert!(inside_now["pass_expires_at"].is_string());
    let passes: Vec<_> = proxy
        .origin
        .requests()
        .into_iter()
        .filter(|(_, cookie)| cookie.is_some())
        .collect();
    assert_eq!(
        passes.len(),
        1,
        "only c's request came in with a pass: {passes:?}"
    );
    assert!(
        !b.get("/drop").await.reached_origin(),
        "b waits at the back"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_shows_the_queue_id_and_its_leave_button_answers_with_a_page() {
    let proxy = TestProxy::start(ROOM);
    assert!(proxy.visitor().get("/drop").await.reached_origin());
    let mut v = proxy.visitor();
    let page = v.get("/drop").await;
    let (_, queue_id) = waiting(&mut v).await;
    assert!(page.body.contains(&queue_id), "the page shows {queue_id}");
    assert!(page.body.contains("Your queue ID"));
    assert!(
        page.body
            .contains(r#"<form method="post" action="/__waitroom/leave""#)
    );
    assert!(page.body.contains("<summary>Leave the line</summary>"));

    let html = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8";
    let left = v
        .request(reqwest::Method::POST, "/__waitroom/leave", Some(html))
        .await;
    assert_eq!(left.status, 200);
    assert!(
        left.header("content-type")
            .unwrap_or("")
            .starts_with("text/html")
    );
    assert!(left.body.contains("You left the line"));
    assert!(
        left.body
            .contains(r#"<a class="btn" href="/">Join the line again at the back</a>"#)
    );
    assert!(
        left.header("refresh").is_none(),
        "the page after leaving stays put"
    );
    assert!(v.cookie.is_none());
    assert_eq!(look_up(&proxy.admin, &queue_id).await.0, 404);
}

/// A scalper who learns a visitor's queue id (it is shown on screen, read to support) can do
/// nothing with it: not leave for them, not poll as them, not get their pass.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_queue_id_is_no_key_to_act_as_the_visitor() {
    let proxy = TestProxy::start(ROOM);
    let mut inside = proxy.visitor();
    assert!(inside.get("/drop").await.reached_origin());
    let mut victim = proxy.visitor();
    let (_, queue_id) = waiting(&mut victim).await;
    let bare = queue_id.replace('-', "");

    for forged in [queue_id.as_str(), bare.as_str()] {
        let mut scalper = proxy.visitor();
        scalper.cookie = Some(forged.to_owned());
        assert_eq!(scalper.leave().await.json()["left"], false, "{forged}");
        let (position, their_id) = waiting(&mut scalper).await;
        assert!(
            position >= 2,
            "a new place behind the victim, not the victim's"
        );
        assert_ne!(their_id, queue_id);
        for path in [
            format!("/drop?queue_id={forged}"),
            format!("/__waitroom/status?queue_id={forged}"),
        ] {
            let json = proxy.visitor().get_json(&path).await.json();
            assert_ne!(json["waitroom"]["queueId"], queue_id.as_str(), "{path}");
        }
    }
    let (_, found) = look_up(&proxy.admin, &queue_id).await;
    assert_eq!(
        found["state"], "waiting",
        "the victim kept its place: {found}"
    );
    assert_eq!(found["position"], 1);

    // Called, the victim's pass goes to the victim's cookie alone.
    assert_eq!(inside.leave().await.json()["left"], true);
    proxy.tick().await;
    let mut scalper = proxy.visitor();
    scalper.cookie = Some(queue_id.clone());
    assert!(!scalper.get("/drop").await.reached_origin());
    assert_eq!(look_up(&proxy.admin, &queue_id).await.1["state"], "called");
    assert!(victim.get("/drop").await.reached_origin());

    // The operator's answer names no visitor id and no cookie, and needs the admin token.
    let (_, found) = look_up(&proxy.admin, &queue_id).await;
    let mut keys: Vec<&str> = found
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(keys, ["arrived_at", "pass_expires_at", "queue_id", "state"]);
    let anonymous = reqwest::get(format!("{}/admin/visitors/{queue_id}", proxy.admin))
        .await
        .unwrap();
    assert_eq!(anonymous.status().as_u16(), 401);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_id_that_does_not_read_is_refused_in_plain_words() {
    let proxy = TestProxy::start(ROOM);
    let (status, answer) = look_up(&proxy.admin, "not-an-id").await;
    assert_eq!(status, 400);
    assert!(answer["error"].as_str().unwrap().contains("XXXX-XXXX-XXXX"));
    let (status, answer) = look_up(&proxy.admin, "ABCD-EFGH-JKMN").await;
    assert_eq!((status, answer["state"].as_str()), (404, Some("gone")));
}

/// On Redis the index is shared: a visitor waiting through one proxy is found on the other's
/// admin listener, and its leave through the other frees the place for both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_redis_any_instance_finds_and_frees_a_visitor() {
    let redis = RedisServer::start();
    let proxies = TestProxy::sharing_redis(
        2,
        &redis.url(),
        Sections {
            room: ROOM,
            ..Sections::default()
        },
    );
    let (one, two) = (&proxies[0], &proxies[1]);
    assert!(one.visitor().get("/drop").await.reached_origin());
    let mut b = one.visitor();
    let (_, b_id) = waiting(&mut b).await;
    let mut c = two.visitor();
    let (c_at, c_id) = waiting(&mut c).await;
    assert_eq!(c_at, 2);
    let (status, found) = look_up(&two.admin, &b_id).await;
    assert_eq!(status, 200, "{found}");
    assert_eq!(
        (found["state"].as_str(), found["position"].as_u64()),
        (Some("waiting"), Some(1))
    );

    let mut b_on_two = two.visitor();
    b_on_two.cookie = b.cookie.clone();
    assert_eq!(b_on_two.leave().await.json()["left"], true);
    assert_eq!(look_up(&one.admin, &b_id).await.0, 404);
    let (_, moved) = look_up(&one.admin, &c_id).await;
    assert_eq!(
        (moved["position"].as_u64(), moved["queued"].as_u64()),
        (Some(1), Some(1))
    );
    let keys = redis.command(&["HLEN", "wr:{test-room}:visitors"]);
    assert_eq!(
        keys.trim().trim_start_matches(':'),
        "2",
        "the one inside and c: {keys}"
    );
}

/// POST /__waitroom/leave with this cookie and these headers: the status.
async fn post_leave(base: &str, cookie: &str, headers: &[(&str, &str)]) -> u16 {
    let mut req = reqwest::Client::new()
        .post(format!("{base}/__waitroom/leave"))
        .header("cookie", format!("waitroom={cookie}"));
    for (name, value) in headers {
        req = req.header(*name, *value);
    }
    req.send().await.unwrap().status().as_u16()
}

/// A rival's page posting to the leave endpoint with the visitor's browser leaves nobody, even
/// with the cookie attached (a browser attaches it when the room's cookie is `SameSite=None`);
/// the room's own page does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_sites_page_cannot_make_a_visitor_leave() {
    let proxy = TestProxy::start(ROOM);
    assert!(proxy.visitor().get("/drop").await.reached_origin());
    let mut v = proxy.visitor();
    let (_, queue_id) = waiting(&mut v).await;
    let cookie = v.cookie.clone().unwrap();
    for rival in [
        ("sec-fetch-site", "cross-site"),
        ("origin", "https://rival.example"),
        ("origin", "null"),
    ] {
        assert_eq!(
            post_leave(&proxy.base, &cookie, &[rival]).await,
            403,
            "{rival:?}"
        );
        let (_, found) = look_up(&proxy.admin, &queue_id).await;
        assert_eq!(found["state"], "waiting", "{rival:?} made it leave");
    }
    let own = proxy.base.clone();
    let same = [("origin", own.as_str()), ("sec-fetch-site", "same-origin")];
    assert_eq!(post_leave(&proxy.base, &cookie, &same).await, 200);
    assert_eq!(look_up(&proxy.admin, &queue_id).await.0, 404);
}

/// With the store down, a browser's leave is answered by a page that says to try again (the
/// place is kept), not by JSON.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leave_the_store_cannot_take_says_so_in_a_page() {
    let mut redis = RedisServer::start();
    let mut proxies = TestProxy::sharing_redis(
        1,
        &redis.url(),
        Sections {
            room: ROOM,
            ..Sections::default()
        },
    );
    let proxy = proxies.remove(0);
    assert!(proxy.visitor().get("/drop").await.reached_origin());
    let mut v = proxy.visitor();
    waiting(&mut v).await;
    redis.kill();
    let html = "text/html,application/xhtml+xml,*/*;q=0.8";
    let refused = v
        .request(reqwest::Method::POST, "/__waitroom/leave", Some(html))
        .await;
    assert_eq!(refused.status, 503);
    assert!(
        refused
            .header("content-type")
            .unwrap_or("")
            .starts_with("text/html")
    );
    assert!(refused.body.contains("Please try again in a moment."));
    assert!(v.cookie.is_some(), "the ticket is kept");
}
