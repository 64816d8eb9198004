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

/// A served workflow job whose Drover job ended this long ago while GitHub
/// has not said the workflow job completed is looked at again: its runner
/// may have gone before the Actions runner took a job (a laptop closed).
const ORPHAN_GRACE_MS: i64 = 5_000;

/// A workflow job whose serving failed for a passing reason (GitHub
/// unreachable, a pool with no runner yet) is tried again after 2 s, then
/// 4, 8, … up to 5 minutes (by its `tries`).
const RETRY_AFTER_MS: &str = "CASE WHEN tries <= 1 THEN 2000 WHEN tries = 2 THEN 4000 WHEN tries = 3 THEN 8000 WHEN tries = 4 THEN 16000 WHEN tries = 5 THEN 32000 WHEN tries = 6 THEN 64000 WHEN tries = 7 THEN 128000 ELSE 300000 END";

/// A refusal GitHub could not be told of is told again after this long.
const TELL_AGAIN_MS: i64 = 30_000;

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
    pub origin: Origin,
    /// Times it was claimed to be served.
    pub tries: i64,
    /// Why it was last not served, or why it is refused.
    pub error: Option<String>,
}

/// Where a workflow job is on GitHub.
#[derive(Debug, Clone, Default)]
pub struct Origin {
    /// `owner/name`, as GitHub spells it.
    pub repository: String,
    pub run_id: i64,
    /// The commit it runs on.
    pub head_sha: String,
}

/// The columns `workflow_job_of` reads, of `github_workflow_jobs` as `g`.
const WORKFLOW_JOB_COLUMNS: &str = "g.host AS g_host, g.workflow_job_id, g.job_id, g.runner_id, g.runner_name, g.ran_on, g.repository, g.run_id, g.head_sha, g.tries, g.error";

fn workflow_job_of(row: &sqlx::any::AnyRow) -> Result<WorkflowJobRow> {
    Ok(WorkflowJobRow {
        host: row.try_get("g_host")?,
        workflow_job_id: row.try_get("workflow_job_id")?,
        job_id: row.try_get("job_id")?,
        runner_id: row.try_get("runner_id")?,
        runner_name: row.try_get("runner_name")?,
        ran_on: row.try_get("ran_on")?,
        origin: Origin {
            repository: row.try_get("repository")?,
            run_id: row.try_get("run_id")?,
            head_sha: row.try_get("head_sha")?,
        },
        tries: row.try_get("tries")?,
        error: row.try_get("error")?,
    })
}

/// Each with its pool: `sql` selects `ON_DEMAND_COLUMNS` and `WORKFLOW_JOB_COLUMNS`.
fn with_pools(rows: &[sqlx::any::AnyRow]) -> Result<Vec<(OnDemand, WorkflowJobRow)>> {
    rows.iter()
        .map(|r| Ok((on_demand_of(r)?, workflow_job_of(r)?)))
        .collect()
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
        origin: &Origin,
        on_demand: &str,
        now: i64,
    ) -> Result<bool> {
        let added = sqlx::query(
            "INSERT INTO github_workflow_jobs (host, workflow_job_id, on_demand_id, state, created_at, updated_at, repository, run_id, head_sha) VALUES ($1, $2, $3, 'queued', $4, $4, $5, $6, $7) ON CONFLICT (host, workflow_job_id) DO NOTHING",
        )
        .bind(host)
        .bind(workflow_job_id)
        .bind(on_demand)
        .bind(now)
        .bind(&origin.repository)
        .bind(origin.run_id)
        .bind(&origin.head_sha)
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
        // Claims whose coordinator died: minting queued again, closing
        // finishing again.
        sqlx::query(
            "UPDATE github_workflow_jobs SET state = CASE WHEN state = 'minting' THEN 'queued' ELSE 'finishing' END, updated_at = $1
             WHERE state IN ('minting', 'closing') AND updated_at < $2",
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
            let sql = format!(
                "UPDATE github_workflow_jobs SET state = 'minting', tries = tries + 1, updated_at = $1
                 WHERE state = 'queued' AND on_demand_id = $2 AND workflow_job_id IN
                   (SELECT workflow_job_id FROM github_workflow_jobs
                    WHERE on_demand_id = $2 AND state = 'queued' AND (error IS NULL OR updated_at <= $1 - {RETRY_AFTER_MS})
                    ORDER BY created_at, workflow_job_id LIMIT $3)
                 RETURNING host AS g_host, workflow_job_id, job_id, runner_id, runner_name, ran_on, repository, run_id, head_sha, tries, error"
            );
            let rows = sqlx::query(&sql)
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

    /// A claimed workflow job not served: refused for good (`why`; GitHub
    /// is to be told: `refusing`), or queued again to retry.
    pub async fn workflow_job_not_started(
        &self,
        host: &str,
        workflow_job_id: i64,
        why: &str,
        for_good: bool,
        now: i64,
    ) -> Result<()> {
        sqlx::query(
            "UPDATE github_workflow_jobs SET state = CASE WHEN state <> 'minting' THEN 'done' WHEN $3 = 1 THEN 'refusing' ELSE 'queued' END, error = $4, updated_at = $5 WHERE host = $1 AND workflow_job_id = $2",
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
        self.workflow_jobs_in("g.state = 'finishing' AND g.runner_id IS NOT NULL")
            .await
    }

    /// Workflow jobs a spent budget refused that GitHub is still to be told
    /// of, each with its pool.
    pub async fn workflow_jobs_to_refuse(
        &self,
        now: i64,
    ) -> Result<Vec<(OnDemand, WorkflowJobRow)>> {
        self.workflow_jobs_in(&format!("g.state = 'refusing' AND g.updated_at <= {now}"))
            .await
    }

    /// GitHub could not be told of a refusal: told again later (`updated_at`
    /// of a `refusing` row is when to try next).
    pub async fn workflow_job_tell_later(
        &self,
        host: &str,
        workflow_job_id: i64,
        now: i64,
    ) -> Result<()> {
        sqlx::query(
            "UPDATE github_workflow_jobs SET updated_at = $3 WHERE host = $1 AND workflow_job_id = $2 AND state = 'refusing'",
        )
        .bind(host)
        .bind(workflow_job_id)
        .bind(now + TELL_AGAIN_MS)
        .execute(&self.writer)
        .await?;
        Ok(())
    }

    /// A finishing workflow job's unused JIT runner is this replica's to
    /// delete (`closing`); false when another took it, or it changed.
    pub async fn workflow_job_closing(&self, wf: &WorkflowJobRow, now: i64) -> Result<bool> {
        let claimed = sqlx::query(
            "UPDATE github_workflow_jobs SET state = 'closing', updated_at = $3
             WHERE host = $1 AND workflow_job_id = $2 AND state = 'finishing' AND runner_id = $4",
        )
        .bind(&wf.host)
        .bind(wf.workflow_job_id)
        .bind(now)
        .bind(wf.runner_id)
        .execute(&self.writer)
        .await?;
        Ok(claimed.rows_affected() == 1)
    }

    /// Deleting a closing workflow job's runner failed: finishing again.
    pub async fn workflow_job_reopened(
        &self,
        host: &str,
        workflow_job_id: i64,
        now: i64,
    ) -> Result<()> {
        self.move_workflow_job(host, workflow_job_id, Some("closing"), "finishing", now)
            .await
    }

    /// The workflow jobs of on-demand pools GitHub has not said are over
    /// (polled when webhooks do not arrive), each with its pool.
    pub async fn workflow_jobs_live(&self) -> Result<Vec<(OnDemand, WorkflowJobRow)>> {
        self.workflow_jobs_in("g.state IN ('queued', 'minting', 'started') AND g.repository <> ''")
            .await
    }

    async fn workflow_jobs_in(&self, filter: &str) -> Result<Vec<(OnDemand, WorkflowJobRow)>> {
        let sql = format!(
            "SELECT {ON_DEMAND_COLUMNS}, {WORKFLOW_JOB_COLUMNS}
             FROM {ON_DEMAND_FROM} JOIN github_workflow_jobs g ON g.on_demand_id = d.id
             WHERE {filter} ORDER BY g.updated_at LIMIT 100"
        );
        with_pools(&sqlx::query(&sql).fetch_all(&self.writer).await?)
    }

    /// Workflow job `wf` completed on `ran_on`, the JIT runner another live
    /// workflow job of its pool holds (GitHub gives a queued job to any
    /// idle runner whose labels fit): that one now holds `wf`'s runner and
    /// Drover job instead, and `wf` is done. False when no live workflow
    /// job holds `ran_on`; true too when `wf` was handled meanwhile.
    pub async fn workflow_job_handed_over(
        &self,
        on_demand: &str,
        wf: &WorkflowJobRow,
        ran_on: &str,
        now: i64,
    ) -> Result<bool> {
        let mut tx = self.writer.begin().await?;
        // Still this one's to finish, holding what it held when read (not
        // handled meanwhile by another replica).
        let mine = sqlx::query(
            "UPDATE github_workflow_jobs SET state = 'done', updated_at = $3
             WHERE host = $1 AND workflow_job_id = $2 AND state = 'finishing' AND runner_id = $4",
        )
        .bind(&wf.host)
        .bind(wf.workflow_job_id)
        .bind(now)
        .bind(wf.runner_id)
        .execute(&mut *tx)
        .await?;
        if mine.rows_affected() == 0 {
            return Ok(true);
        }
        let moved = sqlx::query(
            "UPDATE github_workflow_jobs SET job_id = $1, runner_id = $2, runner_name = $3, updated_at = $4
             WHERE on_demand_id = $5 AND runner_name = $6 AND state IN ('started', 'finishing')
               AND NOT (host = $7 AND workflow_job_id = $8)",
        )
        .bind(&wf.job_id)
        .bind(wf.runner_id)
        .bind(&wf.runner_name)
        .bind(now)
        .bind(on_demand)
        .bind(ran_on)
        .bind(&wf.host)
        .bind(wf.workflow_job_id)
        .execute(&mut *tx)
        .await?;
        if moved.rows_affected() == 0 {
            // Rolled back: still finishing.
            return Ok(false);
        }
        tx.commit().await?;
        Ok(true)
    }

    /// Served workflow jobs whose Drover job ended a while ago, GitHub not
    /// having said they completed (nor a handover given them a runner
    /// since), each with its pool.
    pub async fn workflow_jobs_orphaned(
        &self,
        now: i64,
    ) -> Result<Vec<(OnDemand, WorkflowJobRow)>> {
        let cutoff = now - ORPHAN_GRACE_MS;
        self.workflow_jobs_in(&format!(
            "g.state = 'started' AND g.updated_at < {cutoff} AND EXISTS (SELECT 1 FROM jobs j WHERE j.id = g.job_id
               AND j.state IN ('succeeded', 'failed', 'cancelled', 'timed_out', 'lost') AND j.finished_at < {cutoff})"
        ))
        .await
    }

    /// A served workflow job GitHub still has queued, its runner gone: to be
    /// served again (`why` kept), refused (`refuse`: GitHub to be told
    /// `why`), or only looked at later (`requeue` false).
    pub async fn workflow_job_orphan_seen(
        &self,
        host: &str,
        workflow_job_id: i64,
        requeue: bool,
        refuse: bool,
        why: &str,
        now: i64,
    ) -> Result<()> {
        sqlx::query(
            "UPDATE github_workflow_jobs SET state = CASE WHEN $3 = 1 AND $6 = 1 THEN 'refusing' WHEN $3 = 1 THEN 'queued' ELSE state END,
                    job_id = CASE WHEN $3 = 1 THEN NULL ELSE job_id END,
                    runner_id = CASE WHEN $3 = 1 THEN NULL ELSE runner_id END,
                    runner_name = CASE WHEN $3 = 1 THEN NULL ELSE runner_name END,
                    error = $4, updated_at = $5
             WHERE host = $1 AND workflow_job_id = $2 AND state = 'started'",
        )
        .bind(host)
        .bind(workflow_job_id)
        .bind(i64::from(requeue))
        .bind(why)
        .bind(now)
        .bind(i64::from(refuse))
        .execute(&self.writer)
        .await?;
        Ok(())
    }

    /// GitHub was told of a refused workflow job.
    pub async fn workflow_job_refused(
        &self,
        host: &str,
        workflow_job_id: i64,
        now: i64,
    ) -> Result<()> {
        self.move_workflow_job(host, workflow_job_id, Some("refusing"), "refused", now)
            .await
    }

    pub async fn workflow_job_done(
        &self,
        host: &str,
        workflow_job_id: i64,
        now: i64,
    ) -> Result<()> {
        self.move_workflow_job(host, workflow_job_id, None, "done", now)
            .await
    }

    /// Moves a workflow job to state `to` (only from `from`, if given).
    async fn move_workflow_job(
        &self,
        host: &str,
        workflow_job_id: i64,
        from: Option<&str>,
        to: &str,
        now: i64,
    ) -> Result<()> {
        sqlx::query(
            "UPDATE github_workflow_jobs SET state = $3, updated_at = $4
             WHERE host = $1 AND workflow_job_id = $2 AND ($5 IS NULL OR state = $5)",
        )
        .bind(host)
        .bind(workflow_job_id)
        .bind(to)
        .bind(now)
        .bind(from)
        .execute(&self.writer)
        .await?;
        Ok(())
    }
}
