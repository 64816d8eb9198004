//! Lending runners: a fleet per pool, each runner's credential (from the
//! keychain, or paired or joined anew), adding, and removing with drain.

use drover_wire::github::ACTIONS_CAPABILITY;
use runner_core::actions::ActionsRunner;
use runner_core::isolation::{IsolationError, Sandbox};

use super::*;

impl Supervisor {
    // -------------------------------------------------------- runners

    pub(super) fn runner_name(&self, index: usize) -> String {
        format!("{}-{}", self.options.device_name, index + 1)
    }

    /// A pool's runner settings. A workspace pool's jobs are other
    /// people's: they run in the system's sandbox (bubblewrap,
    /// sandbox-exec), with the app's own files (its settings, the
    /// keychain's, the session bus) hidden besides what the sandbox always
    /// hides (people's homes, `/tmp`). A personal
    /// pool's run as the member, as the options say. A workspace pool's
    /// runners also serve GitHub Actions on demand where a release is pinned.
    pub(super) fn settings_for(&self, pool: &PoolConfig) -> RunnerSettings {
        let mut settings = self.options.runner.clone();
        settings.slots = pool.slots.max(1);
        settings.capabilities.extend(pool.labels.iter().cloned());
        settings.work_root = settings.work_root.join(sanitize(&pool.reference));
        if pool.kind == PoolKind::Workspace {
            settings.isolation.sandbox = Sandbox::native();
            settings.isolation.hidden.extend(self.private_paths());
            // GitHub Actions on demand, where Drover pins a release for
            // this platform: a laptop lent to a workspace pool serves its
            // workflow jobs too (sandboxed, as every workspace job).
            settings.actions = ActionsRunner::new(None, None, None, None).ok();
            if settings.actions.is_some() {
                settings.capabilities.push(ACTIONS_CAPABILITY.to_owned());
            }
        }
        settings
    }

    /// Where the app's secrets and sessions are, as far as it knows: its
    /// settings directory, the keyrings' files, `XDG_RUNTIME_DIR` and the
    /// session bus's socket.
    fn private_paths(&self) -> Vec<PathBuf> {
        let mut paths: Vec<PathBuf> = self
            .options
            .config_path
            .parent()
            .into_iter()
            .map(PathBuf::from)
            .collect();
        if let Some(data) = dirs::data_dir() {
            paths.push(data.join("keyrings"));
            paths.push(data.join("kwalletd"));
        }
        paths.extend(dirs::runtime_dir());
        if let Some(address) = std::env::var_os("DBUS_SESSION_BUS_ADDRESS") {
            paths.extend(bus_socket_paths(&address.to_string_lossy()));
        }
        paths
    }

    /// Starts a fleet for `pool` with `pool.runners` runners. A workspace
    /// pool where no sandbox can be had is refused (`NO_SANDBOX`) unless
    /// the member opted out for it; either way the pool stays in the
    /// settings, and `refused` says why it is not lent.
    pub(super) async fn launch(&self, inner: &mut Inner, pool: &PoolConfig) -> AppResult<()> {
        let base = self.client(&pool.coordinator, Token::new(""))?;
        let settings = self.settings_for(pool);
        let created = match Fleet::new(base.clone(), settings.clone()) {
            Err(e) if pool.kind == PoolKind::Workspace && no_sandbox(&e) => {
                let why = sandbox_missing(&e);
                if pool.allow_unsandboxed {
                    self.note(
                        inner,
                        ActivityKind::Info,
                        format!(
                            "{}: other people's jobs run unsandboxed on this machine, as you asked ({why})",
                            pool.name
                        ),
                    );
                    let mut settings = settings;
                    settings.isolation.sandbox = Sandbox::None;
                    Fleet::new(base, settings)
                } else {
                    let message = format!(
                        "not lending this machine to {}: its jobs are other people's, and they would run unsandboxed, as you, able to read your files and keychain ({why}). {}llow unsandboxed jobs in the pool's settings under This machine",
                        pool.name,
                        if cfg!(target_os = "linux") {
                            "Install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap), or a"
                        } else {
                            "A"
                        }
                    );
                    inner
                        .refused
                        .insert(pool.reference.clone(), message.clone());
                    return Err(AppError::new("NO_SANDBOX", message));
                }
            }
            other => other,
        };
        let (fleet, mut events) = created.map_err(|e| AppError::new("INTERNAL", e.to_string()))?;
        inner.refused.remove(&pool.reference);
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
    pub(super) async fn credential(
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
                let member = self.account_client_of(inner)?;
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
                let base = self.client(&pool.coordinator, Token::new(""))?;
                // As its runner will announce them (its sandbox included).
                let capabilities = match inner.pools.get(&pool.reference) {
                    Some(running) => running.fleet.capabilities().to_vec(),
                    None => self.settings_for(pool).capabilities,
                };
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
            self.lend_personal_pool(&mut inner, reference, count)
                .await?;
        } else {
            let result = self.scale(&mut inner, reference, count).await;
            self.save(&inner)?;
            result?;
        }
        drop(inner);
        self.changed().await;
        Ok(self.state().await)
    }

    pub(super) async fn lend_personal_pool(
        &self,
        inner: &mut Inner,
        reference: &str,
        count: usize,
    ) -> AppResult<()> {
        let member = self.account_client_of(inner)?;
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
            allow_unsandboxed: false,
        };
        self.adopt_pool(inner, pool).await
    }

    pub(super) async fn scale(
        &self,
        inner: &mut Inner,
        reference: &str,
        count: usize,
    ) -> AppResult<()> {
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
    pub(super) fn remove_newest(&self, inner: &mut Inner, pool: &PoolConfig) -> AppResult<()> {
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
    pub(super) async fn retry_departures(&self, inner: &mut Inner) {
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
            let result = match self.client(&d.coordinator, Token::new(saved.token)) {
                Ok(c) => c.leave().await,
                Err(_) => Ok(()),
            };
            match result {
                Ok(()) => {}
                // Already revoked (or never known): nothing left to revoke.
                Err(e)
                    if matches!(
                        e.code(),
                        Some(ErrorCode::Unauthorized | ErrorCode::NotFound)
                    ) => {}
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
        let pool = inner.config.pool_mut(reference).ok_or_else(|| {
            AppError::new(
                "NOT_FOUND",
                format!("this machine does not lend to {reference}"),
            )
        })?;
        pool.slots = slots;
        pool.labels = labels;
        let pool = pool.clone();
        self.save(&inner)?;
        let result = self.relaunch(&mut inner, &pool).await;
        drop(inner);
        self.changed().await;
        result?;
        Ok(self.state().await)
    }

    /// The member's opt-out for a workspace pool: lend it even where this
    /// machine has no sandbox (its jobs then run as the member). Where a
    /// sandbox works its jobs stay sandboxed; turning the opt-out off
    /// stops an unsandboxed pool.
    pub async fn set_allow_unsandboxed(&self, reference: &str, allow: bool) -> AppResult<AppState> {
        let mut inner = self.inner.lock().await;
        let pool = inner.config.pool_mut(reference).ok_or_else(|| {
            AppError::new(
                "NOT_FOUND",
                format!("this machine does not lend to {reference}"),
            )
        })?;
        if pool.kind != PoolKind::Workspace {
            return Err(AppError::invalid(format!(
                "{reference} is a personal pool: its jobs are your own and run as you"
            )));
        }
        pool.allow_unsandboxed = allow;
        let pool = pool.clone();
        self.save(&inner)?;
        let sandboxed = inner
            .pools
            .get(reference)
            .map(|r| r.fleet.isolation().sandbox.is_some());
        let result = match sandboxed {
            // Sandboxed, or unsandboxed and still allowed: nothing changes.
            Some(true) => Ok(()),
            Some(false) if allow => Ok(()),
            _ => match self.relaunch(&mut inner, &pool).await {
                // Refused, as just asked: the pool says why.
                Err(e) if e.code == "NO_SANDBOX" && !allow => Ok(()),
                other => other,
            },
        };
        drop(inner);
        self.changed().await;
        result?;
        Ok(self.state().await)
    }

    /// The pool's runners take its new shape: the old fleet drains in the
    /// background while a new one carries on with the same credentials.
    async fn relaunch(&self, inner: &mut Inner, pool: &PoolConfig) -> AppResult<()> {
        if let Some(old) = inner.pools.remove(&pool.reference) {
            old.fleet.stop_leasing();
            let departing: Vec<String> = old.leaving.keys().cloned().collect();
            inner
                .config
                .departing
                .retain(|d| !departing.contains(&d.runner_id));
            tokio::spawn(old.fleet.drain());
        }
        self.launch(inner, pool).await
    }
}

/// The sandbox cannot be had on this host (rather than, say, a work
/// directory that is not the user's own).
fn no_sandbox(e: &IsolationError) -> bool {
    matches!(
        e,
        IsolationError::BwrapMissing
            | IsolationError::SandboxBroken(..)
            | IsolationError::NotHere(..)
            | IsolationError::NoSandboxHere
    )
}

/// Why, in the app's words (the runner's name `--sandbox`).
fn sandbox_missing(e: &IsolationError) -> String {
    match e {
        IsolationError::BwrapMissing => "bubblewrap (bwrap) is not installed".into(),
        IsolationError::SandboxBroken(path, said) => {
            format!("{} does not run here: {said}", path.display())
        }
        IsolationError::NoSandboxHere => "Windows has no sandbox for jobs".into(),
        other => other.to_string(),
    }
}

/// The files of a D-Bus address's `unix:path=` entries.
fn bus_socket_paths(address: &str) -> Vec<PathBuf> {
    address
        .split(';')
        .filter_map(|entry| entry.strip_prefix("unix:"))
        .flat_map(|params| params.split(','))
        .filter_map(|kv| kv.strip_prefix("path="))
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bus_address_names_its_socket_files() {
        assert_eq!(
            bus_socket_paths("unix:path=/run/user/1000/bus"),
            [PathBuf::from("/run/user/1000/bus")]
        );
        assert_eq!(
            bus_socket_paths("unix:abstract=/tmp/dbus-x,guid=1;unix:guid=2,path=/tmp/b;tcp:host=h"),
            [PathBuf::from("/tmp/b")]
        );
    }
}
