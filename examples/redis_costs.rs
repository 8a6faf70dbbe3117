//! What each unit of a drop costs Redis: a new visitor (its per-address claim and its join), a
//! waiting visitor's heartbeat, an admitted visitor (the admission round and the claim), and an
//! instance's loop tick; Redis CPU, commands and memory per unit, read from `INFO` before and
//! after each phase. Run by `load/redis_costs.sh` against a redis-server of its own; the figures
//! feed BENCHMARKS.md's sizing of a 1 000 000-visitor drop.
//!
//!   cargo run --release --example redis_costs -- redis://127.0.0.1:PORT VISITORS
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use waitroom::core::ip_limit::{IpClaim, IpLimits};
use waitroom::core::room::{Limits, Pick, Placing};
use waitroom::store::Store;
use waitroom::store::redis::{RedisOptions, RedisStore};

/// Concurrent joiners: the proxy's requests in flight, so that joins go in batches as they do
/// under a crowd.
const JOINERS: u64 = 256;
/// Ids per keep-alive call: what one instance's open pages send in a loop tick.
const KEEP_ALIVE_BATCH: usize = 2_000;
/// Loop ticks measured for an instance's background cost.
const TICKS: u64 = 2_000;

/// Redis's own counters at one moment.
#[derive(Clone, Copy)]
struct Reading {
    cpu_s: f64,
    commands: u64,
    used_memory: u64,
    at: Instant,
}

async fn read(conn: &mut redis::aio::MultiplexedConnection) -> Reading {
    let info: String = redis::cmd("INFO")
        .arg("all")
        .query_async(conn)
        .await
        .unwrap();
    let field = |name: &str| -> f64 {
        info.lines()
            .find_map(|l| l.strip_prefix(name).and_then(|v| v.strip_prefix(':')))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("INFO has no {name}"))
    };
    Reading {
        cpu_s: field("used_cpu_sys") + field("used_cpu_user"),
        commands: info
            .lines()
            .filter(|l| l.starts_with("cmdstat_"))
            .filter_map(|l| {
                l.split("calls=")
                    .nth(1)?
                    .split(',')
                    .next()?
                    .parse::<u64>()
                    .ok()
            })
            .sum(),
        used_memory: field("used_memory") as u64,
        at: Instant::now(),
    }
}

/// One phase's cost per unit, printed as a markdown row.
fn row(what: &str, units: u64, before: Reading, after: Reading) {
    let units_f = units.max(1) as f64;
    let cpu_us = (after.cpu_s - before.cpu_s) * 1e6 / units_f;
    let commands = (after.commands - before.commands) as f64 / units_f;
    let memory = (after.used_memory as f64 - before.used_memory as f64) / units_f;
    let elapsed = after.at.duration_since(before.at).as_secs_f64();
    println!(
        "| {what} | {units} | {cpu_us:.2} | {commands:.2} | {memory:.0} | {:.0} |",
        units as f64 / elapsed
    );
}

fn limits(capacity: u64, per_minute: u64) -> Limits {
    Limits {
        capacity,
        new_users_per_minute: per_minute,
        burst: per_minute,
        session_ms: 600_000,
        abandon_after_ms: 3_600_000,
        claim_window_ms: 600_000,
        pick: Pick::Fifo,
        placing: Placing::Arrival,
        admitting: true,
    }
}

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let url = args.next().expect("usage: redis_costs URL VISITORS");
    let visitors: u64 = args.next().and_then(|v| v.parse().ok()).unwrap_or(100_000);
    let client = redis::Client::open(url.as_str()).unwrap();
    let mut info = client.get_multiplexed_async_connection().await.unwrap();
    let store = Arc::new(
        RedisStore::connect(RedisOptions::new(url.clone(), "costs"))
            .await
            .unwrap(),
    );
    // A full room: every new visitor waits.
    let full = limits(0, 0);
    let ip_limits = IpLimits {
        per_minute: 1_000_000,
        burst: 1_000_000,
        max_live: 1_000_000,
        ipv6_prefix: 56,
    };
    let id = |n: u64| {
        format!(
            "visitor-{n:016x}-{:016x}",
            n.wrapping_mul(0x9e37_79b9_7f4a_7c15)
        )
    };

    println!(
        "| unit | units | Redis CPU µs per unit | Redis commands per unit | Redis memory bytes per unit | units/s |"
    );
    println!("|---|--:|--:|--:|--:|--:|");

    // New visitors: the per-address claim (one address per 8 visitors), then the join, from
    // JOINERS tasks at once as a crowd's requests arrive.
    let next = Arc::new(AtomicU64::new(0));
    let claims = |kind: &'static str| {
        let (store, next) = (store.clone(), next.clone());
        (0..JOINERS)
            .map(|_| {
                let (store, next, full) = (store.clone(), next.clone(), full.clone());
                tokio::spawn(async move {
                    loop {
                        let n = next.fetch_add(1, Ordering::Relaxed);
                        if n >= visitors {
                            return;
                        }
                        let visitor = id(n);
                        if kind == "claim" {
                            let ip =
                                format!("10.{}.{}.{}", n >> 19 & 255, n >> 11 & 255, n >> 3 & 255);
                            let claim = store.claim_ticket(&ip, &visitor, &ip_limits).await;
                            assert!(matches!(claim, Ok(IpClaim::Allowed)), "{claim:?}");
                        } else {
                            store.join(&visitor, None, &full).await.unwrap();
                        }
                    }
                })
            })
            .collect::<Vec<_>>()
    };
    for kind in ["claim", "join"] {
        next.store(0, Ordering::Relaxed);
        let before = read(&mut info).await;
        for task in claims(kind) {
            task.await.unwrap();
        }
        let after = read(&mut info).await;
        let what = if kind == "claim" {
            "new visitor: per-address claim (`claim_ticket`)"
        } else {
            "new visitor: join (batched as the proxy sends them)"
        };
        row(what, visitors, before, after);
    }
    let counts = store.counts().await.unwrap();
    assert_eq!(counts.queued, visitors, "every visitor waits");

    // Heartbeats of open pages: the loop's keep-alive batches.
    let rounds = visitors.min(200_000) / KEEP_ALIVE_BATCH as u64;
    let before = read(&mut info).await;
    for r in 0..rounds {
        let ids: Vec<String> = (0..KEEP_ALIVE_BATCH as u64)
            .map(|i| id(r * KEEP_ALIVE_BATCH as u64 + i))
            .collect();
        store.keep_alive(&ids, &full).await.unwrap();
    }
    let after = read(&mut info).await;
    row(
        "waiting visitor: one heartbeat (`keep_alive`, 2 000 a call)",
        rounds * KEEP_ALIVE_BATCH as u64,
        before,
        after,
    );

    // Admissions: the leader's rounds call visitors at the front (a large rate, so that a round
    // calls many), then each called visitor claims its turn with a poll.
    let fence = store
        .lead("costs", 600_000)
        .await
        .unwrap()
        .expect("sole instance leads");
    let admitted = visitors.min(50_000);
    // A round calls at most a burst (5 000) at a time, as a drop's rate does: one round calling
    // the whole room would run longer than a command may take.
    let open = Limits {
        burst: 5_000,
        ..limits(admitted, 6_000_000)
    };
    let before = read(&mut info).await;
    let mut called = 0;
    let mut rounds = 0;
    while called < admitted && rounds < 10_000 {
        called += store.admission_round(&open, fence).await.unwrap().called;
        rounds += 1;
    }
    let after = read(&mut info).await;
    row(
        &format!("admitted visitor: the admission round ({rounds} rounds)"),
        called,
        before,
        after,
    );
    let before = read(&mut info).await;
    for n in 0..called {
        store.poll(&id(n), &open).await.unwrap();
    }
    let after = read(&mut info).await;
    row(
        "admitted visitor: its claim (`poll`)",
        called,
        before,
        after,
    );

    // An instance's background, per room and loop tick when nothing happens: every instance
    // renews or checks the lease, syncs the settings, reads the epoch and the counts; the leader
    // also runs a round.
    let before = read(&mut info).await;
    for _ in 0..TICKS {
        store.lead("costs", 600_000).await.unwrap();
        store.load_settings().await.unwrap();
        store.epoch().await.unwrap();
        store.counts().await.unwrap();
    }
    let after = read(&mut info).await;
    row(
        "instance: one idle loop tick (lease, settings, epoch, counts)",
        TICKS,
        before,
        after,
    );
    let closed = limits(0, 0);
    let before = read(&mut info).await;
    for _ in 0..TICKS {
        store.admission_round(&closed, fence).await.unwrap();
    }
    let after = read(&mut info).await;
    row("leader: one round that calls nobody", TICKS, before, after);
    let total = read(&mut info).await;
    println!();
    println!(
        "Redis used_memory at the end: {:.1} MiB with {} waiting",
        total.used_memory as f64 / 1048576.0,
        visitors - called
    );
}
