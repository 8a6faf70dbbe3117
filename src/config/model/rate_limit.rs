//! `[rate_limit]`: new tickets per client address.

use super::{ConfigError, invalid};
use crate::config::file::RateLimitSection;
use crate::core::ip_limit::{IpLimits, MAX_IPV6_PREFIX, MIN_IPV6_PREFIX};

pub(crate) fn ip_limits(section: &RateLimitSection) -> Result<IpLimits, ConfigError> {
    let per_minute = section.tickets_per_ip_per_minute;
    let burst = section.burst.unwrap_or(per_minute.saturating_mul(2));
    if per_minute > 0 && burst == 0 {
        return Err(invalid(
            "rate_limit.burst",
            "must be at least 1 while tickets_per_ip_per_minute is on",
        ));
    }
    let ipv6_prefix = u8::try_from(section.ipv6_prefix)
        .ok()
        .filter(|bits| (MIN_IPV6_PREFIX..=MAX_IPV6_PREFIX).contains(bits))
        .ok_or_else(|| {
            invalid(
                "rate_limit.ipv6_prefix",
                format!(
                    "{} is not a prefix length from {MIN_IPV6_PREFIX} to {MAX_IPV6_PREFIX}",
                    section.ipv6_prefix
                ),
            )
        })?;
    Ok(IpLimits {
        per_minute,
        burst,
        max_live: section.max_live_tickets_per_ip,
        ipv6_prefix,
    })
}
