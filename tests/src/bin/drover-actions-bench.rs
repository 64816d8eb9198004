//! `drover-actions-bench`: GitHub Actions on demand, from GitHub's
//! `workflow_job queued` webhook to the JIT runner's process started on a
//! waiting Drover runner (its Listener calling home), p50 and p99, on
//! SQLite and PostgreSQL. Real processes on loopback: the coordinator, one
//! `drover runner --github-actions` (sandboxed with bubblewrap when the
//! host has it), and the fake GitHub delivering its signed webhooks and
//! serving its runner tarball (the cache is warmed first). One workflow job
//! at a time, `BENCH_ACTIONS_JOBS` of them (default 100); `BENCH_BACKENDS`
//! is `sqlite,pg` by default (PostgreSQL from `DROVER_TEST_PG_URL`). Prints
//! a Markdown table and one JSON line. Run through `bench/run.sh`.

use std::time::Duration;

use drover_tests::fake_github::{self, GithubApp};
use drover_tests::runner_core::client::Scope;
use drover_tests::*;
use serde_json::json;

fn ms(samples: &[Duration], p: f64) -> f64 {
    let i = ((samples.len() as f64 - 1.0) * p).round() as usize;
    samples[i].as_secs_f64() * 1000.0
}

async fn one_backend(name: &str, backend: Backend, jobs: usize) -> serde_json::Value {
    let app = GithubApp::start().await;
    let c = Coordinator::start_with(CoordinatorOptions {
        backend,
        lease_ttl_ms: 20_000,
        serve_args: app.serve_args(),
        ..CoordinatorOptions::default()
    })
    .await;
    let admin = c.bootstrap("bench", "bench@bench.test");
    let fake = app.com.clone();
    let id = fake.install("octo", "User", &["web"]);
    fake_github::link(&c.url, &admin, &fake, None, id).await;
    admin
        .client
        .create_runtime(Scope::Workspace, "ci")
        .await
        .unwrap();
    fake_github::set_on_demand(&admin, "ci", "octo/web", &[], 10).await;
    fake.webhooks_to(&c.url);
    let dir = TempDir::new("actions-bench");
    let join = ws_join_token(&admin, "ci").await;
    let sandbox = if std::path::Path::new("/usr/bin/bwrap").exists() {
        "bwrap"
    } else {
        "none"
    };
    let _runner = fake.actions_runners(&c.url, &join, 1, dir.path(), sandbox, None);
    c.wait_for_waiting(1).await;
    let labels = ["self-hosted", "drover-ci"];
    let mut samples = Vec::with_capacity(jobs);
    // The first fills the cache; not counted.
    for i in 0..=jobs {
        let id = fake.queue_workflow_job("octo/web", &labels).await;
        let job = eventually(
            "the workflow job to run",
            Duration::from_secs(60),
            || async {
                fake.workflow_jobs()
                    .into_iter()
                    .find(|j| j.id == id && j.status == "completed")
            },
        )
        .await;
        if i > 0 {
            samples.push(job.runner_started_at.expect("started") - job.queued_at);
        }
        // The runner is waiting again before the next one.
        c.wait_for_waiting(1).await;
    }
    samples.sort();
    let (p50, p99, max) = (ms(&samples, 0.5), ms(&samples, 0.99), ms(&samples, 1.0));
    println!("| {name} | {jobs} | {p50:.1} ms | {p99:.1} ms | {max:.1} ms | {sandbox} |");
    json!({ "backend": name, "jobs": jobs, "sandbox": sandbox,
        "webhookToRunnerMs": { "p50": p50, "p99": p99, "max": max } })
}

#[tokio::main]
async fn main() {
    let jobs = std::env::var("BENCH_ACTIONS_JOBS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100usize);
    let backends = std::env::var("BENCH_BACKENDS").unwrap_or_else(|_| "sqlite,pg".into());
    println!(
        "| backend | workflow jobs, one at a time | webhook → runner started, p50 | p99 | max | sandbox |"
    );
    println!("|---|---|---|---|---|---|");
    let mut rows = Vec::new();
    for b in backends.split(',') {
        rows.push(match b {
            "sqlite" => one_backend("SQLite", Backend::Sqlite, jobs).await,
            "pg" => one_backend("PostgreSQL", Backend::Postgres, jobs).await,
            other => panic!("unknown backend {other:?}"),
        });
    }
    println!("\n{}", json!({ "actions": rows }));
}
