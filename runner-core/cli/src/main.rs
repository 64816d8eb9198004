//! `drover`: the member CLI and the headless runner, thin over runner-core.
//! This file holds the command line and connecting to the coordinator; one
//! module per group of commands does the rest.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, bail};
use clap::{Parser, Subcommand};
use runner_core::client::{Client, ClientOptions, Scope, Token, cleartext_warning};

mod billing;
mod github;
mod human;
mod jobs;
mod people;
mod pools;
mod runner;
mod table;
mod tokens;

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
    Runner(runner::RunnerArgs),
    /// Submit a job: drover submit --runtime REF [--wait] -- CMD ARGS…
    Submit(jobs::SubmitArgs),
    /// Inspect and control jobs.
    #[command(subcommand)]
    Jobs(jobs::JobsCommand),
    /// The workspace's runner roster; revoking runners.
    #[command(subcommand)]
    Runners(pools::RunnersCommand),
    /// Pools and their join tokens.
    #[command(subcommand)]
    Runtimes(pools::RuntimesCommand),
    /// Print a one-time link (ten minutes) that pairs a device to you.
    PairLink,
    /// Your API tokens: list and revoke.
    #[command(subcommand)]
    Tokens(tokens::TokensCommand),
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

async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match &cli.command {
        Command::Runner(args) => return runner::run_runners(&cli, args).await,
        Command::Submit(args) => return jobs::submit_command(&cli, args).await,
        Command::Jobs(cmd) => jobs::jobs(&member_client(&cli)?, cmd).await?,
        Command::Runners(cmd) => pools::runners(&member_client(&cli)?, cmd).await?,
        Command::Runtimes(cmd) => pools::runtimes(&member_client(&cli)?, &cli.url, cmd).await?,
        Command::Usage(args) => billing::usage(&member_client(&cli)?, args).await?,
        Command::Budget(cmd) => billing::budget(&member_client(&cli)?, cmd).await?,
        Command::Members(cmd) => people::members(&member_client(&cli)?, cmd).await?,
        Command::Audit(args) => people::audit(&member_client(&cli)?, args).await?,
        Command::Github(cmd) => github::github(&member_client(&cli)?, cmd).await?,
        Command::Ci(cmd) => github::ci(&member_client(&cli)?, cmd).await?,
        Command::Redeem(args) => people::redeem(&cli.url, &client_options(&cli), args).await?,
        Command::PairLink => tokens::pair_link(&member_client(&cli)?).await?,
        Command::Whoami { json } => tokens::whoami(&member_client(&cli)?, *json).await?,
        Command::Tokens(cmd) => tokens::tokens(&member_client(&cli)?, cmd).await?,
    }
    Ok(ExitCode::SUCCESS)
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

/// "expires in N min (at …)", for a time in Unix milliseconds.
fn expiry(expires_at: i64) -> String {
    let minutes = ((expires_at - human::now_ms()).max(0) as u64).div_ceil(60_000);
    format!("expires in {minutes} min (at {})", human::utc(expires_at))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runners = matches!(cli.command, Command::Runner(_));
    if runners && let Err(e) = runner::reexec_without_token_flag() {
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
