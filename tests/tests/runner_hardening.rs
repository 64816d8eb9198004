//! The runner under a bad network and with its own credentials: a runner
//! cut off from the coordinator stops its job before anyone else can start
//! it; saved credentials belong to one coordinator and pool; a revoked
//! runner rejoins; secrets stay off command lines.
//!
//! (Over 500 lines: one self-contained test per network fault, sharing the fault proxy's setup.)

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use drover_tests::proxy::{Fault, Proxy};
use drover_tests::runner_core::client::Scope;
use drover_tests::runner_core::wire::{ErrorCode, JobState};
use drover_tests::*;

/// A job that records each execution as lines `<job> <attempt> start <ns>`
/// and `<job> <attempt> end <ns>` (also when stopped by SIGTERM). The first
/// attempt runs for `first_secs`; later ones end at once.
fn timed_script(record: &Path, first_secs: u32) -> String {
    let rec = record.display();
    format!(
        r#"mark() {{ echo "$DROVER_JOB_ID $DROVER_ATTEMPT $1 $(date +%s%N)" >> {rec}; }}
mark start
trap 'mark end; exit 143' TERM
if [ "$DROVER_ATTEMPT" = 1 ]; then sleep {first_secs} & wait $!; fi
mark end"#
    )
}

/// Each execution of a job as (attempt, start ns, end ns), in start order;
/// panics if two overlap in time. One with no end yet is still running.
fn executions(record: &Path) -> Vec<(u32, u128, u128)> {
    let mut runs: BTreeMap<(String, u32), (Option<u128>, Option<u128>)> = BTreeMap::new();
    for line in read_lines(record) {
        let parts: Vec<&str> = line.split(' ').collect();
        let [job, attempt, what, ns] = parts[..] else {
            panic!("bad record line {line:?}");
        };
        let run = runs
            .entry((job.to_owned(), attempt.parse().unwrap()))
            .or_default();
        let at = Some(ns.parse().unwrap());
        match what {
            "start" => run.0 = at,
            "end" => run.1 = at,
            _ => panic!("bad record line {line:?}"),
        }
    }
    let mut all: Vec<(u32, u128, u128)> = runs
        .into_iter()
        .map(|((_, attempt), (start, end))| {
            let start = start.unwrap_or_else(|| panic!("attempt {attempt} has no start"));
            let end = end.unwrap_or(u128::MAX);
            (attempt, start, end)
        })
        .collect();
    all.sort_by_key(|r| r.1);
    for pair in all.windows(2) {
        let ((a, _, a_end), (b, b_start, _)) = (pair[0], pair[1]);
        assert!(
            a_end < b_start,
            "attempt {a} was still running {} after attempt {b} started",
            match a_end {
                u128::MAX => "(it still is)".to_owned(),
                end => format!("{} ms", (end - b_start) / 1_000_000),
            }
        );
    }
    all
}

/// A coordinator with a short lease, and a runner reaching it over a
/// slowish link (100 ms each way) through a proxy, running a long job. Just
/// after a heartbeat's answer reaches the runner, `fault` hits the link
/// (the worst moment: the coordinator renewed the lease when the request
/// arrived, one wait and a round trip earlier). Then a second runner,
/// connected directly, is started. Returns the finished job's executions.
async fn cut_off_mid_job(fault: Fault) -> Vec<(u32, u128, u128)> {
    let c = Coordinator::start_with(CoordinatorOptions {
        lease_ttl_ms: 2000,
        ..CoordinatorOptions::default()
    })
    .await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    let join = ws_join_token(&admin, "default").await;
    let proxy = Proxy::start(&c.url).await;
    proxy.set(Fault::Delay(Duration::from_millis(100)));
    let dir = TempDir::new("cut-off");
    let record = dir.path().join("executions");
    let _far = RunnerProcess::join(
        &proxy.url(),
        "self:ws",
        &join.token,
        1,
        &dir.path().join("far"),
        &[],
    );
    c.wait_for_waiting(1).await;
    let job = admin
        .client
        .submit(&script_job("self:ws", &timed_script(&record, 60)))
        .await
        .unwrap();
    wait_state(&admin.client, &job.id, JobState::Running).await;
    eventually("the first attempt to start", DEADLINE, || {
        let started = read_lines(&record).iter().any(|l| l.contains(" 1 start "));
        async move { started.then_some(()) }
    })
    .await;
    let heard = proxy.answers();
    eventually("a heartbeat answer", DEADLINE, || {
        let n = proxy.answers();
        async move { (n > heard).then_some(()) }
    })
    .await;
    proxy.set(fault);
    let _near = RunnerProcess::join(
        &c.url,
        "self:ws",
        &join.token,
        1,
        &dir.path().join("near"),
        &[],
    );
    let done = wait_done(&admin.client, &job.id).await;
    assert_eq!(done.state, JobState::Succeeded, "{done:?}");
    // The last attempt's end is written just before it reports.
    let runs = executions(&record);
    assert!(runs.len() >= 2, "the job ran again elsewhere: {runs:?}");
    runs
}

#[tokio::test]
async fn a_partitioned_runner_stops_its_job_before_the_coordinator_hands_it_out_again() {
    let runs = cut_off_mid_job(Fault::BlackHole).await;
    assert_eq!(runs[0].0, 1);
}

#[tokio::test]
async fn a_runner_whose_connections_are_reset_stops_its_job_before_it_is_handed_out_again() {
    let runs = cut_off_mid_job(Fault::Reset).await;
    assert_eq!(runs[0].0, 1);
}

#[tokio::test]
async fn a_link_slower_than_the_lease_gives_the_job_up_without_overlap() {
    // Each way slower than the whole TTL: no heartbeat arrives in time.
    let runs = cut_off_mid_job(Fault::Delay(Duration::from_millis(2500))).await;
    assert_eq!(runs[0].0, 1);
}

#[tokio::test]
async fn a_slow_link_keeps_the_lease() {
    // A 3 s lease over a link with a 200 ms round trip.
    let c = Coordinator::start().await;
    assert_eq!(c.options.lease_ttl_ms, 3000);
    let admin = c.bootstrap("acme", "admin@acme.test");
    let join = ws_join_token(&admin, "default").await;
    let proxy = Proxy::start(&c.url).await;
    proxy.set(Fault::Delay(Duration::from_millis(100)));
    let dir = TempDir::new("slow");
    let record = dir.path().join("executions");
    let _r = RunnerProcess::join(&proxy.url(), "self:ws", &join.token, 1, dir.path(), &[]);
    c.wait_for_waiting(1).await;
    // Longer than two TTLs, so it lives on renewals over the slow link.
    let job = admin
        .client
        .submit(&script_job("self:ws", &timed_script(&record, 5)))
        .await
        .unwrap();
    let done = wait_done(&admin.client, &job.id).await;
    assert_eq!((done.state, done.attempt), (JobState::Succeeded, 1));
    assert_eq!(executions(&record).len(), 1);
}

/// `drover <args>` with `env`, off the test's runtime thread.
async fn drover(url: &str, args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    let mut cmd = Command::new(bin("drover"));
    cmd.args(args)
        .env("DROVER_URL", url)
        .env_remove("DROVER_TOKEN");
    for (k, v) in env {
        cmd.env(k, v);
    }
    tokio::task::spawn_blocking(move || cmd.output().expect("run drover"))
        .await
        .unwrap()
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[tokio::test]
async fn a_state_directory_of_another_pool_is_refused_not_used() {
    let c = Coordinator::start().await;
    let acme = c.bootstrap("acme", "admin@acme.test");
    let globex = c.bootstrap("globex", "admin@globex.test");
    let acme_join = ws_join_token(&acme, "default").await;
    let globex_join = ws_join_token(&globex, "default").await;
    let state = TempDir::new("state");

    let mut first = RunnerProcess::join(&c.url, "self:ws", &acme_join.token, 1, state.path(), &[]);
    first.wait_for_lines("online", 1).await;
    first.kill9().await;

    // The same ref and state directory, with globex's join token.
    let mut second =
        RunnerProcess::join(&c.url, "self:ws", &globex_join.token, 1, state.path(), &[]);
    let status = second.wait_exit().await;
    assert!(!status.success());
    let said = second.lines().join("\n");
    let file = state.path().join("runners").join("self_ws-0.json");
    assert!(
        said.contains(&globex_join.runtime.id)
            && said.contains(&file.display().to_string())
            && said.contains("--state-dir"),
        "says which pool, which file and what to do: {said}"
    );
    assert!(!said.contains("online"), "{said}");
    let roster = globex
        .client
        .runners(drover_tests::runner_core::client::RunnerListing::Roster)
        .await
        .unwrap();
    assert!(roster.runners.is_empty(), "{roster:?}");

    // With a state directory of its own, globex's runner joins.
    let own = TempDir::new("state");
    let third = RunnerProcess::join(&c.url, "self:ws", &globex_join.token, 1, own.path(), &[]);
    third.wait_for_lines("online", 1).await;
    let job = globex
        .client
        .submit(&script_job("self:ws", "true"))
        .await
        .unwrap();
    assert_eq!(
        wait_done(&globex.client, &job.id).await.state,
        JobState::Succeeded
    );

    // The join token names its pool, and only to the join token.
    let info = c
        .client(&globex_join.token)
        .join_token_info()
        .await
        .unwrap();
    assert_eq!(
        (info.runtime_id.as_str(), info.reference.as_str()),
        (
            globex_join.runtime.id.as_str(),
            globex_join.runtime.reference.as_str()
        )
    );
    assert_eq!(
        code(c.client(&globex.token).join_token_info().await),
        ErrorCode::Forbidden
    );
    assert_eq!(
        code(c.client("djt_nope").join_token_info().await),
        ErrorCode::Unauthorized
    );
}

#[tokio::test]
async fn a_revoked_runner_rejoins_with_a_fresh_join_token_or_says_which_file_to_delete() {
    let c = Coordinator::start().await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    let join = ws_join_token(&admin, "default").await;
    let state = TempDir::new("state");
    let mut runner = RunnerProcess::join(&c.url, "self:ws", &join.token, 1, state.path(), &[]);
    runner.wait_for_lines("online", 1).await;
    let roster = admin
        .client
        .runners(drover_tests::runner_core::client::RunnerListing::Roster)
        .await
        .unwrap();
    let old = roster.runners[0].id.clone();
    admin
        .client
        .revoke_runner(Scope::Workspace, &old)
        .await
        .unwrap();
    let status = runner.wait_exit().await;
    assert!(!status.success());
    let file = state.path().join("runners").join("self_ws-0.json");
    assert!(
        runner
            .lines()
            .iter()
            .any(|l| l.contains(&file.display().to_string())),
        "names the saved credential: {:?}",
        runner.lines()
    );

    // With no valid join token, it says which file to delete.
    let mut stuck = RunnerProcess::join(&c.url, "self:ws", "djt_expired", 1, state.path(), &[]);
    assert!(!stuck.wait_exit().await.success());
    let said = stuck.lines().join("\n");
    assert!(
        said.contains(&old) && said.contains(&file.display().to_string()),
        "{said}"
    );

    // A fresh join token: it joins again and replaces the file.
    let fresh = ws_join_token(&admin, "default").await;
    let again = RunnerProcess::join(&c.url, "self:ws", &fresh.token, 1, state.path(), &[]);
    again.wait_for_lines("online", 1).await;
    let saved = std::fs::read_to_string(&file).unwrap();
    assert!(!saved.contains(&old), "{saved}");
    let job = admin
        .client
        .submit(&script_job("self:ws", "true"))
        .await
        .unwrap();
    assert_eq!(
        wait_done(&admin.client, &job.id).await.state,
        JobState::Succeeded
    );
}

/// A runner started before its coordinator (at boot, say) waits for it,
/// saying so, and joins once it is up.
#[tokio::test]
async fn a_runner_started_before_its_coordinator_waits_for_it() {
    let mut c = Coordinator::start().await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    let runner = pair(&admin, Scope::Workspace, None, "r", &[]).await;
    let join = ws_join_token(&admin, "default").await;
    let state = TempDir::new("state");
    c.stop().await;
    // A paired runner, and one that joins with a join token.
    let paired = RunnerProcess::paired(&c.url, &runner.token, &[]);
    let joined = RunnerProcess::join(&c.url, "self:ws", &join.token, 1, state.path(), &[]);
    let waiting = format!("coordinator at {} not reachable (", c.url);
    paired.wait_for_lines(&waiting, 2).await;
    joined.wait_for_lines(&waiting, 2).await;
    assert!(
        paired.lines().iter().any(|l| l.contains("; retrying in ")),
        "{:?}",
        paired.lines()
    );
    c.restart().await;
    paired.wait_for_lines(": online", 1).await;
    joined.wait_for_lines(": online", 1).await;
    for _ in 0..2 {
        let job = admin
            .client
            .submit(&script_job("self:ws", "echo hi"))
            .await
            .unwrap();
        assert_eq!(
            wait_done(&admin.client, &job.id).await.state,
            JobState::Succeeded
        );
    }
}

#[tokio::test]
async fn tokens_and_secrets_stay_off_the_command_line() {
    let c = Coordinator::start().await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    let join = ws_join_token(&admin, "default").await;
    let dir = TempDir::new("secrets");

    // A runner given its join token in a file: only one its owner alone may
    // read and write, as ssh wants of a key.
    let token_file = dir.path().join("join-token");
    std::fs::write(&token_file, format!("{}\n", join.token)).unwrap();
    let state = dir.path().join("state");
    let runner_args = [
        "--join".to_owned(),
        "self:ws".to_owned(),
        "--token-file".to_owned(),
        token_file.display().to_string(),
        "--state-dir".to_owned(),
        state.display().to_string(),
    ];
    let runner_args: Vec<&str> = runner_args.iter().map(String::as_str).collect();
    for mode in [0o644, 0o660, 0o606] {
        std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(mode)).unwrap();
        let mut refused = RunnerProcess::spawn(&c.url, &runner_args);
        let status = refused.wait_exit().await;
        assert!(!status.success(), "mode {mode:o} accepted");
        let chmod = format!("chmod 600 {}", token_file.display());
        assert!(
            refused.lines().iter().any(|l| l.contains(&chmod)),
            "{:?}",
            refused.lines()
        );
    }
    std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let _r = RunnerProcess::spawn(&c.url, &runner_args);
    c.wait_for_waiting(1).await;

    // A member token in a file; env from the caller's environment and a file.
    let member_file = dir.path().join("member-token");
    std::fs::write(&member_file, &admin.token).unwrap();
    let env_file = dir.path().join("job.env");
    std::fs::write(
        &env_file,
        "# the job's settings\n\nFROM_FILE=one=1\nOVERRIDDEN=file\n",
    )
    .unwrap();
    let out = drover(
        &c.url,
        &[
            "submit",
            "--token-file",
            &member_file.display().to_string(),
            "--runtime",
            "self:ws",
            "--env",
            "SECRET",
            "--env-file",
            &env_file.display().to_string(),
            "--env",
            "OVERRIDDEN=flag",
            "--wait",
            "--",
            "sh",
            "-c",
            "echo \"$SECRET|$FROM_FILE|$OVERRIDDEN\"",
        ],
        // The file wins over the environment.
        &[("SECRET", "s3cret"), ("DROVER_TOKEN", "drv_not_this_one")],
    )
    .await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout} {}", stderr(&out));
    assert!(stdout.contains("s3cret|one=1|flag"), "{stdout}");

    // A missing variable, a bad env file, an empty token file: clear errors.
    let unset = drover(
        &c.url,
        &[
            "submit",
            "--runtime",
            "self:ws",
            "--env",
            "NOT_SET_ANYWHERE",
            "--",
            "true",
        ],
        &[("DROVER_TOKEN", &admin.token)],
    )
    .await;
    assert_eq!(unset.status.code(), Some(2));
    assert!(
        stderr(&unset).contains("NOT_SET_ANYWHERE is not set"),
        "{}",
        stderr(&unset)
    );
    std::fs::write(&env_file, "GOOD=1\nno equals sign\n").unwrap();
    let bad = drover(
        &c.url,
        &[
            "submit",
            "--runtime",
            "self:ws",
            "--env-file",
            &env_file.display().to_string(),
            "--",
            "true",
        ],
        &[("DROVER_TOKEN", &admin.token)],
    )
    .await;
    assert!(
        stderr(&bad).contains("line 2 is not KEY=VALUE"),
        "{}",
        stderr(&bad)
    );
    std::fs::write(&member_file, "\n").unwrap();
    let empty = drover(
        &c.url,
        &[
            "jobs",
            "list",
            "--token-file",
            &member_file.display().to_string(),
        ],
        &[],
    )
    .await;
    assert!(stderr(&empty).contains("is empty"), "{}", stderr(&empty));
    assert_eq!(
        admin.client.jobs(None, 10).await.unwrap().jobs.len(),
        1,
        "nothing was submitted by the failed calls"
    );
}

#[tokio::test]
async fn drover_submit_retries_a_lost_answer_with_the_same_idempotency_key() {
    let c = Coordinator::start().await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    pair(&admin, Scope::Workspace, None, "r1", &[]).await;
    // The submit reaches the coordinator, but its answers are lost.
    let proxy = Proxy::start(&c.url).await;
    proxy.set(Fault::LoseAnswers);
    let (url, token) = (proxy.url(), admin.token.clone());
    let submit = tokio::spawn(async move {
        drover(
            &url,
            &["submit", "--runtime", "self:ws", "--", "true"],
            &[("DROVER_TOKEN", &token)],
        )
        .await
    });
    let keys = |requests: Vec<u8>| -> Vec<String> {
        String::from_utf8_lossy(&requests)
            .lines()
            .filter_map(|l| {
                let (name, value) = l.split_once(':')?;
                name.eq_ignore_ascii_case("idempotency-key")
                    .then(|| value.trim().to_owned())
            })
            .collect()
    };
    eventually("the submit to be sent twice", DEADLINE, || {
        let sent = keys(proxy.requests()).len();
        async move { (sent >= 2).then_some(()) }
    })
    .await;
    proxy.set(Fault::Pass);
    let out = submit.await.unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("retrying"), "{}", stderr(&out));
    let keys = keys(proxy.requests());
    assert!(keys.len() >= 2, "{keys:?}");
    assert!(
        keys[0].len() == 32 && keys[0].chars().all(|c| c.is_ascii_hexdigit()),
        "128 random bits in hex: {keys:?}"
    );
    assert!(keys.iter().all(|k| *k == keys[0]), "one key: {keys:?}");
    let id = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    assert!(id.starts_with("job_"), "{id}");
    // Every try reached the coordinator, and one job was made.
    let jobs = admin.client.jobs(None, 10).await.unwrap().jobs;
    assert_eq!(
        jobs.iter().map(|j| j.id.as_str()).collect::<Vec<_>>(),
        [id.as_str()],
        "{} tries made one job",
        keys.len()
    );

    // Another submit is another job, with another key.
    let again = drover(
        &c.url,
        &["submit", "--runtime", "self:ws", "--", "true"],
        &[("DROVER_TOKEN", &admin.token)],
    )
    .await;
    let other = String::from_utf8_lossy(&again.stdout).trim().to_owned();
    assert!(other.starts_with("job_") && other != id, "{other}");
}

/// Runs one statement on the coordinator's database, behind its back.
async fn tamper(c: &Coordinator, statement: &str) {
    use sqlx::Connection as _;
    match c.options.backend {
        Backend::Sqlite => {
            let mut conn = sqlx::SqliteConnection::connect(&c.database).await.unwrap();
            sqlx::Executor::execute(&mut conn, statement).await.unwrap();
        }
        Backend::Postgres => {
            let mut conn = sqlx::PgConnection::connect(&c.database).await.unwrap();
            sqlx::Executor::execute(&mut conn, statement).await.unwrap();
        }
    }
}

#[tokio::test]
async fn a_job_with_nothing_to_run_is_refused_and_the_runner_goes_on() {
    let c = Coordinator::start().await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    let join = ws_join_token(&admin, "default").await;
    // Queued while no runner is online, then emptied in the database: the
    // coordinator leases a job with neither a command nor a script.
    pair(&admin, Scope::Workspace, None, "offline", &[]).await;
    let broken = admin
        .client
        .submit(&script_job("self:ws", "true"))
        .await
        .unwrap();
    tamper(
        &c,
        &format!("UPDATE jobs SET spec = '{{}}' WHERE id = '{}'", broken.id),
    )
    .await;
    let state = TempDir::new("state");
    let runner = RunnerProcess::join(&c.url, "self:ws", &join.token, 1, state.path(), &[]);
    let done = wait_done(&admin.client, &broken.id).await;
    assert_eq!(done.state, JobState::Failed);
    let error = done.error.unwrap_or_default();
    assert!(
        error.contains("refused") && error.contains("neither a command nor a script"),
        "{error}"
    );
    runner.wait_for_lines("refused job", 1).await;

    // Still running, and running jobs.
    let fine = admin
        .client
        .submit(&script_job("self:ws", "true"))
        .await
        .unwrap();
    assert_eq!(
        wait_done(&admin.client, &fine.id).await.state,
        JobState::Succeeded
    );
}
