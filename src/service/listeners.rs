//! The two listeners: the public one (the front door, Pingora's HTTP session, the proxy; plain
//! or TLS with HTTP/2) with its connection limits, and the admin one.

use std::sync::Arc;

use pingora_core::apps::HttpServerOptions;
use pingora_core::listeners::{L4BufferSettings, ListenerConfig};
use pingora_core::server::configuration::ServerConf;
use pingora_core::services::listening::Service;
use pingora_proxy::HttpProxy;

use super::admin::{AdminApp, AdminParts};
use super::checks::warn_if_short;
use super::tls::{TlsError, TlsKeys, listener_settings};
use crate::config::Config;
use crate::config::model::Cap;
use crate::proxy::origin::OriginAddresses;
use crate::proxy::{
    ConnectionLimits, Connections, Front, FrontDoor, Hooks, ProxySettings, WaitroomProxy,
};
use crate::request::route::Routes;
use crate::request::view::Sites;
use crate::service::limits::OpenFiles;

/// The read buffer of a plain-HTTP visitor connection: none (Pingora's 64 KiB were most of what
/// an open waiting page cost, BENCHMARKS.md, "Open waiting pages"). Pingora reads heads and
/// bodies into buffers of its own at least as large, which a buffer here would only be passed
/// through; an open page's connection, which reads nothing more, then holds none at all. TLS
/// keeps the default: it reads 16 KiB records.
const READ_BUFFER: usize = 0;

/// How many visitor connections and event streams the public listener takes.
pub(super) struct Capacity {
    pub connections: Arc<Connections>,
    pub max_event_streams: usize,
}

/// `listen.max_connections` and `listen.max_event_streams`, derived from the open-file limit
/// when they are 0, with a warning when the limit is short of them.
pub(super) fn capacity(config: &Config, open_files: &OpenFiles) -> Capacity {
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
    warn_if_short(open_files, listener.max_connections, max_connections);
    log::info!(
        "connections: at most {max_connections} (listen.max_connections), \
         {max_event_streams} event streams (listen.max_event_streams)"
    );
    Capacity {
        connections: Arc::new(Connections::new(ConnectionLimits {
            max: usize::try_from(max_connections).unwrap_or(usize::MAX),
            per_ip: listener
                .max_connections_per_ip
                .map(|n| usize::try_from(n.get()).unwrap_or(usize::MAX)),
            header_timeout: listener.header_timeout,
        })),
        max_event_streams,
    }
}

/// The public listener: every room's front behind one front door.
pub(super) fn public(
    server: &Arc<ServerConf>,
    config: &Config,
    fronts: Vec<Front>,
    origin: Arc<OriginAddresses>,
    capacity: &Capacity,
) -> Result<Service<FrontDoor<HttpProxy<Hooks>>>, TlsError> {
    let listener = config.connections;
    let proxy = Arc::new(WaitroomProxy::new(
        fronts,
        ProxySettings {
            routes: Routes::new(config.rooms.iter().map(|r| r.routes.clone())),
            sites: Sites::new(
                config
                    .rooms
                    .iter()
                    .flat_map(|r| r.routes.iter().map(|route| route.host.as_deref())),
                &config.hosts,
            ),
            origin: config.origin.clone(),
            addresses: origin,
            access_log: config.log.access,
            trusted_proxies: config.trusted_proxies.clone(),
            country_header: config.country_header.clone(),
            tls: config.tls.is_some(),
            max_event_streams: capacity.max_event_streams,
            max_event_streams_per_ip: listener
                .max_event_streams_per_ip
                .map(|n| usize::try_from(n.get()).unwrap_or(usize::MAX)),
            keepalive_timeout: listener.keepalive_timeout,
            body_timeout: listener.body_timeout,
            min_body_pace: listener.min_body_pace,
            ipv6_prefix: config.rate_limit.ipv6_prefix,
        },
    ));
    let mut hooks = pingora_proxy::http_proxy(server, Hooks::new(proxy.clone()));
    // HTTP/1.1 keep-alive is set per request (`Hooks::early_request_filter`); an HTTP/2
    // connection's idle time is Pingora's.
    let mut server_options = HttpServerOptions::default();
    server_options.h2_idle_timeout = Some(listener.keepalive_timeout);
    hooks.server_options = Some(server_options);
    let mut service = Service::new(
        "waitroom proxy".to_owned(),
        FrontDoor::new(hooks, capacity.connections.clone(), proxy),
    );
    let listen = config.listen.to_string();
    match &config.tls {
        Some(tls) => {
            let mut settings = listener_settings(tls, TlsKeys::LISTEN)?;
            // ALPN: HTTP/2 preferred, HTTP/1.1 still offered.
            settings.enable_h2();
            service.add_tls_with_settings(&listen, None, settings);
        }
        None => service.add_listener(
            ListenerConfig::tcp(listen).l4_buffer(L4BufferSettings::default().read(READ_BUFFER)),
        ),
    }
    Ok(service)
}

/// The admin listener: health, readiness, metrics and the API, on one thread of its own; over
/// TLS with `admin.certificate` (HTTP/1.1: the console's live view is one long response).
pub(super) fn admin(
    config: &Config,
    rooms: Vec<super::admin::RoomAdmin>,
    parts: AdminParts,
) -> Result<Service<AdminApp>, TlsError> {
    let mut admin = Service::new("waitroom admin".to_owned(), AdminApp::new(rooms, parts));
    admin.threads = Some(1);
    let address = config.admin_address.to_string();
    match &config.admin_tls {
        Some(tls) => {
            admin.add_tls_with_settings(&address, None, listener_settings(tls, TlsKeys::ADMIN)?)
        }
        None => admin.add_tcp(&address),
    }
    Ok(admin)
}
