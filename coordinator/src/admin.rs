//! `drover-coordinator admin …`: operations run against the database directly.

use std::path::Path;

use drover_wire::MemberCredential;

use crate::clock::{Clock, SystemClock};
use crate::error::Result;
use crate::ids::Secret;
use crate::secrets::{self, KeySource};
use crate::store::sqlite_backup::{self, BackupError, BackupReport};
use crate::store::{Durability, Member, Role, Store};

/// Creates a workspace and its first admin.
pub async fn bootstrap(
    database_url: &str,
    workspace: &str,
    email: &str,
) -> Result<MemberCredential> {
    let store = Store::open(database_url, Durability::Full).await?;
    let result = store
        .bootstrap_workspace(workspace, email, SystemClock.now_ms())
        .await;
    store.close().await;
    Ok(credential(result?))
}

/// Adds a member to a workspace.
pub async fn add_member(
    database_url: &str,
    workspace: &str,
    email: &str,
    role: Role,
) -> Result<MemberCredential> {
    let store = Store::open(database_url, Durability::Full).await?;
    let result = store
        .add_member(workspace, email, role, SystemClock.now_ms())
        .await;
    store.close().await;
    Ok(credential(result?))
}

/// Re-seals every stored job env with the current key. Returns the key's
/// id and how many jobs changed.
pub async fn rotate_secrets(
    database_url: &str,
    source: &KeySource,
) -> anyhow::Result<(String, u64)> {
    let keys = secrets::load(source, database_url)?;
    let current = keys.current_id().to_owned();
    let store = Store::open(database_url, Durability::Full).await?;
    store.set_secrets(keys);
    let result = store.rotate_secrets().await;
    store.close().await;
    Ok((current, result?))
}

/// Copies the live SQLite database at `database_url` to the new file `to`
/// (replacing it only with `force`); see `store::sqlite_backup`. On
/// PostgreSQL, refused: its own tools do this (the README, Backups).
pub fn backup(database_url: &str, to: &Path, force: bool) -> Result<BackupReport, BackupError> {
    if !database_url.starts_with("sqlite:") {
        return Err(BackupError::Refused(
            "admin backup copies a SQLite database; back up PostgreSQL with its own tools: \
             pg_dump --format=custom, restored with pg_restore (the README, Backups, has the \
             commands)"
                .into(),
        ));
    }
    let Some(file) = crate::secrets::sqlite_file(database_url) else {
        return Err(BackupError::Refused(
            "an in-memory database has nothing to back up".into(),
        ));
    };
    sqlite_backup::backup(&file, to, force)
}

/// What the CLI prints: the member and their token, shown once.
fn credential((member, token): (Member, Secret)) -> MemberCredential {
    MemberCredential {
        workspace: member.workspace_name,
        email: member.email,
        subject: member.id.to_string(),
        role: member.role.as_str().into(),
        token: token.expose().to_owned(),
    }
}
