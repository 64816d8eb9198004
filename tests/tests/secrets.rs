//! Job env at rest: sealed in the database, opened only into the lease,
//! erased when the job ends, rotatable; the database files private.

use std::io::{BufRead as _, BufReader};
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use drover_tests::runner_core::client::Scope;
use drover_tests::runner_core::wire::{Env, JobState, SubmitJob};
use drover_tests::*;

/// A value that must never be stored or logged in plain text (lower case;
/// the jobs print it upper-cased, so their logs prove they saw it).
fn marker() -> String {
    format!("drover-secret-{}", &new_secret_key()[..20])
}

/// A job that prints `$SECRET` upper-cased.
fn secret_job(runtime: &str, secret: &str, requires: &[&str]) -> SubmitJob {
    SubmitJob {
        env: Env::from([("SECRET".to_owned(), secret.to_owned())]),
        requires: requires.iter().map(|s| s.to_string()).collect(),
        ..script_job(runtime, "printf '%s' \"$SECRET\" | tr a-z A-Z")
    }
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

/// Each job's sealed env (`None` once erased), by job id.
async fn sealed(c: &Coordinator, job: &str) -> Option<String> {
    let rows = c
        .query_text(&format!("SELECT env_sealed FROM jobs WHERE id = '{job}'"))
        .await;
    assert_eq!(rows.len(), 1, "job {job}");
    rows.into_iter().next().flatten()
}

fn key_id(sealed: &str) -> &str {
    sealed.split(':').nth(1).expect("v1:<key id>:…")
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o777
}

async fn run_and_check(c: &Coordinator, admin: &Member, job: &str, secret: &str) {
    let done = wait_done(&admin.client, job).await;
    assert_eq!(done.state, JobState::Succeeded, "{done:?}");
    let logs = admin.client.logs(job).await.unwrap();
    assert_eq!(logs, secret.to_uppercase(), "the job saw its env");
    assert_eq!(sealed(c, job).await, None, "a finished job keeps no env");
}

#[tokio::test]
async fn job_env_is_sealed_at_rest_opened_only_into_the_lease_and_erased() {
    let mut c = Coordinator::start().await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    let paired = pair(&admin, Scope::Workspace, None, "plain", &[]).await;
    let secret = marker();

    // Two jobs wait (no runner is running): `now` and `later`, which only a
    // runner labelled `later` may run.
    let now = admin
        .client
        .submit(&secret_job("self:ws", &secret, &[]))
        .await
        .unwrap();
    let later = admin
        .client
        .submit(&secret_job("self:ws", &secret, &["later"]))
        .await
        .unwrap();
    // A cancelled job keeps no env either.
    let cancelled = admin
        .client
        .submit(&secret_job("self:ws", &secret, &["never"]))
        .await
        .unwrap();
    assert!(sealed(&c, &cancelled.id).await.is_some());
    admin.client.cancel(&cancelled.id).await.unwrap();
    assert_eq!(sealed(&c, &cancelled.id).await, None);
    let old_key = sealed(&c, &now.id).await.expect("sealed env");
    let old_key = key_id(&old_key).to_owned();
    assert!(!contains(&c.database_contents().await, &secret));

    // Job reads never show env values.
    let http = reqwest::Client::new();
    for path in [format!("/v1/jobs/{}", now.id), "/v1/jobs".to_owned()] {
        let body = http
            .get(format!("{}{path}", c.url))
            .bearer_auth(&admin.token)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert!(body.contains(&now.id), "{body}");
        assert!(!body.contains(&secret), "{path} shows the env: {body}");
    }

    // Rotate: a new current key, the old one kept to open what it sealed.
    c.stop().await;
    let old_ring = std::fs::read_to_string(c.secret_key_file()).unwrap();
    let new_key = format!("new:{}", new_secret_key());
    let rotated = c.dir.path().join("rotated.key");
    write_secret_key_file(&rotated, &[&new_key, &old_ring]);
    c.options.secret_key_file = Some(rotated);
    c.restart().await;
    let fresh = admin
        .client
        .submit(&secret_job("self:ws", &secret, &[]))
        .await
        .unwrap();
    assert_eq!(key_id(&sealed(&c, &fresh.id).await.unwrap()), "new");

    // The runner gets both: one sealed under the old key, one under the new.
    let runner = RunnerProcess::paired(&c.url, &paired.token, &[]);
    run_and_check(&c, &admin, &now.id, &secret).await;
    run_and_check(&c, &admin, &fresh.id, &secret).await;

    // Re-seal what is left under the current key; then the old key can go.
    let out = c.rotate_secrets();
    assert!(out.contains("re-sealed the env of 1 jobs"), "{out}");
    let left = c
        .query_text("SELECT env_sealed FROM jobs WHERE env_sealed IS NOT NULL")
        .await;
    assert_eq!(left.len(), 1);
    assert!(
        left.iter()
            .flatten()
            .all(|s| key_id(s) == "new" && key_id(s) != old_key),
        "{left:?}"
    );
    c.stop().await;
    let only_new = c.dir.path().join("only-new.key");
    write_secret_key_file(&only_new, &[&new_key]);
    c.options.secret_key_file = Some(only_new);
    c.restart().await;
    let labelled = pair(&admin, Scope::Workspace, None, "labelled", &["later"]).await;
    let second = RunnerProcess::paired(&c.url, &labelled.token, &[]);
    run_and_check(&c, &admin, &later.id, &secret).await;

    c.stop().await;
    let haystacks = [
        ("the database", c.database_contents().await),
        ("the coordinator log", c.log_text().into_bytes()),
        ("runner output", runner.lines().join("\n").into_bytes()),
        ("runner output", second.lines().join("\n").into_bytes()),
    ];
    for (name, bytes) in &haystacks {
        assert!(!contains(bytes, &secret), "the env value appears in {name}");
    }
}

/// `drover-coordinator serve` on port 0 with `args`; stderr to `log`.
fn serve(args: &[&str], envs: &[(&str, &Path)], log: &Path) -> Child {
    Command::new(bin("drover-coordinator"))
        .args(["serve", "--listen", "127.0.0.1:0"])
        .args(args)
        .envs(envs.iter().copied())
        .env_remove("DROVER_SECRET_KEY")
        .env_remove("DROVER_DATABASE_URL")
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .expect("spawn drover-coordinator")
}

/// Waits for a coordinator that must refuse to start; its log.
async fn refused(mut child: Child, log: &Path) -> String {
    let status = wait_exit(&mut child, DEADLINE).await;
    assert!(!status.success());
    std::fs::read_to_string(log).unwrap()
}

#[tokio::test]
async fn a_coordinator_without_the_keys_its_stored_env_needs_refuses_to_start() {
    let mut c = Coordinator::start().await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    pair(&admin, Scope::Workspace, None, "r", &[]).await;
    let job = admin
        .client
        .submit(&secret_job("self:ws", &marker(), &[]))
        .await
        .unwrap();
    let key = sealed(&c, &job.id).await.unwrap();
    if c.options.backend == Backend::Sqlite {
        // The generated key file and the database files are this user's alone.
        for name in ["drover.key", "drover.db", "drover.db-wal", "drover.db-shm"] {
            assert_eq!(mode(&c.dir.path().join(name)), 0o600, "{name}");
        }
    }
    c.stop().await;

    let scratch = TempDir::new("keys");
    let other = scratch.path().join("other.key");
    write_secret_key_file(&other, &[&new_secret_key()]);
    let log = scratch.path().join("log");
    let other = other.to_str().unwrap();
    let child = serve(
        &["--database", &c.database, "--secret-key-file", other],
        &[],
        &log,
    );
    let text = refused(child, &log).await;
    assert!(
        text.contains(&format!("sealed with secret key {:?}", key_id(&key))),
        "{text}"
    );

    if c.options.backend == Backend::Postgres {
        // PostgreSQL has no default key: replicas must share one.
        let child = serve(&["--database", &c.database], &[], &log);
        let text = refused(child, &log).await;
        assert!(text.contains("--secret-key-file"), "{text}");
    }
}

#[tokio::test]
async fn the_default_database_and_its_key_are_private() {
    let home = TempDir::new("home");
    let data = home.path().join("data");
    // A data directory left open by an earlier version is closed too.
    std::fs::create_dir_all(data.join("drover")).unwrap();
    std::fs::set_permissions(data.join("drover"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let log = home.path().join("log");
    let mut child = serve(
        &[],
        &[("HOME", home.path()), ("XDG_DATA_HOME", &data)],
        &log,
    );
    let stdout = child.stdout.take().unwrap();
    let line = tokio::task::spawn_blocking(move || {
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).map(|_| line)
    })
    .await
    .unwrap()
    .unwrap();
    assert!(
        line.contains("http://"),
        "{line:?}: {}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    let dir = data.join("drover");
    assert_eq!(mode(&dir), 0o700);
    for name in [
        "coordinator.db",
        "coordinator.db-wal",
        "coordinator.db-shm",
        "coordinator.key",
    ] {
        assert_eq!(mode(&dir.join(name)), 0o600, "{name}");
    }
    child.kill().unwrap();
    wait_exit(&mut child, DEADLINE).await;
}
