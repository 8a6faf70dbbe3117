//! Joins in batches: a drop's new visitors cost one script call per batch instead of one each.

use std::sync::Arc;

use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};
use tokio::sync::oneshot;
use tokio::task::AbortHandle;

use super::calls::Calls;
use super::conn::Failure;
use super::scripts::Reply;
use crate::core::room::{Limits, Placing};
use crate::store::{Joined, StoreError, StoreResult, TicketPlace};

/// The most joins one script call carries: plenty for a drop, and a call still takes Redis well
/// under a millisecond.
const MAX_JOIN_BATCH: usize = 128;

/// A join waiting for its batch.
struct JoinRequest {
    id: String,
    ticket: Option<TicketPlace>,
    limits: Limits,
    answer: oneshot::Sender<StoreResult<Joined>>,
}

/// Hands joins to the task that sends them.
pub(super) struct Joins {
    requests: UnboundedSender<JoinRequest>,
    calls: Arc<Calls>,
}

impl Joins {
    /// Starts the sending task on the current runtime; abort it when the store goes.
    pub(super) fn start(calls: Arc<Calls>) -> (Self, AbortHandle) {
        let (requests, received) = unbounded_channel();
        let sender = tokio::spawn(send_joins(calls.clone(), received)).abort_handle();
        (Self { requests, calls }, sender)
    }

    pub(super) async fn join(
        &self,
        id: &str,
        ticket: Option<&TicketPlace>,
        limits: &Limits,
    ) -> StoreResult<Joined> {
        let (answer, answered) = oneshot::channel();
        let request = JoinRequest {
            id: id.to_owned(),
            ticket: ticket.cloned(),
            limits: limits.clone(),
            answer,
        };
        let stopped = || StoreError::Unavailable("redis join: the join sender stopped".into());
        self.requests.send(request).map_err(|_| stopped())?;
        // The batch in flight, then this one: bounded together like a single call.
        let timeout = self.calls.command_timeout;
        match tokio::time::timeout(timeout, answered).await {
            Ok(joined) => joined.unwrap_or_else(|_| Err(stopped())),
            Err(_) => Err(Failure::TimedOut(timeout).in_script("join")),
        }
    }
}

/// Sends the joins one batch at a time: those that arrive while a batch is in flight make the
/// next one, so a joiner in a quiet room waits for nobody.
async fn send_joins(calls: Arc<Calls>, mut requests: UnboundedReceiver<JoinRequest>) {
    let mut next = None;
    loop {
        let first = if let Some(request) = next.take() {
            request
        } else if let Some(request) = requests.recv().await {
            request
        } else {
            return;
        };
        let mut batch = vec![first];
        while batch.len() < MAX_JOIN_BATCH {
            let Ok(request) = requests.try_recv() else {
                break;
            };
            // A call applies one set of limits: a join under others (the settings just
            // changed) starts the next batch.
            if request.limits != batch[0].limits {
                next = Some(request);
                break;
            }
            batch.push(request);
        }
        // A caller that gave up (timed out, or its client left) holds no ticket: no place for it.
        batch.retain(|request| !request.answer.is_closed());
        send_batch(&calls, batch).await;
    }
}

/// Sends a batch of joins as one script call and answers each caller.
async fn send_batch(calls: &Calls, batch: Vec<JoinRequest>) {
    let Some(first) = batch.first() else {
        return;
    };
    let mut inv = calls.invocation(&calls.scripts.join, Some(&first.limits));
    match first.limits.placing {
        Placing::Arrival => inv.arg("arrival").arg(0).arg(0),
        Placing::Lottery { window_ms } => inv.arg("lottery").arg(window_ms).arg(0),
        Placing::DrawUntil { from_ms, until_ms } => inv.arg("draw").arg(from_ms).arg(until_ms),
    };
    for request in &batch {
        inv.key(calls.beat_key(&request.id)).arg(&request.id);
        match &request.ticket {
            Some(t) => inv.arg(t.place).arg(&t.epoch),
            None => inv.arg("").arg(""),
        };
        // A draw's random number is the proxy's: below 2^52, so Lua's doubles keep it exact.
        inv.arg(rand::random::<u64>() >> 12);
    }
    // A caller that gave up meanwhile is not told (the send fails): its join is harmless.
    match calls.call("join", &inv).await {
        Ok((mut reply, epoch)) => {
            for request in batch {
                let _ = request.answer.send(joined(&mut reply, &epoch));
            }
        }
        Err(e) => {
            for request in batch {
                let _ = request.answer.send(Err(e.clone()));
            }
        }
    }
}

fn joined(reply: &mut Reply, epoch: &str) -> StoreResult<Joined> {
    Ok(Joined {
        place: reply.int()?,
        position: reply.count()?,
        queued: reply.count()?,
        epoch: epoch.to_owned(),
    })
}
