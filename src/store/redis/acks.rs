//! `[store] replica_acks`: after an admission's write, Redis `WAIT` for that many replicas to
//! acknowledge it, within `replica_ack_timeout`, before the visitor gets its pass. A pass handed
//! out after the acknowledgement is on a replica, which a failover promotes (Sentinel picks the
//! replica with the most data); one that was not acknowledged in time is counted and logged, and
//! the visitor is let in all the same: the write is done, and refusing the admission now would
//! charge the room a slot that no cookie holds.
//!
//! `WAIT` blocks the connection it is sent on until the replicas answer or its time runs out, and
//! Redis answers one connection's commands in order: on the store's shared connection, a WAIT for
//! a lagging replica would hold every other call of this instance (polls, joins, the lease)
//! behind it. So the WAITs have a connection of their own, and one WAIT answers for every
//! admission that finished before it was sent. `WAIT` waits for the replicas to reach the last
//! write of the connection it is sent on, so the waiter first writes on its own (an `INCR` of the
//! room's `acks` key), which follows every admission already answered; admissions that finish
//! meanwhile wait for the next round.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio::task::AbortHandle;

use super::conn::{Conn, within};

/// `WAIT` after each admission: for how many replicas, and how long at most.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplicaAcks {
    pub replicas: u32,
    pub timeout: Duration,
}

/// What a round answers each admission it covers: the replicas that acknowledged, or None when
/// the WAIT failed (the connection, the server).
type Acknowledged = Option<u32>;

/// The replicas' acknowledgements of one room's admissions.
pub(super) struct Acks {
    wanted: ReplicaAcks,
    /// Admissions waiting for the next round.
    rounds: mpsc::UnboundedSender<oneshot::Sender<Acknowledged>>,
    /// Admissions that were not acknowledged in time, since the store was opened.
    unacknowledged: AtomicU64,
    /// Whether the last admission was one: a burst of them is logged when it starts and ends,
    /// not once per visitor.
    lagging: AtomicBool,
    /// Where the log lines say it happened.
    room: String,
    waiter: AbortHandle,
}

impl Drop for Acks {
    fn drop(&mut self) {
        self.waiter.abort();
    }
}

impl Acks {
    /// Starts the rounds on `conn`, a connection used for nothing else; `marker` is the key the
    /// waiter writes before each WAIT. A round that outlasts `command_timeout` counts as failed.
    pub(super) fn start(
        conn: Conn,
        marker: String,
        wanted: ReplicaAcks,
        command_timeout: Duration,
        room: String,
    ) -> Self {
        let (rounds, waiting) = mpsc::unbounded_channel();
        let waiter =
            tokio::spawn(run_rounds(conn, marker, wanted, command_timeout, waiting)).abort_handle();
        Self {
            wanted,
            rounds,
            unacknowledged: AtomicU64::new(0),
            lagging: AtomicBool::new(false),
            room,
            waiter,
        }
    }

    /// Waits, at most `replica_ack_timeout`, for the replicas to acknowledge the admission this
    /// instance just wrote; counts it when they do not.
    pub(super) async fn acknowledged(&self) {
        let (answer, answered) = oneshot::channel();
        let acknowledged = match self.rounds.send(answer) {
            Ok(()) => tokio::time::timeout(self.wanted.timeout, answered)
                .await
                .ok()
                .and_then(Result::ok)
                .flatten(),
            Err(_) => None,
        };
        self.note(acknowledged);
    }

    pub(super) fn unacknowledged(&self) -> u64 {
        self.unacknowledged.load(Ordering::Relaxed)
    }

    fn note(&self, acknowledged: Acknowledged) {
        let ReplicaAcks { replicas, timeout } = self.wanted;
        if acknowledged.is_some_and(|n| n >= replicas) {
            if self.lagging.swap(false, Ordering::Relaxed) {
                log::info!(
                    "redis: room {}: the replicas acknowledge admissions again ({} in all were \
                     not, since the start)",
                    self.room,
                    self.unacknowledged()
                );
            }
            return;
        }
        self.unacknowledged.fetch_add(1, Ordering::Relaxed);
        if !self.lagging.swap(true, Ordering::Relaxed) {
            let seen = acknowledged.map_or_else(
                || "the WAIT failed".to_owned(),
                |n| format!("{n} of the {replicas} asked within {timeout:?}"),
            );
            log::warn!(
                "redis: room {}: an admission was not acknowledged by the replicas ({seen}): \
                 visitors are let in all the same, and a failover to a replica that lacks \
                 their admission loses it; each is counted in \
                 waitroom_store_replica_ack_timeouts_total until the replicas acknowledge again",
                self.room
            );
        }
    }
}

/// The waiter: one round at a time, each answering every admission that was waiting when it
/// began.
async fn run_rounds(
    mut conn: Conn,
    marker: String,
    wanted: ReplicaAcks,
    command_timeout: Duration,
    mut waiting: mpsc::UnboundedReceiver<oneshot::Sender<Acknowledged>>,
) {
    // WAIT 0 would wait for ever: a timeout under a millisecond waits one.
    let wait_ms = u64::try_from(wanted.timeout.as_millis())
        .unwrap_or(u64::MAX)
        .max(1);
    while let Some(first) = waiting.recv().await {
        let mut round = vec![first];
        while let Ok(next) = waiting.try_recv() {
            round.push(next);
        }
        let waited = within(
            command_timeout,
            redis::pipe()
                .cmd("INCR")
                .arg(&marker)
                .ignore()
                .cmd("WAIT")
                .arg(wanted.replicas)
                .arg(wait_ms)
                .query_async::<(u32,)>(&mut conn),
        )
        .await;
        let acknowledged = match waited {
            Ok((replicas,)) => Some(replicas),
            Err(e) => {
                log::debug!("redis: WAIT for the replicas failed: {e}");
                None
            }
        };
        for admission in round {
            // An admission that stopped waiting (its own time ran out) hears nothing.
            let _ = admission.send(acknowledged);
        }
    }
}
