//! `drover runner`: one paired runner, or N joined to a pool, run until
//! drained; the token kept off the command line and out of readable files,
//! and a coordinator not up yet waited for.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context as _, bail};
use clap::Args;
use runner_core::actions::ActionsRunner;
use runner_core::backoff::Backoff;
use runner_core::client::ClientError;
use runner_core::credentials::{
    CredentialStore as _, FileStore, JoinError, credential_key, join_or_load,
};
use runner_core::fleet::Fleet;
use runner_core::isolation::{self, Isolation, Sandbox};
use runner_core::runner::{Credential, EventKind, RunnerSettings};

use crate::{Cli, client, token};

#[derive(Args)]
pub struct RunnerArgs {
    /// Join runners to this pool ref (e.g. self:ws:builders) with a join token.
    #[arg(long)]
    pub join: Option<String>,
    /// How many runners to join (each its own identity), with --join.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub runners: u16,
    /// Jobs each runner runs at once.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub max_concurrent: u16,
    /// Extra labels, e.g. gpu,zone=eu.
    #[arg(long, value_delimiter = ',')]
    pub labels: Vec<String>,
    /// Runner name prefix (default: the host name).
    #[arg(long)]
    pub name: Option<String>,
    /// Where joined runners keep their credentials.
    #[arg(long, env = "DROVER_STATE_DIR")]
    pub state_dir: Option<PathBuf>,
    /// Seconds between SIGTERM and SIGKILL for a cancelled or timed-out job.
    #[arg(long, default_value_t = 10)]
    pub kill_grace: u64,
    /// Longest pause between reconnect attempts, in milliseconds.
    #[arg(long, default_value_t = 5000)]
    pub max_backoff_ms: u64,
    /// Where each job's directory is made (and removed after): a directory
    /// of this user's own, 0700 (default: drover-work-<uid> in $TMPDIR or
    /// /tmp). The runner refuses one another user owns or could replace.
    #[arg(long, env = "DROVER_WORK_DIR", value_name = "DIR")]
    pub work_dir: Option<PathBuf>,
    /// Run each job in a sandbox: `bwrap` (bubblewrap, Linux) makes the
    /// filesystem read-only but the job's directory, gives it a private
    /// /tmp and its own PID namespace, and hides the state directory, the
    /// home directories and /run/user (session bus, keyring, agents);
    /// `sandbox-exec` (macOS) lets it write only its directory and read
    /// neither the homes (keychains included), other jobs' directories nor
    /// the state directory. Windows has none. Use it for workspace
    /// runners, whose jobs come from every member.
    #[arg(long, default_value = "none", value_parser = parse_sandbox)]
    pub sandbox: Sandbox,
    /// Run jobs as this user (the runner runs as root): they cannot read
    /// the runner's state directory or its /proc entries. Jobs of one
    /// runner still share the user; --sandbox bwrap keeps them apart.
    #[arg(long, value_name = "USER")]
    pub job_user: Option<String>,
    /// Serve GitHub Actions on demand: offer the github-actions capability
    /// and give each on-demand job GitHub's Actions runner (actions/runner
    /// 2.319.1 unless --actions-runner-version), downloaded once into a
    /// per-host cache and checked against its SHA-256 first.
    #[arg(long)]
    pub github_actions: bool,
    /// The actions/runner release to run (then --actions-runner-sha256 too).
    #[arg(long, value_name = "VERSION", requires = "github_actions")]
    pub actions_runner_version: Option<String>,
    /// Where to download the release from (a mirror): its tarball's URL.
    #[arg(long, value_name = "URL", requires = "github_actions")]
    pub actions_runner_url: Option<String>,
    /// The release file's SHA-256, as GitHub publishes it.
    #[arg(long, value_name = "HEX", requires = "github_actions")]
    pub actions_runner_sha256: Option<String>,
    /// The cache directory (default: drover/actions-runner in the user's
    /// cache directory).
    #[arg(long, value_name = "DIR", requires = "github_actions")]
    pub actions_runner_cache: Option<PathBuf>,
}

fn parse_sandbox(s: &str) -> Result<Sandbox, String> {
    Sandbox::parse(s)
        .ok_or_else(|| format!("{s:?}: use none, bwrap (Linux) or sandbox-exec (macOS)"))
}

/// The arguments without `--token VALUE` / `--token=VALUE`, and the token,
/// if one was given so. A runner's command line is readable by every user
/// and job of the machine (`/proc/PID/cmdline`), for as long as it runs.
#[cfg_attr(windows, allow(dead_code))]
fn token_flag_removed(args: Vec<OsString>) -> Option<(Vec<OsString>, OsString)> {
    let mut kept = Vec::with_capacity(args.len());
    let mut token = None;
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        if arg == "--" {
            kept.push(arg);
            kept.extend(args);
            break;
        }
        if arg == "--token" {
            token = args.next();
        } else if let Some(value) = arg.to_str().and_then(|a| a.strip_prefix("--token=")) {
            token = Some(value.into());
        } else {
            kept.push(arg);
        }
    }
    token.map(|t| (kept, t))
}

/// `drover runner --token T`: starts itself again at once (same process)
/// without the flag, with `T` in `DROVER_TOKEN`, which only its user can read
/// (and, once hardened, only root); so no job ever sees `T` in the runner's
/// command line. Returns only if exec fails. (Windows has no exec, and any
/// process of the user may read another's memory there: nothing to gain.)
#[cfg(windows)]
pub fn reexec_without_token_flag() -> anyhow::Result<()> {
    Ok(())
}

#[cfg(unix)]
pub fn reexec_without_token_flag() -> anyhow::Result<()> {
    use std::os::unix::process::CommandExt as _;
    let Some((args, token)) = token_flag_removed(std::env::args_os().collect()) else {
        return Ok(());
    };
    let exe = std::env::current_exe().context("finding this program to restart it")?;
    let (arg0, rest) = args.split_first().context("no argv[0]")?;
    let e = std::process::Command::new(exe)
        .arg0(arg0)
        .args(rest)
        .env("DROVER_TOKEN", token)
        .exec();
    Err(e).context("restarting without --token on the command line")
}

/// Refuses a token file that others may read or write, as ssh refuses a
/// readable private key: a runner's token runs jobs in its pool. (On
/// Windows a file in the user's profile is the user's by its ACL.)
#[cfg(windows)]
fn private_token_file(_path: &std::path::Path) -> anyhow::Result<()> {
    Ok(())
}

#[cfg(unix)]
fn private_token_file(path: &std::path::Path) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    let meta = std::fs::metadata(path)
        .with_context(|| format!("reading --token-file {}", path.display()))?;
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        bail!(
            "--token-file {file} is too open (mode {mode:04o}: its group or others may read or change it); \
             the token must be readable by its owner only (as ssh wants of a key). Run: chmod 600 {file}",
            file = path.display()
        );
    }
    Ok(())
}

/// Calls `f` until the coordinator answers, saying on stderr while it
/// waits: a runner started before its coordinator (at boot, say) waits for
/// it, with backoff, rather than exiting. `transient` picks the errors
/// that mean "not reachable yet" out of `f`'s.
async fn until_reachable<T, E, Fut>(
    url: &str,
    max_backoff: Duration,
    mut f: impl FnMut() -> Fut,
    transient: impl Fn(&E) -> Option<&ClientError>,
) -> Result<T, E>
where
    Fut: Future<Output = Result<T, E>>,
{
    let mut backoff = Backoff::new(Duration::from_millis(500), max_backoff);
    loop {
        match f().await {
            Err(e) if transient(&e).is_some_and(|c| c.is_recoverable()) => {
                let pause = backoff.next_delay();
                eprintln!(
                    "drover: coordinator at {url} not reachable ({}); retrying in {:.1}s",
                    transient(&e).expect("transient"),
                    pause.as_secs_f64()
                );
                tokio::time::sleep(pause).await;
            }
            r => return r,
        }
    }
}

/// For [`until_reachable`]: a client error is its own cause.
fn itself(e: &ClientError) -> Option<&ClientError> {
    Some(e)
}

pub async fn run_runners(cli: &Cli, args: &RunnerArgs) -> anyhow::Result<ExitCode> {
    isolation::harden_process().context("making the runner's memory unreadable to its jobs")?;
    if let Some(path) = &cli.token_file {
        private_token_file(path)?;
    }
    let token = token(cli)?;
    let client = client(cli, token.clone())?;
    let mut capabilities = runner_core::host::detect_capabilities();
    capabilities.extend(args.labels.iter().cloned());
    let state_dir = args.state_dir.clone().or_else(FileStore::default_dir);
    let settings = RunnerSettings {
        slots: args.max_concurrent.into(),
        kill_grace: Duration::from_secs(args.kill_grace),
        max_backoff: Duration::from_millis(args.max_backoff_ms),
        capabilities,
        work_root: match &args.work_dir {
            Some(dir) => std::path::absolute(dir).context("--work-dir")?,
            None => runner_core::runner::default_work_root(),
        },
        isolation: Isolation {
            sandbox: args.sandbox,
            // Where the runner's credentials are.
            hidden: state_dir.iter().chain(&cli.token_file).cloned().collect(),
            job_user: args.job_user.clone(),
        },
        actions: args
            .github_actions
            .then(|| {
                ActionsRunner::new(
                    args.actions_runner_version.clone(),
                    args.actions_runner_url.clone(),
                    args.actions_runner_sha256.clone(),
                    args.actions_runner_cache.clone(),
                )
            })
            .transpose()
            .map_err(anyhow::Error::msg)?,
        ..RunnerSettings::default()
    };
    let settings_backoff = settings.max_backoff;
    let (mut fleet, mut events) = Fleet::new(client.clone(), settings)?;
    // With `sandbox=…` as this host gives it.
    let capabilities = fleet.capabilities().to_vec();
    // Where each joined runner's credential is saved, for messages.
    let mut saved_in = std::collections::HashMap::new();
    match &args.join {
        Some(reference) => {
            let dir = state_dir.context("no state directory; pass --state-dir")?;
            let store = FileStore::new(dir);
            let prefix = args
                .name
                .clone()
                .unwrap_or_else(runner_core::host::hostname);
            for i in 0..usize::from(args.runners) {
                let name = format!("{prefix}-{i}");
                let credential = until_reachable(
                    &cli.url,
                    settings_backoff,
                    || join_or_load(&store, &client, &token, reference, &name, i, &capabilities),
                    |e| match e {
                        JoinError::Join { source, .. } => Some(source),
                        _ => None,
                    },
                )
                .await?;
                saved_in.insert(
                    credential.runner_id.clone(),
                    store.describe(&credential_key(reference, i)),
                );
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
            let me = until_reachable(
                &cli.url,
                settings_backoff,
                || client.hello(&capabilities),
                itself,
            )
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
    let mut term = Terminate::new()?;
    let mut draining = false;
    loop {
        tokio::select! {
            Some(event) = events.recv() => {
                eprintln!("{event}");
                if let EventKind::Stopped { error, .. } = &event.kind {
                    if let (Some(_), Some(place)) = (error, saved_in.get(&event.runner)) {
                        eprintln!(
                            "drover: runner {}'s credential is saved in {place}; if the runner was revoked, start again with a fresh join token and it is replaced",
                            event.runner
                        );
                    }
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

/// What a service manager sends to stop the runner: SIGTERM (systemd,
/// launchd); on Windows, the console closing or the system shutting down.
#[cfg(unix)]
struct Terminate(tokio::signal::unix::Signal);

#[cfg(unix)]
impl Terminate {
    fn new() -> std::io::Result<Self> {
        use tokio::signal::unix::{SignalKind, signal};
        signal(SignalKind::terminate()).map(Self)
    }

    async fn recv(&mut self) {
        self.0.recv().await;
    }
}

#[cfg(windows)]
struct Terminate(
    tokio::signal::windows::CtrlClose,
    tokio::signal::windows::CtrlShutdown,
);

#[cfg(windows)]
impl Terminate {
    fn new() -> std::io::Result<Self> {
        use tokio::signal::windows::{ctrl_close, ctrl_shutdown};
        Ok(Self(ctrl_close()?, ctrl_shutdown()?))
    }

    async fn recv(&mut self) {
        tokio::select! {
            _ = self.0.recv() => {}
            _ = self.1.recv() => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use std::ffi::OsString;

    use super::*;

    fn os(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[test]
    fn the_token_flag_is_taken_out_of_the_command_line() {
        let (kept, token) =
            token_flag_removed(os(&["drover", "runner", "--token", "rnr_x", "--join", "r"]))
                .unwrap();
        assert_eq!(
            (kept, token),
            (os(&["drover", "runner", "--join", "r"]), "rnr_x".into())
        );
        let (kept, token) = token_flag_removed(os(&[
            "drover",
            "--token=djt_y",
            "runner",
            "--token-file",
            "f",
        ]))
        .unwrap();
        assert_eq!(
            (kept, token),
            (
                os(&["drover", "runner", "--token-file", "f"]),
                "djt_y".into()
            )
        );
        assert!(token_flag_removed(os(&["drover", "runner", "--token-file", "f"])).is_none());
    }
}
