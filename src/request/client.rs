//! Who the visitor is on the network: address ranges, and the client address behind trusted
//! proxies.

use std::net::IpAddr;

use ipnet::IpNet;

/// An address range such as `10.0.0.0/8` or `2001:db8::/32`; a bare address is a /32 or /128.
/// IPv4-mapped IPv6 addresses are compared as the IPv4 addresses they are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr(IpNet);

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
        let net = match text.split_once('/') {
            None => text
                .parse::<IpAddr>()
                .map(IpNet::from)
                .map_err(|_| format!("{text:?} is not an address or range like 10.0.0.0/8"))?,
            Some((addr, prefix)) => {
                let addr = addr
                    .parse::<IpAddr>()
                    .map_err(|_| format!("{text:?} is not an address or range like 10.0.0.0/8"))?;
                let max = if addr.is_ipv4() { 32 } else { 128 };
                let prefix = prefix
                    .parse::<u8>()
                    .ok()
                    .filter(|p| *p <= max)
                    .ok_or_else(|| format!("{text:?}: the prefix must be 0 to {max}"))?;
                // A mapped IPv4 range is written as the IPv4 range it is: its prefix is the
                // IPv4 part's.
                let (addr, prefix) = match (addr, canonical(addr)) {
                    (IpAddr::V6(_), v4 @ IpAddr::V4(_)) => (v4, prefix.saturating_sub(96)),
                    _ => (addr, prefix),
                };
                IpNet::new(addr, prefix).map_err(|e| format!("{text:?}: {e}"))?
            }
        };
        Ok(Self(net.trunc()))
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        self.0.contains(&canonical(ip))
    }

    /// Whether every address of `other` is in this range.
    pub fn covers(&self, other: &Cidr) -> bool {
        self.0.contains(&other.0)
    }
}

impl std::fmt::Display for Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// Who sent a request, as far as the proxy can tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAddress {
    /// The peer, or the address a trusted proxy wrote for it.
    Ip(IpAddr),
    /// A trusted proxy wrote something that is not an address (`unknown`, an obfuscated RFC 7239
    /// node, a typo). Taking the proxy's own address instead, as before, put every such visitor
    /// in the balancer's per-address budget, and one misconfigured balancer put the whole shop
    /// there: these visitors share one budget of their own (`UNPARSED_LIMIT_KEY`) instead.
    Unparsed,
}

/// The per-address limit key every `ClientAddress::Unparsed` shares: never an address, so it
/// cannot collide with a real client's budget.
pub const UNPARSED_LIMIT_KEY: &str = "unparsed";

impl ClientAddress {
    /// The address, for what only a real address may earn (`bypass_ips`, verified crawlers).
    pub fn ip(self) -> Option<IpAddr> {
        match self {
            ClientAddress::Ip(ip) => Some(ip),
            ClientAddress::Unparsed => None,
        }
    }

    /// The budget a per-address limit counts this client in (see [`limit_key`]).
    pub fn limit_key(self, ipv6_prefix: u8) -> String {
        match self {
            ClientAddress::Ip(ip) => limit_key(ip, ipv6_prefix),
            ClientAddress::Unparsed => UNPARSED_LIMIT_KEY.to_owned(),
        }
    }
}

/// The client's address: the peer itself, unless the peer is a trusted proxy; then the
/// `X-Forwarded-For` field lines, combined in order (RFC 9110 5.3), are walked from the right
/// (the entries trusted proxies appended) to the first address that is not a trusted proxy.
/// Anything left of that is the client's own claim and is ignored, so a client cannot pick its
/// address by sending the header itself, not even as a line of its own before the proxy's.
/// An entry that is not an address (see [`parse_hop`]) where the client's should be makes the
/// client `Unparsed`; empty entries are skipped.
pub fn client_ip<'a>(
    peer: IpAddr,
    forwarded_for: impl DoubleEndedIterator<Item = &'a [u8]>,
    trusted: &[Cidr],
) -> ClientAddress {
    let is_trusted = |ip: IpAddr| trusted.iter().any(|c| c.contains(ip));
    let mut client = canonical(peer);
    if !is_trusted(client) {
        return ClientAddress::Ip(client);
    }
    for line in forwarded_for.rev() {
        // A line that is not text: nothing left of it can be trusted either.
        let Ok(line) = std::str::from_utf8(line) else {
            return ClientAddress::Unparsed;
        };
        for hop in line.rsplit(',') {
            let hop = hop.trim_matches([' ', '\t']);
            if hop.is_empty() {
                continue;
            }
            match parse_hop(hop) {
                Some(ip) => {
                    client = canonical(ip);
                    if !is_trusted(client) {
                        return ClientAddress::Ip(client);
                    }
                }
                None => return ClientAddress::Unparsed,
            }
        }
    }
    ClientAddress::Ip(client)
}

/// One `X-Forwarded-For` entry as load balancers write it: `ip`, `ip:port`, `[v6]`,
/// `[v6]:port`, each also in double quotes (RFC 7239's node syntax, an obfuscated `_port`
/// included). None for anything else (`unknown`, `_hidden`, a v6 address with a port but no
/// brackets, which cannot be told from the address).
pub fn parse_hop(hop: &str) -> Option<IpAddr> {
    // Nearly every entry is a bare address: one parse, the rest only when that fails.
    if let Ok(ip) = hop.parse() {
        return Some(ip);
    }
    let hop = hop
        .strip_prefix('"')
        .and_then(|h| h.strip_suffix('"'))
        .unwrap_or(hop);
    if let Some(rest) = hop.strip_prefix('[') {
        let (v6, after) = rest.split_once(']')?;
        if !after.is_empty() && !is_port(after.strip_prefix(':')?) {
            return None;
        }
        return v6.parse::<std::net::Ipv6Addr>().ok().map(IpAddr::V6);
    }
    if let Ok(ip) = hop.parse() {
        return Some(ip);
    }
    let (v4, port) = hop.split_once(':')?;
    if !is_port(port) {
        return None;
    }
    v4.parse::<std::net::Ipv4Addr>().ok().map(IpAddr::V4)
}

/// A port number, or RFC 7239's obfuscated port (`_` and letters, digits, `.`, `_`, `-`).
fn is_port(text: &str) -> bool {
    match text.strip_prefix('_') {
        Some(obfuscated) => {
            !obfuscated.is_empty()
                && obfuscated
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
        }
        None => {
            text.len() <= 5
                && text.parse::<u16>().is_ok()
                && text.bytes().all(|b| b.is_ascii_digit())
        }
    }
}

/// The value of `X-Forwarded-For` the origin receives: the lines the request carried, combined,
/// with the peer's address appended (nginx's `$proxy_add_x_forwarded_for`).
pub fn forwarded_for<'a>(lines: impl Iterator<Item = &'a [u8]>, peer: IpAddr) -> Vec<u8> {
    let mut value = Vec::new();
    for line in lines {
        if !value.is_empty() {
            value.extend_from_slice(b", ");
        }
        value.extend_from_slice(line);
    }
    if !value.is_empty() {
        value.extend_from_slice(b", ");
    }
    match canonical(peer) {
        IpAddr::V4(v4) => write_octets(&mut value, v4.octets()),
        v6 => value.extend_from_slice(v6.to_string().as_bytes()),
    }
    value
}

/// Dotted decimal, written by hand: formatting through `Display` was a measurable part of every
/// forwarded request and of every pass holder's (BENCHMARKS.md).
fn write_octets(out: &mut Vec<u8>, octets: [u8; 4]) {
    for (i, octet) in octets.into_iter().enumerate() {
        if i > 0 {
            out.push(b'.');
        }
        if octet >= 100 {
            out.push(b'0' + octet / 100);
        }
        if octet >= 10 {
            out.push(b'0' + octet / 10 % 10);
        }
        out.push(b'0' + octet % 10);
    }
}

/// The client network a pass is counted in (`pass.max_networks`): an IPv4 /24, or the IPv6
/// network of the given prefix length. A /24 rather than the address itself, because a carrier's
/// NAT pool or a shop's office hands one person several neighbouring addresses in a session.
pub fn network_key(ip: IpAddr, ipv6_prefix: u8) -> String {
    match canonical(ip) {
        IpAddr::V4(v4) => {
            let [a, b, c, _] = v4.octets();
            let mut key = Vec::with_capacity(18);
            write_octets(&mut key, [a, b, c, 0]);
            key.extend_from_slice(b"/24");
            // Digits, dots and a slash only.
            String::from_utf8(key).unwrap_or_default()
        }
        v6 => limit_key(v6, ipv6_prefix),
    }
}

/// The address a per-address limit counts by: an IPv4 address, or the IPv6 network of the given
/// prefix length. One IPv6 subscriber is handed a whole network (a /64 at least, often a /56 or
/// a /48) and picks addresses in it freely, so counting single IPv6 addresses would limit nobody.
pub fn limit_key(ip: IpAddr, ipv6_prefix: u8) -> String {
    match canonical(ip) {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => {
            let prefix = ipv6_prefix.min(128);
            let mask = u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0);
            let network = std::net::Ipv6Addr::from(u128::from(v6) & mask);
            format!("{network}/{prefix}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn networks_are_ipv4_slash_24_and_ipv6_prefixes() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert_eq!(network_key(ip("203.0.113.77"), 56), "203.0.113.0/24");
        assert_eq!(network_key(ip("::ffff:203.0.113.9"), 56), "203.0.113.0/24");
        assert_eq!(
            network_key(ip("2001:db8:1:2ff::1"), 56),
            "2001:db8:1:200::/56"
        );
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("test address")
    }

    fn cidr(s: &str) -> Cidr {
        Cidr::parse(s).expect("test range")
    }

    fn lines<'a>(values: &'a [&'a str]) -> impl DoubleEndedIterator<Item = &'a [u8]> {
        values.iter().map(|v| v.as_bytes())
    }

    #[test]
    fn ranges_match_v4_v6_and_mapped_addresses() {
        assert!(cidr("10.0.0.0/8").contains(ip("10.200.3.4")));
        assert!(!cidr("10.0.0.0/8").contains(ip("11.0.0.1")));
        assert!(cidr("10.0.0.0/8").contains(ip("::ffff:10.1.2.3")));
        assert!(cidr("::ffff:10.0.0.0/104").contains(ip("10.9.9.9")));
        assert!(cidr("203.0.113.7").contains(ip("203.0.113.7")));
        assert!(!cidr("203.0.113.7").contains(ip("203.0.113.8")));
        assert!(cidr("2001:db8::/32").contains(ip("2001:db8:1::5")));
        assert!(!cidr("2001:db8::/32").contains(ip("10.0.0.1")));
        assert!(cidr("0.0.0.0/0").contains(ip("192.0.2.1")));
        assert!(cidr("10.1.2.3/8").contains(ip("10.9.9.9")));
        assert!(Cidr::parse("10.0.0.0/33").is_err());
        assert!(Cidr::parse("ten").is_err());
        assert!(Cidr::parse("10.0.0.0/x").is_err());
    }

    #[test]
    fn limits_count_by_ipv4_address_or_ipv6_network() {
        assert_eq!(limit_key(ip("203.0.113.7"), 64), "203.0.113.7");
        assert_eq!(limit_key(ip("::ffff:203.0.113.7"), 64), "203.0.113.7");
        assert_eq!(
            limit_key(ip("2001:db8:1:2:aaaa::1"), 64),
            "2001:db8:1:2::/64"
        );
        assert_eq!(
            limit_key(ip("2001:db8:1:2ff::1"), 56),
            "2001:db8:1:200::/56"
        );
        assert_eq!(
            limit_key(ip("2001:db8:1:2:ffff:ffff:ffff:ffff"), 64),
            limit_key(ip("2001:db8:1:2::9"), 64)
        );
        assert_ne!(
            limit_key(ip("2001:db8:1:3::1"), 64),
            limit_key(ip("2001:db8:1:2::1"), 64)
        );
        assert_eq!(
            limit_key(ip("2001:db8:1:3::1"), 48),
            limit_key(ip("2001:db8:1:2::1"), 48)
        );
        assert_eq!(limit_key(ip("2001:db8::1"), 128), "2001:db8::1/128");
    }

    fn at(s: &str) -> ClientAddress {
        ClientAddress::Ip(ip(s))
    }

    #[test]
    fn forwarded_for_is_trusted_only_from_trusted_proxies_and_walked_from_the_right() {
        let trusted = [cidr("10.0.0.0/8")];
        // A client sending the header itself is not believed.
        assert_eq!(
            client_ip(ip("198.51.100.9"), lines(&["1.2.3.4"]), &trusted),
            at("198.51.100.9")
        );
        // Behind two trusted hops, the first untrusted address from the right is the client;
        // what the client claimed further left is ignored.
        assert_eq!(
            client_ip(
                ip("10.0.0.2"),
                lines(&["6.6.6.6, 198.51.100.9, 10.0.0.1"]),
                &trusted
            ),
            at("198.51.100.9")
        );
        assert_eq!(
            client_ip(ip("10.0.0.2"), lines(&[]), &trusted),
            at("10.0.0.2")
        );
        assert_eq!(
            client_ip(ip("10.0.0.2"), lines(&["1.1.1.1"]), &[]),
            at("10.0.0.2")
        );
    }

    #[test]
    fn every_forwarded_for_line_counts_in_order() {
        // A load balancer that appends its own line after the client's: the client's line is
        // left of it, so its claim is never read.
        let trusted = [cidr("10.0.0.0/8")];
        assert_eq!(
            client_ip(
                ip("10.0.0.2"),
                lines(&["10.9.9.9", "198.51.100.9"]),
                &trusted
            ),
            at("198.51.100.9")
        );
        assert_eq!(
            client_ip(
                ip("10.0.0.2"),
                lines(&["198.51.100.9", "10.0.0.7"]),
                &trusted
            ),
            at("198.51.100.9")
        );
    }

    #[test]
    fn entries_are_read_as_balancers_write_them() {
        for (written, read) in [
            ("1.2.3.4", "1.2.3.4"),
            ("1.2.3.4:5555", "1.2.3.4"),
            ("[2001:db8::1]", "2001:db8::1"),
            ("[2001:db8::1]:443", "2001:db8::1"),
            ("2001:db8::1", "2001:db8::1"),
            ("\"[2001:db8::1]:443\"", "2001:db8::1"),
            ("\"1.2.3.4:_gazonk\"", "1.2.3.4"),
            ("::ffff:1.2.3.4", "::ffff:1.2.3.4"),
        ] {
            assert_eq!(parse_hop(written), Some(ip(read)), "{written}");
        }
        for junk in [
            "unknown",
            "_hidden",
            "1.2.3.4:",
            "1.2.3.4:99999",
            "1.2.3.4:+80",
            "[2001:db8::1]x",
            "[2001:db8::1]:",
            "[1.2.3.4]",
            "\"1.2.3.4",
            "1.2.3.4:_",
            "",
        ] {
            assert_eq!(parse_hop(junk), None, "{junk}");
        }
    }

    #[test]
    fn a_client_behind_a_trusted_proxy_is_found_in_any_spelling_and_never_becomes_the_proxy() {
        let trusted = [cidr("10.0.0.0/8")];
        let behind = |xff: &str| client_ip(ip("10.0.0.2"), lines(&[xff]), &trusted);
        assert_eq!(behind(" 1.2.3.4:5555 "), at("1.2.3.4"));
        assert_eq!(behind("[2001:db8::1]:443, 10.0.0.1:80"), at("2001:db8::1"));
        assert_eq!(behind("6.6.6.6, 5.6.7.8:1,"), at("5.6.7.8"));
        // What cannot be read where the client's address should be: its own budget, not the
        // proxy's address (10.0.0.x), whatever is further left.
        assert_eq!(behind("unknown"), ClientAddress::Unparsed);
        assert_eq!(
            behind("1.1.1.1, unknown, 10.0.0.1"),
            ClientAddress::Unparsed
        );
        assert_eq!(behind("garbage, 10.0.0.1"), ClientAddress::Unparsed);
        // Past the client, nothing is read: a claim it made further left does not matter.
        assert_eq!(behind("unknown, 1.2.3.4"), at("1.2.3.4"));
        assert_eq!(
            client_ip(ip("10.0.0.2"), [&b"\xff"[..]].into_iter(), &trusted),
            ClientAddress::Unparsed
        );
        assert_eq!(ClientAddress::Unparsed.limit_key(64), UNPARSED_LIMIT_KEY);
        assert_eq!(ClientAddress::Unparsed.ip(), None);
        assert_eq!(at("1.2.3.4").limit_key(64), "1.2.3.4");
    }

    proptest::proptest! {
        #[test]
        fn any_address_with_or_without_a_port_reads_back_as_itself(
            octets in proptest::prelude::any::<[u8; 4]>(),
            segments in proptest::prelude::any::<[u16; 8]>(),
            port in proptest::prelude::any::<u16>(),
            quoted in proptest::prelude::any::<bool>(),
        ) {
            let quote = |s: String| if quoted { format!("\"{s}\"") } else { s };
            let v4 = IpAddr::from(octets);
            let v6 = IpAddr::from(segments);
            proptest::prop_assert_eq!(parse_hop(&quote(format!("{v4}:{port}"))), Some(v4));
            proptest::prop_assert_eq!(parse_hop(&quote(format!("[{v6}]:{port}"))), Some(v6));
            proptest::prop_assert_eq!(parse_hop(&quote(format!("[{v6}]"))), Some(v6));
            proptest::prop_assert_eq!(parse_hop(&v4.to_string()), Some(v4));
        }

        #[test]
        fn no_entry_makes_the_client_a_trusted_proxy(entry in "[ -~]{0,40}") {
            let trusted = [cidr("10.0.0.0/8")];
            let client = client_ip(ip("10.0.0.2"), lines(&[entry.as_str()]), &trusted);
            if let ClientAddress::Ip(found) = client {
                // Only an entry that is all trusted hops (or none) leaves a trusted address.
                let every_hop_trusted = entry
                    .split(',')
                    .map(|h| h.trim_matches([' ', '\t']))
                    .filter(|h| !h.is_empty())
                    .all(|h| parse_hop(h).is_some_and(|ip| trusted[0].contains(ip)));
                proptest::prop_assert!(!trusted[0].contains(found) || every_hop_trusted);
            }
        }
    }

    #[test]
    fn an_ipv4_peer_is_written_as_display_writes_it() {
        let octets = [0u8, 1, 9, 10, 42, 99, 100, 109, 199, 200, 255];
        for a in octets {
            for b in octets {
                let peer = IpAddr::from([a, b, 255 - a, 7]);
                let written = forwarded_for(std::iter::empty(), peer);
                assert_eq!(String::from_utf8(written).unwrap(), peer.to_string());
            }
        }
    }

    #[test]
    fn the_origin_gets_every_line_and_the_peer() {
        assert_eq!(
            forwarded_for(lines(&["1.1.1.1", "2.2.2.2, 3.3.3.3"]), ip("10.0.0.2")),
            b"1.1.1.1, 2.2.2.2, 3.3.3.3, 10.0.0.2"
        );
        assert_eq!(
            forwarded_for(lines(&[]), ip("::ffff:10.0.0.2")),
            b"10.0.0.2"
        );
    }
}
