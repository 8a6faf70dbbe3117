#![allow(clippy::unwrap_used)]
//! The proxy as a service, with real processes: SIGTERM drains, the socket hand-over (SIGQUIT +
//! `--upgrade`, and SIGUSR2 starting the successor itself) keeps answering throughout, SIGHUP
//! and `POST /admin/reload` change the room without dropping a connection, and the logs.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::origin::StubOrigin;
use common::process::{Proc, exists, signal, wait_until};
use common::proxy::{
    ADMIN_TOKEN, Sections, TestProxy, Visitor, config_with, free_port, wait_listening,
};

/// A proxy process on fresh ports, its config in `dir`.
struct Setup {
    listen: u16,
    admin: u16,
    config: std::path::PathBuf,
}

impl Setup {
    fn new(dir: &Path, origin: &StubOrigin, s: Sections) -> Self {
        let (listen, admin) = (free_port(), free_port());
        let config = dir.join("room.toml");
        std::fs::write(&config, config_with(listen, admin, origin.addr, s)).unwrap();
        Self {
            listen,
            admin,
            config,
        }
    }

    fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.listen)
    }

    fn admin(&self) -> String {
        format!("http://127.0.0.1:{}", self.admin)
    }

    fn start(&self, args: &[&str], env: &[(&str, &str)], log: &str) -> Proc {
        let dir = self.config.parent().unwrap();
        let proc = Proc::start(&self.config, args, env, &dir.join(log));
        wait_listening(self.listen);
        wait_listening(self.admin);
        proc
    }

    async fn state(&self) -> serde_json::Value {
        reqwest::Client::new()
            .get(format!("{}/admin/state", self.admin()))
            .bearer_auth(ADMIN_TOKEN)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }
}

/// Requests on fresh connections and on one kept-alive client, every 10 ms, until stopped:
/// (answered, failed).
struct Traffic {
    stop: Arc<AtomicBool>,
    ok: Arc<AtomicUsize>,
    failed: Arc<AtomicUsize>,
    /// Requests on a kept connection that met its close and were sent again.
    retried: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<Vec<String>>,
}

impl Traffic {
    fn start(base: String) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let ok = Arc::new(AtomicUsize::new(0));
        let failed = Arc::new(AtomicUsize::new(0));
        let retried = Arc::new(AtomicUsize::new(0));
        let (s, o, f, r) = (stop.clone(), ok.clone(), failed.clone(), retried.clone());
        let task = tokio::spawn(async move {
            let kept = reqwest::Client::new();
            // No idle connection kept: a new connection (a new accept) per request.
            let fresh = reqwest::Client::builder()
                .pool_max_idle_per_host(0)
                .build()
                .unwrap();
            let mut errors = Vec::new();
            let mut i = 0;
            while !s.load(Ordering::Relaxed) {
                let client = if i % 2 == 0 { &kept } else { &fresh };
                let url = format!("{base}/p/{i}");
                let mut sent = client.get(&url).send().await;
                // When the old process starts draining it closes its idle keep-alive
                // connections; a request sent on one at that very moment meets the close, and
                // an HTTP client retries an idempotent request on a new connection, as browsers
                // do (RFC 9112, 9.3.1). Counted: it may happen only at that moment.
                if sent.is_err() && i % 2 == 0 {
                    r.fetch_add(1, Ordering::Relaxed);
                    sent = fresh.get(&url).send().await;
                }
                match sent {
                    Ok(r) if r.status() == 200 => {
                        o.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(r) => {
                        f.fetch_add(1, Ordering::Relaxed);
                        errors.push(format!("request {i}: status {}", r.status()));
                    }
                    Err(e) => {
                        f.fetch_add(1, Ordering::Relaxed);
                        errors.push(format!("request {i}: {e}"));
                    }
                }
                i += 1;
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            errors
        });
        Self {
            stop,
            ok,
            failed,
            retried,
            task,
        }
    }

    fn answered(&self) -> usize {
        self.ok.load(Ordering::Relaxed)
    }

    async fn finish(self) -> (usize, Vec<String>) {
        self.stop.store(true, Ordering::Relaxed);
        let errors = self.task.await.unwrap();
        assert_eq!(self.failed.load(Ordering::Relaxed), errors.len());
        let retried = self.retried.load(Ordering::Relaxed);
        assert!(retried <= 1, "{retried} requests met a closing connection");
        (self.ok.load(Ordering::Relaxed), errors)
    }
}

const OPEN_ROOM: &str = "total_active_users = 100000\nnew_users_per_minute = 1000000";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_lets_requests_in_flight_finish_then_exits() {
    let dir = tempfile::tempdir().unwrap();
    let origin = StubOrigin::start();
    let setup = Setup::new(
        dir.path(),
        &origin,
        Sections {
            grace_period: "4s",
            read_timeout: "10s",
            room: OPEN_ROOM,
            ..Sections::default()
        },
    );
    let mut proc = setup.start(&[], &[], "proxy.log");
    let slow = tokio::spawn({
        let base = setup.base();
        async move {
            let answer = reqwest::get(format!("{base}/slow")).await.unwrap();
            (answer.status(), answer.text().await.unwrap())
        }
    });
    // The origin holds /slow for 3 s: it is in flight when SIGTERM comes.
    tokio::time::sleep(Duration::from_millis(700)).await;
    let term_at = Instant::now();
    proc.signal("TERM");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let late = reqwest::Client::builder()
        .timeout(Duration::from_secs(1))
        .build()
        .unwrap()
        .get(format!("{}/", setup.base()))
        .send()
        .await;
    assert!(late.is_err(), "a new request is not served while draining");
    let (status, body) = slow.await.unwrap();
    assert_eq!(status, 200);
    assert_eq!(body, "origin:/slow", "the request in flight finished");
    let exit = tokio::task::spawn_blocking(move || {
        let status = proc.wait_exit(Duration::from_secs(15));
        (status, proc)
    })
    .await
    .unwrap();
    let (status, proc) = exit;
    let status = status.unwrap_or_else(|| panic!("still running: {}", proc.log_text()));
    assert!(status.success(), "{status}: {}", proc.log_text());
    assert!(
        term_at.elapsed() >= Duration::from_millis(3500),
        "it waited the grace period"
    );
}

fn pid_in(path: &Path) -> Option<u32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigquit_hands_the_sockets_to_a_process_started_with_upgrade() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("upgrade.sock");
    let pid_file = dir.path().join("waitroom.pid");
    let listen = format!(
        "upgrade_socket = \"{}\"\npid_file = \"{}\"",
        socket.display(),
        pid_file.display()
    );
    let origin = StubOrigin::start();
    let setup = Setup::new(
        dir.path(),
        &origin,
        Sections {
            grace_period: "1s",
            listen: &listen,
            room: OPEN_ROOM,
            ..Sections::default()
        },
    );
    let mut old = setup.start(&[], &[], "old.log");
    assert_eq!(pid_in(&pid_file), Some(old.pid()));
    let before = setup.state().await["instance"].clone();
    let traffic = Traffic::start(setup.base());
    tokio::time::sleep(Duration::from_millis(300)).await;

    // The new process waits for the sockets; the old one sends them on SIGQUIT.
    let new = Proc::start(
        &setup.config,
        &["--upgrade"],
        &[],
        &dir.path().join("new.log"),
    );
    assert!(
        wait_until(Duration::from_secs(5), || socket.exists()),
        "the new process listens on the upgrade socket: {}",
        new.log_text()
    );
    old.signal("QUIT");
    let exit = tokio::task::spawn_blocking(move || {
        let status = old.wait_exit(Duration::from_secs(20));
        (status, old)
    })
    .await
    .unwrap();
    let (status, old) = exit;
    assert!(
        status.is_some_and(|s| s.success()),
        "the old process drains and exits: {}",
        old.log_text()
    );
    let before_exit = traffic.answered();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (answered, errors) = traffic.finish().await;
    assert!(errors.is_empty(), "{errors:?}\n{}", new.log_text());
    assert!(
        before_exit > 20,
        "only {before_exit} answers during the hand-over"
    );
    assert!(answered > before_exit, "the new process answers alone");
    assert_eq!(pid_in(&pid_file), Some(new.pid()), "the pid file follows");
    let after = setup.state().await["instance"].clone();
    assert_ne!(before, after, "the admin port moved to the new process too");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigusr2_starts_the_successor_itself_unless_it_cannot_start() {
    let dir = tempfile::tempdir().unwrap();
    let origin = StubOrigin::start();
    // As under systemd: the socket and the pid file default into RUNTIME_DIRECTORY.
    let runtime_dir = dir.path().join("run");
    std::fs::create_dir(&runtime_dir).unwrap();
    let runtime_text = runtime_dir.to_str().unwrap();
    let pid_file = runtime_dir.join("waitroom.pid");
    let setup = Setup::new(
        dir.path(),
        &origin,
        Sections {
            grace_period: "1s",
            room: OPEN_ROOM,
            ..Sections::default()
        },
    );
    let env = [("RUNTIME_DIRECTORY", runtime_text)];
    let mut old = setup.start(&[], &env, "old.log");
    assert_eq!(pid_in(&pid_file), Some(old.pid()));

    // A successor that cannot start (a broken file) changes nothing.
    let good = std::fs::read_to_string(&setup.config).unwrap();
    std::fs::write(&setup.config, good.replace("[room]", "[rooom]")).unwrap();
    old.signal("USR2");
    assert!(
        wait_until(Duration::from_secs(5), || old
            .log_text()
            .contains("successor failed to start")),
        "{}",
        old.log_text()
    );
    assert!(old.alive());
    assert_eq!(pid_in(&pid_file), Some(old.pid()));
    assert_eq!(
        reqwest::get(format!("{}/", setup.base()))
            .await
            .unwrap()
            .status(),
        200
    );

    std::fs::write(&setup.config, good).unwrap();
    let before = setup.state().await["instance"].clone();
    let traffic = Traffic::start(setup.base());
    tokio::time::sleep(Duration::from_millis(300)).await;
    old.signal("USR2");
    let exit = tokio::task::spawn_blocking(move || {
        let status = old.wait_exit(Duration::from_secs(20));
        (status, old)
    })
    .await
    .unwrap();
    let (status, old) = exit;
    assert!(status.is_some_and(|s| s.success()), "{}", old.log_text());
    let before_exit = traffic.answered();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (answered, errors) = traffic.finish().await;
    let successor = pid_in(&pid_file).unwrap();
    // The successor is not our child: stop it by its pid whatever the outcome.
    struct Stop(u32);
    impl Drop for Stop {
        fn drop(&mut self) {
            if exists(self.0) {
                signal(self.0, "KILL");
            }
        }
    }
    let _stop = Stop(successor);
    assert!(errors.is_empty(), "{errors:?}\n{}", old.log_text());
    assert!(
        before_exit > 20,
        "only {before_exit} answers during the hand-over"
    );
    assert!(answered > before_exit, "the successor answers alone");
    assert_ne!(successor, old.pid());
    assert!(exists(successor));
    assert_ne!(setup.state().await["instance"], before);
    signal(successor, "TERM");
    assert!(
        wait_until(Duration::from_secs(10), || !exists(successor)),
        "the successor stops on SIGTERM like any proxy"
    );
}

/// One HTTP/1.1 exchange on an open connection: (status, body).
fn exchange(stream: &mut TcpStream, path: &str) -> (u16, String) {
    write!(stream, "GET {path} HTTP/1.1\r\nHost: shop.test\r\n\r\n").unwrap();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut status_line = String::new();
    reader.read_line(&mut status_line).unwrap();
    let status = status_line
        .split_whitespace()
        .nth(1)
        .unwrap_or_else(|| panic!("no status line: {status_line:?}"))
        .parse()
        .unwrap();
    let mut length = 0;
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().unwrap();
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).unwrap();
    (status, String::from_utf8(body).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_reloads_the_room_without_dropping_a_connection() {
    let dir = tempfile::tempdir().unwrap();
    let origin = StubOrigin::start();
    let setup = Setup::new(
        dir.path(),
        &origin,
        Sections {
            room: "total_active_users = 5\nnew_users_per_minute = 100",
            ..Sections::default()
        },
    );
    let proc = setup.start(&[], &[], "proxy.log");
    let mut stream = TcpStream::connect(("127.0.0.1", setup.listen)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let stream = tokio::task::spawn_blocking(move || {
        assert_eq!(exchange(&mut stream, "/one"), (200, "origin:/one".into()));
        stream
    })
    .await
    .unwrap();

    let text = std::fs::read_to_string(&setup.config).unwrap();
    std::fs::write(
        &setup.config,
        text.replace("total_active_users = 5", "total_active_users = 9"),
    )
    .unwrap();
    proc.signal("HUP");
    let mut reloaded = false;
    for _ in 0..100 {
        if setup.state().await["total_active_users"] == 9 {
            reloaded = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(reloaded, "{}", proc.log_text());
    let mut stream = stream;
    let second = tokio::task::spawn_blocking(move || exchange(&mut stream, "/two"))
        .await
        .unwrap();
    assert_eq!(
        second,
        (200, "origin:/two".into()),
        "the same connection still works"
    );
    assert!(proc.log_text().contains("room settings reloaded"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_reload_applies_the_room_and_names_what_needs_a_restart() {
    let proxy = TestProxy::start("total_active_users = 5\nnew_users_per_minute = 100");
    let reload = || async {
        let answer = reqwest::Client::new()
            .post(format!("{}/admin/reload", proxy.admin))
            .bearer_auth(ADMIN_TOKEN)
            .send()
            .await
            .unwrap();
        let status = answer.status().as_u16();
        (status, answer.json::<serde_json::Value>().await.unwrap())
    };
    let unauthorised = reqwest::Client::new()
        .post(format!("{}/admin/reload", proxy.admin))
        .send()
        .await
        .unwrap();
    assert_eq!(unauthorised.status(), 401);

    let text = std::fs::read_to_string(&proxy.config_file).unwrap();
    let edited = text
        .replace("total_active_users = 5", "total_active_users = 7")
        .replace("threads = 2", "threads = 3");
    std::fs::write(&proxy.config_file, &edited).unwrap();
    let (status, body) = reload().await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["room"]["total_active_users"], 7);
    assert_eq!(body["needs_restart"], serde_json::json!(["listen"]));
    assert_eq!(proxy.state().await["total_active_users"], 7);

    // Invalid, or a key that cannot change live: refused whole, nothing applied.
    std::fs::write(
        &proxy.config_file,
        edited.replace("total_active_users = 7", "total_active_users = 0"),
    )
    .unwrap();
    let (status, body) = reload().await;
    assert_eq!(status, 400);
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .starts_with("room.total_active_users")
    );
    std::fs::write(
        &proxy.config_file,
        edited
            .replace("total_active_users = 7", "total_active_users = 8")
            .replace("id = \"test-room\"", "id = \"other-room\""),
    )
    .unwrap();
    let (status, body) = reload().await;
    assert_eq!(status, 400);
    assert!(body["error"].as_str().unwrap().starts_with("room.id"));
    assert_eq!(proxy.state().await["total_active_users"], 7);
}

fn access_lines(log: &str) -> Vec<serde_json::Value> {
    log.lines()
        .map(|line| {
            serde_json::from_str::<serde_json::Value>(line)
                .unwrap_or_else(|e| panic!("not one JSON object per line ({e}): {line}"))
        })
        .filter(|v| v["target"] == "waitroom::access")
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_logs_carry_one_access_line_per_request_with_its_decision() {
    let dir = tempfile::tempdir().unwrap();
    let origin = StubOrigin::start();
    let setup = Setup::new(
        dir.path(),
        &origin,
        Sections {
            room: "path = \"/shop\"\ntotal_active_users = 1\nnew_users_per_minute = 1000\n\
                   bypass = [\"/shop/static/*\"]",
            rest: "[log]\nformat = \"json\"",
            ..Sections::default()
        },
    );
    let mut proc = setup.start(&[], &[("RUST_LOG", "info")], "proxy.log");
    let mut first = Visitor::new(&setup.base());
    assert!(first.get("/shop/a").await.reached_origin()); // admitted
    assert!(first.get("/shop/b").await.reached_origin()); // passed
    let mut second = Visitor::new(&setup.base());
    assert!(!second.get("/shop/c").await.reached_origin()); // queued
    second.get("/shop/static/x.css").await; // bypassed
    second.get("/").await; // unprotected
    second.get("/__waitroom/status").await; // reserved
    let changed = reqwest::Client::new()
        .put(format!("{}/admin/config", setup.admin()))
        .bearer_auth(ADMIN_TOKEN)
        .body(r#"{"queueing_method": "reject"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(changed.status(), 200);
    assert_eq!(Visitor::new(&setup.base()).get("/shop/d").await.status, 200); // rejected
    proc.signal("TERM");
    proc.wait_exit(Duration::from_secs(10)).unwrap();

    let lines = access_lines(&proc.log_text());
    let decision_of = |path: &str| {
        lines
            .iter()
            .find(|l| l["path"] == path)
            .unwrap_or_else(|| panic!("no access line for {path}: {lines:?}"))
            .clone()
    };
    for (path, decision) in [
        ("/shop/a", "admitted"),
        ("/shop/b", "passed"),
        ("/shop/c", "queued"),
        ("/shop/static/x.css", "bypassed"),
        ("/", "unprotected"),
        ("/__waitroom/status", "reserved"),
        ("/shop/d", "rejected"),
    ] {
        let line = decision_of(path);
        assert_eq!(line["decision"], decision, "{line}");
        assert_eq!(line["msg"], decision);
        assert_eq!(line["level"], "INFO");
        assert_eq!(line["method"], "GET");
        assert_eq!(line["status"], 200);
        assert_eq!(line["proto"], "HTTP/1.1");
        assert!(line["ms"].is_u64() && line["ts"].is_string());
    }
    assert_eq!(decision_of("/shop/a")["origin_status"], 200);
    assert_eq!(lines.len(), 7, "exactly one line per request: {lines:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_level_comes_from_rust_log_and_the_access_log_can_be_off() {
    let dir = tempfile::tempdir().unwrap();
    let origin = StubOrigin::start();
    // Text, RUST_LOG=warn: the start-up warning only, no info line, no access line.
    let warn_dir = dir.path().join("warn");
    std::fs::create_dir(&warn_dir).unwrap();
    let setup = Setup::new(
        &warn_dir,
        &origin,
        Sections {
            room: OPEN_ROOM,
            rest: "[store]\non_error = \"open\"",
            ..Sections::default()
        },
    );
    let mut proc = setup.start(&[], &[("RUST_LOG", "warn")], "proxy.log");
    Visitor::new(&setup.base()).get("/").await;
    proc.signal("TERM");
    proc.wait_exit(Duration::from_secs(10)).unwrap();
    let log = proc.log_text();
    assert!(
        log.lines()
            .any(|l| l.contains(" WARN ") && l.contains("on_error")),
        "{log}"
    );
    assert!(
        !log.contains(" INFO ") && !log.contains("waitroom::access"),
        "{log}"
    );
    assert!(!log.trim_start().starts_with('{'), "text, not JSON");

    // JSON, access = false: info lines, none of them an access line.
    let off_dir = dir.path().join("off");
    std::fs::create_dir(&off_dir).unwrap();
    let setup = Setup::new(
        &off_dir,
        &origin,
        Sections {
            room: OPEN_ROOM,
            rest: "[log]\nformat = \"json\"\naccess = false",
            ..Sections::default()
        },
    );
    let mut proc = setup.start(&[], &[], "proxy.log");
    Visitor::new(&setup.base()).get("/").await;
    proc.signal("TERM");
    proc.wait_exit(Duration::from_secs(10)).unwrap();
    let log = proc.log_text();
    assert!(access_lines(&log).is_empty(), "{log}");
    assert!(
        log.contains("\"level\":\"INFO\""),
        "default level info: {log}"
    );
}
