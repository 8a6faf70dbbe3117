//! A response the proxy answers itself (waiting page, JSON, errors), as a plain value: it always
//! carries Content-Length and Cache-Control, so keep-alive clients never hang and no cache keeps a
//! visitor's place.

use bytes::Bytes;
use pingora_http::ResponseHeader;
use pingora_proxy::Session;
use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    pub body: Bytes,
}

impl Reply {
    pub fn new(status: u16, content_type: &str, body: impl Into<Bytes>) -> Self {
        Self {
            status,
            headers: vec![
                ("content-type", content_type.to_owned()),
                ("cache-control", "no-store".to_owned()),
            ],
            body: body.into(),
        }
    }

    pub fn html(status: u16, body: String) -> Self {
        Self::new(status, "text/html; charset=utf-8", body)
    }

    pub fn json<T: Serialize>(status: u16, value: &T) -> Self {
        match serde_json::to_vec(value) {
            Ok(body) => Self::new(status, "application/json", body),
            Err(e) => Self::text(500, format!("cannot encode response: {e}\n")),
        }
    }

    pub fn text(status: u16, body: impl Into<String>) -> Self {
        Self::new(status, "text/plain; charset=utf-8", body.into())
    }

    pub fn with_header(mut self, name: &'static str, value: impl Into<String>) -> Self {
        self.headers.push((name, value.into()));
        self
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn response_header(&self) -> pingora::Result<ResponseHeader> {
        let mut header = ResponseHeader::build(self.status, Some(self.headers.len() + 1))?;
        for (name, value) in &self.headers {
            header.append_header(*name, value.as_str())?;
        }
        header.insert_header("content-length", self.body.len().to_string())?;
        Ok(header)
    }

    /// Writes the whole response, exactly once.
    pub async fn send(self, session: &mut Session, head_only: bool) -> pingora::Result<()> {
        let header = self.response_header()?;
        session
            .write_response_header(Box::new(header), head_only)
            .await?;
        if !head_only {
            session.write_response_body(Some(self.body), true).await?;
        }
        Ok(())
    }

    pub fn into_http(self) -> http::Response<Vec<u8>> {
        let mut builder = http::Response::builder().status(self.status);
        for (name, value) in &self.headers {
            builder = builder.header(*name, value.as_str());
        }
        builder
            .header("content-length", self.body.len())
            .body(self.body.to_vec())
            .unwrap_or_else(|_| {
                let mut fallback = http::Response::new(Vec::new());
                *fallback.status_mut() = http::StatusCode::INTERNAL_SERVER_ERROR;
                fallback
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reply_is_uncacheable_and_typed() {
        let r = Reply::json(202, &serde_json::json!({"a": 1})).with_header("refresh", "20");
        assert_eq!(r.header("Cache-Control"), Some("no-store"));
        assert_eq!(r.header("content-type"), Some("application/json"));
        assert_eq!(r.header("refresh"), Some("20"));
        let http = r.into_http();
        assert_eq!(http.status(), 202);
        assert_eq!(
            http.headers().get("content-length").map(|v| v.as_bytes()),
            Some(&b"7"[..])
        );
    }
}
