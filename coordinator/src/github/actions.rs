//! Workflow jobs as GitHub's REST API shows them, for on-demand pools whose
//! coordinator GitHub's webhooks cannot reach (polled within the
//! installation's rate limit), and a workflow job a spent budget refused,
//! failed where GitHub shows it.

use reqwest::{Method, StatusCode};
use serde::Deserialize;
use serde_json::json;

use super::target::TokenScope;
use super::webhook::WorkflowJob;
use super::{GithubApp, Host, github_error};
use crate::error::Result;

/// Calls of the installation's hourly allowance polling leaves to the
/// rest (minting JIT runners, registrations).
const POLL_RESERVE: i64 = 200;

impl GithubApp {
    /// Records the rate limit a response reports.
    pub(super) fn note_rate_limit(&self, host: &Host, headers: &reqwest::header::HeaderMap) {
        let number = |name: &str| {
            headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse::<i64>().ok())
        };
        if let (Some(left), Some(reset_s)) =
            (number("x-ratelimit-remaining"), number("x-ratelimit-reset"))
        {
            self.limits
                .lock()
                .expect("limits")
                .insert(host.name.clone(), (left, reset_s * 1000));
        }
    }

    /// Whether polling `host` now stays within its rate limit: more than
    /// the reserve left, or the window has reset since.
    pub fn may_poll(&self, host: &Host) -> bool {
        let now = self.clock.now_ms();
        match self.limits.lock().expect("limits").get(&host.name) {
            Some(&(left, reset)) => left > POLL_RESERVE || now >= reset,
            None => true,
        }
    }

    async fn actions_get(
        &self,
        host: &Host,
        installation: i64,
        repo: &str,
        path: &str,
        what: &str,
    ) -> Result<(StatusCode, axum::body::Bytes)> {
        if !self.may_poll(host) {
            return Err(crate::error::Error::api(
                drover_wire::ErrorCode::RateLimited,
                format!(
                    "GitHub's rate limit on {} is nearly spent: {what} waits for it to reset",
                    host.name
                ),
            ));
        }
        let (status, _, body) = self
            .with_installation(
                host,
                installation,
                &TokenScope::repo("actions", "read", repo),
                Method::GET,
                path,
                None,
                what,
            )
            .await?;
        Ok((status, body))
    }

    /// The queued workflow jobs of `owner/repo`: the jobs still queued of
    /// its queued and in-progress workflow runs (a run is in progress once
    /// one of its jobs started; jobs that wait on others queue later). First
    /// pages: 100 runs of each, 100 jobs each.
    pub async fn queued_workflow_jobs(
        &self,
        host: &Host,
        installation: i64,
        owner: &str,
        repo: &str,
    ) -> Result<Vec<WorkflowJob>> {
        #[derive(Deserialize)]
        struct Run {
            id: i64,
        }
        #[derive(Deserialize)]
        struct Runs {
            workflow_runs: Vec<Run>,
        }
        #[derive(Deserialize)]
        struct Jobs {
            jobs: Vec<WorkflowJob>,
        }
        let what = format!("GET /repos/{owner}/{repo}/actions/runs");
        let mut runs = Vec::new();
        for state in ["queued", "in_progress"] {
            let path = format!("/repos/{owner}/{repo}/actions/runs?status={state}&per_page=100");
            let (status, body) = self
                .actions_get(host, installation, repo, &path, &what)
                .await?;
            if status != StatusCode::OK {
                return Err(github_error(&what, status, &body));
            }
            let page: Runs = serde_json::from_slice(&body)
                .map_err(|_| github_error(&what, status, b"an unexpected answer"))?;
            runs.extend(page.workflow_runs);
        }
        let mut queued = Vec::new();
        for run in runs {
            let what = format!("GET /repos/{owner}/{repo}/actions/runs/{{id}}/jobs");
            let path = format!(
                "/repos/{owner}/{repo}/actions/runs/{}/jobs?filter=latest&per_page=100",
                run.id
            );
            let (status, body) = self
                .actions_get(host, installation, repo, &path, &what)
                .await?;
            if status != StatusCode::OK {
                return Err(github_error(&what, status, &body));
            }
            let jobs: Jobs = serde_json::from_slice(&body)
                .map_err(|_| github_error(&what, status, b"an unexpected answer"))?;
            queued.extend(jobs.jobs.into_iter().filter(|j| j.status == "queued"));
        }
        Ok(queued)
    }

    /// One workflow job of `owner/repo`; `None` when GitHub has none so.
    pub async fn workflow_job(
        &self,
        host: &Host,
        installation: i64,
        owner: &str,
        repo: &str,
        id: i64,
    ) -> Result<Option<WorkflowJob>> {
        let what = format!("GET /repos/{owner}/{repo}/actions/jobs/{{id}}");
        let path = format!("/repos/{owner}/{repo}/actions/jobs/{id}");
        let (status, body) = self
            .actions_get(host, installation, repo, &path, &what)
            .await?;
        match status {
            StatusCode::OK => {
                Ok(Some(serde_json::from_slice(&body).map_err(|_| {
                    github_error(&what, status, b"an unexpected answer")
                })?))
            }
            StatusCode::NOT_FOUND => Ok(None),
            _ => Err(github_error(&what, status, &body)),
        }
    }

    /// A workflow job Drover will not serve: its workflow run is cancelled
    /// (so it does not wait a day for a runner; 409 when it ended already),
    /// then a failed check run on its commit says why. Cancelling again is
    /// harmless, so a retry after a failed check run adds no second one.
    #[allow(clippy::too_many_arguments)]
    pub async fn refuse_workflow_job(
        &self,
        host: &Host,
        installation: i64,
        owner: &str,
        repo: &str,
        run_id: i64,
        head_sha: &str,
        why: &str,
    ) -> Result<()> {
        let what = format!("POST /repos/{owner}/{repo}/actions/runs/{{id}}/cancel");
        let (status, _, answer) = self
            .with_installation(
                host,
                installation,
                &TokenScope::repo("actions", "write", repo),
                Method::POST,
                &format!("/repos/{owner}/{repo}/actions/runs/{run_id}/cancel"),
                None,
                &what,
            )
            .await?;
        if status != StatusCode::ACCEPTED && status != StatusCode::CONFLICT {
            return Err(github_error(&what, status, &answer));
        }
        let what = format!("POST /repos/{owner}/{repo}/check-runs");
        let body = json!({
            "name": "Drover",
            "head_sha": head_sha,
            "status": "completed",
            "conclusion": "failure",
            "output": { "title": "Drover did not start a runner for this job", "summary": why },
        });
        let (status, _, answer) = self
            .with_installation(
                host,
                installation,
                &TokenScope::repo("checks", "write", repo),
                Method::POST,
                &format!("/repos/{owner}/{repo}/check-runs"),
                Some(&body),
                &what,
            )
            .await?;
        if status != StatusCode::CREATED {
            return Err(github_error(&what, status, &answer));
        }
        Ok(())
    }
}
