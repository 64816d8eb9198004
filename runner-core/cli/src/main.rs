//! `drover`: the member CLI and the headless runner. Over 500 lines: it is
//! the CLI's argument types and one short arm per command, all thin over
//! runner-core.

use std::ffi::OsString;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context as _, bail};
use clap::{Args, Parser, Subcommand};
use runner_core::backoff::Backoff;
use runner_core::client::{
    Client, ClientOptions, RunnerListing, Scope, Token, cleartext_warning, idempotency_key,
};
use runner_core::credentials::{
    CredentialStore as _, FileStore, JoinError, credential_key, join_or_load,
};
use runner_core::fleet::Fleet;
use runner_core::isolation::{self, Isolation, Sandbox};
use runner_core::runner::{Credential, EventKind, RunnerSettings};
use runner_core::wire::{JobState, SubmitJob};

mod billing;
mod github;
mod human;
mod people;
mod table;

/// What `drover --help` says of exit codes.
const EXIT_CODES: &str = "\
Lists print a table for people; --json prints the coordinator's answer.

Exit codes:
  0    done
  2    refused or failed: bad arguments, an unreachable coordinator, or the
       coordinator's error, on stderr with its code and HTTP status
       (e.g. `drover: Forbidden (403): …`)
  submit --wait exits as its job did: the job's own exit code (1-255),
       1 failed without one or lost, 124 timed out, 130 cancelled
  runner exits 0 once drained (SIGTERM or ctrl-c), 1 when it could not
       go on (e.g. revoked)";

/// `--version`: this build's version and the wire protocol it speaks (the
/// `drover-protocol` header every request carries).
fn version_text() -> &'static str {
    use runner_core::wire::{PROTOCOL_VERSION, VERSION};
    static TEXT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TEXT.get_or_init(|| format!("{VERSION} (protocol {PROTOCOL_VERSION})"))
}

#[derive(Parser)]
#[command(
    name = "drover",
    version = version_text(),
    about = "Drover: run jobs on machines you own",
    after_help = EXIT_CODES
)]
struct Cli {
    /// Coordinator URL.
    #[arg(
        long,
        global = true,
        env = "DROVER_URL",
        default_value = "http://127.0.0.1:7700"
    )]
    url: String,
    /// API token (member `drv_…`, runner `rnr_…`, or a pool join token with --join).
    /// On a shared machine prefer DROVER_TOKEN or --token-file: other local
    /// users can read a command line.
    #[arg(long, global = true, env = "DROVER_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// Read the token from this file (its first line); it takes precedence
    /// over --token and DROVER_TOKEN.
    #[arg(long, global = true, value_name = "PATH")]
    token_file: Option<PathBuf>,
    /// A PEM file of CA certificates to trust besides the system's (for a
    /// coordinator whose certificate a private CA signed).
    #[arg(long, global = true, env = "DROVER_CA_FILE", value_name = "FILE")]
    ca_file: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run runners: one paired runner (token rnr_…), or N joined to a pool (--join REF, with a join token djt_…).
    Runner(RunnerArgs),
    /// Submit a job: drover submit --runtime REF [--wait] -- CMD ARGS…
    Submit(SubmitArgs),
    /// Inspect and control jobs.
    #[command(subcommand)]
    Jobs(JobsCommand),
    /// The workspace's runner roster; revoking runners.
    #[command(subcommand)]
    Runners(RunnersCommand),
    /// Pools and their join tokens.
    #[command(subcommand)]
    Runtimes(RuntimesCommand),
    /// Print a one-time link (ten minutes) that pairs a device to you.
    PairLink,
    /// Your API tokens: list and revoke.
    #[command(subcommand)]
    Tokens(TokensCommand),
    /// Usage in a month (UTC), by pool, member or runner: the workspace's (admins) or yours.
    Usage(billing::UsageArgs),
    /// The workspace's budget per calendar month, in runner-minutes.
    #[command(subcommand)]
    Budget(billing::BudgetCommand),
    /// Workspace members (admins): list, invite, change a role, remove.
    #[command(subcommand)]
    Members(people::MembersCommand),
    /// The workspace's audit log (admins), newest first.
    Audit(people::AuditArgs),
    /// The workspace's GitHub App (admins): link it, list what it reaches,
    /// and install a GitHub Actions runner beside a Drover runner.
    #[command(subcommand)]
    Github(github::GithubCommand),
    /// CI links (admins): repositories whose GitHub Actions jobs submit here
    /// with their OIDC token, and their workflow files.
    #[command(subcommand)]
    Ci(github::CiCommand),
    /// Redeem a pairing link or an invite for an API token (printed once).
    Redeem(people::RedeemArgs),
    /// Who your token belongs to: workspace, email, role, and the token.
    Whoami {
        /// Print the coordinator's JSON.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
enum TokensCommand {
    /// Your API tokens: id, name, created, last used; `*` marks this one.
    List {
        /// Print the coordinator's JSON (times in Unix milliseconds).
        #[arg(long)]
        json: bool,
    },
    /// Revoke one of your API tokens, at once.
    Revoke { id: String },
}

#[derive(Args)]
struct RunnerArgs {
    /// Join runners to this pool ref (e.g. self:ws:builders) with a join token.
    #[arg(long)]
    join: Option<String>,
    /// How many runners to join (each its own identity), with --join.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=1024))]
    runners: u16,
    /// Jobs each runner runs at once.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=256))]
    max_concurrent: u16,
    /// Extra labels, e.g. gpu,zone=eu.
    #[arg(long, value_delimiter = ',')]
    labels: Vec<String>,
    /// Runner name prefix (default: the host name).
    #[arg(long)]
    name: Option<String>,
    /// Where joined runners keep their credentials.
    #[arg(long, env = "DROVER_STATE_DIR")]
    state_dir: Option<PathBuf>,
    /// Seconds between SIGTERM and SIGKILL for a cancelled or timed-out job.
    #[arg(long, default_value_t = 10)]
    kill_grace: u64,
    /// Longest pause between reconnect attempts, in milliseconds.
    #[arg(long, default_value_t = 5000)]
    max_backoff_ms: u64,
    /// Where each job's directory is made (and removed after): a directory
    /// of this user's own, 0700 (default: drover-work-<uid> in $TMPDIR or
    /// /tmp). The runner refuses one another user owns or could replace.
    #[arg(long, env = "DROVER_WORK_DIR", value_name = "DIR")]
    work_dir: Option<PathBuf>,
    /// Run each job in a sandbox: `bwrap` (bubblewrap, Linux) makes the
    /// filesystem read-only but the job's directory, gives it a private
    /// /tmp and its own PID namespace, and hides the state directory, the
    /// home directories and /run/user (session bus, keyring, agents).
    /// Use it for workspace runners, whose jobs come from every member.
    #[arg(long, default_value = "none", value_parser = parse_sandbox)]
    sandbox: Sandbox,
    /// Run jobs as this user (the runner runs as root): they cannot read
    /// the runner's state directory or its /proc entries. Jobs of one
    /// runner still share the user; --sandbox bwrap keeps them apart.
    #[arg(long, value_name = "USER")]
    job_user: Option<String>,
}

fn parse_sandbox(s: &str) -> Result<Sandbox, String> {
    Sandbox::parse(s).ok_or_else(|| format!("{s:?}: use none or bwrap"))
}

/// The arguments without `--token VALUE` / `--token=VALUE`, and the token,
/// if one was given so. A runner's command line is readable by every user
/// and job of the machine (`/proc/PID/cmdline`), for as long as it runs.
fn token_flag_removed(args: Vec<OsString>) -> Option<(Vec<OsString>, OsString)> {
    let mut kept = Vec::with_capacity(args.len());
    let mut token = None;
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        if arg == "--" {
            kept.push(arg);
            kept.extend(args);
            break;
        }
        if arg == "--token" {
            token = args.next();
        } else if let Some(value) = arg.to_str().and_then(|a| a.strip_prefix("--token=")) {
            token = Some(value.into());
        } else {
            kept.push(arg);
        }
    }
    token.map(|t| (kept, t))
}

/// `drover runner --token T`: starts itself again at once (same process)
/// without the flag, with `T` in `DROVER_TOKEN`, which only its user can read
/// (and, once hardened, only root); so no job ever sees `T` in the runner's
/// command line. Returns only if exec fails.
fn reexec_without_token_flag() -> anyhow::Result<()> {
    use std::os::unix::process::CommandExt as _;
    let Some((args, token)) = token_flag_removed(std::env::args_os().collect()) else {
        return Ok(());
    };
    let exe = std::env::current_exe().context("finding this program to restart it")?;
    let (arg0, rest) = args.split_first().context("no argv[0]")?;
    let e = std::process::Command::new(exe)
        .arg0(arg0)
        .args(rest)
        .env("DROVER_TOKEN", token)
        .exec();
    Err(e).context("restarting without --token on the command line")
}

#[derive(Args)]
struct SubmitArgs {
    #[arg(long)]
    runtime: String,
    /// Required capabilities, e.g. docker,os=linux.
    #[arg(long, value_delimiter = ',')]
    requires: Vec<String>,
    /// KEY=VALUE, or KEY alone to pass on KEY from this environment (so a
    /// secret stays out of the command line); repeatable.
    #[arg(long = "env", value_name = "KEY[=VALUE]", value_parser = parse_env)]
    env: Vec<(String, String)>,
    /// KEY=VALUE lines (blank lines and `#` comments ignored); --env wins.
    #[arg(long, value_name = "PATH")]
    env_file: Vec<PathBuf>,
    #[arg(long)]
    timeout: Option<u64>,
    #[arg(long, default_value_t = 0)]
    priority: i32,
    #[arg(long)]
    max_attempts: Option<u32>,
    /// Run in this container image (needs a runner with docker).
    #[arg(long)]
    image: Option<String>,
    /// Follow the logs and exit with the job's exit code.
    #[arg(long)]
    wait: bool,
    /// Sign in with this GitHub Actions job's OIDC token instead of an API
    /// token (the workflow needs `permissions: id-token: write`, and the
    /// repository must be linked for CI: `drover ci link`).
    #[arg(long)]
    github_oidc: bool,
    /// The audience to ask GitHub's OIDC token for (default: --url).
    #[arg(long, env = "DROVER_OIDC_AUDIENCE", requires = "github_oidc")]
    oidc_audience: Option<String>,
    #[arg(last = true, required = true)]
    command: Vec<String>,
}

/// `KEY=VALUE`, or `KEY`: then the value is this process's `$KEY`.
fn parse_env(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_owned(), v.to_owned())),
        Some(_) => Err(format!("{s:?} has no name before the =")),
        None if s.is_empty() => Err("an empty --env".into()),
        None => match std::env::var(s) {
            Ok(v) => Ok((s.to_owned(), v)),
            Err(std::env::VarError::NotPresent) => Err(format!(
                "{s} is not set in this environment (give KEY=VALUE, or export {s})"
            )),
            Err(std::env::VarError::NotUnicode(_)) => Err(format!("{s} is not valid UTF-8")),
        },
    }
}

/// An env file: `KEY=VALUE` lines; blank lines and `#` comments are skipped.
/// Values are taken as written (no quotes or escapes are interpreted).
fn parse_env_file(text: &str) -> Result<Vec<(String, String)>, String> {
    let mut vars = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim_start();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        match line.split_once('=') {
            Some((k, v)) if !k.trim().is_empty() => {
                vars.push((k.trim().to_owned(), v.to_owned()));
            }
            _ => return Err(format!("line {} is not KEY=VALUE", n + 1)),
        }
    }
    Ok(vars)
}

/// The job's environment: the env files in order, then --env.
fn job_env(args: &SubmitArgs) -> anyhow::Result<std::collections::BTreeMap<String, String>> {
    let mut env = std::collections::BTreeMap::new();
    for path in &args.env_file {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading --env-file {}", path.display()))?;
        let vars = parse_env_file(&text)
            .map_err(|e| anyhow::anyhow!("--env-file {}: {e}", path.display()))?;
        env.extend(vars);
    }
    env.extend(args.env.iter().cloned());
    Ok(env)
}

#[derive(Subcommand)]
enum JobsCommand {
    /// Show a job: its state, where and by whom it ran, and when.
    Show {
        id: String,
        /// Print the job as JSON (the API's shape) instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Print a job's log.
    Logs {
        id: String,
        #[arg(long)]
        follow: bool,
    },
    Cancel {
        id: String,
    },
    /// Your jobs and the workspace pools' jobs, newest first.
    List {
        #[arg(long)]
        state: Option<String>,
        #[arg(long, default_value_t = 20)]
        limit: u32,
        /// Print the coordinator's JSON (times in Unix milliseconds).
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
enum RunnersCommand {
    /// Workspace-owned runners and members' personal runners, with status.
    List {
        /// Print the coordinator's JSON (times in Unix milliseconds).
        #[arg(long)]
        json: bool,
    },
    /// Revoke a runner at once: one of yours, or a workspace runner
    /// (--workspace, admins; its GitHub Actions runner goes too).
    Revoke {
        /// The runner's id (rn_…), from `drover runners list`.
        id: String,
        #[arg(long)]
        workspace: bool,
    },
}

#[derive(Subcommand)]
enum RuntimesCommand {
    /// Your pools, or the workspace's (--workspace).
    List {
        #[arg(long)]
        workspace: bool,
        /// Print the coordinator's JSON (times in Unix milliseconds).
        #[arg(long)]
        json: bool,
    },
    Create {
        name: String,
        #[arg(long)]
        workspace: bool,
    },
    /// Mint a join token for a pool (name or id), good for one day unless --ttl.
    JoinToken {
        runtime: String,
        #[arg(long)]
        workspace: bool,
        /// Print a `drover://join?…` link instead of the bare token.
        #[arg(long)]
        link: bool,
        /// How long it works: seconds, or 30m, 12h, 7d (at most 30d).
        #[arg(long, value_parser = ttl_seconds)]
        ttl: Option<u64>,
    },
    /// Join tokens of your pools, or the workspace's (--workspace, admins):
    /// id, pool, who minted it, created, expires, last used, uses. Never the token.
    JoinTokens {
        #[arg(long)]
        workspace: bool,
        /// Print the coordinator's JSON (times in Unix milliseconds).
        #[arg(long)]
        json: bool,
    },
    /// Revoke a join token (jt_…, from `join-tokens`) at once.
    RevokeJoinToken {
        id: String,
        #[arg(long)]
        workspace: bool,
    },
}

/// `--ttl`: seconds, or a whole number of minutes, hours or days (`30m`,
/// `12h`, `7d`). The coordinator checks the range (1 s..=30 d).
fn ttl_seconds(s: &str) -> Result<u64, String> {
    let (digits, unit) = match s.chars().last() {
        Some('s') => (&s[..s.len() - 1], 1),
        Some('m') => (&s[..s.len() - 1], 60),
        Some('h') => (&s[..s.len() - 1], 3600),
        Some('d') => (&s[..s.len() - 1], 86_400),
        _ => (s, 1),
    };
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(unit))
        .ok_or_else(|| format!("{s:?}: use seconds, or a lifetime such as 30m, 12h or 7d"))
}

fn token(cli: &Cli) -> anyhow::Result<Token> {
    if let Some(path) = &cli.token_file {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading --token-file {}", path.display()))?;
        let first = text.lines().next().unwrap_or_default().trim();
        if first.is_empty() {
            bail!("--token-file {} is empty", path.display());
        }
        return Ok(Token::new(first));
    }
    match &cli.token {
        Some(t) if !t.is_empty() => Ok(Token::new(t.clone())),
        _ => bail!("no token: set DROVER_TOKEN, or pass --token-file (or --token)"),
    }
}

/// A client for the member API, which tells the coordinator's audit log
/// that its requests come from the CLI.
/// The client a submit uses: the member's, or with `--github-oidc` one
/// signed in with the GitHub Actions job's OIDC token.
async fn submit_client(cli: &Cli, args: &SubmitArgs) -> anyhow::Result<Client> {
    if !args.github_oidc {
        return member_client(cli);
    }
    let audience = args.oidc_audience.as_deref().unwrap_or(&cli.url);
    let token = github_oidc_token(audience).await?;
    Ok(client(cli, Token::new(token))?.with_surface("cli"))
}

/// An OIDC token from the GitHub Actions runner this job runs on, for
/// `audience` (GitHub documents ACTIONS_ID_TOKEN_REQUEST_URL and _TOKEN).
async fn github_oidc_token(audience: &str) -> anyhow::Result<String> {
    let (Ok(url), Ok(bearer)) = (
        std::env::var("ACTIONS_ID_TOKEN_REQUEST_URL"),
        std::env::var("ACTIONS_ID_TOKEN_REQUEST_TOKEN"),
    ) else {
        bail!(
            "--github-oidc: ACTIONS_ID_TOKEN_REQUEST_URL and ACTIONS_ID_TOKEN_REQUEST_TOKEN are not set; run it in a GitHub Actions job with `permissions: id-token: write`"
        );
    };
    let audience = drover_wire::text::percent_encode(audience);
    #[derive(serde::Deserialize)]
    struct Answer {
        value: String,
    }
    let answer: Answer = reqwest::Client::new()
        .get(format!("{url}&audience={audience}"))
        .bearer_auth(bearer)
        .timeout(std::time::Duration::from_secs(30))
        .send()
        .await
        .and_then(|r| r.error_for_status())
        .context("asking GitHub Actions for an OIDC token")?
        .json()
        .await
        .context("reading GitHub Actions' OIDC token")?;
    Ok(answer.value)
}

fn member_client(cli: &Cli) -> anyhow::Result<Client> {
    Ok(client(cli, token(cli)?)?.with_surface("cli"))
}

/// The TLS options of `--ca-file` / `DROVER_CA_FILE`.
fn client_options(cli: &Cli) -> ClientOptions {
    ClientOptions {
        ca_file: cli.ca_file.clone(),
    }
}

/// A client for `--url` with `token`.
fn client(cli: &Cli, token: Token) -> anyhow::Result<Client> {
    client_at(&cli.url, token, &client_options(cli))
}

/// A client for `url`. A plain `http://` URL to another machine gets a
/// warning on stderr, once: tokens would cross the network in clear text.
fn client_at(url: &str, token: Token, options: &ClientOptions) -> anyhow::Result<Client> {
    static WARNED: std::sync::Once = std::sync::Once::new();
    if let Some(warning) = cleartext_warning(url) {
        WARNED.call_once(|| eprintln!("drover: {warning}"));
    }
    Ok(Client::with_options(url, token, options)?)
}

/// Submits once, retrying transport errors and 5xx answers with the same
/// idempotency key, so a submit whose answer was lost is not made twice.
async fn submit(client: &Client, job: &SubmitJob) -> anyhow::Result<runner_core::wire::Job> {
    const TRIES: u32 = 5;
    let key = idempotency_key();
    let mut backoff = Backoff::new(Duration::from_millis(200), Duration::from_secs(3));
    let mut tried = 1;
    loop {
        match client.submit_with_key(job, &key).await {
            Ok(job) => return Ok(job),
            Err(e) if e.is_recoverable() && tried < TRIES => {
                eprintln!("drover: submit failed ({e}); retrying");
                tried += 1;
                backoff.wait().await;
            }
            Err(e) => return Err(e.into()),
        }
    }
}

fn scope(workspace: bool) -> Scope {
    if workspace {
        Scope::Workspace
    } else {
        Scope::Me
    }
}

fn print_json(v: &impl serde::Serialize) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(v)?);
    Ok(())
}

/// The exit code `drover submit --wait` ends with for a finished job.
fn job_exit_code(job: &runner_core::wire::Job) -> u8 {
    match (job.state, job.exit_code) {
        (JobState::Succeeded, _) => 0,
        (_, Some(code)) if (1..=255).contains(&code) => code as u8,
        (JobState::TimedOut, _) => 124,
        (JobState::Cancelled, _) => 130,
        _ => 1,
    }
}

/// Refuses a token file that others may read or write, as ssh refuses a
/// readable private key: a runner's token runs jobs in its pool.
fn private_token_file(path: &std::path::Path) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    let meta = std::fs::metadata(path)
        .with_context(|| format!("reading --token-file {}", path.display()))?;
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        bail!(
            "--token-file {file} is too open (mode {mode:04o}: its group or others may read or change it); \
             the token must be readable by its owner only (as ssh wants of a key). Run: chmod 600 {file}",
            file = path.display()
        );
    }
    Ok(())
}

/// Calls `f` until the coordinator answers, saying on stderr while it
/// waits: a runner started before its coordinator (at boot, say) waits for
/// it, with backoff, rather than exiting. `transient` picks the errors
/// that mean "not reachable yet" out of `f`'s.
async fn until_reachable<T, E, Fut>(
    url: &str,
    max_backoff: Duration,
    mut f: impl FnMut() -> Fut,
    transient: impl Fn(&E) -> Option<&runner_core::client::ClientError>,
) -> Result<T, E>
where
    Fut: Future<Output = Result<T, E>>,
{
    let mut backoff = Backoff::new(Duration::from_millis(500), max_backoff);
    loop {
        match f().await {
            Err(e) if transient(&e).is_some_and(|c| c.is_recoverable()) => {
                let pause = backoff.next_delay();
                eprintln!(
                    "drover: coordinator at {url} not reachable ({}); retrying in {:.1}s",
                    transient(&e).expect("transient"),
                    pause.as_secs_f64()
                );
                tokio::time::sleep(pause).await;
            }
            r => return r,
        }
    }
}

/// For [`until_reachable`]: a client error is its own cause.
fn itself(e: &runner_core::client::ClientError) -> Option<&runner_core::client::ClientError> {
    Some(e)
}

async fn run_runners(cli: &Cli, args: &RunnerArgs) -> anyhow::Result<ExitCode> {
    isolation::harden_process().context("making the runner's memory unreadable to its jobs")?;
    if let Some(path) = &cli.token_file {
        private_token_file(path)?;
    }
    let token = token(cli)?;
    let client = client(cli, token.clone())?;
    let mut capabilities = runner_core::host::detect_capabilities();
    capabilities.extend(args.labels.iter().cloned());
    let state_dir = args.state_dir.clone().or_else(FileStore::default_dir);
    let settings = RunnerSettings {
        slots: args.max_concurrent.into(),
        kill_grace: Duration::from_secs(args.kill_grace),
        max_backoff: Duration::from_millis(args.max_backoff_ms),
        capabilities,
        work_root: match &args.work_dir {
            Some(dir) => std::path::absolute(dir).context("--work-dir")?,
            None => runner_core::runner::default_work_root(),
        },
        isolation: Isolation {
            sandbox: args.sandbox,
            // Where the runner's credentials are.
            hidden: state_dir.iter().chain(&cli.token_file).cloned().collect(),
            job_user: args.job_user.clone(),
        },
        ..RunnerSettings::default()
    };
    let settings_backoff = settings.max_backoff;
    let (mut fleet, mut events) = Fleet::new(client.clone(), settings)?;
    // With `sandbox=…` as this host gives it.
    let capabilities = fleet.capabilities().to_vec();
    // Where each joined runner's credential is saved, for messages.
    let mut saved_in = std::collections::HashMap::new();
    match &args.join {
        Some(reference) => {
            let dir = state_dir.context("no state directory; pass --state-dir")?;
            let store = FileStore::new(dir);
            let prefix = args
                .name
                .clone()
                .unwrap_or_else(runner_core::host::hostname);
            for i in 0..usize::from(args.runners) {
                let name = format!("{prefix}-{i}");
                let credential = until_reachable(
                    &cli.url,
                    settings_backoff,
                    || join_or_load(&store, &client, &token, reference, &name, i, &capabilities),
                    |e| match e {
                        JoinError::Join { source, .. } => Some(source),
                        _ => None,
                    },
                )
                .await?;
                saved_in.insert(
                    credential.runner_id.clone(),
                    store.describe(&credential_key(reference, i)),
                );
                fleet.add(credential);
            }
        }
        None => {
            if !token.expose().starts_with("rnr_") {
                bail!("without --join, --token must be a runner token (rnr_…) from pairing");
            }
            if args.runners != 1 {
                bail!(
                    "--runners needs --join: a paired runner token is one runner (use --max-concurrent for more slots)"
                );
            }
            let me = until_reachable(
                &cli.url,
                settings_backoff,
                || client.hello(&capabilities),
                itself,
            )
            .await
            .context("checking the runner token")?;
            fleet.add(Credential {
                runner_id: me.runner_id,
                token,
            });
        }
    }
    let total = fleet.len();
    let mut stopped = 0;
    let mut failures = 0;
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let mut draining = false;
    loop {
        tokio::select! {
            Some(event) = events.recv() => {
                eprintln!("{event}");
                if let EventKind::Stopped { error } = &event.kind {
                    if let (Some(_), Some(place)) = (error, saved_in.get(&event.runner)) {
                        eprintln!(
                            "drover: runner {}'s credential is saved in {place}; if the runner was revoked, start again with a fresh join token and it is replaced",
                            event.runner
                        );
                    }
                    stopped += 1;
                    failures += usize::from(error.is_some());
                    if stopped == total {
                        break;
                    }
                }
            }
            _ = async { tokio::select! { _ = tokio::signal::ctrl_c() => {}, _ = term.recv() => {} } } => {
                if draining {
                    eprintln!("drover: stopping now; running jobs are killed and will be re-queued");
                    fleet.kill();
                } else {
                    draining = true;
                    eprintln!("drover: draining (finishing running jobs; signal again to stop now)");
                    // Draining is a state of each runner; we keep receiving events until all stop.
                    for _ in 0..fleet.len() {
                        fleet.scale_down();
                    }
                }
            }
        }
    }
    let _ = fleet.wait().await;
    Ok(if failures > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match &cli.command {
        Command::Runner(args) => return run_runners(&cli, args).await,
        Command::Submit(args) => {
            let client = submit_client(&cli, args).await?;
            let job = submit(
                &client,
                &SubmitJob {
                    runtime: args.runtime.clone(),
                    command: args.command.clone(),
                    env: job_env(args)?.into(),
                    requires: args.requires.clone(),
                    timeout_seconds: args.timeout,
                    priority: args.priority,
                    max_attempts: args.max_attempts,
                    image: args.image.clone(),
                    ..SubmitJob::default()
                },
            )
            .await?;
            println!("{}", job.id);
            if args.wait {
                let mut out = std::io::stdout();
                client
                    .follow_logs(&job.id, |b| {
                        let _ = out.write_all(b);
                        let _ = out.flush();
                    })
                    .await?;
                // A CI token lives minutes: ask with a fresh one. Any other
                // asks on the connection it has.
                let fresh = match args.github_oidc {
                    true => Some(submit_client(&cli, args).await?),
                    false => None,
                };
                let done = fresh.as_ref().unwrap_or(&client).job(&job.id).await?;
                if !done.state.is_terminal() {
                    bail!(
                        "the log ended but job {} is {}",
                        done.id,
                        done.state.as_str()
                    );
                }
                return Ok(ExitCode::from(job_exit_code(&done)));
            }
        }
        Command::Jobs(cmd) => {
            let client = member_client(&cli)?;
            match cmd {
                JobsCommand::Show { id, json } => {
                    let job = client.job(id).await?;
                    if *json {
                        return print_json(&job).map(|()| ExitCode::SUCCESS);
                    }
                    show_job(&job);
                }
                JobsCommand::Logs { id, follow: false } => print!("{}", client.logs(id).await?),
                JobsCommand::Logs { id, follow: true } => {
                    let mut out = std::io::stdout();
                    client
                        .follow_logs(id, |b| {
                            let _ = out.write_all(b);
                            let _ = out.flush();
                        })
                        .await?
                }
                JobsCommand::Cancel { id } => {
                    let job = client.cancel(id).await?;
                    println!(
                        "{} {}{}",
                        job.id,
                        job.state.as_str(),
                        if job.cancel_requested && !job.state.is_terminal() {
                            " (cancel sent)"
                        } else {
                            ""
                        }
                    );
                }
                JobsCommand::List { state, limit, json } => {
                    let state = state
                        .as_deref()
                        .map(|s| JobState::parse(s).with_context(|| format!("unknown state {s:?}")))
                        .transpose()?;
                    let list = client.jobs(state, *limit).await?;
                    if *json {
                        return print_json(&list).map(|()| ExitCode::SUCCESS);
                    }
                    let now = human::now_ms();
                    table::print(
                        &["ID", "STATE", "RUNTIME", "ATTEMPT", "RAN BY", "SUBMITTED"],
                        list.jobs.iter().map(|j| {
                            vec![
                                j.id.clone(),
                                j.state.as_str().to_owned(),
                                j.runtime.clone(),
                                format!("{}/{}", j.attempt, j.max_attempts),
                                j.provenance
                                    .as_ref()
                                    .map_or("-".into(), |p| p.ran_by.clone()),
                                human::ago(j.created_at, now),
                            ]
                        }),
                    );
                }
            }
        }
        Command::Runners(RunnersCommand::Revoke { id, workspace }) => {
            let client = member_client(&cli)?;
            if *workspace {
                let report = client.revoke_workspace_runner(id).await?;
                println!("revoked {id}");
                if let Some(r) = report {
                    eprintln!("{}", r.github.message);
                }
            } else {
                client.revoke_runner(Scope::Me, id).await?;
                println!("revoked {id}");
            }
        }
        Command::Runners(RunnersCommand::List { json }) => {
            let client = member_client(&cli)?;
            let list = client.runners(RunnerListing::Roster).await?;
            if *json {
                return print_json(&list).map(|()| ExitCode::SUCCESS);
            }
            table::print(
                &[
                    "ID",
                    "NAME",
                    "STATUS",
                    "OWNER",
                    "POOL",
                    "CAPABILITIES",
                    "SANDBOX",
                    "RUNNING",
                ],
                list.runners.iter().map(|r| {
                    vec![
                        r.id.clone(),
                        r.name.clone(),
                        if r.online { "online" } else { "offline" }.to_owned(),
                        r.owner.clone(),
                        r.runtime_name.clone(),
                        r.capabilities.join(","),
                        match isolation::announced_sandbox(&r.capabilities) {
                            Some(true) => "sandboxed",
                            Some(false) => "unsandboxed",
                            None => "-",
                        }
                        .to_owned(),
                        if r.current_jobs.is_empty() {
                            "-".to_owned()
                        } else {
                            r.current_jobs.join(",")
                        },
                    ]
                }),
            );
        }
        Command::Runtimes(cmd) => {
            let client = member_client(&cli)?;
            match cmd {
                RuntimesCommand::List { workspace, json } => {
                    let list = client.runtimes(scope(*workspace)).await?;
                    if *json {
                        return print_json(&list).map(|()| ExitCode::SUCCESS);
                    }
                    table::print(
                        &["ID", "NAME", "REF", "RUNNERS"],
                        list.runtimes.iter().map(|rt| {
                            vec![
                                rt.id.clone(),
                                rt.name.clone(),
                                rt.reference.clone(),
                                rt.runners.to_string(),
                            ]
                        }),
                    );
                }
                RuntimesCommand::Create { name, workspace } => {
                    print_json(&client.create_runtime(scope(*workspace), name).await?)?
                }
                RuntimesCommand::JoinToken {
                    runtime,
                    workspace,
                    link: true,
                    ttl,
                } => {
                    let t = client
                        .join_token_for(scope(*workspace), runtime, *ttl)
                        .await?;
                    let link = t
                        .link
                        .context("this coordinator does not make join links; upgrade it")?;
                    println!("{link}");
                    eprintln!("{}", expiry(t.expires_at));
                }
                RuntimesCommand::JoinToken {
                    runtime,
                    workspace,
                    link: false,
                    ttl,
                } => {
                    let t = client
                        .join_token_for(scope(*workspace), runtime, *ttl)
                        .await?;
                    println!("{}", t.token);
                    eprintln!(
                        "join with: DROVER_TOKEN=<that token> drover runner --url {} --join {}",
                        cli.url, t.runtime.reference
                    );
                    eprintln!(
                        "{}{}",
                        expiry(t.expires_at),
                        t.id.map(|id| format!(
                            "; revoke: drover runtimes revoke-join-token {id}{}",
                            if *workspace { " --workspace" } else { "" }
                        ))
                        .unwrap_or_default()
                    );
                }
                RuntimesCommand::JoinTokens { workspace, json } => {
                    let list = client.join_tokens(scope(*workspace)).await?;
                    if *json {
                        return print_json(&list).map(|()| ExitCode::SUCCESS);
                    }
                    let now = human::now_ms();
                    table::print(
                        &[
                            "ID",
                            "POOL",
                            "MINTED BY",
                            "CREATED",
                            "EXPIRES",
                            "LAST USED",
                            "USES",
                        ],
                        list.join_tokens.iter().map(|t| {
                            vec![
                                t.id.clone(),
                                t.pool.clone(),
                                t.minted_by_email
                                    .clone()
                                    .or_else(|| t.minted_by.clone())
                                    .unwrap_or_else(|| "unknown".into()),
                                human::utc(t.created_at),
                                human::utc(t.expires_at),
                                t.last_used_at
                                    .map_or("never".into(), |at| human::ago(at, now)),
                                t.uses.to_string(),
                            ]
                        }),
                    );
                }
                RuntimesCommand::RevokeJoinToken { id, workspace } => {
                    client.revoke_join_token(scope(*workspace), id).await?;
                    println!("revoked {id}");
                }
            }
        }
        Command::Usage(args) => billing::usage(&member_client(&cli)?, args).await?,
        Command::Budget(cmd) => billing::budget(&member_client(&cli)?, cmd).await?,
        Command::Members(cmd) => people::members(&member_client(&cli)?, cmd).await?,
        Command::Audit(args) => people::audit(&member_client(&cli)?, args).await?,
        Command::Github(cmd) => github::github(&member_client(&cli)?, cmd).await?,
        Command::Ci(cmd) => github::ci(&member_client(&cli)?, cmd).await?,
        Command::Redeem(args) => people::redeem(&cli.url, &client_options(&cli), args).await?,
        Command::PairLink => {
            let client = member_client(&cli)?;
            let code = client.pairing_code().await?;
            println!("{}", code.link);
            eprintln!("one use; {}", expiry(code.expires_at));
        }
        Command::Whoami { json } => {
            let client = member_client(&cli)?;
            let me = client.me().await?;
            if *json {
                print_json(&me)?;
            } else {
                println!("{} ({}) in workspace {}", me.email, me.role, me.workspace);
                println!("subject {}", me.subject);
                if let Some(t) = &me.token {
                    println!("token   {} ({})", t.id, t.name);
                }
            }
        }
        Command::Tokens(cmd) => {
            let client = member_client(&cli)?;
            match cmd {
                TokensCommand::List { json: true } => print_json(&client.tokens().await?)?,
                TokensCommand::List { json: false } => {
                    let now = human::now_ms();
                    table::print(
                        &["", "ID", "NAME", "CREATED", "LAST USED"],
                        client.tokens().await?.tokens.iter().map(|t| {
                            vec![
                                if t.current { "*" } else { "" }.to_owned(),
                                t.id.clone(),
                                t.name.clone(),
                                human::utc(t.created_at),
                                t.last_used_at
                                    .map_or("never".into(), |at| human::ago(at, now)),
                            ]
                        }),
                    );
                }
                TokensCommand::Revoke { id } => {
                    client.revoke_token(id).await?;
                    println!("revoked {id}");
                }
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// "expires in N min (at …)", for a time in Unix milliseconds.
fn expiry(expires_at: i64) -> String {
    let minutes = ((expires_at - human::now_ms()).max(0) as u64).div_ceil(60_000);
    format!("expires in {minutes} min (at {})", human::utc(expires_at))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runners = matches!(cli.command, Command::Runner(_));
    if runners && let Err(e) = reexec_without_token_flag() {
        eprintln!("drover: {e:#}");
        return ExitCode::from(2);
    }
    // Runners use every core; any other command is a few requests in a
    // row, on this thread (no worker threads to start or hand off to).
    let runtime = match runners {
        true => tokio::runtime::Builder::new_multi_thread(),
        false => tokio::runtime::Builder::new_current_thread(),
    }
    .enable_all()
    .build();
    let runtime = match runtime {
        Ok(r) => r,
        Err(e) => {
            eprintln!("drover: starting the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("drover: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// `drover jobs show`: one job, field by field.
fn show_job(j: &drover_wire::Job) {
    let or_dash = |v: Option<String>| v.unwrap_or_else(|| "-".into());
    let what = match &j.script {
        Some(script) => format!("sh -c {script:?}"),
        None => j.command.join(" "),
    };
    let rows = [
        ("id", j.id.clone()),
        ("state", j.state.as_str().to_owned()),
        ("runtime", format!("{} ({})", j.runtime, j.runtime_id)),
        ("runs", what),
        ("requires", j.requires.join(", ")),
        ("attempt", format!("{} of {}", j.attempt, j.max_attempts)),
        ("exit code", or_dash(j.exit_code.map(|c| c.to_string()))),
        ("error", or_dash(j.error.clone())),
        (
            "ran by",
            or_dash(
                j.provenance
                    .as_ref()
                    .map(|p| format!("{} ({})", p.ran_by, p.by)),
            ),
        ),
        ("submitted by", j.submitted_by.clone()),
        ("submitted", human::utc(j.created_at)),
        (
            "started",
            or_dash(j.started_at.map(|s| {
                format!(
                    "{} ({} in the queue)",
                    human::utc(s),
                    human::span(s - j.created_at)
                )
            })),
        ),
        (
            "finished",
            or_dash(j.finished_at.map(|f| match j.started_at {
                Some(s) => format!("{} (ran {})", human::utc(f), human::span(f - s)),
                None => format!("{} (never started)", human::utc(f)),
            })),
        ),
    ];
    table::print(
        &["FIELD", "VALUE"],
        rows.into_iter().map(|(k, v)| vec![k.to_owned(), v]),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttl_takes_seconds_or_a_lifetime() {
        assert_eq!(ttl_seconds("90"), Ok(90));
        assert_eq!(ttl_seconds("45s"), Ok(45));
        assert_eq!(ttl_seconds("30m"), Ok(1800));
        assert_eq!(ttl_seconds("12h"), Ok(43_200));
        assert_eq!(ttl_seconds("30d"), Ok(2_592_000));
        for bad in ["", "d", "-1d", "1.5h", "7w", "99999999999999999999d"] {
            assert!(ttl_seconds(bad).is_err(), "{bad}");
        }
    }

    fn os(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[test]
    fn the_token_flag_is_taken_out_of_the_command_line() {
        let (kept, token) =
            token_flag_removed(os(&["drover", "runner", "--token", "rnr_x", "--join", "r"]))
                .unwrap();
        assert_eq!(
            (kept, token),
            (os(&["drover", "runner", "--join", "r"]), "rnr_x".into())
        );
        let (kept, token) = token_flag_removed(os(&[
            "drover",
            "--token=djt_y",
            "runner",
            "--token-file",
            "f",
        ]))
        .unwrap();
        assert_eq!(
            (kept, token),
            (
                os(&["drover", "runner", "--token-file", "f"]),
                "djt_y".into()
            )
        );
        assert!(token_flag_removed(os(&["drover", "runner", "--token-file", "f"])).is_none());
    }
}
