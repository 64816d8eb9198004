//! Budgets per calendar month (UTC) and usage reports, with the
//! coordinator's clock moved (`DROVER_CLOCK_SKEW_MS`) across a month's end.

use std::time::Duration;

use drover_tests::runner_core::client::{ClientError, Scope};
use drover_tests::runner_core::wire::{ErrorCode, JobState};
use drover_tests::*;

/// 2027-02-01T00:00:00Z, in Unix ms.
const FEB_1: i64 = 1_801_440_000_000;

/// The skew that puts the coordinator's clock at `at` now.
fn skew_to(at: i64) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    (at - now).to_string()
}

async fn moved_to(c: &mut Coordinator, at: i64) {
    c.stop().await;
    c.set_env("DROVER_CLOCK_SKEW_MS", skew_to(at));
    c.restart().await;
}

#[tokio::test]
async fn a_spent_month_refuses_workspace_submits_until_the_next_month() {
    let mut c = Coordinator::start_with(CoordinatorOptions {
        // Long enough that the clock's jump does not expire the lease.
        lease_ttl_ms: 600_000,
        env: vec![("DROVER_CLOCK_SKEW_MS", skew_to(FEB_1 - 120_000))],
        ..Default::default()
    })
    .await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    let bob = c.add_member("acme", "bob@acme.test", "member");
    let eve = c.add_member("acme", "eve@acme.test", "member");
    let set = admin.client.set_budget(Some(1)).await.unwrap();
    assert_eq!(
        (set.month.as_str(), set.monthly_minutes, set.resets_at),
        ("2027-01", Some(1), FEB_1)
    );
    let box1 = pair(&admin, Scope::Workspace, None, "box-1", &[]).await;
    let _runner = RunnerProcess::paired(&c.url, &box1.token, &[]);

    // A job that runs across a jump of 75 s of the coordinator's clock
    // (at 23:58:00, then 23:59:15 UTC), and one queued behind it.
    let dir = TempDir::new("billing");
    let gate = dir.path().join("go");
    let script = format!("while [ ! -f {} ]; do sleep 0.02; done", gate.display());
    let long = bob
        .client
        .submit(&script_job("self:ws", &script))
        .await
        .unwrap();
    wait_state(&bob.client, &long.id, JobState::Running).await;
    let behind = bob
        .client
        .submit(&script_job("self:ws", "true"))
        .await
        .unwrap();
    moved_to(&mut c, FEB_1 - 45_000).await;
    std::fs::write(&gate, "").unwrap();
    // Crossing the budget kills nothing: both finish.
    for id in [&long.id, &behind.id] {
        assert_eq!(wait_done(&bob.client, id).await.state, JobState::Succeeded);
    }
    let spent = admin.client.usage().await.unwrap();
    assert_eq!((spent.month.as_str(), spent.jobs_charged), ("2027-01", 2));
    assert!(spent.charged_ms >= 60_000, "over the minute: {spent:?}");

    // The month is spent: a workspace submit is refused, saying why and until when.
    match bob.client.submit(&script_job("self:ws", "true")).await {
        Err(ClientError::Api {
            status: 402,
            code: ErrorCode::BudgetExceeded,
            message,
        }) => assert!(
            message.contains("2027-01")
                && message.contains("of 1.0 runner-minutes")
                && message.contains("resets at 2027-02-01 00:00 UTC"),
            "{message}"
        ),
        other => panic!("expected 402 BUDGET_EXCEEDED, got {other:?}"),
    }
    // Own-pays is never refused for budget.
    pair(&bob, Scope::Me, None, "laptop", &[]).await;
    bob.client
        .submit(&script_job("self", "true"))
        .await
        .unwrap();

    // The month's report: JSON by pool, member and runner, and CSV.
    let report = |by: &'static str| {
        admin
            .client
            .usage_report(Scope::Workspace, Some("2027-01"), Some(by))
    };
    let by_pool = report("pool").await.unwrap();
    assert_eq!(by_pool.lines.len(), 1, "{by_pool:?}");
    let line = &by_pool.lines[0];
    assert_eq!(
        (line.name.as_str(), line.attempts, line.charged_ms),
        ("self:ws:default", 2, line.runner_ms)
    );
    assert_eq!(line.runner_ms, spent.charged_ms);
    let by_member = report("member").await.unwrap();
    assert_eq!(by_member.lines[0].name, "bob@acme.test");
    assert_eq!(by_member.lines[0].id, bob.subject);
    let by_runner = report("runner").await.unwrap();
    assert_eq!(
        (
            by_runner.lines[0].id.as_str(),
            by_runner.lines[0].name.as_str()
        ),
        (box1.runner.id.as_str(), "box-1")
    );
    let csv = admin
        .client
        .usage_csv(Scope::Workspace, Some("2027-01"), Some("member"))
        .await
        .unwrap();
    let rows: Vec<&str> = csv.lines().collect();
    assert_eq!(
        rows,
        [
            "month,member_id,member,runner_ms,charged_ms,attempts",
            &format!(
                "2027-01,{},bob@acme.test,{ms},{ms},2",
                bob.subject,
                ms = line.runner_ms
            ),
        ]
    );
    // A member sees their own jobs' usage, not the workspace's.
    let mine = bob
        .client
        .usage_report(Scope::Me, Some("2027-01"), None)
        .await
        .unwrap();
    assert_eq!(mine.lines, by_pool.lines);
    let hers = eve
        .client
        .usage_report(Scope::Me, Some("2027-01"), None)
        .await
        .unwrap();
    assert!(hers.lines.is_empty());
    assert_eq!(
        code(
            eve.client
                .usage_report(Scope::Workspace, Some("2027-01"), None)
                .await
        ),
        ErrorCode::Forbidden
    );
    for (month, by) in [("2027-13", "pool"), ("27-01", "pool"), ("2027-01", "team")] {
        assert_eq!(
            code(
                admin
                    .client
                    .usage_report(Scope::Workspace, Some(month), Some(by))
                    .await
            ),
            ErrorCode::BadRequest,
            "{month} {by}"
        );
    }
    assert_eq!(
        code(admin.client.set_budget(Some(u64::MAX)).await),
        ErrorCode::BadRequest
    );

    // February: the budget is whole again.
    moved_to(&mut c, FEB_1 + 60_000).await;
    let fresh = admin.client.usage().await.unwrap();
    assert_eq!(
        (fresh.month.as_str(), fresh.charged_ms, fresh.jobs_charged),
        ("2027-02", 0, 0)
    );
    let job = bob
        .client
        .submit(&script_job("self:ws", "true"))
        .await
        .unwrap();
    assert_eq!(
        wait_done(&bob.client, &job.id).await.state,
        JobState::Succeeded
    );
    // January's report stands.
    assert_eq!(report("pool").await.unwrap().lines, by_pool.lines);

    // The CLI says the same.
    let text = stdout_ok(&c.drover(&admin.token, &["budget", "show"]));
    assert!(
        text.contains("acme 2027-02") && text.contains("of 1 min"),
        "{text}"
    );
    let text = stdout_ok(&c.drover(
        &admin.token,
        &["usage", "--month", "2027-01", "--by", "runner", "--csv"],
    ));
    assert!(
        text.starts_with("month,runner_id,runner,") && text.contains("box-1"),
        "{text}"
    );
}

/// Each attempt is one usage line: a lease lost while running is metered
/// for the time it ran, the attempt that then runs is metered on its own
/// line, and a complete sent twice is metered once.
#[tokio::test]
async fn each_attempt_is_metered_once_on_its_own_line() {
    let c = Coordinator::start_with(CoordinatorOptions {
        lease_ttl_ms: 1_000,
        ..Default::default()
    })
    .await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    let paired = pair(&admin, Scope::Workspace, None, "box", &[]).await;
    let runner = c.client(&paired.token);
    runner.hello(&[]).await.unwrap();
    let mut job = script_job("self:ws", "true");
    job.max_attempts = Some(3);
    let job = admin.client.submit(&job).await.unwrap();

    // Attempt 1 starts, then its runner goes silent: the lease expires.
    let first = runner
        .lease(Duration::from_secs(5))
        .await
        .unwrap()
        .expect("a job");
    runner
        .heartbeat(&first.lease_id, Duration::ZERO)
        .await
        .unwrap();
    wait_state(&admin.client, &job.id, JobState::Queued).await;
    // Attempt 2 runs and completes; its complete is sent again.
    let second = runner
        .lease(Duration::from_secs(5))
        .await
        .unwrap()
        .expect("the job again");
    runner
        .heartbeat(&second.lease_id, Duration::ZERO)
        .await
        .unwrap();
    for _ in 0..2 {
        runner
            .complete(&second.lease_id, &succeeded())
            .await
            .unwrap();
    }
    // Attempt 1's late complete is refused, and metered nothing more.
    assert_eq!(
        code(runner.complete(&first.lease_id, &succeeded()).await),
        ErrorCode::LeaseLost
    );
    let lines = c
        .query_text(&format!(
            "SELECT CAST(attempt AS TEXT) FROM usage WHERE job_id = '{}' ORDER BY attempt",
            job.id
        ))
        .await;
    assert_eq!(lines, [Some("1".to_owned()), Some("2".to_owned())]);
    let usage = admin.client.usage().await.unwrap();
    assert_eq!(usage.jobs_charged, 2);
    let report = admin
        .client
        .usage_report(Scope::Workspace, None, Some("runner"))
        .await
        .unwrap();
    assert_eq!(report.lines.len(), 1);
    assert_eq!(
        (report.lines[0].attempts, report.lines[0].runner_ms),
        (2, usage.charged_ms)
    );
}
