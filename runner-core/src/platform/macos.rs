//! macOS: each job in its own process group (`killpg`: SIGTERM, then
//! SIGKILL after the grace), and a workspace job under `sandbox-exec` with
//! a profile made for it. There are no cgroups: a process that leaves its
//! group outlives the job, which the runner says at start.

use std::ffi::{OsStr, OsString};
use std::io;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;

use tokio::process::Command;

use super::unix::signal_group;
pub(crate) use super::unix::{default_work_root, hostname, is_program, look_up, script, shell};
use super::{EnvFd, JobProcess, Launch, Pipe};
use crate::exec::Place;
use crate::isolation::{Containment, IsolationError, JobUser, Sandbox};

/// Nothing but the process group keeps a job together here.
#[derive(Debug)]
pub(crate) struct Jobs;

pub(crate) fn jobs(_sandboxed: bool) -> (Jobs, Containment) {
    let why = "macOS has no cgroups or PID namespaces".to_owned();
    (Jobs, Containment::ProcessGroup { why })
}

const SANDBOX_EXEC: &str = "/usr/bin/sandbox-exec";

pub(crate) fn find_sandbox(
    sandbox: Sandbox,
    _user: Option<JobUser>,
) -> Result<Option<PathBuf>, IsolationError> {
    match sandbox {
        Sandbox::None => Ok(None),
        Sandbox::Bwrap => Err(IsolationError::NotHere("bwrap", "Linux")),
        Sandbox::SandboxExec => {
            let found = PathBuf::from(SANDBOX_EXEC);
            // A profile it cannot apply fails every job: refuse now.
            let out = std::process::Command::new(&found)
                .args(["-p", "(version 1)(allow default)", "/usr/bin/true"])
                .env_clear()
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .output()
                .map_err(|e| IsolationError::SandboxBroken(found.clone(), e.to_string()))?;
            if !out.status.success() {
                let said = String::from_utf8_lossy(&out.stderr).trim().to_owned();
                return Err(IsolationError::SandboxBroken(found, said));
            }
            Ok(Some(found))
        }
    }
}

/// The job's `program args` under `sandbox-exec` with its profile; the
/// job's env is sandbox-exec's, which passes it on.
pub(crate) fn sandboxed<'a>(
    sandbox_exec: &Path,
    place: &Place,
    program: &OsStr,
    args: &[OsString],
    env: impl Iterator<Item = (&'a OsStr, &'a OsStr)>,
) -> Result<(Command, Option<EnvFd>), String> {
    let hidden = &place.isolation.isolation.hidden;
    let text = profile(
        place.dir,
        place.work_root,
        hidden,
        crate::isolation::runner_home(),
    );
    let mut c = Command::new(sandbox_exec);
    c.arg("-p")
        .arg(text)
        .arg(program)
        .args(args)
        .env_clear()
        .envs(env);
    Ok((c, None))
}

/// A path as the kernel sees it (`/var` and `/tmp` are links to
/// `/private/…`), for the profile's rules.
fn real(path: &Path) -> PathBuf {
    path.canonicalize().unwrap_or_else(|_| path.to_owned())
}

/// A string literal of the sandbox profile language.
fn quoted(path: &Path) -> String {
    let text = path.to_string_lossy();
    format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""))
}

/// The sandbox profile of a job whose directory is `dir`, under
/// `work_root`, with `hidden` paths and the runner's `home` unreadable. In
/// this language the last rule that matches wins: everything is allowed,
/// then writing anywhere and reading people's homes (their keychains in
/// `~/Library/Keychains` among them), the other jobs' directories, the
/// runner's state and `/Library/Keychains` are denied; then the job's own
/// directory is allowed again, and the devices a program writes to.
/// Connecting to the Docker socket is denied.
pub(crate) fn profile(
    dir: &Path,
    work_root: &Path,
    hidden: &[PathBuf],
    home: Option<PathBuf>,
) -> String {
    let mut unreadable: Vec<PathBuf> = vec![
        "/Users".into(),
        "/var/root".into(),
        "/Library/Keychains".into(),
        real(work_root),
    ];
    unreadable.extend(hidden.iter().map(|p| real(p)));
    unreadable.extend(home.map(|h| real(&h)));
    let dir = quoted(&real(dir));
    let mut p = String::from("(version 1)\n(allow default)\n(deny file-write*)\n");
    for path in &unreadable {
        p.push_str(&format!("(deny file-read* (subpath {}))\n", quoted(path)));
    }
    p.push_str(&format!("(allow file-read* file-write* (subpath {dir}))\n"));
    p.push_str(
        "(allow file-write* (literal \"/dev/null\") (literal \"/dev/zero\") (literal \"/dev/tty\") (literal \"/dev/dtracehelper\"))\n",
    );
    p.push_str(
        "(deny network-outbound (remote unix-socket (path-literal \"/var/run/docker.sock\")))\n",
    );
    p
}

pub(crate) struct Process {
    child: tokio::process::Child,
    pgid: Option<i32>,
}

/// Starts the job in its own process group, as its user if there is one.
pub(crate) async fn start(launch: Launch, _jobs: &Jobs) -> Result<Process, String> {
    let Launch {
        mut cmd,
        user,
        program,
        ..
    } = launch;
    cmd.process_group(0);
    if let Some(user) = user {
        // SAFETY: become_user only makes async-signal-safe calls.
        unsafe {
            cmd.pre_exec(move || super::unix::become_user(user));
        }
    }
    let child = cmd
        .spawn()
        .map_err(|e| format!("could not start {program:?}: {e}"))?;
    Ok(Process {
        pgid: child.id().map(|p| p as i32),
        child,
    })
}

impl JobProcess for Process {
    fn output(&mut self) -> (Pipe, Pipe) {
        (
            Box::new(self.child.stdout.take().expect("piped")),
            Box::new(self.child.stderr.take().expect("piped")),
        )
    }

    async fn wait(&mut self) -> io::Result<ExitStatus> {
        self.child.wait().await
    }

    fn interrupt(&self) {
        if let Some(pgid) = self.pgid {
            signal_group(pgid, libc::SIGTERM);
        }
    }

    fn kill(&self) {
        if let Some(pgid) = self.pgid {
            signal_group(pgid, libc::SIGKILL);
        }
    }

    async fn end(self, _jobs: &Jobs) -> Option<String> {
        self.kill();
        None
    }

    fn exit_code(status: ExitStatus) -> i32 {
        super::unix::exit_code(status)
    }
}

/// Nothing to do: macOS already keeps a process's memory from the other
/// processes of its user (not its environment).
pub(crate) fn harden_process() -> io::Result<()> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_job_directory_is_allowed_after_what_hides_the_others() {
        let text = profile(
            Path::new("/w/job_1-1"),
            Path::new("/w"),
            &[PathBuf::from("/s \"x\"")],
            Some("/Users/me".into()),
        );
        let at = |s: &str| text.find(s).unwrap_or_else(|| panic!("{s} in {text}"));
        assert!(
            at("(deny file-write*)")
                < at("(allow file-read* file-write* (subpath \"/w/job_1-1\"))")
        );
        assert!(at("(deny file-read* (subpath \"/w\"))") < at("(subpath \"/w/job_1-1\")"));
        assert!(text.contains("(subpath \"/s \\\"x\\\"\")"));
        assert!(text.contains("\"/Library/Keychains\""));
        assert!(text.contains("\"/Users/me\""));
    }
}
