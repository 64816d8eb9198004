//! What the store fails with: a refusal of the domain (its kind and a
//! message for the caller), or the database's own failure. The API's error
//! (`coordinator::error`) gives each kind its code; the store knows none.

pub use drover_domain::error::Kind;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Refused(#[from] drover_domain::Error),
    #[error("database: {0}")]
    Db(#[from] sqlx::Error),
    /// From SQLite's batch writer (see `backend::sqlite_writer`).
    #[error("database: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("migration: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("corrupt row: {0}")]
    Corrupt(String),
    #[error("{0}")]
    Internal(&'static str),
    /// A write that failed when it may already have happened: retrying it
    /// could do it twice, so the caller is told to retry with care.
    #[error(
        "the write failed and may or may not have happened; retry (a submit with the same Idempotency-Key)"
    )]
    Ambiguous,
}

impl Error {
    pub fn refused(kind: Kind, message: impl Into<String>) -> Self {
        Self::Refused(drover_domain::Error::new(kind, message))
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::refused(Kind::Invalid, message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::refused(Kind::NotFound, message)
    }

    pub fn conflict(message: impl Into<String>) -> Self {
        Self::refused(Kind::Conflict, message)
    }

    pub fn lease_lost() -> Self {
        Self::refused(
            Kind::LeaseLost,
            "this lease is no longer held by this runner (expired, re-queued or revoked)",
        )
    }

    /// The refusal's kind; `None` for a failure of the database or the store.
    pub fn kind(&self) -> Option<Kind> {
        match self {
            Self::Refused(e) => Some(e.kind),
            _ => None,
        }
    }
}

impl From<serde_json::Error> for Error {
    fn from(e: serde_json::Error) -> Self {
        Self::Corrupt(e.to_string())
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
