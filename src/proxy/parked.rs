//! Event streams served by the front door, without Pingora's HTTP session: an open waiting page
//! holds its connection for minutes, and Pingora's per-connection state (its session, its head
//! buffer, its proxy future and task, some 40 KiB) would be held all that time for a stream
//! that needs a socket, a ticket and a subscription to the room's pulse.
//!
//! The front door (`connections::Guarded`) shows each HTTP/1.1 head's first read to
//! `WaitroomProxy::claim_stream`. Only a head that arrived whole in that one read, that is a
//! plain `GET /__waitroom/events` (the canonical spelling, nothing after the head, no body, no
//! upgrade) and that the proxy's own rules (`oversized`, `Canonical::read`, the reserved room)
//! would send to the event stream is claimed; anything else, a slow or split or malformed
//! head included, goes on to Pingora untouched, which serves it as before. A claimed stream
//! answers with the same events as through Pingora (`events::serve`), then closes the
//! connection: the page reconnects when it needs to.

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use pingora_core::protocols::Stream;
use pingora_core::server::ShutdownWatch;
use pingora_http::RequestHeader;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::access::AccessLine;
use super::events::{self, EventSink, Refusal, STREAM_HEADERS, Woke};
use super::{WaitroomProxy, head, oversized};
use crate::gate::Watch;
use crate::request::client::ClientAddress;
use crate::request::view::{Canonical, Request, Reserved};

/// Headers a claimed head may have at most; a head with more goes to Pingora.
const MAX_HEADERS: usize = 64;
/// How long one write to a parked page may wait for the page to read.
const WRITE_TIMEOUT: Duration = Duration::from_secs(30);
const REQUEST_LINE: &[u8] = b"GET /__waitroom/events";

/// A stream request the front door serves itself, read and judged.
pub(super) struct Claimed {
    room: usize,
    watch: Watch,
    /// The client's per-address limit key.
    address: String,
    host: String,
    path: String,
    started: Instant,
}

/// A claimed stream's connection: the stream, what the front door counts it as, the request.
/// The place is the front door's (`connections::ParkedPlace`): held here only until the stream
/// ends, when dropping it gives the place back.
pub(super) struct Parked<Place> {
    pub stream: Stream,
    pub place: Place,
    pub peer: Option<SocketAddr>,
    pub claimed: Claimed,
}

impl WaitroomProxy {
    /// `bytes` is the first read of a request head: the stream it asks for, if the front door
    /// may serve it (see the module's comment). Runs on every head's first read, so whatever is
    /// not a stream request is told apart by its first bytes.
    pub(super) fn claim_stream(&self, bytes: &[u8], peer: Option<IpAddr>) -> Option<Claimed> {
        let rest = bytes.strip_prefix(REQUEST_LINE)?;
        if !matches!(rest.first(), Some(b' ' | b'?')) {
            return None;
        }
        let req = whole_head(bytes)?;
        if oversized(&req) {
            return None;
        }
        let client = peer.map(|ip| self.client_of(ip, &req.headers));
        let mut host_lines = [&[][..]; 2];
        let canonical = Canonical::read(head(&req, &mut host_lines), &self.sites).ok()?;
        if canonical.reserved() != Some(Reserved::Events) {
            return None;
        }
        let room = self.reserved_room(&canonical)?;
        let front = self.fronts.get(room)?;
        let unparsed = client == Some(ClientAddress::Unparsed);
        if unparsed {
            front.room.metrics.client_address_unparsed.inc();
        }
        let request = Request::new(&canonical, &req.headers, client.and_then(ClientAddress::ip))
            .with_unparsed_client(unparsed)
            .with_method(&req.method)
            .with_country_from(
                self.country_header.as_deref(),
                peer.is_some_and(|ip| self.is_trusted(ip)),
            );
        if front.gate.would_block_reserved(&request) {
            return None;
        }
        let watch = front.gate.watch(&request);
        Some(Claimed {
            room,
            watch,
            address: client.map_or_else(String::new, |c| c.limit_key(self.ipv6_prefix)),
            host: req
                .headers
                .get(http::header::HOST)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_owned(),
            path: req.uri.path().to_owned(),
            started: Instant::now(),
        })
    }

    /// Serves a claimed stream to its end, then closes its connection.
    pub(super) async fn serve_parked<Place>(&self, parked: Parked<Place>, shutdown: ShutdownWatch) {
        let Parked {
            stream,
            place,
            peer,
            claimed,
        } = parked;
        let Some(front) = self.fronts.get(claimed.room) else {
            return;
        };
        let mut sink = ParkedSink {
            stream,
            shutdown,
            status: 0,
            sent: 0,
            failed: false,
        };
        // The sink's errors are the page's: nothing to answer, and the line says so.
        let _ = events::serve(
            &mut sink,
            front,
            &self.streams,
            &claimed.address,
            claimed.watch,
        )
        .await;
        let _ = tokio::time::timeout(WRITE_TIMEOUT, sink.stream.shutdown()).await;
        drop(place);
        if !self.access_log {
            return;
        }
        let client = peer.map(|a| a.to_string()).unwrap_or_default();
        AccessLine {
            decision: "reserved",
            method: "GET",
            host: &claimed.host,
            path: &claimed.path,
            status: sink.status,
            origin_status: 0,
            ms: claimed.started.elapsed().as_millis() as u64,
            bytes: sink.sent as u64,
            proto: "HTTP/1.1",
            client: &client,
            visitor: "",
            error: if sink.failed { "WriteError" } else { "" },
        }
        .write();
    }
}

/// The head in `bytes`, if it is all of them, is HTTP/1.1 and asks for nothing a stream does
/// not: no body, no upgrade, no `Expect`. Parsed as strictly as `httparse` parses; Pingora
/// parses whatever this declines.
fn whole_head(bytes: &[u8]) -> Option<RequestHeader> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut parsed = httparse::Request::new(&mut headers);
    match parsed.parse(bytes) {
        Ok(httparse::Status::Complete(len)) if len == bytes.len() => {}
        _ => return None,
    }
    if parsed.version != Some(1) || parsed.method != Some("GET") {
        return None;
    }
    let mut req =
        RequestHeader::build("GET", parsed.path?.as_bytes(), Some(parsed.headers.len())).ok()?;
    for header in parsed.headers.iter() {
        let name = http::HeaderName::from_bytes(header.name.as_bytes()).ok()?;
        if [
            http::header::CONTENT_LENGTH,
            http::header::TRANSFER_ENCODING,
            http::header::UPGRADE,
            http::header::EXPECT,
        ]
        .contains(&name)
        {
            return None;
        }
        let value = http::HeaderValue::from_bytes(header.value).ok()?;
        req.append_header(name, value).ok()?;
    }
    Some(req)
}

/// A parked stream's connection, written in HTTP/1.1's chunked framing.
struct ParkedSink {
    stream: Stream,
    shutdown: ShutdownWatch,
    /// The status sent, for the access line.
    status: u16,
    /// Body bytes sent (the events, not their framing).
    sent: usize,
    failed: bool,
}

impl ParkedSink {
    async fn write(&mut self, bytes: &[u8]) -> bool {
        let written = tokio::time::timeout(WRITE_TIMEOUT, async {
            self.stream.write_all(bytes).await?;
            self.stream.flush().await
        })
        .await;
        let ok = matches!(written, Ok(Ok(())));
        self.failed |= !ok;
        ok
    }

    fn head(status: &str, headers: &[(&str, &str)]) -> String {
        let mut head = format!("HTTP/1.1 {status}\r\n");
        for (name, value) in headers {
            head.push_str(name);
            head.push_str(": ");
            head.push_str(value);
            head.push_str("\r\n");
        }
        head.push_str("date: ");
        head.push_str(
            &jiff::Timestamp::now()
                .strftime("%a, %d %b %Y %H:%M:%S GMT")
                .to_string(),
        );
        head.push_str("\r\nconnection: close\r\n");
        head
    }
}

impl EventSink for ParkedSink {
    async fn refuse(&mut self, refusal: Refusal) -> pingora::Result<()> {
        let retry = refusal.retry_after_secs.to_string();
        let mut head = Self::head(
            "204 No Content",
            &[
                ("cache-control", "no-store"),
                ("retry-after", &retry),
                ("x-waitroom-stream", &refusal.reason),
            ],
        );
        head.push_str("\r\n");
        self.status = 204;
        self.write(head.as_bytes()).await;
        Ok(())
    }

    async fn open(&mut self) -> pingora::Result<()> {
        let mut head = Self::head("200 OK", &STREAM_HEADERS);
        head.push_str("transfer-encoding: chunked\r\n\r\n");
        self.status = 200;
        if self.write(head.as_bytes()).await {
            Ok(())
        } else {
            Err(pingora::Error::new(pingora::ErrorType::WriteError))
        }
    }

    async fn send(&mut self, event: String) -> bool {
        let mut chunk = format!("{:x}\r\n", event.len()).into_bytes();
        chunk.extend_from_slice(event.as_bytes());
        chunk.extend_from_slice(b"\r\n");
        let ok = self.write(&chunk).await;
        if ok {
            self.sent += event.len();
        }
        ok
    }

    async fn interrupted(&mut self) -> Woke {
        // A page sends nothing on its stream: a byte, an end or an error all mean it is gone
        // (or up to something a stream does not serve).
        let mut byte = [0u8; 1];
        loop {
            tokio::select! {
                _ = self.stream.read(&mut byte) => return Woke::Gone,
                stopping = self.shutdown.changed() => {
                    if stopping.is_err() {
                        // The server's signal is gone: only the page ends the stream now.
                        let _ = self.stream.read(&mut byte).await;
                        return Woke::Gone;
                    }
                    if *self.shutdown.borrow() {
                        return Woke::End;
                    }
                }
            }
        }
    }

    fn gone(&mut self) {}

    async fn end(&mut self) {
        self.write(b"0\r\n\r\n").await;
    }
}
