//! The admission loop, one Pingora background service for every room. Every instance runs it;
//! only the holder of the group's lease admits, each room's round fenced with the lease's token.
//! What a tick does in each room is the room's own (`room::admission`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use pingora_core::server::ShutdownWatch;
use pingora_core::services::background::BackgroundService;

use crate::clock::{Millis, millis};
use crate::room::admission::RoomLoop;
use crate::store::Store;

pub struct AdmissionLoop {
    rooms: Vec<Arc<RoomLoop>>,
    /// The store holding the group's one lease: the first room's.
    lease: Arc<dyn Store>,
    instance: String,
    leader_ttl_ms: Millis,
    is_leader: AtomicBool,
}

impl AdmissionLoop {
    /// `lease` is the store of the group's one lease: the first room's, so that its health
    /// notes the lease's calls too.
    pub fn new(
        lease: Arc<dyn Store>,
        rooms: Vec<Arc<RoomLoop>>,
        instance: String,
        leader_ttl: Duration,
    ) -> Self {
        Self {
            rooms,
            lease,
            instance,
            leader_ttl_ms: millis(leader_ttl),
            is_leader: AtomicBool::new(false),
        }
    }

    pub fn instance(&self) -> &str {
        &self.instance
    }

    pub fn is_leader(&self) -> bool {
        self.is_leader.load(Ordering::Relaxed)
    }

    /// The instance that holds the group's lease now.
    pub async fn leader(&self) -> Option<String> {
        self.lease.leader().await.ok().flatten()
    }

    pub fn room(&self, id: &str) -> Option<&Arc<RoomLoop>> {
        self.rooms.iter().find(|r| r.id() == id)
    }

    /// One pass of the loop over every room. Public so tests can step it deterministically.
    pub async fn tick(&self) {
        let fence = self.lease.lead(&self.instance, self.leader_ttl_ms).await;
        let fence = fence.ok().flatten();
        self.is_leader.store(fence.is_some(), Ordering::Relaxed);
        for room in &self.rooms {
            room.tick(fence, &self.instance).await;
        }
    }

    /// The admission interval of the busiest-paced room: every room is looked at that often.
    fn every(&self) -> Duration {
        self.rooms
            .iter()
            .map(|r| r.admission_interval())
            .min()
            .unwrap_or(Duration::from_millis(200))
    }
}

#[async_trait]
impl BackgroundService for AdmissionLoop {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        let mut every = self.every();
        let mut interval = tokio::time::interval(every);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = shutdown.changed() => break,
                _ = interval.tick() => {
                    self.tick().await;
                    let now_every = self.every();
                    if now_every != every {
                        every = now_every;
                        interval = tokio::time::interval(every);
                    }
                }
            }
        }
        // Hand the leadership over at once instead of making the others wait for the TTL.
        if let Err(e) = self.lease.resign(&self.instance).await {
            log::warn!("could not resign the admission leadership: {e}");
        }
    }
}
