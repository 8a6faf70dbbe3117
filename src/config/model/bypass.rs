//! `room.bypass_headers`: staff and monitoring skip the room with a header.

/// `room.bypass_headers`: a header that must be present, optionally with exactly one value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderRule {
    /// Lower case, as HTTP/2 sends it and the http crate stores it.
    pub name: String,
    pub value: Option<String>,
}

impl HeaderRule {
    pub(crate) fn parse(text: &str) -> Result<Self, String> {
        let (name, value) = match text.split_once(':') {
            Some((n, v)) => (n.trim(), Some(v.trim().to_owned())),
            None => (text.trim(), None),
        };
        if name.is_empty() || http::HeaderName::from_bytes(name.as_bytes()).is_err() {
            return Err(format!("{text:?} is not a header name, or \"Name: value\""));
        }
        Ok(Self {
            name: name.to_ascii_lowercase(),
            value,
        })
    }

    pub fn matches(&self, headers: &http::HeaderMap) -> bool {
        headers.get_all(self.name.as_str()).iter().any(|v| {
            self.value
                .as_deref()
                .is_none_or(|want| v.to_str().is_ok_and(|got| got.trim() == want))
        })
    }
}
