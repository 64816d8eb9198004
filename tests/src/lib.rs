//! The harness for end-to-end tests and the demo: real `drover-coordinator`
//! and `drover` processes on loopback, each coordinator on port 0 with a
//! fresh SQLite file. Nothing of ours is faked.

use std::future::Future;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use runner_core::client::{Client, ClientError, Scope, Token};
use runner_core::wire::{self, Job, JobState, SubmitJob};

pub use runner_core;

pub mod proxy;

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

#[derive(Debug, Clone)]
pub struct CoordinatorOptions {
    pub lease_ttl_ms: u64,
    pub backend: Backend,
    /// `full` or `normal` (SQLite only).
    pub sqlite_sync: &'static str,
    /// `--secret-key-file`. `None`: on SQLite the coordinator's default (a
    /// key file beside the database, `drover.key`); on PostgreSQL, where a
    /// key is required, a new key file (replicas share it).
    pub secret_key_file: Option<PathBuf>,
    /// More `serve` flags (limits, timeouts).
    pub serve_args: Vec<String>,
    /// Extra environment for the process (e.g. `DROVER_CLOCK_SKEW_MS`).
    pub env: Vec<(&'static str, String)>,
}

impl Default for CoordinatorOptions {
    fn default() -> Self {
        Self {
            lease_ttl_ms: 3000,
            backend: Backend::from_env(),
            sqlite_sync: "full",
            secret_key_file: None,
            serve_args: Vec::new(),
            env: Vec::new(),
        }
    }
}

/// The PostgreSQL server the tests use (an admin URL; each coordinator gets
/// its own fresh database on it).
pub fn postgres_admin_url() -> String {
    std::env::var("DROVER_TEST_PG_URL").unwrap_or_else(|_| {
        panic!("DROVER_TEST_PG_URL is not set: tests/run.sh starts PostgreSQL and sets it (e.g. postgres://drover:drover@127.0.0.1:5432/postgres)")
    })
}

fn run_blocking<T: Send + 'static>(f: impl Future<Output = T> + Send + 'static) -> T {
    std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
            .block_on(f)
    })
    .join()
    .expect("thread")
}

async fn pg_admin(sql: String) {
    use sqlx::Connection as _;
    let mut conn = sqlx::PgConnection::connect(&postgres_admin_url())
        .await
        .expect("connect to the test PostgreSQL");
    sqlx::Executor::execute(&mut conn, sql.as_str())
        .await
        .expect("admin statement");
}

/// A fresh, empty PostgreSQL database: (URL, name).
pub async fn fresh_postgres_database() -> (String, String) {
    let mut b = [0u8; 6];
    getrandom_fill(&mut b);
    let name = format!(
        "drover_t_{}",
        b.iter().map(|x| format!("{x:02x}")).collect::<String>()
    );
    pg_admin(format!("CREATE DATABASE {name}")).await;
    let admin = postgres_admin_url();
    let base = admin.rsplit_once('/').expect("admin URL with a database").0;
    (format!("{base}/{name}"), name)
}

/// A `drover-coordinator serve` process.
pub struct Coordinator {
    child: Option<Child>,
    pub url: String,
    addr: String,
    pub database: String,
    /// The PostgreSQL database this coordinator created (dropped with it).
    owned_database: Option<String>,
    pub options: CoordinatorOptions,
    log: PathBuf,
    pub dir: TempDir,
}

/// A member of a workspace with an API client.
#[derive(Clone, Debug)]
pub struct Member {
    pub workspace: String,
    pub email: String,
    pub subject: String,
    pub token: String,
    pub client: Client,
}

impl Coordinator {
    pub async fn start() -> Self {
        Self::start_with(CoordinatorOptions::default()).await
    }

    pub async fn start_with(options: CoordinatorOptions) -> Self {
        let dir = TempDir::new("coord");
        let (database, owned_database) = match options.backend {
            Backend::Sqlite => (
                format!("sqlite://{}", dir.path().join("drover.db").display()),
                None,
            ),
            Backend::Postgres => {
                let (url, name) = fresh_postgres_database().await;
                (url, Some(name))
            }
        };
        let log = dir.path().join("coordinator.log");
        let mut options = options;
        if options.backend == Backend::Postgres && options.secret_key_file.is_none() {
            let path = dir.path().join("secret.key");
            write_secret_key_file(&path, &[&new_secret_key()]);
            options.secret_key_file = Some(path);
        }
        let mut c = Self {
            child: None,
            url: String::new(),
            addr: "127.0.0.1:0".into(),
            database,
            owned_database,
            options,
            log,
            dir,
        };
        c.spawn().await;
        c
    }

    /// Another coordinator process on the same (PostgreSQL) database.
    pub async fn replica(&self) -> Self {
        self.replica_with(self.options.clone()).await
    }

    /// A replica with its own options (its TTL, its environment).
    pub async fn replica_with(&self, options: CoordinatorOptions) -> Self {
        assert_eq!(
            self.options.backend,
            Backend::Postgres,
            "replicas share a PostgreSQL database"
        );
        let dir = TempDir::new("replica");
        let log = dir.path().join("coordinator.log");
        let mut c = Self {
            child: None,
            url: String::new(),
            addr: "127.0.0.1:0".into(),
            database: self.database.clone(),
            owned_database: None,
            options,
            log,
            dir,
        };
        c.spawn().await;
        c
    }

    /// The key file this coordinator reads (given, or its SQLite default).
    pub fn secret_key_file(&self) -> PathBuf {
        self.options
            .secret_key_file
            .clone()
            .unwrap_or_else(|| self.dir.path().join("drover.key"))
    }

    /// `drover-coordinator admin rotate-secrets` with this coordinator's
    /// database and keys; its output.
    pub fn rotate_secrets(&self) -> String {
        let out = Command::new(bin("drover-coordinator"))
            .args(["admin", "rotate-secrets", "--database", &self.database])
            .arg("--secret-key-file")
            .arg(self.secret_key_file())
            .env_remove("DROVER_SECRET_KEY")
            .output()
            .expect("run admin rotate-secrets");
        assert!(
            out.status.success(),
            "rotate-secrets failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The first column of `sql`'s rows, as text (NULL as `None`).
    pub async fn query_text(&self, sql: &str) -> Vec<Option<String>> {
        use sqlx::Connection as _;
        match self.options.backend {
            Backend::Sqlite => {
                let url = format!("{}?mode=ro", self.database);
                let mut conn = sqlx::SqliteConnection::connect(&url)
                    .await
                    .expect("connect");
                sqlx::query_scalar(sql)
                    .fetch_all(&mut conn)
                    .await
                    .expect("query")
            }
            Backend::Postgres => {
                let mut conn = sqlx::PgConnection::connect(&self.database)
                    .await
                    .expect("connect");
                sqlx::query_scalar(sql)
                    .fetch_all(&mut conn)
                    .await
                    .expect("query")
            }
        }
    }

    /// Everything the database holds, as bytes to search: the SQLite files,
    /// or every PostgreSQL table rendered as text.
    pub async fn database_contents(&self) -> Vec<u8> {
        match self.options.backend {
            Backend::Sqlite => {
                let mut all = Vec::new();
                for entry in std::fs::read_dir(self.dir.path()).expect("dir") {
                    let path = entry.expect("entry").path();
                    if path
                        .file_name()
                        .expect("name")
                        .to_string_lossy()
                        .starts_with("drover.db")
                    {
                        all.extend(std::fs::read(&path).expect("read db file"));
                    }
                }
                assert!(!all.is_empty(), "no database files");
                all
            }
            Backend::Postgres => {
                use sqlx::Connection as _;
                let mut conn = sqlx::PgConnection::connect(&self.database)
                    .await
                    .expect("connect");
                let tables: Vec<String> =
                    sqlx::query_scalar("SELECT table_name::text FROM information_schema.tables WHERE table_schema = 'public'")
                        .fetch_all(&mut conn)
                        .await
                        .expect("tables");
                assert!(tables.len() >= 8, "{tables:?}");
                let mut all = Vec::new();
                for table in tables {
                    let rows: Vec<String> =
                        sqlx::query_scalar(&format!("SELECT CAST(t AS TEXT) FROM \"{table}\" t"))
                            .fetch_all(&mut conn)
                            .await
                            .expect("rows");
                    for row in rows {
                        all.extend(row.into_bytes());
                        all.push(b'\n');
                    }
                }
                all
            }
        }
    }

    async fn spawn(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("log file");
        // A profiler may wrap the coordinator (`DROVER_COORDINATOR_WRAPPER="heaptrack"`,
        // for drover-bench only: the harness then signals the wrapper, and
        // `pid()` and the CPU and RSS figures are the wrapper's).
        let wrapper = std::env::var("DROVER_COORDINATOR_WRAPPER").unwrap_or_default();
        let mut command = match wrapper.split_whitespace().collect::<Vec<_>>()[..] {
            [] => Command::new(bin("drover-coordinator")),
            [program, ref args @ ..] => {
                let mut c = Command::new(program);
                c.args(args).arg(bin("drover-coordinator"));
                c
            }
        };
        let mut child = command
            .args([
                "serve",
                "--listen",
                &self.addr,
                "--database",
                &self.database,
            ])
            .args(["--lease-ttl-ms", &self.options.lease_ttl_ms.to_string()])
            .args(["--sqlite-sync", self.options.sqlite_sync])
            .args(
                self.options
                    .secret_key_file
                    .iter()
                    .flat_map(|path| [Path::new("--secret-key-file"), path]),
            )
            .env_remove("DROVER_SECRET_KEY")
            .args(&self.options.serve_args)
            .env("DROVER_LOG", "drover_coordinator=debug,warn")
            .envs(self.options.env.iter().map(|(k, v)| (*k, v)))
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .expect("spawn drover-coordinator");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = tokio::sync::oneshot::channel();
        std::thread::spawn(move || {
            // The first line naming a URL (a wrapper may print before it).
            let mut reader = BufReader::new(stdout);
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 0) && !line.contains("http://") {
                line.clear();
            }
            let _ = tx.send(line);
        });
        let line = tokio::time::timeout(DEADLINE, rx)
            .await
            .expect("coordinator start timed out")
            .expect("coordinator stdout");
        let url = line
            .trim()
            .rsplit(' ')
            .next()
            .filter(|u| u.starts_with("http://"))
            .unwrap_or_else(|| {
                panic!(
                    "coordinator did not print its URL: {line:?}; log: {}",
                    self.log_text()
                )
            })
            .to_owned();
        self.addr = url.trim_start_matches("http://").to_owned();
        self.url = url;
        self.child = Some(child);
    }

    /// The coordinator process's pid.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn client(&self, token: &str) -> Client {
        Client::new(&self.url, Token::new(token)).expect("client")
    }

    fn admin(&self, args: &[&str]) -> wire::MemberCredential {
        let out = Command::new(bin("drover-coordinator"))
            .arg("admin")
            .args(args)
            .args(["--database", &self.database, "--json"])
            .output()
            .expect("run admin");
        assert!(
            out.status.success(),
            "admin {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).expect("admin --json output")
    }

    fn member(&self, c: wire::MemberCredential) -> Member {
        Member {
            client: self.client(&c.token),
            workspace: c.workspace,
            email: c.email,
            subject: c.subject,
            token: c.token,
        }
    }

    /// A new workspace and its first admin.
    pub fn bootstrap(&self, workspace: &str, email: &str) -> Member {
        let c = self.admin(&["bootstrap", "--workspace", workspace, "--email", email]);
        self.member(c)
    }

    pub fn add_member(&self, workspace: &str, email: &str, role: &str) -> Member {
        let c = self.admin(&[
            "add-member",
            "--workspace",
            workspace,
            "--email",
            email,
            "--role",
            role,
        ]);
        self.member(c)
    }

    /// `kill -9`: no chance to clean up.
    pub async fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            signal(&child, libc::SIGKILL);
            wait_exit(&mut child, DEADLINE).await;
        }
    }

    /// SIGTERM and wait for a clean exit.
    pub async fn stop(&mut self) -> ExitStatus {
        let mut child = self.child.take().expect("running");
        signal(&child, libc::SIGTERM);
        wait_exit(&mut child, DEADLINE).await
    }

    /// Starts again on the same address and database.
    pub async fn restart(&mut self) {
        assert!(self.child.is_none(), "stop it first");
        self.spawn().await;
    }

    /// Lease long-polls waiting in the coordinator right now.
    pub async fn waiting_leases(&self) -> u64 {
        let v: serde_json::Value = reqwest::get(format!("{}/healthz", self.url))
            .await
            .expect("healthz")
            .json()
            .await
            .expect("json");
        v["waitingLeases"].as_u64().expect("waitingLeases")
    }

    pub async fn wait_for_waiting(&self, n: u64) {
        eventually(
            &format!("{n} waiting lease polls"),
            DEADLINE,
            || async move { (self.waiting_leases().await == n).then_some(()) },
        )
        .await
    }
}

impl Drop for Coordinator {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            signal(&child, libc::SIGKILL);
            let _ = child.wait();
        }
        if std::thread::panicking() {
            eprintln!("--- coordinator log ---\n{}", self.log_text());
        }
        if let Some(name) = self.owned_database.take() {
            run_blocking(pg_admin(format!(
                "DROP DATABASE IF EXISTS {name} WITH (FORCE)"
            )));
        }
    }
}

/// A `drover runner` process; its event lines are collected.
pub struct RunnerProcess {
    child: Option<Child>,
    /// Each line with when the harness read it (unix ns), which is after
    /// the runner wrote it.
    lines: Arc<Mutex<Vec<(u128, String)>>>,
    /// Set when the current process's stderr has been read to its end.
    read_all: Arc<std::sync::atomic::AtomicBool>,
    args: Vec<String>,
    /// Extra environment for the process.
    env: Vec<(String, String)>,
}

impl RunnerProcess {
    /// `drover runner <args>` against `url`.
    pub fn spawn(url: &str, args: &[&str]) -> Self {
        Self::spawn_with_env(url, args, &[])
    }

    /// `drover runner <args>` against `url`, with more environment.
    pub fn spawn_with_env(url: &str, args: &[&str], env: &[(&str, &str)]) -> Self {
        let mut full = vec![
            "runner".to_owned(),
            "--url".to_owned(),
            url.to_owned(),
            "--kill-grace".to_owned(),
            "2".to_owned(),
            "--max-backoff-ms".to_owned(),
            "500".to_owned(),
        ];
        full.extend(args.iter().map(|s| s.to_string()));
        let mut p = Self {
            child: None,
            lines: Arc::default(),
            read_all: Arc::default(),
            args: full,
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        };
        p.start();
        p
    }

    fn start(&mut self) {
        let mut child = Command::new(bin("drover"))
            .args(&self.args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn drover runner");
        let stderr = child.stderr.take().expect("stderr");
        let lines = self.lines.clone();
        let read_all = Arc::new(std::sync::atomic::AtomicBool::new(false));
        self.read_all = read_all.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                lines.lock().expect("lines").push((unix_ns(), line));
            }
            read_all.store(true, std::sync::atomic::Ordering::SeqCst);
        });
        self.child = Some(child);
    }

    /// Joins `n` runners to `reference` with a join token, credentials in `state`.
    pub fn join(
        url: &str,
        reference: &str,
        join_token: &str,
        n: usize,
        state: &Path,
        extra: &[&str],
    ) -> Self {
        let n = n.to_string();
        let state = state.display().to_string();
        let mut args = vec![
            "--join",
            reference,
            "--token",
            join_token,
            "--runners",
            &n,
            "--state-dir",
            &state,
        ];
        args.extend_from_slice(extra);
        Self::spawn(url, &args)
    }

    /// One paired runner (`rnr_…` token).
    pub fn paired(url: &str, token: &str, extra: &[&str]) -> Self {
        let mut args = vec!["--token", token];
        args.extend_from_slice(extra);
        Self::spawn(url, &args)
    }

    pub fn lines(&self) -> Vec<String> {
        let lines = self.lines.lock().expect("lines");
        lines.iter().map(|(_, l)| l.clone()).collect()
    }

    /// The lines with the time the harness read each (unix ns).
    pub fn timed_lines(&self) -> Vec<(u128, String)> {
        self.lines.lock().expect("lines").clone()
    }

    /// Waits until `n` lines contain `needle`.
    pub async fn wait_for_lines(&self, needle: &str, n: usize) {
        eventually(
            &format!("{n} runner lines containing {needle:?}"),
            DEADLINE,
            || {
                let count = self.lines().iter().filter(|l| l.contains(needle)).count();
                async move { (count >= n).then_some(()) }
            },
        )
        .await
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// The ids of the runners this process has brought online.
    pub fn runner_ids(&self) -> std::collections::HashSet<String> {
        self.lines()
            .iter()
            .filter_map(|l| l.strip_prefix("runner ")?.strip_suffix(": online"))
            .map(str::to_owned)
            .collect()
    }

    pub async fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            signal(&child, libc::SIGKILL);
            wait_exit(&mut child, DEADLINE).await;
        }
    }

    pub fn sigterm(&self) {
        signal(self.child.as_ref().expect("running"), libc::SIGTERM);
    }

    /// Waits for the process to exit and for every line it wrote.
    pub async fn wait_exit(&mut self) -> ExitStatus {
        let mut child = self.child.take().expect("running");
        let status = wait_exit(&mut child, DEADLINE).await;
        let read_all = self.read_all.clone();
        eventually("the runner's last lines", DEADLINE, || {
            let done = read_all.load(std::sync::atomic::Ordering::SeqCst);
            async move { done.then_some(()) }
        })
        .await;
        status
    }

    /// Starts the same command again (same state dir, so the same runners).
    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "stop it first");
        self.start();
    }
}

impl Drop for RunnerProcess {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            signal(&child, libc::SIGKILL);
            let _ = child.wait();
        }
        if std::thread::panicking() {
            eprintln!("--- runner output ---\n{}", self.lines().join("\n"));
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

/// The error code of a failed call.
pub fn code<T: std::fmt::Debug>(r: Result<T, ClientError>) -> wire::ErrorCode {
    match r {
        Err(ClientError::Api { code, .. }) => code,
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

/// A job script that runs `body` and records its execution in `record`:
/// a `start` line before and an `end` line after, each
/// `<job> <attempt> <runner> start|end <unix ns>`.
pub fn recorded(record: &Path, body: &str) -> String {
    let line = |what: &str| {
        format!(
            "echo \"$DROVER_JOB_ID $DROVER_ATTEMPT $DROVER_RUNNER_ID {what} $(date +%s%N)\" >> {}",
            record.display()
        )
    };
    format!("{}; {body}; {}", line("start"), line("end"))
}

/// One run of a job, as its script recorded it (see [`recorded`]).
#[derive(Debug, Clone)]
pub struct Execution {
    pub job: String,
    pub attempt: u32,
    pub runner: String,
    /// Unix time in ns.
    pub start: u128,
    /// None if it never got to its end (its process was killed).
    pub end: Option<u128>,
}

/// Nanoseconds since the Unix epoch, comparable with [`Execution`] times.
pub fn unix_ns() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_nanos()
}

/// Every execution a record holds, by job, in order of start.
pub fn read_executions(record: &Path) -> std::collections::HashMap<String, Vec<Execution>> {
    let mut runs: std::collections::HashMap<(String, u32, String), Execution> =
        std::collections::HashMap::new();
    let mut starts: std::collections::HashMap<(String, u32), usize> =
        std::collections::HashMap::new();
    for line in read_lines(record) {
        let f: Vec<&str> = line.split(' ').collect();
        let [job, attempt, runner, what, ns] = f[..] else {
            panic!("malformed execution line {line:?}");
        };
        let attempt: u32 = attempt.parse().expect("attempt");
        let ns: u128 = ns.parse().expect("ns");
        let key = (job.to_owned(), attempt, runner.to_owned());
        match what {
            "start" => {
                *starts.entry((job.to_owned(), attempt)).or_default() += 1;
                let earlier = runs.insert(
                    key,
                    Execution {
                        job: job.to_owned(),
                        attempt,
                        runner: runner.to_owned(),
                        start: ns,
                        end: None,
                    },
                );
                assert!(
                    earlier.is_none(),
                    "{job} attempt {attempt} started twice on {runner}"
                );
            }
            "end" => {
                let run = runs
                    .get_mut(&key)
                    .unwrap_or_else(|| panic!("{line:?} has no start"));
                run.end = Some(ns);
            }
            _ => panic!("malformed execution line {line:?}"),
        }
    }
    for ((job, attempt), n) in starts {
        assert_eq!(
            n, 1,
            "{job} attempt {attempt} ran {n} times (one lease, two runners)"
        );
    }
    let mut by_job: std::collections::HashMap<String, Vec<Execution>> =
        std::collections::HashMap::new();
    for run in runs.into_values() {
        by_job.entry(run.job.clone()).or_default().push(run);
    }
    for runs in by_job.values_mut() {
        runs.sort_by_key(|r| r.start);
    }
    by_job
}

/// Checks an executions record against the jobs submitted (`ids`): every
/// job ran, no other job ran, no attempt ran twice, and each job's attempts
/// rise in the order they started. Returns the executions by job; see
/// [`LostLeases::check`] for overlaps and re-runs.
pub fn check_executions(
    record: &Path,
    ids: &[String],
) -> std::collections::HashMap<String, Vec<Execution>> {
    let by_job = read_executions(record);
    for id in ids {
        let runs = by_job
            .get(id)
            .unwrap_or_else(|| panic!("job {id} never ran"));
        for pair in runs.windows(2) {
            assert!(
                pair[0].attempt < pair[1].attempt,
                "{id} ran attempt {} after attempt {}",
                pair[1].attempt,
                pair[0].attempt
            );
        }
    }
    assert_eq!(
        by_job.len(),
        ids.len(),
        "executions recorded for jobs not submitted"
    );
    by_job
}

/// The executions that were run again: every one but the last of each job.
pub fn superseded(by_job: &std::collections::HashMap<String, Vec<Execution>>) -> Vec<&Execution> {
    by_job
        .values()
        .flat_map(|runs| &runs[..runs.len() - 1])
        .collect()
}

/// Why a runner may have lost a lease, to explain a re-run.
#[derive(Debug, Default)]
pub struct LostLeases {
    /// Runners whose process was killed, and when (unix ns).
    killed: Vec<(std::collections::HashSet<String>, u128)>,
    /// Runners whose process was started again, and when (unix ns).
    restarted: Vec<(std::collections::HashSet<String>, u128)>,
    /// (runner, job) pairs a runner reported losing: it stopped the job,
    /// abandoned it, or had its result refused.
    reported: std::collections::HashSet<(String, String)>,
    /// (runner, job) → when the runner said it had stopped the job (its
    /// process group is gone by then).
    stopped: std::collections::HashMap<(String, String), u128>,
}

impl LostLeases {
    /// The runners `p` has brought online, killed now (call right after `kill9`).
    pub fn killed(&mut self, p: &RunnerProcess) {
        self.killed.push((p.runner_ids(), unix_ns()));
    }

    /// `p`'s runners, started again now (call right before `restart`).
    pub fn restarted(&mut self, p: &RunnerProcess) {
        self.restarted.push((p.runner_ids(), unix_ns()));
    }

    /// Whether a killed process explains `run`: its runner was killed, and
    /// the run began before that, or just after as an orphan (a job process
    /// is its own process group, so a SIGKILLed runner's job may get to its
    /// first line after the kill), and before the runner came back.
    fn killed_during(&self, run: &Execution) -> bool {
        const ORPHAN_START_NS: u128 = 5_000_000_000;
        self.killed.iter().any(|(runners, at)| {
            let back = self
                .restarted
                .iter()
                .filter(|(again, when)| again.contains(&run.runner) && when > at)
                .map(|(_, when)| *when)
                .min()
                .unwrap_or(u128::MAX);
            runners.contains(&run.runner) && run.start < (at + ORPHAN_START_NS).min(back)
        })
    }

    /// What `p`'s runners said about leases they lost.
    pub fn reported_by(&mut self, p: &RunnerProcess) {
        for (at, line) in p.timed_lines() {
            let Some((runner, event)) = line
                .strip_prefix("runner ")
                .and_then(|l| l.split_once(": "))
            else {
                continue;
            };
            let lost = event.strip_prefix("lost the lease on ");
            let job = lost
                .or_else(|| event.strip_prefix("abandoned "))
                .or_else(|| event.strip_prefix("result of "));
            let Some(job) = job.and_then(|j| j.split([' ', ':']).next()) else {
                continue;
            };
            let key = (runner.to_owned(), job.to_owned());
            if lost.is_some_and(|l| l.ends_with(": stopped the job")) {
                self.stopped.entry(key.clone()).or_insert(at);
            }
            self.reported.insert(key);
        }
    }

    /// The executions in `reruns` that no lost lease explains: their runner
    /// was not killed after they started, and did not say it lost that job.
    pub fn unexplained<'a>(&self, reruns: &[&'a Execution]) -> Vec<&'a Execution> {
        reruns
            .iter()
            .copied()
            .filter(|run| {
                !self.killed_during(run)
                    && !self
                        .reported
                        .contains(&(run.runner.clone(), run.job.clone()))
            })
            .collect()
    }

    /// Pairs of executions of one job that may have overlapped in time: the
    /// earlier one did not end (by its own record, or by its runner's word
    /// that it stopped it) before the later one started.
    pub fn overlapping<'a>(
        &self,
        runs: &'a std::collections::HashMap<String, Vec<Execution>>,
    ) -> Vec<(&'a Execution, &'a Execution)> {
        let mut out = Vec::new();
        for job_runs in runs.values() {
            for pair in job_runs.windows(2) {
                let (a, b) = (&pair[0], &pair[1]);
                let end = a.end.or_else(|| {
                    self.stopped
                        .get(&(a.runner.clone(), a.job.clone()))
                        .copied()
                });
                if end.is_none_or(|end| end >= b.start) {
                    out.push((a, b));
                }
            }
        }
        out
    }

    /// Asserts that executions of one job never overlapped in time and that
    /// each re-run followed a lost lease. A live runner may still be
    /// retrying the result it will be refused, so its word is awaited (with
    /// a deadline).
    pub async fn check(
        mut self,
        runs: &std::collections::HashMap<String, Vec<Execution>>,
        procs: &[RunnerProcess],
    ) {
        let reruns = superseded(runs);
        let end = tokio::time::Instant::now() + DEADLINE;
        loop {
            for p in procs {
                self.reported_by(p);
            }
            let (left, overlaps) = (self.unexplained(&reruns), self.overlapping(runs));
            if left.is_empty() && overlaps.is_empty() {
                return;
            }
            assert!(
                tokio::time::Instant::now() < end,
                "executions that overlap: {overlaps:?}; \
                 re-run, but their runner neither died nor lost its lease: {left:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn record(lines: &[&str]) -> (TempDir, PathBuf) {
        let dir = TempDir::new("record");
        let path = dir.path().join("executions");
        std::fs::write(&path, lines.join("\n") + "\n").unwrap();
        (dir, path)
    }

    fn ids(ids: &[&str]) -> Vec<String> {
        ids.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_rerun_after_the_first_execution_ended_is_fine() {
        let (_d, path) = record(&[
            "j1 1 rn_a start 100",
            "j1 1 rn_a end 200",
            "j1 2 rn_b start 300",
            "j1 2 rn_b end 400",
        ]);
        let runs = check_executions(&path, &ids(&["j1"]));
        let again = superseded(&runs);
        assert_eq!(again.len(), 1);
        assert_eq!(again[0].runner, "rn_a");
        let mut lost = LostLeases::default();
        assert_eq!(lost.unexplained(&again).len(), 1, "no lost lease yet");
        lost.reported.insert(("rn_a".to_owned(), "j1".to_owned()));
        assert!(lost.unexplained(&again).is_empty());
    }

    #[test]
    fn overlapping_executions_of_one_job_are_caught() {
        let (_d, path) = record(&[
            "j1 1 rn_a start 100",
            "j1 2 rn_b start 150",
            "j1 1 rn_a end 200",
            "j1 2 rn_b end 400",
        ]);
        let runs = check_executions(&path, &ids(&["j1"]));
        assert_eq!(LostLeases::default().overlapping(&runs).len(), 1);
    }

    #[test]
    fn an_execution_with_no_end_overlaps_unless_its_runner_stopped_it_in_time() {
        let (_d, path) = record(&["j1 1 rn_a start 100", "j1 2 rn_b start 150"]);
        let runs = check_executions(&path, &ids(&["j1"]));
        let mut lost = LostLeases::default();
        assert_eq!(lost.overlapping(&runs).len(), 1, "no end known");
        let key = ("rn_a".to_owned(), "j1".to_owned());
        lost.stopped.insert(key.clone(), 160);
        assert_eq!(lost.overlapping(&runs).len(), 1, "stopped too late");
        lost.stopped.insert(key, 140);
        assert!(lost.overlapping(&runs).is_empty());
    }

    #[test]
    #[should_panic(expected = "ran 2 times")]
    fn one_attempt_on_two_runners_is_caught() {
        let (_d, path) = record(&[
            "j1 1 rn_a start 100",
            "j1 1 rn_a end 120",
            "j1 1 rn_b start 150",
            "j1 1 rn_b end 160",
        ]);
        check_executions(&path, &ids(&["j1"]));
    }

    #[test]
    fn a_rerun_with_no_lost_lease_is_caught() {
        let (_d, path) = record(&[
            "j1 1 rn_a start 100",
            "j1 1 rn_a end 200",
            "j1 2 rn_b start 300",
            "j1 2 rn_b end 400",
        ]);
        let runs = check_executions(&path, &ids(&["j1"]));
        let mut lost = LostLeases::default();
        lost.killed.push((["rn_a".to_owned()].into(), 50));
        lost.restarted.push((["rn_a".to_owned()].into(), 80));
        assert_eq!(
            lost.unexplained(&superseded(&runs)).len(),
            1,
            "killed, and back before the execution started"
        );
        lost.killed.push((["rn_a".to_owned()].into(), 90));
        assert!(
            lost.unexplained(&superseded(&runs)).is_empty(),
            "killed again just before it started: an orphan of the kill"
        );
    }
}
