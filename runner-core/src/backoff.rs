//! Exponential backoff with jitter, for transient failures.

use std::time::Duration;

#[derive(Debug, Clone)]
pub struct Backoff {
    initial: Duration,
    max: Duration,
    current: Duration,
}

fn random_unit() -> f64 {
    let mut b = [0u8; 4];
    let _ = getrandom::fill(&mut b);
    f64::from(u32::from_le_bytes(b)) / f64::from(u32::MAX)
}

impl Backoff {
    pub fn new(initial: Duration, max: Duration) -> Self {
        Self {
            initial,
            max: max.max(initial),
            current: initial,
        }
    }

    /// The next pause: between half and all of the current step, which then doubles.
    pub fn next_delay(&mut self) -> Duration {
        let step = self.current;
        self.current = (self.current * 2).min(self.max);
        step.mul_f64(0.5 + 0.5 * random_unit())
    }

    pub async fn wait(&mut self) {
        tokio::time::sleep(self.next_delay()).await;
    }

    pub fn reset(&mut self) {
        self.current = self.initial;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_to_the_cap_with_jitter_and_resets() {
        let mut b = Backoff::new(Duration::from_millis(100), Duration::from_millis(800));
        let delays: Vec<Duration> = (0..6).map(|_| b.next_delay()).collect();
        let caps = [100, 200, 400, 800, 800, 800];
        for (d, cap) in delays.iter().zip(caps) {
            assert!(
                *d <= Duration::from_millis(cap) && *d >= Duration::from_millis(cap / 2),
                "{d:?} vs {cap}"
            );
        }
        b.reset();
        assert!(b.next_delay() <= Duration::from_millis(100));
    }
}
