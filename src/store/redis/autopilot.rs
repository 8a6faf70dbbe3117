//! The autopilot's windows as Redis hash fields: what an instance adds (`HINCRBY`, so that the
//! reports of every instance add up exactly) and how the leader reads the sum back.

use crate::clock::Millis;
use crate::core::autopilot::Signal;
use crate::store::StoreResult;

use super::scripts::corrupt;

const REQUESTS: &str = "requests";
const ERRORS: &str = "errors";
const LATENCY_US: &str = "latency_us";
/// A latency bucket's count: `b:<index>`.
const BUCKET: &str = "b:";
/// Kept by the script next to the counts: the latest end reported, and until when it is kept.
const ENDED_AT: &str = "ended_at";
const UNTIL: &str = "until";

/// The counts of a window to add, as field and decimal value pairs; zeros are left out (a missing
/// field reads as 0). Beyond i64 (what HINCRBY holds) a count is pinned there: 2^63 us is
/// 292 000 years of latency.
pub(super) fn additions(window: &Signal) -> Vec<(String, String)> {
    let n = |v: u64| i64::try_from(v).unwrap_or(i64::MAX).to_string();
    let mut fields = Vec::new();
    for (field, value) in [
        (REQUESTS, window.requests),
        (ERRORS, window.errors),
        (LATENCY_US, window.latency_total_us),
    ] {
        if value > 0 {
            fields.push((field.to_owned(), n(value)));
        }
    }
    for (index, count) in window.latency.buckets() {
        fields.push((format!("{BUCKET}{index}"), n(count)));
    }
    fields
}

/// The window that began at `started_at` from its hash's fields (`HGETALL`: field, value, ...).
pub(super) fn decode(started_at: Millis, fields: Vec<String>) -> StoreResult<Signal> {
    const SCRIPT: &str = "read_window";
    let bad = |what: String| corrupt(SCRIPT, what);
    let mut window = Signal::new(started_at);
    let mut fields = fields.into_iter();
    while let Some(field) = fields.next() {
        let value = fields
            .next()
            .ok_or_else(|| bad(format!("{field:?} without a value")))?;
        let count = || {
            value
                .parse::<u64>()
                .map_err(|_| bad(format!("{value:?} for {field}")))
        };
        match field.as_str() {
            REQUESTS => window.requests = count()?,
            ERRORS => window.errors = count()?,
            LATENCY_US => window.latency_total_us = count()?,
            ENDED_AT => {
                window.ended_at = value
                    .parse::<Millis>()
                    .map_err(|_| bad(format!("{value:?} for {field}")))?;
            }
            UNTIL => {}
            _ => {
                let index = field
                    .strip_prefix(BUCKET)
                    .and_then(|i| i.parse::<usize>().ok())
                    .ok_or_else(|| bad(format!("field {field:?} in a window")))?;
                window
                    .latency
                    .add_to_bucket(index, count()?)
                    .map_err(|e| bad(e.to_string()))?;
            }
        }
    }
    Ok(window)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::core::autopilot::Exchange;
    use crate::store::StoreError;

    fn flatten(fields: Vec<(String, String)>) -> Vec<String> {
        fields.into_iter().flat_map(|(f, v)| [f, v]).collect()
    }

    #[test]
    fn a_window_reads_back_as_it_was_reported() {
        let mut w = Signal::new(10_000);
        for ms in [3, 40, 41, 250, 900, 120_000] {
            w.record(Exchange::Response {
                status: 200,
                latency: Duration::from_millis(ms),
            });
        }
        w.record(Exchange::Failed);
        w.record(Exchange::Timeout {
            after: Duration::from_secs(30),
        });
        w.ended_at = 20_000;
        let mut fields = flatten(additions(&w));
        fields.extend(["ended_at", "20000", "until", "70000"].map(String::from));
        assert_eq!(decode(10_000, fields).unwrap(), w);
        assert_eq!(decode(10_000, Vec::new()).unwrap(), Signal::new(10_000));
    }

    #[test]
    fn counts_past_u64_in_a_stored_window_saturate_instead_of_overflowing() {
        let max = u64::MAX.to_string();
        let fields: Vec<String> = [
            "requests", &max, "errors", &max, "b:3", &max, "b:4", &max, "b:4", "1",
        ]
        .map(String::from)
        .to_vec();
        let mut window = decode(0, fields).unwrap();
        assert_eq!(window.latency.count(), u64::MAX);
        let other = window.clone();
        window.merge(&other);
        assert_eq!(window.requests, u64::MAX);
        assert_eq!(window.errors, u64::MAX);
        assert_eq!(window.latency.count(), u64::MAX);
        assert!(window.latency.quantile(950).is_some());
    }

    #[test]
    fn garbage_in_a_window_is_corrupt() {
        for fields in [
            vec!["requests", "-1"],
            vec!["requests"],
            vec!["b:99999", "1"],
            vec!["b:x", "1"],
            vec!["latency", "1"],
            vec!["ended_at", "soon"],
        ] {
            let fields = fields.into_iter().map(String::from).collect();
            assert!(
                matches!(decode(0, fields), Err(StoreError::Corrupt(_))),
                "accepted"
            );
        }
    }
}
