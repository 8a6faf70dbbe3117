//! `[rate_limit]`: new tickets per client address.

use super::{ConfigError, invalid};
use crate::config::file::RateLimitSection;
use crate::core::ip_limit::IpLimits;

pub(crate) fn ip_limits(section: &RateLimitSection) -> Result<IpLimits, ConfigError> {
    let per_minute = section.tickets_per_ip_per_minute;
    let burst = section.burst.unwrap_or(per_minute.saturating_mul(2));
    if per_minute > 0 && burst == 0 {
        return Err(invalid(
            "rate_limit.burst",
            "must be at least 1 while tickets_per_ip_per_minute is on",
        ));
    }
    Ok(IpLimits {
        per_minute,
        burst,
        max_live: section.max_live_tickets_per_ip,
    })
}
