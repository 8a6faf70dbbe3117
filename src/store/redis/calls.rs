//! Script calls: the room's keys and the common arguments every script takes, the call itself
//! with its retry and time limit, and the epoch each answer starts with.

use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use redis::{Script, ScriptInvocation, Value};

use super::TimeSource;
use super::conn::{Conn, within};
use super::scripts::{KEY_NAMES, Reply, Scripts};
use crate::core::room::{Limits, Pick};
use crate::store::StoreResult;

/// Waiting visitors' heartbeats are spread over this many small hashes (`…:beats:<n>`, see
/// lua/common.lua) so that each stays in Redis's compact listpack encoding: up to
/// `hash-max-listpack-entries` (512 by default) per shard, about 400 000 waiting visitors in all.
/// A shard costs about 150 bytes of its own (its key, its entry in the beats index): little per
/// visitor from about 10 000 waiting. Every instance of a room must use the same count and
/// [`beat_shard`]: a heartbeat left in another shard would lapse and drop its visitor.
const BEAT_SHARDS: usize = 1024;

/// How many heartbeat shards one admission round sweeps at most; the rest wait for the next.
pub(super) const SWEEP_SHARDS_PER_ROUND: usize = 32;

/// The heartbeat shard of a visitor: FNV-1a, fixed so that every instance agrees.
pub(super) fn beat_shard(id: &str) -> usize {
    let hash = id.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    (hash % BEAT_SHARDS as u64) as usize
}

/// What a script call needs, shared with the task that sends the joins.
pub(super) struct Calls {
    pub(super) conn: Conn,
    keys: Vec<String>,
    /// The heartbeat shards' keys, by shard.
    pub(super) beat_keys: Vec<String>,
    pub(super) scripts: Scripts,
    pub(super) time: TimeSource,
    pub(super) command_timeout: Duration,
    /// The epoch this instance saw last ('' before any): how a loss of the data is told apart
    /// from a new room.
    known_epoch: Mutex<String>,
}

impl Calls {
    /// `base`: the prefix of every key of the room, `{prefix}{room}:`.
    pub(super) fn new(
        conn: Conn,
        base: &str,
        time: TimeSource,
        command_timeout: Duration,
        known_epoch: String,
    ) -> Self {
        Self {
            conn,
            keys: KEY_NAMES.iter().map(|k| format!("{base}{k}")).collect(),
            beat_keys: (0..BEAT_SHARDS)
                .map(|n| format!("{base}beats:{n}"))
                .collect(),
            scripts: Scripts::new(),
            time,
            command_timeout,
            known_epoch: Mutex::new(known_epoch),
        }
    }

    fn known_epoch(&self) -> MutexGuard<'_, String> {
        self.known_epoch
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub(super) fn beat_key(&self, id: &str) -> &str {
        &self.beat_keys[beat_shard(id)]
    }

    pub(super) fn is_beat_key(&self, key: &str) -> bool {
        key.rsplit_once(':')
            .and_then(|(_, n)| n.parse::<usize>().ok())
            .and_then(|n| self.beat_keys.get(n))
            .is_some_and(|k| k == key)
    }

    /// A script call with the room's keys and the common arguments, plus the limits if given.
    pub(super) fn invocation<'a>(
        &'a self,
        script: &'a Script,
        limits: Option<&Limits>,
    ) -> ScriptInvocation<'a> {
        let mut inv = script.prepare_invoke();
        for key in &self.keys {
            inv.key(key);
        }
        let known = self.known_epoch().clone();
        inv.arg(self.time.script_now())
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
    pub(super) async fn call(
        &self,
        script: &'static str,
        inv: &ScriptInvocation<'_>,
    ) -> StoreResult<(Reply, String)> {
        let attempts = async {
            let mut conn = self.conn.clone();
            match inv.invoke_async::<Value>(&mut conn).await {
                // The connection broke (typically: Redis restarted) and the manager reconnects:
                // one more try, within the same time limit. A step that ran but whose answer was
                // lost would run twice: harmless for every step but a round (the admission loop
                // runs the next one soon) and an autopilot window (counted twice, it would weigh
                // double in the merge), which are not retried.
                Err(e)
                    if retry_allowed(script) && (e.is_connection_dropped() || e.is_io_error()) =>
                {
                    inv.invoke_async::<Value>(&mut conn).await
                }
                other => other,
            }
        };
        let value = within(self.command_timeout, attempts)
            .await
            .map_err(|e| e.in_script(script))?;
        let mut reply = Reply::new(script, value)?;
        let epoch = reply.string()?;
        let mut known = self.known_epoch();
        if *known != epoch {
            known.clone_from(&epoch);
        }
        Ok((reply, epoch))
    }

    /// Runs a script that stands alone, with keys and arguments of its own (the per-address
    /// limit, a pass's networks, pass use).
    pub(super) async fn standalone(
        &self,
        script: &'static str,
        inv: &ScriptInvocation<'_>,
    ) -> StoreResult<Reply> {
        let mut conn = self.conn.clone();
        // Not retried on a broken connection: a claim that ran twice would count twice, and the
        // gate treats a failed claim like a failed join anyway; a pass's network is reported
        // again by its next request; pass use counted twice would cost the pass twice; a seed
        // spent twice would answer "spent" to the visitor who spent it (it asks for a new one).
        let value = within(self.command_timeout, inv.invoke_async::<Value>(&mut conn))
            .await
            .map_err(|e| e.in_script(script))?;
        Reply::new(script, value)
    }
}

fn retry_allowed(script: &str) -> bool {
    !matches!(script, "admission_round" | "report_window")
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
