//! What the coordinator does, apart from how it is asked: REST handlers,
//! MCP tools and the background tasks call these with a principal and
//! typed input, and they do the role checks, the store calls and the
//! announcements. Nothing here knows HTTP (`layout.rs` checks it).
//!
//! `Services` is what they share; `http::AppState` holds it with what only
//! requests in flight need (body and read limits, the probes' cache).

pub mod billing;
pub mod ci;
pub mod dto;
pub mod github;
pub mod jobs;
pub mod members;
pub mod on_demand;
pub mod pairing;
pub mod pools;
mod runner_cache;
pub mod runners;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::clock::Clock;
use crate::dispatch::Hub;
use crate::error::Result;
use crate::store::{Member, Owner, Store};
use crate::wake::Signal;
pub use runner_cache::RunnerCache;

#[derive(Clone)]
pub struct Services {
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
    /// How this coordinator names itself in links (`serve --public-url`).
    pub public_url: Arc<str>,
    /// The workspace GitHub App, when one is configured.
    pub github: Option<Arc<crate::github::GithubApp>>,
    /// GitHub Actions OIDC tokens, checked as CI principals.
    pub oidc: Arc<crate::github::oidc::Oidc>,
    /// Wakes the on-demand pools' worker (a webhook queued a workflow job).
    pub on_demand: Arc<tokio::sync::Notify>,
}

impl Services {
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
        if self.store.has_replicas() && !signals.is_empty() {
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
        match signal {
            Signal::Revoked { runner } | Signal::Hello { runner, .. } => {
                self.runners.forget_runner(runner)
            }
            Signal::LookAgain => self.runners.clear(),
            _ => {}
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

/// Personal (`/v1/me/…`: the member's own) or the workspace's
/// (`/v1/workspace/…`: any member reads, admins write).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    Mine,
    Workspace,
}

impl Scope {
    /// Who owns what this scope names, for a read.
    pub fn owner(self, m: &Member) -> Owner {
        match self {
            Self::Mine => Owner::Member(m.id.clone()),
            Self::Workspace => Owner::Workspace,
        }
    }

    /// Who owns what this scope names, for what only its owner may do
    /// (change it, see its join tokens): the workspace's are its admins'.
    pub fn admin_owner(self, m: &Member) -> Result<Owner> {
        if self == Self::Workspace {
            m.require_admin()?;
        }
        Ok(self.owner(m))
    }
}
