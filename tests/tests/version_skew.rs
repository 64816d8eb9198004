//! Version skew: clients name their protocol (`drover-protocol`) and version
//! (`drover-client`) on every request; a coordinator refuses a protocol
//! outside the range it serves with `426`, plainly, and serves requests
//! that name none. Both directions are crafted headers against a real
//! coordinator; the real `drover` binary's own requests are checked
//! against a stand-in for a coordinator of another version (only this
//! version can be built here), which answers every request `426`.

use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

use axum::http::StatusCode;
use drover_tests::runner_core::wire::{
    self, CLIENT_HEADER, CLIENT_ID, ErrorBody, ErrorCode, OLDEST_PROTOCOL, PROTOCOL_HEADER,
    PROTOCOL_VERSION, VERSION,
};
use drover_tests::*;
use serde_json::json;

/// A request with these version headers (`None`: left out); its status and body.
async fn get(
    url: &str,
    token: Option<&str>,
    protocol: Option<&str>,
    client: Option<&str>,
) -> (u16, serde_json::Value) {
    let mut req = reqwest::Client::new().get(url);
    if let Some(token) = token {
        req = req.bearer_auth(token);
    }
    if let Some(p) = protocol {
        req = req.header(PROTOCOL_HEADER, p);
    }
    if let Some(c) = client {
        req = req.header(CLIENT_HEADER, c);
    }
    let resp = req.send().await.expect("send");
    let status = resp.status().as_u16();
    (status, resp.json().await.expect("a JSON answer"))
}

fn refusal(body: &serde_json::Value) -> (ErrorCode, String) {
    let e: ErrorBody = serde_json::from_value(body.clone()).expect("the error envelope");
    (e.error.code, e.error.message)
}

#[tokio::test]
async fn an_older_or_newer_protocol_is_refused_plainly_and_none_is_served() {
    let c = Coordinator::start().await;
    let admin = c.bootstrap("skew", "admin@skew.test");
    let me = format!("{}/v1/me", c.url);
    let token = Some(admin.token.as_str());

    // Older than the oldest served: 426 UPGRADE_REQUIRED naming the version to install.
    let old = (OLDEST_PROTOCOL - 1).to_string();
    let (status, body) = get(&me, token, Some(&old), Some("drover/0.0.1")).await;
    assert_eq!(status, 426, "{body}");
    let (code, message) = refusal(&body);
    assert_eq!(code, ErrorCode::UpgradeRequired, "{message}");
    assert!(
        message.contains(&format!("upgrade to drover {VERSION}"))
            && message.contains("drover/0.0.1"),
        "{message}"
    );

    // Newer than it knows: 426 COORDINATOR_TOO_OLD, saying so.
    let new = (PROTOCOL_VERSION + 1).to_string();
    let (status, body) = get(&me, token, Some(&new), Some("drover/99.0.0")).await;
    assert_eq!(status, 426, "{body}");
    let (code, message) = refusal(&body);
    assert_eq!(code, ErrorCode::CoordinatorTooOld, "{message}");
    assert!(
        message.contains(&format!("this coordinator (v{VERSION}"))
            && message.contains("drover/99.0.0")
            && message.contains(&format!("upgrade the coordinator, or use drover {VERSION}")),
        "{message}"
    );

    // On the runner protocol too, before any credential is looked at.
    let (status, body) = get(
        &format!("{}/v1/runner/join-token", c.url),
        None,
        Some(&new),
        None,
    )
    .await;
    assert_eq!(
        (status, refusal(&body).0),
        (426, ErrorCode::CoordinatorTooOld)
    );

    // No header (curl, scripts, MCP clients), or this protocol: served.
    assert_eq!(get(&me, token, None, None).await.0, 200);
    let this = PROTOCOL_VERSION.to_string();
    assert_eq!(get(&me, token, Some(&this), Some(CLIENT_ID)).await.0, 200);

    // /healthz answers any client, with the version and the range served.
    let (status, health) = get(&format!("{}/healthz", c.url), None, Some(&new), None).await;
    assert_eq!(status, 200, "{health}");
    assert_eq!(health["version"], VERSION, "{health}");
    let range: wire::ProtocolRange = serde_json::from_value(health["protocol"].clone()).unwrap();
    assert_eq!(range, wire::ProtocolRange::this_build());
}

/// What the stand-in saw of each request: its path, protocol and client headers.
type Seen = Arc<Mutex<Vec<(String, Option<String>, Option<String>)>>>;

const NEWER: &str = "this client (drover/0.1.0, protocol 1) is older than this coordinator (v9.0.0) serves (protocol 9): upgrade to drover 9.0.0";

/// A stand-in for a coordinator upgraded past this build's protocol under
/// its runners: it still says hello (as the old one did before the
/// upgrade), and answers every other request `426 UPGRADE_REQUIRED`.
async fn newer_coordinator(seen: Seen) -> String {
    let app = axum::Router::new().fallback(move |req: axum::extract::Request| {
        let seen = seen.clone();
        async move {
            let header = |name| {
                req.headers()
                    .get(name)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned)
            };
            let path = req.uri().path().to_owned();
            seen.lock().unwrap().push((
                path.clone(),
                header(PROTOCOL_HEADER),
                header(CLIENT_HEADER),
            ));
            if path == "/v1/runner/hello" {
                let hello = json!({"runnerId": "rnr_1", "runtimeId": "rt_1"});
                return (StatusCode::OK, axum::Json(hello));
            }
            (
                StatusCode::UPGRADE_REQUIRED,
                axum::Json(json!({"error": {"code": "UPGRADE_REQUIRED", "message": NEWER}})),
            )
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_and_the_runner_name_their_version_and_stop_on_426() {
    // `--version` says the version and the protocol.
    let out = Command::new(bin("drover"))
        .arg("--version")
        .output()
        .unwrap();
    assert_eq!(
        stdout_ok(&out).trim(),
        format!("drover {VERSION} (protocol {PROTOCOL_VERSION})")
    );
    let out = Command::new(bin("drover-coordinator"))
        .arg("--version")
        .output()
        .unwrap();
    let served = if OLDEST_PROTOCOL == PROTOCOL_VERSION {
        format!("protocol {PROTOCOL_VERSION}")
    } else {
        format!("protocols {OLDEST_PROTOCOL} to {PROTOCOL_VERSION}")
    };
    assert_eq!(
        stdout_ok(&out).trim(),
        format!("drover-coordinator {VERSION} (serves {served})")
    );

    // A real coordinator of this version serves the CLI's requests.
    let c = Coordinator::start().await;
    let admin = c.bootstrap("skew", "admin@skew.test");
    assert!(stdout_ok(&c.drover(&admin.token, &["whoami"])).contains("admin@skew.test"));

    // The CLI names its protocol and version, and says what a newer
    // coordinator answered, in its words.
    let seen = Seen::default();
    let url = newer_coordinator(seen.clone()).await;
    let out = Command::new(bin("drover"))
        .args(["--url", &url, "--token", "drv_x", "whoami"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(NEWER), "{stderr}");
    let named = |s: &(String, Option<String>, Option<String>)| {
        s.1.as_deref() == Some(&PROTOCOL_VERSION.to_string())
            && s.2.as_deref() == Some(&format!("drover/{VERSION}"))
    };
    {
        let seen = seen.lock().unwrap();
        assert!(seen.len() == 1 && named(&seen[0]), "{seen:?}");
    }

    // A runner whose coordinator was upgraded past it stops at once,
    // saying why, rather than retrying.
    seen.lock().unwrap().clear();
    let dir = TempDir::new("skew-runner");
    let mut runner = Command::new(bin("drover"))
        .args(["runner", "--url", &url, "--max-backoff-ms", "100"])
        .arg("--work-dir")
        .arg(dir.path().join("work"))
        .arg("--state-dir")
        .arg(dir.path().join("state"))
        .env("DROVER_TOKEN", "rnr_x")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let status = wait_exit(&mut runner, DEADLINE).await;
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut runner.stderr.take().unwrap(), &mut stderr).unwrap();
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(stderr.contains(&format!("stopped: {NEWER}")), "{stderr}");
    let seen = seen.lock().unwrap();
    let refused = seen.iter().filter(|s| s.0 != "/v1/runner/hello").count();
    assert!(refused == 1 && seen.iter().all(named), "{seen:?}");
}
