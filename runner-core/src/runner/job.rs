//! One leased job, start to end: its directory and process, the first
//! heartbeat and the ones after, its log shipped in chunks, and its result
//! reported (or its lease given up in time when the coordinator is away).

use std::sync::Arc;
use std::time::Duration;

use drover_wire::{Complete, Lease, LeaseRequest, Outcome};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use super::{Controls, EventKind, Phase, Runner};
use crate::client::{ClientError, Offer};
use crate::exec::{self, StopReason};
use crate::workdir;

impl Runner {
    /// Runs one job to the end; returns the next job if the complete leased
    /// one. The lease is not held any more after.
    pub(super) async fn run_job(
        self: &Arc<Self>,
        lease: Lease,
        controls: &Controls,
    ) -> Option<Offer> {
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
        // here never ran, so the coordinator may give its attempt back. (Its
        // directory is made only then: a lease that woke up stale names the
        // same attempt as the one that replaced it, and the same directory.)
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
        self.emit(EventKind::Started {
            job: job.id.clone(),
        });

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
        let provided = match (&made, &self.actions) {
            (Ok(dir), Some(a)) => a.prepare(&job, dir, self.isolation.job_user, &out_tx).await,
            _ => Ok(()),
        };
        let result = match (&made, provided) {
            (Ok(_), Err(error)) => {
                drop(out_tx);
                exec::ExecResult {
                    outcome: Outcome::Failed,
                    exit_code: None,
                    error: Some(error),
                    stopped: None,
                    leftover: None,
                }
            }
            (Ok(dir), Ok(())) => {
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
            (Err(e), _) => {
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
        // The directory goes (on a thread of its own: a big one takes a
        // while) as the result is reported; the job is over once both are.
        let cleanup = made.ok().map(|dir| {
            tokio::task::spawn_blocking(move || {
                workdir::remove_job_dir(&dir)
                    .map_err(|e| format!("removing {}: {e}", dir.display()))
            })
        });
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
                self.cleaned_up(&job.id, cleanup).await;
                self.emit(EventKind::Abandoned { job: job.id });
                return None;
            }
            Some(StopReason::LeaseLost) => {
                // Someone else may be running it now; our result is not wanted.
                heartbeat.abort();
                self.cleaned_up(&job.id, cleanup).await;
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
        let id = job.id.clone();
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
                        code: e.code(),
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
        self.cleaned_up(&id, cleanup).await;
        self.emit(outcome);
        next
    }

    /// Waits for a job's directory to be removed; says so if it could not be.
    async fn cleaned_up(
        &self,
        job: &str,
        cleanup: Option<tokio::task::JoinHandle<Result<(), String>>>,
    ) {
        let failed = match cleanup {
            Some(removing) => removing.await.unwrap_or_else(|e| Err(e.to_string())).err(),
            None => None,
        };
        if let Some(error) = failed {
            self.emit(EventKind::CleanupFailed {
                job: job.to_owned(),
                error,
            });
        }
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
}

/// How long before its lease could lapse a runner that cannot renew it
/// stops the job: a tenth of the TTL, at least half a second (clock rates,
/// scheduling, the kill itself), at most half the TTL. The job gets SIGTERM
/// then, and SIGKILL half a margin later, so it is gone before the
/// coordinator can expire the lease and hand the job to another runner.
pub fn safety_margin(ttl: Duration) -> Duration {
    (ttl / 10).max(Duration::from_millis(500)).min(ttl / 2)
}
