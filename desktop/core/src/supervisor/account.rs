//! Signing in (a pairing link, or a pasted token) and out, and the
//! `drover://` links held until the user confirms them.

use super::*;

impl Supervisor {
    // -------------------------------------------------------- the account

    /// A client with the signed-in member's token.
    pub async fn account_client(&self) -> AppResult<Client> {
        let inner = self.inner.lock().await;
        self.account_client_of(&inner)
    }

    /// Signs in with a pasted member API token (the fallback to pairing).
    pub async fn sign_in(&self, url: &str, token: &str) -> AppResult<AppState> {
        let url = url.trim().trim_end_matches('/');
        let token = token.trim();
        if token.is_empty() {
            return Err(AppError::invalid("paste an API token"));
        }
        let member = self.client(url, Token::new(token))?;
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
        inner.signed_out = None;
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

    /// Asks the coordinator whether this device's token still holds. When
    /// it was revoked (from another device, the CLI, or with the member by
    /// an admin), signs out here as [`Supervisor::sign_out`] does, and says
    /// so in the window, the activity list and a notification, in the
    /// coordinator's words (who, from where, when). Unreachable is not
    /// signed out.
    pub async fn check_account(&self) {
        let client = {
            let inner = self.inner.lock().await;
            if inner.config.account.is_none() {
                return;
            }
            self.account_client_of(&inner)
        };
        let Ok(client) = client else { return };
        let Err(ClientError::Api {
            code: ErrorCode::Unauthorized,
            message,
            ..
        }) = client.me().await
        else {
            return;
        };
        let mut why = message;
        if let Some(rest) = why.strip_prefix("this device was signed out: ") {
            why = rest.to_owned();
        }
        if why == "unknown, expired or revoked token" {
            why = "its token was revoked or has expired".to_owned();
        }
        if self.sign_out_as(Some(why.clone())).await.is_ok() {
            self.notify("Drover: this device was signed out", &why);
        }
    }

    /// Stops every runner at once, revokes this device's runners and
    /// token at the coordinator, and deletes every secret and setting.
    pub async fn sign_out(&self) -> AppResult<AppState> {
        self.sign_out_as(None).await
    }

    /// [`Supervisor::sign_out`]; `elsewhere` says why when the coordinator
    /// signed this device out (its token revoked).
    async fn sign_out_as(&self, elsewhere: Option<String>) -> AppResult<AppState> {
        let mut inner = self.inner.lock().await;
        if elsewhere.is_some() && inner.config.account.is_none() {
            return Err(AppError::invalid("already signed out"));
        }
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
            if let Ok(c) = self.client(&url, token) {
                let _ = c.leave().await;
            }
        }
        if let (Ok(c), Some(id)) = (
            self.account_client_of(&inner),
            inner
                .config
                .account
                .as_ref()
                .and_then(|a| a.token_id.clone()),
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
            settings: inner.config.settings.clone(),
            ca_file: inner.config.ca_file.take(),
            ..Config::default()
        };
        self.save(&inner)?;
        match &elsewhere {
            Some(why) => self.note(
                &mut inner,
                ActivityKind::SignedOut,
                format!("this device was signed out: {why}"),
            ),
            None => self.note(&mut inner, ActivityKind::Info, "signed out".into()),
        }
        inner.signed_out = elsewhere;
        drop(inner);
        self.changed().await;
        Ok(self.state().await)
    }

    // -------------------------------------------------------- links

    /// Holds a `drover://` link until the user confirms it. A join link's
    /// token is shown to its coordinator first (`GET /v1/runner/join-token`,
    /// which uses nothing up): the dialog names the pool the coordinator
    /// says it joins, whatever the link's `ref=` says, and a token the
    /// coordinator refuses (revoked, expired) is refused here.
    pub async fn open_link(&self, text: &str) -> AppResult<PendingLink> {
        let opened = self.open_link_inner(text).await;
        self.inner.lock().await.link_refused = opened.as_ref().err().map(|e| e.message.clone());
        self.changed().await;
        opened
    }

    async fn open_link_inner(&self, text: &str) -> AppResult<PendingLink> {
        let link = Link::parse(text)?;
        let pool = match &link {
            // Said before anything is asked: confirming could only fail.
            Link::Pair { .. } => {
                if let Some(a) = &self.inner.lock().await.config.account {
                    return Err(AppError::new(
                        "ALREADY_SIGNED_IN",
                        format!(
                            "this device is already signed in as {} on {}: to pair it with this link, sign out first (Account tab)",
                            a.email, a.coordinator
                        ),
                    ));
                }
                None
            }
            Link::Join { url, token, .. } => {
                let info = self.client(url, Token::new(token.as_str()))?
                    .join_token_info()
                    .await
                    .map_err(|e| match AppError::from(e) {
                        e if e.code == "UNAUTHORIZED" => AppError::new(
                            "UNAUTHORIZED",
                            "the coordinator refused this join link's token (revoked or expired): ask for a new link",
                        ),
                        e => e,
                    })?;
                Some(info.reference)
            }
        };
        let mut inner = self.inner.lock().await;
        inner.pending = Some(Held { link, pool });
        let pending = snapshot(&inner).pending.expect("just set");
        drop(inner);
        self.changed().await;
        Ok(pending)
    }

    pub async fn dismiss_link(&self) -> AppResult<AppState> {
        let mut inner = self.inner.lock().await;
        inner.pending = None;
        inner.link_refused = None;
        drop(inner);
        self.changed().await;
        Ok(self.state().await)
    }

    /// Pairs (`drover://pair`) or lends to the pool (`drover://join`).
    pub async fn confirm_link(&self) -> AppResult<AppState> {
        let mut inner = self.inner.lock().await;
        let held = inner
            .pending
            .take()
            .ok_or_else(|| AppError::new("NO_PENDING_LINK", "there is no link to confirm"))?;
        let result = match &held.link {
            Link::Pair { url, code } => self.pair(&mut inner, url, code).await,
            Link::Join {
                url,
                reference,
                token,
            } => {
                self.join(&mut inner, url, reference, held.pool.as_deref(), token)
                    .await
            }
        };
        if let Err(e) = &result {
            // A refused code stays refused; anything else may be retried.
            if !matches!(
                e.code.as_str(),
                "PAIRING_CODE_USED" | "PAIRING_CODE_EXPIRED" | "NOT_FOUND" | "UNAUTHORIZED"
            ) {
                inner.pending = Some(held);
            }
        }
        drop(inner);
        self.changed().await;
        result?;
        Ok(self.state().await)
    }

    pub(super) async fn pair(&self, inner: &mut Inner, url: &str, code: &str) -> AppResult<()> {
        if let Some(a) = &inner.config.account {
            return Err(already_signed_in(a));
        }
        let device = self
            .client(url, Token::new(""))?
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
        inner.signed_out = None;
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
        let member = self.account_client_of(inner)?;
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
            allow_unsandboxed: false,
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

    /// Lends this machine to the pool `token` joins. `shown` is the pool
    /// the confirm dialog named: if the coordinator now says another, the
    /// user confirmed something else, and nothing is joined.
    pub(super) async fn join(
        &self,
        inner: &mut Inner,
        url: &str,
        reference: &str,
        shown: Option<&str>,
        token: &str,
    ) -> AppResult<()> {
        let joiner = self.client(url, Token::new(token))?;
        let info = joiner.join_token_info().await?;
        if shown.is_some_and(|s| s != info.reference) {
            return Err(AppError::new(
                "CONFLICT",
                format!(
                    "the coordinator now says this token joins {}, not the pool you confirmed: open the link again",
                    info.reference
                ),
            ));
        }
        if reference != info.reference {
            tracing::warn!(
                link = reference,
                pool = info.reference,
                "a join link's ref= names another pool than its token joins"
            );
        }
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
                    reference: info.reference.clone(),
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
            allow_unsandboxed: false,
        };
        self.adopt_pool(inner, pool).await?;
        let message = format!("lending this machine to {} on {url}", info.reference);
        self.note(inner, ActivityKind::Paired, message.clone());
        self.notify("Drover: joined a pool", &message);
        Ok(())
    }

    /// Records a pool (its first credentials already in the keychain, or
    /// to be had) and starts its runners.
    pub(super) async fn adopt_pool(&self, inner: &mut Inner, pool: PoolConfig) -> AppResult<()> {
        inner.config.pools.retain(|p| p.reference != pool.reference);
        inner.config.pools.push(pool.clone());
        self.save(inner)?;
        self.launch(inner, &pool).await
    }
}
