//! Time as a seam: lease, expiry and billing logic take `now` from here.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

pub trait Clock: Send + Sync {
    /// Unix time in milliseconds.
    fn now_ms(&self) -> i64;
}

pub struct SystemClock;

/// Added to every [`SystemClock`] reading: 0, except in tests that play a
/// replica whose clock is off (`serve --clock-skew-ms`, hidden).
static SKEW_MS: AtomicI64 = AtomicI64::new(0);

impl SystemClock {
    /// Shifts this process's clock by `ms` (for tests only).
    pub fn set_skew_ms(ms: i64) {
        SKEW_MS.store(ms, Ordering::Relaxed);
    }
}

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0)
            + SKEW_MS.load(Ordering::Relaxed)
    }
}
