//! How the workflow jobs an on-demand pool served end: finished (an unused
//! JIT runner deleted, or handed over to the workflow job whose runner ran
//! this one), or refused by a spent budget and GitHub told so.

use drover_wire::ErrorCode;

use super::{Services, completed_on_github, github_of};

/// JIT runners minted for one workflow job whose Drover jobs all ended
/// before one took it: then it is refused, and GitHub told why.
const MAX_TRIES: i64 = 3;
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
        // One replica deletes it: the one that moves it to `closing`.
        match st.store.workflow_job_closing(wf, st.now()).await {
            Ok(true) => {}
            Ok(false) => return false,
            Err(e) => {
                tracing::warn!(error = %e, "could not claim a finished workflow job");
                return false;
            }
        }
        let removal = match github_of(st, app, pool).await {
            Ok((host, installation, target)) => app
                .remove_runner_id(host, installation, &target, runner_id)
                .await
                .map_err(|e| e.to_string()),
            Err(why) => Err(why),
        };
        let failed = match (removal, &wf.job_id) {
            (Ok(Removal::Removed), Some(job)) => {
                match crate::service::jobs::cancel(st, &pool.principal(), job).await {
                    Ok(_) => None,
                    Err(e) if e.code() == ErrorCode::Conflict => None, // ended already
                    Err(e) => Some(format!("could not cancel its job {job}: {e}")),
                }
            }
            (Ok(_), _) => None,
            (Err(why), _) => Some(why),
        };
        if let Some(why) = failed {
            tracing::warn!(%why, runner = ?wf.runner_name, "could not put an unused JIT runner away; retrying");
            if let Err(e) = st
                .store
                .workflow_job_reopened(&wf.host, wf.workflow_job_id, st.now())
                .await
            {
                tracing::warn!(error = %e, "could not reopen a workflow job");
            }
            return false;
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

/// Tells GitHub a workflow job was refused (a spent budget, or runners that
/// kept going before they took it): its run cancelled (so it does not wait
/// a day for a runner), then a failed check run on its commit saying why.
/// Told again 30 s later when GitHub could not be told.
pub(super) async fn refuse(st: &Services, app: &GithubApp, pool: &OnDemand, wf: &WorkflowJobRow) {
    let Some((owner, repo)) = wf.origin.repository.split_once('/') else {
        // Recorded before its origin was: nothing to tell GitHub about.
        let _ = st
            .store
            .workflow_job_refused(&wf.host, wf.workflow_job_id, st.now())
            .await;
        return;
    };
    let why = wf
        .error
        .clone()
        .unwrap_or_else(|| "Drover refused to start a runner for this job.".into());
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
    let recorded = match told {
        Ok(()) => {
            st.store
                .workflow_job_refused(&wf.host, wf.workflow_job_id, st.now())
                .await
        }
        Err(e) => {
            tracing::warn!(error = %e, workflow_job = wf.workflow_job_id, "could not tell GitHub of a refused workflow job; again in 30 s");
            st.store
                .workflow_job_tell_later(&wf.host, wf.workflow_job_id, st.now())
                .await
        }
    };
    if let Err(e) = recorded {
        tracing::warn!(error = %e, "could not record a refused workflow job");
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
        let seen = |requeue: bool, refuse: bool, why: String| async move {
            if let Err(e) = st
                .store
                .workflow_job_orphan_seen(
                    &wf.host,
                    wf.workflow_job_id,
                    requeue,
                    refuse,
                    &why,
                    st.now(),
                )
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
                seen(false, false, why).await;
                continue;
            }
        };
        match app
            .workflow_job(host, installation, owner, repo, wf.workflow_job_id)
            .await
        {
            Ok(Some(job)) if job.status == "completed" => {
                completed_on_github(st, wf, job.runner_name.as_deref()).await;
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
                    Ok(Removal::Removed) if wf.tries >= MAX_TRIES => {
                        tracing::warn!(
                            workflow_job = wf.workflow_job_id,
                            "{MAX_TRIES} JIT runners' jobs ended before one took the workflow job: refused"
                        );
                        let why = format!(
                            "Drover started a runner for this job {MAX_TRIES} times on pool {:?}, and each went before it took the job (a runner that cannot start GitHub's Actions runner, or that left). The last: {}",
                            pool.pool,
                            wf.error.as_deref().unwrap_or("its Drover job ended")
                        );
                        seen(true, true, why).await;
                    }
                    Ok(Removal::Removed) => {
                        tracing::info!(
                            workflow_job = wf.workflow_job_id,
                            "a JIT runner's job ended before it took a workflow job: serving it again"
                        );
                        seen(
                            true,
                            false,
                            "its runner's job ended before the Actions runner took a job".into(),
                        )
                        .await;
                    }
                    Ok(Removal::Busy) => seen(false, false, "its JIT runner is busy".into()).await,
                    Err(why) => seen(false, false, why).await,
                }
            }
            Ok(Some(_)) => seen(false, false, "in progress on GitHub".into()).await,
            Ok(None) => {
                let _ = st
                    .store
                    .workflow_job_done(&wf.host, wf.workflow_job_id, st.now())
                    .await;
            }
            Err(e) => seen(false, false, e.to_string()).await,
        }
    }
}
