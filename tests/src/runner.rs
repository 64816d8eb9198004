//! A `drover runner` process for a test, with its event lines collected.

use super::*;

/// A `drover runner` process; its event lines are collected.
pub struct RunnerProcess {
    child: Option<Child>,
    /// Each line with when the harness read it (unix ns), which is after
    /// the runner wrote it.
    lines: Arc<Mutex<Vec<(u128, String)>>>,
    /// Set when the current process's stderr has been read to its end.
    read_all: Arc<std::sync::atomic::AtomicBool>,
    /// The program (`drover`) and its arguments.
    program: PathBuf,
    args: Vec<String>,
    /// Extra environment for the process.
    env: Vec<(String, String)>,
    /// Only `env`: nothing of the test's own environment.
    clear_env: bool,
}

impl RunnerProcess {
    /// `drover runner <args>` against `url`.
    pub fn spawn(url: &str, args: &[&str]) -> Self {
        Self::spawn_with_env(url, args, &[])
    }

    /// `drover runner <args>` against `url`, with more environment.
    pub fn spawn_with_env(url: &str, args: &[&str], env: &[(&str, &str)]) -> Self {
        Self::spawn_program(&bin("drover"), url, args, env)
    }

    /// As `spawn_with_env`, with another `drover` binary (e.g. one
    /// installed as a user installs it).
    pub fn spawn_program(program: &Path, url: &str, args: &[&str], env: &[(&str, &str)]) -> Self {
        let mut full = vec![
            "runner".to_owned(),
            "--url".to_owned(),
            url.to_owned(),
            "--kill-grace".to_owned(),
            "2".to_owned(),
            "--max-backoff-ms".to_owned(),
            "500".to_owned(),
        ];
        full.extend(args.iter().map(|s| s.to_string()));
        let mut p = Self {
            child: None,
            lines: Arc::default(),
            read_all: Arc::default(),
            program: program.to_owned(),
            args: full,
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            clear_env: false,
        };
        p.start();
        p
    }

    /// `program args…` exactly so, with only `env` (as a service manager
    /// starts it): no flag and nothing of the test's environment added.
    pub fn exact(program: &Path, args: &[String], env: &[(String, String)]) -> Self {
        let mut p = Self {
            child: None,
            lines: Arc::default(),
            read_all: Arc::default(),
            program: program.to_owned(),
            args: args.to_vec(),
            env: env.to_vec(),
            clear_env: true,
        };
        p.start();
        p
    }

    fn start(&mut self) {
        let mut command = Command::new(&self.program);
        if self.clear_env {
            command.env_clear();
        }
        let mut child = command
            .args(&self.args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn drover runner");
        let stderr = child.stderr.take().expect("stderr");
        let lines = self.lines.clone();
        let read_all = Arc::new(std::sync::atomic::AtomicBool::new(false));
        self.read_all = read_all.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                lines.lock().expect("lines").push((unix_ns(), line));
            }
            read_all.store(true, std::sync::atomic::Ordering::SeqCst);
        });
        self.child = Some(child);
    }

    /// Joins `n` runners to `reference` with a join token, credentials in `state`.
    pub fn join(
        url: &str,
        reference: &str,
        join_token: &str,
        n: usize,
        state: &Path,
        extra: &[&str],
    ) -> Self {
        let n = n.to_string();
        let state = state.display().to_string();
        let mut args = vec![
            "--join",
            reference,
            "--token",
            join_token,
            "--runners",
            &n,
            "--state-dir",
            &state,
        ];
        args.extend_from_slice(extra);
        Self::spawn(url, &args)
    }

    /// One paired runner (`rnr_…` token).
    pub fn paired(url: &str, token: &str, extra: &[&str]) -> Self {
        let mut args = vec!["--token", token];
        args.extend_from_slice(extra);
        Self::spawn(url, &args)
    }

    pub fn lines(&self) -> Vec<String> {
        let lines = self.lines.lock().expect("lines");
        lines.iter().map(|(_, l)| l.clone()).collect()
    }

    /// The lines with the time the harness read each (unix ns).
    pub fn timed_lines(&self) -> Vec<(u128, String)> {
        self.lines.lock().expect("lines").clone()
    }

    /// Waits until `n` lines contain `needle`.
    pub async fn wait_for_lines(&self, needle: &str, n: usize) {
        eventually(
            &format!("{n} runner lines containing {needle:?}"),
            DEADLINE,
            || {
                let count = self.lines().iter().filter(|l| l.contains(needle)).count();
                async move { (count >= n).then_some(()) }
            },
        )
        .await
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// The ids of the runners this process has brought online.
    pub fn runner_ids(&self) -> std::collections::HashSet<String> {
        self.lines()
            .iter()
            .filter_map(|l| l.strip_prefix("runner ")?.strip_suffix(": online"))
            .map(str::to_owned)
            .collect()
    }

    pub async fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            signal(&child, libc::SIGKILL);
            wait_exit(&mut child, DEADLINE).await;
        }
    }

    pub fn sigterm(&self) {
        signal(self.child.as_ref().expect("running"), libc::SIGTERM);
    }

    /// Waits for the process to exit and for every line it wrote.
    pub async fn wait_exit(&mut self) -> ExitStatus {
        let mut child = self.child.take().expect("running");
        let status = wait_exit(&mut child, DEADLINE).await;
        let read_all = self.read_all.clone();
        eventually("the runner's last lines", DEADLINE, || {
            let done = read_all.load(std::sync::atomic::Ordering::SeqCst);
            async move { done.then_some(()) }
        })
        .await;
        status
    }

    /// Starts the same command again (same state dir, so the same runners).
    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "stop it first");
        self.start();
    }
}

impl Drop for RunnerProcess {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            signal(&child, libc::SIGKILL);
            let _ = child.wait();
        }
        if std::thread::panicking() {
            eprintln!("--- runner output ---\n{}", self.lines().join("\n"));
        }
    }
}
