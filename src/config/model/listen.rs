//! `[listen]`: the public listener, the hosts it serves, and how it treats connections.

use std::net::SocketAddr;
use std::num::NonZeroU64;
use std::path::PathBuf;
use std::time::Duration;

use super::values::{duration, duration_or_zero, non_empty_path, socket_addr};
use super::{ConfigError, Environment, canonical, invalid};
use crate::config::file::ListenSection;
use crate::core::body_pace::PaceRule;
use crate::request::client::Cidr;

/// Set by systemd's `RuntimeDirectory=`: where the upgrade socket and the pid file go by default.
pub const ENV_RUNTIME_DIRECTORY: &str = "RUNTIME_DIRECTORY";
pub const UPGRADE_SOCKET_NAME: &str = "upgrade.sock";
pub const PID_FILE_NAME: &str = "waitroom.pid";

/// The longest keep-alive allowed. Browsers keep an idle connection open for minutes at most,
/// and a connection kept longer only holds a slot of `max_connections`.
pub const MAX_KEEPALIVE: Duration = Duration::from_secs(600);

/// The certificate and key of a listener, which then speaks TLS: the public one (HTTP/2 and
/// HTTP/1.1) or the admin one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenTls {
    pub certificate: PathBuf,
    pub key: PathBuf,
}

/// How the public listener treats visitors' connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListenConfig {
    /// An idle keep-alive connection is closed after this long (at most [`MAX_KEEPALIVE`]; 75 s
    /// or less is advised, nginx's default, as a connection idle longer is rarely used again).
    pub keepalive_timeout: Duration,
    /// A request's head must arrive within this long of the connection's opening (its first
    /// request) or of its first byte (later requests), or the connection gets 408 and is closed:
    /// a head sent a byte at a time would otherwise hold it forever.
    pub header_timeout: Duration,
    /// Open visitor connections at most; beyond it the connection idle longest is closed for a
    /// newcomer, or the newcomer gets 503.
    pub max_connections: Cap,
    /// Open connections per client address at most; `None`: no limit, the default, as a
    /// carrier's NAT puts thousands of visitors behind one address.
    pub max_connections_per_ip: Option<NonZeroU64>,
    /// Open `/__waitroom/events` streams (one per open waiting page) at most. Derived (0 in the
    /// file), half of `max_connections`: the other half stays free for pass holders, newcomers
    /// and the pages' polls, however many streams a crowd (or one scalper) opens.
    pub max_event_streams: Cap,
    /// Open event streams per client address at most (after trusted proxies, IPv6 counted by
    /// `rate_limit.ipv6_prefix`); `None`: no limit. A few tabs of one household: beyond it
    /// the page polls instead, which costs a request every `refresh_interval`, not a
    /// connection held for minutes.
    pub max_event_streams_per_ip: Option<NonZeroU64>,
    /// The longest silence between two reads of a request body (HTTP/1.1 bodies, and the
    /// bodies the proxy reads itself on either protocol), after which the connection is closed.
    /// A gap rather than a rate: an honest upload over a poor mobile link stalls and then
    /// bursts, while a scalper trickling a byte at a time is cut by the first gap past it. A
    /// trickle steady enough never to leave a gap is `min_body_pace`'s.
    pub body_timeout: Duration,
    /// `listen.min_body_rate`: once a body has taken longer than `body_timeout`, it must have
    /// averaged this many bytes a second since its head or the connection is closed (HTTP/1.1
    /// and HTTP/2); `None`: no minimum.
    pub min_body_pace: Option<PaceRule>,
}

/// A limit on open connections: set by the operator, or (0 in the file) derived at start from
/// the open-file limit the process gets, which is what runs out first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cap {
    FromFileLimit,
    At(NonZeroU64),
}

impl Cap {
    fn from_file(value: u64) -> Self {
        NonZeroU64::new(value).map_or(Cap::FromFileLimit, Cap::At)
    }
}

/// `[listen]`, validated; `Config` takes its parts as they are.
pub(crate) struct Listen {
    pub address: SocketAddr,
    pub threads: usize,
    pub tls: Option<ListenTls>,
    pub grace_period: Duration,
    pub trusted_proxies: Vec<Cidr>,
    pub country_header: Option<String>,
    pub upgrade_socket: Option<PathBuf>,
    pub pid_file: Option<PathBuf>,
    pub hosts: Vec<String>,
    pub connections: ListenConfig,
}

/// A listener's `certificate` and `key` (`section` is `listen` or `admin`): both or neither.
pub(crate) fn tls_pair(
    section: &str,
    certificate: Option<&str>,
    key: Option<&str>,
) -> Result<Option<ListenTls>, ConfigError> {
    let (cert_key, key_key) = (format!("{section}.certificate"), format!("{section}.key"));
    match (
        non_empty_path(&cert_key, certificate)?,
        non_empty_path(&key_key, key)?,
    ) {
        (Some(certificate), Some(key)) => Ok(Some(ListenTls { certificate, key })),
        (None, None) => Ok(None),
        (Some(_), None) => Err(invalid(&key_key, format!("is required with {cert_key}"))),
        (None, Some(_)) => Err(invalid(&cert_key, format!("is required with {key_key}"))),
    }
}

pub(crate) fn listen(listen: &ListenSection, env: &dyn Environment) -> Result<Listen, ConfigError> {
    let tls = tls_pair(
        "listen",
        listen.certificate.as_deref(),
        listen.key.as_deref(),
    )?;
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
        country_header: listen
            .country_header
            .as_deref()
            .map(|name| {
                http::HeaderName::from_bytes(name.trim().as_bytes())
                    .map(|n| n.as_str().to_owned())
                    .map_err(|_| {
                        invalid(
                            "listen.country_header",
                            format!("{name:?} is not a header name"),
                        )
                    })
            })
            .transpose()?,
        upgrade_socket: non_empty_path("listen.upgrade_socket", listen.upgrade_socket.as_deref())?
            .or_else(|| in_runtime_dir(UPGRADE_SOCKET_NAME)),
        pid_file: non_empty_path("listen.pid_file", listen.pid_file.as_deref())?
            .or_else(|| in_runtime_dir(PID_FILE_NAME)),
        hosts,
        connections: connections(listen)?,
    })
}

fn connections(listen: &ListenSection) -> Result<ListenConfig, ConfigError> {
    let keepalive_timeout = duration("listen.keepalive_timeout", &listen.keepalive_timeout)?;
    if keepalive_timeout > MAX_KEEPALIVE {
        return Err(invalid(
            "listen.keepalive_timeout",
            "must be at most 10m (75s or less is advised)",
        ));
    }
    let body_timeout = duration("listen.body_timeout", &listen.body_timeout)?;
    let max_connections = Cap::from_file(listen.max_connections);
    let max_connections_per_ip = NonZeroU64::new(listen.max_connections_per_ip);
    if let (Cap::At(all), Some(per_ip)) = (max_connections, max_connections_per_ip)
        && per_ip > all
    {
        return Err(invalid(
            "listen.max_connections_per_ip",
            format!("{per_ip} is above listen.max_connections ({all})"),
        ));
    }
    Ok(ListenConfig {
        keepalive_timeout,
        header_timeout: duration("listen.header_timeout", &listen.header_timeout)?,
        max_connections,
        max_connections_per_ip,
        max_event_streams: Cap::from_file(listen.max_event_streams),
        max_event_streams_per_ip: NonZeroU64::new(listen.max_event_streams_per_ip),
        body_timeout,
        min_body_pace: NonZeroU64::new(listen.min_body_rate).map(|min_bytes_per_second| PaceRule {
            min_bytes_per_second,
            grace: body_timeout,
        }),
    })
}
