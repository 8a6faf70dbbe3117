//! `GET /__waitroom/events`: a waiting page's status as Server-Sent Events. A stream sleeps
//! until the room's pulse says something may have changed (an admission round moved the line,
//! the settings changed) or a heartbeat is due: no timer of its own, no work while the room is
//! quiet. A visitor holds at most a few streams, and the proxy a budget of them; beyond either,
//! the stream is refused and the page polls instead.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use pingora_http::ResponseHeader;
use pingora_proxy::Session;

use super::Front;
use crate::gate::Watch;
use crate::observe::StreamRefusal;
use crate::room::Beat;

/// Longest a stream stays open; the page reconnects after that.
const STREAM_LIFETIME: Duration = Duration::from_secs(600);
/// Streams one visitor (one ticket) may hold at once: a few tabs.
pub const STREAMS_PER_VISITOR: usize = 4;

/// How many streams are open, in all, per client address and per visitor.
pub struct StreamBudget {
    max_total: usize,
    max_per_address: Option<usize>,
    open: AtomicUsize,
    per_address: Mutex<HashMap<String, usize>>,
    per_visitor: Mutex<HashMap<String, usize>>,
}

/// One open stream's share of the budget, given back when the stream ends.
pub struct StreamSlot<'a> {
    budget: &'a StreamBudget,
    address: Option<String>,
    visitor: Option<String>,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Every critical section leaves the counts whole: a panic elsewhere does not spoil them.
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// Takes one of `key`'s `max` places in `counts`.
fn take_place(counts: &Mutex<HashMap<String, usize>>, key: &str, max: usize) -> bool {
    let mut counts = lock(counts);
    let held = counts.entry(key.to_owned()).or_default();
    if *held >= max {
        if *held == 0 {
            counts.remove(key);
        }
        return false;
    }
    *held += 1;
    true
}

fn give_place(counts: &Mutex<HashMap<String, usize>>, key: &str) {
    let mut counts = lock(counts);
    if let Some(held) = counts.get_mut(key) {
        *held -= 1;
        if *held == 0 {
            counts.remove(key);
        }
    }
}

impl StreamBudget {
    pub fn new(max_total: usize, max_per_address: Option<usize>) -> Self {
        Self {
            max_total,
            max_per_address,
            open: AtomicUsize::new(0),
            per_address: Mutex::new(HashMap::new()),
            per_visitor: Mutex::new(HashMap::new()),
        }
    }

    pub fn open(&self) -> usize {
        self.open.load(Ordering::Relaxed)
    }

    /// A place for a stream of `visitor` (its ticket) from `address` (its per-address limit
    /// key): the proxy's, the address's and the visitor's shares, all or none.
    pub fn take(
        &self,
        visitor: Option<&str>,
        address: &str,
    ) -> Result<StreamSlot<'_>, StreamRefusal> {
        let taken = self
            .open
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.max_total).then_some(n + 1)
            });
        if taken.is_err() {
            return Err(StreamRefusal::Proxy);
        }
        // From here, each share is in the slot as soon as it is taken: a refusal drops the slot,
        // which gives back exactly what was taken.
        let mut slot = StreamSlot {
            budget: self,
            address: None,
            visitor: None,
        };
        if let Some(max) = self.max_per_address {
            if !take_place(&self.per_address, address, max) {
                return Err(StreamRefusal::Address);
            }
            slot.address = Some(address.to_owned());
        }
        if let Some(visitor) = visitor {
            if !take_place(&self.per_visitor, visitor, STREAMS_PER_VISITOR) {
                return Err(StreamRefusal::Visitor);
            }
            slot.visitor = Some(visitor.to_owned());
        }
        Ok(slot)
    }
}

impl Drop for StreamSlot<'_> {
    fn drop(&mut self) {
        self.budget.open.fetch_sub(1, Ordering::AcqRel);
        if let Some(address) = &self.address {
            give_place(&self.budget.per_address, address);
        }
        if let Some(visitor) = &self.visitor {
            give_place(&self.budget.per_visitor, visitor);
        }
    }
}

/// What a refused stream is told: 204 No Content, which tells an `EventSource` to stop for good
/// (HTML's rule: no reconnection), so the page's `onerror` closes it and the page polls the
/// JSON status instead. Not an error status: nothing went wrong, and a CDN in front neither
/// retries it nor counts it as a failure. No Content-Length: a 204 must not carry one.
pub(super) struct Refusal {
    pub retry_after_secs: u64,
    /// `x-waitroom-stream`: why.
    pub reason: String,
}

impl Refusal {
    fn new(refused: StreamRefusal, retry_after_secs: u64) -> Self {
        Self {
            retry_after_secs,
            reason: format!("refused; reason={}", refused.label()),
        }
    }
}

/// The headers of an open stream, besides its framing.
pub(super) const STREAM_HEADERS: [(&str, &str); 3] = [
    ("content-type", "text/event-stream"),
    ("cache-control", "no-store"),
    ("x-accel-buffering", "no"),
];

/// Where a stream's events go: Pingora's session, or the front door's own connection
/// (`parked`), which serves a stream without Pingora's session.
pub(super) trait EventSink {
    async fn refuse(&mut self, refusal: Refusal) -> pingora::Result<()>;
    /// The stream's 200 head.
    async fn open(&mut self) -> pingora::Result<()>;
    /// One piece of the stream; false when the page is gone.
    async fn send(&mut self, event: String) -> bool;
    /// Resolves when the stream must stop before its time: the page went away (`Gone`), or the
    /// proxy is stopping (`End`). Dropped and called again between events: it must lose nothing
    /// when dropped.
    async fn interrupted(&mut self) -> Woke;
    /// The page went away: its connection is not kept.
    fn gone(&mut self);
    /// The stream's last piece.
    async fn end(&mut self);
}

/// Serves one stream until the visitor is let in, the stream's lifetime ends or the page goes
/// away. A page that went away is not an error.
/// `address` is the client's per-address limit key.
pub(super) async fn serve(
    sink: &mut impl EventSink,
    front: &Front,
    budget: &StreamBudget,
    address: &str,
    mut watch: Watch,
) -> pingora::Result<()> {
    let (gate, responder, pulse) = (&*front.gate, &*front.responder, &*front.room.pulse);
    let _slot = match budget.take(watch.visitor(), address) {
        Ok(slot) => slot,
        Err(refused) => {
            front.room.metrics.stream_refused(refused);
            let retry = gate.settings().refresh_interval.as_secs().max(1);
            return sink.refuse(Refusal::new(refused, retry)).await;
        }
    };
    sink.open().await?;
    let mut beats = pulse.subscribe();
    let mut seen: Beat = *beats.borrow_and_update();
    let ends = tokio::time::Instant::now() + STREAM_LIFETIME;
    // A browser reconnects after this long if the stream breaks: at the page's own pace.
    let retry_ms = gate.settings().refresh_interval.as_millis();
    let mut last = None;
    let mut event = format!("retry: {retry_ms}\n\n");
    loop {
        let watched = gate.look(&mut watch).await;
        let body = responder.watched(&watched);
        let fingerprint = Some(body.fingerprint());
        if fingerprint != last {
            let json = serde_json::to_string(&body).unwrap_or_default();
            event.push_str("data: ");
            event.push_str(&json);
            event.push_str("\n\n");
            last = fingerprint;
        }
        if !event.is_empty() && !sink.send(std::mem::take(&mut event)).await {
            return Ok(());
        }
        if watched.done {
            break;
        }
        // Sleep until something may have changed; heartbeats only keep the line open.
        loop {
            let woke = tokio::select! {
                changed = beats.changed() => if changed.is_ok() { Woke::Beat } else { Woke::End },
                _ = tokio::time::sleep_until(ends) => Woke::End,
                // A page that went away closed its connection: its descriptor is given back
                // now, not at the next heartbeat's failed write (a crowd leaving at once would
                // otherwise hold the open-file limit for that long).
                woke = sink.interrupted() => woke,
            };
            match woke {
                Woke::Beat => {}
                Woke::End => {
                    sink.end().await;
                    return Ok(());
                }
                Woke::Gone => {
                    sink.gone();
                    return Ok(());
                }
            }
            let beat = *beats.borrow_and_update();
            if beat.heartbeats != seen.heartbeats {
                gate.keep(&watch);
                // A comment for the proxies in between, an event for the page's own check.
                if !sink
                    .send(": alive\nevent: alive\ndata:\n\n".to_owned())
                    .await
                {
                    return Ok(());
                }
            }
            let changed = beat.changes != seen.changes;
            seen = beat;
            if changed {
                break;
            }
        }
    }
    sink.end().await;
    Ok(())
}

/// What a sleeping stream woke for.
pub(super) enum Woke {
    Beat,
    End,
    Gone,
}

impl EventSink for Session {
    async fn refuse(&mut self, refusal: Refusal) -> pingora::Result<()> {
        let mut header = ResponseHeader::build(204, Some(3))?;
        header.insert_header("cache-control", "no-store")?;
        header.insert_header("retry-after", refusal.retry_after_secs.to_string())?;
        header.insert_header("x-waitroom-stream", refusal.reason)?;
        self.write_response_header(Box::new(header), true).await
    }

    async fn open(&mut self) -> pingora::Result<()> {
        let mut header = ResponseHeader::build(200, Some(STREAM_HEADERS.len()))?;
        for (name, value) in STREAM_HEADERS {
            header.insert_header(name, value)?;
        }
        self.write_response_header(Box::new(header), false).await
    }

    async fn send(&mut self, event: String) -> bool {
        self.write_response_body(Some(Bytes::from(event)), false)
            .await
            .is_ok()
    }

    async fn interrupted(&mut self) -> Woke {
        let _ = self.read_body_or_idle(true).await;
        Woke::Gone
    }

    fn gone(&mut self) {
        self.set_keepalive(None);
    }

    async fn end(&mut self) {
        // The page may be gone already: nothing to tell it.
        if self.write_response_body(None, true).await.is_err() {
            self.set_keepalive(None);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_visitors_stream_holds_its_share_of_the_proxys_budget_until_it_ends() {
        let budget = StreamBudget::new(1, None);
        let first = budget.take(Some("a"), "1.1.1.1").unwrap();
        assert_eq!(budget.open(), 1);
        assert_eq!(
            budget.take(Some("b"), "2.2.2.2").err(),
            Some(StreamRefusal::Proxy)
        );
        assert_eq!(
            budget.take(None, "2.2.2.2").err(),
            Some(StreamRefusal::Proxy)
        );
        drop(first);
        assert_eq!(budget.open(), 0);
        let second = budget.take(Some("b"), "2.2.2.2").unwrap();
        assert_eq!(budget.open(), 1);
        drop(second);
        assert_eq!(budget.open(), 0);
    }

    #[test]
    fn a_visitor_holds_at_most_its_share_of_streams() {
        let budget = StreamBudget::new(100, None);
        let held: Vec<_> = (0..STREAMS_PER_VISITOR)
            .map(|_| budget.take(Some("a"), "1.1.1.1").unwrap())
            .collect();
        assert_eq!(
            budget.take(Some("a"), "1.1.1.1").err(),
            Some(StreamRefusal::Visitor)
        );
        assert_eq!(budget.open(), STREAMS_PER_VISITOR);
        drop(held);
        assert_eq!(budget.open(), 0);
        assert!(budget.take(Some("a"), "1.1.1.1").is_ok());
    }

    #[test]
    fn an_address_holds_at_most_its_share_whatever_tickets_it_shows() {
        let budget = StreamBudget::new(100, Some(3));
        let held: Vec<_> = ["a", "b", "c"]
            .iter()
            .map(|t| budget.take(Some(t), "1.1.1.1").unwrap())
            .collect();
        for ticket in [Some("d"), Some("a"), None] {
            assert_eq!(
                budget.take(ticket, "1.1.1.1").err(),
                Some(StreamRefusal::Address)
            );
        }
        // Refusals give back the proxy's share they took on the way.
        assert_eq!(budget.open(), 3);
        let other = budget.take(Some("d"), "2.2.2.2").unwrap();
        drop(held);
        drop(other);
        assert_eq!(budget.open(), 0);
        assert!(lock(&budget.per_address).is_empty());
        assert!(lock(&budget.per_visitor).is_empty());
        // A visitor refused for its ticket gives its address's place back.
        let budget = StreamBudget::new(100, Some(STREAMS_PER_VISITOR + 1));
        let _held: Vec<_> = (0..STREAMS_PER_VISITOR)
            .map(|_| budget.take(Some("a"), "1.1.1.1").unwrap())
            .collect();
        assert_eq!(
            budget.take(Some("a"), "1.1.1.1").err(),
            Some(StreamRefusal::Visitor)
        );
        assert!(budget.take(Some("b"), "1.1.1.1").is_ok());
    }

    #[test]
    fn a_refused_stream_says_why() {
        let refusal = Refusal::new(StreamRefusal::Address, 2);
        assert_eq!(refusal.reason, "refused; reason=address");
    }
}
