//! The runner's own programs never take a job's env (SPEC §9): a job whose
//! env sets `LD_PRELOAD` to a library, or `PATH` to a directory with its own
//! `docker`, runs nothing outside its boundary and reads nothing of the
//! runner's. Each route is tried as an attacker would, through a real
//! coordinator and `drover runner`: bubblewrap, and the docker client.
//! And where jobs run is the runner's own: a work directory no one else can
//! plant a link in.

use std::path::{Path, PathBuf};

use drover_tests::runner_core::wire::{JobState, SubmitJob};
use drover_tests::*;

/// A directory outside `/tmp` (which a sandbox replaces), so a sandboxed
/// job sees it; removed on drop.
struct Shared(PathBuf);

impl Shared {
    fn new(label: &str) -> Self {
        let probe = TempDir::new(label);
        let name = probe.path().file_name().unwrap().to_owned();
        let dir = Path::new("/var/tmp").join(name);
        std::fs::create_dir_all(&dir).unwrap();
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        Self(dir)
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A library that, loaded into any process, says which program it is in
/// and prints every file of `steal` (a directory) to stderr: the job's log.
fn preload_library(dir: &Path, steal: &Path) -> PathBuf {
    let source = dir.join("grab.c");
    let library = dir.join("grab.so");
    std::fs::write(
        &source,
        format!(
            r#"#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
__attribute__((constructor)) static void grab(void) {{
    char exe[512] = {{0}}, path[1024], buf[4096];
    readlink("/proc/self/exe", exe, sizeof exe - 1);
    dprintf(2, "PRELOADED in %s\n", exe);
    DIR *d = opendir("{steal}");
    struct dirent *e;
    while (d && (e = readdir(d))) {{
        snprintf(path, sizeof path, "{steal}/%s", e->d_name);
        int fd = open(path, O_RDONLY);
        ssize_t n;
        while (fd >= 0 && (n = read(fd, buf, sizeof buf)) > 0) write(2, buf, n);
        if (fd >= 0) close(fd);
    }}
}}
"#,
            steal = steal.display()
        ),
    )
    .unwrap();
    let built = std::process::Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&library)
        .arg(&source)
        .output()
        .expect("cc (gcc) builds the test's library");
    assert!(built.status.success(), "{built:?}");
    library
}

struct Setup {
    c: Coordinator,
    admin: Member,
    join_token: String,
    state: TempDir,
}

impl Setup {
    async fn new() -> Self {
        let c = Coordinator::start().await;
        let admin = c.bootstrap("acme", "admin@acme.test");
        let join_token = ws_join_token(&admin, "default").await.token;
        Self {
            c,
            admin,
            join_token,
            state: TempDir::new("launch-state"),
        }
    }

    async fn runner(&self, extra: &[&str], env: &[(&str, &str)]) -> RunnerProcess {
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

    fn runner_token(&self) -> String {
        let dir = self.state.path().join("runners");
        let file = std::fs::read_dir(&dir).unwrap().next().unwrap().unwrap();
        let saved: serde_json::Value =
            serde_json::from_slice(&std::fs::read(file.path()).unwrap()).unwrap();
        saved["token"].as_str().unwrap().to_owned()
    }

    async fn run(&self, job: SubmitJob) -> (JobState, String) {
        let job = self.admin.client.submit(&job).await.unwrap();
        let done = wait_done(&self.admin.client, &job.id).await;
        (done.state, self.admin.client.logs(&job.id).await.unwrap())
    }

    /// Nothing of the runner's credentials is in `log`.
    fn assert_nothing_stolen(&self, log: &str) {
        assert!(!log.contains(&self.runner_token()), "runner token:\n{log}");
        assert!(!log.contains(&self.join_token), "join token:\n{log}");
        assert!(!log.contains("rnr_"), "{log}");
    }
}

/// `LD_PRELOAD` in a sandboxed job's env: bubblewrap, which runs outside
/// the sandbox as the runner's user, never loads it; the job's own
/// programs inside do, and find the runner's state hidden.
async fn ld_preload_stays_inside_the_sandbox(extra: &[&str]) {
    let s = Setup::new().await;
    let shared = Shared::new("preload");
    let library = preload_library(&shared.0, &s.state.path().join("runners"));
    let mut args = vec!["--sandbox", "bwrap"];
    args.extend_from_slice(extra);
    let _r = s.runner(&args, &[]).await;
    let mut job = script_job("self:ws", "echo built > out && cat out");
    job.env
        .insert("LD_PRELOAD".into(), library.display().to_string());
    let (state, log) = s.run(job).await;
    assert_eq!(state, JobState::Succeeded, "{log}");
    assert!(log.contains("built"), "{log}");
    // The env is the job's, inside: its shell loaded the library...
    assert!(log.contains("PRELOADED in /"), "{log}");
    // ...and nothing outside did.
    assert!(
        !log.contains("bwrap"),
        "bubblewrap took the job's env:\n{log}"
    );
    s.assert_nothing_stolen(&log);
}

#[tokio::test]
async fn ld_preload_in_a_jobs_env_runs_nothing_outside_its_sandbox() {
    ld_preload_stays_inside_the_sandbox(&[]).await;
}

#[tokio::test]
async fn ld_preload_in_a_jobs_env_runs_nothing_outside_its_sandbox_as_another_user() {
    ld_preload_stays_inside_the_sandbox(&["--job-user", "nobody"]).await;
}

/// A job with an image: the docker client is the one on the runner's
/// `PATH` when it started (a stand-in here, as Docker is a third party),
/// run with the runner's environment; the job's env reaches the container
/// through `--env-file` only. A `docker` the job's `PATH` points at never
/// runs, and its `LD_PRELOAD` loads nowhere.
#[tokio::test]
async fn a_jobs_path_and_ld_preload_never_choose_or_configure_the_docker_client() {
    let s = Setup::new().await;
    let shared = Shared::new("docker");
    let library = preload_library(&shared.0, &s.state.path().join("runners"));
    let record = shared.0.join("record");
    std::fs::create_dir(&record).unwrap();
    let install = |dir: &Path, text: String| {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::create_dir_all(dir).unwrap();
        let file = dir.join("docker");
        std::fs::write(&file, text).unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).unwrap();
    };
    // The runner's docker: records how it was started, and prints what the
    // container would get.
    let ours = shared.0.join("bin");
    install(
        &ours,
        format!(
            r#"#!/bin/sh
[ "$1" = run ] || exit 0
env > {rec}/client-env
echo "$@" > {rec}/client-args
while [ $# -gt 0 ]; do
  case $1 in --env-file) cat "$2"; shift 2;; *) shift;; esac
done
"#,
            rec = record.display()
        ),
    );
    // The job's: what an earlier job could have left somewhere.
    let theirs = shared.0.join("evil");
    install(
        &theirs,
        format!(
            "#!/bin/sh\ntouch {rec}/evil-ran\ncat {state}/runners/* >&2\n",
            rec = record.display(),
            state = s.state.path().display()
        ),
    );
    let path = format!("{}:{}", ours.display(), std::env::var("PATH").unwrap());
    let _r = s
        .runner(&["--labels", "docker"], &[("PATH", path.as_str())])
        .await;
    let job = SubmitJob {
        runtime: "self:ws".into(),
        image: Some("alpine:3".into()),
        command: vec!["true".into()],
        env: [
            ("PATH".to_owned(), theirs.display().to_string()),
            ("LD_PRELOAD".to_owned(), library.display().to_string()),
            ("JOB_SECRET".to_owned(), "s3cret value".to_owned()),
        ]
        .into(),
        ..SubmitJob::default()
    };
    let (state, log) = s.run(job).await;
    assert_eq!(state, JobState::Succeeded, "{log}");
    // The container's env arrived by the file: the job's own values.
    assert!(log.contains("JOB_SECRET=s3cret value"), "{log}");
    assert!(log.contains("DROVER_JOB_ID=job_"), "{log}");
    assert!(!record.join("evil-ran").exists(), "the job's docker ran");
    assert!(!log.contains("PRELOADED"), "{log}");
    s.assert_nothing_stolen(&log);
    let client_env = std::fs::read_to_string(record.join("client-env")).unwrap();
    for taken in ["JOB_SECRET", "LD_PRELOAD", "evil", "DROVER_"] {
        assert!(
            !client_env.contains(taken),
            "{taken} in docker's env:\n{client_env}"
        );
    }
    let args = std::fs::read_to_string(record.join("client-args")).unwrap();
    assert!(
        !args.contains("s3cret"),
        "a value on docker's command line: {args}"
    );
}

/// A value docker's env file cannot carry is refused, not cut.
#[tokio::test]
async fn an_image_jobs_env_value_with_a_line_break_is_refused_clearly() {
    let s = Setup::new().await;
    let shared = Shared::new("docker-nl");
    let bin = shared.0.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::write(bin.join("docker"), "#!/bin/sh\nexit 0\n").unwrap();
        std::fs::set_permissions(bin.join("docker"), std::fs::Permissions::from_mode(0o755))
            .unwrap();
    }
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let _r = s
        .runner(&["--labels", "docker"], &[("PATH", path.as_str())])
        .await;
    let job = SubmitJob {
        runtime: "self:ws".into(),
        image: Some("alpine:3".into()),
        command: vec!["true".into()],
        env: [("TWO".to_owned(), "one\nEVIL=two".to_owned())].into(),
        ..SubmitJob::default()
    };
    let job = s.admin.client.submit(&job).await.unwrap();
    let done = wait_done(&s.admin.client, &job.id).await;
    assert_eq!(done.state, JobState::Failed);
    let error = done.error.unwrap_or_default();
    assert!(error.contains("line break"), "{error}");
}

/// A sandboxed job finds the runner user's `HOME`, every home directory and
/// `/run/user` (session bus, keyring, agents) empty; its own `HOME` works.
#[tokio::test]
async fn a_sandboxed_job_sees_no_home_directory_and_no_session_services() {
    let s = Setup::new().await;
    let home = Shared::new("home");
    std::fs::write(home.0.join("secret.txt"), "private-words").unwrap();
    let home_arg = home.0.display().to_string();
    let _r = s
        .runner(&["--sandbox", "bwrap"], &[("HOME", home_arg.as_str())])
        .await;
    let script = format!(
        "cat {home}/secret.txt 2>&1; ls -A /root /home /run/user 2>&1; \
         echo mine > \"$HOME/f\" && cat \"$HOME/f\"",
        home = home.0.display()
    );
    let (state, log) = s.run(script_job("self:ws", &script)).await;
    assert_eq!(state, JobState::Succeeded, "{log}");
    assert!(!log.contains("private-words"), "{log}");
    assert!(log.contains("mine"), "{log}");
    // Each listed directory is there and empty.
    for dir in ["/root:", "/home:"] {
        assert!(log.contains(dir), "{log}");
    }
    let listed: Vec<&str> = log
        .lines()
        .filter(|l| !l.is_empty() && !l.ends_with(':') && !l.starts_with("cat:") && *l != "mine")
        .filter(|l| !l.starts_with("ls:"))
        .collect();
    assert!(listed.is_empty(), "something was listed: {listed:?}\n{log}");
}

/// A work directory another user owns, or a link to one, is refused: that
/// user could plant a link where a job's directory will be made.
#[tokio::test]
async fn a_runner_refuses_a_work_directory_that_is_not_its_own() {
    let scratch = TempDir::new("work-root");
    let theirs = scratch.path().join("theirs");
    std::fs::create_dir(&theirs).unwrap();
    std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
    let link = scratch.path().join("link");
    std::os::unix::fs::symlink(scratch.path(), &link).unwrap();
    let start = |work: &Path| {
        std::process::Command::new(bin("drover"))
            .args(["runner", "--url", "http://127.0.0.1:9", "--work-dir"])
            .arg(work)
            .args(["--token", "djt_x", "--join", "self:ws", "--state-dir"])
            .arg(scratch.path())
            .output()
            .unwrap()
    };
    for (work, why) in [
        (&theirs, "belongs to uid 65534"),
        (&link, "symbolic link"),
        (&theirs.join("below"), "belongs to uid 65534"),
    ] {
        let out = start(work);
        let said = String::from_utf8_lossy(&out.stderr);
        assert_ne!(out.status.code(), Some(0), "{said}");
        assert!(
            said.contains("is not this runner's own") && said.contains(why),
            "{}: {said}",
            work.display()
        );
    }
    assert!(!theirs.join("below").exists());
}

/// The work directory is made the runner's own, 0700, and jobs run in it.
#[tokio::test]
async fn the_work_directory_is_made_the_runners_own() {
    use std::os::unix::fs::MetadataExt as _;
    let s = Setup::new().await;
    let scratch = TempDir::new("work-own");
    let work = scratch.path().join("jobs");
    let work_arg = work.display().to_string();
    let _r = s.runner(&["--work-dir", &work_arg], &[]).await;
    let meta = std::fs::symlink_metadata(&work).unwrap();
    assert!(meta.is_dir());
    assert_eq!(meta.mode() & 0o7777, 0o700);
    let (state, log) = s.run(script_job("self:ws", "pwd")).await;
    assert_eq!(state, JobState::Succeeded, "{log}");
    assert!(log.starts_with(&work_arg), "{log}");
}
