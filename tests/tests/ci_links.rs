//! CI links, scoped: a link pins GitHub's id of the repository
//! when it is made (read through the App) and again when it is remade;
//! it restricts which refs and events may act, and refuses pull requests
//! unless it lists them; its jobs go only to the link's pool; and the OIDC issuer's JWKS is fetched a bounded
//! number of times whatever the issuer answers, without holding up logins
//! whose key is known.

use std::time::{Duration, Instant};

use drover_tests::fake_github::{self, FakeGithub, GithubApp, OidcClaims};
use drover_tests::runner_core::client::{Client, ClientError};
use drover_tests::runner_core::wire::{self, ErrorCode};
use drover_tests::*;

struct World {
    com: FakeGithub,
    c: Coordinator,
    admin: Member,
    /// GitHub's ids of `octo/hello` and `octo/site`.
    ids: Vec<i64>,
    _app: GithubApp,
}

/// Workspace `acme` with an idle workspace runner (jobs stay queued), the
/// App installed on `octo` (`hello`, `site`) and both linked for CI.
async fn world() -> World {
    let app = GithubApp::start().await;
    let c = Coordinator::start_with(CoordinatorOptions {
        serve_args: app.serve_args(),
        ..CoordinatorOptions::default()
    })
    .await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    pair(
        &admin,
        drover_tests::runner_core::client::Scope::Workspace,
        None,
        "idle",
        &[],
    )
    .await;
    let ids = fake_github::link_ci(&c.url, &admin, &app.com, "octo", &["hello", "site"]).await;
    World {
        com: app.com.clone(),
        c,
        admin,
        ids,
        _app: app,
    }
}

impl World {
    /// A push to main of `repository`, with GitHub's id `id`.
    fn claims(&self, repository: &str, id: i64) -> OidcClaims {
        OidcClaims::new(&self.com.oidc_issuer(), repository, id, &self.c.url)
    }

    /// `octo/hello`'s claims with `ref` and `event_name` set.
    fn run(&self, git_ref: &str, event: &str) -> OidcClaims {
        let mut claims = self.claims("octo/hello", self.ids[0]);
        claims.0["ref"] = git_ref.into();
        claims.0["event_name"] = event.into();
        claims
    }

    fn ci(&self, claims: &OidcClaims) -> Client {
        self.c.client(&self.com.oidc_token(claims, None))
    }

    async fn submit(&self, claims: &OidcClaims) -> Result<wire::Job, ClientError> {
        self.ci(claims).submit(&script_job("self:ws", "true")).await
    }

    async fn link(&self, req: wire::CiLinkRequest) -> Result<wire::CiLink, ClientError> {
        self.admin.client.set_ci_link(&req).await
    }
}

fn hello_link() -> wire::CiLinkRequest {
    wire::CiLinkRequest {
        repository: "octo/hello".into(),
        ..Default::default()
    }
}

/// The refusal of a call: (code, message).
fn refusal<T: std::fmt::Debug>(r: Result<T, ClientError>) -> (ErrorCode, String) {
    match r {
        Err(ClientError::Api { code, message, .. }) => (code, message),
        other => panic!("expected an API error, got {other:?}"),
    }
}

fn strings(items: &[&str]) -> Option<Vec<String>> {
    Some(items.iter().map(|s| (*s).to_owned()).collect())
}

#[tokio::test]
async fn a_link_pins_the_repository_id_when_made_and_again_when_remade() {
    let w = world().await;
    let first = w.ids[0];
    // The repository is deleted and made again before any workflow ran:
    // the new one's tokens are refused, though no token was seen before.
    let second = w.com.recreate_repo("octo/hello");
    let (code, message) = refusal(w.submit(&w.claims("octo/hello", second)).await);
    assert_eq!(code, ErrorCode::Unauthorized, "{message}");
    assert!(message.contains("id changed"), "{message}");
    w.submit(&w.claims("octo/hello", first)).await.unwrap();

    // Linking again pins the id GitHub has now: the new repository's
    // tokens act, the old one's are refused.
    let relinked = w.link(hello_link()).await.unwrap();
    assert_eq!(relinked.repository_id, Some(second));
    w.submit(&w.claims("octo/hello", second)).await.unwrap();
    let (code, message) = refusal(w.submit(&w.claims("octo/hello", first)).await);
    assert_eq!(code, ErrorCode::Unauthorized, "{message}");
    let listed = w.admin.client.ci_links().await.unwrap().links;
    assert!(
        listed
            .iter()
            .any(|l| l.repository == "octo/hello" && l.repository_id == Some(second)),
        "{listed:?}"
    );

    // A repository the installation does not reach, or an owner the App is
    // not installed on for this workspace, cannot be linked: its id is
    // unknown.
    for (repository, says) in [
        ("octo/elsewhere", "does not reach"),
        ("other-org/app", "not installed on other-org"),
    ] {
        let req = wire::CiLinkRequest {
            repository: repository.into(),
            ..Default::default()
        };
        let (code, message) = refusal(w.link(req).await);
        assert_eq!(code, ErrorCode::NotFound, "{repository}: {message}");
        assert!(message.contains(says), "{message:?} should say {says:?}");
    }
    assert!(
        w.com.calls().iter().any(|c| c == "GET /repos/octo/hello"),
        "{:?}",
        w.com.calls()
    );
}

#[tokio::test]
async fn a_ci_principal_submits_only_to_its_links_pool() {
    let w = world().await;
    let ws = drover_tests::runner_core::client::Scope::Workspace;
    w.admin.client.create_runtime(ws, "builds").await.unwrap();
    pair(&w.admin, ws, Some("builds"), "builder", &[]).await;
    let hello = w.claims("octo/hello", w.ids[0]);

    // A link that names no runtime sends jobs to the default workspace pool
    // only: another workspace pool is refused.
    w.submit(&hello).await.unwrap();
    let (code, message) = refusal(
        w.ci(&hello)
            .submit(&script_job("self:ws:builds", "true"))
            .await,
    );
    assert_eq!(code, ErrorCode::CiNotAllowed, "{message}");
    assert!(message.contains("self:ws"), "{message}");

    // Linked to `builds`, the repository's jobs go there and nowhere else.
    w.link(wire::CiLinkRequest {
        runtime: Some("self:ws:builds".into()),
        ..hello_link()
    })
    .await
    .unwrap();
    let job = w
        .ci(&hello)
        .submit(&script_job("self:ws:builds", "true"))
        .await
        .unwrap();
    assert_eq!(job.state, wire::JobState::Queued);
    let (code, message) = refusal(w.submit(&hello).await);
    assert_eq!(code, ErrorCode::CiNotAllowed, "{message}");
    assert!(message.contains("self:ws:builds"), "{message}");
    // The other repository's link is unchanged.
    w.submit(&w.claims("octo/site", w.ids[1])).await.unwrap();
}

/// Multi-threaded: the CLI runs as a blocking child process while the fake
/// GitHub, a task on this runtime, answers the coordinator.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn links_restrict_refs_and_events_and_refuse_pull_requests_unless_listed() {
    let w = world().await;
    let forbidden = |r: Result<wire::Job, ClientError>, says: &str| {
        let (code, message) = refusal(r);
        assert_eq!(code, ErrorCode::CiNotAllowed, "{message}");
        assert!(message.contains(says), "{message:?} should say {says:?}");
    };
    // By default any ref and event acts, but pull requests: GitHub's token
    // does not say whether one comes from a fork.
    w.submit(&w.run("refs/heads/dev", "push")).await.unwrap();
    w.submit(&w.run("refs/heads/main", "workflow_dispatch"))
        .await
        .unwrap();
    for event in ["pull_request", "pull_request_target"] {
        forbidden(w.submit(&w.run("refs/pull/7/merge", event)).await, event);
    }
    let mut no_event = w.run("refs/heads/main", "push");
    no_event.0.as_object_mut().unwrap().remove("event_name");
    forbidden(w.submit(&no_event).await, "event_name");

    // Scoped to pushes of main and release tags.
    let scoped = w
        .link(wire::CiLinkRequest {
            refs: strings(&["refs/heads/main", "refs/tags/v*"]),
            events: strings(&["push"]),
            ..hello_link()
        })
        .await
        .unwrap();
    assert_eq!(scoped.refs, strings(&["refs/heads/main", "refs/tags/v*"]));
    assert_eq!(scoped.events, strings(&["push"]));
    w.submit(&w.run("refs/heads/main", "push")).await.unwrap();
    w.submit(&w.run("refs/tags/v1.2.3", "push")).await.unwrap();
    forbidden(
        w.submit(&w.run("refs/heads/dev", "push")).await,
        "refs/heads/dev",
    );
    forbidden(
        w.submit(&w.run("refs/heads/main-evil", "push")).await,
        "main-evil",
    );
    forbidden(
        w.submit(&w.run("refs/heads/main", "workflow_dispatch"))
            .await,
        "workflow_dispatch",
    );
    // A refused run reads nothing either: its own jobs are not its.
    let refused = w.ci(&w.run("refs/heads/dev", "push"));
    assert_eq!(code(refused.jobs(None, 10).await), ErrorCode::CiNotAllowed);
    // The other linked repository is not scoped by this link.
    w.submit(&w.claims("octo/site", w.ids[1])).await.unwrap();

    // Listed, pull requests act (their ref is refs/pull/<n>/merge).
    w.link(wire::CiLinkRequest {
        refs: strings(&["refs/heads/main", "refs/pull/*"]),
        events: strings(&["push", "pull_request"]),
        ..hello_link()
    })
    .await
    .unwrap();
    w.submit(&w.run("refs/pull/7/merge", "pull_request"))
        .await
        .unwrap();
    forbidden(
        w.submit(&w.run("refs/pull/7/merge", "pull_request_target"))
            .await,
        "pull_request_target",
    );

    // Bad scopes are refused.
    for (req, says) in [
        (
            wire::CiLinkRequest {
                refs: strings(&["main"]),
                ..hello_link()
            },
            "refs entry",
        ),
        (
            wire::CiLinkRequest {
                refs: strings(&["refs/*/main"]),
                ..hello_link()
            },
            "refs entry",
        ),
        (
            wire::CiLinkRequest {
                refs: Some(vec![]),
                ..hello_link()
            },
            "refs must list",
        ),
        (
            wire::CiLinkRequest {
                events: strings(&["Push!"]),
                ..hello_link()
            },
            "events entry",
        ),
    ] {
        let (code, message) = refusal(w.link(req).await);
        assert_eq!(code, ErrorCode::BadRequest, "{message}");
        assert!(message.contains(says), "{message:?} should say {says:?}");
    }

    // The CLI sets and shows them; the workflow runs on what is allowed.
    let token = &w.admin.token;
    stdout_ok(&w.c.drover(
        token,
        &[
            "ci",
            "link",
            "octo/hello",
            "--ref",
            "refs/heads/main,refs/tags/v*",
            "--event",
            "push",
            "--event",
            "workflow_dispatch",
        ],
    ));
    let listed = stdout_ok(&w.c.drover(token, &["ci", "links"]));
    assert!(
        listed.contains("refs/heads/main,refs/tags/v*")
            && listed.contains("push,workflow_dispatch"),
        "{listed}"
    );
    let yaml = stdout_ok(&w.c.drover(token, &["ci", "workflow", "octo/hello"]));
    assert!(
        yaml.contains("  push:\n    branches: ['main']\n    tags: ['v**']\n  workflow_dispatch:\n"),
        "{yaml}"
    );
    assert!(!yaml.contains("pull_request"), "{yaml}");
    // The default link's workflow leaves pull requests out too.
    let site = w.admin.client.ci_workflow("octo/site", None).await.unwrap();
    assert!(
        site.contains("on:\n  push:\n  workflow_dispatch:\npermissions:"),
        "{site}"
    );
}

#[tokio::test]
async fn unknown_kids_with_a_failing_issuer_fetch_the_jwks_a_bounded_number_of_times() {
    let w = world().await;
    let known = w.claims("octo/hello", w.ids[0]);
    // A first login fetches the JWKS: the issuer's key is known from now on.
    w.submit(&known).await.unwrap();
    let forged = |n: usize| {
        w.c.client(
            &w.com
                .oidc_token_claiming_kid(&known, &format!("made-up-{n}")),
        )
    };

    // The issuer is down; tokens naming made-up keys pour in, ten at a
    // time, for two and a half seconds.
    w.com.fail_oidc_issuer(true);
    let before = w.com.oidc_fetches();
    let started = Instant::now();
    let mut refused = 0;
    let mut round = 0;
    while started.elapsed() < Duration::from_millis(2500) {
        round += 1;
        let attempts = (0..10).map(|i| {
            let client = forged(round * 10 + i);
            async move { client.submit(&script_job("self:ws", "true")).await }
        });
        for r in futures_join(attempts).await {
            assert_eq!(code(r), ErrorCode::Unauthorized);
            refused += 1;
        }
    }
    let elapsed = started.elapsed();
    let fetches = w.com.oidc_fetches() - before;
    // At most one fetch a second (a failed one counts), and one more for
    // the second that was under way.
    let bound = elapsed.as_secs() as usize + 2;
    assert!(
        fetches <= bound,
        "{fetches} requests to the issuer for {refused} tokens in {elapsed:?} (at most {bound})"
    );

    // A fetch that hangs holds up no login whose key is known. Made-up
    // keys keep coming until one starts a fetch (once the second is over)
    // and the issuer holds it.
    w.com.stall_oidc_issuer(true);
    let mut pending = Vec::new();
    let mut n = 1000;
    let com = &w.com;
    eventually("a JWKS fetch held by the issuer", DEADLINE, || {
        n += 1;
        let client = forged(n);
        pending.push(tokio::spawn(async move {
            client.submit(&script_job("self:ws", "true")).await
        }));
        async move { (com.oidc_held() > 0).then_some(()) }
    })
    .await;
    let valid = tokio::time::timeout(Duration::from_secs(5), w.submit(&known)).await;
    assert!(
        matches!(valid, Ok(Ok(_))),
        "a login with a known key waited on the JWKS fetch: {valid:?}"
    );
    w.com.stall_oidc_issuer(false);
    for attempt in pending {
        assert_eq!(code(attempt.await.unwrap()), ErrorCode::Unauthorized);
    }

    // The issuer is back and rotates its key: the new key is fetched (once
    // the second since the last fetch is over) and its tokens act.
    w.com.fail_oidc_issuer(false);
    let kid = w.com.rotate_oidc_key();
    let rotated = w.com.oidc_token(&known, Some(&kid));
    let client = w.c.client(&rotated);
    let job = eventually("a token signed with the new key", DEADLINE, || {
        let client = client.clone();
        async move { client.submit(&script_job("self:ws", "true")).await.ok() }
    })
    .await;
    assert_eq!(job.submitted_by, "ci:octo/hello");
}

/// Runs the futures concurrently; their outputs in order.
async fn futures_join<F>(futures: impl Iterator<Item = F>) -> Vec<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    let handles: Vec<_> = futures.map(tokio::spawn).collect();
    let mut out = Vec::new();
    for h in handles {
        out.push(h.await.unwrap());
    }
    out
}
