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

use crate::gate::{Gate, Watch};
use crate::respond::Responder;
use crate::respond::reply::Reply;
use crate::room::{Beat, Pulse};

/// Longest a stream stays open; the page reconnects after that.
const STREAM_LIFETIME: Duration = Duration::from_secs(600);
/// Streams one visitor (one ticket) may hold at once: a few tabs.
pub const STREAMS_PER_VISITOR: usize = 4;

/// How many streams are open, in all and per visitor.
pub struct StreamBudget {
    max_total: usize,
    open: AtomicUsize,
    per_visitor: Mutex<HashMap<String, usize>>,
}

/// One open stream's share of the budget, given back when the stream ends.
pub struct StreamSlot<'a> {
    budget: &'a StreamBudget,
    visitor: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// This visitor holds its share already.
    Visitor,
    /// The proxy holds its budget of streams.
    Proxy,
}

impl StreamBudget {
    pub fn new(max_total: usize) -> Self {
        Self {
            max_total,
            open: AtomicUsize::new(0),
            per_visitor: Mutex::new(HashMap::new()),
        }
    }

    pub fn open(&self) -> usize {
        self.open.load(Ordering::Relaxed)
    }

    pub fn take(&self, visitor: Option<&str>) -> Result<StreamSlot<'_>, Refused> {
        let taken = self
            .open
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.max_total).then_some(n + 1)
            });
        if taken.is_err() {
            return Err(Refused::Proxy);
        }
        let mut slot = StreamSlot {
            budget: self,
            visitor: None,
        };
        let Some(visitor) = visitor else {
            return Ok(slot);
        };
        let mut per_visitor = self.per_visitor.lock().unwrap_or_else(|p| p.into_inner());
        let held = per_visitor.entry(visitor.to_owned()).or_default();
        if *held >= STREAMS_PER_VISITOR {
            // `slot` gives the proxy's share back as it drops.
            return Err(Refused::Visitor);
        }
        *held += 1;
        // The same slot, now the visitor's too: a new one built from it would have dropped the
        // first, giving the proxy's share back while the stream still holds it.
        slot.visitor = Some(visitor.to_owned());
        Ok(slot)
    }
}

impl Drop for StreamSlot<'_> {
    fn drop(&mut self) {
        self.budget.open.fetch_sub(1, Ordering::AcqRel);
        if let Some(visitor) = &self.visitor {
            let mut per_visitor = self
                .budget
                .per_visitor
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            if let Some(held) = per_visitor.get_mut(visitor) {
                *held -= 1;
                if *held == 0 {
                    per_visitor.remove(visitor);
                }
            }
        }
    }
}

/// Serves one stream until the visitor is let in, the stream's lifetime ends or the page goes
/// away. A page that went away is not an error.
pub async fn serve(
    session: &mut Session,
    gate: &Gate,
    responder: &Responder,
    pulse: &Pulse,
    budget: &StreamBudget,
    mut watch: Watch,
) -> pingora::Result<()> {
    let _slot = match budget.take(watch.visitor()) {
        Ok(slot) => slot,
        Err(refused) => {
            let reply = match refused {
                Refused::Visitor => Reply::text(429, "too many streams for one visitor: poll\n"),
                Refused::Proxy => Reply::text(503, "no room for another stream: poll\n"),
            };
            let retry = gate.settings().refresh_interval.as_secs().max(1);
            return reply
                .with_header("retry-after", retry.to_string())
                .send(session, false)
                .await;
        }
    };
    let mut header = ResponseHeader::build(200, Some(4))?;
    header.insert_header("content-type", "text/event-stream")?;
    header.insert_header("cache-control", "no-store")?;
    header.insert_header("x-accel-buffering", "no")?;
    session
        .write_response_header(Box::new(header), false)
        .await?;
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
        if !event.is_empty() && !write(session, std::mem::take(&mut event)).await {
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
                _ = session.read_body_or_idle(true) => Woke::Gone,
            };
            match woke {
                Woke::Beat => {}
                Woke::End => return end(session).await,
                Woke::Gone => {
                    session.set_keepalive(None);
                    return Ok(());
                }
            }
            let beat = *beats.borrow_and_update();
            if beat.heartbeats != seen.heartbeats {
                gate.keep(&watch);
                // A comment for the proxies in between, an event for the page's own check.
                if !write(session, ": alive\nevent: alive\ndata:\n\n".to_owned()).await {
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
    end(session).await
}

/// What a sleeping stream woke for.
enum Woke {
    Beat,
    End,
    Gone,
}

async fn write(session: &mut Session, event: String) -> bool {
    session
        .write_response_body(Some(Bytes::from(event)), false)
        .await
        .is_ok()
}

async fn end(session: &mut Session) -> pingora::Result<()> {
    // The page may be gone already: nothing to tell it.
    if session.write_response_body(None, true).await.is_err() {
        session.set_keepalive(None);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_visitors_stream_holds_its_share_of_the_proxys_budget_until_it_ends() {
        let budget = StreamBudget::new(1);
        let first = budget.take(Some("a")).unwrap();
        assert_eq!(budget.open(), 1);
        assert_eq!(budget.take(Some("b")).err(), Some(Refused::Proxy));
        assert_eq!(budget.take(None).err(), Some(Refused::Proxy));
        drop(first);
        assert_eq!(budget.open(), 0);
        let second = budget.take(Some("b")).unwrap();
        assert_eq!(budget.open(), 1);
        drop(second);
        assert_eq!(budget.open(), 0);
    }

    #[test]
    fn a_visitor_holds_at_most_its_share_of_streams() {
        let budget = StreamBudget::new(100);
        let held: Vec<_> = (0..STREAMS_PER_VISITOR)
            .map(|_| budget.take(Some("a")).unwrap())
            .collect();
        assert_eq!(budget.take(Some("a")).err(), Some(Refused::Visitor));
        assert_eq!(budget.open(), STREAMS_PER_VISITOR);
        drop(held);
        assert_eq!(budget.open(), 0);
        assert!(budget.take(Some("a")).is_ok());
    }
}
