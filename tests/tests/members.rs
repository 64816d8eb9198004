//! Members managed by their admins (invite, list, change a role, remove),
//! on real coordinator and runner processes.

use std::process::Command;

use drover_tests::runner_core::client::Scope;
use drover_tests::runner_core::wire::{self, ErrorCode, JobState};
use drover_tests::*;

async fn state_in_db(c: &Coordinator, job: &str) -> String {
    let rows = c
        .query_text(&format!("SELECT state FROM jobs WHERE id = '{job}'"))
        .await;
    rows.into_iter().flatten().next().expect("the job's row")
}

async fn member_named(admin: &Member, email: &str) -> Option<wire::Member> {
    let list = admin.client.members().await.unwrap().members;
    list.into_iter().find(|m| m.email == email)
}

#[tokio::test]
async fn admins_invite_list_update_and_remove_members_and_a_workspace_keeps_an_admin() {
    let c = Coordinator::start().await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    let eve = c.add_member("acme", "eve@acme.test", "member");
    let other = c.bootstrap("globex", "root@globex.test");

    // Members may not manage members.
    assert_eq!(code(eve.client.members().await), ErrorCode::Forbidden);
    assert_eq!(
        code(eve.client.invite_member("x@acme.test", None).await),
        ErrorCode::Forbidden
    );
    assert_eq!(
        code(eve.client.remove_member(&admin.subject).await),
        ErrorCode::Forbidden
    );

    // An invite: the member is listed as invited, and the link is a pairing link.
    let invite = admin
        .client
        .invite_member("bob@acme.test", None)
        .await
        .unwrap();
    assert_eq!(
        (invite.member.role.as_str(), invite.member.status.as_str()),
        ("member", "invited")
    );
    assert!(invite.code.starts_with("dpc_"), "{invite:?}");
    assert!(
        invite.link.starts_with("drover://pair?url=") && invite.link.ends_with(&invite.code),
        "{}",
        invite.link
    );
    let bob = member_named(&admin, "bob@acme.test").await.unwrap();
    assert_eq!((bob.status.as_str(), bob.tokens.len()), ("invited", 0));

    // Bob redeems it with the CLI: his first token, printed once.
    let out = Command::new(bin("drover"))
        .args(["redeem", &invite.link, "--name", "bob-laptop"])
        .env_remove("DROVER_URL")
        .env_remove("DROVER_TOKEN")
        .output()
        .unwrap();
    let bob_token = stdout_ok(&out).trim().to_owned();
    assert!(bob_token.starts_with("drv_"), "{bob_token}");
    let me = c.client(&bob_token).me().await.unwrap();
    assert_eq!(
        (me.email.as_str(), me.role.as_str()),
        ("bob@acme.test", "member")
    );
    let bob = member_named(&admin, "bob@acme.test").await.unwrap();
    assert_eq!(bob.status, "active");
    assert_eq!(bob.tokens.len(), 1);
    assert_eq!(bob.tokens[0].name, "bob-laptop");
    // An invite works once.
    assert_eq!(
        code(
            c.client("")
                .redeem_pairing_code(&invite.code, "again")
                .await
        ),
        ErrorCode::PairingCodeUsed
    );

    // Bad input, and a member twice.
    for (email, role) in [("not-an-email", None), ("ann@acme.test", Some("owner"))] {
        assert_eq!(
            code(admin.client.invite_member(email, role).await),
            ErrorCode::BadRequest
        );
    }
    assert_eq!(
        code(admin.client.invite_member("BOB@acme.test", None).await),
        ErrorCode::Conflict
    );
    assert_eq!(
        code(admin.client.update_member(&bob.id, "root").await),
        ErrorCode::BadRequest
    );
    // Another workspace's member, or no such id, is not found.
    for id in [other.subject.as_str(), "usr_nope", "x"] {
        assert_eq!(
            code(admin.client.update_member(id, "admin").await),
            ErrorCode::NotFound
        );
        assert_eq!(
            code(admin.client.remove_member(id).await),
            ErrorCode::NotFound
        );
    }

    // Roles: the last admin can be neither demoted nor removed.
    assert_eq!(
        code(admin.client.update_member(&admin.subject, "member").await),
        ErrorCode::LastAdmin
    );
    assert_eq!(
        code(admin.client.remove_member(&admin.subject).await),
        ErrorCode::LastAdmin
    );
    let promoted = admin.client.update_member(&bob.id, "admin").await.unwrap();
    assert_eq!(promoted.role, "admin");
    let bob_client = c.client(&bob_token);
    assert_eq!(bob_client.members().await.unwrap().members.len(), 3);
    // With two admins, one may step down; then Bob is the last.
    admin
        .client
        .update_member(&admin.subject, "member")
        .await
        .unwrap();
    assert_eq!(code(admin.client.members().await), ErrorCode::Forbidden);
    assert_eq!(
        code(bob_client.remove_member(&bob.id).await),
        ErrorCode::LastAdmin
    );
    bob_client
        .update_member(&admin.subject, "admin")
        .await
        .unwrap();

    // Removing Eve: her token stops at once, she leaves the list; invited
    // again, she comes back as the same member, invited.
    admin.client.remove_member(&eve.subject).await.unwrap();
    assert_eq!(code(eve.client.me().await), ErrorCode::Unauthorized);
    assert!(member_named(&admin, "eve@acme.test").await.is_none());
    assert_eq!(
        code(admin.client.remove_member(&eve.subject).await),
        ErrorCode::NotFound
    );
    let again = admin
        .client
        .invite_member("eve@acme.test", Some("member"))
        .await
        .unwrap();
    assert_eq!(
        (again.member.id.as_str(), again.member.status.as_str()),
        (eve.subject.as_str(), "invited")
    );
    assert_eq!(code(eve.client.me().await), ErrorCode::Unauthorized);

    // The CLI lists them, and --json is the coordinator's answer.
    let text = stdout_ok(&c.drover(&admin.token, &["members", "list"]));
    assert!(
        text.contains("bob@acme.test") && text.contains("invited") && !text.contains("drv_"),
        "{text}"
    );
    let json: wire::MemberList = serde_json::from_str(&stdout_ok(
        &c.drover(&admin.token, &["members", "list", "--json"]),
    ))
    .unwrap();
    assert_eq!(json.members.len(), 3);
    let out = c.drover(&eve.token, &["members", "list"]);
    assert!(!out.status.success());
}

#[tokio::test]
async fn removing_a_member_revokes_their_tokens_and_runners_and_ends_their_jobs() {
    let c = Coordinator::start().await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    let bob = c.add_member("acme", "bob@acme.test", "member");
    let device = bob.client.pairing_code().await.unwrap();
    let bob_device = c
        .client("")
        .redeem_pairing_code(&device.code, "phone")
        .await
        .unwrap();

    // Bob's two personal runners, each running one of his jobs, three more
    // queued behind them; one of his jobs runs on a workspace runner.
    let mine = [
        pair(&bob, Scope::Me, None, "bob-1", &[]).await,
        pair(&bob, Scope::Me, None, "bob-2", &[]).await,
    ];
    let mut runners: Vec<RunnerProcess> = mine
        .iter()
        .map(|p| RunnerProcess::paired(&c.url, &p.token, &[]))
        .collect();
    let shared = pair(&admin, Scope::Workspace, None, "shared", &[]).await;
    let _shared_runner = RunnerProcess::paired(&c.url, &shared.token, &[]);
    let long = "echo started; sleep 1000";
    let mut running = Vec::new();
    for _ in 0..2 {
        let job = bob.client.submit(&script_job("self", long)).await.unwrap();
        running.push(job.id);
    }
    let on_ws = bob
        .client
        .submit(&script_job("self:ws", long))
        .await
        .unwrap()
        .id;
    running.push(on_ws.clone());
    for id in &running {
        wait_state(&bob.client, id, JobState::Running).await;
    }
    let mut queued = Vec::new();
    for _ in 0..3 {
        queued.push(
            bob.client
                .submit(&script_job("self", long))
                .await
                .unwrap()
                .id,
        );
    }
    // Someone else's job on the workspace pool is not Bob's to lose.
    let admins = admin
        .client
        .submit(&script_job("self:ws", "echo mine"))
        .await
        .unwrap();

    admin.client.remove_member(&bob.subject).await.unwrap();

    // Every token of his fails at once; his runners' credentials too.
    assert_eq!(code(bob.client.me().await), ErrorCode::Unauthorized);
    assert_eq!(
        code(c.client(&bob_device.token).me().await),
        ErrorCode::Unauthorized
    );
    for p in &mine {
        assert_eq!(
            code(c.client(&p.token).hello(&[]).await),
            ErrorCode::Unauthorized
        );
    }
    // His jobs end: queued ones cancelled now, running ones once their
    // runner stops them. (His personal jobs are his alone to see: the
    // database says how they ended.)
    for id in &queued {
        assert_eq!(state_in_db(&c, id).await, "cancelled");
    }
    for id in &running {
        eventually("his running job to end", DEADLINE, || async {
            (state_in_db(&c, id).await == "cancelled").then_some(())
        })
        .await;
    }
    assert_eq!(
        admin.client.job(&on_ws).await.unwrap().state,
        JobState::Cancelled
    );
    // His runners exit (their credential is gone); the workspace runner
    // goes on, and runs the admin's job.
    for r in &mut runners {
        r.wait_exit().await;
    }
    let done = wait_done(&admin.client, &admins.id).await;
    assert_eq!(done.state, JobState::Succeeded);
    let roster = admin
        .client
        .runners(drover_tests::runner_core::client::RunnerListing::Roster)
        .await
        .unwrap();
    let ids: Vec<_> = roster.runners.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, [shared.runner.id.as_str()]);
}
