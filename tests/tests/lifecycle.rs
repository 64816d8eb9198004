//! SPEC §3: states, timeouts, cancel of a whole process group, lease
//! expiry after SIGKILL with re-queue at the front, idempotent complete,
//! live logs, drain on SIGTERM.
//!
//! (Over 500 lines: one self-contained test per lifecycle rule of SPEC §3.)

use std::path::Path;
use std::time::Duration;

use drover_tests::runner_core::client::Scope;
use drover_tests::runner_core::wire::{
    Complete, ErrorCode, JobState, LeaseRequest, LogChunk, LogEnd, LogStream, Outcome, SubmitJob,
};
use drover_tests::*;

fn alive(pid: i32) -> bool {
    // A zombie has exited; only its entry remains until it is reaped.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

fn read_pid(path: &Path) -> Option<i32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

fn kill_group(pgid: i32) {
    // SAFETY: signalling a process group this test created.
    unsafe {
        libc::kill(-pgid, libc::SIGKILL);
    }
}

#[tokio::test]
async fn jobs_move_through_their_states_with_exit_codes_and_timeouts() {
    let c = Coordinator::start().await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    let runner = pair(&admin, Scope::Workspace, None, "r", &[]).await;
    let dir = TempDir::new("states");
    let go = dir.path().join("go");
    let gated = admin
        .client
        .submit(&script_job(
            "self:ws",
            &format!("while [ ! -f {} ]; do sleep 0.02; done", go.display()),
        ))
        .await
        .unwrap();
    assert_eq!(gated.state, JobState::Queued);
    assert_eq!(gated.attempt, 0);
    assert_eq!(gated.started_at, None, "a queued job has not started");
    let _r = RunnerProcess::paired(&c.url, &runner.token, &["--max-concurrent", "4"]);
    let running = wait_state(&admin.client, &gated.id, JobState::Running).await;
    assert_eq!(running.attempt, 1);
    std::fs::write(&go, "").unwrap();
    let done = wait_done(&admin.client, &gated.id).await;
    assert_eq!((done.state, done.exit_code), (JobState::Succeeded, Some(0)));
    // Its times: queued, then leased, then ended, in that order.
    let (started, finished) = (done.started_at.unwrap(), done.finished_at.unwrap());
    assert!(
        gated.created_at <= started && started <= finished,
        "{gated:?} then {done:?}"
    );
    assert_eq!(running.started_at, Some(started));

    let failed = admin
        .client
        .submit(&script_job("self:ws", "exit 7"))
        .await
        .unwrap();
    let failed = wait_done(&admin.client, &failed.id).await;
    assert_eq!(
        (failed.state, failed.exit_code),
        (JobState::Failed, Some(7))
    );

    let slow = SubmitJob {
        timeout_seconds: Some(1),
        ..script_job("self:ws", "sleep 30")
    };
    let slow = admin.client.submit(&slow).await.unwrap();
    let slow = wait_done(&admin.client, &slow.id).await;
    assert_eq!(slow.state, JobState::TimedOut);
    assert!(slow.error.unwrap().contains("timed out"));

    let missing = SubmitJob {
        command: vec!["/nonexistent/program".into()],
        ..SubmitJob {
            runtime: "self:ws".into(),
            ..SubmitJob::default()
        }
    };
    let missing = admin.client.submit(&missing).await.unwrap();
    let missing = wait_done(&admin.client, &missing.id).await;
    assert_eq!(missing.state, JobState::Failed);
    assert!(missing.error.unwrap().contains("could not start"));
    assert!(
        admin
            .client
            .logs(&missing.id)
            .await
            .unwrap()
            .contains("could not start")
    );

    let env = SubmitJob {
        env: [("GREETING".to_owned(), "hej".to_owned())].into(),
        command: vec![
            "sh".into(),
            "-c".into(),
            "echo $GREETING; echo ${DROVER_TOKEN:-no-token}".into(),
        ],
        ..SubmitJob {
            runtime: "self:ws".into(),
            ..SubmitJob::default()
        }
    };
    let env = admin.client.submit(&env).await.unwrap();
    wait_done(&admin.client, &env.id).await;
    assert_eq!(
        admin.client.logs(&env.id).await.unwrap(),
        "hej\nno-token\n",
        "job env is set; the runner's own token is not inherited"
    );
}

#[tokio::test]
async fn cancel_stops_the_whole_process_group() {
    let c = Coordinator::start().await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    let runner = pair(&admin, Scope::Workspace, None, "r", &[]).await;
    let _r = RunnerProcess::paired(&c.url, &runner.token, &[]);
    let dir = TempDir::new("cancel");
    let d = dir.path().display();
    // The job starts a child that obeys SIGTERM and a grandchild that ignores it.
    let script = format!(
        "trap 'echo term >> {d}/term; exit 143' TERM
         sleep 1000 & echo $! > {d}/child
         sh -c 'trap \"\" TERM; echo $$ > {d}/stubborn; sleep 1000' &
         wait"
    );
    let job = admin
        .client
        .submit(&script_job("self:ws", &script))
        .await
        .unwrap();
    let (child, stubborn) = eventually("the job's processes to start", DEADLINE, || async {
        Some((
            read_pid(&dir.path().join("child"))?,
            read_pid(&dir.path().join("stubborn"))?,
        ))
    })
    .await;
    assert!(alive(child) && alive(stubborn));
    let cancelled = admin.client.cancel(&job.id).await.unwrap();
    assert!(cancelled.cancel_requested);
    let done = wait_done(&admin.client, &job.id).await;
    assert_eq!(done.state, JobState::Cancelled);
    assert_eq!(
        read_lines(&dir.path().join("term")),
        ["term"],
        "SIGTERM came first"
    );
    eventually("every process of the job to be gone", DEADLINE, || async {
        (!alive(child) && !alive(stubborn)).then_some(())
    })
    .await;

    // Cancelling a queued job: it never runs. Cancelling twice is fine; a finished job is a conflict.
    let gate = dir.path().join("gate");
    let blocker = admin
        .client
        .submit(&script_job(
            "self:ws",
            &format!("while [ ! -f {} ]; do sleep 0.02; done", gate.display()),
        ))
        .await
        .unwrap();
    wait_state(&admin.client, &blocker.id, JobState::Running).await;
    let queued = admin
        .client
        .submit(&script_job("self:ws", &format!("touch {d}/ran")))
        .await
        .unwrap();
    assert_eq!(
        admin.client.cancel(&queued.id).await.unwrap().state,
        JobState::Cancelled
    );
    assert_eq!(
        admin.client.cancel(&queued.id).await.unwrap().state,
        JobState::Cancelled
    );
    std::fs::write(&gate, "").unwrap();
    assert_eq!(
        wait_done(&admin.client, &blocker.id).await.state,
        JobState::Succeeded
    );
    assert_eq!(
        code(admin.client.cancel(&blocker.id).await),
        ErrorCode::Conflict
    );
    let after = admin
        .client
        .submit(&script_job("self:ws", "true"))
        .await
        .unwrap();
    wait_done(&admin.client, &after.id).await;
    assert!(
        !dir.path().join("ran").exists(),
        "a cancelled queued job never runs"
    );
}

#[tokio::test]
async fn a_killed_runner_loses_its_lease_and_the_job_requeues_at_the_front() {
    let c = Coordinator::start_with(CoordinatorOptions {
        lease_ttl_ms: 2000,
        ..Default::default()
    })
    .await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    let first = pair(&admin, Scope::Workspace, None, "first", &[]).await;
    let second = pair(&admin, Scope::Workspace, None, "second", &[]).await;
    let dir = TempDir::new("requeue");
    let d = dir.path().display();
    let mut r1 = RunnerProcess::paired(&c.url, &first.token, &[]);
    let x = admin
        .client
        .submit(&script_job("self:ws", &format!("if [ \"$DROVER_ATTEMPT\" = 1 ]; then echo $$ > {d}/pgid; sleep 1000; fi; echo x >> {d}/order")))
        .await
        .unwrap();
    wait_state(&admin.client, &x.id, JobState::Running).await;
    let y = admin
        .client
        .submit(&script_job("self:ws", &format!("echo y >> {d}/order")))
        .await
        .unwrap();
    let z = admin
        .client
        .submit(&script_job("self:ws", &format!("echo z >> {d}/order")))
        .await
        .unwrap();

    // Once the job's process is up (its pid is written), kill the runner.
    // The orphaned job keeps running on the dead runner's host; the test reaps it at the end.
    let orphan = eventually("the first attempt's pid", DEADLINE, || async {
        read_pid(&dir.path().join("pgid"))
    })
    .await;
    r1.kill9().await;
    let requeued = wait_state(&admin.client, &x.id, JobState::Queued).await;
    assert_eq!(requeued.attempt, 1);
    assert_eq!(
        admin.client.job(&y.id).await.unwrap().state,
        JobState::Queued
    );

    let _r2 = RunnerProcess::paired(&c.url, &second.token, &[]);
    for id in [&x.id, &y.id, &z.id] {
        wait_done(&admin.client, id).await;
    }
    assert_eq!(
        read_lines(&dir.path().join("order")),
        ["x", "y", "z"],
        "the re-queued job went to the front"
    );
    let x = admin.client.job(&x.id).await.unwrap();
    assert_eq!(x.state, JobState::Succeeded);
    let p = x.provenance.unwrap();
    assert_eq!(
        (p.ran_by.as_str(), p.attempt),
        (second.runner.id.as_str(), 2)
    );
    kill_group(orphan);
}

#[tokio::test]
async fn out_of_attempts_a_job_is_lost() {
    let c = Coordinator::start_with(CoordinatorOptions {
        lease_ttl_ms: 1500,
        ..Default::default()
    })
    .await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    let runner = pair(&admin, Scope::Workspace, None, "r", &[]).await;
    let dir = TempDir::new("lost");
    let mut r = RunnerProcess::paired(&c.url, &runner.token, &[]);
    let job = SubmitJob {
        max_attempts: Some(1),
        ..script_job(
            "self:ws",
            &format!("echo $$ > {}/pgid; sleep 1000", dir.path().display()),
        )
    };
    let job = admin.client.submit(&job).await.unwrap();
    wait_state(&admin.client, &job.id, JobState::Running).await;
    r.kill9().await;
    let lost = wait_state(&admin.client, &job.id, JobState::Lost).await;
    assert!(lost.error.unwrap().contains("out of attempts"));
    assert!(lost.provenance.is_none(), "nobody finished it");
    if let Some(pgid) = read_pid(&dir.path().join("pgid")) {
        kill_group(pgid);
    }
}

#[tokio::test]
async fn complete_is_idempotent_and_refused_once_the_lease_is_lost() {
    let c = Coordinator::start_with(CoordinatorOptions {
        lease_ttl_ms: 1000,
        ..Default::default()
    })
    .await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    let paired = pair(&admin, Scope::Workspace, None, "manual", &[]).await;
    let runner = c.client(&paired.token);
    runner.hello(&[]).await.unwrap();

    let job = admin
        .client
        .submit(&script_job("self:ws", "true"))
        .await
        .unwrap();
    let lease = runner
        .lease(Duration::from_secs(5))
        .await
        .unwrap()
        .expect("a lease");
    assert_eq!(lease.job.id, job.id);
    assert!(
        !runner
            .heartbeat(&lease.lease_id, Duration::ZERO)
            .await
            .unwrap()
            .cancel
    );
    assert_eq!(
        admin.client.job(&job.id).await.unwrap().state,
        JobState::Running
    );
    let done = succeeded();
    let first = runner.complete(&lease.lease_id, &done).await.unwrap();
    assert_eq!((first.state, first.repeated), (JobState::Succeeded, false));
    let again = runner.complete(&lease.lease_id, &done).await.unwrap();
    assert_eq!((again.state, again.repeated), (JobState::Succeeded, true));
    let different = Complete {
        outcome: Outcome::Failed,
        exit_code: Some(1),
        error: None,
        next: None,
    };
    assert!(
        runner
            .complete(&lease.lease_id, &different)
            .await
            .unwrap()
            .repeated
    );
    assert_eq!(admin.client.job(&job.id).await.unwrap().exit_code, Some(0));
    assert_eq!(
        admin.client.usage().await.unwrap().jobs_charged,
        1,
        "billed once"
    );

    // A started lease left to expire is re-queued, keeping its attempt
    // number; its holder can no longer report.
    let job = admin
        .client
        .submit(&script_job("self:ws", "true"))
        .await
        .unwrap();
    let stale = runner
        .lease(Duration::from_secs(5))
        .await
        .unwrap()
        .expect("a lease");
    runner
        .heartbeat(&stale.lease_id, Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(
        wait_state(&admin.client, &job.id, JobState::Queued)
            .await
            .attempt,
        1
    );
    assert_eq!(
        code(runner.complete(&stale.lease_id, &done).await),
        ErrorCode::LeaseLost
    );
    assert_eq!(
        code(runner.heartbeat(&stale.lease_id, Duration::ZERO).await),
        ErrorCode::LeaseLost
    );
    let chunk = LogChunk {
        seq: 0,
        stream: LogStream::Stdout,
        data: "late".into(),
    };
    assert_eq!(
        code(runner.log(&stale.lease_id, &chunk).await),
        ErrorCode::LeaseLost
    );
    let fresh = runner
        .lease(Duration::from_secs(5))
        .await
        .unwrap()
        .expect("the job again");
    assert_eq!(
        (fresh.job.id.as_str(), fresh.job.attempt),
        (job.id.as_str(), 2)
    );
    runner.log(&fresh.lease_id, &chunk).await.unwrap();
    runner
        .log(
            &fresh.lease_id,
            &LogChunk {
                data: "duplicate ignored".into(),
                ..chunk.clone()
            },
        )
        .await
        .unwrap();
    runner.complete(&fresh.lease_id, &done).await.unwrap();
    assert_eq!(admin.client.logs(&job.id).await.unwrap(), "late");
    // The first job once; this one twice: the attempt whose lease was lost
    // while it ran, and the one that completed.
    assert_eq!(admin.client.usage().await.unwrap().jobs_charged, 3);

    // A lease that never started (no heartbeat: the runner never got it,
    // or never began) gives its attempt back when it expires.
    let unstarted = admin
        .client
        .submit(&SubmitJob {
            max_attempts: Some(1),
            ..script_job("self:ws", "true")
        })
        .await
        .unwrap();
    let lease = runner
        .lease(Duration::from_secs(5))
        .await
        .unwrap()
        .expect("a lease");
    assert_eq!(lease.job.attempt, 1);
    assert_eq!(
        wait_state(&admin.client, &unstarted.id, JobState::Queued)
            .await
            .attempt,
        0,
        "not lost: it never ran"
    );
    let again = runner
        .lease(Duration::from_secs(5))
        .await
        .unwrap()
        .expect("the job again");
    assert_eq!(
        (again.job.id.as_str(), again.job.attempt),
        (unstarted.id.as_str(), 1)
    );
}

#[tokio::test]
async fn logs_stream_live_and_in_order() {
    let c = Coordinator::start().await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    let runner = pair(&admin, Scope::Workspace, None, "r", &[]).await;
    let _r = RunnerProcess::paired(&c.url, &runner.token, &[]);
    let dir = TempDir::new("logs");
    let go = dir.path().join("go");
    let script = format!(
        "echo first; while [ ! -f {} ]; do sleep 0.02; done; echo second >&2",
        go.display()
    );
    let job = admin
        .client
        .submit(&script_job("self:ws", &script))
        .await
        .unwrap();
    // The job only goes on once the follower has seen its first line live.
    let mut seen = Vec::new();
    let end = tokio::time::timeout(
        DEADLINE,
        admin.client.follow_logs(&job.id, |b| {
            seen.extend_from_slice(b);
            if String::from_utf8_lossy(&seen).contains("first") {
                std::fs::write(&go, "").unwrap();
            }
        }),
    )
    .await
    .expect("follow ended")
    .unwrap();
    assert_eq!(String::from_utf8(seen).unwrap(), "first\nsecond\n");
    // The stream's trailers say how the job ended, as the job does.
    assert_eq!(
        wait_done(&admin.client, &job.id).await.state,
        JobState::Succeeded
    );
    assert_eq!(
        end,
        Some(LogEnd {
            state: JobState::Succeeded,
            exit_code: Some(0)
        })
    );

    let many = admin
        .client
        .submit(&script_job(
            "self:ws",
            "i=0; while [ $i -lt 3000 ]; do echo line $i; i=$((i+1)); done",
        ))
        .await
        .unwrap();
    wait_done(&admin.client, &many.id).await;
    let expected: String = (0..3000).map(|i| format!("line {i}\n")).collect();
    assert_eq!(admin.client.logs(&many.id).await.unwrap(), expected);
}

/// A log read to the end of a job that ended ends with its state and exit
/// code as trailer fields, for a client that says it takes them
/// (`TE: trailers`); any other client gets the plain chunked body.
/// `drover submit --wait` exits with the job's code from them, without
/// asking for the job again.
#[tokio::test]
async fn a_log_read_to_the_end_says_how_the_job_ended_in_its_trailers() {
    let c = Coordinator::start().await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    let runner = pair(&admin, Scope::Workspace, None, "r", &[]).await;
    let _r = RunnerProcess::paired(&c.url, &runner.token, &[]);
    // The CLI through a proxy that records what it asks.
    let proxy = drover_tests::proxy::Proxy::start(&c.url).await;
    let mut cli = std::process::Command::new(bin("drover"));
    cli.args(["submit", "--runtime", "self:ws", "--wait", "--"])
        .args(["sh", "-c", "echo out; exit 3"])
        .env("DROVER_URL", proxy.url())
        .env("DROVER_TOKEN", &admin.token);
    let out = tokio::task::spawn_blocking(move || cli.output().unwrap())
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    let (id, printed) = stdout.split_once('\n').unwrap();
    assert_eq!(printed, "out\n");
    let asked = String::from_utf8_lossy(&proxy.requests()).to_ascii_lowercase();
    assert!(asked.contains(&format!("get /v1/jobs/{id}/logs?follow=true ")));
    assert!(asked.contains("\r\nte: trailers\r\n"), "{asked}");
    assert!(!asked.contains(&format!("get /v1/jobs/{id} ")), "{asked}");

    let logs = |te: &str| {
        format!(
            "GET /v1/jobs/{id}/logs?follow=true HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\n{te}Connection: close\r\n\r\n",
            admin.token
        )
    };
    let answer = drover_tests::raw::raw(&c, logs("TE: trailers\r\n").as_bytes()).await;
    let (head, body) = answer.split_once("\r\n\r\n").expect("a head and a body");
    assert!(head.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(
        head.to_ascii_lowercase()
            .contains("\r\ntrailer: drover-job-state, drover-exit-code"),
        "{head}"
    );
    assert_eq!(
        body,
        "4\r\nout\n\r\n0\r\ndrover-job-state: failed\r\ndrover-exit-code: 3\r\n\r\n"
    );
    let answer = drover_tests::raw::raw(&c, logs("").as_bytes()).await;
    let (_, body) = answer.split_once("\r\n\r\n").expect("a head and a body");
    assert_eq!(body, "4\r\nout\n\r\n0\r\n\r\n");
}

#[tokio::test]
async fn sigterm_drains_the_runner_running_jobs_finish_no_new_leases() {
    let c = Coordinator::start().await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    let runner = pair(&admin, Scope::Workspace, None, "r", &[]).await;
    let mut r = RunnerProcess::paired(&c.url, &runner.token, &[]);
    let dir = TempDir::new("drain");
    let go = dir.path().join("go");
    let job = admin
        .client
        .submit(&script_job(
            "self:ws",
            &format!("while [ ! -f {} ]; do sleep 0.02; done", go.display()),
        ))
        .await
        .unwrap();
    wait_state(&admin.client, &job.id, JobState::Running).await;
    r.sigterm();
    r.wait_for_lines("draining", 1).await;
    let next = admin
        .client
        .submit(&script_job("self:ws", "true"))
        .await
        .unwrap();
    std::fs::write(&go, "").unwrap();
    let status = r.wait_exit().await;
    assert!(status.success(), "drained runner exits 0: {status:?}");
    assert_eq!(
        admin.client.job(&job.id).await.unwrap().state,
        JobState::Succeeded
    );
    assert_eq!(
        admin.client.job(&next.id).await.unwrap().state,
        JobState::Queued,
        "no lease taken while draining"
    );
}

/// A complete may lease the next job in the same round trip: it gets what
/// a lease call would have (the head of the queue, or nothing); a repeated
/// or refused complete leases nothing.
#[tokio::test]
async fn complete_can_lease_the_next_job_in_the_same_call() {
    let c = Coordinator::start().await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    let paired = pair(&admin, Scope::Workspace, None, "manual", &[]).await;
    let runner = c.client(&paired.token);
    runner.hello(&[]).await.unwrap();
    let mut jobs = Vec::new();
    for _ in 0..3 {
        jobs.push(
            admin
                .client
                .submit(&script_job("self:ws", "true"))
                .await
                .unwrap()
                .id,
        );
    }
    let and_next = Complete {
        next: Some(LeaseRequest {
            wait_ms: 0,
            held: None,
        }),
        ..succeeded()
    };

    let first = runner
        .lease(Duration::ZERO)
        .await
        .unwrap()
        .expect("a lease");
    assert_eq!(first.job.id, jobs[0]);
    let done = runner.complete(&first.lease_id, &and_next).await.unwrap();
    assert_eq!((done.state, done.repeated), (JobState::Succeeded, false));
    let second = done
        .next
        .expect("asked for next")
        .lease
        .expect("a job is queued");
    assert_eq!(second.job.id, jobs[1], "the head of the queue");
    assert_eq!(
        admin.client.job(&jobs[1]).await.unwrap().state,
        JobState::Leased
    );

    // Repeating the first complete changes nothing and leases nothing (its
    // first answer may have carried a lease already): the third job waits.
    let again = runner.complete(&first.lease_id, &and_next).await.unwrap();
    assert!(again.repeated);
    assert!(again.next.expect("asked for next").lease.is_none());
    assert_eq!(
        admin.client.job(&jobs[2]).await.unwrap().state,
        JobState::Queued
    );
    let done = runner.complete(&second.lease_id, &and_next).await.unwrap();
    let third = done.next.unwrap().lease.expect("the third job");
    assert_eq!(third.job.id, jobs[2]);

    // An empty queue: no job, and no wait (waitMs 0).
    let last = runner.complete(&third.lease_id, &and_next).await.unwrap();
    assert!(last.next.expect("asked for next").lease.is_none());

    // A refused complete leases nothing: the job stays queued.
    let fourth = admin
        .client
        .submit(&script_job("self:ws", "true"))
        .await
        .unwrap();
    assert_eq!(
        code(runner.complete("ls_not_a_lease", &and_next).await),
        ErrorCode::LeaseLost
    );
    assert_eq!(
        admin.client.job(&fourth.id).await.unwrap().state,
        JobState::Queued
    );
    for id in &jobs {
        assert_eq!(
            admin.client.job(id).await.unwrap().state,
            JobState::Succeeded
        );
    }
}
