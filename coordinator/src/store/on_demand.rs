//! GitHub Actions on demand: the workspace pools turned on for a repository
//! or an organization (each workflow job and webhook delivery they see:
//! `workflow_jobs.rs`).
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

pub(super) const ON_DEMAND_COLUMNS: &str = "d.id, d.workspace_id, w.name AS ws_name, d.runtime_id, rt.name AS pool, d.host, d.owner, d.repo, d.labels, d.runner_group_id, d.max_runners, d.principal_id, d.created_by, d.created_at";

pub(super) const ON_DEMAND_FROM: &str = "github_on_demand d JOIN workspaces w ON w.id = d.workspace_id JOIN runtimes rt ON rt.id = d.runtime_id";

pub(super) fn on_demand_of(row: &sqlx::any::AnyRow) -> Result<OnDemand> {
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

    /// Every workspace's on-demand pools (the poller's round).
    pub async fn on_demand_all(&self) -> Result<Vec<OnDemand>> {
        let sql =
            format!("SELECT {ON_DEMAND_COLUMNS} FROM {ON_DEMAND_FROM} ORDER BY d.created_at, d.id");
        let rows = sqlx::query(&sql).fetch_all(&self.reader).await?;
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
}
