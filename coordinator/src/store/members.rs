//! A workspace's members, managed by its admins: invite, list, change a
//! role, remove. A workspace always keeps an admin: the changes that would
//! take its last one are refused, with the workspace's row locked so two
//! at once cannot both pass the check.

use std::collections::HashMap;

use crate::store::error::Kind;
use serde_json::json;
use sqlx::{AnyConnection, Row};

use super::Store;
use super::audit::{Actor, record};
use super::identity::valid_email;
use super::model::{ApiToken, MemberInfo, PairingCode, Removed};
use super::pairing::{Purpose, Revocation, insert_code};
use crate::ids::{JobId, LeaseId, MemberId, RunnerId, TokenId};
use crate::store::error::{Error, Result};
use drover_domain::member::{Member, Role};

const MEMBER_COLUMNS: &str = "id, email, role, joined_at, created_at";

fn no_member(id: &str) -> Error {
    Error::not_found(format!("no member {id:?} in this workspace"))
}

/// Why a member's join tokens and invites are revoked.
#[derive(Clone, Copy)]
enum Reason {
    Removed,
    Demoted,
}

impl Reason {
    fn action(self) -> &'static str {
        match self {
            Self::Removed => "member.removed",
            Self::Demoted => "member.updated",
        }
    }
}

fn parse_role(role: &str) -> Result<Role> {
    Role::parse(role)
        .ok_or_else(|| Error::bad_request(format!("invalid role {role:?}: use admin or member")))
}

fn member_info(row: &sqlx::any::AnyRow) -> Result<MemberInfo> {
    let role: String = row.try_get("role")?;
    Ok(MemberInfo {
        id: MemberId::from_db(row.try_get("id")?),
        email: row.try_get("email")?,
        role: Role::parse(&role).ok_or_else(|| Error::Corrupt(format!("role {role}")))?,
        joined: row.try_get::<Option<i64>, _>("joined_at")?.is_some(),
        created_at: row.try_get("created_at")?,
        tokens: Vec::new(),
    })
}

impl Store {
    /// Locks `admin`'s workspace row until commit (PostgreSQL; SQLite's one
    /// writer serializes anyway), so member changes take turns.
    async fn lock_workspace(&self, tx: &mut AnyConnection, admin: &Member) -> Result<()> {
        sqlx::query(&format!(
            "SELECT id FROM workspaces WHERE id = $1 {}",
            self.dialect.lock_for_update
        ))
        .bind(admin.workspace_id.as_str())
        .fetch_one(tx)
        .await?;
        Ok(())
    }

    /// A current member of `admin`'s workspace, by id.
    async fn member_in(
        &self,
        tx: &mut AnyConnection,
        admin: &Member,
        id: &str,
    ) -> Result<MemberInfo> {
        let id = MemberId::parse(id).ok_or_else(|| no_member(id))?;
        let row = sqlx::query(&format!(
            "SELECT {MEMBER_COLUMNS} FROM members WHERE id = $1 AND workspace_id = $2 AND removed_at IS NULL AND kind = 'person'"
        ))
        .bind(id.as_str())
        .bind(admin.workspace_id.as_str())
        .fetch_optional(tx)
        .await?;
        row.as_ref()
            .map(member_info)
            .transpose()?
            .ok_or_else(|| no_member(id.as_str()))
    }

    /// Refuses a change that takes `target`'s admin role, when they are the
    /// workspace's last admin.
    async fn keep_an_admin(
        &self,
        tx: &mut AnyConnection,
        admin: &Member,
        target: &MemberInfo,
        change: &str,
    ) -> Result<()> {
        if target.role != Role::Admin {
            return Ok(());
        }
        let admins: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM members WHERE workspace_id = $1 AND role = 'admin' AND removed_at IS NULL",
        )
        .bind(admin.workspace_id.as_str())
        .fetch_one(tx)
        .await?;
        if admins <= 1 {
            return Err(Error::refused(
                Kind::LastAdmin,
                format!(
                    "{} is the workspace's last admin and cannot be {change}; make another member admin first",
                    target.email
                ),
            ));
        }
        Ok(())
    }

    /// The workspace's current members (invited ones too), oldest first,
    /// each with their API tokens' names and last use.
    pub async fn list_members(&self, admin: &Member, now: i64) -> Result<Vec<MemberInfo>> {
        let rows = sqlx::query(&format!(
            "SELECT {MEMBER_COLUMNS} FROM members WHERE workspace_id = $1 AND removed_at IS NULL AND kind = 'person' ORDER BY created_at, id"
        ))
        .bind(admin.workspace_id.as_str())
        .fetch_all(&self.reader)
        .await?;
        let tokens = sqlx::query(
            "SELECT t.subject_id, t.id, t.name, t.created_at, t.last_used_at FROM tokens t
             JOIN members m ON m.id = t.subject_id
             WHERE m.workspace_id = $1 AND m.removed_at IS NULL AND t.kind = 'user' AND t.id IS NOT NULL
               AND (t.expires_at IS NULL OR t.expires_at > $2)
             ORDER BY t.created_at, t.id",
        )
        .bind(admin.workspace_id.as_str())
        .bind(now)
        .fetch_all(&self.reader)
        .await?;
        let mut by_member: HashMap<String, Vec<ApiToken>> = HashMap::new();
        for row in &tokens {
            by_member
                .entry(row.try_get("subject_id")?)
                .or_default()
                .push(ApiToken {
                    id: TokenId::from_db(row.try_get("id")?),
                    name: row
                        .try_get::<Option<String>, _>("name")?
                        .unwrap_or_default(),
                    created_at: row.try_get("created_at")?,
                    last_used_at: row.try_get("last_used_at")?,
                    current: false,
                });
        }
        rows.iter()
            .map(|row| {
                let mut m = member_info(row)?;
                m.tokens = by_member.remove(m.id.as_str()).unwrap_or_default();
                Ok(m)
            })
            .collect()
    }

    /// Invites `email` as `role`: the member (not yet joined) and a one-time
    /// code, good for seven days, that they redeem for their first token.
    /// Inviting someone invited but not joined gives them a new code (the
    /// old ones stop working); someone removed comes back as invited.
    pub async fn invite_member(
        &self,
        admin: &Member,
        email: &str,
        role: Option<&str>,
        now: i64,
    ) -> Result<(MemberInfo, PairingCode)> {
        let email = email.trim();
        if !valid_email(email) {
            return Err(Error::bad_request(format!("invalid email {email:?}")));
        }
        let role = role.map(parse_role).transpose()?.unwrap_or(Role::Member);
        let mut tx = self.writer.begin().await?;
        self.lock_workspace(&mut tx, admin).await?;
        let existing = sqlx::query(
            "SELECT id, removed_at, joined_at FROM members WHERE workspace_id = $1 AND lower(email) = lower($2)",
        )
        .bind(admin.workspace_id.as_str())
        .bind(email)
        .fetch_optional(&mut *tx)
        .await?;
        let id = match existing {
            Some(row) => {
                let id = MemberId::from_db(row.try_get("id")?);
                let removed = row.try_get::<Option<i64>, _>("removed_at")?.is_some();
                let joined = row.try_get::<Option<i64>, _>("joined_at")?.is_some();
                if joined && !removed {
                    return Err(Error::conflict(format!(
                        "{email} is already a member of this workspace"
                    )));
                }
                sqlx::query(
                    "UPDATE members SET role = $1, removed_at = NULL, joined_at = NULL WHERE id = $2",
                )
                .bind(role.as_str())
                .bind(id.as_str())
                .execute(&mut *tx)
                .await?;
                sqlx::query("DELETE FROM pairing_codes WHERE member_id = $1 AND used_at IS NULL")
                    .bind(id.as_str())
                    .execute(&mut *tx)
                    .await?;
                id
            }
            None => {
                let id = MemberId::generate();
                sqlx::query(
                    "INSERT INTO members (id, workspace_id, email, role, created_at, joined_at) VALUES ($1, $2, $3, $4, $5, NULL)",
                )
                .bind(id.as_str())
                .bind(admin.workspace_id.as_str())
                .bind(email)
                .bind(role.as_str())
                .bind(now)
                .execute(&mut *tx)
                .await?;
                id
            }
        };
        let code = insert_code(&mut tx, &id, &admin.id, Purpose::Invite, now).await?;
        let info = self.member_in(&mut tx, admin, id.as_str()).await?;
        record(
            &mut tx,
            Actor::Member(admin),
            "member.invited",
            id.as_str(),
            json!({ "email": info.email, "role": role.as_str() }),
            now,
        )
        .await?;
        tx.commit().await?;
        Ok((info, code))
    }

    /// Gives member `id` the role `role`. The last admin keeps theirs.
    pub async fn update_member(
        &self,
        admin: &Member,
        id: &str,
        role: &str,
        now: i64,
    ) -> Result<MemberInfo> {
        let role = parse_role(role)?;
        let mut tx = self.writer.begin().await?;
        self.lock_workspace(&mut tx, admin).await?;
        let target = self.member_in(&mut tx, admin, id).await?;
        if target.role == role {
            return Ok(target);
        }
        self.keep_an_admin(&mut tx, admin, &target, "demoted")
            .await?;
        sqlx::query("UPDATE members SET role = $1 WHERE id = $2")
            .bind(role.as_str())
            .bind(target.id.as_str())
            .execute(&mut *tx)
            .await?;
        // A former admin's workspace join tokens and invites go with the role.
        let (join_tokens, invites) = if target.role == Role::Admin {
            self.revoke_made_by(&mut tx, admin, target.id.as_str(), Reason::Demoted, now)
                .await?
        } else {
            (0, 0)
        };
        record(
            &mut tx,
            Actor::Member(admin),
            "member.updated",
            target.id.as_str(),
            json!({
                "email": target.email,
                "role": role.as_str(),
                "was": target.role.as_str(),
                "joinTokensRevoked": join_tokens,
                "invitesRevoked": invites,
            }),
            now,
        )
        .await?;
        tx.commit().await?;
        Ok(MemberInfo { role, ..target })
    }

    /// Revokes, in `tx`, the join tokens member `who` minted and the unused
    /// invites they created (each audited as done by `admin`, for
    /// `reason`), so nothing they handed out as an admin outlives their
    /// role. `Reason::Demoted` keeps the join tokens of their own pools.
    /// Answers how many of each.
    async fn revoke_made_by(
        &self,
        tx: &mut AnyConnection,
        admin: &Member,
        who: &str,
        reason: Reason,
        now: i64,
    ) -> Result<(usize, usize)> {
        let only_workspace_pools = match reason {
            Reason::Removed => "",
            Reason::Demoted => {
                " AND subject_id IN (SELECT id FROM runtimes WHERE owner_member_id IS NULL)"
            }
        };
        let join_tokens: Vec<(Option<String>, String)> = sqlx::query_as(&format!(
            "DELETE FROM tokens WHERE minted_by = $1 AND kind = 'join'{only_workspace_pools} RETURNING id, subject_id"
        ))
        .bind(who)
        .fetch_all(&mut *tx)
        .await?;
        for (id, runtime) in &join_tokens {
            record(
                &mut *tx,
                Actor::Member(admin),
                "join_token.revoked",
                id.as_deref().unwrap_or(runtime),
                json!({ "runtime": runtime, "mintedBy": who, "reason": reason.action() }),
                now,
            )
            .await?;
        }
        let invites: Vec<String> = sqlx::query_scalar(
            "DELETE FROM pairing_codes WHERE created_by = $1 AND purpose = $2 AND used_at IS NULL AND member_id <> $1
             RETURNING member_id",
        )
        .bind(who)
        .bind(Purpose::Invite.as_str())
        .fetch_all(&mut *tx)
        .await?;
        for invitee in &invites {
            record(
                &mut *tx,
                Actor::Member(admin),
                "invite.revoked",
                invitee,
                json!({ "createdBy": who, "reason": reason.action() }),
                now,
            )
            .await?;
        }
        Ok((join_tokens.len(), invites.len()))
    }

    /// Removes member `id`, all at once: their API tokens and unused codes
    /// stop working, so do the join tokens they minted and the unused
    /// invites they created, their personal runners are revoked, their queued jobs
    /// end `cancelled` and their running ones are told to cancel. Workspace
    /// pools are untouched. The last admin cannot be removed.
    pub async fn remove_member(&self, admin: &Member, id: &str, now: i64) -> Result<Removed> {
        let mut tx = self.writer.begin().await?;
        self.lock_workspace(&mut tx, admin).await?;
        let target = self.member_in(&mut tx, admin, id).await?;
        self.keep_an_admin(&mut tx, admin, &target, "removed")
            .await?;
        let who = target.id.as_str();
        sqlx::query("UPDATE members SET removed_at = $1 WHERE id = $2")
            .bind(now)
            .bind(who)
            .execute(&mut *tx)
            .await?;
        sqlx::query("DELETE FROM pairing_codes WHERE member_id = $1 AND used_at IS NULL")
            .bind(who)
            .execute(&mut *tx)
            .await?;
        let (join_tokens, invites) = self
            .revoke_made_by(&mut tx, admin, who, Reason::Removed, now)
            .await?;
        let mut removed = Removed::default();
        let dequeued: Vec<String> = sqlx::query_scalar(
            "UPDATE jobs SET state = 'cancelled', cancel_requested = 1, finished_at = $1,
                 error = 'cancelled: the member who submitted it was removed'
             WHERE submitter_id = $2 AND state = 'queued' RETURNING id",
        )
        .bind(now)
        .bind(who)
        .fetch_all(&mut *tx)
        .await?;
        removed
            .jobs
            .extend(dequeued.into_iter().map(|j| (JobId::from_db(j), None)));
        // Running ones: their runner is told to cancel (or, on a personal
        // runner revoked below, the release ends them `cancelled`).
        let running: Vec<(String, Option<String>)> = sqlx::query_as(
            "UPDATE jobs SET cancel_requested = 1 WHERE submitter_id = $1 AND state IN ('leased', 'running')
             RETURNING id, lease_id",
        )
        .bind(who)
        .fetch_all(&mut *tx)
        .await?;
        // Their personal runners, and the runners their devices paired
        // into workspace pools.
        let runners: Vec<String> = sqlx::query_scalar(
            "UPDATE runners SET revoked_at = $1 WHERE revoked_at IS NULL
               AND (runtime_id IN (SELECT id FROM runtimes WHERE owner_member_id = $2)
                    OR paired_by IN (SELECT id FROM tokens WHERE subject_id = $2 AND kind = 'user'))
             RETURNING id",
        )
        .bind(now)
        .bind(who)
        .fetch_all(&mut *tx)
        .await?;
        let tokens = super::pairing::revoke_member_tokens(
            &mut tx,
            admin,
            who,
            None,
            Revocation::Removed,
            now,
        )
        .await?
        .len();
        for runner in runners {
            let runner = RunnerId::from_db(runner);
            removed
                .jobs
                .extend(self.revoke_in(&mut tx, &runner, now).await?);
            removed.runners.push(runner);
        }
        for (job, lease) in running {
            removed.jobs.push((JobId::from_db(job), None));
            removed.cancels.extend(lease.map(LeaseId::from_db));
        }
        record(
            &mut tx,
            Actor::Member(admin),
            "member.removed",
            who,
            json!({
                "email": target.email,
                "tokensRevoked": tokens,
                "joinTokensRevoked": join_tokens,
                "invitesRevoked": invites,
                "runnersRevoked": removed.runners.len(),
            }),
            now,
        )
        .await?;
        tx.commit().await?;
        Ok(removed)
    }
}
