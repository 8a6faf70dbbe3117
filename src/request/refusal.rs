//! Why a request is refused before the gate sees it: the target or the host cannot be read one
//! way only. Both the target (`canonical`) and the host (`authority`) refuse with these.

/// Why a request is refused before any decision; never forwarded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.reason())]
pub enum Refusal {
    /// No request-target at all.
    EmptyTarget,
    /// Not origin-form, not `http(s)://` absolute-form, not `*`: authority-form (CONNECT),
    /// another scheme, a relative or query-only target.
    UnsupportedForm,
    /// `*` is the target of `OPTIONS` only.
    AsteriskNotOptions,
    /// A `#`: a fragment is never part of a request-target.
    Fragment,
    /// A `%` not followed by two hex digits.
    MalformedEscape,
    /// `%2F` or `%5C` in the path: decoded by some origins into a separator.
    EncodedSeparator,
    /// A raw `\` in the path: a `/` to WHATWG URL parsers and IIS.
    Backslash,
    /// A raw control character (0x00-0x1F, 0x7F) in the request-target.
    ControlCharacter,
    /// An encoded control character (`%00`-`%1F`, `%7F`) in the path.
    EncodedControlCharacter,
    /// A segment that is `.` or `..` once its `;parameters` are removed (`..;`, `.;x`).
    DotSegmentWithParameters,
    /// A `..` that would climb above the root.
    AboveRoot,
    /// A `..` after an empty segment (`//..`, `/;x/..`): resolved one way by parsers that keep
    /// empty segments (WHATWG) and another by those that merge them first (nginx, Tomcat).
    AmbiguousDotSegment,
    /// The canonical target is longer than [`MAX_TARGET_LEN`](super::canonical::MAX_TARGET_LEN).
    TooLong,
    /// An empty host in a Host line that must name one, an `:authority` or absolute-form target.
    EmptyHost,
    /// A host that is neither a DNS-style name nor an IP literal.
    InvalidHostName,
    /// A bracketed literal that is not an IPv6 address (IPvFuture, zone identifiers refused).
    InvalidIpLiteral,
    /// A port that is empty, not digits, 0 or above 65535.
    InvalidPort,
    /// `user@` in an authority.
    UserInfo,
    /// More than one Host line.
    DuplicateHost,
    /// An absolute-form target without a Host line, or (the caller's call) a request without the
    /// host that this deployment requires.
    MissingHost,
    /// Host and `:authority` or the absolute-form authority name different authorities.
    HostMismatch,
    /// A valid host that this proxy does not serve; the caller decides this one (421).
    UnknownHost,
}

impl Refusal {
    /// The response status: 421 for a host this proxy does not serve, 414 for a target too
    /// long, 400 for everything else.
    pub fn status(&self) -> u16 {
        match self {
            Refusal::UnknownHost => 421,
            Refusal::TooLong => 414,
            _ => 400,
        }
    }

    /// A short reason for the response body and the log line.
    pub fn reason(&self) -> &'static str {
        match self {
            Refusal::EmptyTarget => "empty request-target",
            Refusal::UnsupportedForm => "unsupported request-target form",
            Refusal::AsteriskNotOptions => {
                "asterisk-form request-target for a method other than OPTIONS"
            }
            Refusal::Fragment => "fragment in request-target",
            Refusal::MalformedEscape => "malformed percent-escape",
            Refusal::EncodedSeparator => "encoded slash or backslash in path",
            Refusal::Backslash => "backslash in path",
            Refusal::ControlCharacter => "control character in request-target",
            Refusal::EncodedControlCharacter => "encoded control character in path",
            Refusal::DotSegmentWithParameters => "dot segment with parameters",
            Refusal::AboveRoot => "dot-dot segment above the root",
            Refusal::AmbiguousDotSegment => "ambiguous dot-dot segment after an empty segment",
            Refusal::TooLong => "request-target too long",
            Refusal::EmptyHost => "empty host",
            Refusal::InvalidHostName => "invalid host name",
            Refusal::InvalidIpLiteral => "invalid IP literal",
            Refusal::InvalidPort => "invalid port",
            Refusal::UserInfo => "user information in authority",
            Refusal::DuplicateHost => "more than one Host header",
            Refusal::MissingHost => "missing Host header",
            Refusal::HostMismatch => "Host disagrees with the request's authority",
            Refusal::UnknownHost => "host not served here",
        }
    }
}
