//! Carrying dispatch signals between coordinator replicas over PostgreSQL
//! `LISTEN`/`NOTIFY`. SQLite has one coordinator, so there it is a no-op.
//!
//! A replica alone sends nothing. Each replica's listening connection is
//! named (`application_name`), and every replica counts those in
//! `pg_stat_activity` a few times a second (`look_for_replicas`). One that
//! was alone and finds another sends `LookAgain` first: the other's waiters
//! look at the database, and find what was not signalled meanwhile.

use serde::{Deserialize, Serialize};
use std::str::FromStr;
use std::sync::atomic::Ordering;

use sqlx::postgres::{PgConnectOptions, PgListener};

use crate::store::Store;
use crate::store::error::Result;
use crate::wake::Signal;

/// The notification channel every replica listens on.
pub const CHANNEL: &str = "drover_signals";

/// The `application_name` of each replica's listening connection.
pub const LISTENER_NAME: &str = "drover-replica";

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
        if !self.dialect.replica_signals || signals.is_empty() || !self.others_listening() {
            return Ok(());
        }
        match &self.batches {
            Some(b) => b.publish.call((origin.to_owned(), signals.to_vec())).await,
            None => self.notify_all(origin, signals).await,
        }
    }

    /// Does another replica listen for this one's signals (as last seen)?
    pub fn others_listening(&self) -> bool {
        self.others_listening.load(Ordering::Relaxed)
    }

    /// Counts the replicas listening on this database (this one's listener
    /// included), and notes whether there are others. Returns true when
    /// this replica was alone until now: it owes them `LookAgain`. A look
    /// that fails changes nothing.
    pub async fn look_for_replicas(&self) -> Result<bool> {
        if !self.dialect.replica_signals {
            return Ok(false);
        }
        let listening: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM pg_stat_activity
             WHERE datname = current_database() AND application_name = $1",
        )
        .bind(LISTENER_NAME)
        .fetch_one(&self.reader)
        .await?;
        // 0: not even this one's listener is up yet; count others as there.
        let others = listening != 1;
        let was = self.others_listening.swap(others, Ordering::Relaxed);
        Ok(others && !was)
    }

    /// Signals from one batch of `publish` calls (all from this replica).
    pub(in crate::store) async fn publish_batch(
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
        if let Some(o) = crate::store::observe::get() {
            o.signal_sent();
        }
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
        let options = PgConnectOptions::from_str(&self.url)?.application_name(LISTENER_NAME);
        let pool = super::pool_options::<sqlx::Postgres>()
            .max_connections(1)
            .connect_with(options)
            .await?;
        let mut listener = PgListener::connect_with(&pool).await?;
        listener.listen(CHANNEL).await?;
        Ok(Some(listener))
    }
}
