//! The app's engine: the pools this machine lends to, one runner-core
//! [`Fleet`] each, with their credentials in the keychain and their shape
//! in the config file. Every surface (tray, settings window, deep links)
//! goes through here; nothing here knows about windows or menus.
//!
//! This module: what the UI sees (`AppState`), the supervisor and its
//! state; `account` signs in and out and opens links, `runners` lends,
//! adds and removes runners, `control` pauses, quits and hears runners'
//! events.

mod account;
mod control;
mod runners;

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use drover_wire::{ErrorCode, JobState, PairRunner};
use runner_core::client::{Client, ClientError, ClientOptions, Scope, Token};
use runner_core::credentials::{self, CredentialStore, StoredCredential};
use runner_core::fleet::Fleet;
use runner_core::runner::{Credential, Event, EventKind, RunnerSettings};
use serde::{Deserialize, Serialize};
use tokio::sync::{Mutex, Notify, watch};

use crate::awake::KeepAwake;
pub use crate::config::{Account, PoolKind, QuietHours, Settings};
use crate::config::{Config, Departing, PoolConfig};
use crate::error::{AppError, AppResult};
use crate::keychain::{self, Keychain};
use crate::links::Link;
use crate::{metered, power, quiet};

/// Most activity entries kept for the settings window, and across restarts
/// (in `activity.json` beside the settings; no secrets are in them).
const ACTIVITY: usize = 200;
/// How often power, the network, the clock (quiet hours) and unrevoked
/// departures are looked at again.
pub const TICK: Duration = Duration::from_secs(15);

// ------------------------------------------------------------ what the UI sees

#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub enum Status {
    SignedOut,
    Idle,
    Busy,
    Offline,
    Paused,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AppState {
    pub status: Status,
    pub paused: bool,
    pub on_battery: bool,
    /// NetworkManager calls the connection metered.
    pub metered: bool,
    /// Within the quiet hours now.
    pub quiet: bool,
    /// Why new jobs wait though not paused by hand, in words ("On battery
    /// power", "Quiet hours until 07:00"), when they do.
    pub held: Option<String>,
    pub quitting: bool,
    pub account: Option<Account>,
    pub pools: Vec<LocalPool>,
    pub settings: Settings,
    pub pending: Option<PendingLink>,
    /// Why a link just opened was refused (signed in already, a revoked
    /// join token), said before anything is asked; until dismissed.
    pub link_refused: Option<String>,
    pub activity: Vec<Activity>,
    /// Why the coordinator signed this device out (its token revoked: by
    /// whom, from where, when), until it signs in again.
    pub signed_out: Option<String>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct LocalPool {
    /// The coordinator it is lent to (the window warns of plain http://).
    pub coordinator: String,
    #[serde(rename = "ref")]
    pub reference: String,
    pub runtime_id: String,
    pub name: String,
    pub kind: PoolKind,
    pub runners: usize,
    pub slots: usize,
    pub labels: Vec<String>,
    pub live: Vec<LocalRunner>,
    /// The member's opt-out: lend this workspace pool even where no
    /// sandbox is available.
    pub allow_unsandboxed: bool,
    /// While lent: whether its jobs run in a sandbox (bubblewrap).
    pub sandboxed: Option<bool>,
    /// Why the app refused to lend to it (no sandbox on this machine).
    pub refused: Option<String>,
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct LocalRunner {
    pub id: String,
    /// Its name at the coordinator (`<device>-<n>`), as every listing shows it.
    pub name: String,
    pub online: bool,
    pub draining: bool,
    pub current_jobs: Vec<String>,
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct PendingLink {
    pub kind: &'static str,
    pub coordinator: String,
    /// The pool it joins: for a join link, the one the coordinator says
    /// the token joins (`GET /v1/runner/join-token`), not the link's text.
    pub pool: String,
    /// A join link's own `ref=`, when it names another pool than the
    /// coordinator's answer (the dialog says the link's text differed).
    pub link_pool: Option<String>,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub enum ActivityKind {
    Paired,
    JobFailed,
    Unreachable,
    Reconnected,
    SignedOut,
    Info,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Activity {
    /// Unix milliseconds.
    pub at: u64,
    pub kind: ActivityKind,
    /// What happened and what to do, in a sentence.
    pub message: String,
    /// The error behind it in the client's or coordinator's own words
    /// (shown behind a disclosure), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// What the shell is told besides the state (which it watches, see
/// [`Supervisor::watch`]).
#[derive(Debug, Clone)]
pub enum Notice {
    /// Worth a desktop notification.
    Notify { title: String, body: String },
}

pub type Hook = Box<dyn Fn(Notice) + Send + Sync>;

/// How a supervisor is set up; the app takes the defaults, tests their own.
pub struct Options {
    pub config_path: PathBuf,
    /// Names this device's token and runners.
    pub device_name: String,
    /// Runner settings before the pool's own slots and labels.
    pub runner: RunnerSettings,
    pub hook: Hook,
    /// How the app reaches coordinators: the operating system's roots,
    /// plus `ca_file` (the app passes `DROVER_CA_FILE`), which wins over
    /// the settings file's `caFile`.
    pub client: ClientOptions,
    /// How often power, the network and the clock are looked at ([`TICK`]).
    pub tick: Duration,
}

// ------------------------------------------------------------ the engine

struct Running {
    fleet: Fleet,
    /// Runner ids in the order added: index `i` is keychain key `<ref>-<i>`.
    members: Vec<(String, Token)>,
    /// Removed runners draining, by id: their credential, to revoke.
    leaving: HashMap<String, Token>,
}

struct Inner {
    config: Config,
    account_token: Option<Token>,
    pools: HashMap<String, Running>,
    pending: Option<Held>,
    /// Why the last link opened was refused, until dismissed or another opens.
    link_refused: Option<String>,
    activity: VecDeque<Activity>,
    on_battery: bool,
    metered: bool,
    /// Within the quiet hours, as of the last look at the clock.
    quiet: bool,
    quitting: bool,
    /// Runners whose last call to the coordinator failed.
    disconnected: HashSet<String>,
    /// Runners' names at the coordinator, by id, as their hellos told them.
    names: HashMap<String, String>,
    /// Pools not lent for want of a sandbox: why, by ref.
    refused: HashMap<String, String>,
    /// Why the coordinator signed this device out, until it signs in again.
    signed_out: Option<String>,
}

/// A link held until the user confirms it, with the pool the coordinator
/// says a join link's token joins.
struct Held {
    link: Link,
    pool: Option<String>,
}

pub struct Supervisor {
    inner: Mutex<Inner>,
    /// The one current state every surface draws from: replaced, under
    /// `inner`'s lock, whenever something visible changes.
    state: watch::Sender<AppState>,
    /// Signalled whenever a runner stops (for `wait_stopped`).
    stopped: Notify,
    /// Held while a job runs (and the member keeps the machine awake).
    awake: KeepAwake,
    keychain: Keychain,
    options: Options,
    /// `options.client` with the settings' `caFile` when it had none.
    connect: ClientOptions,
    me: Weak<Supervisor>,
}

/// The account secret in the keychain.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct AccountSecret {
    url: String,
    token: String,
}

/// A pool's join token in the keychain.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct JoinSecret {
    url: String,
    #[serde(rename = "ref")]
    reference: String,
    token: String,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn io_err(e: std::io::Error) -> AppError {
    AppError::keychain(e)
}

impl Supervisor {
    /// Loads the settings and the keychain, restarts the runners they
    /// describe, and starts watching power and pending revocations.
    pub async fn start(options: Options) -> AppResult<Arc<Self>> {
        let config = Config::load(&options.config_path)
            .map_err(|e| AppError::new("INTERNAL", format!("reading settings: {e}")))?;
        let keychain = Keychain;
        let account_token = keychain
            .get_json::<AccountSecret>(keychain::ACCOUNT)
            .map_err(io_err)?
            .map(|s| Token::new(s.token));
        let connect = connect_options(&options, &config);
        // A CA file that cannot be used fails every request: say so now.
        let bad_ca = connect.http_builder().err();
        let metered = tokio::task::spawn_blocking(metered::metered_now)
            .await
            .unwrap_or(false);
        let quiet = in_quiet_hours(&config.settings);
        let inner = Inner {
            config,
            account_token,
            pools: HashMap::new(),
            pending: None,
            link_refused: None,
            activity: read_activity(&activity_path(&options)),
            on_battery: power::on_battery_now(),
            metered,
            quiet,
            quitting: false,
            disconnected: HashSet::new(),
            names: HashMap::new(),
            refused: HashMap::new(),
            signed_out: None,
        };
        let (state, _) = watch::channel(snapshot(&inner));
        let sup = Arc::new_cyclic(|me| Self {
            inner: Mutex::new(inner),
            state,
            stopped: Notify::new(),
            awake: KeepAwake::start(),
            keychain,
            options,
            connect,
            me: me.clone(),
        });
        {
            let mut inner = sup.inner.lock().await;
            if let Some(e) = bad_ca {
                sup.note(&mut inner, ActivityKind::Info, e.to_string());
            }
            let pools = inner.config.pools.clone();
            for pool in pools {
                if let Err(e) = sup.launch(&mut inner, &pool).await {
                    sup.note(
                        &mut inner,
                        ActivityKind::Info,
                        format!("could not restart {}: {e}", pool.name),
                    );
                }
            }
            sup.retry_departures(&mut inner).await;
        }
        let weak = Arc::downgrade(&sup);
        let every = sup.options.tick;
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            loop {
                tick.tick().await;
                let Some(sup) = weak.upgrade() else { return };
                sup.on_tick().await;
            }
        });
        sup.changed().await;
        Ok(sup)
    }

    pub async fn state(&self) -> AppState {
        let inner = self.inner.lock().await;
        snapshot(&inner)
    }

    /// The current state, and every change after it. A surface draws
    /// itself from `borrow_and_update()` when it is made and again after
    /// each `changed()`, so it cannot miss a change made meanwhile.
    pub fn watch(&self) -> watch::Receiver<AppState> {
        self.state.subscribe()
    }

    async fn changed(&self) {
        // Under the lock: the states are published in the order they happened.
        let inner = self.inner.lock().await;
        let state = snapshot(&inner);
        let running = state
            .pools
            .iter()
            .any(|p| p.live.iter().any(|r| !r.current_jobs.is_empty()));
        self.awake.set(running && inner.config.settings.keep_awake);
        self.state.send_if_modified(|shown| {
            let new = *shown != state;
            if new {
                *shown = state;
            }
            new
        });
    }
}

/// What the surfaces see, made from the engine's state.
fn snapshot(inner: &Inner) -> AppState {
    let paused = effective_pause(inner);
    let pools: Vec<LocalPool> = inner
        .config
        .pools
        .iter()
        .map(|p| LocalPool {
            coordinator: p.coordinator.clone(),
            reference: p.reference.clone(),
            runtime_id: p.runtime_id.clone(),
            name: p.name.clone(),
            kind: p.kind,
            runners: p.runners,
            slots: p.slots,
            labels: p.labels.clone(),
            allow_unsandboxed: p.allow_unsandboxed,
            sandboxed: inner
                .pools
                .get(&p.reference)
                .map(|r| r.fleet.isolation().sandbox.is_some()),
            refused: inner.refused.get(&p.reference).cloned(),
            live: inner
                .pools
                .get(&p.reference)
                .map(|r| {
                    r.fleet
                        .status()
                        .into_iter()
                        .map(|s| LocalRunner {
                            id: s.id,
                            name: s.name,
                            online: s.online,
                            draining: s.draining,
                            current_jobs: s.current_jobs,
                        })
                        .collect()
                })
                .unwrap_or_default(),
        })
        .collect();
    let live: Vec<&LocalRunner> = pools.iter().flat_map(|p| &p.live).collect();
    let status = if inner.config.account.is_none() && pools.is_empty() {
        Status::SignedOut
    } else if paused {
        Status::Paused
    } else if !inner.disconnected.is_empty() || (!live.is_empty() && live.iter().all(|r| !r.online))
    {
        Status::Offline
    } else if live.iter().any(|r| !r.current_jobs.is_empty()) {
        Status::Busy
    } else {
        Status::Idle
    };
    AppState {
        status,
        paused: inner.config.paused,
        on_battery: inner.on_battery,
        metered: inner.metered,
        quiet: inner.quiet,
        held: held(inner),
        quitting: inner.quitting,
        account: inner.config.account.clone(),
        pools,
        settings: inner.config.settings.clone(),
        link_refused: inner.link_refused.clone(),
        pending: inner.pending.as_ref().map(|held| match &held.link {
            Link::Pair { url, .. } => PendingLink {
                kind: "pair",
                coordinator: url.clone(),
                pool: "your personal pool".into(),
                link_pool: None,
            },
            Link::Join { url, reference, .. } => {
                let pool = held.pool.clone().unwrap_or_else(|| reference.clone());
                PendingLink {
                    kind: "join",
                    coordinator: url.clone(),
                    link_pool: (*reference != pool).then(|| reference.clone()),
                    pool,
                }
            }
        }),
        activity: inner.activity.iter().cloned().collect(),
        signed_out: inner.signed_out.clone(),
    }
}

impl Supervisor {
    fn note(&self, inner: &mut Inner, kind: ActivityKind, message: String) {
        self.note_with(inner, kind, message, None);
    }

    /// A note with the error behind it.
    fn note_with(
        &self,
        inner: &mut Inner,
        kind: ActivityKind,
        message: String,
        detail: Option<String>,
    ) {
        match &detail {
            Some(detail) => tracing::info!(?kind, %detail, "{message}"),
            None => tracing::info!(?kind, "{message}"),
        }
        inner.activity.push_front(Activity {
            at: now_ms(),
            kind,
            message,
            detail,
        });
        inner.activity.truncate(ACTIVITY);
        if let Err(e) = crate::config::write_json(&activity_path(&self.options), &inner.activity) {
            tracing::warn!("saving the activity list: {e}");
        }
    }

    fn notify(&self, title: &str, body: &str) {
        (self.options.hook)(Notice::Notify {
            title: title.to_owned(),
            body: body.to_owned(),
        });
    }

    fn save(&self, inner: &Inner) -> AppResult<()> {
        inner
            .config
            .save(&self.options.config_path)
            .map_err(|e| AppError::new("INTERNAL", format!("saving settings: {e}")))
    }
}

impl Supervisor {
    /// A client of `url` trusting the OS's roots and the CA file, if any;
    /// its member requests are the desktop's in the coordinator's audit log.
    fn client(&self, url: &str, token: Token) -> AppResult<Client> {
        Client::with_options(url, token, &self.connect)
            .map(|c| c.with_surface("desktop"))
            .map_err(AppError::from)
    }

    fn account_client_of(&self, inner: &Inner) -> AppResult<Client> {
        match (&inner.config.account, &inner.account_token) {
            (Some(account), Some(token)) => self.client(&account.coordinator, token.clone()),
            _ => Err(AppError::not_signed_in()),
        }
    }
}

/// The CA file: the app's (`DROVER_CA_FILE`) or else the settings'
/// `caFile`, a relative one read from the settings file's directory.
fn connect_options(options: &Options, config: &Config) -> ClientOptions {
    let mut connect = options.client.clone();
    if connect.ca_file.is_none() {
        connect.ca_file = config
            .ca_file
            .as_ref()
            .map(|file| match options.config_path.parent() {
                Some(dir) => dir.join(file),
                None => file.clone(),
            });
    }
    connect
}

/// Where the activity list is kept: beside the settings file.
fn activity_path(options: &Options) -> PathBuf {
    options.config_path.with_file_name("activity.json")
}

/// The activity list saved by the last run; empty when there is none or it
/// cannot be read (it is a convenience, never a reason not to start).
fn read_activity(path: &std::path::Path) -> VecDeque<Activity> {
    let mut list: VecDeque<Activity> = match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|e| {
            tracing::warn!("ignoring {}: {e}", path.display());
            VecDeque::new()
        }),
        Err(_) => VecDeque::new(),
    };
    list.truncate(ACTIVITY);
    list
}

fn already_signed_in(account: &Account) -> AppError {
    AppError::new(
        "ALREADY_SIGNED_IN",
        format!(
            "signed in as {} on {}: sign out first",
            account.email, account.coordinator
        ),
    )
}

fn effective_pause(inner: &Inner) -> bool {
    inner.config.paused || held(inner).is_some()
}

/// Why new jobs wait on their own, if they do: the first reason that holds.
fn held(inner: &Inner) -> Option<String> {
    let s = &inner.config.settings;
    if s.pause_on_battery && inner.on_battery {
        Some("On battery power".into())
    } else if s.pause_on_metered && inner.metered {
        Some("On a metered network".into())
    } else if let (true, Some(hours)) = (inner.quiet, &s.quiet_hours) {
        Some(format!("Quiet hours until {}", hours.to))
    } else {
        None
    }
}

fn in_quiet_hours(settings: &Settings) -> bool {
    settings
        .quiet_hours
        .as_ref()
        .is_some_and(|h| h.contains(quiet::local_minute_now()))
}

fn apply_pause(inner: &Inner) {
    let paused = effective_pause(inner);
    for running in inner.pools.values() {
        running.fleet.set_paused(paused);
    }
}

/// A pool ref as a directory name.
fn sanitize(reference: &str) -> String {
    reference
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(ca_file: Option<&str>) -> Options {
        Options {
            config_path: "/home/ann/.config/drover/desktop.json".into(),
            device_name: "laptop".into(),
            runner: RunnerSettings::default(),
            hook: Box::new(|_| {}),
            client: ClientOptions {
                ca_file: ca_file.map(PathBuf::from),
            },
            tick: TICK,
        }
    }

    #[test]
    fn the_ca_file_is_the_environments_else_the_settings_next_to_them() {
        let settings = |file: Option<&str>| Config {
            ca_file: file.map(PathBuf::from),
            ..Config::default()
        };
        let ca = |o: &Options, c: &Config| connect_options(o, c).ca_file;
        assert_eq!(
            ca(&options(None), &settings(Some("company-ca.pem"))),
            Some("/home/ann/.config/drover/company-ca.pem".into())
        );
        assert_eq!(
            ca(&options(None), &settings(Some("/etc/ssl/ca.pem"))),
            Some("/etc/ssl/ca.pem".into())
        );
        assert_eq!(
            ca(
                &options(Some("/tmp/env-ca.pem")),
                &settings(Some("company-ca.pem"))
            ),
            Some("/tmp/env-ca.pem".into())
        );
        assert_eq!(ca(&options(None), &settings(None)), None);
    }
}
