//! The SQLite backend: its dialect, and opening it (one writer connection,
//! and one more for the hot batches that writes only while holding it; a
//! few readers; WAL checkpoints in the background).

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use sqlx::AnyPool;
use sqlx::Executor as _;

use super::sqlite_writer::{self, InlineReaders, SqliteWriter};
use super::{Arg, Engine, FromCols};
use crate::store::batch::BatchError;
use crate::store::error::{Error, Result};
use crate::store::{Backend, Dialect, Durability, Store};

static MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("../migrations/sqlite");

pub(in crate::store) const DIALECT: Dialect = Dialect {
    backend: Backend::Sqlite,
    is: "IS",
    lock_skip_locked: "",
    lease_page: 128,
    lock_for_update: "",
    db_clock: None,
    replica_signals: false,
    migrations: &MIGRATIONS,
    readiness_reopens: true,
};

/// SQLite's hot paths: the batches on the batch writer's connection (its
/// own thread, rusqlite), the reads on every request inline on the
/// calling thread (`sqlite_writer`); the same SQL text as through sqlx.
pub(in crate::store) struct SqliteEngine {
    writer: SqliteWriter,
    reads: InlineReaders,
}

impl SqliteEngine {
    /// Runs `f` on the batch writer, holding sqlx's writer until `f` has
    /// run: one writer at a time. In a task of its own, so a caller that
    /// goes away (a client hung up) cannot hand sqlx's writer back while
    /// `f` still writes.
    pub(in crate::store) async fn on_writer<R, F>(
        self: &Arc<Self>,
        store: &Store,
        f: F,
    ) -> Result<R, BatchError>
    where
        R: Send + 'static,
        F: FnOnce(&mut rusqlite::Connection) -> R + Send + 'static,
    {
        let (sole, engine) = (store.writer.clone(), self.clone());
        tokio::spawn(async move {
            let _sole = sole.acquire().await?;
            engine.writer.run(f).await
        })
        .await
        .map_err(|_| BatchError::Ambiguous(Error::Internal("a SQLite write's task failed")))?
    }

    pub(super) fn read<T: FromCols>(&self, sql: &str, args: &[Arg]) -> Result<Vec<T>> {
        self.reads
            .read(|conn| sqlite_writer::rows(conn, sql, &to_sql(args), |row| T::from_cols(row)))
    }

    pub(super) async fn write<T: FromCols>(
        self: &Arc<Self>,
        store: &Store,
        sql: String,
        args: Vec<Arg>,
    ) -> Result<Vec<T>> {
        self.on_writer(store, move |conn| {
            sqlite_writer::rows(conn, &sql, &to_sql(&args), |row| T::from_cols(row))
        })
        .await
        .map_err(BatchError::into_error)?
    }

    pub(super) fn close(&self) {
        self.writer.close();
    }
}

fn to_sql(args: &[Arg]) -> Vec<&dyn rusqlite::types::ToSql> {
    args.iter().map(Arg::to_sql).collect()
}

pub(in crate::store) fn with_param(url: &str, param: &str) -> String {
    format!("{url}{}{param}", if url.contains('?') { '&' } else { '?' })
}

pub(in crate::store) async fn open(url: &str, durability: Durability) -> Result<Store> {
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
    let batch_pragmas =
        format!("PRAGMA wal_autocheckpoint = 0; PRAGMA journal_size_limit = 67108864; {pragmas}");
    let writer_pragmas = format!("PRAGMA journal_mode = WAL; {batch_pragmas}");
    // A connection to a local file does not go stale: no ping (a
    // round trip to the connection's thread) before each use.
    let writer = super::pool_options::<sqlx::Any>()
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
    MIGRATIONS.run(&writer).await?;
    // The hot batches' connection, to the file as SQLite opened it.
    let (_, _, file): (i64, String, String) =
        sqlx::query_as("SELECT seq, name, file FROM pragma_database_list WHERE name = 'main'")
            .fetch_one(&writer)
            .await?;
    if file.is_empty() {
        // An in-memory or temporary database: another connection would
        // open a database of its own.
        return Err(Error::bad_request(
            "an in-memory SQLite database is not supported: use a file (sqlite://PATH)",
        ));
    }
    let batches = SqliteWriter::open(file.clone(), batch_pragmas).await?;
    let inline_reads = InlineReaders::new(file);
    let reader = super::pool_options::<sqlx::Any>()
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
    let store = Store {
        writer,
        reader,
        dialect: &DIALECT,
        url: url.to_owned(),
        engine: Engine::Sqlite(Arc::new(SqliteEngine {
            writer: batches,
            reads: inline_reads,
        })),
        batches: None,
        alive: Arc::default(),
        secrets: Arc::default(),
        clock_offset: Arc::default(),
        others_listening: Arc::new(AtomicBool::new(false)),
    };
    checkpoint_in_background(
        with_param(url, "mode=rw"),
        pragmas_for_checkpoints(durability),
        Arc::downgrade(&store.alive),
        store.writer.clone(),
    );
    Ok(store.with_batches(1))
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
