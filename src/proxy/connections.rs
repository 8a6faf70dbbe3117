//! The front door of the public listener. Every visitor connection is counted as it is accepted
//! and wrapped (`Guarded`), so that the proxy can:
//!
//! - close a request head that does not arrive whole within `listen.header_timeout`, however
//!   slowly its bytes trickle in (Pingora's own read timeout starts again with every read, so a
//!   client sending a byte a minute held a connection for ever);
//! - close the oldest idle keep-alive connections first when `listen.max_connections` are open;
//! - answer a newcomer it has no room for with a 503 and close, rather than leave it in the
//!   kernel's queue;
//! - serve an event stream itself, without Pingora's session (`parked`): each HTTP/1.1 head's
//!   first read is shown to the proxy, which claims it or lets it go on to Pingora.
//!
//! A connection's phase is kept by the wrapper and the proxy's hooks together, since only the
//! hooks see where a request begins and ends: `Idle` between requests (no byte of the next head
//! yet: the connection may be closed to make room), `Head` while a head arrives (its deadline
//! runs; a new connection starts here), `Busy` from the parsed head to the end of the request.
//! HTTP/2 connections are `Busy` throughout: their idle time is Pingora's `h2_idle_timeout`.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use async_trait::async_trait;
use bytes::{Bytes, BytesMut};
use pingora_core::apps::ServerApp;
use pingora_core::protocols::raw_connect::ProxyDigest;
use pingora_core::protocols::tls::{SslDigest, TlsRef};
use pingora_core::protocols::{
    ALPN, GetProxyDigest, GetSocketDigest, GetTimingDigest, IO, Peek, Shutdown, SocketDigest, Ssl,
    Stream, TimingDigest, UniqueID, UniqueIDType,
};
use pingora_core::server::ShutdownWatch;
use pingora_proxy::Session;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

use super::WaitroomProxy;
use super::parked::Parked;

const IDLE: u8 = 0;
const HEAD: u8 = 1;
const BUSY: u8 = 2;

/// How long a refused newcomer's connection is kept to read what it already sent: closing with
/// unread data would reset the connection and could destroy the 503 before the client reads it.
const LINGER: Duration = Duration::from_millis(500);
/// Refused connections kept lingering at once. Each holds a descriptor: in a flood, the rest
/// are closed at once (their 503 may be lost to the reset) so refusals cannot use up the
/// open-file limit that the listener's own limit keeps clear.
const MAX_LINGERING: usize = 64;
/// What a refused newcomer is told to wait before trying again.
const RETRY_AFTER_SECS: u64 = 5;
/// The most of a new connection's first read the front door takes before Pingora: as much as
/// the listener's read buffer holds, so a head it could claim is never cut short here.
const FIRST_READ: usize = 4 * 1024;
const TIMED_OUT: &[u8] = b"HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\n\
    Cache-Control: no-store\r\nConnection: close\r\n\r\n";

/// The `[listen]` limits the front door applies.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    /// Open connections at most (`listen.max_connections`, resolved).
    pub max: usize,
    /// Open connections per client address at most, if limited.
    pub per_ip: Option<usize>,
    pub header_timeout: Duration,
}

/// The listener's open connections: counted, and the idle ones in the order they fell idle.
pub struct Connections {
    limits: ConnectionLimits,
    open: AtomicUsize,
    per_ip: Mutex<HashMap<IpAddr, usize>>,
    idle: Mutex<IdleQueue>,
    refused: AtomicU64,
    evicted: AtomicU64,
    head_timeouts: AtomicU64,
    lingering: AtomicUsize,
    in_front: AtomicUsize,
    in_front_total: AtomicU64,
}

#[derive(Default)]
struct IdleQueue {
    next: u64,
    by_age: BTreeMap<u64, Arc<Conn>>,
}

/// What the wrapper, the hooks and the front door share about one connection.
#[derive(Default)]
struct Conn {
    phase: AtomicU8,
    /// Its key in the idle queue; 0 while it is not there.
    idle_key: AtomicU64,
    /// Closed to make room: its next read ends the connection.
    evicted: AtomicBool,
    /// The task waiting for the connection's next request, woken to close it.
    waker: Mutex<Option<Waker>>,
}

/// The listener's connections as `/admin/state` shows them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct ConnectionStats {
    pub open: usize,
    pub idle: usize,
    pub max: usize,
    pub max_per_ip: Option<usize>,
    /// Newcomers answered 503 because the listener (or their address) had no room.
    pub refused_total: u64,
    /// Idle keep-alive connections closed to make room for newcomers.
    pub evicted_total: u64,
    /// Connections closed because a request head was not complete in time.
    pub header_timeouts_total: u64,
    /// Event streams open now that the front door serves itself (`parked`), and since start.
    pub streams_in_front: usize,
    pub streams_in_front_total: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refusal {
    Full,
    Address,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section here leaves the data whole: a panic elsewhere does not spoil it.
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

impl Connections {
    pub fn new(limits: ConnectionLimits) -> Self {
        Self {
            limits,
            open: AtomicUsize::new(0),
            per_ip: Mutex::new(HashMap::new()),
            idle: Mutex::new(IdleQueue::default()),
            refused: AtomicU64::new(0),
            evicted: AtomicU64::new(0),
            head_timeouts: AtomicU64::new(0),
            lingering: AtomicUsize::new(0),
            in_front: AtomicUsize::new(0),
            in_front_total: AtomicU64::new(0),
        }
    }

    pub fn stats(&self) -> ConnectionStats {
        ConnectionStats {
            open: self.open.load(Ordering::Relaxed),
            idle: lock(&self.idle).by_age.len(),
            max: self.limits.max,
            max_per_ip: self.limits.per_ip,
            refused_total: self.refused.load(Ordering::Relaxed),
            evicted_total: self.evicted.load(Ordering::Relaxed),
            header_timeouts_total: self.head_timeouts.load(Ordering::Relaxed),
            streams_in_front: self.in_front.load(Ordering::Relaxed),
            streams_in_front_total: self.in_front_total.load(Ordering::Relaxed),
        }
    }

    /// A place for a newcomer from `ip`; when the listener is full, the oldest idle keep-alive
    /// connection is closed to make it. The place is given back when the connection ends.
    fn admit(self: &Arc<Self>, ip: Option<IpAddr>) -> Result<Place, Refusal> {
        // The address first: a newcomer refused for its address must not cost anyone a place.
        let ip = match (ip, self.limits.per_ip) {
            (Some(ip), Some(max)) => {
                let mut per_ip = lock(&self.per_ip);
                let held = per_ip.entry(ip).or_default();
                if *held >= max {
                    drop(per_ip);
                    self.refused.fetch_add(1, Ordering::Relaxed);
                    return Err(Refusal::Address);
                }
                *held += 1;
                Some(ip)
            }
            _ => None,
        };
        let place = Place {
            connections: self.clone(),
            ip,
            conn: Arc::new(Conn {
                phase: AtomicU8::new(HEAD),
                ..Conn::default()
            }),
        };
        let open = self.open.fetch_add(1, Ordering::AcqRel) + 1;
        // The evicted connection gives its place back as it closes, a moment later: until then
        // the count is one above the limit, never more than the closes under way.
        if open > self.limits.max && !self.evict_oldest() {
            self.refused.fetch_add(1, Ordering::Relaxed);
            // Dropping the place gives back what was taken.
            return Err(Refusal::Full);
        }
        Ok(place)
    }

    fn evict_oldest(&self) -> bool {
        let oldest = lock(&self.idle).by_age.pop_first();
        let Some((_, conn)) = oldest else {
            return false;
        };
        conn.idle_key.store(0, Ordering::Release);
        conn.evicted.store(true, Ordering::Release);
        if let Some(waker) = lock(&conn.waker).take() {
            waker.wake();
        }
        self.evicted.fetch_add(1, Ordering::Relaxed);
        true
    }

    fn enter_idle(&self, conn: &Arc<Conn>) {
        let key = {
            let mut idle = lock(&self.idle);
            idle.next += 1;
            let key = idle.next;
            idle.by_age.insert(key, conn.clone());
            key
        };
        let before = conn.idle_key.swap(key, Ordering::AcqRel);
        if before != 0 {
            lock(&self.idle).by_age.remove(&before);
        }
        conn.phase.store(IDLE, Ordering::Release);
    }

    fn leave_idle(&self, conn: &Conn) {
        let key = conn.idle_key.swap(0, Ordering::AcqRel);
        if key != 0 {
            lock(&self.idle).by_age.remove(&key);
        }
    }
}

/// One connection's share of the listener, given back when the connection ends.
struct Place {
    connections: Arc<Connections>,
    ip: Option<IpAddr>,
    conn: Arc<Conn>,
}

impl Drop for Place {
    fn drop(&mut self) {
        self.connections.leave_idle(&self.conn);
        self.connections.open.fetch_sub(1, Ordering::AcqRel);
        if let Some(ip) = self.ip {
            let mut per_ip = lock(&self.connections.per_ip);
            if let Some(held) = per_ip.get_mut(&ip) {
                *held -= 1;
                if *held == 0 {
                    per_ip.remove(&ip);
                }
            }
        }
    }
}

/// A parked stream's share of the listener: its connection's place, and its count among the
/// streams the front door serves.
pub(super) struct ParkedPlace(Place);

impl ParkedPlace {
    fn new(place: Place) -> Self {
        place.conn.phase.store(BUSY, Ordering::Release);
        // The waker of the task that waited for this head (Pingora's, when the stream came
        // after a request on the same connection) would keep that finished task's memory, some
        // 9 KiB, for as long as the stream is open: a parked stream is never evicted.
        lock(&place.conn.waker).take();
        place.connections.in_front.fetch_add(1, Ordering::AcqRel);
        place
            .connections
            .in_front_total
            .fetch_add(1, Ordering::Relaxed);
        Self(place)
    }
}

impl Drop for ParkedPlace {
    fn drop(&mut self) {
        self.0.connections.in_front.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The hooks' side: the head of a request was read; its connection is busy until it ends.
pub fn head_read(session: &Session) {
    if let Some(place) = place(session) {
        place.connections.leave_idle(&place.conn);
        place.conn.phase.store(BUSY, Ordering::Release);
    }
}

/// The hooks' side: the request ended; until the next head's first byte the connection is idle.
pub fn request_done(session: &Session) {
    if let Some(place) = place(session) {
        place.connections.enter_idle(&place.conn);
    }
}

fn place(session: &Session) -> Option<&Place> {
    let stream = session.stream()?;
    let io: &dyn IO = &**stream;
    let live = io.as_any().downcast_ref::<Guarded>()?.live.as_ref()?;
    Some(&live.place)
}

/// A visitor's connection as the proxy reads it: the head deadline, the close on eviction and
/// the claim of event streams happen in its reads; everything else is the stream underneath.
pub struct Guarded {
    /// `None` once the connection was claimed for a parked stream: Pingora, which holds this,
    /// reads an end and lets go.
    live: Option<Live>,
    header_timeout: Duration,
    deadline: Option<Pin<Box<Sleep>>>,
    /// Shown each head's first read (HTTP/1.1 only).
    parking: Option<Parking>,
    /// The connection's first read, taken by the front door before Pingora had it: Pingora
    /// reads these bytes first.
    replay: Option<Bytes>,
}

struct Live {
    inner: Stream,
    place: Place,
}

/// What became of a new connection's first read.
enum FirstRead {
    /// A stream request, served by the front door.
    Claimed,
    /// Anything else: Pingora's, from the bytes read.
    ForPingora,
    /// Nothing came: the connection ended or its head's time ran out.
    Ended,
}

/// What the front door needs to serve a claimed stream.
#[derive(Clone)]
struct Parking {
    proxy: Arc<WaitroomProxy>,
    shutdown: ShutdownWatch,
    peer: Option<SocketAddr>,
}

impl fmt::Debug for Guarded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Guarded")
            .field("inner", &self.live.as_ref().map(|l| &l.inner))
            .finish_non_exhaustive()
    }
}

fn claimed_away() -> io::Error {
    io::Error::new(
        io::ErrorKind::BrokenPipe,
        "the connection was handed to a parked stream",
    )
}

impl Guarded {
    fn new(inner: Stream, place: Place, h2: bool, parking: Parking) -> Self {
        let header_timeout = place.connections.limits.header_timeout;
        // A new connection has `header_timeout` from its opening for its first head.
        let deadline = if h2 {
            place.conn.phase.store(BUSY, Ordering::Release);
            None
        } else {
            Some(Box::pin(tokio::time::sleep(header_timeout)))
        };
        Self {
            live: Some(Live { inner, place }),
            header_timeout,
            deadline,
            parking: (!h2).then_some(parking),
            replay: None,
        }
    }

    fn poll_idle(&mut self, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let Some(live) = self.live.as_mut() else {
            return Poll::Ready(Ok(()));
        };
        let conn = &live.place.conn;
        // An end of stream before any byte of a head: Pingora closes the connection quietly.
        if conn.evicted.load(Ordering::Acquire) {
            return Poll::Ready(Ok(()));
        }
        let before = buf.filled().len();
        match Pin::new(&mut live.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) if buf.filled().len() > before => {
                // The next head's first byte: from now on it has `header_timeout` to arrive.
                live.place.connections.leave_idle(conn);
                conn.phase.store(HEAD, Ordering::Release);
                self.deadline = Some(Box::pin(tokio::time::sleep(self.header_timeout)));
                if self.offer(&buf.filled()[before..]) {
                    // Pingora reads an end and lets the connection go.
                    buf.set_filled(before);
                }
                Poll::Ready(Ok(()))
            }
            Poll::Pending => {
                {
                    let mut waker = lock(&conn.waker);
                    if !waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                        *waker = Some(cx.waker().clone());
                    }
                }
                // An eviction between the first look and the waker's registration.
                if conn.evicted.load(Ordering::Acquire) {
                    return Poll::Ready(Ok(()));
                }
                Poll::Pending
            }
            other => other,
        }
    }

    fn poll_head(&mut self, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let Some(live) = self.live.as_mut() else {
            return Poll::Ready(Ok(()));
        };
        let read = Pin::new(&mut live.inner).poll_read(cx, buf);
        if read.is_ready() {
            return read;
        }
        let Some(deadline) = self.deadline.as_mut() else {
            return Poll::Pending;
        };
        if deadline.as_mut().poll(cx).is_pending() {
            return Poll::Pending;
        }
        self.deadline = None;
        live.place
            .connections
            .head_timeouts
            .fetch_add(1, Ordering::Relaxed);
        // Best effort: the connection ends whether or not the client can take the 408.
        let inner = Pin::new(&mut live.inner);
        if inner.poll_write(cx, TIMED_OUT).is_ready() {
            let _ = Pin::new(&mut live.inner).poll_flush(cx);
        }
        Poll::Ready(Err(io::Error::new(
            io::ErrorKind::TimedOut,
            "request head not complete within listen.header_timeout",
        )))
    }

    /// A new connection's first read, before Pingora is given the connection: a stream
    /// request is claimed before Pingora's session exists (it is allocated as soon as Pingora
    /// waits for a head, and a crowd opening its streams would hold it for as long as each
    /// head takes to come). Whatever is not claimed is read by Pingora from `replay`.
    async fn first_read(&mut self) -> FirstRead {
        // One byte first: nothing is allocated for a connection that has sent nothing yet.
        let mut byte = [0u8; 1];
        let read = std::future::poll_fn(|cx| {
            let mut buf = ReadBuf::new(&mut byte);
            self.poll_head(cx, &mut buf).map_ok(|()| buf.filled().len())
        })
        .await;
        if !matches!(read, Ok(1)) {
            // Closed before a byte, or timed out (answered 408 already).
            return FirstRead::Ended;
        }
        // What came with it is in the listener's read buffer by now: taken if it is there, and
        // otherwise (a head in pieces) left to Pingora, unclaimed.
        let mut first = BytesMut::zeroed(FIRST_READ);
        first[0] = byte[0];
        let more = std::future::poll_fn(|cx| {
            let mut buf = ReadBuf::new(&mut first[1..]);
            Poll::Ready(match self.poll_head(cx, &mut buf) {
                Poll::Ready(Ok(())) => Ok(buf.filled().len()),
                Poll::Ready(Err(e)) => Err(e),
                Poll::Pending => Ok(0),
            })
        })
        .await;
        let Ok(more) = more else {
            return FirstRead::Ended;
        };
        first.truncate(1 + more);
        if self.offer(&first) {
            return FirstRead::Claimed;
        }
        self.replay = Some(first.freeze());
        FirstRead::ForPingora
    }

    /// A head's first read: when the proxy claims it for a parked stream, the connection goes
    /// to the stream's own task (true), and whoever read it tells Pingora of an end.
    fn offer(&mut self, head: &[u8]) -> bool {
        let Some(parking) = &self.parking else {
            return false;
        };
        let peer = parking.peer.map(|a| a.ip());
        let Some(claimed) = parking.proxy.claim_stream(head, peer) else {
            return false;
        };
        let Some(Live { inner, place }) = self.live.take() else {
            return false;
        };
        self.deadline = None;
        let Parking {
            proxy,
            shutdown,
            peer,
        } = parking.clone();
        let parked = Parked {
            stream: inner,
            place: ParkedPlace::new(place),
            peer,
            claimed,
        };
        tokio::spawn(async move { proxy.serve_parked(parked, shutdown).await });
        true
    }
}

impl AsyncRead for Guarded {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if let Some(replay) = this.replay.as_mut() {
            let n = replay.len().min(buf.remaining());
            buf.put_slice(&replay.split_to(n));
            if replay.is_empty() {
                this.replay = None;
            }
            return Poll::Ready(Ok(()));
        }
        let Some(live) = this.live.as_mut() else {
            return Poll::Ready(Ok(()));
        };
        match live.place.conn.phase.load(Ordering::Acquire) {
            IDLE => this.poll_idle(cx, buf),
            HEAD => this.poll_head(cx, buf),
            _ => {
                this.deadline = None;
                Pin::new(&mut live.inner).poll_read(cx, buf)
            }
        }
    }
}

impl Guarded {
    fn inner_mut(&mut self) -> io::Result<Pin<&mut Stream>> {
        match self.live.as_mut() {
            Some(live) => Ok(Pin::new(&mut live.inner)),
            None => Err(claimed_away()),
        }
    }

    fn inner(&self) -> Option<&Stream> {
        self.live.as_ref().map(|l| &l.inner)
    }
}

impl AsyncWrite for Guarded {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut().inner_mut() {
            Ok(inner) => inner.poll_write(cx, buf),
            Err(e) => Poll::Ready(Err(e)),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut().inner_mut() {
            Ok(inner) => inner.poll_write_vectored(cx, bufs),
            Err(e) => Poll::Ready(Err(e)),
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.inner().is_some_and(|i| i.is_write_vectored())
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut().inner_mut() {
            Ok(inner) => inner.poll_flush(cx),
            Err(e) => Poll::Ready(Err(e)),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut().inner_mut() {
            Ok(inner) => inner.poll_shutdown(cx),
            // Claimed: the parked stream's task closes it.
            Err(_) => Poll::Ready(Ok(())),
        }
    }
}

#[async_trait]
impl Shutdown for Guarded {
    async fn shutdown(&mut self) {
        if let Some(live) = self.live.as_mut() {
            Shutdown::shutdown(&mut *live.inner).await;
        }
    }
}

impl UniqueID for Guarded {
    fn id(&self) -> UniqueIDType {
        self.inner().map_or(0, |i| i.id())
    }
}

impl Ssl for Guarded {
    fn get_ssl(&self) -> Option<&TlsRef> {
        self.inner()?.get_ssl()
    }

    fn get_ssl_digest(&self) -> Option<Arc<SslDigest>> {
        self.inner()?.get_ssl_digest()
    }

    fn selected_alpn_proto(&self) -> Option<ALPN> {
        self.inner()?.selected_alpn_proto()
    }
}

impl GetTimingDigest for Guarded {
    fn get_timing_digest(&self) -> Vec<Option<TimingDigest>> {
        self.inner()
            .map(|i| i.get_timing_digest())
            .unwrap_or_default()
    }

    fn get_read_pending_time(&self) -> Duration {
        self.inner()
            .map(|i| i.get_read_pending_time())
            .unwrap_or_default()
    }

    fn get_write_pending_time(&self) -> Duration {
        self.inner()
            .map(|i| i.get_write_pending_time())
            .unwrap_or_default()
    }
}

impl GetProxyDigest for Guarded {
    fn get_proxy_digest(&self) -> Option<Arc<ProxyDigest>> {
        self.inner()?.get_proxy_digest()
    }

    fn set_proxy_digest(&mut self, digest: ProxyDigest) {
        if let Some(live) = self.live.as_mut() {
            live.inner.set_proxy_digest(digest);
        }
    }
}

impl GetSocketDigest for Guarded {
    fn get_socket_digest(&self) -> Option<Arc<SocketDigest>> {
        self.inner()?.get_socket_digest()
    }

    fn set_socket_digest(&mut self, digest: SocketDigest) {
        if let Some(live) = self.live.as_mut() {
            live.inner.set_socket_digest(digest);
        }
    }
}

#[async_trait]
impl Peek for Guarded {
    async fn try_peek(&mut self, buf: &mut [u8]) -> io::Result<bool> {
        match self.live.as_mut() {
            Some(live) => live.inner.try_peek(buf).await,
            None => Ok(false),
        }
    }
}

/// The public listener's application: counts and wraps each connection, then hands it to the
/// proxy (`inner`), or refuses it.
pub struct FrontDoor<A> {
    inner: Arc<A>,
    connections: Arc<Connections>,
    /// The proxy that claims event streams, served here rather than by `inner`.
    proxy: Arc<WaitroomProxy>,
}

impl<A> FrontDoor<A> {
    pub fn new(inner: A, connections: Arc<Connections>, proxy: Arc<WaitroomProxy>) -> Self {
        Self {
            inner: Arc::new(inner),
            connections,
            proxy,
        }
    }
}

#[async_trait]
impl<A: ServerApp + Send + Sync + 'static> ServerApp for FrontDoor<A> {
    async fn process_new(
        self: &Arc<Self>,
        stream: Stream,
        shutdown: &ShutdownWatch,
    ) -> Option<Stream> {
        let peer = stream
            .get_socket_digest()
            .and_then(|d| d.peer_addr().and_then(|a| a.as_inet()).copied());
        let ip = peer.map(|a| a.ip());
        let h2 = matches!(stream.selected_alpn_proto(), Some(ALPN::H2));
        match self.connections.admit(ip) {
            Ok(place) => {
                let parking = Parking {
                    proxy: self.proxy.clone(),
                    shutdown: shutdown.clone(),
                    peer,
                };
                let mut guarded = Guarded::new(stream, place, h2, parking);
                if !h2 && !matches!(guarded.first_read().await, FirstRead::ForPingora) {
                    return None;
                }
                self.inner.process_new(Box::new(guarded), shutdown).await
            }
            Err(refusal) => {
                log::debug!("refused a connection from {ip:?}: {refusal:?}");
                // HTTP/2 has no way to say it without a session: it is just closed.
                if !h2 {
                    refuse(stream, refusal, &self.connections.lingering).await;
                }
                None
            }
        }
    }

    async fn cleanup(&self) {
        self.inner.cleanup().await;
    }
}

fn refusal_answer(refusal: Refusal) -> Vec<u8> {
    let body = match refusal {
        Refusal::Full => {
            "The shop's waiting room is full of visitors right now: try again in a moment.\n"
        }
        Refusal::Address => "Too many connections from your address: try again in a moment.\n",
    };
    format!(
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n\
         Content-Length: {}\r\nRetry-After: {RETRY_AFTER_SECS}\r\nCache-Control: no-store\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Answers 503 before the request is read (HTTP/1.1 allows an early answer followed by a
/// close), then reads what the client sent for a moment so the close is not a reset, unless too
/// many refused connections linger already.
async fn refuse(mut stream: Stream, refusal: Refusal, lingering: &AtomicUsize) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let answer = refusal_answer(refusal);
    let said = tokio::time::timeout(LINGER, async {
        stream.write_all(&answer).await?;
        stream.flush().await?;
        AsyncWriteExt::shutdown(&mut stream).await
    })
    .await;
    if !matches!(said, Ok(Ok(()))) {
        return;
    }
    if lingering.fetch_add(1, Ordering::AcqRel) < MAX_LINGERING {
        let mut sink = [0u8; 1024];
        let _ = tokio::time::timeout(LINGER, async {
            while matches!(stream.read(&mut sink).await, Ok(n) if n > 0) {}
        })
        .await;
    }
    lingering.fetch_sub(1, Ordering::AcqRel);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn connections(max: usize, per_ip: Option<usize>) -> Arc<Connections> {
        Arc::new(Connections::new(ConnectionLimits {
            max,
            per_ip,
            header_timeout: Duration::from_secs(1),
        }))
    }

    const A: Option<IpAddr> = Some(IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, 1)));

    #[test]
    fn a_full_listener_closes_its_oldest_idle_connection_for_a_newcomer() {
        let all = connections(2, None);
        let first = all.admit(A).unwrap();
        let second = all.admit(A).unwrap();
        // Nobody idle: refused, and the count is as it was.
        assert_eq!(all.admit(A).err(), Some(Refusal::Full));
        assert_eq!(all.stats().open, 2);
        all.enter_idle(&second.conn);
        all.enter_idle(&first.conn);
        let third = all.admit(A).unwrap();
        assert!(
            second.conn.evicted.load(Ordering::Acquire),
            "the oldest idle"
        );
        assert!(!first.conn.evicted.load(Ordering::Acquire));
        drop(second);
        drop(third);
        let stats = all.stats();
        assert_eq!((stats.open, stats.idle), (1, 1));
        assert_eq!((stats.refused_total, stats.evicted_total), (1, 1));
    }

    #[test]
    fn an_address_holds_at_most_its_share_and_gets_it_back() {
        let all = connections(10, Some(1));
        let first = all.admit(A).unwrap();
        assert_eq!(all.admit(A).err(), Some(Refusal::Address));
        let other = Some(IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, 2)));
        let _other = all.admit(other).unwrap();
        drop(first);
        assert!(all.admit(A).is_ok());
    }

    #[test]
    fn a_connection_that_leaves_idle_is_not_closed_for_a_newcomer() {
        let all = connections(1, None);
        let first = all.admit(A).unwrap();
        all.enter_idle(&first.conn);
        all.leave_idle(&first.conn);
        assert_eq!(all.admit(A).err(), Some(Refusal::Full));
        assert_eq!(all.stats().idle, 0);
    }

    #[test]
    fn a_parked_stream_lets_go_of_the_task_that_read_its_head() {
        struct Task;
        impl std::task::Wake for Task {
            fn wake(self: Arc<Self>) {}
        }
        let all = connections(2, None);
        let place = all.admit(A).unwrap();
        // Pingora's task waited for the next head on this kept-alive connection.
        let task = Arc::new(Task);
        *lock(&place.conn.waker) = Some(Waker::from(task.clone()));
        let parked = ParkedPlace::new(place);
        assert_eq!(
            Arc::strong_count(&task),
            1,
            "the finished task's memory must not be held for the stream's lifetime"
        );
        assert_eq!(all.stats().streams_in_front, 1);
        drop(parked);
        assert_eq!((all.stats().open, all.stats().streams_in_front), (0, 0));
    }

    #[test]
    fn the_refusal_is_a_complete_response_that_closes() {
        let text = String::from_utf8(refusal_answer(Refusal::Full)).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 503 "));
        assert!(head.contains("\r\nConnection: close"));
        assert!(head.contains(&format!("\r\nRetry-After: {RETRY_AFTER_SECS}")));
        assert!(head.contains(&format!("\r\nContent-Length: {}", body.len())));
    }
}
