//! GitHub Actions on demand: a workspace pool serves a repository's or an
//! organization's workflow jobs with just-in-time, ephemeral Actions
//! runners. GitHub's `workflow_job` webhook (signed with the App's webhook
//! secret) says a job is queued; the coordinator records it once and
//! answers, and a background worker mints a JIT config for it
//! (`generate-jitconfig`) and submits a Drover job to the pool that runs
//! the Actions runner with it (the config travels as sealed job env). When
//! GitHub says the workflow job completed, a JIT runner that did not run it
//! is deleted from GitHub and its Drover job cancelled.

use std::collections::BTreeMap;
use std::time::Duration;

use drover_wire::{self as wire, ErrorCode};

use super::Services;

mod ending;
mod poll;

use ending::{finish, orphans, refuse};

use crate::error::{Error, Result};
use crate::github::webhook::{self, WebhookKey, WorkflowJobEvent};
use crate::github::{GITHUB_COM, GithubApp, JitRunner, Target, names};
use crate::store::{
    Member, OnDemand, OnDemandSpec, WorkflowJobOrigin, WorkflowJobRow, actions_member_id,
};
pub use poll::poll_in_background;

/// Most custom labels an on-demand pool may add.
const MAX_LABELS: usize = 10;

/// Actions runners at once when an admin names no cap.
const DEFAULT_MAX_RUNNERS: u32 = 10;

pub use drover_wire::github::{
    ACTIONS_CAPABILITY as CAPABILITY, ACTIONS_JIT_CONFIG_ENV as JIT_CONFIG_ENV,
};

fn answer(d: OnDemand) -> wire::GithubOnDemand {
    let runs_on = d.labels.join(", ");
    wire::GithubOnDemand {
        principal: actions_member_id(&d.host, &d.target()),
        workflow_hint: format!("runs-on: [{runs_on}]"),
        target: d.target(),
        id: d.id,
        pool: d.pool,
        pool_id: d.runtime_id,
        host: d.host,
        labels: d.labels,
        runner_group_id: d.runner_group_id,
        max_runners: u32::try_from(d.max_runners).unwrap_or(u32::MAX),
        created_by: d.created_by,
        created_at: d.created_at,
    }
}

/// `owner/repo` or an organization, lower case.
fn target(s: &str) -> Result<(String, Option<String>)> {
    if s.contains('/') {
        let (owner, repo) = names::repository(s).ok_or_else(|| {
            Error::bad_request(format!(
                "target {s:?} is neither owner/name as GitHub names repositories nor an organization"
            ))
        })?;
        return Ok((owner.to_ascii_lowercase(), Some(repo.to_ascii_lowercase())));
    }
    if !names::valid_login(s) {
        return Err(Error::bad_request(format!(
            "target {s:?} is not an organization name as GitHub allows them"
        )));
    }
    Ok((s.to_ascii_lowercase(), None))
}

/// `self-hosted`, `drover-<pool>`, then the custom labels, once each.
fn labels(pool: &str, custom: &[String]) -> Result<Vec<String>> {
    if custom.len() > MAX_LABELS {
        return Err(Error::bad_request(format!(
            "labels must list at most {MAX_LABELS} custom labels"
        )));
    }
    if let Some(bad) = custom.iter().find(|l| !names::valid_label(l)) {
        return Err(Error::bad_request(format!(
            "label {bad:?} must be 1-64 of letters, digits, '.', '_', '-'"
        )));
    }
    let mut all = vec!["self-hosted".to_owned(), format!("drover-{pool}")];
    for l in custom {
        if !all.iter().any(|a| a.eq_ignore_ascii_case(l)) {
            all.push(l.clone());
        }
    }
    Ok(all)
}

/// Turns a workspace pool on for a repository or an organization (again:
/// changes its labels, group or cap). Admins only.
pub async fn set(
    st: &Services,
    m: &Member,
    req: wire::GithubOnDemandRequest,
) -> Result<wire::GithubOnDemand> {
    m.require_admin()?;
    let app = super::github::app(st)?;
    let host = app.host(req.host.as_deref().unwrap_or(GITHUB_COM))?;
    let (owner, repo) = target(&req.target)?;
    let max_runners = req.max_runners.unwrap_or(DEFAULT_MAX_RUNNERS);
    if !(1..=1000).contains(&max_runners) {
        return Err(Error::bad_request("maxRunners must be 1..=1000"));
    }
    let runner_group_id = match (&repo, req.runner_group_id) {
        (Some(_), Some(_)) => {
            return Err(Error::bad_request(
                "runnerGroupId is for organizations: a repository's runners are in its one default group",
            ));
        }
        (_, Some(g)) if g < 1 => {
            return Err(Error::bad_request(
                "runnerGroupId must be a runner group's id (GitHub's default group is 1)",
            ));
        }
        (None, g) => Some(g.unwrap_or(1)),
        (Some(_), None) => None,
    };
    let pools = st
        .store
        .list_runtimes(m, &crate::store::Owner::Workspace)
        .await?;
    let pool = pools
        .into_iter()
        .find(|p| p.name == req.pool || p.id.as_str() == req.pool)
        .ok_or_else(|| Error::not_found(format!("no workspace pool {:?}", req.pool)))?;
    let labels = labels(&pool.name, &req.labels)?;
    st.store
        .installation_for(&m.workspace_id, &owner, Some(&host.name))
        .await?
        .ok_or_else(|| {
            Error::not_found(format!(
                "the GitHub App is not installed on {owner} ({}) for this workspace; install it there first (`drover github link`)",
                host.name
            ))
        })?;
    let spec = OnDemandSpec {
        runtime_id: pool.id.as_str().to_owned(),
        host: host.name.clone(),
        owner,
        repo,
        labels,
        runner_group_id,
        max_runners: i64::from(max_runners),
    };
    let saved = st.store.set_on_demand(m, &spec, st.now()).await?;
    Ok(answer(saved))
}

pub async fn list(st: &Services, m: &Member) -> Result<wire::GithubOnDemandList> {
    m.require_admin()?;
    let pools = st.store.on_demand_list(&m.workspace_id).await?;
    Ok(wire::GithubOnDemandList {
        pools: pools.into_iter().map(answer).collect(),
    })
}

pub async fn remove(st: &Services, m: &Member, id: &str) -> Result<()> {
    m.require_admin()?;
    Ok(st.store.remove_on_demand(m, id, st.now()).await?)
}

/// A webhook delivery's headers.
#[derive(Debug, Default)]
pub struct Delivery<'a> {
    /// `X-GitHub-Event`.
    pub event: Option<&'a str>,
    /// `X-GitHub-Delivery`.
    pub id: Option<&'a str>,
    /// `X-Hub-Signature-256`.
    pub signature: Option<&'a str>,
    /// `X-GitHub-Enterprise-Host`, from a GHE host.
    pub enterprise_host: Option<&'a str>,
}

/// A webhook delivery: checked (signature, then replay), recorded, and
/// answered at once; the worker does the rest.
pub async fn webhook(
    st: &Services,
    headers: &Delivery<'_>,
    body: &[u8],
) -> Result<wire::GithubWebhookReceipt> {
    let app = super::github::app(st)?;
    let Some(secret) = &app.config.webhook_secret else {
        return Err(Error::api(
            ErrorCode::GithubNotConfigured,
            "this coordinator takes no GitHub webhooks; start it with --github-webhook-secret-file",
        ));
    };
    let signed = headers
        .signature
        .is_some_and(|sig| WebhookKey::new(secret).verifies(body, sig));
    if !signed {
        return Err(Error::api(
            ErrorCode::Unauthorized,
            "the delivery's X-Hub-Signature-256 does not sign its body with this App's webhook secret",
        ));
    }
    let delivery = headers
        .id
        .filter(|d| (1..=100).contains(&d.len()) && d.bytes().all(|b| b.is_ascii_graphic()))
        .ok_or_else(|| Error::bad_request("X-GitHub-Delivery is missing"))?
        .to_owned();
    let host = match headers.enterprise_host {
        Some(h) => app.host(h)?.name.clone(),
        None => GITHUB_COM.to_owned(),
    };
    if !st.store.take_delivery(&delivery, st.now()).await? {
        return Err(Error::conflict(format!(
            "delivery {delivery} was taken already: a replay is refused"
        )));
    }
    let receipt = |outcome: &str| wire::GithubWebhookReceipt {
        delivery: delivery.clone(),
        outcome: outcome.to_owned(),
    };
    if headers.event != Some("workflow_job") {
        return Ok(receipt("ignored"));
    }
    let event: WorkflowJobEvent = serde_json::from_slice(body)
        .map_err(|e| Error::bad_request(format!("not a workflow_job event: {e}")))?;
    let job = &event.workflow_job;
    let outcome = match event.action.as_str() {
        "queued" => {
            let pools = st
                .store
                .on_demand_for(&host, &event.repository.owner.login, &event.repository.name)
                .await?;
            let origin = WorkflowJobOrigin {
                repository: format!("{}/{}", event.repository.owner.login, event.repository.name),
                run_id: job.run_id,
                head_sha: job.head_sha.clone(),
            };
            match pools
                .iter()
                .find(|p| webhook::labels_match(&job.labels, &p.labels))
            {
                Some(pool) => {
                    st.store
                        .workflow_job_queued(&host, job.id, &origin, &pool.id, st.now())
                        .await?;
                    "queued"
                }
                None => "ignored",
            }
        }
        "completed" => {
            let known = st
                .store
                .workflow_job_completed(&host, job.id, job.runner_name.as_deref(), st.now())
                .await?;
            if known { "finished" } else { "ignored" }
        }
        _ => "ignored",
    };
    if outcome != "ignored" {
        st.on_demand.notify_one();
    }
    Ok(receipt(outcome))
}

/// GitHub says (asked, not by webhook) that `wf` completed, on `ran_on`:
/// recorded as the webhook would be. True when it was live.
pub(super) async fn completed_on_github(
    st: &Services,
    wf: &WorkflowJobRow,
    ran_on: Option<&str>,
) -> bool {
    st.store
        .workflow_job_completed(&wf.host, wf.workflow_job_id, ran_on, st.now())
        .await
        .unwrap_or_else(|e| {
            tracing::warn!(error = %e, "could not record a completed workflow job");
            false
        })
}

/// Serves queued workflow jobs and finishes completed ones: woken by a
/// webhook, else every `every`.
pub async fn serve_in_background(st: Services, every: Duration) {
    let Some(app) = st.github.clone() else {
        return;
    };
    loop {
        serve_once(&st, &app).await;
        tokio::select! {
            _ = st.on_demand.notified() => {}
            _ = tokio::time::sleep(every) => {}
            _ = st.shutting_down() => return,
        }
    }
}

async fn serve_once(st: &Services, app: &GithubApp) {
    match st.store.workflow_jobs_to_refuse(st.now()).await {
        Ok(rows) => {
            for (pool, wf) in rows {
                refuse(st, app, &pool, &wf).await;
            }
        }
        Err(e) => tracing::warn!(error = %e, "could not list refused workflow jobs"),
    }
    // One at a time when runners change hands: a handover changes the
    // rows after it.
    for _ in 0..100 {
        match st.store.workflow_jobs_to_finish().await {
            Ok(rows) => {
                let mut handed_over = false;
                for (pool, wf) in rows {
                    if finish(st, app, &pool, &wf).await {
                        handed_over = true;
                        break;
                    }
                }
                if !handed_over {
                    break;
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "could not list finished workflow jobs");
                break;
            }
        }
    }
    orphans(st, app).await;
    match st.store.claim_workflow_jobs(st.now()).await {
        Ok(rows) => {
            for (pool, wf) in rows {
                start(st, app, &pool, &wf).await;
            }
        }
        Err(e) => tracing::warn!(error = %e, "could not claim workflow jobs"),
    }
}

fn target_of(pool: &OnDemand) -> Target {
    match &pool.repo {
        Some(repo) => Target::Repo {
            owner: pool.owner.clone(),
            repo: repo.clone(),
        },
        None => Target::Org {
            org: pool.owner.clone(),
        },
    }
}

/// The installation, host and target a pool's GitHub calls go through.
pub(super) async fn github_of<'a>(
    st: &Services,
    app: &'a GithubApp,
    pool: &OnDemand,
) -> std::result::Result<(&'a crate::github::Host, i64, Target), String> {
    let workspace = crate::ids::WorkspaceId::from_db(pool.workspace_id.clone());
    let installation = st
        .store
        .installation_for(&workspace, &pool.owner, Some(&pool.host))
        .await
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("the GitHub App is no longer installed on {}", pool.owner))?;
    let host = app.host(&pool.host).map_err(|e| e.to_string())?;
    Ok((host, installation.id, target_of(pool)))
}

/// Mints a JIT runner for a claimed workflow job and submits its Drover
/// job; on a refusal the JIT runner is deleted again.
async fn start(st: &Services, app: &GithubApp, pool: &OnDemand, wf: &WorkflowJobRow) {
    let not_started = move |why: String, for_good: bool| async move {
        tracing::warn!(workflow_job = wf.workflow_job_id, target = %pool.target(), %why, "an on-demand workflow job was not served");
        if let Err(e) = st
            .store
            .workflow_job_not_started(&wf.host, wf.workflow_job_id, &why, for_good, st.now())
            .await
        {
            tracing::warn!(error = %e, "could not record a workflow job not served");
        }
    };
    let (host, installation, target) = match github_of(st, app, pool).await {
        Ok(g) => g,
        Err(why) => return not_started(why, false).await,
    };
    // A workflow job served again gets a runner of another name: runners
    // change hands by name (`finish`).
    let name = match wf.tries {
        ..=1 => format!("drover-{}-{}", pool.pool, wf.workflow_job_id),
        n => format!("drover-{}-{}-{n}", pool.pool, wf.workflow_job_id),
    };
    let jit = JitRunner {
        name: &name,
        runner_group_id: pool.runner_group_id.unwrap_or(1),
        labels: &pool.labels,
    };
    let (runner_id, config) = match app.jit_config(host, installation, &target, &jit).await {
        Ok(minted) => minted,
        Err(e) => return not_started(e.to_string(), false).await,
    };
    let req = wire::SubmitJob {
        runtime: format!("ws:{}:{}", pool.workspace_id, pool.runtime_id),
        command: vec!["./run.sh".into()],
        env: BTreeMap::from([(JIT_CONFIG_ENV.to_owned(), config.expose().to_owned())]).into(),
        requires: vec![CAPABILITY.into()],
        max_attempts: Some(1),
        ..Default::default()
    };
    // One Drover job per JIT runner (a workflow job served again gets another).
    let key = format!(
        "github-workflow-job:{}:{}:{runner_id}",
        wf.host, wf.workflow_job_id
    );
    let principal = pool.principal();
    match super::jobs::submit(st, &principal, req, Some(&key)).await {
        Ok(submitted) => {
            if let Err(e) = st
                .store
                .workflow_job_started(
                    pool,
                    wf.workflow_job_id,
                    submitted.job.id.as_str(),
                    runner_id,
                    &name,
                    st.now(),
                )
                .await
            {
                tracing::warn!(error = %e, "could not record a started workflow job");
            }
        }
        Err(e) => {
            let for_good = e.code() == ErrorCode::BudgetExceeded;
            let why = if for_good {
                format!(
                    "The Drover workspace {:?} has spent this month's budget, so its pool {:?} starts no runner for this job; an admin can raise the budget (drover budget set). {e}",
                    pool.workspace_name, pool.pool
                )
            } else {
                e.to_string()
            };
            if let Err(removal) = app
                .remove_runner_id(host, installation, &target, runner_id)
                .await
            {
                tracing::warn!(error = %removal, runner = %name, "could not delete an unused JIT runner");
            }
            not_started(why, for_good).await;
        }
    }
}
