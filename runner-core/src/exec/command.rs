//! The job's process as a `Command`: its program (a command, a script under
//! `sh`, or a container), the environment it sees, and for a launcher
//! (bwrap, docker) the descriptor that hands it the job's environment.

use std::ffi::{OsStr, OsString};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt as _;
use std::process::Stdio;

use drover_wire::LeasedJob;
use tokio::process::Command;

use super::Place;
use crate::isolation;

/// Environment variables of the runner itself that a container job's
/// `docker` client must not inherit (other jobs get a clean environment).
pub(super) fn is_runner_secret(name: &str) -> bool {
    name.starts_with("DROVER_")
}

pub(super) fn container_name(job: &LeasedJob) -> String {
    format!("drover-{}-{}", job.id, job.attempt)
}

/// Whether this runner can run `job` as leased: a script, or a command with
/// a program to start (a container may instead run its image's default).
/// `Err` says what is wrong, for the job's error.
pub fn validate(job: &LeasedJob) -> Result<(), String> {
    if job.image.is_none() && job.script.is_none() {
        match job.command.first() {
            None => return Err("the job has neither a command nor a script".into()),
            Some(program) if program.is_empty() => {
                return Err("the job's command names an empty program".into());
            }
            Some(_) => {}
        }
    }
    // docker reads a container's env from a file of `NAME=value` lines.
    if job.image.is_some()
        && let Some((name, _)) = job.env.iter().find(|(_, v)| v.contains(['\n', '\r']))
    {
        return Err(format!(
            "env {name}: a job with an image cannot have a value with a line break (docker passes env in lines)"
        ));
    }
    Ok(())
}

/// The descriptor a job's launcher reads the job's environment from
/// (bwrap's `--args 3`, docker's `--env-file /dev/fd/3`).
pub(super) const ENV_FD: i32 = 3;

/// What the job itself sees of its environment, in order (later wins): the
/// runner's documented minimum, the job's env, and who it is.
fn job_env<'a>(
    job: &'a LeasedJob,
    runner: &'a str,
    base: &'a [(OsString, OsString)],
    ids: &'a [(&'static str, String); 2],
) -> impl Iterator<Item = (&'a OsStr, &'a OsStr)> {
    base.iter()
        .map(|(k, v)| (k.as_os_str(), v.as_os_str()))
        .chain(job.env.iter().map(|(k, v)| (k.as_ref(), v.as_ref())))
        .chain(ids.iter().map(|(k, v)| (k.as_ref(), v.as_ref())))
        .chain(std::iter::once((
            "DROVER_RUNNER_ID".as_ref(),
            runner.as_ref(),
        )))
}

/// The job's process and, for a launcher (bwrap, docker), the descriptor
/// holding the job's environment, to be handed to it as [`ENV_FD`].
pub(super) fn build_command(
    job: &LeasedJob,
    runner: &str,
    place: &Place,
) -> Result<(Command, Option<OwnedFd>), String> {
    validate(job)?;
    let work = place.dir.join("work");
    let ids = [
        ("DROVER_JOB_ID", job.id.clone()),
        ("DROVER_ATTEMPT", job.attempt.to_string()),
    ];
    let env_data = |data: Vec<u8>| {
        isolation::data_fd(&data).map_err(|e| format!("could not pass the job its env: {e}"))
    };
    let (mut cmd, env_fd) = if let Some(image) = &job.image {
        let docker =
            place.isolation.programs.docker.as_ref().ok_or(
                "this runner has no docker on its PATH: it cannot run a job with an image",
            )?;
        // The container gets the job's env from a file only docker reads;
        // the docker client itself runs with the runner's environment (its
        // config, its socket), less the runner's own secrets.
        let mut file = Vec::new();
        for (k, v) in job_env(job, runner, &[], &ids) {
            file.extend_from_slice(k.as_bytes());
            file.push(b'=');
            file.extend_from_slice(v.as_bytes());
            file.push(b'\n');
        }
        let mut c = Command::new(docker);
        c.args(["run", "--rm", "--init", "--name", &container_name(job)])
            .arg("--env-file")
            .arg(format!("/dev/fd/{ENV_FD}"))
            .arg(image);
        match &job.script {
            Some(script) => c.args(["sh", "-c", script]),
            None => c.args(&job.command),
        };
        for (key, _) in std::env::vars_os() {
            if key.to_str().is_some_and(is_runner_secret) {
                c.env_remove(key);
            }
        }
        (c, Some(env_data(file)?))
    } else {
        let sh = place.isolation.programs.sh.as_os_str();
        let (program, args) = match &job.script {
            Some(script) => (sh, vec!["-c", script.as_str()]),
            None => {
                let (program, args) = job.command.split_first().ok_or("no command")?;
                (program.as_ref(), args.iter().map(String::as_str).collect())
            }
        };
        let base = isolation::base_env(&work, &place.dir.join("tmp"));
        match &place.isolation.bwrap {
            Some(bwrap) => {
                // bwrap runs with no environment at all; the job's is
                // applied inside the sandbox, read from a descriptor.
                let mut c = Command::new(bwrap);
                c.env_clear()
                    .arg("--args")
                    .arg(ENV_FD.to_string())
                    .args(isolation::bwrap_args(
                        place.dir,
                        place.work_root,
                        &place.isolation.isolation.hidden,
                        &work,
                    ))
                    .arg(program)
                    .args(args);
                let data = isolation::bwrap_env_args(job_env(job, runner, &base, &ids));
                (c, Some(env_data(data)?))
            }
            None => {
                // The job's own program, as the job: it takes the job's env.
                let mut c = Command::new(program);
                c.args(args)
                    .env_clear()
                    .envs(job_env(job, runner, &base, &ids));
                (c, None)
            }
        }
    };
    cmd.current_dir(&work)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    Ok((cmd, env_fd))
}

/// In the child, between fork and exec: `fd` becomes [`ENV_FD`], open
/// across the exec. Async-signal-safe.
pub(super) fn hand_over(fd: i32) -> std::io::Result<()> {
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
        Err(std::io::Error::last_os_error())
    }
}
