#![allow(clippy::unwrap_used)]
//! Visitors' connections over raw sockets against the real proxy and a recording origin: idle
//! keep-alive connections and slow request heads are closed on time while an active client
//! goes on, and a full listener closes its oldest idle connection for a newcomer or answers it
//! 503, never leaving it hanging; a visitor who goes away is not an error in the log.

mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::origin::StubOrigin;
use common::process::Proc;
use common::proxy::{
    Sections, TestProxy, admin_state, config_with, eventually, free_port, ticket_in, wait_listening,
};

const ROOM: &str = "total_active_users = 100000\nnew_users_per_minute = 1000000\n";

fn start(listen: &str) -> TestProxy {
    TestProxy::start_room_listening(ROOM, listen)
}

fn connect(proxy: &TestProxy) -> TcpStream {
    proxy.connect_raw()
}

/// One answer read off `stream`: (status, head, body); None if the connection ended first.
fn read_answer(stream: &mut TcpStream) -> Option<(u16, String, String)> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match stream.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => return None,
        }
    }
    let head = String::from_utf8(head).unwrap();
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    let length = head
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse::<usize>().ok())?
        })
        .unwrap_or(0);
    let mut body = vec![0; length];
    stream.read_exact(&mut body).ok()?;
    Some((status, head, String::from_utf8(body).unwrap()))
}

fn get(stream: &mut TcpStream, path: &str) -> Option<(u16, String, String)> {
    // One write: a request in pieces meets Nagle and the delayed ACK (40 ms each).
    let request = format!("GET {path} HTTP/1.1\r\nHost: shop.example.com\r\n\r\n");
    stream.write_all(request.as_bytes()).ok()?;
    read_answer(stream)
}

/// Whether the proxy ends `stream` within `within`, and what it sent before.
fn ends_within(stream: &mut TcpStream, within: Duration) -> Option<String> {
    stream.set_read_timeout(Some(within)).unwrap();
    let mut got = Vec::new();
    match stream.read_to_end(&mut got) {
        Ok(_) => Some(String::from_utf8_lossy(&got).into_owned()),
        Err(e) if e.kind() == ErrorKind::ConnectionReset => {
            Some(String::from_utf8_lossy(&got).into_owned())
        }
        Err(_) => None,
    }
}

/// A room of one, taken: everyone else waits.
const FULL_ROOM: &str = "total_active_users = 1\nnew_users_per_minute = 1\n";

fn origin_paths(proxy: &TestProxy) -> Vec<String> {
    proxy
        .origin
        .requests()
        .into_iter()
        .map(|(p, _)| p)
        .collect()
}

async fn connections(proxy: &TestProxy) -> serde_json::Value {
    proxy.state().await["listener"]["connections"].clone()
}

/// No connection open but the ones a test makes (the start's probe has gone).
async fn settled(proxy: &TestProxy) {
    eventually("no connection open", || async {
        connections(proxy).await["open"] == 0
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_keep_alive_connection_is_closed_and_an_active_one_is_not() {
    let proxy = start("keepalive_timeout = \"1s\"\nheader_timeout = \"5s\"");
    let mut idle = connect(&proxy);
    let (status, head, body) = get(&mut idle, "/idle").unwrap();
    assert_eq!(status, 200, "{head}{body}");
    assert_eq!(body, "origin:/idle");
    // Idle: closed after keepalive_timeout, without a word.
    let sent = ends_within(&mut idle, Duration::from_secs(5)).expect("closed while idle");
    assert_eq!(sent, "");
    // A client that keeps asking more often than that keeps its connection.
    let mut active = connect(&proxy);
    for i in 0..6 {
        let path = format!("/active{i}");
        let (status, _, body) = get(&mut active, &path).expect("the same connection answers");
        assert_eq!(
            (status, body.as_str()),
            (200, format!("origin:{path}").as_str())
        );
        std::thread::sleep(Duration::from_millis(400));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_head_sent_a_byte_at_a_time_is_closed_at_header_timeout() {
    let proxy = start("keepalive_timeout = \"30s\"\nheader_timeout = \"1s\"");
    // On a new connection, and on a kept-alive one after a first request.
    for reused in [false, true] {
        let mut slow = connect(&proxy);
        if reused {
            assert_eq!(get(&mut slow, "/first").unwrap().0, 200);
        }
        let mut writer = slow.try_clone().unwrap();
        let dribble = std::thread::spawn(move || {
            let head = b"GET /dribbled HTTP/1.1\r\nHost: shop.example.com\r\nX-Slow: ";
            let started = Instant::now();
            // Far longer than header_timeout, a byte every 100 ms: never a whole head.
            for byte in head.iter().chain(std::iter::repeat(&b'a')) {
                if started.elapsed() > Duration::from_secs(8) || writer.write_all(&[*byte]).is_err()
                {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        let sent = ends_within(&mut slow, Duration::from_secs(5)).expect("closed while dribbling");
        assert!(
            sent.starts_with("HTTP/1.1 408 "),
            "reused={reused}: {sent:?}"
        );
        // An active client meanwhile is answered as usual.
        let mut other = connect(&proxy);
        assert_eq!(get(&mut other, "/other").unwrap().0, 200);
        drop(slow);
        dribble.join().unwrap();
    }
    let paths = origin_paths(&proxy);
    assert!(!paths.iter().any(|p| p == "/dribbled"), "{paths:?}");
    assert_eq!(connections(&proxy).await["header_timeouts_total"], 2);
    // A connection that never sends anything is closed too.
    let mut silent = connect(&proxy);
    ends_within(&mut silent, Duration::from_secs(5)).expect("a silent connection is closed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_listener_closes_its_oldest_idle_connection_for_a_newcomer() {
    let proxy = start("max_connections = 3\nkeepalive_timeout = \"30s\"");
    settled(&proxy).await;
    let mut kept: Vec<TcpStream> = Vec::new();
    for i in 0..3 {
        let mut stream = connect(&proxy);
        assert_eq!(get(&mut stream, &format!("/kept{i}")).unwrap().0, 200);
        kept.push(stream);
    }
    let mut newcomer = connect(&proxy);
    let (status, _, body) = get(&mut newcomer, "/newcomer").expect("the newcomer is answered");
    assert_eq!((status, body.as_str()), (200, "origin:/newcomer"));
    // The oldest idle connection made room; the others still work.
    ends_within(&mut kept[0], Duration::from_secs(5)).expect("the oldest idle one is closed");
    assert_eq!(get(&mut kept[1], "/again").unwrap().0, 200);
    let stats = connections(&proxy).await;
    assert_eq!(stats["evicted_total"], 1, "{stats}");
    assert_eq!(stats["refused_total"], 0, "{stats}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newcomer_the_listener_has_no_room_for_gets_a_503_that_closes() {
    let proxy = start("max_connections = 2\nheader_timeout = \"20s\"");
    settled(&proxy).await;
    // Two connections in the middle of a head: busy, not idle, so nobody can be closed for the
    // newcomer.
    let mut busy: Vec<TcpStream> = (0..2).map(|_| connect(&proxy)).collect();
    for stream in &mut busy {
        stream.write_all(b"GET /busy HTTP/1.1\r\n").unwrap();
    }
    eventually("both counted", || async {
        connections(&proxy).await["open"] == 2
    })
    .await;
    let mut newcomer = connect(&proxy);
    let _ = newcomer.write_all(b"GET /newcomer HTTP/1.1\r\nHost: shop.example.com\r\n\r\n");
    let sent = ends_within(&mut newcomer, Duration::from_secs(5)).expect("answered and closed");
    let head = sent.split("\r\n\r\n").next().unwrap();
    assert!(head.starts_with("HTTP/1.1 503 "), "{sent}");
    assert!(head.contains("\r\nConnection: close"), "{sent}");
    assert!(head.contains("\r\nRetry-After: "), "{sent}");
    assert_eq!(connections(&proxy).await["refused_total"], 1);
    // Once a place is free, the next newcomer is served, and nothing refused reached the origin.
    drop(busy.pop());
    eventually("a place freed", || async {
        connections(&proxy).await["open"] == 1
    })
    .await;
    let mut next = connect(&proxy);
    assert_eq!(get(&mut next, "/next").unwrap().0, 200);
    assert_eq!(origin_paths(&proxy), ["/next"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_visitor_who_goes_away_is_not_an_error_in_the_log() {
    let origin = StubOrigin::start();
    let dir = tempfile::tempdir().unwrap();
    let (listen, admin) = (free_port(), free_port());
    let config = dir.path().join("room.toml");
    let sections = Sections {
        listen: "header_timeout = \"1s\"",
        room: FULL_ROOM,
        ..Sections::default()
    };
    std::fs::write(&config, config_with(listen, admin, origin.addr, sections)).unwrap();
    let proc = Proc::start(&config, &[], &[], &dir.path().join("proxy.log"));
    wait_listening(listen);
    wait_listening(admin);
    let connect = || {
        let stream = TcpStream::connect(("127.0.0.1", listen)).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(8)))
            .unwrap();
        stream
    };
    // Let in, then gone before the origin (3 s) answers.
    let mut admitted = connect();
    write!(
        admitted,
        "GET /slow HTTP/1.1\r\nHost: shop.example.com\r\n\r\n"
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    drop(admitted);
    // Waiting: the page's event stream opens, then the tab closes.
    let mut waiting = connect();
    let (status, head, _) = get(&mut waiting, "/").unwrap();
    assert_eq!(status, 200);
    let ticket = ticket_in(&head).expect("a ticket");
    write!(
        waiting,
        "GET /__waitroom/events HTTP/1.1\r\nHost: shop.example.com\r\nCookie: waitroom={ticket}\r\n\r\n"
    )
    .unwrap();
    let mut first = [0u8; 64];
    let n = waiting.read(&mut first).unwrap();
    assert!(first[..n].starts_with(b"HTTP/1.1 200"), "{:?}", &first[..n]);
    drop(waiting);
    // Half a head, then gone; and a head too slow for header_timeout.
    let mut half = connect();
    half.write_all(b"GET /half HTTP/1.1\r\nHost: sh").unwrap();
    drop(half);
    let mut slow = connect();
    slow.write_all(b"GET /slow-head HTTP/1.1\r\n").unwrap();
    ends_within(&mut slow, Duration::from_secs(5)).expect("cut off by header_timeout");
    // The origin's answer to the visitor who left has come and gone.
    std::thread::sleep(Duration::from_secs(4));
    let log = proc.log_text();
    assert!(
        log.contains("waitroom::access"),
        "the log is written: {log}"
    );
    let errors: Vec<&str> = log
        .lines()
        .filter(|l| l.split_whitespace().nth(1) == Some("ERROR"))
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crowd_larger_than_the_open_file_limit_comes_and_goes_and_a_newcomer_is_answered() {
    use tokio::io::AsyncWriteExt;
    const OPEN_FILES: u64 = 512;
    const CROWD: usize = 1200;
    let origin = StubOrigin::start();
    let dir = tempfile::tempdir().unwrap();
    let (listen, admin) = (free_port(), free_port());
    let config = dir.path().join("room.toml");
    // The crowd is many visitors, each holding its page's stream and so its connection: the
    // stream caps (per address, from one test address; in all, half the connections) would
    // answer most of them at once and free their connections, which is not what is tested here.
    let sections = Sections {
        room: FULL_ROOM,
        listen: "max_event_streams = 100000\nmax_event_streams_per_ip = 0",
        ..Sections::default()
    };
    std::fs::write(&config, config_with(listen, admin, origin.addr, sections)).unwrap();
    let proc = Proc::start_with_open_files(&config, OPEN_FILES, &dir.path().join("proxy.log"));
    wait_listening(listen);
    wait_listening(admin);
    let admin = format!("http://127.0.0.1:{admin}");
    let connect = || {
        let stream = TcpStream::connect(("127.0.0.1", listen)).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        stream
    };
    // The room is taken; each of the crowd waits with a ticket of its own.
    let mut line = connect();
    assert_eq!(get(&mut line, "/").unwrap().0, 200);
    let tickets: Vec<String> = (0..CROWD)
        .map(|_| ticket_in(&get(&mut line, "/").unwrap().1).expect("a ticket"))
        .collect();
    drop(line);
    // The crowd opens its waiting pages' event streams at once, and holds them.
    let arriving: Vec<_> = tickets
        .into_iter()
        .map(|ticket| {
            tokio::spawn(async move {
                let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", listen))
                    .await
                    .ok()?;
                let request = format!(
                    "GET /__waitroom/events HTTP/1.1\r\nHost: shop.example.com\r\n\
                     Cookie: waitroom={ticket}\r\n\r\n"
                );
                stream.write_all(request.as_bytes()).await.ok()?;
                Some(stream)
            })
        })
        .collect();
    let mut crowd = Vec::new();
    for task in arriving {
        crowd.extend(task.await.unwrap());
    }
    std::thread::sleep(Duration::from_secs(2));
    // The listener kept below the limit: the admin port (same process) still answers.
    let state = tokio::time::timeout(Duration::from_secs(10), admin_state(&admin))
        .await
        .expect("the admin port answers during the crowd");
    let stats = &state["listener"]["connections"];
    assert!(stats["refused_total"].as_u64().unwrap() > 0, "{stats}");
    assert_eq!(
        state["listener"]["open_files"]["soft"], OPEN_FILES,
        "{state}"
    );
    // The crowd leaves; a newcomer right after is answered.
    drop(crowd);
    let mut newcomer = connect();
    let (status, _, body) = get(&mut newcomer, "/").expect("the newcomer is answered");
    assert_eq!(status, 200);
    assert!(body.contains("Test drop"), "the waiting page");
    let log = proc.log_text();
    assert!(
        log.contains(&format!(
            "open-file limit: {OPEN_FILES} (hard {OPEN_FILES})"
        )),
        "{log}"
    );
}
