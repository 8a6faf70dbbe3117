//! Assembles the product from the validated config: the store, the gate, the public proxy (plain
//! or TLS with HTTP/2), the admin listener, the admission loop and (optionally) the demo shop, on
//! one Pingora server; and runs it as a service (signals, hand-over, pid file).

use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::thread::JoinHandle;

use async_trait::async_trait;
use pingora_core::apps::HttpServerOptions;
use pingora_core::listeners::tls::TlsSettings;
use pingora_core::listeners::{L4BufferSettings, ListenerConfig};
use pingora_core::server::configuration::{Opt, ServerConf};
use pingora_core::server::{RunArgs, Server, ShutdownSignal, ShutdownSignalWatch};
use pingora_core::services::background::GenBackgroundService;
use pingora_core::services::listening::Service;
use tokio::sync::watch;

use crate::clock::{SharedClock, SystemClock};
use crate::config::Config;
use crate::config::model::{Backend, Cap};
use crate::gate::{Gate, GateParts};
use crate::observe::MetricsRegistry;
use crate::proxy::origin::{
    OriginAddresses, OriginResolver, Resolve, ResolveError, SystemResolver,
};
use crate::proxy::{ConnectionLimits, Connections, Front, FrontDoor, ProxySettings, WaitroomProxy};
use crate::request::route::Routes;
use crate::request::view::{Reserved, Sites};
use crate::respond::Responder;
use crate::respond::cookies::CookieJar;
use crate::respond::custom_page::CustomPage;
use crate::room::Room;
use crate::service::admin::{AdminApp, AdminParts, ListenerState, RoomAdmin};
use crate::service::admission::{AdmissionLoop, RoomLoop};
use crate::service::demo_shop::DemoShop;
use crate::service::lifecycle::{Signals, write_pid_file};
use crate::service::limits::{OpenFiles, raise_open_files};
use crate::service::reload::Reloader;
use crate::service::tls::{TlsError, check_ca_file, check_listener, install_crypto_provider};
use crate::store::memory::MemoryStore;
use crate::store::redis::{DeferredRedisStore, RedisOptions, RedisStore, TimeSource};
use crate::store::{Store, StoreError};
use crate::token::{SignError, Signer};
use crate::turnstile::{ClientError, Turnstile};

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("{key} {address} is already in use (or not ours to bind): {reason}")]
    AddressInUse {
        key: &'static str,
        address: SocketAddr,
        reason: String,
    },
    #[error("store: {0}")]
    Store(#[from] StoreError),
    #[error("{0}")]
    Tls(#[from] TlsError),
    #[error("listen.pid_file {path}: {reason}")]
    PidFile { path: String, reason: String },
    #[error("{0}")]
    Unsupported(String),
    #[error("cannot start a runtime or thread: {0}")]
    Runtime(#[from] std::io::Error),
    #[error("the store connection thread panicked")]
    StoreThread,
    #[error("{0}")]
    Sign(#[from] SignError),
    #[error("{0}")]
    Turnstile(#[from] ClientError),
    #[error("cannot read the open-file limit: {0}")]
    OpenFiles(#[from] nix::Error),
    #[error("page.template {path}: {reason}")]
    PageTemplate {
        path: String,
        reason: ramhorns::Error,
    },
    #[error("origin.address {address:?} does not resolve: {reason}")]
    OriginUnresolved {
        address: String,
        reason: ResolveError,
    },
}

/// What differs between production and a test run.
pub struct RunOptions {
    pub clock: SharedClock,
    /// Seed of random queueing (fixed in tests, random in production).
    pub seed: u64,
    /// Redis takes time from `clock` instead of its own `TIME` (tests that drive the clock).
    pub redis_follows_clock: bool,
    /// Take the listening sockets over from the running process (`--upgrade`).
    pub upgrade: bool,
    /// Looks up the origin's name (the system's resolver; a scripted one in tests).
    pub resolver: Arc<dyn Resolve>,
    /// An origin whose name does not resolve stops the start. Off only in tests of a proxy
    /// that never knew an address for its origin.
    pub origin_must_resolve: bool,
}

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            clock: Arc::new(SystemClock),
            seed: rand::random(),
            redis_follows_clock: false,
            upgrade: false,
            resolver: Arc::new(SystemResolver),
            origin_must_resolve: true,
        }
    }
}

/// What the proxy reads besides its configuration file: the TLS files. Checked at start and by
/// `--test`, because Pingora would only fail on them inside a running service.
pub fn check_files(config: &Config) -> Result<(), StartError> {
    if let Some(tls) = &config.tls {
        check_listener(tls)?;
    }
    if let Some(ca_file) = &config.origin.ca_file {
        check_ca_file(ca_file)?;
    }
    Ok(())
}

/// The origin's addresses, looked up once now: a name that does not resolve would otherwise
/// only show as a 502 for every admitted visitor. Without `must_resolve` (tests only), a proxy
/// starts knowing none.
fn resolve_origin(
    config: &Config,
    resolver: &dyn Resolve,
    metrics: &MetricsRegistry,
    must_resolve: bool,
) -> Result<OriginAddresses, StartError> {
    let unresolved = |reason| StartError::OriginUnresolved {
        address: config.origin.address.clone(),
        reason,
    };
    let origin =
        OriginAddresses::new(&config.origin.address, metrics.origin()).map_err(unresolved)?;
    match origin.refresh(resolver) {
        Err(reason) if must_resolve => Err(unresolved(reason)),
        _ => Ok(origin),
    }
}

/// `--test` looks the origin's name up as the start does.
pub fn check_origin(config: &Config) -> Result<(), StartError> {
    resolve_origin(config, &SystemResolver, &MetricsRegistry::new(), true).map(drop)
}

/// Pingora retries a busy port for 30 s and then fails inside a task: check first, fail fast.
fn check_free(key: &'static str, address: SocketAddr) -> Result<(), StartError> {
    TcpListener::bind(address)
        .map(drop)
        .map_err(|e| StartError::AddressInUse {
            key,
            address,
            reason: e.to_string(),
        })
}

fn demo_origin_address(config: &Config) -> Result<Option<SocketAddr>, StartError> {
    if !config.origin.serve_demo_shop {
        return Ok(None);
    }
    config.origin.address.parse().map(Some).map_err(|_| {
        StartError::Unsupported(format!(
            "origin.address {:?} must be an IP:port to serve the demo shop on",
            config.origin.address
        ))
    })
}

/// Fewer derived connections than this is worth a warning: a crowd's open pages need more.
const FEW_CONNECTIONS: u64 = 1000;

/// The read buffer of a plain-HTTP visitor connection (see where the listener is added).
const READ_BUFFER: usize = 4 * 1024;

/// Says at start when the open-file limit is below what `listen.max_connections` needs (each
/// visitor connection may hold a second descriptor towards the origin), or leaves room for few
/// connections, naming what to change.
fn warn_if_short(open_files: &OpenFiles, configured: Cap, max_connections: u64) {
    let raise =
        "raise the limit (LimitNOFILE= in the systemd unit, --ulimit nofile in a container)";
    if configured == Cap::FromFileLimit {
        if max_connections < FEW_CONNECTIONS {
            log::warn!(
                "the open-file limit {} (hard {}) leaves room for only {max_connections} visitor \
                 connections (listen.max_connections = 0 derives them from it): {raise}",
                open_files.soft,
                open_files.hard
            );
        }
        return;
    }
    let needed = OpenFiles::needed_for(max_connections);
    if open_files.soft < needed {
        log::warn!(
            "listen.max_connections = {max_connections} needs about {needed} open files, and the \
             limit is {} (hard {}): {raise}, or lower listen.max_connections",
            open_files.soft,
            open_files.hard
        );
    }
}

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

/// The runtime the store's connections live on: kept for as long as the server runs.
pub struct StoreRuntime {
    _runtime: Option<tokio::runtime::Runtime>,
}

/// The rooms' stores as the start found them.
struct Opened {
    /// One per room, in the config's order.
    stores: Vec<Arc<dyn Store>>,
    /// The rooms whose store did not answer at start: they serve as during an outage until it
    /// does.
    unreachable: Vec<String>,
    runtime: StoreRuntime,
}

/// One store per room (each room's keys carry its own hash tag); on Redis they are connected
/// on one runtime, which must outlive every Pingora service that calls into it.
fn open_stores(config: &Config, options: &RunOptions) -> Result<Opened, StartError> {
    let Backend::Redis { url } = &config.store.backend else {
        let stores = config
            .rooms
            .iter()
            .map(|_| Arc::new(MemoryStore::new(options.clock.clone(), options.seed)) as _)
            .collect();
        return Ok(Opened {
            stores,
            unreachable: Vec::new(),
            runtime: StoreRuntime { _runtime: None },
        });
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("waitroom-store")
        .enable_all()
        .build()?;
    let mut stores: Vec<Arc<dyn Store>> = Vec::with_capacity(config.rooms.len());
    let mut unreachable = Vec::new();
    for room in &config.rooms {
        let redis_options = RedisOptions {
            url: url.clone(),
            prefix: config.store.prefix.clone(),
            room: room.id.clone(),
            connect_timeout: config.store.connect_timeout,
            command_timeout: config.store.command_timeout,
            time: if options.redis_follows_clock {
                TimeSource::Clock(options.clock.clone())
            } else {
                TimeSource::Server
            },
            seed: options.seed,
        };
        // On a thread of its own: the caller may itself be inside a runtime (tests, embedding).
        let connected = std::thread::scope(|scope| {
            scope
                .spawn(|| runtime.block_on(RedisStore::connect(redis_options.clone())))
                .join()
        })
        .map_err(|_| StartError::StoreThread)?;
        match connected {
            Ok(store) => stores.push(Arc::new(store)),
            // An outage at start is served like one that begins later: by `on_error`, until
            // Redis answers. Anything else (an invalid URL) no retry can mend: the start fails.
            Err(e @ StoreError::Unavailable(_)) => {
                let store = DeferredRedisStore::start(redis_options, runtime.handle(), &e);
                stores.push(Arc::new(store));
                unreachable.push(room.id.clone());
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(Opened {
        stores,
        unreachable,
        runtime: StoreRuntime {
            _runtime: Some(runtime),
        },
    })
}

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
    if options.upgrade {
        // The old process holds the ports: they come over the upgrade socket.
        if config.upgrade_socket.is_none() {
            return Err(StartError::Unsupported(
                "--upgrade needs listen.upgrade_socket (the old process sends its sockets there)"
                    .into(),
            ));
        }
    } else {
        check_free("listen.address", config.listen)?;
        check_free("admin.address", config.admin_address)?;
        if let Some(address) = demo {
            check_free("origin.address (demo shop)", address)?;
        }
    }
    let Opened {
        stores,
        unreachable,
        runtime: store_runtime,
    } = open_stores(config, &options)?;

    let threads = if config.threads > 0 {
        config.threads
    } else {
        std::thread::available_parallelism().map_or(2, |n| n.get())
    };
    let path_text = |p: &std::path::Path| p.to_string_lossy().into_owned();
    // Pingora counts whole seconds: a part second is rounded up, never dropped.
    let grace_secs =
        config.grace_period.as_secs() + u64::from(config.grace_period.subsec_nanos() > 0);
    let conf = ServerConf {
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
    };
    let opt = Opt {
        upgrade: options.upgrade,
        ..Opt::default()
    };
    let mut server = Server::new_with_opt_and_conf(Some(opt), conf);

    let open_files = raise_open_files()?;
    log::info!(
        "open-file limit: {} (hard {})",
        open_files.soft,
        open_files.hard
    );
    let clock = options.clock.clone();
    let turnstile = config
        .turnstile
        .as_ref()
        .map(Turnstile::new)
        .transpose()?
        .map(Arc::new);
    let several = config.rooms.len() > 1;
    // The group's one admission lease lives in the first room's store.
    let Some(lease) = stores.first().cloned() else {
        return Err(StartError::Unsupported(
            "the configuration has no room".into(),
        ));
    };
    let all_stores = stores.clone();
    let mut fronts = Vec::with_capacity(config.rooms.len());
    let mut room_loops = Vec::with_capacity(config.rooms.len());
    let mut room_admins = Vec::with_capacity(config.rooms.len());
    for (room_config, store) in config.rooms.iter().zip(stores) {
        let room = Room::new(
            &room_config.id,
            room_config.settings.clone(),
            store,
            clock.clone(),
            &metrics,
        )
        .with_autopilot(room_config.autopilot.clone())
        .with_pass_limits(config.pass.limits);
        if unreachable.contains(&room_config.id) {
            // Down from the first moment (gauge, /readyz), not only after the loop's first tick.
            room.health.note(&Err::<(), _>(StoreError::Unavailable(
                "not reached at start".into(),
            )));
        }
        // A page names its room to the reserved paths only when the proxy has several.
        let named = several.then_some(room_config.id.as_str());
        let signer = Arc::new(Signer::new(&room_config.id, &config.pass.secret)?);
        let cookies = CookieJar::new(
            &config.pass,
            &room_config.cookie_name,
            signer.clone(),
            clock.clone(),
        );
        let custom_page = match &room_config.template {
            Some(template) => Some(Arc::new(CustomPage::compile(template).map_err(
                |reason| StartError::PageTemplate {
                    path: template.path.display().to_string(),
                    reason,
                },
            )?)),
            None => None,
        };
        let responder = Arc::new(Responder::new(
            room_config.branding.clone(),
            custom_page,
            cookies,
            turnstile
                .as_ref()
                .map(|t| t.challenge(&Reserved::Turnstile.url(named))),
            Reserved::Status.url(named),
            clock.clone(),
        ));
        let gate = Arc::new(Gate::new(GateParts {
            settings: room.settings.clone(),
            view: room.view.clone(),
            health: room.health.clone(),
            pollers: room.pollers.clone(),
            store: room.store.clone(),
            clock: clock.clone(),
            metrics: room.metrics.clone(),
            signer,
            cookie_name: room_config.cookie_name.clone(),
            on_store_error: config.store.on_error,
            ip_limits: config.rate_limit,
            pass_use: room.pass_use.clone(),
            turnstile: turnstile.clone(),
        }));
        let room_loop = Arc::new(RoomLoop::new(&room));
        room_admins.push(RoomAdmin::new(&room, gate.clone(), room_loop.clone()));
        room_loops.push(room_loop);
        fronts.push(Front {
            id: room_config.id.clone(),
            gate,
            responder,
            pulse: room.pulse.clone(),
            metrics: room.metrics.clone(),
            pilot: room.pilot.clone(),
        });
    }
    let instance = format!(
        "{}-{:08x}",
        std::env::var("HOSTNAME").unwrap_or_else(|_| "waitroom".into()),
        rand::random::<u32>()
    );
    let admission = Arc::new(AdmissionLoop::new(
        lease,
        room_loops,
        instance,
        config.store.leader_ttl,
    ));

    let reloader = Arc::new(Reloader::new(config.clone(), admission.clone()));

    let listener = config.connections;
    let max_connections = match listener.max_connections {
        Cap::At(n) => n.get(),
        Cap::FromFileLimit => open_files.connections(),
    };
    let max_event_streams = match listener.max_event_streams {
        Cap::At(n) => n.get(),
        // Streams hold their connection for minutes: as many as the connections would let one
        // crowd (or one scalper with many tickets) take every connection, and pass holders,
        // newcomers and polls got 503. Half stays for them.
        Cap::FromFileLimit => (max_connections / 2).max(1),
    };
    let max_event_streams = usize::try_from(max_event_streams).unwrap_or(usize::MAX);
    warn_if_short(&open_files, listener.max_connections, max_connections);
    let connections = Arc::new(Connections::new(ConnectionLimits {
        max: usize::try_from(max_connections).unwrap_or(usize::MAX),
        per_ip: listener
            .max_connections_per_ip
            .map(|n| usize::try_from(n.get()).unwrap_or(usize::MAX)),
        header_timeout: listener.header_timeout,
    }));
    log::info!(
        "connections: at most {max_connections} (listen.max_connections), \
         {max_event_streams} event streams (listen.max_event_streams)"
    );
    let routes = Routes::new(config.rooms.iter().map(|r| r.route.clone()));
    let mut proxy = pingora_proxy::http_proxy(
        &server.configuration,
        WaitroomProxy::new(
            fronts,
            ProxySettings {
                routes,
                sites: Sites::new(
                    config.rooms.iter().map(|r| r.route.host.as_deref()),
                    &config.hosts,
                ),
                origin: config.origin.clone(),
                addresses: origin.clone(),
                access_log: config.log.access,
                trusted_proxies: config.trusted_proxies.clone(),
                tls: config.tls.is_some(),
                max_event_streams,
                max_event_streams_per_ip: listener
                    .max_event_streams_per_ip
                    .map(|n| usize::try_from(n.get()).unwrap_or(usize::MAX)),
                keepalive_timeout: listener.keepalive_timeout,
                body_timeout: listener.body_timeout,
                ipv6_prefix: config.rate_limit.ipv6_prefix,
            },
        ),
    );
    // HTTP/1.1 keep-alive is set per request (`WaitroomProxy::early_request_filter`); an HTTP/2
    // connection's idle time is Pingora's.
    let mut server_options = HttpServerOptions::default();
    server_options.h2_idle_timeout = Some(listener.keepalive_timeout);
    proxy.server_options = Some(server_options);
    let mut proxy = Service::new(
        "waitroom proxy".to_owned(),
        FrontDoor::new(proxy, connections.clone()),
    );
    let listen = config.listen.to_string();
    match &config.tls {
        Some(tls) => {
            let mut settings =
                TlsSettings::intermediate(&path_text(&tls.certificate), &path_text(&tls.key))
                    .map_err(|e| TlsError {
                        key: "listen.certificate",
                        reason: e.to_string(),
                    })?;
            // ALPN: HTTP/2 preferred, HTTP/1.1 still offered.
            settings.enable_h2();
            proxy.add_tls_with_settings(&listen, None, settings);
        }
        // A plain-HTTP connection reads small request heads: 4 KiB instead of Pingora's 64 KiB
        // read buffer, which was most of what an open waiting page cost (BENCHMARKS.md, "Open
        // waiting pages"). TLS keeps the default: it reads 16 KiB records.
        None => proxy.add_listener(
            ListenerConfig::tcp(listen).l4_buffer(L4BufferSettings::default().read(READ_BUFFER)),
        ),
    }

    let mut admin = Service::new(
        "waitroom admin".to_owned(),
        AdminApp::new(
            room_admins,
            AdminParts {
                admission: admission.clone(),
                reloader: reloader.clone(),
                token: config.admin_token.clone(),
                ready_requires_store: config.admin_ready_requires_store,
                metrics,
                listener: Arc::new(ListenerState {
                    open_files,
                    connections: connections.clone(),
                    max_event_streams,
                }),
            },
        ),
    );
    admin.threads = Some(1);
    admin.add_tcp(&config.admin_address.to_string());

    let background = GenBackgroundService::new("waitroom admission".to_owned(), admission.clone());

    server.add_service(proxy);
    server.add_service(admin);
    server.add_service(background);
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
            stores: all_stores,
            admission,
            reloader,
            open_files,
            connections,
        },
        store_runtime,
    ))
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
