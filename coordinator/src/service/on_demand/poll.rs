//! Polling, for a coordinator GitHub's webhooks cannot reach (on a private
//! network): what the webhooks would have said, asked of GitHub's REST API
//! within the installation's rate limit.

use std::time::Duration;

use super::{Services, completed_on_github, github_of};
use crate::github::GithubApp;
use crate::github::webhook;
use crate::store::{OnDemand, WorkflowJobOrigin, WorkflowJobRow};

/// Asks GitHub every `every` for what webhooks would have said: the
/// queued workflow jobs of each repository an on-demand pool serves, and
/// whether those it saw have completed. Within the installation's rate
/// limit ([`GithubApp::may_poll`]); the same workflow job is recorded once
/// whichever way it came.
pub async fn poll_in_background(st: Services, every: Duration) {
    let Some(app) = st.github.clone() else {
        return;
    };
    loop {
        poll_once(&st, &app).await;
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = st.shutting_down() => return,
        }
    }
}

/// Organization repositories listed per poll, at most (pages of 100).
const MAX_ORG_PAGES: u32 = 10;

async fn poll_once(st: &Services, app: &GithubApp) {
    let mut woke = false;
    match st.store.workflow_jobs_live().await {
        Ok(rows) => {
            for (pool, wf) in rows {
                woke |= poll_one(st, app, &pool, &wf).await;
            }
        }
        Err(e) => tracing::warn!(error = %e, "could not list live workflow jobs"),
    }
    let pools = match st.store.on_demand_all().await {
        Ok(pools) => pools,
        Err(e) => {
            tracing::warn!(error = %e, "could not list on-demand pools");
            return;
        }
    };
    let mut polled = std::collections::HashSet::new();
    for pool in &pools {
        let (host, installation, _) = match github_of(st, app, pool).await {
            Ok(g) => g,
            Err(why) => {
                tracing::warn!(%why, target = %pool.target(), "an on-demand pool cannot be polled");
                continue;
            }
        };
        let repos = match &pool.repo {
            Some(repo) => vec![(pool.owner.clone(), repo.clone())],
            None => org_repos(app, host, installation, &pool.owner).await,
        };
        for (owner, repo) in repos {
            if !polled.insert((host.name.clone(), owner.clone(), repo.clone())) {
                continue;
            }
            if !app.may_poll(host) {
                tracing::info!(host = %host.name, "GitHub's rate limit is nearly spent: polling waits for it to reset");
                break;
            }
            match app
                .queued_workflow_jobs(host, installation, &owner, &repo)
                .await
            {
                Ok(jobs) => {
                    for job in jobs {
                        woke |= queued_by_poll(st, &host.name, &owner, &repo, &job).await;
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "could not poll {owner}/{repo}'s queued workflow jobs")
                }
            }
        }
    }
    if woke {
        st.on_demand.notify_one();
    }
}

/// The repositories of organization `org` the installation reaches.
async fn org_repos(
    app: &GithubApp,
    host: &crate::github::Host,
    installation: i64,
    org: &str,
) -> Vec<(String, String)> {
    let mut repos = Vec::new();
    for page in 1..=MAX_ORG_PAGES {
        if !app.may_poll(host) {
            break;
        }
        match app.installation_repos(host, installation, page, 100).await {
            Ok((found, more)) => {
                repos.extend(
                    found
                        .into_iter()
                        .filter(|r| r.owner.eq_ignore_ascii_case(org))
                        .map(|r| (r.owner.to_ascii_lowercase(), r.name.to_ascii_lowercase())),
                );
                if !more {
                    break;
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, %org, "could not list an organization's repositories");
                break;
            }
        }
    }
    repos
}

/// A queued workflow job a poll found: recorded for the first on-demand
/// pool whose labels it asks for, unless seen before. True when recorded.
async fn queued_by_poll(
    st: &Services,
    host: &str,
    owner: &str,
    repo: &str,
    job: &webhook::WorkflowJob,
) -> bool {
    let pools = match st.store.on_demand_for(host, owner, repo).await {
        Ok(p) => p,
        Err(e) => {
            tracing::warn!(error = %e, "could not look up on-demand pools");
            return false;
        }
    };
    let Some(pool) = pools
        .iter()
        .find(|p| webhook::labels_match(&job.labels, &p.labels))
    else {
        return false;
    };
    let origin = WorkflowJobOrigin {
        repository: format!("{owner}/{repo}"),
        run_id: job.run_id,
        head_sha: job.head_sha.clone(),
    };
    st.store
        .workflow_job_queued(host, job.id, &origin, &pool.id, st.now())
        .await
        .unwrap_or_else(|e| {
            tracing::warn!(error = %e, "could not record a polled workflow job");
            false
        })
}

/// Whether a workflow job seen before has completed on GitHub; true when
/// it had (recorded as a `completed` webhook would be).
async fn poll_one(st: &Services, app: &GithubApp, pool: &OnDemand, wf: &WorkflowJobRow) -> bool {
    let Some((owner, repo)) = wf.origin.repository.split_once('/') else {
        return false;
    };
    let Ok((host, installation, _)) = github_of(st, app, pool).await else {
        return false;
    };
    if !app.may_poll(host) {
        return false;
    }
    match app
        .workflow_job(host, installation, owner, repo, wf.workflow_job_id)
        .await
    {
        Ok(Some(job)) if job.status == "completed" => {
            completed_on_github(st, wf, job.runner_name.as_deref()).await
        }
        Ok(_) => false,
        Err(e) => {
            tracing::warn!(error = %e, workflow_job = wf.workflow_job_id, "could not poll a workflow job");
            false
        }
    }
}
