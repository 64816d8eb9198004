//! All SQL lives under `store`. Everything above it speaks in domain types.
//!
//! SQLite runs with one writer connection (so every write transaction is
//! serialized, which is what makes a lease atomic) and a small pool of
//! readers (WAL lets them read while the writer writes).

mod identity;
mod jobs;
mod leases;
mod pools;

use std::str::FromStr;
use std::time::Duration;

use sqlx::SqlitePool;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};

use crate::error::{Error, Result};

pub use identity::{Member, Principal, Role, RunnerAuth};
pub use jobs::{CancelOutcome, JobSpec, NewJob};
pub use leases::{Completion, LeaseAttempt, Wake};
pub use pools::{Owner, Placement, RunnerScope};

pub(crate) static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../migrations/sqlite");

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// `synchronous=FULL`: a commit survives power loss.
    #[default]
    Full,
    /// `synchronous=NORMAL`: a commit survives a process crash, not power loss.
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
    writer: SqlitePool,
    reader: SqlitePool,
}

impl Store {
    /// Opens (creating if needed) the database at `url` and applies migrations.
    pub async fn open(url: &str, durability: Durability) -> Result<Self> {
        let options = SqliteConnectOptions::from_str(url)?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(match durability {
                Durability::Full => SqliteSynchronous::Full,
                Durability::Normal => SqliteSynchronous::Normal,
            })
            .busy_timeout(Duration::from_secs(10))
            .foreign_keys(true);
        let writer = SqlitePoolOptions::new()
            .max_connections(1)
            .min_connections(1)
            .acquire_timeout(Duration::from_secs(30))
            .connect_with(options.clone())
            .await?;
        MIGRATOR.run(&writer).await?;
        let reader = SqlitePoolOptions::new()
            .max_connections(4)
            .acquire_timeout(Duration::from_secs(30))
            .connect_with(options.read_only(true))
            .await?;
        Ok(Self { writer, reader })
    }

    pub async fn close(&self) {
        self.reader.close().await;
        self.writer.close().await;
    }
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
