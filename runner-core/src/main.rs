//! `drover`: the member CLI and the headless runner.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context as _, bail};
use clap::{Args, Parser, Subcommand};
use runner_core::client::{Client, RunnerListing, Scope, Token};
use runner_core::credentials::{FileStore, join_or_load};
use runner_core::fleet::Fleet;
use runner_core::runner::{Credential, EventKind, RunnerSettings};
use runner_core::wire::{JobState, SubmitJob};

#[derive(Parser)]
#[command(
    name = "drover",
    version,
    about = "Drover: run jobs on machines you own"
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
    #[arg(long, global = true, env = "DROVER_TOKEN", hide_env_values = true)]
    token: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run runners: one paired runner (--token rnr_…), or N joined to a pool (--join REF --token JOIN_TOKEN).
    Runner(RunnerArgs),
    /// Submit a job: drover submit --runtime REF [--wait] -- CMD ARGS…
    Submit(SubmitArgs),
    /// Inspect and control jobs.
    #[command(subcommand)]
    Jobs(JobsCommand),
    /// The workspace's runner roster.
    #[command(subcommand)]
    Runners(RunnersCommand),
    /// Pools and their join tokens.
    #[command(subcommand)]
    Runtimes(RuntimesCommand),
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
}

#[derive(Args)]
struct SubmitArgs {
    #[arg(long)]
    runtime: String,
    /// Required capabilities, e.g. docker,os=linux.
    #[arg(long, value_delimiter = ',')]
    requires: Vec<String>,
    /// KEY=VALUE, repeatable.
    #[arg(long = "env", value_parser = parse_env)]
    env: Vec<(String, String)>,
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
    #[arg(last = true, required = true)]
    command: Vec<String>,
}

fn parse_env(s: &str) -> Result<(String, String), String> {
    s.split_once('=')
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .ok_or_else(|| format!("{s:?} is not KEY=VALUE"))
}

#[derive(Subcommand)]
enum JobsCommand {
    /// Print a job as JSON.
    Show {
        id: String,
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
    List {
        #[arg(long)]
        state: Option<String>,
        #[arg(long, default_value_t = 20)]
        limit: u32,
    },
}

#[derive(Subcommand)]
enum RunnersCommand {
    /// Workspace-owned runners and members' personal runners, with status.
    List,
}

#[derive(Subcommand)]
enum RuntimesCommand {
    List {
        #[arg(long)]
        workspace: bool,
    },
    Create {
        name: String,
        #[arg(long)]
        workspace: bool,
    },
    /// Mint a join token for a pool (name or id).
    JoinToken {
        runtime: String,
        #[arg(long)]
        workspace: bool,
    },
}

fn token(cli: &Cli) -> anyhow::Result<Token> {
    match &cli.token {
        Some(t) if !t.is_empty() => Ok(Token::new(t.clone())),
        _ => bail!("no token: pass --token or set DROVER_TOKEN"),
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

async fn run_runners(cli: &Cli, args: &RunnerArgs) -> anyhow::Result<ExitCode> {
    let token = token(cli)?;
    let client = Client::new(&cli.url, token.clone())?;
    let mut capabilities = runner_core::host::detect_capabilities();
    capabilities.extend(args.labels.iter().cloned());
    let settings = RunnerSettings {
        slots: args.max_concurrent.into(),
        kill_grace: Duration::from_secs(args.kill_grace),
        max_backoff: Duration::from_millis(args.max_backoff_ms),
        capabilities: capabilities.clone(),
        ..RunnerSettings::default()
    };
    let (mut fleet, mut events) = Fleet::new(client.clone(), settings);
    match &args.join {
        Some(reference) => {
            let dir = args
                .state_dir
                .clone()
                .or_else(FileStore::default_dir)
                .context("no state directory; pass --state-dir")?;
            let store = FileStore::new(dir);
            let prefix = args
                .name
                .clone()
                .unwrap_or_else(runner_core::host::hostname);
            for i in 0..usize::from(args.runners) {
                let name = format!("{prefix}-{i}");
                let credential =
                    join_or_load(&store, &client, &token, reference, &name, i, &capabilities)
                        .await?;
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
            let me = client
                .hello(&capabilities)
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
            let client = Client::new(&cli.url, token(&cli)?)?;
            let job = client
                .submit(&SubmitJob {
                    runtime: args.runtime.clone(),
                    command: args.command.clone(),
                    env: args.env.iter().cloned().collect(),
                    requires: args.requires.clone(),
                    timeout_seconds: args.timeout,
                    priority: args.priority,
                    max_attempts: args.max_attempts,
                    image: args.image.clone(),
                    ..SubmitJob::default()
                })
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
                let done = client.job(&job.id).await?;
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
            let client = Client::new(&cli.url, token(&cli)?)?;
            match cmd {
                JobsCommand::Show { id } => print_json(&client.job(id).await?)?,
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
                JobsCommand::List { state, limit } => {
                    let state = state
                        .as_deref()
                        .map(|s| JobState::parse(s).with_context(|| format!("unknown state {s:?}")))
                        .transpose()?;
                    for j in client.jobs(state, *limit).await?.jobs {
                        let ran_by = j.provenance.as_ref().map_or("-", |p| p.ran_by.as_str());
                        println!(
                            "{}  {:<10} {:<24} attempt {}  ran by {}",
                            j.id,
                            j.state.as_str(),
                            j.runtime,
                            j.attempt,
                            ran_by
                        );
                    }
                }
            }
        }
        Command::Runners(RunnersCommand::List) => {
            let client = Client::new(&cli.url, token(&cli)?)?;
            for r in client.runners(RunnerListing::Roster).await?.runners {
                println!(
                    "{}  {:<20} {:<8} {:<26} pool {:<12} [{}] {}",
                    r.id,
                    r.name,
                    if r.online { "online" } else { "offline" },
                    r.owner,
                    r.runtime_name,
                    r.capabilities.join(","),
                    if r.current_jobs.is_empty() {
                        String::new()
                    } else {
                        format!("running {}", r.current_jobs.join(","))
                    }
                );
            }
        }
        Command::Runtimes(cmd) => {
            let client = Client::new(&cli.url, token(&cli)?)?;
            match cmd {
                RuntimesCommand::List { workspace } => {
                    for rt in client.runtimes(scope(*workspace)).await?.runtimes {
                        println!(
                            "{}  {:<16} {:<32} runners {}",
                            rt.id, rt.name, rt.reference, rt.runners
                        );
                    }
                }
                RuntimesCommand::Create { name, workspace } => {
                    print_json(&client.create_runtime(scope(*workspace), name).await?)?
                }
                RuntimesCommand::JoinToken { runtime, workspace } => {
                    let t = client.join_token(scope(*workspace), runtime).await?;
                    println!("{}", t.token);
                    eprintln!(
                        "join with: drover runner --url {} --join {} --token <that token>",
                        cli.url, t.runtime.reference
                    );
                }
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("drover: {e:#}");
            ExitCode::from(2)
        }
    }
}
