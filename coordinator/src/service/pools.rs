//! Pools (runtimes): the member's own and the workspace's (admins create),
//! and their join tokens: minted per pool, listed and revoked.

use drover_wire as wire;

use super::{Scope, Services, dto};
use crate::error::Result;
use crate::store::Member;

pub async fn create(
    svc: &Services,
    m: &Member,
    scope: Scope,
    req: wire::CreateRuntime,
) -> Result<wire::Runtime> {
    let owner = scope.admin_owner(m)?;
    let rt = svc
        .store
        .create_runtime(m, &owner, &req.name, svc.now())
        .await?;
    Ok(rt.into())
}

pub async fn list(svc: &Services, m: &Member, scope: Scope) -> Result<wire::RuntimeList> {
    let runtimes = svc.store.list_runtimes(m, &scope.owner(m)).await?;
    Ok(wire::RuntimeList {
        runtimes: dto::all(runtimes),
    })
}

/// A join token for pool `pool` (its name or id), shown once.
pub async fn mint_join_token(
    svc: &Services,
    m: &Member,
    scope: Scope,
    pool: &str,
    req: wire::CreateJoinToken,
) -> Result<wire::JoinToken> {
    let owner = scope.admin_owner(m)?;
    let token = svc
        .store
        .create_join_token(m, &owner, pool, req.ttl_seconds, svc.now())
        .await?;
    Ok(dto::join_token(token, &svc.public_url))
}

/// The join tokens of the scope's pools that have not expired (never the
/// tokens themselves); the workspace's are for its admins.
pub async fn join_tokens(svc: &Services, m: &Member, scope: Scope) -> Result<wire::JoinTokenList> {
    let owner = scope.admin_owner(m)?;
    let tokens = svc.store.list_join_tokens(m, &owner, svc.now()).await?;
    Ok(wire::JoinTokenList {
        join_tokens: dto::all(tokens),
    })
}

pub async fn revoke_join_token(svc: &Services, m: &Member, scope: Scope, id: &str) -> Result<()> {
    let owner = scope.admin_owner(m)?;
    Ok(svc
        .store
        .revoke_join_token(m, &owner, id, svc.now())
        .await?)
}
