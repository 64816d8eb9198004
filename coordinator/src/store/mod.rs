//! All SQL lives under `store`. Everything above it speaks in domain types.
//!
//! One set of queries serves both backends through sqlx's `Any` driver:
//! statements use `$1, $2, …` placeholders (numbered in order of first use,
//! which SQLite reads as named parameters), integers are BIGINT and flags
//! are 0/1 integers on both sides. Where the dialects truly differ, the
//! difference is a named field of [`Dialect`].
//!
//! - **SQLite** (the embedded default): one writer connection, so every
//!   write transaction is serialized (that alone makes a lease atomic), and
//!   a few read-only connections (WAL lets them read while the writer writes).
//! - **PostgreSQL** (scale-out): one pool shared by several coordinator
//!   replicas; a lease locks its candidate rows `FOR UPDATE SKIP LOCKED`,
//!   and replicas wake each other through `LISTEN`/`NOTIFY` (see `signals`).

mod env;
mod idempotency;
mod identity;
mod jobs;
mod leases;
mod pools;
mod retention;
pub mod signals;
#[cfg(test)]
mod tests;

use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::AtomicI64;
use std::time::Duration;

use sqlx::any::AnyPoolOptions;
use sqlx::{AnyPool, Executor as _};

use crate::batch::{BatchError, BatchFn, Batcher};
use crate::error::{Error, Result};
use jobs::SubmitRequest;
use leases::{CompleteRequest, LeaseRequest};

pub use idempotency::IdempotencyKey;
pub use identity::{Member, Principal, Role, RunnerAuth};
pub use jobs::{CancelOutcome, JobSpec, NewJob, Submitted};
pub use leases::{Completion, LeaseAttempt, Wake};
pub use pools::{Owner, Placement, RunnerScope};
pub use retention::Purged;
pub use signals::Envelope;

static SQLITE_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("../migrations/sqlite");
static POSTGRES_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("../migrations/postgres");

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
    /// On a query joining `jobs j`: lock the job row until commit.
    lock_job_row: &'static str,
    /// Lock the rows read until commit, waiting for other holders.
    lock_for_update: &'static str,
    /// A lease batch's runners: held until commit, so a revoke waits for
    /// the lease (then releases what it leased), and two batches serving one
    /// runner take turns, each counting the leases the other took (slots).
    /// Not `FOR UPDATE`: a job insert's foreign-key check must not wait.
    lock_runners: &'static str,
    /// The database's clock in Unix milliseconds, where lease times are
    /// computed (see [`Dialect::now`]); `None`: the coordinator's.
    db_clock: Option<&'static str>,
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

const SQLITE: Dialect = Dialect {
    backend: Backend::Sqlite,
    is: "IS",
    lock_skip_locked: "",
    lease_page: 128,
    lock_job_row: "",
    lock_for_update: "",
    lock_runners: "",
    db_clock: None,
};
const POSTGRES: Dialect = Dialect {
    backend: Backend::Postgres,
    is: "IS NOT DISTINCT FROM",
    lock_skip_locked: "FOR UPDATE SKIP LOCKED",
    lease_page: 16,
    lock_job_row: "FOR UPDATE OF j",
    lock_for_update: "FOR UPDATE",
    lock_runners: "FOR NO KEY UPDATE",
    db_clock: Some("CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)"),
};

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
    /// Batches lease and complete calls (`None` inside the batch writers).
    batches: Option<Arc<Batches>>,
    /// Background tasks end once every clone of the store is gone.
    alive: Arc<()>,
    /// Seal and open job env (see `env`); set once, shared by every clone.
    secrets: Arc<std::sync::OnceLock<Arc<crate::secrets::KeyRing>>>,
    /// This coordinator's clock minus the database's (PostgreSQL), as last
    /// measured by `expire_leases`.
    clock_offset: Arc<AtomicI64>,
}

struct Batches {
    submit: Batcher<SubmitRequest, Submitted>,
    lease: Batcher<LeaseRequest, LeaseAttempt>,
    complete: Batcher<CompleteRequest, Completion>,
    /// Replica signals (PostgreSQL only; `origin` is always this replica).
    publish: Batcher<(String, Vec<crate::dispatch::Signal>), ()>,
}

/// Where a batch writes. On SQLite it is the one writer connection, held
/// for the whole batch: no other write can come between its statements, so
/// its reads need no transaction, and its writes go as one statement (or one
/// multi-statement command with its own `BEGIN`/`COMMIT`): each round trip to
/// the connection's thread costs a pair of context switches. On PostgreSQL
/// it is a transaction, so the rows it locks stay locked.
pub(super) enum Writer {
    Tx(sqlx::Transaction<'static, sqlx::Any>),
    Held(sqlx::pool::PoolConnection<sqlx::Any>),
}

impl std::ops::Deref for Writer {
    type Target = sqlx::AnyConnection;
    fn deref(&self) -> &Self::Target {
        match self {
            Self::Tx(tx) => tx,
            Self::Held(conn) => conn,
        }
    }
}

impl std::ops::DerefMut for Writer {
    fn deref_mut(&mut self) -> &mut Self::Target {
        match self {
            Self::Tx(tx) => &mut *tx,
            Self::Held(conn) => &mut *conn,
        }
    }
}

impl Writer {
    /// Commits (on SQLite each write committed as it ran). A failed COMMIT
    /// may have committed (see [`BatchError::from_write`]).
    pub(super) async fn commit(self) -> Result<(), BatchError> {
        if let Self::Tx(tx) = self {
            tx.commit().await.map_err(BatchError::from_write)?;
        }
        Ok(())
    }

    /// How a batch failed when its write statement did: inside a
    /// transaction nothing is written before COMMIT; a SQLite statement
    /// commits as it runs (or is one `BEGIN … COMMIT` command).
    pub(super) fn write_error(&self, e: sqlx::Error) -> BatchError {
        match self {
            Self::Tx(_) => BatchError::BeforeWrite(e.into()),
            Self::Held(_) => BatchError::from_write(e),
        }
    }
}

/// Most requests written in one batch.
const MAX_BATCH: usize = 64;

fn with_param(url: &str, param: &str) -> String {
    format!("{url}{}{param}", if url.contains('?') { '&' } else { '?' })
}

impl Store {
    /// Opens (creating if needed) the database at `url` (`sqlite://PATH` or
    /// `postgres://…`) and applies migrations.
    pub async fn open(url: &str, durability: Durability) -> Result<Self> {
        sqlx::any::install_default_drivers();
        if url.starts_with("sqlite:") {
            let sync = match durability {
                Durability::Full => "FULL",
                Durability::Normal => "NORMAL",
            };
            let pragmas = format!(
                "PRAGMA busy_timeout = 10000; PRAGMA foreign_keys = ON; PRAGMA synchronous = {sync};"
            );
            // Checkpoints (copying the WAL into the database, with an fsync)
            // run on their own connection, never inside a commit (see
            // `checkpoint_in_background`).
            // No `secure_delete`: what a finished job leaves in free space is
            // ciphertext, and zeroing it took the open-loop p99
            // enqueue→lease from 4.7 to 22 ms (bench, SQLite NORMAL).
            // A WAL that grew while checkpoints lagged (a big purge, a slow
            // disk) is cut back to 64 MiB when the writer next rewinds it.
            let writer_pragmas = format!(
                "PRAGMA journal_mode = WAL; PRAGMA wal_autocheckpoint = 0; PRAGMA journal_size_limit = 67108864; {pragmas}"
            );
            // A connection to a local file does not go stale: no ping (a
            // round trip to the connection's thread) before each use.
            let writer = AnyPoolOptions::new()
                .max_connections(1)
                .min_connections(1)
                .test_before_acquire(false)
                .acquire_timeout(Duration::from_secs(30))
                .after_connect(move |conn, _| {
                    let sql = writer_pragmas.clone();
                    Box::pin(async move { conn.execute(sql.as_str()).await.map(drop) })
                })
                .connect(&with_param(url, "mode=rwc"))
                .await?;
            SQLITE_MIGRATIONS.run(&writer).await?;
            let reader = AnyPoolOptions::new()
                .max_connections(4)
                .test_before_acquire(false)
                .acquire_timeout(Duration::from_secs(30))
                .after_connect(move |conn, _| {
                    let sql = pragmas.clone();
                    Box::pin(async move { conn.execute(sql.as_str()).await.map(drop) })
                })
                .connect(&with_param(url, "mode=ro"))
                .await?;
            // One writer: one batch at a time; the next gathers meanwhile.
            let store = Self {
                writer,
                reader,
                dialect: &SQLITE,
                url: url.to_owned(),
                batches: None,
                alive: Arc::default(),
                secrets: Arc::default(),
                clock_offset: Arc::default(),
            };
            checkpoint_in_background(
                with_param(url, "mode=rw"),
                pragmas_for_checkpoints(durability),
                Arc::downgrade(&store.alive),
                store.writer.clone(),
            );
            Ok(store.with_batches(1))
        } else if url.starts_with("postgres:") || url.starts_with("postgresql:") {
            let pool = AnyPoolOptions::new()
                .max_connections(24)
                .acquire_timeout(Duration::from_secs(30))
                .connect(url)
                .await?;
            POSTGRES_MIGRATIONS.run(&pool).await?;
            Ok(Self {
                writer: pool.clone(),
                reader: pool,
                dialect: &POSTGRES,
                url: url.to_owned(),
                batches: None,
                alive: Arc::default(),
                secrets: Arc::default(),
                clock_offset: Arc::default(),
            }
            .with_batches(4))
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
        let publish: BatchFn<(String, Vec<crate::dispatch::Signal>), ()> = Arc::new(move |reqs| {
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
            submit: Batcher::spawn(MAX_BATCH, concurrency, submit),
            lease: Batcher::spawn(MAX_BATCH, concurrency, lease),
            complete: Batcher::spawn(MAX_BATCH, concurrency, complete),
            publish: Batcher::spawn(MAX_BATCH, 1, publish),
        }));
        self
    }

    /// See [`Writer`].
    pub(super) async fn single_write(&self) -> Result<Writer> {
        Ok(match self.dialect.backend {
            Backend::Sqlite => Writer::Held(self.writer.acquire().await?),
            Backend::Postgres => Writer::Tx(self.writer.begin().await?),
        })
    }

    pub fn backend(&self) -> Backend {
        self.dialect.backend
    }

    pub async fn close(&self) {
        self.reader.close().await;
        self.writer.close().await;
    }
}

fn pragmas_for_checkpoints(durability: Durability) -> String {
    let sync = match durability {
        Durability::Full => "FULL",
        Durability::Normal => "NORMAL",
    };
    format!("PRAGMA busy_timeout = 10000; PRAGMA synchronous = {sync};")
}

/// SQLite's automatic checkpoint runs inside whichever commit crosses the
/// threshold, stalling that commit (and every write queued behind it) for an
/// fsync. Instead a task checkpoints every 200 ms on its own connection and
/// thread, without blocking the writer (`PASSIVE`), reconnecting after a
/// failure. It ends with the store.
fn checkpoint_in_background(
    url: String,
    pragmas: String,
    alive: std::sync::Weak<()>,
    writer: AnyPool,
) {
    use sqlx::Connection as _;
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_millis(200));
        let mut conn: Option<sqlx::AnyConnection> = None;
        loop {
            tick.tick().await;
            if alive.strong_count() == 0 {
                if let Some(conn) = conn {
                    let _ = conn.close().await;
                }
                return;
            }
            // (Re)connect as needed: the WAL must not grow for good.
            if conn.is_none() {
                match sqlx::AnyConnection::connect(&url).await {
                    Ok(mut c) => match c.execute(pragmas.as_str()).await {
                        Ok(_) => conn = Some(c),
                        Err(e) => tracing::warn!(error = %e, "checkpoint connection setup failed"),
                    },
                    Err(e) => tracing::warn!(error = %e, "no checkpoint connection yet"),
                }
            }
            if let Some(c) = conn.as_mut()
                && let Err(e) = checkpoint(c, &writer).await
            {
                tracing::warn!(error = %e, "checkpoint failed; reconnecting");
                conn = None;
            }
        }
    });
}

/// WAL frames (4 KiB pages) past which a checkpoint waits for its turn.
const RESTART_FRAMES: i64 = 16_384;

/// A passive checkpoint, which never waits. The WAL rewinds only once a
/// checkpoint has caught up with every commit, which a passive one may never
/// do under a steady stream of commits to a big database (the retention
/// bench saw the WAL pass 3 GiB in three minutes). So past 64 MiB the writer
/// itself finishes the checkpoint between two batches (`RESTART`: no commit
/// can come in between, and it waits for readers), and its next commit
/// rewinds the WAL. Run on the writer, not here: a checkpoint that blocks
/// writers would make a write transaction that began with a read fail at
/// once with SQLITE_BUSY.
async fn checkpoint(conn: &mut sqlx::AnyConnection, writer: &AnyPool) -> Result<(), sqlx::Error> {
    let (_, frames, _): (i64, i64, i64) = sqlx::query_as("PRAGMA wal_checkpoint(PASSIVE)")
        .fetch_one(&mut *conn)
        .await?;
    if frames > RESTART_FRAMES {
        writer.execute("PRAGMA wal_checkpoint(RESTART)").await?;
    }
    Ok(())
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

pub(super) fn bind_all_query<'q>(
    mut q: sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>>,
    values: &[&'q str],
) -> sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>> {
    for v in values {
        q = q.bind(*v);
    }
    q
}

/// The single result of a batch of one.
pub(super) fn one<T>(mut results: Vec<Result<T>>) -> Result<T> {
    results
        .pop()
        .unwrap_or(Err(Error::Internal("a batch of one gave no result")))
}

fn json_list(s: &str) -> Result<Vec<String>> {
    serde_json::from_str(s).map_err(|e| Error::Corrupt(format!("list column: {e}")))
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
