//! `[origin]`: the shop behind the room.

use std::path::PathBuf;
use std::time::Duration;

use super::values::{choice, duration, non_empty_path};
use super::{ConfigError, invalid};
use crate::config::file::OriginSection;

#[derive(Debug, Clone)]
pub struct OriginConfig {
    pub address: String,
    pub tls: bool,
    pub sni: String,
    /// Check the origin's certificate chain and name (only with `tls`).
    pub verify: bool,
    /// Trust only the CAs in this PEM file for the origin, not the system's.
    pub ca_file: Option<PathBuf>,
    pub host_header: Option<String>,
    pub connect_timeout: Duration,
    pub read_timeout: Duration,
    pub write_timeout: Duration,
    /// How often the host of `address` is looked up again (not for a literal address).
    pub resolve_interval: Duration,
    pub serve_demo_shop: bool,
    pub protected_responses: ProtectedResponses,
}

/// `origin.protected_responses`: what becomes of the caching the origin allows on the answers
/// a room protects (a pass holder's or a newly admitted visitor's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProtectedResponses {
    /// Kept out of shared caches: a CDN in front would otherwise hand a pass holder's page to
    /// the visitors still in line.
    Private,
    /// As the origin sent them, for an origin that already varies on the cookie.
    AsSent,
}

pub(crate) fn origin(
    origin: &OriginSection,
    warnings: &mut Vec<String>,
) -> Result<OriginConfig, ConfigError> {
    let (origin_host, _) = super::values::host_port("origin.address", &origin.address)?;
    if origin.ca_file.is_some() && !origin.tls {
        return Err(invalid("origin.ca_file", "needs origin.tls = true"));
    }
    if origin.tls && !origin.verify {
        warnings.push(
            "origin.verify = false: the origin's certificate is not checked; anyone on the \
             path to it can read and change the traffic"
                .into(),
        );
    }
    Ok(OriginConfig {
        address: origin.address.clone(),
        tls: origin.tls,
        verify: origin.verify,
        ca_file: non_empty_path("origin.ca_file", origin.ca_file.as_deref())?,
        sni: origin
            .sni
            .clone()
            .unwrap_or_else(|| origin_host.trim_matches(['[', ']']).to_owned()),
        host_header: origin.host_header.clone(),
        connect_timeout: duration("origin.connect_timeout", &origin.connect_timeout)?,
        read_timeout: duration("origin.read_timeout", &origin.read_timeout)?,
        write_timeout: duration("origin.write_timeout", &origin.write_timeout)?,
        resolve_interval: resolve_interval(&origin.resolve_interval)?,
        serve_demo_shop: origin.serve_demo_shop,
        protected_responses: choice(
            "origin.protected_responses",
            &origin.protected_responses,
            &[
                ("private", ProtectedResponses::Private),
                ("as_sent", ProtectedResponses::AsSent),
            ],
        )?,
    })
}

/// Shorter than this would only load the DNS: a name's records rarely live under a second.
const MIN_RESOLVE_INTERVAL: Duration = Duration::from_secs(1);
/// Longer would keep a moved origin's old address for a day: and a timer that far out is where
/// arithmetic on instants overflows.
const MAX_RESOLVE_INTERVAL: Duration = Duration::from_secs(24 * 3600);

fn resolve_interval(text: &str) -> Result<Duration, ConfigError> {
    let every = duration("origin.resolve_interval", text)?;
    if !(MIN_RESOLVE_INTERVAL..=MAX_RESOLVE_INTERVAL).contains(&every) {
        return Err(invalid(
            "origin.resolve_interval",
            format!("{text:?} is not between 1s and 1d"),
        ));
    }
    Ok(every)
}
