//! What the start checks before it binds anything, and `--test` with it: the files the config
//! names, the origin's name, free ports, and whether the open-file limit fits the connections.

use std::net::{SocketAddr, TcpListener};

use super::start::StartError;
use super::tls::{TlsKeys, check_ca_file, check_listener};
use crate::config::Config;
use crate::config::model::Cap;
use crate::observe::MetricsRegistry;
use crate::proxy::origin::{OriginAddresses, Resolve, SystemResolver};
use crate::service::limits::OpenFiles;

/// What the proxy reads besides its configuration file: the TLS files. Checked at start and by
/// `--test`, because Pingora would only fail on them inside a running service.
pub fn check_files(config: &Config) -> Result<(), StartError> {
    if let Some(tls) = &config.tls {
        check_listener(tls, TlsKeys::LISTEN)?;
    }
    if let Some(tls) = &config.admin_tls {
        check_listener(tls, TlsKeys::ADMIN)?;
    }
    if let Some(ca_file) = &config.origin.ca_file {
        check_ca_file(ca_file)?;
    }
    Ok(())
}

/// The origin's addresses, looked up once now: a name that does not resolve would otherwise
/// only show as a 502 for every admitted visitor. Without `must_resolve` (tests only), a proxy
/// starts knowing none.
pub(super) fn resolve_origin(
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
pub(super) fn check_free(key: &'static str, address: SocketAddr) -> Result<(), StartError> {
    TcpListener::bind(address)
        .map(drop)
        .map_err(|e| StartError::AddressInUse {
            key,
            address,
            reason: e.to_string(),
        })
}

pub(super) fn demo_origin_address(config: &Config) -> Result<Option<SocketAddr>, StartError> {
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

/// Says at start when the open-file limit is below what `listen.max_connections` needs (each
/// visitor connection may hold a second descriptor towards the origin), or leaves room for few
/// connections, naming what to change.
pub(super) fn warn_if_short(open_files: &OpenFiles, configured: Cap, max_connections: u64) {
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
