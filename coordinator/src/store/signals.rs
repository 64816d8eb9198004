//! Carrying dispatch signals between coordinator replicas over PostgreSQL
//! `LISTEN`/`NOTIFY`. SQLite has one coordinator, so there it is a no-op.

use serde::{Deserialize, Serialize};
use sqlx::postgres::PgListener;

use super::Store;
use crate::error::Result;
use crate::wake::Signal;

/// The notification channel every replica listens on.
pub const CHANNEL: &str = "drover_signals";

/// Signal bytes per notification (PostgreSQL's limit is 8000 with the envelope).
const MAX_PAYLOAD: usize = 6000;

/// One notification: who sent it, and what happened.
#[derive(Serialize, Deserialize, Debug)]
pub struct Envelope {
    #[serde(rename = "o")]
    pub origin: String,
    #[serde(rename = "s")]
    pub signals: Vec<Signal>,
    /// When it was sent, by the database's clock (Unix ms), for the signal
    /// lag metric. Absent from older replicas' signals.
    #[serde(rename = "t", default, skip_serializing_if = "Option::is_none")]
    pub sent_at_ms: Option<i64>,
}

impl Store {
    /// Tells the other replicas (sent after the change committed).
    /// Concurrent calls go out together, in as few notifications as fit.
    pub async fn publish(&self, origin: &str, signals: &[Signal]) -> Result<()> {
        if !self.dialect.replica_signals || signals.is_empty() {
            return Ok(());
        }
        match &self.batches {
            Some(b) => b.publish.call((origin.to_owned(), signals.to_vec())).await,
            None => self.notify_all(origin, signals).await,
        }
    }

    /// Signals from one batch of `publish` calls (all from this replica).
    pub(super) async fn publish_batch(
        &self,
        reqs: &[(String, Vec<Signal>)],
    ) -> Result<Vec<Result<()>>> {
        let Some((origin, _)) = reqs.first() else {
            return Ok(Vec::new());
        };
        let all: Vec<Signal> = reqs.iter().flat_map(|(_, s)| s.iter().cloned()).collect();
        if !all.is_empty() {
            self.notify_all(origin, &all).await?;
        }
        Ok(reqs.iter().map(|_| Ok(())).collect())
    }

    /// Waits until the signals queued before this call are sent: at
    /// shutdown, so that what the last requests announced reaches the other
    /// replicas before the pool closes. (An empty call queues behind them.)
    pub async fn flush_signals(&self, origin: &str) {
        if !self.dialect.replica_signals {
            return;
        }
        if let Some(b) = &self.batches {
            let _ = b.publish.call((origin.to_owned(), Vec::new())).await;
        }
    }

    async fn notify_all(&self, origin: &str, signals: &[Signal]) -> Result<()> {
        // NOTIFY payloads must stay under 8000 bytes: send in batches.
        let mut batch: Vec<Signal> = Vec::new();
        let mut size = 0;
        for signal in signals {
            let len = serde_json::to_string(signal)?.len() + 1;
            if !batch.is_empty() && size + len > MAX_PAYLOAD {
                self.notify(origin, std::mem::take(&mut batch)).await?;
                size = 0;
            }
            batch.push(signal.clone());
            size += len;
        }
        self.notify(origin, batch).await
    }

    async fn notify(&self, origin: &str, signals: Vec<Signal>) -> Result<()> {
        let payload = serde_json::to_string(&Envelope {
            origin: origin.to_owned(),
            signals,
            sent_at_ms: None,
        })?;
        // Stamped with the database's clock, as lease times are (replicas'
        // clocks may disagree): spliced in as the object's last field.
        let clock = self.dialect.db_clock.unwrap_or("NULL");
        // A notification needs no durability: do not wait for a WAL flush.
        sqlx::query(&format!(
            "SELECT set_config('synchronous_commit', 'off', true),
                    pg_notify($1, left($2, -1) || ',\"t\":' || {clock} || '}}')"
        ))
        .bind(CHANNEL)
        .bind(payload)
        .execute(&self.writer)
        .await?;
        Ok(())
    }

    /// How long ago `envelope` was sent, in ms by the database's clock:
    /// `now` (this coordinator's clock) shifted by how far that was from
    /// the database's at the last lease expiry check. `None` if unstamped.
    pub fn signal_age_ms(&self, envelope: &Envelope, now: i64) -> Option<i64> {
        let offset = self.clock_offset.load(std::sync::atomic::Ordering::Relaxed);
        Some((now - offset - envelope.sent_at_ms?).max(0))
    }

    /// A listener for other replicas' signals, on PostgreSQL.
    pub async fn listener(&self) -> Result<Option<PgListener>> {
        if !self.dialect.replica_signals {
            return Ok(None);
        }
        let mut listener = PgListener::connect(&self.url).await?;
        listener.listen(CHANNEL).await?;
        Ok(Some(listener))
    }
}
