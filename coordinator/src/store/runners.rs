//! Runners: pairing, joining with a token, hello, presence, listing, revoking.

use std::collections::HashMap;

use crate::store::error::Kind;
use drover_domain::model::{MAX_SLOTS, NewRunner};
use sqlx::{AnyConnection, FromRow};

use serde_json::json;

use super::audit::{Actor, record};
use super::identity::insert_token;
use super::leases::release_leases_of_runner;
use super::model::{PairedRunner, Runner};
use super::{Member, Store, capabilities, to_json};
use crate::caps;
use crate::ids::{JobId, JoinTokenId, RunnerId, RuntimeId, Secret, TokenKind};
use crate::refs::{DEFAULT_POOL, RuntimeRef, valid_segment};
use crate::store::error::{Error, Result};
use crate::wake::Wake;
use drover_domain::model::{ONLINE_WINDOW_MS, Owner, owner_label};

#[derive(FromRow)]
pub(super) struct RunnerRow {
    pub(super) id: String,
    pub(super) name: String,
    pub(super) labels: String,
    pub(super) detected: String,
    pub(super) created_at: i64,
    pub(super) last_seen_at: Option<i64>,
    pub(super) runtime_id: String,
    pub(super) runtime_name: String,
    pub(super) owner_member_id: Option<String>,
    pub(super) paused: i64,
}

pub(super) const RUNNER_COLUMNS: &str =
    "r.id, r.name, r.labels, r.detected, r.created_at, r.last_seen_at,
    r.runtime_id, rt.name AS runtime_name, rt.owner_member_id, r.paused";

fn runner_of(
    member: &Member,
    row: RunnerRow,
    now: i64,
    current: &HashMap<String, Vec<String>>,
) -> Result<Runner> {
    let online = row.last_seen_at.is_some_and(|t| now - t < ONLINE_WINDOW_MS);
    Ok(Runner {
        owner: owner_label(member, row.owner_member_id.as_deref()),
        capabilities: capabilities(&row.labels, &row.detected)?,
        online,
        paused: online && row.paused != 0,
        last_seen_at: row.last_seen_at,
        current_jobs: current.get(&row.id).cloned().unwrap_or_default(),
        id: RunnerId::from_db(row.id),
        name: row.name,
        runtime_id: RuntimeId::from_db(row.runtime_id),
        runtime_name: row.runtime_name,
        created_at: row.created_at,
    })
}

/// Which runners a listing shows.
#[derive(Debug, Clone, Copy)]
pub enum RunnerScope {
    /// The caller's personal runners.
    Mine,
    /// Workspace-owned runners only.
    WorkspaceOwned,
    /// Workspace-owned runners and every member's personal runners in this workspace.
    Roster,
}

impl Store {
    async fn insert_runner(
        conn: &mut AnyConnection,
        runtime_id: &str,
        name: &str,
        labels: &[String],
        now: i64,
    ) -> Result<(RunnerId, Secret)> {
        let id = RunnerId::generate();
        sqlx::query("INSERT INTO runners (id, runtime_id, name, labels, detected, created_at) VALUES ($1, $2, $3, $4, '[]', $5)")
            .bind(id.as_str())
            .bind(runtime_id)
            .bind(name)
            .bind(to_json(&labels))
            .bind(now)
            .execute(&mut *conn)
            .await?;
        let token = Secret::generate(TokenKind::Runner);
        insert_token(conn, &token, TokenKind::Runner, id.as_str(), now, None).await?;
        Ok((id, token))
    }

    /// Pairs a runner into one of `owner`'s pools; the token is shown once.
    pub async fn pair_runner(
        &self,
        member: &Member,
        owner: &Owner,
        req: &NewRunner,
        now: i64,
    ) -> Result<PairedRunner> {
        let labels = caps::normalize(&req.labels, "labels")?;
        let name = req.name.as_deref().unwrap_or("runner");
        if !valid_segment(name) {
            return Err(Error::bad_request(format!("invalid runner name {name:?}")));
        }
        let mut tx = self.writer.begin().await?;
        let pool = self
            .runtime_for_pairing(
                &mut tx,
                member,
                owner,
                req.pool.as_deref().unwrap_or(DEFAULT_POOL),
                now,
            )
            .await?;
        let (id, token) = Self::insert_runner(&mut tx, &pool.id, name, &labels, now).await?;
        // The device token that paired it: revoking that token revokes it.
        if let Some(device) = &member.token_id {
            sqlx::query("UPDATE runners SET paired_by = $1 WHERE id = $2")
                .bind(device.as_str())
                .bind(id.as_str())
                .execute(&mut *tx)
                .await?;
        }
        record(
            &mut tx,
            Actor::Member(member),
            "runner.paired",
            id.as_str(),
            json!({ "name": name, "runtime": pool.id, "pool": pool.name }),
            now,
        )
        .await?;
        tx.commit().await?;
        let runner = self.runner_view(member, &id, now).await?;
        Ok(PairedRunner { runner, token })
    }

    /// Exchanges a join token for a runner credential in the token's pool.
    /// `reference` must name that pool, or this answers NOT_FOUND. The
    /// token's use is counted in the same transaction, and a token revoked
    /// (or expired) since it was checked is refused: UNAUTHORIZED.
    pub async fn join_runner(
        &self,
        runtime_id: &RuntimeId,
        token_id: &JoinTokenId,
        reference: &str,
        name: &str,
        capabilities: &[String],
        now: i64,
    ) -> Result<(RunnerId, Secret)> {
        let parsed =
            RuntimeRef::parse(reference).map_err(|e| Error::refused(Kind::InvalidRef, e.0))?;
        if !valid_segment(name) {
            return Err(Error::bad_request(format!("invalid runner name {name:?}")));
        }
        let detected = caps::normalize(capabilities, "capabilities")?;
        let mut tx = self.writer.begin().await?;
        let pool: Option<(String, Option<String>, String, String)> = sqlx::query_as(
            "SELECT rt.name, rt.owner_member_id, w.name, w.id FROM runtimes rt JOIN workspaces w ON w.id = rt.workspace_id WHERE rt.id = $1",
        )
        .bind(runtime_id.as_str())
        .fetch_optional(&mut *tx)
        .await?;
        let (pool_name, pool_owner, ws_name, ws_id) =
            pool.ok_or_else(|| Error::not_found("the join token's runtime no longer exists"))?;
        let names_pool = |target: &Option<String>| match target {
            None => pool_name == DEFAULT_POOL,
            Some(t) => *t == pool_name || t == runtime_id.as_str(),
        };
        let matches = match (&parsed, &pool_owner) {
            (RuntimeRef::Workspace { workspace, target }, None) => {
                workspace.as_ref().is_none_or(|w| *w == ws_name) && names_pool(target)
            }
            (RuntimeRef::Personal { subject, target }, Some(owner)) => {
                subject.as_ref().is_none_or(|s| s == owner) && names_pool(target)
            }
            _ => false,
        };
        if !matches {
            return Err(Error::not_found(format!(
                "this join token does not belong to runtime {reference:?}"
            )));
        }
        let counted = sqlx::query(
            "UPDATE tokens SET uses = uses + 1, last_used_at = $1
             WHERE id = $2 AND kind = 'join' AND subject_id = $3 AND expires_at > $1",
        )
        .bind(now)
        .bind(token_id.as_str())
        .bind(runtime_id.as_str())
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if counted == 0 {
            return Err(Error::refused(
                Kind::Unauthorized,
                "this join token was revoked or has expired",
            ));
        }
        let (id, token) = Self::insert_runner(&mut tx, runtime_id.as_str(), name, &[], now).await?;
        sqlx::query("UPDATE runners SET detected = $1 WHERE id = $2")
            .bind(to_json(&detected))
            .bind(id.as_str())
            .execute(&mut *tx)
            .await?;
        let pool = runtime_id.as_str();
        record(
            &mut tx,
            Actor::JoinToken {
                pool,
                workspace: &ws_id,
            },
            "runner.joined",
            id.as_str(),
            json!({ "name": name, "runtime": pool, "pool": pool_name, "joinToken": token_id.as_str() }),
            now,
        )
        .await?;
        tx.commit().await?;
        Ok((id, token))
    }

    /// The pool a join token belongs to, as its canonical ref
    /// (`ws:<workspace>:<name>` or `self:<subject>:<name>`).
    pub async fn join_token_pool(&self, runtime_id: &RuntimeId) -> Result<String> {
        let pool: Option<(String, Option<String>, String)> = sqlx::query_as(
            "SELECT rt.name, rt.owner_member_id, w.name FROM runtimes rt JOIN workspaces w ON w.id = rt.workspace_id WHERE rt.id = $1",
        )
        .bind(runtime_id.as_str())
        .fetch_optional(&self.reader)
        .await?;
        let (name, owner, workspace) =
            pool.ok_or_else(|| Error::not_found("the join token's runtime no longer exists"))?;
        Ok(match owner {
            Some(subject) => format!("self:{subject}:{name}"),
            None => format!("ws:{workspace}:{name}"),
        })
    }

    /// A runner announces what it detected about its host (`os=`, `arch=`, `docker`).
    /// Records what a runner announced: its capabilities, and its slots
    /// (how many leases it may hold at once; 1..=[`MAX_SLOTS`]).
    pub async fn runner_hello(
        &self,
        runner: &RunnerId,
        detected: &[String],
        slots: u32,
        paused: bool,
        now: i64,
    ) -> Result<String> {
        let detected = caps::normalize(detected, "capabilities")?;
        if !(1..=MAX_SLOTS).contains(&slots) {
            return Err(Error::bad_request(format!(
                "slots must be 1..={}",
                MAX_SLOTS
            )));
        }
        let name: Option<String> = sqlx::query_scalar(
            "UPDATE runners SET detected = $1, slots = $2, paused = $3, last_seen_at = $4
             WHERE id = $5 AND revoked_at IS NULL RETURNING name",
        )
        .bind(to_json(&detected))
        .bind(i64::from(slots))
        .bind(i64::from(paused))
        .bind(now)
        .bind(runner.as_str())
        .fetch_optional(&self.writer)
        .await?;
        name.ok_or_else(|| Error::refused(Kind::Unauthorized, "this runner was revoked"))
    }

    /// The runner is stopping: no longer seen, so offline at once.
    pub async fn runner_bye(&self, runner: &RunnerId) -> Result<()> {
        sqlx::query("UPDATE runners SET last_seen_at = NULL, paused = 0 WHERE id = $1")
            .bind(runner.as_str())
            .execute(&self.writer)
            .await?;
        Ok(())
    }

    pub async fn touch_runner(&self, runner: &RunnerId, now: i64) -> Result<()> {
        sqlx::query("UPDATE runners SET last_seen_at = $1 WHERE id = $2")
            .bind(now)
            .bind(runner.as_str())
            .execute(&self.writer)
            .await?;
        Ok(())
    }

    async fn current_jobs(&self, member: &Member) -> Result<HashMap<String, Vec<String>>> {
        let rows: Vec<(String, String)> = sqlx::query_as(
            "SELECT lease_runner_id, id FROM jobs WHERE workspace_id = $1 AND state IN ('leased', 'running') AND lease_runner_id IS NOT NULL",
        )
        .bind(member.workspace_id.as_str())
        .fetch_all(&self.reader)
        .await?;
        let mut map: HashMap<String, Vec<String>> = HashMap::new();
        for (runner, job) in rows {
            map.entry(runner).or_default().push(job);
        }
        Ok(map)
    }

    async fn runner_view(&self, member: &Member, id: &RunnerId, now: i64) -> Result<Runner> {
        let sql = format!(
            "SELECT {RUNNER_COLUMNS} FROM runners r JOIN runtimes rt ON rt.id = r.runtime_id WHERE r.id = $1"
        );
        let row = sqlx::query_as::<_, RunnerRow>(&sql)
            .bind(id.as_str())
            .fetch_one(&self.writer)
            .await?;
        runner_of(member, row, now, &HashMap::new())
    }

    pub async fn list_runners(
        &self,
        member: &Member,
        scope: RunnerScope,
        now: i64,
    ) -> Result<Vec<Runner>> {
        let filter = match scope {
            RunnerScope::Mine => "rt.owner_member_id = $2",
            RunnerScope::WorkspaceOwned => "rt.owner_member_id IS NULL",
            RunnerScope::Roster => "1 = 1",
        };
        let sql = format!(
            "SELECT {RUNNER_COLUMNS} FROM runners r JOIN runtimes rt ON rt.id = r.runtime_id
             WHERE rt.workspace_id = $1 AND r.revoked_at IS NULL AND {filter}
             ORDER BY rt.owner_member_id IS NOT NULL, rt.name, r.created_at, r.id"
        );
        let mut query = sqlx::query_as::<_, RunnerRow>(&sql).bind(member.workspace_id.as_str());
        if matches!(scope, RunnerScope::Mine) {
            query = query.bind(member.id.as_str());
        }
        let rows = query.fetch_all(&self.reader).await?;
        let current = self.current_jobs(member).await?;
        rows.into_iter()
            .map(|r| runner_of(member, r, now, &current))
            .collect()
    }

    /// Revokes a runner of `owner`: its token stops working at once, any job
    /// it holds is re-queued (or lost, when out of attempts), and jobs pinned
    /// to it, which no one else may run, end as `lost`. Returns the jobs that
    /// changed and who to wake for them.
    pub async fn revoke_runner(
        &self,
        member: &Member,
        owner: &Owner,
        id: &str,
        now: i64,
    ) -> Result<Vec<(JobId, Option<Wake>)>> {
        let not_found = || Error::not_found(format!("no runner {id:?}"));
        let id = RunnerId::parse(id).ok_or_else(not_found)?;
        let mut tx = self.writer.begin().await?;
        let sql = format!(
            "UPDATE runners SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL AND runtime_id IN
             (SELECT id FROM runtimes WHERE workspace_id = $3 AND owner_member_id {is} $4)",
            is = self.dialect.is
        );
        let done = sqlx::query(&sql)
            .bind(now)
            .bind(id.as_str())
            .bind(member.workspace_id.as_str())
            .bind(owner.member_id())
            .execute(&mut *tx)
            .await?;
        if done.rows_affected() == 0 {
            return Err(not_found());
        }
        let changed = self.revoke_in(&mut tx, &id, now).await?;
        record(
            &mut tx,
            Actor::Member(member),
            "runner.revoked",
            id.as_str(),
            json!({ "jobsChanged": changed.len() }),
            now,
        )
        .await?;
        tx.commit().await?;
        Ok(changed)
    }

    /// A runner revokes itself (`POST /v1/runner/leave`), with the same
    /// effect as [`Store::revoke_runner`]. A runner already revoked is
    /// UNAUTHORIZED, as its token is.
    pub async fn leave(&self, id: &RunnerId, now: i64) -> Result<Vec<(JobId, Option<Wake>)>> {
        let mut tx = self.writer.begin().await?;
        let workspace: Option<String> = sqlx::query_scalar(
            "UPDATE runners SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL
             RETURNING (SELECT workspace_id FROM runtimes WHERE runtimes.id = runners.runtime_id)",
        )
        .bind(now)
        .bind(id.as_str())
        .fetch_optional(&mut *tx)
        .await?;
        let Some(workspace) = workspace else {
            return Err(Error::refused(
                Kind::Unauthorized,
                "this runner was revoked",
            ));
        };
        let changed = self.revoke_in(&mut tx, id, now).await?;
        record(
            &mut tx,
            Actor::Runner {
                id: id.as_str(),
                workspace: &workspace,
            },
            "runner.left",
            id.as_str(),
            json!({ "jobsChanged": changed.len() }),
            now,
        )
        .await?;
        tx.commit().await?;
        Ok(changed)
    }

    /// The rest of revoking runner `id`, just marked revoked in `tx`: its
    /// token, its leases and the jobs pinned to it. The caller commits.
    pub(super) async fn revoke_in(
        &self,
        tx: &mut AnyConnection,
        id: &RunnerId,
        now: i64,
    ) -> Result<Vec<(JobId, Option<Wake>)>> {
        sqlx::query("DELETE FROM tokens WHERE subject_id = $1 AND kind = 'runner'")
            .bind(id.as_str())
            .execute(&mut *tx)
            .await?;
        let mut changed = release_leases_of_runner(tx, self.dialect, id, now).await?;
        let pinned: Vec<String> = sqlx::query_scalar(
            "UPDATE jobs SET state = 'lost', error = 'the runner it was pinned to was revoked', finished_at = $1
             WHERE pinned_runner_id = $2 AND state = 'queued' RETURNING id",
        )
        .bind(now)
        .bind(id.as_str())
        .fetch_all(&mut *tx)
        .await?;
        changed
            .retain(|(_, wake)| !matches!(wake, Some(Wake::Runner { runner, .. }) if runner == id));
        changed.extend(pinned.into_iter().map(|job| (JobId::from_db(job), None)));
        Ok(changed)
    }
}
