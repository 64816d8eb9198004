//! One runner: an identity with `slots` workers, each leasing one job at a
//! time, running it, heartbeating, streaming its logs and reporting back.
//! Here: its settings and state, and the loop that asks for work; `job`
//! runs one leased job (heartbeat, the result), `logs` ships its output,
//! `events` is what a runner reports; the job's process lives in `exec`.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, atomic::AtomicBool, atomic::Ordering};
use std::time::Duration;

use drover_wire::{Complete, ErrorCode, Outcome};
use tokio::sync::{mpsc, watch};

use crate::backoff::Backoff;
use crate::client::{Client, ClientError, Offer, Token};
use crate::isolation::{Isolation, Prepared};

mod asking;
mod events;
mod job;
mod logs;
mod presence;

pub use asking::PAUSE_GRACE;
pub use events::{Event, EventKind};
pub use job::safety_margin;
pub use presence::PAUSED_HELLO;

/// A runner's identity and credential.
#[derive(Clone, Debug)]
pub struct Credential {
    pub runner_id: String,
    pub token: Token,
}

#[derive(Debug, Clone)]
pub struct RunnerSettings {
    /// Jobs one runner runs at once (`--max-concurrent`).
    pub slots: usize,
    /// How long one lease long-poll may wait.
    pub lease_wait: Duration,
    /// SIGTERM → SIGKILL grace for cancelled and timed-out jobs.
    pub kill_grace: Duration,
    pub initial_backoff: Duration,
    pub max_backoff: Duration,
    /// Each job runs in a fresh directory under here, removed afterwards.
    pub work_root: PathBuf,
    /// Announced to the coordinator on start (`os=`, `arch=`, `docker`).
    pub capabilities: Vec<String>,
    /// Sandbox, hidden paths: how jobs are kept from the runner and each other.
    pub isolation: Isolation,
    /// Offer `github-actions`: on-demand jobs get this Actions runner.
    pub actions: Option<crate::actions::ActionsRunner>,
}

/// Where a job is, for its heartbeat.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Running,
    /// Its result is being sent: the lease may end any moment.
    Completing,
    /// The result was taken (or given up): heartbeats stop.
    Finished,
}

/// Where jobs' directories go unless told: in the temporary directory,
/// each user's runners their own (`drover-work-<uid>`; on Windows the
/// temporary directory is the user's already).
pub fn default_work_root() -> PathBuf {
    crate::platform::default_work_root()
}

impl Default for RunnerSettings {
    fn default() -> Self {
        Self {
            slots: 1,
            lease_wait: Duration::from_secs(25),
            kill_grace: Duration::from_secs(10),
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(5),
            work_root: default_work_root(),
            capabilities: crate::host::detect_capabilities(),
            isolation: Isolation::default(),
            actions: None,
        }
    }
}

pub type Events = mpsc::UnboundedSender<Event>;

/// What a runner is doing, for status displays.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunnerStatus {
    pub id: String,
    /// Its name at the coordinator (known once it has said hello).
    pub name: String,
    pub online: bool,
    pub draining: bool,
    pub stopped: bool,
    pub current_jobs: Vec<String>,
}

/// Drain (stop leasing, let jobs finish), kill (stop jobs too), and pause
/// (hold new leases while true; running jobs go on).
#[derive(Clone)]
pub struct Controls {
    pub drain: watch::Receiver<bool>,
    pub kill: watch::Receiver<bool>,
    pub pause: watch::Receiver<bool>,
}

/// The outcome of one step of a worker.
#[derive(Debug, PartialEq)]
pub enum Step {
    Ran {
        job: String,
    },
    /// The long-poll ended without a job.
    Idle,
    /// Asked to drain while waiting.
    Drained,
}

pub struct Runner {
    client: Client,
    id: String,
    settings: Arc<RunnerSettings>,
    /// `settings.isolation` as checked on this host.
    isolation: Arc<Prepared>,
    actions: Option<Arc<crate::actions::Provider>>, // `settings.actions`, fleet-wide
    events: Events,
    status: Arc<Mutex<RunnerStatus>>,
    /// The last call to the coordinator failed for a transient reason.
    disconnected: AtomicBool,
    /// The leases this runner holds: jobs it runs, results it has to report.
    held: Mutex<HashSet<String>>,
    /// The next lease request says which leases those are (at start, and
    /// after a call failed or the coordinator said all slots are taken: it
    /// may count leases this runner gave up, e.g. after its restart).
    report_held: AtomicBool,
    /// One such report at a time, so none leaves out a lease another
    /// report just brought.
    reporting: tokio::sync::Mutex<()>,
    /// A coordinator that predates `held` refused it: no more reports.
    held_unknown: AtomicBool,
    /// A `Waiting` event was sent since the last lease call that succeeded.
    waiting: AtomicBool,
}

impl Runner {
    pub fn new(
        base: &Client,
        credential: Credential,
        settings: Arc<RunnerSettings>,
        isolation: Arc<Prepared>,
        actions: Option<Arc<crate::actions::Provider>>,
        events: Events,
    ) -> Self {
        let status = RunnerStatus {
            id: credential.runner_id.clone(),
            name: String::new(),
            online: false,
            draining: false,
            stopped: false,
            current_jobs: vec![],
        };
        Self {
            client: base.with_token(credential.token),
            id: credential.runner_id,
            settings,
            isolation,
            actions,
            events,
            status: Arc::new(Mutex::new(status)),
            disconnected: AtomicBool::new(false),
            held: Mutex::default(),
            report_held: AtomicBool::new(true),
            reporting: tokio::sync::Mutex::new(()),
            held_unknown: AtomicBool::new(false),
            waiting: AtomicBool::new(false),
        }
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn status_handle(&self) -> Arc<Mutex<RunnerStatus>> {
        self.status.clone()
    }

    fn emit(&self, kind: EventKind) {
        let _ = self.events.send(Event {
            runner: self.id.clone(),
            kind,
        });
    }

    fn set_status(&self, f: impl FnOnce(&mut RunnerStatus)) {
        f(&mut self.status.lock().expect("status lock"));
    }

    fn backoff(&self) -> Backoff {
        Backoff::new(self.settings.initial_backoff, self.settings.max_backoff)
    }

    /// Records how a call to the coordinator went; whichever task sees the
    /// link go down or come back emits Disconnected or Reconnected, once.
    fn link<T>(&self, result: &Result<T, ClientError>) {
        match result {
            // Not a link failure: the coordinator says every slot is taken.
            Err(e) if e.code() == Some(ErrorCode::LeaseLimit) => {
                self.report_held.store(true, Ordering::Release);
                if !self.waiting.swap(true, Ordering::AcqRel) {
                    self.emit(EventKind::Waiting {
                        reason: e.to_string(),
                    });
                }
            }
            Ok(_) => {
                if self.disconnected.swap(false, Ordering::AcqRel) {
                    self.set_status(|s| s.online = true);
                    self.emit(EventKind::Reconnected);
                }
            }
            Err(e) if e.is_recoverable() => {
                self.report_held.store(true, Ordering::Release);
                if !self.disconnected.swap(true, Ordering::AcqRel) {
                    self.set_status(|s| s.online = false);
                    self.emit(EventKind::Disconnected {
                        error: e.to_string(),
                    });
                }
            }
            Err(_) => {}
        }
    }

    /// Runs the runner until drained, killed, or refused for good.
    pub async fn run(self: Arc<Self>, controls: Controls) -> Result<(), ClientError> {
        let result = self.run_inner(controls).await;
        self.set_status(|s| {
            s.online = false;
            s.stopped = true;
        });
        self.emit(EventKind::Stopped {
            error: result.as_ref().err().map(ToString::to_string),
            code: result.as_ref().err().and_then(ClientError::code),
        });
        result
    }

    async fn run_inner(self: &Arc<Self>, mut controls: Controls) -> Result<(), ClientError> {
        let mut backoff = self.backoff();
        let slots = self
            .settings
            .slots
            .clamp(1, drover_wire::MAX_SLOTS as usize) as u32;
        loop {
            let paused = *controls.pause.borrow();
            let r = self
                .client
                .hello_as(&self.settings.capabilities, slots, paused)
                .await;
            self.link(&r);
            match r {
                Ok(hello) => {
                    self.set_status(|s| s.name = hello.name);
                    break;
                }
                Err(e) if e.is_recoverable() => {
                    tokio::select! {
                        _ = backoff.wait() => {}
                        _ = controls.drain.wait_for(|d| *d) => return Ok(()),
                    }
                }
                Err(e) => return Err(e),
            }
        }
        self.set_status(|s| s.online = true);
        self.emit(EventKind::Isolation {
            summary: self.isolation.to_string(),
            contained: self.isolation.contained(),
        });
        self.emit(EventKind::Online);
        let workers: Vec<_> = (0..self
            .settings
            .slots
            .clamp(1, drover_wire::MAX_SLOTS as usize))
            .map(|_| tokio::spawn(self.clone().work(controls.clone())))
            .collect();
        let presence = tokio::spawn(self.clone().presence(controls.pause.clone(), slots));
        let mut first_error = None;
        for w in workers {
            if let Ok(Err(e)) = w.await
                && first_error.is_none()
            {
                first_error = Some(e);
            }
        }
        presence.abort();
        if first_error.is_none() {
            // Stopping, not refused: offline in listings at once, not once
            // the coordinator has missed it for 40 s. Best effort.
            // the coordinator may be gone; then the 40 s do it.
            let _ = tokio::time::timeout(Duration::from_secs(2), self.client.bye()).await;
        }
        first_error.map_or(Ok(()), Err)
    }

    /// One worker: step until drained, or refused for good (revoked).
    async fn work(self: Arc<Self>, controls: Controls) -> Result<(), ClientError> {
        let mut backoff = self.backoff();
        let mut drain = controls.drain.clone();
        loop {
            match self.try_lease_and_run(&controls).await {
                Ok(Step::Drained) => return Ok(()),
                Ok(_) => backoff.reset(),
                Err(e) if e.is_recoverable() => {
                    tokio::select! {
                        _ = backoff.wait() => {}
                        _ = drain.wait_for(|d| *d) => return Ok(()),
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// One step: long-poll for a job and, if one comes, run it to the end.
    pub async fn try_lease_and_run(
        self: &Arc<Self>,
        controls: &Controls,
    ) -> Result<Step, ClientError> {
        let mut drain = controls.drain.clone();
        if *drain.borrow() {
            return Ok(Step::Drained);
        }
        let mut pause = controls.pause.clone();
        if *pause.borrow() {
            tokio::select! {
                // A dropped sender can pause no more.
                _ = pause.wait_for(|p| !*p) => {}
                _ = drain.wait_for(|d| *d) => return Ok(Step::Drained),
            }
        }
        let ask = self.ask_for_work();
        tokio::pin!(ask);
        // `Err(paused)`: the pause changed first (not paused: its sender is
        // gone, and can pause no more).
        let first = tokio::select! {
            r = &mut ask => Ok(r),
            _ = drain.wait_for(|d| *d) => return Ok(self.gave_up_poll(Step::Drained)),
            paused = pause.wait_for(|p| *p) => Err(paused.is_ok()),
        };
        let asked = match first {
            Ok(r) => r,
            Err(false) => tokio::select! {
                r = &mut ask => r,
                _ = drain.wait_for(|d| *d) => return Ok(self.gave_up_poll(Step::Drained)),
            },
            // Paused while waiting. Until the coordinator hears of it (the
            // presence task says hello, paused), it may still hand this
            // poll a job, which a dropped poll would strand, leased to
            // nobody, until its TTL. So the poll is read to its end: the
            // coordinator ends it once the pause reaches it, or answers with
            // a job leased before that, which runs. A coordinator that does
            // not end it (an older one) has it given up after PAUSE_GRACE.
            Err(true) => tokio::select! {
                r = &mut ask => r,
                () = tokio::time::sleep(PAUSE_GRACE) => return Ok(self.gave_up_poll(Step::Idle)),
                _ = drain.wait_for(|d| *d) => return Ok(self.gave_up_poll(Step::Drained)),
            },
        };
        self.link(&asked);
        if asked.is_ok() {
            self.waiting.store(false, Ordering::Release);
        }
        let leased = asked?;
        let lease = match leased {
            None => return Ok(Step::Idle),
            Some(Offer::Lease(lease)) => *lease,
            Some(Offer::Unreadable {
                lease_id,
                job_id,
                error,
            }) => {
                self.refuse(lease_id, job_id.clone(), error, controls).await;
                return Ok(Step::Ran {
                    job: job_id.unwrap_or_default(),
                });
            }
        };
        let job = lease.job.id.clone();
        let mut next = self.run_job(lease, controls).await;
        // A job leased along with the last complete runs next, at once;
        // unless we are stopping: then it is not started (not even marked
        // running), so its lease expires and gives the attempt back.
        while let Some(offer) = next.take() {
            let lease = match offer {
                Offer::Lease(lease) => *lease,
                Offer::Unreadable {
                    lease_id,
                    job_id,
                    error,
                } => {
                    self.refuse(lease_id, job_id, error, controls).await;
                    break;
                }
            };
            if *controls.drain.borrow() || *controls.kill.borrow() {
                self.unhold(&lease.lease_id);
                self.emit(EventKind::Abandoned { job: lease.job.id });
                break;
            }
            next = self.run_job(lease, controls).await;
        }
        Ok(Step::Ran { job })
    }

    /// Gives back a lease this runner cannot run: reports its job failed,
    /// saying why, so it neither runs nor waits for the lease to expire.
    /// Without a lease id there is nothing to report on; the lease expires.
    async fn refuse(
        &self,
        lease: Option<String>,
        job: Option<String>,
        error: String,
        controls: &Controls,
    ) {
        self.emit(EventKind::Refused {
            job: job.clone(),
            error: error.clone(),
        });
        let Some(lease) = lease else {
            return;
        };
        self.report_refusal(&lease, &error, controls).await;
        self.unhold(&lease);
    }

    async fn report_refusal(&self, lease: &str, error: &str, controls: &Controls) {
        let done = Complete {
            outcome: Outcome::Failed,
            exit_code: None,
            error: Some(format!("the runner refused this job: {error}")),
            next: None,
        };
        let mut backoff = self.backoff();
        let mut kill = controls.kill.clone();
        for _ in 0..10 {
            let r = self.client.complete(lease, &done).await;
            self.link(&r);
            match r {
                Err(e) if e.is_recoverable() => {
                    tokio::select! {
                        _ = backoff.wait() => {}
                        _ = kill.wait_for(|k| *k) => return,
                    }
                }
                _ => return,
            }
        }
    }
}
