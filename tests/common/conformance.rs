//! The behaviour every store must have. Each check takes a fresh store and the manual clock it
//! reads; `store_conformance!` turns them into one test each for a given store.

use std::sync::Arc;
use std::time::Duration;

use waitroom::clock::{Clock, ManualClock, Millis};
use waitroom::core::autopilot::{Exchange, Setpoint, Signal, window_start};
use waitroom::core::history::{OwnCounters, Share};
use waitroom::core::ip_limit::{IpClaim, IpLimits, JOIN_GRACE_MS, RECHECK_EVERY_MS};
use waitroom::core::queue_id::QueueId;
use waitroom::core::room::{FoundVisitor, Limits, Pick, Placing, PollOutcome, VisitorState};
use waitroom::core::sharing::{MINUTE_MS, MinuteCounts, SharedUse};
use waitroom::store::{
    AutopilotRecord, AutopilotState, RevokeReason, SHARES_KEPT_MS, Store, StoreError, TicketPlace,
    window_kept_until,
};

pub fn limits(capacity: u64, per_minute: u64) -> Limits {
    Limits {
        capacity,
        new_users_per_minute: per_minute,
        burst: per_minute,
        session_ms: 60_000,
        abandon_after_ms: 300_000,
        claim_window_ms: 40_000,
        pick: Pick::Fifo,
        placing: Placing::Arrival,
        admitting: true,
    }
}

async fn lead<S: Store>(store: &S) -> u64 {
    store
        .lead("test", 10_000)
        .await
        .expect("store answers")
        .expect("sole instance leads")
}

fn waiting(outcome: PollOutcome) -> (u64, u64) {
    match outcome {
        PollOutcome::Waiting { position, queued } => (position, queued),
        other => panic!("expected to wait, got {other:?}"),
    }
}

pub async fn direct_admission_until_full<S: Store>(store: S, _clock: Arc<ManualClock>) {
    let l = limits(2, 100);
    assert!(store.admit_directly("a", &l).await.unwrap().is_some());
    assert!(store.admit_directly("b", &l).await.unwrap().is_some());
    assert_eq!(store.admit_directly("c", &l).await.unwrap(), None);
    let counts = store.counts().await.unwrap();
    assert_eq!(counts.occupancy(), 2);
    assert_eq!(counts.admitted_total, 2);
    assert_eq!(counts.admitted_last_minute, 2);
    assert!(store.end_pass("a", RevokeReason::Ended, &l).await.unwrap());
    store.join("w", None, &l).await.unwrap();
    assert_eq!(
        store.admit_directly("d", &l).await.unwrap(),
        None,
        "nobody jumps a waiting visitor"
    );
}

pub async fn joining_is_idempotent_and_positions_are_exact<S: Store>(
    store: S,
    _clock: Arc<ManualClock>,
) {
    let l = limits(1, 100);
    let a = store.join("a", None, &l).await.unwrap();
    let b = store.join("b", None, &l).await.unwrap();
    let c = store.join("c", None, &l).await.unwrap();
    assert_eq!((a.position, b.position, c.position), (1, 2, 3));
    assert!(a.place < b.place && b.place < c.place);
    assert_eq!(
        store.join("b", None, &l).await.unwrap(),
        Joined { queued: 3, ..b }
    );
    assert_eq!(waiting(store.poll("c", &l).await.unwrap()), (3, 3));
    assert!(store.leave_queue("a").await.unwrap());
    assert!(!store.leave_queue("a").await.unwrap());
    assert_eq!(waiting(store.poll("c", &l).await.unwrap()), (2, 2));
    assert_eq!(store.poll("a", &l).await.unwrap(), PollOutcome::Unknown);
}

use waitroom::store::Joined;

pub async fn fifo_rounds_call_in_order_and_the_claim_is_a_pass<S: Store>(
    store: S,
    clock: Arc<ManualClock>,
) {
    let l = limits(2, 100);
    for id in ["a", "b", "c"] {
        store.join(id, None, &l).await.unwrap();
    }
    let fence = lead(&store).await;
    clock.advance(Duration::from_secs(3));
    let called_at = clock.now_ms();
    let report = store.admission_round(&l, fence).await.unwrap();
    assert_eq!(report.called, 2);
    assert_eq!(store.counts().await.unwrap().called, 2);
    assert_eq!(waiting(store.poll("c", &l).await.unwrap()), (1, 1));
    match store.poll("b", &l).await.unwrap() {
        PollOutcome::Admitted {
            called_at: Some(at),
            expires_at,
        } => {
            // The Redis store runs on Redis's own clock: close to the test's.
            assert!(
                (at - called_at).abs() < 1_000,
                "called at {at}, not {called_at}"
            );
            assert!(expires_at > 0);
        }
        other => panic!("b was called: {other:?}"),
    }
    assert!(matches!(
        store.poll("b", &l).await.unwrap(),
        PollOutcome::Admitted {
            called_at: None,
            ..
        }
    ));
    let counts = store.counts().await.unwrap();
    assert_eq!((counts.passes, counts.called, counts.queued), (1, 1, 1));
    assert_eq!(counts.occupancy(), 2);
    assert_eq!(store.admission_round(&l, fence).await.unwrap().called, 0);
}

pub async fn the_rate_is_held<S: Store>(store: S, clock: Arc<ManualClock>) {
    let l = Limits {
        burst: 5,
        ..limits(1_000, 60)
    };
    for i in 0..100 {
        store.join(&format!("v{i:03}"), None, &l).await.unwrap();
    }
    let fence = lead(&store).await;
    assert_eq!(store.admission_round(&l, fence).await.unwrap().called, 5);
    let mut called = 0;
    for _ in 0..40 {
        clock.advance(Duration::from_millis(250));
        let fence = lead(&store).await;
        called += store.admission_round(&l, fence).await.unwrap().called;
    }
    assert_eq!(called, 10, "one a second for ten seconds");
    assert_eq!(store.counts().await.unwrap().admitted_last_minute, 15);
}

pub async fn waiters_who_stop_polling_drop_out<S: Store>(store: S, clock: Arc<ManualClock>) {
    let paused = Limits {
        admitting: false,
        ..limits(10, 100)
    };
    store.join("gone", None, &paused).await.unwrap();
    store.join("here", None, &paused).await.unwrap();
    clock.advance(Duration::from_secs(200));
    waiting(store.poll("here", &paused).await.unwrap());
    clock.advance(Duration::from_secs(100));
    let fence = lead(&store).await;
    let report = store.admission_round(&paused, fence).await.unwrap();
    assert_eq!((report.abandoned, report.called), (1, 0));
    assert_eq!(
        store.poll("gone", &paused).await.unwrap(),
        PollOutcome::Unknown
    );
    let open = limits(10, 100);
    assert_eq!(store.admission_round(&open, fence).await.unwrap().called, 1);
    assert_eq!(store.counts().await.unwrap().abandoned_total, 1);
}

pub async fn a_called_visitor_who_never_claims_frees_the_slot<S: Store>(
    store: S,
    clock: Arc<ManualClock>,
) {
    let l = limits(1, 100);
    store.join("a", None, &l).await.unwrap();
    store.join("b", None, &l).await.unwrap();
    let fence = lead(&store).await;
    assert_eq!(store.admission_round(&l, fence).await.unwrap().called, 1);
    clock.advance(Duration::from_secs(39));
    waiting(store.poll("b", &l).await.unwrap());
    let fence = lead(&store).await;
    assert_eq!(store.admission_round(&l, fence).await.unwrap().called, 0);
    clock.advance(Duration::from_secs(1));
    let fence = lead(&store).await;
    let report = store.admission_round(&l, fence).await.unwrap();
    assert_eq!((report.no_shows, report.called), (1, 1));
    assert_eq!(store.poll("a", &l).await.unwrap(), PollOutcome::Unknown);
    assert!(matches!(
        store.poll("b", &l).await.unwrap(),
        PollOutcome::Admitted { .. }
    ));
}

pub async fn passes_slide_expire_and_heal_capacity<S: Store>(store: S, clock: Arc<ManualClock>) {
    let l = limits(1, 100);
    let epoch = store.join("probe", None, &l).await.unwrap().epoch;
    store.leave_queue("probe").await.unwrap();
    let first = store.admit_directly("a", &l).await.unwrap().unwrap();
    clock.advance(Duration::from_secs(30));
    let slid = store.touch_pass("a", &epoch, &l).await.unwrap().unwrap();
    assert_eq!(slid - first, 30_000);
    clock.advance(Duration::from_secs(59));
    let fence = lead(&store).await;
    assert_eq!(store.admission_round(&l, fence).await.unwrap().expired, 0);
    assert_eq!(store.admit_directly("b", &l).await.unwrap(), None);
    clock.advance(Duration::from_secs(1));
    let fence = lead(&store).await;
    assert_eq!(store.admission_round(&l, fence).await.unwrap().expired, 1);
    assert_eq!(store.touch_pass("a", &epoch, &l).await.unwrap(), None);
    assert!(store.admit_directly("b", &l).await.unwrap().is_some());
    assert_eq!(store.counts().await.unwrap().expired_total, 1);
}

pub async fn ending_a_pass_frees_the_slot_and_refuses_it<S: Store>(
    store: S,
    _clock: Arc<ManualClock>,
) {
    let l = limits(1, 100);
    let epoch = store.join("probe", None, &l).await.unwrap().epoch;
    store.leave_queue("probe").await.unwrap();
    store.admit_directly("a", &l).await.unwrap().unwrap();
    assert!(store.revoked("a").is_none());
    assert!(store.end_pass("a", RevokeReason::Ended, &l).await.unwrap());
    assert!(store.revoked("a").is_some());
    assert_eq!(store.touch_pass("a", &epoch, &l).await.unwrap(), None);
    assert_eq!(store.poll("a", &l).await.unwrap(), PollOutcome::Unknown);
    let counts = store.counts().await.unwrap();
    assert_eq!((counts.occupancy(), counts.revoked_total), (0, 1));
    assert!(store.admit_directly("b", &l).await.unwrap().is_some());
    assert!(
        !store
            .end_pass("nobody", RevokeReason::Ended, &l)
            .await
            .unwrap()
    );
    assert_eq!(store.revoked("a"), Some(RevokeReason::Ended));
}

/// A pass revoked for sharing says so, and its ticket is refused with it (same id).
pub async fn a_pass_revoked_for_sharing_says_why<S: Store>(store: S, _clock: Arc<ManualClock>) {
    let l = limits(2, 100);
    store.admit_directly("shared", &l).await.unwrap().unwrap();
    store.admit_directly("ended", &l).await.unwrap().unwrap();
    assert!(
        store
            .end_pass("shared", RevokeReason::Shared, &l)
            .await
            .unwrap()
    );
    assert!(
        store
            .end_pass("ended", RevokeReason::Ended, &l)
            .await
            .unwrap()
    );
    assert_eq!(store.revoked("shared"), Some(RevokeReason::Shared));
    assert_eq!(store.revoked("ended"), Some(RevokeReason::Ended));
    assert_eq!(store.revoked("nobody"), None);
    assert_eq!(store.counts().await.unwrap().occupancy(), 0);
}

/// Every network a pass is used from counts once, within one session.
pub async fn a_pass_counts_its_networks_within_a_session<S: Store>(
    store: S,
    clock: Arc<ManualClock>,
) {
    let session = 60_000;
    assert_eq!(
        store
            .note_network("p", "198.51.100.0/24", session)
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        store
            .note_network("p", "198.51.100.0/24", session)
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        store
            .note_network("p", "203.0.113.0/24", session)
            .await
            .unwrap(),
        2
    );
    assert_eq!(
        store
            .note_network("q", "203.0.113.0/24", session)
            .await
            .unwrap(),
        1
    );
    clock.advance(Duration::from_secs(30));
    assert_eq!(
        store
            .note_network("p", "2001:db8::/56", session)
            .await
            .unwrap(),
        3
    );
    clock.advance(Duration::from_secs(31));
    assert_eq!(
        store
            .note_network("p", "192.0.2.0/24", session)
            .await
            .unwrap(),
        2,
        "the first two were last seen over a session ago"
    );
}

/// A proof-of-work seed is spent once, however often its answer comes back; spending one seed
/// spends no other; a spent seed is forgotten once it has expired (its answer is refused
/// unopened from then on).
pub async fn a_seed_is_spent_once<S: Store>(store: S, clock: Arc<ManualClock>) {
    let until = clock.now_ms() + 120_000;
    assert!(store.spend_seed("s1", until).await.unwrap());
    assert!(!store.spend_seed("s1", until).await.unwrap(), "spent");
    assert!(!store.spend_seed("s1", until + 60_000).await.unwrap());
    assert!(store.spend_seed("s2", until).await.unwrap());
    clock.advance(Duration::from_secs(120));
    assert!(
        !store.spend_seed("s1", until).await.unwrap(),
        "until its expiry"
    );
    clock.advance(Duration::from_secs(61));
    assert!(
        store
            .spend_seed("s1", clock.now_ms() + 1_000)
            .await
            .unwrap()
    );
}

/// The instances' reports of a pass's requests add up by minute: each report answers every
/// instance's count of this minute and of the one before; older minutes are forgotten.
pub async fn pass_use_adds_up_by_minute_over_instances<S: Store>(
    store: S,
    clock: Arc<ManualClock>,
) {
    let into = clock.now_ms().rem_euclid(MINUTE_MS);
    clock.advance(Duration::from_millis((MINUTE_MS + 1_000 - into) as u64));
    let minute = clock.now_ms() - 1_000;
    let uses = |pairs: &[(&str, u64)]| -> Vec<(String, u64)> {
        pairs.iter().map(|(p, n)| ((*p).to_owned(), *n)).collect()
    };
    let counts = |pairs: &[(u64, u64)]| -> Vec<MinuteCounts> {
        pairs
            .iter()
            .map(|&(current, previous)| MinuteCounts { current, previous })
            .collect()
    };
    // One instance, then another.
    let a = store
        .report_pass_use(&uses(&[("p", 3), ("q", 1)]))
        .await
        .unwrap();
    assert_eq!(
        a,
        SharedUse {
            minute,
            counts: counts(&[(3, 0), (1, 0)])
        }
    );
    let b = store.report_pass_use(&uses(&[("p", 2)])).await.unwrap();
    assert_eq!(b.counts, counts(&[(5, 0)]));
    let none = store.report_pass_use(&[]).await.unwrap();
    assert_eq!((none.minute, none.counts.len()), (minute, 0));
    clock.advance(Duration::from_secs(60));
    let next = store
        .report_pass_use(&uses(&[("p", 1), ("r", 4)]))
        .await
        .unwrap();
    assert_eq!(
        next,
        SharedUse {
            minute: minute + MINUTE_MS,
            counts: counts(&[(1, 5), (4, 0)])
        }
    );
    clock.advance(Duration::from_secs(60));
    let third = store.report_pass_use(&uses(&[("p", 1)])).await.unwrap();
    assert_eq!(third.counts, counts(&[(1, 1)]), "two minutes ago is gone");
    clock.advance(Duration::from_secs(180));
    let later = store.report_pass_use(&uses(&[("p", 2)])).await.unwrap();
    assert_eq!(later.counts, counts(&[(2, 0)]));
}

pub async fn ending_a_waiting_visitor_leaves_the_line_whole<S: Store>(
    store: S,
    _clock: Arc<ManualClock>,
) {
    let l = limits(5, 100);
    store.join("a", None, &l).await.unwrap();
    store.join("b", None, &l).await.unwrap();
    assert!(
        !store.end_pass("a", RevokeReason::Ended, &l).await.unwrap(),
        "a holds no pass"
    );
    assert_eq!(waiting(store.poll("a", &l).await.unwrap()), (1, 2));
    let fence = lead(&store).await;
    assert_eq!(store.admission_round(&l, fence).await.unwrap().called, 2);
    let counts = store.counts().await.unwrap();
    assert_eq!(
        (counts.called, counts.queued, counts.admitted_total),
        (2, 0, 2)
    );
    assert!(matches!(
        store.poll("b", &l).await.unwrap(),
        PollOutcome::Admitted { .. }
    ));
}

pub async fn a_ticket_from_another_epoch_gets_its_place_back<S: Store>(
    store: S,
    _clock: Arc<ManualClock>,
) {
    let l = limits(1, 100);
    let current = store.join("first", None, &l).await.unwrap();
    let lost = TicketPlace {
        place: current.place - 1_000_000,
        epoch: "an-epoch-that-was-lost".into(),
    };
    assert_eq!(store.epoch().await.unwrap(), current.epoch);
    let restored = store.join("old", Some(&lost), &l).await.unwrap();
    assert_eq!(restored.place, lost.place);
    assert_eq!(restored.position, 1);
    assert_eq!(restored.epoch, current.epoch);
    // Same epoch: the visitor dropped out, so its old place is not given back.
    let dropped = TicketPlace {
        place: current.place - 2_000_000,
        epoch: current.epoch.clone(),
    };
    let rejoined = store.join("dropped", Some(&dropped), &l).await.unwrap();
    assert_eq!(rejoined.position, 3);
}

pub async fn a_pass_from_another_epoch_registers_again<S: Store>(
    store: S,
    _clock: Arc<ManualClock>,
) {
    let l = limits(5, 100);
    let epoch = store.join("probe", None, &l).await.unwrap().epoch;
    store.leave_queue("probe").await.unwrap();
    assert_eq!(store.touch_pass("ghost", &epoch, &l).await.unwrap(), None);
    assert!(
        store
            .touch_pass("survivor", "lost-epoch", &l)
            .await
            .unwrap()
            .is_some()
    );
    assert_eq!(store.counts().await.unwrap().passes, 1);
    store.admit_directly("ended", &l).await.unwrap().unwrap();
    store
        .end_pass("ended", RevokeReason::Ended, &l)
        .await
        .unwrap();
    assert_eq!(
        store.touch_pass("ended", "lost-epoch", &l).await.unwrap(),
        None,
        "a revoked pass stays revoked"
    );
}

pub async fn keep_alive_slides_heartbeats_and_lists_the_called<S: Store>(
    store: S,
    clock: Arc<ManualClock>,
) {
    let l = Limits {
        abandon_after_ms: 30_000,
        ..limits(1, 100)
    };
    for id in ["a", "b", "c"] {
        store.join(id, None, &l).await.unwrap();
    }
    let fence = lead(&store).await;
    assert_eq!(store.admission_round(&l, fence).await.unwrap().called, 1);
    clock.advance(Duration::from_secs(20));
    let ids: Vec<String> = ["a", "b", "nobody"].iter().map(|s| s.to_string()).collect();
    assert_eq!(
        store.keep_alive(&ids, &l).await.unwrap(),
        vec!["a".to_owned()]
    );
    // With no ids (a `[notify]` contact held, nobody polling) it still answers who is called,
    // and slides no heartbeat (c is still dropped below).
    assert_eq!(
        store.keep_alive(&[], &l).await.unwrap(),
        vec!["a".to_owned()]
    );
    clock.advance(Duration::from_secs(15));
    let fence = lead(&store).await;
    let report = store.admission_round(&l, fence).await.unwrap();
    assert_eq!(report.abandoned, 1, "only c, who was not kept alive");
    assert_eq!(waiting(store.poll("b", &l).await.unwrap()), (1, 1));
    assert!(matches!(
        store.poll("a", &l).await.unwrap(),
        PollOutcome::Admitted { .. }
    ));
    assert!(store.keep_alive(&[], &l).await.unwrap().is_empty());
    let many: Vec<String> = (0..2500).map(|i| format!("x{i}")).collect();
    store.keep_alive(&many, &l).await.unwrap();
}

pub async fn one_leader_at_a_time_with_fencing<S: Store>(store: S, clock: Arc<ManualClock>) {
    let l = limits(1, 100);
    let a = store.lead("a", 5_000).await.unwrap().expect("a leads");
    assert_eq!(store.lead("b", 5_000).await.unwrap(), None);
    assert_eq!(store.leader().await.unwrap().as_deref(), Some("a"));
    clock.advance(Duration::from_secs(4));
    assert_eq!(store.lead("a", 5_000).await.unwrap(), Some(a), "renewal");
    clock.advance(Duration::from_secs(4));
    assert_eq!(store.lead("b", 5_000).await.unwrap(), None, "renewed");
    clock.advance(Duration::from_secs(2));
    let b = store.lead("b", 5_000).await.unwrap().expect("a lapsed");
    assert!(b > a);
    assert!(matches!(
        store.admission_round(&l, a).await,
        Err(StoreError::NotLeader(_))
    ));
    store.admission_round(&l, b).await.unwrap();
    store.resign("a").await.unwrap();
    assert_eq!(store.leader().await.unwrap().as_deref(), Some("b"));
    store.resign("b").await.unwrap();
    assert_eq!(store.leader().await.unwrap(), None);
    assert!(store.lead("a", 5_000).await.unwrap().is_some());
}

/// A proxy group's one lease lives in one room's store and leads every room: a room whose own
/// lease was never taken takes the group's fence, and refuses one older than it has seen.
pub async fn a_room_follows_the_groups_fence<S: Store>(store: S, _clock: Arc<ManualClock>) {
    let l = limits(1, 100);
    store.admission_round(&l, 100).await.unwrap();
    store.admission_round(&l, 100).await.unwrap();
    assert!(matches!(
        store.admission_round(&l, 99).await,
        Err(StoreError::NotLeader(99))
    ));
    store.admission_round(&l, 101).await.unwrap();
    assert!(store.admission_round(&l, 100).await.is_err());
}

pub async fn settings_are_versioned<S: Store>(store: S, _clock: Arc<ManualClock>) {
    assert_eq!(store.load_settings().await.unwrap(), None);
    let v1 = store
        .save_settings(r#"{"total_active_users":5}"#)
        .await
        .unwrap();
    let v2 = store
        .save_settings(r#"{"total_active_users":6}"#)
        .await
        .unwrap();
    assert!(v2 > v1);
    let saved = store.load_settings().await.unwrap().unwrap();
    assert_eq!(saved.version, v2);
    assert_eq!(saved.json, r#"{"total_active_users":6}"#);
    store.ping().await.unwrap();
}

pub async fn capacity_holds_under_concurrent_admissions<S: Store>(
    store: S,
    _clock: Arc<ManualClock>,
) {
    let store = Arc::new(store);
    let l = limits(25, 10_000);
    let fence = lead(&*store).await;
    let mut tasks = Vec::new();
    for i in 0..200 {
        let store = store.clone();
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
    store.admission_round(&l, fence).await.unwrap();
    let counts = store.counts().await.unwrap();
    assert!(counts.occupancy() <= 25);
    assert_eq!(
        counts.occupancy() + counts.queued + counts.revoked_total,
        200
    );
}

const ADDRESS: &str = "198.51.100.7";

fn ms(ms: i64) -> Duration {
    Duration::from_millis(ms as u64)
}

pub async fn one_address_is_held_to_its_rate_of_new_tickets<S: Store>(
    store: S,
    clock: Arc<ManualClock>,
) {
    let ip = IpLimits {
        per_minute: 60,
        burst: 3,
        max_live: 0,
        ipv6_prefix: 56,
    };
    let mut allowed = 0;
    let mut refused = 0;
    // Five asks every half second for a minute: the burst, then one a second.
    for step in 0..120 {
        for k in 0..5 {
            match store
                .claim_ticket(ADDRESS, &format!("t{step}-{k}"), &ip)
                .await
                .unwrap()
            {
                IpClaim::Allowed => allowed += 1,
                IpClaim::TooFast { retry_after_ms } => {
                    assert!((1..=1_000).contains(&retry_after_ms), "{retry_after_ms}");
                    refused += 1;
                }
                IpClaim::TooManyLive => panic!("the cap is off"),
            }
        }
        if step == 0 {
            assert_eq!(
                store.claim_ticket(ADDRESS, "x", &ip).await.unwrap(),
                IpClaim::TooFast {
                    retry_after_ms: 1_000
                },
                "the next token comes in a second"
            );
            assert_eq!(
                store
                    .claim_ticket("198.51.100.8", "other", &ip)
                    .await
                    .unwrap(),
                IpClaim::Allowed,
                "another address has its own budget"
            );
        }
        clock.advance(ms(500));
    }
    assert_eq!(allowed, 3 + 59);
    assert_eq!(refused, 600 - allowed);
}

pub async fn an_address_holds_at_most_its_cap_of_tickets_in_line<S: Store>(
    store: S,
    clock: Arc<ManualClock>,
) {
    let ip = IpLimits {
        per_minute: 0,
        burst: 0,
        max_live: 2,
        ipv6_prefix: 56,
    };
    let l = limits(1, 100);
    let claim = |id: &'static str| store.claim_ticket(ADDRESS, id, &ip);
    for id in ["a", "b"] {
        assert_eq!(claim(id).await.unwrap(), IpClaim::Allowed);
        store.join(id, None, &l).await.unwrap();
    }
    assert_eq!(claim("c").await.unwrap(), IpClaim::TooManyLive);
    clock.advance(ms(JOIN_GRACE_MS));
    assert_eq!(claim("c").await.unwrap(), IpClaim::TooManyLive);
    assert_eq!(
        store
            .claim_ticket("2001:db8::/64", "v6", &ip)
            .await
            .unwrap(),
        IpClaim::Allowed,
        "another address has its own cap"
    );

    // Leaving frees a place.
    assert!(store.leave_queue("a").await.unwrap());
    clock.advance(ms(RECHECK_EVERY_MS));
    assert_eq!(claim("c").await.unwrap(), IpClaim::Allowed);
    store.join("c", None, &l).await.unwrap();
    clock.advance(ms(RECHECK_EVERY_MS.max(JOIN_GRACE_MS)));
    assert_eq!(claim("d").await.unwrap(), IpClaim::TooManyLive);

    // Being called frees one: b is at the head of the line.
    let fence = lead(&store).await;
    assert_eq!(store.admission_round(&l, fence).await.unwrap().called, 1);
    clock.advance(ms(RECHECK_EVERY_MS));
    assert_eq!(claim("d").await.unwrap(), IpClaim::Allowed);
    store.join("d", None, &l).await.unwrap();
    clock.advance(ms(JOIN_GRACE_MS));
    assert_eq!(claim("e").await.unwrap(), IpClaim::TooManyLive);

    // Giving up (no poll for abandon_after) frees both.
    clock.advance(ms(l.abandon_after_ms + 1));
    let fence = lead(&store).await;
    assert_eq!(store.admission_round(&l, fence).await.unwrap().abandoned, 2);
    assert_eq!(claim("e").await.unwrap(), IpClaim::Allowed);
    assert_eq!(claim("f").await.unwrap(), IpClaim::Allowed);
    assert_eq!(claim("g").await.unwrap(), IpClaim::TooManyLive);
}

pub async fn drawn_places_stay_in_their_span<S: Store>(store: S, clock: Arc<ManualClock>) {
    let now = clock.now_ms();
    let window_ms = 30_000;
    let lottery = Limits {
        placing: Placing::Lottery { window_ms },
        ..limits(1, 100)
    };
    let from = now - now.rem_euclid(window_ms);
    let mut places = Vec::new();
    for i in 0..50 {
        places.push(
            store
                .join(&format!("l{i}"), None, &lottery)
                .await
                .unwrap()
                .place,
        );
    }
    let span = from * 1000..(from + window_ms) * 1000;
    assert!(
        places.iter().all(|p| span.contains(p)),
        "{places:?} in {span:?}"
    );
    let mut sorted = places.clone();
    sorted.sort_unstable();
    assert_ne!(
        places, sorted,
        "50 arrivals in drawn order by chance: 1 in 50!"
    );
    // Arrival order again: behind the whole window.
    let after = store.join("after", None, &limits(1, 100)).await.unwrap();
    assert!(after.place >= span.end, "{} behind {span:?}", after.place);
    assert_eq!(after.position, 51);

    // A shuffled pre-queue draws between its opening and the start, until the start.
    let prequeue = Limits {
        placing: Placing::DrawUntil {
            from_ms: now - 10_000,
            until_ms: now + 10_000,
        },
        ..limits(1, 100)
    };
    let drawn = store.join("early", None, &prequeue).await.unwrap().place;
    assert!(((now - 10_000) * 1000..(now + 10_000) * 1000).contains(&drawn));
    clock.advance(Duration::from_secs(11));
    let late = store.join("late", None, &prequeue).await.unwrap().place;
    assert!(
        late >= (now + 10_000) * 1000,
        "after the start: arrival order"
    );
}

// ------------------------------------------------------------------------------ the autopilot

const WINDOW_MS: Millis = 10_000;

/// The window that ended last, as the leader reads it.
fn last_window(clock: &ManualClock) -> Millis {
    window_start(clock.now_ms(), WINDOW_MS) - WINDOW_MS
}

/// One instance's window from `started_at`: a response for each latency (in us), then `failed`
/// connection failures and `slow` 503s after 2 s.
fn window(started_at: Millis, latencies_us: &[u64], failed: u64, slow: u64) -> Signal {
    let mut w = Signal::new(started_at);
    for us in latencies_us {
        w.record(Exchange::Response {
            status: 200,
            latency: Duration::from_micros(*us),
        });
    }
    for _ in 0..failed {
        w.record(Exchange::Failed);
    }
    for _ in 0..slow {
        w.record(Exchange::Response {
            status: 503,
            latency: Duration::from_secs(2),
        });
    }
    w.ended_at = started_at + WINDOW_MS;
    w
}

/// Spread, repeatable latencies: `n` of them in [from_ms, to_ms).
fn latencies(n: u64, from_ms: u64, to_ms: u64) -> Vec<u64> {
    let span_us = (to_ms - from_ms) * 1000;
    (0..n)
        .map(|i| from_ms * 1000 + (i * 7_919 + 13) % span_us)
        .collect()
}

fn record(total_active_users: u64, reason: &str, changed_at: Millis) -> AutopilotRecord {
    AutopilotRecord {
        setpoint: Setpoint {
            total_active_users,
            new_users_per_minute: total_active_users * 6,
            burst: total_active_users,
        },
        start: Setpoint {
            total_active_users: 100,
            new_users_per_minute: 600,
            burst: 100,
        },
        reason: reason.into(),
        changed_at,
    }
}

pub async fn windows_of_several_instances_add_up_exactly<S: Store>(
    store: S,
    clock: Arc<ManualClock>,
) {
    let start = last_window(&clock);
    // A fast instance and a slow one: the p95 of the two together is in the slow one's tail.
    let fast = latencies(900, 20, 80);
    let slow = latencies(100, 150, 900);
    let a = window(start, &fast, 3, 0);
    let b = window(start, &slow, 0, 4);
    store.report_window(&a).await.unwrap();
    store.report_window(&b).await.unwrap();

    let read = store.read_window(start).await.unwrap();
    let mut both = a.clone();
    both.merge(&b);
    assert_eq!(read, both, "counts, latency sum and every bucket add up");
    assert_eq!((read.requests, read.errors), (1_007, 7));
    assert_eq!(read.ended_at, start + WINDOW_MS);

    // The p95 read from the sum is the p95 of every latency, to within a bucket (1/16).
    let mut every: Vec<u64> = fast.iter().chain(&slow).copied().collect();
    every.extend([2_000_000; 4]);
    every.sort_unstable();
    let rank = (every.len() * 95).div_ceil(100);
    let exact = every[rank - 1] as f64;
    let p95 = read.p95().unwrap().as_micros() as f64;
    assert!(
        (p95 - exact).abs() <= exact / 16.0,
        "p95 {p95} us, of the samples {exact} us"
    );
    assert!(read.p95() > a.p95(), "the slow instance's tail counts");

    // Reports in parallel (every instance at a window's end) lose nothing, and stay in their
    // own window.
    let store = Arc::new(store);
    let next = start + WINDOW_MS;
    let tasks: Vec<_> = (0..20)
        .map(|i| {
            let store = store.clone();
            tokio::spawn(async move {
                let w = window(next, &latencies(10 + i, 30, 60), i % 2, 0);
                store.report_window(&w).await.unwrap();
                w
            })
        })
        .collect();
    let mut expected = Signal::new(next);
    for t in tasks {
        expected.merge(&t.await.unwrap());
    }
    assert_eq!(store.read_window(next).await.unwrap(), expected);
    assert_eq!(store.read_window(start).await.unwrap(), both);
}

pub async fn a_window_nobody_reported_reads_empty<S: Store>(store: S, clock: Arc<ManualClock>) {
    let start = last_window(&clock);
    assert_eq!(store.read_window(start).await.unwrap(), Signal::new(start));
    // An idle instance's window adds nothing.
    store
        .report_window(&window(start, &[], 0, 0))
        .await
        .unwrap();
    assert_eq!(store.read_window(start).await.unwrap(), Signal::new(start));
    // A window next to a reported one is still empty.
    store
        .report_window(&window(start, &latencies(5, 10, 20), 0, 0))
        .await
        .unwrap();
    let before = start - WINDOW_MS;
    assert_eq!(
        store.read_window(before).await.unwrap(),
        Signal::new(before)
    );
}

pub async fn reported_windows_are_kept_for_a_few_windows<S: Store>(
    store: S,
    clock: Arc<ManualClock>,
) {
    let start = last_window(&clock);
    let w = window(start, &latencies(50, 10, 90), 1, 0);
    let until = window_kept_until(&w);
    assert_eq!(
        until,
        w.ended_at + 5 * WINDOW_MS,
        "five windows after its end"
    );
    store.report_window(&w).await.unwrap();

    clock.advance(Duration::from_millis((until - clock.now_ms() - 1) as u64));
    assert_eq!(store.read_window(start).await.unwrap(), w, "still kept");
    clock.advance(Duration::from_millis(1));
    assert_eq!(
        store.read_window(start).await.unwrap(),
        Signal::new(start),
        "gone at {until}"
    );
    // A report that comes after its window's keeping adds nothing.
    store.report_window(&w).await.unwrap();
    assert_eq!(store.read_window(start).await.unwrap(), Signal::new(start));
    // Later windows are kept as before.
    let now = last_window(&clock);
    let later = window(now, &latencies(50, 10, 90), 0, 0);
    store.report_window(&later).await.unwrap();
    assert_eq!(store.read_window(now).await.unwrap(), later);
}

pub async fn only_the_current_leader_writes_the_autopilot_record<S: Store>(
    store: S,
    clock: Arc<ManualClock>,
) {
    assert_eq!(
        store.load_autopilot().await.unwrap(),
        AutopilotState::default(),
        "a new room: not paused, no record"
    );
    // Any token not below the highest seen writes: with several rooms the lease lives in the
    // first room's store, and the other rooms follow the fence (see
    // `a_room_follows_the_groups_fence`).
    let a = store.lead("a", 5_000).await.unwrap().expect("a leads");
    let first = record(120, "breach: p95 310 ms -> 120", clock.now_ms());
    store.save_autopilot(&first, a).await.unwrap();
    let state = store.load_autopilot().await.unwrap();
    assert_eq!(state.record.as_ref(), Some(&first));
    assert!(!state.paused);

    // a stalls past its lease; b takes over. a's write, late, is refused.
    clock.advance(Duration::from_secs(6));
    let b = store.lead("b", 5_000).await.unwrap().expect("a lapsed");
    let stale = store.save_autopilot(&record(300, "stale", 2), a).await;
    assert!(
        matches!(stale, Err(StoreError::NotLeader(f)) if f == a),
        "{stale:?}"
    );
    assert_eq!(
        store.load_autopilot().await.unwrap().record,
        Some(first),
        "unchanged"
    );
    let second = record(135, "healthy and full -> 135", clock.now_ms());
    store.save_autopilot(&second, b).await.unwrap();
    assert_eq!(store.load_autopilot().await.unwrap().record, Some(second));

    // Gone once its leader resigns and another leads.
    store.resign("b").await.unwrap();
    let c = store.lead("c", 5_000).await.unwrap().expect("b resigned");
    assert!(c > b);
    assert!(matches!(
        store.save_autopilot(&record(1, "resigned", 3), b).await,
        Err(StoreError::NotLeader(_))
    ));
}

pub async fn the_pause_switch_is_kept_apart_from_the_record<S: Store>(
    store: S,
    clock: Arc<ManualClock>,
) {
    store.set_autopilot_paused(true).await.unwrap();
    assert_eq!(
        store.load_autopilot().await.unwrap(),
        AutopilotState {
            paused: true,
            record: None
        }
    );
    // The leader's writes leave the operator's switch alone.
    let fence = lead(&store).await;
    let held = record(80, "paused", clock.now_ms());
    store.save_autopilot(&held, fence).await.unwrap();
    let state = store.load_autopilot().await.unwrap();
    assert!(state.paused);
    assert_eq!(state.record.as_ref(), Some(&held));
    store.set_autopilot_paused(true).await.unwrap();
    assert!(store.load_autopilot().await.unwrap().paused);
    store.set_autopilot_paused(false).await.unwrap();
    assert_eq!(
        store.load_autopilot().await.unwrap(),
        AutopilotState {
            paused: false,
            record: Some(held)
        }
    );
}

/// The drop report's `joined`: one per visitor given a place, whether joining again or in a
/// batch, and nobody counted twice.
pub async fn joins_are_counted_once_per_visitor<S: Store>(store: S, _clock: Arc<ManualClock>) {
    let l = limits(1, 100);
    assert_eq!(store.counts().await.unwrap().joined_total, 0);
    store.join("a", None, &l).await.unwrap();
    store.join("b", None, &l).await.unwrap();
    store.join("a", None, &l).await.unwrap();
    assert_eq!(store.counts().await.unwrap().joined_total, 2);
    assert!(store.leave_queue("b").await.unwrap());
    store.join("c", None, &l).await.unwrap();
    assert_eq!(
        store.counts().await.unwrap().joined_total,
        3,
        "a visitor who left stays counted"
    );
}

/// The operator's look-up by queue id: place, arrival and state while the room holds the
/// visitor, nothing once it is gone whichever way it went.
pub async fn a_visitor_is_found_by_its_queue_id_until_it_is_gone<S: Store>(
    store: S,
    clock: Arc<ManualClock>,
) {
    let l = limits(1, 100);
    let find = |id: &str| store.find_visitor(QueueId::of(id));
    let t0 = clock.now_ms();
    assert_eq!(find("a").await.unwrap(), None, "never seen");
    store.join("a", None, &l).await.unwrap();
    clock.advance(Duration::from_millis(5));
    store.join("b", None, &l).await.unwrap();
    store.join("c", None, &l).await.unwrap();
    clock.advance(Duration::from_millis(5));
    store.join("b", None, &l).await.unwrap();
    assert_eq!(
        find("b").await.unwrap(),
        Some(FoundVisitor {
            arrived_at: t0 + 5,
            state: VisitorState::Waiting {
                position: 2,
                queued: 3
            }
        }),
        "joining again keeps the first arrival"
    );
    let fence = lead(&store).await;
    assert_eq!(store.admission_round(&l, fence).await.unwrap().called, 1);
    assert_eq!(
        find("a").await.unwrap().map(|f| f.state),
        Some(VisitorState::Called {
            claim_by: t0 + 10 + l.claim_window_ms
        })
    );
    assert_eq!(
        find("c").await.unwrap().map(|f| f.state),
        Some(VisitorState::Waiting {
            position: 2,
            queued: 2
        })
    );
    clock.advance(Duration::from_millis(1));
    store.poll("a", &l).await.unwrap();
    assert_eq!(
        find("a").await.unwrap(),
        Some(FoundVisitor {
            arrived_at: t0,
            state: VisitorState::Inside {
                expires_at: t0 + 11 + l.session_ms
            }
        })
    );
    assert!(store.leave_queue("b").await.unwrap());
    assert_eq!(find("b").await.unwrap(), None, "left");
    assert_eq!(
        find("c").await.unwrap().map(|f| f.state),
        Some(VisitorState::Waiting {
            position: 1,
            queued: 1
        }),
        "the one behind moved up"
    );
    assert!(store.end_pass("a", RevokeReason::Ended, &l).await.unwrap());
    assert_eq!(find("a").await.unwrap(), None, "its pass ended");

    // A call never claimed, a waiter who stopped polling, a pass of its own that expires.
    let closed = Limits {
        admitting: false,
        ..l.clone()
    };
    assert_eq!(store.admission_round(&l, fence).await.unwrap().called, 1);
    store.join("idle", None, &l).await.unwrap();
    clock.advance(Duration::from_millis(40_000));
    assert_eq!(
        store
            .admission_round(&closed, fence)
            .await
            .unwrap()
            .no_shows,
        1
    );
    assert_eq!(find("c").await.unwrap(), None, "called and never came");
    assert!(find("idle").await.unwrap().is_some());
    clock.advance(Duration::from_millis(300_000));
    assert_eq!(
        store
            .admission_round(&closed, fence)
            .await
            .unwrap()
            .abandoned,
        1
    );
    assert_eq!(find("idle").await.unwrap(), None, "stopped polling");
    assert!(store.admit_directly("direct", &l).await.unwrap().is_some());
    assert_eq!(
        find("direct").await.unwrap().map(|f| f.arrived_at),
        Some(clock.now_ms())
    );
    clock.advance(Duration::from_millis(60_000));
    assert_eq!(
        store.admission_round(&closed, fence).await.unwrap().expired,
        1
    );
    assert_eq!(find("direct").await.unwrap(), None, "its pass expired");
}

/// A called visitor whose page asks to join again (its ticket lost, the same member id) keeps its
/// call and the place it was called from: it is not put back in line.
pub async fn a_called_visitor_joining_again_keeps_its_call<S: Store>(
    store: S,
    clock: Arc<ManualClock>,
) {
    let l = limits(1, 100);
    let a = store.join("a", None, &l).await.unwrap();
    store.join("b", None, &l).await.unwrap();
    let fence = lead(&store).await;
    clock.advance(Duration::from_secs(3));
    assert_eq!(store.admission_round(&l, fence).await.unwrap().called, 1);
    let again = store.join("a", None, &l).await.unwrap();
    assert_eq!((again.place, again.position, again.queued), (a.place, 1, 1));
    let counts = store.counts().await.unwrap();
    assert_eq!(
        (counts.called, counts.queued, counts.joined_total),
        (1, 1, 2)
    );
    assert!(matches!(
        store.poll("a", &l).await.unwrap(),
        PollOutcome::Admitted { .. }
    ));
    assert_eq!(waiting(store.poll("b", &l).await.unwrap()), (1, 1));
}

/// The drop report's shares: each instance's share of a minute is kept apart and replaced when
/// sent again (never added twice); an instance reads every share but its own; a share is gone
/// after a day.
pub async fn report_shares_are_kept_per_instance_and_replaced<S: Store>(
    store: S,
    clock: Arc<ManualClock>,
) {
    let now = clock.now_ms();
    let minute = now - now.rem_euclid(MINUTE_MS);
    let before = minute - MINUTE_MS;
    let share = |requests: u64| Share {
        counted: OwnCounters {
            origin_requests: requests,
            order_pairs: 2 * requests,
            ..OwnCounters::default()
        },
        waits: vec![1_000, u32::try_from(requests).unwrap() * 10],
        ..Share::default()
    };
    store
        .publish_shares("a", &[(before, share(1)), (minute, share(2))])
        .await
        .unwrap();
    // Sent again as its minute grew: replaced, not added.
    store
        .publish_shares("a", &[(minute, share(3))])
        .await
        .unwrap();
    store
        .publish_shares("b", &[(minute, share(5))])
        .await
        .unwrap();
    store.publish_shares("b", &[]).await.unwrap();
    let mut seen = store.shares_of(&[before, minute], "nobody").await.unwrap();
    seen.sort_by_key(|(m, s)| (*m, s.counted.origin_requests));
    assert_eq!(
        seen,
        vec![(before, share(1)), (minute, share(3)), (minute, share(5))]
    );
    assert_eq!(
        store.shares_of(&[minute], "a").await.unwrap(),
        vec![(minute, share(5))]
    );
    assert!(
        store
            .shares_of(&[minute + MINUTE_MS], "a")
            .await
            .unwrap()
            .is_empty()
    );
    assert!(store.shares_of(&[], "a").await.unwrap().is_empty());
    clock.advance(Duration::from_millis(SHARES_KEPT_MS as u64));
    assert!(
        store
            .shares_of(&[before, minute], "nobody")
            .await
            .unwrap()
            .is_empty(),
        "kept a day"
    );
}

#[macro_export]
macro_rules! store_conformance {
    ($make:expr) => {
        store_conformance!(@each $make;
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
            keep_alive_slides_heartbeats_and_lists_the_called,
            one_leader_at_a_time_with_fencing,
            a_room_follows_the_groups_fence,
            settings_are_versioned,
            capacity_holds_under_concurrent_admissions,
            one_address_is_held_to_its_rate_of_new_tickets,
            an_address_holds_at_most_its_cap_of_tickets_in_line,
            drawn_places_stay_in_their_span,
            windows_of_several_instances_add_up_exactly,
            a_window_nobody_reported_reads_empty,
            reported_windows_are_kept_for_a_few_windows,
            only_the_current_leader_writes_the_autopilot_record,
            the_pause_switch_is_kept_apart_from_the_record,
            a_pass_revoked_for_sharing_says_why,
            a_pass_counts_its_networks_within_a_session,
            pass_use_adds_up_by_minute_over_instances,
            a_seed_is_spent_once,
            report_shares_are_kept_per_instance_and_replaced
        );
    };
    (@each $make:expr; $($name:ident),+) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                let (store, clock) = $make().await;
                common::conformance::$name(store, clock).await;
            }
        )+
    };
}
