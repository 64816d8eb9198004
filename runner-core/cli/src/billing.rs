//! `drover usage` and `drover budget`: what the workspace (or you) ran
//! this month or another, and the workspace's monthly budget.

use anyhow::{Context as _, bail};
use clap::{Args, Subcommand};
use drover_wire::text::runner_minutes;
use runner_core::client::{Client, Scope};

use crate::{human, table};

#[derive(Args)]
pub struct UsageArgs {
    /// The month, YYYY-MM (UTC); this month by default.
    #[arg(long)]
    month: Option<String>,
    /// Add up by pool, member or runner.
    #[arg(long, default_value = "pool", value_parser = ["pool", "member", "runner"])]
    by: String,
    /// Only the jobs you submitted (any member); without it, the workspace's (admins).
    #[arg(long)]
    mine: bool,
    /// Print the coordinator's CSV.
    #[arg(long, conflicts_with = "json")]
    csv: bool,
    /// Print the coordinator's JSON (times in milliseconds).
    #[arg(long)]
    json: bool,
}

#[derive(Subcommand)]
pub enum BudgetCommand {
    /// The workspace's monthly budget and this month's use.
    Show {
        #[arg(long)]
        json: bool,
    },
    /// Set the budget per calendar month (UTC) in runner-minutes, or `none` (admins).
    Set {
        /// Runner-minutes a month, or `none` for no limit.
        minutes: String,
    },
}

/// Runner-milliseconds as minutes, to a tenth.
fn minutes(ms: u64) -> String {
    format!("{} min", runner_minutes(ms))
}

pub async fn usage(client: &Client, args: &UsageArgs) -> anyhow::Result<()> {
    let scope = if args.mine {
        Scope::Me
    } else {
        Scope::Workspace
    };
    let (month, by) = (args.month.as_deref(), Some(args.by.as_str()));
    if args.csv {
        print!("{}", client.usage_csv(scope, month, by).await?);
        return Ok(());
    }
    let report = client.usage_report(scope, month, by).await?;
    if args.json {
        return crate::print_json(&report);
    }
    println!(
        "{} {} by {}",
        if args.mine { "your jobs'" } else { "workspace" },
        report.month,
        report.by
    );
    let by = report.by.to_uppercase();
    table::print(
        &[by.as_str(), "ID", "RUNNER TIME", "CHARGED", "ATTEMPTS"],
        report.lines.iter().map(|l| {
            vec![
                l.name.clone(),
                l.id.clone(),
                minutes(l.runner_ms),
                minutes(l.charged_ms),
                l.attempts.to_string(),
            ]
        }),
    );
    Ok(())
}

pub async fn budget(client: &Client, cmd: &BudgetCommand) -> anyhow::Result<()> {
    let usage = match cmd {
        BudgetCommand::Show { json: true } => return crate::print_json(&client.usage().await?),
        BudgetCommand::Show { json: false } => client.usage().await?,
        BudgetCommand::Set { minutes } => {
            let limit = match minutes.as_str() {
                "none" => None,
                n => Some(
                    n.parse::<u64>()
                        .with_context(|| format!("{n:?}: give whole runner-minutes, or none"))?,
                ),
            };
            if limit.is_some_and(|m| m > 100_000_000_000) {
                bail!("{minutes} runner-minutes is more than any coordinator takes");
            }
            client.set_budget(limit).await?
        }
    };
    println!(
        "{} {}: {} charged of {} ({} attempts); members' own runners {}; resets {}",
        usage.workspace,
        usage.month,
        minutes(usage.charged_ms),
        usage
            .monthly_minutes
            .map_or("no limit".to_owned(), |m| format!("{m} min")),
        usage.jobs_charged,
        minutes(usage.own_pays_ms),
        human::utc(usage.resets_at)
    );
    Ok(())
}
