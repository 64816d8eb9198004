//! `drover.exe`, the runner as built for Windows (x86_64-pc-windows-gnu),
//! under Wine: it joins a coordinator on this machine and runs `cmd` jobs —
//! one that succeeds, one that fails with its exit code, and a long one
//! that started a process of its own and is cancelled: the Job Object ends
//! both, and no process of it is left (seen from Linux, where Wine's
//! processes are ordinary ones).
//!
//! tests/run.sh builds `drover.exe` and a Wine prefix (tests/wine.sh) and
//! runs this in its SQLite pass with `DROVER_WINDOWS_CLI` and `WINEPREFIX`
//! set; anywhere else it fails, saying so.

use std::path::PathBuf;

use drover_tests::runner_core::client::Scope;
use drover_tests::runner_core::wire::{JobState, SubmitJob};
use drover_tests::*;

/// The Linux processes whose command line holds `marker`.
fn processes_with(marker: &str) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.parse::<u32>().is_ok())
        })
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains(marker))
        .collect()
}

#[tokio::test]
async fn drover_exe_runs_cmd_jobs_and_leaves_nothing_after_a_cancel_under_wine() {
    let exe = std::env::var_os("DROVER_WINDOWS_CLI").map(PathBuf::from).expect(
        "DROVER_WINDOWS_CLI names drover.exe (tests/run.sh builds it and sets this with WINEPREFIX)",
    );
    let prefix = std::env::var("WINEPREFIX").expect("WINEPREFIX: a Wine prefix (tests/wine.sh)");
    assert!(exe.exists(), "{} is missing", exe.display());
    let c = Coordinator::start().await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    let runner = pair(&admin, Scope::Workspace, None, "win", &[]).await;
    let state = TempDir::new("wine-state");
    let args: Vec<String> = [
        exe.to_str().unwrap(),
        "runner",
        "--url",
        &c.url,
        "--token",
        &runner.token,
        "--state-dir",
        state.path().to_str().unwrap(),
        "--kill-grace",
        "2",
        "--max-backoff-ms",
        "500",
    ]
    .map(String::from)
    .to_vec();
    let env: Vec<(String, String)> = [
        ("WINEPREFIX", prefix),
        ("WINEDEBUG", "-all".to_owned()),
        ("PATH", std::env::var("PATH").unwrap_or_default()),
        ("HOME", std::env::var("HOME").unwrap_or_default()),
    ]
    .map(|(k, v)| (k.to_owned(), v))
    .to_vec();
    let wine = std::env::var("DROVER_WINE").unwrap_or_else(|_| "wine".into());
    let _runner = RunnerProcess::exact(&PathBuf::from(wine), &args, &env);
    let on_windows = |command: &[&str]| SubmitJob {
        runtime: "self:ws".into(),
        command: command.iter().map(|s| s.to_string()).collect(),
        requires: vec!["os=windows".into()],
        ..SubmitJob::default()
    };

    let hello = admin
        .client
        .submit(&on_windows(&["cmd", "/c", "echo hello from windows"]))
        .await
        .unwrap();
    let done = wait_done(&admin.client, &hello.id).await;
    assert_eq!(
        (done.state, done.exit_code),
        (JobState::Succeeded, Some(0)),
        "{done:?}"
    );
    assert_eq!(
        admin.client.logs(&hello.id).await.unwrap().trim(),
        "hello from windows"
    );

    let failing = admin
        .client
        .submit(&on_windows(&["cmd", "/c", "exit 7"]))
        .await
        .unwrap();
    let done = wait_done(&admin.client, &failing.id).await;
    assert_eq!(
        (done.state, done.exit_code),
        (JobState::Failed, Some(7)),
        "{done:?}"
    );

    // A long job: a script (a batch file under cmd.exe) that starts a ping
    // of its own in the background, then runs another. Ping's count marks
    // both as this test's.
    let marker = "123457";
    let script = format!(
        "start /b ping -n {marker} 127.0.0.1 >NUL\necho started\nping -n {marker} 127.0.0.1 >NUL"
    );
    let long = admin
        .client
        .submit(&SubmitJob {
            script: Some(script),
            ..on_windows(&[])
        })
        .await
        .unwrap();
    wait_state(&admin.client, &long.id, JobState::Running).await;
    eventually("both of the job's pings to run", DEADLINE, || async {
        (processes_with(marker).len() >= 2).then_some(())
    })
    .await;
    assert!(
        admin
            .client
            .cancel(&long.id)
            .await
            .unwrap()
            .cancel_requested
    );
    let done = wait_done(&admin.client, &long.id).await;
    assert_eq!(done.state, JobState::Cancelled, "{done:?}");
    eventually(
        "no process of the cancelled job to be left",
        DEADLINE,
        || async { processes_with(marker).is_empty().then_some(()) },
    )
    .await;
    assert!(
        admin
            .client
            .logs(&long.id)
            .await
            .unwrap()
            .contains("started"),
        "the job's output came through"
    );
}
