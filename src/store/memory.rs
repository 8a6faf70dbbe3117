//! The in-process store: the room model behind one mutex. The default, so a single instance
//! needs nothing else installed. It has no replicas, so `[store] replica_acks` means nothing to
//! it (`unacknowledged_admissions` stays 0).

use std::collections::BTreeMap;
use std::sync::Mutex;

use async_trait::async_trait;

use crate::clock::{Millis, SharedClock};
use crate::core::autopilot::Signal;
use crate::core::expiring::ExpiringSet;
use crate::core::history::Share;
use crate::core::ip_limit::{IpClaim, IpLedger, IpLimits};
use crate::core::queue_id::QueueId;
use crate::core::room::{FoundVisitor, Limits, PollOutcome, RoomCounts, RoomState, RoundReport};
use crate::core::sharing::{NetworkLedger, SharedUse, UseCounts};
use crate::store::{
    AutopilotRecord, AutopilotState, Joined, RevokeReason, SavedSettings, Store, StoreError,
    StoreResult, TicketPlace, share_kept, window_kept_until,
};

#[derive(Debug)]
struct Leader {
    instance: String,
    until: Millis,
    fence: u64,
}

/// An autopilot window as reported so far, and until when it is kept.
#[derive(Debug)]
struct KeptWindow {
    signal: Signal,
    until: Millis,
}

#[derive(Debug)]
struct Inner {
    room: RoomState,
    leader: Option<Leader>,
    last_fence: u64,
    /// The highest fence a round used: the lease may live in another room's store.
    seen_fence: u64,
    settings: Option<SavedSettings>,
    ips: IpLedger,
    /// Every pass's client networks within the last session.
    networks: NetworkLedger,
    /// Every pass's requests in this minute and the last.
    uses: UseCounts,
    /// Passes revoked for sharing, until they are no longer refused (the room keeps the rest).
    shared: ExpiringSet,
    /// Proof-of-work seeds spent, until they expire (an expired seed is refused unopened).
    spent_seeds: ExpiringSet,
    autopilot: AutopilotState,
    /// By `started_at`.
    windows: BTreeMap<Millis, KeptWindow>,
    /// Each minute's published shares, by instance.
    shares: BTreeMap<Millis, BTreeMap<String, Share>>,
}

impl Inner {
    /// Whether `fence` may act for the leader, recording it: one lease leads every room of a
    /// proxy (it may be another room's store's), so a token below the highest seen here is
    /// refused, and a leader that was replaced can never act after its successor has.
    fn leads(&mut self, fence: u64) -> bool {
        if fence < self.last_fence.max(self.seen_fence) {
            return false;
        }
        self.seen_fence = fence;
        true
    }
}

pub struct MemoryStore {
    clock: SharedClock,
    inner: Mutex<Inner>,
}

impl MemoryStore {
    /// `seed` drives random queueing; a fixed one makes tests repeatable.
    pub fn new(clock: SharedClock, seed: u64) -> Self {
        let epoch = format!("{:016x}", rand::random::<u64>());
        Self {
            clock,
            inner: Mutex::new(Inner {
                room: RoomState::new(epoch, seed),
                leader: None,
                last_fence: 0,
                seen_fence: 0,
                settings: None,
                ips: IpLedger::default(),
                networks: NetworkLedger::default(),
                uses: UseCounts::default(),
                shared: ExpiringSet::default(),
                spent_seeds: ExpiringSet::default(),
                autopilot: AutopilotState::default(),
                windows: BTreeMap::new(),
                shares: BTreeMap::new(),
            }),
        }
    }

    fn with<T>(&self, f: impl FnOnce(&mut Inner, Millis) -> T) -> T {
        let now = self.clock.now_ms();
        // A panic while holding the lock cannot leave the room half-updated in a way that
        // matters more than stopping service, so a poisoned lock is taken over.
        let mut inner = self
            .inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        f(&mut inner, now)
    }
}

#[async_trait]
impl Store for MemoryStore {
    async fn admit_directly(&self, id: &str, limits: &Limits) -> StoreResult<Option<Millis>> {
        Ok(self.with(|s, now| s.room.admit_directly(id, limits, now)))
    }

    async fn admit_unconditionally(&self, id: &str, limits: &Limits) -> StoreResult<Millis> {
        Ok(self.with(|s, now| s.room.admit_unconditionally(id, limits, now)))
    }

    async fn join(
        &self,
        id: &str,
        ticket: Option<&TicketPlace>,
        limits: &Limits,
    ) -> StoreResult<Joined> {
        Ok(self.with(|s, now| {
            let restore = ticket
                .filter(|t| t.epoch != s.room.epoch())
                .map(|t| t.place);
            let j = s.room.join(id, restore, limits, now);
            Joined {
                place: j.place,
                position: j.position,
                queued: j.queued,
                epoch: s.room.epoch().to_owned(),
            }
        }))
    }

    async fn poll(&self, id: &str, limits: &Limits) -> StoreResult<PollOutcome> {
        Ok(self.with(|s, now| s.room.poll(id, limits, now)))
    }

    async fn touch_pass(
        &self,
        id: &str,
        pass_epoch: &str,
        limits: &Limits,
    ) -> StoreResult<Option<Millis>> {
        Ok(self.with(|s, now| {
            let expires_at = now + limits.session_ms;
            let outlived_a_loss = pass_epoch != s.room.epoch();
            s.room
                .touch_pass(id, expires_at, outlived_a_loss, now)
                .then_some(expires_at)
        }))
    }

    async fn end_pass(&self, id: &str, reason: RevokeReason, limits: &Limits) -> StoreResult<bool> {
        Ok(self.with(|s, now| {
            let had = s.room.end_pass(id, limits, now);
            if reason == RevokeReason::Shared {
                s.shared.take_expired(now);
                s.shared.set(id, now + limits.session_ms);
            }
            had
        }))
    }

    async fn leave_queue(&self, id: &str) -> StoreResult<bool> {
        Ok(self.with(|s, _| s.room.leave_queue(id)))
    }

    async fn find_visitor(&self, queue_id: QueueId) -> StoreResult<Option<FoundVisitor>> {
        Ok(self.with(|s, _| s.room.find_visitor(queue_id)))
    }

    async fn keep_alive(&self, ids: &[String], limits: &Limits) -> StoreResult<Vec<String>> {
        Ok(self.with(|s, now| s.room.keep_alive(ids, limits, now)))
    }

    async fn claim_ticket(
        &self,
        ip: &str,
        ticket: &str,
        limits: &IpLimits,
    ) -> StoreResult<IpClaim> {
        Ok(self.with(|s, now| {
            let room = &s.room;
            s.ips
                .claim(ip, ticket, limits, now, |id| room.is_waiting(id))
        }))
    }

    fn revoked(&self, id: &str) -> Option<RevokeReason> {
        self.with(|s, _| {
            if !s.room.is_revoked(id) {
                None
            } else if s.shared.contains(id) {
                Some(RevokeReason::Shared)
            } else {
                Some(RevokeReason::Ended)
            }
        })
    }

    async fn note_network(&self, pass: &str, network: &str, window_ms: Millis) -> StoreResult<u64> {
        Ok(self.with(|s, now| s.networks.note(pass, network, window_ms, now)))
    }

    async fn spend_seed(&self, id: &str, until: Millis) -> StoreResult<bool> {
        Ok(self.with(|s, now| {
            // A seed opens until its expiry included (`Signer::open_seed`): spent until then too.
            s.spent_seeds.take_expired(now.saturating_sub(1));
            if s.spent_seeds.contains(id) {
                return false;
            }
            s.spent_seeds.set(id, until);
            true
        }))
    }

    async fn report_pass_use(&self, uses: &[(String, u64)]) -> StoreResult<SharedUse> {
        Ok(self.with(|s, now| s.uses.add(uses, now)))
    }

    async fn admission_round(&self, limits: &Limits, fence: u64) -> StoreResult<RoundReport> {
        self.with(|s, now| {
            if !s.leads(fence) {
                return Err(StoreError::NotLeader(fence));
            }
            Ok(s.room.admission_round(limits, now))
        })
    }

    async fn counts(&self) -> StoreResult<RoomCounts> {
        Ok(self.with(|s, now| s.room.counts(now)))
    }

    async fn lead(&self, instance: &str, ttl_ms: Millis) -> StoreResult<Option<u64>> {
        Ok(self.with(|s, now| match &mut s.leader {
            Some(l) if l.until > now && l.instance != instance => None,
            Some(l) if l.until > now => {
                l.until = now + ttl_ms;
                Some(l.fence)
            }
            _ => {
                s.last_fence += 1;
                s.leader = Some(Leader {
                    instance: instance.to_owned(),
                    until: now + ttl_ms,
                    fence: s.last_fence,
                });
                Some(s.last_fence)
            }
        }))
    }

    async fn resign(&self, instance: &str) -> StoreResult<()> {
        self.with(|s, _| {
            if s.leader.as_ref().is_some_and(|l| l.instance == instance) {
                s.leader = None;
            }
        });
        Ok(())
    }

    async fn leader(&self) -> StoreResult<Option<String>> {
        Ok(self.with(|s, now| {
            s.leader
                .as_ref()
                .filter(|l| l.until > now)
                .map(|l| l.instance.clone())
        }))
    }

    async fn save_settings(&self, json: &str) -> StoreResult<u64> {
        Ok(self.with(|s, _| {
            let version = s.settings.as_ref().map_or(1, |v| v.version + 1);
            s.settings = Some(SavedSettings {
                version,
                json: json.to_owned(),
            });
            version
        }))
    }

    async fn load_settings(&self) -> StoreResult<Option<SavedSettings>> {
        Ok(self.with(|s, _| s.settings.clone()))
    }

    async fn report_window(&self, window: &Signal) -> StoreResult<()> {
        if window.requests == 0 {
            return Ok(());
        }
        let until = window_kept_until(window);
        self.with(|s, now| {
            s.windows.retain(|_, kept| kept.until > now);
            if until <= now {
                return;
            }
            let kept = s
                .windows
                .entry(window.started_at)
                .or_insert_with(|| KeptWindow {
                    signal: Signal::new(window.started_at),
                    until,
                });
            kept.signal.merge(window);
            kept.until = kept.until.max(until);
        });
        Ok(())
    }

    async fn publish_shares(&self, instance: &str, shares: &[(Millis, Share)]) -> StoreResult<()> {
        self.with(|s, now| {
            s.shares.retain(|minute, _| share_kept(*minute, now));
            for (minute, share) in shares {
                if share_kept(*minute, now) {
                    s.shares
                        .entry(*minute)
                        .or_default()
                        .insert(instance.to_owned(), share.clone());
                }
            }
        });
        Ok(())
    }

    async fn shares_of(
        &self,
        minutes: &[Millis],
        except: &str,
    ) -> StoreResult<Vec<(Millis, Share)>> {
        Ok(self.with(|s, now| {
            minutes
                .iter()
                .filter(|minute| share_kept(**minute, now))
                .filter_map(|minute| s.shares.get(minute).map(|by| (minute, by)))
                .flat_map(|(minute, by)| {
                    by.iter()
                        .filter(|(instance, _)| *instance != except)
                        .map(|(_, share)| (*minute, share.clone()))
                })
                .collect()
        }))
    }

    async fn read_window(&self, started_at: Millis) -> StoreResult<Signal> {
        Ok(self.with(|s, now| {
            s.windows
                .get(&started_at)
                .filter(|kept| kept.until > now)
                .map_or_else(|| Signal::new(started_at), |kept| kept.signal.clone())
        }))
    }

    async fn save_autopilot(&self, record: &AutopilotRecord, fence: u64) -> StoreResult<()> {
        self.with(|s, _| {
            if !s.leads(fence) {
                return Err(StoreError::NotLeader(fence));
            }
            s.autopilot.record = Some(record.clone());
            Ok(())
        })
    }

    async fn load_autopilot(&self) -> StoreResult<AutopilotState> {
        Ok(self.with(|s, _| s.autopilot.clone()))
    }

    async fn set_autopilot_paused(&self, paused: bool) -> StoreResult<()> {
        self.with(|s, _| s.autopilot.paused = paused);
        Ok(())
    }

    async fn epoch(&self) -> StoreResult<String> {
        Ok(self.with(|s, _| s.room.epoch().to_owned()))
    }

    async fn ping(&self) -> StoreResult<()> {
        Ok(())
    }
}
