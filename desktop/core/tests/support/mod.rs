//! What the desktop tests share: a private Secret Service (a session bus
//! and GNOME Keyring unlocked with a throwaway password, from Debian's
//! packages), stand-ins for NetworkManager and logind on that bus
//! (`system`), and a supervisor on a real coordinator.

#![allow(dead_code)]

pub mod system;

use std::io::{BufRead as _, BufReader, Write as _};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use drover_desktop_core::supervisor::{Notice, Options, Status, Supervisor};
use drover_tests::runner_core::runner::RunnerSettings;
use drover_tests::runner_core::wire::{JobState, SubmitJob};
use drover_tests::{DEADLINE, Member, TempDir, eventually};

/// A session bus with a Secret Service on it, gone on drop.
pub struct SecretService {
    bus: Child,
    keyring: Child,
    pub dir: TempDir,
}

impl SecretService {
    /// Points this process at a fresh bus and keyring. Call it first in a
    /// test, before any thread starts: it sets environment variables.
    pub fn start() -> Self {
        let dir = TempDir::new("keyring");
        let run = dir.path().join("run");
        std::fs::create_dir_all(&run).unwrap();
        std::fs::set_permissions(&run, std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .unwrap();
        let mut bus = Command::new("dbus-daemon")
            .args(["--session", "--nofork", "--nopidfile", "--print-address=1"])
            .stdout(Stdio::piped())
            .spawn()
            .expect("dbus-daemon (Debian package dbus) is needed for the keychain tests");
        let mut address = String::new();
        BufReader::new(bus.stdout.take().unwrap())
            .read_line(&mut address)
            .unwrap();
        // SAFETY: the test has not started any thread yet.
        unsafe {
            std::env::set_var("DBUS_SESSION_BUS_ADDRESS", address.trim());
            // The system bus too (NetworkManager, logind): no test asks
            // this machine's own, so none depends on its network or power.
            std::env::set_var("DBUS_SYSTEM_BUS_ADDRESS", address.trim());
            // Quiet hours are local time: UTC here, whatever the machine's zone.
            std::env::set_var("TZ", "UTC");
            std::env::set_var("XDG_RUNTIME_DIR", &run);
            std::env::set_var("XDG_DATA_HOME", dir.path().join("data"));
            std::env::set_var("XDG_CONFIG_HOME", dir.path().join("config"));
            std::env::set_var("DROVER_POWER_SUPPLY_DIR", dir.path().join("power"));
        }
        let mut keyring = Command::new("gnome-keyring-daemon")
            .args(["--unlock", "--components=secrets", "--foreground"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("gnome-keyring-daemon (Debian package gnome-keyring) is needed for the keychain tests");
        let mut stdin = keyring.stdin.take().unwrap();
        stdin.write_all(b"throwaway-test-password").unwrap();
        drop(stdin);
        let service = Self { bus, keyring, dir };
        // Ready once the Secret Service answers.
        let end = std::time::Instant::now() + DEADLINE;
        while !has_owner("org.freedesktop.secrets") {
            assert!(
                std::time::Instant::now() < end,
                "the Secret Service did not start"
            );
            std::thread::yield_now();
        }
        service
    }

    /// The items with `service=drover`, as `secret-tool search` prints them.
    pub fn items(&self) -> String {
        let out = Command::new("secret-tool")
            .args(["search", "--all", "--unlock", "service", "drover"])
            .output()
            .expect("secret-tool (Debian package libsecret-tools)");
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    }
}

fn has_owner(name: &str) -> bool {
    Command::new("dbus-send")
        .args([
            "--session",
            "--print-reply",
            "--dest=org.freedesktop.DBus",
            "/org/freedesktop/DBus",
            "org.freedesktop.DBus.NameHasOwner",
            &format!("string:{name}"),
        ])
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("boolean true"))
}

impl Drop for SecretService {
    fn drop(&mut self) {
        let _ = self.keyring.kill();
        let _ = self.keyring.wait();
        let _ = self.bus.kill();
        let _ = self.bus.wait();
    }
}

pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Runner settings for tests: quick backoff and short long-polls.
pub fn runner_settings(dir: &TempDir) -> RunnerSettings {
    RunnerSettings {
        lease_wait: Duration::from_secs(2),
        initial_backoff: Duration::from_millis(20),
        max_backoff: Duration::from_millis(200),
        work_root: dir.path().join("work"),
        ..RunnerSettings::default()
    }
}

pub fn config_path(dir: &TempDir) -> PathBuf {
    dir.path()
        .join("config")
        .join("drover")
        .join("desktop.json")
}

/// How often the tests' supervisors look at power, network and clock.
pub const TICK: Duration = Duration::from_millis(200);

/// A supervisor whose notices are collected for the test to read.
pub async fn supervisor(dir: &TempDir) -> (Arc<Supervisor>, Arc<std::sync::Mutex<Vec<String>>>) {
    supervisor_ticking(dir, TICK).await
}

/// [`supervisor`], looking at power, network, clock and its account every
/// `tick` (the first look at once).
pub async fn supervisor_ticking(
    dir: &TempDir,
    tick: Duration,
) -> (Arc<Supervisor>, Arc<std::sync::Mutex<Vec<String>>>) {
    let notes = Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = notes.clone();
    let sup = Supervisor::start(Options {
        config_path: config_path(dir),
        device_name: "laptop".into(),
        runner: runner_settings(dir),
        hook: Box::new(move |notice| {
            let Notice::Notify { title, body } = notice;
            sink.lock().unwrap().push(format!("{title}: {body}"));
        }),
        client: Default::default(),
        tick,
    })
    .await
    .expect("supervisor starts");
    (sup, notes)
}

/// Submits a script job to `runtime` as `member`: its id.
pub async fn submit(member: &Member, runtime: &str, script: &str) -> String {
    let job = SubmitJob {
        runtime: runtime.into(),
        script: Some(script.into()),
        ..SubmitJob::default()
    };
    member.client.submit(&job).await.unwrap().id
}

/// Waits until `job` is in state `want`.
pub async fn wait_state(member: &Member, job: &str, want: JobState) {
    eventually(&format!("{job} {}", want.as_str()), DEADLINE, || async {
        (member.client.job(job).await.ok()?.state == want).then_some(())
    })
    .await
}

/// A supervisor paired with `member` through a pairing link, idle: it and
/// its one pool's ref.
pub async fn paired_idle(dir: &TempDir, member: &Member) -> (Arc<Supervisor>, String) {
    let (sup, _) = supervisor(dir).await;
    let code = member.client.pairing_code().await.unwrap();
    sup.open_link(&code.link).await.unwrap();
    let reference = sup.confirm_link().await.unwrap().pools[0].reference.clone();
    eventually("online", DEADLINE, || async {
        (sup.state().await.status == Status::Idle).then_some(())
    })
    .await;
    (sup, reference)
}
