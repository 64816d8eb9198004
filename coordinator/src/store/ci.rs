//! CI links: per repository, where its workflow runs and where its Drover
//! jobs go; and the CI principal a linked repository's OIDC token becomes
//! (a members row of kind `ci`, id `ci:<owner>/<repo>`, role member).

use serde_json::json;
use sqlx::Row;

use super::Store;
use super::audit::{Actor, record};
use super::identity::Member;
use super::{Role, Surface};
use crate::error::{Error, Result};
use crate::ids::{MemberId, WorkspaceId};

/// A repository linked to a workspace for CI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CiLink {
    pub host: String,
    /// `owner/name`, lower case.
    pub repository: String,
    pub runs_on: Option<Vec<String>>,
    pub runtime: Option<String>,
    pub updated_at: i64,
}

fn link_of(row: &sqlx::any::AnyRow) -> Result<CiLink> {
    let runs_on: Option<String> = row.try_get("runs_on")?;
    Ok(CiLink {
        host: row.try_get("host")?,
        repository: row.try_get("repository")?,
        runs_on: runs_on
            .map(|j| serde_json::from_str(&j))
            .transpose()
            .map_err(|e| Error::Corrupt(format!("ci_links.runs_on: {e}")))?,
        runtime: row.try_get("runtime")?,
        updated_at: row.try_get("updated_at")?,
    })
}

/// The CI principal's member id for `repository` on `host`.
pub fn ci_member_id(host: &str, repository: &str) -> String {
    if host == crate::github::GITHUB_COM {
        format!("ci:{repository}")
    } else {
        format!("ci:{host}/{repository}")
    }
}

const LINK_COLUMNS: &str = "host, repository, runs_on, runtime, updated_at";

/// What the OIDC token proved and the link it matched.
pub enum CiLookup {
    Principal(Member),
    /// No workspace links that repository.
    NotLinked,
    /// The repository's id is not the one the link pinned.
    OtherRepository,
}

impl Store {
    /// Links (or re-links) `repository` on `host` to the admin's
    /// workspace; a repository linked to another workspace is refused.
    pub async fn set_ci_link(
        &self,
        member: &Member,
        host: &str,
        repository: &str,
        runs_on: Option<&[String]>,
        runtime: Option<&str>,
        now: i64,
    ) -> Result<CiLink> {
        let repository = repository.to_ascii_lowercase();
        let member_id = ci_member_id(host, &repository);
        let taken = || {
            Error::conflict(format!(
                "{repository} on {host} is linked to another workspace (or was, and its CI history is kept there); a repository is linked to one workspace at most"
            ))
        };
        let mut tx = self.writer.begin().await?;
        let principal = sqlx::query("SELECT workspace_id FROM members WHERE id = $1")
            .bind(&member_id)
            .fetch_optional(&mut *tx)
            .await?;
        match principal {
            Some(row)
                if row.try_get::<String, _>("workspace_id")? != member.workspace_id.as_str() =>
            {
                return Err(taken());
            }
            Some(_) => {}
            None => {
                sqlx::query(
                    "INSERT INTO members (id, workspace_id, email, role, created_at, joined_at, kind) VALUES ($1, $2, $1, 'member', $3, $3, 'ci')",
                )
                .bind(&member_id)
                .bind(member.workspace_id.as_str())
                .bind(now)
                .execute(&mut *tx)
                .await
                .map_err(|e| super::on_unique(e, || taken().to_string()))?;
            }
        }
        let runs_on_json = runs_on.map(|r| serde_json::to_string(r).expect("labels as JSON"));
        let updated = sqlx::query(
            "UPDATE ci_links SET runs_on = $1, runtime = $2, updated_at = $3 WHERE host = $4 AND repository = $5 AND workspace_id = $6",
        )
        .bind(runs_on_json.clone())
        .bind(runtime.map(str::to_owned))
        .bind(now)
        .bind(host)
        .bind(&repository)
        .bind(member.workspace_id.as_str())
        .execute(&mut *tx)
        .await?;
        if updated.rows_affected() == 0 {
            sqlx::query(
                "INSERT INTO ci_links (host, repository, workspace_id, member_id, runs_on, runtime, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7)",
            )
            .bind(host)
            .bind(&repository)
            .bind(member.workspace_id.as_str())
            .bind(&member_id)
            .bind(runs_on_json)
            .bind(runtime.map(str::to_owned))
            .bind(now)
            .execute(&mut *tx)
            .await
            .map_err(|e| super::on_unique(e, || taken().to_string()))?;
        }
        record(
            &mut tx,
            Actor::Member(member),
            "ci_link.set",
            &repository,
            json!({ "host": host, "runsOn": runs_on, "runtime": runtime }),
            now,
        )
        .await?;
        let sql =
            format!("SELECT {LINK_COLUMNS} FROM ci_links WHERE host = $1 AND repository = $2");
        let row = sqlx::query(&sql)
            .bind(host)
            .bind(&repository)
            .fetch_one(&mut *tx)
            .await?;
        tx.commit().await?;
        link_of(&row)
    }

    /// The workspace's CI links, by repository.
    pub async fn ci_links(&self, workspace: &WorkspaceId) -> Result<Vec<CiLink>> {
        let sql = format!(
            "SELECT {LINK_COLUMNS} FROM ci_links WHERE workspace_id = $1 ORDER BY repository, host"
        );
        let rows = sqlx::query(&sql)
            .bind(workspace.as_str())
            .fetch_all(&self.reader)
            .await?;
        rows.iter().map(link_of).collect()
    }

    /// One of the workspace's CI links.
    pub async fn ci_link(
        &self,
        workspace: &WorkspaceId,
        host: &str,
        repository: &str,
    ) -> Result<Option<CiLink>> {
        let sql = format!(
            "SELECT {LINK_COLUMNS} FROM ci_links WHERE workspace_id = $1 AND host = $2 AND repository = $3"
        );
        let row = sqlx::query(&sql)
            .bind(workspace.as_str())
            .bind(host)
            .bind(repository.to_ascii_lowercase())
            .fetch_optional(&self.reader)
            .await?;
        row.as_ref().map(link_of).transpose()
    }

    /// Unlinks a repository: its OIDC tokens stop working at once. Its
    /// jobs keep naming it.
    pub async fn remove_ci_link(
        &self,
        member: &Member,
        host: &str,
        repository: &str,
        now: i64,
    ) -> Result<()> {
        let repository = repository.to_ascii_lowercase();
        let mut tx = self.writer.begin().await?;
        let done = sqlx::query(
            "DELETE FROM ci_links WHERE workspace_id = $1 AND host = $2 AND repository = $3",
        )
        .bind(member.workspace_id.as_str())
        .bind(host)
        .bind(&repository)
        .execute(&mut *tx)
        .await?;
        if done.rows_affected() == 0 {
            return Err(Error::not_found(format!(
                "{repository} on {host} is not linked"
            )));
        }
        record(
            &mut tx,
            Actor::Member(member),
            "ci_link.removed",
            &repository,
            json!({ "host": host }),
            now,
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// The CI principal of a verified OIDC token for `repository` (id
    /// `repository_id`) on `host`. The first token pins the id.
    pub async fn ci_principal(
        &self,
        host: &str,
        repository: &str,
        repository_id: i64,
    ) -> Result<CiLookup> {
        let repository = repository.to_ascii_lowercase();
        let row = sqlx::query(
            "SELECT l.member_id, l.repository_id, w.id AS ws_id, w.name AS ws_name
             FROM ci_links l JOIN workspaces w ON w.id = l.workspace_id
             WHERE l.host = $1 AND l.repository = $2",
        )
        .bind(host)
        .bind(&repository)
        .fetch_optional(&self.writer)
        .await?;
        let Some(row) = row else {
            return Ok(CiLookup::NotLinked);
        };
        match row.try_get::<Option<i64>, _>("repository_id")? {
            Some(pinned) if pinned != repository_id => return Ok(CiLookup::OtherRepository),
            Some(_) => {}
            None => {
                sqlx::query("UPDATE ci_links SET repository_id = $1 WHERE host = $2 AND repository = $3 AND repository_id IS NULL")
                    .bind(repository_id)
                    .bind(host)
                    .bind(&repository)
                    .execute(&self.writer)
                    .await?;
            }
        }
        let id: String = row.try_get("member_id")?;
        Ok(CiLookup::Principal(Member {
            email: id.clone(),
            id: MemberId::from_db(id),
            role: Role::Member,
            workspace_id: WorkspaceId::from_db(row.try_get("ws_id")?),
            workspace_name: row.try_get("ws_name")?,
            token_id: None,
            surface: Surface::Rest,
            ci: true,
        }))
    }
}
