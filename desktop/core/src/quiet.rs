//! Quiet hours: a daily window of this machine's local time in which new
//! jobs wait (running ones go on), e.g. 22:00 to 07:00, across midnight
//! when it ends before it starts.

use serde::{Deserialize, Serialize};

use crate::error::AppError;

/// From and to as `HH:MM`, 24-hour, local time; `to` is when it ends.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct QuietHours {
    pub from: String,
    pub to: String,
}

impl QuietHours {
    /// Checked: both times of day, and not the same one.
    pub fn new(from: &str, to: &str) -> Result<Self, AppError> {
        let hours = Self {
            from: from.trim().to_owned(),
            to: to.trim().to_owned(),
        };
        hours.check()?;
        Ok(hours)
    }

    pub fn check(&self) -> Result<(), AppError> {
        let (from, to) = (minute_of_day(&self.from)?, minute_of_day(&self.to)?);
        if from == to {
            return Err(AppError::invalid(format!(
                "quiet hours from {} to {} would be no time or all day: pick two different times",
                self.from, self.to
            )));
        }
        Ok(())
    }

    /// Whether `now` (minutes since local midnight) is within them.
    pub fn contains(&self, now: u16) -> bool {
        let (Ok(from), Ok(to)) = (minute_of_day(&self.from), minute_of_day(&self.to)) else {
            return false;
        };
        if from < to {
            (from..to).contains(&now)
        } else {
            now >= from || now < to
        }
    }
}

/// `HH:MM` (or `H:MM`) as minutes since midnight.
fn minute_of_day(text: &str) -> Result<u16, AppError> {
    let bad = || {
        AppError::invalid(format!(
            "quiet hours: {text:?} is not a time of day (HH:MM, 24-hour)"
        ))
    };
    let (h, m) = text.split_once(':').ok_or_else(bad)?;
    let digits = |s: &str| !s.is_empty() && s.len() <= 2 && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(h) || m.len() != 2 || !digits(m) {
        return Err(bad());
    }
    let (h, m): (u16, u16) = (h.parse().map_err(|_| bad())?, m.parse().map_err(|_| bad())?);
    if h > 23 || m > 59 {
        return Err(bad());
    }
    Ok(h * 60 + m)
}

/// Minutes since midnight, this machine's local time (its time zone as
/// the system sets it, or `TZ`).
pub fn local_minute_now() -> u16 {
    use chrono::Timelike as _;
    let now = chrono::Local::now();
    (now.hour() * 60 + now.minute()) as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_within_a_day_and_one_across_midnight() {
        let day = QuietHours::new("09:00", "17:30").unwrap();
        assert!(!day.contains(8 * 60 + 59));
        assert!(day.contains(9 * 60) && day.contains(17 * 60 + 29));
        assert!(!day.contains(17 * 60 + 30));
        let night = QuietHours::new("22:00", "7:00").unwrap();
        assert!(night.contains(22 * 60) && night.contains(23 * 60 + 59));
        assert!(night.contains(0) && night.contains(6 * 60 + 59));
        assert!(!night.contains(7 * 60) && !night.contains(12 * 60));
    }

    #[test]
    fn what_is_not_a_time_of_day_is_refused_with_a_stable_code() {
        for (from, to) in [
            ("24:00", "07:00"),
            ("22:60", "07:00"),
            ("22", "07:00"),
            ("ten", "07:00"),
            ("22:00", "7:0"),
            ("-1:00", "07:00"),
            ("22:00", "22:00"),
        ] {
            let e = QuietHours::new(from, to).unwrap_err();
            assert_eq!(e.code, "INVALID_INPUT", "{from}-{to}: {e}");
        }
    }
}
