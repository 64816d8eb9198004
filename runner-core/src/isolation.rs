//! How jobs are kept away from the runner and from each other: a clean
//! environment, a sandbox when asked for (bubblewrap on Linux,
//! `sandbox-exec` on macOS), and a way to kill whatever a job leaves behind
//! (its PID namespace, a cgroup, a Job Object). What each system can do is
//! in `platform`; this is what the runner asks for and is told.

use std::ffi::OsString;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use crate::platform;

/// Where each job runs (`drover runner --sandbox`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Sandbox {
    /// As a child of the runner, as its user, in its own process group.
    #[default]
    None,
    /// Under bubblewrap (`bwrap`, Linux): the filesystem read-only except
    /// the job's directory, a private `/tmp` and `/dev`, its own PID
    /// namespace (it sees only its own processes, and they all die with
    /// it), no capabilities, and the runner's state hidden.
    Bwrap,
    /// Under `sandbox-exec` (macOS) with a profile made for the job: no
    /// writing outside its directory; no reading of people's homes (the
    /// keychains among them), other jobs' directories or the runner's
    /// state; no Docker socket.
    SandboxExec,
}

impl Sandbox {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "none" => Some(Self::None),
            "bwrap" => Some(Self::Bwrap),
            "sandbox-exec" => Some(Self::SandboxExec),
            _ => None,
        }
    }

    /// The sandbox this system has: bubblewrap on Linux, `sandbox-exec` on
    /// macOS. Windows has none (asking for one there says so).
    pub fn native() -> Self {
        if cfg!(target_os = "macos") {
            Self::SandboxExec
        } else {
            Self::Bwrap
        }
    }

    /// Its name on the command line and in the runner's capabilities.
    pub fn name(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Bwrap => "bwrap",
            Self::SandboxExec => "sandbox-exec",
        }
    }
}

/// How a runner isolates its jobs; part of `RunnerSettings`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Isolation {
    pub sandbox: Sandbox,
    /// Paths no sandboxed job may see (the state directory with the
    /// runner's credentials, a token file): an empty directory, or an
    /// empty file, is mounted over each.
    pub hidden: Vec<PathBuf>,
    /// Run jobs as this user (the runner must be root): then they cannot
    /// read the runner's state directory or its `/proc` entries.
    pub job_user: Option<String>,
}

pub use crate::platform::JobUser;

#[derive(Debug, thiserror::Error)]
pub enum IsolationError {
    #[error(
        "--sandbox bwrap needs bubblewrap, which is not installed (Debian/Ubuntu: apt-get install bubblewrap)"
    )]
    BwrapMissing,
    #[error("--sandbox: {0} does not run: {1}")]
    SandboxBroken(PathBuf, String),
    #[error("--sandbox {0} is {1} only")]
    NotHere(&'static str, &'static str),
    #[error("this system has no sandbox for jobs (--sandbox none runs them as the runner's user)")]
    NoSandboxHere,
    #[error("--job-user needs the runner to run as root")]
    JobUserNeedsRoot,
    #[error(
        "--job-user is for Linux and macOS: on Windows, run the runner as the user its jobs should run as"
    )]
    JobUserNotHere,
    #[error("--job-user {0}: no such user")]
    UnknownUser(String),
    #[error("--job-user {0} is root: name an unprivileged user")]
    JobUserIsRoot(String),
    #[error(
        "the work directory {0} is not this runner's own: {1} (choose another with --work-dir, or remove it)"
    )]
    WorkRootNotOwn(PathBuf, String),
    #[error("cannot make the work directory {0}: {1}")]
    WorkRoot(PathBuf, io::Error),
}

/// How what a job leaves behind is killed when it ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Containment {
    /// Its own PID namespace: when the job's first process ends, the kernel
    /// kills every other process in it.
    PidNamespace,
    /// Its own cgroup (v2), killed as a whole when the job ends.
    Cgroup,
    /// Its own Job Object (Windows): every process it starts is in it, and
    /// all are ended with it.
    JobObject,
    /// Only its process group: a process that leaves the group (`setsid`,
    /// a double fork) outlives the job. Says why nothing better was possible.
    ProcessGroup { why: String },
}

/// An [`Isolation`] checked against this host: what the runner will do.
#[derive(Debug)]
pub struct Prepared {
    pub isolation: Isolation,
    /// The sandbox program's absolute path (`bwrap`, `sandbox-exec`), when
    /// jobs are sandboxed.
    pub sandbox: Option<PathBuf>,
    /// The programs the runner itself starts, found on its own `PATH` when
    /// it started: a job's env (its `PATH`, `LD_PRELOAD`) never chooses or
    /// configures them.
    pub programs: Programs,
    pub job_user: Option<JobUser>,
    pub containment: Containment,
    pub(crate) jobs: platform::Jobs,
}

impl fmt::Display for Prepared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.isolation.sandbox {
            Sandbox::None => write!(f, "jobs run unsandboxed")?,
            Sandbox::Bwrap => write!(f, "jobs run in a bubblewrap sandbox")?,
            Sandbox::SandboxExec => write!(f, "jobs run in a sandbox-exec sandbox")?,
        }
        match (&self.isolation.job_user, self.job_user) {
            (Some(name), Some(u)) => write!(f, ", as {name} (uid {})", u.uid)?,
            _ => write!(f, ", as this runner's user")?,
        }
        match &self.containment {
            Containment::PidNamespace => write!(f, "; each in its own PID namespace"),
            Containment::Cgroup => write!(f, "; each in its own cgroup"),
            Containment::JobObject => write!(f, "; each in its own Job Object"),
            Containment::ProcessGroup { why } => write!(
                f,
                "; WARNING: a process a job detaches from its process group may outlive it ({why})"
            ),
        }
    }
}

impl Prepared {
    /// A job's processes are killed as a whole when it ends.
    pub fn contained(&self) -> bool {
        !matches!(self.containment, Containment::ProcessGroup { .. })
    }

    /// What the runner announces about its jobs' sandbox: `sandbox=bwrap`,
    /// `sandbox=sandbox-exec`, or `sandbox=none` (the roster shows such a
    /// runner as unsandboxed).
    pub fn capability(&self) -> String {
        let sandbox = match self.sandbox {
            Some(_) => self.isolation.sandbox.name(),
            None => Sandbox::None.name(),
        };
        format!("{SANDBOX_KEY}={sandbox}")
    }

    /// `capabilities` with every `sandbox…` entry (a label claiming one
    /// included) replaced by [`Prepared::capability`].
    pub fn announce(&self, capabilities: &mut Vec<String>) {
        capabilities.retain(|c| c.split('=').next() != Some(SANDBOX_KEY));
        capabilities.push(self.capability());
    }
}

/// The capability key a runner announces its sandbox under.
pub const SANDBOX_KEY: &str = "sandbox";

/// How a runner with `capabilities` runs its jobs, as the roster shows it:
/// `Some(false)` when it announced `sandbox=none`, `Some(true)` for a
/// sandbox, `None` when it said nothing (an older runner).
pub fn announced_sandbox(capabilities: &[String]) -> Option<bool> {
    let values: Vec<&str> = capabilities
        .iter()
        .filter_map(|c| c.split_once('='))
        .filter(|(k, _)| *k == SANDBOX_KEY)
        .map(|(_, v)| v)
        .collect();
    if values.is_empty() {
        None
    } else {
        Some(!values.contains(&"none"))
    }
}

/// Checks `isolation` on this host. A sandbox that cannot be had is an
/// error, never a silent fallback; containment falls back to the process
/// group, which [`Prepared`]'s `Display` says.
pub fn prepare(isolation: &Isolation) -> Result<Prepared, IsolationError> {
    let job_user = isolation
        .job_user
        .as_deref()
        .map(platform::look_up)
        .transpose()?;
    let sandbox = platform::find_sandbox(isolation.sandbox, job_user)?;
    let (jobs, containment) = platform::jobs(sandbox.is_some());
    Ok(Prepared {
        isolation: isolation.clone(),
        sandbox,
        programs: Programs::find(),
        job_user,
        containment,
        jobs,
    })
}

/// The absolute paths of the programs the runner starts for its jobs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Programs {
    /// What runs a `script` job: `sh` (outside a sandbox), `cmd.exe` on
    /// Windows.
    pub shell: PathBuf,
    /// The container client for `image` jobs, if the runner has one.
    pub docker: Option<PathBuf>,
    /// What unpacks the Actions runner for an on-demand job.
    pub tar: Option<PathBuf>,
}

impl Programs {
    /// Looks them up on this process's `PATH` (absolute entries only).
    pub fn find() -> Self {
        Self {
            shell: platform::shell(),
            docker: find_program("docker"),
            tar: find_program("tar"),
        }
    }
}

/// `name` on this process's `PATH`, as an absolute path (on Windows,
/// `name.exe` too). Relative entries are skipped: they would name a
/// different file in each job's directory.
pub fn find_program(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_else(|| DEFAULT_PATH.into());
    let suffixed = format!("{name}{}", std::env::consts::EXE_SUFFIX);
    std::env::split_paths(&path)
        .filter(|dir| dir.is_absolute())
        .flat_map(|dir| [dir.join(name), dir.join(&suffixed)])
        .find(|p| platform::is_program(p))
}

/// `PATH` for jobs when the runner has none.
pub(crate) const DEFAULT_PATH: &str =
    "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// What of the runner's environment a job gets, when set: on Windows what
/// programs there need to start (`SystemRoot`…) and find others.
const PASSED_ENV: &[&str] = if cfg!(windows) {
    &[
        "PATHEXT",
        "SystemRoot",
        "windir",
        "SystemDrive",
        "ComSpec",
        "NUMBER_OF_PROCESSORS",
        "PROCESSOR_ARCHITECTURE",
        "OS",
    ]
} else {
    &["LANG", "LC_ALL", "TZ"]
};

/// The runner environment a job gets besides its own env and `DROVER_*`:
/// `PATH` and, when set, `LANG`, `LC_ALL` and `TZ` (on Windows, the
/// system's own variables instead). `HOME` and `TMPDIR` (on Windows also
/// `USERPROFILE`, `TEMP` and `TMP`) are the job's own directories. Nothing
/// else of the runner's environment reaches the job.
pub fn base_env(home: &Path, tmp: &Path) -> Vec<(OsString, OsString)> {
    let mut env = vec![
        (
            "PATH".into(),
            std::env::var_os("PATH").unwrap_or_else(|| DEFAULT_PATH.into()),
        ),
        ("HOME".into(), home.into()),
        ("TMPDIR".into(), tmp.into()),
    ];
    if cfg!(windows) {
        env.push(("USERPROFILE".into(), home.into()));
        env.push(("TEMP".into(), tmp.into()));
        env.push(("TMP".into(), tmp.into()));
    }
    for name in PASSED_ENV {
        if let Some(v) = std::env::var_os(name) {
            env.push((name.into(), v));
        }
    }
    env
}

/// The runner user's `HOME`, when it is a directory of its own (not `/`).
#[cfg(unix)]
pub(crate) fn runner_home() -> Option<PathBuf> {
    let home = PathBuf::from(std::env::var_os("HOME")?);
    (home.is_absolute() && home.parent().is_some() && home.is_dir()).then_some(home)
}

/// Makes the current process's memory, environment and open files
/// unreadable through `/proc` and `ptrace` by other processes of its user
/// (its jobs included); only root may still look. Jobs it starts are
/// unaffected (`execve` resets the flag). For `drover runner` and an
/// embedding app: it changes the whole process. Linux only: macOS already
/// keeps a process's memory from others of its user (not its environment,
/// which a job there reads only outside a sandbox); Windows does not.
pub fn harden_process() -> io::Result<()> {
    platform::harden_process()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sandbox_capability_replaces_any_claimed_one() {
        let mut prepared = Prepared {
            isolation: Isolation::default(),
            sandbox: None,
            programs: Programs::find(),
            job_user: None,
            containment: Containment::PidNamespace,
            jobs: platform::jobs(true).0,
        };
        let mut caps = vec!["os=linux".to_owned(), "sandbox=bwrap".to_owned()];
        prepared.announce(&mut caps);
        assert_eq!(caps, ["os=linux", "sandbox=none"]);
        assert_eq!(announced_sandbox(&caps), Some(false));
        prepared.isolation.sandbox = Sandbox::Bwrap;
        prepared.sandbox = Some("/usr/bin/bwrap".into());
        prepared.announce(&mut caps);
        assert_eq!(caps, ["os=linux", "sandbox=bwrap"]);
        assert_eq!(announced_sandbox(&caps), Some(true));
        assert_eq!(announced_sandbox(&["os=linux".to_owned()]), None);
        let both = ["sandbox=bwrap".to_owned(), "sandbox=none".to_owned()];
        assert_eq!(announced_sandbox(&both), Some(false), "none wins");
    }

    #[test]
    fn the_runner_environment_does_not_reach_the_job() {
        let env = base_env(Path::new("/h"), Path::new("/t"));
        let names: Vec<_> = env.iter().map(|(k, _)| k.to_string_lossy()).collect();
        let own = ["PATH", "HOME", "TMPDIR", "USERPROFILE", "TEMP", "TMP"];
        assert!(
            names
                .iter()
                .all(|n| own.contains(&n.as_ref()) || PASSED_ENV.contains(&n.as_ref())),
            "{names:?}"
        );
    }
}
