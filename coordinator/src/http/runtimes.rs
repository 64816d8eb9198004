//! Pools: `/v1/me/runtimes` (personal, no role gate) and
//! `/v1/workspace/runtimes` (workspace-owned; admins create), and their
//! join tokens: minted per pool, listed and revoked under
//! `/v1/me/join-tokens` (the member's own pools) and
//! `/v1/workspace/join-tokens` (admins).

use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use drover_wire as wire;

use super::extract::{AuthMember, Json, OptionalJson};
use super::{AppState, Routes as _, created};
use crate::error::Result;
use crate::service::{Scope, pools};
use drover_wire::op;

pub fn router() -> Router<AppState> {
    Router::new()
        .at(op::CreateRuntimeMine, create_mine)
        .at(op::ListRuntimesMine, list_mine)
        .at(op::CreateJoinTokenMine, join_token_mine)
        .at(op::CreateRuntimeWorkspace, create_ws)
        .at(op::ListRuntimesWorkspace, list_ws)
        .at(op::CreateJoinTokenWorkspace, join_token_ws)
        .at(op::ListJoinTokensMine, list_join_tokens_mine)
        .at(op::RevokeJoinTokenMine, revoke_join_token_mine)
        .at(op::ListJoinTokensWorkspace, list_join_tokens_ws)
        .at(op::RevokeJoinTokenWorkspace, revoke_join_token_ws)
}

pub(super) async fn list_join_tokens_mine(
    State(st): State<AppState>,
    AuthMember(m): AuthMember,
) -> Result<axum::Json<wire::JoinTokenList>> {
    Ok(axum::Json(pools::join_tokens(&st, &m, Scope::Mine).await?))
}

pub(super) async fn revoke_join_token_mine(
    State(st): State<AppState>,
    AuthMember(m): AuthMember,
    Path(id): Path<String>,
) -> Result<StatusCode> {
    pools::revoke_join_token(&st, &m, Scope::Mine, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

pub(super) async fn list_join_tokens_ws(
    State(st): State<AppState>,
    AuthMember(m): AuthMember,
) -> Result<axum::Json<wire::JoinTokenList>> {
    Ok(axum::Json(
        pools::join_tokens(&st, &m, Scope::Workspace).await?,
    ))
}

pub(super) async fn revoke_join_token_ws(
    State(st): State<AppState>,
    AuthMember(m): AuthMember,
    Path(id): Path<String>,
) -> Result<StatusCode> {
    pools::revoke_join_token(&st, &m, Scope::Workspace, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

pub(super) async fn create_mine(
    State(st): State<AppState>,
    AuthMember(m): AuthMember,
    Json(req): Json<wire::CreateRuntime>,
) -> Result<impl IntoResponse> {
    Ok(created(pools::create(&st, &m, Scope::Mine, req).await?))
}

pub(super) async fn list_mine(
    State(st): State<AppState>,
    AuthMember(m): AuthMember,
) -> Result<axum::Json<wire::RuntimeList>> {
    Ok(axum::Json(pools::list(&st, &m, Scope::Mine).await?))
}

pub(super) async fn join_token_mine(
    State(st): State<AppState>,
    AuthMember(m): AuthMember,
    Path(id): Path<String>,
    OptionalJson(req): OptionalJson<wire::CreateJoinToken>,
) -> Result<impl IntoResponse> {
    Ok(created(
        pools::mint_join_token(&st, &m, Scope::Mine, &id, req).await?,
    ))
}

pub(super) async fn create_ws(
    State(st): State<AppState>,
    AuthMember(m): AuthMember,
    Json(req): Json<wire::CreateRuntime>,
) -> Result<impl IntoResponse> {
    Ok(created(
        pools::create(&st, &m, Scope::Workspace, req).await?,
    ))
}

pub(super) async fn list_ws(
    State(st): State<AppState>,
    AuthMember(m): AuthMember,
) -> Result<axum::Json<wire::RuntimeList>> {
    Ok(axum::Json(pools::list(&st, &m, Scope::Workspace).await?))
}

pub(super) async fn join_token_ws(
    State(st): State<AppState>,
    AuthMember(m): AuthMember,
    Path(id): Path<String>,
    OptionalJson(req): OptionalJson<wire::CreateJoinToken>,
) -> Result<impl IntoResponse> {
    Ok(created(
        pools::mint_join_token(&st, &m, Scope::Workspace, &id, req).await?,
    ))
}
