//! Pairing a device with one click (the coordinator's side): one-time
//! pairing codes and their links, redeemed once for a device's member token;
//! the member's tokens, listed and revoked; the coordinator's public URL in
//! pairing and join links.

use std::process::Command;

use drover_tests::runner_core::client::{Client, Scope};
use drover_tests::runner_core::wire::{self, ErrorCode};
use drover_tests::*;

/// `drover pair-link`'s link, and the code in it.
fn pair_link(c: &Coordinator, m: &Member) -> (String, String) {
    let link = stdout_ok(&c.drover(&m.token, &["pair-link"]))
        .trim()
        .to_owned();
    let code = link
        .split_once("&code=")
        .map(|(_, code)| code.to_owned())
        .unwrap_or_else(|| panic!("no code in {link}"));
    (link, code)
}

/// Redeems `code` with no credential at all: (status, body).
async fn redeem(c: &Coordinator, code: &str, device: &str) -> (u16, serde_json::Value) {
    let resp = reqwest::Client::new()
        .post(format!("{}/v1/pairing-codes/{code}/redeem", c.url))
        .json(&serde_json::json!({ "deviceName": device }))
        .send()
        .await
        .unwrap();
    (resp.status().as_u16(), resp.json().await.unwrap())
}

fn error_code(body: &serde_json::Value) -> &str {
    body["error"]["code"].as_str().unwrap_or("")
}

/// Percent-encodes like a link's query values.
fn encoded(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

#[tokio::test]
async fn a_pairing_link_gives_a_device_its_own_token_once() {
    let c = Coordinator::start().await;
    let bob = c.bootstrap("acme", "bob@acme.test");
    let out = c.drover(&bob.token, &["pair-link"]);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("expires in 10 min"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (link, code) = pair_link(&c, &bob);
    assert_eq!(
        link,
        format!("drover://pair?url={}&code={code}", encoded(&c.url))
    );
    assert!(code.starts_with("dpc_") && code.len() >= 40, "{code}");

    // Bad device names are refused without spending the code.
    for bad in ["", "   ", "line\nbreak", &"x".repeat(65)] {
        let (status, body) = redeem(&c, &code, bad).await;
        assert_eq!((status, error_code(&body)), (400, "BAD_REQUEST"), "{bad:?}");
    }
    let (status, device) = redeem(&c, &code, "Bob's laptop").await;
    assert_eq!(status, 201, "{device}");
    let device: wire::DeviceToken = serde_json::from_value(device).unwrap();
    assert!(device.token.starts_with("drv_"));
    assert_eq!(device.name, "Bob's laptop");
    assert_eq!(
        (
            device.workspace.as_str(),
            device.email.as_str(),
            device.subject.as_str(),
            device.role.as_str()
        ),
        ("acme", "bob@acme.test", bob.subject.as_str(), "admin")
    );
    // The device's token is Bob's: it sees his tokens, itself marked current.
    let tokens = c.client(&device.token).tokens().await.unwrap().tokens;
    assert_eq!(tokens.len(), 2, "{tokens:?}");
    let this = tokens
        .iter()
        .find(|t| t.current)
        .expect("the caller's token");
    assert_eq!(
        (this.id.as_str(), this.name.as_str()),
        (device.token_id.as_str(), "Bob's laptop")
    );

    // Once only; unknown and malformed codes are not found.
    let (status, body) = redeem(&c, &code, "again").await;
    assert_eq!((status, error_code(&body)), (410, "PAIRING_CODE_USED"));
    let unknown = format!("dpc_{}", "0".repeat(52));
    for code in [unknown.as_str(), "dpc_nope", "drv_x", "%2e%2e"] {
        let (status, body) = redeem(&c, code, "x").await;
        assert_eq!((status, error_code(&body)), (404, "NOT_FOUND"), "{code}");
    }
    // A pairing code is no bearer token.
    assert_eq!(
        drover_tests::code(c.client(&code).tokens().await),
        ErrorCode::Unauthorized
    );

    // Codes and tokens are stored hashed, and never logged.
    let db = c.database_contents().await;
    let log = c.log_text();
    for secret in [code.as_str(), device.token.as_str()] {
        assert!(
            !contains(&db, secret.as_bytes()),
            "a secret is in the database"
        );
        assert!(!log.contains(secret), "a secret is in the log");
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[tokio::test]
async fn of_two_redeems_of_one_code_at_once_exactly_one_wins() {
    let c = Coordinator::start().await;
    let bob = c.bootstrap("acme", "bob@acme.test");
    for _round in 0..3 {
        let (_, code) = pair_link(&c, &bob);
        // Each on its own task and connection: in flight at once.
        let redeems: Vec<_> = (0..6)
            .map(|i| {
                let url = format!("{}/v1/pairing-codes/{code}/redeem", c.url);
                tokio::spawn(async move {
                    let resp = reqwest::Client::new()
                        .post(url)
                        .json(&serde_json::json!({ "deviceName": format!("device {i}") }))
                        .send()
                        .await
                        .unwrap();
                    let status = resp.status().as_u16();
                    (status, resp.json::<serde_json::Value>().await.unwrap())
                })
            })
            .collect();
        let mut answers = Vec::new();
        for r in redeems {
            answers.push(r.await.unwrap());
        }
        let won: Vec<_> = answers.iter().filter(|(s, _)| *s == 201).collect();
        assert_eq!(won.len(), 1, "{answers:?}");
        for (status, body) in answers.iter().filter(|(s, _)| *s != 201) {
            assert_eq!((*status, error_code(body)), (410, "PAIRING_CODE_USED"));
        }
    }
    // Bob's first token and one per round.
    assert_eq!(bob.client.tokens().await.unwrap().tokens.len(), 4);
}

#[tokio::test]
async fn a_pairing_code_expires_after_ten_minutes() {
    let mut c = Coordinator::start().await;
    let bob = c.bootstrap("acme", "bob@acme.test");
    let (_, fresh) = pair_link(&c, &bob);
    let (_, stale) = pair_link(&c, &bob);
    let (status, _) = redeem(&c, &fresh, "now").await;
    assert_eq!(status, 201);
    // Eleven minutes later.
    c.stop().await;
    c.options
        .env
        .push(("DROVER_CLOCK_SKEW_MS", (11 * 60 * 1000).to_string()));
    c.restart().await;
    let (status, body) = redeem(&c, &stale, "later").await;
    assert_eq!((status, error_code(&body)), (410, "PAIRING_CODE_EXPIRED"));
    // A used code stays used.
    let (status, body) = redeem(&c, &fresh, "later").await;
    assert_eq!((status, error_code(&body)), (410, "PAIRING_CODE_USED"));
}

#[tokio::test]
async fn members_list_and_revoke_their_own_tokens_at_once() {
    let c = Coordinator::start().await;
    let bob = c.bootstrap("acme", "bob@acme.test");
    let eve = c.add_member("acme", "eve@acme.test", "member");
    let (_, code) = pair_link(&c, &bob);
    let (_, device) = redeem(&c, &code, "phone").await;
    let device: wire::DeviceToken = serde_json::from_value(device).unwrap();
    let phone = c.client(&device.token);
    phone.runtimes(Scope::Me).await.unwrap();

    let list = stdout_ok(&c.drover(&bob.token, &["tokens", "list"]));
    let lines: Vec<&str> = list.lines().collect();
    assert_eq!(lines.len(), 3, "a header and two tokens:\n{list}");
    assert!(
        lines[0].contains("ID") && lines[0].contains("LAST USED"),
        "{list}"
    );
    assert!(
        lines[1].trim_start().starts_with("* ") && lines[1].contains("api token"),
        "{list}"
    );
    assert!(
        !lines[2].trim_start().starts_with('*')
            && lines[2].contains(&device.token_id)
            && lines[2].contains("phone"),
        "{list}"
    );
    assert!(
        !list.contains("drv_") && !list.contains(&device.token),
        "{list}"
    );
    // `--json` is the coordinator's answer, times in Unix milliseconds.
    let json: wire::ApiTokenList = serde_json::from_str(&stdout_ok(
        &c.drover(&bob.token, &["tokens", "list", "--json"]),
    ))
    .unwrap();
    assert_eq!(json.tokens.len(), 2);
    assert!(json.tokens[0].current && json.tokens[1].id == device.token_id);
    // The table's times are for people: when made, in UTC (as `date -u`
    // reads it); when last used, how long ago.
    for (line, token) in lines[1..].iter().zip(&json.tokens) {
        let made = Command::new("date")
            .args(["-u", "-d", &format!("@{}", token.created_at / 1000)])
            .arg("+%Y-%m-%d %H:%M UTC")
            .output()
            .unwrap();
        let made = String::from_utf8(made.stdout).unwrap();
        assert!(line.contains(made.trim()), "{list}");
        assert!(line.ends_with("just now"), "{list}");
    }
    let tokens = bob.client.tokens().await.unwrap().tokens;
    let listed = tokens.iter().find(|t| t.id == device.token_id).unwrap();
    assert!(listed.last_used_at.is_some(), "{listed:?}");
    let raw = reqwest::Client::new()
        .get(format!("{}/v1/me/tokens", c.url))
        .bearer_auth(&bob.token)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(!raw.contains("drv_") && !raw.contains("hash"), "{raw}");

    // Eve can neither see nor revoke Bob's tokens.
    assert_eq!(eve.client.tokens().await.unwrap().tokens.len(), 1);
    assert_eq!(
        drover_tests::code(eve.client.revoke_token(&device.token_id).await),
        ErrorCode::NotFound
    );
    assert_eq!(
        drover_tests::code(bob.client.revoke_token("tok_nope!").await),
        ErrorCode::NotFound
    );
    phone.runtimes(Scope::Me).await.unwrap();

    // Revoked: the next request with it is refused.
    stdout_ok(&c.drover(&bob.token, &["tokens", "revoke", &device.token_id]));
    assert_eq!(
        drover_tests::code(phone.runtimes(Scope::Me).await),
        ErrorCode::Unauthorized
    );
    assert_eq!(bob.client.tokens().await.unwrap().tokens.len(), 1);
    assert_eq!(
        drover_tests::code(bob.client.revoke_token(&device.token_id).await),
        ErrorCode::NotFound
    );
}

#[tokio::test]
async fn links_name_the_coordinator_by_its_public_url() {
    let c = Coordinator::start_with(CoordinatorOptions {
        serve_args: vec![
            "--public-url".into(),
            "https://ci.example.com/drover/".into(),
        ],
        ..CoordinatorOptions::default()
    })
    .await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    let (link, code) = pair_link(&c, &admin);
    assert_eq!(
        link,
        format!("drover://pair?url=https%3A%2F%2Fci.example.com%2Fdrover&code={code}")
    );
    let join = stdout_ok(&c.drover(
        &admin.token,
        &["runtimes", "join-token", "default", "--workspace", "--link"],
    ));
    let token = join
        .trim()
        .strip_prefix("drover://join?url=https%3A%2F%2Fci.example.com%2Fdrover&ref=ws%3Aacme%3Adefault&token=")
        .unwrap_or_else(|| panic!("{join}"));
    assert!(token.starts_with("djt_"), "{join}");
    // The token in the link joins the pool.
    let joined = c.client(token).join_token_info().await.unwrap();
    assert_eq!(joined.reference, "ws:acme:default");

    // An invalid public URL stops the coordinator at start, saying why.
    for bad in ["ci.example.com", "ftp://ci.example.com", "https://x/?a=b"] {
        let out = Command::new(bin("drover-coordinator"))
            .args([
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--database",
                &c.database,
            ])
            .env("DROVER_PUBLIC_URL", bad)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{bad}");
        assert!(err.contains("public-url") && err.contains(bad), "{err}");
    }
}

/// Redeems a fresh pairing link of `m` for a device named `name`.
async fn device(c: &Coordinator, m: &Member, name: &str) -> wire::DeviceToken {
    let (_, code) = pair_link(c, m);
    let (status, body) = redeem(c, &code, name).await;
    assert_eq!(status, 201, "{body}");
    serde_json::from_value(body).unwrap()
}

/// A runner `device` pairs into the default pool of `scope`.
async fn paired_by(c: &Coordinator, device: &wire::DeviceToken, scope: Scope) -> Client {
    let paired = c
        .client(&device.token)
        .pair_runner(
            scope,
            &wire::PairRunner {
                name: Some("laptop".into()),
                runtime: None,
                labels: vec![],
            },
        )
        .await
        .unwrap();
    let runner = c.client(&paired.token);
    runner.hello(&[]).await.unwrap();
    runner
}

#[tokio::test]
async fn revoking_a_device_token_revokes_the_runners_it_paired_and_tells_the_device() {
    let c = Coordinator::start().await;
    let bob = c.bootstrap("acme", "bob@acme.test");
    let laptop = device(&c, &bob, "laptop").await;
    let phone = device(&c, &bob, "phone").await;
    let mine = paired_by(&c, &laptop, Scope::Me).await;
    let lent = paired_by(&c, &laptop, Scope::Workspace).await;
    let others = paired_by(&c, &phone, Scope::Me).await;

    stdout_ok(&c.drover(&bob.token, &["tokens", "revoke", &laptop.token_id]));
    for runner in [&mine, &lent] {
        assert_eq!(
            drover_tests::code(runner.hello(&[]).await),
            ErrorCode::Unauthorized,
            "a runner the revoked device paired still works"
        );
    }
    others
        .hello(&[])
        .await
        .expect("another device's runner is kept");
    // The device is told who signed it out, from where and when.
    let refused = c
        .client(&laptop.token)
        .runtimes(Scope::Me)
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Some(ErrorCode::Unauthorized));
    let said = refused.to_string();
    assert!(
        said.contains("this device was signed out")
            && said.contains("the drover CLI")
            && said.contains("bob@acme.test")
            && said.contains(" UTC"),
        "{said}"
    );
    assert!(!said.contains(&laptop.token), "{said}");
    // A token never known is only unknown.
    let stranger = c
        .client("drv_0000000000000000000000000000")
        .runtimes(Scope::Me)
        .await
        .unwrap_err();
    assert!(!stranger.to_string().contains("signed out"), "{stranger}");
    let audit = bob
        .client
        .audit(&wire::AuditQuery {
            action: Some("runner.revoked".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    let revoked: Vec<_> = audit
        .events
        .iter()
        .filter(|e| e.action == "runner.revoked")
        .collect();
    assert_eq!(revoked.len(), 2, "{revoked:?}");
}

#[tokio::test]
async fn removing_a_member_revokes_what_their_devices_paired_and_tells_the_devices() {
    let c = Coordinator::start().await;
    let bob = c.bootstrap("acme", "bob@acme.test");
    let eve = c.add_member("acme", "eve@acme.test", "admin");
    let laptop = device(&c, &eve, "laptop").await;
    let lent = paired_by(&c, &laptop, Scope::Workspace).await;
    let kept = paired_by(&c, &device(&c, &bob, "server").await, Scope::Workspace).await;

    bob.client.remove_member(&eve.subject).await.unwrap();
    assert_eq!(
        drover_tests::code(lent.hello(&[]).await),
        ErrorCode::Unauthorized,
        "the workspace runner a removed member's device paired still works"
    );
    kept.hello(&[]).await.expect("bob's runner is kept");
    let said = c
        .client(&laptop.token)
        .runtimes(Scope::Me)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        said.contains("this device was signed out")
            && said.contains("bob@acme.test removed eve@acme.test"),
        "{said}"
    );
}
