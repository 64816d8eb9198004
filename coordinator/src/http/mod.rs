//! The REST surface. One module per resource, each exposing `router()`.

mod docs;
pub mod error;
mod extract;
mod jobs;
mod protocol;
mod runner_cache;
mod runners;
mod runtimes;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::response::Response;
use drover_wire::ErrorCode;
use tokio::sync::watch;

use crate::clock::Clock;
use crate::dispatch::{Hub, Signal};
use crate::store::Store;
pub use runner_cache::RunnerCache;

/// Largest request body accepted (a log chunk, a job with a big env).
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

#[derive(Clone)]
pub struct AppState {
    pub store: Store,
    pub hub: Arc<Hub>,
    pub clock: Arc<dyn Clock>,
    pub lease_ttl: Duration,
    /// Flips to true when the server is shutting down; long-polls end early.
    pub shutdown: watch::Receiver<bool>,
    /// This process among the replicas sharing a PostgreSQL database.
    pub replica: Arc<str>,
    /// Runner credentials seen recently (see `runner_cache`).
    pub runners: Arc<RunnerCache>,
}

impl AppState {
    pub fn now(&self) -> i64 {
        self.clock.now_ms()
    }

    pub fn ttl_ms(&self) -> u64 {
        self.lease_ttl.as_millis() as u64
    }

    /// Acts on signals here, then tells the other replicas (if any).
    pub fn announce(&self, signals: Vec<Signal>) {
        for signal in &signals {
            self.apply(signal);
        }
        if self.store.backend() == crate::store::Backend::Postgres && !signals.is_empty() {
            let (store, origin) = (self.store.clone(), self.replica.clone());
            tokio::spawn(async move {
                if let Err(e) = store.publish(&origin, &signals).await {
                    tracing::warn!(error = %e, "could not signal the other replicas");
                }
            });
        }
    }

    /// Acts on one signal, from here or from another replica.
    pub fn apply(&self, signal: &Signal) {
        if let Signal::Revoked { runner } | Signal::Hello { runner } = signal {
            self.runners.forget_runner(runner);
        }
        self.hub.apply(signal);
    }

    /// After missing signals: nothing cached stays, nobody stays asleep.
    pub fn look_again(&self) {
        self.runners.clear();
        self.hub.wake_everyone();
    }

    /// Resolves when the server starts shutting down.
    pub async fn shutting_down(&self) {
        let mut rx = self.shutdown.clone();
        let _ = rx.wait_for(|stop| *stop).await;
    }
}

async fn not_found() -> Response {
    error::error_response(ErrorCode::NotFound, "no such route".into())
}

async fn method_not_allowed() -> Response {
    let mut r = error::error_response(
        ErrorCode::BadRequest,
        "method not allowed on this route".into(),
    );
    *r.status_mut() = axum::http::StatusCode::METHOD_NOT_ALLOWED;
    r
}

pub fn router(state: AppState) -> Router {
    Router::new()
        .merge(jobs::router())
        .merge(runtimes::router())
        .merge(runners::router())
        .merge(protocol::router())
        .merge(docs::router())
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(state)
}
