//! The runner wire protocol, version 1 (see ARCHITECTURE.md):
//! join → hello → lease (long-poll) → heartbeat (long-poll for cancel) →
//! logs → complete.

use std::pin::pin;
use std::time::Duration;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use drover_wire::{self as wire, ErrorCode, MAX_LEASE_WAIT_MS};

use super::extract::{AuthJoin, AuthRunner, Json};
use super::{AppState, Routes as _};
use crate::error::{Error, Result};
use crate::metrics;
use crate::store::{Completion, LeaseAttempt, RunnerAuth};
use crate::wake::Signal;
use drover_wire::op;

pub fn router() -> Router<AppState> {
    Router::new()
        .at(op::RunnerJoin, join)
        .at(op::RunnerJoinTokenInfo, join_token)
        .at(op::RunnerHello, hello)
        .at(op::RunnerLeave, leave)
        .at(op::RunnerBye, bye)
        .at(op::RunnerLease, lease)
        .at(op::RunnerHeartbeat, heartbeat)
        .at(op::RunnerLogs, logs)
        .at(op::RunnerComplete, complete)
}

async fn join(
    State(st): State<AppState>,
    AuthJoin(runtime, join_token): AuthJoin,
    Json(req): Json<wire::JoinRequest>,
) -> Result<impl IntoResponse> {
    let (runner, token) = st
        .store
        .join_runner(
            &runtime,
            &join_token,
            &req.reference,
            &req.name,
            &req.capabilities,
            st.now(),
        )
        .await?;
    let joined = wire::JoinedRunner {
        runner_id: runner.to_string(),
        runtime_id: runtime.to_string(),
        token: token.expose().to_owned(),
    };
    Ok((StatusCode::CREATED, axum::Json(joined)))
}

/// Which pool a join token is for, so a runner can tell whether the
/// credentials it saved belong to it.
async fn join_token(
    State(st): State<AppState>,
    AuthJoin(runtime, _): AuthJoin,
) -> Result<axum::Json<wire::JoinTokenInfo>> {
    let reference = st.store.join_token_pool(&runtime).await?;
    Ok(axum::Json(wire::JoinTokenInfo {
        runtime_id: runtime.to_string(),
        reference,
    }))
}

async fn hello(
    State(st): State<AppState>,
    AuthRunner(r): AuthRunner,
    Json(req): Json<wire::Hello>,
) -> Result<axum::Json<wire::HelloResponse>> {
    let name = st
        .store
        .runner_hello(
            &r.runner_id,
            &req.capabilities,
            req.slots.unwrap_or(1),
            req.paused,
            st.now(),
        )
        .await?;
    // Its capabilities changed: the next call, on any replica, reads them
    // afresh. Paused: its waiting lease requests end, on every replica.
    st.announce(vec![Signal::Hello {
        runner: r.runner_id.to_string(),
        paused: req.paused,
    }]);
    Ok(axum::Json(wire::HelloResponse {
        runner_id: r.runner_id.to_string(),
        runtime_id: r.runtime_id.to_string(),
        name,
    }))
}

/// The runner is stopping: offline at once in every listing.
async fn bye(State(st): State<AppState>, AuthRunner(r): AuthRunner) -> Result<StatusCode> {
    st.store.runner_bye(&r.runner_id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The runner revokes itself, as an owner or admin would: its credential
/// stops working at once and what it held goes back to the queue.
async fn leave(State(st): State<AppState>, AuthRunner(r): AuthRunner) -> Result<StatusCode> {
    let changed = st.store.leave(&r.runner_id, st.now()).await?;
    st.announce(crate::service::runners::revoked_signals(
        changed,
        r.runner_id.as_str(),
    ));
    Ok(StatusCode::NO_CONTENT)
}

async fn touch(st: &AppState, r: &RunnerAuth) -> Result<()> {
    let now = st.now();
    if st.hub.should_touch(&r.runner_id, now) {
        st.store.touch_runner(&r.runner_id, now).await?;
    }
    Ok(())
}

/// The runner already has a lease long-poll waiting for each of its slots.
fn too_many_waiting(r: &RunnerAuth) -> Error {
    Error::api(
        ErrorCode::LeaseLimit,
        format!(
            "this runner already has {} lease request(s) waiting, one per slot; \
             a runner declares its slots in hello",
            r.slots
        ),
    )
}

fn revoked() -> Error {
    Error::api(ErrorCode::Unauthorized, "this runner was revoked")
}

/// Long-poll for a job: answers at once when one is queued, else waits up
/// to `waitMs` for a wake-up from a submit, a re-queue or a passed-on wake.
async fn lease(
    State(st): State<AppState>,
    AuthRunner(r): AuthRunner,
    Json(req): Json<wire::LeaseRequest>,
) -> Result<axum::Json<wire::LeaseResponse>> {
    let lease = next_lease(&st, &r, &req).await?;
    Ok(axum::Json(wire::LeaseResponse { lease }))
}

async fn next_lease(
    st: &AppState,
    r: &RunnerAuth,
    req: &wire::LeaseRequest,
) -> Result<Option<wire::Lease>> {
    let arrived = tokio::time::Instant::now();
    let deadline = arrived + Duration::from_millis(req.wait_ms.min(MAX_LEASE_WAIT_MS));
    let m = metrics::get();
    touch(st, r).await?;
    if let Some(held) = &req.held {
        release_unheld(st, r, held).await?;
    }
    if req.wait_ms == 0 {
        // One look, no wait: nothing to register (so a runner asking for
        // its next job along with a complete never counts as waiting).
        let attempt = st
            .store
            .try_lease(&r.runner_id, &r.runtime_id, st.now(), st.ttl_ms())
            .await;
        return handed_out(st, attempt, arrived.into_std());
    }
    // Since when this request could be served: its arrival, then each wake-up.
    let (mut since, mut waited) = (arrived, false);
    loop {
        let guard = st
            .hub
            .register(
                &r.runtime_id,
                &r.runner_id,
                r.capabilities.clone(),
                r.slots as usize,
            )
            .ok_or_else(|| too_many_waiting(r))?;
        match st
            .store
            .try_lease(&r.runner_id, &r.runtime_id, st.now(), st.ttl_ms())
            .await?
        {
            LeaseAttempt::Leased { lease, next } => {
                // Not `consume`: a wake that chose us meanwhile may be for
                // another job, so dropping the guard passes it on.
                drop(guard);
                // More is queued behind it: wake another waiter, here or on
                // another replica (whose lease may have skipped our locked rows).
                if let Some(next) = next {
                    st.announce(vec![Signal::from(next)]);
                }
                let latency = if waited {
                    &m.lease_woken
                } else {
                    &m.lease_immediate
                };
                latency.observe(since.elapsed().as_secs_f64());
                return Ok(Some(wire::Lease::from(*lease)));
            }
            LeaseAttempt::Revoked => {
                // Dropped, not consumed: a wake that chose us passes on.
                drop(guard);
                return Err(revoked());
            }
            LeaseAttempt::Empty => guard.looked(),
        }
        let woken = tokio::select! {
            _ = guard.waiter.notified() => true,
            _ = tokio::time::sleep_until(deadline) => guard.was_woken(),
            _ = st.shutting_down() => false,
        };
        // Ended (its runner was paused meanwhile), or nothing came in time.
        if guard.ended() || !woken {
            drop(guard);
            m.lease_empty.inc();
            touch(st, r).await?;
            return Ok(None);
        }
        // Woken: look again (the job is committed before anyone is woken).
        guard.consume();
        (since, waited) = (tokio::time::Instant::now(), true);
    }
}

/// The runner holds only `held`: what else it holds is released at once,
/// as an expired lease would be (re-queued, or ended when out of attempts
/// or cancelled), rather than counting against its slots until it expires
/// (after a restart every lease got a fresh TTL).
async fn release_unheld(st: &AppState, r: &RunnerAuth, held: &[String]) -> Result<()> {
    if held.len() > wire::MAX_SLOTS as usize {
        return Err(Error::api(
            ErrorCode::BadRequest,
            format!(
                "held names {} leases; a runner holds at most {}",
                held.len(),
                wire::MAX_SLOTS
            ),
        ));
    }
    let released = st
        .store
        .release_unheld(&r.runner_id, held, st.now())
        .await?;
    let mut signals = Vec::new();
    for (job, wake) in released {
        tracing::info!(
            job = %job,
            runner = %r.runner_id,
            requeued = wake.is_some(),
            "released a lease its runner no longer holds"
        );
        signals.push(Signal::Job {
            job: job.to_string(),
        });
        signals.extend(wake.map(Signal::from));
    }
    st.announce(signals);
    Ok(())
}

/// Renews the lease, then waits up to `waitMs` (at most half the TTL) for
/// a cancel, so a cancel reaches the runner at once.
async fn heartbeat(
    State(st): State<AppState>,
    AuthRunner(r): AuthRunner,
    Path(lease): Path<String>,
    Json(req): Json<wire::Heartbeat>,
) -> Result<axum::Json<wire::HeartbeatResponse>> {
    let ttl = st.ttl_ms();
    let wait = Duration::from_millis(req.wait_ms.min(ttl / 2));
    let mut cancel = st
        .store
        .heartbeat(&r.runner_id, &lease, st.now(), ttl)
        .await?;
    if !cancel && !wait.is_zero() {
        let subscription = st.hub.subscribe_lease(&lease);
        let mut signalled = pin!(subscription.notify().notified());
        signalled.as_mut().enable();
        cancel = st.store.cancel_requested(&r.runner_id, &lease).await?;
        if !cancel {
            tokio::select! {
                _ = signalled => {}
                _ = tokio::time::sleep(wait) => {}
                _ = st.shutting_down() => {}
            }
            cancel = st.store.cancel_requested(&r.runner_id, &lease).await?;
        }
    }
    Ok(axum::Json(wire::HeartbeatResponse {
        cancel,
        ttl_ms: ttl,
    }))
}

async fn logs(
    State(st): State<AppState>,
    AuthRunner(r): AuthRunner,
    Path(lease): Path<String>,
    Json(chunk): Json<wire::LogChunk>,
) -> Result<StatusCode> {
    let job = st
        .store
        .append_log(
            &r.runner_id,
            &lease,
            chunk.seq,
            chunk.stream,
            &chunk.data,
            st.now(),
        )
        .await?;
    st.announce(vec![Signal::Job {
        job: job.to_string(),
    }]);
    Ok(StatusCode::NO_CONTENT)
}

async fn complete(
    State(st): State<AppState>,
    AuthRunner(r): AuthRunner,
    Path(lease): Path<String>,
    Json(done): Json<wire::Complete>,
) -> Result<axum::Json<wire::CompleteResponse>> {
    let started = std::time::Instant::now();
    // The runner's usual ask, its next job with no wait: in the same write.
    if let Some(wire::LeaseRequest {
        wait_ms: 0,
        held: None,
    }) = &done.next
    {
        if let Err(e) = touch(&st, &r).await {
            tracing::warn!(error = %e, "recording a runner's last call");
        }
        let both = st
            .store
            .complete_next(
                &r.runner_id,
                &r.runtime_id,
                &lease,
                &(&done).into(),
                st.now(),
                st.ttl_ms(),
            )
            .await?;
        let completion = completed(&st, &lease, &both.completion, started);
        // None for a repeat: its first answer may have carried a lease already.
        let lease = both.next.and_then(|next| {
            handed_out(&st, next, started).unwrap_or_else(|e| {
                if e.code() == ErrorCode::Internal {
                    tracing::error!(error = %e, "leasing the next job after a complete");
                }
                None
            })
        });
        return Ok(axum::Json(wire::CompleteResponse {
            next: Some(wire::LeaseResponse { lease }),
            ..completion
        }));
    }
    let completion = st
        .store
        .complete(&r.runner_id, &lease, &(&done).into(), st.now())
        .await?;
    let answer = completed(&st, &lease, &completion, started);
    // The result is recorded whatever happens next: a failed lease (say, the
    // runner was just revoked) answers "no job", and the runner's next lease
    // call hears why.
    // Not for a repeat: its first answer may have carried a lease already.
    let next = match &done.next {
        None => None,
        Some(_) if completion.repeated => Some(wire::LeaseResponse { lease: None }),
        Some(req) => Some(wire::LeaseResponse {
            lease: next_lease(&st, &r, req).await.unwrap_or_else(|e| {
                if e.code() == ErrorCode::Internal {
                    tracing::error!(error = %e, "leasing the next job after a complete");
                }
                None
            }),
        }),
    };
    Ok(axum::Json(wire::CompleteResponse { next, ..answer }))
}

/// A lease attempt that does not wait, answered: the wake it passes on
/// sent, measured from `arrived`.
fn handed_out(
    st: &AppState,
    attempt: std::result::Result<LeaseAttempt, crate::store::error::Error>,
    arrived: std::time::Instant,
) -> Result<Option<wire::Lease>> {
    let m = metrics::get();
    match attempt? {
        LeaseAttempt::Leased { lease, next } => {
            if let Some(next) = next {
                st.announce(vec![Signal::from(next)]);
            }
            m.lease_immediate.observe(arrived.elapsed().as_secs_f64());
            Ok(Some(wire::Lease::from(*lease)))
        }
        LeaseAttempt::Revoked => Err(revoked()),
        LeaseAttempt::Empty => {
            m.lease_empty.inc();
            Ok(None)
        }
    }
}

/// A complete written: measured, announced, and its answer (no `next`).
fn completed(
    st: &AppState,
    lease: &str,
    completion: &Completion,
    started: std::time::Instant,
) -> wire::CompleteResponse {
    metrics::get()
        .complete
        .observe(started.elapsed().as_secs_f64());
    if !completion.repeated {
        st.announce(vec![
            Signal::Job {
                job: completion.job_id.to_string(),
            },
            // The runner's heartbeat for this lease, waiting on this replica
            // or another, looks again and answers now (the lease is gone), so
            // its connection is free for the runner's next request.
            Signal::Cancel {
                lease: lease.to_owned(),
            },
        ]);
    }
    wire::CompleteResponse {
        state: completion.state,
        repeated: completion.repeated,
        next: None,
    }
}
