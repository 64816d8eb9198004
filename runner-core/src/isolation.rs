//! How jobs are kept away from the runner and from each other: a clean
//! environment, a sandbox (bubblewrap) when asked for, and a way to kill
//! whatever a job leaves behind (its PID namespace, or a cgroup).

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use crate::cgroup::JobCgroups;

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
}

impl Sandbox {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "none" => Some(Self::None),
            "bwrap" => Some(Self::Bwrap),
            _ => None,
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

/// The user jobs run as, looked up once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobUser {
    pub uid: u32,
    pub gid: u32,
}

#[derive(Debug, thiserror::Error)]
pub enum IsolationError {
    #[error(
        "--sandbox bwrap needs bubblewrap, which is not installed (Debian/Ubuntu: apt-get install bubblewrap)"
    )]
    BwrapMissing,
    #[error("--sandbox bwrap: {0} does not run: {1}")]
    BwrapBroken(PathBuf, String),
    #[error("--sandbox bwrap is Linux only")]
    NotLinux,
    #[error("--job-user needs the runner to run as root")]
    JobUserNeedsRoot,
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
    /// Only its process group: a process that leaves the group (`setsid`,
    /// a double fork) outlives the job. Says why nothing better was possible.
    ProcessGroup { why: String },
}

/// An [`Isolation`] checked against this host: what the runner will do.
#[derive(Debug)]
pub struct Prepared {
    pub isolation: Isolation,
    /// `bwrap`'s absolute path, when sandboxed.
    pub bwrap: Option<PathBuf>,
    /// The programs the runner itself starts, found on its own `PATH` when
    /// it started: a job's env (its `PATH`, `LD_PRELOAD`) never chooses or
    /// configures them.
    pub programs: Programs,
    pub job_user: Option<JobUser>,
    pub containment: Containment,
    pub(crate) cgroups: Option<JobCgroups>,
}

impl fmt::Display for Prepared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.isolation.sandbox {
            Sandbox::None => write!(f, "jobs run unsandboxed")?,
            Sandbox::Bwrap => write!(f, "jobs run in a bubblewrap sandbox")?,
        }
        match (&self.isolation.job_user, self.job_user) {
            (Some(name), Some(u)) => write!(f, ", as {name} (uid {})", u.uid)?,
            _ => write!(f, ", as this runner's user")?,
        }
        match &self.containment {
            Containment::PidNamespace => write!(f, "; each in its own PID namespace"),
            Containment::Cgroup => write!(f, "; each in its own cgroup"),
            Containment::ProcessGroup { why } => write!(
                f,
                "; WARNING: a process a job detaches from its process group may outlive it ({why}; use --sandbox bwrap)"
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
    /// or `sandbox=none` (the roster shows such a runner as unsandboxed).
    pub fn capability(&self) -> String {
        let sandbox = if self.bwrap.is_some() {
            "bwrap"
        } else {
            "none"
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
    let job_user = isolation.job_user.as_deref().map(look_up).transpose()?;
    let bwrap = match isolation.sandbox {
        Sandbox::None => None,
        Sandbox::Bwrap => Some(find_bwrap(job_user)?),
    };
    let (containment, cgroups) = if bwrap.is_some() {
        (Containment::PidNamespace, None)
    } else {
        match JobCgroups::new() {
            Ok(c) => (Containment::Cgroup, Some(c)),
            Err(why) => (Containment::ProcessGroup { why }, None),
        }
    };
    Ok(Prepared {
        isolation: isolation.clone(),
        bwrap,
        programs: Programs::find(),
        job_user,
        containment,
        cgroups,
    })
}

/// The absolute paths of the programs the runner starts for its jobs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Programs {
    /// The shell that runs a `script` job (outside a sandbox).
    pub sh: PathBuf,
    /// The container client for `image` jobs, if the runner has one.
    pub docker: Option<PathBuf>,
}

impl Programs {
    /// Looks them up on this process's `PATH` (absolute entries only).
    pub fn find() -> Self {
        Self {
            sh: find_program("sh").unwrap_or_else(|| "/bin/sh".into()),
            docker: find_program("docker"),
        }
    }
}

/// `name` on this process's `PATH`, as an absolute path. Relative entries
/// are skipped: they would name a different file in each job's directory.
pub fn find_program(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt as _;
    let path = std::env::var_os("PATH").unwrap_or_else(|| DEFAULT_PATH.into());
    std::env::split_paths(&path)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(name))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

fn look_up(name: &str) -> Result<JobUser, IsolationError> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err(IsolationError::JobUserNeedsRoot);
    }
    let unknown = || IsolationError::UnknownUser(name.to_owned());
    let c_name = std::ffi::CString::new(name).map_err(|_| unknown())?;
    let mut buf = vec![0u8; 16 * 1024];
    // SAFETY: a zeroed passwd is a valid out-parameter for getpwnam_r.
    let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
    let mut found = std::ptr::null_mut();
    // SAFETY: every pointer is valid for the call; buf outlives its use.
    let rc = unsafe {
        libc::getpwnam_r(
            c_name.as_ptr(),
            &mut pwd,
            buf.as_mut_ptr().cast(),
            buf.len(),
            &mut found,
        )
    };
    if rc != 0 || found.is_null() {
        return Err(unknown());
    }
    if pwd.pw_uid == 0 {
        return Err(IsolationError::JobUserIsRoot(name.to_owned()));
    }
    Ok(JobUser {
        uid: pwd.pw_uid,
        gid: pwd.pw_gid,
    })
}

/// Becomes `user`, with no supplementary groups. Only async-signal-safe
/// calls: this runs between `fork` and `exec`, after joining the cgroup
/// (which needs root).
pub(crate) fn become_user(user: JobUser) -> io::Result<()> {
    // SAFETY: plain system calls on this (forked) process.
    unsafe {
        if libc::setgroups(0, std::ptr::null()) != 0
            || libc::setgid(user.gid) != 0
            || libc::setuid(user.uid) != 0
        {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

fn find_bwrap(user: Option<JobUser>) -> Result<PathBuf, IsolationError> {
    if !cfg!(target_os = "linux") {
        return Err(IsolationError::NotLinux);
    }
    let found = find_program("bwrap").ok_or(IsolationError::BwrapMissing)?;
    // A bwrap that cannot make its namespaces here (as the jobs' user)
    // fails every job: refuse now.
    let mut probe = std::process::Command::new(&found);
    if let Some(user) = user {
        use std::os::unix::process::CommandExt as _;
        probe.uid(user.uid).gid(user.gid);
    }
    let out = probe
        .args(["--ro-bind", "/", "/", "--unshare-pid", "--die-with-parent"])
        .args(["--cap-drop", "ALL", "--", "true"])
        .env_clear()
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .output()
        .map_err(|e| IsolationError::BwrapBroken(found.clone(), e.to_string()))?;
    if !out.status.success() {
        let said = String::from_utf8_lossy(&out.stderr).trim().to_owned();
        return Err(IsolationError::BwrapBroken(found, said));
    }
    Ok(found)
}

/// `PATH` for jobs when the runner has none.
pub(crate) const DEFAULT_PATH: &str =
    "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// The runner environment a job gets besides its own env and `DROVER_*`:
/// `PATH` and, when set, `LANG`, `LC_ALL` and `TZ`. `HOME` and `TMPDIR`
/// are set to the job's own directories. Nothing else of the runner's
/// environment reaches the job.
pub fn base_env(home: &Path, tmp: &Path) -> Vec<(OsString, OsString)> {
    let mut env = vec![
        (
            "PATH".into(),
            std::env::var_os("PATH").unwrap_or_else(|| DEFAULT_PATH.into()),
        ),
        ("HOME".into(), home.into()),
        ("TMPDIR".into(), tmp.into()),
    ];
    for name in ["LANG", "LC_ALL", "TZ"] {
        if let Some(v) = std::env::var_os(name) {
            env.push((name.into(), v));
        }
    }
    env
}

/// Sockets that would let a sandboxed job out (read-only mounts do not stop
/// `connect`); hidden when they exist.
const HOST_SOCKETS: &[&str] = &["/run/docker.sock", "/var/run/docker.sock"];

/// Where people's files and session services are (home directories;
/// `/run/user/<uid>`: the session bus, the keyring, agents' sockets): a
/// sandboxed job finds each empty, as it does the runner user's `HOME`.
const PERSONAL: &[&str] = &["/home", "/root", "/var/home", "/run/user"];

/// The runner user's `HOME`, when it is a directory of its own (not `/`).
fn runner_home() -> Option<PathBuf> {
    let home = PathBuf::from(std::env::var_os("HOME")?);
    (home.is_absolute() && home.parent().is_some() && home.is_dir()).then_some(home)
}

/// bubblewrap's arguments for a job whose directory is `dir` (bound
/// read-write at the same path), under `work_root` (hidden: other jobs'
/// directories are there), with `hidden` paths covered, starting in `cwd`.
pub fn bwrap_args(dir: &Path, work_root: &Path, hidden: &[PathBuf], cwd: &Path) -> Vec<OsString> {
    let mut a: Vec<OsString> = Vec::new();
    let mut push = |items: &[&std::ffi::OsStr]| a.extend(items.iter().map(|s| s.to_os_string()));
    push(&["--ro-bind".as_ref(), "/".as_ref(), "/".as_ref()]);
    push(&["--dev".as_ref(), "/dev".as_ref()]);
    push(&["--proc".as_ref(), "/proc".as_ref()]);
    push(&["--tmpfs".as_ref(), "/tmp".as_ref()]);
    push(&["--tmpfs".as_ref(), work_root.as_os_str()]);
    let home = runner_home();
    for path in hidden
        .iter()
        .map(PathBuf::as_path)
        .chain(HOST_SOCKETS.iter().chain(PERSONAL).map(Path::new))
        .chain(home.as_deref())
    {
        if path.is_dir() {
            push(&["--tmpfs".as_ref(), path.as_os_str()]);
        } else if path.exists() {
            push(&["--ro-bind".as_ref(), "/dev/null".as_ref(), path.as_os_str()]);
        }
    }
    push(&["--bind".as_ref(), dir.as_os_str(), dir.as_os_str()]);
    push(&["--chdir".as_ref(), cwd.as_os_str()]);
    push(&[
        "--unshare-pid".as_ref(),
        "--unshare-ipc".as_ref(),
        "--die-with-parent".as_ref(),
        "--cap-drop".as_ref(),
        "ALL".as_ref(),
        "--".as_ref(),
    ]);
    a
}

/// A job's environment as bubblewrap reads it from `--args FD`: `--clearenv`,
/// then `--setenv NAME VALUE` for each, NUL-separated. bwrap itself starts
/// with an empty environment and applies these to what it runs inside the
/// sandbox; none of it is on a command line.
pub fn bwrap_env_args<'a>(env: impl IntoIterator<Item = (&'a OsStr, &'a OsStr)>) -> Vec<u8> {
    use std::os::unix::ffi::OsStrExt as _;
    let mut out = b"--clearenv\0".to_vec();
    for (name, value) in env {
        for part in [b"--setenv".as_slice(), name.as_bytes(), value.as_bytes()] {
            out.extend_from_slice(part);
            out.push(0);
        }
    }
    out
}

/// `data` in an anonymous file (memfd), read from its start by whoever it
/// is handed to; closed on exec unless the child is given it on purpose.
pub(crate) fn data_fd(data: &[u8]) -> io::Result<std::os::fd::OwnedFd> {
    use std::io::{Seek as _, Write as _};
    use std::os::fd::{FromRawFd as _, OwnedFd};
    // SAFETY: a NUL-terminated name; the descriptor is ours alone.
    let fd = unsafe { libc::memfd_create(c"drover-job-env".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: just opened above.
    let mut file = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
    file.write_all(data)?;
    file.rewind()?;
    Ok(file.into())
}

/// Makes the current process's memory, environment and open files
/// unreadable through `/proc` and `ptrace` by other processes of its user
/// (its jobs included); only root may still look. Jobs it starts are
/// unaffected (`execve` resets the flag). For `drover runner` and an
/// embedding app: it changes the whole process.
pub fn harden_process() -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: prctl(PR_SET_DUMPABLE, 0) only changes a flag of this process.
        if unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_job_directory_is_bound_after_what_hides_the_others() {
        let args = bwrap_args(
            Path::new("/w/job_1-1"),
            Path::new("/w"),
            &[PathBuf::from("/s")],
            Path::new("/w/job_1-1/work"),
        );
        let text: Vec<_> = args.iter().map(|a| a.to_string_lossy()).collect();
        let at = |s: &str| text.iter().position(|a| a == s).unwrap();
        assert!(at("--tmpfs") < at("--bind"));
        assert_eq!(text[at("--bind") + 1], "/w/job_1-1");
        assert_eq!(text.last().unwrap(), "--");
        assert!(text.iter().any(|a| a == "--unshare-pid"));
        assert!(text.iter().any(|a| a == "--die-with-parent"));
    }

    #[test]
    fn the_sandbox_capability_replaces_any_claimed_one() {
        let mut prepared = Prepared {
            isolation: Isolation::default(),
            bwrap: None,
            programs: Programs::find(),
            job_user: None,
            containment: Containment::PidNamespace,
            cgroups: None,
        };
        let mut caps = vec!["os=linux".to_owned(), "sandbox=bwrap".to_owned()];
        prepared.announce(&mut caps);
        assert_eq!(caps, ["os=linux", "sandbox=none"]);
        assert_eq!(announced_sandbox(&caps), Some(false));
        prepared.bwrap = Some("/usr/bin/bwrap".into());
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
        assert!(
            names
                .iter()
                .all(|n| ["PATH", "HOME", "TMPDIR", "LANG", "LC_ALL", "TZ"].contains(&n.as_ref()))
        );
    }
}
