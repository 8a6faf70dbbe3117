//! The Redis store: the room's state in Redis, so that many instances act as one room. Each step
//! of the pure model (src/core/room.rs) is one Lua script (src/store/lua/), run atomically by
//! Redis; the scripts follow the model rule for rule and pass the same conformance suite.
//!
//! Every key of a room lives under `{prefix}{room}:` with the room in braces, e.g.
//! `wr:{shop}:queue`, so they share one Cluster hash slot; every script gets the keys it touches
//! in KEYS: the room's thirteen, then the heartbeat shards (`…:beats:<n>`) of the visitors at hand,
//! or the autopilot's key (`…:autopilot`, or a window's `…:autopilot:w:<started_at>`).
//! A few scripts stand alone with keys of their own in the same slot: an address's tickets
//! (`…:ip:<address>`), a pass's networks (`…:nets:<pass>`), and the requests of every pass in a
//! minute (`…:uses:<minute>`).
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
//! register again through `touch_pass` before the room is filled anew. A promoted replica that
//! lagged keeps the epoch and lacks the last writes: nothing here can tell. With
//! `replica_acks`, each admission waits for the replicas to acknowledge it first (`acks.rs`),
//! and what they did not is counted (`Store::unacknowledged_admissions`).

mod acks;
mod autopilot;
mod calls;
mod conn;
mod deferred;
mod joins;
mod peek;
mod revocations;
mod scripts;
mod sentinel;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::task::AbortHandle;

use crate::clock::{Clock, Millis, SharedClock, SystemClock};
use crate::core::autopilot::Signal;
use crate::core::history::Share;
use crate::core::ip_limit::{IpClaim, IpLimits, JOIN_GRACE_MS, RECHECK_EVERY_MS, RETAIN_LIVE_MS};
use crate::core::queue_id::QueueId;
use crate::core::room::{FoundVisitor, Limits, PollOutcome, RoomCounts, RoundReport, VisitorState};
use crate::core::sharing::{MINUTE_MS, MinuteCounts, SharedUse, minute_of};
use crate::store::{
    AutopilotRecord, AutopilotState, Joined, RevokeReason, SHARES_KEPT_MS, SavedSettings, Store,
    StoreError, StoreResult, TicketPlace, window_kept_until,
};

pub use acks::ReplicaAcks;
pub use deferred::DeferredRedisStore;
pub use sentinel::SentinelAuth;

use acks::Acks;
use calls::{Calls, SWEEP_SHARDS_PER_ROUND, beat_shard};
use conn::{Connections, within};
use joins::Joins;
pub use peek::peek_settings;
use revocations::{Follower, Revocations};
use scripts::corrupt;

/// Where the scripts take the time from.
#[derive(Clone)]
pub enum TimeSource {
    /// Redis `TIME`, read inside each script: one clock for every instance.
    Server,
    /// A clock of this process (tests drive a manual one).
    Clock(SharedClock),
}

impl TimeSource {
    /// This process's idea of now, for what is decided locally (revocations).
    fn local_now(&self) -> Millis {
        match self {
            TimeSource::Server => SystemClock.now_ms(),
            TimeSource::Clock(clock) => clock.now_ms(),
        }
    }

    /// The time argument of a script: -1 has it read Redis `TIME`.
    fn script_now(&self) -> Millis {
        match self {
            TimeSource::Server => -1,
            TimeSource::Clock(clock) => clock.now_ms(),
        }
    }
}

#[derive(Clone)]
pub struct RedisOptions {
    /// `redis://[user:password@]host[:port][/db]`, or `rediss://` for TLS (the server's
    /// certificate is checked against the system's roots; `SSL_CERT_FILE` names other ones).
    /// A Redis Cluster (or Valkey cluster): `redis+cluster://[user:password@]host:port,host:port`
    /// (`rediss+cluster://` for TLS), naming some of its nodes. A password with `@`, `:` or `/`
    /// in it is percent-encoded (`p%40ss` for `p@ss`).
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
    /// The Sentinels' own credentials, for Sentinels that ask for them (the master's are the
    /// URL's).
    pub sentinel_auth: SentinelAuth,
    /// Replicas that must acknowledge each admission (`WAIT`) before it is answered; None: the
    /// admission is answered at once, replicated when Redis gets to it.
    pub replica_acks: Option<ReplicaAcks>,
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
            sentinel_auth: SentinelAuth::default(),
            replica_acks: None,
        }
    }
}

pub struct RedisStore {
    calls: Arc<Calls>,
    joins: Joins,
    /// The pub/sub channel revocations are announced on.
    channel: String,
    rng: Mutex<StdRng>,
    revoked: Arc<Revocations>,
    /// The revocation feed and the join sender.
    tasks: [AbortHandle; 2],
    /// The per-address records are `{ip_prefix}<address>`, in the room's hash slot.
    ip_prefix: String,
    /// A pass's networks are `{nets_prefix}<pass>`, in the room's hash slot.
    nets_prefix: String,
    /// A minute's pass use is `{uses_prefix}<minute>`, in the room's hash slot.
    uses_prefix: String,
    /// A spent proof-of-work seed is `{seed_prefix}<id>`, in the room's hash slot.
    seed_prefix: String,
    queue_key: String,
    /// The autopilot's hash: the leader's record and the pause switch.
    autopilot_key: String,
    /// A window's hash is `{window_prefix}<started_at>`, in the room's hash slot.
    window_prefix: String,
    /// A minute's shares of the drop report are `{share_prefix}<minute>`, in the room's slot.
    share_prefix: String,
    /// The replicas' acknowledgements of admissions, when asked for.
    acks: Option<Acks>,
}

impl Drop for RedisStore {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl RedisStore {
    /// Connects, subscribes to the room's revocations and starts following them on the current
    /// tokio runtime: create the store on the runtime that will use it (its connections fail once
    /// that runtime is gone).
    pub async fn connect(options: RedisOptions) -> StoreResult<Self> {
        if options.room.contains(['{', '}']) {
            return Err(StoreError::Unavailable(format!(
                "room name {:?} may not contain braces: it is the hash tag of the room's keys",
                options.room
            )));
        }
        let base = format!("{}{{{}}}:", options.prefix, options.room);
        let revoked_key = format!("{base}revoked");
        let channel = revoked_key.clone();
        let Connections {
            conn,
            acks,
            feed,
            pushes,
        } = conn::connect(&options, &channel).await?;
        let RedisOptions {
            room,
            command_timeout,
            time,
            seed,
            replica_acks,
            ..
        } = options;
        let acks = acks.zip(replica_acks).map(|(conn, wanted)| {
            Acks::start(conn, format!("{base}acks"), wanted, command_timeout, room)
        });

        let mut probe = conn.clone();
        let epoch: Option<String> = within(
            command_timeout,
            redis::cmd("HGET")
                .arg(format!("{base}epoch"))
                .arg("id")
                .query_async(&mut probe),
        )
        .await?;

        let revoked = Arc::new(Revocations::default());
        let follower = Follower {
            feed,
            conn: conn.clone(),
            pushes,
            revoked: revoked.clone(),
            key: revoked_key,
            time: time.clone(),
            command_timeout,
        };
        let feed = tokio::spawn(follower.run()).abort_handle();

        let calls = Arc::new(Calls::new(
            conn,
            &base,
            time,
            command_timeout,
            epoch.unwrap_or_default(),
        ));
        let (joins, sender) = Joins::start(calls.clone());

        Ok(Self {
            calls,
            joins,
            channel,
            rng: Mutex::new(StdRng::seed_from_u64(seed)),
            revoked,
            tasks: [feed, sender],
            ip_prefix: format!("{base}ip:"),
            nets_prefix: format!("{base}nets:"),
            uses_prefix: format!("{base}uses:"),
            seed_prefix: format!("{base}seed:"),
            queue_key: format!("{base}queue"),
            autopilot_key: format!("{base}autopilot"),
            window_prefix: format!("{base}autopilot:w:"),
            share_prefix: format!("{base}share:"),
            acks,
        })
    }

    /// After a write that admitted a visitor: the replicas' acknowledgement, when asked for.
    async fn acknowledged(&self) {
        if let Some(acks) = &self.acks {
            acks.acknowledged().await;
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
        let admitted = if r.flag()? { Some(r.int()?) } else { None };
        if admitted.is_some() {
            self.acknowledged().await;
        }
        Ok(admitted)
    }

    async fn admit_unconditionally(&self, id: &str, limits: &Limits) -> StoreResult<Millis> {
        let mut inv = self
            .calls
            .invocation(&self.calls.scripts.admit_unconditionally, Some(limits));
        inv.arg(id);
        let (mut r, _) = self.calls.call("admit_unconditionally", &inv).await?;
        let expires_at = r.int()?;
        self.acknowledged().await;
        Ok(expires_at)
    }

    async fn join(
        &self,
        id: &str,
        ticket: Option<&TicketPlace>,
        limits: &Limits,
    ) -> StoreResult<Joined> {
        self.joins.join(id, ticket, limits).await
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
                if claimed_now {
                    self.acknowledged().await;
                }
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

    async fn end_pass(&self, id: &str, reason: RevokeReason, limits: &Limits) -> StoreResult<bool> {
        let mut inv = self
            .calls
            .invocation(&self.calls.scripts.end_pass, Some(limits));
        inv.arg(id).arg(&self.channel).arg(reason.as_str());
        let (mut r, _) = self.calls.call("end_pass", &inv).await?;
        let had = r.flag()?;
        let until = r.int()?;
        self.revoked.add(
            [(id.to_owned(), until, reason)],
            self.calls.time.local_now(),
        );
        Ok(had)
    }

    async fn leave_queue(&self, id: &str) -> StoreResult<bool> {
        let mut inv = self.calls.invocation(&self.calls.scripts.leave_queue, None);
        inv.key(self.calls.beat_key(id)).arg(id);
        let (mut r, _) = self.calls.call("leave_queue", &inv).await?;
        r.flag()
    }

    async fn find_visitor(&self, queue_id: QueueId) -> StoreResult<Option<FoundVisitor>> {
        let mut inv = self
            .calls
            .invocation(&self.calls.scripts.find_visitor, None);
        inv.arg(queue_id.key());
        let (mut r, _) = self.calls.call("find_visitor", &inv).await?;
        let outcome = r.int()?;
        if outcome == 0 {
            return Ok(None);
        }
        let arrived_at = r.int()?;
        let state = match outcome {
            1 => VisitorState::Waiting {
                position: r.count()?,
                queued: r.count()?,
            },
            2 => VisitorState::Called { claim_by: r.int()? },
            3 => VisitorState::Inside {
                expires_at: r.int()?,
            },
            n => return Err(corrupt("find_visitor", format!("outcome {n}"))),
        };
        Ok(Some(FoundVisitor { arrived_at, state }))
    }

    async fn claim_ticket(
        &self,
        ip: &str,
        ticket: &str,
        limits: &IpLimits,
    ) -> StoreResult<IpClaim> {
        let mut inv = self.calls.scripts.claim_ticket.prepare_invoke();
        inv.key(format!("{}{ip}", self.ip_prefix))
            .key(&self.queue_key)
            .arg(self.calls.time.script_now())
            .arg(ticket)
            .arg(limits.per_minute)
            .arg(limits.burst)
            .arg(limits.max_live)
            .arg(JOIN_GRACE_MS)
            .arg(RECHECK_EVERY_MS)
            .arg(RETAIN_LIVE_MS);
        let mut r = self.calls.standalone("claim_ticket", &inv).await?;
        Ok(match r.int()? {
            0 => IpClaim::Allowed,
            1 => IpClaim::TooFast {
                retry_after_ms: r.int()?,
            },
            2 => IpClaim::TooManyLive,
            n => return Err(corrupt("claim_ticket", format!("outcome {n}"))),
        })
    }

    fn revoked(&self, id: &str) -> Option<RevokeReason> {
        self.revoked.reason(id, self.calls.time.local_now())
    }

    async fn note_network(&self, pass: &str, network: &str, window_ms: Millis) -> StoreResult<u64> {
        let mut inv = self.calls.scripts.note_network.prepare_invoke();
        inv.key(format!("{}{pass}", self.nets_prefix))
            .arg(self.calls.time.script_now())
            .arg(network)
            .arg(window_ms.max(1));
        let mut r = self.calls.standalone("note_network", &inv).await?;
        let count = r.int()?;
        u64::try_from(count).map_err(|_| corrupt("note_network", format!("count {count}")))
    }

    async fn spend_seed(&self, id: &str, until: Millis) -> StoreResult<bool> {
        let mut inv = self.calls.scripts.spend_seed.prepare_invoke();
        inv.key(format!("{}{id}", self.seed_prefix))
            .arg(self.calls.time.script_now())
            .arg(until);
        let mut r = self.calls.standalone("spend_seed", &inv).await?;
        r.flag()
    }

    async fn report_pass_use(&self, uses: &[(String, u64)]) -> StoreResult<SharedUse> {
        // The minute by this instance's clock: the keys must be named before the script runs.
        // Instances whose clocks differ count the same requests in neighbouring minutes for a
        // moment, and each reads both minutes, so a skew delays what they hear, no more.
        let minute = minute_of(self.calls.time.local_now());
        if uses.is_empty() {
            return Ok(SharedUse {
                minute,
                counts: Vec::new(),
            });
        }
        let mut inv = self.calls.scripts.report_pass_use.prepare_invoke();
        inv.key(format!("{}{minute}", self.uses_prefix))
            .key(format!("{}{}", self.uses_prefix, minute - MINUTE_MS))
            .arg(self.calls.time.script_now())
            .arg(minute + 2 * MINUTE_MS);
        for (pass, count) in uses {
            inv.arg(pass).arg(*count);
        }
        let mut r = self.calls.standalone("report_pass_use", &inv).await?;
        let counts = uses
            .iter()
            .map(|_| {
                Ok(MinuteCounts {
                    current: r.count()?,
                    previous: r.count()?,
                })
            })
            .collect::<StoreResult<_>>()?;
        Ok(SharedUse { minute, counts })
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
            joined_total: r.count()?,
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

    async fn report_window(&self, window: &Signal) -> StoreResult<()> {
        if window.requests == 0 {
            return Ok(());
        }
        let mut inv = self
            .calls
            .invocation(&self.calls.scripts.report_window, None);
        inv.key(format!("{}{}", self.window_prefix, window.started_at))
            .arg(window.ended_at)
            .arg(window_kept_until(window));
        for (field, count) in autopilot::additions(window) {
            inv.arg(field).arg(count);
        }
        self.calls.call("report_window", &inv).await.map(drop)
    }

    async fn publish_shares(&self, instance: &str, shares: &[(Millis, Share)]) -> StoreResult<()> {
        if shares.is_empty() {
            return Ok(());
        }
        let mut inv = self
            .calls
            .invocation(&self.calls.scripts.publish_shares, None);
        inv.arg(instance).arg(SHARES_KEPT_MS);
        for (minute, share) in shares {
            let json = serde_json::to_string(share)
                .map_err(|e| StoreError::Corrupt(format!("cannot encode a share: {e}")))?;
            inv.key(format!("{}{minute}", self.share_prefix))
                .arg(minute)
                .arg(json);
        }
        self.calls.call("publish_shares", &inv).await.map(drop)
    }

    async fn shares_of(
        &self,
        minutes: &[Millis],
        except: &str,
    ) -> StoreResult<Vec<(Millis, Share)>> {
        if minutes.is_empty() {
            return Ok(Vec::new());
        }
        let mut inv = self.calls.invocation(&self.calls.scripts.read_shares, None);
        inv.arg(except).arg(SHARES_KEPT_MS);
        for minute in minutes {
            inv.key(format!("{}{minute}", self.share_prefix))
                .arg(minute);
        }
        let (mut r, _) = self.calls.call("read_shares", &inv).await?;
        let mut shares = Vec::new();
        for minute in minutes {
            for _ in 0..r.count()? {
                let json = r.string()?;
                let share = serde_json::from_str(&json)
                    .map_err(|e| corrupt("read_shares", format!("{json:?}: {e}")))?;
                shares.push((*minute, share));
            }
        }
        Ok(shares)
    }

    async fn read_window(&self, started_at: Millis) -> StoreResult<Signal> {
        let mut inv = self.calls.invocation(&self.calls.scripts.read_window, None);
        inv.key(format!("{}{started_at}", self.window_prefix));
        let (mut r, _) = self.calls.call("read_window", &inv).await?;
        if !r.flag()? {
            return Ok(Signal::new(started_at));
        }
        autopilot::decode(started_at, r.rest_strings()?)
    }

    async fn save_autopilot(&self, record: &AutopilotRecord, fence: u64) -> StoreResult<()> {
        let json = serde_json::to_string(record)
            .map_err(|e| StoreError::Corrupt(format!("cannot encode the autopilot record: {e}")))?;
        let mut inv = self
            .calls
            .invocation(&self.calls.scripts.save_autopilot, None);
        inv.key(&self.autopilot_key).arg(fence).arg(json);
        let (mut r, _) = self.calls.call("save_autopilot", &inv).await?;
        if !r.flag()? {
            return Err(StoreError::NotLeader(fence));
        }
        Ok(())
    }

    async fn load_autopilot(&self) -> StoreResult<AutopilotState> {
        let mut inv = self
            .calls
            .invocation(&self.calls.scripts.load_autopilot, None);
        inv.key(&self.autopilot_key);
        let (mut r, _) = self.calls.call("load_autopilot", &inv).await?;
        let paused = r.flag()?;
        let record = if r.flag()? {
            let json = r.string()?;
            Some(serde_json::from_str(&json).map_err(|e| {
                corrupt(
                    "load_autopilot",
                    format!("a record that does not read: {e}"),
                )
            })?)
        } else {
            None
        };
        Ok(AutopilotState { paused, record })
    }

    async fn set_autopilot_paused(&self, paused: bool) -> StoreResult<()> {
        let mut inv = self
            .calls
            .invocation(&self.calls.scripts.set_autopilot_paused, None);
        inv.key(&self.autopilot_key)
            .arg(if paused { "1" } else { "0" });
        self.calls
            .call("set_autopilot_paused", &inv)
            .await
            .map(drop)
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
        .await?;
        Ok(())
    }

    fn unacknowledged_admissions(&self) -> u64 {
        self.acks.as_ref().map_or(0, Acks::unacknowledged)
    }
}
