#![allow(clippy::unwrap_used)]
//! The operator's console on the real proxy's admin listener, spoken to over HTTP as a browser
//! would: sign-in and its limit, the session cookie, CSRF and origin refusals, a change taking
//! effect on the public listener, the audit log, expiry, sign-out and the live view.

mod common;

use std::time::Duration;

use common::origin::StubOrigin;
use common::process::Proc;
use common::proxy::{
    ADMIN_TOKEN, Sections, TestProxy, admin_get, admin_patch, config_with, free_port,
    wait_listening,
};
use common::tls::TestCa;
use reqwest::StatusCode;
use reqwest::header::HeaderMap;

/// A console session lasts a minute in these tests: expiry is one `clock.advance` away.
const ONE_MINUTE_SESSIONS: &str = "console_session = \"1m\"";

fn start() -> TestProxy {
    TestProxy::start_with(
        "total_active_users = 5\nnew_users_per_minute = 100",
        ONE_MINUTE_SESSIONS,
    )
}

/// A browser on the console: no redirects followed, its one cookie kept by hand.
struct Browser {
    admin: String,
    client: reqwest::Client,
    cookie: Option<String>,
    csrf_token: Option<String>,
    short_id: Option<String>,
}

fn header(headers: &HeaderMap, name: &str) -> String {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned()
}

/// `<meta name="csrf-token" content="...">` and `console:{short id}` of the console page.
fn between<'a>(html: &'a str, before: &str, after: &str) -> Option<&'a str> {
    let start = html.find(before)? + before.len();
    let end = html[start..].find(after)? + start;
    Some(&html[start..end])
}

impl Browser {
    /// A browser on the admin listener at `admin` (http://host:port).
    fn new(admin: &str) -> Self {
        Self::with(admin, reqwest::Client::builder())
    }

    /// A browser on `admin` with a client of its own (one trusting a test CA, for HTTPS).
    fn with(admin: &str, client: reqwest::ClientBuilder) -> Self {
        Self {
            admin: admin.to_owned(),
            client: client
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap(),
            cookie: None,
            csrf_token: None,
            short_id: None,
        }
    }

    /// This admin listener's own origin, as the browser sends it.
    fn origin(&self) -> String {
        self.admin.clone()
    }

    fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let mut request = self.client.request(method, format!("{}{path}", self.admin));
        if let Some(cookie) = &self.cookie {
            request = request.header("cookie", format!("waitroom_console={cookie}"));
        }
        request
    }

    async fn sign_in_with(&mut self, token: &str) -> reqwest::Response {
        let answer = self
            .request(reqwest::Method::POST, "/admin/console/login")
            .header("origin", self.origin())
            .form(&[("token", token)])
            .send()
            .await
            .unwrap();
        for set in answer.headers().get_all("set-cookie") {
            let set = set.to_str().unwrap();
            if let Some(rest) = set.strip_prefix("waitroom_console=") {
                self.cookie = rest.split(';').next().map(str::to_owned);
            }
        }
        answer
    }

    /// Signs in with the right token and reads the console page's CSRF token and short id.
    async fn sign_in(&mut self) {
        let answer = self.sign_in_with(ADMIN_TOKEN).await;
        assert_eq!(answer.status(), StatusCode::SEE_OTHER);
        let page = self.console_page().await;
        self.csrf_token =
            between(&page, "<meta name=\"csrf-token\" content=\"", "\"").map(str::to_owned);
        self.short_id = between(&page, "<span id=\"who\">console:", "</span>").map(str::to_owned);
        assert!(self.csrf_token.is_some(), "{page}");
        assert!(self.short_id.is_some(), "{page}");
    }

    async fn console_page(&self) -> String {
        let answer = self
            .request(reqwest::Method::GET, "/admin/console")
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), StatusCode::OK);
        answer.text().await.unwrap()
    }

    async fn get(&self, path: &str) -> reqwest::Response {
        self.request(reqwest::Method::GET, path)
            .send()
            .await
            .unwrap()
    }

    /// A PATCH of the room's settings as the console's script sends it.
    fn patch_config(&self, body: &str) -> reqwest::RequestBuilder {
        self.request(reqwest::Method::PATCH, "/admin/config")
            .header("content-type", "application/merge-patch+json")
            .body(body.to_owned())
    }

    fn with_csrf(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        request
            .header("x-csrf-token", self.csrf_token.clone().unwrap())
            .header("origin", self.origin())
    }

    async fn sign_out(&self) -> reqwest::Response {
        self.with_csrf(self.request(reqwest::Method::POST, "/admin/console/logout"))
            .send()
            .await
            .unwrap()
    }
}

async fn audit(proxy: &TestProxy) -> Vec<serde_json::Value> {
    let answer = admin_get(&proxy.admin, "/admin/audit").await;
    answer["entries"].as_array().unwrap().clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_session_the_console_is_only_the_sign_in_form() {
    let proxy = start();
    let browser = Browser::new(&proxy.admin);
    let answer = browser.get("/admin/console").await;
    assert_eq!(answer.status(), StatusCode::OK);
    assert_eq!(header(answer.headers(), "referrer-policy"), "same-origin");
    assert_eq!(header(answer.headers(), "x-frame-options"), "DENY");
    let policy = header(answer.headers(), "content-security-policy");
    assert!(policy.contains("default-src 'none'"), "{policy}");
    assert!(policy.contains("frame-ancestors 'none'"), "{policy}");
    let page = answer.text().await.unwrap();
    assert!(page.contains("action=\"/admin/console/login\""), "{page}");
    assert!(page.contains("<label for=\"token\">Admin token</label>"));
    for absent in [
        "csrf-token",
        "test-room",
        "queue_all",
        "EventSource",
        "<script",
    ] {
        assert!(!page.contains(absent), "{absent} on the sign-in page");
    }
    // Nothing else of the console or the API answers without a session.
    for path in [
        "/admin/console/events",
        "/admin/audit",
        "/admin/state",
        "/admin/report",
        "/admin/report?format=html",
    ] {
        assert_eq!(
            browser.get(path).await.status(),
            StatusCode::UNAUTHORIZED,
            "{path}"
        );
    }
    let forged_cookie = Browser {
        cookie: Some("made-up".into()),
        ..Browser::new(&proxy.admin)
    };
    assert_eq!(
        forged_cookie.get("/admin/state").await.status(),
        StatusCode::UNAUTHORIZED
    );
    assert!(!forged_cookie.console_page().await.contains("csrf-token"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_tokens_are_refused_then_held_the_right_one_too_until_time_passes() {
    let proxy = start();
    let mut browser = Browser::new(&proxy.admin);
    for _ in 0..5 {
        let answer = browser.sign_in_with("not-the-token").await;
        assert_eq!(answer.status(), StatusCode::UNAUTHORIZED);
        assert!(answer.headers().get("set-cookie").is_none());
        let page = answer.text().await.unwrap();
        assert!(page.contains("That is not the admin token."), "{page}");
    }
    let held = browser.sign_in_with("not-the-token").await;
    assert_eq!(held.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(header(held.headers(), "retry-after"), "12");
    // Held whatever the guess: the right token does not tell a guesser it was right.
    let right_but_held = browser.sign_in_with(ADMIN_TOKEN).await;
    assert_eq!(right_but_held.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(browser.cookie, None);
    proxy.clock.advance(Duration::from_secs(12));
    let let_in = browser.sign_in_with(ADMIN_TOKEN).await;
    assert_eq!(let_in.status(), StatusCode::SEE_OTHER);
    assert!(browser.cookie.is_some());
    // A form posted by another site is refused before its token is even looked at.
    let foreign = Browser::new(&proxy.admin)
        .request(reqwest::Method::POST, "/admin/console/login")
        .header("origin", "http://shop.example")
        .form(&[("token", ADMIN_TOKEN)])
        .send()
        .await
        .unwrap();
    assert_eq!(foreign.status(), StatusCode::FORBIDDEN);
    assert!(foreign.headers().get("set-cookie").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_right_token_sets_a_strict_http_only_expiring_cookie_for_admin_only() {
    let proxy = start();
    let mut browser = Browser::new(&proxy.admin);
    let answer = browser.sign_in_with(ADMIN_TOKEN).await;
    assert_eq!(answer.status(), StatusCode::SEE_OTHER);
    assert_eq!(header(answer.headers(), "location"), "/admin/console");
    let cookies: Vec<&str> = answer
        .headers()
        .get_all("set-cookie")
        .iter()
        .map(|v| v.to_str().unwrap())
        .collect();
    let id = browser.cookie.clone().unwrap();
    assert_eq!(id.len(), 43, "256 random bits");
    // No Secure: the admin listener speaks plain HTTP.
    assert_eq!(
        cookies,
        [format!(
            "waitroom_console={id}; Path=/admin; Max-Age=60; HttpOnly; SameSite=Strict"
        )]
    );
    let page = browser.console_page().await;
    assert!(
        page.contains("<meta name=\"csrf-token\" content=\""),
        "{page}"
    );
    assert!(page.contains("id=\"sign-out\""));
    assert!(page.contains("new EventSource(\"/admin/console/events\")"));
    // Each sign-in is a session of its own.
    let mut other = Browser::new(&proxy.admin);
    other.sign_in().await;
    assert_ne!(other.cookie, browser.cookie);
}

/// With `admin.certificate` the admin listener speaks TLS: the console is `https://`, its
/// session cookie `Secure`, and a change must come from the `https://` origin.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_tls_the_console_cookie_is_secure_and_its_origin_https() {
    let ca = TestCa::new();
    let leaf = ca.leaf(&["127.0.0.1"], "admin");
    let admin_tls = format!(
        "{ONE_MINUTE_SESSIONS}\ncertificate = \"{}\"\nkey = \"{}\"\n",
        leaf.certificate.display(),
        leaf.key.display()
    );
    let proxy = TestProxy::start_with(
        "total_active_users = 5\nnew_users_per_minute = 100",
        &admin_tls,
    );
    let https = proxy.admin.replacen("http://", "https://", 1);
    let trusting = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(ca.ca_pem.as_bytes()).unwrap());
    let mut browser = Browser::with(&https, trusting);
    let answer = browser.sign_in_with(ADMIN_TOKEN).await;
    assert_eq!(answer.status(), StatusCode::SEE_OTHER);
    let id = browser.cookie.clone().unwrap();
    assert_eq!(
        header(answer.headers(), "set-cookie"),
        format!(
            "waitroom_console={id}; Path=/admin; Max-Age=60; HttpOnly; SameSite=Strict; Secure"
        )
    );
    browser.sign_in().await;
    // The page's own origin is https://: a change from it passes, from the http:// spelling of
    // the same host and port it is another origin.
    let from_http = browser
        .patch_config(r#"{"queue_all": true}"#)
        .header("x-csrf-token", browser.csrf_token.clone().unwrap())
        .header("origin", &proxy.admin)
        .send()
        .await
        .unwrap();
    assert_eq!(from_http.status(), StatusCode::FORBIDDEN);
    let own = browser
        .with_csrf(browser.patch_config(r#"{"queue_all": true}"#))
        .send()
        .await
        .unwrap();
    assert_eq!(own.status(), StatusCode::OK);
    let state: serde_json::Value = browser.get("/admin/state").await.json().await.unwrap();
    assert_eq!(state["queue_all"], true);
    let out = browser.sign_out().await;
    assert!(
        header(out.headers(), "set-cookie")
            .ends_with("Max-Age=0; HttpOnly; SameSite=Strict; Secure")
    );
    // Plain HTTP on the TLS port gets no answer of the API.
    let plain = reqwest::Client::new()
        .get(format!("{}/admin/state", proxy.admin))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await;
    assert!(
        plain.map_or(true, |r| !r.status().is_success()),
        "plain HTTP answered over the TLS listener"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_reads_the_api_and_changes_it_only_with_its_csrf_token_from_its_own_origin() {
    let proxy = start();
    let mut early = proxy.visitor();
    assert!(early.get("/").await.reached_origin());
    let mut browser = Browser::new(&proxy.admin);
    browser.sign_in().await;

    let state: serde_json::Value = browser.get("/admin/state").await.json().await.unwrap();
    assert_eq!(state["room"], "test-room");
    assert_eq!(state["occupancy"], 1);
    assert_eq!(state["queue_all"], false);

    let queue_all = r#"{"queue_all": true}"#;
    let refused = [
        ("no CSRF token", browser.patch_config(queue_all)),
        (
            "a wrong CSRF token",
            browser
                .patch_config(queue_all)
                .header("x-csrf-token", "guessed")
                .header("origin", browser.origin()),
        ),
        (
            "another origin",
            browser
                .patch_config(queue_all)
                .header("x-csrf-token", browser.csrf_token.clone().unwrap())
                .header("origin", "http://evil.example"),
        ),
        (
            "the public listener's origin",
            browser
                .patch_config(queue_all)
                .header("x-csrf-token", browser.csrf_token.clone().unwrap())
                .header("origin", proxy.base.clone()),
        ),
        (
            "no origin, but cross-site",
            browser
                .patch_config(queue_all)
                .header("x-csrf-token", browser.csrf_token.clone().unwrap())
                .header("sec-fetch-site", "cross-site"),
        ),
    ];
    for (what, request) in refused {
        let answer = request.send().await.unwrap();
        assert_eq!(answer.status(), StatusCode::FORBIDDEN, "{what}");
    }
    assert_eq!(proxy.state().await["queue_all"], false);
    assert!(
        audit(&proxy)
            .await
            .iter()
            .all(|e| e["path"] != "/admin/config")
    );

    let applied = browser
        .with_csrf(browser.patch_config(queue_all))
        .send()
        .await
        .unwrap();
    assert_eq!(applied.status(), StatusCode::OK);
    assert_eq!(proxy.state().await["queue_all"], true);
    // The public listener obeys: a newcomer queues, the visitor inside keeps going.
    proxy.tick().await;
    let mut late = proxy.visitor();
    assert!(
        !late.get("/").await.reached_origin(),
        "nobody new is let in"
    );
    assert!(early.get("/").await.reached_origin());

    // The bearer token works as before, beside the session.
    let bearer = admin_patch(&proxy.admin, "/admin/config", r#"{"queue_all": false}"#).await;
    assert_eq!(bearer.status(), StatusCode::OK);
    assert_eq!(proxy.state().await["queue_all"], false);
    // A wrong bearer token is refused even beside a good session cookie.
    let wrong_bearer = browser
        .request(reqwest::Method::GET, "/admin/state")
        .bearer_auth("wrong")
        .send()
        .await
        .unwrap();
    assert_eq!(wrong_bearer.status(), StatusCode::UNAUTHORIZED);
}

/// The visitor id inside a pass: sealed for its room, so opened with the room's secret.
fn pass_id(proxy: &TestProxy, raw: &str) -> String {
    use waitroom::clock::Clock;
    let signer =
        waitroom::token::Signer::new("test-room", common::proxy::SECRET.as_bytes()).unwrap();
    signer
        .verify(raw, proxy.clock.now_ms())
        .unwrap()
        .visitor()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_console_control_takes_effect_on_the_public_listener() {
    let proxy = start();
    let mut browser = Browser::new(&proxy.admin);
    browser.sign_in().await;
    let patch = |body: &'static str| browser.with_csrf(browser.patch_config(body)).send();
    let mut inside = proxy.visitor();
    assert!(inside.get("/").await.reached_origin());

    // A lowered capacity: the one inside stays, a newcomer waits.
    assert_eq!(
        patch(r#"{"total_active_users": 1, "new_users_per_minute": 60}"#)
            .await
            .unwrap()
            .status(),
        StatusCode::OK
    );
    let state = proxy.state().await;
    assert_eq!(
        (&state["total_active_users"], &state["new_users_per_minute"]),
        (&1.into(), &60.into())
    );
    let mut waiting = proxy.visitor();
    assert!(!waiting.get("/").await.reached_origin());
    assert!(inside.get("/").await.reached_origin());

    // Revoke by visitor id: the place frees, the waiting visitor is called in.
    let id = pass_id(&proxy, inside.cookie.as_deref().unwrap());
    let revoked: serde_json::Value = browser
        .with_csrf(browser.request(reqwest::Method::POST, "/admin/revoke"))
        .body(format!(r#"{{"pass_id": "{id}"}}"#))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(revoked["revoked"], true);
    proxy.tick().await;
    assert!(waiting.get("/").await.reached_origin(), "called in");
    assert!(
        !inside.get("/").await.reached_origin(),
        "the revoked pass opens nothing: its holder is a newcomer in a full room"
    );

    // The queueing method: reject closes the line to newcomers.
    assert_eq!(
        patch(r#"{"queueing_method": "reject"}"#)
            .await
            .unwrap()
            .status(),
        StatusCode::OK
    );
    let closed = proxy.visitor().get("/").await;
    assert!(!closed.reached_origin());
    assert!(
        closed.body.contains("This drop is closed"),
        "{}",
        closed.body
    );

    // Suspended: the room is off, everyone goes straight through without a cookie of ours.
    assert_eq!(
        patch(r#"{"suspended": true}"#).await.unwrap().status(),
        StatusCode::OK
    );
    let through = proxy.visitor().get("/").await;
    assert!(through.reached_origin());
    assert!(
        !through
            .set_cookies()
            .iter()
            .any(|c| c.starts_with("waitroom="))
    );
    assert_eq!(proxy.state().await["suspended"], true);

    // An event added, called off and deleted, as the console's events list does.
    let event = |method: reqwest::Method, path: &str, body: &str| {
        browser
            .with_csrf(browser.request(method, path))
            .header("content-type", "application/json")
            .body(body.to_owned())
            .send()
    };
    let added = event(
        reqwest::Method::POST,
        "/admin/rooms/test-room/events",
        r#"{"name": "drop", "event_start_time": "2030-06-01T08:00:00.000Z",
            "event_end_time": "2030-06-01T10:00:00.000Z"}"#,
    )
    .await
    .unwrap();
    assert_eq!(added.status(), StatusCode::CREATED);
    let called_off = event(
        reqwest::Method::PATCH,
        "/admin/rooms/test-room/events/drop",
        r#"{"suspended": true}"#,
    )
    .await
    .unwrap();
    assert_eq!(called_off.status(), StatusCode::OK);
    let listed: serde_json::Value = browser.get("/admin/events").await.json().await.unwrap();
    assert_eq!(listed["events"][0]["suspended"], true, "{listed}");
    let deleted = event(
        reqwest::Method::DELETE,
        "/admin/rooms/test-room/events/drop",
        "",
    )
    .await
    .unwrap();
    assert_eq!(deleted.status(), StatusCode::OK);
    let listed: serde_json::Value = browser.get("/admin/events").await.json().await.unwrap();
    assert_eq!(listed["events"], serde_json::json!([]));

    // The autopilot's switch answers as through the token: this room's autopilot is off.
    let pause = browser
        .with_csrf(browser.request(reqwest::Method::POST, "/admin/autopilot"))
        .body(r#"{"paused": true}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(pause.status(), StatusCode::CONFLICT);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_edited_from_the_console_governs_with_its_new_limits_and_end() {
    use waitroom::clock::{Clock, rfc3339_ms};
    let proxy = start();
    let mut browser = Browser::new(&proxy.admin);
    browser.sign_in().await;
    let now = proxy.clock.now_ms();
    let at = |minutes: i64| rfc3339_ms(now + minutes * 60_000);
    let path = "/admin/rooms/test-room/events/drop";
    // The console's Edit sends the keys the operator changed as a merge patch.
    let edit = |body: serde_json::Value| {
        browser
            .with_csrf(browser.request(reqwest::Method::PATCH, path))
            .header("content-type", "application/merge-patch+json")
            .body(body.to_string())
            .send()
    };
    let listed = || async {
        let answer: serde_json::Value = browser
            .get("/admin/rooms/test-room/events")
            .await
            .json()
            .await
            .unwrap();
        answer
    };
    let added = browser
        .with_csrf(browser.request(reqwest::Method::POST, "/admin/rooms/test-room/events"))
        .header("content-type", "application/json")
        .body(
            serde_json::json!({
                "name": "drop", "event_start_time": at(-1), "event_end_time": at(60),
                "total_active_users": 3, "new_users_per_minute": 100,
            })
            .to_string(),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(added.status(), StatusCode::CREATED);
    let state = proxy.state().await;
    assert_eq!(
        (&state["event"], &state["total_active_users"]),
        (&"drop".into(), &3.into())
    );

    // Its capacity lowered and its end brought forward, while it governs the room.
    let answer = edit(serde_json::json!({"total_active_users": 1, "event_end_time": at(30)}))
        .await
        .unwrap();
    assert_eq!(answer.status(), StatusCode::OK);
    let events = listed().await;
    let event = &events["events"][0];
    assert_eq!(event["total_active_users"], 1, "{events}");
    assert_eq!(
        event["new_users_per_minute"], 100,
        "a key not sent is kept: {events}"
    );
    assert_eq!(event["event_end_time"], at(30).as_str());
    assert_eq!(event["event_start_time"], at(-1).as_str());
    assert_eq!(events["current"]["name"], "drop");
    assert_eq!(proxy.state().await["total_active_users"], 1);
    let mut first = proxy.visitor();
    assert!(first.get("/").await.reached_origin());
    assert!(
        !proxy.visitor().get("/").await.reached_origin(),
        "the event's new capacity holds the next one back"
    );

    // Refused without the CSRF token, and refused by the API (an end before the start): the
    // event stays as it was.
    let forged = browser
        .request(reqwest::Method::PATCH, path)
        .header("content-type", "application/merge-patch+json")
        .body(r#"{"total_active_users": 50}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), StatusCode::FORBIDDEN);
    let backwards = edit(serde_json::json!({"event_end_time": at(-2)}))
        .await
        .unwrap();
    assert_eq!(backwards.status(), StatusCode::BAD_REQUEST);
    assert_eq!(
        listed().await["events"][0]["event_end_time"],
        at(30).as_str()
    );

    // Emptied limits (null in the patch): the room's own apply while it runs.
    let answer =
        edit(serde_json::json!({"total_active_users": null, "new_users_per_minute": null}))
            .await
            .unwrap();
    assert_eq!(answer.status(), StatusCode::OK);
    let events = listed().await;
    assert!(
        events["events"][0].get("total_active_users").is_none(),
        "{events}"
    );
    let state = proxy.state().await;
    assert_eq!(
        (&state["event"], &state["total_active_users"]),
        (&"drop".into(), &5.into())
    );
    // Ended now: it governs no more.
    let answer = edit(serde_json::json!({"event_end_time": at(0)}))
        .await
        .unwrap();
    assert_eq!(answer.status(), StatusCode::OK);
    assert_eq!(listed().await["current"], serde_json::Value::Null);
    assert_eq!(proxy.state().await["event"], serde_json::Value::Null);

    let who = format!("console:{}", browser.short_id.clone().unwrap());
    let edits: Vec<(serde_json::Value, u64)> = audit(&proxy)
        .await
        .iter()
        .filter(|e| e["path"] == path)
        .map(|e| {
            assert_eq!(
                (&e["who"], &e["method"]),
                (&who.clone().into(), &"PATCH".into())
            );
            (e["changed"].clone(), e["status"].as_u64().unwrap())
        })
        .collect();
    let expected = [
        (serde_json::json!({"event_end_time": at(0)}), 200),
        (
            serde_json::json!({"total_active_users": null, "new_users_per_minute": null}),
            200,
        ),
        (serde_json::json!({"event_end_time": at(-2)}), 400),
        (
            serde_json::json!({"total_active_users": 1, "event_end_time": at(30)}),
            200,
        ),
    ];
    assert_eq!(
        edits, expected,
        "newest first; the forged one is not an entry"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_audit_log_names_who_changed_what_and_from_where() {
    let proxy = start();
    let token_change = admin_patch(
        &proxy.admin,
        "/admin/config",
        r#"{"total_active_users": 7}"#,
    )
    .await;
    assert_eq!(token_change.status(), StatusCode::OK);
    let mut browser = Browser::new(&proxy.admin);
    browser.sign_in().await;
    let console_change = browser
        .with_csrf(browser.patch_config(r#"{"suspended": true, "new_users_per_minute": 30}"#))
        .send()
        .await
        .unwrap();
    assert_eq!(console_change.status(), StatusCode::OK);
    let bad_change = browser
        .with_csrf(browser.patch_config(r#"{"total_active_users": -1}"#))
        .send()
        .await
        .unwrap();
    assert_eq!(bad_change.status(), StatusCode::BAD_REQUEST);
    let revoke = browser
        .with_csrf(browser.request(reqwest::Method::POST, "/admin/revoke"))
        .body(r#"{"pass_id": "nobody"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(revoke.status(), StatusCode::OK);

    let who = format!("console:{}", browser.short_id.clone().unwrap());
    // The session reads the same log as the token.
    let seen: serde_json::Value = browser.get("/admin/audit").await.json().await.unwrap();
    let entries = audit(&proxy).await;
    assert_eq!(seen["entries"], serde_json::Value::from(entries.clone()));
    let summary: Vec<(String, String, String, serde_json::Value, u64)> = entries
        .iter()
        .map(|e| {
            assert_eq!(e["client"], "127.0.0.1");
            assert!(e["at"].as_str().unwrap().ends_with('Z'), "{e}");
            (
                e["who"].as_str().unwrap().to_owned(),
                e["method"].as_str().unwrap().to_owned(),
                e["path"].as_str().unwrap().to_owned(),
                e["changed"].clone(),
                e["status"].as_u64().unwrap(),
            )
        })
        .collect();
    let expected = [
        (
            who.clone(),
            "POST",
            "/admin/revoke",
            serde_json::json!({"pass_id": "nobody"}),
            200,
        ),
        (
            who.clone(),
            "PATCH",
            "/admin/config",
            serde_json::json!({"total_active_users": -1}),
            400,
        ),
        (
            who.clone(),
            "PATCH",
            "/admin/config",
            serde_json::json!({"suspended": true, "new_users_per_minute": 30}),
            200,
        ),
        (
            who.clone(),
            "POST",
            "/admin/console/login",
            serde_json::json!({}),
            303,
        ),
        (
            "token".to_owned(),
            "PATCH",
            "/admin/config",
            serde_json::json!({"total_active_users": 7}),
            200,
        ),
    ];
    let expected: Vec<(String, String, String, serde_json::Value, u64)> = expected
        .into_iter()
        .map(|(w, m, p, c, s)| (w, m.to_owned(), p.to_owned(), c, s))
        .collect();
    assert_eq!(summary, expected);
    // Reads are not changes.
    browser.get("/admin/state").await;
    assert_eq!(audit(&proxy).await.len(), expected.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_shows_the_drop_report_and_links_its_download() {
    let proxy = start();
    let mut visitor = proxy.visitor();
    assert!(visitor.get("/").await.reached_origin());
    // A quiet room (nobody waiting) is read once a second of its clock.
    proxy.clock.advance(Duration::from_secs(1));
    proxy.tick().await;
    let mut browser = Browser::new(&proxy.admin);
    browser.sign_in().await;
    let page = browser.console_page().await;
    assert!(
        page.contains("id=\"report-heading\">Drop report</h2>"),
        "{page}"
    );
    assert!(page.contains("href=\"/admin/report?format=html\" download"));
    assert!(
        page.contains("api(\"GET\", \"/admin/report\")"),
        "the page fetches it"
    );
    // What the page fetches and the link downloads, with the session's cookie alone.
    let report: serde_json::Value = browser.get("/admin/report").await.json().await.unwrap();
    assert_eq!(report["rooms"][0]["admitted"], 1, "{report}");
    let download = browser.get("/admin/report?format=html").await;
    assert_eq!(download.status(), StatusCode::OK);
    assert!(header(download.headers(), "content-disposition").starts_with("attachment;"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_ends_when_it_expires_or_signs_out() {
    let proxy = start();
    let mut browser = Browser::new(&proxy.admin);
    browser.sign_in().await;
    assert_eq!(browser.get("/admin/state").await.status(), StatusCode::OK);
    proxy.clock.advance(Duration::from_secs(59));
    assert_eq!(browser.get("/admin/state").await.status(), StatusCode::OK);
    proxy.clock.advance(Duration::from_secs(1));
    assert_eq!(
        browser.get("/admin/state").await.status(),
        StatusCode::UNAUTHORIZED
    );
    let expired_change = browser
        .with_csrf(browser.patch_config(r#"{"queue_all": true}"#))
        .send()
        .await
        .unwrap();
    assert_eq!(expired_change.status(), StatusCode::UNAUTHORIZED);
    assert!(!browser.console_page().await.contains("csrf-token"));

    browser.sign_in().await;
    assert_eq!(browser.get("/admin/state").await.status(), StatusCode::OK);
    // Sign-out is a change: not without the CSRF token.
    let forged = browser
        .request(reqwest::Method::POST, "/admin/console/logout")
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), StatusCode::FORBIDDEN);
    assert_eq!(browser.get("/admin/state").await.status(), StatusCode::OK);
    let signed_out = browser.sign_out().await;
    assert_eq!(signed_out.status(), StatusCode::OK);
    assert_eq!(
        header(signed_out.headers(), "set-cookie"),
        "waitroom_console=; Path=/admin; Max-Age=0; HttpOnly; SameSite=Strict"
    );
    // The old cookie, kept by a careless browser or a thief, opens nothing any more.
    assert_eq!(
        browser.get("/admin/state").await.status(),
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(browser.sign_out().await.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(proxy.state().await["queue_all"], false);
}

/// Reads the stream until `wanted` events have come (or 10 s have gone): their names and data.
async fn events(answer: &mut reqwest::Response, wanted: usize) -> Vec<(String, String)> {
    let mut text = String::new();
    let mut found = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while found.len() < wanted {
        let chunk = tokio::time::timeout_at(deadline, answer.chunk())
            .await
            .expect("the next event in time")
            .unwrap();
        let Some(chunk) = chunk else { break };
        text.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = text.find("\n\n") {
            let block: String = text.drain(..end + 2).collect();
            let name = between(&block, "event: ", "\n").unwrap_or("").to_owned();
            let data = between(&block, "data: ", "\n").unwrap_or("").to_owned();
            found.push((name, data));
        }
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_live_view_streams_every_rooms_state_until_the_session_ends() {
    let proxy = start();
    proxy.visitor().get("/").await;
    let mut browser = Browser::new(&proxy.admin);
    browser.sign_in().await;
    let mut stream = browser.get("/admin/console/events").await;
    assert_eq!(stream.status(), StatusCode::OK);
    assert_eq!(
        header(stream.headers(), "content-type"),
        "text/event-stream"
    );
    // The stream's connection is not kept: the head says so, and no request is sent on it.
    assert_eq!(header(stream.headers(), "connection"), "close");
    let started = std::time::Instant::now();
    let first_two = events(&mut stream, 2).await;
    // One at once, the next a few seconds later: a stream, not a poll.
    assert!(
        started.elapsed() >= Duration::from_millis(1500),
        "{first_two:?}"
    );
    for (name, data) in &first_two {
        assert_eq!(name, "state");
        let state: serde_json::Value = serde_json::from_str(data).unwrap();
        let room = &state["rooms"][0];
        assert_eq!(room["room"], "test-room");
        assert_eq!(room["occupancy"], 1);
        assert_eq!(room["total_active_users"], 5);
        assert_eq!(room["queue_length"], 0);
        assert_eq!(room["store_ok"], true);
        assert_eq!(room["is_leader"], true);
        assert!(room["leader"].is_string(), "{room}");
        assert!(room.get("admitted_last_minute").is_some(), "{room}");
        assert!(room.get("wait_estimate_seconds").is_some(), "{room}");
    }
    let signed_out = browser.sign_out().await;
    assert_eq!(signed_out.status(), StatusCode::OK);
    let rest = events(&mut stream, 2).await;
    assert_eq!(
        rest.last().map(|(name, _)| name.as_str()),
        Some("signed-out"),
        "{rest:?}"
    );
    assert_eq!(stream.chunk().await.ok().flatten(), None, "the stream ends");
    assert_eq!(
        browser.get("/admin/console/events").await.status(),
        StatusCode::UNAUTHORIZED
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_sign_in_and_each_change_are_log_lines_without_the_token() {
    let dir = tempfile::tempdir().unwrap();
    let origin = StubOrigin::start();
    let (listen, admin) = (free_port(), free_port());
    let config = dir.path().join("room.toml");
    let sections = Sections {
        room: "total_active_users = 5\nnew_users_per_minute = 100",
        rest: "[log]\nformat = \"json\"",
        ..Sections::default()
    };
    std::fs::write(&config, config_with(listen, admin, origin.addr, sections)).unwrap();
    let mut proc = Proc::start(
        &config,
        &[],
        &[("RUST_LOG", "info")],
        &dir.path().join("proxy.log"),
    );
    wait_listening(listen);
    wait_listening(admin);
    let mut browser = Browser::new(&format!("http://127.0.0.1:{admin}"));
    let guess = "a-guess-that-must-not-be-logged";
    assert_eq!(
        browser.sign_in_with(guess).await.status(),
        StatusCode::UNAUTHORIZED
    );
    browser.sign_in().await;
    let change = browser
        .with_csrf(browser.patch_config(r#"{"suspended": true}"#))
        .send()
        .await
        .unwrap();
    assert_eq!(change.status(), StatusCode::OK);
    proc.signal("TERM");
    proc.wait_exit(Duration::from_secs(10)).unwrap();

    let log = proc.log_text();
    assert!(!log.contains(guess), "a guess in the log");
    assert!(!log.contains(ADMIN_TOKEN), "the token in the log");
    let lines: Vec<serde_json::Value> = log
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect();
    let failed = lines
        .iter()
        .find(|l| l["msg"] == "console sign-in failed: wrong token")
        .unwrap_or_else(|| panic!("no line of the failed sign-in: {log}"));
    assert_eq!(failed["level"], "WARN");
    assert_eq!(failed["client"], "127.0.0.1");
    let audit: Vec<&serde_json::Value> = lines
        .iter()
        .filter(|l| l["target"] == "waitroom::audit")
        .collect();
    let who = format!("console:{}", browser.short_id.clone().unwrap());
    let fields = |l: &serde_json::Value| {
        (
            l["who"].clone(),
            l["client"].clone(),
            l["method"].clone(),
            l["path"].clone(),
            l["changed"].clone(),
            l["status"].clone(),
        )
    };
    assert_eq!(
        audit.iter().map(|l| fields(l)).collect::<Vec<_>>(),
        [
            (
                who.clone().into(),
                "127.0.0.1".into(),
                "POST".into(),
                "/admin/console/login".into(),
                "{}".into(),
                303.into()
            ),
            (
                who.into(),
                "127.0.0.1".into(),
                "PATCH".into(),
                "/admin/config".into(),
                "{\"suspended\":true}".into(),
                200.into()
            ),
        ]
    );
}
