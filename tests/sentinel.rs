#![allow(clippy::unwrap_used)]
//! Redis with Sentinel (issue 23 item 7): a master, a replica and three Sentinels, all real
//! `redis-server` processes on free ports; two proxies follow the master the Sentinels name. The
//! master is killed under a crowd, and what the room lost is measured from what the visitors and
//! the proxies saw: the seconds without a store, the overshoot of the capacity, pass holders
//! refused, and waiting visitors whose place went back. Then Sentinels that ask for a password of
//! their own, followed with it and refused without it; a replica that lags behind, promoted,
//! with and without `store.replica_acks`: what the room lost and what the metric counted; and
//! what the replicas' acknowledgement costs an admission. The bounds asserted are the ones
//! docs/redis.md documents; the figures are printed (`--nocapture`).

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::conformance::limits;
use common::origin::StubOrigin;
use common::proxy::{NoEnvironment, Sections, TestProxy, Visitor, config_text, free_port};
use common::redis_server::{RedisServer, Sentinels};
use waitroom::config::Config;
use waitroom::service::server::{RunOptions, spawn};
use waitroom::store::Store;
use waitroom::store::redis::{RedisOptions, RedisStore, ReplicaAcks};

const MASTER: &str = "shop";
const SENTINEL_PASSWORD: &str = "sentinels-own-password";

/// The tests of this file measure failovers and round trips on a machine they share: one at a
/// time, so that one's Redis processes do not slow another's figures.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn one_at_a_time() -> tokio::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().await
}

/// A `[store]` following `sentinels` (with `extra` lines), with the short timeouts a failover on
/// loopback allows.
fn sentinel_store(sentinels: &Sentinels, extra: &str) -> String {
    let addresses: Vec<String> = sentinels
        .addresses()
        .iter()
        .map(|a| format!("\"{a}\""))
        .collect();
    format!(
        "[store]\nbackend = \"redis\"\nsentinels = [{}]\nmaster_name = \"{MASTER}\"\n\
         leader_ttl = \"1s\"\ncommand_timeout = \"300ms\"\nconnect_timeout = \"500ms\"\n{extra}\n",
        addresses.join(", ")
    )
}

/// Until the replica has synced and every Sentinel knows it.
fn wait_until_watched(sentinels: &Sentinels, replica: &RedisServer) {
    let deadline = Instant::now() + Duration::from_secs(15);
    while sentinels.known_replicas(MASTER) < 1
        || !replica
            .command(&["INFO", "replication"])
            .contains("master_link_status:up")
    {
        assert!(Instant::now() < deadline, "the replica never synced");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Until the Sentinels name `replica` the master.
async fn wait_until_promoted(sentinels: &Sentinels, replica: &RedisServer) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while sentinels.master_port(MASTER) != Some(replica.port()) {
        assert!(
            Instant::now() < deadline,
            "the Sentinels never promoted the replica"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
const CAPACITY: usize = 10;
const VISITORS: usize = 40;
const RUN: Duration = Duration::from_secs(16);
const KILL_AFTER: Duration = Duration::from_secs(5);

/// What one visitor saw: when (ms since the start), the status, whether the origin answered, and
/// its place when it waited. A visitor that checks out ends its log with status 0 at the moment
/// it left.
type Log = Vec<(u128, u16, bool, Option<u64>)>;

/// (ms since the start, store_ok) of one proxy.
type Samples = Vec<(u128, bool)>;

/// When a visitor was inside: from the origin's first answer to its leaving (or its last
/// request).
fn inside(log: &Log) -> Option<(u128, u128)> {
    let first = log.iter().find(|e| e.2)?.0;
    let last = log.last().map_or(first, |e| e.0);
    Some((first, last))
}

fn proxies(sentinels: &Sentinels, origin: &StubOrigin) -> Vec<TestProxy> {
    let store = sentinel_store(sentinels, "");
    let room = format!(
        "total_active_users = {CAPACITY}\nnew_users_per_minute = 600\nsession_duration = \"10m\"\n\
         abandon_after = \"1m\""
    );
    (0..2)
        .map(|_| {
            TestProxy::start_real_time_sections(
                origin,
                Sections {
                    room: &room,
                    // Each virtual visitor asks four times a second: more than a person.
                    pass: "max_requests_per_minute = 0",
                    rest: &store,
                    ..Sections::default()
                },
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_proxies_follow_a_failover_under_a_crowd() {
    let _alone = one_at_a_time().await;
    let mut master = RedisServer::start();
    let replica = RedisServer::start_replica_of(&master);
    let sentinels = Sentinels::start(3, MASTER, &master);
    wait_until_watched(&sentinels, &replica);
    let origin = StubOrigin::start();
    let proxies = proxies(&sentinels, &origin);
    let bases: Vec<String> = proxies.iter().map(|p| p.base.clone()).collect();
    let started = Instant::now();

    let mut crowd = Vec::new();
    for i in 0..VISITORS {
        let bases = bases.clone();
        crowd.push(tokio::spawn(async move {
            let mut log: Log = Vec::new();
            let mut cookie = None;
            let mut n = 0;
            let mut inside_since = None;
            // Arrivals spread over the first two seconds.
            tokio::time::sleep(Duration::from_millis(50 * i as u64)).await;
            while started.elapsed() < RUN {
                // No sticky sessions: each request may land on the other proxy.
                let mut v = Visitor::new(&bases[(i + n) % bases.len()]);
                n += 1;
                v.cookie = cookie.clone();
                let answer = v.get_json("/drop").await;
                cookie = v.cookie;
                let position = (answer.status == 200 && !answer.reached_origin())
                    .then(|| answer.json()["waitroom"]["position"].as_u64())
                    .flatten();
                log.push((
                    started.elapsed().as_millis(),
                    answer.status,
                    answer.reached_origin(),
                    position,
                ));
                if answer.reached_origin() {
                    inside_since.get_or_insert(started.elapsed());
                }
                // Three seconds inside, then the visitor checks out and leaves its place.
                if inside_since.is_some_and(|t| started.elapsed() - t > Duration::from_secs(3)) {
                    log.push((started.elapsed().as_millis(), 0, false, None));
                    // Until the store takes it: a checkout during the outage is tried again.
                    while started.elapsed() < RUN {
                        let mut v = Visitor::new(&bases[n % bases.len()]);
                        n += 1;
                        v.cookie = cookie.clone();
                        if v.leave().await.status == 200 {
                            break;
                        }
                        tokio::time::sleep(Duration::from_millis(250)).await;
                    }
                    break;
                }
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            log
        }));
    }

    // Each proxy's store as /admin/state says, every 100 ms: (ms, store_ok).
    let health: Arc<Mutex<Vec<Samples>>> = Arc::new(Mutex::new(vec![Vec::new(); proxies.len()]));
    let sampler = {
        let admins: Vec<String> = proxies.iter().map(|p| p.admin.clone()).collect();
        let health = health.clone();
        tokio::spawn(async move {
            while started.elapsed() < RUN {
                for (i, admin) in admins.iter().enumerate() {
                    let state = common::proxy::admin_state(admin).await;
                    let ok = state["store_ok"].as_bool().unwrap_or(false);
                    health.lock().unwrap()[i].push((started.elapsed().as_millis(), ok));
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };

    tokio::time::sleep(KILL_AFTER).await;
    let old_master = master.port();
    let killed_at = started.elapsed().as_millis();
    tokio::task::block_in_place(|| master.kill());
    let deadline = Instant::now() + Duration::from_secs(20);
    let promoted_at = loop {
        if sentinels
            .master_port(MASTER)
            .is_some_and(|p| p != old_master)
        {
            break started.elapsed().as_millis();
        }
        assert!(
            Instant::now() < deadline,
            "the Sentinels never promoted the replica"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(sentinels.master_port(MASTER), Some(replica.port()));

    let mut logs = Vec::new();
    for visitor in crowd {
        logs.push(visitor.await.unwrap());
    }
    sampler.await.unwrap();
    let health = health.lock().unwrap().clone();

    // The longest spell, after the kill, in which a proxy's last store call failed.
    let without_store_ms = health
        .iter()
        .map(|samples| {
            let mut longest = 0;
            let mut down_since = None;
            for (at, ok) in samples.iter().filter(|(at, _)| *at >= killed_at) {
                match (ok, down_since) {
                    (false, None) => down_since = Some(*at),
                    (true, Some(since)) => {
                        longest = longest.max(at - since);
                        down_since = None;
                    }
                    _ => {}
                }
            }
            assert!(down_since.is_none(), "a proxy never got its store back");
            longest
        })
        .max()
        .unwrap_or(0);
    // Inside at a moment: let in, and not yet left.
    let spans: Vec<(u128, u128)> = logs.iter().filter_map(inside).collect();
    let mut overshoot = 0;
    let mut at = 0;
    while at <= RUN.as_millis() {
        let inside = spans.iter().filter(|(a, b)| *a <= at && at <= *b).count();
        overshoot = overshoot.max(inside.saturating_sub(CAPACITY));
        at += 50;
    }
    // Pass holders (let in before the kill) that were not let through afterwards.
    let refused_holders = logs
        .iter()
        .filter(|log| {
            log.iter()
                .any(|(t, _, origin, _)| *origin && *t < killed_at)
                && log
                    .iter()
                    .any(|(t, status, origin, _)| !*origin && *status != 0 && *t >= killed_at)
        })
        .count();
    // Waiting visitors whose place went back after the kill.
    let sent_back = logs
        .iter()
        .filter(|log| {
            let places: Vec<(u128, u64)> = log
                .iter()
                .filter_map(|(t, _, _, p)| p.map(|p| (*t, p)))
                .collect();
            places
                .windows(2)
                .any(|w| w[1].0 >= killed_at && w[1].1 > w[0].1)
        })
        .count();
    for log in &logs {
        let places: Vec<(u128, u64)> = log
            .iter()
            .filter_map(|(t, _, _, p)| p.map(|p| (*t, p)))
            .collect();
        if places
            .windows(2)
            .any(|w| w[1].0 >= killed_at && w[1].1 > w[0].1)
        {
            eprintln!("sent back: {log:?}");
        }
    }
    let admitted = logs.iter().filter(|log| log.iter().any(|e| e.2)).count();
    let errors = logs
        .iter()
        .flatten()
        .filter(|(_, status, _, _)| *status >= 500)
        .count();
    println!(
        "sentinel failover: killed at {killed_at} ms, replica promoted after {} ms; longest spell \
         without a store {without_store_ms} ms; capacity overshoot {overshoot}; pass holders \
         refused {refused_holders}; waiting visitors sent back {sent_back}; {admitted} of \
         {VISITORS} let in; {errors} answers >= 500",
        promoted_at - killed_at
    );
    // docs/redis.md, "Sentinel": the bounds a failover on a healthy network stays within.
    assert!(
        without_store_ms <= 8_000,
        "{without_store_ms} ms without a store"
    );
    assert_eq!(overshoot, 0, "the room overshot its capacity");
    assert_eq!(refused_holders, 0, "pass holders were refused");
    // Visitors called just before the kill could not claim their turn while the store was away
    // (claim_window, 4 s here, ran out): the leader counts them as no-shows and they queue again
    // at the back. docs/redis.md says so; more than a round's calls would be another fault.
    assert!(
        sent_back <= 3,
        "{sent_back} waiting visitors lost their place"
    );
    assert_eq!(errors, 0);
    // Admissions go on after the failover: the line moves on the new master.
    let admitted_after = logs
        .iter()
        .filter(|log| {
            let first = log.iter().find(|e| e.2).map(|e| e.0);
            first.is_some_and(|t| t > promoted_at)
        })
        .count();
    assert!(
        admitted_after > 0 || admitted == VISITORS,
        "nobody was let in after the failover"
    );
    drop(replica);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proxy_with_the_sentinels_password_follows_the_master() {
    let _alone = one_at_a_time().await;
    let mut master = RedisServer::start();
    let replica = RedisServer::start_replica_of(&master);
    let sentinels = Sentinels::start_with_password(3, MASTER, &master, SENTINEL_PASSWORD);
    wait_until_watched(&sentinels, &replica);
    let origin = StubOrigin::start();
    let store = sentinel_store(
        &sentinels,
        &format!("sentinel_password = \"{SENTINEL_PASSWORD}\""),
    );
    let proxy = TestProxy::start_real_time_sections(
        &origin,
        Sections {
            room: "total_active_users = 10\nnew_users_per_minute = 600",
            rest: &store,
            ..Sections::default()
        },
    );
    assert!(proxy.visitor().get("/before").await.reached_origin());

    // `--test` reads the live settings through the Sentinels too, the password from
    // WR_SENTINEL_PASSWORD, and prints it masked.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("room.toml");
    std::fs::write(
        &path,
        config_text(
            free_port(),
            free_port(),
            origin.addr,
            "total_active_users = 10\nnew_users_per_minute = 600",
            &sentinel_store(&sentinels, ""),
        ),
    )
    .unwrap();
    let checked = tokio::task::block_in_place(|| {
        std::process::Command::new(env!("CARGO_BIN_EXE_waitroom-proxy"))
            .args(["--config".as_ref(), path.as_os_str(), "--test".as_ref()])
            .env("WR_SENTINEL_PASSWORD", SENTINEL_PASSWORD)
            .output()
            .unwrap()
    });
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&checked.stdout),
        String::from_utf8_lossy(&checked.stderr)
    );
    assert!(checked.status.success(), "{printed}");
    assert!(
        printed.contains("room test-room: no live settings saved in the store"),
        "{printed}"
    );
    assert!(
        printed.contains("sentinel_password = \"********\""),
        "{printed}"
    );
    assert!(!printed.contains(SENTINEL_PASSWORD), "{printed}");

    tokio::task::block_in_place(|| master.kill());
    wait_until_promoted(&sentinels, &replica).await;
    common::proxy::eventually("a newcomer let in by the new master", || async {
        proxy.visitor().get("/after").await.reached_origin()
    })
    .await;
    let passes = replica.command(&["ZCARD", "wr:{test-room}:passes"]);
    let passes: u64 = passes.trim_start_matches(':').trim().parse().unwrap();
    assert!(
        passes >= 2,
        "the admissions are on the new master: {passes}"
    );

    // Nothing the proxy shows has the Sentinels' password.
    let config = reqwest::Client::new()
        .get(format!("{}/admin/config", proxy.admin))
        .bearer_auth(common::proxy::ADMIN_TOKEN)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let shown = format!("{config}{}{}", proxy.state().await, proxy.metrics().await);
    assert!(config.contains("total_active_users"), "{config}");
    assert!(!shown.contains(SENTINEL_PASSWORD), "{shown}");
}

/// What the proxy says when it cannot start with this `[store]` (its config check, or the
/// start).
fn start_error(store: &str) -> String {
    let origin = StubOrigin::start();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("room.toml");
    std::fs::write(
        &path,
        config_text(
            free_port(),
            free_port(),
            origin.addr,
            "total_active_users = 10\nnew_users_per_minute = 60",
            store,
        ),
    )
    .unwrap();
    let (config, _) = Config::load(&path, &NoEnvironment, false).unwrap();
    match spawn(&config, RunOptions::default()) {
        Ok(_) => panic!("a proxy started on {store}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn a_wrong_or_missing_sentinel_password_stops_the_start_naming_the_key() {
    let _alone = ONE_AT_A_TIME.blocking_lock();
    let master = RedisServer::start();
    let sentinels = Sentinels::start_with_password(1, MASTER, &master, SENTINEL_PASSWORD);
    // The Sentinels answer, and refuse: a configuration no wait mends, like a master's wrong
    // password (tests/store_outage.rs), so the start fails instead of serving by on_error.
    let wrong = start_error(&sentinel_store(
        &sentinels,
        "sentinel_password = \"not-the-password\"",
    ));
    println!("wrong Sentinel password: {wrong}");
    assert!(
        wrong.contains("refused") && wrong.contains("store.sentinel_password"),
        "{wrong}"
    );
    assert!(
        !wrong.contains("not-the-password") && !wrong.contains(SENTINEL_PASSWORD),
        "{wrong}"
    );
    let missing = start_error(&sentinel_store(&sentinels, ""));
    println!("no Sentinel password: {missing}");
    assert!(
        missing.contains("ask for a password of their own") && missing.contains("NOAUTH"),
        "{missing}"
    );
}

/// Visitors let in before the replica stops replicating, and after.
const IN_SYNC: usize = 8;
const LAGGING: usize = 8;
const LAG_CAPACITY: usize = IN_SYNC + LAGGING;
/// Newcomers after the failover: more than the room can have lost.
const NEWCOMERS: usize = 12;

/// What a failover to a replica that lagged cost the room, in one run.
#[derive(Debug)]
struct Loss {
    /// Passes handed out (all of them before the failover).
    issued: usize,
    /// Of those, the passes the promoted replica has.
    survived: usize,
    /// `waitroom_store_replica_ack_timeouts_total` while the replica was in sync, and at the end
    /// of the lag.
    unacknowledged_in_sync: u64,
    unacknowledged: u64,
    /// How long the lagging replica's admissions took, one after another.
    lagging_admissions_ms: u128,
    /// From the kill to the Sentinels naming the replica, and to the proxy's store answering
    /// again on it.
    promoted_ms: u128,
    without_store_ms: u128,
    /// Visitors inside beyond the capacity once newcomers came after the failover.
    overshoot: usize,
    /// Pass holders sent back to the line when their session was renewed.
    requeued: usize,
}

async fn ack_timeouts(proxy: &TestProxy) -> u64 {
    proxy
        .metrics()
        .await
        .lines()
        .find(|l| l.starts_with("waitroom_store_replica_ack_timeouts_total{"))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap()
}

/// `n` newcomers, one after another, each let in; their cookies.
async fn let_in(proxy: &TestProxy, n: usize) -> Vec<Option<String>> {
    let mut cookies = Vec::new();
    for i in 0..n {
        let mut v = proxy.visitor();
        assert!(
            v.get(&format!("/in/{i}")).await.reached_origin(),
            "visitor {i} queued"
        );
        cookies.push(v.cookie);
    }
    cookies
}

/// A master, a replica and three Sentinels; a proxy lets visitors in while the replica is in
/// sync, then while it lags (it runs, and gets none of the master's writes), then the master is
/// killed and the Sentinels promote the replica.
async fn promote_a_lagging_replica(replica_acks: u32) -> Loss {
    let mut master = RedisServer::start();
    let replica = RedisServer::start_replica_of(&master);
    let sentinels = Sentinels::start(3, MASTER, &master);
    wait_until_watched(&sentinels, &replica);
    let origin = StubOrigin::start();
    let store = sentinel_store(
        &sentinels,
        &format!("replica_acks = {replica_acks}\nreplica_ack_timeout = \"100ms\""),
    );
    // A session of a minute is renewed after six seconds: the test sees the renewal.
    let room = format!(
        "total_active_users = {LAG_CAPACITY}\nnew_users_per_minute = 6000\n\
         session_duration = \"1m\"\nabandon_after = \"1m\""
    );
    let proxy = TestProxy::start_real_time_sections(
        &origin,
        Sections {
            room: &room,
            rest: &store,
            ..Sections::default()
        },
    );

    let mut holders = let_in(&proxy, IN_SYNC).await;
    // Everything so far reached the replica before it stops replicating.
    let deadline = Instant::now() + Duration::from_secs(10);
    while replica.replication("slave_repl_offset") < master.replication("master_repl_offset") {
        assert!(Instant::now() < deadline, "the replica never caught up");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let unacknowledged_in_sync = ack_timeouts(&proxy).await;
    tokio::task::block_in_place(|| replica.stop_replicating(&master));
    let lag_started = Instant::now();
    holders.extend(let_in(&proxy, LAGGING).await);
    let lagging_admissions_ms = lag_started.elapsed().as_millis();
    let renewals_due = Instant::now() + Duration::from_millis(6_500);
    // The metric is synced by the store calls that admit: the last one counted itself.
    let unacknowledged = ack_timeouts(&proxy).await;

    let killed = Instant::now();
    tokio::task::block_in_place(|| master.kill());
    wait_until_promoted(&sentinels, &replica).await;
    let promoted_ms = killed.elapsed().as_millis();
    common::proxy::eventually("the proxy's store answers on the new master", || async {
        let state = proxy.state().await;
        state["store_ok"] == true && state["passes"].is_u64()
    })
    .await;
    let without_store_ms = killed.elapsed().as_millis();
    let survived = replica.command(&["ZCARD", "wr:{test-room}:passes"]);
    let survived: usize = survived.trim_start_matches(':').trim().parse().unwrap();

    // The room believes the lost passes' places are free: newcomers take them.
    let mut admitted_after = 0;
    for i in 0..NEWCOMERS {
        if proxy
            .visitor()
            .get(&format!("/after/{i}"))
            .await
            .reached_origin()
        {
            admitted_after += 1;
        }
    }
    let overshoot = (holders.len() + admitted_after).saturating_sub(LAG_CAPACITY);

    // At its renewal a pass the store lacks is over: its holder starts again, in line.
    tokio::time::sleep_until(renewals_due.into()).await;
    let mut requeued = 0;
    for cookie in &holders {
        let mut v = proxy.visitor();
        v.cookie = cookie.clone();
        if !v.get("/renewed").await.reached_origin() {
            requeued += 1;
        }
    }
    drop(proxy);
    Loss {
        issued: holders.len(),
        survived,
        unacknowledged_in_sync,
        unacknowledged,
        lagging_admissions_ms,
        promoted_ms,
        without_store_ms,
        overshoot,
        requeued,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lagging_replica_promoted_loses_what_it_lacked_and_acks_count_it() {
    let _alone = one_at_a_time().await;
    for replica_acks in [0, 1] {
        let loss = promote_a_lagging_replica(replica_acks).await;
        let lost = loss.issued - loss.survived;
        println!(
            "lagging replica promoted, replica_acks = {replica_acks}: {} passes issued, {lost} \
             missing on the new master (occupancy under-counted by {lost}), capacity overshoot \
             {} once newcomers came, {} holders sent back to the line at their renewal; replica \
             promoted {} ms after the kill, {} ms without a store; the lagging replica's \
             {LAGGING} admissions took {} ms; \
             waitroom_store_replica_ack_timeouts_total {} in sync, {} after the lag",
            loss.issued,
            loss.overshoot,
            loss.requeued,
            loss.promoted_ms,
            loss.without_store_ms,
            loss.lagging_admissions_ms,
            loss.unacknowledged_in_sync,
            loss.unacknowledged
        );
        // What the replica got before it stopped replicating is on it; the admissions that
        // came after are not, and a room that counts what its store holds lets as many
        // newcomers in, then sends the holders of the lost passes back at their renewal.
        assert_eq!(loss.survived, IN_SYNC, "{loss:?}");
        assert_eq!(loss.overshoot, lost, "{loss:?}");
        assert_eq!(loss.requeued, lost, "{loss:?}");
        if replica_acks == 0 {
            assert_eq!(loss.unacknowledged, 0, "nothing is asked, nothing counted");
            continue;
        }
        // Every admission the replica acknowledged survived; every one it could not was counted
        // (each waited its 100 ms, then was let in): the metric bounds the loss.
        assert!(
            loss.survived as u64 >= loss.issued as u64 - loss.unacknowledged,
            "{loss:?}"
        );
        assert_eq!(
            loss.unacknowledged - loss.unacknowledged_in_sync,
            LAGGING as u64,
            "{loss:?}"
        );
        assert!(lost as u64 <= loss.unacknowledged, "{loss:?}");
    }
}

/// Admissions a second on loopback, one at a time and 32 at once, without and with a replica's
/// acknowledgement. Printed, not asserted: a shared machine's timings are no bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cost_of_a_replicas_acknowledgement_on_loopback() {
    const ONE_BY_ONE: usize = 1_000;
    const AT_ONCE: usize = 32;
    const EACH: usize = 100;
    let _alone = one_at_a_time().await;
    let master = RedisServer::start();
    let replica = RedisServer::start_replica_of(&master);
    let deadline = Instant::now() + Duration::from_secs(15);
    while !replica
        .command(&["INFO", "replication"])
        .contains("master_link_status:up")
    {
        assert!(Instant::now() < deadline, "the replica never synced");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let limits = limits(1_000_000_000, 1_000_000_000);
    let mut acknowledged = None;
    for (name, acks) in [
        ("replica_acks = 0", None),
        (
            "replica_acks = 1",
            Some(ReplicaAcks {
                replicas: 1,
                timeout: Duration::from_millis(100),
            }),
        ),
    ] {
        let store = Arc::new(
            RedisStore::connect(RedisOptions {
                replica_acks: acks,
                ..RedisOptions::new(master.url(), format!("cost-{}", acks.is_some()))
            })
            .await
            .unwrap(),
        );
        let started = Instant::now();
        for i in 0..ONE_BY_ONE {
            let admitted = store.admit_directly(&format!("one-{i}"), &limits).await;
            assert!(admitted.unwrap().is_some());
        }
        let one_by_one = ONE_BY_ONE as f64 / started.elapsed().as_secs_f64();
        let started = Instant::now();
        let tasks: Vec<_> = (0..AT_ONCE)
            .map(|t| {
                let (store, limits) = (store.clone(), limits.clone());
                tokio::spawn(async move {
                    for i in 0..EACH {
                        let admitted = store.admit_directly(&format!("{t}-{i}"), &limits).await;
                        assert!(admitted.unwrap().is_some());
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
        let at_once = (AT_ONCE * EACH) as f64 / started.elapsed().as_secs_f64();
        println!(
            "{name}: {one_by_one:.0} admissions/s one at a time ({:.2} ms each), {at_once:.0} \
             admissions/s {AT_ONCE} at once; {} not acknowledged",
            1_000.0 / one_by_one,
            store.unacknowledged_admissions()
        );
        acknowledged = Some(store);
    }

    // The replica lags: every admission waits its 100 ms, those at once share each WAIT, and
    // the store's other calls (here the room's counts, as every tick asks) wait for none.
    let store = acknowledged.unwrap();
    tokio::task::block_in_place(|| replica.stop_replicating(&master));
    let started = Instant::now();
    let tasks: Vec<_> = (0..AT_ONCE)
        .map(|t| {
            let (store, limits) = (store.clone(), limits.clone());
            tokio::spawn(async move {
                for i in 0..5 {
                    let admitted = store.admit_directly(&format!("lag-{t}-{i}"), &limits).await;
                    assert!(admitted.unwrap().is_some(), "let in all the same");
                }
            })
        })
        .collect();
    let mut slowest_counts = Duration::ZERO;
    while tasks.iter().any(|t| !t.is_finished()) {
        let asked = Instant::now();
        store.counts().await.unwrap();
        slowest_counts = slowest_counts.max(asked.elapsed());
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let lagging = started.elapsed();
    for task in tasks {
        task.await.unwrap();
    }
    println!(
        "replica_acks = 1, the replica lagging: {} admissions {AT_ONCE} at once in {} ms \
         ({:.0}/s), the slowest counts meanwhile {:.1} ms; {} not acknowledged",
        AT_ONCE * 5,
        lagging.as_millis(),
        (AT_ONCE * 5) as f64 / lagging.as_secs_f64(),
        slowest_counts.as_secs_f64() * 1_000.0,
        store.unacknowledged_admissions()
    );
    assert_eq!(store.unacknowledged_admissions(), (AT_ONCE * 5) as u64);
}
