//! Pairing, listing and revoking runners.

use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use drover_wire as wire;

use super::dto;
use super::extract::{AuthMember, OptionalJson};
use super::{AppState, Routes as _};
use crate::error::Result;
use crate::ids::JobId;
use crate::store::{Owner, RunnerScope};
use crate::wake::{Signal, Wake};
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
    let paired = st
        .store
        .pair_runner(&m, &Owner::Member(m.id.clone()), &req, st.now())
        .await?;
    Ok((
        StatusCode::CREATED,
        axum::Json(wire::PairedRunner::from(paired)),
    ))
}

pub(super) async fn list_mine(
    State(st): State<AppState>,
    AuthMember(m): AuthMember,
) -> Result<axum::Json<wire::RunnerList>> {
    let runners = st
        .store
        .list_runners(&m, RunnerScope::Mine, st.now())
        .await?;
    Ok(axum::Json(wire::RunnerList {
        runners: dto::all(runners),
    }))
}

async fn revoke(
    st: &AppState,
    m: &crate::store::Member,
    owner: Owner,
    id: &str,
) -> Result<StatusCode> {
    let changed = st.store.revoke_runner(m, &owner, id, st.now()).await?;
    st.announce(revoked_signals(changed, id));
    Ok(StatusCode::NO_CONTENT)
}

/// What revoking runner `id` tells this coordinator and the others: the
/// jobs that changed, who to wake for them, and that its credential is gone
/// (so no cache keeps it).
pub(super) fn revoked_signals(changed: Vec<(JobId, Option<Wake>)>, id: &str) -> Vec<Signal> {
    let mut signals = Vec::new();
    for (job, wake) in changed {
        signals.push(Signal::Job {
            job: job.to_string(),
        });
        signals.extend(wake.map(Signal::from));
    }
    signals.push(Signal::Revoked {
        runner: id.to_owned(),
    });
    signals
}

pub(super) async fn revoke_mine(
    State(st): State<AppState>,
    AuthMember(m): AuthMember,
    Path(id): Path<String>,
) -> Result<StatusCode> {
    let owner = Owner::Member(m.id.clone());
    revoke(&st, &m, owner, &id).await
}

pub(super) async fn pair_ws(
    State(st): State<AppState>,
    AuthMember(m): AuthMember,
    OptionalJson(req): OptionalJson<wire::PairRunner>,
) -> Result<impl IntoResponse> {
    m.require_admin()?;
    let paired = st
        .store
        .pair_runner(&m, &Owner::Workspace, &req, st.now())
        .await?;
    Ok((
        StatusCode::CREATED,
        axum::Json(wire::PairedRunner::from(paired)),
    ))
}

pub(super) async fn roster(
    State(st): State<AppState>,
    AuthMember(m): AuthMember,
) -> Result<axum::Json<wire::RunnerList>> {
    let runners = st
        .store
        .list_runners(&m, RunnerScope::Roster, st.now())
        .await?;
    Ok(axum::Json(wire::RunnerList {
        runners: dto::all(runners),
    }))
}

pub(super) async fn list_owned(
    State(st): State<AppState>,
    AuthMember(m): AuthMember,
) -> Result<axum::Json<wire::RunnerList>> {
    let runners = st
        .store
        .list_runners(&m, RunnerScope::WorkspaceOwned, st.now())
        .await?;
    Ok(axum::Json(wire::RunnerList {
        runners: dto::all(runners),
    }))
}

/// Revokes a workspace runner; one registered with GitHub loses its
/// GitHub runner too, and the answer says what GitHub did.
pub(super) async fn revoke_ws(
    State(st): State<AppState>,
    AuthMember(m): AuthMember,
    Path(id): Path<String>,
) -> Result<axum::response::Response> {
    m.require_admin()?;
    let github = st.store.github_runner(&m.workspace_id, &id).await?;
    let status = revoke(&st, &m, Owner::Workspace, &id).await?;
    Ok(match github {
        None => status.into_response(),
        Some(row) => {
            let removal = crate::service::github::remove_github_runner(&st, &row).await;
            axum::Json(wire::RevokedRunner { github: removal }).into_response()
        }
    })
}
