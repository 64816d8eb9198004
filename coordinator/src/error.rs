//! The API's error: what the services and the HTTP layer answer with.
//! `Api` errors carry a stable code and a message safe to show the caller;
//! everything else is internal, logged and answered as a bare 500 (see
//! `http::error`). The domain's and the store's refusals become codes here,
//! by kind ([`code_of`]), and nowhere else.

use drover_domain::error::Kind;
use drover_wire::ErrorCode;

use crate::store;

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

/// The stable code of each kind of refusal.
pub fn code_of(kind: Kind) -> ErrorCode {
    match kind {
        Kind::Invalid => ErrorCode::BadRequest,
        Kind::InvalidRef => ErrorCode::InvalidRef,
        Kind::NotFound => ErrorCode::NotFound,
        Kind::Conflict => ErrorCode::Conflict,
        Kind::Unauthorized => ErrorCode::Unauthorized,
        Kind::Forbidden => ErrorCode::Forbidden,
        Kind::LeaseLost => ErrorCode::LeaseLost,
        Kind::LeaseLimit => ErrorCode::LeaseLimit,
        Kind::StateUsed => ErrorCode::StateUsed,
        Kind::StateExpired => ErrorCode::StateExpired,
        Kind::PairingCodeUsed => ErrorCode::PairingCodeUsed,
        Kind::PairingCodeExpired => ErrorCode::PairingCodeExpired,
        Kind::Overloaded => ErrorCode::Overloaded,
        Kind::NoRunners => ErrorCode::NoRunners,
        Kind::LastAdmin => ErrorCode::LastAdmin,
        Kind::CiNotAllowed => ErrorCode::CiNotAllowed,
        Kind::CapabilityMismatch => ErrorCode::CapabilityMismatch,
        Kind::BudgetExceeded => ErrorCode::BudgetExceeded,
    }
}

/// The domain's refusals, each with its stable code.
impl From<drover_domain::Error> for Error {
    fn from(e: drover_domain::Error) -> Self {
        Self::api(code_of(e.kind), e.message)
    }
}

impl From<store::error::Error> for Error {
    fn from(e: store::error::Error) -> Self {
        use store::error::Error as E;
        match e {
            E::Refused(refusal) => refusal.into(),
            E::Db(e) => Self::Db(e),
            E::Sqlite(e) => Self::Sqlite(e),
            E::Migrate(e) => Self::Migrate(e),
            E::Corrupt(what) => Self::Corrupt(what),
            E::Internal(what) => Self::Internal(what),
            E::Ambiguous => Self::api(ErrorCode::Internal, E::Ambiguous.to_string()),
        }
    }
}

impl From<serde_json::Error> for Error {
    fn from(e: serde_json::Error) -> Self {
        Self::Corrupt(e.to_string())
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
