//! GitHub Actions on demand, against the fake GitHub: signed webhook
//! deliveries (unsigned, wrongly signed and replayed ones refused), a
//! `workflow_job` whose labels a pool has served by a just-in-time runner
//! minted for it and a Drover job that carries its config to a runner of
//! the pool (and one whose labels no pool has left alone), at most
//! `maxRunners` at once, and a workflow job cancelled before a runner took
//! it: its JIT runner deleted from GitHub and its Drover job cancelled.

use std::time::Duration;

use drover_tests::fake_github::{
    self, FakeGithub, GithubApp, WEBHOOK_SECRET, deliver, sign_webhook, workflow_job,
};
use drover_tests::runner_core::client::{Client, Scope};
use drover_tests::runner_core::wire::{self, ErrorCode, JobState, op};
use drover_tests::*;

struct World {
    fake: FakeGithub,
    c: Coordinator,
    admin: Member,
    /// A runner of pool `ci` that offers `github-actions`.
    runner: Client,
    _app: GithubApp,
}

/// A coordinator with the App and its webhook secret; the App installed on
/// `octo` (repository `web`) and linked; a workspace pool `ci` with one
/// runner that offers `github-actions`.
async fn world() -> World {
    let app = GithubApp::start().await;
    let c = Coordinator::start_with(CoordinatorOptions {
        serve_args: app.serve_args(),
        ..CoordinatorOptions::default()
    })
    .await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    let fake = app.com.clone();
    let id = fake.install("octo", "User", &["web", "docs"]);
    fake_github::link(&c.url, &admin, &fake, None, id).await;
    admin
        .client
        .create_runtime(Scope::Workspace, "ci")
        .await
        .unwrap();
    let paired = pair(&admin, Scope::Workspace, Some("ci"), "box", &[]).await;
    let runner = c.client(&paired.token);
    runner.hello(&["github-actions".into()]).await.unwrap();
    World {
        fake,
        c,
        admin,
        runner,
        _app: app,
    }
}

async fn on_demand(w: &World, max_runners: u32) -> wire::GithubOnDemand {
    fake_github::set_on_demand(&w.admin, "ci", "octo/web", &["linux"], max_runners).await
}

/// A signed `workflow_job` delivery; the coordinator's receipt.
async fn send(w: &World, action: &str, id: i64, labels: &[&str], ran_on: Option<&str>) -> String {
    let body = workflow_job(action, id, "octo/web", labels, ran_on, None);
    let delivery = format!("d-{action}-{id}-{}", uid());
    let sig = sign_webhook(WEBHOOK_SECRET, &body);
    let (status, answer) = deliver(&w.c.url, "workflow_job", &delivery, Some(&sig), &body).await;
    assert_eq!(status, 202, "{answer}");
    answer["outcome"].as_str().unwrap().to_owned()
}

/// A delivery id not used before in this process.
fn uid() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// The workspace's jobs submitted for workflow jobs.
async fn actions_jobs(w: &World) -> Vec<wire::Job> {
    let list = w.admin.client.jobs(None, 100).await.unwrap();
    list.jobs
        .into_iter()
        .filter(|j| j.submitted_by.contains("actions:octo/web"))
        .collect()
}

/// The states of the coordinator's workflow-job rows, counted.
async fn states(w: &World) -> Vec<String> {
    let mut s: Vec<String> =
        w.c.query_text("SELECT state FROM github_workflow_jobs")
            .await
            .into_iter()
            .flatten()
            .collect();
    s.sort();
    s
}

#[tokio::test]
async fn a_signed_queued_workflow_job_gets_a_jit_runner_on_the_pool() {
    let w = world().await;
    let pool = on_demand(&w, 5).await;
    assert_eq!(pool.labels, ["self-hosted", "drover-ci", "linux"]);
    assert_eq!(
        pool.workflow_hint,
        "runs-on: [self-hosted, drover-ci, linux]"
    );
    assert_eq!(pool.principal, "actions:octo/web");

    let body = workflow_job(
        "queued",
        41,
        "octo/web",
        &["self-hosted", "linux"],
        None,
        None,
    );
    let good = sign_webhook(WEBHOOK_SECRET, &body);
    // Unsigned, signed with another secret, or a signature of another body.
    for sig in [
        None,
        Some(sign_webhook("not-the-secret", &body)),
        Some(sign_webhook(WEBHOOK_SECRET, b"{}")),
        Some("sha256=00".to_owned()),
    ] {
        let (status, answer) =
            deliver(&w.c.url, "workflow_job", "d-1", sig.as_deref(), &body).await;
        assert_eq!(status, 401, "{answer}");
        assert_eq!(answer["error"]["code"], "UNAUTHORIZED");
    }
    let (status, answer) = deliver(&w.c.url, "workflow_job", "d-1", Some(&good), &body).await;
    assert_eq!(
        (status, answer["outcome"].as_str()),
        (202, Some("queued")),
        "{answer}"
    );
    // The same delivery again: a replay.
    let (status, answer) = deliver(&w.c.url, "workflow_job", "d-1", Some(&good), &body).await;
    assert_eq!(status, 409, "{answer}");
    assert_eq!(answer["error"]["code"], "CONFLICT");
    // Labels no on-demand pool has, another repository, another event.
    assert_eq!(
        send(&w, "queued", 42, &["self-hosted", "gpu"], None).await,
        "ignored"
    );
    let other = workflow_job("queued", 43, "octo/docs", &["self-hosted"], None, None);
    let sig = sign_webhook(WEBHOOK_SECRET, &other);
    let (_, answer) = deliver(&w.c.url, "workflow_job", "d-3", Some(&sig), &other).await;
    assert_eq!(answer["outcome"], "ignored");
    let ping = br#"{"zen":"Keep it logically awesome."}"#;
    let sig = sign_webhook(WEBHOOK_SECRET, ping);
    let (status, answer) = deliver(&w.c.url, "ping", "d-4", Some(&sig), ping).await;
    assert_eq!((status, answer["outcome"].as_str()), (202, Some("ignored")));

    // One Drover job on pool ci, by the principal, requiring github-actions.
    let jobs = eventually("the workflow job's Drover job", DEADLINE, || async {
        let jobs = actions_jobs(&w).await;
        (!jobs.is_empty()).then_some(jobs)
    })
    .await;
    assert_eq!(jobs.len(), 1, "{jobs:?}");
    let job = &jobs[0];
    assert_eq!(job.runtime_id, pool.pool_id);
    assert_eq!(job.requires, ["github-actions"]);
    assert_eq!(job.command, ["./run.sh"]);
    // GitHub registered an ephemeral runner with the pool's labels.
    let jit = w
        .fake
        .runners()
        .into_iter()
        .find(|r| r.name == "drover-ci-41")
        .expect("a JIT runner drover-ci-41");
    assert_eq!(jit.labels, ["self-hosted", "drover-ci", "linux"]);
    assert_eq!(w.fake.jit_configs_minted(), 1);

    // The pool's runner leases it with the JIT config, which nobody else
    // reads: not a job read, not the database.
    let lease = w
        .runner
        .lease(Duration::from_secs(5))
        .await
        .unwrap()
        .expect("the Actions runner's job");
    assert_eq!(lease.job.id, job.id);
    let config = lease
        .job
        .env
        .get("ACTIONS_RUNNER_INPUT_JITCONFIG")
        .expect("the JIT config in the job's env");
    assert_eq!(w.fake.jit_runner_of(config), Some(jit.id));
    let stored = w.c.database_contents().await;
    assert!(
        !stored.windows(config.len()).any(|x| x == config.as_bytes()),
        "the JIT config is in the database in plain text"
    );

    // Audited: turned on, and the JIT runner minted.
    let audit = w
        .admin
        .client
        .audit(&wire::AuditQuery::default())
        .await
        .unwrap();
    let actions: Vec<&str> = audit.events.iter().map(|e| e.action.as_str()).collect();
    assert!(actions.contains(&"github.on_demand_set"), "{actions:?}");
    assert!(actions.contains(&"github.jit_runner_minted"), "{actions:?}");
    assert_eq!(states(&w).await, ["started"]);
}

#[tokio::test]
async fn at_most_max_runners_at_once_and_a_cancelled_one_is_cleaned_up() {
    let w = world().await;
    on_demand(&w, 2).await;
    for id in 1..=5 {
        assert_eq!(
            send(&w, "queued", id, &["self-hosted"], None).await,
            "queued"
        );
    }
    // Two served, three waiting for room.
    let settled = eventually("two workflow jobs served", DEADLINE, || async {
        let s = states(&w).await;
        (s.iter().filter(|x| *x == "started").count() == 2 && !s.iter().any(|x| x == "minting"))
            .then_some(s)
    })
    .await;
    assert_eq!(
        settled,
        ["queued", "queued", "queued", "started", "started"]
    );
    assert_eq!(w.fake.jit_configs_minted(), 2);

    // Workflow job 1 is cancelled before a runner took it: its JIT runner
    // is deleted from GitHub, its Drover job cancelled, and the room it
    // held goes to workflow job 3.
    assert_eq!(
        send(&w, "completed", 1, &["self-hosted"], None).await,
        "finished"
    );
    eventually("the unused JIT runner deleted", DEADLINE, || async {
        (!w.fake.runners().iter().any(|r| r.name == "drover-ci-1")).then_some(())
    })
    .await;
    let first = eventually(
        "workflow job 1's Drover job cancelled",
        DEADLINE,
        || async {
            actions_jobs(&w)
                .await
                .into_iter()
                .find(|j| j.state == JobState::Cancelled)
        },
    )
    .await;
    assert_eq!(first.state, JobState::Cancelled);
    eventually("workflow job 3 served", DEADLINE, || async {
        w.fake
            .runners()
            .iter()
            .any(|r| r.name == "drover-ci-3")
            .then_some(())
    })
    .await;
    let s = eventually("the worker settled", DEADLINE, || async {
        let s = states(&w).await;
        (!s.iter().any(|x| x == "minting" || x == "finishing")).then_some(s)
    })
    .await;
    assert_eq!(s, ["done", "queued", "queued", "started", "started"]);
    assert_eq!(w.fake.jit_configs_minted(), 3);
    // A completed workflow job the coordinator never saw queued is ignored.
    assert_eq!(
        send(&w, "completed", 99, &["self-hosted"], None).await,
        "ignored"
    );
}

#[tokio::test]
async fn on_demand_pools_are_for_admins_and_checked() {
    let w = world().await;
    let member = w.c.add_member("acme", "dev@acme.test", "member");
    let req = wire::GithubOnDemandRequest {
        pool: "ci".into(),
        target: "octo/web".into(),
        ..Default::default()
    };
    let err = member
        .client
        .call::<op::SetGithubOnDemand>(&[], &(), &req)
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some(ErrorCode::Forbidden));
    for (bad, code) in [
        (
            wire::GithubOnDemandRequest {
                pool: "nope".into(),
                ..req.clone()
            },
            ErrorCode::NotFound,
        ),
        (
            wire::GithubOnDemandRequest {
                target: "someone-else/web".into(),
                ..req.clone()
            },
            ErrorCode::NotFound,
        ),
        (
            wire::GithubOnDemandRequest {
                target: "not a repo".into(),
                ..req.clone()
            },
            ErrorCode::BadRequest,
        ),
        (
            wire::GithubOnDemandRequest {
                runner_group_id: Some(2),
                ..req.clone()
            },
            ErrorCode::BadRequest,
        ),
        (
            wire::GithubOnDemandRequest {
                max_runners: Some(0),
                ..req.clone()
            },
            ErrorCode::BadRequest,
        ),
        (
            wire::GithubOnDemandRequest {
                labels: vec!["no spaces".into()],
                ..req.clone()
            },
            ErrorCode::BadRequest,
        ),
    ] {
        let err = w
            .admin
            .client
            .call::<op::SetGithubOnDemand>(&[], &(), &bad)
            .await
            .unwrap_err();
        assert_eq!(err.code(), Some(code), "{bad:?}: {err}");
    }
    let made = w
        .admin
        .client
        .call::<op::SetGithubOnDemand>(&[], &(), &req)
        .await
        .unwrap();
    assert_eq!(made.max_runners, 10);
    let list = w
        .admin
        .client
        .call::<op::ListGithubOnDemand>(&[], &(), &())
        .await
        .unwrap();
    assert_eq!(list.pools, std::slice::from_ref(&made));
    w.admin
        .client
        .call::<op::RemoveGithubOnDemand>(&[&made.id], &(), &())
        .await
        .unwrap();
    let err = w
        .admin
        .client
        .call::<op::RemoveGithubOnDemand>(&[&made.id], &(), &())
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some(ErrorCode::NotFound));
    // Turned off: a queued workflow job is no longer served.
    assert_eq!(
        send(&w, "queued", 7, &["self-hosted"], None).await,
        "ignored"
    );
}

/// A delivery's id is kept a week (GitHub redelivers within three days):
/// replayed on day 6 it is refused; on day 8 retention has let it go, and
/// the workflow job that ended with it.
#[tokio::test]
async fn a_delivery_is_remembered_a_week() {
    let mut w = world().await;
    on_demand(&w, 1).await;
    assert_eq!(
        send(&w, "queued", 5, &["self-hosted"], None).await,
        "queued"
    );
    eventually("workflow job 5 served", DEADLINE, || async {
        (states(&w).await == ["started"]).then_some(())
    })
    .await;
    assert_eq!(
        send(&w, "completed", 5, &["self-hosted"], None).await,
        "finished"
    );
    eventually("workflow job 5 done", DEADLINE, || async {
        (states(&w).await == ["done"]).then_some(())
    })
    .await;
    let ping = br#"{"zen":"Design for failure."}"#;
    let sig = sign_webhook(WEBHOOK_SECRET, ping);
    let (status, _) = deliver(&w.c.url, "ping", "d-week", Some(&sig), ping).await;
    assert_eq!(status, 202);
    for (days, answer) in [(6_u64, 409), (8, 202)] {
        w.c.stop().await;
        w.c.options.env = vec![(
            "DROVER_CLOCK_SKEW_MS",
            (days * 24 * 3600 * 1000).to_string(),
        )];
        w.c.restart().await;
        if answer == 202 {
            eventually(
                "the deliveries and the workflow job purged",
                DEADLINE,
                || async {
                    let n =
                        w.c.query_text("SELECT delivery FROM github_deliveries")
                            .await;
                    (n.is_empty() && states(&w).await.is_empty()).then_some(())
                },
            )
            .await;
        } else {
            assert_eq!(states(&w).await, ["done"]);
        }
        let (status, body) = deliver(&w.c.url, "ping", "d-week", Some(&sig), ping).await;
        assert_eq!(status, answer, "day {days}: {body}");
    }
}

#[tokio::test]
async fn a_ci_links_workflow_runs_on_the_on_demand_pools_labels() {
    let w = world().await;
    let req = wire::CiLinkRequest {
        repository: "octo/web".into(),
        runtime: Some("self:ws:ci".into()),
        ..Default::default()
    };
    w.admin
        .client
        .call::<op::SetCiLink>(&[], &(), &req)
        .await
        .unwrap();
    let runs_on = |yaml: &str| {
        yaml.lines()
            .find(|l| l.trim_start().starts_with("runs-on:"))
            .unwrap_or_default()
            .trim()
            .to_owned()
    };
    let before = w.admin.client.ci_workflow("octo/web", None).await.unwrap();
    assert_eq!(runs_on(&before), "runs-on: ['self-hosted']", "{before}");
    on_demand(&w, 3).await;
    let after = w.admin.client.ci_workflow("octo/web", None).await.unwrap();
    assert_eq!(
        runs_on(&after),
        "runs-on: ['self-hosted', 'drover-ci', 'linux']",
        "{after}"
    );
}
