//! Retention: finished jobs older than `serve --retain-finished`
//! are purged in the background, with their logs and idempotency keys, in
//! small batches that leave the database free for leases; and
//! pairing codes a day past their expiry. Jobs are aged
//! with the coordinator's clock seam (`DROVER_CLOCK_SKEW_MS`) or seeded
//! directly into the database with an old finish time.

use std::time::Duration;

use drover_tests::runner_core::client::{Client, ClientError, Scope};
use drover_tests::runner_core::wire::{self, Env, ErrorCode, JobState};
use drover_tests::*;

const DAY_MS: i64 = 24 * 3600 * 1000;

/// The single number `sql` answers.
async fn count(c: &Coordinator, sql: &str) -> u64 {
    let rows = c.query_text(&format!("SELECT CAST(({sql}) AS TEXT)")).await;
    rows[0]
        .as_deref()
        .expect("a count")
        .parse()
        .expect("a number")
}

async fn runner(c: &Coordinator, admin: &Member, slots: u32) -> Client {
    let paired = pair(admin, Scope::Workspace, None, "r1", &[]).await;
    let runner = c.client(&paired.token);
    runner.hello_with_slots(&[], slots).await.unwrap();
    runner
}

/// Whether GET /v1/jobs/{id} answers NOT_FOUND.
async fn gone(member: &Member, id: &str) -> bool {
    match member.client.job(id).await {
        Ok(_) => false,
        Err(e) if e.code() == Some(ErrorCode::NotFound) => true,
        Err(e) => panic!("reading job {id}: {e}"),
    }
}

/// Restarts `c` with its clock `days` ahead.
async fn restart_days_ahead(c: &mut Coordinator, days: i64) {
    c.stop().await;
    c.options.env = vec![("DROVER_CLOCK_SKEW_MS", (days * DAY_MS).to_string())];
    c.restart().await;
}

/// With the default age (30 days), jobs that finished 31 days ago go, with
/// their log chunks and idempotency keys; queued and running jobs of that
/// age stay (a running job keeps its sealed env), and so does a job that
/// finished 11 days ago; usage totals do not change.
#[tokio::test]
async fn finished_jobs_older_than_the_age_are_purged_with_their_logs() {
    let mut c = Coordinator::start_with(CoordinatorOptions {
        lease_ttl_ms: 20_000,
        ..Default::default()
    })
    .await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    let runner = runner(&c, &admin, 2).await;
    let with_env = |script: &str| wire::SubmitJob {
        env: Env::from([("TOKEN".to_owned(), "s3cret".to_owned())]),
        ..script_job("self:ws", script)
    };

    // Ran, wrote a log, succeeded; submitted with an idempotency key.
    let ran = admin
        .client
        .submit_with_key(&with_env("echo old"), "order-1")
        .await
        .unwrap();
    let lease = runner.lease(Duration::from_secs(5)).await.unwrap().unwrap();
    assert_eq!(lease.job.id, ran.id);
    let line = wire::LogChunk {
        seq: 0,
        stream: wire::LogStream::Stdout,
        data: "old output\n".into(),
    };
    runner.log(&lease.lease_id, &line).await.unwrap();
    runner
        .complete(&lease.lease_id, &succeeded())
        .await
        .unwrap();
    // Cancelled while queued.
    let cancelled = admin
        .client
        .submit(&script_job("self:ws", "true"))
        .await
        .unwrap();
    admin.client.cancel(&cancelled.id).await.unwrap();
    // Running (heartbeating) and queued, both as old.
    let running = admin.client.submit(&with_env("sleep 1000")).await.unwrap();
    let held = runner.lease(Duration::from_secs(5)).await.unwrap().unwrap();
    assert_eq!(held.job.id, running.id);
    runner
        .heartbeat(&held.lease_id, Duration::ZERO)
        .await
        .unwrap();
    let queued = admin
        .client
        .submit(&script_job("self:ws", "true"))
        .await
        .unwrap();
    let usage = admin.client.usage().await.unwrap();
    assert_eq!(usage.jobs_charged, 1, "{usage:?}");
    let month = usage.month.clone();
    let report = admin
        .client
        .usage_report(Scope::Workspace, Some(&month), None)
        .await
        .unwrap();
    assert_eq!(admin.client.logs(&ran.id).await.unwrap(), "old output\n");
    let keys_of_ran = format!(
        "SELECT COUNT(*) FROM idempotency_keys WHERE job_id = '{}'",
        ran.id
    );
    assert_eq!(count(&c, &keys_of_ran).await, 1);

    // 20 days on: nothing is old enough yet; a job finishes then.
    restart_days_ahead(&mut c, 20).await;
    runner
        .heartbeat(&held.lease_id, Duration::ZERO)
        .await
        .unwrap();
    let younger = admin
        .client
        .submit(&script_job("self:ws", "true"))
        .await
        .unwrap();
    admin.client.cancel(&younger.id).await.unwrap();

    // 31 days on: the first two are 31 days old, the last one 11.
    restart_days_ahead(&mut c, 31).await;
    runner
        .heartbeat(&held.lease_id, Duration::ZERO)
        .await
        .unwrap();
    for id in [&ran.id, &cancelled.id] {
        eventually("the old finished job to be purged", DEADLINE, || async {
            gone(&admin, id).await.then_some(())
        })
        .await;
    }
    assert_eq!(code(admin.client.logs(&ran.id).await), ErrorCode::NotFound);
    let left = |table: &str, column: &str, id: &str| {
        format!("SELECT COUNT(*) FROM {table} WHERE {column} = '{id}'")
    };
    assert_eq!(count(&c, &left("jobs", "id", &ran.id)).await, 0);
    assert_eq!(count(&c, &left("job_logs", "job_id", &ran.id)).await, 0);
    assert_eq!(count(&c, &keys_of_ran).await, 0);
    assert_eq!(count(&c, &left("jobs", "id", &cancelled.id)).await, 0);

    for (id, state) in [
        (&running.id, JobState::Running),
        (&queued.id, JobState::Queued),
        (&younger.id, JobState::Cancelled),
    ] {
        assert_eq!(admin.client.job(id).await.unwrap().state, state);
    }
    assert_eq!(
        count(
            &c,
            &format!(
                "SELECT COUNT(*) FROM jobs WHERE id = '{}' AND env_sealed IS NOT NULL",
                running.id
            )
        )
        .await,
        1,
        "the running job keeps its env"
    );
    // The month's usage is kept when its jobs are purged.
    let after = admin
        .client
        .usage_report(Scope::Workspace, Some(&month), None)
        .await
        .unwrap();
    assert_eq!(after.lines, report.lines, "usage totals are kept");
    // The job still runs, and ends as usual.
    runner.complete(&held.lease_id, &succeeded()).await.unwrap();
    assert_eq!(
        admin.client.job(&running.id).await.unwrap().state,
        JobState::Succeeded
    );
}

/// Thousands of old finished jobs are purged ten at a time: a job submitted
/// once the purge has begun is leased while old jobs are still left, so the
/// purge never holds the database for long; then every old job goes.
#[tokio::test]
async fn a_lease_is_served_while_a_large_purge_runs() {
    const OLD: u64 = 5000;
    let mut c = Coordinator::start_with(CoordinatorOptions {
        serve_args: ["--retention-batch", "10"].map(String::from).to_vec(),
        ..Default::default()
    })
    .await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    let runner = runner(&c, &admin, 1).await;
    let series = match c.options.backend {
        Backend::Sqlite => format!(
            "(WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < {OLD}) SELECT x FROM n)"
        ),
        Backend::Postgres => format!("(SELECT x FROM generate_series(1, {OLD}) AS x)"),
    };
    c.stop().await;
    // Finished in 1970, each with a log chunk.
    c.execute_sql(
        &format!(
            "INSERT INTO jobs (id, workspace_id, submitter_id, runtime_ref, runtime_id, state, priority,
                              requires, spec, attempt, max_attempts, created_at, finished_at)
             SELECT 'job_old' || CAST(s.x AS TEXT), (SELECT id FROM workspaces), (SELECT id FROM members),
                    'self:ws', (SELECT id FROM runtimes WHERE owner_member_id IS NULL), 'succeeded', 0,
                    '[]', '{{\"command\":[\"true\"]}}', 1, 3, 1000, 2000
             FROM {series} s;
             INSERT INTO job_logs (job_id, attempt, seq, stream, data, created_at)
             SELECT id, 1, 0, 'stdout', 'an old line', 2000 FROM jobs WHERE id LIKE 'job_old%';"
        ),
    )
    .await;
    let old_left = "SELECT COUNT(*) FROM jobs WHERE id LIKE 'job_old%'";
    assert_eq!(count(&c, old_left).await, OLD);

    c.restart().await;
    eventually("the purge to begin", DEADLINE, || async {
        (count(&c, old_left).await < OLD).then_some(())
    })
    .await;
    let job = admin
        .client
        .submit(&script_job("self:ws", "true"))
        .await
        .unwrap();
    let lease = runner
        .lease(Duration::from_secs(10))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(lease.job.id, job.id);
    assert!(
        count(&c, old_left).await > 0,
        "the lease was served while the purge ran"
    );
    runner
        .complete(&lease.lease_id, &succeeded())
        .await
        .unwrap();
    eventually("every old job to be purged", DEADLINE, || async {
        (count(&c, old_left).await == 0).then_some(())
    })
    .await;
    assert_eq!(
        count(
            &c,
            "SELECT COUNT(*) FROM job_logs WHERE job_id LIKE 'job_old%'"
        )
        .await,
        0
    );
    assert_eq!(
        admin.client.job(&job.id).await.unwrap().state,
        JobState::Succeeded,
        "a young job stays"
    );
}

/// With an age under a day, a job goes while its idempotency key would
/// still name it: the key goes with it, so the same key then queues a new
/// job instead of naming one that is gone.
#[tokio::test]
async fn an_idempotency_key_goes_with_its_purged_job() {
    let mut c = Coordinator::start_with(CoordinatorOptions {
        serve_args: ["--retain-finished", "1h"].map(String::from).to_vec(),
        ..Default::default()
    })
    .await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    runner(&c, &admin, 1).await;
    let job = script_job("self:ws", "true");
    let first = admin.client.submit_with_key(&job, "order-7").await.unwrap();
    admin.client.cancel(&first.id).await.unwrap();
    let again = admin.client.submit_with_key(&job, "order-7").await.unwrap();
    assert_eq!(again.id, first.id, "the key names its job");

    // Two hours on: the job is past its age, its key within its day.
    c.stop().await;
    c.options.env = vec![("DROVER_CLOCK_SKEW_MS", (2 * 3600 * 1000).to_string())];
    c.restart().await;
    eventually("the old job to be purged", DEADLINE, || async {
        gone(&admin, &first.id).await.then_some(())
    })
    .await;
    let new = admin.client.submit_with_key(&job, "order-7").await.unwrap();
    assert_ne!(new.id, first.id);
    assert_eq!(new.state, JobState::Queued);
}

/// Redeems `code` with no credential: the answer's status and error code.
async fn redeem(c: &Coordinator, code: &str) -> (u16, String) {
    let resp = reqwest::Client::new()
        .post(format!("{}/v1/pairing-codes/{code}/redeem", c.url))
        .json(&serde_json::json!({ "deviceName": "laptop" }))
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let body: serde_json::Value = resp.json().await.unwrap();
    (
        status,
        body["error"]["code"].as_str().unwrap_or("").to_owned(),
    )
}

/// Pairing codes go a day after they expire, used or not; until then they
/// still answer that they were used or have expired.
#[tokio::test]
async fn pairing_codes_are_purged_a_day_after_they_expire() {
    let mut c = Coordinator::start().await;
    let bob = c.bootstrap("acme", "bob@acme.test");
    let used = bob.client.pairing_code().await.unwrap().code;
    let unused = bob.client.pairing_code().await.unwrap().code;
    assert_eq!(redeem(&c, &used).await.0, 201);

    // 13 hours on: both expired 12 h 50 min ago, and are kept.
    c.stop().await;
    c.options.env = vec![("DROVER_CLOCK_SKEW_MS", (13 * 3600 * 1000).to_string())];
    c.restart().await;
    let later = bob.client.pairing_code().await.unwrap().code;
    assert_eq!(
        count(&c, "SELECT COUNT(*) FROM pairing_codes").await,
        3,
        "no code is a day past its expiry yet"
    );
    assert_eq!(redeem(&c, &used).await, (410, "PAIRING_CODE_USED".into()));
    assert_eq!(
        redeem(&c, &unused).await,
        (410, "PAIRING_CODE_EXPIRED".into())
    );

    // 30 hours from the start: the first two are a day past their expiry
    // and go; the one made at 13 hours stays (expired 16 h 50 min ago).
    c.stop().await;
    c.options.env = vec![("DROVER_CLOCK_SKEW_MS", (30 * 3600 * 1000).to_string())];
    c.restart().await;
    eventually("the old pairing codes to be purged", DEADLINE, || async {
        (count(&c, "SELECT COUNT(*) FROM pairing_codes").await == 1).then_some(())
    })
    .await;
    assert_eq!(redeem(&c, &used).await, (404, "NOT_FOUND".into()));
    assert_eq!(redeem(&c, &unused).await, (404, "NOT_FOUND".into()));
    assert_eq!(
        redeem(&c, &later).await,
        (410, "PAIRING_CODE_EXPIRED".into())
    );
    // The device token the used code gave is not purged with it.
    assert_eq!(bob.client.tokens().await.unwrap().tokens.len(), 2);
    // The log says so (its fields are coloured: drop the escapes).
    let text = c.log_text();
    let mut parts = text.split('\x1b');
    let mut log = parts.next().unwrap_or_default().to_owned();
    for part in parts {
        log.push_str(part.split_once('m').map_or(part, |(_, rest)| rest));
    }
    assert!(log.contains("pairing_codes=2"), "{log}");
}

/// A revoked device token's row says who revoked it for 90 days (a laptop
/// may sleep in a drawer for weeks); then retention purges it, and the
/// token is merely unknown.
#[tokio::test]
async fn token_revocations_are_kept_90_days_then_purged() {
    let mut c = Coordinator::start().await;
    let bob = c.bootstrap("acme", "bob@acme.test");
    let code = bob.client.pairing_code().await.unwrap().code;
    let device = bob
        .client
        .redeem_pairing_code(&code, "laptop")
        .await
        .unwrap();
    bob.client.revoke_token(&device.token_id).await.unwrap();
    let refused = |c: &Coordinator| {
        let laptop = c.client(&device.token);
        async move {
            match laptop.me().await {
                Err(ClientError::Api {
                    status, message, ..
                }) => (status, message),
                other => panic!("a revoked token was answered {other:?}"),
            }
        }
    };
    let (status, why) = refused(&c).await;
    assert_eq!(status, 401);
    assert!(why.contains("this device was signed out"), "{why}");

    // 89 days on: still said.
    c.stop().await;
    c.options.env = vec![(
        "DROVER_CLOCK_SKEW_MS",
        (89 * 24 * 3600 * 1000_u64).to_string(),
    )];
    c.restart().await;
    assert!(refused(&c).await.1.contains("was signed out"));
    assert_eq!(count(&c, "SELECT COUNT(*) FROM token_revocations").await, 1);

    // 91 days on: purged; the token is only unknown now.
    c.stop().await;
    c.options.env = vec![(
        "DROVER_CLOCK_SKEW_MS",
        (91 * 24 * 3600 * 1000_u64).to_string(),
    )];
    c.restart().await;
    eventually("the revocation to be purged", DEADLINE, || async {
        (count(&c, "SELECT COUNT(*) FROM token_revocations").await == 0).then_some(())
    })
    .await;
    let (status, why) = refused(&c).await;
    assert_eq!(status, 401);
    assert!(!why.contains("signed out"), "{why}");
}
