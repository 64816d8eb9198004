//! Linking a GitHub App installation proves ownership: the
//! GitHub user who finishes the install must administer the installation's
//! account, not merely reach it. Against the fake GitHub, whose
//! `/user/installations` lists an organization's installation to every
//! member, as GitHub's does.

use drover_tests::fake_github::{self, FakeGithub, GithubApp};
use drover_tests::*;

struct World {
    com: FakeGithub,
    c: Coordinator,
    admin: Member,
    _app: GithubApp,
}

async fn world() -> World {
    let app = GithubApp::start().await;
    let c = Coordinator::start_with(CoordinatorOptions {
        serve_args: app.serve_args(),
        ..CoordinatorOptions::default()
    })
    .await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    World {
        com: app.com.clone(),
        c,
        admin,
        _app: app,
    }
}

impl World {
    /// A fresh install link of the admin's, finished by GitHub user `login`
    /// (who can reach installation `id`): the setup page's status and text.
    async fn finish_as(&self, login: &str, id: i64) -> (u16, String) {
        let link = self.admin.client.github_install_link(None).await.unwrap();
        let state = link.url.split_once("state=").unwrap().1.to_owned();
        let code = self.com.sign_in(login, &[id]);
        fake_github::setup_redirect(
            &self.c.url,
            &format!("installation_id={id}&setup_action=install&state={state}&code={code}"),
        )
        .await
    }

    async fn linked(&self) -> Vec<i64> {
        let list = self.admin.client.github_installations().await.unwrap();
        list.installations
            .iter()
            .map(|i| i.installation_id)
            .collect()
    }
}

#[tokio::test]
async fn an_organization_installation_is_linked_only_by_an_active_admin_of_it() {
    let w = world().await;
    let id = w.com.install("acme-corp", "Organization", &["api"]);

    // A read-only member reaches the installation, and may not link it.
    w.com.set_membership("acme-corp", "dev", "active", "member");
    let (status, page) = w.finish_as("dev", id).await;
    assert_eq!(status, 403, "{page}");
    assert!(page.contains("FORBIDDEN"), "{page}");
    assert!(
        page.contains("only an admin (owner) of the organization acme-corp may link it"),
        "the page says who must finish the install: {page}"
    );
    assert!(page.contains("dev is a member (active)"), "{page}");
    assert!(w.linked().await.is_empty());

    // A GitHub user who is not in the organization at all.
    let (status, page) = w.finish_as("mallory", id).await;
    assert_eq!(status, 403, "{page}");
    assert!(page.contains("mallory is not a member"), "{page}");
    assert!(w.linked().await.is_empty());

    // An owner invited but not yet joined is not an admin yet.
    w.com
        .set_membership("acme-corp", "newcomer", "pending", "admin");
    let (status, page) = w.finish_as("newcomer", id).await;
    assert_eq!(status, 403, "{page}");
    assert!(w.linked().await.is_empty());

    // An active admin links it.
    w.com
        .set_membership("acme-corp", "olivia", "active", "admin");
    let (status, page) = w.finish_as("olivia", id).await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("is linked to workspace acme"), "{page}");
    assert_eq!(w.linked().await, vec![id]);
    assert!(
        w.com
            .calls()
            .contains(&"GET /user/memberships/orgs/acme-corp".to_owned()),
        "{:?}",
        w.com.calls()
    );
    assert!(w.com.refusals().is_empty(), "{:?}", w.com.refusals());
}

#[tokio::test]
async fn a_user_account_installation_is_linked_only_by_that_user() {
    let w = world().await;
    let id = w.com.install("octo", "User", &["hello"]);

    // Another GitHub user who can reach it (a collaborator) may not.
    let (status, page) = w.finish_as("octocat", id).await;
    assert_eq!(status, 403, "{page}");
    assert!(
        page.contains("only the GitHub user octo may link it"),
        "the page says who must finish the install: {page}"
    );
    assert!(page.contains("finished by octocat"), "{page}");
    assert!(w.linked().await.is_empty());

    // The account's own user links it (GitHub logins ignore case).
    let (status, page) = w.finish_as("Octo", id).await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(w.linked().await, vec![id]);
    assert!(w.com.calls().contains(&"GET /user".to_owned()));
    assert!(w.com.refusals().is_empty(), "{:?}", w.com.refusals());
}
