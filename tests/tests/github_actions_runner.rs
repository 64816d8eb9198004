//! GitHub Actions on demand end to end: real `drover runner` processes with
//! `--github-actions` (in the bubblewrap sandbox), the fake GitHub's own
//! runner tarball standing in for the Actions runner (it hands its JIT
//! config back to the fake, which runs a queued workflow job on it), and
//! the fake delivering its webhooks — or, with webhooks off, the
//! coordinator polling within the rate limit. A tarball whose SHA-256 is
//! not the one given is never cached nor run; a runner gone before its
//! Actions runner took a job is replaced; a spent budget is told to GitHub.

use std::path::Path;
use std::time::Duration;

use drover_tests::fake_github::{self, FakeGithub, GithubApp};
use drover_tests::runner_core::client::Scope;
use drover_tests::runner_core::wire::{self, JobState};
use drover_tests::*;

struct World {
    fake: FakeGithub,
    c: Coordinator,
    admin: Member,
    dir: TempDir,
    _app: GithubApp,
}

/// A coordinator with the App (and `extra` serve flags), installed on
/// `octo` (repository `web`) and linked; a workspace pool `ci` turned on
/// for `octo/web` with label `linux` and `max_runners`.
async fn world(extra: &[&str], max_runners: u32) -> World {
    let app = GithubApp::start().await;
    let mut serve_args = app.serve_args();
    serve_args.extend(extra.iter().map(|s| s.to_string()));
    let c = Coordinator::start_with(CoordinatorOptions {
        serve_args,
        ..CoordinatorOptions::default()
    })
    .await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    let fake = app.com.clone();
    let id = fake.install("octo", "User", &["web"]);
    fake_github::link(&c.url, &admin, &fake, None, id).await;
    admin
        .client
        .create_runtime(Scope::Workspace, "ci")
        .await
        .unwrap();
    fake_github::set_on_demand(&admin, "ci", "octo/web", &["linux"], max_runners).await;
    World {
        fake,
        c,
        admin,
        dir: TempDir::new("actions-e2e"),
        _app: app,
    }
}

/// `n` runners of pool `ci` in one sandboxed `drover runner` process that
/// serves Actions on demand from the fake's tarball (`sha256` unless
/// given), its cache and work directories under the world's.
async fn runners(w: &World, n: usize, sha256: Option<&str>) -> RunnerProcess {
    let join = ws_join_token(&w.admin, "ci").await;
    w.fake
        .actions_runners(&w.c.url, &join, n, w.dir.path(), "bwrap", sha256)
}

fn entries(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// The Drover jobs the pool's principal submitted, once all have ended.
async fn ended_jobs(w: &World, n: usize) -> Vec<wire::Job> {
    eventually(
        "the Actions runners' jobs to end",
        Duration::from_secs(60),
        || async {
            let jobs: Vec<wire::Job> = w
                .admin
                .client
                .jobs(None, 100)
                .await
                .unwrap()
                .jobs
                .into_iter()
                .filter(|j| j.submitted_by.contains("actions:octo/web"))
                .collect();
            (jobs.len() == n && jobs.iter().all(|j| j.state.is_terminal())).then_some(jobs)
        },
    )
    .await
}

#[tokio::test]
async fn twenty_workflow_jobs_on_three_runners_each_by_its_own_ephemeral_runner() {
    let w = world(&[], 10).await;
    w.fake.webhooks_to(&w.c.url);
    w.fake.hold_jobs(Duration::from_millis(200));
    let _runners = runners(&w, 3, None).await;
    w.c.wait_for_waiting(3).await;
    let mut queued = Vec::new();
    for _ in 0..20 {
        queued.push(
            w.fake
                .queue_workflow_job("octo/web", &["self-hosted", "linux"])
                .await,
        );
    }
    let done = eventually(
        "20 workflow jobs to run",
        Duration::from_secs(120),
        || async {
            let jobs = w.fake.workflow_jobs();
            jobs.iter().all(|j| j.status == "completed").then_some(jobs)
        },
    )
    .await;
    // Each by exactly one ephemeral runner, its own; all succeeded.
    let mut names: Vec<String> = done
        .iter()
        .map(|j| {
            assert_eq!(j.conclusion.as_deref(), Some("success"), "{j:?}");
            j.runner_name.clone().expect("a runner ran it")
        })
        .collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), 20, "one runner per workflow job: {names:?}");
    assert!(
        names.iter().all(|n| n.starts_with("drover-ci-")),
        "only the pool's JIT runners: {names:?}"
    );
    assert_eq!(w.fake.jit_configs_minted(), 20, "no runner minted twice");
    assert!(
        w.fake.max_in_progress() <= 3,
        "{} workflow jobs ran at once on 3 runners",
        w.fake.max_in_progress()
    );
    assert!(
        w.fake.max_in_progress() >= 2,
        "the runners ran side by side"
    );
    // The Drover jobs succeeded; GitHub has no runner left; the release was
    // downloaded once for the host; nothing is left in the work directory.
    let jobs = ended_jobs(&w, 20).await;
    assert!(
        jobs.iter().all(|j| j.state == JobState::Succeeded),
        "{jobs:?}"
    );
    assert!(w.fake.runners().is_empty(), "{:?}", w.fake.runners());
    // Workspace jobs, each metered once: the workspace pays.
    let usage = w.admin.client.usage().await.unwrap();
    assert_eq!(usage.jobs_charged, 20, "{usage:?}");
    assert!(usage.charged_ms > 0, "{usage:?}");
    assert_eq!(w.fake.tarball_downloads(), 1);
    assert_eq!(entries(&w.dir.path().join("cache")).len(), 1);
    eventually(
        "the work directory to be empty",
        Duration::from_secs(10),
        || async { entries(&w.dir.path().join("work")).is_empty().then_some(()) },
    )
    .await;
    let log = w.admin.client.logs(&jobs[0].id).await.unwrap();
    assert!(log.contains("unpacked from the cache"), "{log}");
    assert!(log.contains("ran workflow job"), "{log}");
    let states =
        w.c.query_text("SELECT DISTINCT state FROM github_workflow_jobs")
            .await;
    assert_eq!(states, [Some("done".to_owned())]);
    let _ = queued;
}

#[tokio::test]
async fn with_webhooks_off_the_coordinator_polls_within_the_rate_limit() {
    let w = world(&["--github-poll-seconds", "1"], 10).await;
    // One call left this window: the coordinator polls no more until it
    // resets (never a 403 for going over).
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    w.fake.set_rate_limit(1, now + 3);
    let _runners = runners(&w, 1, None).await;
    w.c.wait_for_waiting(1).await;
    let a = w
        .fake
        .queue_workflow_job("octo/web", &["self-hosted", "linux"])
        .await;
    let b = w
        .fake
        .queue_workflow_job("octo/web", &["self-hosted", "gpu"])
        .await;
    let done = |id: i64| {
        let fake = w.fake.clone();
        async move {
            fake.workflow_jobs()
                .iter()
                .any(|j| j.id == id && j.status == "completed")
                .then_some(())
        }
    };
    eventually("a to run", Duration::from_secs(60), || done(a)).await;
    // A job of a's run that waited on it: its run is in progress now.
    let run = w.fake.workflow_jobs()[0].run_id;
    let c = w
        .fake
        .queue_workflow_job_in("octo/web", &["self-hosted", "linux"], Some(run))
        .await;
    eventually("c to run", Duration::from_secs(60), || done(c)).await;
    let jobs = w.fake.workflow_jobs();
    let of = |id: i64| jobs.iter().find(|j| j.id == id).unwrap().clone();
    assert_eq!(of(b).status, "queued", "no pool has label gpu");
    assert_ne!(of(a).runner_name, of(c).runner_name);
    assert_eq!(
        w.fake.jit_configs_minted(),
        2,
        "one runner per workflow job"
    );
    assert!(w.fake.deliveries().is_empty(), "no webhook was sent");
    assert!(
        !w.fake.refusals().iter().any(|r| r == "rate limit"),
        "the coordinator went over the rate limit: {:?}",
        w.fake.refusals()
    );
    ended_jobs(&w, 2).await;
    // The poll saw them complete too.
    eventually(
        "the coordinator to see both done",
        Duration::from_secs(30),
        || async {
            let states =
                w.c.query_text("SELECT state FROM github_workflow_jobs ORDER BY workflow_job_id")
                    .await;
            (states == [Some("done".to_owned()), Some("done".to_owned())]).then_some(())
        },
    )
    .await;
}

#[tokio::test]
async fn a_release_whose_checksum_differs_is_neither_cached_nor_run() {
    let w = world(&[], 10).await;
    w.fake.webhooks_to(&w.c.url);
    let wrong = "0".repeat(64);
    let _runners = runners(&w, 1, Some(&wrong)).await;
    w.c.wait_for_waiting(1).await;
    let id = w
        .fake
        .queue_workflow_job("octo/web", &["self-hosted", "linux"])
        .await;
    // Three JIT runners, each of whose jobs fails before it takes the
    // workflow job: then it is refused where GitHub shows it.
    let check = eventually(
        "the workflow job refused",
        Duration::from_secs(90),
        || async { w.fake.check_runs().into_iter().next() },
    )
    .await;
    let summary = check["body"]["output"]["summary"].as_str().unwrap();
    assert!(summary.contains("3 times on pool \"ci\""), "{summary}");
    let jobs = ended_jobs(&w, 3).await;
    for job in &jobs {
        assert_eq!(job.state, JobState::Failed, "{jobs:?}");
        let error = job.error.clone().unwrap_or_default();
        assert!(
            error.contains("could not provide the Actions runner") && error.contains(&wrong),
            "{error}"
        );
    }
    assert!(entries(&w.dir.path().join("cache")).is_empty());
    assert_eq!(w.fake.jit_configs_minted(), 3);
    assert!(w.fake.runners().is_empty(), "{:?}", w.fake.runners());
    let job = w.fake.workflow_jobs()[0].clone();
    assert_eq!(
        (job.id, job.status.as_str()),
        (id, "completed"),
        "its run cancelled"
    );
    assert_eq!(w.fake.cancelled_runs(), [job.run_id]);
}

#[tokio::test]
async fn a_workflow_job_whose_runner_went_before_it_ran_is_served_again() {
    let w = world(&[], 10).await;
    w.fake.webhooks_to(&w.c.url);
    // The first runner cannot start the Actions runner: its job ends
    // without the JIT runner ever taking the workflow job.
    let mut broken = runners(&w, 1, Some(&"0".repeat(64))).await;
    w.c.wait_for_waiting(1).await;
    let id = w
        .fake
        .queue_workflow_job("octo/web", &["self-hosted", "linux"])
        .await;
    let first = ended_jobs(&w, 1).await;
    assert_eq!(first[0].state, JobState::Failed);
    broken.kill9().await;
    let _good = runners(&w, 1, None).await;
    let job = eventually(
        "the workflow job to run",
        Duration::from_secs(60),
        || async {
            w.fake
                .workflow_jobs()
                .into_iter()
                .find(|j| j.id == id && j.status == "completed")
        },
    )
    .await;
    assert_eq!(job.conclusion.as_deref(), Some("success"));
    assert_eq!(w.fake.jit_configs_minted(), 2, "a second JIT runner, once");
    assert!(
        w.fake.runners().is_empty(),
        "the first JIT runner was deleted: {:?}",
        w.fake.runners()
    );
    let jobs = ended_jobs(&w, 2).await;
    assert_eq!(
        jobs.iter()
            .filter(|j| j.state == JobState::Succeeded)
            .count(),
        1,
        "{jobs:?}"
    );
}

#[tokio::test]
async fn a_spent_budget_fails_the_workflow_job_where_github_shows_it() {
    let w = world(&[], 5).await;
    let _runners = runners(&w, 1, None).await;
    w.c.wait_for_waiting(1).await;
    w.admin.client.set_budget(Some(0)).await.unwrap();
    w.fake.webhooks_to(&w.c.url);
    let id = w
        .fake
        .queue_workflow_job("octo/web", &["self-hosted", "linux"])
        .await;
    let check = eventually(
        "a check run on the commit",
        Duration::from_secs(30),
        || async { w.fake.check_runs().into_iter().next() },
    )
    .await;
    let job = w.fake.workflow_jobs()[0].clone();
    assert_eq!(check["repository"], "octo/web");
    assert_eq!(check["body"]["head_sha"], job.head_sha.as_str());
    assert_eq!(check["body"]["conclusion"], "failure");
    let summary = check["body"]["output"]["summary"].as_str().unwrap();
    assert!(
        summary.contains("budget") && summary.contains("\"acme\""),
        "{summary}"
    );
    // Its run is cancelled, so GitHub does not keep it waiting for a runner.
    eventually("the run cancelled", Duration::from_secs(30), || async {
        let jobs = w.fake.workflow_jobs();
        (w.fake.cancelled_runs() == [job.run_id] && jobs[0].status == "completed").then_some(())
    })
    .await;
    assert_eq!(
        w.fake.workflow_jobs()[0].conclusion.as_deref(),
        Some("cancelled")
    );
    eventually(
        "the workflow job refused",
        Duration::from_secs(30),
        || async {
            let states =
                w.c.query_text("SELECT state FROM github_workflow_jobs")
                    .await;
            (states == [Some("refused".to_owned())]).then_some(())
        },
    )
    .await;
    // Its JIT runner is gone, and no Drover job was queued.
    assert!(w.fake.runners().is_empty(), "{:?}", w.fake.runners());
    let jobs = w.admin.client.jobs(None, 100).await.unwrap().jobs;
    assert!(jobs.is_empty(), "{jobs:?}");
    let _ = id;
}
