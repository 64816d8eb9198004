//! Runtimes (pools), runners, join tokens, and placement: turning a parsed
//! ref into a pool (and maybe a pinned runner) for the caller's tenant.

use std::collections::HashMap;

use drover_wire::{self as wire, ErrorCode};
use sqlx::{AnyConnection, FromRow};

use super::identity::insert_token;
use super::leases::release_leases_of_runner;
use super::model::{JoinToken, PairedRunner, Runner, Runtime};
use super::{Member, Store, json_list, on_unique, to_json};
use crate::caps;
use crate::error::{Error, Result};
use crate::ids::{JobId, MemberId, RunnerId, RuntimeId, Secret, TokenKind};
use crate::refs::{DEFAULT_POOL, RuntimeRef, valid_segment};
use crate::wake::Wake;

/// A runner is online if it has talked to the coordinator this recently.
pub const ONLINE_WINDOW_MS: i64 = 40_000;
const MAX_JOIN_TTL_S: u64 = 30 * 24 * 3600;
const DEFAULT_JOIN_TTL_S: u64 = 24 * 3600;

/// Who owns a pool, seen from inside the caller's workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Owner {
    Member(MemberId),
    Workspace,
}

impl Owner {
    fn member_id(&self) -> Option<&str> {
        match self {
            Self::Member(id) => Some(id.as_str()),
            Self::Workspace => None,
        }
    }
}

/// Where a submitted job goes.
#[derive(Debug, Clone)]
pub struct Placement {
    pub runtime_id: RuntimeId,
    pub pinned_runner: Option<RunnerId>,
    /// The pool is workspace-owned (the workspace pays).
    pub workspace_owned: bool,
}

#[derive(FromRow)]
struct RuntimeRow {
    id: String,
    name: String,
    owner_member_id: Option<String>,
    created_at: i64,
    runners: i64,
}

#[derive(FromRow)]
struct RunnerRow {
    id: String,
    name: String,
    labels: String,
    detected: String,
    created_at: i64,
    last_seen_at: Option<i64>,
    runtime_id: String,
    runtime_name: String,
    owner_member_id: Option<String>,
}

const RUNTIME_COLUMNS: &str = "rt.id, rt.name, rt.owner_member_id, rt.created_at,
    (SELECT COUNT(*) FROM runners r WHERE r.runtime_id = rt.id AND r.revoked_at IS NULL) AS runners";

const RUNNER_COLUMNS: &str = "r.id, r.name, r.labels, r.detected, r.created_at, r.last_seen_at,
    r.runtime_id, rt.name AS runtime_name, rt.owner_member_id";

/// `user:<subject>` or `ws:<workspace>`.
pub(super) fn owner_label(member: &Member, owner_member_id: Option<&str>) -> String {
    match owner_member_id {
        Some(id) => format!("user:{id}"),
        None => format!("ws:{}", member.workspace_name),
    }
}

fn runtime_of(member: &Member, row: RuntimeRow) -> Runtime {
    let reference = match &row.owner_member_id {
        Some(subject) => format!("self:{subject}:{}", row.name),
        None => format!("ws:{}:{}", member.workspace_name, row.name),
    };
    Runtime {
        owner: owner_label(member, row.owner_member_id.as_deref()),
        id: RuntimeId::from_db(row.id),
        name: row.name,
        reference,
        runners: row.runners as u32,
        created_at: row.created_at,
    }
}

/// Capabilities = labels set at pairing ∪ what the runner detected.
pub(super) fn capabilities(labels: &str, detected: &str) -> Result<Vec<String>> {
    let mut all = json_list(labels)?;
    all.extend(json_list(detected)?);
    all.sort();
    all.dedup();
    Ok(all)
}

fn runner_of(
    member: &Member,
    row: RunnerRow,
    now: i64,
    current: &HashMap<String, Vec<String>>,
) -> Result<Runner> {
    Ok(Runner {
        owner: owner_label(member, row.owner_member_id.as_deref()),
        capabilities: capabilities(&row.labels, &row.detected)?,
        online: row.last_seen_at.is_some_and(|t| now - t < ONLINE_WINDOW_MS),
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
    async fn runtime_by(
        &self,
        conn: &mut AnyConnection,
        member: &Member,
        owner: &Owner,
        name_or_id: &str,
    ) -> Result<Option<RuntimeRow>> {
        let by_id = RuntimeId::parse(name_or_id).is_some();
        let sql = format!(
            "SELECT {RUNTIME_COLUMNS} FROM runtimes rt
             WHERE rt.workspace_id = $1 AND rt.owner_member_id {is} $2 AND {column} = $3",
            is = self.dialect.is,
            column = if by_id { "rt.id" } else { "rt.name" }
        );
        Ok(sqlx::query_as::<_, RuntimeRow>(&sql)
            .bind(member.workspace_id.as_str())
            .bind(owner.member_id())
            .bind(name_or_id)
            .fetch_optional(conn)
            .await?)
    }

    /// The pool named `name` (or with that id); the owner's default pool is
    /// created on first use.
    async fn runtime_for_pairing(
        &self,
        conn: &mut AnyConnection,
        member: &Member,
        owner: &Owner,
        name: &str,
        now: i64,
    ) -> Result<RuntimeRow> {
        if let Some(row) = self.runtime_by(conn, member, owner, name).await? {
            return Ok(row);
        }
        if name != DEFAULT_POOL {
            return Err(Error::not_found(format!("no runtime {name:?}")));
        }
        self.insert_runtime(conn, member, owner, name, now).await?;
        self.runtime_by(conn, member, owner, name)
            .await?
            .ok_or_else(|| Error::Corrupt("runtime vanished after insert".into()))
    }

    async fn insert_runtime(
        &self,
        conn: &mut AnyConnection,
        member: &Member,
        owner: &Owner,
        name: &str,
        now: i64,
    ) -> Result<RuntimeId> {
        let id = RuntimeId::generate();
        sqlx::query("INSERT INTO runtimes (id, workspace_id, owner_member_id, name, created_at) VALUES ($1, $2, $3, $4, $5)")
            .bind(id.as_str())
            .bind(member.workspace_id.as_str())
            .bind(owner.member_id())
            .bind(name)
            .bind(now)
            .execute(conn)
            .await
            .map_err(|e| on_unique(e, || format!("a runtime named {name:?} already exists")))?;
        Ok(id)
    }

    pub async fn create_runtime(
        &self,
        member: &Member,
        owner: &Owner,
        name: &str,
        now: i64,
    ) -> Result<Runtime> {
        if !valid_segment(name)
            || RuntimeId::parse(name).is_some()
            || RunnerId::parse(name).is_some()
            || name == "ws"
        {
            return Err(Error::bad_request(format!(
                "invalid runtime name {name:?}: 1-64 of [A-Za-z0-9._-], starting alphanumeric, not an id and not \"ws\""
            )));
        }
        let mut tx = self.writer.begin().await?;
        self.insert_runtime(&mut tx, member, owner, name, now)
            .await?;
        let row = self.runtime_by(&mut tx, member, owner, name).await?;
        tx.commit().await?;
        let row = row.ok_or_else(|| Error::Corrupt("runtime vanished after insert".into()))?;
        Ok(runtime_of(member, row))
    }

    pub async fn list_runtimes(&self, member: &Member, owner: &Owner) -> Result<Vec<Runtime>> {
        let sql = format!(
            "SELECT {RUNTIME_COLUMNS} FROM runtimes rt WHERE rt.workspace_id = $1 AND rt.owner_member_id {is} $2 ORDER BY rt.name",
            is = self.dialect.is
        );
        let rows = sqlx::query_as::<_, RuntimeRow>(&sql)
            .bind(member.workspace_id.as_str())
            .bind(owner.member_id())
            .fetch_all(&self.reader)
            .await?;
        Ok(rows.into_iter().map(|r| runtime_of(member, r)).collect())
    }

    pub async fn create_join_token(
        &self,
        member: &Member,
        owner: &Owner,
        runtime: &str,
        ttl_seconds: Option<u64>,
        now: i64,
    ) -> Result<JoinToken> {
        let ttl = ttl_seconds.unwrap_or(DEFAULT_JOIN_TTL_S);
        if ttl == 0 || ttl > MAX_JOIN_TTL_S {
            return Err(Error::bad_request(format!(
                "ttlSeconds must be 1..={MAX_JOIN_TTL_S}"
            )));
        }
        let mut tx = self.writer.begin().await?;
        let row = self
            .runtime_for_pairing(&mut tx, member, owner, runtime, now)
            .await?;
        let token = Secret::generate(TokenKind::Join);
        let expires_at = now + (ttl as i64) * 1000;
        insert_token(
            &mut tx,
            &token,
            TokenKind::Join,
            &row.id,
            now,
            Some(expires_at),
        )
        .await?;
        tx.commit().await?;
        Ok(JoinToken {
            token,
            runtime: runtime_of(member, row),
            expires_at,
        })
    }

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
        req: &wire::PairRunner,
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
                req.runtime.as_deref().unwrap_or(DEFAULT_POOL),
                now,
            )
            .await?;
        let (id, token) = Self::insert_runner(&mut tx, &pool.id, name, &labels, now).await?;
        tx.commit().await?;
        let runner = self.runner_view(member, &id, now).await?;
        Ok(PairedRunner { runner, token })
    }

    /// Exchanges a join token for a runner credential in the token's pool.
    /// `reference` must name that pool, or this answers NOT_FOUND.
    pub async fn join_runner(
        &self,
        runtime_id: &RuntimeId,
        req: &wire::JoinRequest,
        now: i64,
    ) -> Result<(RunnerId, Secret)> {
        let parsed = RuntimeRef::parse(&req.reference)
            .map_err(|e| Error::api(ErrorCode::InvalidRef, e.0))?;
        if !valid_segment(&req.name) {
            return Err(Error::bad_request(format!(
                "invalid runner name {:?}",
                req.name
            )));
        }
        let detected = caps::normalize(&req.capabilities, "capabilities")?;
        let mut tx = self.writer.begin().await?;
        let pool: Option<(String, Option<String>, String)> = sqlx::query_as(
            "SELECT rt.name, rt.owner_member_id, w.name FROM runtimes rt JOIN workspaces w ON w.id = rt.workspace_id WHERE rt.id = $1",
        )
        .bind(runtime_id.as_str())
        .fetch_optional(&mut *tx)
        .await?;
        let (pool_name, pool_owner, ws_name) =
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
                "this join token does not belong to runtime {:?}",
                req.reference
            )));
        }
        let (id, token) =
            Self::insert_runner(&mut tx, runtime_id.as_str(), &req.name, &[], now).await?;
        sqlx::query("UPDATE runners SET detected = $1 WHERE id = $2")
            .bind(to_json(&detected))
            .bind(id.as_str())
            .execute(&mut *tx)
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
    /// (how many leases it may hold at once; 1..=[`wire::MAX_SLOTS`]).
    pub async fn runner_hello(
        &self,
        runner: &RunnerId,
        detected: &[String],
        slots: u32,
        now: i64,
    ) -> Result<()> {
        let detected = caps::normalize(detected, "capabilities")?;
        if !(1..=wire::MAX_SLOTS).contains(&slots) {
            return Err(Error::bad_request(format!(
                "slots must be 1..={}",
                wire::MAX_SLOTS
            )));
        }
        let done = sqlx::query(
            "UPDATE runners SET detected = $1, slots = $2, last_seen_at = $3 WHERE id = $4 AND revoked_at IS NULL",
        )
        .bind(to_json(&detected))
        .bind(i64::from(slots))
        .bind(now)
        .bind(runner.as_str())
        .execute(&self.writer)
        .await?;
        if done.rows_affected() == 0 {
            return Err(Error::api(
                ErrorCode::Unauthorized,
                "this runner was revoked",
            ));
        }
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
        sqlx::query("DELETE FROM tokens WHERE subject_id = $1 AND kind = 'runner'")
            .bind(id.as_str())
            .execute(&mut *tx)
            .await?;
        let mut changed = release_leases_of_runner(&mut tx, self.dialect, &id, now).await?;
        let pinned: Vec<String> = sqlx::query_scalar(
            "UPDATE jobs SET state = 'lost', error = 'the runner it was pinned to was revoked', finished_at = $1
             WHERE pinned_runner_id = $2 AND state = 'queued' RETURNING id",
        )
        .bind(now)
        .bind(id.as_str())
        .fetch_all(&mut *tx)
        .await?;
        tx.commit().await?;
        changed.retain(
            |(_, wake)| !matches!(wake, Some(Wake::Runner { runner, .. }) if *runner == id),
        );
        changed.extend(pinned.into_iter().map(|job| (JobId::from_db(job), None)));
        Ok(changed)
    }

    /// Resolves a ref for a job submitted by `member` (SPEC §2 rules 2-5).
    pub async fn place(
        &self,
        member: &Member,
        reference: &RuntimeRef,
        requires: &[String],
    ) -> Result<Placement> {
        let (owner, target) = match reference {
            RuntimeRef::Personal { subject, target } => {
                if subject.as_ref().is_some_and(|s| s != member.id.as_str()) {
                    // Owner-only: someone else's personal pool does not exist for you.
                    return Err(Error::not_found("no such personal runtime or runner"));
                }
                (Owner::Member(member.id.clone()), target)
            }
            RuntimeRef::Workspace { workspace, target } => {
                if workspace.as_ref().is_some_and(|w| {
                    !w.eq_ignore_ascii_case(&member.workspace_name)
                        && *w != member.workspace_id.as_str()
                }) {
                    // Tenant comes from the job, never from the ref.
                    return Err(Error::not_found("no such workspace runtime or runner"));
                }
                (Owner::Workspace, target)
            }
        };
        let target = target.as_deref().unwrap_or(DEFAULT_POOL);
        let mut conn = self.reader.acquire().await?;
        if let Some(runner) = RunnerId::parse(target) {
            let sql = format!(
                "SELECT {RUNNER_COLUMNS} FROM runners r JOIN runtimes rt ON rt.id = r.runtime_id
                 WHERE r.id = $1 AND r.revoked_at IS NULL AND rt.workspace_id = $2 AND rt.owner_member_id {is} $3",
                is = self.dialect.is
            );
            let row = sqlx::query_as::<_, RunnerRow>(&sql)
                .bind(runner.as_str())
                .bind(member.workspace_id.as_str())
                .bind(owner.member_id())
                .fetch_optional(&mut *conn)
                .await?
                .ok_or_else(|| {
                    Error::not_found(format!("no runner {target:?} in this runtime scope"))
                })?;
            let have = capabilities(&row.labels, &row.detected)?;
            if !caps::satisfies(&have, requires) {
                return Err(Error::api(
                    ErrorCode::CapabilityMismatch,
                    format!(
                        "runner {target} lacks required capabilities {requires:?} (it has {have:?})"
                    ),
                ));
            }
            return Ok(Placement {
                runtime_id: RuntimeId::from_db(row.runtime_id),
                pinned_runner: Some(runner),
                workspace_owned: owner == Owner::Workspace,
            });
        }
        // Whether any runner is in the pool, not how many: this is on every submit.
        let sql = format!(
            "SELECT rt.id, CASE WHEN EXISTS (SELECT 1 FROM runners r WHERE r.runtime_id = rt.id AND r.revoked_at IS NULL)
                    THEN 1 ELSE 0 END
             FROM runtimes rt WHERE rt.workspace_id = $1 AND rt.owner_member_id {is} $2 AND {column} = $3",
            is = self.dialect.is,
            column = if RuntimeId::parse(target).is_some() { "rt.id" } else { "rt.name" }
        );
        let (pool_id, has_runners): (String, i64) = sqlx::query_as(&sql)
            .bind(member.workspace_id.as_str())
            .bind(owner.member_id())
            .bind(target)
            .fetch_optional(&mut *conn)
            .await?
            .ok_or_else(|| Error::not_found(format!("no runtime {target:?} in this scope")))?;
        if has_runners == 0 {
            return Err(Error::api(
                ErrorCode::NoRunners,
                format!(
                    "runtime {target:?} has no runner; pair or join one first (jobs never fall back to another pool)"
                ),
            ));
        }
        Ok(Placement {
            runtime_id: RuntimeId::from_db(pool_id),
            pinned_runner: None,
            workspace_owned: owner == Owner::Workspace,
        })
    }
}
