//! For operators and their tools: `/healthz` (the process is alive),
//! `/readyz` (it can serve: the database answers and its migrations are
//! this build's), `/metrics` (Prometheus text format, see `crate::metrics`).
//!
//! None needs a member's token. `/metrics` shows counts and pool ids, never
//! names or tokens; with `--metrics-token-file` it wants that token as a
//! bearer. The two that read the database do one check at a time and reuse
//! a reading for a second, so probes and scrapes cannot crowd it.

use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use drover_wire::ErrorCode;
use sha2::{Digest as _, Sha256};
use tokio::sync::Mutex;

use super::error::error_response;
use super::{AppState, Routes as _};
use crate::metrics;
use drover_wire::op;

/// A database check that takes longer than this counts as unreachable.
const CHECK_TIMEOUT: Duration = Duration::from_secs(2);

/// How long a readiness answer, or the per-pool reading, is reused.
const REUSE: Duration = Duration::from_secs(1);

/// What the probes keep between requests.
pub struct Probes {
    /// SHA-256 of the token `/metrics` wants, if one was set.
    metrics_token: Option<[u8; 32]>,
    /// The last readiness answer (`Err`: why not ready), and when.
    ready: Mutex<Option<(Instant, Result<(), String>)>>,
    /// One scrape at a time (each sets the shared per-pool gauges), and
    /// when the pools were last read.
    scrape: Mutex<Option<Instant>>,
}

impl Probes {
    pub fn new(metrics_token: Option<&str>) -> Self {
        Self {
            metrics_token: metrics_token.map(|t| Sha256::digest(t.as_bytes()).into()),
            ready: Mutex::new(None),
            scrape: Mutex::new(None),
        }
    }
}

pub fn router() -> Router<AppState> {
    Router::new()
        .at(op::Healthz, healthz)
        .at(op::Readyz, readyz)
        .at(op::Metrics, metrics)
}

/// Liveness, this build's version and the protocols it serves (see
/// `version`), how many long-polls are waiting right now, and whether
/// another replica listens for this one's signals.
async fn healthz(State(st): State<AppState>) -> axum::Json<serde_json::Value> {
    let (heartbeats, follows) = st.hub.subscribed();
    axum::Json(serde_json::json!({
        "status": "ok",
        "version": drover_wire::VERSION,
        "protocol": drover_wire::ProtocolRange::this_build(),
        "waitingLeases": st.hub.waiting(),
        "waitingHeartbeats": heartbeats,
        "followedLogs": follows,
        "otherReplicas": st.store.others_listening(),
    }))
}

fn not_ready(why: String) -> Response {
    error_response(ErrorCode::NotReady, why)
}

async fn readyz(State(st): State<AppState>) -> Response {
    if *st.shutdown.borrow() {
        return not_ready("the coordinator is shutting down".into());
    }
    let mut last = st.probes.ready.lock().await;
    let answer = match &*last {
        Some((at, answer)) if at.elapsed() < REUSE => answer.clone(),
        _ => {
            let answer = check_ready(&st).await;
            *last = Some((Instant::now(), answer.clone()));
            answer
        }
    };
    drop(last);
    match answer {
        Ok(()) => axum::Json(serde_json::json!({ "status": "ready" })).into_response(),
        Err(why) => not_ready(why),
    }
}

async fn check_ready(st: &AppState) -> Result<(), String> {
    match tokio::time::timeout(CHECK_TIMEOUT, st.store.readiness()).await {
        Ok(Ok(None)) => Ok(()),
        Ok(Ok(Some(why))) => Err(why.to_string()),
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "readiness: the database check failed");
            Err("the database cannot be read; see the coordinator log".into())
        }
        Err(_) => Err(format!(
            "the database did not answer within {} s",
            CHECK_TIMEOUT.as_secs()
        )),
    }
}

async fn metrics(State(st): State<AppState>, headers: HeaderMap) -> Response {
    if let Some(want) = &st.probes.metrics_token {
        let given = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(|t| <[u8; 32]>::from(Sha256::digest(t.trim().as_bytes())));
        // Hashes compared, so the time taken says nothing about the token.
        if given.as_ref() != Some(want) {
            return error_response(
                ErrorCode::Unauthorized,
                "/metrics wants the token of --metrics-token-file as a bearer".into(),
            );
        }
    }
    let mut last_read = st.probes.scrape.lock().await;
    let m = metrics::get();
    m.lease_waiting.set(st.hub.waiting() as i64);
    if last_read.is_none_or(|at| at.elapsed() >= REUSE) {
        match tokio::time::timeout(CHECK_TIMEOUT, st.store.pool_readings(st.now())).await {
            Ok(Ok(pools)) => m.set_pools(pools),
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "metrics: reading the pools failed");
                m.pools_unknown();
            }
            Err(_) => {
                tracing::warn!("metrics: reading the pools timed out");
                m.pools_unknown();
            }
        }
        *last_read = Some(Instant::now());
    }
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        m.render(),
    )
        .into_response()
}
