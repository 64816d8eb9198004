//! The app's engine: the pools this machine lends to, one runner-core
//! [`Fleet`] each, with their credentials in the keychain and their shape
//! in the config file. Every surface (tray, settings window, deep links)
//! goes through here; nothing here knows about windows or menus.
//!
//! Over 500 lines because pairing, lending, removing with drain, pausing
//! and signing out all change the same state under one lock, and read best
//! side by side.

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use drover_wire::{ErrorCode, JobState, PairRunner};
use runner_core::client::{Client, Scope, Token};
use runner_core::credentials::{self, CredentialStore, StoredCredential};
use runner_core::fleet::Fleet;
use runner_core::runner::{Credential, Event, EventKind, RunnerSettings};
use serde::{Deserialize, Serialize};
use tokio::sync::{Mutex, Notify};

pub use crate::config::{Account, PoolKind};
use crate::config::{Config, Departing, PoolConfig};
use crate::error::{AppError, AppResult};
use crate::keychain::{self, Keychain};
use crate::links::Link;
use crate::power;

/// Most activity entries kept for the settings window.
const ACTIVITY: usize = 50;
/// How often power and unrevoked departures are looked at again.
const TICK: Duration = Duration::from_secs(15);

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
    pub quitting: bool,
    pub account: Option<Account>,
    pub pools: Vec<LocalPool>,
    pub settings: Settings,
    pub pending: Option<PendingLink>,
    pub activity: Vec<Activity>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct LocalPool {
    #[serde(rename = "ref")]
    pub reference: String,
    pub runtime_id: String,
    pub name: String,
    pub kind: PoolKind,
    pub runners: usize,
    pub slots: usize,
    pub labels: Vec<String>,
    pub live: Vec<LocalRunner>,
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct LocalRunner {
    pub id: String,
    pub online: bool,
    pub draining: bool,
    pub current_jobs: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Settings {
    pub autostart: bool,
    pub pause_on_battery: bool,
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct PendingLink {
    pub kind: &'static str,
    pub coordinator: String,
    pub pool: String,
}

#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub enum ActivityKind {
    Paired,
    JobFailed,
    Unreachable,
    Reconnected,
    Info,
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Activity {
    /// Unix milliseconds.
    pub at: u64,
    pub kind: ActivityKind,
    pub message: String,
}

/// What the shell (tray, window, notifications) is told.
#[derive(Debug, Clone)]
pub enum Notice {
    /// Something visible changed: here is the new state.
    Changed(Box<AppState>),
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
    pending: Option<Link>,
    activity: VecDeque<Activity>,
    on_battery: bool,
    quitting: bool,
    /// Runners whose last call to the coordinator failed.
    disconnected: HashSet<String>,
}

pub struct Supervisor {
    inner: Mutex<Inner>,
    /// Signalled whenever a runner stops (for `wait_stopped`).
    stopped: Notify,
    keychain: Keychain,
    options: Options,
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

fn client(url: &str, token: Token) -> AppResult<Client> {
    Client::new(url, token).map_err(AppError::from)
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
        let sup = Arc::new_cyclic(|me| Self {
            inner: Mutex::new(Inner {
                config,
                account_token,
                pools: HashMap::new(),
                pending: None,
                activity: VecDeque::new(),
                on_battery: power::on_battery(&power::supply_dir()),
                quitting: false,
                disconnected: HashSet::new(),
            }),
            stopped: Notify::new(),
            keychain,
            options,
            me: me.clone(),
        });
        {
            let mut inner = sup.inner.lock().await;
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
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(TICK);
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
        self.snapshot(&inner)
    }

    fn snapshot(&self, inner: &Inner) -> AppState {
        let paused = effective_pause(inner);
        let pools: Vec<LocalPool> = inner
            .config
            .pools
            .iter()
            .map(|p| LocalPool {
                reference: p.reference.clone(),
                runtime_id: p.runtime_id.clone(),
                name: p.name.clone(),
                kind: p.kind,
                runners: p.runners,
                slots: p.slots,
                labels: p.labels.clone(),
                live: inner
                    .pools
                    .get(&p.reference)
                    .map(|r| {
                        r.fleet
                            .status()
                            .into_iter()
                            .map(|s| LocalRunner {
                                id: s.id,
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
        } else if !inner.disconnected.is_empty()
            || (!live.is_empty() && live.iter().all(|r| !r.online))
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
            quitting: inner.quitting,
            account: inner.config.account.clone(),
            pools,
            settings: Settings {
                autostart: inner.config.autostart,
                pause_on_battery: inner.config.pause_on_battery,
            },
            pending: inner.pending.as_ref().map(|link| match link {
                Link::Pair { url, .. } => PendingLink {
                    kind: "pair",
                    coordinator: url.clone(),
                    pool: "your personal pool".into(),
                },
                Link::Join { url, reference, .. } => PendingLink {
                    kind: "join",
                    coordinator: url.clone(),
                    pool: reference.clone(),
                },
            }),
            activity: inner.activity.iter().cloned().collect(),
        }
    }

    async fn changed(&self) {
        let state = self.state().await;
        (self.options.hook)(Notice::Changed(Box::new(state)));
    }

    fn note(&self, inner: &mut Inner, kind: ActivityKind, message: String) {
        tracing::info!(?kind, "{message}");
        inner.activity.push_front(Activity {
            at: now_ms(),
            kind,
            message,
        });
        inner.activity.truncate(ACTIVITY);
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

    // -------------------------------------------------------- the account

    /// A client with the signed-in member's token.
    pub async fn account_client(&self) -> AppResult<Client> {
        let inner = self.inner.lock().await;
        account_client(&inner)
    }

    /// Signs in with a pasted member API token (the fallback to pairing).
    pub async fn sign_in(&self, url: &str, token: &str) -> AppResult<AppState> {
        let url = url.trim().trim_end_matches('/');
        let token = token.trim();
        if token.is_empty() {
            return Err(AppError::invalid("paste an API token"));
        }
        let member = client(url, Token::new(token))?;
        let me = member.me().await?;
        let mut inner = self.inner.lock().await;
        if let Some(a) = &inner.config.account {
            return Err(already_signed_in(a));
        }
        self.keychain
            .set_json(
                keychain::ACCOUNT,
                &AccountSecret {
                    url: url.to_owned(),
                    token: token.to_owned(),
                },
            )
            .map_err(io_err)?;
        inner.account_token = Some(Token::new(token));
        inner.config.account = Some(Account {
            coordinator: url.to_owned(),
            workspace: me.workspace,
            email: me.email.clone(),
            subject: me.subject,
            role: me.role,
            device_name: me.token.as_ref().map(|t| t.name.clone()),
            token_id: me.token.map(|t| t.id),
        });
        self.save(&inner)?;
        self.note(
            &mut inner,
            ActivityKind::Paired,
            format!("signed in as {} on {url}", me.email),
        );
        drop(inner);
        self.changed().await;
        Ok(self.state().await)
    }

    /// Stops every runner at once, revokes this device's runners and
    /// token at the coordinator, and deletes every secret and setting.
    pub async fn sign_out(&self) -> AppResult<AppState> {
        let mut inner = self.inner.lock().await;
        let pools: Vec<(String, Running)> = inner.pools.drain().collect();
        let mut revoke = Vec::new();
        for (reference, running) in pools {
            running.fleet.kill();
            let url = inner
                .config
                .pool(&reference)
                .map(|p| p.coordinator.clone())
                .unwrap_or_default();
            for (_, token) in running.members.into_iter().chain(running.leaving) {
                revoke.push((url.clone(), token));
            }
            running.fleet.wait().await;
        }
        for d in std::mem::take(&mut inner.config.departing) {
            if let Ok(Some(c)) = self.keychain.get_json::<StoredCredential>(&d.key) {
                revoke.push((d.coordinator.clone(), Token::new(c.token)));
            }
            let _ = self.keychain.remove(&d.key);
        }
        for (url, token) in revoke {
            if let Ok(c) = client(&url, token) {
                let _ = c.leave().await;
            }
        }
        if let (Ok(c), Some(id)) = (
            account_client(&inner),
            inner.config.account.as_ref().and_then(|a| a.token_id.clone()),
        ) {
            let _ = c.revoke_token(&id).await;
        }
        for pool in &inner.config.pools {
            for i in 0..pool.runners {
                self.keychain
                    .delete(&credentials::credential_key(&pool.reference, i))
                    .map_err(io_err)?;
            }
            self.keychain
                .remove(&keychain::join_key(&pool.reference))
                .map_err(io_err)?;
        }
        self.keychain.remove(keychain::ACCOUNT).map_err(io_err)?;
        inner.account_token = None;
        inner.disconnected.clear();
        inner.config = Config {
            autostart: inner.config.autostart,
            pause_on_battery: inner.config.pause_on_battery,
            ..Config::default()
        };
        self.save(&inner)?;
        self.note(&mut inner, ActivityKind::Info, "signed out".into());
        drop(inner);
        self.changed().await;
        Ok(self.state().await)
    }

    // -------------------------------------------------------- links

    /// Holds a `drover://` link until the user confirms it.
    pub async fn open_link(&self, text: &str) -> AppResult<PendingLink> {
        let link = Link::parse(text)?;
        let mut inner = self.inner.lock().await;
        inner.pending = Some(link);
        let pending = self.snapshot(&inner).pending.expect("just set");
        drop(inner);
        self.changed().await;
        Ok(pending)
    }

    pub async fn dismiss_link(&self) -> AppResult<AppState> {
        self.inner.lock().await.pending = None;
        self.changed().await;
        Ok(self.state().await)
    }

    /// Pairs (`drover://pair`) or lends to the pool (`drover://join`).
    pub async fn confirm_link(&self) -> AppResult<AppState> {
        let mut inner = self.inner.lock().await;
        let link = inner
            .pending
            .take()
            .ok_or_else(|| AppError::new("NO_PENDING_LINK", "there is no link to confirm"))?;
        let result = match &link {
            Link::Pair { url, code } => self.pair(&mut inner, url, code).await,
            Link::Join {
                url,
                reference,
                token,
            } => self.join(&mut inner, url, reference, token).await,
        };
        if let Err(e) = &result {
            // A refused code stays refused; anything else may be retried.
            if !matches!(
                e.code.as_str(),
                "PAIRING_CODE_USED" | "PAIRING_CODE_EXPIRED" | "NOT_FOUND" | "UNAUTHORIZED"
            ) {
                inner.pending = Some(link);
            }
        }
        drop(inner);
        self.changed().await;
        result?;
        Ok(self.state().await)
    }

    async fn pair(&self, inner: &mut Inner, url: &str, code: &str) -> AppResult<()> {
        if let Some(a) = &inner.config.account {
            return Err(already_signed_in(a));
        }
        let device = client(url, Token::new(""))?
            .redeem_pairing_code(code, &self.options.device_name)
            .await?;
        self.keychain
            .set_json(
                keychain::ACCOUNT,
                &AccountSecret {
                    url: url.to_owned(),
                    token: device.token.clone(),
                },
            )
            .map_err(io_err)?;
        inner.account_token = Some(Token::new(device.token));
        inner.config.account = Some(Account {
            coordinator: url.to_owned(),
            workspace: device.workspace,
            email: device.email.clone(),
            subject: device.subject,
            role: device.role,
            device_name: Some(device.name),
            token_id: Some(device.token_id),
        });
        self.save(inner)?;
        // Lend one runner to the member's default personal pool.
        let member = account_client(inner)?;
        let first = member
            .pair_runner(
                Scope::Me,
                &PairRunner {
                    name: Some(self.runner_name(0)),
                    ..PairRunner::default()
                },
            )
            .await?;
        let runtime = member
            .runtimes(Scope::Me)
            .await?
            .runtimes
            .into_iter()
            .find(|r| r.id == first.runner.runtime_id)
            .ok_or_else(|| AppError::new("INTERNAL", "the new runner's pool is not listed"))?;
        let pool = PoolConfig {
            coordinator: url.to_owned(),
            reference: runtime.reference.clone(),
            runtime_id: runtime.id,
            name: runtime.name,
            kind: PoolKind::Personal,
            runners: 1,
            slots: 1,
            labels: Vec::new(),
        };
        self.keychain
            .save(
                &credentials::credential_key(&pool.reference, 0),
                &StoredCredential {
                    url: url.to_owned(),
                    reference: pool.reference.clone(),
                    runner_id: first.runner.id.clone(),
                    runtime_id: Some(pool.runtime_id.clone()),
                    token: first.token,
                },
            )
            .map_err(io_err)?;
        self.adopt_pool(inner, pool).await?;
        let message = format!("paired with {url} as {}", device.email);
        self.note(inner, ActivityKind::Paired, message.clone());
        self.notify("Drover: paired", &message);
        Ok(())
    }

    async fn join(
        &self,
        inner: &mut Inner,
        url: &str,
        reference: &str,
        token: &str,
    ) -> AppResult<()> {
        let joiner = client(url, Token::new(token))?;
        let info = joiner.join_token_info().await?;
        if inner.config.pool(&info.reference).is_some() {
            return Err(AppError::invalid(format!(
                "this machine already lends to {}: add runners under This machine",
                info.reference
            )));
        }
        self.keychain
            .set_json(
                &keychain::join_key(&info.reference),
                &JoinSecret {
                    url: url.to_owned(),
                    reference: reference.to_owned(),
                    token: token.to_owned(),
                },
            )
            .map_err(io_err)?;
        let name = info
            .reference
            .rsplit(':')
            .next()
            .unwrap_or(&info.reference)
            .to_owned();
        let pool = PoolConfig {
            coordinator: url.to_owned(),
            reference: info.reference.clone(),
            runtime_id: info.runtime_id,
            name,
            kind: PoolKind::Workspace,
            runners: 1,
            slots: 1,
            labels: Vec::new(),
        };
        self.adopt_pool(inner, pool).await?;
        let message = format!("lending this machine to {} on {url}", info.reference);
        self.note(inner, ActivityKind::Paired, message.clone());
        self.notify("Drover: joined a pool", &message);
        Ok(())
    }

    /// Records a pool (its first credentials already in the keychain, or
    /// to be had) and starts its runners.
    async fn adopt_pool(&self, inner: &mut Inner, pool: PoolConfig) -> AppResult<()> {
        inner.config.pools.retain(|p| p.reference != pool.reference);
        inner.config.pools.push(pool.clone());
        self.save(inner)?;
        self.launch(inner, &pool).await
    }

    // -------------------------------------------------------- runners

    fn runner_name(&self, index: usize) -> String {
        format!("{}-{}", self.options.device_name, index + 1)
    }

    fn settings_for(&self, pool: &PoolConfig) -> RunnerSettings {
        let mut settings = self.options.runner.clone();
        settings.slots = pool.slots.max(1);
        settings.capabilities.extend(pool.labels.iter().cloned());
        settings.work_root = settings.work_root.join(sanitize(&pool.reference));
        settings
    }

    /// Starts a fleet for `pool` with `pool.runners` runners.
    async fn launch(&self, inner: &mut Inner, pool: &PoolConfig) -> AppResult<()> {
        let base = client(&pool.coordinator, Token::new(""))?;
        let (fleet, mut events) = Fleet::new(base, self.settings_for(pool))
            .map_err(|e| AppError::new("INTERNAL", e.to_string()))?;
        fleet.set_paused(effective_pause(inner));
        let reference = pool.reference.clone();
        let me = self.me.clone();
        tokio::spawn(async move {
            while let Some(event) = events.recv().await {
                let Some(sup) = me.upgrade() else { return };
                sup.on_event(&reference, event).await;
            }
        });
        inner.pools.insert(
            pool.reference.clone(),
            Running {
                fleet,
                members: Vec::new(),
                leaving: HashMap::new(),
            },
        );
        for i in 0..pool.runners {
            let credential = self.credential(inner, pool, i).await?;
            let running = inner.pools.get_mut(&pool.reference).expect("just added");
            running
                .members
                .push((credential.runner_id.clone(), credential.token.clone()));
            running.fleet.add(credential);
        }
        Ok(())
    }

    /// Runner `index`'s credential: from the keychain, or new (paired
    /// with the account for a personal pool, joined for a workspace one).
    async fn credential(
        &self,
        inner: &Inner,
        pool: &PoolConfig,
        index: usize,
    ) -> AppResult<Credential> {
        let key = credentials::credential_key(&pool.reference, index);
        if let Some(saved) = self.keychain.load(&key).map_err(io_err)?
            && saved.url == pool.coordinator
        {
            return Ok(Credential {
                runner_id: saved.runner_id,
                token: Token::new(saved.token),
            });
        }
        match pool.kind {
            PoolKind::Personal => {
                let member = account_client(inner)?;
                if member.base_url() != pool.coordinator {
                    return Err(AppError::invalid(format!(
                        "{} is on {}, but you are signed in to {}",
                        pool.reference,
                        pool.coordinator,
                        member.base_url()
                    )));
                }
                let paired = member
                    .pair_runner(
                        Scope::Me,
                        &PairRunner {
                            name: Some(self.runner_name(index)),
                            runtime: Some(pool.runtime_id.clone()),
                            labels: pool.labels.clone(),
                        },
                    )
                    .await?;
                self.keychain
                    .save(
                        &key,
                        &StoredCredential {
                            url: pool.coordinator.clone(),
                            reference: pool.reference.clone(),
                            runner_id: paired.runner.id.clone(),
                            runtime_id: Some(pool.runtime_id.clone()),
                            token: paired.token.clone(),
                        },
                    )
                    .map_err(io_err)?;
                Ok(Credential {
                    runner_id: paired.runner.id,
                    token: Token::new(paired.token),
                })
            }
            PoolKind::Workspace => {
                let join: JoinSecret = self
                    .keychain
                    .get_json(&keychain::join_key(&pool.reference))
                    .map_err(io_err)?
                    .ok_or_else(|| {
                        AppError::new(
                            "NOT_FOUND",
                            format!(
                                "no join token for {} in the keychain: open a new join link",
                                pool.reference
                            ),
                        )
                    })?;
                let base = client(&pool.coordinator, Token::new(""))?;
                let mut capabilities = self.options.runner.capabilities.clone();
                capabilities.extend(pool.labels.iter().cloned());
                credentials::join_or_load(
                    &self.keychain,
                    &base,
                    &Token::new(join.token),
                    &pool.reference,
                    &self.runner_name(index),
                    index,
                    &capabilities,
                )
                .await
                .map_err(|e| match e {
                    credentials::JoinError::Join { source, .. } => AppError::from(source),
                    other => AppError::new("INTERNAL", other.to_string()),
                })
            }
        }
    }

    /// Lends `count` runners to `reference`: adds, or removes the newest
    /// with drain. A personal pool of the account not lent yet is added.
    pub async fn set_runner_count(&self, reference: &str, count: usize) -> AppResult<AppState> {
        if count > 64 {
            return Err(AppError::invalid("at most 64 runners per pool"));
        }
        let mut inner = self.inner.lock().await;
        if inner.config.pool(reference).is_none() {
            self.lend_personal_pool(&mut inner, reference, count).await?;
        } else {
            let result = self.scale(&mut inner, reference, count).await;
            self.save(&inner)?;
            result?;
        }
        drop(inner);
        self.changed().await;
        Ok(self.state().await)
    }

    async fn lend_personal_pool(
        &self,
        inner: &mut Inner,
        reference: &str,
        count: usize,
    ) -> AppResult<()> {
        let member = account_client(inner)?;
        let runtime = member
            .runtimes(Scope::Me)
            .await?
            .runtimes
            .into_iter()
            .find(|r| r.reference == reference || r.id == reference || r.name == reference)
            .ok_or_else(|| {
                AppError::new(
                    "NOT_FOUND",
                    format!("no personal pool {reference}: create it under My pools"),
                )
            })?;
        let pool = PoolConfig {
            coordinator: member.base_url().to_owned(),
            reference: runtime.reference,
            runtime_id: runtime.id,
            name: runtime.name,
            kind: PoolKind::Personal,
            runners: count,
            slots: 1,
            labels: Vec::new(),
        };
        self.adopt_pool(inner, pool).await
    }

    async fn scale(&self, inner: &mut Inner, reference: &str, count: usize) -> AppResult<()> {
        let pool = inner.config.pool(reference).cloned().expect("checked");
        if !inner.pools.contains_key(reference) {
            let idle = PoolConfig { runners: 0, ..pool };
            self.launch(inner, &idle).await?;
        }
        let pool = inner.config.pool(reference).cloned().expect("checked");
        loop {
            let have = inner.pools[reference].members.len();
            if have < count {
                let credential = self.credential(inner, &pool, have).await?;
                let running = inner.pools.get_mut(reference).expect("launched");
                running
                    .members
                    .push((credential.runner_id.clone(), credential.token.clone()));
                running.fleet.add(credential);
            } else if have > count {
                self.remove_newest(inner, &pool)?;
            } else {
                break;
            }
            inner.config.pool_mut(reference).expect("checked").runners =
                inner.pools[reference].members.len();
        }
        Ok(())
    }

    /// The newest runner drains; its credential moves to a `departing:`
    /// key so the index can be reused, and is revoked once it stops.
    fn remove_newest(&self, inner: &mut Inner, pool: &PoolConfig) -> AppResult<()> {
        let running = inner.pools.get_mut(&pool.reference).expect("launched");
        let index = running.members.len() - 1;
        let key = credentials::credential_key(&pool.reference, index);
        let departing_key = format!("departing:{}", running.members[index].0);
        if let Some(saved) = self.keychain.load(&key).map_err(io_err)? {
            self.keychain
                .set_json(&departing_key, &saved)
                .map_err(io_err)?;
        }
        self.keychain.delete(&key).map_err(io_err)?;
        let (id, token) = running.members.pop().expect("index exists");
        let drained = running.fleet.scale_down();
        debug_assert_eq!(drained.as_deref(), Some(id.as_str()));
        running.leaving.insert(id.clone(), token);
        inner.config.departing.push(Departing {
            coordinator: pool.coordinator.clone(),
            runner_id: id,
            key: departing_key,
        });
        Ok(())
    }

    /// Revokes, then forgets, each departed runner; those the coordinator
    /// could not be asked about stay for the next tick.
    async fn retry_departures(&self, inner: &mut Inner) {
        let leaving: HashSet<String> = inner
            .pools
            .values()
            .flat_map(|r| r.leaving.keys().cloned())
            .collect();
        let mut kept = Vec::new();
        for d in std::mem::take(&mut inner.config.departing) {
            if leaving.contains(&d.runner_id) {
                kept.push(d);
                continue;
            }
            let saved = match self.keychain.get_json::<StoredCredential>(&d.key) {
                Ok(Some(saved)) => saved,
                Ok(None) => continue,
                Err(_) => {
                    kept.push(d);
                    continue;
                }
            };
            let result = match client(&d.coordinator, Token::new(saved.token)) {
                Ok(c) => c.leave().await,
                Err(_) => Ok(()),
            };
            match result {
                Ok(()) => {}
                // Already revoked (or never known): nothing left to revoke.
                Err(e) if matches!(e.code(), Some(ErrorCode::Unauthorized | ErrorCode::NotFound)) => {}
                Err(e) => {
                    tracing::warn!(runner = d.runner_id, "revoking a removed runner: {e}");
                    kept.push(d);
                    continue;
                }
            }
            if self.keychain.remove(&d.key).is_err() {
                kept.push(d);
            }
        }
        inner.config.departing = kept;
        if let Err(e) = self.save(inner) {
            tracing::warn!("{e}");
        }
    }

    pub async fn set_pool_settings(
        &self,
        reference: &str,
        slots: usize,
        labels: Vec<String>,
    ) -> AppResult<AppState> {
        if !(1..=drover_wire::MAX_SLOTS as usize).contains(&slots) {
            return Err(AppError::invalid(format!(
                "slots must be 1 to {}",
                drover_wire::MAX_SLOTS
            )));
        }
        let labels: Vec<String> = labels
            .into_iter()
            .map(|l| l.trim().to_owned())
            .filter(|l| !l.is_empty())
            .collect();
        if let Some(bad) = labels.iter().find(|l| {
            l.len() > 64
                || !l
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.=:/".contains(c))
        }) {
            return Err(AppError::invalid(format!(
                "label {bad:?}: use at most 64 letters, digits and - _ . = : /"
            )));
        }
        let mut inner = self.inner.lock().await;
        let pool = inner
            .config
            .pool_mut(reference)
            .ok_or_else(|| AppError::new("NOT_FOUND", format!("this machine does not lend to {reference}")))?;
        pool.slots = slots;
        pool.labels = labels;
        let pool = pool.clone();
        self.save(&inner)?;
        // The runners take the new shape: the old fleet drains in the
        // background while a new one carries on with the same credentials.
        if let Some(old) = inner.pools.remove(reference) {
            old.fleet.stop_leasing();
            let departing: Vec<String> = old.leaving.keys().cloned().collect();
            inner.config.departing.retain(|d| !departing.contains(&d.runner_id));
            tokio::spawn(old.fleet.drain());
        }
        let result = self.launch(&mut inner, &pool).await;
        drop(inner);
        self.changed().await;
        result?;
        Ok(self.state().await)
    }

    // -------------------------------------------------------- pause, power, quit

    pub async fn set_paused(&self, paused: bool) -> AppResult<AppState> {
        let mut inner = self.inner.lock().await;
        inner.config.paused = paused;
        self.save(&inner)?;
        apply_pause(&inner);
        drop(inner);
        self.changed().await;
        Ok(self.state().await)
    }

    pub async fn set_settings(&self, settings: Settings) -> AppResult<AppState> {
        let mut inner = self.inner.lock().await;
        inner.config.autostart = settings.autostart;
        inner.config.pause_on_battery = settings.pause_on_battery;
        self.save(&inner)?;
        apply_pause(&inner);
        drop(inner);
        self.changed().await;
        Ok(self.state().await)
    }

    async fn on_tick(&self) {
        let mut inner = self.inner.lock().await;
        let on_battery = power::on_battery(&power::supply_dir());
        let power_changed = on_battery != inner.on_battery;
        if power_changed {
            inner.on_battery = on_battery;
            apply_pause(&inner);
        }
        if !inner.config.departing.is_empty() {
            self.retry_departures(&mut inner).await;
        }
        drop(inner);
        if power_changed {
            self.changed().await;
        }
    }

    /// First quit: every runner stops leasing and finishes its jobs.
    pub async fn begin_quit(&self) {
        let mut inner = self.inner.lock().await;
        inner.quitting = true;
        for running in inner.pools.values() {
            running.fleet.stop_leasing();
        }
        drop(inner);
        self.changed().await;
    }

    /// Second quit: running jobs are killed (they re-queue at the coordinator).
    pub async fn kill_all(&self) {
        let inner = self.inner.lock().await;
        for running in inner.pools.values() {
            running.fleet.kill();
        }
    }

    /// Returns once no runner runs.
    pub async fn wait_stopped(&self) {
        loop {
            let stopped = self.stopped.notified();
            let inner = self.inner.lock().await;
            if inner.pools.values().all(|r| r.fleet.status().is_empty()) {
                return;
            }
            drop(inner);
            stopped.await;
        }
    }

    // -------------------------------------------------------- runner events

    async fn on_event(&self, reference: &str, event: Event) {
        let mut inner = self.inner.lock().await;
        match &event.kind {
            EventKind::Finished {
                job,
                state,
                exit_code,
                ..
            } if matches!(state, JobState::Failed | JobState::TimedOut) => {
                let message = match exit_code {
                    Some(code) => format!("job {job} {} (exit {code})", state.as_str()),
                    None => format!("job {job} {}", state.as_str()),
                };
                self.note(&mut inner, ActivityKind::JobFailed, message.clone());
                self.notify("Drover: a job failed", &message);
            }
            EventKind::Disconnected { error } => {
                let first = inner.disconnected.is_empty();
                inner.disconnected.insert(event.runner.clone());
                if first {
                    let message = format!("coordinator unreachable: {error}");
                    self.note(&mut inner, ActivityKind::Unreachable, message.clone());
                    self.notify("Drover: coordinator unreachable", &message);
                }
            }
            EventKind::Reconnected | EventKind::Online => {
                if inner.disconnected.remove(&event.runner) && inner.disconnected.is_empty() {
                    let message = "connected to the coordinator again".to_owned();
                    self.note(&mut inner, ActivityKind::Reconnected, message.clone());
                    self.notify("Drover: back online", &message);
                }
            }
            EventKind::Stopped { error } => {
                inner.disconnected.remove(&event.runner);
                let departed = match inner.pools.get_mut(reference) {
                    Some(running) => running.fleet.take_departed().await,
                    None => Vec::new(),
                };
                let was_leaving = departed.iter().any(|(id, _)| *id == event.runner);
                for (id, _) in &departed {
                    if let Some(running) = inner.pools.get_mut(reference) {
                        running.leaving.remove(id);
                    }
                }
                if !departed.is_empty() {
                    self.retry_departures(&mut inner).await;
                }
                if let Some(e) = error
                    && !was_leaving
                    && !inner.quitting
                {
                    self.note(
                        &mut inner,
                        ActivityKind::Info,
                        format!("runner {} stopped: {e}", event.runner),
                    );
                }
                self.stopped.notify_waiters();
            }
            _ => {}
        }
        drop(inner);
        self.changed().await;
    }
}

fn account_client(inner: &Inner) -> AppResult<Client> {
    match (&inner.config.account, &inner.account_token) {
        (Some(account), Some(token)) => client(&account.coordinator, token.clone()),
        _ => Err(AppError::not_signed_in()),
    }
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
    inner.config.paused || (inner.config.pause_on_battery && inner.on_battery)
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
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' })
        .collect()
}
