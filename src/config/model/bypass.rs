//! `room.bypass_headers` and `room.bypass_cookies`: staff and monitoring skip the room with a
//! header or a cookie holding a secret. A rule on a name alone would let anyone skip the line
//! (any visitor can send any header or set any cookie), so every rule needs a value, long
//! enough not to be guessed, compared in constant time.

use std::fmt;

use subtle::ConstantTimeEq;

/// The shortest secret a bypass rule may hold.
pub const MIN_BYPASS_SECRET_CHARS: usize = 16;

/// `"Name: secret"`: requests carrying the header with exactly that value skip the room.
#[derive(Clone, PartialEq, Eq)]
pub struct HeaderRule {
    /// Lower case, as HTTP/2 sends it and the http crate stores it.
    pub name: String,
    pub value: String,
}

/// `"name=secret"`: requests carrying the cookie with exactly that value skip the room.
#[derive(Clone, PartialEq, Eq)]
pub struct CookieRule {
    /// Case-sensitive, as browsers send it.
    pub name: String,
    pub value: String,
}

impl HeaderRule {
    pub(crate) fn parse(text: &str) -> Result<Self, String> {
        let Some((name, value)) = text.split_once(':') else {
            let name = text.trim();
            return Err(format!(
                "{text:?} names a header alone, which any visitor can send: write \
                 \"{name}: <secret>\" with a secret of at least {MIN_BYPASS_SECRET_CHARS} \
                 characters, known only to those who may skip the line"
            ));
        };
        let (name, value) = (name.trim(), value.trim());
        if name.is_empty() || http::HeaderName::from_bytes(name.as_bytes()).is_err() {
            return Err(format!(
                "{text:?} is not \"Name: secret\" with a header name"
            ));
        }
        if !value.bytes().all(|b| b == b' ' || b.is_ascii_graphic()) {
            return Err(format!(
                "{text:?}: the secret must be printable ASCII (it travels as a header value)"
            ));
        }
        secret_long_enough(text, value)?;
        Ok(Self {
            name: name.to_ascii_lowercase(),
            value: value.to_owned(),
        })
    }

    /// Whether one of the request's `name` headers holds the secret (surrounding spaces aside).
    pub fn matches(&self, headers: &http::HeaderMap) -> bool {
        headers.get_all(self.name.as_str()).iter().any(|v| {
            v.to_str()
                .is_ok_and(|got| same_secret(got.trim(), &self.value))
        })
    }
}

impl CookieRule {
    pub(crate) fn parse(text: &str) -> Result<Self, String> {
        let Some((name, value)) = text.split_once('=') else {
            let name = text.trim();
            return Err(format!(
                "{text:?} names a cookie alone, which any visitor can set: write \
                 \"{name}=<secret>\" with a secret of at least {MIN_BYPASS_SECRET_CHARS} \
                 characters, known only to those who may skip the line"
            ));
        };
        if name.is_empty()
            || !name
                .bytes()
                .all(|b| b.is_ascii_graphic() && !b";=,".contains(&b))
        {
            return Err(format!(
                "{text:?} is not \"name=secret\" with a cookie name"
            ));
        }
        // RFC 6265's cookie-octet: what a browser sends back unchanged, unquoted.
        if !value
            .bytes()
            .all(|b| b.is_ascii_graphic() && !b"\",;\\".contains(&b))
        {
            return Err(format!(
                "{text:?}: the secret must be printable ASCII without spaces, '\"', ',', ';' \
                 or '\\' (what a cookie value can hold)"
            ));
        }
        secret_long_enough(text, value)?;
        Ok(Self {
            name: name.to_owned(),
            value: value.to_owned(),
        })
    }

    /// Whether a request's value of the cookie `name` is the secret.
    pub fn matches(&self, value: &str) -> bool {
        same_secret(value, &self.value)
    }
}

fn secret_long_enough(text: &str, secret: &str) -> Result<(), String> {
    if secret.chars().count() < MIN_BYPASS_SECRET_CHARS {
        return Err(format!(
            "{text:?}: the secret must be at least {MIN_BYPASS_SECRET_CHARS} characters long: \
             a short one is guessed, and anyone who guesses it skips the line"
        ));
    }
    Ok(())
}

/// In constant time for equal lengths: the time taken does not tell how much of a guess was
/// right (a length that differs answers at once, which tells the length, not the secret).
fn same_secret(got: &str, want: &str) -> bool {
    got.as_bytes().ct_eq(want.as_bytes()).into()
}

/// By hand, so that printing the room's settings never shows a secret.
impl fmt::Debug for HeaderRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "HeaderRule({}: ********)", self.name)
    }
}

impl fmt::Debug for CookieRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CookieRule({}=********)", self.name)
    }
}

/// A rule as `--test` prints it: the name, the secret masked.
pub(crate) fn masked(rule: &str, separator: char) -> String {
    match rule.split_once(separator) {
        Some((name, _)) if separator == ':' => format!("{name}: ********"),
        Some((name, _)) => format!("{name}{separator}********"),
        None => rule.to_owned(),
    }
}

#[cfg(test)]
mod tests;
