//! N runners in one process: start, scale, drain and observe them. The
//! headless `drover runner` and the desktop app are thin shells over this.

use std::sync::{Arc, Mutex};

use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use crate::client::{Client, ClientError};
use crate::isolation::{self, IsolationError, Prepared};
use crate::runner::{
    Controls, Credential, Event, EventKind, Events, Runner, RunnerSettings, RunnerStatus,
};

struct Member {
    id: String,
    drain: watch::Sender<bool>,
    kill: watch::Sender<bool>,
    status: Arc<Mutex<RunnerStatus>>,
    task: JoinHandle<Result<(), ClientError>>,
}

pub struct Fleet {
    client: Client,
    settings: Arc<RunnerSettings>,
    isolation: Arc<Prepared>,
    events: Events,
    /// Runners in the order they were added.
    active: Vec<Member>,
    /// Runners removed by `scale_down`, finishing their jobs.
    leaving: Vec<Member>,
}

impl Fleet {
    /// `client` points at the coordinator; its token is unused (each
    /// runner brings its own). Events arrive on the returned receiver.
    /// Refused when `settings.isolation` asks for a sandbox this host
    /// cannot give (never a silent fallback).
    pub fn new(
        client: Client,
        settings: RunnerSettings,
    ) -> Result<(Self, mpsc::UnboundedReceiver<Event>), IsolationError> {
        let isolation = Arc::new(isolation::prepare(&settings.isolation)?);
        let (events, rx) = mpsc::unbounded_channel();
        Ok((
            Self {
                client,
                settings: Arc::new(settings),
                isolation,
                events,
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

    /// Starts one more runner with this credential.
    pub fn add(&mut self, credential: Credential) {
        let (drain, drain_rx) = watch::channel(false);
        let (kill, kill_rx) = watch::channel(false);
        let runner = Arc::new(Runner::new(
            &self.client,
            credential,
            self.settings.clone(),
            self.isolation.clone(),
            self.events.clone(),
        ));
        let status = runner.status_handle();
        let id = runner.id().to_owned();
        let task = tokio::spawn(runner.run(Controls {
            drain: drain_rx,
            kill: kill_rx,
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

    /// A snapshot of every runner still running, active first.
    pub fn status(&self) -> Vec<RunnerStatus> {
        self.active
            .iter()
            .chain(&self.leaving)
            .filter(|m| !m.task.is_finished())
            .map(|m| m.status.lock().expect("status lock").clone())
            .collect()
    }

    /// Graceful stop: no new leases; running jobs finish; then return.
    pub async fn drain(mut self) -> Vec<(String, Result<(), ClientError>)> {
        for m in &self.active {
            let _ = m.drain.send(true);
            m.status.lock().expect("status lock").draining = true;
            let _ = self.events.send(Event {
                runner: m.id.clone(),
                kind: EventKind::Draining,
            });
        }
        self.active.append(&mut self.leaving);
        self.join_all().await
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
