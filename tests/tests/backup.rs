//! `drover-coordinator admin backup`: a copy of a live SQLite database taken
//! under load, restored into a new coordinator; without its key file the
//! copy's job env stays shut.

use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use drover_tests::runner_core::client::{Client, Scope};
use drover_tests::runner_core::wire::{Env, JobState, SubmitJob};
use drover_tests::*;

/// Every job the client sees, by id, with its state.
async fn all_jobs(client: &Client) -> HashMap<String, JobState> {
    let mut all = HashMap::new();
    let mut before: Option<String> = None;
    loop {
        let page = client
            .jobs_page(None, 1000, before.as_deref())
            .await
            .expect("list jobs");
        all.extend(page.jobs.into_iter().map(|j| (j.id, j.state)));
        match page.next_before {
            Some(next) => before = Some(next),
            None => return all,
        }
    }
}

/// How far a job got, as a restore must keep it: a job that had ended keeps
/// its end; one that had not may be queued again (its lease was with the
/// old coordinator's runner) or have ended since.
fn settled(state: JobState) -> bool {
    state.is_terminal()
}

/// `drover-coordinator serve` on port 0 that must refuse to start; its log.
async fn refused_to_serve(database: &str, log: &Path) -> String {
    let mut child: Child = Command::new(bin("drover-coordinator"))
        .args(["serve", "--listen", "127.0.0.1:0", "--database", database])
        .env_remove("DROVER_SECRET_KEY")
        .env_remove("DROVER_SECRET_KEY_FILE")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .expect("spawn drover-coordinator");
    let status = wait_exit(&mut child, DEADLINE).await;
    assert!(!status.success());
    std::fs::read_to_string(log).unwrap()
}

#[tokio::test]
async fn a_backup_under_load_restores_every_acknowledged_job_and_needs_its_key_on_sqlite() {
    // Backups copy SQLite files, whichever pass runs this; PostgreSQL has
    // pg_dump (its refusal is tested below).
    let options = CoordinatorOptions {
        backend: Backend::Sqlite,
        ..CoordinatorOptions::default()
    };
    let c = Coordinator::start_with(options.clone()).await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    let worker = pair(&admin, Scope::Workspace, None, "worker", &[]).await;
    let later = pair(&admin, Scope::Workspace, None, "later", &["later"]).await;

    // A job only the `later` runner may take: it waits, its env sealed, and
    // runs only on the restored coordinator.
    let secret = format!("drover-secret-{}", &new_secret_key()[..16]);
    let waiting = admin
        .client
        .submit(&SubmitJob {
            env: Env::from([("SECRET".to_owned(), secret.clone())]),
            requires: vec!["later".into()],
            ..script_job("self:ws", "printf '%s' \"$SECRET\" | tr a-z A-Z")
        })
        .await
        .unwrap();

    // A steady load: a client submitting, a runner draining.
    let _runner = RunnerProcess::paired(&c.url, &worker.token, &["--max-concurrent", "4"]);
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let acked = std::sync::Arc::new(std::sync::Mutex::new(Vec::<(Instant, String)>::new()));
    let load = tokio::spawn({
        let (client, stop, acked) = (admin.client.clone(), stop.clone(), acked.clone());
        async move {
            let mut tick = tokio::time::interval(Duration::from_millis(4));
            while !stop.load(Ordering::SeqCst) {
                tick.tick().await;
                let job = client
                    .submit(&script_job("self:ws", "true"))
                    .await
                    .expect("a submit during the backup");
                acked.lock().unwrap().push((Instant::now(), job.id));
            }
        }
    });
    let count = || acked.lock().unwrap().len();
    let (count, admin_client) = (&count, &admin.client);
    eventually("the load to get going", DEADLINE, || async move {
        let done = all_jobs(admin_client)
            .await
            .values()
            .filter(|s| **s == JobState::Succeeded)
            .count();
        (count() >= 40 && done >= 10).then_some(())
    })
    .await;

    // What was acknowledged, and how far it got, before the backup started.
    let seen = all_jobs(&admin.client).await;
    let started = Instant::now();
    let scratch = TempDir::new("backup");
    let file = scratch.path().join("drover-backup.db");
    let mut backup = c.backup_command(&file, &[]);
    let out = tokio::task::spawn_blocking(move || backup.output().unwrap())
        .await
        .unwrap();
    let printed = stdout_ok(&out);
    let before: Vec<String> = acked
        .lock()
        .unwrap()
        .iter()
        .filter(|(at, _)| *at < started)
        .map(|(_, id)| id.clone())
        .collect();
    // Service went on: submits kept succeeding through it and after it.
    let after = count();
    eventually("submits after the backup", DEADLINE, || async move {
        (count() >= after + 20).then_some(())
    })
    .await;
    stop.store(true, Ordering::SeqCst);
    load.await.expect("no submit failed");

    // One file, private, whole, and what it says it holds.
    let files: Vec<_> = std::fs::read_dir(scratch.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        files,
        [file.file_name().unwrap().to_owned()],
        "only the backup is left"
    );
    let meta = std::fs::metadata(&file).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    let checked = {
        use sqlx::Connection as _;
        let url = format!("sqlite://{}?mode=ro", file.display());
        let mut conn = sqlx::SqliteConnection::connect(&url).await.unwrap();
        let check: String = sqlx::query_scalar("PRAGMA integrity_check")
            .fetch_one(&mut conn)
            .await
            .unwrap();
        let jobs: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM jobs")
            .fetch_one(&mut conn)
            .await
            .unwrap();
        conn.close().await.unwrap();
        (check, jobs)
    };
    assert_eq!(checked.0, "ok");
    assert!(
        printed.contains(&format!("{} bytes, {} jobs", meta.len(), checked.1)),
        "{printed}"
    );
    assert!(checked.1 as usize > before.len(), "{printed}");
    assert!(!String::from_utf8_lossy(&out.stderr).contains(&secret));

    // An existing file is refused (exit 2) and left as it was; --force replaces it.
    let copy = std::fs::read(&file).unwrap();
    let again = c.backup_command(&file, &[]).output().unwrap();
    assert_eq!(again.status.code(), Some(2), "{again:?}");
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("--force"),
        "{again:?}"
    );
    assert_eq!(std::fs::read(&file).unwrap(), copy);
    let forced = scratch.path().join("forced.db");
    std::fs::write(&forced, b"old").unwrap();
    stdout_ok(&c.backup_command(&forced, &["--force"]).output().unwrap());
    assert_ne!(std::fs::read(&forced).unwrap(), b"old");

    // Without its key file, the copy's job env cannot be opened: a
    // coordinator on it (which makes itself a new key) refuses to start.
    let keyless = TempDir::new("keyless");
    let keyless_db = keyless.path().join("drover.db");
    std::fs::copy(&file, &keyless_db).unwrap();
    let log = keyless.path().join("log");
    let text = refused_to_serve(&format!("sqlite://{}", keyless_db.display()), &log).await;
    assert!(text.contains("sealed with secret key"), "{text}");
    assert!(!text.contains(&secret), "{text}");

    // Restored with the same key file: every job acknowledged before the
    // backup started is there, at least as far along as it was seen.
    let restored = Coordinator::start_on_copy(
        &file,
        CoordinatorOptions {
            secret_key_file: Some(c.secret_key_file()),
            ..options
        },
    )
    .await;
    let client = restored.client(&admin.token);
    let now = all_jobs(&client).await;
    assert!(before.len() >= 40, "{}", before.len());
    for id in before.iter().chain([&waiting.id]) {
        let state = *now
            .get(id)
            .unwrap_or_else(|| panic!("job {id}, acknowledged before the backup, is missing"));
        if let Some(&was) = seen.get(id)
            && settled(was)
        {
            assert_eq!(state, was, "job {id} had ended {was:?}");
        }
    }
    assert!(
        before
            .iter()
            .filter(|id| seen.get(*id).is_some_and(|s| settled(*s)))
            .count()
            >= 10
    );

    // A runner of the restored coordinator gets the waiting job's env.
    let _later = RunnerProcess::paired(&restored.url, &later.token, &[]);
    let done = wait_done(&client, &waiting.id).await;
    assert_eq!(done.state, JobState::Succeeded, "{done:?}");
    assert_eq!(
        client.logs(&waiting.id).await.unwrap(),
        secret.to_uppercase()
    );
}

#[tokio::test]
async fn a_postgresql_database_is_backed_up_with_pg_dump() {
    let scratch = TempDir::new("pg-backup");
    let file = scratch.path().join("backup.db");
    let out = Command::new(bin("drover-coordinator"))
        .args([
            "admin",
            "backup",
            "--database",
            "postgres://drover:hunter2@127.0.0.1:1/drover",
        ])
        .arg("--to")
        .arg(&file)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("pg_dump"), "{stderr}");
    assert!(!stderr.contains("hunter2"), "{stderr}");
    assert!(!file.exists());
}
