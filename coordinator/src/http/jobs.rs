//! `/v1/jobs`: submit, read, list, cancel, logs.

use std::pin::pin;
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use drover_wire::{self as wire, JobState};
use schemars::JsonSchema;
use serde::Deserialize;

use super::AppState;
use super::dto;
use super::extract::{AuthMember, Json, Query};
use crate::error::{Error, Result};
use crate::store::{CancelOutcome, IdempotencyKey, NewJob};
use crate::wake::Signal;
use crate::wake::Wake;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/jobs", post(submit).get(list))
        .route("/v1/jobs/{id}", get(show))
        .route("/v1/jobs/{id}/cancel", post(cancel))
        .route("/v1/jobs/{id}/logs", get(logs))
}

/// `Idempotency-Key`: the same key from the same member within 24 hours
/// answers the job the first request made (`200`, its state now) instead
/// of queueing another; with a different body, `409 CONFLICT`.
const IDEMPOTENCY_KEY: &str = "idempotency-key";

pub(super) async fn submit(
    State(st): State<AppState>,
    AuthMember(member): AuthMember,
    headers: HeaderMap,
    Json(req): Json<wire::SubmitJob>,
) -> Result<Response> {
    let key = match headers.get(IDEMPOTENCY_KEY) {
        None => None,
        Some(value) => {
            let value = value
                .to_str()
                .map_err(|_| Error::bad_request("Idempotency-Key must be printable ASCII"))?;
            Some(IdempotencyKey::new(value, &req)?)
        }
    };
    let started = std::time::Instant::now();
    let job = NewJob::validate(req)?;
    let placement = st
        .store
        .place(&member, &job.parsed_ref, &job.requires)
        .await?;
    let submitted = st
        .store
        .submit_job(&member, &job, &placement, key, st.now())
        .await?;
    crate::metrics::get()
        .submit
        .observe(started.elapsed().as_secs_f64());
    exit_after_submit_for_tests();
    if submitted.replayed {
        return Ok((
            StatusCode::OK,
            [("idempotent-replayed", "true")],
            axum::Json(wire::Job::from(submitted.job)),
        )
            .into_response());
    }
    st.announce(vec![Signal::from(match placement.pinned_runner {
        Some(runner) => Wake::Runner {
            runtime: placement.runtime_id,
            runner,
        },
        None => Wake::Pool {
            runtime: placement.runtime_id,
            requires: job.requires,
        },
    })]);
    Ok((
        StatusCode::CREATED,
        axum::Json(wire::Job::from(submitted.job)),
    )
        .into_response())
}

/// For the tests only: with `DROVER_TEST_EXIT_AFTER_SUBMIT=1` the process
/// dies as soon as a submit is written, before it answers (a crash between
/// write and answer, which an Idempotency-Key makes safe to retry).
fn exit_after_submit_for_tests() {
    static EXIT: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    if *EXIT.get_or_init(|| std::env::var("DROVER_TEST_EXIT_AFTER_SUBMIT").as_deref() == Ok("1")) {
        tracing::warn!("DROVER_TEST_EXIT_AFTER_SUBMIT: exiting after the write, before the answer");
        std::process::exit(70);
    }
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    /// Only jobs in this state.
    #[schemars(with = "Option<JobState>")]
    state: Option<String>,
    /// At most this many jobs, 1-1000 (default 50).
    #[schemars(range(min = 1, max = 1000))]
    limit: Option<u32>,
}

pub(super) async fn list(
    State(st): State<AppState>,
    AuthMember(member): AuthMember,
    Query(q): Query<ListQuery>,
) -> Result<axum::Json<wire::JobList>> {
    let state = q
        .state
        .map(|s| {
            JobState::parse(&s).ok_or_else(|| Error::bad_request(format!("unknown state {s:?}")))
        })
        .transpose()?;
    let limit = q.limit.unwrap_or(50);
    if !(1..=1000).contains(&limit) {
        return Err(Error::bad_request("limit must be 1..=1000"));
    }
    Ok(axum::Json(wire::JobList {
        jobs: dto::all(st.store.list_jobs(&member, state, limit).await?),
    }))
}

pub(super) async fn show(
    State(st): State<AppState>,
    AuthMember(member): AuthMember,
    Path(id): Path<String>,
) -> Result<axum::Json<wire::Job>> {
    Ok(axum::Json(st.store.get_job(&member, &id).await?.into()))
}

pub(super) async fn cancel(
    State(st): State<AppState>,
    AuthMember(member): AuthMember,
    Path(id): Path<String>,
) -> Result<axum::Json<wire::Job>> {
    let mut signals = vec![Signal::Job { job: id.clone() }];
    match st.store.cancel_job(&member, &id, st.now()).await? {
        CancelOutcome::Signalled(lease) => signals.push(Signal::Cancel {
            lease: lease.to_string(),
        }),
        CancelOutcome::Dequeued | CancelOutcome::AlreadyCancelled => {}
    }
    st.announce(signals);
    Ok(axum::Json(st.store.get_job(&member, &id).await?.into()))
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LogsQuery {
    /// Keep streaming new output until the job reaches a terminal state.
    #[serde(default)]
    follow: bool,
}

/// Cursor over a job's log chunks: (attempt, seq) of the last one sent.
struct Follow {
    st: AppState,
    job: String,
    cursor: Option<(i64, i64)>,
    follow: bool,
}

impl Follow {
    /// The next batch of log text, or `None` at the end.
    async fn next(&mut self) -> Result<Option<Bytes>> {
        let subscription = self.st.hub.subscribe_job(&self.job);
        loop {
            let mut changed = pin!(subscription.notify().notified());
            changed.as_mut().enable();
            // State first: every chunk is stored before the job ends, so a
            // read after seeing it end sees every chunk.
            let ended = self.st.store.job_state(&self.job).await?.is_terminal();
            let chunks = self.st.store.read_logs(&self.job, self.cursor, 512).await?;
            if let Some(last) = chunks.last() {
                self.cursor = Some((last.attempt, last.seq));
                let text: String = chunks.iter().map(|c| c.data.as_str()).collect();
                return Ok(Some(Bytes::from(text)));
            }
            if ended || !self.follow {
                return Ok(None);
            }
            tokio::select! {
                _ = changed => {}
                // A safety net only; wake-ups come from `job_changed`.
                _ = tokio::time::sleep(Duration::from_secs(5)) => {}
                _ = self.st.shutting_down() => return Ok(None),
            }
        }
    }
}

pub(super) async fn logs(
    State(st): State<AppState>,
    AuthMember(member): AuthMember,
    Path(id): Path<String>,
    Query(q): Query<LogsQuery>,
) -> Result<Response> {
    let job = st.store.get_job(&member, &id).await?;
    let follow = Follow {
        st,
        job: job.id.to_string(),
        cursor: None,
        follow: q.follow,
    };
    let stream = futures_util::stream::unfold(Some(follow), |f| async move {
        let mut f = f?;
        match f.next().await {
            Ok(Some(bytes)) => Some((Ok::<_, Error>(bytes), Some(f))),
            Ok(None) => None,
            Err(e) => {
                tracing::error!(error = %e, "log stream failed");
                Some((Err(e), None))
            }
        }
    });
    Ok((
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        Body::from_stream(stream),
    )
        .into_response())
}
