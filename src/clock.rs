//! One source of time for the whole proxy, so tests can drive expiry, abandonment and refill
//! without sleeping.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use jiff::Timestamp;
use jiff::fmt::temporal::DateTimePrinter;

/// Milliseconds since the Unix epoch.
pub type Millis = i64;

/// A duration in [`Millis`], saturating: a far timer stays far rather than wrapping.
pub fn millis(d: Duration) -> Millis {
    Millis::try_from(d.as_millis()).unwrap_or(Millis::MAX)
}

pub trait Clock: Send + Sync + 'static {
    fn now_ms(&self) -> Millis;
}

pub type SharedClock = Arc<dyn Clock>;

#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> Millis {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as Millis)
            .unwrap_or(0)
    }
}

/// A clock that only moves when told to.
#[derive(Debug)]
pub struct ManualClock {
    now: AtomicI64,
}

impl ManualClock {
    pub fn new(start: Millis) -> Arc<Self> {
        Arc::new(Self {
            now: AtomicI64::new(start),
        })
    }

    /// Starts at the real time, so tokens it signs look ordinary.
    pub fn starting_now() -> Arc<Self> {
        Self::new(SystemClock.now_ms())
    }

    pub fn advance(&self, by: std::time::Duration) {
        self.now
            .fetch_add(by.as_millis() as Millis, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> Millis {
        self.now.load(Ordering::SeqCst)
    }
}

/// RFC 3339 UTC with milliseconds, the form Cloudflare uses for `lastUpdated`. Times beyond the
/// years -9999..=9999 are written as the nearest of those.
pub fn rfc3339_ms(at: Millis) -> String {
    let at = Timestamp::from_millisecond(at).unwrap_or(match at {
        ..0 => Timestamp::MIN,
        _ => Timestamp::MAX,
    });
    DateTimePrinter::new()
        .precision(Some(3))
        .timestamp_to_string(&at)
}

/// Parses an RFC 3339 time stamp ("2026-12-01T10:00:00Z", "2026-12-01T11:00:00.5+01:00") into
/// milliseconds since the Unix epoch: a 'T' between date and time (no space), a 'Z' or a
/// `+hh:mm`/`-hh:mm` offset, up to nanoseconds (beyond milliseconds dropped), a leap second
/// read as :59.
pub fn parse_rfc3339(text: &str) -> Result<Millis, String> {
    // RFC 3339 allows 't' and 'z' in lower case, where strptime matches its literals exactly;
    // and %:z reads a numeric offset only.
    let upper = text.trim().to_ascii_uppercase();
    let numeric = match upper.strip_suffix('Z') {
        Some(utc) => format!("{utc}+00:00"),
        None => upper,
    };
    Timestamp::strptime("%Y-%m-%dT%H:%M:%S%.f%:z", &numeric)
        .map(|t| t.as_millisecond())
        .map_err(|e| {
            format!("{text:?} is not an RFC 3339 time like \"2026-12-01T10:00:00Z\" ({e})")
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_rfc3339_with_millis() {
        assert_eq!(rfc3339_ms(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339_ms(-1), "1969-12-31T23:59:59.999Z");
        assert!(rfc3339_ms(Millis::MAX).starts_with("9999-"));
        assert!(rfc3339_ms(Millis::MIN).starts_with("-009999-"));
        assert_eq!(rfc3339_ms(1_596_498_360_000), "2020-08-03T23:46:00.000Z");
        assert_eq!(rfc3339_ms(951_782_400_123), "2000-02-29T00:00:00.123Z");
    }

    #[test]
    fn parses_rfc3339_and_round_trips() {
        for at in [0, 1_596_498_360_000, 951_782_400_123, 1_796_119_200_000] {
            assert_eq!(parse_rfc3339(&rfc3339_ms(at)), Ok(at));
        }
        assert_eq!(
            parse_rfc3339("2020-08-04T01:46:00+02:00"),
            Ok(1_596_498_360_000)
        );
        assert_eq!(
            parse_rfc3339("2020-08-03T22:46:00.5-01:00"),
            Ok(1_596_498_360_500)
        );
        assert_eq!(parse_rfc3339("2020-08-03T23:46:00Z"), Ok(1_596_498_360_000));
        assert_eq!(
            parse_rfc3339(" 2020-08-03t23:46:00.123456z "),
            Ok(1_596_498_360_123),
            "lower case t and z, sub-millisecond digits dropped"
        );
        assert_eq!(
            parse_rfc3339("2020-08-04T05:16:00+05:30"),
            Ok(1_596_498_360_000)
        );
        assert_eq!(
            parse_rfc3339("2016-12-31T23:59:60Z"),
            parse_rfc3339("2016-12-31T23:59:59Z"),
            "a leap second"
        );
        for bad in [
            "",
            "2020-08-03",
            "2020-08-03 23:46:00Z",
            "2020-02-30T00:00:00Z",
            "2020-08-03T24:00:00Z",
            "2020-08-03T23:46:00",
            "2020-08-03T23:46:00.Z",
            "2020-08-03T23:46:00+0200",
            "2020-08-03T23:46:00Zjunk",
            "2020-08-03T23:46:00+02:00Z",
            "2020-08-03T23:46:00-01",
            "2020-08-03T23:46:00+02:00[Europe/Paris]",
        ] {
            assert!(parse_rfc3339(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn manual_clock_moves_only_when_told() {
        let clock = ManualClock::new(1_000);
        assert_eq!(clock.now_ms(), 1_000);
        clock.advance(std::time::Duration::from_secs(2));
        assert_eq!(clock.now_ms(), 3_000);
    }
}
