//! Job isolation on shared runners: each test runs a job that tries to break
//! out (read the runner's token, see another job, outlive itself, write
//! outside its directory) through a real coordinator and `drover runner`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use drover_tests::runner_core::wire::{JobState, SubmitJob};
use drover_tests::*;

/// A random string of digits, to find a job's processes by their command line.
fn marker() -> String {
    let mut b = [0u8; 4];
    use std::io::Read as _;
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .unwrap();
    u32::from_le_bytes(b).to_string()
}

/// Processes whose command line contains `needle`.
fn processes_with(needle: &str) -> Vec<i32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|p| p.parse().ok()) else {
            continue;
        };
        if pid == std::process::id() as i32 {
            continue;
        }
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        if String::from_utf8_lossy(&cmdline).contains(needle) {
            found.push(pid);
        }
    }
    found
}

/// Kills what a failed test left running.
struct KillOnDrop(String);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        for pid in processes_with(&self.0) {
            // SAFETY: signalling a process this test's job started.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
    }
}

struct Setup {
    c: Coordinator,
    admin: Member,
    join_token: String,
    state: TempDir,
}

async fn setup() -> Setup {
    let c = Coordinator::start().await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    let join_token = ws_join_token(&admin, "default").await.token;
    Setup {
        c,
        admin,
        join_token,
        state: TempDir::new("iso-state"),
    }
}

impl Setup {
    /// One workspace runner joined with the join token on its command line.
    async fn runner(&self, extra: &[&str]) -> RunnerProcess {
        self.runner_with_env(extra, &[]).await
    }

    async fn runner_with_env(&self, extra: &[&str], env: &[(&str, &str)]) -> RunnerProcess {
        let state = self.state.path().display().to_string();
        let mut args = vec![
            "--join",
            "self:ws",
            "--token",
            &self.join_token,
            "--state-dir",
            &state,
        ];
        args.extend_from_slice(extra);
        let r = RunnerProcess::spawn_with_env(&self.c.url, &args, env);
        r.wait_for_lines(": online", 1).await;
        r
    }

    /// The runner token saved in the state directory.
    fn runner_token(&self) -> String {
        let dir = self.state.path().join("runners");
        let file = std::fs::read_dir(&dir).unwrap().next().unwrap().unwrap();
        let saved: serde_json::Value =
            serde_json::from_slice(&std::fs::read(file.path()).unwrap()).unwrap();
        saved["token"].as_str().unwrap().to_owned()
    }

    /// Submits `script`, which says `ready` once it runs, and waits for that.
    async fn started(&self, script: &str) -> drover_tests::runner_core::wire::Job {
        let job = self
            .admin
            .client
            .submit(&script_job("self:ws", script))
            .await
            .unwrap();
        eventually("the job to be ready", DEADLINE, || async {
            let log = self.admin.client.logs(&job.id).await.unwrap();
            log.contains("ready").then_some(())
        })
        .await;
        job
    }

    /// Runs `script` to the end; its state and log.
    async fn run(&self, script: &str) -> (JobState, String) {
        self.run_job(script_job("self:ws", script)).await
    }

    async fn run_job(&self, job: SubmitJob) -> (JobState, String) {
        let job = self.admin.client.submit(&job).await.unwrap();
        let done = wait_done(&self.admin.client, &job.id).await;
        (done.state, self.admin.client.logs(&job.id).await.unwrap())
    }
}

#[tokio::test]
async fn a_job_gets_only_its_own_environment_and_a_documented_minimum() {
    let s = setup().await;
    let _r = s
        .runner_with_env(&[], &[("RUNNER_SECRET", "runner-secret-value")])
        .await;
    let job = SubmitJob {
        env: [("GREETING".to_owned(), "hi".to_owned())].into(),
        ..script_job("self:ws", "env; echo \"pwd=$(pwd)\"")
    };
    let (state, log) = s.run_job(job).await;
    assert_eq!(state, JobState::Succeeded, "{log}");
    assert!(!log.contains("runner-secret-value"), "{log}");
    let allowed = [
        // Documented in the README.
        "PATH",
        "HOME",
        "TMPDIR",
        "LANG",
        "LC_ALL",
        "TZ",
        "DROVER_JOB_ID",
        "DROVER_ATTEMPT",
        "DROVER_RUNNER_ID",
        // The job's own.
        "GREETING",
        // What sh itself sets.
        "PWD",
        "OLDPWD",
        "SHLVL",
        "_",
    ];
    let vars: Vec<(&str, &str)> = log
        .lines()
        .filter(|l| !l.starts_with("pwd="))
        .filter_map(|l| l.split_once('='))
        .collect();
    for (name, _) in &vars {
        assert!(allowed.contains(name), "{name} reached the job:\n{log}");
    }
    let var = |n: &str| vars.iter().find(|(k, _)| *k == n).map(|(_, v)| *v);
    assert_eq!(var("GREETING"), Some("hi"));
    let pwd = log.lines().find_map(|l| l.strip_prefix("pwd=")).unwrap();
    assert_eq!(var("HOME"), Some(pwd), "HOME is the job's directory");
    let job_dir = Path::new(pwd).parent().unwrap();
    assert_eq!(
        var("TMPDIR").map(Path::new),
        Some(job_dir.join("tmp").as_path())
    );
}

#[tokio::test]
async fn the_token_never_stays_on_the_runners_command_line() {
    let s = setup().await;
    let r = s.runner(&[]).await;
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", r.pid())).unwrap();
    let cmdline = String::from_utf8_lossy(&cmdline);
    assert!(cmdline.contains("--join"), "{cmdline}");
    assert!(!cmdline.contains(&s.join_token), "{cmdline}");
    // A job reading every command line it can find sees no token either.
    let (state, log) = s
        .run(&format!(
            "cat /proc/{pid}/cmdline | tr '\\0' ' '; echo; for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < $f; echo; done; echo tried",
            pid = r.pid()
        ))
        .await;
    assert_eq!(state, JobState::Succeeded, "{log}");
    assert!(log.contains("--join self:ws"), "it did read it: {log}");
    assert!(!log.contains(&s.join_token), "{log}");
    assert!(!log.contains(&s.runner_token()), "{log}");
}

#[tokio::test]
async fn a_sandboxed_job_cannot_reach_the_runners_credentials() {
    let s = setup().await;
    let r = s.runner(&["--sandbox", "bwrap"]).await;
    let state = s.state.path().display();
    let script = format!(
        r#"pid={pid}
for f in /proc/$pid/cmdline /proc/$pid/environ /proc/[0-9]*/cmdline /proc/[0-9]*/environ; do tr '\0' ' ' < $f 2>&1; echo; done
head -c 100000 /proc/$pid/mem 2>&1 | head -c 200; echo
ls -la {state} {state}/runners 2>&1
cat {state}/runners/* 2>&1
grep -rs "rn[r]_" {state} 2>&1
echo tried"#,
        pid = r.pid()
    );
    let (_, log) = s.run(&script).await;
    assert!(log.contains("tried"), "{log}");
    let token = s.runner_token();
    assert!(
        !log.contains(&token),
        "the job read the runner token:\n{log}"
    );
    assert!(
        !log.contains(&s.join_token),
        "the job read the join token:\n{log}"
    );
    assert!(!log.contains("rnr_"), "{log}");
    // The runner's own files are where they were.
    assert!(s.state.path().join("runners").is_dir());
}

/// A job run as `nobody` by a root runner tries to read its credentials.
async fn a_job_run_as_another_user_cannot_reach_the_runners_credentials(extra: &[&str]) {
    let s = setup().await;
    let mut args = vec!["--job-user", "nobody"];
    args.extend_from_slice(extra);
    let r = s.runner(&args).await;
    let state = s.state.path().display();
    let script = format!(
        r#"echo "uid=$(id -u)"
tr '\0' ' ' < /proc/{pid}/environ 2>&1; echo
cat {state}/runners/* 2>&1
grep -rs "rn[r]_" {state} 2>&1
echo x > d && cat d && echo tried"#,
        pid = r.pid()
    );
    let (state, log) = s.run(&script).await;
    assert_eq!(state, JobState::Succeeded, "{log}");
    assert!(log.contains("uid=65534") && log.contains("tried"), "{log}");
    assert!(
        !log.contains(&s.runner_token()),
        "the job read the runner token:\n{log}"
    );
    assert!(
        !log.contains(&s.join_token),
        "the job read the join token:\n{log}"
    );
}

#[tokio::test]
async fn a_job_run_as_another_user_cannot_reach_the_runners_credentials_unsandboxed() {
    a_job_run_as_another_user_cannot_reach_the_runners_credentials(&[]).await;
}

#[tokio::test]
async fn a_sandboxed_job_run_as_another_user_cannot_reach_the_runners_credentials() {
    a_job_run_as_another_user_cannot_reach_the_runners_credentials(&["--sandbox", "bwrap"]).await;
}

#[tokio::test]
async fn a_sandboxed_job_sees_no_other_job() {
    let s = setup().await;
    let _r = s
        .runner(&["--sandbox", "bwrap", "--max-concurrent", "2"])
        .await;
    let m = marker();
    let _cleanup = KillOnDrop(format!("300.{m}"));
    let first = s
        .started(&format!(
            "echo secret-{m} > a-file; echo ready; exec sleep 300.{m}"
        ))
        .await;
    let (state, log) = s
        .run(
            "for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < $f; echo; done; \
             ls -la ../.. ..; cat ../../*/work/a-file 2>&1; ps -ef 2>&1; echo looked",
        )
        .await;
    assert_eq!(state, JobState::Succeeded, "{log}");
    assert!(log.contains("looked"), "{log}");
    assert!(!log.contains(&m), "the second job saw the first:\n{log}");
    assert!(
        !log.contains(&first.id),
        "the second job saw the first's directory:\n{log}"
    );
    s.admin.client.cancel(&first.id).await.unwrap();
    wait_done(&s.admin.client, &first.id).await;
}

/// A job starts processes that leave its process group, waits until they
/// run, and ends: they must be gone.
async fn a_detached_process_does_not_outlive_its_job(extra: &[&str], how: &str) {
    let s = setup().await;
    let r = s.runner(extra).await;
    let m = marker();
    let _cleanup = KillOnDrop(format!(".{m}"));
    let script = format!(
        "(setsid sleep 4242.{m} >/dev/null 2>&1 </dev/null &)
         setsid sh -c 'sleep 4243.{m}' >/dev/null 2>&1 </dev/null &
         until grep -qs '4242[.]{m}' /proc/[0-9]*/cmdline && grep -qs '4243[.]{m}' /proc/[0-9]*/cmdline; do sleep 0.01; done
         echo detached"
    );
    let (state, log) = s.run(&script).await;
    assert_eq!(state, JobState::Succeeded, "{log}");
    assert!(log.contains("detached"), "{log}");
    eventually(
        "the job's detached processes to be gone",
        Duration::from_secs(10),
        || {
            let left = processes_with(&format!(".{m}"));
            async move { left.is_empty().then_some(()) }
        },
    )
    .await;
    // And the runner said how.
    assert!(r.lines().iter().any(|l| l.contains(how)), "{:?}", r.lines());
}

/// The desktop app lends a machine to each pool with a fleet of its own, all
/// in one process. A job ending in one fleet kills whatever is left in its
/// cgroup: that must never be another fleet's job.
#[tokio::test]
async fn a_job_ending_in_one_fleet_leaves_another_fleets_job_running() {
    use drover_tests::runner_core::client::{Scope, Token};
    use drover_tests::runner_core::fleet::Fleet;
    use drover_tests::runner_core::runner::{Credential, RunnerSettings};
    let s = setup().await;
    let mut fleets = Vec::new();
    for name in ["fleet-a", "fleet-b"] {
        let work = TempDir::new(name);
        let settings = RunnerSettings {
            work_root: work.path().to_owned(),
            ..RunnerSettings::default()
        };
        let (mut fleet, events) = Fleet::new(s.c.client(""), settings).expect("a fleet");
        let how = fleet.isolation().to_string();
        assert!(how.contains("each in its own cgroup"), "{how}");
        let paired = pair(&s.admin, Scope::Workspace, None, name, &[]).await;
        fleet.add(Credential {
            runner_id: paired.runner.id.to_string(),
            token: Token::new(paired.token),
        });
        fleets.push((fleet, events, work));
    }
    s.c.wait_for_waiting(2).await;
    let m = marker();
    let _cleanup = KillOnDrop(format!("300.{m}"));
    let long = s.started(&format!("echo ready; exec sleep 300.{m}")).await;
    // One slot each: this job runs in the other fleet, which kills what is
    // left in its job's cgroup before it reports the job done.
    let (state, log) = s.run("echo short").await;
    assert_eq!(state, JobState::Succeeded, "{log}");
    assert!(
        !processes_with(&format!("300.{m}")).is_empty(),
        "the other fleet's job was killed when this one ended"
    );
    let job = s.admin.client.job(&long.id).await.unwrap();
    assert_eq!(job.state, JobState::Running, "{job:?}");
    s.admin.client.cancel(&long.id).await.unwrap();
    wait_done(&s.admin.client, &long.id).await;
}

#[tokio::test]
async fn a_detached_process_does_not_outlive_its_job_unsandboxed() {
    a_detached_process_does_not_outlive_its_job(&[], "each in its own cgroup").await;
}

#[tokio::test]
async fn a_detached_process_does_not_outlive_its_sandboxed_job() {
    a_detached_process_does_not_outlive_its_job(
        &["--sandbox", "bwrap"],
        "each in its own PID namespace",
    )
    .await;
}

#[tokio::test]
async fn a_sandboxed_job_cannot_write_outside_its_directory() {
    let s = setup().await;
    let _r = s.runner(&["--sandbox", "bwrap"]).await;
    let m = marker();
    // Outside /tmp (private in the sandbox): the host's filesystem.
    let outside = PathBuf::from(format!("/var/tmp/drover-iso-{m}"));
    std::fs::create_dir_all(&outside).unwrap();
    let in_root = PathBuf::from(format!("/drover-iso-{m}"));
    let state_file = s.state.path().join("runners").join("planted");
    let script = format!(
        "echo x > {o}/x 2>&1; echo x > {r} 2>&1; echo x > {st} 2>&1; \
         mkdir -p d && echo inside > d/f && cat d/f && echo tmp-ok > $TMPDIR/t && cat $TMPDIR/t",
        o = outside.display(),
        r = in_root.display(),
        st = state_file.display()
    );
    let (state, log) = s.run(&script).await;
    let wrote = [outside.join("x"), in_root.clone(), state_file.clone()].map(|p| p.exists());
    let _ = std::fs::remove_dir_all(&outside);
    let _ = std::fs::remove_file(&in_root);
    assert_eq!(state, JobState::Succeeded, "{log}");
    assert!(
        log.contains("inside") && log.contains("tmp-ok"),
        "it may write its own directories: {log}"
    );
    assert!(log.contains("Read-only file system"), "{log}");
    assert_eq!(wrote, [false; 3], "{log}");
}

/// Its directory is fresh, and gone afterwards even if made read-only.
async fn the_job_directory_is_fresh_and_removed(extra: &[&str]) {
    let s = setup().await;
    let _r = s.runner(extra).await;
    let script = "echo \"dir=$(pwd)\"; echo \"[$(ls -A)]\"; mkdir -p d/e; echo x > d/e/f; \
                  echo y > $TMPDIR/t; chmod -R a-w d $TMPDIR .; echo made";
    for _ in 0..2 {
        let (state, log) = s.run(script).await;
        assert_eq!(state, JobState::Succeeded, "{log}");
        assert!(log.contains("[]\n"), "a fresh directory: {log}");
        assert!(log.contains("made"), "{log}");
        let work = PathBuf::from(log.lines().find_map(|l| l.strip_prefix("dir=")).unwrap());
        let dir = work.parent().unwrap().to_owned();
        eventually("the job's directory to be removed", DEADLINE, || {
            let gone = !dir.exists();
            async move { gone.then_some(()) }
        })
        .await;
    }
}

#[tokio::test]
async fn the_job_directory_is_fresh_and_removed_even_when_made_read_only() {
    the_job_directory_is_fresh_and_removed(&[]).await;
}

#[tokio::test]
async fn a_sandboxed_job_directory_is_fresh_and_removed_even_when_made_read_only() {
    the_job_directory_is_fresh_and_removed(&["--sandbox", "bwrap"]).await;
}

#[tokio::test]
async fn a_sandboxed_job_is_told_to_stop_and_gets_its_grace() {
    let s = setup().await;
    let _r = s.runner(&["--sandbox", "bwrap"]).await;
    let job = SubmitJob {
        timeout_seconds: Some(1),
        ..script_job(
            "self:ws",
            "trap 'echo got-term; sleep 0.3; echo still-here; exit 3' TERM; \
             echo started; while :; do sleep 0.1; done",
        )
    };
    let job = s.admin.client.submit(&job).await.unwrap();
    let done = wait_done(&s.admin.client, &job.id).await;
    let log = s.admin.client.logs(&job.id).await.unwrap();
    assert_eq!(done.state, JobState::TimedOut, "{log}");
    // (sh may say "Terminated" of the sleep it was waiting for, on stderr.)
    assert!(
        log.contains("got-term") && log.contains("still-here"),
        "{log}"
    );
    assert_eq!(done.exit_code, Some(3), "its trap ran to the end: {log}");
}

#[tokio::test]
async fn a_runner_asked_for_a_sandbox_it_cannot_have_refuses_to_start() {
    let empty = TempDir::new("no-bwrap");
    let out = std::process::Command::new(bin("drover"))
        .args([
            "runner",
            "--url",
            "http://127.0.0.1:9",
            "--sandbox",
            "bwrap",
        ])
        .args(["--token", "djt_x", "--join", "self:ws", "--state-dir"])
        .arg(empty.path())
        .env("PATH", empty.path())
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(
        said.contains("bubblewrap, which is not installed")
            && said.contains("apt-get install bubblewrap"),
        "{said}"
    );
}
