//! The harness for end-to-end tests and the demo: real `drover-coordinator`
//! and `drover` processes on loopback, each coordinator on port 0 with a
//! fresh SQLite file. Nothing of ours is faked; GitHub, a third party, is
//! (`fake_github`).

use std::future::Future;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use runner_core::client::{Client, ClientError, ClientOptions, Scope, Token};
use runner_core::wire::{self, Job, JobState, SubmitJob};

pub use runner_core;

mod coordinator;
mod executions;
pub mod fake_github;
pub mod proxy;
pub mod raw;
mod runner;

pub use coordinator::*;
pub use executions::*;
pub use runner::*;

/// Generous: CI machines are slow and tests run in parallel.
pub const DEADLINE: Duration = Duration::from_secs(60);

/// Where the binaries are: next to the test executable's parent `deps/`.
pub fn bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    let mut dir = exe.parent().expect("exe dir").to_path_buf();
    if dir.ends_with("deps") {
        dir.pop();
    }
    let path = dir.join(name);
    assert!(
        path.exists(),
        "{} is missing: build the binaries first (`cargo build --workspace --bins`, which tests/run.sh does)",
        path.display()
    );
    path
}

/// A scratch directory, removed on drop unless the test failed.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(label: &str) -> Self {
        let mut b = [0u8; 6];
        getrandom_fill(&mut b);
        let name: String = b.iter().map(|x| format!("{x:02x}")).collect();
        let path = std::env::temp_dir().join(format!("drover-{label}-{name}"));
        std::fs::create_dir_all(&path).expect("create temp dir");
        Self(path)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("kept {} for inspection", self.0.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

fn getrandom_fill(buf: &mut [u8]) {
    use std::io::Read as _;
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(buf))
        .expect("/dev/urandom");
}

fn signal(child: &Child, sig: i32) {
    // SAFETY: kill(2) on a child we spawned; no memory involved.
    unsafe {
        libc::kill(child.id() as i32, sig);
    }
}

/// Waits for `child` to exit, up to `deadline`.
pub async fn wait_exit(child: &mut Child, deadline: Duration) -> ExitStatus {
    eventually("the process to exit", deadline, || {
        let status = child.try_wait().expect("try_wait");
        async move { status }
    })
    .await
}

/// Polls `check` until it yields `Some`, or panics after `deadline` naming `what`.
pub async fn eventually<T, F, Fut>(what: &str, deadline: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let end = tokio::time::Instant::now() + deadline;
    let mut tick = tokio::time::interval(Duration::from_millis(10));
    loop {
        tick.tick().await;
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < end,
            "timed out after {deadline:?} waiting for {what}"
        );
    }
}

/// Which database a test coordinator uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

impl Backend {
    /// `DROVER_TEST_DATABASE=sqlite|postgres` (default sqlite); tests/run.sh runs the suite with each.
    pub fn from_env() -> Self {
        match std::env::var("DROVER_TEST_DATABASE").as_deref() {
            Ok("postgres") => Self::Postgres,
            Ok("sqlite") | Err(_) => Self::Sqlite,
            Ok(other) => panic!("DROVER_TEST_DATABASE={other:?}: use sqlite or postgres"),
        }
    }
}

/// A new random secret key, as 64 hex digits.
pub fn new_secret_key() -> String {
    let mut b = [0u8; 32];
    getrandom_fill(&mut b);
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Writes a key ring file (mode 0600): `lines` in order, the first seals.
pub fn write_secret_key_file(path: &Path, lines: &[&str]) {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .expect("key file");
    for line in lines {
        writeln!(f, "{line}").expect("write key file");
    }
}

/// A job with `script`, targeting `runtime`.
pub fn script_job(runtime: &str, script: &str) -> SubmitJob {
    SubmitJob {
        runtime: runtime.into(),
        script: Some(script.into()),
        ..SubmitJob::default()
    }
}

/// Waits until the job ends (following its log, so no polling), returns it.
pub async fn wait_done(client: &Client, id: &str) -> Job {
    tokio::time::timeout(DEADLINE, async {
        loop {
            client.follow_logs(id, |_| {}).await.expect("follow logs");
            let job = client.job(id).await.expect("job");
            if job.state.is_terminal() {
                return job;
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("job {id} did not finish within {DEADLINE:?}"))
}

/// Waits until the job is in `state`.
pub async fn wait_state(client: &Client, id: &str, state: JobState) -> Job {
    eventually(
        &format!("job {id} to be {}", state.as_str()),
        DEADLINE,
        || async move {
            let job = client.job(id).await.expect("job");
            (job.state == state).then_some(job)
        },
    )
    .await
}

/// `runner` (its hello said) asks for a job, waiting as long as a request
/// may; once `coordinator` has that request waiting, `owner` (the same
/// runner's token, on that replica or another) says hello, paused. Checks
/// that the request then ends with no job, well before its own wait.
pub async fn a_pause_ends_the_waiting_request(
    runner: Client,
    coordinator: &Coordinator,
    owner: &Client,
) {
    let wait = Duration::from_millis(wire::MAX_LEASE_WAIT_MS);
    let asked = std::time::Instant::now();
    let poll = tokio::spawn(async move {
        (
            runner.offer(wait).await.map(|o| o.is_none()),
            asked.elapsed(),
        )
    });
    coordinator.wait_for_waiting(1).await;
    owner.hello_as(&[], 1, true).await.unwrap();
    let (empty, after) = poll.await.unwrap();
    assert!(empty.unwrap(), "the ended request brought a job");
    assert!(
        after < wait / 2,
        "the request waited {after:?}, as if the pause had not ended it"
    );
}

/// The error code of a failed call.
pub fn code<T: std::fmt::Debug>(r: Result<T, ClientError>) -> wire::ErrorCode {
    match r {
        Err(ClientError::Api { code, .. } | ClientError::VersionSkew { code, .. }) => code,
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// A workspace join token for pool `runtime`.
pub async fn ws_join_token(admin: &Member, runtime: &str) -> wire::JoinToken {
    admin
        .client
        .join_token(Scope::Workspace, runtime)
        .await
        .expect("join token")
}
/// A command's stdout, once it succeeded (else its stderr in the panic).
pub fn stdout_ok(out: &std::process::Output) -> String {
    assert!(
        out.status.success(),
        "{:?} failed: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).expect("UTF-8 stdout")
}

/// Lines of a file (empty if missing).
pub fn read_lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Pairs a runner into pool `runtime` (None: the default) of `scope`.
pub async fn pair(
    member: &Member,
    scope: Scope,
    runtime: Option<&str>,
    name: &str,
    labels: &[&str],
) -> wire::PairedRunner {
    member
        .client
        .pair_runner(
            scope,
            &wire::PairRunner {
                name: Some(name.into()),
                runtime: runtime.map(Into::into),
                labels: labels.iter().map(|s| s.to_string()).collect(),
            },
        )
        .await
        .expect("pair runner")
}

/// A runner's report that its job exited 0.
pub fn succeeded() -> wire::Complete {
    wire::Complete {
        outcome: wire::Outcome::Succeeded,
        exit_code: Some(0),
        error: None,
        next: None,
    }
}
