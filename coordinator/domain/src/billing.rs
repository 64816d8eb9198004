//! Billing months: calendar months in UTC, as a number (months since
//! 0000-01, so that 2026-12 is 2026 × 12 + 11) that the database stores
//! with each usage line and each workspace's running total.

use crate::calendar::{civil_from_days, days_from_civil};

/// A calendar month in UTC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Month(pub i64);

const DAY_MS: i64 = 86_400_000;

impl Month {
    /// The month holding `unix_ms`.
    pub fn of(unix_ms: i64) -> Self {
        let (year, month, _) = civil_from_days(unix_ms.div_euclid(DAY_MS));
        Self(year * 12 + i64::from(month) - 1)
    }

    /// `YYYY-MM`, years 1970-9999.
    pub fn parse(s: &str) -> Option<Self> {
        let (year, month) = s.split_once('-')?;
        if year.len() != 4 || month.len() != 2 {
            return None;
        }
        let year: i64 = year.parse().ok().filter(|y| (1970..=9999).contains(y))?;
        let month: i64 = month.parse().ok().filter(|m| (1..=12).contains(m))?;
        Some(Self(year * 12 + month - 1))
    }

    pub fn year_month(self) -> (i64, u32) {
        (self.0.div_euclid(12), self.0.rem_euclid(12) as u32 + 1)
    }

    /// Its first millisecond (Unix ms).
    pub fn start_ms(self) -> i64 {
        let (year, month) = self.year_month();
        days_from_civil(year, month, 1) * DAY_MS
    }

    pub fn next(self) -> Self {
        Self(self.0 + 1)
    }

    /// `YYYY-MM-01`.
    pub fn first_day(self) -> String {
        format!("{self}-01")
    }
}

impl std::fmt::Display for Month {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (year, month) = self.year_month();
        write!(f, "{year:04}-{month:02}")
    }
}

/// Runner-milliseconds as runner-minutes, to a tenth (`1.5`), as the
/// budget's messages and the CLI show them.
pub fn runner_minutes(ms: u64) -> String {
    let tenths = (ms + 3_000) / 6_000;
    format!("{}.{}", tenths / 10, tenths % 10)
}

#[cfg(test)]
mod tests {
    use super::Month;

    #[test]
    fn months_are_utc_calendar_months() {
        // 2026-12-01T00:00:00Z and the millisecond before it.
        let dec = 1_796_083_200_000;
        assert_eq!(Month::of(dec).to_string(), "2026-12");
        assert_eq!(Month::of(dec - 1).to_string(), "2026-11");
        assert_eq!(Month::of(dec).start_ms(), dec);
        assert_eq!(Month::of(dec).next().to_string(), "2027-01");
        assert_eq!(Month::of(dec).next().next().start_ms(), 1_801_440_000_000);
        assert_eq!(Month::of(0).to_string(), "1970-01");
        // A leap day.
        let feb29 = Month::parse("2028-02").unwrap().start_ms() + 28 * 86_400_000;
        assert_eq!(Month::of(feb29).to_string(), "2028-02");
        assert_eq!(Month::of(feb29 + 86_400_000).to_string(), "2028-03");
    }

    #[test]
    fn months_parse_as_yyyy_mm_only() {
        assert_eq!(Month::parse("2026-12"), Some(Month(2026 * 12 + 11)));
        for bad in [
            "2026-13", "2026-00", "26-12", "2026-1", "2026/12", "", "1969-12", "x",
        ] {
            assert_eq!(Month::parse(bad), None, "{bad}");
        }
    }
}
