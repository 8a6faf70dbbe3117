//! Verified search-engine crawlers (`room.bypass_verified_crawlers`, Cloudflare's
//! `search_engine_crawler_bypass`): a request skips the room only when its User-Agent names a
//! crawler AND its address lies in the ranges that crawler's operator publishes. A User-Agent
//! alone is trivially forged, so it never suffices.
//!
//! The ranges are a snapshot of the operators' published lists (Google:
//! developers.google.com/static/search/apis/ipranges/googlebot.json; Microsoft:
//! www.bing.com/toolbox/bingbot.json), limited to their long-standing main blocks. Operators who
//! need the full, current lists add them as `room.crawler_ranges`.

use std::net::IpAddr;
use std::sync::OnceLock;

use crate::request::client::Cidr;

/// One crawler: the token its User-Agent carries, and where it crawls from.
struct Crawler {
    name: &'static str,
    user_agent_token: &'static str,
    ranges: &'static [&'static str],
}

const CRAWLERS: &[Crawler] = &[
    Crawler {
        name: "googlebot",
        user_agent_token: "Googlebot",
        ranges: &["66.249.64.0/19", "2001:4860:4801::/48"],
    },
    Crawler {
        name: "bingbot",
        user_agent_token: "bingbot",
        ranges: &[
            "157.55.39.0/24",
            "207.46.13.0/24",
            "40.77.167.0/24",
            "13.66.139.0/24",
            "13.66.144.0/24",
            "52.167.144.0/24",
            "199.30.24.0/23",
        ],
    },
];

/// The built-in crawlers' names, for validating `room.crawler_ranges`.
pub fn known(name: &str) -> bool {
    CRAWLERS.iter().any(|c| c.name == name)
}

fn built_in() -> &'static [(usize, Cidr)] {
    static PARSED: OnceLock<Vec<(usize, Cidr)>> = OnceLock::new();
    PARSED.get_or_init(|| {
        CRAWLERS
            .iter()
            .enumerate()
            .flat_map(|(i, c)| {
                c.ranges
                    .iter()
                    .filter_map(move |r| Some((i, Cidr::parse(r).ok()?)))
            })
            .collect()
    })
}

/// The crawler this request verifiably comes from: its User-Agent token, and its address in that
/// crawler's built-in ranges or in `extra` (the operator's ranges, by crawler name).
pub fn verified(
    user_agent: Option<&str>,
    ip: Option<IpAddr>,
    extra: &[(String, Cidr)],
) -> Option<&'static str> {
    let (user_agent, ip) = (user_agent?, ip?);
    let claimed = CRAWLERS
        .iter()
        .position(|c| user_agent.contains(c.user_agent_token))?;
    let crawler = &CRAWLERS[claimed];
    let in_built_in = built_in()
        .iter()
        .any(|(i, range)| *i == claimed && range.contains(ip));
    let in_extra = extra
        .iter()
        .any(|(name, range)| name == crawler.name && range.contains(ip));
    (in_built_in || in_extra).then_some(crawler.name)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOGLEBOT: &str =
        "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)";
    const BINGBOT: &str = "Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)";

    fn ip(text: &str) -> Option<IpAddr> {
        text.parse().ok()
    }

    #[test]
    fn every_built_in_range_parses() {
        let listed: usize = CRAWLERS.iter().map(|c| c.ranges.len()).sum();
        assert_eq!(built_in().len(), listed);
    }

    #[test]
    fn a_crawler_needs_its_name_and_its_address() {
        assert_eq!(
            verified(Some(GOOGLEBOT), ip("66.249.66.1"), &[]),
            Some("googlebot")
        );
        assert_eq!(
            verified(Some(GOOGLEBOT), ip("2001:4860:4801:10::1"), &[]),
            Some("googlebot")
        );
        assert_eq!(
            verified(Some(BINGBOT), ip("157.55.39.7"), &[]),
            Some("bingbot")
        );
        // A forged User-Agent from anywhere else.
        assert_eq!(verified(Some(GOOGLEBOT), ip("203.0.113.9"), &[]), None);
        // Google's address, Bing's name: not verified.
        assert_eq!(verified(Some(BINGBOT), ip("66.249.66.1"), &[]), None);
        // An ordinary browser from a crawler's range.
        assert_eq!(
            verified(Some("Mozilla/5.0 Firefox/130"), ip("66.249.66.1"), &[]),
            None
        );
        assert_eq!(verified(None, ip("66.249.66.1"), &[]), None);
        assert_eq!(verified(Some(GOOGLEBOT), None, &[]), None);
    }

    #[test]
    fn the_operator_adds_ranges() {
        let extra = [(
            "googlebot".to_owned(),
            Cidr::parse("192.0.2.0/24").unwrap_or_else(|e| panic!("{e}")),
        )];
        assert_eq!(
            verified(Some(GOOGLEBOT), ip("192.0.2.10"), &extra),
            Some("googlebot")
        );
        assert_eq!(verified(Some(BINGBOT), ip("192.0.2.10"), &extra), None);
    }
}
