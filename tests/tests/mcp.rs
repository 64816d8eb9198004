//! MCP on `/mcp`: parity with REST for every human-facing operation of
//! `/openapi.json`, checked by an independent client (the official Python
//! SDK; `tests/run.sh` installs it and sets `DROVER_MCP_PYTHON`).

use std::path::Path;
use std::process::Command;

use drover_tests::fake_github;
use drover_tests::*;

/// Multi-threaded: the fake GitHub answers the coordinator while the
/// parity script runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_human_facing_operation_has_an_mcp_tool_that_does_and_refuses_the_same() {
    let python = std::env::var("DROVER_MCP_PYTHON").expect(
        "DROVER_MCP_PYTHON is not set: run tests/run.sh, which makes a venv with the MCP \
         client (pip install mcp==2.3.0) and sets it to that venv's python",
    );
    // Everything at debug: rmcp's message dumps too, were they let through.
    // The workspace GitHub App on a fake GitHub, installed on `octo`.
    let github = fake_github::GithubApp::start().await;
    let c = Coordinator::start_with(CoordinatorOptions {
        serve_args: github.serve_args(),
        env: vec![("DROVER_LOG", "debug".into())],
        ..CoordinatorOptions::default()
    })
    .await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    // `ci-0` … `ci-39`: the repositories the script links for CI.
    let ci: Vec<String> = (0..40).map(|i| format!("ci-{i}")).collect();
    let mut repos = vec!["hello", "world"];
    repos.extend(ci.iter().map(String::as_str));
    let octo = github.com.install("octo", "User", &repos);
    fake_github::link(&c.url, &admin, &github.com, None, octo).await;
    let member = c.add_member("acme", "dev@acme.test", "member");
    let other = c.bootstrap("globex", "root@globex.test");
    // A runner on the workspace's default pool, so jobs run.
    let join = ws_join_token(&admin, "default").await;
    let state = TempDir::new("state");
    let _runner = RunnerProcess::join(&c.url, "self:ws", &join.token, 1, state.path(), &[]);
    c.wait_for_waiting(1).await;

    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("mcp/parity.py");
    let secrets_file = state.path().join("secrets.json");
    let (url, secrets_out) = (c.url.clone(), secrets_file.clone());
    let out = tokio::task::spawn_blocking(move || {
        Command::new(python)
            .arg(script)
            .env("DROVER_URL", url)
            .env("SECRETS_OUT", secrets_out)
            .env("ADMIN_TOKEN", &admin.token)
            .env("MEMBER_TOKEN", &member.token)
            .env("OTHER_TOKEN", &other.token)
            .output()
            .expect("run the MCP parity script")
    })
    .await
    .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    println!("{stdout}");
    assert!(out.status.success(), "parity failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains("parity: every human-facing operation"));

    // Tool arguments and answers never reach the log, at debug level too.
    let secrets: Vec<String> =
        serde_json::from_slice(&std::fs::read(&secrets_file).unwrap()).unwrap();
    assert!(secrets.len() > 10, "{secrets:?}");
    let log = c.log_text();
    for secret in &secrets {
        assert!(
            !log.contains(secret.as_str()),
            "a secret from an MCP answer is in the log"
        );
    }
}

/// An MCP `initialize` call on `/mcp` with `token`, and `origin` if given:
/// the status and the JSON body.
async fn initialize(url: &str, token: &str, origin: Option<&str>) -> (u16, serde_json::Value) {
    let mut req = reqwest::Client::new()
        .post(format!("{url}/mcp"))
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .json(&serde_json::json!({
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": { "protocolVersion": "2025-06-18", "capabilities": {},
                        "clientInfo": { "name": "origin-test", "version": "1" } },
        }));
    if let Some(origin) = origin {
        req = req.header("origin", origin);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap();
    let body = serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text));
    (status, body)
}

/// A web page of another site cannot drive the tools, even with a token it
/// got hold of: a foreign `Origin` is refused before the token is looked
/// at. The coordinator's own origin (its public URL's, whatever address it
/// is reached at) and clients that send no `Origin` are served.
#[tokio::test]
async fn mcp_refuses_a_foreign_origin_and_serves_its_own_and_none() {
    let c = Coordinator::start_with(CoordinatorOptions {
        serve_args: vec!["--public-url".into(), "https://drover.example.test/".into()],
        ..CoordinatorOptions::default()
    })
    .await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    let loopback = c.url.clone();
    for foreign in [
        "https://evil.example",
        "null",
        "http://drover.example.test",
        "https://drover.example.test:8443",
        "https://drover.example.test.evil.example",
        loopback.as_str(),
    ] {
        for token in [admin.token.as_str(), "drv_not_a_token"] {
            let (status, body) = initialize(&c.url, token, Some(foreign)).await;
            assert_eq!(status, 403, "{foreign}: {body}");
            assert_eq!(
                body["error"]["code"], "FORBIDDEN_ORIGIN",
                "{foreign}: {body}"
            );
        }
    }
    for own in [
        Some("https://drover.example.test"),
        Some("https://DROVER.example.test:443"),
        None,
    ] {
        let (status, body) = initialize(&c.url, &admin.token, own).await;
        assert_eq!(status, 200, "{own:?}: {body}");
        assert_eq!(body["result"]["serverInfo"]["name"], "drover", "{body}");
    }
    // No Origin still needs a token.
    let (status, _) = initialize(&c.url, "drv_not_a_token", None).await;
    assert_eq!(status, 401);
}
