//! A leased job while it runs: heartbeats, cancel checks, log chunks.

use drover_domain::job::LogStream;

use crate::ids::{JobId, LeaseId, RunnerId};
use crate::store::Store;
use crate::store::error::{Error, Result};

impl Store {
    /// Ends a leased job the coordinator cannot read (its env does not
    /// open: a key is missing or wrong), so it is not leased again forever.
    pub(super) async fn fail_unreadable(&self, job: &str, lease: &LeaseId, now: i64) -> Result<()> {
        sqlx::query(
            "UPDATE jobs SET state = 'failed', finished_at = $1, lease_id = NULL, lease_runner_id = NULL,
                 lease_expires_at = NULL,
                 error = 'the coordinator cannot read this job (its env does not open with the keys it has); it was not run'
             WHERE id = $2 AND lease_id = $3 AND state = 'leased'",
        )
        .bind(now)
        .bind(job)
        .bind(lease.as_str())
        .execute(&self.writer)
        .await?;
        Ok(())
    }

    /// Renews the lease (and marks the job running). Returns whether a cancel
    /// has been asked for.
    pub async fn heartbeat(
        &self,
        runner: &RunnerId,
        lease: &str,
        now: i64,
        ttl_ms: u64,
    ) -> Result<bool> {
        let sql = format!(
            "UPDATE jobs SET lease_expires_at = {} + $2, state = CASE WHEN state = 'leased' THEN 'running' ELSE state END
             WHERE lease_id = $3 AND lease_runner_id = $4 AND state IN ('leased', 'running')
             RETURNING cancel_requested",
            self.dialect.now("$1")
        );
        let ttl_ms = ttl_ms as i64;
        let args = vec![
            now.into(),
            ttl_ms.into(),
            lease.into(),
            runner.as_str().into(),
        ];
        let cancel: Option<i64> = self.engine.write(self, sql, args).await?.pop();
        cancel.map(|c| c != 0).ok_or_else(Error::lease_lost)
    }

    /// Is a cancel asked for on this live lease? (Read-only, for heartbeat waits.)
    pub async fn cancel_requested(&self, runner: &RunnerId, lease: &str) -> Result<bool> {
        const SQL: &str = "SELECT cancel_requested FROM jobs WHERE lease_id = $1 AND lease_runner_id = $2 AND state IN ('leased', 'running')";
        let args = vec![lease.into(), runner.as_str().into()];
        let cancel: Option<i64> = self.engine.read(self, SQL, args).await?.pop();
        cancel.map(|c| c != 0).ok_or_else(Error::lease_lost)
    }

    /// Stores one log chunk; a chunk number already stored is ignored.
    pub async fn append_log(
        &self,
        runner: &RunnerId,
        lease: &str,
        seq: u64,
        stream: LogStream,
        data: &str,
        now: i64,
    ) -> Result<JobId> {
        let mut tx = self.writer.begin().await?;
        let held: Option<(String, i64)> = sqlx::query_as(
            "SELECT id, attempt FROM jobs WHERE lease_id = $1 AND lease_runner_id = $2 AND state IN ('leased', 'running')",
        )
        .bind(lease)
        .bind(runner.as_str())
        .fetch_optional(&mut *tx)
        .await?;
        let (job, attempt) = held.ok_or_else(Error::lease_lost)?;
        let seq = i64::try_from(seq).map_err(|_| Error::bad_request("seq is too large"))?;
        sqlx::query(
            "INSERT INTO job_logs (job_id, attempt, seq, stream, data, created_at) VALUES ($1, $2, $3, $4, $5, $6)
             ON CONFLICT (job_id, attempt, seq) DO NOTHING",
        )
        .bind(&job)
        .bind(attempt)
        .bind(seq)
        .bind(match stream {
            LogStream::Stdout => "stdout",
            LogStream::Stderr => "stderr",
        })
        .bind(data.replace('\0', "\u{fffd}"))
        .bind(now)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(JobId::from_db(job))
    }
}
