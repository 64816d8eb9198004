//! Runtimes (pools), join tokens, and placement: turning a parsed
//! ref into a pool (and maybe a pinned runner) for the caller's tenant.

use crate::store::error::Kind;
use serde_json::json;
use sqlx::{AnyConnection, FromRow};

use super::audit::{Actor, record};
use super::capabilities;
use super::identity::insert_join_token;
use super::model::{JoinToken, ListedJoinToken, Runtime};
use super::runners::{RUNNER_COLUMNS, RunnerRow};
use super::{Member, Store, on_unique};
use crate::caps;
use crate::ids::{JoinTokenId, MemberId, RunnerId, RuntimeId, Secret, TokenKind};
use crate::refs::{DEFAULT_POOL, RuntimeRef, valid_segment};
use crate::store::error::{Error, Result};
use drover_domain::model::{Owner, owner_label};

/// A join token's longest lifetime (30 days) and its default (one day).
pub const MAX_JOIN_TTL_S: u64 = 30 * 24 * 3600;
pub const DEFAULT_JOIN_TTL_S: u64 = 24 * 3600;

/// Where a submitted job goes.
#[derive(Debug, Clone)]
pub struct Placement {
    pub runtime_id: RuntimeId,
    pub pinned_runner: Option<RunnerId>,
    /// The pool is workspace-owned (the workspace pays).
    pub workspace_owned: bool,
}

#[derive(FromRow)]
pub(super) struct RuntimeRow {
    pub(super) id: String,
    pub(super) name: String,
    pub(super) owner_member_id: Option<String>,
    pub(super) created_at: i64,
    pub(super) runners: i64,
}

#[derive(FromRow)]
struct JoinTokenRow {
    id: String,
    subject_id: String,
    name: String,
    owner_member_id: Option<String>,
    minted_by: Option<String>,
    email: Option<String>,
    created_at: i64,
    expires_at: i64,
    last_used_at: Option<i64>,
    uses: i64,
}

const RUNTIME_COLUMNS: &str = "rt.id, rt.name, rt.owner_member_id, rt.created_at,
    (SELECT COUNT(*) FROM runners r WHERE r.runtime_id = rt.id AND r.revoked_at IS NULL) AS runners";

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
    pub(super) async fn runtime_for_pairing(
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
        let row = row.ok_or_else(|| Error::Corrupt("runtime vanished after insert".into()))?;
        record(
            &mut tx,
            Actor::Member(member),
            "runtime.created",
            &row.id,
            json!({ "name": name, "personal": owner.member_id().is_some() }),
            now,
        )
        .await?;
        tx.commit().await?;
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
        let id = insert_join_token(&mut tx, &token, &row.id, &member.id, now, expires_at).await?;
        record(
            &mut tx,
            Actor::Member(member),
            "join_token.created",
            &row.id,
            json!({ "pool": row.name, "expiresAt": expires_at, "joinToken": id.as_str() }),
            now,
        )
        .await?;
        tx.commit().await?;
        Ok(JoinToken {
            id,
            token,
            runtime: runtime_of(member, row),
            expires_at,
        })
    }

    /// The join tokens of `owner`'s pools that have not expired, oldest
    /// first: pool, minter, times and uses, never the token.
    pub async fn list_join_tokens(
        &self,
        member: &Member,
        owner: &Owner,
        now: i64,
    ) -> Result<Vec<ListedJoinToken>> {
        let sql = format!(
            "SELECT t.id, t.subject_id, rt.name, rt.owner_member_id, t.minted_by, m.email,
                    t.created_at, t.expires_at, t.last_used_at, t.uses
             FROM tokens t JOIN runtimes rt ON rt.id = t.subject_id
             LEFT JOIN members m ON m.id = t.minted_by
             WHERE t.kind = 'join' AND t.id IS NOT NULL AND t.expires_at > $1
               AND rt.workspace_id = $2 AND rt.owner_member_id {is} $3
             ORDER BY t.created_at, t.id",
            is = self.dialect.is
        );
        let rows = sqlx::query_as::<_, JoinTokenRow>(&sql)
            .bind(now)
            .bind(member.workspace_id.as_str())
            .bind(owner.member_id())
            .fetch_all(&self.reader)
            .await?;
        Ok(rows
            .into_iter()
            .map(|r| ListedJoinToken {
                reference: match &r.owner_member_id {
                    Some(subject) => format!("self:{subject}:{}", r.name),
                    None => format!("ws:{}:{}", member.workspace_name, r.name),
                },
                id: JoinTokenId::from_db(r.id),
                runtime_id: RuntimeId::from_db(r.subject_id),
                pool: r.name,
                minted_by: r.minted_by.map(MemberId::from_db),
                minted_by_email: r.email,
                created_at: r.created_at,
                expires_at: r.expires_at,
                last_used_at: r.last_used_at,
                uses: u64::try_from(r.uses).unwrap_or(0),
            })
            .collect())
    }

    /// Revokes one join token of `owner`'s pools, by id, at once: its next
    /// use is refused on every replica (join tokens are never cached).
    /// Another owner's token is not found.
    pub async fn revoke_join_token(
        &self,
        member: &Member,
        owner: &Owner,
        id: &str,
        now: i64,
    ) -> Result<()> {
        // The id is not echoed: a caller may have pasted the token there.
        let not_found = || Error::not_found("no such join token for these pools");
        let id = JoinTokenId::parse(id).ok_or_else(not_found)?;
        let mut tx = self.writer.begin().await?;
        let found: Option<(String, String, Option<String>)> = sqlx::query_as(&format!(
            "SELECT t.subject_id, rt.name, t.minted_by FROM tokens t JOIN runtimes rt ON rt.id = t.subject_id
             WHERE t.id = $1 AND t.kind = 'join' AND rt.workspace_id = $2 AND rt.owner_member_id {is} $3",
            is = self.dialect.is
        ))
        .bind(id.as_str())
        .bind(member.workspace_id.as_str())
        .bind(owner.member_id())
        .fetch_optional(&mut *tx)
        .await?;
        let Some((runtime, pool, minted_by)) = found else {
            return Err(not_found());
        };
        sqlx::query("DELETE FROM tokens WHERE id = $1 AND kind = 'join'")
            .bind(id.as_str())
            .execute(&mut *tx)
            .await?;
        record(
            &mut tx,
            Actor::Member(member),
            "join_token.revoked",
            id.as_str(),
            json!({ "runtime": runtime, "pool": pool, "mintedBy": minted_by }),
            now,
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Resolves a ref for a job submitted by `member` (SPEC §2 rules 2-5).
    /// A CI principal's jobs go only to its link's pool (SPEC §9).
    pub async fn place(
        &self,
        member: &Member,
        reference: &RuntimeRef,
        requires: &[String],
    ) -> Result<Placement> {
        let placement = self.resolve(member, reference, requires).await?;
        if member.ci {
            let allowed = self.ci_runtime(member).await?;
            let same = match RuntimeRef::parse(&allowed) {
                Ok(link) => self
                    .resolve(member, &link, &[])
                    .await
                    .is_ok_and(|p| p.runtime_id == placement.runtime_id),
                Err(_) => false,
            };
            if !same {
                return Err(Error::refused(
                    Kind::CiNotAllowed,
                    format!(
                        "this repository's CI link sends its jobs to {allowed}; an admin changes that with `drover ci link … --runtime`"
                    ),
                ));
            }
        }
        Ok(placement)
    }

    async fn resolve(
        &self,
        member: &Member,
        reference: &RuntimeRef,
        requires: &[String],
    ) -> Result<Placement> {
        let (owner, target) = match reference {
            RuntimeRef::Personal { .. } if member.ci => {
                return Err(Error::refused(
                    Kind::Forbidden,
                    "a CI principal may target only the workspace's pools (self:ws…), never a personal pool",
                ));
            }
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
                .fetch_optional(&self.reader)
                .await?
                .ok_or_else(|| {
                    Error::not_found(format!("no runner {target:?} in this runtime scope"))
                })?;
            let have = capabilities(&row.labels, &row.detected)?;
            if !caps::satisfies(&have, requires) {
                return Err(Error::refused(
                    Kind::CapabilityMismatch,
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
        let (workspace, owner_id) = (member.workspace_id.as_str(), owner.member_id());
        let args = vec![workspace.into(), owner_id.into(), target.into()];
        let pool: Option<(String, i64)> = self.engine.read(self, &sql, args).await?.pop();
        let (pool_id, has_runners) =
            pool.ok_or_else(|| Error::not_found(format!("no runtime {target:?} in this scope")))?;
        if has_runners == 0 {
            return Err(Error::refused(
                Kind::NoRunners,
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
