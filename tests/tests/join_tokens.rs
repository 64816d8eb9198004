//! Join tokens as a managed credential: minted with a lifetime
//! (a day by default, 30 at most), listed with who minted them and their
//! use (never the token), revoked one by one, and revoked with the member
//! who minted them, with the invites they created. On real coordinator
//! processes, on SQLite or PostgreSQL (`DROVER_TEST_DATABASE`); the
//! two-replica case is in replicas.rs.

use drover_tests::runner_core::client::{Client, Scope, Token};
use drover_tests::runner_core::wire::{self, ErrorCode};
use drover_tests::*;

const DAY_MS: i64 = 86_400_000;

/// A client holding only `token` (a join token).
fn joiner(c: &Coordinator, token: &str) -> Client {
    Client::new(&c.url, Token::new(token)).expect("client")
}

/// Joins one runner named `name` to `reference` with join token `token`.
async fn join(
    c: &Coordinator,
    token: &str,
    reference: &str,
    name: &str,
) -> Result<wire::JoinedRunner, drover_tests::runner_core::client::ClientError> {
    joiner(c, token)
        .join(&wire::JoinRequest {
            reference: reference.into(),
            name: name.into(),
            capabilities: Vec::new(),
        })
        .await
}

async fn events(admin: &Member, action: &str) -> Vec<wire::AuditEvent> {
    admin
        .client
        .audit(&drover_wire::AuditQuery {
            action: Some(action.into()),
            ..drover_wire::AuditQuery::default()
        })
        .await
        .unwrap()
        .events
}

#[tokio::test]
async fn join_tokens_are_listed_with_their_use_and_revoked_at_once() {
    let c = Coordinator::start().await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    let eve = c.add_member("acme", "eve@acme.test", "member");
    let pool = admin
        .client
        .create_runtime(Scope::Workspace, "build")
        .await
        .unwrap();

    // A day by default, 30 days at most.
    let day = ws_join_token(&admin, "build").await;
    let id = day.id.clone().expect("a join token's id");
    assert!(id.starts_with("jt_"), "{id}");
    let long = admin
        .client
        .join_token_for(Scope::Workspace, "build", Some(30 * 86_400))
        .await
        .unwrap();
    assert_eq!(
        code(
            admin
                .client
                .join_token_for(Scope::Workspace, "build", Some(30 * 86_400 + 1))
                .await
        ),
        ErrorCode::BadRequest
    );

    // Two runners join with the first token: the listing counts them.
    for name in ["box-1", "box-2"] {
        join(&c, &day.token, &pool.reference, name).await.unwrap();
    }
    let list = admin
        .client
        .join_tokens(Scope::Workspace)
        .await
        .unwrap()
        .join_tokens;
    assert_eq!(list.len(), 2, "{list:?}");
    let first = list.iter().find(|t| t.id == id).expect("listed");
    assert_eq!(first.expires_at - first.created_at, DAY_MS);
    assert_eq!(
        (
            first.pool.as_str(),
            first.reference.as_str(),
            first.runtime_id.as_str()
        ),
        ("build", pool.reference.as_str(), pool.id.as_str())
    );
    assert_eq!(first.minted_by.as_deref(), Some(admin.subject.as_str()));
    assert_eq!(first.minted_by_email.as_deref(), Some("admin@acme.test"));
    assert_eq!(first.uses, 2);
    assert!(first.last_used_at.is_some());
    let other = list.iter().find(|t| Some(&t.id) == long.id.as_ref());
    let other = other.expect("the 30-day token listed");
    assert_eq!(other.expires_at - other.created_at, 30 * DAY_MS);
    assert_eq!((other.uses, other.last_used_at), (0, None));
    let json = serde_json::to_string(&list).unwrap();
    assert!(
        !json.contains("djt_"),
        "a listing never shows a token: {json}"
    );

    // Workspace tokens are for admins; a member's own pools are theirs alone.
    assert_eq!(
        code(eve.client.join_tokens(Scope::Workspace).await),
        ErrorCode::Forbidden
    );
    assert_eq!(
        code(eve.client.revoke_join_token(Scope::Workspace, &id).await),
        ErrorCode::Forbidden
    );
    assert!(
        eve.client
            .join_tokens(Scope::Me)
            .await
            .unwrap()
            .join_tokens
            .is_empty()
    );
    let eves = eve.client.join_token(Scope::Me, "default").await.unwrap();
    let mine = eve.client.join_tokens(Scope::Me).await.unwrap().join_tokens;
    assert_eq!(mine.len(), 1);
    assert_eq!(Some(&mine[0].id), eves.id.as_ref());
    assert_eq!(mine[0].reference, eves.runtime.reference);
    assert_eq!(
        code(eve.client.revoke_join_token(Scope::Me, &id).await),
        ErrorCode::NotFound,
        "a workspace token is not one of Eve's"
    );
    assert_eq!(
        admin
            .client
            .join_tokens(Scope::Workspace)
            .await
            .unwrap()
            .join_tokens
            .len(),
        2,
        "a member's personal tokens are not the workspace's"
    );
    for bad in ["nope", "jt_", "tok_abc", day.token.as_str()] {
        assert_eq!(
            code(admin.client.revoke_join_token(Scope::Workspace, bad).await),
            ErrorCode::NotFound,
            "{bad}"
        );
    }

    // The CLI lists them (never the token) and revokes one.
    let text = stdout_ok(&c.drover(&admin.token, &["runtimes", "join-tokens", "--workspace"]));
    assert!(
        text.contains(&id) && text.contains("admin@acme.test") && !text.contains("djt_"),
        "{text}"
    );
    let listed: wire::JoinTokenList = serde_json::from_str(&stdout_ok(&c.drover(
        &admin.token,
        &["runtimes", "join-tokens", "--workspace", "--json"],
    )))
    .unwrap();
    assert_eq!(listed.join_tokens.len(), 2);
    let out = c.drover(
        &admin.token,
        &["runtimes", "revoke-join-token", &id, "--workspace"],
    );
    assert!(stdout_ok(&out).contains(&id));

    // Refused on its next use, asked about or joining; the other still works.
    assert_eq!(
        code(joiner(&c, &day.token).join_token_info().await),
        ErrorCode::Unauthorized
    );
    assert_eq!(
        code(join(&c, &day.token, &pool.reference, "box-3").await),
        ErrorCode::Unauthorized
    );
    join(&c, &long.token, &pool.reference, "box-4")
        .await
        .unwrap();
    let left = admin
        .client
        .join_tokens(Scope::Workspace)
        .await
        .unwrap()
        .join_tokens;
    assert_eq!(
        left.iter().map(|t| t.id.as_str()).collect::<Vec<_>>(),
        [long.id.as_deref().unwrap()]
    );
    assert_eq!(
        code(admin.client.revoke_join_token(Scope::Workspace, &id).await),
        ErrorCode::NotFound,
        "revoked once"
    );
    let revoked = events(&admin, "join_token.revoked").await;
    assert_eq!(revoked.len(), 1);
    assert_eq!(revoked[0].target, id);
    assert_eq!(revoked[0].surface, "cli");
    assert_eq!(revoked[0].actor.email.as_deref(), Some("admin@acme.test"));

    // Minting is audited with the token's id; the CLI's --ttl sets the lifetime.
    let created = events(&admin, "join_token.created").await;
    assert!(created.iter().any(|e| e.detail["joinToken"] == id.as_str()));
    let out = c.drover(
        &admin.token,
        &[
            "runtimes",
            "join-token",
            "build",
            "--workspace",
            "--ttl",
            "2h",
        ],
    );
    let token = stdout_ok(&out).trim().to_owned();
    assert!(token.starts_with("djt_"), "{token}");
    let two_hours = admin
        .client
        .join_tokens(Scope::Workspace)
        .await
        .unwrap()
        .join_tokens
        .into_iter()
        .max_by_key(|t| t.created_at)
        .unwrap();
    assert_eq!(two_hours.expires_at - two_hours.created_at, 2 * 3_600_000);
}

/// The attack as it was found: an admin mints a 30-day
/// join token and an invite, is removed, then joins a runner with the old
/// token (which would hand it every member's workspace jobs).
#[tokio::test]
async fn a_removed_admins_join_tokens_and_invites_are_refused() {
    let c = Coordinator::start().await;
    let ann = c.bootstrap("acme", "ann@acme.test");
    let mallory = c.add_member("acme", "mallory@acme.test", "admin");
    let pool = ann
        .client
        .create_runtime(Scope::Workspace, "build")
        .await
        .unwrap();
    let stolen = mallory
        .client
        .join_token_for(Scope::Workspace, "build", Some(30 * 86_400))
        .await
        .unwrap();
    let personal = mallory
        .client
        .join_token(Scope::Me, "default")
        .await
        .unwrap();
    let invite = mallory
        .client
        .invite_member("pal@acme.test", Some("admin"))
        .await
        .unwrap();
    // Ann's own join token and invite are not Mallory's: they stay.
    let anns = ws_join_token(&ann, "build").await;
    let anns_invite = ann
        .client
        .invite_member("dev@acme.test", None)
        .await
        .unwrap();
    // The token works until then.
    assert_eq!(
        joiner(&c, &stolen.token)
            .join_token_info()
            .await
            .unwrap()
            .reference,
        pool.reference
    );

    ann.client.remove_member(&mallory.subject).await.unwrap();
    assert_eq!(code(mallory.client.me().await), ErrorCode::Unauthorized);
    assert_eq!(
        code(join(&c, &stolen.token, &pool.reference, "mallory-box").await),
        ErrorCode::Unauthorized
    );
    assert_eq!(
        code(joiner(&c, &stolen.token).join_token_info().await),
        ErrorCode::Unauthorized
    );
    assert_eq!(
        code(join(&c, &personal.token, &personal.runtime.reference, "m").await),
        ErrorCode::Unauthorized
    );
    assert_eq!(
        code(
            c.client("")
                .redeem_pairing_code(&invite.code, "pal-laptop")
                .await
        ),
        ErrorCode::NotFound
    );
    // No runner of Mallory's in the roster; Ann's credentials still work.
    let roster = ann
        .client
        .runners(drover_tests::runner_core::client::RunnerListing::Roster)
        .await
        .unwrap()
        .runners;
    assert!(roster.is_empty(), "{roster:?}");
    join(&c, &anns.token, &pool.reference, "ann-box")
        .await
        .unwrap();
    c.client("")
        .redeem_pairing_code(&anns_invite.code, "dev-laptop")
        .await
        .unwrap();
    let left = ann
        .client
        .join_tokens(Scope::Workspace)
        .await
        .unwrap()
        .join_tokens;
    assert_eq!(
        left.iter().map(|t| t.id.clone()).collect::<Vec<_>>(),
        [anns.id.unwrap()]
    );

    // Audited in the removal's transaction: one entry per credential.
    let removed = events(&ann, "member.removed").await;
    assert_eq!(removed[0].detail["joinTokensRevoked"], 2);
    assert_eq!(removed[0].detail["invitesRevoked"], 1);
    let mut revoked: Vec<String> = events(&ann, "join_token.revoked")
        .await
        .into_iter()
        .map(|e| e.target)
        .collect();
    revoked.sort();
    let mut want = vec![stolen.id.unwrap(), personal.id.unwrap()];
    want.sort();
    assert_eq!(revoked, want);
    let invites = events(&ann, "invite.revoked").await;
    assert_eq!(invites.len(), 1);
    assert_eq!(invites[0].target, invite.member.id);
    assert_eq!(invites[0].detail["createdBy"], mallory.subject.as_str());
}

/// A demoted admin keeps their own pools' join tokens, not the workspace's
/// nor their invites.
#[tokio::test]
async fn a_demoted_admins_workspace_join_tokens_and_invites_are_refused() {
    let c = Coordinator::start().await;
    let ann = c.bootstrap("acme", "ann@acme.test");
    let bob = c.add_member("acme", "bob@acme.test", "admin");
    let pool = ann
        .client
        .create_runtime(Scope::Workspace, "build")
        .await
        .unwrap();
    let workspace = ws_join_token(&bob, "build").await;
    let own = bob.client.join_token(Scope::Me, "default").await.unwrap();
    let invite = bob
        .client
        .invite_member("pal@acme.test", None)
        .await
        .unwrap();

    ann.client
        .update_member(&bob.subject, "member")
        .await
        .unwrap();
    assert_eq!(
        code(join(&c, &workspace.token, &pool.reference, "b1").await),
        ErrorCode::Unauthorized
    );
    assert_eq!(
        code(
            c.client("")
                .redeem_pairing_code(&invite.code, "pal-laptop")
                .await
        ),
        ErrorCode::NotFound
    );
    join(&c, &own.token, &own.runtime.reference, "b2")
        .await
        .unwrap();
    let updated = events(&ann, "member.updated").await;
    assert_eq!(updated[0].detail["joinTokensRevoked"], 1);
    assert_eq!(updated[0].detail["invitesRevoked"], 1);
}
