//! The fake GitHub's Actions: workflow jobs queued by a test, delivered to
//! the coordinator as signed `workflow_job` webhooks (when told where) or
//! found by its polls (`GET …/actions/runs?status=queued`, `…/runs/{id}/jobs`,
//! `…/actions/jobs/{id}`, with `X-RateLimit-*` headers and a 403 once the
//! limit is spent), runs cancelled, check runs recorded — and the Actions
//! runner's stand-in: a tarball whose `run.sh` hands its JIT config back to
//! this host, which checks it (minted here, used once, runner not deleted),
//! gives it the oldest queued workflow job its labels match, holds it
//! `hold` long, completes it, deletes the ephemeral runner, and answers.
//!
//! Over 500 lines: the endpoints, the webhooks and the runner's stand-in
//! share one small world, and each documented behaviour is next to it.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use sha2::Digest as _;

use super::{Ctx, FakeGithub, Minted, WEBHOOK_SECRET, message, now_s, sign_webhook};

/// A workflow job as the fake keeps it.
#[derive(Debug, Clone)]
pub struct FakeWorkflowJob {
    pub id: i64,
    pub run_id: i64,
    /// `owner/name`.
    pub repository: String,
    pub labels: Vec<String>,
    /// `queued`, `in_progress`, `completed`.
    pub status: String,
    pub conclusion: Option<String>,
    /// The runner that took it.
    pub runner_name: Option<String>,
    pub head_sha: String,
    /// When the test queued it.
    pub queued_at: Instant,
    /// When the runner that took it called home (its process had started).
    pub runner_started_at: Option<Instant>,
}

#[derive(Default)]
pub(super) struct ActionsWorld {
    jobs: Vec<FakeWorkflowJob>,
    /// The coordinator's base URL, when webhooks are delivered.
    hook: Option<String>,
    /// Webhook deliveries: (action, workflow job, the coordinator's status).
    deliveries: Vec<(String, i64, u16)>,
    in_progress: usize,
    max_in_progress: usize,
    /// JIT configs a runner has used (each works once).
    used: HashSet<String>,
    check_runs: Vec<Value>,
    cancelled_runs: Vec<i64>,
    tarball: Option<Arc<Vec<u8>>>,
    downloads: usize,
    /// How long a workflow job runs on a runner.
    hold_ms: u64,
    /// Calls of the actions endpoints left, and when that resets (Unix s).
    rate: Option<(i64, i64)>,
    /// Woken when a workflow job is queued or a runner deleted.
    pub(super) changed: Arc<tokio::sync::Notify>,
}

fn job_json(j: &FakeWorkflowJob) -> Value {
    json!({ "id": j.id, "run_id": j.run_id, "name": "build", "head_sha": j.head_sha,
        "labels": j.labels, "status": j.status, "conclusion": j.conclusion,
        "runner_name": j.runner_name })
}

fn event_json(action: &str, j: &FakeWorkflowJob) -> Vec<u8> {
    let (owner, name) = j.repository.split_once('/').expect("owner/name");
    json!({ "action": action, "workflow_job": job_json(j),
        "repository": { "id": 1, "name": name, "full_name": j.repository, "owner": { "login": owner } } })
    .to_string()
    .into_bytes()
}

impl Ctx {
    /// Delivers `action` on `job` to the coordinator, as GitHub does, when
    /// the fake has been told where.
    async fn webhook(&self, action: &str, job: &FakeWorkflowJob) {
        let Some(url) = self.world.lock().unwrap().workflow.hook.clone() else {
            return;
        };
        let body = event_json(action, job);
        let delivery = super::random_token("delivery-");
        let (status, _) = super::deliver(
            &url,
            "workflow_job",
            &delivery,
            Some(&sign_webhook(WEBHOOK_SECRET, &body)),
            &body,
        )
        .await;
        self.world
            .lock()
            .unwrap()
            .workflow
            .deliveries
            .push((action.to_owned(), job.id, status));
    }

    /// May token `m` use `permission` at `level` (or write) on `owner/repo`?
    fn may_use(
        &self,
        m: &Minted,
        owner: &str,
        repo: &str,
        permission: &str,
        level: &str,
    ) -> Result<(), Box<Response>> {
        let inst = self
            .installation(m.installation)
            .ok_or_else(|| message(StatusCode::NOT_FOUND, "Not Found"))?;
        if !inst.account.eq_ignore_ascii_case(owner) || !inst.repos.iter().any(|r| r == repo) {
            return Err(Box::new(message(StatusCode::NOT_FOUND, "Not Found")));
        }
        if m.repositories
            .as_ref()
            .is_some_and(|rs| !rs.iter().any(|r| r == repo))
        {
            return Err(self.refused(
                StatusCode::FORBIDDEN,
                "Resource not accessible by integration: token not for this repository",
            ));
        }
        let granted = m.permissions.get(permission).map(String::as_str);
        if granted != Some(level) && granted != Some("write") {
            return Err(self.refused(
                StatusCode::FORBIDDEN,
                &format!("Resource not accessible by integration: needs {permission}: {level}"),
            ));
        }
        Ok(())
    }

    /// An actions API call on `owner/repo`: headers, token, permission, and
    /// one call of the rate limit (403 once it is spent).
    fn actions_call(
        &self,
        h: &HeaderMap,
        call: String,
        owner: &str,
        repo: &str,
        permission: &str,
        level: &str,
    ) -> Result<HeaderMap, Box<Response>> {
        self.check_headers(h, call)?;
        let m = self.token(h)?;
        self.may_use(&m, owner, repo, permission, level)?;
        let mut w = self.world.lock().unwrap();
        let mut headers = HeaderMap::new();
        if let Some((left, reset)) = &mut w.workflow.rate {
            if *reset <= now_s() {
                *left = 5000;
                *reset = now_s() + 3600;
            }
            headers.insert("x-ratelimit-remaining", (*left - 1).max(0).into());
            headers.insert("x-ratelimit-reset", (*reset).into());
            if *left <= 0 {
                let r = (
                    StatusCode::FORBIDDEN,
                    headers,
                    axum::Json(json!({ "message": "API rate limit exceeded for installation." })),
                )
                    .into_response();
                drop(w);
                self.world
                    .lock()
                    .unwrap()
                    .refusals
                    .push("rate limit".into());
                return Err(Box::new(r));
            }
            *left -= 1;
        }
        Ok(headers)
    }
}

pub(super) async fn queued_runs(
    State(c): State<Ctx>,
    Path((o, r)): Path<(String, String)>,
    Query(q): Query<std::collections::HashMap<String, String>>,
    h: HeaderMap,
) -> Response {
    let headers = match c.actions_call(
        &h,
        format!("GET /repos/{o}/{r}/actions/runs"),
        &o,
        &r,
        "actions",
        "read",
    ) {
        Ok(h) => h,
        Err(resp) => return *resp,
    };
    let repository = format!("{o}/{r}");
    let wanted = q.get("status").map(String::as_str);
    let w = c.world.lock().unwrap();
    let mut ids: Vec<i64> = w
        .workflow
        .jobs
        .iter()
        .filter(|j| j.repository == repository)
        .map(|j| j.run_id)
        .collect();
    ids.dedup();
    // A run's status, as GitHub gives it: queued while all its jobs are,
    // completed once all are, in progress between.
    let status_of = |run: i64| {
        let jobs: Vec<&FakeWorkflowJob> =
            w.workflow.jobs.iter().filter(|j| j.run_id == run).collect();
        if jobs.iter().all(|j| j.status == "queued") {
            "queued"
        } else if jobs.iter().all(|j| j.status == "completed") {
            "completed"
        } else {
            "in_progress"
        }
    };
    let runs: Vec<Value> = ids
        .into_iter()
        .map(|id| (id, status_of(id)))
        .filter(|(_, s)| wanted.is_none_or(|w| w == *s))
        .map(|(id, s)| json!({ "id": id, "status": s }))
        .collect();
    (
        headers,
        axum::Json(json!({ "total_count": runs.len(), "workflow_runs": runs })),
    )
        .into_response()
}

pub(super) async fn run_jobs(
    State(c): State<Ctx>,
    Path((o, r, run)): Path<(String, String, i64)>,
    h: HeaderMap,
) -> Response {
    let headers = match c.actions_call(
        &h,
        format!("GET /repos/{o}/{r}/actions/runs/{run}/jobs"),
        &o,
        &r,
        "actions",
        "read",
    ) {
        Ok(h) => h,
        Err(resp) => return *resp,
    };
    let repository = format!("{o}/{r}");
    let w = c.world.lock().unwrap();
    let jobs: Vec<Value> = w
        .workflow
        .jobs
        .iter()
        .filter(|j| j.repository == repository && j.run_id == run)
        .map(job_json)
        .collect();
    (
        headers,
        axum::Json(json!({ "total_count": jobs.len(), "jobs": jobs })),
    )
        .into_response()
}

pub(super) async fn one_job(
    State(c): State<Ctx>,
    Path((o, r, id)): Path<(String, String, i64)>,
    h: HeaderMap,
) -> Response {
    let headers = match c.actions_call(
        &h,
        format!("GET /repos/{o}/{r}/actions/jobs/{id}"),
        &o,
        &r,
        "actions",
        "read",
    ) {
        Ok(h) => h,
        Err(resp) => return *resp,
    };
    let repository = format!("{o}/{r}");
    let w = c.world.lock().unwrap();
    match w
        .workflow
        .jobs
        .iter()
        .find(|j| j.repository == repository && j.id == id)
    {
        Some(j) => (headers, axum::Json(job_json(j))).into_response(),
        None => message(StatusCode::NOT_FOUND, "Not Found"),
    }
}

pub(super) async fn cancel_run(
    State(c): State<Ctx>,
    Path((o, r, run)): Path<(String, String, i64)>,
    h: HeaderMap,
) -> Response {
    if let Err(resp) = c.actions_call(
        &h,
        format!("POST /repos/{o}/{r}/actions/runs/{run}/cancel"),
        &o,
        &r,
        "actions",
        "write",
    ) {
        return *resp;
    }
    let repository = format!("{o}/{r}");
    let cancelled: Vec<FakeWorkflowJob> = {
        let mut w = c.world.lock().unwrap();
        w.workflow.cancelled_runs.push(run);
        w.workflow
            .jobs
            .iter_mut()
            .filter(|j| j.repository == repository && j.run_id == run && j.status == "queued")
            .map(|j| {
                j.status = "completed".into();
                j.conclusion = Some("cancelled".into());
                j.clone()
            })
            .collect()
    };
    for j in &cancelled {
        c.webhook("completed", j).await;
    }
    (StatusCode::ACCEPTED, axum::Json(json!({}))).into_response()
}

pub(super) async fn check_run(
    State(c): State<Ctx>,
    Path((o, r)): Path<(String, String)>,
    h: HeaderMap,
    body: Option<axum::Json<Value>>,
) -> Response {
    if let Err(resp) = c.actions_call(
        &h,
        format!("POST /repos/{o}/{r}/check-runs"),
        &o,
        &r,
        "checks",
        "write",
    ) {
        return *resp;
    }
    let body = body.map(|b| b.0).unwrap_or(json!({}));
    if body["name"].as_str().is_none() || body["head_sha"].as_str().is_none() {
        return c.refuse(
            StatusCode::UNPROCESSABLE_ENTITY,
            "Invalid request: name and head_sha are required",
        );
    }
    let mut w = c.world.lock().unwrap();
    w.workflow
        .check_runs
        .push(json!({ "repository": format!("{o}/{r}"), "body": body }));
    let id = w.workflow.check_runs.len();
    (StatusCode::CREATED, axum::Json(json!({ "id": id }))).into_response()
}

pub(super) async fn tarball(State(c): State<Ctx>) -> Response {
    let mut w = c.world.lock().unwrap();
    w.workflow.downloads += 1;
    match w.workflow.tarball.clone() {
        Some(t) => (
            [("content-type", "application/gzip")],
            Bytes::from(t.as_ref().clone()),
        )
            .into_response(),
        None => message(StatusCode::NOT_FOUND, "Not Found"),
    }
}

/// The stand-in Actions runner's `POST` with its JIT config.
pub(super) async fn runner_run(State(c): State<Ctx>, config: String) -> Response {
    let arrived = Instant::now();
    let runner_id = {
        let mut w = c.world.lock().unwrap();
        let Some(&id) = w.jit_configs.get(config.trim()) else {
            drop(w);
            return c.refuse(
                StatusCode::UNAUTHORIZED,
                "not a JIT config this host minted",
            );
        };
        if !w.workflow.used.insert(config.trim().to_owned()) {
            drop(w);
            return c.refuse(StatusCode::CONFLICT, "this JIT config was used already");
        }
        id
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let (job, runner_name) = loop {
        let changed = {
            let mut w = c.world.lock().unwrap();
            let Some(runner) = w.runners.iter().find(|r| r.id == runner_id).cloned() else {
                return message(StatusCode::GONE, "the runner was deleted");
            };
            let takes = |j: &FakeWorkflowJob| {
                j.status == "queued"
                    && (j.repository == runner.target
                        || j.repository.split('/').next() == Some(runner.target.as_str()))
                    && j.labels
                        .iter()
                        .all(|l| runner.labels.iter().any(|r| r.eq_ignore_ascii_case(l)))
            };
            if let Some(j) = w.workflow.jobs.iter_mut().find(|j| takes(j)) {
                j.status = "in_progress".into();
                j.runner_name = Some(runner.name.clone());
                j.runner_started_at = Some(arrived);
                let job = j.clone();
                let a = &mut w.workflow;
                a.in_progress += 1;
                a.max_in_progress = a.max_in_progress.max(a.in_progress);
                if let Some(r) = w.runners.iter_mut().find(|r| r.id == runner_id) {
                    r.busy = true;
                }
                break (job, runner.name);
            }
            w.workflow.changed.clone()
        };
        if tokio::time::timeout_at(deadline, changed.notified())
            .await
            .is_err()
        {
            return message(StatusCode::REQUEST_TIMEOUT, "no job came for this runner");
        }
    };
    c.webhook("in_progress", &job).await;
    let hold = Duration::from_millis(c.world.lock().unwrap().workflow.hold_ms);
    tokio::time::sleep(hold).await;
    let done = {
        let mut w = c.world.lock().unwrap();
        w.workflow.in_progress -= 1;
        // Ephemeral: GitHub deletes the runner after its one job.
        w.runners.retain(|r| r.id != runner_id);
        let j = w
            .workflow
            .jobs
            .iter_mut()
            .find(|j| j.id == job.id)
            .expect("the job");
        j.status = "completed".into();
        j.conclusion = Some("success".into());
        j.clone()
    };
    c.webhook("completed", &done).await;
    format!("{runner_name} ran workflow job {}\n", job.id).into_response()
}

/// `bin/Runner.Listener` of the stand-in: `run` posts the JIT config (from
/// `ACTIONS_RUNNER_INPUT_JITCONFIG`, as the real one reads it) to `web`.
fn listener_script(web: &str) -> String {
    format!(
        r#"#!/bin/sh
# The fake GitHub's Actions runner: gives its JIT config back to the host
# that minted it, which runs a queued workflow job on it and answers.
set -eu
[ "${{1:-}}" = run ] || {{ echo "usage: Runner.Listener run" >&2; exit 2; }}
config="${{ACTIONS_RUNNER_INPUT_JITCONFIG:?no JIT config}}"
mkdir -p _diag _work
echo "listening" > _diag/Runner.log
exec curl -fsS --max-time 90 -X POST --data-binary "$config" "{web}/_fake/actions-runner/run"
"#
    )
}

impl FakeGithub {
    /// Delivers workflow job events to the coordinator at `url` from now
    /// on, signed with [`WEBHOOK_SECRET`].
    pub fn webhooks_to(&self, url: &str) {
        self.world.lock().unwrap().workflow.hook = Some(url.to_owned());
    }

    /// How long each workflow job runs on a runner.
    pub fn hold_jobs(&self, hold: Duration) {
        self.world.lock().unwrap().workflow.hold_ms = hold.as_millis() as u64;
    }

    /// Queues a workflow job on `owner/repo` asking for `labels` (its own
    /// run), delivering `queued` if webhooks go somewhere; its id.
    pub async fn queue_workflow_job(&self, repository: &str, labels: &[&str]) -> i64 {
        self.queue_workflow_job_in(repository, labels, None).await
    }

    /// [`Self::queue_workflow_job`], in the run `run` (a job that waited
    /// on another of its run), or its own.
    pub async fn queue_workflow_job_in(
        &self,
        repository: &str,
        labels: &[&str],
        run: Option<i64>,
    ) -> i64 {
        let job = {
            let mut w = self.world.lock().unwrap();
            w.next_id += 1;
            let id = w.next_id;
            let job = FakeWorkflowJob {
                id,
                run_id: run.unwrap_or(id * 10),
                repository: repository.to_owned(),
                labels: labels.iter().map(|l| l.to_string()).collect(),
                status: "queued".into(),
                conclusion: None,
                runner_name: None,
                head_sha: format!("{:040x}", id),
                queued_at: Instant::now(),
                runner_started_at: None,
            };
            w.workflow.jobs.push(job.clone());
            w.workflow.changed.notify_waiters();
            job
        };
        self.ctx().webhook("queued", &job).await;
        job.id
    }

    /// A workflow job cancelled before a runner took it.
    pub async fn cancel_workflow_job(&self, id: i64) {
        let job = {
            let mut w = self.world.lock().unwrap();
            let j = w
                .workflow
                .jobs
                .iter_mut()
                .find(|j| j.id == id)
                .expect("a queued job");
            j.status = "completed".into();
            j.conclusion = Some("cancelled".into());
            j.clone()
        };
        self.ctx().webhook("completed", &job).await;
    }

    pub fn workflow_jobs(&self) -> Vec<FakeWorkflowJob> {
        self.world.lock().unwrap().workflow.jobs.clone()
    }

    /// The most workflow jobs that ran at once.
    pub fn max_in_progress(&self) -> usize {
        self.world.lock().unwrap().workflow.max_in_progress
    }

    /// Webhooks delivered: (action, workflow job, the coordinator's status).
    pub fn deliveries(&self) -> Vec<(String, i64, u16)> {
        self.world.lock().unwrap().workflow.deliveries.clone()
    }

    pub fn check_runs(&self) -> Vec<Value> {
        self.world.lock().unwrap().workflow.check_runs.clone()
    }

    pub fn cancelled_runs(&self) -> Vec<i64> {
        self.world.lock().unwrap().workflow.cancelled_runs.clone()
    }

    /// From now on the actions endpoints allow `left` more calls until
    /// `reset` (Unix seconds), then 5,000 an hour.
    pub fn set_rate_limit(&self, left: i64, reset: i64) {
        self.world.lock().unwrap().workflow.rate = Some((left, reset));
    }

    /// The stand-in Actions runner's tarball, served here: its URL and
    /// SHA-256 (`run.sh` and `bin/Runner.Listener`, made with the system's
    /// `tar`).
    pub fn actions_runner_tarball(&self) -> (String, String) {
        let url = format!("{}/_fake/actions-runner.tar.gz", self.web);
        if let Some(t) = self.world.lock().unwrap().workflow.tarball.clone() {
            return (url, hex(&sha2::Sha256::digest(t.as_slice())));
        }
        let dir = crate::TempDir::new("actions-runner");
        let bin = dir.path().join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        let run = dir.path().join("run.sh");
        std::fs::write(&run, "#!/bin/sh\nexec ./bin/Runner.Listener run \"$@\"\n").unwrap();
        let listener = bin.join("Runner.Listener");
        std::fs::write(&listener, listener_script(&self.web)).unwrap();
        use std::os::unix::fs::PermissionsExt as _;
        for f in [&run, &listener] {
            std::fs::set_permissions(f, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let out = dir.path().join("runner.tar.gz");
        let made = std::process::Command::new("tar")
            .args(["-czf"])
            .arg(&out)
            .args(["-C"])
            .arg(dir.path())
            .args(["run.sh", "bin"])
            .status()
            .expect("tar");
        assert!(made.success(), "tar failed");
        let bytes = std::fs::read(&out).unwrap();
        let sum = hex(&sha2::Sha256::digest(&bytes));
        let _ = std::fs::remove_dir_all(dir.path());
        self.world.lock().unwrap().workflow.tarball = Some(Arc::new(bytes));
        (url, sum)
    }

    /// How many times the tarball was downloaded.
    pub fn tarball_downloads(&self) -> usize {
        self.world.lock().unwrap().workflow.downloads
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Turns workspace pool `pool` on for `target` (with `labels` and a cap),
/// as the admin `admin`, through the coordinator.
pub async fn set_on_demand(
    admin: &crate::Member,
    pool: &str,
    target: &str,
    labels: &[&str],
    max_runners: u32,
) -> crate::runner_core::wire::GithubOnDemand {
    use crate::runner_core::wire::{GithubOnDemandRequest, op};
    let req = GithubOnDemandRequest {
        pool: pool.into(),
        target: target.into(),
        labels: labels.iter().map(|l| l.to_string()).collect(),
        max_runners: Some(max_runners),
        ..Default::default()
    };
    admin
        .client
        .call::<op::SetGithubOnDemand>(&[], &(), &req)
        .await
        .expect("an on-demand pool")
}

impl FakeGithub {
    /// `n` runners joined with `join` in one `drover runner
    /// --github-actions` process against coordinator `url`, in `sandbox`,
    /// serving this host's runner tarball (checked against `sha256` unless
    /// given); its state, cache and work directories under `dir`.
    pub fn actions_runners(
        &self,
        url: &str,
        join: &crate::runner_core::wire::JoinToken,
        n: usize,
        dir: &std::path::Path,
        sandbox: &str,
        sha256: Option<&str>,
    ) -> crate::RunnerProcess {
        let (tarball, sum) = self.actions_runner_tarball();
        let path = |name: &str| dir.join(name).display().to_string();
        crate::RunnerProcess::join(
            url,
            &join.runtime.reference,
            &join.token,
            n,
            &dir.join("state"),
            &[
                "--sandbox",
                sandbox,
                "--work-dir",
                &path("work"),
                "--github-actions",
                "--actions-runner-url",
                &tarball,
                "--actions-runner-sha256",
                sha256.unwrap_or(&sum),
                "--actions-runner-cache",
                &path("cache"),
            ],
        )
    }
}
