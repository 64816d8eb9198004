//! `drover github …`: the workspace's GitHub App (admins). Link an
//! installation, see what it reaches, and stand up a build server with a
//! GitHub Actions runner beside a Drover runner; or serve a repository's
//! workflow jobs on demand from a workspace pool.

use std::io::Write as _;
use std::path::PathBuf;

use anyhow::Context as _;
use clap::{ArgGroup, Subcommand};
use drover_wire::{self as wire, op};
use runner_core::client::Client;

use crate::{human, table};

#[derive(Subcommand)]
pub enum GithubCommand {
    /// Print a one-time link (ten minutes) that installs the workspace's
    /// GitHub App on an account and links the installation here.
    Link {
        /// github.com (default), or a GitHub Enterprise Server host the
        /// coordinator knows.
        #[arg(long)]
        host: Option<String>,
        /// Print the coordinator's JSON.
        #[arg(long)]
        json: bool,
    },
    /// The App's installations linked to this workspace.
    Installations {
        /// Print the coordinator's JSON (times in Unix milliseconds).
        #[arg(long)]
        json: bool,
    },
    /// Repositories the App may reach, a page at a time.
    Repos {
        #[arg(long, default_value_t = 1)]
        page: u32,
        /// Repositories a page (1-100).
        #[arg(long, default_value_t = 30)]
        per_page: u32,
        /// Print the coordinator's JSON.
        #[arg(long)]
        json: bool,
    },
    /// Pair a workspace runner for a build server and register a GitHub
    /// Actions runner beside it: prints the install script (run it as root
    /// on the server); what it set up goes to stderr. The script holds two
    /// secrets, shown this once.
    #[command(group(ArgGroup::new("target").required(true).args(["repo", "org"])))]
    Install {
        /// A repository, owner/name: a repository-level runner.
        #[arg(long)]
        repo: Option<String>,
        /// An organization: an organization-level runner.
        #[arg(long)]
        org: Option<String>,
        /// Use only this host's installation (github.com or a GHE host).
        #[arg(long)]
        host: Option<String>,
        /// The organization's runner group (with --org).
        #[arg(long, requires = "org")]
        runner_group: Option<String>,
        /// More GitHub runner labels (repeat, or comma-separated).
        #[arg(long = "label", value_delimiter = ',')]
        labels: Vec<String>,
        /// The GitHub runner takes one job, then unregisters.
        #[arg(long)]
        ephemeral: bool,
        /// The workspace pool, name or id (default: the default pool).
        #[arg(long)]
        pool: Option<String>,
        /// Write the script to this file (mode 0700) instead of stdout.
        #[arg(long, short = 'o', value_name = "FILE")]
        output: Option<PathBuf>,
        /// Print the coordinator's JSON (the script is in it).
        #[arg(long)]
        json: bool,
    },
    /// GitHub Actions on demand: a workspace pool's runners start a
    /// just-in-time, ephemeral Actions runner for each queued workflow job.
    #[command(subcommand)]
    OnDemand(OnDemandCommand),
}

#[derive(Subcommand)]
pub enum OnDemandCommand {
    /// Serve a repository's (owner/name) or an organization's workflow jobs
    /// from a workspace pool (again: change its labels, group or cap).
    Set {
        /// owner/name, or an organization.
        target: String,
        /// The workspace pool, name or id.
        #[arg(long)]
        pool: String,
        /// Labels besides self-hosted and drover-<pool> (repeat, or comma-separated).
        #[arg(long = "label", value_delimiter = ',')]
        labels: Vec<String>,
        /// The organization's runner group id (default 1, GitHub's default).
        #[arg(long)]
        runner_group_id: Option<i64>,
        /// Most Actions runners at once (default 10).
        #[arg(long)]
        max_runners: Option<u32>,
        /// github.com (default), or a GitHub Enterprise Server host.
        #[arg(long)]
        host: Option<String>,
        /// Print the coordinator's JSON.
        #[arg(long)]
        json: bool,
    },
    /// The pools serving workflow jobs on demand.
    List {
        /// Print the coordinator's JSON.
        #[arg(long)]
        json: bool,
    },
    /// Stop serving: workflow jobs not yet served are forgotten.
    Remove {
        /// The on-demand pool's id (god_…).
        id: String,
    },
}

async fn on_demand(client: &Client, cmd: &OnDemandCommand) -> anyhow::Result<()> {
    match cmd {
        OnDemandCommand::Set {
            target,
            pool,
            labels,
            runner_group_id,
            max_runners,
            host,
            json,
        } => {
            let req = wire::GithubOnDemandRequest {
                pool: pool.clone(),
                target: target.clone(),
                host: host.clone(),
                labels: labels.clone(),
                runner_group_id: *runner_group_id,
                max_runners: *max_runners,
            };
            let made = client.call::<op::SetGithubOnDemand>(&[], &(), &req).await?;
            if *json {
                return crate::print_json(&made);
            }
            println!("{}", made.id);
            eprintln!(
                "pool {} serves {}'s workflow jobs on demand, at most {} at once; start its runners with `drover runner --github-actions`. In a workflow:\n  {}",
                made.pool, made.target, made.max_runners, made.workflow_hint
            );
        }
        OnDemandCommand::List { json } => {
            let list = client.call::<op::ListGithubOnDemand>(&[], &(), &()).await?;
            if *json {
                return crate::print_json(&list);
            }
            table::print(
                &["ID", "TARGET", "HOST", "POOL", "MAX", "RUNS-ON"],
                list.pools.iter().map(|p| {
                    vec![
                        p.id.clone(),
                        p.target.clone(),
                        p.host.clone(),
                        p.pool.clone(),
                        p.max_runners.to_string(),
                        p.labels.join(","),
                    ]
                }),
            );
        }
        OnDemandCommand::Remove { id } => {
            client
                .call::<op::RemoveGithubOnDemand>(&[id], &(), &())
                .await?;
            eprintln!("{id} no longer serves workflow jobs");
        }
    }
    Ok(())
}

#[derive(Subcommand)]
pub enum CiCommand {
    /// Link a repository for CI (again: update it): its GitHub Actions OIDC
    /// tokens may then submit jobs to the workspace's pools, no secret stored.
    /// The App must be installed on its owner (it pins the repository's id).
    Link {
        /// owner/name.
        repository: String,
        /// github.com (default) or a GHE host.
        #[arg(long)]
        host: Option<String>,
        /// GitHub runner labels the workflow runs on (default self-hosted).
        #[arg(long, value_delimiter = ',')]
        runs_on: Vec<String>,
        /// The workspace runtime ref its jobs go to (default self:ws).
        #[arg(long)]
        runtime: Option<String>,
        /// Only runs of these refs may act, e.g. refs/heads/main,
        /// refs/tags/v* (repeat, or comma-separated; default any ref).
        #[arg(long = "ref", value_delimiter = ',')]
        refs: Vec<String>,
        /// Only runs started by these events may act, e.g. push,
        /// workflow_dispatch, pull_request (repeat, or comma-separated;
        /// default any but pull_request and pull_request_target).
        #[arg(long = "event", value_delimiter = ',')]
        events: Vec<String>,
        /// Print the coordinator's JSON.
        #[arg(long)]
        json: bool,
    },
    /// The repositories linked for CI.
    Links {
        /// Print the coordinator's JSON (times in Unix milliseconds).
        #[arg(long)]
        json: bool,
    },
    /// Unlink a repository: its OIDC tokens stop working at once.
    Unlink {
        repository: String,
        #[arg(long)]
        host: Option<String>,
    },
    /// Print a linked repository's workflow file (save it as
    /// .github/workflows/drover.yml).
    Workflow {
        repository: String,
        #[arg(long)]
        host: Option<String>,
    },
}

pub async fn ci(client: &Client, cmd: &CiCommand) -> anyhow::Result<()> {
    match cmd {
        CiCommand::Link {
            repository,
            host,
            runs_on,
            runtime,
            refs,
            events,
            json,
        } => {
            let some = |v: &Vec<String>| (!v.is_empty()).then(|| v.clone());
            let link = client
                .set_ci_link(&wire::CiLinkRequest {
                    repository: repository.clone(),
                    host: host.clone(),
                    runs_on: some(runs_on),
                    runtime: runtime.clone(),
                    refs: some(refs),
                    events: some(events),
                })
                .await?;
            if *json {
                return crate::print_json(&link);
            }
            println!(
                "linked {} on {}: its jobs are {}",
                link.repository, link.host, link.principal
            );
            eprintln!(
                "its workflow: drover ci workflow {} > .github/workflows/drover.yml",
                link.repository
            );
        }
        CiCommand::Links { json: true } => crate::print_json(&client.ci_links().await?)?,
        CiCommand::Links { json: false } => {
            let links = client.ci_links().await?.links;
            table::print(
                &[
                    "REPOSITORY",
                    "HOST",
                    "RUNS ON",
                    "RUNTIME",
                    "REFS",
                    "EVENTS",
                    "UPDATED",
                ],
                links.iter().map(|l| {
                    vec![
                        l.repository.clone(),
                        l.host.clone(),
                        l.runs_on
                            .as_ref()
                            .map_or("self-hosted".into(), |r| r.join(",")),
                        l.runtime.clone().unwrap_or_else(|| "self:ws".into()),
                        l.refs.as_ref().map_or("any".into(), |r| r.join(",")),
                        l.events
                            .as_ref()
                            .map_or("any but pull requests".into(), |e| e.join(",")),
                        human::utc(l.updated_at),
                    ]
                }),
            );
        }
        CiCommand::Unlink { repository, host } => {
            client.remove_ci_link(repository, host.as_deref()).await?;
            println!("unlinked {repository}");
        }
        CiCommand::Workflow { repository, host } => {
            print!("{}", client.ci_workflow(repository, host.as_deref()).await?);
        }
    }
    Ok(())
}

pub async fn github(client: &Client, cmd: &GithubCommand) -> anyhow::Result<()> {
    match cmd {
        GithubCommand::OnDemand(cmd) => on_demand(client, cmd).await?,
        GithubCommand::Link { host, json } => {
            let link = client.github_install_link(host.as_deref()).await?;
            if *json {
                return crate::print_json(&link);
            }
            println!("{}", link.url);
            eprintln!(
                "open it as a GitHub user who may install the App on the account; it links the installation to this workspace once, until {}",
                human::utc(link.expires_at)
            );
        }
        GithubCommand::Installations { json: true } => {
            crate::print_json(&client.github_installations().await?)?
        }
        GithubCommand::Installations { json: false } => {
            let list = client.github_installations().await?;
            table::print(
                &["HOST", "INSTALLATION", "ACCOUNT", "TYPE", "LINKED"],
                list.installations.iter().map(|i| {
                    vec![
                        i.host.clone(),
                        i.installation_id.to_string(),
                        i.account.clone(),
                        i.account_type.clone(),
                        human::utc(i.linked_at),
                    ]
                }),
            );
        }
        GithubCommand::Repos {
            page,
            per_page,
            json,
        } => {
            let list = client.github_repos(*page, *per_page).await?;
            if *json {
                return crate::print_json(&list);
            }
            table::print(
                &["HOST", "REPOSITORY", "VISIBILITY", "INSTALLATION"],
                list.repos.iter().map(|r| {
                    vec![
                        r.host.clone(),
                        r.full_name.clone(),
                        if r.private { "private" } else { "public" }.to_owned(),
                        r.installation_id.to_string(),
                    ]
                }),
            );
            if let Some(next) = list.next_page {
                eprintln!("more: --page {next}");
            }
        }
        GithubCommand::Install {
            repo,
            org,
            host,
            runner_group,
            labels,
            ephemeral,
            pool,
            output,
            json,
        } => {
            let req = wire::GithubInstallRequest {
                repository: repo.clone(),
                org: org.clone(),
                host: host.clone(),
                runner_group: runner_group.clone(),
                labels: labels.clone(),
                ephemeral: *ephemeral,
                pool: pool.clone(),
            };
            let done = client.github_install(&req).await?;
            if *json {
                return crate::print_json(&done);
            }
            match output {
                Some(path) => {
                    let mut options = std::fs::OpenOptions::new();
                    // A script its owner runs (it holds a registration token).
                    #[cfg(unix)]
                    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o700);
                    let mut f = options
                        .write(true)
                        .create(true)
                        .truncate(true)
                        .open(path)
                        .with_context(|| format!("writing {}", path.display()))?;
                    f.write_all(done.script.as_bytes())?;
                    eprintln!("wrote the install script to {}", path.display());
                }
                None => print!("{}", done.script),
            }
            eprintln!(
                "paired workspace runner {} on pool {}; GitHub runner {} on {}",
                done.runner.id, done.runner.runtime_name, done.github.name, done.github.url
            );
            eprintln!("run the script as root on the build server; in a workflow:");
            for line in done.workflow_hint.yaml.lines() {
                eprintln!("  {line}");
            }
        }
    }
    Ok(())
}
