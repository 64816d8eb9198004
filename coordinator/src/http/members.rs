//! The workspace's members, for its admins (`/v1/workspace/members`), and
//! its audit log (`/v1/workspace/audit`).

use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use drover_wire as wire;

use super::extract::{AuthMember, Json, Query};
use super::{AppState, Routes as _, created};
use crate::error::Result;
use crate::service::members;
use drover_wire::op;

pub fn router() -> Router<AppState> {
    Router::new()
        .at(op::ListMembers, list)
        .at(op::InviteMember, invite)
        .at(op::UpdateMember, update)
        .at(op::RemoveMember, remove)
        .at(op::ListAuditEvents, audit)
}

pub(super) async fn list(
    State(st): State<AppState>,
    AuthMember(m): AuthMember,
) -> Result<axum::Json<wire::MemberList>> {
    Ok(axum::Json(members::list(&st, &m).await?))
}

pub(super) async fn invite(
    State(st): State<AppState>,
    AuthMember(m): AuthMember,
    Json(req): Json<wire::InviteMember>,
) -> Result<impl IntoResponse> {
    Ok(created(members::invite(&st, &m, req).await?))
}

pub(super) async fn update(
    State(st): State<AppState>,
    AuthMember(m): AuthMember,
    Path(id): Path<String>,
    Json(req): Json<wire::UpdateMember>,
) -> Result<axum::Json<wire::Member>> {
    Ok(axum::Json(members::update(&st, &m, &id, req).await?))
}

pub(super) async fn remove(
    State(st): State<AppState>,
    AuthMember(m): AuthMember,
    Path(id): Path<String>,
) -> Result<StatusCode> {
    members::remove(&st, &m, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

pub(super) async fn audit(
    State(st): State<AppState>,
    AuthMember(m): AuthMember,
    Query(q): Query<wire::AuditQuery>,
) -> Result<axum::Json<wire::AuditPage>> {
    Ok(axum::Json(members::audit(&st, &m, q).await?))
}
