//! `drover-coordinator`: serve and admin, a thin CLI over the library.
//! (Over 500 lines: the argument types, each flag with its help and env
//! twin, read together with the one arm per command that uses them.)

use std::io::Write as _;
use std::net::SocketAddr;
use std::os::unix::fs::{DirBuilderExt as _, PermissionsExt as _};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context as _, bail};
use clap::{Args, Parser, Subcommand};
use drover_coordinator::admin;
use drover_coordinator::app::{Application, Config, parse_public_url};
use drover_coordinator::clock::SystemClock;
use drover_coordinator::retention::{self, Retention};
use drover_coordinator::secrets::KeySource;
use drover_coordinator::server::{self, ServeLimits};
use drover_coordinator::store::sqlite_backup::BackupError;
use drover_coordinator::store::{Durability, Role};

/// The Drover coordinator: pools, dispatch, jobs, billing.
#[derive(Parser)]
#[command(name = "drover-coordinator", version = version_text())]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// `--version`: this build's version and the wire protocols it serves
/// (as `/healthz` says).
fn version_text() -> &'static str {
    use drover_wire::{OLDEST_PROTOCOL, PROTOCOL_VERSION, VERSION};
    static TEXT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TEXT.get_or_init(|| {
        if OLDEST_PROTOCOL == PROTOCOL_VERSION {
            format!("{VERSION} (serves protocol {PROTOCOL_VERSION})")
        } else {
            format!("{VERSION} (serves protocols {OLDEST_PROTOCOL} to {PROTOCOL_VERSION})")
        }
    })
}

#[derive(Subcommand)]
enum Command {
    /// Serve the REST API and the runner protocol.
    Serve(Box<Serve>),
    /// Administer workspaces and members directly in the database.
    #[command(subcommand)]
    Admin(AdminCommand),
}

#[derive(Args)]
struct Database {
    /// sqlite://PATH or postgres://… (default: a SQLite file in the user's data directory).
    #[arg(long, env = "DROVER_DATABASE_URL", hide_env_values = true)]
    database: Option<String>,
}

#[derive(Args)]
struct SecretKeys {
    /// The keys that seal job env at rest: `id:base64key` a line, the first
    /// seals, all open (or the key ring text itself in DROVER_SECRET_KEY).
    /// Default on SQLite: a key file beside the database, made on first start.
    #[arg(long, env = "DROVER_SECRET_KEY_FILE")]
    secret_key_file: Option<PathBuf>,
}

impl SecretKeys {
    /// The key file, or DROVER_SECRET_KEY (read from the environment only,
    /// never a flag: a command line is visible to other local users).
    fn source(&self) -> anyhow::Result<KeySource> {
        let value = std::env::var("DROVER_SECRET_KEY").ok();
        Ok(match (&self.secret_key_file, value) {
            (Some(_), Some(_)) => {
                bail!("give --secret-key-file or DROVER_SECRET_KEY, not both")
            }
            (Some(path), None) => KeySource::File(path.clone()),
            (None, Some(text)) => KeySource::Value(text),
            (None, None) => KeySource::Default,
        })
    }
}

#[derive(Args)]
struct Serve {
    #[arg(long, env = "DROVER_LISTEN", default_value = "127.0.0.1:7700")]
    listen: SocketAddr,
    #[command(flatten)]
    database: Database,
    /// SQLite durability: full (survives power loss) or normal (survives a crash).
    #[arg(long, env = "DROVER_SQLITE_SYNC", default_value = "full")]
    sqlite_sync: Durability,
    /// A lease ends this many milliseconds after its runner's last heartbeat.
    #[arg(long, env = "DROVER_LEASE_TTL_MS", default_value_t = 20_000, value_parser = clap::value_parser!(u64).range(1000..=600_000))]
    lease_ttl_ms: u64,
    /// For tests only: shift this process's clock by this many milliseconds,
    /// to play a replica whose clock is off.
    #[arg(
        long,
        env = "DROVER_CLOCK_SKEW_MS",
        default_value_t = 0,
        hide = true,
        allow_hyphen_values = true
    )]
    clock_skew_ms: i64,
    #[command(flatten)]
    secrets: SecretKeys,
    /// A file holding a token that `/metrics` then wants as a bearer
    /// (default: `/metrics` is open to anyone who reaches the listen address,
    /// like `/healthz` and `/readyz`; it shows counts and pool ids only).
    #[arg(long, env = "DROVER_METRICS_TOKEN_FILE")]
    metrics_token_file: Option<PathBuf>,
    #[command(flatten)]
    limits: Limits,
    #[command(flatten)]
    retention: RetentionArgs,
    /// How this coordinator names itself in pairing and join links, e.g.
    /// https://ci.example.com (default: http://<the bound listen address>,
    /// https:// with --tls-cert).
    #[arg(long, env = "DROVER_PUBLIC_URL", value_parser = parse_public_url)]
    public_url: Option<String>,
    #[command(flatten)]
    tls: TlsArgs,
    #[command(flatten)]
    github: GithubArgs,
}

/// HTTPS: served by the coordinator itself, and trusted for its own calls.
#[derive(Args)]
struct TlsArgs {
    /// Serve HTTPS with this certificate chain (PEM: the server's
    /// certificate, then intermediates); with --tls-key. Both files are
    /// read again when they change, so a renewed certificate needs no restart.
    #[arg(
        long,
        env = "DROVER_TLS_CERT",
        value_name = "FILE",
        requires = "tls_key"
    )]
    tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM).
    #[arg(
        long,
        env = "DROVER_TLS_KEY",
        value_name = "FILE",
        requires = "tls_cert"
    )]
    tls_key: Option<PathBuf>,
    /// CA certificates (PEM) that the coordinator's own HTTPS calls (GitHub,
    /// GitHub Enterprise Server, the OIDC issuer) trust besides the system's.
    #[arg(long, env = "DROVER_CA_FILE", value_name = "FILE")]
    ca_file: Option<PathBuf>,
}

impl TlsArgs {
    fn files(&self) -> Option<drover_coordinator::tls::TlsFiles> {
        match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => Some(drover_coordinator::tls::TlsFiles {
                cert: cert.clone(),
                key: key.clone(),
            }),
            _ => None,
        }
    }
}

/// The workspace GitHub App, for registering GitHub Actions runners.
#[derive(Args)]
struct GithubArgs {
    /// The GitHub App's id (then the slug, key and OAuth client are needed too).
    #[arg(long, env = "DROVER_GITHUB_APP_ID")]
    github_app_id: Option<u64>,
    /// The App's URL name, as in github.com/apps/<slug>.
    #[arg(long, env = "DROVER_GITHUB_APP_SLUG")]
    github_app_slug: Option<String>,
    /// A file holding the App's private key (PEM, as GitHub gives it).
    #[arg(long, env = "DROVER_GITHUB_APP_KEY_FILE")]
    github_app_key_file: Option<PathBuf>,
    /// The App's OAuth client id (linking an installation proves who installed it).
    #[arg(long, env = "DROVER_GITHUB_CLIENT_ID")]
    github_client_id: Option<String>,
    /// A file holding the App's OAuth client secret.
    #[arg(long, env = "DROVER_GITHUB_CLIENT_SECRET_FILE")]
    github_client_secret_file: Option<PathBuf>,
    /// A file holding the App's webhook secret: GitHub's `workflow_job`
    /// deliveries to /v1/github/webhook start on-demand Actions runners.
    #[arg(long, env = "DROVER_GITHUB_WEBHOOK_SECRET_FILE")]
    github_webhook_secret_file: Option<PathBuf>,
    /// For tests: how often on-demand pools look for workflow jobs to
    /// serve, in ms (a webhook wakes them at once).
    #[arg(long, env = "DROVER_GITHUB_ON_DEMAND_MS", default_value_t = 2_000, hide = true, value_parser = clap::value_parser!(u64).range(10..=3_600_000))]
    github_on_demand_ms: u64,
    /// Ask GitHub for the queued workflow jobs of on-demand pools every
    /// this many seconds, for a coordinator GitHub's webhooks cannot reach
    /// (within the installation's rate limit); 0: never. Default: 30
    /// without --github-webhook-secret-file, else 0.
    #[arg(long, env = "DROVER_GITHUB_POLL_SECONDS", value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(0..=86_400))]
    github_poll_seconds: Option<u64>,
    /// github.com's REST API base.
    #[arg(long, env = "DROVER_GITHUB_API", default_value = "https://api.github.com", value_parser = github_base)]
    github_api: String,
    /// github.com's web base (install pages, OAuth, repository URLs).
    #[arg(long, env = "DROVER_GITHUB_WEB", default_value = "https://github.com", value_parser = github_base)]
    github_web: String,
    /// A GitHub Enterprise Server host: HOST=API_BASE (its web base is
    /// API_BASE without a trailing /api/v3). Repeatable; the env twin takes
    /// a comma-separated list.
    #[arg(long, env = "DROVER_GITHUB_HOST", value_delimiter = ',', value_parser = drover_coordinator::github::Host::parse)]
    github_host: Vec<drover_coordinator::github::Host>,
    /// The GitHub Actions OIDC issuer whose tokens are CI principals of the
    /// workspaces that link their repositories.
    #[arg(long, env = "DROVER_GITHUB_OIDC_ISSUER", default_value = "https://token.actions.githubusercontent.com", value_parser = github_base)]
    github_oidc_issuer: String,
    /// The audience CI tokens must name (default: --public-url).
    #[arg(long, env = "DROVER_GITHUB_OIDC_AUDIENCE")]
    github_oidc_audience: Option<String>,
    /// For tests: how often removing a busy GitHub runner is retried, in ms.
    #[arg(long, env = "DROVER_GITHUB_RETRY_MS", default_value_t = 30_000, hide = true, value_parser = clap::value_parser!(u64).range(10..=3_600_000))]
    github_retry_ms: u64,
}

fn github_base(s: &str) -> Result<String, String> {
    drover_coordinator::github::base_url(s)
}

/// A secret from a file: trimmed, not empty; errors name the file only.
fn read_secret_file(path: &std::path::Path, what: &str) -> anyhow::Result<String> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the {what} file {}", path.display()))?;
    let text = text.trim().to_owned();
    if text.is_empty() {
        bail!("the {what} file {} is empty", path.display());
    }
    Ok(text)
}

impl GithubArgs {
    fn config(&self) -> anyhow::Result<Option<drover_coordinator::github::AppConfig>> {
        use drover_coordinator::github::{AppConfig, AppKey, GITHUB_COM, Host};
        let given = [
            self.github_app_id.is_some(),
            self.github_app_slug.is_some(),
            self.github_app_key_file.is_some(),
            self.github_client_id.is_some(),
            self.github_client_secret_file.is_some(),
        ];
        if given.iter().all(|g| !g) {
            if self.github_webhook_secret_file.is_some() {
                bail!(
                    "--github-webhook-secret-file is the GitHub App's: give the App too (--github-app-id …)"
                );
            }
            return Ok(None);
        }
        let (Some(app_id), Some(slug), Some(key_file), Some(client_id), Some(secret_file)) = (
            self.github_app_id,
            &self.github_app_slug,
            &self.github_app_key_file,
            &self.github_client_id,
            &self.github_client_secret_file,
        ) else {
            bail!(
                "a GitHub App needs all of --github-app-id, --github-app-slug, --github-app-key-file, --github-client-id and --github-client-secret-file"
            );
        };
        if slug.is_empty()
            || slug.len() > 100
            || !slug
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        {
            bail!("--github-app-slug {slug:?} is not an App slug (lowercase letters, digits, '-')");
        }
        let pem = read_secret_file(key_file, "GitHub App key")?;
        let key = AppKey::from_pem(&pem)
            .map_err(|e| anyhow::anyhow!("the GitHub App key file {}: {e}", key_file.display()))?;
        let client_secret = read_secret_file(secret_file, "GitHub client secret")?;
        let webhook_secret = self
            .github_webhook_secret_file
            .as_deref()
            .map(|f| read_secret_file(f, "GitHub webhook secret"))
            .transpose()?
            .map(drover_coordinator::ids::Secret::new);
        let mut hosts = vec![Host {
            name: GITHUB_COM.into(),
            api: self.github_api.clone(),
            web: self.github_web.clone(),
        }];
        for h in &self.github_host {
            if hosts.iter().any(|k| k.name == h.name) {
                bail!("--github-host {} is given twice", h.name);
            }
            hosts.push(h.clone());
        }
        Ok(Some(AppConfig {
            app_id,
            slug: slug.clone(),
            key: std::sync::Arc::new(key),
            client_id: client_id.clone(),
            client_secret: drover_coordinator::ids::Secret::new(client_secret),
            hosts,
            webhook_secret,
        }))
    }
}

/// How long finished history is kept.
#[derive(Args)]
struct RetentionArgs {
    /// Finished jobs (their rows, logs and idempotency keys) older than this
    /// are purged in the background: e.g. 30d, 24h, 90m; `forever` (or 0)
    /// keeps them. Usage totals are kept whatever this is.
    #[arg(long, env = "DROVER_RETAIN_FINISHED", default_value = retention::DEFAULT_AGE, value_parser = age)]
    retain_finished: Age,
    /// Jobs deleted per purge transaction; the database is free for leases
    /// between two.
    #[arg(long, env = "DROVER_RETENTION_BATCH", default_value_t = 500, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    retention_batch: u32,
    /// How often to purge, in milliseconds.
    #[arg(long, env = "DROVER_RETENTION_INTERVAL_MS", default_value_t = 60_000, value_parser = clap::value_parser!(u64).range(10..=86_400_000))]
    retention_interval_ms: u64,
}

/// A retention age; `None`: forever.
#[derive(Clone)]
struct Age(Option<Duration>);

fn age(s: &str) -> Result<Age, String> {
    retention::parse_age(s).map(Age)
}

impl RetentionArgs {
    fn policy(&self) -> Retention {
        Retention {
            age: self.retain_finished.0,
            batch: self.retention_batch as usize,
            interval: Duration::from_millis(self.retention_interval_ms),
        }
    }
}

/// Limits against hostile or heavy load.
#[derive(Args)]
struct Limits {
    /// Open client connections at most (lowered to fit the open-files limit);
    /// past it, new connections are answered 503 and closed.
    #[arg(long, env = "DROVER_MAX_CONNECTIONS", default_value_t = 10_000, value_parser = clap::value_parser!(u32).range(1..))]
    max_connections: u32,
    /// Set the soft open-files limit to this (default: raise it to the hard limit).
    #[arg(long, env = "DROVER_MAX_OPEN_FILES", value_parser = clap::value_parser!(u64).range(64..))]
    max_open_files: Option<u64>,
    /// A request's headers must arrive within this many milliseconds of the
    /// connection opening or of its previous response (so this is also the
    /// idle keep-alive timeout).
    #[arg(long, env = "DROVER_HEADER_TIMEOUT_MS", default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(100..=3_600_000))]
    header_timeout_ms: u64,
    /// A request body must arrive within this many milliseconds (else 408),
    /// and a client must keep taking its answer (a write stalled this long
    /// closes the connection).
    #[arg(long, env = "DROVER_BODY_TIMEOUT_MS", default_value_t = 30_000, value_parser = clap::value_parser!(u64).range(100..=3_600_000))]
    body_timeout_ms: u64,
    /// Large request bodies (over 128 KiB) held in memory at once, in MiB;
    /// past it, 503.
    #[arg(long, env = "DROVER_BODY_MEMORY_MIB", default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=65_536))]
    body_memory_mib: u32,
    /// Member API reads served at once; past it (after a short wait), 503.
    /// The runner protocol is not counted.
    #[arg(long, env = "DROVER_MAX_READS", default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    max_reads: u32,
    /// How long a member read past --max-reads waits for a turn before it
    /// is answered 503 OVERLOADED (0: at once).
    #[arg(long, env = "DROVER_READ_WAIT_MS", default_value_t = 250, value_parser = clap::value_parser!(u64).range(0..=60_000))]
    read_wait_ms: u64,
    /// Large answers (a page of jobs, a job, a batch of its log) one member
    /// or CI principal is sent at once; past it (after the --read-wait-ms
    /// wait), 429 RATE_LIMITED. A client that stops reading keeps its turn
    /// until --body-timeout-ms closes its connection.
    #[arg(long, env = "DROVER_MAX_READS_PER_MEMBER", default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    max_reads_per_member: u32,
    /// On SIGTERM the coordinator exits within this many milliseconds:
    /// requests in flight get them (less up to 0.5 s to close the
    /// database); connections that never sent a whole request close at once.
    #[arg(long, env = "DROVER_SHUTDOWN_TIMEOUT_MS", default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(0..=600_000))]
    shutdown_timeout_ms: u64,
}

impl Limits {
    /// The limits, after setting the open-files limit they must fit under.
    fn apply(&self) -> ServeLimits {
        let open_files = server::set_open_files_limit(self.max_open_files);
        let wanted = self.max_connections as usize;
        let max_connections = server::connection_cap(wanted, open_files);
        if max_connections < wanted {
            tracing::warn!(
                open_files,
                max_connections,
                "lowered --max-connections to fit the open-files limit"
            );
        }
        ServeLimits {
            max_connections,
            header_timeout: Duration::from_millis(self.header_timeout_ms),
            body_timeout: Duration::from_millis(self.body_timeout_ms),
            body_memory: self.body_memory_mib as usize * 1024 * 1024,
            max_reads: self.max_reads as usize,
            read_wait: Duration::from_millis(self.read_wait_ms),
            max_reads_per_member: self.max_reads_per_member as usize,
            shutdown_timeout: Duration::from_millis(self.shutdown_timeout_ms),
        }
    }
}

#[derive(Subcommand)]
enum AdminCommand {
    /// Create a workspace and its first admin; prints the admin's API token once.
    Bootstrap(MemberArgs),
    /// Add a member to a workspace; prints their API token once.
    AddMember {
        #[command(flatten)]
        member: MemberArgs,
        #[arg(long, default_value = "member", value_parser = ["admin", "member"])]
        role: String,
    },
    /// Re-seal every job's stored env with the current (first) secret key,
    /// so older keys can then leave the key ring.
    RotateSecrets {
        #[command(flatten)]
        database: Database,
        #[command(flatten)]
        secrets: SecretKeys,
    },
    /// Copy the SQLite database, while the coordinator serves, to a new file
    /// (checked with PRAGMA integrity_check). Job env in the copy stays
    /// sealed: keep the secret key file backed up separately.
    /// Exit status: 0 written and checked; 1 failed (nothing left at FILE);
    /// 2 refused (FILE exists, a PostgreSQL URL: use pg_dump).
    Backup {
        #[command(flatten)]
        database: Database,
        /// The new file to write.
        #[arg(long, value_name = "FILE")]
        to: PathBuf,
        /// Replace FILE if it exists.
        #[arg(long)]
        force: bool,
    },
}

#[derive(Args)]
struct MemberArgs {
    #[arg(long)]
    workspace: String,
    #[arg(long)]
    email: String,
    #[command(flatten)]
    database: Database,
    /// Print {"workspace","email","subject","role","token"} as JSON.
    #[arg(long)]
    json: bool,
}

fn database_url(db: &Database) -> anyhow::Result<String> {
    if let Some(url) = &db.database {
        if !["sqlite:", "postgres:", "postgresql:"]
            .iter()
            .any(|p| url.starts_with(p))
        {
            // Only the scheme: the rest of a URL may hold a password.
            bail!(
                "unsupported database URL (scheme {:?}): use sqlite://PATH or postgres://USER:PASSWORD@HOST/DB",
                drover_coordinator::store::scheme(url)
            );
        }
        return Ok(url.clone());
    }
    let dir = dirs::data_dir()
        .context("no data directory for this user; pass --database")?
        .join("drover");
    // Only this user may enter it (the database, its WAL, the key file).
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .and_then(|()| std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)))
        .with_context(|| format!("creating {}", dir.display()))?;
    Ok(format!("sqlite://{}", dir.join("coordinator.db").display()))
}

/// The token in `path` (surrounding whitespace trimmed; never empty).
fn read_metrics_token(path: &std::path::Path) -> anyhow::Result<String> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the metrics token file {}", path.display()))?;
    let token = text.trim();
    if token.is_empty() {
        bail!("the metrics token file {} is empty", path.display());
    }
    Ok(token.to_owned())
}

async fn shutdown_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

fn print_credential(c: &drover_wire::MemberCredential, json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string(c)?);
    } else {
        println!(
            "workspace: {}\nemail:     {}\nrole:      {}\nsubject:   {}\ntoken:     {}",
            c.workspace, c.email, c.role, c.subject, c.token
        );
        eprintln!("(the token is shown once; keep it somewhere safe)");
    }
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("DROVER_LOG")
                .unwrap_or_else(|_| "drover_coordinator=info,warn".into())
                // rmcp logs whole MCP messages at debug and trace: tool
                // arguments (a job's env) and answers (a runner's token).
                .add_directive("rmcp=info".parse().expect("a directive")),
        )
        .with_writer(std::io::stderr)
        .init();
    // Whatever this process creates (the SQLite database, its WAL and
    // shared-memory files, the key file) is for this user alone.
    // SAFETY: umask(2) only sets the process's file mode mask.
    unsafe {
        libc::umask(0o077);
    }
    let cli = Cli::parse();
    match cli.command {
        Command::Serve(s) => {
            if s.clock_skew_ms != 0 {
                tracing::warn!(
                    ms = s.clock_skew_ms,
                    "this coordinator's clock is shifted (a test option)"
                );
                SystemClock::set_skew_ms(s.clock_skew_ms);
            }
            let github_poll = match s.github.github_poll_seconds {
                Some(0) => None,
                Some(n) => Some(Duration::from_secs(n)),
                None if s.github.github_webhook_secret_file.is_none() => {
                    Some(Duration::from_secs(30))
                }
                None => None,
            };
            let config = Config {
                listen: s.listen,
                database_url: database_url(&s.database)?,
                durability: s.sqlite_sync,
                lease_ttl: Duration::from_millis(s.lease_ttl_ms),
                secrets: s.secrets.source()?,
                serve: s.limits.apply(),
                metrics_token: s
                    .metrics_token_file
                    .as_deref()
                    .map(read_metrics_token)
                    .transpose()?,
                retention: s.retention.policy(),
                public_url: s.public_url,
                github: s.github.config()?,
                github_retry: Duration::from_millis(s.github.github_retry_ms),
                github_on_demand: Duration::from_millis(s.github.github_on_demand_ms),
                github_poll,
                oidc_issuer: s.github.github_oidc_issuer.clone(),
                oidc_audience: s.github.github_oidc_audience.clone(),
                tls: s.tls.files(),
                ca_file: s.tls.ca_file.clone(),
            };
            let app = Application::build(config).await?;
            println!(
                "drover-coordinator listening on {}://{}",
                app.scheme(),
                app.local_addr()
            );
            std::io::stdout().flush()?;
            app.run_until(shutdown_signal()).await?;
            tracing::info!("stopped");
        }
        Command::Admin(AdminCommand::Bootstrap(m)) => {
            let url = database_url(&m.database)?;
            let c = admin::bootstrap(&url, &m.workspace, &m.email).await?;
            print_credential(&c, m.json)?;
        }
        Command::Admin(AdminCommand::AddMember { member: m, role }) => {
            let url = database_url(&m.database)?;
            let role = Role::parse(&role).expect("clap checked the role");
            let c = admin::add_member(&url, &m.workspace, &m.email, role).await?;
            print_credential(&c, m.json)?;
        }
        Command::Admin(AdminCommand::RotateSecrets { database, secrets }) => {
            let url = database_url(&database)?;
            let (key, jobs) = admin::rotate_secrets(&url, &secrets.source()?).await?;
            println!("re-sealed the env of {jobs} jobs with secret key {key:?}");
        }
        Command::Admin(AdminCommand::Backup {
            database,
            to,
            force,
        }) => {
            let url = database_url(&database)?;
            match admin::backup(&url, &to, force) {
                Ok(r) => {
                    println!(
                        "wrote {}: {} bytes, {} jobs, integrity check ok, in {} ms",
                        r.file.display(),
                        r.bytes,
                        r.jobs,
                        r.took.as_millis()
                    );
                    eprintln!(
                        "(job env in the copy is sealed: restoring it needs the secret key file too, \
                         which is not in the copy; keep it backed up apart)"
                    );
                }
                Err(BackupError::Refused(why)) => {
                    eprintln!("Error: {why}");
                    std::process::exit(2);
                }
                Err(BackupError::Failed(e)) => return Err(e),
            }
        }
    }
    Ok(())
}
