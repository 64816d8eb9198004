//! Linux: each job in its own process group and, where the runner may make
//! them, its own cgroup (born in it by `clone3`, see `spawn`), killed whole
//! when the job ends; or under bubblewrap, in its own PID namespace. A
//! launcher (bwrap, docker) reads the job's env from a memfd.

mod bwrap;
mod cgroup;
mod spawn;

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd as _, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::Arc;

use tokio::process::Command;

use self::cgroup::{JobCgroup, JobCgroups};
use super::unix::signal_group;
pub(crate) use super::unix::{default_work_root, hostname, is_program, look_up, script, shell};
use super::{JobProcess, Launch, Pipe};
use crate::exec::Place;
use crate::isolation::{Containment, IsolationError, JobUser, Sandbox};

/// What keeps a job's processes together besides its process group.
#[derive(Debug)]
pub(crate) struct Jobs {
    cgroups: Option<JobCgroups>,
}

/// A sandboxed job is kept together by its PID namespace; another by a
/// cgroup where the runner may make them, else only by its process group.
pub(crate) fn jobs(sandboxed: bool) -> (Jobs, Containment) {
    if sandboxed {
        return (Jobs { cgroups: None }, Containment::PidNamespace);
    }
    match JobCgroups::new() {
        Ok(c) => (Jobs { cgroups: Some(c) }, Containment::Cgroup),
        Err(why) => (Jobs { cgroups: None }, Containment::ProcessGroup { why }),
    }
}

pub(crate) fn find_sandbox(
    sandbox: Sandbox,
    user: Option<JobUser>,
) -> Result<Option<PathBuf>, IsolationError> {
    match sandbox {
        Sandbox::None => Ok(None),
        Sandbox::Bwrap => bwrap::find(user).map(Some),
        Sandbox::SandboxExec => Err(IsolationError::NotHere("sandbox-exec", "macOS")),
    }
}

/// The job's env in an anonymous file (memfd), read from its start by the
/// launcher it is handed to as descriptor 3.
pub(crate) type EnvFd = OwnedFd;

/// The descriptor a job's launcher reads the job's environment from
/// (bwrap's `--args 3`, docker's `--env-file /dev/fd/3`).
const ENV_FD: i32 = 3;

fn data_fd(data: &[u8]) -> Result<EnvFd, String> {
    use std::io::{Seek as _, Write as _};
    use std::os::fd::FromRawFd as _;
    let made = || -> io::Result<OwnedFd> {
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
    };
    made().map_err(|e| format!("could not pass the job its env: {e}"))
}

/// `docker run`'s arguments that give the container `env`: a file of
/// `NAME=value` lines only docker reads.
pub(crate) fn container_env<'a>(
    c: &mut Command,
    env: impl Iterator<Item = (&'a OsStr, &'a OsStr)>,
) -> Result<Option<EnvFd>, String> {
    use std::os::unix::ffi::OsStrExt as _;
    let mut file = Vec::new();
    for (k, v) in env {
        file.extend_from_slice(k.as_bytes());
        file.push(b'=');
        file.extend_from_slice(v.as_bytes());
        file.push(b'\n');
    }
    c.arg("--env-file").arg(format!("/dev/fd/{ENV_FD}"));
    data_fd(&file).map(Some)
}

/// The job's `program args` under bubblewrap, which runs with no
/// environment at all: the job's is applied inside the sandbox, read from
/// a descriptor.
pub(crate) fn sandboxed<'a>(
    bwrap: &Path,
    place: &Place,
    program: &OsStr,
    args: &[OsString],
    env: impl Iterator<Item = (&'a OsStr, &'a OsStr)>,
) -> Result<(Command, Option<EnvFd>), String> {
    let work = place.dir.join("work");
    let mut c = Command::new(bwrap);
    c.env_clear()
        .arg("--args")
        .arg(ENV_FD.to_string())
        .args(bwrap::args(
            place.dir,
            place.work_root,
            &place.isolation.isolation.hidden,
            &work,
        ))
        .arg(program)
        .args(args);
    Ok((c, Some(data_fd(&bwrap::env_args(env))?)))
}

/// A job's process: born in its cgroup, or started by `tokio::process`.
enum Child {
    Born(spawn::Born),
    Started(tokio::process::Child),
}

pub(crate) struct Process {
    child: Child,
    pgid: Option<i32>,
    /// The group's leader is bwrap: a SIGTERM would end the sandbox.
    spare_leader: bool,
    cgroup: Option<Arc<JobCgroup>>,
}

/// Starts the job in its own process group, in its cgroup if there is one.
pub(crate) async fn start(launch: Launch, jobs: &Jobs) -> Result<Process, String> {
    let Launch {
        mut cmd,
        env_fd,
        user,
        sandboxed,
        program,
    } = launch;
    let could_not_start = |e: io::Error| format!("could not start {program:?}: {e}");
    let cgroups = jobs.cgroups.as_ref();
    let cgroup = match cgroups.map(JobCgroups::take).transpose() {
        Ok(c) => c.map(Arc::new),
        Err(e) => return Err(format!("cannot make the job's cgroup: {e}")),
    };
    // Nothing runs in it: kept for the next job.
    let give_back = async |cgroup: Option<Arc<JobCgroup>>| {
        if let (Some(cgroups), Some(cgroup)) =
            (cgroups, cgroup.and_then(|c| Arc::try_unwrap(c).ok()))
        {
            let _ = cgroups.end(cgroup).await;
        }
    };
    cmd.process_group(0);
    // (A launcher given the job's env on a descriptor is started the plain
    // way, which can hand it over.)
    if let (Some(cgroups), Some(into), None) = (cgroups, &cgroup, &env_fd)
        && cgroups.clone_into()
    {
        let born =
            spawn::Spec::of(cmd.as_std(), user).and_then(|spec| spawn::spawn(&spec, into.dir()));
        match born {
            Ok(born) => {
                let pgid = Some(born.id() as i32);
                return Ok(Process {
                    child: Child::Born(born),
                    pgid,
                    spare_leader: sandboxed,
                    cgroup,
                });
            }
            // Refused here: started, then moved into its cgroup, from now on.
            Err(e) if spawn::unsupported(&e) => cgroups.clone_refused(),
            Err(e) => {
                give_back(cgroup).await;
                return Err(could_not_start(e));
            }
        }
    }
    let env_raw = env_fd.as_ref().map(|fd| fd.as_raw_fd());
    if cgroup.is_some() || user.is_some() || env_raw.is_some() {
        let cgroup = cgroup.clone();
        // SAFETY: join_self, become_user and hand_over only make
        // async-signal-safe calls.
        unsafe {
            cmd.pre_exec(move || {
                if let Some(cgroup) = &cgroup {
                    cgroup.join_self()?;
                }
                if let Some(fd) = env_raw {
                    hand_over(fd)?;
                }
                if let Some(user) = user {
                    super::unix::become_user(user)?;
                }
                Ok(())
            });
        }
    }
    let started = cmd.spawn();
    // Ours closes once the child has its copy; the command's reference to
    // the cgroup goes with it.
    drop((env_fd, cmd));
    match started {
        Ok(child) => Ok(Process {
            pgid: child.id().map(|p| p as i32),
            child: Child::Started(child),
            spare_leader: sandboxed,
            cgroup,
        }),
        Err(e) => {
            give_back(cgroup).await;
            Err(could_not_start(e))
        }
    }
}

/// In the child, between fork and exec: `fd` becomes [`ENV_FD`], open
/// across the exec. Async-signal-safe.
fn hand_over(fd: i32) -> io::Result<()> {
    // SAFETY: plain system calls on descriptors of this (forked) process.
    let ok = unsafe {
        if fd == ENV_FD {
            libc::fcntl(fd, libc::F_SETFD, 0) == 0
        } else {
            libc::dup2(fd, ENV_FD) == ENV_FD
        }
    };
    if ok {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

impl JobProcess for Process {
    fn output(&mut self) -> (Pipe, Pipe) {
        match &mut self.child {
            Child::Born(b) => (
                Box::new(b.stdout.take().expect("piped")),
                Box::new(b.stderr.take().expect("piped")),
            ),
            Child::Started(c) => (
                Box::new(c.stdout.take().expect("piped")),
                Box::new(c.stderr.take().expect("piped")),
            ),
        }
    }

    async fn wait(&mut self) -> io::Result<ExitStatus> {
        match &mut self.child {
            Child::Born(b) => b.wait().await,
            Child::Started(c) => c.wait().await,
        }
    }

    fn interrupt(&self) {
        match self.pgid {
            Some(pgid) if self.spare_leader => signal_group_but_leader(pgid, libc::SIGTERM),
            Some(pgid) => signal_group(pgid, libc::SIGTERM),
            None => {}
        }
    }

    fn kill(&self) {
        if let Some(pgid) = self.pgid {
            signal_group(pgid, libc::SIGKILL);
        }
    }

    /// What left the group, in the job's cgroup. (In a sandbox, the kernel
    /// has killed its PID namespace when bwrap's init ended.)
    async fn end(self, jobs: &Jobs) -> Option<String> {
        self.kill();
        let (Some(cgroups), Some(cgroup)) = (&jobs.cgroups, self.cgroup) else {
            return None;
        };
        // The spawned command held the other reference; it is gone by now.
        let cgroup = Arc::try_unwrap(cgroup).ok()?;
        cgroups.end(cgroup).await.err().map(|e| e.to_string())
    }

    fn exit_code(status: ExitStatus) -> i32 {
        super::unix::exit_code(status)
    }
}

/// Signals every process of group `pgid` but its leader. A sandboxed job's
/// leader is bwrap, which would die of a SIGTERM and take the sandbox with
/// it, cutting the job's grace short; the job itself is in the group too.
/// The group is stopped meanwhile, so no process it starts escapes the
/// signal while `/proc` is read.
fn signal_group_but_leader(pgid: i32, signal: i32) {
    signal_group(pgid, libc::SIGSTOP);
    let pids: Vec<i32> = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .filter(|pid| *pid != pgid)
        .collect();
    for pid in pids {
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // `pid (comm) state ppid pgrp …`; comm may hold anything but `)` ends it last.
        let group = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(2)?.parse::<i32>().ok());
        if group == Some(pgid) {
            // SAFETY: kill(2) on a process of the group we made; no memory involved.
            unsafe {
                libc::kill(pid, signal);
            }
        }
    }
    signal_group(pgid, libc::SIGCONT);
}

/// Makes this process's memory, environment and open files unreadable
/// through `/proc` and `ptrace` by other processes of its user.
pub(crate) fn harden_process() -> io::Result<()> {
    // SAFETY: prctl(PR_SET_DUMPABLE, 0) only changes a flag of this process.
    if unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
