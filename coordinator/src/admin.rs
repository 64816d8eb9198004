//! `drover-coordinator admin …`: operations run against the database directly.

use drover_wire::MemberCredential;

use crate::clock::{Clock, SystemClock};
use crate::error::Result;
use crate::ids::Secret;
use crate::secrets::{self, KeySource};
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
    result.map(credential)
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
    result.map(credential)
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
