//! The background purge of old history (`serve --retain-finished`): every
//! `interval`, finished jobs older than the age go (with their logs and
//! idempotency keys), then idempotency keys past their 24 hours, then
//! pairing codes a day past their expiry, each in batches of `batch` (see
//! `store::retention`). After each batch the task
//! pauses as long as the batch took, so it holds the writer at most half
//! the time and a lease never waits behind more than one batch.

use std::time::{Duration, Instant};

use crate::service::Services;
use crate::store::Purged;

/// How much finished history is kept, and how it is purged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// Finished jobs older than this are purged; `None`: kept forever.
    pub age: Option<Duration>,
    /// Jobs (or keys) deleted per transaction.
    pub batch: usize,
    /// Pause between two purges (each purges everything due).
    pub interval: Duration,
}

/// 30 days.
pub const DEFAULT_AGE: &str = "30d";

impl Default for Retention {
    fn default() -> Self {
        Self {
            age: parse_age(DEFAULT_AGE).expect("the default parses"),
            batch: 500,
            interval: Duration::from_secs(60),
        }
    }
}

/// `30d`, `24h`, `90m`, `3600s` (a whole number and a unit); `forever` or
/// `0`: keep everything.
pub fn parse_age(s: &str) -> Result<Option<Duration>, String> {
    let s = s.trim();
    if s == "forever" || s == "0" {
        return Ok(None);
    }
    let bad = || format!("bad age {s:?}: use e.g. 30d, 24h, 90m, 3600s, or forever");
    let unit_at = s.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
    let (n, unit) = s.split_at(unit_at);
    let n: u64 = n.parse().map_err(|_| bad())?;
    let secs = match unit {
        "s" => Some(n),
        "m" => n.checked_mul(60),
        "h" => n.checked_mul(3600),
        "d" => n.checked_mul(86_400),
        _ => return Err(bad()),
    };
    match secs {
        Some(0) => Ok(None),
        // Ten years at most: the age is subtracted from a Unix-ms clock.
        Some(secs) if secs <= 10 * 366 * 86_400 => Ok(Some(Duration::from_secs(secs))),
        _ => Err(format!(
            "age {s:?} is too long: ten years at most, or forever"
        )),
    }
}

/// Purges until shutdown: at start, then every `interval`.
pub async fn purge_in_background(st: Services, policy: Retention) {
    loop {
        let started = Instant::now();
        let cutoff = policy.age.map(|age| st.now() - age.as_millis() as i64);
        match purge_all(&st, policy, cutoff).await {
            Ok(Some(total)) if total != Purged::default() => tracing::info!(
                jobs = total.jobs,
                log_chunks = total.log_chunks,
                keys = total.keys,
                pairing_codes = total.pairing_codes,
                revocations = total.revocations,
                deliveries = total.deliveries,
                workflow_jobs = total.workflow_jobs,
                ms = started.elapsed().as_millis() as u64,
                "purged old history"
            ),
            Ok(_) => {}
            Err(e) => tracing::error!(error = %e, "purging old history failed"),
        }
        tokio::select! {
            _ = tokio::time::sleep(policy.interval) => {}
            _ = st.shutting_down() => return,
        }
    }
}

/// Everything due, batch by batch; `None` if shutdown came first.
async fn purge_all(
    st: &Services,
    policy: Retention,
    cutoff: Option<i64>,
) -> crate::error::Result<Option<Purged>> {
    let mut total = Purged::default();
    if let Some(cutoff) = cutoff {
        loop {
            let t = Instant::now();
            let purged = st.store.purge_finished(cutoff, policy.batch).await?;
            total += purged;
            if (purged.jobs as usize) < policy.batch || !pause(st, t.elapsed()).await {
                break;
            }
        }
    }
    total.keys += in_batches(st, policy, || {
        st.store.purge_expired_keys(st.now(), policy.batch)
    })
    .await?;
    total.pairing_codes += in_batches(st, policy, || {
        st.store.purge_old_pairing_codes(st.now(), policy.batch)
    })
    .await?;
    total.revocations += in_batches(st, policy, || {
        st.store.purge_old_revocations(st.now(), policy.batch)
    })
    .await?;
    total.deliveries += in_batches(st, policy, || {
        st.store.purge_old_deliveries(st.now(), policy.batch)
    })
    .await?;
    total.workflow_jobs += in_batches(st, policy, || {
        st.store.purge_old_workflow_jobs(st.now(), policy.batch)
    })
    .await?;
    Ok((!*st.shutdown.borrow()).then_some(total))
}

/// Runs `batch` until it deletes fewer than a batch (or shutdown comes),
/// pausing between batches; returns how many it deleted.
async fn in_batches<F, Fut>(
    st: &Services,
    policy: Retention,
    mut batch: F,
) -> crate::error::Result<u64>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = crate::store::error::Result<u64>>,
{
    let mut total = 0;
    loop {
        let t = Instant::now();
        let gone = batch().await?;
        total += gone;
        if (gone as usize) < policy.batch || !pause(st, t.elapsed()).await {
            return Ok(total);
        }
    }
}

/// Waits as long as the last batch took (so whoever queued for the writer
/// meanwhile goes first); false if shutdown came first.
async fn pause(st: &Services, took: Duration) -> bool {
    tokio::select! {
        _ = tokio::time::sleep(took.max(Duration::from_millis(1))) => !*st.shutdown.borrow(),
        _ = st.shutting_down() => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_take_a_unit_and_forever_keeps_everything() {
        let h = |n: u64| Some(Duration::from_secs(n * 3600));
        assert_eq!(parse_age("24h"), Ok(h(24)));
        assert_eq!(parse_age("30d"), Ok(h(720)));
        assert_eq!(parse_age("90m"), Ok(Some(Duration::from_secs(5400))));
        assert_eq!(parse_age("5s"), Ok(Some(Duration::from_secs(5))));
        assert_eq!(parse_age("forever"), Ok(None));
        assert_eq!(parse_age("0"), Ok(None));
        assert_eq!(parse_age("0d"), Ok(None));
        for bad in [
            "",
            "d",
            "24",
            "1.5h",
            "-1d",
            "1w",
            "h24",
            "99999999999999999999d",
        ] {
            assert!(parse_age(bad).is_err(), "{bad:?}");
        }
        assert!(parse_age("3700d").is_err(), "over ten years");
    }
}
