//! The document is the behaviour: Schemathesis (from PyPI, pinned; `tests/run.sh`
//! installs it and sets `DROVER_SCHEMATHESIS`) reads `/openapi.json` and calls
//! every operation with generated input, as an admin and as a member, and
//! checks each answer's status, content type and body against what the
//! document says of that operation. Any mismatch fails the test.

use std::process::Command;

use drover_tests::*;

/// The checks that compare an answer with its documentation (and that no
/// input makes a 500).
const CHECKS: &str = "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance";

fn schemathesis(url: &str, token: &str, report: &std::path::Path) -> (bool, String) {
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
        .args(["--workers", "2", "--request-timeout", "20", "--seed", "1"])
        // A log follow is a stream with no end while its job is alive.
        .args(["--exclude-path-regex", "^/mcp$"])
        .args(["--report", "junit", "--report-dir"])
        .arg(report)
        .env("NO_COLOR", "1")
        .output()
        .expect("run schemathesis");
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_answer_is_what_the_document_says_for_an_admin_and_a_member() {
    let c = Coordinator::start().await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    let member = c.add_member("acme", "dev@acme.test", "member");
    // Something to read: a job on the workspace pool, and a runner.
    let join = ws_join_token(&admin, "default").await;
    let state = TempDir::new("state");
    let _runner = RunnerProcess::join(&c.url, "self:ws", &join.token, 1, state.path(), &[]);
    c.wait_for_waiting(1).await;

    for (who, token) in [("member", &member.token), ("admin", &admin.token)] {
        let report = state.path().join(format!("report-{who}"));
        let (url, token, at) = (c.url.clone(), token.clone(), report.clone());
        let (ok, text) = tokio::task::spawn_blocking(move || schemathesis(&url, &token, &at))
            .await
            .unwrap();
        println!("== as {who}\n{text}");
        assert!(ok, "as {who}, an answer differs from the document:\n{text}");
        // It ran the operations, not nothing.
        assert!(text.contains("passed"), "{text}");
    }
    // The generated input never made the coordinator fail inside.
    assert!(!c.log_text().contains("internal error"));
}
