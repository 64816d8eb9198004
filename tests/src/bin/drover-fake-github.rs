//! The tests' fake GitHub as a process, for the desktop app's end-to-end
//! run (desktop/e2e): a github.com and a GHE host (`ghe.test`) on local
//! ports, driven over stdin and stdout, one JSON line per answer.
//!
//! At start it prints `{"serveArgs": [...]}`: the `drover-coordinator serve`
//! flags that configure the App on it. Then, one command a line:
//!
//! - `install HOST ACCOUNT User|Organization REPO,…` → `{"installationId": N}`
//! - `link HOST ID URL TOKEN`: links installation ID to the workspace of the
//!   admin TOKEN at coordinator URL, as GitHub's install flow does →
//!   `{"linked": true}`
//! - `registrations` → `{"registrationTokens": N}` minted so far
//!
//! HOST is `github.com` or `ghe.test`. It exits when stdin closes. An
//! `https://` URL's certificate may be signed by `DROVER_CA_FILE`'s CA.

use std::io::{BufRead as _, Write as _};

use drover_tests::fake_github::{self, FakeGithub, GHE, GithubApp};
use drover_tests::runner_core::client::{Client, ClientOptions, Token};
use serde_json::{Value, json};

fn answer(v: Value) {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{v}")
        .and_then(|()| out.flush())
        .expect("stdout");
}

fn host<'a>(
    app: &'a GithubApp,
    name: &str,
) -> anyhow::Result<(&'a FakeGithub, Option<&'static str>)> {
    match name {
        "github.com" => Ok((&app.com, None)),
        GHE => Ok((&app.ghe, Some(GHE))),
        other => anyhow::bail!("unknown host {other:?}: github.com or {GHE}"),
    }
}

async fn command(app: &GithubApp, line: &str) -> anyhow::Result<Value> {
    let words: Vec<&str> = line.split_whitespace().collect();
    match words[..] {
        ["install", h, account, kind, repos] => {
            let repos: Vec<&str> = repos.split(',').filter(|r| !r.is_empty()).collect();
            let id = host(app, h)?.0.install(account, kind, &repos);
            Ok(json!({ "installationId": id }))
        }
        ["link", h, id, url, token] => {
            let (fake, name) = host(app, h)?;
            // DROVER_CA_FILE: a coordinator serving HTTPS with a private CA.
            let options = ClientOptions {
                ca_file: std::env::var_os("DROVER_CA_FILE").map(Into::into),
            };
            let client = Client::with_options(url, Token::new(token), &options)?;
            fake_github::link_with(url, &client, fake, name, id.parse()?).await;
            Ok(json!({ "linked": true }))
        }
        ["registrations"] => {
            let n = app.com.registration_tokens().len() + app.ghe.registration_tokens().len();
            Ok(json!({ "registrationTokens": n }))
        }
        _ => anyhow::bail!("unknown command {line:?}"),
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let app = GithubApp::start().await;
    answer(json!({ "serveArgs": app.serve_args() }));
    let (tx, mut rx) = tokio::sync::mpsc::channel::<String>(16);
    // Stdin is read on its own thread: the fake serves on this runtime meanwhile.
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines().map_while(Result::ok) {
            if tx.blocking_send(line).is_err() {
                break;
            }
        }
    });
    while let Some(line) = rx.recv().await {
        match command(&app, &line).await {
            Ok(v) => answer(v),
            Err(e) => answer(json!({ "error": e.to_string() })),
        }
    }
    Ok(())
}
