//! Timestamps without a date crate: RFC 3339 UTC as ProtoJSON writes them
//! (`2026-11-29T20:36:26.776406Z`), and HTTP-dates (RFC 9110 §5.6.7) for `Last-Modified` and
//! `If-Modified-Since`. Times are kept as microseconds (or seconds) since the Unix epoch.

use std::time::{SystemTime, UNIX_EPOCH};

/// Microseconds since the Unix epoch, now (0 if the clock is before 1970).
pub fn now_micros() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// `YYYY-MM-DDTHH:MM:SS.ffffffZ` for a time in microseconds since the epoch.
pub fn format_rfc3339(micros: u64) -> String {
    let secs = micros / 1_000_000;
    let frac = micros % 1_000_000;
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{frac:06}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Parses an RFC 3339 date-time (`T` or space separator, optional fraction of any length,
/// `Z` or a `±HH:MM` offset) into microseconds since the epoch. Times before 1970 give 0.
pub fn parse_rfc3339(s: &str) -> Option<u64> {
    let b = s.as_bytes();
    if b.len() < 20 {
        return None;
    }
    let num = |from: usize, len: usize| -> Option<i64> {
        let part = b.get(from..from + len)?;
        if !part.iter().all(u8::is_ascii_digit) {
            return None;
        }
        Some(
            part.iter()
                .fold(0i64, |acc, d| acc * 10 + i64::from(d - b'0')),
        )
    };
    let year = num(0, 4)?;
    let month = num(5, 2)?;
    let day = num(8, 2)?;
    let hour = num(11, 2)?;
    let minute = num(14, 2)?;
    let second = num(17, 2)?;
    if b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    if !(1..=12).contains(&month)
        || day < 1
        || day > days_in_month(year, month)
        || hour > 23
        || minute > 59
        || second > 59
    {
        return None;
    }
    let mut i = 19;
    let mut micros = 0i64;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            if i - start < 6 {
                micros = micros * 10 + i64::from(b[i] - b'0');
            }
            i += 1;
        }
        let digits = i - start;
        if digits == 0 {
            return None;
        }
        for _ in digits..6 {
            micros *= 10;
        }
    }
    let offset_secs = match b.get(i..)? {
        [b'Z'] | [b'z'] => 0,
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] => {
            let digits = [*h1, *h2, *m1, *m2];
            if !digits.iter().all(u8::is_ascii_digit) {
                return None;
            }
            let oh = i64::from((h1 - b'0') * 10 + (h2 - b'0'));
            let om = i64::from((m1 - b'0') * 10 + (m2 - b'0'));
            if oh > 23 || om > 59 {
                return None;
            }
            let off = oh * 3600 + om * 60;
            if *sign == b'+' {
                off
            } else {
                -off
            }
        }
        _ => return None,
    };
    let days = days_from_civil(year, month, day);
    let secs = days * 86_400 + hour * 3600 + minute * 60 + second - offset_secs;
    if secs < 0 {
        return Some(0);
    }
    u64::try_from(secs * 1_000_000 + micros).ok()
}

const WEEKDAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`) for seconds since the epoch.
pub fn format_http_date(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{}, {d:02} {} {y:04} {:02}:{:02}:{:02} GMT",
        WEEKDAYS[(days % 7) as usize],
        MONTHS[(m - 1) as usize],
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Parses the three HTTP-date formats a recipient must accept (RFC 9110 §5.6.7):
/// IMF-fixdate, RFC 850 (`Sunday, 06-Nov-94 08:49:37 GMT`) and asctime
/// (`Sun Nov  6 08:49:37 1994`). The weekday is not checked against the date.
pub fn parse_http_date(s: &str) -> Option<u64> {
    let s = s.trim();
    let month = |name: &str| MONTHS.iter().position(|m| *m == name).map(|i| i as i64 + 1);
    let num = |t: &str| -> Option<i64> {
        if t.is_empty() || t.len() > 4 || !t.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        t.parse().ok()
    };
    let hms = |t: &str| -> Option<(i64, i64, i64)> {
        let mut it = t.split(':');
        let (h, m, sec) = (it.next()?, it.next()?, it.next()?);
        if it.next().is_some() || h.len() != 2 || m.len() != 2 || sec.len() != 2 {
            return None;
        }
        Some((num(h)?, num(m)?, num(sec)?))
    };
    let parts: Vec<&str> = s.split_ascii_whitespace().collect();
    let (y, mo, d, (h, mi, se)) = if let Some(rest) = s.split_once(", ").map(|(_, r)| r) {
        let p: Vec<&str> = rest.split_ascii_whitespace().collect();
        match p.as_slice() {
            // IMF-fixdate
            [d, mo, y, t, "GMT"] if d.len() == 2 && y.len() == 4 => {
                (num(y)?, month(mo)?, num(d)?, hms(t)?)
            }
            // RFC 850: two-digit year, read as the nearest past century (RFC 9110 §5.6.7)
            [dmy, t, "GMT"] => {
                let mut it = dmy.split('-');
                let (d, mo, yy) = (it.next()?, it.next()?, it.next()?);
                if it.next().is_some() || d.len() != 2 || yy.len() != 2 {
                    return None;
                }
                let yy = num(yy)?;
                let (this_year, _, _) = civil_from_days((now_micros() / 86_400_000_000) as i64);
                let mut y = this_year - this_year % 100 + yy;
                if y > this_year + 50 {
                    y -= 100;
                }
                (y, month(mo)?, num(d)?, hms(t)?)
            }
            _ => return None,
        }
    } else {
        match parts.as_slice() {
            // asctime
            [_, mo, d, t, y] if d.len() <= 2 && y.len() == 4 => {
                (num(y)?, month(mo)?, num(d)?, hms(t)?)
            }
            _ => return None,
        }
    };
    if !(1..=12).contains(&mo) || d < 1 || d > days_in_month(y, mo) || h > 23 || mi > 59 || se > 60
    {
        return None;
    }
    let days = days_from_civil(y, mo, d);
    let secs = days * 86_400 + h * 3600 + mi * 60 + se.min(59);
    u64::try_from(secs).ok()
}

fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if is_leap(y) => 29,
        _ => 28,
    }
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian (H. Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = if z >= 0 { z } else { z - 146_096 } / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// (year, month, day) to days since 1970-01-01.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
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
        let now = now_micros() / 1_000_000;
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
