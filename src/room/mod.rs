//! The state one room shares between its parts, each type named by who writes it: the live
//! settings (the admin API, a reload, the settings another instance saved), the room view (the
//! admission loop, every tick), the store (each call's outcome noted in its health), the waiting
//! visitors seen polling (the gate; the loop takes them for its keep-alive batch), the
//! autopilot's recorder and status (the proxy records, the loop reports and decides), and the
//! ledger of pass use (the gate counts, the loop shares the counts with the other instances).

pub mod admission;
pub mod autopilot;
pub mod changes;
mod drop_history;
mod pass_use;
mod pilot;
mod settings;
mod view;

pub use pass_use::PassLedger;
pub use pilot::Pilot;
pub use settings::LiveSettings;
pub use view::{Beat, Pollers, Pulse, RoomView, ViewCell};

use std::sync::Arc;

use crate::clock::SharedClock;
use crate::config::RoomSettings;
use crate::config::model::AutopilotConfig;
use crate::core::autopilot::Status;
use crate::core::sharing::PassLimits;
use crate::notify::{Contacts, Outbox};
use crate::observe::MetricsRegistry;
use crate::store::{Observed, Store, StoreHealth};

/// One room's shared state, made once at start; each part hands on only what it needs.
pub struct Room {
    pub id: String,
    /// The room's store, each call's outcome noted in `health`.
    pub store: Arc<dyn Store>,
    pub clock: SharedClock,
    pub metrics: Arc<crate::observe::Metrics>,
    pub pulse: Arc<Pulse>,
    pub settings: Arc<LiveSettings>,
    pub view: Arc<ViewCell>,
    pub health: Arc<StoreHealth>,
    pub pollers: Arc<Pollers>,
    pub pilot: Arc<Pilot>,
    pub pass_use: Arc<PassLedger>,
    /// `[notify]`: the contacts of the visitors who joined here, None without a webhook.
    pub contacts: Option<Arc<Contacts>>,
}

impl Room {
    pub fn new(
        id: &str,
        settings: RoomSettings,
        store: Arc<dyn Store>,
        clock: SharedClock,
        metrics: &MetricsRegistry,
    ) -> Self {
        let metrics = Arc::new(metrics.room(id));
        let pulse = Arc::new(Pulse::new());
        let off = Status::disabled(
            settings.total_active_users,
            settings.new_users_per_minute,
            settings.burst,
        );
        let pilot = Arc::new(Pilot::new(AutopilotConfig::default(), clock.clone(), off));
        let health = Arc::new(StoreHealth::new(metrics.clone()));
        Self {
            pilot,
            id: id.to_owned(),
            settings: Arc::new(LiveSettings::new(
                settings,
                clock.clone(),
                metrics.clone(),
                pulse.clone(),
            )),
            view: Arc::new(ViewCell::new(pulse.clone())),
            store: Arc::new(Observed::new(store, health.clone())),
            health,
            pollers: Arc::new(Pollers::default()),
            pass_use: Arc::new(PassLedger::new(PassLimits::OFF)),
            contacts: None,
            clock,
            metrics,
            pulse,
        }
    }

    /// The room's `[autopilot]` (off unless given).
    pub fn with_autopilot(self, config: AutopilotConfig) -> Self {
        self.pilot.reconfigure(config);
        self
    }

    /// `[notify]`'s queue: the room holds its visitors' contacts to tell the shop when called.
    pub fn with_contacts(mut self, outbox: Option<Outbox>) -> Self {
        self.contacts =
            outbox.map(|outbox| Arc::new(Contacts::new(&self.id, outbox, self.metrics.clone())));
        self
    }

    /// `[pass]`'s limits on how one pass is used (off unless given).
    pub fn with_pass_limits(mut self, limits: PassLimits) -> Self {
        self.pass_use = Arc::new(PassLedger::new(limits));
        self
    }
}
