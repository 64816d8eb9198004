//! Pairing a device: one-time codes redeemed for a member API token, and
//! the member's tokens, listed and revoked one by one.

use crate::store::error::Kind;
use serde_json::json;
use sqlx::Row;

use super::Store;
use super::audit::{Actor, record};
use super::identity::{insert_member_token, member_of};
use super::model::{ApiToken, DeviceToken, PairingCode, Removed};
use crate::ids::{MemberId, RunnerId, Secret, TokenId, TokenKind};
use crate::store::error::{Error, Result};
use drover_domain::member::Member;

/// How long a pairing code works.
pub const PAIRING_CODE_TTL_MS: i64 = 10 * 60 * 1000;

/// How long an invite works.
pub const INVITE_TTL_MS: i64 = 7 * 24 * 3600 * 1000;

/// How long after it expires a pairing code is kept (then retention
/// purges it): so a late redeem still learns the code was used or expired.
pub const PAIRING_CODE_GRACE_MS: i64 = 24 * 3600 * 1000;

/// How long a revoked member token's row says who revoked it, from where
/// and when (a laptop may sleep in a drawer for weeks); then it goes, and
/// the token is merely unknown.
pub const REVOCATION_KEEP_MS: i64 = 90 * 24 * 3600 * 1000;

/// Longest device name, in characters.
const MAX_DEVICE_NAME: usize = 64;

/// A device name, trimmed: 1-64 characters, none of them control characters.
fn device_name(name: &str) -> Result<&str> {
    let name = name.trim();
    if name.is_empty()
        || name.chars().count() > MAX_DEVICE_NAME
        || name.chars().any(char::is_control)
    {
        return Err(Error::bad_request(format!(
            "deviceName must be 1-{MAX_DEVICE_NAME} characters, without control characters"
        )));
    }
    Ok(name)
}

fn unknown_code() -> Error {
    Error::not_found("no such pairing code")
}

impl Store {
    /// A new one-time code for `member`, valid for ten minutes. The
    /// member's codes a day past their expiry go at the same time (as
    /// retention's purge would).
    pub async fn create_pairing_code(&self, member: &Member, now: i64) -> Result<PairingCode> {
        let mut tx = self.writer.begin().await?;
        let code = insert_code(&mut tx, &member.id, &member.id, Purpose::Pair, now).await?;
        record(
            &mut tx,
            Actor::Member(member),
            "pairing_code.created",
            member.id.as_str(),
            json!({ "expiresAt": code.expires_at }),
            now,
        )
        .await?;
        tx.commit().await?;
        Ok(code)
    }

    /// Redeems `code` once for a member API token named `name`. Marking
    /// the code used and minting the token are one transaction, and only
    /// an unused code is marked: of two redeems at once, one wins. A
    /// malformed code costs no lookup, an unknown one a read by hash.
    pub async fn redeem_pairing_code(
        &self,
        code: &str,
        name: &str,
        now: i64,
    ) -> Result<DeviceToken> {
        let name = device_name(name)?;
        let code = Secret::parse(TokenKind::Pairing, code).ok_or_else(unknown_code)?;
        let hash = code.hash();
        // Unknown codes (guesses) cost one read by hash, never a write.
        let known: Option<i64> =
            sqlx::query_scalar("SELECT expires_at FROM pairing_codes WHERE hash = $1")
                .bind(&hash)
                .fetch_optional(&self.reader)
                .await?;
        if known.is_none() {
            return Err(unknown_code());
        }
        let mut tx = self.writer.begin().await?;
        let redeemed: Option<(String, String)> = sqlx::query_as(
            "UPDATE pairing_codes SET used_at = $1 WHERE hash = $2 AND used_at IS NULL AND expires_at > $3 RETURNING member_id, purpose",
        )
        .bind(now)
        .bind(&hash)
        .bind(now)
        .fetch_optional(&mut *tx)
        .await?;
        let Some((member_id, purpose)) = redeemed else {
            let used: Option<Option<i64>> =
                sqlx::query_scalar("SELECT used_at FROM pairing_codes WHERE hash = $1")
                    .bind(&hash)
                    .fetch_optional(&mut *tx)
                    .await?;
            return Err(match used {
                None => unknown_code(),
                Some(Some(_)) => Error::refused(
                    Kind::PairingCodeUsed,
                    "this pairing code was already used; ask for a new one",
                ),
                Some(None) => Error::refused(
                    Kind::PairingCodeExpired,
                    "this pairing code has expired; ask for a new one",
                ),
            });
        };
        let member_id = MemberId::from_db(member_id);
        let invite = purpose == Purpose::Invite.as_str();
        if invite {
            sqlx::query("UPDATE members SET joined_at = $1 WHERE id = $2 AND joined_at IS NULL")
                .bind(now)
                .bind(member_id.as_str())
                .execute(&mut *tx)
                .await?;
        }
        let token = Secret::generate(TokenKind::User);
        let token_id = insert_member_token(&mut tx, &token, &member_id, name, now).await?;
        let row = sqlx::query(
            "SELECT m.id, m.email, m.role, w.id AS ws_id, w.name AS ws_name, t.id AS token_id
             FROM members m JOIN workspaces w ON w.id = m.workspace_id JOIN tokens t ON t.subject_id = m.id
             WHERE m.id = $1 AND t.id = $2",
        )
        .bind(member_id.as_str())
        .bind(token_id.as_str())
        .fetch_one(&mut *tx)
        .await?;
        let member = member_of(&row)?;
        record(
            &mut tx,
            Actor::Member(&member),
            if invite {
                "invite.accepted"
            } else {
                "pairing_code.redeemed"
            },
            token_id.as_str(),
            json!({ "name": name }),
            now,
        )
        .await?;
        tx.commit().await?;
        Ok(DeviceToken {
            token,
            token_id,
            name: name.to_owned(),
            member,
        })
    }

    /// `member`'s API tokens, oldest first.
    pub async fn list_member_tokens(&self, member: &Member, now: i64) -> Result<Vec<ApiToken>> {
        let rows = sqlx::query(
            "SELECT id, name, created_at, last_used_at FROM tokens
             WHERE subject_id = $1 AND kind = 'user' AND id IS NOT NULL
               AND (expires_at IS NULL OR expires_at > $2)
             ORDER BY created_at, id",
        )
        .bind(member.id.as_str())
        .bind(now)
        .fetch_all(&self.reader)
        .await?;
        rows.iter().map(|row| api_token(member, row)).collect()
    }

    /// The API token `member` signed in with, if it has an id (and still
    /// exists: it may have been revoked since it was checked).
    pub async fn current_token(&self, member: &Member) -> Result<Option<ApiToken>> {
        let Some(id) = &member.token_id else {
            return Ok(None);
        };
        let row = sqlx::query(
            "SELECT id, name, created_at, last_used_at FROM tokens
             WHERE id = $1 AND subject_id = $2 AND kind = 'user'",
        )
        .bind(id.as_str())
        .bind(member.id.as_str())
        .fetch_optional(&self.reader)
        .await?;
        row.map(|row| api_token(member, &row)).transpose()
    }

    /// Revokes one of `member`'s own API tokens, at once (member tokens
    /// are not cached), and the runners its device paired. Another
    /// member's token is not found.
    pub async fn revoke_member_token(
        &self,
        member: &Member,
        id: &str,
        now: i64,
    ) -> Result<Removed> {
        // The id is not echoed: a caller may have pasted a secret there.
        let not_found = || Error::not_found("no such token of yours");
        let id = TokenId::parse(id).ok_or_else(not_found)?;
        let mut tx = self.writer.begin().await?;
        let runners: Vec<String> = sqlx::query_scalar(
            "UPDATE runners SET revoked_at = $1 WHERE paired_by = $2 AND revoked_at IS NULL
               AND EXISTS (SELECT 1 FROM tokens WHERE id = $2 AND subject_id = $3 AND kind = 'user')
             RETURNING id",
        )
        .bind(now)
        .bind(id.as_str())
        .bind(member.id.as_str())
        .fetch_all(&mut *tx)
        .await?;
        let revoked = revoke_member_tokens(
            &mut tx,
            member,
            member.id.as_str(),
            Some(&id),
            Revocation::Revoked,
            now,
        )
        .await?;
        let Some((_, name)) = revoked.into_iter().next() else {
            return Err(not_found());
        };
        let mut removed = Removed::default();
        for runner in runners {
            let runner = RunnerId::from_db(runner);
            let changed = self.revoke_in(&mut tx, &runner, now).await?;
            record(
                &mut tx,
                Actor::Member(member),
                "runner.revoked",
                runner.as_str(),
                json!({ "jobsChanged": changed.len(), "reason": "the device token that paired it was revoked" }),
                now,
            )
            .await?;
            removed.jobs.extend(changed);
            removed.runners.push(runner);
        }
        record(
            &mut tx,
            Actor::Member(member),
            "token.revoked",
            id.as_str(),
            json!({ "name": name, "runnersRevoked": removed.runners.len() }),
            now,
        )
        .await?;
        tx.commit().await?;
        Ok(removed)
    }

    /// Why a member token presented now is refused, when it was revoked
    /// (not merely unknown): who revoked it, from where and when, as the
    /// device presenting it is told.
    pub async fn token_revocation(&self, token: &Secret) -> Result<Option<String>> {
        let row: Option<(String, i64, String, String)> = sqlx::query_as(
            "SELECT m.email, r.revoked_at, r.revoked_by, r.surface || ':' || r.reason
             FROM token_revocations r JOIN members m ON m.id = r.member_id WHERE r.hash = $1",
        )
        .bind(token.hash())
        .fetch_optional(&self.reader)
        .await?;
        Ok(row.map(|(email, at, by, how)| {
            let (surface, reason) = how.split_once(':').unwrap_or((&how, ""));
            let from = match surface {
                "cli" => "the drover CLI",
                "desktop" => "the desktop app",
                "mcp" => "an MCP client",
                _ => "the API",
            };
            let when = utc_minute(at);
            match reason {
                "removed" => format!(
                    "this device was signed out: {by} removed {email} from the workspace, from {from}, at {when}"
                ),
                _ if by == email => format!(
                    "this device was signed out: its token was revoked from {from} (signed in as {by}) at {when}"
                ),
                _ => format!(
                    "this device was signed out: {by} revoked its token from {from} at {when}"
                ),
            }
        }))
    }
}

/// `2026-12-05 17:42 UTC` for Unix milliseconds.
fn utc_minute(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let (y, m, d) = drover_domain::calendar::civil_from_days(secs.div_euclid(86_400));
    let minute = secs.rem_euclid(86_400) / 60;
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02} UTC",
        minute / 60,
        minute % 60
    )
}

/// Why member tokens are revoked (`token_revocations.reason`).
#[derive(Debug, Clone, Copy)]
pub(super) enum Revocation {
    /// By the member themself, from one of their devices or the CLI.
    Revoked,
    /// With the member, removed from the workspace by an admin.
    Removed,
}

/// Deletes member `who`'s API tokens (only token `id`, when given), in
/// `tx`, each leaving its hash in `token_revocations` with who (`by`) did
/// it from where, so a device presenting it is told. Answers each token's
/// id and name.
pub(super) async fn revoke_member_tokens(
    tx: &mut sqlx::AnyConnection,
    by: &Member,
    who: &str,
    id: Option<&TokenId>,
    reason: Revocation,
    now: i64,
) -> Result<Vec<(Option<String>, Option<String>)>> {
    let rows: Vec<(String, Option<String>, Option<String>)> = match id {
        Some(id) => sqlx::query_as(
            "DELETE FROM tokens WHERE id = $1 AND subject_id = $2 AND kind = 'user' RETURNING hash, id, name",
        )
        .bind(id.as_str())
        .bind(who),
        None => sqlx::query_as(
            "DELETE FROM tokens WHERE subject_id = $1 AND kind = 'user' RETURNING hash, id, name",
        )
        .bind(who),
    }
    .fetch_all(&mut *tx)
    .await?;
    let reason = match reason {
        Revocation::Revoked => "revoked",
        Revocation::Removed => "removed",
    };
    for (hash, _, _) in &rows {
        sqlx::query(
            "INSERT INTO token_revocations (hash, member_id, revoked_at, revoked_by, surface, reason)
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(hash)
        .bind(who)
        .bind(now)
        .bind(&by.email)
        .bind(by.surface.as_str())
        .bind(reason)
        .execute(&mut *tx)
        .await?;
    }
    Ok(rows.into_iter().map(|(_, id, name)| (id, name)).collect())
}

/// What a one-time code is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Purpose {
    /// Pairing a device of a member.
    Pair,
    /// An invited member's first token.
    Invite,
}

impl Purpose {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Self::Pair => "pair",
            Self::Invite => "invite",
        }
    }

    fn ttl_ms(self) -> i64 {
        match self {
            Self::Pair => PAIRING_CODE_TTL_MS,
            Self::Invite => INVITE_TTL_MS,
        }
    }
}

/// Mints a one-time code for `member`, made by `created_by` (the member
/// themself, or the admin inviting them), in `conn`'s transaction. The
/// member's codes a day past their expiry go at the same time (as
/// retention's purge would).
pub(super) async fn insert_code(
    conn: &mut sqlx::AnyConnection,
    member: &MemberId,
    created_by: &MemberId,
    purpose: Purpose,
    now: i64,
) -> Result<PairingCode> {
    let code = Secret::generate(TokenKind::Pairing);
    let expires_at = now + purpose.ttl_ms();
    sqlx::query("DELETE FROM pairing_codes WHERE member_id = $1 AND expires_at < $2")
        .bind(member.as_str())
        .bind(now - PAIRING_CODE_GRACE_MS)
        .execute(&mut *conn)
        .await?;
    sqlx::query(
        "INSERT INTO pairing_codes (hash, member_id, created_at, expires_at, used_at, purpose, created_by) VALUES ($1, $2, $3, $4, NULL, $5, $6)",
    )
    .bind(code.hash())
    .bind(member.as_str())
    .bind(now)
    .bind(expires_at)
    .bind(purpose.as_str())
    .bind(created_by.as_str())
    .execute(&mut *conn)
    .await?;
    Ok(PairingCode { code, expires_at })
}

/// A token from a row of `id, name, created_at, last_used_at`.
fn api_token(member: &Member, row: &sqlx::any::AnyRow) -> Result<ApiToken> {
    let id = TokenId::from_db(row.try_get("id")?);
    Ok(ApiToken {
        current: member.token_id.as_ref() == Some(&id),
        id,
        name: row
            .try_get::<Option<String>, _>("name")?
            .unwrap_or_default(),
        created_at: row.try_get("created_at")?,
        last_used_at: row.try_get("last_used_at")?,
    })
}

#[cfg(test)]
mod tests {
    use super::device_name;

    #[test]
    fn device_names_are_short_printable_and_trimmed() {
        assert_eq!(device_name("  laptop ").unwrap(), "laptop");
        assert_eq!(device_name("Ana's Mac · 2").unwrap(), "Ana's Mac · 2");
        for bad in ["", "   ", "a\nb", "tab\there", "\u{7f}"] {
            assert!(device_name(bad).is_err(), "{bad:?}");
        }
        assert!(device_name(&"x".repeat(64)).is_ok());
        assert!(device_name(&"x".repeat(65)).is_err());
    }
}
