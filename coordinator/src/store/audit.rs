//! The audit log: who did what, when, to what, and from which surface.
//!
//! Each state-changing action writes its entry in its own transaction, so
//! an action is never without its entry, nor an entry without its action.
//! Targets are ids and details are names, roles and limits: no token, code
//! or job env value is ever passed here.

use drover_domain::model::AUDIT_ACTIONS;
use serde_json::Value;
use sqlx::Row;

use super::Store;
use super::model::AuditEvent;
use crate::store::error::{Error, Result};
use drover_domain::member::{Member, Surface};

/// Who acted, when it was not a signed-in member.
pub(super) enum Actor<'a> {
    Member(&'a Member),
    /// A runner, with its own credential (leaving).
    Runner {
        id: &'a str,
        workspace: &'a str,
    },
    /// A pool's join token (a runner joining), named by its pool.
    JoinToken {
        pool: &'a str,
        workspace: &'a str,
    },
}

/// Writes one entry in `conn`'s transaction.
pub(super) async fn record(
    conn: &mut sqlx::AnyConnection,
    actor: Actor<'_>,
    action: &'static str,
    target: &str,
    detail: Value,
    now: i64,
) -> Result<()> {
    debug_assert!(AUDIT_ACTIONS.contains(&action), "{action}");
    let (workspace, kind, id, email, surface) = match actor {
        Actor::Member(m) => (
            m.workspace_id.as_str(),
            "member",
            m.id.as_str(),
            Some(m.email.as_str()),
            m.surface,
        ),
        Actor::Runner { id, workspace } => (workspace, "runner", id, None, Surface::Rest),
        Actor::JoinToken { pool, workspace } => {
            (workspace, "join_token", pool, None, Surface::Rest)
        }
    };
    sqlx::query(
        "INSERT INTO audit_events (workspace_id, at, actor_kind, actor_id, actor_email, surface, action, target, detail)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
    )
    .bind(workspace)
    .bind(now)
    .bind(kind)
    .bind(id)
    .bind(email)
    .bind(surface.as_str())
    .bind(action)
    .bind(target)
    .bind(detail.to_string())
    .execute(conn)
    .await?;
    Ok(())
}

/// What `GET /v1/workspace/audit` asks for.
#[derive(Debug, Default)]
pub struct AuditQuery {
    /// Entries at or after this time (Unix ms).
    pub since: Option<i64>,
    /// A member's id or email, a runner's id, or a join token's pool id.
    pub actor: Option<String>,
    pub action: Option<String>,
    /// Entries older than this id (the previous page's `nextBefore`).
    pub before: Option<String>,
    pub limit: Option<u32>,
}

/// Largest page.
pub const MAX_AUDIT_PAGE: u32 = 500;
const DEFAULT_AUDIT_PAGE: u32 = 100;

impl Store {
    /// A page of `admin`'s workspace's audit log, newest first, and where
    /// the next page starts.
    pub async fn list_audit(
        &self,
        admin: &Member,
        q: &AuditQuery,
    ) -> Result<(Vec<AuditEvent>, Option<i64>)> {
        let limit = q.limit.unwrap_or(DEFAULT_AUDIT_PAGE);
        if !(1..=MAX_AUDIT_PAGE).contains(&limit) {
            return Err(Error::bad_request(format!(
                "limit must be 1..={MAX_AUDIT_PAGE}"
            )));
        }
        if let Some(action) = &q.action
            && !AUDIT_ACTIONS.contains(&action.as_str())
        {
            return Err(Error::bad_request(format!(
                "unknown action {action:?}; one of: {}",
                AUDIT_ACTIONS.join(", ")
            )));
        }
        let before = q
            .before
            .as_deref()
            .map(|b| {
                b.parse::<i64>()
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or_else(|| Error::bad_request("before must be an event id"))
            })
            .transpose()?;
        let rows = sqlx::query(
            "SELECT seq, at, actor_kind, actor_id, actor_email, surface, action, target, detail
             FROM audit_events
             WHERE workspace_id = $1 AND at >= $2 AND seq < $3
               AND ($4 = '' OR actor_id = $4 OR lower(actor_email) = lower($4))
               AND ($5 = '' OR action = $5)
             ORDER BY seq DESC LIMIT $6",
        )
        .bind(admin.workspace_id.as_str())
        .bind(q.since.unwrap_or(0))
        .bind(before.unwrap_or(i64::MAX))
        .bind(q.actor.as_deref().unwrap_or(""))
        .bind(q.action.as_deref().unwrap_or(""))
        .bind(i64::from(limit) + 1)
        .fetch_all(&self.reader)
        .await?;
        let mut events = rows
            .iter()
            .map(|row| {
                let detail: String = row.try_get("detail")?;
                Ok(AuditEvent {
                    seq: row.try_get("seq")?,
                    at: row.try_get("at")?,
                    actor_kind: row.try_get("actor_kind")?,
                    actor_id: row.try_get("actor_id")?,
                    actor_email: row.try_get("actor_email")?,
                    surface: row.try_get("surface")?,
                    action: row.try_get("action")?,
                    target: row.try_get("target")?,
                    detail: serde_json::from_str(&detail)
                        .map_err(|e| Error::Corrupt(format!("audit detail: {e}")))?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let next = if events.len() > limit as usize {
            events.truncate(limit as usize);
            events.last().map(|e| e.seq)
        } else {
            None
        };
        Ok((events, next))
    }
}
