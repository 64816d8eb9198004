//! CI links (`/v1/workspace/ci/links`): which repositories' GitHub Actions
//! OIDC tokens may submit jobs here, where their workflows run, and the
//! workflow file that does it.

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use drover_wire as wire;

use super::extract::{AuthMember, Json, Query};
use super::{AppState, Routes as _};
use crate::error::Result;
use crate::service::ci;
use drover_wire::op;

pub fn router() -> Router<AppState> {
    Router::new()
        .at(op::ListCiLinks, list)
        .at(op::SetCiLink, set)
        .at(op::RemoveCiLink, remove)
        .at(op::GetCiWorkflow, render)
}

pub(super) async fn set(
    State(st): State<AppState>,
    AuthMember(m): AuthMember,
    Json(req): Json<wire::CiLinkRequest>,
) -> Result<axum::Json<wire::CiLink>> {
    Ok(axum::Json(ci::set(&st, &m, req).await?))
}

pub(super) async fn list(
    State(st): State<AppState>,
    AuthMember(m): AuthMember,
) -> Result<axum::Json<wire::CiLinkList>> {
    Ok(axum::Json(ci::list(&st, &m).await?))
}

pub(super) async fn remove(
    State(st): State<AppState>,
    AuthMember(m): AuthMember,
    Path((owner, repo)): Path<(String, String)>,
    Query(q): Query<wire::CiLinkQuery>,
) -> Result<StatusCode> {
    ci::remove(&st, &m, &owner, &repo, q).await?;
    Ok(StatusCode::NO_CONTENT)
}

pub(super) async fn render(
    State(st): State<AppState>,
    AuthMember(m): AuthMember,
    Path((owner, repo)): Path<(String, String)>,
    Query(q): Query<wire::CiLinkQuery>,
) -> Result<Response> {
    let yaml = ci::workflow(&st, &m, &owner, &repo, q).await?;
    Ok((
        [(header::CONTENT_TYPE, "application/yaml; charset=utf-8")],
        yaml,
    )
        .into_response())
}
