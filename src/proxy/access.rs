//! The access line: one per request, through Pingora's hooks or the front door's own streams.

use crate::observe::ACCESS_LOG;

/// One request's access line: what it asked, what was decided, what went back.
pub(super) struct AccessLine<'a> {
    pub decision: &'a str,
    pub method: &'a str,
    pub host: &'a str,
    pub path: &'a str,
    pub status: u16,
    pub origin_status: u16,
    pub ms: u64,
    pub bytes: u64,
    pub proto: &'static str,
    pub client: &'a str,
    pub visitor: &'a str,
    pub error: &'a str,
}

impl AccessLine<'_> {
    pub(super) fn write(&self) {
        log::info!(
            target: ACCESS_LOG,
            decision = self.decision,
            method = self.method,
            host = self.host,
            path = self.path,
            status = self.status,
            origin_status = self.origin_status,
            ms = self.ms,
            bytes = self.bytes,
            proto = self.proto,
            client = self.client,
            visitor = self.visitor,
            error = self.error;
            "{}", self.decision
        );
    }
}

pub(super) fn http_version(v: http::Version) -> &'static str {
    match v {
        http::Version::HTTP_09 => "HTTP/0.9",
        http::Version::HTTP_10 => "HTTP/1.0",
        http::Version::HTTP_2 => "HTTP/2",
        http::Version::HTTP_3 => "HTTP/3",
        _ => "HTTP/1.1",
    }
}
