//! Who may see and act on a job (SPEC §9), per role, over real processes:
//! a member sees their own jobs and the workspace pools' jobs (read and
//! cancel); an admin the same, never another member's personal-pool jobs; a
//! CI principal (`ci:<owner>/<repo>`, a linked repository's GitHub Actions
//! OIDC token) only the jobs its own repository submitted, every other job
//! answering 404 as if it did not exist: in lists, reads, logs, log follows
//! and cancels. Another workspace sees none of them.

use std::collections::BTreeSet;

use drover_tests::fake_github::{self, GithubApp, OidcClaims};
use drover_tests::runner_core::client::{Client, Scope};
use drover_tests::runner_core::wire::{ErrorCode, JobState};
use drover_tests::*;

/// One caller and the jobs SPEC §9 lets it see.
struct Role {
    name: &'static str,
    client: Client,
    sees: BTreeSet<&'static str>,
}

#[tokio::test]
async fn each_role_lists_reads_follows_and_cancels_only_the_jobs_spec_9_gives_it() {
    let app = GithubApp::start().await;
    let c = Coordinator::start_with(CoordinatorOptions {
        serve_args: app.serve_args(),
        ..CoordinatorOptions::default()
    })
    .await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    let alice = c.add_member("acme", "alice@acme.test", "member");
    let bob = c.add_member("acme", "bob@acme.test", "member");
    let globex = c.bootstrap("globex", "admin@globex.test");
    // Runners paired but never started: every job stays queued until it is
    // cancelled, so each cancel below acts on a live job.
    pair(&admin, Scope::Workspace, None, "ws-idle", &[]).await;
    for who in [&admin, &alice, &bob] {
        pair(who, Scope::Me, None, "laptop-idle", &[]).await;
    }
    let ids = fake_github::link_ci(&c.url, &admin, &app.com, "octo", &["hello", "site"]).await;
    let ci = |repository: &str, id: i64| {
        let claims = OidcClaims::new(&app.com.oidc_issuer(), repository, id, &c.url);
        c.client(&app.com.oidc_token(&claims, None))
    };
    let (hello, site) = (ci("octo/hello", ids[0]), ci("octo/site", ids[1]));

    let submit = |client: &Client, runtime: &'static str| {
        let client = client.clone();
        async move {
            let job = client.submit(&script_job(runtime, "true")).await.unwrap();
            assert_eq!(job.state, JobState::Queued);
            job.id
        }
    };
    let jobs = [
        ("alice-personal", submit(&alice.client, "self").await),
        ("alice-ws", submit(&alice.client, "self:ws").await),
        ("bob-personal", submit(&bob.client, "self").await),
        ("admin-personal", submit(&admin.client, "self").await),
        ("hello", submit(&hello, "self:ws").await),
        ("site", submit(&site, "self:ws").await),
    ];
    let id_of = |name: &str| jobs.iter().find(|(n, _)| *n == name).unwrap().1.clone();
    let ws_jobs = ["alice-ws", "hello", "site"];
    let role = |name, client: &Client, own: &[&'static str], ws: bool| Role {
        name,
        client: client.clone(),
        sees: own
            .iter()
            .copied()
            .chain(ws.then_some(ws_jobs).into_iter().flatten())
            .collect(),
    };
    let roles = [
        role("alice (member)", &alice.client, &["alice-personal"], true),
        role("bob (member)", &bob.client, &["bob-personal"], true),
        role("admin", &admin.client, &["admin-personal"], true),
        role("ci:octo/hello", &hello, &["hello"], false),
        role("ci:octo/site (another repository)", &site, &["site"], false),
        role("another workspace's admin", &globex.client, &[], false),
    ];

    let not_found = |r: &Role, job: &str, what: &str, got: ErrorCode| {
        assert_eq!(
            got,
            ErrorCode::NotFound,
            "{} {what} {job}: it must not exist for them",
            r.name
        );
    };
    for r in &roles {
        // The list holds exactly the jobs it may see.
        let listed: BTreeSet<String> = r
            .client
            .jobs(None, 1000)
            .await
            .unwrap()
            .jobs
            .into_iter()
            .map(|j| j.id)
            .collect();
        let expected: BTreeSet<String> = r.sees.iter().map(|n| id_of(n)).collect();
        assert_eq!(listed, expected, "{} lists", r.name);
        for (name, id) in &jobs {
            if r.sees.contains(name) {
                assert_eq!(r.client.job(id).await.unwrap().id, *id, "{}", r.name);
                r.client.logs(id).await.unwrap();
            } else {
                not_found(r, name, "reads", code(r.client.job(id).await));
                not_found(r, name, "reads the logs of", code(r.client.logs(id).await));
                let follow = r.client.follow_logs(id, |_| {}).await;
                not_found(r, name, "follows", code(follow));
                not_found(r, name, "cancels", code(r.client.cancel(id).await));
            }
        }
    }
    // None of those cancels touched a job.
    for (name, id) in &jobs {
        let job = admin.client.job(id).await.or(alice.client.job(id).await);
        let job = job.or(bob.client.job(id).await).unwrap();
        assert_eq!(job.state, JobState::Queued, "{name}");
    }

    // Each cancels what it may: its own, and (a person) the workspace's.
    let cancels: [(&Client, &str); 6] = [
        (&hello, "hello"),
        (&site, "site"),
        (&bob.client, "alice-ws"),
        (&alice.client, "alice-personal"),
        (&bob.client, "bob-personal"),
        (&admin.client, "admin-personal"),
    ];
    for (client, name) in cancels {
        let job = client.cancel(&id_of(name)).await.unwrap();
        assert_eq!(job.state, JobState::Cancelled, "{name}");
    }
    // Every job has ended: following a visible one's log returns at once.
    for r in &roles {
        for name in &r.sees {
            r.client.follow_logs(&id_of(name), |_| {}).await.unwrap();
        }
    }
}
