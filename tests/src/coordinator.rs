//! A `drover-coordinator serve` process for a test: its options, a fresh
//! database (SQLite file or PostgreSQL database), and typed calls on it.
//!
//! Over 500 lines: everything a test does to a coordinator process (start,
//! replicas, restart, signals, its database from outside, its CLIs) is here,
//! so that tests read as what they check.

use super::*;

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
    /// Serve HTTPS (`--tls-cert`, `--tls-key`); the URL is then
    /// `https://localhost:PORT` and the harness's clients trust `ca`.
    pub tls: Option<ServerTls>,
}

/// A coordinator's TLS files (PEM), and the CA that signed its certificate.
#[derive(Debug, Clone)]
pub struct ServerTls {
    pub cert: PathBuf,
    pub key: PathBuf,
    pub ca: PathBuf,
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
            tls: None,
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
    pg_admin_try(sql).await.expect("admin statement");
}

async fn pg_admin_try(sql: String) -> Result<(), sqlx::Error> {
    use sqlx::Connection as _;
    let mut conn = sqlx::PgConnection::connect(&postgres_admin_url()).await?;
    sqlx::Executor::execute(&mut conn, sql.as_str()).await?;
    let _ = conn.close().await;
    Ok(())
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
    /// `http()`, built once (loading the system's roots takes a while).
    http: std::sync::OnceLock<reqwest::Client>,
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
    /// Runs `sql` (one or more statements) on this coordinator's database,
    /// from outside it: for tests and benches that age or seed rows.
    pub async fn execute_sql(&self, sql: &str) {
        use sqlx::Connection as _;
        match self.options.backend {
            Backend::Sqlite => {
                let mut conn = sqlx::SqliteConnection::connect(&self.database)
                    .await
                    .expect("connect");
                sqlx::raw_sql(sql).execute(&mut conn).await.expect(sql);
            }
            Backend::Postgres => {
                let mut conn = sqlx::PgConnection::connect(&self.database)
                    .await
                    .expect("connect");
                sqlx::raw_sql(sql).execute(&mut conn).await.expect(sql);
            }
        }
    }

    /// A coordinator process on `database`, its files (log, key) in `dir`.
    async fn serve(
        dir: TempDir,
        database: String,
        owned_database: Option<String>,
        options: CoordinatorOptions,
    ) -> Self {
        let mut c = Self {
            child: None,
            url: String::new(),
            addr: "127.0.0.1:0".into(),
            log: dir.path().join("coordinator.log"),
            database,
            owned_database,
            options,
            dir,
            http: std::sync::OnceLock::new(),
        };
        c.spawn().await;
        c
    }

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
        let mut options = options;
        if options.backend == Backend::Postgres && options.secret_key_file.is_none() {
            let path = dir.path().join("secret.key");
            write_secret_key_file(&path, &[&new_secret_key()]);
            options.secret_key_file = Some(path);
        }
        Self::serve(dir, database, owned_database, options).await
    }

    /// A coordinator on a copy of the SQLite database `file`, as a restore
    /// does it: the file copied into a fresh directory, then served.
    pub async fn start_on_copy(file: &Path, options: CoordinatorOptions) -> Self {
        assert_eq!(options.backend, Backend::Sqlite, "a SQLite file");
        let dir = TempDir::new("restored");
        let path = dir.path().join("drover.db");
        std::fs::copy(file, &path).expect("copy the database file");
        let database = format!("sqlite://{}", path.display());
        Self::serve(dir, database, None, options).await
    }

    /// `drover-coordinator admin backup --database <this one's> --to FILE`
    /// and `extra` flags, to run.
    pub fn backup_command(&self, to: &Path, extra: &[&str]) -> Command {
        let mut command = Command::new(bin("drover-coordinator"));
        command
            .args(["admin", "backup", "--database", &self.database])
            .arg("--to")
            .arg(to)
            .args(extra)
            .env_remove("DROVER_DATABASE_URL");
        command
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
        Self::serve(dir, self.database.clone(), None, options).await
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
            .args(self.options.tls.iter().flat_map(|t| {
                [
                    Path::new("--tls-cert"),
                    &t.cert,
                    Path::new("--tls-key"),
                    &t.key,
                ]
            }))
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
            while reader.read_line(&mut line).is_ok_and(|n| n > 0)
                && !line.contains("http://")
                && !line.contains("https://")
            {
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
            .filter(|u| u.starts_with("http://") || u.starts_with("https://"))
            .unwrap_or_else(|| {
                panic!(
                    "coordinator did not print its URL: {line:?}; log: {}",
                    self.log_text()
                )
            })
            .to_owned();
        self.addr = url
            .trim_start_matches("http://")
            .trim_start_matches("https://")
            .to_owned();
        // The test certificates name `localhost`.
        self.url = match self.options.tls {
            Some(_) => url.replace("https://127.0.0.1:", "https://localhost:"),
            None => url,
        };
        self.child = Some(child);
    }

    /// The coordinator process's pid.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Runs the `drover` CLI against this coordinator with `token`.
    pub fn drover(&self, token: &str, args: &[&str]) -> std::process::Output {
        Command::new(bin("drover"))
            .args(args)
            .env("DROVER_URL", &self.url)
            .env("DROVER_TOKEN", token)
            .envs(self.ca_env())
            .output()
            .expect("run drover")
    }

    /// `DROVER_CA_FILE` when serving TLS: the CLI then trusts the test CA.
    pub fn ca_env(&self) -> Vec<(&'static str, PathBuf)> {
        self.options
            .tls
            .iter()
            .map(|t| ("DROVER_CA_FILE", t.ca.clone()))
            .collect()
    }

    pub fn client(&self, token: &str) -> Client {
        let options = ClientOptions {
            ca_file: self.options.tls.as_ref().map(|t| t.ca.clone()),
        };
        Client::with_options(&self.url, Token::new(token), &options).expect("client")
    }

    /// A plain HTTP client that trusts this coordinator's certificate.
    pub fn http(&self) -> &reqwest::Client {
        self.http.get_or_init(|| {
            let mut b = reqwest::Client::builder();
            if let Some(t) = &self.options.tls {
                let pem = std::fs::read(&t.ca).expect("CA file");
                for cert in reqwest::Certificate::from_pem_bundle(&pem).expect("CA PEM") {
                    b = b.add_root_certificate(cert);
                }
            }
            b.build().expect("HTTP client")
        })
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
    /// Sets an environment variable for the next start (`restart`), e.g.
    /// `DROVER_CLOCK_SKEW_MS` to move this coordinator's clock.
    pub fn set_env(&mut self, key: &'static str, value: String) {
        self.options.env.retain(|(k, _)| *k != key);
        self.options.env.push((key, value));
    }

    pub async fn restart(&mut self) {
        assert!(self.child.is_none(), "stop it first");
        self.spawn().await;
    }

    /// Lease long-polls waiting in the coordinator right now.
    pub async fn waiting_leases(&self) -> u64 {
        self.try_waiting_leases()
            .await
            .expect("/healthz with waitingLeases")
    }

    /// As `waiting_leases`; `None` when `/healthz` did not answer with the
    /// count (a busy coordinator may shed it with 503).
    async fn try_waiting_leases(&self) -> Option<u64> {
        let resp = self
            .http()
            .get(format!("{}/healthz", self.url))
            // A coordinator at its connection cap may leave the connection
            // in its backlog: the caller's deadline must still come.
            .timeout(std::time::Duration::from_secs(5))
            .send()
            .await
            .ok()?;
        let v: serde_json::Value = resp.json().await.ok()?;
        v["waitingLeases"].as_u64()
    }

    /// Whether the coordinator has seen another replica listening for its
    /// signals (`/healthz`); `None` when it did not answer.
    pub async fn other_replicas(&self) -> Option<bool> {
        let resp = self
            .http()
            .get(format!("{}/healthz", self.url))
            .send()
            .await
            .ok()?;
        let v: serde_json::Value = resp.json().await.ok()?;
        v["otherReplicas"].as_bool()
    }

    pub async fn wait_for_waiting(&self, n: u64) {
        eventually(
            &format!("{n} waiting lease polls"),
            DEADLINE,
            || async move { (self.try_waiting_leases().await == Some(n)).then_some(()) },
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
            // Best effort: a database left behind is dropped by the next
            // tests/run.sh; a test must not fail for its cleanup.
            run_blocking(async move {
                if let Err(e) =
                    pg_admin_try(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).await
                {
                    eprintln!("could not drop test database {name}: {e}");
                }
            });
        }
    }
}
