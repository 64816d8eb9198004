//! `drover members …`, `drover audit` and `drover redeem`: the workspace's
//! people, what they did, and a new member's (or device's) first token.

use anyhow::{Context as _, bail};
use clap::{Args, Subcommand};
use drover_wire::text::percent_decode;
use runner_core::client::{Client, Token};

use crate::{human, table};

#[derive(Subcommand)]
pub enum MembersCommand {
    /// The workspace's members: id, email, role, status, tokens (admins only).
    List {
        /// Print the coordinator's JSON (times in Unix milliseconds).
        #[arg(long)]
        json: bool,
    },
    /// Invite someone: prints a one-time link (seven days) for their first token.
    Invite {
        email: String,
        /// admin or member.
        #[arg(long, default_value = "member")]
        role: String,
        /// Print the coordinator's JSON (the code is in it, shown once).
        #[arg(long)]
        json: bool,
    },
    /// Change a member's role (the last admin keeps theirs).
    Update {
        /// The member's id (usr_…), from `drover members list`.
        id: String,
        /// admin or member.
        #[arg(long)]
        role: String,
    },
    /// Remove a member: their tokens, personal runners and queued jobs go at once.
    Remove { id: String },
}

#[derive(Args)]
pub struct AuditArgs {
    /// Only entries at or after this time: Unix milliseconds, or an age such as 30m, 12h, 7d.
    #[arg(long)]
    since: Option<String>,
    /// Only this actor: a member's id or email, or a runner's id.
    #[arg(long)]
    actor: Option<String>,
    /// Only this action, e.g. member.removed.
    #[arg(long)]
    action: Option<String>,
    /// Entries per page (1-500).
    #[arg(long, default_value_t = 50)]
    limit: u32,
    /// Entries older than this id (the previous page's last one).
    #[arg(long)]
    before: Option<String>,
    /// Print the coordinator's JSON (times in Unix milliseconds).
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct RedeemArgs {
    /// A `drover://pair?…` link (a pairing link or an invite), or its bare code (dpc_…).
    code: String,
    /// The token's name, e.g. this machine's.
    #[arg(long, default_value = "cli")]
    name: String,
}

pub async fn members(client: &Client, cmd: &MembersCommand) -> anyhow::Result<()> {
    match cmd {
        MembersCommand::List { json: true } => crate::print_json(&client.members().await?)?,
        MembersCommand::List { json: false } => {
            let now = human::now_ms();
            let members = client.members().await?.members;
            table::print(
                &["ID", "EMAIL", "ROLE", "STATUS", "TOKENS", "LAST USED"],
                members.iter().map(|m| {
                    let used = m.tokens.iter().filter_map(|t| t.last_used_at).max();
                    vec![
                        m.id.clone(),
                        m.email.clone(),
                        m.role.clone(),
                        m.status.clone(),
                        m.tokens.len().to_string(),
                        used.map_or("never".into(), |at| human::ago(at, now)),
                    ]
                }),
            );
        }
        MembersCommand::Invite { email, role, json } => {
            let invite = client.invite_member(email, Some(role)).await?;
            if *json {
                crate::print_json(&invite)?;
            } else {
                println!("{}", invite.link);
                eprintln!(
                    "invited {} ({}) as {}; the link works once, until {}",
                    invite.member.email,
                    invite.member.id,
                    invite.member.role,
                    human::utc(invite.expires_at)
                );
                eprintln!(
                    "they open it in the desktop app, or run: drover redeem '<link>' --url {}",
                    client.base_url()
                );
            }
        }
        MembersCommand::Update { id, role } => {
            let m = client.update_member(id, role).await?;
            println!("{} {} is now {}", m.id, m.email, m.role);
        }
        MembersCommand::Remove { id } => {
            client.remove_member(id).await?;
            println!("removed {id}");
        }
    }
    Ok(())
}

pub async fn audit(client: &Client, args: &AuditArgs) -> anyhow::Result<()> {
    let filter = drover_wire::AuditQuery {
        since: args
            .since
            .as_deref()
            .map(|s| since(s, human::now_ms()))
            .transpose()?,
        actor: args.actor.clone(),
        action: args.action.clone(),
        before: args.before.clone(),
        limit: Some(args.limit),
    };
    let page = client.audit(&filter).await?;
    if args.json {
        return crate::print_json(&page);
    }
    table::print(
        &[
            "ID", "TIME", "ACTION", "ACTOR", "SURFACE", "TARGET", "DETAIL",
        ],
        page.events.iter().map(|e| {
            vec![
                e.id.clone(),
                human::utc(e.at),
                e.action.clone(),
                e.actor.email.clone().unwrap_or(e.actor.id.clone()),
                e.surface.clone(),
                e.target.clone(),
                e.detail.to_string(),
            ]
        }),
    );
    if let Some(next) = &page.next_before {
        eprintln!("more: --before {next}");
    }
    Ok(())
}

/// `--since`: Unix milliseconds, or an age (`30m`, `12h`, `7d`) before `now`.
fn since(s: &str, now: i64) -> anyhow::Result<i64> {
    if let Ok(ms) = s.parse::<i64>() {
        return Ok(ms);
    }
    let unit = match s.chars().last() {
        Some('m') => 60_000,
        Some('h') => 3_600_000,
        Some('d') => 86_400_000,
        _ => bail!("--since {s:?}: use Unix milliseconds, or an age such as 30m, 12h or 7d"),
    };
    let n: i64 = s[..s.len() - 1]
        .parse()
        .ok()
        .filter(|n| *n >= 0)
        .with_context(|| format!("--since {s:?}: the age must be a whole number"))?;
    Ok(now - n.saturating_mul(unit))
}

/// The (coordinator URL, code) in a `drover://pair?url=…&code=…` link, or
/// (None, code) for a bare code.
fn code_of(s: &str) -> anyhow::Result<(Option<String>, String)> {
    let Some(query) = s.strip_prefix("drover://pair?") else {
        if s.contains("://") {
            bail!("{s:?} is not a drover://pair link");
        }
        return Ok((None, s.to_owned()));
    };
    let (mut url, mut code) = (None, None);
    for pair in query.split('&') {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let value = percent_decode(value).context("the link is malformed")?;
        match key {
            "url" => url = Some(value),
            "code" => code = Some(value),
            _ => {}
        }
    }
    Ok((url, code.context("the link has no code")?))
}

/// Redeems a pairing code or invite for an API token, printed once on stdout.
pub async fn redeem(
    url: &str,
    options: &runner_core::client::ClientOptions,
    args: &RedeemArgs,
) -> anyhow::Result<()> {
    let (link_url, code) = code_of(&args.code)?;
    let url = link_url.as_deref().unwrap_or(url);
    // The code is the credential; no token goes with it.
    let client = crate::client_at(url, Token::new(""), options)?.with_surface("cli");
    let device = client.redeem_pairing_code(&code, &args.name).await?;
    println!("{}", device.token);
    eprintln!(
        "a token for {} ({}) in workspace {}, named {:?}; keep it: it is shown once",
        device.email, device.role, device.workspace, device.name
    );
    eprintln!("use it with: DROVER_URL={url} DROVER_TOKEN=<that token> drover whoami");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{code_of, since};

    #[test]
    fn links_and_bare_codes() {
        let (url, code) =
            code_of("drover://pair?url=http%3A%2F%2F127.0.0.1%3A7700&code=dpc_abc").unwrap();
        assert_eq!(url.as_deref(), Some("http://127.0.0.1:7700"));
        assert_eq!(code, "dpc_abc");
        assert_eq!(code_of("dpc_x").unwrap(), (None, "dpc_x".to_owned()));
        assert!(code_of("drover://join?url=x&token=y").is_err());
        assert!(code_of("drover://pair?url=x").is_err());
        assert!(code_of("drover://pair?code=%zz").is_err());
    }

    #[test]
    fn since_takes_milliseconds_or_an_age() {
        assert_eq!(since("1700000000000", 0).unwrap(), 1_700_000_000_000);
        assert_eq!(since("30m", 10_000_000).unwrap(), 10_000_000 - 1_800_000);
        assert_eq!(since("2d", 200_000_000).unwrap(), 200_000_000 - 172_800_000);
        for bad in ["", "m", "3w", "-1h", "1.5h"] {
            assert!(since(bad, 0).is_err(), "{bad}");
        }
    }
}
