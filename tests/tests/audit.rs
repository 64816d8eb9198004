//! The audit log: what was done, by whom, from which surface, exactly once
//! per action, and never a secret; read by admins, paged and filtered.

use drover_tests::runner_core::client::Scope;
use drover_tests::runner_core::wire::{self, ErrorCode};
use drover_tests::*;

#[tokio::test]
async fn the_audit_log_holds_exactly_what_was_done_by_whom_from_where_and_no_secret() {
    let c = Coordinator::start().await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    let other = c.bootstrap("globex", "root@globex.test");
    let mut secrets = vec![admin.token.clone(), other.token.clone()];

    // The admin, over REST (no surface header).
    let pool = admin
        .client
        .create_runtime(Scope::Workspace, "builders")
        .await
        .unwrap();
    let join = ws_join_token(&admin, "builders").await;
    secrets.push(join.token.clone());
    let paired = pair(&admin, Scope::Workspace, Some("builders"), "box", &[]).await;
    secrets.push(paired.token.clone());
    admin
        .client
        .revoke_runner(Scope::Workspace, &paired.runner.id)
        .await
        .unwrap();
    admin.client.set_budget(Some(60)).await.unwrap();
    let keeper = pair(&admin, Scope::Workspace, Some("builders"), "keeper", &[]).await;
    secrets.push(keeper.token.clone());

    // A runner joins with the join token, then leaves.
    let joined = c
        .client(&join.token)
        .join(&wire::JoinRequest {
            reference: "self:ws:builders".into(),
            name: "joiner".into(),
            capabilities: vec![],
        })
        .await
        .unwrap();
    secrets.push(joined.token.clone());
    c.client(&joined.token).leave().await.unwrap();

    // The admin invites Bob from the CLI; Bob accepts, pairs a device,
    // revokes it, and cancels a job with a secret in its env.
    let invite: wire::Invite = serde_json::from_str(&stdout_ok(&c.drover(
        &admin.token,
        &["members", "invite", "bob@acme.test", "--json"],
    )))
    .unwrap();
    secrets.push(invite.code.clone());
    let bob_token = c
        .client("")
        .redeem_pairing_code(&invite.code, "bob-laptop")
        .await
        .unwrap();
    secrets.push(bob_token.token.clone());
    let bob = c.client(&bob_token.token).with_surface("desktop");
    let code_for_phone = bob.pairing_code().await.unwrap();
    secrets.push(code_for_phone.code.clone());
    let phone = c
        .client("")
        .redeem_pairing_code(&code_for_phone.code, "phone")
        .await
        .unwrap();
    secrets.push(phone.token.clone());
    bob.revoke_token(&phone.token_id).await.unwrap();
    let mut job = script_job("self:ws:builders", "sleep 1000");
    job.env = wire::Env::from([("API_KEY".to_owned(), "sk-live-never-logged".to_owned())]);
    secrets.push("sk-live-never-logged".into());
    let job = bob.submit(&job).await.unwrap();
    bob.cancel(&job.id).await.unwrap();

    // The admin promotes, then removes Bob; the other workspace acts too.
    admin
        .client
        .update_member(&bob_token.subject, "admin")
        .await
        .unwrap();
    admin
        .client
        .remove_member(&bob_token.subject)
        .await
        .unwrap();
    other
        .client
        .create_runtime(Scope::Workspace, "theirs")
        .await
        .unwrap();

    let page = admin
        .client
        .audit(&drover_wire::AuditQuery {
            limit: Some(500),
            ..drover_wire::AuditQuery::default()
        })
        .await
        .unwrap();
    assert!(page.next_before.is_none());
    let seen: Vec<(String, String, String, String)> = page
        .events
        .iter()
        .rev()
        .map(|e| {
            let who = e.actor.email.clone().unwrap_or(e.actor.kind.clone());
            (e.action.clone(), who, e.surface.clone(), e.target.clone())
        })
        .collect();
    let (a, b) = ("admin@acme.test", "bob@acme.test");
    let expected: Vec<(&str, &str, &str, &str)> = vec![
        ("runtime.created", a, "rest", &pool.id),
        ("join_token.created", a, "rest", &pool.id),
        ("runner.paired", a, "rest", &paired.runner.id),
        ("runner.revoked", a, "rest", &paired.runner.id),
        // The target is the workspace's id: checked below.
        ("budget.set", a, "rest", ""),
        ("runner.paired", a, "rest", &keeper.runner.id),
        ("runner.joined", "join_token", "rest", &joined.runner_id),
        ("runner.left", "runner", "rest", &joined.runner_id),
        ("member.invited", a, "cli", &bob_token.subject),
        ("invite.accepted", b, "rest", &bob_token.token_id),
        ("pairing_code.created", b, "desktop", &bob_token.subject),
        ("pairing_code.redeemed", b, "rest", &phone.token_id),
        ("token.revoked", b, "desktop", &phone.token_id),
        ("job.cancelled", b, "desktop", &job.id),
        ("member.updated", a, "rest", &bob_token.subject),
        ("member.removed", a, "rest", &bob_token.subject),
    ];
    assert_eq!(seen.len(), expected.len(), "{seen:#?}");
    for (got, want) in seen.iter().zip(&expected) {
        assert_eq!(
            (got.0.as_str(), got.1.as_str(), got.2.as_str()),
            (want.0, want.1, want.2),
            "{seen:#?}"
        );
        if !want.3.is_empty() {
            assert_eq!(got.3, want.3, "{got:?}");
        }
    }
    assert!(seen[4].3.starts_with("ws_"), "{:?}", seen[4]);
    let removed = &page.events[0];
    assert_eq!(removed.detail["email"], "bob@acme.test");
    assert_eq!(removed.detail["tokensRevoked"], 1);

    // Filters and pages.
    let only = |action: &str| drover_wire::AuditQuery {
        action: Some(action.into()),
        ..drover_wire::AuditQuery::default()
    };
    let invites = admin.client.audit(&only("member.invited")).await.unwrap();
    assert_eq!(invites.events.len(), 1);
    let by_bob = admin
        .client
        .audit(&drover_wire::AuditQuery {
            actor: Some("BOB@acme.test".into()),
            ..drover_wire::AuditQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(by_bob.events.len(), 5);
    let mut paged = Vec::new();
    let mut before = None;
    loop {
        let page = admin
            .client
            .audit(&drover_wire::AuditQuery {
                limit: Some(4),
                before: before.clone(),
                ..drover_wire::AuditQuery::default()
            })
            .await
            .unwrap();
        paged.extend(page.events.into_iter().map(|e| e.id));
        match page.next_before {
            Some(next) => before = Some(next),
            None => break,
        }
    }
    let all: Vec<_> = c_audit_ids(&admin).await;
    assert_eq!(paged, all);
    let since = page.events[2].at;
    let recent = admin
        .client
        .audit(&drover_wire::AuditQuery {
            since: Some(since),
            ..drover_wire::AuditQuery::default()
        })
        .await
        .unwrap();
    assert!(recent.events.iter().all(|e| e.at >= since) && recent.events.len() >= 3);

    // Refusals: bad input, a member, a surface that cannot be claimed.
    for bad in [
        only("member.deleted"),
        drover_wire::AuditQuery {
            limit: Some(0),
            ..drover_wire::AuditQuery::default()
        },
        drover_wire::AuditQuery {
            before: Some("x".into()),
            ..drover_wire::AuditQuery::default()
        },
    ] {
        assert_eq!(code(admin.client.audit(&bad).await), ErrorCode::BadRequest);
    }
    let eve = c.add_member("acme", "eve@acme.test", "member");
    assert_eq!(
        code(eve.client.audit(&drover_wire::AuditQuery::default()).await),
        ErrorCode::Forbidden
    );
    let resp = reqwest::Client::new()
        .get(format!("{}/v1/me", c.url))
        .bearer_auth(&admin.token)
        .header("drover-surface", "mcp")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);

    // The other workspace sees its own entry only.
    let theirs = other
        .client
        .audit(&drover_wire::AuditQuery::default())
        .await
        .unwrap();
    assert_eq!(theirs.events.len(), 1);
    assert_eq!(theirs.events[0].action, "runtime.created");

    // No secret anywhere in the log: not in the API's answer, not in the table.
    let text = serde_json::to_string(&page).unwrap()
        + &stdout_ok(&c.drover(&admin.token, &["audit", "--limit", "500"]))
        + &c
            .query_text("SELECT actor_id || ' ' || COALESCE(actor_email, '') || ' ' || target || ' ' || detail FROM audit_events")
            .await
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join("\n");
    for secret in &secrets {
        assert!(
            !text.contains(secret.as_str()),
            "a secret is in the audit log"
        );
    }
    for prefix in ["drv_", "rnr_", "djt_", "dpc_"] {
        assert!(
            !text.contains(prefix),
            "a {prefix} token is in the audit log"
        );
    }
}

/// Every entry's id in the admin's workspace, newest first.
async fn c_audit_ids(admin: &Member) -> Vec<String> {
    let page = admin
        .client
        .audit(&drover_wire::AuditQuery {
            limit: Some(500),
            ..drover_wire::AuditQuery::default()
        })
        .await
        .unwrap();
    page.events.into_iter().map(|e| e.id).collect()
}
