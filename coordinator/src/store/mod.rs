//! All SQL lives under `store`. Everything above it speaks in domain types.
//!
//! One set of queries serves both backends through sqlx's `Any` driver:
//! statements use `$1, $2, …` placeholders (numbered in order of first use,
//! which SQLite reads as named parameters), integers are BIGINT and flags
//! are 0/1 integers on both sides. Where the dialects truly differ, the
//! difference is a named field of [`Dialect`].
//!
//! Each backend's own code (its [`Dialect`], opening it) is a module of
//! its own: `sqlite`, `postgres` (and `signals`, PostgreSQL's LISTEN/NOTIFY).
//!
//! - **SQLite** (the embedded default): one writer connection, so every
//!   write transaction is serialized (that alone makes a lease atomic), and
//!   a few read-only connections (WAL lets them read while the writer writes).
//! - **PostgreSQL** (scale-out): one pool shared by several coordinator
//!   replicas; a lease locks its candidate rows `FOR UPDATE SKIP LOCKED`,
//!   and replicas wake each other through `LISTEN`/`NOTIFY` (see `signals`).

mod audit;
mod backend;
mod batch;
mod billing;
mod ci;
mod env;
pub mod error;
mod github;
mod health;
mod idempotency;
mod identity;
mod job_row;
mod jobs;
mod leases;
mod members;
pub mod observe;
mod on_demand;
mod pairing;
mod pools;
mod preview;
mod retention;
mod runners;
#[cfg(test)]
mod schema_tests;
mod submit;
#[cfg(test)]
mod tests;
mod workflow_jobs;

use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64};

use sqlx::AnyPool;

use batch::{BatchError, BatchFn, Batcher};
use error::{Error, Result};
use leases::{CompleteNextRequest, CompleteRequest, LeaseRequest};
use submit::SubmitRequest;

pub use audit::{AuditQuery, MAX_AUDIT_PAGE};
pub use backend::signals::Envelope;
use backend::{postgres, sqlite, sqlite_writer};
pub use backend::{signals, sqlite_backup};
pub use billing::{UsageBy, UsageOf};
pub use ci::{CiLink, CiLinkSpec, CiLookup, CiPolicy, ci_member_id};
pub use drover_domain::job::{JobSpec, NewJob};
pub use drover_domain::member::{Member, Principal, Role, RunnerAuth, Surface};
pub use drover_domain::model;
pub use drover_domain::model::Owner;
pub use github::{GithubRunnerRow, Installation, LINK_STATE_TTL_MS, LinkState};
pub use health::{NotReady, PoolReading};
pub use idempotency::IdempotencyKey;
pub use jobs::CancelOutcome;
pub use leases::{CompletedNext, Completion, LeaseAttempt};
pub use on_demand::{OnDemand, OnDemandSpec, actions_member_id};
pub use pools::Placement;
pub use preview::{JobPage, ListedJob};
pub use retention::Purged;
pub use runners::RunnerScope;
pub use submit::Submitted;
pub use workflow_jobs::{Origin as WorkflowJobOrigin, WorkflowJobRow};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// Where the SQL of the two backends differs. Everything else is shared text.
#[derive(Debug)]
pub struct Dialect {
    pub backend: Backend,
    /// Null-safe equality (`owner IS $1` matches NULL with NULL).
    is: &'static str,
    /// After the lease's candidate scan: lock the rows we may take, and let
    /// other replicas' transactions skip them instead of waiting.
    lock_skip_locked: &'static str,
    /// Candidates read per page by a lease.
    lease_page: i64,
    /// Lock the rows read until commit, waiting for other holders.
    lock_for_update: &'static str,
    /// The database's clock in Unix milliseconds, where lease times are
    /// computed (see [`Dialect::now`]); `None`: the coordinator's.
    db_clock: Option<&'static str>,
    /// Replicas share the database and hear each other's signals
    /// (`LISTEN`/`NOTIFY`, see `signals`).
    replica_signals: bool,
    /// The migrations this build applies to this backend.
    migrations: &'static sqlx::migrate::Migrator,
    /// `/readyz` opens the database afresh (read-only) to read what is
    /// applied: SQLite, whose open connections would hide a file deleted or
    /// moved away. PostgreSQL asks through the pool, which reconnects.
    readiness_reopens: bool,
}

impl Dialect {
    /// "Now" for lease times, in SQL, given the placeholder bound to the
    /// coordinator's clock. SQLite has one coordinator, so its clock is the
    /// clock. Replicas on PostgreSQL use the database's, so a replica whose
    /// clock is off can neither expire a live lease early nor keep a dead
    /// one. (The placeholder stays bound either way, for its numbering.)
    fn now(&self, param: &str) -> String {
        match self.db_clock {
            Some(clock) => format!("COALESCE({clock}, {param})"),
            None => param.to_owned(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// SQLite `synchronous=FULL`: a commit survives power loss.
    #[default]
    Full,
    /// SQLite `synchronous=NORMAL`: a commit survives a process crash, not power loss.
    Normal,
}

impl FromStr for Durability {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "full" => Ok(Self::Full),
            "normal" => Ok(Self::Normal),
            _ => Err(format!("unknown durability {s:?}: use full or normal")),
        }
    }
}

#[derive(Clone)]
pub struct Store {
    writer: AnyPool,
    reader: AnyPool,
    dialect: &'static Dialect,
    url: String,
    /// Where the hot paths run (see `backend`).
    engine: backend::Engine,
    /// Batches lease and complete calls (`None` inside the batch writers).
    batches: Option<Arc<Batches>>,
    /// Background tasks end once every clone of the store is gone.
    alive: Arc<()>,
    /// Seal and open job env (see `env`); set once, shared by every clone.
    secrets: Arc<std::sync::OnceLock<Arc<crate::secrets::KeyRing>>>,
    /// This coordinator's clock minus the database's (PostgreSQL), as last
    /// measured by `expire_leases`.
    clock_offset: Arc<AtomicI64>,
    /// PostgreSQL: does another replica listen for signals? Until a look
    /// says no, yes (see `signals::Store::look_for_replicas`).
    others_listening: Arc<AtomicBool>,
}

struct Batches {
    submit: Batcher<SubmitRequest, Submitted>,
    lease: Batcher<LeaseRequest, LeaseAttempt>,
    complete: Batcher<CompleteRequest, Completion>,
    complete_next: Batcher<CompleteNextRequest, CompletedNext>,
    /// Replica signals (PostgreSQL only; `origin` is always this replica).
    publish: Batcher<(String, Vec<crate::wake::Signal>), ()>,
}

/// Most requests written in one batch.
const MAX_BATCH: usize = 64;

impl Store {
    /// Opens (creating if needed) the database at `url` (`sqlite://PATH` or
    /// `postgres://…`) and applies migrations.
    pub async fn open(url: &str, durability: Durability) -> Result<Self> {
        sqlx::any::install_default_drivers();
        if url.starts_with("sqlite:") {
            sqlite::open(url, durability).await
        } else if url.starts_with("postgres:") || url.starts_with("postgresql:") {
            postgres::open(url).await
        } else {
            Err(Error::bad_request(format!(
                "unsupported database URL: use sqlite://PATH or postgres://… (got {:?})",
                scheme(url)
            )))
        }
    }

    /// Starts the batch writers, `concurrency` batches of each kind at a time.
    fn with_batches(mut self, concurrency: usize) -> Self {
        let inner = self.clone();
        let submit: BatchFn<SubmitRequest, Submitted> = Arc::new(move |reqs| {
            let store = inner.clone();
            Box::pin(async move { store.submit_batch(&reqs).await })
        });
        let inner = self.clone();
        let lease: BatchFn<LeaseRequest, LeaseAttempt> = Arc::new(move |reqs| {
            let store = inner.clone();
            Box::pin(async move { store.lease_batch(&reqs).await })
        });
        let inner = self.clone();
        let complete: BatchFn<CompleteRequest, Completion> = Arc::new(move |reqs| {
            let store = inner.clone();
            Box::pin(async move { store.complete_batch(&reqs).await })
        });
        let inner = self.clone();
        let complete_next: BatchFn<CompleteNextRequest, CompletedNext> = Arc::new(move |reqs| {
            let store = inner.clone();
            Box::pin(async move { store.complete_next_batch(&reqs).await })
        });
        let inner = self.clone();
        let publish: BatchFn<(String, Vec<crate::wake::Signal>), ()> = Arc::new(move |reqs| {
            let store = inner.clone();
            // Signals are wakes: one sent twice does no harm.
            Box::pin(async move {
                store
                    .publish_batch(&reqs)
                    .await
                    .map_err(BatchError::BeforeWrite)
            })
        });
        self.batches = Some(Arc::new(Batches {
            submit: Batcher::spawn_named("submit", MAX_BATCH, concurrency, submit),
            lease: Batcher::spawn_named("lease", MAX_BATCH, concurrency, lease),
            complete: Batcher::spawn_named("complete", MAX_BATCH, concurrency, complete),
            complete_next: Batcher::spawn_named(
                "complete_next",
                MAX_BATCH,
                concurrency,
                complete_next,
            ),
            publish: Batcher::spawn_named("publish", MAX_BATCH, 1, publish),
        }));
        self
    }

    pub fn backend(&self) -> Backend {
        self.dialect.backend
    }

    /// Do replicas share this database, and hear each other's signals?
    pub fn has_replicas(&self) -> bool {
        self.dialect.replica_signals
    }

    pub async fn close(&self) {
        self.engine.close();
        self.reader.close().await;
        self.writer.close().await;
    }
}

/// The part of a database URL before `://`, for messages (never credentials).
pub fn scheme(url: &str) -> &str {
    url.split_once("://").map_or("(none)", |(s, _)| s)
}

/// `$first, $first+1, …` for an `IN (…)` list of `n` values.
pub(super) fn placeholders(first: usize, n: usize) -> String {
    (first..first + n)
        .map(|i| format!("${i}"))
        .collect::<Vec<_>>()
        .join(", ")
}

pub(super) fn bind_all<'q, O>(
    mut q: sqlx::query::QueryAs<'q, sqlx::Any, O, sqlx::any::AnyArguments<'q>>,
    values: &[&'q str],
) -> sqlx::query::QueryAs<'q, sqlx::Any, O, sqlx::any::AnyArguments<'q>> {
    for v in values {
        q = q.bind(*v);
    }
    q
}

/// The single result of a batch of one.
pub(super) fn only_result<T>(mut results: Vec<Result<T>>) -> Result<T> {
    results
        .pop()
        .unwrap_or(Err(Error::Internal("a batch of one gave no result")))
}

/// Capabilities = labels set at pairing ∪ what the runner detected.
pub(super) fn capabilities(labels: &str, detected: &str) -> Result<Vec<String>> {
    let mut all = json_list(labels)?;
    all.extend(json_list(detected)?);
    all.sort();
    all.dedup();
    Ok(all)
}

fn json_list(s: &str) -> Result<Vec<String>> {
    serde_json::from_str(s).map_err(|e| Error::Corrupt(format!("list column: {e}")))
}

/// A PostgreSQL `text[]` literal of `items`, each quoted (`CAST($n AS
/// TEXT[])` reads it back; the `Any` driver binds no arrays).
fn text_array<'a>(items: impl IntoIterator<Item = &'a str>) -> String {
    let mut out = String::from("{");
    for (k, item) in items.into_iter().enumerate() {
        if k > 0 {
            out.push(',');
        }
        out.push('"');
        for c in item.chars() {
            if c == '"' || c == '\\' {
                out.push('\\');
            }
            out.push(c);
        }
        out.push('"');
    }
    out.push('}');
    out
}

fn to_json<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).expect("plain data serializes")
}

/// Maps a unique-constraint violation on `insert` to a client-facing conflict.
fn on_unique(e: sqlx::Error, message: impl FnOnce() -> String) -> Error {
    match &e {
        sqlx::Error::Database(db) if db.is_unique_violation() => Error::conflict(message()),
        _ => Error::Db(e),
    }
}
