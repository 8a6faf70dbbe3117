//! Who the visitor is on the network: CIDR ranges, and the client address behind trusted proxies.

use std::net::IpAddr;

/// An address range such as `10.0.0.0/8` or `2001:db8::/32`; a bare address is a /32 or /128.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    network: IpAddr,
    prefix: u8,
}

/// IPv4 clients reach a dual-stack listener as `::ffff:a.b.c.d`: compare them as IPv4.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

impl Cidr {
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        let (addr, prefix) = match text.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (text, None),
        };
        let network = canonical(
            addr.parse::<IpAddr>()
                .map_err(|_| format!("{text:?} is not an address or range like 10.0.0.0/8"))?,
        );
        let max = if network.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            Some(p) => p
                .parse::<u8>()
                .ok()
                .filter(|p| *p <= max)
                .ok_or_else(|| format!("{text:?}: the prefix must be 0 to {max}"))?,
            None => max,
        };
        Ok(Self { network, prefix })
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.network, canonical(ip)) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(self.prefix))
                    .unwrap_or(0);
                u32::from(net) & mask == u32::from(ip) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.prefix))
                    .unwrap_or(0);
                u128::from(net) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }
}

/// The client's address: the peer itself, unless the peer is a trusted proxy; then
/// `X-Forwarded-For` is walked from the right (the entries trusted proxies appended) to the first
/// address that is not a trusted proxy. Anything left of that is the client's own claim and is
/// ignored, so a client cannot pick its address by sending the header itself.
pub fn client_ip(peer: IpAddr, forwarded_for: Option<&str>, trusted: &[Cidr]) -> IpAddr {
    let is_trusted = |ip: IpAddr| trusted.iter().any(|c| c.contains(ip));
    let mut client = canonical(peer);
    if !is_trusted(client) {
        return client;
    }
    let Some(header) = forwarded_for else {
        return client;
    };
    for hop in header.rsplit(',') {
        match hop.trim().parse::<IpAddr>() {
            Ok(ip) => {
                client = canonical(ip);
                if !is_trusted(client) {
                    return client;
                }
            }
            // A malformed entry: nothing left of it can be trusted either.
            Err(_) => return client,
        }
    }
    client
}

/// The address a per-address limit counts by: an IPv4 address, or the /64 of an IPv6 one. One
/// IPv6 subscriber (a home, a phone, a server) is handed a whole /64 and picks addresses in it
/// freely, so counting single IPv6 addresses would limit nobody.
pub fn limit_key(ip: IpAddr) -> String {
    match canonical(ip) {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => {
            let network = u128::from(v6) & (u128::MAX << 64);
            format!("{}/64", std::net::Ipv6Addr::from(network))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("test address")
    }

    fn cidr(s: &str) -> Cidr {
        Cidr::parse(s).expect("test range")
    }

    #[test]
    fn ranges_match_v4_v6_and_mapped_addresses() {
        assert!(cidr("10.0.0.0/8").contains(ip("10.200.3.4")));
        assert!(!cidr("10.0.0.0/8").contains(ip("11.0.0.1")));
        assert!(cidr("10.0.0.0/8").contains(ip("::ffff:10.1.2.3")));
        assert!(cidr("203.0.113.7").contains(ip("203.0.113.7")));
        assert!(!cidr("203.0.113.7").contains(ip("203.0.113.8")));
        assert!(cidr("2001:db8::/32").contains(ip("2001:db8:1::5")));
        assert!(!cidr("2001:db8::/32").contains(ip("10.0.0.1")));
        assert!(cidr("0.0.0.0/0").contains(ip("192.0.2.1")));
        assert!(Cidr::parse("10.0.0.0/33").is_err());
        assert!(Cidr::parse("ten").is_err());
    }

    #[test]
    fn limits_count_by_ipv4_address_or_ipv6_slash_64() {
        assert_eq!(limit_key(ip("203.0.113.7")), "203.0.113.7");
        assert_eq!(limit_key(ip("::ffff:203.0.113.7")), "203.0.113.7");
        assert_eq!(limit_key(ip("2001:db8:1:2:aaaa::1")), "2001:db8:1:2::/64");
        assert_eq!(
            limit_key(ip("2001:db8:1:2:ffff:ffff:ffff:ffff")),
            limit_key(ip("2001:db8:1:2::9"))
        );
        assert_ne!(
            limit_key(ip("2001:db8:1:3::1")),
            limit_key(ip("2001:db8:1:2::1"))
        );
    }

    #[test]
    fn forwarded_for_is_trusted_only_from_trusted_proxies_and_walked_from_the_right() {
        let trusted = [cidr("10.0.0.0/8")];
        // A client sending the header itself is not believed.
        assert_eq!(
            client_ip(ip("198.51.100.9"), Some("1.2.3.4"), &trusted),
            ip("198.51.100.9")
        );
        // Behind two trusted hops, the first untrusted address from the right is the client;
        // what the client claimed further left is ignored.
        assert_eq!(
            client_ip(
                ip("10.0.0.2"),
                Some("6.6.6.6, 198.51.100.9, 10.0.0.1"),
                &trusted
            ),
            ip("198.51.100.9")
        );
        assert_eq!(client_ip(ip("10.0.0.2"), None, &trusted), ip("10.0.0.2"));
        assert_eq!(
            client_ip(ip("10.0.0.2"), Some("garbage, 10.0.0.1"), &trusted),
            ip("10.0.0.1")
        );
        assert_eq!(
            client_ip(ip("10.0.0.2"), Some("1.1.1.1"), &[]),
            ip("10.0.0.2")
        );
    }
}
