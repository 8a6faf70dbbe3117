//! One source of time for the whole proxy, so tests can drive expiry, abandonment and refill
//! without sleeping.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch.
pub type Millis = i64;

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

/// RFC 3339 UTC with milliseconds, the form Cloudflare uses for `lastUpdated`.
pub fn rfc3339_ms(at: Millis) -> String {
    let secs = at.div_euclid(1000);
    let ms = at.rem_euclid(1000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{ms:03}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

/// Parses an RFC 3339 time stamp ("2026-12-01T10:00:00Z", "2026-12-01T11:00:00.5+01:00") into
/// milliseconds since the Unix epoch.
pub fn parse_rfc3339(text: &str) -> Result<Millis, String> {
    let bad = || format!("{text:?} is not an RFC 3339 time like \"2026-12-01T10:00:00Z\"");
    let b = text.trim().as_bytes();
    let digits = |from: usize, len: usize| -> Result<i64, String> {
        let part = b.get(from..from + len).ok_or_else(bad)?;
        if !part.iter().all(u8::is_ascii_digit) {
            return Err(bad());
        }
        Ok(part.iter().fold(0, |n, d| n * 10 + i64::from(d - b'0')))
    };
    let at = |i: usize, c: u8| b.get(i).is_some_and(|x| x.eq_ignore_ascii_case(&c));
    if !(at(4, b'-') && at(7, b'-') && at(10, b'T') && at(13, b':') && at(16, b':')) {
        return Err(bad());
    }
    let (year, month, day) = (digits(0, 4)?, digits(5, 2)?, digits(8, 2)?);
    let (hour, minute, second) = (digits(11, 2)?, digits(14, 2)?, digits(17, 2)?);
    if !(1..=12).contains(&month)
        || !(1..=days_in_month(year, month)).contains(&day)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return Err(bad());
    }
    let mut i = 19;
    let mut ms = 0;
    if at(i, b'.') {
        let start = i + 1;
        i = start;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        if i == start {
            return Err(bad());
        }
        let scale = [100, 10, 1];
        for (k, d) in b[start..i.min(start + 3)].iter().enumerate() {
            ms += i64::from(d - b'0') * scale[k];
        }
    }
    let offset_minutes = if at(i, b'Z') && i + 1 == b.len() {
        0
    } else if (at(i, b'+') || at(i, b'-')) && at(i + 3, b':') && i + 6 == b.len() {
        let (h, m) = (digits(i + 1, 2)?, digits(i + 4, 2)?);
        if h > 23 || m > 59 {
            return Err(bad());
        }
        let sign = if at(i, b'-') { -1 } else { 1 };
        sign * (h * 60 + m)
    } else {
        return Err(bad());
    };
    let days = days_from_civil(year, month, day);
    let secs = days * 86_400 + hour * 3600 + minute * 60 + second.min(59) - offset_minutes * 60;
    Ok(secs * 1000 + ms)
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// The inverse of `civil_from_days` (Howard Hinnant's days-from-civil).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Howard Hinnant's days-to-civil algorithm (proleptic Gregorian calendar).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_rfc3339_with_millis() {
        assert_eq!(rfc3339_ms(0), "1970-01-01T00:00:00.000Z");
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
