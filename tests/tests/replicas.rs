//! Several coordinator replicas sharing one PostgreSQL database. These
//! always run on PostgreSQL (tests/run.sh starts it).
//!
//! Over 500 lines: every scenario that needs two or more replicas is here,
//! so that the SQLite pass can leave out this one binary.

use std::time::Duration;

use drover_tests::runner_core::client::Scope;
use drover_tests::runner_core::wire::{ErrorCode, JobState, SubmitJob};
use drover_tests::*;

async fn primary(lease_ttl_ms: u64) -> Coordinator {
    Coordinator::start_with(CoordinatorOptions {
        lease_ttl_ms,
        backend: Backend::Postgres,
        ..Default::default()
    })
    .await
}

#[tokio::test]
async fn replicas_hand_work_across_and_wake_each_other() {
    let a = primary(2000).await;
    let b = a.replica().await;
    let admin = a.bootstrap("acme", "admin@acme.test");
    let on_b = pair(&admin, Scope::Workspace, None, "on-b", &[]).await;
    let _runner = RunnerProcess::paired(&b.url, &on_b.token, &[]);
    b.wait_for_waiting(1).await;

    // Submitted on A, leased by the runner long-polling B: B is woken by A's signal.
    let dir = TempDir::new("replicas");
    let go = dir.path().join("go");
    let job = admin
        .client
        .submit(&script_job("self:ws", "echo from b"))
        .await
        .unwrap();
    let done = wait_done(&admin.client, &job.id).await;
    assert_eq!(done.provenance.unwrap().ran_by, on_b.runner.id);

    // Logs followed on A while the job runs via B; cancel on A reaches the runner on B.
    let job = admin
        .client
        .submit(&script_job(
            "self:ws",
            &format!(
                "echo started; while [ ! -f {} ]; do sleep 0.02; done; sleep 1000",
                go.display()
            ),
        ))
        .await
        .unwrap();
    let mut seen = Vec::new();
    let follow = admin.client.follow_logs(&job.id, |b| {
        seen.extend_from_slice(b);
        if String::from_utf8_lossy(&seen).contains("started") && !go.exists() {
            std::fs::write(&go, "").unwrap();
        }
    });
    let cancel = async {
        eventually("the job to reach the gate", DEADLINE, || async {
            go.exists().then_some(())
        })
        .await;
        admin.client.cancel(&job.id).await.unwrap()
    };
    let (followed, _) = tokio::join!(tokio::time::timeout(DEADLINE, follow), cancel);
    followed.expect("the follow ended").unwrap();
    assert_eq!(
        wait_done(&admin.client, &job.id).await.state,
        JobState::Cancelled
    );

    // The jobs and the runner are the same seen from either replica.
    let from_b = b.client(&admin.token);
    assert_eq!(
        from_b.job(&job.id).await.unwrap().state,
        JobState::Cancelled
    );
    assert_eq!(from_b.usage().await.unwrap().jobs_charged, 2);
}

#[tokio::test]
async fn a_lease_held_through_a_replica_that_died_expires_and_requeues_elsewhere() {
    let a = primary(2000).await;
    let mut b = a.replica().await;
    let admin = a.bootstrap("acme", "admin@acme.test");
    let doomed = pair(&admin, Scope::Workspace, None, "doomed", &[]).await;
    let survivor = pair(&admin, Scope::Workspace, None, "survivor", &[]).await;
    let dir = TempDir::new("dead-replica");
    let mut r1 = RunnerProcess::paired(&b.url, &doomed.token, &[]);
    let job = admin
        .client
        .submit(&script_job(
            "self:ws",
            &format!(
                "if [ \"$DROVER_ATTEMPT\" = 1 ]; then echo $$ > {}/pgid; sleep 1000; fi",
                dir.path().display()
            ),
        ))
        .await
        .unwrap();
    wait_state(&admin.client, &job.id, JobState::Running).await;
    // The replica and the runner behind it both die; replica A's reaper re-queues.
    b.kill9().await;
    r1.kill9().await;
    let requeued = wait_state(&admin.client, &job.id, JobState::Queued).await;
    assert_eq!(requeued.attempt, 1);
    let _r2 = RunnerProcess::paired(&a.url, &survivor.token, &[]);
    let done = wait_done(&admin.client, &job.id).await;
    let p = done.provenance.unwrap();
    assert_eq!(
        (done.state, p.ran_by.as_str(), p.attempt),
        (JobState::Succeeded, survivor.runner.id.as_str(), 2)
    );
    if let Ok(pgid) = std::fs::read_to_string(dir.path().join("pgid")) {
        // SAFETY: the orphaned first attempt's process group, made by this test.
        unsafe {
            libc::kill(-pgid.trim().parse::<i32>().unwrap(), libc::SIGKILL);
        }
    }
    b.restart().await;
    assert_eq!(
        b.client(&admin.token).job(&job.id).await.unwrap().state,
        JobState::Succeeded
    );
}

/// 3 replicas on one PostgreSQL, 30+ runners spread across them, 10,000
/// jobs; runner processes killed with SIGKILL and one replica killed and
/// restarted mid-run. No job runs twice in one attempt, none is lost, each
/// completes exactly once, and re-runs happen only after a lost lease.
#[tokio::test]
async fn torture_three_replicas_thirty_runners_ten_thousand_jobs() {
    let jobs: usize = std::env::var("DROVER_REPLICA_TORTURE_JOBS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let a = primary(2000).await;
    let mut replicas = [a.replica().await, a.replica().await];
    let admin = a.bootstrap("acme", "admin@acme.test");
    let join = ws_join_token(&admin, "default").await;
    let dir = TempDir::new("replica-torture");
    let record = dir.path().join("executions");
    // 6 runner processes × 6 runners = 36 runners, two processes per replica.
    let urls = [
        a.url.clone(),
        replicas[0].url.clone(),
        replicas[1].url.clone(),
    ];
    let mut procs: Vec<RunnerProcess> = (0..6)
        .map(|i| {
            let state = dir.path().join(format!("state-{i}"));
            RunnerProcess::join(&urls[i % 3], "self:ws", &join.token, 6, &state, &[])
        })
        .collect();
    eventually("36 runners online", DEADLINE, || {
        let client = admin.client.clone();
        async move {
            let roster = client
                .runners(drover_tests::runner_core::client::RunnerListing::Roster)
                .await
                .ok()?;
            (roster.runners.iter().filter(|r| r.online).count() == 36).then_some(())
        }
    })
    .await;

    // Each job holds its runner a moment, so the kills below catch jobs mid-run.
    let script = recorded(&record, "sleep 0.05");
    let submitters: Vec<_> = (0..8)
        .map(|s| {
            let client = a.client(&admin.token);
            let client = if s % 2 == 0 {
                client
            } else {
                replicas[0].client(&admin.token)
            };
            let script = script.clone();
            tokio::spawn(async move {
                let mut ids = Vec::new();
                for i in (s..jobs).step_by(8) {
                    let job = SubmitJob {
                        priority: (i % 3) as i32,
                        ..script_job("self:ws", &script)
                    };
                    ids.push(client.submit(&job).await.expect("submit").id);
                }
                ids
            })
        })
        .collect();
    let mut ids = Vec::with_capacity(jobs);
    for s in submitters {
        ids.extend(s.await.unwrap());
    }
    // Chaos while the queue drains.
    let db = DbProbe::open(&a).await;
    let db = &db;
    let progress = |n: usize| async move { (db.finished_jobs().await >= n).then_some(()) };
    eventually("a fifth done", Duration::from_secs(600), || {
        progress(jobs / 5)
    })
    .await;
    let mut lost = LostLeases::default();
    procs[1].kill9().await;
    lost.killed(&procs[1]);
    procs[4].kill9().await;
    lost.killed(&procs[4]);
    eventually("two fifths done", Duration::from_secs(600), || {
        progress(2 * jobs / 5)
    })
    .await;
    replicas[1].kill9().await;
    eventually("three fifths done", Duration::from_secs(600), || {
        progress(3 * jobs / 5)
    })
    .await;
    replicas[1].restart().await;
    lost.restarted(&procs[1]);
    procs[1].restart();
    eventually("every job done", Duration::from_secs(900), || {
        progress(jobs)
    })
    .await;

    assert_eq!(ids.len(), jobs);
    // No two executions of a job overlap; each re-run follows a lost lease
    // (a killed runner, or one that said it stopped or could not report).
    let runs = check_executions(&record, &ids);
    let reruns = superseded(&runs);
    lost.check(&runs, &procs).await;

    // Each job billed once per attempt that ran (a lost one too), no more.
    check_metering(&a, jobs).await;
    let lost = admin
        .client
        .jobs(Some(JobState::Lost), 1000)
        .await
        .unwrap()
        .jobs
        .len();
    let failed = admin
        .client
        .jobs(Some(JobState::Failed), 1000)
        .await
        .unwrap()
        .jobs
        .len();
    assert_eq!((lost, failed), (0, 0));
    // Provenance names the last execution.
    for id in ids.iter().step_by(101) {
        let job = admin.client.job(id).await.unwrap();
        assert_eq!(job.state, JobState::Succeeded);
        let (p, last) = (job.provenance.unwrap(), runs[id].last().unwrap());
        assert_eq!((p.attempt, &p.ran_by), (last.attempt, &last.runner));
    }
    eprintln!("{jobs} jobs, {} re-runs after lost leases", reruns.len());
    drop(procs);
}

/// Counts the `LISTEN` connections of the coordinators on this database
/// that started after `since` (a PostgreSQL timestamp as text).
async fn listeners(c: &Coordinator, since: &str) -> i64 {
    use sqlx::Connection as _;
    let mut conn = sqlx::PgConnection::connect(&c.database)
        .await
        .expect("connect");
    sqlx::query_scalar(
        "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN%'
         AND backend_start > CAST($1 AS timestamptz)",
    )
    .bind(since)
    .fetch_one(&mut conn)
    .await
    .expect("count listeners")
}

/// A runner long-polling replica B is woken by a job submitted on replica A
/// (the long-poll answers with the job, not empty at its deadline), also
/// after the replicas' signal connections were cut and came back.
#[tokio::test]
async fn cross_replica_wake_survives_a_cut_signal_link() {
    let a = primary(20_000).await;
    let b = a.replica().await;
    let admin = a.bootstrap("acme", "admin@acme.test");
    let paired = pair(&admin, Scope::Workspace, None, "on-b", &[]).await;
    let runner = b.client(&paired.token);
    runner.hello(&[]).await.unwrap();
    eventually("both replicas listening", DEADLINE, || async {
        (listeners(&a, "-infinity").await == 2).then_some(())
    })
    .await;

    for round in 0..2 {
        if round == 1 {
            // Cut every replica's LISTEN connection; they reconnect on their own.
            use sqlx::Connection as _;
            let mut conn = sqlx::PgConnection::connect(&a.database).await.unwrap();
            let at: String = sqlx::query_scalar("SELECT CAST(clock_timestamp() AS text)")
                .fetch_one(&mut conn)
                .await
                .unwrap();
            let cut: Vec<bool> = sqlx::query_scalar(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN%'",
            )
            .fetch_all(&mut conn)
            .await
            .unwrap();
            assert_eq!(cut.len(), 2);
            eventually("both replicas listening again", DEADLINE, || async {
                (listeners(&a, &at).await == 2).then_some(())
            })
            .await;
        }
        let poll = {
            let runner = runner.clone();
            tokio::spawn(async move { runner.lease(Duration::from_secs(30)).await })
        };
        b.wait_for_waiting(1).await;
        let job = admin
            .client
            .submit(&script_job("self:ws", "true"))
            .await
            .unwrap();
        let lease = poll
            .await
            .unwrap()
            .unwrap()
            .expect("woken with the job, not left to time out");
        assert_eq!(lease.job.id, job.id, "round {round}");
        let done = succeeded();
        runner
            .heartbeat(&lease.lease_id, Duration::ZERO)
            .await
            .unwrap();
        runner.complete(&lease.lease_id, &done).await.unwrap();
    }
}

/// Replica B has the runner's credential cached (it just served it); a
/// revoke through replica A still stops it on B at once, before any signal
/// arrives: its lease, its heartbeat and its hello are refused.
#[tokio::test]
async fn a_revoke_on_one_replica_is_honoured_at_once_on_another() {
    let a = primary(20_000).await;
    let b = a.replica().await;
    let admin = a.bootstrap("acme", "admin@acme.test");
    let doomed = pair(&admin, Scope::Workspace, None, "doomed", &[]).await;
    let on_b = b.client(&doomed.token);
    on_b.hello(&[]).await.unwrap();
    admin
        .client
        .submit(&script_job("self:ws", "true"))
        .await
        .unwrap();
    let lease = on_b
        .lease(Duration::from_secs(5))
        .await
        .unwrap()
        .expect("a job");
    on_b.heartbeat(&lease.lease_id, Duration::ZERO)
        .await
        .unwrap();

    admin
        .client
        .revoke_runner(Scope::Workspace, &doomed.runner.id)
        .await
        .unwrap();
    assert_eq!(
        code(on_b.lease(Duration::ZERO).await),
        ErrorCode::Unauthorized
    );
    // LEASE_LOST from the lease check, or UNAUTHORIZED once the signal has
    // arrived and B reads the credential afresh: refused either way.
    let refused = code(on_b.heartbeat(&lease.lease_id, Duration::ZERO).await);
    assert!(
        [ErrorCode::LeaseLost, ErrorCode::Unauthorized].contains(&refused),
        "{refused:?}"
    );
    assert_eq!(code(on_b.hello(&[]).await), ErrorCode::Unauthorized);
}

/// A runner paused through one replica: its lease request waiting on
/// another ends there too (the pause travels as a signal), long before the
/// request's own wait is up.
#[tokio::test]
async fn a_pause_said_on_one_replica_ends_the_lease_request_waiting_on_another() {
    let a = primary(20_000).await;
    let b = a.replica().await;
    let admin = a.bootstrap("acme", "admin@acme.test");
    let paired = pair(&admin, Scope::Workspace, None, "laptop", &[]).await;
    let on_b = b.client(&paired.token);
    on_b.hello_as(&[], 1, false).await.unwrap();
    a_pause_ends_the_waiting_request(on_b, &b, &a.client(&paired.token)).await;
}

/// A runner that leaves through one replica is refused at once on another,
/// which had its credential cached.
#[tokio::test]
async fn a_runner_leaving_through_one_replica_is_refused_at_once_on_another() {
    let a = primary(20_000).await;
    let b = a.replica().await;
    let admin = a.bootstrap("acme", "admin@acme.test");
    let leaving = pair(&admin, Scope::Workspace, None, "leaving", &[]).await;
    let (on_a, on_b) = (a.client(&leaving.token), b.client(&leaving.token));
    on_b.hello(&[]).await.unwrap();
    on_a.leave().await.unwrap();
    assert_eq!(code(on_b.hello(&[]).await), ErrorCode::Unauthorized);
    assert_eq!(code(on_b.leave().await), ErrorCode::Unauthorized);
}

/// A member removed through one replica, while two of their personal
/// runners hold jobs through another and more of their jobs wait: every
/// credential of theirs is refused at once on the other replica, and each
/// of their jobs ends `cancelled`.
#[tokio::test]
async fn a_member_removed_on_one_replica_is_refused_at_once_on_another() {
    let a = primary(20_000).await;
    let b = a.replica().await;
    let admin = a.bootstrap("acme", "admin@acme.test");
    let bob = a.add_member("acme", "bob@acme.test", "member");
    let bob_on_b = b.client(&bob.token);
    let mut runners = Vec::new();
    for name in ["bob-1", "bob-2"] {
        let paired = pair(&bob, Scope::Me, None, name, &[]).await;
        let on_b = b.client(&paired.token);
        on_b.hello(&[]).await.unwrap();
        runners.push(on_b);
    }
    let mut jobs = Vec::new();
    for _ in 0..5 {
        let job = bob_on_b
            .submit(&script_job("self", "sleep 1000"))
            .await
            .unwrap();
        jobs.push(job.id);
    }
    let mut leases = Vec::new();
    for r in &runners {
        let lease = r
            .lease(Duration::from_secs(5))
            .await
            .unwrap()
            .expect("a job");
        r.heartbeat(&lease.lease_id, Duration::ZERO).await.unwrap();
        leases.push(lease.lease_id);
    }
    bob_on_b.me().await.unwrap();

    admin.client.remove_member(&bob.subject).await.unwrap();

    assert_eq!(code(bob_on_b.me().await), ErrorCode::Unauthorized);
    assert_eq!(
        code(bob_on_b.submit(&script_job("self", "true")).await),
        ErrorCode::Unauthorized
    );
    for (r, lease) in runners.iter().zip(&leases) {
        assert_eq!(code(r.lease(Duration::ZERO).await), ErrorCode::Unauthorized);
        let refused = code(r.heartbeat(lease, Duration::ZERO).await);
        assert!(
            [ErrorCode::LeaseLost, ErrorCode::Unauthorized].contains(&refused),
            "{refused:?}"
        );
    }
    for job in &jobs {
        let state = b
            .query_text(&format!("SELECT state FROM jobs WHERE id = '{job}'"))
            .await;
        assert_eq!(state, [Some("cancelled".to_owned())], "{job}");
    }
}

/// Join tokens and invites revoked through one replica are refused on
/// their next use through another: one revoked by id, the others with the
/// admin who minted them.
#[tokio::test]
async fn a_join_token_or_invite_revoked_on_one_replica_is_refused_on_another() {
    let a = primary(20_000).await;
    let b = a.replica().await;
    let admin = a.bootstrap("acme", "admin@acme.test");
    let mallory = a.add_member("acme", "mallory@acme.test", "admin");
    let pool = admin
        .client
        .create_runtime(Scope::Workspace, "build")
        .await
        .unwrap();
    let revoked = ws_join_token(&mallory, "build").await;
    let kept = mallory
        .client
        .join_token_for(Scope::Workspace, "build", Some(30 * 86_400))
        .await
        .unwrap();
    let invite = mallory
        .client
        .invite_member("pal@acme.test", None)
        .await
        .unwrap();
    let joiner = |token: &str| {
        drover_tests::runner_core::client::Client::new(
            &b.url,
            drover_tests::runner_core::client::Token::new(token),
        )
        .unwrap()
    };
    let join = |token: &str, name: &str| {
        let client = joiner(token);
        let req = drover_tests::runner_core::wire::JoinRequest {
            reference: pool.reference.clone(),
            name: name.into(),
            capabilities: Vec::new(),
        };
        async move { client.join(&req).await }
    };
    // Both work through B.
    join(&revoked.token, "b-1").await.unwrap();
    joiner(&kept.token).join_token_info().await.unwrap();

    // Revoked by id through A: refused through B at once.
    admin
        .client
        .revoke_join_token(Scope::Workspace, revoked.id.as_deref().unwrap())
        .await
        .unwrap();
    assert_eq!(
        code(join(&revoked.token, "b-2").await),
        ErrorCode::Unauthorized
    );

    // Mallory removed through A: her other token and her invite are refused through B.
    admin.client.remove_member(&mallory.subject).await.unwrap();
    assert_eq!(
        code(join(&kept.token, "b-3").await),
        ErrorCode::Unauthorized
    );
    assert_eq!(
        code(joiner(&kept.token).join_token_info().await),
        ErrorCode::Unauthorized
    );
    assert_eq!(
        code(
            b.client("")
                .redeem_pairing_code(&invite.code, "pal-laptop")
                .await
        ),
        ErrorCode::NotFound
    );
    assert!(
        b.client(&admin.token)
            .join_tokens(Scope::Workspace)
            .await
            .unwrap()
            .join_tokens
            .is_empty()
    );
}

/// Lease times on PostgreSQL come from the database's clock, not each
/// replica's. A replica whose clock runs a minute ahead neither expires a
/// live, heartbeating lease (its reaper runs at least once a second), nor,
/// when it is the one renewing a lease, keeps it alive a minute after its
/// runner stopped.
#[tokio::test]
async fn a_replica_whose_clock_is_ahead_neither_expires_live_leases_nor_keeps_dead_ones() {
    let a = primary(3000).await;
    let ahead = a
        .replica_with(CoordinatorOptions {
            env: vec![("DROVER_CLOCK_SKEW_MS", "60000".into())],
            ..a.options.clone()
        })
        .await;
    let admin = a.bootstrap("acme", "admin@acme.test");
    let paired = pair(&admin, Scope::Workspace, None, "steady", &[]).await;
    let runner = a.client(&paired.token);
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
        .expect("a job");

    // Four heartbeats, each held up to half the TTL (1.5 s) by A: about six
    // seconds, twice the TTL, with the skewed replica reaping meanwhile.
    for beat in 0..4 {
        runner
            .heartbeat(&lease.lease_id, Duration::from_millis(1500))
            .await
            .unwrap_or_else(|e| panic!("heartbeat {beat}: the lease was expired: {e}"));
    }
    assert!(
        !ahead.log_text().contains("lease expired"),
        "the skewed replica expired a live lease:\n{}",
        ahead.log_text()
    );
    let live = admin.client.job(&job.id).await.unwrap();
    assert_eq!((live.state, live.attempt), (JobState::Running, 1));

    // Renewed once through the skewed replica, then the runner goes silent
    // and that replica goes away: A expires the lease after the TTL, not a
    // minute later.
    let on_ahead = ahead.client(&paired.token);
    on_ahead
        .heartbeat(&lease.lease_id, Duration::ZERO)
        .await
        .unwrap();
    let mut ahead = ahead;
    ahead.kill9().await;
    let requeued = eventually(
        "the silent lease to expire",
        Duration::from_secs(20),
        || async {
            let job = admin.client.job(&job.id).await.unwrap();
            (job.state == JobState::Queued).then_some(job)
        },
    )
    .await;
    assert_eq!(requeued.attempt, 1, "it ran once, and keeps that attempt");
}

/// A replica alone sends no signals (nobody would hear them). When another
/// joins, the first thing it sends is `LookAgain`, so that the newcomer's
/// waiters find what was queued unsignalled; and such a job is leased there.
#[tokio::test]
async fn a_lone_replica_sends_no_signals_and_tells_a_new_one_to_look_again() {
    let a = primary(20_000).await;
    let admin = a.bootstrap("acme", "admin@acme.test");
    // Paired now, started on B later.
    let on_b = pair(&admin, Scope::Workspace, None, "on-b", &[]).await;
    eventually("A to find itself alone", DEADLINE, || async {
        (a.other_replicas().await == Some(false)).then_some(())
    })
    .await;
    let mut heard = sqlx::postgres::PgListener::connect(&a.database)
        .await
        .unwrap();
    heard.listen("drover_signals").await.unwrap();

    // Queued while alone: A sends nothing for it.
    let job = admin
        .client
        .submit(&script_job("self:ws", "true"))
        .await
        .unwrap();

    let b = a.replica().await;
    eventually("A to find B", DEADLINE, || async {
        (a.other_replicas().await == Some(true)).then_some(())
    })
    .await;
    let first = tokio::time::timeout(DEADLINE, heard.recv())
        .await
        .expect("a signal once B listens")
        .unwrap();
    let envelope: serde_json::Value = serde_json::from_str(first.payload()).unwrap();
    assert_eq!(
        envelope["s"],
        serde_json::json!([{"k": "lookAgain"}]),
        "{envelope}"
    );

    let _runner = RunnerProcess::paired(&b.url, &on_b.token, &[]);
    let done = wait_done(&admin.client, &job.id).await;
    assert_eq!(done.provenance.unwrap().ran_by, on_b.runner.id);
}
