//! CI links (`/v1/workspace/ci/links`): which repositories' GitHub Actions
//! OIDC tokens may submit jobs here, where their workflows run, and the
//! workflow file that does it.

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get};
use drover_wire as wire;
use schemars::JsonSchema;
use serde::Deserialize;

use super::AppState;
use super::extract::{AuthMember, Json, Query};
use crate::error::{Error, Result};
use crate::github::{GITHUB_COM, names, workflow};
use crate::refs::RuntimeRef;
use crate::store::{CiLink, ci_member_id};

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/workspace/ci/links", get(list).put(set))
        .route("/v1/workspace/ci/links/{owner}/{repo}", delete(remove))
        .route(
            "/v1/workspace/ci/links/{owner}/{repo}/workflow",
            get(render),
        )
}

/// Most labels a workflow's `runs-on` may list here.
const MAX_RUNS_ON: usize = 10;

fn link(l: CiLink) -> wire::CiLink {
    wire::CiLink {
        principal: ci_member_id(&l.host, &l.repository),
        repository: l.repository,
        host: l.host,
        runs_on: l.runs_on,
        runtime: l.runtime,
        updated_at: l.updated_at,
    }
}

/// `github.com`, or a GHE host the App is configured with.
fn host(st: &AppState, host: Option<&str>) -> Result<String> {
    let name = host.unwrap_or(GITHUB_COM).to_ascii_lowercase();
    if name == GITHUB_COM {
        return Ok(name);
    }
    match &st.github {
        Some(app) => Ok(app.host(&name)?.name.clone()),
        None => Err(Error::bad_request(format!(
            "unknown GitHub host {name:?}; this coordinator knows github.com"
        ))),
    }
}

fn repository(s: &str) -> Result<String> {
    names::repository(s)
        .map(|(o, r)| format!("{o}/{r}").to_ascii_lowercase())
        .ok_or_else(|| {
            Error::bad_request(format!(
                "repository {s:?} is not owner/name as GitHub names them"
            ))
        })
}

pub(super) async fn set(
    State(st): State<AppState>,
    AuthMember(m): AuthMember,
    Json(req): Json<wire::CiLinkRequest>,
) -> Result<axum::Json<wire::CiLink>> {
    m.require_admin()?;
    let repo = repository(&req.repository)?;
    let host = host(&st, req.host.as_deref())?;
    if let Some(labels) = &req.runs_on {
        if labels.is_empty() || labels.len() > MAX_RUNS_ON {
            return Err(Error::bad_request(format!(
                "runsOn must list 1-{MAX_RUNS_ON} runner labels"
            )));
        }
        if let Some(bad) = labels.iter().find(|l| !names::valid_label(l)) {
            return Err(Error::bad_request(format!(
                "runsOn label {bad:?} must be 1-64 of letters, digits, '.', '_', '-'"
            )));
        }
    }
    if let Some(runtime) = &req.runtime {
        match RuntimeRef::parse(runtime) {
            Ok(RuntimeRef::Workspace { .. }) => {}
            Ok(_) => {
                return Err(Error::bad_request(format!(
                    "runtime {runtime:?} is a personal pool; CI may target only the workspace's pools (self:ws…)"
                )));
            }
            Err(e) => return Err(Error::bad_request(e.to_string())),
        }
    }
    let saved = st
        .store
        .set_ci_link(
            &m,
            &host,
            &repo,
            req.runs_on.as_deref(),
            req.runtime.as_deref(),
            st.now(),
        )
        .await?;
    Ok(axum::Json(link(saved)))
}

pub(super) async fn list(
    State(st): State<AppState>,
    AuthMember(m): AuthMember,
) -> Result<axum::Json<wire::CiLinkList>> {
    m.require_admin()?;
    let links = st.store.ci_links(&m.workspace_id).await?;
    Ok(axum::Json(wire::CiLinkList {
        links: links.into_iter().map(link).collect(),
    }))
}

/// The host a link route names (`?host=`).
#[derive(Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct HostParam {
    /// `github.com` (the default) or a GitHub Enterprise Server host.
    pub host: Option<String>,
}

/// The (host, repository) a link route names, checked.
fn named(st: &AppState, owner: &str, repo: &str, q: &HostParam) -> Result<(String, String)> {
    let repository = repository(&format!("{owner}/{repo}"))?;
    Ok((host(st, q.host.as_deref())?, repository))
}

pub(super) async fn remove(
    State(st): State<AppState>,
    AuthMember(m): AuthMember,
    Path((owner, repo)): Path<(String, String)>,
    Query(q): Query<HostParam>,
) -> Result<StatusCode> {
    m.require_admin()?;
    let (host, repo) = named(&st, &owner, &repo, &q)?;
    st.store.remove_ci_link(&m, &host, &repo, st.now()).await?;
    Ok(StatusCode::NO_CONTENT)
}

pub(super) async fn render(
    State(st): State<AppState>,
    AuthMember(m): AuthMember,
    Path((owner, repo)): Path<(String, String)>,
    Query(q): Query<HostParam>,
) -> Result<Response> {
    m.require_admin()?;
    let (host, repo) = named(&st, &owner, &repo, &q)?;
    let l = st
        .store
        .ci_link(&m.workspace_id, &host, &repo)
        .await?
        .ok_or_else(|| Error::not_found(format!("{repo} on {host} is not linked")))?;
    let runs_on = l.runs_on.unwrap_or_else(|| vec!["self-hosted".into()]);
    let yaml = workflow::render(&workflow::Workflow {
        repository: &l.repository,
        coordinator_url: &st.public_url,
        audience: &st.oidc.config.audience,
        runs_on: &runs_on,
        runtime: l.runtime.as_deref().unwrap_or("self:ws"),
    });
    Ok((
        [(header::CONTENT_TYPE, "application/yaml; charset=utf-8")],
        yaml,
    )
        .into_response())
}
