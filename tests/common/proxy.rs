//! Starts the real proxy in-process on free ports in front of a stub origin, and a small HTTP
//! visitor that keeps its cookie like a browser would.

use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::time::Duration;

use waitroom::clock::{ManualClock, SharedClock, SystemClock};
use waitroom::config::Config;
use waitroom::config::model::Environment;
use waitroom::service::server::{RunOptions, Running, spawn};

use super::origin::StubOrigin;

pub const SECRET: &str = "test-secret-test-secret-test-secret!!";
pub const ADMIN_TOKEN: &str = "test-admin-token-test-admin-token!!";

pub struct NoEnvironment;

impl Environment for NoEnvironment {
    fn var(&self, _name: &str) -> Option<String> {
        None
    }
}

/// A port nothing listens on, and that this test process was not handed before: the kernel may
/// give a port just freed again, and a test taking two (listen and admin) got the same one twice.
pub fn free_port() -> u16 {
    static HANDED_OUT: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    loop {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut handed_out = HANDED_OUT.lock().unwrap();
        if !handed_out.contains(&port) {
            handed_out.push(port);
            return port;
        }
    }
}

/// An address where connections are refused for as long as this value lives. A port from
/// [`free_port`] is free again at once, so a test running beside this one may start listening on
/// it: a "dead" origin would then answer. This socket stays bound and never listens, which the
/// kernel refuses connections to and no other socket can bind.
pub struct RefusingPort {
    socket: tokio::net::TcpSocket,
    pub addr: SocketAddr,
}

impl RefusingPort {
    pub fn bind() -> Self {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = socket.local_addr().unwrap();
        Self { socket, addr }
    }

    /// Listens on the same port from now on (the origin comes back): connections are queued
    /// at once, whoever accepts them later. Call it inside a runtime.
    pub fn listen(self) -> std::net::TcpListener {
        self.socket.listen(1024).unwrap().into_std().unwrap()
    }
}

pub struct TestProxy {
    pub running: Running,
    /// Drives the proxy's time, unless it was started on the real clock.
    pub clock: Arc<ManualClock>,
    pub base: String,
    pub admin: String,
    pub port: u16,
    pub origin: StubOrigin,
    /// The file the proxy was loaded from (edit it, then reload).
    pub config_file: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

/// Extra TOML lines for each section of a test config.
#[derive(Clone, Copy)]
pub struct Sections<'a> {
    pub grace_period: &'a str,
    pub read_timeout: &'a str,
    pub listen: &'a str,
    pub origin: &'a str,
    pub room: &'a str,
    /// `[[rooms]]` tables written in place of the one `[room]` (then `room` is not used).
    pub rooms: Option<&'a str>,
    pub pass: &'a str,
    /// Whole sections after [admin].
    pub rest: &'a str,
}

impl Default for Sections<'_> {
    fn default() -> Self {
        Self {
            grace_period: "0s",
            read_timeout: "1s",
            listen: "",
            origin: "",
            room: "",
            rooms: None,
            pass: "",
            rest: "",
        }
    }
}

/// A config for the test proxy: `room` is extra TOML lines for the [room] section, `rest` extra
/// sections after it.
pub fn config_text(listen: u16, admin: u16, origin: SocketAddr, room: &str, rest: &str) -> String {
    config_with(
        listen,
        admin,
        origin,
        Sections {
            room,
            rest,
            ..Sections::default()
        },
    )
}

pub fn config_with(listen: u16, admin: u16, origin: SocketAddr, s: Sections) -> String {
    let Sections {
        grace_period,
        read_timeout,
        listen: listen_extra,
        origin: origin_extra,
        room,
        rooms,
        pass,
        rest,
    } = s;
    let mut defaults = String::new();
    for (key, value) in [("admission_interval", "20ms"), ("refresh_interval", "2s")] {
        if !room.contains(key) {
            defaults.push_str(&format!("{key} = \"{value}\"\n"));
        }
    }
    // Every test visitor comes from 127.0.0.1, and a crowd from one address is exactly what the
    // per-address limit refuses: off, unless a test brings its own [rate_limit].
    let rate_limit = if rest.contains("[rate_limit]") {
        ""
    } else {
        "[rate_limit]\ntickets_per_ip_per_minute = 0\nmax_live_tickets_per_ip = 0\n"
    };
    let room_tables = rooms.map_or_else(
        || format!("[room]\nid = \"test-room\"\nname = \"Test drop\"\n{defaults}{room}"),
        str::to_owned,
    );
    format!(
        r#"
[listen]
address = "127.0.0.1:{listen}"
threads = 2
grace_period = "{grace_period}"
{listen_extra}

[origin]
address = "{origin}"
connect_timeout = "1s"
read_timeout = "{read_timeout}"
{origin_extra}

{room_tables}

[pass]
secret = "{SECRET}"
cookie_secure = false
{pass}

[admin]
address = "127.0.0.1:{admin}"
token = "{ADMIN_TOKEN}"
{rest}
{rate_limit}
"#
    )
}

impl TestProxy {
    pub fn start(room: &str) -> Self {
        Self::start_with(room, "")
    }

    pub fn start_with(room: &str, rest: &str) -> Self {
        let origin = StubOrigin::start();
        Self::start_before(origin.addr, room, rest, origin)
    }

    /// A proxy on the driven clock with extra lines in any section; `origin_addr` is what the
    /// proxy connects to (something in front of `origin`, or `origin.addr`).
    pub fn start_sections(origin_addr: SocketAddr, origin: StubOrigin, s: Sections) -> Self {
        Self::launch(origin_addr, s, origin, false)
    }

    /// A proxy whose clock is driven by the test (`clock.advance`).
    pub fn start_before(
        origin_addr: SocketAddr,
        room: &str,
        rest: &str,
        origin: StubOrigin,
    ) -> Self {
        let s = Sections {
            room,
            rest,
            ..Sections::default()
        };
        Self::launch(origin_addr, s, origin, false)
    }

    /// A proxy on the real clock, for tests against a real Redis (which keeps real time).
    pub fn start_real_time(origin: &StubOrigin, room: &str, rest: &str) -> Self {
        let s = Sections {
            room,
            rest,
            ..Sections::default()
        };
        Self::launch(origin.addr, s, origin.clone(), true)
    }

    /// A proxy on the real clock with extra lines in any section.
    pub fn start_real_time_sections(origin: &StubOrigin, s: Sections) -> Self {
        Self::launch(origin.addr, s, origin.clone(), true)
    }

    /// `n` proxies on the real clock in front of one origin, sharing the Redis at `redis_url`
    /// (leader_ttl 1 s): `s.rest` follows the `[store]` section.
    pub fn sharing_redis(n: usize, redis_url: &str, s: Sections) -> Vec<Self> {
        let origin = StubOrigin::start();
        let rest = format!(
            "[store]\nbackend = \"redis\"\nurl = \"{redis_url}\"\nleader_ttl = \"1s\"\n\n{}",
            s.rest
        );
        (0..n)
            .map(|_| Self::start_real_time_sections(&origin, Sections { rest: &rest, ..s }))
            .collect()
    }

    fn launch(origin_addr: SocketAddr, s: Sections, origin: StubOrigin, real_time: bool) -> Self {
        let (listen, admin) = (free_port(), free_port());
        let dir = tempfile::tempdir().unwrap();
        let config_file = dir.path().join("room.toml");
        std::fs::write(&config_file, config_with(listen, admin, origin_addr, s)).unwrap();
        let (config, _) = Config::load(&config_file, &NoEnvironment, false).unwrap();
        let clock = ManualClock::starting_now();
        let run_clock: SharedClock = if real_time {
            Arc::new(SystemClock)
        } else {
            clock.clone()
        };
        let running = spawn(
            &config,
            RunOptions {
                clock: run_clock,
                seed: 7,
                redis_follows_clock: false,
                upgrade: false,
                ..RunOptions::default()
            },
        )
        .unwrap();
        wait_listening(listen);
        wait_listening(admin);
        Self {
            running,
            clock,
            base: format!("http://127.0.0.1:{listen}"),
            admin: format!("http://127.0.0.1:{admin}"),
            port: listen,
            origin,
            config_file,
            _dir: dir,
        }
    }

    /// A raw connection to the public listener, reads timing out after 8 s.
    pub fn connect_raw(&self) -> std::net::TcpStream {
        let stream = std::net::TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(8)))
            .unwrap();
        stream
    }

    /// The proxy with `room` and `listen` lines, before a stub origin of its own.
    pub fn start_room_listening(room: &str, listen: &str) -> Self {
        let origin = StubOrigin::start();
        Self::start_sections(
            origin.addr,
            origin,
            Sections {
                listen,
                room,
                ..Sections::default()
            },
        )
    }

    pub fn visitor(&self) -> Visitor {
        Visitor::new(&self.base)
    }

    pub async fn state(&self) -> serde_json::Value {
        admin_state(&self.admin).await
    }

    /// The admin listener's Prometheus text.
    pub async fn metrics(&self) -> String {
        reqwest::get(format!("{}/metrics", self.admin))
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }

    /// Runs one admission step now, instead of waiting for the loop.
    pub async fn tick(&self) {
        self.running.parts.admission.tick().await;
    }
}

/// The waiting-room cookie a raw answer's head sets (not one it clears).
pub fn ticket_in(head: &str) -> Option<String> {
    head.lines().find_map(|l| {
        let (name, value) = l.split_once(':')?;
        let value = name
            .eq_ignore_ascii_case("set-cookie")
            .then_some(value.trim())?
            .strip_prefix("waitroom=")?;
        Some(value.split(';').next()?.to_owned()).filter(|v| !v.is_empty())
    })
}

/// GET /admin/state of the admin listener at `admin` (http://host:port).
pub async fn admin_state(admin: &str) -> serde_json::Value {
    admin_get(admin, "/admin/state").await
}

/// `path` of the admin listener at `admin`, as JSON, with the bearer token.
pub async fn admin_get(admin: &str, path: &str) -> serde_json::Value {
    reqwest::Client::new()
        .get(format!("{admin}{path}"))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// A JSON merge patch of `path` on the admin listener at `admin`, with the bearer token.
pub async fn admin_patch(admin: &str, path: &str, patch: &'static str) -> reqwest::Response {
    reqwest::Client::new()
        .patch(format!("{admin}{path}"))
        .bearer_auth(ADMIN_TOKEN)
        .header("content-type", "application/merge-patch+json")
        .body(patch)
        .send()
        .await
        .unwrap()
}

pub fn wait_listening(port: u16) {
    for _ in 0..200 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    panic!("nothing listens on port {port}");
}

/// Polls `check` until it holds, for at most 10 s of real time (a loaded machine is slow).
pub async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    for _ in 0..500 {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("timed out waiting for: {what}");
}

/// A browser-like client: one cookie jar for the waiting-room cookie.
#[derive(Clone)]
pub struct Visitor {
    base: String,
    client: reqwest::Client,
    pub cookie: Option<String>,
    /// Sent as X-Forwarded-For: the visitor's address for a proxy that trusts 127.0.0.1.
    pub forwarded_for: Option<String>,
    /// Sent as Host: the site a browser would be on (the proxy's address otherwise).
    pub host: Option<String>,
}

pub struct Answer {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub body: String,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    pub fn set_cookies(&self) -> Vec<&str> {
        self.headers
            .get_all("set-cookie")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .collect()
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }

    pub fn reached_origin(&self) -> bool {
        self.body.starts_with("origin:")
    }
}

impl Visitor {
    pub fn new(base: &str) -> Self {
        Self {
            base: base.to_owned(),
            client: reqwest::Client::builder()
                .pool_max_idle_per_host(1)
                .build()
                .unwrap(),
            cookie: None,
            forwarded_for: None,
            host: None,
        }
    }

    pub async fn request(
        &mut self,
        method: reqwest::Method,
        path: &str,
        accept: Option<&str>,
    ) -> Answer {
        self.send(method, path, accept, None).await
    }

    /// POSTs a form body, as the waiting page's script does.
    pub async fn post_form(&mut self, path: &str, body: &str) -> Answer {
        let form = ("application/x-www-form-urlencoded", body.to_owned());
        self.send(
            reqwest::Method::POST,
            path,
            Some("application/json"),
            Some(form),
        )
        .await
    }

    async fn send(
        &mut self,
        method: reqwest::Method,
        path: &str,
        accept: Option<&str>,
        body: Option<(&str, String)>,
    ) -> Answer {
        let mut req = self.client.request(method, format!("{}{path}", self.base));
        if let Some((content_type, body)) = body {
            req = req.header("content-type", content_type).body(body);
        }
        if let Some(cookie) = &self.cookie {
            req = req.header("cookie", format!("waitroom={cookie}"));
        }
        if let Some(accept) = accept {
            req = req.header("accept", accept);
        }
        if let Some(address) = &self.forwarded_for {
            req = req.header("x-forwarded-for", address);
        }
        if let Some(host) = &self.host {
            req = req.header("host", host);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let body = resp.text().await.unwrap();
        let answer = Answer {
            status,
            headers,
            body,
        };
        for set in answer.set_cookies() {
            if let Some(rest) = set.strip_prefix("waitroom=") {
                let value = rest.split(';').next().unwrap_or("");
                let cleared = set.contains("Max-Age=0");
                self.cookie = (!cleared && !value.is_empty()).then(|| value.to_owned());
            }
        }
        answer
    }

    pub async fn get(&mut self, path: &str) -> Answer {
        self.request(reqwest::Method::GET, path, None).await
    }

    pub async fn get_json(&mut self, path: &str) -> Answer {
        self.request(reqwest::Method::GET, path, Some("application/json"))
            .await
    }

    pub async fn leave(&mut self) -> Answer {
        self.request(reqwest::Method::POST, "/__waitroom/leave", None)
            .await
    }
}
