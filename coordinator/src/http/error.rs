//! Errors become `{ "error": { "code", "message" } }` with a status from one table.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use drover_wire::{ErrorBody, ErrorCode, ErrorDetail};

use crate::error::Error;

pub fn status_of(code: ErrorCode) -> StatusCode {
    match code {
        ErrorCode::BadRequest | ErrorCode::InvalidRef | ErrorCode::UnsupportedProtocol => {
            StatusCode::BAD_REQUEST
        }
        ErrorCode::Unauthorized => StatusCode::UNAUTHORIZED,
        ErrorCode::BudgetExceeded => StatusCode::PAYMENT_REQUIRED,
        ErrorCode::Forbidden => StatusCode::FORBIDDEN,
        ErrorCode::NotFound | ErrorCode::NoRunners => StatusCode::NOT_FOUND,
        ErrorCode::Conflict | ErrorCode::LeaseLost => StatusCode::CONFLICT,
        ErrorCode::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
        ErrorCode::LeaseLimit => StatusCode::TOO_MANY_REQUESTS,
        ErrorCode::CapabilityMismatch => StatusCode::UNPROCESSABLE_ENTITY,
        ErrorCode::Internal | ErrorCode::Unknown => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

pub fn error_response(code: ErrorCode, message: String) -> Response {
    let body = ErrorBody {
        error: ErrorDetail { code, message },
    };
    (status_of(code), axum::Json(body)).into_response()
}

impl IntoResponse for Error {
    fn into_response(self) -> Response {
        match self {
            Error::Api { code, message } => error_response(code, message),
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
