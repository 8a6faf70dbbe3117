//! The Redis store through the conformance suite, each test on its own `redis-server`, plus what
//! only a shared store has: several instances, revocations between them, losing and keeping the
//! data across a restart, an outage, a password (never shown in an error or a log line).
#![allow(clippy::unwrap_used)]

mod common;

use std::future::Future;
use std::net::TcpListener;
use std::sync::{Arc, Mutex, Once};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use waitroom::clock::{Clock, ManualClock, Millis};
use waitroom::core::autopilot::{Exchange, Setpoint, Signal, window_start};
use waitroom::core::history::Share;
use waitroom::core::ip_limit::{IpClaim, IpLimits, RETAIN_LIVE_MS};
use waitroom::core::queue_id::QueueId;
use waitroom::core::room::{FoundVisitor, Limits, PollOutcome, RoomCounts, RoundReport};
use waitroom::core::sharing::{MINUTE_MS, SharedUse};
use waitroom::store::redis::{RedisOptions, RedisStore, TimeSource};
use waitroom::store::{
    AutopilotRecord, AutopilotState, Joined, RevokeReason, SavedSettings, Store, StoreError,
    StoreResult, TicketPlace, window_kept_until,
};

use common::conformance::limits;
use common::redis_server::{RedisCluster, RedisServer};

const COMMAND_TIMEOUT: Duration = Duration::from_millis(500);

fn options(server: &RedisServer, room: &str, time: TimeSource) -> RedisOptions {
    RedisOptions {
        url: server.url(),
        prefix: "wrtest:".into(),
        room: room.into(),
        connect_timeout: Duration::from_secs(2),
        command_timeout: COMMAND_TIMEOUT,
        time,
        seed: 42,
        ..RedisOptions::new(server.url(), room)
    }
}

async fn store(server: &RedisServer, room: &str, clock: &Arc<ManualClock>) -> RedisStore {
    RedisStore::connect(options(server, room, TimeSource::Clock(clock.clone())))
        .await
        .unwrap()
}

/// A store with the server it runs on, for the conformance suite.
struct Served {
    store: RedisStore,
    _server: RedisServer,
}

#[async_trait]
impl Store for Served {
    async fn admit_directly(&self, id: &str, l: &Limits) -> StoreResult<Option<Millis>> {
        self.store.admit_directly(id, l).await
    }
    async fn admit_unconditionally(&self, id: &str, l: &Limits) -> StoreResult<Millis> {
        self.store.admit_unconditionally(id, l).await
    }
    async fn join(&self, id: &str, t: Option<&TicketPlace>, l: &Limits) -> StoreResult<Joined> {
        self.store.join(id, t, l).await
    }
    async fn poll(&self, id: &str, l: &Limits) -> StoreResult<PollOutcome> {
        self.store.poll(id, l).await
    }
    async fn touch_pass(&self, id: &str, e: &str, l: &Limits) -> StoreResult<Option<Millis>> {
        self.store.touch_pass(id, e, l).await
    }
    async fn end_pass(&self, id: &str, r: RevokeReason, l: &Limits) -> StoreResult<bool> {
        self.store.end_pass(id, r, l).await
    }
    async fn leave_queue(&self, id: &str) -> StoreResult<bool> {
        self.store.leave_queue(id).await
    }
    async fn find_visitor(&self, q: QueueId) -> StoreResult<Option<FoundVisitor>> {
        self.store.find_visitor(q).await
    }
    async fn claim_ticket(&self, ip: &str, t: &str, l: &IpLimits) -> StoreResult<IpClaim> {
        self.store.claim_ticket(ip, t, l).await
    }
    fn revoked(&self, id: &str) -> Option<RevokeReason> {
        self.store.revoked(id)
    }
    async fn note_network(&self, pass: &str, network: &str, window_ms: Millis) -> StoreResult<u64> {
        self.store.note_network(pass, network, window_ms).await
    }
    async fn spend_seed(&self, id: &str, until: Millis) -> StoreResult<bool> {
        self.store.spend_seed(id, until).await
    }
    async fn report_pass_use(&self, uses: &[(String, u64)]) -> StoreResult<SharedUse> {
        self.store.report_pass_use(uses).await
    }
    async fn admission_round(&self, l: &Limits, fence: u64) -> StoreResult<RoundReport> {
        self.store.admission_round(l, fence).await
    }
    async fn counts(&self) -> StoreResult<RoomCounts> {
        self.store.counts().await
    }
    async fn lead(&self, instance: &str, ttl_ms: Millis) -> StoreResult<Option<u64>> {
        self.store.lead(instance, ttl_ms).await
    }
    async fn resign(&self, instance: &str) -> StoreResult<()> {
        self.store.resign(instance).await
    }
    async fn leader(&self) -> StoreResult<Option<String>> {
        self.store.leader().await
    }
    async fn save_settings(&self, json: &str) -> StoreResult<u64> {
        self.store.save_settings(json).await
    }
    async fn load_settings(&self) -> StoreResult<Option<SavedSettings>> {
        self.store.load_settings().await
    }
    async fn epoch(&self) -> StoreResult<String> {
        self.store.epoch().await
    }
    async fn keep_alive(&self, ids: &[String], limits: &Limits) -> StoreResult<Vec<String>> {
        self.store.keep_alive(ids, limits).await
    }
    async fn report_window(&self, window: &Signal) -> StoreResult<()> {
        self.store.report_window(window).await
    }
    async fn publish_shares(&self, instance: &str, shares: &[(Millis, Share)]) -> StoreResult<()> {
        self.store.publish_shares(instance, shares).await
    }
    async fn shares_of(
        &self,
        minutes: &[Millis],
        except: &str,
    ) -> StoreResult<Vec<(Millis, Share)>> {
        self.store.shares_of(minutes, except).await
    }
    async fn read_window(&self, started_at: Millis) -> StoreResult<Signal> {
        self.store.read_window(started_at).await
    }
    async fn save_autopilot(&self, record: &AutopilotRecord, fence: u64) -> StoreResult<()> {
        self.store.save_autopilot(record, fence).await
    }
    async fn load_autopilot(&self) -> StoreResult<AutopilotState> {
        self.store.load_autopilot().await
    }
    async fn set_autopilot_paused(&self, paused: bool) -> StoreResult<()> {
        self.store.set_autopilot_paused(paused).await
    }
    async fn ping(&self) -> StoreResult<()> {
        self.store.ping().await
    }
}

async fn make() -> (Served, Arc<ManualClock>) {
    let server = RedisServer::start();
    let clock = ManualClock::starting_now();
    let store = store(&server, "conformance", &clock).await;
    (
        Served {
            store,
            _server: server,
        },
        clock,
    )
}

store_conformance!(make);

/// Retries until the store answers again (the first call after an outage may fail while the
/// connection is re-established).
async fn eventually<T, F: Future<Output = StoreResult<T>>>(mut f: impl FnMut() -> F) -> T {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match f().await {
            Ok(v) => return v,
            Err(e) if Instant::now() < deadline => {
                eprintln!("not yet: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("the store did not come back: {e}"),
        }
    }
}

fn waiting(outcome: PollOutcome) -> (u64, u64) {
    match outcome {
        PollOutcome::Waiting { position, queued } => (position, queued),
        other => panic!("expected to wait, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_act_as_one_room() {
    let server = RedisServer::start();
    let clock = ManualClock::starting_now();
    let a = Arc::new(store(&server, "shared", &clock).await);
    let b = Arc::new(store(&server, "shared", &clock).await);
    let l = limits(25, 10_000);
    let fence = a.lead("a", 10_000).await.unwrap().unwrap();
    let mut tasks = Vec::new();
    for i in 0..200 {
        let store = if i % 2 == 0 { a.clone() } else { b.clone() };
        let l = l.clone();
        tasks.push(tokio::spawn(async move {
            let id = format!("v{i:03}");
            if store.admit_directly(&id, &l).await.unwrap().is_none() {
                store.join(&id, None, &l).await.unwrap();
            }
            if i % 10 == 0 {
                store.admission_round(&l, fence).await.unwrap();
            }
            let _ = store.poll(&id, &l).await.unwrap();
            if i % 7 == 0 {
                store.end_pass(&id, RevokeReason::Ended, &l).await.unwrap();
            }
            store.counts().await.unwrap().occupancy()
        }));
    }
    for t in tasks {
        let occupancy = t.await.unwrap();
        assert!(occupancy <= 25, "{occupancy}");
    }
    b.admission_round(&l, fence).await.unwrap();
    let (ca, cb) = (a.counts().await.unwrap(), b.counts().await.unwrap());
    assert_eq!(ca, cb, "one room seen from both");
    assert!(ca.occupancy() <= 25);

    // Arrival order holds across instances.
    let a = store(&server, "fifo", &clock).await;
    let b = store(&server, "fifo", &clock).await;
    let l = limits(5, 10_000);
    for i in 0..20 {
        let (this, other) = if i % 2 == 0 { (&a, &b) } else { (&b, &a) };
        let j = this.join(&format!("v{i:02}"), None, &l).await.unwrap();
        assert_eq!(j.position, i + 1);
        let seen = waiting(other.poll(&format!("v{i:02}"), &l).await.unwrap());
        assert_eq!(seen, (i + 1, i + 1));
    }
    let fence = b.lead("b", 10_000).await.unwrap().unwrap();
    assert_eq!(a.admission_round(&l, fence).await.unwrap().called, 5);
    for i in 0..5 {
        assert!(matches!(
            b.poll(&format!("v{i:02}"), &l).await.unwrap(),
            PollOutcome::Admitted { .. }
        ));
    }
    assert_eq!(waiting(a.poll("v05", &l).await.unwrap()), (1, 15));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revocation_on_one_instance_is_refused_by_the_others_within_a_second() {
    let server = RedisServer::start();
    let connect = || RedisStore::connect(options(&server, "revoke", TimeSource::Server));
    let (a, b) = (connect().await.unwrap(), connect().await.unwrap());
    let l = limits(10, 100);
    a.admit_directly("x", &l).await.unwrap().unwrap();
    assert!(b.revoked("x").is_none());
    assert!(a.end_pass("x", RevokeReason::Ended, &l).await.unwrap());
    assert!(
        a.revoked("x").is_some(),
        "at once on the instance that ended it"
    );
    let started = Instant::now();
    while b.revoked("x").is_none() {
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "b still admits x"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }

    // A revocation whose message was missed (written straight into the set) is still picked up
    // by the periodic reload.
    let until = (std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis()
        + 60_000)
        .to_string();
    server.command(&["ZADD", "wrtest:{revoke}:revoked", &until, "missed"]);
    let started = Instant::now();
    while b.revoked("missed").is_none() {
        assert!(
            started.elapsed() < Duration::from_millis(1_500),
            "reload missed it"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(b.revoked("missed"), Some(RevokeReason::Ended));

    // Why a pass was revoked travels with it: by the feed, and by the reload.
    a.admit_directly("y", &l).await.unwrap().unwrap();
    assert!(a.end_pass("y", RevokeReason::Shared, &l).await.unwrap());
    let started = Instant::now();
    while b.revoked("y").is_none() {
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "b still admits y"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(b.revoked("y"), Some(RevokeReason::Shared));
    server.command(&["ZADD", "wrtest:{revoke}:revoked", &until, "z"]);
    server.command(&["ZADD", "wrtest:{revoke}:revoked", &until, "shared:z"]);
    let started = Instant::now();
    while b.revoked("z").is_none() {
        assert!(
            started.elapsed() < Duration::from_millis(1_500),
            "reload missed z"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(b.revoked("z"), Some(RevokeReason::Shared));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_of_two_instances_leads_and_the_other_takes_over_after_the_ttl() {
    let server = RedisServer::start();
    let clock = ManualClock::starting_now();
    let a = store(&server, "lead", &clock).await;
    let b = store(&server, "lead", &clock).await;
    let l = limits(1, 100);
    let fa = a.lead("a", 3_000).await.unwrap().unwrap();
    assert_eq!(b.lead("b", 3_000).await.unwrap(), None);
    assert_eq!(b.leader().await.unwrap().as_deref(), Some("a"));
    b.admission_round(&l, fa).await.unwrap();
    clock.advance(Duration::from_millis(3_000));
    let fb = b.lead("b", 3_000).await.unwrap().unwrap();
    assert!(fb > fa);
    assert_eq!(a.lead("a", 3_000).await.unwrap(), None);
    assert_eq!(a.leader().await.unwrap().as_deref(), Some("b"));
    assert!(matches!(
        a.admission_round(&l, fa).await,
        Err(StoreError::NotLeader(_))
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_room_admits_at_once() {
    let server = RedisServer::start();
    let clock = ManualClock::starting_now();
    let a = store(&server, "new", &clock).await;
    let l = limits(5, 100);
    assert!(a.admit_directly("first", &l).await.unwrap().is_some());
    let b = store(&server, "new", &clock).await;
    b.join("w", None, &l).await.unwrap();
    let fence = b.lead("b", 10_000).await.unwrap().unwrap();
    assert_eq!(b.admission_round(&l, fence).await.unwrap().called, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn losing_the_data_restores_places_and_passes_and_pauses_admission_for_a_session() {
    let mut server = RedisServer::start();
    let clock = ManualClock::starting_now();
    let a = store(&server, "lost", &clock).await;
    let b = store(&server, "lost", &clock).await;
    let l = limits(3, 100);
    let pass_expiry = a.admit_directly("p", &l).await.unwrap().unwrap();
    let early = a.join("early", None, &l).await.unwrap();
    b.join("other", None, &l).await.unwrap();
    let old_epoch = early.epoch.clone();
    clock.advance(Duration::from_secs(1));

    server.restart();

    // The next call finds no epoch: a new one, the loss noted.
    let late = eventually(|| b.join("late", None, &l)).await;
    assert_ne!(late.epoch, old_epoch);
    assert_eq!(late.position, 1, "everything else was lost");
    let back = a
        .join(
            "early",
            Some(&TicketPlace {
                place: early.place,
                epoch: old_epoch.clone(),
            }),
            &l,
        )
        .await
        .unwrap();
    assert_eq!(
        (back.place, back.position, back.queued),
        (early.place, 1, 2)
    );
    let touched = a.touch_pass("p", &old_epoch, &l).await.unwrap().unwrap();
    assert!(touched > pass_expiry);
    assert_eq!(a.counts().await.unwrap().passes, 1);

    // Admissions pause for a session from the loss, on every instance.
    let fence = a.lead("a", 120_000).await.unwrap().unwrap();
    assert_eq!(b.admission_round(&l, fence).await.unwrap().called, 0);
    a.leave_queue("early").await.unwrap();
    a.leave_queue("late").await.unwrap();
    assert_eq!(b.admit_directly("direct", &l).await.unwrap(), None);
    clock.advance(Duration::from_secs(59));
    a.touch_pass("p", &late.epoch, &l).await.unwrap().unwrap();
    assert_eq!(a.admit_directly("direct", &l).await.unwrap(), None);
    clock.advance(Duration::from_secs(1));
    assert!(a.admit_directly("direct", &l).await.unwrap().is_some());
    b.join("after", None, &l).await.unwrap();
    assert_eq!(b.admission_round(&l, fence).await.unwrap().called, 1);
    assert_eq!(b.counts().await.unwrap().occupancy(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_that_connects_after_a_loss_also_pauses_once_another_notices() {
    let mut server = RedisServer::start();
    let clock = ManualClock::starting_now();
    let old = store(&server, "late", &clock).await;
    let l = limits(3, 100);
    old.join("w", None, &l).await.unwrap();
    server.restart();
    // A new instance cannot tell a loss from a new room...
    let fresh = store(&server, "late", &clock).await;
    fresh.join("x", None, &l).await.unwrap();
    // ...until one that saw the old epoch comes by: the pause counts from the new epoch's birth.
    eventually(|| old.counts()).await;
    let fence = fresh.lead("fresh", 120_000).await.unwrap().unwrap();
    assert_eq!(fresh.admission_round(&l, fence).await.unwrap().called, 0);
    clock.advance(Duration::from_secs(60));
    fresh.poll("x", &l).await.unwrap();
    assert_eq!(fresh.admission_round(&l, fence).await.unwrap().called, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_with_the_data_keeps_places_and_admits_at_once() {
    let mut server = RedisServer::start_persistent();
    let clock = ManualClock::starting_now();
    let a = store(&server, "kept", &clock).await;
    let l = limits(2, 100);
    a.admit_directly("p", &l).await.unwrap().unwrap();
    let w1 = a.join("w1", None, &l).await.unwrap();
    let w2 = a.join("w2", None, &l).await.unwrap();
    let fence = a.lead("a", 60_000).await.unwrap().unwrap();

    server.restart();

    let again = eventually(|| a.join("w2", None, &l)).await;
    assert_eq!(again, w2);
    assert_eq!(waiting(a.poll("w1", &l).await.unwrap()), (1, 2));
    assert!(a.touch_pass("p", &w1.epoch, &l).await.unwrap().is_some());
    assert_eq!(a.admission_round(&l, fence).await.unwrap().called, 1);
    assert!(matches!(
        a.poll("w1", &l).await.unwrap(),
        PollOutcome::Admitted { .. }
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_fails_fast_and_the_same_store_recovers() {
    let mut server = RedisServer::start_persistent();
    let clock = ManualClock::starting_now();
    let a = store(&server, "outage", &clock).await;
    let l = limits(2, 100);
    a.admit_directly("p", &l).await.unwrap().unwrap();
    a.end_pass("p", RevokeReason::Ended, &l).await.unwrap();
    a.join("w", None, &l).await.unwrap();

    server.kill();

    for _ in 0..3 {
        let started = Instant::now();
        let polled = a.poll("w", &l).await;
        assert!(
            matches!(polled, Err(StoreError::Unavailable(_))),
            "{polled:?}"
        );
        assert!(
            started.elapsed() < COMMAND_TIMEOUT + Duration::from_millis(250),
            "took {:?}",
            started.elapsed()
        );
        let started = Instant::now();
        assert!(matches!(a.ping().await, Err(StoreError::Unavailable(_))));
        assert!(matches!(a.counts().await, Err(StoreError::Unavailable(_))));
        assert!(started.elapsed() < 2 * COMMAND_TIMEOUT + Duration::from_millis(250));
    }
    assert!(
        a.revoked("p").is_some(),
        "revocations are still refused locally"
    );

    server.restart();

    eventually(|| a.ping()).await;
    assert_eq!(waiting(a.poll("w", &l).await.unwrap()), (1, 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_data_is_reported_as_corrupt() {
    let server = RedisServer::start();
    let clock = ManualClock::starting_now();
    let l = limits(1, 100);
    let a = store(&server, "wrongtype", &clock).await;
    server.command(&["SET", "wrtest:{wrongtype}:queue", "not a sorted set"]);
    let joined = a.join("v", None, &l).await;
    assert!(matches!(joined, Err(StoreError::Corrupt(_))), "{joined:?}");

    let b = store(&server, "garbage", &clock).await;
    server.command(&["RPUSH", "wrtest:{garbage}:recent", "garbage"]);
    let counts = b.counts().await;
    assert!(matches!(counts, Err(StoreError::Corrupt(_))), "{counts:?}");

    server.command(&["HSET", "wrtest:{garbage}:autopilot", "record", "{\"total\""]);
    let state = b.load_autopilot().await;
    assert!(matches!(state, Err(StoreError::Corrupt(_))), "{state:?}");
    let key = "wrtest:{garbage}:autopilot:w:10000";
    server.command(&["HSET", key, "until", "99999999999999", "requests", "many"]);
    let window = b.read_window(10_000).await;
    assert!(matches!(window, Err(StoreError::Corrupt(_))), "{window:?}");
}

/// One instance's window of `n` responses of `latency_ms`.
fn responses(started_at: Millis, n: u64, latency_ms: u64) -> Signal {
    let mut w = Signal::new(started_at);
    for _ in 0..n {
        w.record(Exchange::Response {
            status: 200,
            latency: Duration::from_millis(latency_ms),
        });
    }
    w.ended_at = started_at + 10_000;
    w
}

fn setpoint(total_active_users: u64) -> Setpoint {
    Setpoint {
        total_active_users,
        new_users_per_minute: total_active_users * 2,
        burst: total_active_users,
    }
}

/// The autopilot between instances: each reports its window into the same hash, in the room's
/// slot; the leader's record, and the pause set on another instance, are seen by all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instances_share_the_autopilot_windows_and_state() {
    let server = RedisServer::start();
    let clock = ManualClock::starting_now();
    let a = store(&server, "pilot", &clock).await;
    let b = store(&server, "pilot", &clock).await;
    let start = window_start(clock.now_ms(), 10_000) - 10_000;
    let (wa, wb) = (responses(start, 300, 40), responses(start, 100, 400));
    a.report_window(&wa).await.unwrap();
    b.report_window(&wb).await.unwrap();
    let mut both = wa.clone();
    both.merge(&wb);
    assert_eq!(a.read_window(start).await.unwrap(), both);
    assert_eq!(b.read_window(start).await.unwrap(), both);
    // 100 of 400 at 400 ms: the p95 of the room is the slow instance's.
    let p95 = both.p95().unwrap();
    assert!(
        p95 >= Duration::from_millis(375) && p95 <= Duration::from_millis(425),
        "{p95:?}"
    );

    // Its hash, in the room's slot, expires by itself once past keeping.
    let key = format!("wrtest:{{pilot}}:autopilot:w:{start}");
    let pttl: i64 = server
        .command(&["PTTL", &key])
        .trim_start_matches(':')
        .trim()
        .parse()
        .unwrap();
    let kept_for = window_kept_until(&wa) - clock.now_ms();
    assert!(
        pttl > kept_for - 5_000 && pttl <= kept_for,
        "PTTL {pttl} ms, kept for {kept_for} ms"
    );

    let fence = a.lead("a", 5_000).await.unwrap().unwrap();
    let record = AutopilotRecord {
        setpoint: setpoint(42),
        start: setpoint(100),
        reason: "breach".into(),
        changed_at: clock.now_ms(),
    };
    a.save_autopilot(&record, fence).await.unwrap();
    b.set_autopilot_paused(true).await.unwrap();
    let seen = AutopilotState {
        paused: true,
        record: Some(record.clone()),
    };
    assert_eq!(a.load_autopilot().await.unwrap(), seen);
    assert_eq!(b.load_autopilot().await.unwrap(), seen);
    // A token below the leader's, from any instance, is refused.
    assert!(matches!(
        b.save_autopilot(&record, fence - 1).await,
        Err(StoreError::NotLeader(_))
    ));
    let stored = server.command(&["HGET", "wrtest:{pilot}:autopilot", "record"]);
    assert!(
        stored.contains(r#""total_active_users":42"#) && stored.contains(r#""start":{"#),
        "readable JSON: {stored}"
    );
}

/// A loss of the data takes the autopilot's state with it: every instance reads no record (the
/// room's own limits apply) and an unpaused autopilot; the leader elected next gets a greater
/// fence, and once it has written, the old leader's fence is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn losing_the_data_loses_the_autopilot_state_and_the_old_fence() {
    let mut server = RedisServer::start();
    let clock = ManualClock::starting_now();
    let a = store(&server, "pilot-lost", &clock).await;
    let start = window_start(clock.now_ms(), 10_000) - 10_000;
    a.report_window(&responses(start, 60, 50)).await.unwrap();
    let old = a.lead("a", 60_000).await.unwrap().unwrap();
    let record = AutopilotRecord {
        setpoint: setpoint(70),
        start: setpoint(100),
        reason: "breach".into(),
        changed_at: clock.now_ms(),
    };
    a.save_autopilot(&record, old).await.unwrap();
    a.set_autopilot_paused(true).await.unwrap();
    clock.advance(Duration::from_secs(1));

    server.restart();

    assert_eq!(
        eventually(|| a.load_autopilot()).await,
        AutopilotState::default()
    );
    assert_eq!(a.read_window(start).await.unwrap(), Signal::new(start));
    let new = a.lead("b", 60_000).await.unwrap().unwrap();
    assert!(new > old, "fences keep growing across a loss");
    a.save_autopilot(&record, new).await.unwrap();
    assert_eq!(
        a.load_autopilot().await.unwrap().record,
        Some(record.clone())
    );
    assert!(matches!(
        a.save_autopilot(&record, old).await,
        Err(StoreError::NotLeader(_))
    ));
}

/// Run with `cargo test --release --test store_redis -- --ignored --nocapture measure`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement, not a check"]
async fn measure_commands_per_poll_and_bytes_per_waiting_visitor() {
    fn stat(info: &str, field: &str) -> u64 {
        info.lines()
            .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    }
    fn calls(info: &str) -> (u64, u64) {
        let mut total = 0;
        let mut evalsha = 0;
        for line in info.lines().filter(|l| l.starts_with("cmdstat_")) {
            let n: u64 = line
                .split_once("calls=")
                .and_then(|(_, rest)| rest.split(',').next())
                .and_then(|n| n.parse().ok())
                .unwrap_or(0);
            total += n;
            if line.starts_with("cmdstat_evalsha:") {
                evalsha = n;
            }
        }
        (total, evalsha)
    }
    // Ids as the proxy makes them: 128 bits in 22 URL-safe characters.
    let id = |i: u64| {
        use base64::Engine;
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(
            u128::from(i)
                .wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c)
                .to_le_bytes(),
        )
    };

    let server = RedisServer::start();
    let store = Arc::new(
        RedisStore::connect(options(&server, "measure", TimeSource::Server))
            .await
            .unwrap(),
    );
    let l = limits(10, 100);
    for i in 0..1_000 {
        store.join(&id(i), None, &l).await.unwrap();
    }
    let polls = 10_000;
    server.command(&["CONFIG", "RESETSTAT"]);
    for i in 0..polls {
        waiting(store.poll(&id(i % 1_000), &l).await.unwrap());
    }
    let (total, evalsha) = calls(&server.command(&["INFO", "commandstats"]));
    println!(
        "per poll of a waiting visitor: {:.2} EVALSHA, {:.2} Redis commands in all (Lua's included)",
        evalsha as f64 / polls as f64,
        total as f64 / polls as f64
    );

    let visitors = 100_000u64;
    let room = Arc::new(
        RedisStore::connect(options(&server, "memory", TimeSource::Server))
            .await
            .unwrap(),
    );
    room.counts().await.unwrap();
    let before = stat(&server.command(&["INFO", "memory"]), "used_memory");
    let workers = 16;
    let mut tasks = Vec::new();
    for w in 0..workers {
        let room = room.clone();
        let l = l.clone();
        tasks.push(tokio::spawn(async move {
            for i in (w..visitors).step_by(workers as usize) {
                room.join(&id(1_000_000 + i), None, &l).await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(room.counts().await.unwrap().queued, visitors);
    let after = stat(&server.command(&["INFO", "memory"]), "used_memory");
    println!(
        "per waiting visitor (22-character id): {} bytes of Redis memory ({} visitors, {} -> {} bytes)",
        (after - before) / visitors,
        visitors,
        before,
        after
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_cluster_passes_the_conformance_checks() {
    use common::conformance as c;
    let cluster = RedisCluster::start(3);
    let connect = |room: &str, clock: &Arc<ManualClock>| {
        let mut o = RedisOptions::new(cluster.url(), room);
        o.time = TimeSource::Clock(clock.clone());
        o.command_timeout = Duration::from_secs(2);
        RedisStore::connect(o)
    };
    macro_rules! check {
        ($($name:ident),+) => {$(
            let clock = ManualClock::starting_now();
            let store = connect(stringify!($name), &clock).await.unwrap();
            c::$name(store, clock).await;
        )+};
    }
    check!(
        direct_admission_until_full,
        joins_are_counted_once_per_visitor,
        a_called_visitor_joining_again_keeps_its_call,
        a_visitor_is_found_by_its_queue_id_until_it_is_gone,
        joining_is_idempotent_and_positions_are_exact,
        fifo_rounds_call_in_order_and_the_claim_is_a_pass,
        the_rate_is_held,
        waiters_who_stop_polling_drop_out,
        a_called_visitor_who_never_claims_frees_the_slot,
        passes_slide_expire_and_heal_capacity,
        ending_a_pass_frees_the_slot_and_refuses_it,
        ending_a_waiting_visitor_leaves_the_line_whole,
        a_ticket_from_another_epoch_gets_its_place_back,
        a_pass_from_another_epoch_registers_again,
        one_leader_at_a_time_with_fencing,
        a_room_follows_the_groups_fence,
        settings_are_versioned,
        capacity_holds_under_concurrent_admissions,
        one_address_is_held_to_its_rate_of_new_tickets,
        an_address_holds_at_most_its_cap_of_tickets_in_line,
        windows_of_several_instances_add_up_exactly,
        a_window_nobody_reported_reads_empty,
        reported_windows_are_kept_for_a_few_windows,
        only_the_current_leader_writes_the_autopilot_record,
        the_pause_switch_is_kept_apart_from_the_record,
        a_pass_revoked_for_sharing_says_why,
        a_pass_counts_its_networks_within_a_session,
        pass_use_adds_up_by_minute_over_instances,
        report_shares_are_kept_per_instance_and_replaced
    );

    // Revocations reach the other instances whichever node holds the room.
    for room in ["r1", "r2", "r3", "r4"] {
        let clock = ManualClock::starting_now();
        let (a, b) = (
            connect(room, &clock).await.unwrap(),
            connect(room, &clock).await.unwrap(),
        );
        let l = limits(5, 100);
        a.admit_directly("x", &l).await.unwrap().unwrap();
        a.end_pass("x", RevokeReason::Ended, &l).await.unwrap();
        let started = Instant::now();
        while b.revoked("x").is_none() {
            assert!(
                started.elapsed() < Duration::from_secs(1),
                "{room}: b still admits x"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

/// The per-address records expire by themselves once nothing in them matters: a full bucket and
/// no ticket held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_address_costs_nothing_in_redis() {
    let server = RedisServer::start();
    let clock = ManualClock::starting_now();
    let room = store(&server, "idle", &clock).await;
    let rate = IpLimits {
        per_minute: 120,
        burst: 2,
        max_live: 0,
        ipv6_prefix: 56,
    };
    for i in 0..50 {
        let ip = format!("192.0.2.{i}");
        assert_eq!(
            room.claim_ticket(&ip, "t", &rate).await.unwrap(),
            IpClaim::Allowed
        );
    }
    let ttl: i64 = server
        .command(&["PTTL", "wrtest:{idle}:ip:192.0.2.7"])
        .trim_start_matches(':')
        .trim()
        .parse()
        .unwrap();
    assert!(
        (1..=500).contains(&ttl),
        "kept until its bucket is full: {ttl} ms"
    );
    let capped = IpLimits {
        per_minute: 0,
        burst: 0,
        max_live: 5,
        ipv6_prefix: 56,
    };
    room.claim_ticket("2001:db8::/64", "t", &capped)
        .await
        .unwrap();
    let ttl: i64 = server
        .command(&["PTTL", "wrtest:{idle}:ip:2001:db8::/64"])
        .trim_start_matches(':')
        .trim()
        .parse()
        .unwrap();
    assert!(
        ttl > RETAIN_LIVE_MS - 10_000 && ttl <= RETAIN_LIVE_MS,
        "kept while it holds a ticket: {ttl} ms"
    );
    tokio::time::sleep(Duration::from_millis(700)).await;
    let keys = server.command(&[
        "EVAL",
        "return #redis.call('KEYS', ARGV[1])",
        "0",
        "wrtest:{idle}:ip:192.*",
    ]);
    assert_eq!(keys.trim(), ":0", "the 50 idle addresses are gone");
}

/// Pass use costs one hash a minute for the room, whatever the number of passes, kept until the
/// end of the next minute (when it is the minute before) and gone after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pass_use_costs_one_hash_a_minute_in_redis() {
    let server = RedisServer::start();
    let clock = ManualClock::starting_now();
    let room = store(&server, "uses", &clock).await;
    let uses: Vec<(String, u64)> = (0..50).map(|i| (format!("pass-{i}"), 2)).collect();
    room.report_pass_use(&uses).await.unwrap();
    let shared = room.report_pass_use(&uses[..10]).await.unwrap();
    assert!(shared.counts.iter().all(|c| c.current == 4));
    let key = format!("wrtest:{{uses}}:uses:{}", shared.minute);
    let keys = server.command(&[
        "EVAL",
        "return #redis.call('KEYS', ARGV[1])",
        "0",
        "wrtest:{uses}:uses:*",
    ]);
    assert_eq!(keys.trim(), ":1");
    assert_eq!(server.command(&["HLEN", &key]).trim(), ":50");
    let ttl: i64 = server
        .command(&["PTTL", &key])
        .trim_start_matches(':')
        .trim()
        .parse()
        .unwrap();
    let until = shared.minute + 2 * MINUTE_MS - clock.now_ms();
    assert!(
        ttl > until - 10_000 && ttl <= until,
        "kept to the end of the next minute: {ttl} ms, not {until}"
    );
}

// Redis with a password: `redis://:password@`, `redis://user:password@`, percent-encoded, and no
// password in any error or log line. The passwords are unlike any other text, so that finding one
// means it leaked.
const PASSWORD: &str = "requirepass-7Qx";
const ACL_PASSWORD: &str = "acl-pass-4Zk";
const WRONG_PASSWORD: &str = "wrong-pass-9Jm";
/// Every password below, as written in a URL and as the server knows it.
const SECRETS: [&str; 5] = [PASSWORD, ACL_PASSWORD, WRONG_PASSWORD, "p@ss", "p%40ss"];

/// The log lines of this binary, from every test in it, that hold a password or come from the
/// store: the first must stay empty, the second shows that lines do arrive.
static LOGGED: Mutex<Vec<String>> = Mutex::new(Vec::new());

struct Recorder;

impl log::Log for Recorder {
    fn enabled(&self, _: &log::Metadata) -> bool {
        true
    }

    fn log(&self, record: &log::Record) {
        struct Fields<'a>(&'a mut String);
        impl<'kvs> log::kv::VisitSource<'kvs> for Fields<'_> {
            fn visit_pair(
                &mut self,
                key: log::kv::Key<'kvs>,
                value: log::kv::Value<'kvs>,
            ) -> Result<(), log::kv::Error> {
                self.0.push_str(&format!(" {key}={value}"));
                Ok(())
            }
        }
        let mut line = format!("{} {}: {}", record.level(), record.target(), record.args());
        let _ = record.key_values().visit(&mut Fields(&mut line));
        if record.target().starts_with("waitroom::store")
            || SECRETS.iter().any(|s| line.contains(s))
        {
            LOGGED.lock().unwrap_or_else(|p| p.into_inner()).push(line);
        }
    }

    fn flush(&self) {}
}

/// From now on every log line of this binary, at every level, the redis crate's included, goes
/// through [`Recorder`].
fn record_logs() {
    static INSTALLED: Once = Once::new();
    INSTALLED.call_once(|| {
        log::set_logger(&Recorder).unwrap();
        log::set_max_level(log::LevelFilter::Trace);
    });
}

fn assert_no_password_logged() {
    let logged = LOGGED.lock().unwrap_or_else(|p| p.into_inner());
    let leaks: Vec<&String> = logged
        .iter()
        .filter(|line| SECRETS.iter().any(|s| line.contains(s)))
        .collect();
    assert!(leaks.is_empty(), "logged with a password: {leaks:#?}");
}

/// The error's text, checked for passwords both as shown and as debugged.
fn redacted_error<T>(result: StoreResult<T>) -> String {
    let Err(e) = result else {
        panic!("expected an error");
    };
    for text in [e.to_string(), format!("{e:?}")] {
        for secret in SECRETS {
            assert!(!text.contains(secret), "{secret:?} shown in {text:?}");
        }
    }
    e.to_string()
}

fn options_for(url: String, room: &str) -> RedisOptions {
    let mut o = RedisOptions::new(url, room);
    o.connect_timeout = Duration::from_secs(2);
    o.command_timeout = COMMAND_TIMEOUT;
    o
}

/// Two instances on `url` act as one room. Each has two connections, both authenticated: the
/// store's, and the revocation feed's, subscribed while connecting.
async fn one_room_through(url: &str, room: &str) -> (RedisStore, RedisStore) {
    let connect = || RedisStore::connect(options_for(url.to_owned(), room));
    let (a, b) = (connect().await.unwrap(), connect().await.unwrap());
    a.ping().await.unwrap();
    let l = limits(1, 100);
    a.admit_directly("p", &l).await.unwrap().unwrap();
    assert_eq!(b.join("w", None, &l).await.unwrap().position, 1);
    a.end_pass("p", RevokeReason::Ended, &l).await.unwrap();
    let started = Instant::now();
    while b.revoked("p").is_none() {
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "b still admits p"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    (a, b)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_password_in_the_url_connects_and_reconnects_after_an_outage() {
    record_logs();
    let mut server = RedisServer::start_with_password(PASSWORD);
    let url = format!("redis://:{PASSWORD}@127.0.0.1:{}", server.port());
    let (a, b) = one_room_through(&url, "password").await;

    server.kill();
    let l = limits(1, 100);
    redacted_error(a.poll("w", &l).await);
    redacted_error(a.ping().await);
    // The follower tries its connections every second: its failures are logged too.
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    server.restart();

    eventually(|| a.ping()).await;
    eventually(|| a.admit_directly("q", &l)).await;
    a.end_pass("q", RevokeReason::Ended, &l).await.unwrap();
    let started = Instant::now();
    while b.revoked("q").is_none() {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "b does not follow revocations after the outage"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_no_password_logged();
    let logged = LOGGED.lock().unwrap_or_else(|p| p.into_inner());
    assert!(
        logged
            .iter()
            .any(|l| l.contains("revocations not reloaded")),
        "the outage was logged: {logged:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acl_user_and_password_in_the_url_connect() {
    record_logs();
    let server = RedisServer::start_with_user("user", ACL_PASSWORD);
    let at = format!("127.0.0.1:{}", server.port());
    one_room_through(&format!("redis://user:{ACL_PASSWORD}@{at}"), "acl").await;

    // The default user is off: the password alone is not enough, nor the user with another one.
    for url in [
        format!("redis://:{ACL_PASSWORD}@{at}"),
        format!("redis://user:{WRONG_PASSWORD}@{at}"),
    ] {
        let error = redacted_error(RedisStore::connect(options_for(url, "acl")).await);
        assert!(
            error.contains(&format!("cannot connect to redis://…@{at}")),
            "{error}"
        );
        assert!(error.contains("authentication failed"), "{error}");
    }
    assert_no_password_logged();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_percent_encoded_password_is_decoded() {
    record_logs();
    let server = RedisServer::start_with_password("p@ss");
    one_room_through(
        &format!("redis://:p%40ss@127.0.0.1:{}", server.port()),
        "encoded",
    )
    .await;
    let server = RedisServer::start_with_user("user", "p@ss");
    one_room_through(
        &format!("redis://user:p%40ss@127.0.0.1:{}", server.port()),
        "encoded",
    )
    .await;
    assert_no_password_logged();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_or_missing_password_is_a_clear_error_that_shows_no_password() {
    record_logs();
    let server = RedisServer::start_with_password(PASSWORD);
    let at = format!("127.0.0.1:{}", server.port());
    let connect = |url: String| RedisStore::connect(options_for(url, "refused"));

    let error = redacted_error(connect(format!("redis://:{WRONG_PASSWORD}@{at}")).await);
    assert!(
        error.contains(&format!("cannot connect to redis://…@{at}"))
            && error.contains("authentication failed"),
        "{error}"
    );
    let error = redacted_error(connect(format!("redis://{at}")).await);
    assert!(
        error.contains(&format!("cannot connect to redis://{at}")) && error.contains("NOAUTH"),
        "{error}"
    );

    // Nothing listening, a listener that never answers, a socket that is not there, a URL that
    // does not parse: each names where it went, without the password.
    let closed = TcpListener::bind("127.0.0.1:0").unwrap();
    let closed_at = closed.local_addr().unwrap();
    drop(closed);
    let error = redacted_error(connect(format!("redis://:{PASSWORD}@{closed_at}")).await);
    assert!(error.contains(&format!("redis://…@{closed_at}")), "{error}");
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_at = silent.local_addr().unwrap();
    let error = redacted_error(connect(format!("redis://user:{PASSWORD}@{silent_at}")).await);
    assert!(error.contains(&format!("redis://…@{silent_at}")), "{error}");
    drop(silent);
    let error = redacted_error(
        connect(format!(
            "redis+unix:///nonexistent/redis.sock?pass={PASSWORD}"
        ))
        .await,
    );
    assert!(
        error.contains("redis+unix:///nonexistent/redis.sock?pass=…"),
        "{error}"
    );
    for url in [
        format!("redis://:{PASSWORD}@127.0.0.1:port"),
        format!("redis+cluster://:{PASSWORD}@127.0.0.1:1,127.0.0.1:port"),
        format!("redis://:{PASSWORD}@[::1"),
    ] {
        let result = connect(url).await;
        assert!(
            matches!(result, Err(StoreError::InvalidUrl { .. })),
            "{:?}",
            result.as_ref().err()
        );
        redacted_error(result);
    }
    assert_no_password_logged();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_cluster_with_a_password() {
    record_logs();
    let cluster = RedisCluster::start_with_password(3, PASSWORD);
    one_room_through(
        &format!("redis+cluster://:{PASSWORD}@{}", cluster.hosts()),
        "cluster",
    )
    .await;
    let error = redacted_error(
        RedisStore::connect(options_for(
            format!("redis+cluster://:{WRONG_PASSWORD}@{}", cluster.hosts()),
            "cluster",
        ))
        .await,
    );
    assert!(
        error.contains(&format!(
            "cannot connect to redis+cluster://…@{}",
            cluster.hosts()
        )),
        "{error}"
    );
    assert_no_password_logged();
}
