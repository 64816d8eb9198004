//! `/v1/jobs`: submit, read, list, cancel, logs.

use std::pin::pin;
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use drover_wire as wire;
use drover_wire::JobState;
use http_body_util::StreamBody;
use hyper::body::Frame;

use super::extract::{AuthMember, Json, Query};
use super::heavy::{self, Turn};
use super::{AppState, Routes as _};
use crate::error::{Error, Result};
use crate::service::jobs;
use crate::store::Member;
use drover_wire::op;

pub fn router() -> Router<AppState> {
    Router::new()
        .at(op::SubmitJob, submit)
        .at(op::ListJobs, list)
        .at(op::GetJob, show)
        .at(op::CancelJob, cancel)
        .at(op::GetJobLogs, logs)
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
    let key = headers
        .get(IDEMPOTENCY_KEY)
        .map(|v| {
            v.to_str()
                .map_err(|_| Error::bad_request("Idempotency-Key must be printable ASCII"))
        })
        .transpose()?;
    // The answer carries the command or script whole: a large one takes a
    // turn (see `heavy`) before anything is written.
    let turn = match jobs::text_bytes(&req) > heavy::SMALL_ANSWER_BYTES {
        true => Some(st.limits.heavy.turn(member.id.as_str()).await?),
        false => None,
    };
    let submitted = jobs::submit(&st, &member, req, key).await?;
    let mut answer = job_answer(submitted.job.into(), turn)?;
    if submitted.replayed {
        *answer.status_mut() = StatusCode::OK;
        answer.headers_mut().insert(
            "idempotent-replayed",
            axum::http::HeaderValue::from_static("true"),
        );
    } else {
        *answer.status_mut() = StatusCode::CREATED;
    }
    Ok(answer)
}

/// A job as JSON: sent a slice at a time, holding `turn`, when there is one.
fn job_answer(job: wire::Job, turn: Option<Turn>) -> Result<Response> {
    Ok(match turn {
        Some(turn) => heavy::json(serde_json::to_vec(&job)?, turn),
        None => axum::Json(job).into_response(),
    })
}

pub(super) async fn list(
    State(st): State<AppState>,
    AuthMember(member): AuthMember,
    Query(q): Query<wire::JobListQuery>,
) -> Result<Response> {
    let turn = st.limits.heavy.turn(member.id.as_str()).await?;
    let page = jobs::list(&st, &member, q).await?;
    Ok(heavy::json(serde_json::to_vec(&page)?, turn))
}

pub(super) async fn show(
    State(st): State<AppState>,
    AuthMember(member): AuthMember,
    Path(id): Path<String>,
) -> Result<Response> {
    let turn = st.limits.heavy.turn(member.id.as_str()).await?;
    job_answer(jobs::get(&st, &member, &id).await?, Some(turn))
}

pub(super) async fn cancel(
    State(st): State<AppState>,
    AuthMember(member): AuthMember,
    Path(id): Path<String>,
) -> Result<Response> {
    // Its answer is the job, with its whole spec: a large answer.
    let turn = st.limits.heavy.turn(member.id.as_str()).await?;
    job_answer(jobs::cancel(&st, &member, &id).await?.into(), Some(turn))
}

/// Characters of log text read at once (one chunk at least).
const LOG_BATCH_CHARS: usize = 256 * 1024;

/// Cursor over a job's log chunks: (attempt, seq) of the last one sent.
struct Follow {
    st: AppState,
    job: String,
    /// Whose turns its batches take (see `heavy`).
    principal: String,
    /// The handler's turn, for the first batch.
    first: Option<Turn>,
    cursor: Option<(i64, i64)>,
    follow: bool,
    /// How the job ended, once its log has been read to the end.
    ended: Option<(JobState, Option<i64>)>,
}

impl Follow {
    /// The next batch of log text and the turn it holds, or `None` at the
    /// end. Waiting for new output holds no turn.
    async fn next(&mut self) -> Result<Option<(Bytes, Turn)>> {
        let subscription = self.st.hub.subscribe_job(&self.job);
        loop {
            let mut changed = pin!(subscription.notify().notified());
            changed.as_mut().enable();
            let turn = match self.first.take() {
                Some(turn) => turn,
                None => tokio::select! {
                    turn = self.st.limits.heavy.wait_turn(&self.principal) => turn,
                    _ = self.st.shutting_down() => return Ok(None),
                },
            };
            // State first: every chunk is stored before the job ends, so a
            // read after seeing it end sees every chunk.
            let (state, exit_code) = self.st.store.job_state_and_exit(&self.job).await?;
            let ended = state.is_terminal();
            let chunks = self
                .st
                .store
                .read_logs(&self.job, self.cursor, 512, LOG_BATCH_CHARS)
                .await?;
            if let Some(last) = chunks.last() {
                self.cursor = Some((last.attempt, last.seq));
                let text: String = chunks.iter().map(|c| c.data.as_str()).collect();
                return Ok(Some((Bytes::from(text), turn)));
            }
            drop(turn);
            if ended {
                self.ended = Some((state, exit_code));
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

/// A log stream: the batch being sent (a slice at a time, holding its
/// turn), then the next.
struct LogStream {
    follow: Option<Follow>,
    rest: Bytes,
    turn: Option<Turn>,
}

pub(super) async fn logs(
    State(st): State<AppState>,
    AuthMember(member): AuthMember,
    Path(id): Path<String>,
    Query(q): Query<wire::LogQuery>,
) -> Result<Response> {
    log_stream(st, &member, &id, q).await
}

/// A job's log as a stream of text, a batch at a time, each holding a turn
/// of the member's large answers (`heavy`); with `follow`, until the job
/// ends. REST streams it; an MCP tool reads it whole.
pub(super) async fn log_stream(
    st: AppState,
    member: &Member,
    id: &str,
    q: wire::LogQuery,
) -> Result<Response> {
    let turn = st.limits.heavy.turn(member.id.as_str()).await?;
    let job = st.store.get_job(member, id).await?;
    let follow = Follow {
        st,
        job: job.id.to_string(),
        principal: member.id.to_string(),
        first: Some(turn),
        cursor: None,
        follow: q.follow,
        ended: None,
    };
    let start = LogStream {
        follow: Some(follow),
        rest: Bytes::new(),
        turn: None,
    };
    let stream = futures_util::stream::unfold(start, |mut s| async move {
        loop {
            if let Some(piece) = heavy::next_slice(&mut s.rest, &mut s.turn) {
                return Some((Ok::<_, Error>(Frame::data(piece)), s));
            }
            let follow = s.follow.as_mut()?;
            match follow.next().await {
                Ok(Some((bytes, turn))) => (s.rest, s.turn) = (bytes, Some(turn)),
                Ok(None) => {
                    let ended = follow.ended.take();
                    s.follow = None;
                    return ended.map(|ended| (Ok(Frame::trailers(end_trailers(ended))), s));
                }
                Err(e) => {
                    tracing::error!(error = %e, "log stream failed");
                    s.follow = None;
                    return Some((Err(e), s));
                }
            }
        }
    });
    Ok((
        [
            (header::CONTENT_TYPE, "text/plain; charset=utf-8"),
            (header::TRAILER, LOG_END_TRAILERS),
        ],
        Body::new(StreamBody::new(stream)),
    )
        .into_response())
}

/// The `Trailer` header of a log stream (hyper sends the fields only to a
/// request with `TE: trailers`).
const LOG_END_TRAILERS: &str = "drover-job-state, drover-exit-code";

/// The trailers of a log read to the end of a job that ended.
fn end_trailers((state, exit_code): (JobState, Option<i64>)) -> HeaderMap {
    let mut trailers = HeaderMap::new();
    trailers.insert(
        wire::LOG_END_STATE,
        HeaderValue::from_static(state.as_str()),
    );
    if let Some(code) = exit_code {
        trailers.insert(wire::LOG_END_EXIT_CODE, HeaderValue::from(code));
    }
    trailers
}

#[cfg(test)]
mod tests {
    use super::*;

    /// hyper sends only the trailer fields the `Trailer` header declares.
    #[test]
    fn the_trailer_header_declares_every_field_sent() {
        let sent = end_trailers((JobState::Failed, Some(3)));
        let declared: Vec<&str> = LOG_END_TRAILERS.split(", ").collect();
        assert_eq!(
            sent.keys().map(|k| k.as_str()).collect::<Vec<_>>(),
            declared
        );
    }
}
