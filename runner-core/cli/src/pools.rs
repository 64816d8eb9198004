//! `drover runners` and `drover runtimes`: the roster and revoking
//! runners; pools, their join tokens (minted, listed, revoked).

use anyhow::Context as _;
use clap::Subcommand;
use runner_core::client::{Client, RunnerListing, Scope};
use runner_core::isolation;

use crate::{expiry, human, print_json, scope, table};

#[derive(Subcommand)]
pub enum RunnersCommand {
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
pub enum RuntimesCommand {
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

/// `drover runners …`.
pub async fn runners(client: &Client, cmd: &RunnersCommand) -> anyhow::Result<()> {
    match cmd {
        RunnersCommand::Revoke { id, workspace } => {
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
        RunnersCommand::List { json } => {
            let list = client.runners(RunnerListing::Roster).await?;
            if *json {
                return print_json(&list);
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
                        match (r.online, r.paused) {
                            (false, _) => "offline",
                            (true, true) => "paused",
                            (true, false) => "online",
                        }
                        .to_owned(),
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
    }
    Ok(())
}

/// `drover runtimes …`; `url` is the coordinator's, for the join hint.
pub async fn runtimes(client: &Client, url: &str, cmd: &RuntimesCommand) -> anyhow::Result<()> {
    match cmd {
        RuntimesCommand::List { workspace, json } => {
            let list = client.runtimes(scope(*workspace)).await?;
            if *json {
                return print_json(&list);
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
                url, t.runtime.reference
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
                return print_json(&list);
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
    Ok(())
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
}
