//! Times and spans of time as the query strings of the history routes write them.

/// The longest stats window: a year.
pub const MAX_WINDOW_SECONDS: f64 = 366.0 * 86_400.0;

/// How far a host's clock may be from the database's without a stats window losing rows.
pub const CLOCK_SLACK_SECONDS: f64 = 3_600.0;

/// This host's clock, in seconds since the epoch.
pub fn unix_seconds() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

/// For a stats window of `window_seconds` ending at `now` (seconds since the epoch, by this
/// host's clock): a time [`CLOCK_SLACK_SECONDS`] before its start and one twice that before its
/// end. The stats statement compares them with the history's partition columns as constants, so
/// the planner leaves older partitions out before planning them (docs/architecture.md,
/// "Retention"); the statement still filters on the database's own clock.
pub fn stats_partition_bounds(now: f64, window_seconds: f64) -> (f64, f64) {
    (now - window_seconds - CLOCK_SLACK_SECONDS, now - 2.0 * CLOCK_SLACK_SECONDS)
}

/// A span such as `90s`, `15m`, `24h` or `7d`, in seconds; at most [`MAX_WINDOW_SECONDS`].
pub fn parse_window(text: &str) -> Option<f64> {
    let text = text.trim();
    let unit_at = text.len().checked_sub(1)?;
    let (number, unit) = text.split_at(unit_at);
    let per_unit = match unit {
        "s" => 1.0,
        "m" => 60.0,
        "h" => 3_600.0,
        "d" => 86_400.0,
        _ => return None,
    };
    if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let seconds = number.parse::<f64>().ok()? * per_unit;
    (seconds > 0.0 && seconds <= MAX_WINDOW_SECONDS).then_some(seconds)
}

/// Whether `text` is an RFC 3339 date-time, such as `2026-11-22T21:16:23.5Z` or
/// `2026-11-22T22:16:23+01:00`, that names a real day.
pub fn is_rfc3339(text: &str) -> bool {
    let bytes = text.as_bytes();
    let digits = |from: usize, len: usize| -> Option<u32> {
        let part = text.get(from..from + len)?;
        part.bytes().all(|b| b.is_ascii_digit()).then(|| part.parse().ok()).flatten()
    };
    let at = |index: usize, allowed: &[u8]| bytes.get(index).is_some_and(|b| allowed.contains(b));
    let date_time = (|| {
        let (year, month, day) = (digits(0, 4)?, digits(5, 2)?, digits(8, 2)?);
        let (hour, minute, second) = (digits(11, 2)?, digits(14, 2)?, digits(17, 2)?);
        let shape = at(4, b"-") && at(7, b"-") && at(10, b"Tt ") && at(13, b":") && at(16, b":");
        let valid = shape
            && year >= 1
            && (1..=12).contains(&month)
            && (1..=days_in_month(year, month)).contains(&day)
            && hour < 24
            && minute < 60
            && second <= 60;
        valid.then_some(())
    })();
    if date_time.is_none() {
        return false;
    }
    let mut rest = &text[19..];
    if let Some(fraction) = rest.strip_prefix('.') {
        let digits = fraction.bytes().take_while(u8::is_ascii_digit).count();
        // Nanoseconds are the finest a clock gives; PostgreSQL keeps microseconds.
        if digits == 0 || digits > 9 {
            return false;
        }
        rest = &fraction[digits..];
    }
    match rest.as_bytes() {
        [b'Z' | b'z'] => true,
        [b'+' | b'-', h1, h2, b':', m1, m2] if [h1, h2, m1, m2].iter().all(|b| b.is_ascii_digit()) => {
            (h1 - b'0') * 10 + (h2 - b'0') < 24 && (m1 - b'0') * 10 + (m2 - b'0') < 60
        }
        _ => false,
    }
}

fn days_in_month(year: u32, month: u32) -> u32 {
    match month {
        2 if year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400)) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_bounds_lie_before_the_window_by_the_clocks_slack() {
        let (start, end) = stats_partition_bounds(1_800_000_000.0, 86_400.0);
        assert_eq!(start, 1_800_000_000.0 - 86_400.0 - CLOCK_SLACK_SECONDS);
        assert_eq!(end, 1_800_000_000.0 - 2.0 * CLOCK_SLACK_SECONDS);
    }

    #[test]
    fn windows_have_a_number_and_a_unit() {
        assert_eq!(parse_window("90s"), Some(90.0));
        assert_eq!(parse_window("15m"), Some(900.0));
        assert_eq!(parse_window("24h"), Some(86_400.0));
        assert_eq!(parse_window("7d"), Some(604_800.0));
        for bad in ["", "h", "0h", "-1h", "1.5h", "24", "1w", "400d", " h", "1 h"] {
            assert_eq!(parse_window(bad), None, "{bad}");
        }
    }

    #[test]
    fn rfc3339_timestamps_name_a_real_instant() {
        for good in [
            "2026-11-22T21:16:23Z",
            "2026-11-22t21:16:23.123456z",
            "2024-02-29T00:00:00+01:00",
            "2026-11-22 21:16:23-05:30",
            "0001-01-01T00:00:00.123456789Z",
        ] {
            assert!(is_rfc3339(good), "{good}");
        }
        for bad in [
            "",
            "2026-11-22",
            "2026-11-22T21:16:23",
            "2025-02-29T00:00:00Z",
            "2026-13-01T00:00:00Z",
            "2026-11-22T24:00:00Z",
            "2026-11-22T21:16:23.Z",
            "2026-11-22T21:16:23+0100",
            "2026-11-22T21:16:23Z; DROP TABLE",
            "yesterday",
            // Year 0 and a fraction past nanoseconds are not instants PostgreSQL takes.
            "0000-01-01T00:00:00Z",
            "2026-11-22T21:16:23.1234567890Z",
        ] {
            assert!(!is_rfc3339(bad), "{bad}");
        }
    }
}
