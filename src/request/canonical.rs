//! One canonical request-target and one host, computed once before any decision (issue #12).
//!
//! A gate that decides on one spelling of a request and forwards another is bypassable: the
//! origin resolves the forwarded bytes its own way. So the gate decides on the [`Target`] made
//! here and the proxy forwards exactly [`Target::origin_form`]: what was decided on is what the
//! origin receives.
//!
//! The path is normalised per RFC 3986: escapes of unreserved characters decoded and the hex of
//! the others upper-cased (6.2.2.1, 6.2.2.2), repeated slashes merged, dot segments (plain and
//! encoded) resolved with the remove_dot_segments algorithm of 5.2.4. What different origins
//! would read differently is refused with 400 rather than guessed at: an encoded `/` or `\`, a
//! raw `\`, control characters, malformed escapes, a fragment, `..` above the root, a segment
//! that is a dot segment once its `;parameters` are removed (`..;`), and a `..` whose meaning
//! depends on whether the origin merges empty segments first (`//..`, `;x/..`).
//!
//! Room prefixes, bypass patterns and the reserved prefix match [`Target::match_path`]: the
//! canonical path with every segment's `;parameters` removed (Tomcat, Jetty and Spring strip them
//! before routing, so `/checkout;x.css` is `/checkout` to them).
//!
//! Pure and allocation-free for a target that needs no change: this runs on every request.

mod path;

use std::borrow::Cow;

use http::Method;

use super::authority::Authority;
use super::refusal::Refusal;
use path::{
    PathScan, check_query, has_parameters, normalise_path, push_query, scan_path, strip_parameters,
};

/// The longest canonical target: what `http::uri::PathAndQuery` holds, so forwarding it with
/// `RequestHeader::set_uri` cannot fail.
pub const MAX_TARGET_LEN: usize = u16::MAX as usize - 1;

/// The request-target the gate decides on and the origin receives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target<'a> {
    /// The origin-form target to forward (`path[?query]`), or `*`.
    forward: Cow<'a, str>,
    /// Length of the path in `forward`; the query (if any) starts after a `?` there.
    path_len: usize,
    /// The path with `;parameters` removed, when it differs from the path.
    match_path: Option<String>,
    /// The authority of an absolute-form target.
    authority: Option<Authority<'a>>,
    /// Whether `forward` is byte for byte the target as received.
    verbatim: bool,
}

impl<'a> Target<'a> {
    /// The canonical path, `;parameters` kept: what is forwarded. `*` for asterisk-form.
    pub fn path(&self) -> &str {
        &self.forward[..self.path_len]
    }

    /// The canonical path with every segment's `;parameters` removed (and the segments left
    /// empty by that merged): what room prefixes, bypass patterns and the reserved prefix
    /// `/__waitroom/` are matched against. `*` for asterisk-form.
    pub fn match_path(&self) -> &str {
        self.match_path.as_deref().unwrap_or_else(|| self.path())
    }

    /// The query as received (without the `?`), escapes untouched; raw bytes that a URI cannot
    /// hold (space, `"`, `<`, `>`, non-ASCII) percent-encoded. `Some("")` for a bare `?`.
    pub fn query(&self) -> Option<&str> {
        self.forward.get(self.path_len + 1..)
    }

    /// The authority of an absolute-form target; `None` for origin-form and `*`.
    pub fn authority(&self) -> Option<&Authority<'a>> {
        self.authority.as_ref()
    }

    /// Whether this is the asterisk-form `OPTIONS *`.
    pub fn is_asterisk(&self) -> bool {
        self.forward == "*"
    }

    /// The exact request-target to forward: origin-form `path[?query]`, or `*`. Always ASCII and
    /// always accepted by `http::uri::PathAndQuery`.
    pub fn origin_form(&self) -> &str {
        &self.forward
    }

    /// Whether [`Self::origin_form`] is byte for byte the target as received, so the upstream
    /// request needs no rewrite.
    pub fn is_verbatim(&self) -> bool {
        self.verbatim
    }

    /// The target to forward when it differs from the one received; `None` when the received
    /// one can be forwarded as it is.
    pub fn rewritten(&self) -> Option<&str> {
        (!self.verbatim).then(|| self.origin_form())
    }

    /// An owned copy, for keeping past the request header's lifetime.
    pub fn into_owned(self) -> Target<'static> {
        Target {
            forward: Cow::Owned(self.forward.into_owned()),
            path_len: self.path_len,
            match_path: self.match_path,
            authority: self.authority.map(Authority::into_owned),
            verbatim: self.verbatim,
        }
    }
}

/// The canonical form of a request-target, or why it is refused.
///
/// `raw` is the request-target exactly as received: for HTTP/1 the request line's target
/// (`RequestHeader::raw_path()`), for HTTP/2 the `:path`. Accepted: origin-form, `http://` or
/// `https://` absolute-form (scheme case-insensitive; an empty path is `/`), and `*` for
/// `OPTIONS`. Any method may carry an origin-form target (extended CONNECT does); authority-form
/// is refused.
pub fn canonical_target<'a>(method: &Method, raw: &'a [u8]) -> Result<Target<'a>, Refusal> {
    match raw {
        [] => Err(Refusal::EmptyTarget),
        [b'/', ..] => origin_form(raw, None, true),
        [b'*'] if method == Method::OPTIONS => Ok(Target {
            forward: Cow::Borrowed("*"),
            path_len: 1,
            match_path: None,
            authority: None,
            verbatim: true,
        }),
        [b'*'] => Err(Refusal::AsteriskNotOptions),
        _ => {
            let (authority, rest) = split_absolute_form(raw).ok_or(Refusal::UnsupportedForm)?;
            let authority = Authority::parse(authority)?;
            match rest {
                [] => Ok(Target {
                    forward: Cow::Borrowed("/"),
                    path_len: 1,
                    match_path: None,
                    authority: Some(authority),
                    verbatim: false,
                }),
                [b'/', ..] => origin_form(rest, Some(authority), false),
                [b'?', ..] => {
                    let mut target = Vec::with_capacity(rest.len() + 1);
                    target.push(b'/');
                    target.extend_from_slice(rest);
                    let owned = origin_form(&target, Some(authority), false)?;
                    Ok(owned.into_owned())
                }
                _ => Err(Refusal::Fragment),
            }
        }
    }
}

/// `http://` or `https://` (any case): the authority (up to `/`, `?` or `#`) and the rest.
fn split_absolute_form(raw: &[u8]) -> Option<(&[u8], &[u8])> {
    let after_scheme = if raw.len() >= 7 && raw[..7].eq_ignore_ascii_case(b"http://") {
        &raw[7..]
    } else if raw.len() >= 8 && raw[..8].eq_ignore_ascii_case(b"https://") {
        &raw[8..]
    } else {
        return None;
    };
    let end = after_scheme
        .iter()
        .position(|b| matches!(b, b'/' | b'?' | b'#'))
        .unwrap_or(after_scheme.len());
    Some(after_scheme.split_at(end))
}

/// `path[?query]`, the path starting with `/`.
fn origin_form<'a>(
    target: &'a [u8],
    authority: Option<Authority<'a>>,
    received_as_is: bool,
) -> Result<Target<'a>, Refusal> {
    let (path, query) = match target.iter().position(|&b| b == b'?') {
        Some(q) => (&target[..q], Some(&target[q + 1..])),
        None => (target, None),
    };
    let query_clean = match query {
        Some(query) => check_query(query)?,
        None => true,
    };
    let (path_clean, has_params) = match scan_path(path) {
        PathScan::Clean { has_params } => (true, has_params),
        PathScan::NeedsWork => (false, false),
    };

    let (forward, path_len) = if path_clean && query_clean {
        // Validated above: every byte is ASCII.
        let text = std::str::from_utf8(target).map_err(|_| Refusal::ControlCharacter)?;
        (Cow::Borrowed(text), path.len())
    } else {
        let mut out = String::with_capacity(target.len() + 8);
        if path_clean {
            out.push_str(std::str::from_utf8(path).map_err(|_| Refusal::ControlCharacter)?);
        } else {
            normalise_path(path, &mut out)?;
        }
        let path_len = out.len();
        if let Some(query) = query {
            out.push('?');
            push_query(query, &mut out);
        }
        (Cow::Owned(out), path_len)
    };
    if forward.len() > MAX_TARGET_LEN {
        return Err(Refusal::TooLong);
    }
    let path_text = &forward[..path_len];
    let needs_strip = if path_clean {
        has_params
    } else {
        has_parameters(path_text)
    };
    let match_path = needs_strip.then(|| strip_parameters(path_text));
    let verbatim = received_as_is && matches!(forward, Cow::Borrowed(_));
    Ok(Target {
        forward,
        path_len,
        match_path,
        authority,
        verbatim,
    })
}

#[cfg(test)]
mod tests;
