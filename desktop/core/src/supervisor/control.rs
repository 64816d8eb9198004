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
        inner.quiet = in_quiet_hours(&settings);
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
            for (was, now, what) in [
                (inner.on_battery, on_battery, "on battery power"),
                (inner.metered, metered, "on a metered network"),
                (inner.quiet, quiet, "in quiet hours"),
            ] {
                if was != now {
                    let message = match now {
                        true => format!("this machine is {what}"),
                        false => format!("this machine is no longer {what}"),
                    };
                    self.note(&mut inner, ActivityKind::Info, message);
                }
            }
            (inner.on_battery, inner.metered, inner.quiet) = (on_battery, metered, quiet);
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
            EventKind::Reconnected | EventKind::Online
                if inner.disconnected.remove(&event.runner) && inner.disconnected.is_empty() =>
            {
                let message = "connected to the coordinator again".to_owned();
                self.note(&mut inner, ActivityKind::Reconnected, message.clone());
                self.notify("Drover: back online", &message);
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
