//! CI links: which repositories' GitHub Actions OIDC tokens may submit
//! jobs here, where their workflows run, and the workflow file that does it.

use drover_wire as wire;

use super::Services;
use crate::error::{Error, Result};
use crate::github::{GITHUB_COM, names, workflow};
use crate::refs::RuntimeRef;
use crate::store::{CiLink, CiLinkSpec, CiPolicy, Member, ci_member_id};

/// Most labels a workflow's `runs-on` may list here.
const MAX_RUNS_ON: usize = 10;

/// Most ref patterns, and most events, a link may list.
const MAX_SCOPE: usize = 20;

fn link(l: CiLink) -> wire::CiLink {
    wire::CiLink {
        principal: ci_member_id(&l.host, &l.repository),
        repository: l.repository,
        host: l.host,
        runs_on: l.runs_on,
        runtime: l.runtime,
        refs: l.policy.refs,
        events: l.policy.events,
        repository_id: l.repository_id,
        updated_at: l.updated_at,
    }
}

/// `refs/…`, 1-255 printable characters without spaces, `*` only last.
fn valid_ref_pattern(p: &str) -> bool {
    let body = p.strip_suffix('*').unwrap_or(p);
    p.starts_with("refs/")
        && p.len() <= 255
        && !body.contains('*')
        && p.chars().all(|c| c.is_ascii_graphic())
}

/// A GitHub event name: `push`, `pull_request`, `workflow_dispatch`, …
fn valid_event(e: &str) -> bool {
    (1..=64).contains(&e.len()) && e.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')
}

/// The link's `refs` and `events`, checked.
fn policy(req: &wire::CiLinkRequest) -> Result<CiPolicy> {
    let list = |field: &str, items: &Option<Vec<String>>, ok: fn(&str) -> bool, shape: &str| {
        let Some(items) = items else {
            return Ok(None);
        };
        if items.is_empty() || items.len() > MAX_SCOPE {
            return Err(Error::bad_request(format!(
                "{field} must list 1-{MAX_SCOPE} entries (leave it out for the default)"
            )));
        }
        if let Some(bad) = items.iter().find(|i| !ok(i)) {
            return Err(Error::bad_request(format!(
                "{field} entry {bad:?} must be {shape}"
            )));
        }
        let mut unique: Vec<String> = Vec::new();
        for i in items {
            if !unique.contains(i) {
                unique.push(i.clone());
            }
        }
        Ok(Some(unique))
    };
    Ok(CiPolicy {
        refs: list(
            "refs",
            &req.refs,
            valid_ref_pattern,
            "a ref (refs/heads/main, refs/tags/v*: a trailing * matches any rest)",
        )?,
        events: list(
            "events",
            &req.events,
            valid_event,
            "a GitHub event name (push, pull_request, workflow_dispatch, …)",
        )?,
    })
}

/// GitHub's id of `repository` on `host`, read through the workspace's
/// installation of the App on its owner: the link pins it.
async fn repository_id(st: &Services, m: &Member, host: &str, repository: &str) -> Result<i64> {
    let app = super::github::app(st)?;
    let (owner, name) = repository.split_once('/').expect("owner/name, checked");
    let installation = st
        .store
        .installation_for(&m.workspace_id, owner, Some(host))
        .await?
        .ok_or_else(|| {
            Error::not_found(format!(
                "the GitHub App is not installed on {owner} ({host}) for this workspace; install it there first (`drover github link`), so the link can pin {repository}'s id"
            ))
        })?;
    app.repository_id(app.host(&installation.host)?, installation.id, owner, name)
        .await?
        .ok_or_else(|| {
            Error::not_found(format!(
                "the GitHub App's installation on {owner} ({host}) does not reach {repository}; add the repository to the installation"
            ))
        })
}

/// `github.com`, or a GHE host the App is configured with.
fn host(st: &Services, host: Option<&str>) -> Result<String> {
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

pub async fn set(st: &Services, m: &Member, req: wire::CiLinkRequest) -> Result<wire::CiLink> {
    m.require_admin()?;
    let repo = repository(&req.repository)?;
    let host = host(st, req.host.as_deref())?;
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
    let policy = policy(&req)?;
    if st
        .store
        .ci_link_taken(&m.workspace_id, &host, &repo)
        .await?
    {
        return Err(Error::conflict(format!(
            "{repo} on {host} is linked to another workspace (or was, and its CI history is kept there); a repository is linked to one workspace at most"
        )));
    }
    let spec = CiLinkSpec {
        repository_id: repository_id(st, m, &host, &repo).await?,
        runs_on: req.runs_on,
        runtime: req.runtime,
        policy,
    };
    let saved = st
        .store
        .set_ci_link(m, &host, &repo, &spec, st.now())
        .await?;
    Ok(link(saved))
}

pub async fn list(st: &Services, m: &Member) -> Result<wire::CiLinkList> {
    m.require_admin()?;
    let links = st.store.ci_links(&m.workspace_id).await?;
    Ok(wire::CiLinkList {
        links: links.into_iter().map(link).collect(),
    })
}

/// The (host, repository) a link route names, checked.
fn named(
    st: &Services,
    owner: &str,
    repo: &str,
    q: &wire::CiLinkQuery,
) -> Result<(String, String)> {
    let repository = repository(&format!("{owner}/{repo}"))?;
    Ok((host(st, q.host.as_deref())?, repository))
}

pub async fn remove(
    st: &Services,
    m: &Member,
    owner: &str,
    repo: &str,
    q: wire::CiLinkQuery,
) -> Result<()> {
    m.require_admin()?;
    let (host, repo) = named(st, owner, repo, &q)?;
    Ok(st.store.remove_ci_link(m, &host, &repo, st.now()).await?)
}

/// The workflow file (YAML) that runs a linked repository's jobs here.
pub async fn workflow(
    st: &Services,
    m: &Member,
    owner: &str,
    repo: &str,
    q: wire::CiLinkQuery,
) -> Result<String> {
    m.require_admin()?;
    let (host, repo) = named(st, owner, repo, &q)?;
    let l = st
        .store
        .ci_link(&m.workspace_id, &host, &repo)
        .await?
        .ok_or_else(|| Error::not_found(format!("{repo} on {host} is not linked")))?;
    // Unless the link says: the labels of a pool of this workspace serving
    // the repository on demand (its workflow jobs get JIT runners), else
    // any self-hosted runner.
    let runs_on = match l.runs_on {
        Some(labels) => labels,
        None => {
            let (owner, name) = l.repository.split_once('/').unwrap_or((&l.repository, ""));
            st.store
                .on_demand_for(&host, owner, name)
                .await?
                .into_iter()
                .find(|p| p.workspace_id == m.workspace_id.as_str())
                .map_or_else(|| vec!["self-hosted".into()], |p| p.labels)
        }
    };
    Ok(workflow::render(&workflow::Workflow {
        repository: &l.repository,
        coordinator_url: &st.public_url,
        audience: &st.oidc.config.audience,
        runs_on: &runs_on,
        runtime: l.runtime.as_deref().unwrap_or("self:ws"),
        refs: l.policy.refs.as_deref(),
        events: l.policy.events.as_deref(),
    }))
}
