//! Retention: finished jobs (every end state) whose finish time is older
//! than the configured age are deleted with everything that names them —
//! their log chunks and their idempotency keys; their env went when they
//! ended (`jobs.env_sealed`, erased by a trigger). Usage rows are billing
//! history, not the job's: they stay, so usage totals never change.
//!
//! Each call deletes one small batch in its own transaction, so the writer
//! (SQLite's one connection) is free between batches and a lease waits for
//! at most one batch. Replicas on PostgreSQL may purge at the same time:
//! each locks its batch `FOR UPDATE SKIP LOCKED`, so they take different
//! jobs, and every delete is idempotent anyway.
//!
//! Pairing codes go a day after they expire (used or not): until then a
//! used code still answers PAIRING_CODE_USED, an unused one
//! PAIRING_CODE_EXPIRED, rather than NOT_FOUND.
//!
//! Webhook deliveries are remembered a week (GitHub redelivers only within
//! three days), long enough to refuse a replay; so are the workflow jobs
//! on-demand pools served, once they ended.
//!
//! On SQLite the file does not shrink: deleted pages go on the free list
//! and new rows reuse them, so under a steady load the file stops growing
//! (see ARCHITECTURE.md, "Retention").

use super::idempotency::KEY_TTL_MS;
use super::pairing::{PAIRING_CODE_GRACE_MS, REVOCATION_KEEP_MS};
use super::{Store, placeholders};
use crate::store::error::Result;

/// How long a webhook delivery's id is kept to refuse its replay.
const DELIVERY_KEEP_MS: i64 = 7 * 24 * 3600 * 1000;

/// What one batch deleted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Purged {
    pub jobs: u64,
    pub log_chunks: u64,
    pub keys: u64,
    pub pairing_codes: u64,
    pub revocations: u64,
    pub deliveries: u64,
    pub workflow_jobs: u64,
}

impl std::ops::AddAssign for Purged {
    fn add_assign(&mut self, other: Self) {
        self.jobs += other.jobs;
        self.log_chunks += other.log_chunks;
        self.keys += other.keys;
        self.pairing_codes += other.pairing_codes;
        self.revocations += other.revocations;
        self.deliveries += other.deliveries;
        self.workflow_jobs += other.workflow_jobs;
    }
}

impl Store {
    /// Deletes up to `batch` jobs that finished before `cutoff` (Unix ms),
    /// oldest first, with their log chunks and idempotency keys, in one
    /// transaction. Fewer than `batch` jobs deleted: none is left (unless
    /// another replica holds some right now).
    pub async fn purge_finished(&self, cutoff: i64, batch: usize) -> Result<Purged> {
        let mut tx = self.writer.begin().await?;
        // `finished_at IS NOT NULL` picks the partial index `jobs_by_finish`.
        let ids: Vec<String> = sqlx::query_scalar(&format!(
            "SELECT id FROM jobs
             WHERE finished_at IS NOT NULL AND finished_at < $1
               AND state NOT IN ('queued', 'leased', 'running')
             ORDER BY finished_at LIMIT $2 {}",
            self.dialect.lock_skip_locked
        ))
        .bind(cutoff)
        .bind(batch as i64)
        .fetch_all(&mut *tx)
        .await?;
        if ids.is_empty() {
            return Ok(Purged::default());
        }
        let list = placeholders(1, ids.len());
        let mut purged = Purged::default();
        for (table, column, count) in [
            ("job_logs", "job_id", &mut purged.log_chunks),
            ("idempotency_keys", "job_id", &mut purged.keys),
            ("jobs", "id", &mut purged.jobs),
        ] {
            let sql = format!("DELETE FROM {table} WHERE {column} IN ({list})");
            let mut q = sqlx::query(&sql);
            for id in &ids {
                q = q.bind(id.as_str());
            }
            *count = q.execute(&mut *tx).await?.rows_affected();
        }
        tx.commit().await?;
        Ok(purged)
    }

    /// Deletes up to `batch` idempotency keys past their 24 hours, in one
    /// transaction; returns how many.
    pub async fn purge_expired_keys(&self, now: i64, batch: usize) -> Result<u64> {
        let done = sqlx::query(&format!(
            "DELETE FROM idempotency_keys WHERE (key_hash, member_id) IN (
                 SELECT key_hash, member_id FROM idempotency_keys WHERE created_at < $1
                 ORDER BY created_at LIMIT $2 {})",
            self.dialect.lock_skip_locked
        ))
        .bind(now - KEY_TTL_MS)
        .bind(batch as i64)
        .execute(&self.writer)
        .await?;
        Ok(done.rows_affected())
    }

    /// Deletes up to `batch` pairing codes that expired more than a day
    /// before `now` (used or not), in one transaction; returns how many.
    pub async fn purge_old_pairing_codes(&self, now: i64, batch: usize) -> Result<u64> {
        self.purge_by_hash(
            "pairing_codes",
            "expires_at",
            now - PAIRING_CODE_GRACE_MS,
            batch,
        )
        .await
    }

    /// Deletes up to `batch` revoked member tokens' rows older than 90
    /// days (a device presenting one after that is told only that its
    /// token is unknown), in one transaction; returns how many.
    pub async fn purge_old_revocations(&self, now: i64, batch: usize) -> Result<u64> {
        self.purge_by_hash(
            "token_revocations",
            "revoked_at",
            now - REVOCATION_KEEP_MS,
            batch,
        )
        .await
    }

    /// Deletes up to `batch` webhook deliveries taken more than a week
    /// before `now`, in one transaction; returns how many.
    pub async fn purge_old_deliveries(&self, now: i64, batch: usize) -> Result<u64> {
        self.purge_by_key(
            ("github_deliveries", "delivery"),
            "received_at",
            now - DELIVERY_KEEP_MS,
            batch,
        )
        .await
    }

    /// Deletes up to `batch` workflow jobs of on-demand pools that ended
    /// (done, or refused) more than a week before `now`, in one
    /// transaction; returns how many.
    pub async fn purge_old_workflow_jobs(&self, now: i64, batch: usize) -> Result<u64> {
        let done = sqlx::query(&format!(
            "DELETE FROM github_workflow_jobs WHERE (host, workflow_job_id) IN (
                 SELECT host, workflow_job_id FROM github_workflow_jobs
                 WHERE state IN ('done', 'refused') AND updated_at < $1
                 ORDER BY updated_at LIMIT $2 {})",
            self.dialect.lock_skip_locked
        ))
        .bind(now - DELIVERY_KEEP_MS)
        .bind(batch as i64)
        .execute(&self.writer)
        .await?;
        Ok(done.rows_affected())
    }

    /// Up to `batch` rows of `table` (keyed by `hash`) whose `column` is
    /// before `cutoff`, oldest first, deleted in one transaction.
    async fn purge_by_hash(
        &self,
        table: &str,
        column: &str,
        cutoff: i64,
        batch: usize,
    ) -> Result<u64> {
        self.purge_by_key((table, "hash"), column, cutoff, batch)
            .await
    }

    /// Up to `batch` rows of `table` (keyed by its one-column `key`) whose
    /// `column` is before `cutoff`, oldest first, deleted in one transaction.
    async fn purge_by_key(
        &self,
        (table, key): (&str, &str),
        column: &str,
        cutoff: i64,
        batch: usize,
    ) -> Result<u64> {
        let done = sqlx::query(&format!(
            "DELETE FROM {table} WHERE {key} IN (
                 SELECT {key} FROM {table} WHERE {column} < $1
                 ORDER BY {column} LIMIT $2 {})",
            self.dialect.lock_skip_locked
        ))
        .bind(cutoff)
        .bind(batch as i64)
        .execute(&self.writer)
        .await?;
        Ok(done.rows_affected())
    }
}
