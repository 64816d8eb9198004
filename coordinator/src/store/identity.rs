//! Workspaces, members and bearer credentials.

use sqlx::Row;

use super::sqlite_writer::Cols;
use super::{Store, on_unique};
use crate::ids::{
    JobId, JoinTokenId, LeaseId, MemberId, REPLICA_PREFIX, RunnerId, RuntimeId, Secret, TokenId,
    TokenKind, WorkspaceId,
};
use crate::refs::{DEFAULT_POOL, valid_segment};
use crate::store::backend::FromCols;
use crate::store::error::{Error, Result};
use drover_domain::member::{Member, Principal, Role, RunnerAuth, Surface};

pub(super) fn valid_email(email: &str) -> bool {
    email.len() <= 254
        && email.split_once('@').is_some_and(|(local, domain)| {
            !local.is_empty() && domain.contains('.') && !email.chars().any(char::is_whitespace)
        })
}

/// Whether `name` may name a workspace: a ref segment, not `ws` or `self`,
/// and not like an id or a token (`ws_…`, `job_…`, `drv_…`, …), in any
/// case, so a name can never be read as another workspace's id.
fn valid_workspace_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    let ids = [
        WorkspaceId::PREFIX,
        MemberId::PREFIX,
        RuntimeId::PREFIX,
        RunnerId::PREFIX,
        JobId::PREFIX,
        LeaseId::PREFIX,
        TokenId::PREFIX,
        JoinTokenId::PREFIX,
        REPLICA_PREFIX,
    ];
    let tokens = [
        TokenKind::User,
        TokenKind::Runner,
        TokenKind::Join,
        TokenKind::Pairing,
    ]
    .map(TokenKind::prefix);
    valid_segment(name)
        && lower != "ws"
        && lower != "self"
        && !ids.iter().any(|p| {
            lower
                .strip_prefix(p)
                .is_some_and(|rest| rest.starts_with('_'))
        })
        && !tokens.iter().any(|p| lower.starts_with(p))
}

/// Adds a member to workspace `ws` and mints their API token, in `conn`'s transaction.
async fn insert_member(
    conn: &mut sqlx::AnyConnection,
    ws: WorkspaceId,
    workspace_name: String,
    email: &str,
    role: Role,
    now: i64,
) -> Result<(Member, Secret)> {
    let member = Member {
        id: MemberId::generate(),
        email: email.to_owned(),
        role,
        workspace_id: ws,
        workspace_name,
        token_id: None,
        surface: Surface::Rest,
        ci: false,
    };
    sqlx::query("INSERT INTO members (id, workspace_id, email, role, created_at, joined_at) VALUES ($1, $2, $3, $4, $5, $5)")
        .bind(member.id.as_str())
        .bind(member.workspace_id.as_str())
        .bind(email)
        .bind(role.as_str())
        .bind(now)
        .execute(&mut *conn)
        .await
        .map_err(|e| {
            on_unique(e, || {
                format!("{email} is already a member of {}", member.workspace_name)
            })
        })?;
    let token = Secret::generate(TokenKind::User);
    let token_id = insert_member_token(conn, &token, &member.id, "api token", now).await?;
    Ok((
        Member {
            token_id: Some(token_id),
            ..member
        },
        token,
    ))
}

impl Store {
    /// Creates a workspace, its default pool and its first admin, all or
    /// nothing. Names are unique whatever their case.
    pub async fn bootstrap_workspace(
        &self,
        name: &str,
        email: &str,
        now: i64,
    ) -> Result<(Member, Secret)> {
        if !valid_workspace_name(name) {
            return Err(Error::bad_request(format!(
                "invalid workspace name {name:?}: 1-64 of [A-Za-z0-9._-], starting alphanumeric, \
                 not \"ws\" or \"self\", and not like an id (ws_…, job_…, …)"
            )));
        }
        if !valid_email(email) {
            return Err(Error::bad_request(format!("invalid email {email:?}")));
        }
        let mut tx = self.writer.begin().await?;
        let ws = WorkspaceId::generate();
        sqlx::query("INSERT INTO workspaces (id, name, created_at) VALUES ($1, $2, $3)")
            .bind(ws.as_str())
            .bind(name)
            .bind(now)
            .execute(&mut *tx)
            .await
            .map_err(|e| {
                on_unique(e, || {
                    format!("a workspace named {name:?} already exists (names ignore case)")
                })
            })?;
        sqlx::query("INSERT INTO runtimes (id, workspace_id, owner_member_id, name, created_at) VALUES ($1, $2, NULL, $3, $4)")
            .bind(RuntimeId::generate().as_str())
            .bind(ws.as_str())
            .bind(DEFAULT_POOL)
            .bind(now)
            .execute(&mut *tx)
            .await?;
        let created = insert_member(&mut tx, ws, name.to_owned(), email, Role::Admin, now).await?;
        tx.commit().await?;
        Ok(created)
    }

    /// Adds a member to a workspace (named in any case) and mints their API
    /// token (shown once).
    pub async fn add_member(
        &self,
        workspace: &str,
        email: &str,
        role: Role,
        now: i64,
    ) -> Result<(Member, Secret)> {
        if !valid_email(email) {
            return Err(Error::bad_request(format!("invalid email {email:?}")));
        }
        let mut tx = self.writer.begin().await?;
        let ws: Option<(String, String)> =
            sqlx::query_as("SELECT id, name FROM workspaces WHERE lower(name) = lower($1)")
                .bind(workspace)
                .fetch_optional(&mut *tx)
                .await?;
        let (id, name) =
            ws.ok_or_else(|| Error::not_found(format!("no workspace named {workspace:?}")))?;
        let created =
            insert_member(&mut tx, WorkspaceId::from_db(id), name, email, role, now).await?;
        tx.commit().await?;
        Ok(created)
    }

    /// Who presents `token`, if anyone. Expired and revoked tokens are nobody.
    pub async fn authenticate(&self, token: &Secret, now: i64) -> Result<Option<Principal>> {
        let Some(kind) = TokenKind::of(token.expose()) else {
            return Ok(None);
        };
        let hash = token.hash();
        let principal = match kind {
            TokenKind::User => {
                const SQL: &str = "SELECT m.id, m.email, m.role, w.id, w.name, t.id, t.last_used_at
                     FROM tokens t JOIN members m ON m.id = t.subject_id JOIN workspaces w ON w.id = m.workspace_id
                     WHERE t.hash = $1 AND t.kind = 'user' AND (t.expires_at IS NULL OR t.expires_at > $2)
                       AND m.removed_at IS NULL";
                let args = vec![hash.as_str().into(), now.into()];
                let found: Option<(Member, Option<i64>)> =
                    self.engine.read(self, SQL, args).await?.pop();
                let Some((member, last_used)) = found else {
                    return Ok(None);
                };
                if last_used.is_none_or(|t| now - t >= LAST_USED_GRAIN_MS) {
                    self.touch_token(&hash, now).await;
                }
                Some(Principal::Member(member))
            }
            TokenKind::Runner => {
                const SQL: &str = "SELECT r.id, r.runtime_id, r.labels, r.detected, r.slots FROM tokens t JOIN runners r ON r.id = t.subject_id
                     WHERE t.hash = $1 AND t.kind = 'runner' AND r.revoked_at IS NULL";
                self.engine
                    .read::<Principal>(self, SQL, vec![hash.as_str().into()])
                    .await?
                    .pop()
            }
            // Never cached: a revoked join token is refused at once, on every replica.
            TokenKind::Join => sqlx::query_as::<_, (String, String)>(
                "SELECT subject_id, id FROM tokens WHERE hash = $1 AND kind = 'join' AND expires_at > $2 AND id IS NOT NULL",
            )
            .bind(&hash)
            .bind(now)
            .fetch_optional(&self.reader)
            .await?
            .map(|(runtime, id)| Principal::Join {
                runtime_id: RuntimeId::from_db(runtime),
                token_id: JoinTokenId::from_db(id),
            }),
            // Redeemed for a token, never presented as one.
            TokenKind::Pairing => None,
        };
        Ok(principal)
    }

    /// Records that a member token was just used. Best effort: a failure
    /// costs the caller nothing but an older `lastUsedAt`.
    async fn touch_token(&self, hash: &str, now: i64) {
        let touched = sqlx::query(
            "UPDATE tokens SET last_used_at = $1 WHERE hash = $2 AND (last_used_at IS NULL OR last_used_at <= $3)",
        )
        .bind(now)
        .bind(hash)
        .bind(now - LAST_USED_GRAIN_MS)
        .execute(&self.writer)
        .await;
        if let Err(e) = touched {
            tracing::warn!(error = %e, "could not record a token's last use");
        }
    }
}

/// `last_used_at` moves at most this often per token (one write a minute
/// for a busy token, not one a request).
const LAST_USED_GRAIN_MS: i64 = 60_000;

/// A member token's row: the member, and when the token was last used.
fn token_member(row: &impl Cols) -> Result<(Member, Option<i64>)> {
    Ok((member_at(row)?, row.col(6)?))
}

impl FromCols for (Member, Option<i64>) {
    fn from_cols(row: &impl Cols) -> Result<Self> {
        token_member(row)
    }
}

impl FromCols for Principal {
    fn from_cols(row: &impl Cols) -> Result<Self> {
        token_runner(row)
    }
}

/// A runner token's row: `r.id, r.runtime_id, r.labels, r.detected, r.slots`.
fn token_runner(row: &impl Cols) -> Result<Principal> {
    Ok(Principal::Runner(RunnerAuth {
        runner_id: RunnerId::from_db(row.col(0)?),
        runtime_id: RuntimeId::from_db(row.col(1)?),
        capabilities: super::capabilities(&row.col::<String>(2)?, &row.col::<String>(3)?)?,
        slots: u32::try_from(row.col::<i64>(4)?).unwrap_or(1),
    }))
}

/// A member from a row of `m.id, m.email, m.role, w.id, w.name, t.id`, by position.
fn member_at(row: &impl Cols) -> Result<Member> {
    let role: String = row.col(2)?;
    Ok(Member {
        id: MemberId::from_db(row.col(0)?),
        email: row.col(1)?,
        role: Role::parse(&role).ok_or_else(|| Error::Corrupt(format!("role {role}")))?,
        workspace_id: WorkspaceId::from_db(row.col(3)?),
        workspace_name: row.col(4)?,
        token_id: row.col::<Option<String>>(5)?.map(TokenId::from_db),
        surface: Surface::Rest,
        ci: false,
    })
}

/// A member from a row of `id, email, role, ws_id, ws_name, token_id`.
pub(super) fn member_of(row: &sqlx::any::AnyRow) -> Result<Member> {
    let role: String = row.try_get("role")?;
    Ok(Member {
        id: MemberId::from_db(row.try_get("id")?),
        email: row.try_get("email")?,
        role: Role::parse(&role).ok_or_else(|| Error::Corrupt(format!("role {role}")))?,
        workspace_id: WorkspaceId::from_db(row.try_get("ws_id")?),
        workspace_name: row.try_get("ws_name")?,
        token_id: row
            .try_get::<Option<String>, _>("token_id")?
            .map(TokenId::from_db),
        surface: Surface::Rest,
        ci: false,
    })
}

/// Mints a member API token named `name`, in `conn`'s transaction.
pub(super) async fn insert_member_token(
    conn: &mut sqlx::AnyConnection,
    token: &Secret,
    member: &MemberId,
    name: &str,
    now: i64,
) -> Result<TokenId> {
    let id = TokenId::generate();
    sqlx::query("INSERT INTO tokens (hash, kind, subject_id, created_at, expires_at, id, name) VALUES ($1, 'user', $2, $3, NULL, $4, $5)")
        .bind(token.hash())
        .bind(member.as_str())
        .bind(now)
        .bind(id.as_str())
        .bind(name)
        .execute(conn)
        .await?;
    Ok(id)
}

pub(super) async fn insert_token(
    conn: &mut sqlx::AnyConnection,
    token: &Secret,
    kind: TokenKind,
    subject: &str,
    now: i64,
    expires_at: Option<i64>,
) -> Result<()> {
    sqlx::query("INSERT INTO tokens (hash, kind, subject_id, created_at, expires_at) VALUES ($1, $2, $3, $4, $5)")
        .bind(token.hash())
        .bind(kind.as_str())
        .bind(subject)
        .bind(now)
        .bind(expires_at)
        .execute(conn)
        .await?;
    Ok(())
}

/// Mints a join token for pool `runtime`, minted by `member`, in `conn`'s
/// transaction.
pub(super) async fn insert_join_token(
    conn: &mut sqlx::AnyConnection,
    token: &Secret,
    runtime: &str,
    member: &MemberId,
    now: i64,
    expires_at: i64,
) -> Result<JoinTokenId> {
    let id = JoinTokenId::generate();
    sqlx::query("INSERT INTO tokens (hash, kind, subject_id, created_at, expires_at, id, minted_by, uses) VALUES ($1, 'join', $2, $3, $4, $5, $6, 0)")
        .bind(token.hash())
        .bind(runtime)
        .bind(now)
        .bind(expires_at)
        .bind(id.as_str())
        .bind(member.as_str())
        .execute(conn)
        .await?;
    Ok(id)
}

#[cfg(test)]
mod tests {
    use super::valid_workspace_name;

    #[test]
    fn workspace_names_never_look_like_ids_or_tokens() {
        for ok in ["acme", "ACME", "web-team", "wsx", "jobs", "rt-1", "co"] {
            assert!(valid_workspace_name(ok), "{ok}");
        }
        for bad in [
            "ws",
            "WS",
            "Self",
            "ws_01jd0000",
            "WS_abc",
            "job_x",
            "rn_1",
            "rt_a",
            "usr_b",
            "lse_c",
            "co_d",
            "drv_e",
            "rnr_f",
            "djt_g",
            "jt_h",
            "",
            "-acme",
        ] {
            assert!(!valid_workspace_name(bad), "{bad}");
        }
    }
}
