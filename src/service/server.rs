//! The composition root: the product assembled from the validated config on one Pingora server
//! (`build`, in steps that each read on their own: the checks in `checks`, the stores in
//! `stores`, each room in `rooms`, the listeners in `listeners`), and run as a service (signals,
//! hand-over, pid file) or on a thread of its own (tests, embedding).

use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;

use async_trait::async_trait;
use pingora_core::server::configuration::{Opt, ServerConf};
use pingora_core::server::{RunArgs, Server, ShutdownSignal, ShutdownSignalWatch};
use pingora_core::services::background::GenBackgroundService;
use pingora_core::services::listening::Service;
use tokio::sync::watch;

use super::admin::{AdminParts, ListenerState};
use super::checks::{check_free, demo_origin_address, resolve_origin};
use super::listeners::{self, capacity};
use super::rooms::{Common, assemble};
use super::stores::open_stores;
use crate::config::Config;
use crate::entry::EntryVerifier;
use crate::notify::Outbox;
use crate::observe::MetricsRegistry;
use crate::proxy::Connections;
use crate::proxy::origin::{OriginAddresses, OriginResolver};
use crate::service::admission::AdmissionLoop;
use crate::service::demo_shop::DemoShop;
use crate::service::lifecycle::{Signals, write_pid_file};
use crate::service::limits::{OpenFiles, raise_open_files};
use crate::service::reload::Reloader;
use crate::service::tls::install_crypto_provider;
use crate::store::Store;
use crate::turnstile::Turnstile;

pub use super::start::{RunOptions, StartError};

/// The running parts a caller may want to look at (tests, main).
pub struct Parts {
    /// Each room's store, in the config's order.
    pub stores: Vec<Arc<dyn Store>>,
    pub admission: Arc<AdmissionLoop>,
    pub reloader: Arc<Reloader>,
    pub open_files: OpenFiles,
    /// The public listener's connections.
    pub connections: Arc<Connections>,
}

pub use super::checks::{check_files, check_origin};
pub use super::stores::StoreRuntime;

/// The whole product on one Pingora server, from the validated config: the checks that fail
/// fast, the stores, each room assembled, the listeners and the background services.
pub fn build(
    config: &Config,
    options: RunOptions,
) -> Result<(Server, Parts, StoreRuntime), StartError> {
    install_crypto_provider();
    check_files(config)?;
    let metrics = Arc::new(MetricsRegistry::new());
    let origin = Arc::new(resolve_origin(
        config,
        options.resolver.as_ref(),
        &metrics,
        options.origin_must_resolve,
    )?);
    let demo = demo_origin_address(config)?;
    check_ports(config, &options, demo)?;
    let opened = open_stores(config, &options)?;
    let mut server = Server::new_with_opt_and_conf(
        Some(Opt {
            upgrade: options.upgrade,
            ..Opt::default()
        }),
        server_conf(config),
    );
    let open_files = raise_open_files()?;
    log::info!(
        "open-file limit: {} (hard {})",
        open_files.soft,
        open_files.hard
    );

    let (outbox, delivery) = match &config.notify {
        Some(notify) => {
            let (outbox, delivery) = Outbox::new(notify).map_err(StartError::Notify)?;
            (Some(outbox), Some(delivery))
        }
        None => (None, None),
    };
    let common = Common {
        config,
        outbox,
        clock: options.clock.clone(),
        metrics: &metrics,
        turnstile: config
            .turnstile
            .as_ref()
            .map(Turnstile::new)
            .transpose()?
            .map(Arc::new),
        entry: config
            .entry
            .as_ref()
            .map(EntryVerifier::new)
            .transpose()?
            .map(Arc::new),
    };
    let mut fronts = Vec::with_capacity(config.rooms.len());
    let mut room_loops = Vec::with_capacity(config.rooms.len());
    let mut room_admins = Vec::with_capacity(config.rooms.len());
    let mut stores = Vec::with_capacity(config.rooms.len());
    for (room_config, store) in config.rooms.iter().zip(opened.stores) {
        let reached = !opened.unreachable.contains(&room_config.id);
        let room = assemble(&common, room_config, store, reached)?;
        stores.push(room.front.room.store.clone());
        fronts.push(room.front);
        room_loops.push(room.room_loop);
        room_admins.push(room.admin);
    }
    // The group's one admission lease lives in the first room's store.
    let Some(lease) = stores.first().cloned() else {
        return Err(StartError::Unsupported(
            "the configuration has no room".into(),
        ));
    };
    let admission = Arc::new(AdmissionLoop::new(
        lease,
        room_loops,
        instance_name(),
        config.store.leader_ttl,
    ));
    let reloader = Arc::new(Reloader::new(config.clone(), admission.clone()));

    let capacity = capacity(config, &open_files);
    server.add_service(listeners::public(
        &server.configuration,
        config,
        fronts,
        origin.clone(),
        &capacity,
    )?);
    server.add_service(listeners::admin(
        config,
        room_admins,
        AdminParts {
            admission: admission.clone(),
            reloader: reloader.clone(),
            token: config.admin_token.clone(),
            ready_requires_store: config.admin_ready_requires_store,
            metrics,
            listener: Arc::new(ListenerState {
                open_files,
                connections: capacity.connections.clone(),
                max_event_streams: capacity.max_event_streams,
            }),
            clock: options.clock.clone(),
            console_session: config.admin_console_session,
            tls: config.admin_tls.is_some(),
        },
    )?);
    add_background(
        &mut server,
        config,
        &options,
        admission.clone(),
        origin,
        demo,
    );
    if let Some(delivery) = delivery {
        server.add_service(GenBackgroundService::new(
            "waitroom notify".to_owned(),
            Arc::new(delivery),
        ));
    }
    // With --upgrade, this waits (up to 5 s) for the old process to send its sockets.
    server.bootstrap();
    if let Some(path) = &config.pid_file {
        write_pid_file(path).map_err(|e| StartError::PidFile {
            path: path.display().to_string(),
            reason: e.to_string(),
        })?;
    }
    Ok((
        server,
        Parts {
            stores,
            admission,
            reloader,
            open_files,
            connections: capacity.connections,
        },
        opened.runtime,
    ))
}

/// The ports the proxy binds are free, or (`--upgrade`) come from the old process.
fn check_ports(
    config: &Config,
    options: &RunOptions,
    demo: Option<SocketAddr>,
) -> Result<(), StartError> {
    if options.upgrade {
        // The old process holds the ports: they come over the upgrade socket.
        if config.upgrade_socket.is_none() {
            return Err(StartError::Unsupported(
                "--upgrade needs listen.upgrade_socket (the old process sends its sockets there)"
                    .into(),
            ));
        }
        return Ok(());
    }
    check_free("listen.address", config.listen)?;
    check_free("admin.address", config.admin_address)?;
    if let Some(address) = demo {
        check_free("origin.address (demo shop)", address)?;
    }
    Ok(())
}

/// Pingora's own settings: threads, the shutdown's grace, the hand-over socket, the origin's CA.
fn server_conf(config: &Config) -> ServerConf {
    let threads = if config.threads > 0 {
        config.threads
    } else {
        std::thread::available_parallelism().map_or(2, |n| n.get())
    };
    let path_text = |p: &std::path::Path| p.to_string_lossy().into_owned();
    // Pingora counts whole seconds: a part second is rounded up, never dropped.
    let grace_secs =
        config.grace_period.as_secs() + u64::from(config.grace_period.subsec_nanos() > 0);
    ServerConf {
        threads,
        work_stealing: true,
        grace_period_seconds: Some(grace_secs),
        graceful_shutdown_timeout_seconds: Some(grace_secs.max(1)),
        upgrade_sock: config
            .upgrade_socket
            .as_deref()
            .map(path_text)
            .unwrap_or_default(),
        ca_file: config.origin.ca_file.as_deref().map(path_text),
        ..ServerConf::default()
    }
}

/// This instance's name in the lease and `/admin/state`: the host's, made unique.
fn instance_name() -> String {
    format!(
        "{}-{:08x}",
        std::env::var("HOSTNAME").unwrap_or_else(|_| "waitroom".into()),
        rand::random::<u32>()
    )
}

/// The admission loop, the origin's resolver (for a name) and the demo shop (if asked for).
fn add_background(
    server: &mut Server,
    config: &Config,
    options: &RunOptions,
    admission: Arc<AdmissionLoop>,
    origin: Arc<OriginAddresses>,
    demo: Option<SocketAddr>,
) {
    server.add_service(GenBackgroundService::new(
        "waitroom admission".to_owned(),
        admission,
    ));
    if origin.is_named() {
        server.add_service(GenBackgroundService::new(
            "waitroom origin resolver".to_owned(),
            Arc::new(OriginResolver::new(
                origin,
                options.resolver.clone(),
                config.origin.resolve_interval,
            )),
        ));
    }
    if let Some(address) = demo {
        let mut shop = Service::new("demo shop".to_owned(), DemoShop);
        shop.threads = Some(1);
        shop.add_tcp(&address.to_string());
        server.add_service(shop);
    }
}

struct ChannelShutdown(watch::Receiver<bool>);

#[async_trait]
impl ShutdownSignalWatch for ChannelShutdown {
    async fn recv(&self) -> ShutdownSignal {
        let mut rx = self.0.clone();
        // A dropped sender also means stop.
        let _ = rx.wait_for(|stop| *stop).await;
        ShutdownSignal::GracefulTerminate
    }
}

/// A server running on its own thread, stopped on `stop` or drop: for tests and embedding.
pub struct Running {
    pub parts: Parts,
    stop: watch::Sender<bool>,
    thread: Option<JoinHandle<()>>,
}

impl Running {
    pub fn stop(&mut self) {
        let _ = self.stop.send(true);
        if let Some(thread) = self.thread.take()
            && thread.join().is_err()
        {
            log::error!("the server thread panicked");
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop();
    }
}

pub fn spawn(config: &Config, options: RunOptions) -> Result<Running, StartError> {
    let (server, parts, store_runtime) = build(config, options)?;
    let (stop, rx) = watch::channel(false);
    let thread = std::thread::Builder::new()
        .name("waitroom".into())
        .spawn(move || {
            let _keep = store_runtime;
            server.run(RunArgs {
                shutdown_signal: Box::new(ChannelShutdown(rx)),
            });
        })?;
    Ok(Running {
        parts,
        stop,
        thread: Some(thread),
    })
}

/// Runs as a service until SIGTERM, SIGINT or a hand-over (see `lifecycle` for the signals).
pub fn run(config: &Config, upgrade: bool) -> Result<(), StartError> {
    let options = RunOptions {
        upgrade,
        ..RunOptions::default()
    };
    let (server, parts, store_runtime) = build(config, options)?;
    let _keep = store_runtime;
    let signals = Signals::new(parts.reloader.clone(), config.upgrade_socket.clone());
    server.run(RunArgs {
        shutdown_signal: Box::new(signals),
    });
    Ok(())
}
