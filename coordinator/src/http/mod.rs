//! The REST surface. One module per resource, each exposing `router()`.

mod billing;
pub mod catalogue;
mod ci;
mod docs;
pub mod error;
mod extract;
mod github;
mod github_setup;
mod health;
mod heavy;
mod jobs;
mod mcp;
mod members;
pub mod openapi;
mod origin;
mod pairing;
mod protocol;
pub mod rate_limit;
mod runners;
mod runtimes;
mod version;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::handler::Handler;
use axum::http::{Method, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse as _, Response};
use axum::routing::MethodFilter;
use drover_wire::ErrorCode;
use drover_wire::op::{self, Operation};
use tokio::sync::Semaphore;

use crate::service::Services;
pub use health::Probes;

/// Largest request body accepted (a log chunk, a job with a big env).
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// What a request handler holds: the services (which REST, MCP and the
/// background tasks share; `Deref` reaches them) and what only requests
/// in flight need.
#[derive(Clone)]
pub struct AppState {
    pub svc: Services,
    /// What requests in flight may hold.
    pub limits: Arc<RequestLimits>,
    /// `/readyz` and `/metrics`: their token and what they keep.
    pub probes: Arc<Probes>,
    /// Wrong pairing codes per client (see `rate_limit`).
    pub redeem_limit: Arc<rate_limit::RateLimiter>,
}

impl std::ops::Deref for AppState {
    type Target = Services;

    fn deref(&self) -> &Services {
        &self.svc
    }
}

/// Bounds on what requests in flight hold, so that a crowd of slow or
/// heavy callers is answered `503 OVERLOADED` instead of taking the
/// coordinator's memory or its database connections from everyone else.
pub struct RequestLimits {
    /// Bytes of large request bodies being read (one permit a byte, taken
    /// as announced by `Content-Length`, before reading; see `extract`).
    pub body_bytes: Arc<Semaphore>,
    /// Longest a request body may take to arrive.
    pub body_timeout: Duration,
    /// Member API reads (`GET`) being served. The runner protocol is not
    /// counted, so leases and heartbeats keep their pace under a read storm.
    pub reads: Arc<Semaphore>,
    /// How long a read waits for its turn before it is answered OVERLOADED.
    pub read_wait: Duration,
    /// Large answers (job lists, a job, log batches) per principal.
    pub heavy: Arc<heavy::HeavyReads>,
}

impl RequestLimits {
    pub fn new(
        body_bytes: usize,
        body_timeout: Duration,
        reads: usize,
        read_wait: Duration,
        heavy_per_principal: usize,
    ) -> Self {
        Self {
            body_bytes: Arc::new(Semaphore::new(body_bytes)),
            body_timeout,
            reads: Arc::new(Semaphore::new(reads)),
            read_wait,
            heavy: heavy::HeavyReads::new(heavy_per_principal, read_wait),
        }
    }
}

/// Routes a declared operation (`drover_wire::op`) to its handler: the
/// path and the method are the declaration's, never written here.
pub(crate) trait Routes {
    fn at<O: Operation, H: Handler<T, AppState>, T: 'static>(self, op: O, handler: H) -> Self;
}

impl Routes for Router<AppState> {
    fn at<O: Operation, H: Handler<T, AppState>, T: 'static>(self, _: O, handler: H) -> Self {
        let method = match O::METHOD {
            op::Method::Get => MethodFilter::GET,
            op::Method::Post => MethodFilter::POST,
            op::Method::Put => MethodFilter::PUT,
            op::Method::Patch => MethodFilter::PATCH,
            op::Method::Delete => MethodFilter::DELETE,
        };
        self.route(O::PATH, axum::routing::on(method, handler))
    }
}

/// A `201 Created` answer.
fn created<T: serde::Serialize>(answer: T) -> (axum::http::StatusCode, axum::Json<T>) {
    (axum::http::StatusCode::CREATED, axum::Json(answer))
}

async fn not_found() -> Response {
    error::error_response(ErrorCode::NotFound, "no such route".into())
}

async fn method_not_allowed() -> Response {
    error::error_response(
        ErrorCode::MethodNotAllowed,
        "method not allowed on this route".into(),
    )
}

/// Sheds member reads beyond the limit: a short wait for a turn, then
/// `503 OVERLOADED` with `Retry-After`, instead of queueing for the
/// database until its pool times out.
async fn limit_reads(State(st): State<AppState>, req: Request, next: Next) -> Response {
    if !matches!(*req.method(), Method::GET | Method::HEAD) {
        return next.run(req).await;
    }
    let turn = tokio::time::timeout(st.limits.read_wait, st.limits.reads.clone().acquire_owned());
    let Ok(Ok(_permit)) = turn.await else {
        return error::overloaded("too many requests in flight").into_response();
    };
    next.run(req).await
}

/// Puts every error that did not come from our handlers (an extractor's
/// rejection, say a path that is not UTF-8) in the JSON envelope, keeping
/// its status and text.
async fn envelope_errors(req: Request, next: Next) -> Response {
    let response = next.run(req).await;
    let status = response.status();
    // JSON is the envelope already; HTML is a page of ours for a browser
    // (the GitHub setup redirect), documented as such.
    let ours = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| {
            let v = v.as_bytes();
            v.starts_with(b"application/json") || v.starts_with(b"text/html")
        });
    if !(status.is_client_error() || status.is_server_error()) || ours {
        return response;
    }
    let (parts, body) = response.into_parts();
    let text = axum::body::to_bytes(body, 64 * 1024)
        .await
        .map(|b| String::from_utf8_lossy(&b).trim().to_owned())
        .unwrap_or_default();
    let message = if text.is_empty() {
        status.canonical_reason().unwrap_or("error").to_owned()
    } else {
        text
    };
    let mut r = error::error_response(error::code_of(status), message);
    *r.status_mut() = status;
    for name in [header::ALLOW, header::RETRY_AFTER, header::CONNECTION] {
        if let Some(v) = parts.headers.get(&name) {
            r.headers_mut().insert(name, v.clone());
        }
    }
    r
}

/// For connections in the connection cap's reserve: the runner protocol,
/// and `503 OVERLOADED` for everything else.
pub fn runner_router(state: AppState) -> Router {
    async fn overloaded() -> Response {
        error::overloaded("too many connections; only the runner protocol is served on this one")
            .into_response()
    }
    Router::new()
        .merge(protocol::router())
        .fallback(overloaded)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(middleware::from_fn(envelope_errors))
        .layer(middleware::from_fn(version::refuse_skew))
        .with_state(state)
}

pub fn router(state: AppState) -> Router {
    // The member API: its reads are limited (see `limit_reads`).
    let member_api = Router::new()
        .merge(jobs::router())
        .merge(runtimes::router())
        .merge(runners::router())
        .merge(pairing::router())
        .merge(members::router())
        .merge(billing::router())
        .merge(github::router())
        .merge(github_setup::router())
        .merge(ci::router())
        .merge(mcp::router(state.clone()))
        .route_layer(middleware::from_fn_with_state(state.clone(), limit_reads));
    Router::new()
        .merge(member_api)
        .merge(protocol::router())
        .merge(docs::router())
        .merge(health::router())
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(middleware::from_fn(envelope_errors))
        .layer(middleware::from_fn(version::refuse_skew))
        .with_state(state)
}
