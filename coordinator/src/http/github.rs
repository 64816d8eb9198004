//! The GitHub App surface: install links (GitHub's setup redirect comes
//! back to `github_setup.rs`), what
//! the App may reach, and registering a GitHub Actions runner beside a
//! workspace runner (`/v1/workspace/runners/github-install`).

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use drover_wire as wire;
use drover_wire::ErrorCode;

use super::extract::{AuthMember, Json, OptionalJson, Query};
use super::{AppState, Routes as _};
use crate::error::{Error, Result};
use crate::github::script::{self, Install};
use crate::github::{GITHUB_COM, GithubApp, Target, names};
use drover_wire::op;

pub fn router() -> Router<AppState> {
    Router::new()
        .at(op::CreateGithubInstallLink, install_link)
        .at(op::ListGithubInstallations, installations)
        .at(op::ListGithubRepos, repos)
        .at(op::InstallGithubWorkspaceRunner, install_runner)
}

/// More labels than this on one runner are refused.
const MAX_LABELS: usize = 20;

pub(super) fn app(st: &AppState) -> Result<&Arc<GithubApp>> {
    st.github.as_ref().ok_or_else(|| {
        Error::api(
            ErrorCode::GithubNotConfigured,
            "this coordinator has no GitHub App; start it with --github-app-id, --github-app-slug, --github-app-key-file, --github-client-id and --github-client-secret-file",
        )
    })
}

pub(super) async fn install_link(
    State(st): State<AppState>,
    AuthMember(m): AuthMember,
    OptionalJson(req): OptionalJson<wire::GithubInstallLinkRequest>,
) -> Result<impl IntoResponse> {
    m.require_admin()?;
    let app = app(&st)?;
    let host = app.host(req.host.as_deref().unwrap_or(GITHUB_COM))?;
    let (state, expires_at) = st.store.create_link_state(&m, &host.name, st.now()).await?;
    Ok((
        StatusCode::CREATED,
        axum::Json(wire::GithubInstallLink {
            url: app.install_url(host, state.expose()),
            host: host.name.clone(),
            expires_at,
        }),
    ))
}

pub(super) async fn installations(
    State(st): State<AppState>,
    AuthMember(m): AuthMember,
) -> Result<axum::Json<wire::GithubInstallationList>> {
    m.require_admin()?;
    let installations = st.store.installations(&m.workspace_id).await?;
    Ok(axum::Json(wire::GithubInstallationList {
        installations: installations.into_iter().map(installation).collect(),
    }))
}

fn installation(i: crate::store::Installation) -> wire::GithubInstallation {
    wire::GithubInstallation {
        host: i.host,
        installation_id: i.id,
        account: i.account,
        account_type: i.account_type,
        linked_at: i.linked_at,
    }
}

pub(super) async fn repos(
    State(st): State<AppState>,
    AuthMember(m): AuthMember,
    Query(q): Query<wire::GithubRepoQuery>,
) -> Result<axum::Json<wire::GithubRepoList>> {
    m.require_admin()?;
    let page = q.page.unwrap_or(1);
    let per_page = q.per_page.unwrap_or(30);
    if !(1..=10_000).contains(&page) || !(1..=100).contains(&per_page) {
        return Err(Error::bad_request("page must be 1-10000 and perPage 1-100"));
    }
    let app = app(&st)?;
    // Every linked installation's repositories in order, read GitHub page
    // by GitHub page (100 at a time) until the asked page is full.
    let want = (page as usize) * (per_page as usize) + 1;
    let mut all = Vec::new();
    'installations: for i in st.store.installations(&m.workspace_id).await? {
        let Ok(host) = app.host(&i.host) else {
            continue; // a host this coordinator is no longer configured with
        };
        for github_page in 1.. {
            let (repos, more) = app.installation_repos(host, i.id, github_page, 100).await?;
            all.extend(repos.into_iter().map(|r| wire::GithubRepo {
                host: i.host.clone(),
                full_name: format!("{}/{}", r.owner, r.name),
                owner: r.owner,
                name: r.name,
                private: r.private,
                installation_id: i.id,
            }));
            if all.len() >= want {
                break 'installations;
            }
            if !more {
                break;
            }
        }
    }
    let start = ((page - 1) * per_page) as usize;
    let next_page = (all.len() > start + per_page as usize).then_some(page + 1);
    Ok(axum::Json(wire::GithubRepoList {
        repos: all
            .into_iter()
            .skip(start)
            .take(per_page as usize)
            .collect(),
        next_page,
    }))
}

/// The registration target and labels of a request, checked as GitHub
/// would check them.
fn target_of(req: &wire::GithubInstallRequest) -> Result<(Target, Vec<String>)> {
    let target = match (&req.repository, &req.org) {
        (Some(_), Some(_)) => {
            return Err(Error::bad_request("give repository or org, not both"));
        }
        (None, None) => {
            return Err(Error::bad_request(
                "give repository (owner/name) for a repository runner, or org for an organization runner",
            ));
        }
        (Some(r), None) => {
            let (owner, repo) = names::repository(r).ok_or_else(|| {
                Error::bad_request(format!(
                    "repository {r:?} is not owner/name as GitHub names them (owner: 1-39 letters, digits or single hyphens; name: 1-100 of letters, digits, '.', '-', '_')"
                ))
            })?;
            Target::Repo {
                owner: owner.to_owned(),
                repo: repo.to_owned(),
            }
        }
        (None, Some(org)) => {
            if !names::valid_login(org) {
                return Err(Error::bad_request(format!(
                    "org {org:?} is not a GitHub login (1-39 letters, digits or single hyphens)"
                )));
            }
            Target::Org { org: org.clone() }
        }
    };
    if let Some(group) = &req.runner_group {
        if matches!(target, Target::Repo { .. }) {
            return Err(Error::bad_request(
                "runnerGroup is for organization runners only (give org, not repository)",
            ));
        }
        if !names::valid_runner_group(group) {
            return Err(Error::bad_request(
                "runnerGroup must be 1-64 printable characters, without commas, quotes, backslashes, '`' or '$'",
            ));
        }
    }
    if req.labels.len() > MAX_LABELS {
        return Err(Error::bad_request(format!("at most {MAX_LABELS} labels")));
    }
    let mut labels = Vec::new();
    for label in &req.labels {
        if !names::valid_label(label) {
            return Err(Error::bad_request(format!(
                "label {label:?} must be 1-64 of letters, digits, '.', '_', '-'"
            )));
        }
        if !labels
            .iter()
            .any(|l: &String| l.eq_ignore_ascii_case(label))
        {
            labels.push(label.clone());
        }
    }
    Ok((target, labels))
}

pub(super) async fn install_runner(
    State(st): State<AppState>,
    AuthMember(m): AuthMember,
    Json(req): Json<wire::GithubInstallRequest>,
) -> Result<impl IntoResponse> {
    m.require_admin()?;
    let (target, extra_labels) = target_of(&req)?;
    let app = app(&st)?;
    if let Some(host) = &req.host {
        app.host(host)?;
    }
    let wanted_host = req.host.as_deref().map(str::to_ascii_lowercase);
    let owner = target.owner();
    let found = st
        .store
        .installation_for(&m.workspace_id, owner, wanted_host.as_deref())
        .await?;
    let Some(installation) = found else {
        let on = wanted_host.as_deref().unwrap_or("any host");
        return Err(Error::not_found(format!(
            "the GitHub App is not installed on {owner} ({on}) for this workspace; install it there first (POST /v1/workspace/github-app/install-link, or `drover github link`)"
        )));
    };
    let host = app.host(&installation.host)?;
    let registration = app
        .registration_token(host, installation.id, &target)
        .await?;
    let drover_name: String = format!(
        "gh-{}",
        match &target {
            Target::Repo { owner, repo } => format!("{owner}-{repo}"),
            Target::Org { org } => org.clone(),
        }
    )
    .chars()
    .take(64)
    .collect();
    let paired = st
        .store
        .pair_runner(
            &m,
            &crate::store::Owner::Workspace,
            &wire::PairRunner {
                name: Some(drover_name),
                runtime: req.pool.clone(),
                labels: vec!["github-actions".into()],
            },
            st.now(),
        )
        .await?;
    let runner_id = paired.runner.id.to_string();
    let pool_id = paired.runner.runtime_id.to_string();
    let github_name = format!("drover-{runner_id}");
    let mut labels = vec!["self-hosted".to_owned(), script::pool_label(&pool_id)];
    labels.extend(extra_labels);
    let repo = match &target {
        Target::Repo { repo, .. } => Some(repo.as_str()),
        Target::Org { .. } => None,
    };
    st.store
        .record_github_runner(
            &m,
            &runner_id,
            &host.name,
            owner,
            repo,
            &github_name,
            st.now(),
        )
        .await?;
    let github_url = target.web_url(host);
    let script = script::render(&Install {
        coordinator_url: &st.public_url,
        runner_id: &runner_id,
        runner_token: paired.token.expose(),
        pool_id: &pool_id,
        pool_name: &paired.runner.runtime_name,
        github_url: &github_url,
        registration_token: registration.expose(),
        github_name: &github_name,
        labels: &labels,
        runner_group: req.runner_group.as_deref(),
        ephemeral: req.ephemeral,
    });
    let hint = wire::WorkflowHint {
        runs_on: vec!["self-hosted".into(), script::pool_label(&pool_id)],
        runtime: format!("self:ws:{pool_id}"),
        yaml: script::workflow_hint_yaml(&pool_id),
    };
    Ok((
        StatusCode::CREATED,
        axum::Json(wire::GithubInstall {
            runner: paired.runner.into(),
            github: wire::GithubRunnerTarget {
                host: host.name.clone(),
                url: github_url,
                name: github_name,
                labels,
                runner_group: req.runner_group,
                ephemeral: req.ephemeral,
            },
            script,
            workflow_hint: hint,
        }),
    ))
}
