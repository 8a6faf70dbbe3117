//! Log lines: readable text or one JSON object per line, the level from `RUST_LOG` (default
//! `info`). Structured fields travel as the `log` crate's key-values, so a line written as
//! `info!(target: ACCESS_LOG, status = 200; "request")` becomes `status=200` in text and
//! `"status":200` in JSON.

use std::io::Write;

use log::kv::{Key, Value, VisitSource};
use serde_json::Value as Json;

use crate::config::model::LogFormat;

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
    let logger = builder.build();
    let max_level = logger.filter();
    match log::set_boxed_logger(Box::new(Quieted(logger))) {
        Ok(()) => log::set_max_level(max_level),
        Err(_) => log::debug!("a logger was already installed; keeping it"),
    }
}

/// The logger, with one correction: Pingora writes at ERROR, and offers no hook to quiet it, a
/// visitor whose connection closed or timed out in the middle of a request head (a closed tab,
/// a slow client cut off by `listen.header_timeout`). That is not an error of the proxy, and a
/// crowd or an attack would flood the log: such lines are written at DEBUG.
struct Quieted(env_logger::Logger);

/// What Pingora's line says when the head was cut short (`pingora_proxy`, "Fail to proxy:
/// Downstream ... while reading request headers").
const HEAD_CUT_SHORT: &str = "while reading request headers";

fn head_cut_short(record: &log::Record) -> bool {
    record.level() == log::Level::Error
        && record.target().starts_with("pingora")
        && record.args().to_string().contains(HEAD_CUT_SHORT)
}

impl log::Log for Quieted {
    fn enabled(&self, metadata: &log::Metadata) -> bool {
        self.0.enabled(metadata)
    }

    fn log(&self, record: &log::Record) {
        if head_cut_short(record) {
            let quiet = record.to_builder().level(log::Level::Debug).build();
            if self.0.matches(&quiet) {
                self.0.log(&quiet);
            }
            return;
        }
        self.0.log(record);
    }

    fn flush(&self) {
        self.0.flush();
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
    use crate::observe::ACCESS_LOG;

    fn with_record<R>(f: impl FnOnce(&log::Record) -> R) -> R {
        let kvs: &[(&str, log::kv::Value)] = &[
            ("status", log::kv::Value::from(200u16)),
            ("path", log::kv::Value::from("/a \"b\"")),
            ("decision", log::kv::Value::from("queued")),
            ("tls", log::kv::Value::from(true)),
        ];
        let record = log::Record::builder()
            .level(log::Level::Info)
            .target(ACCESS_LOG)
            .args(format_args!("request"))
            .key_values(&kvs)
            .build();
        f(&record)
    }

    fn pingora_error_cut_short(text: &str) -> bool {
        head_cut_short(
            &log::Record::builder()
                .level(log::Level::Error)
                .target("pingora_proxy")
                .args(format_args!("{text}"))
                .build(),
        )
    }

    #[test]
    fn a_head_cut_short_is_not_an_error_but_other_lines_are_kept() {
        assert!(pingora_error_cut_short(&format!(
            "Fail to proxy: Downstream ConnectionClosed context: {HEAD_CUT_SHORT}, bytes \
             already read: 12"
        )));
        assert!(!pingora_error_cut_short(
            "Fail to proxy: Upstream ConnectRefused"
        ));
    }

    #[test]
    fn json_lines_are_one_object_with_typed_fields() {
        let line = with_record(|r| json_line("2026-01-01T00:00:00.000Z", r));
        assert!(!line.contains('\n'));
        assert!(line.starts_with("{\"ts\":\"2026-01-01T00:00:00.000Z\",\"level\":\"INFO\""));
        let v: Json = serde_json::from_str(&line).unwrap();
        assert_eq!(v["level"], "INFO");
        assert_eq!(v["target"], ACCESS_LOG);
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
