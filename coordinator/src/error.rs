//! The coordinator's one error type. `Api` errors carry a stable code and a
//! message safe to show the caller; everything else is internal, logged and
//! answered as a bare 500 (see `http::error`).

use drover_wire::ErrorCode;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{message}")]
    Api { code: ErrorCode, message: String },
    #[error("database: {0}")]
    Db(#[from] sqlx::Error),
    /// From SQLite's batch writer (see `store::backend::sqlite_writer`).
    #[error("database: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("migration: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("corrupt row: {0}")]
    Corrupt(String),
    #[error("{0}")]
    Internal(&'static str),
}

impl Error {
    pub fn api(code: ErrorCode, message: impl Into<String>) -> Self {
        Self::Api {
            code,
            message: message.into(),
        }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::api(ErrorCode::BadRequest, message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::api(ErrorCode::NotFound, message)
    }

    pub fn conflict(message: impl Into<String>) -> Self {
        Self::api(ErrorCode::Conflict, message)
    }

    pub fn lease_lost() -> Self {
        Self::api(
            ErrorCode::LeaseLost,
            "this lease is no longer held by this runner (expired, re-queued or revoked)",
        )
    }

    pub fn code(&self) -> ErrorCode {
        match self {
            Self::Api { code, .. } => *code,
            _ => ErrorCode::Internal,
        }
    }
}

/// The domain's refusals, each with its stable code.
impl From<drover_domain::Error> for Error {
    fn from(e: drover_domain::Error) -> Self {
        match e {
            drover_domain::Error::Invalid(message) => Self::bad_request(message),
        }
    }
}

impl From<serde_json::Error> for Error {
    fn from(e: serde_json::Error) -> Self {
        Self::Corrupt(e.to_string())
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
