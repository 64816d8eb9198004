//! The two databases. Each hot path (submit, lease, complete, heartbeat,
//! and the reads on every request) runs on an [`Engine`]: SQLite's batch
//! writer and inline readers, or PostgreSQL through sqlx and its stored
//! function. This is the one place that tells them apart.

pub(super) mod hot;
pub(super) mod postgres;
pub mod signals;
pub(super) mod sqlite;
pub mod sqlite_backup;
pub(super) mod sqlite_writer;

use std::sync::Arc;

use rusqlite::types::ToSql;

use super::Store;
use crate::store::error::Result;
pub(in crate::store) use sqlite_writer::Cols;

/// Pool options for every pool the store opens: sqlx's reaper turned off.
/// sqlx 0.8.6's reaper loops over the pool's count of idle connections,
/// which a connection given back while another is taken can wrap below
/// zero; the reaper then spins a tokio worker through about 2^64 turns, and
/// the process never exits (transact-rs/sqlx#3645, fixed after 0.8.6; an
/// `admin bootstrap` hung a test run so). Our pools keep their connections
/// for the process's life anyway: a fixed size, a connection idle a while
/// checked before use (PostgreSQL), one that fails closed and replaced.
pub(in crate::store) fn pool_options<DB: sqlx::Database>() -> sqlx::pool::PoolOptions<DB> {
    sqlx::pool::PoolOptions::new()
        .idle_timeout(None)
        .max_lifetime(None)
}

/// A value bound to a statement's `$n`.
#[derive(Clone, Debug)]
pub(in crate::store) enum Arg {
    Text(String),
    /// NULL when `None`.
    MaybeText(Option<String>),
    Int(i64),
}

impl Arg {
    fn to_sql(&self) -> &dyn ToSql {
        match self {
            Self::Text(s) => s,
            Self::MaybeText(s) => s,
            Self::Int(n) => n,
        }
    }

    fn bind<'q>(
        &'q self,
        q: sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>>,
    ) -> sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>> {
        match self {
            Self::Text(s) => q.bind(s.as_str()),
            Self::MaybeText(s) => q.bind(s.as_deref()),
            Self::Int(n) => q.bind(*n),
        }
    }
}

impl From<&str> for Arg {
    fn from(s: &str) -> Self {
        Self::Text(s.to_owned())
    }
}

impl From<Option<&str>> for Arg {
    fn from(s: Option<&str>) -> Self {
        Self::MaybeText(s.map(str::to_owned))
    }
}

impl From<i64> for Arg {
    fn from(n: i64) -> Self {
        Self::Int(n)
    }
}

/// A row as either driver reads it (`Cols`), into a type.
pub(in crate::store) trait FromCols: Sized + Send + 'static {
    fn from_cols(row: &impl Cols) -> Result<Self>;
}

impl FromCols for String {
    fn from_cols(row: &impl Cols) -> Result<Self> {
        row.col(0)
    }
}

impl FromCols for i64 {
    fn from_cols(row: &impl Cols) -> Result<Self> {
        row.col(0)
    }
}

impl FromCols for (String, i64) {
    fn from_cols(row: &impl Cols) -> Result<Self> {
        Ok((row.col(0)?, row.col(1)?))
    }
}

impl FromCols for (String, Option<i64>) {
    fn from_cols(row: &impl Cols) -> Result<Self> {
        Ok((row.col(0)?, row.col(1)?))
    }
}

/// One hot path (a submit, lease or complete batch) as each database runs
/// it. The resource module that owns its SQL implements this; the
/// [`Engine`] the store opened picks the body.
pub(in crate::store) trait OnEngine {
    type Out;

    /// On SQLite: typically one closure on the batch writer's thread
    /// ([`sqlite::SqliteEngine::on_writer`]).
    async fn on_sqlite(self, store: &Store, engine: &Arc<sqlite::SqliteEngine>) -> Self::Out;

    /// On PostgreSQL, through sqlx's pool.
    async fn on_postgres(self, store: &Store) -> Self::Out;
}

/// Where a store runs its hot paths: what every request reads, the
/// batched writes, and a heartbeat's renewal.
#[derive(Clone)]
pub(in crate::store) enum Engine {
    /// SQLite's batch writer (its own thread, rusqlite) and inline readers
    /// (on the calling thread), with the same SQL text as through sqlx.
    Sqlite(Arc<sqlite::SqliteEngine>),
    /// PostgreSQL through sqlx's pool (and `drover_lease`), its hot writes
    /// on the connections they used last.
    Postgres(hot::HotConnections),
}

impl Engine {
    /// Runs a hot path on this engine.
    pub(in crate::store) async fn run<T: OnEngine>(&self, store: &Store, path: T) -> T::Out {
        match self {
            Self::Sqlite(e) => path.on_sqlite(store, e).await,
            Self::Postgres(_) => path.on_postgres(store).await,
        }
    }

    /// The rows of a read made on every request (a token, a placement, a job).
    pub(in crate::store) async fn read<T: FromCols>(
        &self,
        store: &Store,
        sql: &str,
        args: Vec<Arg>,
    ) -> Result<Vec<T>> {
        match self {
            Self::Sqlite(e) => e.read(sql, &args),
            Self::Postgres(_) => {
                let rows = bind_args(sql, &args).fetch_all(&store.reader).await?;
                rows.iter().map(|row| T::from_cols(row)).collect()
            }
        }
    }

    /// The rows a write statement returns (a heartbeat's renewal).
    pub(in crate::store) async fn write<T: FromCols>(
        &self,
        store: &Store,
        sql: String,
        args: Vec<Arg>,
    ) -> Result<Vec<T>> {
        match self {
            Self::Sqlite(e) => e.write(store, sql, args).await,
            Self::Postgres(_) => {
                let mut conn = self.hot(store).await?;
                let rows = bind_args(&sql, &args).fetch_all(&mut *conn).await?;
                conn.done();
                rows.iter().map(|row| T::from_cols(row)).collect()
            }
        }
    }

    /// Stops what the engine runs of its own (SQLite's writer thread), and
    /// gives back what it keeps of the pool (before the pool closes).
    pub(in crate::store) fn close(&self) {
        match self {
            Self::Sqlite(e) => e.close(),
            Self::Postgres(kept) => kept.release(),
        }
    }

    /// A connection for a hot write: on PostgreSQL the one a hot write gave
    /// back last (see `hot`); call `done` on it once the write went through.
    pub(in crate::store) async fn hot(&self, store: &Store) -> sqlx::Result<hot::Hot> {
        match self {
            Self::Postgres(kept) => kept.acquire(&store.writer).await,
            // Only PostgreSQL's paths ask; on SQLite it would be a pool connection, kept by no one.
            Self::Sqlite(_) => hot::HotConnections::default().acquire(&store.writer).await,
        }
    }
}

/// A sqlx query of `sql` with `args` bound.
fn bind_args<'q>(
    sql: &'q str,
    args: &'q [Arg],
) -> sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>> {
    args.iter().fold(sqlx::query(sql), |q, a| a.bind(q))
}
