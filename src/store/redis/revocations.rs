//! The ended passes each instance keeps in memory to answer `revoked` without a round trip,
//! and the task that keeps them in step with the other instances.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use redis::{PushInfo, PushKind};
use tokio::sync::mpsc::UnboundedReceiver;

use super::TimeSource;
use super::conn::{Conn, Feed, within};
use super::scripts::text;
use crate::clock::Millis;
use crate::store::RevokeReason;

/// How often the revoked set is reloaded, on top of the pub/sub feed.
const RELOAD_REVOKED_EVERY: Duration = Duration::from_secs(1);

/// The member of the revoked set that says a pass was revoked for sharing (see end_pass.lua).
const SHARED_PREFIX: &str = "shared:";

/// Passes ended on any instance, with the time until which they are refused and why.
#[derive(Default)]
pub(super) struct Revocations {
    until: RwLock<HashMap<String, (Millis, RevokeReason)>>,
}

impl Revocations {
    pub(super) fn reason(&self, id: &str, now: Millis) -> Option<RevokeReason> {
        // A poisoned lock only means a panic elsewhere; the map itself is always whole.
        let until = self.until.read().unwrap_or_else(|p| p.into_inner());
        until
            .get(id)
            .filter(|(u, _)| *u > now)
            .map(|(_, reason)| *reason)
    }

    /// Sharing is the stronger reason: once known, an entry keeps it.
    pub(super) fn add(
        &self,
        entries: impl IntoIterator<Item = (String, Millis, RevokeReason)>,
        now: Millis,
    ) {
        let mut until = self.until.write().unwrap_or_else(|p| p.into_inner());
        until.retain(|_, (u, _)| *u > now);
        for (id, u, reason) in entries {
            if u > now {
                let entry = until.entry(id).or_insert((u, reason));
                entry.0 = entry.0.max(u);
                if reason == RevokeReason::Shared {
                    entry.1 = reason;
                }
            }
        }
    }
}

/// An entry of the revoked set: a pass id, or `shared:<id>` for the reason.
fn revoked_member(member: String, until: Millis) -> (String, Millis, RevokeReason) {
    match member.strip_prefix(SHARED_PREFIX) {
        Some(id) => (id.to_owned(), until, RevokeReason::Shared),
        None => (member, until, RevokeReason::Ended),
    }
}

/// Follows the revocations of every instance: pub/sub messages as they come, and a reload of
/// the revoked set every second, which covers what the feed missed while disconnected.
pub(super) struct Follower {
    /// The subscribed connection, pinged every second so that it reconnects (and subscribes
    /// again) after an outage, or follows a new master.
    pub(super) feed: Feed,
    pub(super) conn: Conn,
    pub(super) pushes: UnboundedReceiver<PushInfo>,
    pub(super) revoked: Arc<Revocations>,
    /// The revoked set.
    pub(super) key: String,
    pub(super) time: TimeSource,
    pub(super) command_timeout: Duration,
}

impl Follower {
    pub(super) async fn run(mut self) {
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
        // data: [channel, "until id reason"] ("until id" from instances of the version before)
        let Some(Ok(payload)) = push.data.into_iter().nth(1).map(|v| text("feed", v)) else {
            log::warn!("malformed revocation message");
            return;
        };
        let mut words = payload.split(' ');
        let until = words.next().and_then(|u| u.parse::<Millis>().ok());
        let id = words.next().filter(|id| !id.is_empty());
        let reason = match words.next() {
            Some(word) => RevokeReason::parse(word),
            None => Some(RevokeReason::Ended),
        };
        match (until, id, reason) {
            (Some(until), Some(id), Some(reason)) => self
                .revoked
                .add([(id.to_owned(), until, reason)], self.time.local_now()),
            _ => log::warn!("malformed revocation message {payload:?}"),
        }
    }

    async fn reload(&mut self) {
        if let Err(e) = self.feed.keep(self.command_timeout).await {
            log::debug!("revocation feed down: redis: {e}");
        }
        let now = self.time.local_now();
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
                entries
                    .into_iter()
                    .map(|(member, until)| revoked_member(member, until as Millis)),
                now,
            ),
            Err(e) => log::debug!("revocations not reloaded: redis: {e}"),
        }
    }
}
