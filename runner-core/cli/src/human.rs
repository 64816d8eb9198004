//! Times for people, in the CLI's tables: the coordinator sends Unix
//! milliseconds; `--json` keeps them so.

use drover_wire::text::civil_from_days;

/// `2026-12-01 04:05 UTC`, for a time in Unix milliseconds.
pub fn utc(unix_ms: i64) -> String {
    let minutes = unix_ms.div_euclid(60_000);
    let (days, minute_of_day) = (minutes.div_euclid(1440), minutes.rem_euclid(1440));
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02} UTC",
        minute_of_day / 60,
        minute_of_day % 60
    )
}

/// How long before `now_ms` `unix_ms` was: `just now`, `3 min ago`,
/// `5 h ago`, `12 days ago` (a time ahead of `now_ms` is `just now`).
pub fn ago(unix_ms: i64, now_ms: i64) -> String {
    let minutes = (now_ms - unix_ms).max(0) / 60_000;
    match minutes {
        0 => "just now".into(),
        1..=59 => format!("{minutes} min ago"),
        60..=2879 => format!("{} h ago", minutes / 60),
        _ => format!("{} days ago", minutes / 1440),
    }
}

/// A span of milliseconds: `850 ms`, `3.4 s`, `5 min 3 s`, `2 h 5 min`.
pub fn span(ms: i64) -> String {
    let ms = ms.max(0);
    let s = ms / 1000;
    match ms {
        0..=999 => format!("{ms} ms"),
        1000..=59_999 => format!("{}.{} s", s, (ms % 1000) / 100),
        60_000..=3_599_999 => format!("{} min {} s", s / 60, s % 60),
        _ => format!("{} h {} min", s / 3600, (s % 3600) / 60),
    }
}

/// Now, in Unix milliseconds.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_times_read_as_calendar_dates() {
        assert_eq!(utc(0), "1970-01-01 00:00 UTC");
        // `date -u -d @1796098300`: Tue Dec  1 04:11:40 UTC 2026.
        assert_eq!(utc(1_796_098_300_000), "2026-12-01 04:11 UTC");
        // A leap day, and the last minute of a year.
        assert_eq!(utc(951_782_400_000), "2000-02-29 00:00 UTC");
        assert_eq!(utc(1_735_689_599_999), "2024-12-31 23:59 UTC");
        assert_eq!(utc(-60_000), "1969-12-31 23:59 UTC");
    }

    #[test]
    fn spans_read_in_the_unit_that_fits() {
        assert_eq!(span(-5), "0 ms");
        assert_eq!(span(850), "850 ms");
        assert_eq!(span(3_450), "3.4 s");
        assert_eq!(span(303_000), "5 min 3 s");
        assert_eq!(span(7_500_000), "2 h 5 min");
    }

    #[test]
    fn ages_round_down_to_a_readable_unit() {
        let now = 1_796_098_300_000;
        let min = 60_000;
        assert_eq!(ago(now, now), "just now");
        assert_eq!(ago(now + 5 * min, now), "just now");
        assert_eq!(ago(now - 59_999, now), "just now");
        assert_eq!(ago(now - 3 * min, now), "3 min ago");
        assert_eq!(ago(now - 61 * min, now), "1 h ago");
        assert_eq!(ago(now - 47 * 60 * min, now), "47 h ago");
        assert_eq!(ago(now - 12 * 1440 * min, now), "12 days ago");
    }
}
