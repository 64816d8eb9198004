//! The store under a greedy runner, a lost answer, a bad bootstrap and
//! look-alike names: each test fails without its fix.
//!
//! (Over 500 lines: one self-contained test per store failure it guards against.)

use std::process::Command;
use std::time::{Duration, Instant};

use drover_tests::runner_core::client::{Client, ClientError, Scope};
use drover_tests::runner_core::wire::{self, ErrorCode, JobState};
use drover_tests::*;

/// A protocol-level runner of the workspace pool that said hello with `slots`.
async fn runner_with_slots(c: &Coordinator, admin: &Member, name: &str, slots: u32) -> Client {
    let paired = pair(admin, Scope::Workspace, None, name, &[]).await;
    let runner = c.client(&paired.token);
    runner.hello_with_slots(&[], slots).await.unwrap();
    runner
}

async fn submit_many(admin: &Member, n: usize) -> Vec<String> {
    let mut ids = Vec::with_capacity(n);
    for _ in 0..n {
        ids.push(
            admin
                .client
                .submit(&script_job("self:ws", "true"))
                .await
                .unwrap()
                .id,
        );
    }
    ids
}

fn status(e: &ClientError) -> u16 {
    match e {
        ClientError::Api { status, .. } => *status,
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// One runner token asking for hundreds of leases at once gets as many as
/// it declared slots; the rest are refused at once with `LEASE_LIMIT`
/// (429, so a runner backs off), whether they would lease or wait.
#[tokio::test]
async fn a_greedy_runner_holds_no_more_leases_than_its_slots() {
    let c = Coordinator::start().await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    let greedy = runner_with_slots(&c, &admin, "greedy", 2).await;
    submit_many(&admin, 300).await;

    let calls: Vec<_> = (0..300)
        .map(|_| {
            let greedy = greedy.clone();
            tokio::spawn(async move { greedy.lease(Duration::ZERO).await })
        })
        .collect();
    let mut leases = Vec::new();
    for call in calls {
        match call.await.unwrap() {
            Ok(Some(lease)) => leases.push(lease),
            Ok(None) => {}
            Err(e) => {
                assert_eq!(e.code(), Some(ErrorCode::LeaseLimit), "{e}");
                assert_eq!(status(&e), 429);
                assert!(e.is_recoverable(), "a runner backs off and tries again");
            }
        }
    }
    assert_eq!(leases.len(), 2, "two slots, two leases");
    let leased = admin
        .client
        .jobs(Some(JobState::Leased), 1000)
        .await
        .unwrap()
        .jobs;
    assert_eq!(leased.len(), 2);

    // Full: even a long-poll is refused at once instead of waiting.
    let asked = Instant::now();
    assert_eq!(
        code(greedy.lease(Duration::from_secs(20)).await),
        ErrorCode::LeaseLimit
    );
    assert!(asked.elapsed() < Duration::from_secs(10));

    // A finished job frees its slot.
    greedy
        .complete(&leases[0].lease_id, &succeeded())
        .await
        .unwrap();
    assert!(greedy.lease(Duration::ZERO).await.unwrap().is_some());

    // A runner that never says how many slots it has holds one lease, and
    // may keep one long-poll waiting, not thousands.
    let old = pair(&admin, Scope::Workspace, None, "old", &[]).await;
    let old = c.client(&old.token);
    old.hello(&[]).await.unwrap();
    let first = old.lease(Duration::ZERO).await.unwrap().expect("a job");
    assert_eq!(code(old.lease(Duration::ZERO).await), ErrorCode::LeaseLimit);
    old.complete(&first.lease_id, &succeeded()).await.unwrap();

    // Its own pool, with no jobs queued.
    admin
        .client
        .create_runtime(Scope::Workspace, "quiet")
        .await
        .unwrap();
    let idle = pair(&admin, Scope::Workspace, Some("quiet"), "idle", &[]).await;
    let idle = c.client(&idle.token);
    idle.hello_with_slots(&[], 1).await.unwrap();
    let waiting = {
        let idle = idle.clone();
        tokio::spawn(async move { idle.lease(Duration::from_secs(30)).await })
    };
    c.wait_for_waiting(1).await;
    let piled: Vec<_> = (0..200)
        .map(|_| {
            let idle = idle.clone();
            tokio::spawn(async move { idle.lease(Duration::from_secs(30)).await })
        })
        .collect();
    for call in piled {
        assert_eq!(code(call.await.unwrap()), ErrorCode::LeaseLimit);
    }
    assert_eq!(c.waiting_leases().await, 1, "one slot, one long-poll");
    let job = admin
        .client
        .submit(&script_job("self:ws:quiet", "true"))
        .await
        .unwrap();
    let lease = waiting.await.unwrap().unwrap().expect("woken with the job");
    assert_eq!(lease.job.id, job.id);
}

#[tokio::test]
async fn slots_in_hello_are_bounded() {
    let c = Coordinator::start().await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    let paired = pair(&admin, Scope::Workspace, None, "r", &[]).await;
    let http = reqwest::Client::new();
    for (slots, ok) in [(0, false), (1, true), (256, true), (257, false)] {
        let resp = http
            .post(format!("{}/v1/runner/hello", c.url))
            .bearer_auth(&paired.token)
            .header(wire::PROTOCOL_HEADER, wire::PROTOCOL_VERSION.to_string())
            .json(&serde_json::json!({"capabilities": [], "slots": slots}))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().is_success(), ok, "slots {slots}");
        if !ok {
            assert_eq!(resp.status(), 400);
            let body: serde_json::Value = resp.json().await.unwrap();
            assert_eq!(body["error"]["code"], "BAD_REQUEST");
        }
    }
}

/// Thousands of leases expiring at once are released in chunks, so a
/// submit meanwhile waits for a chunk, not for all of them (row by row in
/// one transaction, it waited for seconds).
#[tokio::test]
async fn thousands_of_expiring_leases_do_not_stall_a_submit() {
    // On SQLite (one writer) row-by-row release in one transaction stalled
    // a submit for seconds at this size. PostgreSQL writers do not wait on
    // each other's rows, so a smaller set shows it works there too.
    let jobs: usize = match Backend::from_env() {
        Backend::Sqlite => 6144,
        Backend::Postgres => 1536,
    };
    let mut c = Coordinator::start_with(CoordinatorOptions {
        lease_ttl_ms: 2000,
        ..Default::default()
    })
    .await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    let runners: Vec<Client> = {
        let mut v = Vec::new();
        for i in 0..24 {
            v.push(runner_with_slots(&c, &admin, &format!("r{i}"), 256).await);
        }
        v
    };
    let submits: Vec<_> = (0..16)
        .map(|_| {
            let client = admin.client.clone();
            tokio::spawn(async move {
                for _ in 0..jobs / 16 {
                    client.submit(&script_job("self:ws", "true")).await.unwrap();
                }
            })
        })
        .collect();
    for s in submits {
        s.await.unwrap();
    }
    let takers: Vec<_> = runners
        .iter()
        .map(|r| {
            let r = r.clone();
            // Each runner takes its share. A lease may come back empty
            // while jobs are queued: on PostgreSQL another batch holds
            // their rows (SKIP LOCKED); that runner asks again.
            tokio::spawn(async move {
                let (mut n, give_up) = (0, Instant::now() + DEADLINE);
                while n < jobs / 24 && Instant::now() < give_up {
                    n += usize::from(r.lease(Duration::ZERO).await.unwrap().is_some());
                }
                n
            })
        })
        .collect();
    let mut leased = 0;
    for t in takers {
        leased += t.await.unwrap();
    }
    assert_eq!(leased, jobs);

    // Down and up again: every lease gets the same fresh TTL (SQLite), or
    // is already out of time (PostgreSQL); either way all expire together.
    c.kill9().await;
    c.restart().await;
    // Submits keep going in while the leases expire: between two looks
    // that both see expiry under way (some leases released, not all), a
    // submit was written. Row by row in one transaction, expiry was never
    // seen half done, and submits waited for all of it.
    let leased = || async {
        c.query_text("SELECT CAST(COUNT(*) AS TEXT) FROM jobs WHERE state = 'leased'")
            .await[0]
            .as_deref()
            .expect("a count")
            .parse::<usize>()
            .expect("a number")
    };
    let under_way = |n: usize| 0 < n && n < jobs;
    let mut during = 0;
    let start = Instant::now();
    let mut before = leased().await;
    while before > 0 {
        admin
            .client
            .submit(&script_job("self:ws", "true"))
            .await
            .unwrap();
        let after = leased().await;
        during += usize::from(under_way(before) && under_way(after));
        before = after;
        assert!(
            start.elapsed() < DEADLINE,
            "the leases did not all expire in time"
        );
    }
    // On PostgreSQL the chunks may all go between two looks: there the
    // test holds that submits go on and every lease expires in time.
    if Backend::from_env() == Backend::Sqlite {
        assert!(during > 0, "no submit was written while the leases expired");
    }
}

async fn submit_with_key(
    c: &Coordinator,
    token: &str,
    key: &str,
    body: &serde_json::Value,
) -> reqwest::Result<reqwest::Response> {
    reqwest::Client::new()
        .post(format!("{}/v1/jobs", c.url))
        .bearer_auth(token)
        .header("Idempotency-Key", key)
        .json(body)
        .send()
        .await
}

/// The same `Idempotency-Key` from the same member answers the first job;
/// with another body it is a conflict; another member's key is their own.
#[tokio::test]
async fn an_idempotency_key_names_one_job() {
    let c = Coordinator::start().await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    let bob = c.add_member("acme", "bob@acme.test", "member");
    pair(&admin, Scope::Workspace, None, "r", &[]).await;
    let body = serde_json::json!({"runtime": "self:ws", "script": "true"});

    let first = submit_with_key(&c, &admin.token, "order-42", &body)
        .await
        .unwrap();
    assert_eq!(first.status(), 201);
    let first: wire::Job = first.json().await.unwrap();

    let again = submit_with_key(&c, &admin.token, "order-42", &body)
        .await
        .unwrap();
    assert_eq!(again.status(), 200);
    assert_eq!(again.headers()["idempotent-replayed"], "true");
    let again: wire::Job = again.json().await.unwrap();
    assert_eq!(again.id, first.id);

    let other_body = serde_json::json!({"runtime": "self:ws", "script": "false"});
    let reused = submit_with_key(&c, &admin.token, "order-42", &other_body)
        .await
        .unwrap();
    assert_eq!(reused.status(), 409);
    let err: serde_json::Value = reused.json().await.unwrap();
    assert_eq!(err["error"]["code"], "CONFLICT");
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Idempotency-Key"),
        "{err}"
    );

    let bobs = submit_with_key(&c, &bob.token, "order-42", &body)
        .await
        .unwrap();
    assert_eq!(bobs.status(), 201);
    let bobs: wire::Job = bobs.json().await.unwrap();
    assert_ne!(bobs.id, first.id);

    for bad in ["".to_string(), "k".repeat(256)] {
        let resp = submit_with_key(&c, &admin.token, &bad, &body)
            .await
            .unwrap();
        assert_eq!(resp.status(), 400, "key of {} characters", bad.len());
    }
    let all = admin.client.jobs(None, 100).await.unwrap().jobs;
    assert_eq!(all.len(), 2, "one job per member");
}

/// Many copies of one request with one key, at once (on PostgreSQL several
/// batches write concurrently): one job, and every answer names it, or asks
/// to retry.
#[tokio::test]
async fn concurrent_submits_with_one_key_queue_one_job() {
    let c = Coordinator::start().await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    pair(&admin, Scope::Workspace, None, "r", &[]).await;
    let body = serde_json::json!({"runtime": "self:ws", "script": "true"});
    let calls: Vec<_> = (0..40)
        .map(|_| {
            let (url, token, body) = (c.url.clone(), admin.token.clone(), body.clone());
            tokio::spawn(async move {
                let resp = reqwest::Client::new()
                    .post(format!("{url}/v1/jobs"))
                    .bearer_auth(token)
                    .header("Idempotency-Key", "same")
                    .json(&body)
                    .send()
                    .await
                    .unwrap();
                let status = resp.status().as_u16();
                (status, resp.json::<serde_json::Value>().await.unwrap())
            })
        })
        .collect();
    let mut named = std::collections::HashSet::new();
    let mut created = 0;
    for call in calls {
        let (status, body) = call.await.unwrap();
        match status {
            201 | 200 => {
                created += usize::from(status == 201);
                named.insert(body["id"].as_str().unwrap().to_owned());
            }
            // Written at the same moment by another transaction: retry.
            503 => assert_eq!(body["error"]["code"], "OVERLOADED", "{body}"),
            other => panic!("{other}: {body}"),
        }
    }
    let all = admin.client.jobs(None, 100).await.unwrap().jobs;
    assert_eq!(all.len(), 1, "one job");
    assert_eq!(created, 1);
    assert_eq!(named.into_iter().collect::<Vec<_>>(), [all[0].id.clone()]);
}

/// The coordinator dies after writing a submit and before answering it
/// (a test hook aborts it there). The client sends the same request with
/// the same key to the restarted coordinator: it gets the job that was
/// written, and there is exactly one.
#[tokio::test]
async fn a_submit_whose_answer_was_lost_is_queued_once() {
    let mut c = Coordinator::start_with(CoordinatorOptions {
        env: vec![("DROVER_TEST_EXIT_AFTER_SUBMIT", "1".into())],
        ..Default::default()
    })
    .await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    pair(&admin, Scope::Workspace, None, "r", &[]).await;
    let body = serde_json::json!({"runtime": "self:ws", "script": "echo once"});

    let lost = submit_with_key(&c, &admin.token, "retry-me", &body).await;
    assert!(lost.is_err(), "no answer: {lost:?}");
    c.kill9().await;
    c.options.env.clear();
    c.restart().await;

    let retried = submit_with_key(&c, &admin.token, "retry-me", &body)
        .await
        .unwrap();
    assert_eq!(retried.status(), 200, "the job written before the crash");
    let job: wire::Job = retried.json().await.unwrap();
    let all = admin.client.jobs(None, 100).await.unwrap().jobs;
    assert_eq!(
        all.iter().map(|j| j.id.as_str()).collect::<Vec<_>>(),
        [job.id.as_str()],
        "exactly one job"
    );
}

fn admin_cli(c: &Coordinator, args: &[&str]) -> std::process::Output {
    Command::new(bin("drover-coordinator"))
        .arg("admin")
        .args(args)
        .args(["--database", &c.database, "--json"])
        .output()
        .expect("run admin")
}

/// A bootstrap with a bad email creates nothing, so the same name can be
/// bootstrapped again with a good one.
#[tokio::test]
async fn a_failed_bootstrap_leaves_no_workspace_behind() {
    let c = Coordinator::start().await;
    let bad = admin_cli(
        &c,
        &[
            "bootstrap",
            "--workspace",
            "acme",
            "--email",
            "not-an-email",
        ],
    );
    assert!(!bad.status.success());
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert!(stderr.contains("invalid email"), "{stderr}");

    let admin = c.bootstrap("acme", "admin@acme.test");
    assert_eq!(admin.workspace, "acme");
    admin.client.usage().await.unwrap();
}

/// `ACME` cannot sit beside `acme`, and no workspace may be named like an
/// id; a name is found in any case.
#[tokio::test]
async fn workspace_names_ignore_case_and_never_look_like_ids() {
    let c = Coordinator::start().await;
    let admin = c.bootstrap("acme", "admin@acme.test");

    for look_alike in ["ACME", "Acme"] {
        let out = admin_cli(
            &c,
            &[
                "bootstrap",
                "--workspace",
                look_alike,
                "--email",
                "x@evil.test",
            ],
        );
        assert!(!out.status.success(), "{look_alike} was created");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("already exists"), "{stderr}");
    }
    let ws_id = admin.client.usage().await.unwrap().workspace;
    assert_eq!(ws_id, "acme");
    pair(&admin, Scope::Workspace, None, "r", &[]).await;
    let job = admin
        .client
        .submit(&script_job("self:ws", "true"))
        .await
        .unwrap();
    for like_an_id in [
        "ws_01jd0000000000000000".to_string(),
        "WS_abc".into(),
        format!("rt_{}", &job.runtime_id[3..]),
        job.id.clone(),
        "drv_token".into(),
    ] {
        let out = admin_cli(
            &c,
            &[
                "bootstrap",
                "--workspace",
                &like_an_id,
                "--email",
                "x@evil.test",
            ],
        );
        assert!(!out.status.success(), "{like_an_id} was accepted");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("not like an id"), "{stderr}");
    }

    // Found in any case, and shown as it was created.
    let bob = c.add_member("ACME", "bob@acme.test", "member");
    assert_eq!(bob.workspace, "acme");
    let via_ref = bob
        .client
        .submit(&script_job("ws:ACME:default", "true"))
        .await
        .unwrap();
    assert_eq!(via_ref.runtime_id, job.runtime_id);
}
