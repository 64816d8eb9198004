//! Running one leased job: output captured in chunks, a timeout, and
//! cancel (asked to stop, killed after a grace). `command` builds the job's
//! process (its program, environment and launcher); how it is started,
//! kept together and stopped on this system is `platform`'s; what isolates
//! it, `isolation`'s. Over 500 lines with its tests (a third of it), which
//! run real jobs through `execute`.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use drover_wire::{LeasedJob, LogStream, Outcome};

use crate::isolation::Prepared;
use crate::platform::{self, JobProcess as _, Process};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Command;
use tokio::sync::{mpsc, watch};

mod command;

pub use command::validate;
use command::{build_command, container_name, is_runner_secret};

/// Why a running job is being stopped from outside.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// A member cancelled it.
    Cancelled,
    /// The runner no longer holds the lease (expired, revoked).
    LeaseLost,
    /// The runner is shutting down hard.
    Shutdown,
}

#[derive(Debug, Clone)]
pub struct ExecResult {
    pub outcome: Outcome,
    pub exit_code: Option<i32>,
    pub error: Option<String>,
    /// Set when the job was stopped from outside.
    pub stopped: Option<StopReason>,
    /// What the job left behind could not all be killed.
    pub leftover: Option<String>,
}

pub type Output = mpsc::Sender<(LogStream, Vec<u8>)>;

/// Where and how a job runs.
pub struct Place<'a> {
    /// The job's own directory (made and removed by the caller, see
    /// [`crate::workdir::create_job_dir`]): `work/` is its working directory and
    /// `HOME`, `tmp/` its `TMPDIR`.
    pub dir: &'a Path,
    /// Where every job's directory is: hidden from a sandboxed job.
    pub work_root: &'a Path,
    pub isolation: &'a Prepared,
}

async fn pump(mut from: impl AsyncRead + Unpin, stream: LogStream, to: Output) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if to.send((stream, buf[..n].to_vec())).await.is_err() {
                    return;
                }
            }
        }
    }
}

async fn failed_to_start(message: String, output: &Output) -> ExecResult {
    let _ = output
        .send((
            LogStream::Stderr,
            format!("drover: {message}\n").into_bytes(),
        ))
        .await;
    ExecResult {
        outcome: Outcome::Failed,
        exit_code: None,
        error: Some(message),
        stopped: None,
        leftover: None,
    }
}

/// Runs `job` in `place` until it exits, times out, or `stop` says so.
/// The job sees its env, `DROVER_JOB_ID`, `DROVER_ATTEMPT` and
/// `DROVER_RUNNER_ID`, and [`isolation::base_env`]; nothing else of the
/// runner's environment. When it ends, whatever it left behind is killed:
/// its process group, and its PID namespace, cgroup or Job Object where
/// there is one. Stopped, it is asked to stop (SIGTERM, CTRL_BREAK), then
/// killed after `kill_grace`; or after
/// `lost_grace` if that is shorter and the lease was lost (someone else may
/// soon run the job).
pub async fn execute(
    job: &LeasedJob,
    runner: &str,
    place: &Place<'_>,
    output: Output,
    mut stop: watch::Receiver<Option<StopReason>>,
    kill_grace: Duration,
    lost_grace: Duration,
) -> ExecResult {
    let launch = match build_command(job, runner, place) {
        Ok(launch) => launch,
        Err(message) => return failed_to_start(message, &output).await,
    };
    let mut child = match platform::start(launch, &place.isolation.jobs).await {
        Ok(child) => child,
        Err(message) => return failed_to_start(message, &output).await,
    };
    let (stdout, stderr) = child.output();
    let pumps = [
        tokio::spawn(pump(stdout, LogStream::Stdout, output.clone())),
        tokio::spawn(pump(stderr, LogStream::Stderr, output)),
    ];
    let timeout = job.timeout_seconds.map(Duration::from_secs);
    let deadline = async {
        match timeout {
            Some(t) => tokio::time::sleep(t).await,
            None => std::future::pending().await,
        }
    };

    #[derive(Clone, Copy)]
    enum Ended {
        Exited,
        TimedOut,
        Stopped(StopReason),
    }
    let (ended, exited) = tokio::select! {
        status = child.wait() => (Ended::Exited, Some(status)),
        _ = deadline => (Ended::TimedOut, None),
        reason = async {
            let _ = stop.wait_for(Option::is_some).await;
            (*stop.borrow()).unwrap_or(StopReason::Shutdown)
        } => (Ended::Stopped(reason), None),
    };
    let status = match exited {
        Some(status) => status,
        None => {
            child.interrupt();
            let already_lost = matches!(ended, Ended::Stopped(StopReason::LeaseLost));
            let grace = if already_lost {
                kill_grace.min(lost_grace)
            } else {
                kill_grace
            };
            // A lease lost during the grace (a partition after a timeout or
            // a cancel) ends it: another runner may soon run the job.
            let lost_meanwhile = async {
                if already_lost
                    || stop
                        .wait_for(|s| *s == Some(StopReason::LeaseLost))
                        .await
                        .is_err()
                {
                    std::future::pending::<()>().await;
                }
            };
            let exited = tokio::select! {
                status = child.wait() => Some(status),
                _ = tokio::time::sleep(grace) => None,
                _ = lost_meanwhile => None,
            };
            match exited {
                Some(status) => status,
                None => {
                    child.kill();
                    child.wait().await
                }
            }
        }
    };
    // Whatever the job left behind goes too, which also closes the pipes so
    // the pumps end.
    let leftover = child.end(&place.isolation.jobs).await;
    // A container is not in our process group: killing the docker client
    // does not stop it, so remove it by name (a no-op if it already exited).
    if job.image.is_some() && !matches!(ended, Ended::Exited) {
        let docker = place.isolation.programs.docker.as_deref();
        let _ = Command::new(docker.unwrap_or(Path::new("docker")))
            .env_clear()
            .envs(std::env::vars_os().filter(|(k, _)| !k.to_str().is_some_and(is_runner_secret)))
            .args(["rm", "-f", &container_name(job)])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .await;
    }
    for pump in pumps {
        let abort = pump.abort_handle();
        if tokio::time::timeout(Duration::from_secs(5), pump)
            .await
            .is_err()
        {
            abort.abort();
        }
    }
    let code = status.as_ref().ok().map(|s| Process::exit_code(*s));
    let wait_error = status
        .err()
        .map(|e| format!("waiting for the job failed: {e}"));
    match ended {
        Ended::Exited => ExecResult {
            outcome: if code == Some(0) {
                Outcome::Succeeded
            } else {
                Outcome::Failed
            },
            exit_code: code,
            error: wait_error,
            stopped: None,
            leftover,
        },
        Ended::TimedOut => ExecResult {
            outcome: Outcome::TimedOut,
            exit_code: code,
            error: Some(format!(
                "timed out after {}s",
                timeout.map_or(0, |t| t.as_secs())
            )),
            stopped: None,
            leftover,
        },
        Ended::Stopped(reason) => ExecResult {
            outcome: Outcome::Cancelled,
            exit_code: code,
            error: Some(match reason {
                StopReason::Cancelled => "cancelled".into(),
                StopReason::LeaseLost => "stopped: the runner lost its lease".into(),
                StopReason::Shutdown => "stopped: the runner shut down".into(),
            }),
            stopped: Some(reason),
            leftover,
        },
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::isolation;

    fn job(command: &[&str], script: Option<&str>, image: Option<&str>) -> LeasedJob {
        LeasedJob {
            id: "job_1".into(),
            attempt: 1,
            command: command.iter().map(|s| s.to_string()).collect(),
            script: script.map(Into::into),
            env: Default::default(),
            timeout_seconds: None,
            image: image.map(Into::into),
        }
    }

    #[test]
    fn a_job_needs_something_to_start() {
        assert!(validate(&job(&["true"], None, None)).is_ok());
        assert!(validate(&job(&[], Some("true"), None)).is_ok());
        // A container may run its image's default command.
        assert!(validate(&job(&[], None, Some("alpine"))).is_ok());
        assert_eq!(
            validate(&job(&[], None, None)),
            Err("the job has neither a command nor a script".into())
        );
        assert!(validate(&job(&[""], None, None)).is_err());
    }

    /// A fresh job directory under a work root of its own, and how jobs run here.
    fn place(name: &str) -> (PathBuf, PathBuf, Prepared) {
        let root = std::env::temp_dir().join(format!("drover-exec-{}-{name}", std::process::id()));
        let dir = crate::workdir::create_job_dir(&root, name, None).unwrap();
        (root, dir, isolation::prepare(&Default::default()).unwrap())
    }

    #[tokio::test]
    async fn an_empty_command_fails_the_job_instead_of_panicking() {
        let (root, dir, prepared) = place("empty");
        let dir = Place {
            dir: &dir,
            work_root: &root,
            isolation: &prepared,
        };
        let (out, mut logs) = mpsc::channel(8);
        let (_stop, stop_rx) = watch::channel(None);
        let grace = Duration::from_secs(1);
        let result = execute(
            &job(&[], None, None),
            "rn_test",
            &dir,
            out,
            stop_rx,
            grace,
            grace,
        )
        .await;
        assert_eq!(result.outcome, Outcome::Failed);
        assert_eq!(
            result.error.as_deref(),
            Some("the job has neither a command nor a script")
        );
        let (stream, said) = logs.recv().await.expect("a log line");
        assert_eq!(stream, LogStream::Stderr);
        assert!(String::from_utf8_lossy(&said).contains("neither a command nor a script"));
        let _ = std::fs::remove_dir_all(&root);
    }

    #[cfg(unix)]
    /// A job that ignores SIGTERM times out; during its kill grace the
    /// lease is lost: it is killed then, not at the end of the grace.
    #[tokio::test]
    async fn a_lease_lost_during_the_kill_grace_kills_the_job_at_once() {
        let (root, dir, prepared) = place("lost");
        let (out, mut logs) = mpsc::channel::<(LogStream, Vec<u8>)>(64);
        let (stop, stop_rx) = watch::channel(None);
        let script = "trap 'echo got-term' TERM; echo started; while :; do sleep 0.1; done";
        let mut stubborn = job(&[], Some(script), None);
        stubborn.timeout_seconds = Some(1);
        let (grace, lost_grace) = (Duration::from_secs(60), Duration::from_secs(1));
        let run = tokio::spawn(async move {
            let place = Place {
                dir: &dir,
                work_root: &root,
                isolation: &prepared,
            };
            let result = execute(
                &stubborn, "rn_test", &place, out, stop_rx, grace, lost_grace,
            )
            .await;
            let _ = std::fs::remove_dir_all(&root);
            result
        });
        // Past the timeout: SIGTERM sent and ignored. Then the lease goes.
        let mut said = String::new();
        while !said.contains("got-term") {
            let (_, bytes) = tokio::time::timeout(Duration::from_secs(20), logs.recv())
                .await
                .expect("the job is told to stop at its timeout")
                .expect("output");
            said.push_str(&String::from_utf8_lossy(&bytes));
        }
        assert!(!run.is_finished(), "still in its grace");
        stop.send_replace(Some(StopReason::LeaseLost));
        let result = tokio::time::timeout(Duration::from_secs(20), run)
            .await
            .expect("killed when the lease was lost, not after the 60 s grace")
            .unwrap();
        assert_eq!(result.outcome, Outcome::TimedOut);
    }

    /// Each job of `jobs` in turn, the first stopped (cancelled) once it has
    /// started: their results.
    #[cfg(unix)]
    async fn run_in_turn(name: &str, jobs: &[&str]) -> Vec<ExecResult> {
        let root = std::env::temp_dir().join(format!("drover-exec-{}-{name}", std::process::id()));
        let prepared = isolation::prepare(&Default::default()).unwrap();
        let mut results = Vec::new();
        for (i, script) in jobs.iter().enumerate() {
            let dir = crate::workdir::create_job_dir(&root, &format!("j{i}"), None).unwrap();
            let place = Place {
                dir: &dir,
                work_root: &root,
                isolation: &prepared,
            };
            let (out, mut logs) = mpsc::channel::<(LogStream, Vec<u8>)>(64);
            let (stop, stop_rx) = watch::channel(None);
            let job = LeasedJob {
                script: Some(script.to_string()),
                ..job(&[], None, None)
            };
            let run = execute(
                &job,
                "rn_test",
                &place,
                out,
                stop_rx,
                Duration::from_secs(2),
                Duration::from_secs(2),
            );
            let stopper = async {
                if i == 0 {
                    // Stopped once it said it started.
                    let _ = logs.recv().await;
                    stop.send(Some(StopReason::Cancelled)).unwrap();
                }
                while logs.recv().await.is_some() {}
            };
            let (result, ()) = tokio::join!(run, stopper);
            results.push(result);
        }
        let _ = std::fs::remove_dir_all(&root);
        results
    }

    #[cfg(unix)]
    /// A job that leaves a process ignoring SIGTERM behind has its cgroup
    /// killed whole; the jobs after it still run (a cgroup once killed is
    /// not reused: a process born into it by clone3 would be killed too).
    #[tokio::test]
    async fn jobs_after_one_whose_leftovers_were_killed_run() {
        let results = run_in_turn(
            "after-kill",
            &[
                "sleep 1000 & sh -c 'trap \"\" TERM; sleep 1000' & echo started; wait",
                // Jobs that live a moment (not a wait of the test): one
                // killed at birth by the kernel shows as exit 137, where an
                // instant `echo` may finish first.
                "sleep 0.05; echo ran",
                "sleep 0.05; echo ran",
            ],
        )
        .await;
        assert_eq!(results[0].stopped, Some(StopReason::Cancelled));
        for r in &results[1..] {
            assert_eq!(
                (r.outcome, r.exit_code),
                (Outcome::Succeeded, Some(0)),
                "{r:?}"
            );
        }
    }

    #[cfg(unix)]
    /// A job's program is found as `execvp` finds it, however the job is
    /// started: on a relative PATH entry (from the job's directory), and a
    /// file without `#!` runs under `/bin/sh`.
    #[tokio::test]
    async fn programs_are_found_as_execvp_finds_them() {
        use std::os::unix::fs::PermissionsExt as _;
        let (root, dir, prepared) = place("execvp");
        let work = dir.join("work");
        std::fs::create_dir_all(work.join("bin")).unwrap();
        for (file, text) in [
            ("bin/hello", "#!/bin/sh\necho hello from bin\n"),
            ("plain", "echo plain script\n"),
        ] {
            std::fs::write(work.join(file), text).unwrap();
            std::fs::set_permissions(work.join(file), std::fs::Permissions::from_mode(0o755))
                .unwrap();
        }
        let place = Place {
            dir: &dir,
            work_root: &root,
            isolation: &prepared,
        };
        for (command, said) in [
            (&["hello"][..], "hello from bin\n"),
            (&["./plain"][..], "plain script\n"),
        ] {
            let mut j = job(command, None, None);
            j.env.insert("PATH".into(), "bin:/usr/bin:/bin".into());
            let (out, mut logs) = mpsc::channel::<(LogStream, Vec<u8>)>(64);
            let (_stop, stop_rx) = watch::channel(None);
            let grace = Duration::from_secs(1);
            let run = execute(&j, "rn_test", &place, out, stop_rx, grace, grace);
            let collect = async {
                let mut all = Vec::new();
                while let Some((_, bytes)) = logs.recv().await {
                    all.extend(bytes);
                }
                all
            };
            let (result, printed) = tokio::join!(run, collect);
            assert_eq!(
                (result.outcome, result.exit_code),
                (Outcome::Succeeded, Some(0)),
                "{command:?}: {result:?}"
            );
            assert_eq!(String::from_utf8_lossy(&printed), said, "{command:?}");
        }
        let (out, _logs) = mpsc::channel::<(LogStream, Vec<u8>)>(64);
        let (_stop, stop_rx) = watch::channel(None);
        let grace = Duration::from_secs(1);
        let missing = execute(
            &job(&["no-such-program-here"], None, None),
            "rn_test",
            &place,
            out,
            stop_rx,
            grace,
            grace,
        )
        .await;
        assert_eq!(missing.outcome, Outcome::Failed);
        let error = missing.error.unwrap_or_default();
        assert!(
            error.contains("could not start") && error.contains("No such file"),
            "{error}"
        );
        let _ = std::fs::remove_dir_all(&root);
    }

    /// What `job` printed and how it ended, stopped (cancelled) once it
    /// printed something when `cancel` says so.
    #[cfg(windows)]
    async fn run(name: &str, job: LeasedJob, cancel: bool) -> (ExecResult, String) {
        let (root, dir, prepared) = place(name);
        let place = Place {
            dir: &dir,
            work_root: &root,
            isolation: &prepared,
        };
        let (out, mut logs) = mpsc::channel::<(LogStream, Vec<u8>)>(64);
        let (stop, stop_rx) = watch::channel(None);
        let grace = Duration::from_secs(2);
        let run = execute(&job, "rn_test", &place, out, stop_rx, grace, grace);
        let collect = async {
            let mut all = Vec::new();
            while let Some((_, bytes)) = logs.recv().await {
                all.extend(bytes);
                if cancel {
                    let _ = stop.send(Some(StopReason::Cancelled));
                }
            }
            String::from_utf8_lossy(&all).into_owned()
        };
        let (result, printed) = tokio::join!(run, collect);
        let _ = std::fs::remove_dir_all(&root);
        (result, printed)
    }

    #[cfg(windows)]
    #[tokio::test]
    async fn cmd_jobs_end_with_their_exit_code() {
        let (ok, said) = run(
            "cmd-ok",
            job(&["cmd", "/c", "echo hello"], None, None),
            false,
        )
        .await;
        assert_eq!(
            (ok.outcome, ok.exit_code),
            (Outcome::Succeeded, Some(0)),
            "{ok:?}"
        );
        assert_eq!(said.trim(), "hello");
        let (failed, _) = run("cmd-fail", job(&["cmd", "/c", "exit 3"], None, None), false).await;
        assert_eq!(
            (failed.outcome, failed.exit_code),
            (Outcome::Failed, Some(3)),
            "{failed:?}"
        );
        // A script of several lines runs as a batch file.
        let script = "echo one\necho two\nexit /b 4";
        let (script, said) = run("cmd-script", job(&[], Some(script), None), false).await;
        assert_eq!(
            (script.outcome, script.exit_code),
            (Outcome::Failed, Some(4)),
            "{script:?}"
        );
        assert_eq!(said.split_whitespace().collect::<Vec<_>>(), ["one", "two"]);
        let (missing, _) = run(
            "cmd-missing",
            job(&["no-such-program-here"], None, None),
            false,
        )
        .await;
        assert_eq!(missing.outcome, Outcome::Failed);
        assert!(
            missing
                .error
                .unwrap_or_default()
                .contains("could not start")
        );
    }

    /// A cancelled job that started a process of its own: the Job Object
    /// ends both, and has no process left when the job is over.
    #[cfg(windows)]
    #[tokio::test]
    async fn a_cancelled_job_leaves_no_process_behind() {
        let script =
            "start /b ping -n 1000 127.0.0.1 >NUL\necho started\nping -n 1000 127.0.0.1 >NUL";
        let (result, said) = run("cmd-cancel", job(&[], Some(script), None), true).await;
        assert!(said.contains("started"), "{said}");
        assert_eq!(result.stopped, Some(StopReason::Cancelled), "{result:?}");
        assert_eq!(result.outcome, Outcome::Cancelled);
        assert_eq!(result.leftover, None, "the Job Object still held processes");
    }
}
