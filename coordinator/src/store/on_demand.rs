//! GitHub Actions on demand: the workspace pools turned on for a repository
//! or an organization, each workflow job seen once (keyed by GitHub's id of
//! it, whether a webhook or a poll saw it), and the webhook deliveries
//! taken (a replay is refused).
//!
//! A workflow job goes `queued` → `minting` (one worker claimed it) →
//! `started` (a just-in-time runner minted, its Drover job submitted) →
//! `finishing` (GitHub says it completed) → `done`; or from `queued`
//! straight to `done` when it completes before it is served, or to
//! `refused` (the budget is spent). An on-demand pool's Actions runners at
//! once are its `minting` rows and its `started` or `finishing` rows whose
//! Drover job has not ended.

use serde_json::json;
use sqlx::Row;

use super::Store;
use super::audit::{Actor, record};
use super::{Role, Surface};
use crate::ids::{MemberId, WorkspaceId};
use crate::store::error::{Error, Result};
use drover_domain::member::Member;

/// A `minting` claim older than this is taken to have died with its
/// coordinator, and the workflow job is queued again.
const MINTING_TIMEOUT_MS: i64 = 120_000;

/// A workspace pool serving a repository's or organization's workflow jobs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OnDemand {
    pub id: String,
    pub workspace_id: String,
    pub workspace_name: String,
    pub runtime_id: String,
    /// The pool's name.
    pub pool: String,
    pub host: String,
    pub owner: String,
    /// `None`: the organization `owner`.
    pub repo: Option<String>,
    pub labels: Vec<String>,
    pub runner_group_id: Option<i64>,
    pub max_runners: i64,
    pub principal_id: String,
    pub created_by: String,
    pub created_at: i64,
}

impl OnDemand {
    /// `owner/repo`, or the organization.
    pub fn target(&self) -> String {
        match &self.repo {
            Some(repo) => format!("{}/{repo}", self.owner),
            None => self.owner.clone(),
        }
    }

    /// The submitter its Drover jobs name.
    pub fn principal(&self) -> Member {
        Member {
            email: self.principal_id.clone(),
            id: MemberId::from_db(self.principal_id.clone()),
            role: Role::Member,
            workspace_id: WorkspaceId::from_db(self.workspace_id.clone()),
            workspace_name: self.workspace_name.clone(),
            token_id: None,
            surface: Surface::Rest,
            ci: false,
        }
    }
}

/// What an on-demand pool is turned on (or changed) with.
#[derive(Debug, Clone)]
pub struct OnDemandSpec {
    pub runtime_id: String,
    pub host: String,
    /// Lower case.
    pub owner: String,
    /// Lower case; `None` for an organization.
    pub repo: Option<String>,
    pub labels: Vec<String>,
    pub runner_group_id: Option<i64>,
    pub max_runners: i64,
}

/// The members row an on-demand target's Drover jobs are submitted by.
pub fn actions_member_id(host: &str, target: &str) -> String {
    if host == drover_domain::model::GITHUB_COM {
        format!("actions:{target}")
    } else {
        format!("actions:{host}/{target}")
    }
}

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

const ON_DEMAND_COLUMNS: &str = "d.id, d.workspace_id, w.name AS ws_name, d.runtime_id, rt.name AS pool, d.host, d.owner, d.repo, d.labels, d.runner_group_id, d.max_runners, d.principal_id, d.created_by, d.created_at";

const ON_DEMAND_FROM: &str = "github_on_demand d JOIN workspaces w ON w.id = d.workspace_id JOIN runtimes rt ON rt.id = d.runtime_id";

fn on_demand_of(row: &sqlx::any::AnyRow) -> Result<OnDemand> {
    let labels: String = row.try_get("labels")?;
    let repo: String = row.try_get("repo")?;
    Ok(OnDemand {
        id: row.try_get("id")?,
        workspace_id: row.try_get("workspace_id")?,
        workspace_name: row.try_get("ws_name")?,
        runtime_id: row.try_get("runtime_id")?,
        pool: row.try_get("pool")?,
        host: row.try_get("host")?,
        owner: row.try_get("owner")?,
        repo: (!repo.is_empty()).then_some(repo),
        labels: serde_json::from_str(&labels)
            .map_err(|e| Error::Corrupt(format!("github_on_demand.labels: {e}")))?,
        runner_group_id: row.try_get("runner_group_id")?,
        max_runners: row.try_get("max_runners")?,
        principal_id: row.try_get("principal_id")?,
        created_by: row.try_get("created_by")?,
        created_at: row.try_get("created_at")?,
    })
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
    /// Turns a workspace pool on for a target (again: changes it), with the
    /// target's principal made on first use; audited.
    pub async fn set_on_demand(
        &self,
        member: &Member,
        spec: &OnDemandSpec,
        now: i64,
    ) -> Result<OnDemand> {
        let target = match &spec.repo {
            Some(repo) => format!("{}/{repo}", spec.owner),
            None => spec.owner.clone(),
        };
        let principal = actions_member_id(&spec.host, &target);
        let taken = || {
            format!(
                "{target} on {} is served on demand by another workspace; a repository or organization is served by one workspace at most",
                spec.host
            )
        };
        let mut tx = self.writer.begin().await?;
        let owner: Option<String> =
            sqlx::query_scalar("SELECT workspace_id FROM members WHERE id = $1")
                .bind(&principal)
                .fetch_optional(&mut *tx)
                .await?;
        match owner {
            Some(w) if w != member.workspace_id.as_str() => return Err(Error::conflict(taken())),
            Some(_) => {}
            None => {
                sqlx::query(
                    "INSERT INTO members (id, workspace_id, email, role, created_at, joined_at, kind) VALUES ($1, $2, $1, 'member', $3, $3, 'actions')",
                )
                .bind(&principal)
                .bind(member.workspace_id.as_str())
                .bind(now)
                .execute(&mut *tx)
                .await
                .map_err(|e| super::on_unique(e, taken))?;
            }
        }
        let labels = serde_json::to_string(&spec.labels).expect("labels as JSON");
        let repo = spec.repo.clone().unwrap_or_default();
        let updated = sqlx::query(
            "UPDATE github_on_demand SET labels = $1, runner_group_id = $2, max_runners = $3 WHERE host = $4 AND owner = $5 AND repo = $6 AND runtime_id = $7 AND workspace_id = $8",
        )
        .bind(&labels)
        .bind(spec.runner_group_id)
        .bind(spec.max_runners)
        .bind(&spec.host)
        .bind(&spec.owner)
        .bind(&repo)
        .bind(&spec.runtime_id)
        .bind(member.workspace_id.as_str())
        .execute(&mut *tx)
        .await?;
        if updated.rows_affected() == 0 {
            sqlx::query(
                "INSERT INTO github_on_demand (id, workspace_id, runtime_id, host, owner, repo, labels, runner_group_id, max_runners, principal_id, created_by, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
            )
            .bind(crate::ids::new_id("god"))
            .bind(member.workspace_id.as_str())
            .bind(&spec.runtime_id)
            .bind(&spec.host)
            .bind(&spec.owner)
            .bind(&repo)
            .bind(&labels)
            .bind(spec.runner_group_id)
            .bind(spec.max_runners)
            .bind(&principal)
            .bind(&member.email)
            .bind(now)
            .execute(&mut *tx)
            .await
            .map_err(|e| super::on_unique(e, taken))?;
        }
        record(
            &mut tx,
            Actor::Member(member),
            "github.on_demand_set",
            &target,
            json!({ "host": spec.host, "pool": spec.runtime_id, "labels": spec.labels,
                "runnerGroupId": spec.runner_group_id, "maxRunners": spec.max_runners }),
            now,
        )
        .await?;
        let sql = format!(
            "SELECT {ON_DEMAND_COLUMNS} FROM {ON_DEMAND_FROM} WHERE d.host = $1 AND d.owner = $2 AND d.repo = $3 AND d.runtime_id = $4"
        );
        let row = sqlx::query(&sql)
            .bind(&spec.host)
            .bind(&spec.owner)
            .bind(&repo)
            .bind(&spec.runtime_id)
            .fetch_one(&mut *tx)
            .await?;
        let saved = on_demand_of(&row)?;
        tx.commit().await?;
        Ok(saved)
    }

    pub async fn on_demand_list(&self, workspace: &WorkspaceId) -> Result<Vec<OnDemand>> {
        let sql = format!(
            "SELECT {ON_DEMAND_COLUMNS} FROM {ON_DEMAND_FROM} WHERE d.workspace_id = $1 ORDER BY d.created_at, d.id"
        );
        let rows = sqlx::query(&sql)
            .bind(workspace.as_str())
            .fetch_all(&self.reader)
            .await?;
        rows.iter().map(on_demand_of).collect()
    }

    /// Turns an on-demand pool off: its workflow jobs not yet served are
    /// forgotten; Drover jobs already submitted run on. Audited.
    pub async fn remove_on_demand(&self, member: &Member, id: &str, now: i64) -> Result<()> {
        let mut tx = self.writer.begin().await?;
        let sql = format!(
            "SELECT {ON_DEMAND_COLUMNS} FROM {ON_DEMAND_FROM} WHERE d.id = $1 AND d.workspace_id = $2"
        );
        let Some(row) = sqlx::query(&sql)
            .bind(id)
            .bind(member.workspace_id.as_str())
            .fetch_optional(&mut *tx)
            .await?
        else {
            return Err(Error::not_found("no such on-demand pool"));
        };
        let gone = on_demand_of(&row)?;
        sqlx::query("DELETE FROM github_workflow_jobs WHERE on_demand_id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        sqlx::query("DELETE FROM github_on_demand WHERE id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        record(
            &mut tx,
            Actor::Member(member),
            "github.on_demand_removed",
            &gone.target(),
            json!({ "host": gone.host, "pool": gone.runtime_id, "id": id }),
            now,
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// The on-demand pools serving repository `owner/repo` on `host`:
    /// turned on for it, or for its organization; oldest first.
    pub async fn on_demand_for(
        &self,
        host: &str,
        owner: &str,
        repo: &str,
    ) -> Result<Vec<OnDemand>> {
        let sql = format!(
            "SELECT {ON_DEMAND_COLUMNS} FROM {ON_DEMAND_FROM} WHERE d.host = $1 AND d.owner = $2 AND (d.repo = $3 OR d.repo = '') ORDER BY d.created_at, d.id"
        );
        let rows = sqlx::query(&sql)
            .bind(host)
            .bind(owner.to_ascii_lowercase())
            .bind(repo.to_ascii_lowercase())
            .fetch_all(&self.writer)
            .await?;
        rows.iter().map(on_demand_of).collect()
    }

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
