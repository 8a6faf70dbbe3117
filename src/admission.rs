//! The admission loop, a Pingora background service. Every instance runs it; only the holder of
//! the store's leadership admits. Every instance also refreshes its view of the room (gauges,
//! the observed admission rate) and picks up settings changed on any instance.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use pingora_core::server::ShutdownWatch;
use pingora_core::services::background::BackgroundService;

use crate::clock::Millis;
use crate::config::RoomSettings;
use crate::config::file::RoomSection;
use crate::core::estimate::RateEstimator;
use crate::gate::{Gate, RoomView};
use crate::store::StoreError;

pub struct AdmissionLoop {
    gate: Arc<Gate>,
    instance: String,
    leader_ttl_ms: Millis,
    is_leader: AtomicBool,
    settings_version: AtomicU64,
    estimator: Mutex<RateEstimator>,
}

impl AdmissionLoop {
    pub fn new(gate: Arc<Gate>, instance: String, leader_ttl: Duration) -> Self {
        Self {
            gate,
            instance,
            leader_ttl_ms: Millis::try_from(leader_ttl.as_millis()).unwrap_or(Millis::MAX),
            is_leader: AtomicBool::new(false),
            settings_version: AtomicU64::new(0),
            estimator: Mutex::new(RateEstimator::default()),
        }
    }

    pub fn instance(&self) -> &str {
        &self.instance
    }

    pub fn is_leader(&self) -> bool {
        self.is_leader.load(Ordering::Relaxed)
    }

    pub fn settings_version(&self) -> u64 {
        self.settings_version.load(Ordering::Relaxed)
    }

    /// Saves validated settings in the store (so every instance, and the next start, applies
    /// them) and applies them here at once. Returns the effective [room] section.
    pub async fn publish_settings(
        &self,
        settings: RoomSettings,
    ) -> Result<RoomSection, StoreError> {
        let section = settings.section.clone();
        let json = serde_json::to_string(&section)
            .map_err(|e| StoreError::Corrupt(format!("cannot encode settings: {e}")))?;
        let saved = self.gate.store.save_settings(&json).await;
        self.gate.note_store(&saved);
        let version = saved?;
        self.settings_version.fetch_max(version, Ordering::Relaxed);
        self.gate.apply_settings(settings);
        log::info!("room settings changed live (version {version})");
        Ok(section)
    }

    /// Applies settings another instance (or an earlier run) saved.
    async fn sync_settings(&self) -> Result<(), StoreError> {
        let Some(saved) = self.gate.store.load_settings().await? else {
            return Ok(());
        };
        if saved.version <= self.settings_version() {
            return Ok(());
        }
        let parsed = serde_json::from_str::<RoomSection>(&saved.json)
            .map_err(|e| e.to_string())
            .and_then(|section| RoomSettings::from_section(&section).map_err(|e| e.to_string()));
        match parsed {
            Ok(settings) => {
                self.gate.apply_settings(settings);
                log::info!("applied room settings version {}", saved.version);
            }
            // Never stop admitting over a bad record: keep what runs and say so once.
            Err(e) => log::error!(
                "ignoring saved room settings version {}: {e}",
                saved.version
            ),
        }
        self.settings_version
            .fetch_max(saved.version, Ordering::Relaxed);
        Ok(())
    }

    async fn admit(&self) -> Result<(), StoreError> {
        let store = &self.gate.store;
        let fence = store.lead(&self.instance, self.leader_ttl_ms).await?;
        self.is_leader.store(fence.is_some(), Ordering::Relaxed);
        self.gate.metrics.leader.set(i64::from(fence.is_some()));
        let Some(fence) = fence else {
            return Ok(());
        };
        let limits = self.gate.settings().limits();
        let report = store.admission_round(&limits, fence).await?;
        let m = &self.gate.metrics;
        m.expired.inc_by(report.expired);
        m.abandoned.inc_by(report.abandoned);
        m.no_shows.inc_by(report.no_shows);
        Ok(())
    }

    async fn observe(&self) -> Result<(), StoreError> {
        self.gate.set_epoch(&self.gate.store.epoch().await?);
        let polled = self.gate.take_polled();
        let limits = self.gate.settings().limits();
        let called = match self.gate.store.keep_alive(&polled, &limits).await {
            Ok(called) => called,
            Err(e) => {
                self.gate.return_polled(polled);
                return Err(e);
            }
        };
        let counts = self.gate.store.counts().await?;
        self.gate.set_view(RoomView {
            admitted_total: counts.admitted_total,
            queued: counts.queued,
            called: called.into_iter().collect(),
        });
        let m = &self.gate.metrics;
        let gauge = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        m.occupancy.set(gauge(counts.occupancy()));
        m.queue_length.set(gauge(counts.queued));
        let now = self.gate.clock.now_ms();
        let rate = {
            let mut estimator = self
                .estimator
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            estimator.observe(now, counts.admitted_total);
            estimator.per_second()
        };
        self.gate.set_rate(rate);
        Ok(())
    }

    /// One pass of the loop. Public so tests can step it deterministically.
    pub async fn tick(&self) {
        let synced = self.sync_settings().await;
        self.gate.note_store(&synced);
        let admitted = self.admit().await;
        if admitted.is_err() {
            self.is_leader.store(false, Ordering::Relaxed);
            self.gate.metrics.leader.set(0);
        }
        self.gate.note_store(&admitted);
        let observed = self.observe().await;
        self.gate.note_store(&observed);
    }
}

#[async_trait]
impl BackgroundService for AdmissionLoop {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        let mut every = self.gate.settings().admission_interval;
        let mut interval = tokio::time::interval(every);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = shutdown.changed() => break,
                _ = interval.tick() => {
                    self.tick().await;
                    let now_every = self.gate.settings().admission_interval;
                    if now_every != every {
                        every = now_every;
                        interval = tokio::time::interval(every);
                    }
                }
            }
        }
        // Hand the leadership over at once instead of making the others wait for the TTL.
        if let Err(e) = self.gate.store.resign(&self.instance).await {
            log::warn!("could not resign the admission leadership: {e}");
        }
    }
}
