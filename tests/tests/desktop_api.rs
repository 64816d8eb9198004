//! What the desktop app needs of the coordinator besides pairing:
//! who a token belongs to (`GET /v1/me`, `drover whoami`), a runner
//! revoking itself (`POST /v1/runner/leave`) with only its own credential,
//! and the limit on wrong pairing codes.

use std::time::Duration;

use drover_tests::runner_core::client::{RunnerListing, Scope};
use drover_tests::runner_core::wire::{self, ErrorCode, JobState};
use drover_tests::*;

/// A device token for `member`, from a pairing code redeemed as `device`.
async fn device_token(member: &Member, device: &str) -> wire::DeviceToken {
    let code = member.client.pairing_code().await.unwrap().code;
    member
        .client
        .redeem_pairing_code(&code, device)
        .await
        .unwrap()
}

#[tokio::test]
async fn me_says_who_a_member_token_belongs_to_and_which_token_it_is() {
    let c = Coordinator::start().await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    let eve = c.add_member("acme", "eve@acme.test", "member");

    let me = admin.client.me().await.unwrap();
    assert_eq!(
        (
            me.workspace.as_str(),
            me.email.as_str(),
            me.subject.as_str(),
            me.role.as_str()
        ),
        ("acme", "admin@acme.test", admin.subject.as_str(), "admin")
    );
    let token = me.token.expect("the admin's token has a row");
    assert!(token.current && token.name == "api token", "{token:?}");
    assert!(token.id.starts_with("tok_"), "{token:?}");

    // A device token is Eve's, and names itself.
    let phone = device_token(&eve, "Eve's phone").await;
    let me = c.client(&phone.token).me().await.unwrap();
    assert_eq!(
        (me.email.as_str(), me.role.as_str(), me.subject.as_str()),
        ("eve@acme.test", "member", eve.subject.as_str())
    );
    let token = me.token.expect("a device token has a row");
    assert_eq!(
        (token.id.as_str(), token.name.as_str(), token.current),
        (phone.token_id.as_str(), "Eve's phone", true)
    );

    // The CLI: text, and the coordinator's JSON with --json.
    let text = stdout_ok(&c.drover(&phone.token, &["whoami"]));
    assert!(
        text.contains("eve@acme.test (member) in workspace acme")
            && text.contains(&phone.token_id)
            && text.contains("Eve's phone")
            && !text.contains("drv_"),
        "{text}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&stdout_ok(&c.drover(&admin.token, &["whoami", "--json"]))).unwrap();
    assert_eq!(json["email"], "admin@acme.test");
    assert_eq!(json["subject"], admin.subject.as_str());
    assert_eq!(json["token"]["current"], true);
    assert!(json["token"]["createdAt"].is_i64(), "{json}");

    // Not a member token: a runner's, a join token, nothing known.
    let runner = pair(&admin, Scope::Workspace, None, "r1", &[]).await;
    let join = ws_join_token(&admin, "default").await;
    assert_eq!(
        code(c.client(&runner.token).me().await),
        ErrorCode::Forbidden
    );
    assert_eq!(code(c.client(&join.token).me().await), ErrorCode::Forbidden);
    let unknown = format!("drv_{}", "0".repeat(40));
    assert_eq!(code(c.client(&unknown).me().await), ErrorCode::Unauthorized);
    // A revoked device token is nobody.
    eve.client.revoke_token(&phone.token_id).await.unwrap();
    assert_eq!(
        code(c.client(&phone.token).me().await),
        ErrorCode::Unauthorized
    );
    let out = c.drover(&phone.token, &["whoami"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("Unauthorized"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test]
async fn a_runner_joined_by_link_leaves_with_its_own_credential() {
    let c = Coordinator::start().await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    let join = ws_join_token(&admin, "default").await;
    let joiner = c.client(&join.token);
    let mut runners = Vec::new();
    for name in ["laptop-0", "laptop-1"] {
        let joined = joiner
            .join(&wire::JoinRequest {
                reference: "ws:acme:default".into(),
                name: name.into(),
                capabilities: vec![],
            })
            .await
            .unwrap();
        let client = c.client(&joined.token);
        // Known and cached by the coordinator before it leaves.
        client.hello(&[]).await.unwrap();
        runners.push((joined.runner_id, client));
    }
    let (leaving_id, leaving) = &runners[0];
    let (staying_id, staying) = &runners[1];

    // It holds a job when it leaves: the job goes back to the queue.
    let job = admin
        .client
        .submit(&script_job("self:ws", "true"))
        .await
        .unwrap();
    let lease = leaving
        .lease(Duration::from_secs(5))
        .await
        .unwrap()
        .expect("a lease");
    assert_eq!(lease.job.id, job.id);

    // Neither a member's token nor the join token may leave for it.
    assert_eq!(code(admin.client.leave().await), ErrorCode::Forbidden);
    assert_eq!(code(joiner.leave().await), ErrorCode::Forbidden);

    leaving.leave().await.unwrap();
    // Its credential stops working at once, cached or not.
    assert_eq!(code(leaving.hello(&[]).await), ErrorCode::Unauthorized);
    assert_eq!(
        code(leaving.complete(&lease.lease_id, &succeeded()).await),
        ErrorCode::Unauthorized
    );
    assert_eq!(code(leaving.leave().await), ErrorCode::Unauthorized);
    // The pool's listings no longer show it; the other runner stays.
    for listing in [RunnerListing::Roster, RunnerListing::WorkspaceOwned] {
        let ids: Vec<String> = admin
            .client
            .runners(listing)
            .await
            .unwrap()
            .runners
            .into_iter()
            .map(|r| r.id)
            .collect();
        assert_eq!(ids, vec![staying_id.clone()], "{leaving_id} left");
    }
    assert_eq!(
        admin
            .client
            .runtimes(Scope::Workspace)
            .await
            .unwrap()
            .runtimes[0]
            .runners,
        1
    );
    // Its job is queued again, and the other runner runs it.
    assert_eq!(
        admin.client.job(&job.id).await.unwrap().state,
        JobState::Queued
    );
    let again = staying
        .lease(Duration::from_secs(5))
        .await
        .unwrap()
        .expect("the job again");
    assert_eq!(again.job.id, job.id);
    staying
        .complete(&again.lease_id, &succeeded())
        .await
        .unwrap();
    assert_eq!(
        admin.client.job(&job.id).await.unwrap().state,
        JobState::Succeeded
    );
    // The owner can no longer revoke it: it is gone already.
    assert_eq!(
        code(
            admin
                .client
                .revoke_runner(Scope::Workspace, leaving_id)
                .await
        ),
        ErrorCode::NotFound
    );
}

/// Redeems `code` from source address `from`: (status, Retry-After, body).
async fn redeem_from(
    c: &Coordinator,
    from: [u8; 4],
    code: &str,
) -> (u16, Option<u64>, serde_json::Value) {
    let http = reqwest::Client::builder()
        .local_address(std::net::IpAddr::from(from))
        .build()
        .unwrap();
    let resp = http
        .post(format!("{}/v1/pairing-codes/{code}/redeem", c.url))
        .json(&serde_json::json!({ "deviceName": "laptop" }))
        .send()
        .await
        .unwrap();
    let retry_after = resp
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().parse().unwrap());
    (
        resp.status().as_u16(),
        retry_after,
        resp.json().await.unwrap(),
    )
}

#[tokio::test]
async fn many_wrong_pairing_codes_from_one_client_are_rate_limited() {
    let c = Coordinator::start().await;
    let bob = c.bootstrap("acme", "bob@acme.test");
    let code = bob.client.pairing_code().await.unwrap().code;
    let guesser = [127, 0, 0, 2];
    // Its burst of wrong codes is answered as usual; right codes from the
    // same client before that cost it nothing.
    let mine = bob.client.pairing_code().await.unwrap().code;
    let (status, _, _) = redeem_from(&c, guesser, &mine).await;
    assert_eq!(status, 201);
    let mut answered = Vec::new();
    for i in 0..40 {
        let guess = format!("dpc_{i:052}");
        let (status, retry_after, body) = redeem_from(&c, guesser, &guess).await;
        if status == 429 {
            assert_eq!(body["error"]["code"], "RATE_LIMITED", "{body}");
            let retry_after = retry_after.expect("a Retry-After header");
            assert!((1..=60).contains(&retry_after), "{retry_after}");
            break;
        }
        assert_eq!(
            (status, body["error"]["code"].as_str()),
            (404, Some("NOT_FOUND"))
        );
        answered.push(i);
    }
    assert_eq!(answered.len(), 20, "the burst is 20 wrong codes");
    // A used code is a wrong code too; and so is the right one, now.
    let (status, _, body) = redeem_from(&c, guesser, &mine).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (429, Some("RATE_LIMITED"))
    );
    let (status, _, _) = redeem_from(&c, guesser, &code).await;
    assert_eq!(status, 429);

    // Another client's right code is unaffected (and its wrong ones are its own).
    let other = [127, 0, 0, 1];
    let (status, _, _) = redeem_from(&c, other, &format!("dpc_{:052}", 7)).await;
    assert_eq!(status, 404);
    let (status, _, device) = redeem_from(&c, other, &code).await;
    assert_eq!(status, 201, "{device}");
    assert!(device["token"].as_str().unwrap().starts_with("drv_"));

    // The guesser's bucket refills: one more guess after Retry-After, then
    // it is limited again.
    let status = eventually("a refilled token", DEADLINE, || async {
        let (status, _, _) = redeem_from(&c, guesser, "dpc_nope").await;
        (status != 429).then_some(status)
    })
    .await;
    assert_eq!(status, 404);
    let (status, _, _) = redeem_from(&c, guesser, "dpc_nope").await;
    assert_eq!(status, 429);
}
