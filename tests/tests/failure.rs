//! Bad input, bad credentials, revocation, a coordinator restart, and
//! secrets kept out of logs and out of the database.
//!
//! (Over 500 lines: one self-contained test per failure the SPEC names; splitting would only spread their shared setup.)

use std::time::Duration;

use drover_tests::raw::status_and_code;
use drover_tests::runner_core::client::Scope;
use drover_tests::runner_core::wire::{ErrorBody, ErrorCode, JobState, JoinRequest};
use drover_tests::*;
use reqwest::{Method, StatusCode};
use serde_json::json;

struct Raw {
    http: reqwest::Client,
    url: String,
}

impl Raw {
    /// Sends a request; asserts the answer is our JSON error with `status` and `code`.
    async fn expect(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        body: Option<Vec<u8>>,
        status: StatusCode,
        code: ErrorCode,
    ) {
        let mut req = self
            .http
            .request(method.clone(), format!("{}{path}", self.url));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        if let Some(b) = body {
            req = req.header("content-type", "application/json").body(b);
        }
        let resp = req.send().await.expect("send");
        let got = resp.status();
        let text = resp.text().await.unwrap();
        assert_eq!(got, status, "{method} {path}: {text}");
        let err: ErrorBody = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{method} {path}: not an error body ({e}): {text}"));
        assert_eq!(err.error.code, code, "{method} {path}: {text}");
        assert!(!err.error.message.is_empty());
    }
}

#[tokio::test]
async fn bad_input_gets_a_stable_error_code_and_changes_nothing() {
    let c = Coordinator::start().await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    let bob = c.add_member("acme", "bob@acme.test", "member");
    let runner = pair(&admin, Scope::Workspace, None, "r", &[]).await;
    // No connection reuse: a 413 may close the connection mid-body.
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    let raw = Raw {
        http,
        url: c.url.clone(),
    };
    let a = Some(admin.token.as_str());
    let submit = |v: serde_json::Value| Some(serde_json::to_vec(&v).unwrap());
    use ErrorCode::*;
    let (bad, unauth, forbidden, missing) = (
        StatusCode::BAD_REQUEST,
        StatusCode::UNAUTHORIZED,
        StatusCode::FORBIDDEN,
        StatusCode::NOT_FOUND,
    );

    // Credentials.
    raw.expect(Method::GET, "/v1/jobs", None, None, unauth, Unauthorized)
        .await;
    raw.expect(
        Method::GET,
        "/v1/jobs",
        Some("drv_not-a-real-token"),
        None,
        unauth,
        Unauthorized,
    )
    .await;
    raw.expect(
        Method::GET,
        "/v1/jobs",
        Some("nonsense"),
        None,
        unauth,
        Unauthorized,
    )
    .await;
    raw.expect(
        Method::GET,
        "/v1/jobs",
        Some(&"x".repeat(1000)),
        None,
        unauth,
        Unauthorized,
    )
    .await;
    raw.expect(
        Method::GET,
        "/v1/jobs",
        Some(&runner.token),
        None,
        forbidden,
        Forbidden,
    )
    .await;
    raw.expect(
        Method::POST,
        "/v1/runner/lease",
        a,
        submit(json!({"waitMs": 0})),
        forbidden,
        Forbidden,
    )
    .await;
    raw.expect(
        Method::POST,
        "/v1/workspace/runners",
        Some(&bob.token),
        submit(json!({})),
        forbidden,
        Forbidden,
    )
    .await;
    raw.expect(
        Method::POST,
        "/v1/workspace/runtimes",
        Some(&bob.token),
        submit(json!({"name": "x"})),
        forbidden,
        Forbidden,
    )
    .await;
    raw.expect(
        Method::PUT,
        "/v1/workspace/budget",
        Some(&bob.token),
        submit(json!({"monthlyMinutes": 1})),
        forbidden,
        Forbidden,
    )
    .await;
    raw.expect(
        Method::DELETE,
        &format!("/v1/workspace/runners/{}", runner.runner.id),
        Some(&bob.token),
        None,
        forbidden,
        Forbidden,
    )
    .await;

    // Bodies.
    raw.expect(
        Method::POST,
        "/v1/jobs",
        a,
        Some(b"{".to_vec()),
        bad,
        BadRequest,
    )
    .await;
    raw.expect(
        Method::POST,
        "/v1/jobs",
        a,
        Some(b"[]".to_vec()),
        bad,
        BadRequest,
    )
    .await;
    raw.expect(
        Method::POST,
        "/v1/jobs",
        a,
        Some(vec![0xff, 0xfe]),
        bad,
        BadRequest,
    )
    .await;
    for body in [
        json!({"runtime": 5, "command": ["true"]}),
        json!({"runtime": "self:ws", "command": ["true"], "bogus": 1}),
        json!({"runtime": "self:ws"}),
        json!({"runtime": "self:ws", "command": []}),
        json!({"runtime": "self:ws", "command": ["true"], "script": "true"}),
        json!({"runtime": "self:ws", "command": [""]}),
        json!({"runtime": "self:ws", "command": ["a\u{0}b"]}),
        json!({"runtime": "self:ws", "command": ["true"], "env": {"1BAD": "x"}}),
        json!({"runtime": "self:ws", "command": ["true"], "timeoutSeconds": 0}),
        json!({"runtime": "self:ws", "command": ["true"], "priority": 5000}),
        json!({"runtime": "self:ws", "command": ["true"], "maxAttempts": 0}),
        json!({"runtime": "self:ws", "command": ["true"], "requires": ["a b"]}),
        json!({"runtime": "self:ws", "command": ["true"], "image": "has space"}),
        json!({"runtime": "self:ws", "command": ["true"], "priority": 1e40}),
    ] {
        raw.expect(Method::POST, "/v1/jobs", a, submit(body), bad, BadRequest)
            .await;
    }
    raw.expect(
        Method::POST,
        "/v1/jobs",
        a,
        submit(json!({"runtime": "nope:x", "command": ["true"]})),
        bad,
        InvalidRef,
    )
    .await;
    // A body over the limit is refused from its Content-Length, before it
    // is asked for. The request waits to be asked (`Expect: 100-continue`,
    // as curl sends large bodies): a client that pushes 2 MiB regardless may
    // see its write cut off by the refusal, and this test would be flaky.
    let head = format!(
        "POST /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nExpect: 100-continue\r\n\r\n",
        admin.token,
        2 * 1024 * 1024
    );
    // The first answer is the refusal, not `100 Continue`.
    let answer = drover_tests::raw::raw(&c, head.as_bytes()).await;
    assert_eq!(
        status_and_code(&answer),
        (413, "PAYLOAD_TOO_LARGE".into()),
        "refused before the body is asked for"
    );
    let mut no_type = raw
        .http
        .post(format!("{}/v1/jobs", c.url))
        .bearer_auth(&admin.token)
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(no_type.status(), bad);
    assert!(no_type.chunk().await.unwrap().is_some());

    // Paths and queries.
    raw.expect(
        Method::GET,
        "/v1/jobs/not-an-id",
        a,
        None,
        missing,
        NotFound,
    )
    .await;
    raw.expect(
        Method::GET,
        "/v1/jobs/job_0000000000000000",
        a,
        None,
        missing,
        NotFound,
    )
    .await;
    raw.expect(
        Method::GET,
        "/v1/jobs/job_0000000000000000/logs",
        a,
        None,
        missing,
        NotFound,
    )
    .await;
    raw.expect(Method::GET, "/v1/jobs?limit=0", a, None, bad, BadRequest)
        .await;
    raw.expect(Method::GET, "/v1/jobs?limit=abc", a, None, bad, BadRequest)
        .await;
    raw.expect(
        Method::GET,
        "/v1/jobs?state=bogus",
        a,
        None,
        bad,
        BadRequest,
    )
    .await;
    raw.expect(Method::GET, "/v1/jobs?surprise=1", a, None, bad, BadRequest)
        .await;
    raw.expect(Method::GET, "/v1/nowhere", a, None, missing, NotFound)
        .await;
    raw.expect(
        Method::DELETE,
        "/v1/jobs",
        a,
        None,
        StatusCode::METHOD_NOT_ALLOWED,
        MethodNotAllowed,
    )
    .await;
    raw.expect(
        Method::DELETE,
        "/v1/workspace/runners/rn_doesnotexist",
        a,
        None,
        missing,
        NotFound,
    )
    .await;
    raw.expect(
        Method::POST,
        "/v1/workspace/runtimes/nope/join-tokens",
        a,
        None,
        missing,
        NotFound,
    )
    .await;

    // Pools and runners.
    raw.expect(
        Method::POST,
        "/v1/workspace/runtimes",
        a,
        submit(json!({"name": "bad name"})),
        bad,
        BadRequest,
    )
    .await;
    raw.expect(
        Method::POST,
        "/v1/workspace/runtimes",
        a,
        submit(json!({"name": "ws"})),
        bad,
        BadRequest,
    )
    .await;
    raw.expect(
        Method::POST,
        "/v1/workspace/runtimes",
        a,
        submit(json!({"name": "rt_abc"})),
        bad,
        BadRequest,
    )
    .await;
    raw.expect(
        Method::POST,
        "/v1/workspace/runtimes",
        a,
        submit(json!({"name": "default"})),
        StatusCode::CONFLICT,
        Conflict,
    )
    .await;
    raw.expect(
        Method::POST,
        "/v1/workspace/runners",
        a,
        submit(json!({"labels": ["ok", "not ok"]})),
        bad,
        BadRequest,
    )
    .await;
    raw.expect(
        Method::POST,
        "/v1/workspace/runners",
        a,
        submit(json!({"runtime": "missing"})),
        missing,
        NotFound,
    )
    .await;
    raw.expect(
        Method::POST,
        "/v1/workspace/runtimes/default/join-tokens",
        a,
        submit(json!({"ttlSeconds": 0})),
        bad,
        BadRequest,
    )
    .await;
    raw.expect(
        Method::PUT,
        "/v1/workspace/budget",
        a,
        submit(json!({"monthlyMinutes": -1})),
        bad,
        BadRequest,
    )
    .await;

    // The runner protocol.
    let r = Some(runner.token.as_str());
    raw.expect(
        Method::POST,
        "/v1/runner/lease",
        r,
        submit(json!({})),
        bad,
        BadRequest,
    )
    .await;
    raw.expect(
        Method::POST,
        "/v1/runner/leases/lse_nothing/heartbeat",
        r,
        submit(json!({"waitMs": 0})),
        StatusCode::CONFLICT,
        LeaseLost,
    )
    .await;
    raw.expect(
        Method::POST,
        "/v1/runner/leases/lse_nothing/complete",
        r,
        submit(json!({"outcome": "succeeded"})),
        StatusCode::CONFLICT,
        LeaseLost,
    )
    .await;
    raw.expect(
        Method::POST,
        "/v1/runner/leases/lse_nothing/complete",
        r,
        submit(json!({"outcome": "exploded"})),
        bad,
        BadRequest,
    )
    .await;
    raw.expect(
        Method::POST,
        "/v1/runner/join",
        r,
        submit(json!({"ref": "self:ws", "name": "x"})),
        forbidden,
        Forbidden,
    )
    .await;
    let mut wrong_version = raw
        .http
        .post(format!("{}/v1/runner/lease", c.url))
        .bearer_auth(&runner.token)
        .header("drover-protocol", "one")
        .json(&json!({"waitMs": 0}))
        .send()
        .await
        .unwrap();
    assert_eq!(wrong_version.status(), bad);
    let body: ErrorBody =
        serde_json::from_slice(&wrong_version.chunk().await.unwrap().unwrap()).unwrap();
    assert_eq!(body.error.code, UnsupportedProtocol);

    // Nothing was created by any of it.
    assert!(admin.client.jobs(None, 100).await.unwrap().jobs.is_empty());
    assert_eq!(
        admin
            .client
            .runtimes(Scope::Workspace)
            .await
            .unwrap()
            .runtimes
            .len(),
        1
    );
    assert_eq!(
        admin
            .client
            .runners(drover_tests::runner_core::client::RunnerListing::Roster)
            .await
            .unwrap()
            .runners
            .len(),
        1
    );
    assert!(!c.log_text().contains("panicked"));
}

#[tokio::test]
async fn expired_join_tokens_and_revoked_runners_are_refused() {
    let c = Coordinator::start_with(CoordinatorOptions {
        lease_ttl_ms: 2000,
        ..Default::default()
    })
    .await;
    let admin = c.bootstrap("acme", "admin@acme.test");

    // A join token names one pool, and expires.
    let short: serde_json::Value = reqwest::Client::new()
        .post(format!(
            "{}/v1/workspace/runtimes/default/join-tokens",
            c.url
        ))
        .bearer_auth(&admin.token)
        .json(&json!({"ttlSeconds": 1}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let short = c.client(short["token"].as_str().unwrap());
    let join = |reference: &str| JoinRequest {
        reference: reference.into(),
        name: "j".into(),
        capabilities: vec![],
    };
    assert_eq!(
        code(short.join(&join("self:ws:other")).await),
        ErrorCode::NotFound
    );
    assert_eq!(code(short.join(&join("self")).await), ErrorCode::NotFound);
    short.join(&join("ws:acme:default")).await.unwrap();
    eventually("the join token to expire", DEADLINE, || async {
        (short.join(&join("self:ws")).await.err()?.code() == Some(ErrorCode::Unauthorized))
            .then_some(())
    })
    .await;

    // Revoking a runner mid-job: the job goes back to the queue, the
    // runner's heartbeat, lease and complete are refused, and it stops.
    let doomed = pair(&admin, Scope::Workspace, None, "doomed", &[]).await;
    let spare = pair(&admin, Scope::Workspace, None, "spare", &[]).await;
    let mut r = RunnerProcess::paired(&c.url, &doomed.token, &[]);
    let dir = TempDir::new("revoke");
    let script = format!(
        "if [ \"$DROVER_ATTEMPT\" = 1 ]; then sleep 1000; fi; echo second > {}/done",
        dir.path().display()
    );
    let job = admin
        .client
        .submit(&script_job("self:ws", &script))
        .await
        .unwrap();
    wait_state(&admin.client, &job.id, JobState::Running).await;
    admin
        .client
        .revoke_runner(Scope::Workspace, &doomed.runner.id)
        .await
        .unwrap();
    assert_eq!(
        code(
            admin
                .client
                .revoke_runner(Scope::Workspace, &doomed.runner.id)
                .await
        ),
        ErrorCode::NotFound
    );
    let requeued = wait_state(&admin.client, &job.id, JobState::Queued).await;
    assert_eq!(requeued.attempt, 1);
    let status = r.wait_exit().await;
    assert!(!status.success(), "a revoked runner stops with an error");
    assert!(
        r.lines().iter().any(|l| l.contains("stopped:")),
        "{:?}",
        r.lines()
    );
    let revoked = c.client(&doomed.token);
    assert_eq!(
        code(revoked.lease(Duration::ZERO).await),
        ErrorCode::Unauthorized
    );
    assert!(
        !admin
            .client
            .runners(drover_tests::runner_core::client::RunnerListing::Roster)
            .await
            .unwrap()
            .runners
            .iter()
            .any(|x| x.id == doomed.runner.id)
    );

    let _spare = RunnerProcess::paired(&c.url, &spare.token, &[]);
    let done = wait_done(&admin.client, &job.id).await;
    assert_eq!(
        (done.state, done.provenance.unwrap().attempt),
        (JobState::Succeeded, 2)
    );

    // An in-flight complete from a runner revoked after leasing is refused.
    let manual = pair(&admin, Scope::Workspace, Some("default"), "manual", &[]).await;
    let manual_client = c.client(&manual.token);
    let pinned = admin
        .client
        .submit(&script_job(
            &format!("self:ws:{}", manual.runner.id),
            "true",
        ))
        .await
        .unwrap();
    let lease = manual_client
        .lease(Duration::from_secs(5))
        .await
        .unwrap()
        .expect("lease");
    assert_eq!(lease.job.id, pinned.id);
    admin
        .client
        .revoke_runner(Scope::Workspace, &manual.runner.id)
        .await
        .unwrap();
    let done = succeeded();
    assert_eq!(
        code(manual_client.complete(&lease.lease_id, &done).await),
        ErrorCode::Unauthorized
    );
    // Nobody else may run a job pinned to a revoked runner: it ends.
    let pinned = admin.client.job(&pinned.id).await.unwrap();
    assert_eq!(pinned.state, JobState::Lost);
    assert!(pinned.error.unwrap().contains("revoked"));
}

#[tokio::test]
async fn runners_survive_a_coordinator_restart_and_no_job_is_lost() {
    let mut c = Coordinator::start().await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    let join = ws_join_token(&admin, "default").await;
    let state = TempDir::new("state");
    let runners = RunnerProcess::join(&c.url, "self:ws", &join.token, 2, state.path(), &[]);
    c.wait_for_waiting(2).await;
    let dir = TempDir::new("restart");
    let go = dir.path().join("go");
    let long = admin
        .client
        .submit(&script_job(
            "self:ws",
            &format!(
                "while [ ! -f {} ]; do sleep 0.02; done; echo finished",
                go.display()
            ),
        ))
        .await
        .unwrap();
    wait_state(&admin.client, &long.id, JobState::Running).await;
    // Queue more than the free runner can take at once.
    let mut queued = Vec::new();
    for i in 0..10 {
        queued.push(
            admin
                .client
                .submit(&script_job("self:ws", &format!("echo {i}")))
                .await
                .unwrap()
                .id,
        );
    }

    c.kill9().await;
    runners.wait_for_lines("disconnected", 1).await;
    // The long job finishes while the coordinator is away; its result waits.
    std::fs::write(&go, "").unwrap();
    c.restart().await;
    runners.wait_for_lines("reconnected", 1).await;

    let long = wait_done(&admin.client, &long.id).await;
    assert_eq!(
        (long.state, long.attempt),
        (JobState::Succeeded, 1),
        "the lease survived the restart"
    );
    assert_eq!(admin.client.logs(&long.id).await.unwrap(), "finished\n");
    for id in &queued {
        assert_eq!(
            wait_done(&admin.client, id).await.state,
            JobState::Succeeded
        );
    }
    let after = admin
        .client
        .submit(&script_job("self:ws", "true"))
        .await
        .unwrap();
    assert_eq!(
        wait_done(&admin.client, &after.id).await.state,
        JobState::Succeeded
    );
    assert_eq!(admin.client.usage().await.unwrap().jobs_charged, 12);
}

/// A runner whose coordinator was killed stops its job before the lease
/// could lapse; the coordinator comes back and (on SQLite) gives that lease
/// a fresh TTL, 20 s here. The runner says which leases it still holds
/// (none), so the stale one is released at once and the runner takes work
/// again within 2 s, rather than being refused `LEASE_LIMIT` for 20 s.
#[tokio::test]
async fn a_runner_back_after_a_restart_is_not_held_by_a_lease_it_gave_up() {
    let mut c = Coordinator::start_with(CoordinatorOptions {
        lease_ttl_ms: 3000,
        ..Default::default()
    })
    .await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    let runner = pair(&admin, Scope::Workspace, None, "r", &[]).await;
    let r = RunnerProcess::paired(&c.url, &runner.token, &[]);
    c.wait_for_waiting(1).await;
    let job = admin
        .client
        .submit(&script_job("self:ws", "sleep 600"))
        .await
        .unwrap();
    wait_state(&admin.client, &job.id, JobState::Running).await;

    c.kill9().await;
    r.wait_for_lines("lost the lease", 1).await;
    c.options.lease_ttl_ms = 20_000;
    c.restart().await;
    let leases = || r.lines().iter().filter(|l| l.contains(": leased ")).count();
    eventually(
        "the runner to take work again",
        Duration::from_secs(2),
        || {
            let n = leases();
            async move { (n >= 2).then_some(()) }
        },
    )
    .await;
    // What it took is the job it had to stop, given back to the queue.
    let again = admin.client.job(&job.id).await.unwrap();
    assert_eq!(again.attempt, 2, "{again:?}");
}

#[tokio::test]
async fn tokens_never_reach_logs_or_the_database() {
    let mut c = Coordinator::start().await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    let bob = c.add_member("acme", "bob@acme.test", "member");
    let paired = pair(&admin, Scope::Workspace, None, "paired", &[]).await;
    let join = ws_join_token(&admin, "default").await;
    let state = TempDir::new("state");
    let joined = RunnerProcess::join(&c.url, "self:ws", &join.token, 2, state.path(), &[]);
    let single = RunnerProcess::paired(&c.url, &paired.token, &[]);
    c.wait_for_waiting(3).await;
    for _ in 0..4 {
        let job = bob
            .client
            .submit(&script_job("self:ws", "echo work"))
            .await
            .unwrap();
        wait_done(&bob.client, &job.id).await;
    }
    // Failures are logged too: a bad token, a revoked runner.
    let _ = c.client(&format!("{}x", admin.token)).jobs(None, 1).await;
    admin
        .client
        .revoke_runner(Scope::Workspace, &paired.runner.id)
        .await
        .unwrap();
    let _ = c.client(&paired.token).lease(Duration::ZERO).await;

    let mut secrets = vec![
        admin.token.clone(),
        bob.token.clone(),
        paired.token.clone(),
        join.token.clone(),
    ];
    for entry in std::fs::read_dir(state.path().join("runners")).unwrap() {
        let v: serde_json::Value =
            serde_json::from_slice(&std::fs::read(entry.unwrap().path()).unwrap()).unwrap();
        secrets.push(v["token"].as_str().unwrap().to_owned());
    }
    assert_eq!(secrets.len(), 6);
    c.stop().await;
    let mut haystacks = vec![("coordinator log".to_owned(), c.log_text().into_bytes())];
    haystacks.push((
        "runner output".into(),
        joined.lines().join("\n").into_bytes(),
    ));
    haystacks.push((
        "runner output".into(),
        single.lines().join("\n").into_bytes(),
    ));
    haystacks.push(("the database".into(), c.database_contents().await));
    for secret in &secrets {
        for (name, bytes) in &haystacks {
            assert!(
                !bytes.windows(secret.len()).any(|w| w == secret.as_bytes()),
                "a token appears in {name}"
            );
        }
    }
}
