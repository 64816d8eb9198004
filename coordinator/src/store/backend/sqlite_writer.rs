//! SQLite's hot batches (lease, complete), each run as one closure on a
//! connection of its own, on that connection's thread.
//!
//! Through sqlx every statement, and every row it returns, is a hand-off
//! between a runtime thread and the connection's thread: a pair of context
//! switches each, which on a busy coordinator cost more than SQLite's own
//! work (`perf`, 64-runner drain). Here a batch crosses once each way: the
//! closure goes to the thread, runs its reads, plan and writes in one
//! `BEGIN IMMEDIATE` transaction, and its result comes back.
//!
//! The rest of the coordinator's writes go through sqlx's one writer
//! connection. A batch holds that connection while it runs here, so there
//! is still one writer at a time (see `sqlite`).

use std::panic::AssertUnwindSafe;
use std::sync::{Mutex, mpsc};

use rusqlite::types::ToSql;
use rusqlite::{Connection, OpenFlags};
use sqlx::any::AnyRow;
use tokio::sync::oneshot;

use crate::store::batch::BatchError;
use crate::store::error::{Error, Result};

type Task = Box<dyn FnOnce(&mut Connection) + Send>;

/// The connection's thread, fed closures; it ends once closed.
pub(in crate::store) struct SqliteWriter {
    tasks: Mutex<Option<mpsc::Sender<Task>>>,
}

impl SqliteWriter {
    /// Opens `file` (already created and migrated) with `pragmas`, on a
    /// thread of its own.
    pub(in crate::store) async fn open(file: String, pragmas: String) -> Result<Self> {
        let (tasks, inbox) = mpsc::channel::<Task>();
        let (opened, ready) = oneshot::channel();
        std::thread::Builder::new()
            .name("sqlite-writer".into())
            .spawn(move || {
                let mut conn = match connect(&file, &pragmas) {
                    Ok(conn) => {
                        let _ = opened.send(Ok(()));
                        conn
                    }
                    Err(e) => {
                        let _ = opened.send(Err(e));
                        return;
                    }
                };
                for task in inbox {
                    // A task that panics has rolled back (its transaction's
                    // drop) and its caller hears so; the thread goes on.
                    let _ = std::panic::catch_unwind(AssertUnwindSafe(|| task(&mut conn)));
                    // A rollback that failed would leave the write lock held
                    // and every later batch inside this transaction.
                    if !conn.is_autocommit()
                        && let Err(e) = conn.execute_batch("ROLLBACK")
                    {
                        tracing::error!(error = %e, "the SQLite writer could not roll back; reopening it");
                        match connect(&file, &pragmas) {
                            Ok(fresh) => conn = fresh,
                            Err(e) => {
                                tracing::error!(error = %e, "the SQLite writer could not reopen; it stops");
                                return;
                            }
                        }
                    }
                }
            })
            .map_err(|_| Error::Internal("could not start the SQLite writer thread"))?;
        ready
            .await
            .map_err(|_| Error::Internal("the SQLite writer thread ended at start"))??;
        Ok(Self {
            tasks: Mutex::new(Some(tasks)),
        })
    }

    /// Runs `f` on the writer's connection and hands back what it returns.
    /// If `f` panicked, whether it wrote is not known to the caller.
    pub(in crate::store) async fn run<R, F>(&self, f: F) -> Result<R, BatchError>
    where
        R: Send + 'static,
        F: FnOnce(&mut Connection) -> R + Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        let task: Task = Box::new(move |conn| {
            let _ = reply.send(f(conn));
        });
        let sent = match self.tasks.lock().expect("never poisoned").as_ref() {
            Some(tasks) => tasks.send(task).is_ok(),
            None => false,
        };
        if !sent {
            return Err(BatchError::BeforeWrite(Error::Internal(
                "the SQLite writer is closed",
            )));
        }
        answer.await.map_err(|_| {
            BatchError::Ambiguous(Error::Internal("the SQLite writer failed during a write"))
        })
    }

    /// Ends the thread once what was sent has run; the connection closes.
    pub(in crate::store) fn close(&self) {
        self.tasks.lock().expect("never poisoned").take();
    }
}

/// Read-only connections for the reads on every request (who presents a
/// token, where a submit goes), run on the calling thread. A read of a row
/// or two by index costs microseconds: less than handing it to a
/// connection's thread and back, which is what a sqlx read does.
pub(in crate::store) struct InlineReaders {
    file: String,
    idle: Mutex<Vec<Connection>>,
}

/// Idle read-only connections kept: one per runtime thread is plenty.
const IDLE_READERS: usize = 8;

impl InlineReaders {
    pub(in crate::store) fn new(file: String) -> Self {
        Self {
            file,
            idle: Mutex::default(),
        }
    }

    /// Runs `f` on an idle read-only connection (or a new one).
    pub(in crate::store) fn read<R>(&self, f: impl FnOnce(&Connection) -> Result<R>) -> Result<R> {
        let idle = self.idle.lock().expect("never poisoned").pop();
        let conn = match idle {
            Some(conn) => conn,
            None => {
                let conn = Connection::open_with_flags(
                    &self.file,
                    OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
                )?;
                conn.busy_timeout(std::time::Duration::from_secs(10))?;
                conn
            }
        };
        let out = f(&conn);
        let mut idle = self.idle.lock().expect("never poisoned");
        if idle.len() < IDLE_READERS {
            idle.push(conn);
        }
        out
    }
}

/// A COMMIT that failed (the disk, not a lock: the batch holds the write
/// lock from `BEGIN IMMEDIATE`) may have reached the WAL: whether the batch
/// was written is not known.
pub(in crate::store) fn commit_failed(e: rusqlite::Error) -> BatchError {
    BatchError::Ambiguous(e.into())
}

fn connect(file: &str, pragmas: &str) -> Result<Connection> {
    let conn = Connection::open_with_flags(
        file,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.execute_batch(pragmas)?;
    // Each batch's statements differ by their number of rows (up to 64):
    // room for every shape of the statements run here (about 830).
    conn.set_prepared_statement_cache_capacity(1024);
    Ok(conn)
}

/// A row's columns by index, as either driver reads them.
pub(in crate::store) trait Cols {
    fn col<T>(&self, i: usize) -> Result<T>
    where
        T: for<'r> sqlx::Decode<'r, sqlx::Any> + sqlx::Type<sqlx::Any> + rusqlite::types::FromSql;
}

impl Cols for AnyRow {
    fn col<T>(&self, i: usize) -> Result<T>
    where
        T: for<'r> sqlx::Decode<'r, sqlx::Any> + sqlx::Type<sqlx::Any> + rusqlite::types::FromSql,
    {
        Ok(sqlx::Row::try_get(self, i)?)
    }
}

impl Cols for rusqlite::Row<'_> {
    fn col<T>(&self, i: usize) -> Result<T>
    where
        T: for<'r> sqlx::Decode<'r, sqlx::Any> + sqlx::Type<sqlx::Any> + rusqlite::types::FromSql,
    {
        Ok(rusqlite::Row::get(self, i)?)
    }
}

/// Our SQL numbers its parameters `$1, $2, …` (see `store`), which SQLite
/// reads as names, bound by looking each name up. As `?1, ?2, …` a
/// parameter's index is its number: `args[i]` binds to `?{i + 1}`.
fn numbered(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '$' if chars.peek().is_some_and(char::is_ascii_digit) => out.push('?'),
            c => out.push(c),
        }
    }
    out
}

fn prepare<'c>(
    conn: &'c Connection,
    sql: &str,
    args: &[&dyn ToSql],
) -> Result<rusqlite::CachedStatement<'c>> {
    let mut stmt = conn.prepare_cached(&numbered(sql))?;
    let count = stmt.parameter_count();
    if args.len() < count {
        return Err(Error::Internal(
            "a statement has more parameters than values",
        ));
    }
    for (i, arg) in args.iter().take(count).enumerate() {
        stmt.raw_bind_parameter(i + 1, arg)?;
    }
    Ok(stmt)
}

/// Runs one statement, each row through `f`.
pub(in crate::store) fn rows<T>(
    conn: &Connection,
    sql: &str,
    args: &[&dyn ToSql],
    mut f: impl FnMut(&rusqlite::Row<'_>) -> Result<T>,
) -> Result<Vec<T>> {
    let mut stmt = prepare(conn, sql, args)?;
    let mut rows = stmt.raw_query();
    let mut out = Vec::new();
    while let Some(row) = rows.next()? {
        out.push(f(row)?);
    }
    Ok(out)
}

/// Runs one statement that returns no rows; how many it changed.
pub(in crate::store) fn execute(
    conn: &Connection,
    sql: &str,
    args: &[&dyn ToSql],
) -> Result<usize> {
    Ok(prepare(conn, sql, args)?.raw_execute()?)
}

#[cfg(test)]
mod tests {
    use super::numbered;

    #[test]
    fn parameters_keep_their_numbers() {
        assert_eq!(
            numbered("SELECT $2, '$', $10 FROM t WHERE a = $1"),
            "SELECT ?2, '$', ?10 FROM t WHERE a = ?1"
        );
    }
}
