//! Calendar dates as the filters take them (`YYYY-MM-DD`), and as a voice agent says them.

use std::fmt;

/// A valid Gregorian calendar date. Ordered by time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Date {
    pub year: i32,
    pub month: u8,
    pub day: u8,
}

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

impl Date {
    /// Strictly `YYYY-MM-DD` (what `doc_date` holds); anything else, or a day the month does
    /// not have, is `None`.
    pub fn parse(text: &str) -> Option<Date> {
        let bytes = text.as_bytes();
        let shaped = bytes.len() == 10
            && bytes[4] == b'-'
            && bytes[7] == b'-'
            && bytes.iter().enumerate().all(|(i, b)| i == 4 || i == 7 || b.is_ascii_digit());
        if !shaped {
            return None;
        }
        let year = text.get(0..4)?.parse().ok()?;
        let month = text.get(5..7)?.parse().ok()?;
        let day = text.get(8..10)?.parse().ok()?;
        let date = Date { year, month, day };
        (year >= 1 && (1..=12).contains(&month) && day >= 1 && day <= date.days_in_month()).then_some(date)
    }

    fn is_leap_year(self) -> bool {
        (self.year % 4 == 0 && self.year % 100 != 0) || self.year % 400 == 0
    }

    fn days_in_month(self) -> u8 {
        match self.month {
            2 if self.is_leap_year() => 29,
            2 => 28,
            4 | 6 | 9 | 11 => 30,
            _ => 31,
        }
    }

    fn month_name(self) -> &'static str {
        MONTHS[usize::from(self.month.clamp(1, 12) - 1)]
    }

    fn is_month_end(self) -> bool {
        self.day == self.days_in_month()
    }

    /// "July 1, 2024"
    pub fn spoken(self) -> String {
        format!("{} {}, {}", self.month_name(), self.day, self.year)
    }

    /// "July 1", for a range whose year is said once at its end.
    fn spoken_without_year(self) -> String {
        format!("{} {}", self.month_name(), self.day)
    }
}

impl fmt::Display for Date {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:04}-{:02}-{:02}", self.year, self.month, self.day)
    }
}

/// The shortest natural name of a closed range, when it is a whole calendar period:
/// "2024", "Q3 2024" or "July 2024".
pub fn period_name(start: Date, end: Date) -> Option<String> {
    if start.year != end.year || start.day != 1 || !end.is_month_end() {
        return None;
    }
    match (start.month, end.month) {
        (1, 12) => Some(start.year.to_string()),
        (s, e) if s == e => Some(format!("{} {}", start.month_name(), start.year)),
        (s, e) if s % 3 == 1 && e == s + 2 => Some(format!("Q{} {}", s / 3 + 1, start.year)),
        _ => None,
    }
}

/// "July 1 to September 15, 2024" or "July 1, 2024 to March 31, 2025".
pub fn spoken_range(start: Date, end: Date) -> String {
    if start.year == end.year {
        format!("{} to {}", start.spoken_without_year(), end.spoken())
    } else {
        format!("{} to {}", start.spoken(), end.spoken())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn date(text: &str) -> Date {
        Date::parse(text).unwrap_or_else(|| panic!("{text} should parse"))
    }

    #[test]
    fn parses_only_real_iso_dates() {
        assert_eq!(Date::parse("2024-07-01"), Some(Date { year: 2024, month: 7, day: 1 }));
        assert!(Date::parse("2024-02-29").is_some());
        for bad in [
            "2025-02-29",
            "2024-13-01",
            "2024-00-10",
            "2024-04-31",
            "2024-7-1",
            "24-07-01",
            "2024/07/01",
            "2024-07-01T00:00:00Z",
            "",
            "２０２４-07-01",
        ] {
            assert_eq!(Date::parse(bad), None, "{bad}");
        }
        assert!(Date::parse("1900-02-29").is_none());
        assert!(Date::parse("2000-02-29").is_some());
    }

    #[test]
    fn orders_and_prints_like_iso() {
        assert!(date("2024-07-01") < date("2024-09-30"));
        assert!(date("2024-12-31") < date("2025-01-01"));
        assert_eq!(date("2024-07-01").to_string(), "2024-07-01");
        assert_eq!(date("2024-07-01").spoken(), "July 1, 2024");
    }

    #[test]
    fn names_whole_periods() {
        assert_eq!(period_name(date("2024-07-01"), date("2024-09-30")).as_deref(), Some("Q3 2024"));
        assert_eq!(period_name(date("2025-01-01"), date("2025-03-31")).as_deref(), Some("Q1 2025"));
        assert_eq!(period_name(date("2024-01-01"), date("2024-12-31")).as_deref(), Some("2024"));
        assert_eq!(period_name(date("2024-02-01"), date("2024-02-29")).as_deref(), Some("February 2024"));
        assert_eq!(period_name(date("2024-07-01"), date("2024-09-29")), None);
        assert_eq!(period_name(date("2024-08-01"), date("2024-10-31")), None);
        assert_eq!(period_name(date("2024-07-01"), date("2025-09-30")), None);
    }

    #[test]
    fn speaks_ranges() {
        assert_eq!(spoken_range(date("2024-07-01"), date("2024-09-15")), "July 1 to September 15, 2024");
        assert_eq!(spoken_range(date("2024-11-01"), date("2025-03-31")), "November 1, 2024 to March 31, 2025");
    }
}
