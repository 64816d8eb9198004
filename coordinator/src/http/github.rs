//! The GitHub App surface: install links (GitHub's setup redirect comes
//! back to `github_setup.rs`), what
//! the App may reach, and registering a GitHub Actions runner beside a
//! workspace runner (`/v1/workspace/runners/github-install`).

use axum::Router;
use axum::extract::State;
use axum::response::IntoResponse;
use drover_wire as wire;

use super::extract::{AuthMember, Json, OptionalJson, Query};
use super::{AppState, Routes as _, created};
use crate::error::Result;
use crate::service::github;
use drover_wire::op;

pub fn router() -> Router<AppState> {
    Router::new()
        .at(op::CreateGithubInstallLink, install_link)
        .at(op::ListGithubInstallations, installations)
        .at(op::ListGithubRepos, repos)
        .at(op::InstallGithubWorkspaceRunner, install_runner)
}

pub(super) async fn install_link(
    State(st): State<AppState>,
    AuthMember(m): AuthMember,
    OptionalJson(req): OptionalJson<wire::GithubInstallLinkRequest>,
) -> Result<impl IntoResponse> {
    Ok(created(github::install_link(&st, &m, req).await?))
}

pub(super) async fn installations(
    State(st): State<AppState>,
    AuthMember(m): AuthMember,
) -> Result<axum::Json<wire::GithubInstallationList>> {
    Ok(axum::Json(github::installations(&st, &m).await?))
}

pub(super) async fn repos(
    State(st): State<AppState>,
    AuthMember(m): AuthMember,
    Query(q): Query<wire::GithubRepoQuery>,
) -> Result<axum::Json<wire::GithubRepoList>> {
    Ok(axum::Json(github::repos(&st, &m, q).await?))
}

pub(super) async fn install_runner(
    State(st): State<AppState>,
    AuthMember(m): AuthMember,
    Json(req): Json<wire::GithubInstallRequest>,
) -> Result<impl IntoResponse> {
    Ok(created(github::install_runner(&st, &m, req).await?))
}
