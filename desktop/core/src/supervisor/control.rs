//! Pause (by hand, or on its own: on battery, on a metered network, in
//! quiet hours), quitting, and what the runners report.

use super::*;

impl Supervisor {
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

    pub async fn set_settings(&self, mut settings: Settings) -> AppResult<AppState> {
        if let Some(hours) = &settings.quiet_hours {
            settings.quiet_hours = Some(QuietHours::new(&hours.from, &hours.to)?);
        }
        let mut inner = self.inner.lock().await;
        let quiet = in_quiet_hours(&settings);
        let now = (inner.on_battery, inner.metered, quiet);
        self.note_conditions(&mut inner, now);
        inner.config.settings = settings;
        self.save(&inner)?;
        apply_pause(&inner);
        drop(inner);
        self.changed().await;
        Ok(self.state().await)
    }

    pub(super) async fn on_tick(&self) {
        // A D-Bus call: not under the lock, nor on the async threads.
        let metered = tokio::task::spawn_blocking(metered::metered_now)
            .await
            .unwrap_or(false);
        let mut inner = self.inner.lock().await;
        let on_battery = power::on_battery_now();
        let quiet = in_quiet_hours(&inner.config.settings);
        let power_changed =
            (on_battery, metered, quiet) != (inner.on_battery, inner.metered, inner.quiet);
        if power_changed {
            self.note_conditions(&mut inner, (on_battery, metered, quiet));
            apply_pause(&inner);
        }
        if !inner.config.departing.is_empty() {
            self.retry_departures(&mut inner).await;
        }
        drop(inner);
        if power_changed {
            self.changed().await;
        }
        // A device with no runner running hears of its token's revocation here.
        self.check_account().await;
    }

    /// Takes the machine's conditions (on battery, metered, in quiet
    /// hours), noting each that changed.
    fn note_conditions(&self, inner: &mut Inner, now: (bool, bool, bool)) {
        let was = (inner.on_battery, inner.metered, inner.quiet);
        for (was, now, what) in [
            (was.0, now.0, "on battery power"),
            (was.1, now.1, "on a metered network"),
            (was.2, now.2, "in quiet hours"),
        ] {
            if was != now {
                let message = match now {
                    true => format!("This machine is {what}."),
                    false => format!("This machine is no longer {what}."),
                };
                self.note(inner, ActivityKind::Info, message);
            }
        }
        (inner.on_battery, inner.metered, inner.quiet) = now;
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

    pub(super) async fn on_event(&self, reference: &str, event: Event) {
        let mut inner = self.inner.lock().await;
        if matches!(event.kind, EventKind::Online | EventKind::Reconnected) {
            learn_names(&mut inner, reference);
        }
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
                    let host = host_of(&inner, reference);
                    let message =
                        format!("Can't reach {host} — retrying. Your runners keep their jobs.");
                    self.note_with(
                        &mut inner,
                        ActivityKind::Unreachable,
                        message.clone(),
                        Some(error.clone()),
                    );
                    self.notify("Drover: coordinator unreachable", &message);
                }
            }
            EventKind::Reconnected | EventKind::Online
                if inner.disconnected.remove(&event.runner) && inner.disconnected.is_empty() =>
            {
                let message = format!("Connected to {} again.", host_of(&inner, reference));
                self.note(&mut inner, ActivityKind::Reconnected, message.clone());
                self.notify("Drover: back online", &message);
            }
            EventKind::CompleteRefused { job, error, code } => {
                let message = match code {
                    Some(ErrorCode::LeaseLost) => format!(
                        "Job {job} finished here, but too late to count: this machine did not answer in time (asleep or offline). It runs again if it has attempts left."
                    ),
                    _ => format!(
                        "Job {job} finished here, but the coordinator did not take its result."
                    ),
                };
                self.note_with(&mut inner, ActivityKind::Info, message, Some(error.clone()));
            }
            EventKind::LeaseLost { job, error } if !inner.quitting => {
                let message = format!(
                    "Job {job} was handed back: this machine did not answer in time (asleep or offline), or its runner was revoked. It runs again if it has attempts left."
                );
                self.note_with(&mut inner, ActivityKind::Info, message, Some(error.clone()));
            }
            EventKind::Stopped { error, code } => {
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
                    let name = inner
                        .names
                        .get(&event.runner)
                        .unwrap_or(&event.runner)
                        .clone();
                    let why = stop_in_words(*code, e, &host_of(&inner, reference));
                    self.note_with(
                        &mut inner,
                        ActivityKind::Info,
                        format!("{name} stopped: {why}."),
                        Some(e.clone()),
                    );
                    // Revoked with this device's token? Asked apart from
                    // this runner's events: signing out waits for them.
                    let me = self.me.clone();
                    tokio::spawn(async move {
                        if let Some(sup) = me.upgrade() {
                            sup.check_account().await;
                        }
                    });
                }
                self.stopped.notify_waiters();
            }
            _ => {}
        }
        drop(inner);
        self.changed().await;
    }
}

/// The host of the coordinator a pool is lent to, for sentences.
fn host_of(inner: &Inner, reference: &str) -> String {
    inner
        .config
        .pool(reference)
        .and_then(|p| url::Url::parse(&p.coordinator).ok())
        .and_then(|u| {
            u.host_str().map(|h| match u.port() {
                Some(port) => format!("{h}:{port}"),
                None => h.to_owned(),
            })
        })
        .unwrap_or_else(|| "the coordinator".into())
}

/// Remembers the names the coordinator gave a pool's runners (a runner
/// that has stopped is no longer in its fleet's status).
fn learn_names(inner: &mut Inner, reference: &str) {
    let Some(running) = inner.pools.get(reference) else {
        return;
    };
    for s in running.fleet.status() {
        if !s.name.is_empty() {
            inner.names.insert(s.id, s.name);
        }
    }
}

/// Why a runner stopped for good, for people, from the coordinator's code
/// when it refused the runner; `error` is the client's words.
fn stop_in_words(code: Option<ErrorCode>, error: &str, host: &str) -> String {
    match code {
        Some(ErrorCode::Unauthorized) => {
            format!("{host} no longer accepts it (its token was revoked, or its pool removed)")
        }
        Some(ErrorCode::UpgradeRequired | ErrorCode::CoordinatorTooOld) => {
            format!("this app and {host} are different versions; update the app")
        }
        Some(ErrorCode::Forbidden) => format!("{host} no longer allows it in this pool"),
        _ if error.starts_with("TLS failure") => {
            format!("can't talk securely to {host}: its certificate is not trusted here")
        }
        _ => "it hit an error it cannot retry (details below)".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stop_is_said_in_words_from_the_coordinators_code() {
        let host = "ci.example.com";
        assert_eq!(
            stop_in_words(
                Some(ErrorCode::Unauthorized),
                "Unauthorized (401): revoked",
                host
            ),
            "ci.example.com no longer accepts it (its token was revoked, or its pool removed)"
        );
        let skew = stop_in_words(Some(ErrorCode::UpgradeRequired), "upgrade", host);
        assert!(skew.contains("update the app"), "{skew}");
        let tls = "TLS failure talking to https://ci.example.com: UnknownIssuer";
        assert!(stop_in_words(None, tls, host).contains("not trusted"));
        assert!(stop_in_words(None, "odd", host).contains("cannot retry"));
    }
}
