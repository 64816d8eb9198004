//! One runner: an identity with `slots` workers, each leasing one job at a
//! time, running it, heartbeating, streaming its logs and reporting back.
//! Over 500 lines because the lease → heartbeat → complete loop and its
//! events read best in one place; the job's process lives in `exec`.

use std::collections::HashSet;
use std::fmt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use drover_wire::{
    Complete, ErrorCode, JobState, Lease, LeaseRequest, LogChunk, LogStream, Outcome,
};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use crate::backoff::Backoff;
use crate::client::{Client, ClientError, Offer, Token};
use crate::exec::{self, StopReason};
use crate::isolation::{Isolation, Prepared};
use crate::workdir;

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

/// `drover-work-<uid>` in the temporary directory: each user's runners
/// their own (`workdir::own_work_root` refuses one of another user's).
pub fn default_work_root() -> PathBuf {
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    std::env::temp_dir().join(format!("drover-work-{uid}"))
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
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum EventKind {
    /// How this runner's jobs are isolated (sent before `Online`);
    /// `contained` is false when a job's detached processes may outlive it.
    Isolation {
        summary: String,
        contained: bool,
    },
    Online,
    Leased {
        job: String,
        attempt: u32,
    },
    Finished {
        job: String,
        outcome: Outcome,
        exit_code: Option<i32>,
        state: JobState,
    },
    /// The coordinator would not take the result (lease lost, runner revoked).
    CompleteRefused {
        job: String,
        error: String,
    },
    /// The coordinator leased something this runner cannot run (a lease
    /// that does not parse, a job with nothing to start): reported failed
    /// when its lease id could be read, else left to expire.
    Refused {
        job: Option<String>,
        error: String,
    },
    /// A forced stop killed the job; its lease will expire and it re-queues.
    Abandoned {
        job: String,
    },
    /// The lease was lost (expired, revoked, or not renewable for a TTL):
    /// the job was stopped or never started, and its result is not sent.
    LeaseLost {
        job: String,
        error: String,
    },
    /// What a finished job left (its directory, a process that would not
    /// die) could not be removed.
    CleanupFailed {
        job: String,
        error: String,
    },
    Disconnected {
        error: String,
    },
    Reconnected,
    /// The coordinator counts every slot of this runner as taken
    /// (`LEASE_LIMIT`): the runner tells it which leases it still holds,
    /// and asks again.
    Waiting {
        reason: String,
    },
    Draining,
    Stopped {
        error: Option<String>,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub runner: String,
    pub kind: EventKind,
}

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "runner {}: ", self.runner)?;
        match &self.kind {
            EventKind::Isolation { summary, .. } => write!(f, "{summary}"),
            EventKind::Online => write!(f, "online"),
            EventKind::Leased { job, attempt } => write!(f, "leased {job} (attempt {attempt})"),
            EventKind::Finished {
                job,
                state,
                exit_code,
                ..
            } => match exit_code {
                Some(code) => write!(f, "{job} {} (exit {code})", state.as_str()),
                None => write!(f, "{job} {}", state.as_str()),
            },
            EventKind::CompleteRefused { job, error } => {
                write!(f, "result of {job} refused: {error}")
            }
            EventKind::Refused { job, error } => {
                write!(f, "refused job {}: {error}", job.as_deref().unwrap_or("?"))
            }
            EventKind::Abandoned { job } => write!(f, "abandoned {job} (forced stop)"),
            EventKind::LeaseLost { job, error } => write!(f, "lost the lease on {job}: {error}"),
            EventKind::CleanupFailed { job, error } => {
                write!(f, "could not clean up after {job}: {error}")
            }
            EventKind::Disconnected { error } => write!(f, "disconnected: {error}; retrying"),
            EventKind::Reconnected => write!(f, "reconnected"),
            EventKind::Waiting { reason } => write!(
                f,
                "waiting for a free slot: {reason}; telling the coordinator which leases this runner still holds, and asking again"
            ),
            EventKind::Draining => write!(f, "draining: finishing running jobs"),
            EventKind::Stopped { error: None } => write!(f, "stopped"),
            EventKind::Stopped { error: Some(e) } => write!(f, "stopped: {e}"),
        }
    }
}

pub type Events = mpsc::UnboundedSender<Event>;

/// What a runner is doing, for status displays.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunnerStatus {
    pub id: String,
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
        events: Events,
    ) -> Self {
        let status = RunnerStatus {
            id: credential.runner_id.clone(),
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
        });
        result
    }

    async fn run_inner(self: &Arc<Self>, mut controls: Controls) -> Result<(), ClientError> {
        let mut backoff = self.backoff();
        loop {
            let slots = self
                .settings
                .slots
                .clamp(1, drover_wire::MAX_SLOTS as usize) as u32;
            let r = self
                .client
                .hello_with_slots(&self.settings.capabilities, slots)
                .await;
            self.link(&r);
            match r {
                Ok(_) => break,
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
        let mut first_error = None;
        for w in workers {
            if let Ok(Err(e)) = w.await
                && first_error.is_none()
            {
                first_error = Some(e);
            }
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
        let leased = tokio::select! {
            r = self.ask_for_work() => {
                self.link(&r);
                if r.is_ok() {
                    self.waiting.store(false, Ordering::Release);
                }
                r?
            }
            _ = drain.wait_for(|d| *d) => return Ok(Step::Drained),
            // Paused while waiting: give up the poll (as a drain does), and
            // wait above for the resume.
            Ok(_) = pause.wait_for(|p| *p) => return Ok(Step::Idle),
        };
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

    /// Asks for a job: a long-poll; or, when the coordinator should hear
    /// which leases this runner holds, a quick look that says so (one at a
    /// time, and any lease it brings is held before the next report).
    async fn ask_for_work(&self) -> Result<Option<Offer>, ClientError> {
        let wait = self.settings.lease_wait;
        let long_poll = || async {
            let r = self.client.offer(wait).await;
            if let Ok(offer) = &r {
                self.hold(offer.as_ref());
            }
            r
        };
        if !self.report_held.load(Ordering::Acquire) || self.held_unknown.load(Ordering::Acquire) {
            return long_poll().await;
        }
        let one = self.reporting.lock().await;
        if !self.report_held.load(Ordering::Acquire) {
            drop(one);
            return long_poll().await;
        }
        let held: Vec<String> = self.held.lock().expect("held").iter().cloned().collect();
        match self.client.offer_holding(Duration::ZERO, Some(held)).await {
            Ok(offer) => {
                self.report_held.store(false, Ordering::Release);
                self.hold(offer.as_ref());
                Ok(offer)
            }
            // A coordinator that predates `held` refuses the field.
            Err(ClientError::Api {
                code: ErrorCode::BadRequest,
                ..
            }) => {
                self.held_unknown.store(true, Ordering::Release);
                drop(one);
                long_poll().await
            }
            Err(e) => Err(e),
        }
    }

    /// Counts the lease an answer brought as held.
    fn hold(&self, offer: Option<&Offer>) {
        let id = match offer {
            Some(Offer::Lease(lease)) => Some(&lease.lease_id),
            Some(Offer::Unreadable { lease_id, .. }) => lease_id.as_ref(),
            None => None,
        };
        if let Some(id) = id {
            self.held.lock().expect("held").insert(id.clone());
        }
    }

    fn unhold(&self, lease: &str) {
        self.held.lock().expect("held").remove(lease);
    }

    /// Runs one job to the end; returns the next job if the complete leased
    /// one. The lease is not held any more after.
    async fn run_job(self: &Arc<Self>, lease: Lease, controls: &Controls) -> Option<Offer> {
        let id = lease.lease_id.clone();
        let next = self.run_job_inner(lease, controls).await;
        self.unhold(&id);
        next
    }

    async fn run_job_inner(self: &Arc<Self>, lease: Lease, controls: &Controls) -> Option<Offer> {
        let job = lease.job.clone();
        let ttl = Duration::from_millis(lease.ttl_ms);
        self.emit(EventKind::Leased {
            job: job.id.clone(),
            attempt: job.attempt,
        });
        // Mark it running before starting anything: a lease that never got
        // here never ran, so the coordinator may give its attempt back.
        let renewed = match self.first_heartbeat(&lease.lease_id, ttl).await {
            Ok(sent) => sent,
            Err(reason) => {
                self.emit(EventKind::LeaseLost {
                    job: job.id,
                    error: reason,
                });
                return None;
            }
        };
        self.set_status(|s| s.current_jobs.push(job.id.clone()));

        let (stop_tx, stop_rx) = watch::channel(None);
        let stop_tx = Arc::new(stop_tx);
        let (out_tx, out_rx) = mpsc::channel(64);
        let uploader = tokio::spawn(self.clone().upload_logs(lease.lease_id.clone(), out_rx));
        let (phase, phase_rx) = watch::channel(Phase::Running);
        let heartbeat = tokio::spawn(self.clone().heartbeat(
            lease.lease_id.clone(),
            ttl,
            renewed,
            stop_tx.clone(),
            phase_rx,
        ));
        let kill_watch = {
            let mut kill = controls.kill.clone();
            let stop_tx = stop_tx.clone();
            tokio::spawn(async move {
                if kill.wait_for(|k| *k).await.is_ok() {
                    stop_tx.send_replace(Some(StopReason::Shutdown));
                }
            })
        };

        let work_root = &self.settings.work_root;
        let made = workdir::create_job_dir(
            work_root,
            &format!("{}-{}", job.id, job.attempt),
            self.isolation.job_user,
        );
        let result = match &made {
            Ok(dir) => {
                let place = exec::Place {
                    dir,
                    work_root,
                    isolation: &self.isolation,
                };
                exec::execute(
                    &job,
                    &self.id,
                    &place,
                    out_tx,
                    stop_rx,
                    self.settings.kill_grace,
                    safety_margin(ttl) / 2,
                )
                .await
            }
            Err(e) => {
                drop(out_tx);
                exec::ExecResult {
                    outcome: Outcome::Failed,
                    exit_code: None,
                    error: Some(format!("cannot create the work directory: {e}")),
                    stopped: None,
                    leftover: None,
                }
            }
        };
        kill_watch.abort();
        let _ = uploader.await;
        if let Ok(dir) = made
            && let Err(e) = workdir::remove_job_dir(&dir)
        {
            self.emit(EventKind::CleanupFailed {
                job: job.id.clone(),
                error: format!("removing {}: {e}", dir.display()),
            });
        }
        if let Some(error) = &result.leftover {
            self.emit(EventKind::CleanupFailed {
                job: job.id.clone(),
                error: error.clone(),
            });
        }
        self.set_status(|s| s.current_jobs.retain(|j| *j != job.id));

        match result.stopped {
            Some(StopReason::Shutdown) => {
                heartbeat.abort();
                self.emit(EventKind::Abandoned { job: job.id });
                return None;
            }
            Some(StopReason::LeaseLost) => {
                // Someone else may be running it now; our result is not wanted.
                heartbeat.abort();
                self.emit(EventKind::LeaseLost {
                    job: job.id,
                    error: "stopped the job".into(),
                });
                return None;
            }
            Some(StopReason::Cancelled) | None => {}
        }
        // The heartbeat keeps the lease alive until the result is taken.
        // On the first try, unless draining or paused, ask for the next job in the same
        // round trip (only one already queued: the long-poll stays with
        // `lease`). Not on a retry: the lost answer may have held a lease,
        // and a second one would be leased to no one until its TTL.
        let mut done = Complete {
            outcome: result.outcome,
            exit_code: result.exit_code,
            error: result.error,
            next: (!*controls.drain.borrow() && !*controls.pause.borrow()).then_some(
                LeaseRequest {
                    wait_ms: 0,
                    held: None,
                },
            ),
        };
        let mut next = None;
        let mut backoff = self.backoff();
        let mut kill = controls.kill.clone();
        phase.send_replace(Phase::Completing);
        let outcome = loop {
            let r = self.client.complete_and_offer(&lease.lease_id, &done).await;
            self.link(&r);
            let asked = done.next.take().is_some();
            match r {
                Ok((r, offer)) => {
                    self.hold(offer.as_ref());
                    next = offer;
                    break EventKind::Finished {
                        job: job.id,
                        outcome: done.outcome,
                        exit_code: done.exit_code,
                        state: r.state,
                    };
                }
                // Keep the result until the coordinator is back.
                Err(e) if e.is_recoverable() => {
                    tokio::select! {
                        _ = backoff.wait() => {}
                        _ = kill.wait_for(|k| *k) => break EventKind::Abandoned { job: job.id },
                    }
                }
                // A coordinator that predates `next` refuses the field: say it again without.
                Err(ClientError::Api {
                    code: drover_wire::ErrorCode::BadRequest,
                    ..
                }) if asked => {}
                Err(e) => {
                    break EventKind::CompleteRefused {
                        job: job.id,
                        error: e.to_string(),
                    };
                }
            }
        };
        // The heartbeat in flight is let finish (the coordinator answers it
        // once the complete is in), so its connection stays open for the
        // next request; aborted, it would close it.
        phase.send_replace(Phase::Finished);
        tokio::spawn(async move {
            let abort = heartbeat.abort_handle();
            if tokio::time::timeout(Duration::from_secs(15), heartbeat)
                .await
                .is_err()
            {
                abort.abort();
            }
        });
        self.emit(outcome);
        next
    }

    /// The heartbeat that marks the job running, retried while the lease
    /// may still be ours. `Ok` is when the heartbeat that renewed it was
    /// sent; `Err` says why the lease is not ours any more.
    async fn first_heartbeat(&self, lease: &str, ttl: Duration) -> Result<Instant, String> {
        let give_up = Instant::now() + ttl.saturating_sub(safety_margin(ttl));
        let mut backoff = self.backoff();
        loop {
            let sent = Instant::now();
            let r = match tokio::time::timeout_at(
                give_up,
                self.client.heartbeat(lease, Duration::ZERO),
            )
            .await
            {
                Ok(r) => r,
                Err(_) => Err(ClientError::Transport("heartbeat timed out".into())),
            };
            self.link(&r);
            match r {
                Ok(_) => return Ok(sent),
                Err(e) if e.is_recoverable() && Instant::now() < give_up => {
                    tokio::select! {
                        _ = backoff.wait() => {}
                        _ = tokio::time::sleep_until(give_up) => {}
                    }
                }
                Err(e) => return Err(e.to_string()),
            }
        }
    }

    /// Keeps the lease alive. Each heartbeat waits at the coordinator for a
    /// cancel, so a cancel arrives at once.
    ///
    /// The coordinator renews a lease when a heartbeat *arrives*, and may
    /// hold the answer for a while; so the lease lasts at least a TTL from
    /// when the last good heartbeat was *sent* (`renewed`), never from when
    /// its answer came. A lease not renewed by a safety margin before that
    /// may soon be handed to another runner, so the job stops then (as it
    /// does when the coordinator says the lease is lost).
    async fn heartbeat(
        self: Arc<Self>,
        lease: String,
        mut ttl: Duration,
        mut renewed: Instant,
        stop: Arc<watch::Sender<Option<StopReason>>>,
        mut phase: watch::Receiver<Phase>,
    ) {
        let mut wait = (ttl / 3).min(Duration::from_secs(10));
        let mut keep = ttl.saturating_sub(safety_margin(ttl));
        let mut backoff = self.backoff();
        // The first reason stands, except that a lost lease overrides a
        // cancel: a job stopping for a cancel must then stop sooner.
        let stop_with = |reason| {
            stop.send_if_modified(|s| {
                let wins = s.is_none() || (reason == StopReason::LeaseLost && *s != Some(reason));
                if wins {
                    *s = Some(reason);
                }
                wins
            })
        };
        loop {
            // The job is completed: no more heartbeats.
            if *phase.borrow() == Phase::Finished {
                return;
            }
            let stop_at = renewed + keep;
            let sent = Instant::now();
            let left = stop_at.saturating_duration_since(sent);
            if left.is_zero() {
                stop_with(StopReason::LeaseLost);
                return;
            }
            // Never wait on one request past the point the job must stop.
            let r = match tokio::time::timeout_at(
                stop_at,
                self.client.heartbeat(&lease, wait.min(left / 2)),
            )
            .await
            {
                Ok(r) => r,
                Err(_) => Err(ClientError::Transport("heartbeat timed out".into())),
            };
            let now = *phase.borrow();
            // Its answer came after the runner moved on: say nothing of it.
            if now == Phase::Finished {
                return;
            }
            self.link(&r);
            match r {
                Ok(r) => {
                    backoff.reset();
                    renewed = sent;
                    // The coordinator renews with its own TTL (it may have
                    // restarted with a shorter one): keep to the shorter.
                    let given = Duration::from_millis(r.ttl_ms);
                    if !given.is_zero() && given < ttl {
                        ttl = given;
                        wait = (ttl / 3).min(Duration::from_secs(10));
                        keep = ttl.saturating_sub(safety_margin(ttl));
                    }
                    if r.cancel {
                        stop_with(StopReason::Cancelled);
                        // Still heartbeat through the kill grace, but without spinning.
                        tokio::select! {
                            _ = tokio::time::sleep(wait) => {}
                            _ = phase.wait_for(|p| *p == Phase::Finished) => return,
                        }
                    }
                }
                Err(e) if e.is_recoverable() => {
                    tokio::select! {
                        _ = backoff.wait() => {}
                        _ = tokio::time::sleep_until(stop_at) => {}
                        _ = phase.wait_for(|p| *p == Phase::Finished) => return,
                    }
                }
                // The coordinator ends the lease when it takes the result
                // (and answers the heartbeat waiting there): the complete
                // says how it went.
                Err(_) if now == Phase::Completing => return,
                Err(_) => {
                    stop_with(StopReason::LeaseLost);
                    return;
                }
            }
        }
    }

    /// Ships output to the coordinator in order, numbered from 0; merges
    /// what piles up so a chatty job costs few requests.
    async fn upload_logs(
        self: Arc<Self>,
        lease: String,
        mut rx: mpsc::Receiver<(LogStream, Vec<u8>)>,
    ) {
        let mut shipper = LogShipper {
            runner: &self,
            lease: &lease,
            seq: 0,
            gone: false,
        };
        let mut pending: [Vec<u8>; 2] = [Vec::new(), Vec::new()];
        let index = |s: LogStream| match s {
            LogStream::Stdout => 0,
            LogStream::Stderr => 1,
        };
        while let Some((stream, bytes)) = rx.recv().await {
            let i = index(stream);
            pending[i].extend_from_slice(&bytes);
            let mut other = None;
            while pending[i].len() < MAX_CHUNK {
                match rx.try_recv() {
                    Ok((s, b)) if s == stream => pending[i].extend_from_slice(&b),
                    Ok(next) => {
                        other = Some(next);
                        break;
                    }
                    Err(_) => break,
                }
            }
            shipper
                .send(stream, take_utf8(&mut pending[i], false))
                .await;
            if let Some((s, b)) = other {
                let j = index(s);
                pending[j].extend_from_slice(&b);
                shipper.send(s, take_utf8(&mut pending[j], false)).await;
            }
        }
        for stream in [LogStream::Stdout, LogStream::Stderr] {
            shipper
                .send(stream, take_utf8(&mut pending[index(stream)], true))
                .await;
        }
    }
}

struct LogShipper<'a> {
    runner: &'a Runner,
    lease: &'a str,
    seq: u64,
    /// The lease is gone (or the coordinator stayed away): stop shipping.
    gone: bool,
}

impl LogShipper<'_> {
    async fn send(&mut self, stream: LogStream, data: String) {
        if data.is_empty() || self.gone {
            return;
        }
        let chunk = LogChunk {
            seq: self.seq,
            stream,
            data,
        };
        self.seq += 1;
        let mut backoff = self.runner.backoff();
        for _ in 0..30 {
            let r = self.runner.client.log(self.lease, &chunk).await;
            self.runner.link(&r);
            match r {
                Ok(()) => return,
                Err(e) if e.is_recoverable() => backoff.wait().await,
                Err(_) => break,
            }
        }
        self.gone = true;
    }
}

/// How long before its lease could lapse a runner that cannot renew it
/// stops the job: a tenth of the TTL, at least half a second (clock rates,
/// scheduling, the kill itself), at most half the TTL. The job gets SIGTERM
/// then, and SIGKILL half a margin later, so it is gone before the
/// coordinator can expire the lease and hand the job to another runner.
pub fn safety_margin(ttl: Duration) -> Duration {
    (ttl / 10).max(Duration::from_millis(500)).min(ttl / 2)
}

/// Text up to the last whole UTF-8 character; an incomplete tail stays in `buf`.
fn take_utf8(buf: &mut Vec<u8>, at_end: bool) -> String {
    let cut = match std::str::from_utf8(buf) {
        Ok(_) => buf.len(),
        Err(e) if e.error_len().is_none() && !at_end => e.valid_up_to(),
        Err(_) => buf.len(),
    };
    let rest = buf.split_off(cut);
    let text = String::from_utf8_lossy(buf).into_owned();
    *buf = rest;
    text
}

const MAX_CHUNK: usize = 64 * 1024;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf8_split_across_reads_is_kept_whole() {
        let snow = "☃".as_bytes();
        let mut buf = b"ab".to_vec();
        buf.extend_from_slice(&snow[..2]);
        assert_eq!(take_utf8(&mut buf, false), "ab");
        assert_eq!(buf, snow[..2]);
        buf.extend_from_slice(&snow[2..]);
        assert_eq!(take_utf8(&mut buf, false), "☃");
        assert!(buf.is_empty());
        let mut bad = vec![b'x', 0xff, b'y'];
        assert_eq!(take_utf8(&mut bad, false), "x\u{fffd}y");
        let mut tail = snow[..1].to_vec();
        assert_eq!(take_utf8(&mut tail, true), "\u{fffd}");
    }
}
