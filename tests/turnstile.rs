#![allow(clippy::unwrap_used)]
//! Turnstile over real HTTP: the proxy in front of a stub origin, a local fake siteverify that
//! answers as Cloudflare documents for its test secrets, and visitors who post the widget's
//! token like the waiting page does.

mod common;

use common::proxy::{ADMIN_TOKEN, TestProxy};
use common::siteverify::{
    Behaviour, DUMMY_TOKEN, FAIL_SECRET, FakeSiteverify, PASS_SECRET, PASS_SITE_KEY,
    PRODUCTION_SECRET, SPENT_SECRET,
};
use waitroom::request::view::Reserved;
use waitroom::turnstile::{SCRIPT_URL, TOKEN_FIELD, TURNSTILE_PATH};

/// One place inside, so the next newcomer would be put in line.
const FULL_ROOM: &str = "total_active_users = 1\nnew_users_per_minute = 1000";

struct Options<'a> {
    url: String,
    secret: &'a str,
    action: &'a str,
    on_unreachable: &'a str,
    timeout: &'a str,
}

impl<'a> Options<'a> {
    fn new(siteverify: &FakeSiteverify, secret: &'a str) -> Self {
        Self {
            url: siteverify.url(),
            secret,
            action: "log",
            on_unreachable: "allow",
            timeout: "2s",
        }
    }

    fn section(&self) -> String {
        format!(
            "[turnstile]\nmode = \"invisible\"\nsite_key = \"{PASS_SITE_KEY}\"\nsecret = \"{}\"\n\
             siteverify_url = \"{}\"\ntimeout = \"{}\"\naction = \"{}\"\non_unreachable = \"{}\"\n",
            self.secret, self.url, self.timeout, self.action, self.on_unreachable
        )
    }

    /// A proxy whose room is full: the one place is taken before the test starts.
    async fn full_room(&self) -> TestProxy {
        let proxy = TestProxy::start_with(FULL_ROOM, &self.section());
        let mut inside = proxy.visitor();
        let first = inside.get("/").await;
        assert!(
            first.reached_origin(),
            "a room with space lets in unchallenged"
        );
        proxy
    }
}

fn form(token: &str) -> String {
    format!("{TOKEN_FIELD}={token}")
}

async fn counted(proxy: &TestProxy, series: &str) -> u64 {
    let text = proxy.metrics().await;
    let prefix = format!("{series} ");
    text.lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .map_or(0, |v| v.trim().parse().unwrap())
}

fn verifications(outcome: &str) -> String {
    format!("waitroom_turnstile_verifications_total{{outcome=\"{outcome}\",room=\"test-room\"}}")
}

const PARKED: &str = "waitroom_turnstile_parked_total{room=\"test-room\"}";

/// Raises the capacity live, as an operator would.
async fn open_room(proxy: &TestProxy, capacity: u64) {
    let answer = reqwest::Client::new()
        .put(format!("{}/admin/config", proxy.admin))
        .bearer_auth(ADMIN_TOKEN)
        .body(format!("{{\"total_active_users\": {capacity}}}"))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
}

fn sorted_keys(value: &serde_json::Value) -> Vec<String> {
    let mut keys: Vec<String> = value.as_object().unwrap().keys().cloned().collect();
    keys.sort();
    keys
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newcomer_who_would_wait_gets_the_challenge_then_a_place_once_it_passes() {
    let siteverify = FakeSiteverify::start(Behaviour::Cloudflare);
    let proxy = Options::new(&siteverify, PASS_SECRET).full_room().await;

    let mut v = proxy.visitor();
    let page = v.get("/drop").await;
    assert_eq!(page.status, 200);
    assert!(
        page.body
            .contains(&format!("data-sitekey=\"{PASS_SITE_KEY}\""))
    );
    assert!(page.body.contains(SCRIPT_URL));
    assert!(page.body.contains("data-appearance=\"interaction-only\""));
    assert!(page.body.contains("One moment, please"));
    assert_eq!(
        page.header("refresh"),
        None,
        "no reload in the middle of a challenge"
    );
    assert_eq!(v.cookie, None, "no ticket before the challenge is passed");

    let json = v.get_json("/drop").await.json();
    assert_eq!(json["cfWaitingRoom"]["inWaitingRoom"], true);
    assert_eq!(json["waitroom"]["position"], serde_json::Value::Null);
    let challenge = &json["waitroom"]["challenge"];
    assert_eq!(challenge["provider"], "turnstile");
    assert_eq!(challenge["siteKey"], PASS_SITE_KEY);
    assert_eq!(challenge["mode"], "invisible");
    assert_eq!(challenge["url"], TURNSTILE_PATH);
    assert_eq!(challenge["field"], TOKEN_FIELD);
    assert_eq!(proxy.state().await["queue_length"], 0, "nothing stored");
    assert!(siteverify.calls().is_empty());
    assert_eq!(
        counted(
            &proxy,
            "waitroom_requests_total{outcome=\"challenged\",room=\"test-room\"}"
        )
        .await,
        2
    );

    let passed = v.post_form(TURNSTILE_PATH, &form(DUMMY_TOKEN)).await;
    assert_eq!(passed.status, 200, "{}", passed.body);
    assert_eq!(passed.json()["waitroom"]["position"], 1);
    assert!(v.cookie.is_some(), "the ticket comes with the answer");
    let calls = siteverify.calls();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].secret.as_deref(), Some(PASS_SECRET));
    assert_eq!(calls[0].response.as_deref(), Some(DUMMY_TOKEN));
    assert_eq!(calls[0].remoteip.as_deref(), Some("127.0.0.1"));
    assert_eq!(counted(&proxy, &verifications("passed")).await, 1);

    // The reload the page makes shows the place; a second answer takes no second place.
    let waiting = v.get("/drop").await;
    assert!(waiting.body.contains("You are number"), "{}", waiting.body);
    assert!(!waiting.body.contains(SCRIPT_URL));
    let again = v.post_form(TURNSTILE_PATH, &form(DUMMY_TOKEN)).await;
    assert_eq!(again.json()["waitroom"]["position"], 1);
    assert_eq!(
        siteverify.calls().len(),
        1,
        "a visitor in line is not verified again"
    );
    assert_eq!(proxy.state().await["queue_length"], 1);

    // And the place works like any other: the turn comes when there is room.
    open_room(&proxy, 2).await;
    let mut admitted = false;
    for _ in 0..100 {
        proxy.tick().await;
        if v.get("/drop").await.reached_origin() {
            admitted = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert!(
        admitted,
        "a visitor who passed the challenge is admitted in turn"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_log_a_failed_challenge_is_counted_and_still_gets_a_place() {
    let siteverify = FakeSiteverify::start(Behaviour::Cloudflare);
    let proxy = Options::new(&siteverify, FAIL_SECRET).full_room().await;
    let mut v = proxy.visitor();
    let answer = v.post_form(TURNSTILE_PATH, &form(DUMMY_TOKEN)).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(answer.json()["waitroom"]["position"], 1);
    assert_eq!(counted(&proxy, &verifications("failed")).await, 1);
    assert_eq!(counted(&proxy, &verifications("passed")).await, 0);
    assert_eq!(counted(&proxy, PARKED).await, 0);
    assert_eq!(proxy.state().await["queue_length"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_spent_token_secret_fails_like_a_reused_token() {
    let siteverify = FakeSiteverify::start(Behaviour::Cloudflare);
    let mut options = Options::new(&siteverify, SPENT_SECRET);
    options.action = "infinite_queue";
    let proxy = options.full_room().await;
    let mut v = proxy.visitor();
    let answer = v.post_form(TURNSTILE_PATH, &form(DUMMY_TOKEN)).await;
    assert_eq!(answer.status, 200);
    assert_eq!(counted(&proxy, &verifications("failed")).await, 1);
    assert_eq!(counted(&proxy, PARKED).await, 1);
    assert_eq!(proxy.state().await["queue_length"], 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_infinite_queue_a_failed_client_waits_forever_in_a_line_that_looks_real() {
    let siteverify = FakeSiteverify::start(Behaviour::Cloudflare);
    let mut options = Options::new(&siteverify, PRODUCTION_SECRET);
    options.action = "infinite_queue";
    let proxy = options.full_room().await;

    let mut human = proxy.visitor();
    let token = siteverify.issue_token();
    let placed = human.post_form(TURNSTILE_PATH, &form(&token)).await.json();
    assert_eq!(placed["waitroom"]["position"], 1);
    proxy.tick().await;

    let mut bot = proxy.visitor();
    let parked = bot.post_form(TURNSTILE_PATH, &form("forged.token")).await;
    assert_eq!(parked.status, 200, "{}", parked.body);
    let parked = parked.json();
    assert!(bot.cookie.is_some());
    assert_eq!(parked["waitroom"]["position"], 2, "at the back of the line");
    assert_eq!(parked["cfWaitingRoom"]["inWaitingRoom"], true);
    assert_eq!(
        sorted_keys(&parked["waitroom"]),
        sorted_keys(&placed["waitroom"])
    );
    assert_eq!(
        sorted_keys(&parked["cfWaitingRoom"]),
        sorted_keys(&placed["cfWaitingRoom"])
    );
    // A reused token is as good as a forged one.
    let mut copycat = proxy.visitor();
    copycat.post_form(TURNSTILE_PATH, &form(&token)).await;
    assert_eq!(counted(&proxy, PARKED).await, 2);
    assert_eq!(counted(&proxy, &verifications("failed")).await, 2);
    assert_eq!(
        proxy.state().await["queue_length"],
        1,
        "parked visitors are in no store"
    );

    let page = bot.get("/drop").await;
    assert_eq!(page.status, 200);
    assert!(page.body.contains("You are number"));
    assert_eq!(page.header("refresh"), Some("2"));

    // The room opens wide: the human is let in, the parked client never.
    open_room(&proxy, 100).await;
    let mut human_in = false;
    for _ in 0..30 {
        proxy.tick().await;
        if !human_in {
            human_in = human.get("/drop").await.reached_origin();
        }
        let answer = bot.get_json("/drop").await;
        assert!(
            !answer.reached_origin(),
            "a parked client is never admitted"
        );
        let position = answer.json()["waitroom"]["position"].as_u64().unwrap();
        assert!(position >= 1);
        let status = bot.get_json(Reserved::Status.path()).await.json();
        assert_eq!(status["waitroom"]["admitted"], false);
    }
    assert!(human_in, "the human was admitted");
    let last = bot.get_json("/drop").await.json();
    assert_eq!(
        last["waitroom"]["position"], 1,
        "moved up with the admissions"
    );
    let origin_saw_bot = proxy
        .origin
        .requests()
        .iter()
        .any(|(_, cookie)| cookie == &bot.cookie);
    assert!(!origin_saw_bot);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn siteverify_out_of_reach_follows_on_unreachable_and_is_counted() {
    // Retry: a siteverify that never answers keeps the visitor at the challenge.
    let hanging = FakeSiteverify::start(Behaviour::Hang);
    let mut options = Options::new(&hanging, PASS_SECRET);
    options.on_unreachable = "retry";
    options.timeout = "300ms";
    let proxy = options.full_room().await;
    let mut v = proxy.visitor();
    let started = std::time::Instant::now();
    let answer = v.post_form(TURNSTILE_PATH, &form(DUMMY_TOKEN)).await;
    assert!(started.elapsed() < std::time::Duration::from_secs(3));
    assert_eq!(answer.status, 503, "{}", answer.body);
    assert!(
        answer.json()["error"]
            .as_str()
            .unwrap()
            .contains("try again")
    );
    assert_eq!(v.cookie, None);
    assert_eq!(hanging.calls().len(), 1);
    assert_eq!(counted(&proxy, &verifications("unreachable")).await, 1);
    assert!(
        v.get("/drop").await.body.contains(SCRIPT_URL),
        "the challenge again"
    );
    assert_eq!(proxy.state().await["queue_length"], 0);

    // Allow: a broken siteverify (HTTP 500) or none at all gives the place anyway.
    let broken = FakeSiteverify::start(Behaviour::ServerError);
    let proxy = Options::new(&broken, PASS_SECRET).full_room().await;
    let answer = proxy
        .visitor()
        .post_form(TURNSTILE_PATH, &form(DUMMY_TOKEN))
        .await;
    assert_eq!(answer.json()["waitroom"]["position"], 1);
    assert_eq!(counted(&proxy, &verifications("unreachable")).await, 1);

    let mut nowhere = Options::new(&broken, PASS_SECRET);
    let refusing = common::proxy::RefusingPort::bind();
    nowhere.url = format!("http://{}/siteverify", refusing.addr);
    let proxy = nowhere.full_room().await;
    let answer = proxy
        .visitor()
        .post_form(TURNSTILE_PATH, &form(DUMMY_TOKEN))
        .await;
    assert_eq!(answer.json()["waitroom"]["position"], 1);
    assert_eq!(counted(&proxy, &verifications("unreachable")).await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_is_not_a_token_is_refused_without_asking_siteverify() {
    let siteverify = FakeSiteverify::start(Behaviour::Cloudflare);
    let mut options = Options::new(&siteverify, PASS_SECRET);
    options.action = "infinite_queue";
    let proxy = options.full_room().await;
    let mut v = proxy.visitor();
    for body in [
        form(&"a".repeat(4000)),
        form("two%0Alines"),
        "token=abc".to_owned(),
        String::new(),
    ] {
        let answer = v.post_form(TURNSTILE_PATH, &body).await;
        assert_eq!(answer.status, 400, "{body:.40}");
        assert!(answer.json()["error"].is_string());
        assert!(answer.set_cookies().is_empty());
    }
    let huge = v
        .post_form(TURNSTILE_PATH, &form(&"a".repeat(20_000)))
        .await;
    assert_eq!(huge.status, 413);
    let get = v.get(TURNSTILE_PATH).await;
    assert_eq!(get.status, 405);
    assert!(siteverify.calls().is_empty());
    assert_eq!(counted(&proxy, &verifications("malformed")).await, 4);
    assert_eq!(counted(&proxy, PARKED).await, 0);
    // The proxy serves on, and a real answer still gets a place.
    let placed = v.post_form(TURNSTILE_PATH, &form(DUMMY_TOKEN)).await;
    assert_eq!(placed.json()["waitroom"]["position"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_custom_template_gets_the_widget_in_its_turnstile_variable() {
    let siteverify = FakeSiteverify::start(Behaviour::Cloudflare);
    let dir = tempfile::tempdir().unwrap();
    let template = dir.path().join("waiting.html");
    std::fs::write(
        &template,
        "<p>{{#position}}#{{position}}{{/position}}</p><div>{{{turnstile}}}</div>",
    )
    .unwrap();
    let options = Options::new(&siteverify, PASS_SECRET);
    let rest = format!(
        "[page]\ntemplate = \"{}\"\n{}",
        template.display(),
        options.section()
    );
    let proxy = TestProxy::start_with(FULL_ROOM, &rest);
    proxy.visitor().get("/").await;
    let mut v = proxy.visitor();
    let challenged = v.get("/").await;
    assert!(
        challenged
            .body
            .starts_with("<p></p><div><div class=\"cf-turnstile\"")
    );
    assert!(challenged.body.contains(SCRIPT_URL));
    v.post_form(TURNSTILE_PATH, &form(DUMMY_TOKEN)).await;
    assert_eq!(v.get("/").await.body, "<p>#1</p><div></div>");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_turnstile_nobody_is_challenged_and_the_endpoint_does_not_exist() {
    let proxy = TestProxy::start(FULL_ROOM);
    proxy.visitor().get("/").await;
    let mut v = proxy.visitor();
    assert!(v.get("/").await.body.contains("You are number"));
    let mut other = proxy.visitor();
    let answer = other.post_form(TURNSTILE_PATH, &form(DUMMY_TOKEN)).await;
    assert_eq!(answer.status, 404);
}

/// `on_unreachable = "proof_of_work"`: while siteverify cannot be reached, the answer is a proof
/// of work instead of a place; its solution takes the ticket the Turnstile answer already counted
/// against the address (2 new places a minute here: the first visitor's and this one's).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_siteverify_asks_for_a_proof_of_work_instead() {
    let siteverify = FakeSiteverify::start(Behaviour::Cloudflare);
    let refusing = common::proxy::RefusingPort::bind();
    let mut options = Options::new(&siteverify, PASS_SECRET);
    options.url = format!("http://{}/siteverify", refusing.addr);
    options.on_unreachable = "proof_of_work";
    let rest = format!(
        "{}[proof_of_work]\ndifficulty_bits = 8\n[rate_limit]\ntickets_per_ip_per_minute = 2\n\
         burst = 2\nmax_live_tickets_per_ip = 0\n",
        options.section()
    );
    let proxy = TestProxy::start_with(FULL_ROOM, &rest);
    assert!(proxy.visitor().get("/").await.reached_origin());

    let mut v = proxy.visitor();
    let asked = v.post_form(TURNSTILE_PATH, &form(DUMMY_TOKEN)).await;
    assert_eq!(asked.status, 200, "{}", asked.body);
    let challenge = asked.json()["waitroom"]["challenge"].clone();
    assert_eq!(challenge["kind"], "proof_of_work", "{challenge}");
    assert!(v.cookie.is_none(), "no place yet");
    let seed = challenge["seed"].as_str().unwrap();
    let nonce = waitroom::core::proof::solve(seed, 8, 0);
    let seed: String = form_urlencoded::byte_serialize(seed.as_bytes()).collect();
    let placed = v
        .post_form("/__waitroom/proof", &format!("seed={seed}&nonce={nonce}"))
        .await;
    assert_eq!(placed.status, 200, "{}", placed.body);
    assert_eq!(placed.json()["waitroom"]["position"], 1, "{}", placed.body);
    assert!(v.cookie.is_some());
    assert_eq!(counted(&proxy, &verifications("unreachable")).await, 1);
    assert_eq!(proxy.state().await["queue_length"], 1);
}
