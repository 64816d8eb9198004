//! The GitHub App surface: install links (GitHub's setup redirect comes
//! back to `github_setup.rs`), what
//! the App may reach, and registering a GitHub Actions runner beside a
//! workspace runner (`/v1/workspace/runners/github-install`), on-demand
//! pools and GitHub's webhook deliveries (`service::on_demand`).

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use drover_wire as wire;

use super::extract::{AuthMember, Json, OptionalJson, Query, RawJson};
use super::{AppState, Routes as _, created};
use crate::error::Result;
use crate::service::{github, on_demand};
use drover_wire::op;

pub fn router() -> Router<AppState> {
    Router::new()
        .at(op::CreateGithubInstallLink, install_link)
        .at(op::ListGithubInstallations, installations)
        .at(op::ListGithubRepos, repos)
        .at(op::InstallGithubWorkspaceRunner, install_runner)
        .at(op::SetGithubOnDemand, set_on_demand)
        .at(op::ListGithubOnDemand, list_on_demand)
        .at(op::RemoveGithubOnDemand, remove_on_demand)
        .at(op::GithubWebhook, webhook)
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

pub(super) async fn set_on_demand(
    State(st): State<AppState>,
    AuthMember(m): AuthMember,
    Json(req): Json<wire::GithubOnDemandRequest>,
) -> Result<axum::Json<wire::GithubOnDemand>> {
    Ok(axum::Json(on_demand::set(&st, &m, req).await?))
}

pub(super) async fn list_on_demand(
    State(st): State<AppState>,
    AuthMember(m): AuthMember,
) -> Result<axum::Json<wire::GithubOnDemandList>> {
    Ok(axum::Json(on_demand::list(&st, &m).await?))
}

pub(super) async fn remove_on_demand(
    State(st): State<AppState>,
    AuthMember(m): AuthMember,
    Path(id): Path<String>,
) -> Result<StatusCode> {
    on_demand::remove(&st, &m, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// GitHub's deliveries: the body is read raw, as it was signed.
pub(super) async fn webhook(
    State(st): State<AppState>,
    headers: HeaderMap,
    RawJson(body): RawJson,
) -> Result<impl IntoResponse> {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let delivery = on_demand::Delivery {
        event: header("x-github-event"),
        id: header("x-github-delivery"),
        signature: header("x-hub-signature-256"),
        enterprise_host: header("x-github-enterprise-host"),
    };
    let receipt = on_demand::webhook(&st, &delivery, &body).await?;
    Ok((StatusCode::ACCEPTED, axum::Json(receipt)))
}
