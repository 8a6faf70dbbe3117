//! The gate on its own: a real memory store (or one that can be taken down), the manual clock
//! and the real admission loop, no HTTP.

use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;

use super::*;
use crate::clock::ManualClock;
use crate::config::Config;
use crate::config::model::Environment;
use crate::core::autopilot::Signal;
use crate::core::history::Share;
use crate::core::history::Start;
use crate::core::ip_limit::IpClaim;
use crate::core::queue_id::QueueId;
use crate::core::room::{FoundVisitor, Limits, PollOutcome, RoomCounts, RoundReport};
use crate::request::view::{Canonical, Head, Sites};
use crate::room::Room;
use crate::room::admission::RoomLoop;
use crate::service::admission::AdmissionLoop;
use crate::store::memory::MemoryStore;
use crate::store::{
    AutopilotRecord, AutopilotState, Joined, SavedSettings, Store, StoreResult, TicketPlace,
};
use crate::token::Signer;

struct NoEnvironment;

impl Environment for NoEnvironment {
    fn var(&self, _name: &str) -> Option<String> {
        None
    }
}

/// The memory store, which can be taken down, counting the polls that reach it.
struct Flaky {
    inner: MemoryStore,
    down: AtomicBool,
    polls: AtomicUsize,
}

impl Flaky {
    fn check(&self) -> StoreResult<()> {
        if self.down.load(Ordering::SeqCst) {
            Err(StoreError::Unavailable("taken down by the test".into()))
        } else {
            Ok(())
        }
    }
}

#[async_trait]
impl Store for Flaky {
    async fn admit_directly(&self, id: &str, limits: &Limits) -> StoreResult<Option<Millis>> {
        self.check()?;
        self.inner.admit_directly(id, limits).await
    }
    async fn admit_unconditionally(&self, id: &str, limits: &Limits) -> StoreResult<Millis> {
        self.check()?;
        self.inner.admit_unconditionally(id, limits).await
    }
    async fn join(
        &self,
        id: &str,
        ticket: Option<&TicketPlace>,
        limits: &Limits,
    ) -> StoreResult<Joined> {
        self.check()?;
        self.inner.join(id, ticket, limits).await
    }
    async fn poll(&self, id: &str, limits: &Limits) -> StoreResult<PollOutcome> {
        self.polls.fetch_add(1, Ordering::SeqCst);
        self.check()?;
        self.inner.poll(id, limits).await
    }
    async fn touch_pass(
        &self,
        id: &str,
        pass_epoch: &str,
        limits: &Limits,
    ) -> StoreResult<Option<Millis>> {
        self.check()?;
        self.inner.touch_pass(id, pass_epoch, limits).await
    }
    async fn end_pass(
        &self,
        id: &str,
        reason: crate::store::RevokeReason,
        limits: &Limits,
    ) -> StoreResult<bool> {
        self.check()?;
        self.inner.end_pass(id, reason, limits).await
    }
    async fn leave_queue(&self, id: &str) -> StoreResult<bool> {
        self.check()?;
        self.inner.leave_queue(id).await
    }
    async fn find_visitor(&self, queue_id: QueueId) -> StoreResult<Option<FoundVisitor>> {
        self.check()?;
        self.inner.find_visitor(queue_id).await
    }
    async fn keep_alive(&self, ids: &[String], limits: &Limits) -> StoreResult<Vec<String>> {
        self.check()?;
        self.inner.keep_alive(ids, limits).await
    }
    async fn claim_ticket(
        &self,
        ip: &str,
        ticket: &str,
        limits: &IpLimits,
    ) -> StoreResult<IpClaim> {
        self.check()?;
        self.inner.claim_ticket(ip, ticket, limits).await
    }
    fn revoked(&self, id: &str) -> Option<crate::store::RevokeReason> {
        self.inner.revoked(id)
    }
    async fn note_network(&self, pass: &str, network: &str, window_ms: Millis) -> StoreResult<u64> {
        self.check()?;
        self.inner.note_network(pass, network, window_ms).await
    }
    async fn spend_seed(&self, id: &str, until: Millis) -> StoreResult<bool> {
        self.check()?;
        self.inner.spend_seed(id, until).await
    }
    async fn report_pass_use(
        &self,
        uses: &[(String, u64)],
    ) -> StoreResult<crate::core::sharing::SharedUse> {
        self.check()?;
        self.inner.report_pass_use(uses).await
    }
    async fn admission_round(&self, limits: &Limits, fence: u64) -> StoreResult<RoundReport> {
        self.check()?;
        self.inner.admission_round(limits, fence).await
    }
    async fn counts(&self) -> StoreResult<RoomCounts> {
        self.check()?;
        self.inner.counts().await
    }
    async fn lead(&self, instance: &str, ttl_ms: Millis) -> StoreResult<Option<u64>> {
        self.check()?;
        self.inner.lead(instance, ttl_ms).await
    }
    async fn resign(&self, instance: &str) -> StoreResult<()> {
        self.inner.resign(instance).await
    }
    async fn leader(&self) -> StoreResult<Option<String>> {
        self.check()?;
        self.inner.leader().await
    }
    async fn save_settings(&self, json: &str) -> StoreResult<u64> {
        self.check()?;
        self.inner.save_settings(json).await
    }
    async fn load_settings(&self) -> StoreResult<Option<SavedSettings>> {
        self.check()?;
        self.inner.load_settings().await
    }
    async fn epoch(&self) -> StoreResult<String> {
        self.check()?;
        self.inner.epoch().await
    }
    async fn ping(&self) -> StoreResult<()> {
        self.check()
    }
    async fn report_window(&self, window: &Signal) -> StoreResult<()> {
        self.check()?;
        self.inner.report_window(window).await
    }
    async fn publish_shares(&self, instance: &str, shares: &[(Millis, Share)]) -> StoreResult<()> {
        self.check()?;
        self.inner.publish_shares(instance, shares).await
    }
    async fn shares_of(
        &self,
        minutes: &[Millis],
        except: &str,
    ) -> StoreResult<Vec<(Millis, Share)>> {
        self.check()?;
        self.inner.shares_of(minutes, except).await
    }
    async fn read_window(&self, started_at: Millis) -> StoreResult<Signal> {
        self.check()?;
        self.inner.read_window(started_at).await
    }
    async fn save_autopilot(&self, record: &AutopilotRecord, fence: u64) -> StoreResult<()> {
        self.check()?;
        self.inner.save_autopilot(record, fence).await
    }
    async fn load_autopilot(&self) -> StoreResult<AutopilotState> {
        self.check()?;
        self.inner.load_autopilot().await
    }
    async fn set_autopilot_paused(&self, paused: bool) -> StoreResult<()> {
        self.check()?;
        self.inner.set_autopilot_paused(paused).await
    }
}

struct Bench {
    gate: Gate,
    /// The room's host and path prefix: `visit` asks there, `ask` only where it covers.
    route: crate::request::route::Route,
    admission: AdmissionLoop,
    store: Arc<Flaky>,
    clock: Arc<ManualClock>,
}

const SECRET: &str = "test-secret-test-secret-test-secret!!";

/// A gate for a room of `room` TOML lines, and `rest` whole sections.
fn bench(room: &str, rest: &str) -> Bench {
    let text = format!(
        "[origin]\naddress = \"127.0.0.1:1\"\n[room]\nid = \"r\"\nname = \"Test drop\"\n\
         admission_interval = \"20ms\"\n{room}\n[pass]\nsecret = \"{SECRET}\"\n\
         [admin]\ntoken = \"{SECRET}\"\n{rest}"
    );
    let (config, _) = Config::parse(&text, &NoEnvironment, false).unwrap();
    let clock = ManualClock::starting_now();
    let store = Arc::new(Flaky {
        inner: MemoryStore::new(clock.clone(), 7),
        down: AtomicBool::new(false),
        polls: AtomicUsize::new(0),
    });
    let metrics = crate::observe::MetricsRegistry::new();
    let room_config = &config.rooms[0];
    let room = Room::new(
        "r",
        room_config.settings.clone(),
        store.clone(),
        clock.clone(),
        &metrics,
    )
    .with_pass_limits(config.pass.limits);
    let room = Arc::new(room);
    let gate = Gate::new(
        room.clone(),
        GateRules {
            signer: Arc::new(Signer::new("r", SECRET.as_bytes()).unwrap()),
            cookie_name: room_config.cookie_name.clone(),
            on_store_error: config.store.on_error,
            ip_limits: config.rate_limit,
            turnstile: config.turnstile.as_ref().map(|t| {
                let verifier = Arc::new(Turnstile::new(t).unwrap());
                TurnstileRule {
                    challenge: Arc::new(verifier.challenge("/__waitroom/turnstile")),
                    verifier,
                }
            }),
            proof: ProofRule::new(config.proof_of_work),
            entry: None,
        },
    );
    let admission = AdmissionLoop::new(
        room.store.clone(),
        vec![Arc::new(RoomLoop::new(room.clone(), Start::FromZero))],
        "instance".into(),
        Duration::from_secs(5),
    );
    Bench {
        gate,
        route: room_config.routes[0].clone(),
        admission,
        store,
        clock,
    }
}

/// One visitor: its cookie (the signed token) and address.
#[derive(Default, Clone)]
struct Visitor {
    cookie: Option<String>,
    ip: Option<IpAddr>,
    headers: Vec<(&'static str, String)>,
}

impl Bench {
    async fn ask(&self, visitor: &Visitor, target: &str) -> Decided {
        let mut headers = http::HeaderMap::new();
        if let Some(token) = &visitor.cookie {
            headers.insert("cookie", format!("waitroom={token}").parse().unwrap());
        }
        for (name, value) in &visitor.headers {
            headers.insert(*name, value.parse().unwrap());
        }
        let head = Head {
            method: &http::Method::GET,
            target: target.as_bytes(),
            host_lines: &[b"shop.example"],
            authority: None,
            needs_host: true,
        };
        let canonical = Canonical::read(head, &Sites::default()).unwrap();
        let request = Request::new(&canonical, &headers, visitor.ip);
        self.gate.decide(&request).await
    }

    /// Asks as a browser would: the token the answer carries becomes the visitor's cookie.
    async fn visit(&self, visitor: &mut Visitor) -> Decision {
        let path = self.route.path.clone();
        let decided = self.ask(visitor, &path).await;
        let signer = Signer::new("r", SECRET.as_bytes()).unwrap();
        match &decided.decision {
            Decision::Answer(Answer::Wait(wait)) if wait.sign => {
                visitor.cookie = Some(signer.sign_ticket(&wait.ticket).unwrap());
            }
            Decision::Forward(Forward {
                pass: Some(pass), ..
            }) => visitor.cookie = Some(signer.sign_pass(pass).unwrap()),
            _ => {}
        }
        decided.decision
    }

    fn take_down(&self, down: bool) {
        self.store.down.store(down, Ordering::SeqCst);
    }

    fn polls(&self) -> usize {
        self.store.polls.load(Ordering::SeqCst)
    }
}

fn outcome(decision: &Decision) -> Outcome {
    decision.outcome()
}

fn position(decision: &Decision) -> Option<u64> {
    match decision {
        Decision::Answer(Answer::Wait(wait)) => wait.position,
        other => panic!("not waiting: {other:?}"),
    }
}

#[tokio::test]
async fn each_decision_for_its_visitor() {
    let b = bench(
        "path = \"/drop\"\ntotal_active_users = 1\nnew_users_per_minute = 60\n\
         bypass = [\"/drop/static/*\"]\nbypass_ips = [\"10.0.0.0/8\"]",
        "",
    );
    let mut first = Visitor::default();
    assert_eq!(outcome(&b.visit(&mut first).await), Outcome::Admitted);
    assert_eq!(outcome(&b.visit(&mut first).await), Outcome::Passed);
    let mut second = Visitor::default();
    assert_eq!(position(&b.visit(&mut second).await), Some(1));
    let static_file = b.ask(&Visitor::default(), "/drop/static/app.js").await;
    assert_eq!(outcome(&static_file.decision), Outcome::Bypassed);
    // Decided on the canonical path: no spelling escapes the room.
    let spelled = b
        .ask(&Visitor::default(), "/drop/static/%2e%2e/checkout")
        .await;
    assert_eq!(outcome(&spelled.decision), Outcome::Queued);
    let office = Visitor {
        ip: Some("10.1.2.3".parse().unwrap()),
        ..Visitor::default()
    };
    assert_eq!(
        outcome(&b.ask(&office, "/drop").await.decision),
        Outcome::Bypassed
    );
}

#[tokio::test]
async fn a_closed_or_suspended_room() {
    let b = bench(
        "total_active_users = 1\nnew_users_per_minute = 60\nqueueing_method = \"reject\"",
        "",
    );
    assert_eq!(
        b.visit(&mut Visitor::default()).await,
        Decision::Answer(Answer::Closed)
    );
    let b = bench(
        "total_active_users = 1\nnew_users_per_minute = 60\nsuspended = true",
        "",
    );
    assert_eq!(
        outcome(&b.visit(&mut Visitor::default()).await),
        Outcome::Unprotected
    );
}

#[tokio::test]
async fn the_per_address_limit_counts_every_new_place() {
    let b = bench(
        "total_active_users = 1\nnew_users_per_minute = 60",
        "[rate_limit]\ntickets_per_ip_per_minute = 1\nburst = 2\nmax_live_tickets_per_ip = 0",
    );
    let ip = Some("203.0.113.9".parse().unwrap());
    // Let in at once, yet a new place from the address all the same: it takes a token.
    let mut inside = Visitor {
        ip,
        ..Visitor::default()
    };
    assert_eq!(outcome(&b.visit(&mut inside).await), Outcome::Admitted);
    let mut waiting = Visitor {
        ip,
        ..Visitor::default()
    };
    assert_eq!(position(&b.visit(&mut waiting).await), Some(1));
    let refused = b
        .visit(&mut Visitor {
            ip,
            ..Visitor::default()
        })
        .await;
    assert!(
        matches!(
            refused,
            Decision::Answer(Answer::Limited {
                limit: Limit::TooFast,
                retry_after_secs: 1..=60,
            })
        ),
        "{refused:?}"
    );
    // The visitors who hold a ticket or a pass keep asking without counting.
    assert_eq!(position(&b.visit(&mut waiting).await), Some(1));
    assert_eq!(outcome(&b.visit(&mut inside).await), Outcome::Passed);
}

#[tokio::test]
async fn one_address_cannot_take_a_room_with_space_by_plain_requests() {
    let b = bench(
        "total_active_users = 5\nnew_users_per_minute = 600",
        "[rate_limit]\ntickets_per_ip_per_minute = 1\nburst = 1\nmax_live_tickets_per_ip = 1",
    );
    let ip = Some("203.0.113.9".parse().unwrap());
    let mut outcomes = Vec::new();
    for _ in 0..7 {
        let mut v = Visitor {
            ip,
            ..Visitor::default()
        };
        outcomes.push(outcome(&b.visit(&mut v).await));
    }
    assert_eq!(
        outcomes.iter().filter(|o| **o == Outcome::Admitted).count(),
        1,
        "{outcomes:?}"
    );
    assert_eq!(
        outcomes.iter().filter(|o| **o == Outcome::Limited).count(),
        6,
        "{outcomes:?}"
    );
    let mut elsewhere = Visitor {
        ip: Some("198.51.100.1".parse().unwrap()),
        ..Visitor::default()
    };
    assert_eq!(outcome(&b.visit(&mut elsewhere).await), Outcome::Admitted);
}

#[tokio::test]
async fn the_ticket_of_a_revoked_visitor_is_no_ticket() {
    let b = bench("total_active_users = 1\nnew_users_per_minute = 600", "");
    let mut inside = Visitor::default();
    assert_eq!(outcome(&b.visit(&mut inside).await), Outcome::Admitted);
    let mut waiting = Visitor::default();
    let Decision::Answer(Answer::Wait(wait)) = b.visit(&mut waiting).await else {
        panic!("the room is full");
    };
    let ticket_cookie = waiting.cookie.clone();
    b.gate.end_pass(&wait.ticket.id).await.unwrap();
    // The revoked visitor's ticket (or a copy of it) gets no place under its id: it is a
    // newcomer, under a new one.
    let mut replay = Visitor {
        cookie: ticket_cookie,
        ..Visitor::default()
    };
    let Decision::Answer(Answer::Wait(again)) = b.visit(&mut replay).await else {
        panic!("still full");
    };
    assert_ne!(again.ticket.id, wait.ticket.id);
}

#[tokio::test]
async fn the_bot_challenge_comes_before_a_place() {
    let b = bench(
        "total_active_users = 1\nnew_users_per_minute = 60",
        "[turnstile]\nsite_key = \"1x00000000000000000000AA\"\nsecret = \"1x0000000000000000000000000000000AA\"",
    );
    assert_eq!(
        outcome(&b.visit(&mut Visitor::default()).await),
        Outcome::Admitted
    );
    assert!(matches!(
        b.visit(&mut Visitor::default()).await,
        Decision::Answer(Answer::Challenge { queued: 0, .. })
    ));
}

#[tokio::test]
async fn polls_are_answered_from_the_ticket_while_fresh() {
    let b = bench(
        "total_active_users = 1\nnew_users_per_minute = 60\nabandon_after = \"10m\"\n\
         session_duration = \"1h\"",
        "",
    );
    let mut inside = Visitor::default();
    b.visit(&mut inside).await;
    let mut waiting = Visitor::default();
    assert_eq!(position(&b.visit(&mut waiting).await), Some(1));
    // Until the loop has seen the store's epoch for an abandon_after, every poll is exact.
    b.admission.tick().await;
    let before = b.polls();
    assert_eq!(position(&b.visit(&mut waiting).await), Some(1));
    assert_eq!(b.polls(), before + 1, "an epoch just seen: exact");
    // Half-way through, still exact (the poll also keeps the place in the store).
    b.clock.advance(Duration::from_secs(300));
    assert_eq!(position(&b.visit(&mut waiting).await), Some(1));
    assert_eq!(b.polls(), before + 2);
    b.clock.advance(Duration::from_secs(300));
    b.admission.tick().await;
    assert_eq!(position(&b.visit(&mut waiting).await), Some(1));
    let exact = b.polls();
    assert_eq!(
        exact,
        before + 3,
        "settled, but seen five minutes ago: exact"
    );
    b.clock.advance(Duration::from_secs(60));
    assert_eq!(position(&b.visit(&mut waiting).await), Some(1));
    assert_eq!(
        b.polls(),
        exact,
        "seen a minute ago: answered from the ticket"
    );
    b.clock.advance(Duration::from_secs(61));
    assert_eq!(position(&b.visit(&mut waiting).await), Some(1));
    assert_eq!(
        b.polls(),
        exact + 1,
        "two minutes since the last exact look-up"
    );
    // A store that does not answer is never trusted to be standing still.
    b.take_down(true);
    b.admission.tick().await;
    assert_eq!(position(&b.visit(&mut waiting).await), None);
    assert_eq!(b.polls(), exact + 2);
}

#[tokio::test]
async fn a_called_visitor_is_looked_up_at_once() {
    let b = bench(
        "total_active_users = 1\nnew_users_per_minute = 6000\nabandon_after = \"10m\"\n\
         session_duration = \"1h\"",
        "",
    );
    let mut inside = Visitor::default();
    b.visit(&mut inside).await;
    let mut waiting = Visitor::default();
    b.visit(&mut waiting).await;
    b.clock.advance(Duration::from_secs(600));
    b.admission.tick().await;
    b.visit(&mut waiting).await;
    // The one inside leaves; the next round calls the waiting visitor.
    let mut leaving = http::HeaderMap::new();
    leaving.insert(
        "cookie",
        format!("waitroom={}", inside.cookie.clone().unwrap())
            .parse()
            .unwrap(),
    );
    let head = Head {
        method: &http::Method::POST,
        target: b"/__waitroom/leave",
        host_lines: &[b"shop.example"],
        authority: None,
        needs_host: true,
    };
    let canonical = Canonical::read(head, &Sites::default()).unwrap();
    let left = b
        .gate
        .leave(&Request::new(&canonical, &leaving, None))
        .await;
    assert!(matches!(left, Ok(true)), "{left:?}");
    b.admission.tick().await;
    b.admission.tick().await;
    assert_eq!(outcome(&b.visit(&mut waiting).await), Outcome::Admitted);
}

#[tokio::test]
async fn on_error_closed_queues_newcomers_with_offline_tickets_placed_on_return() {
    let b = bench("total_active_users = 1\nnew_users_per_minute = 60", "");
    let mut inside = Visitor::default();
    b.visit(&mut inside).await;
    let mut early = Visitor::default();
    assert_eq!(position(&b.visit(&mut early).await), Some(1));
    b.clock.advance(Duration::from_secs(1));
    b.take_down(true);
    let mut newcomer = Visitor::default();
    match b.visit(&mut newcomer).await {
        Decision::Answer(Answer::Wait(wait)) => {
            assert_eq!(wait.ticket.epoch, "offline");
            assert_eq!(wait.position, None);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        outcome(&b.visit(&mut inside).await),
        Outcome::Passed,
        "a pass verifies without the store"
    );
    b.clock.advance(Duration::from_secs(1));
    b.take_down(false);
    assert_eq!(position(&b.visit(&mut early).await), Some(1));
    assert_eq!(
        position(&b.visit(&mut newcomer).await),
        Some(2),
        "behind the one who came first"
    );
}

#[tokio::test]
async fn on_error_open_lets_newcomers_through() {
    let b = bench(
        "total_active_users = 1\nnew_users_per_minute = 60",
        "[store]\non_error = \"open\"",
    );
    let mut inside = Visitor::default();
    b.visit(&mut inside).await;
    let mut waiting = Visitor::default();
    b.visit(&mut waiting).await;
    b.take_down(true);
    assert_eq!(
        outcome(&b.visit(&mut Visitor::default()).await),
        Outcome::Unprotected
    );
    assert_eq!(outcome(&b.visit(&mut waiting).await), Outcome::Unprotected);
}

#[tokio::test]
async fn a_store_outage_is_counted_per_call_and_health_follows_the_last_one() {
    let b = bench("total_active_users = 1\nnew_users_per_minute = 60", "");
    b.take_down(true);
    for _ in 0..50 {
        b.visit(&mut Visitor::default()).await;
    }
    assert!(!b.gate.room.health.is_up());
    assert_eq!(b.gate.room.metrics.store_errors.get(), 50);
    b.take_down(false);
    b.visit(&mut Visitor::default()).await;
    assert!(b.gate.room.health.is_up());
}

#[tokio::test]
async fn a_suspension_held_during_an_outage_is_laid_over_what_another_instance_saved_meanwhile() {
    use crate::room::admission::{PublishError, Published};
    let b = bench("total_active_users = 1\nnew_users_per_minute = 60", "");
    let room = b.admission.room("r").unwrap().clone();
    b.admission.tick().await;
    b.take_down(true);
    b.clock.advance(Duration::from_secs(2));
    b.admission.tick().await;
    assert!(!b.gate.room.health.is_up());

    let limits = b
        .gate
        .room
        .settings
        .configured()
        .patched(&serde_json::json!({ "total_active_users": 5 }))
        .unwrap();
    assert!(matches!(
        room.change_settings(limits, &["total_active_users"], "a test")
            .await,
        Err(PublishError::NotHeld(_))
    ));
    let suspended = b
        .gate
        .room
        .settings
        .configured()
        .patched(&serde_json::json!({ "suspended": true }))
        .unwrap();
    let Ok(Published::Held { pending, .. }) = room
        .change_settings(suspended, &["suspended"], "a test")
        .await
    else {
        panic!("suspended is held during an outage");
    };
    assert_eq!(
        serde_json::Value::Object(pending),
        serde_json::json!({ "suspended": true })
    );
    assert_eq!(
        outcome(&b.visit(&mut Visitor::default()).await),
        Outcome::Unprotected,
        "suspended here at once"
    );

    // Another instance, still reaching the store, changed the limits (and not suspended).
    let mut other = serde_json::to_value(&b.gate.room.settings.configured().section).unwrap();
    other["total_active_users"] = 9.into();
    other["suspended"] = false.into();
    let other_version = b
        .store
        .inner
        .save_settings(&other.to_string())
        .await
        .unwrap();

    b.take_down(false);
    // A quiet room is looked at once a second.
    b.clock.advance(Duration::from_secs(2));
    b.admission.tick().await;
    assert_eq!(room.pending(), None, "written once the store answers");
    let saved = b.store.inner.load_settings().await.unwrap().unwrap();
    assert!(
        saved.version > other_version,
        "a new version, as any change"
    );
    let saved: serde_json::Value = serde_json::from_str(&saved.json).unwrap();
    let saved = &saved["room"];
    assert_eq!(saved["suspended"], true, "the held key wins: {saved}");
    assert_eq!(
        saved["total_active_users"], 9,
        "the other keys stay: {saved}"
    );
    let now = b.gate.room.settings.now();
    assert!(now.suspended && now.total_active_users == 9);
}

#[tokio::test]
async fn a_visitor_called_before_an_outage_may_claim_its_turn_after_it() {
    let b = bench(
        "total_active_users = 1\nnew_users_per_minute = 6000\nclaim_window = \"4s\"\n\
         abandon_after = \"10m\"\nsession_duration = \"1h\"",
        "",
    );
    let mut inside = Visitor::default();
    let Decision::Forward(Forward {
        pass: Some(pass), ..
    }) = b.visit(&mut inside).await
    else {
        panic!("the room is empty");
    };
    let mut first = Visitor::default();
    assert_eq!(position(&b.visit(&mut first).await), Some(1));
    let mut second = Visitor::default();
    assert_eq!(position(&b.visit(&mut second).await), Some(2));
    b.admission.tick().await;
    b.gate.end_pass(&pass.id).await.unwrap();
    // The round calls the first; before it polls again, the store goes away for longer than
    // its claim window.
    b.admission.tick().await;
    b.take_down(true);
    b.clock.advance(Duration::from_secs(10));
    b.admission.tick().await;
    b.take_down(false);
    b.admission.tick().await;
    assert_eq!(
        outcome(&b.visit(&mut first).await),
        Outcome::Admitted,
        "called before the outage, it claims its turn after it"
    );
    b.clock.advance(Duration::from_secs(5));
    b.admission.tick().await;
    assert_eq!(position(&b.visit(&mut second).await), Some(1));
}
