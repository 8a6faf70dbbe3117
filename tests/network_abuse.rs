#![allow(clippy::unwrap_used)]
//! A scalper paid to hold the shop over raw sockets, against the real proxy in front of a
//! recording origin that would switch protocols and echo: event streams from one address
//! cannot take every connection, a request body trickled past `listen.body_timeout` is cut
//! before the origin has it, client addresses are read as load balancers write them, and no
//! tunnel opens where the gate would not see what it carries.

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::origin::{Request, StubOrigin, read_request, serve_in_background};
use common::proxy::{Answer, Sections, TestProxy, Visitor, ticket_in};
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

const HOST: &str = "shop.example.com";
const TRUST_LOOPBACK: &str = "trusted_proxies = [\"127.0.0.1\"]";
/// A room of one, for an hour: once the first visitor is in, every newcomer waits.
const FULL_ROOM: &str =
    "total_active_users = 1\nnew_users_per_minute = 100000\nsession_duration = \"1h\"\n";
const SCALPER: &str = "203.0.113.66";

/// What the origin heard: whole requests, and the bytes that reached it inside a tunnel.
#[derive(Default)]
struct Heard {
    requests: Vec<Request>,
    tunneled: Vec<u8>,
}

/// An origin that switches protocols for any request carrying `Upgrade` (and for
/// `/static/always-101...` whatever it carries), then echoes what comes through the tunnel.
#[derive(Clone)]
struct Origin {
    addr: std::net::SocketAddr,
    heard: Arc<Mutex<Heard>>,
}

impl Origin {
    fn start() -> Self {
        let heard = Arc::new(Mutex::new(Heard::default()));
        let shared = heard.clone();
        let addr = serve_in_background(move |stream| {
            let heard = shared.clone();
            async move {
                let _ = serve(stream, heard).await;
            }
        });
        Self { addr, heard }
    }

    fn targets(&self) -> Vec<String> {
        let heard = self.heard.lock().unwrap();
        heard
            .requests
            .iter()
            .map(|r| r.target().to_owned())
            .collect()
    }

    fn request(&self, target: &str) -> Option<Request> {
        let heard = self.heard.lock().unwrap();
        heard
            .requests
            .iter()
            .find(|r| r.target() == target)
            .cloned()
    }

    fn tunneled(&self) -> String {
        String::from_utf8_lossy(&self.heard.lock().unwrap().tunneled).into_owned()
    }
}

async fn serve(stream: TcpStream, heard: Arc<Mutex<Heard>>) -> std::io::Result<()> {
    let (read, mut write) = stream.into_split();
    let mut reader = BufReader::new(read);
    while let Some(request) = read_request(&mut reader).await? {
        let target = request.target().to_owned();
        let switch =
            request.header("upgrade").is_some() || target.starts_with("/static/always-101");
        heard.lock().unwrap().requests.push(request);
        if switch {
            write
                .write_all(
                    b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\
                      Connection: Upgrade\r\n\r\n",
                )
                .await?;
            let mut buf = [0u8; 1024];
            loop {
                let n = reader.read(&mut buf).await?;
                if n == 0 {
                    return Ok(());
                }
                heard.lock().unwrap().tunneled.extend_from_slice(&buf[..n]);
                write.write_all(&buf[..n]).await?;
            }
        }
        let text = format!("origin:{target}");
        let answer = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n{text}",
            text.len()
        );
        write.write_all(answer.as_bytes()).await?;
    }
    Ok(())
}

/// The origin's read timeout is long here: what these tests time is the visitor's side (a
/// body's deadline, a tunnel's silence), which a 1 s origin timeout would race.
fn start(origin: &Origin, listen: &str, room: &str, rest: &str) -> TestProxy {
    TestProxy::start_sections(
        origin.addr,
        StubOrigin::start(),
        Sections {
            listen,
            room,
            rest,
            read_timeout: "30s",
            ..Sections::default()
        },
    )
}

async fn connect(proxy: &TestProxy) -> TcpStream {
    let stream = TcpStream::connect(("127.0.0.1", proxy.port)).await.unwrap();
    // Pieces of a trickle go out as written, not held back by Nagle.
    stream.set_nodelay(true).unwrap();
    stream
}

/// One answer off `stream`: (status, head, body by Content-Length); None if the connection
/// ended (or nothing came in 5 s) first.
async fn read_answer(stream: &mut TcpStream) -> Option<(u16, String, String)> {
    tokio::time::timeout(Duration::from_secs(5), async {
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            match stream.read(&mut byte).await {
                Ok(1) => head.push(byte[0]),
                _ => return None,
            }
        }
        let head = String::from_utf8(head).unwrap();
        let status = head.split_whitespace().nth(1)?.parse().ok()?;
        let length = header_of(&head, "content-length").map_or(0, |v| v.parse().unwrap());
        let mut body = vec![0; length];
        stream.read_exact(&mut body).await.ok()?;
        Some((status, head, String::from_utf8_lossy(&body).into_owned()))
    })
    .await
    .ok()
    .flatten()
}

fn header_of<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().skip(1).find_map(|l| {
        let (n, v) = l.split_once(':')?;
        n.eq_ignore_ascii_case(name).then_some(v.trim())
    })
}

/// Sends one request head (lines joined, a blank line added) in one write.
async fn send(stream: &mut TcpStream, lines: &[&str]) {
    let head = format!("{}\r\n\r\n", lines.join("\r\n"));
    stream.write_all(head.as_bytes()).await.unwrap();
}

/// GET `target` on a connection of its own, as `from` (X-Forwarded-For) with `ticket`.
async fn get(
    proxy: &TestProxy,
    target: &str,
    from: Option<&str>,
    ticket: Option<&str>,
) -> (u16, String, String) {
    let mut stream = connect(proxy).await;
    let line = format!("GET {target} HTTP/1.1");
    let host = format!("Host: {HOST}");
    let xff = from.map(|a| format!("X-Forwarded-For: {a}"));
    let cookie = ticket.map(|t| format!("Cookie: waitroom={t}"));
    let mut lines = vec![line.as_str(), host.as_str()];
    lines.extend(xff.as_deref());
    lines.extend(cookie.as_deref());
    send(&mut stream, &lines).await;
    read_answer(&mut stream).await.expect("an answer")
}

/// Whether the proxy ends `stream` within `within` (whatever it sent before).
async fn ends_within(stream: &mut TcpStream, within: Duration) -> bool {
    let mut sink = Vec::new();
    tokio::time::timeout(within, stream.read_to_end(&mut sink))
        .await
        .is_ok()
}

async fn metric(proxy: &TestProxy, series: &str) -> u64 {
    let text = proxy.metrics().await;
    text.lines()
        .find_map(|l| l.strip_prefix(series))
        .map_or(0, |v| v.trim().parse().unwrap())
}

/// The first visitor takes the room's only place: its pass.
async fn take_the_room(proxy: &TestProxy) -> String {
    let (status, head, _) = get(proxy, "/", Some("192.0.2.1"), None).await;
    assert_eq!(status, 200);
    ticket_in(&head).expect("the first visitor gets a pass")
}

// ---------------------------------------------------------------------------------------------
// Item 3: event streams and request bodies.

/// Opens an event stream as `from` with `ticket`: the open stream, or the refusal's head.
async fn open_stream(
    proxy: &TestProxy,
    from: &str,
    ticket: Option<&str>,
) -> Result<TcpStream, String> {
    let mut stream = connect(proxy).await;
    let host = format!("Host: {HOST}");
    let xff = format!("X-Forwarded-For: {from}");
    let cookie = ticket.map(|t| format!("Cookie: waitroom={t}"));
    let mut lines = vec![
        "GET /__waitroom/events HTTP/1.1",
        host.as_str(),
        xff.as_str(),
        "Accept: text/event-stream",
    ];
    lines.extend(cookie.as_deref());
    send(&mut stream, &lines).await;
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        let n = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut byte))
            .await
            .expect("a stream's head comes at once")
            .unwrap();
        assert_eq!(n, 1, "the proxy closed before answering");
        head.push(byte[0]);
    }
    let head = String::from_utf8(head).unwrap();
    if head.starts_with("HTTP/1.1 200") {
        assert_eq!(header_of(&head, "content-type"), Some("text/event-stream"));
        Ok(stream)
    } else {
        Err(head)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_address_with_many_tickets_gets_its_share_of_streams_and_the_rest_poll() {
    let origin = Origin::start();
    let listen = format!("{TRUST_LOOPBACK}\nmax_connections = 40\nmax_event_streams_per_ip = 3");
    let proxy = start(&origin, &listen, FULL_ROOM, "");
    // Derived: half of max_connections, the other half kept for everyone else.
    assert_eq!(proxy.state().await["listener"]["max_event_streams"], 20);
    let pass = take_the_room(&proxy).await;

    // The scalper: eight tickets from one address, four streams each (a ticket's own share).
    let mut tickets = Vec::new();
    for _ in 0..8 {
        let (status, head, body) = get(&proxy, "/", Some(SCALPER), None).await;
        assert!(status == 200 && !body.starts_with("origin:"), "{head}");
        tickets.push(ticket_in(&head).expect("a ticket"));
    }
    let (mut held, mut refused) = (Vec::new(), 0);
    for ticket in &tickets {
        for _ in 0..4 {
            match open_stream(&proxy, SCALPER, Some(ticket)).await {
                Ok(stream) => held.push(stream),
                Err(head) => {
                    // Told to poll, not failed: 204 ends an EventSource for good, and the page
                    // polls the JSON status instead.
                    assert!(head.starts_with("HTTP/1.1 204"), "{head}");
                    assert_eq!(
                        header_of(&head, "x-waitroom-stream"),
                        Some("refused; reason=address")
                    );
                    assert!(header_of(&head, "retry-after").is_some());
                    refused += 1;
                }
            }
        }
    }
    assert_eq!((held.len(), refused), (3, 29));
    assert_eq!(
        metric(
            &proxy,
            "waitroom_event_streams_refused_total{reason=\"address\",room=\"test-room\"}"
        )
        .await,
        29
    );

    // Everyone else still gets through while the scalper holds its streams: a pass holder, a
    // newcomer from another address (page and stream), and the scalper's own status poll.
    let (status, _, body) = get(&proxy, "/cart", Some("192.0.2.1"), Some(&pass)).await;
    assert_eq!((status, body.as_str()), (200, "origin:/cart"));
    let (status, head, body) = get(&proxy, "/", Some("198.51.100.7"), None).await;
    assert!(status == 200 && body.contains("Test drop"), "{head}");
    let newcomer = ticket_in(&head).expect("a ticket");
    let stream = open_stream(&proxy, "198.51.100.7", Some(&newcomer)).await;
    assert!(stream.is_ok(), "{:?}", stream.err());
    let (status, _, body) = get(
        &proxy,
        "/__waitroom/status",
        Some(SCALPER),
        Some(&tickets[0]),
    )
    .await;
    assert_eq!(status, 200, "{body}");

    // A stream that ends gives its address's place back.
    drop(held.pop());
    let mut back = false;
    for _ in 0..100 {
        if let Ok(stream) = open_stream(&proxy, SCALPER, Some(&tickets[7])).await {
            held.push(stream);
            back = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(back, "the scalper's place came back");
    assert_eq!(held.len(), 3);
}

/// A POST whose body is written in `pieces` of `size` bytes with `gap` between them; the
/// answer, or None if the proxy ended the connection without one.
async fn post_in_pieces(
    proxy: &TestProxy,
    target: &str,
    (pieces, size): (usize, usize),
    gap: Duration,
) -> Option<(u16, String, String)> {
    let mut stream = connect(proxy).await;
    let body: Vec<u8> = (0..pieces * size).map(|i| b'a' + (i % 26) as u8).collect();
    let head = format!(
        "POST {target} HTTP/1.1\r\nHost: {HOST}\r\nContent-Type: application/octet-stream\r\n\
         Content-Length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    for piece in body.chunks(size) {
        if stream.write_all(piece).await.is_err() {
            break;
        }
        tokio::time::sleep(gap).await;
    }
    read_answer(&mut stream).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_trickled_past_the_deadline_or_below_the_rate_is_cut_and_a_slow_steady_one_arrives_whole()
 {
    let origin = Origin::start();
    let room = "total_active_users = 100\nnew_users_per_minute = 100000\n\
                bypass = [\"/upload/*\"]\n";
    let proxy = start(
        &origin,
        "body_timeout = \"1s\"\nmin_body_rate = 20",
        room,
        "",
    );

    // 10 bytes every 400 ms for 4 s (25 B/s): longer than the deadline in all, never silent
    // that long, above the rate.
    let honest = post_in_pieces(
        &proxy,
        "/upload/steady",
        (10, 10),
        Duration::from_millis(400),
    );
    let (status, _, body) = honest.await.expect("an answer");
    assert_eq!((status, body.as_str()), (200, "origin:/upload/steady"));
    let received = origin.request("/upload/steady").expect("the origin has it");
    assert_eq!(received.body.len(), 100);

    // The patient scalper: a byte every 300 ms, never silent for the deadline, 3 B/s: cut at
    // its first piece after the 1 s grace.
    let started = Instant::now();
    let trickle = post_in_pieces(
        &proxy,
        "/upload/trickle",
        (40, 1),
        Duration::from_millis(300),
    );
    if let Some((status, _, _)) = trickle.await {
        assert_eq!(status, 408);
    }
    assert!(started.elapsed() < Duration::from_secs(8));
    assert!(origin.request("/upload/trickle").is_none());

    // The scalper: a head, two bytes, then a byte every 1.6 s: the connection is cut after the
    // first silence, 408 if it still reads, and the origin never gets the whole request.
    let mut stream = connect(&proxy).await;
    stream
        .write_all(
            format!("POST /upload/slow HTTP/1.1\r\nHost: {HOST}\r\nContent-Length: 1000\r\n\r\nab")
                .as_bytes(),
        )
        .await
        .unwrap();
    let started = Instant::now();
    let mut cut = false;
    for _ in 0..6 {
        tokio::time::sleep(Duration::from_millis(1600)).await;
        if stream.write_all(b"c").await.is_err() {
            cut = true;
            break;
        }
    }
    let ended = cut || ends_within(&mut stream, Duration::from_secs(3)).await;
    assert!(ended, "the trickle still holds its connection");
    assert!(started.elapsed() < Duration::from_secs(8));
    assert!(origin.request("/upload/slow").is_none());

    // The proxy's own paths read bodies under the same deadline.
    let mut stream = connect(&proxy).await;
    stream
        .write_all(
            format!(
                "POST /__waitroom/leave HTTP/1.1\r\nHost: {HOST}\r\nContent-Length: 100\r\n\r\nx"
            )
            .as_bytes(),
        )
        .await
        .unwrap();
    let answer = read_answer(&mut stream).await;
    if let Some((status, _, _)) = &answer {
        assert_eq!(*status, 408);
    }
    assert!(ends_within(&mut stream, Duration::from_secs(3)).await);
    assert_eq!(
        metric(&proxy, "waitroom_body_timeouts_total{room=\"test-room\"}").await,
        3
    );
}

// ---------------------------------------------------------------------------------------------
// Item 7: client addresses as load balancers write them.

fn visitor_from(base: &Visitor, address: Option<&str>) -> Visitor {
    let mut v = base.clone();
    v.cookie = None;
    v.forwarded_for = address.map(str::to_owned);
    v
}

fn got_ticket(answer: &Answer) -> bool {
    answer.status == 200
        && !answer.reached_origin()
        && answer
            .set_cookies()
            .iter()
            .any(|c| c.starts_with("waitroom="))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn addresses_with_ports_get_their_own_budgets_and_unreadable_ones_share_one() {
    let origin = Origin::start();
    let proxy = start(
        &origin,
        TRUST_LOOPBACK,
        FULL_ROOM,
        "[rate_limit]\ntickets_per_ip_per_minute = 1\nburst = 1\nmax_live_tickets_per_ip = 0",
    );
    take_the_room(&proxy).await;
    let base = proxy.visitor();
    let ask = async |address: Option<&str>| {
        visitor_from(&base, address)
            .request(reqwest::Method::GET, "/", None)
            .await
    };
    // Each address its own budget, whatever port or brackets the balancer wrote.
    for address in [
        "1.2.3.4:5555",
        "5.6.7.8:1",
        "[2001:db8::1]:443",
        " 9.9.9.9 ",
    ] {
        let answer = ask(Some(address)).await;
        assert!(got_ticket(&answer), "{address}: {}", answer.status);
    }
    for again in ["1.2.3.4:6666", "1.2.3.4", "\"[2001:db8::2]:8443\""] {
        assert_eq!(ask(Some(again)).await.status, 429, "{again}");
    }
    // Unreadable entries: one budget of their own, not the balancer's (127.0.0.1).
    assert!(got_ticket(&ask(Some("unknown")).await));
    assert!(
        got_ticket(&ask(None).await),
        "the balancer's own address kept its budget"
    );
    assert_eq!(ask(Some("unknown")).await.status, 429);
    assert_eq!(ask(Some("_hidden")).await.status, 429);
    assert_eq!(
        metric(
            &proxy,
            "waitroom_client_address_unparsed_total{room=\"test-room\"}"
        )
        .await,
        3
    );
}

// ---------------------------------------------------------------------------------------------
// Item 8: tunnels.

const WEBSOCKET: [&str; 3] = [
    "Upgrade: websocket",
    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
    "Sec-WebSocket-Version: 13",
];

/// Sends an upgrade request for `target` (with `cookie` if any) on a new connection.
async fn upgrade(proxy: &TestProxy, target: &str, cookie: Option<&str>) -> TcpStream {
    let mut stream = connect(proxy).await;
    let line = format!("GET {target} HTTP/1.1");
    let host = format!("Host: {HOST}");
    let cookie = cookie.map(|c| format!("Cookie: waitroom={c}"));
    let mut lines = vec![
        line.as_str(),
        host.as_str(),
        "Connection: keep-alive, Upgrade",
    ];
    lines.extend(WEBSOCKET);
    lines.extend(cookie.as_deref());
    send(&mut stream, &lines).await;
    stream
}

/// What comes back for `GET /checkout` written on `stream`: the proxy's answer, None if it
/// ended the connection.
async fn checkout_after(stream: &mut TcpStream) -> Option<(u16, String, String)> {
    let request = format!("GET /checkout HTTP/1.1\r\nHost: {HOST}\r\n\r\n");
    if stream.write_all(request.as_bytes()).await.is_err() {
        return None;
    }
    read_answer(stream).await
}

fn no_checkout_reached(origin: &Origin) {
    assert!(
        !origin.targets().iter().any(|t| t.contains("checkout")),
        "{:?}",
        origin.targets()
    );
    assert!(
        !origin.tunneled().contains("checkout"),
        "{}",
        origin.tunneled()
    );
}

const BYPASSED_STATIC: &str =
    "bypass = [\"/static/*\", \"/ws/*\"]\nwebsocket_paths = [\"/ws/*\"]\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upgrade_on_a_bypassed_path_is_taken_off_and_no_tunnel_carries_a_checkout() {
    let origin = Origin::start();
    let proxy = start(&origin, "", &format!("{FULL_ROOM}{BYPASSED_STATIC}"), "");
    take_the_room(&proxy).await;

    let mut stream = upgrade(&proxy, "/static/chat", None).await;
    let (status, _, body) = read_answer(&mut stream).await.expect("an answer");
    assert_eq!((status, body.as_str()), (200, "origin:/static/chat"));
    let seen = origin.request("/static/chat").unwrap();
    assert_eq!(seen.header("upgrade"), None);
    assert!(
        !seen
            .header("connection")
            .unwrap_or("")
            .to_ascii_lowercase()
            .contains("upgrade"),
        "{:?}",
        seen.headers
    );
    // The connection is still HTTP: the next request on it is gated like any other.
    if let Some((status, _, body)) = checkout_after(&mut stream).await {
        assert!(status == 200 && body.contains("Test drop"), "{body}");
    }
    no_checkout_reached(&origin);

    // An upgrade request and a checkout in one write, as a racing bot sends them.
    let mut stream = connect(&proxy).await;
    let both = format!(
        "GET /static/chat2 HTTP/1.1\r\nHost: {HOST}\r\nConnection: Upgrade\r\n{}\r\n\r\n\
         GET /checkout HTTP/1.1\r\nHost: {HOST}\r\n\r\n",
        WEBSOCKET.join("\r\n")
    );
    stream.write_all(both.as_bytes()).await.unwrap();
    let (status, _, _) = read_answer(&mut stream).await.expect("an answer");
    assert_eq!(status, 200);
    if let Some((status, _, body)) = read_answer(&mut stream).await {
        assert!(status == 200 && body.contains("Test drop"), "{body}");
    }
    no_checkout_reached(&origin);
    assert!(
        metric(
            &proxy,
            "waitroom_upgrades_refused_total{room=\"test-room\",stage=\"request\"}"
        )
        .await
            >= 2
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_101_the_origin_sends_anyway_is_answered_502_and_opens_nothing() {
    let origin = Origin::start();
    let proxy = start(&origin, "", &format!("{FULL_ROOM}{BYPASSED_STATIC}"), "");
    take_the_room(&proxy).await;

    // With an Upgrade the proxy took off, and without any.
    let mut with = upgrade(&proxy, "/static/always-101", None).await;
    let mut without = connect(&proxy).await;
    send(
        &mut without,
        &[
            "GET /static/always-101/plain HTTP/1.1",
            "Host: shop.example.com",
        ],
    )
    .await;
    for stream in [&mut with, &mut without] {
        let (status, head, _) = read_answer(stream).await.expect("an answer");
        assert_eq!(status, 502, "{head}");
        assert!(
            checkout_after(stream).await.is_none(),
            "closed after the 502"
        );
    }
    no_checkout_reached(&origin);
    assert_eq!(
        metric(
            &proxy,
            "waitroom_upgrades_refused_total{room=\"test-room\",stage=\"response\"}"
        )
        .await,
        2
    );
}

/// Whether what is written into a tunnel comes back whole.
async fn echoed(stream: &mut TcpStream, sent: &[u8]) -> bool {
    if stream.write_all(sent).await.is_err() {
        return false;
    }
    let mut back = vec![0; sent.len()];
    matches!(
        tokio::time::timeout(Duration::from_secs(5), stream.read_exact(&mut back)).await,
        Ok(Ok(_))
    ) && back == sent
}

/// An upgrade to `target` that opens a tunnel echoing what is sent. When the origin's 101 is read
/// before the upgrade request's empty body, Pingora 0.9 ends the fresh tunnel at once (upstream
/// issue cloudflare/pingora#946; PRD, "Not yet built"), which a loaded machine meets about once
/// in thirty runs: a second connection is tried then, as a client reconnects, and the test still
/// fails when none works.
async fn tunnel_echoes(proxy: &TestProxy, target: &str) -> bool {
    for _ in 0..3 {
        let mut stream = upgrade(proxy, target, None).await;
        let Some((status, head, _)) = read_answer(&mut stream).await else {
            continue;
        };
        assert_eq!(status, 101, "{head}");
        if echoed(&mut stream, b"hello").await {
            return true;
        }
    }
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pass_holders_websocket_and_a_websocket_path_still_upgrade() {
    let origin = Origin::start();
    let proxy = start(
        &origin,
        "body_timeout = \"1s\"",
        &format!("{FULL_ROOM}{BYPASSED_STATIC}"),
        "",
    );
    let pass = take_the_room(&proxy).await;

    // Tried up to three times, for the upstream issue `tunnel_echoes` tells of.
    let mut tunnel = None;
    for _ in 0..3 {
        let mut holder = upgrade(&proxy, "/live", Some(&pass)).await;
        let (status, head, _) = read_answer(&mut holder).await.expect("an answer");
        assert_eq!(status, 101, "{head}");
        assert_eq!(
            origin.request("/live").unwrap().header("upgrade"),
            Some("websocket")
        );
        if echoed(&mut holder, b"ping-1").await {
            tunnel = Some(holder);
            break;
        }
    }
    let mut holder = tunnel.expect("a pass holder's tunnel echoes");
    // A quiet tunnel is not a request body: the body deadline does not end it.
    tokio::time::sleep(Duration::from_millis(1600)).await;
    assert!(echoed(&mut holder, b"ping-2").await);

    assert!(tunnel_echoes(&proxy, "/ws/feed").await);

    // A newcomer's upgrade on a protected path waits like any newcomer.
    let mut newcomer = upgrade(&proxy, "/live/other", None).await;
    let (status, _, body) = read_answer(&mut newcomer).await.expect("an answer");
    assert!(status == 200 && body.contains("Test drop"), "{body}");
    assert!(!origin.targets().contains(&"/live/other".to_owned()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outside_every_room_only_a_listed_websocket_path_upgrades() {
    let origin = Origin::start();
    let room = format!("{FULL_ROOM}path = \"/drop\"\nwebsocket_paths = [\"/ws/*\"]\n");
    let proxy = start(&origin, "", &room, "");

    assert!(tunnel_echoes(&proxy, "/ws/stock").await);

    let mut other = upgrade(&proxy, "/chat", None).await;
    let (status, _, body) = read_answer(&mut other).await.expect("an answer");
    assert_eq!((status, body.as_str()), (200, "origin:/chat"));
    assert_eq!(origin.request("/chat").unwrap().header("upgrade"), None);
}

// ---------------------------------------------------------------------------------------------
// The config check.

#[test]
fn the_config_check_warns_about_bypass_patterns_that_match_anywhere_and_shipped_ones_do_not() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("room.toml");
    std::fs::write(
        &file,
        "[origin]\naddress = \"127.0.0.1:3000\"\n[room]\nid = \"r\"\ntotal_active_users = 2\n\
         new_users_per_minute = 2\nbypass = [\"/static/*\", \"*.css\"]\n",
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_waitroom-proxy"))
        .args(["--config", file.to_str().unwrap(), "--test"])
        .env("WR_JWT_SECRET", "0123456789abcdef0123456789abcdef-secret")
        .env("WR_ADMIN_TOKEN", "0123456789abcdef0123456789abcdef-token")
        .output()
        .unwrap();
    assert!(out.status.success());
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        said.contains("room.bypass \\\"*.css\\\" matches anywhere in a path")
            || said.contains("room.bypass \"*.css\" matches anywhere in a path"),
        "{said}"
    );
    assert!(said.contains("/checkout.css"), "{said}");
    assert!(!said.contains("\"/static/*\" matches"), "{said}");

    let shipped = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("config");
    for entry in std::fs::read_dir(shipped).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            let env = common::proxy::NoEnvironment;
            let Ok((_, warnings)) = waitroom::config::Config::load(&path, &env, true) else {
                continue;
            };
            assert!(
                !warnings.iter().any(|w| w.contains("matches anywhere")),
                "{}: {warnings:?}",
                path.display()
            );
        }
    }
}
