//! GitHub Actions co-registration through the workspace's GitHub App,
//! against a fake GitHub (`drover_tests::fake_github`): linking
//! installations, repository- and organization-level registration, GHE hosts,
//! the install script (checked with `sh -n`, `bash -n`, shellcheck and a dry
//! run), token caching and refresh, and revocation removing the GitHub runner.
//!
//! Over 500 lines: one test per case the issue names, each a whole flow
//! against the fake GitHub, sharing this file's setup.

use std::process::Command;

use drover_tests::fake_github::{self, FakeGithub, GHE, GithubApp};
use drover_tests::runner_core::client::RunnerListing;
use drover_tests::runner_core::wire::{self, ErrorCode};
use drover_tests::*;

struct World {
    com: FakeGithub,
    ghe: FakeGithub,
    c: Coordinator,
    admin: Member,
    _app: GithubApp,
}

/// A coordinator configured with the App, on a fake github.com and a fake
/// GHE host; a workspace and its admin.
async fn world() -> World {
    let app = GithubApp::start().await;
    let c = Coordinator::start_with(CoordinatorOptions {
        serve_args: app.serve_args(),
        env: vec![("DROVER_LOG", "debug".into())],
        ..CoordinatorOptions::default()
    })
    .await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    let (com, ghe) = (app.com.clone(), app.ghe.clone());
    World {
        com,
        ghe,
        c,
        admin,
        _app: app,
    }
}

async fn setup_redirect(c: &Coordinator, query: &str) -> (u16, String) {
    fake_github::setup_redirect(&c.url, query).await
}

/// The `state` in an install link.
fn state_of(link: &wire::GithubInstallLink) -> String {
    link.url
        .split_once("state=")
        .map(|(_, s)| s.to_owned())
        .unwrap_or_else(|| panic!("no state in {}", link.url))
}

async fn link(w: &World, admin: &Member, fake: &FakeGithub, host: Option<&str>, id: i64) -> String {
    fake_github::link(&w.c.url, admin, fake, host, id).await
}

/// The value of `NAME='…'` in the script.
fn script_var(script: &str, name: &str) -> String {
    let line = script
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{name}=")))
        .unwrap_or_else(|| panic!("no {name} in the script"));
    line.trim_matches('\'').to_owned()
}

/// Checks the script with real tools: POSIX `sh -n`, `bash -n`,
/// shellcheck, and a dry run; the dry run's output.
fn check_script(script: &str) -> String {
    let dir = TempDir::new("script");
    let path = dir.path().join("install.sh");
    std::fs::write(&path, script).unwrap();
    for shell in ["sh", "bash"] {
        let out = Command::new(shell).arg("-n").arg(&path).output().unwrap();
        assert!(
            out.status.success(),
            "{shell} -n: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let out = Command::new("shellcheck")
        .args(["--shell=sh", "--severity=style"])
        .arg(&path)
        .output()
        .expect(
            "shellcheck is not installed: tests/run.sh installs it (apt-get install shellcheck)",
        );
    assert!(
        out.status.success(),
        "shellcheck:\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let out = Command::new("sh")
        .arg(&path)
        .env("DROVER_DRY_RUN", "1")
        .env("DROVER_BIN", "/usr/local/bin/drover")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the dry run failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[tokio::test]
async fn repo_level_runner_from_link_to_script() {
    let w = world().await;
    let id = w
        .com
        .install("octo", "User", &["hello", "private-tools", "site"]);
    let page = link(&w, &w.admin, &w.com, None, id).await;
    assert!(page.contains("is linked to workspace acme"), "{page}");

    let list = w.admin.client.github_installations().await.unwrap();
    assert_eq!(list.installations.len(), 1);
    let i = &list.installations[0];
    assert_eq!(
        (i.host.as_str(), i.installation_id, i.account.as_str()),
        ("github.com", id, "octo")
    );

    // Repositories, paged as GitHub pages them.
    let first = w.admin.client.github_repos(1, 2).await.unwrap();
    assert_eq!(first.repos.len(), 2);
    assert_eq!(first.next_page, Some(2));
    assert_eq!(
        (first.repos[0].host.as_str(), first.repos[0].owner.as_str()),
        ("github.com", "octo")
    );
    let second = w.admin.client.github_repos(2, 2).await.unwrap();
    assert_eq!(second.repos.len(), 1);
    assert_eq!(second.next_page, None);

    let done = w
        .admin
        .client
        .github_install(&wire::GithubInstallRequest {
            repository: Some("octo/hello".into()),
            labels: vec!["gpu".into(), "GPU".into()],
            ..Default::default()
        })
        .await
        .unwrap();
    let pool = done.runner.runtime_id.clone();
    let label = format!("drover-{pool}");
    assert_eq!(done.github.url, format!("{}/octo/hello", w.com.web));
    assert_eq!(done.github.name, format!("drover-{}", done.runner.id));
    assert_eq!(
        done.github.labels,
        vec!["self-hosted".to_owned(), label.clone(), "gpu".into()]
    );
    assert_eq!(
        done.workflow_hint.runs_on,
        vec!["self-hosted".to_owned(), label.clone()]
    );
    assert_eq!(done.workflow_hint.runtime, format!("self:ws:{pool}"));

    // The installation token asked only for what registration needs.
    let mints = w.com.mints();
    assert!(
        mints.iter().any(|m| m
            == &serde_json::json!({
                "permissions": { "administration": "write" }, "repositories": ["hello"]
            })),
        "{mints:?}"
    );

    // The script's registration token works once on GitHub's side.
    let reg = script_var(&done.script, "GH_TOKEN");
    w.com
        .register_runner(
            &reg,
            "octo/hello",
            &done.github.name,
            &["self-hosted", &label],
            None,
        )
        .unwrap();
    assert_eq!(script_var(&done.script, "DROVER_RUNNER_TOKEN").len(), 56);
    let dry = check_script(&done.script);
    let config = format!(
        "./config.sh --url {}/octo/hello --token {reg} --labels self-hosted,{label},gpu --unattended --name {})",
        w.com.web, done.github.name
    );
    assert!(dry.contains(&config), "{dry}");
    assert!(
        !dry.contains("--runnergroup") && !dry.contains("--ephemeral"),
        "{dry}"
    );
    assert!(
        dry.contains("+ systemctl enable drover-runner.service")
            && dry.contains("+ systemctl restart drover-runner.service"),
        "{dry}"
    );
    // Two workers, three users: the Actions runner as drover-actions, the
    // Drover runner as root, its jobs as drover-job in a sandbox; each
    // one's credentials 0600 in a 0700 directory of its own user's.
    for line in [
        "./svc.sh install drover-actions)",
        "+ install -d -o drover-actions -m 0700 /opt/drover/actions-runner",
        "+ install -d -o root -m 0700 /opt/drover/drover-runner",
        "+ chown drover-actions /opt/drover/actions-runner/.credentials",
        "+ chmod 0600 /opt/drover/actions-runner/.credentials",
        "+ chmod 0600 /opt/drover/actions-runner/.runner",
        "would write /opt/drover/drover-runner/token (mode 0600, owner root)",
        "\nUser=root\n",
        "\nPrivateTmp=yes\n",
        " runner --token-file /opt/drover/drover-runner/token --state-dir /opt/drover/drover-runner --sandbox bwrap --job-user drover-job\n",
    ] {
        assert!(dry.contains(line), "{line:?} not in:\n{dry}");
    }
    assert!(!dry.contains("svc.sh install drover)"), "{dry}");

    // The runner is on the roster, on the workspace's default pool.
    let roster = w
        .admin
        .client
        .runners(RunnerListing::WorkspaceOwned)
        .await
        .unwrap();
    assert!(
        roster
            .runners
            .iter()
            .any(|r| r.id == done.runner.id && r.runtime_name == "default")
    );

    // No GitHub secret in the database or the log (at debug level).
    let db = String::from_utf8_lossy(&w.c.database_contents().await).into_owned();
    let log = w.c.log_text();
    for secret in w
        .com
        .registration_tokens()
        .iter()
        .chain(&w.com.access_tokens())
    {
        assert!(
            !db.contains(secret.as_str()),
            "a GitHub token is in the database"
        );
        assert!(
            !log.contains(secret.as_str()),
            "a GitHub token is in the log"
        );
    }
    assert!(!log.contains(fake_github::CLIENT_SECRET) && !db.contains(fake_github::CLIENT_SECRET));
    assert!(w.com.refusals().is_empty(), "{:?}", w.com.refusals());
}

#[tokio::test]
async fn org_level_runner_with_a_group() {
    let w = world().await;
    let id = w.com.install("acme-corp", "Organization", &["api"]);
    link(&w, &w.admin, &w.com, Some("github.com"), id).await;
    w.admin
        .client
        .create_runtime(
            drover_tests::runner_core::client::Scope::Workspace,
            "builders",
        )
        .await
        .unwrap();
    let done = w
        .admin
        .client
        .github_install(&wire::GithubInstallRequest {
            org: Some("acme-corp".into()),
            runner_group: Some("Build servers".into()),
            ephemeral: true,
            pool: Some("builders".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(done.runner.runtime_name, "builders");
    assert_eq!(done.github.url, format!("{}/acme-corp", w.com.web));
    assert!(w.com.mints().iter().any(|m| m
        == &serde_json::json!({
            "permissions": { "organization_self_hosted_runners": "write" }
        })));
    let reg = script_var(&done.script, "GH_TOKEN");
    w.com
        .register_runner(
            &reg,
            "acme-corp",
            &done.github.name,
            &["self-hosted"],
            Some("Build servers"),
        )
        .unwrap();
    let dry = check_script(&done.script);
    assert!(
        dry.contains("--runnergroup Build servers --ephemeral --unattended --name"),
        "{dry}"
    );
}

#[tokio::test]
async fn ghe_hosts_are_strict_when_named_and_a_fallback_when_not() {
    let w = world().await;
    let on_ghe = w.ghe.install("octo", "User", &["hello"]);
    link(&w, &w.admin, &w.ghe, Some(GHE), on_ghe).await;
    let req = |host: Option<&str>| wire::GithubInstallRequest {
        repository: Some("octo/hello".into()),
        host: host.map(str::to_owned),
        ..Default::default()
    };
    // No host: github.com has no installation on octo, so GHE's is used.
    let done = w.admin.client.github_install(&req(None)).await.unwrap();
    assert_eq!(
        (done.github.host.as_str(), done.github.url.clone()),
        (GHE, format!("{}/octo/hello", w.ghe.web))
    );
    // github.com named: only github.com's installation counts.
    let err = w
        .admin
        .client
        .github_install(&req(Some("github.com")))
        .await;
    assert_eq!(code(err), ErrorCode::NotFound);

    // With github.com installed too, it is preferred when no host is named.
    let on_com = w.com.install("octo", "User", &["hello"]);
    link(&w, &w.admin, &w.com, None, on_com).await;
    let done = w.admin.client.github_install(&req(None)).await.unwrap();
    assert_eq!(done.github.host, "github.com");
    let done = w
        .admin
        .client
        .github_install(&req(Some(GHE)))
        .await
        .unwrap();
    assert_eq!(done.github.host, GHE);
    let repos = w.admin.client.github_repos(1, 100).await.unwrap();
    let hosts: Vec<&str> = repos.repos.iter().map(|r| r.host.as_str()).collect();
    assert_eq!(hosts, vec![GHE, "github.com"]);
}

#[tokio::test]
async fn refusals_missing_installs_spoofed_ids_and_used_states() {
    let w = world().await;
    let id = w.com.install("octo", "User", &["hello"]);
    let other = w.com.install("someone-else", "User", &["theirs"]);

    // Not installed on that owner: 404, saying to install the App.
    let err = w
        .admin
        .client
        .github_install(&wire::GithubInstallRequest {
            repository: Some("nobody/x".into()),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert!(err.to_string().contains("install it there first"), "{err}");

    // A spoofed installation id: the signed-in user cannot reach it.
    let link_a = w.admin.client.github_install_link(None).await.unwrap();
    let code = w.com.sign_in("octocat", &[id]);
    let (status, page) = setup_redirect(
        &w.c,
        &format!(
            "installation_id={other}&setup_action=install&state={}&code={code}",
            state_of(&link_a)
        ),
    )
    .await;
    assert_eq!(status, 403, "{page}");
    assert!(page.contains("FORBIDDEN"), "{page}");
    assert!(
        w.admin
            .client
            .github_installations()
            .await
            .unwrap()
            .installations
            .is_empty()
    );
    // That state is used up.
    let code = w.com.sign_in("octocat", &[id]);
    let (status, page) = setup_redirect(
        &w.c,
        &format!(
            "installation_id={id}&setup_action=install&state={}&code={code}",
            state_of(&link_a)
        ),
    )
    .await;
    assert_eq!((status, page.contains("STATE_USED")), (410, true), "{page}");
    // An expired state.
    let link_b = w.admin.client.github_install_link(None).await.unwrap();
    w.c.execute_sql("UPDATE github_link_states SET expires_at = 0 WHERE used_at IS NULL")
        .await;
    let (status, page) = setup_redirect(
        &w.c,
        &format!(
            "installation_id={id}&setup_action=install&state={}&code={code}",
            state_of(&link_b)
        ),
    )
    .await;
    assert_eq!(
        (status, page.contains("STATE_EXPIRED")),
        (410, true),
        "{page}"
    );
    // A made-up state, and a missing code.
    let (status, _) =
        setup_redirect(&w.c, &format!("installation_id={id}&state=dpc_nope&code=x")).await;
    assert_eq!(status, 404);
    let (status, _) = setup_redirect(&w.c, &format!("installation_id={id}&state=x")).await;
    assert_eq!(status, 400);

    // An installation belongs to one workspace at most.
    link(&w, &w.admin, &w.com, None, id).await;
    let rival = w.c.bootstrap("rival", "admin@rival.test");
    let link_c = rival.client.github_install_link(None).await.unwrap();
    let code = w.com.sign_in("octo", &[id]);
    let (status, page) = setup_redirect(
        &w.c,
        &format!(
            "installation_id={id}&setup_action=install&state={}&code={code}",
            state_of(&link_c)
        ),
    )
    .await;
    assert_eq!(status, 409, "{page}");
    assert!(
        rival
            .client
            .github_installations()
            .await
            .unwrap()
            .installations
            .is_empty()
    );

    // Bad input, as GitHub would refuse it, is a 400 before any call.
    let calls = w.com.calls().len();
    for bad in [
        serde_json::json!({ "repository": "octo/hello", "org": "octo" }),
        serde_json::json!({}),
        serde_json::json!({ "repository": "octo/hello", "runnerGroup": "Default" }),
        serde_json::json!({ "repository": "octo" }),
        serde_json::json!({ "repository": "-octo/hello" }),
        serde_json::json!({ "org": "a--b" }),
        serde_json::json!({ "org": "octo", "runnerGroup": "x'; rm -rf /" }),
        serde_json::json!({ "repository": "octo/hello", "labels": ["a,b"] }),
        serde_json::json!({ "repository": "octo/hello", "host": "elsewhere.test" }),
        serde_json::json!({ "repository": "octo/hello", "surprise": 1 }),
    ] {
        let resp = reqwest::Client::new()
            .post(format!("{}/v1/workspace/runners/github-install", w.c.url))
            .bearer_auth(&w.admin.token)
            .json(&bad)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), 400, "{bad}");
        let body: serde_json::Value = resp.json().await.unwrap();
        assert_eq!(body["error"]["code"], "BAD_REQUEST", "{bad}");
    }
    assert_eq!(w.com.calls().len(), calls, "bad input reached GitHub");

    // Members are not admins; a coordinator without an App says so.
    let member = w.c.add_member("acme", "dev@acme.test", "member");
    assert_eq!(
        drover_tests::code(member.client.github_install_link(None).await),
        ErrorCode::Forbidden
    );
    assert_eq!(
        drover_tests::code(member.client.github_installations().await),
        ErrorCode::Forbidden
    );
    let plain = Coordinator::start().await;
    let admin = plain.bootstrap("solo", "a@solo.test");
    assert_eq!(
        drover_tests::code(admin.client.github_install_link(None).await),
        ErrorCode::GithubNotConfigured
    );
}

#[tokio::test]
async fn installation_tokens_are_cached_and_refreshed_when_github_expires_them() {
    let w = world().await;
    let id = w.com.install("octo", "User", &["hello"]);
    link(&w, &w.admin, &w.com, None, id).await;
    let req = wire::GithubInstallRequest {
        repository: Some("octo/hello".into()),
        ..Default::default()
    };
    w.admin.client.github_install(&req).await.unwrap();
    assert_eq!(w.com.mints().len(), 1);
    // Cached: a second registration mints no new installation token.
    w.admin.client.github_install(&req).await.unwrap();
    assert_eq!(w.com.mints().len(), 1);
    // GitHub expires it (an hour went by): the next call is refused with
    // 401, and the coordinator mints a new token and succeeds.
    w.com.expire_installation_tokens();
    let done = w.admin.client.github_install(&req).await.unwrap();
    assert_eq!(w.com.mints().len(), 2);
    // An expired registration token no longer registers a runner.
    w.com.expire_registration_tokens();
    let reg = script_var(&done.script, "GH_TOKEN");
    let err = w
        .com
        .register_runner(&reg, "octo/hello", &done.github.name, &[], None);
    assert_eq!(err, Err("expired registration token".to_owned()));
}

#[tokio::test]
async fn revoking_removes_the_github_runner_even_a_busy_one() {
    let w = world().await;
    let id = w.com.install("octo", "User", &["hello"]);
    link(&w, &w.admin, &w.com, None, id).await;
    let install = || async {
        let done = w
            .admin
            .client
            .github_install(&wire::GithubInstallRequest {
                repository: Some("octo/hello".into()),
                ..Default::default()
            })
            .await
            .unwrap();
        let reg = script_var(&done.script, "GH_TOKEN");
        w.com
            .register_runner(
                &reg,
                "octo/hello",
                &done.github.name,
                &["self-hosted"],
                None,
            )
            .unwrap();
        done
    };
    let idle = install().await;
    let busy = install().await;
    assert_eq!(w.com.runners().len(), 2);

    let gone = w
        .admin
        .client
        .revoke_workspace_runner(&idle.runner.id)
        .await
        .unwrap();
    let gone = gone.expect("a report on the GitHub runner").github;
    assert!(gone.removed, "{}", gone.message);
    assert!(!w.com.runners().iter().any(|r| r.name == idle.github.name));

    w.com.set_busy(&busy.github.name, true);
    let kept = w
        .admin
        .client
        .revoke_workspace_runner(&busy.runner.id)
        .await
        .unwrap();
    let kept = kept.expect("a report on the GitHub runner").github;
    assert!(!kept.removed);
    assert!(kept.message.contains("running a job"), "{}", kept.message);
    // Its Drover side is revoked at once.
    let roster = w
        .admin
        .client
        .runners(RunnerListing::WorkspaceOwned)
        .await
        .unwrap();
    assert!(!roster.runners.iter().any(|r| r.id == busy.runner.id));
    assert!(w.com.runners().iter().any(|r| r.name == busy.github.name));
    // Once it is idle, the coordinator's retry removes it.
    w.com.set_busy(&busy.github.name, false);
    eventually(
        "the busy GitHub runner removed once idle",
        DEADLINE,
        || async { (!w.com.runners().iter().any(|r| r.name == busy.github.name)).then_some(()) },
    )
    .await;
    // A runner without GitHub still answers 204.
    let plain = pair(
        &w.admin,
        drover_tests::runner_core::client::Scope::Workspace,
        None,
        "plain",
        &[],
    )
    .await;
    let r = w
        .admin
        .client
        .revoke_workspace_runner(&plain.runner.id)
        .await
        .unwrap();
    assert!(r.is_none());
}

/// Multi-threaded: the CLI runs as a blocking child process while the fake
/// GitHub, a task on this runtime, answers the coordinator.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_links_lists_installs_and_revokes() {
    let w = world().await;
    let id = w.com.install("octo", "User", &["hello"]);
    let url = stdout_ok(&w.c.drover(&w.admin.token, &["github", "link"]));
    assert!(
        url.trim().starts_with(&format!(
            "{}/apps/{}/installations/new?state=dpc_",
            w.com.web,
            fake_github::APP_SLUG
        )),
        "{url}"
    );
    let code = w.com.sign_in("octo", &[id]);
    let state = url.trim().split_once("state=").unwrap().1.to_owned();
    let (status, _) = setup_redirect(
        &w.c,
        &format!("installation_id={id}&setup_action=install&state={state}&code={code}"),
    )
    .await;
    assert_eq!(status, 200);

    let table = stdout_ok(&w.c.drover(&w.admin.token, &["github", "installations"]));
    assert!(
        table.contains("octo") && table.contains(&id.to_string()),
        "{table}"
    );
    let repos = stdout_ok(&w.c.drover(&w.admin.token, &["github", "repos", "--json"]));
    let repos: wire::GithubRepoList = serde_json::from_str(&repos).unwrap();
    assert_eq!(repos.repos[0].full_name, "octo/hello");

    let dir = TempDir::new("cli-script");
    let script = dir.path().join("install.sh");
    let out = w.c.drover(
        &w.admin.token,
        &[
            "github",
            "install",
            "--repo",
            "octo/hello",
            "--label",
            "gpu,big",
            "-o",
            script.to_str().unwrap(),
        ],
    );
    stdout_ok(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("runs-on: [self-hosted, drover-"),
        "{stderr}"
    );
    use std::os::unix::fs::PermissionsExt as _;
    assert_eq!(
        std::fs::metadata(&script).unwrap().permissions().mode() & 0o777,
        0o700
    );
    let text = std::fs::read_to_string(&script).unwrap();
    assert!(
        script_var(&text, "GH_LABELS").ends_with(",gpu,big"),
        "{text}"
    );
    let runner = script_var(&text, "DROVER_RUNNER_ID");
    let name = script_var(&text, "GH_NAME");
    w.com
        .register_runner(
            &script_var(&text, "GH_TOKEN"),
            "octo/hello",
            &name,
            &[],
            None,
        )
        .unwrap();

    // Input the CLI itself refuses, and input the coordinator refuses.
    let out = w.c.drover(
        &w.admin.token,
        &[
            "github",
            "install",
            "--repo",
            "octo/hello",
            "--runner-group",
            "x",
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    let out = w.c.drover(
        &w.admin.token,
        &["github", "install", "--repo", "not-a-repo"],
    );
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("(400)") && stderr.contains("owner/name"),
        "{stderr}"
    );

    let out = w.c.drover(
        &w.admin.token,
        &["runners", "revoke", "--workspace", &runner],
    );
    stdout_ok(&out);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("removed"),
        "{:?}",
        out
    );
    assert!(w.com.runners().is_empty());
}
