#![allow(clippy::unwrap_used)]
//! Drop day without surprises (issue 23 items 1, 2): an origin whose name does not resolve, or
//! stops resolving, or that refuses connections. The visitor gets the branded page, never a
//! panic or an empty reply; the failure is counted, logged and alerted on; and a visitor
//! admitted by a request whose forward failed keeps its pass (its slot is counted).

mod common;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use common::origin::{StubOrigin, read_request};
use common::proxy::{
    NoEnvironment, RefusingPort, Sections, Visitor, admin_state, config_with, eventually,
    free_port, wait_listening,
};
use tokio::io::{AsyncWriteExt, BufReader};
use waitroom::config::Config;
use waitroom::proxy::origin::{Resolve, ResolveError};
use waitroom::service::server::{RunOptions, Running, StartError, spawn};

/// The access lines and the origin resolver's lines the proxies of this binary write, and every
/// panic: a request must never panic.
struct Captured {
    lines: Mutex<Vec<String>>,
    panics: Mutex<Vec<String>>,
}

fn captured() -> &'static Captured {
    static CAPTURED: OnceLock<&'static Captured> = OnceLock::new();
    CAPTURED.get_or_init(|| {
        let captured: &'static Captured = Box::leak(Box::new(Captured {
            lines: Mutex::new(Vec::new()),
            panics: Mutex::new(Vec::new()),
        }));
        log::set_logger(captured).unwrap();
        log::set_max_level(log::LevelFilter::Info);
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            captured.panics.lock().unwrap().push(info.to_string());
            previous(info);
        }));
        captured
    })
}

struct Fields(String);

impl<'kvs> log::kv::VisitSource<'kvs> for Fields {
    fn visit_pair(
        &mut self,
        key: log::kv::Key<'kvs>,
        value: log::kv::Value<'kvs>,
    ) -> Result<(), log::kv::Error> {
        self.0.push_str(&format!(" {key}={value}"));
        Ok(())
    }
}

impl log::Log for Captured {
    fn enabled(&self, metadata: &log::Metadata) -> bool {
        metadata.target().starts_with("waitroom")
    }

    fn log(&self, record: &log::Record) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let mut fields = Fields(String::new());
        let _ = record.key_values().visit(&mut fields);
        let line = format!(
            "{} {} {}{}",
            record.level(),
            record.target(),
            record.args(),
            fields.0
        );
        self.lines.lock().unwrap().push(line);
    }

    fn flush(&self) {}
}

impl Captured {
    fn lines_with(&self, needle: &str) -> Vec<String> {
        self.lines
            .lock()
            .unwrap()
            .iter()
            .filter(|l| l.contains(needle))
            .cloned()
            .collect()
    }
}

/// A DNS the test controls: the addresses it answers, or a failure when there are none.
#[derive(Clone, Default)]
struct Dns {
    answer: Arc<Mutex<Vec<SocketAddr>>>,
    lookups: Arc<AtomicUsize>,
}

impl Dns {
    fn answering(addresses: &[SocketAddr]) -> Self {
        let dns = Self::default();
        dns.set(addresses);
        dns
    }

    fn set(&self, addresses: &[SocketAddr]) {
        *self.answer.lock().unwrap() = addresses.to_vec();
    }
}

impl Resolve for Dns {
    fn lookup(&self, _host: &str, _port: u16) -> Result<Vec<SocketAddr>, ResolveError> {
        self.lookups.fetch_add(1, Ordering::Relaxed);
        let answer = self.answer.lock().unwrap().clone();
        if answer.is_empty() {
            return Err(ResolveError::Lookup(
                "failed to lookup address information: Name or service not known".into(),
            ));
        }
        Ok(answer)
    }
}

struct Proxy {
    running: Running,
    base: String,
    admin: String,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Proxy {
    async fn metrics(&self) -> String {
        reqwest::get(format!("{}/metrics", self.admin))
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }

    /// The value of the first series of `name` whose line contains `with`.
    async fn metric(&self, name: &str, with: &str) -> f64 {
        let text = self.metrics().await;
        text.lines()
            .filter(|l| l.starts_with(&format!("{name}{{")) || l.starts_with(&format!("{name} ")))
            .find(|l| l.contains(with))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {name} with {with} in\n{text}"))
    }

    fn visitor(&self) -> Visitor {
        Visitor::new(&self.base)
    }

    /// The access lines of this proxy's visitors.
    fn access_lines(&self) -> Vec<String> {
        captured()
            .lines_with(&format!("host=127.0.0.1:{}", self.port))
            .into_iter()
            .filter(|l| l.contains("waitroom::access"))
            .collect()
    }
}

/// The test config with `origin` as `origin.address`, as an operator would write it.
fn config(origin: &str, room: &str, origin_extra: &str) -> (Config, u16, u16, tempfile::TempDir) {
    let (listen, admin) = (free_port(), free_port());
    let placeholder: SocketAddr = "127.0.0.1:9".parse().unwrap();
    let text = config_with(
        listen,
        admin,
        placeholder,
        Sections {
            room,
            origin: origin_extra,
            ..Sections::default()
        },
    )
    .replace(
        "address = \"127.0.0.1:9\"",
        &format!("address = \"{origin}\""),
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("room.toml");
    std::fs::write(&path, text).unwrap();
    let (config, _) = Config::load(&path, &NoEnvironment, false).unwrap();
    (config, listen, admin, dir)
}

fn start(
    origin: &str,
    room: &str,
    origin_extra: &str,
    dns: &Dns,
    must_resolve: bool,
) -> Result<Proxy, StartError> {
    captured();
    let (config, listen, admin, dir) = config(origin, room, origin_extra);
    let running = spawn(
        &config,
        RunOptions {
            seed: 7,
            resolver: Arc::new(dns.clone()),
            origin_must_resolve: must_resolve,
            ..RunOptions::default()
        },
    )?;
    wait_listening(listen);
    wait_listening(admin);
    Ok(Proxy {
        running,
        base: format!("http://127.0.0.1:{listen}"),
        admin: format!("http://127.0.0.1:{admin}"),
        port: listen,
        _dir: dir,
    })
}

const ROOM: &str = "total_active_users = 100\nnew_users_per_minute = 1000";

fn run_check(origin: &str) -> std::process::Output {
    let (_, _, _, dir) = config(origin, ROOM, "");
    std::process::Command::new(env!("CARGO_BIN_EXE_waitroom-proxy"))
        .arg("--config")
        .arg(dir.path().join("room.toml"))
        .arg("--test")
        .env_remove("RUST_LOG")
        .output()
        .unwrap()
}

#[test]
fn the_check_fails_on_an_origin_name_that_does_not_resolve_naming_the_key() {
    let out = run_check("shop.invalid:80");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("origin.address \"shop.invalid:80\" does not resolve"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(
        stderr.lines().count() == 1,
        "a plain message, not a backtrace:\n{stderr}"
    );

    // A name that resolves passes, as does an address (nothing to look up).
    for origin in ["localhost:3000", "127.0.0.1:3000", "[::1]:3000"] {
        let out = run_check(origin);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{origin}: {stderr}");
        assert!(stderr.contains("configuration ok"), "{stderr}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_start_fails_on_an_origin_name_that_does_not_resolve() {
    let dns = Dns::default();
    let Err(e) = start("shop.invalid:80", ROOM, "", &dns, true) else {
        panic!("started with an origin that does not resolve");
    };
    assert!(matches!(e, StartError::OriginUnresolved { .. }), "{e}");
    let text = e.to_string();
    assert!(
        text.starts_with("origin.address \"shop.invalid:80\" does not resolve: failed to lookup"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_origin_name_that_stops_resolving_is_served_at_its_last_good_address() {
    let origin = StubOrigin::start();
    let dns = Dns::answering(&[origin.addr]);
    let proxy = start(
        "shop-b.test:80",
        ROOM,
        "resolve_interval = \"1s\"",
        &dns,
        true,
    )
    .unwrap();
    let mut v = proxy.visitor();
    assert!(v.get("/before").await.reached_origin());
    assert_eq!(proxy.metric("waitroom_origin_addresses", "").await, 1.0);

    // The Service is renamed: the name no longer resolves.
    dns.set(&[]);
    let lookups = dns.lookups.load(Ordering::Relaxed);
    eventually("two failed lookups", || async {
        dns.lookups.load(Ordering::Relaxed) >= lookups + 2
    })
    .await;
    eventually("the failures counted", || async {
        proxy
            .metric("waitroom_origin_resolve_failures_total", "")
            .await
            >= 2.0
    })
    .await;
    let during = v.get("/during").await;
    assert_eq!(during.status, 200);
    assert!(during.reached_origin(), "{}", during.body);
    let paths: Vec<String> = origin.requests().into_iter().map(|(p, _)| p).collect();
    assert_eq!(paths, ["/before", "/during"]);
    // Whatever address the name has, the origin is asked for the visitor's host.
    let host = format!("127.0.0.1:{}", proxy.port);
    for request in origin.received() {
        assert_eq!(request.header("host"), Some(host.as_str()));
    }
    assert_eq!(proxy.metric("waitroom_origin_addresses", "").await, 1.0);
    assert_eq!(
        proxy
            .metric("waitroom_upstream_errors_total", "kind=\"resolve\"")
            .await,
        0.0
    );
    // Warned once for the change of state, not at every failed lookup.
    let warnings = captured().lines_with("origin.address shop-b.test:80 does not resolve");
    assert_eq!(warnings.len(), 1, "{warnings:#?}");
    assert!(warnings[0].starts_with("WARN"), "{warnings:#?}");

    // It resolves again, elsewhere: the next lookup moves the proxy there.
    let moved = StubOrigin::start();
    dns.set(&[moved.addr]);
    eventually("the new address in use", || {
        let mut v = v.clone();
        let moved = moved.clone();
        async move {
            v.get("/after").await;
            !moved.requests().is_empty()
        }
    })
    .await;
    assert_eq!(
        captured()
            .lines_with("origin.address shop-b.test:80 resolves again")
            .len(),
        1
    );
    assert!(captured().panics.lock().unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_origin_that_never_resolved_gets_the_branded_502_counted_and_logged() {
    let dns = Dns::default();
    let proxy = start("shop-c.test:80", ROOM, "", &dns, false).unwrap();
    assert_eq!(proxy.metric("waitroom_origin_addresses", "").await, 0.0);
    let mut v = proxy.visitor();
    let answer = v.get("/shoes").await;
    assert_eq!(answer.status, 502, "{}", answer.body);
    assert!(
        answer.body.contains("The shop is not answering right now"),
        "{}",
        answer.body
    );
    assert_eq!(answer.header("cache-control"), Some("no-store"));
    // Admitted by this request: its pass comes with the page.
    assert!(v.cookie.is_some(), "{:?}", answer.set_cookies());
    assert_eq!(
        proxy
            .metric("waitroom_upstream_errors_total", "kind=\"resolve\"")
            .await,
        1.0
    );
    assert_eq!(
        proxy
            .metric("waitroom_upstream_errors_total", "kind=\"connect\"")
            .await,
        0.0
    );
    eventually("the access line", || async {
        !proxy.access_lines().is_empty()
    })
    .await;
    let lines = proxy.access_lines();
    assert_eq!(lines.len(), 1, "{lines:#?}");
    assert!(lines[0].contains("status=502"), "{}", lines[0]);
    assert!(lines[0].contains("decision=admitted"), "{}", lines[0]);
    assert!(lines[0].contains("path=/shoes"), "{}", lines[0]);

    // The visitor keeps its pass: the next request is a pass holder's, still a 502.
    let again = v.get("/shoes").await;
    assert_eq!(again.status, 502);
    assert_eq!(
        proxy
            .metric("waitroom_requests_total", "outcome=\"passed\"")
            .await,
        1.0
    );
    assert_eq!(admin_state(&proxy.admin).await["occupancy"], 1);
    let panics = captured().panics.lock().unwrap().clone();
    assert!(panics.is_empty(), "{panics:#?}");
    drop(proxy.running);
}

/// (path, the `waitroom` cookie if any) of every request an origin received.
type Seen = Arc<Mutex<Vec<(String, Option<String>)>>>;

/// An origin that answers 200 `origin:<path>` on the port that refused until now, recording the
/// `waitroom` cookie of each request.
fn origin_on(port: RefusingPort) -> Seen {
    let seen: Seen = Arc::default();
    let record = seen.clone();
    let listener = port.listen();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let record = record.clone();
                tokio::spawn(async move {
                    let (read, mut write) = stream.into_split();
                    let mut reader = BufReader::new(read);
                    while let Ok(Some(request)) = read_request(&mut reader).await {
                        let path = request.target().to_owned();
                        let cookie = request.header("cookie").and_then(|c| {
                            c.split(';').find_map(|kv| {
                                kv.trim().strip_prefix("waitroom=").map(str::to_owned)
                            })
                        });
                        record.lock().unwrap().push((path.clone(), cookie));
                        let text = format!("origin:{path}");
                        let response = format!(
                            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{text}",
                            text.len()
                        );
                        if write.write_all(response.as_bytes()).await.is_err() {
                            break;
                        }
                    }
                });
            }
        });
    });
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newcomer_admitted_by_a_refused_forward_keeps_its_pass() {
    // Nothing listens on the origin's port yet: the connection is refused.
    let refusing = RefusingPort::bind();
    let origin = refusing.addr.to_string();
    let dns = Dns::default();
    let proxy = start(
        &origin,
        "total_active_users = 1\nnew_users_per_minute = 1000",
        "",
        &dns,
        true,
    )
    .unwrap();
    assert_eq!(
        dns.lookups.load(Ordering::Relaxed),
        0,
        "an address is not looked up"
    );

    let mut v = proxy.visitor();
    let refused = v.get("/drop").await;
    assert_eq!(refused.status, 502, "{}", refused.body);
    assert!(refused.body.contains("your place or your pass is kept"));
    let pass = refused
        .set_cookies()
        .into_iter()
        .find(|c| c.starts_with("waitroom="))
        .map(str::to_owned);
    assert!(
        pass.as_deref()
            .is_some_and(|c| c.contains("HttpOnly") && !c.contains("Max-Age=0")),
        "{pass:?}"
    );
    assert_eq!(
        proxy
            .metric("waitroom_upstream_errors_total", "kind=\"connect\"")
            .await,
        1.0
    );
    assert_eq!(admin_state(&proxy.admin).await["occupancy"], 1);

    // The room is full with this one visitor: someone else waits.
    let mut other = proxy.visitor();
    let waiting = other.get("/drop").await;
    assert!(!waiting.reached_origin());
    assert_ne!(waiting.status, 502);

    // The origin is back: the visitor goes in on its pass, not as a newcomer.
    let seen = origin_on(refusing);
    let inside = v.get("/drop").await;
    assert_eq!(inside.status, 200, "{}", inside.body);
    assert_eq!(inside.body, "origin:/drop");
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0].0, "/drop");
    assert_eq!(
        seen[0].1.as_deref(),
        v.cookie.as_deref(),
        "the origin sees the pass the 502 gave"
    );
    assert_eq!(
        proxy
            .metric("waitroom_requests_total", "outcome=\"passed\"")
            .await,
        1.0
    );
    assert_eq!(
        proxy
            .metric("waitroom_admitted_total", "room=\"test-room\"")
            .await,
        1.0,
        "admitted once"
    );
    let state = admin_state(&proxy.admin).await;
    assert_eq!(state["occupancy"], 1);
    assert!(captured().panics.lock().unwrap().is_empty());
    tokio::time::sleep(Duration::from_millis(10)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newcomer_admitted_by_a_timed_out_forward_keeps_its_pass() {
    let origin = StubOrigin::start();
    let proxy = start(
        &origin.addr.to_string(),
        "total_active_users = 1\nnew_users_per_minute = 1000",
        "",
        &Dns::default(),
        true,
    )
    .unwrap();
    let mut v = proxy.visitor();
    // The stub takes 3 s over /slow; the test proxy waits 1 s (origin.read_timeout).
    let late = v.get("/slow").await;
    assert_eq!(late.status, 504, "{}", late.body);
    assert!(v.cookie.is_some(), "{:?}", late.set_cookies());
    let inside = v.get("/cart").await;
    assert!(inside.reached_origin(), "{}", inside.body);
    let seen = origin.requests();
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_eq!(seen[0], ("/slow".to_owned(), None));
    assert_eq!(seen[1].0, "/cart");
    assert_eq!(seen[1].1, v.cookie, "the pass the 504 gave");
    assert_eq!(
        proxy
            .metric("waitroom_admitted_total", "room=\"test-room\"")
            .await,
        1.0
    );
    assert_eq!(admin_state(&proxy.admin).await["occupancy"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_with_an_address_that_refuses_is_served_by_its_other_address() {
    let origin = StubOrigin::start();
    let dead = RefusingPort::bind();
    let dns = Dns::answering(&[dead.addr, origin.addr]);
    let proxy = start("shop-e.test:80", ROOM, "", &dns, true).unwrap();
    assert_eq!(proxy.metric("waitroom_origin_addresses", "").await, 2.0);
    // Turns go to both addresses; a refused connection is tried on the other one.
    for i in 0..4 {
        let answer = proxy.visitor().get(&format!("/{i}")).await;
        assert_eq!(answer.status, 200, "{}", answer.body);
    }
    assert_eq!(origin.requests().len(), 4);
    assert_eq!(
        proxy
            .metric("waitroom_upstream_errors_total", "kind=\"connect\"")
            .await,
        0.0
    );
}
