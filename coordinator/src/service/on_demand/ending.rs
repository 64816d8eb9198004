//! How the workflow jobs an on-demand pool served end: finished (an unused
//! JIT runner deleted, or handed over to the workflow job whose runner ran
//! this one), or refused by a spent budget and GitHub told so.

use drover_wire::ErrorCode;

use super::{Services, github_of};
use crate::github::{GithubApp, Removal};
use crate::store::{OnDemand, WorkflowJobRow};

/// A served workflow job completed. When its own JIT runner ran it, that
/// runner exits and its Drover job ends by itself. When the runner another
/// live workflow job holds ran it (GitHub gives a queued job to any idle
/// runner that fits), that one takes this one's runner instead: true.
/// Otherwise (cancelled before a runner took it, or a runner not Drover's
/// did) its JIT runner is one too many: deleted from GitHub, and its Drover
/// job cancelled; a busy one took another job, whose completion then finds
/// it held by no one, and so on.
pub(super) async fn finish(
    st: &Services,
    app: &GithubApp,
    pool: &OnDemand,
    wf: &WorkflowJobRow,
) -> bool {
    let ran_here = wf.ran_on.is_some() && wf.ran_on == wf.runner_name;
    if !ran_here && let Some(ran_on) = &wf.ran_on {
        match st
            .store
            .workflow_job_handed_over(&pool.id, wf, ran_on, st.now())
            .await
        {
            Ok(true) => return true,
            Ok(false) => {}
            Err(e) => {
                tracing::warn!(error = %e, "could not hand a JIT runner over");
                return false;
            }
        }
    }
    if !ran_here && let Some(runner_id) = wf.runner_id {
        let removal = match github_of(st, app, pool).await {
            Ok((host, installation, target)) => app
                .remove_runner_id(host, installation, &target, runner_id)
                .await
                .map_err(|e| e.to_string()),
            Err(why) => Err(why),
        };
        match removal {
            Ok(Removal::Removed) => {
                if let Some(job) = &wf.job_id {
                    match crate::service::jobs::cancel(st, &pool.principal(), job).await {
                        Ok(_) => {}
                        Err(e) if e.code() == ErrorCode::Conflict => {} // ended already
                        Err(e) => {
                            tracing::warn!(error = %e, %job, "could not cancel an unused JIT runner's job");
                            return false;
                        }
                    }
                }
            }
            Ok(Removal::Busy) => {}
            Err(why) => {
                tracing::warn!(%why, runner = ?wf.runner_name, "could not delete an unused JIT runner; retrying");
                return false;
            }
        }
    }
    if let Err(e) = st
        .store
        .workflow_job_done(&wf.host, wf.workflow_job_id, st.now())
        .await
    {
        tracing::warn!(error = %e, "could not record a finished workflow job");
    }
    false
}

/// Tells GitHub a workflow job was refused (a spent budget): a failed
/// check run saying why, its run cancelled. Retried until it is told.
pub(super) async fn refuse(st: &Services, app: &GithubApp, pool: &OnDemand, wf: &WorkflowJobRow) {
    let Some((owner, repo)) = wf.origin.repository.split_once('/') else {
        // Recorded before its origin was: nothing to tell GitHub about.
        let _ = st
            .store
            .workflow_job_refused(&wf.host, wf.workflow_job_id, st.now())
            .await;
        return;
    };
    let why = format!(
        "The Drover workspace {:?} has spent this month's budget, so its pool {:?} starts no runner for this job; an admin can raise the budget (drover budget set).",
        pool.workspace_name, pool.pool
    );
    let told = match github_of(st, app, pool).await {
        Ok((host, installation, _)) => app
            .refuse_workflow_job(
                host,
                installation,
                owner,
                repo,
                wf.origin.run_id,
                &wf.origin.head_sha,
                &why,
            )
            .await
            .map_err(|e| e.to_string()),
        Err(why) => Err(why),
    };
    match told {
        Ok(()) => {
            if let Err(e) = st
                .store
                .workflow_job_refused(&wf.host, wf.workflow_job_id, st.now())
                .await
            {
                tracing::warn!(error = %e, "could not record a refused workflow job");
            }
        }
        Err(e) => {
            tracing::warn!(error = %e, workflow_job = wf.workflow_job_id, "could not tell GitHub of a refused workflow job; retrying")
        }
    }
}

/// Served workflow jobs whose Drover job ended without GitHub saying they
/// completed: asked of GitHub. Completed: recorded as the webhook would.
/// Still queued: the runner went before the Actions runner took a job (a
/// laptop closed, a lease lost), so the JIT runner is deleted and the
/// workflow job served again. In progress: its runner is at work; later.
pub(super) async fn orphans(st: &Services, app: &GithubApp) {
    let rows = match st.store.workflow_jobs_orphaned(st.now()).await {
        Ok(rows) => rows,
        Err(e) => return tracing::warn!(error = %e, "could not list orphaned workflow jobs"),
    };
    for (pool, wf) in &rows {
        let seen = |requeue: bool, why: String| async move {
            if let Err(e) = st
                .store
                .workflow_job_orphan_seen(&wf.host, wf.workflow_job_id, requeue, &why, st.now())
                .await
            {
                tracing::warn!(error = %e, "could not record an orphaned workflow job");
            }
        };
        let Some((owner, repo)) = wf.origin.repository.split_once('/') else {
            continue;
        };
        let (host, installation, target) = match github_of(st, app, pool).await {
            Ok(g) => g,
            Err(why) => {
                seen(false, why).await;
                continue;
            }
        };
        match app
            .workflow_job(host, installation, owner, repo, wf.workflow_job_id)
            .await
        {
            Ok(Some(job)) if job.status == "completed" => {
                if let Err(e) = st
                    .store
                    .workflow_job_completed(
                        &wf.host,
                        wf.workflow_job_id,
                        job.runner_name.as_deref(),
                        st.now(),
                    )
                    .await
                {
                    tracing::warn!(error = %e, "could not record a completed workflow job");
                }
            }
            Ok(Some(job)) if job.status == "queued" => {
                let removal = match wf.runner_id {
                    Some(id) => app
                        .remove_runner_id(host, installation, &target, id)
                        .await
                        .map_err(|e| e.to_string()),
                    None => Ok(Removal::Removed),
                };
                match removal {
                    Ok(Removal::Removed) => {
                        tracing::info!(
                            workflow_job = wf.workflow_job_id,
                            "a JIT runner's job ended before it took a workflow job: serving it again"
                        );
                        seen(
                            true,
                            "its runner's job ended before the Actions runner took a job".into(),
                        )
                        .await;
                    }
                    Ok(Removal::Busy) => seen(false, "its JIT runner is busy".into()).await,
                    Err(why) => seen(false, why).await,
                }
            }
            Ok(Some(_)) => seen(false, "in progress on GitHub".into()).await,
            Ok(None) => {
                let _ = st
                    .store
                    .workflow_job_done(&wf.host, wf.workflow_job_id, st.now())
                    .await;
            }
            Err(e) => seen(false, e.to_string()).await,
        }
    }
}
