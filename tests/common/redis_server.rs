//! A real `redis-server` for one test: on a free port, killed on drop. Never the shared Redis on
//! port 6379.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct RedisServer {
    port: u16,
    /// Set for a server that keeps its data (append-only file) across restarts.
    dir: Option<tempfile::TempDir>,
    /// Where any other server writes what it must (a replica's copy of its master's data):
    /// never the directory the tests run in.
    scratch: tempfile::TempDir,
    /// Set for a server that only speaks TLS: (certificate, key, CA certificate).
    tls: Option<(PathBuf, PathBuf, PathBuf)>,
    /// A node of a Redis Cluster.
    cluster: bool,
    /// Further arguments (a replica's `--replicaof`).
    extra: Vec<String>,
    access: Access,
    child: Option<Child>,
}

/// Who may use a server.
#[derive(Clone)]
enum Access {
    Anyone,
    /// `--requirepass`: the default user's password.
    Password(String),
    /// An ACL user allowed everything; the default user is off.
    User {
        name: String,
        password: String,
    },
}

impl Access {
    fn server_args(&self) -> Vec<String> {
        match self {
            Access::Anyone => Vec::new(),
            Access::Password(password) => vec!["--requirepass".into(), password.clone()],
            Access::User { name, password } => [
                "--user",
                "default",
                "off",
                "--user",
                name,
                "on",
                &format!(">{password}"),
                "~*",
                "&*",
                "+@all",
            ]
            .map(String::from)
            .to_vec(),
        }
    }

    /// The AUTH command the tests' own connections start with.
    fn auth(&self) -> Option<Vec<&str>> {
        match self {
            Access::Anyone => None,
            Access::Password(password) => Some(vec!["AUTH", password]),
            Access::User { name, password } => Some(vec!["AUTH", name, password]),
        }
    }
}

impl RedisServer {
    /// A server without persistence: a restart loses everything.
    pub fn start() -> Self {
        Self::launch(None, None)
    }

    /// A server that asks every client for this password (`--requirepass`).
    pub fn start_with_password(password: &str) -> Self {
        Self::launch_with(None, None, Access::Password(password.into()))
    }

    /// A server with one ACL user, allowed everything, and no default user.
    pub fn start_with_user(name: &str, password: &str) -> Self {
        let access = Access::User {
            name: name.into(),
            password: password.into(),
        };
        Self::launch_with(None, None, access)
    }

    /// A server that writes every change to an append-only file: a restart keeps the data.
    pub fn start_persistent() -> Self {
        Self::launch(Some(tempfile::tempdir().expect("temp dir")), None)
    }

    /// A server that only accepts TLS, with this certificate and key (clients not checked).
    pub fn start_tls(cert: PathBuf, key: PathBuf, ca: PathBuf) -> Self {
        Self::launch(None, Some((cert, key, ca)))
    }

    fn launch(dir: Option<tempfile::TempDir>, tls: Option<(PathBuf, PathBuf, PathBuf)>) -> Self {
        Self::launch_with(dir, tls, Access::Anyone)
    }

    fn launch_with(
        dir: Option<tempfile::TempDir>,
        tls: Option<(PathBuf, PathBuf, PathBuf)>,
        access: Access,
    ) -> Self {
        Self::launch_with_args(dir, tls, access, Vec::new())
    }

    /// A replica of `master` (without persistence, like `start`).
    pub fn start_replica_of(master: &RedisServer) -> Self {
        let replica_of = ["--replicaof", "127.0.0.1", &master.port.to_string()].map(String::from);
        Self::launch_with_args(None, None, Access::Anyone, replica_of.to_vec())
    }

    fn launch_with_args(
        dir: Option<tempfile::TempDir>,
        tls: Option<(PathBuf, PathBuf, PathBuf)>,
        access: Access,
        extra: Vec<String>,
    ) -> Self {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let mut server = Self {
            port,
            dir,
            scratch: tempfile::tempdir().expect("temp dir"),
            tls,
            cluster: false,
            extra,
            access,
            child: None,
        };
        server.spawn();
        server
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    fn spawn(&mut self) {
        let port = self.port.to_string();
        let mut cmd = Command::new("redis-server");
        cmd.args([
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--protected-mode",
            "no",
        ])
        .args(["--loglevel", "warning"]);
        match &self.tls {
            Some((cert, key, ca)) => {
                cmd.args([
                    "--port",
                    "0",
                    "--tls-port",
                    &port,
                    "--tls-auth-clients",
                    "no",
                ])
                .arg("--tls-cert-file")
                .arg(cert)
                .arg("--tls-key-file")
                .arg(key)
                .arg("--tls-ca-cert-file")
                .arg(ca);
            }
            None => {
                cmd.args(["--port", &port]);
            }
        }
        match &self.dir {
            Some(dir) => {
                cmd.args(["--appendonly", "yes", "--appendfsync", "always", "--dir"])
                    .arg(dir.path());
            }
            None => {
                cmd.args(["--appendonly", "no", "--dir"])
                    .arg(self.scratch.path());
            }
        }
        cmd.args(self.access.server_args());
        cmd.args(&self.extra);
        if self.cluster {
            cmd.args([
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                "nodes.conf",
            ]);
        }
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let child = match cmd.spawn() {
            Ok(child) => child,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                panic!("redis-server not found: install it (apt-get install -y redis-server)")
            }
            Err(e) => panic!("cannot start redis-server: {e}"),
        };
        self.child = Some(child);
        self.wait_until_ready();
    }

    fn wait_until_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if self.answers_ping() {
                return;
            }
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                panic!("redis-server on port {} exited: {status}", self.port);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("redis-server on port {} does not answer PING", self.port);
    }

    /// Answers PING; a TLS server only has to accept connections.
    fn answers_ping(&self) -> bool {
        let Ok(mut stream) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        if self.tls.is_some() {
            return true;
        }
        let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
        let mut request = self.access.auth().map(|a| resp(&a)).unwrap_or_default();
        request.push_str(&resp(&["PING"]));
        let mut answer = Vec::new();
        let mut buf = [0u8; 64];
        stream.write_all(request.as_bytes()).is_ok()
            && loop {
                match stream.read(&mut buf) {
                    Ok(n) if n > 0 => answer.extend_from_slice(&buf[..n]),
                    _ => break false,
                }
                if answer.ends_with(b"+PONG\r\n") {
                    break true;
                }
            }
    }

    /// Runs one command on the server and returns its raw answer (tests' own checks).
    pub fn command(&self, args: &[&str]) -> String {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).expect("redis answers");
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout set");
        if let Some(auth) = self.access.auth() {
            stream.write_all(resp(&auth).as_bytes()).expect("AUTH sent");
            let mut ok = [0u8; 5];
            stream.read_exact(&mut ok).expect("AUTH answered");
            assert_eq!(&ok, b"+OK\r\n", "AUTH refused");
        }
        stream
            .write_all(resp(args).as_bytes())
            .expect("request sent");
        let mut answer = Vec::new();
        let mut buf = [0u8; 65536];
        loop {
            let n = stream.read(&mut buf).expect("answer read");
            answer.extend_from_slice(&buf[..n]);
            if n == 0 || complete(&answer) {
                break;
            }
        }
        String::from_utf8_lossy(&answer).into_owned()
    }

    /// Kills the server at once, as a crash would.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again on the same port: with its data if it is persistent, empty
    /// otherwise.
    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
    }

    /// A replica that lags from now on: it runs and answers (its Sentinels see it up, and may
    /// promote it), but receives none of its master's writes. Its link to the master is cut and
    /// cannot come back: it now offers the master a password the master does not have, which
    /// every reconnection fails on ("Unable to AUTH to MASTER"). Returns once the master has
    /// lost it.
    pub fn stop_replicating(&self, master: &RedisServer) {
        let set = self.command(&["CONFIG", "SET", "masterauth", "not-the-masters-password"]);
        assert!(set.starts_with("+OK"), "{set}");
        self.command(&["CLIENT", "KILL", "TYPE", "master"]);
        let deadline = Instant::now() + Duration::from_secs(10);
        while !master
            .command(&["INFO", "replication"])
            .contains("connected_slaves:0")
        {
            assert!(Instant::now() < deadline, "the replica is still connected");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// A field of `INFO replication` as a number (`master_repl_offset`, `slave_repl_offset`).
    pub fn replication(&self, field: &str) -> Option<u64> {
        self.command(&["INFO", "replication"])
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{field}:")))
            .and_then(|v| v.trim().parse().ok())
    }
}

/// A Redis Cluster of a few nodes on free ports, the slots shared evenly among them.
pub struct RedisCluster {
    nodes: Vec<RedisServer>,
}

impl RedisCluster {
    pub fn start(n: usize) -> Self {
        Self::launch(n, Access::Anyone)
    }

    /// Every node asks for this password (`--requirepass`).
    pub fn start_with_password(n: usize, password: &str) -> Self {
        Self::launch(n, Access::Password(password.into()))
    }

    fn launch(n: usize, access: Access) -> Self {
        let nodes: Vec<RedisServer> = (0..n)
            .map(|_| {
                let mut node = RedisServer {
                    port: 0,
                    dir: Some(tempfile::tempdir().expect("temp dir")),
                    scratch: tempfile::tempdir().expect("temp dir"),
                    tls: None,
                    cluster: true,
                    extra: Vec::new(),
                    access: access.clone(),
                    child: None,
                };
                node.port = TcpListener::bind("127.0.0.1:0")
                    .and_then(|l| l.local_addr())
                    .expect("a free port")
                    .port();
                node.spawn();
                node
            })
            .collect();
        let per = 16384 / n;
        for (i, node) in nodes.iter().enumerate() {
            let last = if i + 1 == n { 16383 } else { (i + 1) * per - 1 };
            let added = node.command(&[
                "CLUSTER",
                "ADDSLOTSRANGE",
                &(i * per).to_string(),
                &last.to_string(),
            ]);
            assert!(added.starts_with("+OK"), "{added}");
            if i > 0 {
                node.command(&["CLUSTER", "MEET", "127.0.0.1", &nodes[0].port.to_string()]);
            }
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        let known = format!("cluster_known_nodes:{n}");
        while !nodes.iter().all(|node| {
            let info = node.command(&["CLUSTER", "INFO"]);
            info.contains("cluster_state:ok") && info.contains(&known)
        }) {
            assert!(Instant::now() < deadline, "the cluster did not form");
            std::thread::sleep(Duration::from_millis(100));
        }
        Self { nodes }
    }

    /// `redis+cluster://` naming every node.
    pub fn url(&self) -> String {
        format!("redis+cluster://{}", self.hosts())
    }

    /// `host:port,host:port…` of every node.
    pub fn hosts(&self) -> String {
        let hosts: Vec<String> = self
            .nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        hosts.join(",")
    }
}

/// A command in RESP.
fn resp(args: &[&str]) -> String {
    let mut request = format!("*{}\r\n", args.len());
    for a in args {
        request.push_str(&format!("${}\r\n{a}\r\n", a.len()));
    }
    request
}

/// Whether a RESP answer of a simple kind (status, error, integer, one bulk string) is whole.
fn complete(answer: &[u8]) -> bool {
    let Some(first_line_end) = answer.windows(2).position(|w| w == b"\r\n") else {
        return false;
    };
    match answer.first() {
        Some(b'$') => {
            let len: i64 = std::str::from_utf8(&answer[1..first_line_end])
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
            len < 0 || answer.len() >= first_line_end + 2 + len as usize + 2
        }
        _ => true,
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Redis Sentinels watching one master, each a `redis-server --sentinel` on a free port with a
/// config file of its own (Sentinel rewrites it), killed on drop.
pub struct Sentinels {
    ports: Vec<u16>,
    children: Vec<Child>,
    /// Their `requirepass`, if any: the tests' own questions authenticate with it too.
    password: Option<String>,
    _dir: tempfile::TempDir,
}

impl Sentinels {
    /// `n` Sentinels, a quorum of `n / 2 + 1`, that call the master down after 1 s of silence.
    pub fn start(n: usize, master_name: &str, master: &RedisServer) -> Self {
        Self::launch(n, master_name, master, None)
    }

    /// [`Sentinels::start`], each asking its clients for `password` (`requirepass` in its
    /// config, which Sentinels also give each other).
    pub fn start_with_password(
        n: usize,
        master_name: &str,
        master: &RedisServer,
        password: &str,
    ) -> Self {
        Self::launch(n, master_name, master, Some(password))
    }

    fn launch(n: usize, master_name: &str, master: &RedisServer, password: Option<&str>) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut ports = Vec::new();
        let mut children = Vec::new();
        for i in 0..n {
            let port = TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .expect("a free port")
                .port();
            let conf = dir.path().join(format!("sentinel-{i}.conf"));
            std::fs::write(
                &conf,
                format!(
                    "port {port}\nbind 127.0.0.1\nprotected-mode no\ndir {}\n\
                     sentinel monitor {master_name} 127.0.0.1 {} {}\n\
                     sentinel down-after-milliseconds {master_name} 1000\n\
                     sentinel failover-timeout {master_name} 4000\n\
                     sentinel parallel-syncs {master_name} 1\n{}",
                    dir.path().display(),
                    master.port(),
                    n / 2 + 1,
                    password.map_or_else(String::new, |p| format!("requirepass {p}\n")),
                ),
            )
            .expect("sentinel config written");
            let child = Command::new("redis-server")
                .arg(&conf)
                .arg("--sentinel")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("redis-server --sentinel starts");
            children.push(child);
            ports.push(port);
        }
        let sentinels = Self {
            ports,
            children,
            password: password.map(str::to_owned),
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while sentinels.master_port(master_name).is_none() {
            assert!(
                Instant::now() < deadline,
                "the Sentinels never named a master"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        sentinels
    }

    /// `host:port` of each Sentinel.
    pub fn addresses(&self) -> Vec<String> {
        self.ports
            .iter()
            .map(|p| format!("127.0.0.1:{p}"))
            .collect()
    }

    /// The master's port as the first Sentinel that answers names it.
    pub fn master_port(&self, master_name: &str) -> Option<u16> {
        self.ports.iter().find_map(|port| {
            let answer = self.ask(*port, &["SENTINEL", "get-master-addr-by-name", master_name])?;
            answer
                .lines()
                .filter(|l| !l.starts_with(['*', '$']))
                .nth(1)?
                .parse()
                .ok()
        })
    }

    /// Replicas each Sentinel knows of `master_name`, at least.
    pub fn known_replicas(&self, master_name: &str) -> usize {
        self.ports
            .iter()
            .filter_map(|port| self.ask(*port, &["SENTINEL", "replicas", master_name]))
            .map(|answer| {
                answer
                    .lines()
                    .next()
                    .and_then(|l| l.strip_prefix('*'))
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(0)
            })
            .min()
            .unwrap_or(0)
    }

    /// One command to the Sentinel on `port`, authenticated when they ask for a password.
    fn ask(&self, port: u16, args: &[&str]) -> Option<String> {
        command_on(port, self.password.as_deref(), args)
    }
}

impl Drop for Sentinels {
    fn drop(&mut self) {
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// One command to whatever listens on `port`, after `AUTH password` if given, its raw answer;
/// None when nothing answers or the password is refused.
fn command_on(port: u16, password: Option<&str>, args: &[&str]) -> Option<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    if let Some(password) = password {
        stream
            .write_all(resp(&["AUTH", password]).as_bytes())
            .ok()?;
        let mut ok = [0u8; 5];
        stream.read_exact(&mut ok).ok()?;
        if &ok != b"+OK\r\n" {
            return None;
        }
    }
    stream.write_all(resp(args).as_bytes()).ok()?;
    let mut answer = Vec::new();
    let mut buf = [0u8; 65536];
    loop {
        let n = stream.read(&mut buf).ok()?;
        answer.extend_from_slice(&buf[..n]);
        if n == 0 || complete(&answer) {
            break;
        }
    }
    Some(String::from_utf8_lossy(&answer).into_owned())
}
