//! CI links: per repository, where its workflow runs and where its Drover
//! jobs go, GitHub's id of the repository (pinned when it is linked) and
//! which refs and events may act; and the CI principal a linked
//! repository's OIDC token becomes (a members row of kind `ci`, id
//! `ci:<owner>/<repo>`, role member), which sees only its own jobs.

use serde_json::json;
use sqlx::Row;

use super::Store;
use super::audit::{Actor, record};
use super::{Role, Surface};
use crate::ids::{MemberId, WorkspaceId};
use crate::store::error::{Error, Result};
use drover_domain::member::Member;

/// A repository linked to a workspace for CI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CiLink {
    pub host: String,
    /// `owner/name`, lower case.
    pub repository: String,
    pub runs_on: Option<Vec<String>>,
    pub runtime: Option<String>,
    pub policy: CiPolicy,
    /// GitHub's id of the repository; `None` for a link made before ids
    /// were pinned at link time (refused until it is linked again).
    pub repository_id: Option<i64>,
    pub updated_at: i64,
}

/// What a link is made (or remade) with.
#[derive(Debug, Clone, Default)]
pub struct CiLinkSpec {
    pub runs_on: Option<Vec<String>>,
    pub runtime: Option<String>,
    pub policy: CiPolicy,
    /// GitHub's id of the repository, read through the App just now.
    pub repository_id: i64,
}

/// Which workflow runs of a linked repository may act: the OIDC token's
/// `ref` against `refs` (patterns; a trailing `*` matches any rest) and its
/// `event_name` against `events`. `None`: any ref; any event but
/// `pull_request` and `pull_request_target`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CiPolicy {
    pub refs: Option<Vec<String>>,
    pub events: Option<Vec<String>>,
}

/// Events refused unless a link lists them: a pull request's code is
/// written by whoever opens it (from a fork too), and GitHub's OIDC token
/// carries no claim that says whether its head is a fork.
pub const PULL_REQUEST_EVENTS: [&str; 2] = ["pull_request", "pull_request_target"];

fn ref_matches(pattern: &str, r: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => r.starts_with(prefix),
        None => pattern == r,
    }
}

impl CiPolicy {
    /// Why a token with this `ref` and `event_name` may not act, if it may not.
    pub fn refusal(&self, git_ref: Option<&str>, event: Option<&str>) -> Option<String> {
        let Some(event) = event else {
            return Some("the OIDC token names no event_name".into());
        };
        match &self.events {
            Some(allowed) if !allowed.iter().any(|e| e == event) => {
                return Some(format!(
                    "this repository's CI link does not allow {event:?} runs (it allows {})",
                    allowed.join(", ")
                ));
            }
            None if PULL_REQUEST_EVENTS.contains(&event) => {
                return Some(format!(
                    "{event:?} runs are refused unless the CI link lists the event (a pull request's code, from a fork too, is its author's): link it again with events including {event}"
                ));
            }
            _ => {}
        }
        if let Some(refs) = &self.refs {
            let Some(r) = git_ref else {
                return Some("the OIDC token names no ref".into());
            };
            if !refs.iter().any(|p| ref_matches(p, r)) {
                return Some(format!(
                    "this repository's CI link does not allow ref {r:?} (it allows {})",
                    refs.join(", ")
                ));
            }
        }
        None
    }
}

fn json_of(list: Option<&Vec<String>>) -> Option<String> {
    list.map(|l| serde_json::to_string(l).expect("strings as JSON"))
}

fn list_of(row: &sqlx::any::AnyRow, column: &str) -> Result<Option<Vec<String>>> {
    let text: Option<String> = row.try_get(column)?;
    text.map(|j| serde_json::from_str(&j))
        .transpose()
        .map_err(|e| Error::Corrupt(format!("ci_links.{column}: {e}")))
}

fn link_of(row: &sqlx::any::AnyRow) -> Result<CiLink> {
    Ok(CiLink {
        host: row.try_get("host")?,
        repository: row.try_get("repository")?,
        runs_on: list_of(row, "runs_on")?,
        runtime: row.try_get("runtime")?,
        policy: CiPolicy {
            refs: list_of(row, "refs")?,
            events: list_of(row, "events")?,
        },
        repository_id: row.try_get("repository_id")?,
        updated_at: row.try_get("updated_at")?,
    })
}

/// The CI principal's member id for `repository` on `host`.
pub fn ci_member_id(host: &str, repository: &str) -> String {
    if host == drover_domain::model::GITHUB_COM {
        format!("ci:{repository}")
    } else {
        format!("ci:{host}/{repository}")
    }
}

const LINK_COLUMNS: &str =
    "host, repository, runs_on, runtime, refs, events, repository_id, updated_at";

/// What the OIDC token proved and the link it matched.
pub enum CiLookup {
    /// The CI principal, and which of its runs may act.
    Principal(Member, CiPolicy),
    /// No workspace links that repository.
    NotLinked,
    /// The repository's id is not the one the link pinned.
    OtherRepository,
    /// The link was made before ids were pinned at link time.
    Unpinned,
}

impl Store {
    /// Links (or re-links) `repository` on `host` to the admin's
    /// workspace, pinning `spec.repository_id` (again on a relink); a
    /// repository linked to another workspace is refused.
    pub async fn set_ci_link(
        &self,
        member: &Member,
        host: &str,
        repository: &str,
        spec: &CiLinkSpec,
        now: i64,
    ) -> Result<CiLink> {
        let (runs_on, runtime) = (spec.runs_on.as_deref(), spec.runtime.as_deref());
        let (refs, events) = (spec.policy.refs.as_ref(), spec.policy.events.as_ref());
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
            "UPDATE ci_links SET runs_on = $1, runtime = $2, updated_at = $3, refs = $7, events = $8, repository_id = $9 WHERE host = $4 AND repository = $5 AND workspace_id = $6",
        )
        .bind(runs_on_json.clone())
        .bind(runtime.map(str::to_owned))
        .bind(now)
        .bind(host)
        .bind(&repository)
        .bind(member.workspace_id.as_str())
        .bind(json_of(refs))
        .bind(json_of(events))
        .bind(spec.repository_id)
        .execute(&mut *tx)
        .await?;
        if updated.rows_affected() == 0 {
            sqlx::query(
                "INSERT INTO ci_links (host, repository, workspace_id, member_id, runs_on, runtime, updated_at, refs, events, repository_id) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
            )
            .bind(host)
            .bind(&repository)
            .bind(member.workspace_id.as_str())
            .bind(&member_id)
            .bind(runs_on_json)
            .bind(runtime.map(str::to_owned))
            .bind(now)
            .bind(json_of(refs))
            .bind(json_of(events))
            .bind(spec.repository_id)
            .execute(&mut *tx)
            .await
            .map_err(|e| super::on_unique(e, || taken().to_string()))?;
        }
        record(
            &mut tx,
            Actor::Member(member),
            "ci_link.set",
            &repository,
            json!({ "host": host, "runsOn": runs_on, "runtime": runtime, "refs": refs,
                "events": events, "repositoryId": spec.repository_id }),
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

    /// Whether another workspace has (or had) `repository` on `host` as a
    /// CI principal: linking it here would be refused.
    pub async fn ci_link_taken(
        &self,
        workspace: &WorkspaceId,
        host: &str,
        repository: &str,
    ) -> Result<bool> {
        let id = ci_member_id(host, &repository.to_ascii_lowercase());
        let owner: Option<String> =
            sqlx::query_scalar("SELECT workspace_id FROM members WHERE id = $1")
                .bind(&id)
                .fetch_optional(&self.reader)
                .await?;
        Ok(owner.is_some_and(|w| w != workspace.as_str()))
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

    /// The runtime ref a CI principal's jobs go to: its link's, `self:ws`
    /// when the link names none.
    pub async fn ci_runtime(&self, member: &Member) -> Result<String> {
        let runtime: Option<Option<String>> =
            sqlx::query_scalar("SELECT runtime FROM ci_links WHERE member_id = $1")
                .bind(member.id.as_str())
                .fetch_optional(&self.writer)
                .await?;
        Ok(runtime.flatten().unwrap_or_else(|| "self:ws".into()))
    }

    /// The CI principal of a verified OIDC token for `repository` (id
    /// `repository_id`) on `host`, when the link's pinned id is that one.
    pub async fn ci_principal(
        &self,
        host: &str,
        repository: &str,
        repository_id: i64,
    ) -> Result<CiLookup> {
        let repository = repository.to_ascii_lowercase();
        let row = sqlx::query(
            "SELECT l.member_id, l.repository_id, l.refs, l.events, w.id AS ws_id, w.name AS ws_name
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
            None => return Ok(CiLookup::Unpinned),
        }
        let policy = CiPolicy {
            refs: list_of(&row, "refs")?,
            events: list_of(&row, "events")?,
        };
        let id: String = row.try_get("member_id")?;
        let member = Member {
            email: id.clone(),
            id: MemberId::from_db(id),
            role: Role::Member,
            workspace_id: WorkspaceId::from_db(row.try_get("ws_id")?),
            workspace_name: row.try_get("ws_name")?,
            token_id: None,
            surface: Surface::Rest,
            ci: true,
        };
        Ok(CiLookup::Principal(member, policy))
    }
}

#[cfg(test)]
mod tests {
    use super::CiPolicy;

    fn list(items: &[&str]) -> Option<Vec<String>> {
        Some(items.iter().map(|s| (*s).to_owned()).collect())
    }

    #[test]
    fn refs_and_events_decide_which_runs_act() {
        let any = CiPolicy::default();
        assert_eq!(any.refusal(Some("refs/heads/x"), Some("push")), None);
        assert_eq!(any.refusal(None, Some("workflow_dispatch")), None);
        for pr in ["pull_request", "pull_request_target"] {
            let why = any.refusal(Some("refs/pull/1/merge"), Some(pr)).unwrap();
            assert!(why.contains(pr), "{why}");
        }
        assert!(any.refusal(Some("refs/heads/main"), None).is_some());

        let scoped = CiPolicy {
            refs: list(&["refs/heads/main", "refs/tags/v*", "refs/pull/*"]),
            events: list(&["push", "pull_request"]),
        };
        assert_eq!(scoped.refusal(Some("refs/heads/main"), Some("push")), None);
        assert_eq!(scoped.refusal(Some("refs/tags/v1.2"), Some("push")), None);
        assert_eq!(
            scoped.refusal(Some("refs/pull/7/merge"), Some("pull_request")),
            None
        );
        assert!(
            scoped
                .refusal(Some("refs/heads/main-evil"), Some("push"))
                .is_some()
        );
        assert!(
            scoped
                .refusal(Some("refs/heads/dev"), Some("push"))
                .is_some()
        );
        assert!(scoped.refusal(None, Some("push")).is_some());
        assert!(
            scoped
                .refusal(Some("refs/heads/main"), Some("workflow_dispatch"))
                .is_some()
        );
        assert!(
            scoped
                .refusal(Some("refs/heads/main"), Some("pull_request_target"))
                .is_some()
        );
    }
}
