//! One room of the config, assembled: its shared state (with its store, which notes its own
//! health), its gate and responder, its part of the admission loop and of the admin API.

use std::sync::Arc;

use super::admin::{RoomAdmin, RuleReach};
use super::start::StartError;
use crate::clock::SharedClock;
use crate::config::Config;
use crate::config::model::{Backend, RoomConfig};
use crate::core::history::Start;
use crate::entry::EntryVerifier;
use crate::gate::{Gate, GateRules, ProofRule, TurnstileRule};
use crate::notify::Outbox;
use crate::observe::MetricsRegistry;
use crate::proxy::Front;
use crate::request::view::Reserved;
use crate::respond::Responder;
use crate::respond::cookies::CookieJar;
use crate::room::Room;
use crate::room::admission::RoomLoop;
use crate::store::{Store, StoreError};
use crate::token::Signer;
use crate::turnstile::Turnstile;

/// What every room is assembled with.
pub(super) struct Common<'a> {
    pub config: &'a Config,
    pub clock: SharedClock,
    pub metrics: &'a MetricsRegistry,
    pub turnstile: Option<Arc<Turnstile>>,
    pub entry: Option<Arc<EntryVerifier>>,
    /// `[notify]`'s queue, when the shop has a webhook.
    pub outbox: Option<Outbox>,
}

/// One room's parts, each handed to the service that runs it.
pub(super) struct AssembledRoom {
    pub front: Front,
    pub room_loop: Arc<RoomLoop>,
    pub admin: RoomAdmin,
}

/// `reached`: the store answered at start (else the room starts as during an outage).
pub(super) fn assemble(
    common: &Common<'_>,
    room_config: &RoomConfig,
    store: Arc<dyn Store>,
    reached: bool,
) -> Result<AssembledRoom, StartError> {
    let config = common.config;
    let room = Arc::new(
        Room::new(
            &room_config.id,
            room_config.settings.clone(),
            store,
            common.clock.clone(),
            common.metrics,
        )
        .with_autopilot(room_config.autopilot.clone())
        .with_pass_limits(config.pass.limits)
        .with_contacts(common.outbox.clone()),
    );
    // Each rule's series exists from the start, at 0: `rate()` needs a sample before the first.
    for rule in &room_config.settings.rules {
        room.metrics
            .rule_held(&rule.label, rule.action.as_str(), false);
    }
    if !reached {
        // Down from the first moment (gauge, /readyz), not only after the loop's first tick.
        room.health
            .failed(&StoreError::Unavailable("not reached at start".into()));
    }
    let signer = Arc::new(Signer::new(&room_config.id, &config.pass.secret)?);
    let cookies = CookieJar::new(
        &config.pass,
        &room_config.cookie_name,
        room_config.cookie_domain.as_deref(),
        signer.clone(),
        common.clock.clone(),
    );
    // A page names its room to the reserved paths only when the proxy has several.
    let named = (config.rooms.len() > 1).then_some(room_config.id.as_str());
    let login_url = config.entry.as_ref().and_then(|e| e.login_url.clone());
    let responder = Responder::new(&room, room_config, cookies, named)
        .map(|r| r.with_login_url(login_url))
        .map_err(|reason| StartError::PageTemplate {
            path: room_config
                .template
                .as_ref()
                .map(|t| t.path.display().to_string())
                .unwrap_or_default(),
            reason,
        })?;
    let gate = Arc::new(Gate::new(
        room.clone(),
        GateRules {
            signer,
            cookie_name: room_config.cookie_name.clone(),
            on_store_error: config.store.on_error,
            ip_limits: config.rate_limit,
            turnstile: common.turnstile.as_ref().map(|verifier| TurnstileRule {
                verifier: verifier.clone(),
                challenge: Arc::new(verifier.challenge(&Reserved::Turnstile.url(named))),
            }),
            proof: ProofRule::new(config.proof_of_work),
            entry: common.entry.clone(),
        },
    ));
    let start = match config.store.backend {
        Backend::Memory => Start::FromZero,
        Backend::Redis { .. } => Start::FromFirstReading,
    };
    let room_loop = Arc::new(RoomLoop::new(room.clone(), start));
    Ok(AssembledRoom {
        admin: RoomAdmin::new(
            room.clone(),
            gate.clone(),
            room_loop.clone(),
            RuleReach {
                routes: room_config.routes.clone(),
                country_known: config.country_header.is_some()
                    && !config.trusted_proxies.is_empty(),
            },
        ),
        front: Front {
            room,
            gate,
            responder: Arc::new(responder),
        },
        room_loop,
    })
}
