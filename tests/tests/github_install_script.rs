//! The GitHub install script separates the two workers: the
//! Actions runner runs as `drover-actions`, the Drover runner as root with
//! `--sandbox bwrap --job-user drover-job`, and each one's credentials are
//! 0600 files of its own user in a 0700 directory.
//!
//! The test follows the script rather than restating it: it renders the
//! script, runs it with `DROVER_DRY_RUN=1`, carries out the user, directory
//! and ownership commands the dry run prints (under a scratch directory in
//! place of `/opt/drover`), and starts `drover runner` exactly as the unit
//! the dry run prints does (its `ExecStart`, `Environment`, and a /tmp of its
//! own for `PrivateTmp`). A job then tries to read the Drover runner's token
//! and the Actions runner's credential files.
//!
//! It runs as root (as the tests do here and in CI), like the unit: only
//! root may run jobs as another user. The users it adds with `useradd
//! --system`, as the script would, it removes at the end.

use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::process::Command;

use drover_tests::fake_github::{self, GithubApp};
use drover_tests::runner_core::wire::{self, JobState};
use drover_tests::*;

/// The value of `NAME='…'` in the script.
fn script_var(script: &str, name: &str) -> String {
    script
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{name}=")))
        .unwrap_or_else(|| panic!("no {name} in the script"))
        .trim_matches(['\'', '"'])
        .to_owned()
}

/// The script's dry run, with `drover` at `drover_bin`: its output.
fn dry_run(script: &str, drover_bin: &Path) -> String {
    let dir = TempDir::new("install-script");
    let path = dir.path().join("install.sh");
    std::fs::write(&path, script).unwrap();
    let out = Command::new("sh")
        .arg(&path)
        .env("DROVER_DRY_RUN", "1")
        .env("DROVER_BIN", drover_bin)
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.status.success(),
        "the dry run failed: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// The commands the dry run says it would run (`+ …`), as words, with
/// `base` moved to `to`.
fn planned(dry: &str, base: &str, to: &Path) -> Vec<Vec<String>> {
    dry.lines()
        .filter_map(|l| l.strip_prefix("+ "))
        .filter(|l| !l.starts_with('('))
        .map(|l| l.split_whitespace().map(|w| rebase(w, base, to)).collect())
        .collect()
}

fn rebase(word: &str, base: &str, to: &Path) -> String {
    match word.strip_prefix(base) {
        Some(rest) => format!("{}{rest}", to.display()),
        None => word.to_owned(),
    }
}

fn sh(words: &[String]) {
    let out = Command::new(&words[0]).args(&words[1..]).output().unwrap();
    assert!(
        out.status.success(),
        "{words:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn uid_of(user: &str) -> u32 {
    let out = Command::new("id").args(["-u", user]).output().unwrap();
    assert!(out.status.success(), "no user {user}");
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

/// Users this test added; removed when it ends.
#[derive(Default)]
struct AddedUsers(Vec<String>);

impl Drop for AddedUsers {
    fn drop(&mut self) {
        for user in &self.0 {
            let _ = Command::new("userdel").arg(user).status();
        }
    }
}

/// A scratch directory in /var/tmp, removed at the end.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Self {
        let name = TempDir::new("name");
        let leaf = name.path().file_name().unwrap().to_owned();
        let path = Path::new("/var/tmp").join(leaf);
        std::fs::create_dir(&path).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        Self(path)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("kept {} for inspection", self.0.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// The unit the dry run prints: its `KEY=value` lines.
fn unit_lines(dry: &str) -> Vec<(String, String)> {
    let start = dry.find("[Unit]").expect("the unit in the dry run");
    dry[start..]
        .lines()
        .take_while(|l| !l.starts_with("drover-install:") && !l.starts_with('+'))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

#[tokio::test]
async fn a_job_on_the_installed_runner_reads_neither_workers_credentials() {
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    assert_eq!(
        euid, 0,
        "this test starts the runner as its unit does, as root (tests/run.sh runs as root)"
    );
    let app = GithubApp::start().await;
    let c = Coordinator::start_with(CoordinatorOptions {
        serve_args: app.serve_args(),
        ..CoordinatorOptions::default()
    })
    .await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    let id = app.com.install("octo", "User", &["hello"]);
    fake_github::link(&c.url, &admin, &app.com, None, id).await;
    let done = admin
        .client
        .github_install(&wire::GithubInstallRequest {
            repository: Some("octo/hello".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    let script = &done.script;
    let (actions_user, job_user) = (
        script_var(script, "ACTIONS_USER"),
        script_var(script, "JOB_USER"),
    );
    assert_ne!(actions_user, job_user);
    let drover = bin("drover");
    let dry = dry_run(script, &drover);

    // What the script would do to users, directories and owners, done
    // under a scratch base (not in /tmp, which every sandboxed job gets a
    // fresh one of: there only permissions must keep a job out, as in /opt).
    let root = Scratch::new();
    let base = script_var(script, "BASE");
    let to = root.0.join("opt-drover");
    let plan = planned(&dry, &base, &to);
    let mut added = AddedUsers::default();
    for words in plan.iter().filter(|w| w[0] == "useradd") {
        sh(words);
        added.0.push(words.last().unwrap().clone());
    }
    for words in plan.iter().filter(|w| w[0] == "install") {
        sh(words);
    }
    let runner_dir = PathBuf::from(rebase(
        &script_var(script, "RUNNER_DIR").replace("$BASE", &base),
        &base,
        &to,
    ));
    let actions_secret = format!("actions-secret-{}", std::process::id());
    for f in [".runner", ".credentials", ".credentials_rsaparams"] {
        std::fs::write(
            runner_dir.join(f),
            format!("{{\"{f}\": \"{actions_secret}\"}}"),
        )
        .unwrap();
    }
    for words in plan.iter().filter(|w| w[0] == "chown" || w[0] == "chmod") {
        sh(words);
    }
    let actions_uid = uid_of(&actions_user);
    let meta = std::fs::metadata(&runner_dir).unwrap();
    assert_eq!(
        (meta.uid(), meta.permissions().mode() & 0o777),
        (actions_uid, 0o700)
    );
    for f in [".runner", ".credentials", ".credentials_rsaparams"] {
        let meta = std::fs::metadata(runner_dir.join(f)).unwrap();
        assert_eq!(
            (meta.uid(), meta.permissions().mode() & 0o777),
            (actions_uid, 0o600),
            "{f}"
        );
    }

    // The unit, as the dry run prints it.
    let unit = unit_lines(&dry);
    let value = |key: &str| {
        unit.iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| panic!("no {key}= in the unit:\n{dry}"))
    };
    assert_eq!(value("User"), "root");
    assert_eq!(value("PrivateTmp"), "yes");
    let exec: Vec<String> = value("ExecStart")
        .split_whitespace()
        .map(|w| rebase(w, &base, &to))
        .collect();
    assert_eq!(Path::new(&exec[0]), drover.as_path());
    let flag = |name: &str| {
        let at = exec.iter().position(|w| w == name);
        at.map(|i| exec[i + 1].clone())
            .unwrap_or_else(|| panic!("no {name} in {exec:?}"))
    };
    assert_eq!(flag("--sandbox"), "bwrap");
    assert_eq!(flag("--job-user"), job_user);
    let (token_file, state_dir) = (PathBuf::from(flag("--token-file")), flag("--state-dir"));
    let meta = std::fs::metadata(&state_dir).unwrap();
    assert_eq!((meta.uid(), meta.permissions().mode() & 0o777), (0, 0o700));
    assert_eq!(token_file.parent(), Some(Path::new(&state_dir)));
    // The token, as the script writes it: 0600, root's.
    let token = script_var(script, "DROVER_RUNNER_TOKEN");
    {
        use std::io::Write as _;
        let mut f = std::fs::File::options()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&token_file)
            .unwrap();
        writeln!(f, "{token}").unwrap();
    }

    // The runner, as systemd starts it: the unit's environment, systemd's
    // PATH, and a /tmp of its own (PrivateTmp).
    let private_tmp = TempDir::new("private-tmp");
    let mut env: Vec<(String, String)> = unit
        .iter()
        .filter(|(k, _)| k == "Environment")
        .map(|(_, v)| {
            let (k, v) = v.split_once('=').unwrap();
            (k.to_owned(), v.to_owned())
        })
        .collect();
    env.push((
        "PATH".into(),
        "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into(),
    ));
    env.push(("TMPDIR".into(), private_tmp.path().display().to_string()));
    let runner = RunnerProcess::exact(&drover, &exec[1..], &env);
    runner.wait_for_lines(": online", 1).await;
    assert!(
        runner
            .lines()
            .iter()
            .any(|l| l.contains(&format!("bubblewrap sandbox, as {job_user}"))),
        "{:?}",
        runner.lines()
    );

    // A workflow job runs as the Actions runner's user: it cannot read the
    // Drover runner's token.
    let out = Command::new("runuser")
        .args(["-u", &actions_user, "--", "cat"])
        .arg(&token_file)
        .output()
        .unwrap();
    assert!(
        !out.status.success(),
        "{actions_user} read the Drover runner's token"
    );
    assert!(!String::from_utf8_lossy(&out.stdout).contains(&token));

    // A job tries every credential file, then does ordinary work.
    let targets = [
        token_file.clone(),
        runner_dir.join(".runner"),
        runner_dir.join(".credentials"),
        runner_dir.join(".credentials_rsaparams"),
    ];
    let mut job = String::from("echo \"uid=$(id -u)\"\n");
    for t in &targets {
        job.push_str(&format!(
            "if cat '{t}' >/dev/null && [ -s '{t}' ]; then echo 'READ {t}'; cat '{t}'; else echo 'no secret in {t}'; fi\n",
            t = t.display()
        ));
    }
    job.push_str(&format!(
        "ls -la '{}' '{}' 2>&1\necho built > out && cat out && echo ordinary-work-done\n",
        token_file.parent().unwrap().display(),
        runner_dir.display()
    ));
    let submitted = admin
        .client
        .submit(&script_job(&done.workflow_hint.runtime, &job))
        .await
        .unwrap();
    let finished = wait_done(&admin.client, &submitted.id).await;
    let log = admin.client.logs(&submitted.id).await.unwrap();
    println!("the job's log:\n{log}");
    assert_eq!(finished.state, JobState::Succeeded, "{log}");
    assert!(log.contains("built\nordinary-work-done"), "{log}");
    assert!(
        log.contains(&format!("uid={}", uid_of(&job_user))),
        "the job runs as {job_user}: {log}"
    );
    for t in &targets {
        assert!(
            log.contains(&format!("no secret in {}", t.display())),
            "{}: {log}",
            t.display()
        );
    }
    assert!(!log.contains("READ "), "a job read a credential:\n{log}");
    assert!(
        !log.contains(&token),
        "the job read the runner token:\n{log}"
    );
    assert!(
        !log.contains(&actions_secret),
        "the job read the Actions runner's credentials:\n{log}"
    );
    drop(runner);
    drop(added);
}
