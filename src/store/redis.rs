//! The Redis store: the room's state in Redis, so that many instances act as one room. Each step
//! of the pure model (src/core/room.rs) is one Lua script (src/store/lua/), run atomically by
//! Redis; the scripts follow the model rule for rule and pass the same conformance suite.
//!
//! Every key of a room lives under `{prefix}{room}:` with the room in braces, e.g.
//! `wr:{shop}:queue`, so they share one Cluster hash slot; every script gets the keys it touches
//! in KEYS: the room's twelve, then the heartbeat shards (`…:beats:<n>`) of the visitors at hand.
//! Time comes from Redis `TIME` inside each script (or from a test clock), so the clocks of the
//! proxy hosts don't matter.
//!
//! Revocations are answered locally: each instance keeps the ended passes in memory, fed by its
//! own `end_pass`, by a pub/sub channel every instance publishes its revocations on, and by a
//! reload of the revoked set every second, which covers anything missed while disconnected.
//!
//! Loss of the data (a restart without persistence, a failover to an empty replica) is detected
//! through the epoch: a script that finds no epoch, or another epoch than the one this instance
//! saw, marks the loss; admissions then pause for a session length, so that passes still alive
//! register again through `touch_pass` before the room is filled anew.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use async_trait::async_trait;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{
    Client, Cmd, Pipeline, ProtocolVersion, PushInfo, PushKind, RedisError, RedisFuture, Script,
    ScriptInvocation, Value,
};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};
use tokio::sync::oneshot;
use tokio::task::AbortHandle;

use crate::clock::{Clock, Millis, SharedClock, SystemClock};
use crate::core::ip_limit::{IpClaim, IpLimits, JOIN_GRACE_MS, RECHECK_EVERY_MS, RETAIN_LIVE_MS};
use crate::core::room::{Limits, Pick, Placing, PollOutcome, RoomCounts, RoundReport};
use crate::store::{Joined, SavedSettings, Store, StoreError, StoreResult, TicketPlace};

/// Where the scripts take the time from.
#[derive(Clone)]
pub enum TimeSource {
    /// Redis `TIME`, read inside each script: one clock for every instance.
    Server,
    /// A clock of this process (tests drive a manual one).
    Clock(SharedClock),
}

#[derive(Clone)]
pub struct RedisOptions {
    /// `redis://[user:password@]host[:port][/db]`, or `rediss://` for TLS (the server's
    /// certificate is checked against the system's roots; `SSL_CERT_FILE` names other ones).
    /// A Redis Cluster (or Valkey cluster): `redis+cluster://[user:password@]host:port,host:port`
    /// (`rediss+cluster://` for TLS), naming some of its nodes.
    pub url: String,
    /// Put verbatim in front of every key, e.g. `wr:`.
    pub prefix: String,
    /// The room's name: the hash tag of its keys, so it may not contain braces.
    pub room: String,
    pub connect_timeout: Duration,
    /// Bounds every call to Redis, reconnection included.
    pub command_timeout: Duration,
    pub time: TimeSource,
    /// Drives random picks.
    pub seed: u64,
}

impl RedisOptions {
    /// Production defaults: prefix `wr:`, Redis time, 5 s to connect, 1 s per command.
    pub fn new(url: impl Into<String>, room: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            prefix: "wr:".into(),
            room: room.into(),
            connect_timeout: Duration::from_secs(5),
            command_timeout: Duration::from_secs(1),
            time: TimeSource::Server,
            seed: rand::random(),
        }
    }
}

/// How often the revoked set is reloaded, on top of the pub/sub feed.
const RELOAD_REVOKED_EVERY: Duration = Duration::from_secs(1);

/// A reconnection tried within one call gives up after this many attempts; the next call tries
/// again.
const RECONNECT_RETRIES: usize = 2;

/// Waiting visitors' heartbeats are spread over this many small hashes (`…:beats:<n>`, see
/// lua/common.lua) so that each stays in Redis's compact listpack encoding: up to
/// `hash-max-listpack-entries` (512 by default) per shard, about 400 000 waiting visitors in all.
/// A shard costs about 150 bytes of its own (its key, its entry in the beats index): little per
/// visitor from about 10 000 waiting. Every instance of a room must use the same count and
/// [`beat_shard`]: a heartbeat left in another shard would lapse and drop its visitor.
const BEAT_SHARDS: usize = 1024;

/// How many heartbeat shards one admission round sweeps at most; the rest wait for the next.
const SWEEP_SHARDS_PER_ROUND: usize = 32;

/// The heartbeat shard of a visitor: FNV-1a, fixed so that every instance agrees.
fn beat_shard(id: &str) -> usize {
    let hash = id.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    (hash % BEAT_SHARDS as u64) as usize
}

/// The room's keys, in the order every script expects them (see lua/common.lua).
const KEY_NAMES: [&str; 12] = [
    "epoch", "queue", "places", "beats", "called", "passes", "revoked", "bucket", "recent",
    "counters", "leader", "settings",
];

macro_rules! room_script {
    ($file:literal) => {
        Script::new(concat!(
            include_str!("lua/common.lua"),
            include_str!(concat!("lua/", $file))
        ))
    };
}

struct Scripts {
    admit_directly: Script,
    admit_unconditionally: Script,
    join: Script,
    poll: Script,
    touch_pass: Script,
    end_pass: Script,
    leave_queue: Script,
    admission_round: Script,
    counts: Script,
    lead: Script,
    resign: Script,
    leader: Script,
    save_settings: Script,
    load_settings: Script,
    keep_alive: Script,
    due_beats: Script,
}

impl Scripts {
    fn new() -> Self {
        Self {
            admit_directly: room_script!("admit_directly.lua"),
            admit_unconditionally: room_script!("admit_unconditionally.lua"),
            join: room_script!("join.lua"),
            poll: room_script!("poll.lua"),
            touch_pass: room_script!("touch_pass.lua"),
            end_pass: room_script!("end_pass.lua"),
            leave_queue: room_script!("leave_queue.lua"),
            admission_round: room_script!("admission_round.lua"),
            counts: room_script!("counts.lua"),
            lead: room_script!("lead.lua"),
            resign: room_script!("resign.lua"),
            leader: room_script!("leader.lua"),
            save_settings: room_script!("save_settings.lua"),
            load_settings: room_script!("load_settings.lua"),
            keep_alive: room_script!("keep_alive.lua"),
            due_beats: room_script!("due_beats.lua"),
        }
    }
}

/// Passes ended on any instance, with the time until which they are refused.
#[derive(Default)]
struct Revocations {
    until: RwLock<HashMap<String, Millis>>,
}

impl Revocations {
    fn contains(&self, id: &str, now: Millis) -> bool {
        // A poisoned lock only means a panic elsewhere; the map itself is always whole.
        let until = self.until.read().unwrap_or_else(|p| p.into_inner());
        until.get(id).is_some_and(|u| *u > now)
    }

    fn add(&self, entries: impl IntoIterator<Item = (String, Millis)>, now: Millis) {
        let mut until = self.until.write().unwrap_or_else(|p| p.into_inner());
        until.retain(|_, u| *u > now);
        for (id, u) in entries {
            if u > now {
                let entry = until.entry(id).or_insert(u);
                *entry = (*entry).max(u);
            }
        }
    }
}

fn local_now(time: &TimeSource) -> Millis {
    match time {
        TimeSource::Server => SystemClock.now_ms(),
        TimeSource::Clock(clock) => clock.now_ms(),
    }
}

fn unavailable(err: &RedisError) -> StoreError {
    StoreError::Unavailable(format!("redis: {err}"))
}

/// Malformed data (a script found garbage, a key of the wrong type) is corrupt; anything else
/// (connection, timeout, server loading or read-only) leaves the store unavailable.
fn map_error(script: &str, err: RedisError) -> StoreError {
    match err.code() {
        Some("CORRUPT") | Some("WRONGTYPE") => {
            StoreError::Corrupt(format!("{script}: {}", err.detail().unwrap_or_default()))
        }
        _ => StoreError::Unavailable(format!("redis {script}: {err}")),
    }
}

fn corrupt(script: &str, what: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(format!("{script} answered {what}"))
}

/// A script's answer after its epoch: read element by element.
struct Reply {
    script: &'static str,
    items: std::vec::IntoIter<Value>,
}

impl Reply {
    fn next(&mut self) -> StoreResult<Value> {
        self.items
            .next()
            .ok_or_else(|| corrupt(self.script, "too few elements"))
    }

    fn int(&mut self) -> StoreResult<i64> {
        match self.next()? {
            Value::Int(n) => Ok(n),
            other => Err(corrupt(self.script, format!("{other:?} for a number"))),
        }
    }

    fn count(&mut self) -> StoreResult<u64> {
        let n = self.int()?;
        u64::try_from(n).map_err(|_| corrupt(self.script, format!("negative count {n}")))
    }

    fn flag(&mut self) -> StoreResult<bool> {
        match self.int()? {
            0 => Ok(false),
            1 => Ok(true),
            n => Err(corrupt(self.script, format!("{n} for a flag"))),
        }
    }

    fn string(&mut self) -> StoreResult<String> {
        let value = self.next()?;
        text(self.script, value)
    }

    fn rest_strings(self) -> StoreResult<Vec<String>> {
        let script = self.script;
        self.items.map(|v| text(script, v)).collect()
    }
}

fn text(script: &str, value: Value) -> StoreResult<String> {
    match value {
        Value::BulkString(bytes) => {
            String::from_utf8(bytes).map_err(|_| corrupt(script, "a string that is not UTF-8"))
        }
        Value::SimpleString(s) => Ok(s),
        other => Err(corrupt(script, format!("{other:?} for a string"))),
    }
}

/// One Redis server, or a cluster.
#[derive(Clone)]
enum Conn {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Conn::Single(c) => c.req_packed_command(cmd),
            Conn::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Conn::Single(c) => c.req_packed_commands(pipeline, offset, count),
            Conn::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Conn::Single(c) => c.get_db(),
            Conn::Cluster(c) => c.get_db(),
        }
    }
}

/// The node URLs of a `redis+cluster://` or `rediss+cluster://` URL, None for any other URL.
fn cluster_nodes(url: &str) -> Option<Vec<String>> {
    let (scheme, rest) = if let Some(rest) = url.strip_prefix("redis+cluster://") {
        ("redis", rest)
    } else {
        ("rediss", url.strip_prefix("rediss+cluster://")?)
    };
    let (credentials, hosts) = match rest.rsplit_once('@') {
        Some((credentials, hosts)) => (format!("{credentials}@"), hosts),
        None => (String::new(), rest),
    };
    Some(
        hosts
            .split(',')
            .map(|host| format!("{scheme}://{credentials}{}", host.trim()))
            .collect(),
    )
}

pub struct RedisStore {
    calls: Arc<Calls>,
    /// For the task that sends them in batches (see [`send_joins`]).
    joins: UnboundedSender<JoinRequest>,
    /// The pub/sub channel revocations are announced on.
    channel: String,
    rng: Mutex<StdRng>,
    revoked: Arc<Revocations>,
    /// The revocation feed and the join sender.
    tasks: [AbortHandle; 2],
    /// The per-address limit: its own script and keys (`{base}ip:<address>`, in the room's hash
    /// slot), apart from the room's scripts and their shared KEYS.
    claim_ticket: Script,
    ip_prefix: String,
    queue_key: String,
}

/// What a script call needs, shared with the task that sends the joins.
struct Calls {
    conn: Conn,
    keys: Vec<String>,
    /// The heartbeat shards' keys, by shard.
    beat_keys: Vec<String>,
    scripts: Scripts,
    time: TimeSource,
    command_timeout: Duration,
    /// The epoch this instance saw last ('' before any): how a loss of the data is told apart
    /// from a new room.
    known_epoch: Mutex<String>,
}

impl Drop for RedisStore {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// A join waiting for its batch.
struct JoinRequest {
    id: String,
    ticket: Option<TicketPlace>,
    limits: Limits,
    answer: oneshot::Sender<StoreResult<Joined>>,
}

/// The most joins one script call carries: plenty for a drop, and a call still takes Redis well
/// under a millisecond.
const MAX_JOIN_BATCH: usize = 128;

/// Sends the joins one batch at a time: those that arrive while a batch is in flight make the
/// next one, so a drop's new visitors cost one script call per batch instead of one each, and a
/// joiner in a quiet room waits for nobody.
async fn send_joins(calls: Arc<Calls>, mut requests: UnboundedReceiver<JoinRequest>) {
    let mut next = None;
    loop {
        let first = if let Some(request) = next.take() {
            request
        } else if let Some(request) = requests.recv().await {
            request
        } else {
            return;
        };
        let mut batch = vec![first];
        while batch.len() < MAX_JOIN_BATCH {
            let Ok(request) = requests.try_recv() else {
                break;
            };
            // A call applies one set of limits: a join under others (the settings just
            // changed) starts the next batch.
            if request.limits != batch[0].limits {
                next = Some(request);
                break;
            }
            batch.push(request);
        }
        // A caller that gave up (timed out, or its client left) holds no ticket: no place for it.
        batch.retain(|request| !request.answer.is_closed());
        calls.join(batch).await;
    }
}

fn joined(reply: &mut Reply, epoch: &str) -> StoreResult<Joined> {
    Ok(Joined {
        place: reply.int()?,
        position: reply.count()?,
        queued: reply.count()?,
        epoch: epoch.to_owned(),
    })
}

impl RedisStore {
    /// Connects, subscribes to the room's revocations and starts following them on the current
    /// tokio runtime: create the store on the runtime that will use it (its connections fail once
    /// that runtime is gone).
    pub async fn connect(options: RedisOptions) -> StoreResult<Self> {
        let RedisOptions {
            url,
            prefix,
            room,
            connect_timeout,
            command_timeout,
            time,
            seed,
        } = options;
        if room.contains(['{', '}']) {
            return Err(StoreError::Unavailable(format!(
                "room name {room:?} may not contain braces: it is the hash tag of the room's keys"
            )));
        }
        let nodes = cluster_nodes(&url);
        let first_node = nodes.as_ref().and_then(|n| n.first()).unwrap_or(&url);
        let client = open_client(first_node)?;
        let base = format!("{prefix}{{{room}}}:");
        let keys: Vec<String> = KEY_NAMES.iter().map(|k| format!("{base}{k}")).collect();
        let beat_keys = (0..BEAT_SHARDS)
            .map(|n| format!("{base}beats:{n}"))
            .collect();
        let revoked_key = format!("{base}revoked");
        let ip_prefix = format!("{base}ip:");
        let queue_key = format!("{base}queue");
        let channel = revoked_key.clone();

        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(connect_timeout))
            .set_response_timeout(Some(command_timeout))
            .set_number_of_retries(RECONNECT_RETRIES)
            .set_max_delay(command_timeout / 4);
        let conn = match &nodes {
            Some(nodes) => {
                let cluster = ClusterClient::builder(nodes.iter().map(String::as_str))
                    .connection_timeout(connect_timeout)
                    .response_timeout(command_timeout)
                    .retries(RECONNECT_RETRIES as u32)
                    .build()
                    .map_err(|e| {
                        StoreError::Unavailable(format!(
                            "invalid Redis URL {}: {e}",
                            redacted(&url)
                        ))
                    })?;
                within(connect_timeout, cluster.get_async_connection())
                    .await
                    .map(Conn::Cluster)
            }
            None => within(
                connect_timeout,
                ConnectionManager::new_with_config(client.clone(), config.clone()),
            )
            .await
            .map(Conn::Single),
        }
        .map_err(|e| e.context(&format!("cannot connect to {}", redacted(&url))))?;

        // A second connection, on RESP3, receives the revocations of the other instances (in a
        // cluster, from the first node named: PUBLISH reaches every node).
        let info = client.get_connection_info().clone();
        let settings = info
            .redis_settings()
            .clone()
            .set_protocol(ProtocolVersion::RESP3);
        let feed_client =
            Client::open(info.set_redis_settings(settings)).map_err(|e| unavailable(&e))?;
        let (tx, pushes) = unbounded_channel();
        let feed_config = config.set_push_sender(tx).set_automatic_resubscription();
        let mut feed_conn = within(
            connect_timeout,
            ConnectionManager::new_with_config(feed_client, feed_config),
        )
        .await
        .map_err(|e| e.context("cannot open the revocation feed"))?;
        within(command_timeout, feed_conn.subscribe(&channel))
            .await
            .map_err(|e| e.context("cannot subscribe to revocations"))?;

        let mut probe = conn.clone();
        let epoch: Option<String> = within(
            command_timeout,
            redis::cmd("HGET")
                .arg(&keys[0])
                .arg("id")
                .query_async(&mut probe),
        )
        .await?;

        let revoked = Arc::new(Revocations::default());
        let follower = Follower {
            feed: feed_conn,
            conn: conn.clone(),
            pushes,
            revoked: revoked.clone(),
            key: revoked_key,
            time: time.clone(),
            command_timeout,
        };
        let feed = tokio::spawn(follower.run()).abort_handle();

        let calls = Arc::new(Calls {
            conn,
            keys,
            beat_keys,
            scripts: Scripts::new(),
            time,
            command_timeout,
            known_epoch: Mutex::new(epoch.unwrap_or_default()),
        });
        let (joins, requests) = unbounded_channel();
        let sender = tokio::spawn(send_joins(calls.clone(), requests)).abort_handle();

        Ok(Self {
            calls,
            joins,
            channel,
            rng: Mutex::new(StdRng::seed_from_u64(seed)),
            revoked,
            tasks: [feed, sender],
            claim_ticket: Script::new(include_str!("lua/claim_ticket.lua")),
            ip_prefix,
            queue_key,
        })
    }
}

impl Calls {
    fn known_epoch(&self) -> std::sync::MutexGuard<'_, String> {
        self.known_epoch
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn beat_key(&self, id: &str) -> &str {
        &self.beat_keys[beat_shard(id)]
    }

    fn is_beat_key(&self, key: &str) -> bool {
        key.rsplit_once(':')
            .and_then(|(_, n)| n.parse::<usize>().ok())
            .and_then(|n| self.beat_keys.get(n))
            .is_some_and(|k| k == key)
    }

    /// A script call with the room's keys and the common arguments, plus the limits if given.
    fn invocation<'a>(
        &'a self,
        script: &'a Script,
        limits: Option<&Limits>,
    ) -> ScriptInvocation<'a> {
        let mut inv = script.prepare_invoke();
        for key in &self.keys {
            inv.key(key);
        }
        let now = match &self.time {
            TimeSource::Server => -1,
            TimeSource::Clock(clock) => clock.now_ms(),
        };
        let known = self.known_epoch().clone();
        inv.arg(now)
            .arg(known)
            .arg(format!("{:016x}", rand::random::<u64>()));
        if let Some(l) = limits {
            inv.arg(l.capacity)
                .arg(l.new_users_per_minute)
                .arg(l.burst)
                .arg(l.session_ms)
                .arg(l.abandon_after_ms)
                .arg(l.claim_window_ms)
                .arg(match l.pick {
                    Pick::Fifo => "fifo",
                    Pick::Random => "random",
                })
                .arg(if l.admitting { "1" } else { "0" });
        }
        inv
    }

    /// Runs a script; the reply past the epoch, which is remembered.
    async fn call(
        &self,
        script: &'static str,
        inv: &ScriptInvocation<'_>,
    ) -> StoreResult<(Reply, String)> {
        let attempts = async {
            let mut conn = self.conn.clone();
            match inv.invoke_async::<Value>(&mut conn).await {
                // The connection broke (typically: Redis restarted) and the manager reconnects:
                // one more try, within the same time limit. A step that ran but whose answer was
                // lost would run twice: harmless for every step but a round, which is not
                // retried (the admission loop runs the next one soon).
                Err(e)
                    if retry_allowed(script) && (e.is_connection_dropped() || e.is_io_error()) =>
                {
                    inv.invoke_async::<Value>(&mut conn).await
                }
                other => other,
            }
        };
        let value = tokio::time::timeout(self.command_timeout, attempts)
            .await
            .map_err(|_| timed_out(script, self.command_timeout))?
            .map_err(|e| map_error(script, e))?;
        let Value::Array(items) = value else {
            return Err(corrupt(script, format!("{value:?} for an array")));
        };
        let mut reply = Reply {
            script,
            items: items.into_iter(),
        };
        let epoch = reply.string()?;
        let mut known = self.known_epoch();
        if *known != epoch {
            known.clone_from(&epoch);
        }
        Ok((reply, epoch))
    }

    /// Sends a batch of joins as one script call and answers each caller.
    async fn join(&self, batch: Vec<JoinRequest>) {
        let Some(first) = batch.first() else {
            return;
        };
        let mut inv = self.invocation(&self.scripts.join, Some(&first.limits));
        match first.limits.placing {
            Placing::Arrival => inv.arg("arrival").arg(0).arg(0),
            Placing::Lottery { window_ms } => inv.arg("lottery").arg(window_ms).arg(0),
            Placing::DrawUntil { from_ms, until_ms } => inv.arg("draw").arg(from_ms).arg(until_ms),
        };
        for request in &batch {
            inv.key(self.beat_key(&request.id)).arg(&request.id);
            match &request.ticket {
                Some(t) => inv.arg(t.place).arg(&t.epoch),
                None => inv.arg("").arg(""),
            };
            // A draw's random number is the proxy's: below 2^52, so Lua's doubles keep it exact.
            inv.arg(rand::random::<u64>() >> 12);
        }
        // A caller that gave up meanwhile is not told (the send fails): its join is harmless.
        match self.call("join", &inv).await {
            Ok((mut reply, epoch)) => {
                for request in batch {
                    let _ = request.answer.send(joined(&mut reply, &epoch));
                }
            }
            Err(e) => {
                for request in batch {
                    let _ = request.answer.send(Err(e.clone()));
                }
            }
        }
    }
}

fn retry_allowed(script: &str) -> bool {
    script != "admission_round"
}

fn timed_out(what: &str, after: Duration) -> StoreError {
    StoreError::Unavailable(format!("redis {what}: no answer within {after:?}"))
}

/// Awaits a Redis future for at most `limit`.
async fn within<T>(
    limit: Duration,
    fut: impl std::future::Future<Output = redis::RedisResult<T>>,
) -> StoreResult<T> {
    match tokio::time::timeout(limit, fut).await {
        Ok(result) => result.map_err(|e| unavailable(&e)),
        Err(_) => Err(StoreError::Unavailable(format!(
            "redis: no answer within {limit:?}"
        ))),
    }
}

impl StoreError {
    fn context(self, what: &str) -> StoreError {
        match self {
            StoreError::Unavailable(m) => StoreError::Unavailable(format!("{what}: {m}")),
            other => other,
        }
    }
}

/// The URL without its password, for messages.
fn redacted(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            format!("{}://…@{}", &url[..scheme], &url[at + 1..])
        }
        _ => url.to_owned(),
    }
}

fn open_client(url: &str) -> StoreResult<Client> {
    Client::open(url)
        .map_err(|e| StoreError::Unavailable(format!("invalid Redis URL {}: {e}", redacted(url))))
}

/// Follows the revocations of every instance: pub/sub messages as they come, and a reload of
/// the revoked set every second, which covers what the feed missed while disconnected.
struct Follower {
    /// The subscribed connection, pinged every second so that it reconnects (and subscribes
    /// again) after an outage.
    feed: ConnectionManager,
    conn: Conn,
    pushes: UnboundedReceiver<PushInfo>,
    revoked: Arc<Revocations>,
    key: String,
    time: TimeSource,
    command_timeout: Duration,
}

impl Follower {
    async fn run(mut self) {
        let mut tick = tokio::time::interval(RELOAD_REVOKED_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                push = self.pushes.recv() => match push {
                    Some(push) => self.take(push),
                    None => return,
                },
                _ = tick.tick() => self.reload().await,
            }
        }
    }

    fn take(&self, push: PushInfo) {
        if push.kind != PushKind::Message {
            return;
        }
        // data: [channel, "until id"]
        let Some(Ok(payload)) = push.data.into_iter().nth(1).map(|v| text("feed", v)) else {
            log::warn!("malformed revocation message");
            return;
        };
        match payload
            .split_once(' ')
            .map(|(u, id)| (u.parse::<Millis>(), id))
        {
            Some((Ok(until), id)) => self
                .revoked
                .add([(id.to_owned(), until)], local_now(&self.time)),
            _ => log::warn!("malformed revocation message {payload:?}"),
        }
    }

    async fn reload(&mut self) {
        if let Err(e) = within(
            self.command_timeout,
            redis::cmd("PING").query_async::<Value>(&mut self.feed),
        )
        .await
        {
            log::debug!("revocation feed down: {e}");
        }
        let now = local_now(&self.time);
        let entries: Result<Vec<(String, f64)>, _> = within(
            self.command_timeout,
            redis::cmd("ZRANGEBYSCORE")
                .arg(&self.key)
                .arg(format!("({now}"))
                .arg("+inf")
                .arg("WITHSCORES")
                .query_async(&mut self.conn),
        )
        .await;
        match entries {
            Ok(entries) => self.revoked.add(
                entries.into_iter().map(|(id, until)| (id, until as Millis)),
                now,
            ),
            Err(e) => log::debug!("revocations not reloaded: {e}"),
        }
    }
}

#[async_trait]
impl Store for RedisStore {
    async fn admit_directly(&self, id: &str, limits: &Limits) -> StoreResult<Option<Millis>> {
        let mut inv = self
            .calls
            .invocation(&self.calls.scripts.admit_directly, Some(limits));
        inv.arg(id);
        let (mut r, _) = self.calls.call("admit_directly", &inv).await?;
        Ok(if r.flag()? { Some(r.int()?) } else { None })
    }

    async fn admit_unconditionally(&self, id: &str, limits: &Limits) -> StoreResult<Millis> {
        let mut inv = self
            .calls
            .invocation(&self.calls.scripts.admit_unconditionally, Some(limits));
        inv.arg(id);
        let (mut r, _) = self.calls.call("admit_unconditionally", &inv).await?;
        r.int()
    }

    async fn join(
        &self,
        id: &str,
        ticket: Option<&TicketPlace>,
        limits: &Limits,
    ) -> StoreResult<Joined> {
        let (answer, answered) = oneshot::channel();
        let request = JoinRequest {
            id: id.to_owned(),
            ticket: ticket.cloned(),
            limits: limits.clone(),
            answer,
        };
        let stopped = || StoreError::Unavailable("redis join: the join sender stopped".into());
        self.joins.send(request).map_err(|_| stopped())?;
        // The batch in flight, then this one: bounded together like a single call.
        let timeout = self.calls.command_timeout;
        match tokio::time::timeout(timeout, answered).await {
            Ok(joined) => joined.unwrap_or_else(|_| Err(stopped())),
            Err(_) => Err(timed_out("join", timeout)),
        }
    }

    async fn poll(&self, id: &str, limits: &Limits) -> StoreResult<PollOutcome> {
        let mut inv = self
            .calls
            .invocation(&self.calls.scripts.poll, Some(limits));
        inv.key(self.calls.beat_key(id)).arg(id);
        let (mut r, _) = self.calls.call("poll", &inv).await?;
        Ok(match r.int()? {
            0 => PollOutcome::Unknown,
            1 => PollOutcome::Waiting {
                position: r.count()?,
                queued: r.count()?,
            },
            2 => {
                let expires_at = r.int()?;
                let claimed_now = r.flag()?;
                let called_at = r.int()?;
                PollOutcome::Admitted {
                    expires_at,
                    called_at: claimed_now.then_some(called_at),
                }
            }
            n => return Err(corrupt("poll", format!("outcome {n}"))),
        })
    }

    async fn touch_pass(
        &self,
        id: &str,
        pass_epoch: &str,
        limits: &Limits,
    ) -> StoreResult<Option<Millis>> {
        let mut inv = self
            .calls
            .invocation(&self.calls.scripts.touch_pass, Some(limits));
        inv.arg(id).arg(pass_epoch);
        let (mut r, _) = self.calls.call("touch_pass", &inv).await?;
        Ok(if r.flag()? { Some(r.int()?) } else { None })
    }

    async fn end_pass(&self, id: &str, limits: &Limits) -> StoreResult<bool> {
        let mut inv = self
            .calls
            .invocation(&self.calls.scripts.end_pass, Some(limits));
        inv.arg(id).arg(&self.channel);
        let (mut r, _) = self.calls.call("end_pass", &inv).await?;
        let had = r.flag()?;
        let until = r.int()?;
        self.revoked
            .add([(id.to_owned(), until)], local_now(&self.calls.time));
        Ok(had)
    }

    async fn leave_queue(&self, id: &str) -> StoreResult<bool> {
        let mut inv = self.calls.invocation(&self.calls.scripts.leave_queue, None);
        inv.key(self.calls.beat_key(id)).arg(id);
        let (mut r, _) = self.calls.call("leave_queue", &inv).await?;
        r.flag()
    }

    async fn claim_ticket(
        &self,
        ip: &str,
        ticket: &str,
        limits: &IpLimits,
    ) -> StoreResult<IpClaim> {
        const SCRIPT: &str = "claim_ticket";
        let mut inv = self.claim_ticket.prepare_invoke();
        inv.key(format!("{}{ip}", self.ip_prefix))
            .key(&self.queue_key)
            .arg(match &self.calls.time {
                TimeSource::Server => -1,
                TimeSource::Clock(clock) => clock.now_ms(),
            })
            .arg(ticket)
            .arg(limits.per_minute)
            .arg(limits.burst)
            .arg(limits.max_live)
            .arg(JOIN_GRACE_MS)
            .arg(RECHECK_EVERY_MS)
            .arg(RETAIN_LIVE_MS);
        let mut conn = self.calls.conn.clone();
        // Not retried on a broken connection: a claim that ran twice would count twice, and the
        // gate treats a failed claim like a failed join anyway.
        let value = tokio::time::timeout(
            self.calls.command_timeout,
            inv.invoke_async::<Value>(&mut conn),
        )
        .await
        .map_err(|_| timed_out(SCRIPT, self.calls.command_timeout))?
        .map_err(|e| map_error(SCRIPT, e))?;
        let Value::Array(items) = value else {
            return Err(corrupt(SCRIPT, format!("{value:?} for an array")));
        };
        let mut r = Reply {
            script: SCRIPT,
            items: items.into_iter(),
        };
        Ok(match r.int()? {
            0 => IpClaim::Allowed,
            1 => IpClaim::TooFast {
                retry_after_ms: r.int()?,
            },
            2 => IpClaim::TooManyLive,
            n => return Err(corrupt(SCRIPT, format!("outcome {n}"))),
        })
    }

    fn is_revoked(&self, id: &str) -> bool {
        self.revoked.contains(id, local_now(&self.calls.time))
    }

    async fn admission_round(&self, limits: &Limits, fence: u64) -> StoreResult<RoundReport> {
        let seed = self
            .rng
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .random_range(1..2_147_483_647u32);
        // The shards to sweep go in KEYS like every key a script touches: asked for first.
        let mut inv = self.calls.invocation(&self.calls.scripts.due_beats, None);
        inv.arg(SWEEP_SHARDS_PER_ROUND);
        let (due, _) = self.calls.call("due_beats", &inv).await?;
        let due = due.rest_strings()?;
        let mut inv = self
            .calls
            .invocation(&self.calls.scripts.admission_round, Some(limits));
        for shard in &due {
            if !self.calls.is_beat_key(shard) {
                return Err(corrupt(
                    "due_beats",
                    format!("{shard:?} for a heartbeat shard"),
                ));
            }
            inv.key(shard);
        }
        inv.arg(fence).arg(seed);
        let (mut r, _) = self.calls.call("admission_round", &inv).await?;
        if !r.flag()? {
            return Err(StoreError::NotLeader(fence));
        }
        Ok(RoundReport {
            called: r.count()?,
            expired: r.count()?,
            abandoned: r.count()?,
            no_shows: r.count()?,
        })
    }

    async fn counts(&self) -> StoreResult<RoomCounts> {
        let inv = self.calls.invocation(&self.calls.scripts.counts, None);
        let (mut r, _) = self.calls.call("counts", &inv).await?;
        Ok(RoomCounts {
            passes: r.count()?,
            called: r.count()?,
            queued: r.count()?,
            admitted_total: r.count()?,
            admitted_last_minute: r.count()?,
            abandoned_total: r.count()?,
            expired_total: r.count()?,
            revoked_total: r.count()?,
            no_show_total: r.count()?,
        })
    }

    async fn lead(&self, instance: &str, ttl_ms: Millis) -> StoreResult<Option<u64>> {
        let mut inv = self.calls.invocation(&self.calls.scripts.lead, None);
        inv.arg(instance).arg(ttl_ms);
        let (mut r, _) = self.calls.call("lead", &inv).await?;
        Ok(if r.flag()? { Some(r.count()?) } else { None })
    }

    async fn resign(&self, instance: &str) -> StoreResult<()> {
        let mut inv = self.calls.invocation(&self.calls.scripts.resign, None);
        inv.arg(instance);
        self.calls.call("resign", &inv).await.map(drop)
    }

    async fn leader(&self) -> StoreResult<Option<String>> {
        let inv = self.calls.invocation(&self.calls.scripts.leader, None);
        let (mut r, _) = self.calls.call("leader", &inv).await?;
        Ok(if r.flag()? { Some(r.string()?) } else { None })
    }

    async fn save_settings(&self, json: &str) -> StoreResult<u64> {
        let mut inv = self
            .calls
            .invocation(&self.calls.scripts.save_settings, None);
        inv.arg(json);
        let (mut r, _) = self.calls.call("save_settings", &inv).await?;
        r.count()
    }

    async fn load_settings(&self) -> StoreResult<Option<SavedSettings>> {
        let inv = self
            .calls
            .invocation(&self.calls.scripts.load_settings, None);
        let (mut r, _) = self.calls.call("load_settings", &inv).await?;
        Ok(if r.flag()? {
            Some(SavedSettings {
                version: r.count()?,
                json: r.string()?,
            })
        } else {
            None
        })
    }

    async fn keep_alive(&self, ids: &[String], limits: &Limits) -> StoreResult<Vec<String>> {
        let mut by_shard: BTreeMap<usize, Vec<&str>> = BTreeMap::new();
        for id in ids {
            by_shard.entry(beat_shard(id)).or_default().push(id);
        }
        let mut inv = self
            .calls
            .invocation(&self.calls.scripts.keep_alive, Some(limits));
        for (shard, ids) in &by_shard {
            inv.key(&self.calls.beat_keys[*shard]).arg(ids.len());
            for id in ids {
                inv.arg(*id);
            }
        }
        let (r, _) = self.calls.call("keep_alive", &inv).await?;
        r.rest_strings()
    }

    async fn epoch(&self) -> StoreResult<String> {
        // Every script answers the epoch first (creating one after a loss): the cheapest serves.
        let inv = self.calls.invocation(&self.calls.scripts.leader, None);
        let (_, epoch) = self.calls.call("leader", &inv).await?;
        Ok(epoch)
    }

    async fn ping(&self) -> StoreResult<()> {
        let mut conn = self.calls.conn.clone();
        within(
            self.calls.command_timeout,
            redis::cmd("PING").query_async::<String>(&mut conn),
        )
        .await
        .map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heartbeat_shards_never_change_and_spread_evenly() {
        // Instances of different versions share a room: the shard of an id is part of the format.
        assert_eq!(beat_shard("AAAAAAAAAAAAAAAAAAAAAA"), 859);
        assert_eq!(beat_shard("ZxKkV6nS1-3yq_8hPq2cWw"), 714);
        let mut per_shard = vec![0u32; BEAT_SHARDS];
        for _ in 0..100 * BEAT_SHARDS {
            per_shard[beat_shard(&crate::token::new_visitor_id())] += 1;
        }
        let (least, most) = (per_shard.iter().min(), per_shard.iter().max());
        assert!(
            least >= Some(&40) && most <= Some(&170),
            "{least:?}..{most:?}"
        );
    }
}
