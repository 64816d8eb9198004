//! Billing (SPEC §2 rule 8), the roster and pool endpoints, the OpenAPI
//! document and docs page, and the `drover` CLI end to end.

use std::collections::BTreeSet;
use std::process::Command;

use drover_tests::runner_core::client::{RunnerListing, Scope};
use drover_tests::runner_core::wire::{ErrorCode, JobState};
use drover_tests::*;

#[tokio::test]
async fn the_workspace_pays_for_workspace_runners_members_pay_for_their_own() {
    let c = Coordinator::start().await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    let bob = c.add_member("acme", "bob@acme.test", "member");
    let ws = pair(&admin, Scope::Workspace, None, "ws", &[]).await;
    let mine = pair(&bob, Scope::Me, None, "laptop", &[]).await;
    let _a = RunnerProcess::paired(&c.url, &ws.token, &[]);
    let _b = RunnerProcess::paired(&c.url, &mine.token, &[]);

    let on_ws = bob
        .client
        .submit(&script_job("self:ws", "sleep 0.05"))
        .await
        .unwrap();
    let on_laptop = bob
        .client
        .submit(&script_job("self", "sleep 0.05"))
        .await
        .unwrap();
    assert_eq!(
        wait_done(&bob.client, &on_ws.id)
            .await
            .provenance
            .unwrap()
            .by,
        "ws:acme"
    );
    assert_eq!(
        wait_done(&bob.client, &on_laptop.id)
            .await
            .provenance
            .unwrap()
            .by,
        format!("user:{}", bob.subject)
    );
    let usage = admin.client.usage().await.unwrap();
    assert_eq!((usage.jobs_charged, usage.jobs_own_pays), (1, 1));
    assert!(
        usage.charged_ms >= 50 && usage.own_pays_ms >= 50,
        "{usage:?}"
    );

    // The budget is enforced at submit, for workspace pools only.
    let set = admin.client.set_budget(Some(0)).await.unwrap();
    assert_eq!(set.monthly_minutes, Some(0));
    assert_eq!(
        code(bob.client.submit(&script_job("self:ws", "true")).await),
        ErrorCode::BudgetExceeded
    );
    let own = bob
        .client
        .submit(&script_job("self", "true"))
        .await
        .unwrap();
    assert_eq!(
        wait_done(&bob.client, &own.id).await.state,
        JobState::Succeeded,
        "own-pays never touches the budget"
    );
    admin.client.set_budget(Some(60)).await.unwrap();
    bob.client
        .submit(&script_job("self:ws", "true"))
        .await
        .unwrap();
    admin.client.set_budget(None).await.unwrap();
    assert_eq!(admin.client.usage().await.unwrap().monthly_minutes, None);
}

#[tokio::test]
async fn roster_lists_workspace_and_personal_runners_with_badges() {
    let c = Coordinator::start().await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    let bob = c.add_member("acme", "bob@acme.test", "member");
    let other = c.bootstrap("globex", "admin@globex.test");
    pair(&other, Scope::Workspace, None, "theirs", &[]).await;
    admin
        .client
        .create_runtime(Scope::Workspace, "gpu")
        .await
        .unwrap();
    let ws = pair(
        &admin,
        Scope::Workspace,
        Some("gpu"),
        "big-box",
        &["gpu=a100"],
    )
    .await;
    let laptop = pair(&bob, Scope::Me, None, "bobs-laptop", &[]).await;
    let _r = RunnerProcess::paired(&c.url, &ws.token, &[]);
    let dir = TempDir::new("roster");
    let go = dir.path().join("go");
    let job = bob
        .client
        .submit(&script_job(
            "self:ws:gpu",
            &format!("while [ ! -f {} ]; do sleep 0.02; done", go.display()),
        ))
        .await
        .unwrap();
    wait_state(&bob.client, &job.id, JobState::Running).await;

    let roster = bob
        .client
        .runners(RunnerListing::Roster)
        .await
        .unwrap()
        .runners;
    let ids: BTreeSet<_> = roster.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(
        ids,
        BTreeSet::from([ws.runner.id.as_str(), laptop.runner.id.as_str()]),
        "this workspace only"
    );
    let big = roster.iter().find(|r| r.id == ws.runner.id).unwrap();
    assert!(big.online);
    assert_eq!(
        (big.owner.as_str(), big.runtime_name.as_str()),
        ("ws:acme", "gpu")
    );
    assert!(
        big.capabilities.contains(&"gpu=a100".to_owned())
            && big.capabilities.contains(&"os=linux".to_owned())
    );
    assert_eq!(big.current_jobs, std::slice::from_ref(&job.id));
    let bobs = roster.iter().find(|r| r.id == laptop.runner.id).unwrap();
    assert!(!bobs.online && bobs.last_seen_at.is_none());
    assert_eq!(bobs.owner, format!("user:{}", bob.subject));

    let owned = admin
        .client
        .runners(RunnerListing::WorkspaceOwned)
        .await
        .unwrap()
        .runners;
    assert_eq!(
        owned.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
        [ws.runner.id.as_str()]
    );
    let mine = bob
        .client
        .runners(RunnerListing::Mine)
        .await
        .unwrap()
        .runners;
    assert_eq!(
        mine.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
        [laptop.runner.id.as_str()]
    );
    assert!(
        admin
            .client
            .runners(RunnerListing::Mine)
            .await
            .unwrap()
            .runners
            .is_empty()
    );

    let pools = admin
        .client
        .runtimes(Scope::Workspace)
        .await
        .unwrap()
        .runtimes;
    let gpu = pools.iter().find(|p| p.name == "gpu").unwrap();
    assert_eq!(
        (gpu.reference.as_str(), gpu.runners, gpu.owner.as_str()),
        ("ws:acme:gpu", 1, "ws:acme")
    );
    let bobs_pools = bob.client.runtimes(Scope::Me).await.unwrap().runtimes;
    assert_eq!(
        bobs_pools[0].reference,
        format!("self:{}:default", bob.subject)
    );

    bob.client
        .revoke_runner(Scope::Me, &laptop.runner.id)
        .await
        .unwrap();
    assert_eq!(
        code(bob.client.revoke_runner(Scope::Me, &ws.runner.id).await),
        ErrorCode::NotFound,
        "not bob's to revoke"
    );
    std::fs::write(&go, "").unwrap();
    wait_done(&bob.client, &job.id).await;
}

#[tokio::test]
async fn a_member_joins_runners_to_a_personal_pool_with_a_join_token() {
    let c = Coordinator::start().await;
    c.bootstrap("acme", "admin@acme.test");
    let bob = c.add_member("acme", "bob@acme.test", "member");
    bob.client
        .create_runtime(Scope::Me, "laptop")
        .await
        .unwrap();
    let join = bob.client.join_token(Scope::Me, "laptop").await.unwrap();
    assert_eq!(
        join.runtime.reference,
        format!("self:{}:laptop", bob.subject)
    );
    let state = TempDir::new("state");
    let mut runners = RunnerProcess::join(
        &c.url,
        "self:laptop",
        &join.token,
        2,
        state.path(),
        &["--labels", "fast"],
    );
    c.wait_for_waiting(2).await;
    let my_runners = || async {
        bob.client
            .runners(RunnerListing::Mine)
            .await
            .unwrap()
            .runners
            .into_iter()
            .map(|r| r.id)
            .collect::<BTreeSet<String>>()
    };
    let first = my_runners().await;
    assert_eq!(first.len(), 2);

    // Credentials are kept 0600 and reused on restart: same runners, no new joins.
    for entry in std::fs::read_dir(state.path().join("runners")).unwrap() {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = entry.unwrap().metadata().unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
    runners.sigterm();
    assert!(runners.wait_exit().await.success());
    runners.restart();
    c.wait_for_waiting(2).await;
    let again = my_runners().await;
    assert_eq!(first, again);

    let job = bob
        .client
        .submit(&drover_tests::runner_core::wire::SubmitJob {
            requires: vec!["fast".into()],
            ..script_job("self:laptop", "true")
        })
        .await
        .unwrap();
    let done = wait_done(&bob.client, &job.id).await;
    assert!(first.contains(&done.provenance.unwrap().ran_by));
}

#[tokio::test]
async fn openapi_documents_every_route_and_the_docs_page_works_offline() {
    let c = Coordinator::start().await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    let http = reqwest::Client::new();
    let spec: serde_json::Value = http
        .get(format!("{}/openapi.json", c.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(spec["openapi"], "3.1.0");
    let paths = spec["paths"].as_object().unwrap();
    assert!(paths.len() >= 20);
    for (path, item) in paths {
        let concrete = path.replace("{id}", "x").replace("{lease}", "x");
        for method in item.as_object().unwrap().keys() {
            let resp = http
                .request(
                    method.to_uppercase().parse().unwrap(),
                    format!("{}{concrete}", c.url),
                )
                .bearer_auth(&admin.token)
                .send()
                .await
                .unwrap();
            let status = resp.status();
            let text = resp.text().await.unwrap();
            assert!(
                !text.contains("no such route"),
                "{method} {path} is documented but not routed"
            );
            assert!(
                status != 405,
                "{method} {path} is documented but not routed for {method}"
            );
            assert!(status.as_u16() < 500, "{method} {path}: {status} {text}");
        }
    }
    let docs = http
        .get(format!("{}/docs", c.url))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        docs.contains("/openapi.json") && !docs.contains("https://"),
        "the docs page loads nothing from the network"
    );
}

#[tokio::test]
async fn the_cli_submits_waits_shows_lists_and_cancels() {
    let c = Coordinator::start().await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    let join = ws_join_token(&admin, "default").await;
    let state = TempDir::new("state");
    let _r = RunnerProcess::join(&c.url, "self:ws", &join.token, 2, state.path(), &[]);
    c.wait_for_waiting(2).await;

    let out = tokio::task::spawn_blocking({
        let (url, token) = (c.url.clone(), admin.token.clone());
        move || {
            Command::new(bin("drover"))
                .args([
                    "submit",
                    "--runtime",
                    "self:ws",
                    "--env",
                    "WHO=cli",
                    "--wait",
                    "--",
                    "sh",
                    "-c",
                    "echo hello $WHO; exit 3",
                ])
                .env("DROVER_URL", url)
                .env("DROVER_TOKEN", token)
                .output()
                .unwrap()
        }
    })
    .await
    .unwrap();
    assert_eq!(out.status.code(), Some(3), "exits with the job's exit code");
    let stdout = String::from_utf8(out.stdout).unwrap();
    let id = stdout.lines().next().unwrap().to_owned();
    assert!(id.starts_with("job_"));
    assert!(stdout.contains("hello cli"), "{stdout}");

    let table = stdout_ok(&c.drover(&admin.token, &["jobs", "show", &id]));
    assert!(
        table.contains("failed") && table.contains("ws:acme") && table.contains(&id),
        "{table}"
    );
    // Where the time went: in the queue, then running.
    assert!(
        table.contains("in the queue)") && table.contains("(ran "),
        "{table}"
    );
    let show = c.drover(&admin.token, &["jobs", "show", &id, "--json"]);
    let job: serde_json::Value = serde_json::from_slice(&show.stdout).unwrap();
    assert_eq!(
        (job["state"].as_str(), job["exitCode"].as_i64()),
        (Some("failed"), Some(3))
    );
    assert_eq!(job["provenance"]["by"], "ws:acme");
    assert_eq!(
        String::from_utf8(c.drover(&admin.token, &["jobs", "logs", &id]).stdout).unwrap(),
        "hello cli\n"
    );
    let list = String::from_utf8(c.drover(&admin.token, &["jobs", "list"]).stdout).unwrap();
    assert!(list.contains(&id) && list.contains("failed"));
    let roster = String::from_utf8(c.drover(&admin.token, &["runners", "list"]).stdout).unwrap();
    let lines: Vec<&str> = roster.lines().collect();
    assert_eq!(lines.len(), 3, "a header and two runners:\n{roster}");
    assert!(
        lines[0].starts_with("ID ") && lines[0].contains("STATUS"),
        "{roster}"
    );
    assert!(roster.contains("online"));
    let json: serde_json::Value = serde_json::from_slice(
        &c.drover(&admin.token, &["runners", "list", "--json"])
            .stdout,
    )
    .unwrap();
    assert_eq!(json["runners"].as_array().unwrap().len(), 2);
    let json: serde_json::Value =
        serde_json::from_slice(&c.drover(&admin.token, &["jobs", "list", "--json"]).stdout)
            .unwrap();
    assert!(
        json["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .any(|j| j["id"] == id.as_str())
    );

    let queued = c.drover(
        &admin.token,
        &[
            "submit",
            "--runtime",
            "self:ws",
            "--requires",
            "gpu",
            "--",
            "true",
        ],
    );
    let queued_id = String::from_utf8(queued.stdout).unwrap().trim().to_owned();
    let cancel = c.drover(&admin.token, &["jobs", "cancel", &queued_id]);
    assert!(
        String::from_utf8(cancel.stdout)
            .unwrap()
            .contains("cancelled")
    );

    let bad = c.drover(
        &admin.token,
        &["submit", "--runtime", "ws:other:x", "--", "true"],
    );
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8(bad.stderr).unwrap().contains("NotFound"));
    let no_token = Command::new(bin("drover"))
        .args(["jobs", "list"])
        .env("DROVER_URL", &c.url)
        .env_remove("DROVER_TOKEN")
        .output()
        .unwrap();
    assert!(
        String::from_utf8(no_token.stderr)
            .unwrap()
            .contains("no token")
    );
}

#[tokio::test]
async fn every_runner_announces_its_sandbox_and_the_roster_shows_the_unsandboxed() {
    let c = Coordinator::start().await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    let join = ws_join_token(&admin, "default").await;
    let (bare, boxed) = (TempDir::new("state"), TempDir::new("state"));
    // A label cannot claim a sandbox the runner does not have.
    let _bare = RunnerProcess::join(
        &c.url,
        "self:ws",
        &join.token,
        1,
        bare.path(),
        &["--name", "bare", "--labels", "sandbox=bwrap"],
    );
    let _boxed = RunnerProcess::join(
        &c.url,
        "self:ws",
        &join.token,
        1,
        boxed.path(),
        &["--name", "boxed", "--sandbox", "bwrap"],
    );
    c.wait_for_waiting(2).await;
    let roster = admin
        .client
        .runners(RunnerListing::Roster)
        .await
        .unwrap()
        .runners;
    let sandboxes = |prefix: &str| {
        let r = roster.iter().find(|r| r.name.starts_with(prefix)).unwrap();
        r.capabilities
            .iter()
            .filter(|c| c.starts_with("sandbox"))
            .cloned()
            .collect::<Vec<_>>()
    };
    assert_eq!(sandboxes("bare"), ["sandbox=none"]);
    assert_eq!(sandboxes("boxed"), ["sandbox=bwrap"]);
    let table = stdout_ok(&c.drover(&admin.token, &["runners", "list"]));
    let line = |prefix: &str| {
        table
            .lines()
            .find(|l| l.contains(&format!(" {prefix}-0 ")))
            .unwrap()
            .to_owned()
    };
    assert!(table.lines().next().unwrap().contains("SANDBOX"), "{table}");
    assert!(line("bare").contains(" unsandboxed "), "{table}");
    assert!(line("boxed").contains(" sandboxed "), "{table}");
}
