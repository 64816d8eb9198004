//! GitHub runners of revoked workspace runners: removed from GitHub at the
//! revoke, and retried in the background until GitHub lets them go.

use drover_wire as wire;

use super::Services;
use crate::github::{GithubApp, Removal, Target};
use crate::store::GithubRunnerRow;

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
