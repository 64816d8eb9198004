//! Leases that ended without a complete: expiry, a revoked runner, a restart.

use std::sync::atomic::Ordering;

use sqlx::AnyConnection;

use crate::billing::Month;
use crate::ids::{JobId, RunnerId, RuntimeId};
use crate::store::error::Result;
use crate::store::{Dialect, Store, json_list, placeholders};
use crate::wake::Wake;

fn wake_for(runtime_id: &str, pinned: Option<&str>, requires: &str) -> Result<Wake> {
    Ok(match pinned {
        Some(r) => Wake::Runner {
            runtime: RuntimeId::from_db(runtime_id.to_owned()),
            runner: RunnerId::from_db(r.to_owned()),
        },
        None => Wake::Pool {
            runtime: RuntimeId::from_db(runtime_id.to_owned()),
            requires: json_list(requires)?,
        },
    })
}

/// Leases released per transaction: between chunks the writer is free for
/// everyone else (a submit, a heartbeat), however many leases expire at once.
const RELEASE_CHUNK: usize = 256;

const CANCELLED_GONE: &str = "cancelled; the runner stopped answering";
const LOST: &str = "the runner stopped answering and the job is out of attempts";

/// Puts jobs whose lease is gone back at the front of their queue, or ends
/// them: `cancelled` if a cancel was asked for, `lost` when out of attempts.
/// A lease that never reached `running` never ran (a runner heartbeats
/// before it starts the process), so it gives its attempt back.
/// Two statements, whatever the number of jobs: one for the endings, one
/// for the re-queues. A re-queued job's `queue_pos` is minus the time of
/// its release: before every new job (0), and before jobs re-queued
/// earlier, as if each went to the head of the queue in turn.
/// Returns (job, who to wake) for each job released.
async fn release(
    conn: &mut AnyConnection,
    dialect: &Dialect,
    jobs: &[String],
    now: i64,
) -> Result<Vec<(JobId, Option<Wake>)>> {
    if jobs.is_empty() {
        return Ok(Vec::new());
    }
    meter_lost_attempts(conn, jobs, now).await?;
    let now_sql = dialect.now("$1");
    let ended_sql = format!(
        "UPDATE jobs SET state = CASE WHEN cancel_requested <> 0 THEN 'cancelled' ELSE 'lost' END,
             error = CASE WHEN cancel_requested <> 0 THEN $2 ELSE $3 END,
             finished_at = {now_sql}, lease_id = NULL, lease_runner_id = NULL, lease_expires_at = NULL
         WHERE id IN ({}) AND state IN ('leased', 'running')
           AND (cancel_requested <> 0 OR (state = 'running' AND attempt >= max_attempts))
         RETURNING id",
        placeholders(4, jobs.len())
    );
    let mut q = sqlx::query_scalar::<_, String>(&ended_sql)
        .bind(now)
        .bind(CANCELLED_GONE)
        .bind(LOST);
    for job in jobs {
        q = q.bind(job.as_str());
    }
    let ended = q.fetch_all(&mut *conn).await?;

    let requeue_sql = format!(
        "UPDATE jobs SET state = 'queued', lease_id = NULL, lease_runner_id = NULL, lease_expires_at = NULL,
             attempt = attempt - CASE WHEN state = 'leased' THEN 1 ELSE 0 END,
             queue_pos = -({now_sql})
         WHERE id IN ({}) AND state IN ('leased', 'running')
         RETURNING id, runtime_id, pinned_runner_id, requires",
        placeholders(2, jobs.len())
    );
    let mut q =
        sqlx::query_as::<_, (String, String, Option<String>, String)>(&requeue_sql).bind(now);
    for job in jobs {
        q = q.bind(job.as_str());
    }
    let requeued = q.fetch_all(&mut *conn).await?;

    let mut out = Vec::with_capacity(ended.len() + requeued.len());
    out.extend(ended.into_iter().map(|id| (JobId::from_db(id), None)));
    for (id, runtime_id, pinned, requires) in requeued {
        let wake = wake_for(&runtime_id, pinned.as_deref(), &requires)?;
        out.push((JobId::from_db(id), Some(wake)));
    }
    Ok(out)
}

/// Meters the attempts of `jobs` that were running when their lease was
/// lost: the runner's time until now, one usage line each, as a complete
/// would have (the payer is the pool's owner). A leased job that never
/// started costs nothing; a line already there (a complete won) stays.
async fn meter_lost_attempts(conn: &mut AnyConnection, jobs: &[String], now: i64) -> Result<()> {
    let sql = format!(
        "INSERT INTO usage (job_id, attempt, workspace_id, payer, charged, runner_ms,
             month, runtime_id, runner_id, submitter_id, created_at)
         SELECT j.id, j.attempt, j.workspace_id,
                CASE WHEN rt.owner_member_id IS NULL THEN 'ws:' || w.name ELSE 'user:' || rt.owner_member_id END,
                CASE WHEN rt.owner_member_id IS NULL THEN 1 ELSE 0 END,
                CASE WHEN j.started_at < $1 THEN $1 - j.started_at ELSE 0 END,
                $2, j.runtime_id, j.lease_runner_id, j.submitter_id, $1
         FROM jobs j JOIN runtimes rt ON rt.id = j.runtime_id JOIN workspaces w ON w.id = j.workspace_id
         WHERE j.id IN ({}) AND j.state = 'running'
         ON CONFLICT (job_id, attempt) DO NOTHING",
        placeholders(3, jobs.len())
    );
    let mut q = sqlx::query(&sql).bind(now).bind(Month::of(now).0);
    for job in jobs {
        q = q.bind(job.as_str());
    }
    q.execute(conn).await?;
    Ok(())
}

/// Releases every lease `runner` holds (it was revoked), waiting for any
/// transaction (a complete) that holds one of those rows.
pub(crate) async fn release_leases_of_runner(
    conn: &mut AnyConnection,
    dialect: &Dialect,
    runner: &RunnerId,
    now: i64,
) -> Result<Vec<(JobId, Option<Wake>)>> {
    let held: Vec<String> = sqlx::query_scalar(&format!(
        "SELECT id FROM jobs WHERE lease_runner_id = $1 AND state IN ('leased', 'running') ORDER BY id {}",
        dialect.lock_for_update
    ))
    .bind(runner.as_str())
    .fetch_all(&mut *conn)
    .await?;
    let mut out = Vec::with_capacity(held.len());
    for chunk in held.chunks(RELEASE_CHUNK) {
        out.extend(release(conn, dialect, chunk, now).await?);
    }
    Ok(out)
}

impl Store {
    /// Releases every lease whose time ran out before `now` (on PostgreSQL,
    /// before the database's now; see [`Dialect::now`]), in chunks of
    /// [`RELEASE_CHUNK`] jobs, one transaction each, the writer free between.
    pub async fn expire_leases(&self, now: i64) -> Result<Vec<(JobId, Option<Wake>)>> {
        let d = self.dialect;
        let now = match d.db_clock {
            Some(clock) => {
                let db_now: i64 = sqlx::query_scalar(&format!("SELECT {clock}"))
                    .fetch_one(&self.writer)
                    .await?;
                // For `next_expiry`, which answers in the coordinator's clock.
                self.clock_offset.store(now - db_now, Ordering::Relaxed);
                db_now
            }
            None => now,
        };
        let mut out = Vec::new();
        loop {
            let mut tx = self.writer.begin().await?;
            let expired: Vec<String> = sqlx::query_scalar(&format!(
                "SELECT id FROM jobs WHERE state IN ('leased', 'running') AND lease_expires_at < $1
                 ORDER BY lease_expires_at LIMIT $2 {}",
                d.lock_skip_locked
            ))
            .bind(now)
            .bind(RELEASE_CHUNK as i64)
            .fetch_all(&mut *tx)
            .await?;
            if expired.is_empty() {
                return Ok(out);
            }
            out.extend(release(&mut tx, d, &expired, now).await?);
            tx.commit().await?;
            if expired.len() < RELEASE_CHUNK {
                return Ok(out);
            }
            // Let whoever queued for the writer meanwhile go first.
            tokio::task::yield_now().await;
        }
    }

    /// Releases, as expiry would, every lease `runner` holds but `kept`:
    /// the runner said it holds only those (after a restart, or a
    /// disconnection that made it stop its jobs), so the others would only
    /// count against its slots until they expired.
    pub async fn release_unheld(
        &self,
        runner: &RunnerId,
        kept: &[String],
        now: i64,
    ) -> Result<Vec<(JobId, Option<Wake>)>> {
        const HELD: &str = "SELECT id, lease_id FROM jobs
             WHERE lease_runner_id = $1 AND state IN ('leased', 'running') ORDER BY id";
        let gone = |rows: Vec<(String, Option<String>)>| -> Vec<String> {
            rows.into_iter()
                .filter(|(_, lease)| lease.as_ref().is_none_or(|l| !kept.contains(l)))
                .map(|(job, _)| job)
                .collect()
        };
        // Mostly nothing to release: look without taking the writer.
        let rows = sqlx::query_as(HELD)
            .bind(runner.as_str())
            .fetch_all(&self.reader)
            .await?;
        if gone(rows).is_empty() {
            return Ok(Vec::new());
        }
        let d = self.dialect;
        let mut tx = self.writer.begin().await?;
        let rows = sqlx::query_as(&format!("{HELD} {}", d.lock_for_update))
            .bind(runner.as_str())
            .fetch_all(&mut *tx)
            .await?;
        let mut out = Vec::new();
        for chunk in gone(rows).chunks(RELEASE_CHUNK) {
            out.extend(release(&mut tx, d, chunk, now).await?);
        }
        tx.commit().await?;
        Ok(out)
    }

    /// On start-up: the coordinator was away, so no runner could heartbeat.
    /// Give every live lease a fresh TTL instead of punishing its runner.
    pub async fn extend_live_leases(&self, now: i64, ttl_ms: u64) -> Result<u64> {
        let done = sqlx::query(
            "UPDATE jobs SET lease_expires_at = $1 WHERE state IN ('leased', 'running')",
        )
        .bind(now + ttl_ms as i64)
        .execute(&self.writer)
        .await?;
        Ok(done.rows_affected())
    }

    /// When the next live lease expires, if any, by the coordinator's clock
    /// (on PostgreSQL, shifted by how far it was from the database's at the
    /// last `expire_leases`).
    pub async fn next_expiry(&self) -> Result<Option<i64>> {
        let at: Option<i64> = sqlx::query_scalar(
            "SELECT MIN(lease_expires_at) FROM jobs WHERE state IN ('leased', 'running')",
        )
        .fetch_one(&self.reader)
        .await?;
        Ok(at.map(|at| at + self.clock_offset.load(Ordering::Relaxed)))
    }
}
