//! The app's settings file, `$XDG_CONFIG_HOME/drover/desktop.json`: who is
//! signed in where, the pools this machine lends to and how, and the
//! toggles. Never a secret: those live in the OS keychain (`keychain`).

use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct Config {
    pub account: Option<Account>,
    pub pools: Vec<PoolConfig>,
    pub paused: bool,
    /// The toggles: start at login and the laptop's manners.
    #[serde(flatten)]
    pub settings: Settings,
    /// Runners removed while their credential could not yet be revoked at
    /// the coordinator: retried at start (their keychain items stay until then).
    pub departing: Vec<Departing>,
    /// A PEM file of CA certificates trusted besides the operating
    /// system's roots, for a coordinator whose certificate a private CA
    /// signed (`DROVER_CA_FILE` wins over it). Relative to this file's directory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<PathBuf>,
}

/// Start at login, and when this machine holds new jobs on its own: on
/// battery, on a metered network, in quiet hours; and whether it keeps
/// the machine awake while a job runs. Missing from an older file: on,
/// except start at login and quiet hours.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", default)]
pub struct Settings {
    pub autostart: bool,
    pub pause_on_battery: bool,
    pub pause_on_metered: bool,
    pub quiet_hours: Option<QuietHours>,
    pub keep_awake: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            autostart: false,
            pause_on_battery: true,
            pause_on_metered: true,
            quiet_hours: None,
            keep_awake: true,
        }
    }
}

pub use crate::quiet::QuietHours;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Account {
    pub coordinator: String,
    pub workspace: String,
    pub email: String,
    pub subject: String,
    pub role: String,
    pub device_name: Option<String>,
    pub token_id: Option<String>,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub enum PoolKind {
    /// The signed-in member's own pool: runners are paired with the account.
    Personal,
    /// Lent through a join link: runners join with the pool's join token.
    Workspace,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PoolConfig {
    pub coordinator: String,
    #[serde(rename = "ref")]
    pub reference: String,
    pub runtime_id: String,
    pub name: String,
    pub kind: PoolKind,
    /// Runners this machine lends to the pool.
    pub runners: usize,
    /// Jobs each runner runs at once.
    pub slots: usize,
    pub labels: Vec<String>,
    /// A workspace pool's jobs (other people's) run in a sandbox; where
    /// this machine has none, the app refuses to lend to the pool unless
    /// the member set this. Unused where a sandbox works, and for a
    /// personal pool (its jobs are the member's own).
    #[serde(default)]
    pub allow_unsandboxed: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Departing {
    pub coordinator: String,
    pub runner_id: String,
    /// The keychain key of its credential.
    pub key: String,
}

/// Where the settings file lives: `$XDG_CONFIG_HOME/drover/desktop.json`.
pub fn default_path() -> Option<PathBuf> {
    dirs::config_dir().map(|d| d.join("drover").join("desktop.json"))
}

impl Config {
    /// The saved settings, or the defaults when there are none yet.
    pub fn load(path: &Path) -> io::Result<Self> {
        match std::fs::read(path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{}: {e}", path.display()),
                )
            }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Self::default()),
            Err(e) => Err(e),
        }
    }

    /// Written whole to a temporary file, then renamed over the old one.
    pub fn save(&self, path: &Path) -> io::Result<()> {
        write_json(path, self)
    }

    pub fn pool(&self, reference: &str) -> Option<&PoolConfig> {
        self.pools.iter().find(|p| p.reference == reference)
    }

    pub fn pool_mut(&mut self, reference: &str) -> Option<&mut PoolConfig> {
        self.pools.iter_mut().find(|p| p.reference == reference)
    }
}

/// Writes `value` as JSON to `path` whole or not at all (a temporary file
/// renamed over it), readable by its user only.
pub fn write_json(path: &Path, value: &impl Serialize) -> io::Result<()> {
    use std::io::Write as _;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension("json.tmp");
    #[cfg_attr(windows, allow(unused_mut))]
    let mut options = std::fs::OpenOptions::new();
    // Its user's only (on Windows, the profile's directory is).
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.write(true).create(true).truncate(true).open(&tmp)?;
    file.write_all(&serde_json::to_vec_pretty(value).map_err(io::Error::other)?)?;
    file.sync_all()?;
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_round_trip_and_default_to_good_manners() {
        let dir = std::env::temp_dir().join(format!("drover-config-{}", std::process::id()));
        let path = dir.join("desktop.json");
        let fresh = Config::load(&path).unwrap();
        let s = &fresh.settings;
        assert!(s.pause_on_battery && s.pause_on_metered && s.keep_awake && fresh.pools.is_empty());
        assert!(!s.autostart && s.quiet_hours.is_none());
        let config = Config {
            pools: vec![PoolConfig {
                coordinator: "http://c".into(),
                reference: "self:u:default".into(),
                runtime_id: "rt_1".into(),
                name: "default".into(),
                kind: PoolKind::Personal,
                runners: 2,
                slots: 1,
                labels: vec!["gpu".into()],
                allow_unsandboxed: false,
            }],
            paused: true,
            settings: Settings {
                quiet_hours: Some(QuietHours::new("22:30", "07:00").unwrap()),
                pause_on_metered: false,
                ..Settings::default()
            },
            ..fresh
        };
        config.save(&path).unwrap();
        assert_eq!(Config::load(&path).unwrap(), config);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_pool_saved_before_the_sandbox_opt_out_existed_does_not_allow_it() {
        let old = r#"{"pools":[{"coordinator":"http://c","ref":"ws:a:b","runtimeId":"rt_1",
            "name":"b","kind":"workspace","runners":1,"slots":1,"labels":[]}]}"#;
        let config: Config = serde_json::from_str(old).unwrap();
        assert!(!config.pools[0].allow_unsandboxed);
    }

    #[test]
    fn a_file_from_before_the_laptop_manners_keeps_its_toggles_and_gets_the_new_ones_on() {
        let old = r#"{"paused":false,"autostart":true,"pauseOnBattery":false}"#;
        let config: Config = serde_json::from_str(old).unwrap();
        let s = config.settings;
        assert!(s.autostart && !s.pause_on_battery);
        assert!(s.pause_on_metered && s.keep_awake && s.quiet_hours.is_none());
    }
}
