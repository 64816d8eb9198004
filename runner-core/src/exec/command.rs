//! The job's process as a `Command`: its program (a command, a script under
//! the system's shell, or a container), the environment it sees, and how a
//! launcher (a sandbox, docker) is given the job's environment.

use std::ffi::{OsStr, OsString};
use std::process::Stdio;

use drover_wire::LeasedJob;
use tokio::process::Command;

use super::Place;
use crate::isolation;
use crate::platform::{self, Launch};

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

/// The job's process, to be started by the system's `start`.
pub(super) fn build_command(
    job: &LeasedJob,
    runner: &str,
    place: &Place,
) -> Result<Launch, String> {
    validate(job)?;
    let work = place.dir.join("work");
    let ids = [
        ("DROVER_JOB_ID", job.id.clone()),
        ("DROVER_ATTEMPT", job.attempt.to_string()),
    ];
    let (mut cmd, env_fd, program, sandboxed) = if let Some(image) = &job.image {
        let docker =
            place.isolation.programs.docker.as_ref().ok_or(
                "this runner has no docker on its PATH: it cannot run a job with an image",
            )?;
        // The container gets the job's env in a way only docker sees; the
        // docker client itself runs with the runner's environment (its
        // config, its socket), less the runner's own secrets.
        let mut c = Command::new(docker);
        c.args(["run", "--rm", "--init", "--name", &container_name(job)]);
        for (key, _) in std::env::vars_os() {
            if key.to_str().is_some_and(is_runner_secret) {
                c.env_remove(key);
            }
        }
        let env_fd = platform::container_env(&mut c, job_env(job, runner, &[], &ids))?;
        c.arg(image);
        match &job.script {
            Some(script) => c.args(["sh", "-c", script]),
            None => c.args(&job.command),
        };
        (c, env_fd, "docker".to_owned(), false)
    } else {
        let (program, args): (OsString, Vec<OsString>) = match &job.script {
            Some(script) => platform::script(&place.isolation.programs.shell, script, place.dir)
                .map_err(|e| format!("could not write the job's script: {e}"))?,
            None => {
                let (program, args) = job.command.split_first().ok_or("no command")?;
                (program.into(), args.iter().map(Into::into).collect())
            }
        };
        let name = program.to_string_lossy().into_owned();
        let base = isolation::base_env(&work, &place.dir.join("tmp"));
        let env = job_env(job, runner, &base, &ids);
        match &place.isolation.sandbox {
            Some(sandbox) => {
                let (c, env_fd) = platform::sandboxed(sandbox, place, &program, &args, env)?;
                (c, env_fd, name, true)
            }
            None => {
                // The job's own program, as the job: it takes the job's env.
                let mut c = Command::new(&program);
                c.args(&args).env_clear().envs(env);
                (c, None, name, false)
            }
        }
    };
    cmd.current_dir(&work)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    Ok(Launch {
        cmd,
        env_fd,
        // A container job's docker client stays the runner's: Docker isolates the job.
        user: place.isolation.job_user.filter(|_| job.image.is_none()),
        sandboxed,
        program,
    })
}
