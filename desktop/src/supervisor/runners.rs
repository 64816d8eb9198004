//! Lending runners: a fleet per pool, each runner's credential (from the
//! keychain, or paired or joined anew), adding, and removing with drain.

use super::*;

impl Supervisor {
    // -------------------------------------------------------- runners

    pub(super) fn runner_name(&self, index: usize) -> String {
        format!("{}-{}", self.options.device_name, index + 1)
    }

    pub(super) fn settings_for(&self, pool: &PoolConfig) -> RunnerSettings {
        let mut settings = self.options.runner.clone();
        settings.slots = pool.slots.max(1);
        settings.capabilities.extend(pool.labels.iter().cloned());
        settings.work_root = settings.work_root.join(sanitize(&pool.reference));
        settings
    }

    /// Starts a fleet for `pool` with `pool.runners` runners.
    pub(super) async fn launch(&self, inner: &mut Inner, pool: &PoolConfig) -> AppResult<()> {
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
            let result = match client(&d.coordinator, Token::new(saved.token)) {
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
        // The runners take the new shape: the old fleet drains in the
        // background while a new one carries on with the same credentials.
        if let Some(old) = inner.pools.remove(reference) {
            old.fleet.stop_leasing();
            let departing: Vec<String> = old.leaving.keys().cloned().collect();
            inner
                .config
                .departing
                .retain(|d| !departing.contains(&d.runner_id));
            tokio::spawn(old.fleet.drain());
        }
        let result = self.launch(&mut inner, &pool).await;
        drop(inner);
        self.changed().await;
        result?;
        Ok(self.state().await)
    }
}
