#![allow(clippy::unwrap_used)]
//! The self-hosted proof of work (issue 25) over real HTTP, against the proxy in front of a
//! recording stub origin: with it on, no place is given without a fresh valid solution. Joined
//! with no answer, a wrong answer, an expired seed, a replayed solution (on the same proxy, and
//! on a second proxy sharing a real Redis), a valid answer; per event; the difficulty rising for
//! an address that keeps asking; the built-in page and the shared template carry the solver.

mod common;

use std::time::Duration;

use common::proxy::{Sections, TestProxy, Visitor};
use common::redis_server::RedisServer;
use waitroom::clock::{Clock, rfc3339_ms};
use waitroom::core::proof::{solve, solves};

/// A room with space: without the proof, the first visitor would be let in at once.
const ROOM: &str = "total_active_users = 10\nnew_users_per_minute = 1000";
/// Low bits keep the tests fast; the interface is the same at any difficulty.
const PROOF: &str = "[proof_of_work]\nenabled = true\ndifficulty_bits = 8\n\
                     free_seeds_per_minute = 0\nseed_lifetime = \"1m\"\n";

/// The challenge of a JSON answer: seed, difficulty bits, and the whole object.
fn challenge(answer: &common::proxy::Answer) -> (String, u8, serde_json::Value) {
    let json = answer.json();
    let challenge = json["waitroom"]["challenge"].clone();
    assert_eq!(challenge["kind"], "proof_of_work", "{json}");
    let seed = challenge["seed"].as_str().unwrap().to_owned();
    let bits = u8::try_from(challenge["difficulty_bits"].as_u64().unwrap()).unwrap();
    (seed, bits, challenge)
}

fn answer_form(seed: &str, nonce: &str) -> String {
    let seed: String = form_urlencoded::byte_serialize(seed.as_bytes()).collect();
    format!("seed={seed}&nonce={nonce}")
}

/// Two proxies of the room with the proof on, sharing `redis`.
fn two_proxies_on(redis: &RedisServer) -> Vec<TestProxy> {
    let sections = Sections {
        room: ROOM,
        rest: PROOF,
        ..Sections::default()
    };
    TestProxy::sharing_redis(2, &redis.url(), sections)
}

fn origin_requests(proxy: &TestProxy) -> usize {
    proxy.origin.requests().len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_place_without_a_fresh_valid_solution() {
    let proxy = TestProxy::start_with(ROOM, PROOF);
    let mut v = proxy.visitor();

    // No answer: the challenge, exactly as documented, and nothing else.
    let asked = v.get_json("/drop").await;
    assert_eq!(asked.status, 200);
    let (seed, bits, body) = challenge(&asked);
    assert_eq!(body["algorithm"], "sha256");
    assert_eq!(bits, 8);
    assert_eq!(body["url"], "/__waitroom/proof");
    let expires = body["expires"].as_str().unwrap();
    assert!(expires.ends_with('Z') && expires.contains('T'), "{expires}");
    assert!(v.cookie.is_none(), "no ticket, no pass");
    assert_eq!(origin_requests(&proxy), 0);
    assert_eq!(proxy.state().await["occupancy"], 0);

    // A wrong answer: 403 and a new seed.
    let wrong = (0u64..)
        .map(|n| n.to_string())
        .find(|n| !solves(&seed, n, bits))
        .unwrap();
    let refused = v
        .post_form("/__waitroom/proof", &answer_form(&seed, &wrong))
        .await;
    assert_eq!(refused.status, 403, "{}", refused.body);
    let (again, _, body) = challenge(&refused);
    assert_eq!(body["refused"], "wrong");
    assert_ne!(again, seed, "a new seed");
    assert!(v.cookie.is_none());

    // Malformed answers: no seed, a nonce that is not a decimal number, a forged seed.
    for form in [
        "nonce=1".to_owned(),
        answer_form(&seed, "-1"),
        answer_form(&format!("{seed}x"), "1"),
    ] {
        let refused = v.post_form("/__waitroom/proof", &form).await;
        assert_eq!(refused.status, 403, "{form}");
        assert!(v.cookie.is_none());
    }

    // The right answer: a place (the room has space: a pass), and the shop from then on.
    let nonce = solve(&seed, bits, 0).to_string();
    let admitted = v
        .post_form("/__waitroom/proof", &answer_form(&seed, &nonce))
        .await;
    assert_eq!(admitted.status, 200, "{}", admitted.body);
    assert_eq!(admitted.json()["cfWaitingRoom"]["inWaitingRoom"], false);
    assert!(v.cookie.is_some(), "the pass cookie");
    assert!(v.get("/drop").await.reached_origin());
    assert_eq!(proxy.state().await["occupancy"], 1);

    // The same solution again, from a visitor without a cookie: spent.
    let mut copy = proxy.visitor();
    let replay = copy
        .post_form("/__waitroom/proof", &answer_form(&seed, &nonce))
        .await;
    assert_eq!(replay.status, 403);
    assert_eq!(challenge(&replay).2["refused"], "spent");
    assert!(copy.cookie.is_none());
    assert_eq!(
        proxy.state().await["occupancy"],
        1,
        "one place for one solution"
    );

    let metrics = proxy.metrics().await;
    // "-1" is no decimal nonce (wrong); the forged seed opens to nothing (expired).
    for (result, count) in [
        ("passed", 1),
        ("wrong", 2),
        ("expired", 1),
        ("spent", 1),
        ("malformed", 1),
    ] {
        let series =
            format!("waitroom_proofs_total{{result=\"{result}\",room=\"test-room\"}} {count}");
        assert!(metrics.contains(&series), "{series} in\n{metrics}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_seed_is_refused_with_a_new_one() {
    let proxy = TestProxy::start_with(ROOM, PROOF);
    let mut v = proxy.visitor();
    let (seed, bits, _) = challenge(&v.get_json("/").await);
    let nonce = solve(&seed, bits, 0).to_string();
    proxy.clock.advance(Duration::from_secs(61));
    let late = v
        .post_form("/__waitroom/proof", &answer_form(&seed, &nonce))
        .await;
    assert_eq!(late.status, 403);
    let (fresh, _, body) = challenge(&late);
    assert_eq!(body["refused"], "expired");
    // The new seed works.
    let nonce = solve(&fresh, bits, 0).to_string();
    let placed = v
        .post_form("/__waitroom/proof", &answer_form(&fresh, &nonce))
        .await;
    assert_eq!(placed.status, 200, "{}", placed.body);
    assert_eq!(origin_requests(&proxy), 0);
}

/// A full room: a solution gives a place in line (a ticket), not a pass.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_a_full_room_a_solution_is_a_place_in_line() {
    let proxy = TestProxy::start_with("total_active_users = 1\nnew_users_per_minute = 1000", PROOF);
    let mut first = proxy.visitor();
    let (seed, bits, _) = challenge(&first.get_json("/").await);
    let nonce = solve(&seed, bits, 0).to_string();
    first
        .post_form("/__waitroom/proof", &answer_form(&seed, &nonce))
        .await;
    assert!(first.get("/").await.reached_origin());

    let mut second = proxy.visitor();
    let (seed, bits, _) = challenge(&second.get_json("/").await);
    let nonce = solve(&seed, bits, 0).to_string();
    let queued = second
        .post_form("/__waitroom/proof", &answer_form(&seed, &nonce))
        .await;
    assert_eq!(queued.status, 200);
    let json = queued.json();
    assert_eq!(json["waitroom"]["position"], 1, "{json}");
    assert!(json["waitroom"].get("challenge").is_none());
    assert!(second.cookie.is_some(), "the ticket cookie");
    // Its next request waits in line without a new challenge.
    let again = second.get_json("/").await.json();
    assert_eq!(again["waitroom"]["position"], 1);
    assert_eq!(proxy.state().await["queue_length"], 1);
}

/// Spent on one proxy, refused on the other: the store holds the spent seeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_solution_spent_on_one_proxy_is_refused_on_another_over_redis() {
    let redis = RedisServer::start();
    let proxies = two_proxies_on(&redis);
    let mut v = proxies[0].visitor();
    let (seed, bits, _) = challenge(&v.get_json("/").await);
    let nonce = solve(&seed, bits, 0).to_string();
    let placed = v
        .post_form("/__waitroom/proof", &answer_form(&seed, &nonce))
        .await;
    assert_eq!(placed.status, 200, "{}", placed.body);
    assert!(v.cookie.is_some());

    let mut copy = proxies[1].visitor();
    let replay = copy
        .post_form("/__waitroom/proof", &answer_form(&seed, &nonce))
        .await;
    assert_eq!(replay.status, 403, "{}", replay.body);
    assert_eq!(challenge(&replay).2["refused"], "spent");
    assert!(copy.cookie.is_none());
    // A seed from the first proxy is good on the second (same room, same secret).
    let (seed, bits, _) = challenge(&proxies[0].visitor().get_json("/").await);
    let nonce = solve(&seed, bits, 0).to_string();
    let elsewhere = copy
        .post_form("/__waitroom/proof", &answer_form(&seed, &nonce))
        .await;
    assert_eq!(elsewhere.status, 200, "{}", elsewhere.body);
}

/// An address that keeps asking pays more: a bit per doubling past its free seeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_address_that_keeps_asking_gets_harder_seeds() {
    let proxy = TestProxy::start_with(
        ROOM,
        "[proof_of_work]\nenabled = true\ndifficulty_bits = 8\nfree_seeds_per_minute = 2\n\
         max_difficulty_bits = 11\n",
    );
    let mut bits = Vec::new();
    for _ in 0..17 {
        bits.push(challenge(&proxy.visitor().get_json("/").await).1);
    }
    assert_eq!(
        bits,
        [
            8, 8, 9, 9, 10, 10, 10, 10, 11, 11, 11, 11, 11, 11, 11, 11, 11
        ]
    );
    // A new minute starts the count over.
    proxy.clock.advance(Duration::from_secs(60));
    assert_eq!(challenge(&proxy.visitor().get_json("/").await).1, 8);
}

/// On only for the drop: before the event no proof is asked, while it runs one is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_turns_the_proof_on_for_its_time() {
    let now = waitroom::clock::SystemClock.now_ms();
    let event = format!(
        "[[room.events]]\nname = \"drop\"\nevent_start_time = \"{}\"\nevent_end_time = \"{}\"\n\
         proof_of_work = true\n",
        rfc3339_ms(now + 60_000),
        rfc3339_ms(now + 3_600_000)
    );
    let proxy = TestProxy::start_with(
        &format!("{ROOM}\n{event}"),
        "[proof_of_work]\ndifficulty_bits = 8\n",
    );
    let mut before = proxy.visitor();
    assert!(before.get("/").await.reached_origin(), "no proof before");
    proxy.clock.advance(Duration::from_secs(61));
    let mut during = proxy.visitor();
    let asked = during.get_json("/").await;
    challenge(&asked);
    assert!(during.cookie.is_none());
    // A pass holder from before keeps going.
    assert!(before.get("/").await.reached_origin());
}

/// The built-in page carries the solver and says what it needs; the shared template, rendered
/// by the proxy, carries the same solver and the seed's parts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pages_carry_the_solver() {
    let proxy = TestProxy::start_with(ROOM, PROOF);
    let page = Visitor::new(&proxy.base).get("/").await;
    assert_eq!(page.status, 200);
    assert!(
        page.body.contains("id=\"wr-proof\" data-seed=\"v2."),
        "{}",
        page.body
    );
    assert!(page.body.contains("data-bits=\"8\""));
    assert!(page.body.contains("crypto.subtle.digest"));
    assert!(page.body.contains("<noscript>"));
    assert!(page.body.contains("small calculation"));

    let template = concat!(env!("CARGO_MANIFEST_DIR"), "/infra/cloudflare/waiting.html");
    let shared =
        TestProxy::start_with(ROOM, &format!("{PROOF}[page]\ntemplate = \"{template}\"\n"));
    let page = Visitor::new(&shared.base).get("/").await;
    assert!(
        page.body.contains("id=\"wr-proof\" data-seed=\"v2."),
        "{}",
        page.body
    );
    assert!(page.body.contains("id=\"wr-proof-parts\" data-seed=\"v2."));
    assert!(page.body.contains("data-difficulty-bits=\"8\""));
}

/// One solution posted by 20 clients at once, across two proxies sharing Redis: one place.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_solution_posted_at_once_by_many_clients_is_one_place() {
    let redis = RedisServer::start();
    let proxies = two_proxies_on(&redis);
    let (seed, bits, _) = challenge(&proxies[0].visitor().get_json("/").await);
    let form = answer_form(&seed, &solve(&seed, bits, 0).to_string());
    let answers = futures_util::future::join_all((0..20).map(|i| {
        let mut v = proxies[i % 2].visitor();
        let form = form.clone();
        async move { v.post_form("/__waitroom/proof", &form).await.status }
    }))
    .await;
    assert_eq!(
        answers.iter().filter(|s| **s == 200).count(),
        1,
        "{answers:?}"
    );
    assert_eq!(
        answers.iter().filter(|s| **s == 403).count(),
        19,
        "{answers:?}"
    );
    assert_eq!(proxies[0].state().await["occupancy"], 1);
    assert_eq!(proxies[0].origin.requests().len(), 0);
}
