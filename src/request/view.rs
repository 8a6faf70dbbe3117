//! The request as the gate sees it: the canonical target and host, checked against the sites
//! this proxy serves, the client address, the headers and the cookies. Built once per request
//! by the Pingora layer; nothing else reads the raw request.

use std::net::IpAddr;

use crate::request::authority::{Authority, request_host};
use crate::request::canonical::{Target, canonical_target};
use crate::request::refusal::Refusal;

/// The hosts this proxy serves: when any room names a host, only requests for the rooms' hosts
/// and `listen.hosts` are forwarded; a request for any other host is refused (421), so that an
/// origin serving several sites (or a default one) is never reached by a spelling the rooms do
/// not cover.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sites {
    /// Canonical host names (lower case, no trailing dot); empty when no room names a host.
    hosts: Vec<String>,
}

impl Sites {
    /// `room_hosts` are the rooms' own hosts (None: a room for every host), `others` the
    /// `listen.hosts` list; both canonical.
    pub fn new<'a>(
        room_hosts: impl IntoIterator<Item = Option<&'a str>>,
        others: &[String],
    ) -> Self {
        let mut hosts = Vec::new();
        for host in room_hosts {
            match host {
                Some(host) => hosts.push(host.to_owned()),
                // A room for any host: any host may be asked for.
                None => return Self::default(),
            }
        }
        if !hosts.is_empty() {
            hosts.extend(others.iter().cloned());
        }
        Self { hosts }
    }

    pub fn restricted(&self) -> bool {
        !self.hosts.is_empty()
    }

    fn check(&self, host: Option<&Authority<'_>>, needs_host: bool) -> Result<(), Refusal> {
        match host {
            None if needs_host || self.restricted() => Err(Refusal::MissingHost),
            Some(host) if self.restricted() && !self.hosts.iter().any(|h| host.is_host(h)) => {
                Err(Refusal::UnknownHost)
            }
            _ => Ok(()),
        }
    }
}

/// What a request asks for, once: the canonical target and host the gate decides on and the
/// origin receives.
#[derive(Debug, Clone)]
pub struct Canonical<'a> {
    pub target: Target<'a>,
    pub host: Option<Authority<'a>>,
}

/// The raw parts of a request head that name what it asks for.
#[derive(Debug, Clone, Copy)]
pub struct Head<'a> {
    pub method: &'a http::Method,
    /// The request-target as received (HTTP/1) or the `:path` (HTTP/2).
    pub target: &'a [u8],
    pub host_lines: &'a [&'a [u8]],
    /// HTTP/2's `:authority`.
    pub authority: Option<&'a [u8]>,
    /// HTTP/1.1 and later must name a host (RFC 9112 3.2).
    pub needs_host: bool,
}

impl<'a> Canonical<'a> {
    /// The canonical request, or why it is refused (never forwarded).
    pub fn read(head: Head<'a>, sites: &Sites) -> Result<Self, Refusal> {
        let target = canonical_target(head.method, head.target)?;
        let host = request_host(head.host_lines, head.authority, target.authority())?;
        sites.check(host.as_ref(), head.needs_host)?;
        Ok(Self { target, host })
    }

    pub fn into_owned(self) -> Canonical<'static> {
        Canonical {
            target: self.target.into_owned(),
            host: self.host.map(Authority::into_owned),
        }
    }

    /// The paths under `/__waitroom/` are the proxy's own.
    pub fn reserved(&self) -> Option<Reserved> {
        Reserved::of(self.target.match_path())
    }
}

/// The proxy's own paths: never forwarded, whatever the method.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reserved {
    /// `GET /__waitroom/status`: the visitor's JSON status (admits it when its turn came).
    Status,
    /// `GET /__waitroom/events`: the status as Server-Sent Events.
    Events,
    /// `POST /__waitroom/leave`: give up the place or end the pass.
    Leave,
    /// `POST /__waitroom/turnstile`: the answer to the bot challenge.
    Turnstile,
    /// `POST /__waitroom/proof`: a proof of work's solution (`seed`, `nonce`).
    Proof,
    /// Anything else under the prefix: 404.
    Unknown,
}

pub const RESERVED_PREFIX: &str = "/__waitroom/";

impl Reserved {
    fn of(path: &str) -> Option<Self> {
        let name = path.strip_prefix(RESERVED_PREFIX)?;
        Some(match name {
            "status" => Reserved::Status,
            "events" => Reserved::Events,
            "leave" => Reserved::Leave,
            "turnstile" => Reserved::Turnstile,
            "proof" => Reserved::Proof,
            _ => Reserved::Unknown,
        })
    }

    pub const fn path(self) -> &'static str {
        match self {
            Reserved::Status => "/__waitroom/status",
            Reserved::Events => "/__waitroom/events",
            Reserved::Leave => "/__waitroom/leave",
            Reserved::Turnstile => "/__waitroom/turnstile",
            Reserved::Proof => "/__waitroom/proof",
            Reserved::Unknown => RESERVED_PREFIX,
        }
    }

    /// The path as a page of `room` calls it: a proxy with several rooms needs the room named
    /// (`?room=`), one with a single room does not.
    pub fn url(self, room: Option<&str>) -> String {
        match room {
            Some(room) => format!("{}?room={room}", self.path()),
            None => self.path().to_owned(),
        }
    }

    /// The method each path answers; None for an unknown path.
    pub fn method(self) -> Option<http::Method> {
        match self {
            Reserved::Status | Reserved::Events => Some(http::Method::GET),
            Reserved::Leave | Reserved::Turnstile | Reserved::Proof => Some(http::Method::POST),
            Reserved::Unknown => None,
        }
    }
}

/// Everything the gate may look at in a request.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    /// The canonical host, without port (None: HTTP/1.0 without Host, hosts unrestricted).
    pub host: Option<&'a str>,
    /// The canonical path with every segment's `;parameters` removed.
    pub path: &'a str,
    pub query: Option<&'a str>,
    /// The visitor's address (behind trusted proxies: from X-Forwarded-For).
    pub client_ip: Option<IpAddr>,
    /// A trusted proxy wrote something that is not an address for the visitor
    /// (`ClientAddress::Unparsed`): `client_ip` is None, and per-address limits count the
    /// visitor in the budget all such visitors share.
    pub unparsed_client: bool,
    pub headers: &'a http::HeaderMap,
    pub method: &'a http::Method,
    /// The client's country as a trusted proxy named it (`listen.country_header`); None when
    /// the peer is not a trusted proxy, the header is missing or repeated.
    pub country: Option<&'a str>,
}

/// A request's method until the proxy says which (`Request::with_method`).
static GET: http::Method = http::Method::GET;

impl<'a> Request<'a> {
    pub fn new(
        canonical: &'a Canonical<'_>,
        headers: &'a http::HeaderMap,
        client_ip: Option<IpAddr>,
    ) -> Self {
        Self {
            host: canonical.host.as_ref().map(Authority::host),
            path: canonical.target.match_path(),
            query: canonical.target.query(),
            client_ip,
            unparsed_client: false,
            headers,
            method: &GET,
            country: None,
        }
    }

    pub fn with_method(mut self, method: &'a http::Method) -> Self {
        self.method = method;
        self
    }

    /// The country a trusted proxy named in `header`: read only when `trusted` (the peer is one
    /// of `listen.trusted_proxies`), and only from a single line of two letters.
    pub fn with_country_from(mut self, header: Option<&str>, trusted: bool) -> Self {
        self.country = header
            .filter(|_| trusted)
            .and_then(|name| country_in(self.headers, name));
        self
    }

    /// The request of a visitor whose address a trusted proxy wrote unreadably (or not).
    pub fn with_unparsed_client(mut self, unparsed: bool) -> Self {
        self.unparsed_client = unparsed;
        self
    }

    /// The first cookie of that name, its value without surrounding quotes.
    pub fn cookie(&self, name: &str) -> Option<&'a str> {
        cookie_in(self.headers, name)
    }

    pub fn header(&self, name: impl http::header::AsHeaderName) -> Option<&'a str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// Sent by another site's page (`Sec-Fetch-Site: cross-site`, or an `Origin` naming another
    /// host): what a rival's page could make a waiting visitor's browser post, its cookie
    /// attached when the cookie is `SameSite=None`.
    pub fn from_another_site(&self) -> bool {
        if self.header("sec-fetch-site") == Some("cross-site") {
            return true;
        }
        let (Some(origin), Some(host)) = (self.header(http::header::ORIGIN), self.host) else {
            return false;
        };
        let authority = origin.split_once("://").map_or(origin, |(_, rest)| rest);
        let origin_host = authority
            .rsplit_once(':')
            .filter(|(_, port)| !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()))
            .map_or(authority, |(host, _)| host);
        !origin_host.eq_ignore_ascii_case(host)
    }

    /// Cloudflare's rule: JSON only for exactly `Accept: application/json`, or the query flag.
    pub fn wants_json(&self) -> bool {
        self.header(http::header::ACCEPT).map(str::trim) == Some("application/json")
            || self.query.is_some_and(|q| {
                q.split('&')
                    .any(|kv| kv == "waitingroom_json=1" || kv == "waitingroom_json=true")
            })
    }
}

/// A single `name` line of two ASCII letters: a country code. A repeated line means someone
/// besides the trusted proxy wrote one, so neither is believed.
fn country_in<'a>(headers: &'a http::HeaderMap, name: &str) -> Option<&'a str> {
    let mut lines = headers.get_all(name).iter();
    let (Some(only), None) = (lines.next(), lines.next()) else {
        return None;
    };
    let code = only.to_str().ok()?.trim();
    (code.len() == 2 && code.bytes().all(|b| b.is_ascii_alphabetic())).then_some(code)
}

/// The first cookie of that name in any Cookie line (HTTP/2 clients send one line per cookie),
/// its value without surrounding quotes.
///
/// A scan of `name=value` pairs split at `;`, as RFC 6265 5.4 sends them: on every request, the
/// `cookie` crate's full parse of each pair cost three times as much (BENCHMARKS.md).
pub fn cookie_in<'a>(headers: &'a http::HeaderMap, name: &str) -> Option<&'a str> {
    cookies_in(headers, name).next()
}

/// Every cookie of that name in any Cookie line, in order, each without surrounding quotes: what
/// a rule that must see every copy reads.
pub fn cookies_in<'h, 'n>(
    headers: &'h http::HeaderMap,
    name: &'n str,
) -> impl Iterator<Item = &'h str> + use<'h, 'n> {
    headers
        .get_all(http::header::COOKIE)
        .iter()
        .filter_map(|line| line.to_str().ok())
        .flat_map(|line| line.split(';'))
        .filter_map(|pair| pair.split_once('='))
        .filter(move |(n, _)| n.trim() == name)
        .map(|(_, v)| {
            let v = v.trim();
            v.strip_prefix('"')
                .and_then(|v| v.strip_suffix('"'))
                .unwrap_or(v)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head<'a>(target: &'a str, hosts: &'a [&'a [u8]]) -> Head<'a> {
        Head {
            method: &http::Method::GET,
            target: target.as_bytes(),
            host_lines: hosts,
            authority: None,
            needs_host: true,
        }
    }

    #[test]
    fn a_cookie_is_found_by_its_exact_name_in_any_line() {
        let mut headers = http::HeaderMap::new();
        for line in [
            "xwaitroom=no; flag; =empty",
            " a = 1 ;waitroom = \"tok=en\" ; waitroom=second",
        ] {
            headers.append(http::header::COOKIE, line.parse().unwrap());
        }
        assert_eq!(cookie_in(&headers, "waitroom"), Some("tok=en"));
        assert_eq!(cookie_in(&headers, "a"), Some("1"));
        assert_eq!(cookie_in(&headers, "flag"), None);
        assert_eq!(cookie_in(&headers, "missing"), None);
        assert_eq!(cookie_in(&headers, "xwaitroom"), Some("no"));
    }

    #[test]
    fn hosts_are_checked_only_when_a_room_names_one() {
        let open = Sites::new([None, Some("shop.example")], &[]);
        assert!(!open.restricted());
        assert!(Canonical::read(head("/", &[b"elsewhere.example"]), &open).is_ok());
        let sites = Sites::new([Some("shop.example")], &["static.example".to_owned()]);
        let read = |target, host: &'static [u8]| {
            Canonical::read(head(target, &[host]), &sites).map(|c| c.host.map(|h| h.to_string()))
        };
        assert_eq!(read("/", b"SHOP.example."), Ok(Some("shop.example".into())));
        assert_eq!(
            read("/", b"shop.example:8080"),
            Ok(Some("shop.example:8080".into()))
        );
        assert_eq!(
            read("/", b"static.example"),
            Ok(Some("static.example".into()))
        );
        assert_eq!(read("/", b"other.example"), Err(Refusal::UnknownHost));
        assert_eq!(read("/", b"shop.example:x"), Err(Refusal::InvalidPort));
        assert_eq!(read("/", b""), Err(Refusal::MissingHost));
        let http10 = Head {
            needs_host: false,
            ..head("/", &[])
        };
        assert_eq!(
            Canonical::read(http10, &sites).map(|_| ()),
            Err(Refusal::MissingHost)
        );
        assert!(Canonical::read(http10, &open).is_ok());
    }

    #[test]
    fn reserved_paths_are_found_on_the_canonical_path() {
        let sites = Sites::default();
        let reserved = |target: &'static str| {
            Canonical::read(head(target, &[b"h"]), &sites)
                .ok()
                .and_then(|c| c.reserved())
        };
        assert_eq!(reserved("/__waitroom/status"), Some(Reserved::Status));
        assert_eq!(reserved("/%5F_waitroom/status"), Some(Reserved::Status));
        assert_eq!(reserved("/x/../__waitroom/leave;a"), Some(Reserved::Leave));
        assert_eq!(reserved("/__waitroom/nope"), Some(Reserved::Unknown));
        assert_eq!(reserved("/__waitroom"), None);
        assert_eq!(reserved("/drop"), None);
    }

    #[test]
    fn cookies_are_read_from_every_line() {
        let mut headers = http::HeaderMap::new();
        headers.append("cookie", "a=1; waitroom=\"tok\"".parse().unwrap());
        headers.append("cookie", "b=2".parse().unwrap());
        let canonical = Canonical::read(head("/", &[b"h"]), &Sites::default()).unwrap();
        let request = Request::new(&canonical, &headers, None);
        assert_eq!(request.cookie("waitroom"), Some("tok"));
        assert_eq!(request.cookie("b"), Some("2"));
        assert_eq!(request.cookie("waitroomx"), None);
    }

    #[test]
    fn json_only_for_the_exact_accept_or_the_query_flag() {
        let wants = |accept: Option<&'static str>, target: &'static str| {
            let mut headers = http::HeaderMap::new();
            if let Some(accept) = accept {
                headers.insert("accept", accept.parse().unwrap());
            }
            let canonical = Canonical::read(head(target, &[b"h"]), &Sites::default()).unwrap();
            Request::new(&canonical, &headers, None).wants_json()
        };
        assert!(wants(Some("application/json"), "/"));
        assert!(!wants(Some("application/json, text/html"), "/"));
        assert!(!wants(Some("text/html"), "/"));
        assert!(wants(None, "/?a=1&waitingroom_json=1"));
        assert!(!wants(None, "/?waitingroom_json=0"));
    }
}
