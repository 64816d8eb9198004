//! `drover submit` and `drover jobs`: a submit retried under one
//! idempotency key, `--wait` following its log to the job's exit code, and
//! listing, showing, following and cancelling jobs.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context as _, bail};
use clap::{Args, Subcommand};
use runner_core::backoff::Backoff;
use runner_core::client::{Client, Token, idempotency_key};
use runner_core::wire::{Job, JobState, LogEnd, SubmitJob};

use crate::{Cli, client, human, member_client, print_json, table};

#[derive(Args)]
pub struct SubmitArgs {
    #[arg(long)]
    pub runtime: String,
    /// Required capabilities, e.g. docker,os=linux.
    #[arg(long, value_delimiter = ',')]
    pub requires: Vec<String>,
    /// KEY=VALUE, or KEY alone to pass on KEY from this environment (so a
    /// secret stays out of the command line); repeatable.
    #[arg(long = "env", value_name = "KEY[=VALUE]", value_parser = parse_env)]
    pub env: Vec<(String, String)>,
    /// KEY=VALUE lines (blank lines and `#` comments ignored); --env wins.
    #[arg(long, value_name = "PATH")]
    pub env_file: Vec<PathBuf>,
    #[arg(long)]
    pub timeout: Option<u64>,
    #[arg(long, default_value_t = 0)]
    pub priority: i32,
    #[arg(long)]
    pub max_attempts: Option<u32>,
    /// Run in this container image (needs a runner with docker).
    #[arg(long)]
    pub image: Option<String>,
    /// Follow the logs and exit with the job's exit code.
    #[arg(long)]
    pub wait: bool,
    /// Sign in with this GitHub Actions job's OIDC token instead of an API
    /// token (the workflow needs `permissions: id-token: write`, and the
    /// repository must be linked for CI: `drover ci link`).
    #[arg(long)]
    pub github_oidc: bool,
    /// The audience to ask GitHub's OIDC token for (default: --url).
    #[arg(long, env = "DROVER_OIDC_AUDIENCE", requires = "github_oidc")]
    pub oidc_audience: Option<String>,
    #[arg(last = true, required = true)]
    pub command: Vec<String>,
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
fn job_env(args: &SubmitArgs) -> anyhow::Result<BTreeMap<String, String>> {
    let mut env = BTreeMap::new();
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
pub enum JobsCommand {
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

/// `drover submit`: prints the job's id; with `--wait`, follows its log
/// and exits as the job did.
pub async fn submit_command(cli: &Cli, args: &SubmitArgs) -> anyhow::Result<ExitCode> {
    let client = submit_client(cli, args).await?;
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
        let end = client
            .follow_logs(&job.id, |b| {
                let _ = out.write_all(b);
                let _ = out.flush();
            })
            .await?;
        // The log's trailers say how the job ended; without them (a proxy
        // that drops them), ask.
        let end = match end {
            Some(end) => end,
            None => {
                // A CI token lives minutes: ask with a fresh one. Any other
                // asks on the connection it has.
                let fresh = match args.github_oidc {
                    true => Some(submit_client(cli, args).await?),
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
                LogEnd {
                    state: done.state,
                    exit_code: done.exit_code,
                }
            }
        };
        return Ok(ExitCode::from(job_exit_code(end)));
    }
    Ok(ExitCode::SUCCESS)
}

/// `drover jobs …`.
pub async fn jobs(client: &Client, cmd: &JobsCommand) -> anyhow::Result<()> {
    match cmd {
        JobsCommand::Show { id, json } => {
            let job = client.job(id).await?;
            if *json {
                return print_json(&job);
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
                .await?;
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
                return print_json(&list);
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
    Ok(())
}

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

/// Submits once, retrying transport errors and 5xx answers with the same
/// idempotency key, so a submit whose answer was lost is not made twice.
async fn submit(client: &Client, job: &SubmitJob) -> anyhow::Result<Job> {
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

/// The exit code `drover submit --wait` ends with for a finished job.
fn job_exit_code(end: LogEnd) -> u8 {
    match (end.state, end.exit_code) {
        (JobState::Succeeded, _) => 0,
        (_, Some(code)) if (1..=255).contains(&code) => code as u8,
        (JobState::TimedOut, _) => 124,
        (JobState::Cancelled, _) => 130,
        _ => 1,
    }
}

/// `drover jobs show`: one job, field by field.
fn show_job(j: &Job) {
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
