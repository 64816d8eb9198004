//! What Linux and macOS share: process groups and signals, the user a job
//! runs as, exit statuses, scripts under `sh`, and the host's name.

use std::ffi::OsString;
use std::io;
use std::os::unix::process::ExitStatusExt as _;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;

use crate::isolation::{IsolationError, JobUser};

pub(crate) fn signal_group(pgid: i32, signal: i32) {
    // SAFETY: kill(2) with a negative pid signals the process group we made;
    // it has no memory-safety preconditions.
    unsafe {
        libc::kill(-pgid, signal);
    }
}

/// The code, or 128 + the signal that ended it, as a shell says.
pub(crate) fn exit_code(status: ExitStatus) -> i32 {
    status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
}

/// `sh`, found on the runner's `PATH` when it started.
pub(crate) fn shell() -> PathBuf {
    crate::isolation::find_program("sh").unwrap_or_else(|| "/bin/sh".into())
}

/// A script job: `sh -c SCRIPT`.
pub(crate) fn script(
    shell: &Path,
    script: &str,
    _dir: &Path,
) -> io::Result<(OsString, Vec<OsString>)> {
    Ok((shell.into(), vec!["-c".into(), script.into()]))
}

/// Whether `path` is a file this process may run.
pub(crate) fn is_program(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// `drover-work-<uid>` in the temporary directory: each user's runners
/// their own (`workdir::own_work_root` refuses one of another user's).
pub(crate) fn default_work_root() -> PathBuf {
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    std::env::temp_dir().join(format!("drover-work-{uid}"))
}

/// The host's name as the system has it.
pub(crate) fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname NUL-terminates
    // within it or truncates.
    let ok = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } == 0;
    if !ok {
        return String::new();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// The user `name`, who jobs will run as; the runner must be root.
pub(crate) fn look_up(name: &str) -> Result<JobUser, IsolationError> {
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
/// calls: this runs between `fork` and `exec`.
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
