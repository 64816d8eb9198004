//! The seam between the runner and the operating system: how a job's
//! process is started, kept together, stopped and waited for, what a host
//! offers to sandbox it, and the few facts about the host the runner needs.
//! One module per system, chosen at compile time, each with the same items:
//!
//! - `linux`: its own process group, and its own cgroup where the runner
//!   may make one (born in it by `clone3`), or bubblewrap and a PID
//!   namespace; the job's env handed to a launcher on a memfd;
//! - `macos`: its own process group (`killpg`), and `sandbox-exec` with a
//!   profile made for the job;
//! - `windows`: a Job Object per job (`KILL_ON_JOB_CLOSE`), `CTRL_BREAK_EVENT`
//!   to its process group, `cmd.exe` for scripts; no sandbox;
//! - `unix`: what Linux and macOS share (signals, users, exit statuses).
//!
//! The items, in each system's module:
//! - `Jobs`: what the host keeps a job's processes together with, found
//!   once by `jobs(sandboxed)`, with the `Containment` it gives;
//! - `find_sandbox(sandbox, user)`: the sandbox program, checked, or why not;
//! - `shell()`: what runs a `script` job; `script(shell, text, dir)`: its
//!   program and arguments;
//! - `EnvFd` and `container_env(command, env)`: how `docker run` gets
//!   the job's env without it on a command line (off Linux, here);
//! - `sandboxed(program, place, job program, args, env)`: the job's
//!   command inside the sandbox;
//! - `start(launch, jobs)`: the job's `Process`, a [`JobProcess`];
//! - `look_up(user)`, `harden_process()`, `default_work_root()`,
//!   `hostname()`, `is_program(path)`.
//!
//! No call that only one system has is made outside its module.

use std::io;
use std::process::ExitStatus;

use tokio::io::AsyncRead;

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
pub(crate) use linux::*;

#[cfg(target_os = "macos")]
mod macos;
#[cfg(target_os = "macos")]
pub(crate) use macos::*;

#[cfg(unix)]
mod unix;

#[cfg(windows)]
mod windows;
#[cfg(windows)]
pub(crate) use windows::*;

/// The user jobs run as, looked up once (Linux and macOS).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobUser {
    pub uid: u32,
    pub gid: u32,
}

/// A job's command as `exec` built it, for the system's `start`. (Only
/// Linux has a launcher reading a descriptor, or a sandbox whose program
/// must not be signalled; Windows has no job user.)
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub(crate) struct Launch {
    pub cmd: tokio::process::Command,
    /// For a launcher (bwrap, docker on Linux): the job's env, handed to it
    /// as descriptor 3.
    pub env_fd: Option<EnvFd>,
    /// The user the job becomes (never for a container: Docker isolates it).
    pub user: Option<JobUser>,
    /// Started by a sandbox program, whose end is the sandbox's.
    pub sandboxed: bool,
    /// What "could not start …" names.
    pub program: String,
}

/// Off Linux no launcher reads the job's env from a descriptor.
#[cfg(not(target_os = "linux"))]
pub(crate) enum EnvFd {}

/// `docker run -e NAME` for each (off Linux): docker takes each value from
/// its own environment, where it is set, so no value is on a command line.
#[cfg(not(target_os = "linux"))]
pub(crate) fn container_env<'a>(
    c: &mut tokio::process::Command,
    env: impl Iterator<Item = (&'a std::ffi::OsStr, &'a std::ffi::OsStr)>,
) -> Result<Option<EnvFd>, String> {
    for (name, value) in env {
        c.arg("-e").arg(name).env(name, value);
    }
    Ok(None)
}

/// One of a job's output streams.
pub(crate) type Pipe = Box<dyn AsyncRead + Unpin + Send>;

/// What a system's `start` returns: a job's running process and everything
/// it started, which the runner can stop gently, kill, and wait for.
#[allow(async_fn_in_trait)]
pub(crate) trait JobProcess {
    /// Its stdout and stderr (once).
    fn output(&mut self) -> (Pipe, Pipe);
    /// Waits for it to exit and reaps it. Cancel-safe.
    async fn wait(&mut self) -> io::Result<ExitStatus>;
    /// Asks the job to stop: SIGTERM to its group, or CTRL_BREAK.
    fn interrupt(&self);
    /// Kills the job and whatever it started that is still together with it.
    fn kill(&self);
    /// After it exited: kills what is left of it, and says what could not
    /// be killed. `jobs` is what [`start`] was given.
    async fn end(self, jobs: &Jobs) -> Option<String>;
    /// Its exit status as a number: the code, or 128 + a signal.
    fn exit_code(status: ExitStatus) -> i32;
}
