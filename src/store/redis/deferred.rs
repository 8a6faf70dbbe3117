//! A Redis store for a proxy that starts while Redis is unreachable. A running proxy survives
//! an outage (its connections reconnect, `[store] on_error` serves newcomers meanwhile); a
//! proxy that could not start during one would crash-loop on Kubernetes instead. So the start
//! goes on without the store: every call fails as during an outage until a connection made in
//! the background succeeds, and from then on the store is exactly the one a proxy started with
//! Redis up would have had (the epoch read then, the revocation feed subscribed then); the
//! admission loop reads the saved settings and takes part in the leadership at its next tick,
//! as after any outage.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use async_trait::async_trait;
use tokio::runtime::Handle;
use tokio::task::AbortHandle;

use super::conn::redacted;
use super::{RedisOptions, RedisStore};
use crate::clock::Millis;
use crate::core::autopilot::Signal;
use crate::core::history::Share;
use crate::core::ip_limit::{IpClaim, IpLimits};
use crate::core::queue_id::QueueId;
use crate::core::room::{FoundVisitor, Limits, PollOutcome, RoomCounts, RoundReport};
use crate::core::sharing::SharedUse;
use crate::store::{
    AutopilotRecord, AutopilotState, Joined, RevokeReason, SavedSettings, Store, StoreError,
    StoreResult, TicketPlace,
};

/// How long the background connection waits between attempts: about as soon as a running
/// proxy's next call would find Redis back.
const RETRY_EVERY: Duration = Duration::from_secs(1);

/// A Redis store connected in the background, once Redis answers.
pub struct DeferredRedisStore {
    store: Arc<OnceLock<RedisStore>>,
    /// What every call says until then (the URL without its credentials).
    unreachable: String,
    task: AbortHandle,
}

impl Drop for DeferredRedisStore {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl DeferredRedisStore {
    /// Keeps trying to connect with `options` on `runtime` (the one the store's connections
    /// live on) until Redis answers. `first_failure` is why the connection at start failed.
    pub fn start(options: RedisOptions, runtime: &Handle, first_failure: &StoreError) -> Self {
        let url = redacted(&options.url);
        let unreachable = format!("redis at {url} has not answered since this proxy started");
        let room = options.room.clone();
        log::warn!(
            "store: room {room}: Redis at {url} is unreachable at start ({first_failure}); \
             serving without it by [store] on_error, and joining it as soon as it answers"
        );
        let store = Arc::new(OnceLock::new());
        let slot = store.clone();
        let task = runtime
            .spawn(async move {
                let mut attempts: u64 = 1;
                loop {
                    tokio::time::sleep(RETRY_EVERY).await;
                    attempts += 1;
                    match RedisStore::connect(options.clone()).await {
                        Ok(connected) => {
                            let _ = slot.set(connected);
                            log::info!(
                                "store: room {room}: joined Redis at {url} after {attempts} attempts"
                            );
                            return;
                        }
                        // An outage that outlasts a minute is said again, not every second.
                        Err(e) if attempts.is_multiple_of(60) => {
                            log::warn!("store: room {room}: Redis still unreachable: {e}")
                        }
                        Err(e) => log::debug!("store: room {room}: not connected yet: {e}"),
                    }
                }
            })
            .abort_handle();
        Self {
            store,
            unreachable,
            task,
        }
    }

    fn store(&self) -> StoreResult<&RedisStore> {
        self.store
            .get()
            .ok_or_else(|| StoreError::Unavailable(self.unreachable.clone()))
    }
}

#[async_trait]
impl Store for DeferredRedisStore {
    async fn admit_directly(&self, id: &str, limits: &Limits) -> StoreResult<Option<Millis>> {
        self.store()?.admit_directly(id, limits).await
    }

    async fn admit_unconditionally(&self, id: &str, limits: &Limits) -> StoreResult<Millis> {
        self.store()?.admit_unconditionally(id, limits).await
    }

    async fn join(
        &self,
        id: &str,
        ticket: Option<&TicketPlace>,
        limits: &Limits,
    ) -> StoreResult<Joined> {
        self.store()?.join(id, ticket, limits).await
    }

    async fn poll(&self, id: &str, limits: &Limits) -> StoreResult<PollOutcome> {
        self.store()?.poll(id, limits).await
    }

    async fn touch_pass(
        &self,
        id: &str,
        pass_epoch: &str,
        limits: &Limits,
    ) -> StoreResult<Option<Millis>> {
        self.store()?.touch_pass(id, pass_epoch, limits).await
    }

    async fn end_pass(&self, id: &str, reason: RevokeReason, limits: &Limits) -> StoreResult<bool> {
        self.store()?.end_pass(id, reason, limits).await
    }

    async fn leave_queue(&self, id: &str) -> StoreResult<bool> {
        self.store()?.leave_queue(id).await
    }

    async fn find_visitor(&self, queue_id: QueueId) -> StoreResult<Option<FoundVisitor>> {
        self.store()?.find_visitor(queue_id).await
    }

    async fn keep_alive(&self, ids: &[String], limits: &Limits) -> StoreResult<Vec<String>> {
        self.store()?.keep_alive(ids, limits).await
    }

    async fn claim_ticket(
        &self,
        ip: &str,
        ticket: &str,
        limits: &IpLimits,
    ) -> StoreResult<IpClaim> {
        self.store()?.claim_ticket(ip, ticket, limits).await
    }

    /// Before the first connection no revocation is known here: passes ended elsewhere meanwhile
    /// are refused from the first reload of the revoked set after it.
    fn revoked(&self, id: &str) -> Option<RevokeReason> {
        self.store.get().and_then(|store| store.revoked(id))
    }

    async fn note_network(&self, pass: &str, network: &str, window_ms: Millis) -> StoreResult<u64> {
        self.store()?.note_network(pass, network, window_ms).await
    }

    async fn spend_seed(&self, id: &str, until: Millis) -> StoreResult<bool> {
        self.store()?.spend_seed(id, until).await
    }

    async fn report_pass_use(&self, uses: &[(String, u64)]) -> StoreResult<SharedUse> {
        self.store()?.report_pass_use(uses).await
    }

    async fn admission_round(&self, limits: &Limits, fence: u64) -> StoreResult<RoundReport> {
        self.store()?.admission_round(limits, fence).await
    }

    async fn counts(&self) -> StoreResult<RoomCounts> {
        self.store()?.counts().await
    }

    async fn lead(&self, instance: &str, ttl_ms: Millis) -> StoreResult<Option<u64>> {
        self.store()?.lead(instance, ttl_ms).await
    }

    async fn resign(&self, instance: &str) -> StoreResult<()> {
        self.store()?.resign(instance).await
    }

    async fn leader(&self) -> StoreResult<Option<String>> {
        self.store()?.leader().await
    }

    async fn save_settings(&self, json: &str) -> StoreResult<u64> {
        self.store()?.save_settings(json).await
    }

    async fn load_settings(&self) -> StoreResult<Option<SavedSettings>> {
        self.store()?.load_settings().await
    }

    async fn report_window(&self, window: &Signal) -> StoreResult<()> {
        self.store()?.report_window(window).await
    }

    async fn publish_shares(&self, instance: &str, shares: &[(Millis, Share)]) -> StoreResult<()> {
        self.store()?.publish_shares(instance, shares).await
    }

    async fn shares_of(
        &self,
        minutes: &[Millis],
        except: &str,
    ) -> StoreResult<Vec<(Millis, Share)>> {
        self.store()?.shares_of(minutes, except).await
    }

    async fn read_window(&self, started_at: Millis) -> StoreResult<Signal> {
        self.store()?.read_window(started_at).await
    }

    async fn save_autopilot(&self, record: &AutopilotRecord, fence: u64) -> StoreResult<()> {
        self.store()?.save_autopilot(record, fence).await
    }

    async fn load_autopilot(&self) -> StoreResult<AutopilotState> {
        self.store()?.load_autopilot().await
    }

    async fn set_autopilot_paused(&self, paused: bool) -> StoreResult<()> {
        self.store()?.set_autopilot_paused(paused).await
    }

    async fn epoch(&self) -> StoreResult<String> {
        self.store()?.epoch().await
    }

    async fn ping(&self) -> StoreResult<()> {
        self.store()?.ping().await
    }

    fn unacknowledged_admissions(&self) -> u64 {
        self.store()
            .map_or(0, RedisStore::unacknowledged_admissions)
    }
}
