//! A job's process born inside its cgroup: `clone3` with `CLONE_INTO_CGROUP`
//! (Linux 5.7), then `exec`.
//!
//! Moving a started process into a cgroup (writing `cgroup.procs` between
//! `fork` and `exec`) takes the kernel's `cgroup_threadgroup_rwsem` for
//! writing, which waits for an RCU grace period: about 15 ms on a quiet
//! machine, most of a short job's start (bench/results/cli-2026-12-01.md).
//! A process created in the cgroup takes no such lock.
//!
//! Between `clone3` and `exec` the child is a copy of a multi-threaded
//! process: it makes only raw system calls on memory prepared before, as
//! `std::process` does after its `fork`. Where `clone3` is refused (a
//! seccomp filter, an old kernel) the caller falls back to `std::process`
//! and a move.

use std::ffi::{CString, OsStr};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::process::ExitStatusExt as _;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;

use tokio::io::unix::AsyncFd;
use tokio::net::unix::pipe;

use crate::isolation::JobUser;

// The kernel's values (linux/sched.h); libc's constants of these are
// deprecated (they overflow its c_int).
const CLONE_CLEAR_SIGHAND: u64 = 0x1_0000_0000;
const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

/// Where PATH is not set, as `std::process` searches.
const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// What to `exec`, all prepared before the clone (the child allocates nothing).
pub(crate) struct Spec {
    program: CString,
    argv: Vec<CString>,
    envp: Vec<CString>,
    cwd: CString,
    user: Option<JobUser>,
}

fn cstring(s: &OsStr) -> io::Result<CString> {
    CString::new(s.as_bytes()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
}

impl Spec {
    /// The program, arguments, environment and directory of `cmd`, with
    /// `user` to become. `inherits_env`: whether `cmd` starts from this
    /// process's environment (else from none, after `env_clear`); a
    /// `Command` does not say which.
    pub fn of(
        cmd: &std::process::Command,
        inherits_env: bool,
        user: Option<JobUser>,
    ) -> io::Result<Self> {
        let mut env: Vec<(std::ffi::OsString, std::ffi::OsString)> = match inherits_env {
            true => std::env::vars_os().collect(),
            false => Vec::new(),
        };
        for (key, value) in cmd.get_envs() {
            env.retain(|(k, _)| k != key);
            if let Some(value) = value {
                env.push((key.to_owned(), value.to_owned()));
            }
        }
        let path = env
            .iter()
            .find(|(k, _)| k == "PATH")
            .map_or_else(|| DEFAULT_PATH.into(), |(_, v)| v.clone());
        let program = resolve(cmd.get_program(), &path)?;
        let mut argv = vec![cstring(cmd.get_program())?];
        for arg in cmd.get_args() {
            argv.push(cstring(arg)?);
        }
        let envp = env
            .iter()
            .map(|(k, v)| {
                let mut kv = k.as_bytes().to_vec();
                kv.push(b'=');
                kv.extend_from_slice(v.as_bytes());
                CString::new(kv).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
            })
            .collect::<io::Result<_>>()?;
        let cwd = cstring(cmd.get_current_dir().unwrap_or(Path::new(".")).as_os_str())?;
        Ok(Self {
            program: cstring(program.as_os_str())?,
            argv,
            envp,
            cwd,
            user,
        })
    }
}

/// `program` as `execvp` would find it on `path` (the child's PATH).
fn resolve(program: &OsStr, path: &OsStr) -> io::Result<PathBuf> {
    use std::os::unix::fs::PermissionsExt as _;
    if program.as_bytes().contains(&b'/') {
        return Ok(PathBuf::from(program));
    }
    std::env::split_paths(path)
        .map(|dir| dir.join(program))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
        .ok_or_else(|| io::Error::from_raw_os_error(libc::ENOENT))
}

/// A job's process started by [`spawn`]: its pid (and process group), a
/// pidfd to wait on, and its output.
pub(crate) struct Born {
    pid: i32,
    pidfd: AsyncFd<OwnedFd>,
    status: Option<ExitStatus>,
    pub stdout: Option<pipe::Receiver>,
    pub stderr: Option<pipe::Receiver>,
}

fn pipe_pair() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors pipe2 writes.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both were just opened and are ours alone.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Whether `spawn`'s error is `clone3`'s own (a seccomp filter or an old
/// kernel refused it: start the job another way), not the job's.
pub(crate) fn unsupported(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::Unsupported
}

/// Starts `spec` in its own process group inside the cgroup `cgroup`, with
/// stdin from /dev/null and stdout and stderr piped.
pub(crate) fn spawn(spec: &Spec, cgroup: &Path) -> io::Result<Born> {
    let dir = cstring(cgroup.as_os_str())?;
    // SAFETY: a NUL-terminated path; the descriptor is ours.
    let cgroup_fd = unsafe {
        let fd = libc::open(
            dir.as_ptr(),
            libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
        );
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        OwnedFd::from_raw_fd(fd)
    };
    // SAFETY: as above.
    let null = unsafe {
        let fd = libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        OwnedFd::from_raw_fd(fd)
    };
    let (out_r, out_w) = pipe_pair()?;
    let (err_r, err_w) = pipe_pair()?;
    // The child reports a failed exec here; a successful one closes it.
    let (report_r, report_w) = pipe_pair()?;

    let mut argv: Vec<*const libc::c_char> = spec.argv.iter().map(|a| a.as_ptr()).collect();
    argv.push(std::ptr::null());
    let mut envp: Vec<*const libc::c_char> = spec.envp.iter().map(|e| e.as_ptr()).collect();
    envp.push(std::ptr::null());
    let mut pidfd: libc::c_int = -1;
    // SAFETY: clone_args is plain data; zero is "unset" for every field.
    let mut args: libc::clone_args = unsafe { std::mem::zeroed() };
    args.flags = libc::CLONE_PIDFD as u64 | CLONE_INTO_CGROUP | CLONE_CLEAR_SIGHAND;
    args.pidfd = &raw mut pidfd as u64;
    args.exit_signal = libc::SIGCHLD as u64;
    args.cgroup = cgroup_fd.as_raw_fd() as u64;

    // SAFETY: fork semantics (no CLONE_VM, no stack): the child runs on a
    // copy of this memory and only makes raw system calls before exec.
    let pid = unsafe {
        libc::syscall(
            libc::SYS_clone3,
            &raw mut args,
            std::mem::size_of::<libc::clone_args>(),
        )
    };
    if pid == 0 {
        // SAFETY: the child; see `child`.
        unsafe { child(spec, &argv, &envp, [&null, &out_w, &err_w], &report_w) }
    }
    if pid < 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!("clone3: {e}"),
        ));
    }
    let pid = pid as i32;
    // SAFETY: clone3 wrote the new process's pidfd, ours to own.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd) };
    drop((null, out_w, err_w, report_w, cgroup_fd));
    let mut errno = [0u8; 4];
    // A blocking read, as `std::process::Command::spawn` does: it ends at
    // the child's exec (the pipe closes) or with its report.
    let read = loop {
        // SAFETY: reading into our own 4-byte buffer.
        let n = unsafe { libc::read(report_r.as_raw_fd(), errno.as_mut_ptr().cast(), 4) };
        if n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
            continue;
        }
        break n;
    };
    if read != 0 {
        // The exec failed: reap the child, which exited at once.
        let mut status = 0;
        // SAFETY: our own child.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        return Err(match read {
            4 => io::Error::from_raw_os_error(i32::from_ne_bytes(errno)),
            _ => io::Error::other("the job's process failed before exec"),
        });
    }
    Ok(Born {
        pid,
        // SAFETY: the pidfd is owned here and closed only when this drops.
        pidfd: unsafe { AsyncFd::register_with_interest(pidfd, tokio::io::Interest::READABLE)? },
        status: None,
        stdout: Some(pipe::Receiver::from_owned_fd(out_r)?),
        stderr: Some(pipe::Receiver::from_owned_fd(err_r)?),
    })
}

/// The child between `clone3` and `exec`: its own process group, its
/// standard streams, its directory, its user; signals as a new process has
/// them. On any failure it reports the errno and exits 127.
///
/// # Safety
/// Only in the child of `clone3`, before exec.
unsafe fn child(
    spec: &Spec,
    argv: &[*const libc::c_char],
    envp: &[*const libc::c_char],
    [null, out, err]: [&OwnedFd; 3],
    report: &OwnedFd,
) -> ! {
    // SAFETY: raw system calls on descriptors and memory made before the clone.
    unsafe {
        let fail = || -> ! {
            let errno = *libc::__errno_location();
            let bytes = errno.to_ne_bytes();
            libc::write(report.as_raw_fd(), bytes.as_ptr().cast(), 4);
            libc::_exit(127)
        };
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        if libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut()) != 0
            || libc::signal(libc::SIGPIPE, libc::SIG_DFL) == libc::SIG_ERR
            || libc::setpgid(0, 0) != 0
            || libc::dup2(null.as_raw_fd(), 0) < 0
            || libc::dup2(out.as_raw_fd(), 1) < 0
            || libc::dup2(err.as_raw_fd(), 2) < 0
            || libc::chdir(spec.cwd.as_ptr()) != 0
        {
            fail();
        }
        // Raw: glibc's setuid would signal the parent's other threads,
        // which this copy does not have.
        if let Some(user) = spec.user
            && (libc::syscall(libc::SYS_setgroups, 0, std::ptr::null::<libc::gid_t>()) != 0
                || libc::syscall(libc::SYS_setgid, user.gid) != 0
                || libc::syscall(libc::SYS_setuid, user.uid) != 0)
        {
            fail();
        }
        libc::execve(spec.program.as_ptr(), argv.as_ptr(), envp.as_ptr());
        fail()
    }
}

impl Born {
    pub fn id(&self) -> u32 {
        self.pid as u32
    }

    /// Waits for the process to exit and reaps it. Cancel-safe.
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        loop {
            if let Some(status) = self.status {
                return Ok(status);
            }
            let mut ready = self.pidfd.readable().await?;
            let mut status = 0;
            // SAFETY: our own child, not yet reaped (`status` is unset).
            match unsafe { libc::waitpid(self.pid, &mut status, libc::WNOHANG) } {
                0 => ready.clear_ready(),
                n if n == self.pid => self.status = Some(ExitStatus::from_raw(status)),
                _ => return Err(io::Error::last_os_error()),
            }
        }
    }
}

impl Drop for Born {
    /// As `kill_on_drop`: a job whose runner stopped waiting is killed, and
    /// reaped off this thread.
    fn drop(&mut self) {
        if self.status.is_none() {
            let pid = self.pid;
            // SAFETY: our own child, not yet reaped, so the pid is still its.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            std::thread::spawn(move || {
                let mut status = 0;
                // SAFETY: as above.
                unsafe { libc::waitpid(pid, &mut status, 0) };
            });
        }
    }
}
