//! One room's part of the admission loop (`service::admission` runs it for every room, on the
//! group's lease). Every instance ticks it: shares what it saw of pass use, applies settings
//! another instance saved (or writes what was held here during an outage), runs the admission
//! round when it leads, reads the room back into the view its waiting pages follow, beats their
//! heartbeat, and runs the room's autopilot (`room::autopilot`). Every store call goes through
//! the room's store, which notes its health.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{Map, Value};

use super::autopilot::RoomPilotLoop;
use super::changes::{self, Change, Changes, Saved};
use super::drop_history::DropHistory;
use super::{Pilot, Room, RoomView};
use crate::clock::{Millis, rfc3339_ms};
use crate::config::RoomSettings;
use crate::config::file::RoomSection;
use crate::core::estimate::RateEstimator;
use crate::core::history::{History, Start};
use crate::core::room::RoomCounts;
use crate::store::StoreError;

/// Open waiting pages hear from the proxy at least this often, so that proxies and load
/// balancers in front (often cut after 60 s of silence) keep their streams open.
const HEARTBEAT_EVERY_MS: Millis = 15_000;
/// How often a quiet room (nobody waiting or called) is looked at.
const QUIET_EVERY_MS: Millis = 1_000;
/// Passes in one report of pass use: a script call of this size takes Redis well under a
/// millisecond; more passes with requests in one tick make several calls.
const PASS_USE_BATCH: usize = 1_000;

/// One room's part of the admission loop: every tick it shares what this instance saw, applies
/// settings saved elsewhere, admits when this instance leads, reads the room back for the view
/// its pages follow, and runs the room's autopilot.
pub struct RoomLoop {
    room: Arc<Room>,
    settings_version: AtomicU64,
    estimator: Mutex<RateEstimator>,
    last_heartbeat: AtomicI64,
    /// Until when the room is quiet (nobody waiting or called): its ticks are skipped until then.
    quiet_until: AtomicI64,
    autopilot: RoomPilotLoop,
    /// The counts as the loop last read them, and when: what `/admin/state` shows, marked
    /// stale, while the store is unreachable.
    last_counts: Mutex<Option<(Millis, RoomCounts)>>,
    /// Keys the admin API changed while the store was unreachable (`suspended`, `queue_all`),
    /// with the values applied here: written to the store once it answers.
    pending: Mutex<Map<String, Value>>,
    /// When this instance first saw the store fail, while it fails (0 while it answers).
    outage_since: AtomicI64,
    /// No admission round before then: calls made before an outage are given a claim window
    /// after it (see `tick`).
    claims_held_until: AtomicI64,
    /// One writer of the room's settings at a time (the admin API, a reload, the loop writing
    /// what is pending or applying what another instance saved), so that a change held during
    /// an outage is never overwritten by a copy read before it.
    writing: tokio::sync::Mutex<()>,
    /// The file's settings for this room and how the live ones came to differ from them.
    record: Mutex<Record>,
    /// A record per minute of what the loop read, and this instance's share of it published
    /// (the drop report's).
    drop_history: DropHistory,
}

struct Record {
    /// As the file read at start or at the last reload says.
    file: Arc<RoomSection>,
    changes: Changes,
}

/// The keys the admin API may change while the store is unreachable: the runbook's fastest
/// rollback (`suspended`) and its brake (`queue_all`). Both are flags that make sense on one
/// instance at once; every other key (limits, events) is the whole room's and waits for the
/// store.
pub const HELD_DURING_OUTAGE: [&str; 2] = ["suspended", "queue_all"];

/// What became of a settings change.
#[derive(Debug)]
pub enum Published {
    /// Saved in the store: every instance applies it.
    Saved(RoomSection),
    /// Applied here only, the store being unreachable: `pending` (every key held so far, with
    /// its value) is written once it answers.
    Held {
        section: RoomSection,
        pending: Map<String, Value>,
    },
}

#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    #[error("not applied: {0}")]
    Store(#[from] StoreError),
    #[error(
        "not applied: the store is unreachable: only suspended and queue_all can be changed now \
         ({0})"
    )]
    NotHeld(StoreError),
}

impl RoomLoop {
    /// `start`: whether the store's counts began with this process (the memory store) or
    /// hold a past from before it (Redis).
    pub fn new(room: Arc<Room>, start: Start) -> Self {
        Self {
            autopilot: RoomPilotLoop::new(room.clone()),
            settings_version: AtomicU64::new(0),
            // Built before the first tick applies anything saved: configured is the file's.
            record: Mutex::new(Record {
                file: Arc::new(room.settings.configured().section.clone()),
                changes: Changes::new(),
            }),
            estimator: Mutex::new(RateEstimator::default()),
            last_heartbeat: AtomicI64::new(0),
            quiet_until: AtomicI64::new(0),
            last_counts: Mutex::new(None),
            pending: Mutex::new(Map::new()),
            outage_since: AtomicI64::new(0),
            claims_held_until: AtomicI64::new(0),
            writing: tokio::sync::Mutex::new(()),
            drop_history: DropHistory::new(start),
            room,
        }
    }

    pub fn id(&self) -> &str {
        &self.room.id
    }

    /// How often this room wants its tick: the loop ticks at the busiest room's pace.
    pub fn admission_interval(&self) -> std::time::Duration {
        self.room.settings.now().admission_interval
    }

    /// The room's counts as the loop last read them from the store, and when; None before the
    /// first read.
    pub fn last_counts(&self) -> Option<(Millis, RoomCounts)> {
        *self
            .last_counts
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Keys changed here while the store was unreachable and not written to it yet, with their
    /// values; None when there are none.
    pub fn pending(&self) -> Option<Map<String, Value>> {
        let pending = self.pending_keys();
        (!pending.is_empty()).then_some(pending)
    }

    fn pending_keys(&self) -> Map<String, Value> {
        self.pending
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    fn set_pending(&self, pending: Map<String, Value>) {
        *self
            .pending
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = pending;
    }

    /// The room's autopilot: its `[autopilot]`, recorder and status.
    pub fn pilot(&self) -> &Arc<Pilot> {
        &self.room.pilot
    }

    pub fn settings_version(&self) -> u64 {
        self.settings_version.load(Ordering::Relaxed)
    }

    /// Saves validated settings in the store (so every instance, and the next start, applies
    /// them) and applies them here at once. `by` names the request, for the record and the log.
    /// Returns the effective [room] section.
    pub async fn publish_settings(
        &self,
        settings: RoomSettings,
        by: &str,
    ) -> Result<RoomSection, StoreError> {
        self.publish(settings, by, None).await
    }

    /// A reload: `file` is what the file says now, `settings` what runs from now on (the file,
    /// and the events added live that it kept).
    pub async fn publish_reload(
        &self,
        settings: RoomSettings,
        file: RoomSection,
    ) -> Result<RoomSection, StoreError> {
        self.publish(settings, "reload from the file", Some(file))
            .await
    }

    async fn publish(
        &self,
        settings: RoomSettings,
        by: &str,
        file: Option<RoomSection>,
    ) -> Result<RoomSection, StoreError> {
        let _one_writer = self.writing.lock().await;
        self.save(settings, by, file).await
    }

    /// A change from the admin API whose patch named `keys`: saved as `publish_settings` does;
    /// while the store is unreachable, a change of [`HELD_DURING_OUTAGE`] keys alone is applied
    /// here at once and held until the store answers (`RoomLoop::tick` writes it then).
    pub async fn change_settings(
        &self,
        settings: RoomSettings,
        keys: &[&str],
        by: &str,
    ) -> Result<Published, PublishError> {
        let _one_writer = self.writing.lock().await;
        // Known down: not waited for (a command timeout per change) when an operator needs
        // the rollback now; the loop finds out within a tick when it is back.
        let unreachable = if self.room.health.is_up() {
            match self.save(settings.clone(), by, None).await {
                Ok(section) => return Ok(Published::Saved(section)),
                Err(e @ StoreError::Unavailable(_)) => e,
                Err(e) => return Err(e.into()),
            }
        } else {
            StoreError::Unavailable("unreachable as last seen".into())
        };
        if keys.is_empty() || !keys.iter().all(|k| HELD_DURING_OUTAGE.contains(k)) {
            return Err(PublishError::NotHeld(unreachable));
        }
        let mut pending = self.pending_keys();
        for key in keys {
            let value = match *key {
                "suspended" => settings.suspended,
                _ => settings.queue_all,
            };
            pending.insert((*key).to_owned(), value.into());
        }
        self.set_pending(pending.clone());
        let section = settings.section.clone();
        self.room.settings.apply(settings);
        log::warn!(
            "room {}: {} applied on this instance only, the store being unreachable ({unreachable}); \
             written to the store when it answers",
            self.room.id,
            Value::Object(pending.clone())
        );
        Ok(Published::Held { section, pending })
    }

    /// Saves and applies, recording which keys `by` changed; `file` is what the file says now
    /// (a reload), else as before. What was held here is in `settings` (the configured settings
    /// it was made from include it) and so is written too.
    async fn save(
        &self,
        settings: RoomSettings,
        by: &str,
        file: Option<RoomSection>,
    ) -> Result<RoomSection, StoreError> {
        let section = settings.section.clone();
        let previous = self.room.settings.configured();
        let (file, earlier) = {
            let record = self.record();
            (
                file.map(Arc::new).unwrap_or_else(|| record.file.clone()),
                record.changes.clone(),
            )
        };
        let change = Change {
            at: rfc3339_ms(self.room.clock.now_ms()),
            by: by.to_owned(),
        };
        let touched = changes::differences(&previous.section, &section);
        let changes = changes::record(&earlier, &previous.section, &section, &file, &change);
        let json = Saved {
            room: section.clone(),
            changes: changes.clone(),
        }
        .encode()
        .map_err(|e| StoreError::Corrupt(format!("cannot encode settings: {e}")))?;
        let saved = self.room.store.save_settings(&json).await;
        let version = saved?;
        self.settings_version.fetch_max(version, Ordering::Relaxed);
        {
            let mut record = self.record();
            record.file = file;
            record.changes = changes;
        }
        self.room.settings.apply(settings);
        self.set_pending(Map::new());
        log::info!(
            "room {} settings changed by {by} (version {version}): {}",
            self.room.id,
            changes::key_list(&touched)
        );
        Ok(section)
    }

    fn record(&self) -> std::sync::MutexGuard<'_, Record> {
        self.record.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The settings as configured now (the file and the live changes), as the file writes them.
    pub fn settings_section(&self) -> RoomSection {
        self.room.settings.configured().section.clone()
    }

    /// What the file says for this room (as read at start or at the last reload).
    pub fn file_section(&self) -> Arc<RoomSection> {
        self.record().file.clone()
    }

    /// When and how each key that differs from the file was last changed.
    pub fn changes(&self) -> Changes {
        self.record().changes.clone()
    }

    /// Writes what was changed here during an outage, once the store answers. The rule when
    /// another instance saved settings meanwhile: its version is the base, the held keys are
    /// laid over it, and the result is saved as a new version like any change. So the held
    /// keys win (the later intent, and a rollback must not be undone by the return of the
    /// store), every other key keeps what the store holds. None when nothing is held.
    async fn write_pending(&self) -> Option<Result<(), StoreError>> {
        let _one_writer = self.writing.lock().await;
        let pending = self.pending()?;
        Some(self.write_held(pending).await)
    }

    async fn write_held(&self, pending: Map<String, Value>) -> Result<(), StoreError> {
        let mut base = (*self.room.settings.configured()).clone();
        if let Some(saved) = self.room.store.load_settings().await?
            && saved.version > self.settings_version()
        {
            // The version seen is not recorded here: the one saved below supersedes it, and
            // should the save fail, the next attempt must read it again.
            match parse_saved(&saved.json) {
                Ok((settings, _)) => base = settings,
                Err(e) => log::error!(
                    "ignoring saved room settings version {}: {e}",
                    saved.version
                ),
            }
        }
        let held = Value::Object(pending);
        let settings = match base.patched(&held) {
            Ok(settings) => settings,
            // Two flags cannot make valid settings invalid; were it ever so, the store's copy
            // stands, rather than the loop trying again at every tick.
            Err(e) => {
                log::error!("room {}: {held} not written: {e}", self.room.id);
                self.set_pending(Map::new());
                return Ok(());
            }
        };
        self.save(settings, "a change held during a store outage", None)
            .await?;
        log::info!(
            "room {}: {held}, changed during the store outage, written to the store",
            self.room.id
        );
        Ok(())
    }

    /// Applies settings another instance (or an earlier run) saved.
    async fn sync_settings(&self) -> Result<(), StoreError> {
        let _one_writer = self.writing.lock().await;
        let Some(saved) = self.room.store.load_settings().await? else {
            return Ok(());
        };
        if saved.version <= self.settings_version() {
            return Ok(());
        }
        match parse_saved(&saved.json) {
            Ok((settings, changes)) => {
                let touched = changes::differences(
                    &self.room.settings.configured().section,
                    &settings.section,
                );
                let file = self.file_section();
                let differ = changes::differences(&file, &settings.section);
                self.record().changes = changes;
                self.room.settings.apply(settings);
                // A restart applies what was saved live over the file: say which keys, or the
                // file and what runs seem to disagree for no reason.
                log::info!(
                    "room {}: applied room settings version {} from the store: {}; differs from \
                     the file in: {}",
                    self.room.id,
                    saved.version,
                    changes::key_list(&touched),
                    if differ.is_empty() {
                        "nothing".to_owned()
                    } else {
                        differ.join(", ")
                    }
                );
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

    /// Visitors called just before the store went away could not claim their turn while it
    /// was away, and the first round after it would drop them as no-shows (a failover measured
    /// two of forty sent to the back). So when the store answers again, admission rounds wait
    /// one `claim_window`: the called claim their turn with their next poll, which needs no
    /// round, and the round after that drops only who really did not come back.
    fn hold_claims_after_an_outage(&self, store_answered: bool, now: Millis) {
        if !store_answered {
            let _ = self.outage_since.compare_exchange(
                0,
                now.max(1),
                Ordering::Relaxed,
                Ordering::Relaxed,
            );
            return;
        }
        let since = self.outage_since.swap(0, Ordering::Relaxed);
        if since == 0 {
            return;
        }
        let window = self.room.settings.now().limits().claim_window_ms;
        self.claims_held_until
            .store(now + window, Ordering::Relaxed);
        log::info!(
            "room {}: the store answers again after {} ms: admission rounds wait {window} ms so \
             that visitors called before the outage can claim their turn",
            self.room.id,
            now - since
        );
    }

    async fn admit(&self, fence: u64) -> Result<(), StoreError> {
        let limits = self.room.settings.now().limits();
        let report = self.room.store.admission_round(&limits, fence).await?;
        let m = &self.room.metrics;
        m.expired.inc_by(report.expired);
        m.abandoned.inc_by(report.abandoned);
        m.no_shows.inc_by(report.no_shows);
        Ok(())
    }

    /// Returns the room's counts, after this tick's admissions.
    async fn observe(&self) -> Result<RoomCounts, StoreError> {
        let epoch = self.room.store.epoch().await?;
        let polled = self.room.pollers.take();
        let limits = self.room.settings.now().limits();
        // Nobody polled and no contact held here: nothing to slide and nobody to ask about, so
        // no call. A contact alone asks (with no heartbeat slid): its visitor may be polling
        // another instance, or claim its call before this loop sees it.
        let contacts_held = self.room.contacts.as_ref().is_some_and(|c| !c.is_empty());
        let called = if polled.is_empty() && !contacts_held {
            Vec::new()
        } else {
            match self.room.store.keep_alive(&polled, &limits).await {
                Ok(called) => called,
                Err(e) => {
                    self.room.pollers.give_back(polled);
                    return Err(e);
                }
            }
        };
        let counts = self.room.store.counts().await?;
        let now = self.room.clock.now_ms();
        if let Some(contacts) = &self.room.contacts {
            contacts.called(&called, now);
        }
        *self
            .last_counts
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some((now, counts));
        let rate = {
            let mut estimator = self
                .estimator
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            estimator.observe(now, counts.admitted_total);
            estimator.per_second()
        };
        let previous = self.room.view.load();
        let epoch_seen_at = if *previous.epoch == *epoch {
            previous.epoch_seen_at
        } else {
            now
        };
        self.room.view.publish(RoomView {
            admitted_total: counts.admitted_total,
            queued: counts.queued,
            called: called.into_iter().collect(),
            epoch: epoch.into(),
            epoch_seen_at,
            rate_per_second: rate,
        });
        let gauge = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        self.room.metrics.occupancy.set(gauge(counts.occupancy()));
        self.room.metrics.queue_length.set(gauge(counts.queued));
        self.drop_history.observe(&self.room, &counts, now);
        Ok(counts)
    }

    /// The room's minutes as this instance read them.
    pub fn history(&self) -> std::sync::MutexGuard<'_, History> {
        self.drop_history.history()
    }

    /// Heartbeats come often enough that a page polling at the room's refresh interval hears
    /// one before it would poll.
    fn beat(&self) {
        let now = self.room.clock.now_ms();
        let refresh = Millis::try_from(self.room.settings.now().refresh_interval.as_millis())
            .unwrap_or(Millis::MAX);
        let every = HEARTBEAT_EVERY_MS.min(refresh * 3 / 4).max(1);
        if now - self.last_heartbeat.load(Ordering::Relaxed) >= every {
            self.last_heartbeat.store(now, Ordering::Relaxed);
            self.room.pulse.heartbeat();
        }
    }

    /// `pass.max_requests_per_minute` as one budget over the instances: what this instance
    /// served of each pass since the last tick goes to the store, and what the others served
    /// comes off the pass's bucket here (`PassUse::settle`). A store call a tick when pass holders
    /// came, none when none did: never one per request. On every tick, a quiet room's too, so
    /// that the others hear within a tick. A report that fails is dropped (see
    /// `PassUse::take_report`): the store's error metric and health say so.
    async fn share_pass_use(&self) {
        loop {
            let sent = self.room.pass_use.lock().take_report(PASS_USE_BATCH);
            if sent.is_empty() {
                return;
            }
            let shared = self.room.store.report_pass_use(&sent).await;
            match shared {
                Ok(shared) => self.room.pass_use.lock().settle(&sent, &shared),
                Err(e) => {
                    let requests: u64 = sent.iter().map(|(_, n)| n).sum();
                    log::debug!(
                        "room {}: {requests} requests of {} passes not shared with the other \
                         instances: {e}",
                        self.room.id,
                        sent.len()
                    );
                    return;
                }
            }
        }
    }

    /// One tick of this room; `fence` while this instance leads, `instance` this instance's
    /// name.
    pub async fn tick(&self, fence: Option<u64>, instance: &str) {
        self.share_pass_use().await;
        let now = self.room.clock.now_ms();
        if now < self.quiet_until.load(Ordering::Relaxed) && self.room.pollers.is_empty() {
            return;
        }
        // What was held during an outage goes first: applying the store's copy before it would
        // undo it here for a tick.
        let synced = match self.write_pending().await {
            Some(written) => written,
            None => self.sync_settings().await,
        };
        self.hold_claims_after_an_outage(synced.is_ok(), now);
        let held = now < self.claims_held_until.load(Ordering::Relaxed);
        if let Some(fence) = fence.filter(|_| !held) {
            let admitted = self.admit(fence).await;
            self.room.metrics.leader.set(i64::from(admitted.is_ok()));
        } else {
            self.room.metrics.leader.set(0);
        }
        let observed = self.observe().await;
        // Nobody waits or is called, and no event governs the room: nothing to admit and no
        // position to move. Such a room is looked at once a second (settings, expiries, counts)
        // instead of every interval, so that idle rooms cost next to nothing; a visitor joining
        // on this instance wakes it at once. An event's pre-queue or its start (the shuffle) is
        // never left to wait.
        let quiet = matches!(&observed, Ok(c) if c.queued == 0 && c.called == 0)
            && self.room.settings.now().event.is_none();
        self.quiet_until.store(
            if quiet { now + QUIET_EVERY_MS } else { 0 },
            Ordering::Relaxed,
        );
        self.beat();
        if observed.is_ok() {
            self.drop_history.publish_shares(&self.room, instance).await;
        }
        self.autopilot.tick(fence, observed.ok().as_ref()).await;
    }
}

/// Settings another instance saved, as they read.
/// Settings as saved in the store, and the record of their changes.
fn parse_saved(json: &str) -> Result<(RoomSettings, Changes), String> {
    Saved::decode(json)
        .map_err(|e| e.to_string())
        .and_then(|record| {
            RoomSettings::from_section(&record.room)
                .map(|settings| (settings, record.changes))
                .map_err(|e| e.to_string())
        })
}
