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

use super::dto;
use super::extract::{AuthMember, Json, OptionalJson};
use super::{AppState, Routes as _};
use crate::error::Result;
use crate::store::Owner;
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
    let tokens = st
        .store
        .list_join_tokens(&m, &Owner::Member(m.id.clone()), st.now())
        .await?;
    Ok(axum::Json(wire::JoinTokenList {
        join_tokens: dto::all(tokens),
    }))
}

pub(super) async fn revoke_join_token_mine(
    State(st): State<AppState>,
    AuthMember(m): AuthMember,
    Path(id): Path<String>,
) -> Result<StatusCode> {
    st.store
        .revoke_join_token(&m, &Owner::Member(m.id.clone()), &id, st.now())
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

pub(super) async fn list_join_tokens_ws(
    State(st): State<AppState>,
    AuthMember(m): AuthMember,
) -> Result<axum::Json<wire::JoinTokenList>> {
    m.require_admin()?;
    let tokens = st
        .store
        .list_join_tokens(&m, &Owner::Workspace, st.now())
        .await?;
    Ok(axum::Json(wire::JoinTokenList {
        join_tokens: dto::all(tokens),
    }))
}

pub(super) async fn revoke_join_token_ws(
    State(st): State<AppState>,
    AuthMember(m): AuthMember,
    Path(id): Path<String>,
) -> Result<StatusCode> {
    m.require_admin()?;
    st.store
        .revoke_join_token(&m, &Owner::Workspace, &id, st.now())
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

pub(super) async fn create_mine(
    State(st): State<AppState>,
    AuthMember(m): AuthMember,
    Json(req): Json<wire::CreateRuntime>,
) -> Result<impl IntoResponse> {
    let rt = st
        .store
        .create_runtime(&m, &Owner::Member(m.id.clone()), &req.name, st.now())
        .await?;
    Ok((StatusCode::CREATED, axum::Json(wire::Runtime::from(rt))))
}

pub(super) async fn list_mine(
    State(st): State<AppState>,
    AuthMember(m): AuthMember,
) -> Result<axum::Json<wire::RuntimeList>> {
    let runtimes = st
        .store
        .list_runtimes(&m, &Owner::Member(m.id.clone()))
        .await?;
    Ok(axum::Json(wire::RuntimeList {
        runtimes: dto::all(runtimes),
    }))
}

pub(super) async fn join_token_mine(
    State(st): State<AppState>,
    AuthMember(m): AuthMember,
    Path(id): Path<String>,
    OptionalJson(req): OptionalJson<wire::CreateJoinToken>,
) -> Result<impl IntoResponse> {
    let token = st
        .store
        .create_join_token(
            &m,
            &Owner::Member(m.id.clone()),
            &id,
            req.ttl_seconds,
            st.now(),
        )
        .await?;
    Ok((
        StatusCode::CREATED,
        axum::Json(dto::join_token(token, &st.public_url)),
    ))
}

pub(super) async fn create_ws(
    State(st): State<AppState>,
    AuthMember(m): AuthMember,
    Json(req): Json<wire::CreateRuntime>,
) -> Result<impl IntoResponse> {
    m.require_admin()?;
    let rt = st
        .store
        .create_runtime(&m, &Owner::Workspace, &req.name, st.now())
        .await?;
    Ok((StatusCode::CREATED, axum::Json(wire::Runtime::from(rt))))
}

pub(super) async fn list_ws(
    State(st): State<AppState>,
    AuthMember(m): AuthMember,
) -> Result<axum::Json<wire::RuntimeList>> {
    let runtimes = st.store.list_runtimes(&m, &Owner::Workspace).await?;
    Ok(axum::Json(wire::RuntimeList {
        runtimes: dto::all(runtimes),
    }))
}

pub(super) async fn join_token_ws(
    State(st): State<AppState>,
    AuthMember(m): AuthMember,
    Path(id): Path<String>,
    OptionalJson(req): OptionalJson<wire::CreateJoinToken>,
) -> Result<impl IntoResponse> {
    m.require_admin()?;
    let token = st
        .store
        .create_join_token(&m, &Owner::Workspace, &id, req.ttl_seconds, st.now())
        .await?;
    Ok((
        StatusCode::CREATED,
        axum::Json(dto::join_token(token, &st.public_url)),
    ))
}
