//! N runners in one process: start, scale, drain and observe them. The
//! headless `drover runner` and the desktop app are thin shells over this.

use std::sync::{Arc, Mutex};

use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use drover_wire::github::ACTIONS_CAPABILITY;

use crate::actions::Provider;
use crate::client::{Client, ClientError};
use crate::isolation::{self, IsolationError, Prepared};
use crate::runner::{
    Controls, Credential, Event, EventKind, Events, Runner, RunnerSettings, RunnerStatus,
};
use crate::workdir;

struct Member {
    id: String,
    drain: watch::Sender<bool>,
    kill: watch::Sender<bool>,
    status: Arc<Mutex<RunnerStatus>>,
    task: JoinHandle<Result<(), ClientError>>,
}

impl Member {
    /// The runner has stopped (its `Stopped` event is sent, or its task ended).
    fn stopped(&self) -> bool {
        self.task.is_finished() || self.status.lock().expect("status lock").stopped
    }
}

pub struct Fleet {
    client: Client,
    settings: Arc<RunnerSettings>,
    isolation: Arc<Prepared>,
    /// The Actions runner for on-demand jobs, with `--github-actions`.
    actions: Option<Arc<Provider>>,
    events: Events,
    /// Holds new leases on every runner while true.
    pause: watch::Sender<bool>,
    /// Runners in the order they were added.
    active: Vec<Member>,
    /// Runners removed by `scale_down`, finishing their jobs.
    leaving: Vec<Member>,
}

impl Fleet {
    /// `client` points at the coordinator; its token is unused (each
    /// runner brings its own). Events arrive on the returned receiver.
    /// Refused when `settings.isolation` asks for a sandbox this host
    /// cannot give (never a silent fallback), or when the work root is not
    /// this user's own ([`workdir::own_work_root`]).
    pub fn new(
        client: Client,
        settings: RunnerSettings,
    ) -> Result<(Self, mpsc::UnboundedReceiver<Event>), IsolationError> {
        let isolation = Arc::new(isolation::prepare(&settings.isolation)?);
        workdir::own_work_root(&settings.work_root, isolation.job_user)?;
        let mut settings = settings;
        isolation.announce(&mut settings.capabilities);
        // Only a runner that has the Actions runner offers to run it.
        settings.capabilities.retain(|c| c != ACTIONS_CAPABILITY);
        let actions = settings.actions.clone().map(|spec| {
            settings.capabilities.push(ACTIONS_CAPABILITY.to_owned());
            Arc::new(Provider::new(spec, isolation.programs.tar.clone()))
        });
        let (events, rx) = mpsc::unbounded_channel();
        Ok((
            Self {
                client,
                settings: Arc::new(settings),
                isolation,
                actions,
                events,
                pause: watch::Sender::new(false),
                active: Vec::new(),
                leaving: Vec::new(),
            },
            rx,
        ))
    }

    /// How this fleet's jobs are isolated on this host.
    pub fn isolation(&self) -> &Prepared {
        &self.isolation
    }

    /// What each runner announces: the settings' capabilities, with the
    /// sandbox its jobs really get (`sandbox=bwrap` or `sandbox=none`).
    pub fn capabilities(&self) -> &[String] {
        &self.settings.capabilities
    }

    /// Starts one more runner with this credential.
    pub fn add(&mut self, credential: Credential) {
        let (drain, drain_rx) = watch::channel(false);
        let (kill, kill_rx) = watch::channel(false);
        let runner = Arc::new(Runner::new(
            &self.client,
            credential,
            self.settings.clone(),
            self.isolation.clone(),
            self.actions.clone(),
            self.events.clone(),
        ));
        let status = runner.status_handle();
        let id = runner.id().to_owned();
        let task = tokio::spawn(runner.run(Controls {
            drain: drain_rx,
            kill: kill_rx,
            pause: self.pause.subscribe(),
        }));
        self.active.push(Member {
            id,
            drain,
            kill,
            status,
            task,
        });
    }

    /// Runners started and not removed.
    pub fn len(&self) -> usize {
        self.active.len()
    }

    pub fn is_empty(&self) -> bool {
        self.active.is_empty()
    }

    /// Removes the newest runner: it stops leasing and exits once its
    /// current jobs finish. Returns its id.
    pub fn scale_down(&mut self) -> Option<String> {
        let member = self.active.pop()?;
        member.status.lock().expect("status lock").draining = true;
        let _ = self.events.send(Event {
            runner: member.id.clone(),
            kind: EventKind::Draining,
        });
        let _ = member.drain.send(true);
        let id = member.id.clone();
        self.leaving.push(member);
        Some(id)
    }

    /// Pauses (no new leases; running jobs go on) or resumes every runner,
    /// those added later included.
    pub fn set_paused(&self, paused: bool) {
        self.pause.send_replace(paused);
    }

    pub fn paused(&self) -> bool {
        *self.pause.borrow()
    }

    /// Runners removed by `scale_down` that have finished their jobs and
    /// stopped, each once: their credentials may now be revoked.
    pub async fn take_departed(&mut self) -> Vec<(String, Result<(), ClientError>)> {
        let (done, still): (Vec<_>, Vec<_>) = std::mem::take(&mut self.leaving)
            .into_iter()
            .partition(Member::stopped);
        self.leaving = still;
        let mut out = Vec::new();
        for m in done {
            // Stopped: its task returns at once.
            out.push((m.id, m.task.await.unwrap_or(Ok(()))));
        }
        out
    }

    /// A snapshot of every runner still running, active first.
    pub fn status(&self) -> Vec<RunnerStatus> {
        self.active
            .iter()
            .chain(&self.leaving)
            .filter(|m| !m.stopped())
            .map(|m| m.status.lock().expect("status lock").clone())
            .collect()
    }

    /// Graceful stop: no new leases; running jobs finish; then return.
    pub async fn drain(mut self) -> Vec<(String, Result<(), ClientError>)> {
        self.stop_leasing();
        self.active.append(&mut self.leaving);
        self.join_all().await
    }

    /// Every runner stops leasing and stops once its jobs finish; unlike
    /// `drain`, this returns at once (watch `status` empty out, or the
    /// `Stopped` events). The runners stay members: nothing departs.
    pub fn stop_leasing(&self) {
        for m in &self.active {
            if m.drain.send_replace(true) {
                continue;
            }
            m.status.lock().expect("status lock").draining = true;
            let _ = self.events.send(Event {
                runner: m.id.clone(),
                kind: EventKind::Draining,
            });
        }
    }

    /// Forced stop: running jobs are killed (and re-queue when their lease expires).
    pub fn kill(&self) {
        for m in self.active.iter().chain(&self.leaving) {
            let _ = m.drain.send(true);
            let _ = m.kill.send(true);
        }
    }

    /// Waits until every runner has stopped on its own (e.g. all revoked).
    pub async fn wait(mut self) -> Vec<(String, Result<(), ClientError>)> {
        self.active.append(&mut self.leaving);
        self.join_all().await
    }

    async fn join_all(&mut self) -> Vec<(String, Result<(), ClientError>)> {
        let mut out = Vec::new();
        for m in self.active.drain(..) {
            let result = m.task.await.unwrap_or(Ok(()));
            out.push((m.id, result));
        }
        out
    }
}
