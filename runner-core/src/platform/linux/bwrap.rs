//! bubblewrap: the job's filesystem read-only but its own directory, a
//! private `/tmp` and `/dev`, its own PID namespace, no capabilities, and
//! the runner's state and people's files hidden.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};

use crate::isolation::{IsolationError, JobUser};

/// bwrap's path, if it runs here (as the jobs' user): a bwrap that cannot
/// make its namespaces fails every job, so it is refused at start.
pub(super) fn find(user: Option<JobUser>) -> Result<PathBuf, IsolationError> {
    let found = crate::isolation::find_program("bwrap").ok_or(IsolationError::BwrapMissing)?;
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
        .map_err(|e| IsolationError::SandboxBroken(found.clone(), e.to_string()))?;
    if !out.status.success() {
        let said = String::from_utf8_lossy(&out.stderr).trim().to_owned();
        return Err(IsolationError::SandboxBroken(found, said));
    }
    Ok(found)
}

/// Sockets that would let a sandboxed job out (read-only mounts do not stop
/// `connect`); hidden when they exist.
const HOST_SOCKETS: &[&str] = &["/run/docker.sock", "/var/run/docker.sock"];

/// Where people's files and session services are (home directories;
/// `/run/user/<uid>`: the session bus, the keyring, agents' sockets): a
/// sandboxed job finds each empty, as it does the runner user's `HOME`.
const PERSONAL: &[&str] = &["/home", "/root", "/var/home", "/run/user"];

/// bubblewrap's arguments for a job whose directory is `dir` (bound
/// read-write at the same path), under `work_root` (hidden: other jobs'
/// directories are there), with `hidden` paths covered, starting in `cwd`.
pub(super) fn args(dir: &Path, work_root: &Path, hidden: &[PathBuf], cwd: &Path) -> Vec<OsString> {
    let mut a: Vec<OsString> = Vec::new();
    let mut push = |items: &[&OsStr]| a.extend(items.iter().map(|s| s.to_os_string()));
    push(&["--ro-bind".as_ref(), "/".as_ref(), "/".as_ref()]);
    push(&["--dev".as_ref(), "/dev".as_ref()]);
    push(&["--proc".as_ref(), "/proc".as_ref()]);
    push(&["--tmpfs".as_ref(), "/tmp".as_ref()]);
    push(&["--tmpfs".as_ref(), work_root.as_os_str()]);
    let home = crate::isolation::runner_home();
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
pub(super) fn env_args<'a>(env: impl IntoIterator<Item = (&'a OsStr, &'a OsStr)>) -> Vec<u8> {
    let mut out = b"--clearenv\0".to_vec();
    for (name, value) in env {
        for part in [b"--setenv".as_slice(), name.as_bytes(), value.as_bytes()] {
            out.extend_from_slice(part);
            out.push(0);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_job_directory_is_bound_after_what_hides_the_others() {
        let args = args(
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
}
