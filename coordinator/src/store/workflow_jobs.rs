//! Each workflow job an on-demand pool sees, once (keyed by GitHub's id of
//! it, whether a webhook or a poll saw it), through its states (see
//! `on_demand.rs`), and the webhook deliveries taken (a replay is refused).

use serde_json::json;
use sqlx::Row;

use super::Store;
use super::audit::{Actor, record};
use super::on_demand::{ON_DEMAND_COLUMNS, ON_DEMAND_FROM, OnDemand, on_demand_of};
use crate::store::error::Result;

/// A `minting` claim older than this is taken to have died with its
/// coordinator, and the workflow job is queued again.
const MINTING_TIMEOUT_MS: i64 = 120_000;

/// A workflow job a worker took on: to serve, or to finish.
#[derive(Debug, Clone)]
pub struct WorkflowJobRow {
    pub host: String,
    pub workflow_job_id: i64,
    pub job_id: Option<String>,
    pub runner_id: Option<i64>,
    pub runner_name: Option<String>,
    /// The runner GitHub says ran it, once it completed.
    pub ran_on: Option<String>,
}

fn workflow_job_of(row: &sqlx::any::AnyRow) -> Result<WorkflowJobRow> {
    Ok(WorkflowJobRow {
        host: row.try_get("host")?,
        workflow_job_id: row.try_get("workflow_job_id")?,
        job_id: row.try_get("job_id")?,
        runner_id: row.try_get("runner_id")?,
        runner_name: row.try_get("runner_name")?,
        ran_on: row.try_get("ran_on")?,
    })
}

impl Store {
    /// Takes a webhook delivery; false when it was taken before (a replay).
    pub async fn take_delivery(&self, delivery: &str, now: i64) -> Result<bool> {
        let taken = sqlx::query(
            "INSERT INTO github_deliveries (delivery, received_at) VALUES ($1, $2) ON CONFLICT (delivery) DO NOTHING",
        )
        .bind(delivery)
        .bind(now)
        .execute(&self.writer)
        .await?;
        Ok(taken.rows_affected() == 1)
    }

    /// Records a queued workflow job for `on_demand`; false when it was
    /// seen before (by a webhook or a poll).
    pub async fn workflow_job_queued(
        &self,
        host: &str,
        workflow_job_id: i64,
        on_demand: &str,
        now: i64,
    ) -> Result<bool> {
        let added = sqlx::query(
            "INSERT INTO github_workflow_jobs (host, workflow_job_id, on_demand_id, state, created_at, updated_at) VALUES ($1, $2, $3, 'queued', $4, $4) ON CONFLICT (host, workflow_job_id) DO NOTHING",
        )
        .bind(host)
        .bind(workflow_job_id)
        .bind(on_demand)
        .bind(now)
        .execute(&self.writer)
        .await?;
        Ok(added.rows_affected() == 1)
    }

    /// GitHub says the workflow job completed (ran on `ran_on`, if on a
    /// runner): one not served yet is done; one served (or being served)
    /// is to finish.
    /// False when no on-demand pool knows it.
    pub async fn workflow_job_completed(
        &self,
        host: &str,
        workflow_job_id: i64,
        ran_on: Option<&str>,
        now: i64,
    ) -> Result<bool> {
        let changed = sqlx::query(
            "UPDATE github_workflow_jobs SET state = CASE WHEN state = 'queued' THEN 'done' ELSE 'finishing' END, ran_on = $3, updated_at = $4 WHERE host = $1 AND workflow_job_id = $2 AND state IN ('queued', 'minting', 'started')",
        )
        .bind(host)
        .bind(workflow_job_id)
        .bind(ran_on)
        .bind(now)
        .execute(&self.writer)
        .await?;
        Ok(changed.rows_affected() == 1)
    }

    /// Claims workflow jobs to serve, oldest first, as many per on-demand
    /// pool as it has room for under its cap: each with its pool.
    pub async fn claim_workflow_jobs(&self, now: i64) -> Result<Vec<(OnDemand, WorkflowJobRow)>> {
        sqlx::query(
            "UPDATE github_workflow_jobs SET state = 'queued', updated_at = $1 WHERE state = 'minting' AND updated_at < $2",
        )
        .bind(now)
        .bind(now - MINTING_TIMEOUT_MS)
        .execute(&self.writer)
        .await?;
        let sql = format!(
            "SELECT {ON_DEMAND_COLUMNS},
                    (SELECT COUNT(*) FROM github_workflow_jobs g LEFT JOIN jobs j ON j.id = g.job_id
                     WHERE g.on_demand_id = d.id AND (g.state = 'minting'
                       OR (g.state IN ('started', 'finishing') AND j.state IN ('queued', 'leased', 'running')))) AS live
             FROM {ON_DEMAND_FROM}
             WHERE EXISTS (SELECT 1 FROM github_workflow_jobs g WHERE g.on_demand_id = d.id AND g.state = 'queued')"
        );
        let pools = sqlx::query(&sql).fetch_all(&self.writer).await?;
        let mut claimed = Vec::new();
        for row in &pools {
            let pool = on_demand_of(row)?;
            let room = pool.max_runners - row.try_get::<i64, _>("live")?;
            if room <= 0 {
                continue;
            }
            let rows = sqlx::query(
                "UPDATE github_workflow_jobs SET state = 'minting', updated_at = $1
                 WHERE state = 'queued' AND on_demand_id = $2 AND workflow_job_id IN
                   (SELECT workflow_job_id FROM github_workflow_jobs
                    WHERE on_demand_id = $2 AND state = 'queued' ORDER BY created_at, workflow_job_id LIMIT $3)
                 RETURNING host, workflow_job_id, job_id, runner_id, runner_name, ran_on",
            )
            .bind(now)
            .bind(&pool.id)
            .bind(room)
            .fetch_all(&self.writer)
            .await?;
            for r in &rows {
                claimed.push((pool.clone(), workflow_job_of(r)?));
            }
        }
        Ok(claimed)
    }

    /// A claimed workflow job's just-in-time runner and Drover job; audited
    /// (the principal acts).
    #[allow(clippy::too_many_arguments)]
    pub async fn workflow_job_started(
        &self,
        pool: &OnDemand,
        workflow_job_id: i64,
        job_id: &str,
        runner_id: i64,
        runner_name: &str,
        now: i64,
    ) -> Result<()> {
        let mut tx = self.writer.begin().await?;
        sqlx::query(
            "UPDATE github_workflow_jobs SET state = CASE WHEN state = 'minting' THEN 'started' ELSE 'finishing' END, job_id = $3, runner_id = $4, runner_name = $5, updated_at = $6 WHERE host = $1 AND workflow_job_id = $2",
        )
        .bind(&pool.host)
        .bind(workflow_job_id)
        .bind(job_id)
        .bind(runner_id)
        .bind(runner_name)
        .bind(now)
        .execute(&mut *tx)
        .await?;
        record(
            &mut tx,
            Actor::Member(&pool.principal()),
            "github.jit_runner_minted",
            &pool.target(),
            json!({ "host": pool.host, "workflowJobId": workflow_job_id, "runner": runner_name,
                "runnerId": runner_id, "job": job_id, "pool": pool.runtime_id }),
            now,
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// A claimed workflow job not served: `refused` for good (`why`), or
    /// queued again to retry.
    pub async fn workflow_job_not_started(
        &self,
        host: &str,
        workflow_job_id: i64,
        why: &str,
        for_good: bool,
        now: i64,
    ) -> Result<()> {
        sqlx::query(
            "UPDATE github_workflow_jobs SET state = CASE WHEN state <> 'minting' THEN 'done' WHEN $3 = 1 THEN 'refused' ELSE 'queued' END, error = $4, updated_at = $5 WHERE host = $1 AND workflow_job_id = $2",
        )
        .bind(host)
        .bind(workflow_job_id)
        .bind(i64::from(for_good))
        .bind(why)
        .bind(now)
        .execute(&self.writer)
        .await?;
        Ok(())
    }

    /// Served workflow jobs GitHub says completed, each with its pool.
    pub async fn workflow_jobs_to_finish(&self) -> Result<Vec<(OnDemand, WorkflowJobRow)>> {
        let sql = format!(
            "SELECT {ON_DEMAND_COLUMNS}, g.host AS g_host, g.workflow_job_id, g.job_id, g.runner_id, g.runner_name, g.ran_on
             FROM {ON_DEMAND_FROM} JOIN github_workflow_jobs g ON g.on_demand_id = d.id
             WHERE g.state = 'finishing' AND g.runner_id IS NOT NULL ORDER BY g.updated_at LIMIT 100"
        );
        let rows = sqlx::query(&sql).fetch_all(&self.writer).await?;
        rows.iter()
            .map(|r| {
                let mut wf = workflow_job_of(r)?;
                wf.host = r.try_get("g_host")?;
                Ok((on_demand_of(r)?, wf))
            })
            .collect()
    }

    pub async fn workflow_job_done(
        &self,
        host: &str,
        workflow_job_id: i64,
        now: i64,
    ) -> Result<()> {
        sqlx::query(
            "UPDATE github_workflow_jobs SET state = 'done', updated_at = $3 WHERE host = $1 AND workflow_job_id = $2",
        )
        .bind(host)
        .bind(workflow_job_id)
        .bind(now)
        .execute(&self.writer)
        .await?;
        Ok(())
    }
}
