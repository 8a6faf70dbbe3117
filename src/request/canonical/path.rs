//! The bytes of a request-target's path and query: classified in one table, escapes decoded
//! or normalised, dot segments resolved, `;parameters` found. What `canonical_target` builds the
//! canonical target from; no allocation for a path that needs no change.

use super::Refusal;

// Byte classes of the request-target.
/// Unreserved but `.`, sub-delims but `;`, `:` and `@`: kept as they are.
const C_PLAIN: u8 = 1;
const C_DOT: u8 = 2;
const C_SEMICOLON: u8 = 3;
const C_PERCENT: u8 = 4;
const C_SLASH: u8 = 5;
/// Printable ASCII that RFC 3986 does not allow raw in a path, and bytes >= 0x80: encoded.
const C_ENCODE: u8 = 6;
const C_CONTROL: u8 = 7;
const C_BACKSLASH: u8 = 8;
const C_HASH: u8 = 9;
const C_QUESTION: u8 = 10;

const fn byte_classes() -> [u8; 256] {
    let mut table = [C_ENCODE; 256];
    let mut i = 0;
    while i < 256 {
        let b = i as u8;
        table[i] = match b {
            0x00..=0x1F | 0x7F => C_CONTROL,
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'~' => C_PLAIN,
            b'!' | b'$' | b'&' | b'\'' | b'(' | b')' | b'*' | b'+' | b',' | b'=' => C_PLAIN,
            b':' | b'@' => C_PLAIN,
            b'.' => C_DOT,
            b';' => C_SEMICOLON,
            b'%' => C_PERCENT,
            b'/' => C_SLASH,
            b'\\' => C_BACKSLASH,
            b'#' => C_HASH,
            b'?' => C_QUESTION,
            _ => C_ENCODE,
        };
        i += 1;
    }
    table
}

static CLASS: [u8; 256] = byte_classes();

pub(super) fn is_unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

pub(super) fn hex_value(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'A'..=b'F' => Some(b - b'A' + 10),
        b'a'..=b'f' => Some(b - b'a' + 10),
        _ => None,
    }
}

/// The value of an upper-case hex digit (the canonical spelling of an escape).
fn upper_hex_value(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' | b'A'..=b'F' => hex_value(b),
        _ => None,
    }
}

const HEX_UPPER: &[u8; 16] = b"0123456789ABCDEF";

fn push_escape(out: &mut String, b: u8) {
    out.push('%');
    out.push(char::from(HEX_UPPER[usize::from(b >> 4)]));
    out.push(char::from(HEX_UPPER[usize::from(b & 0x0F)]));
}

pub(super) enum PathScan {
    /// Already canonical; whether some segment has `;parameters` (`;` or `%3B`).
    Clean { has_params: bool },
    /// Something to decode, encode, resolve, merge or refuse: [`normalise_path`] decides.
    NeedsWork,
}

/// The fast path: whether `path` (starting with `/`) is already canonical. Refuses nothing
/// itself; anything unusual goes to [`normalise_path`].
pub(super) fn scan_path(path: &[u8]) -> PathScan {
    let mut has_params = false;
    let mut segment_start = 1;
    // Where the current segment's parameters start (its first `;` or `%3B`).
    let mut params_start = None;
    let mut i = 1;
    while i < path.len() {
        match CLASS[usize::from(path[i])] {
            C_PLAIN | C_DOT => {}
            C_SEMICOLON => {
                has_params = true;
                params_start.get_or_insert(i);
            }
            C_PERCENT => {
                // Only upper-case escapes of bytes that stay encoded and are allowed.
                let hi = path.get(i + 1).copied().and_then(upper_hex_value);
                let lo = path.get(i + 2).copied().and_then(upper_hex_value);
                let (Some(hi), Some(lo)) = (hi, lo) else {
                    return PathScan::NeedsWork;
                };
                let decoded = (hi << 4) | lo;
                if is_unreserved(decoded)
                    || CLASS[usize::from(decoded)] == C_CONTROL
                    || matches!(decoded, b'/' | b'\\')
                {
                    return PathScan::NeedsWork;
                }
                if decoded == b';' {
                    has_params = true;
                    params_start.get_or_insert(i);
                }
                i += 2;
            }
            C_SLASH => {
                let segment = &path[segment_start..i];
                if segment.is_empty() || is_dot_segment(segment, params_start, segment_start) {
                    return PathScan::NeedsWork;
                }
                segment_start = i + 1;
                params_start = None;
            }
            _ => return PathScan::NeedsWork,
        }
        i += 1;
    }
    // The last segment may be empty (a trailing slash) but not a dot segment.
    if is_dot_segment(&path[segment_start..], params_start, segment_start) {
        return PathScan::NeedsWork;
    }
    PathScan::Clean { has_params }
}

/// Whether `segment` is `.` or `..` once its parameters (starting at the absolute index
/// `params_start`) are removed.
fn is_dot_segment(segment: &[u8], params_start: Option<usize>, segment_start: usize) -> bool {
    let name = match params_start {
        Some(p) => &segment[..p - segment_start],
        None => segment,
    };
    matches!(name, b"." | b"..")
}

/// Where a canonical segment's parameters start: its first `;` or `%3B`.
pub(super) fn params_start(segment: &str) -> usize {
    let bytes = segment.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b';' => return i,
            b'%' if bytes.get(i + 1) == Some(&b'3')
                && matches!(bytes.get(i + 2), Some(b'B' | b'b')) =>
            {
                return i;
            }
            _ => {}
        }
        i += 1;
    }
    bytes.len()
}

pub(super) fn has_parameters(path: &str) -> bool {
    path.split('/')
        .any(|segment| params_start(segment) < segment.len())
}

/// The match path of a canonical path: every segment's parameters removed, the segments that
/// leaves empty merged (a trailing slash kept), so `/;x/drop` is `/drop`, `/drop/;x` `/drop/`.
pub(super) fn strip_parameters(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    let mut trailing_slash = false;
    for segment in path.split('/').skip(1) {
        let name = &segment[..params_start(segment)];
        if name.is_empty() {
            trailing_slash = true;
        } else {
            out.push('/');
            out.push_str(name);
            trailing_slash = false;
        }
    }
    if out.is_empty() || trailing_slash {
        out.push('/');
    }
    out
}

/// The slow path: normalises `path` (starting with `/`) into `out`, or refuses it.
///
/// Each segment is decoded and re-encoded on its own, then the segments go through RFC 3986
/// 5.2.4 on a stack, empty segments merged, except that `..` is refused where origins disagree.
pub(super) fn normalise_path(path: &[u8], out: &mut String) -> Result<(), Refusal> {
    let base = out.len();
    // The segments kept so far: their start offsets in `out`, whether each is empty once its
    // parameters are removed, and whether an empty segment was merged just before it (popping
    // it brings that empty segment back next to the following `..`).
    let mut stack: Vec<(usize, bool, bool)> = Vec::new();
    // An empty segment was merged since the last segment kept or removed.
    let mut merged_empty = false;
    let mut trailing_slash;
    let mut segment = String::new();
    let mut rest = &path[1..];
    loop {
        let (raw_segment, last) = match rest.iter().position(|&b| b == b'/') {
            Some(slash) => {
                let (head, tail) = rest.split_at(slash);
                rest = &tail[1..];
                (head, false)
            }
            None => (rest, true),
        };
        segment.clear();
        normalise_segment(raw_segment, &mut segment)?;
        let name_len = params_start(&segment);
        let name = &segment[..name_len];
        let is_dot = matches!(name, "." | "..");
        if is_dot && name_len < segment.len() {
            return Err(Refusal::DotSegmentWithParameters);
        }
        if segment.is_empty() {
            merged_empty = !last;
            trailing_slash = last;
        } else if name == "." {
            trailing_slash = last;
        } else if name == ".." {
            if merged_empty {
                return Err(Refusal::AmbiguousDotSegment);
            }
            let (start, name_empty, empty_before) = stack.pop().ok_or(Refusal::AboveRoot)?;
            if name_empty {
                return Err(Refusal::AmbiguousDotSegment);
            }
            out.truncate(start);
            merged_empty = empty_before;
            trailing_slash = last;
        } else {
            stack.push((out.len(), name_len == 0, merged_empty));
            out.push('/');
            out.push_str(&segment);
            merged_empty = false;
            trailing_slash = false;
        }
        if last {
            break;
        }
    }
    if out.len() == base || trailing_slash {
        out.push('/');
    }
    Ok(())
}

/// Decodes the escapes of unreserved characters, upper-cases the others, encodes what RFC 3986
/// does not allow raw; refuses separators, control characters, fragments, malformed escapes.
fn normalise_segment(raw: &[u8], out: &mut String) -> Result<(), Refusal> {
    let mut i = 0;
    while i < raw.len() {
        let b = raw[i];
        match CLASS[usize::from(b)] {
            C_PLAIN | C_DOT | C_SEMICOLON => out.push(char::from(b)),
            C_PERCENT => {
                let decoded = raw
                    .get(i + 1)
                    .and_then(|&hi| hex_value(hi))
                    .zip(raw.get(i + 2).and_then(|&lo| hex_value(lo)))
                    .map(|(hi, lo)| (hi << 4) | lo)
                    .ok_or(Refusal::MalformedEscape)?;
                if is_unreserved(decoded) {
                    out.push(char::from(decoded));
                } else if matches!(decoded, b'/' | b'\\') {
                    return Err(Refusal::EncodedSeparator);
                } else if CLASS[usize::from(decoded)] == C_CONTROL {
                    return Err(Refusal::EncodedControlCharacter);
                } else {
                    push_escape(out, decoded);
                }
                i += 2;
            }
            C_CONTROL => return Err(Refusal::ControlCharacter),
            C_BACKSLASH => return Err(Refusal::Backslash),
            C_HASH => return Err(Refusal::Fragment),
            // `/` and `?` never reach a segment; anything else is encoded.
            _ => push_escape(out, b),
        }
        i += 1;
    }
    Ok(())
}

/// Validates a query (without its `?`): no control character, no `#`, every `%` an escape.
/// Whether it can be forwarded as it is (nothing to encode).
pub(super) fn check_query(query: &[u8]) -> Result<bool, Refusal> {
    let mut clean = true;
    let mut i = 0;
    while i < query.len() {
        let b = query[i];
        match CLASS[usize::from(b)] {
            C_CONTROL => return Err(Refusal::ControlCharacter),
            C_HASH => return Err(Refusal::Fragment),
            C_PERCENT => {
                let valid = query.get(i + 1).and_then(|&hi| hex_value(hi)).is_some()
                    && query.get(i + 2).and_then(|&lo| hex_value(lo)).is_some();
                if !valid {
                    return Err(Refusal::MalformedEscape);
                }
                i += 2;
            }
            _ => clean &= !query_byte_needs_escape(b),
        }
        i += 1;
    }
    Ok(clean)
}

/// Bytes a query cannot hold raw (`http::uri::PathAndQuery` refuses them): the WHATWG query
/// percent-encode set less the control characters refused above.
fn query_byte_needs_escape(b: u8) -> bool {
    matches!(b, b' ' | b'"' | b'<' | b'>') || b >= 0x80
}

/// Copies a query validated by [`check_query`], encoding what it cannot hold raw.
pub(super) fn push_query(query: &[u8], out: &mut String) {
    for &b in query {
        if query_byte_needs_escape(b) {
            push_escape(out, b);
        } else {
            out.push(char::from(b));
        }
    }
}
