//! The console's live view: `GET /admin/console/events`, a Server-Sent Events stream of every
//! room's state (the same JSON as `GET /admin/rooms`), one `state` event at once and then one
//! every [`EVERY`]. One stream per console tab instead of each tab polling; a console session's
//! stream ends (`signed-out`) when the session does, so signing out or expiry also closes it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use pingora_core::protocols::http::ServerSession;
use pingora_core::server::ShutdownWatch;
use pingora_http::ResponseHeader;

use super::{AdminApp, Watcher, error, write_reply};

/// How often the view is sent: a few seconds is as fast as an operator reads, and each send is
/// one store read of the counts per room.
pub const EVERY: Duration = Duration::from_secs(2);

/// Live views open at once. The admin listener runs on one thread: this keeps a forgotten pile
/// of tabs (or a script) from making it read the store in a loop.
pub const MAX_STREAMS: usize = 16;

/// A stream whose client stops reading is given up after this long, not held forever.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// One of the [`MAX_STREAMS`], given back when the stream ends however it ends.
struct Slot<'a>(&'a AtomicUsize);

impl<'a> Slot<'a> {
    fn take(open: &'a AtomicUsize) -> Option<Self> {
        open.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
            (n < MAX_STREAMS).then_some(n + 1)
        })
        .ok()
        .map(|_| Slot(open))
    }
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

fn event(name: &str, data: &str) -> bytes::Bytes {
    format!("event: {name}\ndata: {data}\n\n").into()
}

impl AdminApp {
    /// Streams the rooms' state to `watcher` until it goes away, its session ends or the server
    /// shuts down.
    pub(super) async fn live(
        &self,
        mut session: ServerSession,
        watcher: Watcher,
        mut shutdown: ShutdownWatch,
    ) {
        let Some(_slot) = Slot::take(&self.live_streams) else {
            let busy = error(503, format!("{MAX_STREAMS} live views are open already"))
                .with_header("retry-after", "10");
            session.set_keepalive(None);
            if let Err(e) = write_reply(&mut session, busy).await {
                log::debug!("admin listener: refusal not written: {e}");
            }
            return;
        };
        if let Err(e) = self.stream(&mut session, &watcher, &mut shutdown).await {
            log::debug!("console live view ended: {e}");
        }
    }

    async fn stream(
        &self,
        session: &mut ServerSession,
        watcher: &Watcher,
        shutdown: &mut ShutdownWatch,
    ) -> pingora::Result<()> {
        session.set_write_timeout(Some(WRITE_TIMEOUT));
        // The connection ends with the stream: said in the head (`Connection: close`), or a
        // client would send its next request on it and meet the close.
        session.set_keepalive(None);
        let mut header = ResponseHeader::build(200, Some(4))?;
        header.insert_header("content-type", "text/event-stream")?;
        header.insert_header("cache-control", "no-store")?;
        header.insert_header("transfer-encoding", "chunked")?;
        header.insert_header("x-accel-buffering", "no")?;
        session.write_response_header(Box::new(header)).await?;
        let mut every = tokio::time::interval(EVERY);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = every.tick() => {}
                _ = shutdown.changed() => break,
            }
            if let Watcher::Session(id) = watcher
                && self.sessions.find(id).is_none()
            {
                session
                    .write_response_body(event("signed-out", "{}"), false)
                    .await?;
                break;
            }
            let rooms = self.rooms().await;
            let data = String::from_utf8_lossy(&rooms.body);
            session
                .write_response_body(event("state", &data), false)
                .await?;
        }
        session.write_response_body(bytes::Bytes::new(), true).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_beyond_the_cap_are_refused_and_slots_come_back() {
        let open = AtomicUsize::new(0);
        let slots: Vec<Slot> = (0..MAX_STREAMS).filter_map(|_| Slot::take(&open)).collect();
        assert_eq!(slots.len(), MAX_STREAMS);
        assert!(Slot::take(&open).is_none());
        drop(slots);
        assert_eq!(open.load(Ordering::SeqCst), 0);
        assert!(Slot::take(&open).is_some());
    }

    #[test]
    fn an_event_is_one_named_block() {
        assert_eq!(
            event("state", "{\"rooms\":[]}"),
            "event: state\ndata: {\"rooms\":[]}\n\n"
        );
    }
}
