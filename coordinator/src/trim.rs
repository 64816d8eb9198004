//! Gives freed heap back to the OS. glibc keeps what a burst freed in its
//! per-thread arenas, so without this the resident size stays at the
//! burst's peak (measured: `bench/burst.py`, `bench/readers.py`). Whatever
//! frees much (a connection closing, a large answer sent) says so with
//! [`released`]; a timer trims the heap once such a burst goes quiet, or
//! every few seconds while it lasts, however few connections it used. The
//! resident size growing without such a signal also counts.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// Memory was freed: a connection closed, a large answer was sent.
static RELEASED: AtomicUsize = AtomicUsize::new(0);

/// Counts one release; the next quiet second trims.
pub fn released() {
    RELEASED.fetch_add(1, Ordering::Relaxed);
}

/// While releases keep coming, trim at most this often.
const UNDER_LOAD: Duration = Duration::from_secs(5);

/// Growth of the resident size since the last trim that counts as a
/// release on its own.
const GROWTH: u64 = 16 * 1024 * 1024;

/// Runs until dropped (aborted): every second, trims the heap if something
/// was released and the last second was quiet, or if releases have gone on
/// for `UNDER_LOAD` since the last trim.
pub async fn run() {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut after_trim = resident_bytes();
    let mut since = tokio::time::Instant::now();
    let mut pending = false;
    loop {
        tick.tick().await;
        let now = RELEASED.swap(0, Ordering::Relaxed);
        let grew = resident_bytes().saturating_sub(after_trim) > GROWTH;
        pending |= now > 0 || grew;
        if pending && (now == 0 || since.elapsed() >= UNDER_LOAD) {
            trim_heap();
            after_trim = resident_bytes();
            since = tokio::time::Instant::now();
            pending = false;
        }
    }
}

/// The process's resident size (0 where it cannot be read).
pub fn resident_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * page_size())
}

fn page_size() -> u64 {
    // SAFETY: sysconf only reads a configuration value.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(size).unwrap_or(4096)
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn trim_heap() {
    // SAFETY: malloc_trim only returns free heap pages to the OS; it takes
    // the allocator's own locks and has no preconditions.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim_heap() {}
