//! The host a request names: its Host line, HTTP/2 `:authority` or absolute-form authority,
//! validated and in one canonical spelling (part of the canonical request, `canonical`).

use std::borrow::Cow;
use std::fmt;
use std::net::Ipv6Addr;

use super::refusal::Refusal;

/// A validated, canonical authority: host lower-cased, one trailing dot removed, IPv6 in its
/// RFC 5952 form, optional port without leading zeros.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Authority<'a> {
    host: Cow<'a, str>,
    port: Option<u16>,
}

impl<'a> Authority<'a> {
    /// Parses a Host line's value, an HTTP/2 `:authority` or an absolute-form authority.
    ///
    /// Accepted hosts: a DNS-style name (labels of letters, digits, `-` and `_`; at most 253
    /// characters, labels at most 63), a dotted-quad IPv4 address, or an IPv6 literal in
    /// brackets. A name whose last label is numeric must be a dotted-quad IPv4 address (WHATWG
    /// parsers read `127.1` or `0x7f.1` as IPv4). Optional `:port`, 1 to 65535.
    pub fn parse(bytes: &'a [u8]) -> Result<Self, Refusal> {
        if bytes.is_empty() {
            return Err(Refusal::EmptyHost);
        }
        if bytes.contains(&b'@') {
            return Err(Refusal::UserInfo);
        }
        let (host, port) = if bytes[0] == b'[' {
            let close = bytes
                .iter()
                .position(|&b| b == b']')
                .ok_or(Refusal::InvalidIpLiteral)?;
            let host = parse_ipv6(&bytes[1..close])?;
            let port = match &bytes[close + 1..] {
                [] => None,
                [b':', port @ ..] => Some(parse_port(port)?),
                _ => return Err(Refusal::InvalidIpLiteral),
            };
            (Cow::Owned(host), port)
        } else {
            let (name, port) = match bytes.iter().position(|&b| b == b':') {
                Some(colon) => (&bytes[..colon], Some(parse_port(&bytes[colon + 1..])?)),
                None => (bytes, None),
            };
            (parse_name(name)?, port)
        };
        Ok(Authority { host, port })
    }

    /// The host: a lower-case name without trailing dot, a dotted-quad, or `[ipv6]`.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The port, when one was given.
    pub fn port(&self) -> Option<u16> {
        self.port
    }

    /// Whether this host is `name` (a configured room host): case-insensitive, a trailing dot
    /// on `name` ignored, the port not compared.
    pub fn is_host(&self, name: &str) -> bool {
        let name = name.strip_suffix('.').unwrap_or(name);
        self.host.eq_ignore_ascii_case(name)
    }

    /// The value to write back as a Host header (or HTTP/2 `:authority`).
    pub fn to_host_header(&self) -> String {
        self.to_string()
    }

    /// Whether the host is still the request's own bytes (no allocation was needed).
    #[cfg(test)]
    pub(crate) fn is_borrowed(&self) -> bool {
        matches!(self.host, Cow::Borrowed(_))
    }

    /// An owned copy, for keeping past the request header's lifetime.
    pub fn into_owned(self) -> Authority<'static> {
        Authority {
            host: Cow::Owned(self.host.into_owned()),
            port: self.port,
        }
    }
}

impl fmt::Display for Authority<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.host)?;
        if let Some(port) = self.port {
            write!(f, ":{port}")?;
        }
        Ok(())
    }
}

fn parse_port(digits: &[u8]) -> Result<u16, Refusal> {
    if digits.is_empty() || digits.len() > 5 || !digits.iter().all(u8::is_ascii_digit) {
        return Err(Refusal::InvalidPort);
    }
    let value = digits
        .iter()
        .fold(0u32, |acc, &d| acc * 10 + u32::from(d - b'0'));
    match u16::try_from(value) {
        Ok(port) if port != 0 => Ok(port),
        _ => Err(Refusal::InvalidPort),
    }
}

fn parse_ipv6(inside: &[u8]) -> Result<String, Refusal> {
    // Hex digits, colons, and dots of an embedded IPv4: no zone (`%25eth0`), no IPvFuture.
    if !inside
        .iter()
        .all(|&b| b.is_ascii_hexdigit() || b == b':' || b == b'.')
    {
        return Err(Refusal::InvalidIpLiteral);
    }
    let text = std::str::from_utf8(inside).map_err(|_| Refusal::InvalidIpLiteral)?;
    let address: Ipv6Addr = text.parse().map_err(|_| Refusal::InvalidIpLiteral)?;
    Ok(format!("[{address}]"))
}

fn parse_name(name: &[u8]) -> Result<Cow<'_, str>, Refusal> {
    if name.is_empty() {
        return Err(Refusal::EmptyHost);
    }
    let name = name.strip_suffix(b".").unwrap_or(name);
    if name.is_empty() || name.len() > 253 {
        return Err(Refusal::InvalidHostName);
    }
    let mut has_upper = false;
    let mut last_label = name;
    for label in name.split(|&b| b == b'.') {
        if label.is_empty() || label.len() > 63 {
            return Err(Refusal::InvalidHostName);
        }
        for &b in label {
            if b.is_ascii_uppercase() {
                has_upper = true;
            } else if !(b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_') {
                return Err(Refusal::InvalidHostName);
            }
        }
        last_label = label;
    }
    let numeric = last_label.iter().all(u8::is_ascii_digit)
        || (last_label.len() > 1 && last_label[..2].eq_ignore_ascii_case(b"0x"));
    if numeric && !is_dotted_quad(name) {
        return Err(Refusal::InvalidHostName);
    }
    let text = std::str::from_utf8(name).map_err(|_| Refusal::InvalidHostName)?;
    Ok(if has_upper {
        Cow::Owned(text.to_ascii_lowercase())
    } else {
        Cow::Borrowed(text)
    })
}

/// Four decimal parts of 0 to 255, without leading zeros.
fn is_dotted_quad(name: &[u8]) -> bool {
    let mut parts = 0;
    for part in name.split(|&b| b == b'.') {
        parts += 1;
        let valid = !part.is_empty()
            && part.len() <= 3
            && part.iter().all(u8::is_ascii_digit)
            && !(part.len() > 1 && part[0] == b'0')
            && part
                .iter()
                .fold(0u32, |acc, &d| acc * 10 + u32::from(d - b'0'))
                <= 255;
        if !valid {
            return false;
        }
    }
    parts == 4
}

/// The request's authority, from its Host lines, its HTTP/2 `:authority` and its absolute-form
/// authority, or why it is refused.
///
/// - More than one Host line: [`Refusal::DuplicateHost`].
/// - A Host line that is not a valid authority: the reason (an empty or blank line is "no
///   authority", RFC 9112 3.2, unless another source names one).
/// - An absolute-form target needs a Host line naming the same authority (the issue: "an
///   absolute-form whose authority agrees with Host"), else [`Refusal::MissingHost`] or
///   [`Refusal::HostMismatch`]. This is stricter than RFC 9112 3.2.2 (which lets the target's
///   authority win) on purpose: a client that sends two authorities is not guessed at.
/// - `:authority` and a Host line both present must agree ([`Refusal::HostMismatch`]).
///
/// "Agree" is [`Authority`] equality: case-insensitive, one trailing dot ignored, ports equal
/// (an absent port differs from an explicit one).
///
/// `Ok(None)`: no authority at all (an HTTP/1.0 request without Host, or an empty Host). The
/// caller refuses it with [`Refusal::MissingHost`] (400) when the version is HTTP/1.1 or later
/// (RFC 9112 3.2: a server MUST respond 400) or when any room names a host; an HTTP/1.0 request
/// without Host is otherwise served as a request for no particular host.
pub fn request_host<'a>(
    host_lines: &[&'a [u8]],
    h2_authority: Option<&'a [u8]>,
    target_authority: Option<&Authority<'a>>,
) -> Result<Option<Authority<'a>>, Refusal> {
    let host = match host_lines {
        [] => None,
        [line] => {
            let value = line.trim_ascii();
            if value.is_empty() {
                None
            } else {
                Some(Authority::parse(value)?)
            }
        }
        _ => return Err(Refusal::DuplicateHost),
    };
    let h2 = h2_authority.map(Authority::parse).transpose()?;
    if let Some(target) = target_authority {
        match &host {
            None => return Err(Refusal::MissingHost),
            Some(host) if host != target => return Err(Refusal::HostMismatch),
            Some(_) => {}
        }
        if h2.as_ref().is_some_and(|h2| h2 != target) {
            return Err(Refusal::HostMismatch);
        }
        return Ok(Some(target.clone()));
    }
    match (h2, host) {
        (Some(h2), Some(host)) if h2 != host => Err(Refusal::HostMismatch),
        // A blank Host line next to an `:authority`: two different answers.
        (Some(_), None) if !host_lines.is_empty() => Err(Refusal::HostMismatch),
        (Some(h2), _) => Ok(Some(h2)),
        (None, host) => Ok(host),
    }
}
