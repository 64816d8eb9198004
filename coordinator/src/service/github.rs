//! The GitHub App: install links (GitHub's setup redirect comes back to
//! `http::github_setup`), what the App may reach, registering a GitHub
//! Actions runner beside a workspace runner, and the GitHub runners of
//! revoked workspace runners: removed from GitHub at the revoke, and
//! retried in the background until GitHub lets them go.

use std::sync::Arc;

use drover_wire::{self as wire, ErrorCode};

use super::Services;
use crate::error::{Error, Result};
use crate::github::script::{self, Install};
use crate::github::{GITHUB_COM, GithubApp, Removal, Target, names};
use crate::store::model::NewRunner;
use crate::store::{GithubRunnerRow, Member};

/// Tries to remove the GitHub runner of a revoked workspace runner; what it
/// did, for the revoke's answer. A refusal (busy) or failure is recorded,
/// and `retry_removals` tries again.
pub async fn remove_github_runner(
    st: &Services,
    row: &GithubRunnerRow,
) -> wire::GithubRunnerRemoval {
    let outcome = match st.github.as_ref() {
        None => Err("this coordinator has no GitHub App configured any more".to_owned()),
        Some(app) => try_remove(st, app, row).await,
    };
    let (removed, message, error) = match outcome {
        Ok(Removal::Removed) => (true, format!("GitHub runner {} removed", row.name), None),
        Ok(Removal::Busy) => (
            false,
            format!(
                "GitHub runner {} is running a job, and GitHub keeps a busy runner; it is removed when it is idle (the coordinator retries)",
                row.name
            ),
            Some("busy: running a job".to_owned()),
        ),
        Err(e) => (
            false,
            format!(
                "GitHub runner {} is not removed yet ({e}); the coordinator retries",
                row.name
            ),
            Some(e),
        ),
    };
    if let Err(e) = st
        .store
        .github_runner_removal(&row.runner_id, error.as_deref(), st.now())
        .await
    {
        tracing::warn!(runner = %row.runner_id, error = %e, "could not record a GitHub runner's removal");
    }
    wire::GithubRunnerRemoval {
        name: row.name.clone(),
        removed,
        message,
    }
}

async fn try_remove(
    st: &Services,
    app: &GithubApp,
    row: &GithubRunnerRow,
) -> std::result::Result<Removal, String> {
    let workspace = crate::ids::WorkspaceId::from_db(row.workspace_id.clone());
    let installation = st
        .store
        .installation_for(&workspace, &row.owner, Some(&row.host))
        .await
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("the GitHub App is no longer installed on {}", row.owner))?;
    let host = app.host(&row.host).map_err(|e| e.to_string())?;
    let target = match &row.repo {
        Some(repo) => Target::Repo {
            owner: row.owner.clone(),
            repo: repo.clone(),
        },
        None => Target::Org {
            org: row.owner.clone(),
        },
    };
    app.remove_runner(host, installation.id, &target, &row.name)
        .await
        .map_err(|e| e.to_string())
}

/// Retries the removals GitHub refused or that failed, until each is done.
pub async fn retry_removals(st: &Services) {
    let rows = match st.store.github_runners_to_remove(100).await {
        Ok(rows) => rows,
        Err(e) => {
            tracing::warn!(error = %e, "could not list GitHub runners to remove");
            return;
        }
    };
    for row in rows {
        let r = remove_github_runner(st, &row).await;
        if r.removed {
            tracing::info!(runner = %row.runner_id, github = %row.name, "removed a revoked runner's GitHub runner");
        }
    }
}

/// More labels than this on one runner are refused.
const MAX_LABELS: usize = 20;

pub fn app(st: &Services) -> Result<&Arc<GithubApp>> {
    st.github.as_ref().ok_or_else(|| {
        Error::api(
            ErrorCode::GithubNotConfigured,
            "this coordinator has no GitHub App; start it with --github-app-id, --github-app-slug, --github-app-key-file, --github-client-id and --github-client-secret-file",
        )
    })
}

/// The App's install page on a host, with a one-time state that links
/// the installation to this workspace when GitHub sends the admin back.
pub async fn install_link(
    st: &Services,
    m: &Member,
    req: wire::GithubInstallLinkRequest,
) -> Result<wire::GithubInstallLink> {
    m.require_admin()?;
    let app = app(st)?;
    let host = app.host(req.host.as_deref().unwrap_or(GITHUB_COM))?;
    let (state, expires_at) = st.store.create_link_state(m, &host.name, st.now()).await?;
    Ok(wire::GithubInstallLink {
        url: app.install_url(host, state.expose()),
        host: host.name.clone(),
        expires_at,
    })
}

pub async fn installations(st: &Services, m: &Member) -> Result<wire::GithubInstallationList> {
    m.require_admin()?;
    let installations = st.store.installations(&m.workspace_id).await?;
    Ok(wire::GithubInstallationList {
        installations: installations.into_iter().map(installation).collect(),
    })
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

pub async fn repos(
    st: &Services,
    m: &Member,
    q: wire::GithubRepoQuery,
) -> Result<wire::GithubRepoList> {
    m.require_admin()?;
    let page = q.page.unwrap_or(1);
    let per_page = q.per_page.unwrap_or(30);
    if !(1..=10_000).contains(&page) || !(1..=100).contains(&per_page) {
        return Err(Error::bad_request("page must be 1-10000 and perPage 1-100"));
    }
    let app = app(st)?;
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
    Ok(wire::GithubRepoList {
        repos: all
            .into_iter()
            .skip(start)
            .take(per_page as usize)
            .collect(),
        next_page,
    })
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

pub async fn install_runner(
    st: &Services,
    m: &Member,
    req: wire::GithubInstallRequest,
) -> Result<wire::GithubInstall> {
    m.require_admin()?;
    let (target, extra_labels) = target_of(&req)?;
    let app = app(st)?;
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
            m,
            &crate::store::Owner::Workspace,
            &NewRunner {
                name: Some(drover_name),
                pool: req.pool.clone(),
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
            m,
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
    Ok(wire::GithubInstall {
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
    })
}
