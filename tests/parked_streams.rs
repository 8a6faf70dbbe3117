#![allow(clippy::unwrap_used)]
//! Event streams the front door serves itself, without Pingora's session, over raw sockets
//! against the real proxy: a stream opened on the page's own keep-alive connection gets every
//! event and ends when the visitor is called; a stream beside plain requests leaves them be;
//! every head the front door must not claim (split, slow, malformed, with a body, pipelined,
//! HTTP/1.0, another spelling) goes to Pingora, which serves it as before; the caps hold.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::proxy::{TestProxy, eventually, ticket_in};

/// A room of one: the first visitor takes it, everyone else waits.
const FULL_ROOM: &str = "total_active_users = 1\nnew_users_per_minute = 100\n";

fn start(listen: &str) -> TestProxy {
    TestProxy::start_room_listening(FULL_ROOM, listen)
}

fn connect(proxy: &TestProxy) -> TcpStream {
    proxy.connect_raw()
}

/// What `stream` sends until `text` has come (or it ends, or 8 s pass).
fn read_until(stream: &mut TcpStream, got: &mut Vec<u8>, text: &str) -> bool {
    let deadline = Instant::now() + Duration::from_secs(8);
    let mut chunk = [0u8; 4096];
    while !String::from_utf8_lossy(got).contains(text) {
        if Instant::now() > deadline {
            return false;
        }
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return String::from_utf8_lossy(got).contains(text),
            Ok(n) => got.extend_from_slice(&chunk[..n]),
        }
    }
    true
}

/// The waiting page on a connection of its own: its ticket, and the connection kept alive.
fn wait_in_line(proxy: &TestProxy) -> (TcpStream, String) {
    let mut stream = connect(proxy);
    stream
        .write_all(b"GET / HTTP/1.1\r\nHost: shop.example.com\r\n\r\n")
        .unwrap();
    let mut got = Vec::new();
    assert!(read_until(&mut stream, &mut got, "</html>"), "the page");
    let text = String::from_utf8_lossy(&got).into_owned();
    let ticket = ticket_in(&text).expect("a ticket");
    (stream, ticket)
}

fn stream_request(ticket: &str) -> String {
    format!(
        "GET /__waitroom/events HTTP/1.1\r\nHost: shop.example.com\r\n\
         Accept: text/event-stream\r\nCookie: waitroom={ticket}\r\n\r\n"
    )
}

async fn in_front(proxy: &TestProxy) -> (u64, u64) {
    let stats = &proxy.state().await["listener"]["connections"];
    (
        stats["streams_in_front"].as_u64().unwrap(),
        stats["streams_in_front_total"].as_u64().unwrap(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_on_the_pages_connection_is_served_in_front_until_the_visitor_is_called() {
    let proxy = start("");
    let mut inside = proxy.visitor();
    assert!(inside.get("/").await.reached_origin());
    let (mut page, ticket) = wait_in_line(&proxy);
    page.write_all(stream_request(&ticket).as_bytes()).unwrap();
    let mut got = Vec::new();
    assert!(read_until(&mut page, &mut got, "\"position\":1"));
    let text = String::from_utf8_lossy(&got).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
    for line in [
        "content-type: text/event-stream",
        "cache-control: no-store",
        "transfer-encoding: chunked",
        "connection: close",
    ] {
        assert!(head.contains(line), "{line} in {head}");
    }
    assert!(
        body.contains("retry: 2000\n\ndata: {\"cfWaitingRoom\""),
        "{body}"
    );
    assert_eq!(in_front(&proxy).await, (1, 1));

    // Beside it, the listener serves plain requests as ever, kept alive.
    let mut other = connect(&proxy);
    for _ in 0..3 {
        other
            .write_all(b"GET /__waitroom/status HTTP/1.1\r\nHost: shop.example.com\r\n\r\n")
            .unwrap();
        let mut answer = Vec::new();
        assert!(read_until(&mut other, &mut answer, "cfWaitingRoom"));
    }

    // Called: the stream says so, then ends, and the connection closes.
    inside.leave().await;
    proxy.tick().await;
    assert!(read_until(&mut page, &mut got, "\"admitted\":true"));
    assert!(
        read_until(&mut page, &mut got, "0\r\n\r\n"),
        "the last chunk"
    );
    let mut rest = Vec::new();
    assert!(page.read_to_end(&mut rest).is_ok(), "closed");
    eventually("the stream is counted off", || async {
        in_front(&proxy).await == (0, 1)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heads_the_front_door_does_not_claim_go_to_pingora_as_before() {
    let proxy = start("");
    assert!(proxy.visitor().get("/").await.reached_origin());
    let (_page, ticket) = wait_in_line(&proxy);
    let cookie = format!("Cookie: waitroom={ticket}\r\n");

    // A head in two pieces (a slow one): Pingora's stream, which keeps the connection.
    let mut split = connect(&proxy);
    split
        .write_all(b"GET /__waitroom/events HTTP/1.1\r\nHost: shop.example.com\r\n")
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    split.write_all(format!("{cookie}\r\n").as_bytes()).unwrap();
    let mut got = Vec::new();
    assert!(read_until(&mut split, &mut got, "data: "));
    let text = String::from_utf8_lossy(&got).into_owned();
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(text.contains("Connection: keep-alive"), "{text}");

    // Heads that are not a plain stream request, each answered by Pingora's path.
    let cases = [
        // A line that is no header, and no Host at all.
        "GET /__waitroom/events HTTP/1.1\r\nHost: shop.example.com\r\nno colon\r\n\r\n".to_owned(),
        format!("GET /__waitroom/events HTTP/1.1\r\n{cookie}\r\n"),
        // A body.
        format!(
            "GET /__waitroom/events HTTP/1.1\r\nHost: shop.example.com\r\n{cookie}\
             Content-Length: 3\r\n\r\nabc"
        ),
        // A second request after it.
        format!(
            "GET /__waitroom/events HTTP/1.1\r\nHost: shop.example.com\r\n{cookie}\r\n\
             GET / HTTP/1.1\r\nHost: shop.example.com\r\n\r\n"
        ),
        // HTTP/1.0, and another spelling of the path.
        format!("GET /__waitroom/events HTTP/1.0\r\nHost: shop.example.com\r\n{cookie}\r\n"),
        format!("GET /__waitroom/%65vents HTTP/1.1\r\nHost: shop.example.com\r\n{cookie}\r\n"),
        // Two hosts.
        format!(
            "GET /__waitroom/events HTTP/1.1\r\nHost: shop.example.com\r\n\
             Host: elsewhere.example\r\n{cookie}\r\n"
        ),
    ];
    for request in &cases {
        let mut stream = connect(&proxy);
        stream.write_all(request.as_bytes()).unwrap();
        let mut got = Vec::new();
        assert!(read_until(&mut stream, &mut got, "\r\n\r\n"), "{request:?}");
        let head = String::from_utf8_lossy(&got).into_owned();
        assert!(head.starts_with("HTTP/1."), "{request:?}: {head}");
        assert!(
            !head.contains("connection: close\r\ntransfer-encoding: chunked"),
            "{request:?} was served in front: {head}"
        );
    }
    assert_eq!(in_front(&proxy).await.1, 0, "none was claimed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_per_address_cap_holds_for_streams_served_in_front() {
    let proxy = start("max_event_streams_per_ip = 1");
    assert!(proxy.visitor().get("/").await.reached_origin());
    let (mut first, ticket) = wait_in_line(&proxy);
    first.write_all(stream_request(&ticket).as_bytes()).unwrap();
    let mut got = Vec::new();
    assert!(read_until(&mut first, &mut got, "data: "));
    // Another ticket from the same address: told to poll, and the connection closes.
    let (mut second, other_ticket) = wait_in_line(&proxy);
    second
        .write_all(stream_request(&other_ticket).as_bytes())
        .unwrap();
    let mut refused = Vec::new();
    let mut rest = Vec::new();
    assert!(read_until(&mut second, &mut refused, "\r\n\r\n"));
    let _ = second.read_to_end(&mut rest);
    let head = String::from_utf8_lossy(&refused).into_owned();
    assert!(head.starts_with("HTTP/1.1 204 No Content\r\n"), "{head}");
    assert!(
        head.contains("x-waitroom-stream: refused; reason=address"),
        "{head}"
    );
    assert!(head.contains("retry-after: 2"), "{head}");
    assert!(
        !head.to_ascii_lowercase().contains("content-length"),
        "{head}"
    );
    let metrics = proxy.metrics().await;
    assert!(
        metrics.contains(
            "waitroom_event_streams_refused_total{reason=\"address\",room=\"test-room\"} 1"
        ),
        "{metrics}"
    );
    assert_eq!(in_front(&proxy).await, (1, 2));
}
