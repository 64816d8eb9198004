//! CI links and CI without stored secrets: a linked repository's
//! GitHub Actions OIDC token is a CI principal of the workspace. The fake
//! GitHub (`drover_tests::fake_github`) plays the OIDC issuer, its JWKS and
//! the Actions runtime's token endpoint; the rendered workflow is checked
//! against GitHub's published workflow schema (check-jsonschema) and its
//! step is run as GitHub would run it.

use std::path::PathBuf;
use std::process::Command;

use drover_tests::fake_github::{self, FakeGithub, GithubApp, OidcClaims};
use drover_tests::runner_core::client::{Client, ClientError, Scope};
use drover_tests::runner_core::wire::{self, ErrorCode, JobState};
use drover_tests::*;

struct World {
    com: FakeGithub,
    c: Coordinator,
    admin: Member,
    /// The id GitHub gave `octo/hello`.
    hello_id: i64,
    _runner: RunnerProcess,
    _app: GithubApp,
}

/// A coordinator with the App and the fake OIDC issuer; workspace `acme`
/// with one runner on `self:ws`, the App installed on `octo` (`hello`,
/// `site`) and linked, and `octo/hello` linked for CI.
async fn world() -> World {
    let app = GithubApp::start().await;
    let c = Coordinator::start_with(CoordinatorOptions {
        serve_args: app.serve_args(),
        ..CoordinatorOptions::default()
    })
    .await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    let build = pair(&admin, Scope::Workspace, None, "build-1", &[]).await;
    let runner = RunnerProcess::paired(&c.url, &build.token, &[]);
    c.wait_for_waiting(1).await;
    let installation = app.com.install("octo", "User", &["hello", "site"]);
    fake_github::link(&c.url, &admin, &app.com, None, installation).await;
    let link = admin
        .client
        .set_ci_link(&wire::CiLinkRequest {
            repository: "Octo/Hello".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    let hello_id = app.com.repo_id("octo/hello");
    let got = (
        link.repository,
        link.host,
        link.principal,
        link.repository_id,
    );
    let want = ("octo/hello", "github.com", "ci:octo/hello", Some(hello_id));
    assert_eq!(got, (want.0.into(), want.1.into(), want.2.into(), want.3));
    World {
        com: app.com.clone(),
        c,
        admin,
        hello_id,
        _runner: runner,
        _app: app,
    }
}

impl World {
    /// Claims as GitHub Actions would issue them to `repository`'s
    /// workflow, for this coordinator.
    fn claims(&self, repository: &str, id: i64) -> OidcClaims {
        OidcClaims::new(&self.com.oidc_issuer(), repository, id, &self.c.url)
    }

    /// `octo/hello`'s claims: a push to main.
    fn hello(&self) -> OidcClaims {
        self.claims("octo/hello", self.hello_id)
    }

    fn token(&self, claims: &OidcClaims) -> String {
        self.com.oidc_token(claims, None)
    }

    fn ci(&self, token: &str) -> Client {
        self.c.client(token)
    }
}

/// The refusal of a call: (code, message).
fn refusal<T: std::fmt::Debug>(r: Result<T, ClientError>) -> (ErrorCode, String) {
    match r {
        Err(ClientError::Api { code, message, .. }) => (code, message),
        other => panic!("expected an API error, got {other:?}"),
    }
}

#[tokio::test]
async fn a_linked_repository_submits_to_workspace_pools_with_its_oidc_token() {
    let w = world().await;
    let ci = w.ci(&w.token(&w.hello()));
    let job = ci
        .submit(&script_job("self:ws", "echo from-ci; exit 3"))
        .await
        .unwrap();
    assert_eq!(job.submitted_by, "ci:octo/hello");
    let done = wait_done(&ci, &job.id).await;
    assert_eq!((done.state, done.exit_code), (JobState::Failed, Some(3)));
    let provenance = done.provenance.expect("provenance");
    assert!(provenance.by.starts_with("ws:"), "{provenance:?}");
    let mut logs = String::new();
    ci.follow_logs(&job.id, |b| logs.push_str(&String::from_utf8_lossy(b)))
        .await
        .unwrap();
    assert!(logs.contains("from-ci"), "{logs}");

    // The workspace pays: the job is on the workspace's usage, by its principal.
    let usage = w.admin.client.usage().await.unwrap();
    assert_eq!(usage.jobs_charged, 1, "{usage:?}");
    // The admin sees the job, submitted by the CI principal.
    let seen = w.admin.client.job(&job.id).await.unwrap();
    assert_eq!(seen.submitted_by, "ci:octo/hello");

    // A CI principal never targets a member's personal pool.
    let (code, message) = refusal(ci.submit(&script_job("self", "true")).await);
    assert_eq!(code, ErrorCode::Forbidden, "{message}");
    assert!(message.contains("personal"), "{message}");
    // Nor does anything but jobs.
    assert_eq!(
        code_of(ci.runtimes(Scope::Workspace).await),
        ErrorCode::Forbidden
    );
    assert_eq!(code_of(ci.ci_links().await), ErrorCode::Forbidden);

    // (Key rotation and the JWKS refetch limit: tests/tests/ci_links.rs.)
}

fn code_of<T: std::fmt::Debug>(r: Result<T, ClientError>) -> ErrorCode {
    refusal(r).0
}

#[tokio::test]
async fn oidc_tokens_are_refused_unless_issuer_audience_expiry_and_repository_hold() {
    let w = world().await;
    let submit = |token: String| {
        let client = w.ci(&token);
        async move { refusal(client.submit(&script_job("self:ws", "true")).await) }
    };
    let expect_401 = |(code, message): (ErrorCode, String), says: &str| {
        assert_eq!(code, ErrorCode::Unauthorized, "{message}");
        assert!(message.contains(says), "{message:?} should say {says:?}");
    };

    // An unlinked repository.
    expect_401(
        submit(w.token(&w.claims("octo/other", 9))).await,
        "not linked",
    );
    // The wrong audience.
    let mut claims = w.hello();
    claims.0["aud"] = "https://elsewhere.test".into();
    expect_401(submit(w.token(&claims)).await, "aud");
    // Expired (beyond the minute of leeway).
    let mut claims = w.hello();
    let now = claims.0["iat"].as_i64().unwrap();
    claims.0["exp"] = (now - 120).into();
    expect_401(submit(w.token(&claims)).await, "expired");
    // Another issuer.
    let mut claims = w.hello();
    claims.0["iss"] = "https://token.actions.evil.test".into();
    expect_401(submit(w.token(&claims)).await, "iss");
    // A claim changed after signing.
    let good = w.token(&w.hello());
    let forged = {
        use base64::Engine as _;
        let engine = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let parts: Vec<&str> = good.split('.').collect();
        let mut body: serde_json::Value =
            serde_json::from_slice(&engine.decode(parts[1]).unwrap()).unwrap();
        body["repository"] = "octo/hello-evil".into();
        format!(
            "{}.{}.{}",
            parts[0],
            engine.encode(body.to_string()),
            parts[2]
        )
    };
    expect_401(submit(forged).await, "signature");
    // The link pinned the repository's id when it was made: the same name
    // for another repository (deleted and made again) is refused, even as
    // the first token the coordinator sees ...
    expect_401(
        submit(w.token(&w.claims("octo/hello", w.hello_id + 1))).await,
        "id changed",
    );
    // ... and the linked one is taken.
    w.ci(&good)
        .submit(&script_job("self:ws", "true"))
        .await
        .unwrap();
    // Unlinked: the same token stops working at once.
    w.admin
        .client
        .remove_ci_link("octo/hello", None)
        .await
        .unwrap();
    expect_401(submit(good).await, "not linked");
    assert_eq!(
        code_of(w.admin.client.remove_ci_link("octo/hello", None).await),
        ErrorCode::NotFound
    );
    // None of it reached the log.
    assert!(!w.c.log_text().contains("eyJ"), "a token in the log");
}

#[tokio::test]
async fn links_are_for_admins_validated_and_one_workspace_per_repository() {
    let w = world().await;
    let bob = w.c.add_member("acme", "bob@acme.test", "member");
    let req = |repository: &str| wire::CiLinkRequest {
        repository: repository.into(),
        ..Default::default()
    };
    assert_eq!(
        code_of(bob.client.set_ci_link(&req("octo/site")).await),
        ErrorCode::Forbidden
    );
    assert_eq!(code_of(bob.client.ci_links().await), ErrorCode::Forbidden);
    assert_eq!(
        code_of(bob.client.ci_workflow("octo/hello", None).await),
        ErrorCode::Forbidden
    );

    for (bad, says) in [
        (req("no-slash"), "owner/name"),
        (req("-octo/x"), "owner/name"),
        (
            wire::CiLinkRequest {
                host: Some("ghe.unknown".into()),
                ..req("octo/x")
            },
            "unknown GitHub host",
        ),
        (
            wire::CiLinkRequest {
                runs_on: Some(vec![]),
                ..req("octo/x")
            },
            "runsOn",
        ),
        (
            wire::CiLinkRequest {
                runs_on: Some(vec!["has space".into()]),
                ..req("octo/x")
            },
            "runsOn label",
        ),
        (
            wire::CiLinkRequest {
                runtime: Some("self".into()),
                ..req("octo/x")
            },
            "personal pool",
        ),
        (
            wire::CiLinkRequest {
                runtime: Some("nonsense:ref".into()),
                ..req("octo/x")
            },
            "",
        ),
    ] {
        let (code, message) = refusal(w.admin.client.set_ci_link(&bad).await);
        assert_eq!(code, ErrorCode::BadRequest, "{bad:?}: {message}");
        assert!(message.contains(says), "{message:?} should say {says:?}");
    }
    assert_eq!(
        code_of(w.admin.client.ci_workflow("octo/unlinked", None).await),
        ErrorCode::NotFound
    );

    // Linking again updates the link.
    let updated = w
        .admin
        .client
        .set_ci_link(&wire::CiLinkRequest {
            runs_on: Some(vec!["self-hosted".into(), "drover-abc".into()]),
            runtime: Some("self:ws:builders".into()),
            ..req("octo/hello")
        })
        .await
        .unwrap();
    assert_eq!(updated.runtime.as_deref(), Some("self:ws:builders"));
    let links = w.admin.client.ci_links().await.unwrap().links;
    assert_eq!(links, vec![updated]);

    // Another workspace cannot take a linked repository, nor see the link.
    let other = w.c.bootstrap("globex", "admin@globex.test");
    assert_eq!(
        code_of(other.client.set_ci_link(&req("octo/hello")).await),
        ErrorCode::Conflict
    );
    assert!(other.client.ci_links().await.unwrap().links.is_empty());
    assert_eq!(
        code_of(other.client.ci_workflow("octo/hello", None).await),
        ErrorCode::NotFound
    );
    assert_eq!(
        code_of(other.client.remove_ci_link("octo/hello", None).await),
        ErrorCode::NotFound
    );

    // The CI principal is not a member: the member list does not show it.
    let members = w.admin.client.members().await.unwrap();
    assert!(
        members.members.iter().all(|m| !m.id.starts_with("ci:")),
        "{members:?}"
    );
    // Linking and unlinking are audited.
    let audit = w.admin.client.audit(&Default::default()).await.unwrap();
    let actions: Vec<&str> = audit.events.iter().map(|e| e.action.as_str()).collect();
    assert!(actions.contains(&"ci_link.set"), "{actions:?}");
}

/// `DROVER_CHECK_JSONSCHEMA`: check-jsonschema from PyPI, which tests/run.sh
/// installs into target/mcp-venv.
fn check_jsonschema() -> PathBuf {
    let path = std::env::var_os("DROVER_CHECK_JSONSCHEMA").unwrap_or_else(|| {
        panic!(
            "DROVER_CHECK_JSONSCHEMA is not set: run the tests with tests/run.sh, which installs \
             check-jsonschema (PyPI) into target/mcp-venv and sets it"
        )
    });
    PathBuf::from(path)
}

/// Whether `check-jsonschema --builtin-schema vendor.github-workflows`
/// accepts `yaml`; its output.
fn valid_workflow(yaml: &str) -> (bool, String) {
    let dir = TempDir::new("workflow");
    let path = dir.path().join("drover.yml");
    std::fs::write(&path, yaml).unwrap();
    let out = Command::new(check_jsonschema())
        .args(["--builtin-schema", "vendor.github-workflows"])
        .arg(&path)
        .output()
        .expect("run check-jsonschema");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// The value of `KEY: '…'` in the workflow.
fn yaml_value(yaml: &str, key: &str) -> String {
    let line = yaml
        .lines()
        .find_map(|l| l.trim().strip_prefix(&format!("{key}: ")))
        .unwrap_or_else(|| panic!("no {key} in\n{yaml}"));
    line.trim_matches('\'').replace("''", "'")
}

/// The `run: |` block of the workflow's step, as the shell gets it.
fn run_block(yaml: &str) -> String {
    let mut lines = yaml.lines().skip_while(|l| l.trim() != "run: |").skip(1);
    let first = lines.next().expect("a run block");
    let indent = first.len() - first.trim_start().len();
    std::iter::once(first)
        .chain(lines.take_while(|l| l.len() > indent && l[..indent].trim().is_empty()))
        .map(|l| format!("{}\n", &l[indent..]))
        .collect()
}

/// Multi-threaded: the workflow's step runs as a blocking child process
/// while the fake issuer, a task on this runtime, hands it its token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rendered_workflow_is_valid_and_its_step_runs_the_job() {
    let w = world().await;
    let admin = &w.admin;
    stdout_ok(&w.c.drover(
        &admin.token,
        &[
            "ci",
            "link",
            "octo/hello",
            "--runs-on",
            "self-hosted,drover-build",
            "--runtime",
            "self:ws",
        ],
    ));
    let listed = stdout_ok(&w.c.drover(&admin.token, &["ci", "links"]));
    assert!(
        listed.contains("octo/hello") && listed.contains("self-hosted,drover-build"),
        "{listed}"
    );
    let yaml = stdout_ok(&w.c.drover(&admin.token, &["ci", "workflow", "octo/hello"]));
    assert_eq!(
        yaml,
        admin.client.ci_workflow("octo/hello", None).await.unwrap()
    );
    assert!(
        yaml.contains("runs-on: ['self-hosted', 'drover-build']"),
        "{yaml}"
    );
    assert!(yaml.contains("id-token: write"), "{yaml}");

    // GitHub's published workflow schema accepts it, and would refuse it
    // without its runs-on: the check can fail.
    let (ok, why) = valid_workflow(&yaml);
    assert!(ok, "check-jsonschema refused the workflow:\n{why}\n{yaml}");
    let broken: String = yaml
        .lines()
        .filter(|l| !l.trim_start().starts_with("runs-on:"))
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(!valid_workflow(&broken).0, "the schema check cannot fail");

    // Its step, run as GitHub runs it (`sh -e`), with the workflow's env,
    // the job's commit, and the Actions runtime's OIDC token endpoint.
    let (request_url, request_token) = w.com.actions_job("octo/hello", w.hello_id);
    let bin_dir = bin("drover").parent().unwrap().to_owned();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let step = run_block(&yaml);
    assert!(step.contains("drover submit --github-oidc"), "{step}");
    let run = |command: &'static str| {
        let (step, path) = (step.clone(), path.clone());
        let (url, audience) = (
            yaml_value(&yaml, "DROVER_URL"),
            yaml_value(&yaml, "DROVER_OIDC_AUDIENCE"),
        );
        let (request_url, request_token) = (request_url.clone(), request_token.clone());
        tokio::task::spawn_blocking(move || {
            Command::new("sh")
                .args(["-e", "-c", &step])
                .env_clear()
                .env("PATH", path)
                .env("DROVER_URL", url)
                .env("DROVER_OIDC_AUDIENCE", audience)
                .env("DROVER_COMMAND", command)
                .env("GITHUB_REPOSITORY", "octo/hello")
                .env("GITHUB_SHA", "0123abc")
                .env("GITHUB_REF", "refs/heads/main")
                .env("ACTIONS_ID_TOKEN_REQUEST_URL", request_url)
                .env("ACTIONS_ID_TOKEN_REQUEST_TOKEN", request_token)
                .output()
                .unwrap()
        })
    };
    let out = run("echo \"built $GITHUB_REPOSITORY at $GITHUB_SHA\"")
        .await
        .unwrap();
    let stdout = stdout_ok(&out);
    assert!(stdout.contains("built octo/hello at 0123abc"), "{stdout}");
    // The job's exit code is the step's.
    let out = run("echo failing; exit 7").await.unwrap();
    assert_eq!(out.status.code(), Some(7), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("failing"));

    // Without the Actions runtime's variables, the CLI says what is missing.
    let out = Command::new(bin("drover"))
        .args([
            "submit",
            "--github-oidc",
            "--runtime",
            "self:ws",
            "--",
            "true",
        ])
        .env("DROVER_URL", &w.c.url)
        .env_remove("ACTIONS_ID_TOKEN_REQUEST_URL")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("ACTIONS_ID_TOKEN_REQUEST_URL"),
        "{out:?}"
    );

    stdout_ok(&w.c.drover(&admin.token, &["ci", "unlink", "octo/hello"]));
    let out = run("true").await.unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not linked"),
        "{out:?}"
    );
}
