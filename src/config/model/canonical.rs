//! What requests are compared with (room hosts, the room path, bypass and exclude patterns),
//! checked against the canonical request of `crate::request::canonical`: the gate matches the
//! canonical host and path, so a setting no canonical request can hold would never match, and
//! nothing would say so.

use std::borrow::Cow;

use http::Method;

use super::{ConfigError, invalid};
use crate::request::authority::Authority;
use crate::request::canonical::canonical_target;
use crate::request::route::PathPattern;

/// A host name as the gate compares it: lower case, without a trailing dot, IPv6 in brackets
/// in its RFC 5952 form. Hosts are compared without their port, so a port is refused.
pub(crate) fn host(key: &str, text: &str) -> Result<String, ConfigError> {
    let authority = Authority::parse(text.trim().as_bytes())
        .map_err(|refusal| invalid(key, format!("{text:?} is not a host name ({refusal})")))?;
    if authority.port().is_some() {
        return Err(invalid(
            key,
            format!(
                "{text:?} holds a port: write the host alone ({:?}); ports are not compared",
                authority.host()
            ),
        ));
    }
    Ok(authority.host().to_owned())
}

/// `room.path`: a canonical path, matched as a prefix.
pub(crate) fn room_path(path: &str) -> Result<String, ConfigError> {
    if !path.starts_with('/') {
        return Err(invalid("room.path", "must start with '/'"));
    }
    canonical_path("room.path", path, path)?;
    Ok(path.to_owned())
}

/// Path patterns (`room.bypass`, `autopilot.exclude`), each a canonical path with `*`s.
pub(crate) fn patterns(key: &str, sources: &[String]) -> Result<Vec<PathPattern>, ConfigError> {
    sources
        .iter()
        .map(|source| {
            let pattern = PathPattern::parse(source).map_err(|e| invalid(key, e))?;
            // A pattern starting with '*' matches from the path's first '/': checked as if it
            // followed one.
            let probe = match source.starts_with('/') {
                true => Cow::Borrowed(source.as_str()),
                false => Cow::Owned(format!("/{source}")),
            };
            canonical_path(key, source, &probe)?;
            Ok(pattern)
        })
        .collect()
}

/// Refuses `text` (spelt as the path `probe`) unless a canonical path can hold it as written:
/// no `;` (parameters are removed before matching), nothing the canonical form would refuse,
/// decode, encode, resolve or merge.
fn canonical_path(key: &str, text: &str, probe: &str) -> Result<(), ConfigError> {
    if text.contains(';') {
        return Err(invalid(
            key,
            format!(
                "{text:?} holds ';': requests are matched with their ;parameters removed, so \
                 it would never match"
            ),
        ));
    }
    let target = canonical_target(&Method::GET, probe.as_bytes()).map_err(|refusal| {
        invalid(
            key,
            format!("{text:?} would never match: a request holding it is refused ({refusal})"),
        )
    })?;
    if target.path() != probe {
        let canonical = match text.starts_with('/') {
            true => target.path(),
            false => target.path().strip_prefix('/').unwrap_or(target.path()),
        };
        return Err(invalid(
            key,
            format!(
                "{text:?} would never match: requests are matched on their canonical path, \
                 where it reads {canonical:?} (dot segments resolved, '//' merged, escapes of \
                 letters, digits and -._~ decoded, other escapes in upper case)"
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(result: Result<impl std::fmt::Debug, ConfigError>) -> String {
        match result {
            Ok(value) => panic!("accepted: {value:?}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn hosts_are_stored_canonical_and_without_port() {
        assert_eq!(host("k", "Shop.Example.COM.").unwrap(), "shop.example.com");
        assert_eq!(host("k", " shop.example ").unwrap(), "shop.example");
        assert_eq!(host("k", "[2001:DB8::0:1]").unwrap(), "[2001:db8::1]");
        assert_eq!(host("k", "203.0.113.7").unwrap(), "203.0.113.7");
        let port = error(host("listen.hosts", "shop.example:8443"));
        assert!(
            port.starts_with("listen.hosts: ") && port.contains("(\"shop.example\")"),
            "{port}"
        );
        for bad in [
            "",
            "shop example",
            "shop..example",
            "user@shop",
            "127.1",
            "é.example",
        ] {
            assert!(
                error(host("room.host", bad)).starts_with("room.host: "),
                "{bad}"
            );
        }
    }

    #[test]
    fn the_room_path_must_be_canonical_and_the_error_spells_it() {
        for good in ["/", "/drop", "/drop/", "/a-b_c~d/%20x", "/*"] {
            assert_eq!(room_path(good).unwrap(), good);
        }
        for (bad, canonical) in [
            ("/drop//shoes", "\"/drop/shoes\""),
            ("/drop/./shoes", "\"/drop/shoes\""),
            ("/a/../drop", "\"/drop\""),
            ("/%64rop", "\"/drop\""),
            ("/caf%c3%a9", "\"/caf%C3%A9\""),
            ("/drop shoes", "\"/drop%20shoes\""),
            ("/drop?x=1", "\"/drop\""),
        ] {
            let e = error(room_path(bad));
            assert!(
                e.starts_with("room.path: ") && e.contains(canonical),
                "{bad}: {e}"
            );
        }
        for bad in ["/drop;x", "/a\\b", "/..", "/a%2Fb", "/drop#x", "drop"] {
            assert!(error(room_path(bad)).starts_with("room.path: "), "{bad}");
        }
    }

    #[test]
    fn patterns_that_no_canonical_path_can_match_are_refused() {
        let list = |items: &[&str]| items.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        let ok = patterns(
            "room.bypass",
            &list(&["/favicon.ico", "/static/*", "*.css", "*", "*..x"]),
        )
        .unwrap();
        assert_eq!(ok.len(), 5);
        for (bad, needle) in [
            ("/static/./x", "\"/static/x\""),
            ("/static/../x", "\"/x\""),
            ("*/./x.js", "\"*/x.js\""),
            ("/static//*", "\"/static/*\""),
            ("/%7Euser/*", "\"/~user/*\""),
            ("/%41/*", "\"/A/*\""),
            ("/%3a/*", "\"/%3A/*\""),
            ("/x;jsessionid=*", "';'"),
            ("/a\\*", "backslash"),
            ("/%2F*", "encoded slash"),
            ("static/*", "must start with"),
        ] {
            let e = error(patterns("autopilot.exclude", &list(&["/ok", bad])));
            assert!(
                e.starts_with("autopilot.exclude: ") && e.contains(needle),
                "{bad}: {e}"
            );
        }
    }
}
