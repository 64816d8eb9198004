//! `drover tokens`, `drover pair-link` and `drover whoami`: a member's own
//! API tokens and devices.

use clap::Subcommand;
use runner_core::client::Client;

use crate::{expiry, human, print_json, table};

#[derive(Subcommand)]
pub enum TokensCommand {
    /// Your API tokens: id, name, created, last used; `*` marks this one.
    List {
        /// Print the coordinator's JSON (times in Unix milliseconds).
        #[arg(long)]
        json: bool,
    },
    /// Revoke one of your API tokens, at once.
    Revoke { id: String },
}

/// `drover tokens …`.
pub async fn tokens(client: &Client, cmd: &TokensCommand) -> anyhow::Result<()> {
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
    Ok(())
}

/// `drover pair-link`: a one-time link that pairs a device to this member.
pub async fn pair_link(client: &Client) -> anyhow::Result<()> {
    let code = client.pairing_code().await?;
    println!("{}", code.link);
    eprintln!("one use; {}", expiry(code.expires_at));
    Ok(())
}

/// `drover whoami`.
pub async fn whoami(client: &Client, json: bool) -> anyhow::Result<()> {
    let me = client.me().await?;
    if json {
        print_json(&me)?;
    } else {
        println!("{} ({}) in workspace {}", me.email, me.role, me.workspace);
        println!("subject {}", me.subject);
        if let Some(t) = &me.token {
            println!("token   {} ({})", t.id, t.name);
        }
    }
    Ok(())
}
