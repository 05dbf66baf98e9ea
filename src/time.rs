//! Timestamps: RFC 3339 UTC as ProtoJSON writes them (`2026-11-29T20:36:26.776406Z`, with
//! the `time` crate), and HTTP-dates (RFC 9110 §5.6.7) for `Last-Modified` and
//! `If-Modified-Since` (with `httpdate`). Times are kept as microseconds (or seconds) since
//! the Unix epoch.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

/// Microseconds since the Unix epoch, now (0 if the clock is before 1970).
pub fn now_micros() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// Seconds since the Unix epoch, now (0 if the clock is before 1970).
pub fn now_secs() -> u64 {
    now_micros() / 1_000_000
}

/// Waits until the wall clock reaches `secs` (seconds since the epoch), looking at it again
/// at least each minute: tokio's timers run on the monotonic clock, which a suspended VM or a
/// stepped clock leaves behind.
pub async fn sleep_until_secs(secs: u64) {
    let until = secs.saturating_mul(1_000_000);
    loop {
        let left = until.saturating_sub(now_micros());
        if left == 0 {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_micros(left.min(60_000_000))).await;
    }
}

/// `YYYY-MM-DDTHH:MM:SS.ffffffZ` (always six digits, as ProtoJSON readers expect of the
/// edge) for a time in microseconds since the epoch.
pub fn format_rfc3339(micros: u64) -> String {
    let mut s = String::with_capacity(27);
    let _ = write_rfc3339(&mut s, micros);
    s
}

/// [`format_rfc3339`] into `w` (a log line, without a string of its own).
pub fn write_rfc3339(w: &mut impl std::fmt::Write, micros: u64) -> std::fmt::Result {
    let t = OffsetDateTime::from_unix_timestamp_nanos(i128::from(micros) * 1000)
        .unwrap_or(OffsetDateTime::UNIX_EPOCH);
    write!(
        w,
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}Z",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second(),
        t.microsecond()
    )
}

/// Parses an RFC 3339 date-time (`T` or space separator, optional fraction of any length,
/// `Z` or a `±HH:MM` offset; `t` and `z` too) into microseconds since the epoch. Times before
/// 1970 give 0.
pub fn parse_rfc3339(s: &str) -> Option<u64> {
    // `time` takes any character between date and time; RFC 3339 names `T` (and allows a
    // space "for readability"), nothing else.
    if !matches!(s.as_bytes().get(10), Some(b'T' | b't' | b' ')) {
        return None;
    }
    let t = OffsetDateTime::parse(s, &Rfc3339).ok()?;
    let micros = t.unix_timestamp_nanos() / 1000;
    Some(u64::try_from(micros.max(0)).unwrap_or(u64::MAX))
}

/// IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`) for seconds since the epoch.
pub fn format_http_date(secs: u64) -> String {
    httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(secs))
}

/// Parses the three HTTP-date formats a recipient must accept (RFC 9110 §5.6.7):
/// IMF-fixdate, RFC 850 (`Sunday, 06-Nov-94 08:49:37 GMT`) and asctime
/// (`Sun Nov  6 08:49:37 1994`). Dates before 1970 are refused.
pub fn parse_http_date(s: &str) -> Option<u64> {
    let t = httpdate::parse_http_date(s.trim()).ok()?;
    t.duration_since(UNIX_EPOCH).ok().map(|d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_known_instants() {
        assert_eq!(format_rfc3339(0), "1970-01-01T00:00:00.000000Z");
        // 2026-11-29T20:36:26.776406Z
        assert_eq!(
            format_rfc3339(1_795_984_586_776_406),
            "2026-11-29T20:36:26.776406Z"
        );
        // a leap day
        assert_eq!(
            format_rfc3339(951_782_400_000_001),
            "2000-02-29T00:00:00.000001Z"
        );
    }

    #[test]
    fn parses_what_it_formats_and_common_forms() {
        for us in [
            0u64,
            1,
            951_782_400_000_001,
            1_795_984_586_776_406,
            now_micros(),
        ] {
            assert_eq!(parse_rfc3339(&format_rfc3339(us)), Some(us));
        }
        assert_eq!(parse_rfc3339("1970-01-01T00:00:01Z"), Some(1_000_000));
        assert_eq!(parse_rfc3339("1970-01-01 00:00:01Z"), Some(1_000_000));
        assert_eq!(parse_rfc3339("1970-01-01T01:00:01+01:00"), Some(1_000_000));
        assert_eq!(parse_rfc3339("1970-01-01T00:00:00.5z"), Some(500_000));
        assert_eq!(
            parse_rfc3339("1970-01-01T00:00:00.123456789Z"),
            Some(123_456)
        );
        assert_eq!(parse_rfc3339("1960-01-01T00:00:00Z"), Some(0));
        for bad in [
            "",
            "2026-11-29",
            "2026-13-01T00:00:00Z",
            "2026-02-30T00:00:00Z",
            "2026-11-29T24:00:00Z",
            "2026-11-29T20:36:26",
            "2026-11-29T20:36:26.Z",
            "2026-11-29T20:36:26Zjunk",
            "2026-11-29X20:36:26Z",
            "2026-11-29T20:36:26+1:00",
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn http_dates() {
        // RFC 9110 §5.6.7's example, in its three spellings.
        let t = 784_111_777;
        assert_eq!(format_http_date(t), "Sun, 06 Nov 1994 08:49:37 GMT");
        for s in [
            "Sun, 06 Nov 1994 08:49:37 GMT",
            "Sunday, 06-Nov-94 08:49:37 GMT",
            "Sun Nov  6 08:49:37 1994",
        ] {
            assert_eq!(parse_http_date(s), Some(t), "{s}");
        }
        assert_eq!(format_http_date(0), "Thu, 01 Jan 1970 00:00:00 GMT");
        let now = now_secs();
        assert_eq!(parse_http_date(&format_http_date(now)), Some(now));
        for bad in [
            "",
            "yesterday",
            "Sun, 06 Nov 1994 08:49:37 UTC",
            "Sun, 31 Feb 1994 08:49:37 GMT",
            "Sun, 06 Foo 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 25:49:37 GMT",
            "Sun, 6 Nov 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 08:49 GMT",
            "Sun, 06 Nov 1969 08:49:37 GMT",
        ] {
            assert_eq!(parse_http_date(bad), None, "{bad:?}");
        }
    }
}

/// A duration as people read it: the largest whole unit (`7 d`, `90 min`, `1500 ms`).
pub fn human_duration(d: std::time::Duration) -> String {
    let ms = d.as_millis();
    for (unit, size) in [
        ("d", 86_400_000),
        ("h", 3_600_000),
        ("min", 60_000),
        ("s", 1000),
    ] {
        if ms >= size && ms % size == 0 {
            return format!("{} {unit}", ms / size);
        }
    }
    format!("{ms} ms")
}

#[cfg(test)]
mod human_tests {
    use super::human_duration;
    use std::time::Duration;

    #[test]
    fn durations_read_in_their_largest_whole_unit() {
        let cases = [
            (604_800_000, "7 d"),
            (5_400_000, "90 min"),
            (3_600_000, "1 h"),
            (1500, "1500 ms"),
            (2000, "2 s"),
            (0, "0 ms"),
        ];
        for (ms, want) in cases {
            assert_eq!(human_duration(Duration::from_millis(ms)), want);
        }
    }
}
