//! SPEC §2 rules 1, 6, 7: no double hand-out, lease order, round-robin
//! wake-ups, provenance; and the torture test.

use std::collections::HashSet;

use drover_tests::runner_core::client::Scope;
use drover_tests::runner_core::wire::{JobState, SubmitJob};
use drover_tests::*;

#[tokio::test]
async fn pinned_jobs_first_then_priority_then_fifo() {
    let c = Coordinator::start().await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    let runner = pair(&admin, Scope::Workspace, None, "solo", &[]).await;
    let dir = TempDir::new("order");
    let log = dir.path().join("order.log");
    let job = |name: &str, runtime: &str, priority: i32| SubmitJob {
        priority,
        ..script_job(runtime, &format!("echo {name} >> {}", log.display()))
    };
    let pinned = format!("self:ws:{}", runner.runner.id);
    for (name, runtime, priority) in [
        ("a", "self:ws", 0),
        ("b", "self:ws", 5),
        ("c", pinned.as_str(), 0),
        ("d", "self:ws", 0),
        ("e", "self:ws", 5),
        ("f", "self:ws", -3),
    ] {
        admin
            .client
            .submit(&job(name, runtime, priority))
            .await
            .unwrap();
    }
    // The runner starts only now, with everything queued.
    let _r = RunnerProcess::paired(&c.url, &runner.token, &[]);
    eventually("all six jobs to run", DEADLINE, || {
        let n = read_lines(&log).len();
        async move { (n == 6).then_some(()) }
    })
    .await;
    assert_eq!(read_lines(&log), ["c", "b", "e", "a", "d", "f"]);
}

#[tokio::test]
async fn waiting_runners_are_woken_round_robin() {
    let c = Coordinator::start().await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    let join = ws_join_token(&admin, "default").await;
    let state = TempDir::new("state");
    let _runners = RunnerProcess::join(&c.url, "self:ws", &join.token, 3, state.path(), &[]);
    c.wait_for_waiting(3).await;
    let mut ran_by = Vec::new();
    for _ in 0..9 {
        let job = admin
            .client
            .submit(&script_job("self:ws", "true"))
            .await
            .unwrap();
        let done = wait_done(&admin.client, &job.id).await;
        ran_by.push(done.provenance.unwrap().ran_by);
        // The runner that ran it is back in line, behind the other two.
        c.wait_for_waiting(3).await;
    }
    let first: HashSet<_> = ran_by[..3].iter().collect();
    assert_eq!(
        first.len(),
        3,
        "each waiting runner gets a turn: {ran_by:?}"
    );
    for i in 3..9 {
        assert_eq!(ran_by[i], ran_by[i - 3], "strict rotation: {ran_by:?}");
    }
}

#[tokio::test]
async fn a_job_submitted_to_a_waiting_pool_is_leased_at_once_and_only_once() {
    let c = Coordinator::start().await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    let join = ws_join_token(&admin, "default").await;
    let state = TempDir::new("state");
    let dir = TempDir::new("once");
    let runners = RunnerProcess::join(
        &c.url,
        "self:ws",
        &join.token,
        8,
        state.path(),
        &["--max-concurrent", "2"],
    );
    c.wait_for_waiting(16).await;
    let marker = dir.path().join("ran");
    let job = admin
        .client
        .submit(&script_job(
            "self:ws",
            &format!(
                "echo \"$DROVER_JOB_ID $DROVER_ATTEMPT\" >> {}",
                marker.display()
            ),
        ))
        .await
        .unwrap();
    let done = wait_done(&admin.client, &job.id).await;
    assert_eq!(done.state, JobState::Succeeded);
    assert_eq!(read_lines(&marker), [format!("{} 1", job.id)]);
    // Every other waiter went back to waiting; none got the job too.
    c.wait_for_waiting(16).await;
    assert_eq!(
        runners
            .lines()
            .iter()
            .filter(|l| l.contains("leased"))
            .count(),
        1
    );
}

/// Many runners in several processes, thousands of jobs, one runner
/// process killed with SIGKILL half-way: every job succeeds, no job ever
/// runs twice in the same attempt, and a re-run happens only for a job
/// whose lease was lost (its attempt number says so).
#[tokio::test]
async fn torture_many_runners_thousands_of_jobs_zero_duplicates_zero_lost() {
    let jobs: usize = std::env::var("DROVER_TORTURE_JOBS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let c = Coordinator::start_with(CoordinatorOptions {
        lease_ttl_ms: 2000,
        ..Default::default()
    })
    .await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    let join = ws_join_token(&admin, "default").await;
    let dir = TempDir::new("torture");
    let record = dir.path().join("executions");
    let mut procs: Vec<RunnerProcess> = (0..4)
        .map(|i| {
            let state = dir.path().join(format!("state-{i}"));
            let slots = if i % 2 == 0 { "1" } else { "3" };
            RunnerProcess::join(
                &c.url,
                "self:ws",
                &join.token,
                6,
                &state,
                &["--max-concurrent", slots],
            )
        })
        .collect();
    c.wait_for_waiting(6 * (1 + 3 + 1 + 3)).await;

    let script = recorded(&record, "true");
    let mut ids = Vec::with_capacity(jobs);
    let submits: Vec<_> = (0..jobs)
        .map(|i| {
            let client = admin.client.clone();
            let job = SubmitJob {
                priority: (i % 3) as i32,
                ..script_job("self:ws", &script)
            };
            tokio::spawn(async move { client.submit(&job).await.expect("submit").id })
        })
        .collect();
    let mut lost = LostLeases::default();
    for s in submits {
        ids.push(s.await.unwrap());
        if ids.len() == jobs / 2 {
            procs[1].kill9().await;
            lost.killed(&procs[1]);
        }
    }
    let db = DbProbe::open(&c).await;
    eventually("every job to finish", Duration::from_secs(600), || async {
        (db.finished_jobs().await >= jobs).then_some(())
    })
    .await;

    // No two executions of a job overlap; each re-run follows a lost lease.
    let runs = check_executions(&record, &ids);
    let reruns = superseded(&runs);
    lost.check(&runs, &procs).await;

    // Each job billed once per attempt that ran (a lost one too), no more.
    check_metering(&c, jobs).await;
    for id in ids.iter().step_by(97) {
        let job = admin.client.job(id).await.unwrap();
        assert_eq!(job.state, JobState::Succeeded);
        let p = job.provenance.unwrap();
        assert!(p.ran_by.starts_with("rn_"));
        let last = runs[id].last().unwrap();
        assert_eq!((p.attempt, &p.ran_by), (last.attempt, &last.runner));
    }
    // Only jobs the killed process held could re-run: at most its slots.
    assert!(
        reruns.len() <= 6 * 3,
        "{} re-runs, more than the killed process could hold",
        reruns.len()
    );
    let succeeded = admin
        .client
        .jobs(Some(JobState::Succeeded), 1000)
        .await
        .unwrap()
        .jobs
        .len();
    assert_eq!(succeeded, jobs.min(1000));
    drop(procs);
}

use std::time::Duration;
