//! A job's process born inside its cgroup: `clone3` with `CLONE_INTO_CGROUP`
//! (Linux 5.7), then `exec`.
//!
//! Moving a started process into a cgroup (writing `cgroup.procs` between
//! `fork` and `exec`) takes the kernel's `cgroup_threadgroup_rwsem` for
//! writing, which waits for an RCU grace period: about 15 ms on a quiet
//! machine, most of a short job's start (bench/results/cli-2026-12-01.md).
//! A process created in the cgroup takes no such lock.
//!
//! Between `clone3` and `exec` the child shares the runner's memory (on
//! x86_64, as `posix_spawn` does: see `clone_child`) or has a copy of it:
//! either way it makes only raw system calls on memory prepared before, as
//! `std::process` does after its `fork`, and finds the program as `execvp`
//! does. Where `clone3` is refused (a seccomp filter, an old kernel), or a
//! probe at start finds a process cloned into a cgroup does not live, the
//! caller falls back to `std::process` and a move.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::process::ExitStatusExt as _;
use std::path::Path;
use std::process::ExitStatus;

use tokio::io::unix::AsyncFd;
use tokio::net::unix::pipe;

use crate::isolation::{DEFAULT_PATH, JobUser};

// The kernel's values (linux/sched.h); libc's constants of these are
// deprecated (they overflow its c_int).
const CLONE_CLEAR_SIGHAND: u64 = 0x1_0000_0000;
const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

/// What to `exec`, all prepared before the clone (the child allocates nothing).
pub(crate) struct Spec {
    /// Where the program may be, in `execvp`'s order: the name itself if it
    /// has a `/`, else each PATH entry joined to it (relative entries stay
    /// relative: the child has changed directory by then).
    candidates: Vec<CString>,
    argv: Vec<CString>,
    envp: Vec<CString>,
    cwd: CString,
    user: Option<JobUser>,
}

fn cstring(s: &[u8]) -> io::Result<CString> {
    CString::new(s).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
}

impl Spec {
    /// The program, arguments, environment and directory of `cmd` (whose
    /// environment was cleared: only what it sets is passed), with `user`
    /// to become.
    pub fn of(cmd: &std::process::Command, user: Option<JobUser>) -> io::Result<Self> {
        let mut env: Vec<(std::ffi::OsString, std::ffi::OsString)> = Vec::new();
        for (key, value) in cmd.get_envs() {
            env.retain(|(k, _)| k != key);
            if let Some(value) = value {
                env.push((key.to_owned(), value.to_owned()));
            }
        }
        let program = cmd.get_program().as_bytes();
        let candidates = if program.contains(&b'/') {
            vec![cstring(program)?]
        } else {
            let path = env
                .iter()
                .find(|(k, _)| k == "PATH")
                .map_or(DEFAULT_PATH.as_bytes(), |(_, v)| v.as_bytes());
            path.split(|b| *b == b':')
                .map(|dir| match dir {
                    b"" => cstring(program),
                    dir => cstring(&[dir, b"/", program].concat()),
                })
                .collect::<io::Result<_>>()?
        };
        let mut argv = vec![cstring(program)?];
        for arg in cmd.get_args() {
            argv.push(cstring(arg.as_bytes())?);
        }
        let envp = env
            .iter()
            .map(|(k, v)| cstring(&[k.as_bytes(), b"=", v.as_bytes()].concat()))
            .collect::<io::Result<_>>()?;
        let cwd = cmd.get_current_dir().unwrap_or(Path::new("."));
        Ok(Self {
            candidates,
            argv,
            envp,
            cwd: cstring(cwd.as_os_str().as_bytes())?,
            user,
        })
    }
}

/// `clone3` itself was refused: start the job another way.
#[derive(Debug)]
struct CloneRefused(io::Error);

impl std::fmt::Display for CloneRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "clone3: {}", self.0)
    }
}

impl std::error::Error for CloneRefused {}

/// Whether `spawn`'s error is `clone3`'s own (a seccomp filter or an old
/// kernel refused it), not the job's.
pub(crate) fn unsupported(e: &io::Error) -> bool {
    e.get_ref().is_some_and(|inner| inner.is::<CloneRefused>())
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

fn open(path: &std::ffi::CStr, flags: libc::c_int) -> io::Result<OwnedFd> {
    // SAFETY: a NUL-terminated path; the descriptor is ours.
    unsafe {
        let fd = libc::open(path.as_ptr(), flags | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(OwnedFd::from_raw_fd(fd))
    }
}

fn kill(pidfd: &OwnedFd) {
    // SAFETY: a signal sent through our own pidfd reaches that process only.
    unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            libc::SIGKILL,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        );
    }
}

/// Waits for the process of `pidfd` to exit and reaps it (blocking).
fn reap(pidfd: &OwnedFd) -> io::Result<libc::siginfo_t> {
    loop {
        // SAFETY: plain data, filled in by waitid.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: our own child's pidfd.
        let r = unsafe {
            libc::waitid(
                libc::P_PIDFD,
                pidfd.as_raw_fd() as libc::id_t,
                &mut info,
                libc::WEXITED,
            )
        };
        if r == 0 {
            return Ok(info);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Clones a child into the cgroup `cgroup` with `stdio` as its fds 0, 1, 2
/// and execs `spec` there. Returns once the exec happened (or failed: then
/// the child is reaped and its errno returned).
fn clone_exec(spec: &Spec, cgroup: &Path, stdio: [&OwnedFd; 3]) -> io::Result<(i32, OwnedFd)> {
    let cgroup_fd = open(
        &cstring(cgroup.as_os_str().as_bytes())?,
        libc::O_PATH | libc::O_DIRECTORY,
    )?;
    // The child reports a failed exec here; a successful one closes it.
    let (report_r, report_w) = pipe_pair()?;
    let candidates: Vec<*const libc::c_char> = spec.candidates.iter().map(|c| c.as_ptr()).collect();
    let mut argv: Vec<*const libc::c_char> = spec.argv.iter().map(|a| a.as_ptr()).collect();
    argv.push(std::ptr::null());
    // For a file without `#!` (ENOEXEC): `/bin/sh FILE ARGS…`, as execvp does;
    // the child puts the file in slot 1.
    let mut sh_argv: Vec<*const libc::c_char> = vec![c"/bin/sh".as_ptr(), std::ptr::null()];
    sh_argv.extend(&argv[1..]);
    let mut envp: Vec<*const libc::c_char> = spec.envp.iter().map(|e| e.as_ptr()).collect();
    envp.push(std::ptr::null());
    let mut pidfd: libc::c_int = -1;
    // SAFETY: clone_args is plain data; zero is "unset" for every field.
    let mut args: libc::clone_args = unsafe { std::mem::zeroed() };
    args.flags = libc::CLONE_PIDFD as u64 | CLONE_INTO_CGROUP | CLONE_CLEAR_SIGHAND;
    args.pidfd = &raw mut pidfd as u64;
    args.exit_signal = libc::SIGCHLD as u64;
    args.cgroup = cgroup_fd.as_raw_fd() as u64;
    let mut born = Child {
        spec,
        exec: Exec {
            candidates: &candidates,
            argv: &argv,
            sh_argv: &mut sh_argv,
            envp: &envp,
        },
        stdio,
        report: &report_w,
    };
    // SAFETY: see `clone_child`.
    let pid = unsafe { clone_child(&mut args, &mut born) };
    if pid < 0 {
        return Err(io::Error::other(CloneRefused(io::Error::last_os_error())));
    }
    // SAFETY: clone3 wrote the new process's pidfd, ours to own.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd) };
    drop(report_w);
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
        // The exec failed and the child exits at once: reap it.
        let _ = reap(&pidfd);
        return Err(match read {
            4 => io::Error::from_raw_os_error(i32::from_ne_bytes(errno)),
            _ => io::Error::other("the job's process failed before exec"),
        });
    }
    Ok((pid as i32, pidfd))
}

/// Everything the child needs, made before the clone.
struct Child<'a> {
    spec: &'a Spec,
    exec: Exec<'a>,
    stdio: [&'a OwnedFd; 3],
    report: &'a OwnedFd,
}

/// The child's own stack (see `clone_child`): a few calls, then exec.
#[cfg(target_arch = "x86_64")]
const CHILD_STACK: usize = 64 * 1024;

/// `clone3` with `args`, the child running `child` on `born`; the child's
/// pid (0 is never returned here), or -1 with errno set.
///
/// On x86_64 the child shares this memory and runs on a stack of its own
/// while this thread waits for its exec (`CLONE_VM | CLONE_VFORK`, as
/// `posix_spawn` does): no copy of the runner's page tables, and none of
/// the copy-on-write faults that a copy costs the runner afterwards on
/// every page it writes (about 100 a job, bench/cli.py). Elsewhere, fork
/// semantics: the child runs on a copy of this memory.
///
/// # Safety
/// `args` is filled in but for `stack`, `stack_size` and the two flags
/// this sets; `born` outlives the call.
unsafe fn clone_child(args: &mut libc::clone_args, born: &mut Child) -> libc::c_long {
    #[cfg(target_arch = "x86_64")]
    {
        let mut stack = Box::<[u128]>::new_uninit_slice(CHILD_STACK / 16);
        args.flags |= libc::CLONE_VM as u64 | libc::CLONE_VFORK as u64;
        args.stack = stack.as_mut_ptr() as u64;
        args.stack_size = CHILD_STACK as u64;
        let ret: libc::c_long;
        // SAFETY: the child starts on the top of `stack` (16-byte aligned,
        // as a call needs), calls `child_entry` with `born` (which never
        // returns) and never comes back here; this thread goes on only
        // once the child has exec'd or exited, so `stack` and `born` live
        // as long as it runs. Memory is not declared untouched: the child
        // writes the report and errno.
        unsafe {
            std::arch::asm!(
                "syscall",
                "test rax, rax",
                "jnz 2f",
                "xor ebp, ebp",
                "mov rdi, r9",
                "call r8",
                "ud2",
                "2:",
                inlateout("rax") libc::SYS_clone3 => ret,
                in("rdi") &raw mut *args,
                in("rsi") std::mem::size_of::<libc::clone_args>(),
                in("r8") child_entry as extern "C" fn(*mut Child) -> !,
                in("r9") &raw mut *born,
                lateout("rcx") _,
                lateout("r11") _,
            );
        }
        drop(stack);
        if ret < 0 {
            // SAFETY: errno of this thread, as libc's wrapper sets it.
            unsafe { *libc::__errno_location() = -ret as i32 };
            return -1;
        }
        ret
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let size = std::mem::size_of::<libc::clone_args>();
        // SAFETY: fork semantics (no CLONE_VM, no stack): the child runs on a
        // copy of this memory and only makes raw system calls before exec.
        let pid = unsafe { libc::syscall(libc::SYS_clone3, &raw mut *args, size) };
        if pid == 0 {
            child_entry(born)
        }
        pid
    }
}

/// The child's first frame.
extern "C" fn child_entry(born: *mut Child) -> ! {
    // SAFETY: `clone_child` passes its `born`, alive until the exec; only
    // the child of `clone3` runs this.
    unsafe {
        let born = &mut *born;
        child(born.spec, &mut born.exec, born.stdio, born.report)
    }
}

/// What the child execs, as pointers into memory made before the clone.
struct Exec<'a> {
    candidates: &'a [*const libc::c_char],
    argv: &'a [*const libc::c_char],
    sh_argv: &'a mut [*const libc::c_char],
    envp: &'a [*const libc::c_char],
}

/// The child between `clone3` and `exec`: its own process group, its
/// standard streams, its directory, its user; signals as a new process has
/// them; then each candidate in turn, with `execvp`'s rules. On failure it
/// reports the errno and exits 127.
///
/// # Safety
/// Only in the child of `clone3`, before exec.
unsafe fn child(
    spec: &Spec,
    exec: &mut Exec,
    [stdin, out, err]: [&OwnedFd; 3],
    report: &OwnedFd,
) -> ! {
    // SAFETY: raw system calls on descriptors and memory made before the clone.
    unsafe {
        let errno = || *libc::__errno_location();
        let fail = |errno: i32| -> ! {
            let bytes = errno.to_ne_bytes();
            libc::write(report.as_raw_fd(), bytes.as_ptr().cast(), 4);
            libc::_exit(127)
        };
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        if libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut()) != 0
            || libc::signal(libc::SIGPIPE, libc::SIG_DFL) == libc::SIG_ERR
            || libc::setpgid(0, 0) != 0
            || libc::dup2(stdin.as_raw_fd(), 0) < 0
            || libc::dup2(out.as_raw_fd(), 1) < 0
            || libc::dup2(err.as_raw_fd(), 2) < 0
            || libc::chdir(spec.cwd.as_ptr()) != 0
        {
            fail(errno());
        }
        // Raw: glibc's setuid would signal the parent's other threads,
        // which this copy does not have.
        if let Some(user) = spec.user
            && (libc::syscall(libc::SYS_setgroups, 0, std::ptr::null::<libc::gid_t>()) != 0
                || libc::syscall(libc::SYS_setgid, user.gid) != 0
                || libc::syscall(libc::SYS_setuid, user.uid) != 0)
        {
            fail(errno());
        }
        let mut denied = false;
        for &file in exec.candidates {
            libc::execve(file, exec.argv.as_ptr(), exec.envp.as_ptr());
            match errno() {
                libc::ENOEXEC => {
                    exec.sh_argv[1] = file;
                    libc::execve(exec.sh_argv[0], exec.sh_argv.as_ptr(), exec.envp.as_ptr());
                    fail(errno());
                }
                libc::EACCES => denied = true,
                libc::ENOENT | libc::ENOTDIR | libc::ENODEV | libc::ETIMEDOUT | libc::ESTALE => {}
                other => fail(other),
            }
        }
        fail(if denied { libc::EACCES } else { libc::ENOENT })
    }
}

/// Whether a process cloned into `cgroup` lives here: some kernels kill a
/// process cloned into a cgroup whose kill count differs from its parent's.
/// Runs `true` there, blocking.
pub(crate) fn probe(cgroup: &Path) -> bool {
    let run = || -> io::Result<bool> {
        let mut cmd = std::process::Command::new("true");
        cmd.env_clear().env("PATH", DEFAULT_PATH);
        let spec = Spec::of(&cmd, None)?;
        let null = open(c"/dev/null", libc::O_RDWR)?;
        let (_, pidfd) = clone_exec(&spec, cgroup, [&null, &null, &null])?;
        let info = reap(&pidfd)?;
        // SAFETY: waitid filled in a SIGCHLD siginfo.
        let (code, status) = unsafe { (info.si_code, info.si_status()) };
        Ok(code == libc::CLD_EXITED && status == 0)
    };
    run().unwrap_or(false)
}

/// A job's process started by [`spawn`]: its pid (and process group), a
/// pidfd to wait on, and its output.
pub(crate) struct Born {
    pid: i32,
    /// Taken by `Drop` (which reaps off this thread when never waited for).
    pidfd: Option<AsyncFd<OwnedFd>>,
    status: Option<ExitStatus>,
    pub stdout: Option<pipe::Receiver>,
    pub stderr: Option<pipe::Receiver>,
}

/// Starts `spec` in its own process group inside the cgroup `cgroup`, with
/// stdin from /dev/null and stdout and stderr piped.
pub(crate) fn spawn(spec: &Spec, cgroup: &Path) -> io::Result<Born> {
    let null = open(c"/dev/null", libc::O_RDONLY)?;
    let (out_r, out_w) = pipe_pair()?;
    let (err_r, err_w) = pipe_pair()?;
    let (pid, pidfd) = clone_exec(spec, cgroup, [&null, &out_w, &err_w])?;
    drop((null, out_w, err_w));
    // SAFETY: the pidfd is owned here and closed only when this drops.
    let registered =
        unsafe { AsyncFd::register_with_interest(pidfd, tokio::io::Interest::READABLE) };
    let pidfd = match registered {
        Ok(pidfd) => pidfd,
        Err(e) => {
            // Started but not to be watched: it must not run on unwatched.
            let (pidfd, e) = e.into_parts();
            kill(&pidfd);
            let _ = reap(&pidfd);
            return Err(e);
        }
    };
    // From here, a failure drops `born`, which kills and reaps the job.
    let mut born = Born {
        pid,
        pidfd: Some(pidfd),
        status: None,
        stdout: None,
        stderr: None,
    };
    born.stdout = Some(pipe::Receiver::from_owned_fd(out_r)?);
    born.stderr = Some(pipe::Receiver::from_owned_fd(err_r)?);
    Ok(born)
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
            let pidfd = self.pidfd.as_ref().expect("taken only on drop");
            let mut ready = pidfd.readable().await?;
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
    /// As `kill_on_drop`: a job whose runner stopped waiting is killed (by
    /// its pidfd, so never another process), and reaped off this thread.
    fn drop(&mut self) {
        if let (None, Some(pidfd)) = (self.status, self.pidfd.take()) {
            let pidfd = pidfd.into_inner();
            kill(&pidfd);
            std::thread::spawn(move || {
                let _ = reap(&pidfd);
            });
        }
    }
}
