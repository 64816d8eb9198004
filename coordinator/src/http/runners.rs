//! Pairing, listing and revoking runners.

use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use drover_wire as wire;

use super::extract::{AuthMember, OptionalJson};
use super::{AppState, Routes as _, created};
use crate::error::Result;
use crate::service::{Scope, runners};
use crate::store::RunnerScope;
use drover_wire::op;

pub fn router() -> Router<AppState> {
    Router::new()
        .at(op::PairRunnerMine, pair_mine)
        .at(op::ListRunnersMine, list_mine)
        .at(op::RevokeRunnerMine, revoke_mine)
        .at(op::PairRunnerWorkspace, pair_ws)
        .at(op::ListRunnerRoster, roster)
        .at(op::ListRunnersWorkspace, list_owned)
        .at(op::RevokeRunnerWorkspace, revoke_ws)
}

pub(super) async fn pair_mine(
    State(st): State<AppState>,
    AuthMember(m): AuthMember,
    OptionalJson(req): OptionalJson<wire::PairRunner>,
) -> Result<impl IntoResponse> {
    Ok(created(runners::pair(&st, &m, Scope::Mine, req).await?))
}

pub(super) async fn list_mine(
    State(st): State<AppState>,
    AuthMember(m): AuthMember,
) -> Result<axum::Json<wire::RunnerList>> {
    Ok(axum::Json(runners::list(&st, &m, RunnerScope::Mine).await?))
}

pub(super) async fn revoke_mine(
    State(st): State<AppState>,
    AuthMember(m): AuthMember,
    Path(id): Path<String>,
) -> Result<StatusCode> {
    runners::revoke(&st, &m, Scope::Mine, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

pub(super) async fn pair_ws(
    State(st): State<AppState>,
    AuthMember(m): AuthMember,
    OptionalJson(req): OptionalJson<wire::PairRunner>,
) -> Result<impl IntoResponse> {
    Ok(created(
        runners::pair(&st, &m, Scope::Workspace, req).await?,
    ))
}

pub(super) async fn roster(
    State(st): State<AppState>,
    AuthMember(m): AuthMember,
) -> Result<axum::Json<wire::RunnerList>> {
    Ok(axum::Json(
        runners::list(&st, &m, RunnerScope::Roster).await?,
    ))
}

pub(super) async fn list_owned(
    State(st): State<AppState>,
    AuthMember(m): AuthMember,
) -> Result<axum::Json<wire::RunnerList>> {
    Ok(axum::Json(
        runners::list(&st, &m, RunnerScope::WorkspaceOwned).await?,
    ))
}

/// A workspace runner registered with GitHub answers what GitHub did with
/// its GitHub runner; any other, `204`.
pub(super) async fn revoke_ws(
    State(st): State<AppState>,
    AuthMember(m): AuthMember,
    Path(id): Path<String>,
) -> Result<Response> {
    Ok(
        match runners::revoke(&st, &m, Scope::Workspace, &id).await? {
            None => StatusCode::NO_CONTENT.into_response(),
            Some(revoked) => axum::Json(revoked).into_response(),
        },
    )
}
