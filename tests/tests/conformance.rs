//! The document is the behaviour: Schemathesis (from PyPI, pinned; `tests/run.sh`
//! installs it and sets `DROVER_SCHEMATHESIS`) reads `/openapi.json` and calls
//! every operation with generated input, as an admin and as a member, and
//! checks each answer's status, content type and body against what the
//! document says of that operation. Any mismatch fails the test.

use std::path::Path;
use std::process::Command;

use drover_tests::*;

/// The checks that compare an answer with its documentation (and that no
/// input makes a 500).
const CHECKS: &str = "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance";

/// The operations that can take the caller's own rights away: revoking a
/// token (the generated calls reuse the ids a listing answered, so they
/// revoke the very token they run with), changing a role, removing a
/// member (they promote the member, then demote or remove the admin).
/// They run last, with an admin of their own.
const TAKE_RIGHTS_AWAY: [&str; 3] = ["revokeTokenMine", "updateMember", "removeMember"];

/// Runs Schemathesis on `url`'s document with `token`, and `filter`
/// (which operations), writing its report under `report`.
fn schemathesis(url: &str, token: &str, filter: &[String], report: &Path) -> (bool, String) {
    let program = std::env::var("DROVER_SCHEMATHESIS").expect(
        "DROVER_SCHEMATHESIS is not set: run tests/run.sh, which installs schemathesis \
         from PyPI in a venv and sets it to that venv's schemathesis",
    );
    let out = Command::new(program)
        .args(["run", &format!("{url}/openapi.json"), "--checks", CHECKS])
        .args(["--header", &format!("Authorization: Bearer {token}")])
        // Examples from the document, the coverage phase's boundary and
        // invalid values, and a few generated inputs per operation.
        .args([
            "--phases",
            "examples,coverage,fuzzing",
            "--max-examples",
            "10",
        ])
        // One worker: with two, Schemathesis 4.32's generation failed on a
        // KeyError inside itself (a flaky run, not an answer of ours).
        .args(["--workers", "1", "--request-timeout", "20", "--seed", "1"])
        .args(filter)
        .args(["--report", "junit", "--report-dir"])
        .arg(report)
        .env("NO_COLOR", "1")
        // Its own cache (.schemathesis/) goes beside the report, not in
        // the source tree.
        .current_dir(report.parent().expect("a report directory"))
        .output()
        .expect("run schemathesis");
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// Runs `schemathesis` off the async runtime, and fails the test with its
/// report if an answer differs from the document.
async fn check(who: &str, url: &str, token: &str, filter: Vec<String>, dir: &Path) {
    let report = dir.join(format!("report-{}", who.replace(' ', "-")));
    let (url, token) = (url.to_owned(), token.to_owned());
    let (ok, text) =
        tokio::task::spawn_blocking(move || schemathesis(&url, &token, &filter, &report))
            .await
            .unwrap();
    println!("== as {who}\n{text}");
    assert!(ok, "as {who}, an answer differs from the document:\n{text}");
    // It ran the operations, not nothing.
    assert!(text.contains("passed"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_answer_is_what_the_document_says_for_an_admin_and_a_member() {
    let c = Coordinator::start().await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    let member = c.add_member("acme", "dev@acme.test", "member");
    let other_admin = c.add_member("acme", "owner@acme.test", "admin");
    // Something to read: a runner, and a job on the workspace pool.
    let join = ws_join_token(&admin, "default").await;
    let state = TempDir::new("state");
    let _runner = RunnerProcess::join(&c.url, "self:ws", &join.token, 1, state.path(), &[]);
    c.wait_for_waiting(1).await;
    admin
        .client
        .submit(&script_job("self:ws", "echo hello"))
        .await
        .unwrap();

    let flags = |flag: &str| -> Vec<String> {
        TAKE_RIGHTS_AWAY
            .iter()
            .flat_map(|id| [flag.to_owned(), (*id).to_owned()])
            .collect()
    };
    let everything_else = flags("--exclude-operation-id");
    for (who, m) in [("member", &member), ("admin", &admin)] {
        check(who, &c.url, &m.token, everything_else.clone(), state.path()).await;
    }
    // Each kept their token and role throughout, so every operation was
    // tried as each.
    for (m, role) in [(&member, "member"), (&admin, "admin")] {
        let me = m.client.me().await.expect("the token still works");
        assert_eq!(
            (me.email.as_str(), me.role.as_str()),
            (m.email.as_str(), role)
        );
    }
    let who = "an admin changing roles, removing members and revoking tokens";
    let own = flags("--include-operation-id");
    check(who, &c.url, &other_admin.token, own, state.path()).await;

    // The generated input never made the coordinator fail inside.
    assert!(!c.log_text().contains("internal error"));
}
