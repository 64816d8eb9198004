//! GitHub: the App's installations linked to workspaces, the one-time
//! states of install links, and the GitHub runners registered beside
//! workspace runners. No GitHub token is stored here.

use crate::store::error::Kind;
use serde_json::json;
use sqlx::Row;

use super::Store;
use super::audit::{Actor, record};
use super::identity::member_of;
use crate::ids::{Secret, TokenKind, WorkspaceId};
use crate::store::error::{Error, Result};
use drover_domain::member::Member;

/// How long an install link's `state` works.
pub const LINK_STATE_TTL_MS: i64 = 10 * 60 * 1000;

/// An installation linked to a workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Installation {
    pub host: String,
    pub id: i64,
    pub account: String,
    pub account_type: String,
    pub linked_at: i64,
}

/// Who started an install link, and for which host.
#[derive(Debug, Clone)]
pub struct LinkState {
    pub member: Member,
    pub host: String,
}

/// A GitHub runner registered beside workspace runner `runner_id`.
#[derive(Debug, Clone)]
pub struct GithubRunnerRow {
    pub runner_id: String,
    pub workspace_id: String,
    pub host: String,
    pub owner: String,
    /// `None`: an organization-level runner.
    pub repo: Option<String>,
    pub name: String,
}

fn installation_of(row: &sqlx::any::AnyRow) -> Result<Installation> {
    Ok(Installation {
        host: row.try_get("host")?,
        id: row.try_get("installation_id")?,
        account: row.try_get("account")?,
        account_type: row.try_get("account_type")?,
        linked_at: row.try_get("linked_at")?,
    })
}

fn github_runner_of(row: &sqlx::any::AnyRow) -> Result<GithubRunnerRow> {
    Ok(GithubRunnerRow {
        runner_id: row.try_get("runner_id")?,
        workspace_id: row.try_get("workspace_id")?,
        host: row.try_get("host")?,
        owner: row.try_get("owner")?,
        repo: row.try_get("repo")?,
        name: row.try_get("name")?,
    })
}

const GITHUB_RUNNER_COLUMNS: &str = "runner_id, workspace_id, host, owner, repo, name";

impl Store {
    /// A one-time `state` for an install link on `host`, bound to the
    /// member's workspace; only its hash is kept.
    pub async fn create_link_state(
        &self,
        member: &Member,
        host: &str,
        now: i64,
    ) -> Result<(Secret, i64)> {
        // A pairing-shaped secret: 256 bits, URL-safe.
        let state = Secret::generate(TokenKind::Pairing);
        let expires_at = now + LINK_STATE_TTL_MS;
        let mut tx = self.writer.begin().await?;
        // States a day past their expiry are of no more use to anyone.
        sqlx::query("DELETE FROM github_link_states WHERE expires_at < $1")
            .bind(now - 24 * 3600 * 1000)
            .execute(&mut *tx)
            .await?;
        sqlx::query(
            "INSERT INTO github_link_states (hash, workspace_id, member_id, host, expires_at) VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(state.hash())
        .bind(member.workspace_id.as_str())
        .bind(member.id.as_str())
        .bind(host)
        .bind(expires_at)
        .execute(&mut *tx)
        .await?;
        record(
            &mut tx,
            Actor::Member(member),
            "github.install_link_created",
            host,
            json!({ "expiresAt": expires_at }),
            now,
        )
        .await?;
        tx.commit().await?;
        Ok((state, expires_at))
    }

    /// Uses up `state`: who made it and for which host. A state works once,
    /// for ten minutes, and only while its admin is still an admin.
    pub async fn take_link_state(&self, state: &str, now: i64) -> Result<LinkState> {
        let unknown =
            || Error::not_found("no such install link state; start again from the install link");
        let state = Secret::parse(TokenKind::Pairing, state).ok_or_else(unknown)?;
        let mut tx = self.writer.begin().await?;
        let row = sqlx::query(
            "SELECT s.expires_at, s.used_at, s.host, m.id, m.email, m.role, m.removed_at,
                    w.id AS ws_id, w.name AS ws_name, CAST(NULL AS TEXT) AS token_id
             FROM github_link_states s JOIN members m ON m.id = s.member_id
             JOIN workspaces w ON w.id = s.workspace_id
             WHERE s.hash = $1",
        )
        .bind(state.hash())
        .fetch_optional(&mut *tx)
        .await?
        .ok_or_else(unknown)?;
        if row.try_get::<Option<i64>, _>("used_at")?.is_some() {
            return Err(Error::refused(
                Kind::StateUsed,
                "this install link was already used; ask for a new one",
            ));
        }
        if row.try_get::<i64, _>("expires_at")? < now {
            return Err(Error::refused(
                Kind::StateExpired,
                "this install link is older than its ten minutes; ask for a new one",
            ));
        }
        let done = sqlx::query(
            "UPDATE github_link_states SET used_at = $1 WHERE hash = $2 AND used_at IS NULL",
        )
        .bind(now)
        .bind(state.hash())
        .execute(&mut *tx)
        .await?;
        if done.rows_affected() == 0 {
            return Err(Error::refused(
                Kind::StateUsed,
                "this install link was already used; ask for a new one",
            ));
        }
        let host: String = row.try_get("host")?;
        let removed = row.try_get::<Option<i64>, _>("removed_at")?.is_some();
        let member = member_of(&row)?;
        tx.commit().await?;
        if removed {
            return Err(Error::refused(
                Kind::Forbidden,
                "the admin who made this install link was removed",
            ));
        }
        member.require_admin()?;
        Ok(LinkState { member, host })
    }

    /// Links installation `id` on `host` to the member's workspace. Linking
    /// it again to the same workspace updates its account; an installation
    /// another workspace has linked is refused.
    pub async fn link_installation(
        &self,
        member: &Member,
        host: &str,
        id: i64,
        account: &str,
        account_type: &str,
        now: i64,
    ) -> Result<Installation> {
        let mut tx = self.writer.begin().await?;
        let existing = sqlx::query(
            "SELECT workspace_id FROM github_installations WHERE host = $1 AND installation_id = $2",
        )
        .bind(host)
        .bind(id)
        .fetch_optional(&mut *tx)
        .await?;
        let taken = || {
            Error::conflict(format!(
                "installation {id} on {host} is linked to another workspace; an installation belongs to one workspace at most"
            ))
        };
        match existing {
            Some(row)
                if row.try_get::<String, _>("workspace_id")? != member.workspace_id.as_str() =>
            {
                return Err(taken());
            }
            Some(_) => {
                sqlx::query("UPDATE github_installations SET account = $1, account_type = $2 WHERE host = $3 AND installation_id = $4")
                    .bind(account)
                    .bind(account_type)
                    .bind(host)
                    .bind(id)
                    .execute(&mut *tx)
                    .await?;
            }
            None => {
                sqlx::query(
                    "INSERT INTO github_installations (host, installation_id, workspace_id, account, account_type, linked_at) VALUES ($1, $2, $3, $4, $5, $6)",
                )
                .bind(host)
                .bind(id)
                .bind(member.workspace_id.as_str())
                .bind(account)
                .bind(account_type)
                .bind(now)
                .execute(&mut *tx)
                .await
                .map_err(|e| super::on_unique(e, || taken().to_string()))?;
            }
        }
        record(
            &mut tx,
            Actor::Member(member),
            "github.installation_linked",
            &id.to_string(),
            json!({ "host": host, "account": account, "accountType": account_type }),
            now,
        )
        .await?;
        let row = sqlx::query(
            "SELECT * FROM github_installations WHERE host = $1 AND installation_id = $2",
        )
        .bind(host)
        .bind(id)
        .fetch_one(&mut *tx)
        .await?;
        tx.commit().await?;
        installation_of(&row)
    }

    /// The workspace's installations, in the order they were linked.
    pub async fn installations(&self, workspace: &WorkspaceId) -> Result<Vec<Installation>> {
        let rows = sqlx::query(
            "SELECT * FROM github_installations WHERE workspace_id = $1 ORDER BY linked_at, host, installation_id",
        )
        .bind(workspace.as_str())
        .fetch_all(&self.reader)
        .await?;
        rows.iter().map(installation_of).collect()
    }

    /// The installation for `owner`: on `host` only when one is given;
    /// else github.com's, then any host's.
    pub async fn installation_for(
        &self,
        workspace: &WorkspaceId,
        owner: &str,
        host: Option<&str>,
    ) -> Result<Option<Installation>> {
        let owner = owner.to_ascii_lowercase();
        let mut found: Vec<Installation> = self
            .installations(workspace)
            .await?
            .into_iter()
            .filter(|i| i.account.to_ascii_lowercase() == owner)
            .filter(|i| host.is_none_or(|h| i.host == h))
            .collect();
        found.sort_by_key(|i| (i.host != drover_domain::model::GITHUB_COM, i.linked_at));
        Ok(found.into_iter().next())
    }

    /// Records the GitHub runner registered beside workspace runner `runner`.
    #[allow(clippy::too_many_arguments)]
    pub async fn record_github_runner(
        &self,
        member: &Member,
        runner: &str,
        host: &str,
        owner: &str,
        repo: Option<&str>,
        name: &str,
        now: i64,
    ) -> Result<()> {
        let mut tx = self.writer.begin().await?;
        sqlx::query(
            "INSERT INTO github_runners (runner_id, workspace_id, host, owner, repo, name) VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(runner)
        .bind(member.workspace_id.as_str())
        .bind(host)
        .bind(owner)
        .bind(repo)
        .bind(name)
        .execute(&mut *tx)
        .await?;
        let target = match repo {
            Some(repo) => format!("{owner}/{repo}"),
            None => owner.to_owned(),
        };
        record(
            &mut tx,
            Actor::Member(member),
            "github.runner_installed",
            runner,
            json!({ "host": host, "target": target, "name": name }),
            now,
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// The GitHub runner beside workspace runner `runner`, not yet removed.
    pub async fn github_runner(
        &self,
        workspace: &WorkspaceId,
        runner: &str,
    ) -> Result<Option<GithubRunnerRow>> {
        let sql = format!(
            "SELECT {GITHUB_RUNNER_COLUMNS} FROM github_runners WHERE runner_id = $1 AND workspace_id = $2 AND removed_at IS NULL"
        );
        let row = sqlx::query(&sql)
            .bind(runner)
            .bind(workspace.as_str())
            .fetch_optional(&self.writer)
            .await?;
        row.as_ref().map(github_runner_of).transpose()
    }

    /// GitHub runners whose removal GitHub refused (busy) or failed: retried.
    pub async fn github_runners_to_remove(&self, limit: i64) -> Result<Vec<GithubRunnerRow>> {
        let sql = format!(
            "SELECT {GITHUB_RUNNER_COLUMNS} FROM github_runners WHERE removing = 1 AND removed_at IS NULL ORDER BY runner_id LIMIT $1"
        );
        let rows = sqlx::query(&sql)
            .bind(limit)
            .fetch_all(&self.writer)
            .await?;
        rows.iter().map(github_runner_of).collect()
    }

    /// GitHub runner of `runner` is gone (`error: None`), or its removal is
    /// to be retried, for `error`.
    pub async fn github_runner_removal(
        &self,
        runner: &str,
        error: Option<&str>,
        now: i64,
    ) -> Result<()> {
        let q = match error {
            None => sqlx::query("UPDATE github_runners SET removing = 0, removed_at = $1, last_error = NULL WHERE runner_id = $2")
                .bind(now)
                .bind(runner),
            Some(e) => sqlx::query("UPDATE github_runners SET removing = 1, last_error = $1 WHERE runner_id = $2")
                .bind(e.to_owned())
                .bind(runner),
        };
        q.execute(&self.writer).await?;
        Ok(())
    }
}
