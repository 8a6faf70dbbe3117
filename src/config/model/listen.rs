//! `[listen]`: the public listener and the hosts it serves.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use super::values::{duration_or_zero, non_empty_path, socket_addr};
use super::{ConfigError, Environment, canonical, invalid};
use crate::client::Cidr;
use crate::config::file::ListenSection;

/// Set by systemd's `RuntimeDirectory=`: where the upgrade socket and the pid file go by default.
pub const ENV_RUNTIME_DIRECTORY: &str = "RUNTIME_DIRECTORY";
pub const UPGRADE_SOCKET_NAME: &str = "upgrade.sock";
pub const PID_FILE_NAME: &str = "waitroom.pid";

/// The certificate and key of the public listener, which then speaks TLS (HTTP/2 and HTTP/1.1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenTls {
    pub certificate: PathBuf,
    pub key: PathBuf,
}

/// `[listen]`, validated; `Config` takes its parts as they are.
pub(crate) struct Listen {
    pub address: SocketAddr,
    pub threads: usize,
    pub tls: Option<ListenTls>,
    pub grace_period: Duration,
    pub trusted_proxies: Vec<Cidr>,
    pub upgrade_socket: Option<PathBuf>,
    pub pid_file: Option<PathBuf>,
    pub hosts: Vec<String>,
}

pub(crate) fn listen(listen: &ListenSection, env: &dyn Environment) -> Result<Listen, ConfigError> {
    let tls = match (
        non_empty_path("listen.certificate", listen.certificate.as_deref())?,
        non_empty_path("listen.key", listen.key.as_deref())?,
    ) {
        (Some(certificate), Some(key)) => Some(ListenTls { certificate, key }),
        (None, None) => None,
        (Some(_), None) => {
            return Err(invalid("listen.key", "is required with listen.certificate"));
        }
        (None, Some(_)) => {
            return Err(invalid("listen.certificate", "is required with listen.key"));
        }
    };
    // Under systemd (RuntimeDirectory=) the hand-over needs no configuration.
    let runtime_dir = env
        .var(ENV_RUNTIME_DIRECTORY)
        .and_then(|dirs| dirs.split(':').next().map(PathBuf::from));
    let in_runtime_dir = |name: &str| runtime_dir.as_ref().map(|dir| dir.join(name));
    let mut hosts: Vec<String> = Vec::new();
    for text in &listen.hosts {
        let host = canonical::host("listen.hosts", text)?;
        if !hosts.contains(&host) {
            hosts.push(host);
        }
    }
    Ok(Listen {
        address: socket_addr("listen.address", &listen.address)?,
        threads: listen.threads,
        tls,
        grace_period: duration_or_zero("listen.grace_period", &listen.grace_period)?,
        trusted_proxies: listen
            .trusted_proxies
            .iter()
            .map(|c| Cidr::parse(c).map_err(|e| invalid("listen.trusted_proxies", e)))
            .collect::<Result<_, _>>()?,
        upgrade_socket: non_empty_path("listen.upgrade_socket", listen.upgrade_socket.as_deref())?
            .or_else(|| in_runtime_dir(UPGRADE_SOCKET_NAME)),
        pid_file: non_empty_path("listen.pid_file", listen.pid_file.as_deref())?
            .or_else(|| in_runtime_dir(PID_FILE_NAME)),
        hosts,
    })
}
