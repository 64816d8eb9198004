//! What the store reports as it works (batch sizes and write times, replica
//! signals sent), to whoever listens: the coordinator's `/metrics` sets
//! the one listener at start (`metrics::install`). Unset, nothing is told.

use std::sync::OnceLock;
use std::time::Duration;

pub trait Observer: Send + Sync {
    /// A batch of `size` requests of `kind` (`submit`, `lease`, …) was
    /// written in `took`.
    fn batch_written(&self, kind: &str, size: usize, took: Duration);
    /// A replica signal was sent.
    fn signal_sent(&self);
}

/// The kinds of batch the store writes (see `Store::with_batches`).
pub const BATCH_KINDS: &[&str] = &["submit", "lease", "complete", "publish"];

static OBSERVER: OnceLock<&'static dyn Observer> = OnceLock::new();

/// Sets the listener, once per process; later calls change nothing.
pub fn set(observer: &'static dyn Observer) {
    let _ = OBSERVER.set(observer);
}

pub(crate) fn get() -> Option<&'static dyn Observer> {
    OBSERVER.get().copied()
}
