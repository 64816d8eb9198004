use std::io::Write as _;
use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Context as _, bail};
use clap::{Args, Parser, Subcommand};
use drover_coordinator::admin;
use drover_coordinator::app::{Application, Config};
use drover_coordinator::clock::SystemClock;
use drover_coordinator::store::{Durability, Role};

/// The Drover coordinator: pools, dispatch, jobs, billing.
#[derive(Parser)]
#[command(name = "drover-coordinator", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the REST API and the runner protocol.
    Serve(Serve),
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
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(format!("sqlite://{}", dir.join("coordinator.db").display()))
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
                .unwrap_or_else(|_| "drover_coordinator=info,warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
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
            let config = Config {
                listen: s.listen,
                database_url: database_url(&s.database)?,
                durability: s.sqlite_sync,
                lease_ttl: Duration::from_millis(s.lease_ttl_ms),
            };
            let app = Application::build(config).await?;
            println!(
                "drover-coordinator listening on http://{}",
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
    }
    Ok(())
}
