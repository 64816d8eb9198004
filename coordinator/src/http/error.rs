//! Errors become `{ "error": { "code", "message" } }` with a status from one table.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use drover_wire::{ErrorBody, ErrorCode, ErrorDetail};

use crate::error::Error;

/// Seconds an overloaded coordinator asks the caller to wait (`Retry-After`).
pub const RETRY_AFTER_SECONDS: u32 = 1;

pub fn status_of(code: ErrorCode) -> StatusCode {
    match code {
        ErrorCode::BadRequest | ErrorCode::InvalidRef | ErrorCode::UnsupportedProtocol => {
            StatusCode::BAD_REQUEST
        }
        ErrorCode::Unauthorized => StatusCode::UNAUTHORIZED,
        ErrorCode::BudgetExceeded => StatusCode::PAYMENT_REQUIRED,
        ErrorCode::Forbidden | ErrorCode::CiNotAllowed | ErrorCode::ForbiddenOrigin => {
            StatusCode::FORBIDDEN
        }
        ErrorCode::NotFound | ErrorCode::NoRunners => StatusCode::NOT_FOUND,
        ErrorCode::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
        ErrorCode::RequestTimeout => StatusCode::REQUEST_TIMEOUT,
        ErrorCode::Conflict | ErrorCode::LeaseLost | ErrorCode::LastAdmin => StatusCode::CONFLICT,
        ErrorCode::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
        ErrorCode::PairingCodeUsed | ErrorCode::PairingCodeExpired => StatusCode::GONE,
        ErrorCode::LeaseLimit | ErrorCode::RateLimited => StatusCode::TOO_MANY_REQUESTS,
        ErrorCode::CapabilityMismatch => StatusCode::UNPROCESSABLE_ENTITY,
        ErrorCode::UpgradeRequired | ErrorCode::CoordinatorTooOld => StatusCode::UPGRADE_REQUIRED,
        ErrorCode::Overloaded | ErrorCode::NotReady => StatusCode::SERVICE_UNAVAILABLE,
        ErrorCode::GithubNotConfigured => StatusCode::CONFLICT,
        ErrorCode::GithubError => StatusCode::BAD_GATEWAY,
        ErrorCode::StateUsed | ErrorCode::StateExpired => StatusCode::GONE,
        ErrorCode::Internal | ErrorCode::Unknown => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// The code for a status that no handler chose (a rejection or a response
/// from the HTTP layer itself).
pub fn code_of(status: StatusCode) -> ErrorCode {
    match status {
        StatusCode::UNAUTHORIZED => ErrorCode::Unauthorized,
        StatusCode::FORBIDDEN => ErrorCode::Forbidden,
        StatusCode::NOT_FOUND => ErrorCode::NotFound,
        StatusCode::METHOD_NOT_ALLOWED => ErrorCode::MethodNotAllowed,
        StatusCode::REQUEST_TIMEOUT => ErrorCode::RequestTimeout,
        StatusCode::CONFLICT => ErrorCode::Conflict,
        StatusCode::PAYLOAD_TOO_LARGE | StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE => {
            ErrorCode::PayloadTooLarge
        }
        StatusCode::SERVICE_UNAVAILABLE => ErrorCode::Overloaded,
        s if s.is_client_error() => ErrorCode::BadRequest,
        _ => ErrorCode::Internal,
    }
}

pub fn error_response(code: ErrorCode, message: String) -> Response {
    let body = ErrorBody {
        error: ErrorDetail { code, message },
    };
    let mut response = (status_of(code), axum::Json(body)).into_response();
    let headers = response.headers_mut();
    match code {
        // The pairing limit sets its own wait over this one.
        ErrorCode::Overloaded | ErrorCode::RateLimited => {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECONDS));
        }
        // The rest of the body may still be on its way: start afresh.
        ErrorCode::RequestTimeout => {
            headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        _ => {}
    }
    response
}

/// `503 OVERLOADED` with `Retry-After`.
pub fn overloaded(message: &str) -> Error {
    Error::api(
        ErrorCode::Overloaded,
        format!("{message}; retry after {RETRY_AFTER_SECONDS} s"),
    )
}

impl IntoResponse for Error {
    fn into_response(self) -> Response {
        match self {
            Error::Api { code, message } => error_response(code, message),
            // Every database connection stayed busy for the pool's whole wait.
            Error::Db(sqlx::Error::PoolTimedOut) => {
                tracing::warn!("database pool timed out; answered OVERLOADED");
                overloaded("the database is busy").into_response()
            }
            other => {
                // Logged in full here; the caller learns only that it failed.
                tracing::error!(error = %other, "internal error");
                error_response(
                    ErrorCode::Internal,
                    "internal error; see the coordinator log".into(),
                )
            }
        }
    }
}
