//! SPEC §2 rules 1, 6, 7: no double hand-out, lease order, round-robin
//! wake-ups, provenance; the torture test; a pause strands no job.

use std::collections::HashSet;
use std::time::Duration;

use drover_tests::proxy::{Fault, Proxy};
use drover_tests::runner_core::client::{RunnerListing, Scope};
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

/// A runner paused while its lease request waits: the coordinator ends
/// that request once it hears of the pause (hello, paused), well before
/// the request's own wait is up.
#[tokio::test]
async fn a_pause_ends_the_runners_waiting_lease_request() {
    let c = Coordinator::start().await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    let paired = pair(&admin, Scope::Workspace, None, "paused", &[]).await;
    let runner = c.client(&paired.token);
    runner.hello_as(&[], 1, false).await.unwrap();
    a_pause_ends_the_waiting_request(runner, &c, &c.client(&paired.token)).await;
    // Not queued for it meanwhile: a job submitted now waits for a resume.
    let job = admin
        .client
        .submit(&script_job("self:ws", "true"))
        .await
        .unwrap();
    assert_eq!(c.waiting_leases().await, 0);
    assert_eq!(
        admin.client.job(&job.id).await.unwrap().state,
        JobState::Queued
    );
}

/// A job submitted just as its runner is paused is never stranded on a
/// lease request the runner gave up: the runner (a runner-core fleet, as
/// the desktop app runs) reads its request to its end, so a job leased to
/// it before the pause reached the coordinator runs, and later ones wait.
/// The runner's link is slow (a proxy delays each way by 200 ms, its
/// connection's close too), so its pause reaches the coordinator well
/// after the submit; the lease's TTL is twice the tests' deadline, so a
/// stranded lease would show as one.
#[tokio::test]
async fn a_job_submitted_as_its_runner_pauses_runs_or_waits_never_stranded() {
    use drover_tests::runner_core::client::{Client, ClientOptions, Token};
    use drover_tests::runner_core::fleet::Fleet;
    use drover_tests::runner_core::runner::{Credential, RunnerSettings};
    let c = Coordinator::start_with(CoordinatorOptions {
        lease_ttl_ms: 2 * DEADLINE.as_millis() as u64,
        ..CoordinatorOptions::default()
    })
    .await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    let paired = pair(&admin, Scope::Workspace, None, "laptop", &[]).await;
    let proxy = Proxy::start(&c.url).await;
    proxy.set(Fault::Delay(Duration::from_millis(200)));
    let work = TempDir::new("pausing");
    let client = Client::with_options(&proxy.url(), Token::new(""), &ClientOptions::default())
        .expect("client");
    let settings = RunnerSettings {
        work_root: work.path().to_owned(),
        ..RunnerSettings::default()
    };
    let (mut fleet, _events) = Fleet::new(client, settings).expect("a fleet");
    fleet.add(Credential {
        runner_id: paired.runner.id.to_string(),
        token: Token::new(paired.token.clone()),
    });
    c.wait_for_waiting(1).await;

    fleet.set_paused(true);
    let first = admin
        .client
        .submit(&script_job("self:ws", "true"))
        .await
        .unwrap();
    let done = wait_state(&admin.client, &first.id, JobState::Succeeded).await;
    assert_eq!(done.attempt, 1, "{done:?}");

    // The pause has reached the coordinator: listed paused, nothing waiting.
    eventually("listed paused", DEADLINE, || {
        let client = &admin.client;
        async move {
            let runners = client.runners(RunnerListing::Roster).await.ok()?.runners;
            runners.iter().all(|r| r.paused).then_some(())
        }
    })
    .await;
    c.wait_for_waiting(0).await;
    let second = admin
        .client
        .submit(&script_job("self:ws", "true"))
        .await
        .unwrap();
    assert_eq!(
        admin.client.job(&second.id).await.unwrap().state,
        JobState::Queued
    );
    fleet.set_paused(false);
    let done = wait_done(&admin.client, &second.id).await;
    assert_eq!((done.state, done.attempt), (JobState::Succeeded, 1));
}
