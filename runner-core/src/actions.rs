//! GitHub Actions on demand, the runner's side (`drover runner
//! --github-actions`): a job that carries a just-in-time config in
//! `ACTIONS_RUNNER_INPUT_JITCONFIG` gets GitHub's Actions runner unpacked
//! into its own working directory before it starts (its command is
//! `./run.sh`). The release comes from a per-host cache: downloaded once,
//! its SHA-256 checked before it is kept, version pinned
//! ([`drover_wire::github::ACTIONS_RUNNER_VERSION`]) and configurable. The
//! Actions runner then runs as any job of the runner does (its sandbox, its
//! user) and goes with the job's directory.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use drover_wire::github::{
    ACTIONS_JIT_CONFIG_ENV, ACTIONS_RUNNER_SHA256_LINUX_X64, ACTIONS_RUNNER_VERSION,
};
use drover_wire::{LeasedJob, LogStream};
use sha2::{Digest as _, Sha256};
use tokio::io::AsyncWriteExt as _;

use crate::isolation::JobUser;

/// Which release, from where, checked against what, kept where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActionsRunner {
    pub version: String,
    /// The release's tarball (a zip on Windows).
    pub url: String,
    /// Its SHA-256, lower-case hex.
    pub sha256: String,
    /// The per-host cache: one file per checksum.
    pub cache: PathBuf,
}

/// actions/runner's name for this system and architecture, and its archive.
fn platform() -> Option<(String, &'static str)> {
    let os = match std::env::consts::OS {
        "linux" => "linux",
        "macos" => "osx",
        "windows" => "win",
        _ => return None,
    };
    let arch = match std::env::consts::ARCH {
        "x86_64" => "x64",
        "aarch64" => "arm64",
        "arm" => "arm",
        _ => return None,
    };
    let ext = if os == "win" { "zip" } else { "tar.gz" };
    Some((format!("{os}-{arch}"), ext))
}

/// Where the cache is unless told: the user's cache directory.
pub fn default_cache() -> PathBuf {
    dirs::cache_dir()
        .unwrap_or_else(std::env::temp_dir)
        .join("drover")
        .join("actions-runner")
}

impl ActionsRunner {
    /// The pinned release for this host unless `version` (then `sha256`
    /// too) or `url` say otherwise. A checksum is always known before
    /// anything is downloaded: GitHub publishes one per release and file.
    pub fn new(
        version: Option<String>,
        url: Option<String>,
        sha256: Option<String>,
        cache: Option<PathBuf>,
    ) -> Result<Self, String> {
        let (platform, ext) = platform().ok_or_else(|| {
            format!(
                "GitHub publishes no Actions runner for {}-{}",
                std::env::consts::OS,
                std::env::consts::ARCH
            )
        })?;
        let pinned = version.is_none() && url.is_none();
        let version = version.unwrap_or_else(|| ACTIONS_RUNNER_VERSION.to_owned());
        if version.is_empty() || !version.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
            return Err(format!(
                "--actions-runner-version {version:?} is not a release number like 2.319.1"
            ));
        }
        let sha256 = match sha256 {
            Some(s) => s.to_ascii_lowercase(),
            None if pinned && platform == "linux-x64" => ACTIONS_RUNNER_SHA256_LINUX_X64.to_owned(),
            None => {
                return Err(format!(
                    "give --actions-runner-sha256 for actions-runner-{platform}-{version}.{ext}: \
                     the SHA-256 GitHub publishes on the release's page (Drover pins one for linux-x64 {ACTIONS_RUNNER_VERSION} only)"
                ));
            }
        };
        if sha256.len() != 64 || !sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err("--actions-runner-sha256 must be 64 hex digits".into());
        }
        let url = url.unwrap_or_else(|| {
            format!(
                "https://github.com/actions/runner/releases/download/v{version}/actions-runner-{platform}-{version}.{ext}"
            )
        });
        Ok(Self {
            version,
            url,
            sha256,
            cache: cache.unwrap_or_else(default_cache),
        })
    }

    /// Whether `job` is one to give the Actions runner to.
    pub fn wanted_by(job: &LeasedJob) -> bool {
        job.env.iter().any(|(k, _)| k == ACTIONS_JIT_CONFIG_ENV)
    }

    fn cached(&self) -> PathBuf {
        self.cache.join(format!("{}.archive", self.sha256))
    }
}

/// Makes `cache` (0700 if new) and checks it is this user's own directory,
/// not a link, that no one else may write to: else another user of the
/// host could put an archive of their own where a checked one is looked for.
fn own_cache(cache: &Path) -> Result<(), String> {
    let shown = cache.display();
    #[cfg(unix)]
    {
        use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _};
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(cache)
            .map_err(|e| format!("making the cache {shown}: {e}"))?;
        let meta =
            std::fs::symlink_metadata(cache).map_err(|e| format!("the cache {shown}: {e}"))?;
        // SAFETY: geteuid has no preconditions.
        let me = unsafe { libc::geteuid() };
        if !meta.is_dir() || meta.uid() != me || meta.mode() & 0o022 != 0 {
            return Err(format!(
                "the cache {shown} is not this user's own directory closed to others (choose another with --actions-runner-cache)"
            ));
        }
    }
    #[cfg(windows)]
    std::fs::create_dir_all(cache).map_err(|e| format!("making the cache {shown}: {e}"))?;
    Ok(())
}

/// The Actions runner for a fleet's jobs: one download at a time.
pub struct Provider {
    spec: ActionsRunner,
    http: reqwest::Client,
    /// The system's `tar` (bsdtar on Windows and macOS reads zips too).
    tar: Option<PathBuf>,
    downloading: tokio::sync::Mutex<()>,
}

impl Provider {
    pub fn new(spec: ActionsRunner, tar: Option<PathBuf>) -> Self {
        // A stalled download fails rather than hold every on-demand job.
        let http = reqwest::Client::builder()
            .connect_timeout(std::time::Duration::from_secs(30))
            .read_timeout(std::time::Duration::from_secs(60))
            .build()
            .unwrap_or_default();
        Self {
            spec,
            http,
            tar,
            downloading: tokio::sync::Mutex::new(()),
        }
    }

    pub fn spec(&self) -> &ActionsRunner {
        &self.spec
    }

    /// The release in the cache, downloaded and checked first if it is not
    /// there. The cache is this user's own directory, closed to others
    /// ([`own_cache`]), so a file in it is one this user checked. Another
    /// process of the host may fill it at the same time: each writes its
    /// own file and renames it into place, checked.
    async fn archive(&self) -> Result<PathBuf, String> {
        let path = self.spec.cached();
        let _one = self.downloading.lock().await;
        own_cache(&self.spec.cache)?;
        if tokio::fs::metadata(&path).await.is_ok() {
            return Ok(path);
        }
        let mut nonce = [0u8; 6];
        let _ = getrandom::fill(&mut nonce);
        let nonce: String = nonce.iter().map(|b| format!("{b:02x}")).collect();
        let part = self
            .spec
            .cache
            .join(format!("{}.{nonce}.part", self.spec.sha256));
        let result = self.download(&part).await;
        match result {
            Ok(()) => tokio::fs::rename(&part, &path)
                .await
                .map_err(|e| format!("keeping {}: {e}", path.display()))
                .map(|()| path),
            Err(e) => {
                let _ = tokio::fs::remove_file(&part).await;
                Err(e)
            }
        }
    }

    async fn download(&self, to: &Path) -> Result<(), String> {
        let url = &self.spec.url;
        let mut resp = self
            .http
            .get(url)
            .send()
            .await
            .and_then(reqwest::Response::error_for_status)
            .map_err(|e| format!("downloading {url}: {e}"))?;
        let mut file = tokio::fs::File::create(to)
            .await
            .map_err(|e| format!("writing {}: {e}", to.display()))?;
        let mut hash = Sha256::new();
        while let Some(chunk) = resp
            .chunk()
            .await
            .map_err(|e| format!("downloading {url}: {e}"))?
        {
            hash.update(&chunk);
            file.write_all(&chunk)
                .await
                .map_err(|e| format!("writing {}: {e}", to.display()))?;
        }
        file.sync_all()
            .await
            .map_err(|e| format!("writing {}: {e}", to.display()))?;
        let got: String = hash.finalize().iter().map(|b| format!("{b:02x}")).collect();
        if got != self.spec.sha256 {
            return Err(format!(
                "{url} has SHA-256 {got}, not the {} it must have: not used",
                self.spec.sha256
            ));
        }
        Ok(())
    }

    /// Gives `job` the Actions runner in its directory `dir` if it is an
    /// on-demand job; what went wrong, for the job's error, also written
    /// to its log.
    pub async fn prepare(
        &self,
        job: &LeasedJob,
        dir: &Path,
        user: Option<JobUser>,
        out: &crate::exec::Output,
    ) -> Result<(), String> {
        if !ActionsRunner::wanted_by(job) {
            return Ok(());
        }
        let (line, result) = match self.provide(&dir.join("work"), user).await {
            Ok(line) => (line, Ok(())),
            Err(e) => {
                let error = format!("could not provide the Actions runner: {e}");
                (format!("drover: {error}\n"), Err(error))
            }
        };
        let _ = out.send((LogStream::Stderr, line.into_bytes())).await;
        result
    }

    /// Unpacks the Actions runner into `work` (the job's working
    /// directory), as the job's user when there is one, so the runner may
    /// write its own files there. Answers a line for the job's log.
    pub async fn provide(&self, work: &Path, user: Option<JobUser>) -> Result<String, String> {
        let archive = self.archive().await?;
        let tar = self
            .tar
            .as_ref()
            .ok_or("this runner has no tar on its PATH to unpack the Actions runner")?;
        let file = std::fs::File::open(&archive)
            .map_err(|e| format!("reading {}: {e}", archive.display()))?;
        let mut cmd = tokio::process::Command::new(tar);
        // None of the runner's environment (its token) reaches it: it runs
        // as the job's user.
        #[cfg(unix)]
        cmd.env_clear().env("PATH", "/usr/bin:/bin");
        cmd.arg(if cfg!(windows) { "-xf" } else { "-xzf" })
            .arg("-")
            .current_dir(work)
            .stdin(Stdio::from(file))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        #[cfg(unix)]
        if let Some(u) = user {
            cmd.uid(u.uid).gid(u.gid);
        }
        #[cfg(windows)]
        let _ = user;
        let out = cmd
            .output()
            .await
            .map_err(|e| format!("starting {}: {e}", tar.display()))?;
        if !out.status.success() {
            return Err(format!(
                "unpacking the Actions runner failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(format!(
            "drover: Actions runner {} (sha256 {}) unpacked from the cache\n",
            self.spec.version,
            &self.spec.sha256[..12]
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pin_needs_no_checksum_on_linux_x64_and_anything_else_does() {
        let pinned = ActionsRunner::new(None, None, None, Some("/c".into()));
        if cfg!(all(target_os = "linux", target_arch = "x86_64")) {
            let a = pinned.unwrap();
            assert_eq!(a.sha256, ACTIONS_RUNNER_SHA256_LINUX_X64);
            assert!(
                a.url
                    .ends_with("/v2.319.1/actions-runner-linux-x64-2.319.1.tar.gz")
            );
        }
        let other = ActionsRunner::new(Some("2.320.0".into()), None, None, None);
        assert!(other.unwrap_err().contains("--actions-runner-sha256"));
        let bad = ActionsRunner::new(Some("2.320.0".into()), None, Some("abc".into()), None);
        assert_eq!(
            bad.unwrap_err(),
            "--actions-runner-sha256 must be 64 hex digits"
        );
        let shell = ActionsRunner::new(Some("1;rm".into()), None, Some("a".repeat(64)), None);
        assert!(shell.unwrap_err().contains("is not a release number"));
    }
}
