//! The quickstart's main job: a coordinator on SQLite, a workspace, runners
//! joined to its pool and to a member's laptop pool, a handful of jobs run,
//! and their results and provenance printed.

use drover_tests::runner_core::client::Scope;
use drover_tests::runner_core::wire::{Job, SubmitJob};
use drover_tests::*;

fn row(job: &Job, log: &str) -> String {
    let (ran_by, by, attempt) = job
        .provenance
        .as_ref()
        .map_or(("-".to_owned(), "-".to_owned(), 0), |p| {
            (p.ran_by.clone(), p.by.clone(), p.attempt)
        });
    let first_line = log
        .lines()
        .next()
        .unwrap_or("")
        .chars()
        .take(36)
        .collect::<String>();
    format!(
        "| {} | `{}` | {} | {} | {} | {} | {} | {} |",
        job.id,
        job.runtime,
        job.state.as_str(),
        job.exit_code.map_or("-".into(), |c| c.to_string()),
        ran_by,
        by,
        attempt,
        first_line
    )
}

#[tokio::main]
async fn main() {
    let c = Coordinator::start().await;
    println!("coordinator: {} (SQLite: {})", c.url, c.database);
    let admin = c.bootstrap("demo", "admin@demo.test");
    let dev = c.add_member("demo", "dev@demo.test", "member");
    println!(
        "workspace:   demo (admin {}, member {})",
        admin.email, dev.email
    );

    // Team build servers: three runners joined to the workspace pool.
    let join = admin
        .client
        .join_token(Scope::Workspace, "default")
        .await
        .expect("join token");
    let state = TempDir::new("demo-state");
    let _servers = RunnerProcess::join(
        &c.url,
        "self:ws",
        &join.token,
        3,
        state.path(),
        &["--labels", "builder"],
    );
    // The member's laptop: one paired personal runner.
    let laptop = pair(&dev, Scope::Me, None, "dev-laptop", &[]).await;
    let _laptop = RunnerProcess::paired(&c.url, &laptop.token, &[]);
    c.wait_for_waiting(4).await;
    println!(
        "runners:     3 workspace runners ({}), 1 personal ({})\n",
        join.runtime.reference, laptop.runner.id
    );

    let jobs = [
        script_job("self:ws", "echo built on a team server by $DROVER_JOB_ID"),
        SubmitJob {
            requires: vec!["builder".into(), "os=linux".into()],
            ..script_job("self:ws", "uname -s")
        },
        SubmitJob {
            priority: 10,
            ..script_job("ws:demo:default", "echo urgent work first")
        },
        script_job("self:ws", "echo failing on purpose >&2; exit 3"),
        SubmitJob {
            timeout_seconds: Some(1),
            ..script_job("self:ws", "echo sleeping too long; sleep 30")
        },
        script_job("self", "echo on my own laptop, own-pays"),
        SubmitJob {
            command: vec!["sh".into(), "-c".into(), "echo $GREETING from env".into()],
            env: [("GREETING".to_owned(), "hello".to_owned())].into(),
            ..SubmitJob {
                runtime: "self:ws".into(),
                ..SubmitJob::default()
            }
        },
    ];
    let mut submitted = Vec::new();
    for job in &jobs {
        submitted.push(dev.client.submit(job).await.expect("submit").id);
    }
    println!("| job | runtime | state | exit | ran by | by (pays) | attempt | log |");
    println!("|---|---|---|---|---|---|---|---|");
    for id in &submitted {
        let job = wait_done(&dev.client, id).await;
        let log = dev.client.logs(id).await.expect("logs");
        println!("{}", row(&job, &log));
    }
    let usage = admin.client.usage().await.expect("usage");
    println!(
        "\nbilling: workspace charged {} jobs ({} ms); own-pays {} jobs ({} ms), never charged",
        usage.jobs_charged, usage.charged_ms, usage.jobs_own_pays, usage.own_pays_ms
    );
}
