//! Log lines: readable text or one JSON object per line, the level from `RUST_LOG` (default
//! `info`). Structured fields travel as the `log` crate's key-values, so a line written as
//! `info!(target: ACCESS, status = 200; "request")` becomes `status=200` in text and
//! `"status":200` in JSON.

use std::io::Write;

use log::kv::{Key, Value, VisitSource};
use serde_json::Value as Json;

use crate::config::model::LogFormat;

/// The target of the per-request access lines (`RUST_LOG=waitroom::access=off` drops them too).
pub const ACCESS: &str = "waitroom::access";

/// Installs the process-wide logger; a second call (tests, embedding) keeps the first one.
pub fn init(format: LogFormat) {
    let mut builder =
        env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info"));
    builder.format(move |buf, record| {
        let ts = buf.timestamp_millis().to_string();
        let line = match format {
            LogFormat::Text => text_line(&ts, record),
            LogFormat::Json => json_line(&ts, record),
        };
        writeln!(buf, "{line}")
    });
    if builder.try_init().is_err() {
        log::debug!("a logger was already installed; keeping it");
    }
}

struct Fields(Vec<(String, Json)>);

impl<'kvs> VisitSource<'kvs> for Fields {
    fn visit_pair(&mut self, key: Key<'kvs>, value: Value<'kvs>) -> Result<(), log::kv::Error> {
        let json = if let Some(b) = value.to_bool() {
            Json::Bool(b)
        } else if let Some(n) = value.to_u64() {
            Json::from(n)
        } else if let Some(n) = value.to_i64() {
            Json::from(n)
        } else if let Some(f) = value.to_f64() {
            Json::from(f)
        } else {
            Json::String(value.to_string())
        };
        self.0.push((key.as_str().to_owned(), json));
        Ok(())
    }
}

fn fields(record: &log::Record) -> Vec<(String, Json)> {
    let mut fields = Fields(Vec::new());
    // A field that cannot be read is left out rather than losing the line.
    let _ = record.key_values().visit(&mut fields);
    fields.0
}

/// `{"ts":…,"level":…,"target":…,"msg":…, fields…}` on one line, in that order (the fields as
/// they were logged), so the lines also read well to a person.
pub fn json_line(ts: &str, record: &log::Record) -> String {
    let quoted = |s: &str| Json::from(s).to_string();
    let mut line = format!(
        "{{\"ts\":{},\"level\":{},\"target\":{},\"msg\":{}",
        quoted(ts),
        quoted(record.level().as_str()),
        quoted(record.target()),
        quoted(&record.args().to_string())
    );
    for (key, value) in fields(record) {
        if !["ts", "level", "target", "msg"].contains(&key.as_str()) {
            line.push_str(&format!(",{}:{value}", quoted(&key)));
        }
    }
    line.push('}');
    line
}

/// `ts LEVEL target: message key=value key="quoted value"` on one line.
pub fn text_line(ts: &str, record: &log::Record) -> String {
    let mut line = format!(
        "{ts} {:<5} {}: {}",
        record.level(),
        record.target(),
        record.args()
    );
    for (key, value) in fields(record) {
        let shown = match value {
            Json::String(s) if s.is_empty() || s.contains([' ', '"', '=', '\n']) => {
                Json::String(s).to_string()
            }
            Json::String(s) => s,
            other => other.to_string(),
        };
        line.push_str(&format!(" {key}={shown}"));
    }
    line.replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_record<R>(f: impl FnOnce(&log::Record) -> R) -> R {
        let kvs: &[(&str, log::kv::Value)] = &[
            ("status", log::kv::Value::from(200u16)),
            ("path", log::kv::Value::from("/a \"b\"")),
            ("decision", log::kv::Value::from("queued")),
            ("tls", log::kv::Value::from(true)),
        ];
        let record = log::Record::builder()
            .level(log::Level::Info)
            .target(ACCESS)
            .args(format_args!("request"))
            .key_values(&kvs)
            .build();
        f(&record)
    }

    #[test]
    fn json_lines_are_one_object_with_typed_fields() {
        let line = with_record(|r| json_line("2026-01-01T00:00:00.000Z", r));
        assert!(!line.contains('\n'));
        assert!(line.starts_with("{\"ts\":\"2026-01-01T00:00:00.000Z\",\"level\":\"INFO\""));
        let v: Json = serde_json::from_str(&line).unwrap();
        assert_eq!(v["level"], "INFO");
        assert_eq!(v["target"], ACCESS);
        assert_eq!(v["msg"], "request");
        assert_eq!(v["status"], 200);
        assert_eq!(v["path"], "/a \"b\"");
        assert_eq!(v["tls"], true);
    }

    #[test]
    fn text_lines_quote_only_what_needs_it() {
        let line = with_record(|r| text_line("T", r));
        assert_eq!(
            line,
            "T INFO  waitroom::access: request status=200 path=\"/a \\\"b\\\"\" decision=queued \
             tls=true"
        );
    }
}
