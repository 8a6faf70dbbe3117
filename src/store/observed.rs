//! A store that notes its own health: every call's outcome goes to the room's [`StoreHealth`],
//! so no caller writes it down by hand and none forgets to. The room's parts (the gate, the
//! loops, the admin API) all call the store through this.

use std::sync::Arc;

use async_trait::async_trait;

use super::{
    AutopilotRecord, AutopilotState, Joined, RevokeReason, SavedSettings, Store, StoreHealth,
    StoreResult, TicketPlace,
};
use crate::clock::Millis;
use crate::core::autopilot::Signal;
use crate::core::history::Share;
use crate::core::ip_limit::{IpClaim, IpLimits};
use crate::core::queue_id::QueueId;
use crate::core::room::{FoundVisitor, Limits, PollOutcome, RoomCounts, RoundReport};
use crate::core::sharing::SharedUse;

pub struct Observed {
    inner: Arc<dyn Store>,
    health: Arc<StoreHealth>,
}

impl Observed {
    pub fn new(inner: Arc<dyn Store>, health: Arc<StoreHealth>) -> Self {
        Self { inner, health }
    }

    fn noted<T>(&self, result: StoreResult<T>) -> StoreResult<T> {
        self.health.note(&result);
        result
    }

    /// [`Observed::noted`] for a call that may admit: its replicas' acknowledgement counted too.
    fn noted_admission<T>(&self, result: StoreResult<T>) -> StoreResult<T> {
        self.health
            .note_unacknowledged(self.inner.unacknowledged_admissions());
        self.noted(result)
    }
}

#[async_trait]
impl Store for Observed {
    async fn admit_directly(&self, id: &str, limits: &Limits) -> StoreResult<Option<Millis>> {
        self.noted_admission(self.inner.admit_directly(id, limits).await)
    }

    async fn admit_unconditionally(&self, id: &str, limits: &Limits) -> StoreResult<Millis> {
        self.noted_admission(self.inner.admit_unconditionally(id, limits).await)
    }

    async fn join(
        &self,
        id: &str,
        ticket: Option<&TicketPlace>,
        limits: &Limits,
    ) -> StoreResult<Joined> {
        self.noted(self.inner.join(id, ticket, limits).await)
    }

    async fn poll(&self, id: &str, limits: &Limits) -> StoreResult<PollOutcome> {
        self.noted_admission(self.inner.poll(id, limits).await)
    }

    async fn touch_pass(
        &self,
        id: &str,
        pass_epoch: &str,
        limits: &Limits,
    ) -> StoreResult<Option<Millis>> {
        self.noted(self.inner.touch_pass(id, pass_epoch, limits).await)
    }

    async fn end_pass(&self, id: &str, reason: RevokeReason, limits: &Limits) -> StoreResult<bool> {
        self.noted(self.inner.end_pass(id, reason, limits).await)
    }

    async fn leave_queue(&self, id: &str) -> StoreResult<bool> {
        self.noted(self.inner.leave_queue(id).await)
    }

    async fn find_visitor(&self, queue_id: QueueId) -> StoreResult<Option<FoundVisitor>> {
        self.noted(self.inner.find_visitor(queue_id).await)
    }

    async fn keep_alive(&self, ids: &[String], limits: &Limits) -> StoreResult<Vec<String>> {
        self.noted(self.inner.keep_alive(ids, limits).await)
    }

    async fn spend_seed(&self, id: &str, until: Millis) -> StoreResult<bool> {
        self.noted(self.inner.spend_seed(id, until).await)
    }

    async fn claim_ticket(
        &self,
        ip: &str,
        ticket: &str,
        limits: &IpLimits,
    ) -> StoreResult<IpClaim> {
        self.noted(self.inner.claim_ticket(ip, ticket, limits).await)
    }

    fn revoked(&self, id: &str) -> Option<RevokeReason> {
        self.inner.revoked(id)
    }

    async fn note_network(&self, pass: &str, network: &str, window_ms: Millis) -> StoreResult<u64> {
        self.noted(self.inner.note_network(pass, network, window_ms).await)
    }

    async fn report_pass_use(&self, uses: &[(String, u64)]) -> StoreResult<SharedUse> {
        self.noted(self.inner.report_pass_use(uses).await)
    }

    async fn admission_round(&self, limits: &Limits, fence: u64) -> StoreResult<RoundReport> {
        self.noted(self.inner.admission_round(limits, fence).await)
    }

    async fn counts(&self) -> StoreResult<RoomCounts> {
        self.noted(self.inner.counts().await)
    }

    async fn lead(&self, instance: &str, ttl_ms: Millis) -> StoreResult<Option<u64>> {
        self.noted(self.inner.lead(instance, ttl_ms).await)
    }

    async fn resign(&self, instance: &str) -> StoreResult<()> {
        self.noted(self.inner.resign(instance).await)
    }

    async fn leader(&self) -> StoreResult<Option<String>> {
        self.noted(self.inner.leader().await)
    }

    async fn save_settings(&self, json: &str) -> StoreResult<u64> {
        self.noted(self.inner.save_settings(json).await)
    }

    async fn load_settings(&self) -> StoreResult<Option<SavedSettings>> {
        self.noted(self.inner.load_settings().await)
    }

    async fn report_window(&self, window: &Signal) -> StoreResult<()> {
        self.noted(self.inner.report_window(window).await)
    }

    async fn publish_shares(&self, instance: &str, shares: &[(Millis, Share)]) -> StoreResult<()> {
        self.noted(self.inner.publish_shares(instance, shares).await)
    }

    async fn shares_of(
        &self,
        minutes: &[Millis],
        except: &str,
    ) -> StoreResult<Vec<(Millis, Share)>> {
        self.noted(self.inner.shares_of(minutes, except).await)
    }

    async fn read_window(&self, started_at: Millis) -> StoreResult<Signal> {
        self.noted(self.inner.read_window(started_at).await)
    }

    async fn save_autopilot(&self, record: &AutopilotRecord, fence: u64) -> StoreResult<()> {
        self.noted(self.inner.save_autopilot(record, fence).await)
    }

    async fn load_autopilot(&self) -> StoreResult<AutopilotState> {
        self.noted(self.inner.load_autopilot().await)
    }

    async fn set_autopilot_paused(&self, paused: bool) -> StoreResult<()> {
        self.noted(self.inner.set_autopilot_paused(paused).await)
    }

    async fn epoch(&self) -> StoreResult<String> {
        self.noted(self.inner.epoch().await)
    }

    async fn ping(&self) -> StoreResult<()> {
        self.noted(self.inner.ping().await)
    }

    fn unacknowledged_admissions(&self) -> u64 {
        self.inner.unacknowledged_admissions()
    }
}
